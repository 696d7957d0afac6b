"""``binpack_scores`` (the binpack formula over arrays of nodes, read by the shared-GPU simulation) gives
``binpack_score``'s value on every node, written once in two forms."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from optplan.models.placement import BinpackWeights
from optplan.solvers.placement.binpack import binpack_score, binpack_scores

RESOURCES = ("cpu", "memory", "nvidia.com/gpu")
amount = st.integers(min_value=0, max_value=64)


@st.composite
def cases(draw: st.DrawFn) -> tuple[dict[str, int], list[dict[str, int]], list[dict[str, int]], BinpackWeights]:
    requests = {r: draw(amount) for r in RESOURCES if draw(st.booleans())}
    alloc, free = [], []
    for _ in range(draw(st.integers(min_value=1, max_value=6))):
        a = {r: draw(amount) for r in RESOURCES}
        alloc.append(a)
        free.append({r: draw(st.integers(min_value=0, max_value=a[r])) for r in RESOURCES})
    weights = BinpackWeights(weight=draw(st.integers(0, 3)), cpu=draw(st.integers(0, 3)),
                             memory=draw(st.integers(0, 3)),
                             resources={"nvidia.com/gpu": draw(st.integers(0, 3))} if draw(st.booleans()) else {})
    return requests, alloc, free, weights


@settings(max_examples=300, deadline=None, derandomize=True)
@given(cases())
def test_the_array_form_is_the_scalar_formula(case: tuple[dict[str, int], list[dict[str, int]],
                                                          list[dict[str, int]], BinpackWeights]) -> None:
    requests, alloc, free, weights = case
    got = binpack_scores(requests, {r: np.array([a[r] for a in alloc]) for r in RESOURCES},
                         {r: np.array([f[r] for f in free]) for r in RESOURCES}, weights)
    want = [float(binpack_score(requests, a, f, weights)) for a, f in zip(alloc, free, strict=True)]
    assert np.allclose(got, want, rtol=1e-12, atol=1e-12)


def test_a_node_without_the_resource_scores_nothing_for_it_but_its_weight_counts() -> None:
    w = BinpackWeights(resources={"nvidia.com/gpu": 1})
    got = binpack_scores({"cpu": 1, "nvidia.com/gpu": 1}, {"cpu": np.array([2]), "nvidia.com/gpu": np.array([0])},
                         {"cpu": np.array([2]), "nvidia.com/gpu": np.array([0])}, w)
    assert got.tolist() == [25.0]  # cpu 1/2 of weight 1, the GPU's weight 1 counted: 0.5 / 2 × 100
