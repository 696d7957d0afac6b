"""Goals move GPU shares (``RepackProblem.shares_move``): to admit a named gang or free a HyperNode, a running
share moves to a device of a receiver that can take it, its move names that device (``PodMove.to_devices``),
and the goal validator checks the fit at device level through the oracle. A pending gang whose pods ask for
shares is admitted where a device takes each of them. Snapshots without devices plan as before (the goal
golden tests)."""

from __future__ import annotations

from typing import Any

import pytest

from optplan.adapters.kubefile import load_objects
from optplan.models.goals import CAPACITY, GoalPlan
from optplan.models.repack import PodMove
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.core.registry import load
from optplan.solvers.goals.greedy import GreedyGoalPlanner
from optplan.solvers.goals.problem import GoalProblem, GoalResult
from optplan.solvers.goals.validate import goal_violations
from tests.adapters.test_vgpu import SHARE
from tests.builders import IMAGE, hypernode, job_task, podgroup, queue, repack_run, vcjob
from tests.goalcases import Goals
from tests.repack.test_shares import node, share, whole

OPTS = PlanOptions(time_limit=5, workers=1, seed=0, deterministic=True)


def share_task(name: str, cores: int, replicas: int = 1) -> dict[str, Any]:
    """A task whose pods ask for a share of ``cores`` percent of one device."""
    limits = {**SHARE, "volcano.sh/vgpu-cores": str(cores)}
    return job_task(name, replicas, 0, template_spec={"containers": [
        {"name": "main", "image": IMAGE, "resources": {"limits": limits, "requests": limits}}]})


def problem(*objs: dict[str, Any], tier: int | None = None, count: int = 0) -> GoalProblem:
    """Every running pod its own PodGroup; every VCJob a gang to admit; ``count`` > 0: the freeHyperNodes goal."""
    out: list[dict[str, Any]] = [queue("default")]
    for o in objs:
        out.append(o)
        if o["kind"] == "Pod":
            o["metadata"]["annotations"]["scheduling.k8s.io/group-name"] = o["metadata"]["name"]
            out.append(podgroup(o["metadata"]["name"], ns="ns"))
    loaded = load_objects([*out, repack_run()])
    snap, run = loaded.snapshot, next(iter(loaded.runs.values()))
    hns = tuple(sorted(h for h, hn in snap.hyper_nodes.items() if hn.tier == tier)) if count else ()
    return GoalProblem(snap, run, Goals(tuple(snap.jobs[k] for k in sorted(snap.jobs)), tier, count, False, hns))


def solve(p: GoalProblem) -> GoalResult:
    r = GreedyGoalPlanner().plan(p, OPTS)
    assert goal_violations(p, r.plan, claimed=r.disruption) == []
    return r


def admitted_on(plan: GoalPlan, name: str) -> list[str] | None:
    a = next(a for a in plan.admissions if a.name == name)
    return [b.node for b in a.bindings] if a.admitted else None


def test_a_share_moves_to_a_named_device_to_admit_a_two_card_gang() -> None:
    # n1: 0.4 shares on both devices; n2: a 0.5 share on a. No node has two untouched cards: moving n2's
    # share to n1's a (0.6 free, the tightest device that takes it) leaves n2 both cards, with one move
    p = problem(node("n1"), node("n2"), share("s1", "n1", "a", 40), share("s2", "n1", "b", 40),
                share("s3", "n2", "a", 50), vcjob("big", "default", [job_task("w", 1, 2)], ns="ns"))
    assert p.gangs[0].cause is None  # not proven short: shares may move
    r = solve(p)
    assert r.plan.repack.moves == (PodMove(pod="ns/s3", from_node="n2", to_node="n1", to_devices=(0,)),)
    assert admitted_on(r.plan, "big") == ["n2"]
    assert r.plan.repack.freed_nodes == ("n2",)


def test_a_gang_asking_shares_is_admitted_where_a_device_takes_it() -> None:
    # the gang's pod asks 0.8 of one device. n1's devices have 0.2 free, n2's 0.7: none takes it. Moving
    # n2's 0.3 share on a to n3's b (0.4 free) leaves n2's a whole for it
    p = problem(node("n1"), node("n2"), node("n3"), share("s1", "n1", "a", 80), share("s2", "n1", "b", 80),
                share("s3", "n2", "a", 30), share("s4", "n2", "b", 30), whole("w3", "n3"), share("s5", "n3", "b", 60),
                vcjob("sh", "default", [share_task("w", 80)], ns="ns"))
    r = solve(p)
    assert admitted_on(r.plan, "sh") == ["n2"]
    [m] = r.plan.repack.moves
    assert (m.from_node, m.to_node, m.to_devices) == ("n2", "n3", (1,))


def test_a_share_gang_that_fits_is_admitted_without_moves() -> None:
    p = problem(node("n1"), share("s1", "n1", "a", 80), vcjob("sh", "default", [share_task("w", 60)], ns="ns"))
    r = solve(p)
    assert admitted_on(r.plan, "sh") == ["n1"] and r.plan.repack.moves == ()


