"""Per-pool Repack by pod shape (``pools``): on seeded mixed clusters (4- and 8-card nodes in tainted
pools) small enough to solve the whole exact model, the parts solved by shape and merged reach the
whole model's optimum, plans are valid, budgets that couple the pools keep them in one part, and the
same input gives the same plan. One worker, fixed seed."""

from __future__ import annotations

from dataclasses import replace

import pytest

from optplan.adapters.generate import GenConfig, generate
from optplan.adapters.kubefile import load_objects
from optplan.models.repack import RepackPlan
from optplan.solvers.binpack.frag import fragmentation
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.repack.base import get_planner
from optplan.solvers.repack.exact import cpsat, pools
from optplan.solvers.repack.exact import model as repack_model
from optplan.solvers.repack.exact.model import (
    admitted_pairs,
    build_data,
    components,
    merge_plans,
    pod_classes,
    scaled_cost,
)
from optplan.solvers.repack.rules import RepackProblem
from optplan.solvers.repack.run import plan_repack
from optplan.solvers.repack.validate import plan_violations

OPTS = PlanOptions(time_limit=20, workers=1, seed=0)


def _mixed(seed: int, nodes: int = 40, **kw: object) -> RepackProblem:
    cfg = GenConfig(nodes=nodes, cards_per_node=(4, 8), pools=2 + seed % 2, occupancy=0.6, seed=seed, **kw)  # type: ignore[arg-type]
    loaded = load_objects(generate(cfg))
    p = RepackProblem(loaded.snapshot, next(iter(loaded.runs.values())))
    f = fragmentation(p.snapshot, p.resource)
    p.freed_upper = min(f.occupied - f.theoretical_min, p.budget_freed_upper())
    return p


def _solve(p: RepackProblem, opts: PlanOptions = OPTS) -> pools.PoolsOutcome:
    data = build_data(p, freed_upper=p.freed_upper)
    clock = opts.timer()
    opts = replace(opts, clock=clock)
    out = pools.solve(data, RepackPlan(), opts, clock.now() + opts.time_limit)
    assert out is not None
    return out


@pytest.mark.parametrize("seed", range(4))
def test_the_pools_solved_by_shape_free_as_many_as_the_whole_exact_model(seed: int) -> None:
    p = _mixed(seed)
    whole = cpsat.solve(p, OPTS, decompose=False)
    assert whole.status == "OPTIMAL" and whole.plan is not None
    out = _solve(p)
    assert out.optimal and len(out.parts) == len(components(whole.data)) > 1
    assert plan_violations(p, out.plan) == []
    # the same lexicographic optimum: as many freed nodes, as little disruption
    assert len(out.plan.freed_nodes) == len(whole.plan.freed_nodes) == out.freed_bound
    assert scaled_cost(whole.data, out.plan) == scaled_cost(whole.data, whole.plan)


