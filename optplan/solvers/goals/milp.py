"""The MILP twin of the joint goal model (issue 15 §2 "the MILP twin where it is cheap to keep"), in PuLP,
solved by HiGHS (else CBC) as Repack's twin is (``core.milp``: its backend, rows and proof; ``core.highs``:
quiet stdout).

The same model as ``cpsat`` (which documents the decisions and constraints): both only emit the rows of
``rows.exact_model``, on the same data (``model.build_data``: the same classes, receivers, regions and
integer scales, restricted exactly when cpsat's is), with the same three lexicographic stages: (1) gangs
admitted weighted by priority level, (2) HyperNodes freed, (3) the weighted disruption on Repack's integer
scale. Each stage's value is then fixed as a row for the next (= the optimum when proven, ≥ the value found
when the stage was cut short).

HiGHS runs cold and without presolve, as HiGHS 1.16 answered wrongly otherwise on the seeded family
(``tests/goalcases``). Given a start (``setSolution``, as ``repack.exact.milp``'s phase 2 does), it returned the
start unchanged as "optimal" at 46 in its presolved space (the start's 252 less an offset) where the optimum
is 56 (seed 176); with presolve, stage 3 of seed 88 (HyperNodes) came back INFEASIBLE after "untransformed
violations" of its own solutions. Cold and without presolve, the 400 family cases (seeds 0-199, with and
without a HyperNode goal) and 150 of ``test_goals_exact``'s richer family all reach CP-SAT's proven score.
A hint therefore only keeps its arcs in a restricted model and is the fallback plan, as in cpsat.

CP-SAT's enforced constraints, linearised (``rows.ExactModel.sides``; every variable is an integer with
finite bounds): a row ``Σ ≤ rhs`` enforced by a literal ``f`` becomes ``Σ + (U − rhs)·f ≤ U``, U the most
Σ can be by the bounds (or the row's ``off``, where the other rows bound it tighter), a ``≥`` side likewise,
a side the bounds imply is left out. So:

- an over-committed node's capacity row binds only when something requesting that resource lands:
  ``expr ≤ room · on`` (room < 0) and ``x ≤ ub(x) · on`` for each landing x;
- a freed HyperNode: ``moved ≥ count · free`` for each class on it, ``free + receiver ≤ 1``, and
  ``x ≤ ub(x) · (1 − free)`` for each gang pod requesting R placed there;
- a whole-group restart that breaches minAvailable: ``wide ≤ breach``.

HiGHS is asked for gap 0: its default relative gap (1e-4) could call a stage-3 plan some units of the
integer cost short of the optimum "optimal". Threads and random seed are the options'; on the family's
small models HiGHS proves each stage well inside the limit, so one input gives one plan. Time limits are
wall-clock (HiGHS has no deterministic limit): a model cut short may differ run to run.

Plan read-back, status and record are the shared ones (``rows.exact_result``: ``decode``, ``build_plan``,
``settle``, ``goal_record``): OPTIMAL only when every stage was proven on the whole model; FEASIBLE otherwise
(always for a restricted model); INFEASIBLE when a required HyperNode count is proven out of reach (the count
is then dropped and the plan frees what it can); FALLBACK when HiGHS found no solution (``model.fallback``).

Gangs not admitted name the gang's own cause when it was proven before planning (``Data.causes``: capacity,
quota, topology), else SEARCH: unlike cpsat, the twin does not re-check each gang with it forced in. It is
a cross-check of the exact model and a peer in ``optplan compare``; the re-checks would double its code
without changing its plan.
"""

from __future__ import annotations

import logging
import math
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pulp

from optplan.models.goals import SEARCH, GoalPlan
from optplan.solvers.core.exact import ExactModelError, strict
from optplan.solvers.core.highs import quiet
from optplan.solvers.core.milp import EQ as pulp_EQ
from optplan.solvers.core.milp import GE as pulp_GE
from optplan.solvers.core.milp import LE as pulp_LE
from optplan.solvers.core.milp import WarmHiGHS, backend, dual_bound, proven_optimal, row
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.core.planner import Planner
from optplan.solvers.goals.model import (
    RESERVE,
    Data,
    Stage,
    build_data,
    stage_seconds,
)
from optplan.solvers.goals.problem import GoalProblem, GoalResult
from optplan.solvers.goals.rows import (
    EQ,
    GE,
    LE,
    ExactModel,
    Key,
    Term,
    exact_result,
    model_of,
)
from optplan.solvers.goals.validate import goal_violations

log = logging.getLogger(__name__)

PRESOLVE = "off"
"""HiGHS's presolve (off: see the module)."""

# ---- the model: ``rows.exact_model``'s rows, emitted ------------------------------------------------------

SENSES = {LE: pulp_LE, GE: pulp_GE, EQ: pulp_EQ}


