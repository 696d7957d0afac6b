"""The MILP twin of the joint goal model (issue 15 §2, §4 "CP-SAT = MILP where both run"): on the seeded
family both exact planners prove the same lexicographic score, every MILP plan passes the goal validator,
one input gives one plan, and ``optplan compare`` shows the twin beside CP-SAT."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from optplan.cli import main
from optplan.models.goals import CAPACITY, SEARCH
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.core.registry import load
from optplan.solvers.goals.cpsat import CpSatGoalPlanner
from optplan.solvers.goals.greedy import GreedyGoalPlanner
from optplan.solvers.goals.milp import MilpGoalPlanner
from optplan.solvers.goals.problem import GoalProblem, GoalResult
from optplan.solvers.goals.resolve import resolve_goals
from optplan.solvers.goals.validate import goal_violations
from tests.builders import hypernode, job_task, node, pdb, pod, podgroup_in, queue, vcjob
from tests.goalcases import Goals, admit_run, load_case, random_case

DEMO = Path(__file__).resolve().parents[2] / "instances" / "admit-gang.yaml"
OPTS = PlanOptions(time_limit=10, workers=1, deterministic=True)


def problem(objs: list[dict[str, Any]]) -> GoalProblem:
    snap, run = load_case(objs)
    return GoalProblem(snap, run, resolve_goals(snap, run))


def milp(p: GoalProblem, **kw: Any) -> GoalResult:
    """The twin's plan, checked by the goal validator (a required count out of reach is the caller's to report)."""
    res = MilpGoalPlanner().plan(p, OPTS, **kw)
    checked = p
    if res.record.status == "INFEASIBLE":
        checked = GoalProblem(p.snapshot, p.run, Goals(tuple(g.job for g in p.gangs), p.free_tier, p.free_count,
                                                       False, p.hyper_node_names))
    assert goal_violations(checked, res.plan, claimed=res.disruption) == []
    return res


def test_registered_under_goals() -> None:
    assert load("goals", "milp") is MilpGoalPlanner


@pytest.mark.parametrize("seed", range(15))
@pytest.mark.parametrize("free", [False, True], ids=["admit", "admit+free"])
def test_cpsat_and_milp_reach_the_same_score(seed: int, free: bool) -> None:
    p = problem(random_case(seed, free=free))
    exact = CpSatGoalPlanner().plan(p, OPTS)
    twin = milp(p)
    assert twin.record.status == "OPTIMAL" and exact.record.status == "OPTIMAL"  # small: both prove it
    assert p.score(twin.plan, twin.disruption) == p.score(exact.plan, exact.disruption)
    assert twin.record.objective == exact.record.objective  # the same integer scale
    assert all(a.admitted or a.cause for a in twin.plan.admissions)
    again = milp(problem(random_case(seed, free=free)))
    assert again.plan == twin.plan
    assert again.record == twin.record.model_copy(update={"wall_seconds": again.record.wall_seconds})


def test_a_hint_gives_the_same_score() -> None:
    p = problem(random_case(33))  # the exact planners admit a gang the greedy cannot here
    greedy = GreedyGoalPlanner().plan(p, OPTS)
    twin = milp(p, hint=greedy)
    assert len(twin.plan.admitted()) == 2 > len(greedy.plan.admitted())
    cold = milp(p)
    assert p.score(twin.plan, twin.disruption) == p.score(cold.plan, cold.disruption)


def test_a_restricted_model_is_valid_and_never_claims_optimal(monkeypatch: pytest.MonkeyPatch) -> None:
    from optplan.solvers.goals import model
    p = problem(random_case(5))
    whole = milp(p)
    monkeypatch.setattr(model, "MAX_VARIABLES", 0)
    cut = milp(p)
    assert cut.stats["restricted"] == 1 and cut.record.status == "FEASIBLE"
    assert p.score(cut.plan, cut.disruption) <= p.score(whole.plan, whole.disruption)


def racks() -> list[dict[str, Any]]:
    return [*(node(n) for n in ("n0", "n1", "n2", "n3")), queue("default"),
            hypernode("r0", 1, ["n0", "n1"]), hypernode("r1", 1, ["n2", "n3"])]


def test_a_required_hypernode_count_out_of_reach_is_infeasible_and_the_plan_frees_what_it_can() -> None:
    objs = [*racks(), podgroup_in("default", "a"), *(pod(f"p{i}", f"n{i}", 8, group="a") for i in range(4)),
            admit_run([], free={"tier": 1, "count": 1, "required": True})]
    res = milp(problem(objs))
    assert res.record.status == "INFEASIBLE"
    assert res.plan.freed_hyper_nodes == () and res.plan.repack.moves == ()


def test_gangs_not_admitted_give_their_own_cause_else_search() -> None:
    """A gang larger than any node says CAPACITY (proven before planning); one a PDB keeps out says SEARCH
    (the twin does not re-check why, as cpsat does: BUDGET there); the gang that fits is planned."""
    objs = [node("a"), node("b"), queue("default"), podgroup_in("default", "pg1"), podgroup_in("default", "pg2"),
            pod("a1", "a", 4, group="pg1", labels={"app": "one"}),
            pod("b1", "b", 4, group="pg2", labels={"app": "one"}),
            pdb("one", {"app": "one"}, 0),
            vcjob("huge", "default", [job_task("w", 1, 16)]), vcjob("big", "default", [job_task("w", 1, 8)]),
            vcjob("small", "default", [job_task("w", 1, 4)]),
            admit_run(["default/huge", "default/big", "default/small"])]
    res = milp(problem(objs))
    by = {a.name: a for a in res.plan.admissions}
    assert by["huge"].cause == CAPACITY
    assert by["big"].cause == SEARCH and not by["big"].admitted
    assert by["small"].admitted and res.plan.repack.moves == ()


def test_compare_shows_the_twin_beside_cpsat(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["compare", str(DEMO), "--solvers", "cpsat,milp", "--deterministic", "-o", "json"])
    out, err = capsys.readouterr()
    assert code in (0, None), err
    cpsat, twin = json.loads(out)["plans"]
    assert twin["solver"] == "milp" and twin["status"] == cpsat["status"] == "OPTIMAL"
    assert {k: v for k, v in twin.items() if k not in ("solver", "wallSeconds")} == {
        k: v for k, v in cpsat.items() if k not in ("solver", "wallSeconds")}
