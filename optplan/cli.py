"""The optplan command line: parse, call, print. Bad input exits 2 with one line; bugs exit 1."""

from __future__ import annotations

import argparse
import logging
import math
import os
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from optplan import __version__, api, bench, serve
from optplan.adapters import generate as generate_mod
from optplan.adapters import kube, place_cli, render, spot_cli
from optplan.adapters import openb as openb_mod
from optplan.adapters.args import add_live_cluster, add_snapshot_source, int_in, positive_float
from optplan.adapters.kubefile import LoadedInput, load_files, pick_run
from optplan.adapters.output import dump, repack_run_document, status_dict, table, to_yaml, write_atomic
from optplan.errors import InputError, OptplanError, PlanInvalidError, printable
from optplan.models.limits import MAX_WEIGHT, WEIGHT_DIGITS
from optplan.models.quantity import format_milli
from optplan.models.repack import RepackRun
from optplan.solvers.base import PlanOptions, planner_names
from optplan.solvers.baselines import BASELINES
from optplan.solvers.frag import FragReport, fragmentation, round_half_up
from optplan.solvers.placement import jobs_to_place, place_jobs
from optplan.solvers.queues import QueueReport, SpotReport, format_amount, queue_report, spot_capacity
from optplan.solvers.repack import RepackOutcome, plan_repack
from optplan.solvers.rules import RepackProblem, Weights
from optplan.solvers.spot import reclaim_spot
from optplan.solvers.validate import plan_violations

log = logging.getLogger("optplan")


