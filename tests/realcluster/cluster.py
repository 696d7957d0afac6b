"""A real Kubernetes control plane with Volcano and KWOK nodes on 127.0.0.1 (issue 25 §2).

etcd, kube-apiserver (TLS, Node+RBAC authorization, a service-account signing key, an admin client
certificate), kube-controller-manager, kwok (fakes the kubelet of every node that carries the annotation
``kwok.x-k8s.io/node: fake``), Volcano's vc-controller-manager and vc-scheduler with the seed 002 §7
scheduler configuration (hack/cluster/volcano-scheduler.conf). Volcano's admission webhooks are not run:
a VCJob must name its queue, scheduler and minAvailable itself (the webhook would default them).

The binaries come from hack/cluster/build.sh (its cache folder, see ``cache_dir``). Every process is
started by this module, stopped by its PID, and logs to ``WORKDIR/logs/NAME.log``.

A person starts one with ``hack/cluster/up.sh`` (this module's ``main``): it prints the kubeconfig and
runs until Ctrl-C.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
HACK = ROOT / "hack" / "cluster"
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kubectl", "kwok", "vc-scheduler",
            "vc-controller-manager")
KWOK_ANNOTATION = "kwok.x-k8s.io/node"
MASTERS = ("kwok", "vc-controller-manager", "vc-scheduler")
SERVICE_CIDR = "10.96.0.0/16"
START_ATTEMPTS = 3  # a start that lost a port to another process is tried again on other ports
WAIT = 300.0
"""How long a wait for a condition lasts before it fails (seconds): CI's 2 cores under load may take minutes for
what an idle machine does in seconds, and a wait ends as soon as its condition holds, so only a failure pays."""
SESSIONS_METRIC = "volcano_e2e_scheduling_latency_milliseconds_count"
"""vc-scheduler's count of finished scheduling sessions (``--enable-metrics``, on its listen address)."""


def cache_dir() -> Path:
    """Where hack/cluster/build.sh puts its binaries (the same rule as the script)."""
    if os.environ.get("OPTPLAN_CLUSTER_CACHE"):
        return Path(os.environ["OPTPLAN_CLUSTER_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "optplan-cluster"


def missing(cache: Path | None = None) -> list[str]:
    """What the cluster needs and the cache folder lacks (empty when it can start)."""
    cache = cache or cache_dir()
    need = [cache / "bin" / b for b in BINARIES] + [cache / "crds" / "volcano", cache / "kwok" / "stages.yaml"]
    return [str(p) for p in need if not p.exists()]


PORT_RANGE = (20000, 32000)
"""Where the control plane's servers listen: below Linux's ephemeral range (32768-60999), so that no client's
outgoing connection takes a port between its pick and its server's bind, or while a server restarts."""


def free_ports(names: Sequence[str], *, low: int = PORT_RANGE[0], high: int = PORT_RANGE[1]) -> dict[str, int]:
    """One distinct port per name, each bindable on 127.0.0.1 when picked (two kernel picks can be equal: a
    closed socket's port is handed out again)."""
    pick = random.SystemRandom()
    out: dict[str, int] = {}
    for _ in range(100 * (high - low)):
        if len(out) == len(names):
            return out
        port = pick.randrange(low, high)
        if port in out.values():
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        out[names[len(out)]] = port
    if len(out) < len(names):
        raise RuntimeError(f"fewer than {len(names)} free ports on 127.0.0.1 in {low}-{high}")
    return out


def free_port() -> int:
    """One port free now on 127.0.0.1, for one more server beside the cluster (``free_ports``)."""
    return free_ports(("port",))["port"]


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_certs(d: Path) -> None:
    """A CA, the API server's serving certificate, client certificates and the service-account key pair."""
    d.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
             "-subj", "/CN=optplan-test-ca", cwd=d)
    (d / "server.ext").write_text(
        "subjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,"
        "DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local\n"
        "extendedKeyUsage=serverAuth\n", encoding="utf-8")
    (d / "client.ext").write_text("extendedKeyUsage=clientAuth\n", encoding="utf-8")
    certs = {"server": ("/CN=kube-apiserver", "server.ext"),
             "admin": ("/O=system:masters/CN=optplan-admin", "client.ext"),
             "controller-manager": ("/CN=system:kube-controller-manager", "client.ext"),
             # kwok and Volcano's components as users of their own (all masters), so the audit log says who
             **{name: (f"/O=system:masters/CN={name}", "client.ext") for name in MASTERS}}
    for name, (subj, ext) in certs.items():
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
                 "-subj", subj, cwd=d)
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                 "-out", f"{name}.crt", "-days", "2", "-extfile", ext, cwd=d)
    _openssl("genrsa", "-out", "sa.key", "2048", cwd=d)
    _openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=d)


