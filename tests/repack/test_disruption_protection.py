"""Disruption protection: a pod its owner protects from disruption (``karpenter.sh/do-not-disrupt:
"true"``, ``cluster-autoscaler.kubernetes.io/safe-to-evict: "false"``, ``volcano.sh/preemptable:
"false"``) is never planned for eviction unless the run says ``spec.disruptionProtection: Ignore``;
its node is not vacated, for the reason ``pod-disruption-protected``. Holds / broken pairs, every
planner, the validator, the Karpenter baseline and the parser."""

from __future__ import annotations

from typing import Any

import pytest

from optplan.adapters.kubefile import load_objects
from optplan.errors import InputError
from optplan.models.repack import PodMove, RepackPlan
from optplan.solvers.baselines.repack import karpenter_multi_node
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.core.protection import PREEMPTABLE_KEY
from optplan.solvers.repack.base import planner_names
from optplan.solvers.repack.rules import DO_NOT_DISRUPT, SAFE_TO_EVICT, RepackProblem
from optplan.solvers.repack.run import INSUFFICIENT, RECOMMENDED, RepackOutcome, plan_repack
from optplan.solvers.repack.validate import plan_violations
from tests.builders import job_task, load_with_run, node, pod, podgroup, repack_run
from tests.controller.test_crd_schema import ROOT_VALIDATOR, errors_of
from tests.repack.test_restart_policies import EVICTED_RESTART_JOB, running_job, task_pod

OPTS = PlanOptions(time_limit=2, workers=1, seed=0, deterministic=True)
SOLVERS = planner_names()
FOREIGN = "pod-not-scheduled-by-volcano"
PROTECTED = "pod-disruption-protected"


def marked(obj: dict[str, Any], where: str, key: str, value: str) -> dict[str, Any]:
    obj["metadata"].setdefault(where, {})[key] = value
    return obj


def run(protection: str | None = None) -> dict[str, Any]:
    r = repack_run()
    if protection is not None:
        r["spec"]["disruptionProtection"] = protection
    return r


# n1 holds "mover" (2 cards); n2 holds a 4-card pod of another scheduler (never a candidate) and is the
# only receiver. Unprotected, n1 is freed; protected, nothing is, and n1's reason is the protection.

def two_nodes(solver: str, mover: dict[str, Any], *extra: dict[str, Any],
              protection: str | None = None) -> RepackOutcome:
    loaded, r = load_with_run(node("n1", 8), node("n2", 8), mover, *extra,
                              pod("resident", "n2", 4, scheduler="default-scheduler"), podgroup("pg"), run(protection))
    return plan_repack(loaded.snapshot, r, solver=solver, options=OPTS)


MARKERS: list[tuple[str, str, str, str, bool]] = [
    # (case, metadata field, key, value, protected)
    ("karpenter do-not-disrupt", "annotations", DO_NOT_DISRUPT, "true", True),
    ("karpenter do-not-disrupt false", "annotations", DO_NOT_DISRUPT, "false", False),
    ("karpenter do-not-disrupt as a label", "labels", DO_NOT_DISRUPT, "true", False),
    ("CA safe-to-evict false", "annotations", SAFE_TO_EVICT, "false", True),
    ("CA safe-to-evict true", "annotations", SAFE_TO_EVICT, "true", False),
    ("CA safe-to-evict false as a label", "labels", SAFE_TO_EVICT, "false", False),
    ("Volcano preemptable false (annotation)", "annotations", PREEMPTABLE_KEY, "false", True),
    ("Volcano preemptable false (label)", "labels", PREEMPTABLE_KEY, "false", True),
    ("Volcano preemptable False", "labels", PREEMPTABLE_KEY, "False", True),
    ("Volcano preemptable true", "annotations", PREEMPTABLE_KEY, "true", False),
]


def moves(out: RepackOutcome) -> list[tuple[str, str, str]]:
    return [(m.pod, m.from_node, m.to_node) for m in out.result.plan.moves]


def assert_freed(out: RepackOutcome) -> None:
    assert out.reason == RECOMMENDED
    assert out.result.plan.freed_nodes == ("n1",)
    assert moves(out) == [("default/mover", "n1", "n2")]


def assert_kept(out: RepackOutcome, reasons: dict[str, int]) -> None:
    assert out.reason == INSUFFICIENT
    assert out.result.plan.freed_nodes == () and moves(out) == []
    assert out.result.rejections == reasons


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize(("case", "where", "key", "value", "protected"), MARKERS, ids=[m[0] for m in MARKERS])
def test_marker_keeps_the_pod_and_its_node(case: str, where: str, key: str, value: str, protected: bool,
                                           solver: str) -> None:
    out = two_nodes(solver, marked(pod("mover", "n1", 2), where, key, value))
    if protected:
        assert_kept(out, {PROTECTED: 1, FOREIGN: 1})
    else:
        assert_freed(out)
    # The run says otherwise: the marker is not read.
    assert_freed(two_nodes(solver, marked(pod("mover", "n1", 2), where, key, value), protection="Ignore"))


@pytest.mark.parametrize("solver", SOLVERS)
def test_protection_is_the_default_and_honor_says_so(solver: str) -> None:
    mover = marked(pod("mover", "n1", 2), "annotations", DO_NOT_DISRUPT, "true")
    assert_kept(two_nodes(solver, mover, protection="Honor"), {PROTECTED: 1, FOREIGN: 1})