def _float_list(text: str) -> Weights:
    try:
        parts = [float(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"weights must be five numbers separated by commas: {text!r}") from None
    if len(parts) != 5 or any(not math.isfinite(p) or p < 0 or p > MAX_WEIGHT for p in parts):
        raise argparse.ArgumentTypeError(f"weights must be five finite numbers in [0, {MAX_WEIGHT:g}]: affected "
                                         "PodGroups, below minAvailable, affected cards, moved cards, moved pods")
    # rounded to the resolution the exact models use (0.0000001 reads as 0, as it would be planned)
    return Weights(*(round(p, WEIGHT_DIGITS) for p in parts))



def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="optplan",
        description="Optimization-based planning for Volcano-scheduled AI clusters: measure fragmentation, plan "
                    "Repack (defragmentation) runs exactly, within scope, budgets and scheduling constraints.")
    ap.add_argument("--version", action="version", version=f"optplan {__version__}")
    sub = ap.add_subparsers(dest="command", required=True)

    def common(p: argparse.ArgumentParser, formats: Sequence[str], default: str, limit: float) -> None:
        add_snapshot_source(p)
        p.add_argument("-o", "--output", choices=formats, default=default, help=f"output format (default {default})")
        p.add_argument("--time-limit", type=positive_float, default=limit, metavar="SECONDS",
                       help=f"time limit of each exact computation (default {limit:g})")
        p.add_argument("-v", "--verbose", action="count", default=0,
                       help="log progress to stderr (incumbents with time, objective and bound)")

    def planning(p: argparse.ArgumentParser) -> None:
        p.add_argument("--run", metavar="RUN",
                       help="a file holding the RepackRun, or the name of one inside the snapshots")
        p.add_argument("--weights", type=_float_list, default=Weights(), metavar="W1,W2,W3,W4,W5",
                       help="weights of affected PodGroups, below minAvailable, affected cards, moved cards, "
                            "moved pods (default 1.0,0.8,0.6,0.3,0.1)")
        p.add_argument("--workers", type=int_in(1, 64), default=1, help="solver worker threads, 1-64 (default 1)")
        p.add_argument("--seed", type=int_in(0, 2**31 - 1), default=0, help="solver random seed (default 0)")
        p.add_argument("--deterministic", action="store_true",
                       help="time limits count work (solver deterministic time, greedy evaluations), not wall "
                            "seconds: the same input gives the same plan on any machine and under any load "
                            "(a wall-clock cap of 3x the limit stays)")

    p = sub.add_parser("frag", help="measure fragmentation of a target resource")
    common(p, ("table", "yaml", "json"), "table", 10.0)
    p.add_argument("--resource", required=True, metavar="R", help="target resource, e.g. nvidia.com/gpu")

    p = sub.add_parser("repack", help="plan a RepackRun (DryRun) and print it with its status")
    common(p, ("yaml", "json", "table"), "yaml", 30.0)
    planning(p)
    p.add_argument("--solver", choices=planner_names(), default="auto",
                   help="auto (default): greedy, then CP-SAT hinted with it, the better plan wins")
    p.add_argument("--timings", action="store_true",
                   help="record status.plan.solver.wallSeconds (output then differs from run to run)")
    p.add_argument("--write-status", action="store_true",
                   help="live cluster only: patch the DryRun RepackRun's status subresource with the plan, "
                        "refused (409) if the run changed since it was read")

    p = sub.add_parser("compare", help="plan with the greedy and the exact solver and print them side by side")
    common(p, ("table", "yaml", "json"), "table", 30.0)
    planning(p)
    p.add_argument("--solvers", default="greedy,cpsat", metavar="LIST",
                   help=f"comma-separated solvers to compare (default greedy,cpsat; from {', '.join(planner_names())})")

    def report(p: argparse.ArgumentParser) -> None:
        add_snapshot_source(p)
        p.add_argument("-o", "--output", choices=("table", "yaml", "json"), default="table",
                       help="output format (default table)")
        p.add_argument("-v", "--verbose", action="count", default=0, help="log to stderr")

    p = sub.add_parser("queues", help="the queue tree: quotas, realCapability, allocation, admission violations")
    report(p)
    p.add_argument("--flat", action="store_true",
                   help="account as the capacity plugin without enableHierarchy (default: with it)")

    p = sub.add_parser("spot-capacity", help="each tenant's spot queue capability by seed 002's formula")
    report(p)
    p.add_argument("--resource", default="nvidia.com/gpu", metavar="R",
                   help="the resource shared out (default nvidia.com/gpu); cpu and memory follow it")

    p = sub.add_parser("place", help="place pending VCJobs: gang, predicates, queue capability, network topology")
    place_cli.add_arguments(p)

    p = sub.add_parser("reclaim-spot", help="choose spot jobs to delete so that N units are freed (seed 002 §6.5)")
    spot_cli.add_arguments(p)

    p = sub.add_parser("render", help="draw the cluster's nodes before and after a plan as a PNG")
    render.add_arguments(p)

    imp = sub.add_parser("import", help="turn a public trace into a snapshot with a RepackRun")
    isub = imp.add_subparsers(dest="source", required=True)
    p = isub.add_parser("openb", help="Alibaba openb GPU trace (node and pod CSVs) -> snapshot")
    openb_mod.add_arguments(p)

    p = sub.add_parser("bench", help="run the benchmark suite and write a Markdown report with plots")
    bench.add_arguments(p)

    p = sub.add_parser("snapshot", help="read a live cluster through the kubernetes client into a snapshot file")
    add_live_cluster(p, "live cluster", timeout_alias=True)
    p.add_argument("-o", "--output", required=True, metavar="FILE.yaml", help="write the snapshot here")
    p.add_argument("--page-size", type=int_in(1, 100_000), default=500, metavar="N",
                   help="objects per list request (default 500)")
    p.add_argument("-v", "--verbose", action="count", default=0, help="log to stderr")

    p = sub.add_parser("nominate", help="Execute: the node to write into a replacement pod's nominatedNodeName")
    add_snapshot_source(p)
    p.add_argument("--run", metavar="RUN", help="the Execute RepackRun (file or name; default the only one)")
    p.add_argument("--victim", required=True, metavar="POD",
                   help="the evicted pod, NAME or NAMESPACE/NAME, as in status.relocations (or status.plan.moves)")
    p.add_argument("--replacement", metavar="POD", help="the replacement pod (default: the victim's name, as a "
                                                         "VCJob or StatefulSet recreates it)")
    p.add_argument("-o", "--output", choices=("yaml", "json", "table"), default="yaml", help="default yaml")
    p.add_argument("-v", "--verbose", action="count", default=0, help="log to stderr")

    p = sub.add_parser("verify", help="Execute: status.result, the final condition and actualNodeName after moves")
    add_snapshot_source(p)
    p.add_argument("--run", metavar="RUN", help="the Execute RepackRun (file or name; default the only one)")
    p.add_argument("--time-limit", type=positive_float, default=10.0, metavar="SECONDS",
                   help="time limit of the theoretical minimum (default 10)")
    p.add_argument("--write-status", action="store_true",
                   help="live cluster only: patch phase, conditions, result and relocations into the run's status")
    p.add_argument("-o", "--output", choices=("yaml", "json", "table"), default="yaml", help="default yaml")
    p.add_argument("-v", "--verbose", action="count", default=0, help="log to stderr")

    p = sub.add_parser("serve", help="plan, place, nominate and verify over HTTP/JSON for a controller "
                                     "(binds 127.0.0.1; OpenAPI at /openapi.json)")
    serve.add_arguments(p)

    p = sub.add_parser("generate", help="write a seeded synthetic cluster snapshot with a RepackRun")
    generate_mod.add_arguments(p)
    p.add_argument("-v", "--verbose", action="count", default=0, help="log to stderr")
    return ap


