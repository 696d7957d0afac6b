"""The options several commands share, each declared here once, and the argument types they parse with.

A command module calls these from its ``add_arguments``: ``snapshot_source`` (SNAPSHOT files or the live
cluster), ``live_cluster`` (``--kubeconfig``, ``--context``, the API limits), ``output_format`` and
``output_file`` (``-o/--output``), ``verbose`` (``-v``), ``time_limit``, ``workers``, ``seed``,
``deterministic``, ``solver``, ``now``, ``timings``, ``write_status``, ``run_ref`` (``--run``),
``weights`` and ``scheduler_conf``. A help text that differs from
command to command is an argument; the flag, its type and its default are written here. Nothing in this
module imports a planner: ``optplan CMD --help`` builds one command's options and no more.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from optplan.adapters.kubelimits import API_DEADLINE, REQUEST_TIMEOUT
from optplan.models.limits import MAX_BINPACK_WEIGHT, MAX_WEIGHT, WEIGHT_DIGITS
from optplan.models.placement import BinpackWeights
from optplan.models.repack import DIMENSIONS, Weights

MAX_SECONDS = 7 * 86400.0
"""The longest time limit accepted (a week): a limit must end."""

MAX_SEED = 2**31 - 1
MAX_WORKERS = 64


class Declares(Protocol):
    """A parser or an argument group: what an option is declared on."""

    def add_argument(self, *names: str, **kwargs: Any) -> Any: ...


# ---- argument types -----------------------------------------------------------------------------

def positive_float(text: str) -> float:
    """A finite number in (0, a week] (time limits); argparse reports anything else as a usage error."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (v > 0 and math.isfinite(v)):  # also rejects nan
        raise argparse.ArgumentTypeError(f"must be a positive finite number: {text!r}")
    if v > MAX_SECONDS:
        raise argparse.ArgumentTypeError(f"at most {MAX_SECONDS:g} seconds (a week): {text!r}")
    return v


def int_in(lo: int, hi: int) -> Callable[[str], int]:
    """An argparse type: a decimal integer (ASCII digits) in [lo, hi]."""
    def parse(text: str) -> int:
        t = text.strip()
        value = int(t) if t.isascii() and t.lstrip("+-").isdigit() and len(t) <= 20 else None
        if value is None or not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"expected an integer in [{lo}, {hi}], got {text!r}")
        return value
    parse.__name__ = "integer"  # argparse names the type in its message
    return parse


def parse_dist(text: str) -> tuple[tuple[int, float], ...]:
    """``S:W,...``: sizes (>= 1) and their weights (>= 0; a size alone weighs 1)."""
    out = []
    for part in text.split(","):
        size, sep, weight = part.partition(":")
        try:
            pair = (int(size), float(weight) if sep else 1.0)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected SIZE:WEIGHT pairs separated by commas: {text!r}") from None
        if pair[0] < 1 or not pair[1] >= 0:
            raise argparse.ArgumentTypeError(f"sizes must be >= 1 and weights >= 0: {text!r}")
        out.append(pair)
    return tuple(out)


def parse_share(text: str) -> float:
    """A share in [0, 1]."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 <= v <= 1:
        raise argparse.ArgumentTypeError(f"must be within 0..1: {text!r}")
    return v


def non_negative(text: str) -> int:
    """An integer >= 0."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {text!r}")
    return v


def positive(text: str) -> int:
    """An integer >= 1."""
    v = non_negative(text)
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return v


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


# ---- where the snapshot comes from --------------------------------------------------------------

