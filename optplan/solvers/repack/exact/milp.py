"""The MILP twin of the CP-SAT model, in PuLP: the same decisions, constraints and two-phase
lexicographic objective (see ``model``), built by one function per family mirroring ``cpsat``'s (the
soft ones return their penalty terms by dimension; the objective is ``model.weigh`` of them).
Solved by HiGHS when highspy is installed, else by CBC (bundled with PuLP). Used to cross-check CP-SAT
and in the benchmark."""

from __future__ import annotations

import logging
import math
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import pulp

from optplan.models.repack import RepackPlan, SolverRecord
from optplan.solvers.core.exact import exact_record
from optplan.solvers.core.highs import quiet
from optplan.solvers.core.milp import EQ, GE, LE, Term, backend, dual_bound, proven_optimal, row
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.core.planner import Planner
from optplan.solvers.repack.base import PlanResult
from optplan.solvers.repack.exact.model import (
    ModelData,
    breach_pairs,
    build_data,
    data_stats,
    decode,
    receiver_cap,
    scaled_cost,
    stuck,
    weigh,
)
from optplan.solvers.repack.rules import RepackProblem, explain

log = logging.getLogger(__name__)




@dataclass
class Vars:
    """The MILP's variables, keyed as CP-SAT's (``cpsat.Vars``)."""

    vacate: dict[str, Any]  # vacate[node]
    send: dict[tuple[int, str], Any]  # send[class, receiver]
    affected: dict[str, Any] = field(default_factory=dict)  # affected[group]
    breach: dict[str, Any] = field(default_factory=dict)  # breach[group]
    affected_cards: dict[str, Any] = field(default_factory=dict)  # affected_cards[group], card units
    widening: dict[str, Any] = field(default_factory=dict)  # widening[group]
    penalties: dict[str, list[tuple[Any, int]]] = field(default_factory=dict)  # soft terms, by dimension


def build(data: ModelData, name: str) -> tuple[pulp.LpProblem, dict[str, Any]]:
    """The model, one function per family as in ``cpsat.build`` (same families, same order)."""
    prob = pulp.LpProblem(name, pulp.LpMaximize)
    vacate = {c: prob.add_variable(f"vacate_{i}", cat="Binary") for i, c in enumerate(data.candidates)}
    send = {(k.key, r): prob.add_variable(f"send_{k.key}_{j}", lowBound=0, upBound=data.arc_cap(k, r), cat="Integer")
            for k in data.classes for j, r in enumerate(k.receivers)}
    v = Vars(vacate, send)
    penalize(v, add_moves(prob, data, v))
    add_capacity(prob, data, v)
    penalize(v, add_gang(prob, data, v))
    add_budgets(prob, data, v)
    penalize(v, add_topology(prob, data, v))
    freed = pulp.LpAffineExpression([(x, 1) for x in vacate.values()])
    row(prob, list(freed.items()), LE, data.freed_upper)
    return prob, {"vacate": vacate, "send": send, "freed": freed, "cost": cost_expr(data, v)}


def penalize(v: Vars, terms: dict[str, list[tuple[Any, int]]]) -> None:
    for key, ts in terms.items():
        v.penalties.setdefault(key, []).extend(ts)


def add_moves(prob: pulp.LpProblem, data: ModelData, v: Vars) -> dict[str, list[tuple[Any, int]]]:
    """Every pod of a vacated node goes somewhere (see ``cpsat.add_moves``); costs the moved pods and cards."""
    for k in data.classes:
        row(prob, [(v.send[k.key, r], 1) for r in k.receivers] + [(v.vacate[k.node], -k.count)], EQ, 0)
    return {"movedCards": [(v.vacate[k.node], data.cards(k.cards) * k.count) for k in data.classes],
            "movedPods": [(v.vacate[k.node], k.count) for k in data.classes]}


