"""``optplan compare``: plan one run with several solvers (and the peers' baselines) and print them side
by side; a run with goals compares the goal planners."""

from __future__ import annotations

import argparse
from typing import Any

from optplan.adapters.kubefile import LoadedInput
from optplan.adapters.output import dump, table
from optplan.cli import options
from optplan.cli.goalflags import resolve_run_goals
from optplan.cli.sources import load, pick_run_arg, scheduler_conf
from optplan.cli.units import amount, unit_labels
from optplan.errors import InputError
from optplan.models.goals import GoalRunStatus
from optplan.models.quantity import format_milli
from optplan.models.repack import RepackRun, Weights
from optplan.solvers.binpack.frag import FragReport, fragmentation, round_half_up
from optplan.solvers.core import registry
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.goals.run import plan_run
from optplan.solvers.repack.base import planner_names
from optplan.solvers.repack.rules import RepackProblem
from optplan.solvers.repack.run import plan_repack
from optplan.solvers.repack.validate import plan_violations


def add_arguments(p: argparse.ArgumentParser) -> None:
    options.planning_inputs(p, ("table", "yaml", "json"), "table", 30.0)
    options.repack_planning(p)
    p.add_argument("--solvers", default="greedy,cpsat", metavar="LIST",
                   help=f"comma-separated solvers to compare (default greedy,cpsat; from {', '.join(planner_names())})")


_AMOUNTS = frozenset({"affectedCards", "movedCards"})
"""The compare rows that hold amounts of the run's resource (status values, ``format_milli``'s form)."""


def run(args: argparse.Namespace, loaded: LoadedInput | None = None) -> str:
    """The plans side by side; ``loaded``: the snapshot already read (default: read as ``args`` says)."""
    loaded = load(args) if loaded is None else loaded
    names = [n.strip() for n in args.solvers.split(",") if n.strip()]
    written = pick_run_arg(args, loaded)
    if written.spec.has_purpose:
        return compare_goals(args, loaded, written, names)
    known = [*planner_names(), *registry.names(registry.BASELINES)]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise InputError(f"unknown solver(s) {', '.join(unknown) or '(none)'}; choose from "
                         f"{', '.join(known)}", field="--solvers")
    run = pick_run_arg(args, loaded)
    options = PlanOptions(time_limit=args.time_limit, workers=args.workers, seed=args.seed,
                          deterministic=args.deterministic)
    rows: list[dict[str, Any]] = []
    frag: FragReport | None = None
    for name in names:
        if name in registry.names(registry.BASELINES):
            rows.append(_baseline_row(name, loaded, run, options, args.weights))
            continue
        out = plan_repack(loaded.snapshot, run, solver=name, options=options, weights=args.weights)
        frag = out.frag
        s = out.status.plan.summary
        d = out.result.disruption
        rec = out.result.record
        rows.append({
            "solver": name, "status": rec.status, "reason": out.reason, "freedNodes": s.freed_node_count,
            "freedNodesBound": rec.freed_nodes_bound, "fragAfterPercent": s.frag_after_percent,
            "affectedPodGroups": d.affected_pod_groups, "podGroupsBelowMinAvailable": d.below_min_available,
            "affectedCards": out.status.plan.disruption.affected_cards,
            "movedCards": out.status.plan.disruption.moved_cards, "movedPods": d.moved_pods,
            "weightedCost": round(d.weighted(args.weights), 4), "gapPercent": rec.gap_percent,
            "violations": 0, "wallSeconds": rec.wall_seconds})
    if frag is None:
        frag = fragmentation(loaded.snapshot, run.spec.resource, time_limit=args.time_limit)
    for row in rows:
        if row["fragAfterPercent"] is None:
            row["fragAfterPercent"] = round_half_up(frag.percent(frag.occupied - row["freedNodes"]))
    if args.output != "table":
        return dump({"run": run.name, "fragBeforePercent": round_half_up(frag.percent()), "plans": rows},
                    args.output)
    header = ["", *[r["solver"] for r in rows]]
    fields = [("status", "status"), ("outcome", "reason"), ("freed nodes", "freedNodes"),
              ("freed bound", "freedNodesBound"), ("frag after %", "fragAfterPercent"),
              ("affected PodGroups", "affectedPodGroups"), ("below minAvailable", "podGroupsBelowMinAvailable"),
              ("affected cards", "affectedCards"), ("moved cards", "movedCards"), ("moved pods", "movedPods"),
              ("weighted cost", "weightedCost"), ("gap %", "gapPercent"), ("rule violations", "violations"),
              ("time s", "wallSeconds")]
    resource = run.spec.resource
    grid = [header] + [[label, *["-" if r[key] is None else amount(resource, r[key]) if key in _AMOUNTS
                                 else str(r[key]) for r in rows]] for label, key in fields]
    text = (f"RepackRun {run.name}: fragmentation before {round_half_up(frag.percent())}%\n"
            + table(unit_labels(resource, grid)))
    broken = [r for r in rows if r["violations"]]
    for r in broken:
        text += f"\n{r['solver']} breaks optplan's rules {r['violations']} time(s), e.g. {r['example']}"
    return text + ("\n" if broken else "")