def parse_binpack(text: str) -> BinpackWeights:
    """``weight=10,cpu=5,memory=2,nvidia.com/gpu=10``: Volcano's binpack arguments (others default to 1)."""
    fields: dict[str, int] = {}
    extra: dict[str, int] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        name, sep, value = part.partition("=")
        v = value.strip()
        w = int(v) if v.isascii() and v.isdigit() and len(v) <= 6 else -1
        if not sep or not name or not 0 <= w <= MAX_BINPACK_WEIGHT:
            raise argparse.ArgumentTypeError(f"expected NAME=WEIGHT with an integer weight in [0, "
                                             f"{MAX_BINPACK_WEIGHT}], got {part!r}")
        if name in ("weight", "cpu", "memory"):
            fields[name] = w
        else:
            extra[name] = w
    return BinpackWeights(**fields, resources=extra)


def scheduler_conf(p: Declares) -> None:
    """``--scheduler-conf FILE``: the vc-scheduler configuration to plan for (``adapters.schedconf``)."""
    p.add_argument("--scheduler-conf", default=None, metavar="FILE",
                   help="vc-scheduler's configuration to plan for: the YAML vc-scheduler reads (--scheduler-conf: "
                        "actions, tiers) or a dump of the volcano-scheduler ConfigMap; what optplan cannot model is "
                        "named in a warning (default: the volcano-scheduler ConfigMap read with the snapshot, a live "
                        "cluster's or one `optplan snapshot` wrote into the file, else seed 002's configuration, "
                        "docs/queues.md)")


def snapshot_source(p: argparse.ArgumentParser) -> None:
    """SNAPSHOT files, or a live cluster through ``--kubeconfig/--context`` (in-cluster config in a pod)."""
    p.add_argument("snapshots", nargs="*", metavar="SNAPSHOT",
                   help="kubectl get -o yaml|json output files; none: read the live cluster (--kubeconfig, "
                        "--context, $KUBECONFIG, or the in-cluster service account when running in a pod)")
    live_cluster(p)


def live_cluster(p: argparse.ArgumentParser, title: str = "live cluster (instead of SNAPSHOT files)", *,
                 timeout_alias: bool = False, per_call: bool = False) -> None:
    """``--kubeconfig``, ``--context`` and the limits of the API requests: ``args.request_timeout`` and
    ``args.api_deadline`` are ``kube.connect``'s ``timeout`` and ``deadline``. ``timeout_alias``: also
    accept ``--timeout`` (``optplan snapshot`` had it). ``per_call``: ``--api-deadline`` bounds each call
    (``kube.connect``'s ``call_deadline``: a long-running command such as the controller)."""
    g = p.add_argument_group(title)
    g.add_argument("--kubeconfig", metavar="PATH", help="kubeconfig file (default $KUBECONFIG, ~/.kube/config, "
                                                          "or the in-cluster service account in a pod)")
    g.add_argument("--context", metavar="NAME", help="kubeconfig context (default the current one)")
    names = ("--request-timeout", "--timeout") if timeout_alias else ("--request-timeout",)
    g.add_argument(*names, dest="request_timeout", type=positive_float, default=REQUEST_TIMEOUT, metavar="SECONDS",
                   help="total deadline of each API request, from connecting to the last byte of the answer "
                        f"(default {REQUEST_TIMEOUT:g})")
    g.add_argument("--api-deadline", type=positive_float, default=API_DEADLINE, metavar="SECONDS",
                   help=("deadline of each API call, its retries and their waits included "
                         if per_call else "deadline of all the command's API requests together, retries and their "
                                          "waits included ") + f"(default {API_DEADLINE:g})")


def run_ref(p: Declares, help: str) -> None:
    """``--run RUN``: a RepackRun in a file, or by name inside the snapshots."""
    p.add_argument("--run", metavar="RUN", help=help)


# ---- output and logging -------------------------------------------------------------------------

def output_format(p: Declares, formats: Sequence[str], default: str, help: str | None = None) -> None:
    """``-o/--output FORMAT``: yaml, json or table (kubectl's)."""
    p.add_argument("-o", "--output", choices=formats, default=default,
                   help=help if help is not None else f"output format (default {default})")


