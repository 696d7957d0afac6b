"""Sweeps (``optplan replay --sweep``): a grid of replays — policies × intervals × budgets × planners ×
traces × seeds — each cell one task, on an executor, with the mean and a 95% confidence interval over
seeds and each policy's difference from ``none`` (paired by trace and seed).

Grid (``grid``). ``none``, ``oracle`` and ``nobinpack`` are one cell per trace and seed (interval, budget
and planner mean nothing to them); ``interval`` one per interval × budget × planner; ``pending`` one per
pending-after × interval (its cooldown) × budget × planner; with ``grids``, the union of several such grids
(the settings a frontier needs, not their whole product). A cell's ``key`` names all of it; results are
keyed, sorted and rounded, so they are the same whichever executor ran them and in whatever order the cells finished.

Executors: ``serial`` (in this process), ``pool`` (a local process pool, the default) and ``ray`` (a
local Ray instance, or an existing cluster by address — ``HOST:PORT`` or a ``ray://HOST:PORT`` client
connection, tried ``CLIENT_TRIES`` times; Ray is imported only then). A cell that raises is run again up to
``retries`` times, then reported as failed; on Ray a cell whose worker or node dies is run again by Ray
itself (``max_retries``), on another node. Finished cells are appended to the results
file (JSON lines) as they finish, and a sweep started again with the same file skips them (resume) — only
rows whose ``fingerprint`` (the cell's whole config, the trace and optplan's code) matches: a changed
setting, or another version of the code, runs again.

Confidence intervals: Student's t over seeds (mean ± t(0.975, n−1) × s / √n); one seed gives no interval.

The frontier (``frontier``): per trace, the settings no other setting beats on both a benefit (``BENEFITS``:
8-card gangs' mean completion time, useful GPU %) and a disruption (``DISRUPTIONS``: cards restarted per
day, GPU-hours lost to restarts), on the means over seeds — what an operator chooses from; ``none`` is its
zero-disruption end, the oracle and ``nobinpack`` are references off it. ``frontier_panels`` is what
``plots.frontier`` draws, ``frontier_markdown`` the sweep report's section.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import math
import os
import socket
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from optplan.errors import InputError
from optplan.experiments.replay.config import POLICIES, STATIC, ReplayConfig, budget_label
from optplan.experiments.replay.engine import config_dict, replay
from optplan.experiments.replay.oracle import NOBINPACK, ORACLE, SHARE_METRICS, shares
from optplan.experiments.replay.trace import Trace

METRICS = ("allocationPercent", "usefulPercent", "lostPercent", "censoredGangs", "waitP95Minutes", "waitP95Minutes8",
           "waitMeanMinutes8", "completionMeanMinutes8", "cardsDisruptedPerDay", "podsMovedPerDay",
           "restartGpuHoursPercent")
EXECUTORS = ("serial", "pool", "ray")
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
         2.045, 2.042)
"""Student's t quantile 0.975 for 1..30 degrees of freedom; 1.96 beyond."""

CLIENT_TRIES = 3
CLIENT_PAUSE = 5.0
"""A ``ray://`` connection is tried this many times, this many seconds apart: Ray's client server starts a
session process per connection, which on a loaded head can fail with "Initialization failure from server"."""
log = logging.getLogger(__name__)

ProgressFn = Callable[[int, int], None]
"""Called with (cells done, cells in all)."""


@dataclass(frozen=True)
class Cell:
    trace: str
    seed: int
    config: ReplayConfig

    @property
    def group(self) -> str:
        """The cell without its seed: what the seeds are averaged over."""
        c = self.config
        if c.policy in STATIC:
            return f"{self.trace} / {c.policy}"
        what = f"every {c.interval / 60:g}m" if c.policy == "interval" else (
            f"after {c.pending_after / 60:g}m, cooldown {c.interval / 60:g}m"
            + (f", gangs of {c.pending_cards}+ cards" if c.pending_cards else ""))
        return f"{self.trace} / {c.policy} {what} / {c.planner} / {budget_label(c.max_per_run)}"

    @property
    def key(self) -> str:
        return f"{self.group} / seed {self.seed}"


