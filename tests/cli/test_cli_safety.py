"""The command line on hostile or careless use: one line and an exit status, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from optplan.adapters.output import table
from optplan.cli import main
from optplan.cli import repack as repack_cli
from optplan.errors import printable

SEED = "instances/seed-dryrun.yaml"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as e:  # argparse's usage errors
        code = int(e.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(("flag", "value"), [
    ("--weights", "1,1,1,1,inf"), ("--weights", "1,1,1,1,nan"), ("--weights", "1,1,1,1,1e308"),
    ("--weights", "1,1,1,1,-1"), ("--weights", "1,1,1,1"), ("--workers", "0"), ("--workers", "100000"),
    ("--workers", "１"), ("--seed", "-1"), ("--seed", "99999999999999999999"), ("--seed", "1.5"),
    ("--time-limit", "inf"), ("--time-limit", "nan"), ("--time-limit", "1e400"), ("--time-limit", "0"),
    ("--time-limit", "1e9"),
])
def test_out_of_range_flags_are_usage_errors(capsys: pytest.CaptureFixture[str], flag: str, value: str) -> None:
    code, out, err = _run(capsys, "repack", SEED, f"{flag}={value}")
    assert code == 2 and not out
    assert f"argument {flag}" in err.splitlines()[-1]
    assert "Traceback" not in err


@pytest.mark.parametrize("command", [["place", "--job", "instances/place-demo-job.yaml"],
                                     ["reclaim-spot", "--gpus", "1"]])
def test_workers_and_seed_are_checked_on_every_planning_command(capsys: pytest.CaptureFixture[str],
                                                                command: list[str]) -> None:
    code, _, err = _run(capsys, command[0], "instances/place-demo.yaml", *command[1:], "--workers", "-3")
    assert code == 2 and "argument --workers" in err


def test_the_edges_of_the_ranges_are_accepted(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "repack", SEED, "-o", "json", "--weights", "0,0,0,0,1000000", "--seed",
                          str(2**31 - 1), "--workers", "1", "--time-limit", "604800")
    assert code == 0, err
    assert json.loads(out)["status"]["plan"]["summary"]["freedNodeCount"] == 1


def test_a_bug_is_one_line_with_a_hint_and_exit_1(capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(args: object) -> str:
        raise ZeroDivisionError("division by zero\nsecond line")
    monkeypatch.setattr(repack_cli, "run", boom)
    code, out, err = _run(capsys, "repack", SEED)
    assert code == 1 and not out
    assert err.count("\n") == 1
    assert err.startswith("optplan: internal error (a bug, please report it): ZeroDivisionError: division by zero"
                          "\\nsecond line; rerun with -v for the traceback")


def test_a_bug_shows_its_traceback_with_v(capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(args: object) -> str:
        raise KeyError("x")
    monkeypatch.setattr(repack_cli, "run", boom)
    code, _, err = _run(capsys, "repack", SEED, "-v")
    assert code == 1
    assert "Traceback" in err and "KeyError" in err and "rerun with -v" not in err


@pytest.mark.parametrize(("text", "shown"), [
    ("plain name-1", "plain name-1"),
    ("two\nlines", "two\\nlines"),
    ("cr\rlf", "cr\\rlf"),
    ("nul\x00bell\x07", "nul\\x00bell\\x07"),
    ("c1\x85", "c1\\x85"),
    ("bidi\u202eevil\u2066", "bidi\\u202eevil\\u2066"),
    ("lsep\u2028", "lsep\\u2028"),
    ("lone\ud800", "lone\\ud800"),
    ("ünïcödé 名字", "ünïcödé 名字"),
])
def test_printable_keeps_one_line_and_readable_text(text: str, shown: str) -> None:
    assert printable(text) == shown


def test_tables_escape_hostile_cells() -> None:
    out = table([["NAME", "NODE"], ["evil\nname", "n\u202e1"]])
    assert out.count("\n") == 2
    assert "evil\\nname" in out and "n\\u202e1" in out


def test_bench_with_a_missing_data_folder_skips_the_sections_with_a_note(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope"
    code, _, err = _run(capsys, "bench", "--tiny", "--sections", "bpplib", "--data", str(missing),
                          "--out", str(tmp_path / "o"))
    assert code == 0, err
    assert f"--data {missing} does not exist" in err
    results = json.loads((tmp_path / "o" / "results.json").read_text())
    assert results["bpplib"]["skipped"].startswith("no bpplib/")


def test_bench_with_a_file_as_data_folder_is_an_input_error(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "file"
    f.write_text("x")
    code, _, err = _run(capsys, "bench", "--tiny", "--data", str(f), "--out", str(tmp_path / "o"))
    assert code == 2 and "not a folder" in err


@pytest.mark.parametrize("solver", ["cpsat", "milp", "auto"])
def test_extreme_weights_within_range_are_planned(capsys: pytest.CaptureFixture[str], solver: str) -> None:
    # 1e6 beside a weight of 16 decimals needed a common denominator of 1e16: CP-SAT's int64 overflowed
    code, out, err = _run(capsys, "repack", "instances/synthetic-40.yaml", "--solver", solver, "--time-limit", "5",
                          "--weights", "1000000,0.1234567890123456,1,1,0.000001", "-o", "json")
    assert code == 0, err
    assert json.loads(out)["status"]["plan"]["summary"]["freedNodeCount"] >= 1
