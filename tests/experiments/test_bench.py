"""``optplan bench`` on its hidden tiny suite: the report, the JSON and the plots are written."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path

import pytest

from optplan.cli import bench as bench_cli
from optplan.cli import build_parser
from optplan.errors import InputError
from optplan.experiments import bench
from optplan.solvers.core import registry

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"


def test_bench_tiny_writes_report_json_and_plots(tmp_path: Path) -> None:
    out = tmp_path / "out"
    argv = ["bench", "--tiny", "--out", str(out)]
    if DATA.is_dir():
        argv += ["--data", str(DATA)]
    args = build_parser().parse_args(argv)
    assert args.verbose == 0
    text = bench_cli.run(args)
    assert "report.md" in text

    results = json.loads((out / "results.json").read_text())
    assert {"repack", "bpplib", "scaling", "placement", "machine", "suite"} <= set(results)
    assert results["suite"] == "tiny"
    runs = results["scaling"]["runs"]
    assert [(r["nodes"], r["planner"]) for r in runs] == [
        (30, "greedy-fast"), (30, "auto"), (60, "greedy-fast"), (60, "auto")]
    assert all(r["wallSeconds"] >= 0 and r["freed"] >= 0 for r in runs)
    assert any(r["variables"] for r in runs if r["planner"] == "auto")

    md = (out / "report.md").read_text()
    assert "## 3. Scaling on generated clusters" in md
    assert "| nodes | pods | planner |" in md
    assert (out / "scaling.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "![scaling.png](scaling.png)" in md

    openb = DATA / "openb" / "openb_node_list_gpu_node.csv"
    if openb.is_file():
        (scenario,) = results["repack"]["scenarios"]
        planners = [r["planner"] for r in scenario["runs"]]
        assert planners == ["greedy-fast", "karpenter", "karpenter-balanced", "cluster-autoscaler", "descheduler"]
        assert all(isinstance(r["violations"], int) for r in scenario["runs"])
        assert scenario["runs"][0]["freed"] > 0
        assert "| planner | freed |" in md
        for png in ("repack_freed.png", "repack_wall.png"):
            assert (out / png).is_file()
            assert f"![{png}]({png})" in md
    else:
        assert "skipped" in results["repack"]
        assert "Skipped:" in md
    if (DATA / "bpplib" / "instance_index.csv").is_file():
        (fam,) = results["bpplib"]["families"]
        assert fam["instances"] == 2 and fam["proven"] == fam["matched"] == 2
        assert "| family | instances |" in md
    else:
        assert "skipped" in results["bpplib"]

    pl = results["placement"]
    assert "## 4. Online placement (openb, 130% arrivals)" in md
    if openb.is_file():
        assert pl["nodeStride"] == 8 and pl["nodes"] == 152 and pl["seeds"] == [0]
        assert [r["policy"] for r in pl["policies"]] == list(registry.names(registry.SIM))
        assert all(90.0 < r["allocPercent"] <= 100.0 for r in pl["policies"])
        assert all(r["arrivals"] == pl["runs"][0]["arrivals"] for r in pl["runs"])  # one stream for all policies
        assert pl["runs"][0]["requestedGpus"] <= 1.3 * pl["gpus"] < pl["runs"][0]["requestedGpus"] + 8
        assert "| policy | GPU alloc % (mean) |" in md and "every 8th node" in md
        assert (out / "placement.png").is_file() and "![placement.png](placement.png)" in md
        if (DATA / bench.FGD_EXPECTED).is_file():
            assert [r["policy"] for r in pl["published"]["rows"]] == ["FGD", "BestFit", "GpuPacking", "DotProd",
                                                                     "Random"]
            assert "**Published (FGD paper, ATC'23), not our result**" in md
    else:
        assert "skipped" in pl


def test_bench_skips_sections_without_data(tmp_path: Path) -> None:
    suite = bench.Suite("t", (90.0,), (0.2,), (bench.NO_BUDGET,), ("greedy-fast",), 1.0,
                        (), 0, 1.0, (30,), 1.0)
    bench.run_suite(suite, tmp_path / "nodata", tmp_path / "o")
    results = json.loads((tmp_path / "o" / "results.json").read_text())
    assert all("skipped" in results[s] for s in ("repack", "bpplib", "placement", "goals", "shared", "goal-shares"))
    assert not (tmp_path / "o" / "repack_freed.png").exists()
    assert not (tmp_path / "o" / "placement.png").exists()
    assert not (tmp_path / "o" / "goals.png").exists()
    md = (tmp_path / "o" / "report.md").read_text()
    assert md.count("Skipped:") == 6


def test_sections_run_alone(tmp_path: Path) -> None:
    args = build_parser().parse_args(["bench", "--tiny", "--sections", "placement", "--data", str(tmp_path),
                                      "--out", str(tmp_path / "o")])
    bench_cli.run(args)
    results = json.loads((tmp_path / "o" / "results.json").read_text())
    for section in ("repack", "bpplib", "scaling"):
        assert results[section] == {"skipped": "not among --sections"}
    assert results["placement"]["skipped"].startswith("no openb/")
    assert not (tmp_path / "o" / "scaling.png").exists()
    args.sections = "placement,nope"
    with pytest.raises(InputError, match="unknown section 'nope'"):
        bench_cli.run(args)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_a_bar_on_a_terminal_and_quiet_when_piped(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="optplan")
    tty = _Terminal()
    with bench.Progress("repack", 4, stream=tty) as bar:
        assert "0/4" in bar.line() and "ETA ?" in bar.line()
        bar.start("fill 90: auto")
        bar.advance()
        assert "[######..................] 1/4" in bar.line() and "ETA 0:" in bar.line()
        bar.set(4)
    out = tty.getvalue()
    assert out.startswith("\r") and out.endswith("\n") and out.count("\n") == 1
    assert "fill 90: auto" in out and "4/4" in out and "elapsed" in out
    piped = io.StringIO()
    with bench.Progress("repack", 4, stream=piped) as bar:
        bar.start("fill 90: auto")
        bar.advance(4)
    assert piped.getvalue() == ""


def test_progress_logs_one_line_per_step_with_verbose(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="optplan")
    tty = _Terminal()
    with bench.Progress("scaling", 2, stream=tty) as bar:
        bar.start("100 nodes: auto")
        bar.advance(2)
    assert tty.getvalue() == ""  # -v: log lines instead of a bar
    assert [r.getMessage() for r in caplog.records] == ["bench: scaling: 100 nodes: auto"]


def test_fgd_published_rows_match_the_papers_summary() -> None:
    path = DATA / bench.FGD_EXPECTED
    if not path.is_file():
        pytest.skip("no fgd-expected data")
    rows = {r["policy"]: r for r in bench.fgd_published(path)}
    assert {k: r["allocPercent"] for k, r in rows.items()} == {
        "FGD": 95.39, "BestFit": 93.08, "GpuPacking": 92.00, "DotProd": 90.85, "Random": 87.47}
    assert all(r["seeds"] == 10 and r["minPercent"] <= r["allocPercent"] <= r["maxPercent"] for r in rows.values())


def test_budget_is_set_on_the_repack_run() -> None:
    objs = [{"kind": "Node"}, {"kind": "RepackRun", "spec": {"mode": "DryRun"}}]
    out = bench._with_budget(objs, bench.Budget("b", 2, 8))
    assert out[1]["spec"]["maxPerRun"] == {"podGroups": 2, "resources": {"nvidia.com/gpu": "8"}}
    assert "maxPerRun" not in objs[1]["spec"]
    assert bench._with_budget(objs, bench.NO_BUDGET) is objs
