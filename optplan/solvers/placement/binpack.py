"""Volcano's binpack plugin: a pod's score on a node (``binpack_score``), read by the greedy's node
order, the exact model's static binpack objective (``BINPACK_SCALE``) and the online simulation; the same
formula over arrays of nodes in floating point (``binpack_scores``), read by the shared-GPU simulation.
The network-topology-aware plugin's binpack of a HyperNode (``hyper_binpack``: a job's HyperNode score, a
pod's score per tier; ``Greedy.hyper_score`` sums it over a node's tiers for a pod without a network topology)."""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

import numpy as np

from optplan.models.placement import BinpackWeights
from optplan.models.snapshot import Resources

BINPACK_SCALE = 100
"""Static binpack scores (0..100 × weight) are summed as integers after multiplying by this."""


def binpack_score(requests: Resources, allocatable: Resources, free: Resources, weights: BinpackWeights) -> Fraction:
    """Volcano's binpack node score for a task: for each requested resource with a weight, w ×
    (used + request) / allocatable (a node without the resource adds 0 but its weight counts; any
    resource over allocatable makes the score 0); divided by the weights' sum, × 100 × binpack.weight."""
    table = weights.of()
    score = Fraction(0)
    wsum = 0
    for r, req in sorted(requests.items()):
        w = table.get(r)
        if req <= 0 or w is None:
            continue
        alloc = allocatable.get(r, 0)
        wsum += w
        if alloc <= 0 or w == 0:
            continue
        used = alloc - free.get(r, 0)
        if used + req > alloc:
            return Fraction(0)
        score += Fraction(w * (used + req), alloc)
    if wsum:
        score /= wsum
    return score * 100 * weights.weight


def binpack_scores(requests: Mapping[str, int], allocatable: Mapping[str, np.ndarray[Any, Any]],
                   free: Mapping[str, np.ndarray[Any, Any]], weights: BinpackWeights) -> np.ndarray[Any, Any]:
    """``binpack_score`` of one pod on every node at once, in floating point: ``allocatable`` and ``free``
    map a resource to one value per node (a resource absent from them: no node has it)."""
    table = weights.of()
    n = len(next(iter(allocatable.values())))
    score = np.zeros(n)
    over = np.zeros(n, dtype=bool)
    wsum = 0
    for r, req in sorted(requests.items()):
        w = table.get(r)
        if req <= 0 or w is None:
            continue
        wsum += w
        if r not in allocatable or w == 0:
            continue
        alloc, left = allocatable[r], free[r]
        used = alloc - left
        over |= (alloc > 0) & (used + req > alloc)
        score += np.where(alloc > 0, w * (used + req) / np.maximum(alloc, 1), 0.0)
    if wsum:
        score /= wsum
    return np.where(over, 0.0, score * 100 * weights.weight)


def hyper_binpack(request: Mapping[str, int], allocatable: Mapping[str, int], used: Mapping[str, int],
                  weights: BinpackWeights) -> Fraction:
    """The network-topology-aware plugin's binpack of one HyperNode (its summed ``allocatable`` and
    ``used``) for ``request``, unscaled (0..1): over the requested resources that have a weight
    (``weights.of()``: cpu and memory always), Σ w × (used + request) / allocatable / Σ w; 0 when the
    request overflows the HyperNode on one of them (Volcano's ``getPodHyperNodeBinPackingScore``, and its
    sub-job version over a job's summed requests)."""
    table = weights.of()
    score = Fraction(0)
    wsum = 0
    for r in sorted(r for r, v in request.items() if v > 0 and r in table):
        alloc = allocatable.get(r, 0)
        if used.get(r, 0) + request[r] > alloc:
            return Fraction(0)
        w = table[r]
        wsum += w
        score += Fraction(w * (used.get(r, 0) + request[r]), alloc)
    return score / wsum if wsum else Fraction(0)
