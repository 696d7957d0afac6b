"""Queue placement: where would Volcano put the pods of pending VCJobs, and can an exact model do better?

**Pod facts.** Each replica of a VCJob task becomes a ``snapshot.Pod`` with ``node_name`` None, named
``<job>-<task>-<index>`` as Volcano's job controller names it, with the template's requests,
nodeSelector, required node affinity and tolerations, so the feasibility oracle (``oracle``) applies
as is.

**Gang.** A job is admitted when at least ``minAvailable`` of its pods are placed and, when the job's
minAvailable is not below the sum of its tasks' minimums (a task's ``minAvailable``, else its
replicas), every task has its minimum too: Volcano's ``JobInfo.CheckTaskReady``; and at least one pod
is placed. Replicas beyond that are placed when they fit. A job that is not admitted places nothing
(Volcano's Statement is discarded).

**Running gangs.** A replica whose pod ``<job>-<task>-<index>`` is in the snapshot bound to a node and
not terminal, or Succeeded (``held_pods``; a pod whose job-name label or owning PodGroup names another
job does not count) already counts for the gang, as Volcano's ``ReadyTaskNum`` counts it: only the
other replicas (absent, Pending without a node, Failed) are placed, and minAvailable and the tasks'
minimums count the running ones (``needed``). With a network topology, the candidate regions are the
HyperNodes that hold every node the running pods are on — the lowest-tier one first, then its
ancestors up to highestTierAllowed (hard: Volcano's ``getSearchRoot`` bounds the search by the
allocated HyperNode's highest ancestor within the limit) or up to the top and then the whole cluster
(soft). A running gang whose running pods already make it ready is admitted only when one of its
pending pods fits. The running pods of a job being placed are never victims (``shield``).

**Order** (Volcano's allocate with the capacity, priority and gang plugins). Queues by
``compare_queues``: higher ``spec.priority``, then the lower share (allocated / deserved, the largest
ratio over the resources the effective deserved lists; below two queues' lowest common ancestor the
shares of the subtrees' tops are compared), a queue with a deserved before a best-effort one, then the
name. Jobs in a queue by ``job_key_in_queue``: higher PriorityClass value, a gang not ready yet before
a ready one, earlier creationTimestamp (none: last), namespace/name. A job's pods by task priority (the
task template's priorityClassName, else the job's), each task's required replicas first. The plan lists
jobs in this order taken at the snapshot (``job_order``); the greedy interleaves as allocate does.

**Queues.** For the job's queue and every ancestor, ``allocated + request ≤ realCapability`` on every
requested resource (the capacity plugin with hierarchy, ``queues.account_queues``), checked per pod as
it is placed. The queue must exist, be a leaf and be Open.

**Topology.** ``mode: hard``: every pod inside one HyperNode of tier ≤ ``highestTierAllowed`` (none
written: any tier, still one HyperNode). ``mode: soft``: the same search over every HyperNode, then
the virtual root (the whole cluster). No ``networkTopology``: the whole cluster, ``hyperNode`` and
``tier`` null.

**Greedy** (Volcano's allocate, ``greedy_place``): pop the first queue (shares as the placements so
far leave them), pop its first job, give it one turn, push the job back while it has pods left and its
turn placed one, push the queue back. A job's first turn places its gang: candidate regions grouped by
tier ascending; each region is dry-run in a Statement (tentative allocations, undone), pods tried in
the order above until the gang is ready (and at least one pod is placed), a pod that fits nowhere
skipped unless its task needs it; the lowest tier with any success wins, then the region with the
best HyperNode binpack score (Volcano's formula over the HyperNode's summed resources after the dry
run), then the name. Each later turn of an admitted job places one more pod in its region (a pod that
fits nowhere is dropped), as allocate's turn of a ready job places one task. Within a dry run each pod
goes to the node with the highest binpack score (``binpack_score``, Volcano's formula with
``BinpackWeights``), ties to the first node by name (Volcano picks at random among equals). Where this
simplifies: an admitted job's extra pods stay in the region its gang chose (Volcano may widen a hard
job's HyperNode up to highestTierAllowed for them); queue ties go to the name, job ties to
namespace/name (Volcano: creationTimestamp, then UID); the required replicas of each task come first
(Volcano's task order knows only priorities).

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

**Exact** (``cpsat`` with ``victims_cpsat``): placements and victims of all jobs decided
jointly — a running pod may be evicted only for an admitted job entitled to it that lands on its
node (or takes its whole PodGroup), capacity per node is the free room plus what evictions there
release, and the queue rules are checked on the state at each job's turn in the validator's replay.
Lexicographic: most priority-weighted jobs admitted (weight ``max(priority, 0) + 1``), then least victim
cost, then lowest tier sum, then most replicas beyond the minimum, then fewest newly occupied nodes,
then best static binpack, then — only to break ties — the jobs admitted earlier in Volcano's order (the
order of the greedy's first turns, ``order_weights``). The greedy's plan with its victims is a solution
of that model and its hint, so the optimum is never worse. When the exact model admits no more weight
than the greedy, it also keeps to the plans no worse than the greedy's on victim cost and on tier sum
(the order alone could trade a higher tier for less cost), so its plan dominates the greedy's on both;
when it admits more, the admissions differ and nothing is compared (``cpsat``'s docstring,
also for what OPTIMAL then means). ``plan_key`` computes that order for any plan, so ``auto`` keeps the
better of the greedy and CP-SAT plans (the greedy's on a tie); the exact plan shows the greedy's victims
of a job (``greedyVictims``) where they differ.

Every plan passes ``validate_placement`` (an independent re-check) before ``plan_placement`` returns it.
The dispatch by solver name (``plan_placement``, ``place_jobs``) is ``optplan.solvers.placement.place``, so that
this greedy module never imports the exact one.
"""

