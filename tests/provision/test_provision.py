"""Provisioning (``optplan provision``, seed 004 §5.2 and §4.3): the nodes to add so that pending gangs
place under Volcano's rules, table-driven from the rules; every plan passes the validator and costs no more
than the peers'; bad catalogues are one line, exit 2."""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

import pytest
import yaml

from optplan.cli import main
from optplan.models.provision import NodeGroup, ProvisionPlan
from optplan.models.snapshot import Snapshot
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.provision.peers import least_waste, seed_formula
from optplan.solvers.provision.problem import Problem, headroom_jobs
from optplan.solvers.provision.run import plan_provision
from optplan.solvers.provision.validate import provision_violations
from tests.builders import GPU, hypernode, job_task, load, node, pod, podgroup_in, queue, vcjob

ROOT_DIR = Path(__file__).resolve().parents[2]
OPTS = PlanOptions(time_limit=5, workers=1, seed=0)
TAINT = [{"key": GPU, "value": "true", "effect": "NoSchedule"}]
TOLERATE = {"tolerations": [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}]}


def group(name: str, price: str, max_count: int, gpu: int = 8, *, cpu: str = "96", hyper: str | None = None,
          labels: dict[str, str] | None = None, taints: list[dict[str, str]] | None = None) -> NodeGroup:
    alloc: dict[str, Any] = {"cpu": cpu, "memory": "768Gi", "pods": "110"}
    if gpu:
        alloc[GPU] = str(gpu)
    return NodeGroup.model_validate({"name": name, "price": price, "maxCount": max_count, "hyperNode": hyper,
                                     "labels": labels or {}, "taints": taints or [], "allocatable": alloc})


def full(n: str) -> dict[str, Any]:
    return pod(f"busy-{n}", n, 8, group=None)


def plan(objs: list[dict[str, Any]], groups: list[NodeGroup], solver: str = "auto") -> tuple[ProvisionPlan, Snapshot]:
    snap = load(*objs).snapshot
    jobs = sorted(snap.jobs.values(), key=lambda j: j.key)
    p = plan_provision(snap, jobs, groups, solver, OPTS)
    assert provision_violations(snap, jobs, groups, p) == []
    return p, snap


def added(p: ProvisionPlan) -> dict[str, int]:
    return {k: v for k, v in p.counts.items() if v}


SOLVERS = ("greedy", "cpsat", "auto")


# ---- the rules, one case each ------------------------------------------------------------------------

@pytest.mark.parametrize("solver", SOLVERS)
def test_a_gang_that_fits_after_adding_one_8_gpu_node(solver: str) -> None:
    p, _ = plan([node("n0"), full("n0"), vcjob("train", tasks=[job_task("worker", 1, 8)])],
                [group("gpu8", "40", 4)], solver)
    assert added(p) == {"gpu8": 1} and p.served == ("default/train",)
    assert p.placement.job("default/train").bindings[0].node == "gpu8-new-0"


@pytest.mark.parametrize("solver", SOLVERS)
def test_binpack_onto_what_is_there_first(solver: str) -> None:
    p, _ = plan([node("n0"), pod("half", "n0", 4, group=None), vcjob("small", tasks=[job_task("w", 1, 4)])],
                [group("gpu8", "40", 4)], solver)
    assert added(p) == {} and p.cost == 0 and p.served == ("default/small",)


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize(("tasks", "expected"), [
    ([job_task("w", 2, 4)], {"l4": 2}),    # two 4-GPU pods: two 4-GPU nodes (18) beat one a100 (32)
    ([job_task("w", 1, 8)], {"a100": 1}),  # an 8-GPU pod: only the 8-GPU groups, the cheaper one
])
def test_the_cheaper_group_is_chosen(solver: str, tasks: list[dict[str, Any]], expected: dict[str, int]) -> None:
    groups = [group("h100", "98", 4), group("a100", "32", 4), group("l4", "9", 4, gpu=4)]
    p, _ = plan([node("n0"), full("n0"), vcjob("job", tasks=tasks)], groups, solver)
    assert added(p) == expected


@pytest.mark.parametrize("solver", SOLVERS)
def test_max_count_is_respected(solver: str) -> None:
    groups = [group("cheap", "10", 1), group("dear", "50", 4)]
    p, _ = plan([node("n0"), full("n0"), vcjob("big", tasks=[job_task("w", 3, 8)])], groups, solver)
    assert added(p) == {"cheap": 1, "dear": 2} and p.served == ("default/big",)
    # too few nodes in the whole catalogue: reported, nothing bought for it
    p, _ = plan([node("n0"), full("n0"), vcjob("big", tasks=[job_task("w", 6, 8)])], groups, solver)
    assert added(p) == {} and p.served == ()
    assert "not admitted even with every group at maxCount" in p.unserved[0].reason


