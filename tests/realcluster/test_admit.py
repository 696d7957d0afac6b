"""The controller acting on its own on the real cluster: ``--admit-pending-after`` creates a RepackRun for a
gang that the real vc-scheduler leaves pending by fragmentation, and once that run has executed, Volcano
places the gang.

The world, in a namespace of its own: two KWOK nodes of 8 GPUs (label ``admit=<namespace>``); the VCJobs
``half-a`` and ``half-b`` (one 4-GPU worker each), placed by vc-scheduler one on each node (the other node
cordoned meanwhile): 8 GPUs free in all, 4 on each node. Then the VCJob ``whole`` (one 8-GPU worker). Every
worker's nodeSelector is the two nodes. vc-scheduler cannot place it (no node has 8 free) and does not preempt (same
queue, same priority), so it stays pending — by fragmentation: moving one half onto the other's node frees a
whole node. optplan's controller runs with ``--admit-pending-after 2 --admit-mode Execute``.
"""

from __future__ import annotations

import sys
import time
import urllib.error
from pathlib import Path
from typing import Any

import pytest

from tests.realcluster.cluster import CODE, Cluster

pytestmark = pytest.mark.realcluster
NS = "admit-frag"
GPU = "nvidia.com/gpu"
NODES = (f"{NS}-0", f"{NS}-1")
TRIGGER = "optplan.io/trigger=pending-by-fragmentation"


def _job(name: str, gpus: int) -> dict[str, Any]:
    spec: dict[str, Any] = {"restartPolicy": "OnFailure",
                            "containers": [{"name": "trainer", "image": "trainer:1", "resources": {
                                "requests": {GPU: str(gpus)}, "limits": {GPU: str(gpus)}}}],
                            "nodeSelector": {"admit": NS}}  # this test's nodes only
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": name, "namespace": NS, "labels": {"admit": NS}},
            "spec": {"schedulerName": "volcano", "queue": "default", "minAvailable": 1,
                     "tasks": [{"name": "worker", "replicas": 1, "template": {"spec": spec}}]}}


def _get(c: Cluster, path: str) -> Any:
    """GET as the admin, asked again on 429 (a busy API server sheds load with it)."""
    for attempt in range(20):
        try:
            return c.get(path, timeout=20)
        except urllib.error.HTTPError as e:
            if e.code != 429 or attempt == 19:
                raise
            time.sleep(0.5)
    raise AssertionError("unreachable")


def _pods(c: Cluster, job: str) -> list[dict[str, Any]]:
    return list(_get(c, f"/api/v1/namespaces/{NS}/pods?labelSelector=volcano.sh/job-name%3D{job}")["items"])


def _runs(c: Cluster) -> list[dict[str, Any]]:
    items = _get(c, f"/apis/repack.volcano.sh/v1alpha1/repackruns?labelSelector={TRIGGER}")["items"]
    return [r for r in items if r["spec"]["goals"][0].get("admit", {}).get("jobs") == [f"{NS}/whole"]]


@pytest.fixture
def fragmented(real_cluster: Cluster) -> Any:
    c = real_cluster
    c.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}])
    c.wait_for(f"{NS}'s default ServiceAccount", lambda: c.kubectl(
        "get", "serviceaccount", "default", "-n", NS, check=False).returncode == 0)
    try:
        for node in NODES:
            c.add_node(node, gpus=8, labels={"admit": NS})
        for job, node, other in (("half-a", NODES[0], NODES[1]), ("half-b", NODES[1], NODES[0])):
            c.kubectl("cordon", other)
            c.apply([_job(job, 4)])
            c.wait_for(f"{job} Running on {node}", lambda job=job, node=node: [
                (p["status"].get("phase"), p["spec"].get("nodeName")) for p in _pods(c, job)] == [("Running", node)])
            c.kubectl("uncordon", other)
        c.apply([_job("whole", 8)])
        c.wait_for("the whole job's pod", lambda: len(_pods(c, "whole")) == 1)
        yield c
    finally:
        c.kubectl("delete", "repackrun", "-l", TRIGGER, "--ignore-not-found", check=False)
        # the namespace (its pods) gone before the nodes: no pod left bound to a deleted node
        c.kubectl("delete", "namespace", NS, "--ignore-not-found", "--timeout=120s", check=False, timeout=150)
        c.kubectl("delete", "node", *NODES, "--ignore-not-found", check=False)


def test_a_gang_pending_by_fragmentation_gets_its_run_and_volcano_then_places_it(
        fragmented: Cluster, sa_kubeconfig: Path) -> None:
    c = fragmented
    c.wait_sessions(5)  # five scheduling sessions: vc-scheduler has had its chances
    [whole] = _pods(c, "whole")
    assert not whole["spec"].get("nodeName"), whole["spec"]
    assert whole["status"].get("phase") == "Pending"
    assert _runs(c) == []
    controller = c.spawn("optplan-controller-admit", [
        sys.executable, "-c", CODE, "controller", "--kubeconfig", str(sa_kubeconfig), "-v",
        "--metrics-address", "127.0.0.1:0", "--cooldown", "0",
        "--admit-pending-after", "2", "--admit-mode", "Execute", "--admit-resource", GPU,
        "--eviction-deadline", "60", "--replacement-deadline", "120"])
    started = time.monotonic()
    try:
        c.wait_for("the controller's admit run", lambda: bool(_runs(c)))
        created = time.monotonic() - started
        [run] = _runs(c)
        name = run["metadata"]["name"]
        assert run["spec"]["mode"] == "Execute"
        assert run["metadata"]["labels"]["optplan.io/admit-job"] == f"{NS}.whole"
        assert run["metadata"]["annotations"]["optplan.io/admit-job"] == f"{NS}/whole"

        def status() -> dict[str, Any]:
            return dict(_get(c, f"/apis/repack.volcano.sh/v1alpha1/repackruns/{name}").get("status") or {})

        c.wait_for(f"RepackRun {name} finished", lambda: status().get("phase") in ("Succeeded", "Failed"))
        done = status()
        print(f"{name}: created {created:.1f} s after the controller started; "
              f"{done['phase']} {[x['reason'] for x in done['conditions']]}")
        print(c.kubectl("get", "pods", "-n", NS, "-o", "wide").stdout)
        # one half moved next to the other: a whole node emptied for the gang
        [move] = done["plan"]["moves"]
        assert move["podGroupName"].startswith(("half-a-", "half-b-")), move
        [moved] = move["pods"]
        src, dst = moved["fromNode"], moved["toNode"]
        assert {src, dst} == set(NODES), moved
        assert len(done["relocations"]) == 1 and done["relocations"][0]["eviction"]["phase"] == "Evicted"
        c.wait_for("Volcano places the whole job", lambda: [
            (p["status"].get("phase"), p["spec"].get("nodeName")) for p in _pods(c, "whole")] == [("Running", src)])
        halves = [p["spec"].get("nodeName") for job in ("half-a", "half-b") for p in _pods(c, job)]
        assert halves == [dst, dst], halves
        assert done["phase"] == "Succeeded", done["conditions"]
        assert len(_runs(c)) == 1  # no second run: the gang is placed
    finally:
        c.end(controller)
