"""The device-fit rule of shared GPUs, written once: pure functions on a node's free milli-GPU per device.

A node's GPUs are devices; each has ``MILLI`` (1000) milli-GPUs and, optionally, GPU memory (MiB) and a most
number of pods that may share it (the vGPU register's count: Volcano's device-share plugin and HAMi skip a device
that many pods hold, whatever its free milli; ``free_slots``, one per pod). A pod asks (``GpuAsk``):

- nothing (``whole == 0`` and ``milli == 0``): it uses no device; the GPU models it names do not matter;
- a share (``whole == 0``, ``0 < milli < MILLI``): ``milli`` milli-GPUs (and ``memory_mib``) of ONE device;
- whole GPUs (``whole >= 1``, ``milli == 0``): ``whole`` devices that are entirely free.

``models`` (empty: any) are the GPU models the pod accepts; a node has one model. ``ask_problem`` is the one
bad-input rule. ``fits`` says whether a node's devices can take an ask, ``fits_on`` whether it may take the
devices a plan names; ``choose_devices`` says which it takes:

- ``best-fit`` (default): a share goes to the device with the least free milli that is still enough (ties: the
  lowest index); whole GPUs to the lowest-indexed entirely free devices;
- ``first-fit``: the lowest-indexed devices that can take it;
- ``worst-fit``: a share to the device with the most free milli (ties: the lowest index); whole GPUs as
  ``first-fit``.

**Fragmentation** (Weng et al., "Beware of Fragmentation", USENIX ATC'23, §3): a node's fragmentation for a
*target workload* (task types with their frequencies, ``TargetWorkload``) is the expected free GPU capacity
(milli) that a task drawn from it could not use on the node:

- a task asking no GPU can use none of it: all the node's free milli;
- a task the node cannot host (too little free cpu, a GPU model it does not accept, no device with enough free
  milli for a share, fewer entirely free devices than its whole GPUs): all the node's free milli; a device that
  its share count of pods hold (``blocked``) takes no task, so its free milli is fragmented for every one;
- otherwise the free milli of the devices it could not use: for a share of ``m`` milli, the devices with less
  than ``m`` free; for whole GPUs, the devices partly taken.

``fragmentation`` computes it for many nodes at once (numpy, devices padded with 0 free; ``FragTable`` compiled
once for repeated calls); ``node_fragmentation`` for one. Memory (host and GPU) is not part of the measure, as
in the paper.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

MILLI = 1000
RULES = ("best-fit", "first-fit", "worst-fit")
NO_SHARE_COUNT = 1 << 30
"""A device's free pod slots (``free_slots``) where its register names no share count."""


@dataclass(frozen=True)
class GpuAsk:
    """What one pod asks of a node's GPU devices (module docstring)."""

    whole: int = 0
    milli: int = 0
    memory_mib: int = 0
    models: frozenset[str] = frozenset()
    no_compute: bool = False
    """A share naming no compute (Volcano's vGPU: no ``vgpu-cores``): ``milli`` is 1, so that it holds its device
    (no whole ask takes it) and needs compute left there (Volcano refuses it on a device at 100 cores); Volcano
    counts it 0 cores, so the shares on a device may still add up to all of it (``usable``'s ``zero``)."""

    @property
    def is_share(self) -> bool:
        return self.whole == 0 and self.milli > 0

    @property
    def none(self) -> bool:
        return self.whole == 0 and self.milli == 0

    @property
    def devices(self) -> int:
        """Devices it takes: ``whole``, 1 for a share, 0 for none."""
        return self.whole if self.whole else int(self.milli > 0)

    @property
    def total_milli(self) -> int:
        """Milli-GPUs it takes in all."""
        return self.whole * MILLI + self.milli


def ask_of(num_gpu: int, gpu_milli: int, models: Iterable[str] = ()) -> GpuAsk:
    """The trace's form (openb: ``num_gpu`` devices of ``gpu_milli`` each) as an ask: ``gpu_milli == MILLI`` is
    ``num_gpu`` whole GPUs, ``num_gpu == 1`` and less is a share, ``num_gpu == 0`` is no GPU. A share of
    several devices is kept as given (whole and milli both set) so that ``ask_problem`` names it."""
    ms = frozenset(m for m in models if m)
    if num_gpu == 0:
        return GpuAsk(models=ms)
    if gpu_milli == MILLI:
        return GpuAsk(whole=num_gpu, models=ms)
    if num_gpu == 1:
        return GpuAsk(milli=gpu_milli, models=ms)
    return GpuAsk(whole=num_gpu, milli=gpu_milli, models=ms)


