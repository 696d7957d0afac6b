"""Tests for the LP bound (binlp) and the search for a packing into as many bins as the bound (binfill)
that ``min_bins`` uses when its combinatorial bounds do not meet its heuristics."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from optplan.experiments.bench import read_bpplib
from optplan.solvers.binpack import binflow, binlp, binpacking
from optplan.solvers.binpack.binfill import slack_fill
from optplan.solvers.binpack.binlp import lp_bound_and_dive
from optplan.solvers.binpack.binpacking import min_bins
from optplan.solvers.core.clock import Clock
from tests.binpack.test_binpacking import BPPLIB, brute_force_min_bins


def lp_bound(items: list[int], caps: list[int], *, time_limit: float = 20.0, dive: bool = False) -> binlp.LpOutcome:
    sizes = Counter(i for i in items if i > 0)
    caps_desc = sorted((c for c in caps if c > 0), reverse=True)
    start = binpacking._best_fit_decreasing(sizes, caps_desc)
    assert start is not None
    out = lp_bound_and_dive(sizes, caps_desc, target=len(start), time_limit=time_limit,
                            clock=Clock(deterministic=True, limit=time_limit), start=start, dive=dive)
    assert out is not None
    return out


def combinatorial_bound(items: list[int], caps: list[int]) -> int:
    return binpacking._lower_bound(Counter(items), sorted(caps, reverse=True))


def packs(packing: list[Counter[int]], items: list[int], caps: list[int]) -> bool:
    """``packing`` holds exactly ``items``, its bins (largest load on the largest bin) fit ``caps``."""
    loads = sorted((sum(s * c for s, c in content.items()) for content in packing), reverse=True)
    return sum(packing, Counter()) == Counter(items) and all(
        load <= cap for load, cap in zip(loads, sorted(caps, reverse=True), strict=False)
    ) and len(loads) <= len(caps)


# --- the bound is valid ------------------------------------------------------------------------


def test_lp_bound_never_above_the_optimum_on_small_random_instances() -> None:
    rng = random.Random(11)
    checked = 0
    for _ in range(120):
        caps = [rng.choice([6, 8, 10, 13]) for _ in range(rng.randint(2, 4))]
        items = [rng.randint(1, 9) for _ in range(rng.randint(2, 6))]
        if max(items) > max(caps):
            continue
        exact = brute_force_min_bins(items, caps)
        if exact is None or binpacking._best_fit_decreasing(Counter(items), sorted(caps, reverse=True)) is None:
            continue
        bound = lp_bound(items, caps).bound
        assert bound <= exact, (items, caps, bound, exact)
        assert min_bins(items, caps).lower_bound >= combinatorial_bound(items, caps)
        checked += 1
    assert checked > 60


def test_lp_bound_never_above_cp_sat_optimum_and_never_below_the_combinatorial_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = random.Random(5)
    for _ in range(8):
        capacity = rng.choice([40, 60, 100])
        items = [rng.randint(capacity // 5, capacity // 2 + 3) for _ in range(rng.randint(10, 18))]
        caps = [capacity] * len(items) + [capacity // 2] * 3
        with monkeypatch.context() as m:  # the reference answer does not use the LP
            m.setattr(binpacking.GilmoreGomory, "create", lambda *a, **k: None)
            m.setattr(binpacking, "flow_pack", lambda *a, **k: binflow.FlowOutcome("unknown"))
            exact = min_bins(items, caps, time_limit=20)
        assert exact.proven
        out = lp_bound(items, caps)
        assert combinatorial_bound(items, caps) <= out.bound <= exact.value, (items, caps)


def test_heterogeneous_bins_with_few_large_ones() -> None:
    # One bin of 12 takes two 6s; the other 6s need a bin each: 3 bins, and the LP knows that only
    # one 12 exists (without the type limit it would say 2).
    items, caps = [6, 6, 6, 6], [12, 6, 6, 6, 6]
    assert brute_force_min_bins(items, caps) == 3
    assert lp_bound(items, caps).bound == 3
    assert min_bins(items, caps) == binpacking.BinPackingResult(3, 3, True)


def test_bound_raised_above_the_combinatorial_one() -> None:
    # Total 30 would fill two bins of 15, but no subset of the items sums to 15: three bins.  The
    # combinatorial bounds say 2, the LP 3.
    items, caps = [11, 7, 7, 3, 2], [15] * 5
    assert brute_force_min_bins(items, caps) == 3
    assert combinatorial_bound(items, caps) == 2
    assert lp_bound(items, caps).bound == 3
    assert min_bins(items, caps) == binpacking.BinPackingResult(3, 3, True)


def test_a_stopped_run_still_gives_a_valid_bound() -> None:
    rng = random.Random(2)
    items = [rng.randint(150, 520) for _ in range(90)]
    full = lp_bound(items, [1000] * 90)
    cut = lp_bound(items, [1000] * 90, time_limit=1e-9)  # one pricing round
    assert cut.rounds == 1
    assert 0 < cut.bound <= full.bound


def test_lagrangian_bound_is_exact_arithmetic() -> None:
    # Duals of 1/2 per item of size 5 in bins of 10 (two per bin): exactly n / 2 bins.
    half = binlp._SCALE // 2
    w = np.array([half], dtype=np.int64)
    assert binlp._lagrangian(w, [7], [7], [2 * half]) == Fraction(7, 2)
    assert binlp._lagrangian(w, [7], [100], [2 * half]) == Fraction(7, 2)


def test_deterministic() -> None:
    rng = random.Random(9)
    items = [rng.randint(200, 600) for _ in range(70)]
    first = lp_bound(items, [1000] * 70, dive=True)
    again = lp_bound(items, [1000] * 70, dive=True)
    assert (first.bound, first.rounds, first.packing) == (again.bound, again.rounds, again.packing)


def test_waste_allowance_closes_the_patterns_that_waste_too_much() -> None:
    # 7 + 7 + 6 = 20 would fill two bins of 10 exactly, but no bin holding these items is full: the
    # patterns of a packing into two bins (wasting nothing) do not exist, so the restricted bound
    # says no packing into two bins, whatever the duals.
    sizes = Counter({7: 2, 6: 1})
    master = binlp._Master([7, 6], [10], Clock())
    master.set_rhs([2, 1], [3])
    master.restrict(0)
    assert binlp._generate(master, [2, 1], [3], 99, 1e9, Clock()).bound > 2
    master.restrict(None)  # all patterns again: the plain LP, 2.5 bins -> 3
    assert binlp._generate(master, [2, 1], [3], 99, 1e9, Clock()).bound == 3
    assert min_bins(list(sizes.elements()), [10] * 3) == binpacking.BinPackingResult(3, 3, True)


def test_restricted_pricing_respects_the_allowance() -> None:
    rng = random.Random(4)
    for _ in range(40):
        sizes = sorted({rng.randint(2, 40) for _ in range(6)}, reverse=True)
        demand = [rng.randint(1, 4) for _ in sizes]
        caps = sorted({rng.randint(40, 60), rng.randint(40, 60)}, reverse=True)
        w = np.array([rng.randint(0, 1000) for _ in sizes], dtype=np.int64)
        allow = rng.randint(0, 10)
        values, patterns, extra = binlp._price(sizes, demand, w, caps, Clock(), allow)
        for t, a in list(enumerate(patterns)) + extra:
            load = sum(s * n for s, n in zip(sizes, a, strict=True))
            assert all(n <= d for n, d in zip(a, demand, strict=True))
            assert not any(a) or caps[t] - allow <= load <= caps[t]
        for t, cap in enumerate(caps):  # the best value is the best over all such patterns
            best = max((int(np.dot(w, a)) for a in _patterns(sizes, demand)
                        if cap - allow <= sum(s * n for s, n in zip(sizes, a, strict=True)) <= cap), default=0)
            assert values[t] == best


def _patterns(sizes: list[int], demand: list[int]) -> list[tuple[int, ...]]:
    out: list[tuple[int, ...]] = [()]
    for d in demand:
        out = [(*a, n) for a in out for n in range(d + 1)]
    return out


def test_dive_packings_are_valid_and_beat_the_target() -> None:
    rng = random.Random(21)
    found = 0
    for _ in range(25):
        capacity = rng.choice([100, 150, 1000])
        items = [rng.randint(capacity // 6, capacity // 2) for _ in range(rng.randint(15, 40))]
        caps = [capacity] * len(items) + [capacity // 2] * 4
        out = lp_bound(items, caps, dive=True)
        start = binpacking._best_fit_decreasing(Counter(items), sorted(caps, reverse=True))
        assert start is not None
        if out.packing is not None:
            contents = [content for _, content in out.packing]
            assert packs(contents, items, caps)
            assert all(sum(s * n for s, n in content.items()) <= cap for cap, content in out.packing)
            assert len(out.packing) == out.bound < len(start)  # the dive aims at the bound
            found += 1
    assert found >= 3


# --- the search for a packing into lb bins -------------------------------------------------------


def triplets(n_bins: int, seed: int) -> list[int]:
    """Falkenauer's triplet generator: each bin of 1000 holds exactly three items in [250, 500)."""
    rng = random.Random(seed)
    items: list[int] = []
    for _ in range(n_bins):
        first = rng.randint(380, 490)
        second = rng.randint(250, (1000 - first) // 2)
        items += [first, second, 1000 - first - second]
    return items


def budget(steps: int) -> Callable[[int], bool]:
    """A ``spend`` callback that says stop after ``steps`` steps."""
    used = [0]

    def spend(k: int) -> bool:
        used[0] += k
        return used[0] > steps

    return spend


@pytest.mark.parametrize("n_bins", [20, 83])
def test_search_finds_perfect_triplet_packings(n_bins: int) -> None:
    items = triplets(n_bins, seed=n_bins)
    packing = slack_fill(Counter(items), [1000] * len(items), n_bins, seed=0, spend=budget(20_000))
    assert packing is not None and len(packing) == n_bins
    assert packs(packing, items, [1000] * n_bins)
    assert slack_fill(Counter(items), [1000] * len(items), n_bins, seed=0, spend=budget(20_000)) == packing


def test_min_bins_proves_triplet_instances() -> None:
    for seed in range(3):
        items = triplets(20, 100 + seed)
        res = min_bins(items, [1000] * len(items), time_limit=10, clock=Clock(deterministic=True, limit=10))
        assert res == binpacking.BinPackingResult(20, 20, True)


def test_search_respects_heterogeneous_capacities() -> None:
    items = [5, 5, 4, 4, 3, 3, 2, 2]  # 28 = 12 + 9 + 7: only a perfect packing fits
    caps = [12, 9, 7, 7]
    packing = slack_fill(Counter(items), caps, 3, seed=1, spend=budget(5_000))
    assert packing is not None
    assert packs(packing, items, caps[:3])


# --- BPPLIB --------------------------------------------------------------------------------------

# Hard28_BPP14 is one of Hard28's five instances without the round-up property (LP 61, optimum 62);
# Schwerin2_BPP56's combinatorial bound is below its optimum.
LP_CASES = [
    "instances/Hard28/Hard28_BPP14.txt",
    "instances/Hard28/Hard28_BPP13.txt",
    "instances/Schwerin/Schwerin_2/Schwerin2_BPP1.txt",
    "instances/Falkenauer/Falkenauer U/Falkenauer_u120_00.txt",
    "instances/Falkenauer/Falkenauer_T/Falkenauer_t60_00.txt",
]


def _known_optimum(path: Path) -> int:
    for line in (BPPLIB / "Bounds.txt").read_text().splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == path.stem:
            assert parts[1] == parts[2]
            return int(parts[1])
    raise AssertionError(f"{path.stem} not in Bounds.txt")


@pytest.mark.parametrize("relpath", LP_CASES, ids=lambda p: Path(p).stem)
def test_lp_bound_on_bpplib_never_above_known_optimum(relpath: str) -> None:
    if not (BPPLIB / "Bounds.txt").is_file():
        pytest.skip(f"BPPLIB data not found at {BPPLIB}")
    path = BPPLIB / relpath
    weights, capacity = read_bpplib(path)
    n = len(weights)
    optimum = _known_optimum(path)
    bound = lp_bound(weights, [capacity] * n).bound
    assert combinatorial_bound(weights, [capacity] * n) <= bound <= optimum
    assert bound >= optimum - 1  # the LP is within one bin of the optimum on these


def test_min_bins_proves_a_hard28_instance_without_the_round_up_property() -> None:
    # Hard28_BPP716: the LP bound is 75, the optimum 76; the arc-flow MIP proves 75 bins impossible.
    path = BPPLIB / "instances" / "Hard28" / "Hard28_BPP716.txt"
    if not path.is_file():
        pytest.skip(f"BPPLIB data not found at {BPPLIB}")
    weights, capacity = read_bpplib(path)
    n = len(weights)
    assert lp_bound(weights, [capacity] * n).bound == 75
    assert min_bins(weights, [capacity] * n, time_limit=30) == binpacking.BinPackingResult(76, 76, True)


@pytest.mark.parametrize("name", ["Hard28_BPP360", "Hard28_BPP47"])
def test_min_bins_proves_hard28_instances_with_the_round_up_property(name: str) -> None:
    # Bins almost full (the packing at the LP bound wastes under 120 of 62,000 or 71,000): what
    # first-fit, minimum bin slack and CP-SAT missed, and the LP-guided dive finds.  Deterministic
    # limits, so the same on any machine.
    path = BPPLIB / "instances" / "Hard28" / f"{name}.txt"
    if not path.is_file():
        pytest.skip(f"BPPLIB data not found at {BPPLIB}")
    weights, capacity = read_bpplib(path)
    n = len(weights)
    optimum = _known_optimum(path)
    res = min_bins(weights, [capacity] * n, time_limit=10, clock=Clock(deterministic=True, limit=10))
    assert res == binpacking.BinPackingResult(optimum, optimum, True)