def kubeconfig(path: Path, server: str, ca: Path, *, cert: Path | None = None, key: Path | None = None,
               token: str | None = None, user: str = "admin") -> Path:
    """A kubeconfig for one user of the cluster (a client certificate or a bearer token)."""
    creds: dict[str, str] = {}
    if cert and key:
        creds = {"client-certificate": str(cert), "client-key": str(key)}
    if token:
        creds = {"token": token}
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": "realcluster",
           "clusters": [{"name": "realcluster", "cluster": {"server": server, "certificate-authority": str(ca)}}],
           "users": [{"name": user, "user": creds}],
           "contexts": [{"name": "realcluster", "context": {"cluster": "realcluster", "user": user}}]}
    path.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    return path


@dataclass(frozen=True)
class Removal:
    """One eviction or pod deletion asked of the API server (``Cluster.removals``)."""

    user: str
    verb: str
    eviction: bool
    pod: str
    uid: str
    code: int
    at: float = 0.0
    """When the API server received it (epoch seconds, its audit record's ``requestReceivedTimestamp``)."""

    @property
    def done(self) -> bool:
        return 200 <= self.code < 300


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path


@dataclass
class Cluster:
    """One control plane; ``start()`` returns it running, ``stop()`` ends every process it started."""

    workdir: Path
    cache: Path = field(default_factory=cache_dir)
    procs: list[Proc] = field(default_factory=list)
    server: str = ""
    ports: dict[str, int] = field(default_factory=dict)
    apiserver_args: list[str] = field(default_factory=list)
    scheduler_conf: Path = HACK / "volcano-scheduler.conf"
    """The configuration vc-scheduler starts with (a test may start it again with another one)."""

    @property
    def bin(self) -> Path:
        return self.cache / "bin"

    @property
    def certs(self) -> Path:
        return self.workdir / "pki"

    @property
    def logdir(self) -> Path:
        return self.workdir / "logs"

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "admin.kubeconfig"

    def component_kubeconfig(self, name: str) -> Path:
        """The kubeconfig of one of ``MASTERS`` (its own client certificate)."""
        path = self.workdir / f"{name}.kubeconfig"
        if not path.exists():
            kubeconfig(path, self.server, self.certs / "ca.crt", cert=self.certs / f"{name}.crt",
                       key=self.certs / f"{name}.key", user=name)
        return path

    @property
    def audit_log(self) -> Path:
        return self.logdir / "audit.jsonl"

    def _audit_policy(self) -> Path:
        """The API server's audit policy: every Eviction (with its body: the ``preconditions.uid`` it names) and
        every pod deletion, who asked and what the server answered; nothing else."""
        path = self.workdir / "audit-policy.json"
        path.write_text(json.dumps({
            "apiVersion": "audit.k8s.io/v1", "kind": "Policy", "omitStages": ["RequestReceived", "ResponseStarted"],
            "rules": [
                {"level": "Request", "verbs": ["create"], "resources": [{"group": "", "resources": ["pods/eviction"]}]},
                {"level": "Metadata", "verbs": ["delete", "deletecollection"],
                 "resources": [{"group": "", "resources": ["pods"]}]},
                {"level": "None"}]}), encoding="utf-8")
        return path

    def removals(self, namespace: str) -> list[Removal]:
        """Every eviction and pod deletion the API server was asked for in ``namespace``, in order (its audit
        log): who asked, the pod's name, the UID an eviction's preconditions name, the answer's code."""
        out: list[Removal] = []
        if not self.audit_log.exists():
            return out
        for line in self.audit_log.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue  # a line being written
            ref = event.get("objectRef") or {}
            if ref.get("namespace") != namespace or ref.get("resource") != "pods":
                continue
            body = event.get("requestObject") or {}
            uid = ((body.get("deleteOptions") or {}).get("preconditions") or {}).get("uid", "")
            received = event.get("requestReceivedTimestamp") or ""
            at = datetime.fromisoformat(received.replace("Z", "+00:00")).timestamp() if received else 0.0
            out.append(Removal(user=event.get("user", {}).get("username", ""), verb=event.get("verb", ""),
                               eviction=ref.get("subresource") == "eviction", pod=ref.get("name", ""), uid=uid,
                               code=int((event.get("responseStatus") or {}).get("code", 0)), at=at))
        return out

    # ---- processes ---------------------------------------------------------------------------

    def spawn(self, name: str, args: Sequence[str]) -> Proc:
        """Start one more process beside the cluster (its log in the cluster's, stopped with it or by ``end``)."""
        return self._spawn(name, args)

    def end(self, proc: Proc) -> None:
        """Stop one process started by ``spawn`` (by its PID)."""
        if proc.popen.poll() is None:
            proc.popen.send_signal(signal.SIGTERM)
        try:
            proc.popen.wait(10)
        except subprocess.TimeoutExpired:
            proc.popen.kill()
            proc.popen.wait(5)

    def _spawn(self, name: str, args: Sequence[str]) -> Proc:
        self.logdir.mkdir(parents=True, exist_ok=True)
        log = self.logdir / f"{name}.log"
        with log.open("ab") as fh:
            fh.write(f"$ {' '.join(args)}\n".encode())
            fh.flush()
            popen = subprocess.Popen(list(args), stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     cwd=self.workdir, start_new_session=True)
        proc = Proc(name, popen, log)
        self.procs.append(proc)
        return proc

    def _wait(self, what: str, ready: Callable[[], bool], timeout: float, proc: Proc | None = None) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc is not None and proc.popen.poll() is not None:
                raise RuntimeError(f"{proc.name} exited with {proc.popen.returncode} while waiting for {what}:\n"
                                   f"{self.tail(proc.name)}")
            try:
                if ready():
                    return
            except (OSError, urllib.error.URLError, subprocess.SubprocessError, ValueError):
                pass
            time.sleep(0.25)
        raise TimeoutError(f"{what} not ready after {timeout:.0f} s\n{self.tail(proc.name) if proc else ''}")

    def tail(self, name: str, lines: int = 40) -> str:
        log = self.logdir / f"{name}.log"
        if not log.exists():
            return ""
        text = log.read_text(encoding="utf-8", errors="replace").splitlines()
        return "\n".join(f"{name}| {t}" for t in text[-lines:])

    def logs(self, lines: int = 40) -> str:
        """The last lines of every process's log (what a failed test prints)."""
        return "\n".join(self.tail(p.name, lines) for p in self.procs)

    def stop(self) -> None:
        """SIGTERM each process this cluster started by its PID, newest first, one after the other (the API
        server's clients before it, so that it has no watch to drain); SIGKILL one still there after 10 s."""
        for proc in reversed(self.procs):
            self.end(proc)

    def restart_apiserver(self, down: float = 0.0, timeout: float = WAIT) -> float:
        """Stop kube-apiserver (SIGTERM, by its PID), wait ``down`` seconds, start it again with the same
        arguments on the same port (etcd keeps the state; its clients reconnect); the seconds it was not
        serving. The new process takes the old one's place in ``procs`` (stopped in the same order)."""
        i = next(i for i, p in enumerate(self.procs) if p.name == "kube-apiserver" and p.popen.poll() is None)
        stopped = time.monotonic()
        self.end(self.procs[i])
        time.sleep(down)
        proc = self._spawn("kube-apiserver", self.apiserver_args)
        self.procs.pop()
        self.procs[i] = proc
        self._wait("kube-apiserver /readyz again", lambda: self.get("/readyz") == "ok", timeout, proc)
        return time.monotonic() - stopped

    def alive(self) -> list[str]:
        return [p.name for p in self.procs if p.popen.poll() is None]

    # ---- clients -----------------------------------------------------------------------------

    def ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.certs / "ca.crt"))
        ctx.load_cert_chain(str(self.certs / "admin.crt"), str(self.certs / "admin.key"))
        return ctx

    def get(self, path: str, *, timeout: float = 30) -> Any:
        """GET an API path as the admin; the decoded JSON (or text)."""
        with urllib.request.urlopen(self.server + path, context=self.ssl_context(), timeout=timeout) as r:
            body = r.read().decode()
        try:
            return json.loads(body)
        except ValueError:
            return body

    def kubectl(self, *args: str, input: str | None = None, check: bool = True,
                kubeconfig: Path | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        cmd = [str(self.bin / "kubectl"), "--kubeconfig", str(kubeconfig or self.kubeconfig), *args]
        res = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout)
        if check and res.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)} failed ({res.returncode}):\n{res.stdout}{res.stderr}")
        return res

    def kubectl_json(self, *args: str) -> Any:
        return json.loads(self.kubectl(*args, "-o", "json").stdout)

    def kubectl_json_as(self, kubeconfig: Path, *args: str) -> Any:
        return json.loads(self.kubectl(*args, "-o", "json", kubeconfig=kubeconfig).stdout)

    def apply(self, docs: Sequence[dict[str, Any]] | str, *args: str) -> str:
        text = docs if isinstance(docs, str) else "\n---\n".join(json.dumps(d) for d in docs)
        return self.kubectl("apply", "-f", "-", *args, input=text).stdout

    def wait_for(self, what: str, ready: Callable[[], bool], timeout: float = WAIT) -> None:
        """Poll ``ready`` until it is true (errors count as not yet)."""
        self._wait(what, ready, timeout)

    def add_node(self, name: str, *, cpu: str = "32", memory: str = "256Gi", gpus: int = 0, pods: int = 110,
                 labels: dict[str, str] | None = None, extended: dict[str, str] | None = None) -> None:
        """A node that kwok manages (it marks it Ready and keeps its lease); ``gpus`` nvidia.com/gpu."""
        capacity = {"cpu": cpu, "memory": memory, "pods": str(pods), **(extended or {})}
        if gpus:
            capacity["nvidia.com/gpu"] = str(gpus)
        node = {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "annotations": {KWOK_ANNOTATION: "fake"},
                             "labels": {"kubernetes.io/hostname": name, "type": "kwok", **(labels or {})}},
                "spec": {},
                "status": {"capacity": capacity, "allocatable": capacity}}
        self.apply([node])

    def scheduler_args(self) -> list[str]:
        p = self.ports
        return [str(self.bin / "vc-scheduler"), "--kubeconfig", str(self.component_kubeconfig("vc-scheduler")),
                "--leader-elect=false",
                "--scheduler-conf", str(self.scheduler_conf), "--schedule-period", "1s",
                "--listen-address", f"127.0.0.1:{p['vc-scheduler']}",
                "--healthz-address", f"127.0.0.1:{p['vc-scheduler-healthz']}", "--enable-healthz=true",
                "--enable-metrics=true", "-v=2"]

    def scheduler_sessions(self) -> int:
        """How many scheduling sessions the running vc-scheduler has finished (its metrics; a restart counts
        from 0 again)."""
        url = f"http://127.0.0.1:{self.ports['vc-scheduler']}/metrics"
        with urllib.request.urlopen(url, timeout=30) as r:
            text = r.read().decode()
        return next((int(float(line.split()[-1])) for line in text.splitlines()
                     if line.startswith(SESSIONS_METRIC + " ")), 0)

    def wait_sessions(self, n: int, timeout: float = WAIT) -> None:
        """Wait until vc-scheduler has finished ``n`` more scheduling sessions than now, each of them opened
        after this call (a session in progress now is not counted): what "it has had its chances" means,
        whatever the machine's load makes a session last."""
        self.wait_for("vc-scheduler's metrics", lambda: self.scheduler_sessions() >= 0, timeout)
        first = self.scheduler_sessions() + 1  # the session in progress may have begun before this call
        self.wait_for(f"{n} sessions of vc-scheduler", lambda: self.scheduler_sessions() >= first + n, timeout)

    @contextlib.contextmanager
    def scheduler_configured(self, conf: Path) -> Iterator[Cluster]:
        """vc-scheduler started again with the configuration file ``conf``, which is also the cluster's
        volcano-scheduler ConfigMap (so that ``optplan snapshot`` carries it); back to the configuration before, and
        no ConfigMap, at the end."""
        self.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "volcano-system"}},
                    {"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": "volcano-scheduler-configmap", "namespace": "volcano-system"},
                     "data": {"volcano-scheduler.conf": conf.read_text()}}])
        before = self.scheduler_conf
        self.stop_scheduler()
        self.scheduler_conf = conf
        self.start_scheduler()
        try:
            yield self
        finally:
            self.stop_scheduler()
            self.scheduler_conf = before
            self.start_scheduler()
            self.kubectl("delete", "configmap", "volcano-scheduler-configmap", "-n", "volcano-system", check=False)

    def stop_scheduler(self) -> None:
        """Stop vc-scheduler (by its PID) until ``start_scheduler``; nothing is placed meanwhile."""
        for proc in [p for p in self.procs if p.name == "vc-scheduler"]:
            self.end(proc)
            self.procs.remove(proc)

    def start_scheduler(self) -> None:
        """Start vc-scheduler again (same arguments and ports) when ``stop_scheduler`` stopped it."""
        if not any(p.name == "vc-scheduler" and p.popen.poll() is None for p in self.procs):
            self._spawn("vc-scheduler", self.scheduler_args())

    # ---- start -------------------------------------------------------------------------------

    def start(self, timeout: float = WAIT) -> Cluster:
        """Start every component, each waited for; on any failure stop what was started and raise."""
        absent = missing(self.cache)
        if absent:
            raise FileNotFoundError(f"real-cluster binaries missing (run hack/cluster/build.sh): {', '.join(absent)}")
        for attempt in range(1, START_ATTEMPTS + 1):
            try:
                self._start(timeout)
                return self
            except (RuntimeError, TimeoutError) as exc:
                self.stop()
                if attempt == START_ATTEMPTS or "address already in use" not in f"{exc}\n{self.logs()}":
                    raise
                # A port was taken between its pick and its server's bind (by a process outside this run): start
                # again from nothing on other ports; the failed try's folder stays for its logs.
                failed = self.workdir.with_name(f"{self.workdir.name}-try{attempt}")
                shutil.rmtree(failed, ignore_errors=True)
                self.workdir.rename(failed)
                self.procs.clear()
            except BaseException:
                self.stop()
                raise
        raise AssertionError("unreachable")

    def _start(self, timeout: float) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        make_certs(self.certs)
        pki = self.certs
        p = self.ports = free_ports(("etcd", "etcd-peer", "apiserver", "kwok", "vc-scheduler", "vc-scheduler-healthz",
                                     "vc-controller-manager", "vc-controller-manager-healthz"))
        etcd_url, peer_url = f"http://127.0.0.1:{p['etcd']}", f"http://127.0.0.1:{p['etcd-peer']}"
        etcd = self._spawn("etcd", [
            str(self.bin / "etcd"), "--name", "realcluster", "--data-dir", str(self.workdir / "etcd"),
            "--listen-client-urls", etcd_url, "--advertise-client-urls", etcd_url,
            "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
            "--initial-cluster", f"realcluster={peer_url}", "--unsafe-no-fsync", "--log-level", "warn"])
        self._wait("etcd", lambda: b"true" in urllib.request.urlopen(etcd_url + "/health", timeout=2).read(),
                   timeout, etcd)

        self.server = f"https://127.0.0.1:{p['apiserver']}"
        kubeconfig(self.kubeconfig, self.server, pki / "ca.crt", cert=pki / "admin.crt", key=pki / "admin.key")
        self.apiserver_args = [
            str(self.bin / "kube-apiserver"), "--etcd-servers", etcd_url,
            "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1", "--secure-port", str(p["apiserver"]),
            "--tls-cert-file", str(pki / "server.crt"), "--tls-private-key-file", str(pki / "server.key"),
            "--client-ca-file", str(pki / "ca.crt"),
            "--authorization-mode", "Node,RBAC",
            "--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
            "--service-account-key-file", str(pki / "sa.pub"),
            "--service-account-signing-key-file", str(pki / "sa.key"),
            "--service-cluster-ip-range", SERVICE_CIDR, "--profiling=false", "-v=1",
            "--audit-policy-file", str(self._audit_policy()), "--audit-log-path", str(self.audit_log),
            "--audit-log-format", "json", "--audit-log-mode", "blocking", "--audit-log-maxsize", "0"]
        apiserver = self._spawn("kube-apiserver", self.apiserver_args)
        self._wait("kube-apiserver /readyz", lambda: self.get("/readyz") == "ok", timeout, apiserver)

        cm_kubeconfig = kubeconfig(self.workdir / "controller-manager.kubeconfig", self.server, pki / "ca.crt",
                                   cert=pki / "controller-manager.crt", key=pki / "controller-manager.key",
                                   user="system:kube-controller-manager")
        self._spawn("kube-controller-manager", [
            str(self.bin / "kube-controller-manager"), "--kubeconfig", str(cm_kubeconfig),
            "--leader-elect=false", "--secure-port=0", "--controllers=*",
            "--use-service-account-credentials=true",  # each controller as its own SA, as kubeadm runs it
            "--service-account-private-key-file", str(pki / "sa.key"), "--root-ca-file", str(pki / "ca.crt"),
            "--cluster-signing-cert-file", str(pki / "ca.crt"), "--cluster-signing-key-file", str(pki / "ca.key"),
            "--profiling=false", "-v=1"])

        # Volcano's CRDs (generated by build.sh), server-side: some are larger than the annotation that
        # client-side apply keeps.
        self.kubectl("apply", "--server-side", "-f", str(self.cache / "crds" / "volcano"))
        self.kubectl("wait", "--for=condition=Established", f"--timeout={WAIT:.0f}s", "crd", "--all",
                     timeout=WAIT + 30)
        # the namespace Volcano's installation makes (deploy/ holds a Role in it, over its scheduler ConfigMap)
        self.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "volcano-system"}}])

        self._spawn("kwok", [
            str(self.bin / "kwok"), "--kubeconfig", str(self.component_kubeconfig("kwok")),
            "--config", str(self.cache / "kwok" / "stages.yaml"),
            "--manage-nodes-with-annotation-selector", f"{KWOK_ANNOTATION}=fake",
            "--server-address", f"127.0.0.1:{p['kwok']}", "--node-ip", "127.0.0.1", "--cidr", "10.244.0.1/16"])

        self._spawn("vc-controller-manager", [
            str(self.bin / "vc-controller-manager"),
            "--kubeconfig", str(self.component_kubeconfig("vc-controller-manager")),
            "--leader-elect=false",
            "--listen-address", f"127.0.0.1:{p['vc-controller-manager']}",
            "--healthz-address", f"127.0.0.1:{p['vc-controller-manager-healthz']}", "--enable-healthz=true",
            "-v=2"])
        scheduler = self._spawn("vc-scheduler", self.scheduler_args())
        # vc-scheduler creates the queues "default" and "root" when it starts.
        self._wait("vc-scheduler (queue root)", lambda: self.kubectl(
            "get", "queue", "root", check=False).returncode == 0, timeout, scheduler)
        self._wait("namespace default's ServiceAccount", lambda: self.kubectl(
            "get", "serviceaccount", "default", "-n", "default", check=False).returncode == 0, timeout)
        # The root-CA publisher is a controller of its own: its ConfigMap can come seconds after the ServiceAccount.
        self._wait("namespace default's kube-root-ca.crt", lambda: self.kubectl(
            "get", "configmap", "kube-root-ca.crt", "-n", "default", check=False).returncode == 0, timeout)
        dead = [p.name for p in self.procs if p.popen.poll() is not None]
        if dead:
            raise RuntimeError(f"exited during start: {', '.join(dead)}\n{self.logs()}")


