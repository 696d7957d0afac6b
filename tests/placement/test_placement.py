"""Queue placement (``optplan place``): seed 002 §8's n0..n7 topology example, gang all-or-nothing,
predicates, queue capability, hard/soft/no topology, Volcano's binpack formula, greedy vs CP-SAT, the
validator and the output shape."""

from __future__ import annotations

import argparse
import json
import random
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import yaml

from optplan.adapters.kubefile import load_files
from optplan.cli import place as place_cli
from optplan.errors import InputError, PlanInvalidError
from optplan.models.placement import Binding, BinpackWeights, JobPlacement, PlacementPlan
from optplan.models.queues import VCJob
from optplan.models.repack import SolverRecord
from optplan.models.snapshot import Snapshot
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.placement.allocate import greedy_place
from optplan.solvers.placement.binpack import binpack_score
from optplan.solvers.placement.context import Context
from optplan.solvers.placement.model import plan_key
from optplan.solvers.placement.place import plan_placement
from optplan.solvers.placement.validate import placement_violations, validate_placement
from tests.builders import (
    GPU,
    hypernode,
    job_task,
    load,
    node,
    pod,
    podgroup_in,
    priority_class,
    queue,
    seed_fabric,
    vcjob,
)

ROOT_DIR = Path(__file__).resolve().parents[2]
OPTS = PlanOptions(time_limit=5, workers=1, seed=0)
G = 1000


def snap_jobs(*objects: dict[str, Any]) -> tuple[Snapshot, list[VCJob]]:
    s = load(*objects).snapshot
    return s, list(s.jobs.values())


def place(solver: str, *objects: dict[str, Any], weights: BinpackWeights | None = None) -> PlacementPlan:
    s, jobs = snap_jobs(*objects)
    return plan_placement(s, jobs, solver, OPTS, weights)


def nodes_of(jp: JobPlacement) -> list[str]:
    return sorted(b.node for b in jp.bindings)


def eight_nodes(**kw: Any) -> list[dict[str, Any]]:
    return [node(f"n{i}", 8, **kw) for i in range(8)]


def full(node_name: str) -> dict[str, Any]:
    """A running pod holding all 8 GPUs of the node."""
    return pod(f"busy-{node_name}", node_name, 8, group=None)


def big_job(name: str = "job", topo: dict[str, Any] | None = None, replicas: int = 4, gpu: int = 8,
            **kw: Any) -> dict[str, Any]:
    return vcjob(name, tasks=[job_task("worker", replicas, gpu)], network_topology=topo, **kw)


HARD2 = {"mode": "hard", "highestTierAllowed": 2}
SOLVERS = ("greedy", "cpsat")


# ---- seed 002 §8.4: highestTierAllowed 2 on the n0..n7 fabric ------------------------------------
# The seed's "Job 4 Pod: n0,n1,n2,n3 allowed (inside s4, tier 2)" holds for pods that take a whole node
# each: with smaller pods the lowest tier that fits wins (s0 alone, tier 1), see the next test.

@pytest.mark.parametrize("solver", SOLVERS)
def test_seed_four_whole_node_pods_land_in_one_tier2_hypernode(solver: str) -> None:
    plan = place(solver, *eight_nodes(), *seed_fabric(), big_job(topo=HARD2))
    jp = plan.job("default/job")
    assert jp.admitted and jp.tier == 2
    expected = {"s4": ["n0", "n1", "n2", "n3"], "s5": ["n4", "n5", "n6", "n7"]}  # the seed's two ✅ lines
    assert jp.hyper_node in expected and nodes_of(jp) == expected[jp.hyper_node]
    if solver == "greedy":
        assert jp.hyper_node == "s4"  # equal HyperNode scores: the first by name


@pytest.mark.parametrize("solver", SOLVERS)
def test_seed_small_pods_take_the_lowest_tier(solver: str) -> None:
    plan = place(solver, *eight_nodes(), *seed_fabric(), big_job(topo=HARD2, gpu=2))
    jp = plan.job("default/job")
    assert jp.admitted and jp.tier == 1
    assert set(nodes_of(jp)) <= {"n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7"} and len(set(nodes_of(jp))) <= 2


