"""The exact goal planner (issue 15 §2 "Exact"): one CP-SAT model deciding the moves, the pending gangs'
placement and the HyperNodes to free together.

Decisions (integers only: identical pods are counted, not named):

- ``send[k, m]``: pods of move class k sent to receiver m. A move class is a set of interchangeable
  movable R pods on one node: same requests, constraint signature, PodGroup, covering PDBs and restart
  unit (when that unit is wider than the pod), so any of them may be the one that moves. ``moved[k]`` is
  their sum (a class may move in part); receivers pass the static predicates and hold one pod alone.
- ``source[n]`` / ``receiver[n]``: the node loses / receives pods; never both (the moves then run in any
  order, the goal validator's rule).
- ``admit[g]``: the gang is placed (fixed 0 for a gang with a proven ``cause``); ``place[g, c, n]``: pods
  of its gang class c (identical pods of its minimum) on node n, Σ_n place = admit · |c|; ``hyper[g, r]``:
  it lands in its r-th region (``Gang.regions``), Σ_r hyper = admit, pods only on the chosen region's nodes.
- ``free[h]``: a freeable HyperNode of the goal's tier is freed: every R pod on its nodes moves, no R pod
  (moved or forecast) lands there.
- At device level (GPU shares move; ``model._devices``): ``on[k, m, d]`` / ``gang_on[c, n, d]``: share pods
  of move class k / gang class c on device d (Σ_d = the send / place variable); ``whole[n, d]``: device d
  of n, untouched after the moves, given to a whole card (Σ_d = the whole cards arriving).
- ``region[p, h]``: a PodGroup with network topology and moved pods ends inside region h (a HyperNode of
  its allowed tiers; for soft groups any HyperNode or the root), so hard topology holds and a soft
  group's widening is counted exactly.

Constraints: capacity per node and resource (pod slot included): fixed usage − what leaves + what arrives +
gang pods ≤ allocatable, on each resource something landing there requests (an over-committed node only
binds when something lands); at device level per device: shares arriving + 1000 per whole card ≤ free
milli-GPU now + what the pods leaving it held, and the shares' memory likewise; quota per queue of each
gang's chain (``allocated + Σ admit · requests ≤ realCapability``, ``QueueState.fit_reason``); necessity (a
node loses pods only where a gang pod lands or in a freed HyperNode); maxPerRun.podGroups and .resources,
the PDBs (Repack's rules, ``problem.repack``); Σ free ≤ count (≥ count when required).

Objective, lexicographic, by stages (each fixes the previous optimum — or the value found, when the
stage was cut short — and is hinted with the previous solution): (1) Σ admit weighted by priority
level, a level outweighing every lower one together; (2) freed HyperNodes; (3) the seed's weighted
disruption on Repack's integer scale (``repack.exact.model.integer_weights``): affected PodGroups, those below
minAvailable and their affected cards (restart units counted: default pods, task/role units, whole
group), moved cards and pods, topology widening. These are lower-bounded in the model, tight at its
optimum; the plan's cost is the rules' (``weighted_cost`` of ``problem.repack.disruption``), and stage 3
is proven when it meets the model's bound (``settle``). Stage 1 starts from the hint, else from the gangs
that fit without a move (``fits_now``).

Status: OPTIMAL only when every stage was proven on the whole model; FEASIBLE otherwise, the record
giving the bound of the first stage not proven (``freed_nodes_bound``/``gap_percent`` of a maximising
stage: admission weight, then freed HyperNodes; ``best_bound`` of the disruption); INFEASIBLE when a
required HyperNode count cannot be met (the plan then frees as many as it can, the caller reports
RequiredNodeBlocksNotMet); FALLBACK when no solution was found (the hint, or the plan that does nothing).

The data (classes, receivers, regions, scales) and the rows of every family are ``model``'s
(``rows.exact_model``): this module creates a CP-SAT variable per key and emits the rows (``build``,
``emit``); the hints, the stages and the re-checks of gangs not admitted are its own. Scale: above
``model.MAX_VARIABLES`` the model is restricted: sources to the nodes of the gangs' regions where most R
could be made free (and the HyperNodes cheapest to free), receivers per class to the best fits, always
keeping what the hint uses; a restricted model is never OPTIMAL, and its bounds are the goals' own (every
gang, the HyperNode count).

Gangs not admitted name a cause: the gang's own (proven before planning), else a bounded re-check with
the gang forced in: feasible — HIGHER_GOAL (admitting it costs gangs of at least its priority) or, when
stage 1 was not proven, SEARCH; infeasible but feasible without the required HyperNodes — HIGHER_GOAL;
feasible without maxPerRun and the PDBs — BUDGET; else SEARCH.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import Any

from ortools.sat.python import cp_model

from optplan.models.goals import BUDGET, HIGHER_GOAL, SEARCH, GoalPlan
from optplan.solvers.core.clock import Clock
from optplan.solvers.core.exact import model_bug, proven_bound
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.core.planner import Planner
from optplan.solvers.goals.model import (
    RESERVE,
    Data,
    Stage,
    build_data,
    fits_now,
    stage_seconds,
)
from optplan.solvers.goals.model import fallback as shared_fallback
from optplan.solvers.goals.problem import GoalProblem, GoalResult
from optplan.solvers.goals.rows import (
    EQ,
    GE,
    LE,
    ExactModel,
    Key,
    Row,
    Term,
    exact_result,
    model_of,
)
from optplan.solvers.goals.validate import goal_violations
from optplan.solvers.repack.rules import gang_impact

log = logging.getLogger(__name__)

CAUSE_SHARE = 0.1
"""Share of the time limit kept for telling why gangs are not admitted."""
CAUSE_SECONDS = 2.0
"""At most this long per re-check of a gang not admitted."""
MAX_CAUSE_CHECKS = 8
"""Gangs re-checked at most (the others: SEARCH)."""


# ---- the model: ``rows.exact_model``'s rows, emitted ------------------------------------------------------

@dataclass
class Vars:
    """The CP-SAT variable of each of the model's keys (``rows.Key``), and the three objectives."""

    model: ExactModel
    of: dict[Key, Any] = field(default_factory=dict)

    def _sum(self, terms: list[Term]) -> Any:
        return cp_model.LinearExpr.weighted_sum([self.of[x] for x, _ in terms], [c for _, c in terms])

    def admitted(self, data: Data) -> Any:
        return self._sum(self.model.admitted)

    def freed(self) -> Any:
        return cp_model.LinearExpr.sum([self.of[x] for x, _ in self.model.freed])

    def cost(self, data: Data) -> Any:
        return self._sum(self.model.cost(data.weights_int))


