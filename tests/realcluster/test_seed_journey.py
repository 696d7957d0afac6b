"""Seed 000's journey on the real cluster (issue 25 §3, first part): steps 1, 3 and 4, the DryRuns.

The environment is the seed's: three Ascend nodes (KWOK, 8 ``huawei.com/ascend-1980`` each, labelled
``accelerator-pool=ascend-npu``); the VCJob ``ascend-batch-training`` (2 workers x 1 card) created through
Volcano's job controller, which makes its PodGroup ``ascend-batch-training-<uid>`` owned by the job, and
scheduled by vc-scheduler onto ascend-node-01 (nodes 02 and 03 are cordoned while it is placed, then
uncordoned); the serving pods of a ModelServing: Kthena's controller is not available, so a PodGroup
``online-inference-0`` and its two pods (7 and 6 cards, on nodes 02 and 03, by ``nodeName``) stand in for
what it would create, without an owner (the garbage collector would delete them for a missing one).

The RepackRuns are the seed's own CRs; optplan's controller reconciles them once with its ServiceAccount's
token; each is checked with the seed's ``kubectl get ... -o jsonpath=...`` lines, printed as a person sees them.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.realcluster.cluster import CODE, Cluster, optplan

pytestmark = pytest.mark.realcluster
NS = "repack-demo"
NODES = ("ascend-node-01", "ascend-node-02", "ascend-node-03")
NPU = "huawei.com/ascend-1980"
ELIGIBLE = {"repack.volcano.sh/eligible": "true"}
PROTECTED = {"repack.volcano.sh/protected": "true"}

STEP1: dict[str, Any] = {"apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackRun",
                         "metadata": {"name": "ascend-npu-dryrun"},
                         "spec": {"mode": "DryRun", "goals": [{"resource": NPU}]}}
SCOPE: dict[str, Any] = {"podGroups": {"include": {"selector": {"matchLabels": ELIGIBLE}},
                       "exclude": {"selector": {"matchLabels": PROTECTED}}},
         "nodes": {"include": {"selector": {"matchLabels": {"accelerator-pool": "ascend-npu"}}}}}
STEP3: dict[str, Any] = {"apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackRun",
         "metadata": {"name": "ascend-scoped-dryrun"},
         "spec": {"mode": "DryRun", "goals": [{"resource": NPU}], "scope": SCOPE}}
STEP4: dict[str, Any] = {"apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackRun",
         "metadata": {"name": "ascend-guarded-dryrun"},
         "spec": {"mode": "DryRun", "scope": SCOPE,
                  "goals": [{"resource": NPU, "minFragImprovementPercent": 10}],
                  "maxPerRun": {"podGroups": 1, "resources": {NPU: 4}},
                  "ttlSecondsAfterFinished": 86400}}

# The seed's jsonpath lines (steps 3 and 4), verbatim.
RESOLVED = ('podGroups={.status.plan.summary.resolvedScope.podGroupCount}, '
            'nodes={.status.plan.summary.resolvedScope.nodeCount}{"\\n"}')
MOVES = ('{range .status.plan.moves[*]}{.owner.kind}{"/"}{.owner.name}{"\\t"}{.namespace}{"/"}{.podGroupName}'
         '{"\\t"}{.cards}{" cards\\n"}{range .pods[*]}{"  "}{.name}{": "}{.fromNode}{" -> "}{.toNode}{"\\n"}{end}{end}')
FREED = '{.status.plan.freedNodes}{"\\n"}'
SUMMARY = ('fragmentation={.status.plan.summary.fragBeforePercent}% -> {.status.plan.summary.fragAfterPercent}%, '
           'freedNodes={.status.plan.summary.freedNodeCount}, movedCards={.status.plan.summary.movedCardCount}{"\\n"}')


def pod(name: str, node: str, cards: int, group: str, **labels: str) -> dict[str, Any]:
    res = {"requests": {"cpu": "16", "memory": "128Gi", NPU: str(cards)}, "limits": {NPU: str(cards)}}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "labels": labels,
                         "annotations": {"scheduling.k8s.io/group-name": group}},
            "spec": {"nodeName": node, "schedulerName": "volcano",
                     "containers": [{"name": "server", "image": "inference:1", "resources": res}]}}


@pytest.fixture(scope="module")
def journey(real_cluster: Cluster, sa_kubeconfig: Path) -> Cluster:
    c = real_cluster
    for name in NODES:
        c.add_node(name, cpu="192", memory="1536Gi", labels={"accelerator-pool": "ascend-npu"},
                   extended={NPU: "8"})
    c.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}])
    c.wait_for(f"{NS}'s default ServiceAccount", lambda: c.kubectl(
        "get", "serviceaccount", "default", "-n", NS, check=False).returncode == 0)
    c.kubectl("cordon", NODES[1], NODES[2])
    c.apply([{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
              "metadata": {"name": "ascend-batch-training", "namespace": NS,
                           "labels": {"workload-type": "training", **ELIGIBLE, "repack.volcano.sh/protected": "false"}},
              "spec": {"schedulerName": "volcano", "queue": "default", "minAvailable": 2,
                       "tasks": [{"name": "worker", "replicas": 2, "template": {"spec": {
                           "restartPolicy": "OnFailure", "nodeSelector": {"accelerator-pool": "ascend-npu"},
                           "containers": [{"name": "trainer", "image": "trainer:1", "resources": {
                               "requests": {NPU: "1"}, "limits": {NPU: "1"}}}]}}}]}}])

    def workers() -> list[dict[str, Any]]:
        return list(c.kubectl_json("get", "pods", "-n", NS, "-l", "volcano.sh/job-name=ascend-batch-training")["items"])

    c.wait_for("the training job's workers Running on ascend-node-01", lambda: len(workers()) == 2 and all(
        p["status"].get("phase") == "Running" and p["spec"].get("nodeName") == NODES[0] for p in workers()))
    c.kubectl("uncordon", NODES[1], NODES[2])
    c.apply([
        {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
         "metadata": {"name": "online-inference-0", "namespace": NS,
                      "labels": {"workload-type": "inference", **ELIGIBLE, **PROTECTED}},
         "spec": {"minMember": 2, "queue": "default"}},
        pod("online-inference-0-entry", NODES[1], 7, "online-inference-0"),
        pod("online-inference-0-worker", NODES[2], 6, "online-inference-0"),
    ])
    c.wait_for("the serving pods Running", lambda: all(
        c.kubectl_json("get", "pod", n, "-n", NS)["status"].get("phase") == "Running"
        for n in ("online-inference-0-entry", "online-inference-0-worker")))
    c.apply([STEP1, STEP3, STEP4])
    res = optplan("controller", "--once", "--kubeconfig", str(sa_kubeconfig))
    assert res.returncode == 0, res.stdout + res.stderr
    print(res.stdout)
    return c


def jsonpath(c: Cluster, run: str, template: str) -> str:
    out = c.kubectl("get", "repackrun", run, "-o", f"jsonpath={template}").stdout
    print(f"$ kubectl get repackrun {run} -o jsonpath='{template}'\n{out}")
    return out


def test_the_training_job_is_volcanos_with_its_podgroup(journey: Cluster) -> None:
    job = journey.kubectl_json("get", "jobs.batch.volcano.sh", "ascend-batch-training", "-n", NS)
    [pg] = [g for g in journey.kubectl_json("get", "podgroups", "-n", NS)["items"]
            if g["metadata"]["name"] != "online-inference-0"]
    assert pg["metadata"]["name"] == f"ascend-batch-training-{job['metadata']['uid']}"
    assert pg["metadata"]["ownerReferences"][0]["kind"] == "Job"
    assert pg["metadata"]["labels"]["repack.volcano.sh/eligible"] == "true"  # the job's labels, copied


def test_step1_the_minimal_dryrun_recommends_a_repack(journey: Cluster) -> None:
    run = journey.kubectl_json("get", "repackrun", STEP1["metadata"]["name"])
    assert run["status"]["phase"] == "Succeeded"
    assert run["status"]["conditions"][0]["reason"] == "RepackRecommended", run["status"]["conditions"]


def test_step3_the_scoped_dryrun_resolves_the_seeds_scope(journey: Cluster) -> None:
    name = STEP3["metadata"]["name"]
    assert jsonpath(journey, name, RESOLVED) == "podGroups=1, nodes=3\n"
    [job] = journey.kubectl_json("get", "jobs.batch.volcano.sh", "-n", NS)["items"]
    group = f"ascend-batch-training-{job['metadata']['uid']}"
    assert jsonpath(journey, name, MOVES) == (
        f"Job/ascend-batch-training\t{NS}/{group}\t2 cards\n"
        "  ascend-batch-training-worker-0: ascend-node-01 -> ascend-node-02\n"
        "  ascend-batch-training-worker-1: ascend-node-01 -> ascend-node-03\n")
    assert jsonpath(journey, name, FREED) == '["ascend-node-01"]\n'


def test_step4_the_guarded_dryrun_prints_the_seeds_values(journey: Cluster) -> None:
    name = STEP4["metadata"]["name"]
    assert jsonpath(journey, name, SUMMARY) == "fragmentation=33% -> 0%, freedNodes=1, movedCards=2\n"
    run = journey.kubectl_json("get", "repackrun", name)
    assert run["status"]["phase"] == "Succeeded"
    first = run["status"]["conditions"][0]
    assert (first["type"], first["status"], first["reason"]) == ("Complete", "True", "RepackRecommended")
    # DryRun: nothing was evicted.
    pods = journey.kubectl_json("get", "pods", "-n", NS)["items"]
    assert all(p["status"]["phase"] == "Running" and "deletionTimestamp" not in p["metadata"] for p in pods)



def _plan(out: str) -> dict[str, Any]:
    """The plan of ``optplan repack -o json``'s output, without the solver's timings."""
    plan = dict(json.loads(out)["status"]["plan"])
    plan.pop("solver", None)
    return plan


def _untimed(doc: Any) -> Any:
    """A command's JSON without its wall-clock fields."""
    if isinstance(doc, dict):
        return {k: _untimed(v) for k, v in doc.items() if k != "wallSeconds"}
    if isinstance(doc, list):
        return [_untimed(v) for v in doc]
    return doc


