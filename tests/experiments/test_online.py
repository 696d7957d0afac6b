"""Online placement (``experiments.sim.online``): small clusters written inline whose answers are known."""

from __future__ import annotations

import random
import re
from typing import Any

import numpy as np
import pytest

from optplan.errors import InputError, PlanInvalidError
from optplan.experiments.sim import online
from optplan.experiments.sim.online import OnlineConfig, SimNode, SimPod, fgd_workload, simulate, verify
from optplan.models.placement import BinpackWeights
from optplan.solvers.core import registry
from optplan.solvers.placement.binpack import binpack_score

GB = 1024  # MiB


def node(name: str, gpu: int, *, cpu: int = 64_000, memory: int = 512 * GB, model: str = "") -> SimNode:
    return SimNode(name, cpu, memory, gpu, model)


def pod(name: str, gpu: int = 1, *, cpu: int = 1000, memory: int = 4 * GB, models: tuple[str, ...] = ()) -> SimPod:
    return SimPod(name, cpu, memory, gpu, 1000, models)


# ---- best-fit, greedy, random -------------------------------------------------------------------

BEST_FIT_CASES = [
    pytest.param([node("a", 4), node("b", 2), node("c", 8)],
                 [pod("p1"), pod("p2"), pod("p3", 2), pod("p4", 4), pod("p5", 2)],
                 ["b", "b", "a", "c", "a"], id="fullest-node-first"),
    pytest.param([node("y", 2), node("x", 2)], [pod("p1"), pod("p2"), pod("p3")], ["x", "x", "y"],
                 id="ties-go-to-the-first-name"),
    pytest.param([node("a", 8, cpu=4000), node("b", 8)], [pod("p1", cpu=2000), pod("p2", cpu=4000)], ["a", "b"],
                 id="cpu-counts-for-fit"),
]


@pytest.mark.parametrize(("nodes", "pods", "expected"), BEST_FIT_CASES)
def test_best_fit_places_where_fewest_gpus_stay_free(nodes: list[SimNode], pods: list[SimPod],
                                                      expected: list[str]) -> None:
    res = simulate(nodes, pods, "best-fit")
    assert list(res.assignment) == expected
    assert res.rejected == 0 and res.first_rejection is None


def _req(cpu: int, memory: int, gpu: int) -> dict[str, int]:
    return {"cpu": cpu, "memory": memory, "nvidia.com/gpu": gpu}


def test_greedy_takes_the_highest_binpack_score_at_every_step() -> None:
    """Replays the greedy's choices with ``binpack_score`` called directly on every feasible node: the
    chosen node has the highest score, the first by name among equals (the simulator's cache is exact)."""
    rng = random.Random(7)
    nodes = [SimNode(f"n{i:02d}", rng.choice([8000, 16000, 32000]), rng.choice([32 * GB, 64 * GB]),
                     rng.choice([1, 2, 4, 8]), rng.choice(["A", "B"])) for i in range(12)]
    pods = [SimPod(f"p{k}", rng.choice([1000, 2000, 4000]), rng.choice([2 * GB, 8 * GB]), rng.choice([1, 1, 2]), 1000,
                   rng.choice([(), ("A",)])) for k in range(80)]
    res = simulate(nodes, pods, "greedy")
    free = {n.name: [n.cpu, n.memory, n.gpu] for n in nodes}
    weights = BinpackWeights()
    ties = 0
    for p, where in zip(pods, res.assignment, strict=True):
        fits = [n for n in nodes if (not p.models or n.model in p.models)
                and all(f >= q for f, q in zip(free[n.name], (p.cpu, p.memory, p.gpu), strict=True))]
        if not fits:
            assert where is None
            continue
        scores = {n.name: binpack_score(_req(p.cpu, p.memory, p.gpu), _req(n.cpu, n.memory, n.gpu),
                                        _req(*free[n.name]), weights) for n in fits}
        best = max(scores.values())
        ties += sum(1 for v in scores.values() if v == best) > 1
        assert where == min(name for name, v in scores.items() if v == best)
        free[where] = [f - q for f, q in zip(free[where], (p.cpu, p.memory, p.gpu), strict=True)]
    assert res.placed >= 20 and res.rejected > 0 and ties > 0


