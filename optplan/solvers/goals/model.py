"""The exact goal model's data, read by the CP-SAT model (``cpsat``, which documents the
decisions and constraints) and by its MILP twin (``milp``); no solver is imported here.

- Move classes (``MoveClass``): interchangeable movable R pods on one node — same requests, constraint
  signature, PodGroup, covering PDBs and restart unit when that unit is wider than the pod — with the
  receivers they may be sent to (static predicates, their PodGroup's topology regions, one pod fits the
  room now: a receiver loses nothing) and how many fit on each alone.
  Only nodes where a gang pod may land or inside a HyperNode to free have classes (the necessity rule:
  no other node may lose a pod).
- Device level, when GPU shares move (``RepackProblem.shares_move``) or a gang's pod asks a share on nodes
  that list their GPUs (``Data.devices``): a class's pods also hold the same part of the same devices of their
  node (``MoveClass.held``: a share is a class pinned to its device); a share class goes only to receivers
  with a device one pod fits now (``MoveClass.slots``), a gang's share pods to devices that could take one
  once the movable pods on them left (``GangClass.slots``; at most one of a gang's pods a device, and none
  where a pod of its PodGroup sits, when its share spreads, ``volcano.sh/vgpu-podgroup-policy``); whole cards
  take devices untouched after the moves (``whole_devices``). The rows (``rows._devices``) are the oracle's
  fit of each device; R's totals row there is on ``whole_total``. Snapshots without devices build the model
  they always did.
- Gang classes (``GangClass``): identical pods of a gang's minimum and the nodes they may go to (static
  predicates, inside one of the gang's regions, one pod fits if every movable pod left the node); the
  gang's regions are those that could hold its R once every movable pod left. A gang whose hard topology
  then leaves no region is not admittable (TOPOLOGY), as is one whose queue does not admit jobs (QUOTA).
- Scales: the card unit (gcd of the R amounts the disruption counts) and integer weights of Repack's
  exact models (``repack.exact.model.integer_weights``), each resource's gcd (the capacity rows are divided
  by it), and the stage-1 weight of each gang: a priority level outweighs every lower one together.

Restriction (``restrict``; automatic above ``MAX_VARIABLES`` send and place variables): move classes
only on the sources ``_sources`` picks, receivers per class cut to the ``KEEP_RECEIVERS`` best fits
(nodes that lose nothing first, then the least free R), always keeping the hint's.

The model itself is built from this data as rows by ``rows`` (``rows.exact_model``, kept in ``Data.memo``).

Shared by both exact models, so that each rule is written once: the start without a hint (``fits_now``),
the plan from a solution's moves and admissions (``build_plan``), the plan when the model gave none
(``fallback``), stage 3 on the rules' cost (``settle``) and the record of the stages (``goal_record``); the
read-back itself and the planner's result are ``rows.decode`` and ``rows.exact_result``.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from optplan.models.devices import MILLI_PER_GPU
from optplan.models.goals import QUOTA, SEARCH, TOPOLOGY, Admission, GoalPlan
from optplan.models.placement import Binding
from optplan.models.quantity import format_milli
from optplan.models.repack import PodMove, SolverRecord
from optplan.models.results import Disruption
from optplan.models.snapshot import ROOT, Pod
from optplan.solvers.core import gpushare
from optplan.solvers.core.exact import exact_record
from optplan.solvers.core.gpushare import GpuAsk
from optplan.solvers.core.oracle import (
    NO_POD_LIMIT,
    Capacity,
    constraint_signature,
    gpu_ask,
    pod_demand,
    share_signature,
)
from optplan.solvers.goals.problem import Gang, GangPod, GoalProblem
from optplan.solvers.placement.jobs import Region, bound_pod
from optplan.solvers.placement.partitions import partitioned
from optplan.solvers.repack.exact.model import DeviceRoom, integer_weights
from optplan.solvers.repack.rules import RestartUnit

log = logging.getLogger(__name__)

MAX_VARIABLES = 200_000
"""Above this many send and place variables the model is restricted around the hint (``restrict``)."""
WEIGHT_LIMIT = 2 ** 40
"""The most the stage-1 admission weights may add up to (CP-SAT's 64-bit sums; the MILP's doubles stay exact)."""
KEEP_REGIONS = 4
"""Regions per gang whose nodes a restricted model may move pods off (the most R that could be free first)."""
KEEP_RECEIVERS = 16
"""Receivers a move class keeps at least in a restricted model (best fit first)."""
STAGE_SHARES = (0.45, 0.2, 0.35)
"""Share of the solving time of each stage (admissions, HyperNodes, disruption); what a stage leaves
flows to the next (``stage_seconds``)."""
RESERVE = 0.03
"""Share of the time limit the exact planners keep for reading the solution back and validating it."""


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
    held: tuple[int, int, tuple[int, ...]] = (0, 0, ())
    """At device level (``Data.devices``): the milli-GPU and memory (MiB) each pod holds on each of the device
    positions of its node listed (the same for every pod of the class: classes are split by device)."""
    slots: dict[str, tuple[tuple[int, int, int], ...]] = field(default_factory=dict)
    """At device level, a share: receiver -> (device position, milli-GPU, memory MiB) of each device one pod
    may take there (as ``repack.exact.model.PodClass.slots``)."""
    whole_devices: int = 0
    """At device level: the untouched devices each pod takes on a receiver that lists its GPUs (whole cards)."""

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
    slots: dict[str, tuple[tuple[int, int, int], ...]] = field(default_factory=dict)
    """At device level, pods asking for a share: node -> (device position, milli-GPU, memory MiB) of each
    device that could take one once the movable pods on it left."""
    whole_devices: int = 0
    """At device level: the untouched devices each pod takes on a node that lists its GPUs."""


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
    devices: dict[str, DeviceRoom] = field(default_factory=dict)
    """When GPU shares move (``RepackProblem.shares_move``) or a gang asks shares: every node of the model that
    lists its GPUs, its devices now (the model at device level); empty otherwise."""
    whole_total: dict[str, int] = field(default_factory=dict)
    """Those nodes' free ``nvidia.com/gpu`` by the totals (``Capacity.whole_total``): the R row's room there,
    the untouched devices being the device rows'."""

    def cards(self, milli: int) -> int:
        return milli // self.card_unit

    memo: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    """What the modules above build once from this data and keep with it (``rows.model_of``: the exact model)."""


