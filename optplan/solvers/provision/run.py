"""The provisioning family's entry: ``plan_provision`` runs the planner named in the registry and validates
its plan.

- ``greedy``: ``greedy.greedy_counts``;
- ``cpsat``: the exact model (``cpsat.solve``, hinted with the greedy), its counts then run through
  allocate; gangs allocate still refuses there are served from those counts by the greedy and nodes not
  needed are pruned (the model leaves allocate's order and node choice out);
- ``auto`` (default): the greedy, the exact model's plan, and each peer's nodes completed the same way; the
  plan serving the most gangs, then the cheapest, wins (the greedy's on a tie) — so it is never worse than
  a peer;
- ``seed`` and ``least-waste``: the peers (``peers``) as they are, for comparison.

Every plan reports the gangs it does not serve with a reason (seed 004 §4.3's deadlock first), the
peers' results, and, from the exact model, a proven lower bound on the cost of serving as many gangs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime

from optplan.models.placement import BinpackWeights
from optplan.models.provision import Deadlock, GroupCount, NodeGroup, PeerResult, ProvisionPlan, Unserved
from optplan.models.queues import VCJob
from optplan.models.repack import SolverRecord
from optplan.models.snapshot import Snapshot
from optplan.solvers.core import registry
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.core.planner import Auto, Planner
from optplan.solvers.placement.validate import check_inputs
from optplan.solvers.provision.greedy import GreedyProvisioner, greedy_counts
from optplan.solvers.provision.nodes import Counts
from optplan.solvers.provision.problem import HEURISTIC, ExactResult, Outcome, Problem, ProvisionResult, deadlocks
from optplan.solvers.provision.validate import validate_provision

log = logging.getLogger(__name__)

PEERS = ("seed", "least-waste")
DEFAULT_RESOURCE = "nvidia.com/gpu"


def rank(out: Outcome) -> tuple[int, int]:
    """Most gangs served, then the least cost."""
    return (-len(out.served), out.cost)


def peer_result(problem: Problem, name: str, resource: str, threshold: int | None,
                options: PlanOptions) -> ProvisionResult:
    peer = registry.load("provision", name)
    return (peer(resource, threshold) if name == "seed" else peer()).plan(problem, options)


class Completed(Planner[Problem, ProvisionResult]):
    """The exact side of ``cpsat`` and ``auto``: the exact model hinted with the greedy's plan, its counts
    completed by the greedy (gangs allocate still refuses there; the model leaves allocate's order and node
    choice out), and — for ``auto`` — each peer's nodes completed the same way; the best by ``rank`` (the
    first on a tie). The result carries the exact model's answer for its bound."""

    name = "cpsat"

    def __init__(self, skip: frozenset[str], peers: Mapping[str, Counts]) -> None:
        self.skip, self.peers = skip, peers

    def plan(self, problem: Problem, options: PlanOptions, hint: ProvisionResult | None = None) -> ProvisionResult:
        solved = registry.load("provision", "cpsat")().plan(problem, options, hint)  # OR-Tools, loaded here
        exact = solved.exact
        assert exact is not None
        found = (problem.evaluate(greedy_counts(problem, start=exact.counts, skip=self.skip))
                 if exact.objective is not None or hint is None else hint.outcome)
        candidates = [found] + [problem.evaluate(greedy_counts(problem, start=c, skip=self.skip))
                                for c in self.peers.values()]
        best = min(candidates, key=rank)
        return ProvisionResult(best, exact_record(self.name, exact, best), exact)


class AutoProvisioner(Auto[Problem, ProvisionResult]):
    """``cpsat`` and ``auto`` as ``core.planner.Auto`` composes them: the greedy to its end, then ``Completed``
    hinted with it; the better by ``rank`` wins — the greedy's on a tie for ``auto`` (``with_peers``), the
    exact's for ``cpsat``. The kept plan keeps the exact model's answer, whose bound it reports."""

    def __init__(self, skip: frozenset[str] = frozenset(), peers: Mapping[str, Counts] | None = None, *,
                 with_peers: bool = True) -> None:
        super().__init__(GreedyProvisioner(skip), Completed(skip, peers if with_peers and peers else {}),
                         lambda _p, r: tuple(-x for x in rank(r.outcome)))
        self.ties_to_greedy = with_peers

    def keep_greedy(self, problem: Problem, greedy: ProvisionResult, exact: ProvisionResult, *,
                    tie: bool) -> ProvisionResult:
        kept = super().keep_greedy(problem, greedy, exact, tie=tie)
        return replace(kept, exact=exact.exact)


