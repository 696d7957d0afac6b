"""The independent validator of a placement plan (``placement_violations``, ``validate_placement``): it
replays the plan as Volcano's actions would (the jobs placed without evictions first, then each evicting
job's victims and pods, in job order) and re-checks every rule: static predicates and room (the
oracle), queues, gangs, topology and victims. It trusts none of the planners' decisions and imports
none of their modules (a contract in pyproject.toml): it shares only the oracle, the queue accounting,
the victim rules and the pod facts (``jobs``) with them. Also ``check_inputs``: input Volcano cannot
schedule with."""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from optplan.errors import InputError, PlanInvalidError
from optplan.models.limits import SYSTEM_PRIORITY_CLASSES
from optplan.models.placement import CYCLE_STEPS, Binding, JobPlacement, PlacementPlan, SafePreemption, Victim
from optplan.models.quantity import format_milli
from optplan.models.queues import ROOT as ROOT_QUEUE
from optplan.models.queues import QueueTree, VCJob
from optplan.models.schedconf import SEED_ACTIONS
from optplan.models.snapshot import Pod, Resources, Snapshot
from optplan.solvers.core.oracle import Capacity, Predicates
from optplan.solvers.placement.jobs import (
    gang_order,
    gang_shortfall,
    held_indices,
    held_pods,
    job_needs,
    job_pods,
    job_priority,
    shield,
)
from optplan.solvers.placement.partitions import NO_VICTIMS, partition_violations, partitioned
from optplan.solvers.placement.safety import OFF, approval_reason, evict_blocks, graded_blocks, pdb_over, pdb_refused
from optplan.solvers.placement.tiers import node_victims, preemptee_refused
from optplan.solvers.placement.victims import (
    Candidate,
    Catalogue,
    action_refused,
    dims,
    never_tasks,
    reclaim_order,
    reclaimer_blocked,
    statically_allowed,
)
from optplan.solvers.quota.queues import QueueAccount, account_queues, unheld_deserved

log = logging.getLogger(__name__)

