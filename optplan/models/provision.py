"""Provisioning plans (``optplan provision``): which nodes to add so that pending gangs place.

A **node group** is a template of the nodes a cloud (a Karpenter NodePool, a Cluster Autoscaler node group)
can add: their labels, taints and allocatable, the HyperNode new nodes join, the price of one node (any
unit, per node and hour by convention; compared only with each other), and the most nodes that may be
added. The catalogue file holds one ``NodeGroup`` object per group::

    apiVersion: provision.volcano.sh/v1alpha1
    kind: NodeGroup
    metadata: {name: a100}
    spec:
      price: "32.77"            # a number or a decimal string
      maxCount: 4               # nodes that may be added
      hyperNode: s0             # optional: the HyperNode new nodes join (a Node member, exactMatch)
      labels: {node-type: gpu}
      taints: [{key: nvidia.com/gpu, value: "true", effect: NoSchedule}]
      allocatable: {cpu: "96", memory: 768Gi, nvidia.com/gpu: "8", pods: "110"}
      target: {kind: NodePool, name: gpu}   # optional: what ``--write`` patches

The plan's wire shape (camelCase)::

    {"groups": [{"name", "count", "price", "cost", "hyperNode", "nodes": [...]}],
     "cost", "served": [job keys], "unserved": [{"job", "queue", "reason"}],
     "deadlocks": [{"job", "queue", "task", "reason"}],
     "placement": {as ``optplan place`` prints it, on the cluster with the new nodes},
     "peers": [{"name", "cost", "nodes", "served"}], "solver": {...}}

Prices and costs are exact decimals (milli-units of the price, as quantities are parsed); ``cost`` is
Σ count × price.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from optplan.models.placement import PlacementPlan
from optplan.models.quantity import to_milli
from optplan.models.repack import SolverRecord
from optplan.models.selectors import KubeModel, Taint
from optplan.models.snapshot import Node, Resources

MAX_GROUP_COUNT = 1000
"""The most nodes one group may add in one plan (the exact model has a slot per node that may be added)."""


def price_text(milli: int) -> int | str:
    """A price or cost as written in the catalogue: ``32.77``, ``40`` (exact decimals of milli-units)."""
    if milli % 1000 == 0:
        return milli // 1000
    whole, frac = divmod(milli, 1000)
    return f"{whole}.{frac:03d}".rstrip("0")


class Target(KubeModel):
    """What ``--write`` patches for the group: a Karpenter NodePool's ``spec.limits``, or a Cluster API
    MachineDeployment's ``spec.replicas`` (Cluster Autoscaler's clusterapi provider sizes node groups there)."""

    kind: Literal["NodePool", "MachineDeployment"]
    name: str = Field(min_length=1)
    namespace: str | None = None
    replicas: int | None = Field(default=None, ge=0)
    """A MachineDeployment's ``spec.replicas`` when read from it; None: its nodes in the snapshot count."""


class NodeGroup(KubeModel):
    """One catalogue entry (module docstring). ``price`` in milli-units of the price's unit."""

    name: str
    price: int = Field(ge=0)
    max_count: int = Field(ge=0, le=MAX_GROUP_COUNT)
    hyper_node: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    allocatable: Resources = Field(default_factory=dict)
    target: Target | None = None

    @field_validator("price", mode="before")
    @classmethod
    def _price(cls, v: Any) -> int:
        if isinstance(v, bool) or not isinstance(v, (int, float, str)):
            raise ValueError(f"expected a number or a decimal string, got {type(v).__name__}")
        try:
            return to_milli(str(v) if isinstance(v, float) else v)
        except ValueError:
            raise ValueError(f"not a number: {v!r}") from None

    @field_validator("allocatable", mode="before")
    @classmethod
    def _allocatable(cls, v: Any) -> Resources:
        if not isinstance(v, dict) or not v:
            raise ValueError("expected a non-empty mapping of resource quantities")
        out: Resources = {}
        for name, q in v.items():
            if isinstance(q, bool) or not isinstance(q, (int, str)):
                raise ValueError(f"{name}: expected a quantity, got {type(q).__name__}")
            try:
                milli = to_milli(q)
            except ValueError:
                raise ValueError(f"{name}: unparseable quantity {q!r}") from None
            if milli < 0:
                raise ValueError(f"{name}: negative quantity {q!r}")
            out[str(name)] = milli
        return out

    def node_name(self, index: int) -> str:
        """The name of the group's ``index``-th new node (0-based)."""
        return f"{self.name}-new-{index}"

    def node(self, index: int) -> Node:
        """The group's ``index``-th new node, as the snapshot models it."""
        return Node(name=self.node_name(index), labels=dict(self.labels), taints=self.taints,
                    allocatable=dict(self.allocatable))


class GroupCount(KubeModel):
    name: str
    count: int
    price: int
    """milli-units (the wire shape writes it as a quantity)."""
    hyper_node: str | None = None
    nodes: tuple[str, ...] = ()

    @property
    def cost(self) -> int:
        return self.count * self.price


class Unserved(KubeModel):
    job: str
    queue: str
    reason: str


class Deadlock(KubeModel):
    """Seed 004 §4.3: a gang whose task no node group can host — the autoscaler would add nodes Volcano
    refuses to schedule it onto."""

    job: str
    queue: str
    task: str
    reason: str


class PeerResult(KubeModel):
    name: str
    cost: int
    nodes: dict[str, int]
    served: tuple[str, ...]


class ProvisionPlan(KubeModel):
    groups: tuple[GroupCount, ...]
    """Every group of the catalogue in catalogue order, with a count (0 when none is added)."""
    served: tuple[str, ...]
    """Job keys admitted on the cluster with the new nodes (those admitted before stay admitted)."""
    unserved: tuple[Unserved, ...] = ()
    deadlocks: tuple[Deadlock, ...] = ()
    placement: PlacementPlan
    peers: tuple[PeerResult, ...] = ()
    solver: SolverRecord

    @property
    def cost(self) -> int:
        return sum(g.cost for g in self.groups)

    @property
    def counts(self) -> dict[str, int]:
        return {g.name: g.count for g in self.groups}

    def to_dict(self, *, timings: bool = False) -> dict[str, Any]:
        """The wire shape (module docstring); ``wallSeconds`` only with ``timings``."""
        return {
            "groups": [{"name": g.name, "count": g.count, "price": price_text(g.price),
                        "cost": price_text(g.cost), "hyperNode": g.hyper_node, "nodes": list(g.nodes)}
                       for g in self.groups],
            "cost": price_text(self.cost), "served": list(self.served),
            "unserved": [u.model_dump(mode="json", by_alias=True) for u in self.unserved],
            "deadlocks": [d.model_dump(mode="json", by_alias=True) for d in self.deadlocks],
            "placement": self.placement.to_dict(timings=timings),
            "peers": [{"name": p.name, "cost": price_text(p.cost), "nodes": dict(p.nodes),
                       "served": list(p.served)} for p in self.peers],
            "solver": (lambda d: d if timings else {k: v for k, v in d.items() if k != "wallSeconds"})(
                self.solver.model_dump(mode="json", by_alias=True, exclude_none=True)),
        }
