"""Least-cost victims for one job that does not fit, on OR-Tools CP-SAT.

Called by ``placement.plan_victims`` for each job in Volcano's order, on the state the earlier jobs
left (their pods placed, their victims gone), with the job's ``placement.Rules`` for one action
(preempt or reclaim). Decisions:

- ``evict[pod]``: the candidate is evicted (only candidates the rules allow);
- ``whole[group]``: every remaining occupying pod of the victim PodGroup goes (allowed only when all of
  them are candidates);
- ``count[task, node]``: pods of the task placed on the node (static predicates pass there);
- ``region[i]``: the job ends in its i-th candidate region (topology jobs only).

Constraints: the gang's minimum exactly (every task's minimum, ``minAvailable`` pods in all); per node
and per resource the job requests, placed requests ≤ free + what evictions on *that node* free (and the
pod count): freed capacity counts only where the gang goes; the job's queue and ancestors stay within
realCapability (evictions in the chain free allocation); per victim PodGroup, evicted ≤ ready −
minMember − already taken, unless ``whole``; reclaim floors per queue and resource.

Objective: minimise Σ cost × evict (``victims`` module: priority-weighted, newer pods cheaper), then the
tier of the region, as one weighted sum. Hinted with the greedy's choice.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import Any

from ortools.sat.python import cp_model

from optplan.models.placement import Binding
from optplan.solvers.base import PlanOptions
from optplan.solvers.oracle import POD_SLOT, static_reason
from optplan.solvers.placement import Context, Rules, State, VictimChoice, task_minima
from optplan.solvers.placement_cpsat import max_fit
from optplan.solvers.victims import Candidate, Catalogue

log = logging.getLogger(__name__)


def solve_job(ctx: Context, state: State, cat: Catalogue, rules: Rules, options: PlanOptions,
              hint: VictimChoice | None = None) -> VictimChoice | None:
    """The least-cost victims that let the job's gang fit, or None (infeasible or no solution in time)."""
    job = rules.job
    snap = ctx.snapshot
    regions = ctx.regions[job.key]
    if not regions:
        return None
    allowed = sorted(frozenset().union(*(r.nodes for r in regions)))
    cands = sorted(rules.eligible.values(), key=Candidate.order_key)
    on_node: dict[str, list[Candidate]] = defaultdict(list)
    for c in cands:
        on_node[c.node].append(c)
    limits = {n: "pods" in snap.nodes[n].allocatable for n in allowed}
    m = cp_model.CpModel()
    # evict[pod key]: the candidate is evicted
    evict = {c.key: m.new_bool_var(f"evict[{c.key}]") for c in cands}
    # count[task, node]: pods of the task placed on the node
    count: dict[tuple[str, str], Any] = {}
    pods = ctx.pods[job.key]
    for t in job.tasks:
        if t.replicas == 0:
            continue
        pod = pods[t.name][0]
        for n in allowed:
            if static_reason(pod, snap.nodes[n]) is not None:
                continue
            room = dict(state.cap.free[n])
            for c in on_node.get(n, ()):
                for r, v in c.pod.requests.items():
                    room[r] = room.get(r, 0) + v
                room["pods"] = room.get("pods", 0) + POD_SLOT
            ub = min(t.replicas, max_fit(pod, room, limits[n]))
            if ub > 0:
                count[t.name, n] = m.new_int_var(0, ub, f"count[{t.name}->{n}]")
    # region[i]: the job ends in its i-th candidate region
    region: dict[int, Any] = {}
    add_gang(m, rules, count, task_minima(job))
    if job.network_topology is not None:
        for i, rg in enumerate(regions):
            region[i] = m.new_bool_var(f"region[{rg.hyper_node or '<root>'}]")
        m.add_exactly_one(region.values())
        for (_task, n), x in count.items():
            inside = [region[i] for i, rg in enumerate(regions) if n in rg.nodes]
            m.add(x <= rules.job.replicas * sum(inside))
    add_capacity(m, ctx, state, rules, count, evict, on_node, limits)
    add_queue(m, ctx, state, rules, count, evict, cands)
    add_victim_gangs(m, state, cat, rules, evict, cands)
    add_floors(m, rules, evict, cands)
    top = max((rg.tier or 0 for rg in regions), default=0)
    cost = sum(c.cost * evict[c.key] for c in cands)
    m.minimize(cost * (top + 2) + sum((regions[i].tier or 0) * y for i, y in region.items()))
    if hint is not None:
        add_hint(m, hint, count, evict, region, regions)
    s = cp_model.CpSolver()
    s.parameters.max_time_in_seconds = max(options.time_limit, 0.05)
    s.parameters.num_workers = options.workers
    s.parameters.random_seed = options.seed
    st = s.solve(m)
    ok = st in (cp_model.OPTIMAL, cp_model.FEASIBLE)
    log.info("placement victims cpsat %s (%s): %s objective %s bound %s in %.2fs", job.key, rules.reason,
             s.status_name(st), s.objective_value if ok else None, s.best_objective_bound if ok else None,
             s.wall_time)
    if not ok:
        return None
    chosen = [c for c in cands if s.value(evict[c.key])]
    bindings: list[Binding] = []
    for t in job.tasks:
        i = 0
        for n in allowed:
            x = count.get((t.name, n))
            for _ in range(int(s.value(x)) if x is not None else 0):
                bindings.append(Binding(task=t.name, index=i, node=n))
                i += 1
    where = next((regions[i] for i, y in region.items() if s.value(y)), regions[0])
    return VictimChoice(bindings=bindings, victims=chosen, region=where, cost=sum(c.cost for c in chosen))


