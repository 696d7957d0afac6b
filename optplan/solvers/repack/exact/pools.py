"""Per-pool Repack by pod shape: the exact model of each independent part, with pods counted by shape,
for models too large to solve whole (``auto``).

The exact model (``model``, ``cpsat``) sends each pod class (the interchangeable pods of one node) to
each receiver: at 2,000 nodes in four pools, about 100,000 (class, receiver) pairs per pool. Yet a
class's receivers and fit depend only on its shape, (constraint signature, demand) (``AdmitSets``): the
pods of one shape from every vacated node of a part are interchangeable at every receiver. So per part
(``model.components``: one per node pool unless a PodGroup, a PDB or maxPerRun links them) this model
keeps the exact model's decisions and rules with one change, sends by shape:

- ``vacate[c]`` for the part's candidates, as in the exact model (candidates of other parts and those
  no receiver admits stay);
- ``send[s, r]``: pods of shape s sent to receiver r, over every receiver that admits the shape (none
  pruned), at most what fits on r alone (``ModelData.arc_cap``); Σ_r send[s, r] = the pods of shape s
  on the vacated nodes;
- fit on every resource of every receiver (``ModelData.capacity_rows`` over the shapes), a vacated
  receiver receiving nothing, and the redundant total-room row (``ModelData.room_rows``);
- PodGroups (affected, breach, restart units, affected cards: ``cpsat.add_gang``), maxPerRun and PDBs
  (``cpsat.add_budgets``) and the moved pods and cards (``cpsat.move_costs``) read only the vacate
  decisions, so they are the exact model's own.

Which pods of a shape go to which receiver changes neither a rule nor the cost, so the two models have
the same optimum: phase 1 (most freed nodes) and phase 2 (least disruption with those fixed) solved
here are the exact model's, and a proof here is a proof for the whole part. Topology is the exception
(a PodGroup's region depends on where its pods go): a part with a topology PodGroup is not solved here.
Counts are turned back into pods in name order (``decode``). The whole plan is checked by the one
validator before anyone uses it (``plan_violations``).

At 2,000 nodes in four pools of 4- and 8-card nodes, a part has three shapes and about 600 send
variables instead of 100,000: CP-SAT proves both phases of every part in about 3 s in all, where the
LNS on the pruned model stopped 15% short of the bound in 30 s. At 10,000 nodes a part (about 1,500
candidates) takes CP-SAT 3-12 s to a first solution on a loaded machine, so a large part first gets a
plan from chunks of it solved alone (``_chunks``, a restriction: about 400 candidates and their share
of the receivers each, well under a second apiece), then the whole part's solve may better it and
bounds it; its LP bound proves the chunks' plan when they meet.
"""

from __future__ import annotations

import logging
import math
import time
from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from ortools.sat.python import cp_model

from optplan.models.repack import PodMove, RepackPlan
from optplan.solvers.core.clock import Clock
from optplan.solvers.core.exact import Score, better, model_bug, proven_bound
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.core.oracle import NO_POD_LIMIT
from optplan.solvers.repack.exact import cpsat
from optplan.solvers.repack.exact import model as repack_model
from optplan.solvers.repack.exact.model import (
    ModelData,
    PodClass,
    admit_sets,
    components,
    merge_plans,
    plan_part,
    plan_score,
    receiver_free,
    restrict,
)
from optplan.solvers.repack.validate import plan_violations

log = logging.getLogger(__name__)

PHASE1_SHARE = 0.9
"""Of the time, what phase 1 (most freed nodes) may use over all parts; phase 2 has the rest and what
phase 1 leaves."""
CHUNK = 400
"""Parts with more candidates than this start from chunks of about this many solved alone (``_chunks``):
at 10,000 nodes a whole pool's first solution takes CP-SAT 3-12 s, a chunk's well under one."""
CHUNK_SHARE = 0.7
"""Of the time, what the chunks of the large parts may use; the whole parts have the rest."""
SEARCH = "LP_SEARCH, linearization level 1, no hint"
"""Phase 1's search, one worker: branching on the LP's reduced costs finds the most freed nodes where
CP-SAT's default search stalls, and without a hint, whose search first follows it for seconds (generated
10,000 nodes, mixed, a pool of 1,545 candidates: proven optimal at 1,003 in 2.0 s unhinted; hinted with
a plan freeing 773, the hint's search ran 4 s before the optimum at 5.9 s; default search, hinted with
the greedy's 850 nodes: 851 at 4 s; linearization level 2: 1,001 at 10 s). The part's best plan is kept
beside it (``_Part``): CP-SAT's plan replaces it only when better."""


