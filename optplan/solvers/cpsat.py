"""The exact Repack planner on OR-Tools CP-SAT (see ``repack_model`` for the decisions).

Lexicographic objective, solved in two phases: (1) maximise freed nodes, bounded above by
occupied − theoretical minimum; (2) with freed nodes fixed at the phase-1 value, minimise the
integer-scaled weighted disruption. The greedy plan, when given, is the hint of both phases.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from typing import Any

from ortools.sat.python import cp_model

from optplan.models.repack import RepackPlan, SolverRecord
from optplan.solvers.base import PlanOptions, PlanResult
from optplan.solvers.repack_model import ModelData, breach_pairs, build_data, decode, hint_counts, scaled_cost
from optplan.solvers.rules import RepackProblem, explain

log = logging.getLogger(__name__)


@dataclass
class Vars:
    """The model's variables, keyed by domain tuples."""

    vacate: dict[str, Any]  # vacate[node]
    send: dict[tuple[int, str], Any]  # send[class, receiver]: pods of the class sent there
    affected: dict[str, Any]  # affected[group]
    breach: dict[str, Any]  # breach[group]
    affected_cards: dict[str, Any]  # affected_cards[group], card units
    widening: dict[str, Any]  # widening[group]: tiers a soft-topology group widens
    region: dict[str, dict[str, Any]]  # region[group][hypernode]: the group ends inside that region
    restarted: dict[str, Any] = field(default_factory=dict)  # restarted[unit]: a task restart unit restarts

    def freed(self) -> Any:
        return sum(self.vacate.values())


def build(data: ModelData) -> tuple[cp_model.CpModel, Vars]:
    m = cp_model.CpModel()
    vacate = {c: m.new_bool_var(f"vacate[{c}]") for c in data.candidates}
    send = {(k.key, r): m.new_int_var(0, data.arc_cap(k, r), f"send[{k.key}->{r}]")
            for k in data.classes for r in k.receivers}
    v = Vars(vacate, send, {}, {}, {}, {}, {})
    add_assignment(m, data, v)
    add_capacity(m, data, v)
    add_gang(m, data, v)
    add_budgets(m, data, v)
    add_topology(m, data, v)
    m.add(v.freed() <= data.freed_upper)
    return m, v


def add_assignment(m: cp_model.CpModel, data: ModelData, v: Vars) -> None:
    """Every pod of a vacated node goes somewhere; pods of other nodes stay."""
    for k in data.classes:
        m.add(sum(v.send[k.key, r] for r in k.receivers) == k.count * v.vacate[k.node])


def add_capacity(m: cp_model.CpModel, data: ModelData, v: Vars) -> None:
    """Fit on every resource of every receiver; a vacated receiver receives nothing."""
    incoming: dict[str, list[tuple[int, Any]]] = {r: [] for r in data.receivers}
    for k in data.classes:
        for r in k.receivers:
            incoming[r].append((k.key, v.send[k.key, r]))
    for r, arcs in incoming.items():
        if not arcs:
            continue
        open_ = (1 - v.vacate[r]) if r in v.vacate else 1  # a vacated receiver has no room at all
        sends = dict(arcs)
        for _res, room, dem in data.capacity_rows(r):
            m.add(sum(d * sends[kk] for kk, d in dem.items()) <= room * open_)
        if r in v.vacate:
            for kk, x in arcs:
                m.add(x <= data.arc_cap(data.classes[kk], r) * open_)


