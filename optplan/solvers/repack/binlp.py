"""LP lower bound and LP-guided packings for bin packing with heterogeneous bins (``min_bins``).

The bound is Gilmore and Gomory's: a bin is a *pattern* (how many items of each size it holds) in
a bin of one capacity type, and the LP relaxation of "cover every item with the fewest patterns,
at most ``k_t`` of type ``t``" is solved by column generation (HiGHS for the restricted master, a
bounded-knapsack dynamic programme for pricing).  Its value rounded up equals the optimum on most
instances (the "integer round-up property"), where the combinatorial bounds fall short.

Validity does not rest on the LP converging or on floating point: every pricing round gives a
Lagrangian bound ``L(y) = y.d + sum_t k_t min(0, 1 - max_a y.a)`` (``y >= 0`` the item duals,
``a`` over the patterns of type ``t``), a lower bound on the optimum for *any* ``y``.  The duals
are rounded down to integers over ``2**24``, the knapsack is solved exactly on those integers, and
``L`` (maximised along the ray ``lambda * y``: Farley's bound for identical bins) is evaluated in
exact rational arithmetic.  So a run stopped by its time budget still returns a valid bound.

The same master drives a primal heuristic, residual rounding ("diving"): fix the patterns the LP
uses at least once, re-solve the LP on what is left, and when nothing is at one, fix the largest
fractional pattern; what remains at the end is packed first-fit.  On instances with the round-up
property it usually reaches the bound.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from optplan.solvers.core.clock import Clock
from optplan.solvers.core.highs import quiet

__all__ = ["LpOutcome", "lp_bound_and_dive"]

_SCALE = 1 << 24  # duals are rounded down to multiples of 1 / _SCALE: exact integer pricing
_MAX_DP_CELLS = 20_000_000  # knapsack pieces x capacity allowed per pricing round (bytes of its table)
_EPS = 1e-9  # a column enters when its reduced cost is below -_EPS (a heuristic choice only)
_SMOOTH = 0.8  # Wentges smoothing: price at _SMOOTH * best duals + (1 - _SMOOTH) * LP duals
# Deterministic work charged to the clock (reference seconds, measured on the reference machine).
_SECONDS_PER_CELL = 1.5e-9
_SECONDS_PER_SIMPLEX_ITERATION = 2e-5
_SECONDS_PER_ROUND = 2e-4

Pattern = tuple[int, ...]  # count per size index


@dataclass
class LpOutcome:
    """What the LP found: a proven bound, and the best packing diving built (or None)."""

    bound: int
    lp_value: float | None = None  # the restricted master's value when column generation converged
    packing: list[tuple[int, Counter[int]]] | None = None  # (capacity, contents) per bin, or None
    rounds: int = 0
    stats: dict[str, Any] = field(default_factory=dict)


def lp_bound_and_dive(
    sizes: Counter[int],
    caps_desc: Sequence[int],
    *,
    target: int,
    time_limit: float,
    clock: Clock,
    dive: bool = True,
    start: Sequence[Counter[int]] = (),
    finish: Callable[[Counter[int], list[int]], list[Counter[int]] | None] | None = None,
) -> LpOutcome | None:
    """Gilmore-Gomory bound for packing ``sizes`` into bins of ``caps_desc`` (descending), and
    (``dive``) a packing by residual rounding when the bound stays below ``target`` (the best
    number of bins known).  ``start``: bins of a known packing, in the order of ``caps_desc``,
    used as the first columns.  ``finish`` packs what diving leaves (default: first fit).

    None when the knapsack tables would be too large (capacity x items) to price in reasonable
    time.  Stops early once the bound reaches ``target`` or cannot rise any more.
    """
    order = sorted(sizes, reverse=True)
    types = sorted(Counter(caps_desc).items(), reverse=True)
    pieces = sum(max(1, min(sizes[s], types[0][0] // s).bit_length()) for s in order)
    if pieces * (types[0][0] + 1) > _MAX_DP_CELLS:
        return None
    deadline = clock.now() + time_limit
    master = _Master(order, [c for c, _ in types], clock)
    demand = [sizes[s] for s in order]
    counts = [k for _, k in types]
    master.set_rhs(demand, counts)
    type_of = {c: t for t, (c, _) in enumerate(types)}
    for b, content in enumerate(start):
        master.add(type_of[caps_desc[b]], tuple(content[s] for s in order))

    best = _generate(master, demand, counts, target, deadline, clock)
    out = LpOutcome(bound=best.bound, lp_value=best.lp_value, rounds=best.rounds)
    out.stats["columns"] = len(master.columns)
    if dive and out.bound < target and not clock.over(deadline):
        out.packing = _dive(master, demand, counts, out.bound, target, deadline, clock, finish)
    return out


# --------------------------------------------------------------------------------------------
# Column generation


@dataclass
class _Generated:
    bound: int
    lp_value: float | None
    rounds: int


def _generate(
    master: _Master, demand: list[int], counts: list[int], target: int, deadline: float, clock: Clock
) -> _Generated:
    """Column generation on the master's current right-hand sides; returns the best bound seen."""
    best_l = Fraction(0)
    best_y: np.ndarray | None = None
    rounds = 0
    lp_value: float | None = None
    while True:
        z, y_lp, mu = master.solve()
        rounds += 1
        smooth = best_y is not None
        while True:
            y = _SMOOTH * best_y + (1 - _SMOOTH) * y_lp if smooth and best_y is not None else y_lp
            w = np.floor(np.maximum(y, 0.0) * _SCALE).astype(np.int64)
            values, patterns = _price(master.sizes, demand, w, master.caps, clock)
            bound_l = _lagrangian(w, demand, counts, values)
            if bound_l > best_l:
                best_l, best_y = bound_l, w.astype(np.float64) / _SCALE
            added = 0
            for t, a in enumerate(patterns):
                reduced = 1.0 - float(np.dot(y_lp, np.asarray(a, dtype=np.float64))) - mu[t]
                if reduced < -_EPS and master.add(t, a):
                    added += 1
            if added or not smooth:
                break
            smooth = False  # mispricing: price again at the LP's own duals
        bound = math.ceil(best_l)
        if bound >= target:
            break
        if not added:  # no improving column at the LP duals: the LP is solved
            lp_value = z
            break
        if bound >= math.ceil(z - 1e-7) or clock.over(deadline):
            break
    return _Generated(bound=math.ceil(best_l), lp_value=lp_value, rounds=rounds)


