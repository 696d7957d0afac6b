"""Queue placement plans (``optplan place``): where the pods of pending VCJobs would go.

The wire shape, read by other tools (camelCase, ``hyperNode``/``tier`` null when the job has no
network topology constraint)::

    {"jobs": [{"namespace", "name", "queue", "admitted", "reason", "hyperNode", "tier",
               "bindings": [{"task", "index", "node", "pod"?, "devices"?}],
               "victims": [{"namespace", "name", "node", "reason": "preempt" | "reclaim"}],
               "greedyVictims": [...]  # only when the optimal victims differ from the greedy's
              }],
     "solver": {...as in Repack...}}

``task`` is the VCJob task name and ``index`` the replica index: the pod Volcano's job controller
names ``<job>-<task>-<index>``. A bare PodGroup's job (its pods made by another controller or a user)
names each pod in ``"pod"``, with ``task`` its ``volcano.sh/task-spec`` ("" without one). ``"devices"``: the GPU
devices a pod takes on a node that lists them (device indices), where the plan names them (the greedy's).
A soft-topology job spread over the whole cluster (no HyperNode holds it) has ``hyperNode`` null and
``tier`` one above the highest tier (the virtual root).

Binpack weights (Volcano's binpack plugin arguments) live here as data, so that adapters can build
them from flags and solvers read them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

from optplan.models.repack import SolverRecord
from optplan.models.selectors import KubeModel


class Binding(KubeModel):
    task: str
    index: int = Field(ge=0)
    node: str
    pod: str | None = None
    """The pod's name when the job is a bare PodGroup's (its pods exist, named as they are); absent from the wire
    shape for a VCJob's replica."""
    devices: tuple[int, ...] | None = None
    """The GPU devices the pod takes on its node (device indices, as the node registers them), when the node lists
    devices and the pod asks for GPUs; absent from the wire shape otherwise (a plan that does not name them, the
    exact model's: its pods take devices by the configuration's device order, in plan order)."""

    def pod_name(self, job: str) -> str:
        """The pod: ``pod`` when given, else the one Volcano's job controller creates for this replica."""
        return self.pod if self.pod is not None else f"{job}-{self.task}-{self.index}"


VictimReason = Literal["preempt", "reclaim", "gangpreempt", "gangreclaim"]
"""The action that evicts a victim: Volcano's preempt or reclaim, or their gang-aware twins."""


class Victim(KubeModel):
    namespace: str
    name: str
    node: str
    reason: VictimReason


CYCLE_STEPS = 10
"""``JobPlacement.step`` of a job decided in scheduling cycle k: ``CYCLE_STEPS`` × k + its pass."""


