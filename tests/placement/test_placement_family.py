"""Greedy against optimal placement on generated families (queues, PriorityClasses, HyperNode racks and
spines, pending VCJobs): both plans validate; the optimal admits at least the greedy's priority-weighted
jobs, and when it admits the same weight it is no worse than the greedy on victim cost and on total tier,
both (the exact model keeps to the plans that dominate the greedy's when admissions tie).

The exact objective alone (admissions, then victim cost, then tiers) does not give that: on seeds 53, 72
and 124 least cost chose a higher tier than the greedy's at the same admissions, and so does the
hand-built case below; ``test_least_cost_alone_uses_a_higher_tier_than_the_greedy`` checks that these
cases still exercise the conflict. The exact model chooses victims jointly with the placements of all
jobs, and the greedy's plan with its victims is one of its solutions (checked here on every seed): seed
12, where the exact placement used to admit fewer jobs than the greedy because victims came after it,
now admits more. Hand-built cases where the greedy picks a worse tier or over-evicts live in
``test_placement`` and ``test_victims``. The family also found a validator bug (jobs admitted by the
victim pass into room freed by earlier evictions were checked too early); seeds 3 and 28 and the
hand-built case at the end guard it."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pytest
from ortools.sat.python import cp_model

from optplan.adapters.generate import GenConfig, generate
from optplan.adapters.kubefile import load_objects
from optplan.models.placement import BinpackWeights, PlacementPlan
from optplan.models.queues import QueueTree
from optplan.models.snapshot import Snapshot
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.placement import cpsat as placement_cpsat
from optplan.solvers.placement.context import Context
from optplan.solvers.placement.cycles import greedy_cycles
from optplan.solvers.placement.jobs import job_priority
from optplan.solvers.placement.model import admission_weight, build_data
from optplan.solvers.placement.place import plan_placement
from optplan.solvers.placement.validate import placement_violations
from optplan.solvers.placement.victims import Catalogue
from tests.builders import GPU, hypernode, job_task, node, queue, vcjob
from tests.placement.test_victims import CLASSES, running

OPTS = PlanOptions(time_limit=10, workers=1, seed=0, deterministic=True)  # same plan under any load
NOW = "2025-06-01T00:00:00Z"

SEEDS = [0, 3, 6, 9, 11, 12, 16, 25, 27, 28, 53, 72, 124]
CONFLICT_SEEDS = [53]  # 28 no longer conflicts: the greedy's cycles go on where a job lands away from its
# earlier victims (a later cycle's allocate gives their room in job order), and a topology job's reclaim walks
# every node. Earlier: preempt before reclaim for every job (Volcano's action order): 7 no longer conflicts
# (its greedy admits less than least cost alone). Earlier: the reclaim rules changed (53, 72, 124 no longer
# conflicted then); topology jobs no longer preempt (Volcano v1.15): 25 no longer conflicts; under the plugin
# tiers the exact model admits more than the greedy on 11 (2305 > 1203): no tie to restrict there
"""Least victim cost alone uses a higher tier than the greedy at the same admissions."""


def family(seed: int) -> GenConfig:
    """16, 20 or 24 nodes of 8 cards in racks of 4, two racks per spine, four team queues, priorities and
    five pending jobs; busy enough (80–96% of the cards) that some jobs need victims."""
    return GenConfig(nodes=16 + 4 * (seed % 3), seed=seed, pools=1, rack_size=4, racks_per_spine=2,
                     topology_share=0.5, queues=4, priority_classes=True, pending_jobs=5,
                     occupancy=0.8 + 0.04 * (seed % 5), daemonset_pods=False)


@dataclass(frozen=True)
class Outcome:
    admitted: frozenset[str]
    weight: int
    tiers: int
    victim_cost: int


def outcome(snap: Snapshot, plan: PlacementPlan) -> Outcome:
    cat = Catalogue.build(snap, datetime.fromisoformat(NOW), set(QueueTree(snap.queues).queues))
    admitted = frozenset(jp.key for jp in plan.jobs if jp.admitted)
    return Outcome(admitted=admitted,
                   weight=sum(admission_weight(job_priority(snap.jobs[k], snap)) for k in admitted),
                   tiers=sum(jp.tier or 0 for jp in plan.jobs if jp.admitted),
                   victim_cost=sum(cat.candidates[f"{v.namespace}/{v.name}"].cost
                                   for jp in plan.jobs for v in jp.victims))


def never_worse(greedy: Outcome, exact: Outcome) -> None:
    """Never less weight; at the greedy's weight (the same jobs, or others worth as much), never more
    victim cost and never a higher total tier."""
    assert exact.weight >= greedy.weight, (greedy, exact)
    if exact.weight == greedy.weight:
        assert exact.victim_cost <= greedy.victim_cost, (greedy, exact)
        assert exact.tiers <= greedy.tiers, (greedy, exact)


def least_cost_alone(snap: Snapshot) -> tuple[int, int, int]:
    """The exact order without the greedy's reference: the most weight, the least victim cost at that
    weight, the least tier sum at both."""
    ctx = Context.build(snap, list(snap.jobs.values()), BinpackWeights(), datetime.fromisoformat(NOW))
    data = build_data(ctx)
    m, _v, objs = placement_cpsat.build(data)
    out = []
    for name, sense in (("admitted", 1), ("victims", -1), ("tiers", -1)):
        m.clear_objective()
        if sense > 0:
            m.maximize(objs[name])
        else:
            m.minimize(objs[name])
        solver = cp_model.CpSolver()
        solver.parameters.num_workers = 1
        solver.parameters.presolve_inclusion_work_limit = 0  # google/or-tools#5293, as placement_cpsat
        assert solver.solve(m) == cp_model.OPTIMAL
        out.append(round(solver.objective_value))
        m.add(objs[name] == out[-1])
    return out[0], out[1], out[2]


def solve_fixed_to(ctx: Context, plan: PlacementPlan) -> tuple[cp_model.CpSolver, Any]:
    """The exact model with every variable fixed to ``plan``: it must accept the plan."""
    data = build_data(ctx)
    m, v, _objs = placement_cpsat.build(data)
    placement_cpsat.add_hint(m, data, v, plan)
    solver = cp_model.CpSolver()
    solver.parameters.fix_variables_to_their_hinted_value = True
    solver.parameters.num_workers = 1
    assert solver.solve(m) in (cp_model.OPTIMAL, cp_model.FEASIBLE)
    return solver, v


@pytest.mark.parametrize("solver", ["cpsat", "auto"])
@pytest.mark.parametrize("seed", SEEDS)
def test_optimal_is_never_worse_than_the_greedy_on_generated_families(seed: int, solver: str) -> None:
    snap = load_objects(generate(family(seed))).snapshot
    jobs = list(snap.jobs.values())
    assert len(jobs) == 5
    plans = {s: plan_placement(snap, jobs, s, OPTS, now=NOW) for s in ("greedy", solver)}
    for plan in plans.values():
        assert placement_violations(snap, jobs, plan) == []
    # on 3 and 6 the greedy's victims include some beyond the model's static tier bounds (a gang's slack used
    # up by earlier victims: Volcano's second tier then): the model holds its plan as the anchor, OPTIMAL
    assert plans[solver].solver.status == "OPTIMAL"
    never_worse(outcome(snap, plans["greedy"]), outcome(snap, plans[solver]))


@pytest.mark.parametrize("seed", CONFLICT_SEEDS)
def test_least_cost_alone_uses_a_higher_tier_than_the_greedy(seed: int) -> None:
    """The seeds that exercise the restriction: at the greedy's admissions, least cost alone evicts less
    at a higher tier than the greedy's; the answer is no worse than the greedy on either."""
    snap = load_objects(generate(family(seed))).snapshot
    jobs = list(snap.jobs.values())
    greedy, exact = (outcome(snap, plan_placement(snap, jobs, s, OPTS, now=NOW)) for s in ("greedy", "cpsat"))
    weight, cost, tiers = least_cost_alone(snap)
    assert weight == greedy.weight and cost < greedy.victim_cost and tiers > greedy.tiers
    assert exact.admitted == greedy.admitted
    assert exact.victim_cost <= greedy.victim_cost and exact.tiers <= greedy.tiers


