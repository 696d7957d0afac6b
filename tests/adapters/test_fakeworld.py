"""The simulated world (tests/fakeworld.py): workload controllers recreate evicted pods as Volcano and
Kthena do, the scheduler binds replacements to their nominated node when it still fits, else to the most
allocated feasible node, else leaves them pending; a disruption controller keeps PDB budgets current."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from optplan import api
from optplan.adapters import kube
from tests.builders import job_task, node, pod, podgroup, repack_run, vcjob
from tests.fakekube import ApiError, FakeKube
from tests.fakeworld import SNAPSHOT_KINDS, World, ready

SERVING_API = "workload.serving.volcano.sh/v1alpha1"


@pytest.fixture
def fake(fake_kube: FakeKube) -> FakeKube:
    return fake_kube


def state(fake: FakeKube) -> dict[str, tuple[str | None, str, str]]:
    """name -> (node, phase, uid) of every pod."""
    return {p["metadata"]["name"]: (p["spec"].get("nodeName"), p["status"].get("phase", ""), p["metadata"]["uid"])
            for p in fake.objects("v1", "Pod")}


def job_cluster(policies: list[dict[str, Any]] | None = None, task_policies: list[dict[str, Any]] | None = None,
                ) -> list[dict[str, Any]]:
    """Nodes n1 (8 GPUs), n2 (8), n3 (4); VCJob "job": worker-0/1 (2 GPUs) on n1, ps-0 (1 GPU) on n2."""
    job = vcjob("job", tasks=[job_task("worker", 2, 2), job_task("ps", 1, 1)])
    if policies is not None:
        job["spec"]["policies"] = policies
    if task_policies is not None:
        job["spec"]["tasks"][0]["policies"] = task_policies
    return [node("n1"), node("n2"), node("n3", 4), podgroup("pg", 1), job,
            pod("job-worker-0", "n1", 2), pod("job-worker-1", "n1", 2), pod("job-ps-0", "n2", 1)]


def nominate(fake: FakeKube, name: str, node_name: str) -> None:
    fake.patch("v1", "Pod", name, {"status": {"nominatedNodeName": node_name}}, subresource="status")


# ---- workload controllers -----------------------------------------------------------------------

def test_an_evicted_job_pod_comes_back_under_its_name_and_binds_where_nominated(fake: FakeKube,
                                                                               tmp_path: Path) -> None:
    fake.add(*job_cluster(), server_fields=True)
    world = World(fake)
    before = state(fake)
    world.step()
    fake.evict("job-worker-0", uid=before["job-worker-0"][2])
    assert world.step() == ["controller: Job default/job recreated default/job-worker-0"]
    node_name, phase, uid = state(fake)["job-worker-0"]
    assert (node_name, phase) == (None, "Pending") and uid != before["job-worker-0"][2]
    with kube.connect(str(fake.write_kubeconfig(tmp_path / "kc"))) as client:  # as the controller nominates
        client.patch_pod_status("default", "job-worker-0", {"nominatedNodeName": "n3"})
    assert world.step() == ["scheduler: default/job-worker-0 bound to n3 (nominated)"]
    after = state(fake)
    assert after["job-worker-0"] == ("n3", "Running", uid)
    assert {k: v for k, v in after.items() if k != "job-worker-0"} == {
        k: v for k, v in before.items() if k != "job-worker-0"}  # nothing else restarted
    assert world.recreated == [("default/job-worker-0", before["job-worker-0"][2], uid)]
    got = fake.get("v1", "Pod", "job-worker-0", "default")
    assert [c["type"] for c in got["status"]["conditions"]] == ["PodScheduled", "Ready"]


@pytest.mark.parametrize(("policies", "task_policies", "restarted"), [
    (None, None, {"job-worker-0"}),
    ([{"event": "PodEvicted", "action": "RestartJob"}], None, {"job-worker-0", "job-worker-1", "job-ps-0"}),
    ([{"events": ["*"], "action": "RestartJob"}], None, {"job-worker-0", "job-worker-1", "job-ps-0"}),
    ([{"event": "PodEvicted", "action": "RestartTask"}], None, {"job-worker-0", "job-worker-1"}),
    ([{"event": "PodEvicted", "action": "RestartJob"}], [{"event": "PodEvicted", "action": "RestartTask"}],
     {"job-worker-0", "job-worker-1"}),  # the task's policy comes first
    ([{"event": "PodFailed", "action": "RestartJob"}], None, {"job-worker-0"}),
])
def test_restart_policies_decide_what_is_recreated(fake: FakeKube, policies: list[dict[str, Any]] | None,
                                                   task_policies: list[dict[str, Any]] | None,
                                                   restarted: set[str]) -> None:
    fake.add(*job_cluster(policies, task_policies), server_fields=True)
    world = World(fake)
    before = state(fake)
    world.step()
    fake.evict("job-worker-0")
    world.run(3)
    after = state(fake)
    assert set(after) == set(before)
    assert {n for n in after if after[n][2] != before[n][2]} == restarted
    assert all(after[n][1] == "Running" for n in after)


def _serving(policy: str | None) -> list[dict[str, Any]]:
    ms: dict[str, Any] = {"apiVersion": SERVING_API, "kind": "ModelServing",
                          "metadata": {"name": "llm", "namespace": "default"}, "spec": {}}
    if policy is not None:
        ms["spec"]["recoveryPolicy"] = policy
    out = [node("n1"), node("n2"), ms, podgroup("llm-0", 2, owner=(SERVING_API, "ModelServing", "llm"))]
    for name, role in (("llm-0-prefill-0", "prefill"), ("llm-0-decode-0", "decode"), ("llm-0-decode-1", "decode")):
        labels = {"modelserving.volcano.sh/name": "llm", "modelserving.volcano.sh/group-name": "llm-0",
                  "modelserving.volcano.sh/role": role, "modelserving.volcano.sh/role-id": "0"}
        out.append(pod(name, "n1", 2, group="llm-0", labels=labels))
    return out


def test_a_serving_group_is_recreated_under_a_new_podgroup(fake: FakeKube) -> None:
    fake.add(*_serving("ServingGroupRecreate"), server_fields=True)
    world = World(fake)
    world.step()
    fake.evict("llm-0-decode-0")
    world.run(3)
    pods = fake.objects("v1", "Pod")
    assert [(p["metadata"]["name"], p["metadata"]["annotations"]["scheduling.k8s.io/group-name"],
             p["metadata"]["labels"]["modelserving.volcano.sh/group-name"], p["status"]["phase"]) for p in pods] == [
        ("llm-1-decode-0", "llm-1", "llm-1", "Running"), ("llm-1-decode-1", "llm-1", "llm-1", "Running"),
        ("llm-1-prefill-0", "llm-1", "llm-1", "Running")]
    groups = fake.objects("scheduling.volcano.sh/v1beta1", "PodGroup")
    assert [(g["metadata"]["name"], g["spec"]["minMember"], g["metadata"]["ownerReferences"][0]["name"])
            for g in groups] == [("llm-1", 2, "llm")]


@pytest.mark.parametrize(("victim", "group", "owner", "replacement", "new_group"), [
    ("job-worker-0", "pg", ("batch.volcano.sh/v1alpha1", "Job", "job"), "job-worker-0", None),
    ("llm-0-decode-0", "llm-0", (SERVING_API, "ModelServing", "llm"), "llm-1-decode-0", "llm-1"),
])
def test_verify_finds_the_replacements_the_world_makes(fake: FakeKube, victim: str, group: str,
                                                       owner: tuple[str, str, str], replacement: str,
                                                       new_group: str | None) -> None:
    """optplan's own replacement matching (execute.py, rules 2 and 3) recognises the world's pods."""
    fake.add(*(job_cluster() if owner[1] == "Job" else _serving("ServingGroupRecreate")), server_fields=True)
    world = World(fake)
    uid = state(fake)[victim][2]
    fake.evict(victim, uid=uid)
    world.run(3)
    run = repack_run("exec-1")
    run["spec"]["mode"] = "Execute"
    run["status"] = {"phase": "Running", "plan": {"freedNodes": ["n1"], "moves": [{
        "namespace": "default", "podGroupName": group, "cards": 2,
        "owner": {"apiVersion": owner[0], "kind": owner[1], "name": owner[2]},
        "pods": [{"name": victim, "fromNode": "n1", "toNode": "n2", "cards": 2}]}]},
        "relocations": [{"namespace": "default", "victimPodName": victim, "victimPodUID": uid,
                         "plannedNodeName": "n2", "eviction": {"phase": "Evicted"}}]}
    objects = [o for api_version, kind in SNAPSHOT_KINDS for o in fake.objects(api_version, kind)]
    got = api.verify(api.snapshot_from_objects(objects), run).relocations[0]
    assert got.placement is not None and got.placement.replacement_pod_name == replacement
    assert got.placement.actual_node_name == state(fake)[replacement][0] is not None
    assert got.replacement_pod_group_name == new_group


@pytest.mark.parametrize(("policy", "restarted"), [
    (None, {"llm-0-decode-0", "llm-0-decode-1"}),  # RoleRecreate, Kthena's default: the role replica
    ("RoleRecreate", {"llm-0-decode-0", "llm-0-decode-1"}),
    ("None", {"llm-0-decode-0"}),
])
def test_other_serving_policies_recreate_in_place(fake: FakeKube, policy: str | None, restarted: set[str]) -> None:
    fake.add(*_serving(policy), server_fields=True)
    world = World(fake)
    before = state(fake)
    world.step()
    fake.evict("llm-0-decode-0")
    world.run(3)
    after = state(fake)
    assert set(after) == set(before) and {n for n in after if after[n][2] != before[n][2]} == restarted


def test_recreate_delay_and_never_recreate(fake: FakeKube) -> None:
    fake.add(*job_cluster(), server_fields=True)
    world = World(fake, recreate_delay=2)
    world.never_recreate("default/job-ps-0")
    world.step()
    fake.evict("job-worker-0")
    fake.evict("job-ps-0")
    assert world.run(2) == []
    assert world.step() == ["controller: Job default/job recreated default/job-worker-0"]
    world.run(5)
    assert "job-ps-0" not in state(fake)


def test_held_deletions_terminate_for_reap_delay_steps(fake: FakeKube) -> None:
    fake.add(*job_cluster(), server_fields=True)
    fake.hold_pod_deletions()
    world = World(fake, reap_delay=2)
    world.step()
    fake.evict("job-worker-0", grace_period_seconds=30)
    assert fake.terminating() == ["default/job-worker-0"]
    assert world.run(2) == []
    assert world.step() == ["kubelet: default/job-worker-0 terminated",
                            "controller: Job default/job recreated default/job-worker-0"]


# ---- scheduler -----------------------------------------------------------------------------------

def pending_cluster(*pending: dict[str, Any]) -> list[dict[str, Any]]:
    """n1 has 2 GPUs free, n2 6, n3 8 (empty), n4 is cordoned; n2 also tainted unless tolerated."""
    return [node("n1"), node("n2"), node("n3"), node("n4", unschedulable=True), podgroup("pg", 1),
            pod("u1", "n1", 6), pod("u2", "n2", 2), *pending]


def test_a_nominated_node_that_no_longer_fits_sends_the_pod_to_the_most_allocated_node(fake: FakeKube) -> None:
    fake.add(*pending_cluster(pod("r", None, 4, phase="Pending")), server_fields=True)
    nominate(fake, "r", "n1")  # 2 GPUs free there: no longer fits
    world = World(fake, schedule_delay=0)
    assert world.step() == ["scheduler: default/r bound to n2 (nominated node does not fit)"]
    fake.add(pod("s", None, 2, phase="Pending"), server_fields=True)
    # n1 and n2 both have 6 of 8 GPUs in use now; n2 more CPU and memory (u2 and r)
    assert world.step() == ["scheduler: default/s bound to n2 (most allocated)"]
    fake.add(pod("t", None, 1, phase="Pending", cpu="50"), server_fields=True)
    assert world.step() == ["scheduler: default/t bound to n1 (most allocated)"]  # the only GPU left


def test_nothing_fits_or_never_schedule_leaves_pods_pending(fake: FakeKube) -> None:
    fake.add(*pending_cluster(pod("big", None, 9, phase="Pending"), pod("stuck", None, 1, phase="Pending")),
             server_fields=True)
    world = World(fake, schedule_delay=0)
    world.never_schedule("default/stuck")
    world.run(3)
    assert state(fake)["big"][:2] == (None, "Pending") and state(fake)["stuck"][:2] == (None, "Pending")
    assert world.bindings == []


def test_bind_instead_and_failed_binds(fake: FakeKube) -> None:
    fake.add(*pending_cluster(pod("r", None, 1, phase="Pending")), server_fields=True)
    nominate(fake, "r", "n3")
    world = World(fake, schedule_delay=0)
    world.bind_instead("default/r", "n2")
    world.fail_next_binds(1)
    assert world.step() == ["scheduler: binding default/r to n2 failed (injected)"]
    assert world.step() == ["scheduler: default/r bound to n2 (forced)"]


def test_schedule_delay_gives_the_controller_time_to_nominate(fake: FakeKube) -> None:
    fake.add(*pending_cluster(), server_fields=True)
    world = World(fake, schedule_delay=2)
    fake.add(pod("r", None, 1, phase="Pending"), server_fields=True)
    world.run(2)
    assert state(fake)["r"][0] is None
    nominate(fake, "r", "n3")
    assert world.step() == ["scheduler: default/r bound to n3 (nominated)"]


def test_a_gang_binds_all_or_nothing(fake: FakeKube) -> None:
    fake.add(node("n1", 4), node("n2", 1), podgroup("gang", 3),
             *[pod(f"g{i}", None, 2, group="gang", phase="Pending") for i in range(3)], server_fields=True)
    world = World(fake, schedule_delay=0)
    assert world.step() == ["scheduler: PodGroup default/gang: 2 of 3 pods fit; none bound"]
    assert world.bindings == []
    fake.add(node("n2", 2))
    world.step()
    assert sorted(node_name for _, node_name in world.bindings) == ["n1", "n1", "n2"]


# ---- disruption controller ----------------------------------------------------------------------

def test_budgets_follow_the_pods(fake: FakeKube) -> None:
    cluster = job_cluster()
    for p in cluster[-3:]:
        p["metadata"]["labels"] = {"app": "job"}
        ready(p)
    budget = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "job", "namespace":
              "default"}, "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "job"}}}}
    fake.add(*cluster, budget, server_fields=True)
    world = World(fake)

    def allowed() -> int:
        return int(fake.get("policy/v1", "PodDisruptionBudget", "job", "default")["status"]["disruptionsAllowed"])

    world.step()
    assert allowed() == 1
    fake.evict("job-worker-0")
    assert allowed() == 0
    with pytest.raises(ApiError, match=r"^429: Cannot evict pod"):
        fake.evict("job-worker-1")
    world.run(5)  # the replacement runs again under the evicted pod's name: still disrupted, for 2 minutes
    assert state(fake)["job-worker-0"][1] == "Running" and allowed() == 0
    fake.clock = lambda: datetime.now(UTC) + timedelta(minutes=3)
    assert world.step() == ["disruption: PDB default/job allows 1 disruption(s)"]
    assert fake.evicted() == ["default/job-worker-0"]


# ---- determinism and the background thread -----------------------------------------------------

def _scenario() -> tuple[list[str], dict[str, tuple[str | None, str, str]]]:
    fake = FakeKube(seed=7)  # never started: the Python-side calls need no HTTP
    try:
        fake.add(*job_cluster([{"event": "PodEvicted", "action": "RestartJob"}]), server_fields=True)
        world = World(fake)
        world.step()
        fake.evict("job-ps-0")
        world.run(4)
        return world.log, state(fake)
    finally:
        fake.stop()


def test_stepped_worlds_are_deterministic() -> None:
    assert _scenario() == _scenario()


def test_the_background_thread_steps_on_its_own(fake: FakeKube) -> None:
    fake.add(*job_cluster(), server_fields=True)
    uid = state(fake)["job-worker-0"][2]
    world = World(fake).start(interval=0.01)
    try:
        fake.evict("job-worker-0")
        deadline = time.monotonic() + 10
        while state(fake).get("job-worker-0", (None, "", uid))[1] != "Running" and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        world.stop()
    got = state(fake)["job-worker-0"]
    assert got[1] == "Running" and got[2] != uid
