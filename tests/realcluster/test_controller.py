"""optplan's controller against the real API server, as its ServiceAccount (issue 25 §2).

The token comes from the TokenRequest API (``kubectl create token``), so the real RBAC authorizer decides
every request by deploy/20-clusterrole.yaml; the seed 000 DryRun (instances/seed-dryrun.yaml) is then
planned from what the real API server lists.
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