def add_gang(m: cp_model.CpModel, rules: Rules, count: dict[tuple[str, str], Any], minima: dict[str, int]) -> None:
    """The gang's minimum exactly: every task's minimum, ``minAvailable`` pods in all."""
    job = rules.job
    for t in job.tasks:
        placed = sum(x for (task, _n), x in count.items() if task == t.name)
        m.add(placed <= t.replicas)
        if minima.get(t.name, 0) > 0:
            m.add(placed >= minima[t.name])
    m.add(sum(count.values()) == job.min_available)


def add_capacity(m: cp_model.CpModel, ctx: Context, state: State, rules: Rules, count: dict[tuple[str, str], Any],
                 evict: dict[str, Any], on_node: dict[str, list[Candidate]], limits: dict[str, bool]) -> None:
    """Per node: placed requests ≤ free + what the evictions on this node free (and the pod count)."""
    pods = ctx.pods[rules.job.key]
    by_node: dict[str, list[tuple[dict[str, int], Any]]] = defaultdict(list)
    for (task, n), x in count.items():
        by_node[n].append((pods[task][0].requests, x))
    for n, terms in sorted(by_node.items()):
        free = state.cap.free[n]
        here = on_node.get(n, [])
        for r in sorted({r for req, _x in terms for r, v in req.items() if v > 0}):
            freed = sum(c.pod.requests.get(r, 0) * evict[c.key] for c in here)
            m.add(sum(req.get(r, 0) * x for req, x in terms) <= free.get(r, 0) + freed)
        if limits[n]:
            freed_slots = sum(POD_SLOT * evict[c.key] for c in here)
            m.add(sum(POD_SLOT * x for _req, x in terms) <= free.get("pods", 0) + freed_slots)


def add_queue(m: cp_model.CpModel, ctx: Context, state: State, rules: Rules, count: dict[tuple[str, str], Any],
              evict: dict[str, Any], cands: list[Candidate]) -> None:
    """The job's queue and ancestors: allocated + placed − evicted within the chain ≤ realCapability."""
    qs = state.queues
    pods = ctx.pods[rules.job.key]
    chain = qs.chain(rules.job.queue)
    for q in chain:
        for r in sorted(rules.needs):
            placed = sum(pods[task][0].requests.get(r, 0) * x for (task, _n), x in count.items())
            freed = sum(c.pod.requests.get(r, 0) * evict[c.key] for c in cands if q in qs.chain(c.queue))
            m.add(placed - freed <= qs.real[q].get(r, 0) - qs.allocated[q].get(r, 0))


def add_victim_gangs(m: cp_model.CpModel, state: State, cat: Catalogue, rules: Rules, evict: dict[str, Any],
                     cands: list[Candidate]) -> None:
    """Per victim PodGroup: taken so far + evicted ≤ ready − minMember, unless all of it goes."""
    groups: dict[str, list[Candidate]] = defaultdict(list)
    for c in cands:
        groups[c.group].append(c)
    for gk, members in sorted(groups.items()):
        g = cat.groups[gk]
        k = sum(evict[c.key] for c in members)
        left = max(g.slack - state.taken[gk], 0)
        rest = [p for p in g.occupying if p not in state.evicted]
        if all(p in evict for p in rest):
            whole = m.new_bool_var(f"whole[{gk}]")
            for p in rest:
                m.add_implication(whole, evict[p])
            m.add(k <= left + len(rest) * whole)
        else:
            m.add(k <= left)


def add_floors(m: cp_model.CpModel, rules: Rules, evict: dict[str, Any], cands: list[Candidate]) -> None:
    """Reclaim: evictions leave every floor queue at or above its floor on each resource the job needs."""
    for q, floor in sorted(rules.floors.items()):
        from_q = [c for c in cands if q in rules.floor_chain.get(c.queue, ())]
        for r, least in sorted(floor.items()):
            drop = sum(c.pod.requests.get(r, 0) * evict[c.key] for c in from_q)
            m.add(drop <= rules.start[q].get(r, 0) - least)


def add_hint(m: cp_model.CpModel, hint: VictimChoice, count: dict[tuple[str, str], Any], evict: dict[str, Any],
             region: dict[int, Any], regions: list[Any]) -> None:
    taken = {c.key for c in hint.victims}
    for k, x in evict.items():
        m.add_hint(x, int(k in taken))
    per: dict[tuple[str, str], int] = defaultdict(int)
    for b in hint.bindings:
        per[b.task, b.node] += 1
    for key, x in count.items():
        m.add_hint(x, per.get(key, 0))
    for i, y in region.items():
        m.add_hint(y, int(regions[i] == hint.region))
