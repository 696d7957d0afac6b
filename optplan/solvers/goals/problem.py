"""The facts every goal planner and the goal validator read (issue 15): the named pending gangs as the
placement family sees them, the running pods the Repack rules let move, and the HyperNodes to free.

This family composes the two others and re-states none of their rules: which pods may move, the budgets,
PDBs and the disruption of moving them are Repack's (``RepackProblem``); which pods a gang needs, where
its network topology lets it go, its queue's quota and the static predicates are placement's (``Context``,
``pending``), and the room is the oracle's (``Capacity``).

Shape of a plan (the validator's rule, ``validate``): running pods move off some nodes ("sources") onto
others ("receivers"); no node is both, so the moves can run in any order (as the controller evicts them).
A move is needed: its source hosts a pod of an admitted gang's forecast, or lies in a freed HyperNode.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from functools import cached_property
from typing import Protocol

from optplan.models.devices import WHOLE_GPU
from optplan.models.goals import CAPACITY, QUOTA, TOPOLOGY, GoalPlan
from optplan.models.placement import BinpackWeights
from optplan.models.queues import VCJob
from optplan.models.repack import DIMENSIONS, PodMove, RepackRun, SolverRecord, Weights
from optplan.models.results import Disruption
from optplan.models.schedconf import SchedulerConf
from optplan.models.snapshot import Pod, Resources, Snapshot
from optplan.solvers.core.oracle import Capacity, Predicates
from optplan.solvers.core.planner import Planner
from optplan.solvers.placement.context import Context
from optplan.solvers.placement.jobs import Region
from optplan.solvers.placement.pending import FRAGMENTATION, PendingGang, minimum_pods, pending_gangs
from optplan.solvers.placement.queueorder import QueueState
from optplan.solvers.repack.rules import RepackProblem


class Goals(Protocol):
    """What ``resolve.resolve_goals`` returns (read only through these fields)."""

    @property
    def jobs(self) -> tuple[VCJob, ...]: ...
    @property
    def free_tier(self) -> int | None: ...
    @property
    def free_count(self) -> int: ...
    @property
    def free_required(self) -> bool: ...
    @property
    def hyper_nodes(self) -> tuple[str, ...]: ...


@dataclass(frozen=True)
class GangPod:
    """One pod of a gang's minimum: its task, replica index and the pod Volcano's job controller makes."""

    task: str
    index: int
    pod: Pod


@dataclass
class Gang:
    """A named pending gang: the fewest pods that make it ready (``pending.minimum_pods``) and where it may go."""

    job: VCJob
    priority: int
    order: int
    """Its place in Volcano's job order among the named gangs (``Context.jobs``)."""
    pods: list[GangPod]
    regions: list[Region]
    """Where its pods may go (``jobs.job_regions``): HyperNodes of its hard tier, or the whole cluster."""
    requests: Resources
    """Its pods' requests, summed."""
    verdict: str
    """``pending``'s verdict on it alone before any move: fits | fragmentation | quota | capacity."""
    why: str
    cause: str | None
    """Proven before planning: it cannot be admitted whatever moves (CAPACITY, QUOTA or TOPOLOGY), else None."""

    @property
    def key(self) -> str:
        return self.job.key

    @property
    def queue(self) -> str:
        return self.job.queue

    def card_request(self, resource: str) -> int:
        return self.requests.get(resource, 0)


@dataclass
class GoalResult:
    """What a goal planner returns: its plan, how it was found and the plan's disruption (Repack's rules)."""

    plan: GoalPlan
    record: SolverRecord
    disruption: Disruption
    stats: dict[str, int] = field(default_factory=dict)

    def with_record(self, record: SolverRecord) -> GoalResult:
        return replace(self, record=record)


Score = tuple[tuple[int, ...], int, Fraction]
"""A plan's rank, compared as a tuple (greater is better): gangs admitted per priority level (highest
level first), HyperNodes freed (at most the goal's count), and the weighted disruption, negated."""


GoalPlanner = Planner["GoalProblem", GoalResult]
"""A goal planner: ``core.planner.Planner`` on a ``GoalProblem``."""