from __future__ import annotations

import logging
import math
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from fractions import Fraction
from functools import cmp_to_key
from itertools import groupby
from typing import Any

from optplan.errors import InputError, PlanInvalidError
from optplan.models.limits import SYSTEM_PRIORITY_CLASSES
from optplan.models.placement import Binding, BinpackWeights, JobPlacement, PlacementPlan, Victim
from optplan.models.quantity import format_milli
from optplan.models.queues import ROOT as ROOT_QUEUE
from optplan.models.queues import JobTask, QueueTree, VCJob
from optplan.models.repack import SolverRecord
from optplan.models.snapshot import GROUP_NAME_ANNOTATION, Pod, Resources, Snapshot
from optplan.solvers.core.oracle import POD_SLOT, Capacity, constraint_signature, static_reason
from optplan.solvers.placement.victims import (
    REASONS,
    Candidate,
    Catalogue,
    Reason,
    dims,
    never_tasks,
    reclaim_order,
    reclaimer_blocked,
    statically_allowed,
    victim_blocked,
)
from optplan.solvers.quota.queues import QueueAccount, account_queues, unheld_deserved

log = logging.getLogger(__name__)

BINPACK_SCALE = 100
"""Static binpack scores (0..100 × weight) are summed as integers after multiplying by this."""


# ---- pod facts, priorities, gang minimums -------------------------------------------------------

def class_priority(name: str | None, snap: Snapshot) -> int:
    """The value of the named PriorityClass; the globalDefault class's when none is named; else 0.
    An unknown class counts as 0 (Kubernetes would refuse the pods)."""
    if name is not None:
        pc = snap.priority_classes.get(name)
        return pc.value if pc is not None else 0
    defaults = sorted((pc for pc in snap.priority_classes.values() if pc.global_default), key=lambda p: p.name)
    return defaults[0].value if defaults else 0


def job_priority(job: VCJob, snap: Snapshot) -> int:
    """The value of the job's PriorityClass (Volcano's JobInfo.Priority, from the PodGroup's
    priorityClassName, which the job controller copies from the job's)."""
    return class_priority(job.priority_class_name, snap)


def task_priority(job: VCJob, task: JobTask, snap: Snapshot) -> int:
    """A pod's priority (Volcano's TaskInfo.Priority: the pod's spec.priority, which admission sets from
    its PriorityClass): the task template's class, else the job's."""
    return class_priority(job.task_priority_class(task), snap)


def admission_weight(priority: int) -> int:
    """What admitting a job is worth in the exact objective: positive, growing with priority."""
    return max(priority, 0) + 1


def queue_share(qs: QueueState, queue: str) -> tuple[Fraction, bool]:
    """The capacity plugin's share of a queue and whether it lists a deserved: the largest allocated /
    deserved over the resources its (effective) deserved lists above 0 (allocated above a deserved of 0
    is 1); a queue that lists none is best-effort, share 1."""
    deserved = {r: v for r, v in qs.deserved.get(queue, {}).items() if v > 0}
    if not deserved:
        return Fraction(1), False
    alloc = qs.allocated.get(queue, {})
    return max(Fraction(alloc.get(r, 0), v) for r, v in deserved.items()), True


def compare_queues(qs: QueueState, a: str, b: str) -> int:
    """The capacity plugin's QueueOrderFn (hierarchical), negative when ``a`` goes first: higher
    ``spec.priority``; then, below the two queues' lowest common ancestor, the lower share of the two
    subtrees' tops (siblings under one parent: the queues themselves); on equal shares a queue with a
    deserved before a best-effort one; then the name (Volcano: creationTimestamp, then UID). A queue
    that does not exist goes last."""
    known_a, known_b = a in qs.tree.queues, b in qs.tree.queues
    if known_a != known_b:
        return -1 if known_a else 1
    if known_a:
        pa, pb = qs.tree.queues[a].priority, qs.tree.queues[b].priority
        if pa != pb:
            return -1 if pa > pb else 1
        ca, cb = qs.chain(a)[::-1], qs.chain(b)[::-1]  # root first
        i = next((k for k, (x, y) in enumerate(zip(ca, cb, strict=False)) if x != y), min(len(ca), len(cb)) - 1)
        (sa, da), (sb, db) = queue_share(qs, ca[i]), queue_share(qs, cb[i])
        if sa != sb:
            return -1 if sa < sb else 1
        if da != db:
            return -1 if da else 1
    return (a > b) - (a < b)