def _list(spec: Mapping[str, Any], name: str, default: Sequence[Any]) -> list[Any]:
    v = spec.get(name, list(default))
    if not isinstance(v, list) or not v:
        raise InputError("must be a non-empty list", field=name)
    return v


def _minutes(v: Any, name: str) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v <= 0:
        raise InputError(f"must be a positive number of minutes, got {v!r}", field=name)
    return float(v) * 60


GRID_KEYS = ("policies", "intervals", "pendingAfter", "pendingCards", "budgets", "planners")
"""What each entry of a sweep file's ``grids`` may set (the rest of the file is shared)."""


def grid(spec: Mapping[str, Any], traces: Sequence[str], base: ReplayConfig) -> list[Cell]:
    """The cells of a sweep file's grid (``policies``, ``intervals``, ``pendingAfter`` in minutes,
    ``budgets`` as maxPerRun mappings, ``planners``, ``seeds``) over the named traces; every config checked.
    With ``grids`` (a list of mappings of ``GRID_KEYS``), the union of the grids each entry gives over the
    file's own keys: a frontier sweep names the settings it wants, not their whole product."""
    subs = spec.get("grids")
    if subs is None:
        return _one_grid(spec, traces, base)
    if not isinstance(subs, list) or not subs:
        raise InputError("must be a non-empty list of mappings", field="grids")
    cells: dict[str, Cell] = {}
    for k, sub in enumerate(subs):
        if not isinstance(sub, dict) or set(sub) - set(GRID_KEYS):
            raise InputError(f"each entry is a mapping of {', '.join(GRID_KEYS)}, got {sub!r}", field=f"grids[{k}]")
        try:
            for c in _one_grid({**spec, **sub}, traces, base):
                cells.setdefault(c.key, c)
        except InputError as e:
            raise InputError(e.reason, field=f"grids[{k}].{e.field}") from None
    return [cells[k] for k in sorted(cells)]


def _one_grid(spec: Mapping[str, Any], traces: Sequence[str], base: ReplayConfig) -> list[Cell]:
    policies = _list(spec, "policies", POLICIES)
    for p in policies:
        if p not in POLICIES:
            raise InputError(f"unknown policy {p!r} (one of {', '.join(POLICIES)})", field="policies")
    intervals = [_minutes(v, "intervals") for v in _list(spec, "intervals", [base.interval / 60])]
    afters = [_minutes(v, "pendingAfter") for v in _list(spec, "pendingAfter", [base.pending_after / 60])]
    larges = _list(spec, "pendingCards", [base.pending_cards])
    for n in larges:
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise InputError(f"a number of cards is an integer >= 0, got {n!r}", field="pendingCards")
    budgets = _list(spec, "budgets", [{}])
    for b in budgets:
        if not isinstance(b, dict):
            raise InputError(f"each budget is a maxPerRun mapping, got {b!r}", field="budgets")
    planners = _list(spec, "planners", [base.planner])
    seeds = _list(spec, "seeds", [0])
    for s in seeds:
        if isinstance(s, bool) or not isinstance(s, int) or not 0 <= s <= 2**31 - 1:
            raise InputError(f"a seed is an integer in 0..2^31-1, got {s!r}", field="seeds")
    cells: dict[str, Cell] = {}
    for trace in traces:
        for seed in seeds:
            for policy in policies:
                pending = policy == "pending"
                combos: Iterable[tuple[float, float, int, Any, str]] = (
                    [(base.interval, base.pending_after, 0, {}, base.planner)] if policy in STATIC else
                    [(i, a, n, b, pl) for i in intervals for a in (afters if pending else [base.pending_after])
                     for n in (larges if pending else [0]) for b in budgets for pl in planners])
                for interval, after, large, budget, planner in combos:
                    try:
                        cfg = replace(base, policy=policy, interval=interval, pending_after=after, max_per_run=budget,
                                      planner=planner, seed=seed, pending_cards=large)
                    except InputError as e:
                        field = {"planner": "planners", "policy": "policies"}.get(e.field or "", f"budgets: {e.field}")
                        raise InputError(e.reason, field=field) from None
                    cell = Cell(trace, seed, cfg)
                    cells.setdefault(cell.key, cell)
    return [cells[k] for k in sorted(cells)]