def add_gang(m: cp_model.CpModel, data: ModelData, v: Vars) -> None:
    """affected, breach and affected cards per PodGroup, restart units counted (minimisation keeps
    them tight)."""
    for g, by_node in data.group_moved_by.items():
        gang = data.problem.gangs[g]
        rs = data.restart[g]
        for u, unit in rs.units.items():
            x = v.restarted[u] = m.new_bool_var(f"restarted[{u}]")
            for c in unit.nodes:
                m.add_implication(v.vacate[c], x)
        restarted = (sum(n * v.vacate[c] for c, (n, _) in rs.singles.items())
                     + sum(unit.running * v.restarted[u] for u, unit in rs.units.items()))
        cards = (sum(data.cards(k) * v.vacate[c] for c, (_, k) in rs.singles.items())
                 + sum(data.cards(unit.cards) * v.restarted[u] for u, unit in rs.units.items()))
        total = sum(n for n, _ in rs.singles.values()) + sum(unit.running for unit in rs.units.values())
        a = m.new_bool_var(f"affected[{g}]")
        b = m.new_bool_var(f"breach[{g}]")
        for c in by_node:  # disaggregated: far tighter LP than restarted <= total * b alone
            m.add_implication(v.vacate[c], a)
            if len(rs.alone[c]) > gang.safe:  # alone it breaches (a whole-group unit always does)
                m.add_implication(v.vacate[c], b)
        for c1, c2 in breach_pairs(rs.alone, gang.safe):  # two vacated nodes that together breach
            m.add_bool_or([v.vacate[c1].Not(), v.vacate[c2].Not(), b])
        v.affected[g] = a
        if total > gang.safe:
            m.add(restarted <= gang.safe + (total - gang.safe) * b)
        elif not any(len(s) > gang.safe for s in rs.alone.values()):
            m.add(b == 0)
        v.breach[g] = b
        footprint = data.cards(gang.footprint)
        ac = m.new_int_var(0, max(footprint, data.cards(sum(data.group_cards_by[g].values()))), f"affected_cards[{g}]")
        m.add(ac >= cards)
        m.add(ac >= footprint * b)
        for c in rs.wide:  # the whole group restarts, breach or not
            m.add(ac >= footprint * v.vacate[c])
        v.affected_cards[g] = ac


def add_budgets(m: cp_model.CpModel, data: ModelData, v: Vars) -> None:
    """maxPerRun.podGroups, maxPerRun.resources and PodDisruptionBudgets, all hard."""
    p = data.problem
    mpr = p.run.spec.max_per_run
    if mpr.pod_groups is not None:
        m.add(sum(v.affected.values()) <= mpr.pod_groups)
    for res, budget in sorted(mpr.resources.items()):
        terms = [n * v.vacate[c] for c, n in data.budget_use[res].items()]
        if terms:
            m.add(sum(terms) <= budget)
    for key, by_node in data.pdb_use.items():
        m.add(sum(n * v.vacate[c] for c, n in by_node.items()) <= p.snapshot.pdbs[key].disruptions_allowed)


def add_topology(m: cp_model.CpModel, data: ModelData, v: Vars) -> None:
    """Each topology PodGroup ends inside exactly one region (a HyperNode of allowed tier; for soft
    groups any HyperNode or the root). Pods that stay pin the region; pods that move go inside it.
    Soft groups pay for every tier the region sits above their tier in the snapshot."""
    p = data.problem
    topo = p.snapshot.topology
    for g, regions in data.topo_regions.items():
        region = {h: m.new_bool_var(f"region[{g}@{h}]") for h in regions}
        v.region[g] = region
        m.add_exactly_one(region.values())
        for n in data.topo_stay_nodes[g]:
            for h, y in region.items():
                if n not in topo.region_nodes(h):
                    m.add_implication(y, v.vacate[n])  # the region excludes n: n's pods must leave
        for k in data.classes:
            if k.group != g:
                continue
            for r in k.receivers:
                inside = [y for h, y in region.items() if r in topo.region_nodes(h)]
                if inside:
                    m.add(v.send[k.key, r] <= k.count * sum(inside))
                else:
                    m.add(v.send[k.key, r] == 0)
        if g in p.soft_topology:
            before = topo.lowest_tier(set(p.group_nodes(g)))
            w = m.new_int_var(0, topo.top_tier, f"widening[{g}]")
            m.add(w >= sum(topo.tier(h) * y for h, y in region.items()) - before)
            v.widening[g] = w


def cost_expr(data: ModelData, v: Vars) -> Any:
    w = data.weights_int
    moved_cards = sum(data.cards(k.cards) * k.count * v.vacate[k.node] for k in data.classes)
    moved_pods = sum(k.count * v.vacate[k.node] for k in data.classes)
    return (w[0] * sum(v.affected.values()) + w[1] * sum(v.breach.values()) + w[2] * sum(v.affected_cards.values())
            + w[3] * moved_cards + w[4] * moved_pods + w[5] * sum(v.widening.values()))


