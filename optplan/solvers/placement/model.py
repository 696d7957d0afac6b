"""The exact placement model's data and the exact objective for any plan.

``plan_key`` (``PlanKey``, ``order_weights``, ``admission_weight``) ranks any plan by the exact model's
lexicographic objective: what ``auto`` compares and ``cpsat`` dominates the greedy by. ``build_data``
(``Data``) lists the candidate arcs (static predicates from the oracle, room including what possible
victims hold), ``victim_data`` the classes of identical possible victims (``VictimClass``,
``VictimData``; ``victims_cpsat``'s docstring), and ``Vars`` and ``VictimVars`` hold the variables
``cpsat`` and ``victims_cpsat`` create. No OR-Tools here: the dispatch ranks plans without loading it."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from optplan.models.placement import PlacementPlan
from optplan.models.queues import VCJob
from optplan.solvers.core.oracle import POD_SLOT, max_fit
from optplan.solvers.placement.context import Context, QueueState
from optplan.solvers.placement.jobs import Region, held_pods, job_needs
from optplan.solvers.placement.partitions import (
    partition_pending,
    partition_possible,
    partition_regions,
    partitioned,
)
from optplan.solvers.placement.safety import approval_cancelled, cooling_until, pdb_spends
from optplan.solvers.placement.victims import Candidate, Reason, action_refused, dims, statically_allowed


def admission_weight(priority: int) -> int:
    """What admitting a job is worth in the exact objective: positive, growing with priority."""
    return max(priority, 0) + 1


def job_weight(ctx: Context, job: VCJob) -> int:
    """``admission_weight`` of the job's priority; 0 for a job whose running pods already make its gang
    ready (Volcano does not count it as starving: a pod more for it is an extra replica, not an admission,
    and never outweighs admitting a waiting job)."""
    return 0 if ctx.need(job)[1] == 0 else admission_weight(ctx.priority[job.key])


@dataclass(frozen=True, order=True)
class PlanKey:
    """Lower is better: (−weighted admissions, victim cost, tier sum, −extra replicas, newly occupied
    nodes, −binpack, −Volcano order): the last only breaks ties, for the jobs admitted earlier in
    Volcano's order (``order_weights``)."""

    neg_admitted: int
    victim_cost: int
    tiers: int
    neg_extras: int
    opened: int
    neg_binpack: int
    neg_order: int = 0


def plan_key(ctx: Context, plan: PlacementPlan) -> PlanKey:
    by_key = {j.key: j for j in ctx.jobs}
    weights = order_weights(ctx)
    admitted = tiers = extras = binpack = order = 0
    receiving: set[str] = set()
    for jp in plan.jobs:
        if not jp.admitted:
            continue
        job = by_key[jp.key]
        admitted += job_weight(ctx, job)
        tiers += jp.tier or 0
        extras += len(jp.bindings) - ctx.need(job)[1]
        order += weights[jp.key]
        pods = ctx.pods[jp.key]
        for b in jp.bindings:
            receiving.add(b.node)
            binpack += ctx.static_binpack(pods[b.task][b.index].requests, b.node)
    occupied = set(ctx.snapshot.pods_by_node)
    return PlanKey(-admitted, ctx.victim_cost(plan), tiers, -extras, len(receiving - occupied), -binpack, -order)


EXACT_ORDER_JOBS = 60
"""Up to this many jobs the order weights are powers of two (an earlier job outweighs all later ones)."""


def order_weights(ctx: Context) -> dict[str, int]:
    """job key -> what admitting it is worth in the last, tie-breaking objective: the earlier its first turn
    in the greedy's allocate (``ctx.turns``; ``ctx.jobs`` before the greedy ran), the more; lexicographic
    (powers of two) up to ``EXACT_ORDER_JOBS`` jobs, else linear."""
    keys = ctx.turns if len(ctx.turns) == len(ctx.jobs) else [j.key for j in ctx.jobs]
    n = len(keys)
    if n <= EXACT_ORDER_JOBS:
        return {k: 1 << (n - 1 - i) for i, k in enumerate(keys)}
    return {k: n - i for i, k in enumerate(keys)}


@dataclass
class VictimClass:
    """Identical possible victims: running pods of one PodGroup on one node, equal requests and cost."""

    name: str
    node: str
    group: str
    queue: str
    requests: dict[str, int]
    cost: int
    pods: tuple[Candidate, ...]
    """In victim order: the extraction hands out the first ones."""
    pdb: str | None = None
    """The PodDisruptionBudget each of its pods is charged to under safe preemption's PDB rule."""

    @property
    def size(self) -> int:
        return len(self.pods)

    def releases(self, r: str) -> int:
        """What one pod of the class gives back of ``r`` ("pods": one pod)."""
        return 1 if r == "pods" else self.requests.get(r, 0)