def placement_violations(snap: Snapshot, jobs: Sequence[VCJob], plan: PlacementPlan, *,
                         safety: SafePreemption = OFF, now: datetime | None = None, tiers: bool = False) -> list[str]:
    """Every rule the plan breaks, as short sentences; empty when valid. Shares only the oracle, the
    queue accounting, the pod facts and safe preemption's rules (``safety``, with the planners' ``now``)
    with the planners. ``tiers``: the victims by Volcano's plugin tiers (``tiers``), else by the joint
    rules (``victims``)."""
    out: list[str] = []
    given = {j.key: j for j in jobs}
    listed = [jp.key for jp in plan.jobs]
    for k, n in Counter(listed).items():
        if n > 1:
            out.append(f"job {k} is listed {n} times")
    for k in sorted(set(given) - set(listed)):
        out.append(f"job {k} is missing from the plan")
    cap = Capacity(snap)
    tree = QueueTree(snap.queues)
    accounts = account_queues(snap, hierarchical=True)
    allocated = {q: dict(a.allocated) for q, a in accounts.items()}
    touched: dict[str, set[str]] = defaultdict(set)  # queue -> resources new pods charged to it
    cat: Catalogue | None = None  # the possible victims, built for the first plan job with victims
    taken: Counter[str] = Counter()  # PodGroup -> pods evicted so far
    evicted: set[str] = set()
    static = Predicates(snap)
    # Volcano's actions: allocate places every job it can, then preempt evicts for the rest, then reclaim
    landed: dict[str, int] = {}  # node -> the last replay position a pod lands there
    unplaced: list[tuple[int, JobPlacement]] = []  # jobs not admitted that keep victims, at their position
    for pos, jp in enumerate(sorted(plan.jobs, key=_action_rank)):
        for b in jp.bindings if jp.admitted else ():
            landed[b.node] = pos
        job = given.get(jp.key)
        if job is None:
            out.append(f"job {jp.key} is not one of the jobs to place")
            continue
        if jp.queue != job.queue:
            out.append(f"job {jp.key}: queue {jp.queue} but the job names {job.queue}")
        if not jp.admitted:
            if jp.victims and jp.step < CYCLE_STEPS:
                out.append(f"job {jp.key} is not admitted but has victims")
            elif jp.victims:  # evicted in a scheduling cycle whose room the next allocate gave to other jobs
                unplaced.append((pos, jp))
                if cat is None:
                    cat = shield(Catalogue.build(snap, datetime.now(UTC), set(tree.queues)), snap, jobs)
                out.extend(_unplaced_victim_violations(snap, job, jp, cat, accounts, taken, evicted, safety))
                _free_victims(snap, jp, cat, tree, cap, allocated)
            if jp.bindings:
                out.append(f"job {jp.key} is not admitted but has bindings")
            if not jp.reason:
                out.append(f"job {jp.key} is not admitted and gives no reason")
            continue
        if job.queue not in tree.queues:
            out.append(f"job {jp.key}: queue {job.queue} does not exist")
            continue
        if not tree.is_leaf(job.queue) or job.queue == ROOT_QUEUE:
            out.append(f"job {jp.key}: queue {job.queue} is not a leaf queue")
        if not tree.is_open(job.queue):
            out.append(f"job {jp.key}: queue {job.queue} is not Open")
        if jp.victims and partitioned(job):
            out.append(f"job {jp.key}: {NO_VICTIMS}")
        if jp.victims:
            if cat is None:  # the time only prices victims
                cat = shield(Catalogue.build(snap, datetime.now(UTC), set(tree.queues)), snap, jobs)
            check = _tier_victim_violations if tiers else _joint_victim_violations
            out.extend(check(snap, job, jp, cat, tree, accounts, allocated, taken, evicted, safety))
            _free_victims(snap, jp, cat, tree, cap, allocated)
        pods = job_pods(job)
        running = held_pods(job, snap)
        placed: Counter[str] = Counter()
        seen: set[tuple[str, int]] = set()
        nodes: set[str] = set()
        for b in jp.bindings:
            where = f"job {jp.key} pod {b.pod_name(job.name)}"
            if b.task not in pods or not 0 <= b.index < len(pods[b.task]):
                out.append(f"{where}: no such task replica")
                continue
            if b.index in running.get(b.task, {}):
                out.append(f"{where}: that replica runs already")
                continue
            if (b.task, b.index) in seen:
                out.append(f"{where} is bound twice")
                continue
            seen.add((b.task, b.index))
            if b.node not in snap.nodes:
                out.append(f"{where}: unknown node {b.node}")
                continue
            pod = pods[b.task][b.index]
            reason = static.reason(pod, b.node) or cap.fit_reason(pod, b.node)
            if reason is not None:
                out.append(f"{where} on {b.node}: {reason}")
            cap.add(pod, b.node)
            placed[b.task] += 1
            nodes.add(b.node)
            for q in (job.queue, *tree.ancestors(job.queue)):
                for r, v in pod.requests.items():
                    allocated[q][r] = allocated[q].get(r, 0) + v
                    touched[q].add(r)
        short = gang_shortfall(job, placed, Counter({t: len(ps) for t, ps in running.items()}))
        if short is not None:
            out.append(f"job {jp.key} is admitted but the gang is not ready: {short}")
        if not jp.bindings:
            out.append(f"job {jp.key} is admitted but places no pod")
        held_at = {p.node_name for ps in running.values() for p in ps.values() if p.occupying and p.node_name}
        out.extend(_topology_violations(jp, job, nodes, snap, frozenset(held_at)))
        if partitioned(job):
            topo = snap.topology
            inside = topo.members.get(jp.hyper_node, frozenset()) if jp.hyper_node else frozenset(snap.nodes)
            bound = {t.name: {b.index: b.node for b in jp.bindings if b.task == t.name} for t in job.tasks}
            at = {t: {i: p.node_name for i, p in ps.items() if p.node_name} for t, ps in running.items()}
            out.extend(partition_violations(snap, job, bound, at, inside))
        for q in (job.queue, *tree.ancestors(job.queue)):  # after each job: evictions may not excuse it later
            real = accounts[q].real_capability
            for r in sorted(touched[q]):
                msg = (f"queue {q}: {r} allocated {format_milli(allocated[q].get(r, 0))} > realCapability "
                       f"{format_milli(real.get(r, 0))} after placement")
                if allocated[q].get(r, 0) > real.get(r, 0) and msg not in out:
                    out.append(msg)
    for turn, waiting in unplaced:
        for vic in waiting.victims:
            if landed.get(vic.node, -1) <= turn:
                out.append(f"job {waiting.key} is not admitted but has victims whose room no job placed after it "
                           f"takes ({vic.namespace}/{vic.name} on {vic.node})")
    out.extend(_safety_violations(snap, given, plan, safety, now or datetime.now(UTC)))
    return out


