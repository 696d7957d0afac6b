"""The replay's preempt window (``experiments.replay.window``): on hand-made traces, small jobs submitted
while a large job's victims terminate take the freed cards and send it back to preempt; with the throttle
they wait at the platform and the large job binds at once. ``optplan replay --throttle`` reports both over
seeds; bad flags are one line, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from optplan.cli import main
from optplan.experiments.replay.trace import Trace, TraceGang, TracePod
from optplan.experiments.replay.window import DEBUG, LARGE, NORMAL, WindowConfig, compare, priorities, window
from optplan.experiments.sim.online import SimNode
from tests.experiments.test_replay_sweep import _trace_files


def gang(name: str, created: float, gpu: int, pods: int = 1, runtime: float = 10_000.0) -> TraceGang:
    return TraceGang(name, created, 1000, 1024, gpu, (), pods, tuple(TracePod(f"{name}-{i}", runtime)
                                                                      for i in range(pods)))


def stolen_window() -> Trace:
    """One 8-GPU node full of eight 1-card jobs; an 8-card (large) job at t=10; a 1-card job every 3 s from
    t=10.5: each takes a card a victim freed before the large job can bind."""
    gangs = [gang(f"s{i}", 0.0, 1) for i in range(8)] + [gang("big", 10.0, 8)]
    gangs += [gang(f"late{i:02d}", 10.5 + 3 * i, 1) for i in range(12)]
    return Trace("hand", (SimNode("n1", 96000, 786432, 8, ""),), tuple(gangs))


CFG = WindowConfig(debug_share=0.0, horizon=2000.0, grace=30.0)


def test_without_the_throttle_new_jobs_steal_the_freed_cards() -> None:
    off = window(stolen_window(), CFG).metrics
    on = window(stolen_window(), WindowConfig(**{**CFG.__dict__, "throttle": True})).metrics
    # without: the late jobs bind on the cards freed one by one; preempt runs again and again
    assert off["repeatRounds"] > 0 and off["evictions"] > 8
    # with: they wait at the platform; one round of eight victims, the large job binds when the last is gone
    assert (on["preemptRounds"], on["repeatRounds"], on["evictions"]) == (1, 0, 8)
    assert on["largeWaitMean"] <= 10.0 + 30.0 + 1.0  # arrival at 10, victims gone within 30 s, next cycle
    assert on["largeWaitMean"] < off["largeWaitMean"]
    assert on["modes"] == 1 and on["modesTimedOut"] == 0 and on["held"] > 0
    assert off["held"] == 0 and off["heldMean"] is None


def test_the_mode_times_out_and_releases_the_held_jobs() -> None:
    cfg = WindowConfig(**{**CFG.__dict__, "throttle": True, "timeout": 5.0, "grace": 60.0})
    m = window(stolen_window(), cfg).metrics
    assert m["modesTimedOut"] >= 1
    assert m["heldMean"] is not None and m["heldMean"] <= 5.0 + 1.0


def test_a_large_job_that_fits_starts_no_mode() -> None:
    gangs = (gang("big", 0.0, 8), *(gang(f"s{i}", 1.0 + i, 1) for i in range(4)))
    trace = Trace("fits", (SimNode("n1", 96000, 786432, 8, ""), SimNode("n2", 96000, 786432, 8, "")), gangs)
    m = window(trace, WindowConfig(throttle=True, debug_share=0.0, horizon=100.0)).metrics
    assert (m["modes"], m["held"], m["evictions"], m["largeWaitMean"]) == (0, 0, 0, 0.0)


def test_priorities_are_seeded_and_by_size() -> None:
    trace = stolen_window()
    p = priorities(trace, WindowConfig(debug_share=0.5, seed=3))
    assert p == priorities(trace, WindowConfig(debug_share=0.5, seed=3, throttle=True))
    assert [x for g, x in zip(trace.gangs, p, strict=True) if g.cards >= 8] == [LARGE]
    assert set(p) <= {LARGE, NORMAL, DEBUG} and DEBUG in p and NORMAL in p


def test_compare_pairs_seeds_with_intervals() -> None:
    doc = compare(lambda s: stolen_window(), [0, 1, 2], CFG)
    e = doc["metrics"]["largeWaitMean"]
    assert e["without"]["n"] == 3 and e["with"]["n"] == 3 and e["difference"]["mean"] < 0
    assert [r["seed"] for r in doc["runs"]] == [0, 1, 2]


def test_the_cli_writes_the_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nodes, pods = _trace_files(tmp_path)
    out = tmp_path / "out"
    assert main(["replay", "--throttle", "--nodes", nodes, "--pods", pods, "--throttle-seeds", "2",
                 "--large-cards", "4", "--no-plots", "-o", str(out)]) == 0
    doc = json.loads((out / "throttle.json").read_text())
    assert doc["seeds"] == [0, 1] and set(doc["metrics"]) >= {"largeWaitMean", "smallWaitMean"}
    md = (out / "throttle.md").read_text()
    assert "Reproduce: `optplan replay --throttle" in md and "| large-job wait, mean (min) |" in md
    again = tmp_path / "again"
    assert main(["replay", "--throttle", "--nodes", nodes, "--pods", pods, "--throttle-seeds", "2",
                 "--large-cards", "4", "--no-plots", "-o", str(again)]) == 0
    assert (again / "throttle.json").read_text() == (out / "throttle.json").read_text()


@pytest.mark.parametrize(("args", "field"), [
    (["--grace-seconds", "-1"], "--grace-seconds"),
    (["--cycle-seconds", "0"], "--cycle-seconds"),
    (["--debug-share", "2"], "--debug-share"),
    (["--policy", "interval"], "--policy"),
    (["--throttle-timeout", "nan"], "--throttle-timeout"),
])
def test_bad_flags_are_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str],
                                       field: str) -> None:
    nodes, pods = _trace_files(tmp_path)
    out = tmp_path / "out"
    assert main(["replay", "--throttle", "--nodes", nodes, "--pods", pods, *args, "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and field in err
    assert not out.exists()
