"""The exact goal planner (issue 15 §2): one CP-SAT model for the moves, the pending gangs' placement and
the HyperNodes to free, lexicographic (gangs by priority, HyperNodes, disruption). Every plan is checked by
the goal validator; CP-SAT runs with one worker and deterministic limits."""

from __future__ import annotations

import random
from typing import Any

import pytest

from optplan.models.goals import BUDGET, HIGHER_GOAL, SEARCH, GoalPlan
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.core.registry import load
from optplan.solvers.goals.cpsat import CpSatGoalPlanner, fallback, fits_now
from optplan.solvers.goals.model import build_data
from optplan.solvers.goals.problem import GoalProblem, GoalResult
from optplan.solvers.goals.validate import goal_violations
from tests.builders import (
    GPU,
    hypernode,
    job_task,
    load_with_run,
    node,
    pdb,
    pod,
    podgroup,
    podgroup_in,
    priority_class,
    queue,
    repack_run,
    vcjob,
)
from tests.goalcases import Goals

OPTIONS = PlanOptions(time_limit=10, workers=1, deterministic=True)
HARD1 = {"mode": "hard", "highestTierAllowed": 1}


def problem(objs: list[dict[str, Any]], *, run: dict[str, Any] | None = None, free: tuple[int, int, bool] | None = None,
            jobs: tuple[str, ...] | None = None) -> GoalProblem:
    """A GoalProblem naming the VCJobs ``jobs`` (default: every VCJob of the objects); ``free``: (tier, count,
    required)."""
    loaded, rr = load_with_run(*objs, run or repack_run())
    snap = loaded.snapshot
    goals = Goals(jobs=tuple(snap.jobs[k] for k in sorted(snap.jobs) if jobs is None or k.split("/")[1] in jobs))
    if free is not None:
        tier, count, required = free
        hns = tuple(sorted(h for h, hn in snap.hyper_nodes.items() if hn.tier == tier))
        goals = Goals(goals.jobs, tier, count, required, hns)
    return GoalProblem(snap, rr, goals)


def solve(p: GoalProblem, hint: GoalResult | None = None, options: PlanOptions = OPTIONS) -> GoalResult:
    res = CpSatGoalPlanner().plan(p, options, hint)
    checked = p
    if res.record.status == "INFEASIBLE":  # the required count is reported by the caller, not met by the plan
        checked = GoalProblem(p.snapshot, p.run, Goals(tuple(g.job for g in p.gangs), p.free_tier, p.free_count,
                                                       False, p.hyper_node_names))
    assert goal_violations(checked, res.plan, claimed=res.disruption) == []
    return res


def admission(res: GoalResult, name: str) -> Any:
    return admission_of(res.plan, name)


def admission_of(plan: GoalPlan, name: str) -> Any:
    return next(a for a in plan.admissions if a.name == name)


def scattered() -> list[dict[str, Any]]:
    """Two 8-card nodes, each half used by a pod of its own PodGroup: 8 cards idle, none whole."""
    return [node("a"), node("b"), queue("default"), podgroup_in("default", "pg1"), podgroup_in("default", "pg2"),
            pod("a1", "a", 4, group="pg1", labels={"app": "one"}), pod("b1", "b", 4, group="pg2"),
            vcjob("big", "default", [job_task("w", 1, 8)])]


def test_registered_under_goals() -> None:
    assert load("goals", "cpsat") is CpSatGoalPlanner


def test_scattered_cards_one_move_optimal() -> None:
    res = solve(problem(scattered()))
    big = admission(res, "big")
    assert big.admitted and len(big.bindings) == 1
    assert len(res.plan.repack.moves) == 1
    mv = res.plan.repack.moves[0]
    assert big.bindings[0].node == mv.from_node
    assert res.plan.repack.freed_nodes == (mv.from_node,)
    assert res.record.status == "OPTIMAL" and res.record.gap_percent == 0.0
    assert res.disruption.moved_pods == 1
    assert "makes room for default/big" in res.plan.why[0].reason


def test_nothing_moves_when_the_gang_fits_already() -> None:
    objs = [*scattered(), node("c")]
    res = solve(problem(objs))
    assert admission(res, "big").bindings[0].node == "c"
    assert res.plan.repack.moves == () and res.record.status == "OPTIMAL"


