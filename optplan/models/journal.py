"""A RepackRun's status as its controller reads and writes it: the phase, the conditions, the plan and the
relocation journal (read: ``RunStatus``, and ``RunHead`` for the phase and times alone), and the changes
one journal step makes (written: ``StatusChange``, ``RelocationChange``).

Read leniently where the CRD is (a condition without a message, a relocation not yet evicted); unknown
fields are not modelled here, and need not be: a write merges its change into the status as stored, so
what other writers (or newer versions) added is kept (``optplan.controller.status``). A change names
only the fields optplan owns; its wire form (``fields``) keeps a fixed order of keys, the order the
controller has always written them, so the patches stay byte-identical.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from optplan.models.execute import (
    EvictionState,
    ExecuteStatus,
    ExecutionResult,
    PlacementState,
    Relocation,
)
from optplan.models.repack import Condition
from optplan.models.selectors import KubeModel

# status.phase
PENDING = "Pending"
RUNNING = "Running"
SUCCEEDED = "Succeeded"
FAILED = "Failed"
FINISHED = frozenset({SUCCEEDED, FAILED})
PHASES = (PENDING, RUNNING, SUCCEEDED, FAILED)

# relocations[].eviction.phase
EV_PENDING = "Pending"  # planned, not asked yet
EV_EVICTING = "Evicting"  # journaled before the Eviction call: on restart, look at the pod
EV_EVICTED = "Evicted"  # the API accepted the eviction (or the victim was gone already)
EV_REJECTED = "Rejected"  # the API refused it until the eviction deadline (a PDB: 429), with its message
EV_SKIPPED = "Skipped"  # never asked: another pod of its node was rejected, so the node cannot be freed
EVICTION_PHASES = (EV_PENDING, EV_EVICTING, EV_EVICTED, EV_REJECTED, EV_SKIPPED)

# relocations[].placement.phase
PL_PENDING = "Pending"  # no replacement pod seen yet
PL_NOMINATED = "Nominated"  # the replacement's status.nominatedNodeName is selectedNodeName
PL_SCHEDULING = "Scheduling"  # a replacement exists; no node could be suggested, the scheduler decides
PL_BOUND = "Bound"  # bound to the planned node
PL_ELSEWHERE = "BoundElsewhere"  # bound to another node
PL_TIMED_OUT = "TimedOut"  # not bound within the replacement deadline
PL_SKIPPED = "Skipped"  # the victim was not evicted
PLACEMENT_PHASES = (PL_PENDING, PL_NOMINATED, PL_SCHEDULING, PL_BOUND, PL_ELSEWHERE, PL_TIMED_OUT, PL_SKIPPED)
PLACEMENT_DONE = frozenset({PL_BOUND, PL_ELSEWHERE, PL_TIMED_OUT, PL_SKIPPED})


# ---- read ------------------------------------------------------------------------------------------

class StatusCondition(Condition):
    """A condition as stored: metav1.Condition, whose message the CRD does not require."""

    message: str = ""


class JournalEntry(Relocation):
    """One ``status.relocations[]`` entry as the controller reads it, with its two phases defaulted."""

    @property
    def eviction_phase(self) -> str:
        return (self.eviction.phase if self.eviction is not None else None) or EV_PENDING

    @property
    def placement_phase(self) -> str:
        return (self.placement.phase if self.placement is not None else None) or PL_PENDING

    @property
    def evicted(self) -> bool:
        return self.eviction_phase == EV_EVICTED

    @property
    def refused(self) -> bool:
        """Rejected (the API refused it to the deadline) or Skipped (never asked)."""
        return self.eviction_phase in (EV_REJECTED, EV_SKIPPED)

    @property
    def settled(self) -> bool:
        """Nothing more will happen to it: refused, or evicted and its replacement placed or timed out."""
        return self.refused or (self.evicted and self.placement_phase in PLACEMENT_DONE)

    @property
    def evict_state(self) -> EvictionState:
        return self.eviction if self.eviction is not None else EvictionState()

    @property
    def place_state(self) -> PlacementState:
        return self.placement if self.placement is not None else PlacementState()


class RunHead(KubeModel):
    """The phase and the times of a run's status, read without the rest: all a finished run's pass needs (its
    TTL), so a journal another writer damaged after the end never holds the run."""

    phase: str | None = None
    start_time: str | None = None
    completion_time: str | None = None

    @property
    def finished(self) -> bool:
        return self.phase in FINISHED


class RunStatus(ExecuteStatus):
    """``status`` of a RepackRun, the parts its controller reads (``ExecuteStatus``, which nominate and verify
    read, and the conditions and times)."""

    conditions: tuple[StatusCondition, ...] = ()
    start_time: str | None = None
    completion_time: str | None = None
    relocations: tuple[JournalEntry, ...] = ()

    @property
    def finished(self) -> bool:
        return self.phase in FINISHED

    def condition(self, type_: str) -> StatusCondition | None:
        return next((c for c in self.conditions if c.type == type_), None)

    def entry(self, key: str) -> JournalEntry:
        """The journal entry of ``namespace/victimPodName`` (the first, should another writer repeat it)."""
        for r in self.relocations:
            if r.key == key:
                return r
        raise KeyError(key)

    def from_nodes(self) -> dict[str, str]:
        """``namespace/pod`` -> the node the plan moves it from."""
        return {f"{g.namespace}/{p.name}": p.from_node for g in self.plan.moves for p in g.pods}

    def pod_group_of(self, rel: Relocation) -> str:
        """The PodGroup the plan names for ``rel``'s victim ("" when none)."""
        for g in self.plan.moves:
            if g.namespace == rel.namespace and any(p.name == rel.victim_pod_name for p in g.pods):
                return g.pod_group_name
        return ""


