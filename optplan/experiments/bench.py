"""``optplan bench``: one command that runs the benchmark suite and writes a report.

Sections (each skipped with a note when its data is absent):

1. Repack on openb snapshots (``--data``/openb): fills × departures × budgets, every planner (greedy,
   cpsat and milp alone, auto) and the three peer baselines (whose plans are validated against
   optplan's rules and their breaks counted).
2. Theoretical minimum (``min_bins``) on BPPLIB families (``--data``/bpplib) against the known optima.
3. Scaling on generated clusters: wall time of greedy-fast and auto, and the model size (whole, or
   auto's neighbourhoods); on the smallest sizes CP-SAT and its MILP twin alone, side by side.
4. Online placement on openb (``--data``/openb) in the FGD paper's setup (``experiments.sim.online``): the
   whole-GPU pod stream placed by greedy (Volcano binpack), best-fit, random and CP-SAT batches until
   requests reach 130% of the GPUs; the paper's published allocation (``--data``/fgd-expected) is shown
   beside, as a reference, not as our result.
5. Make room for pending gangs (``goals_bench``): five gangs under hard rack topology injected into openb
   snapshots with a HyperNode fabric; gangs admitted and disruption by doing nothing, preemption, KAI-style
   consolidation, optplan's greedy and exact admit goal.
6. Shared GPUs (``experiments.sim.table``): the FGD paper's allocation table like for like: every pod of
   each openb workload on GPU devices, the paper's six peers and optplan's policies, mean and 95% interval
   over seeds beside the published means (full suite: 17 workloads × seeds 42..51; quick: the default trace,
   seed 42); its runs are cached in ``shared_runs.jsonl`` in ``--out``.
7. Repack goals with shared GPUs (``goals_bench.bench_goal_shares``): on openb with its shares kept (fill 80%)
   and the fabric of 5, the five gangs admitted, racks freed, whole GPUs of a model left free on one node, by
   the greedy and the exact planners at device level; the goal against its bound, moves, model size, wall.

Output in ``--out``: ``report.md`` (Markdown tables and PNG links), the PNGs (matplotlib's Agg canvas,
no pyplot, no timestamps) and ``results.json`` (every figure). Progress goes to stderr: a bar per
section with count/total, elapsed time and ETA, redrawn in place, when stderr is a terminal; otherwise
(or with ``-v``) one log line per step, shown only with ``-v``.
"""

from __future__ import annotations

import copy
import csv
import json
import logging
import os
import platform
import shutil
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from optplan.adapters.generate import GenConfig, generate
from optplan.adapters.kubefile import LoadedInput, load_objects
from optplan.adapters.openb import RESOURCE, ImportConfig, import_openb
from optplan.adapters.output import png, write_atomic
from optplan.errors import InputError
from optplan.experiments.goals_bench import bench_goal_shares, bench_goals, share_report_lines
from optplan.experiments.goals_bench import plot as goals_plot
from optplan.experiments.goals_bench import report_lines as goals_report
from optplan.experiments.sim import table as fgd_table
from optplan.experiments.sim.online import OnlineConfig, OnlineResult, fgd_workload, simulate
from optplan.solvers.binpack.binpacking import min_bins
from optplan.solvers.binpack.frag import FragReport, round_half_up
from optplan.solvers.core import registry
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.core.registry import BASELINES, SIM
from optplan.solvers.repack.exact.model import MAX_ARCS
from optplan.solvers.repack.rules import Disruption, RepackProblem
from optplan.solvers.repack.run import plan_repack
from optplan.solvers.repack.validate import plan_violations

log = logging.getLogger(__name__)

SECTIONS = ("repack", "bpplib", "scaling", "placement", "goals", "shared", "goal-shares")
ARRIVALS_PERCENT = 130.0
FGD_EXPECTED = Path("fgd-expected") / "analysis_allo_discrete.csv"
FGD_WORKLOAD = "openb_pod_list_default"
FGD_POLICIES = (("06-FGD", "FGD"), ("05-BestFit", "BestFit"), ("04-GpuPacking", "GpuPacking"),
                ("02-DotProd", "DotProd"), ("01-Random", "Random"))
