"""One Repack run of a replay on a Snapshot of its state, and placement's pending verdict for the
``pending`` policy.

``plan_moves`` runs the configured planner: optplan's ``greedy`` and ``auto`` through
``repack.run.plan_repack`` (which validates every plan and raises ``PlanInvalidError`` for a broken one, a
bug; only a ``RepackRecommended`` plan is carried out), the peers through ``baselines.repack`` with their
breaks of optplan's rules counted by ``repack.validate.plan_violations`` (a peer follows its own algorithm,
as ``optplan bench`` reports it); the engine carries out no plan that breaks a rule (it counts it refused).
Limits are deterministic (``PlanOptions(deterministic=True)``, one worker, the replay's seed): the same
state gives the same plan on any machine. The engine applies the moves and checks every node's capacity as
it does.

``fragmentation_pending`` asks ``placement.pending.pending_gangs`` which of the given waiting gangs wait
by fragmentation (enough GPUs free in total, yet the placement greedy cannot place them).

``restarted_pods`` is what a plan's moves restart: Repack's own rule (``RepackProblem.restarted``: the union
of the moved pods' restart units, from the workloads' restart policies in the snapshot), so the replay
restarts exactly what the planners priced.

``plan_for_pending`` is what the ``pending`` policy calls with the gangs that wait by fragmentation: with
optplan's planners (greedy, auto) a RepackRun with an ``admit`` goal naming those gangs (issue 15: move
the fewest pods so that each can be placed whole; ``optplan.solvers.goals``, its plans validated by the goal
validator; only the named gangs' pending verdicts are asked for, ``judge_all=False``: the same plan); with a
peer, which knows no such goal, a plain Repack run (free whole nodes).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from optplan.experiments.replay.config import RESOURCE, ReplayConfig
from optplan.experiments.replay.snapshot import NAMESPACE
from optplan.models.repack import AdmitGoal, PodMove, RepackRun
from optplan.models.snapshot import Snapshot
from optplan.solvers.core import registry
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.goals.run import plan_run
from optplan.solvers.placement.pending import FRAGMENTATION, pending_gangs
from optplan.solvers.repack.rules import RepackProblem
from optplan.solvers.repack.run import RECOMMENDED, plan_repack
from optplan.solvers.repack.validate import plan_violations


@dataclass(frozen=True)
class Planned:
    """What one Repack run decided."""

    moves: tuple[PodMove, ...]
    freed_nodes: int
    status: str
    """The solver record's status (HEURISTIC, OPTIMAL, FEASIBLE, FALLBACK, BASELINE)."""
    reason: str
    """The RepackRun outcome (optplan planners) or ``Baseline`` (peers)."""
    rule_breaks: int
    """Peers only: optplan rules their plan breaks (0 for optplan's planners, which are validated)."""
    seconds: float
    """Wall-clock seconds of planning (varies from run to run: reported with timings only)."""


def options(cfg: ReplayConfig) -> PlanOptions:
    return PlanOptions(time_limit=cfg.time_limit, workers=1, seed=cfg.seed, deterministic=True)


def plan_moves(snapshot: Snapshot, run: RepackRun, cfg: ReplayConfig) -> Planned:
    """Plan one Repack run with ``cfg.planner`` (see the module docstring)."""
    t0 = time.perf_counter()
    if cfg.planner in registry.names(registry.BASELINES):
        problem = RepackProblem(snapshot, run, move_shares=False)
        res = registry.load(registry.BASELINES, cfg.planner)().plan(problem, options(cfg))
        breaks = len(plan_violations(problem, res.plan))
        return Planned(res.plan.moves, len(res.plan.freed_nodes), res.record.status, "Baseline", breaks,
                       time.perf_counter() - t0)
    # shares move: the engine puts a moved share on the device its move names (``PodMove.to_devices``)
    out = plan_repack(snapshot, run, solver=cfg.planner, options=options(cfg))
    plan = out.result.plan
    if out.reason != RECOMMENDED:  # a plan below the run's minFragImprovementPercent is not carried out
        return Planned((), 0, out.result.record.status, out.reason, 0, time.perf_counter() - t0)
    return Planned(plan.moves, len(plan.freed_nodes), out.result.record.status, out.reason, 0,
                   time.perf_counter() - t0)


def restarted_pods(snapshot: Snapshot, run: RepackRun, moved: Sequence[str]) -> set[str]:
    """Keys of the pods that the moves of the pods ``moved`` (keys) restart (module docstring)."""
    if not moved:
        return set()
    problem = RepackProblem(snapshot, run)
    return {k for r in problem.restarted(snapshot.pods[k] for k in moved).values() for k in r.pods}


def fragmentation_pending(snapshot: Snapshot) -> list[str]:
    """Names of the snapshot's waiting gangs that wait by fragmentation (placement's verdict)."""
    return [g.name for g in pending_gangs(snapshot, RESOURCE) if g.verdict == FRAGMENTATION]


def plan_for_pending(snapshot: Snapshot, run: RepackRun, cfg: ReplayConfig, gangs: list[str]) -> Planned:
    """The ``pending`` policy's run for ``gangs`` (waiting by fragmentation, each a Pending VCJob of
    ``snapshot``): an admit goal naming them, or a plain Repack with a peer (module docstring)."""
    if cfg.planner not in registry.names("goals") or not gangs:
        return plan_moves(snapshot, run, cfg)
    t0 = time.perf_counter()
    goal = run.spec.goal.model_copy(update={"admit": AdmitGoal(jobs=tuple(f"{NAMESPACE}/{g}" for g in gangs))})
    admit = run.model_copy(update={"spec": run.spec.model_copy(update={"goals": (goal,)})})
    # only the named gangs' verdicts: the running gangs with pods not placed yet are pending too, and
    # judging every pending gang was most of a pending cell's time; the plan is the same
    out = plan_run(snapshot, admit, solver=cfg.planner, options=options(cfg), judge_all=False)
    plan = out.result.plan
    if out.reason != RECOMMENDED:  # no move admits a gang
        return Planned((), 0, out.result.record.status, out.reason, 0, time.perf_counter() - t0)
    return Planned(plan.moves, len(plan.freed_nodes), out.result.record.status, out.reason, 0,
                   time.perf_counter() - t0)
