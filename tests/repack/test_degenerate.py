"""Degenerate inputs (issue 11, "no traceback, no hang on any input"): every planner, the large-model
path of auto (LNS) and the peer baselines answer with an outcome, an empty plan and the reasons the
occupied nodes were not vacated, never an exception. One worker, fixed seed, deterministic limits."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from optplan import api
from optplan.solvers.core import registry
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.repack.base import planner_names
from optplan.solvers.repack.exact import model as repack_model
from optplan.solvers.repack.rules import RepackProblem
from optplan.solvers.repack.run import INSUFFICIENT, NO_FRAGMENTATION, RepackOutcome, plan_repack
from optplan.solvers.repack.validate import plan_violations
from tests.builders import load_with_run, node, pod, podgroup, repack_run

ROOT = Path(__file__).resolve().parents[2]
OPTS = PlanOptions(time_limit=2, workers=1, seed=0, deterministic=True)
SOLVERS = planner_names()  # greedy, greedy-fast, cpsat, milp, auto
NOTHING_FREED = "no node can be freed within scope, budgets and scheduling constraints"
PACKED = "nvidia.com/gpu is packed as tightly as possible"
FOREIGN = "pod-not-scheduled-by-volcano"


def three_fragmented() -> list[dict[str, Any]]:
    """Three 8-card nodes with one 2-card pod each (33% fragmented: one node would hold all three)."""
    return [node("n1"), node("n2"), node("n3"), podgroup("pg", labels={"team": "a"}),
            pod("a", "n1", 2), pod("b", "n2", 2), pod("c", "n3", 2)]


def selects(labels: dict[str, str]) -> dict[str, Any]:
    return {"include": {"selector": {"matchLabels": labels}}}


# (case, objects, outcome, message, reasons the occupied nodes were not vacated)
CASES: list[tuple[str, list[dict[str, Any]], str, str, dict[str, int]]] = [
    ("podGroup scope matches nothing",
     [*three_fragmented(), repack_run(scope={"podGroups": selects({"team": "nobody"})})],
     INSUFFICIENT, NOTHING_FREED, {"podgroup-out-of-scope": 3}),
    ("gang with a Pending pod bound to its node",
     [node("n1"), node("n2"), podgroup("pg", 2), pod("a", "n1", 2), pod("b", "n1", 2, phase="Pending"),
      pod("c", "n2", 2, scheduler="default-scheduler"), repack_run()],
     INSUFFICIENT, NOTHING_FREED, {"pod-not-running": 1, FOREIGN: 1}),
    ("pods whose PodGroup is missing",
     [node("n1"), node("n2"), pod("a", "n1", 2, group="ghost"), pod("b", "n2", 2, group="ghost"), repack_run()],
     INSUFFICIENT, NOTHING_FREED, {"pod-without-podgroup": 2}),
    ("node scope matches nothing",
     [*three_fragmented(), repack_run(scope={"nodes": selects({"pool": "nowhere"})})],
     INSUFFICIENT, NOTHING_FREED, {"node-out-of-scope": 3}),
    ("no receiver has room (cpu)",
     [node("n1"), node("n2"), podgroup("pg"), pod("a", "n1", 4, cpu="90"), pod("b", "n2", 4, cpu="90"),
      repack_run()],
     INSUFFICIENT, NOTHING_FREED, {"no-feasible-receiver": 2}),
    ("a single node",
     [node("n1"), podgroup("pg"), pod("a", "n1", 2), repack_run()],
     NO_FRAGMENTATION, PACKED, {"no-feasible-receiver": 1}),
    ("a resource no node provides",
     [*three_fragmented(), repack_run(resource="example.com/none")],
     NO_FRAGMENTATION, "no node provides example.com/none", {}),
    ("no nodes, no pods", [repack_run()], NO_FRAGMENTATION, "no node provides nvidia.com/gpu", {}),
    ("nodes without pods", [node("n1"), node("n2"), repack_run()], NO_FRAGMENTATION, PACKED, {}),
]
IDS = [c[0] for c in CASES]


def plan(objects: list[dict[str, Any]], solver: str, outcome: str, message: str,
         reasons: dict[str, int]) -> RepackOutcome:
    """Plan with ``solver`` and check what a user sees: the outcome and its message, nothing freed or
    moved, and why the occupied nodes were not vacated; the validator accepts plan and status."""
    loaded, run = load_with_run(*objects)
    out = plan_repack(loaded.snapshot, run, solver=solver, options=OPTS)
    assert (out.reason, out.status.conditions[0].message) == (outcome, message)
    assert out.status.phase == "Succeeded"
    assert out.result.plan.freed_nodes == () and out.result.plan.moves == ()
    assert out.status.plan.summary.freed_node_count == 0 and out.status.plan.disruption.moved_pods == 0
    assert out.result.rejections == reasons
    problem = RepackProblem(loaded.snapshot, run)
    assert plan_violations(problem, out.result.plan, claimed=out.result.disruption, status=out.status,
                           frag=out.frag) == []
    return out


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize(("case", "objects", "outcome", "message", "reasons"), CASES, ids=IDS)
def test_every_planner_answers_a_degenerate_input(case: str, objects: list[dict[str, Any]], outcome: str,
                                                  message: str, reasons: dict[str, int], solver: str) -> None:
    plan(objects, solver, outcome, message, reasons)


@pytest.fixture
def big(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every model counts as too large to solve whole, even one without a pod class: auto takes LNS."""
    monkeypatch.setattr(repack_model, "MAX_ARCS", -1)
    monkeypatch.setattr(repack_model, "MIN_RECEIVERS", 1)


