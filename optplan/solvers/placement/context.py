"""What the placement planners share: the queue order (the capacity plugin's ``compare_queues``, the
jobs' ``job_order``), the queue accounting as placements go (``QueueState``), the run's ``Context`` (the
jobs in Volcano's order and their facts, the snapshot's predicates and room), and the simulated cluster
(``State``), changed only through a ``Statement`` (Volcano's statement.go: tentative allocations and
evictions, committed or undone); ``replay`` puts a plan on a fresh state."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from optplan.errors import InputError
from optplan.models.placement import BinpackWeights, PlacementPlan, SafePreemption
from optplan.models.queues import QueueTree, VCJob
from optplan.models.schedconf import SEED_ACTIONS, SchedulerConf
from optplan.models.snapshot import Pod, Resources, Snapshot, TierNameError, resolve_job_tier_names
from optplan.solvers.core.oracle import Capacity, Predicates
from optplan.solvers.placement.binpack import BINPACK_SCALE, binpack_score
from optplan.solvers.placement.jobs import (
    Region,
    clip_to_cluster,
    gang_shortfall,
    held_counts,
    held_indices,
    held_pods,
    job_pods,
    job_priority,
    job_regions,
    needed,
    shield,
)
from optplan.solvers.placement.nodeorder import NodeStart
from optplan.solvers.placement.queueorder import QueueState, queue_order_key
from optplan.solvers.placement.safety import OFF
from optplan.solvers.placement.victims import Catalogue, never_tasks
from optplan.solvers.quota.queues import QueueAccount, account_queues


def resolve_tier_names(jobs: Sequence[VCJob], snap: Snapshot) -> list[VCJob]:
    """The jobs with each ``networkTopology.highestTierName`` turned into its tier on this snapshot's
    HyperNodes (``snapshot.resolve_tier_name``, as Volcano's session does: a snapshot's own jobs already are,
    a ``--job`` file's are here); a name no HyperNode's tierName is, one InputError."""
    out = []
    for j in jobs:
        try:
            out.append(resolve_job_tier_names(j, snap.hyper_nodes))
        except TierNameError as e:
            raise InputError(str(e), obj=f"VCJob {j.key}", field=e.field) from None
    return out


def job_key_in_queue(job: VCJob, priority: int, ready: bool, share: float = 0.0
                     ) -> tuple[int, bool, float, bool, str, str, str]:
    """Volcano's JobOrderFn inside a queue: higher priority (priority plugin), a gang not ready yet before
    a ready one (gang plugin), the smaller dominant share (drf plugin, ``share``: its allocation over the
    cluster's, ``tiers.share``; 0 without drf), earlier creation (a job without a creationTimestamp was just
    submitted: last among equals), then namespace/name (Volcano: UID)."""
    return (-priority, ready, share, job.creation_timestamp == "", job.creation_timestamp, job.namespace,
            job.name)


def job_order(jobs: Iterable[VCJob], snap: Snapshot, held: dict[str, dict[str, frozenset[int]]] | None = None,
              accounts: Mapping[str, QueueAccount] | None = None) -> list[VCJob]:
    """The jobs in Volcano's order at the snapshot: queues by ``compare_queues`` (shares before any
    placement), the jobs of one queue by ``job_key_in_queue`` (a running gang whose running pods already
    make it ready counts as ready). The greedy interleaves queues as allocate does (``greedy_place``);
    this order is the plan's, the victims pass's and the exact model's replay order."""
    jobs = list(jobs)
    qs = QueueState(snap, accounts)
    held = held if held is not None else {j.key: held_indices(j, snap) for j in jobs}
    queues = sorted({j.queue for j in jobs}, key=queue_order_key(qs))
    rank = {q: i for i, q in enumerate(queues)}

    def key(j: VCJob) -> tuple[int, tuple[int, bool, float, bool, str, str, str]]:
        ready = gang_shortfall(j, Counter(), held_counts(held.get(j.key, {}))) is None
        return rank[j.queue], job_key_in_queue(j, job_priority(j, snap), ready)
    return sorted(jobs, key=key)