@pytest.mark.parametrize("solver", SOLVERS)
def test_seed_crossing_s4_and_s5_is_refused_under_hard_tier2(solver: str) -> None:
    # Only n0, n1, n4, n5 are free: the seed's ❌ line ("crosses s4 and s5, needs tier 3's s6").
    busy = [full(n) for n in ("n2", "n3", "n6", "n7")]
    plan = place(solver, *eight_nodes(), *seed_fabric(), *busy, big_job(topo=HARD2))
    jp = plan.job("default/job")
    assert not jp.admitted and jp.bindings == () and jp.hyper_node is None
    assert "no region fits the gang" in jp.reason and "HyperNode s" in jp.reason


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize(("topo", "hyper", "tier"), [
    ({"mode": "hard", "highestTierAllowed": 3}, "s6", 3),
    ({"mode": "soft"}, "s6", 3),
    (None, None, None),
])
def test_seed_cross_placement_with_wider_or_no_constraint(solver: str, topo: dict[str, Any] | None,
                                                          hyper: str | None, tier: int | None) -> None:
    busy = [full(n) for n in ("n2", "n3", "n6", "n7")]
    plan = place(solver, *eight_nodes(), *seed_fabric(), *busy, big_job(topo=topo))
    jp = plan.job("default/job")
    assert jp.admitted and nodes_of(jp) == ["n0", "n1", "n4", "n5"]
    assert (jp.hyper_node, jp.tier) == (hyper, tier)


def test_soft_job_spreads_over_the_virtual_root_when_no_hypernode_holds_it() -> None:
    # Two tier-1 racks and no parent: a 4-node soft job fits only across both.
    objs = [node(f"n{i}", 8) for i in range(4)] + [hypernode("r0", 1, ["n0", "n1"]), hypernode("r1", 1, ["n2", "n3"])]
    for solver in SOLVERS:
        jp = place(solver, *objs, big_job(topo={"mode": "soft"})).job("default/job")
        assert jp.admitted and jp.hyper_node is None and jp.tier == 2  # one above the top tier
        jp = place(solver, *objs, big_job(topo={"mode": "hard"})).job("default/job")
        assert not jp.admitted


def test_validator_rejects_the_seeds_cross_placement() -> None:
    s, jobs = snap_jobs(*eight_nodes(), *seed_fabric(), big_job(topo=HARD2))
    bindings = tuple(Binding(task="worker", index=i, node=n) for i, n in enumerate(["n0", "n1", "n4", "n5"]))

    def plan(hyper: str | None, tier: int | None) -> PlacementPlan:
        jp = JobPlacement(namespace="default", name="job", queue="default", admitted=True, reason="x",
                          hyper_node=hyper, tier=tier, bindings=bindings)
        return PlacementPlan(jobs=(jp,), solver=SolverRecord(name="hand", status="HAND"))

    assert any("outside HyperNode s4" in v for v in placement_violations(s, jobs, plan("s4", 2)))
    assert any("highestTierAllowed 2" in v for v in placement_violations(s, jobs, plan("s6", 3)))
    assert any("no hyperNode" in v for v in placement_violations(s, jobs, plan(None, None)))
    with pytest.raises(PlanInvalidError):
        validate_placement(s, jobs, plan("s6", 3))


# ---- gang ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("solver", SOLVERS)
def test_gang_is_all_or_nothing_and_leaves_no_trace(solver: str) -> None:
    # The 3-pod gang goes first (older) and fits only 2 pods: nothing of it stays, the later job gets both nodes.
    gang = big_job("gang", replicas=3)
    gang["metadata"]["creationTimestamp"] = "2024-01-01T00:00:00Z"
    plan = place(solver, node("a", 8), node("b", 8), gang, vcjob("small", tasks=[job_task("w", 2, 8)]))
    jp = plan.job("default/gang")
    assert not jp.admitted and jp.bindings == ()
    if solver == "greedy":
        assert "minAvailable 3" in jp.reason
    assert plan.job("default/small").admitted and nodes_of(plan.job("default/small")) == ["a", "b"]


