"""Exact minimum number of bins for items of integer size and bins of heterogeneous capacity.

Used for the fragmentation metric "least number of nodes that can hold every pod's request, each
pod whole on one node".  Every bin may be used once; the objective is the number of bins used.

Because only the *count* of bins matters, some optimal packing always uses the ``k`` largest bins
(swap a used bin for an unused bigger one and its contents still fit).  The solver therefore
works on the capacities sorted in descending order and looks for the shortest feasible prefix.

Pipeline: validation -> lower bounds -> first-fit / best-fit decreasing upper bounds -> CP-SAT
only when the bounds do not meet.
"""

from __future__ import annotations

import logging
import math
import operator
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from ortools.sat.python import cp_model

__all__ = ["BinPackingResult", "lower_bound", "min_bins"]

logger = logging.getLogger(__name__)

# A packing: for every bin used (a prefix of the capacities sorted descending), size -> count.
_Packing = list[dict[int, int]]


@dataclass(frozen=True)
class BinPackingResult:
    """Outcome of :func:`min_bins`."""

    value: int  # best known number of bins (from a feasible packing)
    lower_bound: int  # best proven lower bound
    proven: bool  # value == lower_bound


def min_bins(
    items: Sequence[int],
    capacities: Sequence[int],
    *,
    time_limit: float = 10.0,
    workers: int = 1,
    seed: int = 0,
) -> BinPackingResult:
    """Least number of bins (chosen among ``capacities``, one entry per available bin, each usable
    once) that hold every item whole.

    Items of size 0 and bins of capacity 0 are ignored.  Raises ``ValueError`` on negative or
    non-integer input, when some item fits no bin, or when no packing of all items exists.
    Raises ``TimeoutError`` in the rare case where the heuristics found no packing and CP-SAT could
    neither find one nor prove there is none within ``time_limit``.
    """
    start = time.monotonic()
    sizes = _count_items(items)
    caps = _sorted_capacities(capacities)
    if not sizes:
        return BinPackingResult(0, 0, True)
    if not caps:
        raise ValueError(f"infeasible: {sum(sizes.values())} item(s) but no bin of positive capacity")
    largest_item = max(sizes)
    if largest_item > caps[0]:
        raise ValueError(
            f"infeasible: an item of size {largest_item} fits no bin (largest capacity {caps[0]})"
        )
    total = sum(s * c for s, c in sizes.items())
    if total > sum(caps):
        raise ValueError(f"infeasible: total item size {total} exceeds total capacity {sum(caps)}")

    lb = lower_bound(sizes, caps)
    if lb > len(caps):
        raise ValueError(f"infeasible: at least {lb} bins are needed but only {len(caps)} exist")

    best: _Packing | None = None
    for heuristic in (_first_fit_decreasing, _best_fit_decreasing):
        packing = heuristic(sizes, caps)
        if packing is not None and (best is None or len(packing) < len(best)):
            best = packing
    if best is not None and len(best) == lb:
        return BinPackingResult(lb, lb, True)

    remaining = max(0.0, time_limit - (time.monotonic() - start))
    return _solve_cp_sat(sizes, caps, lb, best, time_limit=remaining, workers=workers, seed=seed)


# --------------------------------------------------------------------------------------------
# Input handling


def _count_items(items: Sequence[int]) -> Counter[int]:
    sizes: Counter[int] = Counter()
    for x in items:
        size = _as_int(x, "item size")
        if size > 0:
            sizes[size] += 1
    return sizes


def _sorted_capacities(capacities: Sequence[int]) -> list[int]:
    caps = [_as_int(c, "capacity") for c in capacities]
    return sorted((c for c in caps if c > 0), reverse=True)


def _as_int(x: object, what: str) -> int:
    """``x`` as a non-negative int; integer-like values (numpy ints) pass, floats and bools do not."""
    if isinstance(x, bool):
        raise ValueError(f"{what} must be an int, got {x!r}")
    try:
        value = operator.index(x)  # type: ignore[call-overload]
    except TypeError:
        raise ValueError(f"{what} must be an int, got {x!r}") from None
    if value < 0:
        raise ValueError(f"{what} must be >= 0, got {value}")
    return value


# --------------------------------------------------------------------------------------------
# Lower bounds


