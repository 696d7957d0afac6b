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
- a running share holds the device ``vgpu-ids-new`` names, not where a fit rule would put it;
- a share without cores counts 0 cores: the shares beside it may fill the device to 100;
- the drf plugin's job order: among jobs of equal priority and gang readiness, the smaller dominant share takes
  the next turn (``plugins/drf``'s JobOrderFn; not a device rule, but it decides which share gets the device).

Each case asserts that Volcano bound exactly the expected pods, that ``optplan place`` (greedy and auto, on the
snapshot taken before vc-scheduler starts) binds the same pods, and, on a snapshot of the cluster as Volcano left
it (its own device annotations on the pods it bound), that optplan places none of the pods Volcano left waiting.
The device each pod gets is not compared: Volcano's plugin walks the devices in its own order (by score under
``deviceshare.SchedulePolicy``), optplan best-fit; the rules decide which pods fit, not which device."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.realcluster.cluster import CODE, Cluster, optplan
from tests.realcluster.vcdiff import Case, Observed, priority_classes, run_case
from tests.realcluster.vgpucase import Share, register, start_holding, vcase, vgpu_conf_text, vnode, vpod

pytestmark = pytest.mark.realcluster
SOLVERS = ("greedy", "auto")


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


def case_order(ns: str) -> tuple[Case, set[str]]:
    """Two devices, a 50% share running on the first: a 30% share goes to the second (no
    ``deviceshare.SchedulePolicy``: the highest index first; best fit would take the first), so the 100% share
    after it finds no empty device."""
    uuids = [f"GPU-{ns}-0", f"GPU-{ns}-1"]
    nodes = [vnode(f"{ns}-n0", register(uuids, 10), 2)]
    running = [Share("r0", cores=50, mem=4000, node=f"{ns}-n0", device=uuids[0])]
    groups = [("g-a", 1, [Share("a", cores=30)]), ("g-b", 1, [Share("b", cores=100)])]
    return vcase(ns, nodes, running, groups), {"a"}


def case_unhealthy(ns: str) -> tuple[Case, set[str]]:
    """A node whose one device is registered unhealthy: v1.15.1's fit never reads the health field, so Volcano
    binds a share there; optplan keeps shares off an unhealthy device (a difference by design, docs)."""
    nodes = [vnode(f"{ns}-n0", register([f"GPU-{ns}-0"], 10, health="false"), 1)]
    return vcase(ns, nodes, [], one(ns, "a")), {"a"}


def case_no_cores(ns: str) -> tuple[Case, set[str]]:
    """One device: 50 percent, then a share asking no cores, then 50 percent: Volcano counts the second 0 cores,
    so the third fills the device to 100 (optplan held 1 milli for the second and refused the third); a fourth
    share asking no cores then finds the device at 100 (``UsedCore == 100 && Coresreq == 0``)."""
    nodes = [vnode(f"{ns}-n0", register([f"GPU-{ns}-0"], 10), 1)]
    groups = [("g-a", 1, [Share("a", cores=50)]), ("g-z", 1, [Share("z", cores=None)]),
              ("g-b", 1, [Share("b", cores=50)]), ("g-y", 1, [Share("y", cores=None)])]
    return vcase(ns, nodes, [], groups), {"a", "z", "b"}


def case_drf(ns: str) -> tuple[Case, set[str]]:
    """One device, two PodGroups of two pods (minMember 1) created in turn: a's of 40 percent, b's of 15. Each gets
    its first pod (55 taken); the next turn goes to the smaller dominant share (drf's job order: b's 15 against a's
    40), so b's second pod comes first (70) and a's second (40) no longer fits; by creation order a's would have
    taken the device to 95 and left b's second out."""
    nodes = [vnode(f"{ns}-n0", register([f"GPU-{ns}-0"], 10), 1)]
    groups = [("g-a", 1, [Share(f"a-w-{k}", cores=40) for k in range(2)]),
              ("g-b", 1, [Share(f"b-w-{k}", cores=15) for k in range(2)])]
    return vcase(ns, nodes, [], groups), {"a-w-0", "b-w-0", "b-w-1"}


def case_no_memory(ns: str) -> tuple[Case, set[str]]:
    """One T4 (16 GiB) holding a running 1 GiB share: a share naming no memory asks all of a device's
    (``ExtractResourceRequest``: no memory and no percentage is 100 percent), so it finds none; one of 1 GiB fits."""
    nodes = [vnode(f"{ns}-n0", register([f"GPU-{ns}-0"], 10), 1)]
    running = [Share("r0", cores=10, mem=1024, node=f"{ns}-n0", device=f"GPU-{ns}-0")]
    groups = [("g-a", 1, [Share("a", cores=10, mem=0)]), ("g-b", 1, [Share("b", cores=10, mem=1024)])]
    return vcase(ns, nodes, running, groups), {"b"}


