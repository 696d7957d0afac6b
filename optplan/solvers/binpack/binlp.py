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

A packing into ``m`` bins wastes ``sum(caps[:m]) - total`` of their capacity in all, so no bin of
it wastes more: restricted to such patterns (priced by a knapsack over exact loads) the LP is one of
packings into at most ``m`` bins.  When its bound exceeds ``m``, ``m + 1`` bins are proven needed.

The restricted master drives the primal side, for a packing into the bound's number of bins: a
dive with backtracking (fix a column the LP uses, solve the residual LP again, cut off a node whose
bound rises above the bins left, try other columns on failure, restart), then, wall-clock limits
only, HiGHS's branch and bound over the columns generated ("price and branch").  On instances with
the round-up property whose bins must be almost full (BPPLIB's Hard28) this is what finds the
packings that first-fit, minimum bin slack and CP-SAT miss.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from optplan.solvers.binpack.binfill import split_counts
from optplan.solvers.core.clock import Clock
from optplan.solvers.core.highs import quiet

__all__ = ["GilmoreGomory", "LpOutcome", "lp_bound_and_dive"]

_SCALE = 1 << 24  # duals are rounded down to multiples of 1 / _SCALE: exact integer pricing
_MAX_DP_CELLS = 20_000_000  # knapsack pieces x capacity allowed per pricing round (bytes of its table)
_EPS = 1e-9  # a column enters when its reduced cost is below -_EPS (a heuristic choice only)
_SMOOTH = 0.8  # Wentges smoothing: price at _SMOOTH * best duals + (1 - _SMOOTH) * LP duals
# Deterministic work charged to the clock (reference seconds, measured on the reference machine).
_SECONDS_PER_CELL = 1.5e-9
_SECONDS_PER_SIMPLEX_ITERATION = 2e-5
_SECONDS_PER_ROUND = 2e-4
_EXTRA_PATTERNS = 24  # columns per type and pricing round besides the best, under a waste allowance
_UNREACHABLE = -(1 << 62)  # knapsack value of a load no pattern has
INFEASIBLE = 1 << 62  # the bound when not even the LP can cover the items
# The dive's restarts: (candidates tried at a node, backtracks after a deeper failure in all, levels
# from the root where they may happen); a candidate cut off by its own LP bound costs no backtrack.
_ATTEMPTS = ((16, 200, 20), (8, 20, 3), (4, 200, 20))
_FINISH_ITEMS = 30  # a dive's node with this few items left hands them to ``finish`` (when given)
_DIVE_SHARE = 0.7  # of the time left after the bound, for the dive; the integer master has the rest

Pattern = tuple[int, ...]  # count per size index
_Bins = list[tuple[int, Counter[int]]]  # (capacity, contents) per bin
Finish = Callable[[Counter[int], list[int]], list[Counter[int]] | None]  # packs a dive's last items


@dataclass
class LpOutcome:
    """What the LP found: a proven bound, and the best packing diving built (or None)."""

    bound: int
    lp_value: float | None = None  # the restricted master's value when column generation converged
    packing: _Bins | None = None  # (capacity, contents) per bin, or None
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
    finish: Finish | None = None,
) -> LpOutcome | None:
    """``GilmoreGomory.bound`` and then (``dive``, when the bound stays below ``target``)
    ``GilmoreGomory.pack`` at the bound, within ``time_limit`` in all; None when the knapsack
    tables would be too large to price (see ``GilmoreGomory.create``)."""
    lp = GilmoreGomory.create(sizes, caps_desc, clock, start=start)
    if lp is None:
        return None
    deadline = clock.now() + time_limit
    out = lp.bound(target, time_limit)
    if dive and out.bound < target and not clock.over(deadline):
        out.packing = lp.pack(out.bound, clock.left(deadline), finish)
    return out