def _fabric() -> list[dict[str, Any]]:
    return [node("n0"), node("n1"), node("n2"), node("n3"), *(full(n) for n in ("n0", "n1", "n2", "n3")),
            hypernode("s0", 1, ["n0", "n1"]), hypernode("s1", 1, ["n2", "n3"]), hypernode("s2", 2, ["s0", "s1"],
                                                                                        "HyperNode")]


@pytest.mark.parametrize("solver", SOLVERS)
def test_new_nodes_join_the_named_hypernode_and_a_hard_gang_lands_within_one(solver: str) -> None:
    job = vcjob("llm", tasks=[job_task("w", 2, 8)], network_topology={"mode": "hard", "highestTierAllowed": 1})
    # a group that joins no HyperNode cannot serve a hard-topology gang, however cheap
    groups = [group("loose", "5", 4), group("in-s1", "30", 4, hyper="s1")]
    p, _ = plan([*_fabric(), job], groups, solver)
    jp = p.placement.job("default/llm")
    assert added(p) == {"in-s1": 2} and jp.hyper_node == "s1" and jp.tier == 1
    assert {b.node for b in jp.bindings} == {"in-s1-new-0", "in-s1-new-1"}


def test_a_hard_gang_does_not_span_two_hypernodes_of_its_tier() -> None:
    job = vcjob("llm", tasks=[job_task("w", 2, 8)], network_topology={"mode": "hard", "highestTierAllowed": 1})
    groups = [group("in-s0", "30", 1, hyper="s0"), group("in-s1", "30", 1, hyper="s1")]
    p, _ = plan([*_fabric(), job], groups)
    assert p.served == () and added(p) == {}


@pytest.mark.parametrize("solver", SOLVERS)
def test_queue_capability_limits_the_gangs_that_can_be_served(solver: str) -> None:
    objs = [queue("q", capability={GPU: "8"}), node("n0"), full("n0"),
            vcjob("a", "q", [job_task("w", 1, 8)]), vcjob("b", "q", [job_task("w", 1, 8)])]
    p, _ = plan(objs, [group("gpu8", "40", 4)], solver)
    assert added(p) == {"gpu8": 1} and p.served == ("default/a",)
    (u,) = p.unserved
    assert u.job == "default/b" and "realCapability" in u.reason


@pytest.mark.parametrize(("template", "why"), [
    ({"nodeSelector": {"node-type": "npu"}}, "nodeSelector node-type=npu does not match"),
    ({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "node-type", "operator": "In", "values": ["npu"]}]}]}}}},
     "required node affinity does not match"),
    ({}, f"taint {GPU}=true:NoSchedule is not tolerated"),
])
def test_the_autoscaler_deadlock_is_named_before_it_happens(template: dict[str, Any], why: str) -> None:
    job = vcjob("npu", "default", [job_task("w", 1, 8, template_spec=template)])
    groups = [group("gpu8", "40", 4, labels={"node-type": "gpu"}, taints=TAINT)]
    p, _ = plan([node("n0"), full("n0"), job], groups)
    (d,) = p.deadlocks
    assert (d.job, d.task) == ("default/npu", "w") and why in d.reason and "gpu8" in d.reason
    assert added(p) == {} and p.unserved[0].reason == d.reason
    # the peer that knows no Volcano rule buys nodes for it anyway (seed §4.3: "CA adds, Volcano refuses")
    assert any(peer.nodes and not peer.served for peer in p.peers)


def test_a_gang_tolerating_the_taint_is_served_by_the_tainted_group() -> None:
    job = vcjob("gpu", "default", [job_task("w", 1, 8, template_spec=copy.deepcopy(TOLERATE))])
    p, _ = plan([node("n0"), full("n0"), job], [group("gpu8", "40", 4, taints=TAINT)])
    assert added(p) == {"gpu8": 1} and p.deadlocks == ()


def test_the_exact_model_proves_the_cost() -> None:
    p, _ = plan([node("n0"), full("n0"), vcjob("job", tasks=[job_task("w", 3, 4)])],
                [group("a100", "32", 4), group("l4", "9", 4, gpu=4)], "cpsat")
    assert added(p) == {"l4": 3} and p.solver.status == "OPTIMAL" and p.solver.best_bound == p.cost == 27000


# ---- the peers ---------------------------------------------------------------------------------------