@dataclass
class VictimData:
    """Classes of possible victims and which job may take which."""

    classes: dict[str, VictimClass] = field(default_factory=dict)
    pairs: dict[tuple[str, str], Reason] = field(default_factory=dict)
    """(job, class) -> the action by which the job may evict the class."""
    finishers: dict[str, list[str]] = field(default_factory=dict)
    """PodGroup -> the jobs (job order) that may evict all of it."""
    class_of: dict[str, str] = field(default_factory=dict)
    """Candidate pod key -> its class."""
    freeable: dict[str, dict[str, int]] = field(default_factory=dict)
    """node -> what the classes some job may take hold there (requests, and ``pods`` in milli-units)."""
    nodes: set[str] = field(default_factory=set)
    """Nodes with a class some job may take (after pruning)."""

    def room(self, ctx: Context, node: str) -> dict[str, int]:
        """The snapshot's free room plus everything the node's possible victims hold."""
        free = dict(ctx.free[node])
        for r, x in self.freeable.get(node, {}).items():
            free[r] = free.get(r, 0) + x
        return free

    def prune(self, data: Data) -> None:
        """Keep the pairs whose job can land on the class's node, then add the whole-PodGroup takes."""
        cat = data.ctx.catalogue
        lands: dict[str, set[str]] = defaultdict(set)
        for (j, _t), row in data.arcs.items():
            lands[j].update(row)
        static = dict(self.pairs)
        self.pairs = {(j, k): r for (j, k), r in static.items() if self.classes[k].node in lands[j]}
        by_group: dict[str, list[str]] = defaultdict(list)
        for k, c in self.classes.items():
            by_group[c.group].append(k)
        self.finishers = {}
        replicas = {job.key: sum(t.replicas for t in job.tasks) for job in data.valid}
        for g, ks in sorted(by_group.items()):
            pods = {p.key for k in ks for p in self.classes[k].pods}
            if pods != set(cat.groups[g].occupying):
                continue  # some occupying pod is protected or not Running: the gang never goes whole
            # each pod placed needs at most the group's pods on its own node: when all the jobs entitled
            # to the group could not use more than ready − minMember of them, it never goes whole
            per_node: dict[str, int] = defaultdict(int)
            for k in ks:
                per_node[self.classes[k].node] += self.classes[k].size
            if data.ctx.tiers:  # Volcano's gang plugin never offers a pod below minMember; the later tiers
                continue  # (drf, capacity) decide by rules this model does not hold: it stays in the first
            mine = set(ks)
            users = {j for (j, k) in static if k in mine}
            if sum(replicas[j] for j in users) * max(per_node.values()) <= cat.groups[g].slack:
                continue
            for job in data.valid:
                if not all((job.key, k) in static for k in ks):
                    continue
                if len({static[job.key, k] for k in ks}) > 1 or not any((job.key, k) in self.pairs for k in ks):
                    continue
                self.finishers.setdefault(g, []).append(job.key)
                for k in ks:
                    self.pairs[job.key, k] = static[job.key, k]
        used = {k for (_j, k) in self.pairs}
        self.classes = {k: c for k, c in self.classes.items() if k in used}
        self.class_of = {p: k for p, k in self.class_of.items() if k in used}
        self.nodes = {c.node for c in self.classes.values()}


def _may_be_over(c: Candidate, queues: QueueState, could_be_over: dict[str, set[str]]) -> bool:
    """Rule (2) can pass for the pod at some turn: an immediate victim, or its queue could be above
    deserved on a listed dimension of its request."""
    des = queues.deserved[c.queue]
    need = dims(c.pod.requests)
    return not any(des.get(r, 0) > 0 for r in need) or bool(need & could_be_over.get(c.queue, set()))


def most_requests(job: VCJob, ctx: Context) -> dict[str, int]:
    """Resource -> the most the job can request of it (every replica placed)."""
    out: dict[str, int] = defaultdict(int)
    for t in job.tasks:
        pods = ctx.pods[job.key][t.name]
        if pods:
            for r, x in pods[0].requests.items():
                out[r] += x * t.replicas
    return dict(out)


