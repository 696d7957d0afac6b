"""Plan a RepackRun end to end: measure, plan, validate, and build the status the seed shows; ``pipeline`` is
that order for every RepackRun family (goals' ``plan_goals`` too)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import replace
from typing import TypeVar

from optplan.errors import InputError
from optplan.models.devices import WHOLE_GPU
from optplan.models.quantity import format_milli
from optplan.models.repack import (
    Condition,
    DisruptionOut,
    Footprint,
    FreedGpusOut,
    MoveOut,
    Owner,
    PlanOut,
    PodMoveOut,
    RepackRun,
    RepackRunStatus,
    ResolvedScope,
    Summary,
    Weights,
)
from optplan.models.results import FragReport, PlanResult, RepackOutcome, Restarted, round_half_up
from optplan.models.snapshot import Snapshot
from optplan.solvers.binpack.devfrag import share_fragmentation
from optplan.solvers.binpack.frag import fragmentation
from optplan.solvers.core.clock import Clock
from optplan.solvers.core.exact import with_overrun
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.core.planner import Planner, Solved
from optplan.solvers.repack.base import get_planner
from optplan.solvers.repack.exact.bound import BOUND_SECONDS, freed_upper
from optplan.solvers.repack.gpus import FreeGpusPlanner
from optplan.solvers.repack.rules import RepackProblem
from optplan.solvers.repack.validate import validate_plan

NO_FRAGMENTATION = "NoFragmentation"
RECOMMENDED = "RepackRecommended"
INSUFFICIENT = "InsufficientImprovement"

P = TypeVar("P")
R = TypeVar("R", bound=Solved)


def plan_repack(snapshot: Snapshot, run: RepackRun, *, solver: str = "greedy",
                options: PlanOptions | None = None, weights: Weights | None = None,
                move_shares: bool = True) -> RepackOutcome:
    """Measure fragmentation, plan with ``solver``, validate, and build the RepackRun status. ``move_shares``
    False: GPU shares stay where they are (``RepackProblem.move_shares``).

    Raises PlanInvalidError if the planner's plan breaks a rule (a bug, never bad input).
    """
    problem = RepackProblem(snapshot, run, weights or Weights(), move_shares=move_shares)
    gpus = run.spec.goal.free_gpus
    if gpus is not None:
        check_free_gpus_input(problem)

    def bound(frag: FragReport, clock: Clock, limit: float) -> None:
        # occupied − theoretical minimum, the budgets' count and the pool bound (``bound``), each valid alone
        problem.freed_upper = freed_upper(problem, frag, clock=clock, limit=min(BOUND_SECONDS, limit / 10))

    def finish(result: PlanResult, frag: FragReport) -> RepackOutcome:
        if gpus is not None:
            reason, message = gpus_outcome(problem, result)
        else:
            reason, message = outcome(problem, frag, len(result.plan.freed_nodes), result.record.freed_nodes_bound)
        status = build_status(problem, result, frag, reason, message)
        validate_plan(snapshot, run, result.plan, claimed=result.disruption, status=status, frag=frag,
                      weights=problem.weights, move_shares=move_shares)
        return RepackOutcome(run=run, status=status, result=result, frag=frag, reason=reason)

    def planner() -> Planner[RepackProblem, PlanResult]:
        if gpus is not None:
            return FreeGpusPlanner(solver, exact=solver not in ("greedy", "greedy-fast"))
        return get_planner(solver)

    return pipeline(snapshot, problem, planner, options, resource=problem.resource,
                    frag_part=3, bound=bound, finish=finish, shares=problem.shares_move)


def check_free_gpus_input(problem: RepackProblem) -> None:
    """A ``freeGpus`` goal needs ``nvidia.com/gpu`` and nodes that list their GPUs: else bad input."""
    field = "spec.goals[0].freeGpus"
    obj = f"RepackRun/{problem.run.name}"
    if problem.resource != WHOLE_GPU:
        raise InputError(f"freeGpus frees whole {WHOLE_GPU} cards, not {problem.resource}", obj=obj, field=field)
    if not any(n.devices for n in problem.snapshot.nodes.values()):
        raise InputError("freeGpus needs nodes that list their GPU devices (volcano.sh/node-vgpu-register or "
                         "the gpushare plugin's annotations); this snapshot has none", obj=obj, field=field)


def gpus_outcome(problem: RepackProblem, result: PlanResult) -> tuple[str, str]:
    """A ``freeGpus`` run's outcome: RepackRecommended when its node keeps the GPUs free after the plan, else
    InsufficientImprovement (proven when the exact planner says OPTIMAL)."""
    goal = problem.free_gpus
    assert goal is not None
    what = f"{goal.count} whole GPU(s)" + (f" of model {goal.model}" if goal.model else "")
    after = problem.gpus_after(result.plan)
    if after is not None and len(after[1]) >= goal.count:
        node, devices = after
        moved = f"moving {len(result.plan.moves)} pod(s)" if result.plan.moves else "already, moving nothing"
        return RECOMMENDED, f"{what} free on {node} (devices {', '.join(map(str, devices))}), {moved}"
    if result.record.status == "OPTIMAL":
        return INSUFFICIENT, f"no node can have {what} freed within scope, budgets and scheduling constraints"
    return INSUFFICIENT, f"no plan leaving {what} free on one node was found within the time limit"


def pipeline(snapshot: Snapshot, problem: P, planner: Callable[[], Planner[P, R]], options: PlanOptions | None, *,
             resource: str, frag_part: int, bound: Callable[[FragReport, Clock, float], None],
             finish: Callable[[R, FragReport], RepackOutcome], shares: bool = False) -> RepackOutcome:
    """What every RepackRun family does around its planner (``plan_repack``, ``plan_goals``): start the run's
    clock, measure fragmentation (with 1/``frag_part`` of the limit), set the family's freed-node ``bound``, plan
    with the time left (a tenth of the limit is kept for status and validation), say in the record when the run
    went past its limit, then ``finish``: the family's validation and status. With ``shares`` (GPU shares are
    Repack pods, ``RepackProblem.shares_move``) the metric counts them (``devfrag.share_fragmentation``)."""
    options = options or PlanOptions()
    clock = Clock(options.deterministic, options.time_limit)
    options = replace(options, clock=clock)
    measure = share_fragmentation if shares else fragmentation
    frag = measure(snapshot, resource, time_limit=options.time_limit / frag_part, workers=options.workers,
                   clock=clock)
    bound(frag, clock, options.time_limit)
    # The metric's time comes out of the planner's budget; a tenth is kept for status and validation.
    left = max(options.time_limit * 0.9 - clock.now(), min(1.0, options.time_limit))
    result = planner().plan(problem, replace(options, time_limit=left))
    result = result.with_record(with_overrun(result.record, clock, options.time_limit))
    return finish(result, frag)


def outcome(problem: RepackProblem, frag: FragReport, freed: int, bound: int | None = None) -> tuple[str, str]:
    """The seed's three outcomes, decided in exact arithmetic. "No node can be freed" is said only when it is
    proven: the freed-node bound (``problem.freed_upper``) or the planner's (``bound``) is 0; else the message
    says that no plan freeing a node was found, and how many a plan might free."""
    before = frag.percent()
    if frag.warning is not None:
        return NO_FRAGMENTATION, frag.warning
    if before == 0:
        return NO_FRAGMENTATION, f"{problem.resource} is packed as tightly as possible"
    improvement = before - frag.percent(frag.occupied - freed)
    need = problem.run.spec.goal.min_improvement
    pts = f"{float(improvement):.2f}".rstrip("0").rstrip(".")
    if freed >= 1 and improvement >= need:
        return RECOMMENDED, (f"freeing {freed} node(s) improves fragmentation by {pts} points "
                             f"(required {need})")
    if freed == 0:
        most = min((b for b in (problem.freed_upper, bound) if b is not None), default=None)
        if most is not None and most <= 0:
            return INSUFFICIENT, "no node can be freed within scope, budgets and scheduling constraints"
        at_most = f" (at most {most} node(s) can be freed)" if most is not None else ""
        return INSUFFICIENT, f"no plan freeing a node was found within the time limit; not proven impossible{at_most}"
    return INSUFFICIENT, f"best plan improves fragmentation by {pts} points, below the required {need}"


def footprint_out(problem: RepackProblem, restarted: Restarted | None, moved: set[str]) -> Footprint | None:
    """A PodGroup's restart footprint when its restart policy restarts more than the moved pods."""
    if restarted is None or restarted.policy is None or not restarted.pods - moved:
        return None
    return Footprint(policy=restarted.policy, pods=len(restarted.pods), cards=format_milli(restarted.cards),
                     pod_names=tuple(sorted(problem.snapshot.pods[k].name for k in restarted.pods - moved)))


