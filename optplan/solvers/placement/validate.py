"""The independent validator of a placement plan (``placement_violations``, ``validate_placement``): it
replays the plan as Volcano's actions would (the jobs placed without evictions first, then each evicting
job's victims and pods, in job order) and re-checks every rule: static predicates and room (the
oracle), queues, gangs, topology and victims. It trusts none of the planners' decisions and imports
none of their modules (a contract in pyproject.toml): it shares only the oracle, the queue accounting,
the victim rules and the pod facts (``jobs``) with them. Also ``check_inputs``: input Volcano cannot
schedule with."""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import UTC, datetime
from functools import partial
from itertools import groupby
from typing import Any

from optplan.errors import InputError, PlanInvalidError
from optplan.models.limits import SYSTEM_PRIORITY_CLASSES
from optplan.models.placement import CYCLE_STEPS, Binding, JobPlacement, PlacementPlan, SafePreemption, Victim
from optplan.models.quantity import format_milli
from optplan.models.queues import ROOT as ROOT_QUEUE
from optplan.models.queues import QueueTree, VCJob
from optplan.models.schedconf import SEED_ACTIONS, SchedulerConf
from optplan.models.snapshot import Pod, Resources, Snapshot
from optplan.solvers.core.oracle import Capacity, Predicates
from optplan.solvers.placement.gangrules import (
    GANG_REASON,
    capacity_decides,
    gang_victim_violations,
    legacy_reason,
    reclaim_check_for,
)
from optplan.solvers.placement.jobs import (
    gang_shortfall,
    held_pods,
    job_pods,
    job_priority,
    lost_pods,
    outlived_pods,
    own_groups,
    plugin_view,
    preemptor_order,
    shield,
    starving,
)
from optplan.solvers.placement.partitions import NO_VICTIMS, evicts_anywhere, partition_violations, partitioned
from optplan.solvers.placement.queueorder import QueueState, victims_in_order
from optplan.solvers.placement.safety import OFF, approval_reason, evict_blocks, graded_blocks, pdb_over, pdb_refused
from optplan.solvers.placement.tiers import node_victims, preemptee_refused, victim_key
from optplan.solvers.placement.victims import (
    Candidate,
    Catalogue,
    Reason,
    action_refused,
    dims,
    never_tasks,
    reclaimer_blocked,
)
from optplan.solvers.quota.queues import QueueAccount, account_queues, unheld_deserved

log = logging.getLogger(__name__)