def lower_bound(sizes: Counter[int], caps_desc: Sequence[int]) -> int:
    """Best of the cheap lower bounds on the number of bins.

    ``sizes`` maps item size -> count (positive sizes); ``caps_desc`` are the capacities sorted
    descending.  All bounds are valid for heterogeneous capacities:

    * generalised L1 / dual-feasible-function bound: for the Martello-Toth function ``u_K``
      (relative to the largest capacity ``C``), the fewest largest bins whose ``u_K(capacity)``
      sum reaches the ``u_K`` sum of the items (``K = 0`` is the plain L1: fewest largest bins
      whose capacities reach the total size);
    * Martello-Toth L2 on the relaxation where every bin has capacity ``C`` (for identical
      bins this is exactly L2);
    * items larger than ``C / 2`` pairwise conflict, so each needs its own bin.
    """
    if not sizes:
        return 0
    cmax = caps_desc[0]
    ordered = sorted(sizes.items())
    ks = [0, *sorted({s for s, _ in ordered if 2 * s <= cmax})]
    best = sum(c for s, c in ordered if 2 * s > cmax)
    for k in ks:
        best = max(best, _dff_bound(ordered, caps_desc, cmax, k), _mt_l2(ordered, cmax, k))
    return best


def _u(x: int, cmax: int, k: int) -> int:
    """Martello-Toth dual feasible function ``u_K`` (scaled to ``cmax``, superadditive)."""
    if x > cmax - k:
        return cmax
    if x < k:
        return 0
    return x


def _dff_bound(ordered: list[tuple[int, int]], caps_desc: Sequence[int], cmax: int, k: int) -> int:
    need = sum(c * _u(s, cmax, k) for s, c in ordered)
    acc = 0
    for i, cap in enumerate(caps_desc):
        if acc >= need:
            return i
        acc += _u(cap, cmax, k)
    return len(caps_desc) if acc >= need else len(caps_desc) + 1


