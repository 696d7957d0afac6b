"""Exact Repack at scale, in small: the model splits into independent parts (node pools, in practice)
whose optima together are the optimum of the whole model, and its redundant rows cut no plan off.
One worker, fixed seed, short limits."""

from __future__ import annotations

from typing import Any

import pytest

from optplan.adapters.generate import GenConfig, generate
from optplan.adapters.kubefile import load_objects
from optplan.models.repack import RepackPlan
from optplan.solvers.binpack.frag import fragmentation
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.repack.base import get_planner
from optplan.solvers.repack.exact import cpsat
from optplan.solvers.repack.exact import model as repack_model
from optplan.solvers.repack.exact.model import ModelData, build_data, components, scaled_cost
from optplan.solvers.repack.rules import RepackProblem
from optplan.solvers.repack.validate import plan_violations
from tests.builders import load_with_run, node, pdb, pod, podgroup, repack_run
from tests.repack.test_exact import _bounded

OPTS = PlanOptions(time_limit=20, workers=1, seed=0)


def _bound(p: RepackProblem) -> RepackProblem:
    f = fragmentation(p.snapshot, p.resource)
    p.freed_upper = min(f.occupied - f.theoretical_min, p.budget_freed_upper())
    return p


def _generated(seed: int) -> RepackProblem:
    """Two or three tainted pools; by seed, PDBs, racks with topology gangs, a PodGroup budget."""
    cfg = GenConfig(nodes=30, pools=2 + seed % 2, occupancy=0.55, seed=seed, pdb_share=0.3 if seed % 3 == 0 else 0.0,
                    rack_size=3 if seed % 4 == 1 else 0, racks_per_spine=2, topology_share=0.5,
                    max_pod_groups=4 if seed == 6 else None)
    loaded = load_objects(generate(cfg))
    return _bound(RepackProblem(loaded.snapshot, next(iter(loaded.runs.values()))))


def _key(data: ModelData, plan: RepackPlan | None) -> tuple[int, int]:
    assert plan is not None
    return len(plan.freed_nodes), scaled_cost(data, plan)


@pytest.mark.parametrize("seed", range(8))
def test_parts_reach_the_optimum_of_the_whole(seed: int) -> None:
    p = _generated(seed)
    data = build_data(p)
    hint = get_planner("greedy").plan(p, OPTS).plan
    parts = cpsat.solve(p, OPTS, hint=hint)
    whole = cpsat.solve(p, OPTS, hint=hint, decompose=False)
    assert parts.status == whole.status == "OPTIMAL"
    assert _key(data, parts.plan) == _key(data, whole.plan) == (parts.freed_bound, parts.objective)
    assert parts.objective == parts.bound
    split = components(data)
    assert parts.parts == parts.parts_proven == len(split)
    pools = [{p.snapshot.nodes[c].labels["optplan.io/pool"] for c in part} for part in split]
    if seed == 6:  # a budget spans every pool
        assert len(split) == 1 and len(pools[0]) > 1
    else:  # one part per pool
        assert len(split) >= 2 and all(len(x) == 1 for x in pools)
    assert parts.plan is not None and plan_violations(p, parts.plan) == []


def _unconstrained_optimum(p: RepackProblem, monkeypatch: pytest.MonkeyPatch) -> tuple[int, int]:
    with monkeypatch.context() as mp:
        mp.setattr(ModelData, "room_rows", lambda self: [])
        out = cpsat.solve(p, OPTS)
    assert out.status == "OPTIMAL"
    return _key(out.data, out.plan)


