"""Victims inside the exact placement model (``cpsat``): which running pods the admitted jobs
evict, decided jointly with where every job goes.

**What a plan means.** The validator (``validate.placement_violations``) replays a plan in Volcano's
order: the jobs placed without evictions first (``after_evictions`` false), then the others in job
order, each evicting its victims and then placing its pods on the state the jobs before it left. The
model describes exactly that replay, so that every rule is checked on the state the validator (and the
greedy, whose plans are replayed the same way) sees. ``after[job]`` says in which part a job is.

**Victim classes.** Candidates (``victims.Catalogue``) of one PodGroup on one node with equal requests
and equal cost are identical to every rule, so they are counted, not named (``model.VictimClass``); the
extraction hands pods out in victim order. A pair (job, class) exists only when the job is entitled to
the class by Volcano's plugin tiers (``model.victim_data``): the first tier (a PodGroup above minMember;
preempt: same queue, strictly lower job priority; reclaim: another, reclaimable queue, and a job queue
with a positive deserved on a resource it requests), or the second on a node where the first offers the
job nothing whatever the plan takes (drf, the capacity plugin, each within a static bound); never for a
``preemptionPolicy: Never`` job or one whose running pods make its gang ready; and only when the job can
land on the class's node. A partitioned job has the same pairs (its walk over every node, ``partitions``,
may take any of them; the model takes those beside its partitions). Nodes are the model's only place where
victims matter; a node without a class keeps the plain capacity constraint.

Decisions (``model.VictimVars``):

- ``take[job, class]``: pods of the class the job evicts;
- ``after[job]``: the job is replayed after the evictions (every job that evicts is);
- ``early[job, unit, node]``: the unit's pods on the node when the job is replayed before, else 0 (only
  on nodes with classes); ``amount[job, r]`` and ``early_amount[job, r]`` the same for the job's
  requests, for the queues;
- ``lands[job, node]``: the job has a pod on the node;

- ``reclaims[job]``: the job's action is reclaim (else preempt: one action places a job);
- ``used[node, r, job]``: a node's usage after the job's turn, where later jobs place or evict there;
  ``places[job, node]`` on a node over-committed in the snapshot (only a pod placed there must fit);
- auxiliary literals of the reclaimer's rule: ``under[job, r]``, ``has[job, unit]``; of the second tier:
  ``second[job, group]`` (drf), ``second["", queue]`` (capacity).

Constraints (families, one function each):

- capacity (``add_capacity``), on nodes with classes, per requested resource and the pod count: the
  early pods fit the snapshot's free room; and after each job in job order, early pods + later pods of
  the jobs so far − what their victims on the node release ≤ free: freed capacity counts only on the
  node where it is freed, and only for the jobs replayed after it;
- queues (``add_queues``): the early part within realCapability for every queue and resource new pods
  charge; after each late job, its queue and ancestors within realCapability, evictions giving back
  allocation to the victims' queues and their ancestors;
- entitlement (``add_entitlement``): a victim is taken only by an admitted, late job that lands on its
  node, and by one action per job; the jobs together take at most a class's
  pods (``add_variables``: without that row two jobs could each count the same pod's room);
- preemptionPolicy Never (``add_never``): a job that takes victims by preempt or reclaim meets its gang
  (minAvailable, its tasks' minimums) with the pods of its other tasks: Volcano's actions skip a Never task's
  pods, so only the others can pipeline it;
- victim gangs (``add_victim_gangs``): per PodGroup above minMember, evicted ≤ ready − minMember;
- the second tier (``add_second_tier``): drf's and the capacity plugin's static bounds;
- safe preemption (``add_safety``, when its rules are on): victims per PodDisruptionBudget within its
  disruptionsAllowed; with a cooldown, at most one evicting job per queue;
- the anchor (``add_anchor``, with ``model.Anchor``): under its literal the victims, the late jobs (admitted
  or not) and their placements and regions are the greedy's plan's, its pairs beyond the static ones
  usable, and the tier families (just enough, landing, the victim gangs, the second tier, the reclaimer's
  rule) not enforced (``unless_anchor``); the victims an earlier cycle evicted away from where a later cycle
  placed their job (``model.Anchor.flushed``) free their room and queue allocation before the later cycle's jobs
  (``flush_point``), as the validator replays them, not at their job's turn;
- region cuts (``add_region_cuts``, redundant): a job that ends in a region finds its gang's least
  demand in the free room of the region's nodes plus what evictions there release;
- reclaim (``add_reclaim_rules``), the capacity plugin's PreemptiveFn on the queue allocations at the
  job's turn (``Accounts.before``): each placed unit's requested dimensions include one where the job's
  queue + the job's amount ≤ deserved.

Under gangpreempt and gangreclaim, a job's bundles are classes of that job alone (``model.VictimData.gang_class``,
rules in ``gang_cpsat``): capacity, queues and the replay count them like any class; landing next to them, "just
enough" and the victim gangs' minMember do not apply to them.

Objective term (``cost``): Σ cost × take, the ``victims`` module's cost (priority-weighted, newer pods
cheaper), minimised right after the admissions.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from ortools.sat.python import cp_model

from optplan.models.placement import JobPlacement, PlacementPlan, VictimReason
from optplan.models.queues import VCJob
from optplan.solvers.core.oracle import POD_SLOT
from optplan.solvers.placement.jobs import job_needs
from optplan.solvers.placement.model import Data, Vars, VictimClass, VictimVars, most_requests
from optplan.solvers.placement.safety import pdb_allowed
from optplan.solvers.placement.victims import Candidate, dims


def add_variables(m: cp_model.CpModel, data: Data, v: Vars) -> VictimVars:
    vd = data.victims
    ev = VictimVars()
    takers: dict[str, list[Any]] = defaultdict(list)
    for (j, k) in sorted(vd.pairs):
        ev.take[j, k] = y = m.new_int_var(0, vd.classes[k].size, f"take[{j}<-{k}]")
        takers[k].append(y)
    for k, ys in sorted(takers.items()):  # a pod is evicted once: the jobs together take at most the class
        if len(ys) > 1:
            m.add(sum(ys) <= vd.classes[k].size)
    per_job: dict[str, list[tuple[str, Any]]] = defaultdict(list)
    for (j, t, _n), x in v.count.items():
        per_job[j].append((t, x))
    anchor = vd.anchor
    if anchor is not None:
        ev.anchor = m.new_bool_var("anchor")
    for job in data.valid:
        j = job.key
        ev.after[j] = m.new_bool_var(f"after[{j}]")
        if anchor is not None and j in anchor.unplaced:  # evicts without being admitted: only as the anchor
            m.add_bool_or([v.admitted[j], ev.anchor]).only_enforce_if(ev.after[j])
        else:
            m.add_implication(ev.after[j], v.admitted[j])
        for r, most in sorted(most_requests(job, data.ctx).items()):
            terms = [data.pod(j, u).requests.get(r, 0) * x for u, x in per_job[j]]
            ev.amount[j, r] = amt = m.new_int_var(0, most, f"amount[{j},{r}]")
            m.add(amt == sum(terms))
            ev.early_amount[j, r] = ea = m.new_int_var(0, most, f"early_amount[{j},{r}]")
            _early(m, ea, amt, most, ev.after[j])
    for (j, t, n), x in v.count.items():
        if n in vd.nodes:
            ub = data.arcs[j, t][n]
            ev.early[j, t, n] = e = m.new_int_var(0, ub, f"early[{j}/{t}->{n}]")
            _early(m, e, x, ub, ev.after[j])
    counted = {(j, n) for (j, _t, n) in v.count}
    for (j, k) in sorted(vd.pairs):
        n = vd.classes[k].node
        if k not in vd.gang_class and (j, n) in counted and (j, n) not in ev.lands:
            ev.lands[j, n] = m.new_bool_var(f"lands[{j}@{n}]")
    for j in sorted({j for (j, _k), r in vd.pairs.items() if r == "reclaim"}):
        ev.reclaims[j] = m.new_bool_var(f"reclaims[{j}]")
    return ev


def unless_anchor(ev: VictimVars) -> list[Any]:
    """The enforcement literals of a tier family's rows: none, or "not the anchor" (``model.Anchor``)."""
    return [] if ev.anchor is None else [ev.anchor.negated()]


