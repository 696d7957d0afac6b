"""The cluster snapshot: the objects the planners read, in Python's shape.

Amounts are integer milli-units (see ``quantity``). Adapters build these from Kubernetes files or
the API; planners never see Kubernetes' wire shapes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache, cached_property
from typing import Literal, TypeVar

import re2
from pydantic import BaseModel, ConfigDict, Field

from optplan.models.devices import GpuDevice, GpuShare
from optplan.models.queues import JobNetworkTopology, PriorityClass, Queue, VCJob
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
    devices: tuple[GpuDevice, ...] = ()
    """The node's GPUs one by one (``devices``); () when the snapshot does not say (whole cards only)."""

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
    ready: bool = False
    """status.conditions[type=Ready].status is "True" (Kubernetes' IsPodReady; no such condition: not ready)."""
    deleting: bool = False
    """metadata.deletionTimestamp is set: the pod is terminating."""
    gpu_share: GpuShare | None = None
    """Its ask for shared GPUs and, when running, the devices it sits on (``devices``); None for a pod
    that asks for whole cards or no GPU."""

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
    highest_tier_name: str | None = None
    """As a VCJob's (``queues.JobNetworkTopology``): resolved by ``resolve_tier_name``."""


class SubGroupPolicy(Model):
    """One entry of a PodGroup's ``spec.subGroupPolicy`` (Volcano's SubGroupPolicySpec; the job controller writes
    one per partitioned task): the pods its ``labelSelector`` matches, grouped by their values of
    ``matchLabelKeys``, are subgroups of ``subGroupSize`` pods, each under its ``networkTopology``;
    ``minSubGroups`` of them make the gang."""

    name: str = ""
    sub_group_size: int = 1
    min_sub_groups: int = 0
    label_selector: LabelSelector | None = None
    match_label_keys: tuple[str, ...] = ()
    network_topology: NetworkTopology | None = None

    def subgroup(self, labels: dict[str, str]) -> tuple[str, ...] | None:
        """The subgroup a pod with these labels is in (its values of matchLabelKeys), or None: not matched by
        the selector, no matchLabelKeys, or a key missing or empty (Volcano's getSubJobMatchValues; such a pod
        is in the job's default group)."""
        if self.label_selector is not None and not self.label_selector.matches(labels):
            return None
        values = tuple(labels.get(k, "") for k in self.match_label_keys)
        return values if values and all(values) else None


class PodGroup(Model):
    namespace: str
    name: str
    labels: dict[str, str] = Field(default_factory=dict)
    owner_references: tuple[OwnerReference, ...] = ()
    min_member: int = 1
    queue: str = "default"
    network_topology: NetworkTopology | None = None
    sub_group_policy: tuple[SubGroupPolicy, ...] = ()
    """``spec.subGroupPolicy``, in order: a pod belongs to the first whose ``subgroup`` it is in."""
    priority_class_name: str | None = None
    """spec.priorityClassName: the job priority Volcano orders victims by."""
    min_task_member: dict[str, int] = Field(default_factory=dict)
    """spec.minTaskMember: per task (the pods' ``volcano.sh/task-spec``), the pods its gang needs."""
    creation_timestamp: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def subgroup_of(self, labels: dict[str, str]) -> tuple[SubGroupPolicy, tuple[str, ...]] | None:
        """The policy and subgroup a pod with these labels belongs to, or None (the default group)."""
        for policy in self.sub_group_policy:
            values = policy.subgroup(labels)
            if values is not None:
                return policy, values
        return None

    @property
    def owner(self) -> OwnerReference | None:
        """The controller owner (VCJob, ModelServing, Deployment...), else the first owner."""
        for ref in self.owner_references:
            if ref.controller:
                return ref
        return self.owner_references[0] if self.owner_references else None


IF_HEALTHY_BUDGET = "IfHealthyBudget"
ALWAYS_ALLOW = "AlwaysAllow"
UNHEALTHY_POD_EVICTION_POLICIES = (IF_HEALTHY_BUDGET, ALWAYS_ALLOW)
"""PDB ``spec.unhealthyPodEvictionPolicy`` values; absent means IfHealthyBudget."""
BUDGET_EXEMPT_PHASES = frozenset({"Pending", "Succeeded", "Failed"})
"""Pods in these phases are deleted by the Eviction API without looking at any budget."""