def build(data: Data, *, budgets: bool = True, required: bool = False) -> tuple[cp_model.CpModel, Vars]:
    """The model (``rows.exact_model``, see the module); ``budgets``: maxPerRun and the PDBs; ``required``:
    Σ free ≥ count. Every variable is an integer from 0 to its upper bound, named after its key."""
    ex = model_of(data)
    m = cp_model.CpModel()
    v = Vars(ex)
    of = v.of
    for key, upper in ex.upper.items():
        of[key] = m.new_int_var(0, upper, f"{key[0]}[{','.join(map(str, key[1:]))}]")
    for r in ex.emitted(budgets=budgets, required=required):
        emit(m, ex, of, r)
    return m, v


def emit(m: cp_model.CpModel, ex: ExactModel, of: dict[Key, Any], r: Row) -> None:
    """One row: linear, only enforced if its literal has its value; CP-SAT's own constraint where the row
    is one: Σ of 0-1 variables = 1 (exactly one), one 0-1 variable fixed when a literal holds (an
    implication, written with a positive literal first)."""
    if r.enforce is None and r.sense == EQ and r.rhs == 1 and all(c == 1 and ex.upper[x] == 1 for x, c in r.terms):
        m.add_exactly_one([of[x] for x, _ in r.terms])
        return
    if r.enforce is not None and len(r.terms) == 1 and r.terms[0][1] == 1 and ex.upper[r.terms[0][0]] == 1 \
            and (r.sense, r.rhs) in ((LE, 0), (GE, 1)):
        key, value = r.enforce
        x = of[r.terms[0][0]]
        then = x.Not() if r.sense == LE else x
        if value:
            m.add_implication(of[key], then)
        else:  # ¬key → then, as ¬then → key
            m.add_implication(then.Not(), of[key])
        return
    expr = cp_model.LinearExpr.weighted_sum([of[x] for x, _ in r.terms], [c for _, c in r.terms])
    c = m.add(expr <= r.rhs if r.sense == LE else expr >= r.rhs if r.sense == GE else expr == r.rhs)
    if r.enforce is not None:
        key, value = r.enforce
        c.only_enforce_if(of[key] if value else of[key].Not())