@pytest.mark.parametrize("solver", SOLVERS)
def test_replicas_beyond_min_available_are_placed_when_they_fit(solver: str) -> None:
    plan = place(solver, node("a", 8), node("b", 8), node("c", 8), big_job(replicas=5, min_available=2))
    jp = plan.job("default/job")
    assert jp.admitted and len(jp.bindings) == 3 and "beyond minAvailable 2" in jp.reason


@pytest.mark.parametrize("solver", SOLVERS)
def test_task_minimums_count_when_the_job_minimum_covers_them(solver: str) -> None:
    # ps (1 replica) needs a label no node has; the job's minAvailable 3 = 1 + 2 makes ps required.
    tasks = [job_task("ps", 1, 0, template_spec={"nodeSelector": {"role": "ps"}}), job_task("worker", 2, 4)]
    jp = place(solver, node("a", 8), vcjob("j", tasks=tasks, min_available=3)).job("default/j")
    assert not jp.admitted
    # minAvailable 2 < 1 + 2: Volcano ignores the task minimums, the two workers make the gang.
    jp = place(solver, node("a", 8), vcjob("j", tasks=tasks, min_available=2)).job("default/j")
    assert jp.admitted and {b.task for b in jp.bindings} == {"worker"}


# ---- predicates ----------------------------------------------------------------------------------

@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize(("spec", "expected"), [
    ({"nodeSelector": {"pool": "x"}}, "b"),
    ({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["x"]}]}]}}}}, "b"),
    ({"tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]}, "c"),
])
def test_static_predicates_choose_the_node(solver: str, spec: dict[str, Any], expected: str) -> None:
    nodes = [node("a", 8, unschedulable=True, labels={"pool": "x"}), node("b", 8, labels={"pool": "x"}),
             node("c", 8, taints=[{"key": "gpu", "value": "", "effect": "NoSchedule"}])]
    busy_b = pod("busy-b", "b", 8, group=None) if expected == "c" else None
    objs = [*nodes, *([busy_b] if busy_b else []), vcjob("j", tasks=[job_task("w", 1, 8, template_spec=spec)])]
    jp = place(solver, *objs).job("default/j")
    assert jp.admitted and nodes_of(jp) == [expected]


@pytest.mark.parametrize("solver", SOLVERS)
def test_fit_is_cumulative_on_every_resource(solver: str) -> None:
    # Two 5-GPU pods cannot share an 8-GPU node; cpu runs out before GPUs on the second node.
    plan = place(solver, node("a", 8), node("b", 8, cpu="4"),
                 vcjob("j", tasks=[job_task("w", 2, 5, cpu="8")]))
    jp = plan.job("default/j")
    assert not jp.admitted and ("insufficient" in jp.reason)
    plan = place(solver, node("a", 8), node("b", 8), vcjob("j", tasks=[job_task("w", 2, 5)]))
    assert nodes_of(plan.job("default/j")) == ["a", "b"]


# ---- queue capability ----------------------------------------------------------------------------

def _queue_objs() -> list[dict[str, Any]]:
    # parent capability 12 GPUs; team-a capability 8; team-b already holds 6.
    return [node("a", 8), node("b", 8), queue("parent", capability={GPU: 12}),
            queue("team-a", "parent", capability={GPU: 8}), queue("team-b", "parent"),
            podgroup_in("team-b", "pg-b"), pod("b-0", "b", 6, group="pg-b")]


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize(("gpus", "admitted", "blocker"), [
    (4, True, None),             # 0 + 4 <= 8 and 6 + 4 <= 12
    (8, False, "queue parent"),  # team-a 0 + 8 <= 8 but parent 6 + 8 > 12
])
def test_queue_capability_of_the_queue_and_its_ancestors(solver: str, gpus: int, admitted: bool,
                                                         blocker: str | None) -> None:
    jp = place(solver, *_queue_objs(), vcjob("j", "team-a", tasks=[job_task("w", 1, gpus)])).job("default/j")
    assert jp.admitted is admitted
    if blocker is not None and solver == "greedy":
        assert blocker in jp.reason and "realCapability" in jp.reason


