"""``optplan nominate``: at Execute time, the node to write into a replacement pod's nominatedNodeName."""

from __future__ import annotations

import argparse

from optplan import api
from optplan.adapters.kubefile import LoadedInput
from optplan.adapters.output import dump
from optplan.cli import options
from optplan.cli.cluster import cluster
from optplan.cli.sources import load, pick_run_arg


def add_arguments(p: argparse.ArgumentParser) -> None:
    options.snapshot_source(p)
    options.run_ref(p, "the Execute RepackRun (file or name; default the only one)")
    p.add_argument("--victim", required=True, metavar="POD",
                   help="the evicted pod, NAME or NAMESPACE/NAME, as in status.relocations (or status.plan.moves)")
    p.add_argument("--replacement", metavar="POD", help="the replacement pod (default: the victim's name, as a "
                                                         "VCJob or StatefulSet recreates it)")
    options.output_format(p, ("yaml", "json", "table"), "yaml", "default yaml")
    options.verbose(p)


def run(args: argparse.Namespace, loaded: LoadedInput | None = None) -> str:
    """The nomination; ``loaded``: the snapshot already read (default: read as ``args`` says)."""
    loaded = load(args) if loaded is None else loaded
    run = pick_run_arg(args, loaded)
    n = api.nominate(cluster(args, loaded), run, args.victim, args.replacement)
    if args.output == "table":
        return (f"nominatedNodeName: {n.node_name or '(none)'}\n"
                f"planned node:      {n.planned_node_name or '-'}\n"
                f"feasible nodes:    {n.feasible_node_count}\n"
                f"reason:            {n.reason}\n")
    return dump(n.model_dump(by_alias=True, exclude_none=True, mode="json"), args.output)

