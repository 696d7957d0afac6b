"""Calibration of ``optplan replay`` against ``optplan bench``'s online placement (issue 16 §3): the openb
default trace's whole-GPU pods, no Repack, Volcano's binpack with its default weights in both.

The two measure different things, so this walks from one to the other one change at a time, each step
a number, and says what each change costs:

A. online placement as ``optplan bench`` runs it (``sim.online``, FGD's workload: the pods shuffled,
   copies drawn with replacement up to 130% of the GPUs, none leaves, a pod that fits nowhere is
   rejected): GPU allocation at the end, per seed.
B. the same simulator on the replay's arrivals: whole-GPU pods that have a runtime in the trace, in trace
   order (creation time, then name), the trace played again until the requests reach 130% (no shuffle,
   no sampling): what the arrival order and the pods left out (never scheduled) change.
C. the replay (``replay.engine``) of exactly B's pods, each its own gang, arriving within one second,
   never leaving (runtimes set beyond the horizon), replayed for a long horizon so that the
   time-weighted allocation is the final one: what the replay's scheduling (pending gangs retried, not
   rejected) changes — nothing, when the two agree.
D. as C with the gangs the replay forms (seeded sizes 1/2/4/8, minMember = ceil(0.75 × size), all or
   nothing): what gang scheduling changes.
E. (``--compressed``) the replay as the policy table of docs/benchmarks.md runs it: speedup 5000, 40 passes, 24 h, with
   departures: its time-weighted allocation (the ramp from an empty cluster counts, pods leave and
   their cards idle until a fitting gang comes, and the offered load is below 100%), its mean over the
   second half (without the ramp), its highest sample and its allocation at the horizon. This takes a
   few minutes per seed.

Example::

    python benchmarks/replay_calibration.py                 # A-D, 3 seeds, about a minute
    python benchmarks/replay_calibration.py --compressed    # and E (a few minutes more)

Skips (exit 0, one line) when the data folder (``../shared/data/openb``) is absent.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

from optplan.adapters.openb import read_pods
from optplan.cli.replay import load_trace
from optplan.experiments.replay.config import ReplayConfig
from optplan.experiments.replay.engine import ReplayResult, replay
from optplan.experiments.replay.trace import Trace, TraceGang
from optplan.experiments.sim.online import SimNode, SimPod, fgd_workload, simulate

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "openb"
NODES = "openb_node_list_gpu_node.csv"
PODS = "openb_pod_list_default.csv"
PERCENTS = (130.0, 100.0)
"""Requests as a share of the GPUs: 130 as ``optplan bench`` (and the FGD simulator) runs it, where the
cluster ends saturated whatever the order; 100, where the order and the gangs show."""
SINGLE = ((1, 1.0),)
FOREVER = 1e9
"""A runtime no replay here reaches: no pod leaves."""
HORIZON = 1e7
"""Seconds replayed in C and D: arrivals take one, so the time-weighted allocation is the final one
to within 1e-7."""


def _prefix(trace: Trace, total_gpus: int, percent: float) -> list[TraceGang]:
    """The trace's gangs in order while their requests stay within ``percent`` of the GPUs."""
    out: list[TraceGang] = []
    asked = 0
    for g in trace.gangs:
        if asked + g.cards > percent / 100 * total_gpus:
            break
        out.append(g)
        asked += g.cards
    return out


def _instant(trace: Trace, gangs: list[TraceGang]) -> Trace:
    """The gangs arriving in order within one second, never leaving."""
    n = max(len(gangs), 1)
    moved = [replace(g, created=k / n, pods=tuple(replace(p, runtime=FOREVER) for p in g.pods))
             for k, g in enumerate(gangs)]
    return Trace(name=trace.name, nodes=trace.nodes, gangs=tuple(moved), stats=trace.stats)


def _end(r: ReplayResult) -> float:
    return r.series[-1][1] if r.series else 0.0


def _row(step: str, values: list[float], seconds: float) -> str:
    mean = statistics.fmean(values)
    spread = f"{min(values):.2f}–{max(values):.2f}" if len(values) > 1 else "-"
    return f"| {step} | {mean:.2f} | {spread} | {seconds:.1f} |"