class GoalProblem:
    """A snapshot, a RepackRun with goals and the resolved goals, as facts for the planners."""

    def __init__(self, snapshot: Snapshot, run: RepackRun, goals: Goals, weights: Weights | None = None,
                 scheduler: SchedulerConf | None = None, judge_all: bool = True) -> None:
        """``scheduler``: the vc-scheduler configuration the gangs' placements follow (its binpack weights;
        default seed 002's). ``judge_all=False``: ``pending`` holds only the named gangs' verdicts (the same
        plan; the status then counts only them as pending by fragmentation)."""
        self.snapshot = snapshot
        self.run = run
        self.weights = weights or Weights()
        self.repack = RepackProblem(snapshot, run, self.weights)
        """Repack's rules: GPU shares on nodes that list their devices are pods that move (``shares_move``), each
        to a device the plan names (``PodMove.to_devices``)."""
        self.resource = run.spec.resource
        self.free_tier = goals.free_tier
        self.free_count = goals.free_count
        self.free_required = goals.free_required
        self.hyper_node_names = tuple(goals.hyper_nodes)
        conf = scheduler or SchedulerConf()
        self.ctx = Context.build(snapshot, list(goals.jobs), conf.binpack_or(BinpackWeights()),
                                 hyper_weights=conf.hyper_node_binpack)
        self.pending = pending_gangs(snapshot, self.resource, scheduler=conf,
                                     only=None if judge_all else {j.key for j in goals.jobs})
        """Every gang of R pending in the snapshot with ``pending``'s verdict (named or not; with
        ``judge_all=False`` the named ones only), by key."""
        self.gangs = self._gangs(goals.jobs)

    # ---- the gangs ------------------------------------------------------------------------------------

    def _gangs(self, jobs: Sequence[VCJob]) -> list[Gang]:
        verdicts: dict[str, PendingGang] = {g.key: g for g in self.pending}
        order = {j.key: i for i, j in enumerate(self.ctx.jobs)}
        out = []
        for job in jobs:
            if job.key not in order:  # the minimum exceeds the cluster (``clip_to_cluster``)
                why = self.ctx.unfit.get(job.key, "its minimum exceeds the cluster's capacity")
                out.append(Gang(job, 0, len(order), [], [], {}, "capacity", why, CAPACITY))
                continue
            j = self.ctx.jobs[order[job.key]]
            pods = [GangPod(t, i, self.ctx.pods[j.key][t][i]) for t, i in minimum_pods(self.ctx, j, self.resource)]
            req: dict[str, int] = {}
            for gp in pods:
                for r, v in gp.pod.requests.items():
                    req[r] = req.get(r, 0) + v
            pg = verdicts.get(j.key)
            verdict, why = (pg.verdict, pg.reason) if pg is not None else (FRAGMENTATION, "")
            if verdict == "capacity" and self.repack.shares_move and pg is not None and self._short_by_shares(pg):
                verdict, why = FRAGMENTATION, f"{why}; GPU shares may move to free whole devices"
            cause = {"capacity": CAPACITY, "quota": QUOTA}.get(verdict)
            if cause == CAPACITY and j.network_topology is not None and j.network_topology.mode == "hard":
                cause = TOPOLOGY if self.snapshot.hyper_nodes else CAPACITY
            out.append(Gang(j, self.ctx.priority[j.key], order[j.key], pods, self.ctx.regions[j.key], req,
                            verdict, why, cause))
        return sorted(out, key=lambda g: (-g.priority, g.order, g.key))

    def _short_by_shares(self, pg: PendingGang) -> bool:
        """``pending`` proved the gang short of R by the whole cards free now (untouched devices), but GPU
        shares may move: the proof stands only when the free milli-GPU in total (running shares taking their
        part of a device, whole cards their cards) is short too. False for the other proofs (an empty cluster
        would not hold it either)."""
        cap = self.ctx.capacity
        whole = total = 0
        for n, node in sorted(self.snapshot.nodes.items()):
            if node.unschedulable:
                continue
            free = cap.free[n].get(self.resource, 0)
            whole += max(free, 0)
            if n in cap.gpu_free:
                free = min(cap.whole_total[n], sum(max(f, 0) for f in cap.gpu_free[n]))
            total += max(free, 0)
        return whole < pg.request <= total

    def uses_r(self, pod: Pod, node: str) -> bool:
        """The pod takes R on the node (``takes_r``)."""
        return takes_r(self.snapshot, pod, node, self.resource)

    def queue_state(self) -> QueueState:
        """A fresh copy of the queues' accounting: ``fit_reason(queue, requests)`` and ``add``."""
        return QueueState(self.snapshot, self.ctx.accounts)

    # ---- the pods that may move -------------------------------------------------------------------------

    @cached_property
    def predicates(self) -> Predicates:
        return self.ctx.predicates

    def capacity(self) -> Capacity:
        """The snapshot's room, a fresh copy to change."""
        return self.ctx.capacity.copy()

    @cached_property
    def movable(self) -> dict[str, list[Pod]]:
        """Node -> its R pods the Repack rules let move (node in scope, ``pod_block`` none), largest first."""
        rp = self.repack
        return {n: ms for n, pods in rp.r_pods.items() if rp.node_in_scope(n)
                and (ms := [p for p in pods if rp.pod_block(p) is None])}

    @cached_property
    def pinned(self) -> dict[str, list[Pod]]:
        """Node -> its R pods that may not move (any node holding R pods)."""
        movable = {p.key for ps in self.movable.values() for p in ps}
        return {n: ps for n, pods in self.repack.r_pods.items() if (ps := [p for p in pods if p.key not in movable])}

    def destinations(self, pod: Pod) -> frozenset[str] | None:
        """Where a pod of a hard-topology PodGroup may go without its group leaving every HyperNode its tier
        allows: the nodes of the lowest such HyperNode that encloses the group now; None: anywhere."""
        gk = pod.group_key
        rp = self.repack
        if gk is None or gk not in rp.hard_topology:
            return None
        topo = self.snapshot.topology
        found = topo.enclosing(set(rp.group_nodes(gk)), rp.hard_topology[gk])
        return topo.members[found[0]] if found else frozenset()

    # ---- HyperNodes to free -----------------------------------------------------------------------------

    @cached_property
    def hyper_nodes(self) -> dict[str, frozenset[str]]:
        """The goal's tier's HyperNodes -> their nodes."""
        members = self.snapshot.topology.members
        return {h: members.get(h, frozenset()) for h in self.hyper_node_names}

    def holds_r(self, node: str) -> bool:
        return bool(self.repack.r_pods.get(node))

    def freeable(self, h: str) -> bool:
        """No pod that may not move holds R on any of its nodes."""
        return not any(self.pinned.get(n) for n in self.hyper_nodes[h])

    def free_now(self, h: str) -> bool:
        return not any(self.holds_r(n) for n in self.hyper_nodes[h])

    # ---- a plan's after-state ---------------------------------------------------------------------------

    def after(self, moves: Sequence[PodMove]) -> Snapshot:
        """The snapshot with the moved pods on their new nodes."""
        return moved(self.snapshot, moves)

    def forecast_nodes(self, plan: GoalPlan, *, requesting_r: bool = False) -> set[str]:
        """The nodes the named admitted gangs' forecast binds pods to (only those of pods requesting R, with
        ``requesting_r``: a binding naming no replica of its gang is then left out; the validator reports it)."""
        named = {g.key for g in self.gangs}
        out: set[str] = set()
        for a in plan.admitted():
            if a.key not in named:
                continue
            pods = self.ctx.pods.get(a.key, {})
            for b in a.bindings:
                replica = pods[b.task][b.index] if b.task in pods and 0 <= b.index < len(pods[b.task]) else None
                if not requesting_r or (replica is not None and self.uses_r(replica, b.node)):
                    out.add(b.node)
        return out

    # ---- ranking ----------------------------------------------------------------------------------------

    @cached_property
    def levels(self) -> tuple[int, ...]:
        """The gangs' distinct priorities, highest first."""
        return tuple(sorted({g.priority for g in self.gangs}, reverse=True))

    def cost(self, d: Disruption) -> Fraction:
        """The weighted disruption, exact: each weight read as a decimal, cards in whole units."""
        w = self.weights.as_tuple()
        return sum((Fraction(str(wi)) * (Fraction(v, 1000) if dim.cards else v)
                    for wi, v, dim in zip(w, d.as_tuple(), DIMENSIONS, strict=True)), Fraction(0))

    def score(self, plan: GoalPlan, d: Disruption) -> Score:
        prio = {g.key: g.priority for g in self.gangs}
        admitted = [prio.get(a.key, 0) for a in plan.admissions if a.admitted]
        cap = self.free_count if self.free_count else 0
        return (tuple(admitted.count(level) for level in self.levels), min(len(plan.freed_hyper_nodes), cap),
                -self.cost(d))


