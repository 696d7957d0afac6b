"""The exact queue placement on OR-Tools CP-SAT: placements and victims of all pending jobs at once.

Decisions (integers only; pods of one unit — a task's pending pods of one shape, ``model.Unit`` — are
identical, so they are counted, not named):

- ``admitted[job]``: the gang is placed;
- ``region[job, i]``: the job ends inside its i-th candidate region (``jobs.job_regions``; only
  for jobs with a network topology: exactly one when admitted, none otherwise);
- ``count[job, unit, node]``: pods of the unit on the node, only where the static predicates pass and
  one pod fits the snapshot's free capacity plus what the node's possible victims hold (a unit is its
  task, unless the task's pods differ: a bare PodGroup's);
- ``opened[node]``: a node that holds no pod in the snapshot receives pods;
- the victims (``victims_cpsat``): ``take[job, class]`` pods of a class of identical running pods the
  job evicts, ``after[job]`` (the job is replayed after the evictions), ``early[job, unit, node]``,
  ``lands[job, node]``, ``reclaims[job]``, ``amount[job, r]`` and
  ``early_amount[job, r]``.

Constraints: gang (minAvailable and Volcano's per-task minimums with the running pods, summed over the
task's units, each unit at most its pods, at least one pod, nothing unless admitted), region
membership, opened nodes; without possible victims, cumulative capacity per node on every requested
resource and the pod count, and queue capability (``allocated + Σ requests ≤ realCapability`` for the
job's queue and every ancestor, on each resource the jobs request); with victims, ``victims_cpsat``'s
families replace capacity and queues where evictions may happen and add the preempt/reclaim rules.

Objective, lexicographic, by sequential solves (each phase keeps the earlier objectives at the values
found and is hinted with the previous solution, the first with the greedy's plan and its victims; a
phase the plan in hand already meets at a bound no plan can pass — every job admitted, no victims,
every replica of every job placed, no newly occupied node — is not solved; the time left is split
among the phases by ``SHARE``):
(1) maximise Σ admission weight (``model.job_weights``: ``max(priority, 0) + 1``, a waiting job's scaled above
every ready gang's together); (2) minimise the victims' cost (``victims``
module; skipped when nothing may be evicted); (3) minimise the tier sum of admitted topology jobs (the
virtual root counts one above the top tier); (4) maximise replicas placed beyond minAvailable; (5)
minimise newly occupied nodes; (6) maximise the static binpack score (each pod's Volcano binpack score
on its node with the snapshot's usage, × ``BINPACK_SCALE``, floored); (7) only among plans equal on all
of these, Volcano's order: maximise Σ ``model.order_weights`` of the admitted jobs (earlier first
turn in the greedy's allocate, more weight; this phase gets only the time the others leave).

Running gangs: ``count`` covers a job's pending replicas only; the gang constraints ask for what they
must add to the running pods (``Context.need``), and an admitted job places at least one pod.

Against the greedy (``solve``; the greedy's plan, its scheduling cycles with their victims, ``cycles.greedy_cycles``,
is computed first when not given: the same plan ``greedy`` and ``auto`` make, so a topology job's reclaim walks
every node there and the job waits for a later cycle's allocate).
The model must hold the greedy's plan (``holds``: every variable fixed to it); when the static tier
bounds do not, it is built again with the plan as its anchor (``anchored``, ``model.Anchor``).
Phase (1) never ends below the greedy's weight (a solve cut short below it keeps the greedy's plan,
not OPTIMAL). When it ends at the greedy's weight, the phases that follow are restricted to the plans no
worse than the greedy's on victim cost and on tier sum (``dominate``), in the same order, hinted with
the greedy's plan where the plan in hand is outside that set. Victim cost ranked before tiers alone
could choose a higher tier than the greedy to evict less, tiers first could evict more; the greedy's
plan is in the set, so a plan at least as good on both always exists. When phase (1) admits strictly
more weight, nothing is added: other admissions, no comparison. Restricting from the start costs no
extra solve: on ``benchmarks/placement_scale.py --victims`` it took 4.1 s where the unrestricted
lexicographic solve followed by a restricted re-solve took 11.2 s (and about half the time on the
generated families that need the restriction).

Status: OPTIMAL only when every phase solved is proven. With admissions tied to the greedy's, that
means optimal among the plans that admit the most weight and are no worse than the greedy on victim
cost and tier sum (a plan evicting less at a higher tier may exist outside that set); else optimal
among all plans.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from typing import Any

from ortools.sat.python import cp_model

from optplan.models.placement import Binding, JobPlacement, PlacementPlan, PlacementResult, Victim
from optplan.models.queues import VCJob
from optplan.models.repack import SolverRecord
from optplan.models.snapshot import Pod
from optplan.solvers.core.clock import Clock
from optplan.solvers.core.exact import proven_bound
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.core.oracle import POD_SLOT
from optplan.solvers.core.planner import Planner
from optplan.solvers.placement import gang_cpsat, victims_cpsat
from optplan.solvers.placement.allocate import explain_rejections
from optplan.solvers.placement.context import Context
from optplan.solvers.placement.cycles import greedy_cycles
from optplan.solvers.placement.evict import lost_text, outlived_text, victim_notes, victim_text
from optplan.solvers.placement.greedy import placed_reason
from optplan.solvers.placement.jobs import lost_pods, outlived_pods
from optplan.solvers.placement.model import (
    Data,
    PlanKey,
    Vars,
    build_data,
    job_weights,
    order_weights,
    partition_parts,
    partition_spots,
    plan_key,
)
from optplan.solvers.placement.partitions import bounded, partition_pending, partitioned
from optplan.solvers.placement.validate import placement_violations

log = logging.getLogger(__name__)

PHASES = ("admitted", "victims", "tiers", "extras", "opened", "binpack", "order")
SENSE = (1, -1, -1, 1, -1, 1, 1)
"""+1 maximise, −1 minimise."""
SHARE = (2, 4, 1, 1, 1, 1, 0)
"""How the time left is split among the phases still to solve; the order phase (0) only gets what the
others leave."""



def build(data: Data) -> tuple[cp_model.CpModel, Vars, dict[str, Any]]:
    """The model, its variables and the objective expressions by phase name."""
    m = cp_model.CpModel()
    v = Vars(admitted={}, region={}, count={}, opened={})
    for job in data.valid:
        v.admitted[job.key] = m.new_bool_var(f"admitted[{job.key}]")
        if job.network_topology is not None:
            for i, r in enumerate(data.ctx.regions[job.key]):
                v.region[job.key, i] = m.new_bool_var(f"region[{job.key}@{r.hyper_node or '<root>'}]")
    for (j, t), row in data.arcs.items():
        for n, ub in row.items():
            v.count[j, t, n] = x = m.new_int_var(0, ub, f"count[{j}/{t}->{n}]")
            v.by_task.setdefault((j, data.task(j, t)), []).append(x)
    occupied = set(data.ctx.snapshot.pods_by_node)
    for n in sorted({n for (_j, _t, n) in v.count} - occupied):
        v.opened[n] = m.new_bool_var(f"opened[{n}]")
    add_gang(m, data, v)
    add_regions(m, data, v)
    add_partitions(m, data, v)
    add_capacity(m, data, v)
    add_opened(m, data, v)
    if data.victims.pairs:
        v.ev = victims_cpsat.add_variables(m, data, v)
        gang_cpsat.add_bundles(m, data, v)
        victims_cpsat.add_capacity(m, data, v)
        victims_cpsat.add_queues(m, data, v)
        victims_cpsat.add_entitlement(m, data, v)
        victims_cpsat.add_never(m, data, v)
        victims_cpsat.add_victim_gangs(m, data, v)
        victims_cpsat.add_second_tier(m, data, v)
        victims_cpsat.add_safety(m, data, v)
        victims_cpsat.add_reclaim_rules(m, data, v)
        victims_cpsat.add_region_cuts(m, data, v)
        victims_cpsat.add_anchor(m, data, v)
    else:
        add_queues(m, data, v)
    return m, v, objectives(data, v)


def add_gang(m: cp_model.CpModel, data: Data, v: Vars) -> None:
    """Nothing placed unless admitted; an admitted job meets minAvailable and its tasks' minimums with
    its running pods (``Context.need``), and places at least one pod (Volcano keeps no allocation
    without an operation: a running gang already ready is admitted only when a pending pod fits)."""
    for job in data.valid:
        a = v.admitted[job.key]
        minima, need = data.ctx.need(job)
        total = []
        for t in job.tasks:
            placed = v.placed(job.key, t.name)
            total.append(placed)
            units = data.units_of(job.key, t.name)
            if len(units) > 1:  # each unit places at most its pods
                for u in units:
                    m.add(sum(v.count[job.key, u, n] for n in data.arcs[job.key, u])
                          <= len(data.units[job.key][u].indices) * a)
            else:
                m.add(placed <= len(data.ctx.pending(job, t.name)) * a)
            if minima.get(t.name, 0) > 0:
                m.add(placed >= minima[t.name] * a)
        m.add(sum(total) >= max(need, 1) * a)


def add_regions(m: cp_model.CpModel, data: Data, v: Vars) -> None:
    """A topology job ends in exactly one candidate region when admitted; its pods stay inside it."""
    for job in data.valid:
        if job.network_topology is None:
            continue
        regions = data.ctx.regions[job.key]
        m.add(sum(v.region[job.key, i] for i in range(len(regions))) == v.admitted[job.key])
        for i in too_small(data, job):
            m.add(v.region[job.key, i] == 0)
        for u in data.units_of(job.key):
            for n, ub in data.arcs.get((job.key, u), {}).items():
                inside = [v.region[job.key, i] for i, r in enumerate(regions) if n in r.nodes]
                m.add(v.count[job.key, u, n] <= ub * sum(inside))


def add_partitions(m: cp_model.CpModel, data: Data, v: Vars) -> None:
    """A partitioned task (``partitions``): its count on a node is its partitions' counts there; a partition's
    pending pods are placed all (``whole``) or none; a partition whose topology is hard lies in one of its
    candidate HyperNodes (``partition_spots``), inside the job's chosen region; an admitted job has
    ``minPartitions`` whole partitions of each task, counting the partitions that run whole already."""
    ctx = data.ctx
    for job in data.valid:
        if not partitioned(job):
            continue
        a = v.admitted[job.key]
        tasks = {t.name: t for t in job.tasks}
        regions = ctx.regions[job.key]
        parts: dict[str, list[Any]] = defaultdict(list)
        terms: dict[tuple[str, str], list[Any]] = defaultdict(list)
        for task, p, pending in partition_parts(ctx, job):
            v.whole[job.key, task, p] = w = m.new_bool_var(f"whole[{job.key}/{task}#{p}]")
            parts[task].append(w)
            m.add(w <= a)
            xs: list[tuple[str, Any]] = []
            for u in data.units_of(job.key, task):  # each unit's pods of the partition: all placed, or none
                mine = unit_part(data, job.key, u, pending)
                if not mine:
                    continue
                row = []
                for n, ub in data.arcs.get((job.key, u), {}).items():
                    v.pcount[job.key, u, p, n] = x = m.new_int_var(0, min(ub, len(mine)),
                                                                   f"pcount[{job.key}/{u}#{p}->{n}]")
                    terms[u, n].append(x)
                    row.append(x)
                    xs.append((n, x))
                m.add(sum(row) == len(mine) * w)
            if not bounded(tasks[task]):
                continue
            spots = partition_spots(ctx, job, task, p)
            ys = []
            for i, r in enumerate(spots):
                v.psub[job.key, task, p, i] = y = m.new_bool_var(f"psub[{job.key}/{task}#{p}@{r.hyper_node}]")
                ys.append(y)
                if job.network_topology is not None:  # inside the job's chosen region
                    m.add(y <= sum(v.region[job.key, k] for k, rg in enumerate(regions) if r.nodes <= rg.nodes))
            m.add(sum(ys) == w)
            for n, x in xs:
                m.add(x <= len(pending) * sum(y for y, r in zip(ys, spots, strict=True) if n in r.nodes))
        for u in data.units_of(job.key):  # a pod of a partitioned task is a pod of one of its partitions
            if tasks[data.task(job.key, u)].partition_policy is not None:
                for n in data.arcs.get((job.key, u), {}):
                    m.add(v.count[job.key, u, n] == sum(terms.get((u, n), [])))
        for task, t in tasks.items():
            pp = t.partition_policy
            if pp is None or pp.min_partitions == 0:
                continue
            held = ctx.held.get(job.key, {}).get(task, frozenset())
            done = sum(1 for p in range(pp.total_partitions) if not partition_pending(t, p, held))
            m.add(sum(parts[task]) + done >= pp.min_partitions * a)


def unit_part(data: Data, job: str, unit: str, pending: list[int]) -> list[int]:
    """The unit's replicas among a partition's ``pending`` ones, in index order."""
    mine = set(data.units[job][unit].indices)
    return [i for i in pending if i in mine]


def add_capacity(m: cp_model.CpModel, data: Data, v: Vars) -> None:
    """Cumulative fit on every requested resource and the pod count, on the nodes where nothing may be
    evicted (``victims_cpsat.add_capacity`` covers the others)."""
    by_node: dict[str, list[tuple[Pod, Any]]] = defaultdict(list)
    for (j, t, n), x in v.count.items():
        if n not in data.victims.nodes:
            by_node[n].append((data.pod(j, t), x))
    cap = data.ctx.capacity
    for n, terms in sorted(by_node.items()):
        free = cap.free[n]
        for r in sorted({r for pod, _x in terms for r in pod.requests}):
            m.add(sum(pod.requests.get(r, 0) * x for pod, x in terms) <= free.get(r, 0))
        if cap.limits_pods(n):
            m.add(sum(x for _pod, x in terms) <= cap.room(n, "pods") // POD_SLOT)


def add_queues(m: cp_model.CpModel, data: Data, v: Vars) -> None:
    """Without victims: for every queue and every resource new pods charge to it, allocated + Σ requests
    ≤ realCapability."""
    queues = data.queues
    charged: dict[tuple[str, str], list[Any]] = defaultdict(list)
    jobs = {jb.key: jb for jb in data.valid}
    for (j, t, _n), x in v.count.items():
        job = jobs[j]
        pod = data.pod(j, t)
        for q in queues.chain(job.queue):
            for r, req in pod.requests.items():
                charged[q, r].append(req * x)
    for (q, r), terms in sorted(charged.items(), key=lambda kv: kv[0]):
        if not queues.limited(q, r):
            continue
        room = queues.real[q].get(r, 0) - queues.allocated[q].get(r, 0)
        m.add(sum(terms) <= max(room, 0))


def add_opened(m: cp_model.CpModel, data: Data, v: Vars) -> None:
    """A node empty in the snapshot that receives a pod is opened."""
    for (j, t, n), x in v.count.items():
        if n in v.opened:
            m.add(x <= data.arcs[j, t][n] * v.opened[n])


def objectives(data: Data, v: Vars) -> dict[str, Any]:
    ctx = data.ctx
    worth = job_weights(ctx)
    admitted = sum(worth[k] * a for k, a in v.admitted.items())
    tiers = sum((ctx.regions[j][i].tier or 0) * y for (j, i), y in v.region.items())
    mins = {job.key: ctx.need(job)[1] for job in data.valid}
    extras = sum(v.count.values()) - sum(mins[k] * a for k, a in v.admitted.items())
    opened = sum(v.opened.values())
    binpack = sum(ctx.static_binpack(data.pod(j, u).requests, n) * x for (j, u, n), x in v.count.items())
    weights = order_weights(ctx)
    order = sum(weights[k] * a for k, a in v.admitted.items())
    return {"admitted": admitted, "victims": victims_cpsat.cost(data, v), "tiers": tiers, "extras": extras,
            "opened": opened, "binpack": binpack, "order": order}


def add_hint(m: cp_model.CpModel, data: Data, v: Vars, plan: PlacementPlan) -> None:
    """Hint every variable from a plan (the greedy's with its victims, or the previous phase's)."""
    counts: dict[tuple[str, str, str], int] = defaultdict(int)
    chosen: dict[str, tuple[str | None, int | None]] = {}
    for jp in plan.jobs:
        if jp.admitted:
            chosen[jp.key] = (jp.hyper_node, jp.tier)
            for b in jp.bindings:
                counts[jp.key, data.unit_of.get((jp.key, b.task, b.index), b.task), b.node] += 1
    for k, a in v.admitted.items():
        m.add_hint(a, int(k in chosen))
    for (j, i), y in v.region.items():
        r = data.ctx.regions[j][i]
        m.add_hint(y, int(chosen.get(j) == (r.hyper_node, r.tier)))
    for key, x in v.count.items():
        m.add_hint(x, counts.get(key, 0))
    if v.whole:
        add_partition_hint(m, data, v, plan, chosen)
    receiving = {n for (_j, _t, n), c in counts.items() if c}
    for n, o in v.opened.items():
        m.add_hint(o, int(n in receiving))
    if data.victims.pairs:
        victims_cpsat.add_hint(m, data, v, plan, counts)
        gang_cpsat.add_hint(m, data, v, plan)


def add_partition_hint(m: cp_model.CpModel, data: Data, v: Vars, plan: PlacementPlan,
                       chosen: dict[str, tuple[str | None, int | None]]) -> None:
    """Hint the partition variables from a plan: its pods per partition and node, and for each placed
    partition the first candidate HyperNode (``partition_spots``) inside the job's region holding them."""
    ctx = data.ctx
    jobs = data.jobs
    per: dict[tuple[str, str, int, str], int] = defaultdict(int)
    nodes: dict[tuple[str, str, int], set[str]] = defaultdict(set)
    for jp in plan.jobs:
        if not jp.admitted:
            continue
        policies = {t.name: t.partition_policy for t in jobs[jp.key].tasks}
        for b in jp.bindings:
            pp = policies.get(b.task)
            if pp is not None:
                per[jp.key, data.unit_of.get((jp.key, b.task, b.index), b.task), pp.of(b.index), b.node] += 1
                nodes[jp.key, b.task, pp.of(b.index)].add(b.node)
    for (j, t, p), w in v.whole.items():
        m.add_hint(w, int((j, t, p) in nodes))
    for key, x in v.pcount.items():
        m.add_hint(x, per.get(key, 0))
    spots: dict[tuple[str, str, int], int | None] = {}
    for (j, t, p, i), y in v.psub.items():
        if (j, t, p) not in spots:
            job = jobs[j]
            hyper = chosen.get(j, (None, None))[0]
            inside = ctx.snapshot.topology.members.get(hyper, frozenset()) if hyper else frozenset(ctx.snapshot.nodes)
            held = nodes.get((j, t, p), set())
            spots[j, t, p] = next((k for k, r in enumerate(partition_spots(ctx, job, t, p))
                                   if held and held <= r.nodes and r.nodes <= inside), None)
        m.add_hint(y, int(spots[j, t, p] == i))