def _action_rank(jp: JobPlacement) -> tuple[bool, int]:
    """When a job's placement happens in the plan's replay: allocate's first, then the jobs placed after
    evictions by the step the planner took them in (``JobPlacement.step``: the greedy's preempt pass
    before its reclaim pass, as Volcano runs its actions), each group in plan order."""
    return jp.after_evictions or bool(jp.victims), jp.step


def _safety_violations(snap: Snapshot, jobs: Mapping[str, VCJob], plan: PlacementPlan, safety: SafePreemption,
                       now: datetime) -> list[str]:
    """Safe preemption's plan-wide rules (``safety``): PDBs over the plan's victims, the cooldown per queue,
    the approval marks. The static ones (several PDBs, grades) are checked per victim."""
    out: list[str] = []
    victims = [snap.pods[k] for jp in plan.jobs for v in jp.victims if (k := f"{v.namespace}/{v.name}") in snap.pods]
    over = pdb_over(safety, snap, victims)
    if over is not None:
        out.append(over)
    evicting: list[str] = []
    for jp in plan.jobs:
        job = jobs.get(jp.key)
        if job is None:
            continue
        if jp.victims:
            why = evict_blocks(safety, snap, job, now, evicting)
            if why is not None:
                out.append(f"job {jp.key} evicts: {why}")
            evicting.append(jp.queue)
        want = approval_reason(safety, snap, job) if jp.victims else None
        if jp.approval_required != want:
            out.append(f"job {jp.key}: approvalRequired is {jp.approval_required!r}, the approval rule says {want!r}")
    return out



def _free_victims(snap: Snapshot, jp: JobPlacement, cat: Catalogue, tree: QueueTree, cap: Capacity,
                  allocated: dict[str, dict[str, int]]) -> None:
    """The replay after a job's victims go: their room and their queues' allocation freed."""
    for vic in jp.victims:
        p = snap.pods.get(f"{vic.namespace}/{vic.name}")
        c = cat.candidates.get(f"{vic.namespace}/{vic.name}")
        if p is not None and p.node_name is not None and p.occupying:
            cap.remove(p, p.node_name)
            if c is not None:
                for q in (c.queue, *tree.ancestors(c.queue)):
                    for r, x in p.requests.items():
                        allocated[q][r] = allocated[q].get(r, 0) - x


def _unplaced_victim_violations(snap: Snapshot, job: VCJob, jp: JobPlacement, cat: Catalogue,
                                accounts: dict[str, QueueAccount], taken: Counter[str], evicted: set[str],
                                safety: SafePreemption) -> list[str]:
    """The victims of a job the plan does not admit, which its action evicted in an earlier scheduling
    cycle (``JobPlacement.step`` of the greedy's cycles, at least ``CYCLE_STEPS``) while the next cycle's
    allocate gave the room to other jobs: each a running pod of a PodGroup, evicted once, by one action,
    that the action may offer this job (its queue, the job's networkTopology, safe preemption); and a job
    placed after it lands on each victim's node (checked by the caller). Lenient: where the job's pods were
    pipelined is not in the plan, so the per-node tier order is not checked. Updates ``taken`` and ``evicted``."""
    out: list[str] = []
    who = f"job {jp.key}"
    if len({v.reason for v in jp.victims}) > 1:
        out.append(f"{who}: victims of both preempt and reclaim (one action places a job)")
    priority = job_priority(job, snap)
    for v in jp.victims:
        key = f"{v.namespace}/{v.name}"
        where = f"{who} victim {key}"
        c = _victim_candidate(snap, cat, v, where, key in evicted, out)
        if c is None:
            continue
        why = (action_refused(job, v.reason)
               or preemptee_refused(c, v.reason, job.queue, accounts[c.queue].reclaimable)
               or _safety_refused(snap, c, v.reason, priority, safety))
        if why is not None:
            out.append(f"{where} ({v.reason}): {why}")
        evicted.add(c.key)
        taken[c.group] += 1
    return out


