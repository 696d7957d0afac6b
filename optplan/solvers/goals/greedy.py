"""The goal greedy (issue 15 §2 "Greedy"): the fallback and the baseline of the goal planners, fast enough
for the openb snapshots (1,213 nodes).

Gangs first, in ``GoalProblem.gangs`` order (priority, then Volcano's job order), each on the plan so far
(``room.Room``: the room after earlier moves and forecasts, queues, budgets, sources and receivers):

a. without moves: the first region (``Gang.regions``: lowest tier first) where every pod, in gang order,
   fits on the fullest node that has room (best fit);
b. else, per region that could hold the gang emptied of its movable pods (``room.could_hold``): the
   gang's pods, largest R first, each on the region node where it fits after moving the least R off that
   node (then fewer pods, then the fuller node, then by name); moving a node's pods means its smallest
   sufficient set of movable pods goes, by best fit, to nodes that lose no pods (outside the gang's chosen
   nodes where it can: their room left is the gang's), under the predicates, budgets, PDBs and hard
   topology (``Room.receiver_for``). The region whose
   moves cost least (``GoalProblem.cost``) wins, ties to the one searched first. Bounded for speed: the
   regions are searched least estimated R to move first, at most ``MAX_REGIONS`` of them, and a region
   whose cost floor (the R it lacks in total) cannot beat the best found is skipped;
c. else not admitted: BUDGET when only pods that may not move hold the room, or when the same search
   admits it with maxPerRun and the PDBs lifted; HIGHER_GOAL when it fits once the required HyperNodes
   are not kept free; else SEARCH.

Then the freeHyperNodes goal: the tier's HyperNodes free now count first; then the cheapest (fewest R
to move) freeable ones are vacated, every R pod moved to nodes outside any freed HyperNode, until
``free_count`` are free; what cannot be vacated is left (a required count not met is the caller's
RequiredNodeBlocksNotMet). With ``free_required`` the HyperNodes are chosen first, and no gang pod or
moved pod lands on them afterwards (the required count outranks the gangs).

Each rule is the goal validator's; the plan passes ``goal_violations`` by construction.
"""

from __future__ import annotations

import heapq
from fractions import Fraction

from optplan.models.goals import BUDGET, HIGHER_GOAL, SEARCH, Admission
from optplan.models.results import Disruption
from optplan.models.snapshot import Pod
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.core.planner import Planner
from optplan.solvers.goals.problem import Gang, GangPod, GoalProblem, GoalResult
from optplan.solvers.goals.room import (
    Room,
    admitted,
    as_it_is,
    could_hold,
    free_hyper_nodes_now,
    gang_units,
    opened,
    pinned_why,
    refused,
)
from optplan.solvers.placement.jobs import Region
from optplan.solvers.placement.partitions import partitioned

MAX_SUBSET_PODS = 10
"""A node's movable pods whose every subset is tried when making room on it (more: the largest ten)."""
SUBSETS_PER_NODE = 6
"""The cheapest sufficient subsets kept per node (the next is tried when one cannot be re-placed)."""
MAX_REGIONS = 16
"""Regions searched per gang with moves (step b), those needing the least R moved (estimated) first."""
KEPT_FREE = "it fits only on the HyperNodes the required freeHyperNodes goal keeps free"


class GreedyGoalPlanner(Planner[GoalProblem, GoalResult]):
    """Gangs by priority, each on the plan so far; then HyperNodes, cheapest first (module docstring)."""

    name = "greedy"

    def plan(self, problem: GoalProblem, options: PlanOptions, hint: GoalResult | None = None) -> GoalResult:
        room = Room(problem)
        freed: list[str] = []
        if problem.free_required:
            freed = free_hyper_nodes(room)
        admissions = [admit(room, g) for g in problem.gangs]
        if not problem.free_required:
            freed = free_hyper_nodes(room)
        stats = {"moves": len(room.moved), "admitted": sum(a.admitted for a in admissions)}
        return room.result(self.name, admissions, freed, stats)