@dataclass
class ShapeModel:
    """One part's model by shape (see the module)."""

    data: ModelData
    """The part (``restrict``) with every admitted receiver of its shapes and their free room."""
    shapes: ModelData
    """The same with one pod class per shape (node ""), the pods of every candidate: read for its
    capacity rows and per-arc caps."""
    shape_of: dict[int, int]
    """Pod class key (of ``data``) -> its shape's class key (of ``shapes``)."""

    @property
    def size(self) -> int:
        """Send variables."""
        return sum(len(k.receivers) for k in self.shapes.classes)


@dataclass
class PartOutcome:
    """What the shape model of one part gave."""

    nodes: list[str]
    plan: RepackPlan
    freed_bound: int
    """Most freed nodes in the part: proven when ``freed_proven``, else CP-SAT's bound or the part's size."""
    freed_proven: bool = False
    proven: bool = False
    """Both phases proven: the plan is the part's lexicographic optimum."""
    solved: bool = True
    """False when the part was not solved here (topology, or too large): ``plan`` is the hint's part."""


@dataclass
class PoolsOutcome:
    plan: RepackPlan
    parts: list[PartOutcome] = field(default_factory=list)

    @property
    def all_solved(self) -> bool:
        return all(q.solved for q in self.parts)

    @property
    def optimal(self) -> bool:
        return self.all_solved and all(q.proven for q in self.parts)

    @property
    def freed_bound(self) -> int:
        """Most nodes any plan frees, when every part was solved here (the parts are independent and
        each bound is the exact model's); else the number of live candidates."""
        return sum(q.freed_bound if q.solved else len(q.nodes) for q in self.parts)


def shape_model(data: ModelData, allowed: set[str] | None = None) -> ShapeModel | None:
    """The part's model by shape (receivers limited to ``allowed`` when given: a restriction); None when
    it has a topology PodGroup or too many (shape, receiver) pairs (``MAX_ARCS``)."""
    if data.topo_regions:
        return None
    sets = admit_sets(data.problem)
    by_key: dict[Any, list[PodClass]] = defaultdict(list)
    for k in data.classes:
        by_key[sets.key(k)].append(k)
    shapes: list[PodClass] = []
    shape_of: dict[int, int] = {}
    for i, (_, ks) in enumerate(sorted(by_key.items(), key=lambda kv: kv[1][0].key)):
        base, _own = data.admitted.entry(ks[0].key)
        receivers = [data.all_receivers[u] for u in base.tolist()]
        if allowed is not None:
            receivers = [r for r in receivers if r in allowed]
        pods = sorted((p for k in ks for p in k.pods), key=lambda p: p.key)
        shapes.append(replace(ks[0], key=i, node="", group="", pods=pods, receivers=receivers))
        for k in ks:
            shape_of[k.key] = i
    if sum(len(s.receivers) for s in shapes) > repack_model.MAX_ARCS:  # read when called: tests lower it
        return None
    receivers = sorted({r for s in shapes for r in s.receivers})
    cap = sets.cap
    free = {r: receiver_free(cap, r) for r in receivers}
    classes_at: dict[str, list[PodClass]] = defaultdict(list)
    for s in shapes:
        for r in s.receivers:
            classes_at[r].append(s)
    whole = replace(data, receivers=receivers, free=free, _fit={})
    by_shape = replace(whole, classes=shapes, classes_of={}, classes_at=dict(classes_at), _fit={})
    return ShapeModel(whole, by_shape, shape_of)


