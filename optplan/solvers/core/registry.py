"""Every named planner, keyed by (family, name): the one list the CLI (choices and help), the plan server
(validation and its OpenAPI enums), the Python API and the planners' own dispatch read.

A planner's code is named as ``"module:attribute"`` and imported only when asked for (``load``), so that
reading the names costs no OR-Tools, MILP or numpy import. Families:

- ``repack``: ``plan(problem, options) -> PlanResult`` planner classes (``optplan.solvers.repack.base.Planner``);
- ``placement``: queue placement of pending VCJobs with preempt/reclaim victims; ``greedy`` is Volcano's
  allocate (always run first), ``cpsat`` the exact model hinted with it, ``auto`` the better of the two
  (no code of its own: ``optplan.solvers.placement.place`` composes it);
- ``provision``: nodes to add from a catalogue so that pending gangs place (``optplan.solvers.provision``):
  ``greedy``, ``cpsat`` (the exact model, with a proven bound), ``auto`` (composed by
  ``optplan.solvers.provision.run``), and the peers ``seed`` and ``least-waste``;
- ``goals``: planners of RepackRuns with admit / freeHyperNodes goals (``optplan.solvers.goals``): ``greedy``,
  ``cpsat`` (the joint model), ``kai`` (KAI-scheduler's consolidation, a peer), ``milp`` (the joint model's
  PuLP/HiGHS twin) and ``auto`` (composed by ``optplan.solvers.goals.run``).

To add a planner: one ``Entry`` here (the order is the order users see), and the class or function it names.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Entry:
    family: str
    name: str
    target: str | None
    """``module:attribute`` of the planner's code; None for a composite (``auto`` of placement)."""


DEFAULT = "auto"
"""Every family's default planner."""

_ENTRIES: tuple[Entry, ...] = (
    Entry("repack", "greedy", "optplan.solvers.repack.greedy:GreedyPlanner"),
    Entry("repack", "cpsat", "optplan.solvers.repack.exact.cpsat:CpSatPlanner"),
    Entry("repack", "milp", "optplan.solvers.repack.exact.milp:MilpPlanner"),
    Entry("repack", "greedy-fast", "optplan.solvers.repack.greedy:FastGreedyPlanner"),
    Entry("repack", "auto", "optplan.solvers.repack.auto:AutoPlanner"),
    Entry("placement", "greedy", "optplan.solvers.placement.allocate:greedy_place"),
    Entry("placement", "cpsat", "optplan.solvers.placement.cpsat:solve"),
    Entry("placement", "auto", None),
    Entry("goals", "greedy", "optplan.solvers.goals.greedy:GreedyGoalPlanner"),
    Entry("goals", "cpsat", "optplan.solvers.goals.cpsat:CpSatGoalPlanner"),
    Entry("goals", "kai", "optplan.solvers.baselines.kai:KaiPlanner"),
    Entry("goals", "milp", "optplan.solvers.goals.milp:MilpGoalPlanner"),
    Entry("goals", "auto", None),
    Entry("provision", "greedy", "optplan.solvers.provision.greedy:greedy_counts"),
    Entry("provision", "cpsat", "optplan.solvers.provision.cpsat:solve"),
    Entry("provision", "auto", None),
    Entry("provision", "seed", "optplan.solvers.provision.peers:seed_formula"),
    Entry("provision", "least-waste", "optplan.solvers.provision.peers:least_waste"),
)

HELP = {
    "repack": "auto (default): greedy, then CP-SAT hinted with it, the better plan wins",
    "goals": "for runs with admit / freeHyperNodes goals: auto (default: greedy, then the joint CP-SAT model "
             "hinted with it, the better plan wins), greedy, cpsat, milp (its PuLP/HiGHS twin), kai (KAI-style "
             "consolidation, a peer)",
    "placement": "greedy (Volcano's allocate), cpsat (exact, lexicographic), auto (default: both, the better "
                 "plan wins)",
    "provision": "auto (default: the greedy, the exact model and the peers' nodes completed, the plan serving "
                 "most gangs at least cost wins), greedy, cpsat (with a proven bound), seed (seed 004's formula, "
                 "a peer), least-waste (Cluster Autoscaler's expander, a peer)",
}
"""The ``--solver`` help of each family's command."""


def families() -> tuple[str, ...]:
    return tuple(dict.fromkeys(e.family for e in _ENTRIES))


def names(family: str) -> tuple[str, ...]:
    """The family's planner names in registration order."""
    return tuple(e.name for e in _ENTRIES if e.family == family)


def default_first(family: str) -> tuple[str, ...]:
    """The names with the default first (the plan server's order: its first choice is the default)."""
    return (DEFAULT, *(n for n in names(family) if n != DEFAULT))


def unknown_message(name: object, choices: tuple[str, ...] | list[str]) -> str:
    return f"unknown solver {name!r}; choose from {', '.join(choices)}"


def entry(family: str, name: str) -> Entry:
    for e in _ENTRIES:
        if e.family == family and e.name == name:
            return e
    raise ValueError(unknown_message(name, names(family)))


def load(family: str, name: str) -> Any:
    """The class or function registered under (family, name); its module is imported on first use."""
    target = entry(family, name).target
    if target is None:
        raise ValueError(f"{family} planner {name!r} is composed by its family's dispatch, not loaded")
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)