def extract(data: Data, v: Vars, s: cp_model.CpSolver) -> PlacementPlan:
    """Domain objects from a solution: replica indices handed out task by task, nodes by name; victims
    handed out class by class in victim order."""
    ctx = data.ctx
    out: list[JobPlacement] = []
    valid = {j.key for j in data.valid}
    taken = victims_cpsat.extract(data, v, s)
    anchor = data.victims.anchor
    as_anchor = anchor is not None and v.ev.anchor is not None and bool(s.value(v.ev.anchor))
    steps = anchor.steps if anchor is not None and anchor.by_step else {}  # the validator replays as the model
    for job in ctx.jobs:
        base = {"namespace": job.namespace, "name": job.name, "queue": job.queue}
        if as_anchor and anchor is not None and job.key in anchor.late:  # the greedy's own words
            out.append(anchor.job(job.key))
            continue
        if job.key not in valid or not s.value(v.admitted[job.key]):
            out.append(JobPlacement(**base, admitted=False, reason="not admitted by the exact model"))
            continue
        bindings: list[Binding] = []
        for t in job.tasks:
            if t.partition_policy is not None:  # replica indices partition by partition
                for task, p, pending in partition_parts(ctx, job):
                    if task != t.name or not s.value(v.whole[job.key, task, p]):
                        continue
                    for u in data.units_of(job.key, task):
                        left = iter(unit_part(data, job.key, u, pending))
                        for n in sorted(data.arcs.get((job.key, u), {})):
                            x = v.pcount.get((job.key, u, p, n))
                            for _ in range(int(s.value(x)) if x is not None else 0):
                                bindings.append(Binding(task=task, index=next(left), node=n))
                continue
            for u in data.units_of(job.key, t.name):
                free = iter(data.units[job.key][u].indices)  # a running gang's pending replicas, by index
                for n in sorted(data.arcs.get((job.key, u), {})):
                    for _ in range(int(s.value(v.count[job.key, u, n]))):
                        bindings.append(Binding(task=t.name, index=next(free), node=n))
        hyper, tier = None, None
        label = None
        if job.network_topology is not None:
            r = next(ctx.regions[job.key][i] for i in range(len(ctx.regions[job.key])) if s.value(v.region[job.key, i]))
            hyper, tier = r.hyper_node, r.tier
            label = r.label
        victims = taken.get(job.key, [])
        after = job.key in v.ev.after and bool(s.value(v.ev.after[job.key]))
        if victims:
            reason = victims[0][1]
            cost = sum(c.cost for c, _r in victims)
            text = victim_text(job, len(bindings), label, reason, len(victims), cost)
        else:
            text = placed_reason(ctx, job, len(bindings), f" in {label}" if label else "")
        vs = tuple(Victim(namespace=c.pod.namespace, name=c.pod.name, node=c.node, reason=r)
                   for c, r in sorted(victims, key=lambda cr: cr[0].key))
        out.append(JobPlacement(**base, admitted=True, reason=text, hyper_node=hyper, tier=tier,
                                bindings=tuple(bindings), victims=vs, after_evictions=after,
                                step=steps.get(job.key, 0)))
    return PlacementPlan(jobs=tuple(out), solver=SolverRecord(name="cpsat", status="FEASIBLE"))


