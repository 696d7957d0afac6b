"""``optplan spot-capacity``: each tenant's spot queue capability by seed 002's formula."""

from __future__ import annotations

import argparse
from typing import Any

from optplan.adapters.kubefile import LoadedInput
from optplan.adapters.output import dump, table
from optplan.cli import options
from optplan.cli.sources import load
from optplan.cli.units import amounts
from optplan.models.quantity import format_amount
from optplan.solvers.quota.queues import SpotReport, spot_capacity


def add_arguments(p: argparse.ArgumentParser) -> None:
    options.report_inputs(p)
    p.add_argument("--resource", default="nvidia.com/gpu", metavar="R",
                   help="the resource shared out (default nvidia.com/gpu); cpu and memory follow it")


def run(args: argparse.Namespace, loaded: LoadedInput | None = None) -> str:
    """The report; ``loaded``: the snapshot already read (default: read as ``args`` says)."""
    loaded = load(args) if loaded is None else loaded
    rep = spot_capacity(loaded.snapshot, args.resource)
    if args.output != "table":
        return dump(spot_report_dict(rep), args.output)
    return spot_table(rep)


def spot_table(rep: SpotReport) -> str:
    r = rep.resource

    def amt(res: str, v: int) -> str:
        return str(format_amount(res, v))

    text = (f"Spot capability of {r} (seed 002 §4.3): idle x subscription_i / total subscription, rounded down\n"
            f"idle = cluster {amt(r, rep.cluster_total.get(r, 0))} - subscription deserved "
            f"{amt(r, rep.subscription_total)} - pay-as-you-go allocated {amt(r, rep.payg_allocated)} = "
            f"{amt(r, rep.idle)}\n\n")
    if not rep.tenants:
        return text + "No subscription, pay-as-you-go or spot queues found (see optplan/solvers/quota/queues.py).\n"
    resources = sorted({res for t in rep.tenants for res in t.capability}, key=lambda x: (x != r, x))
    rows = [["TENANT", "SUBSCRIPTION", "PAYG ALLOCATED", "SPOT QUEUE", *[res.upper() for res in resources]]]
    for t in rep.tenants:
        cells = []
        for res in resources:
            cell = amt(res, t.capability[res]) if res in t.capability else "-"
            if t.spot_queue is not None and t.current.get(res) != t.capability.get(res):
                cell += f" (now {amt(res, t.current[res]) if res in t.current else 'unset'})"
            cells.append(cell)
        rows.append([t.tenant, amt(r, t.subscription), amt(r, t.payg_allocated), t.spot_queue or "-", *cells])
    return text + table(rows)


def spot_report_dict(rep: SpotReport) -> dict[str, Any]:
    r = rep.resource
    return {
        "resource": r,
        "formula": "capability(spot_i) = idle * subscription_i / total subscription (seed 002 §4.3), "
                   "rounded down; cpu and memory in the cluster's ratio to the resource",
        "clusterTotal": format_amount(r, rep.cluster_total.get(r, 0)),
        "subscriptionDeserved": format_amount(r, rep.subscription_total),
        "paygAllocated": format_amount(r, rep.payg_allocated), "idle": format_amount(r, rep.idle),
        "tenants": [{
            "tenant": t.tenant, "subscriptionQueues": list(t.subscription_queues),
            "subscription": format_amount(r, t.subscription), "paygQueues": list(t.payg_queues),
            "paygAllocated": format_amount(r, t.payg_allocated), "spotQueue": t.spot_queue,
            "capability": amounts(t.capability), "current": amounts(t.current), "changed": t.changed}
            for t in rep.tenants],
        "queues": [{"queue": q.queue, "tenant": q.tenant, "billingType": q.billing, "source": q.source}
                   for q in rep.queues]}

