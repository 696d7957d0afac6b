"""The placement family's entry: ``plan_placement`` runs the planner named in ``optplan.solvers.core.registry``
(greedy | cpsat | auto) and validates its plan. The greedy is Volcano's actions (``allocate``, then ``evict``),
the exact model ``cpsat`` (imported only when asked for), the validator ``validate``; keeping the dispatch
here keeps the imports one way (the package docstring lists the modules).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from datetime import datetime

from optplan.models.placement import BinpackWeights, PlacementPlan, SafePreemption
from optplan.models.queues import VCJob
from optplan.models.snapshot import Snapshot
from optplan.solvers.core import registry
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.placement.allocate import greedy_place
from optplan.solvers.placement.context import Context
from optplan.solvers.placement.evict import plan_victims
from optplan.solvers.placement.model import plan_key
from optplan.solvers.placement.safety import OFF, mark_approvals
from optplan.solvers.placement.validate import check_inputs, validate_placement
from optplan.solvers.quota.times import parse_now

log = logging.getLogger(__name__)


def plan_placement(snap: Snapshot, jobs: Sequence[VCJob], solver: str = "auto",
                   options: PlanOptions | None = None, weights: BinpackWeights | None = None,
                   now: datetime | str | None = None, safety: SafePreemption | None = None) -> PlacementPlan:
    """Place the jobs with the named solver (greedy | cpsat | auto); the plan is validated first.
    greedy: Volcano's allocate, then its preempt and reclaim for the jobs that do not fit; cpsat: the
    exact model, which chooses placements and victims jointly for all jobs, hinted with the greedy's
    plan (always run first) and, when it admits the greedy's weight, no worse than it on victim cost
    and on tier sum; auto: the exact plan when ``plan_key`` ranks it strictly better, else the greedy's.
    ``now`` (RFC 3339, default the current time) prices victims by how long they have run; ``safety``: safe
    preemption's rules (``safety`` module), off by default."""
    if solver not in registry.names("placement"):
        raise ValueError(registry.unknown_message(solver, registry.names("placement")))
    check_inputs(snap, jobs)
    options = options or PlanOptions()
    safety = safety or OFF
    ctx = Context.build(snap, jobs, weights or BinpackWeights(), parse_now(now), safety=safety)
    t0 = time.perf_counter()
    greedy = plan_victims(ctx, greedy_place(ctx))
    if solver == "greedy":
        plan = greedy
    else:
        exact = registry.load("placement", "cpsat")(ctx, options, greedy)  # heavy backend, imported when asked for
        if solver == "cpsat":
            plan = exact
        else:
            g_key, e_key = plan_key(ctx, greedy), plan_key(ctx, exact)
            log.info("placement auto: greedy %s, cpsat %s (%s)", g_key, e_key, exact.solver.status)
            if e_key < g_key:
                plan = exact.model_copy(update={"solver": exact.solver.model_copy(update={"name": "auto"})})
            else:  # a tie keeps the greedy's plan (Volcano's own choices); optimal when CP-SAT proved its equal
                status = exact.solver.status if e_key == g_key else "FEASIBLE"
                plan = greedy.model_copy(update={"solver": exact.solver.model_copy(update={"name": "auto",
                                                                                         "status": status})})
    wall = round(time.perf_counter() - t0, 3)
    plan = plan.model_copy(update={"solver": plan.solver.model_copy(update={"wall_seconds": wall})})
    plan = mark_approvals(safety, snap, plan, {j.key: j for j in ctx.jobs})
    validate_placement(snap, ctx.jobs, plan, safety=safety, now=ctx.now)
    return plan


def place_jobs(snap: Snapshot, jobs: Sequence[VCJob], *, solver: str = "auto", time_limit: float = 10.0,
               workers: int = 1, seed: int = 0, weights: BinpackWeights | None = None,
               now: datetime | str | None = None, deterministic: bool = False,
               safety: SafePreemption | None = None) -> PlacementPlan:
    """``plan_placement`` with the options spelled out (what the CLI adapter calls). ``deterministic``: the
    exact model's limit counts CP-SAT's deterministic time, not wall-clock seconds (``core.clock``)."""
    options = PlanOptions(time_limit=time_limit, workers=workers, seed=seed, deterministic=deterministic)
    return plan_placement(snap, jobs, solver, options, weights, now, safety)
