"""Plans and proofs under CPU contention: auto against greedy-fast on the same starved machine.

Example::

    python benchmarks/under_load.py --data ../shared/data                    # loads 0, 1, 3, 8, 16
    python benchmarks/under_load.py --data ../shared/data --loads 0 8 --time-limit 30 --json out.json

Two openb snapshots (``optplan import openb`` at fill 80%, seed 0): the default trace with maxPerRun
10 PodGroups / 64 GPUs, and multigpu50 with 40 PodGroups / 256 GPUs. For each load level the benchmark
starts that many busy processes (a Python loop each, on this machine only; stopped after every
measurement), then runs ``plan_repack`` with ``--solver auto`` and ``--solver greedy-fast`` (wall-clock
limits, one worker), and reports per planner: freed nodes, the claimed freed-node bound, the status, the
time past the limit (``limitExceededSeconds``) and the wall time. Checked on every row, and the run exits 1
if either fails: auto never frees fewer nodes than greedy-fast under the same load, and no claimed bound
is below a plan either planner found on that snapshot at any load.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path
from typing import Any

from optplan.adapters.kubefile import LoadedInput, load_objects
from optplan.adapters.openb import ImportConfig, import_openb
from optplan.experiments.bench import machine as bench_machine
from optplan.models.repack import RepackRun
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.repack.run import plan_repack

CASES = (("default", 10, 64), ("multigpu50", 40, 256))
"""Trace, maxPerRun PodGroups, maxPerRun GPUs."""
BUSY_SECONDS_CAP = 600.0
"""A busy process stops by itself after this long, whatever happens to the benchmark."""


def _busy(stop_at: float) -> None:
    x = 0
    while time.monotonic() < stop_at:
        x = (x * 31 + 7) % 1_000_003


def _snapshot(data: Path, trace: str, groups: int, gpus: int) -> tuple[LoadedInput, RepackRun]:
    cfg = ImportConfig(fill=80.0, seed=0)
    objs, _stats = import_openb(str(data / "openb" / "openb_node_list_gpu_node.csv"),
                                str(data / "openb" / f"openb_pod_list_{trace}.csv"), cfg)
    run = {"apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackRun", "metadata": {"name": "under-load"},
           "spec": {"mode": "DryRun", "goals": [{"resource": "nvidia.com/gpu"}],
                    "maxPerRun": {"podGroups": groups, "resources": {"nvidia.com/gpu": gpus}}}}
    loaded = load_objects([o for o in objs if o.get("kind") != "RepackRun"] + [run])
    return loaded, loaded.runs["under-load"]


def _plan(loaded: LoadedInput, run: RepackRun, solver: str, limit: float) -> dict[str, Any]:
    t0 = time.perf_counter()
    out = plan_repack(loaded.snapshot, run, solver=solver, options=PlanOptions(time_limit=limit, workers=1))
    rec = out.result.record
    return {"solver": solver, "freed": len(out.result.plan.freed_nodes), "bound": rec.freed_nodes_bound,
            "status": rec.status, "late": rec.limit_exceeded_seconds, "wall": round(time.perf_counter() - t0, 2)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=Path("../shared/data"))
    ap.add_argument("--loads", type=int, nargs="+", default=[0, 1, 3, 8, 16])
    ap.add_argument("--time-limit", type=float, default=30.0)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    if not (args.data / "openb").is_dir():
        print(f"no openb data under {args.data}: nothing to measure", file=sys.stderr)
        return 0
    rows: list[dict[str, Any]] = []
    for trace, groups, gpus in CASES:
        loaded, run = _snapshot(args.data, trace, groups, gpus)
        for load in args.loads:
            stop_at = time.monotonic() + BUSY_SECONDS_CAP
            procs = [mp.Process(target=_busy, args=(stop_at,), daemon=True) for _ in range(load)]
            for p in procs:
                p.start()
            try:
                for solver in ("auto", "greedy-fast"):
                    row = {"trace": trace, "load": load, "loadavg": round(os.getloadavg()[0], 1),
                           **_plan(loaded, run, solver, args.time_limit)}
                    rows.append(row)
                    print(json.dumps(row), flush=True)
            finally:
                for p in procs:
                    p.terminate()
                for p in procs:
                    p.join()
    bad = []
    for trace, *_ in CASES:
        mine = [r for r in rows if r["trace"] == trace]
        most = max((r["freed"] for r in mine), default=0)
        bad += [f"{trace} load {r['load']}: {r['solver']} claims bound {r['bound']} < {most} freed elsewhere"
                for r in mine if r["bound"] is not None and r["bound"] < most]
        for load in args.loads:
            at = {r["solver"]: r for r in mine if r["load"] == load}
            if at["auto"]["freed"] < at["greedy-fast"]["freed"]:
                bad.append(f"{trace} load {load}: auto frees {at['auto']['freed']} < greedy-fast's "
                           f"{at['greedy-fast']['freed']}")
    if args.json:
        args.json.write_text(json.dumps({"machine": bench_machine(), "rows": rows, "violations": bad}, indent=1))
    print("\n| trace | busy | loadavg | solver | freed | bound | status | late s | wall s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['trace']} | {r['load']} | {r['loadavg']} | {r['solver']} | {r['freed']} | {r['bound']} | "
              f"{r['status']} | {r['late'] or ''} | {r['wall']} |")
    for line in bad:
        print("VIOLATION:", line)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
