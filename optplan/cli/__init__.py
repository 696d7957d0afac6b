"""The optplan command line: parse, call, print. Bad input exits 2 with one line; bugs exit 1.

One module per command family: ``repack`` (repack, compare, frag), ``place``, ``provision``, ``spot`` (reclaim-spot),
``queues`` (queues, spot-capacity), ``execute`` (nominate, verify), ``replay``, ``controller``, ``sources``
(snapshot, generate, and where a command's snapshot comes from); ``render``, ``import openb``, ``bench`` and
``serve`` are run by their own modules (``adapters.render``, ``adapters.openb``, ``optplan.experiments.bench``,
``optplan.serve``). This module builds the parser and dispatches. The CLI is the top layer: it imports
the plan server, the controller, solvers, adapters and the API directly.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from optplan import __version__
from optplan.adapters import generate as generate_mod
from optplan.adapters import openb as openb_mod
from optplan.adapters import render
from optplan.adapters.args import add_live_cluster, add_snapshot_source, int_in, positive_float
from optplan.adapters.kubefile import LoadedInput
from optplan.cli import controller, execute, place, provision, queues, repack, replay, serve, sources, spot
from optplan.cli.execute import verification_status
from optplan.errors import InputError, OptplanError, PlanInvalidError, printable
from optplan.experiments import bench
from optplan.models.repack import Weights
from optplan.solvers.core import registry
from optplan.solvers.repack.base import planner_names

__all__ = ["build_parser", "main", "verification_status"]

log = logging.getLogger("optplan")

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
                       help=f"time budget for planning; docs/limits.md says what it covers (default {limit:g})")
        p.add_argument("-v", "--verbose", action="count", default=0,
                       help="log progress to stderr (incumbents with time, objective and bound)")

    def planning(p: argparse.ArgumentParser) -> None:
        p.add_argument("--run", metavar="RUN",
                       help="a file holding the RepackRun, or the name of one inside the snapshots")
        p.add_argument("--weights", type=repack.parse_weights, default=Weights(), metavar=repack.WEIGHTS_METAVAR,
                       help=repack.weights_help())
        p.add_argument("--workers", type=int_in(1, 64), default=1, help="solver worker threads, 1-64 (default 1)")
        p.add_argument("--seed", type=int_in(0, 2**31 - 1), default=0, help="solver random seed (default 0)")
        p.add_argument("--deterministic", action="store_true",
                       help="time limits count work (solver deterministic time, greedy evaluations), not wall "
                            "seconds: the same input gives the same plan on any machine and under any load "
                            "(a wall-clock cap of 3x the limit stays)")

    p = sub.add_parser("frag", help="measure fragmentation of a target resource")
    common(p, ("table", "yaml", "json"), "table", 10.0)
    p.add_argument("--resource", required=True, metavar="R", help="target resource, e.g. nvidia.com/gpu")
    p.add_argument("--hypernodes", action="store_true",
                   help="per HyperNode tier: HyperNodes holding R, how many are free of R now, and the most "
                        "compacting R could free (exact, or proven bounds)")
    p.add_argument("--tier", type=int_in(0, 2**31 - 1), action="append", metavar="T",
                   help="only this HyperNode tier (repeatable; implies --hypernodes)")
    p.add_argument("--pending", action="store_true",
                   help="pendingByFragmentation: pending gangs whose R fits the free R in total and their "
                        "queue's quota, but that the placement greedy cannot place")

    p = sub.add_parser("repack", help="plan a RepackRun (DryRun) and print it with its status")
    common(p, ("yaml", "json", "table"), "yaml", 30.0)
    planning(p)
    p.add_argument("--solver", choices=sorted({*planner_names(), *registry.names("goals")}), default=registry.DEFAULT,
                   help=f"{registry.HELP['repack']}; {registry.HELP['goals']}")
    p.add_argument("--timings", action="store_true",
                   help="record status.plan.solver.wallSeconds (output then differs from run to run)")
    p.add_argument("--write-status", action="store_true",
                   help="live cluster only: patch the DryRun RepackRun's status subresource with the plan, "
                        "refused (409) if the run changed since it was read")
    repack.add_goal_arguments(p)

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
    queues.add_payg_arguments(p)

    p = sub.add_parser("spot-capacity", help="each tenant's spot queue capability by seed 002's formula")
    report(p)
    p.add_argument("--resource", default="nvidia.com/gpu", metavar="R",
                   help="the resource shared out (default nvidia.com/gpu); cpu and memory follow it")

    p = sub.add_parser("place", help="place pending VCJobs: gang, predicates, queue capability, network topology")
    place.add_arguments(p)

    p = sub.add_parser("provision", help="the cheapest nodes to add from a catalogue so that pending gangs place")
    provision.add_arguments(p)

    p = sub.add_parser("reclaim-spot", help="choose spot jobs to delete so that N units are freed (seed 002 §6.5)")
    spot.add_arguments(p)

    p = sub.add_parser("render", help="draw the cluster's nodes before and after a plan as a PNG")
    render.add_arguments(p)

    imp = sub.add_parser("import", help="turn a public trace into a snapshot with a RepackRun")
    isub = imp.add_subparsers(dest="source", required=True)
    p = isub.add_parser("openb", help="Alibaba openb GPU trace (node and pod CSVs) -> snapshot")
    openb_mod.add_arguments(p)

    replay.add_arguments(sub.add_parser("replay", help="replay a GPU trace over time with a Repack policy, or sweeps"))
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

    p = sub.add_parser("controller", help="watch RepackRuns and carry them out: DryRun plans, Execute evicts, "
                                          "nominates and verifies (leader election, metrics, probes)")
    controller.add_arguments(p)

    p = sub.add_parser("generate", help="write a seeded synthetic cluster snapshot with a RepackRun")
    generate_mod.add_arguments(p)
    p.add_argument("-v", "--verbose", action="count", default=0, help="log to stderr")
    return ap


class _StderrHandler(logging.StreamHandler):
    """Our own handler on the ``optplan`` logger, replaced on every call of main(); it writes to whatever
    ``sys.stderr`` is when a record is emitted (a caller or a test may have swapped it since). While
    ``held`` is a list, records wait in it: main() prints them once the command has succeeded (or hit a
    bug), and drops them when it refuses its input, so that a refusal is one line."""

    held: list[logging.LogRecord] | None = None

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass

    def emit(self, record: logging.LogRecord) -> None:
        if self.held is not None:
            self.held.append(record)
        else:
            super().emit(record)

    def print_held(self) -> None:
        held, self.held = self.held or [], None
        for record in held:
            super().emit(record)


class _OneLineFormatter(logging.Formatter):
    """A warning at the default verbosity, in the form of the error line: ``optplan: warning: ...``,
    one printable line, no timestamp."""

    def format(self, record: logging.LogRecord) -> str:
        return f"optplan: {record.levelname.lower()}: {_one_line(record.getMessage())}"


SERVICE_COMMANDS = frozenset({"serve", "controller"})
"""Long-running commands: their log is their output, timestamped and written as it comes at every
verbosity."""


def _log_to_stderr(level: int, *, service: bool = False) -> _StderrHandler:
    """Progress logs (-v, -vv) and a service's log are timestamped; a one-shot command at the default
    verbosity shows only warnings, each one line like the error line, held for the command's outcome
    (``_StderrHandler``)."""
    logger = logging.getLogger("optplan")
    for h in [h for h in logger.handlers if isinstance(h, _StderrHandler)]:
        logger.removeHandler(h)
    handler = _StderrHandler(sys.stderr)
    if level >= logging.WARNING and not service:
        handler.setFormatter(_OneLineFormatter())
        handler.held = []
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(name)s: %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(level)
    return handler


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    level = logging.WARNING if args.verbose == 0 else logging.INFO if args.verbose == 1 else logging.DEBUG
    handler = _log_to_stderr(level, service=args.command in SERVICE_COMMANDS)
    try:
        text = _dispatch(args)
    except InputError as e:
        return _refuse(f"optplan: error: {_one_line(str(e))}")
    except PlanInvalidError as e:
        handler.print_held()
        print(f"optplan: internal error (a bug, please report it): {_one_line(str(e))}", file=sys.stderr)
        return 1
    except OptplanError as e:
        return _refuse(f"optplan: error: {_one_line(str(e))}")
    except KeyboardInterrupt:
        handler.print_held()
        print("optplan: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # a bug: one line by default, the traceback with -v
        handler.print_held()
        if args.verbose:
            log.exception("internal error")
        hint = "" if args.verbose else "; rerun with -v for the traceback"
        print(f"optplan: internal error (a bug, please report it): {type(e).__name__}: "
              f"{_one_line(str(e), 300)}{hint}", file=sys.stderr)
        return 1
    handler.print_held()
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:  # `optplan ... | head`: the reader left; not an error worth a traceback
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return 0


def _refuse(line: str) -> int:
    """Bad input: the one error line alone (warnings held at the default verbosity are dropped), exit 2."""
    print(line, file=sys.stderr)
    return 2


def _one_line(text: str, limit: int | None = None) -> str:
    """A message as one printable line: control, line-break and bidi characters escaped, cut at ``limit``."""
    out = printable(text)
    return out if limit is None or len(out) <= limit else out[:limit] + "…"


def _dispatch(args: argparse.Namespace) -> str:
    if args.command == "bench":
        return bench.run(args)
    if args.command == "replay":
        return replay.run(args)
    if args.command == "import":
        return openb_mod.run(args)
    if args.command == "generate":
        return sources.generate(args)
    if args.command == "snapshot":
        return sources.snapshot(args)
    if args.command == "serve":
        return serve.run(args)
    if args.command == "controller":
        return controller.run(args)
    if args.command == "provision":
        return provision.run(args)
    loaded = sources.load(args)
    for w in loaded.snapshot.warnings:
        log.warning("%s", w)
    commands: dict[str, Callable[[argparse.Namespace, LoadedInput], str]] = {
        "frag": repack.frag, "compare": repack.compare, "place": place.run, "render": render.run,
        "reclaim-spot": spot.run, "queues": queues.queues, "spot-capacity": queues.spot_capacity_report,
        "nominate": execute.nominate, "verify": execute.verify}
    return commands.get(args.command, repack.repack)(args, loaded)