"""The paper's policies shown as reference rows: their column name in the CSV, our label."""
ARRIVAL_COST = {"cpsat-batch": 200, "greedy": 2}
"""Rough cost of one arrival per policy, relative to best-fit's, for the placement bar's ETA."""
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
    time_limit: float
    bpp_families: tuple[tuple[str, str], ...]
    bpp_instances: int
    """Per family, evenly spread over the family's instances sorted by name (0: all)."""
    bpp_time: float
    scale_sizes: tuple[int, ...]
    scale_time_limit: float
    online_seeds: tuple[int, ...] = (0,)
    online_node_stride: int = 1
    """Every k-th node of the openb node list (1: all 1,213)."""
    online_batch_time: float = 0.2
    """Seconds per CP-SAT solve of cpsat-batch."""
    online_policies: tuple[str, ...] = registry.names(SIM)
    twin_max_nodes: int = 0
    """Scaling sizes up to this also run the CP-SAT model and its MILP twin side by side."""
    shared_workloads: tuple[str, ...] = ("default",)
    """Section 6: the openb workloads of the FGD paper's table (``sim.table.WORKLOADS``)."""
    shared_seeds: tuple[int, ...] = (42,)


NO_BUDGET = Budget("none")


def suite_for(quick: bool, tiny: bool = False, time_limit: float | None = None) -> Suite:
    if tiny:
        return Suite("tiny", (90.0,), (0.2,), (NO_BUDGET,), ("greedy-fast",), time_limit or 5.0,
                     (("Falkenauer U", "Falkenauer U"),), 2, 2.0, (30, 60), time_limit or 2.0,
                     online_seeds=(0,), online_node_stride=8, online_batch_time=0.05, shared_workloads=())
    if quick:
        return Suite("quick", (90.0,), (0.2,), (NO_BUDGET, Budget("podGroups 10 / 64 cards", 10, 64)),
                     ("greedy-fast", "auto"), time_limit or 10.0,
                     (BPP_FAMILIES[0], BPP_FAMILIES[4]), 5, 2.0, (100, 300, 1000), time_limit or 10.0,
                     online_seeds=(0,), online_node_stride=4, twin_max_nodes=100)
    return Suite("full", (80.0, 90.0), (0.1, 0.2),
                 (NO_BUDGET, Budget("podGroups 2 / 8 cards", 2, 8), Budget("podGroups 10 / 64 cards", 10, 64)),
                 ("greedy-fast", "greedy", "cpsat", "milp", "auto"), time_limit or 20.0, BPP_FAMILIES, 20, 3.0,
                 (100, 300, 1000, 3000, 10000), time_limit or 30.0, online_seeds=(0, 1, 2, 3, 4),
                 twin_max_nodes=100, shared_workloads=fgd_table.WORKLOADS, shared_seeds=fgd_table.PAPER_SEEDS)


def run_suite(suite: Suite, data: Path | None, out: Path, sections: Sequence[str] = SECTIONS) -> str:
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    results: dict[str, Any] = {"suite": suite.name, "machine": machine()}
    benches = {"repack": lambda: bench_repack(suite, data), "bpplib": lambda: bench_bpplib(suite, data),
               "scaling": lambda: bench_scaling(suite), "placement": lambda: bench_placement(suite, data),
               "goals": lambda: {"skipped": "not in the tiny suite"} if suite.name == "tiny" else bench_goals(
                   data, suite.fills, 30.0 if suite.name == "full" else suite.time_limit,
                   lambda name: log.info("goals: %s", name)),
               "shared": lambda: bench_shared(suite, data, out),
               "goal-shares": lambda: {"skipped": "not in the tiny suite"} if suite.name == "tiny" else
               bench_goal_shares(data, 80.0, suite.time_limit, ("greedy", "cpsat", "auto") if suite.name == "full"
                                 else ("greedy", "auto"), lambda name: log.info("goal-shares: %s", name))}
    for name in SECTIONS:
        results[name] = benches[name]() if name in sections else {"skipped": "not among --sections"}
    results["wallSeconds"] = round(time.perf_counter() - t0, 1)
    pngs = write_plots(results, out)
    write_atomic(str(out / "results.json"), json.dumps(results, indent=2) + "\n")
    write_atomic(str(out / "report.md"), report(results, pngs))
    return (f"wrote {out / 'report.md'}, {out / 'results.json'} and {len(pngs)} plot(s) "
            f"in {results['wallSeconds']} s\n")


def _clock(seconds: float) -> str:
    m, s = divmod(int(seconds + 0.5), 60)
    return f"{m // 60}:{m % 60:02d}:{s:02d}" if m >= 60 else f"{m}:{s:02d}"


