"""A VCJob task's ``partitionPolicy`` (Volcano's SubGroupPolicy): partitions of ``partitionSize`` placed whole,
each inside one HyperNode of tier ≤ its topology's limit (NVL72-style racks), inside the job's own HyperNode;
``minPartitions`` whole partitions for the gang. Each case through greedy, cpsat and auto (every plan
validated), the validator's refusals, bad input, and pending-by-fragmentation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from optplan.cli import main
from optplan.errors import InputError
from optplan.models.placement import Binding, BinpackWeights, JobPlacement, PlacementPlan
from optplan.models.repack import SolverRecord
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.placement.allocate import greedy_place
from optplan.solvers.placement.context import Context
from optplan.solvers.placement.evict import plan_victims
from optplan.solvers.placement.pending import pending_gangs
from optplan.solvers.placement.place import plan_placement
from optplan.solvers.placement.validate import placement_violations
from tests.builders import (
    GPU,
    hypernode,
    job_task,
    load,
    node,
    pod,
    podgroup,
    podgroup_in,
    priority_class,
    queue,
    vcjob,
)
from tests.placement.test_placement_family import solve_fixed_to

OPTS = PlanOptions(time_limit=5, workers=1, seed=0)
SOLVERS = ("greedy", "cpsat", "auto")
RACKS = {"r0": ("n0", "n1"), "r1": ("n2", "n3"), "r2": ("n4", "n5")}


def fabric(busy: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Six 8-GPU nodes in three racks (tier 1, tierName rack); s0 = r0 + r1 and s1 = r2 (tier 2)."""
    objs: list[dict[str, Any]] = [node(f"n{i}", 8) for i in range(6)]
    objs += [pod(f"busy-{n}", n, 8, group=None) for n in busy]
    for name, members in RACKS.items():
        h = hypernode(name, 1, list(members))
        h["spec"]["tierName"] = "rack"
        objs.append(h)
    objs += [hypernode("s0", 2, ["r0", "r1"], "HyperNode"), hypernode("s1", 2, ["r2"], "HyperNode")]
    return objs


def partitioned_job(name: str = "g", total: int = 2, size: int = 2, minimum: int = 2, gpu: int = 8, *,
                    part_topology: dict[str, Any] | None = None, topology: dict[str, Any] | None = None,
                    priority: str | None = None) -> dict[str, Any]:
    task = job_task("w", total * size, gpu)
    task["partitionPolicy"] = {"totalPartitions": total, "partitionSize": size, "minPartitions": minimum,
                               "networkTopology": part_topology if part_topology is not None
                               else {"mode": "hard", "highestTierName": "rack"}}
    return vcjob(name, tasks=[task], network_topology=topology, priority_class_name=priority)


def place(solver: str, objs: list[dict[str, Any]]) -> PlacementPlan:
    s = load(*objs).snapshot
    return plan_placement(s, list(s.jobs.values()), solver, OPTS)