# ---- one gang ----------------------------------------------------------------------------------------

def admit(room: Room, gang: Gang) -> Admission:
    """Admit the gang on the plan so far (a, b), or say why not (c)."""
    decided = as_it_is(room, gang)
    if decided is not None:
        return decided
    tried = ranked(room, gang, gang.regions)
    if not tried:
        if room.forbidden:
            with opened(room):
                if ranked(room, gang, gang.regions):
                    return refused(gang, HIGHER_GOAL, KEPT_FREE)
        return refused(gang, BUDGET, f"in every region it may use, pods that may not move ({pinned_why(room, gang)}) "
                                     "hold the room it needs")
    best: tuple[Fraction, int] | None = None
    blocked = False
    for i, region in enumerate(tried):
        if best is not None and best[0] <= cost_floor(room, gang, region):
            continue
        mark = room.mark()
        before = len(room.moved)
        ok, hit = make_room(room, gang, region)
        blocked |= hit
        if ok:
            trial = list(room.moved.values())[before:]
            cost = room.problem.cost(room.problem.repack.disruption(trial, {p.key: room.dest[p.key] for p in trial}))
            if best is None or cost < best[0]:
                best = (cost, i)
        room.undo(mark)
    if best is not None:
        region = tried[best[1]]
        before = len(room.moved)
        ok, _hit = make_room(room, gang, region)
        assert ok, "the greedy's search is deterministic"
        room.charge(gang)
        return admitted(gang, region, room.forecast[gang.key],
                        f"lands in {region.label} after {len(room.moved) - before} moves")
    return refused(gang, *why_not(room, gang, tried, blocked))


def ranked(room: Room, gang: Gang, regions: list[Region]) -> list[Region]:
    """The regions to search: those that could hold the gang emptied of the pods that may move
    (``could_hold``), least estimated R to move first (then in the gang's order), at most ``MAX_REGIONS``."""
    out: list[Region] = []
    for _s, _i, r in sorted((shortfall(room, gang, r), i, r) for i, r in enumerate(regions)):
        if len(out) == MAX_REGIONS:
            break
        if could_hold(room, gang, r):
            out.append(r)
    return out


def shortfall(room: Room, gang: Gang, region: Region) -> int:
    """An estimate of the R to move for the gang in the region (the order regions are tried in): each pod,
    largest first, on the region node that lacks least R for it."""
    free = {n: max(room.free_r(n), 0) for n in region.nodes if n not in room.forbidden}
    total = 0
    for gp in sorted(gang.pods, key=lambda g: -g.pod.request(room.R)):
        req = gp.pod.request(room.R)
        fit = [n for n in free if room.allows(gp.pod, n)]
        if not fit:
            return 1 << 62
        n = min(fit, key=lambda n: (max(req - free[n], 0), -free[n], n))
        total += max(req - free[n], 0)
        free[n] = max(free[n] - req, 0)
    return total


def cost_floor(room: Room, gang: Gang, region: Region) -> Fraction:
    """A lower bound on the cost of making room in the region (weights are never negative): the R the gang
    lacks there in total must move, in at least one pod of one PodGroup."""
    if any(w < 0 for w in room.problem.weights.as_tuple()):
        return Fraction(0)
    lack = gang.card_request(room.R) - sum(max(room.free_r(n), 0) for n in region.nodes if n not in room.forbidden)
    if lack <= 0:
        return Fraction(0)
    if room.problem.repack.shares_move:  # a share of 0.4 that leaves may free a whole card: lack is no floor
        lack = 0
    return room.problem.cost(Disruption(affected_pod_groups=1, moved_cards=lack, moved_pods=1))


