"""The provisioning greedy: gang by gang in Volcano's order, the cheapest nodes after which allocate admits
the gang and keeps every gang it admitted before. For each group whose nodes can host every task the gang
needs (cheapest first), the cheaper groups are taken at their maximum and the fewest nodes of this one
found (doubling, then bisection); the nodes not needed are then removed, the most expensive first
(``prune``), and the cheapest candidate wins. A gang whose tasks need different groups grows each task's
cheapest group together. At the end, nodes not needed are removed again.

Binpack onto what is there first: a gang that allocate admits on the cluster as it is costs nothing, and
each search starts from the nodes added so far.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from optplan.models.provision import NodeGroup
from optplan.models.repack import SolverRecord
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.core.planner import Planner
from optplan.solvers.placement.jobs import task_minima
from optplan.solvers.provision.nodes import Counts, cost_of
from optplan.solvers.provision.problem import HEURISTIC, Outcome, Problem, ProvisionResult, host_groups

log = logging.getLogger(__name__)


def smallest(ok: Callable[[int], bool], room: int) -> int | None:
    """The smallest k in 1..room with ok(k), assuming ok is monotone (doubling, then bisection); None if
    not even ok(room)."""
    if room <= 0:
        return None
    hi, lo = 1, 0
    while not ok(hi):
        if hi >= room:
            return None
        lo, hi = hi, min(2 * hi, room)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi


def added(counts: Mapping[str, int], more: Mapping[str, int]) -> Counts:
    out = dict(counts)
    for g, n in more.items():
        out[g] = out.get(g, 0) + n
    return out


def usable_groups(problem: Problem, job_key: str) -> tuple[list[NodeGroup], list[list[NodeGroup]]]:
    """The groups whose nodes can host every task the gang needs, and per needed task the groups that can
    host it (cheapest first)."""
    job = problem.job(job_key)
    minima = task_minima(job)
    hosts = {t: {g for g, why in by.items() if why is None} for t, by in host_groups(problem, job).items()
             if minima.get(t, 0) > 0}
    whole = [g for g in problem.groups if all(g.name in h for h in hosts.values())]
    per_task = [sorted((g for g in problem.groups if g.name in h), key=lambda g: (g.price, g.name))
                for h in hosts.values()]
    return whole, per_task


def serve(problem: Problem, counts: Counts, cur: Outcome, job_key: str) -> Counts | None:
    """The cheapest counts found that add to ``counts`` and admit the job without losing an admitted one."""
    keep = cur.served

    def works(c: Counts) -> bool:
        served = problem.evaluate(c).served
        return job_key in served and keep <= served

    best: tuple[int, Counts] | None = None
    whole, per_task = usable_groups(problem, job_key)
    whole.sort(key=lambda g: (g.price, g.name))
    for i, g in enumerate(whole):
        # the cheaper groups at their maximum, then the fewest of this one; pruned, the most expensive first
        prefix = added(counts, {h.name: h.max_count - counts.get(h.name, 0) for h in whole[:i]})

        def ok(k: int, name: str = g.name, prefix: Counts = prefix) -> bool:
            return works(added(prefix, {name: k}))

        k = smallest(ok, g.max_count - counts.get(g.name, 0))
        if k is None:
            continue
        found = prune(problem, added(prefix, {g.name: k}), keep | {job_key}, floor=counts)
        cost = cost_of(problem.groups, found)
        if best is None or cost < best[0]:
            best = (cost, found)
    if best is None and per_task and all(per_task) and len(per_task) > 1:
        mix = {ts[0].name: 0 for ts in per_task}  # each task's cheapest group, grown together
        room = min(g.max_count - counts.get(g.name, 0) for ts in per_task for g in ts[:1])
        k = smallest(lambda k: works(added(counts, dict.fromkeys(mix, k))), room)
        if k is not None:
            found = prune(problem, added(counts, dict.fromkeys(mix, k)), keep | {job_key}, floor=counts)
            best = (cost_of(problem.groups, found), found)
    return None if best is None else best[1]


def prune(problem: Problem, counts: Counts, served: frozenset[str], floor: Mapping[str, int] | None = None) -> Counts:
    """Remove nodes while every gang in ``served`` stays admitted, the most expensive group first (never
    below ``floor``)."""
    counts = dict(counts)
    floor = floor or {}
    for g in sorted(problem.groups, key=lambda g: (-g.price, g.name)):
        while counts.get(g.name, 0) > floor.get(g.name, 0):
            trial = added(counts, {g.name: -1})
            if served <= problem.evaluate(trial).served:
                counts = trial
            else:
                break
    return counts


def greedy_counts(problem: Problem, start: Mapping[str, int] | None = None,
                  skip: frozenset[str] = frozenset()) -> Counts:
    """From ``start`` (default none added), serve the gangs not admitted yet in Volcano's order, then
    prune. ``skip``: jobs no group can host (``deadlocks``), never searched for."""
    counts = {g.name: (start or {}).get(g.name, 0) for g in problem.groups}
    cur = problem.evaluate(counts)
    for jp in cur.placement.jobs:
        if jp.key in cur.served or jp.key in skip:
            continue
        found = serve(problem, counts, cur, jp.key)
        if found is not None:
            counts, cur = found, problem.evaluate(found)
    out = prune(problem, counts, cur.served)
    log.info("provision greedy: %d gangs served at cost %d (%d evaluations)", len(cur.served),
             problem.evaluate(out).cost, problem.evaluations)
    return out


class GreedyProvisioner(Planner[Problem, ProvisionResult]):
    """The registry's ``greedy``: ``greedy_counts`` from the hint's counts (none: from no node added);
    ``skip``: the gangs no group can host (``deadlocks``), never searched for."""

    name = "greedy"

    def __init__(self, skip: frozenset[str] = frozenset()) -> None:
        self.skip = skip

    def plan(self, problem: Problem, options: PlanOptions, hint: ProvisionResult | None = None) -> ProvisionResult:
        start = hint.outcome.counts if hint is not None else None
        counts = greedy_counts(problem, start=start, skip=self.skip)
        return ProvisionResult(problem.evaluate(counts), SolverRecord(name=self.name, status=HEURISTIC))