@functools.cache
def code_digest() -> str:
    """A hash of optplan's own source (every module of the package, by path and content): a cell run by
    another version of the code is not this code's result."""
    root = Path(__file__).resolve().parents[2]
    h = hashlib.sha256()
    for f in sorted(root.rglob("*.py")):
        h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def fingerprint(trace: Trace, cell: Cell) -> str:
    """What a cell's result depends on — its whole config, the trace (name, what was read, size) and the
    code (``code_digest``) — hashed: a results file row is reused only by a cell with the same fingerprint."""
    what = {"config": config_dict(cell.config), "trace": cell.trace, "stats": dict(trace.stats),
            "gangs": len(trace.gangs), "nodes": len(trace.nodes), "end": trace.end, "code": code_digest()}
    return hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()[:16]


def run_cell(trace: Trace, cell: Cell) -> dict[str, Any]:
    """One cell's row: its key, fingerprint, group, seed and summary metrics (deterministic)."""
    r = replay(trace, cell.config)
    return {"key": cell.key, "fingerprint": fingerprint(trace, cell), "group": cell.group, "trace": cell.trace,
            "seed": cell.seed,
            "policy": cell.config.policy, "label": cell.config.label(), "metrics": r.summary(),
            "repack": {k: v for k, v in sorted(r.repack.items())}}


# ---- executors ---------------------------------------------------------------------------------

TraceOf = Callable[[Cell], Trace]


@dataclass
class Outcome:
    rows: dict[str, dict[str, Any]]
    failed: dict[str, str]
    """key -> the last error, for cells that failed every attempt."""
    attempts: dict[str, int]


def _serial(cells: Sequence[Cell], trace_of: TraceOf, retries: int, done: Callable[[dict[str, Any]], None],
            out: Outcome) -> None:
    for c in cells:
        for attempt in range(retries + 1):
            out.attempts[c.key] = attempt + 1
            try:
                done(run_cell(trace_of(c), c))
                out.failed.pop(c.key, None)
                break
            except Exception as e:  # a failed cell is reported, the sweep goes on
                out.failed[c.key] = f"{type(e).__name__}: {e}"


def _pool(cells: Sequence[Cell], trace_of: TraceOf, retries: int, done: Callable[[dict[str, Any]], None],
          out: Outcome, workers: int) -> None:
    with ProcessPoolExecutor(max_workers=workers) as ex:
        running: dict[Future[dict[str, Any]], Cell] = {}
        for c in cells:
            out.attempts[c.key] = 1
            running[ex.submit(run_cell, trace_of(c), c)] = c
        while running:
            finished, _ = wait(list(running), return_when=FIRST_COMPLETED)
            for f in sorted(finished, key=lambda f: running[f].key):
                c = running.pop(f)
                try:
                    done(f.result())
                    out.failed.pop(c.key, None)
                except Exception as e:  # retried, then reported
                    out.failed[c.key] = f"{type(e).__name__}: {e}"
                    if out.attempts[c.key] <= retries:
                        out.attempts[c.key] += 1
                        running[ex.submit(run_cell, trace_of(c), c)] = c


def check_ray(address: str | None, timeout: float = 5.0) -> None:
    """Ray is installed and, for an address, its port answers (Ray itself would wait for minutes): an
    InputError otherwise, before any cell runs."""
    try:
        import ray  # noqa: F401
    except ImportError:
        raise InputError("Ray is not installed: pip install 'optplan[ray]'", field="--ray") from None
    if address is None or address == "auto":
        return
    hostport = address.split("://", 1)[-1]
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise InputError(f"expected HOST:PORT or ray://HOST:PORT, got {address!r}", field="--ray-address")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as e:
        raise InputError(f"cannot reach Ray at {address}: {e.strerror or e}", field="--ray-address") from None