def test_greedy_ignores_gpus_unless_the_weights_name_them() -> None:
    nodes = [node("a", 8), node("b", 2)]
    pods = [pod("p1")]
    assert simulate(nodes, pods, "greedy").assignment == ("a",)  # cpu and memory alike: a tie, first name
    gpu = OnlineConfig(weights=BinpackWeights(resources={"nvidia.com/gpu": 1}))
    assert simulate(nodes, pods, "greedy", gpu).assignment == ("b",)  # 1/2 of b's GPUs beats 1/8 of a's


def test_random_is_reproducible_with_its_seed() -> None:
    nodes = [node(f"n{i:02d}", 8) for i in range(20)]
    pods = [pod(f"p{k}") for k in range(30)]
    first = simulate(nodes, pods, "random", OnlineConfig(seed=3)).assignment
    assert simulate(nodes, pods, "random", OnlineConfig(seed=3)).assignment == first
    assert simulate(nodes, pods, "random", OnlineConfig(seed=4)).assignment != first
    assert len(set(first)) > 5 and None not in first


# ---- cpsat-batch -------------------------------------------------------------------------------

def test_cpsat_batch_beats_the_arrival_order() -> None:
    """a goes to the small node (binpack and best-fit's first name); b then needs the big one, and c (two
    GPUs) finds one free GPU per node. Seeing the three together: a and b share big, c takes small."""
    nodes = [node("n1-small", 2, cpu=8000, memory=64 * GB), node("n2-big", 2, cpu=16000, memory=64 * GB)]
    pods = [pod("a", 1, cpu=4000), pod("b", 1, cpu=12000), pod("c", 2, cpu=8000)]
    greedy = simulate(nodes, pods, "greedy")
    assert greedy.assignment == ("n1-small", "n2-big", None)
    assert simulate(nodes, pods, "best-fit").allocated_gpus == 2
    batch = simulate(nodes, pods, "cpsat-batch", OnlineConfig(batch=3, batch_time_limit=5.0))
    assert batch.assignment == ("n2-big", "n2-big", "n1-small")
    assert batch.allocated_gpus == 4 > greedy.allocated_gpus
    assert batch.alloc_percent == 100.0 and batch.solves == {"OPTIMAL": 1}


def test_cpsat_batch_prefers_used_nodes_then_the_fullest() -> None:
    """Level 3: GPUs go to the node with the fewest free GPUs. Level 2 comes first: a node used before
    the batch beats an empty one even with more free GPUs."""
    fullest = simulate([node("a", 8), node("c", 4)], [pod(f"p{k}") for k in range(4)], "cpsat-batch",
                       OnlineConfig(batch=4, batch_time_limit=5.0))
    assert fullest.assignment == ("c",) * 4
    nodes = [node("a", 8, model="X"), node("c", 4, model="Y")]
    used = simulate(nodes, [pod("p0", models=("X",)), pod("q0"), pod("q1")], "cpsat-batch",
                    OnlineConfig(batch=1, batch_time_limit=5.0))
    assert used.assignment == ("a", "a", "a") and used.solves == {"OPTIMAL": 3}


# ---- every policy -------------------------------------------------------------------------------

@pytest.mark.parametrize("policy", registry.names(registry.SIM))
def test_gpu_model_constraint_is_respected(policy: str) -> None:
    nodes = [node("a-p100", 8, model="P100"), node("b-v100", 8, model="V100"), node("c-t4", 4, model="T4")]
    pods = [pod("v1", models=("V100",)), pod("v2", 2, models=("V100",)), pod("any", 4),
            pod("a10", models=("A10",)), pod("tv", 4, models=("T4", "V100"))]
    res = simulate(nodes, pods, policy)
    where = dict(zip((p.name for p in pods), res.assignment, strict=True))
    assert where["v1"] == where["v2"] == "b-v100"
    assert where["a10"] is None
    assert where["tv"] in ("b-v100", "c-t4")
    assert res.rejected == 1 and res.first_rejection == 4
    # at the moment of the rejection: after v1, v2 and any; cpsat-batch decides once for its whole batch
    assert res.allocated_at_first_rejection == (11 if policy == "cpsat-batch" else 7)
    assert res.allocated_gpus == 11 and res.total_gpus == 20