class PodDisruptionBudget(Model):
    namespace: str
    name: str
    selector: LabelSelector | None = None
    disruptions_allowed: int = 0
    unhealthy_pod_eviction_policy: str = IF_HEALTHY_BUDGET
    current_healthy: int = 0
    """status.currentHealthy: covered pods that are Ready (and not being disrupted)."""
    desired_healthy: int = 0
    """status.desiredHealthy: how many of them the budget wants Ready."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def covers(self, pod: Pod) -> bool:
        """policy/v1: a null selector matches no pod, an empty one every pod of the namespace."""
        return pod.namespace == self.namespace and self.selector is not None and self.selector.matches(pod.labels)

    def lets_unhealthy_pods_go(self) -> bool:
        """Whether the Eviction API evicts a covered pod that is not Ready without this budget: always
        under AlwaysAllow; under IfHealthyBudget while the guarded application is not disrupted
        (desiredHealthy > 0 and currentHealthy >= desiredHealthy)."""
        return self.unhealthy_pod_eviction_policy == ALWAYS_ALLOW or (
            0 < self.desired_healthy <= self.current_healthy)


SEVERAL_PDBS = "pod-under-several-pdbs"
"""Why the Eviction API refuses a pod whatever the budgets: more than one PDB covers it (a 500)."""


@dataclass(frozen=True)
class EvictionNeed:
    """What evicting one pod through the Eviction API needs from the PodDisruptionBudgets."""

    spends: str | None = None
    """The key of the PDB whose ``disruptionsAllowed`` must be above 0 and goes down by one; None when
    the pod goes without touching a budget."""
    refused: str | None = None
    """Set when the API refuses the eviction whatever the budgets hold (``SEVERAL_PDBS``)."""


def eviction_need(pod: Pod, covering: Iterable[PodDisruptionBudget]) -> EvictionNeed:
    """The Eviction API's rule (policy/v1 ``pods/eviction``), written once; every Repack planner, the goal
    planners, the baselines and the validator read it through ``RepackProblem.pdbs_charged``.

    1. A Pending, Succeeded or Failed pod, or one already being deleted, is deleted at once: no budget.
    2. Otherwise the PDBs of its namespace whose selector matches it: none, no budget; more than one,
       refused (500) whatever their budgets.
    3. One PDB: a pod that is not Ready goes without the budget — and without decrementing
       ``disruptionsAllowed`` — when the PDB's ``unhealthyPodEvictionPolicy`` is AlwaysAllow, or when it is
       IfHealthyBudget (the default) and the application is not disrupted (``lets_unhealthy_pods_go``).
    4. Else the eviction needs ``disruptionsAllowed`` > 0 (0 answers 429) and takes one from it.

    Evicting a pod that needs no budget leaves ``currentHealthy`` as it is (a pod that is not Ready is not
    counted in it), and evicting within ``disruptionsAllowed`` keeps currentHealthy >= desiredHealthy, so
    every pod's need stays the same whatever else one plan evicts and in whatever order."""
    if pod.phase in BUDGET_EXEMPT_PHASES or pod.deleting:
        return EvictionNeed()
    pdbs = [b for b in covering if b.covers(pod)]
    if not pdbs:
        return EvictionNeed()
    if len(pdbs) > 1:
        return EvictionNeed(refused=SEVERAL_PDBS)
    pdb = pdbs[0]
    if not pod.ready and pdb.lets_unhealthy_pods_go():
        return EvictionNeed()
    return EvictionNeed(spends=pdb.key)


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


# ---- Volcano network topology: HyperNodes (topology.volcano.sh/v1alpha1) and what they enclose ----
# A HyperNode has a tier (lower = closer) and members: Nodes chosen by exact name, regular expression
# or labels, or child HyperNodes chosen by exact name. ``Topology`` resolves every HyperNode to the set
# of Nodes it encloses and answers the two questions planners ask: which HyperNodes of tier <= t hold
# all of these nodes, and what is the lowest tier that encloses them. They live next to Snapshot so
# that ``Snapshot.hyper_nodes`` and ``Snapshot.topology`` are typed (no import circle to work around).