@dataclass
class Context:
    """Everything the planners share: the snapshot, the jobs in Volcano's order and their facts."""

    snapshot: Snapshot
    jobs: list[VCJob]
    weights: BinpackWeights
    capacity: Capacity
    """The snapshot's room, before any placement (never changed: a simulation changes its ``State``'s)."""
    predicates: Predicates
    """The snapshot's static predicates: the oracle's one table, shared by every planner of the run."""
    accounts: dict[str, QueueAccount]
    """The snapshot's queue accounting (``account_queues``, hierarchical; never changed)."""
    pods: dict[str, dict[str, list[Pod]]] = field(default_factory=dict)
    """job key -> task -> pods by index."""
    priority: dict[str, int] = field(default_factory=dict)
    regions: dict[str, list[Region]] = field(default_factory=dict)
    now: datetime = field(default_factory=lambda: datetime.now(UTC))
    """Prices victims by how long they have run (``--now``)."""
    unfit: dict[str, str] = field(default_factory=dict)
    """job key -> why its minimum cannot fit the cluster's total capacity (``clip_to_cluster``): such a
    job is rejected without a search, and none of its pods is built."""
    held: dict[str, dict[str, frozenset[int]]] = field(default_factory=dict)
    """job key -> task -> replica indices already running (``held_pods``): counted for the gang, never placed."""
    held_nodes: dict[str, frozenset[str]] = field(default_factory=dict)
    """job key -> the nodes its running pods are on."""
    never: dict[str, frozenset[str]] = field(default_factory=dict)
    """job key -> its tasks whose PriorityClass says preemptionPolicy Never (``victims.never_tasks``)."""
    safety: SafePreemption = OFF
    """Safe preemption's rules (``safety``), off by default."""
    hyper_weights: BinpackWeights | None = None
    """The network-topology-aware plugin's HyperNode binpack weights (``--scheduler-conf``); None: the node
    weights serve (``region_weights``)."""
    node_start: NodeStart = None
    """Where vc-scheduler's node list starts, or the whole list (``nodeorder.node_list``; ``--node-list-start``,
    ``--node-list``); None: by name."""
    tie_seed: int | None = None
    """HyperNodes of the same best score: a seeded random one (``Greedy.best_first``; ``--hypernode-tie-seed``),
    as vc-scheduler draws; None: the first by name."""
    actions: tuple[str, ...] = SEED_ACTIONS
    """The scheduler configuration's actions (``--scheduler-conf``): preempt and reclaim evict only when listed."""
    scheduler: SchedulerConf = field(default_factory=SchedulerConf)
    """The whole scheduler configuration: its plugin tiers and the gang-aware actions' arguments (``gangevict``)."""
    nominated: dict[str, str] = field(default_factory=dict)
    """pod key -> its ``status.nominatedNodeName`` (a pending pod some session's preempt or reclaim pipelined
    there, or the snapshot says so): allocate tries that node first when the pod fits there now (vc-scheduler
    v1.15.1's ``allocateResourcesForTasks``; ``Greedy.best_node``)."""
    pipelined: dict[str, str] = field(default_factory=dict)
    """pod key -> the node this session's preempt or reclaim pipelined it on (``evict.plan_victims`` fills it):
    the next session's nominations (``cycles.greedy_cycles``)."""
    turns: list[str] = field(default_factory=list)
    """Job keys in the order the greedy's allocate gave them their first turn (``greedy_place`` fills it):
    Volcano's order with the queues interleaved, which ``order_weights`` follows."""
    _catalogue: Catalogue | None = None

    @classmethod
    def build(cls, snap: Snapshot, jobs: Sequence[VCJob], weights: BinpackWeights,
              now: datetime | None = None, *, accounts: dict[str, QueueAccount] | None = None,
              capacity: Capacity | None = None, predicates: Predicates | None = None,
              safety: SafePreemption = OFF, hyper_weights: BinpackWeights | None = None,
              actions: tuple[str, ...] = SEED_ACTIONS,
              scheduler: SchedulerConf | None = None, nominated: dict[str, str] | None = None,
              node_start: NodeStart = None, tie_seed: int | None = None) -> Context:
        """The context of placing ``jobs`` on ``snap``.  ``accounts``, ``capacity`` and ``predicates``:
        the snapshot's own (``account_queues``, ``Capacity``, ``Predicates``; never changed by a
        context), given when several contexts of one snapshot are built (``pending.pending_gangs``);
        ``predicates`` depend on the nodes only, so one table serves any snapshot of the same nodes.
        ``nominated``: nominations besides the snapshot's pending pods' ``nominatedNodeName`` (they win)."""
        jobs = resolve_tier_names(jobs, snap)
        keys = [j.key for j in jobs]
        dup = [k for k, n in Counter(keys).items() if n > 1]
        if dup:
            raise ValueError(f"job {dup[0]} is given twice")
        if accounts is None:
            accounts = account_queues(snap, hierarchical=True)
        found = {j.key: (j, held_pods(j, snap)) for j in jobs}
        held = {k: {t: frozenset(ps) for t, ps in by_task.items()} for k, (_j, by_task) in found.items()}
        ordered, unfit = clip_to_cluster(job_order(jobs, snap, held, accounts), snap)
        # a job clip_to_cluster cut has fewer replicas: its held pods are read again
        running = {j.key: found[j.key][1] if found[j.key][0] is j else held_pods(j, snap) for j in ordered}
        nodes = {k: frozenset(p.node_name for ps in by_task.values() for p in ps.values()
                              if p.occupying and p.node_name is not None) for k, by_task in running.items()}
        return cls(snapshot=snap, jobs=ordered, weights=weights,
                   capacity=Capacity(snap, (scheduler or SchedulerConf()).device_order) if capacity is None
                   else capacity,
                   predicates=Predicates(snap) if predicates is None else predicates,
                   accounts=accounts,
                   pods={j.key: job_pods(j) for j in ordered}, priority={j.key: job_priority(j, snap) for j in ordered},
                   regions={j.key: job_regions(j, snap, nodes[j.key]) for j in ordered},
                   now=now or datetime.now(UTC), unfit=unfit,
                   held={k: {t: frozenset(ps) for t, ps in by_task.items()} for k, by_task in running.items()},
                   held_nodes=nodes, never={j.key: never_tasks(snap, j) for j in ordered}, safety=safety,
                   hyper_weights=hyper_weights, actions=actions, scheduler=scheduler or SchedulerConf(),
                   nominated={**{p.key: p.nominated_node_name for p in snap.pods.values()
                                 if p.node_name is None and p.nominated_node_name}, **(nominated or {})},
                   node_start=node_start, tie_seed=tie_seed)

    @property
    def region_weights(self) -> BinpackWeights:
        """The weights a HyperNode's binpack score uses: the network-topology-aware plugin's, else the nodes'."""
        return self.weights if self.hyper_weights is None else self.hyper_weights

    def held_count(self, job: str) -> Counter[str]:
        """Task -> its pods already running."""
        return held_counts(self.held.get(job, {}))

    def running_requests(self, job: str) -> Counter[str]:
        """The requests of the job's running pods, summed (a new Counter each call)."""
        out: Counter[str] = Counter()
        pods = self.pods[job]
        for task, idx in self.held.get(job, {}).items():
            for i in idx:
                out.update(pods[task][i].requests)
        return out

    def pending(self, job: VCJob, task: str) -> list[int]:
        """The task's replica indices still to place, in index order."""
        held = self.held.get(job.key, {}).get(task, frozenset())
        return [i for i in range(len(self.pods[job.key][task])) if i not in held]

    def need(self, job: VCJob) -> tuple[dict[str, int], int]:
        """``needed``: what the pending pods must add per task and in all for the gang to be ready."""
        return needed(job, self.held_count(job.key))

    def preempting(self, job: VCJob) -> bool:
        """Some task with pending pods may evict (its PriorityClass does not say preemptionPolicy Never)."""
        return any(t.name not in self.never[job.key] and self.pending(job, t.name) for t in job.tasks)

    @property
    def free(self) -> dict[str, Resources]:
        """node -> free resources in the snapshot (before any placement)."""
        return self.capacity.free

    @property
    def catalogue(self) -> Catalogue:
        """Every possible victim of the snapshot, priced at ``now`` (built once); the pods of a job being
        placed are not victims (its pending pods join them), but the exposed ones of other jobs (``shield``)."""
        if self._catalogue is None:
            cat = Catalogue.build(self.snapshot, self.now, set(QueueTree(self.snapshot.queues).queues))
            self._catalogue = shield(cat, self.snapshot, self.jobs)
        return self._catalogue

    def victim_cost(self, plan: PlacementPlan) -> int:
        """Σ cost of the plan's victims (``victims`` module)."""
        cat = self.catalogue
        return sum(c.cost for jp in plan.jobs for v in jp.victims if (c := cat.candidate(f"{v.namespace}/{v.name}")))

    def static_binpack(self, requests: Resources, node: str) -> int:
        """The pod's binpack score on the node with the snapshot's usage, as an integer (exact objective)."""
        score = binpack_score(requests, self.snapshot.nodes[node].allocatable, self.free[node], self.weights)
        return math.floor(score * BINPACK_SCALE)


