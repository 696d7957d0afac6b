"""The cluster snapshot: the objects the planners read, in Python's shape.

Amounts are integer milli-units (see ``quantity``). Adapters build these from Kubernetes files or
the API; planners never see Kubernetes' wire shapes.
"""

from __future__ import annotations

from collections import defaultdict
from functools import cached_property
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from optplan.models.queues import PriorityClass, Queue, VCJob
from optplan.models.selectors import LabelSelector, NodeSelectorTerm, Taint, Toleration

Resources = dict[str, int]
"""Resource name -> amount in milli-units."""

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
GROUP_NAME_ANNOTATION = "scheduling.k8s.io/group-name"


class Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class OwnerReference(Model):
    api_version: str
    kind: str
    name: str
    uid: str = ""
    controller: bool = False


class Node(Model):
    name: str
    labels: dict[str, str] = Field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    allocatable: Resources = Field(default_factory=dict)

    def provides(self, resource: str) -> bool:
        return self.allocatable.get(resource, 0) > 0


class Pod(Model):
    namespace: str
    name: str
    uid: str = ""
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    owner_references: tuple[OwnerReference, ...] = ()
    creation_timestamp: str = ""
    start_time: str = ""
    """status.startTime (RFC 3339), empty when the pod has not started."""
    node_name: str | None = None
    nominated_node_name: str | None = None
    """status.nominatedNodeName: where the scheduler (or Repack's Execute) suggests the pod goes."""
    scheduler_name: str = "default-scheduler"
    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()
    priority: int | None = None
    """spec.priority (set by admission from the PriorityClass)."""
    priority_class_name: str | None = None
    required_node_affinity: tuple[NodeSelectorTerm, ...] | None = None
    """ORed terms of requiredDuringSchedulingIgnoredDuringExecution; None when absent."""
    requests: Resources = Field(default_factory=dict)
    """Effective requests: max(sum of containers, max of init containers) per resource."""
    phase: str = "Pending"

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def group_name(self) -> str | None:
        return self.annotations.get(GROUP_NAME_ANNOTATION)

    @property
    def group_key(self) -> str | None:
        g = self.group_name
        return f"{self.namespace}/{g}" if g else None

    @property
    def occupying(self) -> bool:
        """Bound to a node and not terminal: it holds its requests on that node."""
        return self.node_name is not None and self.phase not in TERMINAL_PHASES

    def request(self, resource: str) -> int:
        return self.requests.get(resource, 0)


class NetworkTopology(Model):
    mode: Literal["hard", "soft"] = "hard"
    highest_tier_allowed: int | None = None


class PodGroup(Model):
    namespace: str
    name: str
    labels: dict[str, str] = Field(default_factory=dict)
    owner_references: tuple[OwnerReference, ...] = ()
    min_member: int = 1
    queue: str = "default"
    network_topology: NetworkTopology | None = None
    priority_class_name: str | None = None
    """spec.priorityClassName: the job priority Volcano orders victims by."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def owner(self) -> OwnerReference | None:
        """The controller owner (VCJob, ModelServing, Deployment...), else the first owner."""
        for ref in self.owner_references:
            if ref.controller:
                return ref
        return self.owner_references[0] if self.owner_references else None


class PodDisruptionBudget(Model):
    namespace: str
    name: str
    selector: LabelSelector | None = None
    disruptions_allowed: int = 0

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def covers(self, pod: Pod) -> bool:
        """policy/v1: a null selector matches no pod, an empty one every pod of the namespace."""
        return pod.namespace == self.namespace and self.selector is not None and self.selector.matches(pod.labels)


class ModelServing(Model):
    """A Kthena ModelServing (``workload.serving.volcano.sh/v1alpha1``): what eviction recovery needs.
    Each of its ServingGroups has one PodGroup."""

    namespace: str
    name: str
    labels: dict[str, str] = Field(default_factory=dict)
    recovery_policy: str | None = None
    """``spec.recoveryPolicy`` as written (ServingGroupRecreate, RoleRecreate, None); None when absent."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


class Snapshot(BaseModel):
    """Nodes, pods, PodGroups and PDBs of one cluster at one moment. Names are unique per kind."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    nodes: dict[str, Node] = Field(default_factory=dict)
    pods: dict[str, Pod] = Field(default_factory=dict)
    pod_groups: dict[str, PodGroup] = Field(default_factory=dict)
    pdbs: dict[str, PodDisruptionBudget] = Field(default_factory=dict)
    hyper_nodes: dict[str, Any] = Field(default_factory=dict)
    """HyperNode name -> ``topology.HyperNode`` (typed loosely here to keep the import one-way)."""
    queues: dict[str, Queue] = Field(default_factory=dict)
    """Queue name -> Queue, as read (``queues.QueueTree`` adds the implicit root and default)."""
    priority_classes: dict[str, PriorityClass] = Field(default_factory=dict)
    """PriorityClass name -> PriorityClass."""
    jobs: dict[str, VCJob] = Field(default_factory=dict)
    """namespace/name -> VCJob (pending work; running ones also tell Repack their restart policies)."""
    model_servings: dict[str, ModelServing] = Field(default_factory=dict)
    """namespace/name -> ModelServing (their recovery policy widens what an eviction restarts)."""
    warnings: tuple[str, ...] = ()

    @cached_property
    def topology(self) -> Any:
        from optplan.models.topology import Topology

        return Topology(self.hyper_nodes, self.nodes)

    @cached_property
    def pods_by_node(self) -> dict[str, list[Pod]]:
        """Occupying pods per node, sorted by key."""
        out: dict[str, list[Pod]] = defaultdict(list)
        for key in sorted(self.pods):
            pod = self.pods[key]
            if pod.occupying and pod.node_name is not None:
                out[pod.node_name].append(pod)
        return dict(out)

    @cached_property
    def pods_by_group(self) -> dict[str, list[Pod]]:
        """Occupying pods per PodGroup key, sorted by key."""
        out: dict[str, list[Pod]] = defaultdict(list)
        for key in sorted(self.pods):
            pod = self.pods[key]
            gk = pod.group_key
            if gk is not None and pod.occupying:
                out[gk].append(pod)
        return dict(out)

    def providers(self, resource: str) -> list[Node]:
        return [n for name, n in sorted(self.nodes.items()) if n.provides(resource)]

    def occupied(self, resource: str) -> list[str]:
        """Providers hosting at least one occupying pod that requests the resource."""
        return [
            n.name for n in self.providers(resource)
            if any(p.request(resource) > 0 for p in self.pods_by_node.get(n.name, ()))
        ]