def compare_goals(args: argparse.Namespace, loaded: LoadedInput, run: RepackRun, names: list[str]) -> str:
    """``compare`` for a run with admit / freeHyperNodes goals: the goal planners side by side."""
    known = list(registry.names("goals"))
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise InputError(f"unknown solver(s) {', '.join(unknown) or '(none)'} for a run with goals; choose from "
                         f"{', '.join(known)}", field="--solvers")
    resolve_run_goals(args, loaded, run, run)
    options = PlanOptions(time_limit=args.time_limit, workers=args.workers, seed=args.seed,
                          deterministic=args.deterministic)
    rows: list[dict[str, Any]] = []
    conf = scheduler_conf(args, loaded)
    for name in names:
        out = plan_run(loaded.snapshot, run, solver=name, options=options, weights=args.weights, scheduler=conf)
        assert isinstance(out.status, GoalRunStatus)
        g = out.status.plan.goals
        d = out.result.disruption
        rec = out.result.record
        rows.append({"solver": name, "status": rec.status, "reason": out.reason,
                     "goals": out.status.conditions[-1].reason, "admitted": g.admitted_job_count,
                     "notAdmitted": g.not_admitted_job_count, "freedHyperNodes": g.freed_hyper_node_count,
                     "movedPods": d.moved_pods, "movedCards": out.status.plan.disruption.moved_cards,
                     "affectedPodGroups": d.affected_pod_groups, "weightedCost": round(d.weighted(args.weights), 4),
                     "gapPercent": rec.gap_percent, "wallSeconds": rec.wall_seconds})
    if args.output != "table":
        return dump({"run": run.name, "plans": rows}, args.output)
    fields = [("status", "status"), ("outcome", "reason"), ("goals", "goals"), ("gangs admitted", "admitted"),
              ("gangs not admitted", "notAdmitted"), ("freed HyperNodes", "freedHyperNodes"),
              ("moved pods", "movedPods"), ("moved cards", "movedCards"), ("affected PodGroups", "affectedPodGroups"),
              ("weighted cost", "weightedCost"), ("gap %", "gapPercent"), ("time s", "wallSeconds")]
    resource = run.spec.resource
    grid = [["", *[r["solver"] for r in rows]]] + [
        [label, *["-" if r[key] is None else amount(resource, r[key]) if key in _AMOUNTS else str(r[key])
                  for r in rows]] for label, key in fields]
    return f"RepackRun {run.name}: goals\n" + table(unit_labels(resource, grid))


def _baseline_row(name: str, loaded: LoadedInput, run: RepackRun, options: PlanOptions,
                  weights: Weights) -> dict[str, Any]:
    """A peer's plan, validated and reported (never printed as a RepackRun: it may break the rules)."""
    problem = RepackProblem(loaded.snapshot, run, weights)
    result = registry.load(registry.BASELINES, name)().plan(problem, options)
    violations = plan_violations(problem, result.plan)
    d = result.disruption
    return {"solver": name, "status": result.record.status, "reason": "-",
            "freedNodes": len(result.plan.freed_nodes), "freedNodesBound": None, "fragAfterPercent": None,
            "affectedPodGroups": d.affected_pod_groups, "podGroupsBelowMinAvailable": d.below_min_available,
            "affectedCards": format_milli(d.affected_cards), "movedCards": format_milli(d.moved_cards),
            "movedPods": d.moved_pods, "weightedCost": round(d.weighted(weights), 4), "gapPercent": None,
            "violations": len(violations), "example": violations[0] if violations else None,
            "wallSeconds": result.record.wall_seconds}

