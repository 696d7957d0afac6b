"""Safe preemption (seed 004 §5.3): the four rules against avalanche eviction, written once and read by the
greedy (``evict``, ``greedy``), the exact model (``model``, ``victims_cpsat``) and the validator. Each rule is
off unless ``SafePreemption`` (models/placement.py) sets it; "evicting" below means preempt or reclaim, the
two actions that evict for a job.

- **PDBs** (``pdb``): a candidate under several PodDisruptionBudgets is never a victim (the Eviction API
  refuses it); over the whole plan, the victims charged to one PDB (``snapshot.eviction_need``: a pod that is
  not Ready may go without the budget under the PDB's ``unhealthyPodEvictionPolicy``) stay within its
  ``status.disruptionsAllowed``. Volcano's ``pdb`` plugin filters each preemptor's victims against
  ``disruptionsAllowed`` afresh (so two preemptors of one cycle may together exceed it); the plan here
  counts them together, as the evictions would be answered.
- **Cooldown** (``cooldown_seconds``): a queue that evicted within the window (``last_preemption``, else the
  Queue's ``optplan.io/last-preemption-time`` annotation) evicts nothing until the window ends; in one plan,
  at most one job of a queue evicts.
- **Graded preemption** (``levels``, ``level_gap``): a job's grade is the highest whose ``minPriority`` its
  priority reaches; preempt may take a victim only when the victim's job is ``level_gap`` grades or more
  below the preemptor's (reclaim takes by queue shares, not by priority: not graded).
- **Approval** (``approval_weight``, ``approval_timeout_seconds``): a job whose queue's weight is above it
  is planned with its victims but marked ``approvalRequired``, until a person (or a bot) approves by setting
  the VCJob's annotation ``optplan.io/preemption-approved: "true"``; once approved it is planned unmarked.
  Whoever asks for the approval records when, in the annotation ``optplan.io/preemption-requested`` (RFC
  3339); an approval not given within the timeout is cancelled: the job evicts nothing and says since when.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta

from optplan.errors import InputError
from optplan.models.placement import PlacementPlan, SafePreemption
from optplan.models.queues import VCJob
from optplan.models.snapshot import Pod, Snapshot, eviction_need
from optplan.solvers.quota.times import parse_time

LAST_PREEMPTION = "optplan.io/last-preemption-time"
"""Queue annotation: when the queue last evicted for a job (RFC 3339), read by the cooldown rule."""

APPROVED = "optplan.io/preemption-approved"
"""VCJob annotation: "true" when a person approved the evictions its plan needs."""
REQUESTED = "optplan.io/preemption-requested"
"""VCJob annotation: when the approval was asked for (RFC 3339); the timeout runs from it."""

OFF = SafePreemption()


def grade(safety: SafePreemption, priority: int) -> int | None:
    """The index of the job's grade from the lowest (0), or None when graded preemption is off."""
    levels = safety.levels
    if levels is None:
        return None
    for i, lv in enumerate(levels):
        if priority >= lv.min_priority:
            return len(levels) - 1 - i
    return 0


def grade_name(safety: SafePreemption, priority: int) -> str:
    g = grade(safety, priority)
    assert safety.levels is not None and g is not None
    return safety.levels[len(safety.levels) - 1 - g].name


def graded_blocks(safety: SafePreemption, preemptor: int, victim: int) -> str | None:
    """Why a preemptor of this priority may not preempt a victim job of that priority, or None."""
    a, b = grade(safety, preemptor), grade(safety, victim)
    if a is None or b is None or a - b >= safety.level_gap:
        return None
    return (f"graded preemption: {grade_name(safety, preemptor)} may preempt only grades {safety.level_gap} or "
            f"more below it, not {grade_name(safety, victim)}")


def pdb_spends(safety: SafePreemption, snap: Snapshot, pod: Pod) -> str | None:
    """The PDB evicting the pod takes one disruption from, when the PDB rule is on."""
    if not safety.pdb:
        return None
    return eviction_need(pod, snap.pdbs.values()).spends


def pdb_refused(safety: SafePreemption, snap: Snapshot, pod: Pod) -> str | None:
    """Why the pod is never a victim under the PDB rule (several PDBs cover it), or None."""
    if not safety.pdb:
        return None
    refused = eviction_need(pod, snap.pdbs.values()).refused
    return f"PDB rule: {refused}" if refused else None


def pdb_allowed(snap: Snapshot) -> dict[str, int]:
    """PDB key -> its ``status.disruptionsAllowed``."""
    return {key: max(b.disruptions_allowed, 0) for key, b in snap.pdbs.items()}


