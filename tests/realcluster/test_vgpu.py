"""Volcano's vGPU device rules on the real vc-scheduler (v1.15.1, its ``deviceshare`` plugin with
``deviceshare.VGPUEnable``) against ``optplan place``: each case a node or two whose GPUs are listed in
``volcano.sh/node-vgpu-register`` (with ``volcano.sh/vgpu-number|cores|memory`` in allocatable, which the plugin
needs to see the node's devices at all), running shares where ``volcano.sh/vgpu-ids-new`` says, and pending
one-pod (or three-pod) bare PodGroups created a second apart. The table's expected outcome is the rule as read in
``pkg/scheduler/api/devices/nvidia/vgpu`` (``checkNodeGPUSharingPredicateAndScore``, ``decodeNodeDevices``):

- a device that its register's count of pods hold takes no more (``Number <= UsedNum``);
- a share needs its cores within the device's 100 (``UsedCore + cores > 100``), its memory within the free;
- ``vgpu-cores: 100`` asks the device alone (no pod on it), and a share without cores fits no device at 100;
- ``volcano.sh/vgpu-podgroup-policy: spread`` keeps a pod off every device a pod of its PodGroup holds;
- ``volcano.sh/vgpu-mode`` asks the node's mode, and a register's ``mig`` with no MIG geometry configured for
  the type is read as ``hami-core`` (``extractGeometryFromType`` fails, the plugin falls back);
- a running share holds the device ``vgpu-ids-new`` names, not where a fit rule would put it.

Each case asserts that Volcano bound exactly the expected pods, that ``optplan place`` (greedy and auto, on the
snapshot taken before vc-scheduler starts) binds the same pods, and, on a snapshot of the cluster as Volcano left
it (its own device annotations on the pods it bound), that optplan places none of the pods Volcano left waiting.
The device each pod gets is not compared: Volcano's plugin walks the devices in its own order (by score under
``deviceshare.SchedulePolicy``), optplan best-fit; the rules decide which pods fit, not which device."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.realcluster.cluster import HACK, KWOK_ANNOTATION, Cluster, optplan
from tests.realcluster.vcdiff import Case, Observed, _podgroup, priority_classes, run_case

pytestmark = pytest.mark.realcluster
SOLVERS = ("greedy", "auto")
MIB = 16384  # each device's memory
PC = "normal-job"
HOLD = "optplan.io/hold=start"


def vgpu_conf_text() -> str:
    """The tier's scheduler configuration with the device-share plugin's vGPU part on."""
    text = (HACK / "volcano-scheduler.conf").read_text()
    plugin = "  - name: deviceshare\n    arguments:\n      deviceshare.VGPUEnable: true\n"
    return text.replace("  - name: predicates\n", "  - name: predicates\n" + plugin)


@dataclass
class Share:
    """One pod's share: ``cores`` percent (None: not asked), ``mem`` MiB; where it runs (node, device UUID)."""

    name: str
    cores: int | None = 10
    mem: int = 1024
    node: str = ""
    device: str = ""
    on: str = ""  # a pending pod's nodeSelector (kubernetes.io/hostname)
    annotations: dict[str, str] = field(default_factory=dict)


def register(uuids: Sequence[str], count: int, mode: str = "hami-core", model: str = "NVIDIA-Tesla T4",
             health: str = "true") -> str:
    return "".join(f"{u},{count},{MIB},{model},{health},{mode}:" for u in uuids)


def vnode(name: str, reg: str, devices: int) -> dict[str, Any]:
    cap = {"cpu": "32", "memory": "256Gi", "pods": "110", "volcano.sh/vgpu-number": str(devices * 10),
           "volcano.sh/vgpu-cores": str(devices * 100), "volcano.sh/vgpu-memory": str(devices * MIB)}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "annotations": {KWOK_ANNOTATION: "fake", "volcano.sh/node-vgpu-register": reg},
                         "labels": {"kubernetes.io/hostname": name, "type": "kwok"}},
            "spec": {}, "status": {"capacity": cap, "allocatable": cap}}


def vpod(ns: str, group: str, s: Share) -> dict[str, Any]:
    limits = {"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory": str(s.mem)}
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


def one(ns: str, *names: str, **share: Any) -> list[tuple[str, int, list[Share]]]:
    return [(f"g-{n}", 1, [Share(n, **share)]) for n in names]


