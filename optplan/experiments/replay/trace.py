"""What a replay reads: the cluster's nodes and the jobs of a trace, each a gang of identical pods with
its arrival (creation) time and each pod's runtime (deletion − scheduled in the trace).

Gangs hold pods of one shape (cpu, memory, GPUs, allowed models; with ``--shared``, a share of one GPU in
milli-GPU: ``TraceGang.milli``), as ``optplan import openb`` forms them,
so a gang's pods are interchangeable: the replay places "how many" of them, never "which". A gang arrives
at its first pod's creation time with all its pods (a VCJob creates its pods together); each pod, once
placed, runs for its own runtime and leaves. Times are seconds (floats after a speed-up).

Times from another trace (``borrow_times``): a pod list without time columns (the openb ``multigpu*``
lists) can take each pod's creation, scheduled and deletion times from a trace that has them, by pod name.
A pod with no namesake there is dropped and counted (``unmatched="drop"``) or, with ``unmatched="shape"``,
takes the times of a pod of the same shape there (see ``borrow_times``); either way the report says how many.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from optplan.errors import InputError
from optplan.experiments.sim.online import SimNode

GANG_BUCKETS: tuple[tuple[str, int], ...] = (("1", 1), ("2", 2), ("4", 4), ("8", 8), ("15", 15))
"""Waiting time is reported by gang size in cards: label and the largest size it holds (3–4 cards count as
"4", 5–8 as "8", 9–15 as "15"); larger gangs are "16+"."""
LARGEST_BUCKET = "16+"


def gang_bucket(cards: int) -> str:
    """The size class of a gang of ``cards`` GPUs (see ``GANG_BUCKETS``)."""
    for label, most in GANG_BUCKETS:
        if cards <= most:
            return label
    return LARGEST_BUCKET


def bucket_labels() -> tuple[str, ...]:
    return (*(label for label, _ in GANG_BUCKETS), LARGEST_BUCKET)


@dataclass(frozen=True)
class TracePod:
    name: str
    runtime: float
    """Seconds it runs once placed (a move adds the restart delay)."""


@dataclass(frozen=True)
class TraceGang:
    """One job: ``len(pods)`` identical pods, ready (started) once ``min_member`` of them run."""

    name: str
    created: float
    cpu: int
    """milli-cores per pod"""
    memory: int
    """MiB per pod"""
    gpu: int
    """whole GPUs per pod"""
    models: tuple[str, ...]
    """allowed GPU models; () = any"""
    min_member: int
    pods: tuple[TracePod, ...]
    milli: int = 1000
    """Milli-GPU of its one GPU when below 1000: a share (``gpu`` is 1; placed at device level)."""

    @property
    def is_share(self) -> bool:
        return self.milli < 1000

    @property
    def cards(self) -> int:
        return self.gpu * len(self.pods)

    @property
    def shape(self) -> tuple[int, int, int, tuple[str, ...]]:
        """cpu, memory, GPU ask (whole cards; a share as minus its milli-GPU), models: equal shapes, equal pods."""
        return self.cpu, self.memory, -self.milli if self.is_share else self.gpu, self.models


@dataclass(frozen=True)
class Trace:
    """A named trace: nodes (any order) and gangs (sorted here by creation time, then name)."""

    name: str
    nodes: tuple[SimNode, ...]
    gangs: tuple[TraceGang, ...]
    stats: Mapping[str, int | float] = field(default_factory=dict)
    """What the reader kept and left out (pods, fractional, unscheduled, ...): reported as is."""

    def __post_init__(self) -> None:
        if not self.nodes:
            raise InputError("the trace has no node", field="nodes")
        if not any(n.gpu > 0 for n in self.nodes):
            raise InputError("no node has a GPU", field="nodes")
        for g in self.gangs:
            if not g.pods or not 1 <= g.min_member <= len(g.pods) or g.gpu < 1:
                raise InputError(f"gang {g.name}: needs pods, 1 <= minMember <= pods and GPUs >= 1",
                                 field="gangs")
            if not 0 < g.milli <= 1000 or (g.is_share and g.gpu != 1):
                raise InputError(f"gang {g.name}: a share is 1..999 milli-GPU of one GPU, got {g.gpu} x {g.milli}",
                                 field="gangs")
            if g.created < 0 or any(p.runtime < 0 for p in g.pods):
                raise InputError(f"gang {g.name}: negative time", field="gangs")
        object.__setattr__(self, "gangs", tuple(sorted(self.gangs, key=lambda g: (g.created, g.name))))

    @property
    def total_gpus(self) -> int:
        return sum(n.gpu for n in self.nodes)

    @property
    def end(self) -> float:
        """When the last pod would leave had no job waited: the default horizon."""
        return max((g.created + max(p.runtime for p in g.pods) for g in self.gangs), default=0.0)

    def offered_load(self, start: float, end: float) -> float:
        """GPU-seconds the trace asks for inside [start, end] (each pod from its creation, had it not
        waited), per GPU-second the cluster has there."""
        if end <= start:
            return 0.0
        asked = sum(g.gpu * g.milli / 1000 * max(0.0, min(g.created + p.runtime, end) - max(g.created, start))
                    for g in self.gangs for p in g.pods)
        return asked / ((end - start) * self.total_gpus)


# ---- times from another trace ------------------------------------------------------------------

UNMATCHED = ("drop", "shape")
"""What ``borrow_times`` does with a pod that has no namesake in the times trace."""

PodShape = tuple[int, int, int, int]
"""cpu milli, memory MiB, GPUs, GPU milli: what makes two pods of a trace interchangeable for ``shape``
(GPU models are not compared: the ``multigpu*`` lists carry none)."""


@dataclass(frozen=True)
class PodTimes:
    """One pod's times in a trace (seconds); ``scheduled`` / ``deleted`` None when the trace has none."""

    created: int
    scheduled: int | None
    deleted: int | None


