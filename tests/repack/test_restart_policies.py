"""Restart policies widen what an eviction restarts (seed 000, 工作负载驱逐与重建机制): a VCJob's
PodEvicted → RestartJob / RestartTask policy and a ModelServing's ServingGroupRecreate. The rules
(restart units), the planners' choice, the exact models against the greedy, the parser and the output."""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

import pytest
import yaml

from optplan.adapters.kubefile import load_files
from optplan.adapters.output import repack_run_document
from optplan.errors import InputError
from optplan.models.repack import RepackPlan
from optplan.solvers.binpack.frag import fragmentation
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.repack.base import get_planner
from optplan.solvers.repack.exact.model import build_data, scaled_cost
from optplan.solvers.repack.rules import Gang, RepackProblem, RestartUnit, gang_impact, restart_total
from optplan.solvers.repack.run import plan_repack
from optplan.solvers.repack.validate import plan_violations
from tests.builders import GPU, job_task, load_with_run, node, pod, podgroup, repack_run, vcjob
from tests.controller.test_crd_schema import ROOT_VALIDATOR, assert_valid, errors_of
from tests.repack.test_exact import greedy_cpsat_milp, price_in_exact_model
from tests.repack.test_greedy_reference import reference_greedy

ROOT = Path(__file__).resolve().parents[2]
INSTANCE = ROOT / "instances" / "restart-policies.yaml"
OPTS = PlanOptions(time_limit=20, workers=1, seed=0)
JOB_API = "batch.volcano.sh/v1alpha1"
SERVING_API = "workload.serving.volcano.sh/v1alpha1"
EVICTED_RESTART_JOB = [{"event": "PodEvicted", "action": "RestartJob"}]


def running_job(name: str, tasks: list[dict[str, Any]], policies: list[dict[str, Any]] | None = None,
                task_policies: dict[str, list[dict[str, Any]]] | None = None) -> dict[str, Any]:
    job = vcjob(name, tasks=copy.deepcopy(tasks))
    if policies is not None:
        job["spec"]["policies"] = policies
    for t in job["spec"]["tasks"]:
        if t["name"] in (task_policies or {}):
            t["policies"] = (task_policies or {})[t["name"]]
    job["status"] = {"state": {"phase": "Running"}}
    return job


def model_serving(name: str, policy: str | None, api: str = SERVING_API) -> dict[str, Any]:
    spec: dict[str, Any] = {"replicas": 1}
    if policy is not None:
        spec["recoveryPolicy"] = policy
    return {"apiVersion": api, "kind": "ModelServing", "metadata": {"name": name, "namespace": "default"},
            "spec": spec}


def task_pod(name: str, node_name: str, group: str, *, task: str | None = None, where: str = "annotation",
             labels: dict[str, str] | None = None, phase: str = "Running", gpu: int = 2) -> dict[str, Any]:
    p = pod(name, node_name, gpu, group=group, labels=labels, phase=phase)
    if task is not None:
        meta = p["metadata"]
        (meta["annotations"] if where == "annotation" else meta["labels"])["volcano.sh/task-spec"] = task
    return p


# ---- restart units (rules) ----------------------------------------------------------------------

def _unit_cluster(workload: list[dict[str, Any]], pods: list[dict[str, Any]], min_member: int = 1,
                  owner: tuple[str, str, str] | None = (JOB_API, "Job", "train")) -> RepackProblem:
    """Node a holds the first pod; the others sit on s. One PodGroup ``g``."""
    objs = [node("a", 2), node("s", 16), podgroup("g", min_member, owner=owner), *workload, *pods, repack_run()]
    loaded, run = load_with_run(*objs)
    return RepackProblem(loaded.snapshot, run)


def _train_pods(annotate: bool = True) -> list[dict[str, Any]]:
    """train-worker-0 on a; worker-1, worker-2 and master-0 on s."""
    return [task_pod("train-worker-0", "a", "g", task="worker" if annotate else None),
            task_pod("train-worker-1", "s", "g", task="worker" if annotate else None),
            task_pod("train-worker-2", "s", "g", task="worker" if annotate else None),
            task_pod("train-master-0", "s", "g", task="master" if annotate else None)]


TRAIN_TASKS = [job_task("master", 1, 2), job_task("worker", 3, 2)]
ALL = ["train-master-0", "train-worker-0", "train-worker-1", "train-worker-2"]
WORKERS = ["train-worker-0", "train-worker-1", "train-worker-2"]
ALONE = ["train-worker-0"]

