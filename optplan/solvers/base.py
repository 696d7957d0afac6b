"""One planner interface: ``plan(problem, options) -> PlanResult``, and the Repack planners by name
(``optplan.solvers.registry``, whose heavy backends are imported only when asked for)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from optplan.models.repack import RepackPlan, SolverRecord
from optplan.solvers import registry
from optplan.solvers.clock import Clock
from optplan.solvers.rules import Disruption, RepackProblem


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

    def timer(self) -> Clock:
        return self.clock if self.clock is not None else Clock(self.deterministic, self.time_limit)


@dataclass
class PlanResult:
    plan: RepackPlan
    record: SolverRecord
    disruption: Disruption
    rejections: dict[str, int] = field(default_factory=dict)
    """Why vacate candidates were not chosen: reason -> count of nodes (explanations for people)."""
    stats: dict[str, int] = field(default_factory=dict)
    """Model size and search counters (variables, constraints, pod classes, ...) for benchmarks."""


class Planner(Protocol):
    name: str

    def plan(self, problem: RepackProblem, options: PlanOptions) -> PlanResult: ...


def planner_names() -> list[str]:
    """The Repack planners' names, sorted (the registry is ``optplan.solvers.registry``)."""
    return sorted(registry.names("repack"))


def get_planner(name: str) -> Planner:
    """The Repack planner registered under ``name``; its module is imported on first use."""
    if name not in registry.names("repack"):
        raise ValueError(registry.unknown_message(name, planner_names()))
    planner: Planner = registry.load("repack", name)()
    return planner
