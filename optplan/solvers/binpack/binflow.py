"""Do the items fit into a given number of bins? An arc-flow MIP on HiGHS that proves it or finds a packing.

``min_bins`` reaches the rounded-up LP bound on most instances; on the others (not "IRUP": the
optimum is one above) it needs a proof that one bin fewer is impossible.  Branch and bound on a
compressed arc-flow model, after reduced-cost fixing, gives it.

**The graph** (Valerio de Carvalho's arc flow, compressed as Brandao and Pedroso's VPSolver does).
A bin of capacity ``C`` is a path from a source to a sink; an arc of size ``s`` is one item of that
size.  Built in three steps, per capacity type:

1. *States.*  Item sizes by decreasing size, each with at most ``b = min(demand, C // size)``
   copies, are laid out one copy per position ``j``; a state ``(u, j)`` is "``u`` units used, the
   next item considered is copy ``j``".  From it: take copy ``j`` (an item arc to ``(u + s_j, j+1)``,
   when it fits) or skip the rest of that size (a zero arc to the first copy of the next size).
   Every pattern (a multiset of items, at most ``b`` of each, total at most ``C``) is exactly one
   path, by decreasing size; the states reached from ``(0, 0)`` are the only ones kept.
2. *Backward labels.*  ``L(u, j)``: the most weight the items from copy ``j`` on can add in the
   room ``C - u`` (a bounded knapsack, computed layer by layer); the state is relabelled
   ``lam = C - L(u, j)`` and states with one label become one node.  Terminal states (nothing more
   fits) get label ``C``: they merge into the sink, so no loss arcs are needed there.
3. *Forward labels.*  On that graph, ``mu(v)`` = the heaviest path from the source to ``v``;
   nodes with one ``mu`` merge again.

Why every path of the result is still a pattern that fits ``C`` (the model's soundness rests on it):
both labellings are *potentials*: for every arc ``a -> b`` of weight ``w``, ``label(b) - label(a) >= w``
(step 2: ``L(a) >= w + L(b)`` because the arc followed by the best continuation from ``b`` is one
continuation from ``a``; step 3: ``mu(b) >= mu(a) + w`` by definition of a longest path), and the
source's label is ``>= 0`` and the sink's ``<= C`` (``lam(sink) = C - 0``; ``mu(sink)`` is the
heaviest path in a graph whose paths, by step 2, weigh at most ``C``).  Merging nodes with equal
labels keeps every arc's inequality, so along *any* path, including ones that mix the paths of
different states, the weights add up to at most ``label(sink) - label(source) <= C``.  And no
pattern is lost: the relabelling maps each arc of step 1 to an arc (a zero arc possibly to a
self-loop, dropped), so every pattern's path survives.  An integer flow therefore decomposes
into paths that are exactly the bins of a packing, and every packing gives such a flow.

**The model.**  One graph per capacity type ``t`` among the first ``bins`` capacities (its
own bounds ``C_t // size``), flow out of its source at most ``k_t`` (how many such bins there are);
item rows are equalities (a packing uses each item exactly once, and every bin's contents, a
pattern within the demand bounds, is a path); objective: the capacity of the bins used, which any
packing into the first ``bins`` capacities keeps within their sum ``B`` (with one capacity: the
number of bins).  HiGHS's simplex needs tens of seconds for the root LP of Hard28's graphs
(degenerate, ~30,000 arcs), so the LP is solved first by interior point (~1 s) and its duals fix
arcs by reduced cost (``_solve``): on Hard28's non-IRUP instances 95-98% of the arcs go, and
the MIP on the rest proves infeasibility in under 4 s.  "infeasible" is claimed only from HiGHS's
MIP status *infeasible* on the fixed model, or from the LP's Lagrangian bound above ``B`` (computed
by us from the duals, valid for any duals), never from a time-out; "feasible" only with a packing
decoded from the flow and checked item by item.

**With one capacity, the patterns instead of the MIP.**  After the graph's own LP, every pattern
whose lightest path weighs at most ``B - L`` (under the positive reduced costs) is listed
(``_patterns``: a walk cut where the lightest way on to the sink leaves no room); any packing into
the bins uses only those, their weights adding up to at most ``B - L``.  When there are at most
``_MAX_PATTERNS`` of them, ``binbranch`` decides the set partitioning over them (Hard28 BPP14: 824-1,203
patterns, about 460 nodes), and HiGHS's MIP and its confirmation run only when it has not ended
within ``_MAX_BRANCH_NODES`` nodes.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from optplan.solvers.binpack.binbranch import branch_patterns
from optplan.solvers.core.clock import Clock
from optplan.solvers.core.highs import quiet

__all__ = ["FlowGraph", "FlowOutcome", "flow_graph", "flow_pack"]

logger = logging.getLogger(__name__)

_SAFETY = 1e-6  # a dual bound counts as above ``bins`` only beyond this margin
_SECONDS_PER_STATE_ARC = 2e-6  # building the graph (reference machine: 0.2 s for Hard28's 100,000)
# Measured on Hard28 (10 s): every proof and every packing found kept at most 6,300 arcs after fixing;
# above 10,000, HiGHS's root simplex alone outlasts the budget (and overruns its limit by seconds).
_MAX_MIP_ARCS = 10_000
# Given duals (``flow_pack``) that leave at most this many arcs go straight to the MIP; beyond, the
# graph's own LP runs too (Hard28: the Gilmore-Gomory duals left 760-30,000 arcs, the interior point's
# 700-1,400 in 1-4 s; Waescher TEST0014: 1,085, and the interior point needs 18 s).
_FEW_MIP_ARCS = 1_500
_MAX_PATTERNS = 5_000  # patterns listed for the branch and bound (BPP14: 824); beyond, HiGHS's MIP
_MAX_PATHS = 200_000  # paths walked to list them
# The branch and bound's nodes before HiGHS's MIP has the rest of the time (Hard28 BPP14: proven in
# 434-464 nodes, where the MIP and its confirmation take 7-15 s; BPP175, room 4e-5 for 83 bins: 1,590
# nodes did not end, the previous version's MIP proved it in 4.6 s of CPU in all).
_MAX_BRANCH_NODES = 600
_MAX_STATES = 5_000_000  # positions x (capacity + 1) of step 1's tables (int32: 20 MB each); beyond: "unknown"
# The LP: interior point without crossover (its duals are central: the reduced costs are positive on
# every arc no optimal flow uses, so fixing removes the most; the simplex took 25 s on Hard28's
# degenerate LPs, the interior point 1 s).  The MIP: HiGHS's primal heuristics off (on the reduced
# graphs its branching finds packings faster without them, and they waste the time of a proof).
_LP_OPTIONS: dict[str, Any] = {"solver": "ipm", "run_crossover": "off", "presolve": "off"}
_MIP_OPTIONS: dict[str, Any] = {
    "mip_heuristic_effort": 0.0,
    "mip_heuristic_run_feasibility_jump": False,
    "mip_heuristic_run_rins": False,
    "mip_heuristic_run_rens": False,
    "mip_heuristic_run_root_reduced_cost": False,
    "mip_max_improving_sols": 1,  # a feasibility question: the first packing answers it
}

Status = Literal["infeasible", "feasible", "unknown"]


@dataclass
class FlowOutcome:
    """``status``: "infeasible" (proven: the items do not fit into the first ``bins`` capacities),
    "feasible" (``packing``: one Counter per bin; bin ``b`` fits ``caps_desc[b]``), "unknown"."""

    status: Status
    packing: list[Counter[int]] | None = None
    stats: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class FlowGraph:
    """A compressed arc-flow graph for one capacity: nodes ``0 .. n_nodes - 1`` in topological order,
    source 0, sink ``n_nodes - 1``; arcs ``(tail, head, size)``, size 0 for a loss arc."""

    capacity: int
    n_nodes: int
    arcs: list[tuple[int, int, int]]
    states: int  # step 1's states (the uncompressed graph's nodes)
    state_arcs: int  # and its arcs


def flow_pack(
    sizes: Counter[int], caps_desc: Sequence[int], bins: int, *, time_limit: float, clock: Clock,
    duals: Callable[[], dict[int, float] | None] | None = None,
) -> FlowOutcome:
    """Do the items ``sizes`` (size -> count, positive integers) fit into the first ``bins`` of
    ``caps_desc`` (capacities, descending)?  Solved as an arc-flow MIP by HiGHS within
    ``time_limit`` seconds of ``clock``.  Deterministic clocks are charged the graph's building
    by its size and HiGHS's runs by the time HiGHS reports (HiGHS has no deterministic time, so a
    run cut by its limit may end differently on another machine; a proof or a packing does not).

    ``stats``: the graph's sizes (``states``/``state_arcs`` before compression, ``nodes``/``arcs``
    after, ``mip_arcs`` after reduced-cost fixing), ``lp_bound``, seconds, MIP nodes explored.

    ``duals``: item duals on demand (size -> dual, e.g. the Gilmore-Gomory LP's), asked for once
    the graph is built: arcs are then first fixed by the reduced costs of the
    best paths through them under those duals (``_path_fixing``), which needs no LP of the graph's
    own; the interior point LP runs only when that leaves more than ``_FEW_MIP_ARCS`` arcs, and the
    MIP then keeps only what both fixings keep."""
    t0 = time.perf_counter()
    start = clock.now()
    used = sorted(caps_desc[:bins], reverse=True)
    stats: dict[str, Any] = {"bins": bins}
    items = {s: c for s, c in sizes.items() if s > 0 and c > 0}
    if not items:
        return FlowOutcome("feasible", [], stats)
    if not used or max(items) > used[0] or sum(s * c for s, c in items.items()) > sum(used):
        stats["reason"] = "trivial"
        return FlowOutcome("infeasible", None, stats)
    types = sorted(Counter(used).items(), reverse=True)
    graphs: list[tuple[FlowGraph, int]] = []
    for cap, k in types:
        graph = flow_graph(Counter({s: c for s, c in items.items() if s <= cap}), cap)
        if graph is None:
            stats["reason"] = "graph too large"
            return FlowOutcome("unknown", None, stats)
        graphs.append((graph, k))
    stats["states"] = sum(g.states for g, _ in graphs)
    stats["state_arcs"] = sum(g.state_arcs for g, _ in graphs)
    stats["nodes"] = sum(g.n_nodes for g, _ in graphs)
    stats["arcs"] = sum(len(g.arcs) for g, _ in graphs)
    stats["build_seconds"] = round(time.perf_counter() - t0, 3)
    clock.charge(stats["state_arcs"] * _SECONDS_PER_STATE_ARC)
    status, packing, info = _solve(Counter(items), graphs, clock.left(start + time_limit), clock, duals=duals)
    stats.update(info)
    stats["seconds"] = round(time.perf_counter() - t0, 3)
    logger.info("arc-flow MIP (HiGHS), %d bins: %s %s", bins, status, stats)
    if status == "feasible":
        if packing is None or not _valid(packing, Counter(items), caps_desc):
            logger.warning("arc-flow: the solution found did not decode into a valid packing; reporting unknown")
            return FlowOutcome("unknown", None, stats)
        return FlowOutcome("feasible", packing, stats)
    return FlowOutcome(status, None, stats)


# --------------------------------------------------------------------------------------------
# The graph


def flow_graph(sizes: Counter[int], capacity: int) -> FlowGraph | None:
    """The compressed arc-flow graph of the patterns of ``sizes`` (each size at most its count and
    ``capacity // size`` times) in a bin of ``capacity`` (module docstring); None when step 1's
    tables would exceed ``_MAX_STATES`` cells."""
    order = sorted((s for s in sizes if 0 < s <= capacity), reverse=True)
    pos_size: list[int] = []  # size of copy j
    nxt: list[int] = []  # first copy of the next size, after copy j
    for s in order:
        b = min(sizes[s], capacity // s)
        start = len(pos_size)
        pos_size += [s] * b
        nxt += [start + b] * b
    n = len(pos_size)
    if (n + 1) * (capacity + 1) > _MAX_STATES:
        return None
    width = capacity + 1
    # Step 1: reachable states, position by position (skips jump forward, so one pass suffices).
    reach = np.zeros((n + 1, width), dtype=bool)
    reach[0, 0] = True
    for j in range(n):
        s = pos_size[j]
        reach[j + 1, s:] |= reach[j, : width - s]
        reach[nxt[j]] |= reach[j]
    # Step 2: L(u, j), the heaviest continuation; labels C - L.
    best = np.zeros((n + 1, width), dtype=np.int32)
    for j in range(n - 1, -1, -1):
        s = pos_size[j]
        take = np.full(width, -1, dtype=np.int32)
        take[: width - s] = best[j + 1, s:] + s
        best[j] = np.maximum(take, best[nxt[j]])
    lam = capacity - best
    tails: list[np.ndarray] = []
    heads: list[np.ndarray] = []
    kinds: list[np.ndarray] = []
    state_arcs = 0
    for j in range(n):
        s = pos_size[j]
        us = np.flatnonzero(reach[j, : width - s])
        state_arcs += len(us)
        tails.append(lam[j, us])
        heads.append(lam[j + 1, us + s])
        kinds.append(np.full(len(us), s, dtype=np.int64))
        us = np.flatnonzero(reach[j])
        state_arcs += len(us)
        tails.append(lam[j, us])
        heads.append(lam[nxt[j], us])
        kinds.append(np.zeros(len(us), dtype=np.int64))
    states = int(reach.sum())
    tail = np.concatenate(tails) if tails else np.zeros(0, dtype=np.int64)
    head = np.concatenate(heads) if heads else np.zeros(0, dtype=np.int64)
    kind = np.concatenate(kinds) if kinds else np.zeros(0, dtype=np.int64)
    keep = head > tail  # zero arcs between equal labels are self-loops
    arcs = np.unique(np.stack([tail[keep], head[keep], kind[keep]], axis=1), axis=0)
    source = int(lam[0, 0])
    # Step 3: forward labels (longest path from the source), in increasing order of lam.
    mu: dict[int, int] = {source: 0}
    for t, h, s in sorted(map(tuple, arcs.tolist()), key=lambda a: a[0]):
        if t in mu:
            mu[h] = max(mu.get(h, 0), mu[t] + s)
    final = {(mu[t], mu[h], s) for t, h, s in arcs.tolist() if t in mu and mu[h] > mu[t]}
    sink_label = mu[capacity]
    labels = sorted({0, sink_label} | {v for a in final for v in a[:2]})
    assert labels[-1] == sink_label <= capacity  # the sink is reachable from every node
    index = {v: i for i, v in enumerate(labels)}
    out = sorted((index[t], index[h], s) for t, h, s in final)
    return FlowGraph(capacity, len(labels), out, states, state_arcs)


# --------------------------------------------------------------------------------------------
# The MIP


@dataclass
class _Model:
    """The arc-flow LP/MIP as arrays: column ``j`` is arc ``j`` of the graphs in turn; ``rows`` and
    ``vals`` its matrix entries (tail node -1, head node +1, item row +1); rows are ranges."""

    cost: np.ndarray
    upper: np.ndarray
    row_lo: np.ndarray
    row_hi: np.ndarray
    starts: np.ndarray  # column j's entries: index[starts[j]:starts[j+1]]
    index: np.ndarray
    value: np.ndarray


def _model(sizes: Counter[int], graphs: list[tuple[FlowGraph, int]]) -> _Model:
    """Rows: one per size (an equality: its demand), per graph one per inner node (conservation)
    and one for its source (flow out between 0 and ``k``); the sink's row is implied.  Objective:
    the capacity of the bins used, in units of the largest capacity."""
    cmax = graphs[0][0].capacity
    order = sorted(sizes)
    item_row = {s: i for i, s in enumerate(order)}
    row_lo: list[float] = [float(sizes[s]) for s in order]
    row_hi: list[float] = list(row_lo)
    index: list[int] = []
    value: list[float] = []
    counts: list[int] = []
    cost: list[float] = []
    upper: list[float] = []
    for graph, k in graphs:
        base = len(row_lo)  # inner node v (1 .. n-2): row base + v - 1; the source: base + n - 2
        n = graph.n_nodes
        row_lo += [0.0] * (n - 1)
        row_hi += [0.0] * (n - 2) + [float(k)]
        for t, h, s in graph.arcs:
            before = len(index)
            index.append(base + n - 2 if t == 0 else base + t - 1)
            value.append(1.0 if t == 0 else -1.0)
            if h != n - 1:
                index.append(base + h - 1)
                value.append(1.0)
            if s:
                index.append(item_row[s])
                value.append(1.0)
            counts.append(len(index) - before)
            cost.append(graph.capacity / cmax if t == 0 else 0.0)
            upper.append(float(min(k, sizes[s])) if s else float(k))
    starts = np.zeros(len(counts) + 1, dtype=np.int32)
    starts[1:] = np.cumsum(counts)
    return _Model(np.asarray(cost), np.asarray(upper), np.asarray(row_lo), np.asarray(row_hi), starts,
                  np.asarray(index, dtype=np.int32), np.asarray(value))


def _highs(model: _Model, keep: np.ndarray, upper: np.ndarray, *, integer: bool, time_limit: float,
           options: dict[str, Any]) -> Any:
    """A quiet HiGHS holding the columns ``keep`` of ``model`` (with bounds ``upper``)."""
    import highspy

    cols = np.flatnonzero(keep)
    lens = model.starts[cols + 1] - model.starts[cols]
    starts = np.zeros(len(cols) + 1, dtype=np.int32)
    starts[1:] = np.cumsum(lens)
    take = np.concatenate([np.arange(model.starts[j], model.starts[j + 1]) for j in cols]) if len(cols) else \
        np.zeros(0, dtype=np.int64)
    lp = highspy.HighsLp()
    lp.num_col_ = len(cols)
    lp.num_row_ = len(model.row_lo)
    lp.col_cost_ = model.cost[cols]
    lp.col_lower_ = np.zeros(len(cols))
    lp.col_upper_ = upper[cols]
    lp.row_lower_ = model.row_lo
    lp.row_upper_ = model.row_hi
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = starts
    lp.a_matrix_.index_ = model.index[take]
    lp.a_matrix_.value_ = model.value[take]
    if integer:
        lp.integrality_ = [highspy.HighsVarType.kInteger] * len(cols)
    with quiet():
        highs = highspy.Highs()
    highs.setOptionValue("output_flag", False)
    highs.setOptionValue("threads", 1)
    highs.setOptionValue("random_seed", 0)
    highs.setOptionValue("time_limit", max(0.01, float(time_limit)))
    for key, val in options.items():
        highs.setOptionValue(key, val)
    highs.passModel(lp)
    return highs


def _lagrangian(model: _Model, y: np.ndarray) -> tuple[float, np.ndarray]:
    """For any row multipliers ``y``: ``(L, d)`` with ``d = c - A^T y`` and ``L`` a lower bound on
    ``c.x`` over every ``x`` within the columns' bounds and the rows' ranges: ``c.x = y.Ax + d.x``,
    and each term is bounded below by the bound its multiplier's sign selects (a multiplier whose
    side is unbounded counts as 0).  So the bound rests on HiGHS's duals only for its strength."""
    y_lo = np.where(np.isfinite(model.row_lo), np.maximum(y, 0.0), 0.0)
    y_hi = np.where(np.isfinite(model.row_hi), np.minimum(y, 0.0), 0.0)
    y = y_lo + y_hi  # the multipliers the identity uses: a sign whose side is unbounded counts as 0
    at_y = np.add.reduceat(model.value * y[model.index], model.starts[:-1])
    d = model.cost - at_y
    bound = float(np.dot(y_lo, np.where(np.isfinite(model.row_lo), model.row_lo, 0.0)))
    bound += float(np.dot(y_hi, np.where(np.isfinite(model.row_hi), model.row_hi, 0.0)))
    bound += float(np.dot(np.minimum(d, 0.0), model.upper))
    return bound, d


def _solve(
    sizes: Counter[int], graphs: list[tuple[FlowGraph, int]], time_limit: float, clock: Clock,
    options: dict[str, Any] | None = None, duals: Callable[[], dict[int, float] | None] | None = None,
) -> tuple[Status, list[Counter[int]] | None, dict[str, Any]]:
    """The LP (interior point), reduced-cost fixing, then with one capacity type and few patterns
    left the branch and bound over them (``binbranch``), else the MIP on what is left; the packing
    (decoded, still to be checked) when feasible.  ``graphs``: (graph, how many bins of its capacity).

    Fixing: with ``(L, d)`` from ``_lagrangian``, every packing into those bins has
    ``L + sum_j max(d_j, 0) x_j <= c.x <= B`` (``B``: the capacity of those bins).  The flow of
    each graph is a sum of source-sink paths (the bins), so the paths it uses weigh at most
    ``B - L`` in all under ``max(d, 0)``: an arc whose lightest path (``_through``) weighs more
    carries no flow, and the others at most ``(B - L) / that`` (a margin of ``_SAFETY`` on the
    side of keeping).  (The arc's own ``d_j`` alone fixed 3,655 of Hard28 BPP14's 19,672 arcs'
    complement; its paths leave 1,393.)
    With one capacity type the LP drops the limit on the flow (a relaxation: always feasible, and
    ``L > B`` is then the LP bound's proof); with several it keeps the limits per
    type (stronger), and an infeasible LP leaves the whole graph to the MIP."""
    import highspy

    opts = dict(options or {})
    deadline = clock.now() + time_limit
    model = _model(sizes, graphs)
    n_cols = len(model.cost)
    out: dict[str, Any] = {}
    given = duals() if duals is not None else None
    fixed = _path_fixing(model, sizes, graphs, given) if given else None
    if fixed is not None:
        out.update({"dual_bound": round(fixed[0], 6), "dual_mip_arcs": int(fixed[1].sum())})
        if sum(k * graph.capacity for graph, k in graphs) / graphs[0][0].capacity + _SAFETY < fixed[0]:
            out["reason"] = "dual bound"
            return "infeasible", None, out
        if fixed[1].sum() <= _FEW_MIP_ARCS:
            return _solve_mip(model, graphs, fixed[1], fixed[2], deadline, clock, opts, out)
    relaxed = model
    if len(graphs) == 1:
        row_hi = model.row_hi.copy()
        row_hi[-1] = np.inf  # the only source row is the last one
        relaxed = _Model(model.cost, model.upper, model.row_lo, row_hi, model.starts, model.index, model.value)
    lp = _highs(relaxed, np.ones(n_cols, dtype=bool), model.upper, integer=False, time_limit=time_limit,
                options={**_LP_OPTIONS, **opts.pop("lp", {})})
    lp.run()
    seconds = lp.getRunTime()
    clock.charge(seconds)
    out["lp_seconds"] = round(seconds, 3)
    keep = np.ones(n_cols, dtype=bool)
    upper = model.upper
    confirm: tuple[np.ndarray, np.ndarray] | None = None
    if lp.getModelStatus() == highspy.HighsModelStatus.kOptimal:
        bound, d = _lagrangian(relaxed, np.asarray(lp.getSolution().row_dual, dtype=np.float64))
        out["lp_bound"] = round(bound, 6)
        room = sum(k * graph.capacity for graph, k in graphs) / graphs[0][0].capacity - bound + _SAFETY
        if room < 0:
            out["reason"] = "LP bound"
            return "infeasible", None, out
        # The arc's own reduced cost: the model HiGHS without presolve confirms an infeasibility on
        # (on Hard28 BPP14 it took 4.5-9.3 s over four seeds; 4.8-26 s on the smaller model below).
        confirm = (d <= room, np.minimum(model.upper, np.where(d > _SAFETY, np.floor(room / np.maximum(d, _SAFETY)),
                                                                model.upper)))
        through = _through(graphs, np.maximum(d, 0.0))
        keep = through <= room
        cap = np.where(through > _SAFETY, np.floor(room / np.maximum(through, _SAFETY)), model.upper)
        upper = np.minimum(model.upper, cap)
        listed = _patterns(graphs, np.maximum(d, 0.0), room) if len(graphs) == 1 else None
        if listed is not None:
            found = branch_patterns(listed[0], listed[1], sizes, graphs[0][1], room, time_limit=clock.left(deadline),
                                    clock=clock, max_nodes=_MAX_BRANCH_NODES)
            out.update({"branch_" + key: value for key, value in found.stats.items()})
            if found.status == "infeasible":
                out["reason"] = "branch and bound"
                return "infeasible", None, out
            if found.status == "feasible":
                return "feasible", found.packing, out
            # else HiGHS's MIP below, with the time left
    if fixed is not None:  # both fixings are proofs: what both keep (the given duals' when the LP was cut)
        keep = keep & fixed[1]
        upper = np.minimum(upper, fixed[2])
    if clock.over(deadline):
        out["mip_arcs"] = int(keep.sum())
        return "unknown", None, out
    return _solve_mip(model, graphs, keep, upper, deadline, clock, opts, out, confirm)


def _solve_mip(model: _Model, graphs: list[tuple[FlowGraph, int]], keep: np.ndarray, upper: np.ndarray,
               deadline: float, clock: Clock, opts: dict[str, Any], out: dict[str, Any],
               confirm: tuple[np.ndarray, np.ndarray] | None = None,
               ) -> tuple[Status, list[Counter[int]] | None, dict[str, Any]]:
    """The MIP on the columns ``keep`` (bounds ``upper``), the rest fixed at 0 by a proof; an
    infeasibility is confirmed on ``confirm`` (columns, bounds: another proof's) when given, else on
    the same model."""
    import highspy

    n_cols = len(model.cost)
    out["mip_arcs"] = int(keep.sum())
    if out["mip_arcs"] > _MAX_MIP_ARCS:
        out["reason"] = "too many arcs left after fixing"
        return "unknown", None, out
    mip = _highs(model, keep, upper, integer=True, time_limit=clock.left(deadline), options={**_MIP_OPTIONS, **opts})
    mip.run()
    info = mip.getInfo()
    status = mip.getModelStatus()
    seconds = mip.getRunTime()
    clock.charge(seconds)
    out.update({"highs_status": mip.modelStatusToString(status), "mip_seconds": round(seconds, 3),
                "mip_nodes": int(info.mip_node_count)})
    if status == highspy.HighsModelStatus.kInfeasible:
        # Presolve is on for speed (a packing is checked anyway), but HiGHS 1.16 answered
        # "infeasible" wrongly after presolve on another model of ours (goals/milp.py): a proof
        # is claimed only once a run without presolve agrees (on ``confirm``, itself a proof's model).
        confirmed, seconds = _confirm_infeasible(model, *(confirm or (keep, upper)), clock.left(deadline), clock)
        out.update({"confirmed": confirmed, "confirm_seconds": round(seconds, 3)})
        return ("infeasible" if confirmed else "unknown"), None, out
    if info.primal_solution_status == 2:  # a feasible integer solution
        x = np.zeros(n_cols, dtype=np.int64)
        x[keep] = np.rint(np.asarray(mip.getSolution().col_value)).astype(np.int64)
        flows = []
        at = 0
        for graph, _ in graphs:
            flows.append(x[at : at + len(graph.arcs)])
            at += len(graph.arcs)
        return "feasible", _decode(graphs, flows), out
    return "unknown", None, out


def _through(graphs: list[tuple[FlowGraph, int]], weight: np.ndarray) -> np.ndarray:
    """Per arc (the graphs' arcs in turn, as ``weight``): the least ``weight`` (>= 0) of a source-sink
    path of its graph through it (shortest paths in a DAG whose nodes are numbered in topological order)."""
    out = np.empty(len(weight))
    at = 0
    for graph, _ in graphs:
        n, m = graph.n_nodes, len(graph.arcs)
        w = weight[at : at + m].tolist()
        tail = [a[0] for a in graph.arcs]
        head = [a[1] for a in graph.arcs]
        to = [np.inf] * n  # from the source to a node
        to[0] = 0.0
        for j in sorted(range(m), key=tail.__getitem__):
            to[head[j]] = min(to[head[j]], to[tail[j]] + w[j])
        on = [np.inf] * n  # from a node to the sink
        on[n - 1] = 0.0
        for j in sorted(range(m), key=lambda j: -head[j]):
            on[tail[j]] = min(on[tail[j]], w[j] + on[head[j]])
        out[at : at + m] = np.asarray(to)[tail] + weight[at : at + m] + np.asarray(on)[head]
        at += m
    return out


def _patterns(graphs: list[tuple[FlowGraph, int]], weight: np.ndarray, room: float,
              ) -> tuple[list[Counter[int]], list[float]] | None:
    """Every pattern of the (one) graph with a source-sink path of ``weight`` (>= 0, by arc) at most
    ``room``, with the least such weight: a depth-first walk cut where the lightest way on to the sink
    (``on``) leaves no room.  None beyond ``_MAX_PATTERNS`` patterns or ``_MAX_PATHS`` paths."""
    graph, _ = graphs[0]
    n = graph.n_nodes
    w = weight.tolist()
    on = [np.inf] * n  # the lightest path from a node to the sink
    on[n - 1] = 0.0
    out_arcs: list[list[tuple[int, int, float]]] = [[] for _ in range(n)]
    for j in sorted(range(len(graph.arcs)), key=lambda j: -graph.arcs[j][1]):
        tail, head, size = graph.arcs[j]
        on[tail] = min(on[tail], w[j] + on[head])
        out_arcs[tail].append((head, size, w[j]))
    best: dict[tuple[int, ...], float] = {}
    paths = 0
    stack: list[tuple[int, float, tuple[int, ...]]] = [(0, 0.0, ())]
    while stack:
        node, acc, content = stack.pop()
        if node == n - 1:
            paths += 1
            if content and acc < best.get(content, np.inf):
                best[content] = acc
            if paths > _MAX_PATHS or len(best) > _MAX_PATTERNS:
                return None
            continue
        for head, size, arc_weight in out_arcs[node]:
            if acc + arc_weight + on[head] <= room:
                stack.append((head, acc + arc_weight, (*content, size) if size else content))
    listed = sorted(best)
    return [Counter(p) for p in listed], [best[p] for p in listed]


def _path_fixing(model: _Model, sizes: Counter[int], graphs: list[tuple[FlowGraph, int]],
                 duals: dict[int, float]) -> tuple[float, np.ndarray, np.ndarray] | None:
    """Reduced-cost fixing from item duals alone: ``(L, keep, upper)``, or None when the duals are all 0.

    With ``pi_s`` per size (of any sign: the item rows are equalities), a bin of type ``t`` holding
    pattern ``p`` has reduced cost ``rc(p) = cost_t - pi.p`` (``cost_t``: its capacity over the largest).
    ``pi`` is first scaled by ``1 / V``, ``V`` the largest ``pi.p / cost_t`` over the paths of every graph (the longest
    path from the source, with weight ``pi_s`` on an item arc: every path is a pattern), so that no
    bin's reduced cost is negative (Farley's scaling).  Then for every packing into the bins of
    ``graphs`` (item rows equalities): ``sum over its bins of rc = c.x - pi.d <= B - L`` with
    ``L = pi.d`` and ``B`` the capacity of those bins (``_solve``'s objective), each term ``>= 0``.
    Every bin is a path; an arc ``(u, v, s)`` lies only on paths of reduced cost at least
    ``cost_t - (phi(u) + pi_s + psi(v))`` (``phi``: longest path from the source to ``u``,
    ``psi``: from ``v`` to the sink).  So an arc whose best path costs more than ``B - L`` carries
    no flow, and the others at most ``(B - L) / that`` (a margin of ``_SAFETY`` on the side of keeping)."""
    cmax = graphs[0][0].capacity
    pi = {s: float(duals.get(s, 0.0)) for s in sizes}
    paths: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # per graph: phi(tail), pi_s, psi(head)
    scale = 0.0
    for graph, _ in graphs:
        n = graph.n_nodes
        tail = np.fromiter((a[0] for a in graph.arcs), dtype=np.int64, count=len(graph.arcs))
        head = np.fromiter((a[1] for a in graph.arcs), dtype=np.int64, count=len(graph.arcs))
        weight = np.fromiter((pi.get(a[2], 0.0) for a in graph.arcs), dtype=np.float64, count=len(graph.arcs))
        phi = [-np.inf] * n  # nodes are numbered in topological order: tail < head
        psi = [-np.inf] * n
        phi[0] = psi[n - 1] = 0.0
        for t, h, w in sorted(zip(tail.tolist(), head.tolist(), weight.tolist(), strict=True)):
            phi[h] = max(phi[h], phi[t] + w)
        for t, h, w in sorted(zip(tail.tolist(), head.tolist(), weight.tolist(), strict=True),
                              key=lambda a: -a[1]):
            psi[t] = max(psi[t], w + psi[h])
        scale = max(scale, psi[0] / (graph.capacity / cmax))
        paths.append((np.asarray(phi)[tail], weight, np.asarray(psi)[head]))
    if scale <= 0.0:
        return None
    bound = sum(pi[s] * c for s, c in sizes.items()) / scale
    room = sum(k * graph.capacity for graph, k in graphs) / cmax - bound + _SAFETY
    rc = np.concatenate([graph.capacity / cmax - (phi + w + psi) / scale
                         for (graph, _), (phi, w, psi) in zip(graphs, paths, strict=True)])
    keep = rc <= room
    cap = np.where(rc > _SAFETY, np.floor(max(room, 0.0) / np.maximum(rc, _SAFETY)), model.upper)
    return bound, keep, np.minimum(model.upper, cap)


def _confirm_infeasible(model: _Model, keep: np.ndarray, upper: np.ndarray, time_limit: float,
                        clock: Clock) -> tuple[bool, float]:
    """Whether HiGHS without presolve proves the MIP on the ``keep`` columns (bounds ``upper``)
    infeasible within ``time_limit``; and its seconds."""
    import highspy

    mip = _highs(model, keep, upper, integer=True, time_limit=max(0.01, time_limit),
                 options={**_MIP_OPTIONS, "presolve": "off"})
    mip.run()
    seconds = mip.getRunTime()
    clock.charge(seconds)
    return mip.getModelStatus() == highspy.HighsModelStatus.kInfeasible, seconds


def _decode(graphs: list[tuple[FlowGraph, int]], flows: list[np.ndarray]) -> list[Counter[int]] | None:
    """Flow decomposition: each source-sink path is a bin.  Bins in the order of their graph's
    capacity (descending), fullest first within one; None when the flow is not a valid one."""
    bins: list[tuple[int, int, Counter[int]]] = []
    for (graph, _), flow in zip(graphs, flows, strict=True):
        if (flow < 0).any():
            return None
        left = flow.copy()
        out_arcs: dict[int, list[int]] = {}
        for j, (tail, _, _) in enumerate(graph.arcs):
            out_arcs.setdefault(tail, []).append(j)
        sink = graph.n_nodes - 1
        while True:
            arc = next((j for j in out_arcs.get(0, []) if left[j] > 0), None)
            if arc is None:
                break
            content: Counter[int] = Counter()
            while arc is not None:
                left[arc] -= 1
                _, head, size = graph.arcs[arc]
                if size:
                    content[size] += 1
                if head == sink:
                    break
                arc = next((j for j in out_arcs.get(head, []) if left[j] > 0), None)
            else:
                return None  # flow not conserved
            if content:
                bins.append((-graph.capacity, -sum(s * c for s, c in content.items()), content))
        if left.any():
            return None
    return [content for _, _, content in sorted(bins, key=lambda b: (b[0], b[1], sorted(b[2].items())))]


def _valid(packing: list[Counter[int]], sizes: Counter[int], caps_desc: Sequence[int]) -> bool:
    """Every item exactly once, bin ``b`` within ``caps_desc[b]``."""
    if len(packing) > len(caps_desc):
        return False
    total: Counter[int] = Counter()
    for b, content in enumerate(packing):
        if sum(s * c for s, c in content.items()) > caps_desc[b]:
            return False
        total.update(content)
    return +total == +sizes

