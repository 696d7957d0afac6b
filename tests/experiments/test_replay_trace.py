"""Times from another trace (``optplan replay --times-from``): a pod list without time columns takes its
pods' times by name from a trace that has them; pods it does not name are dropped and counted, or take
a same-shape donor's times; bad input is one line and exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from optplan.cli import main
from optplan.cli.replay import load_trace
from optplan.errors import InputError
from optplan.experiments.replay.trace import PodTimes, borrow_times

SINGLE = ((1, 1.0),)  # every pod its own gang
TIMED = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time,deletion_time,scheduled_time\n"
UNTIMED = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"


def _files(tmp: Path) -> tuple[str, str, str]:
    """One 8-GPU node; a timed trace (a: 1 GPU at 0 for 100 s, b: 2 GPUs at 10 for 50 s, c: never
    scheduled, d: 2 GPUs at 30 for 20 s) and the same pods without times plus x and y (2 GPUs, b's shape)
    and z (4 GPUs, a shape the timed trace lacks)."""
    nodes = tmp / "nodes.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\nn1,64000,262144,8,V100\n")
    timed = tmp / "timed.csv"
    timed.write_text(TIMED + "a,1000,1024,1,1000,0,100,0\nb,2000,2048,2,1000,10,60,10\nc,1000,1024,1,1000,20,,\n"
                     "d,2000,2048,2,1000,30,50,30\n")
    untimed = tmp / "untimed.csv"
    untimed.write_text(UNTIMED + "a,1000,1024,1,1000\nb,2000,2048,2,1000\nc,1000,1024,1,1000\n"
                       "d,2000,2048,2,1000\nx,2000,2048,2,1000\ny,2000,2048,2,1000\nz,4000,4096,4,1000\n")
    return str(nodes), str(timed), str(untimed)


def _arrivals(n: str, p: str, times: str, unmatched: str) -> list[tuple[float, str, float]]:
    t = load_trace(n, p, gang_sizes=SINGLE, times_from=times, unmatched=unmatched)
    return [(g.created, g.pods[0].name, g.pods[0].runtime) for g in t.gangs]


def test_times_are_taken_by_name_and_unmatched_pods_dropped_and_counted(tmp_path: Path) -> None:
    n, timed, untimed = _files(tmp_path)
    t = load_trace(n, untimed, gang_sizes=SINGLE, times_from=timed)
    assert [(g.created, g.pods[0].name, g.pods[0].runtime) for g in t.gangs] == [
        (0.0, "a", 100.0), (10.0, "b", 50.0), (30.0, "d", 20.0)]
    # the same replay as the timed trace itself
    own = load_trace(n, timed, gang_sizes=SINGLE)
    assert [(g.created, g.pods) for g in own.gangs] == [(g.created, g.pods) for g in t.gangs]
    assert t.stats["timesByName"] == 4 and t.stats["timesDropped"] == 3
    assert t.stats["tracePods"] == 7 and t.stats["leftOutUnscheduled"] == 1  # c: no runtime in the timed trace


def test_unmatched_pods_can_take_a_same_shape_donors_times_in_turn(tmp_path: Path) -> None:
    n, timed, untimed = _files(tmp_path)
    # x and y have b's and d's shape: in name order x takes b's times, y d's; z (4 GPUs) has no donor
    assert _arrivals(n, untimed, timed, "shape") == [
        (0.0, "a", 100.0), (10.0, "b", 50.0), (10.0, "x", 50.0), (30.0, "d", 20.0), (30.0, "y", 20.0)]
    t = load_trace(n, untimed, gang_sizes=SINGLE, times_from=timed, unmatched="shape")
    assert (t.stats["timesBySameShape"], t.stats["timesDropped"]) == (2, 1)


def test_borrow_times_counts_namesakes_of_another_shape_and_cycles_donors() -> None:
    one = PodTimes(0, 0, 10)
    source = {"a": ((1, 1, 1, 1000), one), "b": ((1, 1, 1, 1000), PodTimes(5, None, None))}
    got, stats = borrow_times([("a", (2, 2, 2, 1000)), ("p", (1, 1, 1, 1000)), ("q", (1, 1, 1, 1000))], source,
                              "shape")
    assert got == {"a": one, "p": one, "q": one}  # b never ran: no donor
    assert stats == {"timesByName": 1, "timesShapeDiffers": 1, "timesBySameShape": 2, "timesDropped": 0}
    with pytest.raises(InputError, match="unknown choice"):
        borrow_times([], source, "guess")


def test_cli_reports_the_counts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    n, timed, untimed = _files(tmp_path)
    out = tmp_path / "out"
    assert main(["replay", "--nodes", n, "--pods", untimed, "--times-from", timed, "--unmatched-times", "shape",
                 "--no-plots", "-o", str(out)]) == 0
    trace = json.loads((out / "results.json").read_text())["trace"]
    assert (trace["timesByName"], trace["timesBySameShape"], trace["timesDropped"]) == (4, 2, 1)
    assert "timesDropped 1" in (out / "report.md").read_text()


def test_an_untimed_list_without_times_from_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    n, _timed, untimed = _files(tmp_path)
    assert main(["replay", "--nodes", n, "--pods", untimed, "-o", str(tmp_path / "out")]) == 2
    assert "creation_time" in capsys.readouterr().err


@pytest.mark.parametrize("times_text, message", [
    (None, "cannot read file"),
    ("pod,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time,deletion_time,scheduled_time\n", "name"),
    (UNTIMED + "a,1000,1024,1,1000\n", "creation_time"),
    (TIMED + "a,1000,1024,1,1000,0,5,x\n", "expected an integer"),
])
def test_bad_times_file_is_one_line_exit_2_nothing_written(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                           times_text: str | None, message: str) -> None:
    n, _timed, untimed = _files(tmp_path)
    times = tmp_path / "times.csv"
    if times_text is not None:
        times.write_text(times_text)
    out = tmp_path / "out"
    assert main(["replay", "--nodes", n, "--pods", untimed, "--times-from", str(times), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert message in err and str(times) in err and err.count("\n") == 1
    assert not out.exists()


def test_a_sweep_trace_takes_times_from_another(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _files(tmp_path)
    spec = tmp_path / "sweep.yaml"
    spec.write_text("traces:\n- {name: m, nodes: nodes.csv, pods: untimed.csv, timesFrom: timed.csv, "
                    "unmatchedTimes: shape}\npolicies: [none]\nseeds: [0]\n")
    out = tmp_path / "out"
    assert main(["replay", "--sweep", str(spec), "--workers", "1", "-o", str(out)]) == 0
    assert "1 of 1 cells done" in capsys.readouterr().out
    spec.write_text("traces:\n- {name: m, nodes: nodes.csv, pods: untimed.csv, timesFrom: timed.csv, "
                    "unmatchedTimes: guess}\npolicies: [none]\n")
    assert main(["replay", "--sweep", str(spec), "-o", str(tmp_path / "out2")]) == 2
    assert "unmatchedTimes" in capsys.readouterr().err
