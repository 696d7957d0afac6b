"""Queue placement: where would Volcano put the pods of pending VCJobs, and can an exact model do better?

**Pod facts.** Each replica of a VCJob task becomes a ``snapshot.Pod`` with ``node_name`` None, named
``<job>-<task>-<index>`` as Volcano's job controller names it, with the template's requests,
nodeSelector, required node affinity and tolerations, so the feasibility oracle (``oracle``) applies
as is.

**Gang.** A job is admitted when at least ``minAvailable`` of its pods are placed and, when the job's
minAvailable is not below the sum of its tasks' minimums (a task's ``minAvailable``, else its
replicas), every task has its minimum too: Volcano's ``JobInfo.CheckTaskReady``. Replicas beyond
that are placed when they fit. A job that is not admitted places nothing (Volcano's Statement is
discarded).

**Queues.** For the job's queue and every ancestor, ``allocated + request ≤ realCapability`` on every
requested resource (the capacity plugin with hierarchy, ``queues.account_queues``), checked per pod as
it is placed. The queue must exist, be a leaf and be Open.

**Topology.** ``mode: hard``: every pod inside one HyperNode of tier ≤ ``highestTierAllowed`` (none
written: any tier, still one HyperNode). ``mode: soft``: the same search over every HyperNode, then
the virtual root (the whole cluster). No ``networkTopology``: the whole cluster, ``hyperNode`` and
``tier`` null.

**Greedy** (Volcano's allocate action): jobs in Volcano's order (higher PriorityClass value, then
earlier creationTimestamp — a job without one was just submitted and comes last among equals — then
namespace/name). For each job, candidate regions grouped by tier ascending; each region is dry-run
with the whole gang in a Statement (tentative allocations, undone); the lowest tier with any success
wins, then the region with the best HyperNode binpack score (Volcano's formula over the HyperNode's
summed resources after the dry run), then the name. Within a dry run each pod goes to the node with
the highest binpack score (``binpack_score``, Volcano's formula with ``BinpackWeights``), ties to the
first node by name (Volcano picks at random among equals). Pods are tried task by task, each task's
required replicas first, then the rest; a pod that fits nowhere is skipped, and the job is admitted
when the gang is ready.

**Greedy victims** (Volcano's preempt, then reclaim; rules in ``victims``). After allocate, each job
it did not admit, in job order, on the state the jobs before it left (allocate's placements, and the
earlier jobs' victims gone: their room and their queue allocation are free for the jobs that follow).
A job that now fits without victims is placed there first (room an earlier job's victims freed beyond
its own need), as Volcano's next allocate would, whatever its preemptionPolicy. Else preempt, then
reclaim: regions in the order above, the first whose dry run readies the gang; in a dry run each pod,
task by task, goes where it fits as in allocate, else to the first node, in the order below, whose
victims would all together make room (Volcano's ``ValidateVictims``), evicting them one by one in
victim order until the pod fits, the node's evictions undone when it still does not.

*Node order for victims* (Volcano's ``preempt``: ``PredicateNodes``, ``PrioritizeNodes``,
``SortNodes``): the region's nodes that pass the static predicates, by the pod's binpack score on each
node highest first — ``binpack_score`` with the run's ``BinpackWeights``, on the node's free room as
the dry run stands before this pod's evictions (so a node where a weighted resource would overflow
scores 0, and resources without a weight, GPUs by default, do not count) — ties by node name. Where
this departs from Volcano: (1) only the binpack plugin scores (Volcano adds every enabled nodeorder
plugin: leastrequested, balancedresource, node affinity, ...); (2) ties go to the name, where Volcano
keeps its node list's order (unspecified); (3) a pod evicted earlier in the dry run counts as free
room, where Volcano still counts a releasing pod as used until it is gone (its score, not its
fit: both use future idle room); (4) the same order serves reclaim, whose nodes Volcano walks in
session order, unscored; (5) victims come from the job's region only (a topology job's pods stay in
one HyperNode), where Volcano's preempt considers every node; (6) the evictions on a node that still
leave the pod without room are undone, where Volcano keeps them in the statement.

**Exact** (``placement_cpsat`` with ``victims_cpsat``): placements and victims of all jobs decided
jointly — a running pod may be evicted only for an admitted job entitled to it that lands on its
node (or takes its whole PodGroup), capacity per node is the free room plus what evictions there
release, and the queue rules are checked on the state at each job's turn in the validator's replay.
Lexicographic: most priority-weighted jobs admitted (weight ``max(priority, 0) + 1``), then least
victim cost, then lowest tier sum, then most replicas beyond the minimum, then fewest newly occupied
nodes, then best static binpack. The greedy's plan with its victims is a solution of that model and
its hint, so the optimum is never worse. When the exact model admits no more weight than the greedy,
it also keeps to the plans no worse than the greedy's on victim cost and on tier sum (the order alone
could trade a higher tier for less cost), so its plan dominates the greedy's on both; when it admits
more, the admissions differ and nothing is compared (``placement_cpsat``'s docstring, also for what
OPTIMAL then means). ``plan_key`` computes that order for any plan, so ``auto`` keeps the better of
the greedy and CP-SAT plans (the greedy's on a tie); the exact plan shows the greedy's victims of a
job (``greedyVictims``) where they differ.

Every plan passes ``validate_placement`` (an independent re-check) before ``plan_placement`` returns it.
"""

from __future__ import annotations

import logging
import math
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from fractions import Fraction
from itertools import groupby

from optplan.errors import PlanInvalidError
from optplan.models.placement import Binding, BinpackWeights, JobPlacement, PlacementPlan, Victim
from optplan.models.quantity import format_milli
from optplan.models.queues import ROOT as ROOT_QUEUE
from optplan.models.queues import QueueTree, VCJob
from optplan.models.repack import SolverRecord
from optplan.models.snapshot import GROUP_NAME_ANNOTATION, Pod, Resources, Snapshot
from optplan.solvers.base import PlanOptions
from optplan.solvers.oracle import POD_SLOT, Capacity, constraint_signature, static_reason
from optplan.solvers.queues import QueueAccount, account_queues
from optplan.solvers.victims import (
    REASONS,
    Candidate,
    Catalogue,
    Reason,
    floor_queues,
    over_deserved,
    preemption_never,
    statically_allowed,
)

log = logging.getLogger(__name__)

SOLVERS = ("greedy", "cpsat", "auto")
BINPACK_SCALE = 100
"""Static binpack scores (0..100 × weight) are summed as integers after multiplying by this."""


# ---- pod facts, priorities, gang minimums -------------------------------------------------------