def moved(snapshot: Snapshot, moves: Sequence[PodMove]) -> Snapshot:
    """``snapshot`` with the moved pods on their new nodes (itself when nothing moves); a moved GPU share sits
    on the devices its move names (``PodMove.to_devices``)."""
    dest = {m.pod: m for m in moves}
    if not dest:
        return snapshot
    fields = {name: getattr(snapshot, name) for name in Snapshot.model_fields}
    pods = {k: (_moved_pod(p, dest[k]) if k in dest else p) for k, p in snapshot.pods.items()}
    return Snapshot(**{**fields, "pods": pods})


def _moved_pod(pod: Pod, move: PodMove) -> Pod:
    update: dict[str, object] = {"node_name": move.to_node}
    if move.to_devices is not None and pod.gpu_share is not None:
        update["gpu_share"] = pod.gpu_share.model_copy(update={"devices": tuple(move.to_devices)})
    return pod.model_copy(update=update)


def takes_r(snapshot: Snapshot, pod: Pod, node: str, resource: str) -> bool:
    """The pod takes ``resource`` on the node: it requests it, or, it being ``nvidia.com/gpu``, the pod holds (or
    asks for) a GPU share on a node that lists its devices (a node holding one is not free of GPUs)."""
    return pod.request(resource) > 0 or (
        resource == WHOLE_GPU and pod.gpu_share is not None and bool(snapshot.nodes[node].devices))


def r_nodes(snapshot: Snapshot, resource: str) -> set[str]:
    """Nodes holding an occupying pod that takes ``resource`` (``takes_r``)."""
    return {n for n, ps in snapshot.pods_by_node.items() if any(p.occupying and takes_r(snapshot, p, n, resource)
                                                                for p in ps)}
