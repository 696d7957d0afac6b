"""The exact Repack planner on OR-Tools CP-SAT (see ``model`` for the decisions).

Lexicographic objective, solved in two phases: (1) maximise freed nodes, bounded above by
occupied − theoretical minimum; (2) with freed nodes fixed at the phase-1 value, minimise the
integer-scaled weighted disruption. The greedy plan, when given, is the hint of both phases.

One function per constraint family (``add_<family>``). The hard ones (capacity, budgets) only add
constraints; the soft ones (moves, gang, topology) also return their penalty terms keyed by
disruption dimension (``Penalties``, as OR-Tools' shift_scheduling_sat.py does), and ``cost_expr``
builds the objective once from them and the integer weights, by dimension name.

CP-SAT answering INFEASIBLE or MODEL_INVALID although the solve was hinted with a valid plan is a
bug in the model, not a timeout: ``exact.model_bug`` reports it (an error, raised in strict mode)
and the solve returns no plan, so that ``auto`` returns the greedy's plan as FALLBACK.

The model is first split into independent parts (``repack_model.components``: typically one per
node pool) and both phases run part by part: the optimum of the whole is the union of the parts'
optima, and proofs on a part are far cheaper than on the whole (200 nodes, two pools: proven in
3-8 s where the whole model kept a 10% gap at 10 s). The record's stats say how many parts there
were and how many were proven optimal.
"""

from __future__ import annotations

import logging
import math
import time
from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import Any

from ortools.sat.python import cp_model

from optplan.models.devices import MILLI_PER_GPU
from optplan.models.repack import RepackPlan
from optplan.solvers.core.clock import WALL, Clock
from optplan.solvers.core.exact import exact_record, model_bug, proven_bound
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.core.oracle import Capacity
from optplan.solvers.core.planner import Planner
from optplan.solvers.repack.base import PlanResult
from optplan.solvers.repack.exact.model import (
    ModelData,
    breach_pairs,
    build_data,
    components,
    data_stats,
    decode,
    hint_counts,
    merge_plans,
    plan_part,
    plan_receivers,
    receiver_cap,
    restrict,
    scaled_cost,
    stuck,
    weigh,
)
from optplan.solvers.repack.rules import RepackProblem, explain, gang_impact
from optplan.solvers.repack.validate import plan_violations

log = logging.getLogger(__name__)


Penalties = dict[str, list[tuple[Any, int]]]
"""Dimension key (``DIMENSIONS``) -> penalty terms (variable, units of that dimension): what a soft
family costs; ``cost_expr`` weighs them."""


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
    cap: dict[tuple[int, str], int] = field(default_factory=dict)  # cap[class, receiver]: send's upper bound
    penalties: Penalties = field(default_factory=dict)  # the soft families' terms, by dimension
    on_device: dict[tuple[int, str, int], Any] = field(default_factory=dict)
    """on_device[class, receiver, device position]: a share class's pods on that device (``add_devices``)."""
    whole_on: dict[tuple[str, int], Any] = field(default_factory=dict)
    """whole_on[receiver, device position]: an untouched device given to a whole card (``add_devices``)."""

    def freed(self) -> Any:
        return cp_model.LinearExpr.sum(list(self.vacate.values()))


def build(data: ModelData) -> tuple[cp_model.CpModel, Vars]:
    m = cp_model.CpModel()
    vacate = {c: m.new_bool_var(f"vacate[{c}]") for c in data.candidates}
    cap = {(k.key, r): data.arc_cap(k, r) for k in data.classes for r in k.receivers}
    send = {(kk, r): m.new_int_var(0, n, f"send[{kk}->{r}]") for (kk, r), n in cap.items()}
    v = Vars(vacate, send, {}, {}, {}, {}, {}, cap=cap)
    penalize(v, add_moves(m, data, v))
    add_capacity(m, data, v)
    add_devices(m, data, v)
    penalize(v, add_gang(m, data, v))
    add_budgets(m, data, v)
    penalize(v, add_topology(m, data, v))
    m.add(v.freed() <= data.freed_upper)
    return m, v


def penalize(v: Vars, terms: Penalties) -> None:
    """Keep a soft family's penalty terms for the objective."""
    for key, ts in terms.items():
        v.penalties.setdefault(key, []).extend(ts)


