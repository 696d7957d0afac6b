"""The Repack controller at scale on a real control plane (kube-apiserver, etcd, KWOK, Volcano).

Example::

    python benchmarks/realcluster_scale.py                        # 2,000 8-GPU nodes, ~16,000 pods
    python benchmarks/realcluster_scale.py --nodes 100 --json out.json    # a quick look

The binaries come from ``hack/cluster/build.sh`` (the real-cluster test tier's cluster,
tests/realcluster/cluster.py, started in a temporary folder and stopped at the end by its PIDs). What it does:

1. **The Execute world first**: ``--exec-jobs`` VCJobs (label ``bench/execute=true``, 2 workers x 1 GPU)
   created through Volcano's job controller and placed by vc-scheduler on one "victim" node, before any
   other node exists.
2. **The bulk**: the cluster of benchmarks/controller_scale.py (``optplan.adapters.generate``: 8-GPU
   nodes at 0.88 occupancy, mostly 1-GPU pods in gangs, PDBs) created on the real API server: KWOK nodes
   (their status with the GPUs), PodGroups, PDBs and pods bound with ``spec.nodeName`` (no scheduler
   involved), through the REST API with ``--workers`` parallel connections. Owner references are left out
   (the garbage collector deletes dependents of owners that do not exist), extended-resource limits are set
   equal to the requests (the real API server requires it). Then it waits until KWOK has every pod Running.
3. **Listing**: a child lists every resource the planner reads through ``KubeClient`` (as ``optplan
   snapshot`` and the controller's initial list: paged, 500 a page), seconds per resource and its peak RSS;
   and the bytes of each initial list (the same pages, as JSON, read as the admin).
4. **The controller** (``optplan controller``, admin credentials, no leader election, ``--cooldown 0``):
   seconds from start to ``/readyz`` (its initial lists and first snapshot); a DryRun over the whole
   cluster, seconds from its creation to its status; an Execute run scoped to the VCJobs' PodGroups with
   ``maxPerRun.podGroups`` = ``--exec-jobs``, seconds from its creation to its verdict (evictions through
   the Eviction API, Volcano's job controller recreating the workers, optplan nominating them, vc-scheduler
   binding them); the controller's peak RSS (VmHWM) and ``optplan_plan_seconds``.

The figures are printed and, with ``--json``, written; the load average is recorded at the start and the
end (every process of the control plane runs on the same cores).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlparse

ROOT = Path(__file__).resolve().parent.parent
for _p in (str(ROOT), str(ROOT / "benchmarks")):
    if _p not in sys.path:  # tests.realcluster.cluster and controller_scale, when run as a script from anywhere
        sys.path.insert(0, _p)

import controller_scale as cs  # noqa: E402

from tests.realcluster.cluster import KWOK_ANNOTATION, Cluster, missing  # noqa: E402

GPU = "nvidia.com/gpu"
EXEC_NS = "bench-exec"
EXEC_LABEL = {"bench/execute": "true"}
VICTIM = "bench-victim-0"
RUNS_PATH = "/apis/repack.volcano.sh/v1alpha1/repackruns"
PATHS = {  # where each kind is created (namespaced: {ns})
    "Node": "/api/v1/nodes",
    "Namespace": "/api/v1/namespaces",
    "Pod": "/api/v1/namespaces/{ns}/pods",
    "PodGroup": "/apis/scheduling.volcano.sh/v1beta1/namespaces/{ns}/podgroups",
    "PodDisruptionBudget": "/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets",
}


class Api:
    """The admin's REST client: one keep-alive HTTPS connection per thread."""

    def __init__(self, cluster: Cluster) -> None:
        self.url = urlparse(cluster.server)
        self.ctx = cluster.ssl_context()
        self.local = threading.local()

    def _conn(self) -> http.client.HTTPSConnection:
        conn = getattr(self.local, "conn", None)
        if conn is None:
            conn = http.client.HTTPSConnection(self.url.hostname or "127.0.0.1", self.url.port, context=self.ctx,
                                               timeout=120)
            self.local.conn = conn
        return conn

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, bytes]:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        for attempt in range(5):
            conn = self._conn()
            try:
                conn.request(method, path, body=data, headers=headers)
                resp = conn.getresponse()
                raw = resp.read()
            except (OSError, http.client.HTTPException):
                conn.close()
                self.local.conn = None
                time.sleep(0.2 * (attempt + 1))
                continue
            if resp.status == 429 or resp.status >= 500:
                time.sleep(0.2 * (attempt + 1))
                continue
            return resp.status, raw
        raise SystemExit(f"realcluster_scale: {method} {path} kept failing")

    def create(self, obj: dict[str, Any]) -> None:
        ns = obj["metadata"].get("namespace", "")
        status, raw = self.request("POST", PATHS[obj["kind"]].format(ns=ns), obj)
        if status not in (200, 201, 409):
            raise SystemExit(f"realcluster_scale: creating {obj['kind']} {ns}/{obj['metadata']['name']}: "
                             f"{status} {raw[:400].decode(errors='replace')}")

    def get(self, path: str) -> Any:
        status, raw = self.request("GET", path)
        if status != 200:
            raise SystemExit(f"realcluster_scale: GET {path}: {status} {raw[:400].decode(errors='replace')}")
        return json.loads(raw)

    def list_bytes(self, path: str, page: int = 500) -> tuple[int, int, float]:
        """(objects, bytes, seconds) of a paged list, as the controller's initial list reads it."""
        t, n, size, token = time.perf_counter(), 0, 0, ""
        while True:
            q = f"?limit={page}" + (f"&continue={quote(token)}" if token else "")
            status, raw = self.request("GET", path + q)
            if status != 200:
                raise SystemExit(f"realcluster_scale: GET {path}: {status}")
            size += len(raw)
            doc = json.loads(raw)
            n += len(doc.get("items") or [])
            token = (doc.get("metadata") or {}).get("continue") or ""
            if not token:
                return n, size, time.perf_counter() - t


