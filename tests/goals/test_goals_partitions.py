"""The goal planners and a gang with a partitionPolicy: the greedy makes room partition by partition (each whole
in one HyperNode of its tier, moving pods out of the way), the exact goal planners leave such a gang to it (a
reason says so) and auto keeps the greedy's plan; a freeHyperNodes goal of the partitions' tier frees racks for
it; its pending-by-fragmentation verdict is placement's (tests/placement/test_partitions.py). Every plan passes
the goal validator, which re-checks the partitions with placement's rules."""

from __future__ import annotations

from typing import Any

import pytest

from optplan.solvers.core.options import PlanOptions
from optplan.solvers.goals.run import plan_run
from optplan.solvers.placement.place import plan_placement
from tests.builders import pod, podgroup
from tests.goalcases import admit_run, load_case
from tests.placement.test_partitions import RACKS, fabric, partitioned_job

OPTS = PlanOptions(time_limit=5, workers=1, seed=0)
BUSY = [("n0", "a"), ("n2", "b"), ("n4", "c")]


def crowded(run: dict[str, Any]) -> list[dict[str, Any]]:
    """Every rack holds one movable 1-GPU pod: no partition of two 8-GPU pods fits without moves."""
    return [*fabric(), *(pod(f"p-{g}", n, 1, group=f"pg-{g}") for n, g in BUSY),
            *(podgroup(f"pg-{g}", 1) for _n, g in BUSY), partitioned_job(), run]


def test_greedy_moves_pods_so_that_each_partition_has_a_rack() -> None:
    snap, run = load_case(crowded(admit_run(["default/g"])))
    assert not plan_placement(snap, list(snap.jobs.values()), "greedy", OPTS).jobs[0].admitted
    out = plan_run(snap, run, solver="greedy", options=OPTS)
    [gang] = out.status.plan.goals.admissions
    assert gang.admitted, gang.reason
    racks = {}
    for b in gang.bindings:
        racks.setdefault(b.index // 2, set()).add(next(r for r, ns in RACKS.items() if b.node in ns))
    assert len(racks) == 2 and all(len(r) == 1 for r in racks.values())


@pytest.mark.parametrize(("solver", "admitted"), [("cpsat", False), ("auto", True)])
def test_exact_goal_planners_leave_partitions_to_the_greedy(solver: str, admitted: bool) -> None:
    snap, run = load_case(crowded(admit_run(["default/g"])))
    out = plan_run(snap, run, solver=solver, options=OPTS)
    [gang] = out.status.plan.goals.admissions
    assert gang.admitted is admitted
    if not admitted:
        assert "partitionPolicy" in gang.reason


def test_freeing_racks_for_the_partitions() -> None:
    snap, run = load_case(crowded(admit_run([], free={"tierName": "rack", "count": 2})))
    out = plan_run(snap, run, solver="greedy", options=OPTS)
    freed = out.status.plan.goals.freed_hyper_nodes
    assert len(freed) == 2 and all(h in RACKS for h in freed)
