"""``optplan provision`` against its peers on generated clusters: gangs served, nodes added and cost.

Example::

    python benchmarks/provision.py --seeds 1-8 --nodes 24 --time-limit 10

Each instance is ``optplan generate --nodes N --occupancy 0.85 --pending-jobs J --queues 2 --rack-size 4
--topology-share 0.3 --seed S``; its catalogue is built from the snapshot: per node pool, an 8-card group
(price 8 per node), a 4-card group (price 4.6: dearer per card) and an 8-card group whose nodes join the
first rack HyperNode (price 9), each with the pool's labels and taints and at most 4 nodes. Every plan
(auto, greedy, and the peers seed and least-waste as they are) passes the same validator; the table lists,
per instance and planner, gangs served of pending, nodes added, cost, the proven cost bound (auto) and the
seconds taken. The last lines sum served gangs and cost over the instances, and count the instances where
auto serves more gangs than a peer, or as many for less.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from optplan.adapters.kubefile import load_files
from optplan.models.provision import NodeGroup, ProvisionPlan, price_text
from optplan.models.snapshot import Snapshot
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.placement.jobs import jobs_to_place
from optplan.solvers.provision.run import plan_provision

PLANNERS = ("auto", "greedy", "seed", "least-waste")
POOL_LABEL = "optplan.io/pool"


def seeds(text: str) -> list[int]:
    lo, _, hi = text.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


def generate(path: Path, seed: int, nodes: int, jobs: int) -> Snapshot:
    cmd = [sys.executable, "-m", "optplan.cli", "generate", "--nodes", str(nodes), "--occupancy", "0.85",
           "--pending-jobs", str(jobs), "--queues", "2", "--rack-size", "4", "--topology-share", "0.3",
           "--seed", str(seed), "-o", str(path)]
    subprocess.run(cmd, check=True, capture_output=True)
    return load_files([path]).snapshot


def catalogue(snap: Snapshot) -> list[NodeGroup]:
    """Per pool: 8-card, 4-card and 8-card-in-the-first-rack groups, templated on the pool's first node."""
    out = []
    first_rack = min((h for h in snap.hyper_nodes.values() if h.tier == 1), key=lambda h: h.name, default=None)
    pools: dict[str, str] = {}
    for name, n in sorted(snap.nodes.items()):
        pools.setdefault(n.labels.get(POOL_LABEL, ""), name)
    for pool, name in sorted(pools.items()):
        n = snap.nodes[name]
        labels = {k: v for k, v in n.labels.items() if k != "kubernetes.io/hostname"}
        taints = [t.model_dump(by_alias=True) for t in n.taints]
        base = {"labels": labels, "taints": taints, "maxCount": 4}
        alloc8 = {"cpu": "96", "memory": "1Ti", "nvidia.com/gpu": "8", "pods": "110"}
        alloc4 = {"cpu": "48", "memory": "512Gi", "nvidia.com/gpu": "4", "pods": "110"}
        tag = pool or "nopool"
        out.append(NodeGroup.model_validate({**base, "name": f"{tag}-8x", "price": "8", "allocatable": alloc8}))
        out.append(NodeGroup.model_validate({**base, "name": f"{tag}-4x", "price": "4.6", "allocatable": alloc4}))
        if first_rack is not None:
            out.append(NodeGroup.model_validate({**base, "name": f"{tag}-8x-rack", "price": "9", "allocatable": alloc8,
                                                 "hyperNode": first_rack.name}))
    return out


def row(seed: int, name: str, plan: ProvisionPlan, pending: int, seconds: float) -> list[str]:
    bound = "-" if plan.solver.best_bound is None else str(price_text(plan.solver.best_bound))
    return [str(seed), name, f"{len(plan.served)}/{pending}", str(sum(plan.counts.values())),
            str(price_text(plan.cost)), bound, f"{seconds:.2f}"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="1-8", help="seeds, e.g. 1-8 (default 1-8)")
    ap.add_argument("--nodes", type=int, default=24, help="nodes per instance (default 24)")
    ap.add_argument("--jobs", type=int, default=6, help="pending jobs per instance (default 6)")
    ap.add_argument("--time-limit", type=float, default=10.0, help="exact model limit (default 10)")
    args = ap.parse_args(argv)
    rows = [["SEED", "PLANNER", "SERVED", "NODES", "COST", "BOUND", "SECONDS"]]
    served = dict.fromkeys(PLANNERS, 0)
    cost = dict.fromkeys(PLANNERS, 0)
    better = {p: 0 for p in PLANNERS[2:]}
    with tempfile.TemporaryDirectory() as tmp:
        for seed in seeds(args.seeds):
            snap = generate(Path(tmp) / f"g{seed}.yaml", seed, args.nodes, args.jobs)
            jobs = jobs_to_place(snap)
            groups = catalogue(snap)
            plans = {}
            for name in PLANNERS:
                t0 = time.perf_counter()
                plans[name] = plan = plan_provision(snap, jobs, groups, name,
                                                    PlanOptions(time_limit=args.time_limit, workers=1, seed=0))
                rows.append(row(seed, name, plan, len(jobs), time.perf_counter() - t0))
                served[name] += len(plan.served)
                cost[name] += plan.cost
            a = plans["auto"]
            for peer in better:
                p = plans[peer]
                if len(a.served) > len(p.served) or (len(a.served) == len(p.served) and a.cost < p.cost):
                    better[peer] += 1
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    print("\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows))
    print()
    for name in PLANNERS:
        print(f"{name}: {served[name]} gangs served, total cost {price_text(cost[name])}")
    for peer, n in better.items():
        print(f"auto better than {peer} (more gangs, or as many for less) on {n} of {len(seeds(args.seeds))} instances")
    return 0


if __name__ == "__main__":
    sys.exit(main())
