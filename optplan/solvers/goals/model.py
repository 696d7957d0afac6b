"""The exact goal model's data (issue 15 §2), read by the CP-SAT model (``cpsat``, which documents the
decisions and constraints) and by a MILP twin should one be written; no solver is imported here.

- Move classes (``MoveClass``): interchangeable movable R pods on one node — same requests, constraint
  signature, PodGroup, covering PDBs and restart unit when that unit is wider than the pod — with the
  receivers they may be sent to (static predicates, their PodGroup's topology regions, one pod fits the
  room now: a receiver loses nothing) and how many fit on each alone.
  Only nodes where a gang pod may land or inside a HyperNode to free have classes (the necessity rule:
  no other node may lose a pod).
- Gang classes (``GangClass``): identical pods of a gang's minimum and the nodes they may go to (static
  predicates, inside one of the gang's regions, one pod fits if every movable pod left the node); the
  gang's regions are those that could hold its R once every movable pod left. A gang whose hard topology
  then leaves no region is not admittable (TOPOLOGY), as is one whose queue does not admit jobs (QUOTA).
- Scales: the card unit (gcd of the R amounts the disruption counts) and integer weights of Repack's
  exact models (``repack.model.integer_weights``), each resource's gcd (the capacity rows are divided
  by it), and the stage-1 weight of each gang: a priority level outweighs every lower one together.

Restriction (``restrict``; automatic above ``MAX_VARIABLES`` send and place variables): move classes
only on the sources ``_sources`` picks, receivers per class cut to the ``KEEP_RECEIVERS`` best fits
(nodes that lose nothing first, then the least free R), always keeping the hint's.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field, replace

import numpy as np

from optplan.models.goals import QUOTA, SEARCH, TOPOLOGY, GoalPlan
from optplan.models.quantity import format_milli
from optplan.models.snapshot import ROOT, Pod
from optplan.solvers.core.oracle import NO_POD_LIMIT, Capacity, constraint_signature, pod_demand
from optplan.solvers.goals.problem import Gang, GangPod, GoalProblem
from optplan.solvers.placement.jobs import Region
from optplan.solvers.repack.model import integer_weights
from optplan.solvers.repack.rules import RestartUnit

MAX_VARIABLES = 200_000
"""Above this many send and place variables the model is restricted around the hint (``restrict``)."""
KEEP_REGIONS = 4
"""Regions per gang whose nodes a restricted model may move pods off (the most R that could be free first)."""
KEEP_RECEIVERS = 16
"""Receivers a move class keeps at least in a restricted model (best fit first)."""


@dataclass
class MoveClass:
    """Interchangeable movable R pods on one node (see the module)."""

    key: int
    node: str
    group: str
    pods: list[Pod]  # sorted by key
    demand: dict[str, int]  # per pod, with the pod slot
    cards: int  # R per pod, milli
    pdbs: tuple[str, ...]
    unit: RestartUnit  # of the first pod (the same for all when wider than one pod)
    receivers: list[str] = field(default_factory=list)
    caps: list[int] = field(default_factory=list)  # per receiver: pods that fit there alone

    @property
    def count(self) -> int:
        return len(self.pods)


@dataclass
class GangClass:
    """Identical pods of one gang's minimum, and the nodes they may go to."""

    gang: int  # index into ``problem.gangs``
    pods: list[GangPod]
    demand: dict[str, int]
    nodes: list[str] = field(default_factory=list)


@dataclass
class Data:
    problem: GoalProblem
    classes: list[MoveClass]
    gang_classes: list[GangClass]
    eligible: list[int]  # gangs that may be admitted (no cause), by index
    regions: dict[int, list[Region]]  # eligible gang -> its regions that may hold it
    free0: dict[str, dict[str, int]]  # node -> free room now ("pods" absent where there is no limit)
    hyper: dict[str, frozenset[str]]  # freeable HyperNodes of the goal's tier -> nodes
    topo: dict[str, list[str]]  # topology PodGroup with classes -> regions it may end inside
    topo_before: dict[str, int]  # soft topology PodGroup -> its lowest enclosing tier now
    card_unit: int
    weights_int: dict[str, int]
    units: dict[str, int]  # resource -> gcd of every demand on it (rows are divided by it)
    restricted: bool
    priority_weight: dict[int, int]  # eligible gang -> its stage-1 weight
    causes: dict[int, tuple[str, str]] = field(default_factory=dict)  # gang -> (cause, reason) fixed up front

    def cards(self, milli: int) -> int:
        return milli // self.card_unit


