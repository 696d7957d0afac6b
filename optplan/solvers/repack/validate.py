"""validate_plan: a solver-independent re-check of every Repack rule.

It runs every rule family's check (``checks``: plan shape, scope and movability, disruption protection,
the vacate goal, static predicates, cumulative fit, budgets, PDBs, network topology) on the plan alone,
rebuilding the simulated state from the snapshot; with a planner's claims, also its disruption (gang
accounting, restart units included) and, when given, the status summary arithmetic and each PodGroup's
restart footprint. It shares only the feasibility oracle and the rule definitions with the planners,
never their search code.
"""

from __future__ import annotations

from optplan.errors import PlanInvalidError
from optplan.models.repack import RepackPlan, RepackRun, RepackRunStatus, Weights
from optplan.models.results import Disruption, FragReport
from optplan.models.snapshot import Snapshot
from optplan.solvers.repack.checks import CHECKS, Violation, check_disruption, check_status
from optplan.solvers.repack.rules import RepackProblem


def plan_violations(problem: RepackProblem, plan: RepackPlan, *, claimed: Disruption | None = None,
                    status: RepackRunStatus | None = None, frag: FragReport | None = None) -> list[str]:
    """Every rule the plan breaks, as short sentences in the plan's order (``checks.Violation.at``);
    empty when the plan is valid."""
    found: list[Violation] = [v for check in CHECKS for v in check(problem, plan)]
    if claimed is not None:
        found += check_disruption(problem, plan, claimed)
    if status is not None and frag is not None:
        found += check_status(problem, plan, status, frag)
    return [v.message for v in sorted(found, key=lambda v: v.at)]


def validate_plan(snapshot: Snapshot, run: RepackRun, plan: RepackPlan, *, claimed: Disruption | None = None,
                  status: RepackRunStatus | None = None, frag: FragReport | None = None,
                  weights: Weights | None = None, move_shares: bool = True) -> None:
    """Raise PlanInvalidError listing every broken rule; return quietly for a valid plan (``move_shares``: as
    the planner's ``RepackProblem``)."""
    problem = RepackProblem(snapshot, run, weights or Weights(), move_shares=move_shares)
    violations = plan_violations(problem, plan, claimed=claimed, status=status, frag=frag)
    if violations:
        raise PlanInvalidError(violations)
