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
- HAMi's scheduler, the same model under its own names (HAMi ``pkg/device/nvidia``, its chart's resource
  names): a node's devices in ``hami.io/node-nvidia-register`` (a JSON list of ``{id, count, devmem, type,
  health, ...}``, or the older ``id,count,devmem,devcore,type,numa,health[,index,mode]`` entries separated by
  ``:``; a device's index is its position); a share is a container's ``nvidia.com/gpu`` (the count, default 1)
  with ``nvidia.com/gpucores``, ``nvidia.com/gpumem`` or ``nvidia.com/gpumem-percentage``; where it sits,
  ``hami.io/vgpu-devices-allocated`` (else ``-to-allocate``), in ``vgpu-ids-new``'s format. HAMi's device
  plugin advertises ``nvidia.com/gpu`` in vGPU slots (devices x split count): on a HAMi node it is read as
  its devices (whole cards), and a HAMi share's ``nvidia.com/gpu`` and share resources are held at device
  level, not in the node's totals (``hami_totals``; on a snapshot where no node lists its GPUs they stay
  whole cards and requests, as before). A container asking ``nvidia.com/gpu`` alone is whole cards,
  as HAMi makes it (exclusive cores, all the memory).

Bad input, each one line naming file, object and field: a share above 1000 milli (cores above 100), a
memory ask above the pinned device's, an annotation naming a device the node lacks, whole-card and shared
requests in one container, a malformed annotation.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from optplan.adapters.documents import yaml_documents
from optplan.errors import InputError
from optplan.models.devices import (
    GPU_NOUSE_TYPE,
    GPU_USE_TYPE,
    GPUSHARE_INDEX,
    GPUSHARE_MEMORY,
    GPUSHARE_NUMBER,
    HAMI_ALLOCATED,
    HAMI_CORES,
    HAMI_MEMORY,
    HAMI_MEMORY_PERCENTAGE,
    HAMI_REGISTER,
    HAMI_RESOURCES,
    HAMI_TO_ALLOCATE,
    MILLI_PER_GPU,
    SHARE_MILLI,
    VGPU_CORES,
    VGPU_IDS,
    VGPU_MEMORY,
    VGPU_MEMORY_PERCENTAGE,
    VGPU_MODE,
    VGPU_NUMBER,
    VGPU_PODGROUP_POLICY,
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
DEVICE_CONFIG_NAMESPACE = "kube-system"
DEVICE_CONFIG_NAME = "volcano-vgpu-device-config"
"""Where Volcano's device-share plugin reads its device configuration (its MIG geometries among it), unless its
arguments ``deviceshare.KnownGeometriesCMNamespace`` / ``deviceshare.KnownGeometriesCMName`` say otherwise."""
DEVICE_CONFIG_KEY = "device-config.yaml"


@dataclass(frozen=True)
class DeviceConfig:
    """The device-share plugin's configuration (the ``device-config.yaml`` of its ConfigMap) as far as optplan
    reads it, parsed once (``read_device_config``)."""

    mig_models: tuple[str, ...] = ()
    """The GPU types it gives a MIG geometry (``nvidia.knownMigGeometries[].models``)."""
    mig_problem: str | None = None
    """Why no geometry is read from it: it cannot be loaded (Volcano then uses its default configuration, which has
    none, ``config.InitDevicesConfig``), or ``knownMigGeometries`` is not a list."""
    memory_percentage: bool = False
    """Volcano's vGPU plugin reads ``volcano.sh/vgpu-memory-percentage``: only when the configuration names it
    (``nvidia.resourceMemoryPercentageName``); its default configuration names no percentage resource
    (``GetDefaultDevicesConfig``), so a share asking a percentage and no memory asks all of a device's memory
    (``ExtractResourceRequest``: no memory, no percentage read, 100 percent)."""
    warnings: tuple[str, ...] = ()
    """What of it optplan does not follow: a ConfigMap Volcano cannot load (it then uses its defaults, and so does
    optplan), or resource names other than Volcano's defaults. A loaded configuration replaces the defaults whole
    (``loadConfigFromCM``): a name it leaves out is empty, and Volcano's vGPU plugin then reads no such request
    from any pod; optplan reads Volcano's default names whatever the file says."""


_DEFAULT_NAMES = (("resourceCountName", VGPU_NUMBER), ("resourceMemoryName", VGPU_MEMORY),
                  ("resourceCoreName", VGPU_CORES))
"""The device configuration's resource names and Volcano's defaults for them (``GetDefaultDevicesConfig``)."""


def read_device_config(configmap: Mapping[str, Any] | None) -> DeviceConfig:
    """The device configuration in ``configmap`` (None: absent, Volcano's default configuration)."""
    if configmap is None:
        return DeviceConfig()
    where = f"ConfigMap {configmap['metadata'].get('namespace')}/{configmap['metadata'].get('name')}"
    data = configmap.get("data")
    text = data.get(DEVICE_CONFIG_KEY) if isinstance(data, dict) else None
    if not isinstance(text, str):
        problem = f"{where}: no data.{DEVICE_CONFIG_KEY}; Volcano then uses its default (no MIG geometry)"
        return DeviceConfig(mig_problem=problem, warnings=(problem,))
    try:
        docs = yaml_documents(text, f"{where}: data.{DEVICE_CONFIG_KEY}")
    except InputError as exc:  # Volcano falls back to its default on a YAML error, and so does this
        problem = f"{exc}; Volcano then uses its default (no MIG geometry)"
        return DeviceConfig(mig_problem=problem, warnings=(problem,))
    doc = docs[0] if len(docs) == 1 else None
    found = doc.get("nvidia") if isinstance(doc, dict) else None
    nvidia: Mapping[str, Any] = found if isinstance(found, dict) else {}
    warnings = []
    for key, default in _DEFAULT_NAMES:
        value = nvidia.get(key)
        if value != default:
            said = "names none (Volcano's vGPU plugin then reads no such request)" if not value else \
                f"is {value!r}"
            warnings.append(f"{where}: nvidia.{key} {said}; optplan reads {default}, Volcano's default")
    percentage = nvidia.get("resourceMemoryPercentageName") == VGPU_MEMORY_PERCENTAGE
    known = nvidia.get("knownMigGeometries")
    if known is not None and not isinstance(known, list):
        return DeviceConfig(mig_problem=f"{where}: nvidia.knownMigGeometries is not a list; Volcano then uses its "
                                        "default", memory_percentage=percentage, warnings=tuple(warnings))
    models: list[str] = []
    for entry in known or ():
        names = entry.get("models") if isinstance(entry, dict) else None
        if isinstance(names, list):
            models.extend(str(m) for m in names if isinstance(m, str) and m)
    return DeviceConfig(mig_models=tuple(models), memory_percentage=percentage, warnings=tuple(warnings))


def with_modes(node: Node, models: Sequence[str]) -> Node:
    """``node`` with each registered device's mode as Volcano's plugin reads it (``decodeNodeDevices``): a register
    entry's ``mig`` is MIG only when the device configuration gives a geometry for its type (the type contains
    one of ``models``, case-sensitive, as ``extractGeometryFromType`` compares); else the plugin falls back to
    ``hami-core``. Unchanged when no device says ``mig``."""
    if not any(d.mode == "mig" for d in node.devices):
        return node
    devices = tuple(d if d.mode != "mig" or any(m in d.model for m in models)
                    else d.model_copy(update={"mode": REGISTER_MODE}) for d in node.devices)
    return node.model_copy(update={"devices": devices})


def _int(text: str, fail: Fail, where: str, what: str) -> int:
    t = text.strip()
    if not (t.isascii() and t.isdigit()) or len(t) > 12:
        raise fail(where, f"{what} is not a non-negative integer: {text!r}")
    return int(t)


# ---- nodes -------------------------------------------------------------------------------------

def node_devices(annotations: Mapping[str, str], allocatable: Resources, fail: Fail) -> tuple[GpuDevice, ...]:
    """The node's GPUs, from the vGPU register annotation, HAMi's, or gpushare's resources; () when none."""
    if VGPU_REGISTER not in annotations and HAMI_REGISTER in annotations:
        return _hami_devices(annotations[HAMI_REGISTER], fail)
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
            count = _int(parts[1], fail, where, f"device {index}'s count")
            memory = _int(parts[2], fail, where, f"device {index}'s memory")
            out.append(GpuDevice(index=index, uuid=uuid, model=parts[3].strip(), memory_mib=memory,
                                 healthy=parts[4].strip().lower() in ("true", "1", "t"), shares=count,
                                 mode=parts[5].strip()))
        if not out:
            raise fail(where, "names no device")
        return tuple(out)
    number = allocatable.get(GPUSHARE_NUMBER, 0) // MILLI
    if number > 0:
        memory = allocatable.get(GPUSHARE_MEMORY, 0) // MILLI // number
        return tuple(GpuDevice(index=i, memory_mib=memory) for i in range(number))
    return ()


def _hami_devices(text: str, fail: Fail) -> tuple[GpuDevice, ...]:
    """HAMi's register annotation: JSON (its current form) or the older comma entries."""
    where = f"metadata.annotations.{HAMI_REGISTER}"
    rows: list[tuple[str, str, str, str, bool]] = []  # uuid, count ("": not given, no limit), memory, type, healthy
    if text.lstrip().startswith("["):
        try:
            items = json.loads(text)
        except ValueError as e:
            raise fail(where, f"is not valid JSON: {e}") from None
        for index, item in enumerate(items if isinstance(items, list) else [None]):
            if not isinstance(item, dict):
                raise fail(where, f"device {index} is not a JSON object")
            health = item.get("health", False)  # HAMi omits a false health (omitempty)
            rows.append((str(item.get("id", "")), str(item.get("count", "")), str(item.get("devmem", 0)),
                         str(item.get("type", "")), health is True))
    else:
        for item in text.split(":"):
            if not item:
                continue  # HAMi skips an empty entry (the trailing one)
            parts = item.split(",")
            if len(parts) not in (7, 9):
                raise fail(where, f"device {len(rows)} has {len(parts)} fields, expected id,count,devmem,devcore,"
                                  "type,numa,health[,index,mode]")
            rows.append((parts[0], parts[1], parts[2], parts[4], parts[6].strip().lower() in ("true", "1", "t")))
    out = []
    seen: set[str] = set()
    for index, (uuid, count, memory, model, healthy) in enumerate(rows):
        uuid = uuid.strip()
        if not uuid or uuid in seen:
            raise fail(where, f"device {index}: {'empty' if not uuid else 'duplicate'} UUID {uuid!r}")
        seen.add(uuid)
        out.append(GpuDevice(index=index, uuid=uuid, model=model.strip(), healthy=healthy,
                             shares=_int(count, fail, where, f"device {index}'s count") if count else None,
                             memory_mib=_int(memory, fail, where, f"device {index}'s memory")))
    if not out:
        raise fail(where, "names no device")
    return tuple(out)


def node_allocatable(annotations: Mapping[str, str], allocatable: Resources,
                     devices: Sequence[GpuDevice]) -> Resources:
    """The node's allocatable as the model reads it: on a HAMi node, ``nvidia.com/gpu`` (vGPU slots) becomes
    its devices, in whole cards; unchanged elsewhere."""
    if not devices or VGPU_REGISTER in annotations or HAMI_REGISTER not in annotations:
        return allocatable
    return {**allocatable, WHOLE_GPU: len(devices) * MILLI}


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


def pod_gpu(annotations: Mapping[str, str], spec: Mapping[str, Any], parse: Callable[[Any, str], Resources],
            fail: Fail, requests: Resources) -> tuple[GpuShare | None, Resources]:
    """The pod's ask at device level (not yet pinned: ``pin`` places it; None for a pod that asks for whole
    ``nvidia.com/gpu`` cards or none) and its ``requests`` as written; ``hami_totals`` then says how the
    node's totals count a HAMi share's."""
    share, _ = _read_share(annotations, spec, parse, fail)
    return share, requests


def hami_totals(share: GpuShare | None, requests: Resources, devices: bool) -> tuple[GpuShare | None, Resources]:
    """A pod's (or a VCJob template's) share and requests once every node is read. A HAMi share (its requests
    name HAMi's share resources) holds its ``nvidia.com/gpu`` (vGPU slots) and share resources at device level,
    not in the totals, when some node lists its GPUs (``devices``); on a snapshot where none does, HAMi's
    names are read as before: no share, the requests as written (``nvidia.com/gpu`` whole cards)."""
    if share is None or not any(requests.get(r, 0) > 0 for r in HAMI_RESOURCES):
        return share, requests
    if devices:
        return share, {r: v for r, v in requests.items() if r != WHOLE_GPU and r not in HAMI_RESOURCES}
    return None, requests


_VOLCANO_NAMES = (VGPU_NUMBER, VGPU_CORES, VGPU_MEMORY, VGPU_MEMORY_PERCENTAGE)
_HAMI_NAMES = (WHOLE_GPU, HAMI_CORES, HAMI_MEMORY, HAMI_MEMORY_PERCENTAGE)
"""(count, cores, memory, memory percentage): the same share under Volcano's and HAMi's names."""


def _read_share(annotations: Mapping[str, str], spec: Mapping[str, Any], parse: Callable[[Any, str], Resources],
                fail: Fail) -> tuple[GpuShare | None, bool]:
    """The pod's share and whether it is HAMi's (its ``nvidia.com/gpu`` counting vGPU slots)."""
    shares: list[tuple[str, GpuShare, bool]] = []
    for path, ask in _container_asks(spec, parse):
        vgpu = {r: ask[r] // MILLI for r in _VOLCANO_NAMES if ask.get(r, 0) > 0}
        hami = {r: ask[r] // MILLI for r in HAMI_RESOURCES if ask.get(r, 0) > 0}
        gs_memory, gs_number = ask.get(GPUSHARE_MEMORY, 0) // MILLI, ask.get(GPUSHARE_NUMBER, 0) // MILLI
        whole = ask.get(WHOLE_GPU, 0) > 0 and not hami  # with HAMi's share resources, it is HAMi's count
        kinds = [k for k, on in (("nvidia.com/gpu", whole), ("volcano.sh/vgpu-*", bool(vgpu)),
                                 ("nvidia.com/gpumem, gpucores (HAMi)", bool(hami)),
                                 (GPUSHARE_MEMORY, gs_memory > 0), (GPUSHARE_NUMBER, gs_number > 0)) if on]
        if len(kinds) > 1:
            raise fail(path, f"whole-card and shared GPU requests mixed in one container: {', '.join(kinds)}")
        if vgpu:
            shares.append((path, _vgpu_share(vgpu, _VOLCANO_NAMES, annotations, path, fail), False))
        elif hami:
            hami[WHOLE_GPU] = ask.get(WHOLE_GPU, 0) // MILLI
            if HAMI_MEMORY not in hami and HAMI_MEMORY_PERCENTAGE not in hami:
                hami[HAMI_MEMORY_PERCENTAGE] = 100  # HAMi's default (no defaultMemory): all the card's memory
            shares.append((path, _vgpu_share(hami, _HAMI_NAMES, annotations, path, fail), True))
        elif gs_memory:
            shares.append((path, GpuShare(count=1, milli=0, memory_mib=gs_memory), False))
        elif gs_number:
            shares.append((path, GpuShare(count=gs_number), False))
    if not shares:
        return None, False
    if len(shares) > 1:
        raise fail(shares[1][0], "more than one container asks for shared GPUs (optplan models one per pod)")
    path, share, hami_share = shares[0]
    if hami_share:
        others = [p for p, ask in _container_asks(spec, parse) if p != path and ask.get(WHOLE_GPU, 0) > 0]
        if others:
            raise fail(others[0], "asks for nvidia.com/gpu next to a HAMi share in another container "
                                  "(optplan models one GPU ask per pod)")
    return share, hami_share


def _vgpu_share(vgpu: Mapping[str, int], names: tuple[str, str, str, str], annotations: Mapping[str, str],
                path: str, fail: Fail) -> GpuShare:
    """A share from (count, cores, memory, memory percentage) read under ``names``."""
    number_name, cores_name, memory_name, percent_name = names
    cores = vgpu.get(cores_name, 0)
    if cores > 100:
        raise fail(f"{path}.{cores_name}", f"a share above 1000 milli-GPU: {cores} percent of a card")
    milli = cores * MILLI_PER_GPU // 100
    exact = annotations.get(SHARE_MILLI)
    if exact is not None:
        milli = _int(exact, fail, f"metadata.annotations.{SHARE_MILLI}", "the milli-GPU")
        if milli > MILLI_PER_GPU:
            raise fail(f"metadata.annotations.{SHARE_MILLI}", f"a share above 1000 milli-GPU: {milli}")
        if cores and math.ceil(milli / 10) != cores:
            raise fail(f"metadata.annotations.{SHARE_MILLI}",
                       f"{milli} milli-GPU does not round up to the {cores} percent of {cores_name}")
    percent = vgpu.get(percent_name, 0)
    if percent > 100:
        raise fail(f"{path}.{percent_name}", f"above 100 percent of a card's memory: {percent}")
    count = vgpu.get(number_name) or 1
    if count > 1 and milli < MILLI_PER_GPU and percent < 100:
        raise fail(f"{path}.{number_name}", f"a share on {count} devices ({cores} percent of each) is not modelled: "
                                            "a share sits on one device, several devices are taken whole")
    memory = vgpu.get(memory_name, 0)
    if names == _VOLCANO_NAMES and not memory and not percent:  # ExtractResourceRequest: all the device's memory
        percent = 100
    return GpuShare(count=count, milli=milli, memory_mib=memory,
                    memory_percent=percent, use_types=_types(annotations.get(GPU_USE_TYPE)),
                    nouse_types=_types(annotations.get(GPU_NOUSE_TYPE)), mode=annotations.get(VGPU_MODE, "").strip(),
                    spread=names == _VOLCANO_NAMES and annotations.get(VGPU_PODGROUP_POLICY, "").strip() == "spread")


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
    ids = next((a for a in (VGPU_IDS, HAMI_ALLOCATED, HAMI_TO_ALLOCATE) if a in pod.annotations), None)
    if ids is not None:
        where = f"metadata.annotations.{ids}"
        for container in pod.annotations[ids].split(";"):
            for item in container.split(":"):
                if "," not in item:
                    continue
                parts = item.split(",")
                if len(parts) < 4:
                    raise fail(where, f"device entry {item!r} has {len(parts)} fields, expected UUID,type,memory,cores")
                uuid = parts[0].strip()
                device = by_uuid.get(uuid.split("[", 1)[0] if uuid.endswith("]") else uuid)  # a MIG instance:
                # UUID[group-position] (Volcano's encodeMIGID), on the device of that UUID
                if device is None:
                    raise fail(where, f"names device {uuid!r}, which node {node.name} lacks")
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


def without_unread_percentage(share: GpuShare | None, requests: Resources) -> GpuShare | None:
    """The share as Volcano's vGPU plugin reads it when its device configuration names no memory-percentage
    resource (``DeviceConfig.memory_percentage`` False): a share asking ``volcano.sh/vgpu-memory-percentage`` and no
    ``volcano.sh/vgpu-memory`` asks all of a device's memory. Unchanged otherwise."""
    if share is None or share.whole or not requests.get(VGPU_MEMORY_PERCENTAGE, 0) or requests.get(VGPU_MEMORY, 0):
        return share
    return share if share.memory_percent == 100 else share.model_copy(update={"memory_percent": 100})
