"""Volcano's scheduling cycles (``greedy_cycles``): vc-scheduler opens a session every period and runs its
actions on the cluster as the last one left it. A cycle's allocate binds pods; its preempt and reclaim
evict victims and only pipeline the starving jobs' pods onto the room they free (nothing is bound):
the next cycle's allocate gives that room in queue and job order — to the job that evicted, or to one
before it. The plan is the cluster once nothing changes: the cycles run until one evicts nothing.

Cycle k+1 is planned on the snapshot cycle k leaves (``after_cycle``: the pods its allocate placed
running, in their PodGroup, its victims gone) with the jobs that still have pods to place (a job placed
whole is no longer one of them: its pods may be victims as any running pod; nor is a bare PodGroup whose
running pod a cycle evicted, ``jobs.lost_pods``: it can never be ready; a VCJob's evicted running pod is one
more replica to place, made again by its controller under the same name, ``jobs.remade``). The plan (``merge``)
lists, per job, the pods allocate placed over all cycles (and, for the last cycle, its pipelined
placements), and each victim under the job whose action evicted it — a job the plan does not admit
when the next cycle's allocate gave the room to jobs before it (Volcano evicts them all the same), a job
a later cycle's allocate placed on other room than its victims freed, and a job with a network topology
whose reclaim walked every node (``evict.plan_victims``: it is placed by a later cycle's allocate under
its limit, or not at all).
``JobPlacement.step`` keeps the cycles apart for the validator's replay (cycle 1's allocate first; then
by cycle, and within one its preempt pass before its reclaim pass; a job not admitted at the step of
its first evictions, so that each of its victims is gone before the later cycles). A pod a cycle's
preempt or reclaim pipelined is nominated to that node (``status.nominatedNodeName``): the next cycles'
allocate puts it there first when it fits (``Context.nominated``).

Where the plan's shape cannot say what Volcano did, the cycles stop and the plan of the last cycle it
can say stands: a job pipelined in the last cycle on other nodes than those of victims it evicted in an
earlier cycle, a job whose victims would mix preempt and reclaim, a pod optplan itself placed in an earlier
cycle becoming a victim (it is no running pod of the snapshot), or any plan the validator refuses.
``MAX_CYCLES`` bounds the loop (each cycle that goes on evicts, so it ends anyway)."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable

from optplan.models.placement import CYCLE_STEPS, Binding, JobPlacement, PlacementPlan, Victim
from optplan.models.queues import VCJob
from optplan.models.snapshot import Pod, PodGroup, Snapshot
from optplan.solvers.placement.allocate import greedy_place
from optplan.solvers.placement.context import Context
from optplan.solvers.placement.evict import lost_text, outlived_text, plan_victims
from optplan.solvers.placement.jobs import dropped_pods, lost_pods, outlived_pods, pod_group_job, remade_pods, task_pos
from optplan.solvers.placement.validate import placement_violations

log = logging.getLogger(__name__)

MAX_CYCLES = 8
"""At most this many cycles are simulated (the seeded clusters of the comparison settle within 3)."""


def one_cycle(ctx: Context) -> PlacementPlan:
    """One session: allocate, then preempt and reclaim (``plan_victims``) on the state allocate left."""
    return plan_victims(ctx, greedy_place(ctx))


def greedy_cycles(ctx: Context) -> PlacementPlan:
    """Volcano's cycles until one evicts nothing and binds nothing a waiting job could take (``next_may_evict``),
    or until the plan cannot say what the next one does (module docstring; a job the next cycle would evict pods
    of this plan for is told so, ``with_later_victims``); the first cycle's plan when that is already the case."""
    plan = one_cycle(ctx)
    if not any(jp.victims for jp in plan.jobs) and not next_may_evict(plan):
        return plan
    cycles: list[PlacementPlan] = [plan]
    contexts: list[Context] = [ctx]
    cur, snap = ctx, ctx.snapshot
    best = plan
    if any(jp.victims and not jp.admitted for jp in plan.jobs):  # a topology job's reclaim: as a cycle says it
        best = merge(ctx, cycles, contexts) or plan
    for _k in range(2, MAX_CYCLES + 1):
        last = cycles[-1]
        if not any(jp.victims for jp in last.jobs) and not next_may_evict(last):
            break
        snap = after_cycle(cur, last)
        gone = {f"{v.namespace}/{v.name}" for p in cycles for jp in p.jobs for v in jp.victims}
        jobs = [without_dropped(j, snap, ctx.snapshot, gone) for j in ctx.jobs
                if left_to_place(cycles, j, ctx, gone) and not lost_pods(j, ctx.snapshot, gone)]
        nominated = {**cur.nominated, **cur.pipelined}  # kept until a later pipelining changes it
        cur = Context.build(snap, [j for j in jobs if j is not None], ctx.weights, ctx.now, safety=ctx.safety,
                            hyper_weights=ctx.hyper_weights, actions=ctx.actions, scheduler=ctx.scheduler,
                            nominated=nominated)
        nxt = one_cycle(cur)
        if not any(jp.victims or jp.admitted for jp in nxt.jobs):
            break  # a session that changes nothing: the plan so far stands
        if placed_victims(nxt.jobs, running_now(ctx)):
            best = with_later_victims(best, ctx, nxt)
            break
        cycles.append(nxt)
        contexts.append(cur)
        merged = merge(ctx, cycles, contexts)
        if merged is None:
            break
        why = placement_violations(ctx.snapshot, ctx.jobs, merged, safety=ctx.safety, now=ctx.now,
                                   scheduler=ctx.scheduler)
        if why:
            log.info("placement cycles: stopped before cycle %d: %s", len(cycles), why[0])
            break
        best = merged
    return best


