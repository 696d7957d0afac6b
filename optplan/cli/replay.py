"""``optplan replay``: replay a GPU trace with Volcano's allocate and a Repack policy, or a sweep of such
replays (``--sweep``); files in the output directory.

The trace is read here, with the openb importer's readers (``adapters.openb``: the same columns, checks
and one-line errors), and turned into the replay family's ``Trace``: whole-GPU pods (``num_gpu`` >= 1,
``gpu_milli`` = 1000) with a ``scheduled_time`` and a ``deletion_time`` (the others are counted and left
out: a pod never scheduled in the trace has no runtime), runtime = deletion − scheduled (negative: an
input error), cut into gangs as the importer cuts them (``cut_gangs``: runs of one shape, seeded sizes,
minMember = max(1, ceil(ratio × size))), with two more rules: a gang's pods are created at most
``--gang-spread`` seconds after its first (default 60: a VCJob creates its pods together; on gpuspec33 runs
of one shape hold pods created hours apart; measured before ``--speedup``), and pods of different
``--repeat`` passes never share a gang. ``--speedup F`` divides creation times by F and keeps runtimes, so
the same jobs arrive F times as fast; ``--repeat K`` plays the trace K times back to back (pass k's
pods named ``<name>-r<k>``, created k − 1 trace spans later, as the importer's passes). The openb traces'
own times keep fewer than 60 of 6,212 GPUs busy at once. ``--times-from TIMES.csv`` takes every pod's
times from another trace by pod name (``trace.borrow_times``; ``--unmatched-times`` for pods it does not
name), for pod lists without time columns such as openb's ``multigpu*``. ``--shared`` keeps the
fractional pods too (``num_gpu`` = 1, ``gpu_milli`` < 1000), as ``optplan import openb --shared`` does: each
a share of one GPU, placed at device level (``experiments.replay.cluster``); not with the ``oracle`` policy,
``--sweep`` or ``--throttle``, which count whole cards only.

All input (trace, flags, sweep file) is checked before anything runs, and the output files are written
only at the end, each atomically: bad input writes nothing.
"""

from __future__ import annotations

import argparse
import math
import os
from dataclasses import replace
from fractions import Fraction
from pathlib import Path
from typing import Any

from optplan.adapters import openb
from optplan.adapters.output import write_atomic
from optplan.cli import options
from optplan.cli.options import int_in, positive_float
from optplan.errors import InputError
from optplan.experiments.bench import Progress
from optplan.experiments.replay import report, sweep, tenants
from optplan.experiments.replay.config import PLANNERS, POLICIES, RESOURCE, RESTARTS, ReplayConfig
from optplan.experiments.replay.engine import ReplayResult, replay
from optplan.experiments.replay.trace import UNMATCHED, PodShape, PodTimes, Trace, TraceGang, TracePod, borrow_times
from optplan.experiments.sim.online import SimNode

TIME_COLUMNS = ("name", "creation_time", "scheduled_time", "deletion_time")
GANG_SPREAD = 60.0
"""Seconds between the creation of a gang's first and last pod, at most (module docstring)."""


# ---- the trace ---------------------------------------------------------------------------------

def _shape(p: openb.PodRow) -> PodShape:
    return p.cpu, p.memory, p.gpu, p.gpu_milli


def read_times(path: str, pods: list[openb.PodRow] | None = None) -> dict[str, tuple[PodShape, PodTimes]]:
    """Every pod of a trace with its shape and times (``pods``: the file's pods, read already)."""
    pods = openb.read_pods(path) if pods is None else pods
    by_name = {p.name: p for p in pods}
    out: dict[str, tuple[PodShape, PodTimes]] = {}
    for line, row in openb.csv_rows(path, TIME_COLUMNS):
        p = by_name[row["name"].strip()]
        if not row["scheduled_time"].strip() or not row["deletion_time"].strip():
            out[p.name] = (_shape(p), PodTimes(p.created, None, None))
            continue
        scheduled = openb.int_field(path, line, row, "scheduled_time")
        deleted = openb.int_field(path, line, row, "deletion_time")
        if deleted < scheduled:
            raise InputError(f"negative runtime: deletion_time {deleted} is before scheduled_time {scheduled}",
                             file=path, obj=f"line {line}", field="deletion_time")
        out[p.name] = (_shape(p), PodTimes(p.created, scheduled, deleted))
    return out


