"""The commands as a user runs them: compare, generate, progress on -v, solver choice."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from optplan.cli import main


def test_compare_prints_greedy_and_exact_side_by_side(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "instances/greedy-trap.yaml", "--solvers", "greedy,cpsat,milp"]) == 0
    out = capsys.readouterr().out
    lines = {line.split("  ")[0].strip(): line.split() for line in out.splitlines()[1:]}
    assert lines[""] == ["greedy", "cpsat", "milp"]
    assert lines["freed nodes"][-3:] == ["1", "2", "2"]
    assert lines["status"][-3:] == ["HEURISTIC", "OPTIMAL", "OPTIMAL"]


def test_compare_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "instances/synthetic-40.yaml", "-o", "json", "--time-limit", "10"]) == 0
    doc = json.loads(capsys.readouterr().out)
    greedy, exact = doc["plans"]
    assert (greedy["solver"], exact["solver"]) == ("greedy", "cpsat")
    assert exact["freedNodes"] >= greedy["freedNodes"]
    assert exact["freedNodesBound"] >= exact["freedNodes"]


def test_unknown_solver_in_compare_is_an_input_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "instances/seed-dryrun.yaml", "--solvers", "greedy,magic"]) == 2
    err = capsys.readouterr().err
    assert "--solvers" in err and "magic" in err


def test_generate_writes_a_loadable_snapshot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "snap.yaml"
    assert main(["generate", "--nodes", "12", "--seed", "5", "-o", str(out)]) == 0
    assert "12 Nodes" in capsys.readouterr().out
    doc = yaml.safe_load(out.read_text())
    assert doc["kind"] == "List" and sum(1 for o in doc["items"] if o["kind"] == "Node") == 12
    assert main(["repack", str(out), "--solver", "greedy", "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["status"]["phase"] == "Succeeded"


def test_generate_rejects_bad_flags_without_writing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "snap.yaml"
    with pytest.raises(SystemExit) as e:
        main(["generate", "--nodes", "10", "--occupancy", "1.5", "-o", str(out)])
    assert e.value.code == 2
    assert "--occupancy" in capsys.readouterr().err
    assert not out.exists()


def test_verbose_shows_incumbents_with_time_objective_and_bound(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["repack", "instances/synthetic-40.yaml", "-v", "--time-limit", "10", "-o", "json"]) == 0
    err = capsys.readouterr().err
    assert "incumbent at" in err and "objective" in err and "bound" in err
    assert "phase 1 (freed)" in err and "phase 2 (cost)" in err


@pytest.mark.parametrize("solver", ["greedy", "greedy-fast", "cpsat", "milp", "auto"])
def test_every_solver_plans_the_seed_example(solver: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["repack", "instances/seed-dryrun.yaml", "--solver", solver, "-o", "json"]) == 0
    status = json.loads(capsys.readouterr().out)["status"]
    assert status["plan"]["freedNodes"] == ["ascend-node-01"]
    assert status["plan"]["solver"]["name"] == solver


def test_compare_reports_peer_baselines_and_their_rule_breaks(capsys: pytest.CaptureFixture[str]) -> None:
    """Peers are compared side by side; a peer plan that breaks optplan's rules is reported, not printed
    as a RepackRun (here the budget of 6 PodGroups and the protected workloads)."""
    assert main(["compare", "instances/synthetic-40.yaml", "-o", "json", "--time-limit", "10",
                 "--solvers", "greedy,karpenter,cluster-autoscaler,descheduler"]) == 0
    plans = {p["solver"]: p for p in json.loads(capsys.readouterr().out)["plans"]}
    assert plans["greedy"]["violations"] == 0
    assert plans["cluster-autoscaler"]["violations"] > 0 and plans["cluster-autoscaler"]["example"]
    for name in ("karpenter", "cluster-autoscaler", "descheduler"):
        assert plans[name]["status"] == "BASELINE" and plans[name]["fragAfterPercent"] is not None