UNIT_CASES: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]], list[str], str | None]] = {
    # name: (workload objects, pods, restarted pods, policy)
    "no policies": ([running_job("train", TRAIN_TASKS)], _train_pods(), ALONE, None),
    "job missing from the snapshot": ([], _train_pods(), ALONE, None),
    "RestartJob": ([running_job("train", TRAIN_TASKS, EVICTED_RESTART_JOB)], _train_pods(), ALL, "RestartJob"),
    "events list": ([running_job("train", TRAIN_TASKS, [{"events": ["PodFailed", "PodEvicted"],
                                                         "action": "RestartJob"}])], _train_pods(), ALL,
                    "RestartJob"),
    "AnyEvent": ([running_job("train", TRAIN_TASKS, [{"event": "*", "action": "RestartJob"}])], _train_pods(), ALL,
                 "RestartJob"),
    "other event": ([running_job("train", TRAIN_TASKS, [{"event": "PodFailed", "action": "RestartJob"}])],
                    _train_pods(), ALONE, None),
    "other action": ([running_job("train", TRAIN_TASKS, [{"event": "PodEvicted", "action": "AbortJob"}])],
                     _train_pods(), ALONE, None),
    "first match wins": ([running_job("train", TRAIN_TASKS, [{"event": "PodEvicted", "action": "RestartTask"},
                                                             {"event": "*", "action": "RestartJob"}])],
                         _train_pods(), WORKERS, "RestartTask"),
    "RestartTask, task from the annotation": (
        [running_job("train", TRAIN_TASKS, [{"event": "PodEvicted", "action": "RestartTask"}])], _train_pods(),
        WORKERS, "RestartTask"),
    "RestartTask, task from the label": (
        [running_job("train", TRAIN_TASKS, [{"event": "PodEvicted", "action": "RestartTask"}])],
        [task_pod(n, nd, "g", task=n.split("-")[1], where="label")
         for n, nd in zip(["train-worker-0", "train-worker-1", "train-worker-2", "train-master-0"],
                          ["a", "s", "s", "s"], strict=True)],
        WORKERS, "RestartTask"),
    "RestartTask, task from the pod name": (
        [running_job("train", TRAIN_TASKS, [{"event": "PodEvicted", "action": "RestartTask"}])],
        _train_pods(annotate=False), WORKERS, "RestartTask"),
    "RestartTask, task unknown: the whole group": (
        [running_job("train", TRAIN_TASKS, [{"event": "PodEvicted", "action": "RestartTask"}])],
        [task_pod("odd-0", "a", "g"), *_train_pods(annotate=False)[1:]],
        ["odd-0", "train-master-0", "train-worker-1", "train-worker-2"], "RestartTask"),
    "task policy overrides the job's": (
        [running_job("train", TRAIN_TASKS, EVICTED_RESTART_JOB,
                     {"worker": [{"event": "PodEvicted", "action": "RestartTask"}]})], _train_pods(), WORKERS,
        "RestartTask"),
    "task policy on another event: the job's applies": (
        [running_job("train", TRAIN_TASKS, EVICTED_RESTART_JOB,
                     {"worker": [{"event": "PodFailed", "action": "RestartTask"}]})], _train_pods(), ALL,
        "RestartJob"),
    "task policy with another action wins": (
        [running_job("train", TRAIN_TASKS, EVICTED_RESTART_JOB,
                     {"worker": [{"event": "PodEvicted", "action": "SyncJob"}]})], _train_pods(), ALONE, None),
    "RestartJob on another task only": (
        [running_job("train", TRAIN_TASKS, None, {"master": EVICTED_RESTART_JOB})], _train_pods(), ALONE, None),
}


@pytest.mark.parametrize("name", list(UNIT_CASES))
def test_vcjob_restart_units(name: str) -> None:
    workload, pods, restarted, policy = UNIT_CASES[name]
    p = _unit_cluster(workload, pods)
    moved = p.snapshot.pods[f"default/{pods[0]['metadata']['name']}"]
    unit = p.restart_unit(moved)
    assert sorted(k.split("/")[1] for k in unit.pods) == restarted
    assert unit.policy == policy
    # g: 4 Running pods, minMember 1, safe 3: breaches only when all four restart.
    d = p.disruption([moved])
    assert (d.affected_pod_groups, d.below_min_available, d.affected_cards, d.moved_cards, d.moved_pods) == (
        1, int(len(restarted) == 4), 8000 if len(restarted) == 4 else 2000 * len(restarted), 2000, 1)


