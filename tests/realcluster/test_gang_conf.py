"""gangpreempt on the real vc-scheduler (v1.15.1) against ``optplan place`` under the same configuration, read
from the cluster: vc-scheduler runs with actions ``enqueue, allocate, gangpreempt, gangreclaim, backfill``, the
same text is the cluster's volcano-scheduler ConfigMap, ``optplan snapshot`` takes it into the file and
``optplan place`` on the file decides under it (tests/realcluster/vcdiff.py's ``run_case``). A running gang
of three 8-GPU pods (minMember 2; its first pod of a lower PriorityClass, so that the bundles' order has no tie
Volcano breaks by UID) and a pending job of higher priority in the same queue: one pod wanted takes the safe
bundle (one pod), two take the safe and the whole bundle (the gang goes). gangreclaim: of two whole bundles in an
over-deserved queue, the one of the better return (a one-pod gang before a two-pod gang freeing as much here).
``auto`` and ``cpsat`` (the exact model holds both actions under this configuration: its first tier is priority,
gang and conformance, not capacity) plan the same cases and admit no fewer jobs than vc-scheduler.

The case's nodes carry a label its pending job selects: other tests leave nodes with free GPUs in the cluster
(both schedulers then place the job there without evicting, and agree, but the case no longer tests eviction)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.realcluster.cluster import HACK, KWOK_ANNOTATION, Cluster
from tests.realcluster.vcdiff import GPU, Case, Observed, compare, priority_classes, run_case

pytestmark = pytest.mark.realcluster
GANG_ACTIONS = "enqueue, allocate, gangpreempt, gangreclaim, backfill"
SOLVERS = ("greedy", "auto", "cpsat")


def gang_conf_text() -> str:
    text = (HACK / "volcano-scheduler.conf").read_text()
    return text.replace('actions: "enqueue, allocate, preempt, reclaim, backfill"', f'actions: "{GANG_ACTIONS}"')


def case(ns: str, replicas: int) -> Case:
    c = Case(seed=0, index=replicas, ns=ns)
    cap = {"cpu": "64", "memory": "512Gi", "pods": "110", GPU: "8"}
    names = [f"{ns}-n{k}" for k in range(3)]
    c.nodes = [{"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": n, "annotations": {KWOK_ANNOTATION: "fake"},
                             "labels": {"kubernetes.io/hostname": n, "type": "kwok", "vcg": ns}},
                "spec": {}, "status": {"capacity": cap, "allocatable": cap}} for n in names]
    q = f"{ns}-q"
    c.queues = [{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": q},
                 "spec": {"parent": "root", "reclaimable": True}}]
    res = {"requests": {GPU: "8", "cpu": "8", "memory": "64Gi"}, "limits": {GPU: "8"}}
    pg = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": "v", "namespace": ns},
          "spec": {"minMember": 2, "queue": q, "priorityClassName": "normal-job"}}
    pods: list[dict[str, Any]] = [{
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"v-{k}", "namespace": ns, "annotations": {"scheduling.k8s.io/group-name": "v"}},
        "spec": {"nodeName": n, "schedulerName": "volcano", "priorityClassName": "spot-job" if k == 0 else "normal-job",
                 "tolerations": [{"operator": "Exists"}],
                 "containers": [{"name": "main", "image": "busy:1", "resources": res}]}} for k, n in enumerate(names)]
    c.running = [[pg, *pods]]
    c.pending = [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                  "metadata": {"name": "big", "namespace": ns},
                  "spec": {"schedulerName": "volcano", "queue": q, "minAvailable": replicas,
                           "priorityClassName": "large-job",
                           "tasks": [{"name": "worker", "replicas": replicas, "template": {"spec": {
                               "restartPolicy": "Never", "nodeSelector": {"vcg": ns},
                               "containers": [{"name": "main", "image": "trainer:1", "resources": res}]}}}]}}]
    return c


def reclaim_case(ns: str) -> Case:
    """qb (deserved 8) runs z (one 8-GPU pod on n0) and y (two on n1, n2, minMember 2); w (8 GPUs) waits in qa
    (deserved 16)."""
    c = case(ns, 1)
    qa, qb = f"{ns}-qa", f"{ns}-qb"
    c.queues = [{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name},
                 "spec": {"parent": "root", "reclaimable": True, "deserved": {GPU: str(d)}}}
                for name, d in ((qa, 16), (qb, 8))]
    [[_pg, *pods]] = c.running
    groups = []
    for name, members in (("z", pods[:1]), ("y", pods[1:])):
        pg = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
              "metadata": {"name": name, "namespace": ns},
              "spec": {"minMember": len(members), "queue": qb, "priorityClassName": "normal-job"}}
        renamed = [{**p, "metadata": {**p["metadata"], "name": f"{name}-{k}",
                                      "annotations": {"scheduling.k8s.io/group-name": name}},
                    "spec": {**p["spec"], "priorityClassName": "normal-job"}} for k, p in enumerate(members)]
        groups.append([pg, *renamed])
    c.running = groups
    job = c.pending[0]
    c.pending = [{**job, "metadata": {**job["metadata"], "name": "big"}, "spec": {**job["spec"], "queue": qa}}]
    return c


def run_under_gang_conf(c: Cluster, the_case: Case, tmp_path: Path) -> Any:
    """``run_case`` with vc-scheduler and the cluster's ConfigMap on the gang-aware actions, then back."""
    c.apply(priority_classes())
    conf = tmp_path / "gang.conf"
    conf.write_text(gang_conf_text())
    with c.scheduler_configured(conf):
        return run_case(c, the_case, tmp_path, solvers=SOLVERS)


