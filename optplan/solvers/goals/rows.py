"""The exact goal model as rows (``exact_model``, built once per ``model.Data``: ``model_of``), and the plan
read back from a solution of it; shared by the CP-SAT model (``cpsat``, which documents the decisions and
constraints) and its MILP twin (``milp``); no solver is imported here.

The model's variables are each named by a key (``Key``: the family and index, as ``("send", class,
receiver)``) with its upper bound; its rows per constraint family (``FAMILIES``: moves, gang minimums and
region choice, capacity, quota, freed HyperNodes and the required count, necessity, topology, the disruption
terms, maxPerRun and the PDBs), each ``Σ terms (≤ ≥ =) rhs``, optionally enforced by a 0-1 literal
(``Row``); and its three objectives. The solvers only create a variable per key and emit the rows: CP-SAT
with ``only_enforce_if``, the MILP with the big-M the variables' bounds give (``ExactModel.sides``).

The read-back from a solution's value of each key: the moves, admissions and freed HyperNodes (``decode``),
and an exact planner's result (``exact_result``: checked by the goal validator, stage 3 settled on the rules'
cost, the record; the fallback when the model gave no valid plan).
"""

from __future__ import annotations

import copy
import logging
import math
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from optplan.models.devices import MILLI_PER_GPU
from optplan.models.goals import Admission, GoalPlan
from optplan.models.placement import Binding
from optplan.models.repack import PodMove
from optplan.models.results import Disruption
from optplan.solvers.core.exact import ExactModelError, exact_record, strict
from optplan.solvers.goals.model import (
    Data,
    GangClass,
    MoveClass,
    Stage,
    build_plan,
    fallback,
    goal_record,
    plan_disruption,
    settle,
)
from optplan.solvers.goals.problem import GoalProblem, GoalResult
from optplan.solvers.placement.jobs import bound_pod
from optplan.solvers.repack.exact.model import weigh, weighted_cost
from optplan.solvers.repack.rules import RestartUnit

log = logging.getLogger(__name__)


Key = tuple[Any, ...]
"""A variable of the exact model, named by its family and index: ``("send", class, receiver)``, ``("moved",
class)``, ``("source", node)``, ``("receiver", node)``, ``("admit", gang)``, ``("hyper", gang, region index)``,
``("place", gang class index, node)``, ``("lands", node, resource)``, ``("free", HyperNode)``, ``("region", group,
HyperNode)``, ``("widening", group)``, ``("affected", group)``, ``("breach", group)``, ``("restarted", unit)``,
``("affected_cards", group)``, ``("wide", group)``; at device level ``("on", class, receiver, device position)``,
``("gang_on", gang class index, node, device position)``, ``("whole", node, device position)``."""
Term = tuple[Key, int]
LE, GE, EQ = "<=", ">=", "=="


@dataclass(frozen=True)
class Row:
    """Σ terms (sense) rhs. With ``enforce`` (a 0-1 variable's key, the value) the row holds only when that
    variable has that value; ``off`` is then the most Σ may be otherwise (a ≤ row), where the other rows
    give a bound tighter than the variables' bounds (the MILP's big-M; None: from the variables' bounds)."""

    terms: list[Term]
    sense: str
    rhs: int
    enforce: tuple[Key, bool] | None = None
    off: int | None = None


FAMILIES = ("moves", "gangs", "capacity", "devices", "quota", "hyper_nodes", "required", "necessity", "topology",
            "disruption", "budgets")
"""The constraint families in the order both models emit them; ``required`` (Σ free ≥ count) and ``budgets``
(maxPerRun and the PDBs) are left out of the models that drop them."""


