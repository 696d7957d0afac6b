"""The fragmentation metric of seed 000 (碎片率计算), with an exact theoretical minimum.

frag(R) = (occupied − theoretical minimum) / providers × 100, over the whole cluster; 0 when no node
provides R, and the report's ``warning`` says so.
The theoretical minimum is the least number of providers whose allocatable[R] holds every occupying
pod's R request, each pod whole on one node: a bin-packing problem with heterogeneous bins, solved
exactly by ``binpacking.min_bins``. When it cannot be proven within the time limit, the best proven
lower bound is used and ``proven`` is False.
"""

from __future__ import annotations

import logging

from optplan.models.results import FragReport, round_half_up
from optplan.models.snapshot import Snapshot
from optplan.solvers.binpack.binpacking import min_bins
from optplan.solvers.core.clock import Clock

__all__ = ["FragReport", "fragmentation", "round_half_up"]
"""The report and its rounding are pure data in ``optplan.models.results``, re-exported here."""

log = logging.getLogger(__name__)


def fragmentation(snapshot: Snapshot, resource: str, *, time_limit: float = 10.0, workers: int = 1,
                  clock: Clock | None = None) -> FragReport:
    providers = snapshot.providers(resource)
    capacities = [n.allocatable[resource] for n in providers]
    occupied = 0
    items: list[int] = []
    for node in providers:
        reqs = [p.request(resource) for p in snapshot.pods_by_node.get(node.name, ()) if p.request(resource) > 0]
        if reqs:
            occupied += 1
            items.extend(reqs)
    # Pods that request R on nodes that do not provide it (an over-committed snapshot) still need a node.
    for name, pods in snapshot.pods_by_node.items():
        if not snapshot.nodes[name].provides(resource):
            items.extend(p.request(resource) for p in pods if p.request(resource) > 0)
    if not items:
        return FragReport(resource, len(providers), occupied, 0, True, 0)
    largest = max(capacities, default=0)
    # A request larger than every provider cannot be packed; it keeps a node of its own.
    oversized = [i for i in items if i > largest]
    fitting = [i for i in items if i <= largest]
    caps = sorted(capacities, reverse=True)[len(oversized):]
    if fitting and caps:
        try:
            res = min_bins(fitting, caps, time_limit=time_limit, workers=workers, clock=clock)
            lb, ub, proven = res.lower_bound, res.value, res.proven
        except (ValueError, TimeoutError) as e:
            # An over-committed snapshot can hold more than the providers can pack: no packing
            # exists, so the nodes in use are the only answer; say it is not proven.
            log.warning("theoretical minimum of %s not computed (%s); using the occupied count", resource, e)
            lb = ub = max(occupied - len(oversized), 0)
            proven = False
    else:
        lb = ub = 0
        proven = True
    n = len(oversized)
    return FragReport(resource, len(providers), occupied, lb + n, proven, ub + n)