def budgeted(data: Data) -> bool:
    return data.problem.repack.budgets.per_run or any(k.pdbs for k in data.classes)


# ---- hints ----------------------------------------------------------------------------------------------

def hint_values(data: Data, v: Vars, plan: GoalPlan) -> list[tuple[Any, int]]:
    """A plan as values of the model's variables (those the model has: a restricted model may lack some)."""
    p = data.problem
    rp = p.repack
    ex = v.model
    of = v.of
    class_of = {pod.key: k for k in data.classes for pod in k.pods}
    sends: dict[tuple[int, str], int] = defaultdict(int)
    for mv in plan.repack.moves:
        k = class_of.get(mv.pod)
        if k is not None:
            sends[k.key, mv.to_node] += 1
    out: list[tuple[Any, int]] = [(of[key], sends.get(key[1:], 0)) for key in ex.keys("send")]
    if data.devices:  # a moved share on the device its move names
        on: dict[tuple[int, str, int], int] = defaultdict(int)
        for mv in plan.repack.moves:
            k = class_of.get(mv.pod)
            room = data.devices.get(mv.to_node)
            if k is not None and room is not None and mv.to_devices and mv.to_devices[0] in room.index:
                on[k.key, mv.to_node, room.index.index(mv.to_devices[0])] += 1
        out += [(of[key], on.get(key[1:], 0)) for key in ex.keys("on")]
    out += [(of["moved", k.key], sum(n for (kk, _), n in sends.items() if kk == k.key)) for k in data.classes]
    sources = {mv.from_node for mv in plan.repack.moves}
    receivers = {mv.to_node for mv in plan.repack.moves}
    out += [(of[key], int(key[1] in sources)) for key in ex.keys("source")]
    out += [(of[key], int(key[1] in receivers)) for key in ex.keys("receiver")]
    admitted = {a.key: a for a in plan.admissions if a.admitted}
    gclass = {(gp.task, gp.index): ci for ci, gc in enumerate(data.gang_classes) for gp in gc.pods}
    places: dict[tuple[int, str], int] = defaultdict(int)
    for i in data.eligible:
        a = admitted.get(p.gangs[i].key)
        out.append((of["admit", i], int(a is not None)))
        chosen = -1
        if a is not None:
            nodes = {b.node for b in a.bindings}
            fits = [j for j, reg in enumerate(data.regions[i]) if nodes <= reg.nodes]
            named = [j for j in fits if data.regions[i][j].hyper_node == a.hyper_node]
            chosen = (named or fits or [-1])[0]
            for b in a.bindings:
                ci = gclass.get((b.task, b.index))
                if ci is not None and data.gang_classes[ci].gang == i:
                    places[ci, b.node] += 1
        out += [(of["hyper", i, j], int(j == chosen)) for j in range(len(data.regions[i]))]
    out += [(of[key], places.get(key[1:], 0)) for key in ex.keys("place")]
    freed = set(plan.freed_hyper_nodes)
    out += [(of[key], int(key[1] in freed)) for key in ex.keys("free")]
    moved = [p.snapshot.pods[mv.pod] for mv in plan.repack.moves if mv.pod in p.snapshot.pods]
    restarted = rp.restarted(moved)
    groups = {q.group_key for q in moved}
    units = {rp.restart_unit(q).key for q in moved}
    for _, g in ex.keys("affected"):
        r = restarted.get(g)
        breach, hit = gang_impact(rp.gangs[g], r.running, r.cards) if r is not None else (False, 0)
        out += [(of["affected", g], int(g in groups)), (of["breach", g], int(breach)),
                (of["affected_cards", g], data.cards(hit))]
    out += [(of[key], int(key[1] in units)) for key in ex.keys("restarted")]
    out += [(of[key], int(any(rp.restart_unit(q).whole_group and q.group_key == key[1] for q in moved)))
            for key in ex.keys("wide")]
    dest = {mv.pod: mv.to_node for mv in plan.repack.moves}
    topology = p.snapshot.topology
    regions: dict[str, list[str]] = defaultdict(list)
    for _, g, h in ex.keys("region"):
        regions[g].append(h)
    for g, region in regions.items():
        after = {dest.get(q.key, q.node_name) or "" for q in p.snapshot.pods_by_group.get(g, [])}
        inside = [h for h in region if after <= topology.region_nodes(h)]
        out += [(of["region", g, h], int(bool(inside) and h == inside[0])) for h in region]
        if ("widening", g) in of and inside:
            out.append((of["widening", g], max(topology.tier(inside[0]) - data.topo_before[g], 0)))
    return out