def why_not(room: Room, gang: Gang, tried: list[Region], blocked: bool) -> tuple[str, str]:
    """The cause when no region admits the gang: re-tried with the budgets lifted (BUDGET), then with the
    required HyperNodes open (HIGHER_GOAL); else SEARCH."""
    if blocked and any(_admits(room, gang, r, budgets=False) for r in tried):
        return BUDGET, "room can be made only by moving more than maxPerRun or the PodDisruptionBudgets allow"
    if room.forbidden:
        with opened(room):
            if any(_admits(room, gang, r, budgets=True) for r in ranked(room, gang, gang.regions)):
                return HIGHER_GOAL, KEPT_FREE
    return SEARCH, f"the greedy found no moves that make room for it in {len(tried)} region(s)"


def _admits(room: Room, gang: Gang, region: Region, budgets: bool) -> bool:
    mark = room.mark()
    try:
        return make_room(room, gang, region, budgets=budgets)[0]
    finally:
        room.undo(mark)


def make_room(room: Room, gang: Gang, region: Region, budgets: bool = True) -> tuple[bool, bool]:
    """Place the gang in the region, moving pods as step b says. Returns (placed, a budget or PDB refused
    some move). On failure the room is as before."""
    mark = room.mark()
    chosen: set[str] = set()
    blocked = False
    R = room.R
    units = gang_units(room, gang, region)
    if not partitioned(gang.job):  # pod by pod, largest R first
        units = [([region], [gp]) for gp in sorted(gang.pods, key=lambda g: -g.pod.request(R))]
    for subs, pods in units:
        placed = False
        for sub in subs:  # a partition: the first of its HyperNodes that takes it whole
            unit_mark, before = room.mark(), set(chosen)
            for gp in sorted(pods, key=lambda g: -g.pod.request(R)):
                ok, hit = _place_one(room, gang, gp, sub, chosen, budgets)
                blocked |= hit
                if not ok:
                    break
            else:
                placed = True
                break
            room.undo(unit_mark)
            chosen.intersection_update(before)
        if not placed:
            room.undo(mark)
            return False, blocked
    return True, blocked


def _place_one(room: Room, gang: Gang, gp: GangPod, region: Region, chosen: set[str],
               budgets: bool) -> tuple[bool, bool]:
    """One gang pod on the region node that needs the least R moved off it (a lazy best-first search: a
    node enters with a lower bound, the R it lacks, and is expanded into its sufficient subsets when that
    bound comes first)."""
    pod = gp.pod
    R = room.R
    cap = room.cap
    request = room.problem.repack.request
    heap: list[tuple[int, int, int, str, tuple[str, ...]]] = []
    subsets: dict[tuple[str, tuple[str, ...]], list[Pod]] = {}
    for n in region.nodes:
        if n in room.forbidden or not room.allows(pod, n):
            continue
        free = room.free_r(n)
        if cap.fits(pod, n):
            heapq.heappush(heap, (0, 0, free - pod.request(R), n, ()))
        elif not room.is_receiver(n) and room.left_on(n):
            heapq.heappush(heap, (max(pod.request(R) - free, 0), -1, 0, n, ()))
    blocked = False
    while heap:
        _moved_r, count, _after, n, keys = heapq.heappop(heap)
        if count < 0:  # expand the node into its sufficient subsets
            for s in sufficient_subsets(room, pod, n):
                ks = tuple(p.key for p in s)
                subsets[n, ks] = s
                heapq.heappush(heap, (sum(request(p) for p in s), len(s),
                                      room.free_r(n) + sum(request(p) for p in s) - pod.request(R), n, ks))
            continue
        if count > 0:
            pods = subsets[n, keys]
            if budgets and room.budget_reason(pods) is not None:
                blocked = True
                continue
            if not room.relocate(pods, n, (), f"makes room for {gang.key} on {n}", avoid=chosen):
                continue
        room.place(gang, gp.task, gp.index, pod, n)
        chosen.add(n)
        return True, blocked
    return False, blocked