# ---- written ---------------------------------------------------------------------------------------
# Each change dumps the fields it sets, in the order of its declaration (the wire order), nothing else.

class _Change(KubeModel):
    def fields(self) -> dict[str, Any]:
        """The fields set, as the CRD spells them, in declaration order."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class EvictionChange(_Change):
    phase: str | None = None
    start_time: str | None = None
    completion_time: str | None = None
    message: str | None = None


class PlacementChange(_Change):
    replacement_pod_name: str | None = None
    phase: str | None = None
    selected_node_name: str | None = None
    actual_node_name: str | None = None
    actual_device: str | None = None
    message: str | None = None


class RelocationChange(_Change):
    """A journal entry written: a new one (every field), or the fields an update sets (merged by key)."""

    namespace: str
    victim_pod_name: str
    victim_pod_uid: str | None = Field(default=None, alias="victimPodUID")
    planned_node_name: str | None = None
    planned_device: str | None = None
    eviction: EvictionChange | None = None
    placement: PlacementChange | None = None
    replacement_pod_group_name: str | None = None

    @classmethod
    def of(cls, rel: Relocation, **parts: Any) -> RelocationChange:
        """An update of ``rel`` (its key) setting ``parts``."""
        return cls(namespace=rel.namespace, victim_pod_name=rel.victim_pod_name, **parts)


class StatusChange(KubeModel):
    """What one journal step writes to ``status``; ``None``: left as stored."""

    phase: str | None = None
    start_time: str | None = None
    plan: dict[str, Any] | None = None
    """As ``optplan.adapters.output.status_dict`` writes a plan."""
    result: ExecutionResult | None = None
    relocations: tuple[RelocationChange, ...] | None = None
    conditions: tuple[Condition, ...] | None = None
    """Merged into the stored ones by type (``optplan.controller.status.merge_conditions``)."""
    completion_time: str | None = None

    def fields(self) -> dict[str, Any]:
        """The patch's fields before the merge, in wire order. A finishing write (a completionTime) names the
        start last: it only fills in a start the journal lacks (a DryRun), where a starting write opens with it."""
        out: dict[str, Any] = {}
        if self.phase is not None:
            out["phase"] = self.phase
        if self.start_time is not None and self.completion_time is None:
            out["startTime"] = self.start_time
        if self.plan is not None:
            out["plan"] = self.plan
        if self.result is not None:
            out["result"] = self.result.model_dump(by_alias=True, mode="json", exclude_none=True)
        if self.relocations is not None:
            out["relocations"] = [r.fields() for r in self.relocations]
        if self.conditions is not None:
            out["conditions"] = [c.model_dump(by_alias=True, mode="json", exclude_none=True) for c in self.conditions]
        if self.completion_time is not None:
            out["completionTime"] = self.completion_time
            if self.start_time is not None:
                out["startTime"] = self.start_time
        return out