def compare_with_greedy(ctx: Context, plan: PlacementPlan, greedy: PlacementPlan) -> PlacementPlan:
    """``greedyVictims`` (and a note in the reason) where the greedy admits the job with other victims."""
    cat = ctx.catalogue
    out: list[JobPlacement] = []
    for jp in plan.jobs:
        g = greedy.job(jp.key)
        if not jp.admitted or (not jp.victims and not g.victims):
            out.append(jp)
            continue
        if not g.admitted:
            out.append(jp.model_copy(update={"reason": f"{jp.reason}; the greedy does not admit it"}))
            continue
        if sorted(x.model_dump_json() for x in g.victims) == sorted(x.model_dump_json() for x in jp.victims):
            out.append(jp)
            continue
        cost = sum(c.cost for x in g.victims if (c := cat.candidate(f"{x.namespace}/{x.name}")) is not None)
        note = (f"the greedy would evict {len(g.victims)} pods (cost {cost})" if g.victims else
                "the greedy places it without victims")
        out.append(jp.model_copy(update={"reason": f"{jp.reason}; {note}", "greedy_victims": g.victims}))
    return plan.model_copy(update={"jobs": tuple(out)})


def _solver(options: PlanOptions, limit: float, victims: bool, clock: Clock) -> cp_model.CpSolver:
    s = cp_model.CpSolver()
    if clock.deterministic:
        clock.configure(s, max(limit, 0.05))  # the limit counts CP-SAT's deterministic time
    else:
        s.parameters.max_time_in_seconds = max(limit, 0.05)
    s.parameters.num_workers = options.workers
    s.parameters.random_seed = options.seed
    # OR-Tools 9.15's at-most-one/linear inclusion presolve can certify a wrong optimum
    # (google/or-tools#5293); seen here too, on a joint model with probing off.
    s.parameters.presolve_inclusion_work_limit = 0
    # Probing the region/node implications costs seconds at 2,000 nodes and gains little: on
    # benchmarks/placement_scale.py the binpack phase took 1.06 deterministic seconds (0.8 of them probing)
    # and 0.12 without, the same optimum proven.
    s.parameters.cp_model_probing_level = 0
    if victims:
        # The replay order's big-M links propagate poorly: the full LP relaxation (with the region cuts)
        # bounds the victims' cost.
        s.parameters.linearization_level = 2
    return s