def read_qos(path: str) -> dict[str, str]:
    """Each pod's ``qos`` column (what ``--queues`` maps by); {} when the file has none."""
    out: dict[str, str] = {}
    for _line, row in openb.csv_rows(path, ("name",)):
        if "qos" not in row:
            return {}
        out[row["name"].strip()] = (row["qos"] or "").strip()
    return out


def load_trace(nodes_csv: str, pods_csv: str, *, seed: int = 0, speedup: float = 1.0, repeat: int = 1,
               gang_sizes: tuple[tuple[int, float], ...] | None = None, min_member_ratio: float | None = None,
               name: str | None = None, times_from: str | None = None, unmatched: str = "drop",
               gang_spread: float | None = GANG_SPREAD, shared: bool = False) -> Trace:
    """The trace of the two CSV files (see the module docstring); InputError naming file, line and column.
    ``times_from``: take every pod's times from this trace instead, by name (``trace.borrow_times``, with
    ``unmatched`` for pods it does not name); ``pods_csv`` then needs no time columns. ``shared``: the
    fractional pods too, as shares."""
    if not (math.isfinite(speedup) and speedup > 0):
        raise InputError(f"must be a positive number, got {speedup}", field="speedup")
    if not 1 <= repeat <= 1000:
        raise InputError(f"must be within 1..1000, got {repeat}", field="repeat")
    if unmatched not in UNMATCHED:
        raise InputError(f"unknown choice {unmatched!r} (one of {', '.join(UNMATCHED)})", field="--unmatched-times")
    base = openb.ImportConfig()
    cfg = openb.ImportConfig(seed=seed, gang_sizes=gang_sizes or base.gang_sizes,
                             min_member_ratio=base.min_member_ratio if min_member_ratio is None else min_member_ratio)
    node_rows = openb.read_nodes(nodes_csv)
    rows = openb.read_pods(pods_csv)
    read = len(rows)
    borrowed: dict[str, int] = {}
    if times_from is None:
        times = {n: t for n, (_, t) in read_times(pods_csv, rows).items()}
    else:
        times, borrowed = borrow_times([(p.name, _shape(p)) for p in rows], read_times(times_from), unmatched)
        rows = sorted((replace(p, created=times[p.name].created) for p in rows if p.name in times),
                      key=lambda p: (p.created, p.name))
    runtime = {n: float(t.deleted - t.scheduled) for n, t in times.items()
               if t.scheduled is not None and t.deleted is not None}
    whole = [p for p in rows if p.gpu >= 1 and p.gpu_milli == 1000]
    shares = [p for p in rows if p.gpu == 1 and 0 < p.gpu_milli < 1000] if shared else []
    kept = [p for p in rows if p.name in runtime and ((p.gpu >= 1 and p.gpu_milli == 1000)
                                                      or (shared and p.gpu == 1 and 0 < p.gpu_milli < 1000))]
    span = max((p.created for p in kept), default=0) + 1
    if gang_spread is not None and not (math.isfinite(gang_spread) and gang_spread >= 0):
        raise InputError(f"must be a number of seconds >= 0, got {gang_spread}", field="--gang-spread")
    placed = [openb.PlacedPod(p, p.name if k == 0 else f"{p.name}-r{k + 1}", -1, p.created + k * span)
              for k in range(repeat) for p in kept]
    passes = {pp.name: k for k in range(repeat) for pp in placed[k * len(kept):(k + 1) * len(kept)]}
    ratio = Fraction(str(cfg.min_member_ratio))
    qos = read_qos(pods_csv)
    gangs = []
    spread = None if gang_spread is None else math.floor(gang_spread)
    for k, gang in enumerate(openb.cut_gangs(cfg, placed, spread, lambda pp: passes[pp.name])):
        first = gang[0].pod
        pods = tuple(TracePod(member.name, runtime[member.pod.name]) for member in gang)
        gangs.append(TraceGang(name=f"job-{k + 1:05d}", created=gang[0].created / speedup, cpu=first.cpu,
                               memory=first.memory, gpu=first.gpu, models=first.models,
                               min_member=max(1, math.ceil(ratio * len(gang))), pods=pods, milli=first.gpu_milli,
                               qos=qos.get(first.name, "")))
    nodes = tuple(SimNode(n.name, n.cpu, n.memory, n.gpu, n.model) for n in node_rows)
    stats = {"tracePods": read, "wholeGpuPods": len(whole),
             **({"sharedGpuPods": len(shares)} if shared else {}),
             "leftOutUnscheduled": len(whole) + len(shares) - len(kept),
             "fractionalLeftOut": sum(1 for p in rows if p.gpu >= 1 and p.gpu_milli < 1000) - len(shares),
             "cpuOnlyLeftOut": sum(1 for p in rows if p.gpu == 0), "speedup": speedup, "repeat": repeat,
             "seed": seed, **({} if gang_spread is None else {"gangSpreadSeconds": gang_spread}), **borrowed}
    return Trace(name=name or Path(pods_csv).stem, nodes=nodes, gangs=tuple(gangs), stats=stats)


