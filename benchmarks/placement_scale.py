"""Gang placement at scale: a hard-topology gang on a three-tier HyperNode tree.

Example::

    python benchmarks/placement_scale.py                      # 2,000 nodes, a 64-pod gang
    python benchmarks/placement_scale.py --nodes 4000 --gang 128 --repeat 3
    python benchmarks/placement_scale.py --victims            # the gang must preempt

The cluster: ``--nodes`` 8-GPU nodes; racks of 8 nodes (tier 1), 8 racks per spine (tier 2), 4
spines per pod-of-spines (tier 3). A seeded share of every node's GPUs is already taken by running
pods (so racks differ in free room). One VCJob of ``--gang`` single-GPU workers with
``networkTopology: {mode: hard, highestTierAllowed: 2}``, minAvailable = gang. Reported per solver:
admitted, chosen HyperNode and tier, victims and their cost, wall seconds (median), and the solver
record. The Queue placement issue's targets: greedy under 1 s, CP-SAT proven or with its gap within 10 s.

``--victims``: the running pods belong to a low-priority PriorityClass (``spot``, 10) in the gang's
queue and started at seeded whole hours of the last three days (one start per node), the gang is
high-priority (``train``, 1000), and the default ``--fill`` is 0.95, so that no spine has room for the
gang: every solver must preempt, and the exact model chooses the victims jointly with the placement.
Admitting the same gang as the greedy, the exact plan is no worse on either tier or victim cost: least
cost alone would cross racks (tier 2) to evict less than the greedy's first workable rack (tier 1).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from typing import Any

from optplan.adapters.kubefile import load_objects
from optplan.models.queues import QueueTree
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.placement.place import plan_placement
from optplan.solvers.placement.victims import Catalogue
from optplan.solvers.quota.spot import parse_time

NOW = "2026-01-04T00:00:00Z"


def cluster(nodes: int, gang: int, seed: int, fill: float, victims: bool = False) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    objs: list[dict[str, Any]] = []
    names = [f"n{i:05d}" for i in range(nodes)]
    if victims:
        objs += [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
                  "value": value} for name, value in (("spot", 10), ("train", 1000))]
    for n in names:
        objs.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": n, "labels": {}},
                     "status": {"allocatable": {"cpu": "96", "memory": "768Gi", "pods": "110",
                                                "nvidia.com/gpu": "8"}}})
    busy: dict[str, Any] = {"minMember": 1, "queue": "default"}
    if victims:
        busy["priorityClassName"] = "spot"
    objs.append({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                 "metadata": {"name": "busy", "namespace": "default"}, "spec": busy})
    k = 0
    for n in names:
        used = sum(1 for _ in range(8) if rng.random() < fill)
        hour = rng.randrange(72) if victims else 0  # the default cluster draws exactly as it always did
        started = f"2026-01-{1 + hour // 24:02d}T{hour % 24:02d}:00:00Z"
        for _ in range(used):
            k += 1
            pod: dict[str, Any] = {
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": f"busy-{k:06d}", "namespace": "default",
                             "annotations": {"scheduling.k8s.io/group-name": "busy"}},
                "spec": {"nodeName": n, "schedulerName": "volcano", "containers": [
                    {"name": "c", "resources": {"requests": {"cpu": "4", "memory": "32Gi", "nvidia.com/gpu": "1"}}}]},
                "status": {"phase": "Running"}}
            if victims:
                pod["spec"]["priorityClassName"] = "spot"
                pod["status"]["startTime"] = started
            objs.append(pod)

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
    job: dict[str, Any] = {"queue": "default", "minAvailable": gang, "schedulerName": "volcano",
                           "networkTopology": {"mode": "hard", "highestTierAllowed": 2},
                           "tasks": [{"name": "worker", "replicas": gang, "template": {"spec": {"containers": [
                               {"name": "c", "resources": {"requests": {"cpu": "8", "memory": "64Gi",
                                                                        "nvidia.com/gpu": "1"}}}]}}}]}
    if victims:
        job["priorityClassName"] = "train"
    objs.append({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                 "metadata": {"name": "big-train", "namespace": "default", "creationTimestamp": "2026-01-01T00:00:00Z"},
                 "spec": job})
    return objs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=2000)
    ap.add_argument("--gang", type=int, default=64)
    ap.add_argument("--fill", type=float, default=None,
                    help="chance that each GPU is already taken (default 0.8; 0.95 with --victims)")
    ap.add_argument("--victims", action="store_true", help="low-priority running pods: the gang must preempt")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--solvers", default="greedy,cpsat,auto")
    args = ap.parse_args()
    t0 = time.perf_counter()
    fill = args.fill if args.fill is not None else (0.95 if args.victims else 0.8)
    loaded = load_objects(cluster(args.nodes, args.gang, args.seed, fill, args.victims))
    snap = loaded.snapshot
    jobs = list(snap.jobs.values())
    print(f"{args.nodes} nodes, {len(snap.hyper_nodes)} HyperNodes, {len(snap.pods)} running pods, "
          f"gang {args.gang}; loaded in {time.perf_counter() - t0:.2f}s")
    for solver in args.solvers.split(","):
        times = []
        plan = None
        for _ in range(args.repeat):
            t = time.perf_counter()
            plan = plan_placement(snap, jobs, solver, PlanOptions(time_limit=args.time_limit), now=NOW)
            times.append(time.perf_counter() - t)
        assert plan is not None
        j = plan.jobs[0]
        rec = plan.solver
        cat = Catalogue.build(snap, parse_time(NOW), set(QueueTree(snap.queues).queues))
        cost = sum(cat.candidates[f"{v.namespace}/{v.name}"].cost for v in j.victims)
        print(f"{solver:7s} admitted={j.admitted} hyperNode={j.hyper_node} tier={j.tier} victims={len(j.victims)} "
              f"cost={cost} median {statistics.median(times):.2f}s  status={rec.status} objective={rec.objective} "
              f"bound={rec.best_bound} gap={rec.gap_percent}")


if __name__ == "__main__":
    main()