@dataclass
class Vars:
    """The MILP variable of each of the model's keys (``rows.Key``), and the three objectives."""

    model: ExactModel
    of: dict[Key, Any] = field(default_factory=dict)

    def _expr(self, terms: list[Term]) -> pulp.LpAffineExpression:
        """Σ terms, a variable's coefficients added, without PuLP's copying operators (``core.milp.row``)."""
        out: dict[Any, float] = defaultdict(float)
        for x, c in terms:
            out[self.of[x]] += c
        return pulp.LpAffineExpression([(x, c) for x, c in out.items() if c])

    def admitted(self, data: Data) -> pulp.LpAffineExpression:
        return self._expr(self.model.admitted)

    def freed(self) -> pulp.LpAffineExpression:
        return self._expr(self.model.freed)

    def cost(self, data: Data) -> pulp.LpAffineExpression:
        return self._expr(self.model.cost(data.weights_int))


def build(data: Data, *, budgets: bool = True, required: bool = False) -> tuple[pulp.LpProblem, Vars]:
    """The model (``rows.exact_model``: the same rows as cpsat's, in the same order), a row enforced by a
    literal linearised with its big-M (``ExactModel.sides``); ``required``: Σ free ≥ count."""
    ex = model_of(data)
    prob = pulp.LpProblem("goals", pulp.LpMaximize)
    v = Vars(ex)
    of = v.of
    for key, upper in ex.upper.items():
        of[key] = prob.add_variable(ex.names[key], lowBound=0, upBound=upper, cat="Integer")
    for r in ex.emitted(budgets=budgets, required=required):
        for terms, sense, rhs in ex.sides(r):
            row(prob, [(of[x], c) for x, c in terms], SENSES[sense], rhs)
    return prob, v


# ---- solving ----------------------------------------------------------------------------------------------

@dataclass
class Run:
    """One stage's HiGHS answer: FOUND (a solution, proven or not), INFEASIBLE, or NONE (no solution)."""

    kind: str
    stage: Stage | None = None


def _solve(prob: pulp.LpProblem, objective: pulp.LpAffineExpression, maximize: bool, options: PlanOptions,
           seconds: float, what: str, most: int) -> Run:
    """Optimise ``objective``, cold (the module says why). The stage's value is read from the
    solution's rounded values; its bound is HiGHS's (``most`` for a maximisation HiGHS gives none, 0 for a
    minimisation)."""
    prob.setObjective(objective)
    prob.sense = pulp.LpMaximize if maximize else pulp.LpMinimize
    solver = backend(options, seconds)
    if isinstance(solver, WarmHiGHS):
        solver.gapRel = 0.0
        solver.optionsDict["presolve"] = PRESOLVE
    else:  # pragma: no cover - CBC, without highspy
        solver.optionsDict["gapRel"] = 0.0
    with quiet():
        prob.solve(solver)
    if prob.status == pulp.LpStatusInfeasible:
        log.info("goals milp %s: INFEASIBLE", what)
        return Run("INFEASIBLE")
    if prob.sol_status not in (pulp.LpSolutionIntegerFeasible, pulp.LpSolutionOptimal):
        log.info("goals milp %s: no solution", what)
        return Run("NONE")
    for x in prob.variables():
        x.varValue = round(x.varValue or 0)
    value = round(pulp.value(objective) or 0)
    proven = proven_optimal(prob)
    b = dual_bound(prob)
    if proven:
        bound = value
    elif maximize:  # HiGHS's dual bound; one on the wrong side of its own solution is no bound
        bound = most if b is None or math.floor(-b + 1e-6) < value else math.floor(-b + 1e-6)
    else:
        bound = 0 if b is None or math.ceil(b - 1e-6) > value else math.ceil(b - 1e-6)
    log.info("goals milp %s: %s objective %s bound %s", what, "OPTIMAL" if proven else "FEASIBLE", value, bound)
    return Run("FOUND", Stage(value, bound, proven))


@dataclass
class Outcome:
    data: Data
    model: pulp.LpProblem | None
    vars: Vars | None
    values: dict[Any, int] | None  # the final solution (None: no solution)
    stages: list[Stage]
    required: bool  # the required HyperNode count is a row of the final model
    infeasible_required: bool  # the required count was proven out of reach