def placement_violations(snap: Snapshot, jobs: Sequence[VCJob], plan: PlacementPlan, *,
                         safety: SafePreemption = OFF, now: datetime | None = None,
                         scheduler: SchedulerConf | None = None, repack: bool = True) -> list[str]:
    """Every rule the plan breaks, as short sentences; empty when valid. Shares only the oracle, the
    queue accounting, the pod facts and safe preemption's rules (``safety``, with the planners' ``now``)
    with the planners. Victims are checked as Volcano's plugin tiers choose them (``tiers``); victims of
    gangpreempt or gangreclaim by the bundle rule (``gangrules``) under the ``scheduler`` configuration's
    tiers and arguments. A binding that names devices (``Binding.devices``: the greedy's plans name them) takes
    exactly those; one that names none takes devices by the configuration's device order
    (``SchedulerConf.device_order``) in plan order, and where it finds none, the plan's pods on that node that
    name none may be packed again (``Capacity.repack``); ``repack`` False: not (the exact model's plans, which
    name no devices and must hold in plan order, the order Volcano's device walk meets them in)."""
    out: list[str] = []
    given = {j.key: j for j in jobs}
    listed = [jp.key for jp in plan.jobs]
    for k, n in Counter(listed).items():
        if n > 1:
            out.append(f"job {k} is listed {n} times")
    for k in sorted(set(given) - set(listed)):
        out.append(f"job {k} is missing from the plan")
    gone: dict[str, int] = {}  # victim -> the step of the job that evicts it
    for jp in plan.jobs:
        for gv in jp.victims:
            gone[f"{gv.namespace}/{gv.name}"] = jp.step
    for jp in plan.jobs:  # a job admitted at or after the step that evicts its running pod (a gang lost before)
        lost = [k for k in lost_pods(given[jp.key], snap, gone) if gone[k] <= jp.step] \
            if jp.admitted and jp.key in given else []
        if lost:
            out.append(f"job {jp.key} is admitted but its running pod {lost[0]} is a victim")
        again = [k for k in outlived_pods(given[jp.key], snap, gone)
                 if gone[k] > jp.step or (gone[k] == jp.step and not at_later_allocate(jp))] \
            if jp.admitted and jp.key in given else []
        if again:  # made again (a VCJob's) or dropped (a bare PodGroup's) after the eviction (a later cycle's
            # allocate places the victims of its jobs' earlier cycles first): a later cycle places the job
            out.append(f"job {jp.key} is admitted at its running pod {again[0]}'s eviction or before it")
    cap = Capacity(snap, (scheduler or SchedulerConf()).device_order)
    placed_on: dict[str, list[Pod]] = defaultdict(list)  # node -> the plan's pods added there so far
    tree = QueueTree(snap.queues)
    accounts = account_queues(snap, hierarchical=True)
    allocated = {q: dict(a.allocated) for q, a in accounts.items()}
    touched: dict[str, set[str]] = defaultdict(set)  # queue -> resources new pods charged to it
    cat: Catalogue | None = None  # the possible victims, built for the first plan job with victims
    taken: Counter[str] = Counter()  # PodGroup -> pods evicted so far
    evicted: set[str] = set()
    static = Predicates(snap)
    # Volcano's actions: allocate places every job it can, then preempt evicts for the rest, then reclaim
    landed: dict[str, int] = {}  # node -> the last replay position a pod lands there
    landed_queue: dict[str, int] = {}  # queue -> the last replay position a job of it is admitted
    placed_groups: Counter[str] = Counter()  # a running gang's PodGroup -> the pods allocate placed for it
    unplaced: list[tuple[int, JobPlacement]] = []  # jobs not admitted that keep victims, at their position
    unnamed = _unnamed_pods(plan, given, tree)  # queue -> pipelined pods the plan does not name, at most
    holding: dict[str, int] = defaultdict(int)  # what the jobs not admitted replayed so far may have pipelined
    # admitted jobs whose victims an earlier cycle evicted (``evicted_earlier``): their victims go before the
    # first job a later cycle placed (lenient: the plan does not say which cycle evicted them)
    early = [jp for jp in plan.jobs if jp.admitted and jp.key in given and evicted_earlier(given[jp.key], jp)]
    flush = list(early)
    freed: set[str] = set()  # jobs of a later cycle's allocate whose victims went before its first placement
    steps_freed: set[int] = set()

    def own_victims(jp: JobPlacement) -> bool:
        return bool(jp.victims) and not (jp.admitted and jp.key in given and evicted_earlier(given[jp.key], jp))

    def catalogue() -> Catalogue:
        """The possible victims, built for the first job with victims (the time only prices them)."""
        nonlocal cat
        if cat is None:
            cat = shield(Catalogue.build(snap, datetime.now(UTC), set(tree.queues)), snap, jobs)
        return cat

    def victims_gone(job: VCJob, jp: JobPlacement) -> None:
        """The job's victims checked against the rules on the state so far, then gone (capacity, queues)."""
        c = catalogue()
        if {v.reason for v in jp.victims} & set(GANG_REASON):  # gangpreempt, gangreclaim: the bundle rule
            out.extend(_gang_victims(snap, job, jp, c, accounts, allocated, taken, evicted,
                                     scheduler or SchedulerConf()))
        else:
            held_back = _queue_held_back(job, jp, tree, accounts, allocated)
            out.extend(_victim_violations(snap, job, jp, c, tree, accounts,
                                          _with_unnamed(allocated, unnamed, tree, job.queue), taken, evicted,
                                          safety, placed_groups, None if held_back else cap.free))
            if not held_back:
                out.extend(_more_than_enough(snap, job, jp, cap, holding))
        _free_victims(snap, jp, c, tree, cap, allocated)

    def earlier_victims_gone(job: VCJob, jp: JobPlacement) -> None:
        """The victims an earlier cycle evicted for a job the plan does not place next to them (not admitted, or
        placed away from them by a later cycle): its pipelined pods' room and queue checked, the victims asked of
        the tiers for some of its pods there, then gone."""
        c = catalogue()
        out.extend(_pipelined_violations(snap, job, jp, c, tree, cap, accounts, allocated, taken, evicted, safety,
                                         placed_groups, unnamed))
        out.extend(_unplaced_victim_violations(snap, job, jp, c, accounts, taken, evicted, safety))
        _free_victims(snap, jp, c, tree, cap, allocated)

    ordered = sorted(plan.jobs, key=action_rank)
    for pos, jp in enumerate(ordered):
        if at_later_allocate(jp) and jp.step not in steps_freed:
            # an earlier cycle evicted the victims of every job this allocate places after them: all gone
            # before its first placement, in the replay's order, and checked before those of the jobs placed away
            # from their victims (``flush``, below; family seed 12 of test_placement_family needs this order)
            steps_freed.add(jp.step)
            for other in ordered[pos:]:
                job_o = given.get(other.key)
                if (other.step == jp.step and other.admitted and own_victims(other) and job_o is not None
                        and job_o.queue in tree.queues and other.queue == job_o.queue):
                    victims_gone(job_o, other)
                    freed.add(other.key)
        if flush and in_later_cycle(jp):
            for e in flush:
                earlier_victims_gone(given[e.key], e)
            flush = []
        for b in jp.bindings if jp.admitted else ():
            landed[b.node] = pos
            landed_queue[jp.queue] = pos
        job = given.get(jp.key)
        if job is None:
            out.append(f"job {jp.key} is not one of the jobs to place")
            continue
        if jp.admitted and not jp.after_evictions and not jp.victims:
            for group in own_groups(job, snap):
                placed_groups[group] += len(jp.bindings)
        if jp.queue != job.queue:
            out.append(f"job {jp.key}: queue {jp.queue} but the job names {job.queue}")
        if not jp.admitted:
            if jp.victims and jp.step < CYCLE_STEPS:
                out.append(f"job {jp.key} is not admitted but has victims")
            elif jp.victims:  # evicted in a scheduling cycle whose room the next allocate gave to other jobs
                unplaced.append((pos, jp))
                earlier_victims_gone(job, jp)
                for r, x in _requested(job).items():
                    holding[r] += x
            if jp.bindings:
                out.append(f"job {jp.key} is not admitted but has bindings")
            if not jp.reason:
                out.append(f"job {jp.key} is not admitted and gives no reason")
            continue
        if job.queue not in tree.queues:
            out.append(f"job {jp.key}: queue {job.queue} does not exist")
            continue
        if not tree.is_leaf(job.queue) or job.queue == ROOT_QUEUE:
            out.append(f"job {jp.key}: queue {job.queue} is not a leaf queue")
        if not tree.is_open(job.queue):
            out.append(f"job {jp.key}: queue {job.queue} is not Open")
        if partitioned(job) and any(vic.reason in GANG_REASON for vic in jp.victims):
            out.append(f"job {jp.key}: {NO_VICTIMS}")
        outlived = set(outlived_pods(job, snap, gone))  # evicted before (above): not running
        running = {t: {i: p for i, p in ps.items() if p.key not in outlived} for t, ps in held_pods(job, snap).items()}
        dropped = outlived if job.kind == "PodGroup" else set()  # a bare PodGroup's: gone for good
        if jp.victims and not {v.reason for v in jp.victims} & set(GANG_REASON):
            out.extend(_never_violations(job, jp, running, never_tasks(snap, job)))
        if own_victims(jp) and jp.key not in freed:  # evicted_earlier's: replayed before the later cycles
            victims_gone(job, jp)
        pods = job_pods(job)
        placed: Counter[str] = Counter()
        seen: set[tuple[str, int]] = set()
        nodes: set[str] = set()
        for b in jp.bindings:
            where = f"job {jp.key} pod {b.pod_name(job.name)}"
            if b.task not in pods or not 0 <= b.index < len(pods[b.task]):
                out.append(f"{where}: no such task replica")
                continue
            if b.index in running.get(b.task, {}):
                out.append(f"{where}: that replica runs already")
                continue
            if f"{job.namespace}/{pods[b.task][b.index].name}" in dropped:
                out.append(f"{where}: that pod was evicted and nothing makes it again")
                continue
            if (b.task, b.index) in seen:
                out.append(f"{where} is bound twice")
                continue
            seen.add((b.task, b.index))
            if b.node not in snap.nodes:
                out.append(f"{where}: unknown node {b.node}")
                continue
            pod = pods[b.task][b.index]
            if b.pod is not None and b.pod != pod.name:
                out.append(f"{where}: the replica is pod {pod.name}")
            reason = static.reason(pod, b.node) or cap.fit_reason(pod, b.node, b.devices)
            devices = b.devices
            if repack and devices is None and reason is not None and reason == cap.device_reason(pod, b.node):
                # the devices alone: may the plan's pods there that name none be packed so that this one fits too?
                devices = cap.repack(b.node, placed_on[b.node], pod)
                reason = None if devices is not None else reason
            if reason is not None:
                out.append(f"{where} on {b.node}: {reason}")
            cap.add(pod, b.node, devices)
            if b.devices is None:
                placed_on[b.node].append(pod)
            placed[b.task] += 1
            nodes.add(b.node)
            for q in (job.queue, *tree.ancestors(job.queue)):
                for r, v in pod.requests.items():
                    allocated[q][r] = allocated[q].get(r, 0) + v
                    touched[q].add(r)
        short = gang_shortfall(job, placed, Counter({t: len(ps) for t, ps in running.items()}))
        if short is not None:
            out.append(f"job {jp.key} is admitted but the gang is not ready: {short}")
        if not jp.bindings:
            out.append(f"job {jp.key} is admitted but places no pod")
        held_at = {p.node_name for ps in running.values() for p in ps.values() if p.occupying and p.node_name}
        out.extend(_topology_violations(jp, job, nodes, snap, frozenset(held_at)))
        if partitioned(job):
            topo = snap.topology
            inside = topo.members.get(jp.hyper_node, frozenset()) if jp.hyper_node else frozenset(snap.nodes)
            bound = {t.name: {b.index: b.node for b in jp.bindings if b.task == t.name} for t in job.tasks}
            at = {t: {i: p.node_name for i, p in ps.items() if p.node_name} for t, ps in running.items()}
            out.extend(partition_violations(snap, job, bound, at, inside))
        for q in (job.queue, *tree.ancestors(job.queue)):  # after each job: evictions may not excuse it later
            real = accounts[q].real_capability
            for r in sorted(touched[q]):
                msg = (f"queue {q}: {r} allocated {format_milli(allocated[q].get(r, 0))} > realCapability "
                       f"{format_milli(real.get(r, 0))} after placement")
                if allocated[q].get(r, 0) > real.get(r, 0) and msg not in out:
                    out.append(msg)
    for jp in early:  # a victim away from where the job lands: on a node one of its pods could have gone to
        job = given[jp.key]
        lands = {b.node for b in jp.bindings}
        mine = [p for ps in job_pods(job).values() for p in ps]
        for vic in jp.victims:
            node = snap.nodes.get(vic.node)
            if vic.node in lands or node is None:
                continue
            if not any(static.reason(p, vic.node) is None and all(node.allocatable.get(r, 0) >= x
                                                                 for r, x in p.requests.items() if x > 0)
                       for p in mine):
                out.append(f"job {jp.key} victim {vic.namespace}/{vic.name}: on node {vic.node}, where the job "
                           "places no pod and none of its pods could go")
    for turn, waiting in unplaced:
        if waiting.key in given and reclaimed_anywhere(given[waiting.key], waiting):
            continue  # its room may stay unused: Volcano's next allocate places the job under its topology or not
        for vic in waiting.victims:
            c = cat.candidate(f"{vic.namespace}/{vic.name}") if cat is not None else None
            if landed.get(vic.node, -1) <= turn and (c is None or not any(
                    pos > turn and _frees_queue_room(tree, c.queue, q) for q, pos in landed_queue.items())):
                out.append(f"job {waiting.key} is not admitted but has victims whose room no job placed after it "
                           f"takes ({vic.namespace}/{vic.name} on {vic.node})")
    out.extend(_safety_violations(snap, given, plan, safety, now or datetime.now(UTC)))
    return out