def _lagrangian(w: np.ndarray, demand: list[int], counts: list[int], values: list[int]) -> Fraction:
    """max over lambda >= 0 of L(lambda * w / S), exactly; ``values[t]`` is max_a w.a for type t.

    L is concave and piecewise linear in lambda with breaks at S / values[t]; its maximum is at a
    break (or at 0, where it is 0)."""
    wd = int(np.dot(w, np.asarray(demand, dtype=np.int64)))
    best = Fraction(0)
    for v_break in {v for v in values if v > 0}:
        lam = Fraction(_SCALE, v_break)
        total = lam * Fraction(wd, _SCALE)
        for k, v in zip(counts, values, strict=True):
            total += k * min(Fraction(0), 1 - lam * Fraction(v, _SCALE))
        best = max(best, total)
    return best


def _price(
    sizes: list[int], demand: list[int], w: np.ndarray, caps: list[int], clock: Clock
) -> tuple[list[int], list[Pattern]]:
    """Exact bounded knapsack: for each capacity, the best value ``w.a`` over patterns ``a`` with
    ``a_i <= demand_i`` that fit, and one such pattern.  Binary splitting of the counts, one numpy
    pass per piece over the largest capacity."""
    cmax = caps[0]
    pieces: list[tuple[int, int]] = []  # (size index, copies)
    for i, s in enumerate(sizes):
        if w[i] <= 0:
            continue
        m = min(demand[i], cmax // s)
        k = 1
        while m > 0:
            take = min(k, m)
            pieces.append((i, take))
            m -= take
            k *= 2
    dp = np.zeros(cmax + 1, dtype=np.int64)
    keep = np.zeros((len(pieces), cmax + 1), dtype=bool)
    for j, (i, k) in enumerate(pieces):
        weight = sizes[i] * k
        cand = dp[: cmax + 1 - weight] + int(w[i]) * k
        better = cand > dp[weight:]
        keep[j, weight:] = better
        dp[weight:] = np.where(better, cand, dp[weight:])
    clock.charge(len(pieces) * (cmax + 1) * _SECONDS_PER_CELL + _SECONDS_PER_ROUND)
    values: list[int] = []
    patterns: list[Pattern] = []
    for cap in caps:
        a = [0] * len(sizes)
        room = cap
        for j in range(len(pieces) - 1, -1, -1):
            if keep[j, room]:
                i, k = pieces[j]
                a[i] += k
                room -= sizes[i] * k
        values.append(int(dp[cap]))
        patterns.append(tuple(a))
    return values, patterns


# --------------------------------------------------------------------------------------------
# The restricted master


def _new_highs() -> Any:
    """A silent HiGHS (``core.highs.quiet``: its first construction prints a banner on the C-level stdout)."""
    import highspy

    with quiet():
        highs = highspy.Highs()
    highs.setOptionValue("output_flag", False)
    highs.setOptionValue("threads", 1)
    highs.setOptionValue("random_seed", 0)
    return highs


class _Master:
    """min sum x_p  s.t.  sum_p a_ip x_p >= d_i (item rows),  sum_{p of type t} x_p <= k_t (type
    rows),  x >= 0; plus one artificial column per item row (cost: more than any packing), so that
    every residual problem of the dive stays feasible, and free exchange columns (an item stands in
    for the next smaller size), which speed it up; they can lower the master's value at most to the
    LP without the demand bounds on patterns, and the bound (Lagrangian) does not rest on them."""

    def __init__(self, sizes: list[int], caps: list[int], clock: Clock) -> None:
        import highspy

        self.sizes = sizes
        self.caps = caps
        self.clock = clock
        self.columns: dict[tuple[int, Pattern], int] = {}
        self.col_keys: list[tuple[int, Pattern] | None] = []
        self.n_items = len(sizes)
        self.inf = highspy.kHighsInf
        self.highs = _new_highs()
        empty_i = np.array([], dtype=np.int32)
        empty_v = np.array([], dtype=np.float64)
        n_rows = len(sizes) + len(caps)
        lower = np.array([0.0] * len(sizes) + [-self.inf] * len(caps))
        upper = np.array([self.inf] * len(sizes) + [0.0] * len(caps))
        self.highs.addRows(n_rows, lower, upper, 0, empty_i, empty_i, empty_v)
        self.big = 1.0  # set by set_rhs

    def set_rhs(self, demand: list[int], counts: list[int]) -> None:
        n = self.n_items
        for i, d in enumerate(demand):
            self.highs.changeRowBounds(i, float(d), self.inf)
        for t, k in enumerate(counts):
            self.highs.changeRowBounds(n + t, -self.inf, float(k))
        if not self.col_keys:  # artificial columns, once
            self.big = float(sum(demand) + 1)
            for i in range(n):
                self.highs.addCol(self.big, 0.0, self.inf, 1, np.array([i], dtype=np.int32), np.array([1.0]))
                self.col_keys.append(None)
            # Dual-optimal inequalities (Ben Amor, Desrosiers and Valerio de Carvalho): an item may
            # stand in for a smaller one, so some good duals grow with the size; these free
            # exchange columns keep the duals so and halve the rounds of degenerate instances.
            for i in range(n - 1):
                rows = np.array([i, i + 1], dtype=np.int32)
                self.highs.addCol(0.0, 0.0, self.inf, 2, rows, np.array([-1.0, 1.0]))
                self.col_keys.append(None)

    def add(self, t: int, a: Pattern) -> bool:
        """Add pattern ``a`` in a bin of type ``t``; False if already there or empty."""
        key = (t, a)
        if key in self.columns or not any(a):
            return False
        rows = [i for i, c in enumerate(a) if c] + [self.n_items + t]
        vals = [float(a[i]) for i in rows[:-1]] + [1.0]
        self.highs.addCol(1.0, 0.0, self.inf, len(rows), np.array(rows, dtype=np.int32), np.array(vals))
        self.columns[key] = len(self.col_keys)
        self.col_keys.append(key)
        return True

    def solve(self) -> tuple[float, np.ndarray, list[float]]:
        """(objective, item duals, type duals) of the current master."""
        before = self.highs.getInfo().simplex_iteration_count
        self.highs.run()
        info = self.highs.getInfo()
        self.clock.charge(max(0, info.simplex_iteration_count - before) * _SECONDS_PER_SIMPLEX_ITERATION)
        sol = self.highs.getSolution()
        duals = np.asarray(sol.row_dual, dtype=np.float64)
        return float(info.objective_function_value), duals[: self.n_items], [float(v) for v in duals[self.n_items :]]

    def values(self) -> list[float]:
        return list(self.highs.getSolution().col_value)


# --------------------------------------------------------------------------------------------
# Diving


def _dive(
    master: _Master,
    demand: list[int],
    counts: list[int],
    bound: int,
    target: int,
    deadline: float,
    clock: Clock,
    finish: Callable[[Counter[int], list[int]], list[Counter[int]] | None] | None,
) -> list[tuple[int, Counter[int]]] | None:
    """Residual rounding: a packing (capacity, contents) per bin, or None if the dive fails."""
    sizes, caps = master.sizes, master.caps
    left = list(demand)
    kleft = list(counts)
    fixed: list[tuple[int, Counter[int]]] = []
    while any(left):
        if clock.over(deadline) or len(fixed) >= target:
            break
        x = master.values()
        chosen: list[tuple[int, Pattern, int]] = []
        for j, key in enumerate(master.col_keys):
            if key is not None and x[j] >= 1 - 1e-6:
                chosen.append((key[0], key[1], math.floor(x[j] + 1e-6)))
        if not chosen:
            frac = [(x[j], j) for j, key in enumerate(master.col_keys) if key is not None and x[j] > 1e-6]
            if not frac:
                break
            _, j = max(frac)
            key = master.col_keys[j]
            assert key is not None
            chosen = [(key[0], key[1], 1)]
        for t, a, times in sorted(chosen, key=lambda c: (-sum(s * n for s, n in zip(sizes, c[1], strict=True)), c)):
            for _ in range(times):
                if kleft[t] == 0 or not any(left):
                    break
                take = [min(n, r) for n, r in zip(a, left, strict=True)]
                if not any(take):
                    break
                left = [r - n for r, n in zip(left, take, strict=True)]
                kleft[t] -= 1
                fixed.append((caps[t], Counter({sizes[i]: n for i, n in enumerate(take) if n})))
        if not any(left):
            break
        master.set_rhs(left, kleft)
        if len(fixed) + _generate(master, left, kleft, target - len(fixed), deadline, clock).bound >= target:
            return None  # the rest needs too many bins: this dive cannot beat ``target``
    rest = Counter({sizes[i]: n for i, n in enumerate(left) if n})
    bins_left = sorted((c for c, k in zip(caps, kleft, strict=True) for _ in range(k)), reverse=True)
    if rest:
        finished = (finish or _first_fit)(rest, bins_left)
        if finished is None:
            return None
        fixed += [(bins_left[b], content) for b, content in enumerate(finished)]
    return fixed


def _first_fit(sizes: Counter[int], caps_desc: list[int]) -> list[Counter[int]] | None:
    rooms: list[int] = []
    packing: list[Counter[int]] = []
    for s in sorted(sizes.elements(), reverse=True):
        for b, room in enumerate(rooms):
            if room >= s:
                rooms[b] -= s
                packing[b][s] += 1
                break
        else:
            if len(rooms) == len(caps_desc) or caps_desc[len(rooms)] < s:
                return None
            rooms.append(caps_desc[len(rooms)] - s)
            packing.append(Counter({s: 1}))
    return packing
