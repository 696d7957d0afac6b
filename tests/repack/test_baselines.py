"""Peer baselines (Karpenter, Cluster Autoscaler, descheduler): each follows its own algorithm, its
moves always respect the feasibility oracle, and the validator reports its rule breaks without crashing."""

from __future__ import annotations

from typing import Any

import pytest

from optplan.adapters.generate import GenConfig, generate
from optplan.adapters.kubefile import load_objects
from optplan.models.repack import RepackPlan
from optplan.solvers.baselines.repack import (
    balanced_score,
    cluster_autoscaler_scale_down,
    descheduler_high_node_utilization,
    karpenter_balanced,
    karpenter_multi_node,
    karpenter_pod_cost,
)
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.core.oracle import Capacity, static_reason
from optplan.solvers.repack.base import PlanResult
from optplan.solvers.repack.rules import RepackProblem
from optplan.solvers.repack.validate import plan_violations
from tests.builders import load_with_run, node, pdb, pod, podgroup, repack_run

BASELINES = {"karpenter": karpenter_multi_node, "karpenter-balanced": karpenter_balanced,
             "cluster-autoscaler": cluster_autoscaler_scale_down, "descheduler": descheduler_high_node_utilization}
OPTS = PlanOptions(time_limit=10)


def problem(*objects: dict[str, Any]) -> RepackProblem:
    loaded, run = load_with_run(*objects, repack_run())
    return RepackProblem(loaded.snapshot, run)


def gpu_pods(node_name: str, sizes: list[int], *, prefix: str | None = None, **kw: Any) -> list[dict[str, Any]]:
    return [pod(f"{prefix or node_name}-p{i}", node_name, s, **kw) for i, s in enumerate(sizes)]


def trivial() -> RepackProblem:
    """n1 holds one card; n2 and n3 each hold three 2-card pods: only n1 can go."""
    return problem(node("n1"), node("n2"), node("n3"), podgroup("pg"),
                   *gpu_pods("n1", [1]), *gpu_pods("n2", [2, 2, 2]), *gpu_pods("n3", [2, 2, 2]))


@pytest.mark.parametrize("name", sorted(BASELINES))
def test_each_baseline_frees_the_obvious_node(name: str) -> None:
    p = trivial()
    result = BASELINES[name](p, OPTS)
    assert result.record.name == name
    assert result.record.status == "BASELINE"
    assert result.plan.freed_nodes == ("n1",)
    assert [(m.pod, m.from_node) for m in result.plan.moves] == [("default/n1-p0", "n1")]
    assert result.plan.moves[0].to_node in ("n2", "n3")
    assert plan_violations(p, result.plan, claimed=result.disruption) == []


def test_karpenter_pod_cost_clamps_deletion_cost_and_priority() -> None:
    p = trivial()
    base = p.snapshot.pods["default/n1-p0"]
    assert karpenter_pod_cost(base) == 1.0
    assert karpenter_pod_cost(base.model_copy(update={"priority": 2**25})) == 2.0
    costly = base.model_copy(update={"annotations": {"controller.kubernetes.io/pod-deletion-cost": str(2**31)}})
    assert karpenter_pod_cost(costly) == 10.0
    cheap = base.model_copy(update={"annotations": {"controller.kubernetes.io/pod-deletion-cost": str(-2**31)}})
    assert karpenter_pod_cost(cheap) == -10.0


def test_karpenter_binary_search_finds_the_longest_feasible_prefix() -> None:
    # a1..a4: one card each (cost 1); big: 13 of 16 cards at high priority (cost 10), so it sorts last.
    # Prefixes of 1..3 a-nodes fit on the remaining a-node and big; all four need 4 cards, big has 3.
    # blocked (full): a PDB with disruptionsAllowed 0 keeps it out of the candidates altogether.
    p = problem(*(node(f"a{i}") for i in range(1, 5)), node("big", 16), node("blocked"), podgroup("pg"),
                *(x for i in range(1, 5) for x in gpu_pods(f"a{i}", [1])),
                *gpu_pods("big", [13], priority=2**28),
                *gpu_pods("blocked", [8], labels={"app": "x"}), pdb("keep", {"app": "x"}, 0))
    result = karpenter_multi_node(p, OPTS)
    assert result.stats["candidates"] == 5
    assert result.stats["prefix"] == 3
    assert result.stats["probes"] == 2  # mid 3 (fits), mid 4 (does not)
    assert result.plan.freed_nodes == ("a1", "a2", "a3")
    assert {m.to_node for m in result.plan.moves} <= {"a4", "big"}
    assert plan_violations(p, result.plan) == []


