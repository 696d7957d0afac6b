"""``optplan snapshot``: read a live cluster through the kubernetes client into a snapshot file."""

from __future__ import annotations

import argparse
import logging
from collections import Counter

from optplan.adapters import kube
from optplan.adapters.kubefile import without_orphans
from optplan.adapters.schedconf import CONFIGMAP_NAME, CONFIGMAP_NAMESPACE
from optplan.cli import options

log = logging.getLogger("optplan")


def add_arguments(p: argparse.ArgumentParser) -> None:
    options.live_cluster(p, "live cluster", timeout_alias=True)
    options.output_file(p, "FILE.yaml", "write the snapshot here")
    p.add_argument("--page-size", type=options.int_in(1, 100_000), default=500, metavar="N",
                   help="objects per list request (default 500)")
    options.verbose(p)


def run(args: argparse.Namespace) -> str:
    with kube.connect(args.kubeconfig, args.context, timeout=args.request_timeout, deadline=args.api_deadline,
                      page_size=args.page_size) as client:
        objects = client.snapshot_objects()
        configmap = client.scheduler_configmap()
        devices = client.device_configmap(configmap)
        host = client.host
    # what the planners would leave out reading the cluster live, left out of the file too (the same
    # rule), so that planning the file plans the live cluster
    kept, warnings = without_orphans(objects)
    for w in warnings:
        log.warning("%s", w)
    objects = [dict(o) for o in kept]
    if devices is not None:  # the device-share plugin's configuration (MIG geometries), read from the file
        objects.append(devices)
    if configmap is None:  # said once: a plan from this file assumes the seed's configuration
        log.warning("%s has no ConfigMap %s/%s: plans from %s assume seed 002's scheduler configuration", host,
                    CONFIGMAP_NAMESPACE, CONFIGMAP_NAME, args.output)
    else:  # the configuration vc-scheduler runs with: `optplan place FILE` decides under it
        objects.append(configmap)
    kube.write_snapshot(objects, args.output)
    kinds = Counter(str(o.get("kind")) for o in objects)
    listed = ", ".join(f"{n} {k}s" for k, n in sorted(kinds.items())) or "no objects"
    return f"wrote {args.output} from {host}: {listed}\n"
