"""``optplan bench``: one command that runs the benchmark suite and writes a report.

Sections (each skipped with a note when its data is absent):

1. Repack on openb snapshots (``--data``/openb): fills × departures × budgets, every planner and the
   three peer baselines (whose plans are validated against optplan's rules and their breaks counted).
2. Theoretical minimum (``min_bins``) on BPPLIB families (``--data``/bpplib) against the known optima.
3. Scaling on generated clusters: wall time of greedy-fast and auto, and the CP-SAT model size.

Output in ``--out``: ``report.md`` (Markdown tables and PNG links), the PNGs (matplotlib's Agg canvas,
no pyplot, no timestamps) and ``results.json`` (every figure). Progress goes to stderr, one line per
run, only when stderr is a terminal.
"""

from __future__ import annotations

import argparse
import copy
import csv
import io
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from optplan.adapters.generate import GenConfig, generate
from optplan.adapters.kubefile import LoadedInput, load_objects
from optplan.adapters.openb import RESOURCE, ImportConfig, import_openb
from optplan.adapters.output import write_atomic
from optplan.errors import InputError
from optplan.solvers.base import PlanOptions
from optplan.solvers.baselines import BASELINES
from optplan.solvers.binpacking import min_bins
from optplan.solvers.frag import FragReport, round_half_up
from optplan.solvers.repack import plan_repack
from optplan.solvers.rules import Disruption, RepackProblem
from optplan.solvers.validate import plan_violations

MILP_MAX_CANDIDATES = 300
OPENB_NODES = Path("openb") / "openb_node_list_gpu_node.csv"
OPENB_PODS = Path("openb") / "openb_pod_list_default.csv"
BPP_FAMILIES = (("Falkenauer U", "Falkenauer U"), ("Falkenauer T", "Falkenauer_T"), ("Schwerin 1", "Schwerin_1"),
                ("Schwerin 2", "Schwerin_2"), ("Hard28", "Hard28"))


@dataclass(frozen=True)
class Budget:
    label: str
    pod_groups: int | None = None
    cards: int | None = None


@dataclass(frozen=True)
class Suite:
    """What one bench run covers; ``suite_for`` builds the full, quick and tiny ones."""

    name: str
    fills: tuple[float, ...]
    departures: tuple[float, ...]
    budgets: tuple[Budget, ...]
    planners: tuple[str, ...]
    milp: bool
    time_limit: float
    bpp_families: tuple[tuple[str, str], ...]
    bpp_instances: int  # per family, 0 = all
    bpp_time: float
    scale_sizes: tuple[int, ...]
    scale_time_limit: float


NO_BUDGET = Budget("none")


def suite_for(quick: bool, tiny: bool = False, time_limit: float | None = None) -> Suite:
    if tiny:
        return Suite("tiny", (90.0,), (0.2,), (NO_BUDGET,), ("greedy-fast",), False, time_limit or 5.0,
                     (("Falkenauer U", "Falkenauer U"),), 2, 2.0, (30, 60), time_limit or 2.0)
    if quick:
        return Suite("quick", (90.0,), (0.2,), (NO_BUDGET, Budget("podGroups 10 / 64 cards", 10, 64)),
                     ("greedy-fast", "auto"), False, time_limit or 10.0,
                     (BPP_FAMILIES[0], BPP_FAMILIES[4]), 5, 2.0, (100, 300, 1000), time_limit or 10.0)
    return Suite("full", (80.0, 90.0), (0.1, 0.2),
                 (NO_BUDGET, Budget("podGroups 2 / 8 cards", 2, 8), Budget("podGroups 10 / 64 cards", 10, 64)),
                 ("greedy-fast", "greedy", "auto"), True, time_limit or 30.0, BPP_FAMILIES, 0, 5.0,
                 (100, 300, 1000, 3000, 10000), time_limit or 30.0)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", metavar="DIR", help="folder holding openb/ and bpplib/ (sections are skipped without)")
    p.add_argument("--quick", action="store_true", help="a smaller suite (about 2 minutes on 2 cores)")
    p.add_argument("--out", metavar="DIR", default="bench-out", help="output folder (default bench-out/)")
    p.add_argument("--time-limit", type=float, default=None, metavar="S",
                   help="time limit of auto and milp (default 30, 10 with --quick)")
    p.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("-v", "--verbose", action="count", default=0, help="log to stderr")


