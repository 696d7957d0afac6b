"""Queue placement plans (``optplan place``): where the pods of pending VCJobs would go.

The wire shape, read by other tools (camelCase, ``hyperNode``/``tier`` null when the job has no
network topology constraint)::

    {"jobs": [{"namespace", "name", "queue", "admitted", "reason", "hyperNode", "tier",
               "bindings": [{"task", "index", "node"}],
               "victims": [{"namespace", "name", "node", "reason": "preempt" | "reclaim"}],
               "greedyVictims": [...]  # only when the optimal victims differ from the greedy's
              }],
     "solver": {...as in Repack...}}

``task`` is the VCJob task name and ``index`` the replica index: the pod Volcano's job controller
names ``<job>-<task>-<index>``. A soft-topology job spread over the whole cluster (no HyperNode holds
it) has ``hyperNode`` null and ``tier`` one above the highest tier (the virtual root).

Binpack weights (Volcano's binpack plugin arguments) live here as data, so that adapters can build
them from flags and solvers read them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, field_validator

from optplan.models.repack import SolverRecord
from optplan.models.selectors import KubeModel


class Binding(KubeModel):
    task: str
    index: int = Field(ge=0)
    node: str

    def pod_name(self, job: str) -> str:
        """The pod Volcano's job controller creates for this replica."""
        return f"{job}-{self.task}-{self.index}"


class Victim(KubeModel):
    namespace: str
    name: str
    node: str
    reason: Literal["preempt", "reclaim"]


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
    after_evictions: bool = Field(default=False, exclude=True)
    """Placed after the evictions of the jobs before it — by the greedy's preempt/reclaim pass, or as a
    late job of the exact model — (not on the wire): the validator replays jobs in this order."""

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
            if j["greedyVictims"] is None:
                del j["greedyVictims"]
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
