"""What Repack returns, as pure data: the plan's disruption over the dimensions, what its moves restart
in each PodGroup, a planner's result, the fragmentation report and a whole run's outcome. The CLI, the
plan server and the API read these; ``optplan.solvers.repack`` computes them."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from fractions import Fraction

from optplan.models.repack import RepackPlan, RepackRun, RepackRunStatus, SolverRecord, Weights


@dataclass(frozen=True, order=True)
class Disruption:
    """The five seed dimensions for a whole plan (card amounts in milli-units of the target resource),
    and the tiers by which soft-topology PodGroups widen (0 without HyperNodes)."""

    affected_pod_groups: int = 0
    below_min_available: int = 0
    affected_cards: int = 0
    moved_cards: int = 0
    moved_pods: int = 0
    topology_widening: int = 0

    def as_tuple(self) -> tuple[int, int, int, int, int, int]:
        return (self.affected_pod_groups, self.below_min_available, self.affected_cards,
                self.moved_cards, self.moved_pods, self.topology_widening)

    def weighted(self, w: Weights, milli: int = 1000) -> float:
        """Raw weighted sum with cards counted in whole units (used for reports, not for ranking)."""
        v = self.as_tuple()
        return sum(wi * (vi / milli if i in (2, 3) else vi)
                   for i, (wi, vi) in enumerate(zip(w.as_tuple(), v, strict=True)))


@dataclass(frozen=True)
class Restarted:
    """What a set of moves restarts in one PodGroup: the union of the moved pods' restart units."""

    group: str
    policy: str | None
    """The widest policy among the units (a whole-group one first); None when every unit is a default."""
    pods: frozenset[str]
    running: int
    cards: int


@dataclass
class PlanResult:
    plan: RepackPlan
    record: SolverRecord
    disruption: Disruption
    rejections: dict[str, int] = field(default_factory=dict)
    """Why vacate candidates were not chosen: reason -> count of nodes (explanations for people)."""
    stats: dict[str, int] = field(default_factory=dict)
    """Model size and search counters (variables, constraints, pod classes, ...) for benchmarks."""

    def with_record(self, record: SolverRecord) -> PlanResult:
        return replace(self, record=record)


@dataclass(frozen=True)
class FragReport:
    """The fragmentation metric of seed 000 (``optplan.solvers.binpack.frag`` measures it)."""

    resource: str
    providers: int
    occupied: int
    theoretical_min: int
    """The proven minimum, or the best proven lower bound when ``proven`` is False."""
    proven: bool
    upper_bound: int

    @property
    def warning(self) -> str | None:
        """What a reader must know before trusting the number: no node provides the resource, so the
        0% measures nothing (a misspelt resource name, or a snapshot without those nodes)."""
        if self.providers == 0:
            return f"no node provides {self.resource}"
        return None

    def percent(self, occupied: int | None = None) -> Fraction:
        """Exact frag% for the current occupied count, or for another one (after a plan)."""
        occ = self.occupied if occupied is None else occupied
        if self.providers == 0:
            return Fraction(0)
        return Fraction(max(occ - self.theoretical_min, 0) * 100, self.providers)


def round_half_up(x: Fraction) -> int:
    return math.floor(x + Fraction(1, 2))


@dataclass
class RepackOutcome:
    """One planned RepackRun (``optplan.solvers.repack.run.plan_repack``): its status, the planner's
    result, the fragmentation measured and the outcome's reason."""

    run: RepackRun
    status: RepackRunStatus
    result: PlanResult
    frag: FragReport
    reason: str
