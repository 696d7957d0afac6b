"""The goal planners and a gang with a partitionPolicy: naming it in an admit goal is one line (exit 2), a
selector or queue that matches it leaves it out with a warning, and a freeHyperNodes goal of the partitions'
tier frees the racks ``optplan place`` then puts the partitions in; its pending-by-fragmentation verdict is
placement's (tests/placement/test_partitions.py)."""

from __future__ import annotations

import logging

import pytest

from optplan.errors import InputError
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.goals.run import plan_run
from optplan.solvers.placement.place import plan_placement
from tests.builders import pod, podgroup
from tests.goalcases import admit_run, load_case
from tests.placement.test_partitions import fabric, partitioned_job

OPTS = PlanOptions(time_limit=5, workers=1, seed=0)


def test_admit_goal_naming_a_partitioned_gang_is_one_line() -> None:
    snap, run = load_case([*fabric(), partitioned_job(), admit_run(["default/g"])])
    with pytest.raises(InputError) as e:
        plan_run(snap, run, solver="greedy", options=OPTS)
    assert "admit.jobs[0]" in str(e.value) and "partitionPolicy" in str(e.value) and "\n" not in str(e.value)


def test_admit_by_queue_leaves_a_partitioned_gang_out_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    run = admit_run([])
    run["spec"]["goals"][0]["admit"] = {"queues": ["default"]}
    snap, r = load_case([*fabric(), partitioned_job(), run])
    with caplog.at_level(logging.WARNING):
        out = plan_run(snap, r, solver="greedy", options=OPTS)
    assert "default/g left out" in caplog.text
    assert out.status.plan.goals.admitted_job_count == 0


def test_freeing_racks_for_the_partitions() -> None:
    # every rack holds one movable 1-GPU pod: no partition of two 8-GPU pods fits; freeing two racks lets it
    busy = [("n0", "a"), ("n2", "b"), ("n4", "c")]
    objs = [*fabric(), *(pod(f"p-{g}", n, 1, group=f"pg-{g}") for n, g in busy),
            *(podgroup(f"pg-{g}", 1) for _n, g in busy), partitioned_job(),
            admit_run([], free={"tierName": "rack", "count": 2})]
    snap, run = load_case(objs)
    before = plan_placement(snap, list(snap.jobs.values()), "greedy", OPTS).jobs[0]
    assert not before.admitted
    out = plan_run(snap, run, solver="greedy", options=OPTS)
    freed = out.status.plan.goals.freed_hyper_nodes
    assert len(freed) == 2 and all(h in ("r0", "r1", "r2") for h in freed)
