"""Safe preemption (seed 004 §5.3): PDBs, the per-queue cooldown, graded preemption and the approval gate,
each as holds/broken cases written from the rule, for the greedy, the exact model and auto; the validator
refuses a plan that breaks each rule; with the rules off, plans are Volcano's as before."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from optplan.adapters.generate import GenConfig, generate
from optplan.adapters.kubefile import load_objects
from optplan.cli import main
from optplan.models.placement import BinpackWeights, PlacementPlan, SafePreemption
from optplan.serve import make_server
from optplan.serve.config import ServeConfig
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.placement.context import Context
from optplan.solvers.placement.model import plan_key
from optplan.solvers.placement.place import plan_placement
from optplan.solvers.placement.safety import APPROVED, LAST_PREEMPTION, REQUESTED
from optplan.solvers.placement.validate import placement_violations
from tests.builders import node, pdb, queue, ready
from tests.placement.test_victims import CLASSES, pending, running
from tests.serve.test_serve import Client

OPTS = PlanOptions(time_limit=5, workers=1, seed=0, deterministic=True)
QUICK = PlanOptions(time_limit=1, workers=1, seed=0, deterministic=True)
NOW = "2025-06-01T12:00:00Z"
SOLVERS = ("greedy", "cpsat", "auto")


def plan(solver: str, objs: list[dict[str, Any]], safety: SafePreemption | None) -> PlacementPlan:
    s = load_objects(objs).snapshot
    return plan_placement(s, list(s.jobs.values()), solver, OPTS, now=NOW, safety=safety)


def names(p: PlacementPlan, job: str) -> list[str]:
    return sorted(v.name for v in p.job(f"default/{job}").victims)


# ---- PDBs ---------------------------------------------------------------------------------------

def pdb_case(allowed: int, *, victim_ready: bool = True, policy: str | None = None) -> list[dict[str, Any]]:
    """One 8-GPU node held by two 4-GPU pods of a normal job under one PDB; a large job needs the node. The
    victims' minAvailable is 0 (was 1): Volcano's gang plugin offers both, and safe preemption's budget is
    what is tested (the same for the other fixtures here: a job at minMember the tiers never preempt)."""
    objs = [*CLASSES, node("a", 8), queue("q"),
            *running("v", "q", [("a", 4), ("a", 4)], labels={"app": "v"}, min_member=0),
            pending("big", "q", 1, 8), pdb("v-pdb", {"app": "v"}, allowed, policy=policy)]
    for o in objs:
        if o.get("kind") == "Pod":
            ready(o, victim_ready)
    return objs


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize(("allowed", "victim_ready", "policy", "admitted"), [
    (2, True, None, True),  # holds: the budget allows both evictions
    (1, True, None, False),  # broken: two victims needed, one allowed
    (0, False, "AlwaysAllow", True),  # holds: pods that are not Ready go without the budget
])
def test_the_pdb_rule_keeps_victims_within_the_budget(solver: str, allowed: int, victim_ready: bool,
                                                      policy: str | None, admitted: bool) -> None:
    objs = pdb_case(allowed, victim_ready=victim_ready, policy=policy)
    assert plan(solver, objs, None).job("default/big").admitted  # Volcano without the pdb plugin: evicts
    p = plan(solver, objs, SafePreemption(pdb=True))
    assert p.job("default/big").admitted is admitted
    assert (names(p, "big") == ["v-0", "v-1"]) is admitted


def test_a_pod_under_two_pdbs_is_never_a_victim() -> None:
    objs = [*pdb_case(5), pdb("other", {"app": "v"}, 5)]
    p = plan("greedy", objs, SafePreemption(pdb=True))
    assert not p.job("default/big").admitted
    assert "pod-under-several-pdbs" in p.job("default/big").reason


# ---- cooldown -----------------------------------------------------------------------------------

def two_jobs(annotation: str | None = None) -> list[dict[str, Any]]:
    q = queue("q")
    if annotation is not None:
        q["metadata"]["annotations"] = {LAST_PREEMPTION: annotation}
    return [*CLASSES, node("a", 8), node("b", 8), q,
            *running("v", "q", [("a", 8)], min_member=0), *running("w", "q", [("b", 8)], min_member=0),
            pending("big1", "q", 1, 8), pending("big2", "q", 1, 8)]


@pytest.mark.parametrize("solver", SOLVERS)
def test_at_most_one_job_of_a_queue_evicts_in_one_plan(solver: str) -> None:
    assert sum(jp.admitted for jp in plan(solver, two_jobs(), None).jobs) == 2
    p = plan(solver, two_jobs(), SafePreemption(cooldown_seconds=300))
    assert sum(jp.admitted for jp in p.jobs) == 1
    waiting = [jp for jp in p.jobs if not jp.admitted]
    if solver == "greedy":
        assert "preemption cooldown" in waiting[0].reason


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize(("last", "admitted"), [
    ("2025-06-01T11:56:00Z", 0),  # broken: 4 minutes ago, inside 300 s
    ("2025-06-01T11:50:00Z", 1),  # holds: 10 minutes ago
])
def test_a_queue_inside_its_window_evicts_nothing(solver: str, last: str, admitted: int) -> None:
    p = plan(solver, two_jobs(annotation=last), SafePreemption(cooldown_seconds=300))
    assert sum(jp.admitted for jp in p.jobs) == admitted
    if not admitted and solver == "greedy":
        assert "may evict again from 2025-06-01T12:01:00Z" in p.jobs[0].reason
    # the flag's time wins over the annotation
    q = SafePreemption(cooldown_seconds=300, last_preemption={"q": "2025-06-01T11:00:00Z"})
    assert sum(jp.admitted for jp in plan(solver, two_jobs(annotation=last), q).jobs) == 1


# ---- graded preemption ----------------------------------------------------------------------------

@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize(("preemptor", "victim", "evicted"), [
    ("critical-job", "normal-job", True),  # Critical takes Medium: two grades below
    ("critical-job", "large-job", False),  # Critical never takes High
    ("large-job", "normal-job", False),  # High takes only Low
    ("large-job", "spot-job", True),  # High takes Low (50)
])
def test_graded_preemption_takes_only_grades_two_below(solver: str, preemptor: str, victim: str,
                                                       evicted: bool) -> None:
    objs = [*CLASSES, node("a", 8), queue("q"), *running("v", "q", [("a", 8)], victim, min_member=0),
            pending("big", "q", 1, 8, preemptor)]
    assert plan(solver, objs, None).job("default/big").admitted  # strictly lower priority: Volcano evicts
    p = plan(solver, objs, SafePreemption(levels=SafePreemption.seed().levels))
    assert p.job("default/big").admitted is evicted


# ---- approval -----------------------------------------------------------------------------------

@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize(("weight", "gated"), [(60, True), (50, False)])
def test_evictions_in_a_heavy_queue_are_marked_for_approval(solver: str, weight: int, gated: bool) -> None:
    objs = [*CLASSES, node("a", 8), queue("q", weight=weight), *running("v", "q", [("a", 8)], min_member=0),
            pending("big", "q", 1, 8)]
    jp = plan(solver, objs, SafePreemption(approval_weight=50)).job("default/big")
    assert jp.admitted and [v.name for v in jp.victims] == ["v-0"]
    assert (jp.approval_required is not None) is gated
    wire = plan(solver, objs, SafePreemption(approval_weight=50)).to_dict()["jobs"][0]
    assert ("approvalRequired" in wire) is gated


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize(("annotations", "admitted", "gated"), [
    ({}, True, True),  # asked for nothing yet: planned, marked
    ({APPROVED: "true"}, True, False),  # approved: planned, unmarked
    ({REQUESTED: "2025-06-01T11:55:00Z"}, True, True),  # asked 5 minutes ago, within 600 s: still waiting
    ({REQUESTED: "2025-06-01T11:00:00Z"}, False, False),  # asked an hour ago, never given: cancelled
])
def test_an_approval_is_given_waited_for_or_cancelled(solver: str, annotations: dict[str, str], admitted: bool,
                                                     gated: bool) -> None:
    job = pending("big", "q", 1, 8)
    job["metadata"]["annotations"] = annotations
    objs = [*CLASSES, node("a", 8), queue("q", weight=60), *running("v", "q", [("a", 8)], min_member=0), job]
    jp = plan(solver, objs, SafePreemption(approval_weight=50)).job("default/big")
    assert jp.admitted is admitted
    assert (jp.approval_required is not None) is gated
    if not admitted and solver == "greedy":
        assert "approval gate" in jp.reason


# ---- the validator refuses each broken rule -------------------------------------------------------

def test_the_validator_refuses_a_plan_that_breaks_each_rule() -> None:
    s = load_objects(pdb_case(1)).snapshot
    unsafe = plan_placement(s, list(s.jobs.values()), "greedy", OPTS, now=NOW)
    assert placement_violations(s, list(s.jobs.values()), unsafe) == []
    broken = placement_violations(s, list(s.jobs.values()), unsafe, safety=SafePreemption(pdb=True))
    assert any("PodDisruptionBudget default/v-pdb, which allows 1" in b for b in broken)
    s2 = load_objects(two_jobs()).snapshot
    both = plan_placement(s2, list(s2.jobs.values()), "greedy", OPTS, now=NOW)
    assert any("preemption cooldown" in b for b in placement_violations(
        s2, list(s2.jobs.values()), both, safety=SafePreemption(cooldown_seconds=60)))
    objs = [*CLASSES, node("a", 8), queue("q", weight=90), *running("v", "q", [("a", 8)], min_member=0),
            pending("big", "q", 1, 8)]
    s3 = load_objects(objs).snapshot
    unmarked = plan_placement(s3, list(s3.jobs.values()), "greedy", OPTS, now=NOW)
    assert any("approvalRequired" in b for b in placement_violations(
        s3, list(s3.jobs.values()), unmarked, safety=SafePreemption(approval_weight=50)))
    objs = [*CLASSES, node("a", 8), queue("q"), *running("v", "q", [("a", 8)], "large-job", min_member=0),
            pending("big", "q", 1, 8, "critical-job")]
    s4 = load_objects(objs).snapshot
    graded = plan_placement(s4, list(s4.jobs.values()), "greedy", OPTS, now=NOW)
    assert any("graded preemption" in b for b in placement_violations(
        s4, list(s4.jobs.values()), graded, safety=SafePreemption.seed()))


# ---- the command ----------------------------------------------------------------------------------

def test_the_cli_takes_seed_or_a_file_and_refuses_a_bad_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                              ) -> None:
    snap = tmp_path / "snap.json"
    snap.write_text(json.dumps({"kind": "List", "items": pdb_case(1)}))
    args = ["place", str(snap), "--solver", "greedy", "--now", NOW, "-o", "json"]
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["jobs"][0]["admitted"] is True
    assert main([*args, "--safe-preemption", "seed"]) == 0
    assert json.loads(capsys.readouterr().out)["jobs"][0]["admitted"] is False
    rules = tmp_path / "rules.yaml"
    rules.write_text("pdb: true\ncooldownSecond: 300\n")
    assert main([*args, "--safe-preemption", str(rules)]) == 2
    err = capsys.readouterr().err
    assert "rules.yaml" in err and "cooldownSecond" in err and len(err.strip().splitlines()) == 1


# ---- generated instances: every rule on, every planner, every plan valid ----------------------------

@pytest.mark.parametrize("seed", range(4))
def test_generated_instances_plan_validly_with_every_rule(seed: int) -> None:
    objs = generate(GenConfig(nodes=24, seed=seed, queues=3, pending_jobs=6, priority_classes=True, pdb_share=0.5,
                              occupancy=0.9))
    teams = sorted(o["metadata"]["name"] for o in objs if o["kind"] == "Queue" and "spec" in o
                   and o["spec"].get("parent") not in (None, "root"))
    for o in objs:  # a heavy queue for the approval rule, a recent preemption for the cooldown
        if o["kind"] == "Queue" and o["metadata"]["name"] == teams[seed % len(teams)]:
            o["spec"]["weight"] = 80
            o["metadata"].setdefault("annotations", {})[LAST_PREEMPTION] = "2026-01-03T23:58:00Z"
    snap = load_objects(objs).snapshot
    jobs = list(snap.jobs.values())
    rules = {"pdb": SafePreemption(pdb=True), "cooldown": SafePreemption(cooldown_seconds=300),
             "graded": SafePreemption(levels=SafePreemption.seed().levels),
             "approval": SafePreemption(approval_weight=50), "seed": SafePreemption.seed()}
    for name, safety in rules.items():
        plans = {s: plan_placement(snap, jobs, s, QUICK, now="2026-01-04T00:00:00Z", safety=safety)
                 for s in ("greedy", "auto")}
        for s, p in plans.items():  # plan_placement validated each; check again from outside, rules on
            assert placement_violations(snap, jobs, p, safety=safety,
                                        now=datetime(2026, 1, 4, tzinfo=UTC)) == [], (name, s)
        ctx = Context.build(snap, jobs, BinpackWeights(), datetime(2026, 1, 4, tzinfo=UTC),
                            safety=safety)
        assert plan_key(ctx, plans["auto"]) <= plan_key(ctx, plans["greedy"]), name


def test_the_plan_server_takes_the_rules_and_names_a_bad_field() -> None:
    server = make_server(ServeConfig(port=0))
    t = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    t.start()
    try:
        _served(Client(server))
    finally:
        server.shutdown()
        server.server_close()
        t.join()


def _served(c: Client) -> None:
    body = {"objects": pdb_case(1), "solver": "greedy", "now": NOW}
    assert c.post("/v1/place", body).json["jobs"][0]["admitted"] is True
    r = c.post("/v1/place", {**body, "safePreemption": {"pdb": True}})
    assert r.status == 200 and r.json["jobs"][0]["admitted"] is False
    bad = c.post("/v1/place", {**body, "safePreemption": {"pdb": True, "cooldownSeconds": "300"}})
    assert bad.status == 400 and "cooldownSeconds" in bad.json["error"]
