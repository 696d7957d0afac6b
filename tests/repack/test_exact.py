"""The exact planners: CP-SAT and its MILP twin agree, never lose to the greedy, and find the plans
the greedy misses. One worker, fixed seed, short limits."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest
from ortools.sat.python import cp_model

from optplan.adapters.kubefile import load_files
from optplan.models.repack import DIMENSIONS, RepackPlan
from optplan.solvers.binpack.frag import fragmentation
from optplan.solvers.core.exact import STRICT_ENV, ExactModelError, Score, better
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.repack.base import PlanResult, get_planner
from optplan.solvers.repack.exact import cpsat
from optplan.solvers.repack.exact.model import ModelData, build_data, hint_counts, scaled_cost
from optplan.solvers.repack.rules import RepackProblem, Weights
from optplan.solvers.repack.run import plan_repack
from optplan.solvers.repack.validate import plan_violations
from tests.builders import load_with_run, node, pod, podgroup, repack_run
from tests.repack.test_greedy_reference import random_cluster

OPTS = PlanOptions(time_limit=20, workers=1, seed=0)


def _bounded(seed: int) -> RepackProblem:
    p = random_cluster(seed)
    f = fragmentation(p.snapshot, p.resource)
    p.freed_upper = f.occupied - f.theoretical_min
    return p


@pytest.mark.parametrize("seed", sorted({*range(0, 40, 3), *range(0, 40, 5)}))
def test_cpsat_and_milp_reach_the_same_optimum(seed: int) -> None:
    """CP-SAT solves the model in parts, the twin in one piece: the same proven optimum."""
    p = _bounded(seed)
    data = build_data(p)
    c = get_planner("cpsat").plan(p, OPTS)
    m = get_planner("milp").plan(p, OPTS)
    assert c.record.status == m.record.status == "OPTIMAL"
    assert c.stats["components"] == c.stats["componentsProven"] >= 1
    assert len(c.plan.freed_nodes) == len(m.plan.freed_nodes)
    assert scaled_cost(data, c.plan) == scaled_cost(data, m.plan) == c.record.objective
    for r in (c, m):
        assert plan_violations(p, r.plan, claimed=r.disruption) == []


@pytest.mark.parametrize("seed", range(40))
def test_exact_never_loses_to_greedy(seed: int) -> None:
    p = _bounded(seed)
    data = build_data(p)
    g = get_planner("greedy").plan(p, OPTS)
    e = get_planner("cpsat").plan(p, OPTS)
    assert e.record.status == "OPTIMAL"
    assert e.record.freed_nodes_bound == len(e.plan.freed_nodes)
    assert len(e.plan.freed_nodes) >= len(g.plan.freed_nodes)
    if len(e.plan.freed_nodes) == len(g.plan.freed_nodes):
        assert scaled_cost(data, e.plan) <= scaled_cost(data, g.plan)


def test_exact_beats_greedy_on_a_good_share_of_the_family() -> None:
    better = 0
    for seed in range(40):
        p = _bounded(seed)
        data = build_data(p)
        g = get_planner("greedy").plan(p, OPTS).plan
        e = get_planner("cpsat").plan(p, OPTS).plan
        better += (len(e.freed_nodes), -scaled_cost(data, e)) > (len(g.freed_nodes), -scaled_cost(data, g))
    assert better >= 8  # 17 of 40 when written


def price_in_exact_model(p: RepackProblem, plan: RepackPlan) -> int:
    """Fix every variable of the exact model to ``plan``: the model must accept it (with every variable fixed,
    feasible means optimal); returns the model's price of it, for comparison with ``scaled_cost``."""
    data = build_data(p, freed_upper=p.freed_upper)
    model, v = cpsat.build(data)
    cpsat.add_hint(data, v, model, plan)
    model.minimize(cpsat.cost_expr(data, v))
    solver = cp_model.CpSolver()
    solver.parameters.fix_variables_to_their_hinted_value = True
    solver.parameters.num_workers = 1
    solver.parameters.max_time_in_seconds = 10
    assert solver.solve(model) == cp_model.OPTIMAL
    return round(solver.objective_value)


@pytest.mark.parametrize("seed", range(0, 40, 4))
def test_greedy_plan_is_feasible_in_the_exact_model(seed: int) -> None:
    """Fix every variable to the greedy plan: the exact model must accept it and price it as the rules do."""
    p = _bounded(seed)
    g = get_planner("greedy").plan(p, OPTS).plan
    data = build_data(p, freed_upper=p.freed_upper)
    assert price_in_exact_model(p, g) == scaled_cost(data, g)
    assert sum(hint_counts(data, g).values()) == len(g.moves)


