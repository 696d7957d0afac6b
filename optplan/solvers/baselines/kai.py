"""KAI-scheduler's consolidation as a peer of the goal planners (``../shared/SPEC.md``, Peers; KAI's
``actions/consolidation`` with its accumulated-scenario job solver), on the same plan rules as the others.

Per gang (``GoalProblem.gangs`` order), on the plan so far (``room.Room``):

- the gang placed without moves when it fits (KAI's allocate runs before consolidation);
- else, per region of the gang (lowest tier first) that could hold it emptied of the pods that may move
  (``room.could_hold``; none: BUDGET, as the greedy says): the victim units are the running PodGroups with
  movable pods on the region's nodes, sorted by the disruption of moving them (``GoalProblem.cost`` of
  Repack's disruption, then by key). Scenarios accumulate them, as KAI's scenario builder does: the k
  cheapest units, k = 1, 2, ... (victim sets of non-decreasing disruption). A scenario whose idle R plus
  its victims' R in the region is below the gang's is skipped unsimulated (KAI's idle-GPU filter). A
  simulated scenario evicts every victim, places the gang (gang order, best fit), then re-places every
  victim: back on its own node where it still fits, else by best fit on a node that loses no pod
  (the validator's rule); it is valid only if every victim is re-placed within maxPerRun and the PDBs.
  The first valid scenario is taken (KAI does not search for the cheapest).
- Bounded: at most ``MAX_SCENARIOS`` (200) simulated scenarios per gang, over all its regions, in that
  deterministic order; a gang not admitted within them is SEARCH (BUDGET when some scenario failed only
  on maxPerRun or a PDB).

The freeHyperNodes goal is not part of KAI's consolidation: the plan reports the goal's HyperNodes that
are free after it (up to ``free_count``) and moves nothing for them.
"""

from __future__ import annotations

from fractions import Fraction

from optplan.models.goals import BUDGET, SEARCH, Admission
from optplan.models.snapshot import Pod
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.core.planner import Planner
from optplan.solvers.goals.problem import Gang, GoalProblem, GoalResult
from optplan.solvers.goals.room import (
    Room,
    admitted,
    as_it_is,
    could_hold,
    free_hyper_nodes_now,
    pinned_why,
    place_without_moves,
    refused,
)
from optplan.solvers.placement.jobs import Region

MAX_SCENARIOS = 200
"""Simulated victim scenarios per gang (filtered ones are not counted)."""


class KaiPlanner(Planner[GoalProblem, GoalResult]):
    """KAI-style consolidation (module docstring)."""

    name = "kai"

    def plan(self, problem: GoalProblem, options: PlanOptions, hint: GoalResult | None = None) -> GoalResult:
        room = Room(problem)
        tried: dict[str, int] = {}
        admissions = [consolidate(room, g, tried) for g in problem.gangs]
        freed = free_hyper_nodes_now(room, problem.free_count) if problem.hyper_nodes else []
        stats = {"moves": len(room.moved), "admitted": sum(a.admitted for a in admissions),
                 "scenarios": sum(tried.values())}
        return room.result(self.name, admissions, freed, stats)


def consolidate(room: Room, gang: Gang, tried: dict[str, int]) -> Admission:
    decided = as_it_is(room, gang)
    if decided is not None:
        return decided
    tried[gang.key] = 0
    blocked = False
    R = room.R
    need = gang.card_request(R)
    regions = [r for r in gang.regions if could_hold(room, gang, r)]
    if not regions:
        return refused(gang, BUDGET, f"in every region it may use, pods that may not move ({pinned_why(room, gang)}) "
                                     "hold the room it needs")
    for region in regions:
        nodes = sorted(n for n in region.nodes if n not in room.forbidden)
        idle = sum(max(room.free_r(n), 0) for n in nodes)
        units = victim_units(room, nodes)
        victims: list[tuple[str, Pod]] = []
        for _cost, _key, pods in units:
            victims += pods
            if idle + sum(p.request(R) for _n, p in victims) < need:
                continue  # KAI's idle-GPU filter: not simulated
            if tried[gang.key] >= MAX_SCENARIOS:
                return refused(gang, BUDGET if blocked else SEARCH,
                               f"no valid consolidation within {MAX_SCENARIOS} victim scenarios")
            tried[gang.key] += 1
            before = len(room.moved)
            ok, hit = simulate(room, gang, region, victims)
            blocked |= hit
            if ok:
                room.charge(gang)
                return admitted(gang, region, room.forecast[gang.key],
                                f"lands in {region.label}: {len(victims)} victims evicted, "
                                f"{len(room.moved) - before} moved, the rest back in place")
    if blocked:
        return refused(gang, BUDGET, "every consolidation that re-places its victims moves more than maxPerRun "
                                     "or the PodDisruptionBudgets allow")
    return refused(gang, SEARCH, f"no victim set ({tried[gang.key]} tried) lets the gang and every victim be placed")


def victim_units(room: Room, nodes: list[str]) -> list[tuple[Fraction, str, list[tuple[str, Pod]]]]:
    """Running PodGroups with movable pods on ``nodes`` (not on a node that received pods: it may not lose
    any), as (disruption of moving them, PodGroup, [(node, pod)]), cheapest first."""
    by_group: dict[str, list[tuple[str, Pod]]] = {}
    for n in nodes:
        if room.is_receiver(n):
            continue
        for p in room.left_on(n):
            by_group.setdefault(p.group_key or p.key, []).append((n, p))
    gp = room.problem
    out = [(gp.cost(gp.repack.disruption([q for _n, q in pods])), g, pods) for g, pods in by_group.items()]
    return sorted(out, key=lambda u: (u[0], u[1]))


def simulate(room: Room, gang: Gang, region: Region, victims: list[tuple[str, Pod]]) -> tuple[bool, bool]:
    """Evict the victims, place the gang, re-place every victim (its own node first, else a node that loses
    no pod). Returns (valid, a budget or PDB refused it); an invalid scenario leaves the room as before."""
    mark = room.mark()
    R = room.R
    for n, pod in victims:
        room.lift(pod, n)
    if not place_without_moves(room, gang, region):
        room.undo(mark)
        return False, False
    order = sorted(victims, key=lambda v: (-v[1].request(R), v[1].key))
    away: list[tuple[str, Pod]] = []
    for n, pod in order:
        if room.cap.fits(pod, n):
            room.lift(pod, n, -1)
        else:
            away.append((n, pod))
    if away and room.budget_reason([p for _n, p in away]) is not None:
        room.undo(mark)
        return False, True
    sources = {n for n, _p in away}
    for n, pod in away:
        room.lift(pod, n, -1)  # back on its node, then moved off it (Room.move's accounting)
        dst = room.receiver_for(pod, n, sources)
        if dst is None:
            room.undo(mark)
            return False, False
        room.move(pod, n, dst, f"makes room for {gang.key} on {n}")
    return True, False
