"""Volcano's gang-aware eviction actions, ``gangpreempt`` and ``gangreclaim`` (v1.15), inside the exact placement
model (``cpsat``), when the scheduler configuration lists them: a starving job may take whole bundles of victim
pods (``bundles``) instead of single pods, decided jointly with every placement and every other victim.

**Data** (``model.gang_data``): per job, listed action and domain (``gangevict.job_domains``: a hard job's
HyperNodes widest first, else the cluster), the action's candidates on the domain's nodes
(``gangrules.candidate_refused``: gangpreempt, pods of the job's queue of strictly lower job priority;
gangreclaim, pods of other, reclaimable queues) split into bundles per victim PodGroup on the snapshot
(``gangrules.domain_bundles``): the *safe* bundle, the pods above minMember, and the *whole* bundle, the pods
that break the gang, kept only under the action's ``allowWholeBundle``. Each bundle's pods become classes of
that job alone (``model.VictimData.gang_class``); ``victims_cpsat``'s capacity, queue and replay families count
them like any victim (their room is freed for the job and every job replayed after it), its per-node rules
(landing next to the victim, "just enough", the gang plugin's minMember) do not apply to them.

Decisions: ``bundle[b]``: the job takes bundle b (every pod of it: ``take = size × bundle``); ``gang[job,
action]``: the job evicts by that action.

Constraints (``add_bundles``):

- one action per job: a job evicts by one gang-aware action, or by preempt/reclaim, never two;
- every pending pod or none: a job that evicts by a gang-aware action places all its pending pods;
- the domain: a hard job's bundles of a domain only when it ends in that domain's HyperNode;
- safe before whole: a whole bundle of a domain only with every safe bundle of that domain that is left at the
  job's turn (Volcano ranks every safe bundle first and takes bundles in order until the domain's room covers
  the job; a PodGroup a job before it in the replay took bundles of has none left);
- one taker per victim PodGroup: the bundles are the snapshot's, so a PodGroup a job takes bundles of is taken
  by no other job, by bundles or by preempt/reclaim (the validator re-forms the bundles on what the jobs before
  left);
- gangreclaim's PreemptiveFn (the capacity plugin) on the job's pods summed at its turn (``victims_cpsat.
  Accounts.before``): on some requested dimension the queue's allocation plus the job's stays within deserved.

**Where it relaxes Volcano** (each plan still passes the validator, which checks the bundle rule,
``gangrules.gang_victim_violations``, and ``cpsat`` keeps the greedy's plan when it refuses): the bundles'
ranked order among the safe ones (and among the whole ones) is free — the model takes any set of safe bundles
that lets the job place, the cheapest by the victim objective, where Volcano takes them in rank order until the
summed room covers the job; the domains are free among the job's (Volcano takes the first, widest, that works);
where the pods land is free inside the domain (Volcano places each on its best binpack node, idle room first).
Only the first tier decides the victims (the capacity plugin in the first tier with gangreclaim is declined:
``gangevict.exact_declines``). What it cannot say: two jobs taking bundles of one PodGroup (Volcano forms a later
job's bundles on what the earlier ones left — a PodGroup's safe pods of one domain for one job, the rest of its
surplus in another domain for the next); the bundles are the snapshot's, one taker each, so a greedy plan that
does so is outside the model, with or without the anchor (``benchmarks/gang_exact_scale.py`` seeds 9 and 20),
and ``cpsat`` keeps it. So the exact plan is a plan the actions' rules allow, not necessarily the one
Volcano's walk would find; ``auto`` takes it only when ``plan_key`` ranks it strictly better.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from ortools.sat.python import cp_model

from optplan.models.placement import PlacementPlan
from optplan.solvers.placement.bundles import SAFE, WHOLE
from optplan.solvers.placement.gangrules import GANG_REASON
from optplan.solvers.placement.model import Data, Vars
from optplan.solvers.placement.victims import dims
from optplan.solvers.placement.victims_cpsat import Accounts, unless_anchor


def add_bundles(m: cp_model.CpModel, data: Data, v: Vars) -> None:
    """The bundle variables and their rules (module docstring); after ``victims_cpsat.add_variables``."""
    vd, ev = data.victims, v.ev
    if not vd.gang:
        return
    ctx = data.ctx
    jobs = data.jobs
    acts: dict[tuple[str, str], Any] = {}
    by_domain: dict[tuple[str, str, int | None], list[tuple[str, str, Any]]] = defaultdict(list)
    touch: dict[tuple[str, str], list[Any]] = defaultdict(list)  # (job, PodGroup) -> its bundle literals
    for b in vd.gang:
        ev.bundle[b.name] = x = m.new_bool_var(f"bundle[{b.name}]")
        for k in b.classes:
            m.add(ev.take[b.job, k] == vd.classes[k].size * x)
        if (b.job, b.action) not in acts:
            acts[b.job, b.action] = m.new_bool_var(f"gang[{b.job},{b.action}]")
        m.add_implication(x, acts[b.job, b.action])
        by_domain[b.job, b.action, b.domain].append((b.kind, b.group, x))
        touch[b.job, b.group].append(x)
        if b.domain is not None:
            m.add_implication(x, v.region[b.job, b.domain])
    for (j, action), a in acts.items():
        m.add_bool_or([ev.bundle[b.name] for b in vd.gang if b.job == j and b.action == action]).only_enforce_if(a)
    touched = {jg: _touched(m, jg, xs) for jg, xs in sorted(touch.items())}
    pos = {j: i for i, j in enumerate(data.order)}
    for (j, _action, _d), rows in by_domain.items():  # safe before whole, of the safe bundles left at its turn
        for kind, _g, x in rows:
            if kind != WHOLE:
                continue
            for k2, g, s in rows:
                if k2 == SAFE:  # a PodGroup a job before it took bundles of has no safe bundle left for it
                    before = [t for (jj, gg), t in touched.items() if gg == g and jj != j and pos[jj] < pos[j]]
                    m.add_bool_or([s, *before]).only_enforce_if(x)
    legacy: dict[str, list[Any]] = defaultdict(list)
    legacy_group: dict[str, list[tuple[int, Any]]] = defaultdict(list)
    for (j, k), y in ev.take.items():
        if k not in vd.gang_class:
            legacy[j].append(y)
            legacy_group[vd.classes[k].group].append((vd.classes[k].size, y))
    for j in sorted({j for (j, _a) in acts}):
        mine = [a for (jj, _a), a in acts.items() if jj == j]
        if legacy.get(j):
            other = m.new_bool_var(f"legacy[{j}]")
            m.add(sum(legacy[j]) <= sum(vd.classes[k].size for (jj, k) in ev.take if jj == j) * other)
            mine.append(other)
        m.add_at_most_one(mine)
        job = jobs[j]
        pending = sum(len(ctx.pending(job, t.name)) for t in job.tasks)
        gang = _any(m, [a for (jj, _a), a in acts.items() if jj == j], f"gang[{j}]")
        m.add(sum(v.placed(j, t.name) for t in job.tasks) >= pending).only_enforce_if(gang)
    groups: dict[str, list[Any]] = defaultdict(list)
    for (_j, g), t in touched.items():
        groups[g].append(t)
    for g, ts in sorted(groups.items()):
        m.add(sum(ts) <= 1)
        if legacy_group.get(g):
            most = sum(size for size, _y in legacy_group[g])
            m.add(sum(y for _s, y in legacy_group[g]) <= most * (1 - sum(ts)))
    _reclaim_rule(m, data, v, {j: a for (j, action), a in acts.items() if GANG_REASON[action] == "reclaim"})


def _touched(m: cp_model.CpModel, jg: tuple[str, str], xs: list[Any]) -> Any:
    """A literal true exactly when the job takes one of its bundles ``xs`` of the PodGroup."""
    t = m.new_bool_var(f"touch[{jg[0]}<-{jg[1]}]")
    for x in xs:
        m.add_implication(x, t)
    m.add_bool_or(xs).only_enforce_if(t)
    return t


def _any(m: cp_model.CpModel, lits: list[Any], name: str) -> Any:
    """A literal true exactly when one of ``lits`` is."""
    if len(lits) == 1:
        return lits[0]
    out = m.new_bool_var(name)
    m.add_max_equality(out, lits)
    return out


def _reclaim_rule(m: cp_model.CpModel, data: Data, v: Vars, reclaiming: dict[str, Any]) -> None:
    """gangreclaim's PreemptiveFn on the job's pods summed (every pending pod: the amount placed) at its turn:
    some requested dimension where the queue's allocation + the job's amount ≤ deserved. Its realCapability
    half is the queue rule every late job meets (``victims_cpsat.add_queues``)."""
    if not reclaiming:
        return
    acc = Accounts(data, v)
    queues = data.queues
    jobs = data.jobs
    for j, rec in sorted(reclaiming.items()):
        job = jobs[j]
        des = queues.deserved[job.queue]
        need: set[str] = set()
        for unit in data.units_of(j):
            need |= dims(data.pod(j, unit).requests)
        lits = []
        for r in sorted(need):
            if des.get(r, 0) > 0 and (j, r) in v.ev.amount:
                u = m.new_bool_var(f"gang_under[{j},{r}]")
                m.add(acc.before(j, job.queue, r) + v.ev.amount[j, r] <= des[r]).only_enforce_if(u)
                lits.append(u)
        m.add_bool_or(lits or [rec.negated()]).only_enforce_if([rec, *unless_anchor(v.ev)])


def add_hint(m: cp_model.CpModel, data: Data, v: Vars, plan: PlacementPlan) -> None:
    """Hint the bundles from a plan: a bundle is taken when its job's victims (by its action, in its domain)
    hold every pod of it."""
    vd, ev = data.victims, v.ev
    if not vd.gang:
        return
    regions = data.ctx.regions
    victims: dict[tuple[str, str], set[str]] = defaultdict(set)
    where: dict[str, str | None] = {}
    for jp in plan.jobs:
        if jp.admitted:
            where[jp.key] = jp.hyper_node
            for x in jp.victims:
                victims[jp.key, x.reason].add(f"{x.namespace}/{x.name}")
    taken: set[str] = set()
    for b in vd.gang:
        keys = {c.key for k in b.classes for c in vd.classes[k].pods}
        here = b.domain is None or regions[b.job][b.domain].hyper_node == where.get(b.job)
        if here and keys and keys <= victims.get((b.job, b.action), set()):
            taken.add(b.name)
        m.add_hint(ev.bundle[b.name], int(b.name in taken))
        for k in b.classes:
            m.add_hint(ev.take[b.job, k], vd.classes[k].size if b.name in taken else 0)