def _ray(cells: Sequence[Cell], trace_of: TraceOf, retries: int, done: Callable[[dict[str, Any]], None],
         out: Outcome, address: str | None) -> None:
    try:
        import ray
    except ImportError:
        raise InputError("Ray is not installed: pip install 'optplan[ray]'", field="--ray") from None
    tries = CLIENT_TRIES if address is not None and address.startswith("ray://") else 1
    for attempt in range(1, tries + 1):
        try:
            ray.init(address=address, ignore_reinit_error=True, include_dashboard=False, log_to_driver=False,
                     logging_level=logging.ERROR)
            break
        except Exception as e:  # an unreachable address, a refused connection
            if attempt < tries:  # a client server on a busy head can fail to start its session in time
                log.warning("Ray client connection %d of %d failed (%s); trying again", attempt, tries,
                            str(e).splitlines()[0] if str(e) else type(e).__name__)
                time.sleep(CLIENT_PAUSE)
                continue
            raise InputError(f"cannot connect to Ray at {address or 'a new local instance'}: "
                             f"{str(e).splitlines()[0] if str(e) else type(e).__name__}",
                             field="--ray-address") from None
    try:
        task = ray.remote(max_retries=retries, retry_exceptions=True)(run_cell)
        refs: dict[Any, Cell] = {}
        puts: dict[str, Any] = {}
        for c in cells:
            out.attempts[c.key] = 1
            tr = trace_of(c)
            ref = puts.get(f"{c.trace}/{c.seed}")
            if ref is None:
                ref = puts[f"{c.trace}/{c.seed}"] = ray.put(tr)
            refs[task.remote(ref, c)] = c
        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for r in ready:
                c = refs[r]
                try:
                    done(ray.get(r))
                    out.failed.pop(c.key, None)
                except Exception as e:  # Ray retried it already
                    out.attempts[c.key] = retries + 1
                    out.failed[c.key] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    finally:
        if address is None:
            ray.shutdown()


def run_grid(cells: Sequence[Cell], trace_of: TraceOf, *, executor: str = "pool", workers: int = 1,
             retries: int = 2, ray_address: str | None = None, results_path: str | None = None,
             progress: ProgressFn | None = None) -> Outcome:
    """Run the cells not already in ``results_path`` (resume), appending each finished row to it."""
    if executor not in EXECUTORS:
        raise InputError(f"unknown executor {executor!r}", field="executor")
    out = Outcome(rows={}, failed={}, attempts={})
    if results_path is not None and os.path.exists(results_path):
        out.rows.update(read_results(results_path))
    prints = {c.key: fingerprint(trace_of(c), c) for c in cells}
    out.rows = {k: v for k, v in out.rows.items() if v.get("fingerprint") == prints.get(k)}
    todo = [c for c in cells if c.key not in out.rows]
    total = len(cells)

    def done(row: dict[str, Any]) -> None:
        out.rows[row["key"]] = row
        if results_path is not None:
            with open(results_path, "a", encoding="utf-8") as f:
                f.write(json.dumps(row, sort_keys=True) + "\n")
        if progress is not None:
            progress(len(out.rows), total)

    if progress is not None:
        progress(len(out.rows), total)
    if executor == "serial" or (executor == "pool" and workers <= 1):
        _serial(todo, trace_of, retries, done, out)
    elif executor == "pool":
        _pool(todo, trace_of, retries, done, out, workers)
    else:
        _ray(todo, trace_of, retries, done, out, ray_address)
    return out


def read_results(path: str) -> dict[str, dict[str, Any]]:
    """Rows of a results file by key (a torn last line, from a sweep killed while writing, is ignored)."""
    rows: dict[str, dict[str, Any]] = {}
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if isinstance(row, dict) and isinstance(row.get("key"), str):
                    rows[row["key"]] = row
    except OSError as e:
        raise InputError(f"cannot read results ({e.strerror or e})", file=path) from None
    return rows


# ---- statistics --------------------------------------------------------------------------------

def mean_ci(values: Sequence[float]) -> dict[str, Any]:
    """Mean and 95% half-width over seeds (None with one value)."""
    n = len(values)
    if n == 0:
        return {"n": 0, "mean": None, "ci95": None}
    m = sum(values) / n
    if n == 1:
        return {"n": 1, "mean": round(m, 6), "ci95": None}
    s = math.sqrt(sum((v - m) ** 2 for v in values) / (n - 1))
    t = _T975[n - 2] if n - 1 <= len(_T975) else 1.96
    return {"n": n, "mean": round(m, 6), "ci95": round(t * s / math.sqrt(n), 6)}