def serving_pods(roles: bool) -> list[dict[str, Any]]:
    """Three pods of ServingGroup g: role replica 0 (entry on a, one worker on s) and replica 1 on s."""
    out = []
    for i, (n, rid) in enumerate([("a", "0"), ("s", "0"), ("s", "1")]):
        labels = {"modelserving.volcano.sh/name": "llm"}
        if roles:
            labels |= {"modelserving.volcano.sh/role": "inference", "modelserving.volcano.sh/role-id": rid}
        out.append(task_pod(f"llm-0-inference-{rid}-{i}", n, "g", labels=labels))
    return out


SERVING_CASES: dict[str, tuple[list[dict[str, Any]], tuple[str, str, str] | None, bool, int, str | None]] = {
    # name: (workload, PodGroup owner, role labels on the pods, pods restarted, policy)
    "ServingGroupRecreate, PodGroup owner": ([model_serving("llm", "ServingGroupRecreate")],
                                             (SERVING_API, "ModelServing", "llm"), True, 3, "ServingGroupRecreate"),
    "ServingGroupRecreate, workload.volcano.sh": ([model_serving("llm", "ServingGroupRecreate",
                                                                 "workload.volcano.sh/v1alpha1")],
                                                  ("workload.volcano.sh/v1alpha1", "ModelServing", "llm"), True, 3,
                                                  "ServingGroupRecreate"),
    "ServingGroupRecreate, pod label only": ([model_serving("llm", "ServingGroupRecreate")], None, True, 3,
                                             "ServingGroupRecreate"),
    "RoleRecreate: the role replica": ([model_serving("llm", "RoleRecreate")], (SERVING_API, "ModelServing", "llm"),
                                       True, 2, "RoleRecreate"),
    "no recoveryPolicy is Kthena's RoleRecreate": ([model_serving("llm", None)],
                                                   (SERVING_API, "ModelServing", "llm"), True, 2, "RoleRecreate"),
    "RoleRecreate without role labels: the whole group": ([model_serving("llm", "RoleRecreate")],
                                                          (SERVING_API, "ModelServing", "llm"), False, 3,
                                                          "RoleRecreate"),
    "None": ([model_serving("llm", "None")], (SERVING_API, "ModelServing", "llm"), True, 1, None),
    "ModelServing missing from the snapshot": ([], (SERVING_API, "ModelServing", "llm"), True, 1, None),
}


@pytest.mark.parametrize("name", list(SERVING_CASES))
def test_model_serving_restart_units(name: str) -> None:
    workload, owner, roles, restarted, policy = SERVING_CASES[name]
    p = _unit_cluster(workload, serving_pods(roles), min_member=1, owner=owner)
    moved = p.snapshot.pods["default/llm-0-inference-0-0"]
    unit = p.restart_unit(moved)
    assert len(unit.pods) == restarted
    assert unit.policy == policy
    d = p.disruption([moved])
    # safe = 3 running - minMember 1 = 2: the whole group (3) breaches, a role replica (2) does not
    assert (d.below_min_available, d.affected_cards) == ((1, 6000) if restarted == 3 else (0, 2000 * restarted))


def test_restarted_counts_running_pods_and_every_card() -> None:
    """A bound Pending pod restarts with its group and its cards count, but it was not running: it does
    not take the group below minAvailable. minMember 0 never breaches, and the footprint still counts."""
    job = running_job("train", TRAIN_TASKS, EVICTED_RESTART_JOB)
    pods = _train_pods()
    pods[3]["status"]["phase"] = "Pending"
    p = _unit_cluster([job], pods, min_member=1)  # 3 Running, safe 2
    moved = [p.snapshot.pods["default/train-worker-0"]]
    r = p.restarted(moved)["default/g"]
    assert (len(r.pods), r.running, r.cards) == (4, 3, 8000)
    assert p.disruption(moved).below_min_available == 1
    p0 = _unit_cluster([job], _train_pods(), min_member=0)
    d = p0.disruption([p0.snapshot.pods["default/train-worker-0"]])
    assert (d.below_min_available, d.affected_cards, d.moved_cards) == (0, 8000, 2000)


# ---- the planners choose differently -------------------------------------------------------------

