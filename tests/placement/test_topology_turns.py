"""How allocate searches HyperNodes for a topology job, as tables written from vc-scheduler v1.15.1's rules
(docs/queues.md, "HyperNodes in allocate"): a soft job is a hard one whose limit is the whole cluster; a job
with pods already allocated (running, or placed by its earlier turns) searches every HyperNode inside its
search root — the highest one within highestTierAllowed that holds them — lowest tier first, whether or
not it holds them, each turn again, by the HyperNode score (every pod of the job over the HyperNode's
use, 0 when that overflows it); a job with nothing allocated searches only the HyperNodes whose free room,
summed over their nodes, covers all its pending pods (the pre-filter), not only minAvailable's; a pod of a
job without topology scores a node by binpack plus the plugin's HyperNode binpack of the node's HyperNodes
(0.8 per tier, or the configuration's fading; off with its normal-pod switch or node order off), when the
scheduler configuration names the plugin; a topology job's pod adds the plugin's pull towards the job's pods
so far; nodeorder's least-requested and balanced-resource scores join when a configuration file lists it.

Two racks ``ra`` (a0, a1) and ``rb`` (b0, b1) of 8-GPU nodes under a tier-2 HyperNode ``top``; the
HyperNode score weighs GPUs only. Each case runs through greedy, cpsat and auto and the validator."""

from __future__ import annotations

from typing import Any

import pytest

from optplan.adapters.kubefile import load_objects
from optplan.models.placement import BinpackWeights, JobPlacement
from optplan.models.schedconf import SchedulerConf
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.placement.place import plan_placement
from optplan.solvers.placement.validate import placement_violations
from tests.builders import GPU, hypernode, job_task, node, pod, podgroup, vcjob

OPTS = PlanOptions(time_limit=5, workers=1, seed=0)
NOW = "2025-06-01T12:00:00Z"
CONF = SchedulerConf(hyper_node_binpack=BinpackWeights(cpu=0, memory=0, resources={GPU: 1}))
HARD1 = {"mode": "hard", "highestTierAllowed": 1}
HARD2 = {"mode": "hard", "highestTierAllowed": 2}
SOFT = {"mode": "soft"}


def fabric(busy: dict[str, int]) -> list[dict[str, Any]]:
    """The four nodes, the racks and ``top``; ``busy``: node -> GPUs other pods take there."""
    objs: list[dict[str, Any]] = [node(n, 8) for n in ("a0", "a1", "b0", "b1")]
    objs += [hypernode("ra", 1, ["a0", "a1"]), hypernode("rb", 1, ["b0", "b1"]),
             hypernode("top", 2, ["ra", "rb"], kind="HyperNode")]
    objs += [pod(f"busy-{n}", n, g, group=None) for n, g in sorted(busy.items()) if g]
    return objs


def job(replicas: int, gpu: int, min_available: int, topo: dict[str, Any] | None,
        running: dict[int, str] | None = None) -> list[dict[str, Any]]:
    """VCJob ``j`` (task ``worker``); ``running``: index -> node of its replicas that run already."""
    out = [vcjob("j", "default", [job_task("worker", replicas, gpu)], min_available=min_available,
                 network_topology=topo)]
    if running:
        out[0]["status"] = {"state": {"phase": "Running"}}
        out.append(podgroup("j-pg", min_available, owner=("batch.volcano.sh/v1alpha1", "Job", "j")))
        for i, n in running.items():
            p = pod(f"j-worker-{i}", n, gpu, group="j-pg")
            p["status"]["startTime"] = "2025-06-01T10:00:00Z"
            out.append(p)
    return out


def placed(objs: list[dict[str, Any]], conf: SchedulerConf = CONF) -> dict[str, JobPlacement]:
    """solver -> job j's placement; every plan passes the validator."""
    snap = load_objects(objs).snapshot
    jobs = list(snap.jobs.values())
    out = {}
    for solver in ("greedy", "cpsat", "auto"):
        plan = plan_placement(snap, jobs, solver, OPTS, now=NOW, scheduler=conf)
        assert placement_violations(snap, jobs, plan) == []
        out[solver] = next(jp for jp in plan.jobs if jp.name == "j")
    return out


# ---- a running gang's next pods: any HyperNode inside the search root ----------------------------