@pytest.mark.parametrize(("case", "objects", "outcome", "message", "reasons"), CASES, ids=IDS)
def test_auto_large_model_path_answers_a_degenerate_input(case: str, objects: list[dict[str, Any]], outcome: str,
                                                          message: str, reasons: dict[str, int], big: None) -> None:
    out = plan(objects, "auto", outcome, message, reasons)
    assert "lnsSteps" in out.result.stats  # the neighbourhood search ran
    if not out.result.stats["candidates"]:
        assert out.result.record.status == "OPTIMAL" and out.result.record.freed_nodes_bound == 0


@pytest.mark.parametrize("solver", ["cpsat", "milp", "auto"])
def test_seed_dryrun_without_eligible_workloads(solver: str, tmp_path: Path) -> None:
    """The issue's repro: the seed's DryRun with the scope labels removed from its PodGroups (it raised
    ``ValueError: 'huawei.com/ascend-1980' is not in list`` in the exact planners), through the API the
    plan server calls."""
    text = (ROOT / "instances" / "seed-dryrun.yaml").read_text()
    text, n = re.subn(r'repack\.volcano\.sh/eligible: "true", repack\.volcano\.sh/protected: "false"', "x: y", text)
    assert n == 1
    path = tmp_path / "noscope.yaml"
    path.write_text(text)
    res = api.plan_repack(api.load_snapshot(path), solver=solver, time_limit=2, deterministic=True)
    assert res.reason == INSUFFICIENT and res.freed_nodes == ()
    out = res.outcome
    assert out.result.plan.freed_nodes == () and out.result.plan.moves == ()
    assert out.result.rejections == {"podgroup-out-of-scope": 3}
    assert (out.status.plan.summary.frag_before_percent, out.status.plan.summary.frag_after_percent) == (33, 33)


# ---- peer baselines -----------------------------------------------------------------------------
#
# The peers follow their own rules (Karpenter and Cluster Autoscaler ignore scope and PodGroups), so
# where optplan frees nothing they may free nodes; the validator then names each rule they break.
# (case, peer -> its freed nodes and moved pods, or "" when it moves nothing)

BASELINE_CASES: dict[str, dict[str, str]] = {
    "podGroup scope matches nothing": {"karpenter": "n1 n2: a b", "karpenter-balanced": "n1 n2: a b",
                                       "cluster-autoscaler": "n1 n3: a c", "descheduler": ""},
    "gang with a Pending pod bound to its node": {"karpenter": "n2: c", "karpenter-balanced": "n2: c",
                                                  "cluster-autoscaler": "n2: c", "descheduler": "n2: c"},
    "pods whose PodGroup is missing": {"karpenter": "n1: a", "karpenter-balanced": "n1: a",
                                       "cluster-autoscaler": "n1: a", "descheduler": ""},
    "node scope matches nothing": {"karpenter": "n1 n2: a b", "karpenter-balanced": "n1 n2: a b",
                                   "cluster-autoscaler": "n1 n3: a c", "descheduler": ""},
}


@pytest.mark.parametrize("peer", sorted(registry.names(registry.BASELINES)))
@pytest.mark.parametrize(("case", "objects", "outcome", "message", "reasons"), CASES, ids=IDS)
def test_every_baseline_answers_a_degenerate_input(case: str, objects: list[dict[str, Any]], outcome: str,
                                                   message: str, reasons: dict[str, int], peer: str) -> None:
    loaded, run = load_with_run(*objects)
    problem = RepackProblem(loaded.snapshot, run)
    result = registry.load(registry.BASELINES, peer)().plan(problem, OPTS)
    freed, _, moved = BASELINE_CASES.get(case, {}).get(peer, "").partition(": ")
    assert list(result.plan.freed_nodes) == freed.split()
    assert [m.pod.split("/")[1] for m in result.plan.moves] == moved.split()
    violations = plan_violations(problem, result.plan)
    if not freed:
        assert violations == []
    else:  # each break of optplan's rules is named, none is raised
        assert violations and all(re.search(r"not movable|outside scope\.nodes", v) for v in violations)
