"""The placement family's entry: ``plan_placement`` runs the planner named in ``optplan.solvers.core.registry``
(greedy | cpsat | auto, each a ``core.planner.Planner`` on a ``Context``) and validates its plan. The greedy
(``GreedyPlacer``) is Volcano's actions (``allocate``, then ``evict``), the exact model ``cpsat.CpSatPlacer``
(imported only when asked for), ``AutoPlacer`` the two composed by ``core.planner.Auto``, the validator
``validate``; keeping the dispatch here keeps the imports one way (the package docstring lists the modules).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import astuple
from datetime import datetime

from optplan.errors import InputError
from optplan.models.placement import BinpackWeights, PlacementPlan, PlacementResult, SafePreemption
from optplan.models.queues import VCJob
from optplan.models.schedconf import SchedulerConf
from optplan.models.snapshot import Snapshot
from optplan.solvers.core import registry
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.core.planner import Auto, Planner
from optplan.solvers.placement.context import Context
from optplan.solvers.placement.cycles import greedy_cycles
from optplan.solvers.placement.gangevict import exact_declines
from optplan.solvers.placement.jobs import bound_pod
from optplan.solvers.placement.model import plan_key
from optplan.solvers.placement.nodeorder import NodeStart
from optplan.solvers.placement.safety import OFF, mark_approvals
from optplan.solvers.placement.validate import check_inputs, validate_placement
from optplan.solvers.quota.times import parse_now

FAMILY = "placement"
log = logging.getLogger(__name__)


class GreedyPlacer(Planner[Context, PlacementResult]):
    """Volcano's allocate, then its preempt and reclaim for the jobs that do not fit, cycle after cycle
    until one evicts nothing (``cycles``)."""

    name = "greedy"

    def plan(self, problem: Context, options: PlanOptions, hint: PlacementResult | None = None) -> PlacementResult:
        return PlacementResult(greedy_cycles(problem))


def rank(ctx: Context, result: PlacementResult) -> tuple[int, ...]:
    """auto's key: ``plan_key`` (lower is better) negated."""
    return tuple(-x for x in astuple(plan_key(ctx, result.plan)))


class AutoPlacer(Auto[Context, PlacementResult]):
    """The greedy, then CP-SAT hinted with its plan; the exact plan when ``plan_key`` ranks it strictly better,
    else the greedy's (a tie keeps Volcano's own choices; optimal when CP-SAT proved its equal). Under a
    configuration the exact model declines (``gangevict.exact_declines``: a gangreclaim the capacity plugin decides)
    the greedy's plan, status FALLBACK, and the reason logged."""

    ties_to_greedy = True

    def __init__(self) -> None:
        super().__init__(GreedyPlacer(), registry.load(FAMILY, "cpsat")(), rank)  # heavy backend, loaded here

    def plan(self, problem: Context, options: PlanOptions, hint: PlacementResult | None = None) -> PlacementResult:
        why = exact_declines(problem.scheduler)
        if why is None:
            return super().plan(problem, options, hint)
        t0 = time.perf_counter()
        log.warning("auto: %s: the greedy's plan is the answer", why)
        greedy = self.greedy.plan(problem, options)
        return self._named(greedy, greedy.record.model_copy(update={"status": "FALLBACK"}), t0)