class State:
    """Free capacity per node, queue allocations and evictions, changed only through a Statement."""

    def __init__(self, ctx: Context) -> None:
        """The snapshot's state (the context's room and queue accounting, copied)."""
        self.snapshot = ctx.snapshot
        self.cap = ctx.capacity.copy()
        self.queues = QueueState(ctx.snapshot, ctx.accounts)
        self.evicted: dict[str, str] = {}
        """pod key -> node, for every victim so far."""
        self.taken: Counter[str] = Counter()
        """PodGroup key -> pods evicted from it so far."""
        self.touched: list[str] = []
        """Every node whose free room a statement changed, in order (a node once per change): what a
        planner's cache over nodes reads to know which of its rows are stale."""
        self.pipelining = False
        """Allocations are pipelined (preempt's and reclaim's, ``evict.plan_victims``): they hold room but do
        not enter the node's ``Used``."""
        self.unused: dict[str, Counter[str]] = {}
        """node -> room its free counts as taken or given back that vc-scheduler's ``node.Used`` does not: + the
        pods pipelined there, − the pods evicted there (``Releasing``, still in ``Used``) (``used_free``)."""

    def used_free(self, node: str) -> Resources:
        """The node's free room as its ``Used`` leaves it (allocatable − Used), what Volcano's binpack scores
        (``BinPackingScore`` reads ``node.Used``): vc-scheduler v1.15.1's ``NodeInfo.AddTask`` adds a
        ``Pipelined`` task to ``Pipelined`` only, and a ``Releasing`` one (a victim) stays in ``Used``."""
        free = self.cap.free[node]
        shift = self.unused.get(node)
        if not shift:
            return free
        return {r: free.get(r, 0) + shift.get(r, 0) for r in free.keys() | shift.keys()}

    def unuse(self, node: str, requests: Resources, sign: int) -> None:
        shift = self.unused.setdefault(node, Counter())
        for r, v in requests.items():
            shift[r] += sign * v
        if not any(shift.values()):
            del self.unused[node]


