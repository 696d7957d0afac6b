"""Import the Alibaba "openb" GPU trace (cluster-trace-gpu-v2023) as a Repack snapshot.

``import_openb(nodes_csv, pods_csv, ImportConfig(...))`` returns plain dicts in Kubernetes' own shape
(Nodes, PodGroups, Pods, one RepackRun; sorted like ``generate``: kind, namespace, name) and a stats dict.
It reads the two CSV files it is given and nothing else.

Input files (header row required, columns in any order, extra columns ignored):

- nodes: ``sn,cpu_milli,memory_mib,gpu,model``. Each row becomes a Node named ``sn`` with allocatable
  ``cpu`` (``cpu_milli``), ``memory`` (``memory_mib`` MiB), ``pods: 110`` and, when ``gpu`` > 0,
  ``nvidia.com/gpu``; the GPU model is the label ``nvidia.com/gpu.product`` (as NVIDIA's GPU feature
  discovery sets it; omitted when ``model`` is empty).
- pods: ``name,cpu_milli,memory_mib,num_gpu,gpu_milli`` and optionally ``gpu_spec`` (empty: any model, or
  models separated by ``|``) and ``creation_time`` (seconds; absent means 0). ``qos``, ``pod_phase`` and
  the other times are ignored: every imported pod is Running.

What is kept. Only whole-GPU pods (``num_gpu`` >= 1 and ``gpu_milli`` = 1000). Fractional-GPU pods
(``gpu_milli`` < 1000: a share of one card) are left out, because Repack moves whole ``nvidia.com/gpu``
requests and a shared card is not a Kubernetes-schedulable unit; cpu-only pods (``num_gpu`` = 0) are
left out too. Both are counted in the stats.

Placement (deterministic, no randomness). Pods are replayed in trace order (``creation_time``, then
``name``) onto the node with the highest Kubernetes LeastAllocated score among the nodes where the pod
fits (cpu, memory, GPUs and pod slots free, and, when ``gpu_spec`` names models, a node of one of those
models): per resource r in cpu, memory, nvidia.com/gpu, ``(allocatable − requested − pod) × 100 //
allocatable`` (kube-scheduler's integer arithmetic), averaged with equal weights (integer division by 3);
ties go to the first node by name. A pod that fits nowhere is skipped and counted. Replay stops as soon
as the GPUs taken reach ``ceil(fill × total GPUs / 100)`` (the last pod may overshoot by less than its
own size). The whole-GPU pods of a trace may request fewer GPUs than the target (the default openb trace
requests 4,355 of 6,212), so the trace is replayed again, pass after pass, up to ``max_passes``; the
pods of pass k >= 2 are named ``<name>-r<k>`` and created ``k − 1`` trace spans later. Replay also stops
after a pass that placed nothing.

Departures (stream ``<seed>/departures``): ``round_half_up(departures × placed)`` pods, drawn uniformly
without replacement among the placed ones, are removed. This leaves the scattered free cards that a
churned cluster shows.

Gangs (stream ``<seed>/gangs``). The surviving pods, in trace order, are cut into runs of consecutive pods
of the same shape (cpu, memory, GPUs, allowed models). Each run is split, front to back, into PodGroups
whose sizes are drawn from ``gang_sizes`` (default 1: 70%, 2: 15%, 4: 10%, 8: 5%); the last PodGroup of
a run is cut to what is left. So single pods are PodGroups of their own, and multi-pod gangs hold pods of
one shape. ``minMember = max(1, ceil(min_member_ratio × size))`` (default ratio 0.75: 1, 2, 3, 6 for
sizes 1, 2, 4, 8), computed exactly. Each PodGroup is owned by a VCJob ``job-<n>`` (n in trace order of
its first pod), named ``job-<n>-<job uid>`` as Volcano names them, queue ``default``; every pod is in
namespace ``openb``, ``schedulerName: volcano``, owned by its VCJob, and keeps its trace name. Pods whose
``gpu_spec`` names models get a required node affinity ``nvidia.com/gpu.product In [...]``.

Shared GPUs (``shared``, ``--shared``). The fractional-GPU pods are kept too, each a share of one device:
the replay tracks every node's GPUs one by one in milli-GPU (a whole-GPU pod takes the first devices no
pod touches; a share the device where it fits tightest, ties to the first, as the device-share plugin's
binpack policy; the LeastAllocated GPU term counts milli-GPU, which leaves whole-GPU replays as they were).
Nodes get Volcano's vGPU register annotation (``volcano.sh/node-vgpu-register``: device ``GPU-<node>-<i>``,
type ``NVIDIA-<model>``, memory from ``MODEL_MEMORY_MIB``, else ``NOMINAL_MEMORY_MIB``) and
``volcano.sh/vgpu-number|cores|memory`` in their allocatable; a share pod asks ``volcano.sh/vgpu-number: 1``,
``volcano.sh/vgpu-cores`` (``gpu_milli`` in whole percent, rounded up; the exact ``gpu_milli`` in
``optplan.io/gpu-milli``) and ``volcano.sh/vgpu-memory`` in proportion (``SHARE_MEMORY_BASE_MIB``), and carries
the device it sits on (``volcano.sh/vgpu-ids-new``, ``volcano.sh/vgpu-node``); ``gpu_spec`` stays the node
affinity. The fill counts milli-GPU. Without ``shared`` the output is what it was.

UIDs come from stream ``<seed>/uids``. The RepackRun ``openb-<seed>`` (DryRun) targets ``nvidia.com/gpu``.
The same files and config give the same objects.
"""