# ---- arguments ---------------------------------------------------------------------------------

def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--nodes", metavar="NODES.csv", help="node list: sn,cpu_milli,memory_mib,gpu,model")
    p.add_argument("--pods", metavar="PODS.csv",
                   help="pod list with name,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time,scheduled_time,"
                        "deletion_time (and optionally gpu_spec)")
    p.add_argument("--times-from", metavar="TIMES.csv",
                   help="take each pod's creation, scheduled and deletion times from this trace, by pod name "
                        "(for pod lists without times, e.g. openb multigpu50 with the default list)")
    p.add_argument("--unmatched-times", default="drop", choices=UNMATCHED, metavar="WHAT",
                   help="with --times-from, a pod it does not name: drop (counted) or shape (the times of a pod "
                        "of the same shape there, in turn); default drop")
    p.add_argument("--speedup", type=positive_float, default=1.0, metavar="F",
                   help="arrivals F times as fast, runtimes kept (default 1)")
    p.add_argument("--repeat", type=int_in(1, 1000), default=1, metavar="K",
                   help="play the trace K times back to back (default 1; passes never share a gang)")
    p.add_argument("--gang-spread", type=float, default=GANG_SPREAD, metavar="SECONDS",
                   help="a gang's pods are created at most this long after its first (default 60)")
    p.add_argument("--shared", action="store_true",
                   help="keep the fractional-GPU pods too, each a share of one GPU placed at device level (as "
                        "import openb --shared); not with the oracle policy, --sweep or --throttle")
    p.add_argument("--policy", default="none", metavar="LIST",
                   help=f"comma-separated Repack policies to replay and compare ({', '.join(POLICIES)}; default none)")
    p.add_argument("--interval", type=positive_float, default=60.0, metavar="MINUTES",
                   help="interval: minutes between Repack runs; pending: the cooldown (default 60)")
    p.add_argument("--pending-after", type=positive_float, default=30.0, metavar="MINUTES",
                   help="pending: Repack once a gang has waited by fragmentation this long (default 30)")
    p.add_argument("--pending-cards", type=int_in(0, 2**31 - 1), default=0, metavar="N",
                   help="pending: only gangs of at least N cards in all trigger it (default 0: any gang)")
    p.add_argument("--planner", default="greedy", metavar="NAME", help=f"one of {', '.join(PLANNERS)} (default greedy)")
    p.add_argument("--max-pod-groups", type=int_in(0, 2**31 - 1), metavar="N", help="maxPerRun.podGroups")
    p.add_argument("--max-cards", type=int_in(0, 2**31 - 1), metavar="N", help=f"maxPerRun.resources[{RESOURCE}]")
    p.add_argument("--scope", metavar="SCOPE.json",
                   help="the RepackRun's spec.scope as a JSON or YAML file (podGroups / nodes)")
    p.add_argument("--restart-delay", type=float, default=300.0, metavar="SECONDS",
                   help="restore time: seconds a restarted pod holds its node before it works again (default 300)")
    p.add_argument("--restart", default="RestartJob", metavar="POLICY",
                   help=f"the workloads' restart policy, what a move restarts: {', '.join(RESTARTS)} "
                        "(default RestartJob: the moved pod's whole gang)")
    p.add_argument("--checkpoint-minutes", type=float, default=60.0, metavar="M",
                   help="minutes of work between a pod's checkpoints; a restart loses the work since the last "
                        "one (default 60; 0: nothing lost; 'none' is not a number: use --no-checkpoint)")
    p.add_argument("--no-checkpoint", action="store_true", help="pods never checkpoint: a restart loses all their work")
    p.add_argument("--warmup-hours", type=float, default=0.0, metavar="H",
                   help="the measured window starts this long after the first arrival (default 0)")
    options.time_limit(p, 10.0, "limit of each plan, counted in deterministic work (default 10)")
    p.add_argument("--horizon-hours", type=positive_float, metavar="H",
                   help="stop at this trace time, in hours from the trace's time 0 (default: the last event, "
                        "when the last pod leaves)")
    options.seed(p, "gang sizes and planner seed (default 0)")
    options.timings(p, "also report planning wall seconds (output then differs from run to run)")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.add_argument("--sweep", metavar="SWEEP.yaml", help="run the grid this file describes (see docs/replay.md)")
    p.add_argument("--workers", type=int_in(1, 256), default=os.cpu_count() or 1, metavar="N",
                   help="sweep, throttle: local worker processes (default: the CPUs)")
    p.add_argument("--ray", action="store_true", help="sweep: run the cells on a local Ray instance")
    p.add_argument("--ray-address", metavar="ADDR", help="sweep: run the cells on this Ray cluster (ray://host:10001)")
    p.add_argument("--retries", type=int_in(0, 10), default=2, metavar="N", help="sweep: retries of a failed cell")
    p.add_argument("--throttle", action="store_true",
                   help="replay the preempt window with priorities, with and without the large-job submission "
                        "throttle, over seeds (see docs/replay.md); writes throttle.md and throttle.json")
    p.add_argument("--throttle-seeds", type=int_in(1, 1000), default=5, metavar="K",
                   help="throttle: seeds SEED..SEED+K-1 (default 5)")
    p.add_argument("--cycle-seconds", type=float, default=1.0, metavar="S",
                   help="throttle: seconds between scheduling cycles (default 1, Volcano's schedulePeriod)")
    p.add_argument("--grace-seconds", type=float, default=30.0, metavar="S",
                   help="throttle: a victim frees its cards within this many seconds of its eviction (default 30)")
    p.add_argument("--throttle-timeout", type=float, default=300.0, metavar="S",
                   help="throttle: the waiting mode ends this long after it began (default 300)")
    p.add_argument("--large-cards", type=int_in(1, 1_000_000), default=8, metavar="N",
                   help="throttle, queues: gangs of at least N GPUs are large jobs, P800 (default 8)")
    p.add_argument("--debug-share", type=float, default=0.2, metavar="F",
                   help="throttle, queues: share of the other gangs (queues: of the team gangs) that are debug jobs, "
                        "P50 (default 0.2)")
    p.add_argument("--queues", metavar="seed002|QUEUES.yaml",
                   help="put the gangs in queues: seed002 (seed 002's tenants scaled to the cluster) or a file of "
                        "Queue and PriorityClass objects; gangs mapped by the trace's qos, seeded (docs/replay.md)")
    options.output_file(p, "DIR", "write report.md, results.json and plots here")
    options.verbose(p)