@cache
def node_pattern(pattern: str) -> re2._Regexp:
    """A HyperNode ``regexMatch.pattern`` compiled by RE2, the engine (and syntax) of Go's regexp that Volcano
    uses: matching takes time linear in the name, so no pattern can hang a command (Python's ``re``
    backtracks: ``(a|a)*b`` takes exponential time); raises ``re2.error`` on a pattern Go would refuse."""
    options = re2.Options()
    options.log_errors = False  # the error is raised, not also logged on stderr
    return re2.compile(pattern, options=options)


class HyperNodeMember(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    type: Literal["Node", "HyperNode"]
    exact_name: str | None = None
    regex: str | None = None
    labels: LabelSelector | None = None

    def matches_node(self, node: Node) -> bool:
        if self.exact_name is not None:
            return node.name == self.exact_name
        if self.regex is not None:
            return node_pattern(self.regex).fullmatch(node.name) is not None
        return self.labels is not None and self.labels.matches(node.labels)


class HyperNode(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    tier: int
    members: tuple[HyperNodeMember, ...] = Field(default_factory=tuple)
    tier_name: str | None = None
    """``spec.tierName`` (Volcano's HyperNodeSpec.TierName, optional): the tier's name, e.g. ``rack``;
    a RepackRun's ``freeHyperNodes.tierName`` names a tier by it."""


class TierNameError(ValueError):
    """A ``highestTierName`` that names no tier; ``field``: where it is written."""

    def __init__(self, message: str, field: str = "spec.networkTopology.highestTierName") -> None:
        super().__init__(message)
        self.field = field


def tier_of_name(hyper_nodes: dict[str, HyperNode], name: str) -> int:
    """The tier whose HyperNodes carry ``spec.tierName`` ``name`` (Volcano's HyperNodeTierNameMap). A name no
    HyperNode carries, or one HyperNodes of different tiers carry (Volcano keeps whichever it met last),
    raises ValueError with the reason."""
    named = sorted({h.tier for h in hyper_nodes.values() if h.tier_name == name})
    if not named:
        names = sorted({h.tier_name for h in hyper_nodes.values() if h.tier_name is not None})
        listed = f"tier names: {', '.join(names)}" if names else "no HyperNode has a tierName"
        raise TierNameError(f"no HyperNode has tierName {name} ({listed}); vc-scheduler would drop the tier limit")
    if len(named) > 1:
        raise TierNameError(f"tierName {name} names HyperNodes of tiers {', '.join(map(str, named))}: vc-scheduler "
                         "would pick one at random")
    return named[0]


NT = TypeVar("NT", NetworkTopology, JobNetworkTopology)


def resolve_tier_name(nt: NT, hyper_nodes: dict[str, HyperNode]) -> NT:
    """Volcano's session (``translateHighestTierNameToAllowed``): a ``highestTierName`` with no
    ``highestTierAllowed`` becomes the tier of that name (``tier_of_name``; ValueError when there is none);
    otherwise the topology is returned as it is (``highestTierAllowed``, when both are written, wins)."""
    if nt.highest_tier_name is None or nt.highest_tier_allowed is not None:
        return nt
    return nt.model_copy(update={"highest_tier_allowed": tier_of_name(hyper_nodes, nt.highest_tier_name)})


def resolve_group_tier_names(group: PodGroup, hyper_nodes: dict[str, HyperNode]) -> PodGroup:
    """The PodGroup with ``resolve_tier_name`` applied to its networkTopology and each subGroupPolicy's."""
    update: dict[str, object] = {}
    if group.network_topology is not None:
        update["network_topology"] = resolve_tier_name(group.network_topology, hyper_nodes)
    policies = list(group.sub_group_policy)
    for i, sp in enumerate(policies):
        if sp.network_topology is not None:
            try:
                nt = resolve_tier_name(sp.network_topology, hyper_nodes)
            except TierNameError as e:
                raise TierNameError(str(e), f"spec.subGroupPolicy[{i}].networkTopology.highestTierName") from None
            policies[i] = sp.model_copy(update={"network_topology": nt})
    if policies:
        update["sub_group_policy"] = tuple(policies)
    return group.model_copy(update=update) if update else group


def resolve_job_tier_names(job: VCJob, hyper_nodes: dict[str, HyperNode]) -> VCJob:
    """The job with ``resolve_tier_name`` applied to its networkTopology and to each task's partitionPolicy's
    (the same object when nothing is named); TierNameError names the field."""
    update: dict[str, object] = {}
    if job.network_topology is not None:
        nt = resolve_tier_name(job.network_topology, hyper_nodes)
        if nt is not job.network_topology:
            update["network_topology"] = nt
    tasks = list(job.tasks)
    for i, t in enumerate(tasks):
        pp = t.partition_policy
        if pp is None or pp.network_topology is None:
            continue
        try:
            pnt = resolve_tier_name(pp.network_topology, hyper_nodes)
        except TierNameError as e:
            raise TierNameError(str(e), f"spec.tasks[{i}].partitionPolicy.networkTopology.highestTierName") from None
        if pnt is not pp.network_topology:
            tasks[i] = t.model_copy(update={"partition_policy": pp.model_copy(update={"network_topology": pnt})})
            update["tasks"] = tuple(tasks)
    return job.model_copy(update=update) if update else job


class Topology:
    """HyperNodes resolved against a snapshot's nodes."""

    def __init__(self, hyper_nodes: dict[str, HyperNode], nodes: dict[str, Node]) -> None:
        self.hyper_nodes = hyper_nodes
        self.node_names = sorted(nodes)
        self._nodes = nodes

    @cached_property
    def members(self) -> dict[str, frozenset[str]]:
        """HyperNode name -> the Nodes it encloses, through child HyperNodes too."""
        out: dict[str, frozenset[str]] = {}

        def resolve(name: str, seen: tuple[str, ...]) -> frozenset[str]:
            if name in out:
                return out[name]
            if name in seen or name not in self.hyper_nodes:
                return frozenset()
            acc: set[str] = set()
            for m in self.hyper_nodes[name].members:
                if m.type == "HyperNode":
                    if m.exact_name is not None:
                        acc |= resolve(m.exact_name, (*seen, name))
                elif m.exact_name is not None:
                    if m.exact_name in self._nodes:
                        acc.add(m.exact_name)
                else:
                    acc |= {n for n in self.node_names if m.matches_node(self._nodes[n])}
            out[name] = frozenset(acc)
            return out[name]

        for name in sorted(self.hyper_nodes):
            resolve(name, ())
        return out

    @cached_property
    def top_tier(self) -> int:
        """One above the highest tier: the virtual root that encloses everything."""
        return max((h.tier for h in self.hyper_nodes.values()), default=0) + 1

    def tier(self, name: str) -> int:
        return self.top_tier if name == ROOT else self.hyper_nodes[name].tier

    def enclosing(self, nodes: Iterable[str], max_tier: int | None = None) -> list[str]:
        """HyperNodes of tier ≤ max_tier holding every node, lowest tier first, then by name."""
        need = frozenset(nodes)
        found = [h for h, ms in self.members.items() if need <= ms
                 and (max_tier is None or self.hyper_nodes[h].tier <= max_tier)]
        return sorted(found, key=lambda h: (self.hyper_nodes[h].tier, h))

    def lowest_tier(self, nodes: Iterable[str]) -> int:
        """The lowest tier enclosing every node; the virtual root's tier when none does."""
        found = self.enclosing(nodes)
        return self.hyper_nodes[found[0]].tier if found else self.top_tier

    def regions(self, max_tier: int | None) -> list[str]:
        """Candidate regions for a PodGroup: HyperNodes of tier ≤ max_tier (None: all, plus the root)."""
        hs = sorted((h for h in self.hyper_nodes if max_tier is None or self.hyper_nodes[h].tier <= max_tier),
                    key=lambda h: (self.hyper_nodes[h].tier, h))
        return [*hs, ROOT] if max_tier is None else hs

    def region_nodes(self, region: str) -> frozenset[str]:
        return frozenset(self.node_names) if region == ROOT else self.members[region]


ROOT = "<root>"


class Snapshot(BaseModel):
    """Nodes, pods, PodGroups and PDBs of one cluster at one moment. Names are unique per kind."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    nodes: dict[str, Node] = Field(default_factory=dict)
    pods: dict[str, Pod] = Field(default_factory=dict)
    pod_groups: dict[str, PodGroup] = Field(default_factory=dict)
    pdbs: dict[str, PodDisruptionBudget] = Field(default_factory=dict)
    hyper_nodes: dict[str, HyperNode] = Field(default_factory=dict)
    """HyperNode name -> HyperNode."""
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
    def topology(self) -> Topology:
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
