"""The cluster with new nodes: ``augment`` adds a catalogue's nodes to a snapshot, each in its group's
HyperNode; ``cost_of`` prices them; ``check_catalogue`` refuses a catalogue that does not fit the snapshot;
``group_reason`` says why a group's empty node cannot host a pod. Data only: no planner (the validator
reads it).

New nodes are named ``<group>-new-<i>`` and carry the group's labels, taints and allocatable; a group that
names a HyperNode adds each new node to it as a ``Node`` member selected by exactMatch (so the node is
also in every HyperNode above it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from optplan.errors import InputError
from optplan.models.provision import NodeGroup
from optplan.models.snapshot import HyperNode, HyperNodeMember, Snapshot

Counts = dict[str, int]
"""Group name -> nodes added."""


def augment(snap: Snapshot, groups: Sequence[NodeGroup], counts: Mapping[str, int]) -> Snapshot:
    """The snapshot with ``counts[g]`` new nodes of each group, each in its group's HyperNode."""
    nodes = dict(snap.nodes)
    hyper = dict(snap.hyper_nodes)
    for g in groups:
        for i in range(counts.get(g.name, 0)):
            n = g.node(i)
            nodes[n.name] = n
            if g.hyper_node is not None:
                h = hyper[g.hyper_node]
                member = HyperNodeMember(type="Node", exact_name=n.name)
                hyper[g.hyper_node] = HyperNode(name=h.name, tier=h.tier, members=(*h.members, member),
                                                tier_name=h.tier_name)
    return snap.model_copy(update={"nodes": nodes, "hyper_nodes": hyper})


def cost_of(groups: Sequence[NodeGroup], counts: Mapping[str, int]) -> int:
    return sum(g.price * counts.get(g.name, 0) for g in groups)


def check_catalogue(snap: Snapshot, groups: Sequence[NodeGroup]) -> None:
    """Names unique, new node names free, HyperNodes that exist (input a user can fix: ``InputError``)."""
    seen: set[str] = set()
    for g in groups:
        obj = f"NodeGroup/{g.name}"
        if g.name in seen:
            raise InputError("a node group of this name is given twice", obj=obj, field="metadata.name")
        seen.add(g.name)
        if g.hyper_node is not None and g.hyper_node not in snap.hyper_nodes:
            raise InputError(f"HyperNode {g.hyper_node} is not in the snapshot", obj=obj, field="spec.hyperNode")
        taken = [g.node_name(i) for i in range(g.max_count) if g.node_name(i) in snap.nodes]
        if taken:
            raise InputError(f"new node name {taken[0]} is already a node of the snapshot", obj=obj,
                             field="metadata.name")


def group_reason(pod_requests: Mapping[str, int], reason: str | None, g: NodeGroup) -> str | None:
    """Why the group's nodes cannot host the pod even empty, or None."""
    if reason is not None:
        return reason
    if g.max_count == 0:
        return "maxCount is 0"
    short = sorted(r for r, v in pod_requests.items() if v > g.allocatable.get(r, 0))
    if short:
        return f"a node's allocatable {short[0]} is smaller than the pod's request"
    return None
