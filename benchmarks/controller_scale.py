"""The Repack controller at scale, against the fake API server (issue 14 §5).

Example::

    python benchmarks/controller_scale.py                   # 10,000 nodes, ~80,000 pods
    python benchmarks/controller_scale.py --nodes 50 --burst 100 --json out.json   # a quick look

What it does, in one process serving ``tests/fakekube.FakeKube`` on 127.0.0.1 and the measured programs
in child processes (so their memory is theirs alone; the fake's JSON work shares the machine's cores):

1. Generates a cluster (``optplan.adapters.generate``, greedy_scale's mix: 8-card nodes at 0.88
   occupancy, mostly 1-card pods, so ``--nodes`` N holds about 8N pods) and loads it into the fake.
2. **List throughput**: a child lists every resource the planner reads through ``KubeClient`` (paged,
   as ``optplan snapshot`` and the controller's initial list do): objects and seconds per resource,
   and the child's peak RSS.
3. **The planner alone** (``--no-baseline`` skips it): a child builds the same cluster and run into a
   Snapshot (``load_objects``) and plans it with the controller's solver and limit (``plan_repack``), so
   the controller's own share of the DryRun latency shows.
4. **The controller**: starts ``optplan controller`` (one replica, no leader election) on the fake,
   waits until it is ready (``/readyz``), creates a DryRun RepackRun and measures the seconds from the
   run's creation to its DryRun status being written; then changes ``--burst`` pods unrelated to any
   run (a label each, so the fake sends a watch event per pod), waits ``--settle`` seconds and reads the
   controller's ``optplan_plan_seconds_count``: it must not have grown (watch events of unrelated pods do
   not re-plan a finished run). A second DryRun created after the burst must be planned (the controller
   was alive and reading events), and its latency is reported too (warm caches). Peak memory is the
   controller's VmHWM (peak resident set) from /proc; ``optplan_plan_seconds_sum`` is the time its plans
   took (building the snapshot from its caches, and ``plan_repack``).

Targets (issue 14 §5): DryRun status within the plan's time limit + 30 s of the run's creation; the
controller under 2 GiB; zero re-plans from the burst. The script exits 1 when one is missed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # tests.fakekube, when run as a script from anywhere
    sys.path.insert(0, str(ROOT))

from optplan.adapters.generate import GenConfig, generate  # noqa: E402
from optplan.experiments.bench import machine  # noqa: E402
from tests.fakekube import FakeKube  # noqa: E402

POD_SIZES = ((1, 0.9), (2, 0.07), (4, 0.03))
GANG_SIZES = ((1, 0.4), (2, 0.3), (4, 0.2), (8, 0.1))
RUNS = ("repack.volcano.sh/v1alpha1", "RepackRun")
GiB = 2**30

# The child that lists: every resource the planner reads, timed one by one, then its peak RSS.
LIST_CHILD = """
import json, resource, sys, time
from optplan.adapters.kube import RESOURCES, connect
out = {}
with connect(sys.argv[1], deadline=None) as kube:
    t0, c0 = time.perf_counter(), time.process_time()
    for res in RESOURCES:
        t = time.perf_counter()
        n = len(kube.list_objects(res))
        out[res.name] = {"objects": n, "seconds": time.perf_counter() - t}
    total, cpu = time.perf_counter() - t0, time.process_time() - c0