def evicted_earlier(job: VCJob, jp: JobPlacement) -> bool:
    """The job's victims were evicted in an earlier scheduling cycle than its placement, away from where
    it lands, and where its pods were pipelined then is not in the plan, so they are checked as those of
    a job not admitted are (``_unplaced_victim_violations``): a job admitted by a later cycle's allocate
    (``JobPlacement.step`` a multiple of ``CYCLE_STEPS``, past the first cycle) with a victim on a node it
    places no pod on (the room went to jobs before it, and it to other room), or with a network topology
    and reclaim's victims (its reclaim walked every node, one pod a cycle maybe, on the queues' state of
    each); or a job with a network topology not admitted whose victims are reclaim's
    (``reclaimed_anywhere``)."""
    if not jp.victims or {v.reason for v in jp.victims} & set(GANG_REASON):
        return False
    if not jp.admitted:
        return reclaimed_anywhere(job, jp)
    lands = {b.node for b in jp.bindings}
    reclaimed = all(evicts_anywhere(job, v.reason) for v in jp.victims)
    return (at_later_allocate(jp)
            and (reclaimed or any(v.node not in lands for v in jp.victims)))


def reclaimed_anywhere(job: VCJob, jp: JobPlacement) -> bool:
    """A job with a network topology, not admitted, whose victims an earlier cycle's reclaim evicted:
    Volcano's reclaim walks every node for it (no HyperNode step) and pipelines its pods there; the next
    cycle's allocate places it under its limit, maybe on other nodes, or not at all — no job need land
    on its victims' nodes."""
    return (not jp.admitted and jp.step >= CYCLE_STEPS
            and bool(jp.victims) and all(evicts_anywhere(job, v.reason) for v in jp.victims))


def _frees_queue_room(tree: QueueTree, victim_queue: str, queue: str) -> bool:
    """An eviction from ``victim_queue`` frees room that a job of ``queue`` may need: the victim's queue
    itself, or one under a queue (not root) whose allocation the victim's pod leaves too (a capability or
    realCapability that held the job back)."""
    if queue == victim_queue:
        return True
    return bool((set(tree.ancestors(queue)) & set(tree.ancestors(victim_queue))) - {ROOT_QUEUE})


def action_rank(jp: JobPlacement) -> tuple[bool, int, bool]:
    """When a job's placement happens in the plan's replay: allocate's first, then the jobs placed after
    evictions by the step the planner took them in (``JobPlacement.step``: the greedy's preempt pass
    before its reclaim pass, as Volcano runs its actions), each group in plan order — but at a later
    cycle's allocate (a step a multiple of ``CYCLE_STEPS``, past the first cycle) the jobs with victims first:
    an earlier cycle evicted them, so their room is free before that allocate places any job."""
    return jp.after_evictions or bool(jp.victims), jp.step, not (at_later_allocate(jp) and bool(jp.victims))


def at_later_allocate(jp: JobPlacement) -> bool:
    """The job is placed by a later scheduling cycle's allocate (a step a multiple of ``CYCLE_STEPS``, past the
    first cycle)."""
    return jp.step >= 2 * CYCLE_STEPS and jp.step % CYCLE_STEPS == 0


def in_later_cycle(jp: JobPlacement) -> bool:
    """The job's turn in the replay comes in a scheduling cycle after the first: the victims of the jobs
    ``evicted_earlier`` are freed before the first such turn (the exact model's anchor replays them so)."""
    return action_rank(jp)[:2] >= (True, 2 * CYCLE_STEPS)


def _safety_violations(snap: Snapshot, jobs: Mapping[str, VCJob], plan: PlacementPlan, safety: SafePreemption,
                       now: datetime) -> list[str]:
    """Safe preemption's plan-wide rules (``safety``): PDBs over the plan's victims, the cooldown per queue,
    the approval marks. The static ones (several PDBs, grades) are checked per victim."""
    out: list[str] = []
    victims = [snap.pods[k] for jp in plan.jobs for v in jp.victims if (k := f"{v.namespace}/{v.name}") in snap.pods]
    over = pdb_over(safety, snap, victims)
    if over is not None:
        out.append(over)
    evicting: list[str] = []
    for jp in plan.jobs:
        job = jobs.get(jp.key)
        if job is None:
            continue
        if jp.victims:
            why = evict_blocks(safety, snap, job, now, evicting)
            if why is not None:
                out.append(f"job {jp.key} evicts: {why}")
            evicting.append(jp.queue)
        want = approval_reason(safety, snap, job) if jp.victims else None
        if jp.approval_required != want:
            out.append(f"job {jp.key}: approvalRequired is {jp.approval_required!r}, the approval rule says {want!r}")
    return out



