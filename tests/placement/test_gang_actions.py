"""gangpreempt and gangreclaim in placement (``gangevict``, ``gangrules``): victims in bundles when the scheduler
configuration lists the gang-aware actions; the validator's bundle rule; the exact model declines only a
gangreclaim the capacity plugin decides (``tests/placement/test_gang_exact.py``: the exact model)."""

from __future__ import annotations

from typing import Any

import pytest

from optplan.adapters.schedconf import parse_scheduler_conf
from optplan.errors import InputError, PlanInvalidError
from optplan.models.placement import JobPlacement, PlacementPlan, Victim
from optplan.models.schedconf import SchedulerConf
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.placement.gangevict import victim_actions
from optplan.solvers.placement.jobs import jobs_to_place
from optplan.solvers.placement.place import plan_placement
from optplan.solvers.placement.validate import placement_violations
from tests.builders import GPU, hypernode, job_task, load, node, queue, vcjob
from tests.placement.test_victims import CLASSES, NOW, pending, running

OPTS = PlanOptions(time_limit=5, workers=1, seed=0)
SEED_TIERS = [{"plugins": [{"name": "priority"}, {"name": "gang"}, {"name": "conformance"}]},
              {"plugins": [{"name": "drf"}, {"name": "predicates"}, {"name": "capacity", "enableHierarchy": True},
                           {"name": "nodeorder"}, {"name": "binpack"}]}]


def conf(actions: str = "enqueue, allocate, gangpreempt, gangreclaim, backfill", tiers: Any = None,
         **args: Any) -> SchedulerConf:
    doc: dict[str, Any] = {"actions": actions, "tiers": SEED_TIERS if tiers is None else tiers}
    if args:
        doc["configurations"] = [{"name": a, "arguments": v} for a, v in args.items()]
    return parse_scheduler_conf(doc, "conf.yaml")


def place(objs: list[dict[str, Any]], c: SchedulerConf, solver: str = "greedy") -> PlacementPlan:
    s = load(*objs).snapshot
    return plan_placement(s, list(s.jobs.values()), solver, OPTS, now=NOW, scheduler=c)


def names(jp: JobPlacement) -> list[str]:
    return sorted(v.name for v in jp.victims)


# ---- the configuration -------------------------------------------------------------------------

def test_gang_actions_are_no_longer_warned_about_and_their_arguments_are_read() -> None:
    c = conf(gangpreempt={"allowWholeBundle": "false", "maxDomains": 0},
             gangreclaim={"allowWholeBundle": 3, "maxDomains": 2}, allocate={"predicateErrorCacheEnable": True})
    assert not any("gangpreempt" in w and "not modelled" in w and "configurations" not in w for w in c.warnings)
    assert c.gang("gangpreempt").allow_whole is False and c.gang("gangpreempt").max_domains == 8
    assert c.gang("gangreclaim").allow_whole is True and c.gang("gangreclaim").max_domains == 2
    assert any("allowWholeBundle: 3 is not a boolean" in w for w in c.warnings)
    assert any("allocate's arguments predicateErrorCacheEnable are not modelled" in w for w in c.warnings)
    assert c.tiers[0] == ("priority", "gang", "conformance")


@pytest.mark.parametrize(("actions", "order"), [
    (("enqueue", "allocate", "preempt", "reclaim", "backfill"), ["preempt", "reclaim"]),
    (("allocate", "gangpreempt", "gangreclaim"), ["gangpreempt", "gangreclaim", "preempt", "reclaim"]),
    (("allocate", "reclaim", "gangpreempt", "preempt"), ["preempt", "gangpreempt", "reclaim"]),
])
def test_victim_actions_follow_the_configuration(actions: tuple[str, ...], order: list[str]) -> None:
    assert victim_actions(actions) == order


# ---- gangpreempt: the bundle rule decides which pods go ----------------------------------------------

def three(min_member: int) -> list[dict[str, Any]]:
    return [*CLASSES, *(node(n, 8) for n in "abc"), queue("q"),
            *running("v", "q", [("a", 8), ("b", 8), ("c", 8)], min_member=min_member)]


