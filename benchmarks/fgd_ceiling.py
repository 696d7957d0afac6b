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
smaller shares fill).

Then the cap the most frequent share above 500 milli (``size``; 810 on the default trace) puts on the placements
that take many of them (``hole_cap``): a device holding such a share has ``hole = 1000 - size`` milli beside
it, which only shares of ``hole`` or less fill, and the stream holds ``small`` milli of those; so any placement
of n such shares (any order, any policy, nothing moved) leaves at least ``hole * n - small`` milli free:

- ``cap at FGD's n``: the cap at n = the count FGD places (``--policies``' last one is the reference run, FGD
  by default), beside FGD's allocation + 1.5: it bounds every placement that takes at least FGD's count;
- ``forced``, ``cap, on-arrival``: a count every on-arrival, work-conserving policy places (one that places a pod
  on its arrival whenever some node fits it, whatever node it chooses; ``forced_shares``), and the cap at it,
  which bounds every such policy. A share arrival is forced when the pods before it cannot, however placed,
  block every node it may go on; a node is blocked when its free cpu or memory is below the share's, or each
  of its devices holds more than ``hole`` milli. A relaxation decides it (an LP, HiGHS): pods of each kind
  before the arrival spread over node types (within the type's cpu, memory and milli-GPU), each pod blocking
  the fraction ``max(devices it loads / the node's devices, cpu / the cpu that blocks, memory / the memory
  that blocks)`` of a node, at most 1 (a whole GPU or a share above ``hole`` loads one device, a smaller share
  ``milli / (hole + 1)`` of one); the blocked fractions of a node add up to 1 at least when it is blocked, so
  if no spread covers every node the arrival found a node with room and was placed.

Without the data it says so and exits 0.
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


def big_share(stream: Sequence[SimPod]) -> int:
    """The most frequent share size above 500 milli (the larger among equals), 0 when there is none."""
    sizes = Counter(p.gpu_milli for p in stream if p.gpu == 1 and MILLI // 2 < p.gpu_milli < MILLI)
    return max(sizes, key=lambda m: (sizes[m], m)) if sizes else 0


def hole_cap(total_milli: int, hole: int, small: int, n: int) -> float:
    """Allocation % at most, for a placement of ``n`` shares leaving ``hole`` milli each that only ``small``
    milli of smaller shares can fill (module docstring)."""
    return 100.0 * (total_milli - max(0, hole * n - small)) / total_milli


def _blocks(kind: tuple[int, int, shared.GpuAsk], node: tuple[int, int, int, str], pod: shared.Arrival,
            hole: int) -> float:
    """The fraction of a node of type ``node`` that one pod of ``kind`` blocks for ``pod`` (module docstring)."""
    cpu, mem, ask = kind
    ncpu, nmem, ngpu, _model = node
    loads = ask.whole or (1.0 if ask.milli > hole else ask.milli / (hole + 1))
    return min(1.0, max(loads / ngpu, cpu / (ncpu - pod.cpu + 1), mem / (nmem - pod.memory + 1)))


def _placed(pods: Sequence[SimPod], assignment: Sequence[object], size: int) -> int:
    """How many shares of ``size`` an assignment placed."""
    return sum(1 for p, where in zip(pods, assignment, strict=True)
               if where is not None and p.gpu == 1 and p.gpu_milli == size)


def _blockable(types: Counter[tuple[int, int, int, str]], before: Counter[tuple[int, int, shared.GpuAsk]],
               pod: shared.Arrival, hole: int) -> bool:
    """Whether the pods ``before`` a share arrival ``pod`` could leave no node it fits on (module docstring's
    relaxation: False proves that every work-conserving policy places it)."""
    targets = [t for t in types if t[0] >= pod.cpu and t[1] >= pod.memory and t[2] > 0
               and (not pod.ask.models or t[3] in pod.ask.models)]
    prob = pulp.LpProblem("block", pulp.LpMinimize)
    y: dict[tuple[int, int], pulp.LpVariable] = {}  # y[kind, type]: pods of the kind before on nodes of the type
    kinds = list(before)
    for a, (cpu, mem, ask) in enumerate(kinds):
        for b, (ncpu, nmem, ngpu, model) in enumerate(targets):
            if cpu <= ncpu and mem <= nmem and ask.whole <= ngpu and (not ask.models or model in ask.models):
                y[a, b] = pulp.LpVariable(f"y_{a}_{b}", lowBound=0)
    for a, kind in enumerate(kinds):
        terms = [v for (k, _b), v in y.items() if k == a]
        if terms:
            prob += pulp.lpSum(terms) <= before[kind]
    for b, t in enumerate(targets):
        ncpu, nmem, ngpu, _model = t
        on = [(kinds[a], v) for (a, k), v in y.items() if k == b]
        n = types[t]
        prob += pulp.lpSum(_blocks(kind, t, pod, hole) * v for kind, v in on) >= n
        prob += pulp.lpSum(c * v for (c, _m, _a), v in on) <= n * ncpu
        prob += pulp.lpSum(m * v for (_c, m, _a), v in on) <= n * nmem
        prob += pulp.lpSum(a.total_milli * v for (_c, _m, a), v in on) <= n * ngpu * MILLI
    prob += pulp.lpSum([])
    prob.solve(pulp.HiGHS(msg=False, threads=1))
    status = pulp.LpStatus[prob.status]
    if status not in ("Optimal", "Infeasible"):
        raise RuntimeError(f"the blocking relaxation ended {status}")
    return status == "Optimal"


def forced_shares(nodes: Sequence[SimNode], stream: Sequence[SimPod], size: int) -> int:
    """How many shares of ``size`` every on-arrival, work-conserving policy places (module docstring): per
    (cpu, memory, models) of those shares, the arrivals before the first one the pods before it could block
    (blocking only grows with the pods before, so a binary search finds it)."""
    types = Counter((n.cpu, n.memory, n.gpu, n.model) for n in nodes)
    pods = [shared.arrival_of(p) for p in stream]
    hole = MILLI - size
    by_class: dict[tuple[int, int, frozenset[str]], list[int]] = {}
    for k, p in enumerate(pods):
        if p.ask.is_share and p.ask.milli == size:
            by_class.setdefault((p.cpu, p.memory, p.ask.models), []).append(k)
    forced = 0
    for at in by_class.values():
        lo, hi = 0, len(at)  # the first blockable arrival's index in ``at`` lies in [lo, hi]
        while lo < hi:
            mid = (lo + hi) // 2
            before = Counter((p.cpu, p.memory, p.ask) for p in pods[: at[mid]])
            if _blockable(types, before, pods[at[mid]], hole):
                hi = mid
            else:
                lo = mid + 1
        forced += lo
    return forced


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
    ap.add_argument("--policies", nargs="+", default=["best-fit", "fgd"],
                    help="the offline placement's policies; the last one also places the stream in its order "
                         "(the reference run)")
    args = ap.parse_args(argv)
    if not (args.data / table.NODES).is_file():
        print(f"no {table.NODES} under {args.data}: nothing to do")
        return 0
    nodes = table.read_sim_nodes(args.data / table.NODES)
    gpus = sum(n.gpu for n in nodes)
    print("| workload | seed | bound % | offline % (policy) | share: milli, arrivals, placed offline, placed by the "
          "reference | reference % | + 1.5 | cap at its count | forced | cap, on-arrival | wall s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
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
            ref = shared.simulate(nodes, stream, args.policies[-1], target, shared.SharedConfig(seed=seed))
            size = big_share(stream)
            hole = MILLI - size
            small = sum(p.gpu_milli for p in stream if p.gpu == 1 and p.gpu_milli <= hole)
            arrivals = sum(1 for p in stream if p.gpu == 1 and p.gpu_milli == size)
            n_ref = _placed(stream, ref.assignment, size)
            forced = forced_shares(nodes, stream, size) if size else 0
            total = gpus * MILLI
            print(f"| {wl} | {seed} | {bound:.2f} | {best.alloc_percent:.2f} ({best.policy}) "
                  f"| {size}, {arrivals}, {_placed(ordered, best.assignment, size)}, {n_ref} | {ref.alloc_percent:.2f} "
                  f"| {ref.alloc_percent + 1.5:.2f} | {hole_cap(total, hole, small, n_ref):.2f} | {forced} "
                  f"| {hole_cap(total, hole, small, forced):.2f} | {time.perf_counter() - t0:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
