"""Where a command's snapshot comes from (files or the live cluster), the run it names, and the status
write-back to the live cluster's run."""

from __future__ import annotations

import argparse
import logging
import os
import time
from pathlib import Path
from typing import Any

from optplan import api
from optplan.adapters import kube
from optplan.adapters.kubefile import LoadedInput, load_files, pick_run
from optplan.controller.status import generation_of, rfc3339, stamped
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
    cluster = api.read_cluster(args.kubeconfig, args.context, timeout=args.request_timeout, deadline=args.api_deadline)
    args.snapshots = []
    args.source = cluster.source
    log.info("read %d nodes and %d pods from %s", len(cluster.snapshot.nodes), len(cluster.snapshot.pods),
             cluster.source)
    return LoadedInput(snapshot=cluster.snapshot, runs=cluster.runs)


def write_status(args: argparse.Namespace, run: RepackRun, status: dict[str, Any]) -> None:
    if not live(args):
        raise InputError("--write-status needs a live cluster (--kubeconfig/--context), not SNAPSHOT files",
                         field="--write-status")
    if args.run is not None and Path(args.run).is_file():
        raise InputError("--write-status needs the run by name from the cluster, not a file", field="--run")
    version = str((run.raw.get("metadata") or {}).get("resourceVersion") or "")
    if not version:
        raise InputError("the run has no metadata.resourceVersion to guard the write", obj=f"RepackRun/{run.name}",
                         field="metadata.resourceVersion")
    # as the controller writes it: conditions stamped (metav1.Condition), relocations merged by key
    status = stamped(run.raw.get("status") or {}, status, now=rfc3339(time.time()),
                     generation=generation_of(run.raw))
    with kube.connect(args.kubeconfig, args.context, timeout=args.request_timeout,
                      deadline=args.api_deadline) as client:
        written = client.patch_repack_run_status(run.name, status, version)
    new = (written.get("metadata") or {}).get("resourceVersion")
    log.warning("wrote status of RepackRun %s (resourceVersion %s -> %s)", run.name, version, new)


def pick_run_arg(args: argparse.Namespace, loaded: LoadedInput) -> RepackRun:
    run = pick_run(loaded, args.run, args.snapshots or [getattr(args, "source", "cluster")])
    assert run is not None  # required=True raises instead
    return run


def cluster(args: argparse.Namespace, loaded: LoadedInput) -> api.Cluster:
    return api.Cluster(snapshot=loaded.snapshot, runs=loaded.runs,
                       source=", ".join(args.snapshots) or getattr(args, "source", "cluster"))

