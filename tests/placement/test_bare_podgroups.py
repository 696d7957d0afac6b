"""Bare PodGroups (no VCJob: Kubeflow's training-operator, KubeRay, LeaderWorkerSet, JobSet or a user created the
PodGroup and its pods) placed as vc-scheduler places them: it builds a JobInfo from any PodGroup and the pods
naming it, so the gang, queue, topology and victim rules are a VCJob's (``placement.jobs.pod_group_job``).
Table-driven, written from Volcano's rules (``JobInfo``: minMember is minAvailable; ``minTaskMember`` by the
pods' ``volcano.sh/task-spec``, checked only when minMember is not below its sum, ``CheckTaskReady``; a
``subGroupPolicy`` subgroup is a sub-job of ``subGroupSize`` pods under its own topology and ``minSubGroups``
of them make the gang, ``CheckSubJobReady``). Every case runs through greedy, cpsat and auto; every plan passes
the validator and names the real pods."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from optplan.cli import main
from optplan.models.placement import Binding, BinpackWeights, PlacementPlan
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.placement.context import Context
from optplan.solvers.placement.jobs import jobs_to_place
from optplan.solvers.placement.model import plan_key
from optplan.solvers.placement.place import plan_placement
from optplan.solvers.placement.validate import placement_violations
from tests.builders import (
    GPU,
    job_task,
    load,
    node,
    pod,
    podgroup,
    priority_class,
    queue,
    repack_run,
    seed_fabric,
    vcjob,
)

OPTS = PlanOptions(time_limit=5, workers=1, seed=0)
NOW = "2025-06-01T12:00:00Z"
SOLVERS = ("greedy", "cpsat", "auto")
HARD1 = {"mode": "hard", "highestTierAllowed": 1}
HARD2 = {"mode": "hard", "highestTierAllowed": 2}


def bare(name: str, min_member: int, *, queue_name: str = "default", topo: dict[str, Any] | None = None,
         min_task_member: dict[str, int] | None = None, sub_groups: list[dict[str, Any]] | None = None,
         priority_class_name: str | None = None) -> dict[str, Any]:
    """A PodGroup no VCJob owns."""
    pg = podgroup(name, min_member, owner=None, network_topology=topo)
    pg["spec"]["queue"] = queue_name
    if min_task_member is not None:
        pg["spec"]["minTaskMember"] = min_task_member
    if sub_groups is not None:
        pg["spec"]["subGroupPolicy"] = sub_groups
    if priority_class_name is not None:
        pg["spec"]["priorityClassName"] = priority_class_name
    return pg


def member(name: str, group: str, gpu: int, *, on: str | None = None, task: str | None = None,
           labels: dict[str, str] | None = None, cpu: str = "1") -> dict[str, Any]:
    """A pod of the PodGroup: pending (no node) unless ``on`` names where it runs; ``task``: its task-spec."""
    p = pod(name, on, gpu, group=group, phase="Running" if on else "Pending", labels=labels, cpu=cpu)
    if task is not None:
        p["metadata"]["annotations"]["volcano.sh/task-spec"] = task
    if on:
        p["status"]["startTime"] = "2025-06-01T10:00:00Z"
    return p


def busy(node_name: str, gpu: int = 8) -> dict[str, Any]:
    return pod(f"busy-{node_name}", node_name, gpu, group=None)


def nodes(n: int = 8, gpu: int = 8) -> list[dict[str, Any]]:
    return [node(f"n{i}", gpu) for i in range(n)]


def team_a_job() -> list[dict[str, Any]]:
    """A one-pod gang of queue team-a running on n0 (8 GPUs)."""
    pg = bare("a", 1, queue_name="team-a", priority_class_name="normal-job")
    p = member("a-0", "a", 8, on="n0")
    p["spec"]["priorityClassName"] = "normal-job"
    return [pg, p]


def subgroup(size: int, min_groups: int, topo: dict[str, Any] | None = None) -> dict[str, Any]:
    """One subGroupPolicy entry: subgroups by the pods' ``grp`` label."""
    out: dict[str, Any] = {"name": "g", "subGroupSize": size, "minSubGroups": min_groups, "matchLabelKeys": ["grp"]}
    if topo is not None:
        out["networkTopology"] = topo
    return out


