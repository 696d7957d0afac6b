"""The provisioning problem: the snapshot, the gangs to serve and the catalogue; the cluster with new
nodes (``augment``), what Volcano's allocate does on it (``evaluate``) and the gangs no group can host
(``deadlocks``).

The new nodes are ``nodes.augment``'s. Whether the gangs place is decided by placement's greedy — Volcano's
allocate, no preemption or reclaim: new nodes are bought so that nobody is evicted — on that cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from optplan.models.placement import BinpackWeights, PlacementPlan
from optplan.models.provision import Deadlock, NodeGroup
from optplan.models.quantity import MILLI
from optplan.models.queues import ROOT as ROOT_QUEUE
from optplan.models.queues import JobTask, PodTemplate, QueueTree, VCJob
from optplan.models.repack import SolverRecord
from optplan.models.selectors import Toleration
from optplan.models.snapshot import Snapshot
from optplan.solvers.core.oracle import Capacity, Predicates, static_reason
from optplan.solvers.placement.allocate import greedy_place
from optplan.solvers.placement.context import Context
from optplan.solvers.placement.jobs import job_pods, task_minima
from optplan.solvers.provision.nodes import Counts, augment, check_catalogue, cost_of, group_reason
from optplan.solvers.quota.queues import QueueAccount, account_queues


@dataclass
class Outcome:
    """What Volcano's allocate does on the cluster with ``counts`` new nodes."""

    counts: Counts
    cost: int
    placement: PlacementPlan
    snapshot: Snapshot

    @property
    def served(self) -> frozenset[str]:
        return frozenset(j.key for j in self.placement.jobs if j.admitted)


@dataclass
class ExactResult:
    """What the exact model (``cpsat.solve``) found: counts, status, objective and bound."""

    counts: Counts
    status: str
    objective: int | None
    bound: int | None
    """Lower bound on Σ unserved × ``big`` + cost."""
    big: int
    jobs: tuple[str, ...]


@dataclass(frozen=True)
class ProvisionResult:
    """What every provisioning planner returns (``core.planner.Solved``): the outcome of its counts, its
    record, and the exact model's answer when one ran (its bound is the plan's)."""

    outcome: Outcome
    record: SolverRecord
    exact: ExactResult | None = None

    def with_record(self, record: SolverRecord) -> ProvisionResult:
        return replace(self, record=record)


HEURISTIC = "HEURISTIC"


@dataclass
class Problem:
    """The snapshot, the jobs (the gangs to serve), the catalogue and the binpack weights."""

    snapshot: Snapshot
    jobs: list[VCJob]
    groups: list[NodeGroup]
    weights: BinpackWeights = field(default_factory=BinpackWeights)
    now: datetime | None = None
    evaluations: int = 0
    _cache: dict[tuple[int, ...], Outcome] = field(default_factory=dict)
    _predicates: Predicates | None = None

    def __post_init__(self) -> None:
        check_catalogue(self.snapshot, self.groups)

    @property
    def max_counts(self) -> Counts:
        return {g.name: g.max_count for g in self.groups}

    @property
    def predicates(self) -> Predicates:
        """One static-predicate table over the cluster with every group at its maximum (the predicates of
        a node do not depend on which other nodes exist)."""
        if self._predicates is None:
            self._predicates = Predicates(augment(self.snapshot, self.groups, self.max_counts))
        return self._predicates

    def job(self, key: str) -> VCJob:
        return next(j for j in self.jobs if j.key == key)

    def key(self, counts: Mapping[str, int]) -> tuple[int, ...]:
        return tuple(counts.get(g.name, 0) for g in self.groups)

    def evaluate(self, counts: Mapping[str, int]) -> Outcome:
        """Volcano's allocate (placement's greedy, no victims) on the cluster with the new nodes; remembered."""
        k = self.key(counts)
        out = self._cache.get(k)
        if out is None:
            self.evaluations += 1
            clean = {g.name: n for g, n in zip(self.groups, k, strict=True)}
            snap = augment(self.snapshot, self.groups, clean)
            ctx = Context.build(snap, self.jobs, self.weights, self.now, predicates=self.predicates)
            out = self._cache[k] = Outcome(clean, cost_of(self.groups, clean), greedy_place(ctx), snap)
        return out


