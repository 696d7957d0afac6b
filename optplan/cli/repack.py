"""``optplan repack``: plan a RepackRun (DryRun) and print it with its status, as a table or the RepackRun
(``--write-status``: into the live cluster's run)."""

from __future__ import annotations

import argparse
from pathlib import Path

from optplan.adapters.kubefile import LoadedInput
from optplan.adapters.output import dump, repack_run_document, status_dict, table
from optplan.cli import options
from optplan.cli.cluster import write_status
from optplan.cli.goalflags import add_goal_arguments, resolve_run_goals, with_flag_goals, with_gpu_goal
from optplan.cli.sources import load, pick_run_arg, scheduler_conf
from optplan.cli.units import amount
from optplan.errors import InputError
from optplan.models.goals import GoalRunStatus
from optplan.models.quantity import unit_of, with_unit
from optplan.solvers.core import registry
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.goals.run import plan_run
from optplan.solvers.repack.base import planner_names
from optplan.solvers.repack.run import RepackOutcome


def add_arguments(p: argparse.ArgumentParser) -> None:
    options.planning_inputs(p, ("yaml", "json", "table"), "yaml", 30.0)
    options.repack_planning(p)
    options.solver(p, sorted({*planner_names(), *registry.names("goals")}), registry.DEFAULT,
                   f"{registry.HELP['repack']}; {registry.HELP['goals']}")
    options.timings(p, "record status.plan.solver.wallSeconds (output then differs from run to run)")
    options.write_status(p, "live cluster only: patch the DryRun RepackRun's status subresource with the plan, "
                            "refused (409) if the run changed since it was read")
    add_goal_arguments(p)


def run(args: argparse.Namespace, loaded: LoadedInput | None = None) -> str:
    """Plan the run; ``loaded``: the snapshot already read (default: read as ``args`` says)."""
    loaded = load(args) if loaded is None else loaded
    written = pick_run_arg(args, loaded)
    run = with_gpu_goal(with_flag_goals(written, args.admit, args.free_hypernodes), args.free_gpus, args.gpu_model)
    resolve_run_goals(args, loaded, written, run)
    if args.write_status and run.spec.mode != "DryRun":
        raise InputError("optplan writes DryRun plans only; an Execute run's status belongs to its controller",
                         obj=f"RepackRun/{run.name}", field="spec.mode")
    options = PlanOptions(time_limit=args.time_limit, workers=args.workers, seed=args.seed,
                          deterministic=args.deterministic)
    out = plan_run(loaded.snapshot, run, solver=args.solver, options=options, weights=args.weights,
                   file=args.run if args.run is not None and Path(args.run).is_file() else None,
                   scheduler=scheduler_conf(args, loaded))
    if args.write_status:
        write_status(args, run, status_dict(out.status))
    if args.output == "table":
        return repack_table(out)
    return dump(repack_run_document(run, out.status, timings=args.timings), args.output)