def case_memory_percentage(ns: str) -> tuple[Case, set[str]]:
    """The same device: a share asking ``volcano.sh/vgpu-memory-percentage: 50`` and no memory, on a node that
    advertises that resource (else no node's totals hold it, in Volcano and in optplan alike). Volcano's default
    device configuration names no percentage resource (``resourceMemoryPercentageName`` unset), so the plugin
    reads no percentage and asks 100 percent: it finds no device; one of 1 GiB fits."""
    node = vnode(f"{ns}-n0", register([f"GPU-{ns}-0"], 10), 1)
    for field in ("capacity", "allocatable"):
        node["status"][field]["volcano.sh/vgpu-memory-percentage"] = "100"
    nodes = [node]
    running = [Share("r0", cores=10, mem=1024, node=f"{ns}-n0", device=f"GPU-{ns}-0")]
    groups = [("g-a", 1, [Share("a", cores=10, mem=0, percent=50)]), ("g-b", 1, [Share("b", cores=10, mem=1024)])]
    return vcase(ns, nodes, running, groups), {"b"}


CASES: dict[str, Callable[[str], tuple[Case, set[str]]]] = {
    "count": case_count, "cores": case_cores, "memory": case_memory, "exclusive": case_exclusive,
    "spread": case_spread, "mode": case_mode, "running": case_running, "order": case_order,
    "unhealthy": case_unhealthy, "no-cores": case_no_cores, "drf": case_drf, "no-memory": case_no_memory,
    "memory-percentage": case_memory_percentage}
OPTPLAN_DIFFERS: dict[str, set[str]] = {"unhealthy": set()}
"""What optplan binds where it differs from Volcano on purpose."""


def bound_by(plan: dict[str, Any], ns: str) -> set[str]:
    """The pods a plan binds in the namespace."""
    return {b["pod"] for jp in plan["jobs"] if jp["namespace"] == ns for b in jp["bindings"]}


