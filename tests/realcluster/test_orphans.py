"""A pod bound to a node that was deleted, on the real cluster: the API server keeps it, bound to the missing
node, until it is deleted or the pod garbage collector's orphan sweep removes it (after a quarantine of
40 s). Reading the live cluster leaves it out with a warning naming it: ``optplan snapshot`` (not in the
file), the planning commands, and the controller — by the same rule — so nothing fails meanwhile.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.realcluster.cluster import Cluster, optplan

pytestmark = pytest.mark.realcluster
NS = "orphans"
NODE = "orphans-gone"
GPU = "nvidia.com/gpu"
HOLD = "optplan.io/test-hold"


@pytest.fixture
def orphan(real_cluster: Cluster) -> Iterator[Cluster]:
    c = real_cluster
    c.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}])
    c.wait_for(f"{NS}'s default ServiceAccount", lambda: c.kubectl(
        "get", "serviceaccount", "default", "-n", NS, check=False).returncode == 0)
    try:
        c.add_node(NODE, gpus=8)
        res = {"requests": {GPU: "2"}, "limits": {GPU: "2"}}
        # a finalizer of ours keeps the pod readable after the pod GC's orphan sweep (40-60 s after the node
        # goes: it marks the pod Failed, then deletes it)
        c.apply([{"apiVersion": "v1", "kind": "Pod",
                  "metadata": {"name": "left-behind", "namespace": NS, "finalizers": [HOLD]},
                  "spec": {"nodeName": NODE, "containers": [{"name": "c", "image": "serve:1", "resources": res}]}}])
        c.wait_for("the pod Running", lambda: c.kubectl_json("get", "pod", "left-behind", "-n", NS)[
            "status"].get("phase") == "Running")
        c.kubectl("delete", "node", NODE)
        yield c
    finally:
        c.kubectl("patch", "pod", "left-behind", "-n", NS, "--type=json", "-p",
                  '[{"op": "remove", "path": "/metadata/finalizers"}]', check=False)
        c.kubectl("delete", "namespace", NS, "--ignore-not-found", "--timeout=120s", check=False, timeout=150)
        c.kubectl("delete", "node", NODE, "--ignore-not-found", check=False)


def _untimed(out: str) -> Any:
    doc = json.loads(out)
    doc.get("status", {}).get("plan", {}).pop("solver", None)
    return doc


def test_a_pod_on_a_deleted_node_is_left_out_of_live_reads(orphan: Cluster, sa_kubeconfig: Path,
                                                           tmp_path: Path) -> None:
    """The three live reads run at once, right after the node went: the pod GC marks such a pod Failed
    40-60 s later (then it holds nothing and is no orphan any more), and one optplan process can take
    10-20 s on a busy machine."""
    c = orphan
    warning = f"pod {NS}/left-behind is left out: bound to node '{NODE}', which does not exist"
    kube = ("--kubeconfig", str(sa_kubeconfig))
    snap = tmp_path / "snap.yaml"
    run = tmp_path / "run.yaml"
    run.write_text(json.dumps({"apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackRun",
                               "metadata": {"name": "orphans"},
                               "spec": {"mode": "DryRun", "goals": [{"resource": GPU}]}}))
    reads = {"snapshot": ("snapshot", *kube, "-o", str(snap)),
             "frag": ("frag", "--resource", GPU, *kube, "-o", "json"),
             "repack": ("repack", "--run", str(run), "--solver", "greedy", *kube, "-o", "json")}
    with ThreadPoolExecutor(len(reads)) as pool:
        done = dict(zip(reads, pool.map(lambda argv: optplan(*argv), reads.values()), strict=True))
    pod = c.kubectl_json("get", "pod", "left-behind", "-n", NS)
    assert pod["spec"]["nodeName"] == NODE  # the server kept it, bound to the node that is gone
    if pod["status"].get("phase") in ("Succeeded", "Failed"):
        pytest.skip("the pod GC marked the pod Failed before the reads ended (a slow machine)")
    for what, res in done.items():
        assert res.returncode == 0 and warning in res.stderr, (what, res.stderr)
    assert "left-behind" not in snap.read_text()
    for what in ("frag", "repack"):
        dumped = optplan(*[a for a in reads[what] if a not in kube], str(snap))
        assert dumped.returncode == 0, dumped.stderr
        assert _untimed(done[what].stdout) == _untimed(dumped.stdout), what
