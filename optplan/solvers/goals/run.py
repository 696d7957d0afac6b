"""Plan a RepackRun with goals end to end: resolve the goals, plan (``AutoGoalPlanner``, registered as ``auto``:
``core.planner.Auto`` of the greedy and the joint CP-SAT model hinted with it, the better plan by
``GoalProblem.score``) in Repack's ``pipeline``, validate with the goal validator, and build the status: the
seed's status of the moves, with ``plan.goals`` and a ``GoalsMet`` condition added.

``plan_run`` is the one entry for every RepackRun: without goals it is the seed's ``plan_repack``,
unchanged.

Conditions. ``Complete`` keeps the seed's reasons, read for goals: RepackRecommended when the plan has moves
and meets what it can (the controller executes only that), InsufficientImprovement when no move is needed
or none helps (``minFragImprovementPercent`` is not read with goals). ``GoalsMet``: True when every named
gang is admitted and a required HyperNode count is met; else False with reason RequiredNodeBlocksNotMet (the
required count cannot be met: the plan shows what can be freed, and Complete says InsufficientImprovement, so an
Execute does not carry it out) or
PendingJobNotAdmittable (some gang cannot be admitted; the message names each with its cause).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace

from optplan.errors import InputError, PlanInvalidError
from optplan.models.goals import (
    BLOCKS_NOT_MET,
    GOALS_MET,
    NOT_ADMITTABLE,
    GoalPlan,
    GoalPlanOut,
    GoalRunStatus,
    GoalsOut,
)
from optplan.models.repack import Condition, HyperNodeTierOut, RepackRun, RepackRunStatus, Weights
from optplan.models.results import FragReport, PlanResult, RepackOutcome
from optplan.models.schedconf import SchedulerConf
from optplan.models.snapshot import Snapshot
from optplan.solvers.core import registry
from optplan.solvers.core.clock import Clock
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.core.planner import Auto
from optplan.solvers.goals.problem import GoalPlanner, GoalProblem, GoalResult, moved, r_nodes
from optplan.solvers.goals.resolve import resolve_goals
from optplan.solvers.goals.validate import validate_goal_plan
from optplan.solvers.placement.jobs import jobs_to_place
from optplan.solvers.placement.pending import FITS, FRAGMENTATION, PendingGang, pending_gangs
from optplan.solvers.repack.checks import check_status
from optplan.solvers.repack.run import INSUFFICIENT, RECOMMENDED, build_status, pipeline, plan_repack

FAMILY = "goals"

log = logging.getLogger(__name__)


def planner_names() -> list[str]:
    return sorted(registry.names(FAMILY))


def plan_run(snapshot: Snapshot, run: RepackRun, *, solver: str = registry.DEFAULT,
             options: PlanOptions | None = None, weights: Weights | None = None,
             file: str | None = None, scheduler: SchedulerConf | None = None,
             judge_all: bool = True) -> RepackOutcome:
    """Plan any RepackRun: the goals' planners when it has goals (``scheduler``: the vc-scheduler
    configuration their placements follow; ``judge_all``: ``GoalProblem``'s), else the seed's Repack."""
    if run.spec.has_purpose:
        return plan_goals(snapshot, run, solver=solver, options=options, weights=weights, file=file,
                          scheduler=scheduler, judge_all=judge_all)
    if solver not in registry.names("repack"):
        raise InputError(f"solver {solver} plans only admit / freeHyperNodes goals; this run has none",
                         file=file, obj=f"RepackRun {run.name}", field="--solver")
    return with_counts(snapshot, plan_repack(snapshot, run, solver=solver, options=options, weights=weights),
                       scheduler)


def get_goal_planner(name: str) -> GoalPlanner:
    planner: GoalPlanner = registry.load(FAMILY, name)()
    return planner


class AutoGoalPlanner(Auto[GoalProblem, GoalResult]):
    """The greedy, then the joint CP-SAT model hinted with it when at least ``min_left`` seconds are left; the
    better plan by ``GoalProblem.score`` wins (``core.planner.Auto``)."""

    min_left = 0.5

    def __init__(self) -> None:
        super().__init__(get_goal_planner("greedy"), get_goal_planner("cpsat"),
                         lambda problem, result: problem.score(result.plan, result.disruption))


def plan_goals(snapshot: Snapshot, run: RepackRun, *, solver: str = registry.DEFAULT,
               options: PlanOptions | None = None, weights: Weights | None = None,
               file: str | None = None, scheduler: SchedulerConf | None = None,
               judge_all: bool = True) -> RepackOutcome:
    """Resolve the goals (bad goals: InputError), plan, validate and build the status (``judge_all``:
    ``GoalProblem``'s)."""
    if solver not in registry.names(FAMILY):
        raise InputError(f"solver {solver} does not plan admit / freeHyperNodes goals; choose from "
                         f"{', '.join(planner_names())}", file=file, obj=f"RepackRun {run.name}", field="--solver")
    goals = resolve_goals(snapshot, run, file=file)
    problem = GoalProblem(snapshot, run, goals, weights, scheduler, judge_all)

    def bound(frag: FragReport, clock: Clock, limit: float) -> None:
        problem.repack.freed_upper = frag.occupied - frag.theoretical_min

    def finish(result: GoalResult, frag: FragReport) -> RepackOutcome:
        validate_goal_plan(problem, result.plan, claimed=result.disruption)
        status = goal_status(problem, result, frag)
        plan_result = PlanResult(plan=result.plan.repack, record=result.record, disruption=result.disruption,
                                 stats=result.stats)
        bad = [v.message for v in check_status(problem.repack, result.plan.repack, status, frag)]
        if bad:
            raise PlanInvalidError(bad)
        return RepackOutcome(run=run, status=status, result=plan_result, frag=frag,
                             reason=status.conditions[0].reason)

    return pipeline(snapshot, problem, lambda: get_goal_planner(solver), options, resource=problem.resource,
                    frag_part=6, bound=bound, finish=finish, shares=problem.repack.shares_move)


def hyper_node_tiers(snap: Snapshot, resource: str, after: Snapshot,
                     landing: set[str] | None = None) -> tuple[HyperNodeTierOut, ...] | None:
    """Per tier: its HyperNodes enclosing a provider of R, those free of R in ``snap`` and in ``after`` (where the
    nodes ``landing`` also hold R: a forecast's); None without HyperNodes."""
    if not snap.hyper_nodes:
        return None
    providers = {n.name for n in snap.providers(resource)}
    before = r_nodes(snap, resource)
    held = (r_nodes(after, resource) if after is not snap else before) | (landing or set())
    members = snap.topology.members
    out = []
    for tier in sorted({h.tier for h in snap.hyper_nodes.values()}):
        hs = [h for h, hn in snap.hyper_nodes.items() if hn.tier == tier and members.get(h, frozenset()) & providers]
        out.append(HyperNodeTierOut(tier=tier, hyper_nodes=len(hs),
                                    free_before=sum(1 for h in hs if not members[h] & before),
                                    free_after=sum(1 for h in hs if not members[h] & held)))
    return tuple(out)


def pending_by_fragmentation(gangs: Sequence[PendingGang]) -> int | None:
    """Of the pending gangs of R (``pending_gangs``), those that fit in total but cannot be placed; None when no
    gang of R waits."""
    return sum(1 for g in gangs if g.verdict == FRAGMENTATION) if gangs else None


def _tiers(problem: GoalProblem, plan: GoalPlan) -> tuple[HyperNodeTierOut, ...]:
    """Per tier: free of R before, and after the moves and the forecast."""
    return hyper_node_tiers(problem.snapshot, problem.resource, problem.after(plan.repack.moves),
                            problem.forecast_nodes(plan, requesting_r=True)) or ()


PENDING_SUMMARY_CAP = 1_000_000
"""Pending gangs x nodes above which a run's summary leaves ``pendingByFragmentation`` out: each gang is
judged by the placement greedy over every node (``SECONDS_PER_GANG_NODE``: 100 gangs at 10,000 nodes,
8 s), outside the planner's limit. Deterministic (a count, not a clock)."""
SECONDS_PER_GANG_NODE = 8e-6
"""One gang judged on one node, on the reference machine (10,000 nodes: 0.08 s a gang)."""


def with_counts(snap: Snapshot, out: RepackOutcome, scheduler: SchedulerConf | None = None) -> RepackOutcome:
    """The seed's outcome with the summary's HyperNode tiers and pending-by-fragmentation count (under
    ``scheduler``'s binpack weights), where they apply (a snapshot without HyperNodes or pending gangs of R gives
    the seed's status unchanged)."""
    R = out.run.spec.resource
    plan = out.result.plan
    tiers = hyper_node_tiers(snap, R, moved(snap, plan.moves)) if snap.hyper_nodes else None
    pending = None
    if snap.jobs:
        waiting = len(jobs_to_place(snap))
        if waiting * len(snap.nodes) > PENDING_SUMMARY_CAP:
            log.warning("summary.pendingByFragmentation left out: judging %d pending gangs on %d nodes would take "
                        "about %.0fs (optplan frag --pending computes it)", waiting, len(snap.nodes),
                        waiting * len(snap.nodes) * SECONDS_PER_GANG_NODE)
        else:
            pending = pending_by_fragmentation(pending_gangs(snap, R, scheduler=scheduler))
    if tiers is None and pending is None:
        return out
    summary = out.status.plan.summary.model_copy(update={"hyper_node_tiers": tiers,
                                                         "pending_by_fragmentation": pending})
    status = out.status.model_copy(update={"plan": out.status.plan.model_copy(update={"summary": summary})})
    return replace(out, status=status)


def reserved_nodes(problem: GoalProblem, plan: GoalPlan) -> tuple[str, ...]:
    """The moves' sources, the forecast's nodes and the freed HyperNodes' nodes, sorted."""
    out = {m.from_node for m in plan.repack.moves} | problem.forecast_nodes(plan)
    for h in plan.freed_hyper_nodes:
        out |= problem.hyper_nodes.get(h, frozenset())
    return tuple(sorted(out))


def goal_status(problem: GoalProblem, result: GoalResult, frag: FragReport) -> GoalRunStatus:
    plan = result.plan
    moved = bool(plan.repack.moves)
    admitted = plan.admitted()
    missing = [a for a in plan.admissions if not a.admitted]
    blocks_short = problem.free_required and len(plan.freed_hyper_nodes) < problem.free_count
    helped = bool(admitted) or bool(plan.freed_hyper_nodes)
    if moved and helped and not blocks_short:
        reason = RECOMMENDED
        message = (f"{len(plan.repack.moves)} move(s) admit {len(admitted)} of {len(plan.admissions)} gang(s)"
                   + (f" and free {len(plan.freed_hyper_nodes)} HyperNode(s)" if problem.free_count else ""))
    elif blocks_short:
        reason = INSUFFICIENT
        message = (f"{problem.free_count} HyperNode(s) of tier {problem.free_tier} are required free; "
                   f"at most {len(plan.freed_hyper_nodes)} can be")
    elif not moved and (admitted or plan.freed_hyper_nodes):
        reason = INSUFFICIENT
        message = "no move is needed: " + (f"{len(admitted)} gang(s) fit as the cluster is" if admitted
                                           else "the HyperNodes are free already")
    else:
        reason = INSUFFICIENT
        message = "no move within scope, budgets and scheduling constraints admits a gang or frees a HyperNode"
    base: RepackRunStatus = build_status(problem.repack, PlanResult(plan=plan.repack, record=result.record,
                                                                    disruption=result.disruption), frag,
                                         reason, message)
    if blocks_short:
        goals_cond = Condition(type="GoalsMet", status="False", reason=BLOCKS_NOT_MET, message=message)
    elif missing:
        names = "; ".join(f"{a.key}: {a.cause}: {a.reason}" for a in missing[:5])
        more = f" (+{len(missing) - 5} more)" if len(missing) > 5 else ""
        goals_cond = Condition(type="GoalsMet", status="False", reason=NOT_ADMITTABLE,
                               message=f"{len(missing)} gang(s) cannot be admitted: {names}{more}")
    else:
        goals_cond = Condition(type="GoalsMet", status="True", reason=GOALS_MET,
                               message=f"{len(admitted)} gang(s) admitted"
                               + (f", {len(plan.freed_hyper_nodes)} HyperNode(s) free" if problem.free_count else ""))
    fragmented = pending_by_fragmentation(problem.pending)
    goals = GoalsOut(admitted_job_count=len(admitted), not_admitted_job_count=len(missing),
                     admissions=plan.admissions, freed_hyper_nodes=plan.freed_hyper_nodes,
                     freed_hyper_node_count=len(plan.freed_hyper_nodes), move_reasons=plan.why,
                     reserved_nodes=reserved_nodes(problem, plan))
    summary = base.plan.summary.model_copy(update={"hyper_node_tiers": _tiers(problem, plan) or None,
                                                   "pending_by_fragmentation": fragmented})
    fields = {k: getattr(base.plan, k) for k in type(base.plan).model_fields} | {"summary": summary}
    return GoalRunStatus(phase=base.phase, conditions=(*base.conditions, goals_cond),
                         plan=GoalPlanOut(**fields, goals=goals))


def room_lost(after: Snapshot, run: RepackRun, admitted: list[str],
              scheduler: SchedulerConf | None = None) -> list[str]:
    """After an Execute: the admitted gangs (keys) that still wait yet no longer fit as the cluster is (the room
    the moves made was taken, or the moves did not make it), each as ``key: reason``. A gang that runs, or that
    Volcano's allocate would place now (under ``scheduler``), has its room."""
    verdicts = {g.key: g for g in pending_gangs(after, run.spec.resource, scheduler=scheduler)}
    out = []
    for key in admitted:
        g = verdicts.get(key)
        if g is not None and g.verdict != FITS:
            out.append(f"{key}: {g.reason or g.verdict}")
    return out
