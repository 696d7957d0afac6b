"""auto's large-neighbourhood search (``solvers.repack.exact.lns``), taken on small clusters by lowering the model
size above which auto uses it. One worker, fixed seed."""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest
from ortools.sat.python import cp_model

from optplan.adapters.generate import GenConfig, generate
from optplan.adapters.kubefile import load_files, load_objects
from optplan.solvers.binpack.frag import fragmentation
from optplan.solvers.core.exact import STRICT_ENV, ExactModelError
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.repack.base import get_planner
from optplan.solvers.repack.exact import cpsat, lns
from optplan.solvers.repack.exact import model as repack_model
from optplan.solvers.repack.exact.model import ModelData, build_data, scaled_cost
from optplan.solvers.repack.rules import RepackProblem
from optplan.solvers.repack.run import plan_repack
from optplan.solvers.repack.validate import plan_violations

OPTS = PlanOptions(time_limit=4, workers=1, seed=0)


@pytest.fixture
def big(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every model counts as too large to solve whole."""
    monkeypatch.setattr(repack_model, "MAX_ARCS", 1)
    monkeypatch.setattr(repack_model, "MIN_RECEIVERS", 1)


def _problem(loaded: object) -> RepackProblem:
    p = RepackProblem(loaded.snapshot, next(iter(loaded.runs.values())))  # type: ignore[attr-defined]
    f = fragmentation(p.snapshot, p.resource)
    p.freed_upper = min(f.occupied - f.theoretical_min, p.budget_freed_upper())
    return p


def test_lns_escapes_the_greedy_trap(big: None) -> None:
    """The greedy frees one node of the trap; a neighbourhood around the node it keeps frees both."""
    loaded = load_files(["instances/greedy-trap.yaml"])
    run = next(iter(loaded.runs.values()))
    greedy = plan_repack(loaded.snapshot, run, solver="greedy", options=OPTS)
    auto = plan_repack(loaded.snapshot, run, solver="auto", options=OPTS)
    assert len(greedy.result.plan.freed_nodes) == 1
    assert len(auto.result.plan.freed_nodes) == 2  # plan_repack validated it
    assert auto.result.stats["lnsImproved"] >= 1
    assert auto.result.record.status == "FEASIBLE" and auto.result.record.freed_nodes_bound == 2


@pytest.mark.parametrize("seed", range(4))
def test_lns_never_loses_to_its_start_and_breaks_no_rule(seed: int, big: None) -> None:
    cfg = GenConfig(nodes=40, pools=2, occupancy=0.55, seed=seed, rack_size=4 if seed % 2 else 0,
                    racks_per_spine=2, topology_share=0.5)
    p = _problem(load_objects(generate(cfg)))
    data = build_data(p, freed_upper=p.freed_upper, max_receivers=1)
    assert data.pruned
    start = get_planner("greedy-fast").plan(p, OPTS).plan
    import time

    plan, stats = lns.improve(data, start, OPTS, time.perf_counter() + 3)
    assert stats.steps > 0 and stats.rejected == 0
    assert plan_violations(p, plan) == []
    assert (len(plan.freed_nodes), -scaled_cost(data, plan)) >= (len(start.freed_nodes), -scaled_cost(data, start))


@pytest.mark.parametrize("seed", range(3))
def test_lns_keeps_to_the_budgets(seed: int, big: None) -> None:
    """What the fixed moves use of maxPerRun and the PDBs is taken off each neighbourhood's budget."""
    cfg = GenConfig(nodes=40, pools=2, occupancy=0.55, seed=seed, max_pod_groups=4, max_cards=12, pdb_share=0.4)
    p = _problem(load_objects(generate(cfg)))
    out = get_planner("auto").plan(p, OPTS)
    assert out.stats["lnsSteps"] > 0
    assert plan_violations(p, out.plan, claimed=out.disruption) == []
    assert out.disruption.affected_pod_groups <= 4 and out.disruption.moved_cards <= 12_000
    assert out.record.freed_nodes_bound is not None and out.record.freed_nodes_bound <= p.freed_upper


def test_a_neighbourhood_model_refusing_its_valid_hint_is_a_bug(big: None, monkeypatch: pytest.MonkeyPatch,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    """A neighbourhood's model that calls the plan's own part INFEASIBLE is broken: strict (tests) raises;
    otherwise the step is dropped with an error line, and the plan stays the greedy's, valid."""
    loaded = load_files(["instances/greedy-trap.yaml"])
    p = _problem(loaded)
    real = cpsat.build

    def broken(data: ModelData) -> tuple[cp_model.CpModel, cpsat.Vars]:
        m, v = real(data)
        m.add(v.freed() >= len(data.candidates) + 1)  # more nodes than there are: a deliberate bug
        return m, v

    monkeypatch.setattr(cpsat, "build", broken)
    with pytest.raises(ExactModelError, match="INFEASIBLE"):
        get_planner("auto").plan(p, OPTS)
    monkeypatch.delenv(STRICT_ENV)
    out = get_planner("auto").plan(p, replace(OPTS, time_limit=1))
    assert out.stats["lnsImproved"] == 0 and len(out.plan.freed_nodes) == 1  # the greedy's (LNS frees 2)
    assert plan_violations(p, out.plan) == []
    assert any("INFEASIBLE" in r.getMessage() for r in caplog.records if r.levelno == logging.ERROR)
