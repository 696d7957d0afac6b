"""The FGD paper's allocation table reproduced like for like (``shared``): every openb workload × seeds ×
policies, each run on the paper's cluster: openb's GPU nodes (``openb_node_list_gpu_node.csv``: 1,213 nodes,
6,212 GPUs; the simulator's artifact copies only the GPU nodes' list into every trace's input, the 310
cpu-only nodes of ``openb_node_list_all_node.csv`` are not there) with the workload built as the paper's
simulator builds it (``online.fgd_workload(..., every_pod=True)``, 130%), the GPU allocation ratio at the end
per run; per (workload, policy) the mean over seeds and its 95% interval (Student's t on the seeds), the wall
time per run, and the paper's published mean beside it (``fgd-expected/alloc_at_130pct_summary.txt``: mean of
seeds 42..51).

Runs are appended, one JSON line each, to a cache file when one is given, and read back from it: a long
table can be stopped and resumed, and the bench's report rebuilt without running again.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from optplan.adapters.openb import read_nodes, read_pods
from optplan.errors import InputError
from optplan.experiments.sim import shared
from optplan.experiments.sim.online import SimNode, SimPod, fgd_workload
from optplan.solvers.core import registry

NODES = Path("openb") / "openb_node_list_gpu_node.csv"
PUBLISHED = Path("fgd-expected") / "alloc_at_130pct_summary.txt"
PERCENT = 130.0
PAPER_SEEDS = tuple(range(42, 52))
WORKLOADS = ("default", "cpu050", "cpu100", "cpu200", "cpu250", "gpushare40", "gpushare60", "gpushare80",
             "gpushare100", "gpuspec10", "gpuspec20", "gpuspec25", "gpuspec33", "multigpu20", "multigpu30",
             "multigpu40", "multigpu50")
"""The paper's table's 17 workloads (``openb_pod_list_<name>.csv``), the default trace first."""
PAPER_COLUMNS = {"01-Random": "random", "02-DotProd": "dotprod", "03-GpuClustering": "gpu-clustering",
                 "04-GpuPacking": "gpu-packing", "05-BestFit": "best-fit", "06-FGD": "fgd"}
"""The summary's column per peer."""
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045,
         2.042)
"""Student's t 97.5% quantile for 1..30 degrees of freedom (1.96 beyond)."""

ProgressFn = Callable[[str], None]


def published(path: Path) -> dict[str, dict[str, float]]:
    """The paper's mean allocation (%) per workload (``openb_pod_list_`` dropped) and policy (our names)."""
    out: dict[str, dict[str, float]] = {}
    header: list[str] = []
    for line in path.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        cells = [c.strip() for c in line.split(",")]
        if cells[0] == "workload":
            header = [PAPER_COLUMNS.get(c, c) for c in cells]
            continue
        if not header:
            raise InputError("no header row (workload,01-Random,...)", file=str(path))
        out[cells[0].removeprefix("openb_pod_list_")] = {h: float(c) for h, c in zip(header[1:], cells[1:],
                                                                                     strict=True)}
    return out


def interval(values: Sequence[float]) -> tuple[float, float]:
    """Mean and the half-width of its 95% interval (Student's t; 0 for one value)."""
    m = statistics.fmean(values)
    if len(values) < 2:
        return m, 0.0
    t = _T975[len(values) - 2] if len(values) - 1 <= len(_T975) else 1.96
    return m, t * statistics.stdev(values) / math.sqrt(len(values))


def _cached(cache: Path | None) -> dict[tuple[str, int, str], dict[str, Any]]:
    if cache is None or not cache.is_file():
        return {}
    runs = {}
    for line in cache.read_text().splitlines():
        if line.strip():
            r = json.loads(line)
            runs[r["workload"], r["seed"], r["policy"]] = r
    return runs



def read_sim_nodes(path: Path) -> list[SimNode]:
    """An openb node list as the simulator's nodes."""
    return [SimNode(n.name, n.cpu, n.memory, n.gpu, n.model) for n in read_nodes(str(path))]


def read_sim_pods(path: Path) -> list[SimPod]:
    """An openb pod list as the simulator's pods, in the file's order."""
    return [SimPod(p.name, p.cpu, p.memory, p.gpu, p.gpu_milli, p.models) for p in read_pods(str(path))]