def flush_point(data: Data) -> int | None:
    """Where the replay (``Data.order``) frees the anchor's flushed victims (``model.Anchor.flushed``): before
    the first late job of a later scheduling cycle, as the validator frees them, or before the first flushed
    job when job order puts it earlier; None without such victims."""
    anchor = data.victims.anchor
    if anchor is None or not anchor.flushed:
        return None
    return next(i for i, j in enumerate(data.order) if j in anchor.flushed or j in anchor.later)


def flushed_takes(data: Data, jobs: set[str] | None = None) -> list[tuple[VictimClass, int]]:
    """The anchor's flushed victims (of ``jobs``, else of every flushed job) as (class, pods)."""
    anchor = data.victims.anchor
    if anchor is None:
        return []
    keep = anchor.flushed if jobs is None else anchor.flushed & jobs
    return [(data.victims.classes[k], n) for (j, k), n in sorted(anchor.takes.items()) if j in keep and n]


def add_anchor(m: cp_model.CpModel, data: Data, v: Vars) -> None:
    """Under the anchor literal (``model.Anchor``): the victims are the plan's (its pairs beyond the static
    ones only then), its late jobs are the late ones, admitted or not as it says, on its nodes and regions."""
    vd, ev = data.victims, v.ev
    anchor = vd.anchor
    if anchor is None:
        return
    on = ev.anchor
    for (j, k), y in sorted(ev.take.items()):
        if k in vd.gang_class:
            continue
        if (j, k) in anchor.extra:
            m.add(y <= vd.classes[k].size * on)
        m.add(y == anchor.takes.get((j, k), 0)).only_enforce_if(on)
    for j, a in sorted(ev.after.items()):
        m.add(a == int(j in anchor.late)).only_enforce_if(on)
    for j in sorted(anchor.late & set(v.admitted)):
        m.add(v.admitted[j] == int(j not in anchor.unplaced)).only_enforce_if(on)
    for (j, t, n), x in sorted(v.count.items()):
        if j in anchor.late:
            m.add(x == anchor.counts.get((j, t, n), 0)).only_enforce_if(on)
    regions = data.ctx.regions
    for (j, i), y in sorted(v.region.items()):
        if j in anchor.late and j not in anchor.unplaced:
            jp = anchor.job(j)
            here = (regions[j][i].hyper_node, regions[j][i].tier) == (jp.hyper_node, jp.tier)
            m.add(y == int(here)).only_enforce_if(on)


