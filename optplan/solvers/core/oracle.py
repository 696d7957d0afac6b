"""The feasibility oracle: may this pod run on this node? One module, used by every planner and
by the validator, so that "feasible" means one thing everywhere.

Static predicates (NodeUnschedulable, nodeSelector, required node affinity, TaintToleration) do not
depend on what else runs on the node; resource fit (every requested resource, and the node's pod
count) does, and is checked against a ``Capacity`` that planners update as they simulate moves.

On a node whose GPUs are known one by one (``Node.devices``), fit is also decided at device level: a pod's
GPU ask on the node (``gpu_ask``: k whole cards, or a share of one card) must fit the free milli-GPU and
memory of its devices, and a device its register's share count of pods hold takes no more (``gpu_slots``), by
``gpushare``'s rule, and ``Capacity`` keeps which devices each pod holds (a running
share where its annotation pins it; whole cards, then unpinned shares, where ``gpushare.choose_devices``
puts them, pods in key order). There the free ``nvidia.com/gpu`` is the whole cards a pod may still take:
the devices no pod touches (``gpushare.usable`` for one whole card), at most the node's free total; so a
planner that counts free cards (the Repack greedy and exact models, the goal planners, placement) moves
whole-card pods only where whole devices are free. A node without devices is checked as before, on its
totals only.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from optplan.models.devices import MILLI_PER_GPU, WHOLE_GPU, GpuDevice
from optplan.models.snapshot import Node, Pod, Resources, Snapshot
from optplan.solvers.core import gpushare
from optplan.solvers.core.gpushare import NO_SHARE_COUNT, GpuAsk

POD_SLOT = 1000
"""One pod, in milli-units of the ``pods`` resource."""

NO_POD_LIMIT = 2**62
"""The room, in the ``pods`` resource, of a node whose allocatable has no ``pods`` entry (no limit).
Large enough that no sum of pod slots reaches it, small enough that int64 arithmetic on it is safe."""


def static_reason(pod: Pod, node: Node) -> str | None:
    """Why the pod cannot run on the node regardless of capacity, or None when it can."""
    if node.unschedulable:
        return "node is unschedulable (cordoned)"
    for k, v in pod.node_selector.items():
        if node.labels.get(k) != v:
            return f"nodeSelector {k}={v} does not match"
    terms = pod.required_node_affinity
    if terms is not None and not any(t.matches(node.name, node.labels) for t in terms):
        return "required node affinity does not match"
    for taint in node.taints:
        if taint.effect in ("NoSchedule", "NoExecute") and not any(t.tolerates(taint) for t in pod.tolerations):
            return f"taint {taint.key}={taint.value}:{taint.effect} is not tolerated"
    return None


def constraint_signature(pod: Pod) -> tuple[object, ...]:
    """Pods with equal signatures pass the static predicates on exactly the same nodes."""
    return (
        tuple(sorted(pod.node_selector.items())),
        pod.required_node_affinity,
        tuple(sorted(pod.tolerations, key=lambda t: (t.key, t.operator, t.value, t.effect))),
    )


def share_signature(pod: Pod) -> object:
    """What, beyond its requests and ``constraint_signature``, decides where a pod's GPU share fits: the share
    (its mode, card types, memory percent, spread; not where a running one sits) and, for a spreading share, its
    PodGroup. Pods alike in requests, constraint signature and this fit alike on every node."""
    share = pod.gpu_share
    if share is None:
        return None
    return share.model_copy(update={"devices": ()}), pod.group_key if share.spread else None


class Predicates:
    """The static predicates of a snapshot, evaluated once per (constraint signature, node): every
    planner, baseline and validator asks through one table instead of keeping a cache of its own."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.nodes = snapshot.nodes
        self._rows: dict[tuple[object, ...], dict[str, str | None]] = {}
        """signature -> node -> ``static_reason``, filled on demand."""
        self._masks: dict[tuple[tuple[object, ...], int], np.ndarray[Any, Any]] = {}
        self._node_lists: dict[int, tuple[str, ...]] = {}

    def _row(self, sig: tuple[object, ...], pod: Pod, node: str) -> str | None:
        row = self._rows.setdefault(sig, {})
        if node not in row:
            row[node] = static_reason(pod, self.nodes[node])
        return row[node]

    def reason(self, pod: Pod, node: str) -> str | None:
        """Why the pod cannot run on the node regardless of capacity (``static_reason``), or None."""
        return self._row(constraint_signature(pod), pod, node)

    def reasons(self, pod: Pod, nodes: Iterable[str]) -> list[str | None]:
        """``reason`` on each of ``nodes``, the pod's constraint signature computed once."""
        sig = constraint_signature(pod)
        return [self._row(sig, pod, n) for n in nodes]

    def ok(self, pod: Pod, node: str) -> bool:
        return self.reason(pod, node) is None

    def mask(self, pod: Pod, nodes: Sequence[str]) -> np.ndarray[Any, Any]:
        """A read-only boolean row over ``nodes``: True where the static predicates admit the pod. Rows
        are cached per (signature, node list); pass the same list object to reuse them."""
        listed = self._node_lists.setdefault(id(nodes), tuple(nodes))
        if listed != tuple(nodes):  # a list object reused with other contents: forget its rows
            self._masks = {k: v for k, v in self._masks.items() if k[1] != id(nodes)}
            listed = self._node_lists[id(nodes)] = tuple(nodes)
        key = (constraint_signature(pod), id(nodes))
        row = self._masks.get(key)
        if row is None:
            sig = key[0]
            row = np.fromiter((self._row(sig, pod, n) is None for n in listed), dtype=bool, count=len(listed))
            row.flags.writeable = False
            self._masks[key] = row
        return row