class _StderrHandler(logging.StreamHandler):
    """Our own handler on the ``optplan`` logger, replaced on every call of main(); it writes to whatever
    ``sys.stderr`` is when a record is emitted (a caller or a test may have swapped it since)."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


def _log_to_stderr(level: int) -> None:
    logger = logging.getLogger("optplan")
    for h in [h for h in logger.handlers if isinstance(h, _StderrHandler)]:
        logger.removeHandler(h)
    handler = _StderrHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s: %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(level)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    level = logging.WARNING if args.verbose == 0 else logging.INFO if args.verbose == 1 else logging.DEBUG
    _log_to_stderr(level)
    try:
        text = _dispatch(args)
    except InputError as e:
        print(f"optplan: error: {_one_line(str(e))}", file=sys.stderr)
        return 2
    except PlanInvalidError as e:
        print(f"optplan: internal error (a bug, please report it): {_one_line(str(e))}", file=sys.stderr)
        return 1
    except OptplanError as e:
        print(f"optplan: error: {_one_line(str(e))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("optplan: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # a bug: one line by default, the traceback with -v
        if args.verbose:
            log.exception("internal error")
        hint = "" if args.verbose else "; rerun with -v for the traceback"
        print(f"optplan: internal error (a bug, please report it): {type(e).__name__}: "
              f"{_one_line(str(e), 300)}{hint}", file=sys.stderr)
        return 1
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:  # `optplan ... | head`: the reader left; not an error worth a traceback
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return 0


def _one_line(text: str, limit: int | None = None) -> str:
    """A message as one printable line: control, line-break and bidi characters escaped, cut at ``limit``."""
    out = printable(text)
    return out if limit is None or len(out) <= limit else out[:limit] + "…"


def _dispatch(args: argparse.Namespace) -> str:
    if args.command == "bench":
        return bench.run(args)
    if args.command == "import":
        return openb_mod.run(args)
    if args.command == "generate":
        return _generate(args)
    if args.command == "snapshot":
        return _snapshot(args)
    if args.command == "serve":
        return serve.run(args)
    loaded = _load(args)
    for w in loaded.snapshot.warnings:
        log.warning("%s", w)
    if args.command == "frag":
        return _frag(args, loaded)
    if args.command == "compare":
        return _compare(args, loaded)
    if args.command == "place":
        return place_cli.run(args, loaded, place_jobs, jobs_to_place)
    if args.command == "render":
        return render.run(args, loaded)
    if args.command == "reclaim-spot":
        return spot_cli.run(args, loaded, reclaim_spot)
    if args.command == "queues":
        return _queues(args, loaded)
    if args.command == "spot-capacity":
        return _spot_capacity(args, loaded)
    if args.command == "nominate":
        return _nominate(args, loaded)
    if args.command == "verify":
        return _verify(args, loaded)
    return _repack(args, loaded)


# ---- where the snapshot comes from -----------------------------------------------------------------

def _live(args: argparse.Namespace) -> bool:
    return not args.snapshots


def _load(args: argparse.Namespace) -> LoadedInput:
    """SNAPSHOT files, or the live cluster when none are given."""
    if args.snapshots:
        if args.kubeconfig or args.context:
            raise InputError("give SNAPSHOT files or --kubeconfig/--context, not both", field="--kubeconfig")
        return load_files(args.snapshots)
    if not (args.kubeconfig or args.context or os.environ.get("KUBERNETES_SERVICE_HOST")
            or os.environ.get("KUBECONFIG")):
        raise InputError("no snapshot: pass SNAPSHOT files, or --kubeconfig/--context to read a live cluster",
                         field="SNAPSHOT")
    cluster = api.read_cluster(args.kubeconfig, args.context, timeout=args.request_timeout, deadline=args.api_deadline)
    args.snapshots = []
    args.source = cluster.source
    log.info("read %d nodes and %d pods from %s", len(cluster.snapshot.nodes), len(cluster.snapshot.pods),
             cluster.source)
    return LoadedInput(snapshot=cluster.snapshot, runs=cluster.runs)


def _snapshot(args: argparse.Namespace) -> str:
    with kube.connect(args.kubeconfig, args.context, timeout=args.request_timeout, deadline=args.api_deadline,
                      page_size=args.page_size) as client:
        objects = client.snapshot_objects()
        host = client.host
    kube.write_snapshot(objects, args.output)
    kinds = Counter(str(o.get("kind")) for o in objects)
    listed = ", ".join(f"{n} {k}s" for k, n in sorted(kinds.items())) or "no objects"
    return f"wrote {args.output} from {host}: {listed}\n"


def _write_status(args: argparse.Namespace, run: RepackRun, status: dict[str, Any]) -> None:
    if not _live(args):
        raise InputError("--write-status needs a live cluster (--kubeconfig/--context), not SNAPSHOT files",
                         field="--write-status")
    if args.run is not None and Path(args.run).is_file():
        raise InputError("--write-status needs the run by name from the cluster, not a file", field="--run")
    version = str((run.raw.get("metadata") or {}).get("resourceVersion") or "")
    if not version:
        raise InputError("the run has no metadata.resourceVersion to guard the write", obj=f"RepackRun/{run.name}",
                         field="metadata.resourceVersion")
    with kube.connect(args.kubeconfig, args.context, timeout=args.request_timeout,
                      deadline=args.api_deadline) as client:
        written = client.patch_repack_run_status(run.name, status, version)
    new = (written.get("metadata") or {}).get("resourceVersion")
    log.warning("wrote status of RepackRun %s (resourceVersion %s -> %s)", run.name, version, new)


# ---- generate ------------------------------------------------------------------------------------

def _generate(args: argparse.Namespace) -> str:
    cfg = generate_mod.config_from_args(args)
    objs = generate_mod.generate(cfg)
    write_atomic(args.output, to_yaml({"apiVersion": "v1", "kind": "List", "items": objs}))
    kinds = Counter(o["kind"] for o in objs)
    return (f"wrote {args.output}: " + ", ".join(f"{n} {k}s" for k, n in sorted(kinds.items())) + "\n")


# ---- frag ----------------------------------------------------------------------------------------

def frag_dict(f: FragReport) -> dict[str, Any]:
    return {"resource": f.resource, "providers": f.providers, "occupied": f.occupied,
            "theoreticalMinimum": f.theoretical_min, "theoreticalMinimumProven": f.proven,
            "theoreticalMinimumUpperBound": f.upper_bound, "fragPercent": round_half_up(f.percent()),
            "fragPercentExact": str(f.percent()), **({"warning": f.warning} if f.warning is not None else {})}


def _frag(args: argparse.Namespace, loaded: LoadedInput) -> str:
    f = fragmentation(loaded.snapshot, args.resource, time_limit=args.time_limit)
    if args.output != "table":
        return dump(frag_dict(f), args.output)
    proven = "proven" if f.proven else f"best lower bound; a packing into {f.upper_bound} nodes is known"
    formula = f"(({f.occupied} - {f.theoretical_min}) / {f.providers})" if f.providers else "(no providers)"
    text = (f"resource            {printable(f.resource)}\n"
            f"providers           {f.providers}\n"
            f"occupied            {f.occupied}\n"
            f"theoretical minimum {f.theoretical_min} ({proven})\n"
            f"fragmentation       {round_half_up(f.percent())}%  {formula}\n")
    if f.warning is not None:
        text += f"warning             {printable(f.warning)}\n"
    return text


# ---- repack --------------------------------------------------------------------------------------

def _pick_run(args: argparse.Namespace, loaded: LoadedInput) -> RepackRun:
    run = pick_run(loaded, args.run, args.snapshots or [getattr(args, "source", "cluster")])
    assert run is not None  # required=True raises instead
    return run


def _repack(args: argparse.Namespace, loaded: LoadedInput) -> str:
    run = _pick_run(args, loaded)
    if args.write_status and run.spec.mode != "DryRun":
        raise InputError("optplan writes DryRun plans only; an Execute run's status belongs to its controller",
                         obj=f"RepackRun/{run.name}", field="spec.mode")
    options = PlanOptions(time_limit=args.time_limit, workers=args.workers, seed=args.seed,
                          deterministic=args.deterministic)
    out = plan_repack(loaded.snapshot, run, solver=args.solver, options=options, weights=args.weights)
    if args.write_status:
        _write_status(args, run, status_dict(out.status))
    if args.output == "table":
        return repack_table(out)
    return dump(repack_run_document(run, out.status, timings=args.timings), args.output)


def repack_table(out: RepackOutcome) -> str:
    s = out.status.plan.summary
    f = out.frag
    rec = out.result.record
    d = out.status.plan.disruption
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
        f"minAvailable, {d.affected_cards} cards affected, {d.moved_cards} cards moved, {d.moved_pods} pods moved",
        f"Solver:        {rec.name} ({rec.status}, {rec.wall_seconds}s)",
    ]
    text = "\n".join(lines) + "\n"
    if out.status.plan.moves:
        rows = [["NAMESPACE", "PODGROUP", "OWNER", "POD", "FROM", "TO", "CARDS"]]
        for mv in out.status.plan.moves:
            owner = f"{mv.owner.kind}/{mv.owner.name}" if mv.owner else "-"
            for p in mv.pods:
                rows.append([mv.namespace, mv.pod_group_name, owner, p.name, p.from_node, p.to_node, str(p.cards)])
        text += "\nMoves:\n" + table(rows)
        widened = [mv for mv in out.status.plan.moves if mv.footprint is not None]
        if widened:
            rows = [["NAMESPACE", "PODGROUP", "RESTART POLICY", "PODS RESTARTED", "CARDS", "RESTARTED WITHOUT MOVING"]]
            for mv in widened:
                fp = mv.footprint
                assert fp is not None
                names = ", ".join(fp.pod_names[:4]) + (f" (+{len(fp.pod_names) - 4})" if len(fp.pod_names) > 4 else "")
                rows.append([mv.namespace, mv.pod_group_name, fp.policy, str(fp.pods), str(fp.cards), names])
            text += "\nRestart policies widen the disruption:\n" + table(rows)
    if out.result.rejections:
        rows = [["REASON", "NODES"]] + [[k, str(v)] for k, v in out.result.rejections.items()]
        text += "\nOccupied nodes not vacated:\n" + table(rows)
    return text


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())


# ---- Execute-time calls ------------------------------------------------------------------------

def _cluster(args: argparse.Namespace, loaded: LoadedInput) -> api.Cluster:
    return api.Cluster(snapshot=loaded.snapshot, runs=loaded.runs,
                       source=", ".join(args.snapshots) or getattr(args, "source", "cluster"))


def _nominate(args: argparse.Namespace, loaded: LoadedInput) -> str:
    run = _pick_run(args, loaded)
    n = api.nominate(_cluster(args, loaded), run, args.victim, args.replacement)
    if args.output == "table":
        return (f"nominatedNodeName: {n.node_name or '(none)'}\n"
                f"planned node:      {n.planned_node_name or '-'}\n"
                f"feasible nodes:    {n.feasible_node_count}\n"
                f"reason:            {n.reason}\n")
    return dump(n.model_dump(by_alias=True, exclude_none=True, mode="json"), args.output)


def verification_status(v: Any) -> dict[str, Any]:
    """The status fields verify fills, as the run's status subresource spells them."""
    d: dict[str, Any] = v.model_dump(by_alias=True, exclude_none=True, mode="json")
    return {k: d[k] for k in ("phase", "conditions", "result", "relocations")}


