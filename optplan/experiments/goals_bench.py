"""``optplan bench`` section 5: make room for pending gangs on openb snapshots.

Each scenario is an openb snapshot (``import_openb``: fill, departures, seed) with a HyperNode fabric
(``adapters.inject.fabric``: racks of 8 like nodes, spines of 4 racks) and five pending gangs of 8-card pods
(16, 24, 32, 48 and 64 cards) under hard tier-1 topology (each must fit in one rack), at a priority above
the running pods. The rows:

- ``nothing``: Volcano's allocate on the snapshot as it is (no eviction);
- ``preemption``: Volcano's allocate, then preempt and reclaim (``optplan place --solver greedy``): gangs
  admitted by killing the victims;
- ``kai``: KAI-scheduler's consolidation (victims re-placed, none killed; ``--solver kai``);
- ``optplan greedy`` and ``optplan exact`` (``auto``: the greedy, then the joint CP-SAT model hinted with it):
  a RepackRun with an admit goal naming the five gangs.

Every plan is validated by its family's validator (the planners raise otherwise). ``cards disrupted`` is the
cards of the pods moved (they restart elsewhere) or killed.

Section 7 (``bench_goal_shares``; ``benchmarks/goals_shares.py`` runs it alone): the goals with shared GPUs on
``optplan import openb --shared`` with the same fabric, per goal (the five gangs admitted, racks freed, whole
GPUs of a model left free on one node) and planner: the goal's value against its bound, moves, status, the
exact model's size at device level and the wall seconds.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from optplan.adapters.inject import fabric, pending_gangs
from optplan.adapters.kubefile import LoadedInput, load_objects
from optplan.adapters.openb import RESOURCE, ImportConfig, import_openb
from optplan.adapters.output import png
from optplan.models.placement import BinpackWeights
from optplan.models.queues import VCJob
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.goals.run import plan_goals
from optplan.solvers.placement.allocate import greedy_place
from optplan.solvers.placement.context import Context
from optplan.solvers.placement.place import plan_placement
from optplan.solvers.repack.run import plan_repack

GANG_CARDS = (16, 24, 32, 48, 64)
METHODS = ("nothing", "preemption", "kai", "optplan greedy", "optplan exact")
NOW = "2025-01-02T00:00:00Z"


def scenario_objects(data: Path, fill: float, departures: float, seed: int,
                     cards: tuple[int, ...] = GANG_CARDS) -> list[dict[str, Any]]:
    """The openb snapshot with the fabric, the gangs and a RepackRun admitting them."""
    objs, _summary = import_openb(str(data / "openb" / "openb_node_list_gpu_node.csv"),
                                  str(data / "openb" / "openb_pod_list_default.csv"),
                                  ImportConfig(fill=fill, departures=departures, seed=seed))
    objs = [o for o in objs if o.get("kind") != "RepackRun"]
    gangs = pending_gangs(cards, RESOURCE)
    jobs = [f"{g['metadata']['namespace']}/{g['metadata']['name']}" for g in gangs if g["kind"] == "Job"]
    run = {"apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackRun", "metadata": {"name": "admit-gangs"},
           "spec": {"mode": "DryRun", "goals": [{"resource": RESOURCE, "admit": {"jobs": jobs}}]}}
    return [*objs, *fabric(objs, RESOURCE), *gangs, run]


def _pending(loaded: LoadedInput) -> list[VCJob]:
    return [j for k, j in sorted(loaded.snapshot.jobs.items())]


def _placement_row(loaded: LoadedInput, victims: bool) -> dict[str, Any]:
    snap = loaded.snapshot
    jobs = _pending(loaded)
    t0 = time.perf_counter()
    if victims:
        plan = plan_placement(snap, jobs, "greedy", now=NOW)
    else:
        plan = greedy_place(Context.build(snap, jobs, BinpackWeights()))
    wall = time.perf_counter() - t0
    killed = [f"{v.namespace}/{v.name}" for jp in plan.jobs for v in jp.victims]
    cards = sum(snap.pods[k].request(RESOURCE) for k in killed if k in snap.pods)
    return {"admitted": sum(1 for jp in plan.jobs if jp.admitted), "podsMoved": 0, "podsKilled": len(killed),
            "cardsDisrupted": cards // 1000, "wallSeconds": round(wall, 2), "status": plan.solver.status}


def _goal_row(loaded: LoadedInput, solver: str, limit: float) -> dict[str, Any]:
    run = next(iter(loaded.runs.values()))
    t0 = time.perf_counter()
    out = plan_goals(loaded.snapshot, run, solver=solver, options=PlanOptions(time_limit=limit))
    wall = time.perf_counter() - t0
    goals = out.status.plan.goals  # type: ignore[attr-defined]
    d = out.result.disruption
    return {"admitted": goals.admitted_job_count, "podsMoved": d.moved_pods, "podsKilled": 0,
            "cardsDisrupted": d.moved_cards // 1000, "wallSeconds": round(wall, 2),
            "status": out.result.record.status, "gapPercent": out.result.record.gap_percent}


def bench_goals(data: Path | None, fills: tuple[float, ...], limit: float,
                progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    if data is None or not (data / "openb" / "openb_pod_list_default.csv").exists():
        return {"skipped": "no openb data"}
    scenarios = []
    for fill in fills:
        name = f"fill {fill:g}% / departures 20% / seed 0"
        if progress:
            progress(name)
        loaded = load_objects(scenario_objects(data, fill, 0.2, 0))
        runs = [{"method": "nothing", **_placement_row(loaded, False)},
                {"method": "preemption", **_placement_row(loaded, True)}]
        for method, solver in (("kai", "kai"), ("optplan greedy", "greedy"), ("optplan exact", "auto")):
            try:
                runs.append({"method": method, **_goal_row(loaded, solver, limit)})
            except Exception as e:  # a planner's failure is a finding of the benchmark, reported
                runs.append({"method": method, "skipped": f"{type(e).__name__}: {e}"[:200]})
        scenarios.append({"name": name, "gangs": len(GANG_CARDS), "gangCards": list(GANG_CARDS), "runs": runs})
    return {"timeLimit": limit, "scenarios": scenarios}


def report_lines(res: dict[str, Any], pngs: list[str], md: Callable[[list[str], list[list[Any]]], str]) -> list[str]:
    parts = ["## 5. Make room for pending gangs (openb + HyperNodes)\n"]
    if "skipped" in res:
        return [*parts, f"Skipped: {res['skipped']}.\n"]
    parts.append(f"Five pending gangs ({', '.join(str(c) for c in GANG_CARDS)} cards, 8-card pods, hard tier-1 "
                 "topology: one rack of 8 like nodes) injected into each snapshot. `nothing`: Volcano's allocate "
                 "alone; `preemption`: allocate then preempt (victims killed); `kai`: KAI-style consolidation; "
                 "optplan's admit goal with the greedy and with `auto` (exact model hinted with the greedy, "
                 f"time limit {res['timeLimit']:g} s).\n")
    header = ["method", "gangs admitted", "pods moved", "pods killed", "cards disrupted", "wall s", "status"]
    for sc in res["scenarios"]:
        parts.append(f"### {sc['name']}\n")
        rows = [[r["method"], f"skipped: {r['skipped']}", None, None, None, None, None] if "skipped" in r else
                [r["method"], f"{r['admitted']} / {sc['gangs']}", r["podsMoved"], r["podsKilled"],
                 r["cardsDisrupted"], r["wallSeconds"], r["status"]] for r in sc["runs"]]
        parts.append(md(header, rows))
    if "goals.png" in pngs:
        parts.append("![goals.png](goals.png)\n")
    return parts


def plot(res: dict[str, Any]) -> bytes | None:
    """Gangs admitted and cards disrupted per method, one group per scenario."""
    if "skipped" in res or not res.get("scenarios"):
        return None
    import matplotlib.style
    from matplotlib.figure import Figure

    scenarios = res["scenarios"]
    with matplotlib.style.context("default"):
        fig = Figure(figsize=(10, 4.5), dpi=100)
        for k, (key, label) in enumerate((("admitted", "gangs admitted"), ("cardsDisrupted", "cards disrupted"))):
            ax = fig.add_subplot(1, 2, k + 1)
            width = 0.8 / len(METHODS)
            for j, method in enumerate(METHODS):
                xs, ys = [], []
                for i, sc in enumerate(scenarios):
                    row = next((r for r in sc["runs"] if r["method"] == method and "skipped" not in r), None)
                    if row is not None:
                        xs.append(i - 0.4 + width * (j + 0.5))
                        ys.append(row[key])
                ax.bar(xs, ys, width=width, label=method)
            ax.set_xticks(range(len(scenarios)))
            ax.set_xticklabels([sc["name"].split(" / ")[0] for sc in scenarios], fontsize=8)
            ax.set_ylabel(label)
            ax.set_title(label)
            if k == 0:
                ax.legend(fontsize=7)
        fig.tight_layout()
        return png(fig)


# ---- section 7: the goals with shared GPUs ------------------------------------------------------------------

SHARE_GOALS = ("admit", "free-hypernodes", "free-gpus")
"""The goals of section 7, one RepackRun each (``share_run``)."""


@dataclass(frozen=True)
class ShareGoals:
    """Section 7's settings: the racks to free (tier 1), the whole GPUs of a model to leave free on one node."""

    racks: int = 16
    free_gpus: int = 8
    gpu_model: str = "G2"