def add_moves(m: cp_model.CpModel, data: ModelData, v: Vars) -> Penalties:
    """Every pod of a vacated node goes somewhere; pods of other nodes stay. Costs the moved pods and
    their cards (constants per vacated node)."""
    for k in data.classes:
        m.add(cp_model.LinearExpr.sum([v.send[k.key, r] for r in k.receivers]) == k.count * v.vacate[k.node])
    return move_costs(data, v)


def move_costs(data: ModelData, v: Vars) -> Penalties:
    """The moved pods and their cards: constants per vacated node."""
    return {"movedCards": [(v.vacate[k.node], data.cards(k.cards) * k.count) for k in data.classes],
            "movedPods": [(v.vacate[k.node], k.count) for k in data.classes]}


def add_capacity(m: cp_model.CpModel, data: ModelData, v: Vars) -> None:
    """Fit on every resource of every receiver; a vacated receiver receives nothing; and, per
    resource, what the vacated nodes take fits in the receivers' total room."""
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
            m.add(cp_model.LinearExpr.weighted_sum([sends[kk] for kk in dem], list(dem.values())) <= room * open_)
        if r in v.vacate:
            for kk, x in arcs:
                m.add(x <= v.cap[kk, r] * open_)
    for _res, take, room in data.room_rows():  # redundant: the sum of the rows above
        m.add(cp_model.LinearExpr.weighted_sum([v.vacate[c] for c in take], list(take.values())) <= room)