def _free_victims(snap: Snapshot, jp: JobPlacement, cat: Catalogue, tree: QueueTree, cap: Capacity,
                  allocated: dict[str, dict[str, int]]) -> None:
    """The replay after a job's victims go: their room and their queues' allocation freed."""
    for vic in jp.victims:
        p = snap.pods.get(f"{vic.namespace}/{vic.name}")
        c = cat.candidate(f"{vic.namespace}/{vic.name}")
        if p is not None and p.node_name is not None and p.occupying:
            cap.remove(p, p.node_name)
            if c is not None:
                for q in (c.queue, *tree.ancestors(c.queue)):
                    for r, x in p.requests.items():
                        allocated[q][r] = allocated[q].get(r, 0) - x


def _unplaced_victim_violations(snap: Snapshot, job: VCJob, jp: JobPlacement, cat: Catalogue,
                                accounts: dict[str, QueueAccount], taken: Counter[str], evicted: set[str],
                                safety: SafePreemption) -> list[str]:
    """The victims of a job the plan does not admit, which its action evicted in an earlier scheduling
    cycle (``JobPlacement.step`` of the greedy's cycles, at least ``CYCLE_STEPS``) while the next cycle's
    allocate gave the room to other jobs: each a running pod of a PodGroup, evicted once, by one action,
    that the action may offer this job (its queue, the job's networkTopology, safe preemption); and a job
    placed after it lands on each victim's node (checked by the caller, but for a waiting topology job's reclaim,
    ``reclaimed_anywhere``). The plugin tiers on each victim node are ``_pipelined_violations``'. Updates
    ``taken`` and ``evicted``."""
    out: list[str] = []
    who = f"job {jp.key}"
    if len({v.reason for v in jp.victims}) > 1:
        out.append(f"{who}: victims of both preempt and reclaim (one action places a job)")
    priority = job_priority(job, snap)
    for v in jp.victims:
        key = f"{v.namespace}/{v.name}"
        where = f"{who} victim {key}"
        c = _victim_candidate(snap, cat, v, where, key in evicted, out)
        if c is None:
            continue
        why = (action_refused(job, legacy_reason(v.reason))
               or preemptee_refused(c, legacy_reason(v.reason), job.queue, accounts[c.queue].reclaimable)
               or _safety_refused(snap, c, v.reason, priority, safety))
        if why is not None:
            out.append(f"{where} ({v.reason}): {why}")
        evicted.add(c.key)
        taken[c.group] += 1
    return out


def _pipelined_violations(snap: Snapshot, job: VCJob, jp: JobPlacement, cat: Catalogue, tree: QueueTree,
                          cap: Capacity, accounts: dict[str, QueueAccount], allocated: dict[str, dict[str, int]],
                          taken: Counter[str], evicted: set[str], safety: SafePreemption,
                          placed: Counter[str], unnamed: dict[str, dict[str, int]]) -> list[str]:
    """The plugin tiers for the victims of a job whose action pipelined its pods where the plan does not say (a
    job an earlier cycle evicted for and a later cycle placed elsewhere, ``evicted_earlier``; a job not admitted
    that keeps victims): on each victim node, Volcano's preempt or reclaim placed some pods of the job there
    and the tiers offered them the victims, as for a placed job's victims (``_victim_violations``, the same
    rule). The pods are not in the plan: some task's pods, one up to as many as fit the node with the victims
    gone, must get the node's victims from the tiers on the replay's state, or with the job's victims on its
    other nodes gone first, or those on the nodes before it in the node list (by name: the walk's order; the
    order of its pipelined pods is not in the plan either; ``taken`` and ``evicted`` left unchanged). Lenient
    where the plan does not say: the pods every such job pipelined (every pending pod of theirs,
    ``_unnamed_pods``: the plan keeps neither where nor when, a job's victims of several cycles listed at its
    last) count in the other queues' allocations the capacity plugin reads (more allocation only lets a victim
    queue give more)."""
    seen = _with_unnamed(allocated, unnamed, tree, job.queue)
    by_node: dict[str, list[Victim]] = defaultdict(list)
    for v in jp.victims:
        if v.reason not in GANG_REASON:
            by_node[v.node].append(v)
    out: list[str] = []
    for node, here in sorted(by_node.items()):
        if node not in cap.free or any(_refused(job, v, cat, accounts) for v in here):
            continue  # reported by the caller
        room = dict(cap.free[node])
        for v in here:
            for r, x in snap.pods[f"{v.namespace}/{v.name}"].requests.items():
                room[r] = room.get(r, 0) + x
        why = _first_offer(snap, job, jp, here, room, cat, tree, accounts, seen, taken, evicted, safety, placed)
        # the job's victims elsewhere gone first (its dry run's pods before, in an order unsaid): all of them, or
        # those on the nodes before this one in the node list (the walk's order, by name)
        for first_gone in ([n for n in by_node if n != node], [n for n in by_node if n < node]):
            if why is None:
                break
            gone_seen = {q: dict(a) for q, a in seen.items()}
            gone_taken, gone_evicted = Counter(taken), set(evicted)
            for node2, there in by_node.items():
                for v in there if node2 in first_gone else ():
                    c = cat.candidate(f"{v.namespace}/{v.name}")
                    if c is not None and c.key not in gone_evicted:
                        _evict(c, gone_evicted, gone_taken, gone_seen, tree)
            if _first_offer(snap, job, jp, here, room, cat, tree, accounts, gone_seen, gone_taken, gone_evicted,
                            safety, placed) is None:
                why = None
        if why is not None:
            out.append(f"job {jp.key}: its pipelined pods on {node} do not get its victims there from Volcano's "
                       f"plugin tiers ({why})")
    return out


def _with_unnamed(allocated: dict[str, dict[str, int]], unnamed: dict[str, dict[str, int]], tree: QueueTree,
                  queue: str) -> dict[str, dict[str, int]]:
    """The queues' allocations the capacity plugin reads for a job of ``queue``: the replay's, and in every other
    queue (not ``queue`` nor its ancestors) what the pods the plan does not name may hold (``_unnamed_pods``:
    Volcano's pipelined pods count in their queue's allocation). Lenient: more allocation only lets a victim
    queue give more."""
    seen = {q: dict(a) for q, a in allocated.items()}
    mine = set(tree.ancestors(queue)) | {queue}
    for q, extra in unnamed.items():
        if q not in mine:
            for r, x in extra.items():
                seen[q][r] = seen[q].get(r, 0) + x
    return seen


def _refused(job: VCJob, v: Victim, cat: Catalogue, accounts: dict[str, QueueAccount]) -> bool:
    """The victim is no candidate, or its action may never offer it to the job (``_unplaced_victim_violations``
    reports it)."""
    c = cat.candidate(f"{v.namespace}/{v.name}")
    act = legacy_reason(v.reason)
    return c is None or (action_refused(job, act) or preemptee_refused(c, act, job.queue,
                                                                        accounts[c.queue].reclaimable)) is not None