def build(sm: ShapeModel) -> tuple[cp_model.CpModel, cpsat.Vars]:
    """The model (see the module); ``Vars.send`` is keyed by (shape, receiver)."""
    data, shapes = sm.data, sm.shapes
    m = cp_model.CpModel()
    vacate = {c: m.new_bool_var(f"vacate[{c}]") for c in data.candidates}
    caps = {(s.key, r): shapes.arc_cap(s, r) for s in shapes.classes for r in s.receivers}
    send = {key: m.new_int_var(0, n, f"send[{key[0]}->{key[1]}]") for key, n in caps.items() if n > 0}
    v = cpsat.Vars(vacate, send, {}, {}, {}, {}, {}, cap=caps)
    moved: dict[int, list[tuple[Any, int]]] = defaultdict(list)
    for k in data.classes:
        moved[sm.shape_of[k.key]].append((vacate[k.node], k.count))
    for s in shapes.classes:  # every pod of a vacated node goes somewhere
        m.add(cp_model.LinearExpr.sum([x for (kk, _), x in send.items() if kk == s.key])
              == cp_model.LinearExpr.weighted_sum([x for x, _ in moved[s.key]], [n for _, n in moved[s.key]]))
    for r in data.receivers:
        open_ = (1 - vacate[r]) if r in vacate else 1  # a vacated receiver has no room at all
        for _res, room, dem in shapes.capacity_rows(r):
            arcs = [(send[kk, r], d) for kk, d in sorted(dem.items()) if (kk, r) in send]
            if arcs:
                m.add(cp_model.LinearExpr.weighted_sum([x for x, _ in arcs], [d for _, d in arcs]) <= room * open_)
        if r in vacate:
            for s in shapes.classes_at.get(r, []):
                if (s.key, r) in send:
                    m.add(send[s.key, r] <= caps[s.key, r] * open_)
    for _res, take, room in data.room_rows():  # redundant: the sum of the rows above
        m.add(cp_model.LinearExpr.weighted_sum([vacate[c] for c in take], list(take.values())) <= room)
    cpsat.penalize(v, cpsat.move_costs(data, v))
    cpsat.penalize(v, cpsat.add_gang(m, data, v))
    cpsat.add_budgets(m, data, v)
    m.add(v.freed() <= data.freed_upper)
    return m, v


def add_hint(sm: ShapeModel, v: cpsat.Vars, m: cp_model.CpModel, plan: RepackPlan) -> None:
    """Hint every variable from a plan of the part: vacate and PodGroups as the exact model does, sends
    counted by shape."""
    cpsat.add_hint(sm.data, replace(v, send={}), m, plan)  # sends are by shape here, not by class
    shape_of_pod = {p.key: sm.shape_of[k.key] for k in sm.data.classes for p in k.pods}
    counts: dict[tuple[int, str], int] = defaultdict(int)
    for mv in plan.moves:
        counts[shape_of_pod[mv.pod], mv.to_node] += 1
    for key, x in v.send.items():
        m.add_hint(x, counts.get(key, 0))