# (victim minMember, replicas of the preemptor, allowWholeBundle, victims expected; None: not admitted)
PREEMPT = [
    (2, 1, True, ["v-0"]),  # the safe bundle (one pod above minMember) covers the need
    (2, 2, True, ["v-0", "v-1", "v-2"]),  # safe, then the whole bundle: the gang goes
    (2, 2, False, None),  # the whole bundle may not be taken
    (3, 1, True, ["v-0", "v-1", "v-2"]),  # no surplus: only the whole bundle
    (3, 1, False, None),
    (1, 2, False, ["v-0", "v-1"]),  # two pods of surplus: the safe bundle is v-0 and v-1
]


@pytest.mark.parametrize(("min_member", "replicas", "whole", "expected"), PREEMPT)
def test_gangpreempt_takes_bundles(min_member: int, replicas: int, whole: bool, expected: list[str] | None) -> None:
    c = conf(gangpreempt={"allowWholeBundle": whole})
    jp = place([*three(min_member), pending("big", "q", replicas, 8)], c).job("default/big")
    if expected is None:
        assert not jp.admitted and "gangpreempt:" in jp.reason
    else:
        assert jp.admitted and names(jp) == expected
        assert {v.reason for v in jp.victims} == {"gangpreempt"}


def test_a_safe_bundle_goes_whole_where_preempt_takes_just_enough() -> None:
    objs = [*CLASSES, node("a", 8), queue("q"), *running("v", "q", [("a", 4), ("a", 4)], min_member=0),
            pending("small", "q", 1, 4)]
    assert names(place(objs, conf()).job("default/small")) == ["v-0", "v-1"]
    legacy = place(objs, conf("enqueue, allocate, preempt, reclaim, backfill")).job("default/small")
    assert len(legacy.victims) == 1


def test_gangpreempt_needs_room_for_every_pending_pod() -> None:
    """allocate would admit 1 of 2 (minAvailable 1); the gang actions place every pending pod or none."""
    objs = [*CLASSES, node("a", 8), node("b", 8), queue("q"), *running("v", "q", [("a", 8)], min_member=0),
            *running("hi", "q", [("b", 8)], "critical-job"), pending("two", "q", 2, 8)]
    objs[-1]["spec"]["minAvailable"] = 1
    jp = place(objs, conf()).job("default/two")
    assert not jp.admitted
    legacy = place(objs, conf("enqueue, allocate, preempt, reclaim, backfill")).job("default/two")
    assert legacy.admitted and names(legacy) == ["v-0"]


def test_gangpreempt_takes_lower_priority_jobs_first() -> None:
    objs = [*CLASSES, *(node(n, 8) for n in "ab"), queue("q"),
            *running("normal", "q", [("a", 8)], "normal-job"), *running("spot", "q", [("b", 8)], "spot-job"),
            pending("big", "q", 1, 8, pc="critical-job")]
    assert names(place(objs, conf()).job("default/big")) == ["spot-0"]


# ---- gangreclaim: queues, then the best return within a queue ---------------------------------------------

def reclaim_case(b_deserved: int) -> list[dict[str, Any]]:
    """qb runs z (one 8-GPU pod on a) and y (two 8-GPU pods on b and c, minMember 2); qa waits for 8 GPUs.
    z's whole bundle costs 8 GPUs for 8 freed (return 1), y's 16 for 8 (return 1/2)."""
    return [*CLASSES, *(node(n, 8) for n in "abc"), queue("qa", deserved={GPU: 16}),
            queue("qb", deserved={GPU: b_deserved}),
            *running("z", "qb", [("a", 8)]), *running("y", "qb", [("b", 8), ("c", 8)]), pending("w", "qa", 1, 8)]


CAPACITY_FIRST = [{"plugins": [{"name": "capacity", "enableHierarchy": True}, {"name": "gang"}]}]


# (qb's deserved, tiers, victims expected; None: not admitted)
RECLAIM = [
    (8, None, ["z-0"]),  # the best return first
    (24, None, ["z-0"]),  # seed tiers: priority, gang and conformance decide, the capacity plugin is not asked
    (24, CAPACITY_FIRST, None),  # capacity decides: qb is not above its deserved
    (8, CAPACITY_FIRST, ["z-0"]),
]


@pytest.mark.parametrize(("b_deserved", "tiers", "expected"), RECLAIM)
def test_gangreclaim_ranks_bundles_and_asks_the_deciding_tier(b_deserved: int, tiers: Any,
                                                              expected: list[str] | None) -> None:
    jp = place(reclaim_case(b_deserved), conf(tiers=tiers)).job("default/w")
    if expected is None:
        assert not jp.admitted
    else:
        assert jp.admitted and names(jp) == expected and jp.victims[0].reason == "gangreclaim"