def _unnamed_pods(plan: PlacementPlan, given: Mapping[str, VCJob], tree: QueueTree) -> dict[str, dict[str, int]]:
    """Queue -> what the pending pods of the plan's jobs whose pipelined pods it does not name request, charged
    to the queue and its ancestors: a job not admitted that keeps victims; an admitted one ``evicted_earlier``;
    a job not admitted without victims that preempt may take (no network topology, ``action_refused``) and whose
    gang needs more than one pod: Volcano's preempt, its pass within each starving job, pipelines and commits the
    job's pods that fit, victims or not (``evict.pipeline_within``), and the capacity plugin counts them in the
    queue's allocation (a job whose minimum is one pod and whose pod was pipelined is placed by the next cycle's
    allocate: admitted)."""
    out: dict[str, dict[str, int]] = defaultdict(dict)
    for jp in plan.jobs:
        job = given.get(jp.key)
        if job is None or (jp.admitted and not evicted_earlier(job, jp)):
            continue
        if not jp.victims and (jp.admitted or action_refused(job, "preempt") is not None or job.min_available <= 1):
            continue
        for r, x in _requested(job).items():
            for q in (job.queue, *tree.ancestors(job.queue)):
                out[q][r] = out[q].get(r, 0) + x
    return out


def _requested(job: VCJob) -> dict[str, int]:
    """What all the job's pods request (pipelined pods the plan does not name hold at most that)."""
    out: dict[str, int] = defaultdict(int)
    for ps in job_pods(job).values():
        for p in ps:
            for r, x in p.requests.items():
                out[r] += x
    return dict(out)


def _first_offer(snap: Snapshot, job: VCJob, jp: JobPlacement, here: list[Victim], room: dict[str, int],
                 cat: Catalogue, tree: QueueTree, accounts: dict[str, QueueAccount],
                 allocated: dict[str, dict[str, int]], taken: Counter[str], evicted: set[str],
                 safety: SafePreemption, placed: Counter[str]) -> str | None:
    """None when some task's pods, or the job's pods task after task (one, two, ... as many as ``room`` holds),
    get the victims ``here`` (one node's) from the tiers (``_victim_violations``); else the first trial's first
    violation."""
    pods = job_pods(job)
    running = held_pods(job, snap)
    free = {t.name: [i for i in range(len(pods.get(t.name, []))) if i not in running.get(t.name, {})]
            for t in job.tasks}
    mixed = [(t, i) for t in free for i in free[t]]
    first: str | None = None
    for row in [*([(t.name, i) for i in free[t.name]] for t in job.tasks), mixed]:
        left = dict(room)
        for k, (task, i) in enumerate(row, start=1):
            req = pods[task][i].requests
            if any(left.get(r, 0) < x for r, x in req.items() if x > 0 and r != "pods"):
                break
            for r, x in req.items():
                left[r] = left.get(r, 0) - x
            trial = jp.model_copy(update={"victims": tuple(here), "admitted": True, "bindings": tuple(
                Binding(task=tk, index=ix, node=here[0].node) for tk, ix in row[:k])})
            why = _victim_violations(snap, job, trial, cat, tree, accounts, {q: dict(a) for q, a in allocated.items()},
                                     Counter(taken), set(evicted), safety, placed)
            if not why:
                return None
            first = first or why[0]
    return first


def _victim_candidate(snap: Snapshot, cat: Catalogue, v: Victim, where: str, twice: bool,
                      out: list[str]) -> Candidate | None:
    """The catalogue's candidate a victim names, or None with the reason appended to ``out`` (no such pod,
    evicted twice, not a victim); a victim named on another node than its pod's is reported and kept."""
    key = f"{v.namespace}/{v.name}"
    if snap.pods.get(key) is None:
        out.append(f"{where}: no such pod")
        return None
    if twice:
        out.append(f"{where}: evicted twice")
        return None
    c = cat.candidate(key)
    if c is None:
        why = cat.protected.get(key) or "not a running pod of a PodGroup in a known queue"
        out.append(f"{where}: may not be a victim ({why})")
        return None
    if v.node != c.node:
        out.append(f"{where}: runs on {c.node}, not {v.node}")
    return c

