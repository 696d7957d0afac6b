"""The Repack rules as checks: one ``check_<family>(problem, plan)`` per rule family, each returning the
violations of its family. ``validate`` runs them all; the tests call each one directly; the greedy's
incremental bookkeeping is tested against them.

Families (seed 000 and ``rules``):

- ``check_plan_shape``: the plan names known pods and nodes, moves each pod once, from where it runs,
  and lists each freed node once;
- ``check_movability``: scope and movability — only R-requesting pods that ``rules`` lets move
  (Running, Volcano-scheduled, with a PodGroup in ``scope.podGroups``, topology satisfied), off nodes in
  ``scope.nodes``;
- ``check_disruption_protection``: no protected pod moves, nor a pod whose eviction restarts one;
- ``check_goal``: the vacate goal — a pod moves only off a freed node, a freed node is an occupied
  provider left with no R pod, and a pod lands on a node that stays occupied (not freed, not entirely
  idle, not its own);
- ``check_free_gpus``: a ``freeGpus`` run's plan moves pods off one of the goal's target nodes only, and
  vacates none;
- ``check_predicates``: every receiver passes the static predicates (the oracle's ``Predicates``);
- ``check_fit``: every resource, the pod count and the GPU devices (a moved share on the devices its move
  names) fit on every receiver, moves applied in the plan's order;
- ``check_budgets``: ``maxPerRun.podGroups`` and ``maxPerRun.resources``;
- ``check_pdbs``: no PodDisruptionBudget loses more pods than it allows;
- ``check_topology``: a hard-topology PodGroup stays inside one HyperNode of allowed tier;
- ``check_disruption`` (gangs and restart units) and ``check_status`` (the status' arithmetic and each
  PodGroup's restart footprint) also take what a planner claims.

A pod that cannot move is reported once, under the first reason ``RepackProblem.pod_block`` gives.
Each violation carries where the validator reports it (``Violation.at``), so the validator's sentences
come out in one order whatever the order of the families: plan-wide first, then each move in the plan's
order, each freed node by name, each receiver in the plan's order, then budgets, PDBs, topology, claims.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from optplan.models.quantity import format_milli
from optplan.models.repack import PodMove, RepackPlan, RepackRunStatus
from optplan.models.results import Disruption, FragReport, round_half_up
from optplan.models.snapshot import Pod
from optplan.solvers.core.oracle import Capacity, Predicates
from optplan.solvers.repack.rules import DISRUPTION_PROTECTED, PDBS, POD_GROUPS, RESOURCES, RepackProblem

# Where a violation is reported (``Violation.at[0]``): the validator's passes, in order.
PLAN, MOVE, FREED, RECEIVER, BUDGET, PDB, TOPOLOGY, CLAIM, STATUS = range(9)


@dataclass(frozen=True)
class Violation:
    """One broken rule, as a short sentence."""

    at: tuple[int, int, int]
    """(pass, position, rule): the pass (``MOVE``, ``FREED``, ...), the move's index in the plan or the
    freed node's rank by name, and the rule's rank within that position."""
    message: str


@dataclass
class PlanRead:
    """A plan's moves as every check reads them."""

    pods: list[Pod | None]
    """Per move, the pod it names (None when the snapshot has no such pod)."""
    on_node: list[bool]
    """Per move, whether its pod is an occupying pod on the node it moves from."""
    moved: list[Pod] = field(default_factory=list)
    """Pods of the moves that are read as moves (known pod on its node, known receiver), in plan order
    (a pod moved twice is listed twice)."""
    moved_from: dict[str, set[str]] = field(default_factory=dict)
    """Node -> keys of the pods ``moved`` takes off it."""
    freed: list[str] = field(default_factory=list)
    """The freed nodes, each once, by name."""
    dest: dict[str, str] = field(default_factory=dict)
    """Pod key -> receiver, every move."""


