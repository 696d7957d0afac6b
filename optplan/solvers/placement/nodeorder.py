"""Volcano's nodeorder plugin, the scores of it that read only requests and room (``nodeorder_score``): the
Kubernetes scheduler's NodeResourcesLeastAllocated (cpu and memory, weights 50 each) and
NodeResourcesBalancedAllocation (cpu, memory and ``nvidia.com/gpu``), each 0..100 in Kubernetes' integer
arithmetic, times the plugin's ``leastrequested.weight`` and ``balancedresource.weight`` (1 each by default),
summed. Read by the greedy's node order (``Greedy.best_node``) when the scheduler configuration lists
nodeorder. Its other scores (node and pod affinity, taints PreferNoSchedule, image locality, topology spread)
are not modelled. Also vc-scheduler's node list itself (``node_list``), the order its walks keep within a score."""

from __future__ import annotations

import math
from collections.abc import Iterable

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


NodeStart = str | tuple[str, ...] | None
"""Where vc-scheduler's node list starts (a node's name: the names rotated there, ``--node-list-start``), or the
whole list (``--node-list``: the order vc-scheduler's log showed), or None (by name)."""


def node_list(nodes: Iterable[str], start: NodeStart = None) -> list[str]:
    """vc-scheduler's node list (``ssn.NodeList``, the order ``PredicateNodes`` walks and keeps within a
    score) as optplan takes it: by name, from ``start`` on (the first name not below it, the names before it
    last; None: from the first); ``start`` a tuple: that order, the nodes it does not name after it by name.
    Volcano's is its cache's insertion order, the informer's initial
    list as a Go map hands it over (``cache.Store.List`` of the watch-list's temporary store: the names in
    key order, rotated at a random slot, a fresh one each time vc-scheduler starts), reordered further by
    the node workers and ``PredicateNodes``' 16 goroutines; the rotation by name is its likeliest one
    (``--node-list-start`` names the slot). Every walk of the greedy starts from it: allocate's best node and
    preempt's order keep it within a score, reclaim walks it as it is."""
    names = sorted(nodes)
    if start is None:
        return names
    if isinstance(start, tuple):
        rank = {n: i for i, n in enumerate(start)}
        return sorted(names, key=lambda n: (rank.get(n, len(rank)), n))
    cut = next((i for i, n in enumerate(names) if n >= start), len(names))
    return names[cut:] + names[:cut]
