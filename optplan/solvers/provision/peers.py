"""The peers of the provisioning planner, measured under the same validator: seed 004 §5.2's formula and
Cluster Autoscaler's ``least-waste`` expander, written from their published descriptions (no code copied).

- ``seed_formula`` (seed 004 §5.2, the SPEC's reading): for each queue with gangs allocate does not admit,
  usable free = min(capability − allocated, free of the resource on the nodes its jobs may use); gap = the
  gangs' minimum demand of the resource (``threshold`` instead, the seed's daily rule) − usable free; add
  ⌈gap / one node's allocatable⌉ nodes of the queue's node group: the first group in the catalogue whose
  nodes provide the resource and can host the queue's pods. It knows neither gangs, nor topology, nor
  other resources.
- ``least_waste`` (Cluster Autoscaler's scale-up loop with ``--expander=least-waste``): pending pods
  (every pod of a gang allocate does not admit) that fit nowhere in the cluster as it is, pod by pod
  (kube-scheduler's predicates and room: CA knows no gangs, queues or HyperNodes), trigger a scale-up;
  each group that can host some of them is sized by first-fit of those pods onto new empty nodes (up to its
  room); the option with the least wasted cpu and memory (the mean over the two of unrequested /
  allocatable on the new nodes) wins, ties to more pods helped, then the name; repeat until no pending pod
  is left that fits nowhere, or no group helps.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from fractions import Fraction

from optplan.models.provision import NodeGroup
from optplan.models.queues import VCJob
from optplan.models.repack import SolverRecord
from optplan.models.snapshot import Pod
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.core.oracle import Capacity, max_fit, pod_demand, static_reason
from optplan.solvers.core.planner import Planner
from optplan.solvers.placement.jobs import job_pods, task_minima
from optplan.solvers.provision.nodes import Counts, group_reason
from optplan.solvers.provision.problem import HEURISTIC, Outcome, Problem, ProvisionResult, usable_free
from optplan.solvers.quota.queues import account_queues


def free_room(problem: Problem, out: Outcome) -> Capacity:
    """The room left on the cluster with the new nodes after allocate's placements."""
    cap = Capacity(out.snapshot)
    for jp in out.placement.jobs:
        pods = job_pods(problem.job(jp.key))
        for b in jp.bindings:
            cap.add(pods[b.task][b.index], b.node)
    return cap


def minimum_demand(job: VCJob, resource: str) -> int:
    """The gang's minimum request of the resource: each task's minimum, and minAvailable's remainder at
    the smallest task request."""
    minima = task_minima(job)
    by_task = {t.name: t.request(resource) for t in job.tasks}
    demand = sum(by_task[t] * m for t, m in minima.items())
    rest = job.min_available - sum(minima.values())
    if rest > 0 and by_task:
        demand += rest * min(by_task.values())
    return demand


def queue_group(problem: Problem, jobs: Sequence[VCJob], resource: str) -> NodeGroup | None:
    """The queue's node group: the first in the catalogue providing the resource that can host every
    pod of the queue's jobs, else the first providing it."""
    providing = [g for g in problem.groups if g.allocatable.get(resource, 0) > 0 and g.max_count > 0]
    for g in providing:
        if all(group_reason(p.requests, static_reason(p, g.node(0)), g) is None
               for j in jobs for ps in job_pods(j).values() for p in ps[:1]):
            return g
    return providing[0] if providing else None


def seed_formula(problem: Problem, resource: str, threshold: int | None = None) -> Counts:
    """Seed 004 §5.2's rule (module docstring)."""
    base = problem.evaluate({})
    cap = free_room(problem, base)
    accounts = account_queues(problem.snapshot, hierarchical=True)
    waiting: dict[str, list[VCJob]] = {}
    for j in problem.jobs:
        if j.key not in base.served:
            waiting.setdefault(j.queue, []).append(j)
    counts: Counts = {}
    for queue in sorted(waiting):
        jobs = waiting[queue]
        pods = [ps[0] for j in jobs for ps in job_pods(j).values() if ps]
        nodes = [n for n in sorted(problem.snapshot.nodes)
                 if any(problem.predicates.ok(p, n) for p in pods)]
        usable = usable_free(problem.snapshot, accounts, queue, resource, cap, nodes)
        want = threshold if threshold is not None else sum(minimum_demand(j, resource) for j in jobs)
        gap = want - usable
        g = queue_group(problem, jobs, resource)
        if gap <= 0 or g is None:
            continue
        n = math.ceil(gap / g.allocatable[resource])
        counts[g.name] = min(counts.get(g.name, 0) + n, g.max_count)
    return counts