def job_priority(job: VCJob, snap: Snapshot) -> int:
    """The value of the job's PriorityClass; the globalDefault class's when it names none; else 0.
    An unknown class counts as 0 (Kubernetes would refuse the pods)."""
    if job.priority_class_name is not None:
        pc = snap.priority_classes.get(job.priority_class_name)
        return pc.value if pc is not None else 0
    defaults = sorted((pc for pc in snap.priority_classes.values() if pc.global_default), key=lambda p: p.name)
    return defaults[0].value if defaults else 0


def admission_weight(priority: int) -> int:
    """What admitting a job is worth in the exact objective: positive, growing with priority."""
    return max(priority, 0) + 1


def job_order(jobs: Iterable[VCJob], snap: Snapshot) -> list[VCJob]:
    """Volcano's job order: higher priority, earlier creation (none = now, last), namespace/name."""
    return sorted(jobs, key=lambda j: (-job_priority(j, snap), j.creation_timestamp == "", j.creation_timestamp,
                                       j.namespace, j.name))


def job_pods(job: VCJob) -> dict[str, list[Pod]]:
    """Task name -> the pods Volcano would create for it, by replica index."""
    out: dict[str, list[Pod]] = {}
    for t in job.tasks:
        tpl = t.template
        out[t.name] = [
            Pod(namespace=job.namespace, name=f"{job.name}-{t.name}-{i}", labels=dict(tpl.labels),
                annotations={GROUP_NAME_ANNOTATION: job.name}, node_name=None,
                scheduler_name=tpl.scheduler_name or "volcano", node_selector=dict(tpl.node_selector),
                tolerations=tpl.tolerations, required_node_affinity=tpl.required_node_affinity,
                requests={r: v for r, v in tpl.requests.items() if v > 0}, phase="Pending")
            for i in range(t.replicas)]
    return out


DEFAULT_MAX_PODS = 110
"""kubelet's default maxPods: the pod slots ``clip_to_cluster`` counts for a node whose allocatable names
no ``pods``."""


