"""Volcano's gang-aware eviction actions, ``gangpreempt`` and ``gangreclaim`` (v1.15), for one starving job
on the greedy's state (``gang_evict``), when the scheduler configuration lists them; their rules are
``gangrules`` and ``bundles``.

The actions take a job only while the session finds it starving (``jobs.starving``: its running and pipelined
pods number fewer than minAvailable, by count: a job whose running pods reach minAvailable with a task short of
its minimum evicts nothing), then commit only a pipelined gang. For the job, the pods to place are all its
pending pods, and the need their requests summed. Gangreclaim first asks the capacity plugin whether the job's
queue may reclaim for them all (``reclaimer_blocked`` on the summed request). Then domain by domain
(``gangrules.gang_domains``): the candidates on the domain's nodes, split into bundles per victim job, ranked,
cut to what the plugin tiers allow, ranked again, whole bundles dropped unless ``allowWholeBundle``; then bundle
by bundle the selected victims grow, and each time the domain's free room with them covers the need, a dry run
evicts them all and places every pending pod inside the domain, in gang order, each on the node with the best
binpack score among those where it fits without the room evicted pods release, else among those where it fits
with it (Volcano's ``Idle`` before ``FutureIdle``). The first dry run that places every pod with the gang ready
is the choice: its victims are every selected bundle, whether the pods land next to them or not.

Where this departs from Volcano: node scores are binpack's alone and ties go to the name; a hard job's pods
go anywhere in the domain (Volcano tries the domain's HyperNode gradient, widest first, which starts with the
domain itself); a job with partitions (sub-jobs) evicts nothing by these actions; victim PodGroups' task
minimums and sub-groups are not counted (a pod is safe while the job stays above minMember); a task whose
PriorityClass says ``preemptionPolicy: Never`` evicts like the others, as in Volcano's gang actions; with safe
preemption on (``--safe-preemption``) these actions evict nothing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from functools import cmp_to_key
from typing import Any

from optplan.models.placement import Binding, VictimReason
from optplan.models.queues import VCJob
from optplan.models.schedconf import SchedulerConf
from optplan.models.snapshot import Pod, Resources
from optplan.solvers.placement.bundles import WHOLE, Bundle, Member, allowed_bundles, covers, rank_bundles, summed
from optplan.solvers.placement.context import Context, State, Statement
from optplan.solvers.placement.gangrules import (
    GANG_REASON,
    candidate_refused,
    capacity_decides,
    capacity_victims,
    domain_bundles,
    gang_domains,
    group_totals,
    member,
    preempt_victim_key,
    queue_depth,
    unified_allowed,
)
from optplan.solvers.placement.greedy import Greedy, VictimChoice
from optplan.solvers.placement.jobs import Region, gang_order, gang_shortfall, replica_label, starving
from optplan.solvers.placement.partitions import NO_VICTIMS, partitioned
from optplan.solvers.placement.queueorder import compare_queues
from optplan.solvers.placement.victims import Candidate, reclaimer_blocked

VICTIM_ACTIONS: tuple[VictimReason, ...] = ("preempt", "reclaim", "gangpreempt", "gangreclaim")


def victim_actions(actions: tuple[str, ...]) -> list[VictimReason]:
    """The evicting actions in the configuration's order (preempt always before reclaim: the greedy's
    simplification), then preempt and reclaim when not listed (their notes say the configuration runs none)."""
    listed = [a for a in VICTIM_ACTIONS if a in actions]
    listed.sort(key=actions.index)
    if "preempt" in listed and "reclaim" in listed:
        i, j = listed.index("preempt"), listed.index("reclaim")
        if j < i:
            listed[i], listed[j] = "reclaim", "preempt"
    return [*listed, *(a for a in VICTIM_ACTIONS[:2] if a not in listed)]


def exact_declines(scheduler: SchedulerConf) -> str | None:
    """Why the exact model does not plan under this configuration, or None: it models gangpreempt and
    gangreclaim (``gang_cpsat``) except a gangreclaim whose victims the capacity plugin's filter decides (the
    filter reads the bundles' ranked order, which the exact model leaves free)."""
    refused = [a for a in scheduler.actions if a in GANG_REASON and capacity_decides(scheduler.tiers, a)]
    if refused:
        return (f"the exact model does not model {' and '.join(refused)} with the capacity plugin in the first "
                "tier (its victim filter follows the bundles' ranked order); the greedy simulates it")
    return None