def queue_order_key(qs: QueueState) -> Callable[[str], Any]:
    """A sort key for queue names in ``compare_queues`` order (on the allocations as they stand)."""
    def cmp(a: str, b: str) -> int:
        return compare_queues(qs, a, b)
    return cmp_to_key(cmp)


def job_key_in_queue(job: VCJob, priority: int, ready: bool) -> tuple[int, bool, bool, str, str, str]:
    """Volcano's JobOrderFn inside a queue: higher priority (priority plugin), a gang not ready yet before
    a ready one (gang plugin), earlier creation (a job without a creationTimestamp was just submitted: last
    among equals), then namespace/name (Volcano: UID)."""
    return (-priority, ready, job.creation_timestamp == "", job.creation_timestamp, job.namespace, job.name)


def job_order(jobs: Iterable[VCJob], snap: Snapshot, held: dict[str, dict[str, frozenset[int]]] | None = None,
              ) -> list[VCJob]:
    """The jobs in Volcano's order at the snapshot: queues by ``compare_queues`` (shares before any
    placement), the jobs of one queue by ``job_key_in_queue`` (a running gang whose running pods already
    make it ready counts as ready). The greedy interleaves queues as allocate does (``greedy_place``);
    this order is the plan's, the victims pass's and the exact model's replay order."""
    jobs = list(jobs)
    qs = QueueState(snap)
    held = held if held is not None else {j.key: held_indices(j, snap) for j in jobs}
    queues = sorted({j.queue for j in jobs}, key=queue_order_key(qs))
    rank = {q: i for i, q in enumerate(queues)}

    def key(j: VCJob) -> tuple[int, tuple[int, bool, bool, str, str, str]]:
        ready = gang_shortfall(j, Counter(), held_counts(held.get(j.key, {}))) is None
        return rank[j.queue], job_key_in_queue(j, job_priority(j, snap), ready)
    return sorted(jobs, key=key)


JOB_NAME_LABEL = "volcano.sh/job-name"
"""The label Volcano's job controller puts on a job's pods."""


def _of_job(pod: Pod, job: VCJob, snap: Snapshot) -> bool:
    """The pod named like a replica of the job is the job's: its job-name label (when written) names the
    job, and its PodGroup (when in the snapshot and owned by a VCJob) is the job's."""
    label = pod.labels.get(JOB_NAME_LABEL)
    if label is not None and label != job.name:
        return False
    pg = snap.pod_groups.get(pod.group_key) if pod.group_key is not None else None
    owner = pg.owner if pg is not None else None
    return owner is None or owner.kind != "Job" or owner.name == job.name


def held_pods(job: VCJob, snap: Snapshot) -> dict[str, dict[int, Pod]]:
    """Task -> replica index -> the snapshot's pod ``<job>-<task>-<index>`` of the job that already counts
    for its gang (Volcano's ReadyTaskNum): bound to a node and not terminal, or Succeeded. Such a replica
    is not placed again; every other replica (absent, Pending without a node, Failed) is pending."""
    out: dict[str, dict[int, Pod]] = {}
    prefix = f"{job.namespace}/{job.name}-"
    tasks = {t.name: t for t in job.tasks}
    for key, p in snap.pods.items():
        if not key.startswith(prefix) or not (p.occupying or p.phase == "Succeeded"):
            continue
        task, _sep, index = key[len(prefix):].rpartition("-")
        t = tasks.get(task)
        if t is None or not index.isdigit() or int(index) >= t.replicas or not _of_job(p, job, snap):
            continue
        out.setdefault(task, {})[int(index)] = p
    return out


WAITING_PHASES = frozenset({"", "Pending", "Inqueue"})
"""VCJob phases of a job none of whose gang runs yet."""
ACTIVE_PHASES = frozenset({"Running", "Restarting"})
"""VCJob phases of a job whose gang (some of it) runs: placed when some replica is not running."""


def jobs_to_place(snap: Snapshot) -> list[VCJob]:
    """The snapshot's VCJobs that have pods to place, by key: every waiting job, and every running job
    with a replica that does not run (a scale-up, a failed pod's replacement), which joins its gang."""
    out = []
    for key in sorted(snap.jobs):
        job = snap.jobs[key]
        if job.phase in WAITING_PHASES:
            out.append(job)
        elif job.phase in ACTIVE_PHASES:
            held = held_pods(job, snap)
            if any(len(held.get(t.name, {})) < t.replicas for t in job.tasks):
                out.append(job)
    return out


def held_indices(job: VCJob, snap: Snapshot) -> dict[str, frozenset[int]]:
    return {t: frozenset(pods) for t, pods in held_pods(job, snap).items()}


def held_counts(held: dict[str, frozenset[int]]) -> Counter[str]:
    return Counter({t: len(ix) for t, ix in held.items()})


def needed(job: VCJob, held: Counter[str]) -> tuple[dict[str, int], int]:
    """What the pending pods must add for the gang to be ready: per task (its minimum less its running
    pods, when the tasks' minimums count) and in all (minAvailable less the running pods, at least the
    per-task sum). (0: the running pods already make it ready.)"""
    minima = {t: max(m - held[t], 0) for t, m in task_minima(job).items()}
    return minima, max(job.min_available - sum(held.values()), sum(minima.values()))