def add_capacity(prob: pulp.LpProblem, data: ModelData, v: Vars) -> None:
    """Σ demand·send + room·vacate[r] ≤ room (a vacated receiver has no room at all), and the
    redundant total-room rows (see ``cpsat.add_capacity``)."""
    for r in data.receivers:
        if not data.classes_at.get(r):
            continue
        shut = v.vacate.get(r)
        for _res, room, dem in data.capacity_rows(r):
            terms: list[Term] = [(v.send[kk, r], d) for kk, d in dem.items()]
            if shut is not None:
                terms.append((shut, room))
            row(prob, terms, LE, room)
        if shut is not None:
            for k in data.classes_at[r]:
                cap = data.arc_cap(k, r)
                row(prob, [(v.send[k.key, r], 1), (shut, cap)], LE, cap)
    for _res, take, room in data.room_rows():  # redundant, as in the CP-SAT model
        row(prob, [(v.vacate[c], n) for c, n in take.items()], LE, room)


def add_gang(prob: pulp.LpProblem, data: ModelData, v: Vars) -> dict[str, list[tuple[Any, int]]]:
    """affected, breach and affected cards per PodGroup, restart units counted (see ``cpsat.add_gang``)."""
    vacate = v.vacate
    for i, (g, by_node) in enumerate(data.group_moved_by.items()):
        gang = data.problem.gangs[g]
        rs = data.restart[g]
        restarted: list[Term] = [(vacate[c], n) for c, (n, _) in rs.singles.items()]
        cards: list[Term] = [(vacate[c], data.cards(k)) for c, (_, k) in rs.singles.items()]
        for j, (_u, unit) in enumerate(rs.units.items()):
            x = prob.add_variable(f"restarted_{i}_{j}", cat="Binary")
            for c in unit.nodes:
                row(prob, [(vacate[c], 1), (x, -1)], LE, 0)
            restarted.append((x, unit.running))
            cards.append((x, data.cards(unit.cards)))
        total = sum(n for n, _ in rs.singles.values()) + sum(unit.running for unit in rs.units.values())
        a = v.affected[g] = prob.add_variable(f"affected_{i}", cat="Binary")
        b = v.breach[g] = prob.add_variable(f"breach_{i}", cat="Binary")
        for c in by_node:  # disaggregated, as in the CP-SAT model
            row(prob, [(vacate[c], 1), (a, -1)], LE, 0)
            if len(rs.alone[c]) > gang.safe:
                row(prob, [(vacate[c], 1), (b, -1)], LE, 0)
        for c1, c2 in breach_pairs(rs.alone, gang.safe):
            row(prob, [(vacate[c1], 1), (vacate[c2], 1), (b, -1)], LE, 1)
        if total > gang.safe:
            row(prob, [*restarted, (b, -(total - gang.safe))], LE, gang.safe)
        elif not any(len(s) > gang.safe for s in rs.alone.values()):
            row(prob, [(b, 1)], EQ, 0)
        ac = v.affected_cards[g] = prob.add_variable(f"affected_cards_{i}", lowBound=0)
        row(prob, [(ac, 1)] + [(x, -coef) for x, coef in cards], GE, 0)
        footprint = data.cards(gang.footprint)
        row(prob, [(ac, 1), (b, -footprint)], GE, 0)
        for c in rs.wide:
            row(prob, [(ac, 1), (vacate[c], -footprint)], GE, 0)
    return {"affectedPodGroups": [(a, 1) for a in v.affected.values()],
            "podGroupsBelowMinAvailable": [(b, 1) for b in v.breach.values()],
            "affectedCards": [(ac, 1) for ac in v.affected_cards.values()]}


def add_budgets(prob: pulp.LpProblem, data: ModelData, v: Vars) -> None:
    """maxPerRun.podGroups, maxPerRun.resources and PodDisruptionBudgets, all hard (see ``cpsat.add_budgets``)."""
    spent = data.spent
    left = data.problem.budgets.left(spent)  # moves fixed outside the model spent the rest
    if left.pod_groups is not None:
        row(prob, [(a, 1) for g, a in v.affected.items() if g not in spent.pod_groups], LE, left.pod_groups)
    for res, budget in left.resources.items():
        row(prob, [(v.vacate[c], n) for c, n in data.budget_use[res].items()], LE, budget)
    for key, by_node in data.pdb_use.items():
        row(prob, [(v.vacate[c], n) for c, n in by_node.items()], LE, left.pdbs[key])


