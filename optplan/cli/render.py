"""``optplan render``: draw the cluster's nodes before and after a plan as a PNG (``adapters.render``
draws it)."""

from __future__ import annotations

import argparse

from optplan.adapters.kubefile import LoadedInput, pick_run
from optplan.adapters.render import DEFAULT_RESOURCE, MAX_ARROWS, render_cluster
from optplan.cli import options
from optplan.cli.sources import load


def add_arguments(p: argparse.ArgumentParser) -> None:
    options.snapshot_source(p)
    options.run_ref(p, "a RepackRun with status (what `optplan repack` prints), in a file or by name inside the "
                       "snapshots (default: the only one there, if any); without a status only 'before' is drawn")
    p.add_argument("--resource", metavar="R",
                   help=f"target resource (default: the run's goal resource, else {DEFAULT_RESOURCE})")
    options.output_file(p, "FILE.png", "write the PNG here")
    options.verbose(p)


def run(args: argparse.Namespace, loaded: LoadedInput | None = None) -> str:
    """Draw the PNG; ``loaded``: the snapshot already read (default: read as ``args`` says)."""
    loaded = load(args) if loaded is None else loaded
    repack_run = pick_run(loaded, args.run, args.snapshots, required=False)
    resource = args.resource or (repack_run.spec.resource if repack_run is not None else DEFAULT_RESOURCE)
    out = render_cluster(loaded.snapshot, repack_run, resource, args.output)
    if not out["after"]:
        why = "no RepackRun" if repack_run is None else f"RepackRun {repack_run.name} has no status.plan"
        return f"wrote {out['path']}: {out['nodes']} {resource} nodes, before only ({why})\n"
    how = (f"{out['movesDrawn']} arrows" if out["movesDrawn"] or out["moves"] <= MAX_ARROWS
           else f"{out['movesListed']} listed")
    return (f"wrote {out['path']}: {out['nodes']} {resource} nodes before/after, {out['moves']} pod moves "
            f"({how}), {out['freed']} freed\n")
