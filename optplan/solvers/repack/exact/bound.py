"""The freed-node bound: at most how many nodes any Repack plan can free, from what a plan may not change
(issue 17 §2). ``freed_upper`` is what every planner reads as ``RepackProblem.freed_upper``: the least of
occupied − theoretical minimum, the budgets' count (``RepackProblem.budget_freed_upper``) and this
module's pool bound.

Why occupied − theoretical minimum is loose: the minimum repacks every R request onto any provider, idle
ones included, across pools, taints and selectors, and moves pods that cannot move. A plan (``checks``)
vacates candidates only; each R-requesting pod of a vacated node lands on an occupied provider that
admits it (static predicates, and room now on every resource it requests: a receiver's room only
shrinks) and that is not vacated; every other pod stays where it is. The pool bound follows that rule:

- Pools. Nodes are linked when some candidate's pod class may be on both (its admitted receivers and its
  own node). Pods never leave their connected pool, so each pool is bounded alone and the bounds add up.
- Forced open. A pool's occupied providers that are not candidates (``node_block``: out of
  ``scope.nodes``, a pod that cannot move; such a node still receives) and candidates with a pod that
  no receiver admits are never vacated.
- Vacate, aggregated. Pods are counted by R request (size). Live candidates alike — the same sizes held,
  the same free R, the same sizes that may land there (a size some admitted pod class has) — form a
  group, and the forced-open nodes alike another; per candidate group, an integer: how many of its nodes
  are vacated. The pods of the vacated nodes go to the free room of the nodes that stay: per group of
  them, within its free R (volume), at most ⌊free R / t⌋ pods of size ≥ t per node (for each size t, so
  an 8-card pod never fits two 4-card holes), and, per other requested resource, the least request of
  each size within the group's free room (a candidate group's largest per open node). Most vacated
  nodes, solved exactly in integers by CP-SAT; its proven bound is the pool's.

Every plan is a solution of this relaxation, so it bounds the whole model (never a restriction: the
receivers are all admitted ones, pruned or not). It drops which node of a group takes which pod, the
predicates beyond sizes, budgets, PDBs, gangs and topology, each only a relaxation.
"""

from __future__ import annotations

import logging
import math
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np
from ortools.sat.python import cp_model

from optplan.models.results import FragReport
from optplan.models.snapshot import Pod
from optplan.solvers.core.clock import WALL, Clock
from optplan.solvers.core.exact import proven_bound
from optplan.solvers.core.oracle import NO_POD_LIMIT, Capacity, Predicates, constraint_signature, pod_demand
from optplan.solvers.repack.rules import RepackProblem

log = logging.getLogger(__name__)

BOUND_SECONDS = 2.0
"""About this long at most for all pools' CP-SAT solves together, after building them (``run`` keeps it
within a tenth of the run's limit)."""
MIN_SECONDS = 0.1
"""Each pool's solve gets at least this long (at 10,000 nodes one takes about 0.04 s)."""
MAX_SUM = 2**50
"""Resource rows whose sums could reach this are left out (CP-SAT needs int64 sums; leaving a row out
only relaxes)."""


@dataclass(frozen=True)
class Group:
    """Nodes of one pool alike for the relaxation."""

    forced: bool
    """Forced open (True) or live candidates (False)."""
    count: int
    free: int
    """Free R per node, in the pool's size unit (rounded down: every load is a sum of sizes)."""
    sizes: tuple[int, ...]
    """Sizes (pool units) that may land on such a node, ascending."""
    held: tuple[tuple[int, int], ...] = ()
    """(size, pods) each of the group's candidates holds: what vacating one moves."""
    other: tuple[tuple[str, int], ...] = ()
    """Other resources: (name, free milli) — the group's total (forced open) or one node's largest
    (candidates); resources some node of the group does not limit are left out."""


@dataclass(frozen=True)
class PoolData:
    """One connected pool, as the relaxation reads it."""

    groups: tuple[Group, ...]
    least: tuple[tuple[int, tuple[tuple[str, int], ...]], ...]
    """Per size, the least request (milli) of the movable pods of that size on each other resource."""

    @property
    def candidates(self) -> int:
        return sum(g.count for g in self.groups if not g.forced)


@dataclass(frozen=True)
class Pool:
    """One connected pool and its bound."""

    candidates: int
    """Live candidates (every pod has some receiver)."""
    forced: int
    """Forced-open nodes with room for some pod."""
    bound: int
    """Most nodes a plan frees in the pool (proven)."""
    proven: bool
    """``bound`` is the relaxation's optimum, not only its bound when the limit cut the solve."""


@dataclass(frozen=True)
class PoolBound:
    """The pool bound of a problem: the sum of its pools' bounds."""

    pools: tuple[Pool, ...]

    @property
    def value(self) -> int:
        return sum(p.bound for p in self.pools)


