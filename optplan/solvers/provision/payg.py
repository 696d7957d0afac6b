"""Pay-as-you-go queue sizing (seed 002 §4.3; ``optplan queues --size-payg``): the platform raises a payg
queue's capability before a job runs and lowers it after, deserved always equal to capability, so the
job's resources are protected by deserved and nobody else's deserved share is reclaimed for it.

For the pending jobs of pay-as-you-go leaf queues (``quota.queues.classify_queues``), in Volcano's order:

1. Where they can go: allocate (placement's greedy, no victims) on the cluster with the spot queues' pods
   gone (the platform deletes spot jobs for new pay-as-you-go demand: seed 002 §4.4) and each payg queue's
   capability = deserved = its allocation + every pending job's requests. A job allocate does not admit
   there is not granted (the nodes it may use cannot hold it); an admitted job's request is what its
   placed pods ask — the job rounded to what those nodes can hold.
2. Whose share it takes: a job is granted while the seed's idle pool — cluster total − Σ subscription
   deserved − Σ payg use, the pool the spot queues share — still holds its request of the resource;
   beyond it the job would eat a subscription tenant's reserved deserved, and it is refused. Refused jobs
   are taken out and step 1 runs again, until the granted set holds.
3. The values: each payg queue's capability = deserved = allocation + its granted jobs' placed requests
   (every resource it requests, allocates or has a capability for); back to the allocation when they
   finish. The spot capabilities by ``quota.queues.spot_capacity`` with the new payg use, and back; the
   spot resource a tenant's spot jobs hold beyond the new capability is what the platform deletes first.

The granted jobs' placement is re-checked by placement's validator on the cluster with the new values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from optplan.errors import PlanInvalidError
from optplan.models.payg import Amounts, PaygJob, PaygQueue, PaygSizing, SpotQueue
from optplan.models.placement import BinpackWeights, PlacementPlan
from optplan.models.quantity import format_amount
from optplan.models.queues import QueueTree, VCJob
from optplan.models.snapshot import Resources, Snapshot
from optplan.solvers.placement.allocate import greedy_place
from optplan.solvers.placement.context import Context
from optplan.solvers.placement.jobs import job_pods, jobs_to_place
from optplan.solvers.placement.validate import placement_violations
from optplan.solvers.quota.queues import BillingQueue, SpotReport, account_queues, classify_queues, spot_capacity

QUEUE_API = "scheduling.volcano.sh/v1beta1"


def with_queues(snap: Snapshot, values: Mapping[str, Resources], *, deserved: bool = True) -> Snapshot:
    """The snapshot with these queues' capability (and deserved) set."""
    queues = dict(snap.queues)
    for q, v in values.items():
        update: dict[str, Any] = {"capability": dict(v)}
        if deserved:
            update["deserved"] = dict(v)
        queues[q] = queues[q].model_copy(update=update)
    return snap.model_copy(update={"queues": queues})


def without_queue_pods(snap: Snapshot, queues: set[str]) -> Snapshot:
    """The snapshot without the pods counted in these queues (their PodGroup's queue)."""
    def keep(key: str) -> bool:
        gk = snap.pods[key].group_key
        pg = snap.pod_groups.get(gk) if gk is not None else None
        return pg is None or pg.queue not in queues
    return snap.model_copy(update={"pods": {k: p for k, p in snap.pods.items() if keep(k)}})


def job_request(job: VCJob) -> Resources:
    out: Resources = {}
    for t in job.tasks:
        for r, v in t.template.requests.items():
            out[r] = out.get(r, 0) + v * t.replicas
    return out


def placed_request(job: VCJob, plan: PlacementPlan) -> Resources:
    pods = job_pods(job)
    out: Resources = {}
    for b in plan.job(job.key).bindings:
        for r, v in pods[b.task][b.index].requests.items():
            out[r] = out.get(r, 0) + v
    return out


def add(a: Mapping[str, int], b: Mapping[str, int]) -> Resources:
    return {r: a.get(r, 0) + b.get(r, 0) for r in sorted({*a, *b}) if r != "pods"}


def amounts(m: Mapping[str, int]) -> Amounts:
    return {r: format_amount(r, v) for r, v in sorted(m.items())}