print(json.dumps({"resources": out, "seconds": total, "cpu_seconds": cpu,
                  "maxrss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""

# The child that plans without the controller: the same cluster and run, built into a Snapshot and planned
# with the controller's solver and limit (what the controller's plan costs by itself), then its peak RSS.
PLAN_CHILD = """
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
from controller_scale import cluster, dry_run
from optplan.adapters.kubefile import load_objects
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.repack.run import plan_repack
nodes, seed, limit, solver = int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
objects = [*cluster(nodes, seed), dry_run("scale-baseline")]
t = time.perf_counter()
loaded = load_objects(objects, "cluster")
load = time.perf_counter() - t
t = time.perf_counter()
out = plan_repack(loaded.snapshot, loaded.runs["scale-baseline"], solver=solver, options=PlanOptions(time_limit=limit))
plan = time.perf_counter() - t
print(json.dumps({"load_objects_seconds": load, "plan_repack_seconds": plan, "reason": out.reason,
                  "freed_nodes": out.status.plan.summary.freed_node_count,
                  "maxrss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""


def cluster(nodes: int, seed: int) -> list[dict[str, Any]]:
    """The generated objects without the generator's RepackRun (the benchmark creates its own runs)."""
    cfg = GenConfig(nodes=nodes, cards_per_node=(8,), occupancy=0.88, pod_sizes=POD_SIZES, gang_sizes=GANG_SIZES,
                    cpu_pressure=0.008, pdb_share=0.1, seed=seed)
    return [o for o in generate(cfg) if o["kind"] != "RepackRun"]


def dry_run(name: str) -> dict[str, Any]:
    return {"apiVersion": RUNS[0], "kind": RUNS[1], "metadata": {"name": name},
            "spec": {"mode": "DryRun", "goals": [{"resource": "nvidia.com/gpu"}]}}


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


def list_throughput(kubeconfig: Path) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-c", LIST_CHILD, str(kubeconfig)], capture_output=True, text=True,
                          env=child_env(), check=False)
    if proc.returncode != 0:
        raise SystemExit(f"controller_scale: the listing child failed:\n{proc.stderr.strip()}")
    return json.loads(proc.stdout)


def planner_alone(args: argparse.Namespace) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-c", PLAN_CHILD, str(ROOT / "benchmarks"), str(args.nodes),
                           str(args.seed), str(args.time_limit), args.solver], capture_output=True, text=True,
                          env=child_env(), check=False)
    if proc.returncode != 0:
        raise SystemExit(f"controller_scale: the planning child failed:\n{proc.stderr.strip()}")
    return json.loads(proc.stdout.splitlines()[-1])