def tier_or_cost_case() -> list[dict[str, Any]]:
    """Racks ra = {a1, a2} and rb = {b1, b2} (tier 1) under spine s (tier 2), every node full with one
    8-GPU pod of its own PodGroup in queue o (deserved 0): a1 and b1 spot (cheapest), a2 normal and
    running for a day at ``NOW``, b2 normal and running for an hour. ``train`` (large, 2 × 8 GPUs, hard,
    tier ≤ 2, queue q deserved 16) must reclaim two pods (a job with a networkTopology does not preempt).
    The greedy takes the first rack, ra: a1 + a2. Least cost alone takes a1 + b1 across the spine, tier
    2. Only rb (b1 + b2) is no worse than the greedy on both."""
    def full(name: str, node_name: str, pc: str, started: str) -> list[dict[str, Any]]:
        return running(name, "o", [(node_name, 8)], pc, started=started)

    return [*CLASSES, *(node(n, 8) for n in ("a1", "a2", "b1", "b2")), queue("q", deserved={GPU: 16}),
            queue("o", deserved={GPU: 0}),
            hypernode("ra", 1, ["a1", "a2"]), hypernode("rb", 1, ["b1", "b2"]),
            hypernode("s", 2, ["ra", "rb"], "HyperNode"),
            *full("va1", "a1", "spot-job", "2025-05-31T23:00:00Z"),
            *full("vb1", "b1", "spot-job", "2025-05-31T23:00:00Z"),
            *full("va2", "a2", "normal-job", "2025-05-31T00:00:00Z"),
            *full("vb2", "b2", "normal-job", "2025-05-31T23:00:00Z"),
            vcjob("train", "q", [job_task("w", 2, 8)], priority_class_name="large-job",
                  network_topology={"mode": "hard", "highestTierAllowed": 2})]


