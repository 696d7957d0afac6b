"""The goal greedy and KAI-style consolidation (issue 15 §2): small hand-built clusters where a user sees
which pods move, which gangs are admitted (and where), which HyperNodes end up free, and why not. Every
plan passes the goal validator."""

from __future__ import annotations

import random
from typing import Any

import pytest

from optplan.models.goals import BUDGET, HIGHER_GOAL, QUOTA, SEARCH, TOPOLOGY, Admission
from optplan.solvers.baselines.kai import KaiPlanner
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.core.protection import DO_NOT_DISRUPT
from optplan.solvers.core.registry import load, names
from optplan.solvers.goals.greedy import GreedyGoalPlanner
from optplan.solvers.goals.problem import GoalPlanner, GoalProblem, GoalResult
from optplan.solvers.goals.validate import goal_violations
from optplan.solvers.placement.place import plan_placement
from tests.builders import (
    hypernode,
    job_task,
    load_with_run,
    node,
    pdb,
    pod,
    podgroup_in,
    queue,
    repack_run,
    vcjob,
)
from tests.goalcases import Goals
from tests.placement.test_victims import CLASSES, running

OPTS = PlanOptions(time_limit=5, workers=1, seed=0, deterministic=True)
NOW = "2025-06-01T12:00:00Z"


def problem(*objs: dict[str, Any], run: dict[str, Any] | None = None, tier: int | None = None, count: int = 0,
            required: bool = False) -> GoalProblem:
    """Every VCJob of the objects is a gang to admit; ``count`` > 0 adds the freeHyperNodes goal on ``tier``."""
    loaded, rr = load_with_run(*objs, run or repack_run())
    snap = loaded.snapshot
    hns = tuple(sorted(h for h, hn in snap.hyper_nodes.items() if hn.tier == tier)) if count else ()
    return GoalProblem(snap, rr, Goals(tuple(snap.jobs[k] for k in sorted(snap.jobs)), tier, count, required, hns))


def solve(p: GoalProblem, planner: GoalPlanner | None = None) -> GoalResult:
    """Plan, and hold the plan to the goal validator."""
    r = (planner or GreedyGoalPlanner()).plan(p, OPTS)
    assert goal_violations(p, r.plan, claimed=r.disruption) == []
    return r


def gang(r: GoalResult, name: str = "big") -> Admission:
    return next(a for a in r.plan.admissions if a.name == name)


def moves(r: GoalResult) -> list[tuple[str, str, str]]:
    return [(m.pod.split("/")[1], m.from_node, m.to_node) for m in r.plan.repack.moves]


def scattered(*extra: dict[str, Any], a: dict[str, Any] | None = None, b: dict[str, Any] | None = None
              ) -> list[dict[str, Any]]:
    """Two 8-card nodes, each with one 4-card pod of its own PodGroup; ``big`` asks for one 8-card pod."""
    return [node("a"), node("b"), queue("default"), podgroup_in("default", "pa"), podgroup_in("default", "pb"),
            pod("pa-0", "a", 4, group="pa", **(a or {})), pod("pb-0", "b", 4, group="pb", **(b or {})),
            vcjob("big", "default", [job_task("w", 1, 8)]), *extra]


def test_one_move_of_a_scattered_pod_admits_an_8_card_gang() -> None:
    p = problem(*scattered())
    assert p.gangs[0].verdict == "fragmentation"
    r = solve(p)
    assert moves(r) == [("pa-0", "a", "b")]
    a = gang(r)
    assert a.admitted and [(b.task, b.index, b.node) for b in a.bindings] == [("w", 0, "a")]
    assert list(r.plan.repack.freed_nodes) == ["a"]
    assert [w.reason for w in r.plan.why] == ["makes room for default/big on a"]
    assert (r.disruption.moved_pods, r.disruption.moved_cards) == (1, 4000)
    assert r.record.name == "greedy" and r.record.status == "HEURISTIC"


def test_a_gang_that_fits_now_moves_nothing() -> None:
    r = solve(problem(*scattered(), node("c")))
    assert moves(r) == [] and gang(r).admitted and gang(r).bindings[0].node == "c"