def ask_problem(ask: GpuAsk) -> str | None:
    """Why an ask is malformed (one line), or None."""
    if ask.whole < 0 or ask.milli < 0 or ask.memory_mib < 0:
        return f"a GPU ask is never negative (whole {ask.whole}, milli {ask.milli}, memory {ask.memory_mib} MiB)"
    if ask.whole and ask.milli:
        return (f"a GPU ask is whole GPUs or a share of one, not both (whole {ask.whole}, milli {ask.milli}); "
                f"a share of several GPUs is not schedulable")
    if ask.milli >= MILLI:
        return f"a share is below {MILLI} milli-GPU, got {ask.milli} (whole GPUs go in whole)"
    if ask.none and ask.memory_mib:
        return f"GPU memory ({ask.memory_mib} MiB) without a GPU"
    return None


def _model_ok(ask: GpuAsk, model: str | None) -> bool:
    return ask.none or not ask.models or model is None or model in ask.models


def usable(free_milli: Sequence[int], ask: GpuAsk, free_memory: Sequence[int] | None = None,
           free_slots: Sequence[int] | None = None, zero: Sequence[int] | None = None) -> list[int]:
    """The device indices that could take (one device of) the ask, in index order. ``free_slots``: per device the
    pods it may still take (the register's share count less the pods on it; None: no limit), one each.
    ``zero``: per device the shares on it that ask no compute (each holds 1 milli so that it holds its device
    and keeps whole asks off it; Volcano's vGPU fit counts them 0 cores, so a share fits where its milli is at
    most the free milli plus these; None: none counted, which is stricter)."""
    whole, milli, memory = ask.whole, ask.milli, ask.memory_mib
    if not whole and not milli:
        return []
    if not whole:  # a share
        counted = zero if zero is not None and any(zero) else None
        if free_memory is None and free_slots is None and counted is None:
            return [d for d, f in enumerate(free_milli) if f >= milli]
        return [d for d, f in enumerate(free_milli) if f + (counted[d] if counted else 0) >= milli
                and (free_memory is None or free_memory[d] >= memory) and (free_slots is None or free_slots[d] > 0)]
    return [d for d, f in enumerate(free_milli) if f == MILLI and (free_memory is None or free_memory[d] >= memory)
            and (free_slots is None or free_slots[d] > 0)]


def without(free_slots: Sequence[int] | None, blocked: Collection[int], devices: int) -> Sequence[int] | None:
    """``free_slots`` (None: no count on any of the ``devices``) with none left on the ``blocked`` positions
    (``volcano.sh/vgpu-podgroup-policy: spread``: devices a pod of the same PodGroup holds); as given when
    nothing is blocked."""
    if not blocked:
        return free_slots
    base = free_slots if free_slots is not None else [NO_SHARE_COUNT] * devices
    return [0 if d in blocked else s for d, s in enumerate(base)]


def fits(free_milli: Sequence[int], ask: GpuAsk, free_memory: Sequence[int] | None = None,
         model: str | None = None, free_slots: Sequence[int] | None = None, zero: Sequence[int] | None = None) -> bool:
    """Whether a node with these free milli (and GPU memory, and pod slots) per device, of this model, can take the
    ask's GPUs (cpu and memory of the host are the caller's; ``model`` None: not checked; ``zero``: ``usable``)."""
    if not _model_ok(ask, model):
        return False
    return ask.none or len(usable(free_milli, ask, free_memory, free_slots, zero)) >= ask.devices


def choose_devices(free_milli: Sequence[int], ask: GpuAsk, free_memory: Sequence[int] | None = None,
                   model: str | None = None, rule: str = "best-fit",
                   free_slots: Sequence[int] | None = None,
                   order: Sequence[int] | None = None, zero: Sequence[int] | None = None) -> tuple[int, ...] | None:
    """The device indices the ask takes (module docstring: rules and ties), () for no GPU, None when it does
    not fit. ``order``: the devices in the order a scheduler walks them (Volcano's vGPU plugin: ``Capacity``'s
    ``device_order``), the first that can take the ask taken, ``rule`` then unused; ``zero``: ``usable``."""
    if rule not in RULES:
        raise ValueError(f"unknown device rule {rule!r} (one of {', '.join(RULES)})")
    if not _model_ok(ask, model):
        return None
    whole, milli = ask.whole, ask.milli
    if not whole and not milli:
        return ()
    if order is not None:
        can = set(usable(free_milli, ask, free_memory, free_slots, zero))
        picked = [d for d in order if d in can][: ask.devices]
        return tuple(picked) if len(picked) == ask.devices else None
    if not whole and rule != "first-fit" and not (zero is not None and any(zero)):  # a share, best or worst
        # fit: one pass (a planner's hot path)
        memory, worst = ask.memory_mib, rule == "worst-fit"
        best, most = -1, 0
        for d, f in enumerate(free_milli):
            if f >= milli and (free_memory is None or free_memory[d] >= memory) and (
                    free_slots is None or free_slots[d] > 0) and (
                    best < 0 or (f > most if worst else f < most)):  # ties keep the lower index
                best, most = d, f
        return (best,) if best >= 0 else None
    ok = usable(free_milli, ask, free_memory, free_slots, zero)
    if len(ok) < ask.devices:
        return None
    if not ask.is_share or rule == "first-fit":
        return tuple(ok[: ask.devices])
    if rule == "best-fit":
        return (min(ok, key=lambda d: (free_milli[d], d)),)
    return (min(ok, key=lambda d: (-free_milli[d], d)),)


