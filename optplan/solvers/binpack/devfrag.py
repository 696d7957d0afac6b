"""Fragmentation at device level, for snapshots whose nodes list their GPUs one by one (``Node.devices``).

Two figures, both over the nodes with devices:

- **The seed's rate with a two-level minimum.** frag = (occupied − theoretical minimum) / providers × 100,
  where a node is occupied when one of its devices holds a GPU pod (whole cards or a share), and the
  minimum is the least number of nodes that hold every GPU pod with shares packed into GPUs and GPUs into
  nodes. It is computed in two exact steps: (1) the least number of GPUs G* that hold every share (bin
  packing of the shares' milli-GPU into devices of 1000, ``binpacking.min_bins``); (2) the least number of
  nodes (their device counts as capacities) that hold every pod's whole cards plus G* single cards. A
  packing with more share GPUs never needs fewer nodes (the extra cards are only more single items), and
  any packing of step (2) is a two-level packing, so the two steps give the two-level minimum exactly.
  When step (1) is not proven, its lower bound in step (2) gives a proven lower bound (``proven`` False),
  and its best packing an upper bound. Where the devices' share count (``GpuDevice.shares``; the largest of
  the nodes') is below the number of shares, step (1) also holds at most that many shares a GPU: its lower
  bound is the plain packing's or ⌈shares / count⌉, its upper bound first-fit decreasing under both limits,
  proven when they meet. Like the seed's minimum, it packs GPUs only: no GPU model, memory,
  host cpu or predicate.
- **The seed's metric when shares move** (``share_fragmentation``, what Repack reports when GPU shares are
  its pods): the same two steps over the providers of ``nvidia.com/gpu``, as a ``FragReport``.
- **FGD's measure** (Weng et al., ATC'23; ``core.gpushare.fragmentation``): per node, the expected free
  milli-GPU that a task drawn from the target workload cannot use there; the cluster's is the sum. The
  target workload is the snapshot's own GPU pods (running and pending), each a task type (host cpu, GPU
  ask) with its frequency; GPU model constraints are left out of the task types.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np

from optplan.models.devices import MILLI_PER_GPU
from optplan.models.results import FragReport
from optplan.models.snapshot import Snapshot
from optplan.solvers.binpack.binpacking import min_bins
from optplan.solvers.core import gpushare
from optplan.solvers.core.clock import Clock
from optplan.solvers.core.gpushare import GpuAsk, TargetWorkload
from optplan.solvers.core.oracle import Capacity, gpu_ask

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DeviceFrag:
    """Fragmentation at device level (module docstring)."""

    providers: int
    """Nodes with devices."""
    devices: int
    occupied: int
    """Nodes with a device holding a GPU pod."""
    devices_used: int
    """Devices holding a GPU pod (whole or part)."""
    shares: int
    share_gpus: int
    """GPUs the shares sit on now."""
    share_gpus_min: int
    """The least number of GPUs that hold every share (G*), or its proven lower bound."""
    theoretical_min: int
    """Least number of nodes of the two-level packing, or its proven lower bound when ``proven`` is False."""
    proven: bool
    upper_bound: int
    free_milli: int
    fgd_milli: float
    """FGD's fragmentation of the cluster (milli-GPU): the sum over nodes."""
    fgd_nodes: dict[str, float] = field(default_factory=dict)
    """Per node (with devices), FGD's fragmentation in milli-GPU."""

    def percent(self) -> float:
        return 0.0 if not self.providers else max(self.occupied - self.theoretical_min, 0) * 100 / self.providers

    def fgd_percent(self) -> float:
        """FGD's fragmentation as a share of the free milli-GPU."""
        return 0.0 if not self.free_milli else self.fgd_milli * 100 / self.free_milli


def has_devices(snapshot: Snapshot) -> bool:
    return any(n.devices for n in snapshot.nodes.values())