class JobPlacement(KubeModel):
    namespace: str
    name: str
    queue: str
    admitted: bool
    reason: str
    hyper_node: str | None = None
    tier: int | None = None
    bindings: tuple[Binding, ...] = ()
    victims: tuple[Victim, ...] = ()
    greedy_victims: tuple[Victim, ...] | None = None
    """Only when the exact model's victims differ from the greedy's (Volcano's) set: the greedy's, for
    comparison; absent from the wire shape otherwise."""
    approval_required: str | None = None
    """Safe preemption's approval gate: why this job's evictions wait for a person's approval (absent from
    the wire shape when no approval is needed)."""
    after_evictions: bool = Field(default=False, exclude=True)
    """Placed after the evictions of the jobs before it — by the greedy's preempt/reclaim pass, or as a
    late job of the exact model — (not on the wire): the validator replays jobs in this order."""
    step: int = Field(default=0, exclude=True)
    """Among the jobs placed after evictions, when the greedy decided this one (not on the wire): its
    preempt pass (1) before its reclaim pass (2), Volcano's actions; over scheduling cycles ``CYCLE_STEPS``
    × cycle + pass (a job not admitted, at the step of its last evictions, may then keep victims whose room
    the next cycle gave to other jobs). The validator replays by it, then in plan order (0, the exact
    model's: plan order alone)."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


class PlacementPlan(KubeModel):
    """One entry per job, in the order the jobs were considered (Volcano's job order)."""

    jobs: tuple[JobPlacement, ...] = ()
    solver: SolverRecord

    def job(self, key: str) -> JobPlacement:
        for j in self.jobs:
            if j.key == key:
                return j
        raise KeyError(key)

    def to_dict(self, *, timings: bool = False) -> dict[str, Any]:
        """The wire shape: every job field present (nulls kept), solver fields only when set;
        ``wallSeconds`` only with ``timings`` so that the same input gives the same bytes."""
        jobs = [j.model_dump(mode="json", by_alias=True) for j in self.jobs]
        for j in jobs:
            for b in j["bindings"]:
                if b["pod"] is None:
                    del b["pod"]
                if b["devices"] is None:
                    del b["devices"]
            if j["greedyVictims"] is None:
                del j["greedyVictims"]
            if j["approvalRequired"] is None:
                del j["approvalRequired"]
        solver = self.solver.model_dump(mode="json", by_alias=True, exclude_none=True)
        if not timings:
            solver.pop("wallSeconds", None)
        return {"jobs": jobs, "solver": solver}


@dataclass(frozen=True)
class PlacementResult:
    """What a placement planner returns (``core.planner.Solved``): the plan, whose ``solver`` is its record."""

    plan: PlacementPlan

    @property
    def record(self) -> SolverRecord:
        return self.plan.solver

    def with_record(self, record: SolverRecord) -> PlacementResult:
        return PlacementResult(self.plan.model_copy(update={"solver": record}))


class BinpackWeights(KubeModel):
    """Volcano's binpack plugin arguments: ``binpack.weight``, ``binpack.cpu``, ``binpack.memory`` and
    ``binpack.resources.<name>`` for the extra resources listed in ``binpack.resources`` (default 1 each).
    Seed 002 §7 uses weight 10, nvidia.com/gpu 10, cpu 5, memory 2."""

    weight: int = Field(default=1, ge=0)
    cpu: int = Field(default=1, ge=0)
    memory: int = Field(default=1, ge=0)
    resources: dict[str, int] = Field(default_factory=dict)
    """Extra resource -> weight."""

    @field_validator("resources")
    @classmethod
    def _non_negative(cls, v: dict[str, int]) -> dict[str, int]:
        for name, w in v.items():
            if w < 0:
                raise ValueError(f"weight of {name} is negative")
        return v

    def of(self) -> dict[str, int]:
        """Resource -> weight for every resource the plugin scores (cpu and memory always)."""
        return {"cpu": self.cpu, "memory": self.memory, **self.resources}


class PreemptionLevel(KubeModel):
    """One grade of graded preemption: jobs whose priority is at least ``min_priority`` (and below the next
    grade's) are at this level."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True, extra="forbid")

    name: str
    min_priority: int


SEED_LEVELS = (PreemptionLevel(name="Critical", min_priority=1000), PreemptionLevel(name="High", min_priority=800),
               PreemptionLevel(name="Medium", min_priority=100), PreemptionLevel(name="Low", min_priority=-(2 ** 31)))
"""Seed 004's grades Critical > High > Medium > Low, from seed 002's PriorityClasses (critical 1000, large
800, normal 100, debug and spot 50)."""


class SafePreemption(KubeModel):
    """Seed 004's four rules against avalanche eviction, each off unless set (``seed()``: all on, with the
    seed's values). Read by placement's greedy, its exact model and its validator alike
    (``solvers/placement/safety.py``)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True, extra="forbid")

    pdb: bool = False
    """No victim whose eviction would break its PodDisruptionBudget (Volcano's ``pdb`` plugin, counted over
    the whole plan with the Eviction API's rule for pods that are not Ready)."""
    cooldown_seconds: int | None = Field(default=None, ge=0)
    """At most one evicting job per queue within this window (seed: 300)."""
    last_preemption: dict[str, str] = Field(default_factory=dict)
    """Queue -> RFC 3339 time of its last preemption; else the Queue's ``optplan.io/last-preemption-time``
    annotation."""
    levels: tuple[PreemptionLevel, ...] | None = None
    """Graded preemption: the grades, highest first; None: off."""
    level_gap: int = Field(default=2, ge=1)
    """A grade preempts only grades at least this many below it (seed: 2, Critical may take Medium, not High)."""
    approval_weight: int | None = None
    """Evictions for a job whose queue's weight is above this wait for approval (seed: 50); None: off."""
    approval_timeout_seconds: int = Field(default=600, ge=1)
    """An approval asked for (the job's ``optplan.io/preemption-requested`` time) and not given within this
    long is cancelled: the job then evicts nothing (the seed names no value; 10 minutes here)."""

    @field_validator("levels")
    @classmethod
    def _ordered(cls, v: tuple[PreemptionLevel, ...] | None) -> tuple[PreemptionLevel, ...] | None:
        if v is not None:
            if not v:
                raise ValueError("levels must name at least one grade")
            mins = [lv.min_priority for lv in v]
            if mins != sorted(mins, reverse=True) or len(set(mins)) != len(mins):
                raise ValueError("levels go highest first, each minPriority strictly below the one before")
            if len({lv.name for lv in v}) != len(v):
                raise ValueError("level names must differ")
        return v

    @classmethod
    def seed(cls) -> SafePreemption:
        """Seed 004 §5.3 as written: PDBs checked, a 300 s cooldown per queue, grades two apart, approval above
        weight 50."""
        return cls(pdb=True, cooldown_seconds=300, levels=SEED_LEVELS, level_gap=2, approval_weight=50)

    @property
    def on(self) -> bool:
        return self.pdb or self.cooldown_seconds is not None or self.levels is not None or \
            self.approval_weight is not None
