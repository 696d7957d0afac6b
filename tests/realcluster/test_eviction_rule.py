"""The PodDisruptionBudget rule optplan plans with (``models.snapshot.eviction_need``: the Eviction API's
``unhealthyPodEvictionPolicy``, pods that are not Ready, pods that need no budget) against the real Eviction
API of kube-apiserver 1.35, with the real disruption controller writing the budgets' status.

Each case is its own namespace: three pods on a KWOK node (Running; KWOK sets Ready once, and a pod's Ready
condition set to False afterwards stays so), a PDB over them, and one victim. The real answer comes from a
dry-run eviction (``deleteOptions.dryRun: [All]``: the handler decides, nothing is deleted); optplan's from a
snapshot of the same cluster (``optplan snapshot``), read through ``eviction_need`` and the budget it names.
Kubernetes rule checked (pkg/registry/core/pod/storage/eviction.go): a covered pod that is not Ready is
evicted without the budget under AlwaysAllow, and under IfHealthyBudget while currentHealthy >=
desiredHealthy; a Ready pod needs disruptionsAllowed > 0; a Pending pod needs no budget.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from optplan.adapters.kubefile import load_files
from optplan.models.snapshot import eviction_need
from tests.realcluster.cluster import Cluster, optplan

pytestmark = pytest.mark.realcluster

NODE = "pdb-rule-node"
# case: (ready flags of the three pods, minAvailable, policy, victim index, the Eviction API allows it)
CASES: dict[str, tuple[tuple[bool, ...], int, str, int, bool]] = {
    "ifhealthy-unready-while-healthy": ((True, True, False), 2, "IfHealthyBudget", 2, True),
    "ifhealthy-ready-budget-spent": ((True, True, False), 2, "IfHealthyBudget", 0, False),
    "ifhealthy-unready-while-disrupted": ((True, False, False), 2, "IfHealthyBudget", 1, False),
    "alwaysallow-unready-while-disrupted": ((True, False, False), 2, "AlwaysAllow", 1, True),
    "alwaysallow-ready-budget-spent": ((True, False, False), 2, "AlwaysAllow", 0, False),
    "ifhealthy-ready-with-budget": ((True, True, True), 2, "IfHealthyBudget", 0, True),
}


def _ns(case: str) -> str:
    return f"pdb-{case}"[:63]


def _pod(ns: str, name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns, "labels": {"app": "a"}},
            "spec": {"nodeName": NODE, "containers": [{"name": "c", "image": "app:1",
                                                       "resources": {"requests": {"cpu": "1"}}}]}}


@pytest.fixture(scope="module")
def cases(real_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every case's pods and PDB, the budgets' status written by the disruption controller; a snapshot."""
    c = real_cluster
    c.add_node(NODE, cpu="64")
    for case, (ready, min_available, policy, _, _) in CASES.items():
        ns = _ns(case)
        c.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}])
        c.wait_for(f"{ns}'s default ServiceAccount", lambda ns=ns: c.kubectl(
            "get", "serviceaccount", "default", "-n", ns, check=False).returncode == 0)
        c.apply([_pod(ns, f"p{i}") for i in range(len(ready))])
        c.wait_for(f"{ns}: pods Running", lambda ns=ns: all(
            p["status"].get("phase") == "Running" for p in c.kubectl_json("get", "pods", "-n", ns)["items"]))
        for i, ok in enumerate(ready):
            if not ok:
                patch = {"status": {"conditions": [{"type": "Ready", "status": "False", "reason": "Probe"},
                                                   {"type": "ContainersReady", "status": "False"}]}}
                c.kubectl("patch", "pod", f"p{i}", "-n", ns, "--subresource=status", "--type=merge",
                          "-p", json.dumps(patch))
        c.apply([{"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                  "metadata": {"name": "guard", "namespace": ns},
                  "spec": {"minAvailable": min_available, "unhealthyPodEvictionPolicy": policy,
                           "selector": {"matchLabels": {"app": "a"}}}}])
    for case, (ready, *_) in CASES.items():
        ns = _ns(case)

        def written(ns: str = ns, healthy: int = sum(ready)) -> bool:
            pdb = c.kubectl_json("get", "pdb", "guard", "-n", ns)
            st = pdb.get("status", {})
            return (st.get("observedGeneration") == pdb["metadata"]["generation"]
                    and st.get("currentHealthy") == healthy and st.get("expectedPods") == 3)

        c.wait_for(f"{ns}: the disruption controller's status", written)
    snap = tmp_path_factory.mktemp("pdb-rule") / "snap.yaml"
    res = optplan("snapshot", "--kubeconfig", str(c.kubeconfig), "-o", str(snap))
    assert res.returncode == 0, res.stderr
    return snap


def _real_answer(c: Cluster, ns: str, pod: str) -> tuple[bool, str]:
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod, "namespace": ns},
            "deleteOptions": {"dryRun": ["All"]}}
    res = c.kubectl("create", "--raw", f"/api/v1/namespaces/{ns}/pods/{pod}/eviction", "-f", "-",
                    input=json.dumps(body), check=False)
    return res.returncode == 0, res.stderr.strip()


@pytest.mark.parametrize("case", list(CASES))
def test_optplan_decides_an_eviction_as_the_real_eviction_api(case: str, real_cluster: Cluster, cases: Path) -> None:
    ready, _, policy, victim, expected = CASES[case]
    ns, pod = _ns(case), f"p{victim}"
    allowed, message = _real_answer(real_cluster, ns, pod)
    assert allowed == expected, f"{case}: the real Eviction API answered {allowed} ({message})"
    if not allowed:
        assert "disruption budget" in message, message
    snap = load_files([cases]).snapshot
    p = snap.pods[f"{ns}/{pod}"]
    assert p.ready == ready[victim]
    need = eviction_need(p, snap.pdbs.values())
    budget = snap.pdbs[need.spends] if need.spends is not None else None
    ours = need.refused is None and (budget is None or budget.disruptions_allowed > 0)
    assert ours == allowed, f"{case} ({policy}): optplan says {ours}, the Eviction API {allowed} ({message})"


def test_a_pending_pod_needs_no_budget(real_cluster: Cluster, cases: Path) -> None:
    """A pod bound to no node is Pending: the Eviction API deletes it whatever the budget (optplan: no budget)."""
    c = real_cluster
    ns = _ns("ifhealthy-ready-budget-spent")
    pending = _pod(ns, "pending")
    del pending["spec"]["nodeName"]
    pending["spec"]["nodeSelector"] = {"no-such-node": "true"}
    c.apply([pending])
    allowed, message = _real_answer(c, ns, "pending")
    assert allowed, message
