"""One planner interface: ``plan(problem, options) -> PlanResult``, and the Repack planners by name
(``optplan.solvers.core.registry``, whose heavy backends are imported only when asked for)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from optplan.models.repack import RepackPlan, SolverRecord
from optplan.solvers.core import registry
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.repack.rules import Disruption, RepackProblem


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
    """The Repack planners' names, sorted (the registry is ``optplan.solvers.core.registry``)."""
    return sorted(registry.names("repack"))


def get_planner(name: str) -> Planner:
    """The Repack planner registered under ``name``; its module is imported on first use."""
    if name not in registry.names("repack"):
        raise ValueError(registry.unknown_message(name, planner_names()))
    planner: Planner = registry.load("repack", name)()
    return planner