CODE = "import sys; from optplan.cli import main; sys.exit(main())"  # python -c CODE: the optplan CLI


def optplan(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run the optplan CLI of this checkout in a child process (stdout, stderr captured)."""
    return subprocess.run([sys.executable, "-c", CODE, *args], capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hack/cluster/up.sh", description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, default=None,
                        help="working folder (certificates, etcd data, logs); a new temporary one by default")
    parser.add_argument("--nodes", type=int, default=2, help="KWOK nodes to create (8 GPUs each)")
    args = parser.parse_args(argv)
    workdir = args.dir or Path(tempfile.mkdtemp(prefix="optplan-cluster-"))
    cluster = Cluster(workdir)
    print(f"starting in {workdir} (logs in {cluster.logdir}) ...", file=sys.stderr)
    started = time.monotonic()
    cluster.start()
    for i in range(args.nodes):
        cluster.add_node(f"kwok-node-{i}", gpus=8)
    print(f"up in {time.monotonic() - started:.1f} s: export KUBECONFIG={cluster.kubeconfig}", file=sys.stderr)
    print(f"processes: {', '.join(f'{p.name}={p.popen.pid}' for p in cluster.procs)}", file=sys.stderr)
    try:
        while not [p for p in cluster.procs if p.popen.poll() is not None]:
            time.sleep(1)
        print(f"a process exited:\n{cluster.logs()}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        cluster.stop()


if __name__ == "__main__":
    sys.exit(main())
