"""optplan replay --sweep on a real Ray cluster on this machine: a head and one worker node started with
``ray start`` (each its own process group, ended by its id at the end), a sweep of 100 cells through
``--ray-address ray://127.0.0.1:PORT`` (Ray's client server) whose rows equal a serial run's, and the
worker node killed mid-sweep: its cells are run again on the head and the results are still identical.

Marked ``raycluster``; skipped when Ray (``pip install 'optplan[ray]'``) or its ``ray`` command is missing.
On 2 busy cores the cluster takes a while to start: one CPU per node, generous timeouts.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from optplan.cli.replay import load_trace
from optplan.experiments.replay import sweep
from optplan.experiments.replay.config import ReplayConfig
from tests.experiments.test_replay_sweep import _trace_files

pytest.importorskip("ray")
pytest.importorskip("ray.util.client")
RAY = shutil.which("ray", path=os.path.dirname(sys.executable)) or shutil.which("ray")
pytestmark = [pytest.mark.raycluster,
              pytest.mark.skipif(RAY is None, reason="the ray command is not installed")]
REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT = 240.0
SWEEP_TIMEOUT = 900.0
SPEC: dict[str, Any] = {"policies": ["none", "oracle", "nobinpack", "interval"],
                        "intervals": [1, 2, 3, 4, 5, 6, 7], "planners": ["greedy"], "seeds": list(range(10))}
"""10 seeds × (none, oracle, nobinpack and interval every 1..7 minutes) = 100 cells."""


def _free_ports(n: int) -> list[int]:
    """n distinct free ports: the sockets are held together while the kernel picks (one picked and closed
    can be handed out again)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for s in socks:
            s.close()


@dataclass
class RayCluster:
    head: subprocess.Popen[bytes]
    worker: subprocess.Popen[bytes]
    gcs: str
    client: str
    """``ray://127.0.0.1:PORT``."""
    env: dict[str, str]


def _start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """``ray start ... --block`` in a new session: its processes are one group, ended by that group's id."""
    with open(log, "wb") as f:
        return subprocess.Popen([str(RAY), "start", "--block", "--disable-usage-stats", *args], env=env,
                                stdout=f, stderr=subprocess.STDOUT, start_new_session=True)