def _hint_solution(m: cp_model.CpModel, s: cp_model.CpSolver) -> None:
    """Hint every variable with the solver's last solution."""
    m.clear_hints()
    sol = list(s.response_proto.solution)
    m.proto.solution_hint.vars.extend(range(len(sol)))
    m.proto.solution_hint.values.extend(sol)


# ---- solving ----------------------------------------------------------------------------------------------

FOUND = (cp_model.OPTIMAL, cp_model.FEASIBLE)


@dataclass
class Outcome:
    data: Data
    model: cp_model.CpModel | None
    vars: Vars | None
    solver: cp_model.CpSolver | None  # holds the final solution (None: no solution)
    stages: list[Stage]
    required: bool  # the required HyperNode count is a constraint of the final model
    infeasible_required: bool  # the required count was proven out of reach


BIG_MODEL = 20_000
"""Above this many variables symmetry detection is off (as in Repack's model: it costs more than it brings)."""


def _solver(options: PlanOptions, clock: Clock, seconds: float, variables: int, interleave: bool
            ) -> cp_model.CpSolver:
    s = cp_model.CpSolver()
    clock.configure(s, max(seconds, 0.05))
    s.parameters.num_workers = options.workers
    s.parameters.random_seed = options.seed
    # OR-Tools 9.15's at-most-one/linear inclusion presolve can certify a wrong optimum
    # (google/or-tools#5293); placement's exact model turns it off too.
    s.parameters.presolve_inclusion_work_limit = 0
    # Presolve's probing took the whole limit on 300 nodes (37,000 variables: 10 s without a first
    # solution; 3.5 s to the proven optimum without probing and symmetries).
    s.parameters.cp_model_probing_level = 0
    if variables > BIG_MODEL:
        s.parameters.symmetry_level = 0
    if interleave:
        # Finding admissions is search, not proof: one worker interleaving its strategies (LNS among them)
        # admitted all 23 weight of a 300-node model in 2.7 s where the default search kept 21 at 10 s.
        # The disruption stage keeps the default: interleaved, its proofs took longer or did not come
        # (three of five 250-300-node models unproven at 30 s, against none).
        s.parameters.interleave_search = True
    return s


def _run(m: cp_model.CpModel, options: PlanOptions, clock: Clock, seconds: float, what: str, *,
         interleave: bool = False) -> tuple[Any, cp_model.CpSolver]:
    s = _solver(options, clock, seconds, len(m.proto.variables), interleave)
    st = s.solve(m)
    clock.solved(s, len(m.proto.variables))
    log.info("goals cpsat %s: %s objective %s bound %s in %.2fs", what, s.status_name(st),
             s.objective_value if st in FOUND else None, s.best_objective_bound if st in FOUND else None,
             s.wall_time)
    return st, s


def _next_stage(m: cp_model.CpModel, best: cp_model.CpSolver, objective: Any, maximize: bool, options: PlanOptions,
                clock: Clock, seconds: float, what: str) -> tuple[Any, cp_model.CpSolver] | None:
    """The next lexicographic stage on ``m`` (its earlier stages' rows added): ``objective`` from
    ``best``'s solution; None (after ``model_bug``) when CP-SAT refuses the model, which that
    solution satisfies."""
    m.clear_objective()
    _hint_solution(m, best)
    if maximize:
        m.maximize(objective)
    else:
        m.minimize(objective)
    st, s = _run(m, options, clock, seconds, what)
    if st in (cp_model.INFEASIBLE, cp_model.MODEL_INVALID):
        model_bug(f"goals cpsat {what}", s.status_name(st), m.validate())
        return None
    return st, s