def add_hint(data: ModelData, v: Vars, m: cp_model.CpModel, plan: RepackPlan) -> None:
    """Hint every variable from a plan (a complete hint is a solution CP-SAT can use at once)."""
    counts = hint_counts(data, plan)
    freed = set(plan.freed_nodes)
    for c, x in v.vacate.items():
        m.add_hint(x, int(c in freed))
    for key, x in v.send.items():
        m.add_hint(x, counts.get(key, 0))
    p = data.problem
    restarted = p.restarted(p.snapshot.pods[mv.pod] for mv in plan.moves)
    for g, by_node in data.group_moved_by.items():
        moved = sum(n for c, n in by_node.items() if c in freed)
        r = restarted.get(g)
        running, cards = (r.running, r.cards) if r is not None else (0, 0)
        breach = running > p.gangs[g].safe
        m.add_hint(v.affected[g], int(moved > 0))
        m.add_hint(v.breach[g], int(breach))
        m.add_hint(v.affected_cards[g], data.cards(p.gangs[g].footprint if breach else cards))
        for u, unit in data.restart[g].units.items():
            m.add_hint(v.restarted[u], int(any(c in freed for c in unit.nodes)))
    dest = {mv.pod: mv.to_node for mv in plan.moves}
    topo = p.snapshot.topology
    for g, regions in data.topo_regions.items():
        after = {dest.get(q.key, q.node_name) or "" for q in p.snapshot.pods_by_group.get(g, [])}
        inside = [h for h in regions if after <= topo.region_nodes(h)]
        chosen = inside[0] if inside else None
        for h in regions:
            m.add_hint(v.region[g][h], int(h == chosen))
        if g in v.widening and chosen is not None:
            m.add_hint(v.widening[g], max(topo.tier(chosen) - topo.lowest_tier(set(p.group_nodes(g))), 0))


class _Progress(cp_model.CpSolverSolutionCallback):
    def __init__(self, phase: str, t0: float) -> None:
        super().__init__()
        self.phase = phase
        self.t0 = t0

    def on_solution_callback(self) -> None:
        log.info("cpsat %s: incumbent at %.2fs objective %s bound %s", self.phase, time.perf_counter() - self.t0,
                 self.objective_value, self.best_objective_bound)


BIG_MODEL = 20_000
"""Above this many send variables, presolve's probing and symmetry detection cost more than they
bring (measured: 2,000 nodes spent the whole limit in presolve)."""


def _solver(options: PlanOptions, limit: float, size: int = 0, phase: int = 1) -> cp_model.CpSolver:
    s = cp_model.CpSolver()
    s.parameters.max_time_in_seconds = max(limit, 0.05)
    s.parameters.num_workers = options.workers
    s.parameters.random_seed = options.seed
    if size > BIG_MODEL:
        s.parameters.symmetry_level = 0
        s.parameters.cp_model_probing_level = 0
        s.parameters.linearization_level = 1
    else:
        # The LP relaxation is what proves "no more nodes can be freed": full linearization makes
        # single-worker proofs on 14-node clusters go from seconds to tenths (measured).
        s.parameters.linearization_level = 2
        if phase == 2 and options.workers == 1 and limit >= 8:
            # For the disruption, one worker interleaving its strategies (LNS among them) finds far
            # better plans given time (200 nodes, 8 s: 3,265 against 3,602; 15 s: 3,248 against
            # 3,517), but worse with ~4 s (3,841 against 3,421), so only with 8 s or more.
            s.parameters.interleave_search = True
    return s


def _extract(data: ModelData, v: Vars, s: cp_model.CpSolver) -> RepackPlan:
    vacated = [c for c, x in v.vacate.items() if s.value(x)]
    sends = {key: int(s.value(x)) for key, x in v.send.items() if s.value(x)}
    return decode(data, vacated, sends)


@dataclass
class ExactOutcome:
    plan: RepackPlan | None
    status: str  # OPTIMAL | FEASIBLE | NONE
    freed_bound: int
    objective: int | None
    bound: int | None
    data: ModelData
    size: tuple[int, int]  # variables, constraints of the phase-2 model