def pdb_over(safety: SafePreemption, snap: Snapshot, pods: Iterable[Pod]) -> str | None:
    """Why evicting all of ``pods`` breaks a PDB (more charged to it than it allows), or None."""
    if not safety.pdb:
        return None
    use: Counter[str] = Counter()
    for p in pods:
        key = pdb_spends(safety, snap, p)
        if key is not None:
            use[key] += 1
    allowed = pdb_allowed(snap)
    for key in sorted(use):
        if use[key] > allowed.get(key, 0):
            return (f"PDB rule: {use[key]} victims charged to PodDisruptionBudget {key}, which allows "
                    f"{allowed.get(key, 0)}")
    return None


def last_preemption(safety: SafePreemption, snap: Snapshot, queue: str) -> datetime | None:
    text = safety.last_preemption.get(queue)
    where = f"the last preemption time of queue {queue}"
    if text is None:
        q = snap.queues.get(queue)
        text = q.annotations.get(LAST_PREEMPTION) if q is not None else None
        where = f"Queue {queue}'s annotation {LAST_PREEMPTION}"
    if not text:
        return None
    try:
        return parse_time(text)
    except ValueError as e:
        raise InputError(f"{where}: {e}", field=LAST_PREEMPTION) from None


def cooling_until(safety: SafePreemption, snap: Snapshot, queue: str, now: datetime) -> datetime | None:
    """When the queue may evict again, if that is after ``now``; None when it may now (or the rule is off)."""
    if safety.cooldown_seconds is None:
        return None
    last = last_preemption(safety, snap, queue)
    if last is None:
        return None
    until = last + timedelta(seconds=safety.cooldown_seconds)
    return until if until > now else None


def cooldown_blocks(safety: SafePreemption, snap: Snapshot, queue: str, now: datetime,
                    evicted_in_plan: Iterable[str]) -> str | None:
    """Why a job of this queue may not evict now: the queue's window, or another job of it evicting in this
    plan (``evicted_in_plan``: the queues whose jobs evict earlier in the plan)."""
    if safety.cooldown_seconds is None:
        return None
    until = cooling_until(safety, snap, queue, now)
    if until is not None:
        last = last_preemption(safety, snap, queue)
        return (f"preemption cooldown: queue {queue} evicted at {last:%Y-%m-%dT%H:%M:%SZ}; it may evict again "
                f"from {until:%Y-%m-%dT%H:%M:%SZ}")
    if queue in set(evicted_in_plan):
        return (f"preemption cooldown: another job of queue {queue} evicts in this plan (at most one per "
                f"{safety.cooldown_seconds} s)")
    return None


def _needs_approval(safety: SafePreemption, snap: Snapshot, job: VCJob) -> str | None:
    if safety.approval_weight is None or job.annotations.get(APPROVED) == "true":
        return None
    q = snap.queues.get(job.queue)
    weight = q.weight if q is not None else 1
    if weight <= safety.approval_weight:
        return None
    return f"queue {job.queue} has weight {weight} > {safety.approval_weight}"


def approval_cancelled(safety: SafePreemption, snap: Snapshot, job: VCJob, now: datetime) -> str | None:
    """Why the job may evict nothing: its approval was asked for and not given in time; else None."""
    if _needs_approval(safety, snap, job) is None or REQUESTED not in job.annotations:
        return None
    try:
        asked = parse_time(job.annotations[REQUESTED])
    except ValueError as e:
        raise InputError(f"{e}", obj=f"Job/{job.key}", field=f"metadata.annotations.{REQUESTED}") from None
    expired = asked + timedelta(seconds=safety.approval_timeout_seconds)
    if now < expired:
        return None
    return (f"approval gate: the approval asked for at {asked:%Y-%m-%dT%H:%M:%SZ} was not given within "
            f"{safety.approval_timeout_seconds} s: its evictions are cancelled")


def approval_reason(safety: SafePreemption, snap: Snapshot, job: VCJob) -> str | None:
    """Why the job's evictions wait for approval (not approved yet), or None."""
    why = _needs_approval(safety, snap, job)
    if why is None:
        return None
    return f"{why}: its evictions wait for approval ({APPROVED}: \"true\" on the VCJob)"


def evict_blocks(safety: SafePreemption, snap: Snapshot, job: VCJob, now: datetime,
                 evicted_in_plan: Iterable[str]) -> str | None:
    """Why the job may evict nothing at all: the cooldown, or a cancelled approval."""
    return (cooldown_blocks(safety, snap, job.queue, now, evicted_in_plan)
            or approval_cancelled(safety, snap, job, now))


def mark_approvals(safety: SafePreemption, snap: Snapshot, plan: PlacementPlan,
                   jobs: Mapping[str, VCJob]) -> PlacementPlan:
    """Every job that evicts, marked when it needs approval (the same for every planner)."""
    if safety.approval_weight is None:
        return plan
    marked = tuple(jp.model_copy(update={"approval_required": approval_reason(safety, snap, jobs[jp.key])})
                   if jp.victims else jp for jp in plan.jobs)
    return plan.model_copy(update={"jobs": marked})