def share_objects(data: Path, fill: float) -> list[dict[str, Any]]:
    """``optplan import openb --fill F --shared`` of the default trace (no RepackRun) with the HyperNode fabric."""
    objs, _summary = import_openb(str(data / "openb" / "openb_node_list_gpu_node.csv"),
                                  str(data / "openb" / "openb_pod_list_default.csv"),
                                  ImportConfig(fill=fill, shared=True))
    objs = [o for o in objs if o.get("kind") != "RepackRun"]
    return [*objs, *fabric(objs, RESOURCE)]


def share_run(goal: str, settings: ShareGoals, jobs: list[str]) -> dict[str, Any]:
    """The RepackRun of one of ``SHARE_GOALS``: admit ``jobs``, free ``racks`` tier-1 HyperNodes, or leave
    ``free_gpus`` GPUs of ``gpu_model`` free on one node."""
    spec: dict[str, Any] = {"resource": RESOURCE}
    if goal == "admit":
        spec["admit"] = {"jobs": jobs}
    elif goal == "free-hypernodes":
        spec["freeHyperNodes"] = {"tier": 1, "count": settings.racks}
    else:
        spec["freeGpus"] = {"count": settings.free_gpus, "model": settings.gpu_model}
    return {"apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackRun", "metadata": {"name": goal},
            "spec": {"mode": "DryRun", "goals": [spec]}}