@pytest.mark.parametrize("solver", ["cpsat", "auto"])
def test_the_answer_dominates_the_greedy_where_least_cost_alone_takes_a_higher_tier(solver: str) -> None:
    snap = load_objects(tier_or_cost_case()).snapshot
    jobs = list(snap.jobs.values())
    plans = {s: plan_placement(snap, jobs, s, OPTS, now=NOW) for s in ("greedy", solver)}
    g, e = (plans[s].job("default/train") for s in ("greedy", solver))
    assert (g.hyper_node, sorted(v.name for v in g.victims)) == ("ra", ["va1-0", "va2-0"])
    greedy = outcome(snap, plans["greedy"])
    _weight, cost, tiers = least_cost_alone(snap)
    assert cost < greedy.victim_cost and tiers == 2  # a1 + b1 across the spine
    assert (e.hyper_node, e.tier, sorted(v.name for v in e.victims)) == ("rb", 1, ["vb1-0", "vb2-0"])
    exact = outcome(snap, plans[solver])
    assert exact.victim_cost < greedy.victim_cost and exact.tiers == greedy.tiers == 1
    assert plans[solver].solver.status == "OPTIMAL"


@pytest.mark.parametrize("seed", [0, 3])
def test_optimal_is_never_worse_with_ten_pending_jobs(seed: int) -> None:
    """Ten jobs compete for the same victims. On these seeds OR-Tools 9.15 certified a wrong optimum
    (1 job admitted, 134 < the greedy's 1135) with the joint model's presolve settings until its
    inclusion presolve was switched off (google/or-tools#5293)."""
    snap = load_objects(generate(dataclasses.replace(family(seed), pending_jobs=10))).snapshot
    jobs = list(snap.jobs.values())
    plans = {s: plan_placement(snap, jobs, s, OPTS, now=NOW) for s in ("greedy", "cpsat")}
    greedy, exact = outcome(snap, plans["greedy"]), outcome(snap, plans["cpsat"])
    assert exact.weight >= greedy.weight, (greedy, exact)
    never_worse(greedy, exact)  # the exact model's reference is the greedy's plan, its cycles