def solve(problem: RepackProblem, options: PlanOptions, hint: RepackPlan | None = None, *,
          freed_upper: int | None = None, max_receivers: int | None = None) -> ExactOutcome:
    t0 = time.perf_counter()
    deadline = t0 + options.time_limit
    if freed_upper is None:
        freed_upper = problem.freed_upper
    data = build_data(problem, freed_upper=freed_upper, max_receivers=max_receivers,
                      keep=_keep(problem, hint) if max_receivers is not None else None)
    if not data.candidates:
        return ExactOutcome(RepackPlan(), "OPTIMAL", 0, 0, 0, data, (0, 0))
    # Phase 1: most freed nodes.
    m, v = build(data)
    if hint is not None:
        add_hint(data, v, m, hint)
    m.maximize(v.freed())
    s = _solver(options, (deadline - time.perf_counter()) * 0.5, len(v.send))
    st = s.solve(m, _Progress("freed", t0))
    log.info("cpsat phase 1 (freed): %s objective %s bound %s in %.2fs", s.status_name(st),
             s.objective_value if st in (cp_model.OPTIMAL, cp_model.FEASIBLE) else None,
             s.best_objective_bound, s.wall_time)
    if st not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return ExactOutcome(None, "NONE", data.freed_upper, None, None, data, _size(m))
    freed = round(s.objective_value)
    freed_bound = freed if st == cp_model.OPTIMAL else min(data.freed_upper, math.floor(s.best_objective_bound + 1e-6))
    best = _extract(data, v, s)
    phase1_optimal = st == cp_model.OPTIMAL
    # Phase 2: least disruption among plans that free that many nodes.
    m2, v2 = build(data)
    m2.add(v2.freed() == freed)
    cost = cost_expr(data, v2)
    m2.minimize(cost)
    add_hint(data, v2, m2, hint if hint is not None and len(hint.freed_nodes) == freed else best)
    s2 = _solver(options, deadline - time.perf_counter(), len(v2.send), phase=2)
    st2 = s2.solve(m2, _Progress("cost", t0))
    log.info("cpsat phase 2 (cost): %s objective %s bound %s in %.2fs", s2.status_name(st2),
             s2.objective_value if st2 in (cp_model.OPTIMAL, cp_model.FEASIBLE) else None,
             s2.best_objective_bound, s2.wall_time)
    if st2 in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        best = _extract(data, v2, s2)
        objective, bound = round(s2.objective_value), math.ceil(s2.best_objective_bound - 1e-6)
        optimal = phase1_optimal and st2 == cp_model.OPTIMAL and not data.pruned
    else:
        objective, bound = scaled_cost(data, best), 0
        optimal = False
    return ExactOutcome(best, "OPTIMAL" if optimal else "FEASIBLE", freed_bound, objective, bound, data, _size(m2))


def _keep(problem: RepackProblem, hint: RepackPlan | None) -> dict[int, set[str]] | None:
    if hint is None:
        return None
    data = build_data(problem)
    out: dict[int, set[str]] = {}
    for (k, r), _n in hint_counts(data, hint).items():
        out.setdefault(k, set()).add(r)
    return out


def _size(m: cp_model.CpModel) -> tuple[int, int]:
    proto = m.proto
    return len(proto.variables), len(proto.constraints)


def model_stats(out: ExactOutcome) -> dict[str, int]:
    d = out.data
    return {"variables": out.size[0], "constraints": out.size[1], "candidates": len(d.candidates),
            "podClasses": len(d.classes), "receivers": len(d.receivers),
            "sendVariables": sum(len(k.receivers) for k in d.classes), "receiversPruned": int(d.pruned)}


def gap_percent(objective: int | None, bound: int | None, freed: int | None = None,
                freed_bound: int | None = None) -> float | None:
    """The lexicographic gap: while more freed nodes are not ruled out, the gap in freed nodes
    (freed_bound − freed) / freed_bound; once they are, the gap in the weighted disruption."""
    if freed is not None and freed_bound is not None and freed < freed_bound:
        return round(100.0 * (freed_bound - freed) / freed_bound, 3)
    if objective is None or bound is None:
        return None
    if objective == 0:
        return 0.0
    return round(100.0 * abs(objective - bound) / abs(objective), 3)


class CpSatPlanner:
    name = "cpsat"

    def plan(self, problem: RepackProblem, options: PlanOptions) -> PlanResult:
        t0 = time.perf_counter()
        out = solve(problem, options)
        wall = round(time.perf_counter() - t0, 3)
        plan = out.plan if out.plan is not None else RepackPlan()
        record = SolverRecord(name=self.name, status=out.status if out.plan is not None else "FALLBACK",
                              freed_nodes_bound=out.freed_bound, objective=out.objective, best_bound=out.bound,
                              gap_percent=gap_percent(out.objective, out.bound, len(plan.freed_nodes),
                                                      out.freed_bound), wall_seconds=wall)
        return PlanResult(plan=plan, record=record, disruption=problem.plan_disruption(plan),
                          rejections=explain(problem, plan), stats=model_stats(out))