@dataclass
class ExactModel:
    """The exact goal model (``cpsat``'s module documents it) as data: its variables (lower bound 0, in the
    order they are created), its rows per family, and its three objectives."""

    upper: dict[Key, int] = field(default_factory=dict)  # variable -> its upper bound
    names: dict[Key, str] = field(default_factory=dict)  # variable -> a short unique name (letters, digits, _)
    rows: dict[str, list[Row]] = field(default_factory=lambda: {f: [] for f in FAMILIES})
    admitted: list[Term] = field(default_factory=list)  # stage 1: Σ admit weighted by priority level
    freed: list[Term] = field(default_factory=list)  # stage 2: freed HyperNodes
    penalties: dict[str, list[Term]] = field(default_factory=dict)  # stage 3, per disruption dimension

    def var(self, key: Key, upper: int, name: str) -> Key:
        self.upper[key] = upper
        self.names[key] = name
        return key

    def keys(self, family: str) -> list[Key]:
        """The variables of one family (``Key``'s first item), in order."""
        return [key for key in self.upper if key[0] == family]

    def add(self, family: str, terms: list[Term], sense: str, rhs: int, enforce: tuple[Key, bool] | None = None,
            off: int | None = None) -> None:
        self.rows[family].append(Row(terms, sense, rhs, enforce, off))

    def emitted(self, *, budgets: bool = True, required: bool = False) -> list[Row]:
        """The rows of a model with or without the budgets and the required HyperNode count, in order."""
        return [r for f in FAMILIES if (budgets or f != "budgets") and (required or f != "required")
                for r in self.rows[f]]

    def cost(self, weights_int: dict[str, int]) -> list[Term]:
        """Stage 3's objective: the penalties weighted on Repack's integer scale."""
        return weigh(weights_int, self.penalties)

    def sides(self, r: Row) -> list[tuple[list[Term], str, int]]:
        """An enforced row as rows without enforcement (big-M from the variables' bounds, or ``off``): one
        per side of the sense that the literal's value can relax; a side the bounds already imply is left
        out. A row without enforcement is itself."""
        if r.enforce is None:
            return [(r.terms, r.sense, r.rhs)]
        lit, value = r.enforce
        out = []
        if r.sense in (LE, EQ):
            most = r.off if r.off is not None else sum(c * self.upper[x] for x, c in r.terms if c > 0)
            if most > r.rhs:  # Σ ≤ rhs when the literal has its value, ≤ most otherwise
                m = most - r.rhs
                out.append(([*r.terms, (lit, m)], LE, most) if value else ([*r.terms, (lit, -m)], LE, r.rhs))
        if r.sense in (GE, EQ):
            least = sum(c * self.upper[x] for x, c in r.terms if c < 0)
            if least < r.rhs:
                m = r.rhs - least
                out.append(([*r.terms, (lit, -m)], GE, least) if value else ([*r.terms, (lit, m)], GE, r.rhs))
        return out


def exact_model(data: Data) -> ExactModel:
    """The exact model's variables, rows and objectives on ``data`` (``cpsat``'s module says what they mean)."""
    ex = ExactModel()
    _moves(ex, data)
    _gangs(ex, data)
    _capacity(ex, data)
    _devices(ex, data)
    _quota(ex, data)
    _hyper_nodes(ex, data)
    _necessity(ex, data)
    _topology(ex, data)
    _disruption(ex, data)
    _budgets(ex, data)
    return ex


def _moves(ex: ExactModel, data: Data) -> None:
    """send, moved, and the node's role: a node that loses pods receives none."""
    nodes = sorted({k.node for k in data.classes} | {r for k in data.classes for r in k.receivers})
    for j, n in enumerate(nodes):
        ex.add("moves", [(ex.var(("source", n), 1, f"source_{j}"), 1),
                         (ex.var(("receiver", n), 1, f"receiver_{j}"), 1)], LE, 1)
    for k in data.classes:
        xs = []
        for j, (r, c) in enumerate(zip(k.receivers, k.caps, strict=True)):
            x = ex.var(("send", k.key, r), c, f"send_{k.key}_{j}")
            ex.add("moves", [(x, 1), (("receiver", r), -c)], LE, 0)
            xs.append(x)
        y = ex.var(("moved", k.key), k.count if xs else 0, f"moved_{k.key}")
        ex.add("moves", [(y, 1)] + [(x, -1) for x in xs], EQ, 0)
        ex.add("moves", [(y, 1), (("source", k.node), -k.count)], LE, 0)