def _victim_candidate(snap: Snapshot, cat: Catalogue, v: Victim, where: str, twice: bool,
                      out: list[str]) -> Candidate | None:
    """The catalogue's candidate a victim names, or None with the reason appended to ``out`` (no such pod,
    evicted twice, not a victim); a victim named on another node than its pod's is reported and kept."""
    key = f"{v.namespace}/{v.name}"
    if snap.pods.get(key) is None:
        out.append(f"{where}: no such pod")
        return None
    if twice:
        out.append(f"{where}: evicted twice")
        return None
    c = cat.candidates.get(key)
    if c is None:
        why = cat.protected.get(key) or "not a running pod of a PodGroup in a known queue"
        out.append(f"{where}: may not be a victim ({why})")
        return None
    if v.node != c.node:
        out.append(f"{where}: runs on {c.node}, not {v.node}")
    return c

def _joint_victim_violations(snap: Snapshot, job: VCJob, jp: JobPlacement, cat: Catalogue, tree: QueueTree,
                       accounts: dict[str, QueueAccount], allocated: dict[str, dict[str, int]],
                       taken: Counter[str], evicted: set[str], safety: SafePreemption) -> list[str]:
    """The victims of one job against the rules (``victims``): allowed pods, the action's queue rules,
    the gang of every victim PodGroup over the plan so far, the victims' nodes, and the capacity
    plugin's reclaim rules (``reclaimer_blocked`` per pod, ``reclaim_order`` per victim queue). Updates ``taken``
    and ``evicted``; the caller frees the victims' capacity and allocations."""
    out: list[str] = []
    who = f"job {jp.key}"
    if {b.task for b in jp.bindings} <= never_tasks(snap, job):
        out.append(f"{who}: the PriorityClass of every task it places has preemptionPolicy Never but it evicts pods")
    needs = job_needs(job)
    priority = job_priority(job, snap)
    before = {q: dict(a) for q, a in allocated.items()}
    reasons = {v.reason for v in jp.victims}
    if len(reasons) > 1:
        out.append(f"{who}: victims of both preempt and reclaim (one action places a job)")
    pods = job_pods(job)
    bound = [(b, pods[b.task][b.index]) for b in jp.bindings if b.task in pods and 0 <= b.index < len(pods[b.task])]
    on_node: dict[str, frozenset[str]] = defaultdict(frozenset)  # node -> what the job's pods there request
    for b, p in bound:
        on_node[b.node] |= dims(p.requests)
    if "reclaim" in reasons:
        out.extend(_reclaimer_violations(snap, job, jp, bound, before[job.queue], accounts[job.queue]))
    mine_taken: Counter[str] = Counter()
    reclaimed: dict[str, list[tuple[str, Resources]]] = defaultdict(list)
    """Victim queue -> the pods this job reclaims from it."""
    checked: list[tuple[Victim, Candidate]] = []
    for v in jp.victims:
        key = f"{v.namespace}/{v.name}"
        where = f"{who} victim {key}"
        c = _victim_candidate(snap, cat, v, where, key in evicted, out)
        if c is None:
            continue
        why2 = action_refused(job, v.reason) or statically_allowed(c, v.reason, job.queue, priority,
                                                                   accounts[c.queue].reclaimable, needs, snap=snap,
                                                                   safety=safety)
        if why2 is not None:
            out.append(f"{where} ({v.reason}): {why2}")
        evicted.add(key)
        taken[c.group] += 1
        mine_taken[c.group] += 1
        checked.append((v, c))
        if v.reason == "reclaim":
            reclaimed[c.queue].append((key, c.pod.requests))
    for gk in sorted(mine_taken):
        g = cat.groups[gk]
        if taken[gk] > g.slack and not all(k in evicted for k in g.occupying):
            out.append(f"{who}: takes {taken[gk]} pods of PodGroup {gk} (ready {g.ready}, minMember "
                       f"{g.min_member}) without taking all of it")
    for v, c in checked:  # victims come from the nodes the job's pods are tried on, unless the gang goes whole
        where = f"{who} victim {c.key}"
        if c.node in on_node:
            if v.reason == "reclaim" and not dims(c.pod.requests) & on_node[c.node]:
                out.append(f"{where} (reclaim): requests no resource the job's pods on {c.node} request")
        else:
            group = cat.groups[c.group]
            whole = all(k in evicted for k in group.occupying)
            here = any(cat.candidates[k].node in on_node for k in group.occupying if k in cat.candidates)
            if not (whole and here):
                out.append(f"{where}: on node {c.node}, where the job places no pod (and PodGroup {c.group} is "
                           f"not taken whole from a node it places on)")
    for q in sorted(reclaimed):
        acc = accounts[q]
        order, why = reclaim_order(q, before[q], reclaimed[q], acc.effective_deserved, acc.deserved_listed,
                                   acc.guarantee)
        if order is None:
            out.append(f"{who}: reclaims pods of queue {q} the capacity plugin would not let go in any order "
                       f"({why})")
    return out