def _mapping(path: str, what: str) -> dict[str, Any]:
    """The YAML (or JSON) mapping in ``path``; bad input is one line naming the file."""
    import yaml
    try:
        with open(path, encoding="utf-8") as f:
            data = yaml.safe_load(f)
    except OSError as e:
        raise InputError(f"cannot read file ({e.strerror or e})", file=path) from None
    except yaml.YAMLError as e:
        raise InputError(f"not YAML or JSON: {str(e).splitlines()[0]}", file=path) from None
    if not isinstance(data, dict):
        raise InputError(f"expected a mapping{what}", file=path)
    return data


def _scope(path: str | None) -> dict[str, Any]:
    return {} if path is None else _mapping(path, " (podGroups / nodes)")


def _budget(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if args.max_pod_groups is not None:
        out["podGroups"] = args.max_pod_groups
    if args.max_cards is not None:
        out["resources"] = {RESOURCE: str(args.max_cards)}
    return out


def configs(args: argparse.Namespace) -> list[ReplayConfig]:
    """One ReplayConfig per policy named (checked now: nothing runs on bad input)."""
    names = [p.strip() for p in args.policy.split(",") if p.strip()]
    if not names:
        raise InputError("no policy named", field="--policy")
    scope = _scope(args.scope)
    out = []
    for name in dict.fromkeys(names):
        try:
            out.append(ReplayConfig(policy=name, interval=args.interval * 60, pending_after=args.pending_after * 60,
                                    pending_cards=args.pending_cards, planner=args.planner, scope=scope,
                                    max_per_run=_budget(args),
                                    restart_delay=args.restart_delay, restart=args.restart,
                                    checkpoint=None if args.no_checkpoint else args.checkpoint_minutes * 60,
                                    warmup=args.warmup_hours * 3600, time_limit=args.time_limit, seed=args.seed,
                                    horizon=None if args.horizon_hours is None else args.horizon_hours * 3600))
        except InputError as e:
            flag = {"policy": "--policy", "planner": "--planner", "restart": "--restart",
                    "restart_delay": "--restart-delay", "checkpoint": "--checkpoint-minutes",
                    "warmup": "--warmup-hours", "horizon": "--horizon-hours"}.get(e.field or "", e.field)
            raise InputError(e.reason, file=args.scope if (e.field or "").startswith("spec.") else None,
                             field=flag) from None
    return out


def tenancy(source: str, trace: Trace, seed: int, large_cards: int, debug_share: float) -> tenants.Tenancy:
    """``--queues``: seed 002's tree scaled to the trace's cluster, or the Queue and PriorityClass objects of a
    file (as written), with the trace's gangs mapped onto its leaves (``tenants.assign``)."""
    if source == tenants.BUILTIN:
        queues, classes, name = tenants.seed002(trace.nodes), {}, tenants.BUILTIN
    else:
        from optplan.adapters import kubefile
        snap = kubefile.load_files([source]).snapshot
        if not snap.queues:
            raise InputError("no Queue object (expected Queue and PriorityClass objects, or seed002)",
                             file=source, field="--queues")
        queues, classes, name = list(snap.queues.values()), snap.priority_classes, Path(source).name
    try:
        return tenants.assign(trace, queues, classes, seed=seed, large_cards=large_cards, debug_share=debug_share,
                              name=name)
    except InputError as e:
        raise InputError(e.reason, file=None if source == tenants.BUILTIN else source, obj=e.obj,
                         field=e.field or "--queues") from None


# ---- one replay --------------------------------------------------------------------------------

def write_outputs(out_dir: str, files: dict[str, str | bytes]) -> None:
    """Create the directory and write every file atomically, in name order."""
    try:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"cannot create directory ({e.strerror or e})", file=out_dir) from None
    for name in sorted(files):
        write_atomic(str(Path(out_dir) / name), files[name])