@pytest.mark.parametrize("policy", registry.names(registry.SIM))
def test_a_rejected_pod_does_not_stop_the_stream(policy: str) -> None:
    nodes = [node("only", 2, cpu=8000)]
    pods = [pod("p1", cpu=6000), pod("p2", cpu=4000), pod("p3", cpu=2000)]
    res = simulate(nodes, pods, policy, OnlineConfig(batch=1))
    assert res.assignment == ("only", None, "only")
    assert (res.placed, res.rejected, res.first_rejection, res.allocated_gpus) == (2, 1, 2, 2)


def test_unknown_policy_and_bad_config_are_input_errors() -> None:
    with pytest.raises(InputError, match="unknown policy"):
        simulate([node("a", 1)], [pod("p")], "first-fit")
    with pytest.raises(InputError, match="batch"):
        OnlineConfig(batch=0)


# ---- the independent check ---------------------------------------------------------------------

CHECK_NODES = [node("a", 8, cpu=8000, model="P100"), node("b", 8, model="V100")]
CHECK_CASES = [
    pytest.param([pod("p", 8), pod("q", 8)], ["b", "b"], "over-committed on nvidia.com/gpu", id="gpus"),
    pytest.param([pod("p", cpu=6000), pod("q", cpu=6000)], ["a", "a"], "over-committed on cpu", id="cpu"),
    pytest.param([pod("p", memory=300 * GB), pod("q", memory=300 * GB)], ["b", "b"], "over-committed on memory",
                 id="memory"),
    pytest.param([pod("p", models=("V100",))], ["a"], "node affinity", id="model"),
    pytest.param([pod("p")], ["z"], "unknown node", id="unknown-node"),
    pytest.param([pod("p"), pod("q")], ["a"], "assignments for", id="length"),
]


@pytest.mark.parametrize(("pods", "assignment", "message"), CHECK_CASES)
def test_verify_catches_a_broken_state(pods: list[SimPod], assignment: list[str], message: str) -> None:
    with pytest.raises(PlanInvalidError, match=re.escape(message)):
        verify(CHECK_NODES, pods, assignment)


def test_verify_accepts_a_valid_state_and_counts_its_gpus() -> None:
    pods = [pod("p", 8, cpu=8000), pod("q", 4, models=("V100",)), pod("r", 4), pod("s", 2)]
    assert verify(CHECK_NODES, pods, ["a", "b", "b", None]) == 16


def test_simulate_raises_when_its_state_is_corrupted(monkeypatch: pytest.MonkeyPatch) -> None:
    def everywhere(self: Any, p: SimPod, free: Any = None) -> Any:
        return np.ones(len(self.nodes), dtype=bool)

    monkeypatch.setattr(online.SimCluster, "fits", everywhere)
    with pytest.raises(PlanInvalidError, match=r"over-committed on nvidia\.com/gpu"):
        simulate([node("a", 2)], [pod("p", 2), pod("q", 2)], "best-fit")


# ---- the workload ------------------------------------------------------------------------------

TRACE = [pod("t1"), pod("t2"), pod("t3", 2), pod("t4", 4), SimPod("share", 1000, GB, 1, 500),
         SimPod("cpu-only", 1000, GB, 0, 0)]


def test_workload_tops_up_with_draws_until_the_target() -> None:
    wl = fgd_workload(TRACE, total_gpus=10, percent=130.0, seed=1)
    requested = sum(p.gpu for p in wl)
    assert 13 - 4 < requested <= 13  # stops at the first draw that would pass 130% of 10
    names = [p.name for p in wl]
    assert sorted(n for n in names if "-tuned-" not in n) == ["t1", "t2", "t3", "t4"]
    assert len(names) > 4 and len(set(names)) == len(names)
    assert all(p.gpu_milli == 1000 and p.gpu >= 1 for p in wl)
    assert fgd_workload(TRACE, 10, 130.0, seed=1) == wl
    assert [p.name for p in fgd_workload(TRACE, 10, 130.0, seed=2)] != names


def test_workload_thins_a_trace_above_the_target() -> None:
    wl = fgd_workload(TRACE, total_gpus=4, percent=100.0, seed=0)
    assert sum(p.gpu for p in wl) <= 4
    assert all("-tuned-" not in p.name for p in wl)
    with pytest.raises(InputError, match="no whole-GPU pod"):
        fgd_workload(TRACE[4:], 4)
