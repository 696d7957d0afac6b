"""The feasibility oracle: may this pod run on this node? One module, used by every planner and
by the validator, so that "feasible" means one thing everywhere.

Static predicates (NodeUnschedulable, nodeSelector, required node affinity, TaintToleration) do not
depend on what else runs on the node; resource fit (every requested resource, and the node's pod
count) does, and is checked against a ``Capacity`` that planners update as they simulate moves.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from optplan.models.snapshot import Node, Pod, Resources, Snapshot

POD_SLOT = 1000
"""One pod, in milli-units of the ``pods`` resource."""

NO_POD_LIMIT = 2**62
"""The room, in the ``pods`` resource, of a node whose allocatable has no ``pods`` entry (no limit).
Large enough that no sum of pod slots reaches it, small enough that int64 arithmetic on it is safe."""


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


class Predicates:
    """The static predicates of a snapshot, evaluated once per (constraint signature, node): every
    planner, baseline and validator asks through one table instead of keeping a cache of its own."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.nodes = snapshot.nodes
        self._rows: dict[tuple[object, ...], dict[str, str | None]] = {}
        """signature -> node -> ``static_reason``, filled on demand."""
        self._masks: dict[tuple[tuple[object, ...], int], np.ndarray[Any, Any]] = {}
        self._node_lists: dict[int, tuple[str, ...]] = {}

    def _row(self, sig: tuple[object, ...], pod: Pod, node: str) -> str | None:
        row = self._rows.setdefault(sig, {})
        if node not in row:
            row[node] = static_reason(pod, self.nodes[node])
        return row[node]

    def reason(self, pod: Pod, node: str) -> str | None:
        """Why the pod cannot run on the node regardless of capacity (``static_reason``), or None."""
        return self._row(constraint_signature(pod), pod, node)

    def reasons(self, pod: Pod, nodes: Iterable[str]) -> list[str | None]:
        """``reason`` on each of ``nodes``, the pod's constraint signature computed once."""
        sig = constraint_signature(pod)
        return [self._row(sig, pod, n) for n in nodes]

    def ok(self, pod: Pod, node: str) -> bool:
        return self.reason(pod, node) is None

    def mask(self, pod: Pod, nodes: Sequence[str]) -> np.ndarray[Any, Any]:
        """A read-only boolean row over ``nodes``: True where the static predicates admit the pod. Rows
        are cached per (signature, node list); pass the same list object to reuse them."""
        listed = self._node_lists.setdefault(id(nodes), tuple(nodes))
        if listed != tuple(nodes):  # a list object reused with other contents: forget its rows
            self._masks = {k: v for k, v in self._masks.items() if k[1] != id(nodes)}
            listed = self._node_lists[id(nodes)] = tuple(nodes)
        key = (constraint_signature(pod), id(nodes))
        row = self._masks.get(key)
        if row is None:
            sig = key[0]
            row = np.fromiter((self._row(sig, pod, n) is None for n in listed), dtype=bool, count=len(listed))
            row.flags.writeable = False
            self._masks[key] = row
        return row


def max_fit(pod: Pod, free: Mapping[str, int], limits_pods: bool) -> int:
    """How many copies of the pod fit in ``free`` (every requested resource, and the pod count when the
    node limits it)."""
    n = min((free.get(r, 0) // v for r, v in pod.requests.items() if v > 0), default=1 << 30)
    if limits_pods:
        n = min(n, free.get("pods", 0) // POD_SLOT)
    return max(n, 0)


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
            free = self.free[name]
            for pod in pods:  # ``_apply(name, pod, -1)``, inline: every pod of the snapshot passes here
                requests = pod.requests
                for r, v in requests.items():
                    free[r] = free.get(r, 0) - (v + POD_SLOT if r == "pods" else v)
                if "pods" not in requests:
                    free["pods"] = free.get("pods", 0) - POD_SLOT

    def copy(self) -> Capacity:
        """An independent copy of the free room (cheaper than reading the snapshot's pods again)."""
        out = Capacity.__new__(Capacity)
        out.free = {name: dict(free) for name, free in self.free.items()}
        out._limits_pods = self._limits_pods
        return out

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

    def fits(self, pod: Pod, node: str) -> bool:
        """``fit_reason(pod, node) is None``, without building the reason (a planner's hot path)."""
        free = self.free[node]
        for r, v in pod.requests.items():
            if v > 0 and free.get(r, 0) < v:
                return False
        return not self._limits_pods[node] or free.get("pods", 0) >= POD_SLOT

    def add(self, pod: Pod, node: str) -> None:
        self._apply(node, pod, -1)

    def remove(self, pod: Pod, node: str) -> None:
        self._apply(node, pod, +1)

    def limits_pods(self, node: str) -> bool:
        """Whether the node has a pod-count limit (``pods`` in its allocatable)."""
        return self._limits_pods[node]

    def room(self, node: str, resource: str) -> int:
        """Free ``resource`` on the node; ``NO_POD_LIMIT`` for ``pods`` on a node without a limit."""
        if resource == "pods" and not self._limits_pods[node]:
            return NO_POD_LIMIT
        return self.free[node].get(resource, 0)

    def room_matrix(self, nodes: Sequence[str], resources: Sequence[str], *, exact: bool = False
                    ) -> np.ndarray[Any, Any]:
        """Free room as a [resource, node] matrix (``room`` per cell). int64, or Python ints
        (``dtype=object``) with ``exact`` for quantities whose sums could overflow int64."""
        out = np.zeros((len(resources), len(nodes)), dtype=object if exact else np.int64)
        for i, r in enumerate(resources):
            out[i] = [self.room(n, r) for n in nodes]
        return out

    def over(self, node: str, resources: Iterable[str]) -> list[str]:
        """Resources among ``resources`` on which the node is over-committed now."""
        free = self.free[node]
        out = [r for r in resources if r != "pods" and free.get(r, 0) < 0]
        if self._limits_pods[node] and free.get("pods", 0) < 0:
            out.append("pods")
        return out