def test_seed_formula_is_gap_over_node_capacity() -> None:
    objs = [queue("q", capability={GPU: "64"}), node("n0"), pod("half", "n0", 4, group=None),
            vcjob("a", "q", [job_task("w", 2, 8)]), vcjob("b", "q", [job_task("w", 1, 4)])]
    snap = load(*objs).snapshot
    problem = Problem(snap, sorted(snap.jobs.values(), key=lambda j: j.key), [group("gpu8", "40", 9)])
    # b fits the 4 free GPUs; a's 16 less the 0 left: ⌈16 / 8⌉ = 2
    assert seed_formula(problem, GPU) == {"gpu8": 2}
    # the daily rule: keep 40 free; usable free after b is 0: ⌈40 / 8⌉ = 5
    assert seed_formula(problem, GPU, threshold=40_000) == {"gpu8": 5}


def test_least_waste_picks_the_group_with_least_unused_cpu_and_memory() -> None:
    objs = [node("n0"), full("n0"), vcjob("a", tasks=[job_task("w", 1, 8, cpu="90")])]
    snap = load(*objs).snapshot
    problem = Problem(snap, list(snap.jobs.values()), [group("wide", "30", 4, cpu="192"),
                                                       group("narrow", "40", 4, cpu="96")])
    assert least_waste(problem) == {"narrow": 1}


def test_headroom_gangs_follow_the_daily_rule() -> None:
    objs = [queue("q", capability={GPU: "64"}), queue("full", capability={GPU: "8"}), node("n0"),
            podgroup_in("full", "pg"), pod("busy", "n0", 8, group="pg")]
    snap = load(*objs).snapshot
    jobs = headroom_jobs(snap, GPU, 16_000)
    assert sorted(j.name for j in jobs) == ["headroom-default", "headroom-full", "headroom-q"]
    p = plan_provision(snap, jobs, [group("gpu8", "40", 4)], "auto", OPTS, threshold=16_000)
    # default and q: 16 GPUs each on new nodes; full: its capability (8, used) cannot grow
    assert added(p) == {"gpu8": 4}
    assert p.served == ("optplan-headroom/headroom-default", "optplan-headroom/headroom-q")


# ---- property: valid, and never worse than a peer ----------------------------------------------------

def _random(seed: int) -> tuple[list[dict[str, Any]], list[NodeGroup]]:
    rng = random.Random(seed)
    objs: list[dict[str, Any]] = [hypernode("s0", 1, ["n0", "n1"]), hypernode("s1", 1, ["n2", "n3"])]
    for i in range(4):
        objs.append(node(f"n{i}"))
        used = rng.choice([0, 4, 8])
        if used:
            objs.append(pod(f"busy-{i}", f"n{i}", used, group=None))
    objs.append(queue("q", capability={GPU: str(rng.choice([16, 40, 80]))}))
    for j in range(rng.randint(1, 4)):
        topo = rng.choice([None, {"mode": "hard", "highestTierAllowed": 1}])
        objs.append(vcjob(f"j{j}", rng.choice(["q", "default"]),
                          [job_task("w", rng.randint(1, 3), rng.choice([1, 2, 4, 8]))], network_topology=topo))
    groups = [group("g8", str(rng.randint(20, 40)), rng.randint(0, 4), hyper=rng.choice([None, "s0", "s1"])),
              group("g4", str(rng.randint(5, 25)), rng.randint(0, 6), gpu=4, hyper=rng.choice([None, "s1"]))]
    return objs, groups


@pytest.mark.parametrize("seed", range(12))
def test_every_plan_is_valid_and_never_worse_than_the_peers(seed: int) -> None:
    objs, groups = _random(seed)
    p, _ = plan(objs, groups, "auto")
    for peer in p.peers:
        assert len(p.served) > len(peer.served) or (len(p.served) == len(peer.served) and p.cost <= peer.cost), peer
    if p.solver.best_bound is not None:
        assert p.solver.best_bound <= p.cost


# ---- the command -----------------------------------------------------------------------------------

DEMO = str(ROOT_DIR / "instances" / "provision-demo.yaml")
CATALOGUE = str(ROOT_DIR / "instances" / "provision-catalogue.yaml")