def test_cluster_autoscaler_removes_one_non_empty_node_per_round() -> None:
    # Twelve idle providers (empty: removed at most 10 per round) and three lightly used nodes a, b, c
    # beside r (6 of 8 cards, above 50 %). Round 1: ten empties, no room for a drain. Round 2: two
    # empties and one drain. Round 3: one more drain. Round 4: nothing left to remove.
    idle = [node(f"e{i:02d}") for i in range(12)]
    p = problem(*idle, node("a"), node("b"), node("c"), node("r"), podgroup("pg"),
                *gpu_pods("a", [1]), *gpu_pods("b", [1]), *gpu_pods("c", [1]), *gpu_pods("r", [2, 2, 2]))
    result = cluster_autoscaler_scale_down(p, OPTS)
    assert result.stats["rounds"] == 4
    assert result.stats["removed_idle_providers"] == 12
    assert len(result.plan.freed_nodes) == 2
    assert result.stats["removed_nodes"] == 14
    assert plan_violations(p, result.plan, claimed=result.disruption) == []


def test_cluster_autoscaler_counts_pdbs_across_nodes() -> None:
    # One PDB allows a single disruption; it covers the pods of both a and b: only one of them drains.
    p = problem(node("a"), node("b"), node("r"), podgroup("pg"),
                *gpu_pods("a", [1], labels={"app": "x"}), *gpu_pods("b", [1], labels={"app": "x"}),
                *gpu_pods("r", [2, 2]), pdb("one", {"app": "x"}, 1))
    result = cluster_autoscaler_scale_down(p, OPTS)
    assert len(result.plan.freed_nodes) == 1
    assert plan_violations(p, result.plan) == []


def test_descheduler_pools_capacity_and_may_leave_a_source_not_freed() -> None:
    # Sources s2 (1 card) and s1 (3 cards); r1 and r2 have 2 + 1 cards free: pooled, 3. s2's pod is
    # evicted, then s1's 2-card pod (lowest priority first, larger first), which uses up the pool: s1's
    # 1-card pod stays, so s1 is not freed although a pod moved off it.
    p = problem(node("r1"), node("r2"), node("s1"), node("s2"), podgroup("pg"),
                *gpu_pods("r1", [2, 2, 2]), *gpu_pods("r2", [4, 2, 1]), *gpu_pods("s1", [2, 1]),
                *gpu_pods("s2", [1]))
    result = descheduler_high_node_utilization(p, OPTS)
    assert result.stats["sources"] == 2
    assert result.stats["evicted"] == 2
    assert result.plan.freed_nodes == ("s2",)
    dest = {m.pod: m.to_node for m in result.plan.moves}
    assert dest == {"default/s2-p0": "r2", "default/s1-p0": "r1"}  # MostAllocated: the fullest that fits
    violations = plan_violations(p, result.plan)
    assert violations == ["pod default/s1-p0 moves off s1, which is not vacated"]


def test_descheduler_evicted_pod_may_come_back_home() -> None:
    # r1 and r2 each have one card free: pooled 2, enough to evict s1's 2-card pod, but no single node
    # other than s1 itself can take it: the scheduler puts it back, and nothing is freed.
    p = problem(node("r1"), node("r2"), node("s1"), podgroup("pg"),
                *gpu_pods("r1", [4, 2, 1]), *gpu_pods("r2", [4, 2, 1]), *gpu_pods("s1", [2]))
    result = descheduler_high_node_utilization(p, OPTS)
    assert result.stats["evicted"] == 1
    assert result.stats["returned_home"] == 1
    assert result.plan.freed_nodes == ()
    assert result.disruption.moved_pods == 1  # the eviction still disrupted it


def assert_moves_fit(p: RepackProblem, plan: RepackPlan) -> None:
    """Every move passes the static predicates and the final state over-commits nothing."""
    snap = p.snapshot
    cap = Capacity(snap)
    pods = [snap.pods[m.pod] for m in plan.moves]
    for m, q in zip(plan.moves, pods, strict=True):
        assert q.node_name == m.from_node
        cap.remove(q, m.from_node)
    for m, q in zip(plan.moves, pods, strict=True):
        assert static_reason(q, snap.nodes[m.to_node]) is None, m
        assert cap.fit_reason(q, m.to_node) is None, m
        cap.add(q, m.to_node)
    assert len({m.pod for m in plan.moves}) == len(plan.moves)


