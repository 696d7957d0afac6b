"""Where a policy's free GPU capacity is at the end of the FGD paper's table runs (``optplan.experiments.sim``).

Example::

    python benchmarks/shared_leftover.py --data ../shared/data --policy fgd --seed 42 --workloads default cpu100
    python benchmarks/shared_leftover.py --data ../shared/data --policy frag-hole-batch --batch 64 --workloads default
    python benchmarks/shared_leftover.py --data ../shared/data --policy frag-defer --workloads default gpuspec10

Per workload, one run (``shared.simulate`` on the table's cluster and workload), then the free milli-GPUs
split three ways, each in points of the cluster's GPUs: on devices with less free than the smallest GPU ask
among the rejected pods (no rejected pod fits there, whatever its cpu), on entirely free devices, and the
rest; the hole size holding the most free milli; and the arrived requests (% of the GPUs) and the allocation
at the first rejection. For ``frag-defer``, then per workload the shares it held back: how many, how many it
placed after a wait and how long they waited (arrivals), how many it still holds at the end, the arrivals
since theirs, and how many of those fit the end state (a whole-GPU pod of FGD's target workload still
fitting then). With ``--kinds N``, then per workload the N most frequent kinds of pod (GPUs, milli each):
placed, rejected, and the arrived requests at the first rejection of the kind (or never). Without the data
it says so and exits 0.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from optplan.experiments.sim import shared, table
from optplan.experiments.sim.online import fgd_workload
from optplan.solvers.core.gpushare import MILLI


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=Path("../shared/data"))
    ap.add_argument("--policy", default="fgd")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--workloads", nargs="+", default=list(table.WORKLOADS))
    ap.add_argument("--kinds", type=int, default=0, help="also list the N most frequent kinds of pod")
    ap.add_argument("--batch", type=int, default=0, help="arrivals per solve of the batch policies (0: their default)")
    ap.add_argument("--check", choices=("on", "off"),
                    help="frag-hole-batch: keep a solve only when it leaves its nodes less fragmented after the batch "
                         "than frag-hole's sequence (SharedConfig.batch_check; default: when pods require a GPU "
                         "model)")
    args = ap.parse_args(argv)
    if not (args.data / table.NODES).is_file():
        print(f"no {table.NODES} under {args.data}: nothing to do")
        return 0
    nodes = table.read_sim_nodes(args.data / table.NODES)
    gpus = sum(n.gpu for n in nodes)
    print("| workload | alloc % | free | in holes below the smallest rejected ask | on free devices | other "
          "| arrived % at the first rejection | alloc % then | the most free milli in one hole size |")
    print("|---|---|---|---|---|---|---|---|---|")
    listed: list[tuple[str, list[tuple[tuple[int, int], list[float]]]]] = []
    held: list[tuple[str, int, int, list[int], int, int]] = []
    check = None if args.check is None else args.check == "on"
    for wl in args.workloads:
        trace = table.read_sim_pods(args.data / "openb" / f"openb_pod_list_{wl}.csv")
        stream = fgd_workload(trace, gpus, table.PERCENT, args.seed, every_pod=True)
        res = shared.simulate(nodes, stream, args.policy, shared.target_workload(trace),
                              shared.SharedConfig(seed=args.seed, batch_check=check,
                                                  **({"batch": args.batch} if args.batch else {})))
        arrivals = [shared.arrival_of(p) for p in stream]
        cl = shared.DevCluster(nodes)
        arrived, first = 0, (float("nan"), float("nan"))
        kinds: dict[tuple[int, int], list[float]] = {}  # (GPUs, milli each): placed, rejected, first rejection
        for p, where in zip(arrivals, res.assignment, strict=True):
            kind = kinds.setdefault((p.ask.devices, p.ask.milli or (MILLI if p.ask.whole else 0)),
                                    [0, 0, float("nan")])
            if where is not None:
                cl.take(where[0], p, where[1])
                kind[0] += 1
            else:
                kind[1] += 1
                if kind[2] != kind[2]:
                    kind[2] = 100 * arrived / cl.total_milli
                if first[0] != first[0]:
                    first = (100 * arrived / cl.total_milli, 100 * cl.allocated / cl.total_milli)
            arrived += p.ask.total_milli
        listed.append((wl, sorted(kinds.items(), key=lambda kv: -(kv[1][0] + kv[1][1]))[: args.kinds]))
        if res.waits or res.waiting:
            waits = sorted(w for _k, w in res.waits)
            fitting = sum(bool(cl.fits(arrivals[k]).any()) for k in res.waiting)
            since = sorted(len(arrivals) - 1 - k for k in res.waiting)
            held.append((wl, len(waits) + len(res.waiting), len(waits), waits, since, fitting))
        asks = [p.ask.milli if p.ask.is_share else MILLI for p, where in zip(arrivals, res.assignment, strict=True)
                if where is None and not p.ask.none]
        smallest = min(asks, default=MILLI)
        free = cl.free_gpu[cl.free_gpu > 0]
        point = cl.total_milli / 100
        holes, whole = free[free < smallest].sum(), free[free == MILLI].sum()
        other = free.sum() - holes - whole
        sizes, counts = np.unique(free[free < MILLI], return_counts=True)
        top = int(np.argmax(sizes * counts)) if len(sizes) else -1
        hole = f"{sizes[top]} milli: {sizes[top] * counts[top] / point:.2f}" if top >= 0 else "-"
        print(f"| {wl} | {res.alloc_percent:.2f} | {100 - res.alloc_percent:.2f} | {holes / point:.2f} "
              f"(< {smallest}) | {whole / point:.2f} | {other / point:.2f} | {first[0]:.1f} | {first[1]:.2f} "
              f"| {hole} |",
              flush=True)
    if held:
        print("\n| workload | shares held back | placed after a wait | their wait in arrivals: median, max "
              "| still held at the end | arrivals since theirs: median, max | of those, fitting the end state |")
        print("|---|---|---|---|---|---|---|")
        for wl, n, later, waits, since, fitting in held:
            mid = f"{waits[len(waits) // 2]}, {waits[-1]}" if waits else "-"
            left = f"{since[len(since) // 2]}, {since[-1]}" if since else "-"
            print(f"| {wl} | {n} | {later} | {mid} | {len(since)} | {left} | {fitting} |")
    if args.kinds:
        print("\n| workload | kind: GPUs × milli | placed | rejected | arrived % at its first rejection |")
        print("|---|---|---|---|---|")
        for wl, rows in listed:
            for (gpus_, milli), (placed, rejected, at) in rows:
                first_at = f"{at:.1f}" if at == at else "never"
                print(f"| {wl} | {gpus_} × {milli} | {placed:.0f} | {rejected:.0f} | {first_at} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
