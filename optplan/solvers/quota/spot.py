"""Spot reclaim (seed 002 §6.5): which spot jobs to Delete so that at least N units of a resource are freed.

Pure functions over a Snapshot. Three plans, each re-checked by ``validate_reclaim`` before it is returned:

- **greedy**: the seed's victim order, deleting whole jobs one by one until at least N units are freed.
  Order: lower price first; then single-node jobs before multi-node ones; then fewer units; then the
  shorter running time; then namespace/name (so ties are deterministic).
- **optimal**: the least total cost (below) among the job sets freeing at least N units (CP-SAT).
- **wholeNodes**: the least total cost such that the nodes the deletions leave without any
  R-requesting pod hold at least N units of allocatable R (CP-SAT).

``selected`` is ``optimal`` when CP-SAT returned a solution (OPTIMAL or FEASIBLE), else ``greedy``.

**What a spot job is.** The occupying pods (bound to a node, not Succeeded/Failed) are grouped into jobs
by namespace and name. The pods of one PodGroup (annotation ``scheduling.k8s.io/group-name``, PodGroup in
the snapshot) always form one job, named after the PodGroup's controller owner (the VCJob behind a
Volcano PodGroup), else its pods' ``volcano.sh/job-name`` label, else the PodGroup's name. A pod without
such a PodGroup is named by its ``volcano.sh/job-name`` label, else its controller ownerReference of
kind Job, else its group-name annotation, else its own name. Pods of the same name are one job. That
name is what the platform deletes, and what ``victims[].name`` says. A job is spot when the label
``platform.io/billing-type: spot`` is found, looking in turn at the VCJob of that name in the snapshot,
the job's PodGroups, then its pods: the first place that has the label decides (lenient: the label may
sit on the job, its PodGroup or its pods). Its price is the annotation ``platform.io/spot-price`` on the
VCJob, else on its pods (PodGroup annotations are not part of the snapshot model). Two different values
at the deciding place (two pods of one job labelled differently) are an InputError, as is a spot job
without a price or with a price that is not a non-negative decimal of at most 6 decimal places.

**Units.** A job's units are the summed requests of R over its occupying pods (integer milli-units);
deleting a job deletes all its pods, so it frees all of them. Spot jobs holding no R are never victims.

**Running time.** ``now`` − the earliest ``status.startTime`` (else ``metadata.creationTimestamp``) among
the job's occupying pods; else the VCJob's creationTimestamp; else 0 (with a warning). A start after
``now`` counts as 0 (with a warning). Whole seconds, rounded down. ``now`` defaults to the current time;
pass it (RFC 3339) to make the output reproducible.

**Cost model.** cost(job) = price × units × hours run: the spot bill of the work thrown away (seed §13
bills spot use as time × bid price, so the price is read per unit-hour). A plan's cost is the sum over
its victims. CP-SAT sees integers only: price in micro-units × units in milli-units × seconds, divided by
the gcd of all job costs. Should the total still exceed 2^53, the costs are divided further (rounded up);
the plan is then reported FEASIBLE, never OPTIMAL, since it is optimal for the rounded costs only.
Among plans of equal cost, the exact models prefer fewer units freed (no needless killing, seed §6.5
rule 4), then fewer victims; one worker and a fixed seed make the rest deterministic.

**Whole nodes.** A node counts as freed when it provides R (allocatable R > 0), is not cordoned, held at
least one R-requesting pod of a victim, and holds no R-requesting pod after the deletions (so it held no
R pod of a non-spot job; pods that do not request R do not matter). The plan's ``freed`` is the
allocatable R of its freed nodes, idle remnants included (they become usable as part of a whole node);
the victims' own units are listed per victim. Nodes that are entirely idle already do not count: in
both modes N is what is missing beyond what is free now (seed §6.5 step 2: 20 needed, 8 idle, reclaim
12), counted as any free units in the optimal mode and as entirely free nodes in this one.

**When nothing suffices** (the spot jobs, or the freeable nodes, hold fewer than N units) the plans list
every victim that helps (all spot jobs; all jobs on freeable nodes), ``freed < needed``, a ``reason``,
and status INFEASIBLE for the exact plans (so ``greedy`` is selected). That is a result, not an error.
"""

