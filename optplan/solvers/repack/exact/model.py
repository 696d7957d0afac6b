"""The exact Repack model's data, shared by the CP-SAT model and its MILP twin.

Decisions (both solvers build exactly these):
- ``vacate[c]``: candidate node c is vacated (all its R-requesting pods move, it receives nothing);
- ``send[k, r]``: how many pods of pod class k go to receiver r. A pod class is a set of
  interchangeable pods on one candidate node (same requests, same constraint signature, same
  PodGroup), so a node with eight identical workers has one class of count 8, not eight pods;
- per PodGroup: ``affected[g]`` (some pod moves), ``breach[g]`` (more than max(running − minMember, 0)
  Running pods restart) and ``affected_cards[g]`` = max(restarted cards, breach × whole R footprint);
- per restart unit wider than one pod and narrower than its PodGroup (a RestartTask task, see
  ``rules``): ``restarted[u]`` ≥ vacate[c] for every candidate c holding one of its pods. Restarted
  Running pods of g are then Σ |u|·restarted[u] + the default-unit pods that move, and restarted cards
  likewise. A pod whose unit is the whole group (RestartJob, ServingGroupRecreate) restarts every pod
  of g: vacating its node implies breach[g] when g has more Running pods than safe (minMember ≥ 1),
  and affected_cards[g] ≥ the footprint. Without restart policies these are the seed's counts.

Receivers of a class are pruned before building: the receiver must be an occupied provider other
than the class's node, pass the static predicates, and hold at least one pod of the class on every
resource. With ``max_receivers`` set, each class keeps only that many receivers (best fit first, and
always the receivers the greedy hint uses); the model is then a restriction and its optimum is
reported as FEASIBLE, not OPTIMAL, unless nothing was cut.

Besides the capacity row of each receiver, one redundant row per resource (``room_rows``): what the
vacated nodes take (their moved demand, and their own room when they are receivers) fits in the
receivers' total room. It is the sum of the capacity rows, so it cuts no plan off, but it lets
CP-SAT prove the most freed nodes from cover cuts on one knapsack over the vacate decisions.

Independent parts (``components``, then ``restrict``): candidates that share no receiver, PodGroup,
PDB or budget are solved apart; a candidate whose pod no receiver admits cannot be vacated and is in
no part. The parts' optima together are the optimum of the whole.

Integer objective. Costs use one weight per disruption dimension (``DIMENSIONS``, by name: affected
PodGroups, below minAvailable, affected cards, moved cards, moved pods, topology widening). Each weight
is read as an exact decimal and multiplied by the least common denominator D; card amounts are counted
in units of ``card_unit`` (the gcd of all R requests, in milli-units). The scaled objective is
    D·(w_A·A + w_B·B + w_P·P + w_T·T)·U + D·(w_AC·AC + w_MC·MC)
with U = 1000 / card_unit milli-to-unit factor folded in, which is the real weighted cost times the
positive constant D·U: so it orders plans exactly as the real cost does, with no rounding. The exact
models build it once from their soft families' penalty terms, keyed by dimension (``weights_int``).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

import numpy as np

from optplan.models.devices import MILLI_PER_GPU, WHOLE_GPU
from optplan.models.limits import WEIGHT_DIGITS
from optplan.models.repack import DIMENSIONS, PodMove, RepackPlan, Weights
from optplan.models.snapshot import Pod
from optplan.solvers.core import gpushare
from optplan.solvers.core.exact import Score
from optplan.solvers.core.gpushare import GpuAsk
from optplan.solvers.core.oracle import (
    NO_POD_LIMIT,
    Capacity,
    Predicates,
    constraint_signature,
    gpu_ask,
    pod_demand,
    share_signature,
)
from optplan.solvers.repack.rules import Disruption, RepackProblem, Spent


@dataclass
class PodClass:
    key: int
    node: str  # the candidate node the pods are on
    group: str  # PodGroup key
    pods: list[Pod]  # sorted by name
    demand: dict[str, int]  # per pod, milli-units, including the pod slot
    cards: int  # R per pod, milli
    receivers: list[str] = field(default_factory=list)
    shape: int = 0  # classes with equal demand share it
    share: bool = False
    """When GPU shares move (``RepackProblem.shares_move``): its pods hold a share of one device each."""
    whole_devices: int = 0
    """When GPU shares move: the untouched devices each pod takes on a receiver that lists its GPUs."""
    slots: dict[str, tuple[tuple[int, int, int], ...]] = field(default_factory=dict)
    """A share class: receiver -> (device position, milli-GPU, memory MiB) of each device that one pod may
    take there (``gpushare.usable`` on the receiver's free devices, the pod's ask as ``gpu_ask`` reads it
    on that receiver)."""

    @property
    def count(self) -> int:
        return len(self.pods)


@dataclass(frozen=True)
class DeviceRoom:
    """A receiver's GPUs as the device-level model reads them (the oracle's ``Capacity``): free milli-GPU
    and memory (MiB; None when unknown) per device position, the positions no pod touches (where whole
    cards go), each position's device index (what ``PodMove.to_devices`` names) and the pods each position may
    still take (``Capacity.gpu_slots``: its share count less the pods on it; None when no device has a count)."""

    free: tuple[int, ...]
    memory: tuple[int, ...] | None
    untouched: tuple[int, ...]
    index: tuple[int, ...]
    slots: tuple[int, ...] | None = None


@dataclass
class RestartUnitData:
    nodes: list[str]  # candidates holding its pods
    running: int  # its Running pods
    cards: int  # its R (milli)


@dataclass
class GroupRestart:
    """What vacating candidates restarts in one PodGroup (``rules``' restart units)."""

    singles: dict[str, tuple[int, int]]
    """Candidate -> (Running pods, R cards in milli) of its pods whose restart unit is the pod alone."""
    units: dict[str, RestartUnitData]
    """Restart units wider than one pod and narrower than the group (tasks), by key."""
    wide: list[str]
    """Candidates holding a pod whose restart unit is the whole group."""
    alone: dict[str, frozenset[str]]
    """Candidate -> the group's Running pods that restart when that candidate alone is vacated."""


class Admitted(Mapping[int, np.ndarray]):
    """Pod class key -> indices into ``all_receivers`` of every receiver it may use (before pruning):
    one shared array per (constraint signature, demand) and the class's own node, the class's array
    made on access. Classes of one shape share their receivers, so at scale (10,000 receivers, tens of
    thousands of classes) a copy per class would take gigabytes."""

    def __init__(self, of: dict[int, tuple[np.ndarray, int]] | None = None) -> None:
        self._of: dict[int, tuple[np.ndarray, int]] = of if of is not None else {}

    def set(self, key: int, base: np.ndarray, own: int) -> None:
        self._of[key] = (base, own)

    def rekeyed(self, keys: Mapping[int, int]) -> Admitted:
        """The same entries under new keys (old key -> new key; the others dropped)."""
        return Admitted({new: self._of[old] for old, new in keys.items() if old in self._of})

    def entry(self, key: int) -> tuple[np.ndarray, int]:
        """The shared array of class ``key`` (its own node's index included) and that index."""
        return self._of[key]

    def __getitem__(self, key: int) -> np.ndarray:
        base, own = self._of[key]
        return base[base != own]

    def __iter__(self) -> Iterator[int]:
        return iter(self._of)

    def __len__(self) -> int:
        return len(self._of)


@dataclass
class ModelData:
    problem: RepackProblem
    candidates: list[str]
    classes: list[PodClass]
    classes_of: dict[str, list[PodClass]]  # per candidate node
    receivers: list[str]  # every node that may receive something
    free: dict[str, dict[str, int]]  # per receiver, free milli-units per resource ("pods" absent = no limit)
    group_moved_by: dict[str, dict[str, int]]  # group -> candidate -> pods that move with it
    group_cards_by: dict[str, dict[str, int]]  # group -> candidate -> cards (milli) that move with it
    card_unit: int
    weights_int: dict[str, int]
    """Dimension key (``DIMENSIONS``) -> its integer weight in the scaled objective (``integer_weights``)."""
    pruned: bool  # some receivers were cut: optimum is for the restricted model
    freed_upper: int  # occupied − theoretical minimum lower bound, or the candidate count
    topo_regions: dict[str, list[str]] = field(default_factory=dict)
    """Topology PodGroup with movable pods -> HyperNodes (and, for soft, the root) it may end up in."""
    topo_stay_nodes: dict[str, list[str]] = field(default_factory=dict)
    """Topology PodGroup -> candidate nodes holding its pods (they stay unless the node is vacated)."""
    units: dict[str, int] = field(default_factory=dict)
    """Per resource, the gcd of all class demands (milli-units)."""
    classes_at: dict[str, list[PodClass]] = field(default_factory=dict)
    """Receiver -> the classes that may send pods to it."""
    budget_use: dict[str, dict[str, int]] = field(default_factory=dict)
    """maxPerRun.resources name -> candidate -> amount (milli) that moves if it is vacated."""
    pdb_use: dict[str, dict[str, int]] = field(default_factory=dict)
    """PDB key -> candidate -> pods it covers that move if the candidate is vacated."""
    restart: dict[str, GroupRestart] = field(default_factory=dict)
    """PodGroup with movable pods -> what vacating candidates restarts in it."""
    relaxed: tuple[str, ...] = ()
    """Candidates the budget relaxation's best solution vacates (``cpsat.budget_bound``): a guide for ``lns``."""
    spent: Spent = field(default_factory=Spent)
    """What fixed moves outside the model already use of the budgets (none but in ``lns``)."""
    admitted: Admitted = field(default_factory=Admitted, repr=False)
    """Pod class key -> indices into ``all_receivers`` of every receiver it may use (before pruning)."""
    all_receivers: list[str] = field(default_factory=list, repr=False)
    """Every occupied provider, the index space of ``admitted``."""
    _fit: dict[tuple[int, str], int] = field(default_factory=dict, repr=False)
    """(pod class shape, receiver) -> pods of that shape that fit on the receiver alone (a cache)."""
    devices: dict[str, DeviceRoom] = field(default_factory=dict)
    """When GPU shares move: every receiver that lists its GPUs, its devices (the model at device level)."""

    @property
    def spread_groups(self) -> frozenset[str]:
        """PodGroups with a share class that spreads (``GpuShare.spread``: one pod a device)."""
        return frozenset(k.group for k in self.classes if k.share and (s := k.pods[0].gpu_share) is not None
                         and s.spread)

    def cards(self, milli: int) -> int:
        return milli // self.card_unit

    def capacity_rows(self, r: str) -> list[tuple[str, int, dict[int, int]]]:
        """Capacity constraints of receiver r as (resource, room, class -> demand), each divided
        by the gcd of the resource's demands (exact: every left side is a multiple of it). Memory
        in milli-bytes would otherwise give coefficients near 10^14, which MILP solvers refuse."""
        rows = []
        for res, free in sorted(self.free[r].items()):
            unit = self.units.get(res, 0)
            if unit <= 0:
                continue
            dem = {k.key: k.demand[res] // unit for k in self.classes_at[r] if k.demand.get(res, 0) > 0}
            if dem:
                rows.append((res, max(free, 0) // unit, dem))
        return rows

    def room_rows(self) -> list[tuple[str, dict[str, int], int]]:
        """Per resource, (resource, candidate -> room it takes, total room): vacating a candidate
        takes its moved demand from the receivers' total room, and its own room too when it is a
        receiver. The sum of the capacity rows, so implied by them; but as one knapsack row over
        the vacate decisions it propagates and gives CP-SAT cover cuts (single-worker proofs of the
        most freed nodes on the 12 parts of six 200-node clusters: 1.1 deterministic seconds in all,
        4.7 without it). Same units as ``capacity_rows``; resources some receiver does not limit
        are left out."""
        out = []
        for res, unit in sorted(self.units.items()):
            if unit <= 0 or not self.receivers or any(res not in self.free[r] for r in self.receivers):
                continue
            room = {r: max(self.free[r][res], 0) // unit for r in self.receivers}
            take: dict[str, int] = defaultdict(int)
            for k in self.classes:
                take[k.node] += k.count * (k.demand.get(res, 0) // unit)
            for c in self.candidates:
                take[c] += room.get(c, 0)
            out.append((res, {c: take[c] for c in self.candidates if take[c] > 0}, sum(room.values())))
        return out

    def arc_cap(self, k: PodClass, r: str) -> int:
        """How many pods of class k fit on receiver r alone: a per-arc bound that keeps the LP
        relaxation from splitting a pod over several receivers' leftovers."""
        key = (k.shape, r)
        fit = self._fit.get(key)
        if fit is None:
            free = self.free[r]
            fit = self._fit[key] = min((free.get(res, 0) // v for res, v in k.demand.items() if v > 0 and res in free),
                                       default=NO_POD_LIMIT)
        return max(0, min(k.count, fit))

    def group_of_card_costs(self) -> dict[str, int]:
        """R footprint of each PodGroup, in card units."""
        return {g: self.cards(self.problem.gangs[g].footprint) for g in self.group_moved_by}


def integer_weights(w: Weights, card_unit: int) -> dict[str, int]:
    """Weights scaled to integers, by dimension key: counts are multiplied by 1000/card_unit so that card
    terms (counted in card units) and count terms share one exact scale."""
    # each weight rounded to WEIGHT_RESOLUTION: 1e6 next to 0.1234567890123456 would otherwise need a
    # common denominator of 1e16 and overflow CP-SAT's int64 coefficients
    fr = {d.key: Fraction(round(getattr(w, d.field) * 10**WEIGHT_DIGITS), 10**WEIGHT_DIGITS) for d in DIMENSIONS}
    denom = math.lcm(*(f.denominator for f in fr.values()))
    per_unit = Fraction(1000, card_unit)  # card units per whole card
    scaled = {d.key: fr[d.key] * denom * (1 if d.cards else per_unit) for d in DIMENSIONS}
    # Make every term an integer: multiply by the denominator of per_unit if needed.
    extra = math.lcm(*(x.denominator for x in scaled.values()))
    return {key: int(x * extra) for key, x in scaled.items()}


def pod_classes(problem: RepackProblem) -> tuple[list[PodClass], dict[str, list[PodClass]]]:
    """The pod classes of every candidate, numbered, and per candidate (receivers not yet set)."""
    classes: list[PodClass] = []
    classes_of: dict[str, list[PodClass]] = {}
    shapes: dict[tuple[tuple[str, int], ...], int] = {}
    for c in problem.candidates:
        buckets: dict[tuple[object, ...], list[Pod]] = defaultdict(list)
        for pod in problem.r_pods[c]:
            key: tuple[object, ...] = (tuple(sorted(pod.requests.items())), constraint_signature(pod), pod.group_key)
            if problem.shares_move and pod.gpu_share is not None:  # its ask at device level too
                key = (*key, share_signature(pod), problem.request(pod))
            buckets[key].append(pod)
        mine = []
        for sig in sorted(buckets, key=lambda s: min(p.key for p in buckets[s])):
            pods = sorted(buckets[sig], key=lambda p: p.key)
            demand = pod_demand(pods[0])
            shape = shapes.setdefault(tuple(sorted(demand.items())), len(shapes))
            k = PodClass(len(classes), c, pods[0].group_key or "", pods, demand, problem.request(pods[0]),
                         shape=shape)
            classes.append(k)
            mine.append(k)
        classes_of[c] = mine
    return classes, classes_of


def plan_receivers(problem: RepackProblem, plan: RepackPlan) -> dict[int, set[str]]:
    """Pod class -> the receivers a plan sends its pods to (the receivers pruning must keep)."""
    class_of = {p.key: k.key for k in pod_classes(problem)[0] for p in k.pods}
    out: dict[int, set[str]] = defaultdict(set)
    for m in plan.moves:
        if m.pod in class_of:
            out[class_of[m.pod]].add(m.to_node)
    return dict(out)


MAX_ARCS = 150_000
"""Above this many (pod class, receiver) pairs, receivers per class are pruned."""
MIN_RECEIVERS = 8
"""Receivers a pod class keeps at least when pruned."""


_Admits = tuple[tuple[object, ...], tuple[tuple[str, int], ...]]
"""Pod classes with equal (constraint signature, demand) are admitted by the same receivers."""


class AdmitSets:
    """Every occupied provider that admits a pod class (static predicates, room now on every resource
    it requests), one sorted index array per (constraint signature, demand), made on first use. Kept on
    the problem (``admit_sets``), so the size decision (``receiver_cap``) and ``build_data`` find each
    set once."""

    def __init__(self, problem: RepackProblem) -> None:
        snap = problem.snapshot
        self.cap = Capacity(snap)
        self.receivers = list(problem.occupied)
        self.index = {r: i for i, r in enumerate(self.receivers)}
        self.res = sorted({r for c in problem.candidates for p in problem.r_pods[c] for r in pod_demand(p)})
        self.free_m = self.cap.room_matrix(self.receivers, self.res,
                                           exact=_huge(self.cap, self.receivers, self.res))
        self.predicates = Predicates(snap)
        self._of: dict[_Admits, np.ndarray] = {}

    @staticmethod
    def key(k: PodClass) -> _Admits:
        return constraint_signature(k.pods[0]), tuple(sorted(k.demand.items()))

    def of(self, k: PodClass) -> np.ndarray:
        """Indices into ``receivers`` of every occupied provider that admits class k (its own node too)."""
        akey = self.key(k)
        base = self._of.get(akey)
        if base is None:
            mask = self.predicates.mask(k.pods[0], self.receivers).copy()
            for r, v in k.demand.items():
                if v > 0:
                    mask &= self.free_m[self.res.index(r)] >= v
            base = self._of[akey] = np.flatnonzero(mask)
        return base


def admit_sets(problem: RepackProblem) -> AdmitSets:
    """The problem's ``AdmitSets``, made once."""
    if problem._admit_sets is None:
        problem._admit_sets = AdmitSets(problem)
    sets: AdmitSets = problem._admit_sets
    return sets


def admitted_pairs(problem: RepackProblem, classes: list[PodClass]) -> int:
    """(pod class, receiver) pairs the predicates allow: the unpruned model's send variables."""
    sets = admit_sets(problem)
    total = 0
    for k in classes:
        base = sets.of(k)
        own = sets.index[k.node]
        i = int(np.searchsorted(base, own))
        total += len(base) - int(i < len(base) and base[i] == own)
    return total


def receiver_cap(problem: RepackProblem) -> int | None:
    """Receivers per pod class for ``build_data(max_receivers=...)``: None (all) while the model
    has at most MAX_ARCS (pod class, receiver) pairs, else as many as keep it near that size (at
    least MIN_RECEIVERS). The pairs are counted as the model has them, each class's admitted receivers
    (``admitted_pairs``), not classes × occupied nodes: with pools, taints and selectors most pairs are
    not allowed (generated 600 nodes, 4/8-card nodes in four pools: 33,279 pairs of an estimated
    350,933), and such a model is solved whole, exactly (auto: 225 nodes freed, proven, in 11 s). Every
    exact planner (cpsat, milp, auto) applies it, so each solves the same model."""
    classes, _ = pod_classes(problem)
    if admitted_pairs(problem, classes) <= MAX_ARCS:
        return None
    return max(MIN_RECEIVERS, MAX_ARCS // max(len(classes), 1))


def build_data(problem: RepackProblem, *, max_receivers: int | None = None,
               keep: dict[int, set[str]] | None = None, freed_upper: int | None = None) -> ModelData:
    snap = problem.snapshot
    cands = list(problem.candidates)
    classes, classes_of = pod_classes(problem)
    # Receivers per class, vectorised over all occupied providers (``AdmitSets``): static predicates
    # once per constraint signature, then fit on every resource the class requests.
    sets = admit_sets(problem)
    cap = sets.cap
    receivers_all = sets.receivers
    U = len(receivers_all)
    index = sets.index
    cand_set = set(cands)
    stay = np.array([n not in cand_set for n in receivers_all], dtype=bool)
    names_rank = np.arange(U)
    # Free R per occupied provider, for the best-fit ranking when receivers are pruned: read from the
    # capacities, not from free_m, whose rows are the classes' resources (none without candidates).
    free_r = np.array([float(cap.free[n].get(problem.resource, 0)) for n in receivers_all], dtype=np.float64)
    pruned = False
    ranking: dict[_Admits, tuple[list[int], set[int]]] = {}  # -> the same, best first
    admits_of = Admitted()  # class -> every receiver it may use, before pruning
    for k in classes:
        akey = sets.key(k)
        base = sets.of(k)
        own = index[k.node]
        fits = base[base != own]
        admits_of.set(k.key, base, own)
        if max_receivers is not None and len(fits) > max_receivers:
            # Keep the receivers the hint uses, then the best: nodes that are no candidate first
            # (they stay), then the least free R (best fit), then by name.
            if akey not in ranking:
                ranking[akey] = (base[np.lexsort((names_rank[base], free_r[base], ~stay[base]))].tolist(),
                                 set(base.tolist()))
            ranked, admitted = ranking[akey]
            must = {u for r in (keep or {}).get(k.key, ()) if (u := index.get(r, -1)) in admitted and u != own}
            picks = [u for u in ranked[:max_receivers + 1 + len(must)] if u != own and u not in must]
            fits = np.array(sorted(must | set(picks[:max(max_receivers - len(must), 0)])), dtype=np.int64)
            pruned = True
        k.receivers = [receivers_all[u] for u in fits]
    devices = device_rooms(problem, classes, cap) if problem.shares_move else {}
    used_receivers = sorted({r for k in classes for r in k.receivers})
    free = {r: receiver_free(cap, r) for r in used_receivers}
    moved_by: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    cards_by: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for k in classes:
        moved_by[k.group][k.node] += k.count
        cards_by[k.group][k.node] += k.count * k.cards
    restart = _restart_data(problem, classes)
    unit = 0
    for k in classes:
        unit = math.gcd(unit, k.cards)
    for g in moved_by:
        unit = math.gcd(unit, problem.gangs[g].footprint)
        for ru in restart[g].units.values():
            unit = math.gcd(unit, ru.cards)
    unit = unit or 1000
    upper = len(cands) if freed_upper is None else min(len(cands), freed_upper)
    topo_regions: dict[str, list[str]] = {}
    topo_stay: dict[str, list[str]] = {}
    topo = snap.topology
    for g, (mode, limit) in sorted(problem.topology_groups.items()):
        if g not in moved_by:
            continue
        nodes = set(problem.group_nodes(g))
        fixed = {n for n in nodes if n not in cand_set}
        regions = topo.regions(limit if mode == "hard" else None)
        topo_regions[g] = [h for h in regions if fixed <= topo.region_nodes(h)]
        topo_stay[g] = sorted(nodes & cand_set)
    units: dict[str, int] = {}
    for k in classes:
        for res_name, amount in k.demand.items():
            if amount > 0:
                units[res_name] = math.gcd(units.get(res_name, 0), amount)
    classes_at: dict[str, list[PodClass]] = defaultdict(list)
    for k in classes:
        for r in k.receivers:
            classes_at[r].append(k)
    moving = {c: problem.budget_use(problem.r_pods[c]) for c in cands}  # what vacating c takes (rules)
    budget_use = {res: {c: amt for c in cands if (amt := moving[c][res])}
                  for res in problem.budgets.resources}
    pdb_use: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for c in cands:
        for key, n in problem.pdb_use(problem.r_pods[c]).items():
            pdb_use[key][c] += n
    return ModelData(problem=problem, candidates=cands, classes=classes, classes_of=classes_of,
                     receivers=used_receivers, free=free,
                     group_moved_by={g: dict(v) for g, v in sorted(moved_by.items())},
                     group_cards_by={g: dict(v) for g, v in sorted(cards_by.items())},
                     card_unit=unit, weights_int=integer_weights(problem.weights, unit), pruned=pruned,
                     freed_upper=upper, topo_regions=topo_regions, topo_stay_nodes=topo_stay,
                     units=units, classes_at=dict(classes_at), budget_use=budget_use,
                     pdb_use={k: dict(v) for k, v in sorted(pdb_use.items())}, restart=restart,
                     admitted=admits_of, all_receivers=receivers_all,
                     devices={r: devices[r] for r in used_receivers if r in devices})


def device_rooms(problem: RepackProblem, classes: list[PodClass], cap: Capacity) -> dict[str, DeviceRoom]:
    """When GPU shares move: each class's device facts (``PodClass.share``, ``whole_devices``, ``slots``), its
    receivers cut to those whose devices can take one of its pods (a share goes to a device, so only to a
    receiver that lists its GPUs), and every receiver's devices."""
    nodes = problem.snapshot.nodes
    rooms: dict[str, DeviceRoom] = {}
    for r in {r for k in classes for r in k.receivers}:
        if r in cap.gpu_free:
            free, memory, slots = cap.gpu_free[r], cap.gpu_memory[r], cap.gpu_slots[r]
            rooms[r] = DeviceRoom(tuple(free), None if memory is None else tuple(memory),
                                  tuple(gpushare.usable(free, GpuAsk(whole=1), memory, slots)),
                                  tuple(d.index for d in nodes[r].devices), None if slots is None else tuple(slots))
    for k in classes:
        pod = k.pods[0]
        if pod.key not in problem.share_milli:
            k.whole_devices = pod.requests.get(WHOLE_GPU, 0) // MILLI_PER_GPU
            continue
        kept = []
        for r in k.receivers:
            room = rooms.get(r)
            if room is None:
                continue
            ask = gpu_ask(pod, nodes[r])
            model = nodes[r].devices[0].model
            # none on a device its PodGroup's pods hold (spreading shares)
            pod_slots = gpushare.without(room.slots, cap.spread_blocked(r, pod), len(room.free))
            if not gpushare.fits(room.free, ask, room.memory, model, pod_slots):
                continue
            if ask.is_share:
                k.share = True
                k.slots[r] = tuple((d, ask.milli, ask.memory_mib)
                                   for d in gpushare.usable(room.free, ask, room.memory, pod_slots))
            else:
                k.whole_devices = ask.whole
            kept.append(r)
        k.receivers = kept
    return rooms


def receiver_free(cap: Capacity, r: str) -> dict[str, int]:
    """Receiver r's free room as the model reads it (``ModelData.free``): milli-units per resource,
    "pods" only when the node limits its pods."""
    return {res: v for res, v in cap.free[r].items() if res != "pods" or cap.limits_pods(r)}


def data_stats(data: ModelData) -> dict[str, int]:
    """The model's size as the solver records report it (``PlanResult.stats``)."""
    return {"candidates": len(data.candidates), "podClasses": len(data.classes), "receivers": len(data.receivers),
            "sendVariables": sum(len(k.receivers) for k in data.classes), "receiversPruned": int(data.pruned)}


def stuck(data: ModelData) -> list[str]:
    """Candidates with a pod that no receiver admits: they cannot be vacated (``no-feasible-receiver``)."""
    return [c for c in data.candidates if not all(k.receivers for k in data.classes_of[c])]


def components(data: ModelData) -> list[list[str]]:
    """The model's independent parts: candidates that share no receiver, PodGroup, PDB or budget,
    each part as its sorted candidates, the largest part first. A candidate with a pod that no
    receiver admits is in no part (it cannot be vacated: it stays, as a receiver of the others).

    Two candidates are in one part when a pod of one may go to a node the other's pods may go to
    (or to the other node itself), when one PodGroup has pods on both (affected, breach, restart
    units and topology are per PodGroup), or when one PDB covers pods on both. A maxPerRun budget
    spans every candidate: then there is one part. Parts share no variable and no constraint, so
    the lexicographic optimum of the whole is the union of the parts' optima: most freed nodes is
    the sum of each part's most, and with every part at its most, the least disruption is the sum
    of each part's least. "May go to" reads every admitted receiver (``ModelData.admitted``), pruned
    or not, so the parts of a pruned model are parts of the whole model too."""
    dead = set(stuck(data))
    live = [c for c in data.candidates if c not in dead]
    budgets = data.problem.budgets
    if budgets.pod_groups is not None or any(data.budget_use.get(res) for res in budgets.resources):
        return [sorted(live)] if live else []
    parent: dict[str, str] = {c: c for c in live}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(nodes: list[str]) -> None:
        roots = [find(n) for n in nodes]
        for r in roots[1:]:
            parent[r] = roots[0]

    linked: dict[int, str] = {}  # per admitted array (classes of one shape share it): a node it holds
    for k in data.classes:
        if k.node not in parent:
            continue
        if k.key not in data.admitted:  # no admitted arrays (a model built by hand): its receivers
            for r in k.receivers:
                parent.setdefault(r, r)
            union([k.node, *k.receivers])
            continue
        base, _ = data.admitted.entry(k.key)
        if len(base) == 0:
            continue
        if id(base) not in linked:
            nodes = [data.all_receivers[u] for u in base.tolist()]
            for r in nodes:
                parent.setdefault(r, r)
            union(nodes)
            linked[id(base)] = nodes[0]
        union([k.node, linked[id(base)]])
    for by_node in [*data.group_moved_by.values(), *data.pdb_use.values()]:
        union([c for c in by_node if c in parent])
    parts: dict[str, list[str]] = defaultdict(list)
    for c in live:
        parts[find(c)].append(c)
    return sorted((sorted(cs) for cs in parts.values()), key=lambda cs: (-len(cs), cs[0]))


def restrict(data: ModelData, part: list[str], freed_upper: int) -> ModelData:
    """The model of one part (see ``components``): its candidates, their pod classes (renumbered),
    the receivers they may use, and its PodGroups and PDBs; weights and units stay those of the whole,
    so the parts' objectives add up to the whole's. Candidates outside the part are never vacated
    here: a candidate of another part shares nothing with this one, and a candidate in no part cannot
    be vacated at all, so it drops out of its PodGroup's counts and pins its topology regions."""
    cands = set(part)
    kept = [kk for kk in data.classes if kk.node in cands]
    classes = [replace(k, key=i) for i, k in enumerate(kept)]
    admitted = data.admitted.rekeyed({k.key: i for i, k in enumerate(kept)})
    classes_of: dict[str, list[PodClass]] = {c: [] for c in part}
    classes_at: dict[str, list[PodClass]] = defaultdict(list)
    for k in classes:
        classes_of[k.node].append(k)
        for r in k.receivers:
            classes_at[r].append(k)
    receivers = sorted(classes_at)
    groups = sorted({k.group for k in classes})
    topo = data.problem.snapshot.topology
    topo_regions: dict[str, list[str]] = {}
    topo_stay: dict[str, list[str]] = {}
    for g in groups:
        if g in data.topo_regions:
            pinned = {n for n in data.topo_stay_nodes[g] if n not in cands}
            topo_regions[g] = [h for h in data.topo_regions[g] if pinned <= topo.region_nodes(h)]
            topo_stay[g] = [n for n in data.topo_stay_nodes[g] if n in cands]

    def mine(by_node: dict[str, int]) -> dict[str, int]:
        return {c: n for c, n in by_node.items() if c in cands}

    restart = {}
    for g in groups:
        rs = data.restart[g]
        units = {u: RestartUnitData([c for c in unit.nodes if c in cands], unit.running, unit.cards)
                 for u, unit in rs.units.items() if set(unit.nodes) & cands}
        restart[g] = GroupRestart({c: x for c, x in rs.singles.items() if c in cands}, units,
                                  [c for c in rs.wide if c in cands],
                                  {c: x for c, x in rs.alone.items() if c in cands})
    return replace(
        data, candidates=list(part), classes=classes, classes_of=classes_of, receivers=receivers,
        free={r: data.free[r] for r in receivers},
        group_moved_by={g: mine(data.group_moved_by[g]) for g in groups},
        group_cards_by={g: mine(data.group_cards_by[g]) for g in groups},
        freed_upper=min(len(part), freed_upper), topo_regions=topo_regions, topo_stay_nodes=topo_stay,
        classes_at=dict(classes_at), budget_use={res: mine(use) for res, use in data.budget_use.items()},
        pdb_use={key: m for key, by_node in data.pdb_use.items() if (m := mine(by_node))}, restart=restart,
        admitted=admitted, _fit={})


def _restart_data(problem: RepackProblem, classes: list[PodClass]) -> dict[str, GroupRestart]:
    snap = problem.snapshot
    pods_at: dict[str, dict[str, list[Pod]]] = defaultdict(lambda: defaultdict(list))
    for k in classes:
        pods_at[k.group][k.node].extend(k.pods)
    out: dict[str, GroupRestart] = {}
    for g, by_node in sorted(pods_at.items()):
        singles: dict[str, tuple[int, int]] = {}
        units: dict[str, RestartUnitData] = {}
        wide: list[str] = []
        alone: dict[str, frozenset[str]] = {}
        for c, pods in sorted(by_node.items()):
            running = cards = 0
            for pod in pods:
                u = problem.restart_unit(pod)
                if u.whole_group:
                    if c not in wide:
                        wide.append(c)
                elif u.policy is None:
                    running += u.running
                    cards += u.cards
                else:
                    data = units.setdefault(u.key, RestartUnitData([], u.running, u.cards))
                    if c not in data.nodes:
                        data.nodes.append(c)
            if running or cards:
                singles[c] = (running, cards)
            restarted = problem.restarted(pods)[g]
            alone[c] = frozenset(q for q in restarted.pods if snap.pods[q].phase == "Running")
        out[g] = GroupRestart(singles, dict(sorted(units.items())), wide, alone)
    return out


def _huge(cap: Capacity, nodes: list[str], res: list[str]) -> bool:
    """Whether some free amount needs more than an int64 (then numpy holds Python ints)."""
    return any(abs(cap.free[n].get(r, 0)) >= 2**62 for n in nodes for r in res)


def breach_pairs(alone: dict[str, frozenset[str]], safe: int) -> list[tuple[str, str]]:
    """Pairs of nodes, each within the safe count alone, that together restart more Running pods."""
    small = sorted((c, s) for c, s in alone.items() if len(s) <= safe)
    return [(c1, c2) for i, (c1, s1) in enumerate(small) for c2, s2 in small[i + 1:]
            if len(s1) + len(s2) > safe and len(s1 | s2) > safe]


def hint_counts(data: ModelData, plan: RepackPlan) -> dict[tuple[int, str], int]:
    """A plan as class -> receiver counts (for hints and for fixing a plan in tests)."""
    class_of: dict[str, int] = {}
    for k in data.classes:
        for p in k.pods:
            class_of[p.key] = k.key
    out: dict[tuple[int, str], int] = defaultdict(int)
    for m in plan.moves:
        out[(class_of[m.pod], m.to_node)] += 1
    return dict(out)


def decode(data: ModelData, vacated: list[str], sends: dict[tuple[int, str], int],
           on_devices: dict[tuple[int, str, int], int] | None = None) -> RepackPlan:
    """Counts back to pods: within a class, pods (by name) fill receivers in name order; a share class's
    pods sent to a receiver fill its devices (``on_devices``: class, receiver, device position -> pods) in
    position order, each move naming its device."""
    moves: list[PodMove] = []
    placed: dict[tuple[int, str], list[tuple[int, ...]]] = defaultdict(list)
    for (kk, rr, d), x in sorted((on_devices or {}).items()):
        placed[kk, rr].extend([(data.devices[rr].index[d],)] * x)
    for c in sorted(vacated):
        for k in data.classes_of[c]:
            targets = sorted((r, n) for (kk, r), n in sends.items() if kk == k.key and n > 0)
            it = iter(k.pods)
            for r, n in targets:
                slots: list[tuple[int, ...] | None] = [None] * n
                if k.share and on_devices is not None:
                    slots = list(placed[k.key, r])
                for devices in slots:
                    pod = next(it)
                    moves.append(PodMove(pod=pod.key, from_node=c, to_node=r, to_devices=devices))
    return RepackPlan.build(moves, vacated)


def plan_part(plan: RepackPlan, part: set[str] | frozenset[str]) -> RepackPlan:
    """The moves and freed nodes of a plan that belong to one part (see ``components``)."""
    return RepackPlan.build([m for m in plan.moves if m.from_node in part],
                            [c for c in plan.freed_nodes if c in part])


def merge_plans(plans: list[RepackPlan]) -> RepackPlan:
    """One plan from the plans of disjoint parts."""
    return RepackPlan.build([m for p in plans for m in p.moves], [c for p in plans for c in p.freed_nodes])


def weigh(weights_int: dict[str, int], penalties: Mapping[str, Sequence[tuple[Any, int]]]) -> list[tuple[Any, int]]:
    """The objective's terms, built once for both exact models: each dimension's penalty terms (variable,
    units), as the soft families return them, times that dimension's integer weight, by name, in
    ``DIMENSIONS``' order (a variable may appear more than once; the solvers add its coefficients)."""
    unknown = set(penalties) - {dim.key for dim in DIMENSIONS}
    if unknown:  # a misspelt dimension would silently drop its terms
        raise ValueError(f"penalty terms of unknown dimensions: {', '.join(sorted(unknown))}")
    return [(x, w * units) for dim in DIMENSIONS if (w := weights_int[dim.key])
            for x, units in penalties.get(dim.key, ())]


def weighted_cost(weights_int: dict[str, int], card_unit: int, d: Disruption) -> int:
    """The integer weighted disruption ``d`` with ``integer_weights(..., card_unit)``, cards in card units."""
    return sum(w * (getattr(d, dim.field) // card_unit if dim.cards else getattr(d, dim.field))
               for dim in DIMENSIONS if (w := weights_int[dim.key]))


def scaled_cost(data: ModelData, plan: RepackPlan) -> int:
    """The integer objective of a plan (for comparisons and tests)."""
    return weighted_cost(data.weights_int, data.card_unit, data.problem.plan_disruption(plan))


def plan_score(data: ModelData, plan: RepackPlan) -> Score:
    """A plan as ``exact.better`` ranks it, on the model's integer scale."""
    return Score(len(plan.freed_nodes), scaled_cost(data, plan))


def exact_score(problem: RepackProblem, plan: RepackPlan, d: Disruption) -> Score:
    """A plan (with its disruption ``d``) as ``exact.better`` ranks it, before any model is built: on the
    scale of milli-cards (``integer_weights(..., 1)``), which orders plans as every model's scale does."""
    return Score(len(plan.freed_nodes), weighted_cost(integer_weights(problem.weights, 1), 1, d))