def _early(m: cp_model.CpModel, early: Any, full: Any, ub: int, after: Any) -> None:
    """early = full when the job is replayed before the evictions, else 0."""
    m.add(early <= full)
    m.add(early >= full - ub * after)
    m.add(early <= ub - ub * after)


def add_capacity(m: cp_model.CpModel, data: Data, v: Vars) -> None:
    """On nodes with classes: the early pods fit the free room; after each job in job order, early pods
    + late pods so far − what the victims so far release there ≤ free (every requested resource, and
    the pod count); a job that evicts on a node takes a victim without which its pods there would not fit
    on some requested resource ("just enough": Volcano evicts only for the node's room). The running state is
    carried by ``used[node, r, step]`` variables so that the
    constraints stay linear in the model's size."""
    vd, ev = data.victims, v.ev
    pos = {j: i for i, j in enumerate(data.order)}
    placing: dict[str, dict[str, list[tuple[dict[str, int], Any, Any]]]] = defaultdict(lambda: defaultdict(list))
    for (j, t, n), x in v.count.items():
        if n in vd.nodes:
            placing[n][j].append((data.pod(j, t).requests, x, ev.early[j, t, n]))
    taking: dict[str, dict[str, list[tuple[VictimClass, Any]]]] = defaultdict(lambda: defaultdict(list))
    for (j, k), y in ev.take.items():
        taking[vd.classes[k].node][j].append((vd.classes[k], y))
    walked = {k for k in vd.classes if k not in vd.gang_class}  # a gang bundle goes whole, not "just enough"
    flush = flush_point(data)
    early_gone: dict[str, dict[str, list[tuple[VictimClass, int]]]] = defaultdict(lambda: defaultdict(list))
    for j in sorted(vd.anchor.flushed if vd.anchor is not None else ()):  # freed at the flush, not at j's turn
        for cls, size in flushed_takes(data, {j}):
            early_gone[cls.node][j].append((cls, size))
    needed: dict[tuple[str, str], list[Any]] = defaultdict(list)  # (node, job) -> its necessary-victim literals
    for n in sorted(placing):
        cap = data.ctx.capacity
        free = cap.free[n]
        jobs = placing[n]
        resources = sorted({r for terms in jobs.values() for req, _x, _e in terms for r, q in req.items() if q > 0})
        if cap.limits_pods(n):
            resources.append("pods")
        steps = sorted(set(jobs) | set(taking[n]), key=pos.__getitem__)
        gone = early_gone.get(n, {})
        flush_at = next((j for j in steps if flush is not None and pos[j] >= flush), None) if gone else None
        for r in resources:
            def need(req: dict[str, int], r: str = r) -> int:
                return 1 if r == "pods" else req.get(r, 0)

            limit = cap.room(n, r) // POD_SLOT if r == "pods" else free.get(r, 0)
            early_terms = [need(req) * e for terms in jobs.values() for req, _x, e in terms]
            released = sum(cls.releases(r) * cls.size for terms in taking[n].values() for cls, _y in terms)
            state: Any = sum(early_terms)
            m.add(state <= max(limit, 0))  # an early pod needs room in the snapshot
            last = max(pos[j] for j in jobs)
            for j in steps:
                change = [need(req) * (x - e) for req, x, e in jobs.get(j, [])]
                change += [-cls.releases(r) * y for cls, y in taking[n].get(j, []) if cls.releases(r)]
                if gone and ev.anchor is not None:  # the anchor's flushed victims: freed at the flush point
                    back = sum(cls.releases(r) * size for cls, size in gone.get(j, []))
                    if j == flush_at:
                        back -= sum(cls.releases(r) * size for row in gone.values() for cls, size in row)
                    if back:
                        change.append(back * ev.anchor)
                if not change:
                    continue
                after = state + sum(change)
                if j in jobs:  # a pod placed here must fit
                    if limit >= 0:  # the state only grows by placements: checking every step is exact
                        m.add(after <= limit)
                        if r != "pods":  # just enough: a victim without which the job's pods would not fit
                            for cls, y in taking[n].get(j, []):
                                if cls.releases(r) and cls.name in walked:
                                    lit = m.new_bool_var(f"needed[{j}@{n},{cls.name},{r}]")
                                    m.add(after + cls.releases(r) >= limit + 1).only_enforce_if(lit)
                                    m.add(y >= 1).only_enforce_if(lit)
                                    needed[n, j].append(lit)
                    else:  # over-committed in the snapshot: only a job that places here must fit
                        m.add(after <= limit).only_enforce_if(_places(m, ev, j, n, jobs[j], data))
                if pos[j] >= last:
                    break
                state = m.new_int_var(-released, max(limit, 0) + released, f"used[{n},{r},{j}]")
                m.add(state == after)

    for n in sorted(placing):  # a job that evicts on a node takes some victim it needs there (Volcano's walk)
        for j, every in sorted(taking[n].items()):
            terms = [(c, y) for c, y in every if c.name in walked]
            if not terms or any(data.ctx.capacity.free[n].get(r, 0) < 0 for r in data.ctx.capacity.free[n]):
                continue  # over-committed in the snapshot: not checked
            some = m.new_bool_var(f"evicts[{j}@{n}]")
            m.add(sum(y for _c, y in terms) <= sum(c.size for c, _y in terms) * some)
            m.add_bool_or(needed[n, j] or [some.negated()]).only_enforce_if([some, *unless_anchor(ev)])

