"""The price of safe preemption: jobs admitted and victims with each of seed 004's rules off and on.

Example::

    python benchmarks/safe_preemption.py                    # 5 seeds, 60 nodes, greedy and auto
    python benchmarks/safe_preemption.py --seeds 10 --nodes 120 --solvers greedy

Instances: ``optplan generate`` snapshots (``--nodes`` 8-GPU nodes at 90% occupancy, four team queues, the
generator's PriorityClasses high 1000 / normal 100 / low 10, PDBs on half the PodGroups, ``--jobs`` pending
VCJobs), seeded. Each queue's weight is drawn from 1..100 (seeded) so that the approval rule has queues on
both sides of 50; every queue's last preemption is set 2 minutes before ``now`` for half the queues, so the
cooldown has windows to respect. Per rule (none, pdb, cooldown, graded, approval, all = the seed's) and
solver: jobs admitted, jobs evicting, victims, jobs marked for approval (summed over seeds), and the median
wall seconds. Every plan passes the validator with the rules on (``plan_placement`` checks it).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from typing import Any

from optplan.adapters.generate import GenConfig, generate
from optplan.adapters.kubefile import load_objects
from optplan.models.placement import SafePreemption
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.placement.place import plan_placement
from optplan.solvers.placement.safety import LAST_PREEMPTION

NOW = "2026-01-04T00:00:00Z"
RULES: dict[str, SafePreemption | None] = {
    "none": None,
    "pdb": SafePreemption(pdb=True),
    "cooldown": SafePreemption(cooldown_seconds=300),
    "graded": SafePreemption(levels=SafePreemption.seed().levels),
    "approval": SafePreemption(approval_weight=50),
    "all (seed)": SafePreemption.seed(),
}


def instance(seed: int, nodes: int, jobs: int) -> list[dict[str, Any]]:
    cfg = GenConfig(nodes=nodes, seed=seed, queues=4, pending_jobs=jobs, priority_classes=True, pdb_share=0.5,
                    occupancy=0.9)
    objs = generate(cfg)
    rng = random.Random(f"{seed}/safety")
    for o in objs:
        if o["kind"] == "Queue" and o["metadata"]["name"] not in ("root", "default"):
            o.setdefault("spec", {})["weight"] = rng.randint(1, 100)
            if rng.random() < 0.5:
                o["metadata"].setdefault("annotations", {})[LAST_PREEMPTION] = "2026-01-03T23:58:00Z"
    return objs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--nodes", type=int, default=60)
    ap.add_argument("--jobs", type=int, default=12)
    ap.add_argument("--solvers", default="greedy,auto")
    ap.add_argument("--time-limit", type=float, default=10.0)
    args = ap.parse_args()
    opts = PlanOptions(time_limit=args.time_limit, workers=1, seed=0, deterministic=True)
    snaps = [load_objects(instance(s, args.nodes, args.jobs)).snapshot for s in range(args.seeds)]
    print(f"{args.seeds} seeds, {args.nodes} nodes, {args.jobs} pending jobs each")
    print("| rule | solver | admitted | evicting jobs | victims | approval marks | median s |")
    print("|---|---|---|---|---|---|---|")
    for rule, safety in RULES.items():
        for solver in args.solvers.split(","):
            admitted = evicting = victims = marks = 0
            walls = []
            for snap in snaps:
                t0 = time.perf_counter()
                plan = plan_placement(snap, list(snap.jobs.values()), solver, opts, now=NOW, safety=safety)
                walls.append(time.perf_counter() - t0)
                admitted += sum(j.admitted for j in plan.jobs)
                evicting += sum(bool(j.victims) for j in plan.jobs)
                victims += sum(len(j.victims) for j in plan.jobs)
                marks += sum(j.approval_required is not None for j in plan.jobs)
            print(f"| {rule} | {solver} | {admitted} | {evicting} | {victims} | {marks} | "
                  f"{statistics.median(walls):.2f} |")


if __name__ == "__main__":
    main()
