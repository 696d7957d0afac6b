"""Victims for a job that does not fit: Volcano's preempt (same queue) and reclaim (other queues).

Facts and rules only, shared by the greedy (``placement``), the exact model (``victims_cpsat``) and the
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

**Preempt**: victims in the preemptor's queue whose job priority is strictly lower. **Reclaim**: victims
in other queues that are ``reclaimable`` (not false) and, before the job's evictions, above their
(effective) deserved on a resource the job requests and the victim uses; the reclaimer's queue must
be below its deserved on a resource it requests. A preemptor whose PriorityClass has
``preemptionPolicy: Never`` evicts nothing (neither action).

**Floors** (reclaim): for the victim's queue and each of its ancestors that is not also an ancestor of
the reclaimer's queue (sibling teams under one parent leave the parent alone), and every resource r the
job requests, evictions never take allocated r below ``min(deserved r, allocated r before the job)``:
never below deserved, and never lower at all where the queue already is below.

**Gang of victims**: at most ``ready − minMember`` pods of one PodGroup over the whole plan, unless
every occupying pod of it is taken. ``ready`` = occupying pods (bound, not terminal) + Succeeded pods.

**Cost** (the exact model's objective, and what ``auto`` compares): per pod
``(max(job priority, 0) + 1) × AGE_SPAN + min(minutes running at now, AGE_SPAN − 1)``: priority-weighted,
newer pods cheaper, integers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from optplan.models.snapshot import Pod, Snapshot

Reason = Literal["preempt", "reclaim"]
REASONS: tuple[Reason, ...] = ("preempt", "reclaim")
PROTECTED_NAMESPACES = frozenset({"kube-system"})
PROTECTED_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})
SYSTEM_PRIORITY = 2_000_000_000
"""system-cluster-critical's value; system-node-critical's is higher."""
PREEMPTABLE_KEY = "volcano.sh/preemptable"
AGE_SPAN = 7 * 24 * 60
"""Minutes: running longer than a week costs the same as a week."""


def _time(text: str) -> datetime | None:
    from optplan.solvers.spot import parse_time  # spot imports OR-Tools; only its parser is needed here

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
    for where, m in (("label", pod.labels), ("annotation", pod.annotations)):
        if m.get(PREEMPTABLE_KEY, "").lower() == "false":
            return f'{where} {PREEMPTABLE_KEY}: "false"'
    return None


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

    def order_key(self) -> tuple[int, int, int, float, str, str]:
        """Volcano's victim order: the first is evicted first."""
        return (self.job_priority, 0 if self.group_ready else 1, self.task_priority, -self.started.timestamp(),
                self.pod.uid, self.pod.key)


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
    """node -> candidates in victim order."""

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
        for c in sorted(cat.candidates.values(), key=Candidate.order_key):
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


def over_deserved(allocated: dict[str, int], deserved: dict[str, int],
                  resources: set[str] | frozenset[str]) -> set[str]:
    """Resources among ``resources`` where allocated > deserved."""
    return {r for r in resources if allocated.get(r, 0) > deserved.get(r, 0)}


def statically_allowed(c: Candidate, reason: Reason, queue: str, priority: int, reclaimable: bool,
                       over: set[str], needs: set[str] | frozenset[str]) -> str | None:
    """Why the candidate cannot be a victim of this job by this action (gang and floors aside), or None.
    ``over``: resources the victim's queue is above deserved on, before the job's evictions."""
    if reason == "preempt":
        if c.queue != queue:
            return f"queue {c.queue}, not the preemptor's {queue}"
        if c.job_priority >= priority:
            return f"job priority {c.job_priority} is not below the preemptor's {priority}"
        return None
    if c.queue == queue:
        return f"queue {c.queue} is the reclaimer's own"
    if not reclaimable:
        return f"queue {c.queue} is not reclaimable"
    uses = {r for r, v in c.pod.requests.items() if v > 0}
    if not over & needs & uses:
        return f"queue {c.queue} is not above deserved on a resource the job needs and the pod uses"
    return None


def floor_queues(victim_chain: tuple[str, ...], reclaimer_chain: tuple[str, ...]) -> tuple[str, ...]:
    """The victim's queue and its ancestors that are not ancestors of the reclaimer's queue."""
    shared = set(reclaimer_chain)
    return tuple(q for q in victim_chain if q not in shared)