def test_a_snapshot_of_the_real_cluster_plans_as_reading_it_live(journey: Cluster, sa_kubeconfig: Path,
                                                                  tmp_path: Path) -> None:
    """`optplan snapshot` of the live cluster, as the controller's ServiceAccount, and the planning and
    reporting commands without files (reading the live cluster) give the same plans and reports;
    --write-status is accepted."""
    name = STEP4["metadata"]["name"]
    snap = tmp_path / "snap.yaml"
    kube = ("--kubeconfig", str(sa_kubeconfig))
    res = optplan("snapshot", *kube, "-o", str(snap))
    assert res.returncode == 0, res.stderr
    dumped = optplan("repack", str(snap), "--run", name, "-o", "json", "--deterministic")
    live = optplan("repack", *kube, "--run", name, "-o", "json", "--deterministic")
    assert dumped.returncode == 0 and live.returncode == 0, dumped.stderr + live.stderr
    assert _plan(dumped.stdout) == _plan(live.stdout)
    assert _plan(live.stdout)["freedNodes"] == ["ascend-node-01"]
    # the reporting commands too: the same answer from the dump and from the live cluster
    for argv in (("frag", "--resource", NPU), ("queues",),
                 ("compare", "--run", name, "--solvers", "greedy,cpsat", "--deterministic")):
        from_file = optplan(*argv, str(snap), "-o", "json")
        from_cluster = optplan(*argv, *kube, "-o", "json")
        assert from_file.returncode == 0 and from_cluster.returncode == 0, from_file.stderr + from_cluster.stderr
        assert _untimed(json.loads(from_file.stdout)) == _untimed(json.loads(from_cluster.stdout)), argv
    written = optplan("repack", *kube, "--run", name, "--write-status", "-o", "json", "--deterministic")
    assert written.returncode == 0, written.stderr
    stored = journey.kubectl_json("get", "repackrun", name)["status"]
    assert {k: v for k, v in stored["plan"].items() if k != "solver"} == _plan(live.stdout)

