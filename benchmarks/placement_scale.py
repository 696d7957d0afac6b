"""Gang placement at scale: a hard-topology gang on a three-tier HyperNode tree.

Example::

    python benchmarks/placement_scale.py                      # 2,000 nodes, a 64-pod gang
    python benchmarks/placement_scale.py --nodes 4000 --gang 128 --repeat 3

The cluster: ``--nodes`` 8-GPU nodes; racks of 8 nodes (tier 1), 8 racks per spine (tier 2), 4
spines per pod-of-spines (tier 3). A seeded share of every node's GPUs is already taken by running
pods (so racks differ in free room). One VCJob of ``--gang`` single-GPU workers with
``networkTopology: {mode: hard, highestTierAllowed: 2}``, minAvailable = gang. Reported per solver:
admitted, chosen HyperNode and tier, wall seconds (median), and the solver record. The Queue
placement issue's targets: greedy under 1 s, CP-SAT proven or with its gap within 10 s.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from typing import Any

from optplan.adapters.kubefile import load_objects
from optplan.solvers.base import PlanOptions
from optplan.solvers.placement import plan_placement


def cluster(nodes: int, gang: int, seed: int, fill: float) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    objs: list[dict[str, Any]] = []
    names = [f"n{i:05d}" for i in range(nodes)]
    for n in names:
        objs.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": n, "labels": {}},
                     "status": {"allocatable": {"cpu": "96", "memory": "768Gi", "pods": "110",
                                                "nvidia.com/gpu": "8"}}})
    objs.append({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                 "metadata": {"name": "busy", "namespace": "default"}, "spec": {"minMember": 1, "queue": "default"}})
    k = 0
    for n in names:
        used = sum(1 for _ in range(8) if rng.random() < fill)
        for _ in range(used):
            k += 1
            objs.append({"apiVersion": "v1", "kind": "Pod",
                         "metadata": {"name": f"busy-{k:06d}", "namespace": "default",
                                      "annotations": {"scheduling.k8s.io/group-name": "busy"}},
                         "spec": {"nodeName": n, "schedulerName": "volcano", "containers": [
                             {"name": "c", "resources": {"requests": {"cpu": "4", "memory": "32Gi",
                                                                      "nvidia.com/gpu": "1"}}}]},
                         "status": {"phase": "Running"}})

    def hn(name: str, tier: int, members: list[tuple[str, str]]) -> dict[str, Any]:
        return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
                "spec": {"tier": tier, "members": [{"type": t, "selector": {"exactMatch": {"name": m}}}
                                                   for t, m in members]}}

    racks = [names[i:i + 8] for i in range(0, nodes, 8)]
    for r, members in enumerate(racks):
        objs.append(hn(f"rack-{r:04d}", 1, [("Node", m) for m in members]))
    spines = [list(range(i, min(i + 8, len(racks)))) for i in range(0, len(racks), 8)]
    for s, rs in enumerate(spines):
        objs.append(hn(f"spine-{s:03d}", 2, [("HyperNode", f"rack-{r:04d}") for r in rs]))
    for t, i in enumerate(range(0, len(spines), 4)):
        objs.append(hn(f"pod-{t:02d}", 3, [("HyperNode", f"spine-{s:03d}") for s in range(i, min(i + 4, len(spines)))]))
    objs.append({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                 "metadata": {"name": "big-train", "namespace": "default", "creationTimestamp": "2026-01-01T00:00:00Z"},
                 "spec": {"queue": "default", "minAvailable": gang, "schedulerName": "volcano",
                          "networkTopology": {"mode": "hard", "highestTierAllowed": 2},
                          "tasks": [{"name": "worker", "replicas": gang, "template": {"spec": {"containers": [
                              {"name": "c", "resources": {"requests": {"cpu": "8", "memory": "64Gi",
                                                                       "nvidia.com/gpu": "1"}}}]}}}]}})
    return objs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=2000)
    ap.add_argument("--gang", type=int, default=64)
    ap.add_argument("--fill", type=float, default=0.8, help="chance that each GPU is already taken")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--solvers", default="greedy,cpsat,auto")
    args = ap.parse_args()
    t0 = time.perf_counter()
    loaded = load_objects(cluster(args.nodes, args.gang, args.seed, args.fill))
    snap = loaded.snapshot
    jobs = list(snap.jobs.values())
    print(f"{args.nodes} nodes, {len(snap.hyper_nodes)} HyperNodes, {len(snap.pods)} running pods, "
          f"gang {args.gang}; loaded in {time.perf_counter() - t0:.2f}s")
    for solver in args.solvers.split(","):
        times = []
        plan = None
        for _ in range(args.repeat):
            t = time.perf_counter()
            plan = plan_placement(snap, jobs, solver, PlanOptions(time_limit=args.time_limit))
            times.append(time.perf_counter() - t)
        assert plan is not None
        j = plan.jobs[0]
        rec = plan.solver
        print(f"{solver:7s} admitted={j.admitted} hyperNode={j.hyper_node} tier={j.tier} "
              f"median {statistics.median(times):.2f}s  status={rec.status} objective={rec.objective} "
              f"bound={rec.best_bound} gap={rec.gap_percent}")


if __name__ == "__main__":
    main()