def aggregate(rows: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per group: each metric's mean and CI over seeds, and its paired difference from ``none``."""
    by_group: dict[str, list[Mapping[str, Any]]] = {}
    for k in sorted(rows):
        by_group.setdefault(rows[k]["group"], []).append(rows[k])
    none = {(r["trace"], r["seed"]): r for r in rows.values() if r["policy"] == "none"}
    ceiling = {(r["trace"], r["seed"]): r for r in rows.values() if r["policy"] == ORACLE}
    out = []
    for group, members in sorted(by_group.items()):
        entry: dict[str, Any] = {"group": group, "trace": members[0]["trace"], "policy": members[0]["policy"],
                                 "seeds": sorted(r["seed"] for r in members), "metrics": {}, "vsNone": {}}
        for m in METRICS:
            vals = [r["metrics"][m] for r in members if r["metrics"].get(m) is not None]
            entry["metrics"][m] = mean_ci(vals)
            if members[0]["policy"] != "none":
                diffs = [r["metrics"][m] - none[(r["trace"], r["seed"])]["metrics"][m] for r in members
                         if (r["trace"], r["seed"]) in none and r["metrics"].get(m) is not None
                         and none[(r["trace"], r["seed"])]["metrics"].get(m) is not None]
                entry["vsNone"][m] = mean_ci(diffs)
        entry["vsOracle"] = oracle_shares(members, none, ceiling) if ceiling else {}
        out.append(entry)
    return out


def oracle_shares(members: Sequence[Mapping[str, Any]], none: Mapping[tuple[str, int], Mapping[str, Any]],
                  ceiling: Mapping[tuple[str, int], Mapping[str, Any]]) -> dict[str, Any]:
    """Per ``oracle.SHARE_METRICS``: the share of the oracle's gain over ``none`` (``oracle.shares``) on each
    trace and seed that has both, then its mean and 95% interval over seeds."""
    per: dict[str, list[float]] = {m: [] for m in SHARE_METRICS}
    for r in members:
        key = (r["trace"], r["seed"])
        if key not in none or key not in ceiling:
            continue
        for m, v in shares(r["metrics"], none[key]["metrics"], ceiling[key]["metrics"]).items():
            if v is not None:
                per[m].append(v)
    return {m: mean_ci(vs) for m, vs in per.items()}


def _fmt(s: Mapping[str, Any], digits: int = 2, sign: bool = False) -> str:
    if s.get("mean") is None:
        return "-"
    v = f"{s['mean']:+.{digits}f}" if sign else f"{s['mean']:.{digits}f}"
    return v if s.get("ci95") is None else f"{v} ± {s['ci95']:.{digits}f}"


def _share(entry: Mapping[str, Any], metric: str) -> str:
    s = entry.get("vsOracle", {}).get(metric)
    if not s or s.get("mean") is None:
        return "-"
    return f"{s['mean']:.0f}%" if s.get("ci95") is None else f"{s['mean']:.0f}% ± {s['ci95']:.0f}"


def markdown(table: Sequence[Mapping[str, Any]], outcome: Outcome, cells: int, command: str,
             shared: Mapping[str, Any] | None = None) -> str:
    """The sweep's report: the table of groups, the frontier (``frontier_markdown``), failed cells;
    ``shared``: the settings every cell shares (the sweep file's, filled in), echoed under the command."""
    echo = "" if not shared else "Shared settings: " + ", ".join(f"{k} {json.dumps(v, sort_keys=True)}"
                                                                  for k, v in sorted(shared.items())) + "."
    lines = ["# Replay sweep", "", f"{cells} cells, {len(outcome.rows)} done, {len(outcome.failed)} failed. "
             "Mean ± 95% confidence half-width over seeds (Student's t); vs none: the paired difference from "
             "`none` on the same trace and seed. Useful GPU %: pods doing work they keep; lost: restore and "
             "work a restart threw away; wait p95: Kaplan-Meier, over the seeds where censoring does not hide it; "
             "8-card wait and completion: the Kaplan-Meier restricted mean; share of the oracle's gain: "
             "(policy − none) / (oracle − none) per trace and seed (with `oracle` in the grid), then its mean ± 95% "
             "half-width.",
             "", f"Reproduce: `{command}`" + (f". {echo}" if echo else ""), "",
             "| trace / policy / planner / budget | seeds | useful GPU % | vs none (points) | lost % | "
             "censored gangs | wait p95 (min) | wait p95 8-card (min) | cards disrupted / day | vs none | "
             "8-card wait mean (min) | 8-card completion mean (min) | share of the oracle's gain: useful GPU % | "
             "8-card wait mean | 8-card completion mean | GPU-hours lost to restarts % |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for e in table:
        m, d = e["metrics"], e["vsNone"]
        lines.append(f"| {e['group']} | {len(e['seeds'])} | {_fmt(m['usefulPercent'])} | "
                     f"{_fmt(d['usefulPercent'], sign=True) if d else '-'} | {_fmt(m['lostPercent'])} | "
                     f"{_fmt(m['censoredGangs'], 1)} | {_fmt(m['waitP95Minutes'], 1)} | "
                     f"{_fmt(m['waitP95Minutes8'], 1)} | {_fmt(m['cardsDisruptedPerDay'], 1)} | "
                     f"{_fmt(d['cardsDisruptedPerDay'], 1, sign=True) if d else '-'} | "
                     f"{_fmt(m['waitMeanMinutes8'], 1)} | {_fmt(m['completionMeanMinutes8'], 1)} | "
                     f"{_share(e, 'usefulPercent')} | {_share(e, 'waitMeanMinutes8')} | "
                     f"{_share(e, 'completionMeanMinutes8')} | {_fmt(m['restartGpuHoursPercent'], 3)} |")
    fr = frontier(table)
    if any(fr.values()):
        lines.append(frontier_markdown(table, fr).rstrip("\n"))
    if outcome.failed:
        lines += ["", "## Failed cells", ""]
        lines += [f"- {k} ({outcome.attempts.get(k, 1)} attempts): {v}" for k, v in sorted(outcome.failed.items())]
    return "\n".join(lines) + "\n"


# ---- the frontier ------------------------------------------------------------------------------

BENEFITS = {"completionMeanMinutes8": -1, "usefulPercent": 1}
"""The frontier's benefits (summary metrics, ``METRICS``) with their sense: -1 lower is better (8-card
gangs' Kaplan-Meier restricted mean completion time), 1 higher is better (useful GPU %)."""
DISRUPTIONS = ("cardsDisruptedPerDay", "restartGpuHoursPercent")
"""The frontier's costs, lower is better: cards restarted per day, GPU-hours lost to restarts (%)."""
OFF_FRONTIER = (ORACLE, NOBINPACK)
"""Reference points, never on the frontier: the ceiling estimate (free repacking) and Volcano without binpack."""


def _mean(entry: Mapping[str, Any], metric: str) -> float | None:
    v = entry["metrics"].get(metric, {}).get("mean")
    return None if v is None else float(v)


def pareto(points: Sequence[tuple[str, float, float]]) -> list[str]:
    """Names of the non-dominated points of ``(name, benefit, cost)`` (benefit higher and cost lower are
    better; a point is dominated by one at least as good on both and better on one), lowest cost first."""
    out = [(c, -b, n) for n, b, c in points
           if not any(b2 >= b and c2 <= c and (b2 > b or c2 < c) for _, b2, c2 in points)]
    return [n for _, _, n in sorted(out)]


def setting(group: str) -> str:
    """A group (``Cell.group``) without its trace: the setting an operator picks."""
    return group.split(" / ", 1)[1] if " / " in group else group


def planner_of(entry: Mapping[str, Any]) -> str | None:
    """The planner of an aggregated group (``Cell.group``'s third part; None for ``STATIC`` policies)."""
    parts = entry["group"].split(" / ")
    return None if entry["policy"] in STATIC or len(parts) < 3 else parts[2]


def frontier(table: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, list[str]]]:
    """Per trace, per ``BENEFIT vs DISRUPTION`` pair: the groups on the Pareto frontier of the means over
    seeds (the settings an operator chooses from), lowest disruption first. ``none`` is its zero-disruption
    end; ``OFF_FRONTIER`` policies are left out. Means only: two points closer than their intervals are
    told apart all the same (the table gives the intervals)."""
    out: dict[str, dict[str, list[str]]] = {}
    for trace in sorted({e["trace"] for e in table}):
        mine = [e for e in table if e["trace"] == trace and e["policy"] not in OFF_FRONTIER]
        pairs: dict[str, list[str]] = {}
        for b, sense in BENEFITS.items():
            for d in DISRUPTIONS:
                pts = [(e["group"], sense * bv, dv) for e in mine
                       if (bv := _mean(e, b)) is not None and (dv := _mean(e, d)) is not None]
                pairs[f"{b} vs {d}"] = pareto(pts)
        out[trace] = pairs
    return out


def frontier_panels(table: Sequence[Mapping[str, Any]], fr: Mapping[str, Mapping[str, list[str]]],
                    trace: str) -> list[dict[str, Any]]:
    """What ``plots.frontier`` draws for one trace: per pair, every group's point (setting, policy, planner,
    disruption, benefit, on the frontier or not) and the oracle's benefit (a reference line)."""
    mine = [e for e in table if e["trace"] == trace]
    oracle = next((e for e in mine if e["policy"] == ORACLE), None)
    panels = []
    for b in BENEFITS:
        for d in DISRUPTIONS:
            on = fr.get(trace, {}).get(f"{b} vs {d}", [])
            pts = [{"setting": setting(e["group"]), "policy": e["policy"], "planner": planner_of(e),
                    "x": _mean(e, d), "y": _mean(e, b), "frontier": e["group"] in on}
                   for e in mine if e["policy"] not in OFF_FRONTIER]
            panels.append({"benefit": b, "disruption": d, "points": [p for p in pts if None not in (p["x"], p["y"])],
                           "frontier": [setting(g) for g in on],
                           "oracle": None if oracle is None else _mean(oracle, b)})
    return panels


def frontier_markdown(table: Sequence[Mapping[str, Any]], fr: Mapping[str, Mapping[str, list[str]]]) -> str:
    """The sweep's frontier section: per trace, the settings on some frontier with the four axes and the
    pairs they are on (C: 8-card completion mean, U: useful GPU %; cards: cards restarted / day, lost:
    GPU-hours lost to restarts)."""
    short = {"completionMeanMinutes8": "C", "usefulPercent": "U", "cardsDisruptedPerDay": "cards",
             "restartGpuHoursPercent": "lost"}
    lines = ["", "## The frontier", "",
             "Settings on the Pareto frontier of benefit (C: 8-card gangs' mean completion time, Kaplan-Meier "
             "restricted mean, lower is better; U: useful GPU %) against disruption (cards: cards restarted per day; "
             "lost: GPU-hours lost to restarts, %), on the means over seeds; `none` is the zero-disruption end, "
             "`oracle` (a ceiling estimate) and `nobinpack` are left out. Mean ± 95% half-width."]
    for trace, pairs in sorted(fr.items()):
        groups = sorted({g for gs in pairs.values() for g in gs})
        lines += ["", f"### {trace}", "",
                  "| setting | seeds | 8-card completion mean (min) | useful GPU % | cards restarted / day | "
                  "GPU-hours lost % | share of the oracle's gain: 8-card completion mean | on the frontier of |",
                  "|---|---|---|---|---|---|---|---|"]
        by = {e["group"]: e for e in table}
        for g in sorted(groups, key=lambda g: (_mean(by[g], "cardsDisruptedPerDay") or 0, g)):
            e, m = by[g], by[g]["metrics"]
            where = ", ".join(f"{short[k.split(' vs ')[0]]}×{short[k.split(' vs ')[1]]}"
                              for k, gs in pairs.items() if g in gs)
            lines.append(f"| {setting(g)} | {len(e['seeds'])} | {_fmt(m['completionMeanMinutes8'], 1)} | "
                         f"{_fmt(m['usefulPercent'])} | {_fmt(m['cardsDisruptedPerDay'], 1)} | "
                         f"{_fmt(m['restartGpuHoursPercent'], 3)} | {_share(e, 'completionMeanMinutes8')} | {where} |")
    return "\n".join(lines) + "\n"
