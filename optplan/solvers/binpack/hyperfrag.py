"""Per-tier HyperNode fragmentation of a resource R (issue 15 §3): for each tier, the HyperNodes that hold
R, how many are entirely free of R now (no pod on any of their nodes requests R), and the most that
compacting could free.

"Most freeable" is measured like the seed's theoretical minimum: R requests only, each pod whole on one
node, every R pod movable (other resources, predicates, scope and budgets are not looked at), so it is
what the R capacity allows — an upper limit on what a Repack could do, not a plan.

A greedy first frees the least loaded HyperNodes (free now first, then by R in use, then by name), as
many as a simple packing allows (each node, largest first, filled with the largest requests that fit),
found by bisection; when that meets the upper bound it is optimal. Else a small CP-SAT model over the
tier's HyperNodes decides (pods aggregated by request size: y[size, node] = how many pods of that size
the node holds; free[h] forbids any on h's nodes; maximise Σ free[h]), with a deterministic time limit,
hinted with the greedy's packing. When it is not proven, the report keeps two sound bounds: lower, the
best packing found (never less than the HyperNodes free now); upper, the least of CP-SAT's bound and the
capacity bound (the largest k such that the R requests fit in the providers outside the k HyperNodes of
least capacity; for HyperNodes of one tier that share nodes, their count).

A request larger than every provider's allocatable cannot move: it pins the HyperNodes of its node.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass

from ortools.sat.python import cp_model

from optplan.models.snapshot import Snapshot
from optplan.solvers.core.clock import Clock
from optplan.solvers.core.exact import proven_bound

log = logging.getLogger(__name__)

MAX_VARIABLES = 200_000
"""Larger models (sizes × providers) are not solved: the report keeps the bounds."""

OPTIMAL = "OPTIMAL"
FEASIBLE = "FEASIBLE"
BOUNDS = "BOUNDS"
"""Not solved (the model is too large, or R's requests exceed its capacity): bounds only."""


@dataclass(frozen=True)
class TierFrag:
    """One tier's HyperNodes that hold R."""

    tier: int
    hyper_nodes: tuple[str, ...]
    """HyperNodes of the tier enclosing at least one node that provides R, by name."""
    free_now: tuple[str, ...]
    """Those without any pod requesting R on their nodes, by name."""
    freeable_lower: int
    """Proven reachable: a packing freeing this many is known (``freeable`` names them)."""
    freeable_upper: int
    """Proven limit: no packing frees more."""
    capacity_upper: int
    """The capacity bound alone (see the module docstring)."""
    status: str
    """OPTIMAL (lower == upper, proven by CP-SAT or by the bounds) | FEASIBLE (time limit) | BOUNDS."""
    freeable: tuple[str, ...]
    """The HyperNodes of the best packing found, by name."""

    @property
    def proven(self) -> bool:
        return self.freeable_lower == self.freeable_upper


def tiers(snapshot: Snapshot) -> list[int]:
    return sorted({h.tier for h in snapshot.hyper_nodes.values()})


def hypernode_fragmentation(snapshot: Snapshot, resource: str, only: list[int] | None = None, *,
                            time_limit: float = 10.0, workers: int = 1) -> list[TierFrag]:
    """One ``TierFrag`` per tier (``only``: those tiers), lowest first. Each tier's model gets
    ``time_limit`` seconds of deterministic time (the same input gives the same report on any machine)."""
    topo = snapshot.topology
    caps = {n.name: n.allocatable[resource] for n in snapshot.providers(resource)}
    busy: set[str] = set()
    items: list[tuple[int, str]] = []  # (request, node) of every occupying pod requesting R
    for node, pods in sorted(snapshot.pods_by_node.items()):
        for p in pods:
            if p.request(resource) > 0:
                busy.add(node)
                items.append((p.request(resource), node))
    largest = max(caps.values(), default=0)
    pinned = {node for size, node in items if size > largest}
    movable = [(s, n) for s, n in items if s <= largest]
    out = []
    for tier in only if only is not None else tiers(snapshot):
        names = sorted(h for h, hn in snapshot.hyper_nodes.items()
                       if hn.tier == tier and any(n in caps for n in topo.members[h]))
        members = {h: sorted(n for n in topo.members[h] if n in caps) for h in names}
        free_now = tuple(h for h in names if not (topo.members[h] & busy))
        candidates = [h for h in names if not (topo.members[h] & pinned)]
        cap_ub = capacity_bound(candidates, members, caps, sum(s for s, _n in movable))
        cap_ub = max(cap_ub, len(free_now))
        out.append(_solve_tier(tier, names, members, candidates, free_now, cap_ub, caps, movable,
                               time_limit, workers))
    return out


def capacity_bound(candidates: list[str], members: dict[str, list[str]], caps: dict[str, int], demand: int) -> int:
    """The largest k such that ``demand`` fits in the capacity outside the k candidates of least capacity
    (when the candidates share no node; else their count)."""
    seen: set[str] = set()
    for h in candidates:
        if seen & set(members[h]):
            return len(candidates)
        seen |= set(members[h])
    room = sum(caps.values()) - demand
    k = 0
    for c in sorted(sum(caps[n] for n in members[h]) for h in candidates):
        if c > room:
            break
        room -= c
        k += 1
    return k


def _solve_tier(tier: int, names: list[str], members: dict[str, list[str]], candidates: list[str],
                free_now: tuple[str, ...], cap_ub: int, caps: dict[str, int], movable: list[tuple[int, str]],
                time_limit: float, workers: int) -> TierFrag:
    def result(lower: int, upper: int, status: str, freeable: tuple[str, ...]) -> TierFrag:
        return TierFrag(tier, tuple(names), free_now, lower, upper, cap_ub, status, freeable)

    if cap_ub <= len(free_now):  # doing nothing already reaches the bound
        return result(len(free_now), len(free_now), OPTIMAL, free_now)
    sizes = Counter(s for s, _n in movable)
    nodes = sorted(caps)
    if sum(s for s, _n in movable) > sum(caps.values()):
        return result(len(free_now), cap_ub, BOUNDS, free_now)
    # the heuristic: free the least loaded candidates first, as many as a greedy packing allows
    load = Counter({n: 0 for n in caps})
    for s, n in movable:
        load[n] += s
    order = sorted(candidates, key=lambda h: (h not in free_now, sum(load[n] for n in members[h]), h))
    k, packed = greedy_freeable(order, members, caps, sizes, len(free_now), cap_ub)
    if k > len(free_now):
        greedy_found = tuple(sorted(order[:k]))
    else:
        greedy_found, packed = free_now, None
    lower = len(greedy_found)
    if lower >= cap_ub:
        return result(lower, lower, OPTIMAL, greedy_found)
    if len(sizes) * len(nodes) > MAX_VARIABLES:
        return result(lower, cap_ub, BOUNDS, greedy_found)

    m = cp_model.CpModel()
    # y[size, node]: how many pods of that R request the node holds after compacting
    y = {(s, n): m.new_int_var(0, min(c, caps[n] // s), f"y[{s},{n}]")
         for s, c in sorted(sizes.items()) for n in nodes if caps[n] >= s}
    # free[h]: HyperNode h holds no R pod
    free = {h: m.new_bool_var(f"free[{h}]") for h in candidates}
    for s, c in sorted(sizes.items()):
        m.add(sum(y[s, n] for n in nodes if (s, n) in y) == c)
    for n in nodes:
        terms = [s * y[s, n] for s in sorted(sizes) if (s, n) in y]
        if terms:
            m.add(sum(terms) <= caps[n])
    for h in candidates:
        for n in members[h]:
            for s in sorted(sizes):
                if (s, n) in y:
                    m.add(y[s, n] == 0).only_enforce_if(free[h])
    m.add(sum(free.values()) <= cap_ub)
    m.add(sum(free.values()) >= lower)
    m.maximize(sum(free.values()))
    here = packed if packed is not None else Counter(movable)
    for (s, n), var in y.items():
        m.add_hint(var, here.get((s, n), 0))
    for h, var in free.items():
        m.add_hint(var, h in greedy_found)

    solver = cp_model.CpSolver()
    solver.parameters.num_workers = workers
    solver.parameters.random_seed = 0
    Clock(deterministic=True, limit=time_limit).configure(solver, time_limit)
    st = solver.solve(m)
    if st not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        log.info("hypernode frag tier %d: %s; bounds only", tier, solver.status_name(st))
        return result(len(free_now), cap_ub, BOUNDS, free_now)
    value = round(solver.objective_value)
    proven = proven_bound(solver, st, maximize=True)
    bound = cap_ub if proven is None else min(cap_ub, proven)
    found = tuple(h for h in candidates if solver.boolean_value(free[h]))
    if value < lower:  # never report less than the heuristic (or doing nothing)
        value, found = lower, greedy_found
    log.info("hypernode frag tier %d: %s, freeable %d, bound %d, %.3fs", tier, solver.status_name(st), value,
             bound, solver.wall_time)
    return result(value, max(bound, value), OPTIMAL if value >= bound else FEASIBLE, found)


def fill(caps: list[int], sizes: Counter[int]) -> list[Counter[int]] | None:
    """A greedy packing of the sizes into the bins (largest bin first, each filled with the largest sizes
    that fit): per bin, size -> count; None when some pod is left over."""
    left = Counter(sizes)
    out = []
    for c in caps:
        got: Counter[int] = Counter()
        for s in sorted(left, reverse=True):
            take = min(left[s], c // s)
            if take:
                got[s] = take
                left[s] -= take
                c -= take * s
        out.append(got)
    return out if not +left else None


def greedy_freeable(order: list[str], members: dict[str, list[str]], caps: dict[str, int], sizes: Counter[int],
                    lo: int, hi: int) -> tuple[int, Counter[tuple[int, str]] | None]:
    """The largest k in [lo, hi] such that ``fill`` packs every pod outside the first k HyperNodes of
    ``order`` (bisection: freeing more of the same order only removes bins), with the packing as
    (size, node) -> count; (lo, None) when even lo is not packed by ``fill``."""
    def packing(k: int) -> Counter[tuple[int, str]] | None:
        gone = {n for h in order[:k] for n in members[h]}
        kept = sorted((n for n in caps if n not in gone), key=lambda n: (-caps[n], n))
        bins = fill([caps[n] for n in kept], sizes)
        if bins is None:
            return None
        return Counter({(s, n): c for n, b in zip(kept, bins, strict=True) for s, c in b.items()})

    best, found = lo, packing(lo)
    if found is None:
        return lo, None
    hi = min(hi, len(order))
    while best < hi:
        mid = (best + hi + 1) // 2
        got = packing(mid)
        if got is None:
            hi = mid - 1
        else:
            best, found = mid, got
    return best, found
