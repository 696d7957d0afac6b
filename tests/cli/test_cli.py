"""The commands as a user runs them: compare, generate, progress on -v, solver choice."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from optplan.cli import main
from optplan.models.repack import DIMENSIONS, Weights
from optplan.serve import ServeConfig, openapi_document
from tests.builders import hypernode, node, pod, podgroup, repack_run


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


# ---- --weights: every disruption dimension, defaults from one table ------------------------------------


def _widening_choice(tmp_path: Path) -> str:
    """One PodGroup may move (maxPerRun): vacating n0 widens the soft-topology gang ``train`` from s0 to the
    spine (one tier) and moves one pod; vacating n4 moves two pods of ``plain`` and widens nothing. Same
    cards. Topology widening at its default 0.5 outweighs the extra moved pod (0.1): n4; at 0, n0."""
    objs = [node("n0"), node("n1"), node("n2"), node("n3"), node("n4"),
            hypernode("s0", 1, ["n0", "n1"]), hypernode("s1", 1, ["n2", "n3", "n4"]),
            hypernode("spine", 2, ["s0", "s1"], kind="HyperNode"),
            podgroup("train", 1, network_topology={"mode": "soft"}),
            podgroup("plain", 1), podgroup("keep", 1, labels={"protected": "true"}),
            pod("t0", "n0", 4, group="train"), pod("t1", "n1", 1, group="train"),
            pod("p0", "n4", 2, group="plain"), pod("p2", "n4", 2, group="plain"), pod("p1", "n3", 0, group="plain"),
            pod("k1", "n1", 7, group="keep"), pod("k2", "n2", 4, group="keep"), pod("k3", "n3", 8, group="keep"),
            repack_run(scope={"podGroups": {"exclude": {"selector": {"matchLabels": {"protected": "true"}}}}},
                       max_per_run={"podGroups": 1})]
    path = tmp_path / "widening.yaml"
    path.write_text(yaml.safe_dump_all(objs, sort_keys=False), encoding="utf-8")
    return str(path)


def _freed(capsys: pytest.CaptureFixture[str], *args: str) -> list[str]:
    assert main(["repack", *args, "-o", "json", "--deterministic", "--time-limit", "5"]) == 0
    freed: list[str] = json.loads(capsys.readouterr().out)["status"]["plan"]["freedNodes"]
    return freed


@pytest.mark.parametrize("solver", ["greedy", "cpsat", "milp", "auto"])
def test_weights_take_the_sixth_dimension_topology_widening(solver: str, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    snap = _widening_choice(tmp_path)
    assert _freed(capsys, snap, "--solver", solver) == ["n4"]
    assert _freed(capsys, snap, "--solver", solver, "--weights", "1,0.8,0.6,0.3,0.1") == ["n4"]  # the seed's five
    assert _freed(capsys, snap, "--solver", solver, "--weights", "1,0.8,0.6,0.3,0.1,0") == ["n0"]


def test_weights_help_and_the_plan_servers_schema_read_one_table(capsys: pytest.CaptureFixture[str]) -> None:
    defaults = Weights()
    assert [getattr(defaults, d.field) for d in DIMENSIONS] == [1.0, 0.8, 0.6, 0.3, 0.1, 0.5]
    assert Weights(*(d.default for d in DIMENSIONS)) == defaults  # positional order is the table's
    with pytest.raises(SystemExit):
        main(["repack", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--weights W1,W2,W3,W4,W5,W6" in help_text and "1.0,0.8,0.6,0.3,0.1,0.5" in help_text
    schema = openapi_document(ServeConfig())["components"]["schemas"]["Weights"]
    assert {k: p["default"] for k, p in schema["properties"].items()} == {d.key: d.default for d in DIMENSIONS}


@pytest.mark.parametrize("weights", ["1,1,1,1", "1,1,1,1,1,1,1", "1,1,1,1,1,-1", "1,1,1,1,1,nan"])
def test_weights_of_other_lengths_or_values_are_usage_errors(weights: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["repack", "instances/seed-dryrun.yaml", "--weights", weights])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "--weights" in err and "5 or 6" in err and "topologyWidening" in err