def decode(sm: ShapeModel, vacated: list[str], sends: dict[tuple[int, str], int]) -> RepackPlan:
    """Counts back to pods: the vacated nodes by name, their pods by class and name, each taking the next
    slot of its shape's receivers in name order."""
    slots: dict[int, list[str]] = defaultdict(list)
    for (s, r), n in sorted(sends.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        slots[s].extend([r] * n)
    nxt: dict[int, int] = defaultdict(int)
    moves = []
    for c in sorted(vacated):
        for k in sm.data.classes_of[c]:
            s = sm.shape_of[k.key]
            for pod in k.pods:
                moves.append(PodMove(pod=pod.key, from_node=c, to_node=slots[s][nxt[s]]))
                nxt[s] += 1
    return RepackPlan.build(moves, vacated)


def greedy(sm: ShapeModel) -> RepackPlan:
    """A quick plan of the part, the hint CP-SAT starts from when it beats the caller's: candidates by
    the R they hold (least first, then by name), each vacated when all its pods (largest R first) find
    room, each pod on a receiver of its shape that fits it on every resource: one that stays (no
    candidate, or one passed and kept) if any, else the candidate latest in the order; then the least R
    left (best fit), then by name. A node that receives stays. Budgets and PDBs are not read: a part with
    any is not hinted so (``_start``)."""
    data, shapes = sm.data, sm.shapes
    problem = data.problem
    receivers = data.receivers
    at = {r: i for i, r in enumerate(receivers)}
    res = sorted({r for k in shapes.classes for r in k.demand})
    room = np.minimum(admit_sets(problem).cap.room_matrix(receivers, res), NO_POD_LIMIT).astype(np.int64)
    row_r = res.index(problem.resource)
    demand = {k.key: np.array([k.demand.get(r, 0) for r in res], dtype=np.int64) for k in shapes.classes}
    admits = {k.key: np.array([at[r] for r in k.receivers], dtype=np.int64) for k in shapes.classes}
    closed = np.zeros(len(receivers), dtype=bool)  # vacated: receives nothing
    received = np.zeros(len(receivers), dtype=bool)  # received a pod: stays
    load = {c: sum(k.cards * k.count for k in data.classes_of[c]) for c in data.candidates}
    order = sorted(data.candidates, key=lambda c: (load[c], c))
    # Rank of each receiver: 0 when it stays (not a candidate, or a candidate passed and kept), else
    # its candidate's place from the end of the order (a node to vacate soon is the last choice).
    rank = np.zeros(len(receivers), dtype=np.int64)
    for j, c in enumerate(order):
        if c in at:
            rank[at[c]] = len(order) - j
    moves: list[PodMove] = []
    vacated: list[str] = []
    for c in order:
        own = at.get(c, -1)
        if own >= 0:
            rank[own] = 0
        if own >= 0 and received[own]:
            continue
        if own >= 0:
            closed[own] = True
        mine: list[tuple[int, int, PodMove]] = []  # receiver, shape, move
        pods = sorted(((k, p) for k in data.classes_of[c] for p in k.pods), key=lambda kp: (-kp[0].cards, kp[1].key))
        for k, pod in pods:
            s = sm.shape_of[k.key]
            idx = admits[s]
            idx = idx[~closed[idx]]
            fits = idx[np.all(room[:, idx] >= demand[s][:, None], axis=0)]
            if not len(fits):
                break
            u = int(fits[np.lexsort((fits, room[row_r, fits], rank[fits]))[0]])
            room[:, u] -= demand[s]
            mine.append((u, s, PodMove(pod=pod.key, from_node=c, to_node=receivers[u])))
        else:
            moves.extend(mv for _, _, mv in mine)
            vacated.append(c)
            for u, _, _ in mine:
                received[u] = True
            continue
        for u, s, _ in mine:  # some pod found no room: undone
            room[:, u] += demand[s]
        if own >= 0:
            closed[own] = False
    return RepackPlan.build(moves, vacated)


def _extract(sm: ShapeModel, v: cpsat.Vars, s: cp_model.CpSolver) -> RepackPlan:
    vacated = [c for c, x in v.vacate.items() if s.value(x)]
    return decode(sm, vacated, {key: int(s.value(x)) for key, x in v.send.items() if s.value(x)})


def _refused(st: Any, m: cp_model.CpModel, what: str, sm: ShapeModel, whole: RepackPlan) -> bool:
    """Whether CP-SAT refused a model that has a solution (hinted from a valid plan), which only a bug
    explains: reported as ``exact.model_bug`` (raised in strict mode); the part keeps its hint."""
    if st == cp_model.MODEL_INVALID:
        status = "MODEL_INVALID"
    elif st == cp_model.INFEASIBLE and not plan_violations(sm.data.problem, whole):
        status = "INFEASIBLE"
    else:
        return False
    model_bug(what, status, m.validate())
    return True


@dataclass
class _Part:
    """One part being solved: its model (phase 1's, which phase 2 extends) and the best plan so far."""

    sm: ShapeModel
    whole: RepackPlan
    """The valid plan whose part here is the caller's hint."""
    out: PartOutcome
    best: Score
    model: tuple[cp_model.CpModel, cpsat.Vars] | None = None
    built: int = 0
    """Variables of a model built but not yet charged to the clock."""


def _start(sm: ShapeModel, hint: RepackPlan, whole: RepackPlan, i: int) -> _Part:
    """The part's best plan to start from: ``hint`` (the part here of the valid plan ``whole``) or, when
    the part has no budget or PDB and it is better, ``greedy``'s."""
    data = sm.data
    best, score = hint, plan_score(data, hint)
    if not cpsat.budgeted(data):
        quick = greedy(sm)
        log.info("pools: part %d, greedy freed %d (hint %d)", i, len(quick.freed_nodes), score.freed)
        if better(plan_score(data, quick), score):
            best, score = quick, plan_score(data, quick)
    out = PartOutcome(list(data.candidates), best, data.freed_upper)
    if score.freed >= data.freed_upper:
        out.freed_bound, out.freed_proven = score.freed, True
    return _Part(sm, whole, out, score)


def _phase1(q: _Part, options: PlanOptions, until: float, i: int, hinted: bool = False) -> None:
    """Most freed nodes (see ``SEARCH``), ``hinted`` with the part's best plan or not; the model is kept
    for phase 2."""
    clock: Clock = cpsat.clock_of(options)
    sm, out = q.sm, q.out
    m, v = build(sm)
    q.model, q.built = (m, v), len(m.proto.variables)
    if out.freed_proven:  # the plan frees as many as the part can
        return
    if hinted:
        add_hint(sm, v, m, out.plan)
    m.maximize(v.freed())
    s = cpsat.solver_for(options, clock.left(until), len(v.send))
    s.parameters.search_branching = cp_model.LP_SEARCH  # see SEARCH
    s.parameters.linearization_level = 1
    st = s.solve(m)
    clock.solved(s, q.built)
    q.built = 0
    log.info("pools phase 1, part %d (%d candidates, %d sends): %s freed %s bound %s (hint %d) in %.2fs", i,
             len(out.nodes), len(v.send), s.status_name(st),
             s.objective_value if st in (cp_model.OPTIMAL, cp_model.FEASIBLE) else None,
             s.best_objective_bound, q.best.freed, s.wall_time)
    if _refused(st, m, f"pools phase 1 (freed), part {i}", sm, q.whole):
        out.solved, q.model = False, None
        out.plan = plan_part(q.whole, frozenset(out.nodes))
        return
    _keep_better(q, v, s, st)
    bound = proven_bound(s, st, maximize=True)  # the part's whole model, not a restriction
    if bound is not None:  # a solve cut before its first solution proves nothing: the bound stays
        out.freed_bound = min(out.freed_bound, bound)
    out.freed_bound = max(out.freed_bound, q.best.freed)
    out.freed_proven = q.best.freed >= out.freed_bound
    m.clear_objective()


def _keep_better(q: _Part, v: cpsat.Vars, s: cp_model.CpSolver, st: Any) -> None:
    """The solver's plan for the part replaces the part's best when it scores better."""
    if st in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        found = _extract(q.sm, v, s)
        if better(score := plan_score(q.sm.data, found), q.best):
            q.out.plan, q.best = found, score


def _phase2(q: _Part, options: PlanOptions, until: float, i: int) -> None:
    """Least disruption with the part's freed nodes fixed, on phase 1's model."""
    clock: Clock = cpsat.clock_of(options)
    sm, out = q.sm, q.out
    if q.model is None:
        return
    (m, v), q.model = q.model, None
    if q.best.freed == 0:  # nothing moves: no disruption
        out.proven = out.freed_proven
        return
    m.add(v.freed() == q.best.freed)
    m.minimize(cpsat.cost_expr(sm.data, v))
    add_hint(sm, v, m, out.plan)
    s = cpsat.solver_for(options, clock.left(until), len(v.send), phase=2)
    st = s.solve(m)
    clock.solved(s, q.built)
    log.info("pools phase 2, part %d: %s cost %s bound %s (hint %d) in %.2fs", i, s.status_name(st),
             s.objective_value if st in (cp_model.OPTIMAL, cp_model.FEASIBLE) else None, s.best_objective_bound,
             q.best.cost, s.wall_time)
    if _refused(st, m, f"pools phase 2 (cost), part {i}", sm, q.whole):
        out.solved, out.freed_proven = False, False
        out.plan = plan_part(q.whole, frozenset(out.nodes))
        return
    _keep_better(q, v, s, st)
    if st in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        out.proven = out.freed_proven and st == cp_model.OPTIMAL


def prepare(data: ModelData) -> list[tuple[ModelData, ShapeModel | None]]:
    """The parts of ``data`` (``components``), each with its model by shape (None: not solvable here)."""
    parts = [restrict(data, nodes, data.freed_upper) for nodes in components(data)]
    return [(p, shape_model(p)) for p in parts]


def solve(data: ModelData, hint: RepackPlan, options: PlanOptions, until: float,
          prepared: list[tuple[ModelData, ShapeModel | None]] | None = None) -> PoolsOutcome | None:
    """Every part of ``data`` (a whole model, pruned or not) solved by shape until ``until``: phase 1 on
    every part (within PHASE1_SHARE of the time), then phase 2 on every part, small parts first, each
    with a share of a phase's time by size (what a part leaves flows to the next); parts not solvable
    here keep the hint's plan. The merged plan, when it is better than the hint and the validator
    accepts it; else None."""
    clock = cpsat.clock_of(options)
    t0 = time.perf_counter()
    models = list(prepared if prepared is not None else prepare(data))
    models.sort(key=lambda pm: (pm[1].size if pm[1] is not None else 0, pm[0].candidates[0]))
    outcomes = [PartOutcome(list(p.candidates), plan_part(hint, frozenset(p.candidates)), len(p.candidates),
                            solved=False) for p, sm in models if sm is None]
    solving = [_start(sm, plan_part(hint, frozenset(p.candidates)), hint, i)
               for i, (p, sm) in enumerate(models) if sm is not None]
    weights = [len(q.out.nodes) + q.sm.size for q in solving]
    now = clock.now()
    chunked = [i for i, q in enumerate(solving) if len(q.out.nodes) > CHUNK and not cpsat.budgeted(q.sm.data)]
    chunk_end = now + (until - now) * CHUNK_SHARE
    for j, i in enumerate(chunked):
        _chunks(solving[i], options, _share([weights[c] for c in chunked], j, chunk_end, clock), i)
    now = clock.now()
    phase_end = now + (until - now) * PHASE1_SHARE
    for i, q in enumerate(solving):
        _phase1(q, options, _share(weights, i, phase_end, clock), i)
    for i, q in enumerate(solving):
        _phase2(q, options, _share(weights, i, until, clock), i)
    outcomes += [q.out for q in solving]
    rest = frozenset(data.candidates) - {c for q in outcomes for c in q.nodes}
    plan = merge_plans([plan_part(hint, rest), *(q.plan for q in outcomes)])
    out = PoolsOutcome(plan, outcomes)
    key, old = plan_score(data, plan), plan_score(data, hint)
    log.info("pools: %d parts (%d solved, %d proven): freed %d -> %d, cost %d -> %d in %.2fs", len(outcomes),
             sum(q.solved for q in outcomes), sum(q.proven for q in outcomes), old.freed, key.freed, old.cost,
             key.cost, time.perf_counter() - t0)
    if not better(key, old):
        return PoolsOutcome(hint, outcomes) if outcomes else None
    broken = plan_violations(data.problem, plan)
    if broken:  # the shape model missed a rule of the whole (never seen; kept as a guard)
        log.warning("pools: the merged plan broke a rule and was dropped: %s", broken[0])
        return None
    return out


def _chunks(q: _Part, options: PlanOptions, until: float, i: int) -> None:
    """A start for a large part: its candidates dealt into chunks of about CHUNK (by the R they hold,
    round robin), each with the same share of the part's other receivers (by free R, round robin), each
    chunk solved alone (phase 1 only: the whole part's phase 2 lowers the cost; a restriction: pods stay
    within their chunk, so the chunks' plans merge into a plan of the part). The merged plan replaces the
    part's when better."""
    clock: Clock = cpsat.clock_of(options)
    data = q.sm.data
    cands = sorted(data.candidates, key=lambda c: (sum(k.cards * k.count for k in data.classes_of[c]), c))
    n = math.ceil(len(cands) / CHUNK)
    own = set(cands)
    room = {r: data.free[r].get(data.problem.resource, 0) for r in data.receivers}
    others = sorted((r for r in data.receivers if r not in own), key=lambda r: (room[r], r))
    plans = []
    for j in range(n):
        mine = cands[j::n]
        sm = shape_model(restrict(data, sorted(mine), data.freed_upper), set(mine) | set(others[j::n]))
        if sm is None:
            return
        part = _start(sm, RepackPlan(), RepackPlan(), i)
        now = clock.now()
        _phase1(part, options, now + (until - now) / (n - j), i)
        plans.append(part.out.plan)
    plan = merge_plans(plans)
    score = plan_score(data, plan)
    log.info("pools: part %d in %d chunks freed %d (from %d)", i, n, score.freed, q.best.freed)
    if better(score, q.best):
        q.out.plan, q.best = plan, score


def _share(weights: list[int], i: int, end: float, clock: Clock) -> float:
    """When part i's time ends: the time left until ``end`` split by weight among parts i, i+1, ..."""
    now = clock.now()
    return now + (end - now) * weights[i] / max(sum(weights[i:]), 1)