def met_bounds(data: Data, plan: PlacementPlan) -> dict[str, int]:
    """Phases whose objective the plan already meets at a bound no plan can pass: name -> value."""
    ctx = data.ctx
    worth = job_weights(ctx)
    weight = {j.key: worth[j.key] for j in data.valid}
    admitted = sum(weight.get(jp.key, 0) for jp in plan.jobs if jp.admitted)
    occupied = set(ctx.snapshot.pods_by_node)
    opened = len({b.node for jp in plan.jobs if jp.admitted for b in jp.bindings} - occupied)
    extras = sum(len(jp.bindings) - ctx.need(data.jobs[jp.key])[1] for jp in plan.jobs if jp.admitted)
    order = order_weights(ctx)
    values = {"admitted": admitted, "victims": ctx.victim_cost(plan), "extras": extras, "opened": opened,
              "order": sum(order[jp.key] for jp in plan.jobs if jp.admitted)}
    pending = {j.key: sum(len(ctx.pending(j, t.name)) for t in j.tasks) for j in data.valid}
    bounds = {"admitted": sum(weight.values()), "victims": 0, "opened": 0,
              "extras": sum(pending[j.key] - ctx.need(j)[1] for j in data.valid),
              "order": sum(order[j.key] for j in data.valid)}
    if admitted == bounds["admitted"]:  # every job admitted, now and (phase 1 kept) in every plan to come
        values["tiers"] = sum(jp.tier or 0 for jp in plan.jobs if jp.admitted)
        bounds["tiers"] = sum(lowest_tier(data, j) for j in data.valid)
    return {name: values[name] for name in bounds if values[name] == bounds[name]}


