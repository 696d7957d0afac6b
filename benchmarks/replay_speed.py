"""How fast ``optplan replay`` is: one whole openb replay with Repack every hour and the greedy planner —
wall time and where it goes —, then sweep throughput: cells per minute with 1 and 2 local worker
processes on a small grid. ``--retries-only``: a replay without Repack with the pending gangs retried
against the incremental room (``cluster.RoomIndex``) and with the former full rescan (``rescan=True``),
``--runs`` times each: median wall seconds, capacity checks, and whether both give the same result.

Example::

    python benchmarks/replay_speed.py                      # the default trace at its own speed
    python benchmarks/replay_speed.py --speedup 1000 --repeat 20 --horizon-hours 72 --cells 8
    python benchmarks/replay_speed.py --retries-only --speedup 100000 --repeat 4 --runs 3

Skips (exit 0, one line) when the data folder (``../shared/data/openb``) is absent. Target: the whole
replay under 10 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from optplan.cli.replay import load_trace
from optplan.experiments.replay import sweep
from optplan.experiments.replay.config import ReplayConfig
from optplan.experiments.replay.engine import Replay, replay
from optplan.experiments.replay.trace import Trace

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "openb"
NODES = "openb_node_list_gpu_node.csv"


class _One:
    def __init__(self, trace: Trace) -> None:
        self.trace = trace

    def __call__(self, cell: sweep.Cell) -> Trace:
        return self.trace


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="folder with the openb CSVs")
    ap.add_argument("--pods", default="openb_pod_list_default.csv", help="pod list inside --data")
    ap.add_argument("--speedup", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--horizon-hours", type=float, default=None)
    ap.add_argument("--planner", default="greedy")
    ap.add_argument("--cells", type=int, default=8, help="cells of the throughput grid (seeds x none/interval)")
    ap.add_argument("--cell-horizon-hours", type=float, default=24.0, help="horizon of each throughput cell")
    ap.add_argument("--retries-only", action="store_true", help="only the retry comparison (no Repack)")
    ap.add_argument("--runs", type=int, default=3, help="--retries-only: replays per path (median)")
    args = ap.parse_args(argv)
    nodes, pods = args.data / NODES, args.data / args.pods
    if not nodes.is_file() or not pods.is_file():
        print(f"skipped: {nodes} or {pods} is absent")
        return 0
    horizon = None if args.horizon_hours is None else args.horizon_hours * 3600

    t0 = time.perf_counter()
    trace = load_trace(str(nodes), str(pods), speedup=args.speedup, repeat=args.repeat)
    t_load = time.perf_counter() - t0
    if args.retries_only:
        return retries(trace, horizon, args.runs)
    t0 = time.perf_counter()
    r = replay(trace, ReplayConfig(policy="interval", interval=3600, planner=args.planner, horizon=horizon))
    t_replay = time.perf_counter() - t0
    plan, snap = r.timings["planSeconds"], r.timings["snapshotSeconds"]
    print(f"trace {pods.name}: {r.gangs} gangs, {r.pods} pods, horizon {r.horizon / 86400:.1f} days, "
          f"offered load {100 * r.offered_load:.1f}%")
    print(f"replay, Repack every hour with {args.planner}: {t_load + t_replay:.1f} s "
          f"(target 600 s): reading the trace {t_load:.1f} s, planning {plan:.1f} s in {r.repack['runs']} runs "
          f"({r.repack['skippedUnchanged'] + r.repack['skippedPacked']} skipped), building snapshots {snap:.1f} s, "
          f"events and allocate {t_replay - plan - snap:.1f} s")
    print(f"  allocation {r.allocation_percent:.2f}%, pods moved {r.pods_moved}, freed nodes {r.repack['freedNodes']}")

    cells_trace = load_trace(str(nodes), str(pods), speedup=max(args.speedup, 1000.0), repeat=args.repeat)
    base = ReplayConfig(planner=args.planner, horizon=args.cell_horizon_hours * 3600)
    seeds = list(range(max(1, args.cells // 2)))
    cells = sweep.grid({"policies": ["none", "interval"], "intervals": [60], "seeds": seeds}, ["openb"], base)
    for workers in (1, 2):
        t0 = time.perf_counter()
        out = sweep.run_grid(cells, _One(cells_trace), executor="pool", workers=workers)
        wall = time.perf_counter() - t0
        print(f"sweep of {len(cells)} cells ({args.cell_horizon_hours:g} h each, speedup "
              f"{max(args.speedup, 1000.0):g}) with {workers} worker(s): {wall:.1f} s, "
              f"{60 * len(out.rows) / wall:.1f} cells/minute, {len(out.failed)} failed")
    return 0


def retries(trace: Trace, horizon: float | None, runs: int) -> int:
    """A replay without Repack, pending gangs retried incrementally and by the former rescan."""
    cfg = ReplayConfig(horizon=horizon)
    pods = sum(len(g.pods) for g in trace.gangs)
    out: dict[bool, str] = {}
    for rescan in (True, False):
        walls = []
        for _ in range(runs):
            run = Replay(trace, cfg, rescan=rescan)
            t0 = time.perf_counter()
            r = run.run()
            walls.append(time.perf_counter() - t0)
        out[rescan] = json.dumps(r.to_dict(), sort_keys=True)
        print(f"{'rescan (former)' if rescan else 'incremental':16s}: median {statistics.median(walls):.2f} s of "
              f"{runs} ({', '.join(f'{w:.2f}' for w in walls)}), {run.cluster.room_checks} capacity checks, "
              f"{pods} pods, {r.waits['all']['gangs']} gangs ({r.waits['all']['censored']} censored)")
    print(f"same result: {out[True] == out[False]}")
    return 0 if out[True] == out[False] else 1


if __name__ == "__main__":
    sys.exit(main())