def test_the_joint_model_and_the_greedy_admit_every_job_on_seed_12() -> None:
    """The seed where the exact placement without victims admitted fewer (1203 < 1405): jointly with the
    victims it admits every job. Volcano's reclaim places a pod only on a node with a reclaimee
    (``reclaimForTask``), so team-d's job reclaims for itself, anywhere (no HyperNode step), in cycle 1; the
    next cycle's allocate, with every victim of cycle 1 gone (team-c's too), finds spine-000 for it, partly in
    the room team-c's victims freed: the greedy's cycles admit every job as well (they stopped at 1304 while
    the validator freed a later cycle's victims job by job, so team-d's turn came before team-c's victims)."""
    snap = load_objects(generate(family(12))).snapshot
    jobs = list(snap.jobs.values())
    greedy, exact = (outcome(snap, plan_placement(snap, jobs, s, OPTS, now=NOW)) for s in ("greedy", "cpsat"))
    assert (greedy.weight, exact.weight) == (1405, 1405)
    assert exact.admitted == greedy.admitted == frozenset(snap.jobs)


SOLUTION_SEEDS = [3, 5, 6, 11, 16, 21, 29]
"""Seeds of ``slack_family`` whose greedy plans (its cycles) evict, each victim one the static model holds."""
ANCHOR_SEEDS = {8: "order", 10: "step", 14: "order", 19: "order", 23: "order", 24: "order",
                26: "order", 30: "step", 34: "order", 39: "order", 44: "step",
                7: "order", 9: "order", 13: "order", 18: "order", 20: "order", 25: "order", 28: "order",
                32: "order", 33: "order", 42: "order", 43: "order", 12: "order"}
"""Seeds of ``slack_family`` whose greedy plans (its cycles, as ``auto`` hints) the static model does not hold:
victims beyond its static tier bounds (drf's or the capacity plugin's; a gang whose slack earlier victims used
up; a pod the static pairs never offer), or a job placed into room a later job's victims freed (Volcano's
action order, a later cycle): the model holds them as its anchor, replayed
in job order ("order") or by the plan's steps ("step"). The second row (7 to 43) left even the anchored model
until its replay freed the victims an earlier cycle evicted away from where a later cycle placed their job
before that later cycle's jobs, as the validator does (``model.Anchor.flushed``): a later cycle's allocate gives
every earlier victim's room in job order, to any job. Every seed of 0-44 now holds. Seed 12 joined (order)
when the greedy's reclaim stopped placing a job in room other jobs' victims freed: its team-d job keeps its
victims, not admitted, which only the anchor holds. Seed 8 held by step until
preempt's pass within a job followed its pass between jobs (the job's other pods pipelined where they fit):
held in job order since; seed 39 likewise since the queue order compares parent queues by their shares as the
session began (``QueueState.session``), which changed its greedy plan."""


def slack_family(seed: int) -> GenConfig:
    """``family`` with running gangs at half their size for minMember: most victims are the first tier's
    (a gang above minMember), where the exact model holds every plan Volcano's tiers allow."""
    return dataclasses.replace(family(seed), min_member_ratio=0.5)


@pytest.mark.parametrize("seed", SOLUTION_SEEDS)
def test_the_greedys_plan_with_its_victims_is_a_solution_of_the_joint_model(seed: int) -> None:
    """What makes the optimum never worse: Volcano's plan (allocate, then preempt/reclaim job by job)
    satisfies every constraint of the exact model when its variables are fixed to it — here without the
    anchor: its victims are ones the static rules hold (the first tier, and the second within its static
    bounds; the others hold as the anchor, ``ANCHOR_SEEDS``). Changed with the tiers as the only rules: on
    ``family`` most victims are the second tier's (gangs at minMember), ``slack_family`` keeps what is tested."""
    snap = load_objects(generate(slack_family(seed))).snapshot
    ctx = Context.build(snap, list(snap.jobs.values()), BinpackWeights(), datetime.fromisoformat(NOW))
    greedy = greedy_cycles(ctx)
    assert any(jp.victims for jp in greedy.jobs)
    solver, v = solve_fixed_to(ctx, greedy)
    assert sum(y for y in (solver.value(x) for x in v.ev.take.values())) == sum(len(j.victims) for j in greedy.jobs)