def parallel(api: Api, objs: list[dict[str, Any]], workers: int) -> float:
    """Create ``objs`` with ``workers`` threads; the seconds it took."""
    t = time.perf_counter()
    it = iter(objs)
    lock = threading.Lock()
    errors: list[BaseException] = []

    def work() -> None:
        while not errors:
            with lock:
                obj = next(it, None)
            if obj is None:
                return
            try:
                api.create(obj)
            except BaseException as e:
                errors.append(e)

    threads = [threading.Thread(target=work, daemon=True) for _ in range(workers)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    if errors:
        raise errors[0]
    return time.perf_counter() - t


def for_real_server(objs: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The generated objects as a client creates them: no status (kwok and the controllers write it) except
    a Node's capacity, no uid/creationTimestamp, no owner references; a KWOK annotation on every node;
    extended-resource limits equal to the requests."""
    out: dict[str, list[dict[str, Any]]] = {}
    for o in objs:
        o = json.loads(json.dumps(o))
        meta = o["metadata"]
        for k in ("uid", "creationTimestamp", "ownerReferences", "resourceVersion"):
            meta.pop(k, None)
        if o["kind"] == "Node":
            meta.setdefault("annotations", {})[KWOK_ANNOTATION] = "fake"
        else:
            o.pop("status", None)
        if o["kind"] == "Pod":
            for c in o["spec"].get("containers", []):
                res = c.setdefault("resources", {})
                ext = {k: v for k, v in (res.get("requests") or {}).items() if "/" in k}
                if ext:
                    res["limits"] = {**ext, **(res.get("limits") or {})}
        out.setdefault(o["kind"], []).append(o)
    return out


def vcjob(name: str) -> dict[str, Any]:
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": name, "namespace": EXEC_NS, "labels": dict(EXEC_LABEL)},
            "spec": {"schedulerName": "volcano", "queue": "default", "minAvailable": 2,
                     "tasks": [{"name": "worker", "replicas": 2, "template": {"spec": {
                         "restartPolicy": "OnFailure",
                         # the generated pools taint their nodes; the workers may go to any pool
                         "tolerations": [{"key": "optplan.io/pool", "operator": "Exists", "effect": "NoSchedule"}],
                         "containers": [{"name": "trainer", "image": "trainer:1", "resources": {
                             "requests": {GPU: "1", "cpu": "1", "memory": "1Gi"},
                             "limits": {GPU: "1", "cpu": "1", "memory": "1Gi"}}}]}}}]}}


def run_doc(name: str, mode: str, spec: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackRun", "metadata": {"name": name},
            "spec": {"mode": mode, "goals": [{"resource": GPU}], **(spec or {})}}


def wait(what: str, check: Callable[[], bool], timeout: float, interval: float = 0.25,
         proc: subprocess.Popen[str] | None = None) -> float:
    return cs.wait_for(what, check, timeout, proc, interval=interval)


def running_pods(api: Api) -> tuple[int, int]:
    """(pods, Running pods), read page by page as the admin."""
    n = running = 0
    token = ""
    while True:
        q = "?limit=2000" + (f"&continue={quote(token)}" if token else "")
        doc = api.get("/api/v1/pods" + q)
        for p in doc.get("items") or []:
            n += 1
            running += (p.get("status") or {}).get("phase") == "Running"
        token = (doc.get("metadata") or {}).get("continue") or ""
        if not token:
            return n, running


def phase(api: Api, name: str) -> str | None:
    status, raw = api.request("GET", f"{RUNS_PATH}/{name}")
    if status != 200:
        return None
    return (json.loads(raw).get("status") or {}).get("phase")


def measure_controller(c: Cluster, api: Api, args: argparse.Namespace, log_path: Path) -> dict[str, Any]:
    port = cs.free_port()
    cmd = [sys.executable, "-m", "optplan.cli", "controller", "--kubeconfig", str(c.kubeconfig),
           "--metrics-address", f"127.0.0.1:{port}", "--time-limit", str(args.time_limit), "--solver", args.solver,
           "--cooldown", "0", "--eviction-deadline", "120", "--replacement-deadline", str(args.timeout)]
    base = f"http://127.0.0.1:{port}"
    out: dict[str, Any] = {"command": cmd[2:]}
    with log_path.open("w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, text=True, env=cs.child_env(), cwd=ROOT)
        try:
            out["ready_seconds"] = wait("/readyz 200", lambda: cs.http_ok(f"{base}/readyz"), args.timeout, 0.1, proc)
            out["rss_ready_bytes"] = cs.peak_rss(proc.pid)
            status, raw = api.request("POST", RUNS_PATH, run_doc("scale-dryrun", "DryRun"))
            assert status in (200, 201), raw[:300]
            out["dryrun_seconds"] = wait("the DryRun's status", lambda: phase(api, "scale-dryrun") in (
                "Succeeded", "Failed"), args.time_limit + args.timeout, 0.1, proc)
            dry = api.get(f"{RUNS_PATH}/scale-dryrun")["status"]
            out["dryrun_phase"] = dry.get("phase")
            out["dryrun_reason"] = (dry.get("conditions") or [{}])[0].get("reason")
            summary = (dry.get("plan") or {}).get("summary") or {}
            out["dryrun_freed_nodes"] = summary.get("freedNodeCount")
            out["dryrun_frag"] = (summary.get("fragBeforePercent"), summary.get("fragAfterPercent"))
            out["rss_after_dryrun_bytes"] = cs.peak_rss(proc.pid)
            spec = {"scope": {"podGroups": {"include": {"selector": {"matchLabels": EXEC_LABEL}}}},
                    "maxPerRun": {"podGroups": args.exec_jobs}, "eviction": {"gracePeriodSeconds": 1}}
            status, raw = api.request("POST", RUNS_PATH, run_doc("scale-execute", "Execute", spec))
            assert status in (200, 201), raw[:300]
            out["execute_seconds"] = wait("the Execute run's verdict", lambda: phase(api, "scale-execute") in (
                "Succeeded", "Failed"), args.time_limit + 2 * args.timeout, 0.25, proc)
            ex = api.get(f"{RUNS_PATH}/scale-execute")["status"]
            out["execute_phase"] = ex.get("phase")
            out["execute_reasons"] = [x.get("reason") for x in ex.get("conditions") or []]
            out["execute_messages"] = [x.get("message") for x in ex.get("conditions") or []]
            rels = ex.get("relocations") or []
            out["execute_relocations"] = len(rels)
            out["execute_placements"] = dict(Counter((r.get("placement") or {}).get("phase") for r in rels))
            out["execute_freed_nodes"] = (ex.get("plan") or {}).get("freedNodes")
            out["execute_result"] = ex.get("result")
            metrics = cs.scrape(f"{base}/metrics")
            out["plans_total"] = metrics.get("optplan_plan_seconds_count")
            out["plan_seconds_sum"] = metrics.get("optplan_plan_seconds_sum")
            out["peak_rss_bytes"] = cs.peak_rss(proc.pid)
        finally:
            cs.stop(proc)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=2000, help="8-GPU KWOK nodes, about 8 pods each (default 2000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=16, help="parallel connections creating objects (default 16)")
    ap.add_argument("--exec-jobs", type=int, default=3, help="VCJobs (2 workers x 1 GPU) the Execute run moves")
    ap.add_argument("--time-limit", type=float, default=30.0, help="the controller's plan time limit (default 30)")
    ap.add_argument("--solver", default="auto", help="the controller's planner (default auto, its default)")
    ap.add_argument("--timeout", type=float, default=600.0, help="give up on a step after this (default 600)")
    ap.add_argument("--keep", action="store_true", help="keep the cluster's folder (logs, etcd) afterwards")
    ap.add_argument("--json", metavar="OUT", help="also write the figures here")
    ap.add_argument("--snapshot", metavar="FILE", help="also write `optplan snapshot` of the cluster here (timed), "
                    "before the controller starts")
    args = ap.parse_args(argv)
    absent = missing()
    if absent:
        print(f"realcluster_scale: the real-cluster binaries are not built (hack/cluster/build.sh): {absent[0]}",
              file=sys.stderr)
        return 2
    info = cs.machine()
    report: dict[str, Any] = {"machine": info, "load_average_start": os.getloadavg(), "nodes": args.nodes,
                              "seed": args.seed}
    print(f"machine: {info['cpus']} usable cpus, {info['cpu']}, Python {info['python']}; load average "
          f"{report['load_average_start'][0]:.2f} (every process of the control plane on the same cores)", flush=True)
    generated = cs.cluster(args.nodes, args.seed)
    kinds = for_real_server(generated)
    counts = {k: len(v) for k, v in sorted(kinds.items())}
    report["objects"] = counts
    workdir = Path(tempfile.mkdtemp(prefix="realcluster-scale-"))
    c = Cluster(workdir)
    t = time.perf_counter()
    c.start(timeout=180)
    report["start_seconds"] = time.perf_counter() - t
    try:
        api = Api(c)
        c.kubectl("apply", "-f", str(ROOT / "crds"))
        c.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd/repackruns.repack.volcano.sh")
        namespaces = sorted({o["metadata"]["namespace"] for k in ("Pod", "PodGroup", "PodDisruptionBudget")
                             for o in kinds.get(k, [])} | {EXEC_NS} - {"default", "kube-system"})
        parallel(api, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}} for n in namespaces], 4)
        wait(f"{EXEC_NS}'s default ServiceAccount", lambda: api.request(
            "GET", f"/api/v1/namespaces/{EXEC_NS}/serviceaccounts/default")[0] == 200, 120)
        # the Execute world: the VCJobs on the one node there is
        c.add_node(VICTIM, gpus=8, labels={"bench": "victim"})
        t = time.perf_counter()
        c.apply([vcjob(f"exec-{i}") for i in range(args.exec_jobs)])

        def workers_running() -> bool:
            pods = api.get(f"/api/v1/namespaces/{EXEC_NS}/pods")["items"]
            return len(pods) == 2 * args.exec_jobs and all(
                p["status"].get("phase") == "Running" and p["spec"].get("nodeName") == VICTIM for p in pods)

        wait("the Execute world's workers Running", workers_running, 180)
        report["exec_world_seconds"] = time.perf_counter() - t
        print(f"start:   the control plane in {report['start_seconds']:.1f} s; {args.exec_jobs} VCJobs Running on "
              f"{VICTIM} after {report['exec_world_seconds']:.1f} s", flush=True)
        created: dict[str, float] = {}
        for kind in ("Node", "PodGroup", "PodDisruptionBudget", "Pod"):
            created[kind] = parallel(api, kinds.get(kind, []), args.workers)
            print(f"create:  {counts.get(kind, 0):,} {kind}s in {created[kind]:.1f} s "
                  f"({counts.get(kind, 0) / max(created[kind], 1e-9):,.0f}/s)", flush=True)
        report["create_seconds"] = created
        t = time.perf_counter()
        want = counts.get("Pod", 0) + 2 * args.exec_jobs

        seen = [0]

        def all_running() -> bool:
            n, seen[0] = running_pods(api)
            return n >= want and seen[0] >= want

        try:
            wait("every pod Running (kwok)", all_running, 3 * args.timeout, interval=10)
            report["running_after_seconds"] = time.perf_counter() - t
            print(f"kwok:    every pod Running {report['running_after_seconds']:.1f} s after the last was created",
                  flush=True)
        except SystemExit:  # measured as it is: a bound Pending pod holds its node as a Running one does
            report["running_after_seconds"] = None
            report["running_at_timeout"] = seen[0]
            print(f"kwok:    {seen[0]:,} of {want:,} pods Running after {time.perf_counter() - t:.0f} s; going on",
                  flush=True)
        report["load_average_before_measuring"] = os.getloadavg()
        listed = subprocess.run([sys.executable, "-c", cs.LIST_CHILD, str(c.kubeconfig)], capture_output=True,
                                text=True, env=cs.child_env(), check=False)
        if listed.returncode != 0:
            raise SystemExit(f"realcluster_scale: the listing child failed:\n{listed.stderr.strip()}")
        report["list"] = json.loads(listed.stdout)
        lst = report["list"]
        n = sum(r["objects"] for r in lst["resources"].values())
        print(f"list:    {n:,} objects through KubeClient in {lst['seconds']:.1f} s (pods "
              f"{lst['resources']['pods']['seconds']:.1f} s); the lister's CPU {lst['cpu_seconds']:.1f} s, "
              f"peak RSS {cs.mib(lst['maxrss_bytes'])}", flush=True)
        sizes = {}
        for name, path in (("nodes", "/api/v1/nodes"), ("pods", "/api/v1/pods"),
                           ("podgroups", "/apis/scheduling.volcano.sh/v1beta1/podgroups"),
                           ("poddisruptionbudgets", "/apis/policy/v1/poddisruptionbudgets")):
            objects, size, secs = api.list_bytes(path)
            sizes[name] = {"objects": objects, "bytes": size, "seconds": secs}
        report["list_bytes"] = sizes
        print("bytes:   " + ", ".join(f"{k} {v['objects']:,} = {v['bytes'] / 2**20:,.1f} MiB in {v['seconds']:.1f} s"
                                      for k, v in sizes.items()), flush=True)
        if args.snapshot:
            t = time.perf_counter()
            snap = subprocess.run([sys.executable, "-m", "optplan.cli", "snapshot", "--kubeconfig", str(c.kubeconfig),
                                   "-o", args.snapshot], capture_output=True, text=True, env=cs.child_env(), cwd=ROOT,
                                  check=False)
            report["snapshot_seconds"] = time.perf_counter() - t
            print(f"snapshot: {snap.stdout.strip() or snap.stderr.strip()} ({report['snapshot_seconds']:.1f} s)",
                  flush=True)
        log_path = Path(args.json).with_suffix(".log") if args.json else workdir / "optplan-controller.log"
        try:
            ctl = measure_controller(c, api, args, log_path)
        except (SystemExit, AssertionError):
            print(f"controller log ({log_path}):\n" + log_path.read_text()[-4000:], file=sys.stderr)
            raise
        report["controller"] = ctl
        print(f"ready:   {ctl['ready_seconds']:.1f} s after start (initial lists and first snapshot; RSS "
              f"{cs.mib(ctl['rss_ready_bytes'])})")
        print(f"DryRun:  {ctl['dryrun_phase']} ({ctl['dryrun_reason']}) written {ctl['dryrun_seconds']:.1f} s after "
              f"its creation (limit {args.time_limit:g} s): {ctl['dryrun_freed_nodes']} nodes freed, fragmentation "
              f"{ctl['dryrun_frag'][0]}% -> {ctl['dryrun_frag'][1]}%")
        print(f"Execute: {ctl['execute_phase']} {ctl['execute_reasons']} {ctl['execute_seconds']:.1f} s after its "
              f"creation: {ctl['execute_relocations']} relocations {ctl['execute_placements']}, freed "
              f"{ctl['execute_freed_nodes']}; {ctl['execute_messages'][0]}")
        print(f"memory:  the controller's peak RSS {cs.mib(ctl['peak_rss_bytes'])}; plans "
              f"{ctl['plans_total']:g}, {ctl['plan_seconds_sum']:.1f} s by optplan_plan_seconds")
        report["processes_alive"] = c.alive()
        report["rss_control_plane_bytes"] = {p.name: cs.peak_rss(p.popen.pid) for p in c.procs}
        print("control plane peak RSS: " + ", ".join(f"{k} {cs.mib(v)}"
                                                     for k, v in report["rss_control_plane_bytes"].items()))
    finally:
        c.stop()
        report["load_average_end"] = os.getloadavg()
        if args.json:
            Path(args.json).write_text(json.dumps(report, indent=2, default=str) + "\n")
        if not args.keep:
            subprocess.run(["rm", "-rf", str(workdir)], check=False)
        else:
            print(f"kept {workdir}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