def run(args: argparse.Namespace) -> str:
    if args.time_limit is not None and not args.time_limit > 0:
        raise InputError(f"must be positive, got {args.time_limit}", field="--time-limit")
    suite = suite_for(args.quick, getattr(args, "tiny", False), args.time_limit)
    data = Path(args.data) if args.data else None
    if data is not None and not data.is_dir():
        raise InputError(f"not a folder: {data}", field="--data")
    return run_suite(suite, data, Path(args.out))


def run_suite(suite: Suite, data: Path | None, out: Path) -> str:
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    results: dict[str, Any] = {"suite": suite.name, "machine": machine()}
    results["repack"] = bench_repack(suite, data)
    results["bpplib"] = bench_bpplib(suite, data)
    results["scaling"] = bench_scaling(suite)
    results["wallSeconds"] = round(time.perf_counter() - t0, 1)
    pngs = write_plots(results, out)
    write_atomic(str(out / "results.json"), json.dumps(results, indent=2) + "\n")
    write_atomic(str(out / "report.md"), report(results, pngs))
    return (f"wrote {out / 'report.md'}, {out / 'results.json'} and {len(pngs)} plot(s) "
            f"in {results['wallSeconds']} s\n")


def _progress(msg: str) -> None:
    if sys.stderr.isatty():
        print(f"bench: {msg}", file=sys.stderr, flush=True)


def machine() -> dict[str, Any]:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cpus = os.cpu_count() or 0
    return {"cpus": cpus, "cpu": model or platform.processor(), "python": platform.python_version()}


# ---- 1. repack on openb ------------------------------------------------------------------------

def _cards(milli: int) -> float | int:
    return milli // 1000 if milli % 1000 == 0 else milli / 1000


def _disruption(d: Disruption) -> dict[str, Any]:
    return {"affectedPodGroups": d.affected_pod_groups, "belowMinAvailable": d.below_min_available,
            "affectedCards": _cards(d.affected_cards), "movedCards": _cards(d.moved_cards),
            "movedPods": d.moved_pods}


def _with_budget(objs: list[dict[str, Any]], budget: Budget) -> list[dict[str, Any]]:
    if budget.pod_groups is None and budget.cards is None:
        return objs
    out = []
    for o in objs:
        if o.get("kind") == "RepackRun":
            o = copy.deepcopy(o)
            mpr: dict[str, Any] = {}
            if budget.pod_groups is not None:
                mpr["podGroups"] = budget.pod_groups
            if budget.cards is not None:
                mpr["resources"] = {RESOURCE: str(budget.cards)}
            o["spec"]["maxPerRun"] = mpr
        out.append(o)
    return out


def _plan_row(planner: str, loaded: LoadedInput, limit: float) -> tuple[dict[str, Any], FragReport]:
    run = next(iter(loaded.runs.values()))
    t0 = time.perf_counter()
    res = plan_repack(loaded.snapshot, run, solver=planner, options=PlanOptions(time_limit=limit))
    wall = time.perf_counter() - t0
    s = res.status.plan.summary
    rec = res.result.record
    return ({"planner": planner, "freed": s.freed_node_count, "fragBefore": s.frag_before_percent,
             "fragAfter": s.frag_after_percent, **_disruption(res.result.disruption),
             "wallSeconds": round(wall, 2), "status": rec.status, "gapPercent": rec.gap_percent,
             "freedBound": rec.freed_nodes_bound, "violations": 0}, res.frag)


def _baseline_row(name: str, loaded: LoadedInput, limit: float, frag: FragReport) -> dict[str, Any]:
    run = next(iter(loaded.runs.values()))
    problem = RepackProblem(loaded.snapshot, run)
    t0 = time.perf_counter()
    res = BASELINES[name](problem, PlanOptions(time_limit=limit))
    wall = time.perf_counter() - t0
    violations = plan_violations(problem, res.plan)
    freed = len(res.plan.freed_nodes)
    return {"planner": name, "freed": freed, "fragBefore": round_half_up(frag.percent()),
            "fragAfter": round_half_up(frag.percent(max(frag.theoretical_min, frag.occupied - freed))),
            **_disruption(res.disruption), "wallSeconds": round(wall, 2), "status": res.record.status,
            "gapPercent": None, "freedBound": None, "violations": len(violations),
            "violationExample": violations[0] if violations else None}