def has_pending_replicas(job: VCJob, snap: Snapshot) -> bool:
    """Some replica of the job is not running yet (a running job scaled up, or a failed pod's replacement)."""
    return sum(len(ix) for ix in held_indices(job, snap).values()) < job.replicas


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


def gang_shortfall(job: VCJob, placed: Counter[str], held: Counter[str] | None = None) -> str | None:
    """Why the placed counts per task, with the pods already running (``held``), do not make the gang
    ready (Volcano's JobReady: ReadyTaskNum ≥ minAvailable and CheckTaskReady), or None when they do."""
    held = held or Counter()
    total = sum(placed.values())
    running = sum(held.values())
    also = f" (+{running} running)" if running else ""
    if total + running < job.min_available:
        return f"{total}{also} of minAvailable {job.min_available} pods placed"
    for task, need in task_minima(job).items():
        if placed[task] + held[task] < need:
            also = f" (+{held[task]} running)" if held[task] else ""
            return f"task {task}: {placed[task]}{also} of its minimum {need} pods placed"
    return None


def shield(cat: Catalogue, snap: Snapshot, jobs: Sequence[VCJob]) -> Catalogue:
    """The catalogue without the running pods of the PodGroups of the jobs being placed: a plan places a
    running gang's pending pods next to its running ones and never evicts those (they are listed as
    protected)."""
    groups = {p.group_key for j in jobs for ps in held_pods(j, snap).values() for p in ps.values()}
    groups.discard(None)
    if not groups & set(cat.groups):
        return cat
    out = Catalogue(snapshot=cat.snapshot, now=cat.now, protected=dict(cat.protected), groups=dict(cat.groups))
    for k, c in cat.candidates.items():
        if c.group in groups:
            out.protected[k] = "its job's pending pods are being placed next to it"
        else:
            out.candidates[k] = c
    out.by_node = {n: [c for c in cs if c.group not in groups] for n, cs in cat.by_node.items()}
    out.by_node = {n: cs for n, cs in out.by_node.items() if cs}
    return out


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


def job_regions(job: VCJob, snap: Snapshot, running: frozenset[str] = frozenset()) -> list[Region]:
    """Candidate regions, lowest tier first, then by name; the whole cluster last for soft jobs. A job
    whose pods already run on the nodes ``running`` keeps them: only the HyperNodes that contain them
    all are candidates — the lowest-tier one first (the HyperNode that holds its running pods), then its
    ancestors up to highestTierAllowed (hard; Volcano's getSearchRoot: the job's allocated HyperNode's
    highest ancestor within the limit bounds the search), or up to the top and the whole cluster (soft)."""
    topo = snap.topology
    nt = job.network_topology
    if nt is None:
        return [Region(None, None, frozenset(snap.nodes))]
    limit = nt.highest_tier_allowed if nt.mode == "hard" else None
    out = [Region(h, topo.hyper_nodes[h].tier, topo.members[h]) for h in topo.regions(limit)
           if h in topo.hyper_nodes and running <= topo.members[h]]
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
        self.listed: dict[str, frozenset[str]] = {q: a.deserved_listed for q, a in accounts.items()}
        self.guarantee: dict[str, Resources] = {q: dict(a.guarantee) for q, a in accounts.items()}
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
    held: dict[str, dict[str, frozenset[int]]] = field(default_factory=dict)
    """job key -> task -> replica indices already running (``held_pods``): counted for the gang, never placed."""
    held_nodes: dict[str, frozenset[str]] = field(default_factory=dict)
    """job key -> the nodes its running pods are on."""
    never: dict[str, frozenset[str]] = field(default_factory=dict)
    """job key -> its tasks whose PriorityClass says preemptionPolicy Never (``victims.never_tasks``)."""
    turns: list[str] = field(default_factory=list)
    """Job keys in the order the greedy's allocate gave them their first turn (``greedy_place`` fills it):
    Volcano's order with the queues interleaved, which ``order_weights`` follows."""
    _catalogue: Catalogue | None = None

    @classmethod
    def build(cls, snap: Snapshot, jobs: Sequence[VCJob], weights: BinpackWeights,
              now: datetime | None = None) -> Context:
        keys = [j.key for j in jobs]
        dup = [k for k, n in Counter(keys).items() if n > 1]
        if dup:
            raise ValueError(f"job {dup[0]} is given twice")
        ordered, unfit = clip_to_cluster(job_order(jobs, snap), snap)
        running = {j.key: held_pods(j, snap) for j in ordered}
        nodes = {k: frozenset(p.node_name for ps in by_task.values() for p in ps.values()
                              if p.occupying and p.node_name is not None) for k, by_task in running.items()}
        return cls(snapshot=snap, jobs=ordered, weights=weights, pods={j.key: job_pods(j) for j in ordered},
                   priority={j.key: job_priority(j, snap) for j in ordered},
                   regions={j.key: job_regions(j, snap, nodes[j.key]) for j in ordered}, free=Capacity(snap).free,
                   now=now or datetime.now(UTC), unfit=unfit,
                   held={k: {t: frozenset(ps) for t, ps in by_task.items()} for k, by_task in running.items()},
                   held_nodes=nodes, never={j.key: never_tasks(snap, j) for j in ordered})

    def held_count(self, job: str) -> Counter[str]:
        """Task -> its pods already running."""
        return held_counts(self.held.get(job, {}))

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
    def catalogue(self) -> Catalogue:
        """Every possible victim of the snapshot, priced at ``now`` (built once); the pods of a job being
        placed are not victims (its pending pods join them: ``shield``)."""
        if self._catalogue is None:
            cat = Catalogue.build(self.snapshot, self.now, set(QueueTree(self.snapshot.queues).queues))
            self._catalogue = shield(cat, self.snapshot, self.jobs)
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
    """Candidates allowed by the static rules (reclaim: and by ``victim_blocked`` when the action starts;
    it is checked again at each eviction), not evicted yet."""
    blocked: dict[str, str] = field(default_factory=dict)
    """Reclaim: candidates the static rules allow but ``victim_blocked`` refuses at the start -> why."""


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
    if not ctx.preempting(job):
        return None, "preemptionPolicy Never: no victims"
    needs = job_needs(job)
    if reason == "reclaim":  # the capacity plugin's PreemptiveFn, for the first pod the action tries
        order = gang_order(job, snap, ctx.held.get(job.key))
        if order:
            task, i = order[0]
            why = reclaimer_blocked(job.queue, qs.allocated[job.queue], ctx.pods[job.key][task][i].requests,
                                    qs.deserved[job.queue], qs.real[job.queue])
            if why is not None:
                return None, why
    priority = ctx.priority[job.key]
    static = {k: c for k, c in cat.candidates.items() if k not in state.evicted
              and statically_allowed(c, reason, job.queue, priority, qs.reclaimable.get(c.queue, True), needs) is None}
    if reason == "preempt":
        if not static:
            return None, f"no running pod in queue {job.queue} of lower priority may be evicted"
        return Rules(reason=reason, job=job, needs=needs, eligible=static), ""
    eligible: dict[str, Candidate] = {}
    refused: dict[str, str] = {}
    for k, c in static.items():  # the ReclaimableFn on the state at the action's start, each pod alone
        why = victim_blocked(c.queue, qs.allocated[c.queue], c.pod.requests, qs.deserved[c.queue],
                             qs.listed[c.queue], qs.guarantee[c.queue])
        if why is None:
            eligible[k] = c
        else:
            refused[k] = why
    if not eligible:
        return None, reclaim_blocked_text(static, list(refused.values()))
    return Rules(reason=reason, job=job, needs=needs, eligible=eligible, blocked=refused), ""


