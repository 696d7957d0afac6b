"""What the MILP twins share (Repack's and the goal planners'): the PuLP backend (HiGHS, warm-started on
request, else CBC), rows added without PuLP's copying operators and refused past HiGHS's range, and the
one reading of a MILP's proof (``proven_optimal``, ``dual_bound``). PuLP is imported with this module, so only
the MILP planners import it."""

from __future__ import annotations

import logging
import math
from typing import Any

import pulp

from optplan.errors import InputError
from optplan.models.limits import MAX_MILP_BOUND, MAX_MILP_COEFFICIENT
from optplan.solvers.core.options import PlanOptions

log = logging.getLogger(__name__)


class WarmHiGHS(pulp.HiGHS):
    """PuLP's HiGHS, started from the variables' current values when ``start`` is set (PuLP's own
    HiGHS interface takes no warm start)."""

    start = False

    def callSolver(self, lp: pulp.LpProblem) -> None:
        if self.start:
            import highspy

            sol = highspy.HighsSolution()
            sol.col_value = [float(x.varValue or 0) for x in lp.variables()]
            sol.value_valid = True
            lp.solverModel.setSolution(sol)
        lp.solverModel.run()


def backend(options: PlanOptions, limit: float, start: bool = False) -> Any:
    limit = max(limit, 0.1)
    try:
        import highspy  # noqa: F401

        solver = WarmHiGHS(msg=False, timeLimit=limit, threads=options.workers, random_seed=options.seed)
        if solver.available():
            solver.start = start
            return solver
    except (ImportError, TypeError):  # pragma: no cover - depends on the installation
        pass
    return pulp.PULP_CBC_CMD(msg=False, timeLimit=limit, threads=options.workers, warmStart=start,
                             options=[f"randomSeed {options.seed + 1}"])


Term = tuple[Any, float]


def row(prob: pulp.LpProblem, terms: list[Term], sense: int, rhs: float) -> None:
    """Add Σ terms (sense) rhs without PuLP's operator overloading, which copies the expression at
    every term (the openb model's 3 million arcs took six minutes that way)."""
    expr: dict[Any, float] = {}
    for x, coef in terms:
        expr[x] = expr.get(x, 0) + coef
    in_range(max((abs(c) for c in expr.values()), default=0), MAX_MILP_COEFFICIENT, "coefficient")
    in_range(abs(rhs), MAX_MILP_BOUND, "right-hand side")
    prob.addConstraint(pulp.LpConstraint(pulp.LpAffineExpression(expr), sense, rhs=rhs))


def in_range(value: float, limit: int, what: str) -> None:
    """The MILP's range (``limits.MAX_MILP_COEFFICIENT``, ``MAX_MILP_BOUND``): past it HiGHS would read the
    value as infinite and answer nonsense, so the input is refused before the model is solved."""
    if value >= limit:
        raise InputError(f"the milp solver (HiGHS) reads a {what} of {limit:.0e} or more as infinite, and this "
                         f"snapshot's amounts put {value:.3g} in its model; plan it with --solver cpsat",
                         field="--solver")


LE, GE, EQ = pulp.LpConstraintLE, pulp.LpConstraintGE, pulp.LpConstraintEQ


def proven_optimal(prob: pulp.LpProblem) -> bool:
    """The solver proved its solution optimal: PuLP's 'Optimal' (which alone does not say a limit cut the
    search) for the solution and the problem, and, with HiGHS, its dual bound meeting the (integer)
    objective. HiGHS 1.16 started from a solution (``WarmHiGHS.start``) has answered "optimal" with its dual
    bound far below the start's objective (317 vs 66; cold, it found 94): no proof is taken from that."""
    if not (prob.sol_status == pulp.LpSolutionOptimal and prob.status == pulp.LpStatusOptimal):
        return False
    b = dual_bound(prob)
    if b is None:
        return getattr(prob, "solverModel", None) is None  # CBC: its own word
    value = pulp.value(prob.objective) or 0
    ours = value if prob.sense == pulp.LpMinimize else -value  # HiGHS minimises; PuLP negates a maximisation
    if math.ceil(b - 1e-6) < round(ours):
        log.warning("milp: HiGHS answered optimal at %s with its dual bound at %s: not taken as a proof", ours, b)
        return False
    return True


def dual_bound(prob: pulp.LpProblem) -> float | None:
    """HiGHS's best bound on the objective as HiGHS minimises it (PuLP negates a maximisation)."""
    model = getattr(prob, "solverModel", None)
    try:
        b = float(model.getInfo().mip_dual_bound)  # type: ignore[union-attr]
    except (AttributeError, TypeError, ValueError):  # CBC, or no HiGHS model
        return None
    return b if math.isfinite(b) else None