def device_fragmentation(snapshot: Snapshot, *, time_limit: float = 10.0, workers: int = 1,
                         clock: Clock | None = None) -> DeviceFrag:
    """Both figures of the module docstring; ``time_limit`` split between the two packings."""
    cap = Capacity(snapshot)
    names = [n for n, node in snapshot.nodes.items() if node.devices]
    healthy = [sum(d.healthy for d in snapshot.nodes[n].devices) for n in names]
    shares: list[int] = []
    wholes: list[int] = []
    occupied: set[str] = set()
    used_devices: set[tuple[str, int]] = set()
    for pod in snapshot.pods.values():
        if not pod.occupying or pod.node_name is None or not snapshot.nodes[pod.node_name].devices:
            continue
        ask = gpu_ask(pod, snapshot.nodes[pod.node_name])
        if ask.none:
            continue
        occupied.add(pod.node_name)
        (shares if ask.is_share else wholes).append(ask.milli if ask.is_share else ask.whole)
        held = cap.devices_of(pod)
        if held is not None:
            used_devices.update((held[0], d) for d in held[1])
    share_devs = {(cap.gpu_held[k][0], d) for k, (node, devs, milli, _) in cap.gpu_held.items()
                  if milli < MILLI_PER_GPU for d in devs}
    g_lb, g_ub, g_proven = _share_gpus(shares, share_count(snapshot, names), time_limit / 2, workers, clock)
    lb, ub, proven = _nodes_min(wholes, g_lb, healthy, time_limit / 2, workers, clock)
    if g_ub != g_lb:
        ub = _nodes_min(wholes, g_ub, healthy, time_limit / 2, workers, clock)[1]
    proven = proven and g_proven
    fgd = _fgd(snapshot, cap, names)
    free = sum(max(f, 0) for n in names for f in cap.gpu_free[n])
    return DeviceFrag(providers=len(names), devices=sum(healthy), occupied=len(occupied),
                      devices_used=len(used_devices), shares=len(shares), share_gpus=len(share_devs),
                      share_gpus_min=g_lb, theoretical_min=lb, proven=proven, upper_bound=max(ub, lb),
                      free_milli=free, fgd_milli=round(float(sum(fgd.values())), 3), fgd_nodes=fgd)


def _share_gpus(shares: list[int], most: int | None, time_limit: float, workers: int, clock: Clock | None
                ) -> tuple[int, int, bool]:
    """Step (1): the least number of GPUs that hold every share (lower bound, best packing, proven), at most
    ``most`` shares a GPU when given (``with_count``)."""
    if not shares:
        return 0, 0, True
    r = min_bins(shares, [MILLI_PER_GPU] * len(shares), time_limit=time_limit, workers=workers, clock=clock)
    if most is not None and most < len(shares):  # the count may bind
        return with_count(shares, most, r.lower_bound)
    return r.lower_bound, r.value, r.proven


def share_count(snapshot: Snapshot, names: list[str]) -> int | None:
    """The most pods any device of these nodes may hold (``GpuDevice.shares``), None when one has no limit."""
    counts = [d.shares for n in names for d in snapshot.nodes[n].devices if d.healthy]
    return None if not counts or any(c is None for c in counts) else max(c for c in counts if c is not None)