def victim_data(ctx: Context, queues: QueueState, valid: list[VCJob],
                feasible: dict[tuple[str, str], list[str]]) -> VictimData:
    """Classes of the catalogue's candidates and the static (job, class) pairs, before pruning."""
    cat = ctx.catalogue
    vd = VictimData()
    if not cat.candidates:
        return vd
    members: dict[tuple[str, str, tuple[tuple[str, int], ...], int, str], list[Candidate]] = defaultdict(list)
    for node in sorted(cat.by_node):
        for c in cat.by_node[node]:  # victim order
            pdb = pdb_spends(ctx.safety, ctx.snapshot, c.pod) or ""
            members[node, c.group, tuple(sorted(c.pod.requests.items())), c.cost, pdb].append(c)
    seen: dict[tuple[str, str], int] = defaultdict(int)
    for (node, group, reqs, cost, pdb), pods in members.items():
        i = seen[node, group]
        seen[node, group] += 1
        name = f"{group}@{node}" + (f"#{i}" if i else "")
        vd.classes[name] = VictimClass(name=name, node=node, group=group, queue=pods[0].queue, requests=dict(reqs),
                                       cost=cost, pods=tuple(pods), pdb=pdb or None)
        for p in pods:
            vd.class_of[p.key] = name
    most = {j.key: most_requests(j, ctx) for j in valid}
    potential: dict[str, dict[str, int]] = {q: dict(a) for q, a in queues.allocated.items()}
    for job in valid:
        for q in queues.chain(job.queue):
            for r, x in most[job.key].items():
                potential[q][r] = potential[q].get(r, 0) + x
    could_be_over = {q: {r for r, x in a.items() if r in queues.listed[q] and x > queues.deserved[q].get(r, 0)}
                     for q, a in potential.items()}
    reachable: dict[str, set[str]] = defaultdict(set)
    for (j, _t), nodes in feasible.items():
        reachable[j].update(nodes)
    for job in valid:
        if not ctx.preempting(job) or partitioned(job):  # preemptionPolicy Never everywhere, or partitions
            continue
        if (cooling_until(ctx.safety, ctx.snapshot, job.queue, ctx.now) is not None  # safe preemption's cooldown
                or approval_cancelled(ctx.safety, ctx.snapshot, job, ctx.now) is not None):  # or approval gate
            continue
        needs = job_needs(job)
        prio = ctx.priority[job.key]
        may_reclaim = any(queues.deserved[job.queue].get(r, 0) > 0 for r in needs)
        for k, cls in vd.classes.items():
            c = cls.pods[0]
            for reason in ("preempt", "reclaim"):
                if (reason == "reclaim" and not may_reclaim) or reason not in ctx.actions:
                    continue
                why = action_refused(job, reason) or statically_allowed(
                    c, reason, job.queue, prio, queues.reclaimable.get(c.queue, True), needs, snap=ctx.snapshot,
                    safety=ctx.safety)
                if why is None and reason == "reclaim" and not _may_be_over(c, queues, could_be_over):
                    why = "its queue is never above deserved for it"
                if why is None:
                    vd.pairs[job.key, k] = reason
                    break
    takeable = {k for (_j, k) in vd.pairs}
    for k in sorted(takeable):
        cls = vd.classes[k]
        room = vd.freeable.setdefault(cls.node, {})
        for r, x in cls.requests.items():
            room[r] = room.get(r, 0) + x * cls.size
        room["pods"] = room.get("pods", 0) + POD_SLOT * cls.size
    return vd


@dataclass
class VictimVars:
    """The victim variables of the joint model, keyed by domain tuples (module docstring)."""

    take: dict[tuple[str, str], Any] = field(default_factory=dict)  # take[job, class]
    after: dict[str, Any] = field(default_factory=dict)  # after[job]: replayed after the evictions
    early: dict[tuple[str, str, str], Any] = field(default_factory=dict)  # early[job, task, node]
    amount: dict[tuple[str, str], Any] = field(default_factory=dict)  # amount[job, r]: placed requests
    early_amount: dict[tuple[str, str], Any] = field(default_factory=dict)  # amount, or 0 when after
    lands: dict[tuple[str, str], Any] = field(default_factory=dict)  # lands[job, node]
    finish: dict[tuple[str, str], Any] = field(default_factory=dict)  # finish[job, group]
    reclaims: dict[str, Any] = field(default_factory=dict)  # reclaims[job]: reclaim, else preempt
    under: dict[tuple[str, str], Any] = field(default_factory=dict)  # under[job, r]: own queue + job ≤ deserved
    has: dict[tuple[str, str], Any] = field(default_factory=dict)  # has[job, task]: a pod of the task placed
    some: dict[tuple[str, str], Any] = field(default_factory=dict)  # some[job, queue]: reclaims from the queue
    left: dict[tuple[str, str, str], Any] = field(default_factory=dict)  # left[job, queue, r]: after its victims
    last: dict[tuple[str, str, str], Any] = field(default_factory=dict)  # last[job, queue, class]: taken last
    other: dict[tuple[str, str], Any] = field(default_factory=dict)  # other[job, class]: a pod taken not last
    over: dict[tuple[str, str, str, str], Any] = field(default_factory=dict)
    """over[job, class, r, "last"|"other"]: the class's queue stays above deserved on r for such a pod."""
    places: dict[tuple[str, str], Any] = field(default_factory=dict)  # places[job, node], over-committed nodes