# Step 5: the production DryRun's scope, goals and budget, as an Execute run.
STEP5: dict[str, Any] = {
    "apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackRun",
    "metadata": {"name": "ascend-execute-001", "labels": {"change-ticket": "change-20260730"}},
    "spec": {**STEP4["spec"], "mode": "Execute", "eviction": {"gracePeriodSeconds": 30},
             "ttlSecondsAfterFinished": 604800}}
# The seed's step 6 jsonpath lines, verbatim.
CONDITIONS = '{range .status.conditions[*]}{.type}{"\\t"}{.status}{"\\t"}{.reason}{"\\t"}{.message}{"\\n"}{end}'
PLAN_RESULT = ('plan: frag {.status.plan.summary.fragBeforePercent}% -> {.status.plan.summary.fragAfterPercent}%, '
               'freed {.status.plan.summary.freedNodeCount}, moved {.status.plan.summary.movedCardCount}{"\\n"}'
               'result: frag {.status.result.fragAfterPercent}%, freed {.status.result.freedNodeCount}, '
               'moved {.status.result.movedCardCount}, verified {.status.result.metricsVerified}{"\\n"}')
RELOCATIONS = ('{range .status.relocations[*]}{.namespace}{"/"}{.victimPodName}{"\\teviction="}{.eviction.phase}'
               '{"\\tplacement="}{.placement.phase}{"\\tplanned="}{.plannedNodeName}'
               '{"\\tselected="}{.placement.selectedNodeName}{"\\tactual="}{.placement.actualNodeName}'
               '{"\\treplacement="}{.placement.replacementPodName}{"\\n"}{end}')