class GilmoreGomory:
    """One instance's master problem, kept between its uses: ``bound`` (column generation), then
    ``pack`` (a packing into a number of bins: the dive, then the integer master), which starts
    from the columns the bound generated."""

    def __init__(self, sizes: Counter[int], caps_desc: Sequence[int], clock: Clock,
                 start: Sequence[Counter[int]] = ()) -> None:
        order = sorted(sizes, reverse=True)
        types = sorted(Counter(caps_desc).items(), reverse=True)
        self.caps_desc = list(caps_desc)
        self.clock = clock
        self.total = sum(s * n for s, n in sizes.items())
        self.master = _Master(order, [c for c, _ in types], clock)
        self.demand = [sizes[s] for s in order]
        self.counts = [k for _, k in types]
        self.master.set_rhs(self.demand, self.counts)
        type_of = {c: t for t, (c, _) in enumerate(types)}
        for b, content in enumerate(start):
            self.master.add(type_of[caps_desc[b]], tuple(content[s] for s in order))

    @classmethod
    def create(cls, sizes: Counter[int], caps_desc: Sequence[int], clock: Clock,
               start: Sequence[Counter[int]] = ()) -> GilmoreGomory | None:
        """The master for packing ``sizes`` into ``caps_desc`` (descending); ``start``: the bins of
        a known packing, in the order of ``caps_desc``, its first columns.  None when the knapsack
        tables (capacity x items) would be too large to price in reasonable time."""
        cmax = max(caps_desc)
        pieces = sum(max(1, min(n, cmax // s).bit_length()) for s, n in sizes.items())
        if pieces * (cmax + 1) > _MAX_DP_CELLS:
            return None
        return cls(sizes, caps_desc, clock, start)

    def bound(self, target: int, time_limit: float) -> LpOutcome:
        """The Gilmore-Gomory bound, raised by one bin at a time while the LP of the packings that
        waste no more than that many bins may (``_Master.restrict``) proves none exists; stops
        once it reaches ``target`` (the best number of bins known) or cannot rise any more."""
        master, clock = self.master, self.clock
        deadline = clock.now() + time_limit
        best = _generate(master, self.demand, self.counts, target, deadline, clock)
        out = LpOutcome(bound=best.bound, lp_value=best.lp_value, rounds=best.rounds)
        while out.bound < target and not clock.over(deadline):
            m = out.bound
            master.restrict(sum(self.caps_desc[:m]) - self.total)
            restricted = _generate(master, self.demand, self.counts, m + 1, deadline, clock)
            out.rounds += restricted.rounds
            if restricted.bound <= m:
                break
            out.bound = m + 1
            out.stats["waste_bound"] = out.bound
        master.restrict(None)
        out.stats["columns"] = len(master.columns)
        return out

    def duals(self, time_limit: float) -> dict[int, float] | None:
        """Item duals (size -> dual) of the LP solved as far as ``time_limit`` allows: column
        generation goes on past the rounded-up bound, to the LP's optimum, which is what arc fixing
        by reduced costs (``binflow``) needs; the duals of the best Lagrangian bound seen."""
        master, clock = self.master, self.clock
        master.set_rhs(self.demand, self.counts)
        master.restrict(None)
        best = _generate(master, self.demand, self.counts, INFEASIBLE, clock.now() + time_limit, clock, converge=True)
        if best.duals is None:
            return None
        return {s: float(y) for s, y in zip(master.sizes, best.duals, strict=True)}

    def pack(self, bins: int, time_limit: float, finish: Finish | None = None) -> _Bins | None:
        """A packing into ``bins`` bins (in practice the bound: a packing there is proven
        optimal, and its small waste allowance is what steers the search): ``_dive`` (with
        ``finish`` for its last few items; default first fit), then with wall-clock limits
        ``_pool``; None if neither finds one in ``time_limit``."""
        master, clock = self.master, self.clock
        deadline = clock.now() + time_limit
        allow = sum(self.caps_desc[:bins]) - self.total
        if allow < 0:
            return None
        dive_until = deadline if clock.deterministic else clock.now() + time_limit * _DIVE_SHARE
        packing = _dive(master, self.demand, self.counts, allow, bins + 1, dive_until, clock, finish)
        if packing is None and not clock.deterministic and not clock.over(deadline):
            packing = _pool(master, self.demand, self.counts, allow, bins + 1, deadline, clock)
        master.restrict(None)
        return packing


# --------------------------------------------------------------------------------------------
# Column generation


@dataclass
class _Generated:
    bound: int
    lp_value: float | None
    rounds: int
    duals: np.ndarray | None = None  # the item duals of the best bound (multiples of 1 / _SCALE)


def _generate(
    master: _Master,
    demand: list[int],
    counts: list[int],
    target: int,
    deadline: float,
    clock: Clock,
    *,
    converge: bool = False,
) -> _Generated:
    """Column generation on the master's current right-hand sides (and its waste allowance: see
    ``_Master.restrict``); returns the best bound seen.  Stops once the bound reaches ``target``
    or the LP's value rounded up (the bound can rise no more), unless ``converge``: then only when
    the LP is solved (the dive steers by its values)."""
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
            values, patterns, extra = _price(master.sizes, demand, w, master.caps, clock, master.allow)
            bound_l = _lagrangian(w, demand, counts, values)
            if bound_l > best_l:
                best_l, best_y = bound_l, w.astype(np.float64) / _SCALE
            added = 0
            for t, a in list(enumerate(patterns)) + extra:
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
        if (bound >= math.ceil(z - 1e-7) and not converge) or clock.over(deadline):
            break
    return _Generated(bound=math.ceil(best_l), lp_value=lp_value, rounds=rounds, duals=best_y)


def _lagrangian(w: np.ndarray, demand: list[int], counts: list[int], values: list[int]) -> Fraction:
    """max over lambda >= 0 of L(lambda * w / S), exactly; ``values[t]`` is max_a w.a for type t.

    L is concave and piecewise linear in lambda with breaks at S / values[t]; its maximum is at a
    break (or at 0, where it is 0), unless it still rises past the last break: then the bins
    cannot cover the items even fractionally (no pattern allowed takes enough) and the bound is
    ``INFEASIBLE``."""
    wd = int(np.dot(w, np.asarray(demand, dtype=np.int64)))
    if wd > sum(k * v for k, v in zip(counts, values, strict=True)):
        return Fraction(INFEASIBLE)
    best = Fraction(0)
    for v_break in {v for v in values if v > 0}:
        lam = Fraction(_SCALE, v_break)
        total = lam * Fraction(wd, _SCALE)
        for k, v in zip(counts, values, strict=True):
            total += k * min(Fraction(0), 1 - lam * Fraction(v, _SCALE))
        best = max(best, total)
    return best


def _price(
    sizes: list[int], demand: list[int], w: np.ndarray, caps: list[int], clock: Clock, allow: int | None = None
) -> tuple[list[int], list[Pattern], list[tuple[int, Pattern]]]:
    """Exact bounded knapsack: for each capacity, the best value ``w.a`` over patterns ``a`` with
    ``a_i <= demand_i`` that fit (and, with ``allow``, waste at most ``allow`` of the capacity),
    and one such pattern (all zeros, value 0, when none).  Binary splitting of the counts, one
    numpy pass per piece over the largest capacity; by exact load, so that a window of loads can
    be read.  With ``allow``, also (type, pattern) for the next best loads of the window, up to
    ``_EXTRA_PATTERNS`` per type: near-optimal columns that the dive may need."""
    cmax = caps[0]
    # a worthless item only helps reach a load
    priced = [i for i in range(len(sizes)) if w[i] > 0 or (w[i] == 0 and allow is not None)]
    index = {sizes[i]: i for i in priced}
    pieces = [(index[s], k) for s, k in split_counts(Counter({sizes[i]: demand[i] for i in priced}), cmax,
                                                     [sizes[i] for i in priced])]  # (size index, copies)
    dp = np.full(cmax + 1, _UNREACHABLE, dtype=np.int64)
    dp[0] = 0
    keep = np.zeros((len(pieces), cmax + 1), dtype=bool)
    for j, (i, k) in enumerate(pieces):
        weight = sizes[i] * k
        cand = dp[: cmax + 1 - weight] + int(w[i]) * k
        better = cand > dp[weight:]
        keep[j, weight:] = better
        dp[weight:] = np.where(better, cand, dp[weight:])
    clock.charge(len(pieces) * (cmax + 1) * _SECONDS_PER_CELL + _SECONDS_PER_ROUND)
    def read(room: int) -> Pattern:
        a = [0] * len(sizes)
        for j in range(len(pieces) - 1, -1, -1):
            if keep[j, room]:
                i, k = pieces[j]
                a[i] += k
                room -= sizes[i] * k
        return tuple(a)

    values: list[int] = []
    patterns: list[Pattern] = []
    extra: list[tuple[int, Pattern]] = []
    for t, cap in enumerate(caps):
        low = 0 if allow is None else max(0, cap - allow)
        window = dp[low : cap + 1] if low <= cap else dp[:0]
        room = low + int(np.argmax(window)) if len(window) else 0
        if not len(window) or dp[room] < 0:  # no pattern wastes little enough
            values.append(0)
            patterns.append((0,) * len(sizes))
            continue
        values.append(int(dp[room]))
        patterns.append(read(room))
        if allow is not None:
            order = np.argsort(-window, kind="stable")[1 : 1 + _EXTRA_PATTERNS]
            extra += [(t, read(low + int(r))) for r in order if window[r] >= 0]
    return values, patterns, extra


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
        self.waste: dict[tuple[int, Pattern], int] = {}  # per pattern: the capacity it leaves unused
        self.exchange_cols: list[int] = []
        self.allow: int | None = None
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
        rows = np.arange(n + len(counts), dtype=np.int32)
        lower = np.array([float(d) for d in demand] + [-self.inf] * len(counts))
        upper = np.array([self.inf] * n + [float(k) for k in counts])
        self.highs.changeRowsBounds(len(rows), rows, lower, upper)
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
                self.exchange_cols.append(len(self.col_keys))
                self.col_keys.append(None)

    def add(self, t: int, a: Pattern) -> bool:
        """Add pattern ``a`` in a bin of type ``t``; False if already there or empty."""
        key = (t, a)
        if key in self.columns or not any(a):
            return False
        rows = [i for i, c in enumerate(a) if c] + [self.n_items + t]
        vals = [float(a[i]) for i in rows[:-1]] + [1.0]
        waste = self.caps[t] - sum(s * n for s, n in zip(self.sizes, a, strict=True))
        upper = 0.0 if self.allow is not None and waste > self.allow else self.inf
        self.highs.addCol(1.0, 0.0, upper, len(rows), np.array(rows, dtype=np.int32), np.array(vals))
        self.columns[key] = len(self.col_keys)
        self.waste[key] = waste
        self.col_keys.append(key)
        return True

    def restrict(self, allow: int | None) -> None:
        """Allow only patterns that waste at most ``allow`` of their bin's capacity (None: all).

        A packing into ``m`` bins wastes ``sum(caps[:m]) - total`` at most in all, so no bin of it
        wastes more: with that allowance the LP (and the Lagrangian bound) is one of packings into
        at most ``m`` bins, stronger where capacity is tight.  The exchange columns are closed
        meanwhile: a larger item standing in a smaller one's place would waste the difference."""
        if allow == self.allow:
            return
        self.allow = allow
        cols = np.array([self.columns[key] for key in self.waste] + self.exchange_cols, dtype=np.int32)
        upper = [0.0 if allow is not None and waste > allow else self.inf for waste in self.waste.values()]
        upper += [self.inf if allow is None else 0.0] * len(self.exchange_cols)
        self.highs.changeColsBounds(len(cols), cols, np.zeros(len(cols)), np.array(upper))

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

    def artificial_used(self, x: list[float]) -> bool:
        """Whether the solution ``x`` covers an item by its artificial column (no packing then)."""
        return any(x[j] > 1e-6 for j in range(self.n_items))


# --------------------------------------------------------------------------------------------
# Diving


def _dive(
    master: _Master,
    demand: list[int],
    counts: list[int],
    allow: int,
    target: int,
    deadline: float,
    clock: Clock,
    finish: Finish | None,
) -> _Bins | None:
    """Residual rounding with backtracking (after Sadykov, Vanderbeck, Pessoa and others, "Primal
    heuristics for branch and price: the assets of diving methods", 2019): a packing (capacity,
    contents) per bin into fewer than ``target`` bins, or None.

    A node of the search holds the bins fixed so far and the items left.  It solves the residual
    LP by column generation, over the patterns that waste no more than the fixed bins left of the
    allowance ``allow`` (``_Master.restrict``); when that LP's bound (with the bins fixed) reaches
    ``target`` the node is a dead end (a cheap failure).  When the LP is integral its patterns
    finish the packing.  Otherwise a column is fixed: the one whose value is closest to the
    integer above it (fuller first; a column at 1 or more is fixed that many times), and the
    residual solved again.  Up to ``children`` candidates are tried at a node, the failed ones tabu
    below it; after a child whose search failed deeper down only while ``backtracks`` are left
    and within ``depth`` levels of the root.  The search is chaotic in these settings, so it
    restarts through ``_ATTEMPTS`` and then with random ties, the columns found kept, until a
    packing or the deadline."""
    search = _DiveSearch(master, allow, target, deadline, clock, finish)
    attempt = 0
    while not clock.over(deadline):
        children, backtracks, depth = _ATTEMPTS[attempt % len(_ATTEMPTS)]
        found = search.run(demand, counts, children, backtracks, depth, noisy=attempt >= len(_ATTEMPTS))
        if not isinstance(found, bool):
            return found
        if not found:  # the root itself is cut off: no packing into fewer than ``target`` bins
            return None
        attempt += 1
    return None


@dataclass
class _DiveSearch:
    master: _Master
    allow: int
    target: int
    deadline: float
    clock: Clock
    finish: Finish | None
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    children: int = 0
    backtracks: int = 0
    max_depth: int = 0
    noisy: bool = False

    def run(self, demand: list[int], counts: list[int], children: int, backtracks: int, max_depth: int,
            *, noisy: bool) -> _Bins | bool:
        self.children, self.backtracks, self.max_depth, self.noisy = children, backtracks, max_depth, noisy
        return self.node(list(demand), list(counts), [], frozenset(), 0)

    def node(self, left: list[int], kleft: list[int], fixed: _Bins, tabu: frozenset[tuple[int, Pattern]],
             depth: int) -> _Bins | bool:
        """The packing found below this node, or False if the node's own LP bound cut it off, True
        if the search below it failed."""
        master, clock, target = self.master, self.clock, self.target
        sizes, caps = master.sizes, master.caps
        if clock.over(self.deadline) or len(fixed) >= target:
            return True
        if not any(left):
            return fixed
        room = self.allow - sum(cap - sum(s * n for s, n in content.items()) for cap, content in fixed)
        if room < 0:  # the bins fixed waste more than a packing into fewer than ``target`` bins may
            return False
        master.set_rhs(left, kleft)
        master.restrict(room)
        if len(fixed) + _generate(master, left, kleft, target - len(fixed), self.deadline, clock,
                                  converge=True).bound >= target:
            return False
        if self.finish is not None and sum(left) <= _FINISH_ITEMS:  # few left: ``finish`` decides
            return _finish(sizes, caps, left, kleft, fixed, target, self.finish) or True
        x = master.values()
        used = [(key, x[j]) for j, key in enumerate(master.col_keys) if key is not None and x[j] > 1e-6]
        if all(abs(v - round(v)) <= 1e-6 for _, v in used) and not master.artificial_used(x):
            whole = _decode(sizes, caps, left, kleft, [(key, round(v)) for key, v in used])
            if whole is not None and len(fixed) + len(whole) < target:
                return fixed + whole
        cands = sorted(
            (round(math.ceil(v - 1e-6) - v, 1) if self.noisy else math.ceil(v - 1e-6) - v,
             self.rng.random() if self.noisy else 0.0,
             master.waste[key], key, v)
            for key, v in used if key not in tabu
        )
        if not cands:
            return _finish(sizes, caps, left, kleft, fixed, target, self.finish) or True
        tried: list[tuple[int, Pattern]] = []
        for *_, key, v in cands[: self.children]:
            t, a = key
            child_left, child_k, child_fixed = list(left), list(kleft), list(fixed)
            for _ in range(max(1, math.floor(v + 1e-6))):
                take = [min(n, r) for n, r in zip(a, child_left, strict=True)]
                if child_k[t] == 0 or not any(take):
                    break
                child_left = [r - n for r, n in zip(child_left, take, strict=True)]
                child_k[t] -= 1
                child_fixed.append((caps[t], Counter({sizes[i]: n for i, n in enumerate(take) if n})))
            if len(child_fixed) == len(fixed):  # the column holds none of the items left
                continue
            found = self.node(child_left, child_k, child_fixed, tabu | frozenset(tried), depth + 1)
            if not isinstance(found, bool):
                return found
            tried.append(key)
            if found:  # the search below failed: another candidate only while backtracks are left
                if self.backtracks <= 0 or depth >= self.max_depth:
                    return True
                self.backtracks -= 1
        return True


def _pool(
    master: _Master, demand: list[int], counts: list[int], allow: int, target: int, deadline: float, clock: Clock
) -> _Bins | None:
    """The integer master over the columns generated so far (those within the waste allowance):
    the fewest of them that cover the items, fewer than ``target``, by HiGHS's branch and bound
    ("price and branch").  Wall-clock limited (HiGHS has no deterministic limit): not run under
    deterministic limits."""
    import highspy

    keys = [key for key, waste in master.waste.items() if waste <= allow]
    if not keys:
        return None
    highs = _new_highs()
    highs.setOptionValue("time_limit", max(0.01, clock.left(deadline)))
    inf = highspy.kHighsInf
    n = master.n_items
    empty_i = np.array([], dtype=np.int32)
    lower = [float(d) for d in demand] + [-inf] * len(counts) + [-inf]
    upper = [inf] * n + [float(k) for k in counts] + [float(target - 1)]
    highs.addRows(len(lower), np.array(lower), np.array(upper), 0, empty_i, empty_i, np.array([]))
    for t, a in keys:
        rows = [i for i, c in enumerate(a) if c] + [n + t, n + len(counts)]
        vals = [float(a[i]) for i in rows[:-2]] + [1.0, 1.0]
        highs.addCol(1.0, 0.0, inf, len(rows), np.array(rows, dtype=np.int32), np.array(vals))
    highs.changeColsIntegrality(len(keys), np.arange(len(keys), dtype=np.int32),
                                np.array([highspy.HighsVarType.kInteger] * len(keys)))
    start = clock.now()
    highs.run()
    clock.charge(clock.now() - start)
    if highs.getInfo().primal_solution_status != int(highspy.SolutionStatus.kSolutionStatusFeasible):
        return None
    x = highs.getSolution().col_value
    chosen = [(key, round(x[c])) for c, key in enumerate(keys) if round(x[c]) > 0]
    whole = _decode(master.sizes, master.caps, demand, counts, chosen)
    return whole if whole is not None and len(whole) < target else None


def _decode(
    sizes: list[int], caps: list[int], left: list[int], kleft: list[int],
    patterns: list[tuple[tuple[int, Pattern], int]],
) -> _Bins | None:
    """The bins of an integral LP solution holding exactly the items ``left``: every slot of a
    pattern holds an item no larger than the slot's size (an exchange column lets a larger item's
    slot take a smaller one), matched largest item to largest slot; None if the patterns do not
    cover the items that way or use more bins of a type than are left."""
    per_type: Counter[int] = Counter()
    bins: list[tuple[int, list[int]]] = []
    for (t, a), times in patterns:
        per_type[t] += times
        for _ in range(times):
            bins.append((t, [i for i, n in enumerate(a) for _ in range(n)]))
    if any(per_type[t] > kleft[t] for t in per_type):
        return None
    slots = sorted(((sizes[i], b) for b, (_, idx) in enumerate(bins) for i in idx), reverse=True)
    items = sorted((s for s, n in zip(sizes, left, strict=True) for _ in range(n)), reverse=True)
    if len(items) > len(slots):
        return None
    contents: list[Counter[int]] = [Counter() for _ in bins]
    for item, (slot, b) in zip(items, slots, strict=False):
        if item > slot:
            return None
        contents[b][item] += 1
    return [(caps[t], content) for (t, _), content in zip(bins, contents, strict=True) if content]


def _finish(
    sizes: list[int],
    caps: list[int],
    left: list[int],
    kleft: list[int],
    fixed: _Bins,
    target: int,
    finish: Finish | None,
) -> _Bins | None:
    """``fixed`` and the items ``left`` packed by ``finish`` (first fit by default) into the bins
    left, if that makes fewer than ``target`` bins."""
    rest = Counter({sizes[i]: n for i, n in enumerate(left) if n})
    bins_left = sorted((c for c, k in zip(caps, kleft, strict=True) for _ in range(k)), reverse=True)
    bins_left = bins_left[: max(0, target - 1 - len(fixed))]
    finished = (finish or _first_fit)(rest, bins_left) if rest else []
    if finished is None or len(fixed) + len(finished) >= target:
        return None
    return fixed + [(bins_left[b], content) for b, content in enumerate(finished)]


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
