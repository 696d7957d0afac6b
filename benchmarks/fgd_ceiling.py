"""The ceiling of the FGD paper's table runs: how much of the GPUs any placement without migration could
allocate when every arrival is known in advance (``optplan.experiments.sim``).

Example::

    python benchmarks/fgd_ceiling.py --data ../shared/data --seeds 42 43 --workloads default

Per workload and seed, on the table's cluster and workload (``sim.table``'s; the stream is the FGD simulator's,
130% of the GPUs):

- ``bound``: an upper bound. A linear relaxation (HiGHS through PuLP) over node types (cpu, memory, GPUs,
  model; the count of each): how many pods of each kind (cpu, memory, GPU ask, models) of the stream go on
  each node type, at most the stream's count, a kind only on a type it fits alone; per type the summed cpu,
  memory and milli-GPU within the type's total, and the whole GPUs plus the shares above 500 milli (two never
  share a device) within its devices. Maximise the milli-GPU placed. Any placement of a subset of the stream
  (any order, any policy, nothing moved) satisfies it, so its optimum bounds them all.
- ``offline``: a placement that reaches the ceiling's lower side: the same stream re-ordered as an offline
  packer would (GPU pods by decreasing milli-GPU, whole GPUs first, cpu-only pods last), each placed by the
  given policies in turn (``shared.simulate``; the best of them kept). It is a placement of a subset of the
  stream, so the ceiling lies between it and ``bound``.

Both are in points of the cluster's GPUs (allocation %); beside them the stream's most frequent share size, its
arrivals and how many of them the offline placement took (a share of more than 500 milli leaves a hole only
smaller shares fill). Without the data it says so and exits 0.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pulp

from optplan.experiments.sim import shared, table
from optplan.experiments.sim.online import SimNode, SimPod, fgd_workload
from optplan.solvers.core.gpushare import MILLI


def lp_bound(nodes: Sequence[SimNode], stream: Sequence[SimPod]) -> float:
    """The relaxation's optimum (module docstring), allocation %."""
    types = Counter((n.cpu, n.memory, n.gpu, n.model) for n in nodes)
    kinds = Counter((p.cpu, p.memory, shared.arrival_of(p).ask) for p in stream)
    prob = pulp.LpProblem("ceiling", pulp.LpMaximize)
    y: dict[tuple[int, int], pulp.LpVariable] = {}  # y[kind, type]: pods of the kind on nodes of the type
    kind_list, type_list = list(kinds), list(types)
    for a, (cpu, mem, ask) in enumerate(kind_list):
        if ask.none:
            continue  # cpu-only pods add no GPU: leaving them out only loosens nothing
        for b, (ncpu, nmem, ngpu, model) in enumerate(type_list):
            if cpu > ncpu or mem > nmem or ask.whole > ngpu or ngpu == 0:
                continue
            if ask.models and model not in ask.models:
                continue
            y[a, b] = pulp.LpVariable(f"y_{a}_{b}", lowBound=0)
    for a in range(len(kind_list)):
        terms = [v for (k, _b), v in y.items() if k == a]
        if terms:
            prob += pulp.lpSum(terms) <= kinds[kind_list[a]]
    for b, (ncpu, nmem, ngpu, _model) in enumerate(type_list):
        on = [(kind_list[a], v) for (a, k), v in y.items() if k == b]
        if not on:
            continue
        n = types[type_list[b]]
        prob += pulp.lpSum(c * v for (c, _m, _a), v in on) <= n * ncpu
        prob += pulp.lpSum(m * v for (_c, m, _a), v in on) <= n * nmem
        prob += pulp.lpSum(a.total_milli * v for (_c, _m, a), v in on) <= n * ngpu * MILLI
        prob += pulp.lpSum((a.whole if a.whole else 1) * v for (_c, _m, a), v in on
                           if a.whole or a.milli > MILLI // 2) <= n * ngpu
    prob += pulp.lpSum(kind_list[a][2].total_milli * v for (a, _b), v in y.items())
    prob.solve(pulp.HiGHS(msg=False, threads=1))
    if pulp.LpStatus[prob.status] != "Optimal":
        raise RuntimeError(f"the relaxation ended {pulp.LpStatus[prob.status]}")
    total = sum(n.gpu for n in nodes) * MILLI
    return 100.0 * float(pulp.value(prob.objective)) / total


def offline_order(stream: Sequence[SimPod]) -> list[SimPod]:
    """GPU pods by decreasing milli-GPU (whole GPUs first), cpu-only pods last; ties in arrival order."""
    def key(p: SimPod) -> tuple[int, int]:
        return (0 if p.gpu else 1, -(p.gpu * p.gpu_milli))
    return sorted(stream, key=key)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=Path("../shared/data"))
    ap.add_argument("--seeds", type=int, nargs="+", default=[42])
    ap.add_argument("--workloads", nargs="+", default=["default"])
    ap.add_argument("--policies", nargs="+", default=["best-fit", "fgd"])
    args = ap.parse_args(argv)
    if not (args.data / table.NODES).is_file():
        print(f"no {table.NODES} under {args.data}: nothing to do")
        return 0
    nodes = table.read_sim_nodes(args.data / table.NODES)
    gpus = sum(n.gpu for n in nodes)
    print("| workload | seed | bound % | offline % (policy) | most frequent share: milli, arrivals, placed offline "
          "| wall s |")
    print("|---|---|---|---|---|---|")
    for wl in args.workloads:
        trace = table.read_sim_pods(args.data / "openb" / f"openb_pod_list_{wl}.csv")
        target = shared.target_workload(trace)
        for seed in args.seeds:
            t0 = time.perf_counter()
            stream = fgd_workload(trace, gpus, table.PERCENT, seed, every_pod=True)
            bound = lp_bound(nodes, stream)
            ordered = offline_order(stream)
            best = max((shared.simulate(nodes, ordered, pol, target, shared.SharedConfig(seed=seed))
                        for pol in args.policies), key=lambda r: r.alloc_percent)
            shares = Counter(p.gpu_milli for p in stream if p.gpu == 1 and p.gpu_milli < MILLI)
            size = max(shares, key=lambda m: (shares[m], m)) if shares else 0
            placed = sum(1 for p, where in zip(ordered, best.assignment, strict=True)
                         if where is not None and p.gpu == 1 and p.gpu_milli == size)
            print(f"| {wl} | {seed} | {bound:.2f} | {best.alloc_percent:.2f} ({best.policy}) "
                  f"| {size}, {shares[size]}, {placed} | {time.perf_counter() - t0:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
