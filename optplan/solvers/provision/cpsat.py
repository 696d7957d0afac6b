"""The exact provisioning model (CP-SAT): how many nodes of each group, and where the gangs' minimum pods
go, jointly; it proves a lower bound on the cost of serving as many gangs.

Every rule in it is one allocate checks, so that any cluster on which allocate admits a set of gangs gives
a solution of the model (the model is a relaxation of "allocate admits them", and its bound is a bound on
every plan): the slots are the existing nodes (their free room) and up to ``maxCount`` new nodes per group
(``used[g, i]``, the first ones used first: ``count[g] = Σ_i used[g, i]``); ``pods[j, t, s]`` of task t of
gang j on slot s, only where the static predicates admit the task's pod (the oracle's table); capacity
per slot and resource, pods included; a served gang has every task's minimum and its minAvailable (each
pending pod beyond it is free to stay out); hard topology: a served gang chooses one candidate region
(``job_regions`` on the cluster with every new node) and its pods stay in it; queues: for the gang's queue
and every ancestor, the pods placed there fit realCapability (computed on the largest cluster: it only
grows with nodes) less what is allocated. What it leaves out — allocate's order, binpack's node choice,
extra replicas — is checked by running allocate on its counts (``optplan.solvers.provision.run``).

Objective: lexicographic, as one sum: fewest gangs unserved (each weighs more than every node together),
then the least cost. Hinted with the greedy's nodes and bindings.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any

from ortools.sat.python import cp_model

from optplan.models.provision import NodeGroup
from optplan.models.repack import SolverRecord
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.core.oracle import Capacity, max_fit, pod_demand
from optplan.solvers.core.planner import Planner
from optplan.solvers.placement.context import Context
from optplan.solvers.placement.queueorder import QueueState
from optplan.solvers.provision.nodes import augment
from optplan.solvers.provision.problem import ExactResult, Outcome, Problem, ProvisionResult

log = logging.getLogger(__name__)


@dataclass
class Vars:
    count: dict[str, Any] = field(default_factory=dict)
    """group -> nodes added"""
    used: dict[tuple[str, int], Any] = field(default_factory=dict)
    """(group, i) -> new node i of the group exists"""
    serve: dict[str, Any] = field(default_factory=dict)
    """job -> its gang is served"""
    pods: dict[tuple[str, str, str], Any] = field(default_factory=dict)
    """(job, task, slot) -> pods of the task there"""
    region: dict[tuple[str, str], Any] = field(default_factory=dict)
    """(job, HyperNode) -> the hard-topology gang's region"""


def slots_of(problem: Problem) -> dict[str, int]:
    """New-node slots per group: its maxCount, at most one per pending pod it could host."""
    pods = sum(t.replicas for j in problem.jobs for t in j.tasks)
    return {g.name: min(g.max_count, pods) for g in problem.groups}


def build(problem: Problem, hint: Outcome | None, at_least: int | None = None
          ) -> tuple[cp_model.CpModel, Vars, int, list[str]]:
    """The model; ``at_least``: serve at least that many gangs and minimize the cost alone (the bound on
    the cost of serving as many gangs as a plan does)."""
    slots = slots_of(problem)
    big_snap = augment(problem.snapshot, problem.groups, slots)
    ctx = Context.build(big_snap, problem.jobs, problem.weights, problem.now, predicates=problem.predicates)
    free = Capacity(problem.snapshot)
    groups: dict[str, NodeGroup] = {g.name: g for g in problem.groups}
    new_of = {g.node_name(i): (g.name, i) for g in problem.groups for i in range(slots[g.name])}
    nodes = sorted(big_snap.nodes)
    m = cp_model.CpModel()
    v = Vars()
    for g in problem.groups:
        for i in range(slots[g.name]):
            v.used[g.name, i] = m.new_bool_var(f"used[{g.name},{i}]")
            if i:
                m.add_implication(v.used[g.name, i], v.used[g.name, i - 1])
        v.count[g.name] = m.new_int_var(0, slots[g.name], f"count[{g.name}]")
        m.add(v.count[g.name] == sum(v.used[g.name, i] for i in range(slots[g.name])))

    def room(node: str) -> dict[str, int]:
        if node in new_of:
            return dict(groups[new_of[node][0]].allocatable)
        return {r: free.room(node, r) for r in free.free[node]} | {"pods": free.room(node, "pods")}

    rooms = {n: room(n) for n in nodes}
    limits = {n: (n in new_of and "pods" in groups[new_of[n][0]].allocatable)
              or (n not in new_of and free.limits_pods(n)) for n in nodes}
    queues = QueueState(big_snap, ctx.accounts)
    load: dict[str, list[tuple[Any, dict[str, int]]]] = {n: [] for n in nodes}
    queue_load: dict[str, list[tuple[Any, dict[str, int]]]] = {}
    jobs = list(ctx.jobs)
    for job in jobs:
        k = job.key
        v.serve[k] = s = m.new_bool_var(f"serve[{k}]")
        if k in ctx.unfit or queues.admission_reason(job.queue) is not None:
            m.add(s == 0)
            continue
        minima, need = ctx.need(job)
        hard = job.network_topology is not None and job.network_topology.mode == "hard"
        regions = ctx.regions[k]
        if hard:
            for reg in regions:
                v.region[k, reg.hyper_node or ""] = m.new_bool_var(f"region[{k},{reg.hyper_node}]")
            m.add(sum(v.region[k, reg.hyper_node or ""] for reg in regions) == s)
        total = []
        for t in job.tasks:
            pending = ctx.pending(job, t.name)
            if not pending:
                continue
            pod = ctx.pods[k][t.name][pending[0]]
            placed = []
            for n in nodes:
                ub = min(len(pending), max_fit(pod, rooms[n], limits[n]))
                if ub <= 0 or not problem.predicates.ok(pod, n):
                    continue
                x = v.pods[k, t.name, n] = m.new_int_var(0, ub, f"pods[{k},{t.name},{n}]")
                placed.append(x)
                load[n].append((x, pod_demand(pod)))
                if n in new_of:
                    m.add(x == 0).only_enforce_if(~v.used[new_of[n]])
                if hard:
                    inside = [v.region[k, reg.hyper_node or ""] for reg in regions if n in reg.nodes]
                    if not inside:
                        m.add(x == 0)
                    else:
                        m.add(x <= ub * sum(inside))
            m.add(sum(placed) >= minima.get(t.name, 0) * s)
            m.add(sum(placed) <= len(pending) * s)
            total += placed
            for q in queues.chain(job.queue):
                queue_load.setdefault(q, []).append((sum(placed), dict(pod.requests)))
        m.add(sum(total) >= max(need, 1) * s)
    for n in nodes:
        for res in sorted({r for _x, d in load[n] for r in d}):
            terms = [x * d[res] for x, d in load[n] if d.get(res, 0) > 0]
            if terms and (res != "pods" or limits[n]):
                m.add(sum(terms) <= max(rooms[n].get(res, 0), 0))
    for q, items in queue_load.items():
        for res in sorted({r for _e, d in items for r in d if queues.limited(q, r)}):
            head = queues.real[q].get(res, 0) - queues.allocated[q].get(res, 0)
            m.add(sum(e * d[res] for e, d in items if d.get(res, 0) > 0) <= max(head, 0))
    big = sum(g.price * slots[g.name] for g in problem.groups) + 1
    cost = sum(g.price * v.count[g.name] for g in problem.groups)
    if at_least is None:
        m.minimize(big * sum(1 - s for s in v.serve.values()) + cost)
    else:
        big = 0
        m.add(sum(v.serve.values()) >= at_least)
        m.minimize(cost)
    if hint is not None:
        add_hint(m, v, hint, problem, slots)
    return m, v, big, [j.key for j in jobs]


