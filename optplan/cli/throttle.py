"""``optplan throttle SNAPSHOT... --queue Q --priority-class C [--now RFC3339] [-o table|yaml|json]``: the
large-job submission throttle's decision (seed 002 §6.4.2, ``optplan.solvers.placement.throttle``): whether
a new submission of that class to the queue waits at the platform now, and until when at most. Exit 0 with
the answer, held or not; bad input (an unknown queue or class, a bad time) one line, exit 2."""

from __future__ import annotations

import argparse

from optplan import api
from optplan.adapters.output import dump, table
from optplan.cli import options
from optplan.cli.cluster import cluster
from optplan.cli.sources import load
from optplan.errors import InputError
from optplan.solvers.placement.throttle import TIMEOUT_SECONDS


def add_arguments(p: argparse.ArgumentParser) -> None:
    options.snapshot_source(p)
    p.add_argument("--queue", required=True, metavar="Q", help="the queue the job is submitted to")
    who = p.add_mutually_exclusive_group(required=True)
    who.add_argument("--priority-class", metavar="C",
                     help="the submission's PriorityClass (the snapshot's, else seed 002's: critical-job 1000, "
                          "large-job 800, normal-job 100, debug-job 50, spot-job 50)")
    who.add_argument("--priority", metavar="N",
                     help="the submission's priority value instead of a class")
    options.now(p, "the time of the decision, e.g. 2025-06-01T12:00:00Z (default: the current time)")
    p.add_argument("--timeout", type=options.positive_float, default=TIMEOUT_SECONDS, metavar="SECONDS",
                   help=f"the waiting mode ends this long after it began (default {TIMEOUT_SECONDS:g})")
    p.add_argument("--large-priority", type=options.int_in(-(2**31), 10**9), default=None, metavar="N",
                   help="jobs of at least this priority are large (default: the snapshot's large-job "
                        "PriorityClass, else 800)")
    options.output_format(p, ("table", "yaml", "json"), "table")
    options.verbose(p)


def priority_value(text: str | None) -> int | None:
    """``--priority``: an integer as a PriorityClass holds (-2^31..10^9), else one InputError line."""
    if text is None:
        return None
    t = text.strip()
    if not (t.isascii() and t.lstrip("+-").isdigit() and len(t) <= 11) or not -(2**31) <= int(t) <= 10**9:
        raise InputError(f"expected an integer in [-2147483648, 1000000000], got {text!r}", field="--priority")
    return int(t)


def run(args: argparse.Namespace) -> str:
    priority = priority_value(args.priority)
    loaded = load(args)
    hold = api.should_hold(cluster(args, loaded), args.queue, priority_class=args.priority_class, priority=priority,
                           now=args.now, timeout_seconds=args.timeout, large_priority=args.large_priority)
    doc = hold.to_dict()
    if args.output != "table":
        return dump(doc, args.output)
    rows = [["QUEUE", "PRIORITY", "HELD", "UNTIL", "LARGE JOB", "SINCE"],
            [hold.queue, str(hold.priority), "yes" if hold.held else "no", str(doc["until"] or "-"),
             hold.job or "-", str(doc["since"] or "-")]]
    return table(rows) + hold.reason + "\n"
