"""Repack's planners: ``core.planner.Planner`` on a ``RepackProblem`` (``plan(problem, options, hint=None) ->
PlanResult``), by name (``optplan.solvers.core.registry``, whose heavy backends are imported only when asked for)."""

from __future__ import annotations

from optplan.models.results import PlanResult  # the planners' result (also imported from here)
from optplan.solvers.core import registry
from optplan.solvers.core.planner import Planner as CorePlanner
from optplan.solvers.repack.rules import RepackProblem

Planner = CorePlanner[RepackProblem, PlanResult]
"""A Repack planner."""


def planner_names() -> list[str]:
    """The Repack planners' names, sorted (the registry is ``optplan.solvers.core.registry``)."""
    return sorted(registry.names("repack"))


def get_planner(name: str) -> Planner:
    """The Repack planner registered under ``name``; its module is imported on first use."""
    if name not in registry.names("repack"):
        raise ValueError(registry.unknown_message(name, planner_names()))
    planner: Planner = registry.load("repack", name)()
    return planner