def _classes(problem: GoalProblem, sources: set[str] | None) -> list[MoveClass]:
    rp = problem.repack
    out: list[MoveClass] = []
    for n in sorted(problem.movable):
        if sources is not None and n not in sources:
            continue
        buckets: dict[tuple[object, ...], list[Pod]] = defaultdict(list)
        for pod in problem.movable[n]:
            unit = rp.restart_unit(pod)
            buckets[(tuple(sorted(pod.requests.items())), constraint_signature(pod), pod.group_key,
                     tuple(rp.pdbs_covering(pod)), unit.key if unit.policy is not None else None)].append(pod)
        for sig in sorted(buckets, key=lambda s: min(p.key for p in buckets[s])):
            pods = sorted(buckets[sig], key=lambda p: p.key)
            out.append(MoveClass(len(out), n, pods[0].group_key or "", pods, pod_demand(pods[0]),
                                 rp.request(pods[0]), tuple(rp.pdbs_covering(pods[0])), rp.restart_unit(pods[0])))
    return out


def _gang_classes(problem: GoalProblem, i: int, gang: Gang) -> list[GangClass]:
    buckets: dict[tuple[object, ...], list[GangPod]] = defaultdict(list)
    for gp in gang.pods:
        buckets[(tuple(sorted(gp.pod.requests.items())), constraint_signature(gp.pod))].append(gp)
    return [GangClass(i, gps, pod_demand(gps[0].pod))
            for gps in sorted(buckets.values(), key=lambda gs: (gs[0].task, gs[0].index))]


