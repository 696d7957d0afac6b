"""One planner shape for every family, and the one ``auto`` that composes two planners.

A planner (``Planner``) has a ``name`` and ``plan(problem, options, hint=None) -> result``: ``problem`` is the
family's facts (``RepackProblem``, ``GoalProblem``, placement's ``Context``), ``hint`` an earlier result of
the same family (the greedy's, for an exact planner to start from; planners that cannot use one ignore it),
and the result (``Solved``) carries the plan and its solver record (status, bound, gap, times:
``SolverRecord``). The protocol is generic in the problem and the result, so mypy checks each family's
planners against it as they are.

``Auto(greedy, exact, key)`` is "greedy, then exact hinted with it, the better wins", for every family:

- the greedy runs first, to its end whatever the limit (its budget is infinite, which ``Clock.over`` never
  cuts): its plan is the floor, never gone below. How starved the process is (the greedy's wall-clock over
  its CPU seconds, ``MIN_CPU_SAMPLE``; 1 in deterministic mode) goes to the exact planner in
  ``PlanOptions.starved``, to scale its wall-clock setup estimates;
- the exact planner, hinted with the greedy's result, gets the time left on the run's clock (when at least
  ``min_left`` is left; else the greedy's plan is the answer, as ``FALLBACK``), and in ``PlanOptions.spent``
  what the greedy used of the whole limit;
- the better by the family's ``key`` (greater is better) wins: the exact's unless the greedy's is strictly
  better, or, for a family whose ties go to the greedy (``ties_to_greedy``: placement keeps Volcano's own
  choices), as good. When the greedy's plan is kept, the exact's record goes with it (its bounds hold for
  any plan), its status only when it is a proof for this plan: on a tie (an equal key is proven as well as
  the exact's); else FEASIBLE (``keep_greedy``, which a family may refine: Repack's keeps its freed-node
  bound only). The record is named ``auto`` and its wall time is the whole composition's.

A run that goes past its limit (the greedy alone can) says so in its record's ``limitExceededSeconds``,
where the family's pipeline reads the run's clock (``core.exact.with_overrun``).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Generic, Protocol, TypeVar

from optplan.models.repack import SolverRecord
from optplan.solvers.core.options import PlanOptions

log = logging.getLogger(__name__)

MIN_CPU_SAMPLE = 0.05
"""CPU seconds of the greedy below which its wall-over-CPU ratio is noise (the machine is taken as quiet)."""
AUTO = "auto"

R = TypeVar("R", bound="Solved")
P = TypeVar("P")
P_contra = TypeVar("P_contra", contravariant=True)


class Solved(Protocol):
    """What every planner returns: the plan and how it was found."""

    @property
    def record(self) -> SolverRecord: ...

    def with_record(self: R, record: SolverRecord) -> R:
        """The same plan with ``record``."""
        ...


class Planner(Protocol[P_contra, R]):
    """Every family's planner (see the module)."""

    name: str

    def plan(self, problem: P_contra, options: PlanOptions, hint: R | None = None) -> R: ...


class Auto(Planner[P, R], Generic[P, R]):
    """The greedy to its end, then the exact planner hinted with it; the better by ``key`` wins (the module)."""

    name = AUTO
    ties_to_greedy = False
    """A tie keeps the greedy's plan (else the exact's)."""
    min_left = -math.inf
    """Seconds the exact planner needs at least; with less left the greedy's plan is the answer (FALLBACK)."""

    def __init__(self, greedy: Planner[P, R], exact: Planner[P, R], key: Callable[[P, R], Any]) -> None:
        self.greedy = greedy
        self.exact = exact
        self.key = key

    def plan(self, problem: P, options: PlanOptions, hint: R | None = None) -> R:
        t0 = time.perf_counter()
        clock = options.timer()
        options = replace(options, clock=clock)
        start = clock.now()
        cpu = time.process_time()
        greedy = self.greedy.plan(problem, replace(options, time_limit=math.inf))
        cpu, wall = time.process_time() - cpu, time.perf_counter() - t0
        # How starved this process is: wall-clock over CPU seconds of a single-threaded step (1 on a quiet
        # machine, about (n + 1) / 2 beside n busy processes on 2 cores).
        starved = max(1.0, wall / cpu) if cpu > MIN_CPU_SAMPLE and not clock.deterministic else 1.0
        if starved > 1.5:
            log.info("auto: the greedy ran %.1fx slower than its CPU time (a busy machine)", starved)
        left = options.time_limit - (clock.now() - start)
        if left <= self.min_left:
            log.info("auto: %.1fs left, below the exact planner's %.1fs: the greedy plan stands", left, self.min_left)
            return self._named(greedy, greedy.record.model_copy(update={"status": "FALLBACK"}), t0)
        spent = clock.now() - start
        exact = self.exact.plan(problem, replace(options, time_limit=left, starved=starved, spent=spent), hint=greedy)
        g, e = self.key(problem, greedy), self.key(problem, exact)
        if g > e or (self.ties_to_greedy and g == e):
            if g > e:
                log.info("auto: the greedy's plan (%s) is better than the exact planner's (%s): it is kept", g, e)
            return self._named(self.keep_greedy(problem, greedy, exact, tie=g == e), None, t0)
        return self._named(exact, None, t0)

    def keep_greedy(self, problem: P, greedy: R, exact: R, *, tie: bool) -> R:
        """The greedy's plan, at least as good as the exact's, with the exact's record: its status only on a
        tie (a proof for this plan too), else FEASIBLE."""
        status = exact.record.status if tie else "FEASIBLE"
        return greedy.with_record(exact.record.model_copy(update={"status": status}))

    @staticmethod
    def _named(result: R, record: SolverRecord | None, t0: float) -> R:
        record = record if record is not None else result.record
        update: dict[str, Any] = {"name": AUTO}
        if record.wall_seconds is not None:
            update["wall_seconds"] = round(time.perf_counter() - t0, 3)
        return result.with_record(record.model_copy(update=update))