def pending_pods(problem: Problem, out: Outcome) -> list[Pod]:
    """Every pod of the gangs allocate does not admit, in job order."""
    return [p for jp in out.placement.jobs if not jp.admitted
            for ps in job_pods(problem.job(jp.key)).values() for p in ps]


def first_fit(pods: Iterable[Pod], cap: Capacity, nodes: Sequence[str], problem: Problem) -> list[Pod]:
    """Place pods one by one on the first node (by name) where predicates and room allow; the pods left."""
    left = []
    for p in pods:
        for n in nodes:
            if problem.predicates.ok(p, n) and cap.fits(p, n):
                cap.add(p, n)
                break
        else:
            left.append(p)
    return left


def option(g: NodeGroup, pods: Sequence[Pod], room: int) -> tuple[int, int, Fraction] | None:
    """Nodes of the group CA's estimator would add for the pods (first-fit decreasing on empty
    template nodes, at most ``room``), the pods helped, and the wasted share of cpu and memory."""
    fit = [p for p in pods if group_reason(p.requests, static_reason(p, g.node(0)), g) is None]
    if not fit or room <= 0:
        return None
    fit.sort(key=lambda p: (-p.requests.get("cpu", 0), -p.requests.get("memory", 0), p.name))
    free: list[dict[str, int]] = []
    helped = 0
    limits = "pods" in g.allocatable
    for p in fit:
        for f in free:
            if max_fit(p, f, limits) >= 1:
                break
        else:
            if len(free) >= room:
                continue
            free.append(dict(g.allocatable))
            f = free[-1]
        for r, v in pod_demand(p).items():
            f[r] = f.get(r, 0) - v
        helped += 1
    waste = Fraction(0)
    for r in ("cpu", "memory"):
        total = g.allocatable.get(r, 0) * len(free)
        if total:
            waste += Fraction(sum(f.get(r, 0) for f in free), total)
    return len(free), helped, waste / 2


def least_waste(problem: Problem) -> Counts:
    """Cluster Autoscaler's scale-up loop with the least-waste expander (module docstring)."""
    counts: Counts = {}
    for _ in range(sum(g.max_count for g in problem.groups) + 1):
        out = problem.evaluate(counts)
        cap = free_room(problem, out)
        left = first_fit(pending_pods(problem, out), cap, sorted(out.snapshot.nodes), problem)
        if not left:
            break
        best: tuple[Fraction, int, str, int] | None = None
        for g in problem.groups:
            opt = option(g, left, g.max_count - counts.get(g.name, 0))
            if opt is not None:
                n, helped, waste = opt
                key = (waste, -helped, g.name, n)
                if best is None or key < best:
                    best = key
        if best is None:
            break
        counts[best[2]] = counts.get(best[2], 0) + best[3]
    return counts


class SeedFormulaPeer(Planner[Problem, ProvisionResult]):
    """The registry's ``seed``: the seed's formula for ``resource`` (and its daily rule's ``threshold``)."""

    name = "seed"

    def __init__(self, resource: str = "nvidia.com/gpu", threshold: int | None = None) -> None:
        self.resource, self.threshold = resource, threshold

    def plan(self, problem: Problem, options: PlanOptions, hint: ProvisionResult | None = None) -> ProvisionResult:
        counts = seed_formula(problem, self.resource, self.threshold)
        return ProvisionResult(problem.evaluate(counts), SolverRecord(name=self.name, status=HEURISTIC))


class LeastWastePeer(Planner[Problem, ProvisionResult]):
    """The registry's ``least-waste``: Cluster Autoscaler's least-waste expander."""

    name = "least-waste"

    def plan(self, problem: Problem, options: PlanOptions, hint: ProvisionResult | None = None) -> ProvisionResult:
        return ProvisionResult(problem.evaluate(least_waste(problem)), SolverRecord(name=self.name, status=HEURISTIC))