def _stage(st: Any, s: cp_model.CpSolver, maximize: bool, unknown: int) -> Stage:
    """A stage solved with a solution (OPTIMAL or FEASIBLE): its value and the bound it proved (``unknown``,
    the trivial bound, when it proved none)."""
    value = round(s.objective_value)
    bound = proven_bound(s, st, maximize=maximize)
    return Stage(value, unknown if bound is None else bound, st == cp_model.OPTIMAL)


def solve(problem: GoalProblem, options: PlanOptions, hint: GoalPlan | None = None) -> Outcome:
    """The three stages (see the module) on one model, each hinted with the previous solution."""
    clock = options.timer()
    options = replace(options, clock=clock)
    start = clock.now()
    end = start + options.time_limit * (1 - CAUSE_SHARE - RESERVE)
    data = build_data(problem, hint)
    hint_ok = hint is not None and not goal_violations(problem, hint)
    required = bool(problem.free_count and problem.free_required)

    def until(i: int) -> float:
        return stage_seconds(data, i, clock.now(), end)

    warm = fits_now(data) if hint is None else hint

    def fresh(req: bool) -> tuple[cp_model.CpModel, Vars]:
        m, v = build(data, required=req)
        # without a hint, the gangs that fit without moves (``fits_now``): a solution at once, unless
        # HyperNodes are required
        for x, val in hint_values(data, v, warm):
            m.add_hint(x, val)
        m.maximize(v.admitted(data))
        return m, v

    m, v = fresh(required)
    st, s = _run(m, options, clock, until(0), "stage 1 (admissions)", interleave=True)
    infeasible_required = False
    # a valid hint meeting the required count is a solution: then INFEASIBLE is a bug (below)
    meets = hint_ok and hint is not None and len(hint.freed_hyper_nodes) >= problem.free_count
    if st == cp_model.INFEASIBLE and required and not meets:
        infeasible_required, required = True, False
        m, v = fresh(False)
        st, s = _run(m, options, clock, until(0), "stage 1 (admissions), required HyperNodes dropped", interleave=True)
    if st == cp_model.MODEL_INVALID or st == cp_model.INFEASIBLE:
        # doing nothing (or the valid hint, with a required count) is a solution: only a bug refuses it
        model_bug("goals cpsat stage 1 (admissions)", s.status_name(st), m.validate())
        return Outcome(data, m, v, None, [], required, infeasible_required)
    if st not in FOUND:
        return Outcome(data, m, v, None, [], required, infeasible_required)
    stages = [_stage(st, s, True, sum(data.priority_weight[i] for i in data.eligible))]
    best = s
    # stage 2: freed HyperNodes, the admissions kept
    m.add(v.admitted(data) == stages[0].value if stages[0].proven else v.admitted(data) >= stages[0].value)
    if v.model.freed:
        ran = _next_stage(m, best, v.freed(), True, options, clock, until(1), "stage 2 (HyperNodes)")
        if ran is None:
            return Outcome(data, m, v, None, [], required, infeasible_required)
        st, s = ran
        if st in FOUND:
            stages.append(_stage(st, s, True, problem.free_count))
            best = s
        else:
            value = sum(int(best.value(v.of[f])) for f, _ in v.model.freed)
            stages.append(Stage(value, problem.free_count, False))
    else:
        stages.append(Stage(0, 0, True))
    # stage 3: the weighted disruption, admissions and HyperNodes kept
    freed = v.freed()
    if v.model.freed:
        m.add(freed == stages[1].value if stages[1].proven else freed >= stages[1].value)
    ran = _next_stage(m, best, v.cost(data), False, options, clock, until(2), "stage 3 (disruption)")
    if ran is None:
        return Outcome(data, m, v, None, [], required, infeasible_required)
    st, s = ran
    if st in FOUND:
        stages.append(_stage(st, s, False, 0))
        best = s
    else:
        stages.append(Stage(round(best.value(v.cost(data))), 0, False))
    return Outcome(data, m, v, best, stages, required, infeasible_required)


# ---- reading the solution back ------------------------------------------------------------------------------

