"""Tests for optplan.solvers.binpack.binpacking.min_bins."""

from __future__ import annotations

import itertools
import os
import random
import time
from pathlib import Path

import pytest

from optplan.experiments.bench import read_bpplib
from optplan.solvers.binpack import binpacking
from optplan.solvers.binpack.binpacking import BinPackingResult, min_bins

# The BPPLIB data beside the repository (../shared/data/bpplib), or where OPTPLAN_BPPLIB says.
BPPLIB = Path(os.environ.get("OPTPLAN_BPPLIB") or Path(__file__).resolve().parents[3] / "shared" / "data" / "bpplib")


def brute_force_min_bins(items: list[int], capacities: list[int]) -> int | None:
    """Exact answer by trying every assignment of items to bins (tiny inputs only)."""
    items = [i for i in items if i > 0]
    if not items:
        return 0
    best: int | None = None
    for assignment in itertools.product(range(len(capacities)), repeat=len(items)):
        loads = [0] * len(capacities)
        for item, b in zip(items, assignment, strict=True):
            loads[b] += item
        if all(load <= cap for load, cap in zip(loads, capacities, strict=True)):
            used = len(set(assignment))
            best = used if best is None else min(best, used)
    return best


def ffd_bins(items: list[int], capacity: int) -> int:
    """Plain item-by-item first-fit decreasing with identical bins."""
    rooms: list[int] = []
    for item in sorted(items, reverse=True):
        for b, room in enumerate(rooms):
            if room >= item:
                rooms[b] -= item
                break
        else:
            rooms.append(capacity - item)
    return len(rooms)


def proven(value: int) -> BinPackingResult:
    return BinPackingResult(value=value, lower_bound=value, proven=True)


# --- trivial and hand-made cases -------------------------------------------------------------


def test_no_items_needs_no_bins() -> None:
    assert min_bins([], [8, 8]) == proven(0)
    assert min_bins([0, 0], [8]) == proven(0)
    assert min_bins([], []) == proven(0)


def test_identical_bins() -> None:
    assert min_bins([5, 5, 5, 5], [10] * 4) == proven(2)
    assert min_bins([1] * 17, [8] * 5) == proven(3)
    assert min_bins([6, 6, 6], [10] * 3) == proven(3)  # no two fit together


def test_zero_capacity_bins_are_ignored() -> None:
    assert min_bins([4, 4], [0, 8, 0]) == proven(1)


def test_heterogeneous_answer_differs_from_total_over_capacity() -> None:
    # Total 24 equals 10 + 10 + 4, but no bin can be filled exactly: 4 bins are needed.
    items = [6, 6, 3, 3, 3, 3]
    caps = [10, 10, 4, 4, 4, 4]
    assert brute_force_min_bins(items, caps) == 4
    assert min_bins(items, caps) == proven(4)


def test_heterogeneous_prefers_large_bins() -> None:
    # One 16-bin holds everything; ceil(16 / 8) would say 2 with the small bins.
    assert min_bins([8, 4, 2, 2], [8, 8, 16, 8]) == proven(1)
    assert min_bins([3, 3, 3], [4, 4, 4, 9]) == proven(1)


def test_ffd_is_suboptimal_here() -> None:
    items = [5, 4, 4, 3, 2, 2]  # FFD: {5,4} {4,3,2} {2}; optimum: {5,3,2} {4,4,2}
    assert ffd_bins(items, 10) == 3
    assert brute_force_min_bins(items, [10] * 4) == 2
    assert min_bins(items, [10] * 6) == proven(2)