def read_plan(problem: RepackProblem, plan: RepackPlan) -> PlanRead:
    snap = problem.snapshot
    pods = [snap.pods.get(m.pod) for m in plan.moves]
    on_node = [p is not None and p.node_name == m.from_node and p.occupying
               for p, m in zip(pods, plan.moves, strict=True)]
    read = PlanRead(pods=pods, on_node=on_node, freed=sorted(set(plan.freed_nodes)),
                    dest={m.pod: m.to_node for m in plan.moves})
    for pod, ok, m in zip(pods, on_node, plan.moves, strict=True):
        if ok and pod is not None and m.to_node in snap.nodes:
            read.moved.append(pod)
            read.moved_from.setdefault(m.from_node, set()).add(m.pod)
    return read


def _moves_on_node(read: PlanRead, plan: RepackPlan) -> list[tuple[int, PodMove, Pod]]:
    return [(i, m, pod) for i, (m, pod, ok) in enumerate(zip(plan.moves, read.pods, read.on_node, strict=True))
            if ok and pod is not None]


def _received(problem: RepackProblem, read: PlanRead, plan: RepackPlan) -> list[tuple[int, PodMove, Pod]]:
    """Moves the receiver rules read: a known pod, on the node it moves from, to a known node."""
    nodes = problem.snapshot.nodes
    return [(i, m, pod) for i, (m, pod) in enumerate(zip(plan.moves, read.pods, strict=True))
            if pod is not None and m.to_node in nodes and pod.node_name == m.from_node]


# ---- the families ---------------------------------------------------------------------------------------

def check_plan_shape(problem: RepackProblem, plan: RepackPlan) -> list[Violation]:
    snap = problem.snapshot
    read = read_plan(problem, plan)
    out = []
    if len(read.freed) != len(plan.freed_nodes):
        out.append(Violation((PLAN, 0, 0), "a node is listed twice in freedNodes"))
    seen: set[str] = set()
    for i, (m, pod, ok) in enumerate(zip(plan.moves, read.pods, read.on_node, strict=True)):
        if pod is None:
            out.append(Violation((MOVE, i, 0), f"move of unknown pod {m.pod}"))
            continue
        if m.pod in seen:
            out.append(Violation((MOVE, i, 1), f"pod {m.pod} moves twice"))
        seen.add(m.pod)
        if not ok:
            out.append(Violation((MOVE, i, 2), f"pod {m.pod} is not running on {m.from_node}"))
        elif m.to_node not in snap.nodes:
            out.append(Violation((MOVE, i, 6), f"pod {m.pod} moves to unknown node {m.to_node}"))
    for j, node in enumerate(read.freed):
        if node not in snap.nodes:
            out.append(Violation((FREED, j, 0), f"freed node {node} is not in the snapshot"))
    return out


def check_movability(problem: RepackProblem, plan: RepackPlan) -> list[Violation]:
    read = read_plan(problem, plan)
    out = []
    for i, m, pod in _moves_on_node(read, plan):
        if problem.request(pod) <= 0:
            out.append(Violation((MOVE, i, 3), f"pod {m.pod} does not request {problem.resource} and must not move"))
        block = problem.pod_block(pod)
        if block is not None and block != DISRUPTION_PROTECTED:
            out.append(Violation((MOVE, i, 4), f"pod {m.pod} is not movable: {block}"))
    for j, node in enumerate(read.freed):
        if node in problem.occupied and not problem.node_in_scope(node):
            out.append(Violation((FREED, j, 2), f"freed node {node} is outside scope.nodes"))
    return out


def check_disruption_protection(problem: RepackProblem, plan: RepackPlan) -> list[Violation]:
    read = read_plan(problem, plan)
    return [Violation((MOVE, i, 4), f"pod {m.pod} is not movable: {DISRUPTION_PROTECTED}")
            for i, m, pod in _moves_on_node(read, plan) if problem.pod_block(pod) == DISRUPTION_PROTECTED]