def add_topology(prob: pulp.LpProblem, data: ModelData, v: Vars) -> dict[str, list[tuple[Any, int]]]:
    """One region per topology PodGroup (see ``cpsat.add_topology``); costs the tiers soft groups widen."""
    p = data.problem
    topo = p.snapshot.topology
    for i, (g, regions) in enumerate(data.topo_regions.items()):
        region = {h: prob.add_variable(f"region_{i}_{j}", cat="Binary") for j, h in enumerate(regions)}
        row(prob, [(y, 1) for y in region.values()], EQ, 1)
        for stay in data.topo_stay_nodes[g]:
            for h, y in region.items():
                if stay not in topo.region_nodes(h):
                    row(prob, [(y, 1), (v.vacate[stay], -1)], LE, 0)
        for k in data.classes:
            if k.group != g:
                continue
            for r in k.receivers:
                row(prob, [(v.send[k.key, r], 1)] + [(y, -k.count) for h, y in region.items()
                                                      if r in topo.region_nodes(h)], LE, 0)
        if g in p.soft_topology:
            before = topo.lowest_tier(set(p.group_nodes(g)))
            w = v.widening[g] = prob.add_variable(f"widening_{i}", lowBound=0)
            row(prob, [(w, 1)] + [(y, -topo.tier(h)) for h, y in region.items()], GE, -before)
    return {"topologyWidening": [(w, 1) for w in v.widening.values()]}


def cost_expr(data: ModelData, v: Vars) -> pulp.LpAffineExpression:
    """The scaled weighted disruption, from the soft families' terms (``model.weigh``, as in CP-SAT)."""
    cost: dict[Any, float] = defaultdict(float)
    for x, coef in weigh(data.weights_int, v.penalties):
        cost[x] += coef
    return pulp.LpAffineExpression([(x, c) for x, c in cost.items() if c])


def _status(prob: pulp.LpProblem) -> str:
    """OPTIMAL only when the solver proved it (``proven_optimal``)."""
    if proven_optimal(prob):
        return "OPTIMAL"
    if prob.sol_status in (pulp.LpSolutionIntegerFeasible, pulp.LpSolutionOptimal):
        return "FEASIBLE"
    return "NONE"


@dataclass
class MilpOutcome:
    plan: RepackPlan | None
    status: str  # OPTIMAL | FEASIBLE | NONE
    freed_bound: int | None  # most freed nodes possible, as proven (None: unknown)
    objective: int | None  # scaled disruption of the plan (phase 2)
    bound: int | None  # least scaled disruption possible at that many freed nodes, as proven
    data: ModelData
    size: tuple[int, int] = (0, 0)  # variables, constraints


