"""RepackRun (repack.volcano.sh/v1alpha1): the spec as the seed writes it, the status we emit,
and the solver-independent plan that every planner returns."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Field, ValidationInfo, field_validator, model_validator

from optplan.models.quantity import MAX_MILLI, to_milli
from optplan.models.selectors import KubeModel, LabelSelector, ScopeSet

Quantity = Annotated[int, BeforeValidator(to_milli)]
"""A Kubernetes quantity, held as integer milli-units."""

API_VERSION = "repack.volcano.sh/v1alpha1"
KIND = "RepackRun"
DisruptionProtection = Literal["Honor", "Ignore"]
HONOR: DisruptionProtection = "Honor"
IGNORE: DisruptionProtection = "Ignore"


# ---- the goals of Repack with a purpose (issue 15; optional: without them a run is the seed's) -------
# They live here, not in models/goals.py (which holds their plan and status and imports this module), so
# that ``Goal`` and ``RepackRunSpec`` can name them; models/goals.py re-exports them.

def namespaced_name(text: str) -> str:
    """``namespace/name``, both parts present (a job or PodGroup key as the snapshot writes it)."""
    ns, sep, name = text.partition("/")
    if not sep or not ns.strip() or not name.strip() or "/" in name:
        raise ValueError(f"expected namespace/name, got {text!r}")
    return text


JobKey = Annotated[str, AfterValidator(namespaced_name)]


def one_tier(tier: int | None, tier_name: str | None) -> None:
    """A tier is named one way: by number or by name, never both (they could disagree), never neither."""
    if (tier is None) == (tier_name is None):
        raise ValueError("give exactly one of tier and tierName")


class AdmitGoal(KubeModel):
    """Pending gangs to make room for: named, selected by label, or every pending gang of some queues.
    The three are a union; a selector or a queue that matches no pending gang matches none (a standing
    goal), while a named job must exist and be pending (``solvers/goals/resolve.py``)."""

    jobs: tuple[JobKey, ...] = ()
    """``namespace/name`` of a VCJob, or of a PodGroup (the VCJob that owns it)."""
    selector: LabelSelector | None = None
    """Pending VCJobs whose labels match."""
    queues: tuple[str, ...] = ()
    """Every gang pending in these queues."""

    @model_validator(mode="after")
    def _something(self) -> AdmitGoal:
        if not self.jobs and self.selector is None and not self.queues:
            raise ValueError("admit names no job: give jobs, selector or queues")
        return self


class FreeHyperNodesGoal(KubeModel):
    """Leave ``count`` HyperNodes of one tier (by number, or by the ``spec.tierName`` Volcano's HyperNodes
    carry) with every node empty of the target resource."""

    tier: int | None = Field(default=None, ge=1)
    tier_name: str | None = Field(default=None, min_length=1)
    count: int = Field(ge=1)
    required: bool = False
    """True: a plan must free ``count`` (else the goal fails with RequiredNodeBlocksNotMet); false: as
    many as possible up to ``count``, after the admitted gangs and before disruption."""

    @model_validator(mode="after")
    def _one_tier(self) -> FreeHyperNodesGoal:
        one_tier(self.tier, self.tier_name)
        return self


class FreeGpusGoal(KubeModel):
    """Leave ``count`` whole GPUs free on one node whose devices are of ``model`` (for a pending pod asking for
    that many): the node's devices that no pod holds any part of, shares included, once the plan's pods have
    moved. ``model`` matches a device's type as Volcano's ``nvidia.com/use-gputype`` does (the type contains
    it, case-insensitive); absent: any model. Needs nodes that list their GPUs (``volcano.sh/node-vgpu-register``
    or gpushare) and the resource ``nvidia.com/gpu``."""

    count: int = Field(ge=1)
    model: str | None = Field(default=None, min_length=1)


BlockMode = Literal["binpack", "spread"]


class NetworkTopologyGoal(KubeModel):
    """``spec.networkTopology`` as another implementation of the same design names it: free
    ``requiredNodeBlocks`` node blocks of a HyperNode tier, required. A block is ``nodeBlockSize`` nodes of
    one HyperNode of the tier; optplan frees whole HyperNodes, so a block must be a whole HyperNode
    (``nodeBlockSize`` absent, or the node count of every HyperNode of the tier: checked against the
    snapshot in ``solvers/goals/resolve.py``). Read as a ``FreeHyperNodesGoal`` (``as_goal``), so every
    planner sees one goal.

    The tier is named one way: ``tier`` or its other name ``hyperNodeTier`` (a number), ``tierName`` or
    ``hyperNodeTierName`` (the HyperNodes' ``spec.tierName``). ``mode`` (binpack: blocks gathered into as
    few HyperNodes as possible; spread: over as many) is how several blocks share a HyperNode; a whole
    HyperNode holds one block, so both plan alike and the mode is accepted as given."""

    tier: int | None = Field(default=None, ge=1)
    tier_name: str | None = Field(default=None, min_length=1)
    hyper_node_tier: int | None = Field(default=None, ge=1)
    hyper_node_tier_name: str | None = Field(default=None, min_length=1)
    required_node_blocks: int = Field(ge=1)
    node_block_size: int | None = Field(default=None, ge=1)
    """Nodes per block (absent: a whole HyperNode of the tier)."""
    mode: BlockMode | None = None

    @model_validator(mode="after")
    def _one_tier(self) -> NetworkTopologyGoal:
        given = [self.tier, self.tier_name, self.hyper_node_tier, self.hyper_node_tier_name]
        if sum(v is not None for v in given) != 1:
            raise ValueError("give exactly one of tier, tierName, hyperNodeTier and hyperNodeTierName")
        return self

    @property
    def tier_number(self) -> int | None:
        return self.tier if self.tier is not None else self.hyper_node_tier

    @property
    def tier_label(self) -> str | None:
        return self.tier_name if self.tier_name is not None else self.hyper_node_tier_name

    @property
    def tier_field(self) -> str:
        """The field that names the tier, as written (for errors)."""
        return next(f for f, v in (("tier", self.tier), ("tierName", self.tier_name),
                                   ("hyperNodeTier", self.hyper_node_tier),
                                   ("hyperNodeTierName", self.hyper_node_tier_name)) if v is not None)

    def as_goal(self) -> FreeHyperNodesGoal:
        return FreeHyperNodesGoal(tier=self.tier_number, tier_name=self.tier_label, count=self.required_node_blocks,
                                  required=True)


class Goal(KubeModel):
    resource: str = Field(min_length=1)
    min_frag_improvement_percent: int | float | None = None
    admit: AdmitGoal | None = None
    """Make room for these pending gangs (issue 15)."""
    free_hyper_nodes: FreeHyperNodesGoal | None = None
    """Leave whole HyperNodes of a tier empty of ``resource`` (issue 15)."""
    free_gpus: FreeGpusGoal | None = None
    """Leave that many whole GPUs of a model free on one node (Repack at device level, ``solvers/repack/gpus.py``);
    given alone, not with ``admit`` or ``freeHyperNodes``."""

    @model_validator(mode="after")
    def _gpus_alone(self) -> Goal:
        if self.free_gpus is not None and (self.admit is not None or self.free_hyper_nodes is not None):
            raise ValueError("give freeGpus alone, not with admit or freeHyperNodes")
        return self

    @field_validator("min_frag_improvement_percent")
    @classmethod
    def _in_range(cls, v: int | float | None) -> int | float | None:
        if v is not None and not 0 <= v <= 100:
            raise ValueError(f"must be within 0..100, got {v}")
        return v

    @property
    def min_improvement(self) -> Fraction:
        """Exact threshold in percentage points (absent means 0)."""
        v = self.min_frag_improvement_percent
        return Fraction(0) if v is None else Fraction(str(v))


class Scope(KubeModel):
    pod_groups: ScopeSet = Field(default_factory=ScopeSet)
    nodes: ScopeSet = Field(default_factory=ScopeSet)


class MaxPerRun(KubeModel):
    pod_groups: int | None = Field(default=None, ge=0)
    resources: dict[str, Quantity] = Field(default_factory=dict)

    @field_validator("resources")
    @classmethod
    def _non_negative(cls, v: dict[str, int]) -> dict[str, int]:
        for name, amount in v.items():
            if amount < 0:
                raise ValueError(f"budget for {name} is negative")
            if amount > MAX_MILLI:
                raise ValueError(f"budget for {name} is too large (over 2^63-1 milli-units)")
        return v


class Eviction(KubeModel):
    grace_period_seconds: int | None = Field(default=None, ge=0)


class RepackRunSpec(KubeModel):
    mode: Literal["DryRun", "Execute"] = "DryRun"
    goals: tuple[Goal, ...] = Field(min_length=1, max_length=1)
    scope: Scope = Field(default_factory=Scope)
    max_per_run: MaxPerRun = Field(default_factory=MaxPerRun)
    eviction: Eviction | None = None
    ttl_seconds_after_finished: int | None = Field(default=None, ge=0)
    disruption_protection: DisruptionProtection = HONOR
    """Honor (default): pods their owners protect from disruption (``karpenter.sh/do-not-disrupt: "true"``,
    ``cluster-autoscaler.kubernetes.io/safe-to-evict: "false"``, ``volcano.sh/preemptable: "false"``) are
    never moved, so their nodes are not vacated; Ignore: those markers are not read."""
    network_topology: NetworkTopologyGoal | None = None
    """Another implementation's name for ``goals[0].freeHyperNodes`` with ``required: true``."""

    @field_validator("network_topology")
    @classmethod
    def _not_both(cls, v: NetworkTopologyGoal | None, info: ValidationInfo) -> NetworkTopologyGoal | None:
        """One way to ask for free HyperNodes: two could disagree on the tier or the count."""
        goals = info.data.get("goals") or ()
        if v is not None and any(g.free_hyper_nodes is not None for g in goals):
            raise ValueError("give freeHyperNodes or networkTopology, not both")
        return v

    @property
    def goal(self) -> Goal:
        return self.goals[0]

    @property
    def free_hyper_nodes(self) -> FreeHyperNodesGoal | None:
        """The HyperNodes to free: the goal's ``freeHyperNodes``, else ``networkTopology`` read as one."""
        own = self.goals[0].free_hyper_nodes
        if own is not None:
            return own
        return self.network_topology.as_goal() if self.network_topology is not None else None

    @property
    def has_purpose(self) -> bool:
        """The run asks for more than the seed's compaction: pending gangs to admit or HyperNodes to free."""
        return self.goals[0].admit is not None or self.free_hyper_nodes is not None

    @property
    def resource(self) -> str:
        return self.goals[0].resource


