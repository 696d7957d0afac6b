"""Volcano's nodeorder plugin, the scores of it that read only requests and room (``nodeorder_score``): the
Kubernetes scheduler's NodeResourcesLeastAllocated (cpu and memory, weights 50 each) and
NodeResourcesBalancedAllocation (cpu, memory and ``nvidia.com/gpu``), each 0..100 in Kubernetes' integer
arithmetic, times the plugin's ``leastrequested.weight`` and ``balancedresource.weight`` (1 each by default),
summed. Read by the greedy's node order (``Greedy.best_node``) when the scheduler configuration lists
nodeorder. Its other scores (node and pod affinity, taints PreferNoSchedule, image locality, topology spread)
are not modelled."""

from __future__ import annotations

import math

from optplan.models.devices import WHOLE_GPU
from optplan.models.snapshot import Resources

MAX_NODE_SCORE = 100
LEAST_ALLOCATED = (("cpu", 50), ("memory", 50))
"""NodeResourcesLeastAllocated's resources and weights as nodeorder configures it."""
BALANCED = ("cpu", "memory", WHOLE_GPU)
"""NodeResourcesBalancedAllocation's resources as nodeorder configures it."""


def least_allocated(requests: Resources, allocatable: Resources, free: Resources) -> int:
    """Σ w × (allocatable − requested − request) × 100 // allocatable over cpu and memory (0 where the pod
    would overflow), // Σ w over the resources the node has (Kubernetes' ``leastResourceScorer``)."""
    score = wsum = 0
    for r, w in LEAST_ALLOCATED:
        alloc = allocatable.get(r, 0)
        if alloc <= 0:
            continue
        req = alloc - free.get(r, 0) + requests.get(r, 0)
        score += (0 if req > alloc else (alloc - req) * MAX_NODE_SCORE // alloc) * w
        wsum += w
    return score // wsum if wsum else 0


def balanced_allocation(requests: Resources, allocatable: Resources, free: Resources) -> int:
    """(1 − the standard deviation of requested / allocatable, each at most 1) × 100, truncated, over cpu,
    memory and GPUs (GPUs only when the pod requests them; a resource the node lacks is left out;
    Kubernetes' ``balancedResourceScorer``)."""
    fractions: list[float] = []
    for r in BALANCED:
        alloc = allocatable.get(r, 0)
        if alloc <= 0 or (r == WHOLE_GPU and requests.get(r, 0) <= 0):
            continue
        fractions.append(min((alloc - free.get(r, 0) + requests.get(r, 0)) / alloc, 1.0))
    std = 0.0
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        mean = sum(fractions) / len(fractions)
        std = math.sqrt(sum((f - mean) ** 2 for f in fractions) / len(fractions))
    return int((1 - std) * MAX_NODE_SCORE)


def nodeorder_score(requests: Resources, allocatable: Resources, free: Resources, least: int = 1,
                    balanced: int = 1) -> int:
    """The two scores, weighted (``least``: leastrequested.weight; ``balanced``: balancedresource.weight)."""
    out = 0
    if least:
        out += least * least_allocated(requests, allocatable, free)
    if balanced:
        out += balanced * balanced_allocation(requests, allocatable, free)
    return out