from __future__ import annotations

import logging
import math
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any

from ortools.sat.python import cp_model

from optplan.errors import InputError, PlanInvalidError
from optplan.models.quantity import MILLI, format_milli
from optplan.models.snapshot import Pod, Snapshot
from optplan.solvers.quota.queues import BILLING_LABEL
from optplan.solvers.quota.times import parse_now, parse_time

log = logging.getLogger(__name__)

SPOT = "spot"
PRICE_ANNOTATION = "platform.io/spot-price"
JOB_NAME_LABEL = "volcano.sh/job-name"
MICRO = 10**6
"""Prices are held in integer micro-units."""
HOUR = 3600
COST_SCALE = MICRO * MILLI * HOUR
"""cost = price_micro × units_milli × seconds / COST_SCALE = price × units × hours."""
MAX_OBJECTIVE = 2**53
"""Largest objective CP-SAT sees; larger totals are divided (see the module docstring)."""

GREEDY = "greedy"
OPTIMAL = "optimal"
WHOLE_NODES = "wholeNodes"


# ---- domain ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SpotJob:
    """A spot job that holds R: a possible victim."""

    namespace: str
    name: str
    units: int
    """Requests of R over its occupying pods, milli-units."""
    price_micro: int
    """platform.io/spot-price in micro-units (0.1 is 100000)."""
    runtime_seconds: int
    pods: tuple[str, ...]
    """namespace/name of its occupying pods, sorted."""
    nodes: tuple[str, ...]
    """Nodes its occupying pods run on, sorted."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def price(self) -> Fraction:
        return Fraction(self.price_micro, MICRO)

    @property
    def single_node(self) -> bool:
        return len(self.nodes) <= 1

    @property
    def cost_int(self) -> int:
        """price_micro × units_milli × seconds: the exact cost in integer form."""
        return self.price_micro * self.units * self.runtime_seconds

    @property
    def cost(self) -> Fraction:
        """price × units × hours run."""
        return Fraction(self.cost_int, COST_SCALE)

    def order_key(self) -> tuple[int, bool, int, int, str, str]:
        """The seed's victim order (§6.5): cheap, single-node, small, short-running first."""
        return (self.price_micro, not self.single_node, self.units, self.runtime_seconds, self.namespace, self.name)


@dataclass(frozen=True)
class ReclaimPlan:
    mode: str
    """greedy | optimal | wholeNodes"""
    victims: tuple[SpotJob, ...]
    """In the seed's victim order (the order to Delete them in)."""
    freed: int
    """Milli-units counted toward the need: the victims' units; for wholeNodes the freed nodes' allocatable."""
    status: str
    """HEURISTIC (greedy), OPTIMAL, FEASIBLE, INFEASIBLE (not enough anywhere), UNKNOWN (no solution in time)."""
    reason: str | None = None
    """Why ``freed`` is below the need; None when it is not."""
    freed_nodes: tuple[str, ...] = ()
    """wholeNodes only: nodes left without R-requesting pods, sorted."""
    wall_seconds: float = 0.0

    @property
    def cost(self) -> Fraction:
        return sum((v.cost for v in self.victims), Fraction(0))

    @property
    def released(self) -> int:
        """Units the victims hold (equals ``freed`` except in whole-node mode)."""
        return sum(v.units for v in self.victims)

    @property
    def solved(self) -> bool:
        return self.status in ("OPTIMAL", "FEASIBLE")


@dataclass(frozen=True)
class SpotReclaim:
    needed: int
    """Milli-units of R to free."""
    resource: str
    now: datetime
    jobs: tuple[SpotJob, ...]
    """Every spot job holding R, in victim order."""
    greedy: ReclaimPlan
    optimal: ReclaimPlan
    whole_nodes: ReclaimPlan
    warnings: tuple[str, ...] = ()

    @property
    def selected(self) -> str:
        return OPTIMAL if self.optimal.solved else GREEDY

    @property
    def spot_units(self) -> int:
        return sum(j.units for j in self.jobs)


# ---- input parsing ---------------------------------------------------------------------------------

