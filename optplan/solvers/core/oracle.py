"""The feasibility oracle: may this pod run on this node? One module, used by every planner and
by the validator, so that "feasible" means one thing everywhere.

Static predicates (NodeUnschedulable, nodeSelector, required node affinity, TaintToleration) do not
depend on what else runs on the node; resource fit (every requested resource, and the node's pod
count) does, and is checked against a ``Capacity`` that planners update as they simulate moves.
"""

from __future__ import annotations

from collections.abc import Iterable

from optplan.models.snapshot import Node, Pod, Resources, Snapshot

POD_SLOT = 1000
"""One pod, in milli-units of the ``pods`` resource."""


def static_reason(pod: Pod, node: Node) -> str | None:
    """Why the pod cannot run on the node regardless of capacity, or None when it can."""
    if node.unschedulable:
        return "node is unschedulable (cordoned)"
    for k, v in pod.node_selector.items():
        if node.labels.get(k) != v:
            return f"nodeSelector {k}={v} does not match"
    terms = pod.required_node_affinity
    if terms is not None and not any(t.matches(node.name, node.labels) for t in terms):
        return "required node affinity does not match"
    for taint in node.taints:
        if taint.effect in ("NoSchedule", "NoExecute") and not any(t.tolerates(taint) for t in pod.tolerations):
            return f"taint {taint.key}={taint.value}:{taint.effect} is not tolerated"
    return None


def constraint_signature(pod: Pod) -> tuple[object, ...]:
    """Pods with equal signatures pass the static predicates on exactly the same nodes."""
    return (
        tuple(sorted(pod.node_selector.items())),
        pod.required_node_affinity,
        tuple(sorted(pod.tolerations, key=lambda t: (t.key, t.operator, t.value, t.effect))),
    )


def pod_demand(pod: Pod) -> Resources:
    """What the pod consumes on a node: its requests plus one pod slot."""
    demand = dict(pod.requests)
    demand["pods"] = demand.get("pods", 0) + POD_SLOT
    return demand


class Capacity:
    """Free resources per node (allocatable minus occupying pods' requests), updated as moves are
    simulated. A node without ``pods`` in allocatable has no pod-count limit."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.free: dict[str, Resources] = {}
        for name, node in snapshot.nodes.items():
            self.free[name] = dict(node.allocatable)
        self._limits_pods = {name: "pods" in node.allocatable for name, node in snapshot.nodes.items()}
        for name, pods in snapshot.pods_by_node.items():
            for pod in pods:
                self._apply(name, pod, -1)

    def _apply(self, node: str, pod: Pod, sign: int) -> None:
        free = self.free[node]
        for r, v in pod_demand(pod).items():
            free[r] = free.get(r, 0) + sign * v

    def fit_reason(self, pod: Pod, node: str) -> str | None:
        """The first resource that does not fit, or None when every requested one does."""
        free = self.free[node]
        for r, v in sorted(pod.requests.items()):
            if v > 0 and free.get(r, 0) < v:
                return f"insufficient {r}"
        if self._limits_pods[node] and free.get("pods", 0) < POD_SLOT:
            return "too many pods"
        return None

    def add(self, pod: Pod, node: str) -> None:
        self._apply(node, pod, -1)

    def remove(self, pod: Pod, node: str) -> None:
        self._apply(node, pod, +1)

    def over(self, node: str, resources: Iterable[str]) -> list[str]:
        """Resources among ``resources`` on which the node is over-committed now."""
        free = self.free[node]
        out = [r for r in resources if r != "pods" and free.get(r, 0) < 0]
        if self._limits_pods[node] and free.get("pods", 0) < 0:
            out.append("pods")
        return out
