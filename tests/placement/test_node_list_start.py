"""vc-scheduler's node list is its cache's: the nodes by name, rotated at a random slot each time it starts
(``greedy.node_list``). Its walks keep that order within a score: allocate's tie between equal nodes goes to
the first in the list, reclaim takes its victims on the first node where they make room. ``--node-list-start``
names the slot, so a plan can be made for the order a given vc-scheduler drew; ``--hypernode-tie-seed`` draws
among HyperNodes of the same best score as vc-scheduler does (at random), instead of by name."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from optplan.adapters.kubefile import load_objects
from optplan.cli import main
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.placement.nodeorder import node_list
from optplan.solvers.placement.place import plan_placement
from optplan.solvers.placement.validate import placement_violations
from tests.builders import GPU, job_task, node, pod, podgroup_in, priority_class, queue, seed_fabric, vcjob

NOW = "2025-06-01T12:00:00Z"


@pytest.mark.parametrize(("start", "expected"), [
    (None, ["a", "b", "c", "d"]),
    ("a", ["a", "b", "c", "d"]),
    ("c", ["c", "d", "a", "b"]),
    ("bb", ["c", "d", "a", "b"]),  # the first name not below it
    ("z", ["a", "b", "c", "d"]),   # past the last: from the first
])
def test_the_list_is_by_name_rotated_at_the_start(start: str | None, expected: list[str]) -> None:
    assert node_list(["d", "b", "a", "c"], start) == expected


@pytest.mark.parametrize(("order", "expected"), [
    (("c", "a", "d", "b"), ["c", "a", "d", "b"]),  # not a rotation: as given
    (("b", "a"), ["b", "a", "c", "d"]),             # the nodes it does not name after it, by name
    (("b", "x", "a"), ["b", "a", "c", "d"]),        # a name of no node of the region is passed over
])
def test_a_whole_list_is_taken_as_given(order: tuple[str, ...], expected: list[str]) -> None:
    assert node_list(["d", "b", "a", "c"], order) == expected


def objects() -> list[Any]:
    """Three empty equal nodes; a 2-GPU job of queue a: every node scores the same."""
    return [node("n0", 8), node("n1", 8), node("n2", 8), queue("a", deserved={GPU: 24}),
            vcjob("j", "a", [job_task("w", 1, 2)])]


@pytest.mark.parametrize(("start", "where"), [(None, "n0"), ("n0", "n0"), ("n1", "n1"), ("n2", "n2")])
def test_a_tie_goes_to_the_first_node_of_the_list(start: str | None, where: str) -> None:
    snap = load_objects(objects()).snapshot
    jobs = list(snap.jobs.values())
    plan = plan_placement(snap, jobs, "greedy", PlanOptions(deterministic=True), now=NOW, node_start=start)
    assert placement_violations(snap, jobs, plan) == []
    [jp] = plan.jobs
    assert [b.node for b in jp.bindings] == [where]


def reclaim_objects() -> list[Any]:
    """Two full nodes of queue b's pods (b above its deserved 0); a job of queue a (deserved 16) needs 4 GPUs:
    reclaim takes its victims on the first node of the list where they make room."""
    objs: list[Any] = [node("n0", 8), node("n1", 8), queue("a", deserved={GPU: 16}), queue("b", deserved={GPU: 0}),
                       priority_class("mid", 100)]
    for n in ("n0", "n1"):
        pg = podgroup_in("b", f"x-{n}", 1)
        objs.append(pg)
        for i in range(2):
            p = pod(f"x-{n}-{i}", n, 4, group=f"x-{n}")
            p["status"]["startTime"] = "2025-06-01T10:00:00Z"
            objs.append(p)
    objs.append(vcjob("j", "a", [job_task("w", 1, 4)], priority_class_name="mid"))
    return objs


@pytest.mark.parametrize(("start", "where"), [(None, "n0"), ("n1", "n1")])
def test_reclaim_takes_its_victims_on_the_first_node_of_the_list(start: str | None, where: str) -> None:
    snap = load_objects(reclaim_objects()).snapshot
    jobs = list(snap.jobs.values())
    plan = plan_placement(snap, jobs, "greedy", PlanOptions(deterministic=True), now=NOW, node_start=start)
    assert placement_violations(snap, jobs, plan) == []
    [jp] = plan.jobs
    assert jp.admitted and {v.node for v in jp.victims} == {where} and [b.node for b in jp.bindings] == [where]


def test_the_flag_and_a_node_it_does_not_know(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "snap.yaml"
    f.write_text(yaml.safe_dump_all(objects()))
    assert main(["place", str(f), "--solver", "greedy", "--node-list-start", "n2", "--now", NOW, "-o", "json"]) == 0
    assert '"node": "n2"' in capsys.readouterr().out
    assert main(["place", str(f), "--node-list-start", "n9", "--now", NOW]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--node-list-start" in err and "n9" in err and str(f) in err


@pytest.mark.parametrize(("order", "where"), [(("n1", "n0", "n2"), "n1"), (("n2", "n1", "n0"), "n2")])
def test_the_whole_list_decides_a_tie_and_where_reclaim_looks_first(order: tuple[str, ...], where: str) -> None:
    """A list that is not a rotation of the names (vc-scheduler's node workers may sync two nodes in another
    order than its cache listed them): a tie goes to its first node, reclaim takes its victims there."""
    snap = load_objects(objects()).snapshot
    jobs = list(snap.jobs.values())
    plan = plan_placement(snap, jobs, "greedy", PlanOptions(deterministic=True), now=NOW, node_start=order)
    assert [b.node for b in plan.jobs[0].bindings] == [where]
    snap = load_objects(reclaim_objects()).snapshot
    jobs = list(snap.jobs.values())
    two = tuple(n for n in order if n != "n2")
    plan = plan_placement(snap, jobs, "greedy", PlanOptions(deterministic=True), now=NOW, node_start=two)
    assert placement_violations(snap, jobs, plan) == []
    [jp] = plan.jobs
    assert jp.admitted and {v.node for v in jp.victims} == {two[0]}


@pytest.mark.parametrize(("args", "named"), [
    (["--node-list", "n2,n9"], "n9"),
    (["--node-list", "n1,n1"], "twice"),
    (["--node-list", "n1", "--node-list-start", "n0"], "not both"),
])
def test_the_whole_list_flag_refuses_bad_input_in_one_line(tmp_path: Any, capsys: pytest.CaptureFixture[str],
                                                            args: list[str], named: str) -> None:
    f = tmp_path / "snap.yaml"
    f.write_text(yaml.safe_dump_all(objects()))
    assert main(["place", str(f), "--solver", "greedy", "--node-list", "n2,n0,n1", "--now", NOW, "-o", "json"]) == 0
    assert '"node": "n2"' in capsys.readouterr().out
    assert main(["place", str(f), *args, "--now", NOW]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--node-list" in err and named in err


def fabric_objects() -> list[Any]:
    """Seed 002's fabric of eight empty nodes; a job of two 8-GPU pods under a hard tier-1 topology: the four
    racks score the same."""
    return [*(node(f"n{i}", 8) for i in range(8)), *seed_fabric(), queue("a", deserved={GPU: 64}),
            vcjob("j", "a", [job_task("w", 2, 8)], network_topology={"mode": "hard", "highestTierAllowed": 1})]


def test_hypernodes_of_the_same_best_score_are_drawn_with_the_tie_seed() -> None:
    """By name without a seed; with one, a draw among the four racks, the same for the same seed."""
    snap = load_objects(fabric_objects()).snapshot
    jobs = list(snap.jobs.values())

    def rack(seed: int | None) -> str | None:
        plan = plan_placement(snap, jobs, "greedy", PlanOptions(deterministic=True), now=NOW, tie_seed=seed)
        assert placement_violations(snap, jobs, plan) == []
        [jp] = plan.jobs
        assert jp.admitted
        return jp.hyper_node

    assert rack(None) == "s0"
    drawn = {seed: rack(seed) for seed in range(1, 13)}
    assert set(drawn.values()) <= {"s0", "s1", "s2", "s3"} and len(set(drawn.values())) > 1
    assert all(rack(seed) == r for seed, r in list(drawn.items())[:3])  # the same seed, the same draw
