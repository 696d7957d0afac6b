"""``optplan controller``: watch RepackRuns and carry them out (optplan/controller/), until stopped;
``--once`` reconciles what is there once and prints each run's phase."""

from __future__ import annotations

import argparse
import logging
import signal
import socket
import threading
import time
import uuid
from types import FrameType

from optplan.adapters import kube
from optplan.adapters.output import table
from optplan.cli import options
from optplan.cli.options import int_in, positive_float
from optplan.controller import autotrigger
from optplan.controller.events import Recorder, instance_name
from optplan.controller.leader import ExecuteRecord, LeaderElector
from optplan.controller.manager import Controller
from optplan.controller.metrics import Metrics, stale_limit
from optplan.controller.reconcile import Settings
from optplan.errors import InputError
from optplan.solvers.core import registry
from optplan.solvers.repack.base import planner_names

log = logging.getLogger("optplan")

DEFAULTS = Settings()


def add_arguments(p: argparse.ArgumentParser) -> None:
    options.live_cluster(p, "cluster", per_call=True)
    g = p.add_argument_group("planning")
    options.solver(g, planner_names(), registry.DEFAULT, registry.HELP["repack"])
    options.time_limit(g, DEFAULTS.time_limit, f"time limit of each plan (default {DEFAULTS.time_limit:g})")
    options.workers(g)
    g = p.add_argument_group("Execute")
    g.add_argument("--cooldown", type=_seconds, default=DEFAULTS.cooldown, metavar="SECONDS",
                   help="after an Execute run that evicted pods, the wait before the next one starts "
                        f"(default {DEFAULTS.cooldown:g}: 10 minutes, as cluster-autoscaler's "
                        "--scale-down-delay-after-add, for the cluster to settle)")
    g.add_argument("--eviction-deadline", type=positive_float, default=DEFAULTS.eviction_deadline, metavar="SECONDS",
                   help="how long an eviction a PodDisruptionBudget refuses (429) is retried before the relocation "
                        f"is Rejected (default {DEFAULTS.eviction_deadline:g})")
    g.add_argument("--replacement-deadline", type=positive_float, default=DEFAULTS.replacement_deadline,
                   metavar="SECONDS", help="how long after its eviction a replacement may stay unbound before "
                                           f"TimedOut (default {DEFAULTS.replacement_deadline:g})")
    g = p.add_argument_group("pending gangs (off unless --admit-pending-after)")
    g.add_argument("--admit-pending-after", type=_seconds, metavar="SECONDS",
                   help="create a RepackRun with an admit goal for a gang pending by fragmentation (enough free "
                        "--admit-resource in total and quota, yet it cannot be placed) for this long, as this "
                        "process saw it (a restart starts the count again); at most one run per --cooldown, "
                        "never a second for a gang while its first has not finished")
    g.add_argument("--admit-mode", choices=autotrigger.MODES, default="DryRun",
                   help="spec.mode of the runs created (default DryRun; Execute moves pods: only when asked)")
    g.add_argument("--admit-resource", default=autotrigger.DEFAULT_RESOURCE, metavar="NAME", type=_resource,
                   help="the resource whose fragmentation is judged, and the goal's "
                        f"(default {autotrigger.DEFAULT_RESOURCE})")
    g.add_argument("--admit-ttl", type=int_in(0, 2**31 - 1), metavar="SECONDS",
                   help="spec.ttlSecondsAfterFinished of the runs created (default none: kept until deleted)")
    g = p.add_argument_group("leader election")
    g.add_argument("--leader-elect", action="store_true",
                   help="act only while holding a coordination.k8s.io Lease (run two replicas safely)")
    g.add_argument("--lease-namespace", default="optplan-system", metavar="NS",
                   help="namespace of the Lease, which also records the last Execute's completion for the "
                        "cooldown (default optplan-system)")
    g.add_argument("--lease-name", default="optplan-controller", metavar="NAME",
                   help="name of the Lease (default optplan-controller)")
    g.add_argument("--identity", metavar="ID", help="this replica's holder identity (default hostname_uuid)")
    g = p.add_argument_group("serving")
    g.add_argument("--metrics-address", default="0.0.0.0:8080", metavar="HOST:PORT",
                   help="/metrics, /healthz and /readyz (default 0.0.0.0:8080; 'off': none)")
    g.add_argument("--metrics-port", type=int_in(0, 65535), metavar="PORT",
                   help="the port of --metrics-address alone")
    p.add_argument("--once", action="store_true",
                   help="list everything, reconcile every RepackRun once, print their phases and exit")
    options.verbose(p)


