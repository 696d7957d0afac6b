"""A VCJob with a ``partitionPolicy`` and ``highestTierName`` topologies on the real vc-scheduler v1.15: optplan
place (with ``--scheduler-conf`` the file vc-scheduler itself runs with) and Volcano put the same number of
pods on the same nodes, each partition inside one rack."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.realcluster.cluster import HACK, Cluster, optplan

pytestmark = pytest.mark.realcluster

NS = "vcn-part"
RACKS = {"vcn-r0": ("vcn-a0", "vcn-a1"), "vcn-r1": ("vcn-a2", "vcn-a3"), "vcn-r2": ("vcn-a4", "vcn-a5")}
GPU = "nvidia.com/gpu"


def _hypernode(name: str, tier: int, tier_name: str, kind: str, members: list[str]) -> dict[str, Any]:
    return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
            "spec": {"tier": tier, "tierName": tier_name,
                     "members": [{"type": kind, "selector": {"exactMatch": {"name": m}}} for m in members]}}


def _container(gpus: int) -> dict[str, Any]:
    return {"name": "main", "image": "x:1", "resources": {"requests": {GPU: str(gpus)}, "limits": {GPU: str(gpus)}}}


def test_partitions_land_where_volcano_puts_them(real_cluster: Cluster, tmp_path: Path) -> None:
    c = real_cluster
    for nodes in RACKS.values():
        for n in nodes:
            c.add_node(n, gpus=8)
    objs: list[dict[str, Any]] = [_hypernode(r, 1, "vcn-rack", "Node", list(ns)) for r, ns in RACKS.items()]
    objs.append(_hypernode("vcn-s0", 2, "vcn-spine", "HyperNode", list(RACKS)))
    objs.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    c.apply(objs)
    # r0 and r1 each hold one busy node: only r2 can take a partition of two 8-GPU pods whole
    busy = [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"busy-{n}", "namespace": NS},
             "spec": {"nodeName": n, "tolerations": [{"operator": "Exists"}], "containers": [_container(8)]}}
            for n in ("vcn-a1", "vcn-a3")]
    c.apply(busy)
    task = {"name": "w", "replicas": 4, "partitionPolicy": {
        "totalPartitions": 2, "partitionSize": 2, "minPartitions": 1,
        "networkTopology": {"mode": "hard", "highestTierName": "vcn-rack"}},
        "template": {"spec": {"restartPolicy": "Never", "containers": [_container(8)]}}}
    job = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "parts", "namespace": NS},
           "spec": {"schedulerName": "volcano", "queue": "default", "minAvailable": 2,
                    "networkTopology": {"mode": "hard", "highestTierName": "vcn-spine"}, "tasks": [task]}}
    try:
        c.wait_for("the busy pods Running", lambda: all(
            p.get("status", {}).get("phase") == "Running" for p in c.kubectl_json("get", "pods", "-n", NS)["items"]))
        c.stop_scheduler()
        c.apply([job])
        c.wait_for("the job's PodGroup", lambda: len(c.kubectl_json("get", "podgroups", "-n", NS)["items"]) == 1)
        snap = tmp_path / "snap.yaml"
        res = optplan("snapshot", "--kubeconfig", str(c.kubeconfig), "-o", str(snap))
        assert res.returncode == 0, res.stderr
        res = optplan("place", str(snap), "--solver", "greedy", "-o", "json",
                      "--scheduler-conf", str(HACK / "volcano-scheduler.conf"))
        assert res.returncode == 0, res.stderr
        [mine] = [j for j in json.loads(res.stdout)["jobs"] if j["namespace"] == NS]
        planned = sorted(b["node"] for b in mine["bindings"])
        c.start_scheduler()

        def bound() -> list[str]:
            return sorted(p["spec"]["nodeName"] for p in c.kubectl_json("get", "pods", "-n", NS)["items"]
                          if p["metadata"]["name"].startswith("parts-") and p["spec"].get("nodeName"))

        c.wait_for("Volcano binds the job's partition", lambda: len(bound()) >= 2)
        assert mine["admitted"] and planned == bound() == ["vcn-a4", "vcn-a5"]
    finally:
        c.start_scheduler()
        c.kubectl("delete", "namespace", NS, "--wait=true", "--timeout=120s", check=False)
        for name in [*RACKS, "vcn-s0"]:
            c.kubectl("delete", "hypernode", name, check=False)
        for nodes in RACKS.values():
            for n in nodes:
                c.kubectl("delete", "node", n, check=False)
