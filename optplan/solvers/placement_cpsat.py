"""The exact queue placement on OR-Tools CP-SAT.

Decisions (integers only; pods of one task are identical, so they are counted, not named):

- ``admitted[job]``: the gang is placed;
- ``region[job, i]``: the job ends inside its i-th candidate region (``placement.job_regions``; only
  for jobs with a network topology: exactly one when admitted, none otherwise);
- ``count[job, task, node]``: pods of the task on the node, only where the static predicates pass and
  one pod fits the snapshot's free capacity;
- ``opened[node]``: a node that holds no pod in the snapshot receives pods.

Constraints: gang (minAvailable and Volcano's per-task minimums, nothing unless admitted), region
membership, cumulative capacity per node on every requested resource and the pod count, queue
capability (``allocated + Σ requests ≤ realCapability`` for the job's queue and every ancestor, on each
resource the jobs request), opened nodes.

Objective, lexicographic, by sequential solves (each phase keeps the earlier objectives at the values
found and is hinted with the previous solution): (1) maximise Σ admission weight (``max(priority, 0) +
1``); (2) minimise the tier sum of admitted topology jobs (the virtual root counts one above the top
tier); (3) maximise replicas placed beyond minAvailable; (4) minimise newly occupied nodes; (5)
maximise the static binpack score (each pod's Volcano binpack score on its node with the snapshot's
usage, × ``BINPACK_SCALE``, floored). The plan is OPTIMAL only when every phase is.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from ortools.sat.python import cp_model

from optplan.models.placement import Binding, JobPlacement, PlacementPlan
from optplan.models.queues import VCJob
from optplan.models.repack import SolverRecord
from optplan.models.snapshot import Pod
from optplan.solvers.base import PlanOptions
from optplan.solvers.oracle import POD_SLOT, constraint_signature, static_reason
from optplan.solvers.placement import (
    Context,
    QueueState,
    admission_weight,
    explain_rejections,
    task_minima,
)

log = logging.getLogger(__name__)

PHASES = ("admitted", "tiers", "extras", "opened", "binpack")
SENSE = (1, -1, 1, -1, 1)
"""+1 maximise, −1 minimise."""


def max_fit(pod: Pod, free: dict[str, int], limits_pods: bool) -> int:
    """How many copies of the pod fit in ``free`` (every requested resource, and the pod count)."""
    n = min((free.get(r, 0) // v for r, v in pod.requests.items() if v > 0), default=1 << 30)
    if limits_pods:
        n = min(n, free.get("pods", 0) // POD_SLOT)
    return max(n, 0)


@dataclass
class Vars:
    """The model's variables, keyed by domain tuples."""

    admitted: dict[str, Any]  # admitted[job]
    region: dict[tuple[str, int], Any]  # region[job, i]: the job ends in its i-th candidate region
    count: dict[tuple[str, str, str], Any]  # count[job, task, node]: pods of the task placed on the node
    opened: dict[str, Any]  # opened[node]: a node empty in the snapshot receives pods

    def placed(self, job: str, task: str) -> Any:
        return sum(x for (j, t, _n), x in self.count.items() if j == job and t == task)


@dataclass
class Data:
    ctx: Context
    valid: list[VCJob]
    """Jobs whose queue may take them (the others are never admitted)."""
    arcs: dict[tuple[str, str], dict[str, int]]
    """(job, task) -> candidate node -> upper bound of count."""
    limits_pods: dict[str, bool]


def build_data(ctx: Context) -> Data:
    snap = ctx.snapshot
    queues = QueueState(snap)
    valid = [j for j in ctx.jobs if queues.admission_reason(j.queue) is None]
    limits = {n: "pods" in node.allocatable for n, node in snap.nodes.items()}
    arcs: dict[tuple[str, str], dict[str, int]] = {}
    static: dict[tuple[tuple[object, ...], str], str | None] = {}
    for job in valid:
        allowed = frozenset().union(*(r.nodes for r in ctx.regions[job.key])) if ctx.regions[job.key] else frozenset()
        for t in job.tasks:
            if t.replicas == 0:
                continue
            pod = ctx.pods[job.key][t.name][0]
            row: dict[str, int] = {}
            for n in sorted(allowed):
                key = (constraint_signature(pod), n)
                if key not in static:
                    static[key] = static_reason(pod, snap.nodes[n])
                if static[key] is not None:
                    continue
                ub = min(t.replicas, max_fit(pod, ctx.free[n], limits[n]))
                if ub > 0:
                    row[n] = ub
            arcs[job.key, t.name] = row
    return Data(ctx=ctx, valid=valid, arcs=arcs, limits_pods=limits)


