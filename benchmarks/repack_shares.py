"""Repack with shared GPUs on openb: freed GPUs and nodes against the bounds, per planner, with wall times and the
CP-SAT model's size.

Example::

    python benchmarks/repack_shares.py --data ../shared/data                # fill 80, greedy, cpsat, auto; 60 s
    python benchmarks/repack_shares.py --snapshot openb80s.yaml --planners auto --time-limit 120 --json out.json

The snapshot: ``optplan import openb --fill F --shared`` of the default trace (every node lists its GPUs, the
fractional-GPU pods are shares pinned to a device), or ``--snapshot`` (a file that import wrote). Per planner,
``plan_repack`` (measure, plan, validate at device level, status) within ``--time-limit``:

- freed nodes, against the freed-node bound (``status.plan.solver.freedNodesBound``: occupied − the two-level
  minimum, or the budgets' count; for the greedy, whose record has none, occupied − the two-level minimum);
- freed GPUs: devices no pod touches after the plan less before, against the GPU bound (devices in use now −
  the fewest that hold every pod: whole cards plus the fewest GPUs the shares fit, ``devfrag``);
- pods and shares moved, the solver's status, its model size (CP-SAT's variables and constraints, summed over
  the parts, and its pod classes, receivers and send variables) and the wall seconds of the whole call.

The load average (``os.getloadavg``) is printed before and after: the wall times are the machine's at that load.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from optplan.adapters.kubefile import LoadedInput, load_files, load_objects
from optplan.adapters.openb import ImportConfig, import_openb
from optplan.models.repack import RepackPlan
from optplan.models.snapshot import Snapshot
from optplan.solvers.binpack.devfrag import device_fragmentation
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.core.oracle import Capacity
from optplan.solvers.repack.rules import untouched
from optplan.solvers.repack.run import plan_repack

OPENB_NODES = Path("openb") / "openb_node_list_gpu_node.csv"
OPENB_PODS = Path("openb") / "openb_pod_list_default.csv"


def whole_free(snapshot: Snapshot, plan: RepackPlan | None = None) -> int:
    """Devices no pod touches, over every node that lists its GPUs, after the plan's moves (the oracle's state;
    a move naming its devices takes those, applied first)."""
    cap = Capacity(snapshot)
    for m in sorted(plan.moves if plan is not None else (), key=lambda m: (m.to_devices is None, m.pod)):
        pod = snapshot.pods[m.pod]
        cap.remove(pod, m.from_node)
        cap.add(pod, m.to_node, m.to_devices)
    return sum(len(untouched(cap, n)) for n in cap.gpu_free)


def snapshot(args: argparse.Namespace) -> LoadedInput:
    if args.snapshot:
        return load_files([args.snapshot])
    data = Path(args.data)
    objs, _ = import_openb(str(data / OPENB_NODES), str(data / OPENB_PODS), ImportConfig(fill=args.fill, shared=True))
    return load_objects(objs)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default="../shared/data", help="the data folder holding openb/ (default %(default)s)")
    p.add_argument("--snapshot", help="a snapshot that `optplan import openb --shared` wrote (instead of --data)")
    p.add_argument("--fill", type=float, default=80.0, help="percent of the GPUs' milli-GPU to fill (default 80)")
    p.add_argument("--planners", default="greedy,cpsat,auto", help="comma-separated (default %(default)s)")
    p.add_argument("--time-limit", type=float, default=60.0, help="per planner, seconds (default 60)")
    p.add_argument("--json", help="also write the rows as JSON here")
    args = p.parse_args(argv)
    print(f"load average before: {os.getloadavg()}", flush=True)
    t0 = time.perf_counter()
    loaded = snapshot(args)
    snap = loaded.snapshot
    run = next(iter(loaded.runs.values()))
    print(f"snapshot: {len(snap.nodes)} nodes, {len(snap.pods)} pods ({time.perf_counter() - t0:.1f}s)", flush=True)
    dev = device_fragmentation(snap, time_limit=20)
    before = whole_free(snap)
    wholes = sum(snap.pods[k].request("nvidia.com/gpu") // 1000 for k in snap.pods
                 if snap.pods[k].occupying and snap.pods[k].gpu_share is None)
    gpu_bound = dev.devices_used - (wholes + dev.share_gpus_min)
    print(f"devices {dev.devices} ({dev.devices_used} in use, {before} untouched); shares {dev.shares} on "
          f"{dev.share_gpus} GPUs, fewest {dev.share_gpus_min}; two-level minimum {dev.theoretical_min} nodes "
          f"({'proven' if dev.proven else 'lower bound'}); GPU bound {gpu_bound}", flush=True)
    rows: list[dict[str, Any]] = []
    for name in args.planners.split(","):
        t = time.perf_counter()
        out = plan_repack(snap, run, solver=name, options=PlanOptions(time_limit=args.time_limit))
        wall = time.perf_counter() - t
        plan = out.result.plan
        rec = out.result.record
        stats = out.result.stats
        bound = rec.freed_nodes_bound
        if bound is None:  # the greedy's record carries none: the run's (occupied − the two-level minimum)
            bound = out.frag.occupied - out.frag.theoretical_min
        row = {"planner": name, "freedNodes": len(plan.freed_nodes), "freedNodesBound": bound,
               "freedGpus": whole_free(snap, plan) - before, "gpuBound": gpu_bound, "podsMoved": len(plan.moves),
               "sharesMoved": sum(m.to_devices is not None for m in plan.moves), "status": rec.status,
               "variables": stats.get("variables"), "constraints": stats.get("constraints"),
               "podClasses": stats.get("podClasses"), "receivers": stats.get("receivers"),
               "sendVariables": stats.get("sendVariables"), "wallSeconds": round(wall, 1),
               "load": [round(x, 1) for x in os.getloadavg()]}
        rows.append(row)
        print(json.dumps(row), flush=True)
    print("\n| planner | freed nodes | node bound | freed GPUs | GPU bound | pods moved (shares) | status | "
          "CP-SAT vars / constraints | wall (s) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        size = f"{r['variables']:,} / {r['constraints']:,}" if r["variables"] else "-"
        print(f"| {r['planner']} | {r['freedNodes']} | {r['freedNodesBound']} | {r['freedGpus']} | {r['gpuBound']} | "
              f"{r['podsMoved']} ({r['sharesMoved']}) | {r['status']} | {size} | {r['wallSeconds']} |")
    print(f"\nload average after: {os.getloadavg()}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