def _classes(problem: GoalProblem, sources: set[str] | None, cap: Capacity | None) -> list[MoveClass]:
    """The move classes; with ``cap`` (device level), a class's pods also hold the same share of the same
    devices of their node (``MoveClass.held``)."""
    rp = problem.repack
    out: list[MoveClass] = []
    for n in sorted(problem.movable):
        if sources is not None and n not in sources:
            continue
        buckets: dict[tuple[object, ...], list[Pod]] = defaultdict(list)
        for pod in problem.movable[n]:
            unit = rp.restart_unit(pod)
            key: tuple[object, ...] = (tuple(sorted(pod.requests.items())), constraint_signature(pod),
                                       share_signature(pod), pod.group_key, tuple(rp.pdbs_charged(pod)),
                                       unit.key if unit.policy is not None else None)
            if cap is not None:
                key = (*key, _held(cap, pod, n))
            buckets[key].append(pod)
        for sig in sorted(buckets, key=lambda s: min(p.key for p in buckets[s])):
            pods = sorted(buckets[sig], key=lambda p: p.key)
            out.append(MoveClass(len(out), n, pods[0].group_key or "", pods, pod_demand(pods[0]),
                                 rp.request(pods[0]), tuple(rp.pdbs_charged(pods[0])), rp.restart_unit(pods[0]),
                                 held=_held(cap, pods[0], n) if cap is not None else (0, 0, ())))
    return out


def _held(cap: Capacity, pod: Pod, node: str) -> tuple[int, int, tuple[int, ...]]:
    """(milli-GPU, memory MiB, device positions) the pod holds on its node's devices; (0, 0, ()) for none."""
    held = cap.gpu_held.get(pod.key)
    if held is None or held[0] != node:
        return 0, 0, ()
    return held[2], held[3], held[1]