class Progress:
    """One section's progress. On a terminal (without ``-v``): a bar on stderr with count/total, elapsed
    time and ETA (elapsed × (1 − f) / f, f the share of the work done: count/total unless the caller
    weighs it), redrawn in place with ``\r`` at most ten times a second. Otherwise nothing is drawn:
    each ``start`` is one INFO log line, which ``-v`` shows."""

    WIDTH = 24

    def __init__(self, section: str, total: int, stream: TextIO | None = None) -> None:
        self.section = section
        self.total = max(total, 0)
        self.stream = stream if stream is not None else sys.stderr
        self.bar = self.stream.isatty() and not log.isEnabledFor(logging.INFO)
        self.done = 0
        self.fraction = 0.0
        self.note = ""
        self.detail = ""
        self.t0 = time.monotonic()
        self._last = -1.0
        self._drawn = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self, note: str) -> None:
        """Say what runs now."""
        self.note = note
        self.detail = ""
        log.info("bench: %s: %s", self.section, note)
        self._draw(force=True)

    def advance(self, n: int = 1) -> None:
        self.set(self.done + n)

    def set(self, done: int, fraction: float | None = None, detail: str | None = None) -> None:
        """``done`` of ``total``; ``fraction`` of the work when the steps weigh differently; ``detail``
        follows the note (not logged)."""
        self.done = min(max(done, 0), self.total)
        share = fraction if fraction is not None else self.done / self.total if self.total else 1.0
        self.fraction = min(max(share, 0.0), 1.0)
        if detail is not None:
            self.detail = detail
        self._draw()

    def line(self) -> str:
        elapsed = time.monotonic() - self.t0
        filled = int(self.WIDTH * self.fraction)
        eta = _clock(elapsed * (1 - self.fraction) / self.fraction) if self.fraction > 0 else "?"
        note = f"{self.note} {self.detail}" if self.detail else self.note
        return (f"{self.section} [{'#' * filled}{'.' * (self.WIDTH - filled)}] {self.done}/{self.total} "
                f"{_clock(elapsed)} elapsed, ETA {eta}  {note}")

    def _draw(self, force: bool = False) -> None:
        if not self.bar:
            return
        now = time.monotonic()
        if not force and now - self._last < 0.1 and self.done < self.total:
            return
        self._last = now
        cols = shutil.get_terminal_size((100, 24)).columns
        self.stream.write("\r" + self.line()[: max(cols - 1, 20)] + "\x1b[K")
        self.stream.flush()
        self._drawn = True

    def close(self) -> None:
        if self._drawn:
            self.note, self.detail = "done", ""
            self._draw(force=True)
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False


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
             "freedBound": rec.freed_nodes_bound, "violations": 0,
             **{k: res.result.stats[k] for k in ("sendVariables", "receiversPruned") if k in res.result.stats}},
            res.frag)


def _baseline_row(name: str, loaded: LoadedInput, limit: float, frag: FragReport) -> dict[str, Any]:
    run = next(iter(loaded.runs.values()))
    problem = RepackProblem(loaded.snapshot, run)
    t0 = time.perf_counter()
    res = registry.load(BASELINES, name)().plan(problem, PlanOptions(time_limit=limit))
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
    scenarios: list[dict[str, Any]] = []
    per_budget = len(suite.planners) + len(registry.names(BASELINES))
    bar = Progress("repack", len(suite.fills) * len(suite.departures) * (1 + len(suite.budgets) * per_budget))
    with bar:
        for fill in suite.fills:
            for dep in suite.departures:
                _repack_scenarios(suite, data, fill, dep, bar, scenarios)
    return {"timeLimit": suite.time_limit, "scenarios": scenarios}


def _repack_scenarios(suite: Suite, data: Path, fill: float, dep: float, bar: Progress,
                      scenarios: list[dict[str, Any]]) -> None:
    bar.start(f"importing openb fill {fill:g}% departures {dep:g}")
    objs, stats = import_openb(str(data / OPENB_NODES), str(data / OPENB_PODS),
                               ImportConfig(fill=fill, departures=dep, seed=0))
    bar.advance()
    for budget in suite.budgets:
        loaded = load_objects(_with_budget(objs, budget), source="openb")
        run = next(iter(loaded.runs.values()))
        problem = RepackProblem(loaded.snapshot, run)
        candidates = len(problem.candidates)
        budget_bound = problem.budget_freed_upper()
        name = f"fill {fill:g} / dep {dep:g} / {budget.label}"
        rows: list[dict[str, Any]] = []
        frag: FragReport | None = None
        for planner in suite.planners:
            bar.start(f"{name}: {planner}")
            # The greedy planners get a generous limit: they are timed, not cut.
            limit = max(suite.time_limit, 60.0) if planner.startswith("greedy") else suite.time_limit
            row, frag = _plan_row(planner, loaded, limit)
            rows.append(row)
            bar.advance()
        assert frag is not None
        for b in registry.names(BASELINES):
            bar.start(f"{name}: {b}")
            rows.append(_baseline_row(b, loaded, suite.time_limit, frag))
            bar.advance()
        # The bound each plan is measured against: the least of occupied − theoretical minimum, the freed-node
        # bounds optplan's planners report (the pool bound, ``repack.exact.bound``, and what an exact solver proved;
        # each valid for the whole model) and, with a budget, the budget's own bound.
        proven = [r["freedBound"] for r in rows if r.get("freedBound") is not None]
        bound = min([frag.occupied - frag.theoretical_min, *proven])
        if budget.pod_groups is not None or budget.cards is not None:
            bound = min(bound, budget_bound)
        for r in rows:
            if "freed" in r:
                r["gapToBound"] = bound - r["freed"]
                r["gapToBoundPercent"] = round(100 * (bound - r["freed"]) / bound, 2) if bound else 0.0
        scenarios.append({"name": name, "fill": fill, "departures": dep, "budget": budget.label,
                          "nodes": stats["nodes"], "pods": stats["pods"],
                          "fillPercent": stats["fill_percent"], "candidates": candidates,
                          "occupied": frag.occupied, "theoreticalMin": frag.theoretical_min,
                          "freedBound": bound, "runs": rows})


