"""Tests for the arc-flow MIP (binflow.flow_pack): it proves exactly the bin counts below the optimum
infeasible, returns valid packings otherwise, and its compressed graph holds exactly the patterns."""

from __future__ import annotations

import itertools
import random
from collections import Counter
from functools import partial

import numpy as np
import pytest

from optplan.experiments.bench import read_bpplib
from optplan.solvers.binpack import binflow
from optplan.solvers.binpack.binflow import FlowGraph, flow_graph, flow_pack
from optplan.solvers.binpack.binlp import GilmoreGomory
from optplan.solvers.binpack.binpacking import min_bins
from optplan.solvers.core.clock import Clock
from tests.binpack.test_binpacking import BPPLIB, brute_force_min_bins


def packs(packing: list[Counter[int]], items: list[int], caps_desc: list[int]) -> bool:
    """Every item exactly once; bin ``b`` within ``caps_desc[b]``."""
    total: Counter[int] = Counter()
    for b, content in enumerate(packing):
        if b >= len(caps_desc) or sum(s * c for s, c in content.items()) > caps_desc[b]:
            return False
        total.update(content)
    return total == Counter(items)


def solve(items: list[int], caps_desc: list[int], bins: int) -> binflow.FlowOutcome:
    return flow_pack(Counter(items), caps_desc, bins, time_limit=30.0, clock=Clock(deterministic=True, limit=30.0))


