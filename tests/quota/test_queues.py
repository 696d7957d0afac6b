"""Queues: parsing Queue / PriorityClass / VCJob, Volcano's admission rules as holds/broken pairs,
capacity-plugin accounting, seed 002's spot capability formula, and the two CLI commands."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from optplan.cli import main
from optplan.errors import InputError
from optplan.models.queues import DEFAULT, ROOT, QueueTree
from optplan.models.snapshot import Snapshot
from optplan.solvers.quota.queues import (
    UNLIMITED,
    QueueViolation,
    account_queues,
    classify_queues,
    format_amount,
    queue_report,
    spot_capacity,
    validate_queues,
)
from tests.builders import (
    GPU,
    job_task,
    load,
    node,
    pod,
    podgroup,
    podgroup_in,
    priority_class,
    queue,
    vcjob,
)

DEMO = str(Path(__file__).resolve().parents[2] / "instances" / "queues-demo.yaml")
G = 1000  # one GPU (or one cpu) in milli-units


def snap(*objects: dict[str, Any]) -> Snapshot:
    return load(*objects).snapshot


def rules(*objects: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {(v.queue, v.resource, v.rule) for v in validate_queues(snap(*objects))}


def gpu_pod(name: str, node_name: str, gpu: int, group: str, ns: str = "default", **kw: Any) -> dict[str, Any]:
    return pod(name, node_name, gpu, group=group, ns=ns, **kw)


# ---- parsing ---------------------------------------------------------------------------------------

def test_queue_fields_and_defaults() -> None:
    s = snap(queue("a", guarantee={GPU: 2}, deserved={GPU: 4, "cpu": "500m"}, capability={"memory": "1Gi"},
                   reclaimable=False, weight=3, state="Closed", labels={"x": "y"}),
             queue("b", "a", weight=0))
    a, b = s.queues["a"], s.queues["b"]
    assert (a.parent, a.parent_name) == (None, ROOT)
    assert a.guarantee == {GPU: 2 * G} and a.deserved == {GPU: 4 * G, "cpu": 500}
    assert a.capability == {"memory": 2**30 * 1000}
    assert (a.reclaimable, a.weight, a.state, a.labels) == (False, 3, "Closed", {"x": "y"})
    assert (b.parent_name, b.reclaimable, b.weight, b.state) == ("a", True, 1, "Open")  # webhook defaults


def test_root_and_default_always_exist() -> None:
    tree = QueueTree(snap(queue("a")).queues)
    assert tree.preorder() == [ROOT, "a", DEFAULT]
    assert tree.queues[ROOT].implicit and not tree.queues[ROOT].reclaimable
    assert tree.queues[DEFAULT].implicit and tree.queues[DEFAULT].reclaimable
    explicit = QueueTree(snap(queue("root", capability={GPU: 4}), queue("default", deserved={GPU: 1})).queues)
    assert not explicit.queues[ROOT].implicit and explicit.queues[ROOT].capability == {GPU: 4 * G}
    assert not explicit.queues[DEFAULT].implicit


def test_priority_class_fields() -> None:
    s = snap(priority_class("debug-job", 50, "Never"), priority_class("normal-job", 100))
    assert s.priority_classes["debug-job"].preemption_policy == "Never"
    assert s.priority_classes["normal-job"].value == 100
    assert s.priority_classes["normal-job"].preemption_policy == "PreemptLowerPriority"


def test_vcjob_fields_and_pod_templates() -> None:
    init = {"initContainers": [{"name": "fetch", "resources": {"requests": {"cpu": "12"}}}],
            "nodeSelector": {"pool": "a100"}, "priorityClassName": "critical-job",
            "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]}]}}}}
    s = snap(vcjob("train", "team-a", [job_task("ps", 1, 0, cpu="8"), job_task("worker", 2, 4, cpu="16",
                                                                               template_spec=init)],
                   ns="tenant-alpha", priority_class_name="normal-job",
                   network_topology={"mode": "soft"}))
    job = s.jobs["tenant-alpha/train"]
    assert (job.queue, job.min_available, job.priority_class_name, job.replicas) == ("team-a", 3, "normal-job", 3)
    assert job.network_topology is not None and job.network_topology.mode == "soft"
    assert job.network_topology.highest_tier_allowed is None
    ps, worker = job.tasks
    assert ps.template.requests == {"cpu": 8 * G, "memory": 2**30 * 1000}  # a "0" GPU request is dropped
    assert worker.template.requests[GPU] == 4 * G
    assert worker.template.requests["cpu"] == 16 * G  # max(sum of containers 16, init container 12)
    assert worker.template.node_selector == {"pool": "a100"}
    assert worker.template.tolerations[0].key == "gpu"
    assert worker.template.required_node_affinity is not None
    assert job.task_priority_class(ps) == "normal-job"
    assert job.task_priority_class(worker) == "critical-job"
    assert job.total_requests()[GPU] == 8 * G


def test_vcjob_webhook_defaults() -> None:
    task = job_task("", 3, min_available=2)
    s = snap(vcjob("j", None, [task, job_task("b", 1)], network_topology={"highestTierAllowed": 2}))
    job = s.jobs["default/j"]
    assert job.queue == DEFAULT
    assert job.min_available == 3  # Σ task minAvailable, else replicas
    assert [t.name for t in job.tasks] == ["default0", "b"]
    assert job.network_topology is not None
    assert (job.network_topology.mode, job.network_topology.highest_tier_allowed) == ("hard", 2)


def test_running_pods_carry_queue_and_priority() -> None:
    s = snap(node("n1"), queue("team-a"), podgroup_in("team-a", "pg"), gpu_pod("p", "n1", 2, "pg", priority=800))
    p = s.pods["default/p"]
    assert p.priority == 800
    assert p.group_key is not None and s.pod_groups[p.group_key].queue == "team-a"


# ---- validation: one holds/broken pair per admission rule --------------------------------------------

PARENT = queue("p", deserved={GPU: 10}, capability={GPU: 10})

PAIRS: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]], tuple[str, str, str]]] = {
    "guarantee <= deserved": (
        [queue("q", guarantee={GPU: 4}, deserved={GPU: 4})],
        [queue("q", guarantee={GPU: 4}, deserved={GPU: 3})],
        ("q", GPU, "guarantee-over-deserved")),
    "guaranteed resource needs a deserved": (
        [queue("q", guarantee={"cpu": 1}, deserved={"cpu": 1})],
        [queue("q", guarantee={"cpu": 1}, deserved={GPU: 1})],
        ("q", "cpu", "guarantee-over-deserved")),
    "deserved <= capability": (
        [queue("q", deserved={GPU: 8}, capability={GPU: 8}), queue("r", deserved={"cpu": 9}, capability={GPU: 1})],
        [queue("q", deserved={GPU: 9}, capability={GPU: 8})],
        ("q", GPU, "deserved-over-capability")),
    "capability <= parent's": (
        [PARENT, queue("c", "p", capability={GPU: 10})],
        [PARENT, queue("c", "p", capability={GPU: 11})],
        ("c", GPU, "capability-over-ancestor")),
    "capability <= nearest ancestor that sets it": (
        [PARENT, queue("m", "p", capability={"cpu": 4}), queue("c", "m", capability={GPU: 10})],
        [PARENT, queue("m", "p", capability={"cpu": 4}), queue("c", "m", capability={GPU: 12})],
        ("c", GPU, "capability-over-ancestor")),
    "root's capability is not an ancestor's limit": (
        [queue("root", capability={GPU: 4}), queue("c", capability={GPU: 8})],
        [queue("p", capability={GPU: 4}), queue("c", "p", capability={GPU: 8})],
        ("c", GPU, "capability-over-ancestor")),
    "children's guarantee <= parent's": (
        [queue("p", guarantee={GPU: 4}, deserved={GPU: 4}), queue("a", "p", guarantee={GPU: 2}, deserved={GPU: 2}),
         queue("b", "p", guarantee={GPU: 2}, deserved={GPU: 2})],
        [queue("p", guarantee={GPU: 3}, deserved={GPU: 4}), queue("a", "p", guarantee={GPU: 2}, deserved={GPU: 2}),
         queue("b", "p", guarantee={GPU: 2}, deserved={GPU: 2})],
        ("p", GPU, "children-guarantee-over-parent")),
    "children's deserved <= parent's": (
        [PARENT, queue("a", "p", deserved={GPU: 6}), queue("b", "p", deserved={GPU: 4})],
        [PARENT, queue("a", "p", deserved={GPU: 6}), queue("b", "p", deserved={GPU: 5})],
        ("p", GPU, "children-deserved-over-parent")),
    "a resource the parent does not deserve counts as 0": (
        [PARENT, queue("a", "p", deserved={GPU: 6})],
        [PARENT, queue("a", "p", deserved={GPU: 6, "cpu": 1})],
        ("p", "cpu", "children-deserved-over-parent")),
    "sums are not checked under root": (
        [queue("a", guarantee={GPU: 50}, deserved={GPU: 50}), queue("root", guarantee={GPU: 1}, deserved={GPU: 1})],
        [queue("p", guarantee={GPU: 1}, deserved={GPU: 1}), queue("a", "p", guarantee={GPU: 50}, deserved={GPU: 50})],
        ("p", GPU, "children-guarantee-over-parent")),
    "depth <= 5": (
        [queue("l1"), queue("l2", "l1"), queue("l3", "l2"), queue("l4", "l3"), queue("l5", "l4")],
        [queue("l1"), queue("l2", "l1"), queue("l3", "l2"), queue("l4", "l3"), queue("l5", "l4"),
         queue("l6", "l5")],
        ("l6", "", "depth")),
    "PodGroups only in leaf queues": (
        [PARENT, queue("c", "p"), podgroup_in("c", "pg")],
        [PARENT, queue("c", "p"), podgroup_in("p", "pg")],
        ("p", "", "job-in-parent-queue")),
    "VCJobs only in leaf queues": (
        [PARENT, queue("c", "p"), vcjob("j", "c")],
        [PARENT, queue("c", "p"), vcjob("j", "p")],
        ("p", "", "job-in-parent-queue")),
    "root is never a leaf": (
        [vcjob("j", "default")],
        [vcjob("j", "root")],
        ("root", "", "job-in-parent-queue")),
    "the queue must exist": (
        [podgroup_in("default", "pg")],
        [podgroup_in("ghost", "pg")],
        ("ghost", "", "unknown-queue")),
    "the parent must exist": (
        [queue("p"), queue("c", "p")],
        [queue("c", "p")],
        ("c", "", "parent")),
    "a queue is not its own parent": (
        [queue("c", "root")],
        [queue("c", "c")],
        ("c", "", "parent")),
    "no parent cycles": (
        [queue("a"), queue("b", "a")],
        [queue("a", "b"), queue("b", "a")],
        ("a", "", "parent")),
    "pending VCJobs only in Open queues": (
        [queue("q", state="Open"), vcjob("j", "q")],
        [queue("q", state="Closed"), vcjob("j", "q")],
        ("q", "", "job-in-closed-queue")),
    "a closed parent closes its children": (
        [queue("p", state="Open"), queue("q", "p"), vcjob("j", "q")],
        [queue("p", state="Closing"), queue("q", "p"), vcjob("j", "q")],
        ("q", "", "job-in-closed-queue")),
}


@pytest.mark.parametrize("case", list(PAIRS))
def test_admission_rule_holds_and_breaks(case: str) -> None:
    holds, broken, expected = PAIRS[case]
    assert rules(*holds) == set()
    assert expected in rules(*broken)


def test_violations_name_queue_resource_and_amounts_and_are_sorted() -> None:
    vs = validate_queues(snap(queue("z", deserved={"memory": "2Gi"}, capability={"memory": "1Gi"}),
                              queue("a", guarantee={GPU: 3}, deserved={GPU: 2}), podgroup_in("ghost", "pg")))
    assert vs == sorted(vs)
    assert QueueViolation("z", "memory", "deserved-over-capability", "deserved 2Gi > capability 1Gi") in vs
    assert QueueViolation("a", GPU, "guarantee-over-deserved", "guarantee 3 > deserved 2") in vs
    assert [v.queue for v in vs] == ["a", "ghost", "z"]


def test_cycle_queues_are_accounted_under_root() -> None:
    tree = QueueTree(snap(queue("a", "b"), queue("b", "a"), queue("c", "a")).queues)
    assert tree.parent("a") == ROOT and tree.parent("b") == ROOT
    assert tree.parent("c") == "a"  # leads into the cycle without being in it
    assert sorted(tree.broken) == ["a", "b"]


# ---- accounting -----------------------------------------------------------------------------------

def _cluster(gpus: int = 16) -> list[dict[str, Any]]:
    return [node(f"n{i}", 8) for i in range(gpus // 8)]


def test_allocated_sums_up_the_tree() -> None:
    objs = [*_cluster(), queue("p", deserved={GPU: 8}), queue("a", "p", deserved={GPU: 4}),
            queue("b", "p", deserved={GPU: 4}), podgroup_in("a", "ga"), podgroup_in("b", "gb"),
            gpu_pod("pa", "n0", 3, "ga"), gpu_pod("pb", "n1", 2, "gb"),
            gpu_pod("pb2", "n1", 1, "gb", phase="Succeeded")]
    acc = account_queues(snap(*objs))
    assert [acc[q].allocated[GPU] for q in ("a", "b", "p", ROOT, DEFAULT)] == [3 * G, 2 * G, 5 * G, 5 * G, 0]
    flat = account_queues(snap(*objs), hierarchical=False)
    assert [flat[q].allocated[GPU] for q in ("a", "b", "p", ROOT)] == [3 * G, 2 * G, 0, 0]


def test_pods_in_no_queue_are_listed() -> None:
    rep = queue_report(snap(*_cluster(), podgroup("pg"), podgroup_in("ghost", "pg2"),
                            gpu_pod("bare", "n0", 1, None), gpu_pod("lost", "n0", 1, "missing"),
                            gpu_pod("ok", "n0", 1, "pg"), gpu_pod("ghosted", "n1", 1, "pg2")))
    assert rep.unaccounted == (("default/bare", "no PodGroup"), ("default/ghosted", "queue ghost does not exist"),
                               ("default/lost", "PodGroup default/missing is not in the snapshot"))
    assert rep.accounts[DEFAULT].allocated[GPU] == G


# realCapability on 16 GPUs: a (guarantee 4) with a1 (guarantee 2) and a2 (capability 5); b (guarantee 2,
# capability 10); c (nothing). With hierarchy (Volcano v1.15): root names no capability, so root is unlimited
# and so is every queue below it that no capability caps: a, a1, c, default; a2 = 5, b = 10.
# Flat: every guarantee (a 4, a1 2, b 2) comes off the total: a = 16 - 8 + 4 = 12, a1 = 10, a2 = min(8, 5),
# b = min(10, 10), c = 8.
REAL = [queue("a", guarantee={GPU: 4}, deserved={GPU: 4}), queue("a1", "a", guarantee={GPU: 2}, deserved={GPU: 2}),
        queue("a2", "a", capability={GPU: 5}), queue("b", guarantee={GPU: 2}, deserved={GPU: 2}, capability={GPU: 10}),
        queue("c")]
U = UNLIMITED // G


@pytest.mark.parametrize(("hierarchical", "expected"), [
    (True, {ROOT: U, "a": U, "a1": U, "a2": 5, "b": 10, "c": U, DEFAULT: U}),
    (False, {ROOT: 8, "a": 12, "a1": 10, "a2": 5, "b": 10, "c": 8, DEFAULT: 8}),
])
def test_real_capability(hierarchical: bool, expected: dict[str, int]) -> None:
    acc = account_queues(snap(*_cluster(), *REAL), hierarchical=hierarchical)
    assert {q: a.real_capability[GPU] // G for q, a in acc.items()} == expected
    assert list(acc) == [ROOT, "a", "a1", "a2", "b", "c", DEFAULT]  # tree order


# A root capability (GPUs) as written, even above the cluster's 16; below it the guarantees come off:
# children of root: a (guarantee 4), b (guarantee 2) -> a = R - 6 + 4, b = R - 6 + 2; a's children a1
# (guarantee 1), a2 -> a1 = a - 1 + 1 = a, a2 = a - 1. A resource root's capability does not name (cpu)
# keeps the cluster total.
@pytest.mark.parametrize(("root_gpus", "expected"), [
    (6, {ROOT: 6, "a": 4, "a1": 4, "a2": 3, "b": 2}),
    (40, {ROOT: 40, "a": 38, "a1": 38, "a2": 37, "b": 36}),
    (3, {ROOT: 3, "a": 4, "a1": 4, "a2": 3, "b": 2}),  # max(0, 3 - 6) + own guarantee
])
def test_root_capability_is_root_real_capability(root_gpus: int, expected: dict[str, int]) -> None:
    acc = account_queues(snap(*_cluster(), queue("root", capability={GPU: root_gpus}),
                              queue("a", guarantee={GPU: 4}, deserved={GPU: 4}),
                              queue("a1", "a", guarantee={GPU: 1}, deserved={GPU: 1}), queue("a2", "a"),
                              queue("b", guarantee={GPU: 2}, deserved={GPU: 2})))
    assert {q: acc[q].real_capability[GPU] // G for q in expected} == expected
    assert acc["a"].real_capability["cpu"] < UNLIMITED


def test_deserved_is_clamped_into_guarantee_and_real_capability() -> None:
    acc = account_queues(snap(*_cluster(), queue("big", deserved={GPU: 40}),
                              queue("low", guarantee={GPU: 4}, deserved={GPU: 2})))
    assert acc["big"].deserved[GPU] == 40 * G
    assert acc["big"].real_capability[GPU] == UNLIMITED  # root unlimited: nothing clamps it
    assert acc["big"].effective_deserved[GPU] == 40 * G
    assert acc["low"].effective_deserved[GPU] == 4 * G  # raised to the guarantee
    assert acc["low"].effective_deserved["cpu"] == 0  # not deserved: 0


def test_root_guarantee_and_deserved_are_its_childrens_sums() -> None:
    acc = account_queues(snap(*_cluster(), queue("a", guarantee={GPU: 2}, deserved={GPU: 3}),
                              queue("b", guarantee={GPU: 4}, deserved={GPU: 1})))
    assert acc[ROOT].guarantee == {GPU: 6 * G}
    assert acc[ROOT].deserved == {GPU: 7 * G}  # 3 + max(1, 4)


def test_over_deserved_per_resource() -> None:
    objs = [*_cluster(), queue("q", deserved={GPU: 2, "cpu": 100, "memory": "100Gi"}), podgroup_in("q", "pg"),
            gpu_pod("p1", "n0", 2, "pg"), gpu_pod("p2", "n1", 1, "pg")]
    acc = account_queues(snap(*objs))
    assert acc["q"].over_deserved == (GPU,)
    assert acc["q"].headroom(GPU) == UNLIMITED  # root names no capability
    exact = account_queues(snap(*objs[:-1]))
    assert exact["q"].over_deserved == ()  # allocated == deserved is not over


# ---- seed 002 ---------------------------------------------------------------------------------------

def _seed_subscription_tree(parent: str = "tenant-alpha-subscription") -> list[dict[str, Any]]:
    """§4.3: the subscription queue d = c = 40 GPUs with teams a/b/c at d = 20/10/10, c = 40."""
    return [queue(parent, ROOT, deserved={GPU: 40}, capability={GPU: 40}),
            queue("team-a", parent, deserved={GPU: 20}, capability={GPU: 40}),
            queue("team-b", parent, deserved={GPU: 10}, capability={GPU: 40}),
            queue("team-c", parent, deserved={GPU: 10}, capability={GPU: 40})]


SEED_FIXED = yaml.safe_load("""
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata:
  name: tenant-alpha-fixed