def repack_table(out: RepackOutcome) -> str:
    s = out.status.plan.summary
    f = out.frag
    rec = out.result.record
    d = out.status.plan.disruption
    r = out.run.spec.resource
    moved = out.result.disruption
    proven = "proven" if f.proven else "lower bound"
    lines = [
        f"RepackRun {out.run.name}: {out.run.spec.mode}, resource {out.run.spec.resource}",
        f"Outcome:       {out.reason} — {out.status.conditions[0].message}",
        f"Fragmentation: {s.frag_before_percent}% -> {s.frag_after_percent}%  (providers {f.providers}, "
        f"occupied {s.occupied_nodes_before} -> {s.occupied_nodes_after}, theoretical minimum "
        f"{f.theoretical_min} {proven})",
        f"Scope:         {s.resolved_scope.pod_group_count} PodGroups, "
        f"{s.resolved_scope.node_count} nodes may be vacated",
        f"Freed nodes:   {s.freed_node_count}" + (f" ({', '.join(out.status.plan.freed_nodes)})"
                                                  if 0 < s.freed_node_count <= 12 else ""),
        f"Disruption:    {d.affected_pod_groups} PodGroups affected, {d.pod_groups_below_min_available} below "
        f"minAvailable, {with_unit(r, moved.affected_cards)} affected, {with_unit(r, moved.moved_cards)} moved, "
        f"{d.moved_pods} pods moved",
        f"Solver:        {rec.name} ({rec.status}"
        + (f", {rec.wall_seconds}s)" if rec.wall_seconds is not None else ")"),
    ]
    if s.freed_gpus is not None:
        devices = ", ".join(map(str, s.freed_gpus.devices)) or "none"
        lines.insert(5, f"Free GPUs:     {s.freed_gpus.node} ({s.freed_gpus.model}): devices {devices}")
    text = "\n".join(lines) + "\n"
    if out.status.plan.moves:
        named = any(p.to_devices is not None for mv in out.status.plan.moves for p in mv.pods)
        rows = [["NAMESPACE", "PODGROUP", "OWNER", "POD", "FROM", "TO", unit_of(r).upper(), *(["DEVICE"] * named)]]
        for mv in out.status.plan.moves:
            owner = f"{mv.owner.kind}/{mv.owner.name}" if mv.owner else "-"
            for p in mv.pods:
                dev = [",".join(map(str, p.to_devices)) if p.to_devices is not None else "-"] if named else []
                rows.append([mv.namespace, mv.pod_group_name, owner, p.name, p.from_node, p.to_node,
                             amount(r, p.cards), *dev])
        text += "\nMoves:\n" + table(rows)
        widened = [mv for mv in out.status.plan.moves if mv.footprint is not None]
        if widened:
            rows = [["NAMESPACE", "PODGROUP", "RESTART POLICY", "PODS RESTARTED", unit_of(r).upper(),
                     "RESTARTED WITHOUT MOVING"]]
            for mv in widened:
                fp = mv.footprint
                assert fp is not None
                names = ", ".join(fp.pod_names[:4]) + (f" (+{len(fp.pod_names) - 4})" if len(fp.pod_names) > 4 else "")
                rows.append([mv.namespace, mv.pod_group_name, fp.policy, str(fp.pods), amount(r, fp.cards), names])
            text += "\nRestart policies widen the disruption:\n" + table(rows)
    if out.result.rejections:
        rows = [["REASON", "NODES"]] + [[k, str(v)] for k, v in out.result.rejections.items()]
        text += "\nOccupied nodes not vacated:\n" + table(rows)
    if isinstance(out.status, GoalRunStatus):
        text += goals_table(out.status)
    return text


def goals_table(status: GoalRunStatus) -> str:
    """The goals' part of the table: the GoalsMet condition, each gang and where it lands, why each move."""
    g = status.plan.goals
    met = status.conditions[-1]
    text = f"\nGoals:         {met.reason} — {met.message}\n"
    if g.admissions:
        rows = [["GANG", "QUEUE", "PRIORITY", "ADMITTED", "WHERE / WHY NOT"]]
        for a in g.admissions:
            where = (f"{a.hyper_node + ': ' if a.hyper_node else ''}"
                     + ", ".join(sorted({b.node for b in a.bindings}))) if a.admitted else f"{a.cause}: {a.reason}"
            rows.append([a.key, a.queue, str(a.priority), "yes" if a.admitted else "no", where])
        text += "\nGangs (the forecast: where Volcano could place them after the moves):\n" + table(rows)
    if g.freed_hyper_nodes:
        text += f"\nFreed HyperNodes: {', '.join(g.freed_hyper_nodes)}\n"
    if g.move_reasons:
        rows = [["POD", "WHY"]] + [[m.pod, m.reason] for m in g.move_reasons]
        text += "\nWhy each move:\n" + table(rows)
    return text


