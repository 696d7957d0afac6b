"""Do the items fit into ``bins`` identical bins, given every pattern that may be used? A branch and bound of our own.

``binflow`` reaches it on the instances whose arc-flow LP falls just short of the bins (Hard28's
non-IRUP ones: BPP14's LP is 60.997 for 61 bins).  Its LP's duals give every pattern (a bin's
contents) a reduced cost ``rc >= 0``, and every packing into ``bins`` bins uses patterns whose
reduced costs add up to at most ``room`` (``bins`` minus the LP's Lagrangian bound): with such a
small room only a few hundred patterns qualify, and ``binflow`` lists them all.  This module decides
the set partitioning over that list: pick at most ``bins`` patterns (with repetition) whose items
are exactly the demand and whose reduced costs add up to at most ``room``.

**The search.**  Depth first.  At a node (some patterns fixed, ``r`` items left, ``B`` bins and ``R``
room left) the LP "fewest patterns covering ``r`` exactly, reduced costs within ``R``" is solved by
HiGHS (an artificial column per item makes it always feasible); from its duals ``y`` (items) and
``z <= 0`` (room) we compute, ourselves, the Lagrangian bound
``L = y.r + z R + sum_p min(0, 1 - y.a_p - z rc_p) ub_p`` (``ub_p``: how many copies of ``p`` the
items left allow), a lower bound on the patterns needed that holds for *any* ``y`` and ``z <= 0``
(``sum x = (yA + z rc + red).x``, and ``rc.x <= R``).  So the node is cut when ``L > B``, and a
pattern whose ``red_p = 1 - y.a_p - z rc_p`` exceeds ``B - L`` is left out below it (one copy alone
would need more than ``B``).  HiGHS's duals give the bound its strength, never its validity.
Branching: the item size with the fewest patterns left that can hold it; a child per such pattern
("one more bin holds this pattern"), and a pattern once tried is left out of its later siblings
("... and it is not used at all"): each packing lies below exactly one child, so "no packing" is
proven when the root's children are all cut.  A packing found is returned and checked by the caller.
On BPP14: 824 patterns, 434 nodes, 1.1 s.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from optplan.solvers.core.clock import Clock
from optplan.solvers.core.highs import quiet

__all__ = ["BranchOutcome", "branch_patterns"]

logger = logging.getLogger(__name__)

_SAFETY = 1e-6  # a bound counts as above ``B`` (a reduced cost as above ``B - L``) only beyond this margin
_ARTIFICIAL = 1_000.0  # cost of an artificial column (the LP stays feasible; its duals stay bounded)
_SECONDS_PER_NODE = 3e-3  # charged to deterministic clocks (BPP14: 434 nodes in 1.1 s)
_MAX_BINS = 400  # the search recurses once per bin: beyond, "unknown" (Python's recursion limit is 1,000)

Status = Literal["infeasible", "feasible", "unknown"]


@dataclass
class BranchOutcome:
    """``status``: "infeasible" (proven), "feasible" (``packing``: one Counter per bin), "unknown"
    (the budget ran out, or more than ``_MAX_BINS`` bins)."""

    status: Status
    packing: list[Counter[int]] | None = None
    stats: dict[str, Any] = field(default_factory=dict)


def branch_patterns(
    patterns: Sequence[Counter[int]], rc: Sequence[float], demand: Counter[int], bins: int, room: float, *,
    time_limit: float, clock: Clock, max_nodes: int | None = None,
) -> BranchOutcome:
    """At most ``bins`` patterns (each a bin's contents, any number of copies) holding exactly the
    items ``demand`` (size -> count) with reduced costs ``rc`` (>= 0, one per pattern) adding up to at
    most ``room``: found, proven impossible, or unknown after ``time_limit`` seconds of ``clock``
    (charged ``_SECONDS_PER_NODE`` per node) or ``max_nodes`` nodes."""
    if bins > _MAX_BINS:
        return BranchOutcome("unknown", None, {"patterns": len(patterns), "reason": "too many bins"})
    sizes = sorted(demand, reverse=True)
    row = {s: i for i, s in enumerate(sizes)}
    n_rows, n_cols = len(sizes), len(patterns)
    a = np.zeros((n_rows, n_cols))
    for j, pattern in enumerate(patterns):
        for s, c in pattern.items():
            if s not in row:
                raise ValueError(f"pattern {j} holds size {s}, which is not demanded")
            a[row[s], j] = c
    search = _Search(a, np.asarray(rc, dtype=np.float64), clock, clock.now() + time_limit, max_nodes)
    r = np.asarray([float(demand[s]) for s in sizes])
    chosen: list[int] = []
    try:
        found = search.node(r, float(bins), float(room), np.ones(n_cols, dtype=bool), chosen)
    except _OutOfTime:
        found = None
    stats = {"patterns": n_cols, "nodes": search.nodes}
    if found is None:
        return BranchOutcome("unknown", None, stats)
    if not found:
        return BranchOutcome("infeasible", None, stats)
    return BranchOutcome("feasible", [+Counter(patterns[j]) for j in chosen], stats)


class _OutOfTime(Exception):
    pass


class _Search:
    """The LP (HiGHS, kept between nodes for its warm start) and the depth-first search."""

    def __init__(self, a: np.ndarray, rc: np.ndarray, clock: Clock, deadline: float, max_nodes: int | None) -> None:
        import highspy

        self.a, self.rc, self.clock, self.deadline = a, rc, clock, deadline
        self.max_nodes = max_nodes
        self.nodes = 0
        n_rows, n_cols = a.shape
        with quiet():
            self.highs = highspy.Highs()
        self.highs.setOptionValue("output_flag", False)
        self.highs.setOptionValue("threads", 1)
        self.highs.setOptionValue("random_seed", 0)
        full = np.vstack([np.hstack([a, np.eye(n_rows)]), np.concatenate([rc, np.zeros(n_rows)])])
        lp = highspy.HighsLp()
        lp.num_col_ = n_cols + n_rows
        lp.num_row_ = n_rows + 1
        lp.col_cost_ = np.concatenate([np.ones(n_cols), np.full(n_rows, _ARTIFICIAL)])
        lp.col_lower_ = np.zeros(n_cols + n_rows)
        lp.col_upper_ = np.full(n_cols + n_rows, np.inf)
        lp.row_lower_ = np.zeros(n_rows + 1)
        lp.row_upper_ = np.zeros(n_rows + 1)
        nz = [np.flatnonzero(full[:, j]) for j in range(n_cols + n_rows)]
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_ = np.concatenate([[0], np.cumsum([len(x) for x in nz])]).astype(np.int32)
        lp.a_matrix_.index_ = np.concatenate(nz).astype(np.int32)
        lp.a_matrix_.value_ = np.concatenate([full[x, j] for j, x in enumerate(nz)])
        self.highs.passModel(lp)
        self.cols = np.arange(n_cols, dtype=np.int32)
        self.rows = np.arange(n_rows + 1, dtype=np.int32)

    def bound(self, r: np.ndarray, room: float, ub: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        """``(L, x, red)``: the Lagrangian bound (module docstring) from the node LP's duals, its
        solution on the patterns and the patterns' reduced costs."""
        import highspy

        n_rows, n_cols = self.a.shape
        self.highs.changeColsBounds(n_cols, self.cols, np.zeros(n_cols), ub)
        self.highs.changeRowsBounds(  # type: ignore[attr-defined]  # in highspy, not in its stub
            n_rows + 1, self.rows, np.concatenate([r, [-np.inf]]), np.concatenate([r, [room]]))
        self.highs.run()
        if self.highs.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            return -np.inf, np.zeros(n_cols), np.zeros(n_cols)  # no bound: the node is branched on
        sol = self.highs.getSolution()
        duals = np.asarray(sol.row_dual, dtype=np.float64)
        y, z = duals[:n_rows], min(0.0, float(duals[n_rows]))
        red = 1.0 - y @ self.a - z * self.rc
        bound = float(y @ r) + z * room + float(np.dot(np.minimum(red, 0.0), ub))
        return bound, np.asarray(sol.col_value[:n_cols], dtype=np.float64), red

    def node(self, r: np.ndarray, bins: float, room: float, allowed: np.ndarray, chosen: list[int]) -> bool:
        """Whether the items ``r`` fit into ``bins`` of the ``allowed`` patterns within ``room``; the
        patterns of a packing found are appended to ``chosen``."""
        self.nodes += 1
        self.clock.charge(_SECONDS_PER_NODE)
        if self.clock.over(self.deadline) or (self.max_nodes is not None and self.nodes > self.max_nodes):
            raise _OutOfTime
        if not r.any():
            return True
        if bins < 1:
            return False
        fits = allowed & (self.rc <= room + _SAFETY) & np.all(self.a <= r[:, None], axis=0)
        with np.errstate(divide="ignore", invalid="ignore"):
            copies = np.min(np.where(self.a > 0, r[:, None] / np.where(self.a > 0, self.a, 1.0), np.inf), axis=0)
        ub = np.where(fits, np.floor(np.minimum(copies, bins)), 0.0)
        bound, x, red = self.bound(r, room, ub)
        if bound > bins + _SAFETY:
            return False
        allowed = fits & ~(red > bins - bound + _SAFETY)
        left = np.flatnonzero(r > 0)
        held = self.a[left][:, allowed] > 0
        i = int(left[int(np.argmin(held.sum(axis=1)))])  # the first of the sizes with the fewest holders
        holders = np.flatnonzero(allowed & (self.a[i] > 0))
        for j in sorted(holders.tolist(), key=lambda j: (-x[j], self.rc[j], j)):
            chosen.append(j)
            if self.node(r - self.a[:, j], bins - 1, room - self.rc[j], allowed, chosen):
                return True
            chosen.pop()
            allowed[j] = False
        return False
