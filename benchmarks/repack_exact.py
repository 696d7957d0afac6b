"""Exact Repack at scale: greedy, auto (greedy + CP-SAT, or its neighbourhood search on models too
large to solve whole) and the MILP twin on generated clusters.

Example::

    python benchmarks/repack_exact.py                          # 200, 2,000 and 10,000 provider nodes
    python benchmarks/repack_exact.py --sizes 200 --solvers greedy,cpsat,milp --repeat 3
    python benchmarks/repack_exact.py --json out.json

Each size has its own time limit: ``--limits`` in the order of ``--sizes``, else the issue's target
for the size (10 s up to 200 nodes, 30 s up to 2,000, 60 s above). Clusters come from ``optplan
generate`` (8-card nodes, two pools with taints, VCJob/ModelServing gangs, occupancy
``--occupancy``). Reported per run: freed nodes and the proven bound, the integer objective with its
best bound and gap, whether the solver proved optimality, wall seconds of the whole ``plan_repack``
(metric, planning and validation), the CP-SAT model size (summed over its independent parts) and
how many parts there were and were proven optimal.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from optplan.adapters.generate import GenConfig, generate
from optplan.adapters.kubefile import load_objects
from optplan.experiments.bench import machine as bench_machine
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.repack.run import plan_repack


def machine() -> str:
    m = bench_machine()
    return f"{m['cpus']} cpus, {m['cpu']}, Python {m['python']}"


def target_limit(nodes: int) -> float:
    """The Exact Repack issue's time limit for a cluster of this size."""
    return 10.0 if nodes <= 200 else 30.0 if nodes <= 2000 else 60.0


def run_one(nodes: int, solver: str, limit: float, occupancy: float, seed: int, workers: int,
            deterministic: bool = False) -> dict[str, Any]:
    objs = generate(GenConfig(nodes=nodes, occupancy=occupancy, seed=seed))
    loaded = load_objects(objs)
    run = next(iter(loaded.runs.values()))
    t0 = time.perf_counter()
    out = plan_repack(loaded.snapshot, run, solver=solver,
                      options=PlanOptions(time_limit=limit, workers=workers, seed=0, deterministic=deterministic))
    wall = time.perf_counter() - t0
    s = out.status.plan.summary
    rec = out.result.record
    return {"nodes": nodes, "solver": solver, "limit": limit, "pods": len(loaded.snapshot.pods),
            "occupied": s.occupied_nodes_before, "theoreticalMin": s.theoretical_min_nodes,
            "freed": s.freed_node_count, "freedBound": rec.freed_nodes_bound, "status": rec.status,
            "objective": rec.objective, "bestBound": rec.best_bound, "gapPercent": rec.gap_percent,
            "wallSeconds": round(wall, 2), **out.result.stats}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="200,2000,10000", help="provider node counts (comma-separated)")
    ap.add_argument("--limits", help="time limit per size, seconds (comma-separated; default: the issue's targets)")
    ap.add_argument("--solvers", default="greedy,auto", help="planners to run (greedy, cpsat, milp, auto)")
    ap.add_argument("--occupancy", type=float, default=0.6)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=1, help="runs per cell; the median wall time is reported")
    ap.add_argument("--json", metavar="OUT", help="write every run as JSON")
    ap.add_argument("--deterministic", action="store_true", help="limits count work, not wall-clock seconds")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    limits = [float(x) for x in args.limits.split(",")] if args.limits else [target_limit(n) for n in sizes]
    if len(limits) < len(sizes):
        limits += [limits[-1]] * (len(sizes) - len(limits))
    print(f"machine: {machine()}; workers {args.workers}; occupancy {args.occupancy}; seed {args.seed}")
    rows: list[dict[str, Any]] = []
    header = ("nodes", "solver", "limit", "freed", "freedBound", "status", "objective", "bestBound", "gapPercent",
              "wallSeconds", "variables", "constraints", "sendVariables", "receiversPruned", "components",
              "componentsProven", "lnsSteps", "lnsImproved", "lnsVariables")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for n, limit in zip(sizes, limits, strict=False):
        for solver in args.solvers.split(","):
            runs = [run_one(n, solver, limit, args.occupancy, args.seed, args.workers, args.deterministic)
                    for _ in range(args.repeat)]
            row = dict(runs[0])
            row["wallSeconds"] = round(statistics.median(r["wallSeconds"] for r in runs), 2)
            rows.append(row)
            print("| " + " | ".join("-" if row.get(h) is None else str(row.get(h)) for h in header) + " |",
                  flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"machine": machine(), "runs": rows}, f, indent=2)


if __name__ == "__main__":
    main()
