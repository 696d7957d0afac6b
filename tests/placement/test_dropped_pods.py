"""A bare PodGroup's running pod taken by another job's reclaim while the PodGroup may still be ready without it.

Written from Volcano's rules (vc-scheduler v1.15.1): reclaim hands the plugins every Running pod of another job on
the node; for a gang at minMember the gang plugin offers nothing, its tier ends and the capacity plugin decides (a
pod of a queue above its deserved goes). Nothing makes a bare PodGroup's pod again (no VCJob controller); where
the PodGroup can still reach minMember with its other pods it goes on (``jobs.dropped_pods``): a later cycle may
place them, never the evicted one. Where it cannot, it is never admitted (``jobs.lost_pods``, test_bare_podgroups).

The cluster: ``g`` (queue ``other``: minMember 1) runs ``g-0`` (4 GPUs) on n0 beside ``f-0`` (queue ``keep``) and
waits with ``g-1`` (4 GPUs), which fits nowhere; n1 runs ``b-0`` (keep); n2 runs ``o-0`` (8 GPUs, queue
``other``). ``j`` and ``k`` (queue ``mine``, 4 GPUs each) reclaim."""

from __future__ import annotations

from typing import Any

import pytest

from optplan.models.placement import Binding
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.placement.jobs import jobs_to_place
from optplan.solvers.placement.place import plan_placement
from optplan.solvers.placement.validate import placement_violations
from tests.builders import load, node, queue
from tests.placement.test_bare_podgroups import bare, member, plan_of

OPTS = PlanOptions(time_limit=5, workers=1, seed=0)
NOW = "2025-06-01T12:00:00Z"
SOLVERS = ("greedy", "cpsat", "auto")


def cluster(other_deserved: int) -> list[dict[str, Any]]:
    return [node("n0"), node("n1"), node("n2"), queue("mine", deserved={"nvidia.com/gpu": 8}),
            queue("other", deserved={"nvidia.com/gpu": other_deserved}),
            queue("keep", deserved={"nvidia.com/gpu": 12}),
            bare("b", 1, queue_name="keep"), member("b-0", "b", 8, on="n1"),
            bare("f", 1, queue_name="keep"), member("f-0", "f", 4, on="n0"),
            bare("o", 1, queue_name="other"), member("o-0", "o", 8, on="n2"),
            bare("g", 1, queue_name="other"), member("g-0", "g", 4, on="n0"), member("g-1", "g", 4),
            bare("j", 1, queue_name="mine"), member("j-0", "j", 4),
            bare("k", 1, queue_name="mine"), member("k-0", "k", 4)]


def test_the_podgroup_goes_on_with_its_other_pod() -> None:
    """``other`` (12 GPUs allocated, deserved 4) gives up ``g-0`` to ``j`` on n0 and ``o-0`` to ``k`` on n2;
    the next cycle's allocate places ``j``, ``k`` and ``g-1`` in n2's other half: ``g`` is ready again with
    ``g-1`` (never ``g-0``, which nothing makes again)."""
    plan = plan_of(cluster(4), "greedy")
    assert [v.name for v in plan.job("default/j").victims] == ["g-0"]
    assert [v.name for v in plan.job("default/k").victims] == ["o-0"]
    g = plan.job("default/g")
    assert g.admitted and [(b.pod, b.node) for b in g.bindings] == [("g-1", "n2")], g.reason
    for solver in ("cpsat", "auto"):  # valid, and no fewer jobs admitted than the greedy
        exact = plan_of(cluster(4), solver)
        assert sum(jp.admitted for jp in exact.jobs) >= sum(jp.admitted for jp in plan.jobs), solver


@pytest.mark.parametrize("solver", SOLVERS)
def test_within_deserved_the_pod_stays(solver: str) -> None:
    """``other`` within its deserved (16): no pod of it may be reclaimed; ``j`` and ``k`` wait."""
    plan = plan_of(cluster(16), solver)
    assert not plan.job("default/j").admitted and not plan.job("default/k").admitted
    assert all(not jp.victims for jp in plan.jobs)


def test_the_validator_refuses_the_evicted_pod_bound_again() -> None:
    """A plan that binds ``g-0`` again after its eviction is refused: nothing makes a bare PodGroup's pod again."""
    snap = load(*cluster(4)).snapshot
    jobs = jobs_to_place(snap)
    plan = plan_placement(snap, jobs, "greedy", OPTS, now=NOW)
    g = plan.job("default/g")
    broken = plan.model_copy(update={"jobs": tuple(
        jp.model_copy(update={"bindings": (Binding(task="", index=0, node="n2", pod="g-0"),)})
        if jp.name == "g" else jp for jp in plan.jobs)})
    assert g.admitted
    assert "job default/g pod g-0: that pod was evicted and nothing makes it again" in placement_violations(
        snap, jobs, broken)