def test_chunks_of_a_large_pool_give_a_valid_plan_within_the_optimum(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks are a restriction: their merged plan is valid and frees at most the part's optimum; the
    whole part's solve after them still proves the optimum."""
    p = _mixed(1, nodes=60)
    whole = cpsat.solve(p, OPTS, decompose=False)
    assert whole.status == "OPTIMAL" and whole.plan is not None
    monkeypatch.setattr(pools, "CHUNK", 8)
    out = _solve(p)
    assert plan_violations(p, out.plan) == []
    assert len(out.plan.freed_nodes) == len(whole.plan.freed_nodes) and out.optimal


def test_auto_solves_each_pool_by_shape_when_the_model_is_too_large(monkeypatch: pytest.MonkeyPatch) -> None:
    """Above MAX_ARCS (pod class, receiver) pairs auto cannot solve the model whole; when the models by
    shape fit, it solves each pool so, and the plan is the whole model's optimum: OPTIMAL, and its bound
    is the freed nodes."""
    p = _mixed(2)
    whole = cpsat.solve(p, OPTS, decompose=False)
    assert whole.status == "OPTIMAL" and whole.plan is not None
    shapes = max(sm.size for _, sm in pools.prepare(build_data(p)) if sm is not None)
    assert admitted_pairs(p, pod_classes(p)[0]) > shapes
    monkeypatch.setattr(repack_model, "MAX_ARCS", shapes)
    run = p.run
    out = plan_repack(p.snapshot, run, solver="auto", options=OPTS).result  # validated there
    assert out.stats["receiversPruned"] == 1 and out.stats["poolParts"] > 1
    assert out.record.status == "OPTIMAL"
    assert len(out.plan.freed_nodes) == len(whole.plan.freed_nodes) == out.record.freed_nodes_bound
    assert plan_violations(p, out.plan) == []


def test_a_podgroup_budget_keeps_the_pools_in_one_part() -> None:
    """maxPerRun.podGroups spans every pool: one part (no decomposition), and the plan keeps to it."""
    p = _mixed(3, max_pod_groups=2)
    assert p.run.spec.max_per_run.pod_groups == 2
    data = build_data(p, freed_upper=p.freed_upper)
    assert len({p.snapshot.nodes[c].labels["optplan.io/pool"] for c in data.candidates}) > 1
    assert len(components(data)) == 1
    out = _solve(p)
    assert len(out.parts) == 1
    assert plan_violations(p, out.plan) == []
    assert p.plan_disruption(out.plan).affected_pod_groups <= 2
    whole = cpsat.solve(p, OPTS, decompose=False)
    assert whole.status == "OPTIMAL" and whole.plan is not None
    assert len(out.plan.freed_nodes) == len(whole.plan.freed_nodes)


def test_a_pdb_across_pools_joins_them() -> None:
    """A PDB covering pods of two pools couples their parts: they are solved as one, within the PDB."""
    p = _mixed(0, pdb_share=1.0)
    data = build_data(p, freed_upper=p.freed_upper)
    for part in components(data):
        for by_node in data.pdb_use.values():
            assert set(by_node) <= set(part) or not set(by_node) & set(part)
    out = _solve(p)
    assert plan_violations(p, out.plan) == []


def test_a_topology_gang_is_not_solved_by_shape() -> None:
    """Where a PodGroup's pods go decides its topology region: a part with one has no model by shape."""
    p = _mixed(1, rack_size=3, racks_per_spine=2, topology_share=0.5)
    data = build_data(p, freed_upper=p.freed_upper)
    prepared = pools.prepare(data)
    assert any(part.topo_regions for part, _ in prepared)
    assert all((sm is None) == bool(part.topo_regions) for part, sm in prepared)


def test_one_input_gives_one_plan() -> None:
    p = _mixed(2, nodes=60)
    det = replace(OPTS, deterministic=True, time_limit=5)
    plans = {_solve(p, det).plan for _ in range(2)}
    assert len(plans) == 1
    assert plan_violations(p, plans.pop()) == []


def test_the_greedy_by_shape_gives_a_valid_plan() -> None:
    p = _mixed(3)
    data = build_data(p, freed_upper=p.freed_upper)
    plan = merge_plans([pools.greedy(sm) for _, sm in pools.prepare(data) if sm is not None])
    assert plan.freed_nodes and plan_violations(p, plan) == []
    assert plan == merge_plans([pools.greedy(sm) for _, sm in pools.prepare(data) if sm is not None])


def test_auto_keeps_its_greedy_path_when_a_part_has_no_model_by_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every model too large, even by shape: auto runs the greedy and the LNS, as before."""
    p = _mixed(0)
    monkeypatch.setattr(repack_model, "MAX_ARCS", 1)
    monkeypatch.setattr(repack_model, "MIN_RECEIVERS", 1)
    out = get_planner("auto").plan(p, replace(OPTS, time_limit=3))
    assert "lnsSteps" in out.stats and out.stats["poolParts"] == len(components(build_data(p)))
    assert out.stats["poolPartsProven"] == 0
    assert plan_violations(p, out.plan) == []