@pytest.mark.parametrize("family, seed", [("random", s) for s in range(0, 40, 6)] + [("generated", s) for s in (0, 2)])
def test_room_rows_cut_off_no_plan(family: str, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The redundant total-room rows leave the optimum where the capacity rows alone put it."""
    p = _bounded(seed) if family == "random" else _generated(seed)
    out = cpsat.solve(p, OPTS)
    assert out.status == "OPTIMAL"
    assert out.data.room_rows(), "the family must exercise the rows"
    assert _key(out.data, out.plan) == _unconstrained_optimum(p, monkeypatch)


def test_a_limit_too_short_for_cpsat_keeps_the_hint_part_by_part() -> None:
    p = _generated(2)
    data = build_data(p)
    hint = get_planner("greedy").plan(p, OPTS).plan
    out = cpsat.solve(p, PlanOptions(time_limit=0.01), hint=hint)
    assert out.plan is not None and plan_violations(p, out.plan) == []
    assert _key(data, out.plan)[0] >= len(hint.freed_nodes)
    assert out.freed_bound >= len(out.plan.freed_nodes)


def test_auto_says_how_many_parts_it_proved() -> None:
    out = get_planner("auto").plan(_generated(1), OPTS)
    assert out.record.status == "OPTIMAL" and out.record.gap_percent == 0.0
    assert out.stats["components"] == out.stats["componentsProven"] == 3


@pytest.mark.parametrize("solver", ["cpsat", "milp", "auto"])
def test_a_pruned_model_claims_no_bound_of_its_own(solver: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """With receivers pruned the model is a restriction: what a solver proves holds for it alone, so
    the record keeps the global freed bound, no disruption bound and no proof, and the plan is valid."""
    p = _generated(0)
    whole = cpsat.solve(p, OPTS)
    assert whole.status == "OPTIMAL" and not whole.data.pruned
    monkeypatch.setattr(repack_model, "MAX_ARCS", 10)
    monkeypatch.setattr(repack_model, "MIN_RECEIVERS", 1)
    out = get_planner(solver).plan(p, OPTS)
    assert out.stats["receiversPruned"] == 1
    assert out.record.status == "FEASIBLE"
    assert out.record.freed_nodes_bound == min(len(p.candidates), p.freed_upper) >= whole.freed_bound
    assert out.record.best_bound is None
    assert out.stats.get("componentsProven", 0) == 0
    assert plan_violations(p, out.plan, claimed=out.disruption) == []


def test_auto_solves_whole_a_model_whose_admitted_pairs_fit(monkeypatch: pytest.MonkeyPatch) -> None:
    """The size decision counts the (pod class, receiver) pairs the predicates admit, not classes ×
    occupied nodes: with tainted pools most pairs are not allowed, and a model that fits is solved whole
    (no pruning, no neighbourhood search, a proof); one pair fewer allowed and auto takes the LNS."""
    p = _generated(1)
    classes, _ = repack_model.pod_classes(p)
    pairs = repack_model.admitted_pairs(p, classes)
    assert 0 < pairs < len(classes) * (len(p.occupied) - 1)
    monkeypatch.setattr(repack_model, "MAX_ARCS", pairs)
    out = get_planner("auto").plan(p, OPTS)
    assert out.stats["receiversPruned"] == 0 and out.stats["sendVariables"] == pairs
    assert "lnsSteps" not in out.stats and out.record.status == "OPTIMAL"
    monkeypatch.setattr(repack_model, "MAX_ARCS", pairs - 1)
    assert "lnsSteps" in get_planner("auto").plan(p, OPTS).stats


@pytest.mark.parametrize("seed", range(6))
def test_the_budget_relaxation_bounds_the_optimum(seed: int) -> None:
    """CP-SAT's budget bound is never below the proven optimum, nor above the budget's count bound."""
    cfg = GenConfig(nodes=24, pools=2, occupancy=0.55, seed=seed, pdb_share=0.4 if seed % 2 else 0.0,
                    max_pod_groups=2 + seed)
    loaded = load_objects(generate(cfg))
    p = _bound(RepackProblem(loaded.snapshot, next(iter(loaded.runs.values()))))
    data = build_data(p, freed_upper=p.freed_upper)
    bound = cpsat.budget_bound(data, OPTS, 10)
    best = cpsat.solve(p, OPTS)
    assert best.status == "OPTIMAL" and best.plan is not None
    assert len(best.plan.freed_nodes) <= (bound if bound is not None else -1) <= p.freed_upper
    assert len(data.relaxed) == bound  # the relaxation's solution, which guides auto's search


def test_the_budget_relaxation_sees_podgroups_the_count_bound_does_not() -> None:
    """One gang spread over four nodes, each node also running a pod of its own PodGroup: the count bound
    lets a one-PodGroup budget free all four nodes (the gang is on four), but vacating any node
    touches two PodGroups. auto reports the bound 0, proven, and moves nothing."""
    objs: list[dict[str, Any]] = [node(f"n{i}", 8) for i in range(6)]
    objs += [podgroup("gang", 1), *[podgroup(f"solo{i}") for i in range(4)]]
    objs += [pod(f"g{i}", f"n{i}", 1, group="gang") for i in range(4)]
    objs += [pod(f"s{i}", f"n{i}", 1, group=f"solo{i}") for i in range(4)]
    objs += [pod("big4", "n4", 7, group="solo0"), pod("big5", "n5", 7, group="solo1")]
    loaded, run = load_with_run(*objs, repack_run(max_per_run={"podGroups": 1}))
    p = _bound(RepackProblem(loaded.snapshot, run))
    assert p.budget_freed_upper() == 4 and p.freed_upper >= 1
    assert cpsat.budget_bound(build_data(p, freed_upper=p.freed_upper), OPTS, 10) == 0
    out = get_planner("auto").plan(p, OPTS)
    assert out.record.freed_nodes_bound == 0 and out.record.status == "OPTIMAL" and not out.plan.freed_nodes


# ---- what joins candidates into one part ------------------------------------------------------

def _pooled(*extra: dict[str, Any], budget: dict[str, Any] | None = None, spanning: bool = False,
            stuck: bool = False) -> list[list[str]]:
    """Pools a and b of two 8-card nodes each, one 2-card pod on each node, every pod pinned to its
    pool. ``spanning``: one PodGroup on both pools; ``stuck``: a1's pod may run on a1 only."""
    def pinned(name: str, at: str, group: str, only: bool = False) -> dict[str, Any]:
        return pod(name, at, 2, group=group, node_selector={"pool": at[0], **({"only": at} if only else {})},
                   labels={"app": group, "team": "t"})

    objs = [node(n, 8, labels={"pool": n[0], "only": n}) for n in ("a1", "a2", "b1", "b2")]
    objs += [podgroup("ga"), podgroup("gb"), podgroup("gab", 1)]
    objs += [pinned("pa1", "a1", "ga", only=stuck), pinned("pa2", "a2", "ga"),
             pinned("pb1", "b1", "gab" if spanning else "gb"), pinned("pb2", "b2", "gb")]
    if spanning:
        objs.append(pinned("pab", "a2", "gab"))
    loaded, run = load_with_run(*objs, *extra, repack_run(max_per_run=budget))
    return components(build_data(RepackProblem(loaded.snapshot, run)))


def test_one_part_per_pool() -> None:
    assert _pooled() == [["a1", "a2"], ["b1", "b2"]]


def test_a_podgroup_on_two_pools_joins_them() -> None:
    assert _pooled(spanning=True) == [["a1", "a2", "b1", "b2"]]


def test_a_pdb_on_two_pools_joins_them() -> None:
    assert _pooled(pdb("a", {"app": "ga"}, 1), pdb("b", {"app": "gb"}, 1)) == [["a1", "a2"], ["b1", "b2"]]
    assert _pooled(pdb("team", {"team": "t"}, 1)) == [["a1", "a2", "b1", "b2"]]


def test_a_budget_joins_every_candidate() -> None:
    assert _pooled(budget={"podGroups": 1}) == [["a1", "a2", "b1", "b2"]]
    assert _pooled(budget={"resources": {"nvidia.com/gpu": "4"}}) == [["a1", "a2", "b1", "b2"]]


def test_a_node_whose_pod_fits_nowhere_is_in_no_part() -> None:
    assert _pooled(stuck=True) == [["b1", "b2"], ["a2"]]