def _two_candidates(kind: str, min_member: int, with_policy: bool) -> list[dict[str, Any]]:
    """Vacate a or b, never both (r has 2 free cards, s is full; both are out of node scope).

    a holds one 2-card pod of workload W (4 pods, 8 cards; the others on s); b holds one of web
    (3 pods, 6 cards, minMember 3: any move breaches). Without a restart policy a is cheaper; when
    W's policy restarts enough of it to breach, b is."""
    objs = [node("a", 2), node("b", 2), node("r", 8), node("s", 16), podgroup("fill", 1), podgroup("web", 3),
            pod("fill-r", "r", 6, group="fill"), pod("fill-s", "s", 6, group="fill"),
            pod("web-0", "b", 2, group="web"), pod("web-1", "s", 2, group="web"), pod("web-2", "s", 2, group="web"),
            repack_run(scope={"nodes": {"exclude": {"names": ["r", "s"]}}})]
    if kind == "ServingGroupRecreate":
        objs += [model_serving("llm", "ServingGroupRecreate" if with_policy else "None"),
                 podgroup("llm-0", min_member, owner=(SERVING_API, "ModelServing", "llm"))]
        labels = {"modelserving.volcano.sh/name": "llm", "modelserving.volcano.sh/group-name": "llm-0"}
        objs += [task_pod(f"llm-0-inference-0-{i}", n, "llm-0", labels=labels)
                 for i, n in enumerate(["a", "s", "s", "s"])]
        return objs
    policies = [{"event": "PodEvicted", "action": kind}] if with_policy else None
    if kind == "RestartJob":
        objs.append(running_job("train", [job_task("worker", 4, 2)], policies))
        objs += [task_pod(f"train-worker-{i}", n, "train-pg", task="worker" if i % 2 else None)
                 for i, n in enumerate(["a", "s", "s", "s"])]
    else:
        objs.append(running_job("train", TRAIN_TASKS, policies))
        objs += [task_pod("train-worker-0", "a", "train-pg"), task_pod("train-worker-1", "s", "train-pg"),
                 task_pod("train-worker-2", "s", "train-pg", task="worker"),
                 task_pod("train-master-0", "s", "train-pg")]
    objs.append(podgroup("train-pg", min_member, owner=(JOB_API, "Job", "train")))
    return objs


CHOICES = [
    # kind, minMember of W, vacated with the policy (without it: always a)
    ("RestartJob", 1, "b"),  # 4 restart > safe 3
    ("RestartTask", 2, "b"),  # the 3 workers restart > safe 2
    ("RestartTask", 1, "a"),  # the 3 workers restart, safe 3: the task is not the whole job
    ("ServingGroupRecreate", 1, "b"),  # the ServingGroup's 4 pods restart > safe 3
]


@pytest.mark.parametrize(("kind", "min_member", "vacated"), CHOICES)
@pytest.mark.parametrize("with_policy", [True, False], ids=["policy", "no-policy"])
def test_policy_changes_the_vacated_node(kind: str, min_member: int, vacated: str, with_policy: bool) -> None:
    loaded, run = load_with_run(*_two_candidates(kind, min_member, with_policy))
    outcomes = {s: plan_repack(loaded.snapshot, run, solver=s, options=OPTS) for s in ("greedy", "cpsat", "milp")}
    expected = vacated if with_policy else "a"
    problem = RepackProblem(loaded.snapshot, run)
    for solver, out in outcomes.items():
        assert out.status.plan.freed_nodes == (expected,), solver
        assert plan_violations(problem, out.result.plan, claimed=out.result.disruption) == []
        assert out.result.disruption == problem.plan_disruption(out.result.plan)
    assert len({out.result.disruption for out in outcomes.values()}) == 1
    assert outcomes["cpsat"].status.plan.solver.status == outcomes["milp"].status.plan.solver.status == "OPTIMAL"
    footprints = [m.footprint for m in outcomes["greedy"].status.plan.moves if m.footprint is not None]
    if with_policy and expected == "a":  # the task restarts without breaching: listed all the same
        assert [(f.policy, f.pods, f.cards, f.pod_names) for f in footprints] == [
            ("RestartTask", 3, 6, ("train-worker-1", "train-worker-2"))]
    elif expected == "a":
        assert footprints == []


# ---- a random family: greedy against its plain re-evaluation, exact against the greedy -----------

KINDS = ("plain", "RestartJob", "RestartTask", "task-override", "serving-owner", "serving-label", "RoleRecreate")