def job_domains(ctx: Context, job: VCJob, action: str) -> list[Region]:
    """The domains the job's gang-aware eviction search scans (``gangrules.gang_domains``) with the job's
    pending pods: a hard job's HyperNodes widest first, else the cluster."""
    order = gang_order(job, ctx.snapshot, ctx.held.get(job.key))
    pending = [ctx.pods[job.key][t][i] for t, i in order]
    hard = job.network_topology is not None and job.network_topology.mode == "hard"
    minimum = _requests(pending[:ctx.need(job)[1]])
    return gang_domains(hard, ctx.regions[job.key], _hyper_allocatable(ctx), minimum,
                        bool(ctx.held_nodes.get(job.key)), ctx.scheduler.evict_max_hyper_nodes,
                        ctx.scheduler.gang(action).max_domains)


def _requests(pods: list[Pod]) -> dict[str, int]:
    out: dict[str, int] = {}
    for p in pods:
        for r, v in p.requests.items():
            if r != "pods":
                out[r] = out.get(r, 0) + v
    return out


def _hyper_allocatable(ctx: Context) -> Callable[[Region], Resources]:
    nodes = ctx.snapshot.nodes

    def room(r: Region) -> Resources:
        out: dict[str, int] = {}
        for n in r.nodes:
            for k, v in nodes[n].allocatable.items():
                out[k] = out.get(k, 0) + v
        return out
    return room


def _victim_key(ctx: Context, state: State, job: VCJob, action: str) -> Callable[[Bundle], Any]:
    cat = ctx.catalogue
    if GANG_REASON[action] == "preempt":
        return preempt_victim_key(cat, state.taken)
    qs = state.queues

    def rev(a: str, b: str) -> int:
        return compare_queues(qs, b, a)
    order = cmp_to_key(rev)
    return lambda b: (-queue_depth(qs.chain, cat.groups[b.job].queue, job.queue), order(cat.groups[b.job].queue))


def _released(state: State, ctx: Context) -> dict[str, dict[str, int]]:
    """node -> the room evicted pods release there (Volcano's ``Releasing``)."""
    out: dict[str, dict[str, int]] = {}
    for k, n in state.evicted.items():
        acc = out.setdefault(n, {})
        for r, v in ctx.snapshot.pods[k].requests.items():
            acc[r] = acc.get(r, 0) + v
    return out


def _place_all(g: Greedy, job: VCJob, region: Region, stmt: Statement) -> tuple[list[Binding], str | None]:
    """Every pending pod of the job inside the region (module docstring); the bindings, or why not."""
    ctx, state = g.ctx, g.state
    pods = ctx.pods[job.key]
    nodes = g.nodes(region)
    released = _released(state, ctx)
    bindings: list[Binding] = []
    placed: Counter[str] = Counter()
    for task, i in gang_order(job, ctx.snapshot, ctx.held.get(job.key)):
        pod = pods[task][i]
        if state.queues.fit_reason(job.queue, pod.requests) is not None:
            return bindings, f"{replica_label(job, task, i)}: {state.queues.fit_reason(job.queue, pod.requests)}"
        ok = [n for n, passes in zip(nodes, ctx.predicates.mask(pod, nodes), strict=True)
              if passes and state.cap.fit_reason(pod, n) is None]
        if not ok:
            return bindings, f"{replica_label(job, task, i)}: no node of the domain has room"
        idle = [n for n in ok if all(state.cap.free[n].get(r, 0) - released.get(n, {}).get(r, 0) >= v
                                     for r, v in pod.requests.items() if v > 0)]
        pool = idle or ok
        best = min(pool, key=lambda n: (-g.score(pod, n), n))
        stmt.allocate(pod, best, job.queue)
        placed[task] += 1
        bindings.append(Binding(task=task, index=i, node=best))
    short = gang_shortfall(job, placed, ctx.held_count(job.key))
    return bindings, short


