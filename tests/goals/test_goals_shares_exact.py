"""The exact goal models move GPU shares at device level (``model._devices``): a share is a move class pinned
to one device of its node, sent to a receiver's device where it fits (milli-GPU and memory), whole cards take
devices untouched after the moves. Traps where moving shares is the only way to admit a gang or free a
HyperNode and the greedy's best fit misses it: CP-SAT and its MILP twin find it and prove it (OPTIMAL); on
random device clusters every exact plan passes the goal validator, both twins prove the same score, the
exact plan is never worse than the greedy's, and the model takes the greedy's plan as its hint (``auto``)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from optplan.models.goals import GoalPlan
from optplan.solvers.core.registry import load
from optplan.solvers.goals.greedy import GreedyGoalPlanner
from optplan.solvers.goals.model import build_data
from optplan.solvers.goals.problem import GoalProblem, GoalResult
from optplan.solvers.goals.validate import goal_violations
from tests.builders import hypernode, job_task, vcjob
from tests.goals.test_goals_shares import OPTS, admitted_on, problem, share_task
from tests.repack.test_shares import node, share, whole

EXACT = ["cpsat", "milp", "auto"]


def trap() -> list[dict[str, Any]]:
    """n1 and n2 each hold two shares whose milli-GPU and memory cross: n2's 0.5 share (1000 MiB) and 0.4 share
    (8000 MiB) fit n1 only as 0.5 on b (0.6 free, 2000 MiB) and 0.4 on a (0.5 free, 10000 MiB), and n1's fit
    n2 likewise. Best fit by milli-GPU puts the 0.5 share on the tightest device (a) first and the 0.4 one
    then fits nowhere, either way."""
    return [node("n1"), node("n2"), share("x1", "n1", "a", 50, 6384), share("x2", "n1", "b", 40, 14384),
            share("s1", "n2", "a", 50, 1000), share("s2", "n2", "b", 40, 8000)]


def run(p: GoalProblem, name: str) -> GoalResult:
    r = load("goals", name)().plan(p, OPTS)
    assert goal_violations(p, r.plan, claimed=r.disruption) == []
    return r


def moved_to(plan: GoalPlan) -> dict[str, tuple[str, tuple[int, ...] | None]]:
    return {m.pod: (m.to_node, m.to_devices) for m in plan.repack.moves}


@pytest.mark.parametrize("name", EXACT)
def test_admitting_a_gang_needs_two_shares_swapped_across_devices(name: str) -> None:
    p = problem(*trap(), vcjob("big", "default", [job_task("w", 1, 2)], ns="ns"))
    assert admitted_on(run(p, "greedy").plan, "big") is None  # best fit misses it
    r = run(p, name)
    assert r.record.status == "OPTIMAL"
    [on] = admitted_on(r.plan, "big") or [""]
    other = {"n1": "n2", "n2": "n1"}[on]
    # both shares of the gang's node leave, each to the other node's device that takes its memory
    pods = {"n1": ("ns/x1", "ns/x2"), "n2": ("ns/s1", "ns/s2")}[on]
    assert moved_to(r.plan) == {pods[0]: (other, (1,)), pods[1]: (other, (0,))}
    assert r.disruption.moved_pods == 2


@pytest.mark.parametrize("name", EXACT)
def test_freeing_a_hypernode_needs_two_shares_swapped_across_devices(name: str) -> None:
    p = problem(*trap(), hypernode("h1", 1, ["n1"]), hypernode("h2", 1, ["n2"]), tier=1, count=1)
    assert run(p, "greedy").plan.freed_hyper_nodes == ()
    r = run(p, name)
    assert r.record.status == "OPTIMAL" and len(r.plan.freed_hyper_nodes) == 1
    assert all(devices is not None for _, devices in moved_to(r.plan).values())


@pytest.mark.parametrize("name", EXACT)
def test_a_share_gang_is_admitted_on_a_device_a_moved_share_leaves(name: str) -> None:
    # the gang's pod asks 0.8 of one device: only n2's a, once its 0.3 share moves to n3's b (0.4 free)
    p = problem(node("n1"), node("n2"), node("n3"), share("s1", "n1", "a", 80), share("s2", "n1", "b", 80),
                share("s3", "n2", "a", 30), share("s4", "n2", "b", 30), whole("w3", "n3"), share("s5", "n3", "b", 60),
                vcjob("sh", "default", [share_task("w", 80)], ns="ns"))
    r = run(p, name)
    assert r.record.status == "OPTIMAL" and admitted_on(r.plan, "sh") == ["n2"]
    [m] = r.plan.repack.moves
    assert (m.from_node, m.to_node, m.to_devices) == ("n2", "n3", (1,))


def test_a_share_that_fits_no_device_is_proven_to_stay() -> None:
    # n2's 0.5 share fits no device of n1 (0.4 free on each): no plan admits the gang, proven
    p = problem(node("n1"), node("n2"), share("s1", "n1", "a", 60), share("s2", "n1", "b", 60),
                share("s3", "n2", "a", 50), vcjob("big", "default", [job_task("w", 1, 2)], ns="ns"))
    for name in ("cpsat", "milp"):
        r = run(p, name)
        assert r.record.status == "OPTIMAL" and admitted_on(r.plan, "big") is None and r.plan.repack.moves == ()


def test_the_model_lists_the_device_variables() -> None:
    p = problem(*trap(), vcjob("big", "default", [job_task("w", 1, 2)], ns="ns"))
    data = build_data(p)
    assert sorted(data.devices) == ["n1", "n2"]
    assert {k.pods[0].key: k.held for k in data.classes} == {
        "ns/x1": (500, 6384, (0,)), "ns/x2": (400, 14384, (1,)), "ns/s1": (500, 1000, (0,)),
        "ns/s2": (400, 8000, (1,))}
    r = run(p, "cpsat")
    assert r.stats["deviceVariables"] > 0 and r.stats["deviceRows"] > 0


# ---- random device clusters -----------------------------------------------------------------------------

def random_cluster(seed: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """3-4 nodes of two 16 GiB devices, each device empty, a whole card or one to three shares; a gang of two
    whole cards, or one or two pods asking for a share; half the seeds free one single-node HyperNode too."""
    rng = random.Random(seed)
    objs: list[dict[str, Any]] = []
    count = 0
    n_nodes = rng.choice([3, 4])
    for i in range(n_nodes):
        n = f"n{i}"
        objs.append(node(n))
        for dev in "ab":
            kind = rng.random()
            if kind < 0.2:
                continue
            if kind < 0.35:
                if dev == "a":  # a whole card takes the lowest untouched device
                    objs.append(whole(f"w{count}", n))
                    count += 1
                continue
            left, memory = 100, 16000
            for _ in range(rng.randint(1, 3)):
                cores = rng.choice([10, 20, 30, 40, 50])
                mem = rng.choice([1000, 2000, 4000, 8000])
                if cores > left or mem > memory:
                    break
                objs.append(share(f"s{count}", n, dev, cores, mem))
                count += 1
                left, memory = left - cores, memory - mem
    if rng.random() < 0.5:
        gang = vcjob("g", "default", [job_task("w", 1, 2)], ns="ns")
    else:
        gang = vcjob("g", "default", [share_task("w", rng.choice([60, 70, 80]), rng.choice([1, 2]))], ns="ns")
    free = {}
    if seed % 2:
        objs += [hypernode(f"h{i}", 1, [f"n{i}"]) for i in range(n_nodes)]
        free = {"tier": 1, "count": 1}
    return [*objs, gang], free


@pytest.mark.parametrize("seed", range(12))
def test_exact_plans_with_shares_are_valid_and_the_twins_agree(seed: int) -> None:
    objs, free = random_cluster(seed)
    p = problem(*objs, **free)
    greedy = GreedyGoalPlanner().plan(p, OPTS)
    exact = run(p, "cpsat")
    twin = run(p, "milp")
    assert exact.record.status == "OPTIMAL" and twin.record.status == "OPTIMAL"
    assert p.score(exact.plan, exact.disruption) == p.score(twin.plan, twin.disruption)
    assert p.score(exact.plan, exact.disruption) >= p.score(greedy.plan, greedy.disruption)
    # auto hints CP-SAT with the greedy's plan: a model refusing that valid plan raises (strict mode)
    best = run(p, "auto")
    assert p.score(best.plan, best.disruption) == p.score(exact.plan, exact.disruption)
    for m in exact.plan.repack.moves + twin.plan.repack.moves:  # a moved share names its device
        assert (m.to_devices is not None) == (p.snapshot.pods[m.pod].gpu_share is not None)