def share_rows(objs: list[dict[str, Any]], goals: Sequence[str], planners: Sequence[str], limit: float,
               settings: ShareGoals, progress: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """Per goal and planner: the goal's value against its bound (gangs admitted of five, racks freed, GPUs left
    free), pods and shares moved, cards moved, the status, the exact model's size at device level and the wall
    seconds of the whole call (``plan_goals``; ``plan_repack`` for freeGpus), with the load average."""
    gangs = pending_gangs(GANG_CARDS, RESOURCE)
    jobs = [f"{g['metadata']['namespace']}/{g['metadata']['name']}" for g in gangs if g["kind"] == "Job"]
    rows = []
    for goal in goals:
        loaded = load_objects([*objs, *(gangs if goal == "admit" else []), share_run(goal, settings, jobs)])
        snap, run = loaded.snapshot, next(iter(loaded.runs.values()))
        for name in planners:
            if progress:
                progress(f"{goal} {name}")
            t = time.perf_counter()
            options = PlanOptions(time_limit=limit)
            out = (plan_repack(snap, run, solver=name, options=options) if goal == "free-gpus"
                   else plan_goals(snap, run, solver=name, options=options))
            wall = time.perf_counter() - t
            res, status_plan = out.result, cast(Any, out.status.plan)
            if goal == "admit":
                value, bound = status_plan.goals.admitted_job_count, len(GANG_CARDS)
            elif goal == "free-hypernodes":
                value, bound = len(status_plan.goals.freed_hyper_nodes), settings.racks
            else:
                freed = status_plan.summary.freed_gpus if status_plan is not None else None
                value, bound = (len(freed.devices) if freed is not None else 0), settings.free_gpus
            moves = res.plan.moves
            stats = res.stats
            rows.append({"goal": goal, "planner": name, "value": value, "bound": bound, "podsMoved": len(moves),
                         "sharesMoved": sum(m.to_devices is not None for m in moves),
                         "movedCards": res.disruption.moved_cards / 1000, "status": res.record.status,
                         "sendVariables": stats.get("sendVariables"), "placeVariables": stats.get("placeVariables"),
                         "deviceVariables": stats.get("deviceVariables"), "deviceRows": stats.get("deviceRows"),
                         "restricted": stats.get("restricted"), "wallSeconds": round(wall, 1),
                         "load": [round(x, 1) for x in os.getloadavg()]})
    return rows


def bench_goal_shares(data: Path | None, fill: float, limit: float, planners: Sequence[str],
                      progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """``optplan bench`` section 7 (``share_rows`` on ``share_objects``, every goal of ``SHARE_GOALS``)."""
    if data is None or not (data / "openb" / "openb_pod_list_default.csv").exists():
        return {"skipped": "no openb data"}
    settings = ShareGoals()
    rows = share_rows(share_objects(data, fill), SHARE_GOALS, planners, limit, settings, progress)
    return {"fill": fill, "timeLimit": limit, "racks": settings.racks, "freeGpus": settings.free_gpus,
            "gpuModel": settings.gpu_model, "rows": rows}


def share_report_lines(res: dict[str, Any], md: Callable[[list[str], list[list[Any]]], str]) -> list[str]:
    parts = ["## 7. Repack goals with shared GPUs (openb --shared + HyperNodes)\n"]
    if "skipped" in res:
        return [*parts, f"Skipped: {res['skipped']}.\n"]
    parts.append(f"The default trace filled to {res['fill']:g}% with its fractional-GPU pods kept as shares, the "
                 f"rack fabric of section 5; per goal (the five gangs of section 5 admitted, {res['racks']} racks "
                 f"freed, {res['freeGpus']} {res['gpuModel']} GPUs left free on one node) and planner (time limit "
                 f"{res['timeLimit']:g} s): the goal's value and bound, pods moved (shares among them), cards moved, "
                 "status, the exact model's send / place variables and device variables / rows.\n")
    header = ["goal", "planner", "value", "bound", "pods moved (shares)", "cards moved", "status",
              "send / place vars", "device vars / rows", "wall s"]
    rows = []
    for r in res["rows"]:
        size = (f"{r['sendVariables']:,} / {r['placeVariables']:,}{' (restricted)' if r['restricted'] else ''}"
                if r["sendVariables"] is not None else "-")
        dev = f"{r['deviceVariables']:,} / {r['deviceRows']:,}" if r["deviceVariables"] is not None else "-"
        rows.append([r["goal"], r["planner"], r["value"], r["bound"], f"{r['podsMoved']} ({r['sharesMoved']})",
                     f"{r['movedCards']:g}", r["status"], size, dev, r["wallSeconds"]])
    parts.append(md(header, rows))
    return parts