def _seconds(text: str) -> float:
    """A duration that may be 0 (the cooldown)."""
    return 0.0 if text.strip() in ("0", "0.0") else positive_float(text)


def _resource(text: str) -> str:
    """A resource name: not empty, no whitespace."""
    if not text or text != text.strip() or any(c.isspace() for c in text):
        raise argparse.ArgumentTypeError(f"expected a resource name such as nvidia.com/gpu, got {text!r}")
    return text


def _address(args: argparse.Namespace) -> tuple[str, int] | None:
    text = args.metrics_address.strip()
    if text == "off":
        return None
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise InputError(f"expected HOST:PORT or :PORT, got {text!r}", field="--metrics-address")
    chosen = args.metrics_port if args.metrics_port is not None else int(port)
    return host.strip("[]") or "0.0.0.0", chosen


def run(args: argparse.Namespace) -> str:
    settings = Settings(solver=args.solver, time_limit=args.time_limit, workers=args.workers, cooldown=args.cooldown,
                        eviction_deadline=args.eviction_deadline, replacement_deadline=args.replacement_deadline)
    address = _address(args)  # bad input fails before anything connects
    # a process that runs for weeks: no deadline for the client, one for each call (retries included)
    client = kube.connect(args.kubeconfig, args.context, timeout=args.request_timeout, deadline=None,
                          call_deadline=args.api_deadline)
    try:
        elector = None
        # the last Execute's completion, for the cooldown, on the Lease (see ExecuteRecord for why there)
        record = ExecuteRecord(client, args.lease_namespace, args.lease_name)
        if args.leader_elect:
            identity = args.identity or f"{socket.gethostname()}_{uuid.uuid4()}"
            elector = LeaderElector(client, args.lease_namespace, args.lease_name, identity, clock=time.time)
        admit, admit_record = None, None
        if args.admit_pending_after is not None:
            admit = autotrigger.AdmitSettings(after=args.admit_pending_after, mode=args.admit_mode,
                                              resource=args.admit_resource, ttl=args.admit_ttl)
            admit_record = ExecuteRecord(client, args.lease_namespace, args.lease_name,
                                         time_key=autotrigger.LAST_TIME, run_key=autotrigger.LAST_RUN)
        if args.once:
            ctl = Controller(client, settings, clock=time.time, elector=elector, record=record, admit=admit,
                             admit_record=admit_record,
                             recorder=Recorder(client, instance=instance_name(), clock=time.time))
            ctl.run_once()
            rows = [["NAME", "MODE", "PHASE", "REASON"]]
            rows += [[r["name"], r["mode"], r["phase"] or "-", r["reason"] or "-"] for r in ctl.summary()]
            return table(rows)
        # /healthz fails once the loop made no progress for one API call's deadline + 60 s, or, during a
        # plan, that + the plan's deadline (3x the time limit + 60 s): see metrics.py and reconcile.plan_deadline
        metrics = Metrics(stale_after=stale_limit(args.api_deadline))
        server = metrics.serve(*address) if address is not None else None
        client.on_error = metrics.api_error
        # events.k8s.io Events on the runs and the evicted pods; reportingInstance is $POD_NAME
        recorder = Recorder(client, instance=instance_name(), clock=time.time, metrics=metrics)
        if elector is not None:
            elector.on_change = metrics.leader
        ctl = Controller(client, settings, clock=time.time, metrics=metrics, elector=elector, record=record,
                         admit=admit, admit_record=admit_record, recorder=recorder)
        _stop_on_signals(ctl.stop)
        log.warning("optplan controller watching %s%s", client.host,
                    f"; metrics on {server.url}" if server is not None else "")
        try:
            ctl.run()
        finally:
            if server is not None:
                server.close()
        return ""
    finally:
        client.close()


def _stop_on_signals(stop: threading.Event) -> None:
    def handler(signum: int, frame: FrameType | None) -> None:
        log.warning("signal %d: stopping", signum)
        stop.set()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)