def too_small(data: Data, job: VCJob) -> set[int]:
    """The job's regions (by index) it cannot be admitted in: their arcs' bounds (pods per node, room
    including what possible victims hold) add up to fewer pods than its gang must place."""
    want = max(data.ctx.need(job)[1], 1)
    rows = [row for (j, _t), row in data.arcs.items() if j == job.key]
    return {i for i, r in enumerate(data.ctx.regions[job.key])
            if sum(row.get(n, 0) for row in rows for n in r.nodes) < want}


def lowest_tier(data: Data, job: VCJob) -> int:
    """The least tier (as the tiers objective counts it) of a region the job could be admitted in
    (``too_small``); 0 for a job without a network topology."""
    if job.network_topology is None:
        return 0
    small = too_small(data, job)
    return min((r.tier or 0 for i, r in enumerate(data.ctx.regions[job.key]) if i not in small), default=0)


def anchored(ctx: Context, greedy: PlacementPlan, static: tuple[Data, cp_model.CpModel, Vars, dict[str, Any]]
             ) -> tuple[Data, cp_model.CpModel, Vars, dict[str, Any]]:
    """The model that holds the greedy's plan (``model.Anchor``), which the static one does not: replayed in
    job order when that holds it, else by its steps; the static model when the plan is beyond both."""
    for by_step in (False, True):
        data = build_data(ctx, anchor=greedy, by_step=by_step)
        if data.victims.anchor is None:
            break
        m, v, objs = build(data)
        if holds(m, data, v, greedy):
            log.info("placement cpsat: the greedy's plan is outside the static tier bounds: the model holds it "
                     "as its anchor%s", ", replayed by its steps" if by_step else "")
            return data, m, v, objs
        steps = data.victims.anchor.steps
        keys = [j.key for j in data.valid]
        if sorted(keys, key=lambda k: steps.get(k, 0)) == keys:
            break  # its steps keep job order: the same model
    log.warning("placement cpsat: the model cannot hold the greedy's plan")
    return static


