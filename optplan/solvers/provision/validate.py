"""The independent validator of a provisioning plan (``provision_violations``, ``validate_provision``): it
adds the plan's nodes to the snapshot (``nodes.augment``) and lets placement's validator re-check the
placement on that cluster — predicates and room, queues, gangs, topology — and checks the counts against
the catalogue, that nobody is evicted, and that every gang is served or reported. It imports no planner."""

from __future__ import annotations

from collections.abc import Sequence

from optplan.errors import PlanInvalidError
from optplan.models.provision import NodeGroup, ProvisionPlan
from optplan.models.queues import VCJob
from optplan.models.snapshot import Snapshot
from optplan.solvers.placement.validate import placement_violations
from optplan.solvers.provision.nodes import augment


def provision_violations(snap: Snapshot, jobs: Sequence[VCJob], groups: Sequence[NodeGroup],
                         plan: ProvisionPlan) -> list[str]:
    """Every rule the plan breaks, as short sentences; empty when valid."""
    out: list[str] = []
    by_name = {g.name: g for g in groups}
    if [g.name for g in plan.groups] != [g.name for g in groups]:
        out.append("the plan's groups are not the catalogue's, in its order")
    for gc in plan.groups:
        g = by_name.get(gc.name)
        if g is None:
            continue
        if not 0 <= gc.count <= g.max_count:
            out.append(f"group {gc.name}: count {gc.count} outside 0..maxCount {g.max_count}")
        if gc.price != g.price:
            out.append(f"group {gc.name}: price {gc.price} is not the catalogue's {g.price}")
        if gc.hyper_node != g.hyper_node:
            out.append(f"group {gc.name}: HyperNode {gc.hyper_node} is not the catalogue's {g.hyper_node}")
        if list(gc.nodes) != [g.node_name(i) for i in range(gc.count)]:
            out.append(f"group {gc.name}: the new nodes are not named {g.name}-new-0..{gc.count - 1}")
    counts = {gc.name: gc.count for gc in plan.groups if gc.name in by_name}
    bigger = augment(snap, groups, counts)
    out += [f"placement: {v}" for v in placement_violations(bigger, jobs, plan.placement)]
    admitted = {jp.key for jp in plan.placement.jobs if jp.admitted}
    if set(plan.served) != admitted:
        out.append("served is not the set of jobs the placement admits")
    for jp in plan.placement.jobs:
        if jp.victims:
            out.append(f"job {jp.key} evicts pods: provisioning adds nodes instead")
    reported = {u.job for u in plan.unserved}
    for j in jobs:
        if j.key not in admitted and j.key not in reported:
            out.append(f"job {j.key} is neither served nor reported unserved")
    return out


def validate_provision(snap: Snapshot, jobs: Sequence[VCJob], groups: Sequence[NodeGroup],
                       plan: ProvisionPlan) -> None:
    bad = provision_violations(snap, jobs, groups, plan)
    if bad:
        raise PlanInvalidError(bad)
