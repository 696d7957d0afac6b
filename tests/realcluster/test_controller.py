"""optplan's controller against the real API server, as its ServiceAccount (issue 25 §2).

The token comes from the TokenRequest API (``kubectl create token``), so the real RBAC authorizer decides
every request by deploy/20-clusterrole.yaml; the seed 000 DryRun (instances/seed-dryrun.yaml) is then
planned from what the real API server lists. The device-share plugin's ConfigMap is read by name as
deploy/36-device-conf.yaml's Role allows (a DryRun's freed nodes depend on the MIG geometries it gives).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.realcluster.cluster import ROOT, Cluster, optplan
from tests.realcluster.conftest import SA

pytestmark = pytest.mark.realcluster


def test_the_token_is_the_service_account_and_rbac_decides(real_cluster: Cluster, sa_kubeconfig: Path) -> None:
    who = real_cluster.kubectl_json_as(sa_kubeconfig, "auth", "whoami")
    assert who["status"]["userInfo"]["username"] == f"system:serviceaccount:{SA[0]}:{SA[1]}"

    def can(*args: str) -> str:
        return real_cluster.kubectl("auth", "can-i", *args, kubeconfig=sa_kubeconfig, check=False).stdout.strip()

    assert can("list", "pods", "--all-namespaces") == "yes"
    assert can("create", "pods", "--subresource=eviction", "-n", "default") == "yes"
    assert can("patch", "repackruns.repack.volcano.sh", "--subresource=status") == "yes"
    assert can("get", "secrets", "-n", "kube-system") == "no"
    assert can("delete", "pods", "-n", "default") == "no"
    assert can("patch", "repackruns.repack.volcano.sh") == "no"  # only the status subresource
    refused = real_cluster.kubectl("get", "secrets", "-n", "kube-system", kubeconfig=sa_kubeconfig, check=False)
    assert refused.returncode != 0 and "Forbidden" in refused.stderr, refused.stderr


def _seed_objects() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    docs = [d for d in yaml.safe_load_all((ROOT / "instances" / "seed-dryrun.yaml").read_text("utf-8")) if d]
    objs = [i for d in docs for i in (d.get("items") or [d])]
    [run] = [o for o in objs if o["kind"] == "RepackRun"]
    return [o for o in objs if o["kind"] != "RepackRun"], run


def test_the_seed_000_dryrun_is_planned_from_the_real_cluster(real_cluster: Cluster, sa_kubeconfig: Path) -> None:
    """The seed's snapshot file replayed into the cluster (PodGroups without owners), then removed again:
    tests/realcluster/test_seed_journey.py builds the same names through Volcano's job controller."""
    objs, run = _seed_objects()
    try:
        _replay_and_plan(real_cluster, sa_kubeconfig, objs, run)
    finally:
        real_cluster.kubectl("delete", "repackrun", run["metadata"]["name"], "--ignore-not-found")
        real_cluster.kubectl("delete", "namespace", "repack-demo", "--ignore-not-found", timeout=120)
        real_cluster.kubectl("delete", "pod", "-n", "kube-system", "kube-proxy-ascend-node-01", "--ignore-not-found")
        real_cluster.kubectl("delete", "node", *(o["metadata"]["name"] for o in objs if o["kind"] == "Node"),
                             "--ignore-not-found")