def plan_provision(snap: Snapshot, jobs: Sequence[VCJob], groups: Sequence[NodeGroup], solver: str = "auto",
                   options: PlanOptions | None = None, *, weights: BinpackWeights | None = None,
                   resource: str = DEFAULT_RESOURCE, threshold: int | None = None,
                   now: datetime | None = None) -> ProvisionPlan:
    """Plan the nodes to add (module docstring); the plan passes ``validate_provision`` first.
    ``resource`` and ``threshold``: the seed formula's resource and its daily rule's threshold."""
    if solver not in registry.names("provision"):
        raise ValueError(registry.unknown_message(solver, registry.names("provision")))
    check_inputs(snap, jobs)
    options = options or PlanOptions()
    t0 = time.perf_counter()
    problem = Problem(snap, list(jobs), list(groups), weights or BinpackWeights(), now)
    base = problem.evaluate({})
    dead = deadlocks(problem, [j for j in problem.jobs if j.key not in base.served])
    skip = frozenset(d.job for d in dead)
    peers = {name: peer_result(problem, name, resource, threshold, options).outcome.counts for name in PEERS}
    result: ProvisionResult
    if solver in PEERS:
        result = ProvisionResult(problem.evaluate(peers[solver]), SolverRecord(name=solver, status=HEURISTIC))
    elif solver == "greedy":
        result = GreedyProvisioner(skip).plan(problem, options)
    else:
        result = AutoProvisioner(skip, peers, with_peers=solver == "auto").plan(problem, options)
    chosen, exact = result.outcome, result.exact
    record = SolverRecord(name=solver, status=HEURISTIC)
    if exact is not None:
        record = exact_record(solver, exact, chosen)
        if record.status != "OPTIMAL" and exact.objective is not None:
            # the model served more than allocate does: bound the cost of serving as many as the plan
            again = registry.load("provision", "cpsat")().plan(problem, options, result, at_least=len(chosen.served))
            assert again.exact is not None
            record = max(record, exact_record(solver, again.exact, chosen), key=lambda r: r.best_bound or 0)
    wall = round(time.perf_counter() - t0, 3)
    plan = build_plan(problem, chosen, dead, peers, record.model_copy(update={"wall_seconds": wall}))
    validate_provision(snap, problem.jobs, problem.groups, plan)
    log.info("provision %s: %d of %d gangs served at cost %d (%d allocate runs)", solver, len(plan.served),
             len(problem.jobs), plan.cost, problem.evaluations)
    return plan


def exact_record(name: str, exact: ExactResult, chosen: Outcome) -> SolverRecord:
    """The exact model's bound as a bound on the cost of serving as many gangs as ``chosen``: its bound
    on Σ unserved × big + cost, less big × the chosen plan's unserved."""
    if exact.bound is None:
        return SolverRecord(name=name, status="FEASIBLE" if exact.status != "INFEASIBLE" else "FALLBACK")
    unserved = sum(1 for k in exact.jobs if k not in chosen.served)
    bound = max(exact.bound - exact.big * unserved, 0)
    gap = 0.0 if chosen.cost <= bound else round(100 * (chosen.cost - bound) / chosen.cost, 2)
    status = "OPTIMAL" if chosen.cost <= bound else "FEASIBLE"
    return SolverRecord(name=name, status=status, objective=chosen.cost, best_bound=bound, gap_percent=gap)


def unserved_reason(key: str, dead: Mapping[str, str], most: Outcome) -> str:
    if key in dead:
        return dead[key]
    if key in most.served:
        return "served only with nodes that would make the gangs before it lose theirs"
    return f"not admitted even with every group at maxCount: {most.placement.job(key).reason}"


def build_plan(problem: Problem, out: Outcome, locks: Sequence[Deadlock], peers: Mapping[str, Counts],
               record: SolverRecord) -> ProvisionPlan:
    reasons = {d.job: d.reason for d in locks}
    most = problem.evaluate(problem.max_counts)
    unserved = tuple(Unserved(job=jp.key, queue=jp.queue, reason=unserved_reason(jp.key, reasons, most))
                     for jp in out.placement.jobs if not jp.admitted)
    groups = tuple(GroupCount(name=g.name, count=out.counts.get(g.name, 0), price=g.price, hyper_node=g.hyper_node,
                              nodes=tuple(g.node_name(i) for i in range(out.counts.get(g.name, 0))))
                   for g in problem.groups)
    peer_results = []
    for name, counts in peers.items():
        o = problem.evaluate(counts)
        peer_results.append(PeerResult(name=name, cost=o.cost, nodes={k: n for k, n in o.counts.items() if n},
                                       served=tuple(sorted(o.served))))
    placement = out.placement.model_copy(update={"solver": out.placement.solver.model_copy(
        update={"wall_seconds": None})})
    return ProvisionPlan(groups=groups, served=tuple(sorted(out.served)), unserved=unserved,
                         deadlocks=tuple(locks), placement=placement, peers=tuple(peer_results), solver=record)