@pytest.fixture(scope="module")
def generated() -> RepackProblem:
    loaded = load_objects(generate(GenConfig(nodes=60, seed=3, pdb_share=0.3, cpu_pressure=0.2)))
    run = next(iter(loaded.runs.values()))
    return RepackProblem(loaded.snapshot, run)


ALWAYS_FORBIDDEN = ("does not fit", "cannot run on", "moves twice", "unknown", "is not running on",
                    "does not request", "a vacated node", "is not an occupied provider", "listed twice")


@pytest.mark.parametrize("name", sorted(BASELINES))
def test_baselines_on_a_generated_cluster_respect_capacity_and_predicates(name: str,
                                                                          generated: RepackProblem) -> None:
    result: PlanResult = BASELINES[name](generated, OPTS)
    assert result.plan.freed_nodes
    assert_moves_fit(generated, result.plan)
    violations = plan_violations(generated, result.plan, claimed=result.disruption)
    assert not [v for v in violations if any(s in v for s in ALWAYS_FORBIDDEN)], violations
    if name != "descheduler":  # only the descheduler evicts from nodes it does not free
        assert not [v for v in violations if "which is not vacated" in v or "still holds" in v], violations
    freed = set(result.plan.freed_nodes)
    assert all(m.from_node in freed for m in result.plan.moves) or name == "descheduler"


# ---- Karpenter's Balanced policy ------------------------------------------------------------------

@pytest.mark.parametrize(("savings", "pool", "disruption", "pool_disruption", "score"), [
    (7.26, 58.08, 3, 80, 3.33),     # the design's "oversized node" example: approved at k = 2
    (2.42, 58.08, 8, 80, 0.42),     # its "marginal move": rejected (< 0.5)
    (2.42, 48.40, 8, 80, 0.50),     # its "uniform pool replace": exactly 1/k
    (0.0, 10.0, 1, 10, 0.0),        # no savings: never approved
])
def test_balanced_score_is_the_designs(savings: float, pool: float, disruption: float, pool_disruption: float,
                                       score: float) -> None:
    assert balanced_score(savings, pool, disruption, pool_disruption) == pytest.approx(score, abs=0.005)


def _costly() -> RepackProblem:
    """n1's one pod has priority 9 × 2^25 (eviction cost 10, node cost 11); n2's pod is held by a PDB (node
    cost 2); n3 is empty (cost 1). Pool: 24 cards, disruption 14. Deleting n1: (8/24) / (11/14) = 0.42."""
    return problem(node("n1"), node("n2"), node("n3"), podgroup("pg"),
                   *gpu_pods("n1", [1], priority=9 * 2**25), *gpu_pods("n2", [1], labels={"app": "x"}),
                   pdb("keep", {"app": "x"}, 0))


def test_balanced_refuses_a_move_whose_disruption_outweighs_its_savings() -> None:
    p = _costly()
    assert karpenter_multi_node(p, OPTS).plan.freed_nodes == ("n1",)  # WhenEmptyOrUnderutilized moves it
    refused = karpenter_balanced(p, OPTS)
    assert refused.plan.moves == () and refused.stats["candidates"] == 0
    looser = karpenter_balanced(p, OPTS, k=3)  # threshold 1/3 < 0.42: approved
    assert looser.plan.freed_nodes == ("n1",)


@pytest.mark.parametrize(("pods", "freed"), [
    # the best-ranked node (one pod per node: the best score) holds a whole-node pod that fits nowhere, so every
    # multi-node prefix fails at it; single-node consolidation takes the next candidate that drains alone
    ({"n1": [8], "n2": [1], "n3": [2, 2, 2]}, ("n2",)),
    # multi-node first: the longest prefix that drains (n1, n2 onto n4 and n3), not one node
    ({"n1": [1], "n2": [1], "n3": [2, 2, 2], "n4": [2, 2]}, ("n1", "n2")),
    # no node drains alone or together: nothing
    ({"n1": [8], "n2": [4, 4]}, ()),
])
def test_balanced_runs_single_node_consolidation_after_multi_node(pods: dict[str, list[int]],
                                                                 freed: tuple[str, ...]) -> None:
    p = problem(*(node(n) for n in sorted(pods)), podgroup("pg"),
                *(q for n, sizes in sorted(pods.items()) for q in gpu_pods(n, sizes)))
    result = karpenter_balanced(p, OPTS)
    assert result.plan.freed_nodes == freed
    assert {m.from_node for m in result.plan.moves} == set(freed)
    assert plan_violations(p, result.plan, claimed=result.disruption) == []
