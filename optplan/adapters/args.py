"""Argument types shared by the command-line adapters."""

from __future__ import annotations

import argparse


def positive_float(text: str) -> float:
    """A number > 0 (time limits); argparse reports anything else as a usage error."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not v > 0:  # also rejects nan
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return v


def add_snapshot_source(p: argparse.ArgumentParser) -> None:
    """SNAPSHOT files, or a live cluster through ``--kubeconfig/--context`` (in-cluster config in a pod)."""
    p.add_argument("snapshots", nargs="*", metavar="SNAPSHOT",
                   help="kubectl get -o yaml|json output files; none: read the live cluster (--kubeconfig, "
                        "--context, $KUBECONFIG, or the in-cluster service account when running in a pod)")
    g = p.add_argument_group("live cluster (instead of SNAPSHOT files)")
    g.add_argument("--kubeconfig", metavar="PATH", help="kubeconfig file (default $KUBECONFIG, ~/.kube/config)")
    g.add_argument("--context", metavar="NAME", help="kubeconfig context (default the current one)")