def explain(out: Outcome, options: PlanOptions, clock: Clock, admitted: set[int], end: float
            ) -> dict[int, tuple[str, str]]:
    """Why each gang is not admitted: its own cause, else a bounded re-check with it forced in (module),
    until ``end`` (a time of ``clock``)."""
    data = out.data
    causes = dict(data.causes)
    todo = [i for i in data.eligible if i not in admitted]
    stage1_proven = bool(out.stages) and out.stages[0].proven
    for n, i in enumerate(todo):
        left = clock.left(end)
        if n >= MAX_CAUSE_CHECKS or left <= 0.01:
            causes[i] = (SEARCH, "no plan admitting it was found (not re-checked: time or count limit)")
            continue
        seconds = min(CAUSE_SECONDS, left / (min(len(todo), MAX_CAUSE_CHECKS) - n))
        causes[i] = _cause(data, i, out, options, clock, seconds, stage1_proven, admitted)
    return causes


def _forced(data: Data, i: int, options: PlanOptions, clock: Clock, seconds: float, *, budgets: bool,
            required: bool) -> tuple[Any, cp_model.CpSolver, Vars]:
    m, v = build(data, budgets=budgets, required=required)
    m.add(v.of["admit", i] == 1)
    m.maximize(v.admitted(data))
    st, s = _run(m, options, clock, seconds, f"cause of {data.problem.gangs[i].key}", interleave=True)
    return st, s, v


def _cause(data: Data, i: int, out: Outcome, options: PlanOptions, clock: Clock, seconds: float,
           stage1_proven: bool, admitted: set[int]) -> tuple[str, str]:
    p = data.problem
    restricted = " (in the model restricted to the most promising nodes)" if data.restricted else ""
    st, s, v = _forced(data, i, options, clock, seconds, budgets=True, required=out.required)
    if st in FOUND:
        if not stage1_proven:
            return SEARCH, "a plan admitting it exists, but none better than the plan's admissions was proven"
        lost = sorted(p.gangs[j].key for j in admitted if not s.value(v.of["admit", j]))
        if lost:
            return HIGHER_GOAL, (f"admitting it would cost {', '.join(lost)} (of at least its priority) its "
                                 f"place{restricted}")
        return HIGHER_GOAL, f"admitting it would cost gangs of at least its priority their place{restricted}"
    if st != cp_model.INFEASIBLE:
        return SEARCH, "no plan admitting it was found within the time limit"
    if out.required:
        st, s, v = _forced(data, i, options, clock, seconds, budgets=True, required=False)
        if st in FOUND:
            return HIGHER_GOAL, (f"it fits only if fewer than the {p.free_count} required HyperNodes are "
                                 f"freed{restricted}")
    if budgeted(data):
        st, s, v = _forced(data, i, options, clock, seconds, budgets=False, required=False)
        if st in FOUND:
            return BUDGET, ("room can be made for it, but not within maxPerRun and the PodDisruptionBudgets"
                            f"{restricted}")
        if st != cp_model.INFEASIBLE:
            return SEARCH, "no plan admitting it was found within the time limit"
    return SEARCH, ("no plan admits it: the pods the scope and the movability rules let move cannot make room "
                    f"for it under its constraints{restricted}")


def fallback(problem: GoalProblem, data: Data, hint: GoalPlan | None) -> GoalPlan:
    """The plan when the model gave none (``model.fallback``, checked by the goal validator)."""
    return shared_fallback(problem, data, hint, lambda plan: not goal_violations(problem, plan))


# ---- the planner -------------------------------------------------------------------------------------------

class CpSatGoalPlanner(Planner[GoalProblem, GoalResult]):
    """The exact goal planner (see the module)."""

    name = "cpsat"

    def plan(self, problem: GoalProblem, options: PlanOptions, hint: GoalResult | None = None) -> GoalResult:
        """``hint``: a plan to start from (the greedy's), kept when nothing better is found."""
        t0 = time.perf_counter()
        start = hint.plan if hint is not None else None
        clock = options.timer()
        options = replace(options, clock=clock)
        end = clock.now() + options.time_limit * (1 - RESERVE)
        out = solve(problem, options, start)
        solver, v = out.solver, out.vars
        value = None if solver is None or v is None else (lambda key: int(solver.value(v.of[key])))
        counts = ({} if out.model is None else
                  {"variables": len(out.model.proto.variables), "constraints": len(out.model.proto.constraints)})
        return exact_result(self.name, problem, out.data, out.stages, value=value,
                            infeasible_required=out.infeasible_required,
                            causes=lambda admitted: explain(out, options, clock, admitted, end),
                            violations=goal_violations, hint=start, counts=counts, started=t0)