def _verify(args: argparse.Namespace, loaded: LoadedInput) -> str:
    run = _pick_run(args, loaded)
    v = api.verify(_cluster(args, loaded), run, time_limit=args.time_limit)
    if args.write_status:
        _write_status(args, run, verification_status(v))
    if args.output != "table":
        d = verification_status(v)
        d["freedNodes"] = list(v.freed_nodes)
        d["stillOccupied"] = {k: list(h) for k, h in v.still_occupied.items()}
        return dump(d, args.output)
    c = v.conditions[0]
    r = v.result
    text = (f"RepackRun {run.name}: {v.phase} — {c.reason}\n{c.message}\n\n"
            f"frag after {r.frag_after_percent}%, freed {r.freed_node_count} node(s), moved {r.moved_card_count} "
            f"{run.spec.resource}, metrics verified: {'yes' if r.metrics_verified else 'no'}\n")
    rows = [["VICTIM", "PLANNED", "SELECTED", "ACTUAL", "REPLACEMENT", "NEW PODGROUP"]]
    for rel in v.relocations:
        pl = rel.placement
        rows.append([rel.key, rel.planned_node_name or "-", (pl.selected_node_name if pl else None) or "-",
                     (pl.actual_node_name if pl else None) or "-", (pl.replacement_pod_name if pl else None) or "-",
                     rel.replacement_pod_group_name or "-"])
    return text + "\n" + table(rows)