def case_count(ns: str) -> tuple[Case, set[str]]:
    """Two devices of count 2, five small shares: four fit (the fifth finds both devices held twice)."""
    nodes = [vnode(f"{ns}-n0", register([f"GPU-{ns}-0", f"GPU-{ns}-1"], 2), 2)]
    return vcase(ns, nodes, [], one(ns, "p0", "p1", "p2", "p3", "p4")), {"p0", "p1", "p2", "p3"}


def case_cores(ns: str) -> tuple[Case, set[str]]:
    """One device: 60 then 60 percent (over 100) then 30."""
    nodes = [vnode(f"{ns}-n0", register([f"GPU-{ns}-0"], 10), 1)]
    groups = [("g-a", 1, [Share("a", cores=60)]), ("g-b", 1, [Share("b", cores=60)]),
              ("g-c", 1, [Share("c", cores=30)])]
    return vcase(ns, nodes, [], groups), {"a", "c"}


def case_memory(ns: str) -> tuple[Case, set[str]]:
    """One device of 16 GiB: 10,000 then 10,000 MiB (over) then 4,000."""
    nodes = [vnode(f"{ns}-n0", register([f"GPU-{ns}-0"], 10), 1)]
    groups = [("g-a", 1, [Share("a", mem=10000)]), ("g-b", 1, [Share("b", mem=10000)]),
              ("g-c", 1, [Share("c", mem=4000)])]
    return vcase(ns, nodes, [], groups), {"a", "c"}


def case_exclusive(ns: str) -> tuple[Case, set[str]]:
    """Two one-device nodes: on n0 a share runs, so a 100-percent share must take n1's device; then a share that
    asks no cores finds n1's device at 100 (no room) and goes to n0; a second 100-percent share finds none."""
    nodes = [vnode(f"{ns}-n{i}", register([f"GPU-{ns}-{i}"], 10), 1) for i in range(2)]
    running = [Share("r0", cores=10, node=f"{ns}-n0", device=f"GPU-{ns}-0")]
    groups = [("g-a", 1, [Share("a", cores=100)]), ("g-b", 1, [Share("b", cores=None)]),
              ("g-c", 1, [Share("c", cores=100)])]
    return vcase(ns, nodes, running, groups), {"a", "b"}


def case_spread(ns: str) -> tuple[Case, set[str]]:
    """A node of two devices for each PodGroup of three pods (minMember 1, kept there by a nodeSelector): the
    spreading one gets two, one a device; the one without the policy gets all three."""
    nodes = [vnode(f"{ns}-n{i}", register([f"GPU-{ns}-{i}a", f"GPU-{ns}-{i}b"], 10), 2) for i in range(2)]
    spread = {"volcano.sh/vgpu-podgroup-policy": "spread"}
    groups = [("g-s", 1, [Share(f"s-w-{k}", annotations=dict(spread), on=f"{ns}-n0") for k in range(3)]),
              ("g-t", 1, [Share(f"t-w-{k}", on=f"{ns}-n1") for k in range(3)])]
    return vcase(ns, nodes, [], groups), {"s-w-0", "s-w-1", "t-w-0", "t-w-1", "t-w-2"}


def case_mode(ns: str) -> tuple[Case, set[str]]:
    """A node registered ``hami-core`` and one registered ``mig`` with no MIG geometry configured (so Volcano reads
    it as hami-core too): a share asking ``mig`` fits neither, one asking ``hami-core`` fits."""
    nodes = [vnode(f"{ns}-n0", register([f"GPU-{ns}-0"], 10), 1),
             vnode(f"{ns}-n1", register([f"GPU-{ns}-1"], 10, mode="mig", model="NVIDIA-A100-SXM4-40GB"), 1)]
    groups = [("g-m", 1, [Share("m", annotations={"volcano.sh/vgpu-mode": "mig"})]),
              ("g-h", 1, [Share("h", annotations={"volcano.sh/vgpu-mode": "hami-core"})])]
    return vcase(ns, nodes, [], groups), {"h"}


def case_running(ns: str) -> tuple[Case, set[str]]:
    """Two devices, a running share of 50 percent on each (as ``vgpu-ids-new`` says; best-fit would have put both
    on the first): a 100-percent share finds no device alone, a 50-percent one fits."""
    uuids = [f"GPU-{ns}-0", f"GPU-{ns}-1"]
    nodes = [vnode(f"{ns}-n0", register(uuids, 10), 2)]
    running = [Share(f"r{k}", cores=50, node=f"{ns}-n0", device=u) for k, u in enumerate(uuids)]
    groups = [("g-a", 1, [Share("a", cores=100)]), ("g-b", 1, [Share("b", cores=50)])]
    return vcase(ns, nodes, running, groups), {"b"}


