"""Argument types shared by the command-line adapters."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

from optplan.adapters.kube import API_DEADLINE, REQUEST_TIMEOUT

MAX_SECONDS = 7 * 86400.0
"""The longest time limit accepted (a week): a limit must end."""


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


def add_snapshot_source(p: argparse.ArgumentParser) -> None:
    """SNAPSHOT files, or a live cluster through ``--kubeconfig/--context`` (in-cluster config in a pod)."""
    p.add_argument("snapshots", nargs="*", metavar="SNAPSHOT",
                   help="kubectl get -o yaml|json output files; none: read the live cluster (--kubeconfig, "
                        "--context, $KUBECONFIG, or the in-cluster service account when running in a pod)")
    add_live_cluster(p)


def add_live_cluster(p: argparse.ArgumentParser, title: str = "live cluster (instead of SNAPSHOT files)", *,
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