def _victim_violations(snap: Snapshot, job: VCJob, jp: JobPlacement, cat: Catalogue, tree: QueueTree,
                       accounts: dict[str, QueueAccount], allocated: dict[str, dict[str, int]],
                       taken: Counter[str], evicted: set[str], safety: SafePreemption,
                       placed: Counter[str] | None = None,
                       room: Mapping[str, Mapping[str, int]] | None = None) -> list[str]:
    """The victims of one job against the rules (``victims``, ``tiers``): pods that may be victims, of the
    action's queues, on nodes where the job places a pod, each one allowed by Volcano's plugin tiers
    (``tiers.node_victims``). Volcano's action takes the job's pods in turn and asks the tiers once per pod
    and node, then evicts from that answer (a round), so the rounds are replayed in the order of the job's
    bindings: one node's evictions change what a gang offers on the next (its ready pods). With ``room``
    (each node's room before the job's evictions; None where preempt evicts for its queue's room too,
    ``_queue_held_back``) a round evicts what the answer offers in the victims' order (across queues the
    capacity plugin's queue order first, ``queueorder.victim_queue_key``) only until the pod fits, as
    Volcano does; when that replay leaves a victim unoffered, or without ``room``, each round takes every
    victim of the plan's on the node that the answer offers. Lenient where Volcano's order is random or the
    plan does not say: either replay may be Volcano's; the node's victims are put first among its pods (the
    gang and drf plugins see the node's pods in Go map order); drf's preemptor share is the job's running
    pods with one pod. The plugins also see the node's running pods of other jobs being placed
    (``jobs.plugin_view``), whose gangs count the pods allocate placed for them (``placed``: PodGroup ->
    pods). Also the capacity plugin's PreemptiveFn per reclaiming pod (``reclaimer_blocked``).
    Updates ``taken`` and ``evicted``; the caller frees the victims' capacity and allocations."""
    placed = placed if placed is not None else Counter()
    own = own_groups(job, snap)
    out: list[str] = []
    who = f"job {jp.key}"
    if {b.task for b in jp.bindings} <= never_tasks(snap, job):
        out.append(f"{who}: the PriorityClass of every task it places has preemptionPolicy Never but it evicts pods")
    priority = job_priority(job, snap)
    before = {q: dict(a) for q, a in allocated.items()}
    reasons = {v.reason for v in jp.victims}
    if len(reasons) > 1:
        out.append(f"{who}: victims of both preempt and reclaim (one action places a job)")
    pods = job_pods(job)
    bound = [(b, pods[b.task][b.index]) for b in jp.bindings if b.task in pods and 0 <= b.index < len(pods[b.task])]
    bound = _in_preemptor_order(snap, job, pods, bound)
    if "reclaim" in reasons:
        out.extend(_reclaimer_violations(snap, job, jp, bound, before[job.queue], accounts[job.queue]))
    first: dict[str, int] = {}  # node -> the position of the job's first pod there
    for i, (b, _p) in enumerate(bound):
        first.setdefault(b.node, i)
    held = [p for ps in held_pods(job, snap).values() for p in ps.values() if p.occupying]
    if ("reclaim" in reasons and jp.step % CYCLE_STEPS and jp.bindings  # placed by its reclaim, not a later allocate
            and not starving(job, Counter(b.task for b in jp.bindings[:-1]), Counter({"": len(held)}))):
        out.append(f"{who}: reclaim places {len(jp.bindings)} pods ({len(held)} running): it stops trying a job's pods "
                   f"once it is no longer starving (minAvailable {job.min_available})")
    queue_alloc = {q: dict(a) for q, a in allocated.items()}
    total: dict[str, int] = defaultdict(int)
    for node in snap.nodes.values():
        for r, x in node.allocatable.items():
            total[r] += x

    def alloc_without(gone: set[str]) -> Callable[[str], dict[str, int]]:
        """A victim PodGroup's allocation with the pods ``gone`` evicted (drf's and the victim order's)."""
        def group_alloc(g: str) -> dict[str, int]:
            a: dict[str, int] = defaultdict(int)
            for k in cat.groups[g].occupying:
                if k not in gone:
                    for r, x in snap.pods[k].requests.items():
                        a[r] += x
            return a
        return group_alloc

    checked: list[tuple[Victim, Candidate]] = []
    for v in jp.victims:
        key = f"{v.namespace}/{v.name}"
        where = f"{who} victim {key}"
        c = _victim_candidate(snap, cat, v, where, key in evicted or any(key == x.key for _v, x in checked), out)
        if c is None:
            continue
        act = legacy_reason(v.reason)
        why2 = (action_refused(job, act)
                or preemptee_refused(c, act, job.queue, accounts[c.queue].reclaimable)
                or _safety_refused(snap, c, v.reason, priority, safety))
        if why2 is not None:
            out.append(f"{where} ({v.reason}): {why2}")
        if c.group in own:
            out.append(f"{where}: a running pod of its own job")
        if c.node not in first:
            out.append(f"{where}: on node {c.node}, where the job places no pod")
        checked.append((v, c))
    order = victim_key(alloc_without(evicted), total)
    ordered = sorted(checked, key=lambda vc: (first.get(vc[1].node, len(bound)), vc[1].node, order(vc[1])))
    by_node = {node: list(grouped) for node, grouped in groupby(ordered, key=lambda vc: vc[1].node)}

    def fits(free: dict[str, int] | None, need: dict[str, int]) -> bool:
        return free is not None and all(free.get(r, 0) >= x for r, x in need.items())

    def rounds(just_enough: bool) -> tuple[dict[str, list[tuple[Victim, Candidate]]], dict[str, list[str]],
                                           Counter[str]]:
        """Volcano's action takes the job's pods in turn and asks the tiers for each on the node it tries (a
        round), so the rounds go in the order of the bindings: a pod's evictions on one node change what a gang
        offers on the next (its ready pods). ``just_enough``: a round evicts what the tiers offer in victim
        order only until the pod fits the node's room (``room``), as Volcano does; otherwise every victim of
        the plan's on the node that they offer. On copies of the state; the victims left, the capacity plugin's
        refusals per node, the gangs' evicted pods."""
        ev, tk, qa = set(evicted), Counter(taken), {q: dict(a) for q, a in queue_alloc.items()}
        group_alloc = alloc_without(ev)
        left_on = {at: list(here) for at, here in by_node.items()}
        have = {at: dict(room[at]) for at in by_node if at in room} if just_enough and room is not None else {}
        refusals: dict[str, list[str]] = {}
        for b, p in bound:
            at = b.node
            left = left_on.get(at)
            need = {r: x for r, x in p.requests.items() if x > 0 and r != "pods"}
            free = have.get(at)
            if left and not fits(free, need):
                reason = legacy_reason(left[0][0].reason)
                mine: dict[str, int] = defaultdict(int)
                for pod in [*held, p]:
                    for r, x in pod.requests.items():
                        mine[r] += x
                keys = {c.key for _v, c in left}
                preemptees = [x for x in cat.by_node.get(at, []) if x.key not in ev and x.key not in keys
                              and preemptee_refused(x, reason, job.queue, accounts[x.queue].reclaimable) is None]
                seen = plugin_view(cat, at, [], own, partial(_handed, reason, job.queue, accounts), ev | keys)
                refused: list[str] = []
                allowed, _tier = node_victims(
                    reason, [*(c for _v, c in left), *preemptees, *seen], preemptor_priority=priority,
                    ready=lambda g: cat.groups[g].ready - tk[g] + placed[g],
                    min_member=lambda g: cat.groups[g].min_member,
                    preemptor_allocated=mine, job_allocated=group_alloc, total=total,
                    need=dims(p.requests), allocated=qa,
                    deserved={q: a.effective_deserved for q, a in accounts.items()},
                    listed={q: a.deserved_listed for q, a in accounts.items()},
                    guarantee={q: a.guarantee for q, a in accounts.items()},
                    order=partial(_in_order, snap, accounts, qa, job.queue, victim_key(group_alloc, total)),
                    refused=refused)
                mine_left = {c.key: (v, c) for v, c in left}
                for cand in allowed:  # in the victims' order
                    if cand.key not in mine_left:
                        continue
                    if fits(free, need):
                        break
                    _evict(cand, ev, tk, qa, tree)
                    del mine_left[cand.key]
                    if free is not None:
                        for r, n in cand.pod.requests.items():
                            free[r] = free.get(r, 0) + n
                kept = [(v, c) for v, c in left if c.key in mine_left]
                left_on[at] = kept
                if kept:
                    refusals[at] = refused
            if free is not None:
                for r, x in p.requests.items():
                    free[r] = free.get(r, 0) - x
        return left_on, refusals, tk

    left_on, refusals, tk = rounds(True) if room is not None else ({}, {}, Counter())
    if room is None or any(left for at, left in left_on.items() if at in first):  # either replay may be Volcano's
        left_on, refusals, tk = rounds(False)
    for at, left in left_on.items():
        if at not in first:
            continue
        for v, c in left:
            also = f"; the capacity plugin: {refusals[at][0]}" if refusals.get(at) else ""
            out.append(f"{who} victim {c.key} ({v.reason}): Volcano's plugin tiers do not offer it on "
                       f"{c.node} (PodGroup {c.group}: ready {cat.groups[c.group].ready - tk[c.group]}, "
                       f"minMember {cat.groups[c.group].min_member}{also})")
    for _v, c in ordered:
        if c.key not in evicted:
            _evict(c, evicted, taken, queue_alloc, tree)
    return out


def _never_violations(job: VCJob, jp: JobPlacement, running: Mapping[str, Mapping[int, Pod]],
                      never: Collection[str]) -> list[str]:
    """A job with a task of preemptionPolicy Never that evicts by preempt or reclaim: vc-scheduler v1.15.1's
    actions pass over that task's pods (preempt's ``taskEligibleToPreempt``, reclaim's loop), so the job's other
    pods, with its running ones, must make the gang pipelined (minAvailable and the task minimums,
    ``gang_shortfall``), else Volcano discards the evictions. ``running``: its running pods (``held_pods``)."""
    if not never:
        return []
    short = gang_shortfall(job, Counter(b.task for b in jp.bindings if b.task not in never),
                           Counter({t: len(ps) for t, ps in running.items()}))
    if short is None:
        return []
    return [f"job {jp.key}: evicts pods, but preempt and reclaim skip the pods of its preemptionPolicy Never "
            f"tasks ({', '.join(sorted(never))}) and its other pods do not make the gang pipelined: {short}"]