def _tier_victim_violations(snap: Snapshot, job: VCJob, jp: JobPlacement, cat: Catalogue, tree: QueueTree,
                       accounts: dict[str, QueueAccount], allocated: dict[str, dict[str, int]],
                       taken: Counter[str], evicted: set[str], safety: SafePreemption) -> list[str]:
    """The victims of one job against the rules (``victims``, ``tiers``): pods that may be victims, of the
    action's queues, on nodes where the job places a pod, each one allowed by Volcano's plugin tiers
    (``tiers.node_victims``) when it goes: the nodes in the order the job's pods land on them, a node's
    victims in victim order, the state as the evictions so far left it. Lenient where Volcano's order is
    random or the plan does not say: the victim is put first among the node's pods (the gang and drf
    plugins see the node's pods in Go map order), and drf's preemptor share is the job's with its first
    pod on the node. Also the capacity plugin's PreemptiveFn per reclaiming pod (``reclaimer_blocked``).
    Updates ``taken`` and ``evicted``; the caller frees the victims' capacity and allocations."""
    out: list[str] = []
    who = f"job {jp.key}"
    if {b.task for b in jp.bindings} <= never_tasks(snap, job):
        out.append(f"{who}: the PriorityClass of every task it places has preemptionPolicy Never but it evicts pods")
    priority = job_priority(job, snap)
    before = {q: dict(a) for q, a in allocated.items()}
    reasons = {v.reason for v in jp.victims}
    if len(reasons) > 1:
        out.append(f"{who}: victims of both preempt and reclaim (one action places a job)")
    pods = job_pods(job)
    bound = [(b, pods[b.task][b.index]) for b in jp.bindings if b.task in pods and 0 <= b.index < len(pods[b.task])]
    if "reclaim" in reasons:
        out.extend(_reclaimer_violations(snap, job, jp, bound, before[job.queue], accounts[job.queue]))
    first: dict[str, int] = {}  # node -> the position of the job's first pod there
    for i, (b, _p) in enumerate(bound):
        first.setdefault(b.node, i)
    held = [p for ps in held_pods(job, snap).values() for p in ps.values() if p.occupying]
    queue_alloc = {q: dict(a) for q, a in allocated.items()}
    total: dict[str, int] = defaultdict(int)
    for node in snap.nodes.values():
        for r, x in node.allocatable.items():
            total[r] += x

    def group_alloc(g: str) -> dict[str, int]:
        a: dict[str, int] = defaultdict(int)
        for k in cat.groups[g].occupying:
            if k not in evicted:
                for r, x in snap.pods[k].requests.items():
                    a[r] += x
        return a

    checked: list[tuple[Victim, Candidate]] = []
    for v in jp.victims:
        key = f"{v.namespace}/{v.name}"
        where = f"{who} victim {key}"
        c = _victim_candidate(snap, cat, v, where, key in evicted or any(key == x.key for _v, x in checked), out)
        if c is None:
            continue
        why2 = (action_refused(job, v.reason)
                or preemptee_refused(c, v.reason, job.queue, accounts[c.queue].reclaimable)
                or _safety_refused(snap, c, v.reason, priority, safety))
        if why2 is not None:
            out.append(f"{where} ({v.reason}): {why2}")
        if c.node not in first:
            out.append(f"{where}: on node {c.node}, where the job places no pod")
        checked.append((v, c))
    for v, c in sorted(checked, key=lambda vc: (first.get(vc[1].node, len(bound)), vc[1].order_key())):
        where = f"{who} victim {c.key}"
        at = first.get(c.node)
        if at is not None:
            mine: dict[str, int] = defaultdict(int)
            for p in [*held, *(p for _b, p in bound[:at + 1])]:
                for r, x in p.requests.items():
                    mine[r] += x
            preemptees = [x for x in cat.by_node.get(c.node, []) if x.key not in evicted and x.key != c.key
                          and preemptee_refused(x, v.reason, job.queue, accounts[x.queue].reclaimable) is None]
            allowed, _tier = node_victims(
                v.reason, [c, *preemptees], preemptor_priority=priority,
                ready=lambda g: cat.groups[g].ready - taken[g], min_member=lambda g: cat.groups[g].min_member,
                preemptor_allocated=mine, job_allocated=group_alloc, total=total,
                need=dims(bound[at][1].requests), allocated=queue_alloc,
                deserved={q: a.effective_deserved for q, a in accounts.items()},
                listed={q: a.deserved_listed for q, a in accounts.items()},
                guarantee={q: a.guarantee for q, a in accounts.items()})
            if c.key not in {x.key for x in allowed}:
                out.append(f"{where} ({v.reason}): Volcano's plugin tiers do not offer it on {c.node} "
                           f"(PodGroup {c.group}: ready {cat.groups[c.group].ready - taken[c.group]}, "
                           f"minMember {cat.groups[c.group].min_member})")
        evicted.add(c.key)
        taken[c.group] += 1
        for r, x in c.pod.requests.items():
            queue_alloc[c.queue][r] = queue_alloc[c.queue].get(r, 0) - x
    return out