def with_count(shares: list[int], most: int, lower: int) -> tuple[int, int, bool]:
    """Step (1) when a GPU holds at most ``most`` shares: the lower bound of the plain packing (``lower``) or
    ⌈shares / most⌉, whichever is more; the upper bound first-fit decreasing under both limits; proven when they
    meet."""
    lb = max(lower, -(-len(shares) // most))
    bins: list[list[int]] = []  # [free milli, shares]
    for s in sorted(shares, reverse=True):
        for b in bins:
            if b[0] >= s and b[1] < most:
                b[0] -= s
                b[1] += 1
                break
        else:
            bins.append([MILLI_PER_GPU - s, 1])
    return lb, max(len(bins), lb), len(bins) <= lb


def share_fragmentation(snapshot: Snapshot, resource: str, *, time_limit: float = 10.0, workers: int = 1,
                        clock: Clock | None = None) -> FragReport:
    """The seed's metric of ``resource`` (``nvidia.com/gpu``) when GPU shares are Repack pods: a provider is
    occupied when it holds a whole-card pod or a share, and the theoretical minimum is the two-level one (the
    fewest GPUs G* that hold the shares, then the fewest providers that hold every pod's whole cards plus G*
    single cards; a provider's capacity is its healthy devices, or its allocatable cards when it lists none).
    Shares can only be on devices, so letting the G* cards go to a provider without devices only relaxes: the
    minimum stays a proven lower bound, and it is exact when every provider lists its devices."""
    providers = snapshot.providers(resource)
    shares: list[int] = []
    wholes: list[int] = []
    occupied = 0
    for node in providers:
        hit = False
        for pod in snapshot.pods_by_node.get(node.name, ()):
            ask = gpu_ask(pod, node) if node.devices and pod.gpu_share is not None and pod.occupying else None
            if ask is not None and not ask.none:
                (shares.append(ask.milli) if ask.is_share else wholes.append(ask.whole))
                hit = True
            elif pod.request(resource) > 0:
                wholes.append(-(-pod.request(resource) // MILLI_PER_GPU))
                hit = True
        occupied += hit
    if not shares and not wholes:
        return FragReport(resource, len(providers), occupied, 0, True, 0)
    caps = [sum(d.healthy for d in n.devices) if n.devices else n.allocatable[resource] // MILLI_PER_GPU
            for n in providers]
    g_lb, g_ub, g_proven = _share_gpus(shares, share_count(snapshot, [n.name for n in providers if n.devices]),
                                       time_limit / 2, workers, clock)
    lb, ub, proven = _nodes_min(wholes, g_lb, caps, time_limit / 2, workers, clock)
    if g_ub != g_lb:
        ub = _nodes_min(wholes, g_ub, caps, time_limit / 2, workers, clock)[1]
    return FragReport(resource, len(providers), occupied, lb, proven and g_proven, max(ub, lb))


def _nodes_min(wholes: list[int], singles: int, capacities: list[int], time_limit: float, workers: int,
               clock: Clock | None) -> tuple[int, int, bool]:
    items = [*wholes, *[1] * singles]
    if not items:
        return 0, 0, True
    try:
        r = min_bins(items, capacities, time_limit=time_limit, workers=workers, clock=clock)
        return r.lower_bound, r.value, r.proven
    except (ValueError, TimeoutError) as e:
        log.warning("two-level minimum not computed (%s); using the trivial bound", e)
        return 1, len(capacities), False


def _fgd(snapshot: Snapshot, cap: Capacity, names: list[str]) -> dict[str, float]:
    tasks: list[tuple[int, GpuAsk]] = []
    for pod in snapshot.pods.values():
        if pod.phase in ("Succeeded", "Failed"):
            continue
        node = snapshot.nodes.get(pod.node_name or "") or next((snapshot.nodes[n] for n in names), None)
        if node is None:
            continue
        ask = gpu_ask(pod, node)
        if not ask.none:
            tasks.append((pod.request("cpu"), GpuAsk(whole=ask.whole, milli=ask.milli)))
    if not tasks or not names:
        return {n: 0.0 for n in names}
    target = TargetWorkload.of(tasks)
    width = max(len(cap.gpu_free[n]) for n in names)
    free = np.zeros((len(names), width), dtype=np.int64)
    blocked = np.zeros((len(names), width), dtype=bool)  # a device its share count of pods holds
    for i, n in enumerate(names):
        row = [max(f, 0) for f in cap.gpu_free[n]]
        free[i, :len(row)] = row
        slots = cap.gpu_slots[n]
        if slots is not None:
            blocked[i, :len(slots)] = [s <= 0 for s in slots]
    cpu = np.array([cap.room(n, "cpu") for n in names], dtype=np.int64)
    models = [snapshot.nodes[n].devices[0].model for n in names]
    values = gpushare.fragmentation(free, cpu, models, target, blocked if blocked.any() else None)
    return {n: round(float(v), 3) for n, v in zip(names, values, strict=True)}