def random_instance(seed: int) -> tuple[list[int], list[int]]:
    """Even seeds: identical bins; odd seeds: two or three capacity types."""
    rng = random.Random(seed)
    cap = rng.randint(8, 30)
    if seed % 2 == 0:
        caps = [cap] * 10
    else:
        kinds = rng.sample(range(cap // 2, cap + 1), rng.randint(2, 3))
        caps = sorted((rng.choice(kinds) for _ in range(10)), reverse=True)
    n = rng.randint(3, 6) if seed < 30 else rng.randint(8, 14)
    items = [rng.randint(1, caps[0] // rng.choice((1, 2, 3))) for _ in range(n)]
    return items, caps


@pytest.mark.parametrize("seed", range(60))
def test_infeasible_exactly_below_the_optimum(seed: int) -> None:
    """Against brute force (up to 6 items) or min_bins (proven; CP-SAT on tiny inputs): one bin fewer
    than the optimum is proven infeasible, the optimum gives a valid packing."""
    items, caps = random_instance(seed)
    if len(items) <= 6:
        best = brute_force_min_bins(items, caps[: len(items)])  # the largest bins suffice
    else:
        try:
            result = min_bins(items, caps, time_limit=30, workers=1)
        except ValueError:  # the bins cannot hold the items
            best = None
        else:
            assert result.proven
            best = result.value
    if best is None:
        assert solve(items, caps, len(caps)).status == "infeasible"
        return
    at_best = solve(items, caps, best)
    assert at_best.status == "feasible"
    assert at_best.packing is not None and packs(at_best.packing, items, caps)
    below = solve(items, caps, best - 1)
    assert below.status == "infeasible"
    assert below.packing is None


def test_heterogeneous_bins_use_the_largest_first() -> None:
    """Capacities 10, 6, 6: items 6, 6, 4 fit into two bins only as 10 = 6 + 4 and 6 (the first two
    capacities); 6, 6, 5 need all three."""
    out = solve([6, 6, 4], [10, 6, 6], 2)
    assert out.status == "feasible" and out.packing is not None
    assert packs(out.packing, [6, 6, 4], [10, 6])
    assert solve([6, 6, 5], [10, 6, 6], 2).status == "infeasible"
    assert solve([6, 6, 5], [10, 6, 6], 3).status == "feasible"


def test_an_item_too_big_or_too_much_in_total_is_infeasible() -> None:
    assert solve([11], [10, 10], 2).status == "infeasible"
    assert solve([7, 7, 7], [10, 10, 10], 2).status == "infeasible"
    assert solve([], [10], 0).status == "feasible"


def _paths(graph: FlowGraph) -> list[Counter[int]]:
    """Every source-sink path's items (small graphs only)."""
    out_arcs: dict[int, list[tuple[int, int]]] = {}
    for t, h, s in graph.arcs:
        out_arcs.setdefault(t, []).append((h, s))
    found: list[Counter[int]] = []

    def walk(v: int, content: Counter[int]) -> None:
        if v == graph.n_nodes - 1:
            found.append(+content)
            return
        for h, s in out_arcs.get(v, []):
            walk(h, content + Counter({s: 1}) if s else content)

    walk(0, Counter())
    return found


@pytest.mark.parametrize("seed", range(12))
def test_the_compressed_graph_holds_exactly_the_patterns(seed: int) -> None:
    """Every path fits the capacity (the compression's soundness; merged nodes may let a path hold
    more copies of a size than its demand, which the model's item equalities exclude), and every
    pattern (at most the demand of each size, fitting) is a path (nothing lost)."""
    rng = random.Random(100 + seed)
    cap = rng.randint(10, 40)
    sizes = Counter(rng.randint(2, cap) for _ in range(rng.randint(2, 7)))
    graph = flow_graph(sizes, cap)
    assert graph is not None
    paths = _paths(graph)
    assert all(sum(s * c for s, c in p.items()) <= cap for p in paths)
    have = {tuple(sorted(p.items())) for p in paths}
    order = sorted(sizes)
    for counts in itertools.product(*(range(min(sizes[s], cap // s) + 1) for s in order)):
        if sum(s * c for s, c in zip(order, counts, strict=True)) <= cap:
            pattern = tuple((s, c) for s, c in zip(order, counts, strict=True) if c)
            assert pattern in have
    assert graph.n_nodes <= cap + 1 and len(graph.arcs) <= graph.state_arcs


def test_a_flow_that_does_not_decode_is_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    """A solver answer that is not a packing of exactly the items is never returned as one."""

    def broken(sizes: Counter[int], graphs: list[tuple[FlowGraph, int]], *args: object,
               **kwargs: object) -> tuple[str, list[Counter[int]] | None, dict[str, object]]:
        return "feasible", [Counter({5: 1, 4: 1, 3: 1})], {}  # 12 units in a bin of 10

    def short(sizes: Counter[int], graphs: list[tuple[FlowGraph, int]], *args: object,
              **kwargs: object) -> tuple[str, list[Counter[int]] | None, dict[str, object]]:
        return "feasible", [Counter({5: 1, 4: 1})], {}  # the 3 is missing

    for wrong in (broken, short):
        monkeypatch.setattr(binflow, "_solve", wrong)
        out = solve([5, 4, 3], [10, 10], 2)
        assert out.status == "unknown" and out.packing is None


def test_a_time_out_is_never_a_proof() -> None:
    """Without budget, at the optimum: "unknown" (or a packing), never "infeasible"."""
    rng = random.Random(7)
    items = [rng.randint(20, 60) for _ in range(60)]
    best = min_bins(items, [100] * 60, time_limit=20, workers=1)
    assert best.proven
    out = flow_pack(Counter(items), [100] * 60, best.value, time_limit=0.0, clock=Clock())
    assert out.status in ("unknown", "feasible")


@pytest.mark.skipif(not (BPPLIB / "instance_index.csv").is_file(), reason=f"BPPLIB data not found at {BPPLIB}")
def test_bpplib_hard28_bpp119_proven_above_its_lp_bound() -> None:
    """Hard28's BPP119 is not IRUP: its LP bound rounds up to 76, the optimum is 77.  The branch and
    bound over the patterns the LP leaves proves 76 bins impossible (about 1 s).  (A packing into 77
    is the heuristics' job.)"""
    weights, capacity = read_bpplib(BPPLIB / "instances" / "Hard28" / "Hard28_BPP119.txt")
    n = len(weights)
    out = solve(weights, [capacity] * n, 76)
    assert out.status == "infeasible" and out.stats["reason"] == "branch and bound"
    assert out.stats["arcs"] < out.stats["state_arcs"] / 3  # the compression


def _gg_duals(items: list[int], caps_desc: list[int], target: int) -> dict[int, float] | None:
    """The Gilmore-Gomory LP's item duals, solved on to its optimum (what ``min_bins`` hands ``flow_pack``)."""
    clock = Clock(deterministic=True, limit=30.0)
    lp = GilmoreGomory.create(Counter(items), caps_desc, clock)
    assert lp is not None
    lp.bound(target, 10.0)
    return lp.duals(10.0)


@pytest.mark.parametrize("seed", range(30, 60))
def test_fixing_by_given_duals_proves_exactly_below_the_optimum(seed: int) -> None:
    """With the LP's duals (and with random duals of either sign: the fixing is a proof for any),
    the optimum still gives a packing and one bin fewer is still infeasible."""
    items, caps = random_instance(seed)
    try:
        result = min_bins(items, caps, time_limit=30, workers=1)
    except ValueError:  # the bins cannot hold the items
        return
    assert result.proven
    rng = random.Random(seed)
    gg = _gg_duals(items, caps, result.value)
    for duals in (gg, {s: rng.uniform(-0.5, 1.0) for s in set(items)}):
        if not duals:
            continue
        clock = Clock(deterministic=True, limit=30.0)
        given = partial(dict, duals)
        at_best = flow_pack(Counter(items), caps, result.value, time_limit=30.0, clock=clock, duals=given)
        assert at_best.status == "feasible" and "dual_mip_arcs" in at_best.stats
        assert at_best.packing is not None and packs(at_best.packing, items, caps)
        below = flow_pack(Counter(items), caps, result.value - 1, time_limit=30.0, clock=clock, duals=given)
        assert below.status == "infeasible"


def test_the_lightest_path_through_an_arc() -> None:
    """Arcs 0->1 (1), 1->3 (5), 0->2 (2), 2->3 (0), 1->2 (0): the lightest path through 1->3 weighs 6,
    through 1->2 weighs 1 + 0 + 0."""
    graph = FlowGraph(10, 4, [(0, 1, 3), (0, 2, 4), (1, 2, 0), (1, 3, 5), (2, 3, 0)], 0, 0)
    weight = np.array([1.0, 2.0, 0.0, 5.0, 0.0])
    assert binflow._through([(graph, 1)], weight).tolist() == [1.0, 2.0, 1.0, 6.0, 1.0]


@pytest.mark.skipif(not (BPPLIB / "instance_index.csv").is_file(), reason=f"BPPLIB data not found at {BPPLIB}")
def test_bpplib_waescher_test0014_packed_with_the_lp_duals() -> None:
    """TEST0014 (96 items, capacity 10,000, 23 bins may waste 29 in all): the arc-flow graph has
    58,425 arcs, whose own LP took 18 s; the Gilmore-Gomory duals leave about 1,000 of them and
    the MIP finds the 23-bin packing."""
    weights, capacity = read_bpplib(BPPLIB / "instances" / "Waescher" / "Waescher_TEST0014.txt")
    caps = [capacity] * len(weights)
    duals = _gg_duals(weights, caps, 24)
    out = flow_pack(Counter(weights), caps, 23, time_limit=60.0, clock=Clock(), duals=partial(dict, duals))
    assert out.status == "feasible" and out.packing is not None and packs(out.packing, weights, caps)
    assert out.stats["dual_mip_arcs"] < 5_000 and "lp_seconds" not in out.stats


@pytest.mark.skipif(not (BPPLIB / "instance_index.csv").is_file(), reason=f"BPPLIB data not found at {BPPLIB}")
def test_an_infeasibility_is_confirmed_on_a_model_holding_the_mips(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hard28 BPP119 in 76 bins, by HiGHS's MIP (the patterns not listed for the branch and bound):
    the run without presolve confirms on the model of the arcs' own reduced costs, which holds every
    arc the MIP kept (the lightest paths fix more): both are proofs, and the claim rests on the
    confirmation."""
    monkeypatch.setattr(binflow, "_MAX_PATTERNS", 0)
    seen: list[int] = []
    confirm = binflow._confirm_infeasible

    def spy(model: binflow._Model, keep: np.ndarray, upper: np.ndarray, time_limit: float,
            clock: Clock) -> tuple[bool, float]:
        seen.append(int(keep.sum()))
        return confirm(model, keep, upper, time_limit, clock)

    monkeypatch.setattr(binflow, "_confirm_infeasible", spy)
    weights, capacity = read_bpplib(BPPLIB / "instances" / "Hard28" / "Hard28_BPP119.txt")
    out = solve(weights, [capacity] * len(weights), 76)
    assert out.status == "infeasible" and out.stats["confirmed"]
    assert len(seen) == 1 and out.stats["mip_arcs"] < seen[0] < out.stats["arcs"]