def _places(m: cp_model.CpModel, ev: VictimVars, job: str, node: str, terms: list[tuple[dict[str, int], Any, Any]],
            data: Data) -> Any:
    """A literal true when the job places a pod on the node (made once per pair)."""
    if (job, node) not in ev.places:
        ev.places[job, node] = lit = m.new_bool_var(f"places[{job}@{node}]")
        ub = sum(row.get(node, 0) for (j, _t), row in data.arcs.items() if j == job)
        m.add(sum(x for _req, x, _e in terms) <= ub * lit)
    return ev.places[job, node]


class Accounts:
    """Queue allocations at each job's turn in the replay, as linear expressions."""

    def __init__(self, data: Data, v: Vars) -> None:
        self.data = data
        self.v = v
        self.queues = data.queues
        self.order = data.order
        self.chain = {job.key: set(self.queues.chain(job.queue)) for job in data.valid}
        self.freed: dict[tuple[str, str, str], list[Any]] = defaultdict(list)
        """(job, queue, r) -> what the job's victims give back to the queue."""
        for (j, k), y in v.ev.take.items():
            cls = data.victims.classes[k]
            for q in self.queues.chain(cls.queue):
                for r, x in cls.requests.items():
                    if x:
                        self.freed[j, q, r].append(x * y)
        self.flush = flush_point(data)
        self.flushed: dict[tuple[str, str, str], int] = defaultdict(int)
        """(job, queue, r) -> what the anchor's flushed victims of the job give back ("" : all of them)."""
        for j in sorted(data.victims.anchor.flushed if data.victims.anchor is not None else ()):
            for cls, n in flushed_takes(data, {j}):
                for q in self.queues.chain(cls.queue):
                    for r, x in cls.requests.items():
                        self.flushed[j, q, r] += x * n
                        self.flushed["", q, r] += x * n

    def early(self, j: str, q: str, r: str) -> Any:
        return self.v.ev.early_amount[j, r] if q in self.chain[j] and (j, r) in self.v.ev.early_amount else 0

    def late(self, j: str, q: str, r: str) -> Any:
        """What the job's own turn changes: its late pods minus what its victims give back."""
        ev = self.v.ev
        placed = ev.amount[j, r] - ev.early_amount[j, r] if q in self.chain[j] and (j, r) in ev.amount else 0
        back = self.flushed.get((j, q, r), 0) * ev.anchor if ev.anchor is not None and self.flush is not None else 0
        return placed - sum(self.freed.get((j, q, r), [])) + back

    def start(self, q: str, r: str) -> Any:
        """After the early jobs: the snapshot's allocation plus every early pod."""
        return self.queues.allocated[q].get(r, 0) + sum(self.early(j, q, r) for j in self.order)

    def before(self, j: str, q: str, r: str) -> Any:
        """At the job's turn (before its evictions), when it is replayed after the evictions."""
        i = self.order.index(j)
        gone = self.flushed.get(("", q, r), 0) * self.v.ev.anchor if self.flush is not None and i >= self.flush else 0
        return self.start(q, r) + sum(self.late(jj, q, r) for jj in self.order[:i]) - gone