def parse_price(text: str) -> int:
    """A spot price as integer micro-units; ValueError when it is not a non-negative decimal."""
    try:
        d = Decimal(text.strip())
    except InvalidOperation:
        raise ValueError(f"not a decimal number: {text!r}") from None
    if not d.is_finite() or d < 0:
        raise ValueError(f"must be a non-negative decimal number, got {text!r}")
    micro = d * MICRO
    if micro != micro.to_integral_value():
        raise ValueError(f"more than 6 decimal places: {text!r}")
    return int(micro)


# ---- spot jobs in a snapshot -------------------------------------------------------------------------

def job_names(snap: Snapshot) -> dict[str, str]:
    """Pod key -> the name of the job it belongs to, for every occupying pod (rules in the module docstring).

    The pods of one PodGroup always form one job: the gang is what Volcano schedules, and what a
    Delete of the job removes."""
    by_group: dict[str, list[Pod]] = defaultdict(list)
    for key in sorted(snap.pods):
        pod = snap.pods[key]
        if pod.occupying and pod.group_key in snap.pod_groups:
            by_group[str(pod.group_key)].append(pod)
    group_name: dict[str, str] = {}
    for gk, pods in by_group.items():
        pg = snap.pod_groups[gk]
        labelled = sorted(p.labels[JOB_NAME_LABEL] for p in pods if p.labels.get(JOB_NAME_LABEL))
        group_name[gk] = pg.owner.name if pg.owner is not None else labelled[0] if labelled else pg.name
    out: dict[str, str] = {}
    for key in sorted(snap.pods):
        pod = snap.pods[key]
        if not pod.occupying:
            continue
        if pod.group_key in group_name:
            out[key] = group_name[str(pod.group_key)]
        elif pod.labels.get(JOB_NAME_LABEL):
            out[key] = pod.labels[JOB_NAME_LABEL]
        else:
            owner = next((r.name for r in pod.owner_references if r.controller and r.kind == "Job"), None)
            out[key] = owner or pod.group_name or pod.name
    return out


def _decide_billing(places: Sequence[tuple[str, Sequence[tuple[str, str]]]], job: str) -> str | None:
    """The billing type at the first place that has one: places are (field path, [(object, value)]).
    Objects of that place disagreeing on whether the job is spot are an InputError (other differences,
    such as subscription against payg, do not matter here)."""
    for path, found in places:
        values = sorted({v for _, v in found})
        if len({v == SPOT for v in values}) > 1:
            objs = ", ".join(f"{o}={v!r}" for o, v in sorted(found))
            raise InputError(f"the objects of job {job} disagree on the billing type: {objs}",
                             obj=sorted(found)[0][0], field=path)
        if values:
            return values[0]
    return None


def _runtime(pods: Sequence[Pod], job_ts: str, now: datetime, job: str, warnings: list[str]) -> int:
    starts: list[datetime] = []
    for p in pods:
        text, path = (p.start_time, "status.startTime") if p.start_time else (
            p.creation_timestamp, "metadata.creationTimestamp")
        if not text:
            continue
        try:
            starts.append(parse_time(text))
        except ValueError as e:
            raise InputError(str(e), obj=f"Pod/{p.key}", field=path) from None
    if not starts and job_ts:
        try:
            starts.append(parse_time(job_ts))
        except ValueError as e:
            raise InputError(str(e), obj=f"Job/{job}", field="metadata.creationTimestamp") from None
    if not starts:
        warnings.append(f"spot job {job}: no startTime or creationTimestamp on its pods; running time taken as 0")
        return 0
    seconds = (now - min(starts)) // timedelta(seconds=1)
    if seconds < 0:
        warnings.append(f"spot job {job} started after --now ({min(starts).isoformat()}); running time taken as 0")
        return 0
    return int(seconds)


@dataclass
class _Catalogue:
    jobs: list[SpotJob]
    blocked_nodes: set[str] = field(default_factory=set)
    """Nodes holding an R-requesting pod of a non-spot job: never entirely freed."""
    warnings: list[str] = field(default_factory=list)