def plan_placement(snap: Snapshot, jobs: Sequence[VCJob], solver: str = "auto",
                   options: PlanOptions | None = None, weights: BinpackWeights | None = None,
                   now: datetime | str | None = None, safety: SafePreemption | None = None,
                   scheduler: SchedulerConf | None = None, node_start: NodeStart = None,
                   tie_seed: int | None = None) -> PlacementPlan:
    """Place the jobs with the named solver (greedy | cpsat | auto); the plan is validated first.
    greedy: Volcano's allocate, then its preempt and reclaim for the jobs that do not fit; cpsat: the
    exact model, which chooses placements and victims jointly for all jobs, hinted with the greedy's
    plan (always run first) and, when it admits the greedy's weight, no worse than it on victim cost
    and on tier sum; auto: the exact plan when ``plan_key`` ranks it strictly better, else the greedy's.
    ``now`` (RFC 3339, default the current time) prices victims by how long they have run; ``safety``: safe
    preemption's rules (``safety`` module), off by default. ``scheduler``: the vc-scheduler configuration
    (``--scheduler-conf``): its binpack weights when ``weights`` is None, its HyperNode binpack weights.
    Victims are chosen as Volcano's plugin tiers choose them (``tiers`` module). ``node_start``: where
    vc-scheduler's node list starts, or the whole list (``nodeorder.node_list``; default by name); ``tie_seed``:
    HyperNodes of the same best score are drawn at random with this seed, as vc-scheduler does (default: by name)."""
    if solver not in registry.names(FAMILY):
        raise ValueError(registry.unknown_message(solver, registry.names(FAMILY)))
    check_inputs(snap, jobs)
    options = options or PlanOptions()
    safety = safety or OFF
    scheduler = scheduler or SchedulerConf()
    declined = exact_declines(scheduler) if solver == "cpsat" else None
    if declined is not None:
        raise InputError(f"{declined}: use --solver greedy or auto (auto then keeps the greedy's plan)",
                         field="--solver")
    weights = weights or scheduler.binpack_or(BinpackWeights())
    ctx = Context.build(snap, jobs, weights, parse_now(now), safety=safety, hyper_weights=scheduler.hyper_node_binpack,
                        actions=scheduler.actions, scheduler=scheduler, node_start=node_start,
                        tie_seed=tie_seed)
    t0 = time.perf_counter()
    planner: Planner[Context, PlacementResult] = registry.load(FAMILY, solver)()
    plan = planner.plan(ctx, options).plan
    wall = round(time.perf_counter() - t0, 3)
    plan = plan.model_copy(update={"solver": plan.solver.model_copy(update={"wall_seconds": wall})})
    plan = name_pods(mark_approvals(safety, snap, plan, {j.key: j for j in ctx.jobs}), ctx.jobs)
    validate_placement(snap, ctx.jobs, plan, safety=safety, now=ctx.now, actions=scheduler.actions,
                       scheduler=scheduler)
    return plan


def name_pods(plan: PlacementPlan, jobs: Sequence[VCJob]) -> PlacementPlan:
    """The plan with each binding of a bare PodGroup's job naming its pod (``Binding.pod``)."""
    bare = {j.key: j for j in jobs if j.kind == "PodGroup"}
    if not bare:
        return plan
    out = []
    for jp in plan.jobs:
        job = bare.get(jp.key)
        if job is not None:
            jp = jp.model_copy(update={"bindings": tuple(b.model_copy(update={"pod": bound_pod(job, b.task, b.index)})
                                                         for b in jp.bindings)})
        out.append(jp)
    return plan.model_copy(update={"jobs": tuple(out)})


def place_jobs(snap: Snapshot, jobs: Sequence[VCJob], *, solver: str = "auto", time_limit: float = 10.0,
               workers: int = 1, seed: int = 0, weights: BinpackWeights | None = None,
               now: datetime | str | None = None, deterministic: bool = False,
               safety: SafePreemption | None = None, scheduler: SchedulerConf | None = None,
               node_start: NodeStart = None, tie_seed: int | None = None) -> PlacementPlan:
    """``plan_placement`` with the options spelled out (what the CLI adapter calls). ``deterministic``: the
    exact model's limit counts CP-SAT's deterministic time, not wall-clock seconds (``core.clock``)."""
    options = PlanOptions(time_limit=time_limit, workers=workers, seed=seed, deterministic=deterministic)
    return plan_placement(snap, jobs, solver, options, weights, now, safety, scheduler, node_start, tie_seed)