def reclaim_blocked_text(static: dict[str, Candidate], blocked: list[str]) -> str:
    """Why no running pod may be reclaimed: none could be, none is above deserved, or guarantee protects."""
    if not static:
        return "no running pod of another reclaimable queue requests a resource the job requests"
    guarded = sorted(w for w in blocked if w.startswith("guarantee"))
    under = sorted(w for w in blocked if not w.startswith("guarantee"))
    if not under:
        return f"no running pod may be reclaimed: {guarded[0]}"
    also = f"; {guarded[0]}" if guarded else ""
    return f"no running pod of a reclaimable queue is above its deserved: {under[0]}{also}"


def apply_choice(ctx: Context, state: State, job: VCJob, choice: VictimChoice) -> None:
    """Commit a choice: evictions first, then the job's pods."""
    stmt = Statement(state)
    for c in choice.victims:
        stmt.evict(c.pod, c.node, c.queue, c.group)
    pods = ctx.pods[job.key]
    for b in choice.bindings:
        stmt.allocate(pods[b.task][b.index], b.node, job.queue)


def gang_steps(job: VCJob, snap: Snapshot | None = None,
               held: dict[str, frozenset[int]] | None = None) -> list[tuple[str, int, bool]]:
    """The pending pods in the order a dry run tries them, each with whether its task needs it for the gang:
    the tasks by priority (Volcano's TaskOrderFn: the pod's priority, higher first, when ``snap`` is given;
    then the job's task order), each task's required pending replicas first (its minimum less its running
    pods ``held``), then the rest."""
    held = held or {}
    minima, _need = needed(job, held_counts(held))
    tasks = job.tasks if snap is None else sorted(job.tasks, key=lambda t: -task_priority(job, t, snap))
    pending = {t.name: [i for i in range(t.replicas) if i not in held.get(t.name, frozenset())] for t in tasks}
    order = [(t.name, i, True) for t in tasks for i in pending[t.name][:minima.get(t.name, 0)]]
    return order + [(t.name, i, False) for t in tasks for i in pending[t.name][minima.get(t.name, 0):]]


def gang_order(job: VCJob, snap: Snapshot | None = None,
               held: dict[str, frozenset[int]] | None = None) -> list[tuple[str, int]]:
    """``gang_steps`` without the required flag: (task, index) in the order a dry run tries them."""
    return [(t, i) for t, i, _r in gang_steps(job, snap, held)]


def placed_reason(ctx: Context, job: VCJob, n: int, where: str) -> str:
    """'n of N pods placed[ in <region>][ (k beyond minAvailable m)]'; for a running gang, of its pending
    pods, next to its running ones."""
    running = sum(ctx.held_count(job.key).values())
    extra = n - ctx.need(job)[1]
    more = f" ({extra} beyond minAvailable {job.min_available})" if extra > 0 else ""
    if running:
        return f"{n} of {job.replicas - running} pending pods placed{where}, next to its {running} running{more}"
    return f"{n} of {job.replicas} pods placed{where}{more}"


