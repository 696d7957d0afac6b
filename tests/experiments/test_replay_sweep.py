"""optplan replay --sweep: the grid, identical results under the serial, process-pool and Ray executors,
confidence intervals, differences from none, resume from the results file, failed cells reported."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from optplan.cli import main
from optplan.cli.replay import load_trace
from optplan.errors import InputError
from optplan.experiments.replay import sweep
from optplan.experiments.replay.config import ReplayConfig
from optplan.experiments.replay.trace import Trace

HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time,deletion_time,scheduled_time\n"


def _trace_files(tmp: Path) -> tuple[str, str]:
    """Six 4-GPU nodes; one-card pods (cut into seeded gangs) with a 4-card pod every sixth: the whole-node
    pods wait for scattered cards, so Repack has work and the seeds differ."""
    nodes = tmp / "nodes.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\n" + "".join(f"n{i},64000,262144,4,V100\n" for i in range(6)))
    pods = tmp / "pods.csv"
    rows = []
    for k in range(60):
        g = 4 if k % 6 == 5 else 1
        rows.append(f"p{k:03d},1000,1024,{g},1000,{20 * k},{20 * k + 60 + (k * 137) % 700},{20 * k}\n")
    pods.write_text(HEADER + "".join(rows))
    return str(nodes), str(pods)


SPEC: dict[str, Any] = {"policies": ["none", "interval"], "intervals": [2, 5], "budgets": [{}, {"podGroups": 1}],
                        "planners": ["greedy"], "seeds": [0, 1, 2]}


def _cells(tmp: Path) -> tuple[list[sweep.Cell], dict[tuple[str, int], Trace]]:
    n, p = _trace_files(tmp)
    traces = {("t", s): load_trace(n, p, seed=s, name="t") for s in (0, 1, 2)}
    # free restarts (the moved pod alone, nothing lost, no restore time): Repack gains allocation on this trace
    return sweep.grid(SPEC, ["t"], ReplayConfig(time_limit=2, restart="pod", checkpoint=0,
                                                      restart_delay=0)), traces


def test_grid_dedupes_none_and_names_every_cell(tmp_path: Path) -> None:
    cells, _ = _cells(tmp_path)
    assert len(cells) == 3 * (1 + 2 * 2)
    assert len({c.key for c in cells}) == len(cells)
    assert "t / interval every 2m / greedy / pg=1 / seed 0" in {c.key for c in cells}


def test_pool_and_serial_give_identical_results(tmp_path: Path) -> None:
    cells, traces = _cells(tmp_path)
    serial = sweep.run_grid(cells, lambda c: traces[c.trace, c.seed], executor="serial")
    pool = sweep.run_grid(cells, _Lookup(traces), executor="pool", workers=2)
    assert not serial.failed and not pool.failed
    assert json.dumps(serial.rows, sort_keys=True) == json.dumps(pool.rows, sort_keys=True)
    assert sum(r["repack"]["runsWithMoves"] for r in pool.rows.values()) > 0  # Repack moved pods
    assert len({r["metrics"]["allocationPercent"] for r in pool.rows.values() if r["policy"] == "none"}) == 3
    table = sweep.aggregate(pool.rows)
    none = next(e for e in table if e["policy"] == "none")
    assert none["metrics"]["allocationPercent"]["n"] == 3 and none["vsNone"] == {}
    other = next(e for e in table if e["group"] == "t / interval every 2m / greedy / unlimited")
    assert other["vsNone"]["allocationPercent"]["n"] == 3
    assert other["vsNone"]["allocationPercent"]["mean"] > 0 and other["vsNone"]["allocationPercent"]["ci95"] > 0


class _Lookup:
    def __init__(self, traces: dict[tuple[str, int], Trace]) -> None:
        self.traces = traces

    def __call__(self, c: sweep.Cell) -> Trace:
        return self.traces[c.trace, c.seed]


@pytest.mark.raycluster  # starts a local Ray instance: slow to start on a loaded machine
def test_ray_gives_the_same_results(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    cells, traces = _cells(tmp_path)
    cells = cells[:2]
    serial = sweep.run_grid(cells, _Lookup(traces), executor="serial")
    on_ray = sweep.run_grid(cells, _Lookup(traces), executor="ray")
    assert json.dumps(serial.rows, sort_keys=True) == json.dumps(on_ray.rows, sort_keys=True)


def test_unreachable_ray_address_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("ray")
    _trace_files(tmp_path)
    spec = tmp_path / "sweep.yaml"
    spec.write_text(json.dumps({"policies": ["none"], "traces": [{"name": "t", "nodes": "nodes.csv",
                                                                  "pods": "pods.csv"}]}))
    out = tmp_path / "out"
    assert main(["replay", "--sweep", str(spec), "--ray-address", "127.0.0.1:1", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "cannot reach Ray at 127.0.0.1:1" in err and err.count("\n") == 1
    assert not out.exists()


def test_mean_and_ci() -> None:
    s = sweep.mean_ci([1.0, 2.0, 3.0])
    assert s["mean"] == 2.0 and s["ci95"] == round(4.303 * 1 / 3 ** 0.5, 6)
    assert sweep.mean_ci([5.0]) == {"n": 1, "mean": 5.0, "ci95": None}


def test_resume_skips_done_cells_and_failures_are_reported(tmp_path: Path) -> None:
    cells, traces = _cells(tmp_path)
    results = str(tmp_path / "cells.jsonl")
    first = sweep.run_grid(cells[:3], _Lookup(traces), executor="serial", results_path=results)
    assert len(first.rows) == 3
    def lines() -> int:
        return Path(results).read_text().count("\n")

    again = sweep.run_grid(cells, _Lookup(traces), executor="serial", results_path=results)
    assert len(again.rows) == len(cells) and lines() == len(cells)  # only the missing cells ran
    changed = [replace(c, config=replace(c.config, restart_delay=1)) for c in cells[:2]]
    sweep.run_grid(changed, _Lookup(traces), executor="serial", results_path=results)
    assert lines() == len(cells) + 2  # a changed setting is not taken from the file
    sweep.run_grid(changed, _Lookup(traces), executor="serial", results_path=results)
    assert lines() == len(cells) + 2
    sweep.code_digest.cache_clear()  # another version of optplan's code: no row of the file is its result
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sweep, "code_digest", lambda: "another-version")
        sweep.run_grid(changed, _Lookup(traces), executor="serial", results_path=results)
    assert lines() == len(cells) + 4
    bad = replace(cells[0].config)
    object.__setattr__(bad, "horizon", -1.0)  # a cell that raises when it runs
    broken = [replace(cells[0], config=bad)]
    out = sweep.run_grid(broken, _Lookup(traces), executor="serial", retries=1)
    assert list(out.failed) == [broken[0].key] and out.attempts[broken[0].key] == 2


def test_sweep_command_writes_the_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _trace_files(tmp_path)
    spec = tmp_path / "sweep.yaml"
    spec.write_text(json.dumps({**SPEC, "seeds": [0, 1], "intervals": [2], "budgets": [{}], "timeLimit": 2,
                                "warmupHours": 0.01,
                                "traces": [{"name": "tiny", "nodes": "nodes.csv", "pods": "pods.csv"}]}))
    out = tmp_path / "out"
    assert main(["replay", "--sweep", str(spec), "--workers", "1", "-o", str(out)]) == 0
    doc = json.loads((out / "sweep.json").read_text())
    assert doc["cells"] == 4 and doc["done"] == 4 and doc["failed"] == {}
    md = (out / "sweep.md").read_text()
    assert "tiny / interval every 2m / greedy / unlimited" in md
    # the file echoes every shared setting (the warm-up included), so the sweep is reproducible from it
    assert doc["sweep"]["warmupHours"] == 0.01 and doc["sweep"]["restart"] == "RestartJob"
    assert doc["sweep"]["policies"] == ["none", "interval"] and 'warmupHours 0.01' in md
    assert "completionMeanMinutes8" in json.loads((out / "cells.jsonl").read_text().splitlines()[0])["metrics"]
    assert doc["frontier"]["tiny"]["usefulPercent vs cardsDisruptedPerDay"]  # none at least: zero disruption
    assert "## The frontier" in md and (out / "frontier-tiny.png").read_bytes()[:4] == b"\x89PNG"
    assert main(["replay", "--sweep", str(spec), "--workers", "1", "-o", str(out)]) == 0  # resumes: nothing to run
    assert (out / "cells.jsonl").read_text().count("\n") == 4


def test_bad_sweep_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    n, p = _trace_files(tmp_path)
    spec = tmp_path / "sweep.yaml"
    spec.write_text(json.dumps({"policies": ["none", "sometimes"], "traces": [{"name": "t", "nodes": n, "pods": p}]}))
    assert main(["replay", "--sweep", str(spec), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "unknown policy 'sometimes'" in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_grids_are_a_union_of_small_grids(tmp_path: Path) -> None:
    spec = {"policies": ["none"], "planners": ["greedy"], "seeds": [0],
            "grids": [{"policies": ["interval"], "intervals": [30, 60]},
                      {"policies": ["pending"], "pendingAfter": [10], "intervals": [60],
                       "planners": ["karpenter-balanced"], "budgets": [{"podGroups": 2}]},
                      {"policies": ["pending", "interval"], "pendingAfter": [5], "intervals": [10],
                       "pendingCards": [8]},
                      {"policies": ["none", "oracle"]}]}
    keys = [c.key for c in sweep.grid(spec, ["t"], ReplayConfig())]
    assert keys == sorted(["t / interval every 30m / greedy / unlimited / seed 0",
                           "t / interval every 60m / greedy / unlimited / seed 0",
                           "t / interval every 10m / greedy / unlimited / seed 0",
                           "t / pending after 10m, cooldown 60m / karpenter-balanced / pg=2 / seed 0",
                           "t / pending after 5m, cooldown 10m, gangs of 8+ cards / greedy / unlimited / seed 0",
                           "t / none / seed 0", "t / oracle / seed 0"])
    with pytest.raises(InputError, match="each entry") as e:
        sweep.grid({"grids": [{"seeds": [1]}]}, ["t"], ReplayConfig())
    assert e.value.field == "grids[0]"
    with pytest.raises(InputError) as e:
        sweep.grid({"grids": [{"intervals": [-1]}]}, ["t"], ReplayConfig())
    assert e.value.field == "grids[0].intervals"
    with pytest.raises(InputError) as e:
        sweep.grid({"grids": [{"policies": ["pending"], "pendingCards": [-1]}]}, ["t"], ReplayConfig())
    assert e.value.field == "grids[0].pendingCards"


@pytest.mark.parametrize(("points", "expected"), [
    # (name, benefit higher is better, cost lower is better)
    ([("a", 1, 0), ("b", 2, 1), ("c", 1.5, 2), ("d", 3, 5)], ["a", "b", "d"]),  # c: b is better and cheaper
    ([("a", 1, 0), ("b", 1, 1)], ["a"]),  # same benefit, dearer: dominated
    ([("a", 1, 0), ("b", 1, 0)], ["a", "b"]),  # equal points: neither dominates
    ([("a", 2, 0), ("b", 1, 1)], ["a"]),
])
def test_pareto(points: list[tuple[str, float, float]], expected: list[str]) -> None:
    assert sweep.pareto(points) == expected


def _entry(group: str, policy: str, **means: float) -> dict[str, Any]:
    return {"group": group, "trace": group.split(" / ")[0], "policy": policy, "seeds": [0],
            "metrics": {m: {"n": 1, "mean": means.get(m), "ci95": None} for m in sweep.METRICS}, "vsOracle": {}}


def test_frontier_keeps_none_and_leaves_out_the_references() -> None:
    zero = {"cardsDisruptedPerDay": 0.0, "restartGpuHoursPercent": 0.0}
    table = [_entry("t / none", "none", completionMeanMinutes8=100, usefulPercent=80, **zero),
             _entry("t / oracle", "oracle", completionMeanMinutes8=50, usefulPercent=85, **zero),
             _entry("t / nobinpack", "nobinpack", completionMeanMinutes8=120, usefulPercent=78, **zero),
             _entry("t / interval every 60m / greedy / unlimited", "interval", completionMeanMinutes8=90,
                    usefulPercent=81, cardsDisruptedPerDay=3000, restartGpuHoursPercent=0.1),
             _entry("t / pending after 30m, cooldown 60m / greedy / unlimited", "pending",
                    completionMeanMinutes8=80, usefulPercent=80.5, cardsDisruptedPerDay=100,
                    restartGpuHoursPercent=0.01)]
    fr = sweep.frontier(table)["t"]
    assert fr["completionMeanMinutes8 vs cardsDisruptedPerDay"] == [
        "t / none", "t / pending after 30m, cooldown 60m / greedy / unlimited"]  # interval: dearer and slower
    assert fr["usefulPercent vs cardsDisruptedPerDay"] == [
        "t / none", "t / pending after 30m, cooldown 60m / greedy / unlimited",
        "t / interval every 60m / greedy / unlimited"]
    panels = sweep.frontier_panels(table, {"t": fr}, "t")
    assert len(panels) == 4 and panels[0]["oracle"] == 50
    assert {p["setting"] for p in panels[0]["points"]} == {
        "none", "interval every 60m / greedy / unlimited", "pending after 30m, cooldown 60m / greedy / unlimited"}
    md = sweep.frontier_markdown(table, {"t": fr})
    assert "| pending after 30m, cooldown 60m / greedy / unlimited | 1 | 80.0 |" in md