def spot_jobs(snap: Snapshot, resource: str, now: datetime) -> _Catalogue:
    """Group occupying pods into jobs; keep the spot ones that hold R, in victim order."""
    groups: dict[tuple[str, str], list[Pod]] = defaultdict(list)
    for key, name in job_names(snap).items():
        groups[snap.pods[key].namespace, name].append(snap.pods[key])
    cat = _Catalogue(jobs=[])
    for (ns, name), pods in sorted(groups.items()):
        job = f"{ns}/{name}"
        units = sum(p.request(resource) for p in pods)
        vcjob = snap.jobs.get(job)
        pgs = sorted({p.group_key for p in pods if p.group_key in snap.pod_groups}, key=str)
        label = f"metadata.labels.{BILLING_LABEL}"
        billing = _decide_billing([
            (label, [(f"Job/{job}", vcjob.labels[BILLING_LABEL])] if vcjob and BILLING_LABEL in vcjob.labels else []),
            (label, [(f"PodGroup/{g}", snap.pod_groups[g].labels[BILLING_LABEL]) for g in pgs
                     if g is not None and BILLING_LABEL in snap.pod_groups[g].labels]),
            (label, [(f"Pod/{p.key}", p.labels[BILLING_LABEL]) for p in pods if BILLING_LABEL in p.labels]),
        ], job)
        if billing != SPOT:
            if units > 0:
                cat.blocked_nodes.update(p.node_name for p in pods if p.node_name and p.request(resource) > 0)
            continue
        if units == 0:
            continue
        ann = f"metadata.annotations.{PRICE_ANNOTATION}"
        vc_price = [(f"Job/{job}", vcjob.annotations[PRICE_ANNOTATION])] if (
            vcjob and PRICE_ANNOTATION in vcjob.annotations) else []
        pod_price = [(f"Pod/{p.key}", p.annotations[PRICE_ANNOTATION]) for p in pods
                     if PRICE_ANNOTATION in p.annotations]
        price = _decide_price([vc_price, pod_price], ann, job)
        if price is None:
            where = f"Job/{job}" if vcjob else f"Pod/{pods[0].key}"
            raise InputError(f"spot job {job} has no {PRICE_ANNOTATION} annotation (on the VCJob or its pods)",
                             obj=where, field=ann)
        runtime = _runtime(pods, vcjob.creation_timestamp if vcjob else "", now, job, cat.warnings)
        cat.jobs.append(SpotJob(
            namespace=ns, name=name, units=units, price_micro=price, runtime_seconds=runtime,
            pods=tuple(p.key for p in pods),
            nodes=tuple(sorted({p.node_name for p in pods if p.node_name is not None}))))
    cat.jobs.sort(key=SpotJob.order_key)
    return cat


def _decide_price(places: Sequence[Sequence[tuple[str, str]]], path: str, job: str) -> int | None:
    """The price at the first place that has one, compared parsed ("0.1" and "0.10" agree)."""
    for found in places:
        values = {_price_of(o, text, path) for o, text in found}
        if len(values) > 1:
            objs = ", ".join(f"{o}={v!r}" for o, v in sorted(found))
            raise InputError(f"the objects of spot job {job} disagree on the spot price: {objs}",
                             obj=sorted(found)[0][0], field=path)
        if values:
            return values.pop()
    return None


def _price_of(obj: str, text: str, path: str) -> int:
    try:
        return parse_price(text)
    except ValueError as e:
        raise InputError(f"unparseable spot price: {e}", obj=obj, field=path) from None


# ---- plans -------------------------------------------------------------------------------------------

def _ordered(jobs: Iterable[SpotJob]) -> tuple[SpotJob, ...]:
    return tuple(sorted(jobs, key=SpotJob.order_key))


def _shortfall(freed: int, needed: int, resource: str, what: str) -> str | None:
    if freed >= needed:
        return None
    return (f"{what} hold only {format_milli(freed)} {resource}; {format_milli(needed)} needed "
            f"({format_milli(needed - freed)} short)")


def greedy_plan(jobs: Sequence[SpotJob], needed: int, resource: str) -> ReclaimPlan:
    """The seed's rule: delete in victim order until at least ``needed`` is freed."""
    victims: list[SpotJob] = []
    freed = 0
    for job in sorted(jobs, key=SpotJob.order_key):
        if freed >= needed:
            break
        victims.append(job)
        freed += job.units
    return ReclaimPlan(GREEDY, tuple(victims), freed, "HEURISTIC",
                       _shortfall(freed, needed, resource, "all spot jobs together"))


