"""The one ``auto`` (``core.planner.Auto``): which plan wins, what record goes with it, what the exact planner is
given. Planners written inline: a plan is a number (greater is better), the key reads it."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace

import pytest

from optplan.models.repack import SolverRecord
from optplan.solvers.core import registry
from optplan.solvers.core.clock import Clock
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.core.planner import Auto


@dataclass(frozen=True)
class Result:
    plan: int
    record: SolverRecord

    def with_record(self, record: SolverRecord) -> Result:
        return replace(self, record=record)


@dataclass
class Fixed:
    """A planner that returns ``value`` with ``status``, after charging ``work`` seconds to the run's clock."""

    name: str
    value: int
    status: str
    work: float = 0.0
    seen: list[tuple[float, Result | None]] | None = None

    def plan(self, problem: None, options: PlanOptions, hint: Result | None = None) -> Result:
        if self.seen is not None:
            self.seen.append((options.time_limit, hint))
        options.timer().charge(self.work)
        return Result(self.value, SolverRecord(name=self.name, status=self.status, best_bound=9, wall_seconds=0.1))


def auto(greedy: int, exact: int, exact_status: str = "OPTIMAL", *, ties_to_greedy: bool = False) -> Result:
    a: Auto[None, Result] = Auto(Fixed("greedy", greedy, "HEURISTIC"), Fixed("cpsat", exact, exact_status),
                                 lambda _, r: r.plan)
    a.ties_to_greedy = ties_to_greedy
    return a.plan(None, PlanOptions(time_limit=10, deterministic=True))


@pytest.mark.parametrize(("greedy", "exact", "ties", "plan", "status"), [
    (3, 5, False, 5, "OPTIMAL"),     # the exact plan is better: it wins, with its record
    (5, 3, False, 5, "FEASIBLE"),    # the greedy's is better: kept, the exact's proof is not one for it
    (4, 4, False, 4, "OPTIMAL"),     # a tie keeps the exact planner's
    (4, 4, True, 4, "OPTIMAL"),      # ... or the greedy's (placement), with the proof: an equal rank is proven
    (5, 3, True, 5, "FEASIBLE"),
])
def test_the_better_plan_wins_and_keeps_a_proof_only_when_it_is_one(greedy: int, exact: int, ties: bool, plan: int,
                                                                    status: str) -> None:
    out = auto(greedy, exact, ties_to_greedy=ties)
    assert (out.plan, out.record.status, out.record.name) == (plan, status, "auto")
    assert out.record.best_bound == 9  # a bound holds whichever plan is kept


def test_the_greedy_runs_to_its_end_and_the_exact_planner_gets_the_time_left_hinted_with_it() -> None:
    seen: list[tuple[float, Result | None]] = []
    greedy = Fixed("greedy", 2, "HEURISTIC", work=3.0, seen=seen)
    exact = Fixed("cpsat", 2, "OPTIMAL", seen=seen)
    Auto(greedy, exact, lambda _, r: r.plan).plan(None, PlanOptions(time_limit=10, deterministic=True))
    (g_limit, g_hint), (e_limit, e_hint) = seen
    assert g_limit == math.inf and g_hint is None
    assert e_limit == pytest.approx(7.0) and e_hint is not None and e_hint.plan == 2


def test_too_little_time_left_returns_the_greedy_plan_as_fallback() -> None:
    class Slow(Auto[None, Result]):
        min_left = 0.5

    clock = Clock(True, 1.0)
    a = Slow(Fixed("greedy", 2, "HEURISTIC", work=0.8), Fixed("cpsat", 9, "OPTIMAL"), lambda _, r: r.plan)
    out = a.plan(None, PlanOptions(time_limit=1.0, deterministic=True, clock=clock))
    assert (out.plan, out.record.status, out.record.name) == (2, "FALLBACK", "auto")


def test_the_record_times_the_whole_composition() -> None:
    t0 = time.perf_counter()
    out = auto(1, 2)
    assert out.record.wall_seconds is not None and out.record.wall_seconds <= time.perf_counter() - t0 + 0.001


@pytest.mark.parametrize("family", registry.families())
def test_every_registry_entry_is_a_class(family: str) -> None:
    for name in registry.names(family):
        assert isinstance(registry.load(family, name), type), (family, name)