def _gangs(ex: ExactModel, data: Data) -> None:
    """admit, region choice and the gang's pods: all of its minimum, inside the chosen region."""
    for i in data.eligible:
        a = ex.var(("admit", i), 1, f"admit_{i}")
        hs = [ex.var(("hyper", i, j), 1, f"hyper_{i}_{j}") for j in range(len(data.regions[i]))]
        ex.add("gangs", [(y, 1) for y in hs] + [(a, -1)], EQ, 0)
        ex.admitted.append((a, data.priority_weight[i]))
    for ci, gc in enumerate(data.gang_classes):
        xs = []
        regs = data.regions[gc.gang]
        size = len(gc.pods)
        for j, n in enumerate(gc.nodes):
            inside = [("hyper", gc.gang, r) for r, reg in enumerate(regs) if n in reg.nodes]
            if not inside:
                continue
            x = ex.var(("place", ci, n), size, f"place_{ci}_{j}")
            if len(inside) < len(regs):
                ex.add("gangs", [(x, 1)] + [(y, -size) for y in inside], LE, 0)
            xs.append(x)
        ex.add("gangs", [(x, 1) for x in xs] + [(("admit", gc.gang), -size)], EQ, 0)


def _capacity(ex: ExactModel, data: Data) -> None:
    """Per node and resource something landing there requests: what arrives − what leaves ≤ free now. Rows
    are divided by the resource's gcd (exact: every term is a multiple of it). A row of an over-committed
    node binds only when something requesting that resource lands (``lands``; off, nothing lands)."""
    lands: dict[str, list[tuple[Key, dict[str, int]]]] = defaultdict(list)
    for k in data.classes:
        for r in k.receivers:
            lands[r].append((("send", k.key, r), k.demand))
    for key in ex.keys("place"):
        lands[key[2]].append((key, data.gang_classes[key[1]].demand))
    leaves: dict[str, list[tuple[Key, dict[str, int]]]] = defaultdict(list)
    for k in data.classes:
        leaves[k.node].append((("moved", k.key), k.demand))
    switches = 0
    for n in sorted(lands):
        free = data.free0[n]
        for res in sorted({r for _, d in lands[n] for r, a in d.items() if a > 0 and (r != "pods" or r in free)}):
            unit = data.units[res]
            inc = [(x, d[res] // unit) for x, d in lands[n] if d.get(res, 0) > 0]
            out = [(x, -(d[res] // unit)) for x, d in leaves.get(n, []) if d.get(res, 0) > 0]
            room = (data.whole_total[n] if res == data.problem.resource and n in data.whole_total
                    else free.get(res, 0)) // unit
            if room >= 0:
                ex.add("capacity", inc + out, LE, room)
                continue
            on = ex.var(("lands", n, res), 1, f"lands_{switches}")
            switches += 1
            ex.add("capacity", inc + out, LE, room, (on, True), off=0)  # nothing lands: Σ ≤ 0
            for x, _ in inc:
                ex.add("capacity", [(x, 1)], EQ, 0, (on, False))


def _devices(ex: ExactModel, data: Data) -> None:
    """At device level (``Data.devices``; nothing otherwise), per node that lists its GPUs: the share pods
    sent or placed there spread over the devices one pod fits (``on``, ``gang_on``: Σ over the devices = the
    send or place variable); whole cards take devices untouched after the moves (``whole``: Σ = the whole cards
    arriving); per device, the shares arriving plus a whole card's 1000 ≤ its free milli-GPU now plus what the
    pods leaving it held (a whole card therefore only on a device every pod left), and the shares' memory
    and pod slots (the register's share count) likewise. With the totals' rows (R's room there is
    ``whole_total``) this is the oracle's fit at device level of the moves (each share on its named device) and
    of the gangs' pods."""
    leaving: dict[str, list[MoveClass]] = defaultdict(list)
    for k in data.classes:
        if k.held[2]:
            leaving[k.node].append(k)
    arriving: dict[str, list[tuple[Key, MoveClass | GangClass]]] = defaultdict(list)
    for k in data.classes:
        for r in k.receivers:
            if r in data.devices:
                arriving[r].append((("send", k.key, r), k))
    for key in ex.keys("place"):
        if key[2] in data.devices:
            arriving[key[2]].append((key, data.gang_classes[key[1]]))
    for j, n in enumerate(sorted(data.devices)):
        room = data.devices[n]
        on: dict[int, list[tuple[Key, int, int]]] = defaultdict(list)
        wholes: list[Term] = []
        spread: dict[tuple[object, int], list[Key]] = defaultdict(list)  # (gang or group, device) -> its pods there
        for x, c in arriving.get(n, []):
            slots = c.slots.get(n, ())
            if slots:
                family = "on" if x[0] == "send" else "gang_on"
                xs = []
                first = c.pods[0].pod if isinstance(c, GangClass) else c.pods[0]
                spreads = (s := first.gpu_share) is not None and s.spread
                # a gang's pods, or a PodGroup's moved shares, one a device (vgpu-podgroup-policy spread)
                who: object = None
                if spreads:
                    who = ("gang", c.gang) if isinstance(c, GangClass) else ("group", c.group)
                for d, milli, memory in slots:
                    most = (room.free[d] + _back(leaving[n], d)) // max(milli, 1)
                    if room.slots is not None:
                        most = min(most, room.slots[d] + sum(k.count for k in leaving[n] if d in k.held[2]))
                    y = ex.var((family, x[1], n, d), min(ex.upper[x], most), f"{family}_{x[1]}_{j}_{d}")
                    on[d].append((y, milli, memory))
                    xs.append((y, 1))
                    if who is not None:
                        spread[who, d].append(y)
                ex.add("devices", [*xs, (x, -1)], EQ, 0)
            elif c.whole_devices:
                wholes.append((x, c.whole_devices))
        back = {d: [(("moved", k.key), -k.held[0]) for k in leaving[n] if d in k.held[2]]
                for d in range(len(room.free))}
        whole: dict[int, Key] = {}
        if wholes:
            for d, free in enumerate(room.free):
                if free + _back(leaving[n], d) == MILLI_PER_GPU:  # untouched now, or once the pods on it leave
                    whole[d] = ex.var(("whole", n, d), 1, f"whole_{j}_{d}")
            ex.add("devices", [(y, 1) for y in whole.values()] + [(x, -c) for x, c in wholes], EQ, 0)
        for d, free in enumerate(room.free):
            terms: list[Term] = [(y, milli) for y, milli, _ in on.get(d, [])]
            if d in whole:
                terms.append((whole[d], MILLI_PER_GPU))
            if not terms:
                continue
            ex.add("devices", terms + back[d], LE, free)
            if room.memory is not None and any(mem for _, _, mem in on.get(d, [])):
                mem_back = [(("moved", k.key), -k.held[1]) for k in leaving[n] if d in k.held[2] and k.held[1]]
                ex.add("devices", [(y, mem) for y, _, mem in on.get(d, []) if mem] + mem_back, LE, room.memory[d])
            if room.slots is not None and on.get(d):  # one pod slot each; a pod that leaves gives its back
                pods_back = [(("moved", k.key), -1) for k in leaving[n] if d in k.held[2]]
                ex.add("devices", [(y, 1) for y, _, _ in on[d]] + pods_back, LE, room.slots[d])
        for ys in spread.values():  # vgpu-podgroup-policy spread: at most one pod of the gang a device
            ex.add("devices", [(y, 1) for y in ys], LE, 1)


def _back(leaving: list[MoveClass], d: int) -> int:
    """The milli-GPU the movable pods of these classes hold on device position d."""
    return sum(k.held[0] * k.count for k in leaving if d in k.held[2])


def _quota(ex: ExactModel, data: Data) -> None:
    """Per queue of each gang's chain and resource the gangs request: allocated + Σ admit·requests ≤
    realCapability (``QueueState.fit_reason``)."""
    qs = data.problem.queue_state()
    rows: dict[tuple[str, str], list[Term]] = defaultdict(list)
    for i in data.eligible:
        g = data.problem.gangs[i]
        for q in qs.chain(g.queue):
            for r, amount in g.requests.items():
                if amount > 0:
                    rows[q, r].append((("admit", i), amount))
    for (q, r), terms in sorted(rows.items()):
        if q in qs.real and not qs.limited(q, r):
            continue
        room = qs.real.get(q, {}).get(r, 0) - qs.allocated.get(q, {}).get(r, 0)
        if room < 0:  # over its capability already: no gang asking for r gets in
            for x, _ in terms:
                ex.add("quota", [(x, 1)], EQ, 0)
            continue
        unit = 0
        for _, a in terms:
            unit = math.gcd(unit, a)
        ex.add("quota", [(x, a // unit) for x, a in terms], LE, room // unit)


def _hyper_nodes(ex: ExactModel, data: Data) -> None:
    """A freed HyperNode: every R pod on its nodes moves, nothing R lands; Σ free ≤ count (≥ when required)."""
    p = data.problem
    if not p.free_count:
        return
    R = p.resource
    on: dict[str, list[MoveClass]] = defaultdict(list)
    for k in data.classes:
        on[k.node].append(k)
    lands: dict[str, list[Key]] = defaultdict(list)  # node -> the gang pods requesting R placed there
    for key in ex.keys("place"):
        gc = data.gang_classes[key[1]]
        if gc.demand.get(R, 0) > 0 or key[2] in gc.slots:
            lands[key[2]].append(key)
    for j, (h, nodes) in enumerate(data.hyper.items()):
        f = ex.var(("free", h), 1, f"free_{j}")
        for n in sorted(nodes):
            # an R pod the model cannot move (restricted away) stays
            if len(p.movable.get(n, ())) > sum(k.count for k in on.get(n, ())):
                ex.add("hyper_nodes", [(f, 1)], EQ, 0)
            for k in on.get(n, []):
                ex.add("hyper_nodes", [(("moved", k.key), 1)], EQ, k.count, (f, True))
            if ("receiver", n) in ex.upper:
                ex.add("hyper_nodes", [(("receiver", n), 1)], LE, 0, (f, True))
            for x in lands.get(n, []):
                ex.add("hyper_nodes", [(x, 1)], EQ, 0, (f, True))
        ex.freed.append((f, 1))
    ex.add("hyper_nodes", list(ex.freed), LE, p.free_count)
    ex.add("required", list(ex.freed), GE, p.free_count)


def _necessity(ex: ExactModel, data: Data) -> None:
    """A node loses pods only where a gang pod lands or inside a freed HyperNode."""
    landing: dict[str, list[Key]] = defaultdict(list)
    for key in ex.keys("place"):
        landing[key[2]].append(key)
    frees = [(h, ("free", h)) for h in data.hyper if ("free", h) in ex.upper]
    for n in sorted({k.node for k in data.classes}):
        why = landing.get(n, []) + [f for h, f in frees if n in data.hyper[h]]
        ex.add("necessity", [(("source", n), 1)] + [(x, -1) for x in why], LE, 0)


def _topology(ex: ExactModel, data: Data) -> None:
    """A topology PodGroup with moved pods ends inside one region: a class outside it moves whole, pods
    land only inside it; a soft group's widening ≥ the region's tier − its tier now."""
    topology = data.problem.snapshot.topology
    widening: list[Term] = []
    for i, (g, regions) in enumerate(data.topo.items()):
        if not regions:  # no region holds its pods that stay: none of its pods moves
            for k in data.classes:
                if k.group == g:
                    ex.add("topology", [(("moved", k.key), 1)], EQ, 0)
            continue
        region = {h: ex.var(("region", g, h), 1, f"region_{i}_{j}") for j, h in enumerate(regions)}
        ex.add("topology", [(y, 1) for y in region.values()], EQ, 1)
        for k in data.classes:
            if k.group != g:
                continue
            inside_here = [y for h, y in region.items() if k.node in topology.region_nodes(h)]
            if len(inside_here) < len(region):
                ex.add("topology", [(("moved", k.key), 1)] + [(y, k.count) for y in inside_here], GE, k.count)
            for r in k.receivers:
                inside = [y for h, y in region.items() if r in topology.region_nodes(h)]
                if len(inside) < len(region):
                    ex.add("topology", [(("send", k.key, r), 1)] + [(y, -k.count) for y in inside], LE, 0)
        if g in data.topo_before:
            w = ex.var(("widening", g), topology.top_tier, f"widening_{i}")
            ex.add("topology", [(w, 1)] + [(y, -topology.tier(h)) for h, y in region.items()], GE,
                   -data.topo_before[g])
            widening.append((w, 1))
    ex.penalties["topologyWidening"] = widening


def _disruption(ex: ExactModel, data: Data) -> None:
    """Repack's dimensions (``rules``): per PodGroup affected, below minAvailable and affected cards, with
    its restart units (a pod alone, a task or role unit, the whole group); moved cards and pods. Lower
    bounds: minimisation keeps them tight, so at an optimum each is the rules' count."""
    rp = data.problem.repack
    by_group: dict[str, list[MoveClass]] = defaultdict(list)
    for k in data.classes:
        by_group[k.group].append(k)
    affected: list[Term] = []
    breaches: list[Term] = []
    hits: list[Term] = []
    restarts = 0
    for i, (g, ks) in enumerate(sorted(by_group.items())):
        gang = rp.gangs[g]
        a = ex.var(("affected", g), 1, f"affected_{i}")
        b = ex.var(("breach", g), 1, f"breach_{i}")
        singles = [k for k in ks if k.unit.policy is None]
        units: dict[str, RestartUnit] = {}
        wide: list[MoveClass] = []
        for k in ks:
            moved = ("moved", k.key)
            ex.add("disruption", [(moved, 1), (a, -k.count)], LE, 0)
            if k.unit.whole_group:
                wide.append(k)
            elif k.unit.policy is not None:
                units[k.unit.key] = k.unit
                x = ("restarted", k.unit.key)
                if x not in ex.upper:
                    ex.var(x, 1, f"restarted_{restarts}")
                    restarts += 1
                ex.add("disruption", [(moved, 1), (x, -k.count)], LE, 0)
        running = ([(("moved", k.key), 1) for k in singles]
                   + [(("restarted", u), unit.running) for u, unit in sorted(units.items())])
        total = sum(k.count for k in singles) + sum(unit.running for unit in units.values())
        if total > gang.safe:
            # Σ running ≤ safe + (total − safe)·breach; a sum of several terms in the sign CP-SAT's model has
            # always had it (OR-Tools writes ``Σ ≤ safe + k·breach`` as ``safe + k·breach − Σ ≥ 0``)
            if len(running) > 1:
                ex.add("disruption", [(x, -c) for x, c in running] + [(b, total - gang.safe)], GE, -gang.safe)
            else:
                ex.add("disruption", [*running, (b, -(total - gang.safe))], LE, gang.safe)
        cards = ([(("moved", k.key), data.cards(k.cards)) for k in singles]
                 + [(("restarted", u), data.cards(unit.cards)) for u, unit in sorted(units.items())])
        footprint = data.cards(gang.footprint)
        upper = max(footprint, sum(data.cards(k.cards) * k.count for k in singles)
                    + sum(data.cards(unit.cards) for unit in units.values()),
                    max((data.cards(k.unit.cards) for k in wide), default=0))
        ac = ex.var(("affected_cards", g), upper, f"affected_cards_{i}")
        ex.add("disruption", [(ac, 1)] + [(x, -c) for x, c in cards], GE, 0)
        ex.add("disruption", [(ac, 1), (b, -footprint)], GE, 0)
        if wide:
            w = ex.var(("wide", g), 1, f"wide_{i}")
            for k in wide:
                ex.add("disruption", [(("moved", k.key), 1), (w, -k.count)], LE, 0)
            whole = wide[0].unit
            if whole.running > gang.safe:
                ex.add("disruption", [(w, 1)], LE, 0, (b, False))  # the whole group restarts: below minAvailable
            ex.add("disruption", [(ac, 1), (w, -data.cards(whole.cards))], GE, 0)
        affected.append((a, 1))
        breaches.append((b, 1))
        hits.append((ac, 1))
    ex.penalties["affectedPodGroups"] = affected
    ex.penalties["podGroupsBelowMinAvailable"] = breaches
    ex.penalties["affectedCards"] = hits
    ex.penalties["movedCards"] = [(("moved", k.key), data.cards(k.cards)) for k in data.classes]
    ex.penalties["movedPods"] = [(("moved", k.key), 1) for k in data.classes]


def _budgets(ex: ExactModel, data: Data) -> None:
    """maxPerRun.podGroups (affected PodGroups), maxPerRun.resources (moved amounts), PDB disruptions."""
    rp = data.problem.repack
    budgets = rp.budgets
    if budgets.pod_groups is not None:  # each affected PodGroup (``affected``) counts once
        ex.add("budgets", list(ex.penalties["affectedPodGroups"]), LE, budgets.pod_groups)
    spend = [rp.spend(k.pods[:1]) for k in data.classes]  # what moving one pod of each class charges
    for res, budget in budgets.resources.items():
        terms: list[Term] = [(("moved", k.key), s.resources[res]) for k, s in zip(data.classes, spend, strict=True)
                             if s.resources[res] > 0]
        if terms:
            ex.add("budgets", terms, LE, budget)
    use: dict[str, list[Key]] = defaultdict(list)
    for k, s in zip(data.classes, spend, strict=True):
        for key in s.pdbs:
            use[key].append(("moved", k.key))
    for key, xs in sorted(use.items()):
        ex.add("budgets", [(x, 1) for x in xs], LE, budgets.pdbs[key])


def model_of(data: Data) -> ExactModel:
    """The exact model on ``data`` (``exact_model``), built once and kept with it: every solve and re-check of
    the same data emits the same rows."""
    built = data.memo.get("rows")
    if not isinstance(built, ExactModel):
        built = data.memo["rows"] = exact_model(data)
    return built


# ---- reading a solution back ------------------------------------------------------------------------------

def decode(data: Data, value: Callable[[Key], int]) -> tuple[list[PodMove], dict[int, Admission], list[str]]:
    """The moves (pods of a class fill their receivers in name order), the admitted gangs (pods of a gang
    class fill their nodes in name order) and the freed HyperNodes, from the solution's ``value`` of each
    of the model's variables (an integer)."""
    p = data.problem
    ex = model_of(data)
    moves: list[PodMove] = []
    for k in data.classes:
        it = iter(k.pods)
        for r in k.receivers:
            named: list[tuple[int, ...] | None] = []
            for d, _, _ in k.slots.get(r, ()):  # a share's pods fill the devices in position order
                named += [(data.devices[r].index[d],)] * value(("on", k.key, r, d))
            named += [None] * (value(("send", k.key, r)) - len(named))
            for devices in named:
                moves.append(PodMove(pod=next(it).key, from_node=k.node, to_node=r, to_devices=devices))
    admitted: dict[int, Admission] = {}
    for i in data.eligible:
        if not value(("admit", i)):
            continue
        g = p.gangs[i]
        reg = next(reg for j, reg in enumerate(data.regions[i]) if value(("hyper", i, j)))
        bindings = []
        for ci, gc in enumerate(data.gang_classes):
            if gc.gang != i:
                continue
            it2 = iter(gc.pods)
            for n in gc.nodes:
                for _ in range(value(("place", ci, n)) if ("place", ci, n) in ex.upper else 0):
                    gp = next(it2)
                    bindings.append(Binding(task=gp.task, index=gp.index, node=n,
                                            pod=bound_pod(g.job, gp.task, gp.index)))
        nodes = sorted({b.node for b in bindings})
        admitted[i] = Admission(namespace=g.job.namespace, name=g.job.name, queue=g.queue, priority=g.priority,
                                admitted=True, hyper_node=reg.hyper_node, tier=reg.tier,
                                reason=f"its {len(bindings)} pods fit on {len(nodes)} node(s) in {reg.label}",
                                bindings=tuple(sorted(bindings, key=lambda b: (b.task, b.index))))
    freed = [key[1] for key, _ in ex.freed if value(key)]
    return moves, admitted, freed


class Violations(Protocol):
    """The goal validator (``validate.goal_violations``), passed in by the planners."""

    def __call__(self, problem: GoalProblem, plan: GoalPlan, *, claimed: Disruption | None = None) -> list[str]: ...


def exact_result(name: str, problem: GoalProblem, data: Data, stages: list[Stage], *,
                 value: Callable[[Key], int] | None, infeasible_required: bool,
                 causes: Callable[[set[int]], dict[int, tuple[str, str]]], violations: Violations,
                 hint: GoalPlan | None, counts: dict[str, int], started: float) -> GoalResult:
    """An exact planner's result: the plan read back from the solution's ``value`` of each variable
    (``decode``; None: no solution), the gangs not admitted explained by ``causes`` (of the admitted ones),
    re-checked by ``violations`` (a required count proven out of reach is the caller's to report) — a plan
    breaking the rules is a bug in the model: raised in strict mode (``core.exact.strict``), else FALLBACK —,
    stage 3 settled on the rules' cost (``settle``) and the record (``goal_record``); with no plan, the
    ``fallback`` and a FALLBACK record. ``counts``: the solver model's size, for the stats; ``started``: the
    ``time.perf_counter()`` the planner started at."""
    checked = copy.copy(problem)
    if infeasible_required:  # the caller reports the count not met; every other rule holds
        checked.free_required = False
    plan: GoalPlan | None = None
    exact_cost = True
    if value is not None:
        moves, admitted, freed_h = decode(data, value)
        plan = build_plan(problem, moves, admitted, causes(set(admitted)), freed_h)
        d = plan_disruption(problem, plan)
        found = violations(checked, plan, claimed=d)
        if found:
            message = f"goals {name}: the model's plan breaks the goal rules: {'; '.join(found[:5])}"
            if strict():
                raise ExactModelError(message)
            log.error("%s (a bug in the %s model); FALLBACK", message, name)
            plan = None
        else:
            exact_cost = settle(stages, weighted_cost(data.weights_int, data.card_unit, d), exact_cost, name)
    wall = round(time.perf_counter() - started, 3)
    stats = {"moveClasses": len(data.classes), "sendVariables": sum(len(k.receivers) for k in data.classes),
             "placeVariables": sum(len(gc.nodes) for gc in data.gang_classes), "restricted": int(data.restricted)}
    if data.devices:
        ex = model_of(data)
        stats["deviceVariables"] = sum(1 for key in ex.upper if key[0] in ("on", "gang_on", "whole"))
        stats["deviceRows"] = len(ex.rows["devices"])
    stats |= counts
    for what, st in zip(("admitWeight", "freedHyperNodes", "cost"), stages, strict=False):
        stats |= {what: st.value, f"{what}Bound": st.bound, f"{what}Proven": int(st.proven)}
    if plan is None:  # no solution, or a bug: the valid hint, else the gangs that fit now, else nothing
        plan = fallback(problem, data, hint, lambda pl: not violations(problem, pl))
        record = exact_record(name, "FALLBACK", freed=None, freed_bound=None, objective=None, bound=None, wall=wall)
        return GoalResult(plan, record, plan_disruption(problem, plan), stats)
    record = goal_record(name, problem, data, stages, exact_cost=exact_cost, infeasible_required=infeasible_required,
                         wall=wall)
    return GoalResult(plan, record, plan_disruption(problem, plan), stats)