# ---- compare -------------------------------------------------------------------------------------

def _compare(args: argparse.Namespace, loaded: LoadedInput) -> str:
    names = [n.strip() for n in args.solvers.split(",") if n.strip()]
    known = [*planner_names(), *BASELINES]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise InputError(f"unknown solver(s) {', '.join(unknown) or '(none)'}; choose from "
                         f"{', '.join(known)}", field="--solvers")
    run = _pick_run(args, loaded)
    options = PlanOptions(time_limit=args.time_limit, workers=args.workers, seed=args.seed,
                          deterministic=args.deterministic)
    rows: list[dict[str, Any]] = []
    frag: FragReport | None = None
    for name in names:
        if name in BASELINES:
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
    grid = [header] + [[label, *["-" if r[key] is None else str(r[key]) for r in rows]] for label, key in fields]
    text = f"RepackRun {run.name}: fragmentation before {round_half_up(frag.percent())}%\n" + table(grid)
    broken = [r for r in rows if r["violations"]]
    for r in broken:
        text += f"\n{r['solver']} breaks optplan's rules {r['violations']} time(s), e.g. {r['example']}"
    return text + ("\n" if broken else "")


def _baseline_row(name: str, loaded: LoadedInput, run: RepackRun, options: PlanOptions,
                  weights: Weights) -> dict[str, Any]:
    """A peer's plan, validated and reported (never printed as a RepackRun: it may break the rules)."""
    problem = RepackProblem(loaded.snapshot, run, weights)
    result = BASELINES[name](problem, options)
    violations = plan_violations(problem, result.plan)
    d = result.disruption
    return {"solver": name, "status": result.record.status, "reason": "-",
            "freedNodes": len(result.plan.freed_nodes), "freedNodesBound": None, "fragAfterPercent": None,
            "affectedPodGroups": d.affected_pod_groups, "podGroupsBelowMinAvailable": d.below_min_available,
            "affectedCards": format_milli(d.affected_cards), "movedCards": format_milli(d.moved_cards),
            "movedPods": d.moved_pods, "weightedCost": round(d.weighted(weights), 4), "gapPercent": None,
            "violations": len(violations), "example": violations[0] if violations else None,
            "wallSeconds": result.record.wall_seconds}


