"""Victims by Volcano's plugin tiers (``solvers/placement/tiers.py``; ``optplan place --victim-tiers``), as
tables written from vc-scheduler v1.15's rules (framework/session_plugins.go ``Preemptable``/
``Reclaimable``; plugins priority, gang, conformance, drf, capacity; actions preempt and reclaim): the
tier walk, each plugin's answer, and whole plans of the greedy, the exact model and the validator."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from optplan.adapters.kubefile import load_objects
from optplan.models.placement import PlacementPlan
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.placement.place import plan_placement
from optplan.solvers.placement.tiers import (
    PREEMPT_TIERS,
    RECLAIM_TIERS,
    drf_answer,
    gang_answer,
    priority_answer,
    share,
    walk,
)
from optplan.solvers.placement.validate import placement_violations
from optplan.solvers.placement.victims import Candidate, Catalogue
from tests.builders import GPU, job_task, node, pod, podgroup_in, priority_class, queue, vcjob

OPTS = PlanOptions(time_limit=5, workers=1, seed=0)
NOW = "2025-06-01T12:00:00Z"
CLASSES = [priority_class("high", 1000), priority_class("mid", 100), priority_class("low", 10)]


def running(name: str, queue_name: str, placements: list[tuple[str, int]], pc: str, min_member: int,
            started: str = "2025-06-01T10:00:00Z") -> list[dict[str, Any]]:
    pg = podgroup_in(queue_name, name, min_member)
    pg["spec"]["priorityClassName"] = pc
    objs = [pg]
    for i, (n, g) in enumerate(placements):
        p = pod(f"{name}-{i}", n, g, group=name)
        p["status"]["startTime"] = started
        p["spec"]["priorityClassName"] = pc
        objs.append(p)
    return objs


def pending(name: str, queue_name: str, replicas: int, gpu: int, pc: str) -> dict[str, Any]:
    return vcjob(name, queue_name, [job_task("w", replicas, gpu)], priority_class_name=pc)


def catalogue(objs: list[dict[str, Any]]) -> Catalogue:
    snap = load_objects(objs).snapshot
    return Catalogue.build(snap, datetime.fromisoformat(NOW), set(snap.queues) | {"default"})


# ---- the tier walk -------------------------------------------------------------------------------


class Stub:
    def __init__(self, key: str) -> None:
        self.key = key


PODS = [Stub(k) for k in ("a", "b", "c")]


def answer(keys: str) -> Any:
    return lambda pods: [p for p in pods if p.key in keys]


WALK = [  # (tiers, answers by plugin, victims, deciding tier)
    ("the first tier's intersection decides", (("p", "g"), ("d",)), {"p": "ab", "g": "bc", "d": "abc"}, "b", 1),
    ("an empty answer ends the tier: the next decides", (("p", "g"), ("d",)), {"p": "", "g": "abc", "d": "c"}, "c", 2),
    ("an empty answer after a non-empty one ends it too", (("p", "g"), ("d",)), {"p": "ab", "g": "", "d": "c"}, "c", 2),
    ("an empty intersection is unset: the next plugin starts again", (("p", "g", "k"), ("d",)),
     {"p": "a", "g": "b", "k": "abc", "d": ""}, "abc", 1),
    ("an empty intersection as the tier's last: the next tier", (("p", "g"), ("d",)),
     {"p": "a", "g": "b", "d": "c"}, "c", 2),
    ("a plugin without a function abstains", (("p", "x"), ("d",)), {"p": "a", "d": "c"}, "a", 1),
    ("no tier offers any", (("p",), ("d",)), {"p": "", "d": ""}, "", None),
]


@pytest.mark.parametrize(("what", "tiers", "answers", "victims", "tier"), WALK, ids=[w[0] for w in WALK])
def test_the_tier_walk(what: str, tiers: Any, answers: dict[str, str], victims: str, tier: int | None) -> None:
    got, t = walk(tiers, {k: answer(v) for k, v in answers.items()}, PODS)  # type: ignore[arg-type]
    assert ("".join(p.key for p in got), t) == (victims, tier)


def test_the_seed_configurations_tiers() -> None:
    assert PREEMPT_TIERS == (("priority", "gang", "conformance"), ("drf",))
    assert RECLAIM_TIERS == (("gang", "conformance"), ("capacity",))  # priority has no reclaim function


# ---- the plugins' answers ------------------------------------------------------------------------

GANG = [  # (ready now per group, minMember per group, the node's pods by group, offered)
    ("a gang at minMember offers nothing", {"g": 2}, {"g": 2}, ["g", "g"], 0),
    ("one above minMember offers one pod", {"g": 3}, {"g": 2}, ["g", "g"], 1),
    ("pods evicted this cycle no longer count as ready", {"g": 2}, {"g": 1}, ["g", "g"], 1),
    ("minMember 0 offers every pod", {"g": 2}, {"g": 0}, ["g", "g"], 2),
]


@pytest.mark.parametrize(("what", "ready", "mins", "groups", "offered"), GANG, ids=[g[0] for g in GANG])
def test_gang_answer(what: str, ready: dict[str, int], mins: dict[str, int], groups: list[str], offered: int) -> None:
    class P:
        def __init__(self, i: int, g: str) -> None:
            self.key, self.group = f"p{i}", g

    pods = [P(i, g) for i, g in enumerate(groups)]
    assert len(gang_answer(ready.__getitem__, mins.__getitem__, pods)) == offered  # type: ignore[arg-type]


def test_priority_answer_takes_strictly_lower_jobs() -> None:
    objs = [*CLASSES, node("n0", 8), queue("q"), *running("lo", "q", [("n0", 2)], "low", 1),
            *running("eq", "q", [("n0", 2)], "mid", 1), *running("hi", "q", [("n0", 2)], "high", 1)]
    cat = catalogue(objs)
    assert [c.group for c in priority_answer(100, cat.by_node["n0"])] == ["default/lo"]


DRF = [  # (preemptor's allocation with its pod, the victim job's allocation, the node's pods of it, offered)
    ("below the victim's share after the eviction", 1, 4, [1], 1),
    ("equal shares (within 1e-6) count", 2, 4, [2], 1),
    ("above: not offered", 3, 4, [2], 0),
    ("the node's pods of one job subtract in turn", 1, 4, [1, 1, 1], 3),
    ("a second pod is not offered once the job's share drops below", 2, 4, [1, 1, 1], 2),
    ("a single-pod job never goes for a non-empty preemptor", 1, 1, [1], 0),
]


@pytest.mark.parametrize(("what", "mine", "theirs", "pods", "offered"), DRF, ids=[d[0] for d in DRF])
def test_drf_answer(what: str, mine: int, theirs: int, pods: list[int], offered: int) -> None:
    total = {GPU: 16_000, "cpu": 1_000_000}
    objs = [*CLASSES, node("n0", 16), queue("q"), *running("v", "q", [("n0", g) for g in pods], "low", 1)]
    cat = catalogue(objs)
    got = drf_answer(share({GPU: mine * 1000}, total), lambda g: {GPU: theirs * 1000}, total, cat.by_node["n0"])
    assert len(got) == offered


# ---- whole plans (the greedy, the exact model, the validator) -----------------------------------


def plans(objs: list[dict[str, Any]]) -> dict[str, PlacementPlan]:
    snap = load_objects(objs).snapshot
    out = {}
    for solver in ("greedy", "cpsat", "auto"):
        plan = plan_placement(snap, list(snap.jobs.values()), solver, OPTS, now=NOW)
        assert placement_violations(snap, list(snap.jobs.values()), plan) == []
        out[solver] = plan
    return out


def result(plan: PlacementPlan, job: str = "default/j") -> tuple[bool, list[str]]:
    jp = next(j for j in plan.jobs if j.key == job)
    return jp.admitted, sorted(v.name for v in jp.victims)


CASES: list[tuple[str, list[dict[str, Any]], bool, list[str]]] = [
    # gangs at minMember: the first tier offers nothing, drf decides, with no priority check: a small job
    # preempts a bigger one of higher priority (its share after the eviction still at least the preemptor's)
    ("drf lets a small job preempt a bigger job of higher priority",
     [node("n0", 8), queue("q"), *running("big", "q", [("n0", 4), ("n0", 4)], "high", 2),
      pending("j", "q", 1, 4, "low")], True, ["big-0"]),
    ("drf refuses when the victim job would drop below the preemptor's share",
     [node("n0", 8), queue("q"), *running("v", "q", [("n0", 8)], "low", 1), pending("j", "q", 1, 8, "high")],
     False, []),
    # a gang above minMember: the first tier decides (priority and gang), drf is not asked
    ("the first tier: a lower-priority pod above minMember",
     [node("n0", 8), queue("q"), *running("v", "q", [("n0", 4), ("n0", 4)], "low", 1),
      pending("j", "q", 1, 4, "high")], True, ["v-0"]),
    ("the first tier offers a pod of equal priority nothing; with its gang above minMember drf is not asked",
     [node("n0", 8), queue("q"), *running("lo", "q", [("n0", 4)], "low", 0),
      *running("eq", "q", [("n0", 4)], "mid", 1), pending("j", "q", 1, 8, "mid")], False, []),
    # just enough: victims in victim order (lower priority first, then the newest) until the pod fits
    ("just enough, lower priority first",
     [node("n0", 8), queue("q"), *running("a", "q", [("n0", 2)], "low", 0),
      *running("b", "q", [("n0", 2)], "low", 0, started="2025-06-01T11:00:00Z"),
      *running("c", "q", [("n0", 4)], "mid", 0), pending("j", "q", 1, 4, "high")], True, ["a-0", "b-0"]),
    # reclaim: the first tier is gang alone (priority has no reclaim function): a gang above minMember
    # goes though its queue is not above its deserved (the capacity plugin is not asked)
    ("reclaim by the gang plugin alone, under deserved",
     [node("n0", 8), queue("q", deserved={GPU: 8}), queue("o", deserved={GPU: 8}),
      *running("v", "o", [("n0", 4), ("n0", 4)], "high", 1), pending("j", "q", 1, 4, "low")], True, ["v-0"]),
    ("reclaim by capacity when the gangs are at minMember: above deserved goes",
     [node("n0", 8), queue("q", deserved={GPU: 8}), queue("o", deserved={GPU: 0}),
      *running("v", "o", [("n0", 8)], "high", 1), pending("j", "q", 1, 8, "low")], True, ["v-0"]),
    ("reclaim by capacity when the gangs are at minMember: within deserved stays",
     [node("n0", 8), queue("q", deserved={GPU: 8}), queue("o", deserved={GPU: 8}),
      *running("v", "o", [("n0", 8)], "low", 1), pending("j", "q", 1, 8, "high")], False, []),
]


@pytest.mark.parametrize(("what", "objs", "admitted", "victims"), CASES, ids=[c[0] for c in CASES])
def test_greedy_takes_what_the_tiers_offer(what: str, objs: list[dict[str, Any]], admitted: bool,
                                           victims: list[str]) -> None:
    got = plans([*CLASSES, *objs])
    assert result(got["greedy"]) == (admitted, victims)
    for solver in ("cpsat", "auto"):  # the exact model stays inside what it can bound; auto no worse than greedy
        adm, vic = result(got[solver])
        assert set(vic) <= set(victims) or adm
    assert result(got["auto"])[0] >= admitted


def test_reclaim_passes_over_a_node_without_reclaimees() -> None:
    """Volcano's reclaim tries a pod only on nodes with a running pod of another reclaimable queue: the
    second pod does not take the room the first one's eviction left on n0 (nothing to reclaim there
    any more) but reclaims on n1. The next cycle's allocate then binds each pod where reclaim pipelined it
    (its nominatedNodeName): the plan is the cluster once nothing changes (the job keeps both victims)."""
    objs = [*CLASSES, node("n0", 8), node("n1", 8), queue("q", deserved={GPU: 16}), queue("o", deserved={GPU: 0}),
            *running("a", "o", [("n0", 8)], "low", 1), *running("b", "o", [("n1", 8)], "low", 1),
            pending("j", "q", 2, 4, "high")]
    greedy = plans(objs)["greedy"]
    jp = next(j for j in greedy.jobs if j.key == "default/j")
    assert jp.admitted and sorted(v.name for v in jp.victims) == ["a-0", "b-0"]
    assert sorted(b.node for b in jp.bindings) == ["n0", "n1"] and "scheduling cycle 2" in jp.reason


# n0 and n1 (8 GPUs each) are full of pods of queue o, each its own gang at minMember; j1 then j2 (4 GPUs each) wait.
# Reclaim (queue q under its deserved, o above its deserved 0): j1 reclaims a-0 on n0, 4 GPUs of n0 left free; j2's
# reclaim walks only the nodes with a reclaimee (``reclaimForTask``), so not n0 (a-0 is Releasing): it reclaims b-0
# on n1 (vcm-1-118 of ``volcano_diff.py --more``: Volcano reclaimed a pod for each pod of the waiting jobs where the
# greedy placed the second in the first one's room). Preempt (one queue, j1 and j2 of a higher priority): preempt's
# walk takes a node with room without evicting, so j2 goes into n0's room (the gangs' minMember 0 there: the first
# tier offers their pods).
FREED_ROOM = [  # (what, j's queue, o's deserved, the gangs' minMember, victims of j1, victims of j2, j2's node)
    ("reclaim: the next job reclaims on a node with a reclaimee", "q", 0, 1, ["a-0"], ["b-0"], "n1"),
    ("preempt: the next job takes the room the first one's victim freed", "o", 16, 0, ["a-0"], [], "n0"),
]


@pytest.mark.parametrize(("what", "queue_name", "deserved", "min_member", "first", "second", "where"), FREED_ROOM,
                         ids=[c[0] for c in FREED_ROOM])
def test_reclaim_never_places_a_job_in_room_without_a_reclaimee(what: str, queue_name: str, deserved: int,
                                                               min_member: int, first: list[str], second: list[str],
                                                               where: str) -> None:
    objs = [*CLASSES, node("n0", 8), node("n1", 8), queue("q", deserved={GPU: 16}),
            queue("o", deserved={GPU: deserved}), *running("a", "o", [("n0", 8)], "low", min_member),
            *running("b", "o", [("n1", 8)], "low", min_member, started="2025-06-01T11:00:00Z"),
            pending("j1", queue_name, 1, 4, "high"), pending("j2", queue_name, 1, 4, "high")]
    snap = load_objects(objs).snapshot
    jobs = list(snap.jobs.values())
    plan = plan_placement(snap, jobs, "greedy", OPTS, now=NOW)
    assert placement_violations(snap, jobs, plan) == []
    assert result(plan, "default/j1") == (True, first)
    assert result(plan, "default/j2") == (True, second)
    assert [b.node for b in plan.job("default/j2").bindings] == [where]


def test_a_jobs_pods_reclaim_in_volcanos_task_order_not_the_plans() -> None:
    """Reclaim pops a job's pods by priority (the task template's PriorityClass), so j's critical ``lead`` (1 GPU)
    reclaims first, then its two ``worker`` pods (8 GPUs each), each on the first node with a reclaimee: lead x-0
    (2 GPUs) on n0, the workers y-0 on n1 and z-0 on n2. Queue o (deserved 7) holds 18, 16, then 8 before each
    victim: above its deserved each time. The plan lists its bindings in task order (workers first); asked in
    that order, o would hold 2 when x-0 goes and the capacity plugin would keep it (vcm-1-118 of
    ``volcano_diff.py --more``: the validator refused the greedy's plan so before)."""
    objs = [*CLASSES, node("n0", 8), node("n1", 8), node("n2", 8), queue("q", deserved={GPU: 24}),
            queue("o", deserved={GPU: 7}), queue("r", deserved={GPU: 6}, reclaimable=False),
            *running("x", "o", [("n0", 2)], "low", 1), *running("keep", "r", [("n0", 6)], "low", 1),
            *running("y", "o", [("n1", 8)], "low", 1), *running("z", "o", [("n2", 8)], "low", 1),
            vcjob("j", "q", [job_task("worker", 2, 8), job_task("lead", 1, 1, template_spec={
                "priorityClassName": "high"})], priority_class_name="mid")]
    snap = load_objects(objs).snapshot
    jobs = list(snap.jobs.values())
    plan = plan_placement(snap, jobs, "greedy", OPTS, now=NOW)
    assert placement_violations(snap, jobs, plan) == []
    assert result(plan) == (True, ["x-0", "y-0", "z-0"])
    assert [b.task for b in plan.job("default/j").bindings] == ["worker", "worker", "lead"]


def test_the_validator_refuses_a_victim_no_tier_offers() -> None:
    # The plan that preempts v-0 is valid while v's minMember is 0 (the gang plugin offers it) and refused
    # at minMember 1: priority ∩ gang is empty, and drf never offers a job's last pod (was: the joint
    # rules' plan, which took v-0).
    def objs(min_member: int) -> list[dict[str, Any]]:
        return [*CLASSES, node("n0", 8), queue("q"), *running("v", "q", [("n0", 8)], "low", min_member),
                pending("j", "q", 1, 8, "high")]
    spare = load_objects(objs(0)).snapshot
    good = plan_placement(spare, list(spare.jobs.values()), "greedy", OPTS, now=NOW)
    assert result(good) == (True, ["v-0"])
    snap = load_objects(objs(1)).snapshot
    bad = placement_violations(snap, list(snap.jobs.values()), good)
    assert any("plugin tiers do not offer it" in v for v in bad)


def test_candidates_come_in_victim_order() -> None:
    objs = [*CLASSES, node("n0", 8), queue("q"), *running("a", "q", [("n0", 2)], "mid", 1),
            *running("b", "q", [("n0", 2)], "low", 1)]
    assert [c.group for c in catalogue(objs).by_node["n0"]] == ["default/b", "default/a"]
    assert all(isinstance(c, Candidate) for c in catalogue(objs).by_node["n0"])


def running_vcjob(name: str, queue_name: str, replicas: int, gpu: int, on: dict[int, str], min_available: int,
                  pc: str | None = None, policies: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """A running VCJob: its PodGroup (minMember ``min_available``) and the pods of the replicas in ``on``;
    ``policies``: its lifecycle policies."""
    job = vcjob(name, queue_name, [job_task("worker", replicas, gpu)], min_available=min_available,
                priority_class_name=pc)
    job["status"] = {"state": {"phase": "Running"}}
    if policies is not None:
        job["spec"]["policies"] = policies
    pg = podgroup_in(queue_name, f"{name}-pg", min_available)
    pg["metadata"]["ownerReferences"] = [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": name,
                                          "uid": f"uid-{name}", "controller": True}]
    if pc is not None:
        pg["spec"]["priorityClassName"] = pc
    objs = [job, pg]
    for i, n in on.items():
        p = pod(f"{name}-worker-{i}", n, gpu, group=f"{name}-pg")
        p["status"]["startTime"] = "2025-06-01T10:00:00Z"
        objs.append(p)
    return objs


def test_the_next_cycle_places_into_the_room_an_earlier_cycles_victims_left() -> None:
    """vcm-1-109 of ``volcano_diff.py --more``: r (queue o above its deserved 0) fills n0; w, a ready VCJob of
    queue f, runs one replica on n1 and has a second pending (2 GPUs); z (queue q, 2 GPUs, after w in queue
    order) reclaims r-0 on n0 in the first cycle, and the second cycle's allocate places z there and w's replica
    in the 2 GPUs left, as Volcano did. The merged plan lists both at that cycle's allocate; the validator replays
    z first (its victim went in the cycle before), and before it replayed w first, found n0 full and the cycles
    stopped at the first (w's replica never placed)."""
    objs = [*CLASSES, node("n0", 4), node("n1", 4), queue("q", deserved={GPU: 4}), queue("f", deserved={GPU: 8}),
            queue("o", deserved={GPU: 0}), *running("r", "o", [("n0", 4)], "low", 1),
            *running_vcjob("w", "f", 2, 2, {0: "n1"}, 1, "mid"), pending("z", "q", 1, 2, "mid"),
            *running("mine", "q", [("n1", 2)], "low", 1)]  # q's share (2 of 4) above f's: w's queue goes first
    snap = load_objects(objs).snapshot
    jobs = list(snap.jobs.values())
    plan = plan_placement(snap, jobs, "greedy", OPTS, now=NOW)
    assert placement_violations(snap, jobs, plan) == []
    assert result(plan, "default/z") == (True, ["r-0"])
    w = plan.job("default/w")
    assert w.admitted and [(b.index, b.node) for b in w.bindings] == [(1, "n0")]


STARVING = [  # a partly running gang (3 replicas of 4 GPUs) fills n0; n1 is full of a low-priority gang
    ("ready with its running pods: no victims (Volcano evicts only for a starving job)", {0: "n0", 1: "n0"}, 2,
     False, []),
    ("starving (1 running, minAvailable 2): it preempts for the pod it lacks", {0: "n0"}, 2, True, ["v-0"]),
]


@pytest.mark.parametrize(("what", "on", "min_available", "admitted", "victims"), STARVING,
                         ids=[s[0] for s in STARVING])
def test_only_a_starving_gang_evicts(what: str, on: dict[int, str], min_available: int, admitted: bool,
                                     victims: list[str]) -> None:
    filler = [pod("busy", "n0", 4, group=None)] if len(on) == 1 else []
    objs = [*CLASSES, node("n0", 8), node("n1", 8), queue("q"), *filler,
            *running("v", "q", [("n1", 4), ("n1", 4)], "low", 0),
            *running_vcjob("j", "q", 3, 4, on, min_available, "high")]
    snap = load_objects(objs).snapshot
    plan = plan_placement(snap, list(snap.jobs.values()), "greedy", OPTS, now=NOW)
    jp = next(j for j in plan.jobs if j.key == "default/j")
    assert sorted(v.name for v in jp.victims) == victims
    assert bool(jp.bindings) == admitted


# ---- victim order within a job -------------------------------------------------------------------

# n0 holds two 4-GPU pods of x (low, minMember 1, a third pod on n1 beside a high-priority pod: x has two
# pods to spare), n1 is full. j (mid, 4 GPUs) preempts on n0: the gang plugin offers both n0 pods, and
# Volcano evicts in the reverse of its task order (BuildVictimsPriorityQueue: !TaskOrderFn; the job
# controller's CompareTask): the higher pod index first where the name has one (three parts or more),
# else the later creation, then the larger UID.
def three_pods(group: str, uids: tuple[str, str, str]) -> list[dict[str, Any]]:
    objs = running(group, "q", [("n0", 4), ("n0", 4), ("n1", 4)], "low", 1)
    for p, uid in zip(objs[1:], uids, strict=True):
        p["metadata"]["uid"] = uid
    return objs


WITHIN_JOB = [  # (what, PodGroup name, the UIDs of its pods 0, 1, 2, the victim)
    ("equal creation: the larger UID first", "x", ("aaa", "bbb", "ccc"), "x-1"),
    ("equal creation: the larger UID first, the other way", "x", ("bbb", "aaa", "ccc"), "x-0"),
    ("a pod index decides before the UID", "x-w", ("bbb", "aaa", "ccc"), "x-w-1"),
]


@pytest.mark.parametrize(("what", "group", "uids", "victim"), WITHIN_JOB, ids=[c[0] for c in WITHIN_JOB])
def test_victims_of_one_job_go_in_volcanos_order(what: str, group: str, uids: tuple[str, str, str],
                                                 victim: str) -> None:
    objs = [*CLASSES, node("n0", 8), node("n1", 8), queue("q"), *three_pods(group, uids),
            *running("hi", "q", [("n1", 4)], "high", 1), pending("j", "q", 1, 4, "mid")]
    snap = load_objects(objs).snapshot
    plan = plan_placement(snap, list(snap.jobs.values()), "greedy", OPTS, now=NOW)
    assert placement_violations(snap, list(snap.jobs.values()), plan) == []
    assert result(plan) == (True, [victim])


# ---- the running pods of a job being placed, in the plugins' view ---------------------------------

# n0 (4 GPUs) holds r-0 (mid, minMember 1: at its minimum) and g-worker-0, the running pod of g (high, a
# partly running gang, minAvailable 1); n1 (4 GPUs) is empty. Allocate places g's two other pods on n1
# (its gang: 3 ready), j (a "large" job between mid and high, 2 GPUs) fits nowhere and preempts on n0.
# Volcano hands both pods of n0 to the plugins: priority offers r-0 (g is higher), gang offers g-worker-0
# (ready 3 > 1); their intersection is empty, so conformance starts the set again with both, and r-0 (its
# job later in job order) goes first. optplan never takes g-worker-0, but it shapes the answer. When g's
# pods cannot be placed (n1 too small), g is at its minimum: the gang plugin offers nothing, the tier ends,
# drf refuses (r's share after would be 0), and j waits.
SHIELDED = [  # (what, n1's GPUs, j admitted, its victims)
    ("a running gang's pod makes the first tier's intersection empty", 4, True, ["r-0"]),
    ("at its minimum it offers nothing: the tier ends", 1, False, []),
]


@pytest.mark.parametrize(("what", "n1", "admitted", "victims"), SHIELDED, ids=[c[0] for c in SHIELDED])
def test_the_plugins_see_the_running_pods_of_jobs_being_placed(what: str, n1: int, admitted: bool,
                                                                victims: list[str]) -> None:
    objs = [*CLASSES, priority_class("large", 500), node("n0", 4), node("n1", n1), queue("q"),
            *running("r", "q", [("n0", 2)], "mid", 1), *running_vcjob("g", "q", 3, 2, {0: "n0"}, 1, "high"),
            pending("j", "q", 1, 2, "large")]
    snap = load_objects(objs).snapshot
    plan = plan_placement(snap, list(snap.jobs.values()), "greedy", OPTS, now=NOW)
    assert placement_violations(snap, list(snap.jobs.values()), plan) == []
    assert result(plan) == (admitted, victims)


# ---- victims of several queues on one node -------------------------------------------------------

# n0 holds a-0 (queue a, low) and b-0 (queue b, mid), 4 GPUs each, both gangs at minMember and both queues
# above their deserved; j (queue c, 4 GPUs) reclaims on n0 and one victim is enough. Volcano orders the
# victims of different queues by the capacity plugin's VictimQueueOrderFn (the queue whose lowest common
# ancestor with the reclaimer's queue is deeper first), then the reverse of the queue order (the higher
# share first), not by the victims' priorities.
VICTIM_QUEUES = [  # (what, the queues, the victim)
    ("the higher share first, though its job's priority is higher",
     [queue("a", deserved={GPU: 2}), queue("b", deserved={GPU: 1}), queue("c", deserved={GPU: 8})], "b-0"),
    ("the higher share first, the other way",
     [queue("a", deserved={GPU: 1}), queue("b", deserved={GPU: 2}), queue("c", deserved={GPU: 8})], "a-0"),
    ("a sibling of the reclaimer's queue before a queue under root, whatever the shares and priorities",
     [queue("p", deserved={GPU: 10}), queue("b", "p", deserved={GPU: 2}), queue("c", "p", deserved={GPU: 8}),
      queue("a", deserved={GPU: 1})], "b-0"),
]


@pytest.mark.parametrize(("what", "queues", "victim"), VICTIM_QUEUES, ids=[c[0] for c in VICTIM_QUEUES])
def test_victims_of_several_queues_go_in_the_capacity_plugins_order(what: str, queues: list[dict[str, Any]],
                                                                   victim: str) -> None:
    objs = [*CLASSES, node("n0", 8), *queues, *running("a", "a", [("n0", 4)], "low", 1),
            *running("b", "b", [("n0", 4)], "mid", 1), pending("j", "c", 1, 4, "mid")]
    snap = load_objects(objs).snapshot
    plan = plan_placement(snap, list(snap.jobs.values()), "greedy", OPTS, now=NOW)
    assert placement_violations(snap, list(snap.jobs.values()), plan) == []
    assert result(plan) == (True, [victim])


# ---- the capacity plugin asks the reclaimees in eviction order ---------------------------------------------

# n0 (8 GPUs) is full with three pods of queue o, each its own gang at minMember (the first tier offers none, the
# capacity plugin decides): "spot" (low, 2 GPUs), "big" (mid, 4) and "small" (mid, 2, started later). The plugin's
# ReclaimableFn walks them in Volcano's eviction order (``BuildVictimsPriorityQueue``: lower priority first, then
# drf's larger share: spot, big, small), each passing while o's allocation, less the pods passed before it, is
# above o's deserved. With deserved 3: spot (8 > 3), big (6 > 3), not small (2): 6 GPUs offered, too few for the
# 8-GPU reclaimer, which Volcano leaves pending (vcm-1-36 of ``volcano_diff.py --more``, recorded: optplan walked
# them in the plugins' input order, small before big, offered all three and reclaimed them).
CAPACITY_ORDER = [  # (what, o's deserved, j's GPUs, j admitted, j's victims)
    ("the walk stops short of the pod that would take o below deserved", 3, 8, False, []),
    ("what it offers is enough: just enough of it, in eviction order", 3, 6, True, ["big-0", "spot-0"]),
    ("a lower deserved lets all three go", 1, 8, True, ["big-0", "small-0", "spot-0"]),
]


@pytest.mark.parametrize(("what", "deserved", "gpu", "admitted", "victims"), CAPACITY_ORDER,
                         ids=[c[0] for c in CAPACITY_ORDER])
def three_in_o(deserved: int, gpu: int) -> list[dict[str, Any]]:
    return [*CLASSES, node("n0", 8), queue("q", deserved={GPU: 8}), queue("o", deserved={GPU: deserved}),
            *running("spot", "o", [("n0", 2)], "low", 1), *running("big", "o", [("n0", 4)], "mid", 1),
            *running("small", "o", [("n0", 2)], "mid", 1, started="2025-06-01T11:00:00Z"),
            pending("j", "q", 1, gpu, "high")]


@pytest.mark.parametrize(("what", "deserved", "gpu", "admitted", "victims"), CAPACITY_ORDER,
                         ids=[c[0] for c in CAPACITY_ORDER])
def test_the_capacity_plugin_asks_the_reclaimees_in_eviction_order(what: str, deserved: int, gpu: int,
                                                                   admitted: bool, victims: list[str]) -> None:
    snap = load_objects(three_in_o(deserved, gpu)).snapshot
    jobs = list(snap.jobs.values())
    plan = plan_placement(snap, jobs, "greedy", OPTS, now=NOW)
    assert placement_violations(snap, jobs, plan) == []
    assert result(plan) == (admitted, victims)
    exact = plan_placement(snap, jobs, "auto", OPTS, now=NOW)
    assert placement_violations(snap, jobs, exact) == []
    assert result(exact)[0] == admitted


def test_the_validator_refuses_a_reclaim_the_plugins_order_does_not_offer() -> None:
    """The plan that reclaims all three pods for an 8-GPU pod (right at deserved 1) at deserved 3, what optplan
    planned there before."""
    loose = load_objects(three_in_o(1, 8)).snapshot
    plan = plan_placement(loose, list(loose.jobs.values()), "greedy", OPTS, now=NOW)
    assert result(plan) == (True, ["big-0", "small-0", "spot-0"])
    snap = load_objects(three_in_o(3, 8)).snapshot
    bad = placement_violations(snap, list(snap.jobs.values()), plan)
    assert any("small-0" in v and "plugin tiers do not offer it" in v for v in bad)


# ---- victims of several jobs of one queue: the session's job order, reversed ---------------------------

# n0 (8 GPUs) is full: the preemptor j (high, 4 GPUs) may take pods of jobs "small" and "big" (both mid,
# minMember 0: the first tier offers both). Volcano's victim queue (BuildVictimsPriorityQueue) orders pods of
# different jobs by the session's job order reversed — priority, gang readiness, then drf's dominant share
# (its JobOrderFn puts the smaller share first, so the larger share goes first) — and only then by the task
# order (the later start first): the job with the larger share loses its pod first, and is enough.
BY_SHARE = [  # (what, small's GPUs and priority, big's GPUs, the third pod's GPUs, victims)
    ("the larger dominant share first, enough alone", (2, "mid"), 4, 2, ["big-0"]),
    ("equal shares: the task order, the later start first", (4, "mid"), 4, 0, ["small-0"]),
    ("a lower priority before a larger share", (2, "low"), 4, 2, ["big-0", "small-0"]),
]


@pytest.mark.parametrize(("what", "small", "big", "third", "victims"), BY_SHARE, ids=[c[0] for c in BY_SHARE])
def test_victims_of_several_jobs_go_by_drf_share(what: str, small: tuple[int, str], big: int, third: int,
                                                  victims: list[str]) -> None:
    objs = [*CLASSES, node("n0", 8), queue("q"),
            *running("small", "q", [("n0", small[0])], small[1], 0, started="2025-06-01T11:00:00Z"),
            *running("big", "q", [("n0", big)], "mid", 0),
            *(running("hi", "q", [("n0", third)], "high", 1) if third else []), pending("j", "q", 1, 4, "high")]
    snap = load_objects(objs).snapshot
    plan = plan_placement(snap, list(snap.jobs.values()), "greedy", OPTS, now=NOW)
    assert placement_violations(snap, list(snap.jobs.values()), plan) == []
    assert result(plan) == (True, victims)


# ---- preempt's pass within the job, after its pass between jobs --------------------------------------------

# n0 (4 GPUs): v (low, 2 GPUs, minMember 0) and w (high, 2 GPUs); n1 (4 GPUs): x of queue b (4 GPUs, b above its
# deserved). j1 (mid, two 1-GPU pods, minAvailable 1) preempts v for its first pod and is no longer starving;
# Volcano's preempt then runs its pass within each starving job (``actions/preempt``: "Preemption between Task
# within Job"): j1's second pod fits beside the first and is pipelined too, so queue a holds 4 GPUs when j0
# (low, queue a, deserved 5) comes to reclaim: with a 2-GPU pod 4 + 2 > 5 and Volcano refuses ("itself can not
# reclaim"), with a 1-GPU pod it reclaims x-0.
WITHIN_JOB_PASS = [  # (what, j0's GPUs, j0 admitted, j0's victims)
    ("the pass within j1 fills queue a: j0 may not reclaim", 2, False, []),
    ("room for j0 under deserved: it reclaims", 1, True, ["x-0"]),
]


@pytest.mark.parametrize(("what", "gpu", "admitted", "victims"), WITHIN_JOB_PASS, ids=[c[0] for c in WITHIN_JOB_PASS])
def test_preempts_pass_within_the_job_follows_its_pass_between_jobs(what: str, gpu: int, admitted: bool,
                                                                    victims: list[str]) -> None:
    objs = [*CLASSES, node("n0", 4), node("n1", 4), queue("a", deserved={GPU: 5}), queue("b", deserved={GPU: 1}),
            *running("v", "a", [("n0", 2)], "low", 0), *running("w", "a", [("n0", 2)], "high", 1),
            *running("x", "b", [("n1", 4)], "low", 1), pending("j0", "a", 1, gpu, "low"),
            vcjob("j1", "a", [job_task("w", 2, 1)], priority_class_name="mid", min_available=1)]
    snap = load_objects(objs).snapshot
    plan = plan_placement(snap, list(snap.jobs.values()), "greedy", OPTS, now=NOW)
    assert placement_violations(snap, list(snap.jobs.values()), plan) == []
    assert result(plan, "default/j1") == (True, ["v-0"])
    assert len(plan.job("default/j1").bindings) == 2
    assert result(plan, "default/j0") == (admitted, victims)


# ---- preempt's node order scores the node's Used: pods pipelined this session are not in it -------------

# n0 (96 cpu) runs a-0 (60 cpu), n1 runs b-0 (96 cpu), both low; j (high, two 30-cpu pods, minAvailable 2)
# preempts. Its first pod fits on n0 beside a-0 (binpack (60 + 30) / 96 there, 0 on the full n1) and is pipelined
# there. For its second pod Volcano's binpack still scores n0 by its Used — a-0 only, the pipelined pod not
# in it (``NodeInfo.AddTask``: a Pipelined task adds to ``Pipelined`` only) — the best, and n1 as full (0): it
# walks n0 first and takes a-0 there, wherever its node list starts. Counting the pipelined pod, both nodes
# would score 0 and the list's first would take its victim.
USED_ORDER = [  # (what, the node list's start, j's victims)
    ("the list starts at n0", None, ["a-0"]),
    ("the list starts at n1: n0's Used still scores best", "n1", ["a-0"]),
]


def cpu_pod(name: str, node_name: str, cpu: str) -> list[dict[str, Any]]:
    pg = podgroup_in("q", name, 0)
    pg["spec"]["priorityClassName"] = "low"
    p = pod(f"{name}-0", node_name, 0, group=name, cpu=cpu)
    p["status"]["startTime"] = "2025-06-01T10:00:00Z"
    p["spec"]["priorityClassName"] = "low"
    return [pg, p]


@pytest.mark.parametrize(("what", "start", "victims"), USED_ORDER, ids=[c[0] for c in USED_ORDER])
def test_preempts_binpack_scores_without_the_pods_it_pipelined(what: str, start: str | None,
                                                              victims: list[str]) -> None:
    objs = [*CLASSES, node("n0", 0), node("n1", 0), queue("q"), *cpu_pod("a", "n0", "60"), *cpu_pod("b", "n1", "96"),
            vcjob("j", "q", [job_task("w", 2, 0, cpu="30")], priority_class_name="high", min_available=2)]
    snap = load_objects(objs).snapshot
    jobs = list(snap.jobs.values())
    plan = plan_placement(snap, jobs, "greedy", PlanOptions(deterministic=True), now=NOW, node_start=start)
    assert placement_violations(snap, jobs, plan) == []
    assert result(plan) == (True, victims)
