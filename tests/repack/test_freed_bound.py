"""The pool bound on freed nodes (``repack.exact.bound``, issue 17 §2): never below what an exact optimum frees,
never above occupied − theoretical minimum, the same every time, and strictly tighter where pools,
pinned pods and scope.nodes matter. Exact optima come from CP-SAT (one worker) with OPTIMAL status."""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest

from optplan.adapters.generate import GenConfig, generate
from optplan.adapters.kubefile import load_objects
from optplan.solvers.binpack.frag import fragmentation
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.repack.exact import cpsat
from optplan.solvers.repack.exact.bound import freed_upper, pool_bound
from optplan.solvers.repack.rules import RepackProblem
from optplan.solvers.repack.run import plan_repack
from tests.builders import load_with_run, node, pod, podgroup, repack_run
from tests.repack.test_greedy_reference import random_cluster

OPTS = PlanOptions(time_limit=20, workers=1, seed=0)
POOL = "optplan.io/pool"


def pooled_cluster(seed: int) -> RepackProblem:
    """A small generated cluster: two or three pools (all but pool-0 tainted), 4- and 8-card nodes,
    protected and Pending pods (pinned), pods of other schedulers, and on every third seed a scope.nodes
    that leaves two nodes out (they cannot be vacated, but receive)."""
    rng = random.Random(seed)
    cfg = GenConfig(nodes=rng.choice([12, 14, 16]), pools=rng.choice([2, 3]), cards_per_node=(4, 8),
                    occupancy=rng.choice([0.45, 0.55, 0.65]), protected_share=0.2, pending_share=0.05,
                    non_volcano_share=0.05, seed=seed)
    objs: list[dict[str, Any]] = generate(cfg)
    if seed % 3 == 0:
        names = sorted(o["metadata"]["name"] for o in objs if o["kind"] == "Node")
        for o in objs:
            if o["kind"] == "RepackRun":
                o["spec"]["scope"] = {"nodes": {"exclude": {"names": rng.sample(names, 2)}}}
    loaded = load_objects(objs)
    return RepackProblem(loaded.snapshot, next(iter(loaded.runs.values())))


def old_bound(p: RepackProblem) -> int:
    f = fragmentation(p.snapshot, p.resource)
    return min(f.occupied - f.theoretical_min, p.budget_freed_upper())


def exact_optimum(p: RepackProblem) -> int:
    """Most freed nodes, proven by CP-SAT on the whole model bounded by the old bound only."""
    p.freed_upper = old_bound(p)
    out = cpsat.solve(p, OPTS)
    assert out.status == "OPTIMAL" and out.plan is not None
    return len(out.plan.freed_nodes)


FAMILY = [("pooled", s) for s in range(24)] + [("random", s) for s in range(0, 40, 3)]


def problem(kind: str, seed: int) -> RepackProblem:
    return pooled_cluster(seed) if kind == "pooled" else random_cluster(seed)


@pytest.mark.parametrize(("kind", "seed"), FAMILY)
def test_never_below_the_exact_optimum_nor_above_the_old_bound(kind: str, seed: int) -> None:
    p = problem(kind, seed)
    bound = pool_bound(p).value
    assert bound >= exact_optimum(p)
    f = fragmentation(p.snapshot, p.resource)
    assert freed_upper(p, f) == min(old_bound(p), bound) <= old_bound(p)


def test_tighter_than_the_old_bound_on_much_of_the_family() -> None:
    """Pools, taints, pinned pods and mixed node sizes: the old bound is loose, the pool bound mostly exact."""
    tighter = exact = 0
    for seed in range(24):
        p = pooled_cluster(seed)
        bound, old = pool_bound(p).value, old_bound(p)
        tighter += bound < old
        exact += bound == exact_optimum(p)
    assert tighter >= 20 and exact >= 20  # 24 tighter and 24 exact of 24 when written


@pytest.mark.parametrize("seed", [0, 3, 7])
def test_the_same_every_time(seed: int) -> None:
    """The same bound, pool by pool, on the same cluster and on its objects read in reverse order."""
    p = pooled_cluster(seed)
    first = pool_bound(p)
    assert pool_bound(p) == first
    objs = generate(GenConfig(nodes=14, pools=3, cards_per_node=(4, 8), protected_share=0.2, seed=seed))
    a, b = load_objects(objs), load_objects(list(reversed(objs)))
    pa = RepackProblem(a.snapshot, next(iter(a.runs.values())))
    pb = RepackProblem(b.snapshot, next(iter(b.runs.values())))
    assert pool_bound(pa) == pool_bound(pb)


