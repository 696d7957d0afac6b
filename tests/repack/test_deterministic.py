"""Deterministic limits (``PlanOptions.deterministic``, ``--deterministic``): when the limits bind, the
plan still depends on the input only, not on how fast the machine is."""

from __future__ import annotations

import time
from typing import Any

import pytest

from optplan.adapters.generate import GenConfig, generate
from optplan.adapters.kubefile import load_objects
from optplan.adapters.output import status_dict
from optplan.cli import main
from optplan.solvers.core import clock
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.repack.base import get_planner
from optplan.solvers.repack.exact import model as repack_model
from optplan.solvers.repack.rules import RepackProblem
from optplan.solvers.repack.run import plan_repack

DET = PlanOptions(time_limit=4.0, workers=1, seed=0, deterministic=True)


def _cluster(nodes: int, seed: int = 3) -> Any:
    return load_objects(generate(GenConfig(nodes=nodes, occupancy=0.6, seed=seed)))


def _slow(monkeypatch: pytest.MonkeyPatch, factor: float) -> None:
    """The wall clock runs ``factor`` times faster: as if the machine were that much slower."""
    real = time.perf_counter
    t0 = real()
    monkeypatch.setattr(clock.time, "perf_counter", lambda: t0 + (real() - t0) * factor)


def test_the_greedy_cut_by_work_is_the_same_cut_at_any_speed(monkeypatch: pytest.MonkeyPatch) -> None:
    loaded = _cluster(200)
    problem = RepackProblem(loaded.snapshot, next(iter(loaded.runs.values())))
    options = PlanOptions(time_limit=0.05, deterministic=True)  # about 600 evaluations
    whole = get_planner("greedy").plan(problem, PlanOptions(time_limit=60))
    cut = get_planner("greedy").plan(problem, options)
    _slow(monkeypatch, 2.5)
    slow = get_planner("greedy").plan(problem, options)
    assert 0 < len(cut.plan.freed_nodes) < len(whole.plan.freed_nodes)
    assert slow.plan == cut.plan


def test_auto_with_lns_gives_one_plan_at_any_speed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The LNS runs until its work budget is spent (it would go on for minutes), twice the same."""
    monkeypatch.setattr(repack_model, "MAX_ARCS", 1)
    monkeypatch.setattr(repack_model, "MIN_RECEIVERS", 1)
    loaded = _cluster(300)
    run = next(iter(loaded.runs.values()))
    first = plan_repack(loaded.snapshot, run, solver="auto", options=DET)
    _slow(monkeypatch, 2.0)
    second = plan_repack(loaded.snapshot, run, solver="auto", options=DET)
    assert first.result.stats["lnsSteps"] >= 4
    assert status_dict(first.status) == status_dict(second.status)
    assert first.result.stats == second.result.stats


def test_cpsat_cut_by_its_limit_gives_one_plan_at_any_speed(monkeypatch: pytest.MonkeyPatch) -> None:
    loaded = _cluster(300)
    run = next(iter(loaded.runs.values()))
    opts = PlanOptions(time_limit=1.0, deterministic=True)
    first = plan_repack(loaded.snapshot, run, solver="cpsat", options=opts)
    assert first.result.record.status != "OPTIMAL"  # the limit binds
    _slow(monkeypatch, 2.0)
    second = plan_repack(loaded.snapshot, run, solver="cpsat", options=opts)
    assert status_dict(first.status) == status_dict(second.status)


def test_the_wall_clock_cap_still_stops_a_deterministic_run(monkeypatch: pytest.MonkeyPatch,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(repack_model, "MAX_ARCS", 1)
    monkeypatch.setattr(repack_model, "MIN_RECEIVERS", 1)
    loaded = _cluster(300)
    run = next(iter(loaded.runs.values()))
    _slow(monkeypatch, 10.0)  # beyond the cap (the wall-clock cap of 12 s is reached after 1.2 s)
    t0 = time.monotonic()
    out = plan_repack(loaded.snapshot, run, solver="auto", options=DET)
    assert time.monotonic() - t0 < 30
    assert out.result.plan.freed_nodes  # the greedy plan at least
    assert "wall-clock cap" in caplog.text


def test_cli_deterministic_flag(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["repack", "instances/synthetic-40.yaml", "--solver", "auto", "--time-limit", "0.5",
            "--deterministic", "-o", "yaml"]
    assert main(argv) == 0
    first = capsys.readouterr().out
    assert main(argv) == 0
    assert capsys.readouterr().out == first


def test_placement_cut_by_its_limit_gives_one_plan_at_any_speed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The exact placement model counts CP-SAT's deterministic time too (``place --deterministic``)."""
    from optplan.solvers.placement.jobs import jobs_to_place
    from optplan.solvers.placement.place import plan_placement
    from tests.placement.test_placement_family import NOW, family

    snap = load_objects(generate(family(124))).snapshot
    jobs = jobs_to_place(snap)
    opts = PlanOptions(time_limit=0.5, deterministic=True)
    first = plan_placement(snap, jobs, "cpsat", opts, now=NOW)
    assert first.solver.status == "FEASIBLE"  # the limit binds
    _slow(monkeypatch, 3.0)
    second = plan_placement(snap, jobs, "cpsat", opts, now=NOW)
    assert first.to_dict(timings=False) == second.to_dict(timings=False)


def test_place_deterministic_flag_reaches_the_exact_model(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["place", "instances/place-demo.yaml", "--job", "instances/place-demo-job.yaml", "--solver", "cpsat",
            "-o", "json", "--now", "2025-06-01T00:00:00Z", "--deterministic"]
    assert main(args) == 0
    det = capsys.readouterr().out
    assert main(args[:-1]) == 0
    assert capsys.readouterr().out == det  # not cut by its limit: the same plan either way
