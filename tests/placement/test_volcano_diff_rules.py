"""Rules the differential runs against the real vc-scheduler showed optplan had wrong or missing
(docs/benchmarks.md, "Placement against the real Volcano scheduler"), table-driven: each case lists the
nodes, queues, running pods and the pending job, then what every solver must decide (admitted, the
victims, a fragment of the reason); each rule also has a hand-built plan that breaks it, which the
validator must flag. Written from the rules (victims.py's docstring), not from Volcano's tests."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from optplan.adapters.kubefile import load_objects
from optplan.models.placement import PlacementPlan
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.placement.place import plan_placement
from optplan.solvers.placement.validate import placement_violations
from tests.builders import GPU, admitted_with, hypernode, job_task, node, pod, podgroup_in, priority_class, queue, vcjob

OPTS = PlanOptions(time_limit=5, workers=1, seed=0)
NOW = "2025-06-01T12:00:00Z"
SOLVERS = ("greedy", "cpsat", "auto")
CLASSES = [priority_class("low", 50), priority_class("high", 1000)]
HARD = {"mode": "hard", "highestTierAllowed": 1}
SOFT = {"mode": "soft"}


def running(name: str, queue_name: str, node_name: str, gpu: int, cls: str = "low") -> list[dict[str, Any]]:
    pg = podgroup_in(queue_name, name, 0)  # minMember 0: Volcano's tiers preempt no job at minMember
    pg["spec"]["priorityClassName"] = cls
    p = pod(f"{name}-0", node_name, gpu, group=name)
    p["status"]["startTime"] = "2025-06-01T10:00:00Z"
    p["spec"]["priorityClassName"] = cls
    return [pg, p]


def job(queue_name: str, gpu: int, topology: dict[str, Any] | None) -> dict[str, Any]:
    return vcjob("new", queue_name, [job_task("w", 1, gpu)], priority_class_name="high", network_topology=topology)


def fabric() -> list[dict[str, Any]]:
    return [node("n0"), hypernode("s0", 1, ["n0"])]


@dataclass(frozen=True)
class Case:
    objects: list[dict[str, Any]]
    admitted: bool
    victims: frozenset[str] = frozenset()
    reason: str = ""
    bad_victims: tuple[tuple[str, str, str], ...] = ()  # a plan breaking the rule: (pod, node, action) ...
    bad_nodes: tuple[str, ...] = ()  # ... and its pods' nodes
    flag: str = ""  # what the validator says of it


CASES: dict[str, Case] = {
    # Rule: a job with a networkTopology (hard or soft) does not preempt; Volcano's preempt action skips it.
    # Without a topology the same job preempts the lower-priority pod of its own queue.
    "preempt-without-topology/holds": Case(
        [*fabric(), queue("team-a", deserved={GPU: 8}), *running("a", "team-a", "n0", 8), job("team-a", 8, None)],
        admitted=True, victims=frozenset({"a-0"})),
    "preempt-hard-topology/broken": Case(
        [*fabric(), queue("team-a", deserved={GPU: 8}), *running("a", "team-a", "n0", 8), job("team-a", 8, HARD)],
        admitted=False, reason="networkTopology does not preempt", bad_victims=(("a-0", "n0", "preempt"),),
        bad_nodes=("n0",), flag="networkTopology does not preempt"),
    "preempt-soft-topology/broken": Case(
        [*fabric(), queue("team-a", deserved={GPU: 8}), *running("a", "team-a", "n0", 8), job("team-a", 8, SOFT)],
        admitted=False, reason="networkTopology does not preempt", bad_victims=(("a-0", "n0", "preempt"),),
        bad_nodes=("n0",), flag="networkTopology does not preempt"),
    # ... while it still reclaims: team-a (deserved 0) is over, team-b under with the request.
    "reclaim-with-topology/holds": Case(
        [*fabric(), queue("team-a", deserved={GPU: 0}), queue("team-b", deserved={GPU: 8}),
         *running("a", "team-a", "n0", 8), job("team-b", 8, SOFT)],
        admitted=True, victims=frozenset({"a-0"})),
}


def _plan(case: Case, solver: str) -> tuple[Any, PlacementPlan]:
    s = load_objects([*CLASSES, *case.objects]).snapshot
    return s, plan_placement(s, list(s.jobs.values()), solver, OPTS, now=NOW)


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_case(name: str, solver: str) -> None:
    case = CASES[name]
    s, plan = _plan(case, solver)
    jp = plan.job("default/new")
    assert jp.admitted is case.admitted, jp.reason
    assert {x.name for x in jp.victims} == case.victims
    if case.reason:
        assert case.reason in jp.reason
    assert placement_violations(s, list(s.jobs.values()), plan) == []


@pytest.mark.parametrize("name", sorted(n for n, c in CASES.items() if c.bad_victims))
def test_validator_flags_the_plan_that_breaks_the_rule(name: str) -> None:
    case = CASES[name]
    s, plan = _plan(case, "greedy")
    bad = admitted_with(plan, "default/new", case.bad_nodes, case.bad_victims)
    out = placement_violations(s, list(s.jobs.values()), bad)
    assert any(case.flag in line for line in out), out


@pytest.mark.parametrize("solver", SOLVERS)
def test_one_pod_is_evicted_once_for_one_job(solver: str) -> None:
    # Rule: a victim's room serves the job that evicts it (and later jobs only with what it leaves). Only n0
    # is in pool x, full with a-0, one of three 8-GPU pods of team-a's gang a (minMember 1: two may go);
    # two jobs of team-b each need all of n0. The exact model once let both jobs take a-0, each counting
    # its 8 GPUs: two admitted, which the validator refused.
    pool = {"nodeSelector": {"pool": "x"}}
    gang = podgroup_in("team-a", "a", 1)
    gang["spec"]["priorityClassName"] = "low"
    pods = [pod(f"a-{i}", f"n{i}", 8, group="a") for i in range(3)]
    for p in pods:
        p["spec"]["priorityClassName"] = "low"
    objs = [node("n0", labels={"pool": "x"}), node("n1"), node("n2"), queue("team-a", deserved={GPU: 0}),
            queue("team-b", deserved={GPU: 16}), gang, *pods,
            *(vcjob(n, "team-b", [job_task("w", 1, 8, template_spec=pool)], priority_class_name="high")
              for n in ("one", "two"))]
    s = load_objects([*CLASSES, *objs]).snapshot
    plan = plan_placement(s, list(s.jobs.values()), solver, OPTS, now=NOW)
    assert sum(jp.admitted for jp in plan.jobs) == 1
    assert [x.name for jp in plan.jobs for x in jp.victims] == ["a-0"]
    assert placement_violations(s, list(s.jobs.values()), plan) == []
