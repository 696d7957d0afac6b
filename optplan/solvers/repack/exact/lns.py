"""Large-neighbourhood search around a plan, for Repack models too large to solve whole.

Each step re-plans a neighbourhood N of candidate nodes exactly (CP-SAT, both phases, hinted with
the plan's part in N) with everything outside N fixed as the plan has it:

- N is one node the plan keeps (in turn, the cheapest to vacate first), a seeded sample of kept
  nodes its pods may go to and of kept nodes about as cheap to vacate, every vacated node that
  sends pods to one of those, and a seeded sample of the vacated nodes that send pods to other
  nodes its pods may go to (to rearrange their room);
- receivers outside N keep only the room the rest of the plan leaves them, nodes vacated outside N
  receive nothing, and no node in N receives pods from outside N (so vacating it strands nothing);
- each pod class in N may go to any node of N that admits it, and to the outside receivers that
  admit it with the least room left that still holds one of its pods (best fit).

Under maxPerRun every fourth step takes instead the nodes the budget relaxation's solution vacates
(``cpsat.budget_bound``) and every other step two PodGroups' nodes whole (one of the widest, in
turn, and one at random), each with the vacated nodes, so that the plan can trade the PodGroups it
spends its budget on. Budgets carry over: what the moves outside N use of maxPerRun (PodGroups they affect count once,
there) and of the PDBs is taken off the neighbourhood's (``rules.Spent``). The re-planned
part replaces the plan's when the whole plan then frees more nodes, or as many with a lower scaled
disruption, and breaks no rule (``plan_violations``); the neighbourhood's own costs may be off for
PodGroups that span N and the rest, which is why the whole plan is priced again.
"""

from __future__ import annotations

import logging
import random
import time
from collections import defaultdict
from dataclasses import dataclass, replace

import numpy as np

from optplan.models.repack import RepackPlan
from optplan.solvers.core.exact import better
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.core.oracle import NO_POD_LIMIT, Capacity
from optplan.solvers.repack.exact import cpsat
from optplan.solvers.repack.exact.model import ModelData, merge_plans, plan_part, plan_score, restrict
from optplan.solvers.repack.rules import Spent
from optplan.solvers.repack.validate import plan_violations

log = logging.getLogger(__name__)

KEPT = 12
"""Kept nodes per neighbourhood besides the one to vacate."""
SENDERS = 24
"""At most this many vacated nodes join a neighbourhood."""
OUTSIDE_RECEIVERS = 12
"""Receivers outside the neighbourhood per pod class (best fit)."""
RELAXED_EVERY = 4
"""Under budgets, every this many steps the neighbourhood is where the budget relaxation's solution
vacates nodes (``ModelData.relaxed``), with the vacated nodes."""
STALL_ROUNDS = 3
"""Stop after this many rounds over the kept nodes without an improvement."""
STEP_SECONDS = 1.0
"""Time limit of one step's two phases."""
MIN_LEFT = 0.2
"""No step starts with this little time left (seconds)."""
STEP_CHARGE = 0.05
"""Work charged per step besides CP-SAT's, in deterministic mode (the neighbourhood, its model's
data, pricing and validation: about this long on openb)."""


@dataclass
class LnsStats:
    steps: int = 0
    improved: int = 0
    rejected: int = 0  # improvements that broke a rule of the whole plan
    variables: int = 0  # of the largest neighbourhood's CP-SAT model
    constraints: int = 0


