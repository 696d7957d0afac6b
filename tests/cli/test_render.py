"""optplan render: the cluster grid as a PNG, before (and after) a plan."""

from __future__ import annotations

import argparse
import struct
from pathlib import Path

import pytest
import yaml

from optplan.adapters import render
from optplan.adapters.kubefile import load_files, load_run_file
from optplan.cli import main
from optplan.cli import render as render_cli
from optplan.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
SYNTH = str(ROOT / "instances" / "synthetic-40.yaml")
SEED = str(ROOT / "instances" / "seed-dryrun.yaml")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def _run(argv: list[str]) -> tuple[str, argparse.Namespace]:
    p = argparse.ArgumentParser()
    render_cli.add_arguments(p)
    args = p.parse_args(argv)
    return render_cli.run(args, load_files(args.snapshots)), args


@pytest.fixture(scope="module")
def greedy_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What `optplan repack instances/synthetic-40.yaml --solver greedy` prints, in a file."""
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["repack", SYNTH, "--solver", "greedy", "-o", "yaml"]) == 0
    path = tmp_path_factory.mktemp("run") / "run.yaml"
    path.write_text(buf.getvalue(), encoding="utf-8")
    return path


def test_before_only_from_the_snapshot_alone(tmp_path: Path) -> None:
    out = tmp_path / "before.png"
    line, _ = _run([SEED, "-o", str(out)])
    assert "before only" in line and "3 huawei.com/ascend-1980 nodes" in line  # the run's goal resource
    width, height = _png_size(out)
    assert 400 <= width <= 2000 and 300 <= height <= 1200
    assert not list(tmp_path.glob(".*"))  # no temporary file left behind


def test_before_and_after_match_the_status(tmp_path: Path, greedy_run: Path) -> None:
    status = yaml.safe_load(greedy_run.read_text())["status"]["plan"]
    pod_moves = [p for mv in status["moves"] for p in mv["pods"]]
    out = tmp_path / "cluster.png"
    loaded = load_files([SYNTH])
    run = load_run_file(str(greedy_run))
    summary = render.render_cluster(loaded.snapshot, run, "nvidia.com/gpu", str(out))
    assert summary["after"] is True
    assert summary["nodes"] == status["summary"]["providerNodeCount"] == 40
    assert summary["freed"] == status["summary"]["freedNodeCount"] == len(status["freedNodes"])
    assert summary["moves"] == len(pod_moves)
    pairs = {(p["fromNode"], p["toNode"]) for p in pod_moves}
    assert summary["movesDrawn"] == len(pairs) and summary["movesListed"] == 0
    width, height = _png_size(out)
    assert width > height >= 600  # two grids side by side


def test_after_grid_frees_the_freed_nodes(greedy_run: Path) -> None:
    loaded = load_files([SYNTH])
    run = load_run_file(str(greedy_run))
    view = render.read_status(run)
    assert view is not None and view.freed_nodes
    used = {n: sum(p.request("nvidia.com/gpu") for p in loaded.snapshot.pods_by_node.get(n, ()))
            for n in view.freed_nodes}
    moved_out = {n: sum(m.milli for m in view.moves if m.from_node == n) for n in view.freed_nodes}
    assert used == moved_out  # every card on a freed node leaves it


def test_render_is_byte_identical(tmp_path: Path, greedy_run: Path) -> None:
    a, b = tmp_path / "a.png", tmp_path / "b.png"
    _run([SYNTH, "--run", str(greedy_run), "-o", str(a)])
    _run([SYNTH, "--run", str(greedy_run), "-o", str(b)])
    assert a.read_bytes() == b.read_bytes()
    assert b"matplotlib" not in a.read_bytes()  # no Software metadata


def test_many_moves_are_listed_not_drawn(tmp_path: Path, greedy_run: Path) -> None:
    doc = yaml.safe_load(greedy_run.read_text())
    pod = doc["status"]["plan"]["moves"][0]["pods"][0]
    doc["status"]["plan"]["moves"][0]["pods"] = [dict(pod, name=f"p{i}", cards=0) for i in range(render.MAX_ARROWS)]
    big = tmp_path / "big.yaml"
    big.write_text(yaml.safe_dump(doc), encoding="utf-8")
    line, _ = _run([SYNTH, "--run", str(big), "-o", str(tmp_path / "big.png")])
    assert "listed" in line
    run = load_run_file(str(big))
    summary = render.render_cluster(load_files([SYNTH]).snapshot, run, "nvidia.com/gpu", str(tmp_path / "b2.png"))
    assert summary["movesDrawn"] == 0 and summary["movesListed"] == render.MAX_LISTED
    assert summary["moves"] > render.MAX_ARROWS


def test_run_named_inside_the_snapshot_without_status_draws_before(tmp_path: Path) -> None:
    line, _ = _run([SYNTH, "--run", "synthetic-2", "-o", str(tmp_path / "x.png")])
    assert "before only" in line and "synthetic-2 has no status" in line


def test_run_file_without_a_repackrun_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="expected exactly one RepackRun, found 0"):
        _run([SYNTH, "--run", SEED.replace("seed-dryrun", "place-demo-job"), "-o", str(tmp_path / "x.png")])
    with pytest.raises(InputError, match="no RepackRun named 'nope'"):
        _run([SYNTH, "--run", "nope", "-o", str(tmp_path / "x.png")])
    assert not (tmp_path / "x.png").exists()


def test_unknown_resource_is_an_input_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"no node provides resource 'example\.com/tpu'"):
        _run([SYNTH, "--resource", "example.com/tpu", "-o", str(tmp_path / "x.png")])
    assert not (tmp_path / "x.png").exists()


def test_move_to_a_node_not_in_the_snapshot_is_an_input_error(tmp_path: Path, greedy_run: Path) -> None:
    doc = yaml.safe_load(greedy_run.read_text())
    doc["status"]["plan"]["moves"][0]["pods"][0]["toNode"] = "ghost-node"
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(doc), encoding="utf-8")
    with pytest.raises(InputError, match="ghost-node"):
        _run([SYNTH, "--run", str(bad), "-o", str(tmp_path / "x.png")])


def test_unwritable_output_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot write file"):
        _run([SEED, "-o", str(tmp_path / "missing-dir" / "x.png")])