def solve(problem: RepackProblem, options: PlanOptions) -> MilpOutcome:
    """Both phases on one model: phase 1 maximises freed nodes, phase 2 adds freed = that value and
    minimises the scaled disruption, started from phase 1's solution. Receivers are pruned as for
    CP-SAT (``receiver_cap``); the bounds of a pruned model are not reported, as they hold for the
    restricted model only."""
    t0 = time.perf_counter()
    deadline = t0 + options.time_limit
    data = build_data(problem, freed_upper=problem.freed_upper, max_receivers=receiver_cap(problem))
    if not data.candidates:
        return MilpOutcome(RepackPlan(), "OPTIMAL", 0, 0, 0, data)
    prob, v = build(data, "repack")
    size = (len(prob.variables()), prob.numConstraints())
    prob.setObjective(v["freed"])
    prob.sense = pulp.LpMaximize
    with quiet():
        prob.solve(backend(options, (deadline - time.perf_counter()) * 0.5))
    st1 = _status(prob)
    b1 = dual_bound(prob)
    log.info("milp phase 1 (freed): %s objective %s bound %s", st1, pulp.value(prob.objective), b1)
    if st1 == "NONE":  # cut before a solution: HiGHS's bound there proves nothing we claim
        return MilpOutcome(None, "NONE", None, None, None, data, size)
    freed = round(pulp.value(v["freed"]))
    if data.pruned:
        freed_bound: int | None = data.freed_upper
    elif st1 == "OPTIMAL":
        freed_bound = freed
    else:
        # HiGHS's dual bound beside a solution; one below that solution would be a contradiction: not taken
        most = None if b1 is None else math.floor(-b1 + 1e-6)
        freed_bound = data.freed_upper if most is None or most < freed else min(data.freed_upper, most)
    first = _values(v)
    row(prob, list(v["freed"].items()), EQ, freed)
    prob.setObjective(v["cost"])
    prob.sense = pulp.LpMinimize
    with quiet():
        prob.solve(backend(options, deadline - time.perf_counter(), start=True))
    st2 = _status(prob)
    kept = _values(v) if st2 != "NONE" else first
    if st2 == "FEASIBLE" and prob.status == pulp.LpStatusOptimal and deadline - time.perf_counter() > 0.1:
        # HiGHS said optimal from its start without the bound to prove it (``proven_optimal``): once more, cold
        with quiet():
            prob.solve(backend(options, deadline - time.perf_counter()))
        st2 = _status(prob)
        if st2 != "NONE" and scaled_cost(data, decode(data, *_values(v))) <= scaled_cost(data, decode(data, *kept)):
            kept = _values(v)
        st2 = "OPTIMAL" if st2 == "OPTIMAL" else "FEASIBLE"
    b2 = dual_bound(prob)
    log.info("milp phase 2 (cost): %s objective %s bound %s", st2, pulp.value(prob.objective), b2)
    plan = decode(data, *kept)
    cost = scaled_cost(data, plan)
    bound = None
    if not data.pruned and st1 == "OPTIMAL":
        bound = cost if st2 == "OPTIMAL" else (math.ceil(b2 - 1e-6) if b2 is not None and st2 != "NONE" else None)
    status = "OPTIMAL" if st1 == "OPTIMAL" and st2 == "OPTIMAL" and not data.pruned else "FEASIBLE"
    return MilpOutcome(plan, status, freed_bound, cost, bound, data, size)


def _values(v: dict[str, Any]) -> tuple[list[str], dict[tuple[int, str], int]]:
    vacated = [c for c, x in v["vacate"].items() if (x.value() or 0) > 0.5]
    sends = {key: round(x.value() or 0) for key, x in v["send"].items() if (x.value() or 0) > 0.5}
    return vacated, sends


class MilpPlanner(Planner[RepackProblem, PlanResult]):
    name = "milp"

    def plan(self, problem: RepackProblem, options: PlanOptions, hint: PlanResult | None = None) -> PlanResult:
        t0 = time.perf_counter()
        if problem.shares_move:  # the twin has no device rows: its plans could break the device-level fit
            log.warning("milp does not model GPU devices, and shares move here: no plan (use cpsat or auto)")
            record = SolverRecord(name=self.name, status="FALLBACK", freed_nodes_bound=problem.freed_upper,
                                  wall_seconds=round(time.perf_counter() - t0, 3))
            return PlanResult(plan=RepackPlan(), record=record, disruption=problem.plan_disruption(RepackPlan()),
                              rejections=explain(problem, RepackPlan()))
        out = solve(problem, options)
        wall = round(time.perf_counter() - t0, 3)
        plan = out.plan if out.plan is not None else RepackPlan()
        freed = len(plan.freed_nodes) if out.plan is not None else None
        record = exact_record(self.name, out.status if out.plan is not None else "FALLBACK", freed=freed,
                              freed_bound=out.freed_bound, objective=out.objective, bound=out.bound, wall=wall)
        stats = {"variables": out.size[0], "constraints": out.size[1], **data_stats(out.data)}
        return PlanResult(plan=plan, record=record, disruption=problem.plan_disruption(plan),
                          rejections=explain(problem, plan, stuck(out.data)), stats=stats)


__all__ = ["MilpPlanner"]