def max_fit(pod: Pod, free: Mapping[str, int], limits_pods: bool) -> int:
    """How many copies of the pod fit in ``free`` (every requested resource, and the pod count when the
    node limits it)."""
    n = min((free.get(r, 0) // v for r, v in pod.requests.items() if v > 0), default=1 << 30)
    if limits_pods:
        n = min(n, free.get("pods", 0) // POD_SLOT)
    return max(n, 0)


def pod_demand(pod: Pod) -> Resources:
    """What the pod consumes on a node: its requests plus one pod slot."""
    demand = dict(pod.requests)
    demand["pods"] = demand.get("pods", 0) + POD_SLOT
    return demand


NO_TYPE = "<no device type allowed>"
"""The model an ask accepts when ``nvidia.com/use-gputype`` / ``nouse-gputype`` rule out every device, or its
``volcano.sh/vgpu-mode`` is not the node's."""


def gpu_ask(pod: Pod, node: Node) -> GpuAsk:
    """The pod's ask of the node's GPU devices: its share (memory by percent resolved against the node's
    device memory; a share naming no compute counts as 1 milli-GPU, so that it holds its device), its
    whole shared cards, or its ``nvidia.com/gpu`` cards. The device types it accepts are the node's
    device models that Volcano's type rule admits (a type containing one of ``use_types`` and none of
    ``nouse_types``, case-insensitive); none when the share names a sharing mode (``volcano.sh/vgpu-mode``)
    other than the node's (``node_mode``)."""
    share = pod.gpu_share
    if share is None:
        return GpuAsk(whole=pod.requests.get(WHOLE_GPU, 0) // MILLI_PER_GPU)
    memory = share.memory_mib
    if share.memory_percent and node.devices:
        memory = max(memory, node.devices[0].memory_mib * min(share.memory_percent, 100) // 100)
    models: frozenset[str] = frozenset()
    if share.use_types or share.nouse_types:
        models = frozenset(d.model for d in node.devices if _type_allowed(d.model, share.use_types,
                                                                          share.nouse_types)) or frozenset({NO_TYPE})
    if share.mode and node.devices and share.mode != node_mode(node):  # Volcano: no device of this node
        models = frozenset({NO_TYPE})
    if share.whole:
        return GpuAsk(whole=share.count, memory_mib=memory, models=models)
    return GpuAsk(milli=max(share.milli, 1), memory_mib=memory, models=models, no_compute=share.no_compute)


def _takes_pods(device: GpuDevice) -> bool:
    """The device may take a new pod: healthy, a share count other than 0, not in MIG mode (its geometry is not
    modelled)."""
    return device.healthy and device.shares != 0 and device.mode != "mig"


def node_mode(node: Node) -> str:
    """The node's vGPU sharing mode as Volcano's plugin reads its register: ``mig`` when its (last) device says
    so, else ``hami-core``."""
    return "mig" if node.devices and node.devices[-1].mode == "mig" else "hami-core"


def _type_allowed(model: str, use: Sequence[str], nouse: Sequence[str]) -> bool:
    m = model.upper()
    if use:
        return any(t.upper() in m for t in use)
    return not any(t.upper() in m for t in nouse)


DEVICE_ORDERS = ("best-fit", "volcano", "volcano-binpack", "volcano-spread")
"""Which device a share takes when a plan does not name it (``Capacity.device_order``): optplan's best fit, or the
order Volcano's vGPU plugin walks them (``SchedulerConf.device_order``: the ``deviceshare`` plugin with
``deviceshare.VGPUEnable``, by its ``deviceshare.SchedulePolicy``)."""


class Capacity:
    """Free resources per node (allocatable minus occupying pods' requests), updated as moves are
    simulated. A node without ``pods`` in allocatable has no pod-count limit. On nodes with devices, the
    free milli-GPU and memory of each device too, and the devices each pod holds."""

    gpu_free: dict[str, list[int]]
    """node with devices -> free milli-GPU per device (in the node's device order; 0 on an unhealthy one)."""
    gpu_memory: dict[str, list[int] | None]
    """node with devices -> free GPU memory (MiB) per device; None when a device's memory is unknown."""
    gpu_slots: dict[str, list[int] | None]
    """node with devices -> the pods each device may still take (its register's share count less the pods holding
    it, ``GpuDevice.shares``; ``gpushare.NO_SHARE_COUNT`` for a device without a count); None when no device has a
    count."""
    gpu_zero: dict[str, list[int]]
    """node with devices -> per device, the shares on it that ask no compute (``gpushare.usable``'s ``zero``)."""
    gpu_groups: dict[str, list[dict[str, int]]]
    """node with devices -> per device, the PodGroups of the pods holding it and how many (``GpuShare.spread``)."""
    gpu_held: dict[str, tuple[str, tuple[int, ...], int, int]]
    """pod key -> (node, device positions, milli-GPU and memory taken on each)."""
    gpu_over: dict[str, list[str]]
    """node -> the pods whose GPU ask its devices could not take (the snapshot over-commits them)."""
    whole_total: dict[str, int]
    """node with devices -> free ``nvidia.com/gpu`` by the totals (allocatable minus requests); ``free`` holds
    the whole cards its untouched devices leave (``_sync_whole``)."""

    def __init__(self, snapshot: Snapshot, device_order: str = "best-fit") -> None:
        if device_order not in DEVICE_ORDERS:
            raise ValueError(f"unknown device order {device_order!r} (one of {', '.join(DEVICE_ORDERS)})")
        self.device_order = device_order
        self.nodes = snapshot.nodes
        self.gpu_free, self.gpu_memory, self.gpu_held, self.gpu_over, self.whole_total = {}, {}, {}, {}, {}
        self.gpu_slots, self.gpu_groups, self.gpu_zero = {}, {}, {}
        self.free: dict[str, Resources] = {}
        for name, node in snapshot.nodes.items():
            self.free[name] = dict(node.allocatable)
        self._limits_pods = {name: "pods" in node.allocatable for name, node in snapshot.nodes.items()}
        for name, pods in snapshot.pods_by_node.items():
            free = self.free[name]
            for pod in pods:  # ``_apply(name, pod, -1)``, inline: every pod of the snapshot passes here
                requests = pod.requests
                for r, v in requests.items():
                    free[r] = free.get(r, 0) - (v + POD_SLOT if r == "pods" else v)
                if "pods" not in requests:
                    free["pods"] = free.get("pods", 0) - POD_SLOT
        for name, node in snapshot.nodes.items():
            if node.devices:
                self.whole_total[name] = self.free[name].get(WHOLE_GPU, 0)
                self._hold_running(node, snapshot.pods_by_node.get(name, []))
                self._sync_whole(name)

    def _sync_whole(self, node: str) -> None:
        """``free[node][nvidia.com/gpu]``: the whole cards left on untouched devices, at most the total."""
        untouched = len(gpushare.usable(self.gpu_free[node], GpuAsk(whole=1), self.gpu_memory[node],
                                        self.gpu_slots[node]))
        self.free[node][WHOLE_GPU] = min(self.whole_total[node], untouched * MILLI_PER_GPU)

    def _hold_running(self, node: Node, pods: Sequence[Pod]) -> None:
        """The devices of the node's running pods: pinned shares where they sit, then whole cards, then the
        unpinned shares, each by ``gpushare.choose_devices`` in key order."""
        # a device in MIG mode (its geometry known: ``vgpu.with_modes``) takes no new pod: MIG instances of its
        # geometry are not modelled, its running pods hold it as they are (a warning says so)
        self.gpu_free[node.name] = [MILLI_PER_GPU if _takes_pods(d) else 0 for d in node.devices]
        known = all(d.memory_mib > 0 for d in node.devices)
        self.gpu_memory[node.name] = [d.memory_mib if d.healthy else 0 for d in node.devices] if known else None
        self.gpu_slots[node.name] = None if all(d.shares is None for d in node.devices) else [
            NO_SHARE_COUNT if d.shares is None else d.shares for d in node.devices]
        self.gpu_groups[node.name] = [{} for _ in node.devices]
        self.gpu_zero[node.name] = [0] * len(node.devices)
        position = {d.index: i for i, d in enumerate(node.devices)}
        asks = [(p, gpu_ask(p, node)) for p in pods]
        for p, ask in asks:
            share = p.gpu_share
            if share is not None and share.devices and not ask.none:
                self._take(node.name, p, ask, tuple(position[d] for d in share.devices))
        unpinned = [(p, a) for p, a in asks if not a.none and (p.gpu_share is None or not p.gpu_share.devices)]
        for p, ask in sorted(unpinned, key=lambda pa: (pa[1].is_share, pa[0].key)):
            self._place_gpus(node.name, p, ask)

    def _take(self, node: str, pod: Pod, ask: GpuAsk, devices: tuple[int, ...]) -> None:
        milli = ask.milli if ask.is_share else MILLI_PER_GPU
        free, memory, slots = self.gpu_free[node], self.gpu_memory[node], self.gpu_slots[node]
        zero = self.gpu_zero[node] if ask.no_compute else None
        for d in devices:
            free[d] -= milli
            if memory is not None:
                memory[d] -= ask.memory_mib
            if slots is not None:
                slots[d] -= 1
            if zero is not None:
                zero[d] += 1
            if (gk := pod.group_key) is not None:
                on = self.gpu_groups[node][d]
                on[gk] = on.get(gk, 0) + 1
        self.gpu_held[pod.key] = (node, devices, milli, ask.memory_mib)

    def spread_blocked(self, node: str, pod: Pod) -> frozenset[int]:
        """The device positions of the node that a pod of the pod's PodGroup holds, when its share spreads
        (``GpuShare.spread``); empty otherwise."""
        share, gk = pod.gpu_share, pod.group_key
        if share is None or not share.spread or gk is None or node not in self.gpu_groups:
            return frozenset()
        return frozenset(d for d, g in enumerate(self.gpu_groups[node]) if g.get(gk, 0) > 0)

    def slots_for(self, node: str, pod: Pod) -> Sequence[int] | None:
        """``gpu_slots[node]`` as the pod may use them: none on a device ``spread_blocked`` names; None when
        neither limits it."""
        return gpushare.without(self.gpu_slots.get(node), self.spread_blocked(node, pod),
                                len(self.gpu_groups.get(node, ())))

    def _place_gpus(self, node: str, pod: Pod, ask: GpuAsk) -> None:
        order = self._walk(node) if pod.gpu_share is not None else None
        devices = gpushare.choose_devices(self.gpu_free[node], ask, self.gpu_memory[node], self._model(node),
                                          free_slots=self.slots_for(node, pod), order=order,
                                          zero=self.gpu_zero[node])
        if devices is None:
            self.gpu_over.setdefault(node, []).append(pod.key)
        else:
            self._take(node, pod, ask, devices)

    def _walk(self, node: str) -> list[int] | None:
        """The node's device positions in the order Volcano's vGPU plugin tries them for a share
        (``sortedDeviceIndicesByPolicy``, v1.15.1), or None for ``best-fit``: ``volcano`` (no
        ``deviceshare.SchedulePolicy``) the highest index first; ``volcano-binpack`` the most used memory first,
        ``volcano-spread`` the fewest pods first, ties to the lower index."""
        order = self.device_order
        if order == "best-fit":
            return None
        devices = self.nodes[node].devices
        n = len(devices)
        if order == "volcano":
            return list(range(n - 1, -1, -1))
        if order == "volcano-binpack":
            memory = self.gpu_memory[node]
            used = [devices[d].memory_mib - memory[d] if memory is not None else 0 for d in range(n)]
            return sorted(range(n), key=lambda d: (-used[d], d))
        slots = self.gpu_slots[node]
        pods = [(devices[d].shares or 0) - slots[d] if slots is not None and devices[d].shares is not None else 0
                for d in range(n)]
        return sorted(range(n), key=lambda d: (pods[d], d))

    def _closed(self, node: str) -> frozenset[int]:
        """The node's device positions that take no new pod whatever is free (``_hold_running``: unhealthy, in MIG
        mode, a share count of 0)."""
        return frozenset(d for d, dev in enumerate(self.nodes[node].devices) if not _takes_pods(dev))

    def _model(self, node: str) -> str | None:
        devices = self.nodes[node].devices
        return devices[0].model if devices else None

    def copy(self) -> Capacity:
        """An independent copy of the free room (cheaper than reading the snapshot's pods again)."""
        out = Capacity.__new__(Capacity)
        out.device_order = self.device_order
        out.free = {name: dict(free) for name, free in self.free.items()}
        out._limits_pods = self._limits_pods
        out.nodes = self.nodes
        out.gpu_free = {n: list(f) for n, f in self.gpu_free.items()}
        out.gpu_memory = {n: None if m is None else list(m) for n, m in self.gpu_memory.items()}
        out.gpu_slots = {n: None if m is None else list(m) for n, m in self.gpu_slots.items()}
        out.gpu_groups = {n: [dict(c) for c in cs] for n, cs in self.gpu_groups.items()}
        out.gpu_zero = {n: list(z) for n, z in self.gpu_zero.items()}
        out.gpu_held = dict(self.gpu_held)
        out.gpu_over = {n: list(v) for n, v in self.gpu_over.items()}
        out.whole_total = dict(self.whole_total)
        return out

    def _apply(self, node: str, pod: Pod, sign: int) -> None:
        free = self.free[node]
        for r, v in pod_demand(pod).items():
            free[r] = free.get(r, 0) + sign * v

    def device_reason(self, pod: Pod, node: str, devices: Sequence[int] | None = None) -> str | None:
        """Why the node's devices cannot take the pod's GPU ask now, or None (always None on a node without
        devices, or for a pod that asks for no GPU). With ``devices`` (device indices, as a plan names them),
        why the ask cannot take exactly those (``gpushare.fits_on``)."""
        if node not in self.gpu_free:
            return None if not devices else f"{node} lists no GPU devices"
        ask = gpu_ask(pod, self.nodes[node])
        if devices is not None:
            positions = self._positions(node, devices)
            if positions is None:
                return f"{node} has no device {', '.join(map(str, devices))}"
            if gpushare.fits_on(self.gpu_free[node], ask, positions, self.gpu_memory[node], self._model(node),
                                self.slots_for(node, pod), self.gpu_zero[node], self._closed(node)):
                return None
            return f"devices {', '.join(map(str, devices))} cannot take {self._ask_text(ask)}"
        if ask.none or gpushare.fits(self.gpu_free[node], ask, self.gpu_memory[node], self._model(node),
                                     self.slots_for(node, pod), self.gpu_zero[node]):
            return None
        return f"no device fits {self._ask_text(ask)}"

    @staticmethod
    def _ask_text(ask: GpuAsk) -> str:
        what = f"{ask.whole} whole GPU(s)" if ask.whole else f"a share of {ask.milli} milli-GPU"
        if ask.memory_mib:
            what += f" and {ask.memory_mib} MiB"
        return what

    def _positions(self, node: str, devices: Sequence[int]) -> tuple[int, ...] | None:
        """The positions of the device indices in the node's device list, or None when one is missing."""
        position = {d.index: i for i, d in enumerate(self.nodes[node].devices)}
        if any(d not in position for d in devices):
            return None
        return tuple(position[d] for d in devices)

    def devices_of(self, pod: Pod) -> tuple[str, tuple[int, ...]] | None:
        """(node, device indices) the pod holds, when it holds devices."""
        held = self.gpu_held.get(pod.key)
        if held is None:
            return None
        devices = self.nodes[held[0]].devices
        return held[0], tuple(devices[d].index for d in held[1])

    def fit_reason(self, pod: Pod, node: str, devices: Sequence[int] | None = None) -> str | None:
        """The first resource that does not fit, or None when every requested one does; with ``devices``, the
        GPU ask on exactly those devices (``device_reason``)."""
        free = self.free[node]
        for r, v in sorted(pod.requests.items()):
            if v > 0 and free.get(r, 0) < v:
                return f"insufficient {r}"
        if self._limits_pods[node] and free.get("pods", 0) < POD_SLOT:
            return "too many pods"
        return self.device_reason(pod, node, devices)

    def fits(self, pod: Pod, node: str) -> bool:
        """``fit_reason(pod, node) is None``, without building the reason (a planner's hot path)."""
        free = self.free[node]
        for r, v in pod.requests.items():
            if v > 0 and free.get(r, 0) < v:
                return False
        if self._limits_pods[node] and free.get("pods", 0) < POD_SLOT:
            return False
        return node not in self.gpu_free or self.device_reason(pod, node) is None

    def add(self, pod: Pod, node: str, devices: Sequence[int] | None = None) -> None:
        """The pod runs on the node now: its GPU ask on ``devices`` (device indices) when given and they can
        take it, else where the fit rule puts it."""
        self._apply(node, pod, -1)
        if node in self.gpu_free:
            self.whole_total[node] -= pod.requests.get(WHOLE_GPU, 0)
            ask = gpu_ask(pod, self.nodes[node])
            positions = self._positions(node, devices) if devices else None
            if positions is not None and gpushare.fits_on(self.gpu_free[node], ask, positions, self.gpu_memory[node],
                                                          self._model(node), self.slots_for(node, pod),
                                                          self.gpu_zero[node], self._closed(node)):
                self._take(node, pod, ask, positions)
            elif not ask.none:
                self._place_gpus(node, pod, ask)
            self._sync_whole(node)

    def repack(self, node: str, placed: Sequence[Pod], pod: Pod, budget: int = 20_000) -> tuple[int, ...] | None:
        """Device indices on which ``pod``'s GPU ask fits once the node's ``placed`` pods (added before, their
        devices free to change: a plan names nodes, not devices) are packed again with it, or None. A plan's
        pods met in another order than they were placed in take other devices by the fit rule, and a later one
        may then find none where some packing takes them all: this searches for one (depth first, the largest
        asks first, each device in the node's order; at most ``budget`` steps, then None). On success the
        ``placed`` pods hold their new devices and ``pod`` holds none yet (``add(pod, node, devices)`` takes
        them); on failure nothing changed."""
        if node not in self.gpu_free:
            return None
        nodes = self.nodes[node]
        mine = [p for p in placed if p.key in self.gpu_held and self.gpu_held[p.key][0] == node]
        before = {p.key: self.gpu_held[p.key][1] for p in mine}
        asks = {p.key: gpu_ask(p, nodes) for p in [*mine, pod]}
        for p in mine:
            self._release_gpus(p, node)
        order = sorted([*mine, pod], key=lambda p: (-asks[p.key].whole, -asks[p.key].milli,
                                                    -asks[p.key].memory_mib, p.key))
        steps = 0

        def place(i: int) -> bool:
            nonlocal steps
            if i == len(order):
                return True
            p = order[i]
            ask = asks[p.key]
            usable = gpushare.usable(self.gpu_free[node], ask, self.gpu_memory[node], self.slots_for(node, p),
                                     self.gpu_zero[node])
            if not usable or not gpushare.fits_on(self.gpu_free[node], ask, usable[:ask.devices],
                                                  self.gpu_memory[node], self._model(node), self.slots_for(node, p),
                                                  self.gpu_zero[node]):
                return False
            for choice in itertools.combinations(usable, ask.devices):
                steps += 1
                if steps > budget:
                    return False
                self._take(node, p, ask, choice)
                if place(i + 1):
                    return True
                self._release_gpus(p, node)
            return False

        if place(0):
            held = self.gpu_held[pod.key][1]
            self._release_gpus(pod, node)
            return tuple(nodes.devices[d].index for d in held)
        for p in order:  # as it was
            if p.key in self.gpu_held:
                self._release_gpus(p, node)
        for p in mine:
            self._take(node, p, asks[p.key], before[p.key])
        return None

    def remove(self, pod: Pod, node: str) -> None:
        self._apply(node, pod, +1)
        if node in self.gpu_free:
            self.whole_total[node] += pod.requests.get(WHOLE_GPU, 0)
            self._release_gpus(pod, node)
            self._sync_whole(node)

    def _release_gpus(self, pod: Pod, node: str) -> None:
        held = self.gpu_held.get(pod.key)
        if held is not None and held[0] == node:
            del self.gpu_held[pod.key]
            _, devices, milli, memory_mib = held
            free, memory, slots = self.gpu_free[node], self.gpu_memory[node], self.gpu_slots[node]
            zero = self.gpu_zero[node] if pod.gpu_share is not None and pod.gpu_share.no_compute else None
            for d in devices:
                free[d] += milli
                if memory is not None:
                    memory[d] += memory_mib
                if slots is not None:
                    slots[d] += 1
                if zero is not None:
                    zero[d] -= 1
                if (gk := pod.group_key) is not None and (on := self.gpu_groups[node][d]).get(gk, 0) > 0:
                    on[gk] -= 1
                    if not on[gk]:
                        del on[gk]
        elif pod.key in self.gpu_over.get(node, ()):
            self.gpu_over[node].remove(pod.key)

    def limits_pods(self, node: str) -> bool:
        """Whether the node has a pod-count limit (``pods`` in its allocatable)."""
        return self._limits_pods[node]

    def room(self, node: str, resource: str) -> int:
        """Free ``resource`` on the node; ``NO_POD_LIMIT`` for ``pods`` on a node without a limit."""
        if resource == "pods" and not self._limits_pods[node]:
            return NO_POD_LIMIT
        return self.free[node].get(resource, 0)

    def room_matrix(self, nodes: Sequence[str], resources: Sequence[str], *, exact: bool = False
                    ) -> np.ndarray[Any, Any]:
        """Free room as a [resource, node] matrix (``room`` per cell). int64, or Python ints
        (``dtype=object``) with ``exact`` for quantities whose sums could overflow int64."""
        out = np.zeros((len(resources), len(nodes)), dtype=object if exact else np.int64)
        for i, r in enumerate(resources):
            out[i] = [self.room(n, r) for n in nodes]
        return out

    def over(self, node: str, resources: Iterable[str]) -> list[str]:
        """Resources among ``resources`` on which the node is over-committed now."""
        free = self.free[node]
        out = [r for r in resources if r != "pods" and free.get(r, 0) < 0]
        if self._limits_pods[node] and free.get("pods", 0) < 0:
            out.append("pods")
        if self.gpu_over.get(node) or any(f < 0 for f in self.gpu_free.get(node, ())):
            out.append("gpu devices")
        return out