def solve(problem: GoalProblem, options: PlanOptions, hint: GoalPlan | None = None) -> Outcome:
    """The three stages (see the module) on one model."""
    start = time.perf_counter()
    end = start + options.time_limit * (1 - RESERVE)
    data = build_data(problem, hint)
    hint_ok = hint is not None and not goal_violations(problem, hint)
    required = bool(problem.free_count and problem.free_required)

    def until(i: int) -> float:
        return stage_seconds(data, i, time.perf_counter(), end)

    most = sum(data.priority_weight.values())

    def stage1(req: bool, what: str) -> tuple[pulp.LpProblem, Vars, Run]:
        prob, v = build(data, required=req)
        return prob, v, _solve(prob, v.admitted(data), True, options, until(0), what, most)

    prob, v, run = stage1(required, "stage 1 (admissions)")
    infeasible_required = False
    # a valid hint meeting the required count is a solution: then INFEASIBLE is a bug (below)
    meets = hint_ok and hint is not None and len(hint.freed_hyper_nodes) >= problem.free_count
    if run.kind == "INFEASIBLE" and required and not meets:
        infeasible_required, required = True, False
        prob, v, run = stage1(False, "stage 1 (admissions), required HyperNodes dropped")
    if run.kind == "INFEASIBLE":  # doing nothing (or the valid hint) is a solution: only a bug refuses it
        _bug("goals milp stage 1 (admissions)")
    if run.stage is None:
        return Outcome(data, prob, v, None, [], required, infeasible_required)
    stages = [run.stage]
    best = _values(prob)
    # stage 2: freed HyperNodes, the admissions kept
    row(prob, list(v.admitted(data).items()), pulp_EQ if stages[0].proven else pulp_GE, stages[0].value)
    if v.model.freed:
        run = _solve(prob, v.freed(), True, options, until(1), "stage 2 (HyperNodes)", problem.free_count)
        best = _advance(prob, run, "stage 2 (HyperNodes)", stages, best,
                        lambda b: Stage(sum(b[v.of[f]] for f, _ in v.model.freed), problem.free_count, False))
        row(prob, list(v.freed().items()), pulp_EQ if stages[1].proven else pulp_GE, stages[1].value)
    else:
        stages.append(Stage(0, 0, True))
    # stage 3: the weighted disruption, admissions and HyperNodes kept
    cost = v.cost(data)
    run = _solve(prob, cost, False, options, until(2), "stage 3 (disruption)", 0)
    best = _advance(prob, run, "stage 3 (disruption)", stages, best,
                    lambda b: Stage(round(sum(c * b[x] for x, c in cost.items())), 0, False))
    return Outcome(data, prob, v, best, stages, required, infeasible_required)


def _advance(prob: pulp.LpProblem, run: Run, what: str, stages: list[Stage], best: dict[Any, int],
             unsolved: Callable[[dict[Any, int]], Stage]) -> dict[Any, int]:
    """Record a later stage's outcome in ``stages``; the solution to keep: the stage's when it found
    one, else ``best`` (the earlier stage's), whose value ``unsolved`` reads as the stage's."""
    if run.kind == "INFEASIBLE":
        _bug(f"goals milp {what}")
    if run.stage is not None:
        stages.append(run.stage)
        return _values(prob)
    stages.append(unsolved(best))
    return best


def _values(prob: pulp.LpProblem) -> dict[Any, int]:
    return {x: round(x.varValue or 0) for x in prob.variables()}


def _bug(what: str) -> None:
    """HiGHS answered INFEASIBLE where a solution is known (doing nothing, the valid hint, the previous
    stage's solution): a bug in the model or in HiGHS. Raised in strict mode (``core.exact.strict``); else
    logged, and the planner keeps the previous stage's solution (none at stage 1: FALLBACK)."""
    message = f"{what}: HiGHS answered INFEASIBLE although a solution is known"
    if strict():
        raise ExactModelError(message)
    log.error("%s (a bug in the MILP twin or HiGHS)", message)


# ---- the planner -------------------------------------------------------------------------------------------

class MilpGoalPlanner(Planner[GoalProblem, GoalResult]):
    """The MILP twin of the exact goal planner (see the module)."""

    name = "milp"

    def plan(self, problem: GoalProblem, options: PlanOptions, hint: GoalResult | None = None) -> GoalResult:
        """``hint``: a plan to start from (the greedy's), kept when nothing better is found."""
        t0 = time.perf_counter()
        start = hint.plan if hint is not None else None
        out = solve(problem, options, start)
        data = out.data
        values, v = out.values, out.vars
        value = None if values is None or v is None else (lambda key: values[v.of[key]])
        counts = ({} if out.model is None else
                  {"variables": len(out.model.variables()), "constraints": out.model.numConstraints()})
        return exact_result(self.name, problem, data, out.stages, value=value,
                            infeasible_required=out.infeasible_required,
                            causes=lambda admitted: {i: (SEARCH, "no plan admitting it was found (the MILP twin does "
                                                                 "not re-check why; the cpsat planner does)")
                                                     for i in data.eligible if i not in admitted} | data.causes,
                            violations=goal_violations, hint=start, counts=counts, started=t0)


__all__ = ["MilpGoalPlanner"]
