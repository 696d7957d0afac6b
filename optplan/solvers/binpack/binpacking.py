"""Exact minimum number of bins for items of integer size and bins of heterogeneous capacity.

Used for the fragmentation metric "least number of nodes that can hold every pod's request, each
pod whole on one node".  Every bin may be used once; the objective is the number of bins used.

Because only the *count* of bins matters, some optimal packing always uses the ``k`` largest bins
(swap a used bin for an unused bigger one and its contents still fit).  The solver therefore works
on the capacities sorted in descending order, and every heuristic opens bins in that order.

Pipeline: validation -> division by the gcd of the sizes -> lower bounds -> heuristics
(first-fit / best-fit decreasing, then subset-sum "minimum bin slack" fills) -> when the bounds do
not meet: the LP (Gilmore-Gomory) bound and its LP-guided packing (``binlp``), a search for a
packing into as many bins as the bound (``binfill``) -> CP-SAT on what is still open, with the
bound as its objective's lower bound (it stops as soon as it meets it).  CP-SAT gets an arc-flow
model (Valerio de Carvalho, extended to several capacity types) when its graph is small, else an
assignment model over aggregated sizes.
"""

from __future__ import annotations

import bisect
import logging
import math
import operator
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, SupportsIndex, cast

from ortools.sat.python import cp_model

from optplan.solvers.binpack.binfill import exact_pack, pick, reachable, slack_fill, split_counts
from optplan.solvers.binpack.binflow import flow_pack
from optplan.solvers.binpack.binlp import GilmoreGomory
from optplan.solvers.core.clock import Clock
from optplan.solvers.core.exact import proven_bound

__all__ = ["BinPackingResult", "min_bins"]

logger = logging.getLogger(__name__)

# A packing: for every bin used (a prefix of the capacities sorted descending), size -> count.
_Packing = list[Counter[int]]

