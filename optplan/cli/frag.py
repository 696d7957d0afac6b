"""``optplan frag``: measure the fragmentation of a target resource, per HyperNode tier (``--hypernodes``,
``--tier``) and the pending gangs it keeps waiting (``--pending``)."""

from __future__ import annotations

import argparse
from typing import Any

from optplan.adapters.kubefile import LoadedInput
from optplan.adapters.output import dump, table
from optplan.cli import options
from optplan.cli.sources import load
from optplan.cli.units import amount
from optplan.errors import InputError, printable
from optplan.models.quantity import format_milli
from optplan.solvers.binpack.devfrag import DeviceFrag, device_fragmentation, has_devices
from optplan.solvers.binpack.frag import FragReport, fragmentation, round_half_up
from optplan.solvers.binpack.hyperfrag import TierFrag, hypernode_fragmentation
from optplan.solvers.binpack.hyperfrag import tiers as hypernode_tiers
from optplan.solvers.placement.pending import (
    CAPACITY,
    FITS,
    FRAGMENTATION,
    QUOTA,
    PendingGang,
    free_total,
    pending_gangs,
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    options.planning_inputs(p, ("table", "yaml", "json"), "table", 10.0)
    p.add_argument("--resource", required=True, metavar="R", help="target resource, e.g. nvidia.com/gpu")
    p.add_argument("--hypernodes", action="store_true",
                   help="per HyperNode tier: HyperNodes holding R, how many are free of R now, and the most "
                        "compacting R could free (exact, or proven bounds)")
    p.add_argument("--tier", type=options.int_in(0, 2**31 - 1), action="append", metavar="T",
                   help="only this HyperNode tier (repeatable; implies --hypernodes)")
    p.add_argument("--pending", action="store_true",
                   help="pendingByFragmentation: pending gangs whose R fits the free R in total and their "
                        "queue's quota, but that the placement greedy cannot place")


def run(args: argparse.Namespace, loaded: LoadedInput | None = None) -> str:
    """The report; ``loaded``: the snapshot already read (default: read as ``args`` says)."""
    loaded = load(args) if loaded is None else loaded
    tiers = frag_tiers(args, loaded)
    f = fragmentation(loaded.snapshot, args.resource, time_limit=args.time_limit)
    pending = None
    if args.pending:
        gangs = pending_gangs(loaded.snapshot, args.resource)
        pending = (free_total(loaded.snapshot, args.resource), gangs)
    devices = device_fragmentation(loaded.snapshot, time_limit=args.time_limit) if has_devices(
        loaded.snapshot) else None
    if args.output != "table":
        doc = frag_dict(f)
        if devices is not None:
            doc["devices"] = device_dict(devices)
        if tiers is not None:
            doc["hyperNodeTiers"] = [tier_dict(t) for t in tiers]
        if pending is not None:
            doc["pendingByFragmentation"] = pending_dict(*pending)
        return dump(doc, args.output)
    proven = "proven" if f.proven else f"best lower bound; a packing into {f.upper_bound} nodes is known"
    formula = f"(({f.occupied} - {f.theoretical_min}) / {f.providers})" if f.providers else "(no providers)"
    text = (f"resource            {printable(f.resource)}\n"
            f"providers           {f.providers}\n"
            f"occupied            {f.occupied}\n"
            f"theoretical minimum {f.theoretical_min} ({proven})\n"
            f"fragmentation       {round_half_up(f.percent())}%  {formula}\n")
    if f.warning is not None:
        text += f"warning             {printable(f.warning)}\n"
    if devices is not None:
        text += device_text(devices)
    if tiers is not None:
        text += frag_tiers_text(tiers)
    if pending is not None:
        text += frag_pending_text(args.resource, *pending)
    return text


TABLE_NAMES = 6
"""The table names this many freeable HyperNodes per tier (``-o yaml|json`` lists them all)."""


def frag_tiers_text(tiers: list[TierFrag]) -> str:
    if not tiers:
        return "\nhypernodes          none in the snapshot\n"
    rows = [["TIER", "HYPERNODES", "FREE NOW", "MOST FREEABLE", "STATUS", "FREEABLE"]]
    for t in tiers:
        most = str(t.freeable_lower) if t.proven else f"{t.freeable_lower}..{t.freeable_upper}"
        names = ",".join(t.freeable[:TABLE_NAMES]) or "-"
        if len(t.freeable) > TABLE_NAMES:
            names += f" (+{len(t.freeable) - TABLE_NAMES} more)"
        rows.append([str(t.tier), str(len(t.hyper_nodes)), str(len(t.free_now)), most, t.status, names])
    return ("\nHyperNodes holding the resource, per tier: free of it now, and the most compacting it could free "
            "(its requests only, every pod movable)\n" + table(rows))


def frag_pending_text(resource: str, free: int, gangs: list[PendingGang]) -> str:
    d = pending_dict(free, gangs)
    text = (f"\npending gangs requesting {printable(resource)}: {d['pendingGangs']} (free in total "
            f"{amount(resource, d['freeTotal'])}; "
            f"fit now, each alone {d['fits']}; by quota {d['byQuota']}, by capacity {d['byCapacity']}, "
            f"by fragmentation {d['byFragmentation']})\n")
    if d["gangs"]:
        rows = [["NAMESPACE", "JOB", "QUEUE", "REQUEST", "REASON"]]
        rows += [[g["namespace"], g["name"], g["queue"], amount(resource, g["request"]), g["reason"]]
                 for g in d["gangs"]]
        text += table(rows)
    return text


def frag_dict(f: FragReport) -> dict[str, Any]:
    return {"resource": f.resource, "providers": f.providers, "occupied": f.occupied,
            "theoreticalMinimum": f.theoretical_min, "theoreticalMinimumProven": f.proven,
            "theoreticalMinimumUpperBound": f.upper_bound, "fragPercent": round_half_up(f.percent()),
            "fragPercentExact": str(f.percent()), **({"warning": f.warning} if f.warning is not None else {})}


def device_dict(d: DeviceFrag) -> dict[str, Any]:
    worst = sorted(d.fgd_nodes.items(), key=lambda kv: (-kv[1], kv[0]))
    return {"providers": d.providers, "devices": d.devices, "occupied": d.occupied, "devicesUsed": d.devices_used,
            "shares": d.shares, "shareGpus": d.share_gpus, "shareGpusMinimum": d.share_gpus_min,
            "theoreticalMinimum": d.theoretical_min, "theoreticalMinimumProven": d.proven,
            "theoreticalMinimumUpperBound": d.upper_bound, "fragPercent": round(d.percent(), 2),
            "freeMilliGpu": d.free_milli, "fgdMilliGpu": d.fgd_milli, "fgdPercentOfFree": round(d.fgd_percent(), 2),
            "fgdNodes": [{"node": n, "milliGpu": v} for n, v in worst if v > 0]}


def device_text(d: DeviceFrag) -> str:
    proven = "proven" if d.proven else f"best lower bound; a packing into {d.upper_bound} nodes is known"
    worst = sorted(d.fgd_nodes.items(), key=lambda kv: (-kv[1], kv[0]))[:TABLE_NAMES]
    return (f"devices             {d.devices} GPUs on {d.providers} nodes, {d.devices_used} in use\n"
            f"shares              {d.shares} on {d.share_gpus} GPUs (fewest possible {d.share_gpus_min})\n"
            f"two-level minimum   {d.theoretical_min} nodes ({proven})\n"
            f"device frag         {d.percent():.2f}%  (({d.occupied} - {d.theoretical_min}) / {d.providers})\n"
            f"FGD fragmentation   {d.fgd_milli / 1000:.2f} of {d.free_milli / 1000:.2f} free GPUs "
            f"({d.fgd_percent():.2f}%)\n"
            + "".join(f"  FGD node          {printable(n)} {v / 1000:.3f} GPUs\n" for n, v in worst if v > 0))


def tier_dict(t: TierFrag) -> dict[str, Any]:
    return {"tier": t.tier, "hyperNodes": len(t.hyper_nodes), "freeNow": len(t.free_now),
            "mostFreeableLowerBound": t.freeable_lower, "mostFreeableUpperBound": t.freeable_upper,
            "status": t.status, "capacityUpperBound": t.capacity_upper, "freeNowHyperNodes": list(t.free_now),
            "freeableHyperNodes": list(t.freeable)}


def pending_dict(free: int, gangs: list[PendingGang]) -> dict[str, Any]:
    counts = {v: sum(g.verdict == v for g in gangs) for v in (FITS, FRAGMENTATION, QUOTA, CAPACITY)}
    return {"freeTotal": format_milli(free), "pendingGangs": len(gangs), "fits": counts[FITS],
            "byFragmentation": counts[FRAGMENTATION], "byQuota": counts[QUOTA], "byCapacity": counts[CAPACITY],
            "gangs": [{"namespace": g.namespace, "name": g.name, "queue": g.queue, "request": format_milli(g.request),
                       "reason": g.reason} for g in gangs if g.verdict == FRAGMENTATION]}


def frag_tiers(args: argparse.Namespace, loaded: LoadedInput) -> list[TierFrag] | None:
    """The per-tier report when ``--hypernodes`` or ``--tier`` asks for it; a tier no HyperNode has is bad input."""
    if not args.hypernodes and not args.tier:
        return None
    known = hypernode_tiers(loaded.snapshot)
    only = sorted(set(args.tier)) if args.tier else None
    for t in only or ():
        if t not in known:
            raise InputError(f"no HyperNode has tier {t} (tiers: {', '.join(map(str, known)) or 'none'})",
                             field="--tier")
    return hypernode_fragmentation(loaded.snapshot, args.resource, only, time_limit=args.time_limit)