def _cheapest_first_trap() -> tuple[list[str], list[str], str]:
    """Vacating the cheapest node first uses up the receivers two other nodes needed.

    S1 and S2 each have 2 free cards (the rest is protected). X holds two 2-card pods of a workload
    that stays above minAvailable; Y and Z each hold one 2-card pod of a workload that falls below
    minAvailable when moved (so their affected cards are the whole 8-card footprint). The seed's
    score picks X (0.4 against 1.4), its two pods take S1 and S2, and nothing else can move: one node
    freed. Vacating Y and Z instead frees two nodes, which is what CP-SAT finds.
    """
    prot = {"protected": "true"}
    objs = [node("s1"), node("s2"), node("x", 4), node("y", 2), node("z", 2), node("pool-a"), node("pool-b"),
            podgroup("keep", 1, labels=prot), podgroup("wx", 1), podgroup("wy", 2), podgroup("wz", 2)]
    objs += [pod("keep-s1", "s1", 6, group="keep"), pod("keep-s2", "s2", 6, group="keep"),
             pod("keep-b", "pool-b", 2, group="keep")]
    objs += [pod("x0", "x", 2, group="wx"), pod("x1", "x", 2, group="wx"), pod("x2", "pool-a", 2, group="wx")]
    objs += [pod("y0", "y", 2, group="wy"), pod("y1", "pool-a", 6, group="wy")]
    objs += [pod("z0", "z", 2, group="wz"), pod("z1", "pool-b", 6, group="wz")]
    objs.append(repack_run(scope={"podGroups": {"exclude": {"selector": {"matchLabels": prot}}},
                                  "nodes": {"exclude": {"names": ["pool-a", "pool-b"]}}}))
    loaded, run = load_with_run(*objs)
    g = plan_repack(loaded.snapshot, run, solver="greedy")
    e = plan_repack(loaded.snapshot, run, solver="auto", options=OPTS)
    return list(g.status.plan.freed_nodes), list(e.status.plan.freed_nodes), e.status.plan.solver.status


def test_cheapest_first_trap() -> None:
    greedy, exact, status = _cheapest_first_trap()
    assert greedy == ["x"]
    assert exact == ["y", "z"]
    assert status == "OPTIMAL"


def test_auto_reports_bound_and_gap_through_the_status() -> None:
    p = _bounded(29)
    out = get_planner("auto").plan(p, OPTS)
    rec = out.record
    assert rec.name == "auto" and rec.status == "OPTIMAL"
    assert rec.freed_nodes_bound == len(out.plan.freed_nodes)
    assert rec.objective == rec.best_bound and rec.gap_percent == 0.0


def test_greedy_respects_its_time_limit_with_a_valid_plan() -> None:
    """Out of time, the greedy returns the plan so far (every round commits a valid step) and says
    which candidates it did not get to."""
    p = _bounded(29)
    full = get_planner("greedy").plan(p, OPTS)
    cut = get_planner("greedy").plan(p, PlanOptions(time_limit=1e-9))
    assert len(cut.plan.freed_nodes) < len(full.plan.freed_nodes)
    assert plan_violations(p, cut.plan, claimed=cut.disruption) == []
    assert cut.rejections.get("not-evaluated-time-limit", 0) > 0


def test_shared_workload_trap() -> None:
    """Equal freed nodes, lower disruption: the greedy's first pick is cheapest alone but not in a pair.

    S (out of node scope) has 4 free cards, room for two of three candidates. P holds one 1-card pod
    of workload p; Q and R each hold one 2-card pod of the same workload h (safe to move two). Round
    one picks P (cheapest alone); round two adds Q: {P, Q} affects two workloads, cost 4.9. Vacating
    Q and R affects only h: cost 4.8 (1.0 + 0.6·4 + 0.3·4 + 0.1·2), which the exact planner finds.
    """
    objs = [node("p", 1), node("q", 2), node("r", 2), node("s", 16),
            podgroup("wp", 1), podgroup("wh", 2), podgroup("fill", 1, labels={"protected": "true"})]
    objs += [pod("p0", "p", 1, group="wp"), pod("p1", "s", 1, group="wp")]
    objs += [pod("h0", "q", 2, group="wh"), pod("h1", "r", 2, group="wh"), pod("h2", "s", 2, group="wh"),
             pod("h3", "s", 2, group="wh")]
    objs += [pod("fill", "s", 7, group="fill")]
    objs.append(repack_run(scope={"podGroups": {"exclude": {"selector": {"matchLabels": {"protected": "true"}}}},
                                  "nodes": {"exclude": {"names": ["s"]}}}))
    loaded, run = load_with_run(*objs)
    g = plan_repack(loaded.snapshot, run, solver="greedy")
    e = plan_repack(loaded.snapshot, run, solver="auto", options=OPTS)
    assert g.status.plan.freed_nodes == ("p", "q")
    assert e.status.plan.freed_nodes == ("q", "r")
    assert round(g.result.disruption.weighted(Weights()), 6) == 4.9
    assert round(e.result.disruption.weighted(Weights()), 6) == 4.8
    assert e.status.plan.solver.status == "OPTIMAL"