# ---- the validator's bundle rule ---------------------------------------------------------------------

def with_victims(plan: PlacementPlan, job: str, victims: list[tuple[str, str]], action: str) -> PlacementPlan:
    jobs = tuple(jp.model_copy(update={"victims": tuple(Victim(namespace="default", name=n, node=nd, reason=action)
                                                          for n, nd in victims)}) if jp.key == job else jp
                 for jp in plan.jobs)
    return plan.model_copy(update={"jobs": jobs})


# (victims written into the plan, allowWholeBundle, a violation expected: its words)
VALIDATE = [
    ([("v-0", "a")], True, None),
    ([("v-1", "b")], True, "whole bundle"),  # a pod of the whole bundle alone
    ([("v-0", "a"), ("v-1", "b"), ("v-2", "c")], True, None),
    ([("v-0", "a"), ("v-1", "b"), ("v-2", "c")], False, "allowWholeBundle is false"),
]


@pytest.mark.parametrize(("victims", "whole", "words"), VALIDATE)
def test_the_validator_checks_the_bundle_rule(victims: list[tuple[str, str]], whole: bool, words: str | None) -> None:
    c = conf(gangpreempt={"allowWholeBundle": whole})
    objs = [*three(2), pending("big", "q", 1, 8)]
    plan = place(objs, conf())
    s = load(*objs).snapshot
    bad = with_victims(plan, "default/big", victims, "gangpreempt")
    out = placement_violations(s, list(s.jobs.values()), bad, now=None, scheduler=c)
    if words is None:
        assert out == []
    else:
        assert any(words in v for v in out), out


def test_the_validator_refuses_a_safe_bundle_cut() -> None:
    objs = [*CLASSES, node("a", 8), queue("q"), *running("v", "q", [("a", 4), ("a", 4)], min_member=0),
            pending("small", "q", 1, 4)]
    plan = place(objs, conf())
    s = load(*objs).snapshot
    cut = with_victims(plan, "default/small", [("v-1", "a")], "gangpreempt")
    out = placement_violations(s, list(s.jobs.values()), cut, scheduler=conf())
    assert any("a bundle goes whole" in v for v in out), out


# ---- the exact model: declines only gangreclaim under a deciding capacity plugin -----------------------------

def test_cpsat_plans_gangpreempt_and_declines_a_capacity_decided_gangreclaim() -> None:
    objs = [*three(2), pending("big", "q", 1, 8)]
    exact = place(objs, conf(), "cpsat")
    assert exact.solver.status == "OPTIMAL" and names(exact.job("default/big")) == ["v-0"]
    with pytest.raises(InputError, match="does not model gangreclaim with the capacity plugin"):
        place(reclaim_case(8), conf(tiers=CAPACITY_FIRST), "cpsat")
    auto = place(reclaim_case(8), conf(tiers=CAPACITY_FIRST), "auto")
    greedy = place(reclaim_case(8), conf(tiers=CAPACITY_FIRST), "greedy")
    assert auto.solver.status == "FALLBACK" and auto.jobs == greedy.jobs


def test_a_plan_with_gang_victims_fails_validation_without_the_action() -> None:
    objs = [*three(2), pending("big", "q", 1, 8)]
    plan = place(objs, conf())
    s = load(*objs).snapshot
    from optplan.solvers.placement.validate import validate_placement
    with pytest.raises(PlanInvalidError, match="an action the scheduler configuration does not run"):
        validate_placement(s, list(s.jobs.values()), plan)


# ---- a hard topology job: domains widest first ------------------------------------------------------------

def fabric_case(tier: int, min_member: int) -> list[dict[str, Any]]:
    """s0 = n0+n1, s1 = n2+n3 (tier 1), s4 = both (tier 2); v runs one 8-GPU pod per node; topo (two 8-GPU pods,
    hard, highestTierAllowed ``tier``) waits."""
    return [*CLASSES, *(node(f"n{i}", 8) for i in range(4)), queue("q"),
            hypernode("s0", 1, ["n0", "n1"]), hypernode("s1", 1, ["n2", "n3"]),
            hypernode("s4", 2, ["s0", "s1"], "HyperNode"),
            *running("v", "q", [(f"n{i}", 8) for i in range(4)], min_member=min_member),
            vcjob("topo", "q", [job_task("w", 2, 8)], priority_class_name="large-job",
                  network_topology={"mode": "hard", "highestTierAllowed": tier})]