HOLDS_LIMIT = 2.0
"""CP-SAT's deterministic seconds for checking that the model holds the greedy's plan (``holds``)."""


def holds(m: cp_model.CpModel, data: Data, v: Vars, plan: PlacementPlan) -> bool:
    """The plan, every variable fixed to it, is a solution of the model (a check cut short by
    ``HOLDS_LIMIT`` counts as no)."""
    add_hint(m, data, v, plan)
    s = cp_model.CpSolver()
    s.parameters.fix_variables_to_their_hinted_value = True
    s.parameters.num_workers = 1
    s.parameters.max_deterministic_time = HOLDS_LIMIT
    s.parameters.presolve_inclusion_work_limit = 0  # google/or-tools#5293, as ``_solver``
    st = s.solve(m)
    m.clear_hints()
    return st in (cp_model.OPTIMAL, cp_model.FEASIBLE)


def dominate(m: cp_model.CpModel, data: Data, objs: dict[str, Any], greedy: PlanKey) -> None:
    """Keep the phases that follow among the plans no worse than the greedy's on victim cost and on
    tier sum (called when the most weight the model admits is the greedy's)."""
    if data.victims.pairs:
        m.add(objs["victims"] <= greedy.victim_cost)
    m.add(objs["tiers"] <= greedy.tiers)