@pytest.mark.parametrize("max_arcs", [binpacking._MAX_ARCS, 0], ids=["arc-flow", "assignment"])
def test_cp_sat_models_agree_with_brute_force(monkeypatch: pytest.MonkeyPatch, max_arcs: int) -> None:
    # Switch the subset-sum heuristics, the LP bound and the search off so that CP-SAT has to close
    # the gap left by FFD/BFD.
    monkeypatch.setattr(binpacking, "_MAX_DP_WORK", -1)
    monkeypatch.setattr(binpacking, "_narrow", lambda sizes, caps, lb, best, **_: (lb, best))
    monkeypatch.setattr(binpacking, "_MAX_ARCS", max_arcs)
    assert min_bins([5, 4, 4, 3, 2, 2], [10] * 6) == proven(2)
    rng = random.Random(7)
    for _ in range(60):
        caps = [rng.choice([3, 5, 8, 10]) for _ in range(rng.randint(1, 4))]
        items = [rng.randint(1, 10) for _ in range(rng.randint(1, 6))]
        expected = brute_force_min_bins(items, caps)
        if expected is None:
            with pytest.raises(ValueError):
                min_bins(items, caps)
        else:
            assert min_bins(items, caps, time_limit=5) == proven(expected), (items, caps)


def test_deterministic() -> None:
    rng = random.Random(3)
    items = [rng.randint(20, 100) for _ in range(60)]
    first = min_bins(items, [150] * 60, seed=5)
    assert all(min_bins(items, [150] * 60, seed=5) == first for _ in range(2))


# --- infeasible inputs -----------------------------------------------------------------------


def test_item_larger_than_every_bin() -> None:
    with pytest.raises(ValueError, match="fits no bin"):
        min_bins([9], [8, 8])


def test_total_exceeds_capacity() -> None:
    with pytest.raises(ValueError, match="exceeds total capacity"):
        min_bins([5, 5, 5, 5], [8, 8])


def test_items_without_bins() -> None:
    with pytest.raises(ValueError, match="no bin"):
        min_bins([1], [])


def test_too_few_bins_for_large_items() -> None:
    cases = [
        ([5, 5, 5], [8, 8, 4, 4]),  # three pairwise-conflicting items, two bins that take them
        ([6, 6], [10, 4, 4]),  # capacity suffices but the second 6 fits nowhere
        ([4, 4, 4], [6, 6]),  # total 12 = 12 but no two items share a bin
        ([5, 4, 3], [6, 6]),  # total 12 = 12 but no exact split exists
    ]
    for items, caps in cases:
        assert brute_force_min_bins(items, caps) is None
        with pytest.raises(ValueError, match="infeasible"):
            min_bins(items, caps)


def test_bad_values() -> None:
    with pytest.raises(ValueError):
        min_bins([-1], [8])
    with pytest.raises(ValueError):
        min_bins([1.5], [8])  # type: ignore[list-item]
    with pytest.raises(ValueError):
        min_bins([1], [True])


# --- large inputs ----------------------------------------------------------------------------