def _gang_devices(problem: GoalProblem, gang_classes: list[GangClass], classes: list[MoveClass],
                  cap: Capacity) -> None:
    """At device level, each gang class's ask on the nodes that list their GPUs: a share's devices that could
    take one pod once every movable pod on them left (``GangClass.slots``; a node with none is dropped), or
    the whole cards each pod takes (``GangClass.whole_devices``)."""
    nodes = problem.snapshot.nodes
    release: dict[str, dict[int, tuple[int, int, int]]] = defaultdict(dict)
    for k in classes:
        for d in k.held[2]:
            m0, mem0, n0 = release[k.node].get(d, (0, 0, 0))
            release[k.node][d] = (m0 + k.held[0] * k.count, mem0 + k.held[1] * k.count, n0 + k.count)
    for gc in gang_classes:
        pod = gc.pods[0].pod
        kept = []
        for n in gc.nodes:
            if n not in cap.gpu_free:
                kept.append(n)
                continue
            ask = gpu_ask(pod, nodes[n])
            if ask.is_share:
                back = release.get(n, {})
                free = [f + back.get(d, (0, 0, 0))[0] for d, f in enumerate(cap.gpu_free[n])]
                mem, pods_on = cap.gpu_memory[n], cap.gpu_slots[n]
                memory = None if mem is None else [f + back.get(d, (0, 0, 0))[1] for d, f in enumerate(mem)]
                left = None if pods_on is None else [f + back.get(d, (0, 0, 0))[2] for d, f in enumerate(pods_on)]
                # pod slots once the movable pods left, none where its PodGroup's pods stay (spreading shares)
                room = gpushare.without(left, cap.spread_blocked(n, pod), len(free))
                slots = tuple((d, ask.milli, ask.memory_mib) for d in gpushare.usable(free, ask, memory, room))
                if not slots or not gpushare.fits(free, ask, memory, nodes[n].devices[0].model, room):
                    continue
                gc.slots[n] = slots
            elif ask.whole:
                gc.whole_devices = ask.whole
            kept.append(n)
        gc.nodes = kept


def _share_left(cap: Capacity, pod: Pod, node: str) -> int:
    """The milli-GPU a share would leave on the device the fit rule gives it on the node now (best fit); a node
    whose devices cannot take it ranks after every other (``MILLI_PER_GPU`` and more)."""
    free = cap.gpu_free.get(node)
    if free is None:
        return 2 * MILLI_PER_GPU
    devices = cap.nodes[node].devices
    ask = gpu_ask(pod, cap.nodes[node])
    chosen = gpushare.choose_devices(free, ask, cap.gpu_memory[node], devices[0].model,
                                     free_slots=cap.slots_for(node, pod), zero=cap.gpu_zero[node])
    if not chosen:
        return 2 * MILLI_PER_GPU
    return free[chosen[0]] - ask.milli if ask.is_share else MILLI_PER_GPU