def racks_of(jp: JobPlacement, size: int = 2) -> list[set[str]]:
    """For each partition placed, the racks its pods are on."""
    by_part: dict[int, set[str]] = {}
    for b in jp.bindings:
        rack = next(r for r, ns in RACKS.items() if b.node in ns)
        by_part.setdefault(b.index // size, set()).add(rack)
    return [by_part[p] for p in sorted(by_part)]


# busy nodes, job, expected (admitted, pods placed, partitions each in one rack)
CASES: list[tuple[str, tuple[str, ...], dict[str, Any], tuple[bool, int]]] = [
    ("two partitions, two free racks", ("n4", "n5"), partitioned_job(), (True, 4)),
    ("one rack whole: minPartitions 2 fails", ("n1", "n3"), partitioned_job(), (False, 0)),
    ("one rack whole: minPartitions 1 takes it", ("n1", "n3"), partitioned_job(minimum=1), (True, 2)),
    ("inside the job's HyperNode: s0 has no whole rack", ("n1", "n3"),
     partitioned_job(minimum=1, topology={"mode": "hard", "highestTierAllowed": 2}), (True, 2)),
    ("soft partitions go anywhere", ("n1", "n3"),
     partitioned_job(part_topology={"mode": "soft", "highestTierName": "rack"}), (True, 4)),
    ("no partition topology: whole partitions anywhere", ("n1", "n3"), partitioned_job(part_topology={}), (True, 4)),
    ("two small partitions share a rack", ("n2", "n3", "n4", "n5"), partitioned_job(gpu=4), (True, 4)),
]


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize(("what", "busy", "job", "expected"), CASES, ids=[c[0] for c in CASES])
def test_partitions_are_placed_whole_in_one_hypernode(solver: str, what: str, busy: tuple[str, ...],
                                                      job: dict[str, Any], expected: tuple[bool, int]) -> None:
    jp = place(solver, [*fabric(busy), job]).jobs[0]
    assert (jp.admitted, len(jp.bindings)) == expected, jp.reason
    nt = job["spec"]["tasks"][0]["partitionPolicy"]["networkTopology"]
    if jp.admitted and nt.get("mode") == "hard":
        assert all(len(racks) == 1 for racks in racks_of(jp)), jp.bindings
    if not jp.admitted:
        assert "partition" in jp.reason


@pytest.mark.parametrize("solver", SOLVERS)
def test_partitions_stay_inside_the_jobs_hypernode(solver: str) -> None:
    # r0 and r2 are free, r1 busy: the two partitions fit r0 and r2, which no tier-2 HyperNode holds together
    free = place(solver, [*fabric(("n2", "n3")), partitioned_job()]).jobs[0]
    assert free.admitted and sorted(map(sorted, racks_of(free))) == [["r0"], ["r2"]]
    bound = place(solver, [*fabric(("n2", "n3")), partitioned_job(
        topology={"mode": "hard", "highestTierAllowed": 2})]).jobs[0]
    assert not bound.admitted and not bound.bindings


# Volcano's preempt (actions/preempt) skips a job containing a networkTopology (JobInfo.ContainsNetworkTopology:
# its own or one of its partitions'); a partitioned job without any preempts as a plain gang does, pod by pod
# over every node, and the next cycle's allocate places its partitions whole. Every node runs a low-priority
# gang of two 4-GPU pods, minMember 1; the job asks one partition of two 4-GPU pods.
PREEMPT = [  # (what, the partitions' topology, the job's, preempts)
    ("partitions in a rack", {"mode": "hard", "highestTierName": "rack"}, None, False),
    ("soft partitions", {"mode": "soft"}, None, False),
    ("a job topology", None, {"mode": "hard", "highestTierAllowed": 2}, False),
    ("no topology anywhere", None, None, True),
]


@pytest.mark.parametrize(("what", "part_topology", "topology", "preempts"), PREEMPT, ids=[p[0] for p in PREEMPT])
@pytest.mark.parametrize("solver", ("greedy", "auto"))
def test_a_partitioned_job_preempts_only_without_a_topology(solver: str, what: str, part_topology: dict[str, Any]
                                                             | None, topology: dict[str, Any] | None,
                                                             preempts: bool) -> None:
    objs = [*fabric(), priority_class("high", 1000), priority_class("low", 1),
            partitioned_job(minimum=1, priority="high", topology=topology, gpu=4)]
    for i in range(6):  # on every node a gang of priority low, two 4-GPU pods, minMember 1 (one may go)
        objs.append(podgroup(f"busy-{i}"))
        for k in range(2):
            busy = pod(f"busy-{i}-{k}", f"n{i}", 4, group=f"busy-{i}")
            busy["spec"]["priorityClassName"] = "low"
            objs.append(busy)
    job = next(o for o in objs if o["kind"] == "Job")["spec"]["tasks"][0]["partitionPolicy"]
    if part_topology is None:
        del job["networkTopology"]
    else:
        job["networkTopology"] = part_topology
    s = load(*objs).snapshot
    plan = plan_placement(s, list(s.jobs.values()), solver, OPTS)
    assert placement_violations(s, list(s.jobs.values()), plan) == []
    jp = plan.jobs[0]
    assert jp.admitted is preempts
    assert len(jp.victims) == (2 if preempts else 0) and {v.reason for v in jp.victims} <= {"preempt"}
    if preempts:  # partition 0 whole, on the victims' nodes
        assert sorted(b.index for b in jp.bindings) == [0, 1]
        assert {b.node for b in jp.bindings} == {v.node for v in jp.victims}


# Volcano's preempt runs, after its pass between jobs, a pass within each starving job it took (``actions/preempt``,
# "Preemption between Task within Job"): a partitioned job without any topology too, its pending pods each on a
# node where it fits now, pipelined and kept. n0 is free; n1..n5 each run an 8-GPU pod of queue b (far above its
# deserved). The job (queue a, alone there: no victims between jobs) asks one partition of two 8-GPU pods. The
# pass pipelines a pod on n0, so reclaim needs room for one pod: one victim; the next cycle places the partition.
# With partitions in a rack, preempt skips the job and its reclaim evicts for both pods.
WITHIN = [  # (what, the partitions' topology, reclaim victims)
    ("no topology: preempt's pass within the job pipelines a pod on the free node", None, 1),
    ("partitions in a rack: no preempt, reclaim for both pods", {"mode": "hard", "highestTierName": "rack"}, 2),
]


@pytest.mark.parametrize(("what", "part_topology", "victims"), WITHIN, ids=[w[0] for w in WITHIN])
def test_preempts_pass_within_a_partitioned_job(what: str, part_topology: dict[str, Any] | None,
                                                victims: int) -> None:
    job = partitioned_job(total=1, minimum=1)
    job["spec"]["queue"] = "a"
    policy = job["spec"]["tasks"][0]["partitionPolicy"]
    del policy["networkTopology"]
    if part_topology is not None:
        policy["networkTopology"] = part_topology
    objs = [*fabric(), queue("a", deserved={GPU: 16}), queue("b", deserved={GPU: 8}), job]
    for i in range(1, 6):
        objs += [podgroup_in("b", f"b{i}"), pod(f"b{i}-0", f"n{i}", 8, group=f"b{i}")]
    s = load(*objs).snapshot
    plan = plan_placement(s, list(s.jobs.values()), "greedy", OPTS)
    assert placement_violations(s, list(s.jobs.values()), plan) == []
    jp = plan.jobs[0]
    assert len(jp.victims) == victims and {v.reason for v in jp.victims} == {"reclaim"}
    assert jp.admitted and len(jp.bindings) == 2  # the next cycle's allocate places the partition whole


def _plan(bindings: list[tuple[int, str]]) -> PlacementPlan:
    jp = JobPlacement(namespace="default", name="g", queue="default", admitted=True, reason="test",
                      bindings=tuple(Binding(task="w", index=i, node=n) for i, n in bindings))
    return PlacementPlan(jobs=(jp,), solver=SolverRecord(name="test", status="FEASIBLE"))


REFUSED: list[tuple[str, list[tuple[int, str]], str]] = [
    ("half a partition", [(0, "n0"), (1, "n1"), (2, "n4")], "partition 1: 1 of its pods placed, 1 not"),
    ("a partition across racks", [(0, "n0"), (1, "n2"), (2, "n4"), (3, "n5")],
     "partition 0: no HyperNode of tier <= 1 inside its region holds its nodes n0, n2"),
    ("short of minPartitions", [(0, "n0"), (1, "n1")], "1 of its minPartitions 2 partitions placed whole"),
]


@pytest.mark.parametrize(("what", "bindings", "message"), REFUSED, ids=[r[0] for r in REFUSED])
def test_validator_refuses_broken_partitions(what: str, bindings: list[tuple[int, str]], message: str) -> None:
    s = load(*fabric(), partitioned_job(minimum=1 if what != "short of minPartitions" else 2)).snapshot
    found = placement_violations(s, list(s.jobs.values()), _plan(bindings))
    assert any(message in v for v in found), found


BAD: list[tuple[str, dict[str, Any], str]] = [
    ("product is not replicas", {"totalPartitions": 3, "partitionSize": 2}, "totalPartitions 3 x partitionSize 2"),
    ("minPartitions above total", {"totalPartitions": 2, "partitionSize": 2, "minPartitions": 3},
     "3 is greater than totalPartitions 2"),
    ("partitionSize missing", {"totalPartitions": 4}, "partitionPolicy.partitionSize: required"),
    ("a tier name no HyperNode has", {"totalPartitions": 2, "partitionSize": 2,
                                      "networkTopology": {"mode": "hard", "highestTierName": "row"}},
     "spec.tasks[0].partitionPolicy.networkTopology.highestTierName: no HyperNode has tierName row"),
]


@pytest.mark.parametrize(("what", "policy", "message"), BAD, ids=[b[0] for b in BAD])
def test_bad_partition_policy_is_one_line(what: str, policy: dict[str, Any], message: str) -> None:
    job = vcjob("g", tasks=[job_task("w", 4, 8)])
    job["spec"]["tasks"][0]["partitionPolicy"] = policy
    with pytest.raises(InputError) as e:
        load(*fabric(), job)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_minimum_defaults_to_min_partitions_times_size() -> None:
    s = load(*fabric(), partitioned_job(total=3, size=2, minimum=2)).snapshot
    job = s.jobs["default/g"]
    assert job.tasks[0].min_available == 4 and job.min_available == 4


def test_pending_by_fragmentation_sees_the_racks() -> None:
    # 4 free nodes (room for the 4 pods), but only r2 holds a whole partition
    verdicts = {g.key: g for g in pending_gangs(load(*fabric(("n1", "n3")), partitioned_job()).snapshot, GPU)}
    assert verdicts["default/g"].verdict == "fragmentation"


def test_cli_places_a_partitioned_job_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snap, job = tmp_path / "snap.yaml", tmp_path / "job.yaml"
    snap.write_text(yaml.safe_dump_all(fabric(("n4", "n5"))))
    job.write_text(yaml.safe_dump(partitioned_job()))
    assert main(["place", str(snap), "--job", str(job), "-o", "table"]) == 0
    assert "4 of 4 pods placed" in capsys.readouterr().out


@pytest.mark.parametrize(("what", "busy", "job", "expected"), CASES, ids=[c[0] for c in CASES])
def test_the_greedy_plan_is_a_solution_of_the_exact_model(what: str, busy: tuple[str, ...], job: dict[str, Any],
                                                          expected: tuple[bool, int]) -> None:
    s = load(*fabric(busy), job).snapshot
    ctx = Context.build(s, list(s.jobs.values()), BinpackWeights())
    plan = plan_victims(ctx, greedy_place(ctx))
    solve_fixed_to(ctx, plan)