# ---- by hand --------------------------------------------------------------------------------------------
#
# In each cluster the theoretical minimum packs the cards onto one node fewer than any plan can: the pool
# bound sees why (pools, pinned pods, scope.nodes) and the exact planner agrees.

def _sel(pool: str) -> dict[str, Any]:
    return {"node_selector": {"pool": pool},
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": pool, "effect": "NoSchedule"}]}


TAINT_B = [{"key": "dedicated", "value": "b", "effect": "NoSchedule"}]
PROTECTED = {"karpenter.sh/do-not-disrupt": "true"}

CASES: dict[str, list[dict[str, Any]]] = {
    # n1, n2 (pool a) hold 4+1 cards each: no 4-card hole for the other's pod; n3 (pool b) has no peer.
    "pools": [node("n1", 8, labels={"pool": "a"}), node("n2", 8, labels={"pool": "a"}),
              node("n3", 8, labels={"pool": "b"}, taints=TAINT_B),
              pod("p1", "n1", 4, **_sel("a")), pod("p2", "n1", 1, **_sel("a")),
              pod("p3", "n2", 4, **_sel("a")), pod("p4", "n2", 1, **_sel("a")), pod("p5", "n3", 1, **_sel("b")),
              podgroup("pg"), repack_run()],
    # n1 and n2 each hold a 3-card pod that must not move (the minimum puts both on one node): their 5-card
    # holes take no 6-card pod, nor do n3's and n4's 2-card holes.
    "pinned": [node("n1", 8), node("n2", 8), node("n3", 8), node("n4", 8),
               pod("p1", "n1", 3), pod("p2", "n2", 3), pod("p3", "n3", 6), pod("p4", "n4", 6), podgroup("pg"),
               repack_run()],
    # the same with n1 and n2 out of scope.nodes (unprotected): they stay.
    "scope": [node("n1", 8), node("n2", 8), node("n3", 8), node("n4", 8),
              pod("p1", "n1", 3), pod("p2", "n2", 3), pod("p3", "n3", 6), pod("p4", "n4", 6), podgroup("pg"),
              repack_run(scope={"nodes": {"exclude": {"names": ["n1", "n2"]}}})],
}


def _protect(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = copy.deepcopy(objs)
    for o in out:
        if o["kind"] == "Pod" and o["metadata"]["name"] in ("p1", "p2"):
            o["metadata"].setdefault("annotations", {}).update(PROTECTED)
    return out


@pytest.mark.parametrize(("case", "old", "new"), [("pools", 1, 0), ("pinned", 1, 0), ("scope", 1, 0)])
def test_strictly_tighter_by_hand(case: str, old: int, new: int) -> None:
    objs = _protect(CASES[case]) if case == "pinned" else CASES[case]
    loaded, run = load_with_run(*objs)
    p = RepackProblem(loaded.snapshot, run)
    assert (old_bound(p), pool_bound(p).value, exact_optimum(p)) == (old, new, new)
    # The bound reaches the status: auto reports it, and with a plan that frees as many, no gap.
    out = plan_repack(loaded.snapshot, run, solver="auto", options=OPTS)
    rec = out.result.record
    assert rec.freed_nodes_bound == new == len(out.result.plan.freed_nodes)
    assert rec.status == "OPTIMAL" and rec.gap_percent == 0


def test_auto_reports_the_pool_bound_on_a_generated_cluster() -> None:
    """60 nodes of 4 and 8 cards in three pools: freedNodesBound is the pool bound, below the old one."""
    loaded = load_objects(generate(GenConfig(nodes=60, pools=3, cards_per_node=(4, 8), seed=5)))
    run = next(iter(loaded.runs.values()))
    p = RepackProblem(loaded.snapshot, run)
    bound, old = pool_bound(p).value, old_bound(p)
    assert bound < old
    out = plan_repack(loaded.snapshot, run, solver="auto", options=OPTS)
    rec = out.result.record
    assert rec.freed_nodes_bound == bound
    assert len(out.result.plan.freed_nodes) <= bound
