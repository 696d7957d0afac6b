"""Time the greedy Repack planner on synthetic snapshots (``optplan.adapters.generate``).

Example::

    python benchmarks/greedy_scale.py                      # 1,000 nodes of 8 cards, ~8,000 pods
    python benchmarks/greedy_scale.py --nodes 2000 --repeat 3 --json out.json

Each repetition regenerates the snapshot from the same seed and times, separately: generation,
``load_objects``, ``fragmentation``, the greedy planner alone (a fresh ``RepackProblem``, so its
cached rule facts are computed inside the timing) and the full ``plan_repack`` (fragmentation, greedy,
status and ``validate_plan``). Medians are printed with the snapshot's counts, the plan's outcome and
the machine. The default workload mix is chosen so that 1,000 nodes hold about 8,000 pods:
0.88 occupancy of mostly 1-card pods (90% 1, 7% 2, 3% 4 cards), a daemonset pod per node and a
light cpu-only load (about one small pod per node). Eight pods per 8-card node cannot all request
cards unless nearly all are 1-card pods at ~88% occupancy, hence the mix.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import statistics
import sys
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

from optplan.adapters.generate import GenConfig, generate
from optplan.adapters.kubefile import load_objects
from optplan.experiments.bench import machine as bench_machine
from optplan.solvers.binpack.frag import fragmentation
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.repack.base import get_planner
from optplan.solvers.repack.rules import RepackProblem
from optplan.solvers.repack.run import plan_repack

POD_SIZES = ((1, 0.9), (2, 0.07), (4, 0.03))
GANG_SIZES = ((1, 0.4), (2, 0.3), (4, 0.2), (8, 0.1))


class _GreedyLog(logging.Handler):
    """Keeps the greedy's summary line arguments (freed, moved, wall, rounds, evaluations)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.last: tuple[Any, ...] = ()

    def emit(self, record: logging.LogRecord) -> None:
        if isinstance(record.args, tuple) and record.msg.startswith("greedy:"):
            self.last = record.args


def machine() -> dict[str, Any]:
    """optplan bench's machine facts, plus what this script also prints."""
    base = bench_machine()
    return {"nproc": base["cpus"], "cpu_count": os.cpu_count(), "cpu_model": base["cpu"], "python": base["python"],
            "implementation": platform.python_implementation(), "platform": platform.platform()}


class _Clock:
    """Wall and process-CPU seconds per named phase (CPU time is less disturbed by a busy machine)."""

    def __init__(self) -> None:
        self.wall: dict[str, float] = {}
        self.cpu: dict[str, float] = {}
        self._w = time.perf_counter()
        self._c = time.process_time()

    def lap(self, name: str) -> None:
        w, c = time.perf_counter(), time.process_time()
        self.wall[name], self.cpu[name] = w - self._w, c - self._c
        self._w, self._c = w, c