# ---- the greedy (Volcano's allocate) -------------------------------------------------------------

class _Greedy:
    def __init__(self, ctx: Context, state: State, cat: Catalogue | None = None) -> None:
        self.ctx = ctx
        self.state = state
        self.cat = cat if cat is not None else Catalogue(snapshot=ctx.snapshot, now=datetime.now())
        self._static: dict[tuple[tuple[object, ...], str], str | None] = {}
        self._scores: dict[tuple[object, ...], Fraction] = {}
        self.block_note: str | None = None
        """Reclaim: the first refusal of the capacity plugin on the nodes the last ``evict_for`` tried."""
        self.region_of: dict[str, Region] = {}
        """job key -> the region its admitted gang was placed in."""
        self.dropped: set[tuple[str, str, int]] = set()
        """(job, task, index): pods ``extend`` tried (placed or not): allocate pops each task once."""

    def steps(self, job: VCJob) -> list[tuple[str, int, bool]]:
        return gang_steps(job, self.ctx.snapshot, self.ctx.held.get(job.key))

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
        held = self.ctx.held_count(job.key)
        order = self.steps(job)
        placed: Counter[str] = Counter()
        bindings: list[Binding] = []
        first_failure: str | None = None
        failures = 0
        slack = len(order) - self.ctx.need(job)[1]
        for task, i, required in order:
            if bindings and gang_shortfall(job, placed, held) is None:
                break  # allocate stops at the ready gang; the other replicas come one per turn (``extend``)
            pod = pods[task][i]
            node, why = self.best_node(pod, nodes, job.queue)
            if node is None:
                failures += 1
                if first_failure is None:
                    first_failure = f"task {task} replica {i}: {why}"
                if required or failures > slack:
                    break  # the gang cannot become ready any more
                continue
            stmt.allocate(pod, node, job.queue)
            placed[task] += 1
            bindings.append(Binding(task=task, index=i, node=node))
        return _gang_result(job, placed, bindings, first_failure, held, len(order))

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
        if not any(self.ctx.pending(job, t.name) for t in job.tasks):
            return JobPlacement(**base, admitted=False, reason=f"nothing to place: its {job.replicas} pods run already")
        regions = self.ctx.regions[job.key]
        if not regions:
            nt = job.network_topology
            limit = f" of tier <= {nt.highest_tier_allowed}" if nt and nt.highest_tier_allowed is not None else ""
            running = self.ctx.held_nodes.get(job.key)
            if running:
                return JobPlacement(**base, admitted=False, reason=(
                    f"no HyperNode{limit} holds the nodes its running pods are on ({', '.join(sorted(running)[:3])}; "
                    "networkTopology hard)"))
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
                self.region_of[job.key] = region
                where = f" in {region.label}" if topo else ""
                return JobPlacement(**base, admitted=True, reason=placed_reason(self.ctx, job, len(bindings), where),
                                    hyper_node=region.hyper_node, tier=region.tier, bindings=tuple(bindings))
        if not topo:
            return JobPlacement(**base, admitted=False, reason=f"gang not ready: {failures[0]}")
        widest = regions[-1].tier  # the widest region tried says most about why nothing fits
        head = next(f for r, f in zip(regions, failures, strict=True) if r.tier == widest)
        more = f" (and {len(failures) - 1} more regions)" if len(failures) > 1 else ""
        return JobPlacement(**base, admitted=False,
                            reason=f"no region fits the gang (minAvailable {job.min_available}): {head}{more}")

    def extend(self, job: VCJob, jp: JobPlacement) -> JobPlacement | None:
        """One more pod of an admitted job, as allocate's next turn of a ready job places one: the job's
        remaining pods in gang order, each to its best node in the job's region; a pod that fits nowhere
        is dropped (Volcano pops it); None when none fits. Commits."""
        region = self.region_of[jp.key]
        done = {(b.task, b.index) for b in jp.bindings}
        pods = self.ctx.pods[job.key]
        for task, i, _required in self.steps(job):
            if (task, i) in done or (job.key, task, i) in self.dropped:
                continue
            node, _why = self.best_node(pods[task][i], sorted(region.nodes), job.queue)
            self.dropped.add((job.key, task, i))
            if node is None:
                continue
            Statement(self.state).allocate(pods[task][i], node, job.queue)
            bindings = sorted((*jp.bindings, Binding(task=task, index=i, node=node)),
                              key=lambda b: (_task_pos(job, b.task), b.index))
            where = f" in {region.label}" if job.network_topology is not None else ""
            return jp.model_copy(update={"bindings": tuple(bindings),
                                         "reason": placed_reason(self.ctx, job, len(bindings), where)})
        return None

    def remaining(self, job: VCJob, jp: JobPlacement) -> bool:
        """The admitted job has pods not placed and not dropped yet."""
        done = {(b.task, b.index) for b in jp.bindings}
        return any((t, i) not in done and (job.key, t, i) not in self.dropped for t, i, _r in self.steps(job))

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

    def may_take(self, unit: list[Candidate], rules: Rules) -> bool:
        """Reclaim: the capacity plugin's ReclaimableFn lets every pod of the unit go, in turn, from its
        queue as the evictions so far left it (``victims.victim_blocked``); preempt: always."""
        if rules.reason != "reclaim":
            return True
        qs = self.state.queues
        alloc = {c.queue: dict(qs.allocated[c.queue]) for c in unit}
        for c in unit:
            if victim_blocked(c.queue, alloc[c.queue], c.pod.requests, qs.deserved[c.queue], qs.listed[c.queue],
                              qs.guarantee[c.queue]) is not None:
                return False
            for r, x in c.pod.requests.items():
                alloc[c.queue][r] = alloc[c.queue].get(r, 0) - x
        return True

    def reclaimees(self, pod: Pod, node: str, victims: list[Candidate], rules: Rules) -> list[Candidate]:
        """The capacity plugin's ReclaimableFn on one node for one reclaimer pod: the candidates that
        request a resource the pod requests, in victim order, each kept when ``victim_blocked`` passes
        with the ones kept before it subtracted from its queue. The first refusal on the node (of these,
        or of the node's pods refused when the action started) is kept in ``block_note``."""
        need = dims(pod.requests)
        qs = self.state.queues
        alloc: dict[str, dict[str, int]] = {}
        out: list[Candidate] = []
        notes = [rules.blocked[c.key] for c in self.cat.by_node.get(node, []) if c.key in rules.blocked
                 and c.key not in self.state.evicted and dims(c.pod.requests) & need]
        for c in victims:
            if not dims(c.pod.requests) & need:
                continue
            a = alloc.setdefault(c.queue, dict(qs.allocated[c.queue]))
            why = victim_blocked(c.queue, a, c.pod.requests, qs.deserved[c.queue], qs.listed[c.queue],
                                 qs.guarantee[c.queue])
            if why is None:
                out.append(c)
                for r, x in c.pod.requests.items():
                    a[r] = a.get(r, 0) - x
            else:
                notes.append(why)
        if notes and self.block_note is None:
            self.block_note = f"on {node}: {notes[0]}"
        return out

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
        held = self.ctx.held_count(job.key)
        never = self.ctx.never[job.key]
        placed: Counter[str] = Counter()
        bindings: list[Binding] = []
        why: str | None = None
        order = self.steps(job)
        for task, i, _required in order:
            if bindings and gang_shortfall(job, placed, held) is None:
                break
            pod = pods[task][i]
            if rules.reason == "reclaim":  # the PreemptiveFn, for every pod the action tries
                qs = self.state.queues
                blocked = reclaimer_blocked(job.queue, qs.allocated[job.queue], pod.requests, qs.deserved[job.queue],
                                            qs.real[job.queue])
                if blocked is not None:
                    why = blocked
                    continue
            node, why = self.best_node(pod, nodes, job.queue)
            if node is None and task not in never:  # a preemptionPolicy Never pod evicts nothing
                self.block_note = None
                node = self.evict_for(pod, nodes, job.queue, stmt, rules)
                if node is None and self.block_note is not None:
                    why = self.block_note  # the true cause: what the capacity plugin refused
            if node is None:
                continue
            stmt.allocate(pod, node, job.queue)
            placed[task] += 1
            bindings.append(Binding(task=task, index=i, node=node))
        return _gang_result(job, placed, bindings, why, held, len(order))

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
            if rules.reason == "reclaim":
                victims = self.reclaimees(pod, n, victims, rules)
            if not victims or not self.could_fit(pod, n, victims):
                continue
            mark = stmt.mark()
            for c in victims:
                if c.key in self.state.evicted:
                    continue  # gone with its whole PodGroup
                unit = self.unit(c, rules)
                if unit is None or not self.may_take(unit, rules):
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
    """Volcano's allocate: pop the first queue (``compare_queues`` on the allocations so far: the share
    changes as jobs are placed), pop its first job (``job_key_in_queue``: a job already admitted is ready
    and comes after the unready ones of its priority), give it one turn — a job not admitted yet gets its
    gang (``place``: all or nothing, up to ready), an admitted one one more pod (``extend``) — push the job
    back while it has pods left and its turn placed something, push the queue back while it has jobs."""
    t0 = time.perf_counter()
    state = State(ctx.snapshot)
    g = _Greedy(ctx, state)
    results: dict[str, JobPlacement] = {}
    waiting: dict[str, list[VCJob]] = defaultdict(list)
    for job in ctx.jobs:
        waiting[job.queue].append(job)
    ready = {j.key for j in ctx.jobs if gang_shortfall(j, Counter(), ctx.held_count(j.key)) is None}
    qs = state.queues
    ctx.turns.clear()
    while waiting:
        queue = min(waiting, key=queue_order_key(qs))
        jobs = waiting[queue]
        job = min(jobs, key=lambda j: job_key_in_queue(j, ctx.priority[j.key], j.key in ready))
        jp = results.get(job.key)
        if jp is None:
            ctx.turns.append(job.key)
            jp = results[job.key] = g.place(job)
            more = jp.admitted
            if jp.admitted:
                ready.add(job.key)
        else:
            nxt = g.extend(job, jp)
            more = nxt is not None
            if nxt is not None:
                jp = results[job.key] = nxt
        if not more or not g.remaining(job, jp):
            jobs.remove(job)
            if not jobs:
                del waiting[queue]
    out = [results[job.key] for job in ctx.jobs]
    wall = round(time.perf_counter() - t0, 3)
    plan = PlacementPlan(jobs=tuple(out), solver=SolverRecord(name="greedy", status="HEURISTIC", wall_seconds=wall))
    log.info("placement greedy: %d of %d jobs admitted in %.3fs", sum(j.admitted for j in out), len(out), wall)
    return plan


