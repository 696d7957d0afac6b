"""Tests for the branch and bound over patterns (binbranch.branch_patterns): on random small inputs its
answer equals a brute force over every partition of the items, a packing it returns is one, and a
deliberately weakened bound makes the comparison fail (the tests can see a wrong proof)."""

from __future__ import annotations

import itertools
import random
from collections import Counter
from collections.abc import Iterator

import numpy as np
import pytest

from optplan.solvers.binpack import binbranch, binflow
from optplan.solvers.binpack.binbranch import branch_patterns
from optplan.solvers.binpack.binflow import flow_pack
from optplan.solvers.core.clock import Clock

Case = tuple[list[int], list[Counter[int]], list[float], int, float]


def partitions(items: list[int]) -> Iterator[list[list[int]]]:
    """Every partition of the list ``items`` into non-empty blocks."""
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for part in partitions(rest):
        yield [[first], *part]
        for i in range(len(part)):
            yield [*part[:i], [first, *part[i]], *part[i + 1:]]


def brute_force(items: list[int], patterns: list[Counter[int]], rc: list[float], bins: int, room: float) -> bool:
    """Whether some partition of the items into at most ``bins`` blocks uses listed patterns only,
    their reduced costs adding up to at most ``room``."""
    cost = {tuple(sorted(p.elements())): c for p, c in zip(patterns, rc, strict=True)}
    for part in partitions(items):
        if len(part) > bins:
            continue
        keys = [tuple(sorted(block)) for block in part]
        if all(k in cost for k in keys) and sum(cost[k] for k in keys) <= room + 1e-9:
            return True
    return False


def all_patterns(items: list[int], capacity: int) -> list[Counter[int]]:
    """Every multiset of the items (within their counts) of total at most ``capacity``."""
    demand = Counter(items)
    sizes = sorted(demand)
    out = []
    for counts in itertools.product(*(range(demand[s] + 1) for s in sizes)):
        pattern = Counter({s: c for s, c in zip(sizes, counts, strict=True) if c})
        if pattern and sum(s * c for s, c in pattern.items()) <= capacity:
            out.append(pattern)
    return out


def random_case(seed: int) -> Case:
    """Up to 7 items; a random share of the patterns listed, random reduced costs, a random room."""
    rng = random.Random(seed)
    capacity = rng.randint(6, 20)
    items = [rng.randint(1, capacity) for _ in range(rng.randint(2, 7))]
    patterns = [p for p in all_patterns(items, capacity) if rng.random() < 0.8 or sum(p.values()) == 1]
    rc = [rng.choice((0.0, 0.0, 0.1, 0.25, 0.5)) for _ in patterns]
    bins = rng.randint(1, len(items))
    room = rng.choice((0.0, 0.2, 0.5, 1.0))
    return items, patterns, rc, bins, room


def check(case: Case) -> bool:
    """Whether branch_patterns agrees with the brute force (and its packing is one)."""
    items, patterns, rc, bins, room = case
    out = branch_patterns(patterns, rc, Counter(items), bins, room, time_limit=30.0,
                          clock=Clock(deterministic=True, limit=30.0))
    assert out.status != "unknown"
    if out.status == "feasible":
        assert out.packing is not None and len(out.packing) <= bins
        assert sum(out.packing, Counter()) == Counter(items)
        listed = {tuple(sorted(p.elements())): c for p, c in zip(patterns, rc, strict=True)}
        assert all(tuple(sorted(b.elements())) in listed for b in out.packing)
    return (out.status == "feasible") == brute_force(items, patterns, rc, bins, room)


@pytest.mark.parametrize("seed", range(150))
def test_agrees_with_brute_force(seed: int) -> None:
    assert check(random_case(seed))


def test_a_weakened_bound_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bound raised by half a bin (no longer a proof) gives wrong "infeasible" answers that the
    brute-force comparison above sees."""
    bound = binbranch._Search.bound

    def weakened(self: binbranch._Search, r: np.ndarray, room: float,
                 ub: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        value, x, red = bound(self, r, room, ub)
        return value + 0.5, x, red

    monkeypatch.setattr(binbranch._Search, "bound", weakened)
    assert not all(check(random_case(seed)) for seed in range(150))


def test_a_weakened_branching_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Leaving out a pattern that was never tried (a branching that misses packings) is seen too."""
    monkeypatch.setattr(binbranch, "_SAFETY", -0.05)  # patterns within 0.05 of the room are dropped
    assert not all(check(random_case(seed)) for seed in range(150))