@pytest.mark.parametrize("solver", SOLVERS)
def test_own_queue_capability_binds_across_jobs(solver: str) -> None:
    objs = [node(f"n{i}", 8) for i in range(3)] + [queue("team-a", capability={GPU: 8})]
    jobs = [vcjob(f"j{i}", "team-a", tasks=[job_task("w", 1, 5)]) for i in range(2)]
    plan = place(solver, *objs, *jobs)
    assert sum(j.admitted for j in plan.jobs) == 1


@pytest.mark.parametrize(("objs", "reason"), [
    ([], "queue nope does not exist"),
    ([queue("nope", state="Closed")], "not Open"),
    ([queue("nope"), queue("kid", "nope")], "not a leaf"),
])
def test_jobs_in_unusable_queues_are_not_admitted(objs: list[dict[str, Any]], reason: str) -> None:
    for solver in SOLVERS:
        jp = place(solver, node("a"), *objs, vcjob("j", "nope")).job("default/j")
        assert not jp.admitted and reason in jp.reason


# ---- binpack -------------------------------------------------------------------------------------

def test_binpack_score_is_volcanos_formula() -> None:
    w = BinpackWeights(weight=10, cpu=5, memory=2, resources={GPU: 10})  # seed 002 §7
    alloc = {GPU: 8 * G, "cpu": 64 * G, "memory": 256 * G}
    free = {GPU: 4 * G, "cpu": 48 * G, "memory": 256 * G}  # used: 4 GPUs, 16 cpu
    req = {GPU: 2 * G, "cpu": 8 * G, "memory": 64 * G}
    # (10 × 6/8 + 5 × 24/64 + 2 × 64/256) / 17 × 100 × 10
    expected = (Fraction(10 * 6, 8) + Fraction(5 * 24, 64) + Fraction(2 * 64, 256)) / 17 * 100 * 10
    assert binpack_score(req, alloc, free, w) == expected
    assert binpack_score({**req, GPU: 5 * G}, alloc, free, w) == 0  # over allocatable: the whole node scores 0
    # a node without the resource adds 0 but the weight still counts
    no_gpu = {"cpu": 64 * G, "memory": 256 * G}
    assert binpack_score(req, no_gpu, free, w) == (Fraction(5 * 24, 64) + Fraction(2 * 64, 256)) / 17 * 1000
    # unweighted resources are ignored: Volcano's defaults score cpu and memory only
    assert binpack_score({GPU: G}, alloc, free, BinpackWeights()) == 0


def test_the_greedys_fast_oracle_checks_agree_with_the_reasons() -> None:
    """The greedy asks the oracle per region (``Predicates.mask``, ``reasons``) and without building the
    reason (``Capacity.fits``); what it concludes, and the reasons it prints when nothing fits, must be
    the per-node ``reason`` and ``fit_reason``. Nodes with every predicate and room case, pods of three
    signatures, the room changing as pods are added."""
    nodes = [node("a", 8, unschedulable=True, labels={"pool": "x"}), node("b", 8, labels={"pool": "x"}),
             node("c", 8, taints=[{"key": "gpu", "value": "", "effect": "NoSchedule"}]), node("d", 2, pods="1"),
             node("e", 4, pods=None), pod("busy", "d", 1, group=None)]
    specs = [{}, {"nodeSelector": {"pool": "x"}}, {"tolerations": [{"key": "gpu", "operator": "Exists"}]}]
    jobs = [vcjob(f"j{i}", tasks=[job_task("w", 6, 2, template_spec=spec)]) for i, spec in enumerate(specs)]
    s, vcjobs = snap_jobs(*nodes, *jobs)
    ctx = Context.build(s, vcjobs, BinpackWeights())
    names = sorted(s.nodes)
    cap = ctx.capacity.copy()
    for job in ctx.jobs:
        for p in ctx.pods[job.key]["w"]:
            mask = ctx.predicates.mask(p, names)
            assert list(mask) == [ctx.predicates.reason(p, n) is None for n in names]
            assert ctx.predicates.reasons(p, names) == [ctx.predicates.reason(p, n) for n in names]
            assert [cap.fits(p, n) for n in names] == [cap.fit_reason(p, n) is None for n in names]
            fitting = [n for n, ok in zip(names, mask, strict=True) if ok and cap.fits(p, n)]
            if fitting:
                cap.add(p, fitting[0])
    assert ctx.capacity.free != cap.free  # a copy: the context's snapshot room is unchanged
    assert ctx.capacity.free == ctx.free and ctx.free["d"]["pods"] == 0