def case_unhealthy(ns: str) -> tuple[Case, set[str]]:
    """A node whose one device is registered unhealthy: v1.15.1's fit never reads the health field, so Volcano
    binds a share there; optplan keeps shares off an unhealthy device (a difference by design, docs)."""
    nodes = [vnode(f"{ns}-n0", register([f"GPU-{ns}-0"], 10, health="false"), 1)]
    return vcase(ns, nodes, [], one(ns, "a")), {"a"}


CASES: dict[str, Callable[[str], tuple[Case, set[str]]]] = {
    "count": case_count, "cores": case_cores, "memory": case_memory, "exclusive": case_exclusive,
    "spread": case_spread, "mode": case_mode, "running": case_running, "unhealthy": case_unhealthy}
OPTPLAN_DIFFERS: dict[str, set[str]] = {"unhealthy": set()}
"""What optplan binds where it differs from Volcano on purpose."""


def bound_by(plan: dict[str, Any], ns: str) -> set[str]:
    """The pods a plan binds in the namespace."""
    return {b["pod"] for jp in plan["jobs"] if jp["namespace"] == ns for b in jp["bindings"]}


@pytest.fixture(scope="module")
def vgpu_cluster(real_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The cluster with vc-scheduler (and the cluster's ConfigMap, so that the snapshots carry it) on the vGPU
    configuration for this module, then back."""
    c = real_cluster
    c.apply(priority_classes())
    conf = tmp_path_factory.mktemp("vgpu") / "vgpu.conf"
    conf.write_text(vgpu_conf_text())
    c.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "volcano-system"}},
             {"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": {"name": "volcano-scheduler-configmap", "namespace": "volcano-system"},
              "data": {"volcano-scheduler.conf": conf.read_text()}}])
    seed_conf = c.scheduler_conf
    c.stop_scheduler()
    c.scheduler_conf = conf
    c.start_scheduler()
    try:
        yield c
    finally:
        c.stop_scheduler()
        c.scheduler_conf = seed_conf
        c.start_scheduler()
        c.kubectl("delete", "configmap", "volcano-scheduler-configmap", "-n", "volcano-system", check=False)


def start_holding(c: Cluster, case: Case) -> None:
    """Start vc-scheduler with the case's nodes held (a taint no pod tolerates) until its first session is over,
    then let them go: v1.15.1 reads a node's vGPU devices only while its plugin's ``VGPUEnable`` is set, which
    the first session sets, after the node informer filled the cache at start-up; a node is read again when its
    object changes. Without this, every node present at start-up is scheduled by its totals (module
    docstring)."""
    names = [n["metadata"]["name"] for n in case.nodes]
    c.kubectl("taint", "nodes", *names, f"{HOLD}:NoSchedule")
    c.start_scheduler()
    c.wait_sessions(1)
    c.kubectl("taint", "nodes", *names, f"{HOLD}:NoSchedule-")


@pytest.mark.parametrize("name", list(CASES))
def test_vgpu_rule_as_vc_scheduler_applies_it(vgpu_cluster: Cluster, tmp_path: Path, name: str) -> None:
    ns = f"vgpu-{name}"
    case, expected = CASES[name](ns)
    after: dict[str, Any] = {}

    def replan(c: Cluster, _obs: Observed) -> None:  # the cluster as Volcano left it, planned again
        snap = tmp_path / "after.yaml"
        res = optplan("snapshot", "--kubeconfig", str(c.kubeconfig), "-o", str(snap))
        assert res.returncode == 0, res.stderr
        res = optplan("place", str(snap), "--solver", "greedy", "-o", "json")
        # "no VCJob to place": Volcano left nothing waiting
        assert res.returncode == 0 or "no VCJob to place" in res.stderr, res.stderr
        after["plan"] = json.loads(res.stdout) if res.returncode == 0 else {"jobs": []}

    obs = run_case(vgpu_cluster, case, tmp_path, solvers=SOLVERS, start=start_holding, after=replan)
    assert obs.snapshot_error == ""
    assert set(obs.bound) == expected, ("volcano", sorted(obs.bound))
    for solver in SOLVERS:
        plan = obs.plans[solver]
        assert "error" not in plan, (solver, plan)
        assert bound_by(plan, ns) == OPTPLAN_DIFFERS.get(name, expected), (solver, sorted(bound_by(plan, ns)))
    assert bound_by(after["plan"], ns) == set(), ("after", sorted(bound_by(after["plan"], ns)))