def replay_files(trace: Trace, results: list[ReplayResult], *, timings: bool, plots: bool) -> dict[str, str | bytes]:
    files: dict[str, str | bytes] = {}
    names: list[str] = []
    note = None
    if plots:
        from optplan.experiments.replay.plots import plots as draw
        drawn = draw(results)
        if isinstance(drawn, str):
            note = drawn
        else:
            files.update(drawn)
            names = sorted(drawn)
    files["report.md"] = report.markdown(results, trace.stats, timings, names, note)
    files["results.json"] = report.to_json(report.document(results, trace.stats, timings))
    return files


def run(args: argparse.Namespace) -> str:
    if args.shared and (args.throttle or args.sweep):
        raise InputError(f"--shared replays single runs only, not {'--throttle' if args.throttle else '--sweep'}",
                         field="--shared")
    if args.queues and (args.throttle or args.sweep):
        raise InputError("--queues replays one trace with --policy (not with --sweep or --throttle)", field="--queues")
    if args.queues and args.shared:
        raise InputError("--queues counts whole GPUs only: not with --shared", field="--queues")
    if args.throttle:
        return run_throttle(args)
    if args.sweep:
        return run_sweep(args)
    if not args.nodes or not args.pods:
        raise InputError("--nodes and --pods are required (or --sweep)", field="--pods")
    cfgs = configs(args)
    if args.shared and any(c.policy == "oracle" for c in cfgs):
        raise InputError("the oracle policy counts whole cards only: not with --shared", field="--policy")
    trace = load_trace(args.nodes, args.pods, seed=args.seed, speedup=args.speedup, repeat=args.repeat,
                       times_from=args.times_from, unmatched=args.unmatched_times, gang_spread=args.gang_spread,
                       shared=args.shared)
    ten = tenancy(args.queues, trace, args.seed, args.large_cards, args.debug_share) if args.queues else None
    results = []
    for cfg in cfgs:
        bar = Progress(f"replay {cfg.label()}", 1000)
        with bar:
            bar.start(trace.name)
            results.append(replay(trace, cfg, lambda f, b=bar: b.set(int(f * 1000)), ten))  # type: ignore[misc]
    files = replay_files(trace, results, timings=args.timings, plots=not args.no_plots)
    write_outputs(args.output, files)
    lines = [f"wrote {args.output}: {', '.join(sorted(files))}"]
    for r in results:
        lines.append(f"{r.label}: useful GPU allocation {r.percent('useful'):.2f}% (held {r.allocation_percent:.2f}%), "
                     f"wait p95 {report.minutes(r.waits['all']['p95'])} min ({r.waits['all']['censored']} censored), "
                     f"{r.pods_moved} pods moved, "
                     f"{r.repack['runs']} Repack runs")
    return "\n".join(lines) + "\n"



