"""Volcano's preempt, then reclaim, for the jobs allocate did not admit (``plan_victims``): the rules by
which one job and one action may evict (``job_rules``), preempt's pass within a job (``pipeline_within``),
and why a plan uses no victims (``victim_notes``).
Who may be a victim and the capacity plugin's rules are ``victims``."""

from __future__ import annotations

import json
import logging
from collections import Counter
from typing import Any, cast

from optplan.models.placement import Binding, JobPlacement, PlacementPlan, Victim, VictimReason
from optplan.models.queues import VCJob
from optplan.solvers.placement.context import Context, State, Statement, replay, with_devices
from optplan.solvers.placement.gangevict import gang_evict, victim_actions
from optplan.solvers.placement.gangrules import GANG_REASON
from optplan.solvers.placement.greedy import Greedy, VictimChoice
from optplan.solvers.placement.jobs import (
    gang_order,
    job_needs,
    lost_pods,
    outlived_pods,
    own_groups,
    preemptor_order,
    starving,
)
from optplan.solvers.placement.partitions import evicts_anywhere, partitioned
from optplan.solvers.placement.safety import OFF, evict_blocks, graded_blocks, pdb_refused
from optplan.solvers.placement.tiers import preemptee_refused
from optplan.solvers.placement.victims import (
    REASONS,
    Candidate,
    Catalogue,
    Reason,
    Rules,
    action_refused,
    dims,
    reclaimer_blocked,
    statically_allowed,
    victim_blocked,
)

log = logging.getLogger(__name__)

TWINS = True
"""``plan_victims`` answers a job as its twin was answered (``twin_key``) on the state unchanged since; False: every
job searched (the tests compare both)."""


