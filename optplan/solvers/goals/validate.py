"""The goal validator (issue 15 §4): a plan for admit / freeHyperNodes goals re-checked by the two families'
own rules, trusting no planner.

- The moves: every Repack rule family but the vacate goal (``repack.checks``: shape, movability, disruption
  protection, predicates, cumulative fit, budgets, PDBs, topology of the moved PodGroups) and, with a
  planner's claim, its disruption.
- The goals' shape (in place of the vacate goal): no node both loses and receives pods (so the moves run
  in any order); each move is needed (its source hosts an admitted gang's pod, or lies in a freed
  HyperNode); ``freed_nodes`` are exactly the occupied providers the moves leave without R; every named
  gang is listed once, a gang not admitted says why.
- The gangs: the forecast is a placement plan on the snapshot after the moves, checked by the placement
  validator (static predicates, room, queues, gang minimums, network topology), gangs in the plan's order.
- The HyperNodes: each freed one is of the goal's tier and none of its nodes holds an R pod after the
  moves or an R pod of the forecast. A required count out of reach is an outcome (the status says
  RequiredNodeBlocksNotMet), not a broken rule.
"""

from __future__ import annotations

from collections import Counter

from optplan.errors import PlanInvalidError
from optplan.models.goals import GoalPlan
from optplan.models.placement import JobPlacement, PlacementPlan
from optplan.models.repack import SolverRecord
from optplan.models.results import Disruption
from optplan.solvers.goals.problem import GoalProblem, r_nodes
from optplan.solvers.placement.validate import placement_violations
from optplan.solvers.repack.checks import CHECKS, check_disruption, check_goal


def goal_violations(problem: GoalProblem, plan: GoalPlan, *, claimed: Disruption | None = None) -> list[str]:
    """Every rule the plan breaks, as short sentences; empty when it is valid."""
    rp = problem.repack
    moves = plan.repack
    out = [v.message for v in sorted((v for check in CHECKS if check is not check_goal for v in check(rp, moves)),
                                     key=lambda v: v.at)]
    if claimed is not None:
        out += [v.message for v in check_disruption(rp, moves, claimed)]
    snap = problem.snapshot
    R = problem.resource
    sources = {m.from_node for m in moves.moves}
    for node in sorted(sources & {m.to_node for m in moves.moves}):
        out.append(f"node {node} both loses and receives pods")
    # the gangs' forecast, on the snapshot after the moves
    gangs = {g.key: g for g in problem.gangs}
    listed = Counter(a.key for a in plan.admissions)
    for key in sorted(set(listed) - set(gangs)):
        out.append(f"admission of {key}, which is not a named pending gang")
    for key in sorted(set(gangs) - set(listed)):
        out.append(f"gang {key} is missing from the admissions")
    for key, n in sorted(listed.items()):
        if n > 1:
            out.append(f"gang {key} is listed {n} times")
    jps = []
    for a in plan.admissions:
        g = gangs.get(a.key)
        if g is None:
            continue
        if not a.admitted and a.cause is None:
            out.append(f"gang {a.key} is not admitted and names no cause")
        jps.append(JobPlacement(namespace=a.namespace, name=a.name, queue=a.queue, admitted=a.admitted,
                                reason=a.reason or ("admitted" if a.admitted else "not admitted"),
                                hyper_node=a.hyper_node, tier=a.tier, bindings=a.bindings))
    landing = problem.forecast_nodes(plan)
    r_landing = problem.forecast_nodes(plan, requesting_r=True)
    after = problem.after(moves.moves)
    out += placement_violations(after, [g.job for g in problem.gangs],
                                PlacementPlan(jobs=tuple(jps), solver=SolverRecord(name="goals", status="FORECAST")))
    # HyperNodes
    freed_h = set(plan.freed_hyper_nodes)
    hn_nodes: set[str] = set()
    r_after = r_nodes(after, R)
    for h in sorted(freed_h):
        if h not in problem.hyper_nodes:
            tier = problem.free_tier
            out.append(f"freed HyperNode {h} is not a HyperNode of tier {tier}" if tier is not None
                       else f"freed HyperNode {h}, but the run has no freeHyperNodes goal")
            continue
        nodes = problem.hyper_nodes[h]
        hn_nodes |= nodes
        held = sorted(nodes & r_after)
        if held:
            out.append(f"freed HyperNode {h}: node {held[0]} still holds {R} pods")
        landed = sorted(nodes & r_landing)
        if landed:
            out.append(f"freed HyperNode {h}: a gang's {R} pod is forecast on node {landed[0]}")
    # each move is needed
    for m in moves.moves:
        if m.from_node not in landing and m.from_node not in hn_nodes:
            out.append(f"pod {m.pod} moves off {m.from_node}, where no admitted gang lands and no freed "
                       f"HyperNode lies")
    left = {n for n in rp.occupied if n not in r_after}
    if set(moves.freed_nodes) != left:
        out.append(f"freed nodes {sorted(moves.freed_nodes)[:5]} are not the nodes the moves leave without {R}: "
                   f"{sorted(left)[:5]}")
    if snap is not after and not moves.moves:
        out.append("the after-state differs from the snapshot without a move")
    return out


def validate_goal_plan(problem: GoalProblem, plan: GoalPlan, *, claimed: Disruption | None = None) -> None:
    """Raise PlanInvalidError listing every broken rule; return quietly for a valid plan."""
    found = goal_violations(problem, plan, claimed=claimed)
    if found:
        raise PlanInvalidError(found)