def freed_upper(problem: RepackProblem, frag: FragReport, *, clock: Clock | None = None,
                limit: float = BOUND_SECONDS) -> int:
    """At most how many nodes a plan frees: the least of occupied − the theoretical minimum's lower bound,
    the budgets' count and the pool bound (each valid alone, so their least is). When GPU shares move
    (``RepackProblem.shares_move``), ``frag`` is the two-level measure and the pool bound, which sizes
    receivers' room in whole cards while a share fits in a device's free part, is left out."""
    old = min(frag.occupied - frag.theoretical_min, problem.budget_freed_upper())
    if old <= 0 or problem.shares_move:  # the pool bound counts R by whole cards: not a relaxation of shares
        return max(old, 0)
    return min(old, pool_bound(problem, clock=clock, limit=limit).value)


def pool_bound(problem: RepackProblem, *, clock: Clock | None = None, limit: float = BOUND_SECONDS) -> PoolBound:
    """The pool bound (see the module), the limit shared among the pools by size."""
    clock = clock or WALL
    start = clock.now()
    pools = pool_data(problem)
    end = clock.now() + limit
    weights = [len(p.groups) for p in pools]
    out = []
    for i, data in enumerate(pools):
        share = (end - clock.now()) * weights[i] / max(sum(weights[i:]), 1)
        most, proven = most_vacated(data, clock=clock, limit=max(share, MIN_SECONDS))
        out.append(Pool(candidates=data.candidates, forced=sum(g.count for g in data.groups if g.forced),
                        bound=most, proven=proven))
    bound = PoolBound(tuple(out))
    log.info("pool bound: %d over %d pools (%d proven) in %.2fs", bound.value, len(out),
             sum(p.proven for p in out), clock.now() - start)
    return bound


def pool_data(problem: RepackProblem) -> list[PoolData]:
    """The connected pools that hold a live candidate (see the module), by their first node's name."""
    occupied = list(problem.occupied)
    if not problem.candidates:
        return []
    index = {n: i for i, n in enumerate(occupied)}
    cap = Capacity(problem.snapshot)
    # The candidates' pods by (constraint signature, demand): one receiver set each.
    by_key: dict[tuple[Any, ...], list[Pod]] = defaultdict(list)
    for c in problem.candidates:
        for pod in problem.r_pods[c]:
            by_key[(constraint_signature(pod), tuple(sorted(pod_demand(pod).items())))].append(pod)
    res = sorted({r for key in by_key for r, _ in key[1]})
    huge = any(abs(cap.free[n].get(r, 0)) >= 2**62 for n in occupied for r in res)
    free_m = cap.room_matrix(occupied, res, exact=huge)
    predicates = Predicates(problem.snapshot)
    label = np.arange(len(occupied))
    sizes_at: dict[int, set[int]] = defaultdict(set)  # node -> sizes some admitted pod class has
    stuck: set[str] = set()
    for key, pods in sorted(by_key.items(), key=lambda kv: min(p.key for p in kv[1])):
        mask = predicates.mask(pods[0], occupied).copy()
        for r, v in key[1]:
            if v > 0:
                mask &= free_m[res.index(r)] >= v
        admitted = np.flatnonzero(mask)
        own = np.array(sorted({index[p.node_name or ""] for p in pods}), dtype=np.int64)
        for u in own.tolist():
            if not np.any(admitted != u):  # a pod of this class has no receiver: its node stays
                stuck.add(occupied[u])
        size = problem.request(pods[0])
        for u in admitted.tolist():
            sizes_at[u].add(size)
        linked = np.unique(label[np.concatenate([admitted, own])])
        if len(linked) > 1:
            label[np.isin(label, linked)] = linked[0]
    live = {c for c in problem.candidates if c not in stuck}
    members: dict[int, list[str]] = defaultdict(list)
    for u, n in enumerate(occupied):
        if n in live:
            sizes_at[u].update(problem.request(p) for p in problem.r_pods[n])
        members[int(label[u])].append(n)
    return [_pool(problem, cap, nodes, live, {n: sizes_at[index[n]] for n in nodes})
            for nodes in sorted(members.values()) if any(n in live for n in nodes)]


