"""The exact placement model under gangpreempt and gangreclaim at scale: the size of its bundle part and the
time CP-SAT takes, against the greedy's plan.

Example::

    python benchmarks/gang_exact_scale.py                          # 60 nodes, seeds 0-2, 20 s
    python benchmarks/gang_exact_scale.py --nodes 120 --seeds 0 1 --time-limit 30

Each seed is ``tests.placement.test_placement_family.family`` at ``--nodes`` nodes (racks of 4, two racks a
spine, four team queues, PriorityClasses, ``--pending`` pending jobs, ``--topology-share`` of them with a
networkTopology, 80-96% of the cards used; running gangs at half their size for minMember by default, so
that bundles are safe and whole) under the seed configuration's tiers with the actions ``enqueue, allocate,
gangpreempt, gangreclaim, backfill`` (whole bundles allowed). Printed per seed:
the model's gang bundles, victim classes, take variables and constraints, the build time, the exact plan's
status, wall time and ``plan_key`` against the greedy's (admitted weight, victim cost)."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import statistics
import sys
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from optplan.adapters.generate import generate  # noqa: E402
from optplan.adapters.kubefile import load_objects  # noqa: E402
from optplan.models.placement import BinpackWeights  # noqa: E402
from optplan.solvers.core.options import PlanOptions  # noqa: E402
from optplan.solvers.placement import cpsat  # noqa: E402
from optplan.solvers.placement.context import Context  # noqa: E402
from optplan.solvers.placement.model import build_data, plan_key  # noqa: E402
from optplan.solvers.placement.place import plan_placement  # noqa: E402
from tests.placement.test_gang_actions import conf  # noqa: E402
from tests.placement.test_placement_family import NOW, family  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=60)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--time-limit", type=float, default=20.0)
    ap.add_argument("--pending", type=int, default=5, help="pending jobs")
    ap.add_argument("--min-member-ratio", type=float, default=0.5)
    ap.add_argument("--topology-share", type=float, default=0.5, help="pending jobs with a networkTopology")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    c = conf(gangpreempt={"allowWholeBundle": True}, gangreclaim={"allowWholeBundle": True})
    opts = PlanOptions(time_limit=args.time_limit, workers=1, seed=0, deterministic=True)
    builds, solves = [], []
    print("seed  bundles  classes  takes  constraints  build_s  status    exact_s  greedy(weight,cost)  exact")
    for seed in args.seeds:
        cfg = dataclasses.replace(family(seed), nodes=args.nodes, min_member_ratio=args.min_member_ratio,
                                  pending_jobs=args.pending, topology_share=args.topology_share)
        snap = load_objects(generate(cfg)).snapshot
        jobs = list(snap.jobs.values())
        ctx = Context.build(snap, jobs, BinpackWeights(), datetime.fromisoformat(NOW), actions=c.actions, scheduler=c)
        t0 = time.perf_counter()
        data = build_data(ctx)
        m, v, _objs = cpsat.build(data)
        build = time.perf_counter() - t0
        greedy = plan_placement(snap, jobs, "greedy", opts, now=NOW, scheduler=c)
        t0 = time.perf_counter()
        exact = plan_placement(snap, jobs, "cpsat", opts, now=NOW, scheduler=c)
        wall = time.perf_counter() - t0
        g, e = plan_key(ctx, greedy), plan_key(ctx, exact)
        builds.append(build)
        solves.append(wall)
        print(f"{seed:>4}  {len(data.victims.gang):>7}  {len(data.victims.classes):>7}  {len(v.ev.take):>5}  "
              f"{len(m.proto.constraints):>11}  {build:>7.2f}  {exact.solver.status:<8}  {wall:>7.2f}  "
              f"({-g.neg_admitted}, {g.victim_cost})  ({-e.neg_admitted}, {e.victim_cost})", flush=True)
    print(f"median build {statistics.median(builds):.2f} s, median cpsat {statistics.median(solves):.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