DONE = ("ExecutionCompleted", "ExecutionCompletedWithAlternativePlacement")


@pytest.fixture(scope="module")
def executed(journey: Cluster, sa_kubeconfig: Path) -> dict[str, Any]:
    """Step 5: the Execute run, carried out by a running optplan controller (stopped by its PID after)."""
    c = journey
    controller = c.spawn("optplan-controller", [
        sys.executable, "-c", CODE, "controller", "--kubeconfig", str(sa_kubeconfig), "-v",
        "--metrics-address", "127.0.0.1:0", "--cooldown", "0",
        "--eviction-deadline", "60", "--replacement-deadline", "120"])
    name = STEP5["metadata"]["name"]
    started = time.monotonic()
    try:
        c.apply([STEP5])

        def finished() -> bool:
            status = c.kubectl_json("get", "repackrun", name).get("status", {})
            return status.get("phase") in ("Succeeded", "Failed")

        c.wait_for(f"RepackRun {name} finished", finished)
    finally:
        c.end(controller)
    run: dict[str, Any] = c.kubectl_json("get", "repackrun", name)
    print(f"{name}: {run['status']['phase']} after {time.monotonic() - started:.1f} s")
    return run


def _holding(c: Cluster, node: str) -> list[str]:
    """The pods on ``node`` that request the target resource (what keeps it from being freed)."""
    pods = c.kubectl_json("get", "pods", "-A", "--field-selector", f"spec.nodeName={node}")["items"]
    return [f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in pods
            if any(NPU in k.get("resources", {}).get("requests", {}) for k in p["spec"]["containers"])]