@pytest.mark.parametrize("seed", sorted(ANCHOR_SEEDS))
def test_the_model_holds_the_greedys_plan_beyond_its_static_bounds_as_its_anchor(seed: int) -> None:
    snap = load_objects(generate(slack_family(seed))).snapshot
    ctx = Context.build(snap, list(snap.jobs.values()), BinpackWeights(), datetime.fromisoformat(NOW))
    greedy = greedy_cycles(ctx)
    data = build_data(ctx)
    m, v, objs = placement_cpsat.build(data)
    assert not placement_cpsat.holds(m, data, v, greedy)
    data, m, v, _objs = placement_cpsat.anchored(ctx, greedy, (data, m, v, objs))
    anchor = data.victims.anchor
    assert anchor is not None and anchor.by_step == (ANCHOR_SEEDS[seed] == "step")
    assert placement_cpsat.holds(m, data, v, greedy)


@pytest.mark.parametrize("seed", [8, 10, 12])
def test_the_exact_plan_is_never_worse_where_the_greedys_plan_is_beyond_the_static_bounds(seed: int) -> None:
    """Hinted with a plan it holds (as its anchor), the exact model never ends below it, and here finds better
    plans inside the static bounds (less victim cost)."""
    snap = load_objects(generate(slack_family(seed))).snapshot
    jobs = list(snap.jobs.values())
    plans = {s: plan_placement(snap, jobs, s, OPTS, now=NOW) for s in ("greedy", "cpsat")}
    for plan in plans.values():
        assert placement_violations(snap, jobs, plan) == []
    never_worse(outcome(snap, plans["greedy"]), outcome(snap, plans["cpsat"]))
    assert plans["cpsat"].solver.status == "OPTIMAL"


def test_the_family_exercises_victims_and_topology() -> None:
    """The passing seeds are not trivial: some plans evict, some admit into a HyperNode."""
    evicting = tiered = 0
    for seed in (0, 6, 9, 11, 16, 25, 27):
        snap = load_objects(generate(family(seed))).snapshot
        plan = plan_placement(snap, list(snap.jobs.values()), "greedy", OPTS, now=NOW)
        evicting += any(jp.victims for jp in plan.jobs)
        tiered += any(jp.admitted and jp.hyper_node is not None for jp in plan.jobs)
    assert evicting >= 5 and tiered >= 3


def zero_victim_case() -> list[dict[str, Any]]:
    """Two full 8-GPU nodes in queue q; ``first`` (critical) evicts a whole node for 4 GPUs, then
    ``second`` (large) fits in the other 4 GPUs freed on that node without evicting anything. The running
    jobs have minAvailable 0: Volcano's gang plugin offers their pods (at minMember it would not, and drf
    never offers a job's last pod)."""
    return [*CLASSES, node("a", 8), node("b", 8), queue("q"),
            *running("v", "q", [("a", 8)], "normal-job", min_member=0),
            *running("w", "q", [("b", 8)], "spot-job", min_member=0),
            vcjob("first", "q", [job_task("w", 1, 4)], priority_class_name="critical-job"),
            vcjob("second", "q", [job_task("w", 1, 4)], priority_class_name="large-job")]


@pytest.mark.parametrize("solver", ["greedy", "cpsat"])
def test_a_job_placed_into_room_freed_by_earlier_victims_validates(solver: str) -> None:
    snap = load_objects(zero_victim_case()).snapshot
    plan = plan_placement(snap, list(snap.jobs.values()), solver, OPTS, now="2025-06-01T12:00:00Z")
    assert plan.job("default/second").admitted and plan.job("default/second").victims == ()