# j: 2 pods of 4 GPUs, minAvailable 1, replica 0 running on a0. The score counts both pods (8 GPUs).
RUNNING = [  # (what, topology, busy GPUs, where replica 1 goes, the lowest HyperNode holding both)
    ("hard tier 2: the sibling rack scores higher (its own would overflow: 4 + 8 busy + 8 > 16)",
     HARD2, {"a1": 8, "b0": 4}, "b0", "top"),
    ("hard tier 1: the search root is its own rack, it stays there", HARD1, {"a1": 8, "b0": 4}, "a0", "ra"),
    ("soft: the sibling rack too (the search root is the whole cluster)", SOFT, {"a1": 8, "b0": 4}, "b0", "top"),
    ("hard tier 2: its own rack scores higher (12/16 against 8/16), it stays", HARD2, {}, "a0", "ra"),
]


@pytest.mark.parametrize(("what", "topo", "busy", "to", "hyper"), RUNNING, ids=[c[0] for c in RUNNING])
def test_a_running_gang_searches_every_hypernode_inside_its_search_root(
        what: str, topo: dict[str, Any], busy: dict[str, int], to: str, hyper: str) -> None:
    greedy = placed([*fabric(busy), *job(2, 4, 1, topo, running={0: "a0"})])["greedy"]
    assert greedy.admitted
    assert [(b.index, b.node) for b in greedy.bindings] == [(1, to)]
    assert greedy.hyper_node == hyper


# ---- a job with nothing allocated: the pre-filter over all its pending pods ----------------------

PREFILTER = [  # (what, topology, replicas, minAvailable, busy, nodes of j's pods (None: not admitted), HyperNode)
    ("minAvailable fits a rack, both pods fit none: the racks are not searched, the spine is; the next"
     " turn finds the other rack", HARD2, 2, 1, {"a0": 8, "a1": 4, "b0": 8, "b1": 4}, ["a1", "b1"], "top"),
    ("both pods fit rack a: the rack", HARD2, 2, 1, {"a0": 8, "b0": 8, "b1": 4}, ["a1", "a1"], "ra"),
    ("hard tier 1, no rack holds both pods: not admitted, though one would fit",
     HARD1, 2, 1, {"a0": 8, "a1": 4, "b0": 8, "b1": 4}, None, None),
    ("soft, the cluster's free room short of all 3 pods: not admitted, though 2 would fit",
     SOFT, 3, 1, {"a0": 8, "a1": 4, "b0": 8, "b1": 4}, None, None),
    ("no topology: no pre-filter, 2 of 3 pods placed", None, 3, 1, {"a0": 8, "a1": 4, "b0": 8, "b1": 4},
     ["a1", "b1"], None),
]


@pytest.mark.parametrize(("what", "topo", "replicas", "min_available", "busy", "nodes", "hyper"), PREFILTER,
                         ids=[c[0] for c in PREFILTER])
def test_a_new_job_searches_only_hypernodes_whose_room_covers_all_its_pending_pods(
        what: str, topo: dict[str, Any] | None, replicas: int, min_available: int, busy: dict[str, int],
        nodes: list[str] | None, hyper: str | None) -> None:
    greedy = placed([*fabric(busy), *job(replicas, 4, min_available, topo)])["greedy"]
    if nodes is None:
        assert not greedy.admitted and "pre-filter" in greedy.reason
        return
    assert greedy.admitted
    assert sorted(b.node for b in greedy.bindings) == nodes
    assert greedy.hyper_node == hyper


# ---- a pod of a job without topology: binpack plus the HyperNode binpack of its node's HyperNodes ----

GPU_ONLY = BinpackWeights(cpu=0, memory=0, resources={GPU: 1})
NODE_SCORE = [  # (what, the configuration, busy GPUs, the node j's one pod of 2 GPUs goes to)
    ("equal binpack on a0 and b0: rack b, fuller (14/16 against 6/16 with the pod), wins",
     SchedulerConf(binpack=GPU_ONLY, hyper_node_binpack=GPU_ONLY), {"a0": 4, "b0": 4, "b1": 8}, "b0"),
    ("the configuration names no network-topology-aware weights: binpack alone, ties to the name",
     SchedulerConf(binpack=GPU_ONLY), {"a0": 4, "b0": 4, "b1": 8}, "a0"),
    ("binpack still leads: a0 fills up (100 against 75), rack a's lower HyperNode score does not make up for it",
     SchedulerConf(binpack=GPU_ONLY, hyper_node_binpack=GPU_ONLY), {"a0": 6, "b0": 4, "b1": 8}, "a0"),
]


@pytest.mark.parametrize(("what", "conf", "busy", "to"), NODE_SCORE, ids=[c[0] for c in NODE_SCORE])
def test_a_pod_without_topology_adds_the_hypernode_binpack_of_its_node(
        what: str, conf: SchedulerConf, busy: dict[str, int], to: str) -> None:
    greedy = placed([*fabric(busy), *job(1, 2, 1, None)], conf)["greedy"]
    assert [b.node for b in greedy.bindings] == [to]