def test_step5_6_the_execute_run_ends_truthfully(journey: Cluster, executed: dict[str, Any]) -> None:
    """The run's verdict is what the cluster shows, whichever way Volcano placed the replacements.

    Volcano v1.15's allocate action tries a pending pod's status.nominatedNodeName first when it fits;
    but the job controller recreates both evicted workers at once and vc-scheduler binds them on its next
    cycle (1 s here), so a replacement that optplan has not nominated yet is placed by Volcano's own scores.
    """
    name = STEP5["metadata"]["name"]
    print(journey.kubectl("get", "repackrun", name, "-o", "wide").stdout)
    conditions = jsonpath(journey, name, CONDITIONS)
    jsonpath(journey, name, PLAN_RESULT)
    relocations = jsonpath(journey, name, RELOCATIONS)
    print(journey.kubectl("get", "pod", "-n", NS, "-o", "wide").stdout)
    status = executed["status"]
    reasons = {c["reason"] for c in status["conditions"]}
    assert status["result"]["metricsVerified"] is True
    assert len(status["relocations"]) == 2, relocations
    for r in status["relocations"]:
        assert r["eviction"]["phase"] == "Evicted", r
        replacement = journey.kubectl_json("get", "pod", r["placement"]["replacementPodName"], "-n", NS)
        assert r["placement"]["actualNodeName"] == replacement["spec"]["nodeName"], r  # what the cluster holds
    nominated = [r for r in status["relocations"] if r["placement"].get("selectedNodeName")]
    honoured = [r for r in nominated if r["placement"]["actualNodeName"] == r["placement"]["selectedNodeName"]]
    print(f"nominatedNodeName: {len(nominated)} of 2 replacements nominated before they were bound, "
          f"{len(honoured)} bound on the nominated node")
    holding = _holding(journey, NODES[0])
    if holding:
        assert status["phase"] == "Failed" and "ExecutionGoalNotReached" in reasons, conditions
        assert all(h.split("/")[1] in conditions for h in holding), conditions
        assert status["result"]["freedNodeCount"] == 0
    else:
        assert status["phase"] == "Succeeded", conditions
        on_plan = all(r["placement"]["actualNodeName"] == r["plannedNodeName"] for r in status["relocations"])
        assert ("ExecutionCompleted" if on_plan else "ExecutionCompletedWithAlternativePlacement") in reasons
        assert status["result"]["freedNodeCount"] == 1 and status["result"]["fragAfterPercent"] == 0


def test_verify_of_the_executed_run_writes_its_status_on_the_real_server(journey: Cluster, executed: dict[str, Any],
                                                                         sa_kubeconfig: Path) -> None:
    """`optplan verify --write-status` on the live cluster, as the controller's ServiceAccount: the real API
    server accepts the Execute fields it writes (the status subresource, the CRD schema), and what it
    stores is the verdict the command prints, the same as the controller's (the cluster has not changed
    since the run finished)."""
    name = STEP5["metadata"]["name"]
    kube = ("--kubeconfig", str(sa_kubeconfig))
    res = optplan("verify", *kube, "--run", name, "--write-status", "-o", "json")
    assert res.returncode == 0, res.stderr
    assert f"wrote status of RepackRun {name}" in res.stderr
    printed = json.loads(res.stdout)
    stored = journey.kubectl_json("get", "repackrun", name)["status"]
    assert stored["result"] == printed["result"] == executed["status"]["result"]
    assert stored["phase"] == printed["phase"] == executed["status"]["phase"]
    verdict = {c["type"]: c["reason"] for c in printed["conditions"]}
    assert {c["type"]: c["reason"] for c in stored["conditions"] if c["type"] in verdict} == verdict
    assert stored["plan"] == executed["status"]["plan"]  # the merge patch keeps what the controller wrote
    for r in stored["relocations"]:
        before = next(x for x in executed["status"]["relocations"] if x["victimPodName"] == r["victimPodName"])
        assert r["placement"]["actualNodeName"] == before["placement"]["actualNodeName"], (r, before)