def sufficient_subsets(room: Room, pod: Pod, node: str) -> list[list[Pod]]:
    """The node's minimal sets of movable pods whose leaving makes room for ``pod`` (a set that suffices is
    not extended: every movable pod holds R, so a superset moves more), cheapest first (least R, fewest
    pods, then by keys), at most ``SUBSETS_PER_NODE``. On a node that lists its devices, while GPU shares
    move, a set suffices when the oracle fits the pod once it left (``device_room``): which devices leaving
    pods free is not a sum."""
    free = room.cap.free[node]
    devices = room.problem.repack.shares_move and node in room.cap.gpu_free
    need = [(r, v - free.get(r, 0)) for r, v in sorted(pod.requests.items())
            if v > 0 and free.get(r, 0) < v and not (devices and r == room.R)]
    cands = room.left_on(node)[:MAX_SUBSET_PODS]
    vec = [tuple(p.requests.get(r, 0) for r, _v in need) for p in cands]
    goal = tuple(v for _r, v in need)
    suffix = [tuple(0 for _ in need)] * (len(cands) + 1)
    for i in range(len(cands) - 1, -1, -1):
        suffix[i] = tuple(a + b for a, b in zip(vec[i], suffix[i + 1], strict=True))
    request = room.problem.repack.request
    found: list[tuple[int, int, tuple[str, ...], list[Pod]]] = []

    def walk(i: int, have: tuple[int, ...], chosen: list[Pod]) -> None:
        if (chosen and all(h >= g for h, g in zip(have, goal, strict=True))
                and (not devices or device_room(room, pod, node, chosen))):
            found.append((sum(request(p) for p in chosen), len(chosen), tuple(sorted(p.key for p in chosen)),
                          list(chosen)))
            return
        if i == len(cands) or any(h + s < g for h, s, g in zip(have, suffix[i], goal, strict=True)):
            return
        chosen.append(cands[i])
        walk(i + 1, tuple(a + b for a, b in zip(have, vec[i], strict=True)), chosen)
        chosen.pop()
        walk(i + 1, have, chosen)

    walk(0, tuple(0 for _ in need), [])
    found.sort(key=lambda f: f[:3])
    return [f[3] for f in found[:SUBSETS_PER_NODE]]


def device_room(room: Room, pod: Pod, node: str, leaving: list[Pod]) -> bool:
    """Whether ``pod`` fits on the node (the oracle's device-level fit) once ``leaving`` left it; the room is
    as before afterwards."""
    mark = room.mark()
    for p in leaving:
        room.lift(p, node)
    try:
        return room.cap.fits(pod, node)
    finally:
        room.undo(mark)


# ---- HyperNodes --------------------------------------------------------------------------------------

def free_hyper_nodes(room: Room) -> list[str]:
    """Free up to ``free_count`` of the goal's HyperNodes: those free now first (by name), then, one at a
    time, the cheapest to vacate on the plan so far (least R on it, then by name; one that cannot be
    vacated is passed over). Returns the freed ones; their nodes become forbidden."""
    p = room.problem
    if not p.free_count or not p.hyper_nodes:
        return []
    out = free_hyper_nodes_now(room, p.free_count)
    for h in out:
        room.forbid(p.hyper_nodes[h])
    failed: set[str] = set()
    while len(out) < p.free_count:
        costs = []
        for h in sorted(p.hyper_nodes):
            nodes = p.hyper_nodes[h]
            # every R pod on it may still move: none pinned, none moved there, no gang's pod forecast there
            if h in out or h in failed or any(len(room.left_on(n)) < room.r_count[n] for n in nodes):
                continue
            costs.append((sum(room.problem.repack.request(q) for n in nodes for q in room.left_on(n)), h))
        if not costs:
            break
        h = min(costs)[1]
        if vacate(room, h):
            out.append(h)
        else:
            failed.add(h)
    return out


def vacate(room: Room, h: str) -> bool:
    """Move every R pod off the HyperNode's nodes, to nodes outside any freed HyperNode; all or nothing."""
    mark = room.mark()
    nodes = room.problem.hyper_nodes[h]
    room.forbid(nodes)
    for n in sorted(nodes):
        pods = room.left_on(n)
        if pods and (room.budget_reason(pods) is not None or not room.relocate(pods, n, nodes, f"frees HyperNode {h}")):
            room.undo(mark)
            return False
    return True
