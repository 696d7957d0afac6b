"""benchmarks/controller_scale.py at a tiny size: the script runs end to end and its checks hold (the full
size is a benchmark, never run by the tests)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_controller_benchmark_runs_and_unrelated_pod_events_do_not_replan(tmp_path: Path) -> None:
    out = tmp_path / "scale.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))}
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "controller_scale.py"), "--nodes", "20",
                           "--burst", "100", "--settle", "1", "--timeout", "120", "--json", str(out)],
                          capture_output=True, text=True, env=env, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(out.read_text())
    assert report["objects"]["Node"] == 20
    assert report["list"]["resources"]["pods"]["objects"] == report["objects"]["Pod"]
    c = report["controller"]
    assert c["first_dryrun_phase"] == "Succeeded"
    assert c["burst_pods"] == 100 and c["plans_after_burst"] == 0 and c["plans_total"] == 2
    assert 0 < c["peak_rss_bytes"] < 2 * 2**30
    assert c["exit_code"] == 0  # stopped cleanly by SIGTERM
    assert "DryRun:  status Succeeded written" in proc.stdout