def run_table(data: Path, workloads: Sequence[str], seeds: Sequence[int], policies: Sequence[str],
              cache: Path | None = None, progress: ProgressFn | None = None) -> dict[str, Any]:
    """Every run of the table (cached ones read back), then the per-(workload, policy) rows."""
    for p in policies:
        if p not in registry.names(shared.FAMILY):
            raise InputError(f"unknown policy {p!r} (one of {', '.join(registry.names(shared.FAMILY))})",
                             field="policies")
    nodes = read_sim_nodes(data / NODES)
    gpus = sum(n.gpu for n in nodes)
    runs = _cached(cache)
    for wl in workloads:
        todo = [(s, p) for s in seeds for p in policies if (wl, s, p) not in runs]
        if not todo:
            continue
        trace = read_sim_pods(data / "openb" / f"openb_pod_list_{wl}.csv")
        target = shared.target_workload(trace)
        streams: dict[int, list[SimPod]] = {}
        for seed, policy in todo:
            if seed not in streams:
                streams = {seed: fgd_workload(trace, gpus, PERCENT, seed, every_pod=True)}
            res = shared.simulate(nodes, streams[seed], policy, target, shared.SharedConfig(seed=seed))
            row = {"workload": wl, "seed": seed, "policy": policy, "arrivals": len(streams[seed]),
                   "allocPercent": round(res.alloc_percent, 4), "rejected": res.rejected,
                   "wallSeconds": res.wall_seconds}
            runs[wl, seed, policy] = row
            if cache is not None:
                with cache.open("a") as fh:
                    fh.write(json.dumps(row) + "\n")
            if progress is not None:
                progress(f"{wl} seed {seed} {policy}: {row['allocPercent']:.2f}% in {res.wall_seconds:.1f} s")
    paper = published(data / PUBLISHED) if (data / PUBLISHED).is_file() else {}
    rows = []
    for wl in workloads:
        for p in policies:
            got = [runs[wl, s, p] for s in seeds if (wl, s, p) in runs]
            if not got:
                continue
            mean, half = interval([r["allocPercent"] for r in got])
            pub = paper.get(wl, {}).get(p)
            rows.append({"workload": wl, "policy": p, "seeds": len(got), "allocPercent": round(mean, 2),
                         "ci95": round(half, 2), "paperPercent": pub,
                         "diff": round(mean - pub, 2) if pub is not None else None,
                         "wallSeconds": round(statistics.fmean(r["wallSeconds"] for r in got), 2)})
    return {"nodes": len(nodes), "gpus": gpus, "percent": PERCENT, "seeds": list(seeds),
            "policies": list(policies), "workloads": list(workloads), "rows": rows}


def report(tab: dict[str, Any], md: Callable[[Sequence[str], list[list[Any]]], str]) -> list[str]:
    """Markdown: one table per workload (policy, mean ± 95% interval, paper, difference, wall s per run), then
    the margin of the best optplan policy over FGD per workload."""
    parts = [f"Cluster: openb, {tab['nodes']:,} nodes, {tab['gpus']:,} GPUs. Workload per trace: every pod "
             f"(whole-GPU, shared-GPU, cpu-only), shuffled and topped up until the GPU requests reach "
             f"{tab['percent']:g}% of the GPUs, as the FGD simulator builds it; seeds "
             f"{', '.join(str(s) for s in tab['seeds'])}. GPU allocation % at the end: mean ± half-width of the "
             "95% interval over the seeds; `paper`: the FGD paper's mean over its seeds 42..51.\n"]
    by: dict[str, list[dict[str, Any]]] = {}
    for r in tab["rows"]:
        by.setdefault(r["workload"], []).append(r)
    margin_rows = []
    for wl, rows in by.items():
        parts.append(f"### {wl}\n")
        parts.append(md(["policy", "GPU alloc %", "± 95%", "seeds", "paper", "ours − paper", "wall s per run"],
                        [[r["policy"], f"{r['allocPercent']:.2f}", f"{r['ci95']:.2f}", r["seeds"],
                          r["paperPercent"], r["diff"], r["wallSeconds"]] for r in rows]))
        fgd = next((r for r in rows if r["policy"] == "fgd"), None)
        own = [r for r in rows if r["policy"] not in PAPER_COLUMNS.values()]
        for kind, group in (("places every pod that fits", [r for r in own if r["policy"] not in shared.HOLDS]),
                            ("holds pods back", [r for r in own if r["policy"] in shared.HOLDS])):
            if fgd is not None and group:
                best = max(group, key=lambda r: r["allocPercent"])
                margin_rows.append([wl, kind, best["policy"], f"{best['allocPercent'] - fgd['allocPercent']:+.2f}",
                                    f"{best['allocPercent'] - fgd['paperPercent']:+.2f}" if fgd["paperPercent"]
                                    else None])
    if margin_rows:
        parts.append("### optplan's best policy over FGD\n")
        parts.append("`places every pod that fits`: each pod on arrival or by the end of its batch, as FGD; `holds "
                     "pods back`: `frag-admit` refuses, and `frag-defer` keeps waiting, shares that fit (module "
                     "docstring of `sim.shared`).\n")
        parts.append(md(["workload", "policy kind", "policy", "over our FGD", "over the paper's FGD"], margin_rows))
    return parts
