"""The optplan command line: parse, call, print. Bad input exits 2 with one line; bugs exit 1.

One module per command, each with ``add_arguments(parser)`` and ``run(args) -> str`` (the text to print):
``frag``, ``repack``, ``compare``, ``queues``, ``spot_capacity``, ``place``, ``provision``, ``reclaim_spot``,
``render``, ``import_openb`` (``import openb``), ``replay``, ``bench``, ``snapshot``, ``nominate``, ``verify``,
``serve``, ``controller``, ``generate``, ``throttle``. ``COMMANDS`` names each command's module and one-line help;
a module is imported only when its command is parsed or run, so ``optplan --help`` imports no command and
``optplan CMD`` no other command's planners, plots or clients. The commands share ``goalflags``
(repack's and compare's goal flags), ``cluster`` (the input as ``api.Cluster``, the status write-back to
a live run), ``sources`` (where a snapshot comes from: files, or the live cluster through the API,
imported only then; the run it names), ``units`` (amounts in a resource's unit) and ``options`` (every
option two commands declare, declared once, and the argument types; adapters, solvers, experiments and
the plan server declare none). This module builds the parser, runs the command and maps errors to exit
codes. The CLI is the top layer: it imports the plan server, the controller, the experiments, solvers,
adapters and the API directly; inside it (pyproject's contract), commands -> goalflags -> cluster ->
sources | units -> options.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Collection, Sequence
from typing import Any, NamedTuple

from optplan import __version__
from optplan.errors import InputError, OptplanError, PlanInvalidError, printable

__all__ = ["COMMANDS", "build_parser", "main", "parse"]

log = logging.getLogger("optplan")


class Command(NamedTuple):
    """A command's module (``add_arguments``, ``run``) and its one-line help in ``optplan --help``."""

    module: str
    help: str


COMMANDS: dict[str, Command] = {
    "frag": Command("optplan.cli.frag", "measure fragmentation of a target resource"),
    "repack": Command("optplan.cli.repack", "plan a RepackRun (DryRun) and print it with its status"),
    "compare": Command("optplan.cli.compare", "plan with the greedy and the exact solver and print them side by side"),
    "queues": Command("optplan.cli.queues",
                      "the queue tree: quotas, realCapability, allocation, admission violations"),
    "spot-capacity": Command("optplan.cli.spot_capacity", "each tenant's spot queue capability by seed 002's formula"),
    "place": Command("optplan.cli.place",
                     "place pending VCJobs and bare PodGroups: gang, predicates, queue capability, network topology"),
    "provision": Command("optplan.cli.provision",
                         "the cheapest nodes to add from a catalogue so that pending gangs place"),
    "reclaim-spot": Command("optplan.cli.reclaim_spot",
                            "choose spot jobs to delete so that N units are freed (seed 002 §6.5)"),
    "render": Command("optplan.cli.render", "draw the cluster's nodes before and after a plan as a PNG"),
    "import": Command("optplan.cli.import_openb", "turn a public trace into a snapshot with a RepackRun"),
    "replay": Command("optplan.cli.replay", "replay a GPU trace over time with a Repack policy, or sweeps"),
    "bench": Command("optplan.cli.bench", "run the benchmark suite and write a Markdown report with plots"),
    "snapshot": Command("optplan.cli.snapshot",
                        "read a live cluster through the kubernetes client into a snapshot file"),
    "nominate": Command("optplan.cli.nominate",
                        "Execute: the node to write into a replacement pod's nominatedNodeName"),
    "verify": Command("optplan.cli.verify",
                      "Execute: status.result, the final condition and actualNodeName after moves"),
    "serve": Command("optplan.cli.serve", "plan, place, nominate and verify over HTTP/JSON for a controller "
                                          "(binds 127.0.0.1; OpenAPI at /openapi.json)"),
    "controller": Command("optplan.cli.controller",
                          "watch RepackRuns and carry them out: DryRun plans, Execute evicts, nominates and "
                          "verifies (leader election, metrics, probes)"),
    "generate": Command("optplan.cli.generate", "write a seeded synthetic cluster snapshot with a RepackRun"),
    "throttle": Command("optplan.cli.throttle", "the large-job submission throttle: whether a new submission to "
                                                "a queue waits at the platform now, and until when"),
}
"""Every command, in ``optplan --help``'s order."""


def command_module(name: str) -> Any:
    """The module of command ``name``, imported now."""
    return importlib.import_module(COMMANDS[name].module)


def build_parser(commands: Collection[str] | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or of ``commands`` alone: the others are listed (``optplan --help``,
    the invalid-choice error) without their arguments, and their modules are not imported."""
    ap = argparse.ArgumentParser(
        prog="optplan",
        description="Optimization-based planning for Volcano-scheduled AI clusters: measure fragmentation, plan "
                    "Repack (defragmentation) runs exactly, within scope, budgets and scheduling constraints.")
    ap.add_argument("--version", action="version", version=f"optplan {__version__}")
    sub = ap.add_subparsers(dest="command", required=True)
    for name, command in COMMANDS.items():
        p = sub.add_parser(name, help=command.help)
        if commands is None or name in commands:
            command_module(name).add_arguments(p)
    return ap


def parse(argv: Sequence[str]) -> argparse.Namespace:
    """``argv`` parsed with the parser of the one command it names. argparse takes the first word that is
    not an option as the command (optplan's own options take no value) and parses the rest with that
    command's parser alone; any other first word is an error, or there is none (``--help``, ``--version``,
    the missing command), and argparse exits without a command's arguments."""
    first = next((w for w in argv if not w.startswith("-")), None)
    args = build_parser([first] if first in COMMANDS else []).parse_args(argv)
    if args.command != first:  # not expected: then with every command's arguments, as argparse would
        args = build_parser().parse_args(argv)
    return args


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
    args = parse(sys.argv[1:] if argv is None else argv)
    level = logging.WARNING if args.verbose == 0 else logging.INFO if args.verbose == 1 else logging.DEBUG
    handler = _log_to_stderr(level, service=args.command in SERVICE_COMMANDS)
    try:
        text = command_module(args.command).run(args)
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