def _replay_and_plan(real_cluster: Cluster, sa_kubeconfig: Path, objs: list[dict[str, Any]],
                     run: dict[str, Any]) -> None:
    real_cluster.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "repack-demo"}}])
    for node in (o for o in objs if o["kind"] == "Node"):
        alloc = dict(node["status"]["allocatable"])
        real_cluster.add_node(node["metadata"]["name"], cpu=alloc.pop("cpu"), memory=alloc.pop("memory"),
                              pods=int(alloc.pop("pods")), labels=node["metadata"]["labels"], extended=alloc)
    real_cluster.wait_for("repack-demo's default ServiceAccount", lambda: real_cluster.kubectl(
        "get", "serviceaccount", "default", "-n", "repack-demo", check=False).returncode == 0)
    for o in objs:
        if o["kind"] == "PodGroup":
            # The real garbage collector deletes a dependent whose owner does not exist: the seed's owners
            # (a VCJob, a ModelServing) are not created here, so their references are left out.
            o["metadata"].pop("ownerReferences", None)
        if o["kind"] == "Pod":
            for c in o["spec"]["containers"]:
                # the real API server requires an image and extended-resource limits equal to the requests:
                # the seed's pods carry both (the fake server refuses them otherwise too)
                assert c.get("image"), o["metadata"]["name"]
                extended = {k: v for k, v in c["resources"]["requests"].items() if "/" in k}
                assert c["resources"].get("limits", {}) == extended, o["metadata"]["name"]
            o.pop("status", None)  # a Pod's status is not written on create; kwok sets it Running
    real_cluster.apply([o for o in objs if o["kind"] != "Node"])
    names = [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in objs if o["kind"] == "Pod"]
    real_cluster.wait_for("the seed's pods Running", lambda: all(
        real_cluster.kubectl_json("get", "pod", n, "-n", ns)["status"].get("phase") == "Running"
        for ns, n in names))
    real_cluster.apply([run])

    res = optplan("controller", "--once", "--kubeconfig", str(sa_kubeconfig), "--solver", "greedy")
    assert res.returncode == 0, res.stdout + res.stderr
    got = real_cluster.kubectl_json("get", "repackrun", run["metadata"]["name"])
    status = got["status"]
    assert status["phase"] == "Succeeded", status
    summary = status["plan"]["summary"]
    assert (summary["fragBeforePercent"], summary["fragAfterPercent"]) == (33, 0)
    assert status["plan"]["freedNodes"] == ["ascend-node-01"]
    [move] = status["plan"]["moves"]
    assert sorted((p["name"], p["fromNode"], p["toNode"]) for p in move["pods"]) == [
        ("ascend-batch-training-worker-0", "ascend-node-01", "ascend-node-02"),
        ("ascend-batch-training-worker-1", "ascend-node-01", "ascend-node-03"),
    ]
    # DryRun: nothing moved in the cluster.
    for ns, n in names:
        pod = real_cluster.kubectl_json("get", "pod", n, "-n", ns)
        assert pod["status"]["phase"] == "Running"


# ---- the device-share plugin's ConfigMap, read as the controller's ServiceAccount ----------------------------

DEV_NS = "devconf"
DEV_NODES = (f"{DEV_NS}-n1", f"{DEV_NS}-n2")
DEVICE_CM = ("kube-system", "volcano-vgpu-device-config")


def _device_cluster() -> list[dict[str, Any]]:
    """n1: one T4 registered hami-core that takes one share at most, holding the 30% share ``a``; n2: one T4
    registered ``mig``, holding the 30% share ``b``. Freeing n1 means moving ``a`` onto n2's device, which only a
    hami-core device takes; nothing else can be freed (``b`` finds no slot on n1)."""
    from tests.realcluster.vcdiff import _podgroup
    from tests.realcluster.vgpucase import Share, register, vnode, vpod
    out: list[dict[str, Any]] = []
    for node, mode, slots in ((DEV_NODES[0], "hami-core", 1), (DEV_NODES[1], "mig", 10)):
        n = vnode(node, register([f"GPU-{node}"], slots, mode=mode), 1)
        n["metadata"]["labels"][DEV_NS] = DEV_NS
        for field in ("capacity", "allocatable"):  # the card as the device plugin counts it
            n["status"][field]["nvidia.com/gpu"] = "1"
        out.append(n)
    for name, node in zip("ab", DEV_NODES, strict=True):
        p = vpod(DEV_NS, name, Share(name, cores=30, mem=4096, node=node, device=f"GPU-{node}"))
        del p["spec"]["priorityClassName"]
        out += [_podgroup(DEV_NS, name, {"minMember": 1, "queue": "default"}), p]
    return out