def four_half_full() -> list[dict[str, Any]]:
    """Four 8-card nodes, each half used by a one-pod job of normal priority (minAvailable 0: Volcano's
    plugin tiers preempt no job at minMember); ``big`` (large-job) needs two whole nodes: 16 cards are
    idle, but scattered."""
    objs: list[dict[str, Any]] = [*CLASSES, queue("default"), *(node(n) for n in "abcd")]
    for n in "abcd":
        objs += running(f"j{n}", "default", [(n, 4)], min_member=0)
    return [*objs, vcjob("big", "default", [job_task("w", 2, 8)], priority_class_name="large-job")]


def test_moving_two_pods_admits_a_gang_that_preemption_admits_only_by_killing_jobs() -> None:
    p = problem(*four_half_full())
    assert p.gangs[0].verdict == "fragmentation"  # allocate alone cannot place it
    # preemption (optplan place: Volcano's allocate, then preempt): admitted only by killing two jobs' pods
    placed = plan_placement(p.snapshot, list(p.snapshot.jobs.values()), "greedy", OPTS, now=NOW).job("default/big")
    assert placed.admitted and sorted(v.name for v in placed.victims) == ["ja-0", "jb-0"]
    # the goal greedy: the same gang, by moving two pods; each runs on after the move, on a half-full node
    r = solve(p)
    assert gang(r).admitted and sorted(b.node for b in gang(r).bindings) == ["a", "c"]
    assert sorted(moves(r)) == [("ja-0", "a", "b"), ("jc-0", "c", "d")]
    assert (r.disruption.moved_pods, r.disruption.moved_cards) == (2, 8000)


@pytest.mark.parametrize(("case", "pods", "scope", "block"), [
    ("out of scope", {}, {"podGroups": {"exclude": {"names": ["default/pa", "default/pb"]}}}, "podgroup-out-of-scope"),
    ("protected", {"annotations": {DO_NOT_DISRUPT: "true"}}, None, "disruption-protected"),
    ("not running", {"phase": "Pending"}, None, "pod-not-running"),
])
def test_pods_that_may_not_move_keep_the_gang_out(case: str, pods: dict[str, Any], scope: dict[str, Any] | None,
                                                    block: str) -> None:
    objs = scattered()
    for o in objs:
        if o["kind"] == "Pod":
            o["metadata"]["annotations"].update(pods.get("annotations", {}))
            o["status"]["phase"] = pods.get("phase", "Running")
    p = problem(*objs, run=repack_run(scope=scope))
    for planner in (GreedyGoalPlanner(), KaiPlanner()):
        r = solve(p, planner)
        a = gang(r)
        assert moves(r) == [] and not a.admitted and a.cause == BUDGET
        assert "may not move" in a.reason and block in a.reason


def test_max_per_run_pod_groups_zero_refuses_with_cause_budget() -> None:
    r = solve(problem(*scattered(), run=repack_run(max_per_run={"podGroups": 0})))
    assert moves(r) == [] and not gang(r).admitted and gang(r).cause == BUDGET
    assert "maxPerRun" in gang(r).reason


def test_a_pdb_that_allows_no_disruption_refuses_with_cause_budget() -> None:
    objs = scattered(pdb("all", {"app": "x"}, 0), a={"labels": {"app": "x"}}, b={"labels": {"app": "x"}})
    r = solve(problem(*objs))
    assert not gang(r).admitted and gang(r).cause == BUDGET


@pytest.mark.parametrize("solver", ["greedy", "cpsat", "milp", "kai"])
@pytest.mark.parametrize(("policy", "current", "desired", "admitted"), [
    ("AlwaysAllow", 0, 2, True),  # the Eviction API lets the unready pods go without the budget
    ("IfHealthyBudget", 2, 2, True),  # ... as it does while the application is not disrupted
    ("IfHealthyBudget", 0, 2, False),  # disrupted: they need the budget, which allows none
])
def test_unready_pods_under_a_spent_budget(solver: str, policy: str, current: int, desired: int,
                                           admitted: bool) -> None:
    """Every goal planner reads the Eviction API's rule (``snapshot.eviction_need``): the scattered pods are
    Running but not Ready, covered by a PDB that allows no disruption."""
    from tests.builders import ready

    objs = scattered(pdb("all", {"app": "x"}, 0, policy=policy, current=current, desired=desired),
                     a={"labels": {"app": "x"}}, b={"labels": {"app": "x"}})
    objs[5], objs[6] = ready(objs[5], False), ready(objs[6], False)
    r = solve(problem(*objs), load("goals", solver)())
    assert gang(r).admitted is admitted
    if solver != "milp":  # the MILP twin does not re-check why a gang is left out (``SEARCH``)
        assert (gang(r).cause == BUDGET) is not admitted