def explain_rejections(ctx: Context, plan: PlacementPlan) -> PlacementPlan:
    """Reasons for the jobs a plan does not admit, found by the greedy on the plan's final state; a job
    the greedy can still place is placed (a plan not proven optimal may leave room). That state counts
    every placement but no room freed by victims, so such a job is replayed before the evictions and
    changes nothing they rely on; a job in the queue of a reclaiming job keeps the plan's reason (its
    pods would lift the queue that reclaim needs under its deserved with the request)."""
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
            refused = f" (others refused: {min(rules.blocked.values())})" if rules is not None and rules.blocked else ""
            notes.append(f"{reason}: {why}" if rules is None else
                         f"{reason}: {len(rules.eligible)} pods may be evicted, but {unused}{refused}")
        out[jp.key] = "; ".join(notes)
    return out


# ---- the exact objective, for any plan ------------------------------------------------------------

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
        admitted += admission_weight(ctx.priority[jp.key])
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
    cat = shield(cat, snap, jobs)
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
        short = gang_shortfall(job, placed, Counter({t: len(ps) for t, ps in running.items()}))
        if short is not None:
            out.append(f"job {jp.key} is admitted but the gang is not ready: {short}")
        if not jp.bindings:
            out.append(f"job {jp.key} is admitted but places no pod")
        held_at = {p.node_name for ps in running.values() for p in ps.values() if p.occupying and p.node_name}
        out.extend(_topology_violations(jp, job, nodes, snap, frozenset(held_at)))
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
        why2 = statically_allowed(c, v.reason, job.queue, priority, accounts[c.queue].reclaimable, needs)
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