def test_greedy_node_choice_follows_the_weights() -> None:
    # a: 6 of 8 GPUs used, cpu idle; b: GPUs idle, 60 of 64 cpu used.
    objs = [node("a", 8, cpu="64", memory="64Gi"), node("b", 8, cpu="64", memory="64Gi"),
            pod("pa", "a", 6, cpu="0", memory="0", group=None), pod("pb", "b", 0, cpu="60", memory="0", group=None),
            vcjob("j", tasks=[job_task("w", 1, 1, cpu="2", memory="1Gi")])]
    default = place("greedy", *objs).job("default/j")
    assert nodes_of(default) == ["b"]  # Volcano's defaults score cpu and memory only: b is fuller
    gpu_first = place("greedy", *objs, weights=BinpackWeights(resources={GPU: 10})).job("default/j")
    assert nodes_of(gpu_first) == ["a"]  # (10×7/8 + 2/64 + 1/64)/12 > (10×1/8 + 62/64 + 1/64)/12


# ---- greedy vs CP-SAT ----------------------------------------------------------------------------

def _trap(kind: str) -> list[dict[str, Any]]:
    # n0, n1 under tier-1 r0; n2 alone under tier-1 r1; both under tier-2 top. The high-priority 4-GPU
    # job goes first and lands on n0 (equal scores, first name); the 2×8-GPU job then cannot use r0.
    objs = [node("n0", 8), node("n1", 8), node("n2", 8), hypernode("r0", 1, ["n0", "n1"]),
            hypernode("r1", 1, ["n2"]), hypernode("top", 2, ["r0", "r1"], "HyperNode"),
            priority_class("high", 1000), priority_class("low", 100),
            vcjob("first", tasks=[job_task("w", 1, 4)], priority_class_name="high")]
    if kind == "fewer":
        topo = {"mode": "hard", "highestTierAllowed": 1}
    else:
        topo = {"mode": "soft"}
    return [*objs, big_job("second", topo=topo, replicas=2, priority_class_name="low")]


def test_greedy_admits_fewer_where_cpsat_admits_both() -> None:
    greedy = place("greedy", *_trap("fewer"))
    exact = place("cpsat", *_trap("fewer"))
    assert [j.admitted for j in greedy.jobs] == [True, False]
    assert [j.admitted for j in exact.jobs] == [True, True]
    assert nodes_of(exact.job("default/first")) == ["n2"] and exact.job("default/second").hyper_node == "r0"
    assert place("auto", *_trap("fewer")).jobs == exact.jobs


def test_greedy_picks_a_worse_tier_where_cpsat_does_not() -> None:
    greedy = place("greedy", *_trap("tier")).job("default/second")
    exact = place("cpsat", *_trap("tier")).job("default/second")
    assert greedy.admitted and greedy.tier == 2 and greedy.hyper_node == "top"
    assert exact.admitted and exact.tier == 1 and exact.hyper_node == "r0"


