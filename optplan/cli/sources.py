"""Where a command's snapshot comes from (SNAPSHOT files or the live cluster) and the run it names. The
live cluster is read through ``optplan.api``, imported only then: a command on files loads neither the
API's planners nor the kubernetes client."""

from __future__ import annotations

import argparse
import logging
import os

from optplan.adapters.kubefile import LoadedInput, load_files, pick_run
from optplan.errors import InputError
from optplan.models.repack import RepackRun

log = logging.getLogger("optplan")


def live(args: argparse.Namespace) -> bool:
    return not args.snapshots


def load(args: argparse.Namespace) -> LoadedInput:
    """SNAPSHOT files, or the live cluster when none are given; the snapshot's warnings are logged."""
    loaded = read(args)
    for w in loaded.snapshot.warnings:
        log.warning("%s", w)
    return loaded


def read(args: argparse.Namespace) -> LoadedInput:
    """SNAPSHOT files, or the live cluster when none are given."""
    if args.snapshots:
        if args.kubeconfig or args.context:
            raise InputError("give SNAPSHOT files or --kubeconfig/--context, not both", field="--kubeconfig")
        return load_files(args.snapshots)
    if not (args.kubeconfig or args.context or os.environ.get("KUBERNETES_SERVICE_HOST")
            or os.environ.get("KUBECONFIG")):
        raise InputError("no snapshot: pass SNAPSHOT files, or --kubeconfig/--context to read a live cluster",
                         field="SNAPSHOT")
    from optplan import api  # only for a live cluster: see the module docstring

    cluster = api.read_cluster(args.kubeconfig, args.context, timeout=args.request_timeout, deadline=args.api_deadline)
    args.snapshots = []
    args.source = cluster.source
    log.info("read %d nodes and %d pods from %s", len(cluster.snapshot.nodes), len(cluster.snapshot.pods),
             cluster.source)
    return LoadedInput(snapshot=cluster.snapshot, runs=cluster.runs)


def pick_run_arg(args: argparse.Namespace, loaded: LoadedInput) -> RepackRun:
    run = pick_run(loaded, args.run, args.snapshots or [getattr(args, "source", "cluster")])
    assert run is not None  # required=True raises instead
    return run