# ---- queues --------------------------------------------------------------------------------------

def _amounts(m: dict[str, int], resources: Sequence[str] | None = None) -> dict[str, int | str]:
    keys = sorted(m) if resources is None else [r for r in resources if r in m]
    return {r: format_amount(r, m[r]) for r in keys}


def queue_report_dict(rep: QueueReport) -> dict[str, Any]:
    shown = rep.resources
    queues = []
    for a in rep.accounts.values():
        queues.append({
            "name": a.name, "parent": a.parent, "depth": a.depth, "leaf": a.leaf, "implicit": a.implicit,
            "state": a.state, "open": a.open, "reclaimable": a.reclaimable, "weight": a.weight,
            "guarantee": _amounts(a.guarantee), "deserved": _amounts(a.deserved), "capability": _amounts(a.capability),
            "realCapability": _amounts(a.real_capability, shown),
            "effectiveDeserved": _amounts(a.effective_deserved, shown),
            "allocated": _amounts(a.allocated, shown), "overDeserved": list(a.over_deserved)})
    return {"hierarchy": rep.hierarchical, "clusterTotal": _amounts(rep.cluster_total), "queues": queues,
            "violations": [{"queue": v.queue, "resource": v.resource, "rule": v.rule, "message": v.message}
                           for v in rep.violations],
            "unaccountedPods": [{"pod": p, "reason": why} for p, why in rep.unaccounted]}


