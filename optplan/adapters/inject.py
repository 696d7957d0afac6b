"""Pending gangs and a HyperNode fabric added to a snapshot's objects (issue 15's benchmark): the openb
snapshots have neither, so the "make room for pending gangs" section builds them here, deterministically.

- ``fabric``: tier-1 HyperNodes of ``size`` nodes each, the nodes grouped by (GPU product, GPU count) and
  taken in name order (a leftover group smaller than ``size`` is a HyperNode too); tier-2 HyperNodes of
  ``span`` tier-1 HyperNodes each, in name order. Like racks of like servers under a spine.
- ``pending_gangs``: one pending VCJob per card count, each of ``count / pod_cards`` pods of ``pod_cards``
  cards, minAvailable all of them, hard network topology (highestTierAllowed ``tier``), in ``queue``, with a
  PriorityClass above the running pods' (so that preemption may compare: it can evict them).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

PRODUCT_LABEL = "nvidia.com/gpu.product"
PRIORITY_CLASS = "optplan-bench-high"
NAMESPACE = "pending"


def _gpus(node: dict[str, Any], resource: str) -> str:
    return str(node.get("status", {}).get("allocatable", {}).get(resource, "0"))


def fabric(objects: Sequence[dict[str, Any]], resource: str, size: int = 8, span: int = 4) -> list[dict[str, Any]]:
    """HyperNode objects over the Nodes among ``objects`` (see the module docstring)."""
    groups: dict[tuple[str, str], list[str]] = defaultdict(list)
    for o in objects:
        if o.get("kind") == "Node":
            labels = o["metadata"].get("labels", {})
            groups[(labels.get(PRODUCT_LABEL, ""), _gpus(o, resource))].append(o["metadata"]["name"])
    out: list[dict[str, Any]] = []
    tier1: list[str] = []
    for key in sorted(groups):
        names = sorted(groups[key])
        for i in range(0, len(names), size):
            name = f"rack-{len(tier1):04d}"
            tier1.append(name)
            out.append(_hypernode(name, 1, "Node", names[i:i + size]))
    for i in range(0, len(tier1), span):
        out.append(_hypernode(f"spine-{i // span:03d}", 2, "HyperNode", tier1[i:i + span]))
    return out


def _hypernode(name: str, tier: int, kind: str, members: list[str]) -> dict[str, Any]:
    return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
            "spec": {"tier": tier, "members": [{"type": kind, "selector": {"exactMatch": {"name": m}}}
                                              for m in members]}}


def pending_gangs(cards: Sequence[int], resource: str, *, pod_cards: int = 8, tier: int | None = 1,
                  queue: str = "default", cpu: str = "8", memory: str = "32Gi") -> list[dict[str, Any]]:
    """A PriorityClass and one pending VCJob per entry of ``cards`` (see the module docstring)."""
    out: list[dict[str, Any]] = [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                  "metadata": {"name": PRIORITY_CLASS}, "value": 1000}]
    for i, c in enumerate(cards):
        if c <= 0 or c % pod_cards:
            raise ValueError(f"gang of {c} cards is not a positive multiple of {pod_cards}")
        n = c // pod_cards
        spec: dict[str, Any] = {
            "schedulerName": "volcano", "queue": queue, "minAvailable": n, "priorityClassName": PRIORITY_CLASS,
            "tasks": [{"name": "worker", "replicas": n, "template": {"spec": {
                "schedulerName": "volcano", "priorityClassName": PRIORITY_CLASS,
                "containers": [{"name": "main", "image": "registry.example/train:1", "resources": {
                    "requests": {"cpu": cpu, "memory": memory, resource: str(pod_cards)},
                    "limits": {resource: str(pod_cards)}}}]}}}]}
        if tier is not None:
            spec["networkTopology"] = {"mode": "hard", "highestTierAllowed": tier}
        out.append({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                    "metadata": {"name": f"gang-{i:02d}-{c}c", "namespace": NAMESPACE,
                                 "creationTimestamp": "2025-01-02T00:00:00Z"},
                    "spec": spec, "status": {"state": {"phase": "Pending"}}})
    return out
