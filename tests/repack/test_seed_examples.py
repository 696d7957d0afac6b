"""The worked examples of seed 000, as tests."""

from __future__ import annotations

from fractions import Fraction

from optplan.cli import main
from optplan.solvers.binpack.frag import FragReport, fragmentation
from optplan.solvers.repack.rules import RepackProblem, Weights
from optplan.solvers.repack.run import plan_repack
from tests.builders import GPU, load_with_run, node, pod, podgroup, repack_run


def test_twenty_node_arithmetic() -> None:
    """20 NPU nodes, 15 occupied, theoretical minimum 12; freeing 2: 15% -> 5%, 10 points."""
    f = FragReport("npu", providers=20, occupied=15, theoretical_min=12, proven=True, upper_bound=12)
    assert f.percent() == 15
    assert f.percent(13) == 5
    assert f.percent() - f.percent(13) == 10


def _twenty_nodes(min_improvement: float, budget_cards: int) -> tuple[int, int, str, list[str]]:
    """Nine full nodes, six half-full ones and five idle: 15 occupied, minimum 12 (96 cards / 8)."""
    objs = [node(f"n{i:02d}") for i in range(20)]
    for i in range(9):
        objs.append(podgroup(f"full-{i}", 8, labels={"protected": "true"}))
        objs += [pod(f"full-{i}-{k}", f"n{i:02d}", group=f"full-{i}") for k in range(8)]
    for i in range(9, 15):
        objs.append(podgroup(f"half-{i}", 4))
        objs += [pod(f"half-{i}-{k}", f"n{i:02d}", group=f"half-{i}") for k in range(4)]
    objs.append(repack_run(min_improvement=min_improvement, max_per_run={"resources": {GPU: budget_cards}},
                           scope={"podGroups": {"exclude": {"selector": {"matchLabels": {"protected": "true"}}}}}))
    loaded, run = load_with_run(*objs)
    out = plan_repack(loaded.snapshot, run)
    s = out.status.plan.summary
    return s.frag_before_percent, s.frag_after_percent, out.reason, list(out.status.plan.freed_nodes)


def test_twenty_node_snapshot_meets_threshold_exactly() -> None:
    before, after, reason, freed = _twenty_nodes(10, 8)
    assert (before, after) == (15, 5)
    assert len(freed) == 2
    assert reason == "RepackRecommended"  # 10 points reach a threshold of exactly 10


def test_twenty_node_snapshot_below_threshold() -> None:
    before, after, reason, freed = _twenty_nodes(15, 8)
    assert (before, after, len(freed)) == (15, 5, 2)
    assert reason == "InsufficientImprovement"  # the plan is still shown


def test_twenty_node_snapshot_without_budget_reaches_minimum() -> None:
    before, after, reason, freed = _twenty_nodes(10, 1000)
    assert (before, after, len(freed), reason) == (15, 0, 3, "RepackRecommended")


def test_three_node_dryrun_matches_seed_output(capsys) -> None:  # type: ignore[no-untyped-def]
    """Seed 000 步骤四: 33% -> 0%, ascend-node-01 freed, worker-0 -> node-02, worker-1 -> node-03."""
    assert main(["repack", "instances/seed-dryrun.yaml", "-o", "json"]) == 0
    import json

    doc = json.loads(capsys.readouterr().out)
    status = doc["status"]
    assert status["phase"] == "Succeeded"
    assert status["conditions"][0]["reason"] == "RepackRecommended"
    summary = status["plan"]["summary"]
    assert (summary["fragBeforePercent"], summary["fragAfterPercent"]) == (33, 0)
    assert (summary["freedNodeCount"], summary["movedCardCount"]) == (1, 2)
    assert summary["resolvedScope"] == {"podGroupCount": 1, "nodeCount": 3}
    assert status["plan"]["freedNodes"] == ["ascend-node-01"]
    (move,) = status["plan"]["moves"]
    assert move["owner"] == {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                             "name": "ascend-batch-training"}
    assert move["cards"] == 2
    assert [(p["name"], p["fromNode"], p["toNode"], p["cards"]) for p in move["pods"]] == [
        ("ascend-batch-training-worker-0", "ascend-node-01", "ascend-node-02", 1),
        ("ascend-batch-training-worker-1", "ascend-node-01", "ascend-node-03", 1),
    ]


def _gang_problem() -> RepackProblem:
    objs = [node("a"), node("b"), node("c"), podgroup("train", 6)]
    objs += [pod(f"w{i}", "a" if i < 4 else "b", group="train") for i in range(8)]
    objs.append(repack_run())
    loaded, run = load_with_run(*objs)
    return RepackProblem(loaded.snapshot, run)


