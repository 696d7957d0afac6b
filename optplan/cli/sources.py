"""Where a command's snapshot comes from (SNAPSHOT files or the live cluster), the run it names and the
vc-scheduler configuration it plans for (``scheduler_conf``: ``--scheduler-conf``, its warnings logged). The
live cluster is read through ``optplan.api``, imported only then: a command on files loads neither the
API's planners nor the kubernetes client."""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Sequence

from optplan.adapters.kubefile import LoadedInput, load_files, pick_run
from optplan.adapters.schedconf import (
    CONFIGMAP_NAME,
    CONFIGMAP_NAMESPACE,
    configmap_scheduler_conf,
    read_scheduler_conf,
)
from optplan.errors import InputError
from optplan.models.queues import VCJob
from optplan.models.repack import RepackRun
from optplan.models.schedconf import SchedulerConf
from optplan.models.snapshot import Snapshot
from optplan.solvers.placement.jobs import jobs_to_place as waiting_jobs

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
    return LoadedInput(snapshot=cluster.snapshot, runs=cluster.runs, scheduler_configmap=cluster.scheduler_configmap)


def pick_run_arg(args: argparse.Namespace, loaded: LoadedInput) -> RepackRun:
    run = pick_run(loaded, args.run, args.snapshots or [getattr(args, "source", "cluster")])
    assert run is not None  # required=True raises instead
    return run


def jobs_to_place(snapshot: Snapshot, job_files: Sequence[str]) -> list[VCJob]:
    """The ``--job`` files' VCJobs and the snapshot's VCJobs and bare PodGroups with pods to place (the planner's rule:
    ``optplan.solvers.placement.jobs.jobs_to_place``)."""
    jobs = {j.key: j for j in waiting_jobs(snapshot)}
    if job_files:
        jobs.update(load_files(job_files).snapshot.jobs)
    if not jobs:
        raise InputError("no VCJob to place: pass --job JOB.yaml or include a pending VCJob (or a PodGroup with "
                         "pending pods) in a snapshot",
                         field="--job")
    return [jobs[k] for k in sorted(jobs)]


def scheduler_conf(args: argparse.Namespace, loaded: LoadedInput) -> SchedulerConf:
    """The configuration to plan under, its warnings logged (one line each): ``--scheduler-conf``'s; else the
    volcano-scheduler ConfigMap read with the snapshot (a live cluster's, or one a snapshot file holds:
    ``optplan snapshot`` writes it); else seed 002's, which a live cluster without the ConfigMap says once."""
    path = getattr(args, "scheduler_conf", None)
    if path is not None:
        conf = read_scheduler_conf(path)
    elif loaded.scheduler_configmap is not None:
        conf = configmap_scheduler_conf(loaded.scheduler_configmap, getattr(args, "source", None)
                                        or ", ".join(args.snapshots))
    else:
        if live(args) and getattr(args, "source", None):
            log.warning("%s has no ConfigMap %s/%s: planning for seed 002's scheduler configuration", args.source,
                        CONFIGMAP_NAMESPACE, CONFIGMAP_NAME)
        return SchedulerConf()
    for w in conf.warnings:
        log.warning("%s: %s", conf.source, w)
    return conf