def _queues(args: argparse.Namespace, loaded: LoadedInput) -> str:
    rep = queue_report(loaded.snapshot, hierarchical=not args.flat)
    if args.output != "table":
        return dump(queue_report_dict(rep), args.output)
    return queue_table(rep)


def queue_table(rep: QueueReport) -> str:
    def amt(r: str, m: dict[str, int], absent: str = "0") -> str:
        return str(format_amount(r, m[r])) if r in m else absent

    total = ", ".join(f"{r} {amt(r, rep.cluster_total)}" for r in rep.cluster_total) or "(no nodes)"
    text = (f"Queues (capacity plugin, hierarchy {'on' if rep.hierarchical else 'off'}); "
            f"cluster total: {total}\n\n")
    rows = [["QUEUE", "STATE", "RESOURCE", "GUARANTEE", "DESERVED", "CAPABILITY", "REALCAPABILITY", "ALLOCATED",
             "OVER"]]
    for a in rep.accounts.values():
        for i, r in enumerate(rep.resources):
            eff = amt(r, a.effective_deserved)
            if r in a.deserved and a.deserved[r] != a.effective_deserved.get(r):
                eff += f" (written {amt(r, a.deserved)})"
            state = a.state if a.open or a.state != "Open" else "Open (parent closed)"
            name = "  " * a.depth + a.name + (" *" if a.implicit else "")
            rows.append([name if i == 0 else "", state if i == 0 else "", r, amt(r, a.guarantee), eff,
                         amt(r, a.capability, "-"), amt(r, a.real_capability), amt(r, a.allocated),
                         "yes" if r in a.over_deserved else ""])
    text += table(rows)
    if any(a.implicit for a in rep.accounts.values()):
        text += "* not in the snapshot: Volcano always has it\n"
    if rep.violations:
        vrows = [["QUEUE", "RESOURCE", "RULE", "MESSAGE"]]
        vrows += [[v.queue, v.resource or "-", v.rule, v.message] for v in rep.violations]
        text += f"\nViolations ({len(rep.violations)}):\n" + table(vrows)
    else:
        text += "\nNo admission violations.\n"
    if rep.unaccounted:
        prows = [["POD", "WHY"]] + [[p, why] for p, why in rep.unaccounted[:20]]
        more = " (first 20 shown)" if len(rep.unaccounted) > 20 else ""
        text += f"\nRunning pods counted in no queue ({len(rep.unaccounted)}){more}:\n" + table(prows)
    return text


