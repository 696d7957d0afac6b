"""Volcano's allocate action over all the jobs (``greedy_place``: queues and jobs popped in order, one turn
each), and the reasons for the jobs another plan does not admit (``explain_rejections``)."""

from __future__ import annotations

import logging
import time
from collections import Counter, defaultdict

from optplan.models.placement import JobPlacement, PlacementPlan
from optplan.models.queues import VCJob
from optplan.models.repack import SolverRecord
from optplan.solvers.placement.context import (
    Context,
    State,
    job_key_in_queue,
    queue_order_key,
    replay,
    with_devices,
)
from optplan.solvers.placement.greedy import Greedy
from optplan.solvers.placement.jobs import gang_shortfall
from optplan.solvers.placement.tiers import share
from optplan.solvers.placement.validate import placement_violations

log = logging.getLogger(__name__)


def greedy_place(ctx: Context) -> PlacementPlan:
    """Volcano's allocate: pop the first queue (``compare_queues`` on the allocations so far: the share
    changes as jobs are placed), pop its first job (``job_key_in_queue``: a job already admitted is ready
    and comes after the unready ones of its priority), give it one turn — a job not admitted yet gets its
    gang (``place``: all or nothing, up to ready), an admitted one one more pod (``extend``) — push the job
    back while it has pods left and its turn placed something, push the queue back while it has jobs."""
    t0 = time.perf_counter()
    state = State(ctx)
    g = Greedy(ctx, state)
    results: dict[str, JobPlacement] = {}
    waiting: dict[str, list[VCJob]] = defaultdict(list)
    for job in ctx.jobs:
        waiting[job.queue].append(job)
    ready = {j.key for j in ctx.jobs if gang_shortfall(j, Counter(), ctx.held_count(j.key)) is None}
    qs = state.queues
    drf = ctx.scheduler.drf_job_order
    allocated = {j.key: ctx.running_requests(j.key) for j in ctx.jobs} if drf else {}
    shares = {k: share(a, g.total) for k, a in allocated.items()}
    ctx.turns.clear()
    while waiting:
        queue = min(waiting, key=queue_order_key(qs))
        jobs = waiting[queue]
        job = min(jobs, key=lambda j: job_key_in_queue(j, ctx.priority[j.key], j.key in ready,
                                                      shares.get(j.key, 0.0)))
        before = results.get(job.key)
        jp = before
        if jp is None:
            ctx.turns.append(job.key)
            jp = results[job.key] = g.place(job)
            more = jp.admitted
            if jp.admitted:
                ready.add(job.key)
        else:
            nxt = g.extend(job, jp)
            more = nxt is not None
            if nxt is not None:
                jp = results[job.key] = nxt
        if drf and jp is not before and jp.admitted:  # drf's AllocateFunc: the job's share grows
            pods = ctx.pods[job.key]
            had = set() if before is None or not before.admitted else {(b.task, b.index) for b in before.bindings}
            for b in jp.bindings:
                if (b.task, b.index) not in had:
                    allocated[job.key].update(pods[b.task][b.index].requests)
            shares[job.key] = share(allocated[job.key], g.total)
        if not more or not g.remaining(job, jp):
            jobs.remove(job)
            if not jobs:
                del waiting[queue]
    out = [results[job.key] for job in ctx.jobs]
    wall = round(time.perf_counter() - t0, 3)
    plan = with_devices(ctx, state, PlacementPlan(jobs=tuple(out), solver=SolverRecord(
        name="greedy", status="HEURISTIC", wall_seconds=wall)))
    log.info("placement greedy: %d of %d jobs admitted in %.3fs", sum(j.admitted for j in out), len(out), wall)
    return plan


def explain_rejections(ctx: Context, plan: PlacementPlan) -> PlacementPlan:
    """Reasons for the jobs a plan does not admit, found by the greedy on the plan's final state; a job
    the greedy can still place is placed (a plan not proven optimal may leave room). That state counts
    every placement but no room freed by victims, so such a job is replayed before the evictions and
    changes nothing they rely on; a job in the queue of a reclaiming job keeps the plan's reason (its
    pods would lift the queue that reclaim needs under its deserved with the request)."""
    reclaimers = {jp.queue for jp in plan.jobs if jp.admitted and any(v.reason == "reclaim" for v in jp.victims)}
    g = Greedy(ctx, replay(ctx, plan, victims=False))
    by_key = {j.key: j for j in ctx.jobs}
    out = []
    added: set[str] = set()
    for jp in plan.jobs:
        if jp.admitted or jp.victims:  # victims of a job not admitted: an earlier cycle's (``cycles``)
            out.append(jp)
            continue
        got = jp if jp.queue in reclaimers else g.place(by_key[jp.key])
        if got.admitted:
            added.add(got.key)
        out.append(got)
    if not added:
        return plan.model_copy(update={"jobs": tuple(out)})
    named = with_devices(ctx, g.state, plan.model_copy(update={"jobs": tuple(out)}))
    jobs = tuple(jp if jp.key in added else old for jp, old in zip(named.jobs, out, strict=True))
    more = plan.model_copy(update={"jobs": jobs})
    why = placement_violations(ctx.snapshot, ctx.jobs, more, safety=ctx.safety, now=ctx.now, scheduler=ctx.scheduler)
    if why:  # placed on the plan's final state, but not where the plan's own order leaves room: as it was
        log.info("placement: the jobs the plan left room for are not added (%s)", why[0])
        return plan.model_copy(update={"jobs": tuple(
            orig if jp.key in added else jp for jp, orig in zip(out, plan.jobs, strict=True))})
    return more