def add_queues(m: cp_model.CpModel, data: Data, v: Vars) -> None:
    """The early jobs within realCapability (allocated + Σ requests, every queue and resource they
    charge); after each late job, its queue and ancestors within realCapability."""
    acc = Accounts(data, v)
    queues = data.queues
    charged: set[tuple[str, str]] = set()
    for (j, r) in v.ev.amount:
        for q in acc.chain[j]:
            charged.add((q, r))
    charged = {(q, r) for q, r in charged if queues.limited(q, r)}
    for q, r in sorted(charged):
        room = queues.real[q].get(r, 0) - queues.allocated[q].get(r, 0)
        m.add(sum(acc.early(j, q, r) for j in acc.order) <= max(room, 0))
    for j in acc.order:
        for q in sorted(acc.chain[j]):
            for r in sorted(r for (jj, r) in v.ev.amount if jj == j and queues.limited(q, r)):
                after_turn = acc.before(j, q, r) + acc.late(j, q, r)
                m.add(after_turn <= queues.real[q].get(r, 0)).only_enforce_if(v.ev.after[j])


def add_entitlement(m: cp_model.CpModel, data: Data, v: Vars) -> None:
    """A class is taken only by an admitted late job that lands on its node (victims come only from the
    node a preemptor pod is tried on), by the job's one action; landing means a pod there that may
    evict (not a preemptionPolicy Never task's). An exposed class (``model.VictimData.owner``) is taken only
    while the job it belongs to is not admitted: that job is then never admitted (``jobs.lost_pods``)."""
    vd, ev = data.victims, v.ev
    for (j, k), y in ev.take.items():
        cls = vd.classes[k]
        if k in vd.owner and vd.owner[k] in v.admitted:
            m.add(y <= cls.size * (1 - v.admitted[vd.owner[k]]))
        if k in vd.gang_class:  # a bundle: anywhere in the job's domain, by its own action (``gang_cpsat``)
            m.add(y <= cls.size * ev.after[j])
            continue
        lands = ev.lands.get((j, cls.node))
        m.add(y <= (cls.size * lands if lands is not None else 0)).only_enforce_if(unless_anchor(ev))
        m.add(y <= cls.size * ev.after[j])
        if j in ev.reclaims:
            rec = ev.reclaims[j]
            m.add(y <= cls.size * (rec if vd.pairs[j, k] == "reclaim" else 1 - rec))
    at: dict[tuple[str, str], list[Any]] = defaultdict(list)
    for (j, t, n), x in v.count.items():
        if data.task(j, t) not in data.ctx.never[j]:  # a preemptionPolicy Never pod evicts nothing
            at[j, n].append(x)
    for (j, n), lit in ev.lands.items():
        if at[j, n]:
            m.add(sum(at[j, n]) >= 1).only_enforce_if(lit)
        else:
            m.add(lit == 0)


def add_never(m: cp_model.CpModel, data: Data, v: Vars) -> None:
    """A job with a preemptionPolicy Never task that takes victims by preempt or reclaim: its other tasks'
    pods meet minAvailable and the task minimums (``Context.need``, less what already runs), a Never task with
    a minimum of its own forbidding it any such victim. vc-scheduler v1.15.1's preempt
    (``taskEligibleToPreempt``) and reclaim pass over a Never task's pods, so they never pipeline and the job
    is committed only when the others make it pipelined (``JobPipelined``); the gang actions take Never pods
    like the others (``gangevict``), so bundles are not counted here."""
    vd, ev = data.victims, v.ev
    takes: dict[str, list[tuple[int, Any]]] = defaultdict(list)
    for (j, k), y in ev.take.items():
        if data.ctx.never.get(j) and k not in vd.gang_class:
            takes[j].append((vd.classes[k].size, y))
    jobs = {job.key: job for job in data.valid}
    for j, ys in sorted(takes.items()):
        evicts = m.new_bool_var(f"evicts[{j}]")
        for size, y in ys:
            m.add(y <= size * evicts)
        never = data.ctx.never[j]
        minima, need = data.ctx.need(jobs[j])
        if any(minima.get(t, 0) > 0 for t in never):
            m.add(evicts == 0).only_enforce_if(unless_anchor(ev))
            continue
        may = [x for t in jobs[j].tasks if t.name not in never for x in v.by_task.get((j, t.name), ())]
        m.add(sum(may) >= max(need, 1)).only_enforce_if([evicts, *unless_anchor(ev)])


