"""Volcano queues, PriorityClasses and VCJobs (pending work), and the queue tree.

Queues (``scheduling.volcano.sh/v1beta1``, cluster-scoped) form a tree through ``spec.parent``.
Volcano's scheduler creates two queues at start-up when they are missing, so both always exist here:

- ``root``: the top of the tree (reclaimable false, weight 1, no quotas). A Queue without
  ``spec.parent`` (or with ``parent: ""``) hangs under ``root``; ``root``'s own parent is ignored.
- ``default``: under ``root`` (reclaimable true, weight 1, no quotas). PodGroups and VCJobs without
  ``spec.queue`` land in it.

A snapshot may hold either of them (with quotas, a state, labels); otherwise ``QueueTree`` adds them
and marks them implicit. A queue whose parent is missing, or that sits in a parent cycle, is shown
under ``root`` for accounting, and ``QueueTree.broken`` says why (validation reports it).

Amounts are integer milli-units (see ``quantity``); an absent resource in guarantee or deserved is 0,
an absent resource in capability is unlimited.
"""

from __future__ import annotations

from functools import cached_property
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from optplan.models.devices import GpuShare
from optplan.models.selectors import NodeSelectorTerm, Toleration

Resources = dict[str, int]
"""Resource name -> amount in milli-units (the same alias as ``snapshot.Resources``)."""

ROOT = "root"
DEFAULT = "default"
QUEUE_STATES = ("Open", "Closed", "Closing", "Unknown")
POD_EVICTED = "PodEvicted"
ANY_EVENT = "*"
"""Volcano's ``AnyEvent``: a policy on it matches every event."""
PREEMPTION_POLICIES = ("PreemptLowerPriority", "Never")


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Queue(_Model):
    """``spec.{parent, guarantee.resource, deserved, capability, reclaimable, weight, priority}``,
    ``status.state``."""

    name: str
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    parent: str | None = None
    """As written; None when absent or empty (then the parent is ``root``)."""
    guarantee: Resources = Field(default_factory=dict)
    deserved: Resources = Field(default_factory=dict)
    capability: Resources = Field(default_factory=dict)
    """Hard cap per resource; a resource not named is unlimited."""
    reclaimable: bool = True
    weight: int = 1
    priority: int = 0
    """``spec.priority``: allocate visits queues of higher priority first (the capacity plugin's QueueOrderFn)."""
    state: Literal["Open", "Closed", "Closing", "Unknown"] = "Open"
    implicit: bool = False
    """Not in the snapshot: added because Volcano always has it (``root``, ``default``)."""

    @property
    def key(self) -> str:
        return self.name

    @property
    def parent_name(self) -> str | None:
        """The effective parent: None for ``root``, ``root`` when none is written."""
        if self.name == ROOT:
            return None
        return self.parent or ROOT


class PriorityClass(_Model):
    """``scheduling.k8s.io/v1`` PriorityClass."""

    name: str
    value: int
    preemption_policy: Literal["PreemptLowerPriority", "Never"] = "PreemptLowerPriority"
    global_default: bool = False

    @property
    def key(self) -> str:
        return self.name


class JobNetworkTopology(_Model):
    """A VCJob's ``spec.networkTopology``: the same shape as a PodGroup's ``snapshot.NetworkTopology``."""

    mode: Literal["hard", "soft"] = "hard"
    highest_tier_allowed: int | None = None
    highest_tier_name: str | None = None
    """``highestTierName``: the tier by the HyperNodes' ``spec.tierName``; read only when
    ``highestTierAllowed`` is absent (``snapshot.resolve_tier_name`` turns it into the number)."""


class PodTemplate(_Model):
    """What the scheduler reads from a task's ``template``: the pods it creates look like this."""

    labels: dict[str, str] = Field(default_factory=dict)
    requests: Resources = Field(default_factory=dict)
    """Effective requests, by the same rule as a Pod's (containers, init containers, overhead)."""
    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()
    required_node_affinity: tuple[NodeSelectorTerm, ...] | None = None
    """ORed terms of requiredDuringSchedulingIgnoredDuringExecution; None when absent."""
    priority_class_name: str | None = None
    scheduler_name: str | None = None
    gpu_share: GpuShare | None = None
    """Its pods' ask for shared GPUs (a Pod's ``gpu_share``, not placed); None for whole cards or no GPU."""


