"""``optplan queues``: the queue tree's accounts (quotas, realCapability, allocation) and its admission
violations."""

from __future__ import annotations

import argparse
from typing import Any

from optplan.adapters.kubefile import LoadedInput
from optplan.adapters.output import dump, table
from optplan.cli import options
from optplan.cli.sources import load
from optplan.cli.units import amounts
from optplan.models.quantity import format_amount
from optplan.solvers.quota.queues import QueueReport, queue_report


def add_arguments(p: argparse.ArgumentParser) -> None:
    options.report_inputs(p)
    p.add_argument("--flat", action="store_true",
                   help="account as the capacity plugin without enableHierarchy (default: with it)")


def run(args: argparse.Namespace, loaded: LoadedInput | None = None) -> str:
    """The report; ``loaded``: the snapshot already read (default: read as ``args`` says)."""
    loaded = load(args) if loaded is None else loaded
    rep = queue_report(loaded.snapshot, hierarchical=not args.flat)
    if args.output != "table":
        return dump(queue_report_dict(rep), args.output)
    return queue_table(rep)


def queue_table(rep: QueueReport) -> str:
    def amt(r: str, m: dict[str, int], absent: str = "0") -> str:
        return str(format_amount(r, m[r])) if r in m else absent

    total = ", ".join(f"{r} {amt(r, rep.cluster_total)}" for r in rep.cluster_total) or "(no nodes)"
    text = (f"Queues (capacity plugin, hierarchy {'on' if rep.hierarchical else 'off'}); "
            f"cluster total: {total}\n\n")
    rows = [["QUEUE", "STATE", "RESOURCE", "GUARANTEE", "DESERVED", "CAPABILITY", "REALCAPABILITY", "ALLOCATED",
             "OVER"]]
    for a in rep.accounts.values():
        for i, r in enumerate(rep.resources):
            eff = amt(r, a.effective_deserved)
            if r in a.deserved and a.deserved[r] != a.effective_deserved.get(r):
                eff += f" (written {amt(r, a.deserved)})"
            state = a.state if a.open or a.state != "Open" else "Open (parent closed)"
            name = "  " * a.depth + a.name + (" *" if a.implicit else "")
            rows.append([name if i == 0 else "", state if i == 0 else "", r, amt(r, a.guarantee), eff,
                         amt(r, a.capability, "-"), amt(r, a.real_capability), amt(r, a.allocated),
                         "yes" if r in a.over_deserved else ""])
    text += table(rows)
    if any(a.implicit for a in rep.accounts.values()):
        text += "* not in the snapshot: Volcano always has it\n"
    if rep.violations:
        vrows = [["QUEUE", "RESOURCE", "RULE", "MESSAGE"]]
        vrows += [[v.queue, v.resource or "-", v.rule, v.message] for v in rep.violations]
        text += f"\nViolations ({len(rep.violations)}):\n" + table(vrows)
    else:
        text += "\nNo admission violations.\n"
    if rep.unaccounted:
        prows = [["POD", "WHY"]] + [[p, why] for p, why in rep.unaccounted[:20]]
        more = " (first 20 shown)" if len(rep.unaccounted) > 20 else ""
        text += f"\nRunning pods counted in no queue ({len(rep.unaccounted)}){more}:\n" + table(prows)
    return text



def queue_report_dict(rep: QueueReport) -> dict[str, Any]:
    shown = rep.resources
    queues = []
    for a in rep.accounts.values():
        queues.append({
            "name": a.name, "parent": a.parent, "depth": a.depth, "leaf": a.leaf, "implicit": a.implicit,
            "state": a.state, "open": a.open, "reclaimable": a.reclaimable, "weight": a.weight,
            "guarantee": amounts(a.guarantee), "deserved": amounts(a.deserved), "capability": amounts(a.capability),
            "realCapability": amounts(a.real_capability, shown),
            "effectiveDeserved": amounts(a.effective_deserved, shown),
            "allocated": amounts(a.allocated, shown), "overDeserved": list(a.over_deserved)})
    return {"hierarchy": rep.hierarchical, "clusterTotal": amounts(rep.cluster_total), "queues": queues,
            "violations": [{"queue": v.queue, "resource": v.resource, "rule": v.rule, "message": v.message}
                           for v in rep.violations],
            "unaccountedPods": [{"pod": p, "reason": why} for p, why in rep.unaccounted]}