@dataclass(frozen=True)
class _Nodes:
    """Whole-node data: the nodes that can be freed, their allocatable R and the jobs on them."""

    alloc: dict[str, int]
    jobs_on: dict[str, tuple[str, ...]]


def freeable_nodes(snap: Snapshot, resource: str, cat: _Catalogue) -> _Nodes:
    """Schedulable providers of R whose R-requesting pods all belong to spot jobs (and that have some)."""
    pod_job = {pod: job.key for job in cat.jobs for pod in job.pods}
    alloc: dict[str, int] = {}
    jobs_on: dict[str, tuple[str, ...]] = {}
    for node in snap.providers(resource):
        if node.unschedulable or node.name in cat.blocked_nodes:
            continue
        r_pods = [p for p in snap.pods_by_node.get(node.name, ()) if p.request(resource) > 0]
        if not r_pods or any(p.key not in pod_job for p in r_pods):
            continue
        alloc[node.name] = node.allocatable[resource]
        jobs_on[node.name] = tuple(sorted({pod_job[p.key] for p in r_pods}))
    return _Nodes(alloc, jobs_on)


def _freed_nodes(nodes: _Nodes, victims: Iterable[SpotJob]) -> tuple[str, ...]:
    keys = {v.key for v in victims}
    return tuple(n for n in sorted(nodes.alloc) if set(nodes.jobs_on[n]) <= keys)


# ---- the exact models (CP-SAT) ----------------------------------------------------------------------

@dataclass
class _Vars:
    kill: dict[str, Any]  # kill[job]: the job is deleted
    free: dict[str, Any] = field(default_factory=dict)  # free[node]: counted as entirely freed (whole-node mode)


@dataclass(frozen=True)
class _Scaled:
    """Integer data as CP-SAT sees it: units divided by their gcd, costs by theirs (and more if too large)."""

    units: dict[str, int]
    cost: dict[str, int]
    exact: bool