def restart_cluster(seed: int, n_nodes: int = 12) -> RepackProblem:
    """Random gangs (as tests.repack.test_greedy_reference.random_cluster draws them) under random restart
    policies: VCJobs with RestartJob, RestartTask (two tasks; task from the annotation or the pod name),
    a task-level override, ModelServings found by owner or by label; minMember may be 0."""
    rng = random.Random(1000 + seed)
    objs: list[dict[str, Any]] = []
    sizes = {f"n{i:02d}": rng.choice([4, 8, 8, 16]) for i in range(n_nodes)}
    for name, size in sizes.items():
        objs.append(node(name, size, cpu=str(size * 4)))
    free = dict(sizes)
    gid = 0
    while sum(free.values()) > 0.45 * sum(sizes.values()):
        gid += 1
        kind = rng.choice(KINDS)
        size = rng.choice([1, 2, 3, 4, 5])
        per = rng.choice([1, 1, 2, 4])
        name = f"w{gid:03d}"
        tasks = ["worker"] if kind in ("plain", "RestartJob") else ["ps", "worker"]
        placed: list[dict[str, Any]] = []
        counts = dict.fromkeys(tasks, 0)
        for _ in range(size):
            options = [n for n in sizes if free[n] >= per]
            if not options:
                break
            n = rng.choice(options)
            free[n] -= per
            task = rng.choice(tasks)
            pod_name = f"{name}-{task}-{counts[task]}"
            counts[task] += 1
            labels = {"modelserving.volcano.sh/name": name} if kind == "serving-label" else None
            phase = "Running" if rng.random() > 0.05 else "Pending"
            annotate = rng.random() < 0.5 and kind not in ("serving-owner", "serving-label")
            p = task_pod(pod_name, n, name, gpu=per, labels=labels, phase=phase, task=task if annotate else None)
            placed.append(p)
        if not placed:
            continue
        objs += placed
        owner: tuple[str, str, str] | None = (JOB_API, "Job", name)
        job_tasks = [job_task(t, max(counts[t], 1), per) for t in tasks]
        if kind == "RestartJob":
            objs.append(running_job(name, job_tasks, [{"events": ["PodEvicted"], "action": "RestartJob"}]))
        elif kind == "RestartTask":
            objs.append(running_job(name, job_tasks, [{"event": "*", "action": "RestartTask"}]))
        elif kind == "task-override":
            objs.append(running_job(name, job_tasks, EVICTED_RESTART_JOB,
                                    {"ps": [{"event": "PodEvicted", "action": "RestartTask"}]}))
        elif kind == "plain":
            objs.append(running_job(name, job_tasks))
        else:
            objs.append(model_serving(name, "RoleRecreate" if kind == "RoleRecreate" else "ServingGroupRecreate"))
            owner = None if kind == "serving-label" else (SERVING_API, "ModelServing", name)
        objs.append(podgroup(name, max(0, len(placed) - rng.choice([0, 1, 2, 3])), owner=owner))
    mpr: dict[str, Any] | None = rng.choice([None, None, {"podGroups": 3}, {"resources": {GPU: 6}}])
    objs.append(repack_run(max_per_run=mpr))
    loaded, run = load_with_run(*objs)
    p = RepackProblem(loaded.snapshot, run)
    f = fragmentation(p.snapshot, p.resource)
    p.freed_upper = f.occupied - f.theoretical_min
    return p


def _widened(p: RepackProblem, plan: RepackPlan) -> int:
    moved = [p.snapshot.pods[m.pod] for m in plan.moves]
    keys = {q.key for q in moved}
    return sum(1 for r in p.restarted(moved).values() if r.pods - keys)


@pytest.mark.parametrize("seed", range(30))
def test_greedy_equals_plain_reevaluation_with_restart_policies(seed: int) -> None:
    p = restart_cluster(seed)
    assert p.has_restart_policies
    got = get_planner("greedy").plan(p, PlanOptions())
    assert plan_violations(p, got.plan, claimed=got.disruption) == []
    assert got.plan == reference_greedy(p)


def test_the_family_widens() -> None:
    """Restart policies bite in this family: many greedy plans restart pods they do not move."""
    widened = sum(_widened(p, get_planner("greedy").plan(p, PlanOptions()).plan) > 0
                  for p in (restart_cluster(s) for s in range(30)))
    assert widened >= 10