# ---- sweeps ------------------------------------------------------------------------------------

SWEEP_KEYS = {"traces", "policies", "intervals", "pendingAfter", "pendingCards", "budgets", "planners", "seeds",
              "restartDelay", "restart", "checkpointSeconds", "timeLimit", "scope", "warmupHours", "grids"}
TRACE_KEYS = {"name", "nodes", "pods", "speedup", "repeat", "horizonHours", "timesFrom", "unmatchedTimes"}


def _hours(v: Any, name: str) -> float:
    """Seconds of ``v`` hours (a sweep file's number >= 0); ReplayConfig checks the rest."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise InputError(f"must be a number of hours >= 0, got {v!r}", field=name)
    return float(v) * 3600


def _read_sweep(path: str) -> dict[str, Any]:
    spec = _mapping(path, "")
    unknown = sorted(set(spec) - SWEEP_KEYS)
    if unknown:
        raise InputError(f"unknown key (known: {', '.join(sorted(SWEEP_KEYS))})", file=path, field=unknown[0])
    if not isinstance(spec.get("traces"), list) or not spec["traces"]:
        raise InputError("must be a non-empty list of {name, nodes, pods[, speedup, horizonHours]}", file=path,
                         field="traces")
    return spec


def _sweep_traces(path: str, spec: dict[str, Any], seeds: list[int]) -> tuple[dict[tuple[str, int], Trace],
                                                                           dict[str, float | None]]:
    """Every (trace, seed) loaded now (bad input stops the sweep before any cell runs)."""
    here = Path(path).parent
    traces: dict[tuple[str, int], Trace] = {}
    horizons: dict[str, float | None] = {}
    for k, t in enumerate(spec["traces"]):
        where = f"traces[{k}]"
        if not isinstance(t, dict) or not {"name", "nodes", "pods"} <= set(t) or set(t) - TRACE_KEYS:
            raise InputError(f"each trace is {{name, nodes, pods[, speedup, repeat, horizonHours]}}, got {t!r}",
                             file=path, field=where)
        name = str(t["name"])
        if name in horizons:
            raise InputError(f"duplicate trace name {name!r}", file=path, field=where)
        hh = t.get("horizonHours")
        if hh is not None and (isinstance(hh, bool) or not isinstance(hh, int | float) or not hh > 0):
            raise InputError(f"must be a positive number, got {hh!r}", file=path, field=f"{where}.horizonHours")
        horizons[name] = None if hh is None else float(hh) * 3600
        speed = t.get("speedup", 1.0)
        if isinstance(speed, bool) or not isinstance(speed, int | float):
            raise InputError(f"must be a positive number, got {speed!r}", file=path, field=f"{where}.speedup")
        repeat = t.get("repeat", 1)
        if isinstance(repeat, bool) or not isinstance(repeat, int):
            raise InputError(f"must be an integer, got {repeat!r}", file=path, field=f"{where}.repeat")
        times_from = None if t.get("timesFrom") is None else str(here / str(t["timesFrom"]))
        unmatched = t.get("unmatchedTimes", "drop")
        if unmatched not in UNMATCHED:
            raise InputError(f"one of {', '.join(UNMATCHED)}, got {unmatched!r}", file=path,
                             field=f"{where}.unmatchedTimes")
        for seed in seeds:
            traces[name, seed] = load_trace(str(here / str(t["nodes"])), str(here / str(t["pods"])), seed=seed,
                                            speedup=float(speed), repeat=repeat, name=name, times_from=times_from,
                                            unmatched=unmatched)
    return traces, horizons


class _TraceOf:
    """Picklable lookup of a cell's trace."""

    def __init__(self, traces: dict[tuple[str, int], Trace]) -> None:
        self.traces = traces

    def __call__(self, cell: sweep.Cell) -> Trace:
        return self.traces[cell.trace, cell.seed]