def validate_placement(snap: Snapshot, jobs: Sequence[VCJob], plan: PlacementPlan) -> None:
    """Raise PlanInvalidError when the plan breaks any rule."""
    violations = placement_violations(snap, jobs, plan)
    if violations:
        raise PlanInvalidError(violations)


# ---- entry point -----------------------------------------------------------------------------------

def _gang_result(job: VCJob, placed: Counter[str], bindings: list[Binding], why: str | None,
                 held: Counter[str], pending: int) -> tuple[list[Binding], str | None]:
    """A dry run's outcome: the bindings in task order when the gang is ready and at least one pod is
    placed (Volcano keeps no solution without an operation), else why not."""
    short = gang_shortfall(job, placed, held)
    if short is None and not bindings:
        short = f"0 of its {pending} pending pods placed"
    if short is None:
        return sorted(bindings, key=lambda b: (_task_pos(job, b.task), b.index)), None
    return bindings, f"{short}; {why}" if why else short


def check_inputs(snap: Snapshot, jobs: Sequence[VCJob]) -> None:
    """Input Volcano cannot schedule with, as an InputError naming the object and field (the CLI adds
    the file): a cycle in the queues' parents (the capacity plugin with hierarchy refuses the whole
    session: ``updateAncestors``), a ``deserved`` naming a resource no node has (``queues.unheld_deserved``),
    a PriorityClass a job to place names that does not exist (Kubernetes' Priority admission refuses such
    pods, so the job never runs)."""
    tree = QueueTree(snap.queues)
    for name in sorted(tree.broken):
        if "cycle" in tree.broken[name]:
            chain, cur = [name], snap.queues[name].parent_name
            while cur is not None and cur not in chain:
                chain.append(cur)
                cur = snap.queues[cur].parent_name
            raise InputError(f"the parent chain {' -> '.join([*chain, name])} is a cycle: Volcano's capacity "
                             "plugin (hierarchy) then schedules nothing", obj=f"Queue/{name}", field="spec.parent")
    for v in unheld_deserved(snap, tree)[:1]:  # any queue: it may reclaim or be reclaimed from
        raise InputError(f"no node has {v.resource}: {v.message.split(': ', 1)[1]}; fix or remove it",
                         obj=f"Queue/{v.queue}", field=f"spec.deserved.{v.resource}")
    known = set(snap.priority_classes) | set(SYSTEM_PRIORITY_CLASSES)
    for job in jobs:
        fields = [(job.priority_class_name, "spec.priorityClassName")]
        fields += [(t.template.priority_class_name, f"spec.tasks[{i}].template.spec.priorityClassName")
                   for i, t in enumerate(job.tasks)]
        for cls, where in fields:
            if cls is not None and cls not in known:
                raise InputError(f"PriorityClass {cls!r} does not exist (Kubernetes refuses pods that name a "
                                 "missing class): add it to the snapshot", obj=f"VCJob/{job.key}", field=where)