def _scale(jobs: Sequence[SpotJob]) -> _Scaled:
    g_units = math.gcd(*(j.units for j in jobs)) or 1
    costs = {j.key: j.cost_int for j in jobs}
    g_cost = math.gcd(*costs.values()) or 1
    costs = {k: c // g_cost for k, c in costs.items()}
    total = sum(costs.values())
    exact = total <= MAX_OBJECTIVE
    if not exact:
        div = -(-total // MAX_OBJECTIVE)
        costs = {k: -(-c // div) for k, c in costs.items()}
    return _Scaled({j.key: j.units // g_units for j in jobs}, costs, exact)


def add_units_cover(m: cp_model.CpModel, jobs: Sequence[SpotJob], needed: int, v: _Vars) -> None:
    """The victims hold at least ``needed`` units (exact: units and need divided by the units' gcd)."""
    g = math.gcd(*(j.units for j in jobs))
    m.add(sum((j.units // g) * v.kill[j.key] for j in jobs) >= -(-needed // g))


def add_whole_nodes(m: cp_model.CpModel, nodes: _Nodes, needed: int, v: _Vars) -> None:
    """A node counts only when every job with R pods on it is deleted; counted nodes hold ``needed``."""
    for n, jobs in nodes.jobs_on.items():
        v.free[n] = m.new_bool_var(f"free[{n}]")
        for j in jobs:
            m.add_implication(v.free[n], v.kill[j])
    g = math.gcd(*nodes.alloc.values())
    m.add(sum((a // g) * v.free[n] for n, a in nodes.alloc.items()) >= -(-needed // g))


def cost_expr(s: _Scaled, v: _Vars) -> Any:
    return sum(s.cost[k] * x for k, x in v.kill.items())


def tiebreak_expr(s: _Scaled, v: _Vars) -> Any:
    """Fewer units released first, then fewer victims."""
    n = len(v.kill) + 1
    return sum((s.units[k] * n + 1) * x for k, x in v.kill.items())


@dataclass(frozen=True)
class _Solve:
    status: str
    values: dict[str, bool]
    objective: int
    seconds: float


def _solve(m: cp_model.CpModel, v: _Vars, objective: Any, phase: str, *, time_limit: float, workers: int,
           seed: int) -> _Solve | None:
    m.minimize(objective)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(time_limit, 0.01)
    solver.parameters.num_workers = workers
    solver.parameters.random_seed = seed
    t0 = time.perf_counter()
    status = solver.solve(m)
    seconds = time.perf_counter() - t0
    name = solver.status_name(status)
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        obj, bound = int(solver.objective_value), int(solver.best_objective_bound)
        gap = 0.0 if obj == 0 else 100.0 * (obj - bound) / abs(obj)
        log.info("spot %s: %s objective %d bound %d gap %.2f%% in %.3fs", phase, name, obj, bound, gap, seconds)
        return _Solve(name, {k: bool(solver.boolean_value(x)) for k, x in v.kill.items()}, obj, seconds)
    if status == cp_model.INFEASIBLE:
        raise AssertionError(f"spot {phase}: model infeasible although the need was checked to be coverable")
    log.warning("spot %s: %s after %.3fs (no solution)", phase, name, seconds)
    return None


def exact_plan(mode: str, jobs: Sequence[SpotJob], needed: int, *, nodes: _Nodes | None = None,
               hint: Iterable[SpotJob] = (), cost_cap: int | None = None, time_limit: float, workers: int,
               seed: int) -> ReclaimPlan:
    """Least cost first, then (cost fixed) fewest units and victims. ``nodes`` selects whole-node mode."""
    s = _scale(jobs)
    m = cp_model.CpModel()
    v = _Vars(kill={j.key: m.new_bool_var(f"kill[{j.key}]") for j in jobs})
    if nodes is None:
        add_units_cover(m, jobs, needed, v)
    else:
        add_whole_nodes(m, nodes, needed, v)
    if cost_cap is not None:
        m.add(cost_expr(s, v) <= cost_cap)
    hinted = {h.key for h in hint}
    for k, x in v.kill.items():
        m.add_hint(x, int(k in hinted))
    deadline = time.perf_counter() + time_limit
    first = _solve(m, v, cost_expr(s, v), f"{mode} cost", time_limit=time_limit, workers=workers, seed=seed)
    if first is None:
        return ReclaimPlan(mode, (), 0, "UNKNOWN", f"no solution within the time limit ({time_limit:g}s)",
                           wall_seconds=time_limit)
    m.clear_hints()
    for k, x in v.kill.items():
        m.add_hint(x, int(first.values[k]))
    m.add(cost_expr(s, v) <= first.objective)
    rest = max(deadline - time.perf_counter(), 0.1 * time_limit)
    second = _solve(m, v, tiebreak_expr(s, v), f"{mode} tie-break", time_limit=rest, workers=workers, seed=seed)
    best = second or first
    proven = first.status == "OPTIMAL" and (second is None or second.status == "OPTIMAL") and s.exact
    victims = _ordered(j for j in jobs if best.values[j.key])
    wall = round(first.seconds + (second.seconds if second else 0.0), 3)
    if nodes is None:
        return ReclaimPlan(mode, victims, sum(j.units for j in victims), "OPTIMAL" if proven else "FEASIBLE",
                           wall_seconds=wall)
    freed_nodes = _freed_nodes(nodes, victims)
    return ReclaimPlan(mode, victims, sum(nodes.alloc[n] for n in freed_nodes), "OPTIMAL" if proven else "FEASIBLE",
                       freed_nodes=freed_nodes, wall_seconds=wall)


# ---- the entry point ---------------------------------------------------------------------------------

def reclaim_spot(snapshot: Snapshot, needed: int, resource: str = "nvidia.com/gpu",
                 now: datetime | str | None = None, *, time_limit: float = 10.0, workers: int = 1,
                 seed: int = 0) -> SpotReclaim:
    """Plan the Deletion of spot jobs freeing at least ``needed`` milli-units of ``resource``.

    Raises InputError for bad input (a negative need, a bad ``now``, an unparseable price); every plan
    returned has passed ``validate_reclaim`` (a failure there is a PlanInvalidError: a bug).
    """
    if isinstance(needed, bool) or not isinstance(needed, int):
        raise InputError(f"must be an amount of {resource}, got {needed!r}", field="--gpus")
    if needed < 0:
        raise InputError(f"must not be negative, got {format_milli(needed)}", field="--gpus")
    if time_limit <= 0:
        raise InputError(f"must be positive, got {time_limit:g}", field="--time-limit")
    when = parse_now(now)
    cat = spot_jobs(snapshot, resource, when)
    jobs = cat.jobs
    greedy = greedy_plan(jobs, needed, resource)
    total = sum(j.units for j in jobs)
    if needed == 0:
        optimal = ReclaimPlan(OPTIMAL, (), 0, "OPTIMAL")
    elif total < needed:
        optimal = ReclaimPlan(OPTIMAL, _ordered(jobs), total, "INFEASIBLE",
                              _shortfall(total, needed, resource, "all spot jobs together"))
    else:
        cap = _scaled_cost(jobs, greedy.victims)
        optimal = exact_plan(OPTIMAL, jobs, needed, hint=greedy.victims, cost_cap=cap, time_limit=time_limit,
                             workers=workers, seed=seed)
    whole = _whole_nodes_plan(snapshot, resource, cat, needed, time_limit=time_limit, workers=workers, seed=seed)
    result = SpotReclaim(needed, resource, when, tuple(jobs), greedy, optimal, whole, tuple(cat.warnings))
    violations = validate_reclaim(snapshot, result)
    if violations:
        raise PlanInvalidError(violations)
    return result


def _scaled_cost(jobs: Sequence[SpotJob], victims: Iterable[SpotJob]) -> int:
    s = _scale(jobs)
    return sum(s.cost[v.key] for v in victims)


def _whole_nodes_plan(snap: Snapshot, resource: str, cat: _Catalogue, needed: int, *, time_limit: float,
                      workers: int, seed: int) -> ReclaimPlan:
    if needed == 0:
        return ReclaimPlan(WHOLE_NODES, (), 0, "OPTIMAL")
    nodes = freeable_nodes(snap, resource, cat)
    on_nodes = {k for ks in nodes.jobs_on.values() for k in ks}
    jobs = [j for j in cat.jobs if j.key in on_nodes]
    everything = _ordered(jobs)
    total = sum(nodes.alloc.values())
    if total < needed:
        return ReclaimPlan(WHOLE_NODES, everything, total, "INFEASIBLE",
                           _shortfall(total, needed, resource, "the nodes that spot deletions can free entirely"),
                           freed_nodes=tuple(sorted(nodes.alloc)))
    return exact_plan(WHOLE_NODES, jobs, needed, nodes=nodes, hint=everything, time_limit=time_limit,
                      workers=workers, seed=seed)


# ---- the validator -----------------------------------------------------------------------------------

def validate_reclaim(snap: Snapshot, result: SpotReclaim) -> list[str]:
    """Re-check every plan against the snapshot, independently of how it was made: each victim is a spot
    job whose pods exist, occupy nodes and are all deleted together; units, freed amounts, costs and
    freed nodes add up; a shortfall carries a reason; greedy follows the seed's order and stop rule."""
    out: list[str] = []
    r = result.resource
    for plan in (result.greedy, result.optimal, result.whole_nodes):
        where = f"{plan.mode}:"
        seen: set[str] = set()
        pods_deleted: set[str] = set()
        for v in plan.victims:
            out.extend(f"{where} {m}" for m in _check_victim(snap, v, r))
            if v.key in seen:
                out.append(f"{where} {v.key} listed twice")
            seen.add(v.key)
            if pods_deleted & set(v.pods):
                out.append(f"{where} {v.key} shares pods with another victim")
            pods_deleted.update(v.pods)
        if list(plan.victims) != sorted(plan.victims, key=SpotJob.order_key):
            out.append(f"{where} victims are not in the seed's victim order")
        if plan.mode == WHOLE_NODES:
            out.extend(f"{where} {m}" for m in _check_whole_nodes(snap, plan, pods_deleted, r))
        elif plan.freed != sum(v.units for v in plan.victims):
            out.append(f"{where} freed {plan.freed} but the victims hold {sum(v.units for v in plan.victims)}")
        if (plan.freed < result.needed) != (plan.reason is not None):
            out.append(f"{where} freed {plan.freed} of {result.needed} needed, reason {plan.reason!r}")
        if plan.solved and plan.freed < result.needed:
            out.append(f"{where} status {plan.status} but only {plan.freed} of {result.needed} freed")
    g = result.greedy
    if list(g.victims) != list(result.jobs[:len(g.victims)]):
        out.append("greedy: victims are not the first spot jobs in the seed's victim order")
    if g.victims and g.freed - g.victims[-1].units >= result.needed:
        out.append(f"greedy: did not stop once enough was freed (without {g.victims[-1].key} it frees enough)")
    if result.optimal.status == "OPTIMAL" and g.reason is None and result.optimal.cost > g.cost:
        out.append(f"optimal: cost {result.optimal.cost} above greedy's {g.cost}")
    return out


def _check_victim(snap: Snapshot, v: SpotJob, resource: str) -> list[str]:
    out: list[str] = []
    pods = [snap.pods.get(k) for k in v.pods]
    if not pods or any(p is None or not p.occupying for p in pods):
        return [f"{v.key}: a pod of the victim is missing or not running on a node"]
    live = [p for p in pods if p is not None]
    if any(p.namespace != v.namespace for p in live):
        out.append(f"{v.key}: a pod lies in another namespace")
    units = sum(p.request(resource) for p in live)
    if units != v.units or units <= 0:
        out.append(f"{v.key}: units {v.units}, but its pods request {units} {resource}")
    # Whole deletion: every occupying pod of a victim pod's PodGroup, and every occupying pod outside
    # any PodGroup that is labelled with the job's name, is a victim pod too.
    groups = {p.group_key for p in live if p.group_key in snap.pod_groups}
    mine = set(v.pods)
    for p in snap.pods.values():
        if not p.occupying or p.namespace != v.namespace or p.key in mine:
            continue
        if p.group_key in groups or (p.group_key not in snap.pod_groups and p.labels.get(JOB_NAME_LABEL) == v.name):
            out.append(f"{v.key}: pod {p.key} of the same job is not deleted with it")
    vcjob = snap.jobs.get(v.key)
    marks = [vcjob.labels.get(BILLING_LABEL) if vcjob else None]
    marks += [snap.pod_groups[g].labels.get(BILLING_LABEL) for g in sorted(groups) if g in snap.pod_groups]
    marks += [p.labels.get(BILLING_LABEL) for p in live]
    first = next((m for m in marks if m is not None), None)
    if first != SPOT:
        out.append(f"{v.key}: not labelled {BILLING_LABEL}: {SPOT} (found {first!r})")
    if v.runtime_seconds < 0 or v.price_micro < 0:
        out.append(f"{v.key}: negative price or running time")
    if tuple(sorted({p.node_name or "" for p in live})) != v.nodes:
        out.append(f"{v.key}: nodes {v.nodes} differ from its pods' nodes")
    return out


def _check_whole_nodes(snap: Snapshot, plan: ReclaimPlan, deleted: set[str], resource: str) -> list[str]:
    out: list[str] = []
    emptied: set[str] = set()  # schedulable providers where a victim held R and no R pod is left
    for provider in snap.providers(resource):
        held = {p.key for p in snap.pods_by_node.get(provider.name, ()) if p.request(resource) > 0}
        if not provider.unschedulable and held & deleted and held <= deleted:
            emptied.add(provider.name)
    for name in plan.freed_nodes:
        node = snap.nodes.get(name)
        if node is None or not node.provides(resource) or node.unschedulable:
            out.append(f"node {name} is not a schedulable provider of {resource}")
            continue
        r_pods = [p.key for p in snap.pods_by_node.get(name, ()) if p.request(resource) > 0]
        left = [k for k in r_pods if k not in deleted]
        if left:
            out.append(f"node {name} still holds {', '.join(left)}")
        if not r_pods:
            out.append(f"node {name} was idle already (it does not count)")
    if set(plan.freed_nodes) - emptied or emptied - set(plan.freed_nodes):
        out.append(f"freed nodes {list(plan.freed_nodes)}, but the victims empty {sorted(emptied)}")
    total = sum(snap.nodes[n].allocatable.get(resource, 0) for n in plan.freed_nodes if n in snap.nodes)
    if total != plan.freed:
        out.append(f"freed {plan.freed} but the freed nodes hold {total}")
    if list(plan.freed_nodes) != sorted(set(plan.freed_nodes)):
        out.append("freed nodes are not sorted and unique")
    return out