def test_too_many_bins_is_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    """The search recurses once per bin: beyond ``_MAX_BINS`` it does not start."""
    monkeypatch.setattr(binbranch, "_MAX_BINS", 1)
    items = [3, 3, 3, 4, 4, 5]
    patterns = all_patterns(items, 10)
    out = branch_patterns(patterns, [0.0] * len(patterns), Counter(items), 2, 0.0, time_limit=10.0,
                          clock=Clock(deterministic=True, limit=10.0))
    assert out.status == "unknown"


def test_too_many_patterns_are_not_listed(monkeypatch: pytest.MonkeyPatch) -> None:
    """binflow's listing gives up beyond ``_MAX_PATTERNS`` (HiGHS's MIP then decides)."""
    graph = binflow.flow_graph(Counter([3, 3, 3, 4, 4, 5]), 10)
    assert graph is not None
    weight = np.zeros(len(graph.arcs))
    assert binflow._patterns([(graph, 6)], weight, 0.0) is not None
    monkeypatch.setattr(binflow, "_MAX_PATTERNS", 1)
    assert binflow._patterns([(graph, 6)], weight, 0.0) is None


def test_out_of_time_is_unknown() -> None:
    items = [3, 3, 3, 4, 4, 5]
    out = branch_patterns(all_patterns(items, 10), [0.0] * len(all_patterns(items, 10)), Counter(items), 2, 0.0,
                          time_limit=0.0, clock=Clock(deterministic=True, limit=1.0))
    assert out.status == "unknown" and out.packing is None


@pytest.mark.parametrize("max_nodes", [1_000, 0])
def test_flow_pack_packs_and_proves_through_the_branch_and_bound(monkeypatch: pytest.MonkeyPatch,
                                                                 max_nodes: int) -> None:
    """Through flow_pack on random small inputs: at the optimum (brute force) the packing comes from the
    branch and bound over the listed patterns, one bin fewer is proven impossible; the same when the
    branch and bound stops at once (HiGHS's MIP then decides)."""
    monkeypatch.setattr(binflow, "_MAX_BRANCH_NODES", max_nodes)
    rng = random.Random(3)
    by_branching = 0
    for _ in range(60):
        capacity = rng.randint(10, 30)
        items = [rng.randint(capacity // 5, capacity // 2 + 2) for _ in range(rng.randint(5, 8))]
        caps = [capacity] * len(items)
        best = brute_force_bins(items, capacity)
        out = flow_pack(Counter(items), caps, best, time_limit=30.0, clock=Clock(deterministic=True, limit=30.0))
        assert out.status == "feasible" and out.packing is not None and len(out.packing) <= best
        assert sum(out.packing, Counter()) == Counter(items)
        by_branching += "branch_nodes" in out.stats and "mip_nodes" not in out.stats
        below = flow_pack(Counter(items), caps, best - 1, time_limit=30.0, clock=Clock(deterministic=True, limit=30.0))
        assert below.status == "infeasible"
    assert by_branching > 30 if max_nodes else by_branching == 0


def test_listed_patterns_are_exactly_those_within_the_room() -> None:
    """binflow's listing: every pattern with a source-sink path of weight within the room, at its
    lightest path's weight (against a walk over every path)."""
    rng = random.Random(5)
    for _ in range(20):
        capacity = rng.randint(8, 20)
        items = Counter(rng.randint(1, capacity) for _ in range(rng.randint(3, 8)))
        graph = binflow.flow_graph(items, capacity)
        assert graph is not None
        weight = np.asarray([rng.choice((0.0, 0.1, 0.3, 1.0)) for _ in graph.arcs])
        room = rng.choice((0.0, 0.3, 0.7, 2.0))
        listed = binflow._patterns([(graph, len(items))], weight, room)
        assert listed is not None
        got = {tuple(sorted(p.elements())): w for p, w in zip(*listed, strict=True)}
        want: dict[tuple[int, ...], float] = {}
        stack: list[tuple[int, float, tuple[int, ...]]] = [(0, 0.0, ())]
        while stack:
            node, acc, content = stack.pop()
            if node == graph.n_nodes - 1:
                key = tuple(sorted(content))
                if content and acc <= room and acc < want.get(key, np.inf):
                    want[key] = acc
                continue
            for j, (tail, head, size) in enumerate(graph.arcs):
                if tail == node:
                    stack.append((head, acc + weight[j], (*content, size) if size else content))
        assert got.keys() == want.keys()
        assert all(abs(got[k] - want[k]) < 1e-9 for k in want)


def brute_force_bins(items: list[int], capacity: int) -> int:
    return min(len(part) for part in partitions(items) if all(sum(block) <= capacity for block in part))