@pytest.mark.parametrize("solver", SOLVERS)
def test_a_protected_pod_without_the_resource_does_not_block(solver: str) -> None:
    """Only pods that request R move when their node is vacated: a protected cpu-only pod stays, unmoved."""
    sidecar = marked(pod("agent", "n1", 0, group=None, scheduler="default-scheduler"), "annotations",
                     DO_NOT_DISRUPT, "true")
    assert_freed(two_nodes(solver, pod("mover", "n1", 2), sidecar))


# A VCJob whose PodEvicted policy is RestartJob restarts every pod of its PodGroup: evicting worker-0
# (n1) restarts worker-1 (n3, 8 cards, no receiver has room for it). Protecting worker-1 keeps n1 too
# when the eviction would restart it, and only n3 without the policy.

def restart_cluster(policy: list[dict[str, Any]] | None, protect: bool, solver: str) -> RepackOutcome:
    worker1 = task_pod("train-worker-1", "n3", "g", task="worker", gpu=8)
    if protect:
        marked(worker1, "annotations", DO_NOT_DISRUPT, "true")
    loaded, r = load_with_run(
        node("n1", 8), node("n2", 8), node("n3", 8),
        podgroup("g", 1, owner=("batch.volcano.sh/v1alpha1", "Job", "train")),
        running_job("train", [job_task("worker", 2, 2)], policy), task_pod("train-worker-0", "n1", "g", task="worker"),
        worker1, pod("resident", "n2", 4, scheduler="default-scheduler"), run())
    return plan_repack(loaded.snapshot, r, solver=solver, options=OPTS)


@pytest.mark.parametrize("solver", SOLVERS)
def test_a_restart_that_reaches_a_protected_pod_keeps_the_node(solver: str) -> None:
    holds = restart_cluster(EVICTED_RESTART_JOB, protect=False, solver=solver)
    assert holds.result.plan.freed_nodes == ("n1",)
    assert holds.status.plan.moves[0].footprint is not None  # worker-1 restarts with worker-0
    broken = restart_cluster(EVICTED_RESTART_JOB, protect=True, solver=solver)
    assert broken.result.plan.freed_nodes == ()
    assert broken.result.rejections == {PROTECTED: 2, FOREIGN: 1}
    alone = restart_cluster(None, protect=True, solver=solver)  # the eviction restarts worker-0 alone
    assert alone.result.plan.freed_nodes == ("n1",)
    assert alone.result.rejections == {PROTECTED: 1, FOREIGN: 1}


# ---- the validator ------------------------------------------------------------------------------

@pytest.mark.parametrize(("protection", "violations"), [
    (None, ["pod default/mover is not movable: pod-disruption-protected"]),
    ("Honor", ["pod default/mover is not movable: pod-disruption-protected"]),
    ("Ignore", []),
])
def test_validator_rejects_a_plan_that_moves_a_protected_pod(protection: str | None, violations: list[str]) -> None:
    loaded, r = load_with_run(node("n1", 8), node("n2", 8),
                              marked(pod("mover", "n1", 2), "labels", PREEMPTABLE_KEY, "false"),
                              pod("resident", "n2", 4, scheduler="default-scheduler"), podgroup("pg"), run(protection))
    plan = RepackPlan.build([PodMove(pod="default/mover", from_node="n1", to_node="n2")], ["n1"])
    assert plan_violations(RepackProblem(loaded.snapshot, r), plan) == violations


# ---- the Karpenter baseline reads its own marker through the same helper -------------------------

@pytest.mark.parametrize(("where", "key", "value", "blocked"), [
    ("annotations", DO_NOT_DISRUPT, "true", True),
    ("annotations", DO_NOT_DISRUPT, "false", False),
    ("annotations", SAFE_TO_EVICT, "false", False),  # the peer reads karpenter.sh/do-not-disrupt only
])
def test_karpenter_baseline_honours_do_not_disrupt(where: str, key: str, value: str, blocked: bool) -> None:
    loaded, r = load_with_run(node("n1", 8), node("n2", 8), marked(pod("mover", "n1", 2), where, key, value),
                              pod("resident", "n2", 4, scheduler="default-scheduler"), podgroup("pg"), run())
    result = karpenter_multi_node(RepackProblem(loaded.snapshot, r), OPTS)
    moved = [m.pod for m in result.plan.moves]
    if blocked:  # the peer ignores schedulers: it may still vacate n2 into n1
        assert "n1" not in result.plan.freed_nodes and "default/mover" not in moved
    else:
        assert result.plan.freed_nodes == ("n1",) and moved == ["default/mover"]


# ---- the field ------------------------------------------------------------------------------------

def test_unknown_protection_value_is_bad_input() -> None:
    with pytest.raises(InputError, match="disruptionProtection"):
        load_objects([node("n1"), run("Sometimes")])


@pytest.mark.parametrize(("value", "valid"), [("Honor", True), ("Ignore", True), ("Sometimes", False)])
def test_crd_declares_the_field(value: str, valid: bool) -> None:
    assert (errors_of(ROOT_VALIDATOR, run(value)) == []) is valid