def _ladder(percent: float, seeds: list[int], nodes: Path, pods: Path, base: Trace, sim_nodes: list[SimNode],
            trace_pods: list[SimPod]) -> list[str]:
    """Steps A-D with requests up to ``percent`` of the GPUs."""
    rows, gpus, at = [], base.total_gpus, f"{percent:g}%"
    t0, vals = time.perf_counter(), []
    for seed in seeds:
        vals.append(simulate(sim_nodes, fgd_workload(trace_pods, gpus, percent, seed), "greedy").alloc_percent)
    rows.append(_row(f"{at} A. online greedy, FGD workload (shuffled, sampled), rejects", vals,
                     time.perf_counter() - t0))

    singles = _prefix(base, gpus, percent)
    arrivals = [SimPod(p.name, g.cpu, g.memory, g.gpu, 1000, g.models) for g in singles for p in g.pods]
    t0 = time.perf_counter()
    b = simulate(sim_nodes, arrivals, "greedy")
    rows.append(_row(f"{at} B. online greedy, the replay's pods in trace order ({len(arrivals):,} pods, "
                     f"{b.requested_gpus:,} GPUs)", [b.alloc_percent], time.perf_counter() - t0))

    t0 = time.perf_counter()
    c = replay(_instant(base, singles), ReplayConfig(horizon=HORIZON))
    rows.append(_row(f"{at} C. replay of B's pods, single-pod gangs, no departures (pending retried)", [_end(c)],
                     time.perf_counter() - t0))

    t0, vals, waiting = time.perf_counter(), [], []
    for seed in seeds:
        ganged = load_trace(str(nodes), str(pods), seed=seed, repeat=3)
        d = replay(_instant(ganged, _prefix(ganged, gpus, percent)), ReplayConfig(horizon=HORIZON, seed=seed))
        vals.append(_end(d))
        waiting.append(d.series[-1][2])
    rows.append(_row(f"{at} D. as C with the replay's gangs (sizes 1/2/4/8, minMember 75%; "
                     f"{min(waiting)}–{max(waiting)} gangs left waiting)", vals, time.perf_counter() - t0))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="folder with the openb CSVs")
    ap.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 (FGD's shuffle, the gang sizes)")
    ap.add_argument("--compressed", action="store_true", help="also step E (a few minutes)")
    args = ap.parse_args(argv)
    nodes, pods = args.data / NODES, args.data / PODS
    if not nodes.is_file() or not pods.is_file():
        print(f"skipped: {nodes} or {pods} is absent")
        return 0
    seeds = list(range(max(1, args.seeds)))
    rows = ["| step | GPU allocation % (mean) | min–max over seeds | seconds |", "|---|---|---|---|"]

    base = load_trace(str(nodes), str(pods), gang_sizes=SINGLE, repeat=3)
    sim_nodes = list(base.nodes)
    trace_pods = [SimPod(p.name, p.cpu, p.memory, p.gpu, p.gpu_milli, p.models) for p in read_pods(str(pods))]

    for percent in PERCENTS:
        rows += _ladder(percent, seeds, nodes, pods, base, sim_nodes, trace_pods)
    if args.compressed:
        t0, tw, end, late, peak, load = time.perf_counter(), [], [], [], [], []
        for seed in seeds:
            tr = load_trace(str(nodes), str(pods), seed=seed, speedup=5000, repeat=40)
            e = replay(tr, ReplayConfig(horizon=24 * 3600, seed=seed))
            tw.append(e.allocation_percent)
            end.append(_end(e))
            half = [a for t, a, _ in e.series if t >= e.start + e.horizon / 2]
            late.append(statistics.fmean(half))
            peak.append(max(a for _, a, _ in e.series))
            load.append(100 * e.offered_load)
        took = time.perf_counter() - t0
        rows.append(_row(f"E. replay at speedup 5000 × 40 passes, 24 h, departures (offered load "
                         f"{statistics.fmean(load):.1f}%): time-weighted", tw, took))
        rows.append(_row("E. the same: mean over the second 12 h (the ramp from empty left out)", late, 0.0))
        rows.append(_row("E. the same: highest sample", peak, 0.0))
        rows.append(_row("E. the same: allocation at the horizon", end, 0.0))
    print(f"openb default trace, {len(sim_nodes):,} nodes, {base.total_gpus:,} GPUs, greedy (Volcano binpack, default "
          f"weights), no Repack; seeds {seeds[0]}..{seeds[-1]}")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