def _dry_run(real_cluster: Cluster, sa_kubeconfig: Path, name: str) -> tuple[list[str], str]:
    """A DryRun scoped to the two nodes, planned by ``optplan controller --once`` as the ServiceAccount: the nodes
    it frees, and the controller's log."""
    real_cluster.apply([{"apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackRun", "metadata": {"name": name},
                         "spec": {"mode": "DryRun", "goals": [{"resource": "nvidia.com/gpu"}], "scope": {
                             "nodes": {"include": {"selector": {"matchLabels": {DEV_NS: DEV_NS}}}}}}}])
    res = optplan("controller", "--once", "--kubeconfig", str(sa_kubeconfig), "--solver", "greedy")
    assert res.returncode == 0, res.stdout + res.stderr
    status = real_cluster.kubectl_json("get", "repackrun", name)["status"]
    assert status["phase"] == "Succeeded", status
    return list(status["plan"].get("freedNodes") or []), res.stderr


def test_the_controller_reads_the_device_configmap_its_role_grants(real_cluster: Cluster, sa_kubeconfig: Path) -> None:
    """The controller, as its ServiceAccount with deploy/36-device-conf.yaml's Role, reads the device-share plugin's
    ConfigMap: without it the ``mig`` device is hami-core (the DryRun frees n1 onto it); with a geometry for the T4
    the device is in MIG mode (nothing freed); moved by the scheduler ConfigMap's deviceshare arguments to a
    namespace the Role does not cover, it is forbidden: no geometry, said once."""
    from tests.repack.test_vgpu_rules import device_config, scheduler_configmap

    def can(*args: str) -> str:
        return real_cluster.kubectl("auth", "can-i", *args, kubeconfig=sa_kubeconfig, check=False).stdout.strip()

    assert can("get", f"configmaps/{DEVICE_CM[1]}", "-n", DEVICE_CM[0]) == "yes"
    assert can("get", "configmaps/kube-proxy", "-n", DEVICE_CM[0]) == "no"
    assert can("list", "configmaps", "-n", DEVICE_CM[0]) == "no"
    elsewhere = f"{DEV_NS}-gpu"
    scheduler_cm = ("volcano-system", "volcano-scheduler-configmap")
    # the session's vc-scheduler reads its file, not this ConfigMap; a test that sets it deletes it again
    assert real_cluster.kubectl("get", "configmap", scheduler_cm[1], "-n", scheduler_cm[0],
                                check=False).returncode != 0, "the scheduler ConfigMap is left over"
    runs = [f"{DEV_NS}-{case}" for case in ("absent", "geometry", "forbidden")]
    try:
        real_cluster.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}}
                            for n in (DEV_NS, elsewhere)])
        real_cluster.wait_for(f"{DEV_NS}'s default ServiceAccount", lambda: real_cluster.kubectl(
            "get", "serviceaccount", "default", "-n", DEV_NS, check=False).returncode == 0)
        objs = _device_cluster()
        real_cluster.apply(objs)
        real_cluster.wait_for("the shares Running", lambda: all(
            real_cluster.kubectl_json("get", "pod", n, "-n", DEV_NS)["status"].get("phase") == "Running"
            for n in "ab"))
        freed, _ = _dry_run(real_cluster, sa_kubeconfig, runs[0])
        assert freed == [DEV_NODES[0]]
        real_cluster.apply([device_config(["Tesla T4"])])
        freed, log = _dry_run(real_cluster, sa_kubeconfig, runs[1])
        assert freed == [] and "forbidden" not in log, log
        real_cluster.apply([device_config(["Tesla T4"], namespace=elsewhere, name="dev"),
                            scheduler_configmap(elsewhere, "dev")])
        freed, log = _dry_run(real_cluster, sa_kubeconfig, runs[2])
        assert freed == [DEV_NODES[0]], log
        assert log.count(f'forbidden: cannot get configmaps "dev" in namespace {elsewhere}') == 1, log
    finally:
        real_cluster.kubectl("delete", "repackrun", *runs, "--ignore-not-found", check=False)
        real_cluster.kubectl("delete", "configmap", DEVICE_CM[1], "-n", DEVICE_CM[0], "--ignore-not-found", check=False)
        real_cluster.kubectl("delete", "configmap", scheduler_cm[1], "-n", scheduler_cm[0], "--ignore-not-found",
                             check=False)
        real_cluster.kubectl("delete", "namespace", DEV_NS, elsewhere, "--ignore-not-found", "--timeout=120s",
                             check=False, timeout=150)
        real_cluster.kubectl("delete", "node", *DEV_NODES, "--ignore-not-found", check=False)