def host_groups(problem: Problem, job: VCJob) -> dict[str, dict[str, str | None]]:
    """Task -> group -> why an empty node of the group cannot host the task's pod (None: it can)."""
    out: dict[str, dict[str, str | None]] = {}
    pods = job_pods(job)
    for t in job.tasks:
        if not pods.get(t.name):
            continue
        pod = pods[t.name][0]
        out[t.name] = {g.name: group_reason(pod.requests, static_reason(pod, g.node(0)), g) for g in problem.groups}
    return out


def deadlocks(problem: Problem, jobs: Sequence[VCJob]) -> list[Deadlock]:
    """Seed 004 §4.3's deadlock, named before it happens: a task the gang needs (its minimum > 0) whose pod
    no node group can host — its nodeSelector, node affinity or tolerations match no template, or no
    template is large enough — so added nodes would stay empty for it. One entry per such task."""
    out = []
    for job in jobs:
        minima = task_minima(job)
        for task, by_group in host_groups(problem, job).items():
            if minima.get(task, 0) <= 0 or any(r is None for r in by_group.values()):
                continue
            why = "; ".join(f"{g}: {r}" for g, r in by_group.items()) or "the catalogue is empty"
            out.append(Deadlock(job=job.key, queue=job.queue, task=task,
                                reason=f"no node group can host task {task}: {why}"))
    return out



HEADROOM_NAMESPACE = "optplan-headroom"
"""The namespace of the placeholder gangs of the seed's daily rule (``headroom_jobs``)."""


def usable_free(snap: Snapshot, accounts: Mapping[str, QueueAccount], queue: str, resource: str,
                cap: Capacity | None = None, nodes: Iterable[str] | None = None) -> int:
    """Seed 004 §5.2's free room of a queue: min(capability − allocated, the resource free on the nodes its
    jobs may use — ``nodes``, default every schedulable one — in ``cap``, default the snapshot's room);
    capability not naming the resource: the nodes' free room alone."""
    cap = cap or Capacity(snap)
    if nodes is None:
        nodes = [n for n, node in sorted(snap.nodes.items()) if not node.unschedulable]
    on_nodes = sum(max(cap.room(n, resource), 0) for n in nodes)
    a = accounts.get(queue)
    if a is None or resource not in a.capability:
        return on_nodes
    return min(a.capability[resource] - a.allocated.get(resource, 0), on_nodes)


def headroom_jobs(snap: Snapshot, resource: str, threshold: int) -> list[VCJob]:
    """Seed 004 §5.2's daily rule as gangs: for each open leaf queue whose usable free room of the resource
    (``usable_free``) is below ``threshold`` (milli-units), a placeholder gang ``headroom-<queue>`` of
    ⌈threshold⌉ one-unit pods, all needed, tolerating every taint: the room two standard jobs would need,
    to be kept free. Placed on what is free first, it asks new nodes only for the shortfall."""
    tree = QueueTree(snap.queues)
    accounts = account_queues(snap, hierarchical=True)
    out = []
    units = -(-threshold // MILLI)
    for q in sorted(tree.queues):
        if q == ROOT_QUEUE or not tree.is_leaf(q) or not tree.is_open(q):
            continue
        if usable_free(snap, accounts, q, resource) >= threshold:
            continue
        template = PodTemplate(requests={resource: MILLI}, tolerations=(Toleration(operator="Exists"),))
        out.append(VCJob(namespace=HEADROOM_NAMESPACE, name=f"headroom-{q}", queue=q, min_available=units,
                         tasks=(JobTask(name="unit", replicas=units, template=template),)))
    return out