spec:
  reclaimable: true
  parent: root
  deserved:
    nvidia.com/gpu: 40
    cpu: "160"
    memory: "640Gi"
  capability:
    nvidia.com/gpu: 160
    cpu: "640"
    memory: "2560Gi"
""")
SEED_SPOT = yaml.safe_load("""
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata:
  name: tenant-alpha-spot
spec:
  reclaimable: true
  parent: root
  deserved:
    nvidia.com/gpu: 0
  capability:
    nvidia.com/gpu: 68
    cpu: "544"
    memory: "2176Gi"
""")


def test_seed_4_3_queue_tree_is_admitted() -> None:
    assert rules(*_seed_subscription_tree()) == set()
    too_much = [*_seed_subscription_tree(), queue("team-d", "tenant-alpha-subscription", deserved={GPU: 1})]
    assert ("tenant-alpha-subscription", GPU, "children-deserved-over-parent") in rules(*too_much)


def test_seed_4_5_queue_yaml_is_admitted() -> None:
    # Seed inconsistency: §4.5 says the subscription queue has d = c = 40, but its YAML sets capability 160
    # GPUs (and 640 cpu, 2560Gi); it also names the queue tenant-alpha-fixed where §4.3 says
    # tenant-alpha-subscription. Both are admissible (d <= c); spot-capacity accepts either name.
    s = snap(SEED_FIXED, SEED_SPOT)
    assert validate_queues(s) == []
    assert s.queues["tenant-alpha-fixed"].capability[GPU] == 160 * G
    assert s.queues["tenant-alpha-spot"].deserved == {GPU: 0}
    billing = classify_queues(QueueTree(s.queues))
    assert (billing["tenant-alpha-fixed"].billing, billing["tenant-alpha-fixed"].tenant) == ("subscription", "alpha")
    assert (billing["tenant-alpha-spot"].billing, billing["tenant-alpha-spot"].source) == ("spot", "name")


def test_seed_9_jobs_in_the_subscription_parent_are_refused() -> None:
    # Seed inconsistency: the §9 VCJobs use queue tenant-alpha-fixed, which §4.3/§4.5 give team child
    # queues; Volcano (and the seed's own §14.2) allows jobs in leaf queues only.
    teams = _seed_subscription_tree("tenant-alpha-fixed")
    job = vcjob("ddp-training", "tenant-alpha-fixed", [job_task("worker", 4, 8, cpu="32", memory="128Gi")],
                ns="tenant-alpha", min_available=4, priority_class_name="normal-job",
                network_topology={"mode": "soft"})
    assert ("tenant-alpha-fixed", "", "job-in-parent-queue") in rules(*teams, job)
    job["spec"]["queue"] = "team-a"
    assert rules(*teams, job) == set()


def _team_usage(team_a_gpus: list[int], team_b_gpus: list[int]) -> dict[str, Any]:
    objs: list[dict[str, Any]] = [*_cluster(64), *_seed_subscription_tree(), podgroup_in("team-a", "ga"),
                                  podgroup_in("team-b", "gb")]
    slots = [f"n{i}" for i in range(8)]
    for i, g in enumerate(team_a_gpus):
        objs.append(gpu_pod(f"a{i}", slots[i], g, "ga", cpu="0", memory="0"))
    for i, g in enumerate(team_b_gpus):
        objs.append(gpu_pod(f"b{i}", slots[len(team_a_gpus) + i], g, "gb", cpu="0", memory="0"))
    return account_queues(snap(*objs))


def test_seed_6_1_borrowing_team_is_over_deserved() -> None:
    # §6.1 scenario 2: team-a (d=20) uses 25 GPUs and is reclaimable; team-b (d=10) uses 5 and may reclaim.
    acc = _team_usage([8, 8, 8, 1], [4, 1])
    assert acc["team-a"].allocated[GPU] == 25 * G and acc["team-a"].over_deserved == (GPU,)
    assert acc["team-b"].allocated[GPU] == 5 * G and acc["team-b"].over_deserved == ()
    assert acc["tenant-alpha-subscription"].allocated[GPU] == 30 * G
    assert acc["tenant-alpha-subscription"].over_deserved == ()


def test_seed_6_2_listed_tasks_use_30_not_25() -> None:
    # Seed inconsistency: §6.2 says team-a "(d=20, 当前用 25)" but lists tasks A-E of 8+8+8+4+2 = 30 GPUs
    # (the same list as §6.1 scenario 1, where it says 30). The accounting counts the tasks: 30, i.e. 10 over
    # deserved, not 5; after killing D and E (6 GPUs) team-a holds 24, still over (the seed says 19).
    acc = _team_usage([8, 8, 8, 4, 2], [])
    assert acc["team-a"].allocated[GPU] == 30 * G
    assert acc["team-a"].allocated[GPU] - acc["team-a"].effective_deserved[GPU] == 10 * G
    after = _team_usage([8, 8, 8], [])
    assert after["team-a"].allocated[GPU] == 24 * G and after["team-a"].over_deserved == (GPU,)


def test_seed_spot_queue_is_always_over_deserved() -> None:
    # §4.1.6 / §4.4: spot deserved = 0, so every GPU it uses is above deserved (reclaimable).
    acc = account_queues(snap(*_cluster(), SEED_SPOT, podgroup_in("tenant-alpha-spot", "s"),
                              gpu_pod("s", "n0", 1, "s")))
    assert acc["tenant-alpha-spot"].effective_deserved[GPU] == 0
    assert GPU in acc["tenant-alpha-spot"].over_deserved


def _seed_cluster() -> list[dict[str, Any]]:
    return [node(f"gpu-node-{i:02d}", 8, cpu="64", memory="256Gi") for i in range(16)]


def test_seed_4_5_spot_capability_68() -> None:
    # §4.5 sets tenant-alpha-spot to 68 GPUs, 544 cpu, 2176Gi without saying on which cluster. The formula
    # gives exactly these on an assumed cluster of 16 nodes x (8 GPUs, 64 cpu, 256Gi) = 128 GPUs, with alpha
    # the only tenant (subscription 40) and 20 GPUs in use in its pay-as-you-go queue (§6.5's payg d=20):
    # idle = 128 - 40 - 20 = 68; cpu 68 x 1024/128 = 544; memory 68 x 4096Gi/128 = 2176Gi.
    payg = queue("tenant-alpha-payg", ROOT, deserved={GPU: 20}, capability={GPU: 20})
    pods = [gpu_pod(f"p{i}", f"gpu-node-{i:02d}", g, "pg", ns="tenant-alpha") for i, g in enumerate([8, 8, 4])]
    s = snap(*_seed_cluster(), SEED_FIXED, SEED_SPOT, payg, podgroup_in("tenant-alpha-payg", "pg", ns="tenant-alpha"),
             *pods)
    rep = spot_capacity(s)
    assert (rep.subscription_total, rep.payg_allocated, rep.idle) == (40 * G, 20 * G, 68 * G)
    (alpha,) = rep.tenants
    assert alpha.spot_queue == "tenant-alpha-spot"
    assert {r: format_amount(r, v) for r, v in alpha.capability.items()} == {GPU: 68, "cpu": 544, "memory": "2176Gi"}
    assert alpha.current == alpha.capability and not alpha.changed


def test_spot_capability_is_shared_by_subscription_and_rounded_down() -> None:
    # idle = 16 - 3 (subscriptions 1 + 2) - 0 = 13; alpha 13 x 1/3 = 4.33 -> 4, beta 13 x 2/3 = 8.67 -> 8;
    # one GPU stays unassigned rather than over-promised.
    objs = [*_cluster(),
            queue("alpha-sub", deserved={GPU: 1}, labels={"platform.io/billing-type": "subscription",
                                                          "platform.io/tenant": "alpha"}),
            queue("alpha-pool", labels={"platform.io/billing-type": "spot", "platform.io/tenant": "alpha"}),
            queue("beta", labels={"platform.io/tenant": "beta"}),
            queue("beta-subscription", "beta", deserved={GPU: 2}), queue("beta-spot", "beta")]
    rep = spot_capacity(snap(*objs))
    caps = {t.tenant: t.capability for t in rep.tenants}
    gib = 2**30 * 1000
    # two nodes of 8 GPUs, 96 cpu, 768Gi: 12 cpu and 96Gi per GPU
    assert caps == {"alpha": {GPU: 4 * G, "cpu": 48 * G, "memory": 384 * gib},
                    "beta": {GPU: 8 * G, "cpu": 96 * G, "memory": 768 * gib}}
    assert sum(c[GPU] for c in caps.values()) <= rep.idle


def test_demo_spot_capacity() -> None:
    from optplan.adapters.kubefile import load_files

    rep = spot_capacity(load_files([DEMO]).snapshot)
    # idle = 128 - (40 + 24) - (20 + 4) = 40: alpha 40 x 40/64 = 25, beta 40 x 24/64 = 15
    assert rep.idle == 40 * G
    assert {t.tenant: t.capability[GPU] // G for t in rep.tenants} == {"alpha": 25, "beta": 15}
    assert all(t.changed for t in rep.tenants)


def test_billing_classification() -> None:
    tree = QueueTree(snap(
        queue("tenant-a", labels={"platform.io/tenant": "a"}),
        queue("a-subscription", "tenant-a", deserved={GPU: 4}), queue("team-spot", "a-subscription"),
        queue("tenant-b-payg"), queue("pool", labels={"platform.io/billing-type": "payg", "platform.io/tenant": "c"}),
        queue("other")).queues)
    got = {q: (b.billing, b.tenant, b.source) for q, b in classify_queues(tree).items()}
    assert got == {"a-subscription": ("subscription", "a", "name"),
                   "team-spot": ("subscription", "a", "parent"),  # the parent's type beats the name
                   "tenant-b-payg": ("payg", "b", "name"),
                   "pool": ("payg", "c", "label")}


@pytest.mark.parametrize(("objs", "needles"), [
    ([queue("q", labels={"platform.io/billing-type": "reserved"})],
     ["Queue/q", "metadata.labels.platform.io/billing-type", "'reserved'"]),
    ([queue("pool", labels={"platform.io/billing-type": "spot"})], ["Queue/pool", "platform.io/tenant"]),
    ([queue("a-spot"), queue("x", labels={"platform.io/billing-type": "spot", "platform.io/tenant": "a"})],
     ["tenant a has 2 spot queues"]),
])
def test_billing_errors(objs: list[dict[str, Any]], needles: list[str]) -> None:
    with pytest.raises(InputError) as e:
        spot_capacity(snap(*objs))
    for n in needles:
        assert n in str(e.value)


# ---- CLI --------------------------------------------------------------------------------------------

def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(list(args))
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def test_cli_queues_table(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run(capsys, "queues", DEMO)
    assert rc == 0 and err == ""
    lines = out.splitlines()
    assert lines[0].startswith("Queues (capacity plugin, hierarchy on); cluster total: cpu 1024, memory 4Ti")
    names = [ln.split()[0] for ln in lines[3:] if ln and not ln.startswith(" " * 30) and ln[0] != "*"]
    assert names[:4] == ["root", "default", "tenant-alpha-payg", "tenant-alpha-spot"]
    team_a = next(i for i, ln in enumerate(lines) if ln.startswith("    team-a "))
    assert lines[team_a].split()[1:] == ["Open", "cpu", "0", "80", "160", "160", "100", "yes"]
    assert lines[team_a + 2].split() == [GPU, "0", "20", "40", "40", "25", "yes"]
    assert "No admission violations." in out


def test_cli_queues_shows_violations(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "q.yaml"
    path.write_text(yaml.safe_dump_all([queue("q", guarantee={GPU: 4}, deserved={GPU: 2}),
                                        podgroup_in("ghost", "pg")]))
    rc, out, _ = run(capsys, "queues", str(path))
    assert rc == 0
    assert "Violations (2):" in out
    assert any(ln.split()[:3] == ["q", GPU, "guarantee-over-deserved"] for ln in out.splitlines())
    rc, out, _ = run(capsys, "queues", str(path), "-o", "json")
    doc = json.loads(out)
    assert [v["rule"] for v in doc["violations"]] == ["unknown-queue", "guarantee-over-deserved"]


@pytest.mark.parametrize("command", ["queues", "spot-capacity"])
@pytest.mark.parametrize("fmt", ["yaml", "json", "table"])
def test_cli_output_is_deterministic(capsys: pytest.CaptureFixture[str], command: str, fmt: str) -> None:
    first = run(capsys, command, DEMO, "-o", fmt)
    second = run(capsys, command, DEMO, "-o", fmt)
    assert first == second and first[0] == 0


def test_cli_queues_structured(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, "queues", DEMO, "-o", "yaml")
    doc = yaml.safe_load(out)
    assert doc["hierarchy"] is True
    assert doc["clusterTotal"] == {"cpu": 1024, "memory": "4Ti", GPU: 128}
    by_name = {q["name"]: q for q in doc["queues"]}
    assert [q["name"] for q in doc["queues"]][:2] == [ROOT, DEFAULT]
    assert by_name["team-a"]["parent"] == "tenant-alpha-subscription" and by_name["team-a"]["depth"] == 2
    assert by_name["team-a"]["allocated"][GPU] == 25 and by_name["team-a"]["overDeserved"] == ["cpu", "memory", GPU]
    assert by_name["tenant-alpha-subscription"]["allocated"][GPU] == 30
    assert by_name[DEFAULT]["implicit"] is True
    assert doc["violations"] == [] and doc["unaccountedPods"] == []
    _, flat, _ = run(capsys, "queues", DEMO, "-o", "json", "--flat")
    flat_doc = json.loads(flat)
    assert flat_doc["hierarchy"] is False
    assert {q["name"]: q for q in flat_doc["queues"]}["tenant-alpha-subscription"]["allocated"][GPU] == 0


def test_cli_spot_capacity(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, "spot-capacity", DEMO)
    assert rc == 0
    assert "idle = cluster 128 - subscription deserved 64 - pay-as-you-go allocated 24 = 40" in out
    alpha = next(ln for ln in out.splitlines() if ln.startswith("alpha "))
    assert alpha.split() == ["alpha", "40", "20", "tenant-alpha-spot", "25", "(now", "68)", "200", "(now", "544)",
                             "800Gi", "(now", "2176Gi)"]
    _, out, _ = run(capsys, "spot-capacity", DEMO, "-o", "json")
    doc = json.loads(out)
    assert doc["idle"] == 40
    assert [(t["tenant"], t["capability"][GPU], t["current"][GPU]) for t in doc["tenants"]] == [
        ("alpha", 25, 68), ("beta", 15, 8)]
    assert {q["queue"]: q["billingType"] for q in doc["queues"]}["team-a"] == "subscription"


def _queue_with(**spec: Any) -> dict[str, Any]:
    q = queue("q")
    q["spec"].update(spec)
    return q


def _job_with(edit: Any) -> dict[str, Any]:
    job = vcjob("j", "default", [job_task("worker", 2)], ns="ns1")
    edit(job)
    return job


def _pc(**fields: Any) -> dict[str, Any]:
    pc = priority_class("pc", 100)
    pc.update(fields)
    return pc


BAD: dict[str, tuple[dict[str, Any], list[str]]] = {
    "negative deserved": (_queue_with(deserved={GPU: -1}), ["Queue/q", f"spec.deserved.{GPU}", "negative"]),
    "unparseable capability": (_queue_with(capability={"cpu": "lots"}), ["Queue/q", "spec.capability.cpu", "'lots'"]),
    "negative guarantee": (_queue_with(guarantee={"resource": {"memory": "-1Gi"}}),
                           ["Queue/q", "spec.guarantee.resource.memory", "negative"]),
    "guarantee not a mapping": (_queue_with(guarantee="all"), ["Queue/q", "spec.guarantee", "mapping"]),
    "weight a string": (_queue_with(weight="heavy"), ["Queue/q", "spec.weight", "integer"]),
    "negative weight": (_queue_with(weight=-1), ["Queue/q", "spec.weight", "negative"]),
    "reclaimable a string": (_queue_with(reclaimable="yes"), ["Queue/q", "spec.reclaimable", "boolean"]),
    "parent a number": (_queue_with(parent=5), ["Queue/q", "spec.parent", "string"]),
    "unknown state": ({**queue("q"), "status": {"state": "Paused"}}, ["Queue/q", "status.state", "'Paused'"]),
    "PriorityClass without value": ({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                     "metadata": {"name": "pc"}}, ["PriorityClass/pc", "value", "missing"]),
    "PriorityClass value a string": (_pc(value="high"), ["PriorityClass/pc", "value", "integer"]),
    "unknown preemptionPolicy": (_pc(preemptionPolicy="Always"), ["PriorityClass/pc", "preemptionPolicy", "Always"]),
    "VCJob without spec": ({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                            "metadata": {"name": "j", "namespace": "ns1"}}, ["Job/ns1/j", "spec", "missing"]),
    "VCJob without tasks": (_job_with(lambda j: j["spec"].__setitem__("tasks", [])), ["Job/ns1/j", "spec.tasks"]),
    "negative replicas": (_job_with(lambda j: j["spec"]["tasks"][0].__setitem__("replicas", -1)),
                          ["Job/ns1/j", "spec.tasks[0].replicas", "negative"]),
    "minAvailable over replicas": (_job_with(lambda j: j["spec"].__setitem__("minAvailable", 3)),
                                   ["Job/ns1/j", "spec.minAvailable", "greater"]),
    "task minAvailable over replicas": (_job_with(lambda j: j["spec"]["tasks"][0].__setitem__("minAvailable", 3)),
                                        ["Job/ns1/j", "spec.tasks[0].minAvailable", "greater"]),
    "duplicate task names": (_job_with(lambda j: j["spec"]["tasks"].append(job_task("worker", 1))),
                             ["Job/ns1/j", "spec.tasks[1].name", "duplicate"]),
    "task not a mapping": (_job_with(lambda j: j["spec"]["tasks"].append("ps")),
                           ["Job/ns1/j", "spec.tasks[1]", "mapping"]),
    "negative template request": (
        _job_with(lambda j: j["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["resources"]["requests"]
                  .__setitem__("cpu", "-2")),
        ["Job/ns1/j", "spec.tasks[0].template.spec.containers[0].resources.requests.cpu", "negative"]),
    "bad toleration operator": (
        _job_with(lambda j: j["spec"]["tasks"][0]["template"]["spec"].__setitem__(
            "tolerations", [{"key": "k", "operator": "Maybe"}])),
        ["Job/ns1/j", "spec.tasks[0].template.spec.tolerations[0].operator"]),
    "nodeSelector a list": (
        _job_with(lambda j: j["spec"]["tasks"][0]["template"]["spec"].__setitem__("nodeSelector", ["a"])),
        ["Job/ns1/j", "spec.tasks[0].template.spec.nodeSelector", "mapping"]),
    "unknown topology mode": (_job_with(lambda j: j["spec"].__setitem__("networkTopology", {"mode": "medium"})),
                              ["Job/ns1/j", "spec.networkTopology.mode"]),
    "highestTierAllowed a string": (
        _job_with(lambda j: j["spec"].__setitem__("networkTopology", {"mode": "hard", "highestTierAllowed": "2"})),
        ["Job/ns1/j", "spec.networkTopology.highestTierAllowed", "integer"]),
    "queue a number": (_job_with(lambda j: j["spec"].__setitem__("queue", 7)), ["Job/ns1/j", "spec.queue", "string"]),
    "duplicate queue": (queue("default"), ["Queue/default", "metadata.name", "duplicate"]),
}


@pytest.mark.parametrize("command", ["queues", "spot-capacity"])
@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_exits_2_naming_file_object_field(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    case: str, command: str) -> None:
    obj, needles = BAD[case]
    objs = [node("n1"), queue("default"), obj] if case == "duplicate queue" else [node("n1"), obj]
    path = tmp_path / "snapshot.yaml"
    path.write_text(yaml.safe_dump_all(objs, sort_keys=False), encoding="utf-8")
    rc, out, err = run(capsys, command, str(path))
    assert rc == 2 and out == "" and "Traceback" not in err
    (line,) = err.splitlines()
    assert line.startswith(f"optplan: error: {path}: ")
    for needle in needles:
        assert needle in line, line


def test_billing_error_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "q.yaml"
    path.write_text(yaml.safe_dump(queue("q", labels={"platform.io/billing-type": "free"})))
    rc, out, err = run(capsys, "spot-capacity", str(path))
    assert rc == 2 and out == ""
    assert err.startswith("optplan: error: Queue/q: metadata.labels.platform.io/billing-type: ")


def test_snapshots_without_queues_are_unchanged() -> None:
    s = snap(node("n1"), podgroup("pg"), pod("p", "n1"))
    assert (s.queues, s.priority_classes, s.jobs) == ({}, {}, {})
    assert validate_queues(s) == []
    assert account_queues(s)[DEFAULT].allocated[GPU] == G


@pytest.mark.parametrize(("resources", "expected"), [
    ({"limits": {"cpu": "2", "memory": "4Gi"}}, {"cpu": 2 * G, "memory": 4 * 2**30 * 1000}),
    ({"requests": {"cpu": "1"}, "limits": {"cpu": "2", "memory": "4Gi"}}, {"cpu": 1 * G, "memory": 4 * 2**30 * 1000}),
    ({"limits": {"nvidia.com/gpu": "2"}}, {GPU: 2 * G}),
    ({"requests": {"cpu": "1"}}, {"cpu": 1 * G}),
])
def test_a_limit_without_a_request_is_the_request_too(resources: dict[str, Any], expected: dict[str, int]) -> None:
    """Kubernetes' defaulting of every pod (``SetDefaults_Pod``): a container's limit for a resource it requests
    nothing of becomes its request; in a pod, an init container, and a VCJob's template (the pods it makes get it
    on creation; Volcano's ``AddPodTemplateRequest`` reads templates so)."""
    container = {"name": "c", "image": "x", "resources": resources}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
           "spec": {"containers": [container]}, "status": {"phase": "Pending"}}
    init = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "i", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "x"}], "initContainers": [container]},
            "status": {"phase": "Pending"}}
    job = vcjob("j", "default", [job_task("w", 1, 0, cpu="0")])
    job["spec"]["tasks"][0]["template"]["spec"]["containers"] = [container]
    s = snap(pod, init, job)
    assert s.pods["default/p"].requests == expected
    assert s.pods["default/i"].requests == expected
    assert s.jobs["default/j"].tasks[0].template.requests == expected
