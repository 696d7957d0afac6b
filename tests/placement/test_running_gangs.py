"""Pods that join a running gang (a scale-up, a failed pod's replacement), table-driven and written from
Volcano's rules: the gang's minAvailable counts its running pods (JobInfo.ReadyTaskNum); under hard
network topology the pending pods stay, with the running ones, inside one HyperNode within
highestTierAllowed (the network-topology-aware plugin's getSearchRoot; which HyperNode below it the greedy
takes: test_topology_turns); a HyperNode where none of the pods fits is never a choice (allocate keeps no
solution without an operation). Each case runs through greedy, cpsat and auto and the validator."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pytest
import yaml

from optplan import api
from optplan.cli import main
from optplan.models.placement import Binding, BinpackWeights, PlacementPlan
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.placement.context import Context
from optplan.solvers.placement.model import plan_key
from optplan.solvers.placement.place import plan_placement
from optplan.solvers.placement.validate import placement_violations
from tests.builders import job_task, load, node, place_validated, pod, podgroup, seed_fabric, vcjob

OPTS = PlanOptions(time_limit=5, workers=1, seed=0)
NOW = "2025-06-01T12:00:00Z"
SOLVERS = ("greedy", "cpsat", "auto")


def gang(name: str, replicas: int, gpu: int, on: dict[int, str], *, min_available: int | None = None,
         topo: dict[str, Any] | None = None, phases: dict[int, str] | None = None) -> list[dict[str, Any]]:
    """A running VCJob ``name`` (task ``worker``), its PodGroup and the pods of the replicas in ``on``
    (index -> node), phase Running unless ``phases`` says otherwise."""
    job = vcjob(name, "default", [job_task("worker", replicas, gpu)], min_available=min_available,
                network_topology=topo)
    job["status"] = {"state": {"phase": "Running"}}
    objs = [job, podgroup(f"{name}-pg", min_available or replicas, owner=("batch.volcano.sh/v1alpha1", "Job", name))]
    for i, n in on.items():
        p = pod(f"{name}-worker-{i}", n, gpu, group=f"{name}-pg", phase=(phases or {}).get(i, "Running"))
        p["status"]["startTime"] = "2025-06-01T10:00:00Z"
        objs.append(p)
    return objs


def busy(node_name: str, gpu: int = 8) -> dict[str, Any]:
    return pod(f"busy-{node_name}", node_name, gpu, group=None)


def nodes(n: int = 8, gpu: int = 8) -> list[dict[str, Any]]:
    return [node(f"n{i}", gpu) for i in range(n)]


HARD1 = {"mode": "hard", "highestTierAllowed": 1}
HARD2 = {"mode": "hard", "highestTierAllowed": 2}
SOFT = {"mode": "soft"}


@dataclass
class Case:
    name: str
    objects: list[dict[str, Any]]
    admitted: bool
    binds: dict[str, str] = field(default_factory=dict)
    """ns/pod -> node (the greedy's; the exact plans are checked for the same pods and HyperNode)."""
    hyper_node: str | None = None
    reason: str = ""
    """A part of the reason (not admitted)."""


CASES = [
    # minAvailable 4 counts the 3 running pods: the one pending pod makes the gang ready.
    Case("min-counts-running", [*nodes(2, 4), busy("n1", 1), *gang("j", 4, 1, {0: "n0", 1: "n0", 2: "n0"})],
         admitted=True, binds={"default/j-worker-3": "n0"}),
    # A failed pod's replacement: replica 1 is Failed, so it is the pending one (n0 has room for it).
    Case("failed-replaced", [*nodes(1, 8), *gang("j", 3, 2, {0: "n0", 1: "n0", 2: "n0"}, phases={1: "Failed"})],
         admitted=True, binds={"default/j-worker-1": "n0"}),
    # Hard, highestTierAllowed 1: the running pod is in s0 (n0); n1 is full; the pending pod may not go
    # to s1 (n2, free) — the gang would span s4, tier 2.
    Case("hard-confined", [*nodes(), *seed_fabric(), busy("n1"), *gang("j", 2, 8, {0: "n0"}, topo=HARD1)],
         admitted=False, reason="no region fits the gang"),
    # The same with highestTierAllowed 2: the gang widens to s4 (s0 + s1) and the pod goes to n2.
    Case("hard-widens-within-limit", [*nodes(), *seed_fabric(), busy("n1"),
                                      *gang("j", 2, 8, {0: "n0"}, topo=HARD2)],
         admitted=True, binds={"default/j-worker-1": "n2"}, hyper_node="s4"),
    # Hard: the running pods fill n0; s0 has room on n1 (half full), so the gang stays in s0 (tier 1),
    # though n2 in s1 (6 of 8 taken) has the higher binpack score.
    Case("hard-stays", [*nodes(), *seed_fabric(), busy("n1", 4), busy("n2", 6),
                        *gang("j", 5, 2, {0: "n0", 1: "n0", 2: "n0", 3: "n0"}, topo=HARD2)],
         admitted=True, binds={"default/j-worker-4": "n1"}, hyper_node="s0"),
    # Running pods already spread over s0 and s2 (only s6, tier 3, holds both): under tier 2 no HyperNode
    # may hold the gang.
    Case("hard-running-too-wide", [*nodes(), *seed_fabric(), *gang("j", 3, 1, {0: "n0", 1: "n4"}, topo=HARD2)],
         admitted=False, reason="no HyperNode of tier <= 2 holds the nodes its running pods are on"),
    # Soft: the HyperNode of the running pods first (s0: n1), though n4 in s2 has the higher binpack score.
    Case("soft-prefers", [*nodes(), *seed_fabric(), busy("n1", 4), busy("n4", 6),
                          *gang("j", 5, 2, {0: "n0", 1: "n0", 2: "n0", 3: "n0"}, topo=SOFT)],
         admitted=True, binds={"default/j-worker-4": "n1"}, hyper_node="s0"),
    # Soft: s0 and s4 full: the pod leaves them (s6, tier 3, holds every node).
    Case("soft-leaves-when-full", [*nodes(), *seed_fabric(), busy("n1"), busy("n2"), busy("n3"),
                                   *gang("j", 2, 8, {0: "n0"}, topo=SOFT)],
         admitted=True, binds={"default/j-worker-1": "n4"}, hyper_node="s6"),
    # The gang is ready (2 running of minAvailable 2); its 2 pending pods fit nowhere: not admitted, and
    # no HyperNode is named as a choice with 0 of them placed.
    Case("ready-nothing-fits", [*nodes(2, 8), *seed_fabric()[:1], busy("n1"),
                                *gang("j", 4, 4, {0: "n0", 1: "n0"}, min_available=2, topo=HARD1)],
         admitted=False, reason="0 of its 2 pending pods placed"),
    # The same with room for one: that one is placed.
    Case("ready-one-fits", [*nodes(2, 8), *seed_fabric()[:1], busy("n1", 4),
                            *gang("j", 4, 4, {0: "n0", 1: "n0"}, min_available=2, topo=HARD1)],
         admitted=True, binds={"default/j-worker-2": "n1"}, hyper_node="s0"),
]


def run(case: Case, solver: str) -> PlacementPlan:
    plan: PlacementPlan = place_validated(case.objects, solver, OPTS, NOW)
    return plan


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_running_gang(case: Case, solver: str) -> None:
    jp = run(case, solver).job("default/j")
    assert jp.admitted == case.admitted, jp.reason
    got = {f"default/{b.pod_name('j')}": b.node for b in jp.bindings}
    assert "0 of" not in jp.reason or not jp.admitted
    if not case.admitted:
        assert jp.bindings == () and jp.hyper_node is None
        if solver == "greedy":
            assert case.reason in jp.reason
        return
    assert jp.victims == ()
    assert jp.hyper_node == case.hyper_node
    if solver == "greedy":
        assert got == case.binds
    else:  # the same pending pods; the exact model may pick another node of the same HyperNode
        assert set(got) == set(case.binds)
    if solver == "greedy" and any(b.index for b in jp.bindings):
        assert "pending pods placed" in jp.reason and "running" in jp.reason


def test_validator_checks_running_gangs() -> None:
    case = next(c for c in CASES if c.name == "hard-widens-within-limit")
    snap = load(*case.objects).snapshot
    jobs = list(snap.jobs.values())
    plan = plan_placement(snap, jobs, "greedy", OPTS, now=NOW)
    jp = plan.job("default/j")

    def with_job(**update: Any) -> PlacementPlan:
        return plan.model_copy(update={"jobs": (jp.model_copy(update=update),)})

    # the running replica placed again
    v = placement_violations(snap, jobs, with_job(bindings=(Binding(task="worker", index=0, node="n2"),)))
    assert any("runs already" in x for x in v)
    # a HyperNode that holds the new pod but not the running one
    assert any("running pods on n0 are outside HyperNode s1" in x
               for x in placement_violations(snap, jobs, with_job(hyper_node="s1", tier=1)))
    # admitted with nothing placed
    assert any("places no pod" in x for x in placement_violations(snap, jobs, with_job(bindings=())))


def test_a_running_job_with_a_missing_replica_is_placed_without_being_named(capsys: pytest.CaptureFixture[str],
                                                                            tmp_path: Any) -> None:
    """`optplan place SNAPSHOT` (no --job) and api.place_jobs pick up a Running VCJob whose replica is not
    running, as they pick up Pending ones; a Running job whose replicas all run is left alone."""
    objs = [*nodes(2, 4), *gang("j", 3, 1, {0: "n0", 1: "n0"}), *gang("done", 1, 1, {0: "n1"})]
    path = tmp_path / "snap.yaml"
    path.write_text(yaml.safe_dump_all(objs))
    doc = api.place_jobs(api.load_snapshot(path), now=NOW).document
    assert [j["name"] for j in doc["jobs"]] == ["j"]
    assert doc["jobs"][0]["admitted"] and [b["index"] for b in doc["jobs"][0]["bindings"]] == [2]
    assert main(["place", str(path), "--now", NOW, "-o", "json"]) == 0
    assert [j["name"] for j in json.loads(capsys.readouterr().out)["jobs"]] == ["j"]



WEIGHT_CASES = [
    # (name, objects, the job left out, plan_key's admitted weight of the plan admitting every job, without it)
    ("ready gang alone", [*nodes(2, 8), busy("n1", 4), *gang("j", 3, 4, {0: "n0", 1: "n0"}, min_available=2)],
     "default/j", 1, 0),
    # a waiting job (weight 1) next to the ready gang (weight 1): the waiting one is worth 1 × (1 + 1), more than
    # all ready ones together
    ("ready gang next to a waiting job: the ready one left out", [
        *nodes(2, 8), *gang("j", 3, 4, {0: "n0", 1: "n0"}, min_available=2),
        vcjob("w", "default", [job_task("worker", 1, 4)])], "default/j", 3, 2),
    ("ready gang next to a waiting job: the waiting one left out", [
        *nodes(2, 8), *gang("j", 3, 4, {0: "n0", 1: "n0"}, min_available=2),
        vcjob("w", "default", [job_task("worker", 1, 4)])], "default/w", 3, 1),
]


@pytest.mark.parametrize(("name", "objects", "key", "full", "without"), WEIGHT_CASES, ids=[c[0] for c in WEIGHT_CASES])
def test_a_ready_gangs_pod_has_its_admission_weight(name: str, objects: list[dict[str, Any]], key: str, full: int,
                                                      without: int) -> None:
    """A job whose running pods already make its gang ready weighs its admission weight in the exact objective
    (``plan_key``, what ``auto`` compares and ``cpsat`` maximises first): a plan that places one of its pods
    ranks above one that leaves it out (it weighed 0, so ``cpsat`` could leave it out at no cost); a waiting job
    still outweighs every ready one together."""
    snap = load(*objects).snapshot
    jobs = list(snap.jobs.values())
    ctx = Context.build(snap, jobs, BinpackWeights(), datetime.fromisoformat(NOW))
    plan = plan_placement(snap, jobs, "greedy", OPTS, now=NOW)
    assert all(jp.admitted for jp in plan.jobs)
    left_out = plan.model_copy(update={"jobs": tuple(
        jp.model_copy(update={"admitted": False, "bindings": (), "reason": "left out"}) if jp.key == key else jp
        for jp in plan.jobs)})
    assert (-plan_key(ctx, plan).neg_admitted, -plan_key(ctx, left_out).neg_admitted) == (full, without)