class Statement:
    """Volcano's Statement: tentative allocations and evictions that are committed or discarded (undone)."""

    def __init__(self, state: State) -> None:
        self.state = state
        self.ops: list[tuple[Pod, str, str, str | None, tuple[int, ...] | None]] = []
        """(pod, node, queue, PodGroup, devices): an allocation when the PodGroup is None, else an eviction (the
        devices it held, given back to it by a rollback)."""
        self.piped: list[bool] = []
        """Per operation: an allocation pipelined (``State.pipelining``) or an eviction (both shift ``unused``)."""

    def allocate(self, pod: Pod, node: str, queue: str, devices: Sequence[int] | None = None) -> None:
        """The pod placed on the node, its GPU ask on ``devices`` (device indices: a plan's binding names them)
        when given, else where the configuration's device order puts it."""
        self.state.cap.add(pod, node, devices)
        self.state.touched.append(node)
        self.state.queues.add(queue, pod.requests)
        self.ops.append((pod, node, queue, None, None))
        self.piped.append(self.state.pipelining)
        if self.state.pipelining:
            self.state.unuse(node, pod.requests, 1)

    def evict(self, pod: Pod, node: str, queue: str, group: str) -> None:
        held = self.state.cap.devices_of(pod)
        self.state.cap.remove(pod, node)
        self.piped.append(True)
        self.state.unuse(node, pod.requests, -1)
        self.state.touched.append(node)
        self.state.queues.add(queue, pod.requests, -1)
        self.state.evicted[pod.key] = node
        self.state.taken[group] += 1
        self.ops.append((pod, node, queue, group, held[1] if held is not None and held[0] == node else None))

    def evictions(self) -> list[tuple[Pod, str]]:
        return [(pod, node) for pod, node, _q, group, _d in self.ops if group is not None]

    def mark(self) -> int:
        return len(self.ops)

    def rollback(self, mark: int) -> None:
        """Undo every operation after ``mark`` (an evicted pod back on the devices it held)."""
        while len(self.ops) > mark:
            pod, node, queue, group, devices = self.ops.pop()
            self.state.touched.append(node)
            if self.piped.pop():
                self.state.unuse(node, pod.requests, -1 if group is None else 1)
            if group is None:
                self.state.cap.remove(pod, node)
                self.state.queues.add(queue, pod.requests, -1)
            else:
                self.state.cap.add(pod, node, devices)
                self.state.queues.add(queue, pod.requests)
                del self.state.evicted[pod.key]
                self.state.taken[group] -= 1

    def discard(self) -> None:
        self.rollback(0)


