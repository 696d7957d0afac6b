"""Repack with a purpose (issue 15): the optional goals of a RepackRun beyond the seed's vacate goal, and
the plan that meets them.

Spec (all optional; without them a RepackRun is the seed's):

    spec:
      goals:
      - resource: nvidia.com/gpu
        admit:                       # make room for pending gangs, by moving running pods
          jobs: [team-a/llm-64]      # VCJobs or PodGroups, namespace/name
          selector: {matchLabels: {optplan.io/admit: "true"}}   # pending VCJobs with these labels
          queues: [research]         # every gang pending in these queues
        freeHyperNodes:              # leave whole HyperNodes of a tier empty of the resource
          tier: 1                    # or tierName: <the tier's name>
          count: 2
          required: false            # true: RequiredNodeBlocksNotMet when impossible
      networkTopology:               # another implementation's names for freeHyperNodes with required: true
        tier: 1                      # or tierName, or hyperNodeTier / hyperNodeTierName (the same, renamed)
        requiredNodeBlocks: 2        # blocks to free: whole HyperNodes of the tier
        nodeBlockSize: 8             # optional: must be the node count of the tier's HyperNodes
        mode: binpack                # optional, binpack | spread: one block per HyperNode plans alike

The spec classes (``AdmitGoal``, ``FreeHyperNodesGoal``, ``NetworkTopologyGoal``) live in models/repack.py,
where ``Goal`` and ``RepackRunSpec`` name them, and are re-exported here.

A plan for these goals (``GoalPlan``) moves running pods (never deletes them: every moved pod is re-placed)
so that each admitted gang can be placed whole, and each freed HyperNode is empty of the resource. The
gangs' placements are a forecast (where Volcano's allocate would be able to put them), not bindings.
"""

from __future__ import annotations

from pydantic import Field

from optplan.models.placement import Binding
from optplan.models.repack import AdmitGoal as AdmitGoal
from optplan.models.repack import FreeHyperNodesGoal as FreeHyperNodesGoal
from optplan.models.repack import HyperNodeTierOut as HyperNodeTierOut
from optplan.models.repack import NetworkTopologyGoal as NetworkTopologyGoal
from optplan.models.repack import PlanOut, PodMove, RepackPlan, RepackRunStatus
from optplan.models.selectors import KubeModel

# Condition reasons of the goals (type GOALS_MET).
GOALS_MET = "GoalsMet"
NOT_ADMITTABLE = "PendingJobNotAdmittable"
BLOCKS_NOT_MET = "RequiredNodeBlocksNotMet"

# Why a gang is not admitted (``Admission.cause``): the four, and "search" when a planner
# found no way although none of those four is proven.
CAPACITY = "capacity"
"""The gang fits not even on a cluster emptied of every other pod (within scope)."""
QUOTA = "quota"
"""Its queue (or an ancestor) has no room for its minimum, or is closed."""
TOPOLOGY = "topology"
"""No HyperNode its network topology allows can hold it, even emptied."""
BUDGET = "budget"
"""Room could be made, but not within maxPerRun, the PDBs or the scope."""
SEARCH = "search"
"""The planner found no plan that admits it (none of the above proven)."""
HIGHER_GOAL = "higher-goal"
"""Admitting it would cost a gang of higher priority (or a required HyperNode) its place."""


# ---- the plan ------------------------------------------------------------------------------------

class Admission(KubeModel):
    """One named gang: admitted (with the forecast of where its pods land) or not (with why)."""

    namespace: str
    name: str
    queue: str
    priority: int = 0
    admitted: bool
    cause: str | None = None
    """When not admitted: CAPACITY | QUOTA | TOPOLOGY | BUDGET | SEARCH | HIGHER_GOAL."""
    reason: str = ""
    """For people: where it lands, or why it cannot."""
    hyper_node: str | None = None
    tier: int | None = None
    bindings: tuple[Binding, ...] = ()
    """The forecast: each pod of the gang's minimum (task, replica index) and its node, sorted."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


class MoveReason(KubeModel):
    """Why one move is in the plan."""

    pod: str
    """namespace/name."""
    reason: str
    """E.g. ``makes room for team-a/llm-64 on node-7`` or ``frees HyperNode s3``."""


class GoalPlan(KubeModel):
    """The moves (a Repack plan: ``freed_nodes`` are the nodes the moves leave without the resource), the
    gangs' admissions (every named gang, by key) and the freed HyperNodes (sorted)."""

    repack: RepackPlan = Field(default_factory=RepackPlan)
    admissions: tuple[Admission, ...] = ()
    freed_hyper_nodes: tuple[str, ...] = ()
    why: tuple[MoveReason, ...] = ()
    """Per moved pod, why (sorted by pod)."""

    @classmethod
    def build(cls, moves: list[PodMove], freed: list[str], admissions: list[Admission],
              freed_hyper_nodes: list[str], why: dict[str, str]) -> GoalPlan:
        return cls(repack=RepackPlan.build(moves, freed),
                   admissions=tuple(sorted(admissions, key=lambda a: a.key)),
                   freed_hyper_nodes=tuple(sorted(freed_hyper_nodes)),
                   why=tuple(MoveReason(pod=p, reason=r) for p, r in sorted(why.items())))

    def admitted(self) -> list[Admission]:
        return [a for a in self.admissions if a.admitted]


# ---- the status (added to RepackRunStatus.plan when goals are given) -------------------------------

class GoalsOut(KubeModel):
    """``status.plan.goals``: the admissions, the freed HyperNodes, why each move, and the counts."""

    admitted_job_count: int
    not_admitted_job_count: int
    admissions: tuple[Admission, ...] = ()
    freed_hyper_nodes: tuple[str, ...] = ()
    freed_hyper_node_count: int = 0
    move_reasons: tuple[MoveReason, ...] = ()
    reserved_nodes: tuple[str, ...] = ()
    """Nodes the plan makes room on or frees (the moves' sources, the forecast's nodes, the freed HyperNodes'
    nodes), sorted: an Execute never nominates a replacement there."""


class GoalPlanOut(PlanOut):
    goals: GoalsOut


class GoalRunStatus(RepackRunStatus):
    """A RepackRun's status when it has goals: the seed's, with ``plan.goals`` added."""

    plan: GoalPlanOut