class LifecyclePolicy(_Model):
    """One entry of a VCJob's (or a task's) ``policies``: the events it reacts to (``event`` and
    ``events`` merged, as Volcano's controller reads them) and its action (RestartJob, RestartTask,
    AbortJob, ...; kept as written). A policy on ``exitCode`` alone has no events and matches none."""

    events: tuple[str, ...] = ()
    action: str = ""

    def matches(self, event: str) -> bool:
        """The event is listed, or the policy reacts to any event (``*``)."""
        return event in self.events or ANY_EVENT in self.events


class PartitionPolicy(_Model):
    """A task's ``partitionPolicy``: its ``replicas`` = ``totalPartitions`` × ``partitionSize`` pods in
    partitions of ``partitionSize`` (replica ``i`` in partition ``i // partitionSize``, as Volcano's job
    controller labels it); a partition is placed whole or not at all, inside one HyperNode of tier ≤ its
    ``networkTopology``'s limit, and the gang needs ``minPartitions`` whole partitions (Volcano's
    SubGroupPolicy: ``subGroupSize``, ``minSubGroups``, a topology per subgroup)."""

    total_partitions: int = Field(ge=1)
    partition_size: int = Field(ge=1)
    min_partitions: int = Field(default=0, ge=0)
    network_topology: JobNetworkTopology | None = None

    def of(self, index: int) -> int:
        """The partition replica ``index`` belongs to."""
        return index // self.partition_size

    def members(self, partition: int) -> range:
        """The replica indices of a partition."""
        return range(partition * self.partition_size, (partition + 1) * self.partition_size)


class TaskMember(_Model):
    """One existing pod of a PodGroup-backed job's task (a bare PodGroup: no VCJob creates its pods): its name and
    what the scheduler reads from it, in a template's shape."""

    name: str
    template: PodTemplate = Field(default_factory=PodTemplate)


class JobTask(_Model):
    """``spec.tasks[]`` of a VCJob: ``replicas`` pods built from ``template``. A PodGroup-backed job's task
    (``VCJob.kind`` PodGroup) lists its existing pods in ``members`` (replica ``i`` is ``members[i]``)."""

    name: str
    replicas: int = 1
    min_available: int | None = None
    """Task-level minAvailable; Volcano defaults it to replicas (a partitioned task: ``minPartitions`` ×
    ``partitionSize`` when both are above 0, as the job controller sets the PodGroup's minTaskMember)."""
    partition_policy: PartitionPolicy | None = None
    template: PodTemplate = Field(default_factory=PodTemplate)
    policies: tuple[LifecyclePolicy, ...] = ()
    """``spec.tasks[].policies``: for this task's pods they come before the job's."""
    members: tuple[TaskMember, ...] = ()
    """A PodGroup-backed job's task: its pods as they exist, named as they are (empty for a VCJob's task, whose
    pods are ``<job>-<task>-<index>``)."""

    def request(self, resource: str) -> int:
        return self.template.requests.get(resource, 0)