# (highestTierAllowed, the victim gang's minMember, the HyperNode expected, victims expected)
FABRIC = [
    (2, 2, "s0", ["v-0", "v-1"]),  # the widest domain first: the safe bundle there covers the need; the next
    # cycle's allocate puts the job in the tier-1 HyperNode the victims freed
    (1, 2, "s0", ["v-0", "v-1"]),
    (2, 4, "s4", ["v-0", "v-1", "v-2", "v-3"]),  # only a whole bundle: every pod of the domain goes
    (1, 4, "s0", ["v-0", "v-1"]),  # the whole bundle is the domain's pods: the gang breaks, two pods go
]


@pytest.mark.parametrize(("tier", "min_member", "hyper", "expected"), FABRIC)
def test_a_hard_topology_job_gangpreempts_in_its_widest_domain_first(tier: int, min_member: int, hyper: str,
                                                                     expected: list[str]) -> None:
    objs = fabric_case(tier, min_member)
    jp = place(objs, conf()).job("default/topo")
    assert jp.admitted and jp.hyper_node == hyper and names(jp) == expected, jp
    legacy = place(objs, conf("enqueue, allocate, preempt, reclaim, backfill")).job("default/topo")
    assert not legacy.admitted and "networkTopology does not preempt" in legacy.reason


def test_the_validator_refuses_a_victim_outside_the_domain() -> None:
    objs = fabric_case(1, 2)
    plan = place(objs, conf())
    s = load(*objs).snapshot
    away = with_victims(plan, "default/topo", [("v-0", "n0"), ("v-2", "n2")], "gangpreempt")
    out = placement_violations(s, list(s.jobs.values()), away, scheduler=conf())
    assert any("v-2 (gangpreempt): on node n2, outside the job's domain" in v for v in out), out


# ---- which job evicts: Volcano's JobStarving, by count ------------------------------------------------------

# gangpreempt and gangreclaim (vc-scheduler v1.15.1) take only a job the session finds starving (``JobStarving``:
# pipelined + ready < minMember, by count; no task's minimum enters), then commit only a pipelined gang. ``g``
# (queue ``mine``, minTaskMember ps 1 and worker 1) runs two workers on n0 and n1; its ps (8 GPUs) waits; n2 is
# full of ``o`` (queue ``other``, above its deserved 0). minMember 2: two running pods make g not starving, though
# short of its ps: neither action takes it. minMember 3: starving, gangreclaim takes o's pod for the ps.
STARVING_GANG = [  # (what, g's minMember, g admitted, its victims)
    ("running pods number minMember, a task short: not starving, nothing evicted", 2, False, []),
    ("starving by count: gangreclaim takes o-0 for the ps", 3, True, ["o-0"]),
]


@pytest.mark.parametrize("solver", ["greedy", "cpsat"])
@pytest.mark.parametrize(("what", "min_member", "admitted", "victims"), STARVING_GANG,
                         ids=[c[0] for c in STARVING_GANG])
def test_the_gang_actions_take_only_a_starving_job(what: str, min_member: int, admitted: bool, victims: list[str],
                                                   solver: str) -> None:
    from tests.placement.test_bare_podgroups import bare, member, nodes
    objs = [*nodes(3), queue("mine", deserved={GPU: 24}), queue("other", deserved={GPU: 0}),
            bare("g", min_member, queue_name="mine", min_task_member={"ps": 1, "worker": 1}),
            member("g-worker-0", "g", 8, on="n0", task="worker"), member("g-worker-1", "g", 8, on="n1", task="worker"),
            member("g-ps-0", "g", 8, task="ps"), bare("o", 1, queue_name="other"), member("o-0", "o", 8, on="n2")]
    s = load(*objs).snapshot
    jobs = jobs_to_place(s)
    plan = plan_placement(s, jobs, solver, OPTS, now=NOW, scheduler=conf())
    assert placement_violations(s, jobs, plan, scheduler=conf()) == []
    jp = plan.job("default/g")
    assert (jp.admitted, names(jp)) == (admitted, victims), jp.reason
