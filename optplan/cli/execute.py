"""``optplan nominate`` and ``verify``: the Execute-time calls."""

from __future__ import annotations

import argparse
from typing import Any

from optplan import api
from optplan.adapters.kubefile import LoadedInput
from optplan.adapters.output import dump, table
from optplan.cli.sources import cluster, pick_run_arg, write_status
from optplan.models.quantity import format_amount, to_milli


def nominate(args: argparse.Namespace, loaded: LoadedInput) -> str:
    run = pick_run_arg(args, loaded)
    n = api.nominate(cluster(args, loaded), run, args.victim, args.replacement)
    if args.output == "table":
        return (f"nominatedNodeName: {n.node_name or '(none)'}\n"
                f"planned node:      {n.planned_node_name or '-'}\n"
                f"feasible nodes:    {n.feasible_node_count}\n"
                f"reason:            {n.reason}\n")
    return dump(n.model_dump(by_alias=True, exclude_none=True, mode="json"), args.output)


def verification_status(v: Any) -> dict[str, Any]:
    """The status fields verify fills, as the run's status subresource spells them."""
    d: dict[str, Any] = v.model_dump(by_alias=True, exclude_none=True, mode="json")
    return {k: d[k] for k in ("phase", "conditions", "result", "relocations")}


def verify(args: argparse.Namespace, loaded: LoadedInput) -> str:
    run = pick_run_arg(args, loaded)
    v = api.verify(cluster(args, loaded), run, time_limit=args.time_limit)
    if args.write_status:
        write_status(args, run, verification_status(v))
    if args.output != "table":
        d = verification_status(v)
        d["freedNodes"] = list(v.freed_nodes)
        d["stillOccupied"] = {k: list(h) for k, h in v.still_occupied.items()}
        return dump(d, args.output)
    c = v.conditions[0]
    r = v.result
    text = (f"RepackRun {run.name}: {v.phase} — {c.reason}\n{c.message}\n\n"
            f"frag after {r.frag_after_percent}%, freed {r.freed_node_count} node(s), moved "
            f"{format_amount(run.spec.resource, to_milli(r.moved_card_count))} {run.spec.resource}, metrics verified: "
            f"{'yes' if r.metrics_verified else 'no'}\n")
    rows = [["VICTIM", "PLANNED", "SELECTED", "ACTUAL", "REPLACEMENT", "NEW PODGROUP"]]
    for rel in v.relocations:
        pl = rel.placement
        rows.append([rel.key, rel.planned_node_name or "-", (pl.selected_node_name if pl else None) or "-",
                     (pl.actual_node_name if pl else None) or "-", (pl.replacement_pod_name if pl else None) or "-",
                     rel.replacement_pod_group_name or "-"])
    return text + "\n" + table(rows)