def exact_admits_no_fewer(the_case: Case, obs: Observed) -> None:
    """auto and cpsat plan the case (valid plans: ``optplan place`` validates) and admit no fewer jobs than
    vc-scheduler did."""
    for solver in SOLVERS[1:]:
        verdict = compare(the_case, obs, solver)
        assert verdict.error == "" and not verdict.fewer, (solver, verdict)
        [big] = [j for j in obs.plans[solver]["jobs"] if j["name"] == "big"]
        assert big["admitted"], (solver, big)


def test_gangreclaim_takes_the_better_return_as_vc_scheduler_does(real_cluster: Cluster, tmp_path: Path) -> None:
    the_case = reclaim_case("vcg-r")
    obs = run_under_gang_conf(real_cluster, the_case, tmp_path)
    assert obs.snapshot_error == ""
    [big] = [j for j in obs.plans["greedy"]["jobs"] if j["name"] == "big"]
    assert big["admitted"] and [(v["name"], v["reason"]) for v in big["victims"]] == [("z-0", "gangreclaim")], big
    assert set(obs.evicted) == {"z-0"}, obs.evicted
    assert [p for p in obs.bound if p.startswith("big-")] == ["big-worker-0"], obs.bound
    exact_admits_no_fewer(the_case, obs)


@pytest.mark.parametrize(("replicas", "victims"), [(1, {"v-0"}), (2, {"v-0", "v-1", "v-2"})])
def test_optplan_takes_the_bundles_vc_scheduler_takes(real_cluster: Cluster, tmp_path: Path, replicas: int,
                                                      victims: set[str]) -> None:
    the_case = case(f"vcg-{replicas}", replicas)
    obs = run_under_gang_conf(real_cluster, the_case, tmp_path)
    assert obs.snapshot_error == ""
    plan = obs.plans["greedy"]
    [big] = [j for j in plan["jobs"] if j["name"] == "big"]
    assert big["admitted"], big
    assert {v["name"] for v in big["victims"]} == victims
    assert {v["reason"] for v in big["victims"]} == {"gangpreempt"}
    assert set(obs.evicted) == victims, obs.evicted  # what vc-scheduler evicted
    assert len([p for p in obs.bound if p.startswith("big-")]) == replicas, obs.bound
    exact_admits_no_fewer(the_case, obs)