def _device_receivers(problem: GoalProblem, classes: list[MoveClass], gang_classes: list[GangClass],
                      cap: Capacity) -> dict[str, DeviceRoom]:
    """At device level: each class's receivers cut to those whose devices can take one of its pods now (a share
    goes to a device, so only to a node that lists its GPUs; ``MoveClass.slots``, ``whole_devices``), and the
    devices of every node of the model that lists its GPUs."""
    nodes = problem.snapshot.nodes
    for k in classes:
        pod = k.pods[0]
        receivers, caps = [], []
        for r, c in zip(k.receivers, k.caps, strict=True):
            if r not in cap.gpu_free:
                if pod.gpu_share is None:  # whole cards by the totals
                    receivers.append(r)
                    caps.append(c)
                continue
            free, memory, pods_on = cap.gpu_free[r], cap.gpu_memory[r], cap.slots_for(r, pod)
            ask = gpu_ask(pod, nodes[r])
            if not gpushare.fits(free, ask, memory, nodes[r].devices[0].model, pods_on):
                continue
            if ask.is_share:
                k.slots[r] = tuple((d, ask.milli, ask.memory_mib) for d in gpushare.usable(free, ask, memory, pods_on))
                c = min(c, sum(min(free[d] // ask.milli, pods_on[d] if pods_on is not None else MILLI_PER_GPU)
                               for d, _, _ in k.slots[r]))
            else:
                k.whole_devices = ask.whole
            receivers.append(r)
            caps.append(c)
        k.receivers, k.caps = receivers, caps
    used = ({k.node for k in classes} | {r for k in classes for r in k.receivers}
            | {n for gc in gang_classes for n in gc.nodes})
    rooms = {}
    for n in sorted(used):
        if n in cap.gpu_free:
            free, memory, pods_on = cap.gpu_free[n], cap.gpu_memory[n], cap.gpu_slots[n]
            rooms[n] = DeviceRoom(tuple(free), None if memory is None else tuple(memory),
                                  tuple(gpushare.usable(free, GpuAsk(whole=1), memory, pods_on)),
                                  tuple(d.index for d in nodes[n].devices), None if pods_on is None else tuple(pods_on))
    return rooms


def _gang_classes(problem: GoalProblem, i: int, gang: Gang) -> list[GangClass]:
    buckets: dict[tuple[object, ...], list[GangPod]] = defaultdict(list)
    for gp in gang.pods:
        buckets[(tuple(sorted(gp.pod.requests.items())), constraint_signature(gp.pod),
                 share_signature(gp.pod))].append(gp)
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
        elif partitioned(g.job):
            causes[i] = (SEARCH, "the exact goal planners do not model partitionPolicy (the greedy places its "
                                 "partitions whole, each in one HyperNode)")
        elif (why := qs.admission_reason(g.queue)) is not None:
            causes[i] = (QUOTA, why)
        else:
            eligible.append(i)
    sources: set[str] | None = None
    if restrict:
        sources = _sources(problem, eligible, free0, hint)
    # at device level when shares move, or when a gang's pod asks a share on a cluster whose nodes list GPUs
    device_level = problem.repack.shares_move or (bool(cap.gpu_free) and any(
        gp.pod.gpu_share is not None for g in problem.gangs for gp in g.pods))
    classes = _classes(problem, sources, cap if device_level else None)
    whole_total = dict(cap.whole_total) if device_level else {}

    def r_room(n: str) -> int:
        """Free R on n by the totals (at device level the untouched devices are the device rows')."""
        return whole_total[n] if n in whole_total else free0[n].get(R, 0)
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
            if n in whole_total:
                rooms[n][R] = whole_total[n] + leaving.get(R, 0)
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
            room = sum(max(r_room(n) + movable_room.get(n, {}).get(R, 0), 0) for n in reg.nodes if n in free0)
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
    if device_level:
        _gang_devices(problem, gang_classes, classes, cap)
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
            if device_level and k.pods[0].key in rp.share_milli:  # a share: the device it fills most first
                free_r = np.array([_share_left(cap, k.pods[0], providers[i]) for i in idx], dtype=np.int64)
            late = np.array([providers[i] in sources for i in idx], dtype=bool)
            order = np.lexsort((idx, free_r, late))  # nodes that lose nothing first, then the best fit
            chosen = set(order[:KEEP_RECEIVERS].tolist()) | {j for j, i in enumerate(idx)
                                                             if providers[i] in must[k.key]}
            sel = np.array(sorted(chosen), dtype=np.int64)
            idx, fit = idx[sel], fit[sel]
        k.receivers = [providers[i] for i in idx.tolist()]
        k.caps = [min(int(f), k.count) for f in fit.tolist()]
    devices = _device_receivers(problem, classes, gang_classes, cap) if device_level else {}
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
    level_weight, merged = admission_weights([gangs[i].priority for i in eligible])
    data = Data(problem, classes, gang_classes, eligible, regions, free0, hyper, topo, topo_before, card_unit,
                integer_weights(problem.weights, card_unit), units, bool(restrict) or merged,
                {i: level_weight[gangs[i].priority] for i in eligible}, causes, devices,
                {n: whole_total[n] for n in devices})
    return data


def admission_weights(priorities: list[int]) -> tuple[dict[int, int], bool]:
    """Priority -> its stage-1 weight, one level outweighing every lower one together (weight = 1 + the most
    all lower levels can add); and whether the lowest levels had to be merged into one (weights counted
    alike) to keep the total within ``WEIGHT_LIMIT`` — then the model is lexicographic over the upper levels
    only and, like a restricted model, claims no optimum."""
    counts = {lv: priorities.count(lv) for lv in sorted(set(priorities))}
    levels = list(counts)
    for floor in range(len(levels)):  # merge levels[:floor + 1] into one until the weights fit
        weight: dict[int, int] = {}
        below = 0
        for j, lv in enumerate(levels):
            weight[lv] = 1 if j <= floor else below + 1
            below += weight[lv] * counts[lv]
        if below <= WEIGHT_LIMIT:
            return weight, floor > 0
    return {lv: 1 for lv in levels}, len(levels) > 1


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
        akey = (constraint_signature(k.pods[0]), share_signature(k.pods[0]), tuple(sorted(k.demand.items())), regions)
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
    request = problem.repack.request  # a moving GPU share: its milli-GPU
    movable_r = {n: sum(request(p) for p in ps) for n, ps in problem.movable.items()}

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


# ---- shared by the exact models (``cpsat`` and its MILP twin ``milp``) -----------------------------------------

def stage_seconds(data: Data, stage: int, now: float, end: float) -> float:
    """The seconds stage ``stage`` (0, 1, 2) may take from ``now`` until ``end``: its share of what is left
    over it and the stages after (``STAGE_SHARES``; none for the HyperNodes when there are none to free)."""
    shares = [STAGE_SHARES[0], STAGE_SHARES[1] if data.hyper else 0.0, STAGE_SHARES[2]]
    return (end - now) * shares[stage] / max(sum(shares[stage:]), 1e-9)


@dataclass
class Stage:
    """One stage's outcome: the value of its objective in the plan, its proven bound, proven or not."""

    value: int
    bound: int
    proven: bool


def fits_now(data: Data) -> GoalPlan:
    """A start when no hint is given: the gangs, highest priority first, placed without any move where they
    fit now (each pod on the node of its region left with the least R, quota and room counted), none
    admitted otherwise. Cheap, and often most of stage 1's optimum."""
    p = data.problem
    R = p.resource
    cap = p.capacity()
    qs = p.queue_state()
    out = []
    for i in data.eligible:
        g = p.gangs[i]
        if qs.fit_reason(g.queue, g.requests) is not None:
            continue
        for reg in data.regions[i]:
            trial = cap.copy()
            bindings = []
            for gp in g.pods:
                nodes = [n for n in sorted(reg.nodes) if n in trial.free and p.predicates.reason(gp.pod, n) is None
                         and trial.fits(gp.pod, n)]
                if not nodes:
                    break
                n = min(nodes, key=lambda n: (trial.free[n].get(R, 0), n))
                trial.add(gp.pod, n)
                bindings.append(Binding(task=gp.task, index=gp.index, node=n, pod=bound_pod(g.job, gp.task, gp.index)))
            if len(bindings) == len(g.pods):
                cap = trial
                qs.add(g.queue, g.requests)
                out.append(Admission(namespace=g.job.namespace, name=g.job.name, queue=g.queue, priority=g.priority,
                                     admitted=True, hyper_node=reg.hyper_node, tier=reg.tier,
                                     reason=f"fits without a move in {reg.label}",
                                     bindings=tuple(sorted(bindings, key=lambda b: (b.task, b.index)))))
                break
    return GoalPlan(admissions=tuple(out))


def build_plan(problem: GoalProblem, moves: list[PodMove], admitted: dict[int, Admission],
               causes: dict[int, tuple[str, str]], freed_hyper_nodes: list[str]) -> GoalPlan:
    """The GoalPlan: freed nodes are the occupied providers the moves leave without R; each move says why."""
    rp = problem.repack
    gone = {mv.pod for mv in moves}
    freed = [n for n in rp.occupied if all(q.key in gone for q in rp.r_pods[n])]
    lands: dict[str, set[str]] = defaultdict(set)
    for a in admitted.values():
        for b in a.bindings:
            lands[b.node].add(a.key)
    hyper_of = {n: h for h in sorted(freed_hyper_nodes, reverse=True) for n in problem.hyper_nodes.get(h, ())}
    why = {}
    for mv in moves:
        if mv.from_node in lands:
            why[mv.pod] = f"makes room for {', '.join(sorted(lands[mv.from_node]))} on {mv.from_node}"
        else:
            why[mv.pod] = f"frees HyperNode {hyper_of.get(mv.from_node, '?')}"
    admissions = list(admitted.values())
    for i, g in enumerate(problem.gangs):
        if i not in admitted:
            cause, reason = causes.get(i, (SEARCH, "no plan admitting it was found"))
            admissions.append(Admission(namespace=g.job.namespace, name=g.job.name, queue=g.queue,
                                        priority=g.priority, admitted=False, cause=cause, reason=reason))
    return GoalPlan.build(moves, freed, admissions, freed_hyper_nodes, why)


def plan_disruption(problem: GoalProblem, plan: GoalPlan) -> Disruption:
    """The plan's disruption by Repack's rules."""
    snap = problem.snapshot
    return problem.repack.disruption((snap.pods[m.pod] for m in plan.repack.moves),
                                     {m.pod: m.to_node for m in plan.repack.moves})


def fallback(problem: GoalProblem, data: Data, hint: GoalPlan | None, valid: Callable[[GoalPlan], bool]
             ) -> GoalPlan:
    """The plan when the model gave none: the hint when ``valid`` (the goal validator finds nothing), else the
    gangs that fit without a move (``fits_now``) when that is valid, else the plan that moves and admits
    nothing."""
    if hint is not None and valid(hint):
        return hint
    causes = {i: (SEARCH, "the exact planner found no plan") for i in data.eligible} | data.causes
    keys = {g.key: i for i, g in enumerate(problem.gangs)}
    now = {keys[a.key]: a for a in fits_now(data).admissions}
    plan = build_plan(problem, [], now, causes, [])
    return plan if valid(plan) else build_plan(problem, [], {}, causes, [])


def settle(stages: list[Stage], cost: int, exact_cost: bool, who: str) -> bool:
    """Stage 3 on the rules' integer cost of the plan (``cost``): the model's lower bounds on the disruption
    are tight only at its optimum, so a plan cut short may be cheaper than the model's objective says. The
    stage is proven when that cost meets the model's bound; a proven optimum above the cost would mean the
    model over-counts (then nothing is claimed). Replaces the last stage; returns whether the model's stage-3
    optimum is still the rules' cost."""
    s3 = stages[-1]
    if s3.proven and cost != s3.value:
        log.warning("goals %s: the model's disruption %s differs from the rules' %s: stage 3 not claimed",
                    who, s3.value, cost)
        exact_cost = False
    stages[-1] = Stage(cost, min(s3.bound, cost), cost <= s3.bound and exact_cost)
    return exact_cost


def goal_record(name: str, problem: GoalProblem, data: Data, stages: list[Stage], *, exact_cost: bool,
                infeasible_required: bool, wall: float) -> SolverRecord:
    """The record of an exact plan from its three stages: OPTIMAL only when every stage was proven on the
    whole model; INFEASIBLE when the required HyperNode count was proven out of reach; else FEASIBLE, with
    the bound of the first stage not proven. A restricted model's bounds hold for it only: the goals' own
    are given (every gang's weight, the HyperNode count) and no disruption bound."""
    s1, s2, s3 = stages
    proven = s1.proven and s2.proven and s3.proven and exact_cost and not data.restricted
    status = "INFEASIBLE" if infeasible_required else "OPTIMAL" if proven else "FEASIBLE"
    if data.restricted:
        most = sum(data.priority_weight.values())
        first = s1 if s1.value < most else Stage(s2.value, max(problem.free_count, s2.value), False)
        first = Stage(first.value, most, False) if first is s1 else first
        bound: int | None = None
    else:
        first, bound = (s1 if not s1.proven else s2), s3.bound
    return exact_record(name, status, freed=first.value, freed_bound=first.bound, objective=s3.value,
                        bound=bound, wall=wall)