def grouped(pg: str, gpu: int, groups: dict[str, int], *, on: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Pods ``<pg>-<g><i>`` labelled grp=g, ``groups[g]`` of each; ``on``: pod name -> node of the running ones."""
    return [member(f"{pg}-{g}{i}", pg, gpu, labels={"grp": g}, on=(on or {}).get(f"{pg}-{g}{i}"))
            for g, n in groups.items() for i in range(n)]


@dataclass
class Case:
    name: str
    objects: list[dict[str, Any]]
    admitted: bool
    pods: frozenset[str] = frozenset()
    """The pods the plan binds (every solver)."""
    binds: dict[str, str] = field(default_factory=dict)
    """pod -> node, the greedy's (the exact plans: the same pods, ``pods``)."""
    hyper_node: str | None = None
    reason: str = ""
    """A part of the greedy's reason (not admitted)."""
    victims: frozenset[str] = frozenset()
    same_hyper_node: tuple[frozenset[str], ...] = ()
    """Groups of pods each inside one tier-1 HyperNode (every solver)."""
    exact_others: bool = False
    """The exact model may bind as many other pods (another subgroup as good)."""


def names(*pods: str) -> frozenset[str]:
    return frozenset(pods)


CASES = [
    # minMember 2, two pending pods, room for both: admitted, the pods named as they are.
    Case("min-member-fits", [*nodes(2), bare("pg", 2), member("trainer-a", "pg", 8), member("trainer-b", "pg", 8)],
         admitted=True, pods=names("trainer-a", "trainer-b"), binds={"trainer-a": "n0", "trainer-b": "n1"}),
    # minMember 3 of three pods, room for two (n2 is full): not admitted, nothing placed (the Statement is
    # discarded).
    Case("min-member-short", [*nodes(3), busy("n2"), bare("pg", 3), *(member(f"p{i}", "pg", 8) for i in range(3))],
         admitted=False, reason="2 of minAvailable 3 pods placed"),
    # minMember 2 of three pods, room for two: admitted with two.
    Case("min-member-below-size", [*nodes(2), bare("pg", 2), *(member(f"p{i}", "pg", 8) for i in range(3))],
         admitted=True, pods=names("p0", "p1"), binds={"p0": "n0", "p1": "n1"}),
    # minTaskMember worker 2 (ps 1), minMember 3 = their sum: the task minimums count. 6 GPUs hold both ps pods and
    # one worker (3 pods, minMember met) but not the second worker: not admitted.
    Case("min-task-member-short", [
        node("n0", 6), node("n1"), busy("n1"), bare("pg", 3, min_task_member={"ps": 1, "worker": 2}),
        member("ps-0", "pg", 1, task="ps"), member("ps-1", "pg", 1, task="ps"),
        member("worker-0", "pg", 4, task="worker"), member("worker-1", "pg", 4, task="worker")],
        admitted=False, reason="pod worker-1: 0/2 nodes fit"),
    # The same pods under minTaskMember worker 1: one worker and the ps pods make the gang.
    Case("min-task-member-met", [
        node("n0", 6), bare("pg", 3, min_task_member={"ps": 1, "worker": 1}),
        member("ps-0", "pg", 1, task="ps"), member("ps-1", "pg", 1, task="ps"),
        member("worker-0", "pg", 4, task="worker"), member("worker-1", "pg", 4, task="worker")],
        admitted=True, pods=names("ps-0", "ps-1", "worker-0")),
    # minMember 1 below minTaskMember's sum 2: Volcano skips the task check, one pod is a ready gang.
    Case("min-task-member-skipped", [
        node("n0", 4), bare("pg", 1, min_task_member={"worker": 2}),
        member("worker-0", "pg", 4, task="worker"), member("worker-1", "pg", 4, task="worker")],
        admitted=True, pods=names("worker-0")),
    # A partly running bare gang, hard tier 1: its running pod is in s0 (n0), n1 is full; the pending pod may not
    # go to s1 (the gang would span s4, tier 2).
    Case("running-hard-confined", [
        *nodes(), *seed_fabric(), busy("n1"), bare("pg", 2, topo=HARD1),
        member("r-0", "pg", 8, on="n0"), member("r-1", "pg", 8)],
        admitted=False, reason="no region fits the gang"),
    # The same at tier 2: the pending pod joins the running one's HyperNode s4, on n2.
    Case("running-hard-widens", [
        *nodes(), *seed_fabric(), busy("n1"), bare("pg", 2, topo=HARD2),
        member("r-0", "pg", 8, on="n0"), member("r-1", "pg", 8)],
        admitted=True, pods=names("r-1"), binds={"r-1": "n2"}, hyper_node="s4"),
    # Hard tier 1 with room beside the running pods: the pending ones stay in s0 though s1 is free.
    Case("running-hard-stays", [
        *nodes(), *seed_fabric(), busy("n1", 4), bare("pg", 3, topo=HARD1),
        member("r-0", "pg", 4, on="n0"), member("r-1", "pg", 4, on="n0"), member("r-2", "pg", 4)],
        admitted=True, pods=names("r-2"), binds={"r-2": "n1"}, hyper_node="s0"),
    # subGroupPolicy: two subgroups of two 8-GPU pods, each hard inside a tier-1 HyperNode, minSubGroups 2. n1 and
    # n3 are full, so s0 and s1 hold one pod each: the subgroups go to s2 and s3.
    Case("subgroups-hard", [
        *nodes(), *seed_fabric(), busy("n1"), busy("n3"), bare("pg", 4, sub_groups=[subgroup(2, 2, HARD1)]),
        *grouped("pg", 8, {"a": 2, "b": 2})],
        admitted=True, pods=names("pg-a0", "pg-a1", "pg-b0", "pg-b1"),
        same_hyper_node=(names("pg-a0", "pg-a1"), names("pg-b0", "pg-b1"))),
    # The same with n5 and n7 full too: four nodes are free, but no tier-1 HyperNode holds a subgroup.
    Case("subgroups-hard-none-fits", [
        *nodes(), *seed_fabric(), *(busy(f"n{i}") for i in (1, 3, 5, 7)),
        bare("pg", 4, sub_groups=[subgroup(2, 2, HARD1)]), *grouped("pg", 8, {"a": 2, "b": 2})],
        admitted=False),
    # minSubGroups 1 of two subgroups (minMember 2): one subgroup whole in s2 makes the gang.
    Case("subgroups-min-one", [
        *nodes(), *seed_fabric(), *(busy(f"n{i}") for i in (0, 1, 2, 3, 6, 7)),
        bare("pg", 2, sub_groups=[subgroup(2, 1, HARD1)]), *grouped("pg", 8, {"a": 2, "b": 2})],
        admitted=True, pods=names("pg-a0", "pg-a1"), binds={"pg-a0": "n4", "pg-a1": "n5"}, exact_others=True),
    # A subgroup partly running (pg-a0 on n4, in s2): its pending pod stays in s2 (n5), the other subgroup goes
    # whole into a tier-1 HyperNode with room (s3).
    Case("subgroups-running", [
        *nodes(), *seed_fabric(), *(busy(f"n{i}") for i in (0, 1, 2, 3)),
        bare("pg", 4, sub_groups=[subgroup(2, 2, HARD1)]), *grouped("pg", 8, {"a": 2, "b": 2}, on={"pg-a0": "n4"})],
        admitted=True, pods=names("pg-a1", "pg-b0", "pg-b1"),
        binds={"pg-a1": "n5", "pg-b0": "n6", "pg-b1": "n7"}),
    # The bare PodGroup is the starving job of team-b (under its deserved); team-a runs above its deserved on the
    # only node: reclaim takes team-a's pod.
    Case("reclaim-for-bare", [
        priority_class("normal-job", 100), node("n0"), queue("team-a", deserved={GPU: 4}),
        queue("team-b", deserved={GPU: 8}), *team_a_job(),
        bare("pg", 1, queue_name="team-b", priority_class_name="normal-job"), member("new-0", "pg", 8)],
        admitted=True, pods=names("new-0"), binds={"new-0": "n0"}, victims=names("a-0")),
]


def plan_of(objs: list[dict[str, Any]], solver: str) -> PlacementPlan:
    snap = load(*objs).snapshot
    jobs = jobs_to_place(snap)
    plan = plan_placement(snap, jobs, solver, OPTS, now=NOW)
    assert placement_violations(snap, jobs, plan) == []
    return plan


def tier1(node_name: str) -> str:
    return f"s{int(node_name[1:]) // 2}"


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bare_podgroup(case: Case, solver: str) -> None:
    jp = plan_of(case.objects, solver).job("default/pg")
    assert jp.admitted == case.admitted, jp.reason
    if not case.admitted:
        assert jp.bindings == () and jp.victims == ()
        if solver == "greedy":
            assert case.reason in jp.reason
        return
    got = {b.pod_name("pg"): b.node for b in jp.bindings}
    assert all(b.pod is not None for b in jp.bindings)
    if solver == "greedy" or not case.exact_others:
        assert set(got) == case.pods
    assert len(got) == len(case.pods)
    if solver == "greedy" and case.binds:
        assert got == case.binds
    assert jp.hyper_node == case.hyper_node
    assert {v.name for v in jp.victims} == case.victims
    for together in case.same_hyper_node:
        assert len({tier1(got[p]) for p in together}) == 1, got


def test_a_podgroup_owned_by_a_vcjob_is_placed_once() -> None:
    """The VCJob's PodGroup (its controller ownerReference names the job) is the job's: only the VCJob is placed,
    its pods by the job's replicas; a PodGroup owned by no VCJob of the snapshot is placed on its own."""
    objs = [*nodes(2), vcjob("j", tasks=[job_task("worker", 2, 8)]),
            podgroup("j-pg", 2, owner=("batch.volcano.sh/v1alpha1", "Job", "j")),
            member("j-worker-0", "j-pg", 8), member("j-worker-1", "j-pg", 8)]
    snap = load(*objs).snapshot
    assert [(j.key, j.kind) for j in jobs_to_place(snap)] == [("default/j", "Job")]
    plan = plan_of(objs, "greedy")
    assert [jp.key for jp in plan.jobs] == ["default/j"]
    assert {b.pod_name("j") for b in plan.job("default/j").bindings} == {"j-worker-0", "j-worker-1"}
    orphan = [*nodes(2), podgroup("o-pg", 2, owner=("batch.volcano.sh/v1alpha1", "Job", "gone")),
              member("o-0", "o-pg", 8), member("o-1", "o-pg", 8)]
    assert [j.key for j in jobs_to_place(load(*orphan).snapshot)] == ["default/o-pg"]


def test_which_pods_are_the_podgroups() -> None:
    """Pending pods of another scheduler, Failed and deleting pods are not placed; a PodGroup whose pods all run
    (or Succeeded) has nothing to place."""
    other = member("x-1", "x", 8)
    other["spec"]["schedulerName"] = "default-scheduler"
    failed = member("x-2", "x", 8)
    failed["status"]["phase"] = "Failed"
    deleting = member("x-3", "x", 8)
    deleting["metadata"]["deletionTimestamp"] = "2025-06-01T11:00:00Z"
    objs = [*nodes(2), bare("x", 1), member("x-0", "x", 8), other, failed, deleting,
            bare("done", 1), member("done-0", "done", 8, on="n1")]
    jobs = jobs_to_place(load(*objs).snapshot)
    assert [j.key for j in jobs] == ["default/x"]
    assert [m.name for t in jobs[0].tasks for m in t.members] == ["x-0"]


def test_a_subgroup_policy_it_cannot_say_is_left_out(caplog: pytest.LogCaptureFixture) -> None:
    """A subgroup of 1 pod under subGroupSize 2: the PodGroup is not placed, and the log says why."""
    objs = [*nodes(2), bare("pg", 2, sub_groups=[subgroup(2, 1)]), *grouped("pg", 8, {"a": 2, "b": 1})]
    with caplog.at_level("WARNING"):
        assert jobs_to_place(load(*objs).snapshot) == []
    assert "subgroup b has 1 pods, its subGroupSize 2" in caplog.text


def test_the_validator_checks_the_pod_names() -> None:
    case = CASES[0]
    snap = load(*case.objects).snapshot
    jobs = jobs_to_place(snap)
    plan = plan_placement(snap, jobs, "greedy", OPTS, now=NOW)
    jp = plan.job("default/pg")
    wrong = (Binding(task="", index=0, node="n0", pod="trainer-b"), jp.bindings[1])
    bad = plan.model_copy(update={"jobs": (jp.model_copy(update={"bindings": wrong}),)})
    assert any("the replica is pod trainer-a" in x for x in placement_violations(snap, jobs, bad))


def test_optplan_place_names_the_pods(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`optplan place SNAPSHOT` plans a bare PodGroup's pending pods (it found no job before) and names them:
    "pod" in the JSON bindings, the POD column of the table."""
    path = tmp_path / "snap.yaml"
    path.write_text(yaml.safe_dump_all(CASES[0].objects))
    assert main(["place", str(path), "--now", NOW, "--solver", "greedy", "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [(b["pod"], b["node"]) for b in doc["jobs"][0]["bindings"]] == [("trainer-a", "n0"), ("trainer-b", "n1")]
    assert main(["place", str(path), "--now", NOW, "--solver", "greedy", "-o", "table"]) == 0
    assert "trainer-a" in capsys.readouterr().out


def test_a_bare_gang_waiting_by_fragmentation_is_admitted_by_a_goal(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Two half-used 8-card nodes and a bare PodGroup's pending 8-card pod: `optplan frag --pending` counts it as
    waiting by fragmentation, and `optplan repack --admit default/pg` moves one pod so that it lands, naming
    the pod in its forecast."""
    objs = [*nodes(2), bare("a", 1), member("a-0", "a", 4, on="n0"), bare("b", 1), member("b-0", "b", 4, on="n1"),
            bare("pg", 1), member("big-0", "pg", 8), repack_run()]
    path = tmp_path / "snap.yaml"
    path.write_text(yaml.safe_dump_all(objs))
    assert main(["frag", str(path), "--resource", GPU, "--pending", "-o", "json"]) == 0
    pending = json.loads(capsys.readouterr().out)["pendingByFragmentation"]
    assert pending["byFragmentation"] == 1 and [g["name"] for g in pending["gangs"]] == ["pg"]
    assert main(["repack", str(path), "--admit", "default/pg", "-o", "json"]) == 0
    goals = json.loads(capsys.readouterr().out)["status"]["plan"]["goals"]
    [adm] = goals["admissions"]
    assert adm["admitted"] and [b["pod"] for b in adm["bindings"]] == ["big-0"]


# Volcano's reclaim (and preempt) pops a starving job's pending pods by the session's TaskOrderFn over all of them,
# with no sub-job step (vc-scheduler v1.15.1, ``actions/reclaim``: ``preemptorTasks``): the pod's priority, then
# the job controller's ``CompareTask`` — the index a pod's name ends in, then creation, then UID. A bare gang of three
# subgroups of two 1-GPU pods (``g-s0-0``, ``g-s0-1``, ...; minSubGroups 2) reclaims on three full nodes (eight
# 1-GPU pods of queue ``other`` each, one-pod gangs, ``other`` above its deserved 0): the pods go ``g-s0-0,
# g-s1-0, g-s2-0`` (index 0, by UID), then ``g-s0-1``... Queue ``mine`` deserved 4 GPUs stops the reclaim after four
# pods, one subgroup whole: not pipelined, the statement discarded (no victims). Deserved 6 leaves room for a fifth
# pod (``g-s1-1``, which would make two subgroups whole), but after four the job is no longer starving — by minMember
# alone (the gang plugin's JobStarvingFn: "the taskMinAvailable configuration is not concerned"), subgroups no more
# than tasks — and the reclaim stops there: discarded as well.
BY_TASK_ORDER = [  # (what, mine's deserved GPUs, admitted, victims)
    ("four pods by index: one subgroup whole, discarded", 4, False, 0),
    ("room for five, but it stops at minMember 4: discarded", 6, False, 0),
]


@pytest.mark.parametrize(("what", "deserved", "admitted", "victims"), BY_TASK_ORDER, ids=[c[0] for c in BY_TASK_ORDER])
def test_reclaim_takes_a_jobs_pods_in_volcanos_task_order(what: str, deserved: int, admitted: bool,
                                                          victims: int) -> None:
    objs: list[dict[str, Any]] = [*nodes(3), queue("mine", deserved={GPU: deserved}), queue("other", deserved={GPU: 0}),
                                  bare("g", 4, queue_name="mine", sub_groups=[subgroup(2, 2)])]
    for k in range(3):
        for i in range(2):
            p = member(f"g-s{k}-{i}", "g", 1, labels={"grp": f"s{k}"})
            p["metadata"]["uid"] = f"uid-{k}-{i}"
            objs.append(p)
    for n in range(3):
        for i in range(8):
            objs += [bare(f"o{n}{i}", 1, queue_name="other"), member(f"o{n}{i}-0", f"o{n}{i}", 1, on=f"n{n}")]
    jp = plan_of(objs, "greedy").job("default/g")
    assert (jp.admitted, len(jp.victims)) == (admitted, victims), jp.reason


# Volcano's reclaim hands the plugins every Running pod of another reclaimable queue on the node, a starving gang's
# too (vc-scheduler v1.15.1, ``actions/reclaim``: no job-state filter; preempt likewise within the queue). ``g``
# (queue ``other``, minMember 2) runs ``g-0`` on n0 (8 GPUs) and waits for ``g-1``, which fits nowhere (n1 runs
# ``b-0`` of queue ``keep``, within its deserved); ``j`` (queue ``mine``, deserved 8) needs a node whole. The gang
# plugin offers nothing for ``g-0`` (ready 1 <= minMember 2), its tier ends, and the capacity plugin decides:
# ``other`` above its deserved gives ``g-0`` up, ``j`` takes it and the next cycle places it; ``g`` has then one
# pod, never minMember (nothing makes a bare PodGroup's pod again). ``other`` within its deserved keeps it. The
# exact model takes such a pod by the same tiers (``model.VictimData.owner``): cpsat's own plan takes ``g-0`` and
# says why ``g`` waits; auto answers OPTIMAL.
def starving_gang(deserved: int) -> list[dict[str, Any]]:
    return [*nodes(2), queue("mine", deserved={GPU: 8}), queue("other", deserved={GPU: deserved}),
            queue("keep", deserved={GPU: 8}), bare("b", 1, queue_name="keep"), member("b-0", "b", 8, on="n1"),
            bare("g", 2, queue_name="other"), member("g-0", "g", 8, on="n0"), member("g-1", "g", 8),
            bare("j", 1, queue_name="mine"), member("j-0", "j", 8)]


STARVING_GANG = [  # (what, other's deserved GPUs, j admitted, its victims)
    ("above deserved: the capacity plugin gives a starving gang's running pod up", 0, True, ["g-0"]),
    ("within deserved: it stays", 8, False, []),
]


@pytest.mark.parametrize(("what", "deserved", "admitted", "victims"), STARVING_GANG, ids=[c[0] for c in STARVING_GANG])
def test_reclaim_takes_a_starving_bare_gangs_running_pod(what: str, deserved: int, admitted: bool,
                                                         victims: list[str]) -> None:
    objs = starving_gang(deserved)
    plans = {s: plan_of(objs, s) for s in SOLVERS}
    jp = plans["greedy"].job("default/j")
    assert (jp.admitted, sorted(v.name for v in jp.victims)) == (admitted, victims), jp.reason
    assert not plans["greedy"].job("default/g").admitted
    if victims:
        assert "its running pod default/g-0 was evicted" in plans["greedy"].job("default/g").reason
        assert "its running pod default/g-0 was evicted" in plans["cpsat"].job("default/g").reason
        assert "after reclaiming 1 pods" in plans["cpsat"].job("default/j").reason  # its own plan, not the greedy's
    for solver in ("cpsat", "auto"):
        jp = plans[solver].job("default/j")
        assert (jp.admitted, sorted(v.name for v in jp.victims)) == (admitted, victims), (solver, jp.reason)
        assert not plans[solver].job("default/g").admitted and plans[solver].solver.status == "OPTIMAL"


# The exact model weighs a starving gang's running pod as any victim: ``j`` (queue ``mine``) needs a whole node; one
# runs ``b-0`` (a one-pod gang of ``other``, a month old: dear), the other ``g-0`` (the running pod of ``g``,
# minMember 2, whose ``g-1`` fits nowhere: two hours old, cheaper). ``other`` is above its deserved, so the
# capacity plugin gives up either. The greedy takes the first its reclaim walks to (n0 before n1); the exact model
# the cheaper, ``g-0``, wherever it runs, and ``g`` then waits for good (it could not be ready either way).
def cheaper_exposed(b_node: str, g_node: str) -> list[dict[str, Any]]:
    old = member("b-0", "b", 8, on=b_node)
    old["status"]["startTime"] = "2025-05-01T10:00:00Z"
    return [*nodes(2), queue("mine", deserved={GPU: 8}), queue("other", deserved={GPU: 0}),
            bare("b", 1, queue_name="other"), old, bare("g", 2, queue_name="other"), member("g-0", "g", 8, on=g_node),
            member("g-1", "g", 8), bare("j", 1, queue_name="mine"), member("j-0", "j", 8)]


CHEAPER_EXPOSED = [  # (what, b-0's node, g-0's node, the greedy's victim)
    ("the walk meets the dear pod first", "n0", "n1", "b-0"),
    ("the walk meets the exposed pod first", "n1", "n0", "g-0"),
]


@pytest.mark.parametrize(("what", "b_node", "g_node", "greedy"), CHEAPER_EXPOSED, ids=[c[0] for c in CHEAPER_EXPOSED])
def test_the_exact_model_takes_a_starving_gangs_pod_when_cheaper(what: str, b_node: str, g_node: str,
                                                                 greedy: str) -> None:
    plans = {s: plan_of(cheaper_exposed(b_node, g_node), s) for s in SOLVERS}
    assert [v.name for v in plans["greedy"].job("default/j").victims] == [greedy]
    for solver in ("cpsat", "auto"):
        plan = plans[solver]
        assert [v.name for v in plan.job("default/j").victims] == ["g-0"], solver
        assert plan.job("default/j").admitted and not plan.job("default/g").admitted
        assert "its running pod default/g-0 was evicted" in plan.job("default/g").reason
        assert plan.solver.status == "OPTIMAL"


def test_the_validator_refuses_a_gang_admitted_after_losing_its_pod() -> None:
    snap = load(*starving_gang(0)).snapshot
    jobs = jobs_to_place(snap)
    plan = plan_placement(snap, jobs, "greedy", OPTS, now=NOW)
    broken = plan.model_copy(update={"jobs": tuple(
        jp.model_copy(update={"admitted": True, "bindings": (Binding(task="", index=1, node="n0"),),
                              "after_evictions": True, "step": plan.job("default/j").step})
        if jp.name == "g" else jp for jp in plan.jobs)})
    assert "job default/g is admitted but its running pod default/g-0 is a victim" in placement_violations(
        snap, jobs, broken)


# Preempt hands the plugins every Running pod of another job in the preemptor's queue, a starving gang's too. ``g``
# (low, minMember 3) runs ``g-0`` and ``g-1`` (4 GPUs each) on n0 and waits for ``g-2``; n1 runs ``b-0`` (8 GPUs,
# high). ``j`` (high) preempts: on n0 the priority plugin offers both of ``g``'s pods, the gang plugin nothing
# (ready 2 <= 3), the tier ends, and drf decides: it offers a pod while ``g``'s share with it gone is not below
# ``j``'s with its pod (4 of 16 GPUs each for a 4-GPU ``j``: ``g-0``; for an 8-GPU ``j``, 8 of 16 against 4 left:
# none). On n1 the priority plugin offers nothing (``b`` is not lower), its tier ends, and drf refuses ``b-0``.
STARVING_GANG_PREEMPT = [  # (what, j's GPUs, j admitted, its victims)
    ("drf offers a starving gang's running pod", 4, True, ["g-0"]),
    ("drf refuses when the gang's share would drop below the preemptor's", 8, False, []),
]


@pytest.mark.parametrize(("what", "gpu", "admitted", "victims"), STARVING_GANG_PREEMPT,
                         ids=[c[0] for c in STARVING_GANG_PREEMPT])
def test_preempt_takes_a_starving_bare_gangs_running_pod(what: str, gpu: int, admitted: bool,
                                                         victims: list[str]) -> None:
    objs = [priority_class("high", 1000), priority_class("low", 10), *nodes(2), queue("q"),
            bare("b", 1, queue_name="q", priority_class_name="high"), member("b-0", "b", 8, on="n1"),
            bare("g", 3, queue_name="q", priority_class_name="low"), member("g-0", "g", 4, on="n0"),
            member("g-1", "g", 4, on="n0"), member("g-2", "g", 4),
            bare("j", 1, queue_name="q", priority_class_name="high"), member("j-0", "j", gpu)]
    plans = {s: plan_of(objs, s) for s in SOLVERS}
    jp = plans["greedy"].job("default/j")
    assert (jp.admitted, sorted(v.name for v in jp.victims)) == (admitted, victims), jp.reason
    assert not plans["greedy"].job("default/g").admitted
    assert plans["auto"].job("default/j").admitted == admitted


# A pod its task's minimum needs is one the gang can never be ready without, even with pods to spare: ``g``
# (minMember 2, minTaskMember ps 1 and worker 1) runs ``g-ps`` on n0 and waits for two workers that fit nowhere;
# ``j``'s reclaim takes ``g-ps`` when the capacity plugin offers it (``other`` above its deserved), not within it.
TASK_MINIMUM = [  # (what, other's deserved GPUs, j admitted, its victims)
    ("its task's minimum needs it, above deserved: taken", 0, True, ["g-ps"]),
    ("within deserved: it stays", 8, False, []),
]


@pytest.mark.parametrize(("what", "deserved", "admitted", "victims"), TASK_MINIMUM, ids=[c[0] for c in TASK_MINIMUM])
def test_reclaim_takes_the_pod_a_bare_gangs_task_minimum_needs(what: str, deserved: int, admitted: bool,
                                                               victims: list[str]) -> None:
    objs = [*nodes(2), queue("mine", deserved={GPU: 8}), queue("other", deserved={GPU: deserved}),
            queue("keep", deserved={GPU: 8}), bare("b", 1, queue_name="keep"), member("b-0", "b", 8, on="n1"),
            bare("g", 2, queue_name="other", min_task_member={"ps": 1, "worker": 1}),
            member("g-ps", "g", 8, on="n0", task="ps"), member("g-w0", "g", 8, task="worker"),
            member("g-w1", "g", 8, task="worker"), bare("j", 1, queue_name="mine"), member("j-0", "j", 8)]
    plans = {s: plan_of(objs, s) for s in SOLVERS}
    jp = plans["greedy"].job("default/j")
    assert (jp.admitted, sorted(v.name for v in jp.victims)) == (admitted, victims), jp.reason
    assert not plans["greedy"].job("default/g").admitted
    assert plans["auto"].job("default/j").admitted == admitted


# Reclaim stops trying a job's pods once it is no longer starving, by count (vc-scheduler v1.15.1,
# ``actions/reclaim``: ``if !ssn.JobStarving(job) break``; the gang plugin's ``IsStarving``: pipelined + ready <
# minMember), then commits only a pipelined gang — each task at its minTaskMember too (``CheckTaskPipelined``) —
# else discards. ``g`` (queue ``mine``, minTaskMember ps 1 and worker 1) has two workers and a ps pending (8 GPUs
# each) on three full nodes of queue ``other`` (above its deserved 0). Its pods go in task order: by the index a
# name ends in when all have one, else (same creation) by UID. Workers first and minMember 2: the two workers take
# their victims, the gang stops starving, its ps is never tried, and the statement is discarded. minMember 3: the
# walk goes on to the ps. The ps first (its UID): the ps and one worker make the gang.
STOP_BY_COUNT = [  # (what, minMember, the pods' (name, uid), g admitted, its victims)
    ("workers first by index, minMember 2: no ps, discarded", 2,
     [("g-worker-0", "u1"), ("g-worker-1", "u2"), ("g-ps-2", "u0")], False, 0),
    ("workers first by index, minMember 3: the ps too", 3,
     [("g-worker-0", "u1"), ("g-worker-1", "u2"), ("g-ps-2", "u0")], True, 3),
    ("no index, workers first by UID: discarded", 2, [("g-w0", "u1"), ("g-w1", "u2"), ("g-ps", "u3")], False, 0),
    ("no index, the ps first by UID: ps and a worker", 2, [("g-w0", "u1"), ("g-w1", "u2"), ("g-ps", "u0")], True, 2),
]


@pytest.mark.parametrize(("what", "min_member", "pods", "admitted", "victims"), STOP_BY_COUNT,
                         ids=[c[0] for c in STOP_BY_COUNT])
def test_reclaim_stops_when_the_gang_is_no_longer_starving(what: str, min_member: int, pods: list[tuple[str, str]],
                                                           admitted: bool, victims: int) -> None:
    jp = plan_of(stop_objects(min_member, pods), "greedy").job("default/g")
    assert (jp.admitted, len(jp.victims)) == (admitted, victims), jp.reason


def stop_objects(min_member: int, pods: list[tuple[str, str]]) -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = [*nodes(3), queue("mine", deserved={GPU: 24}), queue("other", deserved={GPU: 0}),
                                  bare("g", min_member, queue_name="mine", min_task_member={"ps": 1, "worker": 1})]
    for name, uid in pods:
        p = member(name, "g", 8, task="ps" if "ps" in name else "worker")
        p["metadata"]["uid"] = uid
        objs.append(p)
    for n in range(3):
        objs += [bare(f"o{n}", 1, queue_name="other"), member(f"o{n}-0", f"o{n}", 8, on=f"n{n}")]
    return objs


def test_the_validator_refuses_a_reclaim_past_the_gangs_minimum() -> None:
    """The plan of minMember 3 (three pods placed by their reclaim, said as of the first scheduling cycle's
    reclaim step) checked against minMember 2: the third pod is one too many."""
    pods = STOP_BY_COUNT[1][2]
    three = load(*stop_objects(3, pods)).snapshot
    plan = plan_placement(three, jobs_to_place(three), "greedy", OPTS, now=NOW)
    plan = plan.model_copy(update={"jobs": tuple(jp.model_copy(update={"step": 2}) for jp in plan.jobs)})
    assert placement_violations(three, jobs_to_place(three), plan) == []
    snap = load(*stop_objects(2, pods)).snapshot
    assert "job default/g: reclaim places 3 pods (0 running): it stops trying a job's pods once it is no longer " \
        "starving (minAvailable 2)" in placement_violations(snap, jobs_to_place(snap), plan)


def random_exposed(seed: int) -> list[dict[str, Any]]:
    """Three 8-GPU nodes; each runs a one-pod gang of ``other`` (old or new, 4 or 8 GPUs) or the running pod of a
    starving bare gang (``s<i>``, minMember 2, its second pod, as large, pending), a 4-GPU one beside maybe; one
    or two jobs of ``mine`` (4 or 8 GPUs) wait. ``other`` above its deserved or not."""
    rng = random.Random(seed)
    objs: list[dict[str, Any]] = [*nodes(3), queue("mine", deserved={GPU: 16}),
                                  queue("other", deserved={GPU: rng.choice((0, 0, 8))})]
    for i in range(3):
        gpu = rng.choice((4, 8))
        if rng.random() < 0.5:
            objs += [bare(f"s{i}", 2, queue_name="other"), member(f"s{i}-0", f"s{i}", gpu, on=f"n{i}"),
                     member(f"s{i}-1", f"s{i}", gpu)]
        else:
            p = member(f"o{i}-0", f"o{i}", gpu, on=f"n{i}")
            p["status"]["startTime"] = rng.choice(("2025-05-01T10:00:00Z", "2025-06-01T11:00:00Z"))
            objs += [bare(f"o{i}", 1, queue_name="other"), p]
        if gpu == 4 and rng.random() < 0.5:
            objs += [bare(f"f{i}", 1, queue_name="other"), member(f"f{i}-0", f"f{i}", 4, on=f"n{i}")]
    for k in range(rng.choice((1, 2))):
        objs += [bare(f"j{k}", 1, queue_name="mine"), member(f"j{k}-0", f"j{k}", rng.choice((4, 8)))]
    return objs


@pytest.mark.parametrize("seed", range(12))
def test_exact_never_admits_less_than_the_greedy_with_exposed_pods(seed: int, caplog: pytest.LogCaptureFixture) -> None:
    """Every plan validated (``plan_of``), the exact model's own plan not refused by the validator, and cpsat and
    auto never below the greedy: no less admission weight, at the same weight no more victim cost."""
    objs = random_exposed(seed)
    plans = {s: plan_of(objs, s) for s in SOLVERS}
    assert "validator refuses" not in caplog.text
    snap = load(*objs).snapshot
    jobs = jobs_to_place(snap)
    ctx = Context.build(snap, jobs, BinpackWeights(), datetime.fromisoformat(NOW))
    greedy = plan_key(ctx, plans["greedy"])
    for solver in ("cpsat", "auto"):
        mine = plan_key(ctx, plans[solver])
        assert (mine.neg_admitted, mine.victim_cost) <= (greedy.neg_admitted, greedy.victim_cost), solver


def test_the_exact_model_proves_a_task_of_unlike_pods() -> None:
    """A bare PodGroup whose pods of one role differ (4, 2 and 6 GPUs) on nodes with 6, 4 and 2 GPUs free: it
    fits (6, 4, 2) but not in Volcano's pod order, so the greedy leaves it waiting. The exact model counts the
    task's pods per shape (``model.Unit``): cpsat and auto admit it with a proof, OPTIMAL (main answered with the
    greedy's plan, FALLBACK, before the units; a brute force over every assignment agrees,
    ``test_unlike_pods.test_the_exact_models_proof_holds_against_a_brute_force``)."""
    snap = load(node("n0", 8), node("n1", 8), node("n2", 4),
                 bare("g", 3), member("g-0", "g", 4), member("g-1", "g", 2), member("g-2", "g", 6),
                 bare("h", 1), member("h-0", "h", 2, on="n0"), bare("k", 1), member("k-0", "k", 4, on="n1"),
                 bare("m", 1), member("m-0", "m", 2, on="n2")).snapshot
    jobs = jobs_to_place(snap)
    for solver in SOLVERS:
        plan = plan_placement(snap, jobs, solver, OPTS, now=NOW)
        assert placement_violations(snap, jobs, plan) == []
        (g,) = [jp for jp in plan.jobs if jp.key == "default/g"]
        assert g.admitted == (solver != "greedy")
        assert plan.solver.status == ("HEURISTIC" if solver == "greedy" else "OPTIMAL")
        if g.admitted:
            assert {b.pod_name("g"): b.node for b in g.bindings} == {"g-0": "n1", "g-1": "n2", "g-2": "n0"}