def run_sweep(args: argparse.Namespace) -> str:
    path = args.sweep
    spec = _read_sweep(path)
    seeds = spec.get("seeds", [0])
    if not isinstance(seeds, list) or not seeds or not all(isinstance(s, int) and not isinstance(s, bool)
                                                           and 0 <= s <= 2**31 - 1 for s in seeds):
        raise InputError("must be a non-empty list of integers in 0..2^31-1", file=path, field="seeds")
    try:
        base = ReplayConfig(interval=args.interval * 60, pending_after=args.pending_after * 60,
                            pending_cards=args.pending_cards, planner=args.planner,
                            scope=spec.get("scope") or _scope(args.scope), max_per_run=_budget(args),
                            restart_delay=spec.get("restartDelay", args.restart_delay),
                            restart=spec.get("restart", args.restart),
                            checkpoint=spec.get("checkpointSeconds", None if args.no_checkpoint
                                                else args.checkpoint_minutes * 60),
                            warmup=_hours(spec.get("warmupHours", args.warmup_hours), "warmupHours"),
                            time_limit=spec.get("timeLimit", args.time_limit))
        traces, horizons = _sweep_traces(path, spec, seeds)
        cells = sorted((c for name, h in horizons.items()
                        for c in sweep.grid(spec, [name], replace(base, horizon=h))), key=lambda c: c.key)
    except InputError as e:
        raise InputError(e.reason, file=e.file or path, obj=e.obj, field=e.field) from None
    executor = "ray" if args.ray or args.ray_address else "pool"
    if executor == "ray":
        sweep.check_ray(args.ray_address)
    out_dir = Path(args.output)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"cannot create directory ({e.strerror or e})", file=str(out_dir)) from None
    bar = Progress("sweep", len(cells))
    with bar:
        bar.start(f"{len(cells)} cells on {executor}")
        outcome = sweep.run_grid(cells, _TraceOf(traces), executor=executor, workers=args.workers,
                                 retries=args.retries, ray_address=args.ray_address,
                                 results_path=str(out_dir / "cells.jsonl"),
                                 progress=lambda done, total: bar.set(done))
    table = sweep.aggregate(outcome.rows)
    command = f"optplan replay --sweep {path} -o {args.output}"
    shared = {"warmupHours": base.warmup / 3600, "restartDelay": base.restart_delay, "restart": base.restart,
              "checkpointSeconds": base.checkpoint, "timeLimit": base.time_limit}
    fr = sweep.frontier(table)
    doc = {"cells": len(cells), "done": len(outcome.rows), "failed": dict(sorted(outcome.failed.items())),
           "sweep": {**spec, **shared}, "groups": table, "frontier": fr}
    files: dict[str, str | bytes] = {"sweep.json": report.to_json(doc),
                                     "sweep.md": sweep.markdown(table, outcome, len(cells), command, shared)}
    if not args.no_plots:
        from optplan.experiments.replay import plots
        for trace in sorted(fr):
            drawn = plots.frontier(trace, sweep.frontier_panels(table, fr, trace))
            if isinstance(drawn, bytes):
                files[f"frontier-{trace}.png"] = drawn
    write_outputs(args.output, files)
    return (f"wrote {args.output}: {', '.join(sorted(files))}, cells.jsonl; {len(outcome.rows)} of {len(cells)} "
            f"cells done, {len(outcome.failed)} failed\n")


# ---- the submission throttle ---------------------------------------------------------------------

WINDOW_FLAGS = {"cycle": "--cycle-seconds", "grace": "--grace-seconds", "timeout": "--throttle-timeout",
                "large_cards": "--large-cards", "debug_share": "--debug-share", "horizon": "--horizon-hours"}


