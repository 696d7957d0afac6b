"""Execute-time records of a RepackRun (seed 000, 通过nominatedNodeName提供候选节点建议 and
从方案评估到结果验证形成闭环): what the plan said, the per-pod relocations a controller writes,
and the answers of the two Execute-time calls, ``nominate`` and ``verify``.

Lenient on input (a controller may write fewer fields than we emit); unknown fields are ignored.
"""

from __future__ import annotations

from pydantic import Field

from optplan.models.repack import Condition, Owner
from optplan.models.selectors import KubeModel


class PlannedPod(KubeModel):
    name: str
    from_node: str
    to_node: str
    cards: int | str | None = None
    to_devices: tuple[int, ...] | None = None
    """``toDevices``: a moved share's devices on ``to_node`` by index (Volcano's device ID; one for a share);
    None for a whole-card move, or a plan that names none."""


class PlannedGroup(KubeModel):
    """One entry of ``status.plan.moves``: the pods of one PodGroup that the plan moves."""

    namespace: str
    pod_group_name: str = ""
    owner: Owner | None = None
    pods: tuple[PlannedPod, ...] = ()


class ExecuteAdmission(KubeModel):
    namespace: str
    name: str
    admitted: bool


class ExecuteGoals(KubeModel):
    """The part of ``status.plan.goals`` (a run with admit / freeHyperNodes goals) an Execute reads."""

    reserved_nodes: tuple[str, ...] = ()
    admissions: tuple[ExecuteAdmission, ...] = ()


class ExecutePlan(KubeModel):
    freed_nodes: tuple[str, ...] = ()
    moves: tuple[PlannedGroup, ...] = ()
    goals: ExecuteGoals | None = None


class EvictionState(KubeModel):
    phase: str | None = None
    """Pending | Evicting (journaled before the Eviction call) | Evicted | Rejected | Skipped."""
    message: str | None = None
    """Why: the API server's refusal, or how the victim was found gone."""
    start_time: str | None = None
    """When the first Eviction was asked for (the eviction deadline counts from it)."""
    completion_time: str | None = None
    """When the eviction was accepted, refused for good, or skipped (the replacement deadline counts from it)."""


class PlacementState(KubeModel):
    phase: str | None = None
    """Pending | Nominated | Scheduling | Bound | BoundElsewhere | TimedOut | Skipped."""
    message: str | None = None
    """Why the node was (or could not be) suggested, or what timed out."""
    selected_node_name: str | None = None
    """The node written into the replacement's ``status.nominatedNodeName``."""
    actual_node_name: str | None = None
    """The node the scheduler bound the replacement to."""
    actual_device: str | None = None
    """The device the device-share plugin gave the replacement (UUID, else index), when it holds a share."""
    replacement_pod_name: str | None = None


class Relocation(KubeModel):
    """One evicted pod and where its replacement went (``status.relocations[]``)."""

    namespace: str
    victim_pod_name: str
    victim_pod_uid: str | None = Field(default=None, alias="victimPodUID")
    """The victim's UID when the controller recorded it: tells a replacement that reuses the name apart."""
    planned_node_name: str | None = None
    planned_device: str | None = None
    """The share's planned device on the planned node (UUID, else index), when the plan names one."""
    replacement_pod_group_name: str | None = None
    eviction: EvictionState | None = None
    placement: PlacementState | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.victim_pod_name}"


class ExecuteStatus(KubeModel):
    """The parts of an Execute run's status that nominate and verify read."""

    phase: str | None = None
    plan: ExecutePlan = Field(default_factory=ExecutePlan)
    relocations: tuple[Relocation, ...] = ()


class Nomination(KubeModel):
    """The answer of ``nominate``: the node for ``status.nominatedNodeName``, or none."""

    node_name: str | None
    planned_node_name: str | None = None
    planned: bool = False
    """True when the planned node still fits and is the one nominated."""
    reason: str
    feasible_node_count: int = 0
    """Nodes that would take the replacement without undoing the plan (the planned one included)."""


class ExecutionResult(KubeModel):
    """``status.result``: what Execute achieved, measured on the snapshot after it."""

    frag_after_percent: int
    freed_node_count: int
    moved_card_count: int | str
    metrics_verified: bool


class Verification(KubeModel):
    """The answer of ``verify``: the result, the final condition and the completed relocations."""

    phase: str
    result: ExecutionResult
    conditions: tuple[Condition, ...]
    relocations: tuple[Relocation, ...]
    freed_nodes: tuple[str, ...] = ()
    """Planned freed nodes that hold no pod requesting the target resource any more."""
    still_occupied: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    """Planned freed nodes that are not free, with the pods that hold them."""
