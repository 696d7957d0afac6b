"""``optplan queues``: the queue tree's accounts (quotas, realCapability, allocation) and its admission
violations; ``optplan queues --size-payg``: the pay-as-you-go queue values to set so that pending payg jobs
place (``optplan.solvers.provision.payg.size_payg``), as a patch to apply and one to return to."""

from __future__ import annotations

import argparse
from typing import Any

from optplan.adapters.kubefile import LoadedInput, load_files
from optplan.adapters.output import dump, table, to_yaml, write_atomic
from optplan.cli import options
from optplan.cli.sources import load, scheduler_conf
from optplan.cli.units import amounts
from optplan.errors import InputError
from optplan.models.payg import PaygSizing
from optplan.models.quantity import format_amount
from optplan.solvers.provision.payg import size_payg
from optplan.solvers.quota.queues import UNLIMITED, QueueReport, queue_report
from optplan.solvers.quota.times import parse_now


def add_arguments(p: argparse.ArgumentParser) -> None:
    options.report_inputs(p)
    p.add_argument("--flat", action="store_true",
                   help="account as the capacity plugin without enableHierarchy (default: with it, or as "
                        "--scheduler-conf says)")
    options.scheduler_conf(p)
    add_payg_arguments(p)


def add_payg_arguments(p: argparse.ArgumentParser) -> None:
    """``optplan queues``' pay-as-you-go sizing flags."""
    p.add_argument("--size-payg", action="store_true",
                   help="size the pay-as-you-go queues for their pending jobs (seed 002 §4.3): capability = "
                        "deserved to set now and to return to, and the spot capabilities that follow")
    p.add_argument("--job", action="append", default=[], metavar="JOB.yaml",
                   help="with --size-payg: a file of VCJobs to size for (repeatable; default the snapshot's "
                        "pending VCJobs)")
    p.add_argument("--resource", default="nvidia.com/gpu", metavar="R",
                   help="with --size-payg: the resource of the spot formula (default nvidia.com/gpu)")
    p.add_argument("--now", default=None, metavar="RFC3339", help="with --size-payg: the time of the snapshot")
    p.add_argument("--write", default=None, metavar="FILE",
                   help="with --size-payg: write the Queue patch to apply now (kubectl apply --server-side -f FILE)")
    p.add_argument("--write-release", default=None, metavar="FILE",
                   help="with --size-payg: write the Queue patch to apply when the granted jobs finish")


def run(args: argparse.Namespace, loaded: LoadedInput | None = None) -> str:
    """The report; ``loaded``: the snapshot already read (default: read as ``args`` says)."""
    loaded = load(args) if loaded is None else loaded
    if getattr(args, "size_payg", False):
        return payg(args, loaded)
    for flag, given in (("--job", args.job), ("--now", args.now), ("--write", args.write),
                        ("--write-release", args.write_release)):
        if given:
            raise InputError("only with --size-payg", field=flag)
    rep = queue_report(loaded.snapshot, hierarchical=not args.flat and scheduler_conf(args, loaded).hierarchy)
    if args.output != "table":
        return dump(queue_report_dict(rep), args.output)
    return queue_table(rep)


def queue_table(rep: QueueReport) -> str:
    def amt(r: str, m: dict[str, int], absent: str = "0") -> str:
        if r in m and m[r] >= UNLIMITED:
            return "unlimited"
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
            "realCapability": {r: "unlimited" if a.real_capability[r] >= UNLIMITED else v
                               for r, v in amounts(a.real_capability, shown).items()},
            "effectiveDeserved": amounts(a.effective_deserved, shown),
            "allocated": amounts(a.allocated, shown), "overDeserved": list(a.over_deserved)})
    return {"hierarchy": rep.hierarchical, "clusterTotal": amounts(rep.cluster_total), "queues": queues,
            "violations": [{"queue": v.queue, "resource": v.resource, "rule": v.rule, "message": v.message}
                           for v in rep.violations],
            "unaccountedPods": [{"pod": p, "reason": why} for p, why in rep.unaccounted]}


def payg(args: argparse.Namespace, loaded: LoadedInput) -> str:
    jobs = None
    if args.job:
        jobs = list(load_files(args.job).snapshot.jobs.values())
    sizing = size_payg(loaded.snapshot, jobs, args.resource, now=parse_now(args.now))
    if args.write:
        write_atomic(args.write, to_yaml(sizing.apply))
    if args.write_release:
        write_atomic(args.write_release, to_yaml(sizing.release))
    if args.output != "table":
        return dump(sizing.to_dict(), args.output)
    return payg_table(sizing)


def payg_table(sizing: PaygSizing) -> str:
    def amt(m: dict[str, int | str]) -> str:
        return ", ".join(f"{r} {v}" for r, v in m.items()) or "-"

    text = (f"Pay-as-you-go sizing (seed 002 §4.3): capability = deserved = use + the granted jobs; the spot "
            f"capabilities by the formula with the new use ({sizing.resource})\n\n")
    rows = [["QUEUE", "TENANT", "ALLOCATED (RETURN TO)", "CAPABILITY NOW", "SET CAPABILITY = DESERVED"]]
    rows += [[q.queue, q.tenant, amt(q.allocated), amt(q.current), amt(q.capability)] for q in sizing.queues]
    text += table(rows)
    jobs = [j for q in sizing.queues for j in q.jobs]
    if jobs:
        jrows = [["JOB", "QUEUE", "GRANTED", "REQUEST", "REASON"]]
        jrows += [[j.job, j.queue, "yes" if j.granted else "no", amt(j.request), j.reason] for j in jobs]
        text += "\nJobs:\n" + table(jrows)
    if sizing.spot:
        srows = [["SPOT QUEUE", "TENANT", "CAPABILITY NOW", "SET CAPABILITY", "TO FREE", "AFTER"]]
        srows += [[s.queue, s.tenant, amt(s.current), amt(s.capability), str(s.to_free), amt(s.release)]
                  for s in sizing.spot]
        text += "\nSpot queues (TO FREE: what their jobs hold beyond the new capability; optplan reclaim-spot):\n"
        text += table(srows)
    n, m = len(sizing.apply["items"]), len(sizing.release["items"])
    return text + f"\n{n} Queue patch(es) to apply now, {m} when the granted jobs finish (--write, --write-release).\n"
