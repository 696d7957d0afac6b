"""Shared-GPU cases for the real-cluster tier: vGPU nodes (``volcano.sh/node-vgpu-register`` with the allocatable
the device-share plugin needs), share pods (``volcano.sh/vgpu-*`` limits; a running one where its
``volcano.sh/vgpu-ids-new`` says), cases of running shares and pending bare PodGroups (``vcase``), the scheduler
configuration with ``deviceshare.VGPUEnable`` (``vgpu_conf_text``) and the start that lets vc-scheduler read the
nodes' devices (``start_holding``). ``tests/realcluster/test_vgpu.py`` builds hand-made cases from them;
``generate_vgpu(seed, index)`` draws random ones for ``benchmarks/volcano_diff.py --vgpu``."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.realcluster.cluster import HACK, KWOK_ANNOTATION, Cluster
from tests.realcluster.vcdiff import Case, _podgroup

MIB = 16384  # a T4's memory
PC = "normal-job"
HOLD = "optplan.io/hold=start"


def vgpu_conf_text() -> str:
    """The tier's scheduler configuration with the device-share plugin's vGPU part on."""
    text = (HACK / "volcano-scheduler.conf").read_text()
    plugin = "  - name: deviceshare\n    arguments:\n      deviceshare.VGPUEnable: true\n"
    return text.replace("  - name: predicates\n", "  - name: predicates\n" + plugin)


def start_holding(c: Cluster, case: Case) -> None:
    """Start vc-scheduler with the case's nodes held (a taint no pod tolerates) until its first session is over,
    then let them go: v1.15.1 reads a node's vGPU devices only while its plugin's ``VGPUEnable`` is set, which
    the first session sets, after the node informer filled the cache at start-up; a node is read again when its
    object changes. Without this, every node present at start-up is scheduled by its totals
    (docs/shared-gpus.md)."""
    names = [n["metadata"]["name"] for n in case.nodes]
    c.kubectl("taint", "nodes", *names, f"{HOLD}:NoSchedule")
    c.start_scheduler()
    c.wait_sessions(1)
    c.kubectl("taint", "nodes", *names, f"{HOLD}:NoSchedule-")


@dataclass
class Share:
    """One pod's share: ``cores`` percent (None: not asked), ``mem`` MiB; where it runs (node, device UUID)."""

    name: str
    cores: int | None = 10
    mem: int = 1024  # 0: no volcano.sh/vgpu-memory
    percent: int = 0  # volcano.sh/vgpu-memory-percentage (0: none)
    node: str = ""
    device: str = ""
    on: str = ""  # a pending pod's nodeSelector (kubernetes.io/hostname)
    annotations: dict[str, str] = field(default_factory=dict)


def register(uuids: Sequence[str], count: int, mode: str = "hami-core", model: str = "NVIDIA-Tesla T4",
             health: str = "true", memory: int = MIB) -> str:
    return "".join(f"{u},{count},{memory},{model},{health},{mode}:" for u in uuids)


def vnode(name: str, reg: str, devices: int, memory: int = MIB) -> dict[str, Any]:
    cap = {"cpu": "32", "memory": "256Gi", "pods": "110", "volcano.sh/vgpu-number": str(devices * 10),
           "volcano.sh/vgpu-cores": str(devices * 100), "volcano.sh/vgpu-memory": str(devices * memory)}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "annotations": {KWOK_ANNOTATION: "fake", "volcano.sh/node-vgpu-register": reg},
                         "labels": {"kubernetes.io/hostname": name, "type": "kwok"}},
            "spec": {}, "status": {"capacity": cap, "allocatable": cap}}