def _random_instance(seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    objs: list[dict[str, Any]] = [node(f"n{i}", 8) for i in range(6)]
    objs += [hypernode("r0", 1, ["n0", "n1"]), hypernode("r1", 1, ["n2", "n3"]), hypernode("r2", 1, ["n4", "n5"]),
             hypernode("top", 2, ["r0", "r1", "r2"], "HyperNode")]
    objs += [priority_class(f"p{v}", v) for v in (0, 100, 500)]
    for i in range(rng.randint(0, 3)):
        objs.append(pod(f"busy{i}", f"n{rng.randrange(6)}", rng.choice([2, 4, 6]), group=None))
    for j in range(rng.randint(3, 5)):
        topo = rng.choice([None, {"mode": "soft"}, {"mode": "hard", "highestTierAllowed": 1},
                           {"mode": "hard", "highestTierAllowed": 2}])
        reps = rng.randint(1, 3)
        objs.append(vcjob(f"j{j}", tasks=[job_task("w", reps, rng.choice([2, 4, 8]))], network_topology=topo,
                          priority_class_name=rng.choice(["p0", "p100", "p500"]),
                          min_available=rng.randint(1, reps)))
    return objs


@pytest.mark.parametrize("seed", range(8))
def test_cpsat_is_never_worse_than_the_greedy(seed: int) -> None:
    s, jobs = snap_jobs(*_random_instance(seed))
    ctx = Context.build(s, jobs, BinpackWeights())
    greedy = plan_placement(s, jobs, "greedy", OPTS)
    exact = plan_placement(s, jobs, "cpsat", OPTS)
    g, e = plan_key(ctx, greedy), plan_key(ctx, exact)
    assert exact.solver.status == "OPTIMAL"
    assert e.neg_admitted <= g.neg_admitted  # never fewer priority-weighted admissions
    if e.neg_admitted == g.neg_admitted:  # the greedy's weight: never more victim cost, never a higher tier
        assert e.victim_cost <= g.victim_cost and e.tiers <= g.tiers
    assert e <= g


def test_greedy_plan_is_a_solution_of_the_exact_model() -> None:
    from tests.placement.test_placement_family import solve_fixed_to

    s, jobs = snap_jobs(*_random_instance(3))
    ctx = Context.build(s, jobs, BinpackWeights())
    solve_fixed_to(ctx, greedy_place(ctx))


# ---- validator -----------------------------------------------------------------------------------

def test_validator_catches_broken_plans() -> None:
    s, jobs = snap_jobs(node("a", 8), queue("q", capability={GPU: 4}),
                        vcjob("j", "q", tasks=[job_task("w", 2, 4)]))

    def plan(*bs: tuple[str, int, str], admitted: bool = True) -> list[str]:
        jp = JobPlacement(namespace="default", name="j", queue="q", admitted=admitted, reason="r",
                          bindings=tuple(Binding(task=t, index=i, node=n) for t, i, n in bs))
        return placement_violations(s, jobs, PlacementPlan(jobs=(jp,), solver=SolverRecord(name="h", status="H")))

    assert any("gang is not ready" in v for v in plan(("w", 0, "a")))
    assert any("queue q" in v and "realCapability" in v for v in plan(("w", 0, "a"), ("w", 1, "a")))
    assert any("no such task replica" in v for v in plan(("w", 0, "a"), ("w", 7, "a")))
    assert any("bound twice" in v for v in plan(("w", 0, "a"), ("w", 0, "a")))
    assert any("not admitted but has bindings" in v for v in plan(("w", 0, "a"), admitted=False))
    s2, jobs2 = snap_jobs(node("a", 4), vcjob("j", tasks=[job_task("w", 2, 4)]))
    jp = JobPlacement(namespace="default", name="j", queue="default", admitted=True, reason="r",
                      bindings=(Binding(task="w", index=0, node="a"), Binding(task="w", index=1, node="a")))
    out = placement_violations(s2, jobs2, PlacementPlan(jobs=(jp,), solver=SolverRecord(name="h", status="H")))
    assert any("insufficient nvidia.com/gpu" in v for v in out)


# ---- job order, CLI adapter and output shape ----------------------------------------------------

def test_priority_then_creation_decides_who_gets_the_last_node() -> None:
    objs = [node("a", 8), priority_class("hi", 10), priority_class("dflt", 5)]
    objs[2]["globalDefault"] = True
    old = vcjob("old", tasks=[job_task("w", 1, 8)])
    old["metadata"]["creationTimestamp"] = "2024-01-01T00:00:00Z"
    new = vcjob("new", tasks=[job_task("w", 1, 8)], priority_class_name="hi")
    plan = place("greedy", *objs, old, new)
    assert [j.name for j in plan.jobs] == ["new", "old"] and plan.job("default/new").admitted
    plan = place("greedy", *objs[:1], old, vcjob("newer", tasks=[job_task("w", 1, 8)]))
    assert plan.job("default/old").admitted and not plan.job("default/newer").admitted


def _cli(*argv: str) -> str:
    p = argparse.ArgumentParser()
    place_cli.add_arguments(p)
    args = p.parse_args(list(argv))
    return place_cli.run(args, load_files(args.snapshots))


DEMO = str(ROOT_DIR / "instances" / "place-demo.yaml")
DEMO_JOB = str(ROOT_DIR / "instances" / "place-demo-job.yaml")


def test_json_and_yaml_have_the_issue_shape() -> None:
    doc = json.loads(_cli(DEMO, "--job", DEMO_JOB, "-o", "json", "--solver", "greedy"))
    assert set(doc) == {"jobs", "solver"}
    assert doc["solver"]["name"] == "greedy" and "wallSeconds" not in doc["solver"]
    for j in doc["jobs"]:
        assert list(j) == ["namespace", "name", "queue", "admitted", "reason", "hyperNode", "tier", "bindings",
                           "victims"]
        assert j["victims"] == [] and all(list(b) == ["task", "index", "node"] for b in j["bindings"])
    by = {j["name"]: j for j in doc["jobs"]}
    assert (by["large-train"]["hyperNode"], by["large-train"]["tier"]) == ("s4", 2)
    assert [b["node"] for b in by["large-train"]["bindings"]] == ["n0", "n1", "n2", "n3"]
    assert by["debug"]["hyperNode"] is None and by["debug"]["tier"] is None
    assert yaml.safe_load(_cli(DEMO, "--job", DEMO_JOB, "--solver", "greedy")) == doc
    table = _cli(DEMO, "--job", DEMO_JOB, "-o", "table", "--solver", "greedy")
    assert "large-train-worker-3" in table and "3 of 3 jobs admitted" in table


def test_cli_reads_pending_snapshot_jobs_and_needs_some(tmp_path: Path) -> None:
    snap_file = tmp_path / "s.yaml"
    pending = vcjob("p", tasks=[job_task("w", 1, 1)])
    running = vcjob("r", tasks=[job_task("w", 1, 1)])
    running["status"] = {"state": {"phase": "Running"}}
    snap_file.write_text(yaml.safe_dump_all([node("a"), pending, running]))
    doc = json.loads(_cli(str(snap_file), "-o", "json", "--solver", "greedy"))
    # r is Running but none of its replicas runs: the planner's rule (solvers.placement.jobs.jobs_to_place, which
    # `optplan place` has always used) places its replica too
    assert [j["name"] for j in doc["jobs"]] == ["p", "r"]
    empty = tmp_path / "e.yaml"
    empty.write_text(yaml.safe_dump(node("a")))
    with pytest.raises(InputError):
        _cli(str(empty))


def test_binpack_flag_parses_volcano_arguments() -> None:
    w = place_cli.parse_binpack("weight=10,cpu=5,memory=2,nvidia.com/gpu=10")
    assert w == BinpackWeights(weight=10, cpu=5, memory=2, resources={GPU: 10})
    with pytest.raises(argparse.ArgumentTypeError):
        place_cli.parse_binpack("cpu=-1")