def queue_patch(name: str, capability: Mapping[str, int], deserved: Mapping[str, int] | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"capability": amounts(capability)}
    if deserved is not None:
        spec["deserved"] = amounts(deserved)
    return {"apiVersion": QUEUE_API, "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def size_payg(snap: Snapshot, jobs: Sequence[VCJob] | None = None, resource: str = "nvidia.com/gpu",
              weights: BinpackWeights | None = None, now: datetime | None = None) -> PaygSizing:
    """The sizing (module docstring); ``jobs`` default: the snapshot's jobs with pods to place."""
    tree = QueueTree(snap.queues)
    billing = classify_queues(tree)
    payg = {q: b for q, b in billing.items() if b.billing == "payg" and tree.is_leaf(q) and q in snap.queues}
    spot = {q for q, b in billing.items() if b.billing == "spot"}
    pending = [j for j in (jobs if jobs is not None else jobs_to_place(snap)) if j.queue in payg]
    accounts = account_queues(snap, hierarchical=True)
    allocated = {q: {r: v for r, v in accounts[q].allocated.items() if r != "pods"} for q in payg}
    before = spot_capacity(snap, resource)
    room = without_queue_pods(snap, spot)
    granted = list(pending)
    reasons: dict[str, str] = {}
    while True:
        upper = {q: add(allocated[q], {}) for q in payg}
        for j in granted:
            upper[j.queue] = add(upper[j.queue], job_request(j))
        for q in payg:  # resources it has a capability for stay capped at its use
            upper[q] = add(upper[q], dict.fromkeys(snap.queues[q].capability, 0))
        ctx = Context.build(with_queues(room, upper), granted, weights or BinpackWeights(), now)
        plan = greedy_place(ctx)
        idle = before.idle
        keep = []
        for jp in plan.jobs:
            job = next(j for j in granted if j.key == jp.key)
            if not jp.admitted:
                reasons[job.key] = f"the nodes it may use cannot hold it: {jp.reason}"
                continue
            need = placed_request(job, plan).get(resource, 0)
            if need > idle:
                reasons[job.key] = (f"needs {format_amount(resource, need)} {resource} but the idle pool (cluster "
                                    f"total - subscription deserved - payg use) holds "
                                    f"{format_amount(resource, max(idle, 0))}: it would take a subscription "
                                    f"tenant's deserved share")
                continue
            idle -= need
            keep.append(job)
        if len(keep) == len(granted):
            break
        granted = keep
    final = {q: add(allocated[q], dict.fromkeys(snap.queues[q].capability, 0)) for q in payg}
    placed = {j.key: placed_request(j, plan) for j in granted}
    for j in granted:
        final[j.queue] = add(final[j.queue], placed[j.key])
    check = with_queues(room, final)
    bad = placement_violations(check, granted, plan)
    if bad:
        raise PlanInvalidError(bad)
    use = {q: final[q].get(resource, 0) for q in payg}
    during = spot_capacity(snap, resource, use)
    return build(snap, payg, pending, placed, reasons, allocated, final, before, during, resource)


def build(snap: Snapshot, payg: Mapping[str, BillingQueue], pending: Sequence[VCJob], placed: Mapping[str, Resources],
          reasons: Mapping[str, str], allocated: Mapping[str, Resources], final: Mapping[str, Resources],
          before: SpotReport, during: SpotReport, resource: str) -> PaygSizing:
    queues = []
    apply_items, release_items = [], []
    for q in sorted(payg):
        jobs = tuple(PaygJob(job=j.key, queue=q, granted=j.key in placed,
                             request=amounts(placed.get(j.key, job_request(j))),
                             reason="" if j.key in placed else reasons.get(j.key, ""))
                     for j in pending if j.queue == q)
        queues.append(PaygQueue(queue=q, tenant=payg[q].tenant, allocated=amounts(allocated[q]),
                                current=amounts(snap.queues[q].capability), capability=amounts(final[q]), jobs=jobs))
        if final[q] != snap.queues[q].capability or final[q] != snap.queues[q].deserved:
            apply_items.append(queue_patch(q, final[q], final[q]))
        back = add(allocated[q], dict.fromkeys(snap.queues[q].capability, 0))
        if back != final[q]:
            release_items.append(queue_patch(q, back, back))
    spots = []
    after = {t.tenant: t for t in before.tenants}
    for t in during.tenants:
        if t.spot_queue is None:
            continue
        held = account_queues(snap, hierarchical=True)[t.spot_queue].allocated.get(resource, 0)
        spots.append(SpotQueue(queue=t.spot_queue, tenant=t.tenant, current=amounts(t.current),
                               capability=amounts(t.capability), release=amounts(after[t.tenant].capability),
                               to_free=format_amount(resource, max(held - t.capability.get(resource, 0), 0))))
        if t.capability != t.current:
            apply_items.append(queue_patch(t.spot_queue, t.capability, None))
        if after[t.tenant].capability != t.capability:
            release_items.append(queue_patch(t.spot_queue, after[t.tenant].capability, None))
    return PaygSizing(resource=resource, queues=tuple(queues), spot=tuple(spots),
                      apply={"apiVersion": "v1", "kind": "List", "items": apply_items},
                      release={"apiVersion": "v1", "kind": "List", "items": release_items})
