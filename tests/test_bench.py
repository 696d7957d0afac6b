"""``optplan bench`` on its hidden tiny suite: the report, the JSON and the plots are written."""

from __future__ import annotations

import json
from pathlib import Path

from optplan import bench
from optplan.cli import build_parser

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def test_bench_tiny_writes_report_json_and_plots(tmp_path: Path) -> None:
    out = tmp_path / "out"
    argv = ["bench", "--tiny", "--out", str(out)]
    if DATA.is_dir():
        argv += ["--data", str(DATA)]
    args = build_parser().parse_args(argv)
    assert args.verbose == 0
    text = bench.run(args)
    assert "report.md" in text

    results = json.loads((out / "results.json").read_text())
    assert {"repack", "bpplib", "scaling", "machine", "suite"} <= set(results)
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
        assert planners == ["greedy-fast", "karpenter", "cluster-autoscaler", "descheduler"]
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


def test_bench_skips_sections_without_data(tmp_path: Path) -> None:
    suite = bench.Suite("t", (90.0,), (0.2,), (bench.NO_BUDGET,), ("greedy-fast",), False, 1.0,
                        (), 0, 1.0, (30,), 1.0)
    bench.run_suite(suite, tmp_path / "nodata", tmp_path / "o")
    results = json.loads((tmp_path / "o" / "results.json").read_text())
    assert "skipped" in results["repack"] and "skipped" in results["bpplib"]
    assert not (tmp_path / "o" / "repack_freed.png").exists()
    md = (tmp_path / "o" / "report.md").read_text()
    assert md.count("Skipped:") == 2


def test_budget_is_set_on_the_repack_run() -> None:
    objs = [{"kind": "Node"}, {"kind": "RepackRun", "spec": {"mode": "DryRun"}}]
    out = bench._with_budget(objs, bench.Budget("b", 2, 8))
    assert out[1]["spec"]["maxPerRun"] == {"podGroups": 2, "resources": {"nvidia.com/gpu": "8"}}
    assert "maxPerRun" not in objs[1]["spec"]
    assert bench._with_budget(objs, bench.NO_BUDGET) is objs