def build_status(problem: RepackProblem, result: PlanResult, frag: FragReport, reason: str,
                 message: str) -> RepackRunStatus:
    snap = problem.snapshot
    plan = result.plan
    by_group: dict[tuple[str, str], list[PodMoveOut]] = defaultdict(list)
    cards: dict[tuple[str, str], int] = defaultdict(int)
    for m in plan.moves:
        pod = snap.pods[m.pod]
        key = (pod.namespace, pod.group_name or "")
        req = problem.request(pod)
        by_group[key].append(PodMoveOut(name=pod.name, from_node=m.from_node, to_node=m.to_node,
                                        cards=format_milli(req), to_devices=m.to_devices))
        cards[key] += req
    restarted = problem.restarted(snap.pods[m.pod] for m in plan.moves)
    moves = []
    for (ns, group), pods in sorted(by_group.items()):
        pg = snap.pod_groups.get(f"{ns}/{group}")
        ref = pg.owner if pg is not None else None
        owner = Owner(api_version=ref.api_version, kind=ref.kind, name=ref.name) if ref is not None else None
        moves.append(MoveOut(namespace=ns, pod_group_name=group, owner=owner,
                             cards=format_milli(cards[(ns, group)]),
                             pods=tuple(sorted(pods, key=lambda p: p.name)),
                             footprint=footprint_out(problem, restarted.get(f"{ns}/{group}"),
                                                     {f"{ns}/{p.name}" for p in pods})))
    n_freed = len(plan.freed_nodes)
    d = result.disruption
    summary = Summary(
        frag_before_percent=round_half_up(frag.percent()),
        frag_after_percent=round_half_up(frag.percent(frag.occupied - n_freed)),
        freed_node_count=n_freed, moved_card_count=format_milli(d.moved_cards),
        resolved_scope=ResolvedScope(pod_group_count=problem.resolved_pod_group_count,
                                     node_count=problem.resolved_node_count),
        provider_node_count=frag.providers, occupied_nodes_before=frag.occupied,
        occupied_nodes_after=frag.occupied - n_freed, theoretical_min_nodes=frag.theoretical_min,
        theoretical_min_proven=frag.proven)
    if problem.free_gpus is not None and (after := problem.gpus_after(plan)) is not None:
        summary = summary.model_copy(update={"freed_gpus": FreedGpusOut(
            node=after[0], model=problem.gpu_model_of(after[0]) or "", devices=after[1])})
    disruption = DisruptionOut(affected_pod_groups=d.affected_pod_groups,
                               pod_groups_below_min_available=d.below_min_available,
                               affected_cards=format_milli(d.affected_cards),
                               moved_cards=format_milli(d.moved_cards), moved_pods=d.moved_pods,
                               topology_widening=d.topology_widening)
    return RepackRunStatus(
        phase="Succeeded",
        conditions=(Condition(type="Complete", status="True", reason=reason, message=message),),
        plan=PlanOut(summary=summary, moves=tuple(moves), freed_nodes=plan.freed_nodes,
                     disruption=disruption, solver=result.record))
