"""The MILP twin of the joint goal model (issue 15 §2 "the MILP twin where it is cheap to keep"), in PuLP,
solved by HiGHS (else CBC) as Repack's twin is (``core.milp``: its backend, rows and proof; ``core.highs``:
quiet stdout).

The same model as ``cpsat`` (which documents the decisions and constraints), built by one function per
family mirroring cpsat's, on the same data (``model.build_data``: the same classes, receivers, regions and
integer scales, restricted exactly when cpsat's is), with the same three lexicographic stages: (1) gangs
admitted weighted by priority level, (2) HyperNodes freed, (3) the weighted disruption on Repack's integer
scale. Each stage's value is then fixed as a row for the next (= the optimum when proven, ≥ the value found
when the stage was cut short).

HiGHS runs cold and without presolve, as HiGHS 1.16 answered wrongly otherwise on the seeded family
(``tests/goalcases``). Given a start (``setSolution``, as ``repack.exact.milp``'s phase 2 does), it returned the
start unchanged as "optimal" at 46 in its presolved space (the start's 252 less an offset) where the optimum
is 56 (seed 176); with presolve, stage 3 of seed 88 (HyperNodes) came back INFEASIBLE after "untransformed
violations" of its own solutions. Cold and without presolve, the 400 family cases (seeds 0-199, with and
without a HyperNode goal) and 150 of ``test_goals_exact``'s richer family all reach CP-SAT's proven score.
A hint therefore only keeps its arcs in a restricted model and is the fallback plan, as in cpsat.

CP-SAT's enforced constraints, linearised (every variable is an integer with finite bounds):

- an over-committed node's capacity row binds only when something requesting that resource lands:
  ``expr ≤ room · on`` (room < 0) and ``x ≤ ub(x) · on`` for each landing x;
- a freed HyperNode: ``moved ≥ count · free`` for each class on it, ``free + receiver ≤ 1``, and
  ``x ≤ ub(x) · (1 − free)`` for each gang pod requesting R placed there;
- a whole-group restart that breaches minAvailable: ``wide ≤ breach``.

HiGHS is asked for gap 0: its default relative gap (1e-4) could call a stage-3 plan some units of the
integer cost short of the optimum "optimal". Threads and random seed are the options'; on the family's
small models HiGHS proves each stage well inside the limit, so one input gives one plan. Time limits are
wall-clock (HiGHS has no deterministic limit): a model cut short may differ run to run.

Plan read-back, status and record are the shared ones (``model.decode``, ``build_plan``, ``settle``,
``goal_record``): OPTIMAL only when every stage was proven on the whole model; FEASIBLE otherwise (always
for a restricted model); INFEASIBLE when a required HyperNode count is proven out of reach (the count is then
dropped and the plan frees what it can); FALLBACK when HiGHS found no solution (``model.fallback``).

Gangs not admitted name the gang's own cause when it was proven before planning (``Data.causes``: capacity,
quota, topology), else SEARCH: unlike cpsat, the twin does not re-check each gang with it forced in. It is
a cross-check of the exact model and a peer in ``optplan compare``; the re-checks would double its code
without changing its plan.
"""

from __future__ import annotations

import copy
import logging
import math
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pulp

from optplan.models.goals import SEARCH, GoalPlan
from optplan.solvers.core.exact import ExactModelError, exact_record, strict
from optplan.solvers.core.highs import quiet
from optplan.solvers.core.milp import EQ, GE, LE, WarmHiGHS, backend, dual_bound, proven_optimal, row
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.core.planner import Planner
from optplan.solvers.goals.model import (
    Data,
    MoveClass,
    Stage,
    build_data,
    build_plan,
    decode,
    fallback,
    goal_record,
    plan_disruption,
    settle,
)
from optplan.solvers.goals.problem import GoalProblem, GoalResult
from optplan.solvers.goals.validate import goal_violations
from optplan.solvers.repack.exact.model import weigh, weighted_cost
from optplan.solvers.repack.rules import RestartUnit

log = logging.getLogger(__name__)

STAGE_SHARES = (0.45, 0.2, 0.35)
"""Share of the solving time of each stage (admissions, HyperNodes, disruption); what a stage leaves flows
to the next."""
RESERVE = 0.03
"""Share of the time limit kept for reading the solution back and validating it."""
PRESOLVE = "off"
"""HiGHS's presolve (off: see the module)."""

