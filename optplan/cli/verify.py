"""``optplan verify``: after an Execute run's moves, its status.result, final condition and each
replacement's actualNodeName (``--write-status``: into the live cluster's run)."""

from __future__ import annotations

import argparse
from typing import Any

from optplan import api
from optplan.adapters.kubefile import LoadedInput
from optplan.adapters.output import dump, table
from optplan.cli import options
from optplan.cli.cluster import cluster, write_status
from optplan.cli.sources import load, pick_run_arg
from optplan.models.quantity import format_amount, to_milli


def add_arguments(p: argparse.ArgumentParser) -> None:
    options.snapshot_source(p)
    options.run_ref(p, "the Execute RepackRun (file or name; default the only one)")
    options.time_limit(p, 10.0, "time limit of the theoretical minimum (default 10)")
    options.write_status(p, "live cluster only: patch phase, conditions, result and relocations into the run's "
                            "status")
    options.output_format(p, ("yaml", "json", "table"), "yaml", "default yaml")
    options.verbose(p)


def verification_status(v: Any) -> dict[str, Any]:
    """The status fields verify fills, as the run's status subresource spells them."""
    d: dict[str, Any] = v.model_dump(by_alias=True, exclude_none=True, mode="json")
    return {k: d[k] for k in ("phase", "conditions", "result", "relocations")}


def run(args: argparse.Namespace, loaded: LoadedInput | None = None) -> str:
    """The verification; ``loaded``: the snapshot already read (default: read as ``args`` says)."""
    loaded = load(args) if loaded is None else loaded
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