def _fits(demand: dict[str, int], free: dict[str, int]) -> int:
    """Pods of ``demand`` that fit in ``free`` (a resource absent from ``free`` is unlimited: the pod slot)."""
    return min((free.get(r, 0) // v for r, v in demand.items() if v > 0 and (r != "pods" or r in free)),
               default=NO_POD_LIMIT)


def build_data(problem: GoalProblem, hint: GoalPlan | None = None, *, restrict: bool | None = None) -> Data:
    """The model's data; restricted (``restrict``) when asked, or when the whole model is too large."""
    cap = problem.capacity()
    free0 = {n: {r: v for r, v in cap.free[n].items() if r != "pods" or cap.limits_pods(n)}
             for n in problem.snapshot.nodes}
    R = problem.resource
    gangs = problem.gangs
    causes: dict[int, tuple[str, str]] = {}
    qs = problem.queue_state()
    eligible = []
    for i, g in enumerate(gangs):
        if g.cause is not None:
            causes[i] = (g.cause, g.why or f"cannot be admitted: {g.cause}")
        elif not g.pods:
            causes[i] = (SEARCH, "the gang has no pod to place")
        elif (why := qs.admission_reason(g.queue)) is not None:
            causes[i] = (QUOTA, why)
        else:
            eligible.append(i)
    sources: set[str] | None = None
    if restrict:
        sources = _sources(problem, eligible, free0, hint)
    classes = _classes(problem, sources)
    movable_room: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for k in classes:
        for r, v in k.demand.items():
            movable_room[k.node][r] += v * k.count
    hyper = ({h: ns for h, ns in sorted(problem.hyper_nodes.items()) if problem.freeable(h)}
             if problem.free_count else {})
    rooms: dict[str, dict[str, int]] = {}

    def potential(n: str) -> dict[str, int]:
        """The room on n if every pod the model may move off it left."""
        if n not in rooms:
            leaving = movable_room.get(n, {})
            rooms[n] = {r: a + leaving.get(r, 0) for r, a in free0[n].items()}
        return rooms[n]

    # gangs: classes, regions that may hold them, nodes
    gang_classes: list[GangClass] = []
    regions: dict[int, list[Region]] = {}
    for i in eligible:
        g = gangs[i]
        mine = _gang_classes(problem, i, g)
        union: set[str] = set()
        keep = []
        for reg in g.regions:
            room = sum(max(free0[n].get(R, 0) + movable_room.get(n, {}).get(R, 0), 0) for n in reg.nodes if n in free0)
            if room >= g.card_request(R):
                keep.append(reg)
                union |= reg.nodes
        regions[i] = keep
        nt = g.job.network_topology
        if not keep and not restrict and nt is not None and nt.mode == "hard":
            causes[i] = (TOPOLOGY, f"no HyperNode of tier <= {nt.highest_tier_allowed} could hold its "
                                   f"{format_milli(g.card_request(R))} {R}, even with every movable pod moved off")
        for gc in mine:
            pod = gc.pods[0].pod
            for n in sorted(union):
                if problem.predicates.reason(pod, n) is None and _fits(gc.demand, potential(n)) >= 1:
                    gc.nodes.append(n)
        gang_classes += mine
    eligible = [i for i in eligible if i not in causes]
    gang_classes = [gc for gc in gang_classes if gc.gang not in causes]
    # a node loses pods only where a gang pod may land or in a HyperNode to free: the others' pods stay
    may_lose = {n for gc in gang_classes for n in gc.nodes} | {n for ns in hyper.values() for n in ns}
    classes = [replace(k, key=i) for i, k in enumerate(k for k in classes if k.node in may_lose)]
    # topology PodGroups with classes: the regions they may end inside
    rp = problem.repack
    topology = problem.snapshot.topology
    topo: dict[str, list[str]] = {}
    topo_before: dict[str, int] = {}
    in_class = {p.key for k in classes for p in k.pods}
    for gk in sorted({k.group for k in classes} & set(rp.topology_groups)):
        mode, limit = rp.topology_groups[gk]
        hard = mode == "hard"
        fixed = {p.node_name for p in problem.snapshot.pods_by_group.get(gk, [])
                 if p.key not in in_class and p.node_name is not None}
        topo[gk] = [h for h in topology.regions(limit if hard else None)
                    if not (hard and h == ROOT) and fixed <= topology.region_nodes(h)]
        if not hard:
            topo_before[gk] = topology.lowest_tier(set(rp.group_nodes(gk)))
    # receivers of each class: static predicates once per constraint signature, fit on the room now
    arcs = _receivers(problem, classes, topo, free0, cap)
    if restrict is None and sum(len(i) for i, _ in arcs) + sum(len(gc.nodes) for gc in gang_classes) > MAX_VARIABLES:
        return build_data(problem, hint, restrict=True)
    providers = list(rp.providers)
    must = _hint_arcs(classes, hint)
    for k, (idx, fit) in zip(classes, arcs, strict=True):
        if sources is not None and len(idx) > KEEP_RECEIVERS:
            free_r = np.array([free0[providers[i]].get(R, 0) for i in idx], dtype=np.int64)
            late = np.array([providers[i] in sources for i in idx], dtype=bool)
            order = np.lexsort((idx, free_r, late))  # nodes that lose nothing first, then the best fit
            chosen = set(order[:KEEP_RECEIVERS].tolist()) | {j for j, i in enumerate(idx)
                                                             if providers[i] in must[k.key]}
            sel = np.array(sorted(chosen), dtype=np.int64)
            idx, fit = idx[sel], fit[sel]
        k.receivers = [providers[i] for i in idx.tolist()]
        k.caps = [min(int(f), k.count) for f in fit.tolist()]
    # scales
    card_unit = 0
    for k in classes:
        card_unit = math.gcd(card_unit, k.cards, k.unit.cards)
    for gk in {k.group for k in classes}:
        card_unit = math.gcd(card_unit, rp.gangs[gk].footprint)
    card_unit = card_unit or 1000
    units: dict[str, int] = {}
    for d in [k.demand for k in classes] + [gc.demand for gc in gang_classes]:
        for r, v in d.items():
            if v > 0:
                units[r] = math.gcd(units.get(r, 0), v)
    levels = sorted({gangs[i].priority for i in eligible})
    level_weight: dict[int, int] = {}
    below = 0
    for lv in levels:
        level_weight[lv] = below + 1
        below += level_weight[lv] * sum(1 for i in eligible if gangs[i].priority == lv)
    data = Data(problem, classes, gang_classes, eligible, regions, free0, hyper, topo, topo_before, card_unit,
                integer_weights(problem.weights, card_unit), units, bool(restrict),
                {i: level_weight[gangs[i].priority] for i in eligible}, causes)
    return data


def _receivers(problem: GoalProblem, classes: list[MoveClass], topo: dict[str, list[str]],
               free0: dict[str, dict[str, int]], cap: Capacity) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per class, the indices into ``repack.providers`` of the nodes it may be sent to (static predicates,
    its PodGroup's topology regions, one pod fits the room now: a receiver loses nothing) and how many
    of its pods fit there alone. Vectorised: classes of one signature, demand and topology share a row."""
    providers = list(problem.repack.providers)
    index = {n: i for i, n in enumerate(providers)}
    res = sorted({r for k in classes for r, a in k.demand.items() if a > 0})
    room = cap.room_matrix(providers, res)
    topology = problem.snapshot.topology
    rows: dict[tuple[object, ...], tuple[np.ndarray, np.ndarray]] = {}
    out = []
    for k in classes:
        regions = tuple(topo[k.group]) if k.group in topo else None
        akey = (constraint_signature(k.pods[0]), tuple(sorted(k.demand.items())), regions)
        row = rows.get(akey)
        if row is None:
            mask = problem.predicates.mask(k.pods[0], providers).copy()
            fit = np.full(len(providers), NO_POD_LIMIT, dtype=np.int64)
            for r, a in k.demand.items():
                if a > 0:
                    fit = np.minimum(fit, room[res.index(r)] // a)
            mask &= fit >= 1
            if regions is not None:
                inside = set().union(*(topology.region_nodes(h) for h in regions)) if regions else set()
                mask &= np.fromiter((n in inside for n in providers), dtype=bool, count=len(providers))
            idx = np.flatnonzero(mask)
            row = rows[akey] = (idx, fit[idx])
        idx, fit = row
        own = index.get(k.node, -1)
        keep = idx != own
        out.append((idx[keep], fit[keep]))
    return out


def _hint_arcs(classes: list[MoveClass], hint: GoalPlan | None) -> dict[int, set[str]]:
    """Class -> the receivers the hint sends its pods to (a restricted model keeps them)."""
    out: dict[int, set[str]] = defaultdict(set)
    if hint is not None:
        class_of = {p.key: k.key for k in classes for p in k.pods}
        for mv in hint.repack.moves:
            if mv.pod in class_of:
                out[class_of[mv.pod]].add(mv.to_node)
    return out


def size(data: Data) -> int:
    """Send and place variables of the model."""
    return sum(len(k.receivers) for k in data.classes) + sum(len(gc.nodes) for gc in data.gang_classes)


def _sources(problem: GoalProblem, eligible: list[int], free0: dict[str, dict[str, int]],
             hint: GoalPlan | None) -> set[str]:
    """The nodes a restricted model may move pods off: per gang, its ``KEEP_REGIONS`` regions where the most
    R could be free (free now plus the movable pods' R), and in each the nodes where the most could be free,
    twice as many as the gang has pods and at least eight; the nodes of the freeable HyperNodes cheapest to
    free (least movable R; twice the count, and two more); the hint's sources."""
    R = problem.resource
    movable_r = {n: sum(p.request(R) for p in ps) for n, ps in problem.movable.items()}

    def most(n: str) -> int:
        return max(free0[n].get(R, 0), 0) + movable_r.get(n, 0)

    out: set[str] = set()
    for i in eligible:
        g = problem.gangs[i]
        ranked = sorted(g.regions, key=lambda reg: (-sum(most(n) for n in reg.nodes if n in free0),
                                                    reg.hyper_node or ""))
        for reg in ranked[:KEEP_REGIONS]:
            nodes = sorted((n for n in reg.nodes if n in movable_r), key=lambda n: (-most(n), n))
            out |= set(nodes[:max(8, 2 * len(g.pods))])
    if problem.free_count:
        hs = sorted((h for h in problem.hyper_nodes if problem.freeable(h)),
                    key=lambda h: (sum(movable_r.get(n, 0) for n in problem.hyper_nodes[h]), h))
        for h in hs[:2 * problem.free_count + 2]:
            out |= {n for n in problem.hyper_nodes[h] if n in movable_r}
    if hint is not None:
        out |= {m.from_node for m in hint.repack.moves}
    return out