from __future__ import annotations

import csv
import math
import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from optplan.adapters.generate import (
    GROUP_ANNOTATION,
    JOB_API,
    MAX_PODS,
    cpu_quantity,
    memory_quantity,
    object_order,
    pod_group_object,
    pod_object,
    random_uid,
    timestamp,
)
from optplan.adapters.vgpu import ids_annotation, register_annotation
from optplan.errors import InputError
from optplan.models.devices import (
    MILLI_PER_GPU,
    SHARE_MILLI,
    VGPU_CORES,
    VGPU_IDS,
    VGPU_MEMORY,
    VGPU_NODE,
    VGPU_NUMBER,
    VGPU_REGISTER,
    GpuDevice,
    GpuShare,
)
from optplan.runtime import gc_paused

RESOURCE = "nvidia.com/gpu"
MODEL_LABEL = "nvidia.com/gpu.product"
NAMESPACE = "openb"
SOURCE_LABEL = "optplan.io/source"
NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
_MI_MILLI = 2**20 * 1000
MODEL_MEMORY_MIB = {"P100": 16384, "T4": 15360, "V100M16": 16384, "V100M32": 32768, "A10": 24576}
"""Device memory (MiB) of the trace's GPU models with a public datasheet; the anonymised ones (G2, G3) get
``NOMINAL_MEMORY_MIB``."""
NOMINAL_MEMORY_MIB = 16384
"""The memory registered for a device of an anonymised model (the trace gives none)."""
SHARE_MEMORY_BASE_MIB = min([*MODEL_MEMORY_MIB.values(), NOMINAL_MEMORY_MIB])
"""A share asks ``volcano.sh/vgpu-memory`` in proportion to its milli-GPU of the smallest device memory (floor):
the trace's pods ask no GPU memory, but Volcano's vGPU plugin makes a share naming none ask all of its device's
(``ExtractResourceRequest``), and the shares a device's compute holds never need more memory than it has."""
SHARES_PER_DEVICE = 100
"""Shares one device may hold (the register's count): above what the trace's smallest shares need."""
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
_NAME_ROOM = 240
"""Longest trace name accepted: room is kept for the ``-r<k>`` suffix of later passes."""


