"""Pending by fragmentation (issue 15 §3): the pending gangs whose request of a resource R fits the cluster's
free R in total, and their queue's remaining quota, but that the placement greedy cannot place under
their own constraints — the gangs that idle, scattered R keeps waiting.

Each gang is judged alone against the snapshot as it is (Volcano's allocate for that one job, no victims):
"could this gang start now if it were the only one waiting?". Its request is the least the gang needs to
be ready (its minimum: per-task minimums, then minAvailable from the tasks asking least R), so a gang
listed here is one that enough idle R in the wrong places keeps out; a gang short of quota or of R in
total is counted apart, with the placement family's reason.

It lives in the placement family because every fact it reads is placement's (which jobs are pending,
their gang minimums, queue accounting, the greedy's turn); Repack may not import placement, and the CLI
joins this list with Repack's fragmentation report.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

from optplan.models.placement import BinpackWeights
from optplan.models.quantity import format_milli
from optplan.models.queues import VCJob
from optplan.models.schedconf import SchedulerConf
from optplan.models.snapshot import Resources, Snapshot
from optplan.solvers.core.oracle import Capacity, Predicates
from optplan.solvers.placement.context import Context, State
from optplan.solvers.placement.greedy import Greedy
from optplan.solvers.placement.jobs import held_pods, jobs_to_place
from optplan.solvers.quota.queues import QueueAccount, account_queues

FITS = "fits"
"""The greedy places the gang now."""
FRAGMENTATION = "fragmentation"
"""Enough R is free in total and the quota allows it, yet the greedy cannot place the gang."""
QUOTA = "quota"
"""The queue (or an ancestor) has no room for the gang's minimum, or does not admit it."""
CAPACITY = "capacity"
"""The cluster's free R in total is less than the gang's minimum, or the gang fits not even on the cluster
emptied of every other pod (a pod larger than any node, a selector no node matches): no compaction helps."""


@dataclass(frozen=True)
class PendingGang:
    """One pending gang that requests R, and why it waits (or that it would start)."""

    namespace: str
    name: str
    queue: str
    request: int
    """R (milli-units) of the gang's minimum still to place (for a gang larger than the whole cluster, of
    all its replicas: its minimum is not built)."""
    verdict: str
    """FITS | FRAGMENTATION | QUOTA | CAPACITY."""
    reason: str
    """The placement family's reason (the greedy's for FRAGMENTATION, the queue's for QUOTA)."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def minimum_pods(ctx: Context, job: VCJob, resource: str) -> list[tuple[str, int]]:
    """The fewest pending pods that make the gang ready, as (task, replica index): each task's minimum,
    then the rest of minAvailable from the pending pods asking least of ``resource`` (then by task name)."""
    minima, total = ctx.need(job)
    pods = ctx.pods[job.key]
    chosen: list[tuple[str, int]] = []
    left: list[tuple[int, str, int]] = []
    for t in job.tasks:
        pending = ctx.pending(job, t.name)
        k = min(minima.get(t.name, 0), len(pending))
        chosen += [(t.name, i) for i in pending[:k]]
        left += [(pods[t.name][i].request(resource), t.name, i) for i in pending[k:]]
    left.sort()
    return chosen + [(name, i) for _r, name, i in left[:max(total - len(chosen), 0)]]


def minimum_requests(ctx: Context, job: VCJob, resource: str) -> Resources:
    """The requests of ``minimum_pods``, summed."""
    pods = ctx.pods[job.key]
    out: dict[str, int] = {}
    for name, i in minimum_pods(ctx, job, resource):
        for r, v in pods[name][i].requests.items():
            out[r] = out.get(r, 0) + v
    return out


def free_total(snap: Snapshot, resource: str) -> int:
    """Free R (allocatable less occupying pods' requests) summed over the schedulable nodes."""
    free = Capacity(snap).free
    return sum(max(free[n].get(resource, 0), 0) for n in sorted(free) if not snap.nodes[n].unschedulable)


def emptied(snap: Snapshot, job: VCJob) -> Snapshot:
    """The snapshot without any pod but the job's own running replicas (what it holds stays held)."""
    own = {p.key for by_index in held_pods(job, snap).values() for p in by_index.values()}
    fields = {name: getattr(snap, name) for name in Snapshot.model_fields}
    return Snapshot(**{**fields, "pods": {k: p for k, p in snap.pods.items() if k in own}})


def pending_gangs(snap: Snapshot, resource: str, now: datetime | None = None,
                  scheduler: SchedulerConf | None = None,
                  only: Collection[str] | None = None) -> list[PendingGang]:
    """Every gang ``jobs_to_place`` lists whose minimum requests ``resource``, by key, with its verdict; each
    judged by allocate under ``scheduler`` (its binpack and HyperNode binpack weights; default seed 002's).
    ``only``: of those, the gangs of these keys (each verdict is the same: a gang is judged alone)."""
    conf = scheduler or SchedulerConf()
    weights = conf.binpack_or(BinpackWeights())
    free = free_total(snap, resource)
    # the snapshot's facts, read once for all its gangs (each gang is still judged alone)
    accounts, capacity, predicates = account_queues(snap, hierarchical=True), Capacity(snap), Predicates(snap)
    # the emptied cluster's queue accounting, per set of pods left (every gang holding nothing shares one)
    empty_accounts: dict[frozenset[str], dict[str, QueueAccount]] = {}
    out = []
    for job in jobs_to_place(snap):
        if only is not None and job.key not in only:
            continue
        ctx = Context.build(snap, [job], weights, now, accounts=accounts, capacity=capacity,
                            predicates=predicates, hyper_weights=conf.hyper_node_binpack, actions=conf.actions,
                            scheduler=conf)
        if not ctx.jobs:
            continue
        if job.key in ctx.unfit:
            # the minimum exceeds the whole cluster's capacity: no compaction can help
            most = sum(t.template.requests.get(resource, 0) * t.replicas for t in job.tasks)
            if most > 0:
                out.append(PendingGang(job.namespace, job.name, job.queue, most, CAPACITY, ctx.unfit[job.key]))
            continue
        job = ctx.jobs[0]
        req = minimum_requests(ctx, job, resource)
        need = req.get(resource, 0)
        if need <= 0:
            continue
        base = (job.namespace, job.name, job.queue, need)
        if need > free:
            out.append(PendingGang(*base, CAPACITY, f"{resource} free in total {format_milli(free)} < "
                                                    f"request {format_milli(need)}"))
            continue
        state = State(ctx)
        why = state.queues.admission_reason(job.queue) or state.queues.fit_reason(job.queue, req)
        if why is not None:
            out.append(PendingGang(*base, QUOTA, why))
            continue
        jp = Greedy(ctx, state).place(job)
        if jp.admitted:
            out.append(PendingGang(*base, FITS, jp.reason))
            continue
        alone = emptied(snap, job)
        left = frozenset(alone.pods)
        if left not in empty_accounts:
            empty_accounts[left] = account_queues(alone, hierarchical=True)
        actx = Context.build(alone, [job], BinpackWeights(), now, accounts=empty_accounts[left],
                             predicates=predicates)
        empty = Greedy(actx, State(actx)).place(actx.jobs[0])
        if empty.admitted:
            out.append(PendingGang(*base, FRAGMENTATION, jp.reason))
        else:
            out.append(PendingGang(*base, CAPACITY, f"not even on an empty cluster: {empty.reason}"))
    return sorted(out, key=lambda g: g.key)