def clip_to_cluster(jobs: Sequence[VCJob], snap: Snapshot) -> tuple[list[VCJob], dict[str, str]]:
    """The jobs with each task's replicas cut to what the cluster's total capacity could ever hold (its
    nodes' allocatable summed, every pod evicted; pod slots too), so that a job asking for two billion
    replicas builds no more pods than could be placed. A job whose minimum exceeds that is unfit: its
    tasks keep no replicas and the reason is returned with its key. A job within capacity is unchanged."""
    totals: dict[str, int] = defaultdict(int)
    slots = 0
    for node in snap.nodes.values():
        for r, v in node.allocatable.items():
            totals[r] += v
        slots += node.allocatable["pods"] // POD_SLOT if "pods" in node.allocatable else DEFAULT_MAX_PODS
    out: list[VCJob] = []
    unfit: dict[str, str] = {}
    for job in jobs:
        bound = {t.name: min([slots, *(totals[r] // v for r, v in t.template.requests.items() if v > 0)])
                 for t in job.tasks}
        if all(t.replicas <= bound[t.name] for t in job.tasks):
            out.append(job)
            continue
        can = {t.name: min(t.replicas, bound[t.name]) for t in job.tasks}
        short = [f"task {t}: minimum {need}" for t, need in task_minima(job).items() if need > can[t]]
        if job.min_available > sum(can.values()):
            short.insert(0, f"minAvailable {job.min_available}")
        if short:
            unfit[job.key] = (f"cannot fit the cluster: {short[0]}, but at most {sum(can.values())} of its "
                              f"{job.replicas} pods fit the nodes' total capacity")
            can = dict.fromkeys(can, 0)
        tasks = tuple(t.model_copy(update={"replicas": can[t.name]}) for t in job.tasks)
        out.append(job.model_copy(update={"tasks": tasks}))
    return out, unfit


def task_minima(job: VCJob) -> dict[str, int]:
    """Per-task minimums Volcano's gang plugin enforces (empty when only the job's minAvailable counts)."""
    minima = {t.name: t.replicas if t.min_available is None else t.min_available for t in job.tasks}
    if job.min_available < sum(minima.values()):
        return {}
    return minima


def gang_shortfall(job: VCJob, placed: Counter[str]) -> str | None:
    """Why the placed counts per task do not make the gang ready, or None when they do."""
    total = sum(placed.values())
    if total < job.min_available:
        return f"{total} of minAvailable {job.min_available} pods placed"
    for task, need in task_minima(job).items():
        if placed[task] < need:
            return f"task {task}: {placed[task]} of its minimum {need} pods placed"
    return None


@dataclass(frozen=True)
class Region:
    """Where a job's pods may go: a HyperNode, the virtual root (soft jobs) or anywhere (no topology)."""

    hyper_node: str | None
    tier: int | None
    nodes: frozenset[str]

    @property
    def label(self) -> str:
        if self.hyper_node is not None:
            return f"HyperNode {self.hyper_node} (tier {self.tier})"
        return "the whole cluster" if self.tier is None else f"the whole cluster (virtual root, tier {self.tier})"


def job_regions(job: VCJob, snap: Snapshot) -> list[Region]:
    """Candidate regions, lowest tier first, then by name; the whole cluster last for soft jobs."""
    topo = snap.topology
    nt = job.network_topology
    if nt is None:
        return [Region(None, None, frozenset(snap.nodes))]
    limit = nt.highest_tier_allowed if nt.mode == "hard" else None
    out = [Region(h, topo.hyper_nodes[h].tier, topo.members[h]) for h in topo.regions(limit) if h in topo.hyper_nodes]
    if nt.mode == "soft":
        out.append(Region(None, topo.top_tier, frozenset(snap.nodes)))
    return out


# ---- binpack ------------------------------------------------------------------------------------

def binpack_score(requests: Resources, allocatable: Resources, free: Resources, weights: BinpackWeights) -> Fraction:
    """Volcano's binpack node score for a task: for each requested resource with a weight, w ×
    (used + request) / allocatable (a node without the resource adds 0 but its weight counts; any
    resource over allocatable makes the score 0); divided by the weights' sum, × 100 × binpack.weight."""
    table = weights.of()
    score = Fraction(0)
    wsum = 0
    for r, req in sorted(requests.items()):
        w = table.get(r)
        if req <= 0 or w is None:
            continue
        alloc = allocatable.get(r, 0)
        wsum += w
        if alloc <= 0 or w == 0:
            continue
        used = alloc - free.get(r, 0)
        if used + req > alloc:
            return Fraction(0)
        score += Fraction(w * (used + req), alloc)
    if wsum:
        score /= wsum
    return score * 100 * weights.weight


# ---- shared state: node capacity and queue accounting -------------------------------------------

class QueueState:
    """realCapability (fixed) and allocated (growing) per queue, with hierarchy."""

    def __init__(self, snap: Snapshot) -> None:
        self.tree = QueueTree(snap.queues)
        accounts = account_queues(snap, hierarchical=True)
        self.real: dict[str, Resources] = {q: dict(a.real_capability) for q, a in accounts.items()}
        self.allocated: dict[str, dict[str, int]] = {q: dict(a.allocated) for q, a in accounts.items()}
        self.deserved: dict[str, Resources] = {q: dict(a.effective_deserved) for q, a in accounts.items()}
        self.reclaimable: dict[str, bool] = {q: a.reclaimable for q, a in accounts.items()}

    def chain(self, queue: str) -> tuple[str, ...]:
        return (queue, *self.tree.ancestors(queue))

    def admission_reason(self, queue: str) -> str | None:
        if queue not in self.tree.queues:
            return f"queue {queue} does not exist"
        if queue == ROOT_QUEUE or not self.tree.is_leaf(queue):
            return f"queue {queue} is not a leaf queue"
        if not self.tree.is_open(queue):
            return f"queue {queue} is not Open"
        return None

    def fit_reason(self, queue: str, requests: Resources) -> str | None:
        for q in self.chain(queue):
            for r, v in sorted(requests.items()):
                have = self.allocated[q].get(r, 0)
                cap = self.real[q].get(r, 0)
                if v > 0 and have + v > cap:
                    return (f"queue {q}: {r} allocated {format_milli(have)} + request {format_milli(v)} > "
                            f"realCapability {format_milli(cap)}")
        return None

    def add(self, queue: str, requests: Resources, sign: int = 1) -> None:
        for q in self.chain(queue):
            acc = self.allocated[q]
            for r, v in requests.items():
                acc[r] = acc.get(r, 0) + sign * v


@dataclass
class Context:
    """Everything the planners share: the snapshot, the jobs in Volcano's order and their facts."""

    snapshot: Snapshot
    jobs: list[VCJob]
    weights: BinpackWeights
    pods: dict[str, dict[str, list[Pod]]] = field(default_factory=dict)
    """job key -> task -> pods by index."""
    priority: dict[str, int] = field(default_factory=dict)
    regions: dict[str, list[Region]] = field(default_factory=dict)
    free: dict[str, Resources] = field(default_factory=dict)
    """node -> free resources in the snapshot (before any placement)."""
    now: datetime = field(default_factory=lambda: datetime.now(UTC))
    """Prices victims by how long they have run (``--now``)."""
    unfit: dict[str, str] = field(default_factory=dict)
    """job key -> why its minimum cannot fit the cluster's total capacity (``clip_to_cluster``): such a
    job is rejected without a search, and none of its pods is built."""
    _catalogue: Catalogue | None = None

    @classmethod
    def build(cls, snap: Snapshot, jobs: Sequence[VCJob], weights: BinpackWeights,
              now: datetime | None = None) -> Context:
        keys = [j.key for j in jobs]
        dup = [k for k, n in Counter(keys).items() if n > 1]
        if dup:
            raise ValueError(f"job {dup[0]} is given twice")
        ordered, unfit = clip_to_cluster(job_order(jobs, snap), snap)
        return cls(snapshot=snap, jobs=ordered, weights=weights, pods={j.key: job_pods(j) for j in ordered},
                   priority={j.key: job_priority(j, snap) for j in ordered},
                   regions={j.key: job_regions(j, snap) for j in ordered}, free=Capacity(snap).free,
                   now=now or datetime.now(UTC), unfit=unfit)

    @property
    def catalogue(self) -> Catalogue:
        """Every possible victim of the snapshot, priced at ``now`` (built once)."""
        if self._catalogue is None:
            self._catalogue = Catalogue.build(self.snapshot, self.now, set(QueueTree(self.snapshot.queues).queues))
        return self._catalogue

    def victim_cost(self, plan: PlacementPlan) -> int:
        """Σ cost of the plan's victims (``victims`` module)."""
        cands = self.catalogue.candidates
        return sum(cands[k].cost for jp in plan.jobs for v in jp.victims
                   if (k := f"{v.namespace}/{v.name}") in cands)

    def static_binpack(self, requests: Resources, node: str) -> int:
        """The pod's binpack score on the node with the snapshot's usage, as an integer (exact objective)."""
        score = binpack_score(requests, self.snapshot.nodes[node].allocatable, self.free[node], self.weights)
        return math.floor(score * BINPACK_SCALE)


class State:
    """Free capacity per node, queue allocations and evictions, changed only through a Statement."""

    def __init__(self, snap: Snapshot) -> None:
        self.snapshot = snap
        self.cap = Capacity(snap)
        self.queues = QueueState(snap)
        self.evicted: dict[str, str] = {}
        """pod key -> node, for every victim so far."""
        self.taken: Counter[str] = Counter()
        """PodGroup key -> pods evicted from it so far."""


class Statement:
    """Volcano's Statement: tentative allocations and evictions that are committed or discarded (undone)."""

    def __init__(self, state: State) -> None:
        self.state = state
        self.ops: list[tuple[Pod, str, str, str | None]] = []
        """(pod, node, queue, PodGroup): an allocation when the PodGroup is None, else an eviction."""

    def allocate(self, pod: Pod, node: str, queue: str) -> None:
        self.state.cap.add(pod, node)
        self.state.queues.add(queue, pod.requests)
        self.ops.append((pod, node, queue, None))

    def evict(self, pod: Pod, node: str, queue: str, group: str) -> None:
        self.state.cap.remove(pod, node)
        self.state.queues.add(queue, pod.requests, -1)
        self.state.evicted[pod.key] = node
        self.state.taken[group] += 1
        self.ops.append((pod, node, queue, group))

    def evictions(self) -> list[tuple[Pod, str]]:
        return [(pod, node) for pod, node, _q, group in self.ops if group is not None]

    def mark(self) -> int:
        return len(self.ops)

    def rollback(self, mark: int) -> None:
        """Undo every operation after ``mark``."""
        while len(self.ops) > mark:
            pod, node, queue, group = self.ops.pop()
            if group is None:
                self.state.cap.remove(pod, node)
                self.state.queues.add(queue, pod.requests, -1)
            else:
                self.state.cap.add(pod, node)
                self.state.queues.add(queue, pod.requests)
                del self.state.evicted[pod.key]
                self.state.taken[group] -= 1

    def discard(self) -> None:
        self.rollback(0)


# ---- victims: the rules for one job and one action ------------------------------------------------

@dataclass
class Rules:
    """What one job may evict by one action, fixed when the action starts (``victims`` module docstring)."""

    reason: Reason
    job: VCJob
    needs: frozenset[str]
    eligible: dict[str, Candidate]
    """Candidates allowed by the static rules, not evicted yet."""
    floors: dict[str, dict[str, int]]
    """Reclaim: queue -> resource -> the least allocation evictions may leave."""
    floor_chain: dict[str, tuple[str, ...]]
    """Reclaim: victim queue -> the queues whose floors its evictions touch."""


@dataclass
class VictimChoice:
    """A job placed with victims: bindings, victims (in eviction order), the region, the victims' cost."""

    bindings: list[Binding]
    victims: list[Candidate]
    region: Region
    cost: int


def job_needs(job: VCJob) -> frozenset[str]:
    return frozenset(r for r, v in job.total_requests().items() if v > 0)


def job_rules(ctx: Context, state: State, cat: Catalogue, job: VCJob, reason: Reason) -> tuple[Rules | None, str]:
    """The rules for this job and action, or None and why the action has nothing to offer."""
    snap = ctx.snapshot
    qs = state.queues
    if preemption_never(snap, job.priority_class_name):
        return None, "preemptionPolicy Never: no victims"
    needs = job_needs(job)
    if reason == "reclaim":
        own, des = qs.allocated[job.queue], qs.deserved[job.queue]
        if not any(own.get(r, 0) < des.get(r, 0) for r in needs):
            return None, f"queue {job.queue} is not below its deserved on a resource the job needs"
    over = {q: over_deserved(qs.allocated[q], qs.deserved[q], needs) for q in qs.allocated}
    priority = ctx.priority[job.key]
    eligible = {k: c for k, c in cat.candidates.items() if k not in state.evicted
                and statically_allowed(c, reason, job.queue, priority, qs.reclaimable.get(c.queue, True),
                                       over.get(c.queue, set()), needs) is None}
    floors: dict[str, dict[str, int]] = {}
    chains: dict[str, tuple[str, ...]] = {}
    if reason == "reclaim":
        mine = qs.chain(job.queue)
        for q in sorted({c.queue for c in eligible.values()}):
            chains[q] = floor_queues(qs.chain(q), mine)
            for f in chains[q]:
                floors[f] = {r: min(qs.deserved[f].get(r, 0), qs.allocated[f].get(r, 0)) for r in sorted(needs)}
    if not eligible:
        scope = f"in queue {job.queue} of lower priority" if reason == "preempt" else \
            "in a reclaimable queue above its deserved"
        return None, f"no running pod {scope} may be evicted"
    return Rules(reason=reason, job=job, needs=needs, eligible=eligible, floors=floors, floor_chain=chains), ""


def apply_choice(ctx: Context, state: State, job: VCJob, choice: VictimChoice) -> None:
    """Commit a choice: evictions first, then the job's pods."""
    stmt = Statement(state)
    for c in choice.victims:
        stmt.evict(c.pod, c.node, c.queue, c.group)
    pods = ctx.pods[job.key]
    for b in choice.bindings:
        stmt.allocate(pods[b.task][b.index], b.node, job.queue)


def gang_order(job: VCJob) -> list[tuple[str, int]]:
    """Each task's required replicas first, then the rest (the order a dry run tries pods in)."""
    minima = task_minima(job)
    order = [(t.name, i) for t in job.tasks for i in range(minima.get(t.name, 0))]
    return order + [(t.name, i) for t in job.tasks for i in range(minima.get(t.name, 0), t.replicas)]


# ---- the greedy (Volcano's allocate) -------------------------------------------------------------

class _Greedy:
    def __init__(self, ctx: Context, state: State, cat: Catalogue | None = None) -> None:
        self.ctx = ctx
        self.state = state
        self.cat = cat if cat is not None else Catalogue(snapshot=ctx.snapshot, now=datetime.now())
        self._static: dict[tuple[tuple[object, ...], str], str | None] = {}
        self._scores: dict[tuple[object, ...], Fraction] = {}

    def static(self, pod: Pod, node: str) -> str | None:
        key = (constraint_signature(pod), node)
        if key not in self._static:
            self._static[key] = static_reason(pod, self.ctx.snapshot.nodes[node])
        return self._static[key]

    def best_node(self, pod: Pod, nodes: list[str], queue: str) -> tuple[str | None, str]:
        """The highest-scoring feasible node, or None and why none is feasible."""
        qr = self.state.queues.fit_reason(queue, pod.requests)
        if qr is not None:
            return None, qr
        best: str | None = None
        best_score = Fraction(-1)
        why: Counter[str] = Counter()
        for n in nodes:
            reason = self.static(pod, n) or self.state.cap.fit_reason(pod, n)
            if reason is not None:
                why[reason] += 1
                continue
            score = self.score(pod, n)
            if score > best_score:
                best, best_score = n, score
        if best is not None:
            return best, ""
        detail = ", ".join(f"{c} {r}" for r, c in sorted(why.items(), key=lambda x: (-x[1], x[0])))
        return None, f"0/{len(nodes)} nodes fit" + (f" ({detail})" if detail else "")

    def dry_run(self, job: VCJob, region: Region, stmt: Statement) -> tuple[list[Binding], str | None]:
        """Place the gang inside the region; the bindings, and why the gang is not ready (None: ready)."""
        nodes = sorted(region.nodes)
        pods = self.ctx.pods[job.key]
        minima = task_minima(job)
        order = gang_order(job)
        placed: Counter[str] = Counter()
        bindings: list[Binding] = []
        first_failure: str | None = None
        failures = 0
        slack = job.replicas - job.min_available
        for task, i in order:
            pod = pods[task][i]
            node, why = self.best_node(pod, nodes, job.queue)
            if node is None:
                failures += 1
                if first_failure is None:
                    first_failure = f"task {task} replica {i}: {why}"
                if i < minima.get(task, 0) or failures > slack:
                    break  # the gang cannot become ready any more
                continue
            stmt.allocate(pod, node, job.queue)
            placed[task] += 1
            bindings.append(Binding(task=task, index=i, node=node))
        return _gang_result(job, placed, bindings, first_failure)

    def region_score(self, job: VCJob, region: Region) -> Fraction:
        """Volcano's binpack formula over the HyperNode's summed resources, usage as it stands (the dry
        run applied): Σ w_r × used_r / allocatable_r over the job's requested resources, / Σ w, × 100 × weight."""
        alloc: dict[str, int] = defaultdict(int)
        free: dict[str, int] = defaultdict(int)
        for n in region.nodes:
            for r, v in self.ctx.snapshot.nodes[n].allocatable.items():
                alloc[r] += v
                free[r] += self.state.cap.free[n].get(r, 0)
        table = self.ctx.weights.of()
        score = Fraction(0)
        wsum = 0
        for r in sorted(r for r, v in job.total_requests().items() if v > 0 and r in table):
            w = table[r]
            wsum += w
            if alloc[r] > 0 and w > 0:
                score += Fraction(w * (alloc[r] - free[r]), alloc[r])
        return (score / wsum if wsum else score) * 100 * self.ctx.weights.weight

    def place(self, job: VCJob) -> JobPlacement:
        base = {"namespace": job.namespace, "name": job.name, "queue": job.queue}
        if job.key in self.ctx.unfit:
            return JobPlacement(**base, admitted=False, reason=self.ctx.unfit[job.key])
        topo = job.network_topology is not None
        why = self.state.queues.admission_reason(job.queue)
        if why is not None:
            return JobPlacement(**base, admitted=False, reason=why)
        regions = self.ctx.regions[job.key]
        if not regions:
            nt = job.network_topology
            limit = f" of tier <= {nt.highest_tier_allowed}" if nt and nt.highest_tier_allowed is not None else ""
            return JobPlacement(**base, admitted=False, reason=f"no HyperNode{limit} exists (networkTopology hard)")
        failures: list[str] = []
        for _tier, group in groupby(regions, key=lambda rg: rg.tier):
            found: list[tuple[Fraction, str, Region, list[Binding]]] = []
            for region in group:
                stmt = Statement(self.state)
                bindings, short = self.dry_run(job, region, stmt)
                if short is None:
                    score = self.region_score(job, region) if topo else Fraction(0)
                    found.append((score, region.hyper_node or "", region, bindings))
                else:
                    failures.append(f"{region.label}: {short}" if topo else short)
                stmt.discard()
            if found:
                found.sort(key=lambda f: (-f[0], f[1]))
                _score, _name, region, bindings = found[0]
                stmt = Statement(self.state)
                pods = self.ctx.pods[job.key]
                for b in bindings:
                    stmt.allocate(pods[b.task][b.index], b.node, job.queue)
                where = f" in {region.label}" if topo else ""
                extra = len(bindings) - job.min_available
                reason = f"{len(bindings)} of {job.replicas} pods placed{where}" + (
                    f" ({extra} beyond minAvailable {job.min_available})" if extra > 0 else "")
                return JobPlacement(**base, admitted=True, reason=reason, hyper_node=region.hyper_node,
                                    tier=region.tier, bindings=tuple(bindings))
        if not topo:
            return JobPlacement(**base, admitted=False, reason=f"gang not ready: {failures[0]}")
        widest = regions[-1].tier  # the widest region tried says most about why nothing fits
        head = next(f for r, f in zip(regions, failures, strict=True) if r.tier == widest)
        more = f" (and {len(failures) - 1} more regions)" if len(failures) > 1 else ""
        return JobPlacement(**base, admitted=False,
                            reason=f"no region fits the gang (minAvailable {job.min_available}): {head}{more}")

    # ---- victims (Volcano's preempt and reclaim actions) -------------------------------------------

    def unit(self, c: Candidate, rules: Rules) -> list[Candidate] | None:
        """What evicting ``c`` takes: the pod alone while its gang keeps minMember, else the rest of its
        PodGroup (every occupying pod, all of them eligible), else None."""
        group = self.cat.groups[c.group]
        if self.state.taken[c.group] + 1 <= group.slack:
            return [c]
        rest = [k for k in group.occupying if k not in self.state.evicted]
        if any(k not in rules.eligible for k in rest):
            return None
        return sorted((rules.eligible[k] for k in rest), key=Candidate.order_key)

    def floors_hold(self, unit: list[Candidate], rules: Rules) -> bool:
        """Reclaim: evicting the unit keeps every floor queue at or above its floor."""
        if not rules.floors:
            return True
        drop: dict[tuple[str, str], int] = defaultdict(int)
        for c in unit:
            for q in rules.floor_chain.get(c.queue, ()):
                for r in rules.needs:
                    drop[q, r] += c.pod.requests.get(r, 0)
        alloc = self.state.queues.allocated
        return all(alloc[q].get(r, 0) - d >= rules.floors[q][r] for (q, r), d in drop.items())

    def fits(self, pod: Pod, node: str, queue: str) -> bool:
        cap, queues = self.state.cap, self.state.queues
        return cap.fit_reason(pod, node) is None and queues.fit_reason(queue, pod.requests) is None

    def could_fit(self, pod: Pod, node: str, victims: list[Candidate]) -> bool:
        """Volcano's check before evicting on a node: would all its victims together make room?"""
        free = self.state.cap.free[node]
        for r, v in pod.requests.items():
            if v > 0 and free.get(r, 0) + sum(c.pod.requests.get(r, 0) for c in victims) < v:
                return False
        return True

    def victim_dry_run(self, job: VCJob, region: Region, stmt: Statement,
                       rules: Rules) -> tuple[list[Binding], str | None]:
        """Place the gang's minimum inside the region, evicting where a pod does not fit: on the first
        node in ``preempt_order`` whose victims would make room, one by one in victim order until it fits."""
        nodes = sorted(region.nodes)
        pods = self.ctx.pods[job.key]
        placed: Counter[str] = Counter()
        bindings: list[Binding] = []
        why: str | None = None
        for task, i in gang_order(job):
            if gang_shortfall(job, placed) is None:
                break
            pod = pods[task][i]
            node, why = self.best_node(pod, nodes, job.queue)
            if node is None:
                node = self.evict_for(pod, nodes, job.queue, stmt, rules)
            if node is None:
                continue
            stmt.allocate(pod, node, job.queue)
            placed[task] += 1
            bindings.append(Binding(task=task, index=i, node=node))
        return _gang_result(job, placed, bindings, why)

    def score(self, pod: Pod, node: str) -> Fraction:
        """The pod's binpack score on the node as the simulation stands (cached by the node's free room)."""
        free = self.state.cap.free[node]
        req_key = tuple(sorted(pod.requests.items()))
        key = (node, req_key, tuple(free.get(r, 0) for r, _ in req_key))
        score = self._scores.get(key)
        if score is None:  # exact Fractions are slow: a node's score only changes with its free room
            score = binpack_score(pod.requests, self.ctx.snapshot.nodes[node].allocatable, free, self.ctx.weights)
            self._scores[key] = score
        return score

    def preempt_order(self, pod: Pod, nodes: list[str]) -> list[str]:
        """Volcano's preempt node order (``util.PrioritizeNodes`` then ``SortNodes``): the nodes that pass
        the static predicates, by binpack score on the state before this pod's evictions, highest
        first, ties by name (module docstring)."""
        ok = [n for n in nodes if self.static(pod, n) is None]
        scores = {n: self.score(pod, n) for n in ok}
        return sorted(ok, key=lambda n: (-scores[n], n))

    def evict_for(self, pod: Pod, nodes: list[str], queue: str, stmt: Statement, rules: Rules) -> str | None:
        for n in self.preempt_order(pod, nodes):
            victims = [c for c in self.cat.by_node.get(n, []) if c.key in rules.eligible
                       and c.key not in self.state.evicted]
            if not victims or not self.could_fit(pod, n, victims):
                continue
            mark = stmt.mark()
            for c in victims:
                if c.key in self.state.evicted:
                    continue  # gone with its whole PodGroup
                unit = self.unit(c, rules)
                if unit is None or not self.floors_hold(unit, rules):
                    continue
                for u in unit:
                    stmt.evict(u.pod, u.node, u.queue, u.group)
                if self.fits(pod, n, queue):
                    return n
            stmt.rollback(mark)
        return None

    def with_victims(self, job: VCJob, rules: Rules) -> tuple[VictimChoice | None, str]:
        """The greedy's victims for the job (state unchanged): regions in order, the first that works."""
        first: str | None = None
        for region in self.ctx.regions[job.key]:
            stmt = Statement(self.state)
            bindings, short = self.victim_dry_run(job, region, stmt, rules)
            evicted = [rules.eligible[p.key] for p, _n in stmt.evictions()]
            stmt.discard()
            if short is None:
                return VictimChoice(bindings=bindings, victims=evicted, region=region,
                                    cost=sum(c.cost for c in evicted)), ""
            if first is None:
                first = f"{region.label}: {short}" if job.network_topology is not None else short
        return None, first or "no region"


def _task_pos(job: VCJob, task: str) -> int:
    return next(i for i, t in enumerate(job.tasks) if t.name == task)


def greedy_place(ctx: Context) -> PlacementPlan:
    t0 = time.perf_counter()
    state = State(ctx.snapshot)
    g = _Greedy(ctx, state)
    out = [g.place(job) for job in ctx.jobs]
    wall = round(time.perf_counter() - t0, 3)
    plan = PlacementPlan(jobs=tuple(out), solver=SolverRecord(name="greedy", status="HEURISTIC", wall_seconds=wall))
    log.info("placement greedy: %d of %d jobs admitted in %.3fs", sum(j.admitted for j in out), len(out), wall)
    return plan


def explain_rejections(ctx: Context, plan: PlacementPlan) -> PlacementPlan:
    """Reasons for the jobs a plan does not admit, found by the greedy on the plan's final state; a job
    the greedy can still place is placed (a plan not proven optimal may leave room). That state counts
    every placement but no room freed by victims, so such a job is replayed before the evictions and
    changes nothing they rely on; a job in the queue of a reclaiming job keeps the plan's reason (its
    pods would lift the queue that reclaim needs below its deserved)."""
    state = State(ctx.snapshot)
    reclaimers: set[str] = set()
    for jp in plan.jobs:
        if jp.admitted:
            stmt = Statement(state)
            pods = ctx.pods[jp.key]
            for b in jp.bindings:
                stmt.allocate(pods[b.task][b.index], b.node, jp.queue)
            if any(v.reason == "reclaim" for v in jp.victims):
                reclaimers.add(jp.queue)
    g = _Greedy(ctx, state)
    by_key = {j.key: j for j in ctx.jobs}
    out = []
    for jp in plan.jobs:
        if jp.admitted:
            out.append(jp)
            continue
        out.append(jp if jp.queue in reclaimers else g.place(by_key[jp.key]))
    return plan.model_copy(update={"jobs": tuple(out)})


# ---- victims pass (Volcano's preempt, then reclaim, after allocate) -------------------------------

def _victims(choice: VictimChoice, reason: Reason) -> tuple[Victim, ...]:
    return tuple(Victim(namespace=c.pod.namespace, name=c.pod.name, node=c.node, reason=reason)
                 for c in sorted(choice.victims, key=lambda c: c.key))


def victim_text(job: VCJob, n_bindings: int, region_label: str | None, reason: Reason, victims: int,
                cost: int) -> str:
    where = f" in {region_label}" if region_label else ""
    return (f"{n_bindings} of {job.replicas} pods placed{where} after {reason}ing {victims} pods "
            f"(victim cost {cost})")


def plan_victims(ctx: Context, plan: PlacementPlan) -> PlacementPlan:
    """Volcano's preempt, then reclaim, for each job the plan does not admit, in job order, on the state
    the jobs before it left: the admitted jobs' pods placed, earlier victims gone. A job that now fits
    without victims (room an earlier job's victims freed beyond its own need, or queue room they gave
    back) is placed there first, as Volcano's next allocate would. Jobs placed by this pass are
    replayed after the evictions (``after_evictions``)."""
    if all(jp.admitted for jp in plan.jobs):
        return plan
    by_key = {j.key: j for j in ctx.jobs}
    state = State(ctx.snapshot)
    for jp in plan.jobs:
        if jp.admitted:
            apply_choice(ctx, state, by_key[jp.key], VictimChoice(
                bindings=list(jp.bindings), victims=[], region=Region(None, None, frozenset()), cost=0))
    cat = ctx.catalogue
    g = _Greedy(ctx, state, cat)
    out: list[JobPlacement] = []
    for jp in plan.jobs:
        job = by_key[jp.key]
        if (jp.admitted or job.key in ctx.unfit or state.queues.admission_reason(job.queue) is not None
                or not ctx.regions[job.key]):
            out.append(jp)
            continue
        if state.evicted:
            freed = g.place(job)  # commits when admitted
            if freed.admitted:
                out.append(freed.model_copy(update={"reason": f"{freed.reason} (room freed by earlier victims)",
                                                    "after_evictions": True}))
                continue
        notes: list[str] = []
        placed: JobPlacement | None = None
        for reason in REASONS:
            rules, why = job_rules(ctx, state, cat, job, reason)
            if rules is None:
                notes.append(f"{reason}: {why}")
                continue
            chosen, gwhy = g.with_victims(job, rules)
            if chosen is None:
                notes.append(f"{reason}: {gwhy}")
                continue
            apply_choice(ctx, state, job, chosen)
            r = chosen.region
            text = victim_text(job, len(chosen.bindings), r.label if job.network_topology is not None else None,
                               reason, len(chosen.victims), chosen.cost)
            placed = JobPlacement(namespace=job.namespace, name=job.name, queue=job.queue, admitted=True,
                                  reason=text, hyper_node=r.hyper_node, tier=r.tier, bindings=tuple(chosen.bindings),
                                  victims=_victims(chosen, reason), after_evictions=True)
            log.info("placement victims: %s %s %d pods, cost %d", job.key, reason, len(chosen.victims), chosen.cost)
            break
        if placed is None:
            placed = jp.model_copy(update={"reason": f"{jp.reason}; no victims ({'; '.join(notes)})"})
        out.append(placed)
    return plan.model_copy(update={"jobs": tuple(out)})


def victim_notes(ctx: Context, plan: PlacementPlan, proven: bool) -> dict[str, str]:
    """For the jobs a plan does not admit: why each action offers nothing on the plan's final state
    (``job_rules``), or that victims exist but the plan (``proven``: optimal) does not use them."""
    by_key = {j.key: j for j in ctx.jobs}
    state = State(ctx.snapshot)
    cands = ctx.catalogue.candidates
    for jp in plan.jobs:
        if not jp.admitted:
            continue
        stmt = Statement(state)
        for v in jp.victims:
            c = cands[f"{v.namespace}/{v.name}"]
            stmt.evict(c.pod, c.node, c.queue, c.group)
        pods = ctx.pods[jp.key]
        for b in jp.bindings:
            stmt.allocate(pods[b.task][b.index], b.node, jp.queue)
    out: dict[str, str] = {}
    for jp in plan.jobs:
        job = by_key[jp.key]
        if (jp.admitted or job.key in ctx.unfit or state.queues.admission_reason(job.queue) is not None
                or not ctx.regions[job.key]):
            continue
        notes = []
        for reason in REASONS:
            rules, why = job_rules(ctx, state, ctx.catalogue, job, reason)
            unused = ("no victim set admits it without losing admissions worth more" if proven else
                      "no victim set found in the time limit admits it")
            notes.append(f"{reason}: {why}" if rules is None else
                         f"{reason}: {len(rules.eligible)} pods may be evicted, but {unused}")
        out[jp.key] = "; ".join(notes)
    return out


# ---- the exact objective, for any plan ------------------------------------------------------------

@dataclass(frozen=True, order=True)
class PlanKey:
    """Lower is better: (−weighted admissions, victim cost, tier sum, −extra replicas, newly occupied
    nodes, −binpack)."""

    neg_admitted: int
    victim_cost: int
    tiers: int
    neg_extras: int
    opened: int
    neg_binpack: int


def plan_key(ctx: Context, plan: PlacementPlan) -> PlanKey:
    by_key = {j.key: j for j in ctx.jobs}
    admitted = tiers = extras = binpack = 0
    receiving: set[str] = set()
    for jp in plan.jobs:
        if not jp.admitted:
            continue
        job = by_key[jp.key]
        admitted += admission_weight(ctx.priority[jp.key])
        tiers += jp.tier or 0
        extras += len(jp.bindings) - job.min_available
        pods = ctx.pods[jp.key]
        for b in jp.bindings:
            receiving.add(b.node)
            binpack += ctx.static_binpack(pods[b.task][b.index].requests, b.node)
    occupied = set(ctx.snapshot.pods_by_node)
    return PlanKey(-admitted, ctx.victim_cost(plan), tiers, -extras, len(receiving - occupied), -binpack)


# ---- validation (independent of the search) -------------------------------------------------------

def placement_violations(snap: Snapshot, jobs: Sequence[VCJob], plan: PlacementPlan) -> list[str]:
    """Every rule the plan breaks, as short sentences; empty when valid. Shares only the oracle, the
    queue accounting and the pod facts with the planners."""
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
    cat = Catalogue.build(snap, datetime.now(UTC), set(tree.queues))  # the time only prices victims
    taken: Counter[str] = Counter()  # PodGroup -> pods evicted so far
    evicted: set[str] = set()
    static_cache: dict[tuple[tuple[object, ...], str], str | None] = {}
    # Volcano's actions: allocate places every job it can, then preempt and reclaim evict for the rest
    for jp in sorted(plan.jobs, key=lambda j: j.after_evictions or bool(j.victims)):
        job = given.get(jp.key)
        if job is None:
            out.append(f"job {jp.key} is not one of the jobs to place")
            continue
        if jp.queue != job.queue:
            out.append(f"job {jp.key}: queue {jp.queue} but the job names {job.queue}")
        if not jp.admitted:
            if jp.victims:
                out.append(f"job {jp.key} is not admitted but has victims")
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
        if jp.victims:
            out.extend(_victim_violations(snap, job, jp, cat, tree, accounts, allocated, taken, evicted))
            for vic in jp.victims:
                p = snap.pods.get(f"{vic.namespace}/{vic.name}")
                c = cat.candidates.get(f"{vic.namespace}/{vic.name}")
                if p is not None and p.node_name is not None and p.occupying:
                    cap.remove(p, p.node_name)
                    if c is not None:
                        for q in (c.queue, *tree.ancestors(c.queue)):
                            for r, x in p.requests.items():
                                allocated[q][r] = allocated[q].get(r, 0) - x
        pods = job_pods(job)
        placed: Counter[str] = Counter()
        seen: set[tuple[str, int]] = set()
        nodes: set[str] = set()
        for b in jp.bindings:
            where = f"job {jp.key} pod {b.pod_name(job.name)}"
            if b.task not in pods or not 0 <= b.index < len(pods[b.task]):
                out.append(f"{where}: no such task replica")
                continue
            if (b.task, b.index) in seen:
                out.append(f"{where} is bound twice")
                continue
            seen.add((b.task, b.index))
            if b.node not in snap.nodes:
                out.append(f"{where}: unknown node {b.node}")
                continue
            pod = pods[b.task][b.index]
            key = (constraint_signature(pod), b.node)
            if key not in static_cache:
                static_cache[key] = static_reason(pod, snap.nodes[b.node])
            reason = static_cache[key] or cap.fit_reason(pod, b.node)
            if reason is not None:
                out.append(f"{where} on {b.node}: {reason}")
            cap.add(pod, b.node)
            placed[b.task] += 1
            nodes.add(b.node)
            for q in (job.queue, *tree.ancestors(job.queue)):
                for r, v in pod.requests.items():
                    allocated[q][r] = allocated[q].get(r, 0) + v
                    touched[q].add(r)
        short = gang_shortfall(job, placed)
        if short is not None:
            out.append(f"job {jp.key} is admitted but the gang is not ready: {short}")
        out.extend(_topology_violations(jp, job, nodes, snap))
        for q in (job.queue, *tree.ancestors(job.queue)):  # after each job: evictions may not excuse it later
            real = accounts[q].real_capability
            for r in sorted(touched[q]):
                msg = (f"queue {q}: {r} allocated {format_milli(allocated[q].get(r, 0))} > realCapability "
                       f"{format_milli(real.get(r, 0))} after placement")
                if allocated[q].get(r, 0) > real.get(r, 0) and msg not in out:
                    out.append(msg)
    return out


def _victim_violations(snap: Snapshot, job: VCJob, jp: JobPlacement, cat: Catalogue, tree: QueueTree,
                       accounts: dict[str, QueueAccount], allocated: dict[str, dict[str, int]],
                       taken: Counter[str], evicted: set[str]) -> list[str]:
    """The victims of one job against the rules (``victims``): allowed pods, the action's queue rules,
    the gang of every victim PodGroup over the plan so far, and the reclaim floors. Updates ``taken``
    and ``evicted``; the caller frees the victims' capacity and allocations."""
    out: list[str] = []
    who = f"job {jp.key}"
    if preemption_never(snap, job.priority_class_name):
        out.append(f"{who}: its PriorityClass has preemptionPolicy Never but it evicts pods")
    needs = job_needs(job)
    priority = job_priority(job, snap)
    deserved = {q: a.effective_deserved for q, a in accounts.items()}
    before = {q: dict(a) for q, a in allocated.items()}
    mine = (job.queue, *tree.ancestors(job.queue))
    reasons = {v.reason for v in jp.victims}
    if len(reasons) > 1:
        out.append(f"{who}: victims of both preempt and reclaim (one action places a job)")
    if "reclaim" in reasons and not any(before[job.queue].get(r, 0) < deserved[job.queue].get(r, 0) for r in needs):
        out.append(f"{who}: reclaims but queue {job.queue} is not below its deserved on a resource the job needs")
    drop: dict[tuple[str, str], int] = defaultdict(int)
    floor_touch: set[str] = set()
    mine_taken: Counter[str] = Counter()
    for v in jp.victims:
        key = f"{v.namespace}/{v.name}"
        where = f"{who} victim {key}"
        pod = snap.pods.get(key)
        if pod is None:
            out.append(f"{where}: no such pod")
            continue
        if key in evicted:
            out.append(f"{where}: evicted twice")
            continue
        c = cat.candidates.get(key)
        if c is None:
            why = cat.protected.get(key) or "not a running pod of a PodGroup in a known queue"
            out.append(f"{where}: may not be a victim ({why})")
            continue
        if v.node != c.node:
            out.append(f"{where}: runs on {c.node}, not {v.node}")
        over = over_deserved(before[c.queue], deserved[c.queue], needs)
        why2 = statically_allowed(c, v.reason, job.queue, priority, accounts[c.queue].reclaimable, over, needs)
        if why2 is not None:
            out.append(f"{where} ({v.reason}): {why2}")
        evicted.add(key)
        taken[c.group] += 1
        mine_taken[c.group] += 1
        if v.reason == "reclaim":
            chain = (c.queue, *tree.ancestors(c.queue))
            for q in floor_queues(chain, mine):
                floor_touch.add(q)
                for r in needs:
                    drop[q, r] += pod.requests.get(r, 0)
    for gk in sorted(mine_taken):
        g = cat.groups[gk]
        if taken[gk] > g.slack and not all(k in evicted for k in g.occupying):
            out.append(f"{who}: takes {taken[gk]} pods of PodGroup {gk} (ready {g.ready}, minMember "
                       f"{g.min_member}) without taking all of it")
    for q in sorted(floor_touch):
        for r in sorted(needs):
            floor = min(deserved[q].get(r, 0), before[q].get(r, 0))
            left = before[q].get(r, 0) - drop[q, r]
            if left < floor:
                out.append(f"{who}: reclaim leaves queue {q} with {r} {format_milli(left)} < "
                           f"{format_milli(floor)} (deserved {format_milli(deserved[q].get(r, 0))})")
    return out


def _topology_violations(jp: JobPlacement, job: VCJob, nodes: set[str], snap: Snapshot) -> list[str]:
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
    return out


def validate_placement(snap: Snapshot, jobs: Sequence[VCJob], plan: PlacementPlan) -> None:
    """Raise PlanInvalidError when the plan breaks any rule."""
    violations = placement_violations(snap, jobs, plan)
    if violations:
        raise PlanInvalidError(violations)


# ---- entry point -----------------------------------------------------------------------------------

def _gang_result(job: VCJob, placed: Counter[str], bindings: list[Binding],
                 why: str | None) -> tuple[list[Binding], str | None]:
    """A dry run's outcome: the bindings in task order when the gang is ready, else why it is not."""
    short = gang_shortfall(job, placed)
    if short is None:
        return sorted(bindings, key=lambda b: (_task_pos(job, b.task), b.index)), None
    return bindings, f"{short}; {why}" if why else short


def plan_placement(snap: Snapshot, jobs: Sequence[VCJob], solver: str = "auto",
                   options: PlanOptions | None = None, weights: BinpackWeights | None = None,
                   now: datetime | str | None = None) -> PlacementPlan:
    """Place the jobs with the named solver (greedy | cpsat | auto); the plan is validated first.
    greedy: Volcano's allocate, then its preempt and reclaim for the jobs that do not fit; cpsat: the
    exact model, which chooses placements and victims jointly for all jobs, hinted with the greedy's
    plan (always run first) and, when it admits the greedy's weight, no worse than it on victim cost
    and on tier sum; auto: the exact plan when ``plan_key`` ranks it strictly better, else the greedy's.
    ``now`` (RFC 3339, default the current time) prices victims by how long they have run."""
    if solver not in SOLVERS:
        raise ValueError(f"unknown solver {solver!r}; choose from {', '.join(SOLVERS)}")
    from optplan.solvers.spot import parse_now  # the shared --now parser (spot imports OR-Tools)

    options = options or PlanOptions()
    ctx = Context.build(snap, jobs, weights or BinpackWeights(), parse_now(now))
    t0 = time.perf_counter()
    greedy = plan_victims(ctx, greedy_place(ctx))
    if solver == "greedy":
        plan = greedy
    else:
        from optplan.solvers import placement_cpsat  # heavy backend, imported when asked for

        exact = placement_cpsat.solve(ctx, options, greedy)
        if solver == "cpsat":
            plan = exact
        else:
            g_key, e_key = plan_key(ctx, greedy), plan_key(ctx, exact)
            log.info("placement auto: greedy %s, cpsat %s (%s)", g_key, e_key, exact.solver.status)
            if e_key < g_key:
                plan = exact.model_copy(update={"solver": exact.solver.model_copy(update={"name": "auto"})})
            else:  # a tie keeps the greedy's plan (Volcano's own choices); optimal when CP-SAT proved its equal
                status = exact.solver.status if e_key == g_key else "FEASIBLE"
                plan = greedy.model_copy(update={"solver": exact.solver.model_copy(update={"name": "auto",
                                                                                         "status": status})})
    wall = round(time.perf_counter() - t0, 3)
    plan = plan.model_copy(update={"solver": plan.solver.model_copy(update={"wall_seconds": wall})})
    validate_placement(snap, ctx.jobs, plan)
    return plan


def place_jobs(snap: Snapshot, jobs: Sequence[VCJob], *, solver: str = "auto", time_limit: float = 10.0,
               workers: int = 1, seed: int = 0, weights: BinpackWeights | None = None,
               now: datetime | str | None = None) -> PlacementPlan:
    """``plan_placement`` with the options spelled out (what the CLI adapter calls)."""
    return plan_placement(snap, jobs, solver, PlanOptions(time_limit=time_limit, workers=workers, seed=seed), weights,
                          now)