def build(data: Data) -> tuple[cp_model.CpModel, Vars, dict[str, Any]]:
    """The model, its variables and the five objective expressions by phase name."""
    m = cp_model.CpModel()
    v = Vars(admitted={}, region={}, count={}, opened={})
    for job in data.valid:
        v.admitted[job.key] = m.new_bool_var(f"admitted[{job.key}]")
        if job.network_topology is not None:
            for i, r in enumerate(data.ctx.regions[job.key]):
                v.region[job.key, i] = m.new_bool_var(f"region[{job.key}@{r.hyper_node or '<root>'}]")
    for (j, t), row in data.arcs.items():
        for n, ub in row.items():
            v.count[j, t, n] = m.new_int_var(0, ub, f"count[{j}/{t}->{n}]")
    occupied = set(data.ctx.snapshot.pods_by_node)
    for n in sorted({n for (_j, _t, n) in v.count} - occupied):
        v.opened[n] = m.new_bool_var(f"opened[{n}]")
    add_gang(m, data, v)
    add_regions(m, data, v)
    add_capacity(m, data, v)
    add_queues(m, data, v)
    add_opened(m, data, v)
    return m, v, objectives(data, v)


def add_gang(m: cp_model.CpModel, data: Data, v: Vars) -> None:
    """Nothing placed unless admitted; an admitted job meets minAvailable and its tasks' minimums."""
    for job in data.valid:
        a = v.admitted[job.key]
        minima = task_minima(job)
        total = []
        for t in job.tasks:
            placed = v.placed(job.key, t.name)
            total.append(placed)
            m.add(placed <= t.replicas * a)
            if minima.get(t.name, 0) > 0:
                m.add(placed >= minima[t.name] * a)
        m.add(sum(total) >= job.min_available * a)


def add_regions(m: cp_model.CpModel, data: Data, v: Vars) -> None:
    """A topology job ends in exactly one candidate region when admitted; its pods stay inside it."""
    for job in data.valid:
        if job.network_topology is None:
            continue
        regions = data.ctx.regions[job.key]
        m.add(sum(v.region[job.key, i] for i in range(len(regions))) == v.admitted[job.key])
        for t in job.tasks:
            for n, ub in data.arcs.get((job.key, t.name), {}).items():
                inside = [v.region[job.key, i] for i, r in enumerate(regions) if n in r.nodes]
                m.add(v.count[job.key, t.name, n] <= ub * sum(inside))