def run_throttle(args: argparse.Namespace) -> str:
    """``--throttle``: ``window.compare`` over seeds SEED..SEED+K-1; throttle.md and throttle.json."""
    from optplan.experiments.replay import window

    if args.sweep:
        raise InputError("--throttle replays one trace: give --nodes and --pods, not --sweep", field="--sweep")
    if not args.nodes or not args.pods:
        raise InputError("--nodes and --pods are required", field="--pods")
    if [p.strip() for p in args.policy.split(",") if p.strip()] not in ([], ["none"]):
        raise InputError("--throttle replays without Repack: leave --policy at none", field="--policy")
    if args.seed + args.throttle_seeds - 1 > 2**31 - 1:
        raise InputError("the last seed would exceed 2^31-1", field="--throttle-seeds")
    try:
        cfg = window.WindowConfig(cycle=args.cycle_seconds, grace=args.grace_seconds, timeout=args.throttle_timeout,
                                  large_cards=args.large_cards, debug_share=args.debug_share,
                                  horizon=None if args.horizon_hours is None else args.horizon_hours * 3600)
    except InputError as e:
        raise InputError(e.reason, field=WINDOW_FLAGS.get(e.field or "", e.field)) from None
    seeds = list(range(args.seed, args.seed + args.throttle_seeds))
    trace_of = _SeededTrace(args.nodes, args.pods, args.speedup, args.repeat, args.times_from, args.unmatched_times)
    first = trace_of(seeds[0])  # bad input stops here, before anything runs
    bar = Progress("throttle", len(seeds))
    with bar:
        bar.start(f"{len(seeds)} seeds, with and without")
        doc = window.compare(trace_of, seeds, cfg, lambda done, total: bar.set(done), workers=args.workers)
    command = " ".join(["optplan replay --throttle", *_throttle_argv(args)])
    line = (f"Trace {first.name}: {len(first.nodes)} nodes, {first.total_gpus} GPUs, {len(first.gangs)} gangs; "
            f"speedup {args.speedup:g}, repeat {args.repeat}.")
    doc = {"trace": first.name, **doc}
    write_outputs(args.output, {"throttle.md": window.markdown(doc, line, command),
                                "throttle.json": report.to_json(doc)})
    m = doc["metrics"]
    return (f"wrote {args.output}: throttle.md, throttle.json\n"
            f"large-job wait mean {report.minutes(m['largeWaitMean']['without']['mean'])} min without, "
            f"{report.minutes(m['largeWaitMean']['with']['mean'])} min with the throttle; small-job delay mean "
            f"{report.minutes(m['smallWaitMean']['without']['mean'])} / "
            f"{report.minutes(m['smallWaitMean']['with']['mean'])} min\n")


class _SeededTrace:
    """Picklable: the trace cut into gangs with a seed (the seeds of ``--throttle`` run in worker processes)."""

    def __init__(self, nodes: str, pods: str, speedup: float, repeat: int, times_from: str | None,
                 unmatched: str) -> None:
        self.args = (nodes, pods, speedup, repeat, times_from, unmatched)

    def __call__(self, seed: int) -> Trace:
        nodes, pods, speedup, repeat, times_from, unmatched = self.args
        return load_trace(nodes, pods, seed=seed, speedup=speedup, repeat=repeat, times_from=times_from,
                          unmatched=unmatched)


def _throttle_argv(args: argparse.Namespace) -> list[str]:
    out = [f"--nodes {args.nodes}", f"--pods {args.pods}"]
    if args.times_from:
        out.append(f"--times-from {args.times_from} --unmatched-times {args.unmatched_times}")
    out += [f"--speedup {args.speedup:g}", f"--repeat {args.repeat}"]
    if args.horizon_hours is not None:
        out.append(f"--horizon-hours {args.horizon_hours:g}")
    out += [f"--seed {args.seed}", f"--throttle-seeds {args.throttle_seeds}", f"--cycle-seconds {args.cycle_seconds:g}",
            f"--grace-seconds {args.grace_seconds:g}", f"--throttle-timeout {args.throttle_timeout:g}",
            f"--large-cards {args.large_cards}", f"--debug-share {args.debug_share:g}", f"-o {args.output}"]
    return out