class RepackRun(KubeModel):
    """A RepackRun as read; ``raw`` keeps the object so that output echoes it unchanged."""

    name: str
    labels: dict[str, str] = Field(default_factory=dict)
    spec: RepackRunSpec
    raw: dict[str, Any] = Field(default_factory=dict, repr=False)


# ---- the plan every planner returns (solver-independent) ----------------------------------------

class PodMove(KubeModel):
    pod: str  # namespace/name
    from_node: str
    to_node: str
    to_devices: tuple[int, ...] | None = None
    """For a pod holding a GPU share (``Pod.gpu_share``) on nodes that list their GPUs: the devices of
    ``to_node`` it takes, by device index (``GpuDevice.index``, Volcano's device ID; one for a share).
    None for every other pod: whole-card pods take any untouched devices."""


class RepackPlan(KubeModel):
    """Which nodes are vacated and where each moved pod goes. Sorted, so equal plans compare equal."""

    moves: tuple[PodMove, ...] = ()
    freed_nodes: tuple[str, ...] = ()

    @classmethod
    def build(cls, moves: list[PodMove], freed: list[str]) -> RepackPlan:
        return cls(moves=tuple(sorted(moves, key=lambda m: m.pod)), freed_nodes=tuple(sorted(freed)))


class SolverRecord(KubeModel):
    """How the plan was found: status OPTIMAL | FEASIBLE | FALLBACK (and HEURISTIC for greedy)."""

    name: str
    status: str
    freed_nodes_bound: int | None = None
    objective: int | None = None
    """The integer-scaled weighted disruption (see solvers/repack/exact/model.py), not comparable across runs."""
    best_bound: int | None = None
    gap_percent: float | None = None
    wall_seconds: float | None = None
    limit_exceeded_seconds: float | None = None
    """How far past ``--time-limit`` planning ran (on the run's clock: wall-clock seconds, or work with
    ``--deterministic``), when it did: auto's greedy-fast always runs to its end, and a slow machine gives
    a later answer rather than none. Absent when the limit held."""


