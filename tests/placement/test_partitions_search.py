"""How allocate searches HyperNodes for a partitioned job, as tables written from vc-scheduler v1.15.1's rules
(docs/queues.md, "Partitions"): the job's own HyperNodes are searched as a whole job's are (its soft
topology as hard with the whole cluster as limit; the pre-filter with its minResources while nothing of it
runs; each turn again from its search root), the job's HyperNode scores the sum of its partitions' scores,
and each partition is a sub-job searched inside the job's HyperNode: its soft topology as hard with the job's
limit, from its own search root (beside its running pods, not only in the HyperNode that holds them).

Two racks ``ra`` (a0, a1) and ``rb`` (b0, b1) of 8-GPU nodes under a tier-2 HyperNode ``top``; the HyperNode
score weighs GPUs only. Each case runs through greedy, cpsat and auto and the validator."""

from __future__ import annotations

from typing import Any

import pytest

from optplan.adapters.kubefile import load_objects
from optplan.models.placement import BinpackWeights, JobPlacement
from optplan.models.schedconf import SchedulerConf
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.placement.place import plan_placement
from optplan.solvers.placement.validate import placement_violations
from tests.builders import GPU, job_task, pod, podgroup, vcjob
from tests.placement.test_topology_turns import fabric

OPTS = PlanOptions(time_limit=5, workers=1, seed=0)
NOW = "2025-06-01T12:00:00Z"
GPU_ONLY = BinpackWeights(cpu=0, memory=0, resources={GPU: 1})
CONF = SchedulerConf(binpack=GPU_ONLY, hyper_node_binpack=GPU_ONLY)
RACK = {"mode": "hard", "highestTierAllowed": 1}
SPINE = {"mode": "hard", "highestTierAllowed": 2}
SOFT = {"mode": "soft"}


def job(total: int, size: int, minimum: int, part: dict[str, Any] | None, topo: dict[str, Any] | None,
        running: dict[int, str] | None = None) -> list[dict[str, Any]]:
    """VCJob ``j``, task ``w`` of ``total`` partitions of ``size`` pods of 4 GPUs; ``running``: index -> node of
    its replicas that run already."""
    task = job_task("w", total * size, 4)
    task["partitionPolicy"] = {"totalPartitions": total, "partitionSize": size, "minPartitions": minimum}
    if part is not None:
        task["partitionPolicy"]["networkTopology"] = part
    out = [vcjob("j", "default", [task], network_topology=topo)]
    if running:
        out[0]["status"] = {"state": {"phase": "Running"}}
        out.append(podgroup("j-pg", minimum * size, owner=("batch.volcano.sh/v1alpha1", "Job", "j")))
        for i, n in running.items():
            p = pod(f"j-w-{i}", n, 4, group="j-pg")
            p["status"]["startTime"] = "2025-06-01T10:00:00Z"
            out.append(p)
    return out


def placed(objs: list[dict[str, Any]]) -> JobPlacement:
    """Job j's greedy placement; every solver's plan passes the validator."""
    snap = load_objects(objs).snapshot
    jobs = list(snap.jobs.values())
    out = {}
    for solver in ("greedy", "cpsat", "auto"):
        plan = plan_placement(snap, jobs, solver, OPTS, now=NOW, scheduler=CONF)
        assert placement_violations(snap, jobs, plan) == []
        out[solver] = next(jp for jp in plan.jobs if jp.name == "j")
    return out["greedy"]


CASES = [  # (what, objects, j's bindings as index -> node, the HyperNode the plan names)
    ("the job's HyperNode scores its partitions' sum (rack a: 4 + 8 of 16, against rack b's 8 of 16), not all"
     " four pods' (which overflow rack a); the next turn searches again and finds rack b for partition 1",
     [*fabric({"a0": 4}), *job(2, 2, 1, RACK, SOFT)], {0: "a0", 1: "a1", 2: "b0", 3: "b0"}, "top"),
    ("a hard tier-2 job the same: its next partition goes to the sibling rack inside its search root",
     [*fabric({"a0": 4}), *job(2, 2, 1, RACK, SPINE)], {0: "a0", 1: "a1", 2: "b0", 3: "b0"}, "top"),
    ("hard tier 1 job: its search root is its rack, the second partition does not fit there",
     [*fabric({"a0": 4}), *job(2, 2, 1, RACK, RACK)], {0: "a0", 1: "a1"}, "ra"),
    ("a partition's running pod on a0: its search root is top (tier 2), rack b scores higher (4 + 8 of 16,"
     " against rack a's 9 + 8, which overflows), its pending pod goes there, not beside the running one",
     [*fabric({"a1": 5, "b0": 4}), *job(1, 2, 1, SPINE, None, running={0: "a0"})], {1: "b0"}, None),
    ("a soft partition in a job without topology: searched as hard with the whole cluster as limit, the"
     " fuller rack first", [*fabric({"b0": 4}), *job(1, 2, 1, SOFT, None)], {0: "b0", 1: "b1"}, None),
]


@pytest.mark.parametrize(("what", "objs", "bindings", "hyper"), CASES, ids=[c[0][:60] for c in CASES])
def test_partitioned_jobs_are_searched_as_allocate_searches_sub_jobs(
        what: str, objs: list[dict[str, Any]], bindings: dict[int, str], hyper: str | None) -> None:
    greedy = placed(objs)
    assert greedy.admitted, greedy.reason
    assert {b.index: b.node for b in greedy.bindings} == bindings
    assert greedy.hyper_node == hyper