def _handed(reason: Reason, queue: str, accounts: dict[str, QueueAccount], c: Candidate) -> bool:
    """The action hands the pod to the plugins for a job of ``queue`` (``tiers.preemptee_refused``)."""
    return preemptee_refused(c, reason, queue, accounts[c.queue].reclaimable) is None


def _in_preemptor_order(snap: Snapshot, job: VCJob, pods: dict[str, list[Pod]], bound: list[tuple[Binding, Pod]]
                        ) -> list[tuple[Binding, Pod]]:
    """A job's placed pods in the order Volcano's preempt and reclaim pop them (``jobs.preemptor_order``: the pod's
    priority first, a task template's PriorityClass included), not the plan's task order: the victim rounds and
    the reclaimer's rule go pod by pod in it."""
    order = preemptor_order(job, [(b.task, b.index, False) for b, _p in bound], pods, snap)
    pos = {(t, i): n for n, (t, i, _r) in enumerate(order)}
    return sorted(bound, key=lambda bp: pos[bp[0].task, bp[0].index])


def _in_order(snap: Snapshot, accounts: dict[str, QueueAccount], allocated: dict[str, dict[str, int]], queue: str,
              key: Callable[[Candidate], Any], victims: list[Candidate]) -> list[Candidate]:
    """``victims`` in Volcano's eviction order for a job of ``queue`` (``queueorder.victims_in_order``), on the
    replay's queue allocations (built only when the victims span queues)."""
    def queues() -> QueueState:
        qs = QueueState(snap, accounts)
        qs.allocated = allocated
        return qs
    return victims_in_order(victims, queues, queue, key)


def _evict(c: Candidate, evicted: set[str], taken: Counter[str], queue_alloc: dict[str, dict[str, int]],
           tree: QueueTree) -> None:
    """The validator's replay of one eviction for the tiers: the pod gone, its gang smaller, its queue's and the
    queue's ancestors' allocations smaller (the capacity plugin's deallocation, which the queue order reads)."""
    evicted.add(c.key)
    taken[c.group] += 1
    for q in (c.queue, *tree.ancestors(c.queue)):
        for r, x in c.pod.requests.items():
            queue_alloc[q][r] = queue_alloc[q].get(r, 0) - x


def _queue_held_back(job: VCJob, jp: JobPlacement, tree: QueueTree, accounts: dict[str, QueueAccount],
                     allocated: dict[str, dict[str, int]]) -> bool:
    """Preempt victims, and the job's queue (or an ancestor) could not take its pods before they go: Volcano's
    preempt evicts until the queue may take the pod too (``ssn.Allocatable``), not only until the node has
    room, so the node's room alone does not bound its victims (``_more_than_enough``)."""
    if any(v.reason != "preempt" for v in jp.victims):
        return False
    pods = job_pods(job)
    need: dict[str, int] = defaultdict(int)
    for b in jp.bindings:
        if b.task in pods and 0 <= b.index < len(pods[b.task]):
            for r, x in pods[b.task][b.index].requests.items():
                need[r] += x
    for q in (job.queue, *tree.ancestors(job.queue)):
        real = accounts[q].real_capability
        if any(x > 0 and allocated[q].get(r, 0) + x > real.get(r, 0) for r, x in need.items() if r in real):
            return True
    return False


def _more_than_enough(snap: Snapshot, job: VCJob, jp: JobPlacement, cap: Capacity,
                      holding: Mapping[str, int]) -> list[str]:
    """Volcano's preempt and reclaim evict on a node only until the pod fits ("just enough"), the node's
    room alone deciding (a queue's realCapability never asks for more): on each node, some victim must
    be one without which the job's pods there would not fit. A set where any one victim could stay is
    more than Volcano takes (``cap``: the room before this job's evictions). The room is the node's future
    idle, as Volcano reads it: pods pipelined before hold theirs. A job the plan does not admit that keeps
    victims pipelined its pods where the plan does not say (on the room its victims freed, maybe here), so
    the room it may hold (``holding``: what the pods of every such job replayed so far request, at most the
    room the node has) is not counted as free (lenient)."""
    pods = job_pods(job)
    need: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for b in jp.bindings:
        if b.task in pods and 0 <= b.index < len(pods[b.task]):
            for r, x in pods[b.task][b.index].requests.items():
                need[b.node][r] += x
    by_node: dict[str, list[Pod]] = defaultdict(list)
    for v in jp.victims:
        p = snap.pods.get(f"{v.namespace}/{v.name}")
        if p is not None and p.node_name == v.node and p.occupying:
            by_node[v.node].append(p)
    out = []
    for node, gone in sorted(by_node.items()):
        if node not in need or node not in cap.free:
            continue
        freed: dict[str, int] = defaultdict(int)
        for p in gone:
            for r, x in p.requests.items():
                freed[r] += x
        free = {r: x - min(max(x, 0), holding.get(r, 0)) for r, x in cap.free[node].items()}
        want = {r: x for r, x in need[node].items() if x > 0 and r != "pods"}
        if all(all(free.get(r, 0) + freed[r] - p.requests.get(r, 0) >= x for r, x in want.items()) for p in gone):
            out.append(f"job {jp.key}: evicts more than just enough on {node} (its pods there fit with any one of "
                       f"its {len(gone)} victims kept; Volcano evicts only until a pod fits)")
    return out


def _safety_refused(snap: Snapshot, c: Candidate, reason: str, priority: int, safety: SafePreemption) -> str | None:
    """Safe preemption's static rules for the pod (a pod under several PDBs; graded preemption)."""
    if not safety.on:
        return None
    return pdb_refused(safety, snap, c.pod) or (graded_blocks(safety, priority, c.job_priority)
                                                if reason == "preempt" else None)


def _gang_victims(snap: Snapshot, job: VCJob, jp: JobPlacement, cat: Catalogue, accounts: dict[str, QueueAccount],
                  allocated: dict[str, dict[str, int]], taken: Counter[str], evicted: set[str],
                  scheduler: SchedulerConf) -> list[str]:
    """The victims of one job by gangpreempt or gangreclaim (``gangrules.gang_victim_violations``): one action,
    candidates of its domain (a hard job's HyperNode, else the cluster), the bundle rule; gangreclaim: the
    capacity plugin's PreemptiveFn on the job's pods summed. Updates ``taken`` and ``evicted``."""
    out: list[str] = []
    who = f"job {jp.key}"
    reasons = sorted({v.reason for v in jp.victims})
    if len(reasons) > 1:
        out.append(f"{who}: victims of {' and '.join(reasons)} (one action places a job)")
    action = next(r for r in reasons if r in GANG_REASON)
    hard = job.network_topology is not None and job.network_topology.mode == "hard"
    if hard and jp.hyper_node is not None and jp.hyper_node in snap.topology.members:
        domain = frozenset(snap.topology.members[jp.hyper_node])
    else:
        domain = frozenset(snap.nodes)
    chosen: list[Candidate] = []
    for v in jp.victims:
        key = f"{v.namespace}/{v.name}"
        c = _victim_candidate(snap, cat, v, f"{who} victim {key}", key in evicted, out)
        if c is not None:
            chosen.append(c)
    before = {q: dict(a) for q, a in allocated.items()}
    out += gang_victim_violations(
        snap, who, action, chosen, domain, cat, Counter(taken), set(evicted), scheduler.gang(action).allow_whole,
        capacity_decides(scheduler.tiers, action), job.queue, job_priority(job, snap),
        lambda q: accounts[q].reclaimable,
        reclaim_check_for(before, {q: a.effective_deserved for q, a in accounts.items()},
                          {q: a.deserved_listed for q, a in accounts.items()},
                          {q: a.guarantee for q, a in accounts.items()}))
    if GANG_REASON[action] == "reclaim":
        pods = job_pods(job)
        need: dict[str, int] = defaultdict(int)
        for b in jp.bindings:
            if b.task in pods and 0 <= b.index < len(pods[b.task]):
                for r, x in pods[b.task][b.index].requests.items():
                    if r != "pods":
                        need[r] += x
        acc = accounts[job.queue]
        why = reclaimer_blocked(job.queue, before[job.queue], need, acc.effective_deserved, acc.real_capability)
        if why is not None:
            out.append(f"{who}: gangreclaims for its pods but {why}")
    for c in chosen:
        evicted.add(c.key)
        taken[c.group] += 1
    return out