def add_safety(m: cp_model.CpModel, data: Data, v: Vars) -> None:
    """Safe preemption's plan-wide rules (``safety``; its static ones are in the pairs): per
    PodDisruptionBudget, the victims charged to it ≤ its disruptionsAllowed; with a cooldown, at most one
    job per queue evicts."""
    vd, ev = data.victims, v.ev
    safety, snap = data.ctx.safety, data.ctx.snapshot
    if safety.pdb:
        allowed = pdb_allowed(snap)
        by_pdb: dict[str, list[Any]] = defaultdict(list)
        for (_j, k), y in ev.take.items():
            pdb = vd.classes[k].pdb
            if pdb is not None:
                by_pdb[pdb].append(y)
        for key, ys in sorted(by_pdb.items()):
            m.add(sum(ys) <= allowed.get(key, 0))
    if safety.cooldown_seconds is not None:
        takes: dict[str, list[tuple[str, Any]]] = defaultdict(list)
        for (j, k), y in ev.take.items():
            takes[j].append((k, y))
        by_queue: dict[str, list[Any]] = defaultdict(list)
        queue_of = {job.key: job.queue for job in data.valid}
        for j, ys in sorted(takes.items()):
            evicts = m.new_bool_var(f"evicts[{j}]")
            for k, y in ys:
                m.add(y <= vd.classes[k].size * evicts)
            by_queue[queue_of[j]].append(evicts)
        for _q, flags in sorted(by_queue.items()):
            m.add_at_most_one(flags)


def add_victim_gangs(m: cp_model.CpModel, data: Data, v: Vars) -> None:
    """Per victim PodGroup above minMember: evicted ≤ ready − minMember over the whole plan (the first
    tier's gang plugin never offers a pod below minMember). A PodGroup at minMember is taken only by the
    second tier (``add_second_tier``)."""
    vd, ev = data.victims, v.ev
    cat = data.ctx.catalogue
    by_group: dict[str, list[Any]] = defaultdict(list)
    for (_j, k), y in ev.take.items():
        if k not in vd.gang_class:  # a whole bundle breaks the gang; a group a bundle takes is no one else's
            by_group[vd.classes[k].group].append(y)
    for g, ys in sorted(by_group.items()):
        if cat.groups[g].slack > 0:
            m.add(sum(ys) <= cat.groups[g].slack).only_enforce_if(unless_anchor(ev))


def add_second_tier(m: cp_model.CpModel, data: Data, v: Vars) -> None:
    """The second tier's pairs (``model.VictimData.second``): drf, per (job, PodGroup), at most
    ``drf_most`` pods of the group taken by the jobs up to this one when it takes some; the capacity
    plugin, per queue, at most ``capacity_most`` pods taken from it when some job reclaims from it by the
    second tier. Both bounds are computed so that each such pod passes its plugin whatever else the plan
    does (``model.drf_limit``, ``model.capacity_limit``)."""
    vd, ev = data.victims, v.ev
    order = {j: i for i, j in enumerate(data.order)}
    by_group: dict[str, list[tuple[str, Any]]] = defaultdict(list)
    by_queue: dict[str, list[Any]] = defaultdict(list)
    for (j, k), y in ev.take.items():
        by_group[vd.classes[k].group].append((j, y))
        by_queue[vd.classes[k].queue].append(y)
    for (j, g), most in sorted(vd.drf_most.items()):
        mine = [y for (jj, k), y in ev.take.items() if jj == j and vd.classes[k].group == g and (jj, k) in vd.second]
        if not mine:
            continue
        some = m.new_bool_var(f"drf[{j}<-{g}]")
        ev.second[j, g] = some
        m.add(sum(mine) <= len(data.ctx.catalogue.groups[g].occupying) * some)
        m.add(sum(y for jj, y in by_group[g] if order[jj] <= order[j]) <= most).only_enforce_if(
            [some, *unless_anchor(ev)])
    for q, most in sorted(vd.capacity_most.items()):
        mine = [y for (j, k), y in ev.take.items() if (j, k) in vd.second and vd.classes[k].queue == q]
        if not mine:
            continue
        some = m.new_bool_var(f"capacity[{q}]")
        ev.second["", q] = some
        m.add(sum(mine) <= sum(vd.classes[k].size for k in vd.classes if vd.classes[k].queue == q) * some)
        m.add(sum(by_queue[q]) <= most).only_enforce_if([some, *unless_anchor(ev)])