def add_devices(m: cp_model.CpModel, data: ModelData, v: Vars) -> None:
    """GPU devices, when shares move (``ModelData.devices``; nothing otherwise). On a receiver that lists
    its GPUs, the share classes' pods sent there are spread over the devices one pod fits
    (``on_device``), whole cards take untouched devices (``whole_on``: as many as the whole cards sent
    there), and per device the shares' milli-GPU plus a whole card's 1000 fit its free milli-GPU, the
    shares' memory its free memory, the shares its free pod slots (the register's count), a PodGroup whose
    shares spread one pod a device (none where it sits already: ``model.device_rooms``). With the totals'
    rows (``add_capacity``: the free ``nvidia.com/gpu`` there is the whole cards its untouched devices leave)
    this is the oracle's device-level fit, exactly."""
    spread_groups = data.spread_groups
    for r in data.receivers:
        room = data.devices.get(r)
        if room is None:
            continue
        on: dict[int, list[tuple[Any, int, int]]] = defaultdict(list)
        wholes: list[tuple[Any, int]] = []
        spread: dict[tuple[str, int], list[Any]] = defaultdict(list)  # (PodGroup, device) -> its pods there
        for k in data.classes_at.get(r, ()):
            if k.share:
                xs = []
                spreads = k.group in spread_groups
                for d, milli, memory in k.slots.get(r, ()):
                    most = min(k.count, room.free[d] // max(milli, 1))
                    if room.slots is not None:
                        most = min(most, room.slots[d])
                    x = v.on_device[k.key, r, d] = m.new_int_var(0, most, f"on_device[{k.key}->{r}#{d}]")
                    on[d].append((x, milli, memory))
                    xs.append(x)
                    if spreads:
                        spread[k.group, d].append(x)
                m.add(cp_model.LinearExpr.sum(xs) == v.send[k.key, r])
            elif k.whole_devices:
                wholes.append((v.send[k.key, r], k.whole_devices))
        if wholes:
            for d in room.untouched:
                v.whole_on[r, d] = m.new_bool_var(f"whole_on[{r}#{d}]")
            m.add(cp_model.LinearExpr.sum([v.whole_on[r, d] for d in room.untouched])
                  == cp_model.LinearExpr.weighted_sum([x for x, _ in wholes], [n for _, n in wholes]))
        for d, free in enumerate(room.free):
            terms = on.get(d, [])
            whole = v.whole_on.get((r, d))
            if not terms:
                continue
            used = cp_model.LinearExpr.weighted_sum([x for x, _, _ in terms], [n for _, n, _ in terms])
            m.add(used + (MILLI_PER_GPU * whole if whole is not None else 0) <= free)
            if room.memory is not None and any(mem for _, _, mem in terms):
                m.add(cp_model.LinearExpr.weighted_sum([x for x, _, _ in terms], [mem for _, _, mem in terms])
                      <= room.memory[d])
            if room.slots is not None:
                m.add(cp_model.LinearExpr.sum([x for x, _, _ in terms]) <= room.slots[d])
        for xs in spread.values():  # vgpu-podgroup-policy spread: one pod of the PodGroup a device
            m.add(cp_model.LinearExpr.sum(xs) <= 1)


def add_gang(m: cp_model.CpModel, data: ModelData, v: Vars) -> Penalties:
    """affected, breach and affected cards per PodGroup, restart units counted (minimisation keeps
    them tight). Costs each affected PodGroup, each one below minAvailable, and the affected cards."""
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
    return {"affectedPodGroups": [(a, 1) for a in v.affected.values()],
            "podGroupsBelowMinAvailable": [(b, 1) for b in v.breach.values()],
            "affectedCards": [(ac, 1) for ac in v.affected_cards.values()]}


def add_budgets(m: cp_model.CpModel, data: ModelData, v: Vars) -> None:
    """maxPerRun.podGroups, maxPerRun.resources and PodDisruptionBudgets, all hard."""
    spent = data.spent
    left = data.problem.budgets.left(spent)  # moves fixed outside the model spent the rest
    if left.pod_groups is not None:
        m.add(sum(x for g, x in v.affected.items() if g not in spent.pod_groups) <= left.pod_groups)
    for res, budget in left.resources.items():
        terms = [n * v.vacate[c] for c, n in data.budget_use[res].items()]
        if terms:
            m.add(sum(terms) <= budget)
    for key, by_node in data.pdb_use.items():
        m.add(sum(n * v.vacate[c] for c, n in by_node.items()) <= left.pdbs[key])


def budget_bound(data: ModelData, options: PlanOptions, limit: float) -> int | None:
    """Most nodes that can be freed within maxPerRun and the PDBs, proven on a relaxation: the
    vacate decisions with only the budget and PDB rows (PodGroups affected through the nodes their
    pods move from) and, per resource, one total-room row over every occupied provider (what the
    vacated nodes move, plus their own room, fits in the room of all of them; every receiver is an
    occupied provider, so any plan satisfies it, pruned receivers or not). Drops capacity per node,
    topology and restart units, so it is valid for the whole model; a few hundred milliseconds on
    openb's 1,213 nodes (the PodGroup budget 10 / 64 cards: 13, where the budget counts give 61).
    None when nothing is proven within ``limit``."""
    p = data.problem
    m = cp_model.CpModel()
    vacate = {c: m.new_bool_var(f"vacate_{i}") for i, c in enumerate(data.candidates)}
    for k in data.classes:
        if not k.receivers:  # a pod no receiver admits keeps its node
            m.add(vacate[k.node] == 0)
    affected = {}
    for g, by_node in data.group_moved_by.items():
        a = affected[g] = m.new_bool_var(f"affected_{g}")
        for c in by_node:
            m.add_implication(vacate[c], a)
    v = Vars(vacate=vacate, send={}, affected=affected, breach={}, affected_cards={}, widening={}, region={})
    add_budgets(m, data, v)
    cap = Capacity(p.snapshot)
    occupied = list(p.occupied)
    for res in sorted(data.units):
        if res == "pods" or any(res not in cap.free[r] for r in occupied):
            continue
        room = {r: max(cap.free[r][res], 0) for r in occupied}
        take: dict[str, int] = defaultdict(int)
        for k in data.classes:
            take[k.node] += k.count * k.demand.get(res, 0)
        unit = 0
        for c in data.candidates:
            take[c] += room.get(c, 0)
            unit = math.gcd(unit, take[c])
        total = sum(room.values()) // unit if unit else 0
        if unit and total + sum(take.values()) // unit < 2**50:  # memory in milli-bytes may not fit int64 sums
            m.add(sum((take[c] // unit) * vacate[c] for c in data.candidates) <= total)
    m.add(sum(vacate.values()) <= data.freed_upper)
    m.maximize(sum(vacate.values()))
    s = solver_for(options, limit)
    st = s.solve(m)
    clock_of(options).solved(s, len(m.proto.variables))
    log.info("cpsat budget bound: %s %s (bound %s) in %.2fs", s.status_name(st),
             s.objective_value if st in (cp_model.OPTIMAL, cp_model.FEASIBLE) else None, s.best_objective_bound,
             s.wall_time)
    if st in (cp_model.INFEASIBLE, cp_model.MODEL_INVALID):  # vacating nothing is a solution: a bug
        model_bug("cpsat budget bound", s.status_name(st), m.validate())
        return None
    bound = proven_bound(s, st, maximize=True)
    if bound is None:  # cut before its first solution: no bound
        return None
    data.relaxed = tuple(c for c, x in vacate.items() if s.value(x))
    return min(data.freed_upper, bound)


def tighten(data: ModelData, options: PlanOptions, hint: RepackPlan | None) -> None:
    """Lower ``data.freed_upper`` to ``budget_bound`` when budgets or PDBs bind."""
    if budgeted(data):
        relaxed = budget_bound(data, options, min(BUDGET_BOUND_SECONDS, 0.05 * options.time_limit))
        if relaxed is not None:
            data.freed_upper = min(data.freed_upper, max(relaxed, len(hint.freed_nodes) if hint else 0))


def budgeted(data: ModelData) -> bool:
    return data.problem.budgets.per_run or bool(data.pdb_use)


def add_topology(m: cp_model.CpModel, data: ModelData, v: Vars) -> Penalties:
    """Each topology PodGroup ends inside exactly one region (a HyperNode of allowed tier; for soft
    groups any HyperNode or the root). Pods that stay pin the region; pods that move go inside it.
    Soft groups cost every tier the region sits above their tier in the snapshot."""
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
    return {"topologyWidening": [(w, 1) for w in v.widening.values()]}


def cost_expr(data: ModelData, v: Vars) -> Any:
    """The scaled weighted disruption: every soft family's penalty terms times its dimension's integer
    weight (``ModelData.weights_int``), by name."""
    terms = weigh(data.weights_int, v.penalties)
    return cp_model.LinearExpr.weighted_sum([x for x, _ in terms], [n for _, n in terms])


def add_hint(data: ModelData, v: Vars, m: cp_model.CpModel, plan: RepackPlan) -> None:
    """Hint every variable from a plan (a complete hint is a solution CP-SAT can use at once)."""
    counts = hint_counts(data, plan)
    freed = set(plan.freed_nodes)
    for c, x in v.vacate.items():
        m.add_hint(x, int(c in freed))
    for key, x in v.send.items():
        m.add_hint(x, counts.get(key, 0))
    if data.devices:
        add_device_hint(data, v, m, plan)
    p = data.problem
    restarted = p.restarted(p.snapshot.pods[mv.pod] for mv in plan.moves)
    for g, by_node in data.group_moved_by.items():
        moved = sum(n for c, n in by_node.items() if c in freed)
        r = restarted.get(g)
        running, cards = (r.running, r.cards) if r is not None else (0, 0)
        breach, hit = gang_impact(p.gangs[g], running, cards)
        m.add_hint(v.affected[g], int(moved > 0))
        m.add_hint(v.breach[g], int(breach))
        m.add_hint(v.affected_cards[g], data.cards(hit))
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


def add_device_hint(data: ModelData, v: Vars, m: cp_model.CpModel, plan: RepackPlan) -> None:
    """The device variables from a plan: each moved share on the device its move names, the whole cards sent
    to a receiver on its lowest untouched devices that no hinted share takes."""
    class_of = {p.key: k for k in data.classes for p in k.pods}
    on: dict[tuple[int, str, int], int] = defaultdict(int)
    shared: dict[str, set[int]] = defaultdict(set)
    whole: dict[str, int] = defaultdict(int)
    for mv in plan.moves:
        k = class_of.get(mv.pod)
        room = data.devices.get(mv.to_node)
        if k is None or room is None:
            continue
        if k.share and mv.to_devices:
            d = room.index.index(mv.to_devices[0])
            on[k.key, mv.to_node, d] += 1
            shared[mv.to_node].add(d)
        else:
            whole[mv.to_node] += k.whole_devices
    for key, x in v.on_device.items():
        m.add_hint(x, on.get(key, 0))
    for r in {r for r, _ in v.whole_on}:
        given = [d for d in data.devices[r].untouched if d not in shared[r]][:whole[r]]
        for d in data.devices[r].untouched:
            if (r, d) in v.whole_on:
                m.add_hint(v.whole_on[r, d], int(d in given))


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


def clock_of(options: PlanOptions) -> Clock:
    return options.clock if options.clock is not None else WALL


def solver_for(options: PlanOptions, limit: float, size: int = 0, phase: int = 1) -> cp_model.CpSolver:
    s = cp_model.CpSolver()
    clock_of(options).configure(s, limit)
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
        # Presolve's probing costs more than it brings on both phases, and symmetry detection on
        # phase 1 (where many candidates look alike to the objective); phase 2's proof needs the
        # symmetries. Measured on single-worker proofs of the parts of six 200-node clusters (12
        # models a phase, deterministic seconds, default parameters against these): phase 1 13.0
        # against 4.7-5.2, phase 2 17.2-19.3 against 8.0-10.6. Interleaving strategies (LNS among
        # them) delays these proofs (one cluster: 17 s against 5 s), and so does a second worker
        # (2 workers: 9 of the 12 phase-2 models unproven at 20 s; 1 worker: all within 4 s).
        s.parameters.cp_model_probing_level = 0
        if phase == 1:
            s.parameters.symmetry_level = 0
    return s


def _extract(data: ModelData, v: Vars, s: cp_model.CpSolver) -> RepackPlan:
    vacated = [c for c, x in v.vacate.items() if s.value(x)]
    sends = {key: int(s.value(x)) for key, x in v.send.items() if s.value(x)}
    return decode(data, vacated, sends, {key: int(s.value(x)) for key, x in v.on_device.items() if s.value(x)})


@dataclass
class ExactOutcome:
    plan: RepackPlan | None
    status: str  # OPTIMAL | FEASIBLE | NONE
    freed_bound: int
    objective: int | None
    bound: int | None
    data: ModelData
    size: tuple[int, int]  # variables, constraints of the phase-2 models (summed over the parts)
    parts: int = 1  # independent parts solved (see ``repack_model.components``)
    parts_proven: int = 0  # of which both phases were proven optimal
    refused: bool = False  # CP-SAT refused a model with a valid hint (a bug, ``exact.model_bug``): no plan


BUDGET_BOUND_SECONDS = 2.0
"""At most this long (and 5% of the limit) for ``budget_bound``."""

RESERVE = 0.03
"""Share of the time limit kept for reading the solutions back (10,000 nodes: about 1.5 s)."""


@dataclass
class Part:
    """One independent part of the model and what is known of it so far."""

    data: ModelData
    hint: RepackPlan | None  # the caller's hint, restricted to the part
    known: int  # freed nodes of a plan known to be feasible here (the hint's, then the best found)
    plan: RepackPlan = field(default_factory=RepackPlan)
    found: bool = False  # plan is a solution of this part (the hint's or CP-SAT's)
    freed_bound: int = 0
    freed_proven: bool = False
    objective: int = 0
    bound: int = 0
    proven: bool = False
    size: tuple[int, int] = (0, 0)
    model: tuple[cp_model.CpModel, Vars] | None = None  # phase 1's, which phase 2 extends
    whole: RepackPlan | None = None  # the caller's whole plan, of which ``hint`` is the part here
    refused: bool = False  # CP-SAT refused this part's model although it has a solution (a bug)

    @property
    def weight(self) -> int:
        """Share of the time limit: roughly the model's size."""
        return len(self.data.candidates) + sum(len(k.receivers) for k in self.data.classes)


def solve(problem: RepackProblem, options: PlanOptions, hint: RepackPlan | None = None, *,
          freed_upper: int | None = None, max_receivers: int | None = None, decompose: bool = True) -> ExactOutcome:
    """Both phases, part by part when the model splits into independent parts (``decompose``).

    Phase 1 (most freed nodes) runs on every part, then phase 2 (least disruption with each part's
    freed nodes fixed). Phase 1 may use half of the time left; each part gets a share of a phase's
    time by its size, and what a part leaves flows to the next. A part's freed nodes are bounded by
    the global bound ``freed_upper`` less what the other parts are known to free (their hint's or
    their solution's freed nodes), which is valid because the parts are independent."""
    clock = options.timer()
    options = replace(options, clock=clock)
    t0 = time.perf_counter()  # for the log lines
    start = clock.now()
    deadline = start + options.time_limit * (1 - RESERVE)
    if freed_upper is None:
        freed_upper = problem.freed_upper
    data = build_data(problem, freed_upper=freed_upper, max_receivers=max_receivers,
                      keep=_keep(problem, hint) if max_receivers is not None else None)
    if not data.candidates:
        return ExactOutcome(RepackPlan(), "OPTIMAL", 0, 0, 0, data, (0, 0), 0, 0)
    tighten(data, options, hint)
    if decompose:
        parts = [new_part(restrict(data, nodes, data.freed_upper), hint, hint) for nodes in components(data)]
    else:
        parts = [new_part(data, hint, hint)]
    parts.sort(key=lambda q: q.weight)  # small parts first: the time they leave goes to the larger
    # Phase 1: most freed nodes.
    phase_end = start + (deadline - start) * 0.5
    for i, q in enumerate(parts):
        upper = data.freed_upper - sum(o.known for o in parts if o is not q)
        q.data.freed_upper = min(q.data.freed_upper, max(upper, q.known))
        solve_freed(q, options, _share(parts, i, phase_end, clock), t0, i)
    # Phase 2: least disruption with the freed nodes of each part fixed.
    for i, q in enumerate(parts):
        solve_cost(q, options, _share(parts, i, deadline, clock), t0, i)
    if parts and (not any(q.found for q in parts) or any(q.refused for q in parts)):
        return ExactOutcome(None, "NONE", data.freed_upper, None, None, data,
                            _sum(q.size for q in parts), len(parts), 0, any(q.refused for q in parts))
    plan = merge_plans([q.plan for q in parts])
    proven = sum(q.proven for q in parts)
    optimal = proven == len(parts) and not data.pruned
    if data.pruned:  # the bounds CP-SAT proved hold for the restricted model only
        freed_bound, bound = data.freed_upper, None
    else:
        freed_bound, bound = min(data.freed_upper, sum(q.freed_bound for q in parts)), sum(q.bound for q in parts)
    if len(parts) > 1:
        log.info("cpsat: %d independent parts, %d proven optimal", len(parts), proven)
    return ExactOutcome(plan, "OPTIMAL" if optimal else "FEASIBLE", freed_bound, sum(q.objective for q in parts),
                        bound, data, _sum(q.size for q in parts), len(parts), 0 if data.pruned else proven)


def new_part(data: ModelData, hint: RepackPlan | None, whole: RepackPlan | None = None) -> Part:
    """The part of ``data``, hinted with ``hint``'s moves and freed nodes there; ``whole``: the valid plan
    that ``hint`` is (a part of), when the caller has one (it tells a refused model from a bad hint)."""
    nodes = frozenset(data.candidates)
    mine = plan_part(hint, nodes) if hint is not None else None
    return Part(data, mine, len(mine.freed_nodes) if mine is not None else 0, whole=whole)


def _refused(q: Part, st: Any, m: cp_model.CpModel, what: str, hint: RepackPlan | None) -> bool:
    """Whether CP-SAT refused a model that has a solution, which only a bug in the model explains:
    MODEL_INVALID, or INFEASIBLE although every variable was hinted from a valid plan (CP-SAT's own
    solution of this model, or the caller's plan when the validator accepts the whole plan it is part
    of). Reports it (``exact.model_bug``: an error, raised in strict mode) and marks the part."""
    if st == cp_model.MODEL_INVALID:
        status = "MODEL_INVALID"
    elif st == cp_model.INFEASIBLE and hint is not None and (
            hint is not q.hint or (q.whole is not None and not plan_violations(q.data.problem, q.whole))):
        status = "INFEASIBLE"
    else:
        return False
    q.refused = True
    model_bug(what, status, m.validate())
    return True


def _share(parts: list[Part], i: int, end: float, clock: Clock) -> float:
    """When part i's time ends: the time left until ``end`` split by weight among parts i, i+1, ...
    (times of ``clock``)."""
    now = clock.now()
    return now + (end - now) * parts[i].weight / max(sum(q.weight for q in parts[i:]), 1)


def _sum(sizes: Any) -> tuple[int, int]:
    sizes = list(sizes)
    return sum(a for a, _ in sizes), sum(b for _, b in sizes)


def solve_freed(q: Part, options: PlanOptions, until: float, t0: float, i: int) -> None:
    data = q.data
    if q.hint is not None:
        q.plan, q.found = q.hint, True
    if q.hint is not None and q.known >= data.freed_upper:  # the hint frees as many as can be: proven
        q.freed_bound, q.freed_proven = q.known, True
        return
    m, v = build(data)
    if q.hint is not None:
        add_hint(data, v, m, q.hint)
    m.maximize(v.freed())
    s = solver_for(options, clock_of(options).left(until), len(v.send))
    st = s.solve(m, _Progress(f"freed, part {i}", t0))
    clock_of(options).solved(s, len(m.proto.variables))
    q.size, q.model = _size(m), (m, v)
    log.info("cpsat phase 1 (freed), part %d: %s objective %s bound %s (hint %s, at most %d) in %.2fs", i,
             s.status_name(st), s.objective_value if st in (cp_model.OPTIMAL, cp_model.FEASIBLE) else None,
             s.best_objective_bound, q.known if q.hint is not None else None, data.freed_upper, s.wall_time)
    if _refused(q, st, m, f"cpsat phase 1 (freed), part {i}", q.hint):
        return
    bound = proven_bound(s, st, maximize=True)
    if st in (cp_model.OPTIMAL, cp_model.FEASIBLE) and round(s.objective_value) >= q.known:
        q.plan, q.found, q.known = _extract(data, v, s), True, round(s.objective_value)
        q.freed_proven = st == cp_model.OPTIMAL
    q.freed_bound = data.freed_upper if bound is None else min(data.freed_upper, bound)
    q.freed_bound = max(q.freed_bound, q.known)
    q.freed_proven = q.freed_proven or q.known >= q.freed_bound


def solve_cost(q: Part, options: PlanOptions, until: float, t0: float, i: int) -> None:
    data = q.data
    if q.refused:  # phase 1 found the model broken: nothing it says can be trusted
        return
    freed = len(q.plan.freed_nodes)
    q.objective = scaled_cost(data, q.plan)
    if freed == 0:  # nothing moves: no disruption
        q.bound, q.proven = 0, q.freed_proven
        return
    built = 0
    if q.model is not None:  # the same model, with the freed nodes fixed and another objective
        (m, v), q.model = q.model, None
        m.clear_objective()
        m.clear_hints()
    else:
        m, v = build(data)
        built = len(m.proto.variables)
    m.add(v.freed() == freed)
    m.minimize(cost_expr(data, v))
    hint = q.hint if q.hint is not None and len(q.hint.freed_nodes) == freed else q.plan
    add_hint(data, v, m, hint)
    s = solver_for(options, clock_of(options).left(until), len(v.send), phase=2)
    st = s.solve(m, _Progress(f"cost, part {i}", t0))
    clock_of(options).solved(s, built)
    q.size = _size(m)
    log.info("cpsat phase 2 (cost), part %d: %s objective %s bound %s in %.2fs", i, s.status_name(st),
             s.objective_value if st in (cp_model.OPTIMAL, cp_model.FEASIBLE) else None,
             s.best_objective_bound, s.wall_time)
    if _refused(q, st, m, f"cpsat phase 2 (cost), part {i}", hint):
        return
    if st in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        q.plan = _extract(data, v, s)
        q.objective = round(s.objective_value)
        q.proven = q.freed_proven and st == cp_model.OPTIMAL
    bound = proven_bound(s, st, maximize=False)
    q.bound = 0 if bound is None else bound  # no disruption is below 0


def _keep(problem: RepackProblem, hint: RepackPlan | None) -> dict[int, set[str]] | None:
    return plan_receivers(problem, hint) if hint is not None else None


def _size(m: cp_model.CpModel) -> tuple[int, int]:
    proto = m.proto
    return len(proto.variables), len(proto.constraints)


def model_stats(out: ExactOutcome) -> dict[str, int]:
    return {"variables": out.size[0], "constraints": out.size[1], **data_stats(out.data),
            "components": out.parts, "componentsProven": out.parts_proven}


class CpSatPlanner(Planner[RepackProblem, PlanResult]):
    name = "cpsat"

    def plan(self, problem: RepackProblem, options: PlanOptions, hint: PlanResult | None = None) -> PlanResult:
        t0 = time.perf_counter()
        out = solve(problem, options, max_receivers=receiver_cap(problem))
        wall = round(time.perf_counter() - t0, 3)
        plan = out.plan if out.plan is not None else RepackPlan()
        record = exact_record(self.name, out.status if out.plan is not None else "FALLBACK",
                              freed=len(plan.freed_nodes), freed_bound=out.freed_bound, objective=out.objective,
                              bound=out.bound, wall=wall)
        return PlanResult(plan=plan, record=record, disruption=problem.plan_disruption(plan),
                          rejections=explain(problem, plan, stuck(out.data)), stats=model_stats(out))
