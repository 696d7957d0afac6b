"""validate_plan: a solver-independent re-check of every Repack rule.

It rebuilds the simulated state from the snapshot alone, applies the plan's moves in order and
checks scope, movability, receivers, predicates, cumulative fit, budgets, PDBs, gang accounting
(restart units included), freed nodes and (when given) the status summary arithmetic and each
PodGroup's restart footprint. It shares only the feasibility oracle
and the rule definitions with the planners, never their search code.
"""

from __future__ import annotations

from collections import Counter, defaultdict

from optplan.errors import PlanInvalidError
from optplan.models.quantity import format_milli
from optplan.models.repack import RepackPlan, RepackRun, RepackRunStatus
from optplan.models.snapshot import Snapshot
from optplan.solvers.core.oracle import Capacity, static_reason
from optplan.solvers.repack.frag import FragReport, round_half_up
from optplan.solvers.repack.rules import Disruption, RepackProblem, Weights


def plan_violations(problem: RepackProblem, plan: RepackPlan, *, claimed: Disruption | None = None,
                    status: RepackRunStatus | None = None, frag: FragReport | None = None) -> list[str]:
    """Every rule the plan breaks, as short sentences; empty when the plan is valid."""
    snap = problem.snapshot
    R = problem.resource
    out: list[str] = []
    freed = set(plan.freed_nodes)
    if len(freed) != len(plan.freed_nodes):
        out.append("a node is listed twice in freedNodes")
    seen: set[str] = set()
    moved_from: dict[str, set[str]] = defaultdict(set)
    moved = []
    for m in plan.moves:
        pod = snap.pods.get(m.pod)
        if pod is None:
            out.append(f"move of unknown pod {m.pod}")
            continue
        if m.pod in seen:
            out.append(f"pod {m.pod} moves twice")
        seen.add(m.pod)
        if pod.node_name != m.from_node or not pod.occupying:
            out.append(f"pod {m.pod} is not running on {m.from_node}")
            continue
        if problem.request(pod) <= 0:
            out.append(f"pod {m.pod} does not request {R} and must not move")
        block = problem.pod_block(pod)
        if block is not None:
            out.append(f"pod {m.pod} is not movable: {block}")
        if m.from_node not in freed:
            out.append(f"pod {m.pod} moves off {m.from_node}, which is not vacated")
        if m.to_node not in snap.nodes:
            out.append(f"pod {m.pod} moves to unknown node {m.to_node}")
            continue
        moved_from[m.from_node].add(m.pod)
        moved.append(pod)
    for node in sorted(freed):
        if node not in snap.nodes:
            out.append(f"freed node {node} is not in the snapshot")
            continue
        if node not in problem.occupied:
            out.append(f"freed node {node} is not an occupied provider of {R}")
            continue
        if not problem.node_in_scope(node):
            out.append(f"freed node {node} is outside scope.nodes")
        left = [p.key for p in problem.r_pods[node] if p.key not in moved_from[node]]
        if left:
            out.append(f"freed node {node} still holds {R} pods: {', '.join(left[:3])}")
    # Receivers and cumulative fit, in the plan's order.
    cap = Capacity(snap)
    received: set[str] = set()
    for m in plan.moves:
        pod = snap.pods.get(m.pod)
        if pod is None or m.to_node not in snap.nodes or pod.node_name != m.from_node:
            continue
        if m.to_node in freed:
            out.append(f"pod {m.pod} moves to {m.to_node}, a vacated node")
        if m.to_node in problem.idle_providers:
            out.append(f"pod {m.pod} moves to {m.to_node}, whose {R} is entirely idle")
        if m.to_node == m.from_node:
            out.append(f"pod {m.pod} moves to the node it is on")
        reason = static_reason(pod, snap.nodes[m.to_node])
        if reason is not None:
            out.append(f"pod {m.pod} cannot run on {m.to_node}: {reason}")
        cap.remove(pod, m.from_node)
        fit = cap.fit_reason(pod, m.to_node)
        if fit is not None:
            out.append(f"pod {m.pod} does not fit on {m.to_node}: {fit}")
        cap.add(pod, m.to_node)
        received.add(m.to_node)
    # Budgets and PDBs.
    groups = {p.group_key for p in moved}
    mpr = problem.run.spec.max_per_run
    if mpr.pod_groups is not None and len(groups) > mpr.pod_groups:
        out.append(f"maxPerRun.podGroups {mpr.pod_groups} exceeded: {len(groups)} PodGroups affected")
    for r, budget in sorted(mpr.resources.items()):
        used = sum(p.request(r) for p in moved)
        if used > budget:
            out.append(f"maxPerRun.resources[{r}] exceeded: {used}m moved, budget {budget}m")
    pdb_use: Counter[str] = Counter()
    for pod in moved:
        for pdb in snap.pdbs.values():
            if pdb.covers(pod):
                pdb_use[pdb.key] += 1
    for k, n in sorted(pdb_use.items()):
        if n > snap.pdbs[k].disruptions_allowed:
            out.append(f"PodDisruptionBudget {k} allows {snap.pdbs[k].disruptions_allowed} disruptions, plan moves {n}")
    # Network topology: hard PodGroups stay inside one HyperNode of allowed tier.
    dest = {m.pod: m.to_node for m in plan.moves}
    for gk in sorted(g for g in groups if g is not None):
        if gk in problem.hard_topology:
            after = [dest.get(p.key, p.node_name) or "" for p in snap.pods_by_group.get(gk, [])]
            if not problem.hard_topology_holds(gk, after):
                out.append(f"PodGroup {gk} leaves every HyperNode of tier <= {problem.hard_topology[gk]}")
    # Gang accounting and the claimed cost.
    actual = problem.disruption(moved, dest)
    if claimed is not None and claimed != actual:
        out.append(f"claimed disruption {claimed.as_tuple()} differs from recomputed {actual.as_tuple()}")
    if status is not None and frag is not None:
        out.extend(_summary_violations(problem, plan, status, frag, actual))
    return out


