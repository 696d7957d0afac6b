"""The large-job submission throttle (seed 002 §6.4.2), written once: read by the replay
(``experiments.replay.window``) with its own clock and by the platform's decision (``should_hold``) on a
snapshot.

Volcano's preempt evicts victims in one cycle and binds the large job in a later one, once the victims
have terminated; a small job submitted in between is bound first if it fits the cards already freed (a
pipelined job reserves nothing against allocate), and the large job needs another preemption. The seed's
platform closes that window per queue:

- **Large job** (``is_large``): priority at least ``Throttle.large_priority`` — default the value of the
  snapshot's ``large-job`` PriorityClass, else 800 (the seed's large-job).
- **Enters** (``enters``): a queue enters *large-job waiting mode* when a large job pending in it fails
  its allocate and needs preemption: placement's greedy (``place.plan_placement``, Volcano's allocate then
  preempt and reclaim, over every pending job in Volcano's order) admits it only with ``preempt`` victims.
  A large job that fits without evicting, one that preempt cannot place, one whose PriorityClass says
  ``preemptionPolicy: Never`` (it never preempts) and one that needs only reclaim start no mode.
- **Held** (``held_class``): while the mode lasts, a new submission to that queue with priority below
  ``large_priority`` (the seed's normal-job P100 and debug-job P50) waits at the platform; other queues
  and larger jobs are never held. Held submissions are released in arrival order.
- **Ends** (``active``): when the large job runs (its gang is ready) or ``timeout_seconds`` (default
  300, the seed's 5 minutes) after the mode began, whichever comes first.

Where the start is recorded: the platform that sees the first allocate fail writes two annotations on the
Queue, ``optplan.io/large-job-waiting-for`` (namespace/name of the large job) and
``optplan.io/large-job-waiting-since`` (RFC 3339; ``mode_annotations``). The decision reads them back, so
it is stateless given the snapshot and the time: the named job's mode stands while it waits and the
timeout has not passed (placement is not asked again: its victims may be terminating). A waiting large job
the annotations do not name starts its mode at its ``creationTimestamp`` (the time it was submitted and
failed its first allocate; none written: now) when placement says it needs preemption. When several
large jobs of a queue are in mode, the earliest started one is reported (the hold lasts while any is).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from optplan.errors import InputError
from optplan.models.queues import VCJob
from optplan.models.snapshot import Snapshot
from optplan.solvers.placement.jobs import (
    class_priority,
    held_counts,
    held_indices,
    job_priority,
    jobs_to_place,
    needed,
)
from optplan.solvers.placement.place import plan_placement
from optplan.solvers.quota.times import parse_time

LARGE_CLASS = "large-job"
"""The seed's PriorityClass of large jobs; its value in the snapshot is the default threshold."""
LARGE_PRIORITY = 800
"""The seed's large-job value, the threshold when the snapshot holds no ``large-job`` PriorityClass."""
TIMEOUT_SECONDS = 300.0
"""The seed's 5 minutes: the mode ends this long after it began, large job running or not."""
SEED_CLASSES = {"critical-job": 1000, "large-job": 800, "normal-job": 100, "debug-job": 50, "spot-job": 50}
"""Seed 002 §5.2's PriorityClasses: a class named in a request and not in the snapshot is read from here."""
WAITING_FOR = "optplan.io/large-job-waiting-for"
"""Queue annotation: namespace/name of the large job whose waiting mode the queue is in."""
WAITING_SINCE = "optplan.io/large-job-waiting-since"
"""Queue annotation: when that mode began (RFC 3339)."""
TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


@dataclass(frozen=True)
class Throttle:
    """The rule's two numbers; ``large_priority`` None: the snapshot's large-job class, else 800."""

    large_priority: int | None = None
    timeout_seconds: float = TIMEOUT_SECONDS

    def __post_init__(self) -> None:
        if not self.timeout_seconds >= 0:
            raise InputError(f"must be a number of seconds >= 0, got {self.timeout_seconds!r}",
                             field="timeoutSeconds")

    def threshold(self, snap: Snapshot | None = None) -> int:
        if self.large_priority is not None:
            return self.large_priority
        pc = snap.priority_classes.get(LARGE_CLASS) if snap is not None else None
        return pc.value if pc is not None else LARGE_PRIORITY


# ---- the rule, on any clock (seconds) --------------------------------------------------------------

def is_large(priority: int, threshold: int) -> bool:
    """A job of this priority is large: it may start a waiting mode and is never held."""
    return priority >= threshold


def enters(priority: int, needs_preemption: bool, threshold: int) -> bool:
    """A queue enters waiting mode for this pending job: large, and its allocate failed and preempt evicts
    for it (``needs_preemption``: the scheduler's own answer, placement's or the replay's)."""
    return is_large(priority, threshold) and needs_preemption


def held_class(priority: int, threshold: int) -> bool:
    """A submission of this priority to a queue in waiting mode waits at the platform."""
    return priority < threshold


def until(since: float, rule: Throttle) -> float:
    """When a mode begun at ``since`` ends if its large job has not run by then."""
    return since + rule.timeout_seconds


def active(since: float, large_runs: bool, now: float, rule: Throttle) -> bool:
    """The mode begun at ``since`` still holds at ``now``: its large job does not run and it has not timed out."""
    return not large_runs and since <= now < until(since, rule)