def test_gang_eight_running_min_available_six() -> None:
    """Moving 1-2 workers keeps minAvailable; the third breaches and the whole footprint counts."""
    p = _gang_problem()
    pods = [p.snapshot.pods[f"default/w{i}"] for i in range(8)]
    assert p.gangs["default/train"].safe == 2
    one, two, three = (p.disruption(pods[:k]) for k in (1, 2, 3))
    assert (one.below_min_available, one.affected_cards) == (0, 1000)
    assert (two.below_min_available, two.affected_cards) == (0, 2000)
    assert (three.below_min_available, three.affected_cards) == (1, 8000)  # all 8 cards of the group


def _abc(weights: Weights | None = None) -> list[str]:
    """Three candidates each freeing one node by moving 3 cards; the budget allows one of them.

    A (n3-a): 3 pods of one workload, still above minAvailable.
    B (n1-b): 3 workloads, one pod each, each still above minAvailable.
    C (n2-c): 1 workload that falls below minAvailable.
    """
    protected = {"protected": "true"}
    objs = [node("n1-b"), node("n2-c"), node("n3-a"), node("recv"), node("pool", 16),
            podgroup("wa", 5), podgroup("wb1", 1), podgroup("wb2", 1), podgroup("wb3", 1), podgroup("wc", 3),
            podgroup("keep", 1, labels=protected)]
    objs += [pod(f"a{i}", "n3-a" if i < 3 else "pool", group="wa") for i in range(8)]
    for b in ("wb1", "wb2", "wb3"):
        objs += [pod(f"{b}-0", "n1-b", group=b), pod(f"{b}-1", "pool", group=b)]
    objs += [pod(f"c{i}", "n2-c" if i < 3 else "pool", group="wc") for i in range(4)]
    objs += [pod("keep-recv", "recv", 5, group="keep"), pod("keep-pool", "pool", 7, group="keep")]
    objs.append(repack_run(scope={"podGroups": {"exclude": {"selector": {"matchLabels": protected}}},
                                  "nodes": {"exclude": {"names": ["pool"]}}},
                          max_per_run={"resources": {GPU: 3}}))
    loaded, run = load_with_run(*objs)
    out = plan_repack(loaded.snapshot, run, weights=weights)
    return list(out.status.plan.freed_nodes)


def test_abc_scoring_prefers_a() -> None:
    assert _abc() == ["n3-a"]


def test_abc_scoring_weights_are_configurable() -> None:
    # With every weight zero all candidates tie on score and gain; the node name decides.
    assert _abc(Weights(0, 0, 0, 0, 0)) == ["n1-b"]
    # Caring only about minAvailable breaches: A and B tie (no breach), B wins on name.
    assert _abc(Weights(0, 1, 0, 0, 0)) == ["n1-b"]


def test_theoretical_minimum_is_exact_not_the_power_of_two_formula() -> None:
    """Four 5-card pods on 8-card nodes: ceil(20/8) = 3 is a bound; the answer is 4."""
    objs = [node(f"n{i}") for i in range(5)]
    objs += [podgroup("pg")] + [pod(f"p{i}", f"n{i}", 5) for i in range(4)]
    loaded, _ = load_with_run(*objs, repack_run())
    f = fragmentation(loaded.snapshot, GPU)
    assert (f.occupied, f.theoretical_min, f.proven) == (4, 4, True)
    assert f.percent() == Fraction(0)


def test_theoretical_minimum_heterogeneous_nodes() -> None:
    """Pods 6+2+4+4 cards on nodes of 8, 8, 4, 4 cards: two 8-card nodes hold them all."""
    objs = [node("big1", 8), node("big2", 8), node("s1", 4), node("s2", 4), podgroup("pg")]
    objs += [pod("p6", "big1", 6), pod("p2", "s1", 2), pod("p4a", "s2", 4), pod("p4b", "big2", 4)]
    loaded, _ = load_with_run(*objs, repack_run())
    f = fragmentation(loaded.snapshot, GPU)
    assert (f.providers, f.occupied, f.theoretical_min) == (4, 4, 2)
    assert f.percent() == 50


def test_over_committed_snapshot_still_measures() -> None:
    """Pods requesting more than the providers hold (a momentarily over-committed snapshot): the
    metric does not fail; it falls back to the occupied count and says it is not proven."""
    objs = [node("n0", 4), node("n1", 4), podgroup("pg"), pod("a", "n0", 4), pod("b", "n0", 3), pod("c", "n1", 4)]
    loaded, _ = load_with_run(*objs, repack_run())
    f = fragmentation(loaded.snapshot, GPU)
    assert (f.occupied, f.theoretical_min, f.proven) == (2, 2, False)
