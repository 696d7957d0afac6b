"""Repack goals with shared GPUs on openb: gangs admitted, HyperNodes and GPUs freed against the bounds, per
planner, with wall times and the exact model's size at device level (``optplan bench`` section 7, alone).

Example::

    python benchmarks/goals_shares.py --data ../shared/data                      # fill 80, greedy, cpsat, auto; 60 s
    python benchmarks/goals_shares.py --snapshot openb80s.yaml --goals admit --planners auto --json out.json

The snapshot: ``optplan import openb --fill F --shared`` of the default trace (every node lists its GPUs, the
fractional-GPU pods are shares pinned to a device), or ``--snapshot`` (a file that import wrote), with the
HyperNode fabric of ``goals_scale.py`` (``adapters.inject.fabric``: racks of 8 like nodes, tier 1; spines of 4
racks, tier 2). The goals, one RepackRun each (``--goals``; ``experiments.goals_bench.share_run``):

- ``admit``: five pending gangs of 8-card pods (16, 24, 32, 48 and 64 cards, hard tier 1: each in one rack);
  bound: the five;
- ``free-hypernodes``: ``--racks`` racks (tier 1) left without a GPU pod; bound: the count;
- ``free-gpus``: ``--free-gpus`` whole GPUs of ``--gpu-model`` left free on one node (``summary.freedGpus``);
  bound: the count.

Per planner (``experiments.goals_bench.share_rows``), the whole ``plan_goals`` (``plan_repack`` for freeGpus:
resolve, measure, plan, validate at device level, status) within ``--time-limit``: the goal's value against its
bound, pods and shares moved, cards moved, the solver's status, the exact model's size (send and place
variables, device variables and rows, restricted or not) and the wall seconds. The load average
(``os.getloadavg``) is printed before and after: the wall times are the machine's at that load.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from optplan.adapters.inject import fabric
from optplan.adapters.openb import RESOURCE
from optplan.experiments.goals_bench import SHARE_GOALS, ShareGoals, share_objects, share_report_lines, share_rows


def snapshot_objects(args: argparse.Namespace) -> list[dict[str, Any]]:
    if not args.snapshot:
        return share_objects(Path(args.data), args.fill)
    with open(args.snapshot) as f:
        objs = [o for o in yaml.load_all(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) if o]
    if len(objs) == 1 and objs[0].get("kind") == "List":
        objs = objs[0]["items"]
    objs = [o for o in objs if o.get("kind") != "RepackRun"]
    return [*objs, *fabric(objs, RESOURCE)]


def markdown(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join("" if c is None else str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default="../shared/data", help="the data folder holding openb/ (default %(default)s)")
    p.add_argument("--snapshot", help="a snapshot that `optplan import openb --shared` wrote (instead of --data)")
    p.add_argument("--fill", type=float, default=80.0, help="percent of the GPUs' milli-GPU to fill (default 80)")
    p.add_argument("--goals", default=",".join(SHARE_GOALS), help="comma-separated (default %(default)s)")
    p.add_argument("--planners", default="greedy,cpsat,auto", help="comma-separated (default %(default)s)")
    p.add_argument("--racks", type=int, default=16, help="free-hypernodes: racks to free (default 16)")
    p.add_argument("--free-gpus", type=int, default=8, help="free-gpus: GPUs on one node (default 8)")
    p.add_argument("--gpu-model", default="G2", help="free-gpus: the GPU model (default G2)")
    p.add_argument("--time-limit", type=float, default=60.0, help="per planner, seconds (default 60)")
    p.add_argument("--json", help="also write the rows as JSON here")
    args = p.parse_args(argv)
    print(f"load average before: {os.getloadavg()}", flush=True)
    t0 = time.perf_counter()
    objs = snapshot_objects(args)
    print(f"snapshot: {sum(o['kind'] == 'Node' for o in objs)} nodes, {sum(o['kind'] == 'Pod' for o in objs)} pods "
          f"({time.perf_counter() - t0:.1f}s)", flush=True)
    settings = ShareGoals(args.racks, args.free_gpus, args.gpu_model)
    rows = share_rows(objs, args.goals.split(","), args.planners.split(","), args.time_limit, settings,
                      lambda what: print(what, flush=True))
    for r in rows:
        print(json.dumps(r), flush=True)
    res = {"fill": args.fill, "timeLimit": args.time_limit, "racks": args.racks, "freeGpus": args.free_gpus,
           "gpuModel": args.gpu_model, "rows": rows}
    print("\n".join(share_report_lines(res, markdown)[1:]))
    print(f"load average after: {os.getloadavg()}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