def test_many_gpu_pods_close_by_bounds() -> None:
    rng = random.Random(1)
    items = [rng.choice([1, 2, 4, 8]) for _ in range(8000)]
    total = sum(items)
    t0 = time.monotonic()
    res = min_bins(items, [8] * 5000)
    assert time.monotonic() - t0 < 1.0
    assert res == proven(-(-total // 8))


def test_many_gpu_pods_on_too_few_nodes_fail_fast() -> None:
    items = [1, 2, 4, 8] * 2000
    t0 = time.monotonic()
    with pytest.raises(ValueError, match="infeasible"):
        min_bins(items, [8] * 1000)
    assert time.monotonic() - t0 < 1.0


def test_many_gpu_pods_mixed_nodes() -> None:
    rng = random.Random(2)
    items = [rng.choice([1, 1, 2, 3, 4, 6, 8]) for _ in range(5000)]
    caps = [rng.choice([4, 8, 16]) for _ in range(4000)]
    t0 = time.monotonic()
    res = min_bins(items, caps, time_limit=10)
    assert time.monotonic() - t0 < 5.0
    assert res.proven
    assert res.value >= res.lower_bound > 0


def test_gcd_scaling_keeps_answer() -> None:
    # Sizes in multiples of 1000: capacities round down to 7 units of 1000, so 7500 holds 7 items.
    assert min_bins([1000] * 14, [7500, 7500, 7500]) == proven(2)


# --- BPPLIB ----------------------------------------------------------------------------------

# Small instances (n <= 120) from five families.  FFD is not optimal on N1C1W4_G, N1W1B1R0
# (20 vs 18: CP-SAT proves 17 infeasible), Schwerin1_BPP15 and Falkenauer_u120_00 (49 vs 48: CP-SAT
# finds 48); N1C2W2_B needs the L2 bound (L1 is 26, optimum 27).
BPPLIB_CASES = [
    "instances/Scholl/Scholl_1/N1C2W2_B.txt",
    "instances/Scholl/Scholl_1/N1C1W4_G.txt",
    "instances/Scholl/Scholl_2/N1W1B1R0.txt",
    "instances/Schwerin/Schwerin_1/Schwerin1_BPP15.txt",
    "instances/Schwerin/Schwerin_2/Schwerin2_BPP1.txt",
    "instances/Falkenauer/Falkenauer U/Falkenauer_u120_00.txt",
]


def _bpplib_bounds() -> dict[str, tuple[int, int]]:
    bounds: dict[str, tuple[int, int]] = {}
    for line in (BPPLIB / "Bounds.txt").read_text().splitlines():
        parts = line.split()
        if len(parts) == 3:
            bounds[parts[0]] = (int(parts[1]), int(parts[2]))
    return bounds


@pytest.mark.parametrize("relpath", BPPLIB_CASES, ids=lambda p: Path(p).stem)
def test_bpplib_known_optimum(relpath: str) -> None:
    if not (BPPLIB / "Bounds.txt").is_file():
        pytest.skip(f"BPPLIB data not found at {BPPLIB}")
    path = BPPLIB / relpath
    weights, capacity = read_bpplib(path)
    n = len(weights)
    lb, ub = _bpplib_bounds()[path.stem]
    assert lb == ub, "only instances with a known optimum are used"
    assert min_bins(weights, [capacity] * n, time_limit=10, workers=1) == proven(lb)


@pytest.mark.parametrize("relpath", BPPLIB_CASES[:3], ids=lambda p: Path(p).stem)
def test_bpplib_through_a_snapshot(relpath: str) -> None:
    """Each item a pod alone on a node of the instance's capacity: the fragmentation metric's
    theoretical minimum is the instance's known optimum."""
    if not (BPPLIB / "Bounds.txt").is_file():
        pytest.skip(f"BPPLIB data not found at {BPPLIB}")
    from optplan.adapters.kubefile import load_objects
    from optplan.solvers.binpack.frag import fragmentation
    from tests.builders import node, pod, podgroup

    path = BPPLIB / relpath
    weights, capacity = read_bpplib(path)
    n = len(weights)
    res = "example.com/unit"
    objs = [podgroup("pg")]
    for i, w in enumerate(weights):
        objs.append(node(f"n{i:04d}", capacity, resource=res, cpu="1000", memory="1Ti"))
        objs.append(pod(f"p{i:04d}", f"n{i:04d}", w, resource=res, cpu="1", memory="1Mi"))
    f = fragmentation(load_objects(objs).snapshot, res, time_limit=10)
    lb, _ = _bpplib_bounds()[path.stem]
    assert (f.providers, f.occupied, f.theoretical_min, f.proven) == (n, n, lb, True)


def test_cp_sat_model_not_built_without_the_time_to_solve_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """CP-SAT's arc-flow model for 40 items in bins of 10,000 (~40,000 arcs) takes about 2 s to build:
    with 0.5 s left it is not built (Waescher TEST0014's 114,358 arcs took 5.6 s: 14 s on a 10 s limit),
    and the result is the packing in hand, unproven."""
    from collections import Counter

    from optplan.solvers.core.clock import Clock

    rng = random.Random(3)
    sizes = Counter(rng.randint(300, 5000) for _ in range(40))
    caps = [10_000] * 40
    one_per_bin = [Counter({s: 1}) for s in sizes.elements()]

    def not_to_be_built(*args: object) -> None:
        raise AssertionError("the arc-flow model was built with too little time left")

    monkeypatch.setattr(binpacking, "_arc_flow_model", not_to_be_built)
    result = binpacking._solve_cp_sat(sizes, caps, binpacking._lower_bound(sizes, caps), one_per_bin, time_limit=0.5,
                                      workers=1, seed=0, clock=Clock(deterministic=True, limit=0.5))
    assert result == BinPackingResult(40, binpacking._lower_bound(sizes, caps), False)