def bench_repack(suite: Suite, data: Path | None) -> dict[str, Any]:
    if data is None or not (data / OPENB_NODES).is_file() or not (data / OPENB_PODS).is_file():
        return {"skipped": f"no {OPENB_NODES} and {OPENB_PODS} under --data"}
    scenarios = []
    for fill in suite.fills:
        for dep in suite.departures:
            _progress(f"repack: importing openb fill {fill:g}% departures {dep:g}")
            objs, stats = import_openb(str(data / OPENB_NODES), str(data / OPENB_PODS),
                                       ImportConfig(fill=fill, departures=dep, seed=0))
            for budget in suite.budgets:
                loaded = load_objects(_with_budget(objs, budget), source="openb")
                run = next(iter(loaded.runs.values()))
                candidates = len(RepackProblem(loaded.snapshot, run).candidates)
                name = f"fill {fill:g} / dep {dep:g} / {budget.label}"
                rows: list[dict[str, Any]] = []
                frag: FragReport | None = None
                planners = list(suite.planners) + (["milp"] if suite.milp else [])
                for planner in planners:
                    if planner == "milp" and candidates > MILP_MAX_CANDIDATES:
                        rows.append({"planner": "milp", "skipped": "too large"})
                        continue
                    _progress(f"repack: {name}: {planner}")
                    # The greedy planners get a generous limit: they are timed, not cut.
                    limit = max(suite.time_limit, 60.0) if planner.startswith("greedy") else suite.time_limit
                    row, frag = _plan_row(planner, loaded, limit)
                    rows.append(row)
                assert frag is not None
                for b in BASELINES:
                    _progress(f"repack: {name}: {b}")
                    rows.append(_baseline_row(b, loaded, suite.time_limit, frag))
                scenarios.append({"name": name, "fill": fill, "departures": dep, "budget": budget.label,
                                  "nodes": stats["nodes"], "pods": stats["pods"],
                                  "fillPercent": stats["fill_percent"], "candidates": candidates,
                                  "occupied": frag.occupied, "theoreticalMin": frag.theoretical_min,
                                  "runs": rows})
    return {"scenarios": scenarios}


# ---- 2. BPPLIB ---------------------------------------------------------------------------------

def _norm(name: str) -> str:
    return name.strip().lower().replace(" ", "_")


def _read_instance(path: Path) -> tuple[list[int], int]:
    """BPPLIB format: n, capacity, then one weight per line."""
    numbers = [int(tok) for tok in path.read_text().split()]
    n, capacity = numbers[0], numbers[1]
    weights = numbers[2: 2 + n]
    if len(weights) != n:
        raise InputError(f"expected {n} weights, found {len(weights)}", field=str(path))
    return weights, capacity


def _bpp_index(root: Path, families: Sequence[tuple[str, str]]) -> dict[str, list[dict[str, Any]]]:
    wanted = {_norm(key): label for label, key in families}
    out: dict[str, list[dict[str, Any]]] = {label: [] for label, _ in families}
    with (root / "instance_index.csv").open(newline="") as fh:
        for row in csv.DictReader(fh):
            for key in (_norm(row["subset"]), _norm(row["family"])):
                if key in wanted:
                    out[wanted[key]].append({"name": row["instance"], "path": root / row["path"],
                                             "lb": int(row["lb"]), "ub": int(row["ub"])})
                    break
    for group in out.values():
        group.sort(key=lambda inst: inst["name"])
    return out


def bench_bpplib(suite: Suite, data: Path | None) -> dict[str, Any]:
    root = data / "bpplib" if data is not None else None
    if root is None or not (root / "instance_index.csv").is_file():
        return {"skipped": "no bpplib/instance_index.csv under --data"}
    families = []
    for label, instances in _bpp_index(root, suite.bpp_families).items():
        if suite.bpp_instances:
            instances = instances[: suite.bpp_instances]
        proven = matched = 0
        seconds: list[float] = []
        for k, inst in enumerate(instances):
            _progress(f"bpplib: {label} {k + 1}/{len(instances)} {inst['name']}")
            weights, capacity = _read_instance(inst["path"])
            t0 = time.perf_counter()
            res = min_bins(weights, [capacity] * len(weights), time_limit=suite.bpp_time)
            seconds.append(time.perf_counter() - t0)
            proven += res.proven
            matched += inst["lb"] == inst["ub"] == res.value
        families.append({"family": label, "instances": len(instances), "proven": proven, "matched": matched,
                         "medianSeconds": round(statistics.median(seconds), 2) if seconds else None,
                         "maxSeconds": round(max(seconds), 2) if seconds else None})
    return {"timeLimit": suite.bpp_time, "families": families}


