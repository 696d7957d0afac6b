"""Victims for a job that does not fit: Volcano's preempt (same queue) and reclaim (other queues).

Facts and rules only, shared by the greedy (``greedy``, ``evict``), the exact model (``victims_cpsat``) and the
validator (``placement_violations``), so that "may this pod be a victim" means one thing everywhere.

**Who can be a victim** (``Catalogue``): a pod in phase Running on a node, in a PodGroup of the snapshot
whose queue exists (the pods the capacity plugin accounts; ``queues.account_queues``), and not
protected: namespace ``kube-system``, PriorityClass ``system-cluster-critical``/``system-node-critical``
(or a priority of at least ``SYSTEM_PRIORITY``, those classes' values), label or annotation
``volcano.sh/preemptable: "false"``.

**Job and task priority.** A running job's priority is its PodGroup's ``priorityClassName`` value, else
the highest ``spec.priority`` of its pods, else the value of their ``priorityClassName``, else the
globalDefault class's, else 0. A task's priority is the pod's ``spec.priority``, else its class's value,
else the job's.

**Victim order** (SPEC.md): lower job priority first, ready jobs before unready, lower task priority,
newer first (LIFO: ``status.startTime``, else ``creationTimestamp``; a pod with neither counts as
started at ``now``), then UID, then namespace/name.

**Which pods go** is Volcano's plugin tiers' answer (``tiers``); here the facts and rules they read.
**Preempt**: victims in the preemptor's queue (the first tier: job priority strictly lower); a job with a
``networkTopology`` (hard or soft), its own or one of its partitions', does not preempt at all
(``action_refused``: Volcano's preempt skips it), it may still reclaim. **Reclaim**: victims
in other, ``reclaimable`` (not false) queues, by the capacity plugin's rules below. A preemptor pod
whose own PriorityClass (the task's template's, else the job's) has ``preemptionPolicy: Never``
evicts nothing (neither action); the job's other tasks still may (``never_tasks``).

**Reclaim, as Volcano's capacity plugin decides it** (pkg/scheduler/plugins/capacity/capacity.go; the
comparisons of pkg/scheduler/api/resource_info.go). Deserved is the queue's effective one
(``queues.account_queues``) and only the dimensions it lists are compared with it
(``QueueAccount.deserved_listed``); a dimension it does not list is neither under nor over. A request's
dimensions are the resources it asks a positive amount of (``pods`` aside).

- *The reclaimer* (``reclaimer_blocked``, the plugin's ``AddPreemptiveFn``), for each pod of the job in
  turn, its queue's allocation counting the job's pods placed before it: ``allocated + request`` stays
  ≤ realCapability on every requested dimension and ≤ deserved on at least one
  (``LessEqualPartlyWithDimensionZeroFiltered``: an unlisted dimension reads 0, so it never qualifies).
  Being under deserved before the request is not enough.
- *A victim* (``victim_blocked``, the plugin's ``AddReclaimableFn``), in victim order, with the victims
  already taken from its queue subtracted (``allocated`` below): (1) ``allocated − its request ≥
  guarantee`` on every dimension the guarantee names (``checkGuaranteeConstraint``): the floor is
  guarantee, not deserved; (2) its request shares no dimension with a positive deserved
  (``isImmediateVictim``), or ``allocated > deserved`` on a listed dimension of its request
  (``checkDeservedExceedance``, ``GreaterPartlyWithRelevantDimensions``). It must also share a
  dimension with the reclaimer pod's request (``shouldSkipReclaimee``; ``statically_allowed`` with the
  job's). Only the victim's own queue is checked (the plugin's ancestor checks are off by default:
  ``ancestorReclaimLevel`` 0).
- Victims come only from the node the reclaimer pod is tried on (``actions/reclaim``), as in preempt.
- Order matters only through (2): a set of victims taken from one queue is valid when some order takes
  each (``reclaim_order``, peeling from the last: the check only gets harder as victims are taken).

**Gang of victims**: the first tier takes at most ``ready − minMember`` pods of one PodGroup (``Group.slack``);
the second tier may take more, never the whole gang at once. ``ready`` = occupying pods (bound, not
terminal) + Succeeded pods.

**Cost** (the exact model's objective, and what ``auto`` compares): per pod
``(max(job priority, 0) + 1) × AGE_SPAN + min(minutes running at now, AGE_SPAN − 1)``: priority-weighted,
newer pods cheaper, integers.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from typing import Literal

from optplan.models.placement import SafePreemption
from optplan.models.quantity import format_milli
from optplan.models.queues import VCJob
from optplan.models.snapshot import Pod, Snapshot
from optplan.solvers.core.protection import PREEMPTABLE_KEY, disruption_protection
from optplan.solvers.placement.safety import OFF, graded_blocks, pdb_refused
from optplan.solvers.quota.times import parse_time

Reason = Literal["preempt", "reclaim"]
REASONS: tuple[Reason, ...] = ("preempt", "reclaim")
PROTECTED_NAMESPACES = frozenset({"kube-system"})
PROTECTED_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})
SYSTEM_PRIORITY = 2_000_000_000
"""system-cluster-critical's value; system-node-critical's is higher."""
AGE_SPAN = 7 * 24 * 60
"""Minutes: running longer than a week costs the same as a week."""


@lru_cache(maxsize=4096)
def _time(text: str) -> datetime | None:
    """The RFC 3339 time, None when empty or not one (cached: pods of a snapshot share few start times)."""
    try:
        return parse_time(text) if text else None
    except ValueError:
        return None


def protected_reason(pod: Pod) -> str | None:
    """Why the pod is never a victim, or None."""
    if pod.namespace in PROTECTED_NAMESPACES:
        return f"namespace {pod.namespace} is protected"
    if pod.priority_class_name in PROTECTED_CLASSES:
        return f"PriorityClass {pod.priority_class_name} is protected"
    if pod.priority is not None and pod.priority >= SYSTEM_PRIORITY:
        return f"system priority {pod.priority} is protected"
    return disruption_protection(pod, (PREEMPTABLE_KEY,))


def pod_index(name: str) -> int | None:
    """The pod's index as Volcano's job controller reads it (``GetPodIndexUnderTask``): the last part of a
    name of three or more ``-``-separated parts, when it is a number."""
    parts = name.split("-")
    if len(parts) < 3:
        return None
    try:
        return int(parts[-1])
    except ValueError:
        return None


def descending(text: str) -> tuple[int, ...]:
    """A sort key that orders strings the other way round (a longer string before its prefix)."""
    return (*(-ord(ch) for ch in text), 1)


@dataclass(frozen=True)
class Candidate:
    """A pod that may be evicted, with what the rules and the order need."""

    pod: Pod
    node: str
    group: str
    queue: str
    job_priority: int
    task_priority: int
    started: datetime
    group_ready: bool
    cost: int

    @property
    def key(self) -> str:
        return self.pod.key

    def order_key(self) -> tuple[int, int, int, int, float, tuple[int, ...], str]:
        """Volcano's victim order: the first is evicted first. Within a job it is the reverse of Volcano's
        task order (``BuildVictimsPriorityQueue``: ``!TaskOrderFn``; the priority plugin, then the job
        controller's ``CompareTask``): lower task priority, then the higher pod index (the last part of a
        name of three or more parts; none: after those with one), then the later start, then the larger UID."""
        index = pod_index(self.pod.name)
        return (self.job_priority, 0 if self.group_ready else 1, self.task_priority,
                -index if index is not None else 1, -self.started.timestamp(), descending(self.pod.uid),
                self.pod.key)

    def input_key(self) -> tuple[int, int, int, int, float, str, str]:
        """The order in which the plugins are given a node's pods (``by_node``): Volcano hands them over
        from a Go map, in no fixed order; here victim order, but the smaller UID first among equals."""
        index = pod_index(self.pod.name)
        return (self.job_priority, 0 if self.group_ready else 1, self.task_priority,
                -index if index is not None else 1, -self.started.timestamp(), self.pod.uid, self.pod.key)


@dataclass(frozen=True)
class Group:
    """A PodGroup with running pods: the gang rule for victims."""

    key: str
    queue: str
    min_member: int
    ready: int
    occupying: tuple[str, ...]
    """Keys of its occupying pods: all of them must go for a take below minMember."""

    @property
    def slack(self) -> int:
        """Pods that may go while the gang stays at minMember."""
        return max(self.ready - self.min_member, 0)


@dataclass
class Catalogue:
    """Every possible victim of a snapshot, and the facts the rules need."""

    snapshot: Snapshot
    now: datetime
    candidates: dict[str, Candidate] = field(default_factory=dict)
    """pod key -> candidate."""
    protected: dict[str, str] = field(default_factory=dict)
    """pod key -> why it is never a victim (for occupying pods of a PodGroup)."""
    groups: dict[str, Group] = field(default_factory=dict)
    by_node: dict[str, list[Candidate]] = field(default_factory=dict)
    """node -> candidates in the order the plugins are given them (``Candidate.input_key``)."""
    shielded: dict[str, list[Candidate]] = field(default_factory=dict)
    """node -> the running pods of jobs being placed (``jobs.shield``), as ``by_node``: Volcano's plugins see
    them among a node's preemptees; victims only when ``exposed``."""
    exposed: dict[str, Candidate] = field(default_factory=dict)
    """pod key -> a shielded pod that another job's preempt or reclaim may take when the plugin tiers offer it
    (``jobs.shield``: its bare PodGroup can never be ready without it, or its VCJob's controller makes it again,
    ``jobs.remade``); the exact model too, leaving that job not admitted (``model.VictimData.owner``)."""

    def candidate(self, key: str) -> Candidate | None:
        """The pod a plan may name as a victim: a candidate, or an exposed pod; None for any other."""
        return self.candidates.get(key) or self.exposed.get(key)

    @classmethod
    def build(cls, snap: Snapshot, now: datetime, queues: frozenset[str] | set[str]) -> Catalogue:
        cat = cls(snapshot=snap, now=now)
        members: dict[str, list[Pod]] = {}
        for key in sorted(snap.pods):
            p = snap.pods[key]
            gk = p.group_key
            if gk is not None and gk in snap.pod_groups:
                members.setdefault(gk, []).append(p)
        for gk, pods in members.items():
            pg = snap.pod_groups[gk]
            occupying = tuple(p.key for p in pods if p.occupying)
            if not occupying or pg.queue not in queues:
                continue
            ready = len(occupying) + sum(p.phase == "Succeeded" for p in pods)
            group = Group(key=gk, queue=pg.queue, min_member=pg.min_member, ready=ready, occupying=occupying)
            cat.groups[gk] = group
            jprio = group_priority(snap, pg.priority_class_name, pods)
            for p in pods:
                if not p.occupying or p.node_name is None:
                    continue
                why = protected_reason(p)
                if why is None and p.phase != "Running":
                    why = f"phase {p.phase}, not Running"
                if why is not None:
                    cat.protected[p.key] = why
                    continue
                started = _time(p.start_time) or _time(p.creation_timestamp) or now
                minutes = max(int((now - started).total_seconds()) // 60, 0)
                cost = (max(jprio, 0) + 1) * AGE_SPAN + min(minutes, AGE_SPAN - 1)
                cat.candidates[p.key] = Candidate(
                    pod=p, node=p.node_name, group=gk, queue=pg.queue, job_priority=jprio,
                    task_priority=pod_priority(snap, p, jprio), started=started,
                    group_ready=ready >= pg.min_member, cost=cost)
        for c in sorted(cat.candidates.values(), key=Candidate.input_key):
            cat.by_node.setdefault(c.node, []).append(c)
        return cat


def class_value(snap: Snapshot, name: str | None) -> int | None:
    if name is not None:
        pc = snap.priority_classes.get(name)
        return pc.value if pc is not None else None
    return None


def default_priority(snap: Snapshot) -> int:
    defaults = sorted((pc for pc in snap.priority_classes.values() if pc.global_default), key=lambda p: p.name)
    return defaults[0].value if defaults else 0


def group_priority(snap: Snapshot, class_name: str | None, pods: list[Pod]) -> int:
    v = class_value(snap, class_name)
    if v is not None:
        return v
    given = [p.priority for p in pods if p.priority is not None]
    if given:
        return max(given)
    from_class = [x for x in (class_value(snap, p.priority_class_name) for p in pods) if x is not None]
    return max(from_class) if from_class else default_priority(snap)


def pod_priority(snap: Snapshot, pod: Pod, job_priority: int) -> int:
    if pod.priority is not None:
        return pod.priority
    v = class_value(snap, pod.priority_class_name)
    return job_priority if v is None else v


def preemption_never(snap: Snapshot, class_name: str | None) -> bool:
    """The preemptor's PriorityClass (its own, else the globalDefault) says ``preemptionPolicy: Never``."""
    if class_name is not None:
        pc = snap.priority_classes.get(class_name)
    else:
        defaults = sorted((p for p in snap.priority_classes.values() if p.global_default), key=lambda p: p.name)
        pc = defaults[0] if defaults else None
    return pc is not None and pc.preemption_policy == "Never"


def never_tasks(snap: Snapshot, job: VCJob) -> frozenset[str]:
    """The job's tasks whose pods neither preempt nor reclaim: each task's own PriorityClass (the pod
    template's ``priorityClassName``, else the job's, else the globalDefault) says ``preemptionPolicy:
    Never`` (Volcano checks the preemptor pod's policy in preempt and in reclaim)."""
    return frozenset(t.name for t in job.tasks if preemption_never(snap, job.task_priority_class(t)))


def action_refused(job: VCJob, reason: Reason) -> str | None:
    """Why this job may not evict by this action at all, or None: Volcano's preempt skips every job with a
    ``networkTopology`` (hard or soft), its own or one of its partitions' (``actions/preempt``: "jobs
    containing networkTopology do not support preemption", ``JobInfo.ContainsNetworkTopology``), while its
    reclaim takes them; a partitioned job without any topology preempts."""
    if reason != "preempt":
        return None
    if job.network_topology is not None:
        return "a job with a networkTopology does not preempt (Volcano's preempt skips it)"
    if any(t.partition_policy is not None and t.partition_policy.network_topology is not None for t in job.tasks):
        return "a job whose partitions have a networkTopology does not preempt (Volcano's preempt skips it)"
    return None


def dims(requests: Mapping[str, int]) -> frozenset[str]:
    """The resources a request asks a positive amount of (``pods`` aside: Volcano ignores it)."""
    return frozenset(r for r, v in requests.items() if v > 0 and r != "pods")


def statically_allowed(c: Candidate, reason: Reason, queue: str, priority: int, reclaimable: bool, *,
                       snap: Snapshot | None = None, safety: SafePreemption = OFF) -> str | None:
    """Why Volcano's first tier never offers the candidate to this job by this action (gang aside: the
    gang plugin counts the PodGroup's ready pods), or None: preempt, the priority plugin (same queue,
    strictly lower job priority); reclaim, the pods the action hands to the plugins (another,
    reclaimable queue). With ``safety`` (and the snapshot), safe preemption's static rules too: a pod
    under several PDBs, and graded preemption."""
    if snap is not None:
        why = pdb_refused(safety, snap, c.pod)
        if why is not None:
            return why
    if reason == "preempt":
        graded = graded_blocks(safety, priority, c.job_priority)
        if graded is not None:
            return graded
        if c.queue != queue:
            return f"queue {c.queue}, not the preemptor's {queue}"
        if c.job_priority >= priority:
            return f"job priority {c.job_priority} is not below the preemptor's {priority}"
        return None
    if c.queue == queue:
        return f"queue {c.queue} is the reclaimer's own"
    if not reclaimable:
        return f"queue {c.queue} is not reclaimable"
    return None


def _amount(x: int) -> str:
    return str(format_milli(x))


def reclaimer_blocked(queue: str, allocated: Mapping[str, int], request: Mapping[str, int],
                      deserved: Mapping[str, int], real: Mapping[str, int]) -> str | None:
    """Volcano's PreemptiveFn for one reclaimer pod: why its queue may not reclaim for it, or None.
    ``allocated``: the queue's allocation now; ``deserved``: effective (0 where not listed)."""
    need = sorted(dims(request))
    for r in need:
        future = allocated.get(r, 0) + request[r]
        if future > real.get(r, 0):
            return (f"queue {queue}: {r} allocated {_amount(allocated.get(r, 0))} + request {_amount(request[r])} "
                    f"> realCapability {_amount(real.get(r, 0))}")
    if any(allocated.get(r, 0) + request[r] <= deserved.get(r, 0) for r in need):
        return None
    parts = ", ".join(f"{r} {_amount(allocated.get(r, 0))} + {_amount(request[r])} > "
                      f"{_amount(deserved.get(r, 0))}" for r in need)
    return f"queue {queue} is not under its deserved with the request ({parts})"


def guarantee_blocks(queue: str, allocated: Mapping[str, int], request: Mapping[str, int],
                     guarantee: Mapping[str, int]) -> str | None:
    """Rule (1): why evicting ``request`` would take the queue below its guarantee, or None."""
    for r, g in sorted(guarantee.items()):
        left = allocated.get(r, 0) - request.get(r, 0)
        if r != "pods" and left < g:
            return (f"guarantee protects queue {queue} ({r} {_amount(allocated.get(r, 0))} - "
                    f"{_amount(request.get(r, 0))} < guarantee {_amount(g)})")
    return None


def not_over_deserved(queue: str, allocated: Mapping[str, int], request: Mapping[str, int],
                      deserved: Mapping[str, int], listed: frozenset[str]) -> str | None:
    """Rule (2): why the pod's queue is not above its deserved for it, or None (also None for an
    immediate victim: its request shares no dimension with a positive deserved)."""
    need = sorted(dims(request))
    if not any(deserved.get(r, 0) > 0 for r in need):
        return None
    if any(r in listed and allocated.get(r, 0) > deserved.get(r, 0) for r in need):
        return None
    parts = ", ".join(f"{r} {_amount(allocated.get(r, 0))} <= {_amount(deserved.get(r, 0))}" if r in listed
                      else f"{r} not in deserved" for r in need)
    return f"queue {queue} is not above its deserved ({parts})"


def victim_blocked(queue: str, allocated: Mapping[str, int], request: Mapping[str, int],
                   deserved: Mapping[str, int], listed: frozenset[str], guarantee: Mapping[str, int]) -> str | None:
    """Volcano's ReclaimableFn for one reclaimee: why it may not be taken, or None. ``allocated``: its
    queue's allocation with the victims already taken from it subtracted."""
    return (guarantee_blocks(queue, allocated, request, guarantee)
            or not_over_deserved(queue, allocated, request, deserved, listed))


def reclaim_order(queue: str, allocated: Mapping[str, int], pods: Sequence[tuple[str, Mapping[str, int]]],
                  deserved: Mapping[str, int], listed: frozenset[str],
                  guarantee: Mapping[str, int]) -> tuple[list[str] | None, str]:
    """An order in which ``victim_blocked`` lets every pod (key, requests) go from the queue, else None
    and why. Peels from the last: a pod may go last when it passes with all the others taken; taking
    more only makes the check harder, so any pod that may go last keeps the rest orderable."""
    left = list(pods)
    order: list[str] = []
    while left:
        total: dict[str, int] = defaultdict(int)
        for _k, req in left:
            for r, x in req.items():
                total[r] += x
        why = ""
        for i, (k, req) in enumerate(left):
            others = {r: allocated.get(r, 0) - total.get(r, 0) + req.get(r, 0) for r in set(allocated) | set(total)}
            blocked = victim_blocked(queue, others, req, deserved, listed, guarantee)
            if blocked is None:
                order.append(k)
                del left[i]
                break
            why = why or f"{k}: {blocked}"
        else:
            return None, why
    return order[::-1], ""


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

