"""A replay's Repack policy as data (``ReplayConfig``), checked when built: an unknown policy or planner,
a negative interval or a scope the RepackRun model refuses is an ``InputError`` naming the field.

Policies (``POLICIES``):

- ``none``: Repack never runs (the baseline every other policy is compared with).
- ``interval``: a Repack run every ``interval`` seconds of trace time (at interval, 2 × interval, ...).
- ``pending``: a Repack run when a gang has been pending by fragmentation for ``pending_after`` seconds:
  the first waiting gang of its shape and size (the one allocate tries first) whose minimum has fitted
  the free GPUs in total all that time, confirmed by placement's verdict
  (``optplan.solvers.placement.pending``); at most one such run per ``interval`` (the cooldown). With
  ``pending_cards`` N, only gangs of at least N cards in all are watched (a trigger on large gangs: the
  smaller ones wait for departures as under ``none``).

Planners (``PLANNERS``): optplan's ``greedy`` and ``auto`` (through ``plan_repack``: every plan validated)
and the peers ``karpenter``, ``cluster-autoscaler`` and ``descheduler`` (``baselines.repack``: their plans
follow their own rules; the breaks of optplan's are counted, as ``optplan bench`` counts them).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from optplan.errors import InputError
from optplan.models.placement import BinpackWeights
from optplan.models.repack import RepackRun
from optplan.solvers.core import registry

POLICIES = ("none", "interval", "pending", "oracle", "nobinpack")
STATIC = ("none", "oracle", "nobinpack")
PLANNERS = ("greedy", "auto", *sorted(registry.names(registry.BASELINES)))
RESTARTS = ("RestartJob", "RestartTask", "ServingGroupRecreate", "pod", "gang")
"""The workloads' restart policy, what a move restarts (Repack's rule, ``repack.rules.restart_unit``, on
the VCJob the snapshot gives each gang): ``RestartJob`` (the default: a distributed training job restarts
whole) and ``RestartTask`` (a gang is one task: the same pods) restart every running pod of the moved pod's
gang; so does ``ServingGroupRecreate`` (each gang a ModelServing's ServingGroup); ``pod`` (no policy)
the moved pod alone. ``gang`` is the former name of ``RestartJob``."""
RESOURCE = "nvidia.com/gpu"
RUN_NAME = "replay"


@dataclass(frozen=True)
class ReplayConfig:
    policy: str = "none"
    interval: float = 3600.0
    """Seconds between ``interval`` runs; the cooldown of ``pending`` runs."""
    pending_after: float = 1800.0
    """W: seconds a gang waits by fragmentation before ``pending`` runs Repack."""
    pending_cards: int = 0
    """``pending``: only gangs of at least this many cards in all (``TraceGang.cards``) trigger it; 0: any."""
    planner: str = "greedy"
    scope: Mapping[str, Any] = field(default_factory=dict)
    """The RepackRun's ``spec.scope`` (podGroups / nodes: include, exclude, names, selector)."""
    max_per_run: Mapping[str, Any] = field(default_factory=dict)
    """The RepackRun's ``spec.maxPerRun`` (``podGroups``, ``resources: {nvidia.com/gpu: N}``)."""
    restart_delay: float = 300.0
    """Restore time: seconds a restarted pod holds its node before it works again."""
    restart: str = "RestartJob"
    checkpoint: float | None = 3600.0
    """Seconds of work between a pod's checkpoints: a restart loses the work since its last one (None:
    no checkpoint, all its work is lost; 0: a checkpoint at the eviction instant, nothing lost)."""
    warmup: float = 0.0
    """Seconds after the first arrival before the measured window starts."""
    time_limit: float = 10.0
    """Limit of each plan, in deterministic work (``PlanOptions(deterministic=True)``)."""
    seed: int = 0
    horizon: float | None = None
    """Where the replay stops, in trace seconds (from the trace's time 0); None: its last event (the last
    pod leaves; gangs that never fit stay censored)."""
    weights: BinpackWeights = field(default_factory=BinpackWeights)
    """Volcano's binpack weights (default Volcano's own)."""

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise InputError(f"unknown policy {self.policy!r} (one of {', '.join(POLICIES)})", field="policy")
        if self.planner not in PLANNERS:
            raise InputError(f"unknown planner {self.planner!r} (one of {', '.join(PLANNERS)})", field="planner")
        if self.restart not in RESTARTS:
            raise InputError(f"unknown restart {self.restart!r} (one of {', '.join(RESTARTS)})", field="restart")
        for name in ("interval", "pending_after", "time_limit"):
            v = getattr(self, name)
            if not (isinstance(v, int | float) and math.isfinite(v) and v > 0):
                raise InputError(f"must be a positive number of seconds, got {v!r}", field=name)
        if self.restart == "gang":
            object.__setattr__(self, "restart", "RestartJob")
        for name in ("restart_delay", "warmup"):
            v = getattr(self, name)
            if not (isinstance(v, int | float) and math.isfinite(v) and v >= 0):
                raise InputError(f"must be a number of seconds >= 0, got {v!r}", field=name)
        if self.checkpoint is not None and not (math.isfinite(self.checkpoint) and self.checkpoint >= 0):
            raise InputError(f"must be a number of seconds >= 0, got {self.checkpoint!r}", field="checkpoint")
        if self.horizon is not None and not (math.isfinite(self.horizon) and self.horizon > 0):
            raise InputError(f"must be a positive number of seconds, got {self.horizon!r}", field="horizon")
        if isinstance(self.pending_cards, bool) or not isinstance(self.pending_cards, int) or self.pending_cards < 0:
            raise InputError(f"must be a whole number of cards >= 0, got {self.pending_cards!r}", field="pending_cards")
        if not 0 <= self.seed <= 2**31 - 1:
            raise InputError(f"must be within 0..2^31-1, got {self.seed}", field="seed")
        self.repack_run()  # the scope and budgets are checked by the RepackRun model now, not mid-replay

    def repack_run(self) -> RepackRun:
        """The RepackRun every Repack of this replay plans (DryRun, target nvidia.com/gpu)."""
        spec = {"mode": "DryRun", "goals": [{"resource": RESOURCE}], "scope": dict(self.scope),
                "maxPerRun": dict(self.max_per_run)}
        try:
            return RepackRun.model_validate({"name": RUN_NAME, "spec": spec})
        except ValidationError as e:
            err = e.errors()[0]
            where = ".".join(str(p) for p in err["loc"])
            raise InputError(err["msg"], field=where) from None

    def label(self) -> str:
        """A short name for tables: ``none``, ``interval 60m greedy``, ``pending 30m auto``."""
        if self.policy in STATIC:
            return self.policy
        every = self.interval if self.policy == "interval" else self.pending_after
        budget = f" {budget_label(self.max_per_run)}" if self.max_per_run else ""
        large = f" {self.pending_cards}+ cards" if self.policy == "pending" and self.pending_cards else ""
        return f"{self.policy} {every / 60:g}m{large} {self.planner}{budget}"


def budget_label(max_per_run: Mapping[str, Any]) -> str:
    """``pg=10,gpu=64`` for ``{podGroups: 10, resources: {nvidia.com/gpu: 64}}``; ``unlimited`` for {}."""
    parts = []
    if max_per_run.get("podGroups") is not None:
        parts.append(f"pg={max_per_run['podGroups']}")
    for r, v in sorted(dict(max_per_run.get("resources") or {}).items()):
        parts.append(f"{'gpu' if r == RESOURCE else r}={v}")
    return ",".join(parts) or "unlimited"
