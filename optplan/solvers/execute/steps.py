"""The two calls an Execute run needs once its plan is being carried out (seed 000):

- ``nominate``: an evicted pod's replacement exists; which node goes into its
  ``status.nominatedNodeName``? The planned node when the replacement still fits there on the live
  state (every predicate, every resource, the pod count, network topology), otherwise the best other
  node that keeps the plan's goal (not a node the plan frees, not a provider that is still entirely
  free of the target resource, not a node a run with goals makes room on: ``plan.goals.reservedNodes``),
  otherwise none. Nominated-but-unbound pods hold capacity on their
  nominated node, as the scheduler counts them.
- ``device_pin``: a share moved to a planned device (the move's ``toDevices``): the annotations that ask the
  device-share plugin for that device, written on the replacement before its nomination. Volcano v1.15
  honours no device pin (its vGPU plugin picks a device by its own policy); v1.16 on honours
  ``volcano.sh/vgpu-use-gpuuuid``, HAMi ``nvidia.com/use-gpuuuid``: both are written (each scheduler reads
  only its own), with the device's type (``nvidia.com/use-gputype``, when the pod names no type), and only
  while the planned node is the one nominated and the device still takes the share (else the type alone).
- ``verify``: after execution, measure ``status.result`` on the snapshot, find each victim's
  replacement through its owner and fill ``relocations[].placement.actualNodeName`` (and
  ``actualDevice`` for a share, from the plugin's annotation), and decide the final condition. A
  replacement on its planned node but another device (or one the plugin did not report) landed elsewhere:
  the mismatch is reported, as for a node.

Replacement matching (``verify``), in order:
1. ``placement.replacementPodName`` when the controller recorded it;
2. the victim's own name reused by its controller (a VCJob recreates ``<job>-<task>-<index>``, a
   StatefulSet its ordinal): the pod of that name is the replacement when its UID differs from the
   recorded ``victimPodUID``, or, without a UID, when the eviction is recorded as done or the pod is
   not on the node it was evicted from;
3. a ModelServing ServingGroup recreated under a new PodGroup name: a pod of the same ModelServing
   (label ``modelserving.volcano.sh/name`` or its PodGroup's owner) whose name is the victim's name with
   the old group name replaced by its own group's name; with several, the newest (creationTimestamp,
   then name). The new group's name goes into ``replacementPodGroupName``.
A victim with no replacement found yet, or whose replacement is not bound, keeps the run incomplete.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from optplan.models.devices import GPU_NOUSE_TYPE, GPU_USE_TYPE, HAMI_USE_UUID, VGPU_USE_UUID
from optplan.models.execute import (
    ExecuteStatus,
    ExecutionResult,
    Nomination,
    PlacementState,
    PlannedGroup,
    PlannedPod,
    Relocation,
    Verification,
)
from optplan.models.quantity import format_milli, to_milli
from optplan.models.repack import Condition, RepackRun
from optplan.models.snapshot import Node, Pod, Snapshot
from optplan.solvers.binpack.frag import fragmentation, round_half_up
from optplan.solvers.core import gpushare
from optplan.solvers.core.oracle import Capacity, Predicates, gpu_ask
from optplan.solvers.repack.rules import RepackProblem

log = logging.getLogger(__name__)

MS_NAME_LABEL = "modelserving.volcano.sh/name"
MS_GROUP_LABEL = "modelserving.volcano.sh/group-name"
EVICTED_PHASES = frozenset({"Succeeded", "Evicted", "Completed", "Done"})

COMPLETED = "ExecutionCompleted"
ALTERNATIVE = "ExecutionCompletedWithAlternativePlacement"
GOAL_MISSED = "ExecutionGoalNotReached"
PENDING = "ReplacementsPending"


# ---- nominate --------------------------------------------------------------------------------------

def nominate(snapshot: Snapshot, run: RepackRun, status: ExecuteStatus, replacement: str,
             planned_node: str | None) -> Nomination:
    """The node for the replacement pod's ``status.nominatedNodeName`` (see the module docstring).

    ``replacement`` is the replacement pod's ``namespace/name`` in ``snapshot``; ``planned_node`` the
    relocation's ``plannedNodeName``. Raises KeyError for a pod not in the snapshot (the API layer turns
    that into an input error)."""
    pod = snapshot.pods[replacement]
    if pod.occupying:
        return Nomination(node_name=None, planned_node_name=planned_node, reason=(
            f"{replacement} is already bound to {pod.node_name}; nothing to nominate"))
    problem = RepackProblem(snapshot, run)
    resource = problem.resource
    cap = _capacity(snapshot, pod)
    predicates = Predicates(snapshot)
    freed = set(status.plan.freed_nodes)
    reserved = set(status.plan.goals.reserved_nodes) if status.plan.goals is not None else set()
    group = pod.group_key
    group_nodes = sorted(set(problem.group_nodes(group)) | _nominated_nodes(snapshot, group, pod)) if group else []

    def reason_on(node_name: str) -> str | None:
        if node_name not in snapshot.nodes:
            return "not in the snapshot"
        why = predicates.reason(pod, node_name) or cap.fit_reason(pod, node_name)
        if why is not None:
            return why
        if group is not None and group in problem.hard_topology and not problem.hard_topology_holds(
                group, [*group_nodes, node_name]):
            return f"outside every HyperNode of tier <= {problem.hard_topology[group]} holding PodGroup {group}"
        return None

    def undoes_goal(node_name: str) -> str | None:
        if node_name in freed:
            return "the plan frees it"
        if node_name in reserved:
            return "the plan makes room there for a pending gang (or frees its HyperNode)"
        if snapshot.nodes[node_name].provides(resource) and node_name in problem.idle_providers \
                and pod.request(resource) > 0:
            return f"it is entirely free of {resource}"
        return None

    planned_why = None
    if planned_node is not None:
        planned_why = reason_on(planned_node) or (undoes_goal(planned_node) if planned_node in snapshot.nodes
                                                  else None)
    feasible = [n for n in snapshot.nodes if reason_on(n) is None and undoes_goal(n) is None]
    if planned_node is not None and planned_why is None:
        return Nomination(node_name=planned_node, planned_node_name=planned_node, planned=True,
                          reason=f"planned node {planned_node} still fits {replacement}",
                          feasible_node_count=len(feasible))
    if not feasible:
        why = f"planned node {planned_node}: {planned_why}; " if planned_node is not None else ""
        return Nomination(node_name=None, planned_node_name=planned_node, reason=(
            f"{why}no other node takes {replacement} without undoing the plan; the scheduler decides"))
    topo = snapshot.topology
    soft = group is not None and group in problem.soft_topology and bool(group_nodes)
    base = topo.lowest_tier(group_nodes) if soft else 0

    def rank(n: str) -> tuple[int, int, int, str]:
        widening = max(topo.lowest_tier([*group_nodes, n]) - base, 0) if soft else 0
        left = cap.free[n].get(resource, 0) - pod.request(resource)
        other = sum(v for r, v in cap.free[n].items() if r not in (resource, "pods"))
        return (widening, left, other, n)

    best = min(feasible, key=rank)
    lead = f"planned node {planned_node} no longer fits ({planned_why}); " if planned_node is not None \
        else "no planned node; "
    return Nomination(node_name=best, planned_node_name=planned_node, reason=(
        f"{lead}{best} is the most allocated feasible node outside the nodes the plan frees"),
        feasible_node_count=len(feasible))


def _capacity(snapshot: Snapshot, pod: Pod) -> Capacity:
    """The free room, with nominated pods (other than ``pod``) holding capacity where they were nominated."""
    cap = Capacity(snapshot)
    for other in snapshot.pods.values():
        n = other.nominated_node_name
        if other.key != pod.key and not other.occupying and other.phase not in ("Succeeded", "Failed") \
                and n is not None and n in cap.free:
            cap.add(other, n)
    return cap


# ---- devices ---------------------------------------------------------------------------------------

def device_name(node: Node, index: int) -> str:
    """How the journal names a device of ``node``: its UUID, else its index."""
    d = next((d for d in node.devices if d.index == index), None)
    return d.uuid if d is not None and d.uuid else str(index)


def planned_device(snapshot: Snapshot, node_name: str, devices: Sequence[int] | None) -> str | None:
    """A move's ``toDevices`` as the journal names them (comma-separated; an index the node does not know
    as is); None when the move names none."""
    if not devices:
        return None
    node = snapshot.nodes.get(node_name)
    return ",".join(device_name(node, d) if node is not None else str(d) for d in devices)


def actual_device(snapshot: Snapshot, pod: Pod) -> str | None:
    """The device a bound pod's share sits on (its plugin's annotation), as the journal names it; None when
    the pod holds no share, or the plugin has not said."""
    share = pod.gpu_share
    node = snapshot.nodes.get(pod.node_name or "")
    if share is None or node is None or not share.devices:
        return None
    return ",".join(device_name(node, i) for i in share.devices)


def device_pin(snapshot: Snapshot, replacement: str, node_name: str, planned: str | None) -> tuple[dict[str, str], str]:
    """The annotations that ask the device-share plugin for the share's planned device on ``node_name`` (the
    nominated node, which must be the planned one) and a sentence saying what they pin (module docstring);
    ({}, "") when there is nothing to pin (no planned device, a pod without a share)."""
    pod = snapshot.pods[replacement]
    node = snapshot.nodes.get(node_name)
    if planned is None or node is None or pod.gpu_share is None:
        return {}, ""
    device = next((d for d in node.devices if planned in (d.uuid, str(d.index))), None)
    if device is None:
        return {}, f"planned device {planned} is not on {node_name}; no device pinned"
    pin: dict[str, str] = {}
    if device.model and GPU_USE_TYPE not in pod.annotations and GPU_NOUSE_TYPE not in pod.annotations:
        pin[GPU_USE_TYPE] = device.model
    ask = gpu_ask(pod, node)
    takes = False
    if ask.is_share:
        cap = _capacity(snapshot, pod)
        takes = node.devices.index(device) in gpushare.usable(cap.gpu_free[node_name], ask, cap.gpu_memory[node_name],
                                                              cap.slots_for(node_name, pod), cap.gpu_zero[node_name])
    if not device.uuid or not takes:
        why = ("whole cards are not pinned to one device" if not ask.is_share else "it has no UUID" if takes
               else f"it no longer takes a share of {ask.milli} milli-GPU")
        return pin, f"planned device {planned} not pinned ({why})" + (f"; type {device.model} pinned" if pin else "")
    pin[VGPU_USE_UUID] = pin[HAMI_USE_UUID] = device.uuid
    return pin, f"planned device {planned} pinned (honoured by Volcano v1.16 on and HAMi, not by v1.15)"


def _nominated_nodes(snapshot: Snapshot, group: str, pod: Pod) -> set[str]:
    """Nodes nominated for other pending pods of the same PodGroup (they will most likely land there)."""
    out = set()
    for p in snapshot.pods.values():
        if p.group_key == group and p.key != pod.key and not p.occupying and p.nominated_node_name \
                and p.nominated_node_name in snapshot.nodes:
            out.add(p.nominated_node_name)
    return out


# ---- verify ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Victim:
    namespace: str
    name: str
    pod_group: str
    owner_kind: str | None
    owner_name: str | None
    from_node: str | None
    to_node: str | None
    cards: int
    to_devices: tuple[int, ...] | None = None


def verify(after: Snapshot, run: RepackRun, status: ExecuteStatus, *, time_limit: float = 10.0,
           workers: int = 1) -> Verification:
    """``status.result``, the final condition and the completed relocations (module docstring)."""
    resource = run.spec.resource
    victims = _victims(status.plan.moves, after, resource)
    relocations = list(status.relocations) or [
        Relocation(namespace=v.namespace, victim_pod_name=v.name, planned_node_name=v.to_node,
                   planned_device=planned_device(after, v.to_node, v.to_devices) if v.to_node else None)
        for v in victims.values()]
    done: list[Relocation] = []
    moved = 0
    pending: list[str] = []
    alternative: list[str] = []
    for rel in sorted(relocations, key=lambda r: r.key):
        v = victims.get(rel.key) or _Victim(rel.namespace, rel.victim_pod_name, "", None, None, None,
                                           rel.planned_node_name, 0)
        rep, group = _replacement(after, rel, v)
        placement = rel.placement or PlacementState()
        if rep is None:
            pending.append(f"{rel.key}: no replacement pod found")
            done.append(rel)
            continue
        updates: dict[str, object] = {"replacement_pod_name": rep.name}
        if rep.occupying:
            updates["actual_node_name"] = rep.node_name
            updates["phase"] = "Bound"
            moved += rep.request(resource) or v.cards
            target = placement.selected_node_name or rel.planned_node_name
            device = actual_device(after, rep)
            if device is not None:
                updates["actual_device"] = device
            if rel.planned_node_name is not None and rep.node_name != rel.planned_node_name:
                alternative.append(f"{rel.key} -> {rep.node_name} (planned {rel.planned_node_name}"
                                   + (f", nominated {target}" if target != rel.planned_node_name else "") + ")")
            elif rel.planned_device is not None and device != rel.planned_device:
                alternative.append(f"{rel.key} -> {rep.node_name} device {device or '(not reported)'} "
                                   f"(planned device {rel.planned_device})")
        else:
            pending.append(f"{rel.key}: replacement {rep.name} is not bound yet")
        rel_updates: dict[str, object] = {"placement": placement.model_copy(update=updates)}
        if group is not None and group != v.pod_group:
            rel_updates["replacement_pod_group_name"] = group
        done.append(rel.model_copy(update=rel_updates))
    still: dict[str, tuple[str, ...]] = {}
    free_now = []
    admitted = _admitted_jobs(status)
    taken = []  # emptied, and now holding only pods of gangs the plan admits: the room was for them
    for node in status.plan.freed_nodes:
        holding = [p for p in after.pods_by_node.get(node, ()) if p.request(resource) > 0]
        holders = tuple(p.key for p in holding if _job_of(p, after) not in admitted)
        if node not in after.nodes or holders:
            still[node] = holders or ("<node is gone>",)
        elif holding:
            taken.append(node)
        else:
            free_now.append(node)
    frag = fragmentation(after, resource, time_limit=time_limit, workers=workers)
    verified = not pending
    result = ExecutionResult(frag_after_percent=round_half_up(frag.percent()), freed_node_count=len(free_now),
                             moved_card_count=format_milli(moved), metrics_verified=verified)
    # A plan with goals may free no node (its moves make room for a gang): say what was done then.
    done_what = (f"all {len(free_now)} planned node(s) freed" if status.plan.freed_nodes
                 else f"all {len(done)} relocation(s) finished (the plan frees no node)")
    if taken:
        done_what = (f"every planned node freed: {len(free_now)} still free, {len(taken)} taken by the admitted "
                     f"gang(s) ({', '.join(taken[:5])})")
    if pending:
        cond = Condition(type="Complete", status="False", reason=PENDING,
                         message=f"{len(pending)} relocation(s) not finished: " + "; ".join(pending[:5]))
        phase = "Running"
    elif still:
        cond = Condition(type="Complete", status="True", reason=GOAL_MISSED, message=(
            f"{len(free_now)} of {len(status.plan.freed_nodes)} planned node(s) freed; still holding {resource}: "
            + "; ".join(f"{n} ({', '.join(h[:3])})" for n, h in sorted(still.items())[:5])))
        phase = "Failed"
    elif alternative:
        cond = Condition(type="Complete", status="True", reason=ALTERNATIVE, message=(
            f"{done_what}; {len(alternative)} replacement(s) landed elsewhere: " + "; ".join(alternative[:5])))
        phase = "Succeeded"
    else:
        cond = Condition(type="Complete", status="True", reason=COMPLETED, message=(
            f"{done_what}; every replacement landed on its planned node"))
        phase = "Succeeded"
    return Verification(phase=phase, result=result, conditions=(cond,), relocations=tuple(done),
                        freed_nodes=tuple(sorted(free_now)), still_occupied=dict(sorted(still.items())))


def _admitted_jobs(status: ExecuteStatus) -> set[tuple[str, str]]:
    """(namespace, VCJob name) of every gang the plan admits (a run with admit goals)."""
    goals = status.plan.goals
    return {(a.namespace, a.name) for a in goals.admissions if a.admitted} if goals is not None else set()


def _job_of(pod: Pod, snapshot: Snapshot) -> tuple[str, str] | None:
    """(namespace, VCJob name) of a pod Volcano's job controller made: its PodGroup's controller owner when
    that is a Job, else its ``volcano.sh/job-name`` label."""
    pg = snapshot.pod_groups.get(pod.group_key) if pod.group_key is not None else None
    owner = pg.owner if pg is not None else None
    if owner is not None and owner.kind == "Job":
        return pod.namespace, owner.name
    label = pod.labels.get("volcano.sh/job-name")
    return (pod.namespace, label) if label else None


def find_replacement(snapshot: Snapshot, run: RepackRun, status: ExecuteStatus,
                     rel: Relocation) -> tuple[Pod | None, str | None]:
    """The replacement pod of one relocation's victim and its PodGroup name, matched as ``verify`` matches
    them (module docstring); (None, None) while there is none."""
    victims = _victims(status.plan.moves, snapshot, run.spec.resource)
    v = victims.get(rel.key) or _Victim(rel.namespace, rel.victim_pod_name, "", None, None, None,
                                        rel.planned_node_name, 0)
    return _replacement(snapshot, rel, v)


def _victims(moves: tuple[PlannedGroup, ...], after: Snapshot, resource: str) -> dict[str, _Victim]:
    out: dict[str, _Victim] = {}
    for g in moves:
        for p in g.pods:
            out[f"{g.namespace}/{p.name}"] = _Victim(
                g.namespace, p.name, g.pod_group_name, g.owner.kind if g.owner else None,
                g.owner.name if g.owner else None, p.from_node, p.to_node, _cards(p), p.to_devices)
    return out


def _cards(p: PlannedPod) -> int:
    try:
        return to_milli(p.cards) if p.cards is not None else 0
    except ValueError:
        return 0


def _replacement(after: Snapshot, rel: Relocation, v: _Victim) -> tuple[Pod | None, str | None]:
    """The replacement pod of a victim and its PodGroup name (see the module docstring)."""
    ns = rel.namespace
    recorded = rel.placement.replacement_pod_name if rel.placement else None
    if recorded:
        pod = after.pods.get(f"{ns}/{recorded}")
        if pod is not None:
            return pod, pod.group_name
    same = after.pods.get(rel.key)
    if same is not None and _is_new(same, rel, v):
        return same, same.group_name
    if v.owner_kind == "ModelServing" or _serving_name(after, same) is not None:
        return _serving_replacement(after, rel, v)
    return None, None


def _is_new(pod: Pod, rel: Relocation, v: _Victim) -> bool:
    if rel.victim_pod_uid:
        return pod.uid != rel.victim_pod_uid
    evicted = rel.eviction is not None and rel.eviction.phase in EVICTED_PHASES
    return evicted or not pod.occupying or (v.from_node is not None and pod.node_name != v.from_node)


def _serving_name(after: Snapshot, pod: Pod | None) -> str | None:
    if pod is None:
        return None
    if MS_NAME_LABEL in pod.labels:
        return pod.labels[MS_NAME_LABEL]
    pg = after.pod_groups.get(pod.group_key or "")
    owner = pg.owner if pg is not None else None
    return owner.name if owner is not None and owner.kind == "ModelServing" else None


def _serving_replacement(after: Snapshot, rel: Relocation, v: _Victim) -> tuple[Pod | None, str | None]:
    serving = v.owner_name if v.owner_kind == "ModelServing" else _serving_name(after, after.pods.get(rel.key))
    old = rel.replacement_pod_group_name or v.pod_group
    if serving is None or not old or not v.name.startswith(old):
        return None, None
    suffix = v.name[len(old):]
    wanted = rel.replacement_pod_group_name
    found: list[tuple[str, str, Pod, str]] = []
    by_group: dict[str, list[Pod]] = defaultdict(list)
    for p in after.pods.values():
        if p.namespace == rel.namespace and _serving_name(after, p) == serving:
            g = p.labels.get(MS_GROUP_LABEL) or p.group_name or ""
            by_group[g].append(p)
    for g, pods in by_group.items():
        if g == v.pod_group or (wanted and g != wanted):
            continue
        for p in pods:
            if p.name == g + suffix:
                found.append((p.creation_timestamp, p.name, p, g))
    if not found:
        return None, None
    found.sort(key=lambda t: (t[0], t[1]))
    _, _, pod, group = found[-1]
    return pod, group