# ---- the platform's decision on a snapshot ---------------------------------------------------------

@dataclass(frozen=True)
class Hold:
    """Whether a submission of ``priority`` to ``queue`` waits at the platform now, and until when at most
    (it is released earlier when the large job ``job`` runs)."""

    queue: str
    priority: int
    held: bool
    until: datetime | None
    reason: str
    job: str | None = None
    since: datetime | None = None

    def to_dict(self) -> dict[str, object]:
        def t(v: datetime | None) -> str | None:
            return None if v is None else v.strftime(TIME_FORMAT)
        return {"queue": self.queue, "priority": self.priority, "held": self.held, "until": t(self.until),
                "reason": self.reason, "job": self.job, "since": t(self.since)}


def mode_annotations(job: str, since: datetime) -> dict[str, str]:
    """The Queue annotations a platform writes when the queue enters waiting mode for ``job``."""
    return {WAITING_FOR: job, WAITING_SINCE: since.strftime(TIME_FORMAT)}


def priority_of_class(snap: Snapshot, name: str) -> int:
    """The value of PriorityClass ``name``: the snapshot's, else the seed's; unknown: InputError."""
    if name in snap.priority_classes:
        return class_priority(name, snap)
    if name in SEED_CLASSES:
        return SEED_CLASSES[name]
    known = sorted({*snap.priority_classes, *SEED_CLASSES})
    raise InputError(f"unknown PriorityClass {name!r} (known: {', '.join(known)})", field="--priority-class")


def _recorded(snap: Snapshot, queue: str) -> tuple[str, datetime] | None:
    q = snap.queues[queue]
    job, since = q.annotations.get(WAITING_FOR), q.annotations.get(WAITING_SINCE)
    if not job or not since:
        return None
    try:
        return job, parse_time(since)
    except ValueError as e:
        raise InputError(f"{e}", obj=f"Queue/{queue}", field=f"metadata.annotations.{WAITING_SINCE}") from None


def _created(job: VCJob, now: datetime) -> datetime:
    if not job.creation_timestamp:
        return now
    try:
        return parse_time(job.creation_timestamp)
    except ValueError as e:
        raise InputError(f"{e}", obj=f"Job/{job.key}", field="metadata.creationTimestamp") from None


def _waiting(job: VCJob, snap: Snapshot) -> bool:
    """The job's gang is not ready: its running replicas do not make its minimum."""
    return needed(job, held_counts(held_indices(job, snap)))[1] > 0


def should_hold(snap: Snapshot, queue: str, priority: int, now: datetime, rule: Throttle | None = None) -> Hold:
    """The decision of the module docstring for a submission of ``priority`` to ``queue`` at ``now``."""
    rule = rule or Throttle()
    if queue not in snap.queues:
        raise InputError(f"unknown queue {queue!r} (the snapshot has: {', '.join(sorted(snap.queues)) or 'none'})",
                         field="--queue")
    threshold = rule.threshold(snap)
    if not held_class(priority, threshold):
        return Hold(queue, priority, False, None, f"priority {priority} >= {threshold}: a large job is never held")
    large = [j for j in jobs_to_place(snap)
             if j.queue == queue and is_large(job_priority(j, snap), threshold) and _waiting(j, snap)]
    recorded = _recorded(snap, queue)
    modes: list[tuple[datetime, str]] = []
    notes: list[str] = []
    unnamed = [j for j in large if recorded is None or j.key != recorded[0]]
    if recorded is not None and any(j.key == recorded[0] for j in large):
        modes.append((recorded[1], recorded[0]))
    elif recorded is not None:
        notes.append(f"{recorded[0]} (the queue's {WAITING_FOR}) does not wait any more")
    if unnamed:
        plan = {jp.key: jp for jp in plan_placement(snap, jobs_to_place(snap), "greedy", now=now).jobs}
        for j in unnamed:
            jp = plan.get(j.key)
            preempts = jp is not None and jp.admitted and any(v.reason == "preempt" for v in jp.victims)
            if enters(job_priority(j, snap), preempts, threshold):
                modes.append((_created(j, now), j.key))
            else:
                why = "fits without preemption" if jp is not None and jp.admitted else "preempt cannot place it"
                notes.append(f"{j.key} {why}" if jp is not None else f"{j.key} is not placed")
    live = sorted((since, key) for since, key in modes
                  if active(since.timestamp(), False, now.timestamp(), rule))
    if live:
        since, key = live[0]
        end = since + timedelta(seconds=rule.timeout_seconds)
        return Hold(queue, priority, True, end,
                    f"queue {queue} is in large-job waiting mode for {key} since {since.strftime(TIME_FORMAT)}: "
                    f"priority {priority} < {threshold} waits until it runs or {end.strftime(TIME_FORMAT)}",
                    key, since)
    for since, key in sorted(modes):
        notes.append(f"the mode for {key} (since {since.strftime(TIME_FORMAT)}) "
                     + ("has not begun" if since > now else f"timed out after {rule.timeout_seconds:g} s"))
    why = "; ".join(notes) if notes else f"no large job (priority >= {threshold}) waits in queue {queue}"
    return Hold(queue, priority, False, None, f"not in large-job waiting mode: {why}")