def add_reclaim_rules(m: cp_model.CpModel, data: Data, v: Vars) -> None:
    """The capacity plugin's PreemptiveFn for a reclaiming job at its turn (``Accounts.before``): every
    unit (``model.Unit``: a task's pods of one shape) with a pod placed finds one of its requested dimensions
    where ``before + the job's amount ≤ deserved`` (Volcano checks each pod with the job's pods before it; the
    whole amount is the last pod's, so this is exact when the units request the same dimensions, stricter
    otherwise). The victims
    themselves need no capacity rule here: the model takes them from the first tier (gang ∩
    conformance), which decides before the capacity plugin is asked."""
    ev = v.ev
    if not ev.reclaims:
        return
    acc = Accounts(data, v)
    queues = data.queues
    jobs = {job.key: job for job in data.valid}
    counts: dict[tuple[str, str], list[Any]] = defaultdict(list)
    for (j, task_name, _n), x in v.count.items():
        counts[j, task_name].append(x)
    for j, rec in sorted(ev.reclaims.items()):
        job = jobs[j]
        des = queues.deserved[job.queue]
        for r in sorted(job_needs(job)):
            if des.get(r, 0) > 0 and (j, r) in ev.amount:
                ev.under[j, r] = u = m.new_bool_var(f"under[{j},{r}]")
                m.add(acc.before(j, job.queue, r) + ev.amount[j, r] <= des[r]).only_enforce_if(u)
        for unit in data.units_of(j):
            xs = counts.get((j, unit), [])
            if not xs:
                continue
            lits = [ev.under[j, r] for r in sorted(dims(data.pod(j, unit).requests)) if (j, r) in ev.under]
            if not lits:
                m.add(sum(xs) == 0).only_enforce_if([rec, *unless_anchor(ev)])
                continue
            ev.has[j, unit] = h = m.new_bool_var(f"has[{j}/{unit}]")
            m.add(sum(xs) <= len(data.units[j][unit].indices) * h)
            m.add_bool_or(lits).only_enforce_if([rec, h, *unless_anchor(ev)])


def min_demand(job: VCJob, data: Data) -> dict[str, int]:
    """The least the admitted gang requests of each resource: every task's minimum at its smallest pending
    pods (its units', ``model.Unit``), the rest of minAvailable at the smallest request among the pending pods."""
    minima, need = data.ctx.need(job)  # a running gang's pending pods need less
    units = [data.units[job.key][u] for u in data.units_of(job.key)]
    firsts = [data.ctx.pods[job.key][t.name][0] for t in job.tasks if t.replicas > 0]  # the tasks' first pods
    out: dict[str, int] = {}
    for r in sorted({r for p in [*firsts, *(u.pod for u in units)] for r in p.requests}):
        fixed = 0
        for task, least in minima.items():
            asks = sorted(x for u in units if u.task == task for x in [u.pod.requests.get(r, 0)] * len(u.indices))
            fixed += sum(asks[:least])
        rest = max(need - sum(minima.values()), 0)
        out[r] = fixed + rest * min((p.requests.get(r, 0) for p in [*firsts, *(u.pod for u in units)]), default=0)
    return out


def add_region_cuts(m: cp_model.CpModel, data: Data, v: Vars) -> None:
    """Redundant, for the LP bound of the victims' cost: a job that ends in a region takes at least its
    gang's least demand of each resource from the free room of the region's nodes it may use plus what
    evictions there release (by any job)."""
    vd, ev = data.victims, v.ev
    ctx = data.ctx
    takes: dict[str, list[tuple[VictimClass, Any]]] = defaultdict(list)
    for (_j, k), y in ev.take.items():
        takes[vd.classes[k].node].append((vd.classes[k], y))
    for job in data.valid:
        usable = {n for (j, _t), row in data.arcs.items() if j == job.key for n in row}
        if not usable & vd.nodes:
            continue
        demand = min_demand(job, data)
        regions = ctx.regions[job.key]
        for i, region in enumerate(regions):
            lit = v.region.get((job.key, i)) if job.network_topology is not None else v.admitted[job.key]
            if lit is None:
                continue
            nodes = sorted(usable & region.nodes)
            for r, d in sorted(demand.items()):
                free = sum(max(ctx.free[n].get(r, 0), 0) for n in nodes)
                if d <= free:
                    continue
                released = [cls.releases(r) * y for n in nodes for cls, y in takes.get(n, []) if cls.releases(r)]
                m.add(sum(released) >= (d - free) * lit)


def cost(data: Data, v: Vars) -> Any:
    """Σ cost × take: the victims' cost."""
    return sum(data.victims.classes[k].cost * y for (_j, k), y in v.ev.take.items())