def test_fallback_without_a_model_solution_admits_what_fits_now() -> None:
    """When CP-SAT returns nothing (time), the plan is the hint, else the gangs that fit without a move."""
    p = problem([*scattered(), node("c")])
    plan = fallback(p, build_data(p), None)
    assert goal_violations(p, plan) == [] and admission_of(plan, "big").admitted
    p = problem(scattered())
    plan = fallback(p, build_data(p), None)
    assert not admission_of(plan, "big").admitted and admission_of(plan, "big").cause == SEARCH


def test_priority_decides_between_two_gangs_competing_for_one_region() -> None:
    """s0 can hold one 16-card ring (after moving its 2-card pod to n4, alone in s2); s1 is taken by pods
    that may not move."""
    objs = [node(f"n{i}") for i in range(5)] + [
        hypernode("s0", 1, ["n0", "n1"]), hypernode("s1", 1, ["n2", "n3"]), hypernode("s2", 1, ["n4"]),
        queue("default"),
        podgroup_in("default", "pg1"), pod("x", "n0", 2, group="pg1"),
        pod("p2", "n2", 8, group=None, scheduler="default-scheduler"),
        pod("p3", "n3", 8, group=None, scheduler="default-scheduler"),
        priority_class("high", 1000), priority_class("low", 10),
        vcjob("lo", "default", [job_task("w", 2, 8)], priority_class_name="low", network_topology=HARD1),
        vcjob("hi", "default", [job_task("w", 2, 8)], priority_class_name="high", network_topology=HARD1)]
    p = problem(objs)
    assert [g.job.name for g in p.gangs] == ["hi", "lo"]
    res = solve(p)
    hi, lo = admission(res, "hi"), admission(res, "lo")
    assert hi.admitted and hi.hyper_node == "s0" and hi.tier == 1
    assert [(m.pod, m.to_node) for m in res.plan.repack.moves] == [("default/x", "n4")]
    assert not lo.admitted and lo.cause == HIGHER_GOAL and "default/hi" in lo.reason
    assert res.record.status == "OPTIMAL"


def test_queue_capability_admits_one_of_two_gangs() -> None:
    """The queue's capability holds one 8-card gang more; the cluster could hold both. The higher priority
    gang is admitted, the other says it would cost it its place."""
    def objs(capability: dict[str, str] | None) -> list[dict[str, Any]]:
        return [node("a"), node("b"), node("c"), queue("default"), queue("team", capability=capability),
                podgroup_in("team", "pg1"), pod("a1", "a", 4, group="pg1"),
                priority_class("high", 1000), priority_class("low", 10),
                vcjob("lo", "team", [job_task("w", 1, 8)], priority_class_name="low"),
                vcjob("hi", "team", [job_task("w", 1, 8)], priority_class_name="high")]

    assert all(a.admitted for a in solve(problem(objs(None))).plan.admissions)
    res = solve(problem(objs({GPU: "12"})))
    assert admission(res, "hi").admitted
    lo = admission(res, "lo")
    assert not lo.admitted and lo.cause == HIGHER_GOAL and "default/hi" in lo.reason
    assert res.plan.repack.moves == ()


def test_exact_admits_what_largest_first_blocks() -> None:
    """Three 8-card nodes with 6, 4 and 4 cards free; the gang needs a 4-card and an 8-card pod. Putting the
    4-card pod where the most is free (a) leaves no node for the 8-card pod; the exact plan empties a with
    one move (its 2-card pod to b) and puts the 4-card pod on c."""
    objs = [node("a"), node("b"), node("c"), queue("default"),
            podgroup_in("default", "pa"), podgroup_in("default", "pb"), podgroup_in("default", "pc"),
            pod("a1", "a", 2, group="pa"), pod("b1", "b", 4, group="pb"), pod("c1", "c", 4, group="pc"),
            vcjob("mix", "default", [job_task("small", 1, 4), job_task("large", 1, 8)])]
    res = solve(problem(objs))
    mix = admission(res, "mix")
    assert mix.admitted
    nodes = {b.task: b.node for b in mix.bindings}
    assert nodes["large"] == "a" and nodes["small"] in ("b", "c")
    assert [(m.pod, m.from_node) for m in res.plan.repack.moves] == [("default/a1", "a")]
    assert res.record.status == "OPTIMAL"