# ---- the status we emit ---------------------------------------------------------------------------

class Condition(KubeModel):
    """metav1.Condition's shape; the two times are set only where a status is written to a cluster."""

    type: str
    status: str
    reason: str
    message: str
    last_transition_time: str | None = None
    observed_generation: int | None = None


class ResolvedScope(KubeModel):
    pod_group_count: int
    node_count: int


class HyperNodeTierOut(KubeModel):
    """Per HyperNode tier (of those enclosing a provider of R): how many there are, how many are free of R
    now and after the plan (issue 15 §3)."""

    tier: int
    hyper_nodes: int
    free_before: int
    free_after: int


class FreedGpusOut(KubeModel):
    """Where a ``freeGpus`` goal's GPUs are free after the plan: the node, its GPU model, and the indices of its
    devices no pod touches then (at least the goal's count; empty when the goal is not met)."""

    node: str
    model: str
    devices: tuple[int, ...]


class Summary(KubeModel):
    frag_before_percent: int
    frag_after_percent: int
    freed_node_count: int
    moved_card_count: int | str
    resolved_scope: ResolvedScope
    provider_node_count: int
    occupied_nodes_before: int
    occupied_nodes_after: int
    theoretical_min_nodes: int
    theoretical_min_proven: bool
    hyper_node_tiers: tuple[HyperNodeTierOut, ...] | None = None
    """When the snapshot has HyperNodes (issue 15 §3; absent otherwise, as the seed's status)."""
    freed_gpus: FreedGpusOut | None = None
    """With a ``freeGpus`` goal: the node and the devices left whole for it (absent otherwise)."""
    pending_by_fragmentation: int | None = None
    """When gangs requesting R are pending: those whose minimum fits the free R in total and their quota but
    that Volcano's allocate cannot place now (``optplan frag --pending``); absent otherwise."""