# ---- 3. scaling --------------------------------------------------------------------------------

def bench_scaling(suite: Suite) -> dict[str, Any]:
    rows = []
    for n in suite.scale_sizes:
        loaded = load_objects(generate(GenConfig(nodes=n, occupancy=0.6, seed=1)), source="generate")
        run = next(iter(loaded.runs.values()))
        for planner in ("greedy-fast", "auto"):
            _progress(f"scaling: {n} nodes: {planner}")
            limit = max(suite.scale_time_limit, 60.0) if planner == "greedy-fast" else suite.scale_time_limit
            t0 = time.perf_counter()
            res = plan_repack(loaded.snapshot, run, solver=planner, options=PlanOptions(time_limit=limit))
            wall = time.perf_counter() - t0
            rec = res.result.record
            rows.append({"nodes": n, "pods": len(loaded.snapshot.pods), "planner": planner,
                         "freed": res.status.plan.summary.freed_node_count, "freedBound": rec.freed_nodes_bound,
                         "status": rec.status, "gapPercent": rec.gap_percent, "wallSeconds": round(wall, 2),
                         "variables": res.result.stats.get("variables"),
                         "constraints": res.result.stats.get("constraints")})
    return {"occupancy": 0.6, "seed": 1, "timeLimit": suite.scale_time_limit, "runs": rows}


# ---- plots -------------------------------------------------------------------------------------

def _png(fig: Any) -> bytes:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    return buf.getvalue()


def _grouped_bars(scenarios: list[dict[str, Any]], key: str, ylabel: str, title: str, log: bool) -> bytes:
    import matplotlib.style
    from matplotlib.figure import Figure

    planners: list[str] = []
    for sc in scenarios:
        for r in sc["runs"]:
            if "skipped" not in r and r["planner"] not in planners:
                planners.append(r["planner"])
    with matplotlib.style.context("default"):
        fig = Figure(figsize=(max(6.0, 1.6 * len(scenarios) + 2), 4.5), dpi=100)
        ax = fig.add_subplot()
        width = 0.8 / max(1, len(planners))
        for j, planner in enumerate(planners):
            xs, ys = [], []
            for i, sc in enumerate(scenarios):
                row = next((r for r in sc["runs"] if r["planner"] == planner and "skipped" not in r), None)
                if row is not None:
                    xs.append(i - 0.4 + width * (j + 0.5))
                    ys.append(max(row[key], 0.005) if log else row[key])
            ax.bar(xs, ys, width=width, label=planner)
        ax.set_xticks(range(len(scenarios)))
        ax.set_xticklabels([sc["name"].replace(" / ", "\n") for sc in scenarios], fontsize=7)
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        if log:
            ax.set_yscale("log")
        ax.legend(fontsize=7)
        fig.tight_layout()
        return _png(fig)


def _scaling_plot(rows: list[dict[str, Any]]) -> bytes:
    import matplotlib.style
    from matplotlib.figure import Figure

    with matplotlib.style.context("default"):
        fig = Figure(figsize=(10, 4.2), dpi=100)
        ax1, ax2 = fig.subplots(1, 2)
        for planner in ("greedy-fast", "auto"):
            pts = [(r["nodes"], r["wallSeconds"]) for r in rows if r["planner"] == planner]
            ax1.plot([p[0] for p in pts], [max(p[1], 0.005) for p in pts], marker="o", label=planner)
        ax1.set_xscale("log")
        ax1.set_yscale("log")
        ax1.set_xlabel("provider nodes")
        ax1.set_ylabel("wall seconds (plan_repack)")
        ax1.set_title("Repack wall time")
        ax1.legend()
        for key in ("variables", "constraints"):
            pts = [(r["nodes"], r[key]) for r in rows if r["planner"] == "auto" and r[key]]
            ax2.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=key)
        ax2.set_xscale("log")
        ax2.set_yscale("log")
        ax2.set_xlabel("provider nodes")
        ax2.set_title("CP-SAT model size (auto)")
        ax2.legend()
        fig.tight_layout()
        return _png(fig)