@pytest.fixture(scope="module")
def vgpu_cluster(real_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The cluster with vc-scheduler (and the cluster's ConfigMap, so that the snapshots carry it) on the vGPU
    configuration for this module, then back."""
    real_cluster.apply(priority_classes())
    conf = tmp_path_factory.mktemp("vgpu") / "vgpu.conf"
    conf.write_text(vgpu_conf_text())
    with real_cluster.scheduler_configured(conf) as c:
        yield c


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


# ---- Execute: a share moved by the controller, placed by vc-scheduler ---------------------------------------

EXEC_NS = "vgpu-exec"
EXEC_NODES = (f"{EXEC_NS}-0", f"{EXEC_NS}-1")


def _share_job(name: str, cores: int = 30, memory: int = 4096) -> dict[str, Any]:
    """A VCJob of one share (30%, 4 GiB by default) on this test's nodes."""
    limits = {"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-cores": str(cores), "volcano.sh/vgpu-memory": str(memory)}
    spec = {"restartPolicy": "OnFailure", "nodeSelector": {"vgpu-exec": EXEC_NS},
            "containers": [{"name": "infer", "image": "infer:1", "resources": {
                "requests": {"cpu": "1", "memory": "1Gi", **limits}, "limits": limits}}]}
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": name, "namespace": EXEC_NS},
            "spec": {"schedulerName": "volcano", "queue": "default", "minAvailable": 1,
                     "tasks": [{"name": "w", "replicas": 1, "template": {"spec": spec}}]}}


def _job_pods(c: Cluster, job: str) -> list[dict[str, Any]]:
    return [p for p in c.kubectl_json("get", "pods", "-n", EXEC_NS, "-l", f"volcano.sh/job-name={job}")["items"]
            if "deletionTimestamp" not in p["metadata"]]


def _device_of(pod: dict[str, Any]) -> str:
    return str((pod["metadata"].get("annotations") or {}).get("volcano.sh/vgpu-ids-new", "")).split(",")[0]


def _execute(c: Cluster, sa_kubeconfig: Path, run_name: str, goal: dict[str, Any]) -> dict[str, Any]:
    """An Execute RepackRun of ``goal`` scoped to this test's nodes, carried out by ``optplan controller`` (as its
    ServiceAccount) until it ends; its status."""
    c.apply([{"apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackRun", "metadata": {"name": run_name},
              "spec": {"mode": "Execute", "eviction": {"gracePeriodSeconds": 0},
                       "scope": {"nodes": {"include": {"selector": {"matchLabels": {"vgpu-exec": EXEC_NS}}}}},
                       "goals": [goal]}}])
    controller = c.spawn(f"optplan-controller-{run_name}", [
        sys.executable, "-c", CODE, "controller", "--kubeconfig", str(sa_kubeconfig), "-v",
        "--metrics-address", "127.0.0.1:0", "--cooldown", "0", "--solver", "greedy",
        "--eviction-deadline", "60", "--replacement-deadline", "120"])

    def status() -> dict[str, Any]:
        return dict(c.kubectl_json("get", "repackrun", run_name).get("status") or {})

    try:
        c.wait_for(f"RepackRun {run_name} finished", lambda: status().get("phase") in ("Succeeded", "Failed"))
    finally:
        c.end(controller)
    done = status()
    print(json.dumps(done, indent=1)[:6000])
    print(c.kubectl("get", "pods", "-n", EXEC_NS, "-o", "wide").stdout)
    return done


@pytest.mark.parametrize("keep", [False, True], ids=["one-device", "two-devices"])
def test_the_controller_moves_a_share_and_vc_scheduler_places_it(vgpu_cluster: Cluster, sa_kubeconfig: Path,
                                                                 keep: bool) -> None:
    """Two vGPU nodes, a 30% share running on each (VCJobs, placed by vc-scheduler with the other node cordoned):
    an Execute RepackRun scoped to them moves one share onto the other node; the controller evicts it, Volcano's
    job controller makes it again, the controller nominates the planned node and pins the device (v1.15 honours
    the card type, not the UUID), vc-scheduler binds it there, the node is freed and the device it landed on is
    journaled. ``one-device``: each node has one T4, the planned device is the only one: Bound, as planned.
    ``two-devices``: the receiving node has two T4s and a third share (a bare pod, out of the run's scope) on its
    first, so the other share goes to its second (Volcano's default order: the highest index first) and the plan
    (best fit) puts the moved share beside the third on the first; v1.15 passes over the pin and takes the
    highest index with room: the relocation is BoundElsewhere, the run's outcome an alternative placement (the
    node freed all the same)."""
    c = vgpu_cluster
    c.start_scheduler()
    c.wait_sessions(1)  # VGPUEnable is set: nodes created from now on are read with their devices
    c.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": EXEC_NS}}])
    run_name = "vgpu-exec"
    src, dst = EXEC_NODES
    dst_devices = [f"GPU-{dst}-0", f"GPU-{dst}-1"] if keep else [f"GPU-{dst}-0"]
    try:
        c.wait_for(f"{EXEC_NS}'s default ServiceAccount", lambda: c.kubectl(
            "get", "serviceaccount", "default", "-n", EXEC_NS, check=False).returncode == 0)
        for name, devices in ((src, [f"GPU-{src}-0"]), (dst, dst_devices)):
            node = vnode(name, register(devices, 10), len(devices))
            node["metadata"]["labels"]["vgpu-exec"] = EXEC_NS
            for field in ("capacity", "allocatable"):  # the cards as the device plugin counts them
                node["status"][field]["nvidia.com/gpu"] = str(len(devices))
            c.apply([node])
        if keep:  # a share of no controller on dst's first device
            c.apply([{**vpod(EXEC_NS, "keep", Share("keep", cores=30, mem=4096, node=dst, device=dst_devices[0])),
                      "metadata": {"name": "keep", "namespace": EXEC_NS,
                                   "annotations": {"volcano.sh/vgpu-ids-new": f"{dst_devices[0]},NVIDIA,4096,30:"}}}])
        b_device = dst_devices[-1]
        for job, node, other, device in (("share-a", src, dst, f"GPU-{src}-0"), ("share-b", dst, src, b_device)):
            c.kubectl("cordon", other)
            c.apply([_share_job(job)])
            c.wait_for(f"{job} Running on {node}", lambda job=job, node=node, device=device: [
                (p["status"].get("phase"), p["spec"].get("nodeName"), _device_of(p)) for p in _job_pods(c, job)]
                == [("Running", node, device)])
            c.kubectl("uncordon", other)
        done = _execute(c, sa_kubeconfig, run_name, {"resource": "nvidia.com/gpu"})
        [move] = done["plan"]["moves"]
        [moved] = move["pods"]
        assert (moved["name"], moved["fromNode"], moved["toNode"]) == ("share-a-w-0", src, dst), moved
        assert done["plan"]["freedNodes"] == [src]
        [rel] = done["relocations"]
        assert rel["eviction"]["phase"] == "Evicted", rel
        assert rel["plannedDevice"] == dst_devices[0], rel
        landed = (rel["placement"]["phase"], rel["placement"]["actualNodeName"], rel["placement"]["actualDevice"])
        reasons = [x["reason"] for x in done["conditions"]]
        if keep:
            assert landed == ("BoundElsewhere", dst, dst_devices[1]), rel
            assert "ExecutionCompletedWithAlternativePlacement" in reasons, reasons
        else:
            assert landed == ("Bound", dst, dst_devices[0]), rel
            assert "ExecutionCompleted" in reasons, reasons
        assert done["phase"] == "Succeeded", done["conditions"]
        on = sorted((p["spec"].get("nodeName"), _device_of(p))
                    for job in ("share-a", "share-b") for p in _job_pods(c, job))
        assert on == [(dst, dst_devices[-1])] * 2, on
    finally:
        c.kubectl("delete", "repackrun", run_name, "--ignore-not-found", check=False)
        c.kubectl("delete", "namespace", EXEC_NS, "--ignore-not-found", "--timeout=120s", check=False, timeout=150)
        c.kubectl("delete", "node", *EXEC_NODES, "--ignore-not-found", check=False)


def test_an_admit_run_frees_a_device_for_an_exclusive_share_and_vc_scheduler_places_it(vgpu_cluster: Cluster,
                                                                                       sa_kubeconfig: Path) -> None:
    """Seed 000's case on shared GPUs: two vGPU nodes of one T4 each, a 30% share running on each, and a VCJob
    ``whole`` asking a T4 alone (``vgpu-cores: 100``) that vc-scheduler leaves pending (no empty device; same
    queue and priority, so nothing is preempted). An Execute RepackRun whose goal admits ``whole`` moves one
    share beside the other (the controller evicts it, Volcano makes it again, the controller nominates and
    pins), and vc-scheduler then places ``whole`` on the emptied device; the run ends Succeeded."""
    c = vgpu_cluster
    c.start_scheduler()
    c.wait_sessions(1)
    c.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": EXEC_NS}}])
    run_name = "vgpu-admit"
    src, dst = EXEC_NODES
    try:
        c.wait_for(f"{EXEC_NS}'s default ServiceAccount", lambda: c.kubectl(
            "get", "serviceaccount", "default", "-n", EXEC_NS, check=False).returncode == 0)
        for name in EXEC_NODES:
            node = vnode(name, register([f"GPU-{name}-0"], 10), 1)
            node["metadata"]["labels"]["vgpu-exec"] = EXEC_NS
            for field in ("capacity", "allocatable"):
                node["status"][field]["nvidia.com/gpu"] = "1"
            c.apply([node])
        for job, node, other in (("share-a", src, dst), ("share-b", dst, src)):
            c.kubectl("cordon", other)
            c.apply([_share_job(job)])
            c.wait_for(f"{job} Running on {node}", lambda job=job, node=node: [
                (p["status"].get("phase"), p["spec"].get("nodeName")) for p in _job_pods(c, job)]
                == [("Running", node)])
            c.kubectl("uncordon", other)
        whole = _share_job("whole", cores=100, memory=8192)
        c.apply([whole])
        c.wait_for("the whole job's pod", lambda: len(_job_pods(c, "whole")) == 1)
        c.wait_sessions(4)  # vc-scheduler has had its chances
        [pending] = _job_pods(c, "whole")
        assert not pending["spec"].get("nodeName") and pending["status"].get("phase") == "Pending", pending["spec"]
        done = _execute(c, sa_kubeconfig, run_name,
                        {"resource": "nvidia.com/gpu", "admit": {"jobs": [f"{EXEC_NS}/whole"]}})
        [move] = done["plan"]["moves"]
        [moved] = move["pods"]
        assert {moved["fromNode"], moved["toNode"]} == set(EXEC_NODES), moved
        c.wait_for("Volcano places the whole job", lambda: [
            (p["status"].get("phase"), p["spec"].get("nodeName"), _device_of(p)) for p in _job_pods(c, "whole")]
            == [("Running", moved["fromNode"], f"GPU-{moved['fromNode']}-0")])
        assert done["phase"] == "Succeeded", done["conditions"]
    finally:
        c.kubectl("delete", "repackrun", run_name, "--ignore-not-found", check=False)
        c.kubectl("delete", "namespace", EXEC_NS, "--ignore-not-found", "--timeout=120s", check=False, timeout=150)
        c.kubectl("delete", "node", *EXEC_NODES, "--ignore-not-found", check=False)
