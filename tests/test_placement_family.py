"""Greedy against optimal placement on generated families (queues, PriorityClasses, HyperNode racks and
spines, pending VCJobs): both plans validate; the optimal admits at least the greedy's priority-weighted
jobs, and with the same admitted jobs never uses a higher total tier nor evicts more victim cost.

Hand-built cases where the greedy picks a worse tier or over-evicts live in ``test_placement`` and
``test_victims``; the case marked xfail here is a known limit found by this family (strict, so a fix
turns it into a failure to un-mark). The family also found a validator bug (jobs admitted by the
victim pass into room freed by earlier evictions were checked too early); seeds 3 and 28 and the
hand-built case below guard it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pytest

from optplan.adapters.generate import GenConfig, generate
from optplan.adapters.kubefile import load_objects
from optplan.models.placement import PlacementPlan
from optplan.models.queues import QueueTree
from optplan.models.snapshot import Snapshot
from optplan.solvers.base import PlanOptions
from optplan.solvers.placement import admission_weight, job_priority, placement_violations, plan_placement
from optplan.solvers.victims import Catalogue
from tests.builders import job_task, node, queue, vcjob
from tests.test_victims import CLASSES, running

OPTS = PlanOptions(time_limit=10, workers=1, seed=0)
NOW = "2025-06-01T00:00:00Z"

_ADMITS_FEWER = ("cpsat's allocate admits a high-priority job the greedy admitted only by preempting; the "
                 "victim pass then finds no victims for a normal job the greedy's allocate had admitted "
                 "(victims are not in the exact model): 1203 < 1304 priority-weighted admissions")
SEEDS = [
    0,
    3,
    6, 9, 11,
    pytest.param(12, marks=pytest.mark.xfail(strict=True, raises=AssertionError, reason=_ADMITS_FEWER)),
    16, 25, 27,
    28,
]


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


@pytest.mark.parametrize("seed", SEEDS)
def test_optimal_is_never_worse_than_the_greedy_on_generated_families(seed: int) -> None:
    snap = load_objects(generate(family(seed))).snapshot
    jobs = list(snap.jobs.values())
    assert len(jobs) == 5
    plans = {solver: plan_placement(snap, jobs, solver, OPTS, now=NOW) for solver in ("greedy", "cpsat")}
    for plan in plans.values():
        assert placement_violations(snap, jobs, plan) == []
    greedy, exact = (outcome(snap, plans[s]) for s in ("greedy", "cpsat"))
    assert exact.weight >= greedy.weight, (greedy, exact)
    if exact.admitted == greedy.admitted:
        assert exact.tiers <= greedy.tiers, (greedy, exact)
        assert exact.victim_cost <= greedy.victim_cost, (greedy, exact)


@pytest.mark.parametrize("seed", [0, 3, 6, 9, 11, 12, 16, 25, 27, 28])
def test_auto_is_never_worse_than_the_greedy_on_generated_families(seed: int) -> None:
    """auto compares the greedy's and the exact placement after their victim passes, so it never admits
    fewer priority-weighted jobs than the greedy (seed 12 is where cpsat alone does)."""
    snap = load_objects(generate(family(seed))).snapshot
    jobs = list(snap.jobs.values())
    plans = {solver: plan_placement(snap, jobs, solver, OPTS, now=NOW) for solver in ("greedy", "auto")}
    assert placement_violations(snap, jobs, plans["auto"]) == []
    greedy, auto = (outcome(snap, plans[s]) for s in ("greedy", "auto"))
    assert auto.weight >= greedy.weight, (greedy, auto)
    if auto.admitted == greedy.admitted:
        assert auto.tiers <= greedy.tiers, (greedy, auto)
        assert auto.victim_cost <= greedy.victim_cost, (greedy, auto)


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
    ``second`` (large) fits in the other 4 GPUs freed on that node without evicting anything."""
    return [*CLASSES, node("a", 8), node("b", 8), queue("q"),
            *running("v", "q", [("a", 8)], "normal-job"), *running("w", "q", [("b", 8)], "spot-job"),
            vcjob("first", "q", [job_task("w", 1, 4)], priority_class_name="critical-job"),
            vcjob("second", "q", [job_task("w", 1, 4)], priority_class_name="large-job")]


@pytest.mark.parametrize("solver", ["greedy", "cpsat"])
def test_a_job_placed_into_room_freed_by_earlier_victims_validates(solver: str) -> None:
    snap = load_objects(zero_victim_case()).snapshot
    plan = plan_placement(snap, list(snap.jobs.values()), solver, OPTS, now="2025-06-01T12:00:00Z")
    assert plan.job("default/second").admitted and plan.job("default/second").victims == ()
