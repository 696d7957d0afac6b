"""Where optplan's placement once differed from the real Volcano scheduler's victims, each written from the
rule as table cases (holds / broken) for the greedy, the exact model, ``auto`` and the validator:

- victims only until the node has room ("just enough"): Volcano's preempt and reclaim look at the node's
  room, never at a queue's realCapability, so no victim is taken to free an ancestor queue;
- victims only from the node a pod is tried on: never a pod on a node where the job binds nothing;
- ``auto``'s ties between jobs of equal standing follow the queue share order, as the greedy's allocate.
"""

from __future__ import annotations

from typing import Any

import pytest

from optplan.adapters.kubefile import load_objects
from optplan.models.placement import Binding, PlacementPlan, Victim
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.placement.place import plan_placement
from optplan.solvers.placement.validate import placement_violations
from tests.builders import GPU, job_task, node, pod, queue, vcjob
from tests.placement.test_victims import CLASSES, running

OPTS = PlanOptions(time_limit=5, workers=1, seed=0)
NOW = "2025-06-01T12:00:00Z"
SOLVERS = ("greedy", "cpsat", "auto")


def plans(objs: list[dict[str, Any]]) -> tuple[Any, dict[str, PlacementPlan]]:
    s = load_objects(objs).snapshot
    return s, {solver: plan_placement(s, list(s.jobs.values()), solver, OPTS, now=NOW) for solver in SOLVERS}


def hierarchy() -> list[dict[str, Any]]:
    """Parent p (capability 8 GPUs) over a (deserved 8) and b (deserved 0), b using all 8: b1 and b2 (2 GPUs
    each, spot) on n0 with 4 GPUs free, b3 (4 GPUs, critical: the dearest victim) on n1, which a system
    pod fills. ``j`` (a, 4 GPUs) fits n0's room but not p's capability. Evicting b1 and b2 on n0 would
    make room in p (and costs less than b3), but n0 had room already: Volcano takes no victim there."""
    return [*CLASSES, node("n0", 8), node("n1", 8),
            queue("p", capability={GPU: 8}), queue("a", "p", deserved={GPU: 8}), queue("b", "p", deserved={GPU: 0}),
            *running("b1", "b", [("n0", 2)], "spot-job", min_member=0),
            *running("b2", "b", [("n0", 2)], "spot-job", min_member=0),
            *running("b3", "b", [("n1", 4)], "critical-job", min_member=0), pod("sys", "n1", 4, group=None),
            vcjob("j", "a", [job_task("w", 1, 4)], priority_class_name="normal-job")]


@pytest.mark.parametrize("solver", SOLVERS)
def test_reclaim_takes_no_victim_for_queue_room(solver: str) -> None:
    _s, got = plans(hierarchy())
    jp = got[solver].job("default/j")
    assert jp.admitted and [(v.name, v.node, v.reason) for v in jp.victims] == [("b3-0", "n1", "reclaim")]


@pytest.mark.parametrize(("where", "victims", "flagged"), [
    ("n1", [("b3-0", "n1")], False),  # holds: n1 had no room; one victim makes it
    ("n0", [("b1-0", "n0"), ("b2-0", "n0")], True),  # broken: n0 had room, both victims only free queue p
])
def test_the_validator_refuses_more_than_just_enough(where: str, victims: list[tuple[str, str]],
                                                     flagged: bool) -> None:
    s, got = plans(hierarchy())
    jp = got["greedy"].job("default/j")
    bad = jp.model_copy(update={"bindings": (Binding(task="w", index=0, node=where),),
                                "victims": tuple(Victim(namespace="default", name=n, node=nd, reason="reclaim")
                                                 for n, nd in victims)})
    plan = got["greedy"].model_copy(update={"jobs": tuple(bad if x.key == jp.key else x for x in got["greedy"].jobs)})
    out = placement_violations(s, list(s.jobs.values()), plan)
    assert any("more than just enough" in v for v in out) is flagged, out


def off_node() -> list[dict[str, Any]]:
    """n0 (2 GPUs) holds the cheapest victim v0 but can never take ``big``'s 4-GPU pod; n1 is full with v1.
    Only v1, on the node big binds to, may go."""
    return [*CLASSES, node("n0", 2), node("n1", 8), queue("q"),
            *running("v0", "q", [("n0", 2)], "spot-job", started="2025-06-01T11:59:00Z", min_member=0),
            *running("v1", "q", [("n1", 8)], "normal-job", min_member=0),
            vcjob("big", "q", [job_task("w", 1, 4)], priority_class_name="large-job")]


@pytest.mark.parametrize("solver", SOLVERS)
def test_victims_come_only_from_the_node_the_pod_is_tried_on(solver: str) -> None:
    _s, got = plans(off_node())
    jp = got[solver].job("default/big")
    assert jp.admitted and [v.name for v in jp.victims] == ["v1-0"] and [b.node for b in jp.bindings] == ["n1"]


@pytest.mark.parametrize(("victims", "flagged"), [
    ([("v1-0", "n1")], False),  # holds
    ([("v0-0", "n0"), ("v1-0", "n1")], True),  # broken: v0 is on n0, where big binds nothing
])
def test_the_validator_refuses_a_victim_off_the_jobs_nodes(victims: list[tuple[str, str]], flagged: bool) -> None:
    s, got = plans(off_node())
    jp = got["greedy"].job("default/big")
    bad = jp.model_copy(update={"victims": tuple(Victim(namespace="default", name=n, node=nd, reason="preempt")
                                                 for n, nd in victims)})
    out = placement_violations(s, list(s.jobs.values()), got["greedy"].model_copy(update={"jobs": (bad,)}))
    assert any("where the job places no pod" in v for v in out) is flagged, out


@pytest.mark.parametrize(("a_running", "admitted"), [
    (8, "default/jb"),  # qa's share 8/16 is above qb's 0/16: qb's job goes first, though ja sorts first by name
    (0, "default/ja"),  # the shares tie: the queue name decides, qa first
])
@pytest.mark.parametrize("solver", SOLVERS)
def test_ties_between_jobs_of_equal_standing_follow_the_queue_share_order(solver: str, a_running: int,
                                                                          admitted: str) -> None:
    objs = [*CLASSES, node("n0", 8), node("n1", 8), queue("qa", deserved={GPU: 16}), queue("qb", deserved={GPU: 16}),
            vcjob("ja", "qa", [job_task("w", 1, 8)], priority_class_name="normal-job"),
            vcjob("jb", "qb", [job_task("w", 1, 8)], priority_class_name="normal-job")]
    if a_running:
        objs += running("ra", "qa", [("n1", a_running)], "normal-job")
    else:
        objs.append(pod("sys", "n1", 8, group=None))
    _s, got = plans(objs)
    assert {jp.key for jp in got[solver].jobs if jp.admitted} == {admitted}