def add_hint(m: cp_model.CpModel, data: Data, v: Vars, plan: PlacementPlan,
             counts: dict[tuple[str, str, str], int]) -> None:
    """Hint the victim variables from a plan (its victims, replay order and the state at each turn)."""
    vd, ev = data.victims, v.ev
    queues = data.queues
    cat = data.ctx.catalogue
    admitted = {jp.key: jp for jp in plan.jobs if jp.admitted}
    late = {jp.key for jp in plan.jobs if jp.victims or (jp.admitted and jp.after_evictions)}
    taken: dict[tuple[str, str], int] = defaultdict(int)
    reason: dict[str, str] = {}
    for jp in plan.jobs:
        key = jp.key
        for vic in jp.victims:
            cls = vd.class_of.get(f"{vic.namespace}/{vic.name}")
            if cls is not None:
                taken[key, cls] += 1
            reason[key] = vic.reason
    for pair, y in ev.take.items():
        if pair[1] not in vd.gang_class:  # the bundles' classes: ``gang_cpsat.add_hint``
            m.add_hint(y, taken.get(pair, 0))
    for j, a in ev.after.items():
        m.add_hint(a, int(j in late))
    if ev.anchor is not None:
        m.add_hint(ev.anchor, int(is_anchor(data, plan)))
    for (j, t, n), e in ev.early.items():
        m.add_hint(e, 0 if j in late else counts.get((j, t, n), 0))
    amounts: dict[tuple[str, str], int] = defaultdict(int)
    for (j, t, _n), num in counts.items():
        for r, amt in data.pod(j, t).requests.items():
            amounts[j, r] += amt * num
    for jr, a in ev.amount.items():
        m.add_hint(a, amounts.get(jr, 0))
    for (j, r), a in ev.early_amount.items():
        m.add_hint(a, 0 if j in late else amounts.get((j, r), 0))
    landed = {(j, n) for (j, _t, n), num in counts.items() if num}
    for jn, lit in ev.lands.items():
        m.add_hint(lit, int(jn in landed))
    for j, lit in ev.reclaims.items():
        m.add_hint(lit, int(reason.get(j) == "reclaim"))
    for (j, g), lit in ev.second.items():  # (job, PodGroup) for drf, ("", queue) for capacity
        m.add_hint(lit, int(any(n for (jj, k), n in taken.items() if (jj, k) in vd.second and (
            (j, g) == (jj, vd.classes[k].group) if j else (j == "" and vd.classes[k].queue == g)))))
    # the replay: early jobs, then the late ones in job order, with the allocations at each turn
    alloc = {q: dict(a) for q, a in queues.allocated.items()}
    by_key = {jp.key: jp for jp in plan.jobs}
    order = [jp for jp in plan.jobs if jp.key in admitted and jp.key not in late] + \
        [by_key[j] for j in data.order if j in late and j in by_key]
    before: dict[str, dict[str, dict[str, int]]] = {}
    for jp in order:
        if jp.key in late:
            before[jp.key] = {q: dict(a) for q, a in alloc.items()}
        for vic in jp.victims:
            c = cat.candidates.get(f"{vic.namespace}/{vic.name}")
            if c is None:
                continue
            for q in queues.chain(c.queue):
                for r, amt in c.pod.requests.items():
                    alloc[q][r] = alloc[q].get(r, 0) - amt
        for b in jp.bindings if jp.admitted else ():
            for q in queues.chain(jp.queue):
                for r, amt in data.ctx.pods[jp.key][b.task][b.index].requests.items():
                    alloc[q][r] = alloc[q].get(r, 0) + amt
    _hint_reclaim(m, data, v, before, amounts, counts)


def is_anchor(data: Data, plan: PlacementPlan) -> bool:
    """The plan's late jobs, their victims and placements are the anchor's (``model.Anchor``)."""
    anchor = data.victims.anchor
    if anchor is None:
        return False
    late = {jp.key: jp for jp in plan.jobs if jp.victims or (jp.admitted and jp.after_evictions)}
    if set(late) != anchor.late:
        return False
    for k, jp in late.items():
        a = anchor.job(k)
        if _shape(jp) != _shape(a):
            return False
    return True


def _shape(jp: JobPlacement) -> tuple[Any, ...]:
    return (jp.admitted, jp.hyper_node, sorted((x.namespace, x.name) for x in jp.victims),
            sorted((b.task, b.node) for b in jp.bindings))


def _hint_reclaim(m: cp_model.CpModel, data: Data, v: Vars, before: dict[str, dict[str, dict[str, int]]],
                  amounts: dict[tuple[str, str], int], counts: dict[tuple[str, str, str], int]) -> None:
    """Hint the reclaimer's literals (``add_reclaim_rules``) from a plan's replay: the state at each late
    job's turn (``before``) and its amounts."""
    ev = v.ev
    queues = data.queues
    jobs = {job.key: job for job in data.valid}
    for (j, r), lit in ev.under.items():
        q = jobs[j].queue
        m.add_hint(lit, int(j in before and before[j][q].get(r, 0) + amounts.get((j, r), 0)
                            <= queues.deserved[q].get(r, 0)))
    placed = {(j, t) for (j, t, _n), num in counts.items() if num}
    for jt, lit in ev.has.items():
        m.add_hint(lit, int(jt in placed))


def extract(data: Data, v: Vars, s: cp_model.CpSolver) -> dict[str, list[tuple[Candidate, VictimReason]]]:
    """job -> its victims and their action: each class's pods handed out in victim order, jobs in order."""
    vd = data.victims
    out: dict[str, list[tuple[Candidate, VictimReason]]] = defaultdict(list)
    handed: dict[str, int] = defaultdict(int)
    for key in data.order:
        for (j, k), y in sorted(v.ev.take.items()):
            if j != key:
                continue
            n = int(s.value(y))
            if n:
                cls = vd.classes[k]
                out[j].extend((c, vd.pairs[j, k]) for c in cls.pods[handed[k]:handed[k] + n])
                handed[k] += n
    return dict(out)
