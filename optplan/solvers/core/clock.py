"""Time limits as wall-clock seconds (the default), or as work (``PlanOptions.deterministic``).

With wall-clock limits a plan cut by its limit depends on the machine and its load. In deterministic
mode the limits count work instead, converted to seconds at rates measured on the reference machine
(2-core AMD EPYC, one worker): CP-SAT's deterministic time, and the greedy's candidate evaluations,
plus a fixed charge per model built. One input then gives one plan on any machine, under any load.
A deterministic run still stops at ``WALL_CAP`` times its limit in wall-clock time; a run stopped so
says so in a warning (its plan may then differ between runs).

One clock serves a whole ``plan_repack`` (metric, greedy, CP-SAT, LNS): each step asks it how much
of its budget is left and is charged what it used.
"""

from __future__ import annotations

import logging
import time
from typing import Any

log = logging.getLogger(__name__)

DET_PER_SECOND = 0.5
"""CP-SAT deterministic time per wall-clock second, one worker (measured: 0.4-0.65 on repack models)."""
EVALS_PER_SECOND = 12_000
"""Greedy candidate evaluations per second (measured on openb: 13,200 for the seed's greedy, 9,800
for greedy-fast)."""
BUILD_SECONDS_PER_VARIABLE = 2e-5
"""A model's building, charged per variable (openb's 150,000-variable model: about 3 s)."""
WALL_CAP = 3.0
OVERRUN_SECONDS = 0.25
OVERRUN_TOLERANCE = 0.02
"""A run past its limit by more than the larger of these (seconds, share of the limit) says so in its solver
record (``SolverRecord.limit_exceeded_seconds``): below them it is the cost of reading the answer back."""


class Clock:
    """Seconds since the start: wall-clock, or work charged so far (deterministic)."""

    def __init__(self, deterministic: bool = False, limit: float = float("inf")) -> None:
        self.deterministic = deterministic
        self.t0 = time.perf_counter()
        self.used = 0.0
        self.wall_end = self.t0 + limit * WALL_CAP if deterministic else float("inf")
        self._warned = False

    def now(self) -> float:
        return self.used if self.deterministic else time.perf_counter() - self.t0

    def left(self, until: float) -> float:
        """Seconds of budget until ``until`` (a ``now()`` value)."""
        return until - self.now()

    def overrun(self, limit: float) -> float | None:
        """Seconds past ``limit`` since the clock started (rounded to 0.1 s), when more than
        ``OVERRUN_TOLERANCE`` of it; else None."""
        over = self.now() - limit
        if over <= max(OVERRUN_SECONDS, OVERRUN_TOLERANCE * limit):
            return None
        return round(over, 1)

    def charge(self, seconds: float) -> None:
        """Work done outside CP-SAT, in reference seconds (deterministic mode only)."""
        if self.deterministic:
            self.used += seconds

    def charge_evaluations(self, n: int) -> None:
        self.charge(n / EVALS_PER_SECOND)

    def over(self, until: float) -> bool:
        """The budget until ``until`` is spent (or, deterministic, the wall-clock cap is reached). An
        unlimited budget (``until`` infinite: a step that must finish, such as auto's greedy-fast) is
        never spent."""
        if until == float("inf"):
            return False
        if self.now() > until:
            return True
        return self.capped()

    def capped(self) -> bool:
        if time.perf_counter() <= self.wall_end:
            return False
        if not self._warned:
            log.warning("deterministic limits: the wall-clock cap (%.0fx the limit) was reached; "
                        "this plan may differ between runs", WALL_CAP)
            self._warned = True
        return True

    def configure(self, solver: Any, seconds: float) -> None:
        """Give a CP-SAT solver ``seconds`` of budget."""
        seconds = max(seconds, 0.01)
        if self.deterministic:
            solver.parameters.max_deterministic_time = seconds * DET_PER_SECOND
            solver.parameters.max_time_in_seconds = max(self.wall_end - time.perf_counter(), 0.05)
        else:
            solver.parameters.max_time_in_seconds = seconds

    def solved(self, solver: Any, variables: int = 0) -> None:
        """Charge a finished CP-SAT solve (and the building of its model of ``variables``)."""
        if self.deterministic:
            self.used += solver.deterministic_time / DET_PER_SECOND + variables * BUILD_SECONDS_PER_VARIABLE
            if time.perf_counter() > self.wall_end:
                self.capped()


WALL = Clock()
"""A wall clock for callers without one (its start does not matter: only differences are used)."""