@pytest.mark.parametrize("seed", range(0, 30, 3))
def test_cpsat_and_milp_agree_and_never_lose_to_greedy(seed: int) -> None:
    p = restart_cluster(seed)
    data = build_data(p)
    g, c, m = greedy_cpsat_milp(p)
    assert len(c.plan.freed_nodes) == len(m.plan.freed_nodes) >= len(g.plan.freed_nodes)
    assert scaled_cost(data, c.plan) == scaled_cost(data, m.plan) == c.record.objective
    if len(c.plan.freed_nodes) == len(g.plan.freed_nodes):
        assert scaled_cost(data, c.plan) <= scaled_cost(data, g.plan)


@pytest.mark.parametrize("seed", range(0, 30, 2))
def test_greedy_plan_is_exact_in_the_exact_model(seed: int) -> None:
    """Every variable fixed to the greedy plan: the model accepts it and prices it as the rules do."""
    p = restart_cluster(seed)
    g = get_planner("greedy").plan(p, OPTS).plan
    assert price_in_exact_model(p, g) == scaled_cost(build_data(p, freed_upper=p.freed_upper), g)


# ---- input ---------------------------------------------------------------------------------------

def _job_doc() -> dict[str, Any]:
    return running_job("train", [job_task("worker", 2)], EVICTED_RESTART_JOB)


def _with(path: str, value: Any, doc: dict[str, Any] | None = None) -> dict[str, Any]:
    doc = copy.deepcopy(doc or _job_doc())
    *parents, last = path.split(".")
    target: Any = doc
    for part in parents:
        target = target[int(part)] if isinstance(target, list) else target[part]
    if isinstance(target, list):
        target[int(last)] = value
    else:
        target[last] = value
    return doc


BAD_INPUT = {
    "policies a string": (_with("spec.policies", "RestartJob"), "Job/default/train", "spec.policies",
                          "expected a list"),
    "policy a string": (_with("spec.policies.0", "PodEvicted"), "Job/default/train", "spec.policies[0]",
                        "expected a mapping"),
    "event a number": (_with("spec.policies.0.event", 3), "Job/default/train", "spec.policies[0].event",
                       "expected a string"),
    "events a string": (_with("spec.policies.0.events", "PodEvicted"), "Job/default/train",
                        "spec.policies[0].events", "expected a list"),
    "an event a number": (_with("spec.policies.0.events", ["PodEvicted", 7]), "Job/default/train",
                          "spec.policies[0].events[1]", "expected a string"),
    "action a list": (_with("spec.policies.0.action", ["RestartJob"]), "Job/default/train",
                      "spec.policies[0].action", "expected a string"),
    "task policy action a number": (_with("spec.tasks.0.policies", [{"event": "PodEvicted", "action": 1}]),
                                    "Job/default/train", "spec.tasks[0].policies[0].action", "expected a string"),
    "recoveryPolicy a number": (_with("spec.recoveryPolicy", 1, model_serving("llm", None)),
                                "ModelServing/default/llm", "spec.recoveryPolicy", "expected a string"),
}


@pytest.mark.parametrize("name", list(BAD_INPUT))
def test_bad_policies_name_file_object_and_field(tmp_path: Path, name: str) -> None:
    doc, obj, field, message = BAD_INPUT[name]
    path = tmp_path / "snap.yaml"
    path.write_text(yaml.safe_dump_all([node("n1"), doc]), encoding="utf-8")
    with pytest.raises(InputError) as err:
        load_files([path])
    assert (err.value.file, err.value.obj, err.value.field) == (str(path), obj, field)
    assert message in err.value.reason


def test_unknown_events_and_actions_are_read_leniently(tmp_path: Path) -> None:
    doc = _with("spec.policies", [{"event": "TaskCompleted", "action": "CompleteJob"}, {"exitCode": 3,
                                                                                       "action": "RestartJob"},
                                  {"events": ["Unknown", "PodEvicted"], "action": "SomethingNew", "timeout": "1m"}])
    path = tmp_path / "snap.yaml"
    path.write_text(yaml.safe_dump_all([node("n1"), doc, model_serving("llm", "Whatever")]), encoding="utf-8")
    snap = load_files([path]).snapshot
    job = snap.jobs["default/train"]
    assert [pol.events for pol in job.policies] == [("TaskCompleted",), (), ("Unknown", "PodEvicted")]
    assert job.action_on("PodEvicted", "worker") == "SomethingNew"
    assert snap.model_servings["default/llm"].recovery_policy == "Whatever"