def _stop(p: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
    """End ``ray start``'s process group (``sig`` first, then SIGKILL for what is left: its GCS server may
    outlive ``ray start`` itself)."""
    for s in (sig, signal.SIGKILL):
        try:
            os.killpg(p.pid, s)
        except ProcessLookupError:
            break
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(30)
        time.sleep(1)


def _wait_port(port: int, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"ray start ended ({proc.returncode}): {log.read_text()[-2000:]}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
            return
        except OSError:
            time.sleep(1)
    pytest.fail(f"Ray's port {port} did not open in {START_TIMEOUT:.0f} s: {log.read_text()[-2000:]}")


def _nodes_alive(env: dict[str, str], gcs: str) -> int:
    """Live nodes, asked from a separate process (the test process never joins the cluster itself)."""
    code = (f"import ray, logging; ray.init(address={gcs!r}, logging_level=logging.ERROR, log_to_driver=False); "
            "print(sum(1 for n in ray.nodes() if n['Alive']))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=180)
    return int(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 and out.stdout.strip() else 0


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[RayCluster]:
    tmp = Path(tempfile.mkdtemp(prefix="rt", dir="/tmp"))  # short: Ray's socket paths have a length limit
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
           "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}
    # Ray >= 2.52 turns token authentication on when ~/.ray/auth_token exists (a local ray.init() writes one);
    # this cluster listens on 127.0.0.1 only and every process of the test gets the same explicit mode
    port, client = _free_ports(2)
    gcs = f"127.0.0.1:{port}"
    head = _start(["--head", f"--port={port}", f"--ray-client-server-port={client}", "--node-ip-address=127.0.0.1",
                   "--num-cpus=1", "--include-dashboard=false", "--object-store-memory=100000000",
                   f"--temp-dir={tmp}"], env, tmp / "head.log")
    worker = None
    try:
        _wait_port(port, head, tmp / "head.log")
        _wait_port(client, head, tmp / "head.log")
        worker = _start([f"--address={gcs}", "--node-ip-address=127.0.0.1", "--num-cpus=1",
                         "--object-store-memory=100000000"], env, tmp / "worker.log")
        deadline = time.monotonic() + START_TIMEOUT
        while _nodes_alive(env, gcs) < 2:
            if worker.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the worker node did not join: {(tmp / 'worker.log').read_text()[-2000:]}")
            time.sleep(2)
        yield RayCluster(head, worker, gcs, f"ray://127.0.0.1:{client}", env)
    finally:
        if worker is not None:
            _stop(worker)
        _stop(head)
        if os.environ.get("OPTPLAN_KEEP_RAY_LOGS"):
            shutil.copytree(tmp / "session_latest" / "logs", os.environ["OPTPLAN_KEEP_RAY_LOGS"], dirs_exist_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)


def _sweep_files(tmp: Path) -> Path:
    _trace_files(tmp)
    spec = tmp / "sweep.yaml"
    spec.write_text(json.dumps({**SPEC, "traces": [{"name": "t", "nodes": "nodes.csv", "pods": "pods.csv"}]}))
    return spec


def _serial_rows(tmp: Path) -> dict[str, dict[str, Any]]:
    n, p = str(tmp / "nodes.csv"), str(tmp / "pods.csv")
    traces = {s: load_trace(n, p, seed=s, name="t") for s in SPEC["seeds"]}
    cells = sweep.grid(SPEC, ["t"], ReplayConfig())
    assert len(cells) == 100
    out = sweep.run_grid(cells, lambda c: traces[c.seed], executor="serial")
    assert not out.failed
    return out.rows


def _rows(out: Path) -> dict[str, dict[str, Any]]:
    return sweep.read_results(str(out / "cells.jsonl"))


def _run(spec: Path, address: str, out: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "optplan.cli", "replay", "--sweep", str(spec), "--ray-address",
                             address, "--retries", "3", "-o", str(out)], env=env, cwd=spec.parent,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_a_sweep_of_100_cells_through_ray_client_equals_a_serial_run(ray_cluster: RayCluster, tmp_path: Path) -> None:
    spec = _sweep_files(tmp_path)
    out = tmp_path / "out"
    proc = _run(spec, ray_cluster.client, out, ray_cluster.env)
    log, _ = proc.communicate(timeout=SWEEP_TIMEOUT)
    assert proc.returncode == 0, log
    rows = _rows(out)
    assert rows == _serial_rows(tmp_path)
    doc = json.loads((out / "sweep.json").read_text())
    assert "100 cells, 100 done, 0 failed" in (out / "sweep.md").read_text(), doc


def test_a_worker_killed_mid_sweep_its_cells_are_retried_and_the_results_identical(
        ray_cluster: RayCluster, tmp_path: Path) -> None:
    spec = _sweep_files(tmp_path)
    out = tmp_path / "out"
    proc = _run(spec, ray_cluster.client, out, ray_cluster.env)
    deadline = time.monotonic() + SWEEP_TIMEOUT
    while not (out / "cells.jsonl").exists() or len(_rows(out)) < 5:  # the sweep is under way on both nodes
        assert proc.poll() is None, proc.communicate()[0]
        assert time.monotonic() < deadline, "no cell finished"
        time.sleep(0.2)
    done_before = len(_rows(out))
    _stop(ray_cluster.worker, signal.SIGKILL)  # the worker node and every task running on it end at once
    assert ray_cluster.worker.poll() is not None
    log, _ = proc.communicate(timeout=SWEEP_TIMEOUT)
    assert proc.returncode == 0, log
    assert done_before < 100, "the sweep ended before the worker was killed: nothing tested"
    assert "100 cells, 100 done, 0 failed" in (out / "sweep.md").read_text()
    assert _rows(out) == _serial_rows(tmp_path)
