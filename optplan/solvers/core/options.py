"""The options every planner takes: limits, workers, seed and the run's clock."""

from __future__ import annotations

from dataclasses import dataclass, field

from optplan.solvers.core.clock import Clock


@dataclass(frozen=True)
class PlanOptions:
    """Solver configuration is data: limits, workers and seed (weights live on the problem)."""

    time_limit: float = 30.0
    workers: int = 1
    seed: int = 0
    deterministic: bool = False
    """Limits count work, not wall-clock seconds (see ``clock``): one input, one plan, on any machine."""
    clock: Clock | None = field(default=None, compare=False, repr=False)
    """The clock of the run this planner is part of (``plan_repack`` sets it); None: a new one."""
    starved: float = field(default=1.0, compare=False, repr=False)
    """How starved the process is: wall-clock over CPU seconds of the step before (``core.planner.Auto``'s
    greedy; 1 on a quiet machine). Wall-clock setup estimates measured on the reference machine are scaled by it."""
    spent: float = field(default=0.0, compare=False, repr=False)
    """What the composition this planner is part of spent on the run's clock before it (``Auto``'s greedy):
    ``time_limit`` is what is left, ``time_limit + spent`` the composition's whole limit, for a planner that
    budgets shares of it (Repack's exact part)."""

    def timer(self) -> Clock:
        return self.clock if self.clock is not None else Clock(self.deterministic, self.time_limit)