def _mt_l2(ordered: list[tuple[int, int]], cap: int, k: int) -> int:
    """Martello-Toth L2 for capacity ``cap`` and parameter ``k`` (0 <= k <= cap / 2)."""
    n1 = n2 = sum2 = sum3 = 0
    for s, c in ordered:
        if s > cap - k:
            n1 += c
        elif 2 * s > cap:
            n2 += c
            sum2 += s * c
        elif s >= k:
            sum3 += s * c
    free = n2 * cap - sum2
    extra = max(0, -(-(sum3 - free) // cap))
    return n1 + n2 + extra


# --------------------------------------------------------------------------------------------
# Upper bounds (heuristics); both open bins in descending capacity order.


def _first_fit_decreasing(sizes: Counter[int], caps_desc: Sequence[int]) -> _Packing | None:
    rooms: list[int] = []
    packing: _Packing = []
    for size in sorted(sizes, reverse=True):
        left = sizes[size]
        # A run of equal items fills each bin (in order) as much as possible: same as item-wise FFD.
        for b, room in enumerate(rooms):
            if room >= size:
                put = min(left, room // size)
                rooms[b] -= put * size
                packing[b][size] = packing[b].get(size, 0) + put
                left -= put
                if left == 0:
                    break
        while left > 0:
            if len(rooms) == len(caps_desc):
                return None
            cap = caps_desc[len(rooms)]
            put = min(left, cap // size)
            rooms.append(cap - put * size)
            packing.append({size: put} if put else {})
            left -= put
    return packing


def _best_fit_decreasing(sizes: Counter[int], caps_desc: Sequence[int]) -> _Packing | None:
    rooms: list[int] = []
    packing: _Packing = []
    for size in sorted(sizes, reverse=True):
        left = sizes[size]
        while left > 0:
            # Tightest open bin that still takes one item; it then takes as many as fit.
            best_b = -1
            for b, room in enumerate(rooms):
                if room >= size and (best_b < 0 or room < rooms[best_b]):
                    best_b = b
            if best_b < 0:
                if len(rooms) == len(caps_desc):
                    return None
                rooms.append(caps_desc[len(rooms)])
                packing.append({})
                best_b = len(rooms) - 1
            put = min(left, rooms[best_b] // size)
            if put == 0:  # a freshly opened bin too small for this item
                return None
            rooms[best_b] -= put * size
            packing[best_b][size] = packing[best_b].get(size, 0) + put
            left -= put
    return packing


# --------------------------------------------------------------------------------------------
# CP-SAT


def _solve_cp_sat(
    sizes: Counter[int],
    caps_desc: list[int],
    lb: int,
    heuristic: _Packing | None,
    *,
    time_limit: float,
    workers: int,
    seed: int,
) -> BinPackingResult:
    ub = len(heuristic) if heuristic is not None else None
    n_bins = ub if ub is not None else len(caps_desc)
    caps = caps_desc[:n_bins]
    size_list = sorted(sizes, reverse=True)

    model = cp_model.CpModel()
    used = [model.new_bool_var(f"used_{b}") for b in range(n_bins)]
    n: list[dict[int, cp_model.IntVar]] = []
    for b, cap in enumerate(caps):
        row = {
            s: model.new_int_var(0, min(sizes[s], cap // s), f"n_{s}_{b}") for s in size_list if s <= cap
        }
        n.append(row)
    loads = [sum(s * v for s, v in row.items()) for row in n]

    for b, cap in enumerate(caps):
        if n[b]:
            model.add(loads[b] <= cap * used[b])
        else:
            model.add(used[b] == 0)
    for s in size_list:
        model.add(sum(n[b][s] for b in range(n_bins) if s in n[b]) == sizes[s])

    # Some optimum uses a prefix of the bins sorted by capacity; within a capacity type the bins
    # are interchangeable, so order them by load too.
    for b in range(min(lb, n_bins)):
        model.add(used[b] == 1)
    for b in range(n_bins - 1):
        model.add_implication(used[b + 1], used[b])
        if caps[b] == caps[b + 1]:
            model.add(loads[b] >= loads[b + 1])
    model.add(sum(used) >= lb)
    model.minimize(sum(used))

    if heuristic is not None:
        for b, content in enumerate(_canonical(heuristic, caps)):
            model.add_hint(used[b], True)
            for s, var in n[b].items():
                model.add_hint(var, content.get(s, 0))

    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(time_limit, 0.01)
    solver.parameters.num_workers = max(1, workers)
    solver.parameters.random_seed = seed
    solver.parameters.log_search_progress = False
    t0 = time.monotonic()
    status = solver.solve(model)
    elapsed = time.monotonic() - t0

    has_solution = status in (cp_model.OPTIMAL, cp_model.FEASIBLE)
    value = round(solver.objective_value) if has_solution else ub
    if status == cp_model.OPTIMAL:
        bound = value
    elif status == cp_model.INFEASIBLE:
        bound = None
    else:
        raw = solver.best_objective_bound
        bound = max(lb, math.ceil(raw - 1e-6)) if math.isfinite(raw) else lb
    logger.info(
        "CP-SAT bin packing: status=%s value=%s bound=%s seconds=%.3f items=%d sizes=%d bins=%d",
        solver.status_name(status),
        value,
        bound,
        elapsed,
        sum(sizes.values()),
        len(sizes),
        n_bins,
    )

    if status == cp_model.INFEASIBLE:
        if ub is not None:  # the heuristic packing satisfies the model: cannot happen
            raise RuntimeError("CP-SAT reported a feasible bin packing model infeasible")
        raise ValueError(f"infeasible: the {len(caps_desc)} bins cannot hold all items")
    if value is None:
        raise TimeoutError(
            f"no packing found and infeasibility not proven within {time_limit:.1f}s "
            f"({len(caps_desc)} bins, lower bound {lb})"
        )
    if ub is not None:
        value = min(value, ub)
    assert bound is not None
    bound = min(bound, value)
    return BinPackingResult(value, bound, value == bound)


def _canonical(packing: _Packing, caps: Sequence[int]) -> _Packing:
    """Reorder bins of equal capacity by load, descending, to match the symmetry breaking."""
    out = list(packing)
    start = 0
    while start < len(out):
        end = start
        while end + 1 < len(out) and caps[end + 1] == caps[start]:
            end += 1
        out[start : end + 1] = sorted(
            out[start : end + 1], key=lambda content: -sum(s * c for s, c in content.items())
        )
        start = end + 1
    return out