def gang_evict(ctx: Context, state: State, g: Greedy, job: VCJob, action: str) -> tuple[VictimChoice | None, str]:
    """The job's victims by gangpreempt or gangreclaim (module docstring), state unchanged; None and why not."""
    if partitioned(job):
        return None, NO_VICTIMS
    if ctx.safety.on:
        return None, "safe preemption's rules are not modelled with the gang-aware actions"
    if not starving(job, Counter(), ctx.held_count(job.key)):
        return None, "its running pods number minAvailable: Volcano evicts only for a starving job"
    order = gang_order(job, ctx.snapshot, ctx.held.get(job.key))
    pending = [ctx.pods[job.key][t][i] for t, i in order]
    if not pending:
        return None, "no pending pod"
    need = _requests(pending)
    qs = state.queues
    if GANG_REASON[action] == "reclaim":
        blocked = reclaimer_blocked(job.queue, qs.allocated[job.queue], need, qs.deserved[job.queue],
                                    qs.real[job.queue])
        if blocked is not None:
            return None, blocked
    args = ctx.scheduler.gang(action)
    cat = ctx.catalogue
    priority = ctx.priority[job.key]
    hard = job.network_topology is not None and job.network_topology.mode == "hard"
    domains = job_domains(ctx, job, action)
    victim_key = _victim_key(ctx, state, job, action)
    first = ""
    for region in domains:
        cands = [c for n in sorted(region.nodes) for c in cat.by_node.get(n, ())
                 if c.key not in state.evicted
                 and candidate_refused(c, action, job.queue, priority, qs.reclaimable.get(c.queue, True)) is None]
        totals = group_totals(ctx.snapshot, {c.group for c in cands})
        bundles = domain_bundles(cands, cat, state.taken, totals.__getitem__)
        if capacity_decides(ctx.scheduler.tiers, action):  # its filter reads the bundles' order
            bundles = rank_bundles(bundles, need, victim_key)
        by_key = {c.key: c for c in cands}
        ordered = [by_key[m.key] for b in bundles for m in b.members]
        allowed = unified_allowed(ctx.scheduler.tiers, action, ordered, lambda cs: capacity_victims(
            cs, qs.allocated, qs.deserved, qs.listed, qs.guarantee))
        kept = allowed_bundles(bundles, _keys_in(allowed))
        bundles = [b for b in rank_bundles(kept, need, victim_key) if b.kind != WHOLE or args.allow_whole]
        if not bundles:
            first = first or f"{region.label}: no victim bundle may be taken"
            continue
        idle = summed_free(state, region)
        selected: list[Candidate] = []
        for b in bundles:
            selected += [by_key[m.key] for m in b.members]
            freed = dict(idle)
            for r, v in summed(member(c) for c in selected).items():
                freed[r] = freed.get(r, 0) + v
            if not covers(freed, need):
                continue
            stmt = Statement(state)
            for c in selected:
                stmt.evict(c.pod, c.node, c.queue, c.group)
            bindings, short = _place_all(g, job, region, stmt)
            stmt.discard()
            if short is None:
                return VictimChoice(bindings=bindings, victims=list(selected), region=region,
                                    cost=sum(c.cost for c in selected)), ""
            first = first or (f"{region.label}: {short}" if hard else short)
        first = first or f"{region.label}: the free room and every bundle allowed do not cover the job's pods"
    return None, first or "no domain holds the job's minimum resources"


def _keys_in(keys: set[str]) -> Callable[[Member], bool]:
    return lambda m: m.key in keys


def summed_free(state: State, region: Region) -> dict[str, int]:
    """The region's free room (Volcano's idle and releasing), summed over its nodes."""
    out: dict[str, int] = {}
    for n in region.nodes:
        for r, v in state.cap.free[n].items():
            out[r] = out.get(r, 0) + v
    return out
