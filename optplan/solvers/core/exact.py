"""What the exact planners share: how two plans are ranked, the gap they report, and what a solver answer
that can only be a bug does.

- ``better(a, b)``: the exact models' lexicographic order, more freed nodes first, then the lower integer
  cost; a tie keeps ``b`` (the incumbent: the greedy's plan, whose receivers follow the seed's order). Every
  comparison of two plans in the exact planners (auto's two greedies and its final choice, each LNS step)
  is this one function, on integer costs only: a rounded float can call two different costs equal.
- ``gap_percent``, ``exact_record``: the lexicographic gap every solver record reports, and the record.
- ``proven_bound``: the bound a CP-SAT solve proved, read in one place. A bound is claimed only from a solve
  that proved it: the optimum of an OPTIMAL solve, or the best objective bound CP-SAT reports beside a
  solution (FEASIBLE: the bound its search has proven so far). A solve cut before its first solution
  (UNKNOWN) reports 0, protobuf's default, which is no bound at all: under load a cut solve once turned into
  "OPTIMAL, bound 0, no node can be freed" where 21 could be. Such a solve contributes nothing; its caller
  keeps the bound it had before (the pool bound, the budget relaxation's, or none).
- ``model_bug``: CP-SAT answering INFEASIBLE or MODEL_INVALID for a model whose complete hint is a valid
  plan is a bug in the model, not a timeout. It is logged at error level with the model's own validation
  message, and raised (``ExactModelError``) when ``OPTPLAN_STRICT=1`` (the test suite sets it); otherwise
  the planner drops the exact result and the user gets the greedy's valid plan as ``FALLBACK``.
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass
from typing import Any

from optplan.models.repack import SolverRecord
from optplan.solvers.core.clock import Clock

log = logging.getLogger(__name__)

STRICT_ENV = "OPTPLAN_STRICT"
"""Set to ``1`` to raise ``ExactModelError`` instead of falling back (tests, development)."""


@dataclass(frozen=True)
class Score:
    """A plan as the exact models rank it: freed nodes, then its integer-scaled weighted disruption (any
    positive scale, the same for both plans compared)."""

    freed: int
    cost: int


def rank(s: Score) -> tuple[int, int]:
    """The order of plans as a value (greater is better): freed nodes, then the lower cost."""
    return (s.freed, -s.cost)


def better(a: Score, b: Score) -> bool:
    """``a`` frees more nodes than ``b``, or as many at a lower cost. Ties keep ``b``."""
    return rank(a) > rank(b)


def gap_percent(objective: int | None, bound: int | None, freed: int | None = None,
                freed_bound: int | None = None) -> float | None:
    """The lexicographic gap: while more freed nodes are not ruled out, the gap in freed nodes
    (freed_bound − freed) / freed_bound; once they are, the gap in the weighted disruption."""
    if freed is not None and freed_bound is not None and freed < freed_bound:
        return round(100.0 * (freed_bound - freed) / freed_bound, 3)
    if objective is None or bound is None:
        return None
    if objective == 0:
        return 0.0
    return round(100.0 * abs(objective - bound) / abs(objective), 3)


def exact_record(name: str, status: str, *, freed: int | None, freed_bound: int | None, objective: int | None,
                 bound: int | None, wall: float) -> SolverRecord:
    """The solver record of an exact planner's plan (``freed`` nodes, its ``objective``), with the gap."""
    return SolverRecord(name=name, status=status, freed_nodes_bound=freed_bound, objective=objective,
                        best_bound=bound, gap_percent=gap_percent(objective, bound, freed, freed_bound),
                        wall_seconds=wall)


def proven_bound(solver: Any, status: Any, *, maximize: bool) -> int | None:
    """The integer bound on the objective that ``solver``'s solve (which answered ``status``) proved: at most
    this (``maximize``) or at least this (minimise) for any solution of the model; None when the solve
    proved none (see the module). A FEASIBLE bound on the wrong side of the solution found beside it would
    be a contradiction: it is dropped and logged (never seen)."""
    name = solver.status_name(status)
    if name not in ("OPTIMAL", "FEASIBLE"):
        return None
    value = round(solver.objective_value)
    if name == "OPTIMAL":
        return value
    raw = solver.best_objective_bound
    if not math.isfinite(raw):
        return None
    bound = math.floor(raw + 1e-6) if maximize else math.ceil(raw - 1e-6)
    if (bound < value) if maximize else (bound > value):
        log.error("CP-SAT reported the bound %s on the wrong side of its own solution %s: no bound taken", raw, value)
        return None
    return bound


def with_overrun(record: SolverRecord, clock: Clock, limit: float) -> SolverRecord:
    """``record`` saying how far past ``limit`` the run's ``clock`` went, when it did (logged as a warning too):
    a late answer, never a missing one (``Clock.overrun``)."""
    over = clock.overrun(limit)
    if over is None:
        return record
    log.warning("planning ran %.1fs past its %gs limit (%s)", over, limit, record.name)
    return record.model_copy(update={"limit_exceeded_seconds": over})


class ExactModelError(AssertionError):
    """An exact model refused a solution it was given: a bug (exit status 1 from the CLI)."""


def strict() -> bool:
    return os.environ.get(STRICT_ENV) == "1"


def model_bug(what: str, status: str, validation: str) -> None:
    """Report a solver answer that only a bug explains (``what``: which solve, ``status``: its status,
    ``validation``: the model's own validation message, empty when the model is well formed). Raises
    ``ExactModelError`` in strict mode; else logs at error level and returns (the caller falls back)."""
    message = (f"{what}: CP-SAT answered {status} although the model's hint is a valid plan "
               f"(a bug in the exact model; model validation: {validation or 'no error'})")
    if strict():
        raise ExactModelError(message)
    log.error("%s; its result is dropped (FALLBACK: auto returns the greedy's plan)", message)