def add_capacity(m: cp_model.CpModel, data: Data, v: Vars) -> None:
    """Cumulative fit on every requested resource of every node, and the pod count."""
    by_node: dict[str, list[tuple[Pod, Any]]] = defaultdict(list)
    for (j, t, n), x in v.count.items():
        by_node[n].append((data.ctx.pods[j][t][0], x))
    for n, terms in sorted(by_node.items()):
        free = data.ctx.free[n]
        for r in sorted({r for pod, _x in terms for r in pod.requests}):
            m.add(sum(pod.requests.get(r, 0) * x for pod, x in terms) <= free.get(r, 0))
        if data.limits_pods[n]:
            m.add(sum(x for _pod, x in terms) <= free.get("pods", 0) // POD_SLOT)


def add_queues(m: cp_model.CpModel, data: Data, v: Vars) -> None:
    """For every queue and every resource new pods charge to it: allocated + Σ requests ≤ realCapability."""
    queues = QueueState(data.ctx.snapshot)
    charged: dict[tuple[str, str], list[Any]] = defaultdict(list)
    jobs = {jb.key: jb for jb in data.valid}
    for (j, t, _n), x in v.count.items():
        job = jobs[j]
        pod = data.ctx.pods[j][t][0]
        for q in queues.chain(job.queue):
            for r, req in pod.requests.items():
                charged[q, r].append(req * x)
    for (q, r), terms in sorted(charged.items(), key=lambda kv: kv[0]):
        room = queues.real[q].get(r, 0) - queues.allocated[q].get(r, 0)
        m.add(sum(terms) <= max(room, 0))


def add_opened(m: cp_model.CpModel, data: Data, v: Vars) -> None:
    """A node empty in the snapshot that receives a pod is opened."""
    for (j, t, n), x in v.count.items():
        if n in v.opened:
            m.add(x <= data.arcs[j, t][n] * v.opened[n])


def objectives(data: Data, v: Vars) -> dict[str, Any]:
    ctx = data.ctx
    admitted = sum(admission_weight(ctx.priority[k]) * a for k, a in v.admitted.items())
    tiers = sum((ctx.regions[j][i].tier or 0) * y for (j, i), y in v.region.items())
    mins = {job.key: job.min_available for job in data.valid}
    extras = sum(v.count.values()) - sum(mins[k] * a for k, a in v.admitted.items())
    opened = sum(v.opened.values())
    binpack = sum(ctx.static_binpack(ctx.pods[j][t][0].requests, n) * x for (j, t, n), x in v.count.items())
    return {"admitted": admitted, "tiers": tiers, "extras": extras, "opened": opened, "binpack": binpack}


def add_hint(m: cp_model.CpModel, data: Data, v: Vars, plan: PlacementPlan) -> None:
    """Hint every variable from a plan (the greedy's, or the previous phase's)."""
    counts: dict[tuple[str, str, str], int] = defaultdict(int)
    chosen: dict[str, tuple[str | None, int | None]] = {}
    for jp in plan.jobs:
        if jp.admitted:
            chosen[jp.key] = (jp.hyper_node, jp.tier)
            for b in jp.bindings:
                counts[jp.key, b.task, b.node] += 1
    for k, a in v.admitted.items():
        m.add_hint(a, int(k in chosen))
    for (j, i), y in v.region.items():
        r = data.ctx.regions[j][i]
        m.add_hint(y, int(chosen.get(j) == (r.hyper_node, r.tier)))
    for key, x in v.count.items():
        m.add_hint(x, counts.get(key, 0))
    receiving = {n for (_j, _t, n), c in counts.items() if c}
    for n, o in v.opened.items():
        m.add_hint(o, int(n in receiving))


def extract(data: Data, v: Vars, s: cp_model.CpSolver) -> PlacementPlan:
    """Domain objects from a solution: replica indices handed out task by task, nodes by name."""
    ctx = data.ctx
    out: list[JobPlacement] = []
    valid = {j.key for j in data.valid}
    for job in ctx.jobs:
        base = {"namespace": job.namespace, "name": job.name, "queue": job.queue}
        if job.key not in valid or not s.value(v.admitted[job.key]):
            out.append(JobPlacement(**base, admitted=False, reason="not admitted by the exact model"))
            continue
        bindings: list[Binding] = []
        for t in job.tasks:
            i = 0
            for n in sorted(data.arcs.get((job.key, t.name), {})):
                for _ in range(int(s.value(v.count[job.key, t.name, n]))):
                    bindings.append(Binding(task=t.name, index=i, node=n))
                    i += 1
        hyper, tier = None, None
        where = ""
        if job.network_topology is not None:
            r = next(ctx.regions[job.key][i] for i in range(len(ctx.regions[job.key])) if s.value(v.region[job.key, i]))
            hyper, tier = r.hyper_node, r.tier
            where = f" in {r.label}"
        extra = len(bindings) - job.min_available
        reason = f"{len(bindings)} of {job.replicas} pods placed{where}" + (
            f" ({extra} beyond minAvailable {job.min_available})" if extra > 0 else "")
        out.append(JobPlacement(**base, admitted=True, reason=reason, hyper_node=hyper, tier=tier,
                                bindings=tuple(bindings)))
    return PlacementPlan(jobs=tuple(out), solver=SolverRecord(name="cpsat", status="FEASIBLE"))


def _solver(options: PlanOptions, limit: float) -> cp_model.CpSolver:
    s = cp_model.CpSolver()
    s.parameters.max_time_in_seconds = max(limit, 0.05)
    s.parameters.num_workers = options.workers
    s.parameters.random_seed = options.seed
    return s


def solve(ctx: Context, options: PlanOptions, hint: PlacementPlan | None = None) -> PlacementPlan:
    """The lexicographic optimum by five sequential solves; falls back to the hint when CP-SAT finds
    nothing in time (status FALLBACK)."""
    t0 = time.perf_counter()
    deadline = t0 + options.time_limit
    data = build_data(ctx)
    m, v, objs = build(data)
    best = hint
    optimal = True
    values: list[int] = []
    objective: int | None = None
    bound: int | None = None
    for k, name in enumerate(PHASES):
        m.clear_objective()
        if best is not None:
            m.clear_hints()
            add_hint(m, data, v, best)
        if SENSE[k] > 0:
            m.maximize(objs[name])
        else:
            m.minimize(objs[name])
        s = _solver(options, (deadline - time.perf_counter()) / (len(PHASES) - k))
        st = s.solve(m)
        ok = st in (cp_model.OPTIMAL, cp_model.FEASIBLE)
        log.info("placement cpsat phase %d (%s): %s objective %s bound %s in %.2fs", k + 1, name, s.status_name(st),
                 s.objective_value if ok else None, s.best_objective_bound if ok else None, s.wall_time)
        if not ok:
            optimal = False
            break
        value = round(s.objective_value)
        values.append(value)
        optimal = optimal and st == cp_model.OPTIMAL
        best = extract(data, v, s)
        if k == 0:
            objective, bound = value, round(s.best_objective_bound)
        # keep this level at the value found for the phases that follow
        m.add(objs[name] >= value if SENSE[k] > 0 else objs[name] <= value)
    wall = round(time.perf_counter() - t0, 3)
    if best is None or not values:
        plan = hint if hint is not None else PlacementPlan(jobs=(), solver=SolverRecord(name="cpsat", status="NONE"))
        return plan.model_copy(update={"solver": SolverRecord(name="cpsat", status="FALLBACK", wall_seconds=wall)})
    best = explain_rejections(ctx, best)
    gap = None if objective is None or bound is None or objective == 0 else round(
        100.0 * abs(bound - objective) / abs(objective), 3)
    record = SolverRecord(name="cpsat", status="OPTIMAL" if optimal and len(values) == len(PHASES) else "FEASIBLE",
                          objective=objective, best_bound=bound, gap_percent=gap, wall_seconds=wall)
    return best.model_copy(update={"solver": record})