@dataclass(frozen=True)
class ImportConfig:
    """How to turn the trace into a snapshot; see the module docstring."""

    fill: float = 90.0
    """Percent of the cluster's GPUs to take by replaying the trace (0..100)."""
    departures: float = 0.0
    """Share (0..1) of the placed pods that then depart."""
    seed: int = 0
    gang_sizes: tuple[tuple[int, float], ...] = ((1, 0.7), (2, 0.15), (4, 0.1), (8, 0.05))
    """PodGroup sizes (pods) and their weights."""
    min_member_ratio: float = 0.75
    """minMember = max(1, ceil(ratio × size))."""
    max_passes: int = 20
    """Replays of the trace at most, to reach ``fill``."""
    shared: bool = False
    """Keep the fractional-GPU pods as shares of one device (see "Shared GPUs" in the module docstring)."""

    def __post_init__(self) -> None:
        if not 0 <= self.fill <= 100:
            raise InputError(f"must be within 0..100, got {self.fill}", field="fill")
        for name in ("departures", "min_member_ratio"):
            v = getattr(self, name)
            if not 0 <= v <= 1:
                raise InputError(f"must be within 0..1, got {v}", field=name)
        dist = self.gang_sizes
        if not dist or any(n < 1 or not w >= 0 for n, w in dist) or sum(w for _, w in dist) <= 0:
            raise InputError("must be (size >= 1, weight >= 0) pairs with a positive total weight",
                             field="gang_sizes")
        if self.max_passes < 1:
            raise InputError(f"must be at least 1, got {self.max_passes}", field="max_passes")


# ---- reading the CSV files ---------------------------------------------------------------------

@dataclass(frozen=True)
class _NodeRow:
    name: str
    cpu: int  # milli
    memory: int  # MiB
    gpu: int
    model: str


@dataclass(frozen=True)
class PodRow:
    name: str
    cpu: int  # milli
    memory: int  # MiB
    gpu: int
    gpu_milli: int
    models: tuple[str, ...]  # allowed GPU models; () = any
    created: int


def csv_rows(path: str, required: tuple[str, ...]) -> Iterator[tuple[int, dict[str, str]]]:
    """(line number, row) for every record; InputError naming file, line and column on a bad one."""
    try:
        with open(path, encoding="utf-8", newline="") as f:
            reader = csv.DictReader(f)
            header = reader.fieldnames
            if header is None:
                raise InputError("file is empty (expected a header row)", file=path)
            for col in required:
                if col not in header:
                    raise InputError(f"required column is missing (header: {','.join(header)})", file=path,
                                     obj="line 1", field=col)
            if len(set(header)) != len(header):
                raise InputError("a column name appears twice in the header", file=path, obj="line 1")
            for row in reader:
                line = reader.line_num
                if None in row:
                    raise InputError(f"more fields than the header's {len(header)}", file=path, obj=f"line {line}")
                for col in header:
                    if row[col] is None:
                        raise InputError(f"fewer fields than the header's {len(header)}", file=path,
                                         obj=f"line {line}", field=col)
                yield line, row
    except OSError as e:
        raise InputError(f"cannot read file ({e.strerror or e})", file=path) from None
    except UnicodeDecodeError:
        raise InputError("file is not UTF-8 text", file=path) from None
    except csv.Error as e:
        raise InputError(f"malformed CSV: {e}", file=path) from None


_MAX_INT = 2**31 - 1
"""Largest count in the trace's columns (cpu milli, memory MiB, GPUs, GPU milli): an int32."""


def int_field(path: str, line: int, row: dict[str, str], col: str, *, minimum: int = 0,
              default: int | None = None) -> int:
    text = row.get(col)
    if text is None and default is not None:
        return default
    t = str(text).strip()
    if not (t.isascii() and t.lstrip("+-").isdigit()):  # int() also takes "１２" and "1_0"
        raise InputError(f"expected an integer, got {text!r}", file=path, obj=f"line {line}", field=col)
    v = int(t) if len(t) <= 20 else _MAX_INT + 1
    if v < minimum:
        raise InputError(f"must be at least {minimum}, got {v}", file=path, obj=f"line {line}", field=col)
    if v > _MAX_INT:
        raise InputError(f"must be at most {_MAX_INT}, got {t[:24]}", file=path, obj=f"line {line}", field=col)
    return v