_MAX_ARCS = 150_000  # larger arc-flow graphs fall back to the assignment model
_MAX_DP_WORK = 4_000_000_000  # bit operations allowed for the subset-sum heuristics
_LP_SHARE = 0.3  # of the time left, at most, for the LP bound ...
_DUALS_SHARE = 0.1  # ... then for solving the LP on to its optimum (duals for the arc-flow MIP's fixing) ...
_FLOW_SHARE = 0.6  # ... then for the arc-flow MIP ...
_DIVE_SHARE = 0.8  # ... then for the LP's dive
_SEARCH_SHARE = 0.85  # of the time then left, at most, for the search for a packing into lb bins ...
_SEARCH_SHARE_LOOSE = 0.2  # ... when that packing may waste more than the smallest item
_CP_SAT_SHARE = 0.7  # of the time then left for CP-SAT; the search has the rest ...
_SMALL_GRAPH = 4_000  # ... except on arc-flow graphs up to this many arcs: CP-SAT has it all
_SECONDS_PER_SEARCH_STEP = 5e-4  # work charged per search step (deterministic limits)
_FINISH_NODES = 2_000  # exact-search nodes for the few items a dive of the LP leaves
# Building CP-SAT's arc-flow model (Waescher TEST0014: 114,358 arcs in 5.6 s, load average 4.7): with
# less than twice that left, building it alone overran the limit by seconds (14 s on a 10 s limit).
_SECONDS_PER_CP_ARC = 5e-5


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
    clock: Clock | None = None,
) -> BinPackingResult:
    """Least number of bins (chosen among ``capacities``, one entry per available bin, each usable
    once) that hold every item whole.

    Items of size 0 and bins of capacity 0 are ignored.  Raises ``ValueError`` on negative or
    non-integer input, when some item fits no bin, or when no packing of all items exists.
    Raises ``TimeoutError`` in the rare case where the heuristics found no packing and CP-SAT could
    neither find one nor prove that none exists within ``time_limit`` (seconds of ``clock``: wall-clock
    by default, see ``clock``).
    """
    clock = clock or Clock()
    start = clock.now()
    sizes = _count_items(items)
    caps = _sorted_capacities(capacities)
    if not sizes:
        return BinPackingResult(0, 0, True)
    n_items = sum(sizes.values())
    if not caps:
        raise ValueError(f"infeasible: {n_items} item(s) but no bin of positive capacity")
    largest_item = max(sizes)
    if largest_item > caps[0]:
        raise ValueError(f"infeasible: an item of size {largest_item} fits no bin (largest capacity {caps[0]})")
    total = sum(s * c for s, c in sizes.items())
    if total > sum(caps):
        raise ValueError(f"infeasible: total item size {total} exceeds total capacity {sum(caps)}")

    # Only multiples of g can be packed: divide sizes by g and round capacities down.
    g = math.gcd(*sizes)
    if g > 1:
        sizes = Counter({s // g: c for s, c in sizes.items()})
        caps = [c // g for c in caps if c >= g]

    lb = _lower_bound(sizes, caps)
    if lb > len(caps):
        raise ValueError(f"infeasible: at least {lb} bins are needed but only {len(caps)} exist")

    best: _Packing | None = None
    heuristics: list[Callable[[Counter[int], list[int]], _Packing | None]] = [
        _first_fit_decreasing,
        _best_fit_decreasing,
    ]
    if _dp_affordable(sizes, caps, lb):
        heuristics += [_fill_with_largest, _fill_max]
    for heuristic in heuristics:
        packing = heuristic(sizes, caps)
        if packing is not None and (best is None or len(packing) < len(best)):
            best = packing
        if best is not None and len(best) == lb:
            logger.debug("bin packing closed by bounds: %d bins, %d items", lb, n_items)
            return BinPackingResult(lb, lb, True)

    deadline = start + time_limit
    lb, best = _narrow(sizes, caps, lb, best, deadline=deadline, seed=seed, clock=clock)
    if best is not None and len(best) == lb:
        logger.debug("bin packing closed by LP bound / search: %d bins, %d items", lb, n_items)
        return BinPackingResult(lb, lb, True)

    # CP-SAT, then (when it stops unproven) the search again on what is left of the budget.
    small = _arc_flow_graph(sizes, caps[0], _SMALL_GRAPH) is not None
    remaining = max(0.0, clock.left(deadline)) * (_CP_SAT_SHARE if best is not None and not small else 1.0)
    result = _solve_cp_sat(sizes, caps, lb, best, time_limit=remaining, workers=workers, seed=seed, clock=clock)
    if not result.proven and clock.left(deadline) > 0:
        found = _search(sizes, caps, result.lower_bound, deadline=deadline, share=1.0, seed=seed + 1, clock=clock)
        if found is not None:
            return BinPackingResult(result.lower_bound, result.lower_bound, True)
    return result


def _narrow(
    sizes: Counter[int], caps: list[int], lb: int, best: _Packing | None, *, deadline: float, seed: int, clock: Clock
) -> tuple[int, _Packing | None]:
    """Close the gap between ``lb`` and the heuristic packing ``best`` before CP-SAT is asked:

    1. the Gilmore-Gomory LP bound (``binlp``; at most ``_LP_SHARE`` of the time left);
    2. on an arc-flow graph too large for CP-SAT to be quick, when ``best`` is one bin above the
       bound: the compressed arc-flow MIP (``binflow``; at most ``_FLOW_SHARE`` of the time left),
       which proves that no packing into ``lb`` bins exists (the bound then rises to ``best``:
       instances without the round-up property) or finds one.  The LP is first solved on to its
       optimum (at most ``_DUALS_SHARE`` of the time left): its duals fix the MIP's arcs without
       the MIP's own LP (Waescher TEST0014: 58,425 arcs, 1,085 left, a packing in 1 s; its own LP
       took 18 s); with one capacity and few patterns left in the gap, ``binbranch`` decides instead
       of the MIP (Hard28 BPP14).  HiGHS has no deterministic limit:
       under deterministic limits (the same answer on any machine) this step is left out;
    3. a packing into ``lb`` bins by the LP's dive (at most ``_DIVE_SHARE`` of the time left:
       instances whose bins must be almost full);
    4. unless the arc-flow graph is small (CP-SAT then has all the time left), a search for a
       packing into ``lb`` bins (``binfill``: minimum bin slack with perturbation and a large
       neighbourhood search; at most ``_SEARCH_SHARE`` of the time then left, or
       ``_SEARCH_SHARE_LOOSE`` when such a packing may waste more than the smallest item), which
       is what finds the perfect packings of triplet instances.

    Returns the (possibly raised) bound and the best packing.  CP-SAT then starts from both, and
    the search has the time CP-SAT leaves."""
    if best is None:  # no packing at all: the bins are scarce, CP-SAT decides
        return lb, best
    small = _arc_flow_graph(sizes, caps[0], _SMALL_GRAPH) is not None
    lp = GilmoreGomory.create(sizes, caps, clock, start=best) if len(best) > lb else None
    if lp is not None:
        out = lp.bound(len(best), clock.left(deadline) * _LP_SHARE)
        logger.info("LP bound %d (was %d, best packing %d, %d rounds)", out.bound, lb, len(best), out.rounds)
        lb = max(lb, out.bound)
    if len(best) == lb + 1 and not small and not clock.deterministic and not clock.over(deadline):
        # On a large graph the LP solved on (its bound stopped at the round-up) gives duals to fix arcs by.
        duals = None if lp is None else partial(_lp_duals, lp, deadline, clock)
        flow = flow_pack(sizes, caps, lb, time_limit=clock.left(deadline) * _FLOW_SHARE, clock=clock, duals=duals)
        logger.info("arc-flow MIP into %d bins: %s %s", lb, flow.status, flow.stats)
        if flow.status == "infeasible":
            return len(best), best
        if flow.packing is not None:
            return lb, _checked(flow.packing, sizes, caps)
    if lp is not None and len(best) > lb and not clock.over(deadline):
        packing = lp.pack(lb, clock.left(deadline) * _DIVE_SHARE, _finish_exactly)
        if packing is not None:
            return lb, _checked([content for _, content in sorted(packing, key=lambda bin_: -bin_[0])], sizes, caps)
    if len(best) > lb and not small:
        # On a small arc-flow graph CP-SAT is quick and has all the time left.  Else a near-perfect
        # packing (less waste in all than the smallest item) is what the search finds and CP-SAT
        # does not; with more room CP-SAT does better and keeps more time.
        allowance = sum(caps[:lb]) - sum(s * c for s, c in sizes.items())
        share = _SEARCH_SHARE if allowance < min(sizes) else _SEARCH_SHARE_LOOSE
        found = _search(sizes, caps, lb, deadline=deadline, share=share, seed=seed, clock=clock)
        if found is not None:
            best = found
    return lb, best


def _lp_duals(lp: GilmoreGomory, deadline: float, clock: Clock) -> dict[int, float] | None:
    return lp.duals(clock.left(deadline) * _DUALS_SHARE)


def _finish_exactly(sizes: Counter[int], caps_desc: list[int]) -> list[Counter[int]] | None:
    """The last few items of the LP's dive, packed by the exact search (``_FINISH_NODES``)."""
    return exact_pack(sizes, caps_desc, _FINISH_NODES)


def _search(
    sizes: Counter[int], caps: list[int], bins: int, *, deadline: float, share: float, seed: int, clock: Clock
) -> _Packing | None:
    """``binfill.slack_fill`` into ``bins`` bins with ``share`` of the time left, charged per step."""
    until = clock.now() + clock.left(deadline) * share

    def spend(steps: int) -> bool:
        clock.charge(steps * _SECONDS_PER_SEARCH_STEP)
        return clock.over(until)

    found = slack_fill(sizes, caps, bins, seed=seed, spend=spend)
    return None if found is None else _checked(found, sizes, caps)


def _checked(packing: _Packing, sizes: Counter[int], caps_desc: Sequence[int]) -> _Packing:
    """``packing`` if it holds exactly the items and its ``b``-th fullest bin fits the ``b``-th largest
    capacity (a packing from another module is checked before its bin count is trusted)."""
    loads = sorted((sum(s * c for s, c in content.items()) for content in packing), reverse=True)
    if sum(packing, Counter()) != sizes or len(loads) > len(caps_desc) or any(
        load > cap for load, cap in zip(loads, caps_desc, strict=False)
    ):
        raise RuntimeError("bin packing: a heuristic returned an invalid packing")
    return packing


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
        value = operator.index(cast("SupportsIndex", x))
    except TypeError:
        raise ValueError(f"{what} must be an int, got {x!r}") from None
    if value < 0:
        raise ValueError(f"{what} must be >= 0, got {value}")
    return value


def _capacity_types(caps_desc: Sequence[int]) -> list[tuple[int, int]]:
    """(capacity, count) pairs, capacities descending."""
    return sorted(Counter(caps_desc).items(), reverse=True)


# --------------------------------------------------------------------------------------------
# Lower bounds


def _lower_bound(sizes: Counter[int], caps_desc: Sequence[int]) -> int:
    """Best of the cheap lower bounds; all are valid for heterogeneous capacities.

    With ``C`` the largest capacity and ``u_K`` the Martello-Toth dual feasible function
    (``x > C-K -> C``, ``x < K -> 0``, else ``x``; superadditive, so a bin of capacity ``c`` holds
    items of ``u_K`` total at most ``u_K(c)``), for every ``K`` in ``{0} + sizes <= C/2``:

    * the fewest largest bins whose ``u_K(capacity)`` sum reaches the ``u_K`` sum of the items
      (``K = 0`` is the generalised L1: fewest largest bins whose capacities reach the total);
    * Martello-Toth L2 on the relaxation where every bin has capacity ``C`` (exactly L2 when the
      bins are identical).  With ``K = 0`` it counts the items larger than ``C / 2``, which
      pairwise conflict and each need their own bin.

    Returns ``len(caps_desc) + 1`` when even all bins cannot reach a bound (infeasible).
    """
    cmax = caps_desc[0]
    ordered = sorted(sizes.items())
    keys = [s for s, _ in ordered]
    cnt_prefix = [0]
    sum_prefix = [0]
    for s, c in ordered:
        cnt_prefix.append(cnt_prefix[-1] + c)
        sum_prefix.append(sum_prefix[-1] + s * c)

    def count_sum(lo: int, hi: int) -> tuple[int, int]:
        """Number and total size of items with lo <= size <= hi."""
        i = bisect.bisect_left(keys, lo)
        j = bisect.bisect_right(keys, hi)
        if j <= i:
            return 0, 0
        return cnt_prefix[j] - cnt_prefix[i], sum_prefix[j] - sum_prefix[i]

    types = _capacity_types(caps_desc)
    half = cmax // 2  # sizes <= half are "small": 2 * s <= cmax
    best = 0
    for k in [0, *(s for s in keys if s <= half)]:
        n1, _ = count_sum(cmax - k + 1, cmax)
        # Dual feasible function bound.
        _, mid_sum = count_sum(max(k, 1), cmax - k)
        best = max(best, _fewest_bins(n1 * cmax + mid_sum, types, partial(_u, cmax=cmax, k=k)))
        # Martello-Toth L2.
        n2, sum2 = count_sum(half + 1, cmax - k)
        _, sum3 = count_sum(max(k, 1), half)
        free = n2 * cmax - sum2
        best = max(best, n1 + n2 + max(0, -(-(sum3 - free) // cmax)))
    return best


def _u(x: int, cmax: int, k: int) -> int:
    if x > cmax - k:
        return cmax
    if x < k:
        return 0
    return x


def _fewest_bins(need: int, types: list[tuple[int, int]], value: Callable[[int], int]) -> int:
    """Fewest bins (largest first) whose ``value(capacity)`` sum reaches ``need``."""
    used = 0
    acc = 0
    for cap, count in types:
        if acc >= need:
            break
        v = value(cap)
        if v <= 0:
            break
        take = min(count, -(-(need - acc) // v))
        acc += take * v
        used += take
    if acc >= need:
        return used
    return sum(count for _, count in types) + 1


# --------------------------------------------------------------------------------------------
# Upper bounds (heuristics).  All open bins in descending capacity order and return None when they
# run out of bins.


def _first_fit_decreasing(sizes: Counter[int], caps_desc: list[int]) -> _Packing | None:
    rooms: list[int] = []
    packing: _Packing = []
    for size in sorted(sizes, reverse=True):
        left = sizes[size]
        # A run of equal items fills each bin (in order) as much as possible: same as item-wise FFD.
        for b, room in enumerate(rooms):
            if room >= size:
                put = min(left, room // size)
                rooms[b] -= put * size
                packing[b][size] += put
                left -= put
                if left == 0:
                    break
        while left > 0:
            if len(rooms) == len(caps_desc) or caps_desc[len(rooms)] < size:
                return None
            cap = caps_desc[len(rooms)]
            put = min(left, cap // size)
            rooms.append(cap - put * size)
            packing.append(Counter({size: put}))
            left -= put
    return packing


def _best_fit_decreasing(sizes: Counter[int], caps_desc: list[int]) -> _Packing | None:
    open_rooms: list[tuple[int, int]] = []  # (room, bin), sorted
    packing: _Packing = []
    for size in sorted(sizes, reverse=True):
        left = sizes[size]
        while left > 0:
            # The tightest open bin that takes one item then takes as many as fit.
            i = bisect.bisect_left(open_rooms, (size, -1))
            if i < len(open_rooms):
                room, b = open_rooms.pop(i)
            else:
                b = len(packing)
                if b == len(caps_desc) or caps_desc[b] < size:
                    return None
                room = caps_desc[b]
                packing.append(Counter())
            put = min(left, room // size)
            packing[b][size] += put
            left -= put
            bisect.insort(open_rooms, (room - put * size, b))
    return packing


def _dp_affordable(sizes: Counter[int], caps_desc: list[int], lb: int) -> bool:
    pieces = sum(max(1, c.bit_length()) for c in sizes.values())
    return lb * pieces * caps_desc[0] <= _MAX_DP_WORK


def _fill_with_largest(sizes: Counter[int], caps_desc: list[int]) -> _Packing | None:
    """Each bin gets the largest remaining item plus a best subset-sum fill (MBS-like)."""
    return _fill_bins(sizes, caps_desc, force_largest=True)


def _fill_max(sizes: Counter[int], caps_desc: list[int]) -> _Packing | None:
    """Each bin gets a subset of the remaining items of largest total size."""
    return _fill_bins(sizes, caps_desc, force_largest=False)


def _fill_bins(sizes: Counter[int], caps_desc: list[int], *, force_largest: bool) -> _Packing | None:
    left = Counter(sizes)
    packing: _Packing = []
    for cap in caps_desc:
        if not left:
            break
        content: Counter[int] = Counter()
        room = cap
        if force_largest:
            s = max(left)
            if s > cap:
                return None
            content[s] = 1
            room -= s
            left[s] -= 1
            if left[s] == 0:
                del left[s]
        extra = _subset_sum(left, room)
        content.update(extra)
        if not content:
            return None
        left.subtract(extra)
        left = +left  # drop zero counts
        packing.append(content)
    return None if left else packing


def _subset_sum(avail: Counter[int], room: int) -> Counter[int]:
    """A multiset drawn from ``avail`` with the largest total <= ``room`` (bitset DP, ``binfill``'s)."""
    pieces = split_counts(avail, room, sorted(avail, reverse=True))
    history = reachable(pieces, room)
    return pick(pieces, history, history[-1].bit_length() - 1)


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
    clock: Clock,
) -> BinPackingResult:
    deadline = clock.now() + time_limit
    ub = len(heuristic) if heuristic is not None else None
    graph = _arc_flow_graph(sizes, caps_desc[0], _MAX_ARCS)
    if graph is None:
        n_bins = ub if ub is not None else len(caps_desc)
        assignment = _assignment_model(sizes, caps_desc[:n_bins], lb, heuristic)
        status, value, bound = _run(
            assignment, "assignment", sizes, n_bins, lb, clock.left(deadline), workers, seed, clock
        )
        if status == cp_model.INFEASIBLE and ub is not None:  # the heuristic packing fits the model
            raise RuntimeError("CP-SAT reported a feasible bin packing model infeasible")
        return _result(status, value, bound, ub, lb, len(caps_desc), time_limit)

    # Arc-flow: repeatedly look for a packing strictly better than the best known one, so that
    # "infeasible" proves the best known one optimal.  The single-worker search has a heavy-tailed,
    # seed-dependent running time on this model, so it runs in growing time slices with a new seed
    # each (restarts); a slice is at least long enough for the root LP of a big graph.
    # (Hinting the heuristic packing was tried too: it slows CP-SAT down here.)
    desc = f"arc-flow, {len(graph)} arcs"
    base_slice = max(1.0, len(graph) / 4000)
    best_bound = lb
    attempt = 0
    model: cp_model.CpModel | None = None
    while True:
        n_bins = ub - 1 if ub is not None else len(caps_desc)
        if n_bins < best_bound:  # ub is proven
            break
        left = clock.left(deadline)
        if left <= 0 or clock.capped():
            break
        if model is None:
            if left < 2 * len(graph) * _SECONDS_PER_CP_ARC:  # no time to build it and then solve it
                logger.info("CP-SAT bin packing: %.2fs left, too little for the arc-flow model's %d arcs",
                            left, len(graph))
                break
            model = _arc_flow_model(sizes, caps_desc[:n_bins], best_bound, graph)
            left = clock.left(deadline)
            if left <= 0:
                break
        slice_ = base_slice * 2 ** (attempt // 2)
        status, value, bound = _run(model, desc, sizes, n_bins, best_bound, min(slice_, left), workers, seed + attempt,
                                    clock)
        attempt += 1
        if status == cp_model.INFEASIBLE:
            best_bound = max(best_bound, n_bins + 1)
            if ub is None:
                raise ValueError(f"infeasible: the {len(caps_desc)} bins cannot hold all items")
            break
        best_bound = max(best_bound, bound)
        if value is not None and (ub is None or value < ub):
            ub = value
            model = None  # rebuild with fewer bins
        if status == cp_model.OPTIMAL:
            break
    return _result(cp_model.UNKNOWN, ub, best_bound, ub, lb, len(caps_desc), time_limit)


def _run(
    model: cp_model.CpModel,
    desc: str,
    sizes: Counter[int],
    n_bins: int,
    lb: int,
    time_limit: float,
    workers: int,
    seed: int,
    clock: Clock,
) -> tuple[Any, int | None, int]:
    """Solve once; returns (status, value or None, proven lower bound), logs one line."""
    solver = cp_model.CpSolver()
    clock.configure(solver, time_limit)
    solver.parameters.num_workers = max(1, workers)
    solver.parameters.random_seed = seed
    solver.parameters.log_search_progress = False
    if desc.startswith("arc-flow"):
        solver.parameters.linearization_level = 2  # full LP: the Gilmore-Gomory bound
    t0 = time.monotonic()
    status = solver.solve(model)
    clock.solved(solver, len(model.proto.variables))
    elapsed = time.monotonic() - t0
    value: int | None = None
    bound = lb
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        value = round(solver.objective_value)
    proven = proven_bound(solver, status, maximize=False)  # None when cut before a solution
    if proven is not None:
        bound = max(lb, proven)
    logger.info(
        "CP-SAT bin packing (%s, seed %d): status=%s value=%s bound=%s seconds=%.3f items=%d sizes=%d bins<=%d",
        desc,
        seed,
        solver.status_name(status),
        value,
        bound,
        elapsed,
        sum(sizes.values()),
        len(sizes),
        n_bins,
    )
    return status, value, bound


def _result(
    status: Any, value: int | None, bound: int, ub: int | None, lb: int, n_caps: int, time_limit: float
) -> BinPackingResult:
    if ub is not None and (value is None or value > ub):
        value = ub
    if value is None:
        if status == cp_model.INFEASIBLE:
            raise ValueError(f"infeasible: the {n_caps} bins cannot hold all items")
        raise TimeoutError(
            f"no packing found and infeasibility not proven within {time_limit:.1f}s ({n_caps} bins, lower bound {lb})"
        )
    bound = min(max(bound, lb), value)
    return BinPackingResult(value, bound, value == bound)


def _arc_flow_graph(sizes: Counter[int], cmax: int, max_arcs: int) -> set[tuple[int, int]] | None:
    """Item arcs ``(tail, size)`` of the arc-flow graph: items enter a bin by decreasing size, at
    most ``min(count, cmax // size)`` of each.  None when it would exceed ``max_arcs``."""
    nodes = {0}
    arcs: set[tuple[int, int]] = set()
    for s in sorted(sizes, reverse=True):
        reps = min(sizes[s], cmax // s)
        heads: list[int] = []
        for d in nodes:
            cur = d
            for _ in range(reps):
                if cur + s > cmax:
                    break
                arcs.add((cur, s))
                cur += s
                heads.append(cur)
            if len(arcs) > max_arcs:
                return None
        nodes.update(heads)
    return arcs


def _arc_flow_model(
    sizes: Counter[int],
    caps: list[int],
    lb: int,
    arcs: set[tuple[int, int]],
) -> cp_model.CpModel:
    """Every used bin is a path 0 -> (its capacity) -> sink; item arcs (d, d+s), loss arcs between
    consecutive nodes, one sink arc per capacity type bounded by the number of such bins."""
    n_bins = len(caps)
    types = _capacity_types(caps)
    nodes = sorted({0} | {d + s for d, s in arcs} | {c for c, _ in types})
    model = cp_model.CpModel()
    x = {a: model.new_int_var(0, min(sizes[a[1]], n_bins), f"x_{a[0]}_{a[1]}") for a in sorted(arcs)}
    loss = {nodes[i]: model.new_int_var(0, n_bins, f"loss_{nodes[i]}") for i in range(len(nodes) - 1)}
    sink = {c: model.new_int_var(0, k, f"sink_{c}") for c, k in types}
    z = model.new_int_var(min(lb, n_bins), n_bins, "bins")

    inflow: dict[int, list[cp_model.IntVar]] = {v: [] for v in nodes}
    outflow: dict[int, list[cp_model.IntVar]] = {v: [] for v in nodes}
    by_size: dict[int, list[cp_model.IntVar]] = {s: [] for s in sizes}
    for (d, s), var in x.items():
        outflow[d].append(var)
        inflow[d + s].append(var)
        by_size[s].append(var)
    for i in range(len(nodes) - 1):
        outflow[nodes[i]].append(loss[nodes[i]])
        inflow[nodes[i + 1]].append(loss[nodes[i]])
    for c, var in sink.items():
        outflow[c].append(var)
    for v in nodes:
        if v == 0:
            model.add(sum(outflow[v]) == z)
        else:
            model.add(sum(inflow[v]) == sum(outflow[v]))
    for s, count in sizes.items():
        model.add(sum(by_size[s]) >= count)
    model.add(sum(sink.values()) == z)
    model.minimize(z)
    return model


def _assignment_model(sizes: Counter[int], caps: list[int], lb: int, heuristic: _Packing | None) -> cp_model.CpModel:
    """Bin-used booleans and per-(size, bin) counts over the first ``len(caps)`` bins."""
    n_bins = len(caps)
    size_list = sorted(sizes, reverse=True)
    model = cp_model.CpModel()
    used = [model.new_bool_var(f"used_{b}") for b in range(n_bins)]
    n: list[dict[int, cp_model.IntVar]] = [
        {s: model.new_int_var(0, min(sizes[s], cap // s), f"n_{s}_{b}") for s in size_list if s <= cap}
        for b, cap in enumerate(caps)
    ]
    loads = [sum(s * v for s, v in row.items()) for row in n]
    for b, cap in enumerate(caps):
        if n[b]:
            model.add(loads[b] <= cap * used[b])
        else:
            model.add(used[b] == 0)
    for s in size_list:
        model.add(sum(row[s] for row in n if s in row) == sizes[s])

    # Some optimum uses a prefix of the bins sorted by capacity; within a capacity type the bins
    # are interchangeable, so order them by load too.
    for b in range(min(lb, n_bins)):
        model.add(used[b] == 1)
    for b in range(n_bins - 1):
        model.add_implication(used[b + 1], used[b])
        if caps[b] == caps[b + 1]:
            model.add(loads[b] >= loads[b + 1])
    model.add(sum(used) >= min(lb, n_bins))
    model.minimize(sum(used))

    if heuristic is not None:
        for b, content in enumerate(_canonical(heuristic, caps)):
            model.add_hint(used[b], True)
            for s, var in n[b].items():
                model.add_hint(var, content[s])
    return model


def _canonical(packing: _Packing, caps: Sequence[int]) -> _Packing:
    """Reorder bins of equal capacity by load, descending, to match the symmetry breaking."""
    out = list(packing)
    start = 0
    while start < len(out):
        end = start
        while end + 1 < len(out) and caps[end + 1] == caps[start]:
            end += 1
        out[start : end + 1] = sorted(out[start : end + 1], key=lambda c: -sum(s * k for s, k in c.items()))
        start = end + 1
    return out