def vpod(ns: str, group: str, s: Share) -> dict[str, Any]:
    limits = {"volcano.sh/vgpu-number": "1"}
    if s.mem:
        limits["volcano.sh/vgpu-memory"] = str(s.mem)
    if s.percent:
        limits["volcano.sh/vgpu-memory-percentage"] = str(s.percent)
    if s.cores is not None:
        limits["volcano.sh/vgpu-cores"] = str(s.cores)
    annotations = {"scheduling.k8s.io/group-name": group, **s.annotations}
    if s.device:
        annotations["volcano.sh/vgpu-ids-new"] = f"{s.device},NVIDIA,{s.mem},{s.cores or 0}:"
    spec: dict[str, Any] = {"schedulerName": "volcano", "priorityClassName": PC,
                            "containers": [{"name": "main", "image": "infer:1", "resources": {
                                "requests": {"cpu": "1", "memory": "1Gi"}, "limits": limits}}]}
    if s.node:
        spec["nodeName"] = s.node
    if s.on:
        spec["nodeSelector"] = {"kubernetes.io/hostname": s.on}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": s.name, "namespace": ns, "annotations": annotations}, "spec": spec}


def vcase(ns: str, nodes: list[dict[str, Any]], running: list[Share],
          groups: list[tuple[str, int, list[Share]]]) -> Case:
    """Running shares (each its own PodGroup of minMember 1, queue default) and pending bare PodGroups (name,
    minMember, pods), in that order of creation."""
    case = Case(0, 0, ns)
    case.nodes = nodes
    spec = {"minMember": 1, "queue": "default", "priorityClassName": PC}
    case.running = [[_podgroup(ns, f"run-{s.name}", spec), vpod(ns, f"run-{s.name}", s)] for s in running]
    case.bare = [[_podgroup(ns, g, {**spec, "minMember": m}), *(vpod(ns, g, s) for s in pods)] for g, m, pods in groups]
    case.kinds = ("allocate", "podgroups", "vgpu")
    return case


MODELS = (("NVIDIA-Tesla T4", 16384), ("NVIDIA-A100-SXM4-40GB", 40960))


def generate_vgpu(seed: int, index: int) -> Case:
    """A random vGPU case (namespace ``vgv-SEED-I``): 2-3 nodes of 1-4 devices each (T4 or A100, one model a node,
    a share count of 2, 3, 4 or 10); running shares on some devices (up to their count, cores and memory); 3-7
    pending bare PodGroups in order of creation: mostly one share pod (cores 10-100 or none, 1-8 GiB), some of
    two or three pods (minMember 1 or all of them), some spreading (``volcano.sh/vgpu-podgroup-policy``), some
    naming a card type (``nvidia.com/use-gputype``). Pure: the same (seed, index) gives the same documents."""
    rng = random.Random(f"vgpu/{seed}/{index}")
    ns = f"vgv-{seed}-{index}"
    nodes: list[dict[str, Any]] = []
    running: list[Share] = []
    for n in range(rng.choice((2, 3))):
        name = f"{ns}-n{n}"
        model, memory = rng.choice(MODELS)
        count = rng.choice((2, 3, 4, 10))
        uuids = [f"GPU-{name}-{d}" for d in range(rng.randint(1, 4))]
        nodes.append(vnode(name, register(uuids, count, model=model, memory=memory), len(uuids), memory))
        for u in uuids:
            used_cores = used_mem = pods = 0
            while pods < count and rng.random() < 0.45:
                cores = rng.choice((10, 20, 30, 50))
                mem = rng.choice((1024, 2048, 4096))
                if used_cores + cores > 100 or used_mem + mem > memory:
                    break
                used_cores, used_mem, pods = used_cores + cores, used_mem + mem, pods + 1
                running.append(Share(f"r{len(running)}", cores=cores, mem=mem, node=name, device=u))
    groups: list[tuple[str, int, list[Share]]] = []
    for g in range(rng.randint(3, 7)):
        size = rng.choice((1, 1, 1, 2, 3))
        annotations: dict[str, str] = {}
        if size > 1 and rng.random() < 0.5:
            annotations["volcano.sh/vgpu-podgroup-policy"] = "spread"
        if rng.random() < 0.2:
            annotations["nvidia.com/use-gputype"] = rng.choice(("T4", "A100"))
        cores = rng.choice((10, 20, 30, 40, 50, 60, 100, None))
        mem = rng.choice((1024, 2048, 4096, 8192))
        pods = [Share(f"p{g}-w-{k}", cores=cores, mem=mem, annotations=dict(annotations)) for k in range(size)]
        groups.append((f"g{g}", rng.choice((1, size)), pods))
    case = vcase(ns, nodes, running, groups)
    case.seed, case.index = seed, index
    return case