def next_may_evict(plan: PlacementPlan) -> bool:
    """A cycle that evicted nothing but bound pods while some job waits: Volcano's next session may preempt or
    reclaim those pods for it (its actions take only Bound or Running pods, ``api.PreemptableStatus``, so not in
    the session that bound them)."""
    return any(jp.admitted and jp.bindings for jp in plan.jobs) and any(not jp.admitted for jp in plan.jobs)


def running_now(ctx: Context) -> frozenset[str]:
    """The pods that run in the snapshot: the only ones a plan names as victims."""
    return frozenset(k for k, p in ctx.snapshot.pods.items() if p.node_name)


def placed_victims(jobs: Iterable[JobPlacement], running: frozenset[str]) -> list[str]:
    """The victims of a later cycle's jobs that are not among the ``running`` pods (``running_now``): pods this
    plan placed in an earlier cycle."""
    return sorted(k for jp in jobs for v in jp.victims if (k := f"{v.namespace}/{v.name}") not in running)


def with_later_victims(plan: PlacementPlan, ctx: Context, nxt: PlacementPlan) -> PlacementPlan:
    """The plan, each job of the next cycle ``nxt`` whose victims include pods this plan placed (the plan names
    as victims only pods that run now, so it stops before that cycle) told so in its reason, and so is each job
    those pods belong to."""
    owner = {p.key: key for key, by_task in ctx.pods.items() for ps in by_task.values() for p in ps}
    running = running_now(ctx)
    said: dict[str, str] = {}
    for jp in nxt.jobs:
        mine = placed_victims((jp,), running)
        if mine:
            said[jp.key] = (f"the next scheduling cycle's {jp.victims[0].reason} may evict {', '.join(mine)} "
                            "for it, placed by this plan (not in it: a plan's victims are pods running now)")
            for k in mine:
                if (o := owner.get(k)) is not None and o != jp.key:
                    said[o] = (f"{said[o]}; " if o in said else "") + (
                        f"its pod {k} may be evicted by {jp.key}'s {jp.victims[0].reason} in the next scheduling "
                        "cycle (not in this plan)")
    if not said:
        return plan
    return plan.model_copy(update={"jobs": tuple(
        jp.model_copy(update={"reason": f"{jp.reason}; {said[jp.key]}"}) if jp.key in said else jp
        for jp in plan.jobs)})