NORMAL_OFF = [  # (what, the configuration, busy GPUs, the node j's one pod of 2 GPUs goes to)
    ("the plugin's normal-pod binpack switched off: binpack alone, ties to the name",
     SchedulerConf(binpack=GPU_ONLY, hyper_node_binpack=GPU_ONLY, normal_pod_binpack=False),
     {"a0": 4, "b0": 4, "b1": 8}, "a0"),
    ("the plugin's node order switched off (enableNodeOrder false): the same",
     SchedulerConf(binpack=GPU_ONLY, hyper_node_binpack=GPU_ONLY, topology_node_order=False),
     {"a0": 4, "b0": 4, "b1": 8}, "a0"),
    ("fading 0: only tier 1 counts, rack b still fuller", SchedulerConf(
        binpack=GPU_ONLY, hyper_node_binpack=GPU_ONLY, normal_pod_fading=0.0), {"a0": 4, "b0": 4, "b1": 8}, "b0"),
]


@pytest.mark.parametrize(("what", "conf", "busy", "to"), NORMAL_OFF, ids=[c[0] for c in NORMAL_OFF])
def test_the_normal_pod_score_follows_the_plugins_arguments(
        what: str, conf: SchedulerConf, busy: dict[str, int], to: str) -> None:
    greedy = placed([*fabric(busy), *job(1, 2, 1, None)], conf)["greedy"]
    assert [b.node for b in greedy.bindings] == [to]


# ---- a pod of a topology job: binpack plus the pull towards its pods so far ------------------------

# j: 4 pods of 2 GPUs, minAvailable 4, hard tier 2; free GPUs a0 4, a1 2, b0 2, b1 2: no rack holds 8, the spine
# is searched. The first pod goes to a1 (binpack 100, ties to the name); then, with the plugin's score, a0
# (75 by binpack, + 100 in rack a, the job's allocated HyperNode) beats b0 (100, + 50: their lowest common
# HyperNode, top, is tier 2 of 1..3).
NEAR = [  # (what, the configuration, nodes of j's pods)
    ("the plugin's score keeps the pods in rack a while it has room",
     SchedulerConf(binpack=GPU_ONLY, hyper_node_binpack=GPU_ONLY), ["a0", "a0", "a1", "b0"]),
    ("the configuration names no network-topology-aware weights: binpack alone spreads over rack b",
     SchedulerConf(binpack=GPU_ONLY), ["a0", "a1", "b0", "b1"]),
    ("the plugin's node order switched off: binpack alone",
     SchedulerConf(binpack=GPU_ONLY, hyper_node_binpack=GPU_ONLY, topology_node_order=False),
     ["a0", "a1", "b0", "b1"]),
]


@pytest.mark.parametrize(("what", "conf", "nodes"), NEAR, ids=[c[0] for c in NEAR])
def test_a_topology_pod_is_pulled_towards_its_jobs_pods(what: str, conf: SchedulerConf, nodes: list[str]) -> None:
    greedy = placed([*fabric({"a0": 4, "a1": 6, "b0": 6, "b1": 6}), *job(4, 2, 4, HARD2)], conf)["greedy"]
    assert greedy.admitted and greedy.hyper_node == "top"
    assert sorted(b.node for b in greedy.bindings) == nodes


# ---- nodeorder: least requested and balanced resource, when a configuration file lists the plugin ---------

ORDER = [  # (what, the configuration, the node j's one pod of 2 GPUs goes to)
    ("equal binpack on a0 and b0 (GPUs only); b0's cpu is free, a0's nearly taken: least requested picks b0",
     SchedulerConf(binpack=GPU_ONLY, source="conf.yaml"), "b0"),
    ("no configuration file: binpack alone, ties to the name", SchedulerConf(binpack=GPU_ONLY), "a0"),
    ("both weights 0: binpack alone", SchedulerConf(binpack=GPU_ONLY, source="conf.yaml", least_requested=0,
                                                    balanced_resource=0), "a0"),
]


@pytest.mark.parametrize(("what", "conf", "to"), ORDER, ids=[c[0] for c in ORDER])
def test_nodeorder_scores_join_the_node_order(what: str, conf: SchedulerConf, to: str) -> None:
    objs = [*fabric({"b0": 4}), pod("cpu-a0", "a0", 4, group=None, cpu="90")]
    greedy = placed([*objs, *job(1, 2, 1, None)], conf)["greedy"]
    assert [b.node for b in greedy.bindings] == [to]