Term = tuple[Any, float]


# ---- the model ----------------------------------------------------------------------------------------

@dataclass
class Vars:
    """The MILP's variables, keyed as cpsat's (``model.ModelVars``)."""

    send: dict[tuple[int, str], Any] = field(default_factory=dict)
    moved: dict[int, Any] = field(default_factory=dict)
    source: dict[str, Any] = field(default_factory=dict)
    receiver: dict[str, Any] = field(default_factory=dict)
    admit: dict[int, Any] = field(default_factory=dict)
    place: dict[tuple[int, str], Any] = field(default_factory=dict)
    hyper: dict[int, list[Any]] = field(default_factory=dict)
    free: dict[str, Any] = field(default_factory=dict)
    region: dict[str, dict[str, Any]] = field(default_factory=dict)
    affected: dict[str, Any] = field(default_factory=dict)
    breach: dict[str, Any] = field(default_factory=dict)
    affected_cards: dict[str, Any] = field(default_factory=dict)
    restarted: dict[str, Any] = field(default_factory=dict)
    wide: dict[str, Any] = field(default_factory=dict)
    widening: dict[str, Any] = field(default_factory=dict)
    penalties: dict[str, list[tuple[Any, int]]] = field(default_factory=dict)

    def admitted(self, data: Data) -> pulp.LpAffineExpression:
        return _expr([(self.admit[i], data.priority_weight[i]) for i in data.eligible])

    def freed(self) -> pulp.LpAffineExpression:
        return _expr([(f, 1) for f in self.free.values()])

    def cost(self, data: Data) -> pulp.LpAffineExpression:
        return _expr(weigh(data.weights_int, self.penalties))


def _expr(terms: list[tuple[Any, int]]) -> pulp.LpAffineExpression:
    """Σ terms, a variable's coefficients added, without PuLP's copying operators (``core.milp.row``)."""
    out: dict[Any, float] = defaultdict(float)
    for x, c in terms:
        out[x] += c
    return pulp.LpAffineExpression([(x, c) for x, c in out.items() if c])


def _bin(prob: pulp.LpProblem, name: str) -> Any:
    return prob.add_variable(name, lowBound=0, upBound=1, cat="Binary")


def _int(prob: pulp.LpProblem, name: str, upper: int) -> Any:
    return prob.add_variable(name, lowBound=0, upBound=upper, cat="Integer")


def build(data: Data, *, budgets: bool = True, required: bool = False) -> tuple[pulp.LpProblem, Vars]:
    """The model (see cpsat's ``build``: same families, same order); ``required``: Σ free ≥ count."""
    prob = pulp.LpProblem("goals", pulp.LpMaximize)
    v = Vars()
    add_moves(prob, data, v)
    add_gangs(prob, data, v)
    add_capacity(prob, data, v)
    add_quota(prob, data, v)
    add_hyper_nodes(prob, data, v, required)
    add_necessity(prob, data, v)
    add_topology(prob, data, v)
    add_disruption(prob, data, v)
    if budgets:
        add_budgets(prob, data, v)
    return prob, v


def add_moves(prob: pulp.LpProblem, data: Data, v: Vars) -> None:
    """send, moved, and the node's role: a node that loses pods receives none."""
    nodes = sorted({k.node for k in data.classes} | {r for k in data.classes for r in k.receivers})
    for j, n in enumerate(nodes):
        v.source[n] = _bin(prob, f"source_{j}")
        v.receiver[n] = _bin(prob, f"receiver_{j}")
        row(prob, [(v.source[n], 1), (v.receiver[n], 1)], LE, 1)
    for k in data.classes:
        xs = []
        for j, (r, c) in enumerate(zip(k.receivers, k.caps, strict=True)):
            x = v.send[k.key, r] = _int(prob, f"send_{k.key}_{j}", c)
            row(prob, [(x, 1), (v.receiver[r], -c)], LE, 0)
            xs.append(x)
        y = v.moved[k.key] = _int(prob, f"moved_{k.key}", k.count if xs else 0)
        row(prob, [(y, 1)] + [(x, -1) for x in xs], EQ, 0)
        row(prob, [(y, 1), (v.source[k.node], -k.count)], LE, 0)


