"""PodDisruptionBudgets as the Eviction API applies them (policy/v1 ``pods/eviction``), written from its rule:

- a Pending, Succeeded or Failed pod, or one being deleted, is deleted without looking at budgets;
- otherwise: no covering PDB, no budget; several, refused (500) whatever they hold;
- one PDB: a pod that is not Ready goes without it — ``disruptionsAllowed`` is not decremented — under
  ``unhealthyPodEvictionPolicy: AlwaysAllow``, and under ``IfHealthyBudget`` (the default) while
  ``currentHealthy >= desiredHealthy`` with ``desiredHealthy > 0``;
- else the eviction needs ``disruptionsAllowed > 0`` (0 answers 429) and takes one from it.

The table is checked three ways: against optplan's rule (``snapshot.eviction_need``, read by every planner
and the validator), against the fake API server's eviction handler (tests/fakekube.py, written apart), and
through the CLI, where a plan now moves an unhealthy covered pod."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from optplan.adapters.kubefile import load_objects
from optplan.cli import main
from optplan.models.snapshot import SEVERAL_PDBS, eviction_need
from tests.builders import node, pdb, pod, podgroup, ready, repack_run
from tests.fakekube import ApiError, FakeKube

APP = {"app": "svc"}
SPENDS, FREE, REFUSED = "spends the budget", "no budget", "refused"

# id -> (policy (None: absent), Ready (None: no Ready condition), currentHealthy, desiredHealthy, phase,
#        being deleted, what evicting it needs)
CASES: dict[str, tuple[str | None, bool | None, int, int, str, bool, str]] = {
    "ready, default policy": (None, True, 3, 2, "Running", False, SPENDS),
    "ready, AlwaysAllow": ("AlwaysAllow", True, 3, 2, "Running", False, SPENDS),
    "ready, IfHealthyBudget, not disrupted": ("IfHealthyBudget", True, 2, 2, "Running", False, SPENDS),
    "not ready, AlwaysAllow, app disrupted": ("AlwaysAllow", False, 0, 2, "Running", False, FREE),
    "not ready, AlwaysAllow, app healthy": ("AlwaysAllow", False, 3, 2, "Running", False, FREE),
    "no Ready condition, AlwaysAllow": ("AlwaysAllow", None, 0, 2, "Running", False, FREE),
    "not ready, IfHealthyBudget, current = desired": ("IfHealthyBudget", False, 2, 2, "Running", False, FREE),
    "not ready, IfHealthyBudget, current > desired": ("IfHealthyBudget", False, 5, 2, "Running", False, FREE),
    "not ready, IfHealthyBudget, current < desired": ("IfHealthyBudget", False, 1, 2, "Running", False, SPENDS),
    "not ready, default policy, current >= desired": (None, False, 3, 2, "Running", False, FREE),
    "not ready, default policy, current < desired": (None, False, 0, 1, "Running", False, SPENDS),
    "not ready, default policy, desired 0": (None, False, 0, 0, "Running", False, SPENDS),
    "not ready, IfHealthyBudget, desired 0, current 1": ("IfHealthyBudget", False, 1, 0, "Running", False, SPENDS),
    "Pending": (None, False, 0, 2, "Pending", False, FREE),
    "Succeeded": (None, False, 0, 2, "Succeeded", False, FREE),
    "Failed": ("IfHealthyBudget", True, 0, 2, "Failed", False, FREE),
    "ready but being deleted": (None, True, 0, 2, "Running", True, FREE),
    "Unknown phase, ready": (None, True, 3, 2, "Unknown", False, SPENDS),
    "Unknown phase, not ready, AlwaysAllow": ("AlwaysAllow", False, 0, 2, "Unknown", False, FREE),
}


def _pod(ready_value: bool | None, phase: str, deleting: bool) -> dict[str, Any]:
    p = ready(pod("p", "n1", labels=APP, phase=phase), ready_value)
    p["metadata"]["uid"] = "uid-p"
    if deleting:
        p["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return p


def _objects(case: str, allowed: int, *, budgets: int = 1) -> list[dict[str, Any]]:
    policy, ready_value, current, desired, phase, deleting, _ = CASES[case]
    pdbs = [pdb(f"b{i}", APP, allowed, policy=policy, current=current, desired=desired) for i in range(budgets)]
    return [node("n1"), podgroup("pg"), _pod(ready_value, phase, deleting), *pdbs]


def _need(objects: list[dict[str, Any]]) -> str:
    snap = load_objects(objects).snapshot
    need = eviction_need(snap.pods["default/p"], snap.pdbs.values())
    if need.refused is not None:
        return REFUSED
    return SPENDS if need.spends is not None else FREE


@pytest.mark.parametrize("case", list(CASES))
def test_the_rule(case: str) -> None:
    assert _need(_objects(case, 0)) == CASES[case][-1]


@pytest.mark.parametrize("case", list(CASES))
def test_several_budgets_refuse_unless_the_budgets_are_skipped(case: str) -> None:
    """The Eviction API looks for several PDBs before it looks at readiness: only the phase and deletion
    exemptions come first."""
    _, _, _, _, phase, deleting, _ = CASES[case]
    skipped = phase in ("Pending", "Succeeded", "Failed") or deleting
    assert _need(_objects(case, 1, budgets=2)) == (FREE if skipped else REFUSED)


def _evict(objects: list[dict[str, Any]]) -> tuple[int, list[int]]:
    """Evict the pod on the fake API server: the answer's code and each PDB's disruptionsAllowed after."""
    kube = FakeKube()
    kube.add(*objects)
    try:
        kube.evict("p")
        code = 201
    except ApiError as e:
        code = e.code
    allowed = [kube.get("policy/v1", "PodDisruptionBudget", o["metadata"]["name"], "default")["status"]
               ["disruptionsAllowed"] for o in objects if o["kind"] == "PodDisruptionBudget"]
    return code, allowed


@pytest.mark.parametrize("case", list(CASES))
def test_the_fake_api_server_evicts_by_the_same_rule(case: str) -> None:
    """A pod that spends the budget is refused (429) at 0 and takes one from 1; a pod that needs no budget
    goes at 0 and leaves 1 as it is; under two budgets, 500 unless the budgets are skipped."""
    need = CASES[case][-1]
    assert _evict(_objects(case, 0)) == ((429, [0]) if need == SPENDS else (201, [0]))
    assert _evict(_objects(case, 1)) == ((201, [0]) if need == SPENDS else (201, [1]))
    expected_two = REFUSED if _need(_objects(case, 1, budgets=2)) == REFUSED else FREE
    assert _evict(_objects(case, 1, budgets=2)) == ((500, [1, 1]) if expected_two == REFUSED else (201, [1, 1]))


def test_an_unknown_policy_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "a.yaml"
    objs = [node("n1"), node("n2"), podgroup("pg"), pod("p1", "n1"), pdb("b", APP, 0, policy="Sometimes"),
            repack_run()]
    path.write_text(yaml.safe_dump_all(objs), encoding="utf-8")
    assert main(["repack", str(path)]) == 2
    cap = capsys.readouterr()
    assert cap.out == "" and cap.err.count("\n") == 1
    assert "PodDisruptionBudget/default/b: spec.unhealthyPodEvictionPolicy: unknown policy 'Sometimes'" in cap.err


# ---- planners and validator, through the CLI -------------------------------------------------------

def _cluster(policy: str | None, current: int, desired: int, allowed: int) -> list[dict[str, Any]]:
    """n0 receives (16 cards, half taken by a pod of another scheduler); n1 holds a Ready pod and a pod
    that is Running but not Ready, both covered by one PDB; n2 holds an uncovered pod."""
    return [node("n0", 16), ready(pod("resident", "n0", 8, scheduler="default-scheduler")),
            node("n1", 8), node("n2", 8), podgroup("pg"),
            ready(pod("healthy", "n1", 1, labels=APP)), ready(pod("crashing", "n1", 1, labels=APP), False),
            ready(pod("other", "n2", 1)),
            pdb("svc", APP, allowed, policy=policy, current=current, desired=desired), repack_run()]


def _freed(tmp_path: Path, capsys: pytest.CaptureFixture[str], objs: list[dict[str, Any]], solver: str) -> list[str]:
    path = tmp_path / "snap.yaml"
    path.write_text(yaml.safe_dump_all(objs), encoding="utf-8")
    assert main(["repack", str(path), "--solver", solver, "-o", "json", "--time-limit", "5"]) == 0  # validated
    doc = json.loads(capsys.readouterr().out)
    return sorted(doc["status"]["plan"]["freedNodes"])


@pytest.mark.parametrize("solver", ["greedy", "cpsat", "milp"])
@pytest.mark.parametrize(("policy", "current", "desired", "allowed", "freed"), [
    # the unhealthy pod leaves under AlwaysAllow; the healthy one still needs the one disruption allowed
    ("AlwaysAllow", 1, 2, 1, ["n1", "n2"]),
    ("AlwaysAllow", 1, 2, 0, ["n2"]),  # the healthy pod stays, so n1 stays
    # IfHealthyBudget: the application is not disrupted (current >= desired > 0), the unhealthy pod is free
    (None, 2, 1, 1, ["n1", "n2"]),
    ("IfHealthyBudget", 2, 1, 1, ["n1", "n2"]),
    # disrupted (current < desired): the unhealthy pod needs the budget too, and 1 is not enough for both
    ("IfHealthyBudget", 1, 2, 1, ["n2"]),
    ("IfHealthyBudget", 1, 2, 2, ["n1", "n2"]),
])
def test_a_plan_moves_an_unhealthy_covered_pod(tmp_path: Path, capsys: pytest.CaptureFixture[str], solver: str,
                                               policy: str | None, current: int, desired: int, allowed: int,
                                               freed: list[str]) -> None:
    assert _freed(tmp_path, capsys, _cluster(policy, current, desired, allowed), solver) == freed


def test_only_unhealthy_pods_at_zero_budget(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """disruptionsAllowed 0 and every covered pod not Ready under AlwaysAllow: the node is freed; the same
    pods Ready: it is not."""
    objs = _cluster("AlwaysAllow", 0, 2, 0)
    objs[5] = ready(pod("healthy", "n1", 1, labels=APP), False)
    assert _freed(tmp_path, capsys, objs, "greedy") == ["n1", "n2"]
    objs[5] = ready(pod("healthy", "n1", 1, labels=APP), True)
    objs[6] = ready(pod("crashing", "n1", 1, labels=APP), True)
    assert _freed(tmp_path, capsys, objs, "greedy") == ["n2"]


def test_a_pod_under_two_budgets_never_moves(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The Eviction API refuses (500) a pod two PDBs cover, whatever they allow: its node is not vacated,
    and the table says why."""
    objs = [*_cluster(None, 3, 1, 2), pdb("svc2", APP, 2)]
    assert _freed(tmp_path, capsys, objs, "greedy") == ["n2"]
    assert main(["repack", str(tmp_path / "snap.yaml"), "--solver", "greedy", "-o", "table"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [ln.split() for ln in lines if ln.startswith(SEVERAL_PDBS)] == [[SEVERAL_PDBS, "1"]]
    assert _freed(tmp_path, capsys, objs[:-1], "greedy") == ["n1", "n2"]