def output_file(p: Declares, metavar: str, help: str) -> None:
    """``-o/--output FILE``, required: a command that writes a file (or a folder) names it so."""
    p.add_argument("-o", "--output", required=True, metavar=metavar, help=help)


def verbose(p: Declares, help: str = "log to stderr") -> None:
    """``-v``: progress at INFO, ``-vv`` at DEBUG; ``main`` sets the log level from it."""
    p.add_argument("-v", "--verbose", action="count", default=0, help=help)


# ---- planning -----------------------------------------------------------------------------------

def time_limit(p: Declares, default: float | None, help: str, metavar: str = "SECONDS") -> None:
    """``--time-limit``: a positive number of seconds, at most a week."""
    p.add_argument("--time-limit", type=positive_float, default=default, metavar=metavar, help=help)


def workers(p: Declares) -> None:
    """``--workers``: solver worker threads."""
    p.add_argument("--workers", type=int_in(1, MAX_WORKERS), default=1,
                   help=f"solver worker threads, 1-{MAX_WORKERS} (default 1)")


def seed(p: Declares, help: str = "solver random seed (default 0)") -> None:
    """``--seed``: a solver's random seed, 0..2^31-1."""
    p.add_argument("--seed", type=int_in(0, MAX_SEED), default=0, help=help)


def now(p: Declares, help: str) -> None:
    """``--now RFC3339``: the clock a plan prices running times at (default: the current time)."""
    p.add_argument("--now", default=None, metavar="RFC3339", help=help)


def timings(p: Declares, help: str) -> None:
    """``--timings``: also record wall seconds (the output then differs from run to run)."""
    p.add_argument("--timings", action="store_true", help=help)


def write_status(p: Declares, help: str) -> None:
    """``--write-status``: patch the live cluster's run with the result."""
    p.add_argument("--write-status", action="store_true", help=help)


def deterministic(p: Declares, help: str) -> None:
    """``--deterministic``: time limits count work, not wall seconds."""
    p.add_argument("--deterministic", action="store_true", help=help)


def solver(p: Declares, choices: Sequence[str], default: str, help: str) -> None:
    """``--solver``: a planner of the command's family (``solvers.core.registry`` names them)."""
    p.add_argument("--solver", choices=choices, default=default, help=help)


def weights(p: Declares) -> None:
    """``--weights``: the disruption weights of a Repack plan."""
    p.add_argument("--weights", type=parse_weights, default=Weights(), metavar=WEIGHTS_METAVAR, help=weights_help())


# ---- the planning commands' groups (frag, repack, compare) -------------------------------------

def planning_inputs(p: argparse.ArgumentParser, formats: Sequence[str], default: str, limit: float) -> None:
    """``frag``, ``repack`` and ``compare``: the snapshot, the output format, the time budget and ``-v``."""
    snapshot_source(p)
    output_format(p, formats, default)
    time_limit(p, limit, f"time budget for planning; docs/limits.md says what it covers (default {limit:g})")
    verbose(p, "log progress to stderr (incumbents with time, objective and bound)")


def repack_planning(p: argparse.ArgumentParser) -> None:
    """``repack`` and ``compare``: the run, the weights, the vc-scheduler configuration (a run with goals
    places gangs as it says) and the solver's workers, seed and clock."""
    run_ref(p, "a file holding the RepackRun, or the name of one inside the snapshots")
    weights(p)
    scheduler_conf(p)
    workers(p)
    seed(p)
    deterministic(p, "time limits count work (solver deterministic time, greedy evaluations), not wall "
                     "seconds: the same input gives the same plan on any machine and under any load "
                     "(a wall-clock cap of 3x the limit stays)")


def report_inputs(p: argparse.ArgumentParser) -> None:
    """``queues`` and ``spot-capacity``: the snapshot, a table by default, ``-v``."""
    snapshot_source(p)
    output_format(p, ("table", "yaml", "json"), "table")
    verbose(p)