class Owner(KubeModel):
    api_version: str
    kind: str
    name: str


class PodMoveOut(KubeModel):
    name: str
    from_node: str
    to_node: str
    cards: int | str
    to_devices: tuple[int, ...] | None = None
    """``toDevices``: a moved GPU share's devices on ``toNode`` (``PodMove.to_devices``); absent otherwise."""


class Footprint(KubeModel):
    """What the workload's restart policy restarts in one PodGroup when the plan moves some of its pods
    (seed 000, 工作负载驱逐与重建机制): present only when that is more than the moved pods."""

    policy: str
    """RestartJob | RestartTask (a VCJob's PodEvicted policy) | ServingGroupRecreate | RoleRecreate (a
    ModelServing's recoveryPolicy)."""
    pods: int
    """Pods that restart, the moved ones included."""
    cards: int | str
    """Units of the target resource those pods hold."""
    pod_names: tuple[str, ...] = ()
    """Pods that restart although the plan does not move them, sorted."""


class MoveOut(KubeModel):
    namespace: str
    pod_group_name: str
    owner: Owner | None = None
    cards: int | str
    pods: tuple[PodMoveOut, ...]
    footprint: Footprint | None = None


class DisruptionOut(KubeModel):
    """The five seed dimensions of the whole plan (raw, not normalised)."""

    affected_pod_groups: int
    pod_groups_below_min_available: int
    affected_cards: int | str
    moved_cards: int | str
    moved_pods: int
    topology_widening: int = 0


# ---- the disruption dimensions and their weights (written once) ----------------------------------

@dataclass(frozen=True)
class Dimension:
    """One disruption dimension: the seed's five (seed 000, 多维中断影响评分) and topology widening."""

    key: str
    """camelCase: the status' ``disruption`` field and the plan server's ``weights`` key."""
    field: str
    """snake_case: the ``Weights`` field (and the planners' ``Disruption`` field)."""
    default: float
    """Its default weight."""
    help: str
    """What one unit of it is, for people (CLI help, the plan server's OpenAPI schema)."""
    cards: bool = False
    """Counted in cards of the target resource (milli-units inside the planners)."""


DIMENSIONS: tuple[Dimension, ...] = (
    Dimension("affectedPodGroups", "affected_pod_groups", 1.0, "PodGroups with a restarted pod"),
    Dimension("podGroupsBelowMinAvailable", "below_min_available", 0.8,
              "PodGroups whose restarts take them below minAvailable"),
    Dimension("affectedCards", "affected_cards", 0.6,
              "cards of the restarted pods (all of a PodGroup's cards when it goes below minAvailable)", cards=True),
    Dimension("movedCards", "moved_cards", 0.3, "cards of the moved pods", cards=True),
    Dimension("movedPods", "moved_pods", 0.1, "moved pods"),
    Dimension("topologyWidening", "topology_widening", 0.5,
              "tiers by which a soft-topology PodGroup's enclosing HyperNode widens"),
)
"""The disruption dimensions in their one order (``Weights``' fields, ``--weights W1,...,W6``), with their
default weights: the CLI's help, the plan server's schema and the planners all read this table."""

_DEFAULT = {d.field: d.default for d in DIMENSIONS}


@dataclass(frozen=True)
class Weights:
    """A weight per disruption dimension, in ``DIMENSIONS``' order; defaults from that table."""

    affected_pod_groups: float = _DEFAULT["affected_pod_groups"]
    below_min_available: float = _DEFAULT["below_min_available"]
    affected_cards: float = _DEFAULT["affected_cards"]
    moved_cards: float = _DEFAULT["moved_cards"]
    moved_pods: float = _DEFAULT["moved_pods"]
    topology_widening: float = _DEFAULT["topology_widening"]

    def as_tuple(self) -> tuple[float, float, float, float, float, float]:
        return (self.affected_pod_groups, self.below_min_available, self.affected_cards,
                self.moved_cards, self.moved_pods, self.topology_widening)


class PlanOut(KubeModel):
    summary: Summary
    moves: tuple[MoveOut, ...] = ()
    freed_nodes: tuple[str, ...] = ()
    disruption: DisruptionOut
    solver: SolverRecord


class RepackRunStatus(KubeModel):
    phase: str
    conditions: tuple[Condition, ...]
    plan: PlanOut