def test_hard_topology_gang_lands_in_one_hypernode_and_moved_groups_keep_theirs() -> None:
    """The ring needs two whole nodes of one tier-1 HyperNode. A hard-topology PodGroup's pod that moves
    stays inside its HyperNode (s1), so s0 is where the ring goes."""
    objs = [node(f"n{i}") for i in range(4)] + [
        hypernode("s0", 1, ["n0", "n1"]), hypernode("s1", 1, ["n2", "n3"]), queue("default"),
        podgroup("keep", 1, network_topology=HARD1), podgroup_in("default", "free"),
        pod("k0", "n2", 4, group="keep"), pod("k1", "n3", 4, group="keep"),
        pod("f0", "n0", 4, group="free"),
        vcjob("ring", "default", [job_task("w", 2, 8)], network_topology=HARD1)]
    res = solve(problem(objs))
    ring = admission(res, "ring")
    assert ring.admitted and ring.hyper_node in ("s0", "s1") and ring.tier == 1
    assert {b.node for b in ring.bindings} <= ({"n0", "n1"} if ring.hyper_node == "s0" else {"n2", "n3"})
    topo = {"n0": "s0", "n1": "s0", "n2": "s1", "n3": "s1"}
    for m in res.plan.repack.moves:
        if m.pod.startswith("default/k"):
            assert topo[m.to_node] == "s1"
    assert res.record.status == "OPTIMAL"


def test_pdb_blocks_the_move_and_the_gang_says_budget() -> None:
    objs = [*scattered(), pdb("one", {"app": "one"}, 0), pdb("two", {"app": "two"}, 0)]
    objs[6] = pod("b1", "b", 4, group="pg2", labels={"app": "two"})
    res = solve(problem(objs))
    big = admission(res, "big")
    assert not big.admitted and big.cause == BUDGET
    assert res.plan.repack.moves == ()


def test_pdb_allowing_one_disruption_is_used_once() -> None:
    objs = [*scattered(), pdb("one", {"app": "one"}, 1), pdb("two", {"app": "two"}, 0)]
    objs[6] = pod("b1", "b", 4, group="pg2", labels={"app": "two"})
    res = solve(problem(objs))
    assert admission(res, "big").admitted
    assert [m.pod for m in res.plan.repack.moves] == ["default/a1"]


def test_max_per_run_pod_groups_respected() -> None:
    """The only node that can be emptied for the 8-card pod is a, whose two pods are of two PodGroups (one
    goes to b, one to the 4-card node c): with maxPerRun.podGroups 1 the gang says BUDGET."""
    objs = [node("a"), node("b"), node("c", 4), queue("default")] + [
        podgroup_in("default", g) for g in ("g1", "g2", "g3", "g4")] + [
        pod("a1", "a", 2, group="g1"), pod("a2", "a", 2, group="g2"), pod("b1", "b", 6, group="g3"),
        pod("c1", "c", 2, group="g4"), vcjob("big", "default", [job_task("w", 1, 8)])]
    two = solve(problem(objs, run=repack_run(max_per_run={"podGroups": 2})))
    assert admission(two, "big").admitted and two.disruption.affected_pod_groups == 2
    one = solve(problem(objs, run=repack_run(max_per_run={"podGroups": 1})))
    big = admission(one, "big")
    assert not big.admitted and big.cause == BUDGET and one.plan.repack.moves == ()


def test_free_hypernodes_frees_the_cheapest() -> None:
    """Three tier-1 HyperNodes; s0 holds one 1-card pod, s1 two, s2 is where they can go: s0 is freed."""
    objs = [node(f"n{i}") for i in range(6)] + [
        hypernode("s0", 1, ["n0", "n1"]), hypernode("s1", 1, ["n2", "n3"]), hypernode("s2", 1, ["n4", "n5"]),
        queue("default"), podgroup_in("default", "a"), podgroup_in("default", "b"), podgroup_in("default", "c"),
        pod("a0", "n0", 1, group="a"), pod("b0", "n2", 1, group="b"), pod("b1", "n3", 1, group="b"),
        pod("c0", "n4", 4, group="c"), pod("c1", "n5", 4, group="c")]
    res = solve(problem(objs, free=(1, 1, False)))
    assert res.plan.freed_hyper_nodes == ("s0",)
    assert [m.pod for m in res.plan.repack.moves] == ["default/a0"]
    assert res.plan.why[0].reason == "frees HyperNode s0"
    assert res.record.status == "OPTIMAL"