def test_step7_the_large_job_needs_the_freed_node(journey: Cluster, executed: dict[str, Any]) -> None:
    """Step 7: 2 workers x 4 cards fit only on a whole free node: they run on ascend-node-01 when the
    Execute run freed it, and the gang stays pending when it did not."""
    freed = not _holding(journey, NODES[0])
    journey.apply([{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                    "metadata": {"name": "ascend-large-training", "namespace": NS,
                                 "labels": {"workload-type": "training"}},
                    "spec": {"schedulerName": "volcano", "queue": "default", "minAvailable": 2,
                             "tasks": [{"name": "worker", "replicas": 2, "template": {"spec": {
                                 "nodeSelector": {"accelerator-pool": "ascend-npu"}, "restartPolicy": "Never",
                                 "containers": [{"name": "trainer", "image": "alpine:3.20",
                                                 "command": ["sh", "-c", "tail -f /dev/null"],
                                                 "resources": {"requests": {NPU: "4"}, "limits": {NPU: "4"}}}]}}}]}}])

    def workers() -> list[dict[str, Any]]:
        return list(journey.kubectl_json("get", "pod", "-n", NS, "-l",
                                         "volcano.sh/job-name=ascend-large-training")["items"])

    journey.wait_for("the large job's two pods", lambda: len(workers()) == 2)
    if freed:
        journey.wait_for("the large job Running", lambda: all(
            p["status"].get("phase") == "Running" for p in workers()))
        assert {p["spec"]["nodeName"] for p in workers()} == {NODES[0]}
    else:
        journey.wait_sessions(5)  # five scheduling sessions: vc-scheduler has had its chances
        assert not [p for p in workers() if p["spec"].get("nodeName")]
    print(journey.kubectl("get", "pod", "-n", NS, "-l", "volcano.sh/job-name=ascend-large-training",
                          "-o", "wide").stdout)


def _events(c: Cluster, namespace: str, kind: str, name: str, uid: str | None = None) -> list[dict[str, Any]]:
    """events.k8s.io/v1 Events about one object (of this ``uid`` when given: test_controller.py plans a
    RepackRun of the same name earlier in the session, whose Events stay), oldest first."""
    items = c.kubectl_json("get", "events.events.k8s.io", "-n", namespace)["items"]
    return sorted((e for e in items if e.get("regarding", {}).get("kind") == kind
                   and e["regarding"].get("name") == name and uid in (None, e["regarding"].get("uid"))),
                  key=lambda e: e["metadata"]["creationTimestamp"])


def test_the_dryruns_tell_their_story_in_events(journey: Cluster) -> None:
    """`kubectl events --for repackrun/NAME` shows optplan's decision, written by the controller's own
    ServiceAccount (RBAC: create/patch on events.k8s.io events) and accepted by the real API server's
    validation; a RepackRun is cluster-scoped, so its Events live in `default`."""
    for run in (STEP1, STEP3, STEP4):
        name = run["metadata"]["name"]
        uid = journey.kubectl_json("get", "repackrun", name)["metadata"]["uid"]
        events = _events(journey, "default", "RepackRun", name, uid)
        print(journey.kubectl("events", "-n", "default", "--for", f"repackrun/{name}", check=False).stdout)
        assert [e["reason"] for e in events] == ["Planned"], events
        e = events[0]
        assert e["reportingController"] == "optplan.io/repack-controller" and e["type"] == "Normal"
        assert "ascend-node-01" in e["note"], e["note"]


def test_the_execute_run_and_each_evicted_pod_have_events(journey: Cluster, executed: dict[str, Any]) -> None:
    """The Execute run's story (planned, evicted, then its verdict) and a `Repacked` Event on each evicted
    pod naming the run, all on the real API server."""
    name = STEP5["metadata"]["name"]
    reasons = [e["reason"] for e in _events(journey, "default", "RepackRun", name)]
    print(journey.kubectl("events", "-n", "default", "--for", f"repackrun/{name}", check=False).stdout)
    assert reasons[0] == "Planned" and "Evicted" in reasons, reasons
    verdict = {r["reason"] for r in executed["status"]["conditions"]} & {*DONE, "ExecutionGoalNotReached"}
    assert reasons[-1] in ("Completed", "CompletedWithAlternativePlacement", "Failed"), (reasons, verdict)
    for r in executed["status"]["relocations"]:
        pod_events = _events(journey, NS, "Pod", r["victimPodName"])
        assert any(e["reason"] == "Repacked" and name in e["note"] for e in pod_events), pod_events