def _topology_cluster(seed: int) -> RepackProblem:
    from optplan.adapters.generate import GenConfig, generate
    from optplan.adapters.kubefile import load_objects

    cfg = GenConfig(nodes=24, occupancy=0.55, seed=seed, rack_size=3, racks_per_spine=2, topology_share=0.6,
                    pdb_share=0.2, max_pod_groups=None if seed % 2 else 6)
    loaded = load_objects(generate(cfg))
    p = RepackProblem(loaded.snapshot, next(iter(loaded.runs.values())))
    f = fragmentation(p.snapshot, p.resource)
    p.freed_upper = f.occupied - f.theoretical_min
    return p


def greedy_cpsat_milp(p: RepackProblem) -> tuple[PlanResult, PlanResult, PlanResult]:
    """The three planners on one problem: every plan valid with its claimed disruption, both exact ones proven."""
    g = get_planner("greedy").plan(p, OPTS)
    c = get_planner("cpsat").plan(p, OPTS)
    m = get_planner("milp").plan(p, OPTS)
    for r in (g, c, m):
        assert plan_violations(p, r.plan, claimed=r.disruption) == []
    assert c.record.status == m.record.status == "OPTIMAL"
    for r in (c, m):  # a proof closes both bounds on the plan itself
        assert r.record.freed_nodes_bound == len(r.plan.freed_nodes)
        assert r.record.best_bound == r.record.objective and r.record.gap_percent == 0.0
    return g, c, m


@pytest.mark.parametrize("seed", range(8))
def test_topology_family_exact_and_twin_agree(seed: int) -> None:
    """Generated clusters with racks and spines, hard and soft gangs, PDBs and budgets."""
    p = _topology_cluster(seed)
    assert p.topology_groups, "the family must exercise topology"
    data = build_data(p)
    g, c, m = greedy_cpsat_milp(p)
    def key(plan: RepackPlan) -> tuple[int, int]:
        return len(plan.freed_nodes), -scaled_cost(data, plan)

    assert key(c.plan) == key(m.plan)
    assert key(c.plan) >= key(g.plan)


# ---- a model that refuses its valid hint is a bug (core.exact.model_bug) --------------------------------


def _broken_build(kind: str) -> Callable[[ModelData], tuple[cp_model.CpModel, cpsat.Vars]]:
    """``cpsat.build`` with a deliberate bug: ``infeasible`` forbids vacating any node while demanding one
    freed; ``invalid`` adds a constraint on a variable the model does not have."""
    real = cpsat.build

    def build(data: ModelData) -> tuple[cp_model.CpModel, cpsat.Vars]:
        m, v = real(data)
        if kind == "infeasible":
            m.add(v.freed() >= 1)
            m.add(v.freed() <= 0)
        else:
            bad = m.proto.constraints.add()
            bad.linear.vars.append(len(m.proto.variables) + 7)
            bad.linear.coeffs.append(1)
            bad.linear.domain.extend([0, 1])
        return m, v
    return build


def _trap_problem() -> RepackProblem:
    loaded = load_files(["instances/greedy-trap.yaml"])
    p = RepackProblem(loaded.snapshot, next(iter(loaded.runs.values())))
    p.freed_upper = fragmentation(p.snapshot, p.resource, time_limit=5).occupied
    return p