# ---- 2. BPPLIB ---------------------------------------------------------------------------------

def _norm(name: str) -> str:
    return name.strip().lower().replace(" ", "_")


def read_bpplib(path: Path) -> tuple[list[int], int]:
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
    chosen = {label: _spread(instances, suite.bpp_instances)
              for label, instances in _bpp_index(root, suite.bpp_families).items()}
    with Progress("bpplib", sum(len(v) for v in chosen.values())) as bar:
        for label, instances in chosen.items():
            families.append(_bpp_family(suite, label, instances, bar))
    return {"timeLimit": suite.bpp_time, "perFamily": suite.bpp_instances, "families": families}


def _spread(items: list[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    """n items evenly spread over the list (all of them when n is 0 or at least their number)."""
    if not n or n >= len(items):
        return items
    return [items[i * len(items) // n] for i in range(n)]


def _bpp_family(suite: Suite, label: str, instances: list[dict[str, Any]], bar: Progress) -> dict[str, Any]:
    proven = matched = 0
    seconds: list[float] = []
    for inst in instances:
        bar.start(f"{label}: {inst['name']}")
        weights, capacity = read_bpplib(inst["path"])
        t0 = time.perf_counter()
        res = min_bins(weights, [capacity] * len(weights), time_limit=suite.bpp_time)
        seconds.append(time.perf_counter() - t0)
        proven += res.proven
        matched += inst["lb"] == inst["ub"] == res.value
        bar.advance()
    return {"family": label, "instances": len(instances), "proven": proven, "matched": matched,
            "medianSeconds": round(statistics.median(seconds), 2) if seconds else None,
            "maxSeconds": round(max(seconds), 2) if seconds else None}


# ---- 3. scaling --------------------------------------------------------------------------------

def bench_scaling(suite: Suite) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    def planners(n: int) -> tuple[str, ...]:
        return ("greedy-fast", "auto", "cpsat", "milp") if n <= suite.twin_max_nodes else ("greedy-fast", "auto")

    with Progress("scaling", sum(len(planners(n)) for n in suite.scale_sizes)) as bar:
        for n in suite.scale_sizes:
            bar.start(f"{n} nodes: generating")
            loaded = load_objects(generate(GenConfig(nodes=n, occupancy=0.6, seed=1)), source="generate")
            run = next(iter(loaded.runs.values()))
            for planner in planners(n):
                bar.start(f"{n} nodes: {planner}")
                limit = max(suite.scale_time_limit, 60.0) if planner == "greedy-fast" else suite.scale_time_limit
                t0 = time.perf_counter()
                res = plan_repack(loaded.snapshot, run, solver=planner, options=PlanOptions(time_limit=limit))
                wall = time.perf_counter() - t0
                rec = res.result.record
                rows.append({"nodes": n, "pods": len(loaded.snapshot.pods), "planner": planner,
                             "freed": res.status.plan.summary.freed_node_count, "freedBound": rec.freed_nodes_bound,
                             "status": rec.status, "gapPercent": rec.gap_percent, "wallSeconds": round(wall, 2),
                             "objective": rec.objective, "bestBound": rec.best_bound,
                             "variables": res.result.stats.get("variables"),
                             "constraints": res.result.stats.get("constraints"),
                             "sendVariables": res.result.stats.get("sendVariables"),
                             "lnsSteps": res.result.stats.get("lnsSteps"),
                             "lnsVariables": res.result.stats.get("lnsVariables"),
                             "lnsConstraints": res.result.stats.get("lnsConstraints")})
                bar.advance()
    return {"occupancy": 0.6, "seed": 1, "timeLimit": suite.scale_time_limit, "runs": rows}


# ---- 4. online placement -----------------------------------------------------------------------

def fgd_published(path: Path, workload: str = FGD_WORKLOAD,
                  tune: float = ARRIVALS_PERCENT / 100) -> list[dict[str, Any]]:
    """The FGD paper's GPU allocation (%) at ``tune`` × capacity arrivals for one trace, per policy of
    ``FGD_POLICIES``: mean, min and max over its seeds (column ``130`` of ``analysis_allo_discrete.csv``)."""
    wanted = dict(FGD_POLICIES)
    column = str(round(tune * 100))
    values: dict[str, list[float]] = {}
    with path.open(newline="") as fh:
        for row in csv.DictReader(fh):
            if row.get("workload") == workload and row.get("sc_policy") in wanted and \
                    float(row.get("tune") or "nan") == tune:
                values.setdefault(row["sc_policy"], []).append(float(row[column]))
    return [{"policy": label, "seeds": len(values[key]), "allocPercent": round(statistics.fmean(values[key]), 2),
             "minPercent": min(values[key]), "maxPercent": max(values[key])}
            for key, label in FGD_POLICIES if values.get(key)]


def _policy_row(policy: str, runs: list[OnlineResult]) -> dict[str, Any]:
    alloc = [r.alloc_percent for r in runs]
    at_first = [100.0 * r.allocated_at_first_rejection / r.total_gpus for r in runs
                if r.allocated_at_first_rejection is not None]
    solves: dict[str, int] = {}
    for r in runs:
        for k, v in r.solves.items():
            solves[k] = solves.get(k, 0) + v
    return {"policy": policy, "seeds": len(runs), "allocPercent": round(statistics.fmean(alloc), 2),
            "minPercent": round(min(alloc), 2), "maxPercent": round(max(alloc), 2),
            "rejected": round(statistics.fmean(r.rejected for r in runs), 1),
            "allocAtFirstRejectionPercent": round(statistics.fmean(at_first), 2) if at_first else None,
            "wallSeconds": round(statistics.fmean(r.wall_seconds for r in runs), 2),
            "totalWallSeconds": round(sum(r.wall_seconds for r in runs), 1), "solves": solves}


def bench_placement(suite: Suite, data: Path | None) -> dict[str, Any]:
    if data is None or not (data / OPENB_NODES).is_file() or not (data / OPENB_PODS).is_file():
        return {"skipped": f"no {OPENB_NODES} and {OPENB_PODS} under --data"}
    nodes = fgd_table.read_sim_nodes(data / OPENB_NODES)[:: suite.online_node_stride]
    trace = fgd_table.read_sim_pods(data / OPENB_PODS)
    whole = [p for p in trace if p.gpu >= 1 and p.gpu_milli == 1000]
    gpus = sum(n.gpu for n in nodes)
    streams = {seed: fgd_workload(trace, gpus, ARRIVALS_PERCENT, seed) for seed in suite.online_seeds}
    runs: dict[str, list[OnlineResult]] = {p: [] for p in suite.online_policies}
    per_seed: list[dict[str, Any]] = []
    work = sum(len(s) * ARRIVAL_COST.get(p, 1) for s in streams.values() for p in suite.online_policies)
    done = 0
    with Progress("placement", len(streams) * len(suite.online_policies)) as bar:
        for seed, arrivals in streams.items():
            for policy in suite.online_policies:
                bar.start(f"seed {seed}: {policy}")
                cost = ARRIVAL_COST.get(policy, 1)

                def step(k: int, n: int = len(arrivals), before: int = done, cost: int = cost) -> None:
                    bar.set(bar.done, (before + k * cost) / work, f"{k:,}/{n:,} arrivals")

                res = simulate(nodes, arrivals, policy,
                               OnlineConfig(seed=seed, batch_time_limit=suite.online_batch_time), progress=step)
                done += len(arrivals) * cost
                bar.set(bar.done + 1, done / work)
                runs[policy].append(res)
                per_seed.append({"policy": policy, "seed": seed, "arrivals": res.arrivals,
                                 "requestedGpus": res.requested_gpus, "allocatedGpus": res.allocated_gpus,
                                 "allocPercent": round(res.alloc_percent, 2), "rejected": res.rejected,
                                 "firstRejection": res.first_rejection,
                                 "allocatedAtFirstRejection": res.allocated_at_first_rejection,
                                 "wallSeconds": res.wall_seconds, "solves": res.solves})
    expected = data / FGD_EXPECTED
    published: dict[str, Any]
    if expected.is_file():
        published = {"source": str(FGD_EXPECTED), "workload": FGD_WORKLOAD, "rows": fgd_published(expected)}
    else:
        published = {"skipped": f"no {FGD_EXPECTED} under --data"}
    cfg = OnlineConfig()
    return {"arrivalsPercent": ARRIVALS_PERCENT, "nodes": len(nodes), "gpus": gpus,
            "nodeStride": suite.online_node_stride, "tracePods": len(whole), "traceGpus": sum(p.gpu for p in whole),
            "seeds": list(suite.online_seeds),
            "arrivals": round(statistics.fmean(len(s) for s in streams.values()), 1),
            "batch": cfg.batch, "batchTimeLimit": suite.online_batch_time, "batchCandidates": cfg.batch_candidates,
            "policies": [_policy_row(p, runs[p]) for p in suite.online_policies], "runs": per_seed,
            "published": published}


# ---- 6. shared GPUs: the FGD paper's table --------------------------------------------------------

def bench_shared(suite: Suite, data: Path | None, out: Path) -> dict[str, Any]:
    """Every pod of each workload on GPU devices, the paper's six peers and optplan's policies
    (``sim.table``); runs cached in ``<out>/shared_runs.jsonl``, so a stopped run resumes."""
    if not suite.shared_workloads:
        return {"skipped": f"not in the {suite.name} suite"}
    if data is None or not (data / fgd_table.NODES).is_file():
        return {"skipped": f"no {fgd_table.NODES} under --data"}
    policies = registry.names(registry.SIM_SHARED)
    total = len(suite.shared_workloads) * len(suite.shared_seeds) * len(policies)
    with Progress("shared", total) as bar:
        def step(note: str) -> None:
            bar.start(note)
            bar.advance()

        return fgd_table.run_table(data, suite.shared_workloads, suite.shared_seeds, policies,
                                   out / "shared_runs.jsonl", step)


# ---- plots -------------------------------------------------------------------------------------

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
        return png(fig)


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
        labels = {"sendVariables": "(pod class, receiver) pairs", "variables": "CP-SAT variables, whole model",
                  "lnsVariables": "CP-SAT variables, largest neighbourhood"}
        for key, label in labels.items():
            pts = [(r["nodes"], r[key]) for r in rows if r["planner"] == "auto" and r.get(key)]
            if pts:
                ax2.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
        ax2.set_xscale("log")
        ax2.set_yscale("log")
        ax2.set_xlabel("provider nodes")
        ax2.set_title("Model size (auto)")
        ax2.legend()
        fig.tight_layout()
        return png(fig)


def _placement_plot(pl: dict[str, Any]) -> bytes:
    import matplotlib.style
    from matplotlib.figure import Figure

    ours = pl["policies"]
    ref = pl["published"].get("rows", [])
    with matplotlib.style.context("default"):
        fig = Figure(figsize=(max(6.0, 0.9 * (len(ours) + len(ref)) + 2), 4.5), dpi=100)
        ax = fig.add_subplot()
        xs = list(range(len(ours)))
        ys = [r["allocPercent"] for r in ours]
        err = [[y - r["minPercent"] for y, r in zip(ys, ours, strict=True)],
               [r["maxPercent"] - y for y, r in zip(ys, ours, strict=True)]]
        ax.bar(xs, ys, yerr=err, capsize=3, color="C0", label=f"optplan, whole-GPU pods ({len(pl['seeds'])} seed(s))")
        rx = [len(ours) + 1 + i for i in range(len(ref))]
        ry = [r["allocPercent"] for r in ref]
        if ref:
            ax.bar(rx, ry, color="0.8", edgecolor="0.4", hatch="//",
                   label="published, FGD paper (ATC'23), all pods: not our result")
        tops = [r["maxPercent"] for r in ours] + ry
        for x, y, top in zip(xs + rx, ys + ry, tops, strict=True):
            ax.annotate(f"{y:.2f}", (x, top), ha="center", va="bottom", fontsize=7, xytext=(0, 2),
                        textcoords="offset points")
        ax.set_xticks(xs + rx)
        ax.set_xticklabels([r["policy"] for r in ours] + [r["policy"] for r in ref], fontsize=8, rotation=20)
        low = min([*ys, *ry, *(r["minPercent"] for r in ours)])
        ax.set_ylim(max(0.0, low - 3.0), 100.5)
        ax.set_ylabel(f"GPU allocation % at {pl['arrivalsPercent']:g}% arrivals")
        ax.set_title(f"Online placement on openb ({pl['nodes']:,} nodes, {pl['gpus']:,} GPUs)")
        ax.legend(fontsize=7, loc="upper right")
        fig.tight_layout()
        return png(fig)


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
    if results["scaling"].get("runs"):
        write_atomic(str(out / "scaling.png"), _scaling_plot(results["scaling"]["runs"]))
        pngs.append("scaling.png")
    if results["placement"].get("policies"):
        write_atomic(str(out / "placement.png"), _placement_plot(results["placement"]))
        pngs.append("placement.png")
    goals_png = goals_plot(results["goals"])
    if goals_png is not None:
        write_atomic(str(out / "goals.png"), goals_png)
        pngs.append("goals.png")
    return pngs


# ---- report ------------------------------------------------------------------------------------

def _md(header: Sequence[str], rows: list[list[Any]]) -> str:
    def cell(v: Any) -> str:
        return "–" if v is None else str(v)

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def _model(row: dict[str, Any]) -> str | None:
    """An exact planner's send variables, and whether receivers were pruned."""
    if row.get("sendVariables") is None:
        return None
    return f"{row['sendVariables']:,} arcs" + (" (pruned)" if row.get("receiversPruned") else "")


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
        parts.append("`gap to bound` is freed nodes short of the scenario's bound: the least of occupied − "
                     "theoretical minimum, the freed-node bounds optplan's planners report (the pool bound, and "
                     "what CP-SAT proves on a relaxation of the budgets, PDBs and total room; each valid for the "
                     "whole model) and, with a budget, the budget's own count bound. `freed bound` and `gap %` "
                     "are each solver's own record. cpsat and milp run alone, without a hint; auto is greedy then "
                     "CP-SAT hinted with its plan. Above " + f"{MAX_ARCS:,}" + " (pod class, receiver) pairs each "
                     "exact planner keeps the best receivers per pod class (`pruned`): the model is then a "
                     "restriction, its optimum is reported as FEASIBLE and its own bounds are not used. Exact "
                     "planners' time limit "
                     + f"{rp.get('timeLimit', '?')} s.\n")
        header = ["planner", "freed", "gap to bound", "freed bound", "frag before %", "frag after %",
                  "affected PodGroups", "below minAvailable", "affected cards", "moved cards", "moved pods", "wall s",
                  "status", "gap %", "violations", "model"]
        for sc in rp["scenarios"]:
            parts.append(f"### {sc['name']}\n")
            parts.append(f"{sc['nodes']} nodes, {sc['pods']} pods, {sc['fillPercent']}% of GPUs taken after "
                         f"departures, {sc['occupied']} occupied, theoretical minimum {sc['theoreticalMin']}, "
                         f"{sc['candidates']} vacate candidates; at most {sc.get('freedBound', '?')} nodes can be "
                         f"freed.\n")
            rows = []
            for r in sc["runs"]:
                if "skipped" in r:
                    rows.append([r["planner"], f"skipped: {r['skipped']}", *[None] * (len(header) - 2)])
                    continue
                gap = (f"{r['gapToBound']} ({r['gapToBoundPercent']}%)" if r.get("gapToBound") is not None
                       else None)
                rows.append([r["planner"], r["freed"], gap, r["freedBound"], r["fragBefore"], r["fragAfter"],
                             r["affectedPodGroups"], r["belowMinAvailable"], r["affectedCards"], r["movedCards"],
                             r["movedPods"], r["wallSeconds"], r["status"], r["gapPercent"], r["violations"],
                             _model(r)])
            parts.append(_md(header, rows))
        for png in ("repack_freed.png", "repack_wall.png"):
            if png in pngs:
                parts.append(f"![{png}]({png})\n")
    bp = results["bpplib"]
    parts.append("## 2. Theoretical minimum on BPPLIB\n")
    if "skipped" in bp:
        parts.append(f"Skipped: {bp['skipped']}.\n")
    else:
        per = bp.get("perFamily") or 0
        sample = f"{per} instances per family, evenly spread over its instances sorted by name" if per else \
            "every instance"
        parts.append(f"`min_bins`, {bp['timeLimit']:g} s per instance, {sample}.\n")
        parts.append(_md(["family", "instances", "proven optimal", "value = known optimum", "median s", "max s"],
                         [[f["family"], f["instances"], f["proven"], f["matched"], f["medianSeconds"],
                           f["maxSeconds"]] for f in bp["families"]]))
    sc = results["scaling"]
    parts.append("## 3. Scaling on generated clusters\n")
    if "skipped" in sc:
        parts.append(f"Skipped: {sc['skipped']}.\n")
    else:
        parts.append(f"`GenConfig(nodes=n, occupancy={sc['occupancy']}, seed={sc['seed']})`; auto's time limit "
                     f"{sc['timeLimit']:g} s; wall time of the whole `plan_repack`. On the smallest sizes the CP-SAT "
                     "model and its MILP twin (PuLP/HiGHS) also run alone: `objective` is the integer-scaled "
                     "disruption of the freed-node optimum, the same scale for both. `pairs`: (pod class, "
                     "receiver) pairs of the whole model (pruned above " + f"{MAX_ARCS:,}" + "); `variables` and "
                     "`constraints`: the CP-SAT model solved whole, or, where auto searched neighbourhoods "
                     "(`LNS steps`), the largest neighbourhood's.\n")
        parts.append(_md(["nodes", "pods", "planner", "freed", "freed bound", "status", "objective", "best bound",
                          "gap %", "wall s", "pairs", "variables", "constraints", "LNS steps"],
                         [[r["nodes"], r["pods"], r["planner"], r["freed"], r["freedBound"], r["status"],
                           r.get("objective"), r.get("bestBound"), r["gapPercent"], r["wallSeconds"],
                           r.get("sendVariables"), r["variables"] or r.get("lnsVariables"),
                           r["constraints"] or r.get("lnsConstraints"),
                           r.get("lnsSteps")] for r in sc["runs"]]))
    if "scaling.png" in pngs:
        parts.append("![scaling.png](scaling.png)\n")
    parts += _placement_report(results["placement"], pngs)
    parts += goals_report(results["goals"], pngs, _md)
    parts.append("## 6. Shared GPUs: the FGD paper's table\n")
    sh = results["shared"]
    parts += [f"Skipped: {sh['skipped']}.\n"] if "skipped" in sh else fgd_table.report(sh, _md)
    parts += share_report_lines(results["goal-shares"], _md)
    return "\n".join(parts)


def _placement_report(pl: dict[str, Any], pngs: list[str]) -> list[str]:
    parts = [f"## 4. Online placement (openb, {ARRIVALS_PERCENT:g}% arrivals)\n"]
    if "skipped" in pl:
        return [*parts, f"Skipped: {pl['skipped']}.\n"]
    cluster = f"{pl['nodes']:,} nodes, {pl['gpus']:,} GPUs"
    if pl["nodeStride"] > 1:
        cluster += (f" — every {pl['nodeStride']}th node of the openb node list, a reduced cluster for a short run; "
                    "the full run takes all 1,213")
    seeds = ("Seed " if len(pl["seeds"]) == 1 else "Seeds ") + ", ".join(str(s) for s in pl["seeds"])
    parts.append(
        f"Cluster: {cluster}. Workload: the default trace's {pl['tracePods']:,} whole-GPU pods ({pl['traceGpus']:,} "
        f"GPUs; fractional-GPU and CPU-only pods left out) shuffled, then topped up by draws with replacement "
        f"(or thinned) until the requests reach {pl['arrivalsPercent']:g}% of the cluster's GPUs, as the FGD "
        f"simulator builds its workload ({pl['arrivals']:,.0f} arrivals on average); pods arrive one by one, none "
        f"departs, a pod that fits nowhere (cpu, memory, GPUs, GPU model) is rejected and the stream goes on. "
        f"{seeds}: one arrival sequence per seed, the same for every policy. `greedy` is Volcano's binpack "
        f"(`binpack_score`, default weights: cpu 1, memory 1, GPUs unweighted), `best-fit` leaves the fewest free "
        f"GPUs (ties: first node by name), `random` is uniform among the nodes that fit, `cpsat-batch` places "
        f"{pl['batch']} arrivals per CP-SAT solve ({pl['batchTimeLimit']:g} s, one worker, at most "
        f"{pl['batchCandidates']} candidate nodes plus its best-fit hint's). Every final state is re-checked "
        "with the feasibility oracle. GPU allocation = allocated GPUs / cluster GPUs at the end; "
        "`alloc % at 1st rejection` is the allocation when the first pod was turned away (cpsat-batch: after "
        "its batch).\n")
    parts.append(_md(["policy", "GPU alloc % (mean)", "min", "max", "rejected pods", "alloc % at 1st rejection",
                      "wall s per run", "CP-SAT solves"],
                     [[r["policy"], f"{r['allocPercent']:.2f}", f"{r['minPercent']:.2f}", f"{r['maxPercent']:.2f}",
                       r["rejected"], r["allocAtFirstRejectionPercent"], r["wallSeconds"],
                       ", ".join(f"{k} {v}" for k, v in sorted(r["solves"].items())) or None]
                      for r in pl["policies"]]))
    pub = pl["published"]
    if "skipped" in pub:
        parts.append(f"Published reference skipped: {pub['skipped']}.\n")
    else:
        parts.append(f"**Published (FGD paper, ATC'23), not our result** — `{pub['source']}`, trace "
                     f"`{pub['workload']}`, the paper's simulator on all 1,213 nodes. Its workload also holds the "
                     "fractional-GPU pods (GPU sharing) and the CPU-only pods, so these rows are a reference for "
                     "the setting, not comparable one to one with the rows above.\n")
        parts.append(_md(["policy (published)", "GPU alloc % (mean)", "min", "max", "seeds"],
                         [[r["policy"], f"{r['allocPercent']:.2f}", f"{r['minPercent']:.2f}",
                           f"{r['maxPercent']:.2f}", r["seeds"]] for r in pub["rows"]]))
    if "placement.png" in pngs:
        parts.append("![placement.png](placement.png)\n")
    return parts