class VCJob(_Model):
    """``batch.volcano.sh/v1alpha1`` Job, read as pending work."""

    namespace: str
    name: str
    uid: str = ""
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    creation_timestamp: str = ""
    queue: str = DEFAULT
    min_available: int = 0
    """As written, or (Volcano's webhook default) the sum of the tasks' minAvailable, else replicas."""
    priority_class_name: str | None = None
    network_topology: JobNetworkTopology | None = None
    tasks: tuple[JobTask, ...] = ()
    policies: tuple[LifecyclePolicy, ...] = ()
    """``spec.policies``: lifecycle policies of the whole job."""
    phase: str = ""
    """``status.state.phase`` when present (Pending, Running, ...)."""
    kind: Literal["Job", "PodGroup"] = "Job"
    """Job: a VCJob. PodGroup: a bare PodGroup and its pods, read as the job Volcano's scheduler builds from any
    PodGroup (``placement.jobs.pod_group_job``); its tasks' ``members`` are its pods."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def action_on(self, event: str, task: str | None = None) -> str | None:
        """The action Volcano's job controller takes when a pod of ``task`` sees ``event``: the first
        matching policy of that task, else the first matching policy of the job; None when none matches
        (the controller then only syncs the job)."""
        for t in self.tasks:
            if task is not None and t.name == task:
                for policy in t.policies:
                    if policy.matches(event):
                        return policy.action
                break
        for policy in self.policies:
            if policy.matches(event):
                return policy.action
        return None

    @property
    def replicas(self) -> int:
        return sum(t.replicas for t in self.tasks)

    def task_priority_class(self, task: JobTask) -> str | None:
        """The job controller gives a pod the job's priorityClassName unless its template names one."""
        return task.template.priority_class_name or self.priority_class_name

    def total_requests(self) -> Resources:
        """Requests of every pod the job would create."""
        out: Resources = {}
        for t in self.tasks:
            for r, v in t.template.requests.items():
                out[r] = out.get(r, 0) + v * t.replicas
        return dict(sorted(out.items()))


class QueueTree:
    """The queues of a snapshot as Volcano sees them: ``root`` and ``default`` always present, every
    other queue under its parent. Children are sorted by name, so every walk is deterministic."""

    def __init__(self, queues: dict[str, Queue]) -> None:
        qs = dict(queues)
        if ROOT not in qs:
            qs[ROOT] = Queue(name=ROOT, reclaimable=False, implicit=True)
        if DEFAULT not in qs:
            qs[DEFAULT] = Queue(name=DEFAULT, implicit=True)
        self.queues: dict[str, Queue] = dict(sorted(qs.items()))
        self.broken: dict[str, str] = {}
        """Queue name -> why it is shown under root instead of its written parent."""
        for name, q in self.queues.items():
            parent = q.parent_name
            if parent is None:
                continue
            if parent == name:
                self.broken[name] = f"queue {name} names itself as its parent"
            elif parent not in self.queues:
                self.broken[name] = f"parent queue {parent!r} does not exist"
        for name in self.queues:
            if name not in self.broken and self._in_cycle(name):
                self.broken[name] = "its parent chain is a cycle and never reaches root"

    def _written_parent(self, name: str) -> str | None:
        return self.queues[name].parent_name

    def _in_cycle(self, name: str) -> bool:
        """Following written parents from ``name`` comes back to ``name``."""
        cur = self._written_parent(name)
        for _ in range(len(self.queues)):
            if cur is None or cur not in self.queues:
                return False
            if cur == name:
                return True
            cur = self._written_parent(cur)
        return False

    def parent(self, name: str) -> str | None:
        """The parent used for accounting: the written one, or ``root`` for a broken queue."""
        if name == ROOT:
            return None
        if name in self.broken:
            return ROOT
        return self._written_parent(name)

    @cached_property
    def children(self) -> dict[str, tuple[str, ...]]:
        out: dict[str, list[str]] = {name: [] for name in self.queues}
        for name in self.queues:
            p = self.parent(name)
            if p is not None:
                out[p].append(name)
        return {k: tuple(sorted(v)) for k, v in out.items()}

    def ancestors(self, name: str) -> tuple[str, ...]:
        """Nearest first, ending with ``root``; empty for ``root``."""
        out: list[str] = []
        cur = self.parent(name)
        while cur is not None:
            out.append(cur)
            cur = self.parent(cur)
        return tuple(out)

    def depth(self, name: str) -> int:
        """``root`` is 0, a queue under root 1 (Volcano's webhook allows at most 5)."""
        return len(self.ancestors(name))

    def is_leaf(self, name: str) -> bool:
        return not self.children[name]

    def preorder(self) -> list[str]:
        """root first, then each subtree, children by name."""
        out: list[str] = []
        stack = [ROOT]
        while stack:
            name = stack.pop()
            out.append(name)
            stack.extend(reversed(self.children[name]))
        return out

    def is_open(self, name: str) -> bool:
        """Open itself and under open ancestors (Volcano's controller closes the children of a closed queue)."""
        return all(self.queues[q].state == "Open" for q in (name, *self.ancestors(name)))