def add_hint(m: cp_model.CpModel, v: Vars, hint: Outcome, problem: Problem, slots: dict[str, int]) -> None:
    """The greedy's nodes and bindings (a solution of the model: allocate admitted them)."""
    for g in problem.groups:
        for i in range(slots[g.name]):
            m.add_hint(v.used[g.name, i], i < hint.counts.get(g.name, 0))
    placed: dict[tuple[str, str, str], int] = {}
    for jp in hint.placement.jobs:
        k = jp.key
        if k in v.serve:
            m.add_hint(v.serve[k], jp.admitted)
        for b in jp.bindings:
            placed[k, b.task, b.node] = placed.get((k, b.task, b.node), 0) + 1
        for (jk, h), var in v.region.items():
            if jk == k:
                m.add_hint(var, jp.admitted and h == (jp.hyper_node or ""))
    for key, x in v.pods.items():
        m.add_hint(x, placed.get(key, 0))


def solve(problem: Problem, options: PlanOptions, hint: Outcome | None = None,
          at_least: int | None = None) -> ExactResult:
    """Solve the model (``build``); ``big`` is 0 with ``at_least`` (the objective is the cost alone)."""
    m, v, big, jobs = build(problem, hint, at_least)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = options.time_limit
    if options.deterministic:  # the same input, the same plan: the limit counts work (a wall cap of 3x stays)
        solver.parameters.max_deterministic_time = options.time_limit
        solver.parameters.max_time_in_seconds = 3 * options.time_limit
    solver.parameters.num_workers = options.workers
    solver.parameters.random_seed = options.seed
    status = solver.solve(m)
    name = solver.status_name(status)
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        counts = {g: int(solver.value(x)) for g, x in v.count.items()}
        objective, bound = int(solver.objective_value), math.ceil(solver.best_objective_bound - 1e-6)
    else:  # no solution in time (INFEASIBLE cannot happen: serving nobody with no node is one)
        counts, objective, bound = {}, None, None
    log.info("provision cpsat: %s, objective %s, bound %s, %.3fs", name, objective, bound, solver.wall_time)
    return ExactResult(counts, name, objective, bound, big, tuple(jobs))


class CpSatProvisioner(Planner[Problem, ProvisionResult]):
    """The registry's ``cpsat``: the exact model (``solve``) hinted with a plan; the result's outcome is the
    model's counts run through allocate (the hint's when the model found none)."""

    name = "cpsat"

    def plan(self, problem: Problem, options: PlanOptions, hint: ProvisionResult | None = None, *,
             at_least: int | None = None) -> ProvisionResult:
        start = hint.outcome if hint is not None else None
        exact = solve(problem, options, start, at_least)
        if exact.objective is None and start is not None:
            outcome = start
        else:
            outcome = problem.evaluate(exact.counts)
        return ProvisionResult(outcome, SolverRecord(name=self.name, status=exact.status), exact)