def test_a_full_queue_is_cause_quota() -> None:
    objs = scattered()
    objs[2] = queue("default", capability={"nvidia.com/gpu": "8"})
    r = solve(problem(*objs))
    assert not gang(r).admitted and gang(r).cause == QUOTA


def racks() -> list[dict[str, Any]]:
    """Tier-1 HyperNodes s0 = {n0, n1}, s1 = {n2, n3}, s2 = {n4, n5} under spine s9 (tier 2)."""
    return [hypernode("s0", 1, ["n0", "n1"]), hypernode("s1", 1, ["n2", "n3"]), hypernode("s2", 1, ["n4", "n5"]),
            hypernode("s9", 2, ["s0", "s1", "s2"], "HyperNode"), *(node(f"n{i}") for i in range(6)),
            queue("default")]


def one_pod_groups(placements: list[tuple[str, int]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i, (n, g) in enumerate(placements):
        out += [podgroup_in("default", f"g{i}"), pod(f"g{i}-0", n, g, group=f"g{i}")]
    return out


HARD1 = {"mode": "hard", "highestTierAllowed": 1}


def test_hard_topology_lands_the_gang_inside_one_tier_1_hypernode() -> None:
    # s0 and s2 hold 4 + 4 cards, s1 holds 2 cards on n2: the cheapest room for 2 x 8 is s1 (move 2 cards)
    objs = [*racks(), *one_pod_groups([("n0", 4), ("n1", 4), ("n2", 2), ("n4", 4), ("n5", 4)]),
            vcjob("big", "default", [job_task("w", 2, 8)], network_topology=HARD1)]
    r = solve(problem(*objs))
    a = gang(r)
    assert a.admitted and (a.hyper_node, a.tier) == ("s1", 1)
    assert {b.node for b in a.bindings} == {"n2", "n3"}
    assert [(p_, f) for p_, f, _t in moves(r)] == [("g2-0", "n2")]


def test_a_gang_larger_than_any_tier_1_hypernode_is_cause_topology() -> None:
    objs = [*racks(), vcjob("big", "default", [job_task("w", 3, 8)], network_topology=HARD1)]
    r = solve(problem(*objs))
    assert not gang(r).admitted and gang(r).cause == TOPOLOGY and moves(r) == []


def test_free_hypernodes_vacates_the_cheapest() -> None:
    # s0: 2 cards, s1: 4 + 4, s2: 6: freeing s0 moves 2 cards
    objs = [*racks(), *one_pod_groups([("n0", 2), ("n2", 4), ("n3", 4), ("n4", 6)])]
    r = solve(problem(*objs, tier=1, count=1))
    assert r.plan.freed_hyper_nodes == ("s0",)
    assert [(p_, f) for p_, f, _t in moves(r)] == [("g0-0", "n0")]
    assert moves(r)[0][2] not in {"n0", "n1"}
    assert [w.reason for w in r.plan.why] == ["frees HyperNode s0"]


def test_hypernodes_free_now_count_first() -> None:
    objs = [*racks(), *one_pod_groups([("n0", 2), ("n2", 4)])]  # s2 is free already
    r = solve(problem(*objs, tier=1, count=1))
    assert r.plan.freed_hyper_nodes == ("s2",) and moves(r) == []


def test_a_required_count_out_of_reach_frees_what_it_can() -> None:
    # 24 of 48 cards busy: s1's 4 cards fit on n1; then s0's 12 or s2's 8 find no room outside: one of three
    objs = [*racks(), *one_pod_groups([("n0", 8), ("n1", 4), ("n2", 4), ("n4", 4), ("n5", 4)])]
    p = problem(*objs, tier=1, count=3, required=True)
    r = GreedyGoalPlanner().plan(p, OPTS)
    assert r.plan.freed_hyper_nodes == ("s1",) and moves(r) == [("g2-0", "n2", "n1")]
    assert goal_violations(p, r.plan, claimed=r.disruption) == []  # out of reach is an outcome, not a broken rule


def test_a_required_hypernode_comes_before_a_gang() -> None:
    # s0 = {n0: 4 cards, n1: empty}; freeing s0 moves n0's pod onto n2 and leaves 4 cards, scattered over
    # n3 and n4, for the 8-card gang: it fits only on n1, which the required goal keeps free
    objs = [*racks(), *one_pod_groups([("n0", 4), ("n2", 4), ("n3", 6), ("n4", 6), ("n5", 8)]),
            vcjob("big", "default", [job_task("w", 1, 8)])]
    p = problem(*objs, tier=1, count=1, required=True)
    r = solve(p)
    assert r.plan.freed_hyper_nodes == ("s0",) and moves(r) == [("g0-0", "n0", "n2")]
    assert not gang(r).admitted and gang(r).cause == HIGHER_GOAL
    # not required: the gang comes first (on n1, no move), and then no HyperNode can be freed
    r = solve(problem(*objs, tier=1, count=1))
    assert gang(r).admitted and gang(r).bindings[0].node == "n1" and moves(r) == []
    assert r.plan.freed_hyper_nodes == ()


def test_kai_admits_the_simple_case() -> None:
    r = solve(problem(*scattered()), KaiPlanner())
    assert gang(r).admitted and len(moves(r)) == 1 and r.record.name == "kai"
    r2 = solve(problem(*four_half_full()), KaiPlanner())
    assert gang(r2).admitted and len(moves(r2)) == 2


def test_kai_evicts_whole_victim_sets_and_breaks_a_budget_the_greedy_keeps() -> None:
    """a holds two 2-card pods of two PodGroups, b one 4-card pod; maxPerRun.podGroups 1. The greedy
    empties b (one PodGroup, onto a); KAI's victim sets go cheapest first (the 2-card ones), so the gang lands
    on a and both must move: two PodGroups, every scenario over the budget."""
    objs = [node("a"), node("b"), queue("default"),
            *one_pod_groups([("a", 2), ("a", 2), ("b", 4)]), vcjob("big", "default", [job_task("w", 1, 8)])]
    p = problem(*objs, run=repack_run(max_per_run={"podGroups": 1}))
    g = solve(p)
    assert gang(g).admitted and moves(g) == [("g2-0", "b", "a")]
    k = solve(p, KaiPlanner())
    assert not gang(k).admitted and gang(k).cause == BUDGET


def test_kai_admits_where_the_greedy_places_too_early() -> None:
    """6 cards idle: 1 on n0 (4 + 3 used), 2 on n2 (a pod not running holds the rest), 3 on n3 (4 + 1 used;
    the 1-card pod's PodGroup is hard tier 1: it may only stay in s1). The greedy puts two of the three
    2-card pods where they fit now (n2, n3); then no node can be emptied enough for the third (n0's 3-card
    pod would need n3's room). KAI evicts n0's 3-card pod first, places two pods on n0 and re-places the
    victim on n3."""
    def group(name: str, hard: bool = False) -> dict[str, Any]:
        pg = podgroup_in("default", name)
        if hard:
            pg["spec"]["networkTopology"] = HARD1
        return pg
    objs = [node("n0"), node("n2", 4), node("n3"), queue("default"),
            hypernode("s0", 1, ["n0"]), hypernode("s1", 1, ["n2", "n3"]),
            *(group(g, g == "d") for g in "abcde"),
            pod("a-0", "n0", 4, group="a"), pod("b-0", "n0", 3, group="b"),
            pod("e-0", "n2", 2, group="e", phase="Pending"),
            pod("c-0", "n3", 4, group="c"), pod("d-0", "n3", 1, group="d"),
            vcjob("big", "default", [job_task("w", 3, 2)])]
    p = problem(*objs)
    g = solve(p)
    assert not gang(g).admitted and gang(g).cause == SEARCH and moves(g) == []
    k = solve(p, KaiPlanner())
    assert gang(k).admitted and moves(k) == [("b-0", "n0", "n3")]
    assert sorted(b.node for b in gang(k).bindings) == ["n0", "n0", "n2"]


def test_kai_reports_hypernodes_free_and_moves_none_for_them() -> None:
    objs = [*racks(), *one_pod_groups([("n0", 2), ("n2", 4)])]
    r = solve(problem(*objs, tier=1, count=2), KaiPlanner())
    assert r.plan.freed_hyper_nodes == ("s2",) and moves(r) == []


@pytest.mark.parametrize("planner", ["greedy", "kai"])
def test_same_input_same_plan(planner: str) -> None:
    objs = [*racks(), *one_pod_groups([("n0", 4), ("n1", 4), ("n2", 2), ("n3", 2), ("n4", 4), ("n5", 1)]),
            vcjob("big", "default", [job_task("w", 2, 8)], network_topology=HARD1),
            vcjob("mid", "default", [job_task("w", 1, 6)])]
    cls = load("goals", planner)
    first, second = (cls().plan(problem(*objs, tier=1, count=1), OPTS) for _ in range(2))
    assert first.plan == second.plan and first.disruption == second.disruption


def test_registry_names_the_goal_planners() -> None:
    assert {"greedy", "kai"} <= set(names("goals"))
    assert load("goals", "greedy") is GreedyGoalPlanner and load("goals", "kai") is KaiPlanner


def test_a_gang_the_search_cannot_place_is_cause_search() -> None:
    # 8 cards free in total over a and b, but a's 6-card pod has nowhere to go (b has 4 free)
    objs = [node("a"), node("b"), queue("default"), *one_pod_groups([("a", 6), ("b", 4)]),
            vcjob("big", "default", [job_task("w", 1, 6)])]
    r = solve(problem(*objs))
    assert not gang(r).admitted and gang(r).cause == SEARCH


def random_case(seed: int) -> tuple[list[dict[str, Any]], dict[str, Any], int, bool]:
    """A small random cluster: 4-8 nodes in tier-1 pairs, one- and two-pod PodGroups (some hard tier 1, a
    few pods not running), sometimes a PDB, a maxPerRun or a tight queue; 0-3 gangs (hard, soft or no
    topology; sometimes a second task); a freeHyperNodes count of 0-2, required or not."""
    rnd = random.Random(seed)
    names = [f"n{i}" for i in range(rnd.choice([4, 6, 8]))]
    cards = {n: rnd.choice([4, 8, 8]) for n in names}
    objs: list[dict[str, Any]] = [node(n, cards[n]) for n in names]
    objs += [hypernode(f"s{i}", 1, names[2 * i:2 * i + 2]) for i in range(len(names) // 2)]
    objs += [hypernode("top", 2, [f"s{i}" for i in range(len(names) // 2)], "HyperNode"),
             queue("default", capability={"nvidia.com/gpu": str(rnd.choice([100, 100, 40]))})]
    for g in range(rnd.randint(2, 8)):
        pg = podgroup_in("default", f"g{g}", rnd.choice([1, 1, 2]))
        hard = rnd.random() < 0.3
        if hard:
            pg["spec"]["networkTopology"] = HARD1
        objs.append(pg)
        where: list[str] = []
        for k in range(pg["spec"]["minMember"]):
            pair = names[2 * (names.index(where[0]) // 2):][:2] if hard and where else names
            open_ = [n for n in pair if cards[n] > 0]
            if not open_:
                break
            n = rnd.choice(open_)
            c = rnd.randint(1, min(cards[n], 4))
            cards[n] -= c
            where.append(n)
            objs.append(pod(f"g{g}-{k}", n, c, group=f"g{g}", labels={"app": rnd.choice("ab")},
                            phase="Running" if rnd.random() < 0.95 else "Pending"))
    if rnd.random() < 0.3:
        objs.append(pdb("pa", {"app": "a"}, rnd.randint(0, 2)))
    for j in range(rnd.randint(0, 3)):
        x = rnd.random()
        nt = ({"mode": "hard", "highestTierAllowed": rnd.choice([1, 2])} if x < 0.4
              else {"mode": "soft"} if x < 0.6 else None)
        tasks = [job_task("w", rnd.randint(1, 3), rnd.choice([2, 4, 8]))]
        if rnd.random() < 0.3:
            tasks.append(job_task("ps", 1, rnd.choice([0, 1])))
        objs.append(vcjob(f"j{j}", "default", tasks, network_topology=nt))
    run = repack_run(max_per_run={"podGroups": rnd.randint(0, 3)} if rnd.random() < 0.3 else None)
    return objs, run, rnd.choice([0, 0, 1, 2]), rnd.random() < 0.5


@pytest.mark.parametrize("seed", range(40))
def test_seeded_family_plans_pass_the_validator(seed: int) -> None:
    """Both planners, with and without the HyperNode goal: every plan is valid (a required count out of
    reach aside)."""
    objs, run, count, required = random_case(seed)
    for p in (problem(*objs, run=run, tier=1, count=count, required=required), problem(*objs, run=run)):
        for planner in (GreedyGoalPlanner(), KaiPlanner()):
            r = planner.plan(p, OPTS)
            found = goal_violations(p, r.plan, claimed=r.disruption)
            assert [v for v in found if not v.endswith("required")] == [], (seed, planner.name)