# ---- output --------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def instance_outcome() -> Any:
    loaded = load_files([INSTANCE])
    run = next(iter(loaded.runs.values()))
    return loaded, run, plan_repack(loaded.snapshot, run, solver="auto", options=OPTS)


def test_instance_lists_each_footprint(instance_outcome: Any) -> None:
    _, run, out = instance_outcome
    assert out.status.plan.freed_nodes == ("n1", "n2")
    doc = json.loads(json.dumps(repack_run_document(run, out.status)))
    assert_valid(doc)
    footprints = {m["podGroupName"]: m.get("footprint") for m in doc["status"]["plan"]["moves"]}
    assert footprints == {
        "pretrain-pg": {"policy": "RestartJob", "pods": 4, "cards": 8,
                        "podNames": ["pretrain-worker-2", "pretrain-worker-3"]},
        "finetune-pg": {"policy": "RestartTask", "pods": 2, "cards": 4, "podNames": ["finetune-worker-1"]},
        "llm-0": {"policy": "ServingGroupRecreate", "pods": 2, "cards": 4, "podNames": ["llm-0-inference-0-0"]},
    }
    d = doc["status"]["plan"]["disruption"]
    assert (d["podGroupsBelowMinAvailable"], d["affectedCards"], d["movedCards"]) == (2, 16, 8)
    bad = copy.deepcopy(doc)
    bad["status"]["plan"]["moves"][0]["footprint"]["policy"] = "RestartPod"
    assert errors_of(ROOT_VALIDATOR, bad) != []


def test_validator_rechecks_the_footprints(instance_outcome: Any) -> None:
    loaded, run, out = instance_outcome
    problem = RepackProblem(loaded.snapshot, run)
    frag = fragmentation(loaded.snapshot, problem.resource)
    plan = out.result.plan
    assert plan_violations(problem, plan, claimed=out.result.disruption, status=out.status, frag=frag) == []
    moves = list(out.status.plan.moves)
    missing = out.status.model_copy(update={"plan": out.status.plan.model_copy(update={
        "moves": (moves[0].model_copy(update={"footprint": None}), *moves[1:])})})
    assert any("footprint is missing" in v for v in plan_violations(problem, plan, status=missing, frag=frag))
    fp = moves[0].footprint
    assert fp is not None
    wrong = out.status.model_copy(update={"plan": out.status.plan.model_copy(update={
        "moves": (moves[0].model_copy(update={"footprint": fp.model_copy(update={"pods": 9})}), *moves[1:])})})
    assert any("footprint disagrees" in v for v in plan_violations(problem, plan, status=wrong, frag=frag))


# ---- the restart accounting, written once (rules.restart_total, rules.gang_impact) -------------------------

def _ru(key: str, running: int, cards: int, whole: bool = False) -> RestartUnit:
    return RestartUnit(key=key, group="default/g", policy="RestartTask", pods=(key,), running=running, cards=cards,
                       whole_group=whole)


@pytest.mark.parametrize(("units", "defaults", "expected"), [
    ([], (0, 0), (0, 0)),
    ([], (2, 3000), (2, 3000)),  # default units only: the greedy's running sums
    ([_ru("t1", 2, 4000), _ru("t2", 1, 2000)], (1, 1000), (4, 7000)),  # tasks are disjoint: they add up
    ([_ru("t1", 2, 4000), _ru("all", 5, 12000, whole=True)], (1, 1000), (5, 12000)),  # the whole group covers all
])
def test_restart_total(units: list[RestartUnit], defaults: tuple[int, int], expected: tuple[int, int]) -> None:
    assert restart_total(units, *defaults) == expected


@pytest.mark.parametrize(("gang", "restarted", "expected"), [
    (Gang("default/g", running=4, min_member=2, footprint=8000), (2, 4000), (False, 4000)),  # safe = 2
    (Gang("default/g", running=4, min_member=2, footprint=8000), (3, 6000), (True, 8000)),  # the whole footprint
    (Gang("default/g", running=4, min_member=0, footprint=8000), (4, 8000), (False, 8000)),
    (None, (1, 1000), (False, 1000)),  # a pod without a PodGroup never breaches
])
def test_gang_impact(gang: Gang | None, restarted: tuple[int, int], expected: tuple[bool, int]) -> None:
    assert gang_impact(gang, *restarted) == expected