def _summary_violations(problem: RepackProblem, plan: RepackPlan, status: RepackRunStatus, frag: FragReport,
                        actual: Disruption) -> list[str]:
    out = []
    s = status.plan.summary
    n_freed = len(plan.freed_nodes)
    if s.freed_node_count != n_freed or list(status.plan.freed_nodes) != sorted(plan.freed_nodes):
        out.append("summary.freedNodeCount or freedNodes disagrees with the plan")
    if s.frag_before_percent != round_half_up(frag.percent()):
        out.append("summary.fragBeforePercent is wrong")
    if s.frag_after_percent != round_half_up(frag.percent(frag.occupied - n_freed)):
        out.append("summary.fragAfterPercent is wrong")
    if s.occupied_nodes_after != frag.occupied - n_freed:
        out.append("summary.occupiedNodesAfter is wrong")
    moved_total = sum(problem.request(problem.snapshot.pods[m.pod]) for m in plan.moves)
    if s.moved_card_count != format_milli(moved_total):
        out.append("summary.movedCardCount is wrong")
    per_move = sum(len(mv.pods) for mv in status.plan.moves)
    if per_move != len(plan.moves):
        out.append("plan.moves lists a different number of pods than the plan moves")
    d = status.plan.disruption
    if (d.affected_pod_groups, d.pod_groups_below_min_available, d.moved_pods, d.topology_widening) != (
            actual.affected_pod_groups, actual.below_min_available, actual.moved_pods, actual.topology_widening):
        out.append("plan.disruption disagrees with the recomputed dimensions")
    out.extend(_footprint_violations(problem, plan, status))
    return out


def _footprint_violations(problem: RepackProblem, plan: RepackPlan, status: RepackRunStatus) -> list[str]:
    """Each PodGroup's footprint lists exactly what its restart policy restarts beyond the moved pods."""
    snap = problem.snapshot
    restarted = problem.restarted(snap.pods[m.pod] for m in plan.moves if m.pod in snap.pods)
    out = []
    for mv in status.plan.moves:
        gk = f"{mv.namespace}/{mv.pod_group_name}"
        r = restarted.get(gk)
        moved = {f"{mv.namespace}/{p.name}" for p in mv.pods}
        extra = sorted(snap.pods[k].name for k in r.pods - moved) if r is not None else []
        fp = mv.footprint
        if not extra:
            if fp is not None:
                out.append(f"PodGroup {gk} lists a restart footprint, but its moves restart nothing else")
        elif fp is None:
            out.append(f"PodGroup {gk} restarts {', '.join(extra[:3])} beyond its moves, and its footprint is missing")
        elif r is not None and (fp.policy, fp.pods, fp.cards, list(fp.pod_names)) != (
                r.policy, len(r.pods), format_milli(r.cards), extra):
            out.append(f"PodGroup {gk}: footprint disagrees with the recomputed restarts")
    return out


def validate_plan(snapshot: Snapshot, run: RepackRun, plan: RepackPlan, *, claimed: Disruption | None = None,
                  status: RepackRunStatus | None = None, frag: FragReport | None = None,
                  weights: Weights | None = None) -> None:
    """Raise PlanInvalidError listing every broken rule; return quietly for a valid plan."""
    problem = RepackProblem(snapshot, run, weights or Weights())
    violations = plan_violations(problem, plan, claimed=claimed, status=status, frag=frag)
    if violations:
        raise PlanInvalidError(violations)