def test_required_hypernodes_out_of_reach_reported_infeasible() -> None:
    """Two HyperNodes, each full: neither can be emptied. Required: INFEASIBLE, the plan frees what it can."""
    objs = [node(f"n{i}") for i in range(4)] + [
        hypernode("s0", 1, ["n0", "n1"]), hypernode("s1", 1, ["n2", "n3"]), queue("default"),
        podgroup_in("default", "a")] + [pod(f"p{i}", f"n{i}", 8, group="a") for i in range(4)]
    res = solve(problem(objs, free=(1, 1, True)))
    assert res.record.status == "INFEASIBLE"
    assert res.plan.freed_hyper_nodes == () and res.plan.repack.moves == ()
    optional = solve(problem(objs, free=(1, 1, False)))
    assert optional.record.status == "OPTIMAL" and optional.plan.freed_hyper_nodes == ()


def test_required_hypernode_outranks_nothing_but_gangs() -> None:
    """A required HyperNode is a constraint: the gang is admitted only where it leaves one free."""
    objs = [node(f"n{i}") for i in range(4)] + [
        hypernode("s0", 1, ["n0", "n1"]), hypernode("s1", 1, ["n2", "n3"]), queue("default"),
        podgroup_in("default", "a"), pod("p0", "n0", 2, group="a"),
        vcjob("big", "default", [job_task("w", 1, 8)])]
    res = solve(problem(objs, free=(1, 1, True)))
    assert admission(res, "big").admitted
    assert len(res.plan.freed_hyper_nodes) == 1
    assert res.record.status == "OPTIMAL"


def test_hint_is_accepted_and_gives_the_same_plan() -> None:
    p = problem(scattered())
    first = solve(p)
    again = solve(p, hint=first)
    assert again.plan == first.plan and again.record.status == "OPTIMAL"


def test_restart_policy_changes_which_pod_moves() -> None:
    """Either 4-card pod can move to make room. a1's PodGroup (two pods, minMember 1) may lose one pod
    safely, b1's (one pod) may not: a1 moves. With RestartJob, moving a1 restarts both pods of its group,
    below minAvailable and 8 cards affected: b1 (4 cards) moves instead."""
    def objs(policy: str | None) -> list[dict[str, Any]]:
        job = vcjob("job", "default", [job_task("w", 2, 4)])
        if policy is not None:
            job["spec"]["policies"] = [{"event": "PodEvicted", "action": policy}]
        job["status"] = {"state": {"phase": "Running"}}
        return [node("a"), node("b"), node("c"), queue("default"), podgroup("pg1", 1), podgroup("pg2", 1),
                pod("job-w-0", "a", 4, group="pg1"), pod("job-w-1", "c", 8, group="pg1"),
                pod("b1", "b", 4, group="pg2"), job, vcjob("big", "default", [job_task("w", 1, 8)])]

    plain = solve(problem(objs(None), jobs=("big",)))
    assert [m.pod for m in plain.plan.repack.moves] == ["default/job-w-0"]
    worse = solve(problem(objs("RestartJob"), jobs=("big",)))  # moves b1: valid here too, but dearer
    assert [m.pod for m in solve(problem(objs(None), jobs=("big",)), hint=worse).plan.repack.moves] == [
        "default/job-w-0"]
    restart = solve(problem(objs("RestartJob"), jobs=("big",)))
    assert [m.pod for m in restart.plan.repack.moves] == ["default/b1"]
    assert admission(restart, "big").admitted and restart.record.status == "OPTIMAL"


def test_restricted_model_is_valid_and_never_claims_optimal(monkeypatch: pytest.MonkeyPatch) -> None:
    from optplan.solvers.goals import model
    p = problem(scattered())
    exact = solve(p)
    monkeypatch.setattr(model, "MAX_VARIABLES", 0)
    cut = solve(p)
    assert cut.stats["restricted"] == 1 and cut.record.status == "FEASIBLE"
    assert p.score(cut.plan, cut.disruption) <= p.score(exact.plan, exact.disruption)


# ---- a seeded family ---------------------------------------------------------------------------------