def _pool(problem: RepackProblem, cap: Capacity, nodes: list[str], live: set[str],
          sizes_at: dict[str, set[int]]) -> PoolData:
    """One pool's groups; R in units of the gcd of its movable pods' sizes."""
    R = problem.resource
    movable = [p for n in nodes if n in live for p in problem.r_pods[n]]
    unit = 0
    for p in movable:
        unit = math.gcd(unit, problem.request(p))
    unit = unit or 1
    others = sorted({r for p in movable for r in pod_demand(p) if r != R})
    least: dict[int, dict[str, int]] = {}
    for p in movable:
        d = pod_demand(p)
        mine = least.setdefault(problem.request(p) // unit, {r: d.get(r, 0) for r in others})
        for r in others:
            mine[r] = min(mine[r], d.get(r, 0))
    acc: dict[tuple[Any, ...], tuple[list[int], dict[str, int]]] = {}
    for n in nodes:
        forced = n not in live
        held = tuple(sorted(Counter(problem.request(p) // unit for p in problem.r_pods[n]).items())) \
            if not forced else ()
        free = max(cap.free[n].get(R, 0), 0) // unit
        sizes = tuple(sorted({s // unit for s in sizes_at[n] if s % unit == 0 and s // unit <= free}))
        if forced and not sizes:
            continue  # takes nothing
        other = {r: max(room, 0) for r in others if (room := cap.room(n, r)) < NO_POD_LIMIT}
        count, total = acc.setdefault((forced, free, sizes, held, tuple(other)), ([0], {}))
        count[0] += 1
        for r, v in other.items():
            total[r] = total.get(r, 0) + v if forced else max(total.get(r, 0), v)
    groups = tuple(Group(forced=forced, count=count[0], free=free, sizes=sizes, held=held,
                         other=tuple(sorted(total.items())))
                   for (forced, free, sizes, held, _), (count, total) in sorted(acc.items()))
    return PoolData(groups=groups, least=tuple((s, tuple(sorted(least[s].items()))) for s in sorted(least)))


def most_vacated(pool: PoolData, *, clock: Clock | None = None, limit: float = BOUND_SECONDS) -> tuple[int, bool]:
    """Most live candidates of the pool any plan vacates, proven on the relaxation (see the module):
    CP-SAT's bound, and whether it is the relaxation's optimum. Vacating nothing is a solution, so a
    bound always comes back."""
    clock = clock or WALL
    m = cp_model.CpModel()
    groups = pool.groups
    least = {s: dict(d) for s, d in pool.least}
    # vac[g]: vacated nodes of candidate group g; x[s, g]: pods of size s that group g receives.
    vac = {g: m.new_int_var(0, grp.count, f"vac[{g}]") for g, grp in enumerate(groups) if not grp.forced}
    moving: dict[int, list[tuple[int, int]]] = defaultdict(list)  # size -> (group, pods per vacated node)
    for g in vac:
        for s, k in groups[g].held:
            moving[s].append((g, k))
    most = {s: sum(groups[g].count * k for g, k in terms) for s, terms in moving.items()}  # pods that may move
    x: dict[tuple[int, int], Any] = {}
    for g, grp in enumerate(groups):
        for s in grp.sizes:
            if s in moving:
                x[s, g] = m.new_int_var(0, min(most[s], grp.count * (grp.free // s)), f"x[{s},{g}]")
    for s, terms in moving.items():  # every moved pod lands somewhere
        m.add(sum(x[s, g] for g in range(len(groups)) if (s, g) in x) == sum(k * vac[g] for g, k in terms))
    for g, grp in enumerate(groups):
        mine = [s for s in grp.sizes if (s, g) in x]
        if not mine:
            continue
        stay: Any = grp.count if grp.forced else grp.count - vac[g]  # nodes of the group that receive
        m.add(sum(s * x[s, g] for s in mine) <= grp.free * stay)
        for t in mine:  # at most ⌊free / t⌋ pods of size ≥ t per node
            m.add(sum(x[s, g] for s in mine if s >= t) <= (grp.free // t) * stay)
        for r, room in grp.other:  # the least request of each size within the room
            terms = [(s, least[s][r]) for s in mine if least[s].get(r, 0) > 0]
            unit = 0
            for _, d in terms:
                unit = math.gcd(unit, d)
            if not terms or max(sum(d // unit * most[s] for s, d in terms), room // unit * grp.count) >= MAX_SUM:
                continue
            m.add(sum((d // unit) * x[s, g] for s, d in terms) <= (room // unit) * stay)
    for v in [*vac.values(), *x.values()]:  # vacating nothing: a solution at once, so a bound comes back
        m.add_hint(v, 0)
    m.maximize(sum(vac.values()))
    solver = cp_model.CpSolver()
    clock.configure(solver, limit)
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = 0
    solver.parameters.linearization_level = 2
    st = solver.solve(m)
    clock.solved(solver, len(m.proto.variables))
    bound = proven_bound(solver, st, maximize=True)
    if bound is not None:
        return bound, st == cp_model.OPTIMAL
    # Vacating nothing is a solution: only a cut before any solution (or a bug) ends here.
    log.warning("pool bound: CP-SAT answered %s; the pool's candidates are the bound", solver.status_name(st))
    return sum(grp.count for grp in groups if not grp.forced), False
