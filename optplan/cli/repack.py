"""``optplan repack``, ``compare`` and ``frag``: plan a RepackRun, compare planners and peers, measure
fragmentation."""

from __future__ import annotations

import argparse
import copy
import math
import re
from pathlib import Path
from typing import Any

from optplan.adapters.kubefile import LoadedInput
from optplan.adapters.output import dump, repack_run_document, status_dict, table
from optplan.cli.sources import pick_run_arg, write_status
from optplan.errors import InputError, printable
from optplan.models.goals import GoalRunStatus
from optplan.models.limits import MAX_WEIGHT, WEIGHT_DIGITS
from optplan.models.quantity import format_amount, format_milli, to_milli, unit_of, with_unit
from optplan.models.repack import DIMENSIONS, AdmitGoal, FreeHyperNodesGoal, RepackRun, Weights, namespaced_name
from optplan.solvers.binpack.frag import FragReport, fragmentation, round_half_up
from optplan.solvers.binpack.hyperfrag import TierFrag, hypernode_fragmentation
from optplan.solvers.binpack.hyperfrag import tiers as hypernode_tiers
from optplan.solvers.core import registry
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.goals.resolve import GOAL, resolve_goals
from optplan.solvers.goals.run import plan_run
from optplan.solvers.placement.pending import (
    CAPACITY,
    FITS,
    FRAGMENTATION,
    QUOTA,
    PendingGang,
    free_total,
    pending_gangs,
)
from optplan.solvers.repack.base import planner_names
from optplan.solvers.repack.rules import RepackProblem
from optplan.solvers.repack.run import RepackOutcome, plan_repack
from optplan.solvers.repack.validate import plan_violations

WEIGHTS_METAVAR = ",".join(f"W{i}" for i in range(1, len(DIMENSIONS) + 1))
SEED_WEIGHTS = 5
"""``--weights`` may stop after the seed's five dimensions (seed 000); the rest keep their defaults."""


def weights_help() -> str:
    """``--weights``' help, from the one table of dimensions and defaults (``DIMENSIONS``)."""
    return (f"weights of {', '.join(d.key for d in DIMENSIONS)} (default "
            f"{','.join(str(d.default) for d in DIMENSIONS)}; the first {SEED_WEIGHTS}, the seed's, suffice)")