def replay(ctx: Context, plan: PlacementPlan, *, victims: bool) -> State:
    """The state a plan leaves: its admitted jobs in plan order, each job's victims evicted first (only
    with ``victims``: without, the state counts every placement but no room the victims freed), then its
    pods placed. The planners' one replay; the validator replays on its own (it trusts no planner)."""
    state = State(ctx)
    for jp in plan.jobs:
        if not jp.admitted:
            continue
        stmt = Statement(state)
        if victims:
            for v in jp.victims:
                c = ctx.catalogue.candidate(f"{v.namespace}/{v.name}")
                assert c is not None, f"{v.name}: no victim of the catalogue"
                stmt.evict(c.pod, c.node, c.queue, c.group)
        pods = ctx.pods[jp.key]
        for b in jp.bindings:
            stmt.allocate(pods[b.task][b.index], b.node, jp.queue, b.devices)
    return state


def with_devices(ctx: Context, state: State, plan: PlacementPlan) -> PlacementPlan:
    """The plan with each binding naming the devices its pod holds in ``state`` (the greedy's, after its last
    allocation): a replay, the validator's or a later cycle's, then puts each pod where the greedy did, whatever
    order it meets them in (Volcano gives a ready job's further pods later turns, so the greedy placed them in
    another order than the plan lists them). Bindings on nodes without device lists, and pods asking no GPU,
    name none."""
    jobs = []
    for jp in plan.jobs:
        pods = ctx.pods.get(jp.key)
        if not jp.bindings or pods is None:
            jobs.append(jp)
            continue
        out = []
        for b in jp.bindings:
            held = state.cap.devices_of(pods[b.task][b.index])
            devices = held[1] if held is not None and held[0] == b.node else None
            out.append(b if b.devices == devices else b.model_copy(update={"devices": devices}))
        jobs.append(jp.model_copy(update={"bindings": tuple(out)}))
    return plan.model_copy(update={"jobs": tuple(jobs)})