def write_plots(results: dict[str, Any], out: Path) -> list[str]:
    pngs: list[str] = []
    scenarios = results["repack"].get("scenarios")
    if scenarios:
        write_atomic(str(out / "repack_freed.png"),
                     _grouped_bars(scenarios, "freed", "freed nodes", "Repack on openb: freed nodes", False))
        write_atomic(str(out / "repack_wall.png"),
                     _grouped_bars(scenarios, "wallSeconds", "wall seconds (log)", "Repack on openb: wall time",
                                   True))
        pngs += ["repack_freed.png", "repack_wall.png"]
    if results["scaling"]["runs"]:
        write_atomic(str(out / "scaling.png"), _scaling_plot(results["scaling"]["runs"]))
        pngs.append("scaling.png")
    return pngs


# ---- report ------------------------------------------------------------------------------------

def _md(header: Sequence[str], rows: list[list[Any]]) -> str:
    def cell(v: Any) -> str:
        return "–" if v is None else str(v)

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def report(results: dict[str, Any], pngs: list[str]) -> str:
    m = results["machine"]
    parts = [f"# optplan bench ({results['suite']})\n",
             f"Machine: {m['cpus']} cpus, {m['cpu']}, Python {m['python']}; one solver worker. "
             f"Total wall time {results['wallSeconds']} s.\n"]
    rp = results["repack"]
    parts.append("## 1. Repack on openb snapshots\n")
    if "skipped" in rp:
        parts.append(f"Skipped: {rp['skipped']}.\n")
    else:
        parts.append("Baselines follow their own algorithms; `violations` counts the breaks of optplan's rules "
                     "in their plans (`plan_violations`). Cards are whole GPUs.\n")
        header = ["planner", "freed", "freed bound", "frag before %", "frag after %", "affected PodGroups",
                  "below minAvailable", "affected cards", "moved cards", "moved pods", "wall s", "status", "gap %",
                  "violations"]
        for sc in rp["scenarios"]:
            parts.append(f"### {sc['name']}\n")
            parts.append(f"{sc['nodes']} nodes, {sc['pods']} pods, {sc['fillPercent']}% of GPUs taken after "
                         f"departures, {sc['occupied']} occupied, theoretical minimum {sc['theoreticalMin']}, "
                         f"{sc['candidates']} vacate candidates.\n")
            rows = []
            for r in sc["runs"]:
                if "skipped" in r:
                    rows.append([r["planner"], f"skipped: {r['skipped']}", *[None] * (len(header) - 2)])
                    continue
                rows.append([r["planner"], r["freed"], r["freedBound"], r["fragBefore"], r["fragAfter"],
                             r["affectedPodGroups"], r["belowMinAvailable"], r["affectedCards"], r["movedCards"],
                             r["movedPods"], r["wallSeconds"], r["status"], r["gapPercent"], r["violations"]])
            parts.append(_md(header, rows))
        for png in ("repack_freed.png", "repack_wall.png"):
            if png in pngs:
                parts.append(f"![{png}]({png})\n")
    bp = results["bpplib"]
    parts.append("## 2. Theoretical minimum on BPPLIB\n")
    if "skipped" in bp:
        parts.append(f"Skipped: {bp['skipped']}.\n")
    else:
        parts.append(f"`min_bins`, {bp['timeLimit']:g} s per instance.\n")
        parts.append(_md(["family", "instances", "proven optimal", "value = known optimum", "median s", "max s"],
                         [[f["family"], f["instances"], f["proven"], f["matched"], f["medianSeconds"],
                           f["maxSeconds"]] for f in bp["families"]]))
    sc = results["scaling"]
    parts.append("## 3. Scaling on generated clusters\n")
    parts.append(f"`GenConfig(nodes=n, occupancy={sc['occupancy']}, seed={sc['seed']})`; auto's time limit "
                 f"{sc['timeLimit']:g} s; wall time of the whole `plan_repack`.\n")
    parts.append(_md(["nodes", "pods", "planner", "freed", "freed bound", "status", "gap %", "wall s",
                      "variables", "constraints"],
                     [[r["nodes"], r["pods"], r["planner"], r["freed"], r["freedBound"], r["status"],
                       r["gapPercent"], r["wallSeconds"], r["variables"], r["constraints"]] for r in sc["runs"]]))
    if "scaling.png" in pngs:
        parts.append("![scaling.png](scaling.png)\n")
    return "\n".join(parts)
