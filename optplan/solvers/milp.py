"""The MILP twin of the CP-SAT model, in PuLP: the same decisions, constraints and two-phase
lexicographic objective (see ``repack_model``). Solved by HiGHS when highspy is installed, else by
CBC (bundled with PuLP). Used to cross-check CP-SAT and in the benchmark."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
from collections.abc import Iterator
from typing import Any

import pulp

from optplan.models.repack import RepackPlan, SolverRecord
from optplan.solvers.base import PlanOptions, PlanResult
from optplan.solvers.repack_model import ModelData, breach_pairs, build_data, decode
from optplan.solvers.rules import RepackProblem

log = logging.getLogger(__name__)


def _backend(options: PlanOptions, limit: float) -> Any:
    limit = max(limit, 0.1)
    try:
        import highspy  # noqa: F401

        solver = pulp.HiGHS(msg=False, timeLimit=limit, threads=options.workers, random_seed=options.seed)
        if solver.available():
            return solver
    except (ImportError, TypeError):  # pragma: no cover - depends on the installation
        pass
    return pulp.PULP_CBC_CMD(msg=False, timeLimit=limit, threads=options.workers,
                             options=[f"randomSeed {options.seed + 1}"])


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """HiGHS prints a banner on the C-level stdout even with msg=False; keep our stdout clean."""
    sys.stdout.flush()
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # pytest capture and other fakes
        yield
        return
    saved = os.dup(fd)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), fd)
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, fd)
        os.close(saved)


def build(data: ModelData, name: str) -> tuple[pulp.LpProblem, dict[str, Any]]:
    prob = pulp.LpProblem(name, pulp.LpMaximize)
    vacate = {c: prob.add_variable(f"vacate_{i}", cat="Binary") for i, c in enumerate(data.candidates)}
    send = {(k.key, r): prob.add_variable(f"send_{k.key}_{j}", lowBound=0, upBound=data.arc_cap(k, r), cat="Integer")
            for k in data.classes for j, r in enumerate(k.receivers)}
    # assignment
    for k in data.classes:
        prob += pulp.lpSum(send[k.key, r] for r in k.receivers) == k.count * vacate[k.node]
    # capacity
    incoming: dict[str, list[tuple[int, Any]]] = {r: [] for r in data.receivers}
    for k in data.classes:
        for r in k.receivers:
            incoming[r].append((k.key, send[k.key, r]))
    for r, arcs in incoming.items():
        if not arcs:
            continue
        open_ = (1 - vacate[r]) if r in vacate else 1  # a vacated receiver has no room at all
        sends = dict(arcs)
        for _res, room, dem in data.capacity_rows(r):
            prob += pulp.lpSum(d * sends[kk] for kk, d in dem.items()) <= room * open_
        if r in vacate:
            for kk, x in arcs:
                prob += x <= data.arc_cap(data.classes[kk], r) * open_
    for _res, take, room in data.room_rows():  # redundant, as in the CP-SAT model
        prob += pulp.lpSum(n * vacate[c] for c, n in take.items()) <= room
    # gang, restart units counted (see cpsat.add_gang)
    affected, breach, acards, restarted_unit = {}, {}, {}, {}
    for i, (g, by_node) in enumerate(data.group_moved_by.items()):
        gang = data.problem.gangs[g]
        rs = data.restart[g]
        for j, (u, unit) in enumerate(rs.units.items()):
            x = restarted_unit[u] = prob.add_variable(f"restarted_{i}_{j}", cat="Binary")
            for c in unit.nodes:
                prob += vacate[c] <= x
        restarted = (pulp.lpSum(n * vacate[c] for c, (n, _) in rs.singles.items())
                     + pulp.lpSum(unit.running * restarted_unit[u] for u, unit in rs.units.items()))
        cards = (pulp.lpSum(data.cards(k) * vacate[c] for c, (_, k) in rs.singles.items())
                 + pulp.lpSum(data.cards(unit.cards) * restarted_unit[u] for u, unit in rs.units.items()))
        total = sum(n for n, _ in rs.singles.values()) + sum(unit.running for unit in rs.units.values())
        affected[g] = prob.add_variable(f"affected_{i}", cat="Binary")
        breach[g] = prob.add_variable(f"breach_{i}", cat="Binary")
        for c in by_node:  # disaggregated, as in the CP-SAT model
            prob += vacate[c] <= affected[g]
            if len(rs.alone[c]) > gang.safe:
                prob += vacate[c] <= breach[g]
        for c1, c2 in breach_pairs(rs.alone, gang.safe):
            prob += vacate[c1] + vacate[c2] - 1 <= breach[g]
        if total > gang.safe:
            prob += restarted <= gang.safe + (total - gang.safe) * breach[g]
        elif not any(len(s) > gang.safe for s in rs.alone.values()):
            prob += breach[g] == 0
        acards[g] = prob.add_variable(f"affected_cards_{i}", lowBound=0)
        prob += acards[g] >= cards
        prob += acards[g] >= data.cards(gang.footprint) * breach[g]
        for c in rs.wide:
            prob += acards[g] >= data.cards(gang.footprint) * vacate[c]
    # budgets and PDBs
    p = data.problem
    mpr = p.run.spec.max_per_run
    if mpr.pod_groups is not None:
        prob += pulp.lpSum(affected.values()) <= mpr.pod_groups
    for res, budget in sorted(mpr.resources.items()):
        prob += pulp.lpSum(n * vacate[c] for c, n in data.budget_use[res].items()) <= budget
    for key, by_node in data.pdb_use.items():
        prob += pulp.lpSum(n * vacate[c] for c, n in by_node.items()) <= p.snapshot.pdbs[key].disruptions_allowed
    # network topology: one region per topology PodGroup (see cpsat.add_topology)
    topo = p.snapshot.topology
    widening = {}
    for i, (g, regions) in enumerate(data.topo_regions.items()):
        region = {h: prob.add_variable(f"region_{i}_{j}", cat="Binary") for j, h in enumerate(regions)}
        prob += pulp.lpSum(region.values()) == 1
        for stay in data.topo_stay_nodes[g]:
            for h, y in region.items():
                if stay not in topo.region_nodes(h):
                    prob += y <= vacate[stay]
        for k in data.classes:
            if k.group != g:
                continue
            for r in k.receivers:
                prob += send[k.key, r] <= k.count * pulp.lpSum(y for h, y in region.items()
                                                               if r in topo.region_nodes(h))
        if g in p.soft_topology:
            before = topo.lowest_tier(set(p.group_nodes(g)))
            widening[g] = prob.add_variable(f"widening_{i}", lowBound=0)
            prob += widening[g] >= pulp.lpSum(topo.tier(h) * y for h, y in region.items()) - before
    freed = pulp.lpSum(vacate.values())
    prob += freed <= data.freed_upper
    w = data.weights_int
    cost = (w[0] * pulp.lpSum(affected.values()) + w[1] * pulp.lpSum(breach.values())
            + w[2] * pulp.lpSum(acards.values())
            + w[3] * pulp.lpSum(data.cards(k.cards) * k.count * vacate[k.node] for k in data.classes)
            + w[4] * pulp.lpSum(k.count * vacate[k.node] for k in data.classes)
            + w[5] * pulp.lpSum(widening.values()))
    return prob, {"vacate": vacate, "send": send, "freed": freed, "cost": cost}


def _status(prob: pulp.LpProblem) -> str:
    """OPTIMAL only when the solver proved it; PuLP's 'Optimal' alone does not say a limit cut it."""
    if prob.sol_status == pulp.LpSolutionOptimal and prob.status == pulp.LpStatusOptimal:
        return "OPTIMAL"
    if prob.sol_status in (pulp.LpSolutionIntegerFeasible, pulp.LpSolutionOptimal):
        return "FEASIBLE"
    return "NONE"


