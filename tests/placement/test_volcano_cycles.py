"""Placement against vc-scheduler v1.15's session loop, as tables written from its source: the preempt
action runs for every starving job before the reclaim action runs for any (actions/preempt, actions/
reclaim: each walks all queues and their starving jobs), a HyperNode's score is the network-topology-aware
plugin's (``getSubJobHyperNodeBinPackingScore``: the state before the dry run plus every pod of the job, 0
when that overflows the HyperNode), root's realCapability is unlimited when root names no capability
(plugins/capacity), and several scheduling cycles: a cycle's evictions free room the next cycle's allocate
gives in queue and job order; preempt orders nodes with the network-topology-aware plugin's score of a pod
without a network topology (``batchNodeOrderFnForNormalPods``: per tier the binpack of the node's HyperNode,
fading 0.8 a tier); and a victim evicted for a job the next cycle leaves waiting may free queue room that a
later job of its queue takes elsewhere."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from optplan.adapters.kubefile import load_objects
from optplan.models.placement import CYCLE_STEPS, BinpackWeights, JobPlacement, PlacementPlan, Victim
from optplan.models.repack import SolverRecord
from optplan.models.schedconf import SchedulerConf
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.placement.binpack import hyper_binpack
from optplan.solvers.placement.place import plan_placement
from optplan.solvers.placement.validate import placement_violations
from tests.builders import GPU, hypernode, job_task, node, pod, podgroup_in, priority_class, queue, vcjob

OPTS = PlanOptions(time_limit=5, workers=1, seed=0)
NOW = "2025-06-01T12:00:00Z"
CLASSES = [priority_class("high", 1000), priority_class("mid", 100), priority_class("low", 10)]


def running(name: str, queue_name: str, placements: list[tuple[str, int]], pc: str, min_member: int) -> list[Any]:
    pg = podgroup_in(queue_name, name, min_member)
    pg["spec"]["priorityClassName"] = pc
    objs: list[Any] = [pg]
    for i, (n, g) in enumerate(placements):
        p = pod(f"{name}-{i}", n, g, group=name)
        p["status"]["startTime"] = "2025-06-01T10:00:00Z"
        p["spec"]["priorityClassName"] = pc
        objs.append(p)
    return objs


def plans(objs: list[Any], scheduler: SchedulerConf | None = None,
          solvers: tuple[str, ...] = ("greedy", "cpsat", "auto")) -> dict[str, PlacementPlan]:
    snap = load_objects(objs).snapshot
    out = {}
    for solver in solvers:
        plan = plan_placement(snap, list(snap.jobs.values()), solver, OPTS, now=NOW, scheduler=scheduler)
        assert placement_violations(snap, list(snap.jobs.values()), plan) == []
        out[solver] = plan
    return out


def outcome(plan: PlacementPlan) -> dict[str, tuple[bool, str, list[str]]]:
    """job name -> (admitted, the action of its victims, its victims)."""
    return {jp.name: (jp.admitted, ",".join(sorted({v.reason for v in jp.victims})),
                      sorted(v.name for v in jp.victims)) for jp in plan.jobs}


# ---- preempt for every starving job, then reclaim ------------------------------------------------

# Queue a (deserved 8, empty: first in queue order) holds reclaimer A; queue b (deserved 0) holds x, two
# pods of 4 GPUs above minMember 1, and the preemptor B (high priority). Job by job, A reclaims first
# and takes a pod of x that B could have preempted; B then finds x at minMember, drf refuses (B's share
# after would exceed x's), and B waits. Volcano's preempt runs first: B preempts a pod of x (priority and
# gang offer it), then A reclaims the other (x's queue b is above its deserved 0 with B's pipelined pods).
ACTIONS = [
    ("preempt runs for B before A reclaims",
     [node("n0", 8), queue("a", deserved={GPU: 8}), queue("b", deserved={GPU: 0}),
      *running("x", "b", [("n0", 4), ("n0", 4)], "low", 1),
      vcjob("ja", "a", [job_task("w", 1, 4)], priority_class_name="mid"),
      vcjob("jb", "b", [job_task("w", 1, 4)], priority_class_name="high")],
     {"ja": (True, "reclaim", 1), "jb": (True, "preempt", 1)}),
    ("a reclaimer alone still reclaims",
     [node("n0", 8), queue("a", deserved={GPU: 8}), queue("b", deserved={GPU: 0}),
      *running("x", "b", [("n0", 4), ("n0", 4)], "low", 1),
      vcjob("ja", "a", [job_task("w", 1, 4)], priority_class_name="mid")],
     {"ja": (True, "reclaim", 1)}),
]


@pytest.mark.parametrize(("what", "objs", "expected"), ACTIONS, ids=[c[0] for c in ACTIONS])
def test_preempt_runs_for_every_job_before_reclaim(what: str, objs: list[Any],
                                                   expected: dict[str, tuple[bool, str, int]]) -> None:
    got = plans([*CLASSES, *objs])
    greedy = outcome(got["greedy"])
    assert {k: (a, r, len(v)) for k, (a, r, v) in greedy.items()} == expected
    victims = [v for _a, _r, vs in greedy.values() for v in vs]
    assert len(victims) == len(set(victims))  # each pod evicted once
    auto = outcome(got["auto"])
    assert sum(a for a, _r, _v in auto.values()) >= sum(a for a, _r, _v in greedy.values())


# ---- the HyperNode score -------------------------------------------------------------------------

# Two racks of two 8-GPU nodes; weights on GPUs only. A hard tier-1 job of `replicas` pods of 4 GPUs
# with minAvailable 1: the rack scored Σ (used + every pod of the job) / allocatable, 0 when that
# overflows the rack; ties to the name.
def racks(used_a: int, used_b: int, replicas: int) -> list[Any]:
    objs: list[Any] = [node("a0", 8), node("a1", 8), node("b0", 8), node("b1", 8), queue("q"),
                       hypernode("ra", 1, ["a0", "a1"]), hypernode("rb", 1, ["b0", "b1"]),
                       hypernode("top", 2, ["ra", "rb"], kind="HyperNode")]
    if used_a:
        objs += running("ua", "q", [("a0", used_a)], "low", 1)
    if used_b:
        objs += running("ub", "q", [("b0", used_b)], "low", 1)
    objs.append(vcjob("j", "q", [job_task("w", replicas, 4)], min_available=1, priority_class_name="low",
                      network_topology={"mode": "hard", "highestTierAllowed": 1}))
    return objs


HYPER = [  # (what, used GPUs on rack a, on rack b, replicas, the chosen rack; None: not admitted)
    ("the fuller rack", 4, 2, 1, "ra"),
    ("the fuller rack, the other way", 2, 6, 1, "rb"),
    ("every pod of the job counts: the fuller rack would overflow, scores 0", 8, 2, 3, "rb"),
    ("neither rack's free room holds all 3 pods: the pre-filter searches neither", 8, 8, 3, None),
    ("equal: the name", 4, 4, 1, "ra"),
]


@pytest.mark.parametrize(("what", "used_a", "used_b", "replicas", "rack"), HYPER, ids=[c[0] for c in HYPER])
def test_hypernode_score_is_the_plugins(what: str, used_a: int, used_b: int, replicas: int,
                                       rack: str | None) -> None:
    conf = SchedulerConf(hyper_node_binpack=BinpackWeights(cpu=0, memory=0, resources={GPU: 1}))
    greedy = plans([*CLASSES, *racks(used_a, used_b, replicas)], conf, ("greedy",))["greedy"]
    jp = next(j for j in greedy.jobs if j.name == "j")
    if rack is None:
        assert not jp.admitted and "pre-filter" in jp.reason
    else:
        assert jp.admitted and jp.hyper_node == rack


# ---- root's realCapability -----------------------------------------------------------------------

ROOT = [  # (what, the queues, the job's GPUs, admitted)
    ("a sibling's guarantee no longer caps a queue below root", [queue("g", guarantee={GPU: 8}, deserved={GPU: 8}),
                                                                 queue("a")], 12, True),
    ("a capability still caps", [queue("g", guarantee={GPU: 8}, deserved={GPU: 8}), queue("a", capability={GPU: 8})],
     12, False),
    ("root's own capability caps", [queue("root", capability={GPU: 8}), queue("a")], 12, False),
]


@pytest.mark.parametrize(("what", "queues", "gpus", "admitted"), ROOT, ids=[c[0] for c in ROOT])
def test_root_names_no_capability_so_nothing_caps_below_it(what: str, queues: list[Any], gpus: int,
                                                            admitted: bool) -> None:
    objs = [*CLASSES, node("n0", 8), node("n1", 8), *queues,
            vcjob("j", "a", [job_task("w", 3, gpus // 3)], priority_class_name="low")]
    got = plans(objs)
    for plan in got.values():
        assert plan.jobs[0].admitted is admitted


# ---- several scheduling cycles -------------------------------------------------------------------

# n0 (8 GPUs) holds x: two pods of 4 GPUs of a low job above minMember 1. j0 (PriorityClass "never",
# 1000, preemptionPolicy Never: first in job order, evicts nothing) and j1 (mid) both wait. Cycle 1: j1
# preempts a pod of x and is pipelined there. Cycle 2: allocate gives the room in job order — to j0
# when it fits (j1 then finds x at minMember: drf refuses, it waits, its victim evicted all the same),
# else to j1.
CYCLES = [  # (what, j0's GPUs, job -> (admitted, victims))
    ("the room goes to the job first in order", 4, {"j0": (True, 0), "j1": (False, 1)}),
    ("the evicting job keeps it when the first does not fit", 8, {"j0": (False, 0), "j1": (True, 1)}),
]


@pytest.mark.parametrize(("what", "gpus", "expected"), CYCLES, ids=[c[0] for c in CYCLES])
def test_the_next_cycle_gives_freed_room_in_job_order(what: str, gpus: int,
                                                      expected: dict[str, tuple[bool, int]]) -> None:
    objs = [*CLASSES, priority_class("never", 1000, "Never"), node("n0", 8), queue("q"),
            *running("x", "q", [("n0", 4), ("n0", 4)], "low", 1),
            vcjob("j0", "q", [job_task("w", 1, gpus)], priority_class_name="never"),
            vcjob("j1", "q", [job_task("w", 1, 4)], priority_class_name="mid")]
    got = plans(objs)
    greedy = outcome(got["greedy"])
    assert {k: (a, len(v)) for k, (a, _r, v) in greedy.items()} == expected
    auto = outcome(got["auto"])
    assert sum(a for a, _r, _v in auto.values()) >= sum(a for a, _r, _v in greedy.values())


def test_the_validator_on_victims_of_a_job_not_admitted() -> None:
    """Such victims need the cycle step that says an earlier cycle evicted them, and each must be one the
    job's action may offer (reclaim never takes a pod of the job's own queue)."""
    objs = [*CLASSES, priority_class("never", 1000, "Never"), node("n0", 8), queue("q"),
            *running("x", "q", [("n0", 4), ("n0", 4)], "low", 1),
            vcjob("j0", "q", [job_task("w", 1, 4)], priority_class_name="never"),
            vcjob("j1", "q", [job_task("w", 1, 4)], priority_class_name="mid")]
    snap = load_objects(objs).snapshot
    jobs = list(snap.jobs.values())
    plan = plan_placement(snap, jobs, "greedy", OPTS, now=NOW)
    j1 = plan.job("default/j1")
    assert not j1.admitted and j1.step > 0 and "scheduling cycle 1" in j1.reason

    def swap(jp: Any) -> PlacementPlan:
        return plan.model_copy(update={"jobs": tuple(jp if j.key == jp.key else j for j in plan.jobs)})

    assert placement_violations(snap, jobs, plan) == []
    bad = placement_violations(snap, jobs, swap(j1.model_copy(update={"step": 0})))
    assert "job default/j1 is not admitted but has victims" in bad
    v = j1.victims[0].model_copy(update={"reason": "reclaim"})
    bad = placement_violations(snap, jobs, swap(j1.model_copy(update={"victims": (v,)})))
    assert len(bad) == 1 and "(reclaim)" in bad[0]


# ---- the network-topology-aware plugin's binpack of a HyperNode -----

F = Fraction
HYPER_BINPACK = [  # (what, request, allocatable, used, weights, score)
    ("cpu and memory by default", {"cpu": 2, "memory": 4}, {"cpu": 8, "memory": 8}, {"cpu": 2, "memory": 0},
     BinpackWeights(), F(1, 2) * (F(4, 8) + F(4, 8))),
    ("a resource without a weight is not scored", {"cpu": 2, GPU: 4}, {"cpu": 8, GPU: 8}, {"cpu": 0, GPU: 8},
     BinpackWeights(memory=0), F(2, 8)),
    ("an overflow scores 0", {"cpu": 2, GPU: 4}, {"cpu": 8, GPU: 8}, {"cpu": 0, GPU: 6},
     BinpackWeights(resources={GPU: 1}), F(0)),
    ("weights weigh", {"cpu": 4, GPU: 4}, {"cpu": 8, GPU: 8}, {"cpu": 0, GPU: 4},
     BinpackWeights(cpu=1, resources={GPU: 3}), (F(1, 2) + 3 * F(1)) / 4),
]


@pytest.mark.parametrize(("what", "req", "alloc", "used", "weights", "score"), HYPER_BINPACK,
                         ids=[c[0] for c in HYPER_BINPACK])
def test_hyper_binpack(what: str, req: dict[str, int], alloc: dict[str, int], used: dict[str, int],
                       weights: BinpackWeights, score: Fraction) -> None:
    assert hyper_binpack(req, alloc, used, weights) == score


# Racks ra (a0, a1) and rb (b0, b1) of 8-GPU nodes. x (low, minMember 1) runs one 8-GPU pod on a0 and one
# on b1; other queue's pods fill a1 and b0 to 7 GPUs, b0's with 50 cpus. j (mid, one pod of 2 GPUs) fits
# nowhere and preempts a pod of x: node binpack on GPUs ties a0 and b1 (both overflow: 0), so the
# network-topology-aware plugin's score decides — rb, busier in cpu, scores higher, x-1 goes; without
# HyperNodes or without the plugin the tie goes to the name, x-0.
def two_racks(hyper: bool) -> list[Any]:
    objs: list[Any] = [node("a0", 8), node("a1", 8), node("b0", 8), node("b1", 8), queue("q"), queue("other"),
                       *running("x", "q", [("a0", 8), ("b1", 8)], "low", 1),
                       *running("z", "other", [("a1", 7)], "high", 1),
                       vcjob("j", "q", [job_task("w", 1, 2)], priority_class_name="mid")]
    w = podgroup_in("other", "w", 1)
    busy = pod("w-0", "b0", 7, group="w", cpu="50")
    busy["spec"]["priorityClassName"] = w["spec"]["priorityClassName"] = "high"
    objs += [w, busy]
    if hyper:
        objs += [hypernode("ra", 1, ["a0", "a1"]), hypernode("rb", 1, ["b0", "b1"])]
    return objs


NODE_GPU = BinpackWeights(cpu=0, memory=0, resources={GPU: 1})
PREEMPT_ORDER = [  # (what, HyperNodes, the plugin's weights (None: not configured), the victim)
    ("the busier rack's node", True, BinpackWeights(cpu=1, memory=0), "x-1"),
    ("no HyperNodes: the name", False, BinpackWeights(cpu=1, memory=0), "x-0"),
    ("no network-topology-aware plugin: the name", True, None, "x-0"),
]


@pytest.mark.parametrize(("what", "hyper", "weights", "victim"), PREEMPT_ORDER, ids=[c[0] for c in PREEMPT_ORDER])
def test_preempt_orders_nodes_by_the_hypernode_score(what: str, hyper: bool, weights: BinpackWeights | None,
                                                     victim: str) -> None:
    conf = SchedulerConf(binpack=NODE_GPU, hyper_node_binpack=weights)
    greedy = outcome(plans([*CLASSES, *two_racks(hyper)], conf, ("greedy",))["greedy"])
    assert greedy["j"] == (True, "preempt", [victim])


# ---- a cycle's victim that frees queue room ------------------------------------------------------

# n0 (8 GPUs) holds x (low, minMember 1, two pods of 4); n1 (8 GPUs, pool b) is empty. The capability
# (8 GPUs, on q or on q's parent) holds back both j0 (high, soft network topology: it does not preempt;
# pool b only) and j1 (mid). Cycle 1: j1 preempts a pod of x on n0. Cycle 2: the queue has room and
# allocate gives it to j0 first (the sibling: queue a before q by name), on n1; j1 waits. j1's victim
# freed queue room, not node room: no job lands on n0, and the plan still holds (Volcano evicted it all
# the same); without j0 admitted it does not.
QUEUE_ROOM = [  # (what, the queues, j0's queue)
    ("the victim's own queue", [queue("q", capability={GPU: 8})], "q"),
    ("a sibling under the capped parent", [queue("p", capability={GPU: 8}), queue("q", "p"), queue("a", "p")], "a"),
]


@pytest.mark.parametrize(("what", "queues", "j0_queue"), QUEUE_ROOM, ids=[c[0] for c in QUEUE_ROOM])
def test_a_victim_may_free_queue_room_a_later_job_takes(what: str, queues: list[Any], j0_queue: str) -> None:
    pool_b = {"nodeSelector": {"pool": "b"}}
    objs = [*CLASSES, node("n0", 8), node("n1", 8, labels={"pool": "b"}), *queues,
            *running("x", "q", [("n0", 4), ("n0", 4)], "low", 1),
            vcjob("j0", j0_queue, [job_task("w", 1, 4, template_spec=pool_b)], priority_class_name="high",
                  network_topology={"mode": "soft"}),
            vcjob("j1", "q", [job_task("w", 1, 4)], priority_class_name="mid")]
    snap = load_objects(objs).snapshot
    jobs = list(snap.jobs.values())
    plan = plan_placement(snap, jobs, "greedy", OPTS, now=NOW)
    got = outcome(plan)
    assert got["j0"][0] and [b.node for b in plan.job("default/j0").bindings] == ["n1"]
    assert got["j1"][:2] == (False, "preempt") and len(got["j1"][2]) == 1
    assert placement_violations(snap, jobs, plan) == []
    j0 = plan.job("default/j0").model_copy(update={"admitted": False, "bindings": (), "hyper_node": None,
                                                    "tier": None, "reason": "left out"})
    broken = plan.model_copy(update={"jobs": tuple(j0 if j.key == j0.key else j for j in plan.jobs)})
    assert any("whose room no job placed after it takes" in v for v in placement_violations(snap, jobs, broken))


# ---- preempt's pass within a starving job --------------------------------------------------------

# n0 (8 GPUs) holds z (queue q, high: no victim for j) and has 4 GPUs free; n1 (8 GPUs) is full of v (queue
# o, deserved 0: reclaimable). j (queue q, mid, 2 pods of 4, minAvailable 2) fits only one pod; preempt
# between jobs finds no victim and discards. Preempt's pass within each starving job then pipelines j's
# pods one by one where they fit (n0) and keeps them; reclaim, which passes over nodes without a pod of
# another reclaimable queue (n0), places the second pod by reclaiming v on n1, and j is pipelined whole.
# A task whose PriorityClass says preemptionPolicy Never pipelines nothing (and reclaims nothing).
WITHIN_JOB = [  # (what, j's PriorityClass, j admitted, victims)
    ("the pass within the job pipelines what fits; reclaim does the rest", "mid", True, ["v-0"]),
    ("preemptionPolicy Never: neither", "never", False, []),
]


@pytest.mark.parametrize(("what", "pc", "admitted", "victims"), WITHIN_JOB, ids=[c[0] for c in WITHIN_JOB])
def test_preempts_pass_within_a_job_pipelines_what_fits(what: str, pc: str, admitted: bool,
                                                        victims: list[str]) -> None:
    objs = [*CLASSES, priority_class("never", 100, "Never"), node("n0", 8), node("n1", 8),
            queue("q", deserved={GPU: 16}), queue("o", deserved={GPU: 0}),
            *running("z", "q", [("n0", 4)], "high", 1), *running("v", "o", [("n1", 8)], "low", 1),
            vcjob("j", "q", [job_task("w", 2, 4)], priority_class_name=pc)]
    got = outcome(plans(objs, solvers=("greedy",))["greedy"])
    assert got["j"][0] is admitted and got["j"][2] == victims


# ---- reclaim for a job with a network topology: every node, no HyperNode step ----------------------------

# Racks ra (a0, a1) and rb (b0, b1) under the spine top (tier 2), 4-GPU nodes. a0 runs a pod of the job's own
# queue q (no reclaimee); a1, b0 and b1 each a pod of queue o (deserved 0: reclaimable). j: two pods of 4 GPUs,
# minAvailable 1. Volcano's reclaim (``reclaimForTask``) walks every node in node-list order, no HyperNode
# step, and evicts for one pod (the job is then pipelined); the next cycle's allocate searches only the
# HyperNodes whose free room holds all its pending pods (8 GPUs), and reclaim runs again while none does:
# a1's pod goes in cycle 1, b0's in cycle 2 — the spine then holds both freed nodes; under a tier-1 limit
# neither rack does, b1's pod goes in cycle 3, and j lands in rb: a1's room stays unused. Without a network
# topology, cycle 1's reclaim places j at once (the pipelined pod is the next allocate's).
def topology_reclaim(network_topology: dict[str, Any] | None) -> list[Any]:
    return [*CLASSES, node("a0", 4), node("a1", 4), node("b0", 4), node("b1", 4), queue("q", deserved={GPU: 16}),
            queue("o", deserved={GPU: 0}), hypernode("ra", 1, ["a0", "a1"]), hypernode("rb", 1, ["b0", "b1"]),
            hypernode("top", 2, ["ra", "rb"], kind="HyperNode"),
            *running("mine", "q", [("a0", 4)], "low", 1), *running("va", "o", [("a1", 4)], "low", 1),
            *running("vb", "o", [("b0", 4)], "low", 1), *running("vc", "o", [("b1", 4)], "low", 1),
            vcjob("j", "q", [job_task("w", 2, 4)], min_available=1, priority_class_name="mid",
                  network_topology=network_topology)]


TOPOLOGY_RECLAIM = [  # (what, networkTopology, where j lands (its HyperNode), its nodes, its victims)
    ("tier 2: the spine holds a1 and b0", {"mode": "hard", "highestTierAllowed": 2}, "top", ["a1", "b0"],
     ["va-0", "vb-0"]),
    ("tier 1: a third cycle frees rack b", {"mode": "hard", "highestTierAllowed": 1}, "rb", ["b0", "b1"],
     ["va-0", "vb-0", "vc-0"]),
    ("no network topology: cycle 1 places it", None, None, ["a1"], ["va-0"]),
]


@pytest.mark.parametrize(("what", "nt", "hyper", "nodes", "victims"), TOPOLOGY_RECLAIM,
                         ids=[c[0] for c in TOPOLOGY_RECLAIM])
def test_reclaim_walks_every_node_for_a_topology_job(what: str, nt: dict[str, Any] | None, hyper: str | None,
                                                     nodes: list[str], victims: list[str]) -> None:
    got = plans(topology_reclaim(nt), solvers=("greedy", "auto"))
    jp = got["greedy"].job("default/j")
    assert jp.admitted and jp.hyper_node == hyper
    assert sorted(b.node for b in jp.bindings) == nodes
    assert sorted(v.name for v in jp.victims) == victims and {v.reason for v in jp.victims} == {"reclaim"}


def test_the_validator_on_a_topology_jobs_reclaim() -> None:
    """Victims away from where a topology job lands are its reclaim's, earlier cycles' (lenient: no job need
    take their room); the same plan placed in the first cycle (no cycle before it) is refused: its victim
    a1 is where it places no pod. A job placed by a later cycle's allocate keeps victims only on nodes one of
    its pods could have gone to."""
    objs = topology_reclaim({"mode": "hard", "highestTierAllowed": 1})
    snap = load_objects(objs).snapshot
    plan = plans(objs, solvers=("greedy",))["greedy"]
    assert placement_violations(snap, list(snap.jobs.values()), plan) == []
    jp = plan.job("default/j")
    first = plan.model_copy(update={"jobs": tuple(x.model_copy(update={"step": 2}) if x.key == jp.key else x
                                                 for x in plan.jobs)})
    assert any("where the job places no pod" in v for v in placement_violations(snap, list(snap.jobs.values()),
                                                                                first))
    small = load_objects([*topology_reclaim({"mode": "hard", "highestTierAllowed": 1}),
                          node("tiny", 2), *running("t", "o", [("tiny", 2)], "low", 1)]).snapshot
    far = plan.model_copy(update={"jobs": tuple(x.model_copy(update={"victims": (*x.victims, Victim(
        namespace="default", name="t-0", node="tiny", reason="reclaim"))}) if x.key == jp.key else x
        for x in plan.jobs)})
    assert any("none of its pods could go" in v for v in placement_violations(small, list(small.jobs.values()), far))


# ---- preempt evicts until the queue may take the pod too --------------------------------------------------

# One node n0 of 8 GPUs; queue q runs x-0 (low, 4 GPUs, minMember 0) there; j (high) wants 4 GPUs. n0 has room
# for j; whether q does is its capability. Volcano's preempt (``normalPreempt``) evicts in victim order until
# ``ssn.Allocatable(queue, preemptor)`` and the node's room both hold, so x-0 goes when q is at its capability
# (its eviction frees q's room); with room in q, allocate places j and nothing goes.
PREEMPT_QUEUE = [  # (what, q's GPU capability, j admitted, victims)
    ("the node has room, the queue not: a pod of the queue goes", 4, True, ["x-0"]),
    ("the queue has room too: allocate places it", 8, True, []),
]


@pytest.mark.parametrize(("what", "cap", "admitted", "victims"), PREEMPT_QUEUE, ids=[c[0] for c in PREEMPT_QUEUE])
def test_preempt_evicts_until_the_queue_may_take_the_pod(what: str, cap: int, admitted: bool,
                                                         victims: list[str]) -> None:
    objs = [*CLASSES, node("n0", 8), queue("q", capability={GPU: cap}), *running("x", "q", [("n0", 4)], "low", 0),
            vcjob("j", "q", [job_task("w", 1, 4)], priority_class_name="high")]
    got = outcome(plans(objs, solvers=("greedy", "auto"))["greedy"])
    assert got["j"] == (admitted, "preempt" if victims else "", victims)


# ---- the tiers for victims whose job's pipelined pods the plan does not name ------------------------------

PIPELINED = [  # (what, j's victims (name, node), a violation the validator reports (None: valid))
    ("b0's pod: the capacity plugin offers it (vb at minMember, queue o over its deserved 0)", [("vb-0", "b0")],
     None),
    ("both pods of sl on a1: the gang plugin offers one (ready 2, minMember 1), and it alone leaves no room",
     [("sl-0", "a1"), ("sl-1", "a1")], "do not get its victims there from Volcano's plugin tiers"),
]


@pytest.mark.parametrize(("what", "victims", "violation"), PIPELINED, ids=[c[0] for c in PIPELINED])
def test_the_validator_asks_the_tiers_for_a_waiting_topology_jobs_reclaim(
        what: str, victims: list[tuple[str, str]], violation: str | None) -> None:
    """A job with a network topology whose reclaim evicted in cycle 1 and that waits (Volcano's reclaim walks
    every node for it and pipelines its pods there): the plan does not name the pipelined pods, but on each
    victim node Volcano's plugin tiers must offer the victims to some pods of the job there (the rule of a
    placed job's victims, ``validate._victim_violations``), as the greedy's walk asks them."""
    objs = [o for o in topology_reclaim({"mode": "hard", "highestTierAllowed": 1})
            if o["metadata"]["name"] not in ("va", "va-0")]
    objs += running("sl", "o", [("a1", 2), ("a1", 2)], "low", 1)
    snap = load_objects(objs).snapshot
    jobs = list(snap.jobs.values())
    waiting = JobPlacement(namespace="default", name="j", queue="q", admitted=False, after_evictions=True,
                           step=CYCLE_STEPS + 2, reason="its reclaim evicted pods on any node",
                           victims=tuple(Victim(namespace="default", name=n, node=at, reason="reclaim")
                                         for n, at in victims))
    plan = PlacementPlan(jobs=(waiting,), solver=SolverRecord(name="test", status="FEASIBLE"))
    got = placement_violations(snap, jobs, plan)
    if violation is None:
        assert got == []
    else:
        assert any(violation in v for v in got), got


# ---- reclaim for a partitioned job: pod by pod, no sub-job step ------------------------------------------

# topology_reclaim's racks and pods; j's task w has a partitionPolicy (two partitions of one 4-GPU pod, each
# inside one rack, minPartitions 1). vc-scheduler v1.15.1's reclaim has no sub-job step: it takes j's pending
# pods in task order, evicts on the first node in node-list order with a reclaimable pod (a1's va-0) until j
# is no longer starving (minAvailable 1), and commits once j is pipelined (the gang plugin's
# CheckSubJobPipelined: one partition pipelined); the next cycle's allocate places partition 0 whole in rack
# ra, on a1. With o not reclaimable, nothing goes and j waits.
PARTITION_RECLAIM = [  # (what, o reclaimable, j admitted, its nodes, its victims)
    ("o reclaimable: a1's pod goes, the partition lands in rack ra", True, True, ["a1"], ["va-0"]),
    ("o not reclaimable: j waits", False, False, [], []),
]


@pytest.mark.parametrize(("what", "reclaimable", "admitted", "nodes", "victims"), PARTITION_RECLAIM,
                         ids=[c[0] for c in PARTITION_RECLAIM])
def test_reclaim_for_a_partitioned_job(what: str, reclaimable: bool, admitted: bool, nodes: list[str],
                                       victims: list[str]) -> None:
    objs = topology_reclaim(None)
    task = job_task("w", 2, 4)
    task["partitionPolicy"] = {"totalPartitions": 2, "partitionSize": 1, "minPartitions": 1,
                               "networkTopology": {"mode": "hard", "highestTierAllowed": 1}}
    objs[-1] = vcjob("j", "q", [task], min_available=1, priority_class_name="mid")
    for o in objs:
        if o["kind"] == "Queue" and o["metadata"]["name"] == "o":
            o["spec"]["reclaimable"] = reclaimable
    got = plans(objs, solvers=("greedy", "auto"))
    jp = got["greedy"].job("default/j")
    assert jp.admitted is admitted
    assert sorted(b.node for b in jp.bindings) == nodes
    assert sorted(v.name for v in jp.victims) == victims and {v.reason for v in jp.victims} <= {"reclaim"}


# ---- a pod's nominated node: allocate tries it first -------------------------------------------------------

# vc-scheduler v1.15.1's allocate (``allocateResourcesForTasks``) tries a pending pod's status.nominatedNodeName
# first — set when an earlier session's preempt or reclaim pipelined the pod there — when the pod fits there
# now, and the whole node list otherwise. n0 runs 4 of its 8 GPUs, n1 none, n2 6: binpack puts j's 4-GPU pod
# on n0 unless it is nominated to a node where it fits.
NOMINATED = [  # (what, the pod's nominatedNodeName, where it lands)
    ("no nomination: binpack's node", None, "n0"),
    ("nominated to the empty node", "n1", "n1"),
    ("nominated to a node without room", "n2", "n0"),
    ("nominated to a node the cluster lacks", "gone", "n0"),
]


@pytest.mark.parametrize(("what", "nominated", "lands"), NOMINATED, ids=[c[0] for c in NOMINATED])
def test_allocate_tries_the_nominated_node_first(what: str, nominated: str | None, lands: str) -> None:
    pending_pod = pod("j-w-0", None, 4, group="j", phase="Pending")
    if nominated is not None:
        pending_pod["status"]["nominatedNodeName"] = nominated
    objs = [*CLASSES, node("n0", 8), node("n1", 8), node("n2", 8), queue("q"),
            *running("a", "q", [("n0", 4)], "low", 1), *running("b", "q", [("n2", 6)], "low", 1),
            vcjob("j", "q", [job_task("w", 1, 4)], priority_class_name="mid"), pending_pod]
    jp = plans(objs, solvers=("greedy",))["greedy"].job("default/j")
    assert jp.admitted and [b.node for b in jp.bindings] == [lands]


# ---- a waiting job's reclaim over several cycles -----------------------------------------------------------

def rack_reclaim() -> list[Any]:
    """Two racks of two 4-GPU nodes (48 cpu, 12 a GPU). Queue a (not reclaimable) holds 6 GPUs on rack ra's
    nodes, b (deserved 2, reclaimable) 8 spread over both racks: x on a0 (2), y on b1 (2), z on b1 (2) and the
    two 1-GPU pods of w on b0. j2 (a, large) asks one partition of four 1-GPU pods inside one rack; j1 (b,
    critical) one partition of two 2-GPU pods anywhere."""
    def pods(name: str, q: str, pc: str, where: list[tuple[str, int]], min_member: int) -> list[Any]:
        out = running(name, q, where, pc, min_member)
        for o in out[1:]:
            g = int(o["spec"]["containers"][0]["resources"]["requests"][GPU])
            o["spec"]["containers"][0]["resources"]["requests"].update({"cpu": str(12 * g), "memory": f"{64 * g}Gi"})
        return out
    part = job_task("w", 4, 1, cpu="12", memory="64Gi")
    part["partitionPolicy"] = {"totalPartitions": 1, "partitionSize": 4, "minPartitions": 1,
                               "networkTopology": {"mode": "hard", "highestTierAllowed": 1}}
    pair = job_task("w", 2, 2, cpu="24", memory="128Gi")
    pair["partitionPolicy"] = {"totalPartitions": 1, "partitionSize": 2, "minPartitions": 1}
    return [*CLASSES, priority_class("large", 800), priority_class("critical", 2000),
            *(node(n, 4, cpu="48", memory="256Gi") for n in ("a0", "a1", "b0", "b1")),
            hypernode("ra", 1, ["a0", "a1"]), hypernode("rb", 1, ["b0", "b1"]),
            hypernode("top", 2, ["ra", "rb"], kind="HyperNode"),
            queue("t", deserved={GPU: 12}), queue("b", "t", deserved={GPU: 2}),
            queue("a", "t", deserved={GPU: 10}, capability={GPU: 12}, reclaimable=False),
            *pods("own", "a", "mid", [("a1", 2), ("a1", 2)], 2), *pods("own2", "a", "mid", [("a0", 2)], 1),
            *pods("x", "b", "large", [("a0", 2)], 1), *pods("y", "b", "low", [("b1", 2)], 1),
            *pods("z", "b", "large", [("b1", 2)], 1), *pods("w", "b", "low", [("b0", 1), ("b0", 1)], 2),
            vcjob("j2", "a", [part], min_available=4, priority_class_name="large"),
            vcjob("j1", "b", [pair], min_available=2, priority_class_name="critical")]


def test_a_reclaim_over_cycles_keeps_every_victim_before_the_later_cycles() -> None:
    """vc-scheduler v1.15.1 (a recorded run of this shape): j2's reclaim walks every node, pod by pod, and
    evicts two pods in the first cycle (x-0 for its first pod, one of w's for its fourth), too little for rack
    rb; the next cycle's allocate gives a0's and b0's room to j1 and j2's reclaim evicts again (y-0 and w's
    other pod); the third cycle places j2 in rb. The plan lists all four under j2, evicted from its first
    reclaim on (the validator replays them before j1's cycle-2 allocate on a0: before, the plan stopped at
    the first cycle, j1 and j2 waiting)."""
    for solver, plan in plans(rack_reclaim(), solvers=("greedy", "auto")).items():
        got = outcome(plan)
        assert got["j1"][0] and got["j2"][0], (solver, got)
        assert got["j2"][1:] == ("reclaim", ["w-0", "w-1", "x-0", "y-0"]), (solver, got)
        assert {b.node for b in plan.job("default/j2").bindings} <= {"b0", "b1"}


def later_allocate(node_list: tuple[str, ...] | None) -> list[Any]:
    """Seed 1's recorded case 283 of benchmarks/volcano_diff.py, by hand: four 8-GPU nodes in two racks under a
    spine; queue a (deserved 1) runs r0 (two 8-GPU pods, on r0-n0 and r1-n0, minMember 2), r1 (one, on r1-n1,
    minMember 1) and r2 (two 4-GPU pods on r0-n1, minMember 2); queue b (deserved 31) waits with j0 (high, one 4-GPU
    pod, a soft topology) and j1 (mid, three 2-GPU pods, minAvailable 2)."""
    nodes = ["r0-n0", "r0-n1", "r1-n0", "r1-n1"]
    return [*CLASSES, *(node(n, 8, cpu="64", memory="512Gi") for n in nodes),
            hypernode("s0", 1, nodes[:2]), hypernode("s1", 1, nodes[2:]), hypernode("sp", 2, ["s0", "s1"], "HyperNode"),
            queue("t", deserved={GPU: 32}), queue("a", "t", deserved={GPU: 1}), queue("b", "t", deserved={GPU: 31}),
            *running("r0", "a", [("r0-n0", 8), ("r1-n0", 8)], "mid", 2), *running("r1", "a", [("r1-n1", 8)], "low", 1),
            *running("r2", "a", [("r0-n1", 4), ("r0-n1", 4)], "mid", 2),
            vcjob("j0", "b", [job_task("w", 1, 4, cpu="32", memory="256Gi")], priority_class_name="high",
                  network_topology={"mode": "soft"}),
            vcjob("j1", "b", [job_task("w", 3, 2, cpu="16", memory="128Gi")], priority_class_name="mid",
                  min_available=2)]


def test_a_later_allocate_comes_after_all_its_cycles_victims() -> None:
    """Case 283 as vc-scheduler's node list r1-n0, r1-n1, r0-n0, r0-n1 had it: cycle 1's reclaim evicts r0-1 (on
    r1-n0) for j0 and r0-0 (r0-n0) and r1-0 (r1-n1) for j1; cycle 2's allocate, every one of those pods gone, places
    j0 on r0-n0 — room j1's victim freed — and j1 beside it and on r1-n1, as Volcano did. The validator replayed the
    jobs of one allocate each after its own victims only, refused that plan, and the cycles stopped at the first
    (j0 waiting with its victim)."""
    snap = load_objects(later_allocate(None)).snapshot
    jobs = list(snap.jobs.values())
    plan = plan_placement(snap, jobs, "greedy", OPTS, now=NOW, node_start=("r1-n0", "r1-n1", "r0-n0", "r0-n1"))
    assert placement_violations(snap, jobs, plan) == []
    got = {jp.name: (jp.admitted, sorted(b.node for b in jp.bindings), sorted(v.name for v in jp.victims))
           for jp in plan.jobs}
    assert got == {"j0": (True, ["r0-n0"], ["r0-1"]), "j1": (True, ["r0-n0", "r0-n0", "r1-n1"], ["r0-0", "r1-0"])}
    assert all(jp.step >= 2 * CYCLE_STEPS for jp in plan.jobs)
    for solver in ("cpsat", "auto"):  # both admitted, with fewer victims: better where the rules allow
        exact = plan_placement(snap, jobs, solver, OPTS, now=NOW, node_start=("r1-n0", "r1-n1", "r0-n0", "r0-n1"))
        assert placement_violations(snap, jobs, exact) == []
        assert all(jp.admitted for jp in exact.jobs) and sum(len(jp.victims) for jp in exact.jobs) < 3