def fits_on(free_milli: Sequence[int], ask: GpuAsk, devices: Sequence[int], free_memory: Sequence[int] | None = None,
            model: str | None = None, free_slots: Sequence[int] | None = None,
            zero: Sequence[int] | None = None, closed: Collection[int] = ()) -> bool:
    """Whether the ask may take exactly these device positions (a plan that names them): as many distinct
    devices as it asks, each one that ``usable`` admits, on a node of a model it accepts. With ``zero``, a share
    naming no compute (``GpuAsk.no_compute``) may take any device but the ``closed`` ones (unhealthy, in MIG
    mode, a count of 0) that has its memory and a pod slot: a plan's named devices hold in any order, and
    Volcano takes such a share on a device whose other shares fill its compute when it comes before them."""
    if not _model_ok(ask, model):
        return False
    if ask.no_compute and zero is not None and ask.is_share:
        return len(devices) == 1 and all(
            0 <= d < len(free_milli) and d not in closed and free_milli[d] + zero[d] >= 0
            and (free_memory is None or free_memory[d] >= ask.memory_mib)
            and (free_slots is None or free_slots[d] > 0) for d in devices)
    ok = set(usable(free_milli, ask, free_memory, free_slots, zero))
    return len(devices) == ask.devices and len(set(devices)) == len(devices) and all(d in ok for d in devices)


def take(free_milli: Sequence[int], ask: GpuAsk, devices: Sequence[int]) -> tuple[int, ...]:
    """The free milli per device after the ask takes ``devices``."""
    out = list(free_milli)
    per = ask.milli if ask.is_share else MILLI
    for d in devices:
        out[d] -= per
    return tuple(out)


# ---- fragmentation ----------------------------------------------------------------------------

@dataclass(frozen=True)
class TaskType:
    """One task type of a target workload: host cpu (milli) and GPU ask; ``weight`` its frequency."""

    cpu: int
    ask: GpuAsk
    weight: float


@dataclass(frozen=True)
class TargetWorkload:
    """Task types and their frequencies (summing to 1), grouped for ``fragmentation``: per (GPU ask without
    memory) the cpu thresholds sorted with their cumulative frequencies."""

    types: tuple[TaskType, ...]

    @staticmethod
    def of(tasks: Iterable[tuple[int, GpuAsk]]) -> TargetWorkload:
        """The task-type distribution of a list of tasks (cpu, ask): each distinct (cpu, ask) with its share."""
        counts: dict[tuple[int, GpuAsk], int] = {}
        for cpu, ask in tasks:
            key = (cpu, GpuAsk(ask.whole, ask.milli, 0, ask.models))
            counts[key] = counts.get(key, 0) + 1
        n = sum(counts.values())
        types = tuple(TaskType(cpu, ask, c / n) for (cpu, ask), c in
                      sorted(counts.items(), key=lambda kv: (kv[0][1].whole, kv[0][1].milli,
                                                             sorted(kv[0][1].models), kv[0][0])))
        return TargetWorkload(types)

    def groups(self) -> list[tuple[GpuAsk, np.ndarray[Any, Any], np.ndarray[Any, Any]]]:
        """(ask, cpu thresholds ascending, cumulative weight at each threshold) per distinct ask."""
        by: dict[GpuAsk, list[TaskType]] = {}
        for t in self.types:
            by.setdefault(t.ask, []).append(t)
        out = []
        for ask, ts in by.items():
            ts = sorted(ts, key=lambda t: t.cpu)
            out.append((ask, np.array([t.cpu for t in ts], dtype=np.int64),
                        np.cumsum([t.weight for t in ts], dtype=np.float64)))
        return out