def without_dropped(job: VCJob, snap: Snapshot, first: Snapshot, gone: set[str]) -> VCJob | None:
    """The job as the cycle's snapshot ``snap`` has it: a bare PodGroup that lost running pods it may still be
    ready without (``jobs.dropped_pods``) built again from its pods there (its replicas renumbered: ``merge``
    maps them back by name); any other job as it is."""
    if not dropped_pods(job, first, gone):
        return job
    group = snap.pod_groups.get(job.key)
    return None if group is None else pod_group_job(group, snap)


def left_to_place(cycles: list[PlacementPlan], job: VCJob, ctx: Context,
                  gone: frozenset[str] | set[str] = frozenset()) -> bool:
    """The job has replicas that no cycle's allocate placed and that do not run already (a running pod among the
    victims ``gone`` that its controller makes again, ``jobs.remade``, is a replica to place again)."""
    key = job.key
    done = {(b.task, b.index) for p in cycles for jp in p.jobs if jp.key == key and jp.admitted
            and not jp.after_evictions for b in jp.bindings}
    held = ctx.held.get(key, {})
    again = set(remade_pods(job, ctx.snapshot, gone))
    return any((t, i) not in done and (i not in held.get(t, frozenset()) or pods[i].key in again)
               for t, pods in ctx.pods[key].items() for i in range(len(pods)))


def after_cycle(ctx: Context, plan: PlacementPlan) -> Snapshot:
    """The snapshot a cycle leaves: its victims gone, the pods its allocate placed running on their nodes (a
    share on the devices its binding names; a pending VCJob without a PodGroup in the snapshot gets one, as
    Volcano's job controller makes it); the pipelined placements of its preempt and reclaim are not kept
    (nothing is bound)."""
    snap = ctx.snapshot
    pods = dict(snap.pods)
    groups = dict(snap.pod_groups)
    by_key = {j.key: j for j in ctx.jobs}
    for jp in plan.jobs:
        for v in jp.victims:
            pods.pop(f"{v.namespace}/{v.name}", None)
    for jp in plan.jobs:
        if not jp.admitted or jp.after_evictions:
            continue
        job = by_key[jp.key]
        gk = f"{job.namespace}/{job.name}"
        if gk not in groups:
            groups[gk] = PodGroup(namespace=job.namespace, name=job.name, min_member=job.min_available,
                                  queue=job.queue, priority_class_name=job.priority_class_name)
        for b in jp.bindings:
            p: Pod = ctx.pods[jp.key][b.task][b.index]
            update: dict[str, object] = {"node_name": b.node, "phase": "Running", "ready": True}
            if b.devices is not None and p.gpu_share is not None:  # a share runs where the cycle put it
                update["gpu_share"] = p.gpu_share.model_copy(update={"devices": b.devices})
            pods[p.key] = p.model_copy(update=update)
    fields = {name: getattr(snap, name) for name in Snapshot.model_fields}
    return Snapshot(**{**fields, "pods": pods, "pod_groups": groups})