def test_cli_demo_json_and_patch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    patch = tmp_path / "patch.yaml"
    assert main(["provision", DEMO, "--catalogue", CATALOGUE, "-o", "json", "--write", str(patch)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["cost"] == "65.54" and out["served"] == ["default/infer", "default/llm-train"]
    assert [d["job"] for d in out["deadlocks"]] == ["default/npu-train"]
    assert {g["name"]: g["count"] for g in out["groups"]}["a100-s1"] == 2
    items = yaml.safe_load(patch.read_text())["items"]
    assert items == [{"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "a100"},
                      "spec": {"limits": {"cpu": 192, "memory": "2304Gi", GPU: 16}}}]


def _catalogue(tmp_path: Path, spec: dict[str, Any], kind: str = "NodeGroup") -> str:
    obj = {"apiVersion": "provision.volcano.sh/v1alpha1", "kind": kind, "metadata": {"name": "g"}, "spec": spec}
    f = tmp_path / "cat.yaml"
    f.write_text(yaml.safe_dump(obj))
    return str(f)


GOOD = {"price": "1", "maxCount": 2, "allocatable": {"cpu": "8", GPU: "8"}}


@pytest.mark.parametrize(("change", "field"), [
    ({"price": "cheap"}, "spec.price"),
    ({"maxCount": -1}, "spec.maxCount"),
    ({"maxCount": None}, "spec.maxCount"),
    ({"allocatable": {"cpu": "lots"}}, "spec.allocatable"),
    ({"taints": [{"key": "k", "effect": "Sometimes"}]}, "spec.taints[0].effect"),
    ({"hyperNode": "nowhere"}, "spec.hyperNode"),
    ({"target": {"kind": "Deployment", "name": "x"}}, "spec.target.kind"),
])
def test_bad_catalogue_is_one_line_naming_file_object_field(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            change: dict[str, Any], field: str) -> None:
    path = _catalogue(tmp_path, {**GOOD, **change})
    assert main(["provision", DEMO, "--catalogue", path]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and path in err and "NodeGroup/g" in err and field in err, err


def test_a_catalogue_of_another_kind_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["provision", DEMO, "--catalogue", _catalogue(tmp_path, GOOD, kind="Node")]) == 2
    assert "kind" in capsys.readouterr().err


MACHINE_DEPLOYMENT = {
    "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineDeployment",
    "metadata": {"name": "gpu-md", "namespace": "capi", "annotations": {
        "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size": "5",
        "capacity.cluster-autoscaler.kubernetes.io/cpu": "96",
        "capacity.cluster-autoscaler.kubernetes.io/memory": "768Gi",
        "capacity.cluster-autoscaler.kubernetes.io/gpu-count": "8",
        "capacity.cluster-autoscaler.kubernetes.io/labels": "node-type=gpu",
        "capacity.cluster-autoscaler.kubernetes.io/taints": f"{GPU}=true:NoSchedule",
        "provision.volcano.sh/price": "30", "provision.volcano.sh/hyper-node": "s1"}},
    "spec": {"replicas": 1}}


def test_an_autoscaled_machine_deployment_is_a_group(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cat, patch = tmp_path / "md.yaml", tmp_path / "patch.yaml"
    cat.write_text(yaml.safe_dump(MACHINE_DEPLOYMENT))
    assert main(["provision", DEMO, "--catalogue", str(cat), "-o", "json", "--write", str(patch)]) == 0
    out = json.loads(capsys.readouterr().out)
    (g,) = out["groups"]
    assert (g["name"], g["count"], g["hyperNode"]) == ("gpu-md", 2, "s1")
    (item,) = yaml.safe_load(patch.read_text())["items"]
    assert item["kind"] == "MachineDeployment" and item["spec"] == {"replicas": 3}  # 1 running + 2 new


def test_a_machine_deployment_without_a_price_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    md = copy.deepcopy(MACHINE_DEPLOYMENT)
    del md["metadata"]["annotations"]["provision.volcano.sh/price"]
    cat = tmp_path / "md.yaml"
    cat.write_text(yaml.safe_dump(md))
    assert main(["provision", DEMO, "--catalogue", str(cat)]) == 2
    err = capsys.readouterr().err
    assert "MachineDeployment/capi/gpu-md" in err and "provision.volcano.sh/price" in err


def test_a_gang_whose_tasks_need_different_groups_gets_both() -> None:
    cpu_task = job_task("driver", 1, 0, template_spec={"nodeSelector": {"node-type": "cpu"}})
    gpu_task = job_task("worker", 2, 8, template_spec={"nodeSelector": {"node-type": "gpu"}})
    groups = [group("cpu", "2", 4, gpu=0, labels={"node-type": "cpu"}),
              group("gpu8", "40", 4, labels={"node-type": "gpu"})]
    p, _ = plan([node("n0"), full("n0"), vcjob("mixed", tasks=[cpu_task, gpu_task])], groups)
    assert added(p) == {"cpu": 1, "gpu8": 2} and p.served == ("default/mixed",)


def test_cli_threshold_keeps_room_per_queue(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["provision", DEMO, "--catalogue", CATALOGUE, "--threshold", "8", "--solver", "greedy",
                 "-o", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert "optplan-headroom/headroom-team-a" in out["served"]
    assert "optplan-headroom/headroom-team-b" in [u["job"] for u in out["unserved"]]  # its capability is used up
    assert main(["provision", DEMO, "--catalogue", CATALOGUE, "--threshold", "lots"]) == 2
    assert "--threshold" in capsys.readouterr().err