def parse_weights(text: str) -> Weights:
    """``--weights``: one number per dimension in ``DIMENSIONS``' order; the seed's five suffice."""
    counts = f"{SEED_WEIGHTS} or {len(DIMENSIONS)}"
    try:
        parts = [float(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"weights must be {counts} numbers separated by commas: {text!r}") from None
    if not SEED_WEIGHTS <= len(parts) <= len(DIMENSIONS) or any(
            not math.isfinite(p) or p < 0 or p > MAX_WEIGHT for p in parts):
        raise argparse.ArgumentTypeError(f"weights must be {counts} finite numbers in [0, {MAX_WEIGHT:g}]: "
                                         f"{', '.join(d.key for d in DIMENSIONS)}")
    # rounded to the resolution the exact models use (0.0000001 reads as 0, as it would be planned)
    return Weights(*(round(p, WEIGHT_DIGITS) for p in parts))



# ---- frag ----------------------------------------------------------------------------------------

def frag_dict(f: FragReport) -> dict[str, Any]:
    return {"resource": f.resource, "providers": f.providers, "occupied": f.occupied,
            "theoreticalMinimum": f.theoretical_min, "theoreticalMinimumProven": f.proven,
            "theoreticalMinimumUpperBound": f.upper_bound, "fragPercent": round_half_up(f.percent()),
            "fragPercentExact": str(f.percent()), **({"warning": f.warning} if f.warning is not None else {})}


def tier_dict(t: TierFrag) -> dict[str, Any]:
    return {"tier": t.tier, "hyperNodes": len(t.hyper_nodes), "freeNow": len(t.free_now),
            "mostFreeableLowerBound": t.freeable_lower, "mostFreeableUpperBound": t.freeable_upper,
            "status": t.status, "capacityUpperBound": t.capacity_upper, "freeNowHyperNodes": list(t.free_now),
            "freeableHyperNodes": list(t.freeable)}


def pending_dict(free: int, gangs: list[PendingGang]) -> dict[str, Any]:
    counts = {v: sum(g.verdict == v for g in gangs) for v in (FITS, FRAGMENTATION, QUOTA, CAPACITY)}
    return {"freeTotal": format_milli(free), "pendingGangs": len(gangs), "fits": counts[FITS],
            "byFragmentation": counts[FRAGMENTATION], "byQuota": counts[QUOTA], "byCapacity": counts[CAPACITY],
            "gangs": [{"namespace": g.namespace, "name": g.name, "queue": g.queue, "request": format_milli(g.request),
                       "reason": g.reason} for g in gangs if g.verdict == FRAGMENTATION]}


def frag_tiers(args: argparse.Namespace, loaded: LoadedInput) -> list[TierFrag] | None:
    """The per-tier report when ``--hypernodes`` or ``--tier`` asks for it; a tier no HyperNode has is bad input."""
    if not args.hypernodes and not args.tier:
        return None
    known = hypernode_tiers(loaded.snapshot)
    only = sorted(set(args.tier)) if args.tier else None
    for t in only or ():
        if t not in known:
            raise InputError(f"no HyperNode has tier {t} (tiers: {', '.join(map(str, known)) or 'none'})",
                             field="--tier")
    return hypernode_fragmentation(loaded.snapshot, args.resource, only, time_limit=args.time_limit)


def frag(args: argparse.Namespace, loaded: LoadedInput) -> str:
    tiers = frag_tiers(args, loaded)
    f = fragmentation(loaded.snapshot, args.resource, time_limit=args.time_limit)
    pending = None
    if args.pending:
        gangs = pending_gangs(loaded.snapshot, args.resource)
        pending = (free_total(loaded.snapshot, args.resource), gangs)
    if args.output != "table":
        doc = frag_dict(f)
        if tiers is not None:
            doc["hyperNodeTiers"] = [tier_dict(t) for t in tiers]
        if pending is not None:
            doc["pendingByFragmentation"] = pending_dict(*pending)
        return dump(doc, args.output)
    proven = "proven" if f.proven else f"best lower bound; a packing into {f.upper_bound} nodes is known"
    formula = f"(({f.occupied} - {f.theoretical_min}) / {f.providers})" if f.providers else "(no providers)"
    text = (f"resource            {printable(f.resource)}\n"
            f"providers           {f.providers}\n"
            f"occupied            {f.occupied}\n"
            f"theoretical minimum {f.theoretical_min} ({proven})\n"
            f"fragmentation       {round_half_up(f.percent())}%  {formula}\n")
    if f.warning is not None:
        text += f"warning             {printable(f.warning)}\n"
    if tiers is not None:
        text += frag_tiers_text(tiers)
    if pending is not None:
        text += frag_pending_text(args.resource, *pending)
    return text


TABLE_NAMES = 6
"""The table names this many freeable HyperNodes per tier (``-o yaml|json`` lists them all)."""


def frag_tiers_text(tiers: list[TierFrag]) -> str:
    if not tiers:
        return "\nhypernodes          none in the snapshot\n"
    rows = [["TIER", "HYPERNODES", "FREE NOW", "MOST FREEABLE", "STATUS", "FREEABLE"]]
    for t in tiers:
        most = str(t.freeable_lower) if t.proven else f"{t.freeable_lower}..{t.freeable_upper}"
        names = ",".join(t.freeable[:TABLE_NAMES]) or "-"
        if len(t.freeable) > TABLE_NAMES:
            names += f" (+{len(t.freeable) - TABLE_NAMES} more)"
        rows.append([str(t.tier), str(len(t.hyper_nodes)), str(len(t.free_now)), most, t.status, names])
    return ("\nHyperNodes holding the resource, per tier: free of it now, and the most compacting it could free "
            "(its requests only, every pod movable)\n" + table(rows))


def frag_pending_text(resource: str, free: int, gangs: list[PendingGang]) -> str:
    d = pending_dict(free, gangs)
    text = (f"\npending gangs requesting {printable(resource)}: {d['pendingGangs']} (free in total "
            f"{_amount(resource, d['freeTotal'])}; "
            f"fit now, each alone {d['fits']}; by quota {d['byQuota']}, by capacity {d['byCapacity']}, "
            f"by fragmentation {d['byFragmentation']})\n")
    if d["gangs"]:
        rows = [["NAMESPACE", "JOB", "QUEUE", "REQUEST", "REASON"]]
        rows += [[g["namespace"], g["name"], g["queue"], _amount(resource, g["request"]), g["reason"]]
                 for g in d["gangs"]]
        text += table(rows)
    return text



# ---- goals from flags (issue 15): --admit, --free-hypernodes, --require-hypernodes ----------------

FREE_FLAG = "--free-hypernodes"
REQUIRE_FLAG = "--require-hypernodes"


def add_goal_arguments(p: argparse.ArgumentParser) -> None:
    """The flags that give a run goals without editing its YAML."""
    p.add_argument("--admit", action="append", type=parse_job_key, metavar="NAMESPACE/JOB",
                   help="make room for this pending gang (a VCJob, or a PodGroup's VCJob) by moving running pods; "
                        "repeatable, added to the run's spec.goals[0].admit.jobs")
    g = p.add_mutually_exclusive_group()
    g.add_argument(FREE_FLAG, dest="free_hypernodes", type=parse_free_hypernodes, metavar="TIER:N",
                   help="free N HyperNodes of TIER (a number, or a HyperNode spec.tierName) of the resource, as "
                        "many as possible up to N (the run's freeHyperNodes, replaced)")
    g.add_argument(REQUIRE_FLAG, dest="free_hypernodes", type=parse_required_hypernodes, metavar="TIER:N",
                   help=f"as {FREE_FLAG}, but required: RequiredNodeBlocksNotMet when N cannot be freed")


def parse_job_key(text: str) -> str:
    try:
        return namespaced_name(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


_TIER_COUNT = re.compile(r"(?P<tier>[^:]+):(?P<count>[0-9]{1,9})")


def _hypernodes(text: str, *, required: bool) -> FreeHyperNodesGoal:
    """``TIER:N``: N >= 1 HyperNodes of a tier given by number (>= 1) or by name."""
    m = _TIER_COUNT.fullmatch(text.strip())
    if m is None:
        raise argparse.ArgumentTypeError(f"expected TIER:N (e.g. 1:2 or rack:2), got {text!r}")
    tier, count = m.group("tier").strip(), int(m.group("count"))
    if count < 1:
        raise argparse.ArgumentTypeError(f"N must be at least 1, got {text!r}")
    if tier.isascii() and tier.isdigit():
        if int(tier) < 1:
            raise argparse.ArgumentTypeError(f"a tier is at least 1, got {text!r}")
        return FreeHyperNodesGoal(tier=int(tier), count=count, required=required)
    return FreeHyperNodesGoal(tier_name=tier, count=count, required=required)


def parse_free_hypernodes(text: str) -> FreeHyperNodesGoal:
    return _hypernodes(text, required=False)


def parse_required_hypernodes(text: str) -> FreeHyperNodesGoal:
    return _hypernodes(text, required=True)


def with_flag_goals(run: RepackRun, admit: list[str] | None, free: FreeHyperNodesGoal | None) -> RepackRun:
    """The run with the flags' goals: ``--admit`` jobs added to its admit goal (each once), the HyperNode
    flag replacing its freeHyperNodes. ``raw`` (what the output echoes) gets them too, so the printed
    RepackRun says what was planned. A run that asks for HyperNodes through spec.networkTopology keeps
    one way of asking: a HyperNode flag is then an error."""
    if not admit and free is None:
        return run
    goal = run.spec.goal
    update: dict[str, Any] = {}
    if admit:
        old = goal.admit or AdmitGoal(jobs=tuple(admit))
        update["admit"] = old.model_copy(update={"jobs": tuple(dict.fromkeys([*old.jobs, *admit]))})
    if free is not None:
        if run.spec.network_topology is not None:
            raise InputError("the run already asks for HyperNodes in spec.networkTopology: give freeHyperNodes "
                             "or networkTopology, not both", obj=f"RepackRun/{run.name}",
                             field=REQUIRE_FLAG if free.required else FREE_FLAG)
        update["free_hyper_nodes"] = free
    new_goal = goal.model_copy(update=update)
    raw = copy.deepcopy(run.raw)
    spec = raw.get("spec")
    if isinstance(spec, dict) and isinstance(spec.get("goals"), list) and isinstance(spec["goals"][0], dict):
        written = spec["goals"][0]
        if new_goal.admit is not None and admit:
            written["admit"] = {**(written.get("admit") or {}), "jobs": list(new_goal.admit.jobs)}
        if free is not None:
            written["freeHyperNodes"] = free.model_dump(by_alias=True, exclude_none=True, mode="json")
    return run.model_copy(update={"spec": run.spec.model_copy(update={"goals": (new_goal,)}), "raw": raw})


def resolve_run_goals(args: argparse.Namespace, loaded: LoadedInput, written: RepackRun, run: RepackRun) -> None:
    """Bad goals exit 2 before any planning. An error in a goal a flag gave names the flag, not the YAML
    field: the admit jobs past the run's own, and the HyperNodes when a flag replaced them."""
    if not run.spec.has_purpose:
        return
    file = args.run if args.run is not None and Path(args.run).is_file() else \
        ", ".join(args.snapshots or [getattr(args, "source", "cluster")])
    try:
        resolve_goals(loaded.snapshot, run, file=file)
    except InputError as e:
        flag = _flag_of(e.field or "", written, args.free_hypernodes)
        if flag is None:
            raise
        raise InputError(e.reason, obj=e.obj, field=flag) from None


def _flag_of(field: str, written: RepackRun, free: FreeHyperNodesGoal | None) -> str | None:
    """The flag that gave the goal a field path names, or None when the run's YAML gave it."""
    m = re.fullmatch(re.escape(f"{GOAL}.admit.jobs[") + r"(\d+)\]", field)
    own = written.spec.goal.admit
    if m is not None and int(m.group(1)) >= (len(own.jobs) if own is not None else 0):
        return "--admit"
    if free is not None and field.startswith(f"{GOAL}.freeHyperNodes"):
        return REQUIRE_FLAG if free.required else FREE_FLAG
    return None


# ---- repack --------------------------------------------------------------------------------------

def repack(args: argparse.Namespace, loaded: LoadedInput) -> str:
    written = pick_run_arg(args, loaded)
    run = with_flag_goals(written, args.admit, args.free_hypernodes)
    resolve_run_goals(args, loaded, written, run)
    if args.write_status and run.spec.mode != "DryRun":
        raise InputError("optplan writes DryRun plans only; an Execute run's status belongs to its controller",
                         obj=f"RepackRun/{run.name}", field="spec.mode")
    options = PlanOptions(time_limit=args.time_limit, workers=args.workers, seed=args.seed,
                          deterministic=args.deterministic)
    out = plan_run(loaded.snapshot, run, solver=args.solver, options=options, weights=args.weights,
                   file=args.run if args.run is not None and Path(args.run).is_file() else None)
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
    text = "\n".join(lines) + "\n"
    if out.status.plan.moves:
        rows = [["NAMESPACE", "PODGROUP", "OWNER", "POD", "FROM", "TO", unit_of(r).upper()]]
        for mv in out.status.plan.moves:
            owner = f"{mv.owner.kind}/{mv.owner.name}" if mv.owner else "-"
            for p in mv.pods:
                rows.append([mv.namespace, mv.pod_group_name, owner, p.name, p.from_node, p.to_node,
                             _amount(r, p.cards)])
        text += "\nMoves:\n" + table(rows)
        widened = [mv for mv in out.status.plan.moves if mv.footprint is not None]
        if widened:
            rows = [["NAMESPACE", "PODGROUP", "RESTART POLICY", "PODS RESTARTED", unit_of(r).upper(),
                     "RESTARTED WITHOUT MOVING"]]
            for mv in widened:
                fp = mv.footprint
                assert fp is not None
                names = ", ".join(fp.pod_names[:4]) + (f" (+{len(fp.pod_names) - 4})" if len(fp.pod_names) > 4 else "")
                rows.append([mv.namespace, mv.pod_group_name, fp.policy, str(fp.pods), _amount(r, fp.cards), names])
            text += "\nRestart policies widen the disruption:\n" + table(rows)
    if out.result.rejections:
        rows = [["REASON", "NODES"]] + [[k, str(v)] for k, v in out.result.rejections.items()]
        text += "\nOccupied nodes not vacated:\n" + table(rows)
    if isinstance(out.status, GoalRunStatus):
        text += goals_table(out.status)
    return text


def _amount(resource: str, written: int | str) -> str:
    """A status amount (``format_milli``'s int or milli string) as the resource's unit writes it."""
    return str(format_amount(resource, to_milli(written)))


def _unit_labels(resource: str, grid: list[list[str]]) -> list[list[str]]:
    """Row labels naming cards (``affected cards``, ``moved cards``) in the resource's own unit."""
    unit = unit_of(resource)
    return [[row[0].replace(" cards", f" {unit}"), *row[1:]] for row in grid]


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



# ---- compare -------------------------------------------------------------------------------------

_AMOUNTS = frozenset({"affectedCards", "movedCards"})
"""The compare rows that hold amounts of the run's resource (status values, ``format_milli``'s form)."""

def compare(args: argparse.Namespace, loaded: LoadedInput) -> str:
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
    grid = [header] + [[label, *["-" if r[key] is None else _amount(resource, r[key]) if key in _AMOUNTS
                                 else str(r[key]) for r in rows]] for label, key in fields]
    text = (f"RepackRun {run.name}: fragmentation before {round_half_up(frag.percent())}%\n"
            + table(_unit_labels(resource, grid)))
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
    for name in names:
        out = plan_run(loaded.snapshot, run, solver=name, options=options, weights=args.weights)
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
        [label, *["-" if r[key] is None else _amount(resource, r[key]) if key in _AMOUNTS else str(r[key])
                  for r in rows]] for label, key in fields]
    return f"RepackRun {run.name}: goals\n" + table(_unit_labels(resource, grid))


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