def run_once(cfg: GenConfig, time_limit: float, handler: _GreedyLog) -> dict[str, Any]:
    clock = _Clock()
    objs = generate(cfg)
    clock.lap("generate")
    loaded = load_objects(objs)
    clock.lap("load_objects")
    snap = loaded.snapshot
    (run,) = loaded.runs.values()
    frag = fragmentation(snap, cfg.resource, time_limit=time_limit)
    clock.lap("fragmentation")
    result = get_planner("greedy").plan(RepackProblem(snap, run), PlanOptions(time_limit=time_limit))
    clock.lap("greedy")
    greedy_log = handler.last
    out = plan_repack(snap, run, options=PlanOptions(time_limit=time_limit))
    clock.lap("plan_repack")
    if out.result.plan != result.plan:
        raise SystemExit("greedy_scale: the greedy gave different plans on the same snapshot")
    kinds = Counter(o["kind"] for o in objs)
    pods = snap.pods.values()
    s = out.status.plan.summary
    return {
        "seconds": clock.wall,
        "cpu_seconds": clock.cpu,
        "counts": {
            "nodes": kinds["Node"], "pods": kinds["Pod"],
            "gpu_pods": sum(1 for p in pods if p.request(cfg.resource) > 0),
            "daemonset_pods": sum(1 for p in pods if p.namespace == "kube-system"),
            "cpu_only_pods": sum(1 for p in pods if p.namespace == "services"),
            "pod_groups": kinds["PodGroup"], "pdbs": kinds["PodDisruptionBudget"],
            "cards": sum(n.allocatable[cfg.resource] for n in snap.nodes.values()) // 1000,
            "requested_cards": sum(p.request(cfg.resource) for p in pods) // 1000,
        },
        "plan": {
            "outcome": out.reason, "freed_nodes": len(result.plan.freed_nodes),
            "moved_pods": len(result.plan.moves),
            "frag_before_percent": s.frag_before_percent, "frag_after_percent": s.frag_after_percent,
            "frag_before_exact": float(frag.percent()),
            "frag_after_exact": float(frag.percent(frag.occupied - len(result.plan.freed_nodes))),
            "occupied_before": s.occupied_nodes_before, "occupied_after": s.occupied_nodes_after,
            "theoretical_min": s.theoretical_min_nodes, "theoretical_min_proven": s.theoretical_min_proven,
            "candidates": len(RepackProblem(snap, run).candidates),
            "greedy_rounds": greedy_log[3] if len(greedy_log) > 4 else None,
            "greedy_evaluations": greedy_log[4] if len(greedy_log) > 4 else None,
            "rejections": result.rejections,
        },
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=1000, help="provider nodes (default 1000)")
    ap.add_argument("--cards", type=int, default=8, help="cards per node (default 8)")
    ap.add_argument("--occupancy", type=float, default=0.88,
                    help="fraction of cards requested (default 0.88)")
    ap.add_argument("--cpu-pressure", type=float, default=0.008,
                    help="share of cpu in cpu-only pods (default 0.008)")
    ap.add_argument("--pdb-share", type=float, default=0.1,
                    help="share of PodGroups with a PDB (default 0.1)")
    ap.add_argument("--seed", type=int, default=0, help="generator seed (default 0)")
    ap.add_argument("--repeat", type=int, default=5, help="repetitions; medians are reported (default 5)")
    ap.add_argument("--time-limit", type=float, default=10.0, help="limit for the exact minimum (default 10)")
    ap.add_argument("--json", metavar="OUT", help="also write every repetition and the medians here")
    args = ap.parse_args(argv)
    cfg = GenConfig(nodes=args.nodes, cards_per_node=(args.cards,), occupancy=args.occupancy,
                    pod_sizes=POD_SIZES, gang_sizes=GANG_SIZES, cpu_pressure=args.cpu_pressure,
                    pdb_share=args.pdb_share, seed=args.seed)
    handler = _GreedyLog()
    greedy_logger = logging.getLogger("optplan.solvers.repack.greedy")
    greedy_logger.addHandler(handler)
    greedy_logger.setLevel(logging.INFO)
    info = machine()
    info["load_average_start"] = os.getloadavg()
    print(f"machine: {info['nproc']} usable cpus ({info['cpu_count']} online), {info['cpu_model']}, "
          f"{info['implementation']} {info['python']}; load average {info['load_average_start'][0]:.2f}")
    print(f"config:  {cfg}")
    runs = []
    for i in range(args.repeat):
        r = run_once(cfg, args.time_limit, handler)
        runs.append(r)
        secs = "  ".join(f"{k} {v:.3f}s (cpu {r['cpu_seconds'][k]:.3f}s)" for k, v in r["seconds"].items())
        print(f"run {i + 1}/{args.repeat}: {secs}", flush=True)
    medians = {k: statistics.median(r["seconds"][k] for r in runs) for k in runs[0]["seconds"]}
    cpu_medians = {k: statistics.median(r["cpu_seconds"][k] for r in runs) for k in runs[0]["seconds"]}
    first = runs[0]
    c, p = first["counts"], first["plan"]
    print(f"\ncounts:  {c['nodes']} nodes, {c['pods']} pods ({c['gpu_pods']} GPU, "
          f"{c['daemonset_pods']} daemonset, "
          f"{c['cpu_only_pods']} cpu-only), {c['pod_groups']} PodGroups, {c['pdbs']} PDBs, "
          f"{c['requested_cards']}/{c['cards']} cards requested")
    print(f"plan:    {p['outcome']}: freed {p['freed_nodes']} nodes, moved {p['moved_pods']} pods; frag "
          f"{p['frag_before_percent']}% -> {p['frag_after_percent']}% (occupied {p['occupied_before']} -> "
          f"{p['occupied_after']}, theoretical min {p['theoretical_min']}"
          f"{'' if p['theoretical_min_proven'] else ' (lower bound)'}); {p['candidates']} candidates, "
          f"{p['greedy_rounds']} rounds, {p['greedy_evaluations']} evaluations")
    print(f"rejections: {p['rejections']}")
    print(f"median wall seconds over {args.repeat}: " + "  ".join(f"{k} {v:.3f}" for k, v in medians.items()))
    print(f"median cpu seconds over {args.repeat}:  "
          + "  ".join(f"{k} {v:.3f}" for k, v in cpu_medians.items()))
    load = os.getloadavg()
    print(f"load average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (on {info['nproc']} cpus)")
    if args.json:
        doc = {"machine": info, "config": asdict(cfg), "repeat": args.repeat, "medians_seconds": medians,
               "medians_cpu_seconds": cpu_medians, "load_average_end": load, "runs": runs}
        Path(args.json).write_text(json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
