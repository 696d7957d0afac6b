"""``--scheduler-conf``'s actions in placement: preempt and reclaim evict only when the configuration runs them
(each action alone, both, neither — Volcano's own default runs neither); the greedy, the exact model and auto
agree and the validator refuses a victim of an action the configuration does not run."""

from __future__ import annotations

from typing import Any

import pytest

from optplan.adapters.schedconf import parse_scheduler_conf
from optplan.errors import PlanInvalidError
from optplan.models.placement import JobPlacement, PlacementPlan, Victim
from optplan.models.repack import SolverRecord
from optplan.models.schedconf import SchedulerConf
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.placement.place import plan_placement
from optplan.solvers.placement.validate import validate_placement
from tests.builders import load, node, queue
from tests.placement.test_victims import CLASSES, NOW, pending, running, seed_reclaim

OPTS = PlanOptions(time_limit=5, workers=1, seed=0)
SOLVERS = ("greedy", "cpsat", "auto")


def conf(actions: str) -> SchedulerConf:
    return parse_scheduler_conf({"actions": actions, "tiers": [{"plugins": [
        {"name": "priority"}, {"name": "gang"}, {"name": "predicates"},
        {"name": "capacity", "enableHierarchy": True}]}]}, "conf.yaml")


def preempt_case() -> list[dict[str, Any]]:
    """The victim's minAvailable is 0: Volcano's tiers preempt no job at minMember."""
    return [*CLASSES, node("a", 8), queue("q"), *running("v", "q", [("a", 8)], "normal-job", min_member=0),
            pending("big", "q", 1, 8)]


def place(solver: str, objs: list[dict[str, Any]], c: SchedulerConf, job: str) -> JobPlacement:
    s = load(*objs).snapshot
    return plan_placement(s, list(s.jobs.values()), solver, OPTS, now=NOW, scheduler=c).job(job)


# actions, whether the preempting job evicts, whether the reclaiming job does
CASES = [
    ("enqueue, allocate, preempt, reclaim, backfill", True, True),
    ("enqueue, allocate, preempt, backfill", True, False),
    ("enqueue, allocate, reclaim, backfill", False, True),
    ("enqueue, allocate, backfill", False, False),
]


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize(("actions", "preempts", "reclaims"), CASES, ids=[c[0] for c in CASES])
def test_only_the_configured_actions_evict(solver: str, actions: str, preempts: bool, reclaims: bool) -> None:
    c = conf(actions)
    jp = place(solver, preempt_case(), c, "default/big")
    assert jp.admitted is preempts and bool(jp.victims) is preempts
    jp = place(solver, seed_reclaim(), c, "default/team-b-new")
    assert jp.admitted is reclaims and bool(jp.victims) is reclaims
    if not reclaims and solver == "greedy":
        assert "runs no reclaim action" in jp.reason


def test_no_warning_for_modelled_actions() -> None:
    assert not any("preempt" in w or "reclaim" in w for w in conf("enqueue, allocate, backfill").warnings)


def test_validator_refuses_a_victim_of_an_action_not_run() -> None:
    s = load(*preempt_case()).snapshot
    jp = JobPlacement(namespace="default", name="big", queue="q", admitted=True, reason="test",
                      victims=(Victim(namespace="default", name="v-0", node="a", reason="preempt"),))
    plan = PlacementPlan(jobs=(jp,), solver=SolverRecord(name="test", status="FEASIBLE"))
    with pytest.raises(PlanInvalidError, match="an action the scheduler configuration does not run"):
        validate_placement(s, list(s.jobs.values()), plan, actions=("allocate",))