def _name(path: str, line: int, row: dict[str, str], col: str, seen: set[str]) -> str:
    name = row[col].strip()
    if len(name) > _NAME_ROOM or not _NAME.match(name):
        raise InputError(f"not a Kubernetes object name (lower-case DNS-1123, at most {_NAME_ROOM}): {name!r}",
                         file=path, obj=f"line {line}", field=col)
    if name in seen:
        raise InputError(f"duplicate name {name!r}", file=path, obj=f"line {line}", field=col)
    seen.add(name)
    return name


def read_nodes(path: str) -> list[_NodeRow]:
    out: list[_NodeRow] = []
    seen: set[str] = set()
    for line, row in csv_rows(path, NODE_COLUMNS):
        out.append(_NodeRow(_name(path, line, row, "sn", seen), int_field(path, line, row, "cpu_milli"),
                            int_field(path, line, row, "memory_mib"), int_field(path, line, row, "gpu"),
                            row["model"].strip()))
    if not out:
        raise InputError("no nodes (only a header)", file=path)
    return sorted(out, key=lambda n: n.name)


def read_pods(path: str) -> list[PodRow]:
    """Every pod of the trace, in trace order (creation_time, then name)."""
    out: list[PodRow] = []
    seen: set[str] = set()
    for line, row in csv_rows(path, POD_COLUMNS):
        name = _name(path, line, row, "name", seen)
        gpu_milli = int_field(path, line, row, "gpu_milli")
        if gpu_milli > 1000:
            raise InputError(f"must be within 0..1000, got {gpu_milli}", file=path, obj=f"line {line}",
                             field="gpu_milli")
        spec = (row.get("gpu_spec") or "").strip()
        models = tuple(sorted({m.strip() for m in spec.split("|") if m.strip()}))
        out.append(PodRow(name, int_field(path, line, row, "cpu_milli"), int_field(path, line, row, "memory_mib"),
                           int_field(path, line, row, "num_gpu"), gpu_milli, models,
                           int_field(path, line, row, "creation_time", default=0)))
    out.sort(key=lambda p: (p.created, p.name))
    return out


# ---- placement ---------------------------------------------------------------------------------