def _reclaimer_violations(snap: Snapshot, job: VCJob, jp: JobPlacement, bound: list[tuple[Binding, Pod]],
                          before: Resources, account: QueueAccount) -> list[str]:
    """The capacity plugin's PreemptiveFn for each pod of a reclaiming job, in the order reclaim tries them
    (``bound``: ``_in_preemptor_order``), its queue's allocation counting the job's pods before it."""
    alloc = dict(before)
    for b, p in bound:
        why = reclaimer_blocked(job.queue, alloc, p.requests, account.effective_deserved, account.real_capability)
        if why is not None:
            return [f"job {jp.key}: reclaims for pod {b.pod_name(job.name)} but {why}"]
        for r, x in p.requests.items():
            alloc[r] = alloc.get(r, 0) + x
    return []


def _topology_violations(jp: JobPlacement, job: VCJob, nodes: set[str], snap: Snapshot,
                         running: frozenset[str] = frozenset()) -> list[str]:
    """The job's HyperNode against its networkTopology; it must hold the new pods' ``nodes`` and the nodes
    its pods already run on (``running``: a running gang's pending pods join it in its HyperNode)."""
    t = snap.topology
    nt = job.network_topology
    if nt is None:
        if jp.hyper_node is not None or jp.tier is not None:
            return [f"job {jp.key} has no network topology but names hyperNode/tier"]
        return []
    if jp.hyper_node is None:
        if nt.mode == "hard":
            return [f"job {jp.key}: hard network topology but no hyperNode"]
        if jp.tier != t.top_tier:
            return [f"job {jp.key}: spread over the cluster, tier must be {t.top_tier} (virtual root)"]
        return []
    if jp.hyper_node not in t.hyper_nodes:
        return [f"job {jp.key}: unknown HyperNode {jp.hyper_node}"]
    out = []
    tier = t.hyper_nodes[jp.hyper_node].tier
    if jp.tier != tier:
        out.append(f"job {jp.key}: tier {jp.tier} but HyperNode {jp.hyper_node} has tier {tier}")
    if nt.mode == "hard" and nt.highest_tier_allowed is not None and tier > nt.highest_tier_allowed:
        out.append(f"job {jp.key}: HyperNode {jp.hyper_node} tier {tier} > highestTierAllowed "
                   f"{nt.highest_tier_allowed}")
    outside = sorted(nodes - t.members[jp.hyper_node])
    if outside:
        out.append(f"job {jp.key}: nodes {', '.join(outside[:3])} are outside HyperNode {jp.hyper_node}")
    away = sorted(running - t.members[jp.hyper_node])
    if away:
        out.append(f"job {jp.key}: its running pods on {', '.join(away[:3])} are outside HyperNode {jp.hyper_node}")
    return out


def validate_placement(snap: Snapshot, jobs: Sequence[VCJob], plan: PlacementPlan, *,
                       safety: SafePreemption = OFF, now: datetime | None = None,
                       actions: Sequence[str] = SEED_ACTIONS,
                       scheduler: SchedulerConf | None = None) -> None:
    """Raise PlanInvalidError when the plan breaks any rule. ``actions``: the scheduler configuration's (a
    victim's reason must be one of them); ``scheduler``: the configuration's tiers and gang-aware actions'
    arguments (the bundle rule)."""
    violations = placement_violations(snap, jobs, plan, safety=safety, now=now, scheduler=scheduler)
    violations += [f"job {jp.key}: victim {v.namespace}/{v.name} by {v.reason}, an action the scheduler "
                   "configuration does not run" for jp in plan.jobs for v in jp.victims if v.reason not in actions]
    if violations:
        raise PlanInvalidError(violations)


def check_inputs(snap: Snapshot, jobs: Sequence[VCJob]) -> None:
    """Input Volcano cannot schedule with, as an InputError naming the object and field (the CLI adds
    the file): a cycle in the queues' parents (the capacity plugin with hierarchy refuses the whole
    session: ``updateAncestors``), a PriorityClass a job to place names that does not exist (Kubernetes'
    Priority admission refuses such pods, so the job never runs). A ``deserved`` naming a resource no node
    has (``queues.unheld_deserved``, almost always a misspelt name) is a warning: Volcano schedules with
    it, and so does optplan (the dimension is listed, 0 allocated; it matters only to a pod requesting it)."""
    tree = QueueTree(snap.queues)
    for name in sorted(tree.broken):
        if "cycle" in tree.broken[name]:
            chain, cur = [name], snap.queues[name].parent_name
            while cur is not None and cur not in chain:
                chain.append(cur)
                cur = snap.queues[cur].parent_name
            raise InputError(f"the parent chain {' -> '.join([*chain, name])} is a cycle: Volcano's capacity "
                             "plugin (hierarchy) then schedules nothing", obj=f"Queue/{name}", field="spec.parent")
    for v in unheld_deserved(snap, tree):  # Volcano schedules with it: a warning, and the same decisions
        log.warning("Queue/%s: spec.deserved.%s: no node has %s (%s); placing as Volcano does, which compares "
                    "it only for pods that request it", v.queue, v.resource, v.resource, v.message.split(": ", 1)[1])
    known = set(snap.priority_classes) | set(SYSTEM_PRIORITY_CLASSES)
    for job in jobs:
        fields = [(job.priority_class_name, "spec.priorityClassName")]
        fields += [(t.template.priority_class_name, f"spec.tasks[{i}].template.spec.priorityClassName")
                   for i, t in enumerate(job.tasks)]
        for cls, where in fields:
            if cls is not None and cls not in known:
                obj = f"VCJob/{job.key}" if job.kind == "Job" else f"PodGroup/{job.key}"
                raise InputError(f"PriorityClass {cls!r} does not exist (Kubernetes refuses pods that name a "
                                 "missing class): add it to the snapshot", obj=obj, field=where)