def test_a_share_that_fits_no_device_elsewhere_stays_and_the_gang_waits() -> None:
    # n2's share (0.5) fits no device of n1 (0.4 free on each): nothing can free two cards
    p = problem(node("n1"), node("n2"), share("s1", "n1", "a", 60), share("s2", "n1", "b", 60),
                share("s3", "n2", "a", 50), vcjob("big", "default", [job_task("w", 1, 2)], ns="ns"))
    r = solve(p)
    assert admitted_on(r.plan, "big") is None and r.plan.repack.moves == ()


def test_the_validator_checks_the_moved_share_device() -> None:
    # the share goes to n1's a (0.6 free); a plan giving it n1's b (0.3 free after a 0.7 share) is refused
    p = problem(node("n1"), node("n2"), share("s1", "n1", "a", 40), share("s2", "n1", "b", 70),
                share("s3", "n2", "a", 50), vcjob("big", "default", [job_task("w", 1, 2)], ns="ns"))
    r = solve(p)
    [m] = r.plan.repack.moves
    assert m.to_devices == (0,)
    moves = (m.model_copy(update={"to_devices": (1,)}),)
    bad = r.plan.model_copy(update={"repack": r.plan.repack.model_copy(update={"moves": moves})})
    assert "pod ns/s3 does not fit on n1: devices 1 cannot take a share of 500 milli-GPU and 4000 MiB" in (
        goal_violations(p, bad))


def test_a_hypernode_holding_shares_is_freed_by_moving_them() -> None:
    # HyperNodes h1 {n1}, h2 {n2} of tier 1; n1 holds a 0.3 share, n2 a whole card and a 0.5 share: freeing
    # h1 moves the share to n2's b (0.5 free), named
    objs = [node("n1"), node("n2"), share("s1", "n1", "a", 30), whole("w2", "n2"), share("s2", "n2", "b", 50),
            hypernode("h1", 1, ["n1"]), hypernode("h2", 1, ["n2"])]
    r = solve(problem(*objs, tier=1, count=1))
    assert r.plan.freed_hyper_nodes == ("h1",)
    assert r.plan.repack.moves == (PodMove(pod="ns/s1", from_node="n1", to_node="n2", to_devices=(1,)),)


@pytest.mark.parametrize("name", ["cpsat", "milp", "auto", "kai"])
def test_every_goal_planner_plans_valid_with_shares(name: str) -> None:
    # the exact models move the share at device level too (either of n1's devices takes it; auto keeps the
    # greedy's choice, which costs the same); kai evicts and re-places, valid
    p = problem(node("n1"), node("n2"), share("s1", "n1", "a", 40), share("s2", "n1", "b", 40),
                share("s3", "n2", "a", 50), vcjob("big", "default", [job_task("w", 1, 2)], ns="ns"))
    r = load("goals", name)().plan(p, OPTS)
    assert goal_violations(p, r.plan, claimed=r.disruption) == []
    if name != "kai":
        assert admitted_on(r.plan, "big") == ["n2"] and r.plan.repack.moves[0].to_devices in ((0,), (1,))
    if name == "auto":
        assert r.plan.repack.moves[0].to_devices == (0,)


def test_a_hami_gang_on_a_snapshot_without_devices_asks_whole_cards() -> None:
    # no node lists its GPUs: the template's nvidia.com/gpu next to HAMi's share resources is whole cards
    from tests.adapters.test_vgpu_hami import SHARE as HAMI
    from tests.builders import node as plain
    extra = {"nvidia.com/gpucores": "400", "nvidia.com/gpumem": "65536"}
    task = job_task("w", 2, 0, template_spec={"containers": [
        {"name": "main", "image": IMAGE, "resources": {"limits": HAMI, "requests": HAMI}}]})
    p = problem(plain("n1", 1, extra=extra), plain("n2", 1, extra=extra), vcjob("h", "default", [task], ns="ns"))
    assert p.gangs[0].card_request("nvidia.com/gpu") == 2000 and not p.repack.shares_move
    assert sorted(admitted_on(solve(p).plan, "h") or []) == ["n1", "n2"]  # a card each
    p = problem(plain("n1", 1, extra=extra), vcjob("h", "default", [task], ns="ns"))
    assert p.gangs[0].cause == CAPACITY  # two cards asked, one in the cluster


def test_the_greedy_sends_a_share_to_the_device_it_fills_most() -> None:
    # n2's three shares (0.6 and 0.4 on a, 0.5 on b) must leave for the gang's two cards; n1 and n3 have no
    # untouched device (a whole card on b each), n1's a has 0.9 free, n3's a 0.6. By free whole cards (a tie)
    # then name, the 0.6 share took n1's a and the 0.5 one n3's a, leaving 0.1 for the 0.4 one; by the device
    # it fills most, the 0.6 share fills n3's a and the others fit n1's a
    p = problem(node("n1"), node("n2"), node("n3"), share("x1", "n1", "a", 10), whole("w1", "n1"),
                share("x3", "n3", "a", 40), whole("w3", "n3"),
                share("s1", "n2", "a", 60), share("s2", "n2", "b", 50), share("s3", "n2", "a", 40),
                vcjob("big", "default", [job_task("w", 1, 2)], ns="ns"))
    r = solve(p)
    assert admitted_on(r.plan, "big") == ["n2"]
    assert {m.pod: (m.to_node, m.to_devices) for m in r.plan.repack.moves} == {
        "ns/s1": ("n3", (0,)), "ns/s2": ("n1", (0,)), "ns/s3": ("n1", (0,))}