def spot_report_dict(rep: SpotReport) -> dict[str, Any]:
    r = rep.resource
    return {
        "resource": r,
        "formula": "capability(spot_i) = idle * subscription_i / total subscription (seed 002 §4.3), "
                   "rounded down; cpu and memory in the cluster's ratio to the resource",
        "clusterTotal": format_amount(r, rep.cluster_total.get(r, 0)),
        "subscriptionDeserved": format_amount(r, rep.subscription_total),
        "paygAllocated": format_amount(r, rep.payg_allocated), "idle": format_amount(r, rep.idle),
        "tenants": [{
            "tenant": t.tenant, "subscriptionQueues": list(t.subscription_queues),
            "subscription": format_amount(r, t.subscription), "paygQueues": list(t.payg_queues),
            "paygAllocated": format_amount(r, t.payg_allocated), "spotQueue": t.spot_queue,
            "capability": _amounts(t.capability), "current": _amounts(t.current), "changed": t.changed}
            for t in rep.tenants],
        "queues": [{"queue": q.queue, "tenant": q.tenant, "billingType": q.billing, "source": q.source}
                   for q in rep.queues]}


def _spot_capacity(args: argparse.Namespace, loaded: LoadedInput) -> str:
    rep = spot_capacity(loaded.snapshot, args.resource)
    if args.output != "table":
        return dump(spot_report_dict(rep), args.output)
    return spot_table(rep)


def spot_table(rep: SpotReport) -> str:
    r = rep.resource

    def amt(res: str, v: int) -> str:
        return str(format_amount(res, v))

    text = (f"Spot capability of {r} (seed 002 §4.3): idle x subscription_i / total subscription, rounded down\n"
            f"idle = cluster {amt(r, rep.cluster_total.get(r, 0))} - subscription deserved "
            f"{amt(r, rep.subscription_total)} - pay-as-you-go allocated {amt(r, rep.payg_allocated)} = "
            f"{amt(r, rep.idle)}\n\n")
    if not rep.tenants:
        return text + "No subscription, pay-as-you-go or spot queues found (see optplan/solvers/queues.py).\n"
    resources = sorted({res for t in rep.tenants for res in t.capability}, key=lambda x: (x != r, x))
    rows = [["TENANT", "SUBSCRIPTION", "PAYG ALLOCATED", "SPOT QUEUE", *[res.upper() for res in resources]]]
    for t in rep.tenants:
        cells = []
        for res in resources:
            cell = amt(res, t.capability[res]) if res in t.capability else "-"
            if t.spot_queue is not None and t.current.get(res) != t.capability.get(res):
                cell += f" (now {amt(res, t.current[res]) if res in t.current else 'unset'})"
            cells.append(cell)
        rows.append([t.tenant, amt(r, t.subscription), amt(r, t.payg_allocated), t.spot_queue or "-", *cells])
    return text + table(rows)