@pytest.mark.parametrize(("kind", "status"), [("infeasible", "INFEASIBLE"), ("invalid", "MODEL_INVALID")])
def test_a_model_refusing_its_valid_hint_raises_in_strict_mode(kind: str, status: str,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(STRICT_ENV, "1")
    monkeypatch.setattr(cpsat, "build", _broken_build(kind))
    with pytest.raises(ExactModelError, match=status):
        get_planner("auto").plan(_trap_problem(), OPTS)


@pytest.mark.parametrize(("kind", "status"), [("infeasible", "INFEASIBLE"), ("invalid", "MODEL_INVALID")])
def test_a_model_refusing_its_valid_hint_returns_the_greedy_plan_with_an_error(
        kind: str, status: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """Users get the greedy's valid plan as FALLBACK, and an error line that names the solve, the status and
    the model's own validation message (what a bug report needs); a timeout would say nothing of the kind."""
    p = _trap_problem()
    greedy = get_planner("greedy").plan(p, OPTS)
    monkeypatch.delenv(STRICT_ENV)
    monkeypatch.setattr(cpsat, "build", _broken_build(kind))
    with caplog.at_level(logging.ERROR, logger="optplan"):
        out = get_planner("auto").plan(p, OPTS)
    assert out.record.status == "FALLBACK"
    assert out.plan == greedy.plan and plan_violations(p, out.plan) == []
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and status in errors[0] and "model validation" in errors[0]
    if kind == "invalid":
        assert "no error" not in errors[0]  # CP-SAT's own words on what is wrong
    else:
        assert "no error" in errors[0]
    # cpsat alone has no greedy to fall back on: it returns no plan, as FALLBACK; an invalid model is a bug
    # even unhinted, an infeasible one only when hinted (cpsat alone hints nothing in its first phase)
    caplog.clear()
    with caplog.at_level(logging.ERROR, logger="optplan"):
        alone = get_planner("cpsat").plan(p, OPTS)
    assert alone.record.status == "FALLBACK" and alone.plan.freed_nodes == ()
    assert any(status in r.getMessage() for r in caplog.records if r.levelno == logging.ERROR) == (kind == "invalid")


def test_an_infeasible_model_with_an_invalid_hint_is_no_bug(monkeypatch: pytest.MonkeyPatch,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    """INFEASIBLE is a bug only when the hint is a valid plan: hinted with a plan that breaks a rule (a pod
    sent to a node it does not fit), the refusal is the model doing its job, reported as no plan found."""
    p = _trap_problem()
    good = get_planner("greedy").plan(p, OPTS).plan
    bad = RepackPlan.build([m.model_copy(update={"to_node": m.from_node}) if i == 0 else m
                            for i, m in enumerate(good.moves)], list(good.freed_nodes))
    assert plan_violations(p, bad)
    monkeypatch.setattr(cpsat, "build", _broken_build("infeasible"))
    with caplog.at_level(logging.ERROR, logger="optplan"):
        out = cpsat.solve(p, OPTS, hint=bad, decompose=False)
    assert not out.refused
    assert not [r for r in caplog.records if r.levelno == logging.ERROR]


# ---- one objective, by dimension name; one better() ----------------------------------------------------


@pytest.mark.parametrize(("a", "b", "expected"), [
    (Score(2, 90), Score(1, 0), True),  # more freed nodes win at any cost
    (Score(1, 0), Score(2, 90), False),
    (Score(2, 3), Score(2, 4), True),  # as many, cheaper
    (Score(2, 4), Score(2, 3), False),
    (Score(2, 4), Score(2, 4), False),  # a tie keeps the incumbent (the greedy's plan)
])
def test_better_ranks_freed_nodes_then_cost_and_ties_keep_the_incumbent(a: Score, b: Score, expected: bool) -> None:
    assert better(a, b) is expected


def test_each_weight_prices_its_own_dimension() -> None:
    """The soft families' penalty terms cover every dimension, keyed by name: with one dimension weighted
    alone, the exact model prices a plan by that dimension only, as the rules count it."""
    base = _topology_cluster(1)
    plan = get_planner("greedy").plan(base, OPTS).plan
    d = base.plan_disruption(plan)
    assert all(d.as_tuple())  # the plan has some of every dimension
    _, v = cpsat.build(build_data(base, freed_upper=base.freed_upper))
    assert set(v.penalties) == {dim.key for dim in DIMENSIONS}
    for dim in DIMENSIONS:
        p = RepackProblem(base.snapshot, base.run, Weights(**{x.field: float(x is dim) for x in DIMENSIONS}))
        p.freed_upper = base.freed_upper
        data = build_data(p, freed_upper=p.freed_upper)
        value = data.cards(getattr(d, dim.field)) if dim.cards else getattr(d, dim.field)
        assert price_in_exact_model(p, plan) == scaled_cost(data, plan) == data.weights_int[dim.key] * value > 0
        assert [k for k, w in data.weights_int.items() if w] == [dim.key]