def add_gangs(prob: pulp.LpProblem, data: Data, v: Vars) -> None:
    """admit, region choice and the gang's pods: all of its minimum, inside the chosen region."""
    for i in data.eligible:
        v.admit[i] = _bin(prob, f"admit_{i}")
        v.hyper[i] = [_bin(prob, f"hyper_{i}_{j}") for j in range(len(data.regions[i]))]
        row(prob, [(y, 1) for y in v.hyper[i]] + [(v.admit[i], -1)], EQ, 0)
    for ci, gc in enumerate(data.gang_classes):
        xs = []
        regs = data.regions[gc.gang]
        size = len(gc.pods)
        for j, n in enumerate(gc.nodes):
            inside = [y for y, reg in zip(v.hyper[gc.gang], regs, strict=True) if n in reg.nodes]
            if not inside:
                continue
            x = v.place[ci, n] = _int(prob, f"place_{ci}_{j}", size)
            if len(inside) < len(regs):
                row(prob, [(x, 1)] + [(y, -size) for y in inside], LE, 0)
            xs.append(x)
        row(prob, [(x, 1) for x in xs] + [(v.admit[gc.gang], -size)], EQ, 0)


def add_capacity(prob: pulp.LpProblem, data: Data, v: Vars) -> None:
    """Per node and resource something landing there requests: what arrives − what leaves ≤ free now, rows
    divided by the resource's gcd; an over-committed node's row binds only when something lands (module)."""
    lands: dict[str, list[tuple[Any, dict[str, int]]]] = defaultdict(list)
    for k in data.classes:
        for r in k.receivers:
            lands[r].append((v.send[k.key, r], k.demand))
    for (ci, n), x in v.place.items():
        lands[n].append((x, data.gang_classes[ci].demand))
    leaves: dict[str, list[tuple[Any, dict[str, int]]]] = defaultdict(list)
    for k in data.classes:
        leaves[k.node].append((v.moved[k.key], k.demand))
    switches: list[Any] = []
    for n in sorted(lands):
        free = data.free0[n]
        for res in sorted({r for _, d in lands[n] for r, a in d.items() if a > 0 and (r != "pods" or r in free)}):
            unit = data.units[res]
            inc: list[Term] = [(x, d[res] // unit) for x, d in lands[n] if d.get(res, 0) > 0]
            out: list[Term] = [(x, -(d[res] // unit)) for x, d in leaves.get(n, []) if d.get(res, 0) > 0]
            room = free.get(res, 0) // unit
            if room >= 0:
                row(prob, inc + out, LE, room)
                continue
            on = _bin(prob, f"lands_{len(switches)}")
            switches.append(on)
            row(prob, [*inc, *out, (on, -room)], LE, 0)
            for x, _ in inc:
                row(prob, [(x, 1), (on, -x.upBound)], LE, 0)


def add_quota(prob: pulp.LpProblem, data: Data, v: Vars) -> None:
    """Per queue of each gang's chain and resource the gangs request: allocated + Σ admit·requests ≤
    realCapability (``QueueState.fit_reason``)."""
    qs = data.problem.queue_state()
    rows: dict[tuple[str, str], list[tuple[Any, int]]] = defaultdict(list)
    for i in data.eligible:
        g = data.problem.gangs[i]
        for q in qs.chain(g.queue):
            for r, amount in g.requests.items():
                if amount > 0:
                    rows[q, r].append((v.admit[i], amount))
    for (q, r), terms in sorted(rows.items()):
        room = qs.real.get(q, {}).get(r, 0) - qs.allocated.get(q, {}).get(r, 0)
        if room < 0:  # over its capability already: no gang asking for r gets in
            for x, _ in terms:
                row(prob, [(x, 1)], EQ, 0)
            continue
        unit = 0
        for _, a in terms:
            unit = math.gcd(unit, a)
        row(prob, [(x, a // unit) for x, a in terms], LE, room // unit)


def add_hyper_nodes(prob: pulp.LpProblem, data: Data, v: Vars, required: bool) -> None:
    """A freed HyperNode: every R pod on its nodes moves, nothing R lands; Σ free ≤ count (≥ when required)."""
    p = data.problem
    if not p.free_count:
        return
    R = p.resource
    on: dict[str, list[MoveClass]] = defaultdict(list)
    for k in data.classes:
        on[k.node].append(k)
    lands: dict[str, list[Any]] = defaultdict(list)
    for (ci, n), x in v.place.items():
        if data.gang_classes[ci].demand.get(R, 0) > 0:
            lands[n].append(x)
    for j, (h, nodes) in enumerate(data.hyper.items()):
        f = v.free[h] = _bin(prob, f"free_{j}")
        for n in sorted(nodes):
            if p.movable.get(n) and not on.get(n):  # an R pod the model cannot move (restricted away) stays
                row(prob, [(f, 1)], EQ, 0)
            for k in on.get(n, []):
                row(prob, [(v.moved[k.key], 1), (f, -k.count)], GE, 0)
            if n in v.receiver:
                row(prob, [(f, 1), (v.receiver[n], 1)], LE, 1)
            for x in lands.get(n, []):
                row(prob, [(x, 1), (f, x.upBound)], LE, x.upBound)
    freed: list[Term] = [(f, 1) for f in v.free.values()]
    row(prob, freed, LE, p.free_count)
    if required:
        row(prob, freed, GE, p.free_count)


def add_necessity(prob: pulp.LpProblem, data: Data, v: Vars) -> None:
    """A node loses pods only where a gang pod lands or inside a freed HyperNode."""
    landing: dict[str, list[Any]] = defaultdict(list)
    for (_, n), x in v.place.items():
        landing[n].append(x)
    for n in sorted({k.node for k in data.classes}):
        why = landing.get(n, []) + [f for h, f in v.free.items() if n in data.hyper[h]]
        row(prob, [(v.source[n], 1)] + [(x, -1) for x in why], LE, 0)


def add_topology(prob: pulp.LpProblem, data: Data, v: Vars) -> None:
    """A topology PodGroup with moved pods ends inside one region: a class outside it moves whole, pods
    land only inside it; a soft group's widening ≥ the region's tier − its tier now."""
    topology = data.problem.snapshot.topology
    for i, (g, regions) in enumerate(data.topo.items()):
        if not regions:  # no region holds its pods that stay: none of its pods moves
            for k in data.classes:
                if k.group == g:
                    row(prob, [(v.moved[k.key], 1)], EQ, 0)
            continue
        region = v.region[g] = {h: _bin(prob, f"region_{i}_{j}") for j, h in enumerate(regions)}
        row(prob, [(y, 1) for y in region.values()], EQ, 1)
        for k in data.classes:
            if k.group != g:
                continue
            inside_here = [y for h, y in region.items() if k.node in topology.region_nodes(h)]
            if len(inside_here) < len(region):
                row(prob, [(v.moved[k.key], 1)] + [(y, k.count) for y in inside_here], GE, k.count)
            for r in k.receivers:
                inside = [y for h, y in region.items() if r in topology.region_nodes(h)]
                if len(inside) < len(region):
                    row(prob, [(v.send[k.key, r], 1)] + [(y, -k.count) for y in inside], LE, 0)
        if g in data.topo_before:
            w = v.widening[g] = _int(prob, f"widening_{i}", topology.top_tier)
            row(prob, [(w, 1)] + [(y, -topology.tier(h)) for h, y in region.items()], GE, -data.topo_before[g])
    v.penalties["topologyWidening"] = [(w, 1) for w in v.widening.values()]


def add_disruption(prob: pulp.LpProblem, data: Data, v: Vars) -> None:
    """Repack's dimensions, restart units counted (see cpsat's ``add_disruption``); lower bounds, tight at
    stage 3's optimum."""
    rp = data.problem.repack
    by_group: dict[str, list[MoveClass]] = defaultdict(list)
    for k in data.classes:
        by_group[k.group].append(k)
    for i, (g, ks) in enumerate(sorted(by_group.items())):
        gang = rp.gangs[g]
        a = v.affected[g] = _bin(prob, f"affected_{i}")
        b = v.breach[g] = _bin(prob, f"breach_{i}")
        singles = [k for k in ks if k.unit.policy is None]
        units: dict[str, RestartUnit] = {}
        wide: list[MoveClass] = []
        for k in ks:
            row(prob, [(v.moved[k.key], 1), (a, -k.count)], LE, 0)
            if k.unit.whole_group:
                wide.append(k)
            elif k.unit.policy is not None:
                units[k.unit.key] = k.unit
                x = v.restarted.get(k.unit.key)
                if x is None:
                    x = v.restarted[k.unit.key] = _bin(prob, f"restarted_{len(v.restarted)}")
                row(prob, [(v.moved[k.key], 1), (x, -k.count)], LE, 0)
        running: list[Term] = ([(v.moved[k.key], 1) for k in singles]
                               + [(v.restarted[u], unit.running) for u, unit in sorted(units.items())])
        total = sum(k.count for k in singles) + sum(unit.running for unit in units.values())
        if total > gang.safe:
            row(prob, [*running, (b, -(total - gang.safe))], LE, gang.safe)
        cards: list[Term] = ([(v.moved[k.key], data.cards(k.cards)) for k in singles]
                             + [(v.restarted[u], data.cards(unit.cards)) for u, unit in sorted(units.items())])
        footprint = data.cards(gang.footprint)
        upper = max(footprint, sum(data.cards(k.cards) * k.count for k in singles)
                    + sum(data.cards(unit.cards) for unit in units.values()),
                    max((data.cards(k.unit.cards) for k in wide), default=0))
        ac = v.affected_cards[g] = _int(prob, f"affected_cards_{i}", upper)
        row(prob, [(ac, 1)] + [(x, -c) for x, c in cards], GE, 0)
        row(prob, [(ac, 1), (b, -footprint)], GE, 0)
        if wide:
            w = v.wide[g] = _bin(prob, f"wide_{i}")
            for k in wide:
                row(prob, [(v.moved[k.key], 1), (w, -k.count)], LE, 0)
            whole = wide[0].unit
            if whole.running > gang.safe:
                row(prob, [(w, 1), (b, -1)], LE, 0)
            row(prob, [(ac, 1), (w, -data.cards(whole.cards))], GE, 0)
    v.penalties["affectedPodGroups"] = [(a, 1) for a in v.affected.values()]
    v.penalties["podGroupsBelowMinAvailable"] = [(b, 1) for b in v.breach.values()]
    v.penalties["affectedCards"] = [(ac, 1) for ac in v.affected_cards.values()]
    v.penalties["movedCards"] = [(v.moved[k.key], data.cards(k.cards)) for k in data.classes]
    v.penalties["movedPods"] = [(v.moved[k.key], 1) for k in data.classes]


def add_budgets(prob: pulp.LpProblem, data: Data, v: Vars) -> None:
    """maxPerRun.podGroups (affected PodGroups), maxPerRun.resources (moved amounts), PDB disruptions."""
    p = data.problem
    mpr = p.run.spec.max_per_run
    if mpr.pod_groups is not None and v.affected:
        row(prob, [(a, 1) for a in v.affected.values()], LE, mpr.pod_groups)
    for res, budget in sorted(mpr.resources.items()):
        terms: list[Term] = [(v.moved[k.key], k.pods[0].request(res)) for k in data.classes
                             if k.pods[0].request(res) > 0]
        if terms:
            row(prob, terms, LE, budget)
    use: dict[str, list[Any]] = defaultdict(list)
    for k in data.classes:
        for key in k.pdbs:
            use[key].append(v.moved[k.key])
    for key, xs in sorted(use.items()):
        row(prob, [(x, 1) for x in xs], LE, p.snapshot.pdbs[key].disruptions_allowed)


# ---- solving ----------------------------------------------------------------------------------------------

@dataclass
class Run:
    """One stage's HiGHS answer: FOUND (a solution, proven or not), INFEASIBLE, or NONE (no solution)."""

    kind: str
    stage: Stage | None = None


def _solve(prob: pulp.LpProblem, objective: pulp.LpAffineExpression, maximize: bool, options: PlanOptions,
           seconds: float, what: str, most: int) -> Run:
    """Optimise ``objective``, cold (the module says why). The stage's value is read from the
    solution's rounded values; its bound is HiGHS's (``most`` for a maximisation HiGHS gives none, 0 for a
    minimisation)."""
    prob.setObjective(objective)
    prob.sense = pulp.LpMaximize if maximize else pulp.LpMinimize
    solver = backend(options, seconds)
    if isinstance(solver, WarmHiGHS):
        solver.gapRel = 0.0
        solver.optionsDict["presolve"] = PRESOLVE
    else:  # pragma: no cover - CBC, without highspy
        solver.optionsDict["gapRel"] = 0.0
    with quiet():
        prob.solve(solver)
    if prob.status == pulp.LpStatusInfeasible:
        log.info("goals milp %s: INFEASIBLE", what)
        return Run("INFEASIBLE")
    if prob.sol_status not in (pulp.LpSolutionIntegerFeasible, pulp.LpSolutionOptimal):
        log.info("goals milp %s: no solution", what)
        return Run("NONE")
    for x in prob.variables():
        x.varValue = round(x.varValue or 0)
    value = round(pulp.value(objective) or 0)
    proven = proven_optimal(prob)
    b = dual_bound(prob)
    if proven:
        bound = value
    elif maximize:  # HiGHS's dual bound; one on the wrong side of its own solution is no bound
        bound = most if b is None or math.floor(-b + 1e-6) < value else math.floor(-b + 1e-6)
    else:
        bound = 0 if b is None or math.ceil(b - 1e-6) > value else math.ceil(b - 1e-6)
    log.info("goals milp %s: %s objective %s bound %s", what, "OPTIMAL" if proven else "FEASIBLE", value, bound)
    return Run("FOUND", Stage(value, bound, proven))


@dataclass
class Outcome:
    data: Data
    model: pulp.LpProblem | None
    vars: Vars | None
    values: dict[Any, int] | None  # the final solution (None: no solution)
    stages: list[Stage]
    required: bool  # the required HyperNode count is a row of the final model
    infeasible_required: bool  # the required count was proven out of reach
    exact_cost: bool = True  # stage 3's optimum is the rules' weighted disruption of the plan


def solve(problem: GoalProblem, options: PlanOptions, hint: GoalPlan | None = None) -> Outcome:
    """The three stages (see the module) on one model."""
    start = time.perf_counter()
    end = start + options.time_limit * (1 - RESERVE)
    data = build_data(problem, hint)
    hint_ok = hint is not None and not goal_violations(problem, hint)
    required = bool(problem.free_count and problem.free_required)
    shares = [STAGE_SHARES[0], STAGE_SHARES[1] if data.hyper else 0.0, STAGE_SHARES[2]]

    def until(i: int) -> float:
        return (end - time.perf_counter()) * shares[i] / max(sum(shares[i:]), 1e-9)

    most = sum(data.priority_weight.values())

    def stage1(req: bool, what: str) -> tuple[pulp.LpProblem, Vars, Run]:
        prob, v = build(data, required=req)
        return prob, v, _solve(prob, v.admitted(data), True, options, until(0), what, most)

    prob, v, run = stage1(required, "stage 1 (admissions)")
    infeasible_required = False
    # a valid hint meeting the required count is a solution: then INFEASIBLE is a bug (below)
    meets = hint_ok and hint is not None and len(hint.freed_hyper_nodes) >= problem.free_count
    if run.kind == "INFEASIBLE" and required and not meets:
        infeasible_required, required = True, False
        prob, v, run = stage1(False, "stage 1 (admissions), required HyperNodes dropped")
    if run.kind == "INFEASIBLE":  # doing nothing (or the valid hint) is a solution: only a bug refuses it
        _bug("goals milp stage 1 (admissions)")
    if run.stage is None:
        return Outcome(data, prob, v, None, [], required, infeasible_required)
    stages = [run.stage]
    best = _values(prob)
    # stage 2: freed HyperNodes, the admissions kept
    row(prob, list(v.admitted(data).items()), EQ if stages[0].proven else GE, stages[0].value)
    if v.free:
        run = _solve(prob, v.freed(), True, options, until(1), "stage 2 (HyperNodes)", problem.free_count)
        best = _advance(prob, run, "stage 2 (HyperNodes)", stages, best,
                        lambda b: Stage(sum(b[f] for f in v.free.values()), problem.free_count, False))
        row(prob, list(v.freed().items()), EQ if stages[1].proven else GE, stages[1].value)
    else:
        stages.append(Stage(0, 0, True))
    # stage 3: the weighted disruption, admissions and HyperNodes kept
    cost = v.cost(data)
    run = _solve(prob, cost, False, options, until(2), "stage 3 (disruption)", 0)
    best = _advance(prob, run, "stage 3 (disruption)", stages, best,
                    lambda b: Stage(round(sum(c * b[x] for x, c in cost.items())), 0, False))
    return Outcome(data, prob, v, best, stages, required, infeasible_required)


def _advance(prob: pulp.LpProblem, run: Run, what: str, stages: list[Stage], best: dict[Any, int],
             unsolved: Callable[[dict[Any, int]], Stage]) -> dict[Any, int]:
    """Record a later stage's outcome in ``stages``; the solution to keep: the stage's when it found
    one, else ``best`` (the earlier stage's), whose value ``unsolved`` reads as the stage's."""
    if run.kind == "INFEASIBLE":
        _bug(f"goals milp {what}")
    if run.stage is not None:
        stages.append(run.stage)
        return _values(prob)
    stages.append(unsolved(best))
    return best


def _values(prob: pulp.LpProblem) -> dict[Any, int]:
    return {x: round(x.varValue or 0) for x in prob.variables()}


def _bug(what: str) -> None:
    """HiGHS answered INFEASIBLE where a solution is known (doing nothing, the valid hint, the previous
    stage's solution): a bug in the model or in HiGHS. Raised in strict mode (``core.exact.strict``); else
    logged, and the planner keeps the previous stage's solution (none at stage 1: FALLBACK)."""
    message = f"{what}: HiGHS answered INFEASIBLE although a solution is known"
    if strict():
        raise ExactModelError(message)
    log.error("%s (a bug in the MILP twin or HiGHS)", message)


# ---- the planner -------------------------------------------------------------------------------------------

class MilpGoalPlanner(Planner[GoalProblem, GoalResult]):
    """The MILP twin of the exact goal planner (see the module)."""

    name = "milp"

    def plan(self, problem: GoalProblem, options: PlanOptions, hint: GoalResult | None = None) -> GoalResult:
        """``hint``: a plan to start from (the greedy's), kept when nothing better is found."""
        t0 = time.perf_counter()
        start = hint.plan if hint is not None else None
        out = solve(problem, options, start)
        data = out.data
        checked = copy.copy(problem)
        if out.infeasible_required:  # the caller reports the count not met; every other rule holds
            checked.free_required = False
        plan: GoalPlan | None = None
        if out.values is not None and out.vars is not None:
            values = out.values
            moves, admitted, freed_h = decode(data, out.vars, lambda x: values[x])
            causes = {i: (SEARCH, "no plan admitting it was found (the MILP twin does not re-check why; the "
                                  "cpsat planner does)") for i in data.eligible if i not in admitted} | data.causes
            plan = build_plan(problem, moves, admitted, causes, freed_h)
            d = plan_disruption(problem, plan)
            found = goal_violations(checked, plan, claimed=d)
            if found:
                message = f"goals milp: the model's plan breaks the goal rules: {'; '.join(found[:5])}"
                if strict():
                    raise ExactModelError(message)
                log.error("%s (a bug in the MILP twin); FALLBACK", message)
                plan = None
            else:
                out.exact_cost = settle(out.stages, weighted_cost(data.weights_int, data.card_unit, d),
                                        out.exact_cost, self.name)
        wall = round(time.perf_counter() - t0, 3)
        stats = self._stats(out)
        if plan is None:  # no solution, or a bug: the valid hint, else the gangs that fit now, else nothing
            plan = fallback(problem, data, start, lambda pl: not goal_violations(problem, pl))
            record = exact_record(self.name, "FALLBACK", freed=None, freed_bound=None, objective=None, bound=None,
                                  wall=wall)
            return GoalResult(plan, record, plan_disruption(problem, plan), stats)
        record = goal_record(self.name, problem, data, out.stages, exact_cost=out.exact_cost,
                             infeasible_required=out.infeasible_required, wall=wall)
        return GoalResult(plan, record, plan_disruption(problem, plan), stats)

    @staticmethod
    def _stats(out: Outcome) -> dict[str, int]:
        data = out.data
        stats = {"moveClasses": len(data.classes), "sendVariables": sum(len(k.receivers) for k in data.classes),
                 "placeVariables": sum(len(gc.nodes) for gc in data.gang_classes), "restricted": int(data.restricted)}
        if out.model is not None:
            stats |= {"variables": len(out.model.variables()), "constraints": out.model.numConstraints()}
        for name, st in zip(("admitWeight", "freedHyperNodes", "cost"), out.stages, strict=False):
            stats |= {name: st.value, f"{name}Bound": st.bound, f"{name}Proven": int(st.proven)}
        return stats


__all__ = ["MilpGoalPlanner"]