def peak_rss(pid: int) -> int | None:
    """The process' peak resident set (VmHWM) in bytes, from /proc; None where there is no /proc."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    m = re.search(r"^VmHWM:\s+(\d+) kB", text, re.M)
    return int(m[1]) * 1024 if m else None


def scrape(url: str) -> dict[str, float]:
    """The unlabelled samples and ``name{labels}`` samples of a Prometheus text page."""
    with urllib.request.urlopen(url, timeout=10) as resp:
        text = resp.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            out[key] = float(value)
    return out


def wait_for(what: str, check: Any, timeout: float, proc: subprocess.Popen[str] | None = None,
             interval: float = 0.05) -> float:
    """Poll ``check()`` until it is true; the seconds it took. Gives up (exit 1) after ``timeout`` or when
    ``proc`` dies."""
    t0 = time.monotonic()
    while not check():
        if proc is not None and proc.poll() is not None:
            raise SystemExit(f"controller_scale: the controller exited ({proc.returncode}) while waiting for {what}")
        if time.monotonic() - t0 > timeout:
            raise SystemExit(f"controller_scale: no {what} within {timeout:g} s")
        time.sleep(interval)
    return time.monotonic() - t0


def status_phase(fake: FakeKube, name: str) -> str | None:
    with contextlib.suppress(KeyError):
        return (fake.get(*RUNS, name).get("status") or {}).get("phase")
    return None


def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_controller(fake: FakeKube, kubeconfig: Path, objects: list[dict[str, Any]], args: argparse.Namespace,
                   log_path: Path) -> dict[str, Any]:
    port = free_port()
    cmd = [sys.executable, "-m", "optplan.cli", "controller", "--kubeconfig", str(kubeconfig),
           "--metrics-address", f"127.0.0.1:{port}", "--time-limit", str(args.time_limit), "--solver", args.solver,
           *args.controller_arg]
    base = f"http://127.0.0.1:{port}"
    out: dict[str, Any] = {"command": cmd[2:]}
    with log_path.open("w") as log:
        t_start = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, text=True, env=child_env())
        try:
            out["ready_seconds"] = wait_for("/readyz 200", lambda: http_ok(f"{base}/readyz"), args.timeout, proc)
            out["rss_ready_bytes"] = peak_rss(proc.pid)

            def plans() -> float:
                return scrape(f"{base}/metrics").get("optplan_plan_seconds_count", 0.0)

            # the first DryRun: creation to status
            fake.add(dry_run("scale-dryrun-1"))
            out["first_dryrun_seconds"] = wait_for(
                "DryRun status", lambda: status_phase(fake, "scale-dryrun-1") in ("Succeeded", "Failed"),
                args.time_limit + args.timeout, proc)
            out["first_dryrun_phase"] = status_phase(fake, "scale-dryrun-1")
            time.sleep(1.0)  # a second status write, if any, would come now
            plans_before = plans()
            # the burst: a label on each of --burst pods, none of them a run's business
            pods = [o for o in objects if o["kind"] == "Pod"][: args.burst]
            t = time.monotonic()
            for chunk in range(0, len(pods), 1000):
                changed = []
                for p in pods[chunk:chunk + 1000]:
                    q = json.loads(json.dumps(p))
                    q["metadata"].setdefault("labels", {})["bench/burst"] = "1"
                    changed.append(q)
                fake.add(*changed)
            out["burst_pods"] = len(pods)
            out["burst_write_seconds"] = time.monotonic() - t
            time.sleep(args.settle)
            out["plans_after_burst"] = plans() - plans_before
            # the second DryRun: alive, and warm
            fake.add(dry_run("scale-dryrun-2"))
            out["second_dryrun_seconds"] = wait_for(
                "second DryRun status", lambda: status_phase(fake, "scale-dryrun-2") in ("Succeeded", "Failed"),
                args.time_limit + args.timeout, proc)
            out["plans_total"] = plans()
            metrics = scrape(f"{base}/metrics")
            out["plan_seconds_sum"] = metrics.get("optplan_plan_seconds_sum")
            out["peak_rss_bytes"] = peak_rss(proc.pid)
        finally:
            stop(proc)
            out["exit_code"] = proc.returncode
            out["lifetime_seconds"] = time.monotonic() - t_start
    return out


def stop(proc: subprocess.Popen[str]) -> None:
    """SIGTERM the controller, give it 30 s to drain, then kill it."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def mib(n: float | None) -> str:
    return "n/a" if n is None else f"{n / 2**20:,.0f} MiB"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=10_000, help="8-card nodes, about 8 pods each (default 10000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--time-limit", type=float, default=30.0, help="the controller's plan time limit (default 30)")
    ap.add_argument("--solver", default="auto", help="the controller's planner (default auto, its default)")
    ap.add_argument("--no-baseline", action="store_true", help="skip planning the cluster without the controller")
    ap.add_argument("--burst", type=int, default=10_000, help="unrelated pods changed after the DryRun")
    ap.add_argument("--settle", type=float, default=10.0, help="seconds to wait after the burst (default 10)")
    ap.add_argument("--timeout", type=float, default=600.0, help="give up on a step after this (default 600)")
    ap.add_argument("--no-controller", action="store_true", help="only load the fake and measure listing")
    ap.add_argument("--controller-arg", action="append", default=[], metavar="ARG",
                    help="one more argument for `optplan controller` (repeatable)")
    ap.add_argument("--json", metavar="OUT", help="also write the figures here")
    args = ap.parse_args(argv)
    info = machine()
    load = os.getloadavg()
    print(f"machine: {info['cpus']} usable cpus, {info['cpu']}, Python {info['python']}; "
          f"load average {load[0]:.2f} (the fake API server runs on the same cores)", flush=True)
    report: dict[str, Any] = {"machine": info, "load_average_start": load, "nodes": args.nodes, "seed": args.seed}
    t = time.perf_counter()
    objects = cluster(args.nodes, args.seed)
    kinds = Counter(o["kind"] for o in objects)
    report["objects"] = dict(sorted(kinds.items()))
    report["generate_seconds"] = time.perf_counter() - t
    fake = FakeKube().start()
    try:
        t = time.perf_counter()
        fake.add(*objects)
        report["load_seconds"] = time.perf_counter() - t
        print(f"cluster: {kinds['Node']:,} nodes, {kinds['Pod']:,} pods, {kinds['PodGroup']:,} PodGroups, "
              f"{kinds['PodDisruptionBudget']:,} PDBs; generated in {report['generate_seconds']:.1f} s, "
              f"loaded into the fake in {report['load_seconds']:.1f} s", flush=True)
        with tempfile.TemporaryDirectory(prefix="controller-scale-") as tmp:
            kubeconfig = fake.write_kubeconfig(Path(tmp) / "kubeconfig")
            listed = list_throughput(kubeconfig)
            report["list"] = listed
            n = sum(r["objects"] for r in listed["resources"].values())
            print(f"list:    {n:,} objects in {listed['seconds']:.1f} s ({n / listed['seconds']:,.0f} objects/s; "
                  f"pods {listed['resources']['pods']['seconds']:.1f} s); the lister's CPU "
                  f"{listed['cpu_seconds']:.1f} s (the rest is the fake serving), peak RSS "
                  f"{mib(listed['maxrss_bytes'])}", flush=True)
            if not args.no_baseline:
                b = planner_alone(args)
                report["planner_alone"] = b
                print(f"planner: without the controller, load_objects {b['load_objects_seconds']:.1f} s, "
                      f"plan_repack ({args.solver}, limit {args.time_limit:g} s) {b['plan_repack_seconds']:.1f} s: "
                      f"{b['reason']}, {b['freed_nodes']} nodes freed; peak RSS {mib(b['maxrss_bytes'])}", flush=True)
            if not args.no_controller:
                log_path = Path(args.json).with_suffix(".log") if args.json else Path(tmp) / "controller.log"
                try:
                    c = run_controller(fake, kubeconfig, objects, args, log_path)
                except SystemExit:
                    print(f"controller log ({log_path}):\n" + log_path.read_text()[-4000:], file=sys.stderr)
                    raise
                report["controller"] = c
                print(f"ready:   {c['ready_seconds']:.1f} s after start (RSS {mib(c['rss_ready_bytes'])})")
                print(f"DryRun:  status {c['first_dryrun_phase']} written {c['first_dryrun_seconds']:.1f} s after "
                      f"the run's creation (time limit {args.time_limit:g} s); a second one after the burst "
                      f"{c['second_dryrun_seconds']:.1f} s")
                print(f"burst:   {c['burst_pods']:,} unrelated pods changed in {c['burst_write_seconds']:.1f} s; "
                      f"re-plans in the {args.settle:g} s after: {c['plans_after_burst']:g}; plans in all: "
                      f"{c['plans_total']:g}")
                print(f"memory:  the controller's peak RSS {mib(c['peak_rss_bytes'])}")
                print(f"plans:   {c['plan_seconds_sum']:.1f} s in all by optplan_plan_seconds (snapshot build and "
                      f"plan_repack)")
    finally:
        fake.stop()
    report["load_average_end"] = os.getloadavg()
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    c = report.get("controller")
    if c is None:
        return 0
    missed = []
    if c["first_dryrun_seconds"] > args.time_limit + 30:
        missed.append(f"DryRun status after {c['first_dryrun_seconds']:.1f} s > time limit + 30 s")
    if c["peak_rss_bytes"] is not None and c["peak_rss_bytes"] >= 2 * GiB:
        missed.append(f"peak RSS {mib(c['peak_rss_bytes'])} >= 2 GiB")
    if c["plans_after_burst"]:
        missed.append(f"{c['plans_after_burst']:g} re-plans after the burst")
    if c["plans_total"] != 2:
        missed.append(f"{c['plans_total']:g} plans for two DryRuns")
    for m in missed:
        print(f"MISSED: {m}", file=sys.stderr)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