def _safety_refused(snap: Snapshot, c: Candidate, reason: str, priority: int, safety: SafePreemption) -> str | None:
    """Safe preemption's static rules for the pod (a pod under several PDBs; graded preemption)."""
    if not safety.on:
        return None
    return pdb_refused(safety, snap, c.pod) or (graded_blocks(safety, priority, c.job_priority)
                                                if reason == "preempt" else None)


def _reclaimer_violations(snap: Snapshot, job: VCJob, jp: JobPlacement, bound: list[tuple[Binding, Pod]],
                          before: Resources, account: QueueAccount) -> list[str]:
    """The capacity plugin's PreemptiveFn for each pod of a reclaiming job, in the order a dry run tries
    them (``gang_order``), its queue's allocation counting the job's pods before it."""
    alloc = dict(before)
    pos = {ti: n for n, ti in enumerate(gang_order(job, snap, held_indices(job, snap)))}
    for b, p in sorted(bound, key=lambda bp: pos.get((bp[0].task, bp[0].index), len(pos))):
        why = reclaimer_blocked(job.queue, alloc, p.requests, account.effective_deserved, account.real_capability)
        if why is not None:
            return [f"job {jp.key}: reclaims for pod {b.pod_name(job.name)} but {why}"]
        for r, x in p.requests.items():
            alloc[r] = alloc.get(r, 0) + x
    return []


