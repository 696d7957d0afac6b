"""What a command that talks to the API needs besides its snapshot: the input as ``api.Cluster`` (``nominate``,
``verify``), and the status write-back into the live cluster's run (``repack --write-status``, ``verify
--write-status``)."""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path
from typing import Any

from optplan import api
from optplan.adapters import kube
from optplan.adapters.kubefile import LoadedInput
from optplan.cli.sources import live
from optplan.controller.status import generation_of, rfc3339, stamped
from optplan.errors import InputError
from optplan.models.repack import RepackRun

log = logging.getLogger("optplan")


def cluster(args: argparse.Namespace, loaded: LoadedInput) -> api.Cluster:
    return api.Cluster(snapshot=loaded.snapshot, runs=loaded.runs,
                       source=", ".join(args.snapshots) or getattr(args, "source", "cluster"))


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