def solve(ctx: Context, options: PlanOptions, greedy: PlacementPlan | None = None) -> PlacementPlan:
    """The lexicographic optimum by sequential solves, dominating the greedy's plan (with its victims;
    run here when not given) when it admits no more weight (module docstring); falls back to the
    greedy's plan when CP-SAT finds nothing in time (status FALLBACK)."""
    t0 = time.perf_counter()
    clock = options.timer()
    deadline = clock.now() + options.time_limit
    if greedy is None:  # the greedy planner's own plan: Volcano's scheduling cycles
        greedy = greedy_cycles(ctx)
    ref = plan_key(ctx, greedy)
    data = build_data(ctx)
    m, v, objs = build(data)
    if not holds(m, data, v, greedy):
        data, m, v, objs = anchored(ctx, greedy, (data, m, v, objs))
    phases = [(name, sense, share) for name, sense, share in zip(PHASES, SENSE, SHARE, strict=True)
              if name != "victims" or data.victims.pairs]
    log.info("placement cpsat model: %d count, %d take variables (%d victim classes), %d constraints",
             len(v.count), len(v.ev.take), len(data.victims.classes), len(m.proto.constraints))
    best: PlacementPlan = greedy
    optimal = True
    values: list[int] = []
    objective: int | None = None
    bound: int | None = None
    for k, (name, sense, share) in enumerate(phases):
        met = met_bounds(data, best)
        if name in met:  # the plan in hand is optimal for this phase: no solve
            value = met[name]
            log.info("placement cpsat phase %d (%s): the plan in hand meets the bound %d", k + 1, name, value)
            values.append(value)
            if k == 0:
                objective, bound = value, value
        else:
            m.clear_objective()
            m.clear_hints()
            add_hint(m, data, v, best)
            if sense > 0:
                m.maximize(objs[name])
            else:
                m.minimize(objs[name])
            rest = sum(p[2] for p in phases[k:])
            left = clock.left(deadline) * (share / rest if rest else 1)
            s = _solver(options, left, bool(data.victims.pairs), clock)
            st = s.solve(m)
            clock.solved(s, len(m.proto.variables) if k == 0 else 0)
            ok = st in (cp_model.OPTIMAL, cp_model.FEASIBLE)
            log.info("placement cpsat phase %d (%s): %s objective %s bound %s in %.2fs", k + 1, name,
                     s.status_name(st), s.objective_value if ok else None, s.best_objective_bound if ok else None,
                     s.wall_time)
            if not ok:
                optimal = False
                break
            value = round(s.objective_value)
            values.append(value)
            optimal = optimal and st == cp_model.OPTIMAL
            best = extract(data, v, s)
            if k == 0:
                objective, bound = value, proven_bound(s, st, maximize=sense > 0)
        if name == "admitted" and value < -ref.neg_admitted:  # a solve cut short: the greedy's plan instead
            log.warning("placement cpsat phase 1 admits %d < the greedy's %d: its plan instead", value,
                        -ref.neg_admitted)
            best, value, optimal = greedy, -ref.neg_admitted, False
            values[-1] = objective = value
            bound = None if bound is None else max(bound, value)
        # keep this level at the value found for the phases that follow
        m.add(objs[name] >= value if sense > 0 else objs[name] <= value)
        if name == "admitted" and value == -ref.neg_admitted:
            dominate(m, data, objs, ref)
            mine = plan_key(ctx, best)
            log.info("placement cpsat: admissions tie the greedy's (%d): victim cost <= %d, tier sum <= %d "
                     "(the plan in hand: %d, %d)", value, ref.victim_cost, ref.tiers, mine.victim_cost, mine.tiers)
            if mine.victim_cost > ref.victim_cost or mine.tiers > ref.tiers:
                best = greedy  # the hint for the next phase must be in the restricted set
    wall = round(time.perf_counter() - t0, 3)
    if not values:
        return greedy.model_copy(update={"solver": SolverRecord(name="cpsat", status="FALLBACK", wall_seconds=wall)})
    proven = optimal and len(values) == len(phases)
    if best is not greedy:  # the second tier's bounds are built to hold; the validator has the last word
        bad = placement_violations(ctx.snapshot, ctx.jobs, best, safety=ctx.safety, now=ctx.now,
                                   scheduler=ctx.scheduler, repack=False)
        if bad:
            log.warning("placement cpsat: the validator refuses the exact plan (%s): the greedy's plan instead",
                        bad[0])
            best, proven = greedy, False
    best = explain_rejections(ctx, best)
    notes = victim_notes(ctx, best, proven)
    gone = {f"{x.namespace}/{x.name}" for jp in best.jobs for x in jp.victims}
    admitted = {jp.key for jp in best.jobs if jp.admitted}
    lost = {j.key: (lost[0], lost_text(lost)) for j in ctx.jobs if (lost := lost_pods(j, ctx.snapshot, gone))}
    lost.update({j.key: (again[0], outlived_text(j, again)) for j in ctx.jobs if j.key not in lost.keys() | admitted
                 and (again := outlived_pods(j, ctx.snapshot, gone))})  # the job goes on without them
    best = best.model_copy(update={"jobs": tuple(
        jp.model_copy(update={"reason": f"{jp.reason}; {lost[jp.key][1]}"}) if jp.key in lost and
        lost[jp.key][0] not in jp.reason else
        jp.model_copy(update={"reason": f"{jp.reason}; no victims ({notes[jp.key]})"}) if jp.key in notes else jp
        for jp in best.jobs)})
    best = compare_with_greedy(ctx, best, greedy)
    gap = None if objective is None or bound is None or objective == 0 else round(
        100.0 * abs(bound - objective) / abs(objective), 3)
    record = SolverRecord(name="cpsat", status="OPTIMAL" if proven else "FEASIBLE",
                          objective=objective, best_bound=bound, gap_percent=gap, wall_seconds=wall)
    return best.model_copy(update={"solver": record})


class CpSatPlacer(Planner[Context, PlacementResult]):
    """The exact placement planner (``solve``), hinted with a greedy's result when given."""

    name = "cpsat"

    def plan(self, problem: Context, options: PlanOptions, hint: PlacementResult | None = None) -> PlacementResult:
        return PlacementResult(solve(problem, options, hint.plan if hint is not None else None))
