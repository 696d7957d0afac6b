"""The exact placement model's data and the exact objective for any plan.

``plan_key`` (``PlanKey``, ``order_weights``, ``admission_weight``) ranks any plan by the exact model's
lexicographic objective: what ``auto`` compares and ``cpsat`` dominates the greedy by. ``build_data``
(``Data``) lists the candidate arcs (static predicates from the oracle, room including what possible
victims hold), ``victim_data`` the classes of identical possible victims (``VictimClass``,
``VictimData``; ``victims_cpsat``'s docstring), and ``Vars`` and ``VictimVars`` hold the variables
``cpsat`` and ``victims_cpsat`` create. No OR-Tools here: the dispatch ranks plans without loading it.

**Units.** The model counts pods, it does not name them: one variable per (job, unit, node), where a unit
(``Unit``, ``task_units``) is a task's pending pods that read alike to placement (``shape``: requests, the
oracle's ``constraint_signature``, GPU share). A task whose pending pods are alike — every VCJob's — is one unit
of the task's name; a bare PodGroup's task of unlike pods (KubeRay's cpu-only head and GPU workers under one
role) is one unit per shape, ``<task>#<k>``. The split happens here only (``build_data``: ``Data.units``, the
arcs keyed by unit); the rest of the model reads units where it read tasks: a pod's rules (room, queues,
predicates, binpack, the reclaimer's dimensions) by the unit's pod, a task's rules (its minimum, its partitions,
preemptionPolicy) by the unit's task (``Vars.by_task`` sums a task's units); a plan's binding is counted in the
unit holding its replica (``Data.unit_of``: the hints, the anchor), and the extraction hands each unit's replica
indices out in index order under the original task name."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, cast

from optplan.models.placement import JobPlacement, PlacementPlan, VictimReason
from optplan.models.queues import VCJob
from optplan.models.snapshot import Pod
from optplan.solvers.core.oracle import POD_SLOT, constraint_signature, max_fit
from optplan.solvers.placement.bundles import WHOLE
from optplan.solvers.placement.context import Context
from optplan.solvers.placement.gangevict import job_domains
from optplan.solvers.placement.gangrules import GANG_REASON, candidate_refused, domain_bundles, group_totals
from optplan.solvers.placement.jobs import Region, held_pods, job_needs, own_groups, starving
from optplan.solvers.placement.partitions import (
    partition_pending,
    partition_possible,
    partition_regions,
    partitioned,
)
from optplan.solvers.placement.queueorder import QueueState
from optplan.solvers.placement.safety import approval_cancelled, cooling_until, graded_blocks, pdb_refused, pdb_spends
from optplan.solvers.placement.tiers import SHARE_DELTA, preemptee_refused, share, victim_key
from optplan.solvers.placement.validate import at_later_allocate, evicted_earlier, in_later_cycle
from optplan.solvers.placement.victims import (
    REASONS,
    Candidate,
    Catalogue,
    Reason,
    action_refused,
    dims,
    statically_allowed,
    victim_blocked,
)


def admission_weight(priority: int) -> int:
    """What admitting a job is worth in the exact objective: positive, growing with priority."""
    return max(priority, 0) + 1


def job_weights(ctx: Context) -> dict[str, int]:
    """Job key -> what admitting it is worth in the exact objective. A job whose running pods already make
    its gang ready (Volcano does not count it as starving: a pod more for it is an extra replica) is worth
    its ``admission_weight``; every other job its ``admission_weight`` × (1 + the sum of those), so that the
    ready ones together never outweigh admitting one waiting job, and a ready one is still worth a pod more."""
    ready = {j.key for j in ctx.jobs if ctx.need(j)[1] == 0}
    scale = 1 + sum(admission_weight(ctx.priority[k]) for k in ready)
    return {j.key: admission_weight(ctx.priority[j.key]) * (1 if j.key in ready else scale) for j in ctx.jobs}


def shape(pod: Pod) -> tuple[Any, ...]:
    """What placement reads of a pod: its requests, the oracle's ``constraint_signature`` and its GPU share.
    Pods of one shape are alike to every rule of the exact model (``Unit``)."""
    return tuple(sorted(pod.requests.items())), constraint_signature(pod), pod.gpu_share


@dataclass(frozen=True)
class Unit:
    """What the exact model counts per node with one variable: pending pods of one task that are alike
    (``shape``). A task whose pending pods are alike — every VCJob's task, most bare PodGroups' — is one
    unit named as the task; a task of unlike pods (a bare PodGroup's: KubeRay's cpu-only head and its GPU
    workers in one role) is one unit per shape, named ``<task>#<k>`` (k: the shapes by their first pod). The rules
    of a task (its minimum, its partitions, its PriorityClass) read the unit's ``task``; the rules of a
    pod (room, queues, predicates, binpack, the reclaimer's dimensions) read its ``pod``."""

    task: str
    pod: Pod
    """The unit's first pending pod: every pod of the unit reads as it does."""
    indices: tuple[int, ...]
    """The unit's pending replica indices, in index order (the extraction hands them out in order)."""


def task_units(ctx: Context, job: VCJob) -> dict[str, Unit]:
    """Unit name -> ``Unit`` for the job's pending pods, in task order, then by first index. The one place
    where a task is split by shape: the model reads units as it reads tasks."""
    out: dict[str, Unit] = {}
    names = {t.name for t in job.tasks}
    for t in job.tasks:
        pods = ctx.pods[job.key].get(t.name, [])
        by_shape: dict[tuple[Any, ...], list[int]] = {}
        for i in ctx.pending(job, t.name):
            by_shape.setdefault(shape(pods[i]), []).append(i)
        if len(by_shape) == 1:
            (indices,) = by_shape.values()
            out[t.name] = Unit(task=t.name, pod=pods[indices[0]], indices=tuple(indices))
            continue
        for k, indices in enumerate(by_shape.values()):
            name = f"{t.name}#{k}"
            while name in names or name in out:  # a task may be named so: never one key for two
                name += "#"
            out[name] = Unit(task=t.name, pod=pods[indices[0]], indices=tuple(indices))
    return out


def unit_index(units: Mapping[str, Mapping[str, Unit]]) -> dict[tuple[str, str, int], str]:
    """(job, task, pending replica index) -> the name of the unit that holds it."""
    return {(j, u.task, i): name for j, by_name in units.items() for name, u in by_name.items() for i in u.indices}


@dataclass(frozen=True, order=True)
class PlanKey:
    """Lower is better: (−weighted admissions, victim cost, tier sum, −extra replicas, newly occupied
    nodes, −binpack, −Volcano order): the last only breaks ties, for the jobs admitted earlier in
    Volcano's order (``order_weights``)."""

    neg_admitted: int
    victim_cost: int
    tiers: int
    neg_extras: int
    opened: int
    neg_binpack: int
    neg_order: int = 0


def plan_key(ctx: Context, plan: PlacementPlan) -> PlanKey:
    by_key = {j.key: j for j in ctx.jobs}
    weights = order_weights(ctx)
    worth = job_weights(ctx)
    admitted = tiers = extras = binpack = order = 0
    receiving: set[str] = set()
    for jp in plan.jobs:
        if not jp.admitted:
            continue
        job = by_key[jp.key]
        admitted += worth[jp.key]
        tiers += jp.tier or 0
        extras += len(jp.bindings) - ctx.need(job)[1]
        order += weights[jp.key]
        pods = ctx.pods[jp.key]
        for b in jp.bindings:
            receiving.add(b.node)
            binpack += ctx.static_binpack(pods[b.task][b.index].requests, b.node)
    occupied = set(ctx.snapshot.pods_by_node)
    return PlanKey(-admitted, ctx.victim_cost(plan), tiers, -extras, len(receiving - occupied), -binpack, -order)


EXACT_ORDER_JOBS = 60
"""Up to this many jobs the order weights are powers of two (an earlier job outweighs all later ones)."""


def order_weights(ctx: Context) -> dict[str, int]:
    """job key -> what admitting it is worth in the last, tie-breaking objective: the earlier its first turn
    in the greedy's allocate (``ctx.turns``; ``ctx.jobs`` before the greedy ran), the more; lexicographic
    (powers of two) up to ``EXACT_ORDER_JOBS`` jobs, else linear."""
    keys = ctx.turns if len(ctx.turns) == len(ctx.jobs) else [j.key for j in ctx.jobs]
    n = len(keys)
    if n <= EXACT_ORDER_JOBS:
        return {k: 1 << (n - 1 - i) for i, k in enumerate(keys)}
    return {k: n - i for i, k in enumerate(keys)}


@dataclass
class VictimClass:
    """Identical possible victims: running pods of one PodGroup on one node, equal requests and cost."""

    name: str
    node: str
    group: str
    queue: str
    requests: dict[str, int]
    cost: int
    pods: tuple[Candidate, ...]
    """In victim order: the extraction hands out the first ones."""
    pdb: str | None = None
    """The PodDisruptionBudget each of its pods is charged to under safe preemption's PDB rule."""

    @property
    def size(self) -> int:
        return len(self.pods)

    def releases(self, r: str) -> int:
        """What one pod of the class gives back of ``r`` ("pods": one pod)."""
        return 1 if r == "pods" else self.requests.get(r, 0)


@dataclass(frozen=True)
class GangBundle:
    """A bundle one job may take by a gang-aware action (``gang_data``): ``domain`` the index of the hard
    job's region it lies in (None: the cluster), ``group`` the victim PodGroup, ``kind`` safe or whole,
    ``classes`` its pods as classes (``VictimData.gang_class``)."""

    name: str
    job: str
    action: str
    domain: int | None
    group: str
    kind: str
    classes: tuple[str, ...]


@dataclass
class Anchor:
    """The greedy's plan (with its victims and its scheduling cycles) as one solution of the exact model,
    whatever the model's static reading of the tiers says (``anchor_data``): Volcano's second tier decides
    on the state the earlier victims leave (a gang whose slack they used up, a node whose first tier they
    emptied), which the static pairs and bounds cannot say, and a later cycle's allocate may give a job's
    victims' room to jobs before it. Under the literal ``VictimVars.anchor`` the victims, the replay and the
    evicting jobs' placements are the plan's and the tier families (``victims_cpsat``) are not asked; the
    other jobs stay free (the validator has the last word on what comes out)."""

    plan: PlacementPlan
    takes: dict[tuple[str, str], int]
    """(job, class) -> pods of the class the plan's job evicts by preempt or reclaim."""
    extra: set[tuple[str, str]]
    """The pairs only the plan gives (not among the static ones): taken only under the anchor."""
    late: set[str]
    """Jobs the plan replays after the evictions: placed after them, evicting, or not admitted with victims."""
    unplaced: set[str]
    """Jobs the plan does not admit that keep victims (a later cycle gave their room to jobs before them)."""
    steps: dict[str, int]
    """Job -> ``JobPlacement.step``: the validator replays a plan by step, then in plan order."""
    counts: dict[tuple[str, str, str], int]
    """(job, unit, node) -> pods of the plan's late jobs (``Unit``)."""
    flushed: set[str] = field(default_factory=set)
    """The late jobs whose victims an earlier scheduling cycle evicted: away from where a later cycle placed
    them (``validate.evicted_earlier``), which the validator frees before the first turn of a later cycle
    (``validate.in_later_cycle``), or where a later cycle's allocate placed them (``validate.at_later_allocate``),
    which it frees before that allocate's first placement; the model under the anchor frees both before the
    first turn of a later cycle (``victims_cpsat.flush_point``), not at the job's own turn (its late jobs are
    the plan's, which the validator replayed)."""
    later: set[str] = field(default_factory=set)
    """Late jobs whose turn comes in a scheduling cycle after the first (``validate.in_later_cycle``)."""
    by_step: bool = False
    """The model replays its late jobs by the plan's steps (``Data.order``), not in job order: only when the
    plan needs it (a job placed into room a later job's victims freed, by Volcano's action order or a later
    cycle), since the static tier bounds are built for job order."""

    def job(self, key: str) -> JobPlacement:
        return self.plan.job(key)


def anchor_data(ctx: Context, vd: VictimData, valid: list[VCJob], plan: PlacementPlan,
                by_step: bool, unit_of: Mapping[tuple[str, str, int], str]) -> Anchor | None:
    """The greedy's plan as an ``Anchor``: its preempt and reclaim victims counted per (job, class), the
    pairs the static tiers do not give added, its late jobs' pods counted per unit (``Unit``); None when the
    plan names a victim the catalogue does not hold, a job with victims outside ``valid`` or a binding of no
    pending replica (the model cannot say it)."""
    keys = {j.key for j in valid}
    takes: dict[tuple[str, str], int] = defaultdict(int)
    late: set[str] = set()
    unplaced: set[str] = set()
    counts: dict[tuple[str, str, str], int] = defaultdict(int)
    for jp in plan.jobs:
        if not (jp.victims or (jp.admitted and jp.after_evictions)):
            continue
        if jp.key not in keys:
            return None
        late.add(jp.key)
        if not jp.admitted:
            unplaced.add(jp.key)
        for b in jp.bindings if jp.admitted else ():
            unit = unit_of.get((jp.key, b.task, b.index))
            if unit is None:  # not a pending replica
                return None
            counts[jp.key, unit, b.node] += 1
        for x in jp.victims:
            if x.reason in GANG_REASON:
                continue  # the bundles (``gang_cpsat``) hold these
            k = vd.class_of.get(f"{x.namespace}/{x.name}")
            if k is None:
                return None
            takes[jp.key, k] += 1
    jobs = {j.key: j for j in valid}
    flushed = {jp.key for jp in plan.jobs if jp.admitted and jp.key in late
               and (evicted_earlier(jobs[jp.key], jp) or (at_later_allocate(jp) and jp.victims))}
    later = {k for k in late if in_later_cycle(plan.job(k))}
    extra = {jk for jk in takes if jk not in vd.pairs}
    for (j, k) in extra:
        reason = next(x.reason for x in plan.job(j).victims if vd.class_of.get(f"{x.namespace}/{x.name}") == k)
        vd.pairs[j, k] = reason
    return Anchor(plan=plan, takes=dict(takes), extra=extra, late=late, unplaced=unplaced,
                  steps={k: plan.job(k).step for k in late}, counts=dict(counts),
                  flushed=flushed, later=later, by_step=by_step)


@dataclass
class VictimData:
    """Classes of possible victims and which job may take which."""

    classes: dict[str, VictimClass] = field(default_factory=dict)
    pairs: dict[tuple[str, str], VictimReason] = field(default_factory=dict)
    """(job, class) -> the action by which the job may evict the class."""
    class_of: dict[str, str] = field(default_factory=dict)
    """Candidate pod key -> its class."""
    freeable: dict[str, dict[str, int]] = field(default_factory=dict)
    """node -> what the classes some job may take hold there (requests, and ``pods`` in milli-units)."""
    nodes: set[str] = field(default_factory=set)
    """Nodes with a class some job may take (after pruning)."""
    second: set[tuple[str, str]] = field(default_factory=set)
    """The pairs the second tier decides (drf for preempt, capacity for reclaim): the class's PodGroup is at
    minMember and no pod on its node is one the first tier could offer the job (``victim_data``)."""
    drf_most: dict[tuple[str, str], int] = field(default_factory=dict)
    """(job, PodGroup) -> the most pods of the group the jobs up to this one may take when this one takes
    some by the second tier: drf offers each of them however large the job grows (``drf_limit``)."""
    gang: list[GangBundle] = field(default_factory=list)
    """The bundles jobs may take by gangpreempt and gangreclaim (``gang_data``)."""
    gang_class: set[str] = field(default_factory=set)
    """The classes of those bundles (one job's each; never in ``class_of``)."""
    capacity_most: dict[str, int] = field(default_factory=dict)
    """Queue -> the most pods the plan may take from it when some job reclaims from it by the second tier:
    the capacity plugin lets each second-tier pod go however the takes and the node's other pods stand
    (``capacity_limit``)."""
    anchor: Anchor | None = None
    """The greedy's plan the model holds whatever its static tier bounds say (``anchor_data``), or None."""
    owner: dict[str, str] = field(default_factory=dict)
    """Class of exposed pods (``victims.Catalogue.exposed``: a starving bare PodGroup's running pods, a VCJob's
    that its controller makes again) -> the job being placed they belong to: taking one leaves that job not
    admitted in the plan (``jobs.lost_pods``; a made-again replica is placed only by the greedy's later cycles)."""

    def room(self, ctx: Context, node: str) -> dict[str, int]:
        """The snapshot's free room plus everything the node's possible victims hold."""
        free = dict(ctx.free[node])
        for r, x in self.freeable.get(node, {}).items():
            free[r] = free.get(r, 0) + x
        return free

    def prune(self, data: Data) -> None:
        """Keep the pairs whose job can land on the class's node: victims come only from the node a
        preemptor pod is tried on (``actions/preempt``, ``actions/reclaim``), and a victim PodGroup never
        goes below minMember (the first tier's gang plugin; the model stays in the first tier)."""
        lands: dict[str, set[str]] = defaultdict(set)
        for (j, _t), row in data.arcs.items():
            lands[j].update(row)
        extra = self.anchor.extra if self.anchor is not None else set()
        self.pairs = {(j, k): r for (j, k), r in self.pairs.items()  # a bundle: anywhere in its domain
                      if k in self.gang_class or self.classes[k].node in lands[j] or (j, k) in extra}
        used = {k for (_j, k) in self.pairs}
        self.classes = {k: c for k, c in self.classes.items() if k in used}
        self.class_of = {p: k for p, k in self.class_of.items() if k in used}
        self.nodes = {c.node for c in self.classes.values()}


def most_requests(job: VCJob, ctx: Context) -> dict[str, int]:
    """Resource -> the most the job can request of it (every replica placed, each with its own requests)."""
    out: dict[str, int] = defaultdict(int)
    for t in job.tasks:
        for p in ctx.pods[job.key][t.name]:
            for r, x in p.requests.items():
                out[r] += x
    return dict(out)


def victim_data(ctx: Context, queues: QueueState, valid: list[VCJob],
                units: Mapping[str, Mapping[str, Unit]], anchor: PlacementPlan | None = None,
                by_step: bool = False) -> VictimData:
    """Classes of the catalogue's candidates and exposed pods (``takeable_by_node``) and the static (job, class)
    pairs, before pruning, a partitioned job's as any job's (``partitions.evicts_anywhere``); with ``anchor``,
    the pairs its victims need too (``anchor_data``)."""
    cat = ctx.catalogue
    vd = VictimData()
    if not cat.candidates and not cat.exposed:
        return vd
    members: dict[tuple[str, str, tuple[tuple[str, int], ...], int, str], list[Candidate]] = defaultdict(list)
    for node, cands in sorted(takeable_by_node(cat).items()):
        for c in cands:  # victim order
            pdb = pdb_spends(ctx.safety, ctx.snapshot, c.pod) or ""
            members[node, c.group, tuple(sorted(c.pod.requests.items())), c.cost, pdb].append(c)
    owners = {g: j.key for j in ctx.jobs for g in own_groups(j, ctx.snapshot)}
    seen: dict[tuple[str, str], int] = defaultdict(int)
    for (node, group, reqs, cost, pdb), pods in members.items():
        i = seen[node, group]
        seen[node, group] += 1
        name = f"{group}@{node}" + (f"#{i}" if i else "")
        vd.classes[name] = VictimClass(name=name, node=node, group=group, queue=pods[0].queue, requests=dict(reqs),
                                       cost=cost, pods=tuple(pods), pdb=pdb or None)
        for p in pods:
            vd.class_of[p.key] = name
        if pods[0].key in cat.exposed:
            vd.owner[name] = owners[group]
    groups = cat.groups
    total: dict[str, int] = defaultdict(int)
    for n in ctx.snapshot.nodes.values():
        for r, x in n.allocatable.items():
            total[r] += x
    second_reclaim: dict[str, set[str]] = defaultdict(set)  # queue -> its classes some job reclaims by tier 2
    for job in valid:
        if not ctx.preempting(job):  # preemptionPolicy Never everywhere
            continue
        if (cooling_until(ctx.safety, ctx.snapshot, job.queue, ctx.now) is not None  # safe preemption's cooldown
                or approval_cancelled(ctx.safety, ctx.snapshot, job, ctx.now) is not None):  # or approval gate
            continue
        if not starving(job, Counter(), ctx.held_count(job.key)):
            continue  # its running pods number minAvailable: Volcano evicts only for a starving job
        needs = job_needs(job)
        shapes = [*(ctx.pods[job.key][t.name][0] for t in job.tasks if ctx.pods[job.key].get(t.name)),
                  *(u.pod for u in units.get(job.key, {}).values())]  # the tasks' first pods and every unit's
        common = frozenset.intersection(*(dims(p.requests) for p in shapes)) if job.tasks else frozenset()
        prio = ctx.priority[job.key]
        may_reclaim = any(queues.deserved[job.queue].get(r, 0) > 0 for r in needs)
        mine = share(most_requests(job, ctx), total)
        first_empty = {reason: _first_tier_empty(ctx, queues, job, prio, reason) for reason in REASONS}
        for k, cls in vd.classes.items():
            c = cls.pods[0]
            if vd.owner.get(k) == job.key:
                continue  # its own running pod (Volcano's filter leaves out the preemptor's job)
            for reason in REASONS:
                if (reason == "reclaim" and not may_reclaim) or reason not in ctx.actions:
                    continue
                if action_refused(job, reason) is not None:
                    continue
                reclaimable = queues.reclaimable.get(c.queue, True)
                if groups[c.group].slack > 0:  # the first tier: priority (preempt) ∩ gang ∩ conformance
                    if statically_allowed(c, reason, job.queue, prio, reclaimable, snap=ctx.snapshot,
                                          safety=ctx.safety) is None:
                        vd.pairs[job.key, k] = reason
                        break
                    continue
                if cls.node not in first_empty[reason] or preemptee_refused(c, reason, job.queue, reclaimable):
                    continue
                if pdb_refused(ctx.safety, ctx.snapshot, c.pod) is not None or (
                        reason == "preempt" and graded_blocks(ctx.safety, prio, c.job_priority) is not None):
                    continue
                if reason == "preempt":
                    most = drf_limit(ctx, groups[c.group].occupying, mine, total)
                    if most < 1:
                        continue
                    vd.drf_most[job.key, c.group] = most
                elif not dims(c.pod.requests) & common:
                    continue  # the capacity plugin skips a pod that shares no resource with the reclaimer's
                else:
                    second_reclaim[c.queue].add(k)
                vd.pairs[job.key, k] = reason
                vd.second.add((job.key, k))
                break
    for q, ks in sorted(second_reclaim.items()):
        most = capacity_limit(ctx, queues, q, [vd.classes[k].pods[0] for k in sorted(ks)], total)
        if most >= 1:
            vd.capacity_most[q] = most
        else:
            vd.pairs = {jk: r for jk, r in vd.pairs.items() if not (jk[1] in ks and r == "reclaim")}
            vd.second -= {jk for jk in vd.second if jk[1] in ks}
    gang_data(ctx, queues, valid, vd)
    if anchor is not None:
        vd.anchor = anchor_data(ctx, vd, valid, anchor, by_step, unit_index(units))
    takeable = {k for (_j, k) in vd.pairs}
    counted: set[str] = set()  # a pod in several gang bundles (one per job, action and domain) frees room once
    for k in sorted(takeable):
        cls = vd.classes[k]
        room = vd.freeable.setdefault(cls.node, {})
        for c in cls.pods:
            if c.key in counted:
                continue
            counted.add(c.key)
            for r, x in cls.requests.items():
                room[r] = room.get(r, 0) + x
            room["pods"] = room.get("pods", 0) + POD_SLOT
    return vd


def gang_data(ctx: Context, queues: QueueState, valid: list[VCJob], vd: VictimData) -> None:
    """The bundles each starving job may take by the configuration's gangpreempt and gangreclaim
    (``GangBundle``; ``gang_cpsat``'s docstring): per job, action and domain (``gangevict.job_domains``), the
    action's candidates there split into bundles on the snapshot (``gangrules.domain_bundles``), whole
    bundles only under ``allowWholeBundle``; each bundle's pods on a node with equal requests and cost
    become a class of the job alone (``VictimData.gang_class``), taken all or none. None when safe
    preemption is on or for a job with partitions (the greedy's gang actions evict nothing then), nor for
    one not starving (``jobs.starving``: its running pods number minAvailable, by count)."""
    actions = [a for a in ctx.actions if a in GANG_REASON]
    if not actions or ctx.safety.on:
        return
    cat = ctx.catalogue
    for job in valid:
        if partitioned(job) or not starving(job, Counter(), ctx.held_count(job.key)):
            continue
        if not any(ctx.pending(job, t.name) for t in job.tasks):
            continue
        prio = ctx.priority[job.key]
        hard = job.network_topology is not None and job.network_topology.mode == "hard"
        regions = ctx.regions[job.key]
        for action in actions:
            allow_whole = ctx.scheduler.gang(action).allow_whole
            for d, region in enumerate(job_domains(ctx, job, action)):
                index = next((i for i, r in enumerate(regions) if r is region), None) if hard else None
                if hard and index is None:
                    continue
                cands = [c for n in sorted(region.nodes) for c in cat.by_node.get(n, ())
                         if candidate_refused(c, action, job.queue, prio, queues.reclaimable.get(c.queue, True))
                         is None]
                totals = group_totals(ctx.snapshot, {c.group for c in cands})
                for b in domain_bundles(cands, cat, {}, totals.__getitem__):
                    if b.kind == WHOLE and not allow_whole:
                        continue
                    name = f"{action}:{job.key}:{d}:{b.kind}:{b.job}"
                    members = [cat.candidates[mb.key] for mb in b.members]
                    parts: dict[tuple[str, tuple[tuple[str, int], ...], int], list[Candidate]] = defaultdict(list)
                    for c in sorted(members, key=lambda c: (c.node, c.key)):
                        parts[c.node, tuple(sorted(c.pod.requests.items())), c.cost].append(c)
                    names = []
                    for i, ((node, reqs, cost), pods) in enumerate(parts.items()):
                        k = f"{name}@{node}#{i}"
                        vd.classes[k] = VictimClass(name=k, node=node, group=b.job, queue=pods[0].queue,
                                                    requests=dict(reqs), cost=cost, pods=tuple(pods))
                        vd.pairs[job.key, k] = cast(VictimReason, action)
                        vd.gang_class.add(k)
                        names.append(k)
                    vd.gang.append(GangBundle(name=name, job=job.key, action=action, domain=index, group=b.job,
                                              kind=b.kind, classes=tuple(names)))


def takeable_by_node(cat: Catalogue) -> dict[str, list[Candidate]]:
    """Node -> the pods the model may take there, in the plugins' input order: the candidates and the
    exposed pods (``victims.Catalogue.exposed``)."""
    out = {n: list(cs) for n, cs in cat.by_node.items()}
    for n, cs in cat.shielded.items():
        if exposed := [c for c in cs if c.key in cat.exposed]:
            out[n] = sorted([*out.get(n, []), *exposed], key=Candidate.input_key)
    return out


def _first_tier_empty(ctx: Context, queues: QueueState, job: VCJob, prio: int, reason: Reason) -> set[str]:
    """The nodes where Volcano's first tier offers the job nothing, whatever the plan takes before: no
    preemptee there whose PodGroup is above minMember (the gang plugin), or, for preempt, none of lower
    job priority (the priority plugin); the plugins are handed the node's shielded pods of other jobs too
    (``jobs.plugin_view``). Ready pods only ever fall, so such a node stays so."""
    out = set()
    cat = ctx.catalogue
    own = own_groups(job, ctx.snapshot)
    for node in set(cat.by_node) | set(cat.shielded):
        cands = [*cat.by_node.get(node, ()), *(c for c in cat.shielded.get(node, ()) if c.group not in own)]
        mine = [c for c in cands if preemptee_refused(c, reason, job.queue, queues.reclaimable.get(c.queue, True))
                is None]
        slack = any(ctx.catalogue.groups[c.group].slack > 0 for c in mine)
        lower = any(c.job_priority < prio for c in mine)
        if not slack or (reason == "preempt" and not lower):
            out.add(node)
    return out


def _largest(pods: list[Candidate], t: int) -> dict[str, int]:
    """Per resource, the sum of the ``t`` largest requests among the pods (each resource on its own: at
    least what any ``t`` of them hold)."""
    out: dict[str, int] = {}
    for r in sorted({r for c in pods for r in c.pod.requests}):
        out[r] = sum(sorted((c.pod.requests.get(r, 0) for c in pods), reverse=True)[:t])
    return out


def drf_limit(ctx: Context, occupying: tuple[str, ...], mine: float, total: Mapping[str, int]) -> int:
    """The most pods of a PodGroup that may go, one after another, each offered by drf to a preemptor whose
    dominant share is at most ``mine``: the victim job's share with the pods before it and itself removed
    stays at least the preemptor's (``tiers.drf_answer``), the largest pods counted gone first."""
    pods = [c for k in occupying if (c := ctx.catalogue.candidate(k)) is not None]
    alloc: dict[str, int] = defaultdict(int)
    for k in occupying:
        for r, x in ctx.snapshot.pods[k].requests.items():
            alloc[r] += x
    most = 0
    for t in range(1, len(pods) + 1):
        gone = _largest(pods, t)
        theirs = share({r: x - gone.get(r, 0) for r, x in alloc.items()}, total)
        if not (mine < theirs or abs(mine - theirs) <= SHARE_DELTA):
            break
        most = t
    return most


def capacity_limit(ctx: Context, queues: QueueState, queue: str, second: list[Candidate],
                   total: Mapping[str, int]) -> int:
    """The most pods the plan may take from ``queue`` when some go by the capacity plugin's ReclaimableFn
    (``victims.victim_blocked``): each second-tier pod still passes with the queue's pods before it on its node
    gone (the plugin walks them in eviction order, ``tiers.victim_key`` with drf's shares as the snapshot has
    them, and subtracts the ones it keeps before a pod) and the other takes gone, counted as the largest of the
    queue's other pods. Placements only add to the queue's allocation, which only helps. 0: none may go so.
    The shares move as the plan's evictions shrink their jobs, which may reorder jobs of equal priority: the
    validator, replaying the order as it is then, has the last word. ``total``: the cluster's allocatable (drf's
    share)."""
    cat = ctx.catalogue
    pods = [c for c in [*cat.candidates.values(), *cat.exposed.values()] if c.queue == queue]
    alloc = queues.allocated[queue]
    most = len(pods)

    def group_alloc(g: str) -> dict[str, int]:
        out: dict[str, int] = defaultdict(int)
        for k in cat.groups[g].occupying if g in cat.groups else ():
            for r, x in ctx.snapshot.pods[k].requests.items():
                out[r] += x
        return out

    key = victim_key(group_alloc, total)
    for c in second:  # the pods handed before it on its node, shielded ones too (``jobs.plugin_view``)
        before = [x for x in [*cat.by_node.get(c.node, []), *cat.shielded.get(c.node, [])] if x.queue == queue
                  and key(x) < key(c)]
        near = {x.key for x in before} | {c.key}
        others = [x for x in pods if x.key not in near]
        base = dict(alloc)
        for x in before:
            for r, v in x.pod.requests.items():
                base[r] = base.get(r, 0) - v
        ok = -1
        for removed in range(len(others) + 1):
            gone = _largest(others, removed)
            left = {r: x - gone.get(r, 0) for r, x in base.items()}
            if victim_blocked(queue, left, c.pod.requests, queues.deserved[queue], queues.listed[queue],
                              queues.guarantee[queue]) is not None:
                break
            ok = removed
        most = min(most, ok + 1)
    return most


@dataclass
class VictimVars:
    """The victim variables of the joint model, keyed by domain tuples (module docstring)."""

    take: dict[tuple[str, str], Any] = field(default_factory=dict)  # take[job, class]
    after: dict[str, Any] = field(default_factory=dict)  # after[job]: replayed after the evictions
    early: dict[tuple[str, str, str], Any] = field(default_factory=dict)  # early[job, unit, node]
    amount: dict[tuple[str, str], Any] = field(default_factory=dict)  # amount[job, r]: placed requests
    early_amount: dict[tuple[str, str], Any] = field(default_factory=dict)  # amount, or 0 when after
    lands: dict[tuple[str, str], Any] = field(default_factory=dict)  # lands[job, node]
    reclaims: dict[str, Any] = field(default_factory=dict)  # reclaims[job]: reclaim, else preempt
    under: dict[tuple[str, str], Any] = field(default_factory=dict)  # under[job, r]: own queue + job ≤ deserved
    has: dict[tuple[str, str], Any] = field(default_factory=dict)  # has[job, unit]: a pod of the unit placed
    places: dict[tuple[str, str], Any] = field(default_factory=dict)  # places[job, node], over-committed nodes
    bundle: dict[str, Any] = field(default_factory=dict)  # bundle[name]: a gang-aware bundle taken whole
    anchor: Any = None  # the plan is the anchor's (``model.Anchor``): None without one
    second: dict[tuple[str, str], Any] = field(default_factory=dict)
    """second[job, group]: the job takes pods of the group by drf; second["", queue]: some job reclaims from
    the queue by the capacity plugin (``add_second_tier``)."""


@dataclass
class Vars:
    """The model's variables, keyed by domain tuples."""

    admitted: dict[str, Any]  # admitted[job]
    region: dict[tuple[str, int], Any]  # region[job, i]: the job ends in its i-th candidate region
    count: dict[tuple[str, str, str], Any]  # count[job, unit, node]: pods of the unit placed on the node
    opened: dict[str, Any]  # opened[node]: a node empty in the snapshot receives pods
    ev: VictimVars = field(default_factory=VictimVars)
    by_task: dict[tuple[str, str], list[Any]] = field(default_factory=dict)
    """(job, task) -> the count variables of its units (an index)."""
    pcount: dict[tuple[str, str, int, str], Any] = field(default_factory=dict)
    """pcount[job, unit, partition, node]: pods of a partition of a partitioned task's unit placed on the node."""
    whole: dict[tuple[str, str, int], Any] = field(default_factory=dict)
    """whole[job, task, partition]: the partition's pending pods are all placed (else none is)."""
    psub: dict[tuple[str, str, int, int], Any] = field(default_factory=dict)
    """psub[job, task, partition, i]: the partition lies in its i-th candidate HyperNode (``partition_spots``)."""

    def placed(self, job: str, task: str) -> Any:
        return sum(self.by_task.get((job, task), []))


@dataclass
class Data:
    ctx: Context
    queues: QueueState
    """The snapshot's queue accounting (never changed)."""
    valid: list[VCJob]
    """Jobs whose queue may take them (the others are never admitted), in Volcano's job order."""
    arcs: dict[tuple[str, str], dict[str, int]]
    """(job, unit) -> candidate node -> upper bound of count."""
    victims: VictimData
    """Classes of possible victims and which job may take which (empty: the model has no victims)."""
    units: dict[str, dict[str, Unit]] = field(default_factory=dict)
    """Job -> unit name -> the ``Unit``, for every valid job's pending pods (``task_units``)."""

    @property
    def jobs(self) -> dict[str, VCJob]:
        return {j.key: j for j in self.ctx.jobs}

    def pod(self, job: str, unit: str) -> Pod:
        """The pod every pod of the unit reads as."""
        return self.units[job][unit].pod

    def task(self, job: str, unit: str) -> str:
        return self.units[job][unit].task

    def units_of(self, job: str, task: str | None = None) -> list[str]:
        """The job's unit names (of ``task`` only, when given), in task order."""
        return [u for u, x in self.units.get(job, {}).items() if task is None or x.task == task]

    @cached_property
    def unit_of(self) -> dict[tuple[str, str, int], str]:
        """(job, task, pending replica index) -> its unit's name: where a plan's binding is counted."""
        return unit_index(self.units)

    @cached_property
    def order(self) -> list[str]:
        """The replay order of the late jobs: job order, or with an anchor ``by_step`` its plan's steps first
        (``Anchor.steps``; the validator replays a plan by step, then in plan order)."""
        keys = [j.key for j in self.valid]
        anchor = self.victims.anchor
        return keys if anchor is None or not anchor.by_step else sorted(keys, key=lambda k: anchor.steps.get(k, 0))


def partition_spots(ctx: Context, job: VCJob, task: str, part: int) -> list[Region]:
    """Where one partition of a task may lie in the exact model: the HyperNodes ``partition_regions`` gives in
    any of the job's regions, once each, lowest tier first, then by name (only for a task whose partitions
    must fit one HyperNode, ``partitions.bounded``)."""
    t = next(x for x in job.tasks if x.name == task)
    held = ctx.held.get(job.key, {}).get(task, frozenset())
    assert t.partition_policy is not None
    mine = [i for i in t.partition_policy.members(part) if i in held]
    running: set[str] = set()
    if mine:
        pods = held_pods(job, ctx.snapshot).get(task, {})
        for i in mine:
            node = pods[i].node_name if i in pods else None
            if node is not None:
                running.add(node)
    seen: dict[str | None, Region] = {}
    for region in ctx.regions.get(job.key, []):
        for r in partition_regions(ctx.snapshot, t, region, running):
            seen.setdefault(r.hyper_node, r)
    return sorted(seen.values(), key=lambda r: (r.tier or 0, r.hyper_node or ""))


def partition_parts(ctx: Context, job: VCJob) -> list[tuple[str, int, list[int]]]:
    """(task, partition, its pending replica indices) of every partition with pods to place."""
    out = []
    for t in job.tasks:
        pp = t.partition_policy
        if pp is None:
            continue
        held = ctx.held.get(job.key, {}).get(t.name, frozenset())
        for p in range(pp.total_partitions):
            pending = partition_pending(t, p, held)
            if pending and partition_possible(t, p):
                out.append((t.name, p, pending))
    return out


def build_data(ctx: Context, anchor: PlacementPlan | None = None, by_step: bool = False) -> Data:
    """The model's data; with ``anchor`` (the greedy's plan), the data that holds it as a solution
    (``Anchor``, replayed by its steps with ``by_step``)."""
    snap = ctx.snapshot
    queues = QueueState(snap, ctx.accounts)
    valid = [j for j in ctx.jobs if queues.admission_reason(j.queue) is None and j.key not in ctx.unfit]
    units = {job.key: task_units(ctx, job) for job in valid}
    feasible: dict[tuple[str, str], list[str]] = {}
    for job in valid:
        allowed = frozenset().union(*(r.nodes for r in ctx.regions[job.key])) if ctx.regions[job.key] else frozenset()
        for name, u in units[job.key].items():
            feasible[job.key, name] = [n for n in sorted(allowed) if ctx.predicates.ok(u.pod, n)]
    vd = victim_data(ctx, queues, valid, units, anchor, by_step)
    arcs: dict[tuple[str, str], dict[str, int]] = {}
    for (j, name), nodes in feasible.items():
        u = units[j][name]
        arcs[j, name] = row = {}
        for n in nodes:
            ub = min(len(u.indices), max_fit(u.pod, vd.room(ctx, n), ctx.capacity.limits_pods(n)))
            if ub > 0:
                row[n] = ub
    data = Data(ctx=ctx, queues=queues, valid=valid, arcs=arcs, victims=vd, units=units)
    vd.prune(data)
    return data