def _topology_violations(jp: JobPlacement, job: VCJob, nodes: set[str], snap: Snapshot,
                         running: frozenset[str] = frozenset()) -> list[str]:
    """The job's HyperNode against its networkTopology; it must hold the new pods' ``nodes`` and the nodes
    its pods already run on (``running``: a running gang's pending pods join it in its HyperNode)."""
    t = snap.topology
    nt = job.network_topology
    if nt is None:
        if jp.hyper_node is not None or jp.tier is not None:
            return [f"job {jp.key} has no network topology but names hyperNode/tier"]
        return []
    if jp.hyper_node is None:
        if nt.mode == "hard":
            return [f"job {jp.key}: hard network topology but no hyperNode"]
        if jp.tier != t.top_tier:
            return [f"job {jp.key}: spread over the cluster, tier must be {t.top_tier} (virtual root)"]
        return []
    if jp.hyper_node not in t.hyper_nodes:
        return [f"job {jp.key}: unknown HyperNode {jp.hyper_node}"]
    out = []
    tier = t.hyper_nodes[jp.hyper_node].tier
    if jp.tier != tier:
        out.append(f"job {jp.key}: tier {jp.tier} but HyperNode {jp.hyper_node} has tier {tier}")
    if nt.mode == "hard" and nt.highest_tier_allowed is not None and tier > nt.highest_tier_allowed:
        out.append(f"job {jp.key}: HyperNode {jp.hyper_node} tier {tier} > highestTierAllowed "
                   f"{nt.highest_tier_allowed}")
    outside = sorted(nodes - t.members[jp.hyper_node])
    if outside:
        out.append(f"job {jp.key}: nodes {', '.join(outside[:3])} are outside HyperNode {jp.hyper_node}")
    away = sorted(running - t.members[jp.hyper_node])
    if away:
        out.append(f"job {jp.key}: its running pods on {', '.join(away[:3])} are outside HyperNode {jp.hyper_node}")
    return out


def validate_placement(snap: Snapshot, jobs: Sequence[VCJob], plan: PlacementPlan, *,
                       safety: SafePreemption = OFF, now: datetime | None = None,
                       actions: Sequence[str] = SEED_ACTIONS, tiers: bool = False) -> None:
    """Raise PlanInvalidError when the plan breaks any rule. ``actions``: the scheduler configuration's (a
    victim's reason must be one of them); ``tiers``: victims as Volcano's plugin tiers choose them."""
    violations = placement_violations(snap, jobs, plan, safety=safety, now=now, tiers=tiers)
    violations += [f"job {jp.key}: victim {v.namespace}/{v.name} by {v.reason}, an action the scheduler "
                   "configuration does not run" for jp in plan.jobs for v in jp.victims if v.reason not in actions]
    if violations:
        raise PlanInvalidError(violations)


def check_inputs(snap: Snapshot, jobs: Sequence[VCJob]) -> None:
    """Input Volcano cannot schedule with, as an InputError naming the object and field (the CLI adds
    the file): a cycle in the queues' parents (the capacity plugin with hierarchy refuses the whole
    session: ``updateAncestors``), a PriorityClass a job to place names that does not exist (Kubernetes'
    Priority admission refuses such pods, so the job never runs). A ``deserved`` naming a resource no node
    has (``queues.unheld_deserved``, almost always a misspelt name) is a warning: Volcano schedules with
    it, and so does optplan (the dimension is listed, 0 allocated; it matters only to a pod requesting it)."""
    tree = QueueTree(snap.queues)
    for name in sorted(tree.broken):
        if "cycle" in tree.broken[name]:
            chain, cur = [name], snap.queues[name].parent_name
            while cur is not None and cur not in chain:
                chain.append(cur)
                cur = snap.queues[cur].parent_name
            raise InputError(f"the parent chain {' -> '.join([*chain, name])} is a cycle: Volcano's capacity "
                             "plugin (hierarchy) then schedules nothing", obj=f"Queue/{name}", field="spec.parent")
    for v in unheld_deserved(snap, tree):  # Volcano schedules with it: a warning, and the same decisions
        log.warning("Queue/%s: spec.deserved.%s: no node has %s (%s); placing as Volcano does, which compares "
                    "it only for pods that request it", v.queue, v.resource, v.resource, v.message.split(": ", 1)[1])
    known = set(snap.priority_classes) | set(SYSTEM_PRIORITY_CLASSES)
    for job in jobs:
        fields = [(job.priority_class_name, "spec.priorityClassName")]
        fields += [(t.template.priority_class_name, f"spec.tasks[{i}].template.spec.priorityClassName")
                   for i, t in enumerate(job.tasks)]
        for cls, where in fields:
            if cls is not None and cls not in known:
                raise InputError(f"PriorityClass {cls!r} does not exist (Kubernetes refuses pods that name a "
                                 "missing class): add it to the snapshot", obj=f"VCJob/{job.key}", field=where)