class FragTable:
    """``fragmentation`` compiled for one target workload and a fixed list of GPU models: every task type's
    cpu threshold, device need and allowed models as arrays, so that N nodes cost a few numpy operations."""

    def __init__(self, target: TargetWorkload, models: Sequence[str]) -> None:
        self.model_ids = {m: k for k, m in enumerate(dict.fromkeys(models))}
        groups = target.groups()
        self.none_weight = sum(float(cum[-1]) for ask, _c, cum in groups if ask.none)
        gpu_groups = [(ask, cpus, cum) for ask, cpus, cum in groups if not ask.none]
        self.all_weight = sum(float(cum[-1]) for _a, _c, cum in groups)
        self.cuts = np.unique(np.concatenate([c for _a, c, _w in gpu_groups] or [np.zeros(0, dtype=np.int64)]))
        # hostable[g, j]: weight of group g's types whose cpu is at most cuts[j - 1] (j = 0: none)
        self.hostable = np.zeros((len(gpu_groups), len(self.cuts) + 1))
        for g, (_ask, cpus, cum) in enumerate(gpu_groups):
            pos = np.searchsorted(cpus, self.cuts, side="right")
            self.hostable[g, 1:] = np.where(pos > 0, cum[np.maximum(pos - 1, 0)], 0.0)
        self.need = np.array([a.milli if a.is_share else MILLI for a, _c, _w in gpu_groups], dtype=np.int64)
        self.whole = np.array([a.whole for a, _c, _w in gpu_groups], dtype=np.int64)
        self.levels, self.level_of = np.unique(self.need, return_inverse=True)
        self.allowed = np.array([[not a.models or m in a.models for a, _c, _w in gpu_groups]
                                 for m in self.model_ids], dtype=bool).reshape(len(self.model_ids), -1)

    def ids(self, models: Sequence[str]) -> np.ndarray[Any, Any]:
        return np.array([self.model_ids[m] for m in models], dtype=np.int64)

    def __call__(self, free_milli: np.ndarray[Any, Any], free_cpu: np.ndarray[Any, Any],
                 model_ids: np.ndarray[Any, Any], blocked: np.ndarray[Any, Any] | None = None) -> np.ndarray[Any, Any]:
        free = np.asarray(free_milli, dtype=np.int64).reshape(len(free_cpu), -1)
        total = free.sum(axis=1).astype(np.float64)
        out = self.all_weight * total
        if not len(self.need):
            return out
        # a blocked device (its share count of pods on it) takes no task: its free milli is below every level
        usable = free if blocked is None else np.where(np.asarray(blocked, dtype=bool).reshape(free.shape), -1, free)
        # below[k, l]: free milli of node k's devices with less than levels[l] free
        below = (free[:, :, None] * (usable[:, :, None] < self.levels[None, None, :])).sum(axis=1)[:, self.level_of]
        share = self.whole == 0
        most = usable.max(axis=1)
        full = (usable == MILLI).sum(axis=1)
        gpu_ok = np.where(share[None, :], most[:, None] >= self.need[None, :], full[:, None] >= self.whole[None, :])
        gpu_ok &= self.allowed[np.asarray(model_ids, dtype=np.int64)]
        host = self.hostable[:, np.searchsorted(self.cuts, np.asarray(free_cpu), side="right")].T
        return out - (gpu_ok * host * (total[:, None] - below)).sum(axis=1)


def fragmentation(free_milli: np.ndarray[Any, Any], free_cpu: np.ndarray[Any, Any], models: Sequence[str],
                  target: TargetWorkload, blocked: np.ndarray[Any, Any] | None = None) -> np.ndarray[Any, Any]:
    """Fragmentation (milli, expected over the target workload) of N nodes: ``free_milli`` (N, D) free milli per
    device (absent devices 0), ``free_cpu`` (N,), ``models`` the node's GPU model each, ``blocked`` (N, D) the
    devices that take no more pods (their share count held: their free milli no task can use; None: none)
    (``FragTable`` for repeated calls)."""
    table = FragTable(target, models)
    return table(np.asarray(free_milli), np.asarray(free_cpu), table.ids(models), blocked)


def node_fragmentation(free_milli: Sequence[int], free_cpu: int, model: str, target: TargetWorkload) -> float:
    """``fragmentation`` of one node."""
    arr = np.array([list(free_milli) or [0]], dtype=np.int64)
    return float(fragmentation(arr, np.array([free_cpu]), [model], target)[0])
