"""Repack goals with shared GPUs on openb: gangs admitted, HyperNodes and GPUs freed against the bounds, per
planner, with wall times and the exact model's size at device level.

Example::

    python benchmarks/goals_shares.py --data ../shared/data                      # fill 80, greedy, cpsat, auto; 60 s
    python benchmarks/goals_shares.py --snapshot openb80s.yaml --goals admit --planners auto --json out.json

The snapshot: ``optplan import openb --fill F --shared`` of the default trace (every node lists its GPUs, the
fractional-GPU pods are shares pinned to a device), or ``--snapshot`` (a file that import wrote), with the
HyperNode fabric of ``goals_scale.py`` (``adapters.inject.fabric``: racks of 8 like nodes, tier 1; spines of 4
racks, tier 2). The goals, one RepackRun each (``--goals``):

- ``admit``: five pending gangs of 8-card pods (16, 24, 32, 48 and 64 cards, hard tier 1: each in one rack);
  the bound is the five (and the exact model's proven admission weight when it proves one);
- ``free-hypernodes``: ``--racks`` racks (tier 1) left without a GPU pod; the bound is the count (and the
  model's when proven);
- ``free-gpus``: ``--free-gpus`` whole GPUs of ``--gpu-model`` left free on one node (``summary.freedGpus``);
  bound: the count.

Per planner, ``plan_goals`` (resolve, measure, plan, validate at device level, status) within ``--time-limit``:
the goal's value against its bound, pods and shares moved, the solver's status, the exact model's size (send
and place variables, device variables and rows, restricted or not) and the wall seconds of the whole call. The
load average (``os.getloadavg``) is printed before and after: the wall times are the machine's at that load.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from optplan.adapters.inject import fabric, pending_gangs
from optplan.adapters.kubefile import load_objects
from optplan.adapters.openb import ImportConfig, import_openb
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.goals.run import plan_goals

OPENB_NODES = Path("openb") / "openb_node_list_gpu_node.csv"
OPENB_PODS = Path("openb") / "openb_pod_list_default.csv"
RESOURCE = "nvidia.com/gpu"
GANG_CARDS = (16, 24, 32, 48, 64)


def snapshot_objects(args: argparse.Namespace) -> list[dict[str, Any]]:
    if args.snapshot:
        with open(args.snapshot) as f:
            objs = [o for o in yaml.safe_load_all(f) if o]
        if len(objs) == 1 and objs[0].get("kind") == "List":
            objs = objs[0]["items"]
    else:
        data = Path(args.data)
        objs, _ = import_openb(str(data / OPENB_NODES), str(data / OPENB_PODS),
                               ImportConfig(fill=args.fill, shared=True))
    return [o for o in objs if o.get("kind") != "RepackRun"]


def run_object(goal: str, args: argparse.Namespace, jobs: list[str]) -> dict[str, Any]:
    spec: dict[str, Any] = {"resource": RESOURCE}
    if goal == "admit":
        spec["admit"] = {"jobs": jobs}
    elif goal == "free-hypernodes":
        spec["freeHyperNodes"] = {"tier": 1, "count": args.racks}
    else:
        spec["freeGpus"] = {"count": args.free_gpus, "model": args.gpu_model}
    return {"apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackRun", "metadata": {"name": goal},
            "spec": {"mode": "DryRun", "goals": [spec]}}


def row(goal: str, name: str, args: argparse.Namespace, objs: list[dict[str, Any]]) -> dict[str, Any]:
    loaded = load_objects(objs)
    snap, run = loaded.snapshot, next(iter(loaded.runs.values()))
    t = time.perf_counter()
    if goal == "free-gpus":
        from optplan.solvers.repack.run import plan_repack
        out = plan_repack(snap, run, solver=name, options=PlanOptions(time_limit=args.time_limit))
    else:
        out = plan_goals(snap, run, solver=name, options=PlanOptions(time_limit=args.time_limit))
    wall = time.perf_counter() - t
    res = out.result
    moves = res.plan.moves
    rec = res.record
    stats = res.stats
    status_plan: Any = out.status.plan
    if goal == "admit":
        value, bound = status_plan.goals.admitted_job_count, len(GANG_CARDS)
    elif goal == "free-hypernodes":
        value, bound = len(status_plan.goals.freed_hyper_nodes), args.racks
    else:
        freed = status_plan.summary.freed_gpus if status_plan is not None else None
        value, bound = (len(freed.devices) if freed is not None else 0), args.free_gpus
    return {"goal": goal, "planner": name, "value": value, "bound": bound, "podsMoved": len(moves),
            "movedCards": res.disruption.moved_cards / 1000, "affectedPodGroups": res.disruption.affected_pod_groups,
            "sharesMoved": sum(m.to_devices is not None for m in moves), "status": rec.status,
            "sendVariables": stats.get("sendVariables"), "placeVariables": stats.get("placeVariables"),
            "deviceVariables": stats.get("deviceVariables"), "deviceRows": stats.get("deviceRows"),
            "restricted": stats.get("restricted"), "wallSeconds": round(wall, 1),
            "load": [round(x, 1) for x in os.getloadavg()]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default="../shared/data", help="the data folder holding openb/ (default %(default)s)")
    p.add_argument("--snapshot", help="a snapshot that `optplan import openb --shared` wrote (instead of --data)")
    p.add_argument("--fill", type=float, default=80.0, help="percent of the GPUs' milli-GPU to fill (default 80)")
    p.add_argument("--goals", default="admit,free-hypernodes,free-gpus", help="comma-separated (default %(default)s)")
    p.add_argument("--planners", default="greedy,cpsat,auto", help="comma-separated (default %(default)s)")
    p.add_argument("--racks", type=int, default=4, help="free-hypernodes: racks to free (default 4)")
    p.add_argument("--free-gpus", type=int, default=8, help="free-gpus: GPUs on one node (default 8)")
    p.add_argument("--gpu-model", default="G2", help="free-gpus: the GPU model (default G2)")
    p.add_argument("--time-limit", type=float, default=60.0, help="per planner, seconds (default 60)")
    p.add_argument("--json", help="also write the rows as JSON here")
    args = p.parse_args(argv)
    print(f"load average before: {os.getloadavg()}", flush=True)
    t0 = time.perf_counter()
    base = snapshot_objects(args)
    gangs = pending_gangs(GANG_CARDS, RESOURCE)
    jobs = [f"{g['metadata']['namespace']}/{g['metadata']['name']}" for g in gangs if g["kind"] == "Job"]
    base = [*base, *fabric(base, RESOURCE)]
    print(f"snapshot: {sum(o['kind'] == 'Node' for o in base)} nodes, {sum(o['kind'] == 'Pod' for o in base)} pods "
          f"({time.perf_counter() - t0:.1f}s)", flush=True)
    rows: list[dict[str, Any]] = []
    for goal in args.goals.split(","):
        objs = [*base, *(gangs if goal == "admit" else []), run_object(goal, args, jobs)]
        for name in args.planners.split(","):
            r = row(goal, name, args, objs)
            rows.append(r)
            print(json.dumps(r), flush=True)
    print("\n| goal | planner | value | bound | pods moved (shares) | cards moved | status | send / place vars | "
          "device vars / rows | wall (s) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        size = f"{r['sendVariables']:,} / {r['placeVariables']:,}" if r["sendVariables"] is not None else "-"
        if r["sendVariables"] is not None and r["restricted"]:
            size += " (restricted)"
        dev = f"{r['deviceVariables']:,} / {r['deviceRows']:,}" if r["deviceVariables"] is not None else "-"
        print(f"| {r['goal']} | {r['planner']} | {r['value']} | {r['bound']} | {r['podsMoved']} ({r['sharesMoved']}) "
              f"| {r['movedCards']:g} | {r['status']} | {size} | {dev} | {r['wallSeconds']} |")
    print(f"\nload average after: {os.getloadavg()}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