def random_cluster(rng: random.Random) -> tuple[list[dict[str, Any]], dict[str, Any], tuple[int, int, bool] | None]:
    """4-10 nodes of 4 or 8 cards in tier-1 pairs under two tier-2 HyperNodes, mostly full: PodGroups of 1-3
    pods (some hard or soft topology, some owned by a VCJob restarting the job or the task on eviction),
    a PDB, 1-3 pending gangs of two priorities (some hard tier-1), maybe maxPerRun and a HyperNode goal."""
    n = rng.randint(4, 10)
    objs: list[dict[str, Any]] = [node(f"n{i}", rng.choice([4, 8])) for i in range(n)]
    pairs = (n + 1) // 2
    objs += [hypernode(f"s{j}", 1, [f"n{i}" for i in range(2 * j, min(2 * j + 2, n))]) for j in range(pairs)]
    objs += [hypernode("t0", 2, [f"s{j}" for j in range(pairs) if j % 2 == 0], "HyperNode"),
             hypernode("t1", 2, [f"s{j}" for j in range(pairs) if j % 2 == 1], "HyperNode"), queue("default")]
    free = [int(o["status"]["allocatable"][GPU]) for o in objs[:n]]
    for i in range(n):
        while free[i] > 0 and rng.random() < 0.85:
            size = rng.choice([1, 1, 2, 4])
            if size > free[i]:
                break
            g = f"g{sum(1 for o in objs if o['kind'] == 'PodGroup')}"
            pods = rng.choice([1, 2, 3])
            topo = HARD1 if rng.random() < 0.2 else ({"mode": "soft"} if rng.random() < 0.3 else None)
            objs.append(podgroup(g, rng.randint(0, pods), network_topology=topo,
                                 owner=("batch.volcano.sh/v1alpha1", "Job", f"r{g}")))
            policy = rng.choice([None, None, "RestartJob", "RestartTask"])
            if policy is not None:
                job = vcjob(f"r{g}", "default", [job_task("w", pods, size), job_task("v", pods, size)])
                job["spec"]["policies"] = [{"event": "PodEvicted", "action": policy}]
                job["status"] = {"state": {"phase": "Running"}}
                objs.append(job)
            for k in range(pods):
                at = i if k == 0 else rng.randrange(n)
                if free[at] >= size:
                    free[at] -= size
                    objs.append(pod(f"r{g}-{rng.choice('wv')}-{k}", f"n{at}", size, group=g,
                                    labels={"app": rng.choice(["x", "y"])}))
    if rng.random() < 0.3:
        objs.append(pdb("x", {"app": "x"}, rng.randint(0, 2)))
    objs += [priority_class("high", 100), priority_class("low", 1)]
    for j in range(rng.randint(1, 3)):
        reps, gpu = rng.choice([(1, 8), (2, 4), (2, 8), (3, 2), (1, 6), (1, 4), (2, 2)])
        objs.append(vcjob(f"job{j}", "default", [job_task("w", reps, gpu)],
                          priority_class_name=rng.choice(["high", "low"]),
                          network_topology=HARD1 if rng.random() < 0.4 else None))
    mpr = {"podGroups": rng.randint(1, 3)} if rng.random() < 0.3 else None
    goal = (1, rng.randint(1, 2), rng.random() < 0.5) if rng.random() < 0.4 else None
    return objs, repack_run(max_per_run=mpr), goal


@pytest.mark.parametrize("seed", range(30))
def test_seeded_family_valid_and_deterministic(seed: int) -> None:
    """Every plan passes the validator (``solve``), one input gives one plan, every gang not admitted says
    why, and the exact plan admits at least what fits without a move, priority level by level (unless
    HyperNodes are required)."""
    objs, run, free = random_cluster(random.Random(seed))
    jobs = tuple(f"job{j}" for j in range(3))
    options = PlanOptions(time_limit=5, workers=1, deterministic=True)
    p = problem(objs, run=run, free=free, jobs=jobs)
    first = solve(p, options=options)
    second = solve(problem(objs, run=run, free=free, jobs=jobs), options=options)
    assert first.plan == second.plan and first.record == second.record.model_copy(
        update={"wall_seconds": first.record.wall_seconds})
    assert first.record.status in ("OPTIMAL", "INFEASIBLE")  # small: every stage proven
    assert all(a.admitted or a.cause for a in first.plan.admissions)
    if free is None or not free[2]:  # a required HyperNode count outranks the gangs
        levels = p.score(first.plan, first.disruption)[0]
        start = fits_now(build_data(p))
        prio = {g.key: g.priority for g in p.gangs}
        assert levels >= tuple(sum(1 for a in start.admissions if prio[a.key] == lv) for lv in p.levels)