def check_goal(problem: RepackProblem, plan: RepackPlan) -> list[Violation]:
    snap = problem.snapshot
    R = problem.resource
    read = read_plan(problem, plan)
    freed = set(read.freed)
    out = []
    for i, m, _ in _moves_on_node(read, plan):
        if m.from_node not in freed and problem.free_gpus is None:  # freeGpus: ``check_free_gpus``
            out.append(Violation((MOVE, i, 5), f"pod {m.pod} moves off {m.from_node}, which is not vacated"))
    for j, node in enumerate(read.freed):
        if node not in snap.nodes:
            continue
        if node not in problem.occupied:
            out.append(Violation((FREED, j, 1), f"freed node {node} is not an occupied provider of {R}"))
            continue
        left = [p.key for p in problem.r_pods[node] if p.key not in read.moved_from.get(node, set())]
        if left:
            out.append(Violation((FREED, j, 3), f"freed node {node} still holds {R} pods: {', '.join(left[:3])}"))
        if node in problem.share_nodes:  # shares that do not move (``RepackProblem.move_shares`` False)
            out.append(Violation((FREED, j, 4), f"freed node {node} still holds GPU shares"))
    for i, m, _ in _received(problem, read, plan):
        if m.to_node in freed:
            out.append(Violation((RECEIVER, i, 0), f"pod {m.pod} moves to {m.to_node}, a vacated node"))
        if m.to_node in problem.idle_providers:
            out.append(Violation((RECEIVER, i, 1), f"pod {m.pod} moves to {m.to_node}, whose {R} is entirely idle"))
        if m.to_node == m.from_node:
            out.append(Violation((RECEIVER, i, 2), f"pod {m.pod} moves to the node it is on"))
    return out


def check_free_gpus(problem: RepackProblem, plan: RepackPlan) -> list[Violation]:
    """A ``freeGpus`` run's plan vacates no node and moves pods off one node only, a target of the goal
    (``RepackProblem.gpu_targets``). Whether it leaves the goal's GPUs free is its outcome, not a rule."""
    if problem.free_gpus is None:
        return []
    out = []
    if plan.freed_nodes:
        out.append(Violation((PLAN, 0, 1), "a freeGpus plan vacates no node"))
    read = read_plan(problem, plan)
    first = next((m.from_node for _, m, _ in _moves_on_node(read, plan)), None)
    for i, m, _ in _moves_on_node(read, plan):
        if m.from_node != first:
            out.append(Violation((MOVE, i, 5), f"pod {m.pod} moves off {m.from_node}: a freeGpus plan moves pods "
                                               f"off one node ({first})"))
        elif m.from_node not in problem.gpu_targets:
            out.append(Violation((MOVE, i, 5), f"pod {m.pod} moves off {m.from_node}, which cannot hold "
                                               f"{problem.free_gpus.count} GPUs of the goal's model"))
    return out


def check_predicates(problem: RepackProblem, plan: RepackPlan) -> list[Violation]:
    predicates = Predicates(problem.snapshot)
    out = []
    for i, m, pod in _received(problem, read_plan(problem, plan), plan):
        reason = predicates.reason(pod, m.to_node)
        if reason is not None:
            out.append(Violation((RECEIVER, i, 3), f"pod {m.pod} cannot run on {m.to_node}: {reason}"))
    return out


def check_fit(problem: RepackProblem, plan: RepackPlan) -> list[Violation]:
    """Cumulative fit: the moves are applied one by one, in the plan's order; at device level the oracle's
    (``Capacity``), a move that names its devices (``PodMove.to_devices``) on exactly those. When some move
    names devices, those moves are applied first: a whole-card pod takes any untouched devices, so the
    devices a share is given must not be taken from it by the order of the plan's list."""
    cap = Capacity(problem.snapshot)
    out = []
    received = _received(problem, read_plan(problem, plan), plan)
    if any(m.to_devices is not None for _, m, _ in received):
        received.sort(key=lambda imp: (imp[1].to_devices is None, imp[0]))
    for i, m, pod in received:
        if m.to_devices is not None and pod.gpu_share is None:
            out.append(Violation((RECEIVER, i, 4), f"pod {m.pod} names devices but holds no GPU share"))
        cap.remove(pod, m.from_node)
        fit = cap.fit_reason(pod, m.to_node, m.to_devices)
        if fit is not None:
            out.append(Violation((RECEIVER, i, 4), f"pod {m.pod} does not fit on {m.to_node}: {fit}"))
        cap.add(pod, m.to_node, m.to_devices)
    return out