def twin_key(ctx: Context, job: VCJob) -> str | None:
    """What a pending VCJob's dry run with victims reads of the job itself, its name aside: its spec, its pods'
    and its PodGroup's (a value naming the job read as the same placeholder), its priority. Two jobs with one
    key, tried on one state, find the same victims or none, with the same reasons (a VCJob's reasons name
    replicas by task and index, ``replica_label``). None for a job whose answer may depend on more: running or
    nominated pods, a network topology or partitions (regions and sub-jobs), a bare PodGroup (its reasons name
    its pods), safe preemption on (its rules read the job's times)."""
    if (job.kind != "Job" or job.network_topology is not None or partitioned(job) or ctx.held.get(job.key)
            or ctx.safety != OFF):
        return None
    pods = ctx.pods[job.key]
    if any(p.key in ctx.nominated or p.key in ctx.pipelined for ps in pods.values() for p in ps):
        return None

    def own(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: own(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [own(v) for v in value]
        return "<job>" if value == job.name else value
    identity = {"name", "uid", "creation_timestamp"}
    group = ctx.snapshot.pod_groups.get(f"{job.namespace}/{job.name}")
    doc = {"job": own(job.model_dump(exclude=identity)),
           "pods": {t: [own(p.model_dump(exclude=identity)) for p in ps] for t, ps in sorted(pods.items())},
           "group": None if group is None else own(group.model_dump(exclude=identity)),
           "priority": ctx.priority[job.key], "unfit": job.key in ctx.unfit}
    return json.dumps(doc, sort_keys=True, default=str)


def job_rules(ctx: Context, state: State, cat: Catalogue, job: VCJob, reason: Reason) -> tuple[Rules | None, str]:
    """The rules for this job and action, or None and why the action has nothing to offer."""
    snap = ctx.snapshot
    qs = state.queues
    if not ctx.preempting(job):
        return None, "preemptionPolicy Never: no victims"
    if reason not in ctx.actions:  # --scheduler-conf's actions
        return None, f"the scheduler configuration runs no {reason} action"
    no_action = action_refused(job, reason)
    if no_action is not None:
        return None, no_action
    needs = job_needs(job)
    if reason == "reclaim":  # the capacity plugin's PreemptiveFn, for the first pod the action tries
        order = gang_order(job, snap, ctx.held.get(job.key))
        if order:
            task, i = order[0]
            why = reclaimer_blocked(job.queue, qs.allocated[job.queue], ctx.pods[job.key][task][i].requests,
                                    qs.deserved[job.queue], qs.real[job.queue])
            if why is not None:
                return None, why
    return _tier_rules(ctx, state, cat, job, reason, needs)


def _tier_rules(ctx: Context, state: State, cat: Catalogue, job: VCJob, reason: Reason,
                needs: frozenset[str]) -> tuple[Rules | None, str]:
    """``job_rules`` by Volcano's plugin tiers (``tiers``): every pod the action hands to the plugins
    (``tiers.preemptee_refused``; the catalogue's candidates and the exposed pods of other jobs); none when
    no tier could offer one at the action's start, and none for a job whose running pods already number its
    minAvailable (the actions take only starving jobs: ready + pipelined < minAvailable, ``jobs.starving``; its
    other pods wait for allocate)."""
    if not starving(job, Counter(), ctx.held_count(job.key)):
        return None, "its running pods number minAvailable: Volcano evicts only for a starving job"
    qs = state.queues
    priority = ctx.priority[job.key]
    own = own_groups(job, ctx.snapshot)  # an exposed pod of another job too (``jobs.shield``)
    pods = {**cat.candidates, **{k: c for k, c in cat.exposed.items() if c.group not in own}}
    static = {k: c for k, c in pods.items() if k not in state.evicted
              and preemptee_refused(c, reason, job.queue, qs.reclaimable.get(c.queue, True)) is None
              and safe(ctx, c, reason, priority)}
    if reason == "preempt":
        if not static:
            return None, f"no running pod of another job in queue {job.queue} may be evicted" + _safety_note(
                ctx, state, cat, job, reason, needs)
        return Rules(reason=reason, job=job, needs=needs, eligible=static), ""
    refused: dict[str, str] = {}
    for k, c in static.items():  # the ReclaimableFn on the state at the action's start, each pod alone (notes)
        why = victim_blocked(c.queue, qs.allocated[c.queue], c.pod.requests, qs.deserved[c.queue],
                             qs.listed[c.queue], qs.guarantee[c.queue])
        if why is not None:
            refused[k] = why
    slack = any(ctx.catalogue.groups[c.group].slack > state.taken[c.group] for c in static.values())
    shared = {k for k, c in static.items() if dims(c.pod.requests) & needs}
    if not slack and not shared - set(refused):  # neither tier offers a pod: the gangs are at minMember
        return None, reclaim_blocked_text({k: static[k] for k in shared}, [refused[k] for k in sorted(shared)
                                                                           if k in refused])
    return Rules(reason=reason, job=job, needs=needs, eligible=static, blocked=refused), ""


def safe(ctx: Context, c: Candidate, reason: Reason, priority: int) -> bool:
    """Safe preemption's static rules (a pod under several PDBs, graded preemption) let the pod go."""
    if not ctx.safety.on:
        return True
    if pdb_refused(ctx.safety, ctx.snapshot, c.pod) is not None:
        return False
    return reason != "preempt" or graded_blocks(ctx.safety, priority, c.job_priority) is None


def _safety_note(ctx: Context, state: State, cat: Catalogue, job: VCJob, reason: Reason, needs: frozenset[str]) -> str:
    """Where safe preemption's static rules refused a pod Volcano alone would take: the first such refusal."""
    if not ctx.safety.on:
        return ""
    qs, priority = state.queues, ctx.priority[job.key]
    for k in sorted(cat.candidates):
        c = cat.candidates[k]
        if k in state.evicted:
            continue
        allowed = qs.reclaimable.get(c.queue, True)
        if statically_allowed(c, reason, job.queue, priority, allowed) is None:
            why = statically_allowed(c, reason, job.queue, priority, allowed, snap=ctx.snapshot,
                                     safety=ctx.safety)
            if why is not None:
                return f" ({k}: {why})"
    return ""


def reclaim_blocked_text(static: dict[str, Candidate], blocked: list[str]) -> str:
    """Why no running pod may be reclaimed: none could be, none is above deserved, or guarantee protects."""
    if not static:
        return "no running pod of another reclaimable queue requests a resource the job requests"
    guarded = sorted(w for w in blocked if w.startswith("guarantee"))
    under = sorted(w for w in blocked if not w.startswith("guarantee"))
    if not under:
        return f"no running pod may be reclaimed: {guarded[0]}"
    also = f"; {guarded[0]}" if guarded else ""
    return f"no running pod of a reclaimable queue is above its deserved: {under[0]}{also}"


def apply_choice(ctx: Context, state: State, job: VCJob, choice: VictimChoice,
                 pre: tuple[Binding, ...] = ()) -> None:
    """Commit a choice: evictions first, then the job's pods (but ``pre``, already on the state)."""
    stmt = Statement(state)
    for c in choice.victims:
        stmt.evict(c.pod, c.node, c.queue, c.group)
    pods = ctx.pods[job.key]
    for b in choice.bindings:
        if b not in pre:
            stmt.allocate(pods[b.task][b.index], b.node, job.queue)


def _victims(choice: VictimChoice, reason: VictimReason) -> tuple[Victim, ...]:
    return tuple(Victim(namespace=c.pod.namespace, name=c.pod.name, node=c.node, reason=reason)
                 for c in sorted(choice.victims, key=lambda c: c.key))


def victim_text(job: VCJob, n_bindings: int, region_label: str | None, reason: str, victims: int,
                cost: int) -> str:
    where = f" in {region_label}" if region_label else ""
    return (f"{n_bindings} of {job.replicas} pods placed{where} after {reason}ing {victims} pods "
            f"(victim cost {cost})")


def topology_reclaim_text(victims: int, cost: int) -> str:
    """Why a job with a network topology is not placed though its reclaim evicted: Volcano's reclaim
    pipelines its pods on any node (``reclaimForTask`` has no HyperNode step); the next scheduling cycle's
    allocate places it under its network topology, or reclaims again."""
    return (f"reclaim evicted {victims} pods on any node (victim cost {cost}; Volcano's reclaim has no HyperNode "
            "step): the next scheduling cycle's allocate places it under its network topology")


def pipeline_within(g: Greedy, job: VCJob, skip: frozenset[tuple[str, int]] = frozenset()) -> tuple[Binding, ...]:
    """Volcano's preempt, its pass within each starving job (vc-scheduler v1.15.1's ``actions/preempt``,
    "Preemption between Task within Job", after the pass between jobs whether that pipelined any): every job the
    action took — starving, without a network topology of its own or of its partitions (``action_refused``),
    partitioned or not —, its pending pods in task order, each on the first node in preempt's order where it fits
    now (a partitioned job's on any node: the pass has no sub-job step, ``evicts_anywhere``), pipelined and
    committed one by one (the victims of its own job — the running pods of lower task priority — are not
    modelled: a running gang's pods are never victims here); the pass stops at the first pod that fits nowhere
    or whose task may not preempt (preemptionPolicy Never). The pods stay on the state (they hold their room for
    this cycle's other jobs and count for the job's reclaim, ``Greedy.with_victims``' ``pre``). ``skip``: pods
    the pass between jobs pipelined (no longer pending)."""
    ctx = g.ctx
    if action_refused(job, "preempt") is not None or not starving(job, Counter(), ctx.held_count(job.key)):
        return ()  # Volcano's preempt takes only starving jobs without a network topology
    regions = g.victim_regions(job, "preempt")
    if len(regions) != 1:
        return ()
    nodes = g.nodes(regions[0])
    pods = ctx.pods[job.key]
    out: list[Binding] = []
    for task, i, _required in (s for s in preemptor_order(job, g.steps(job), pods, ctx.snapshot) if s[:2] not in skip):
        if task in ctx.never[job.key]:
            break
        pod = pods[task][i]
        node = next((n for n in g.preempt_order(pod, nodes, job) if g.fits(pod, n, job.queue)), None)
        if node is None:
            break
        Statement(g.state).allocate(pod, node, job.queue)
        out.append(Binding(task=task, index=i, node=node))
    return tuple(out)


def plan_victims(ctx: Context, plan: PlacementPlan) -> PlacementPlan:
    """Volcano's preempt action, then its reclaim action, each over every job the plan does not admit (in
    job order), on the state the jobs before it left: the admitted jobs' pods placed, earlier victims
    gone — so every starving job may preempt before any job reclaims, as vc-scheduler runs its actions in
    a cycle (one cycle of ``cycles.greedy_cycles``). In preempt's step a job that now fits without victims
    (room an earlier job's victims freed beyond its own need, or queue room they gave back) is placed there
    first, as preempt's walk would (a node with room takes a pod without evictions); reclaim's walk passes over a
    node without a reclaimee (``reclaimForTask``), so in its step a job reclaims for itself and that room waits
    for the next cycle's allocate. Jobs placed by this pass are replayed after the evictions
    (``after_evictions``). A job with a network topology that reclaims is not placed by it: its reclaim
    walks every node (``Greedy.victim_regions``) and it keeps its victims, unadmitted
    (``topology_reclaim_text``), for the next cycle's allocate."""
    if all(jp.admitted for jp in plan.jobs):
        return plan
    by_key = {j.key: j for j in ctx.jobs}
    state = replay(ctx, plan, victims=False)  # allocate's plan: no victims yet
    state.pipelining = True  # preempt and reclaim pipeline: binpack scores the nodes without them (State.used_free)
    cat = ctx.catalogue
    g = Greedy(ctx, state, cat)
    for jp in plan.jobs:  # allocate's pods of running gangs: ready for the gang plugin
        if jp.admitted:
            for group in own_groups(by_key[jp.key], ctx.snapshot):
                g.placed[group] += len(jp.bindings)
    whole = {grp for jp in plan.jobs if jp.admitted for grp in own_groups(by_key[jp.key], ctx.snapshot)}
    out: dict[str, JobPlacement] = {jp.key: jp for jp in plan.jobs}
    notes: dict[str, list[str]] = {jp.key: [] for jp in plan.jobs}
    done: set[str] = set()  # placed by this pass
    evicting: list[str] = []  # the queues whose jobs evict in this plan (the cooldown rule)
    cooling: dict[str, str | None] = {}
    pre: dict[str, tuple[Binding, ...]] = {}  # job -> its pods preempt's pass within the job pipelined
    commits = 0  # changes to the state this pass made for good (a job placed, victims taken, pods pipelined)
    twins: dict[tuple[int, str], tuple[int, str]] = {}  # (step, twin_key) -> (commits, note) of a job that found none
    for step, reason in enumerate(victim_actions(ctx.actions), start=1):
        for jp in plan.jobs:
            job = by_key[jp.key]
            if (jp.admitted or jp.key in done or job.key in ctx.unfit
                    or state.queues.admission_reason(job.queue) is not None or not ctx.regions[job.key]):
                continue
            if lost := lost_pods(job, ctx.snapshot, state.evicted):  # it can never be ready: nothing to pipeline
                notes[jp.key].append(f"{reason}: {lost_text(lost)}")
                cooling[jp.key] = None
                continue
            if gone := outlived_pods(job, ctx.snapshot, state.evicted):  # a later cycle places it
                notes[jp.key].append(f"{reason}: {outlived_text(job, gone)}")
                cooling[jp.key] = None
                continue
            twin = twin_key(ctx, job) if TWINS and not pre.get(jp.key) else None
            seen = twins.get((step, twin)) if twin is not None else None
            if seen is not None and seen[0] == commits:  # its twin found nothing on this same state
                notes[jp.key].append(seen[1])
                cooling[jp.key] = None
                continue
            before = commits
            if state.evicted and not pre.get(jp.key) and reason != "reclaim":
                freed = g.place(job)  # commits when admitted
                if freed.admitted:
                    commits += 1
                    out[jp.key] = freed.model_copy(update={
                        "reason": f"{freed.reason} (room freed by earlier victims)", "after_evictions": True,
                        "step": step})
                    done.add(jp.key)
                    whole |= own_groups(job, ctx.snapshot)
                    continue
            cooling[jp.key] = evict_blocks(ctx.safety, ctx.snapshot, job, ctx.now, evicting)
            if cooling[jp.key] is not None:  # safe preemption's cooldown, on the evictions so far
                continue
            if reason in GANG_REASON:  # gangpreempt, gangreclaim: victims in bundles
                chosen, gwhy = gang_evict(ctx, state, g, job, reason)
            else:
                rules, why = job_rules(ctx, state, cat, job, cast(Reason, reason))
                if rules is not None:  # an admitted job's exposed pods stay: the plan keeps its gang whole
                    rules.eligible = {k: c for k, c in rules.eligible.items()
                                      if k not in cat.exposed or c.group not in whole}
                chosen, gwhy = (None, why) if rules is None else g.with_victims(job, rules, pre.get(jp.key, ()))
                if chosen is None and reason == "preempt" and (free := pipeline_within(g, job)):
                    pre[jp.key] = free
                    commits += 1
            if chosen is None:
                notes[jp.key].append(f"{reason}: {gwhy}")
                if twin is not None and commits == before:
                    twins[step, twin] = (commits, notes[jp.key][-1])
                continue
            commits += 1
            apply_choice(ctx, state, job, chosen, pre.get(jp.key, ()))
            pods = ctx.pods[job.key]  # nominated: pipelined with evictions (not the pass within the job's)
            ctx.pipelined.update((pods[b.task][b.index].key, b.node) for b in chosen.bindings
                                 if b not in pre.get(jp.key, ()))
            if reason == "preempt":  # then its pass within the job: its pods hold their room on the state
                more = pipeline_within(g, job, frozenset((b.task, b.index) for b in chosen.bindings))
                if not evicts_anywhere(job, reason):  # (a partitioned job's plan says only its victims)
                    chosen.bindings.extend(more)
                    ctx.pipelined.update((pods[b.task][b.index].key, b.node) for b in more)
            r = chosen.region
            if evicts_anywhere(job, reason):  # pipelined anywhere
                out[jp.key] = jp.model_copy(update={
                    "reason": f"{jp.reason}; {topology_reclaim_text(len(chosen.victims), chosen.cost)}",
                    "victims": _victims(chosen, reason), "after_evictions": True, "step": step})
                done.add(jp.key)
                evicting.append(job.queue)
                continue
            text = victim_text(job, len(chosen.bindings), r.label if job.network_topology is not None else None,
                               reason, len(chosen.victims), chosen.cost)
            out[jp.key] = JobPlacement(namespace=job.namespace, name=job.name, queue=job.queue, admitted=True,
                                       reason=text, hyper_node=r.hyper_node, tier=r.tier,
                                       bindings=tuple(chosen.bindings), victims=_victims(chosen, reason),
                                       after_evictions=True, step=step)
            done.add(jp.key)
            whole |= own_groups(job, ctx.snapshot)
            log.info("placement victims: %s %s %d pods, cost %d", job.key, reason, len(chosen.victims), chosen.cost)
            evicting.append(job.queue)
    jobs = []
    for jp in plan.jobs:
        placed = out[jp.key]
        if not placed.admitted and not placed.victims and jp.key in cooling:
            said = notes[jp.key] + ([c] if (c := cooling[jp.key]) is not None else [])
            placed = jp.model_copy(update={"reason": f"{jp.reason}; no victims ({'; '.join(said)})"})
        jobs.append(placed)
    return with_devices(ctx, state, plan.model_copy(update={"jobs": tuple(jobs)}))


def lost_text(lost: list[str]) -> str:
    """Why a bare PodGroup whose running pods another job evicted is not admitted (``jobs.lost_pods``)."""
    return (f"its running pod {lost[0]} was evicted by another job's preempt or reclaim (the plugin tiers offer a "
            "starving gang's pods): its PodGroup cannot have minMember pods without it")


def outlived_text(job: VCJob, gone: list[str]) -> str:
    """Why a job whose running pod another job evicted waits in this cycle (``jobs.outlived_pods``): a VCJob's
    controller makes the pod again, a bare PodGroup's other pods may still make it ready."""
    bare = job.kind == "PodGroup"
    then = ("nothing makes it again, and its other pods may still make the PodGroup ready in a later scheduling cycle"
            if bare else "its job controller makes the pod again, pending, for a later scheduling cycle")
    return (f"its running pod {gone[0]} was evicted by another job's preempt or reclaim (the plugin tiers offer a "
            f"gang's pods at {'minMember' if bare else 'minAvailable'} when the gang plugin offers nothing); {then}")


def victim_notes(ctx: Context, plan: PlacementPlan, proven: bool) -> dict[str, str]:
    """For the jobs a plan does not admit: why each action offers nothing on the plan's final state
    (``job_rules``), or that victims exist but the plan (``proven``: optimal) does not use them."""
    by_key = {j.key: j for j in ctx.jobs}
    state = replay(ctx, plan, victims=True)
    out: dict[str, str] = {}
    for jp in plan.jobs:
        job = by_key[jp.key]
        if (jp.admitted or job.key in ctx.unfit or state.queues.admission_reason(job.queue) is not None
                or not ctx.regions[job.key]):
            continue
        notes = []
        for reason in REASONS:
            rules, why = job_rules(ctx, state, ctx.catalogue, job, reason)
            unused = ("no victim set admits it without losing admissions worth more" if proven else
                      "no victim set found in the time limit admits it")
            refused = f" (others refused: {min(rules.blocked.values())})" if rules is not None and rules.blocked else ""
            notes.append(f"{reason}: {why}" if rules is None else
                         f"{reason}: {len(rules.eligible)} pods may be evicted, but {unused}{refused}")
        out[jp.key] = "; ".join(notes)
    return out