def merge(ctx: Context, cycles: list[PlacementPlan], contexts: list[Context]) -> PlacementPlan | None:
    """The plan of the cycles so far (module docstring), or None when its shape cannot say it; ``contexts``: each
    cycle's (a bare PodGroup built again without its dropped pods names its replicas otherwise: its bindings are
    mapped back to the first cycle's job by pod name)."""
    original = running_now(ctx)
    names = {key: {p.name: (t, i) for t, ps in by_task.items() for i, p in enumerate(ps)}
             for key, by_task in ctx.pods.items()}

    def rebind(cyc: Context, jp: JobPlacement) -> tuple[Binding, ...]:
        if cyc is ctx:
            return jp.bindings
        out = []
        for b in jp.bindings:
            t, i = names[jp.key][cyc.pods[jp.key][b.task][b.index].name]
            out.append(b.model_copy(update={"task": t, "index": i}))
        return tuple(out)

    bound: dict[str, list[Binding]] = defaultdict(list)
    entry: dict[str, JobPlacement] = {}  # the entry that admitted the job (its latest), or its latest word
    cycle_of: dict[str, int] = {}
    evictions: list[tuple[Victim, str, int]] = []  # (victim, the job whose action evicted it, its step)
    named: set[str] = set()  # the victims so far (a pod a job controller made again is not one twice)
    last = len(cycles)
    for k, plan in enumerate(cycles, start=1):
        cyc = contexts[k - 1]
        for jp in plan.jobs:
            keep = jp.admitted and (not jp.after_evictions or k == last)
            if keep:
                bound[jp.key].extend(rebind(cyc, jp))
                entry[jp.key] = jp
                cycle_of.setdefault(jp.key, k)
            elif jp.key not in cycle_of:
                entry[jp.key] = jp
            for v in jp.victims:
                vk = f"{v.namespace}/{v.name}"
                if vk not in original or vk in named:
                    return None  # a pod this plan placed in an earlier cycle: not a victim the plan can name
                named.add(vk)
                evictions.append((v, jp.key, CYCLE_STEPS * k + jp.step))
    lands: dict[str, set[str]] = {k: {b.node for b in bs} for k, bs in bound.items()}
    owners: dict[str, list[Victim]] = defaultdict(list)
    unplaced: dict[str, int] = {}  # a job not admitted -> the step of its last evictions
    first_evicted: dict[str, int] = {}  # ... and of its first (its step: each victim gone before later cycles)
    topo = {j.key for j in ctx.jobs if j.network_topology is not None}
    last_pipelined = {k for k, first in cycle_of.items() if first == last and entry[k].after_evictions}
    for v, evictor, step in evictions:
        if evictor in last_pipelined and v.node not in lands[evictor]:
            return None  # pipelined elsewhere in the last cycle: the plan cannot tell these victims from its own
        owners[evictor].append(v)
        if evictor not in lands:
            unplaced[evictor] = step
            first_evicted.setdefault(evictor, step)
    out: list[JobPlacement] = []
    for job in ctx.jobs:
        jp = entry[job.key]
        victims = tuple(sorted(owners.get(job.key, []), key=lambda v: (v.namespace, v.name)))
        if len({v.reason for v in victims}) > 1:
            return None
        first = cycle_of.get(job.key)
        if first is None:  # not admitted in any cycle
            if jp.admitted:
                return None
            lost = lost_pods(job, ctx.snapshot, named)
            if lost and lost[0] not in jp.reason:  # another job took its exposed pod (``jobs.shield``)
                jp = jp.model_copy(update={"reason": f"{jp.reason}; {lost_text(lost)}"})
            again = outlived_pods(job, ctx.snapshot, named)
            if again and again[0] not in jp.reason:
                jp = jp.model_copy(update={"reason": f"{jp.reason}; {outlived_text(job, again)}"})
            if victims:
                k = unplaced[job.key] // CYCLE_STEPS
                if job.key not in topo:
                    why = (f"its {victims[0].reason} in scheduling cycle {k} evicted {len(victims)} pods, whose room "
                           "the next cycle's allocate gave to jobs before it")
                else:  # reclaim without a HyperNode step (``evict.topology_reclaim_text``)
                    why = f"its reclaim evicted {len(victims)} pods by scheduling cycle {k}" + (
                        "" if k == last else ", and no later cycle's allocate placed it under its network topology")
                jp = jp.model_copy(update={"victims": victims, "after_evictions": True, "step": first_evicted[job.key],
                                           "reason": f"{jp.reason}; {why}"})
            out.append(jp)
            continue
        bindings = sorted(bound[job.key], key=lambda b: (task_pos(job, b.task), b.index))
        pipelined = jp.after_evictions and first == last
        reason = jp.reason if first == 1 or pipelined else (
            f"{jp.reason} (scheduling cycle {first}: room cycle {first - 1}'s victims freed)")
        step = 0 if first == 1 and not jp.after_evictions else CYCLE_STEPS * first + (jp.step if pipelined else 0)
        out.append(jp.model_copy(update={"bindings": tuple(bindings), "victims": victims, "reason": reason,
                                         "after_evictions": step > 0 or bool(victims), "step": step}))
    solver = cycles[0].solver
    return PlacementPlan(jobs=tuple(out), solver=solver)