def check_budgets(problem: RepackProblem, plan: RepackPlan) -> list[Violation]:
    over = problem.overruns(read_plan(problem, plan).moved)
    resources = list(problem.budgets.resources)
    out = []
    for o in over:
        if o.kind == POD_GROUPS:
            out.append(Violation((BUDGET, 0, 0), f"{o.budget} {o.limit} exceeded: {o.used} PodGroups affected"))
        elif o.kind == RESOURCES:
            out.append(Violation((BUDGET, 1 + resources.index(o.key), 0),
                                 f"{o.budget} exceeded: {o.used}m moved, budget {o.limit}m"))
    return out


def check_pdbs(problem: RepackProblem, plan: RepackPlan) -> list[Violation]:
    over = [o for o in problem.overruns(read_plan(problem, plan).moved) if o.kind == PDBS]
    return [Violation((PDB, j, 0), f"{o.budget} allows {o.limit} disruptions, plan moves {o.used}")
            for j, o in enumerate(over)]


def check_topology(problem: RepackProblem, plan: RepackPlan) -> list[Violation]:
    read = read_plan(problem, plan)
    pods_by_group = problem.snapshot.pods_by_group
    out = []
    for j, gk in enumerate(sorted({p.group_key for p in read.moved if p.group_key is not None})):
        if gk in problem.hard_topology:
            after = [read.dest.get(p.key, p.node_name) or "" for p in pods_by_group.get(gk, [])]
            if not problem.hard_topology_holds(gk, after):
                out.append(Violation((TOPOLOGY, j, 0),
                                     f"PodGroup {gk} leaves every HyperNode of tier <= {problem.hard_topology[gk]}"))
    return out


CHECKS: tuple[Callable[[RepackProblem, RepackPlan], list[Violation]], ...] = (
    check_plan_shape, check_movability, check_disruption_protection, check_goal, check_free_gpus, check_predicates,
    check_fit, check_budgets, check_pdbs, check_topology)
"""Every family a plan alone can break; ``validate`` runs them all."""


# ---- what a planner claims about its plan ---------------------------------------------------------------

def recomputed_disruption(problem: RepackProblem, plan: RepackPlan) -> Disruption:
    """The plan's disruption from its readable moves (gangs and restart units counted, ``rules``)."""
    read = read_plan(problem, plan)
    return problem.disruption(read.moved, read.dest)


def check_disruption(problem: RepackProblem, plan: RepackPlan, claimed: Disruption) -> list[Violation]:
    """Gangs and restart units: the disruption a planner claims is the one ``rules`` recomputes."""
    actual = recomputed_disruption(problem, plan)
    if claimed == actual:
        return []
    return [Violation((CLAIM, 0, 0), f"claimed disruption {claimed.as_tuple()} differs from recomputed "
                                     f"{actual.as_tuple()}")]


def check_status(problem: RepackProblem, plan: RepackPlan, status: RepackRunStatus, frag: FragReport
                 ) -> list[Violation]:
    """The status' summary arithmetic and each PodGroup's restart footprint agree with the plan."""
    actual = recomputed_disruption(problem, plan)
    messages = _summary_violations(problem, plan, status, frag, actual) + _footprint_violations(problem, plan, status)
    return [Violation((STATUS, k, 0), msg) for k, msg in enumerate(messages)]


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
    if s.occupied_nodes_after < 0:  # the metric did not count a freed node as occupied (its pods were not R's)
        out.append(f"summary.occupiedNodesAfter is {s.occupied_nodes_after}: {n_freed} freed of "
                   f"{frag.occupied} occupied")
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
