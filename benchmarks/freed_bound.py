"""The freed-node bound (issue 17 §2): the old bound (occupied − theoretical minimum, or the budgets' count)
against the pool bound (``optplan.solvers.repack.exact.bound``), and the gap auto reports against each.

Example::

    python benchmarks/freed_bound.py                              # 2,000 and 10,000 nodes, openb; 30 s
    python benchmarks/freed_bound.py --sizes 2000 --configs mixed --repeat 3 --json out.json

Clusters: ``optplan generate`` with node pools and taints (every pool but pool-0 tainted, every GPU pod
selecting and tolerating its pool), seed 1, 60% of cards requested; ``default`` is 8-card nodes in two
pools (the bench's scaling section), ``mixed`` 4- and 8-card nodes in four pools. openb: ``optplan import
openb`` at fill 90%, departures 0.2, seed 0 (skipped without ``--data``/openb). Per cluster: both bounds,
the pool bound's seconds (its pools, groups and CP-SAT solves; medians), what auto frees in
``plan_repack`` within ``--time-limit`` (which now reads the pool bound), and the gap of that plan against
each bound, (bound − freed) / bound, and auto's seconds (``plan_repack`` whole). The pool bound is
deterministic; auto's count can move by a node from run to run (a wall-clock search): medians of
``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from optplan.adapters.generate import GenConfig, generate
from optplan.adapters.kubefile import LoadedInput, load_objects
from optplan.adapters.openb import ImportConfig, import_openb
from optplan.experiments.bench import machine as bench_machine
from optplan.solvers.binpack.frag import fragmentation
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.repack.exact.bound import pool_bound
from optplan.solvers.repack.rules import RepackProblem
from optplan.solvers.repack.run import plan_repack

CONFIGS: dict[str, dict[str, Any]] = {
    "default": {"cards_per_node": (8,), "pools": 2},
    "mixed": {"cards_per_node": (4, 8), "pools": 4},
}
OPENB_NODES = Path("openb") / "openb_node_list_gpu_node.csv"
OPENB_PODS = Path("openb") / "openb_pod_list_default.csv"


def gap(bound: int, freed: int) -> float:
    return round(100.0 * (bound - freed) / bound, 2) if bound else 0.0


def measure(name: str, loaded: LoadedInput, limit: float, repeat: int) -> dict[str, Any]:
    run = next(iter(loaded.runs.values()))
    snap = loaded.snapshot
    problem = RepackProblem(snap, run)
    frag = fragmentation(snap, problem.resource, time_limit=limit / 3)
    old = min(frag.occupied - frag.theoretical_min, problem.budget_freed_upper())
    seconds, freed, reported, auto_seconds, statuses = [], [], [], [], []
    bound = None
    for _ in range(repeat):
        fresh = RepackProblem(snap, run)  # its cached facts are computed inside the timing
        t0 = time.perf_counter()
        bound = pool_bound(fresh)
        seconds.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        out = plan_repack(snap, run, solver="auto", options=PlanOptions(time_limit=limit))
        auto_seconds.append(round(time.perf_counter() - t0, 2))
        freed.append(len(out.result.plan.freed_nodes))
        reported.append(out.result.record.freed_nodes_bound)
        statuses.append(out.result.record.status)
    assert bound is not None
    new = min(old, bound.value)
    f = int(statistics.median(freed))
    return {"cluster": name, "nodes": len(snap.nodes), "occupied": frag.occupied,
            "theoreticalMin": frag.theoretical_min, "candidates": len(problem.candidates),
            "pools": len(bound.pools), "poolsProven": sum(p.proven for p in bound.pools),
            "oldBound": old, "newBound": new, "reportedBounds": reported, "boundSeconds": seconds,
            "boundSecondsMedian": round(statistics.median(seconds), 2), "autoFreed": freed,
            "autoFreedMedian": f, "autoSeconds": auto_seconds, "autoSecondsMedian": statistics.median(auto_seconds),
            "autoStatus": statuses, "gapBefore": gap(old, f), "gapAfter": gap(new, f)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="2000,10000", help="generated cluster sizes (default 2000,10000)")
    ap.add_argument("--configs", default="default,mixed", help=f"of {', '.join(CONFIGS)} (default both)")
    ap.add_argument("--data", default="../shared/data", help="folder holding openb/ (skipped when absent)")
    ap.add_argument("--time-limit", type=float, default=30.0, help="auto's limit (default 30)")
    ap.add_argument("--repeat", type=int, default=1, help="runs per cluster; medians (default 1)")
    ap.add_argument("--json", metavar="OUT", help="also write every run here")
    args = ap.parse_args(argv)
    m = bench_machine()
    print(f"machine: {m['cpus']} cpus, {m['cpu']}, Python {m['python']}; load average {os.getloadavg()[0]:.2f}")
    rows = []
    for size in (int(s) for s in args.sizes.split(",") if s):
        for cfg_name in args.configs.split(","):
            cfg = GenConfig(nodes=size, occupancy=0.6, seed=1, **CONFIGS[cfg_name])
            rows.append(measure(f"generated {size:,} {cfg_name}", load_objects(generate(cfg)), args.time_limit,
                                args.repeat))
            print(json.dumps(rows[-1]), flush=True)
    data = Path(args.data)
    if (data / OPENB_NODES).is_file() and (data / OPENB_PODS).is_file():
        objs, _ = import_openb(str(data / OPENB_NODES), str(data / OPENB_PODS),
                               ImportConfig(fill=90.0, departures=0.2, seed=0))
        rows.append(measure("openb fill 90 / dep 0.2", load_objects(objs, source="openb"), args.time_limit,
                            args.repeat))
        print(json.dumps(rows[-1]), flush=True)
    else:
        print(f"openb skipped: no {OPENB_NODES} and {OPENB_PODS} under {data}")
    print(f"\n| cluster | occupied | old bound | pool bound | bound s | auto frees ({args.time_limit:g} s) | auto s "
          "| gap before % | gap after % |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['cluster']} | {r['occupied']:,} | {r['oldBound']:,} | {r['newBound']:,} | "
              f"{r['boundSecondsMedian']} | {r['autoFreedMedian']:,} | {r['autoSecondsMedian']} | {r['gapBefore']} | "
              f"{r['gapAfter']} |")
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": m, "repeat": args.repeat, "timeLimit": args.time_limit,
                                               "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
