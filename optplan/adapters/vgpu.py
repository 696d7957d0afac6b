"""Volcano's device-share plugin in Kubernetes' shapes: a node's GPUs and a pod's share, read from the
resource names and annotations the plugin uses (Volcano v1.15, ``pkg/scheduler/api/devices/nvidia/vgpu``
and ``gpushare``; the vGPU one is HAMi's model), and written back for the importer and Execute.

- A node's devices: the annotation ``volcano.sh/node-vgpu-register``, ``UUID,count,memoryMiB,type,health,
  mode`` per device, devices separated by ``:`` (a device's index is its position); else the gpushare
  plugin's ``volcano.sh/gpu-number`` cards sharing ``volcano.sh/gpu-memory`` equally. Neither: no devices.
- A pod's share: one container's ``volcano.sh/vgpu-number`` (default 1), ``volcano.sh/vgpu-cores`` (percent
  of a card; ``optplan.io/gpu-milli`` gives the exact milli-GPU it rounds up), ``volcano.sh/vgpu-memory``
  (MiB) or ``volcano.sh/vgpu-memory-percentage``, read from its requests or else its limits; or the
  gpushare plugin's ``volcano.sh/gpu-memory`` (memory only) or ``volcano.sh/gpu-number`` (whole cards).
  The allowed card types: ``nvidia.com/use-gputype`` / ``nvidia.com/nouse-gputype`` (comma-separated).
- Where a running pod's share sits: ``volcano.sh/vgpu-ids-new`` (per container ``;``, devices ``:``, each
  ``UUID,type,usedMemoryMiB,usedCores``), mapped to device indices through the node's UUIDs; or gpushare's
  ``volcano.sh/gpu-index`` (indices, comma-separated).

Bad input, each one line naming file, object and field: a share above 1000 milli (cores above 100), a
memory ask above the pinned device's, an annotation naming a device the node lacks, whole-card and shared
requests in one container, a malformed annotation.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from optplan.errors import InputError
from optplan.models.devices import (
    GPU_NOUSE_TYPE,
    GPU_USE_TYPE,
    GPUSHARE_INDEX,
    GPUSHARE_MEMORY,
    GPUSHARE_NUMBER,
    MILLI_PER_GPU,
    SHARE_MILLI,
    VGPU_CORES,
    VGPU_IDS,
    VGPU_MEMORY,
    VGPU_MEMORY_PERCENTAGE,
    VGPU_NUMBER,
    VGPU_REGISTER,
    WHOLE_GPU,
    GpuDevice,
    GpuShare,
)
from optplan.models.quantity import MILLI
from optplan.models.snapshot import Node, Pod, Resources

Fail = Callable[[str, str], InputError]
"""``fail(field, message)``: the InputError naming the object being read."""

REGISTER_MODE = "hami-core"
"""The sharing mode written in a register entry (Volcano's default controller)."""


def _int(text: str, fail: Fail, where: str, what: str) -> int:
    t = text.strip()
    if not (t.isascii() and t.isdigit()) or len(t) > 12:
        raise fail(where, f"{what} is not a non-negative integer: {text!r}")
    return int(t)


# ---- nodes -------------------------------------------------------------------------------------

def node_devices(annotations: Mapping[str, str], allocatable: Resources, fail: Fail) -> tuple[GpuDevice, ...]:
    """The node's GPUs, from the vGPU register annotation or gpushare's resources; () when neither."""
    text = annotations.get(VGPU_REGISTER)
    where = f"metadata.annotations.{VGPU_REGISTER}"
    if text is not None:
        out = []
        seen: set[str] = set()
        for index, item in enumerate(text.split(":")):
            if "," not in item:
                continue  # Volcano skips an empty entry (the trailing one) and keeps counting
            parts = item.split(",")
            if len(parts) < 6:
                raise fail(where, f"device {index} has {len(parts)} fields, expected UUID,count,memory,type,"
                                  "health,mode")
            uuid = parts[0].strip()
            if not uuid or uuid in seen:
                raise fail(where, f"device {index}: {'empty' if not uuid else 'duplicate'} UUID {uuid!r}")
            seen.add(uuid)
            _int(parts[1], fail, where, f"device {index}'s count")
            memory = _int(parts[2], fail, where, f"device {index}'s memory")
            out.append(GpuDevice(index=index, uuid=uuid, model=parts[3].strip(), memory_mib=memory,
                                 healthy=parts[4].strip().lower() in ("true", "1", "t")))
        if not out:
            raise fail(where, "names no device")
        return tuple(out)
    number = allocatable.get(GPUSHARE_NUMBER, 0) // MILLI
    if number > 0:
        memory = allocatable.get(GPUSHARE_MEMORY, 0) // MILLI // number
        return tuple(GpuDevice(index=i, memory_mib=memory) for i in range(number))
    return ()


def register_annotation(devices: Sequence[GpuDevice], count: int) -> str:
    """``volcano.sh/node-vgpu-register`` for ``devices`` (each shared by up to ``count`` pods)."""
    return "".join(f"{d.uuid},{count},{d.memory_mib},{d.model},{'true' if d.healthy else 'false'},"
                   f"{REGISTER_MODE}:" for d in devices)


# ---- pods --------------------------------------------------------------------------------------

def _container_asks(spec: Mapping[str, Any], parse: Callable[[Any, str], Resources]) -> list[tuple[str, Resources]]:
    """(field path, requests with limits filling in what requests leave out) per container."""
    out = []
    for i, c in enumerate(spec.get("containers") or []):
        if not isinstance(c, Mapping):
            continue
        path = f"spec.containers[{i}].resources"
        res = c.get("resources") or {}
        if not isinstance(res, Mapping):
            continue
        limits = parse(res.get("limits"), f"{path}.limits")
        requests = parse(res.get("requests"), f"{path}.requests")
        out.append((path, {**limits, **requests}))
    return out


def pod_share(annotations: Mapping[str, str], spec: Mapping[str, Any],
              parse: Callable[[Any, str], Resources], fail: Fail) -> GpuShare | None:
    """The pod's ask at device level (not yet pinned: ``pin`` places it), or None for a pod that asks for
    whole ``nvidia.com/gpu`` cards or none."""
    shares: list[tuple[str, GpuShare]] = []
    for path, ask in _container_asks(spec, parse):
        vgpu = {r: ask[r] // MILLI for r in (VGPU_NUMBER, VGPU_CORES, VGPU_MEMORY, VGPU_MEMORY_PERCENTAGE)
                if ask.get(r, 0) > 0}
        gs_memory, gs_number = ask.get(GPUSHARE_MEMORY, 0) // MILLI, ask.get(GPUSHARE_NUMBER, 0) // MILLI
        kinds = [k for k, on in (("nvidia.com/gpu", ask.get(WHOLE_GPU, 0) > 0), ("volcano.sh/vgpu-*", bool(vgpu)),
                                 (GPUSHARE_MEMORY, gs_memory > 0), (GPUSHARE_NUMBER, gs_number > 0)) if on]
        if len(kinds) > 1:
            raise fail(path, f"whole-card and shared GPU requests mixed in one container: {', '.join(kinds)}")
        if vgpu:
            shares.append((path, _vgpu_share(vgpu, annotations, path, fail)))
        elif gs_memory:
            shares.append((path, GpuShare(count=1, milli=0, memory_mib=gs_memory)))
        elif gs_number:
            shares.append((path, GpuShare(count=gs_number)))
    if not shares:
        return None
    if len(shares) > 1:
        raise fail(shares[1][0], "more than one container asks for shared GPUs (optplan models one per pod)")
    return shares[0][1]


def _vgpu_share(vgpu: Mapping[str, int], annotations: Mapping[str, str], path: str, fail: Fail) -> GpuShare:
    cores = vgpu.get(VGPU_CORES, 0)
    if cores > 100:
        raise fail(f"{path}.{VGPU_CORES}", f"a share above 1000 milli-GPU: {cores} percent of a card")
    milli = cores * MILLI_PER_GPU // 100
    exact = annotations.get(SHARE_MILLI)
    if exact is not None:
        milli = _int(exact, fail, f"metadata.annotations.{SHARE_MILLI}", "the milli-GPU")
        if milli > MILLI_PER_GPU:
            raise fail(f"metadata.annotations.{SHARE_MILLI}", f"a share above 1000 milli-GPU: {milli}")
        if cores and math.ceil(milli / 10) != cores:
            raise fail(f"metadata.annotations.{SHARE_MILLI}",
                       f"{milli} milli-GPU does not round up to the {cores} percent of {VGPU_CORES}")
    percent = vgpu.get(VGPU_MEMORY_PERCENTAGE, 0)
    if percent > 100:
        raise fail(f"{path}.{VGPU_MEMORY_PERCENTAGE}", f"above 100 percent of a card's memory: {percent}")
    count = vgpu.get(VGPU_NUMBER, 1)
    if count > 1 and milli < MILLI_PER_GPU and percent < 100:
        raise fail(f"{path}.{VGPU_NUMBER}", f"a share on {count} devices ({cores} percent of each) is not modelled: "
                                            "a share sits on one device, several devices are taken whole")
    return GpuShare(count=count, milli=milli, memory_mib=vgpu.get(VGPU_MEMORY, 0),
                    memory_percent=percent, use_types=_types(annotations.get(GPU_USE_TYPE)),
                    nouse_types=_types(annotations.get(GPU_NOUSE_TYPE)))


def _types(text: str | None) -> tuple[str, ...]:
    return tuple(t.strip() for t in (text or "").split(",") if t.strip())


def pin(pod: Pod, node: Node, fail: Fail) -> Pod:
    """The bound pod with its share pinned to the devices its annotation names on its node (unchanged
    when it names none); InputError when it names a device the node lacks or a share that overflows it."""
    share = pod.gpu_share
    if share is None:
        return pod
    by_uuid = {d.uuid: d for d in node.devices if d.uuid}
    by_index = {d.index: d for d in node.devices}
    devices: list[GpuDevice] = []
    used_memory = share.memory_mib
    if VGPU_IDS in pod.annotations:
        where = f"metadata.annotations.{VGPU_IDS}"
        for container in pod.annotations[VGPU_IDS].split(";"):
            for item in container.split(":"):
                if "," not in item:
                    continue
                parts = item.split(",")
                if len(parts) < 4:
                    raise fail(where, f"device entry {item!r} has {len(parts)} fields, expected UUID,type,memory,cores")
                device = by_uuid.get(parts[0].strip())
                if device is None:
                    raise fail(where, f"names device {parts[0].strip()!r}, which node {node.name} lacks")
                used_memory = max(used_memory, _int(parts[2], fail, where, "the used memory"))
                devices.append(device)
    elif GPUSHARE_INDEX in pod.annotations:
        where = f"metadata.annotations.{GPUSHARE_INDEX}"
        for item in pod.annotations[GPUSHARE_INDEX].split(","):
            index = _int(item, fail, where, "a device index")
            if index not in by_index:
                raise fail(where, f"names device {index}, which node {node.name} lacks")
            devices.append(by_index[index])
    else:
        return pod
    if not node.devices:
        raise fail(where, f"names GPU devices, but node {node.name} registers none")
    indices = tuple(d.index for d in devices)
    if len(set(indices)) != len(indices) or len(indices) != share.count:
        raise fail(where, f"names {len(indices)} device(s) {list(indices)} for a share of {share.count} distinct "
                          "device(s)")
    for d in devices:
        if d.memory_mib and used_memory > d.memory_mib:
            raise fail(where, f"a GPU memory of {used_memory} MiB, above device {d.index}'s {d.memory_mib} MiB")
    return pod.model_copy(update={"gpu_share": share.model_copy(update={"devices": indices,
                                                                         "memory_mib": used_memory})})


def ids_annotation(devices: Sequence[GpuDevice], share: GpuShare) -> str:
    """``volcano.sh/vgpu-ids-new`` for one container holding ``share`` on ``devices``."""
    cores = math.ceil(share.milli / 10)
    return "".join(f"{d.uuid},NVIDIA,{share.memory_mib},{cores}:" for d in devices)