def solve(problem: RepackProblem, options: PlanOptions) -> tuple[RepackPlan | None, str, int | None]:
    t0 = time.perf_counter()
    deadline = t0 + options.time_limit
    data = build_data(problem, freed_upper=problem.freed_upper)
    if not data.candidates:
        return RepackPlan(), "OPTIMAL", 0
    prob, v = build(data, "repack_freed")
    prob.setObjective(v["freed"])
    prob.sense = pulp.LpMaximize
    with _quiet():
        prob.solve(_backend(options, (deadline - time.perf_counter()) * 0.5))
    st1 = _status(prob)
    log.info("milp phase 1 (freed): %s objective %s", st1, pulp.value(prob.objective))
    if st1 == "NONE":
        return None, "NONE", None
    freed = round(pulp.value(v["freed"]))
    prob2, v2 = build(data, "repack_cost")
    prob2 += v2["freed"] == freed
    prob2.setObjective(v2["cost"])
    prob2.sense = pulp.LpMinimize
    with _quiet():
        prob2.solve(_backend(options, deadline - time.perf_counter()))
    st2 = _status(prob2)
    log.info("milp phase 2 (cost): %s objective %s", st2, pulp.value(prob2.objective))
    use = (prob2, v2) if st2 != "NONE" else (prob, v)
    vacated = [c for c, x in use[1]["vacate"].items() if (x.value() or 0) > 0.5]
    sends = {key: round(x.value() or 0) for key, x in use[1]["send"].items() if (x.value() or 0) > 0.5}
    plan = decode(data, vacated, sends)
    cost = round(pulp.value(v2["cost"])) if st2 != "NONE" else None
    status = "OPTIMAL" if st1 == "OPTIMAL" and st2 == "OPTIMAL" else "FEASIBLE"
    return plan, status, cost


class MilpPlanner:
    name = "milp"

    def plan(self, problem: RepackProblem, options: PlanOptions) -> PlanResult:
        t0 = time.perf_counter()
        plan, status, cost = solve(problem, options)
        wall = round(time.perf_counter() - t0, 3)
        if plan is None:
            plan, status = RepackPlan(), "FALLBACK"
        record = SolverRecord(name=self.name, status=status, objective=cost,
                              freed_nodes_bound=len(plan.freed_nodes) if status == "OPTIMAL" else None,
                              wall_seconds=wall)
        return PlanResult(plan=plan, record=record, disruption=problem.plan_disruption(plan))


__all__ = ["MilpPlanner"]