@dataclass
class Vars:
    """The model's variables, keyed by domain tuples."""

    admitted: dict[str, Any]  # admitted[job]
    region: dict[tuple[str, int], Any]  # region[job, i]: the job ends in its i-th candidate region
    count: dict[tuple[str, str, str], Any]  # count[job, task, node]: pods of the task placed on the node
    opened: dict[str, Any]  # opened[node]: a node empty in the snapshot receives pods
    ev: VictimVars = field(default_factory=VictimVars)
    by_task: dict[tuple[str, str], list[Any]] = field(default_factory=dict)
    """(job, task) -> its count variables (an index)."""
    pcount: dict[tuple[str, str, int, str], Any] = field(default_factory=dict)
    """pcount[job, task, partition, node]: pods of a partition of a partitioned task placed on the node."""
    whole: dict[tuple[str, str, int], Any] = field(default_factory=dict)
    """whole[job, task, partition]: the partition's pending pods are all placed (else none is)."""
    psub: dict[tuple[str, str, int, int], Any] = field(default_factory=dict)
    """psub[job, task, partition, i]: the partition lies in its i-th candidate HyperNode (``partition_spots``)."""

    def placed(self, job: str, task: str) -> Any:
        return sum(self.by_task.get((job, task), []))


@dataclass
class Data:
    ctx: Context
    queues: QueueState
    """The snapshot's queue accounting (never changed)."""
    valid: list[VCJob]
    """Jobs whose queue may take them (the others are never admitted), in Volcano's job order."""
    arcs: dict[tuple[str, str], dict[str, int]]
    """(job, task) -> candidate node -> upper bound of count."""
    victims: VictimData
    """Classes of possible victims and which job may take which (empty: the model has no victims)."""

    @property
    def jobs(self) -> dict[str, VCJob]:
        return {j.key: j for j in self.ctx.jobs}


def partition_spots(ctx: Context, job: VCJob, task: str, part: int) -> list[Region]:
    """Where one partition of a task may lie in the exact model: the HyperNodes ``partition_regions`` gives in
    any of the job's regions, once each, lowest tier first, then by name (only for a task whose partitions
    must fit one HyperNode, ``partitions.bounded``)."""
    t = next(x for x in job.tasks if x.name == task)
    held = ctx.held.get(job.key, {}).get(task, frozenset())
    assert t.partition_policy is not None
    mine = [i for i in t.partition_policy.members(part) if i in held]
    running: set[str] = set()
    if mine:
        pods = held_pods(job, ctx.snapshot).get(task, {})
        for i in mine:
            node = pods[i].node_name if i in pods else None
            if node is not None:
                running.add(node)
    seen: dict[str | None, Region] = {}
    for region in ctx.regions.get(job.key, []):
        for r in partition_regions(ctx.snapshot, t, region, running):
            seen.setdefault(r.hyper_node, r)
    return sorted(seen.values(), key=lambda r: (r.tier or 0, r.hyper_node or ""))


def partition_parts(ctx: Context, job: VCJob) -> list[tuple[str, int, list[int]]]:
    """(task, partition, its pending replica indices) of every partition with pods to place."""
    out = []
    for t in job.tasks:
        pp = t.partition_policy
        if pp is None:
            continue
        held = ctx.held.get(job.key, {}).get(t.name, frozenset())
        for p in range(pp.total_partitions):
            pending = partition_pending(t, p, held)
            if pending and partition_possible(t, p):
                out.append((t.name, p, pending))
    return out


def build_data(ctx: Context) -> Data:
    snap = ctx.snapshot
    queues = QueueState(snap, ctx.accounts)
    valid = [j for j in ctx.jobs if queues.admission_reason(j.queue) is None and j.key not in ctx.unfit]
    feasible: dict[tuple[str, str], list[str]] = {}
    for job in valid:
        allowed = frozenset().union(*(r.nodes for r in ctx.regions[job.key])) if ctx.regions[job.key] else frozenset()
        for t in job.tasks:
            if not ctx.pending(job, t.name):
                continue
            pod = ctx.pods[job.key][t.name][0]
            feasible[job.key, t.name] = [n for n in sorted(allowed) if ctx.predicates.ok(pod, n)]
    vd = victim_data(ctx, queues, valid, feasible)
    arcs: dict[tuple[str, str], dict[str, int]] = {}
    for job in valid:
        for t in job.tasks:
            if (job.key, t.name) not in feasible:
                continue
            pod = ctx.pods[job.key][t.name][0]
            arcs[job.key, t.name] = {}
            pending = len(ctx.pending(job, t.name))
            for n in feasible[job.key, t.name]:
                ub = min(pending, max_fit(pod, vd.room(ctx, n), ctx.capacity.limits_pods(n)))
                if ub > 0:
                    arcs[job.key, t.name][n] = ub
    data = Data(ctx=ctx, queues=queues, valid=valid, arcs=arcs, victims=vd)
    vd.prune(data)
    return data