class _Nodes:
    """Free resources per node (sorted by name) and kube-scheduler's LeastAllocated score, vectorised; GPUs
    in milli-GPU, and each node's devices one by one (free milli-GPU per device)."""

    def __init__(self, nodes: list[_NodeRow]) -> None:
        self.cap = np.array([[n.cpu, n.memory, n.gpu * MILLI_PER_GPU] for n in nodes],
                            dtype=np.int64).reshape(len(nodes), 3)
        self.div = np.maximum(self.cap, 1)
        self.used = np.zeros_like(self.cap)
        self.pods = np.zeros(len(nodes), dtype=np.int64)
        self.models = [n.model for n in nodes]
        self._allowed: dict[tuple[str, ...], np.ndarray[Any, Any]] = {}
        self.device_free = [[MILLI_PER_GPU] * n.gpu for n in nodes]
        """node -> device -> free milli-GPU."""
        self.whole_free = np.array([n.gpu for n in nodes], dtype=np.int64)
        """node -> devices no pod touches."""
        self.most_free = np.array([MILLI_PER_GPU if n.gpu else 0 for n in nodes], dtype=np.int64)
        """node -> the largest free milli-GPU of one device."""

    def allowed(self, models: tuple[str, ...]) -> np.ndarray[Any, Any]:
        mask = self._allowed.get(models)
        if mask is None:
            mask = np.array([not models or m in models for m in self.models], dtype=bool)
            self._allowed[models] = mask
        return mask

    def place(self, pod: PodRow) -> tuple[int, tuple[int, ...]]:
        """The node index chosen for the pod and its devices (and take its resources), or (-1, ())."""
        req = _request(pod)
        left = self.cap - self.used - req
        fits = self.allowed(pod.models) & (left >= 0).all(axis=1) & (self.pods < MAX_PODS)
        fits &= (self.whole_free >= pod.gpu) if pod.gpu_milli >= MILLI_PER_GPU else (self.most_free >= pod.gpu_milli)
        if not fits.any():
            return -1, ()
        score = (left * 100 // self.div).sum(axis=1) // 3
        i = int(np.argmax(np.where(fits, score, -1)))  # the first maximum: ties go to the first name
        free = self.device_free[i]
        if pod.gpu_milli >= MILLI_PER_GPU:  # whole cards: the first untouched ones
            devices = tuple([d for d, f in enumerate(free) if f == MILLI_PER_GPU][:pod.gpu])
        else:  # a share: the device it fits tightest (the plugin's binpack policy), ties to the first
            devices = (min((f, d) for d, f in enumerate(free) if f >= pod.gpu_milli)[1],)
        self._take(i, pod, devices, -1)
        return i, devices

    def remove(self, i: int, pod: PodRow, devices: tuple[int, ...]) -> None:
        self._take(i, pod, devices, +1)

    def _take(self, i: int, pod: PodRow, devices: tuple[int, ...], sign: int) -> None:
        self.used[i] -= sign * _request(pod)
        self.pods[i] -= sign
        free = self.device_free[i]
        for d in devices:
            free[d] += sign * min(pod.gpu_milli, MILLI_PER_GPU)
        self.whole_free[i] = sum(1 for f in free if f == MILLI_PER_GPU)
        self.most_free[i] = max(free, default=0)


def _request(pod: PodRow) -> np.ndarray[Any, Any]:
    """cpu milli, memory MiB, milli-GPU."""
    return np.array([pod.cpu, pod.memory, pod.gpu * min(pod.gpu_milli, MILLI_PER_GPU)], dtype=np.int64)


@dataclass(frozen=True)
class PlacedPod:
    pod: PodRow
    name: str
    node: int
    created: int
    devices: tuple[int, ...] = ()


def _replay(cfg: ImportConfig, nodes: _Nodes, pods: list[PodRow], total_gpus: int) -> tuple[list[PlacedPod], int, int]:
    """Placed pods in trace order, the number skipped and the number of passes made."""
    target = math.ceil(Fraction(str(cfg.fill)) * total_gpus / 100) * MILLI_PER_GPU
    span = (max((p.created for p in pods), default=0) + 1)
    placed: list[PlacedPod] = []
    taken = skipped = passes = 0
    while taken < target and pods and passes < cfg.max_passes:
        passes += 1
        before = len(placed)
        for p in pods:
            i, devices = nodes.place(p)
            if i < 0:
                skipped += 1
                continue
            name = p.name if passes == 1 else f"{p.name}-r{passes}"
            placed.append(PlacedPod(p, name, i, p.created + (passes - 1) * span, devices))
            taken += p.gpu * min(p.gpu_milli, MILLI_PER_GPU)
            if taken >= target:
                break
        if len(placed) == before:
            break
    return placed, skipped, passes


def _depart(cfg: ImportConfig, nodes: _Nodes, placed: list[PlacedPod]) -> tuple[list[PlacedPod], int]:
    n = math.floor(Fraction(str(cfg.departures)) * len(placed) + Fraction(1, 2))
    gone = set(random.Random(f"{cfg.seed}/departures").sample(range(len(placed)), n))
    for k in sorted(gone):
        nodes.remove(placed[k].node, placed[k].pod, placed[k].devices)
    return [p for k, p in enumerate(placed) if k not in gone], n


def cut_gangs(cfg: ImportConfig, pods: list[PlacedPod], max_spread: int | None = None,
              part: Callable[[PlacedPod], object] | None = None) -> list[list[PlacedPod]]:
    """Gangs: runs of consecutive pods of one shape, cut into seeded sizes. Two options the importer does
    not use (its output unchanged): ``max_spread``, a gang's pods are created at most this many seconds
    after its first (a drawn size is shortened to fit); ``part``, pods of different parts (the replay's
    ``--repeat`` passes) never share a run."""
    rng = random.Random(f"{cfg.seed}/gangs")
    sizes = [s for s, _ in cfg.gang_sizes]
    weights = [w for _, w in cfg.gang_sizes]
    out: list[list[PlacedPod]] = []
    k = 0
    while k < len(pods):
        shape = _shape(pods[k].pod)
        end = k + 1
        while (end < len(pods) and _shape(pods[end].pod) == shape
               and (part is None or part(pods[end]) == part(pods[k]))):
            end += 1
        while k < end:
            size = min(rng.choices(sizes, weights=weights)[0], end - k)
            while max_spread is not None and size > 1 and pods[k + size - 1].created - pods[k].created > max_spread:
                size -= 1
            out.append(pods[k:k + size])
            k += size
    return out


def _shape(p: PodRow) -> tuple[int, int, int, int, tuple[str, ...]]:
    return p.cpu, p.memory, p.gpu, p.gpu_milli, p.models


# ---- objects -----------------------------------------------------------------------------------

def _devices(n: _NodeRow) -> list[GpuDevice]:
    return [GpuDevice(index=d, uuid=f"GPU-{n.name}-{d}", model=f"NVIDIA-{n.model}" if n.model else "NVIDIA",
                      memory_mib=MODEL_MEMORY_MIB.get(n.model, NOMINAL_MEMORY_MIB)) for d in range(n.gpu)]


def _node(n: _NodeRow, shared: bool) -> dict[str, Any]:
    alloc: dict[str, str] = {"cpu": cpu_quantity(n.cpu), "memory": memory_quantity(n.memory * _MI_MILLI),
                             "pods": str(MAX_PODS)}
    if n.gpu > 0:
        alloc[RESOURCE] = str(n.gpu)
    labels = {"kubernetes.io/arch": "amd64", "kubernetes.io/hostname": n.name, "kubernetes.io/os": "linux",
              SOURCE_LABEL: "openb"}
    if n.model:
        labels[MODEL_LABEL] = n.model
    metadata: dict[str, Any] = {"name": n.name, "labels": labels}
    if shared and n.gpu > 0:
        devices = _devices(n)
        metadata["annotations"] = {VGPU_REGISTER: register_annotation(devices, SHARES_PER_DEVICE)}
        alloc[VGPU_NUMBER] = str(n.gpu * SHARES_PER_DEVICE)
        alloc[VGPU_CORES] = str(n.gpu * 100)
        if devices[0].memory_mib:
            alloc[VGPU_MEMORY] = str(sum(d.memory_mib for d in devices))
    return {"apiVersion": "v1", "kind": "Node", "metadata": metadata, "spec": {},
            "status": {"allocatable": alloc, "capacity": dict(alloc)}}


def _affinity(models: tuple[str, ...]) -> dict[str, Any] | None:
    if not models:
        return None
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": MODEL_LABEL, "operator": "In", "values": list(models)}]}]}}}


def _gang_objects(cfg: ImportConfig, index: int, width: int, gang: list[PlacedPod], node_rows: list[_NodeRow],
                  uids: random.Random) -> list[dict[str, Any]]:
    job = f"job-{index:0{width}d}"
    job_uid = random_uid(uids)
    owner = {"apiVersion": JOB_API, "kind": "Job", "name": job, "uid": job_uid, "controller": True,
             "blockOwnerDeletion": True}
    pg = f"{job}-{job_uid}"
    size = len(gang)
    min_member = max(1, math.ceil(Fraction(str(cfg.min_member_ratio)) * size))
    labels = {"volcano.sh/job-name": job, "volcano.sh/job-namespace": NAMESPACE,
              "volcano.sh/queue-name": "default", "volcano.sh/task-spec": "worker"}
    annotations = {GROUP_ANNOTATION: pg, "volcano.sh/job-name": job, "volcano.sh/queue-name": "default",
                   "volcano.sh/task-spec": "worker"}
    first = gang[0].pod
    requests = {"cpu": cpu_quantity(first.cpu), "memory": memory_quantity(first.memory * _MI_MILLI),
                RESOURCE: str(first.gpu)}
    limits = {RESOURCE: str(first.gpu)}
    share: GpuShare | None = None
    if first.gpu_milli < MILLI_PER_GPU:  # a share of one card: the device-share plugin's resources
        memory = max(1, SHARE_MEMORY_BASE_MIB * first.gpu_milli // MILLI_PER_GPU)
        share = GpuShare(count=1, milli=first.gpu_milli, memory_mib=memory)
        del requests[RESOURCE]
        limits = {VGPU_NUMBER: "1", VGPU_CORES: str(math.ceil(first.gpu_milli / 10)), VGPU_MEMORY: str(memory)}
        requests.update(limits)
        annotations = {**annotations, SHARE_MILLI: str(first.gpu_milli)}
    affinity = _affinity(first.models)
    out = []
    for p in gang:
        node = node_rows[p.node]
        pinned = annotations
        if share is not None:
            devices = _devices(node)
            pinned = {**annotations, VGPU_IDS: ids_annotation([devices[d] for d in p.devices], share),
                      VGPU_NODE: node.name}
        out.append(pod_object(p.name, NAMESPACE, random_uid(uids), node.name, requests, scheduler="volcano",
                              labels=labels, annotations=pinned, owner=owner, created=timestamp(p.created),
                              affinity=affinity, limits=limits))
    out.append(pod_group_object(pg, NAMESPACE, {SOURCE_LABEL: "openb"}, owner, min_member, size,
                                timestamp(gang[0].created), random_uid(uids)))
    return out


def _repack_run(cfg: ImportConfig) -> dict[str, Any]:
    return {"apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackRun",
            "metadata": {"name": f"openb-{cfg.seed}"},
            "spec": {"mode": "DryRun", "goals": [{"resource": RESOURCE}]}}


def import_openb(nodes_csv: str, pods_csv: str, cfg: ImportConfig) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The snapshot's objects (sorted, deterministic) and stats; InputError on a bad file."""
    node_rows = read_nodes(str(nodes_csv))
    trace = read_pods(str(pods_csv))
    whole = [p for p in trace if p.gpu >= 1 and p.gpu_milli == 1000]
    shares = [p for p in trace if p.gpu == 1 and 0 < p.gpu_milli < 1000]
    fractional = sum(1 for p in trace if p.gpu >= 1 and p.gpu_milli < 1000)
    total_gpus = sum(n.gpu for n in node_rows)
    replayed = [p for p in trace if p.gpu_milli == 1000 or p.gpu == 1] if cfg.shared else whole
    replayed = [p for p in replayed if p.gpu >= 1 and p.gpu_milli > 0]
    with gc_paused():
        nodes = _Nodes(node_rows)
        placed, skipped, passes = _replay(cfg, nodes, replayed, total_gpus)
        kept, departed = _depart(cfg, nodes, placed)
        gangs = cut_gangs(cfg, kept)
        uids = random.Random(f"{cfg.seed}/uids")
        width = max(5, len(str(len(gangs))))
        objs = [_node(n, cfg.shared) for n in node_rows]
        for k, gang in enumerate(gangs):
            objs.extend(_gang_objects(cfg, k + 1, width, gang, node_rows, uids))
        objs.append(_repack_run(cfg))
        objs.sort(key=object_order)

    def gpus(pods: list[PlacedPod]) -> int | float:
        milli = sum(int(_request(p.pod)[2]) for p in pods)
        return milli / MILLI_PER_GPU if cfg.shared else milli // MILLI_PER_GPU

    taken_at_fill, taken = gpus(placed), gpus(kept)

    def pct(x: float) -> float:
        return round(100 * x / total_gpus, 2) if total_gpus else 0.0

    stats: dict[str, Any] = {
        "nodes": len(node_rows), "gpus": total_gpus, "trace_pods": len(trace), "whole_gpu_pods": len(whole),
        "fractional_left_out": fractional, "cpu_only_left_out": sum(1 for p in trace if p.gpu == 0),
        "passes": passes, "placed": len(placed), "skipped": skipped, "departed": departed, "pods": len(kept),
        "pod_groups": len(gangs), "gangs": sum(1 for g in gangs if len(g) > 1),
        "gpus_taken_at_fill": taken_at_fill, "fill_reached_percent": pct(taken_at_fill),
        "gpus_taken": taken, "fill_percent": pct(taken),
    }
    if cfg.shared:
        stats["fractional_left_out"] = fractional - len(shares)
        stats["shared_gpu_pods"] = len(shares)
        stats["shares_kept"] = sum(1 for p in kept if p.pod.gpu_milli < MILLI_PER_GPU)
    return objs, stats