def improve(data: ModelData, plan: RepackPlan, options: PlanOptions, deadline: float) -> tuple[RepackPlan, LnsStats]:
    """The best plan found from ``plan`` until ``deadline`` (a time of ``options.clock``)."""
    problem = data.problem
    room = _Room(data)
    rng = random.Random(options.seed)
    stats = LnsStats()
    best = plan_score(data, plan)
    t0 = time.perf_counter()  # for the log lines
    clock = options.timer()
    options = replace(options, clock=clock)
    turn = idle = 0
    # Under maxPerRun, every other step takes two PodGroups' nodes whole (one of the widest first, in
    # turn, one at random) with the vacated nodes: the plan may then trade the PodGroups it spends the
    # budget on.
    gangs: list[str] = []
    if problem.budgets.per_run:
        gangs = sorted((g for g, by_node in data.group_moved_by.items() if len(by_node) > 1),
                       key=lambda g: (-len(data.group_moved_by[g]), g))
    load = {c: sum(k.cards * k.count for k in data.classes_of[c]) for c in data.candidates}
    freed, kept, senders_of = _layout(data, plan, load)
    while clock.left(deadline) > MIN_LEFT and not clock.capped():
        if not kept or idle > STALL_ROUNDS * len(kept):  # nothing left to try, or every node tried in vain
            break
        idle += 1
        if data.relaxed and turn % RELAXED_EVERY == 0:  # where the budget relaxation vacates nodes
            hood = _nodes_neighbourhood(data, list(data.relaxed), freed, senders_of, rng)
        elif gangs and turn % 2:
            hood = _nodes_neighbourhood(data, _group_nodes(data, [gangs[(turn // 2) % len(gangs)], rng.choice(gangs)]),
                                        freed, senders_of, rng)
        else:
            hood = _neighbourhood(data, kept[(turn + 1) // 2 % len(kept) if gangs else turn % len(kept)], kept,
                                  senders_of, rng)
        turn += 1
        if hood is None:
            continue
        sub = _sub_model(data, plan, hood, room)
        stats.steps += 1
        if sub is None:
            continue
        part = cpsat.new_part(sub, plan_part(plan, hood), plan)
        clock.charge(STEP_CHARGE)
        start = clock.now()
        step_end = min(deadline, start + STEP_SECONDS)
        cpsat.solve_freed(part, options, start + (step_end - start) / 2, t0, stats.steps)
        cpsat.solve_cost(part, options, step_end, t0, stats.steps)
        stats.variables, stats.constraints = max((stats.variables, stats.constraints), part.size)
        if part.refused:  # CP-SAT refused the neighbourhood's model (a bug, reported): the step is dropped
            stats.rejected += 1
            continue
        rest = frozenset(c for c in data.candidates if c not in hood)
        candidate = merge_plans([plan_part(plan, rest), part.plan])
        key = plan_score(data, candidate)
        if not better(key, best):
            continue
        broken = plan_violations(problem, candidate)
        if broken:  # the neighbourhood model missed a rule of the whole (never seen; kept as a guard)
            stats.rejected += 1
            log.warning("lns: a step broke a rule and was dropped: %s", broken[0])
            continue
        log.info("lns step %d: freed %d -> %d, cost %d -> %d", stats.steps, best.freed, key.freed, best.cost, key.cost)
        plan, best = candidate, key
        freed, kept, senders_of = _layout(data, plan, load)
        stats.improved += 1
        idle = 0
    return plan, stats


def _layout(data: ModelData, plan: RepackPlan,
            load: dict[str, int]) -> tuple[set[str], list[str], dict[str, set[str]]]:
    """A plan's vacated nodes, the nodes it keeps (least R first, then by name), and per receiver the
    vacated nodes that send it pods."""
    freed = set(plan.freed_nodes)
    kept = sorted((c for c in data.candidates if c not in freed), key=lambda c: (load[c], c))
    senders_of: dict[str, set[str]] = defaultdict(set)
    for m in plan.moves:
        senders_of[m.to_node].add(m.from_node)
    return freed, kept, senders_of


def _neighbourhood(data: ModelData, seed_node: str, kept: list[str], senders_of: dict[str, set[str]],
                   rng: random.Random) -> frozenset[str] | None:
    """The node to vacate, kept nodes its pods may go to, every vacated node sending to those, and
    vacated nodes sending to other nodes its pods may go to (their room may be rearranged)."""
    targets = sorted({data.all_receivers[u] for k in data.classes_of[seed_node] for u in data.admitted.get(k.key, ())})
    kept_set = set(kept)
    near = [r for r in targets if r in kept_set and r != seed_node]
    at = kept.index(seed_node)
    alike = [c for c in kept[max(at - KEPT, 0): at + KEPT + 1] if c != seed_node]  # about as cheap to vacate
    hood = {seed_node, *rng.sample(near, min(KEPT // 2, len(near)))}
    hood |= set(rng.sample(alike, min(KEPT - len(hood) + 1, len(alike))))
    senders = set(senders_of.get(seed_node, ()))
    if len(senders) > SENDERS:
        return None
    for c in sorted(hood - {seed_node}):
        more = senders_of.get(c, set()) - senders
        if len(senders) + len(more) > SENDERS:
            hood.discard(c)  # it would receive from outside the neighbourhood
        else:
            senders |= more
    optional = sorted({s for r in targets if r not in hood for s in senders_of.get(r, ())} - senders)
    senders |= set(rng.sample(optional, min(SENDERS - len(senders), len(optional))))
    return frozenset(hood | senders)


class _Room:
    """Free room of every occupied provider as a matrix (resource × node, milli-units: the oracle's
    ``room_matrix``, capped at ``NO_POD_LIMIT`` to stay within int64), and each pod's demand as a column.
    Only cells of resources a node has are read (a receiver admits a class only with room for it)."""

    def __init__(self, data: ModelData) -> None:
        cap = Capacity(data.problem.snapshot)
        self.nodes = data.all_receivers
        self.index = {r: i for i, r in enumerate(self.nodes)}
        self.limits = {r: {res: v for res, v in cap.free[r].items() if res != "pods" or cap.limits_pods(r)}
                       for r in self.nodes}
        self.res = sorted({res for k in data.classes for res in k.demand})
        self.row = {res: i for i, res in enumerate(self.res)}
        room = cap.room_matrix(self.nodes, self.res, exact=True)
        self.free = np.minimum(room, NO_POD_LIMIT).astype(np.int64).reshape(len(self.res), len(self.nodes))
        self.demand = {p.key: np.array([k.demand.get(res, 0) for res in self.res], dtype=np.int64)
                       for k in data.classes for p in k.pods}

    def after(self, moves: list[tuple[str, str]]) -> np.ndarray:
        """Free room once the (pod, receiver) moves are made."""
        free = self.free.copy()
        for pod, to in moves:
            free[:, self.index[to]] -= self.demand[pod]
        return free

    def limits_of(self, r: str, free: np.ndarray) -> dict[str, int]:
        """Node r's free room as the model reads it: only the resources the node limits."""
        i = self.index[r]
        return {res: int(free[self.row[res], i]) if res in self.row else v for res, v in self.limits[r].items()}


def _group_nodes(data: ModelData, groups: list[str]) -> list[str]:
    return sorted({c for g in groups for c in data.group_moved_by[g]})


def _nodes_neighbourhood(data: ModelData, nodes: list[str], freed: set[str], senders_of: dict[str, set[str]],
                         rng: random.Random) -> frozenset[str] | None:
    """Given candidate nodes (at most 2 × KEPT of them, sampled), the vacated nodes, and the vacated
    nodes that send to the kept ones among them (a kept node receiving from outside is left out)."""
    nodes = sorted(nodes)
    if len(nodes) > 2 * KEPT:
        nodes = sorted(rng.sample(nodes, 2 * KEPT))
    vacated = sorted(freed)
    hood = set(nodes) | set(vacated if len(vacated) <= SENDERS else rng.sample(vacated, SENDERS))
    for c in sorted(hood - freed):
        more = senders_of.get(c, set()) - hood
        if len(hood) + len(more) > 2 * KEPT + SENDERS:
            hood.discard(c)
        else:
            hood |= more
    return frozenset(hood) if hood - freed else None


def _sub_model(data: ModelData, plan: RepackPlan, hood: frozenset[str], room: _Room) -> ModelData | None:
    """The model of ``hood`` with the rest of ``plan`` fixed (see the module docstring)."""
    vacated_outside = {c for c in plan.freed_nodes if c not in hood}
    free = room.after([(m.pod, m.to_node) for m in plan.moves if m.from_node not in hood])
    blocked = np.zeros(len(room.nodes), dtype=bool)
    inside = np.zeros(len(room.nodes), dtype=bool)
    blocked[[room.index[c] for c in vacated_outside if c in room.index]] = True
    inside[[room.index[c] for c in hood if c in room.index]] = True
    hint_to: dict[str, set[str]] = defaultdict(set)  # pod -> receiver the plan uses, inside the hood
    for m in plan.moves:
        if m.from_node in hood:
            hint_to[m.pod].add(m.to_node)
    r_row = room.row[data.problem.resource]
    classes = []
    for k in (kk for c in sorted(hood) for kk in data.classes_of[c]):
        idx = data.admitted.get(k.key, np.zeros(0, dtype=np.int64))
        idx = idx[~blocked[idx]]
        near = idx[inside[idx]]
        out = idx[~inside[idx]]
        fits = np.ones(len(out), dtype=bool)
        for res, v in k.demand.items():
            if v > 0:
                fits &= free[room.row[res], out] >= v
        out = out[fits]
        out = out[np.lexsort((out, free[r_row, out]))][:OUTSIDE_RECEIVERS]  # best fit, then by name
        must = {r for p in k.pods for r in hint_to.get(p.key, ())}
        receivers = sorted({room.nodes[u] for u in near} | {room.nodes[u] for u in out} | must)
        classes.append(replace(k, receivers=receivers))
    if not classes:
        return None
    used = {r for k in classes for r in k.receivers}
    spent = Spent(frozenset(g for g, by_node in data.group_moved_by.items() if not vacated_outside.isdisjoint(by_node)),
                  {res: sum(n for c, n in use.items() if c in vacated_outside) for res, use in data.budget_use.items()},
                  {key: sum(n for c, n in use.items() if c in vacated_outside) for key, use in data.pdb_use.items()})
    base = replace(data, classes=classes, free={r: room.limits_of(r, free) for r in used}, spent=spent)
    return restrict(base, sorted(hood), min(len(hood), data.freed_upper - len(vacated_outside)))