def borrow_times(pods: Sequence[tuple[str, PodShape]], source: Mapping[str, tuple[PodShape, PodTimes]],
                 unmatched: str = "drop") -> tuple[dict[str, PodTimes], dict[str, int]]:
    """Each pod's times from ``source`` (the times trace: name -> its shape and times), and the counts.

    A pod takes the times of its namesake in ``source`` (counted ``timesByName``; ``timesShapeDiffers``
    counts those whose namesake has another shape: the times are taken all the same, by name). A pod with
    no namesake:

    - ``drop``: is left out of the result (``timesDropped``), so the caller replays the others only;
    - ``shape``: takes the times of a *donor*, a pod of ``source`` with the same shape that was scheduled
      and deleted (it has a runtime): the k-th such pod of a shape, in name order, takes the
      (k mod n)-th of the shape's n donors in name order, so the copies spread evenly over the donors and
      the result depends on nothing but the two lists (``timesBySameShape``). Such a pod arrives with its
      donor and runs as long. Without a donor of its shape it is dropped (``timesDropped``).

    Why ``shape`` exists: the openb ``multigpu*`` lists are the default list plus pods of its multi-GPU
    shapes with new names (``multigpu50``: 909 of 9,061, every one of a shape the default list has), so
    ``drop`` replays the default trace again.
    """
    if unmatched not in UNMATCHED:
        raise InputError(f"unknown choice {unmatched!r} (one of {', '.join(UNMATCHED)})", field="unmatched")
    donors: dict[PodShape, list[PodTimes]] = {}
    for name in sorted(source):
        shape, t = source[name]
        if t.scheduled is not None and t.deleted is not None:
            donors.setdefault(shape, []).append(t)
    out: dict[str, PodTimes] = {}
    stats = {"timesByName": 0, "timesShapeDiffers": 0, "timesBySameShape": 0, "timesDropped": 0}
    used: dict[PodShape, int] = {}
    for name, shape in sorted(pods):
        if name in source:
            theirs, t = source[name]
            out[name] = t
            stats["timesByName"] += 1
            stats["timesShapeDiffers"] += theirs != shape
        elif unmatched == "shape" and shape in donors:
            k = used.get(shape, 0)
            used[shape] = k + 1
            out[name] = donors[shape][k % len(donors[shape])]
            stats["timesBySameShape"] += 1
        else:
            stats["timesDropped"] += 1
    return out, stats
