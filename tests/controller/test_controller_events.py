"""Kubernetes Events (events.k8s.io/v1) the controller writes (optplan/controller/events.py): a run's story
in order on the fake API server, repeats aggregated into one Event's series, a flood rate-limited per
object, and an Event write that fails leaving the run's outcome as it was; and the fake server's Event
validation, as the apiserver's."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from optplan.adapters import kube
from optplan.adapters.kube import KubeClient
from optplan.controller.events import CONTROLLER, NORMAL, WARNING, Recorder
from optplan.controller.manager import Controller
from optplan.controller.metrics import Metrics
from tests.controller.test_controller import NS, W0, W1, Clock
from tests.controller.test_controller_e2e import (
    RUN_API,
    SETTINGS,
    Env,
    budget_spent_at_execute,
    complete,
    placements,
    seed_objects,
)
from tests.fakekube import ApiError, FakeKube

EVENT_API = ("events.k8s.io/v1", "Event")
RUN = "ascend-execute-001"


def controller(env: Env, client: KubeClient | None = None, metrics: Metrics | None = None) -> Controller:
    client = client or env.client()
    recorder = Recorder(client, instance="optplan-controller-0", clock=env.clock, metrics=metrics)
    return Controller(client, SETTINGS, clock=env.clock, metrics=metrics, recorder=recorder)


def events(fk: FakeKube, name: str | None = None, kind: str = "RepackRun") -> list[dict[str, Any]]:
    """The Events regarding one object (or all of a kind), in the order they were created (the hex
    nanoseconds of their names)."""
    found = [e for e in fk.objects(*EVENT_API) if e["regarding"]["kind"] == kind
             and (name is None or e["regarding"]["name"] == name)]
    return sorted(found, key=lambda e: int(e["metadata"]["name"].rsplit(".", 1)[1], 16))


def story(evs: list[dict[str, Any]]) -> list[str]:
    return [e["reason"] for e in evs]


def counters(metrics: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(metrics.exposition().decode()) for s in fam.samples}


# ---- a run's story ---------------------------------------------------------------------------------

def test_the_seed_executes_story_is_told_in_order_on_the_run_and_its_pods(env: Env) -> None:
    run = env.until_finished(controller(env))
    assert complete(run)["reason"] == "ExecutionCompleted"
    told = events(env.fk, RUN)
    # both victims are on the one node freed: evicted together, then their replacements nominated
    assert story(told) == ["Planned", "Evicted", "Evicted", "Nominated", "Nominated", "Completed"]
    planned = told[0]
    assert "Execute: free 1 node(s) (ascend-node-01) by moving 2 pod(s)" in planned["note"]
    bound = run["status"]["plan"]["solver"].get("freedNodesBound")  # greedy records none
    assert f"bound {'unknown' if bound is None else bound}; greedy HEURISTIC: freeing 1 node(s)" in planned["note"]
    for e in told:
        assert e["metadata"]["namespace"] == "default"  # a RepackRun is cluster-scoped
        assert e["metadata"]["name"].startswith(f"{RUN}.")
        assert e["regarding"] == {"apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackRun", "name": RUN,
                                  "uid": run["metadata"]["uid"]}
        assert (e["reportingController"], e["reportingInstance"]) == (CONTROLLER, "optplan-controller-0")
        assert e["type"] == NORMAL and "series" not in e
    assert [e["action"] for e in told] == ["Plan", "Evict", "Evict", "Nominate", "Nominate", "Complete"]
    assert [e["related"]["name"] for e in told[1:3]] == [W0, W1]  # the pods evicted, in order
    assert "suggested node ascend-node-02 to replacement" in told[3]["note"]
    # each evicted pod says who evicted it, in its own namespace
    for victim in (W0, W1):
        (repacked,) = events(env.fk, victim, kind="Pod")
        assert repacked["reason"] == "Repacked" and repacked["metadata"]["namespace"] == NS
        assert f"evicted by RepackRun {RUN} to free node ascend-node-01" in repacked["note"]
        assert repacked["related"]["name"] == RUN


def test_a_dry_run_tells_its_plan_and_a_waiting_execute_why_it_waits(fk: FakeKube, kubeconfig: str) -> None:
    objs = seed_objects()
    e = Env(fk, kubeconfig, objs)
    try:
        dry = {**objs[-1], "metadata": {"name": "dry"}, "spec": {**objs[-1]["spec"], "mode": "DryRun"}}
        fk.create(dry)
        e.clock.advance(1)
        second = {**objs[-1], "metadata": {"name": "second"}}
        fk.create(second)
        ctl = controller(e)
        e.until_finished(ctl)
        assert story(events(fk, "dry")) == ["Planned"]
        assert "DryRun: free 1 node(s)" in events(fk, "dry")[0]["note"]
        e.step(ctl)
        waits = events(fk, "second")
        assert story(waits) == ["AnotherRunActive", "CooldownActive"]
        # asked every pass while the first ran: one Event, its repeats counted in its series
        assert waits[0]["series"]["count"] >= 2
        assert waits[0]["note"] == f"RepackRun {RUN} is executing; Execute runs one at a time"
    finally:
        e.close()


def test_a_refused_eviction_names_the_budget_and_its_repeats_aggregate(env: Env) -> None:
    metrics = Metrics()
    run = env.until_finished(controller(env, budget_spent_at_execute(env), metrics))
    assert run["status"]["phase"] == "Failed"
    told = events(env.fk, RUN)
    assert story(told) == ["Planned", "EvictionRefused", "EvictionRefused", "Failed"]
    refused, rejected = told[1], told[2]
    assert refused["type"] == WARNING and refused["related"]["name"] == W0
    assert f"eviction of {NS}/{W0} refused" in refused["note"]
    assert "The disruption budget training needs" in refused["note"]  # the PDB, named
    asked = sum(1 for e in env.fk.evictions if e.code == 429)
    assert refused["series"]["count"] == asked - 1  # every refusal but the last, in one Event
    assert "rejected" in rejected["note"] and "ascend-node-01 is not freed" in rejected["note"]
    assert told[3]["type"] == WARNING and told[3]["note"].startswith("ExecutionGoalNotReached: ")
    assert counters(metrics)["optplan_eviction_refusals_total", (("reason", "DisruptionBudget"),)] == asked - 1
    assert not events(env.fk, kind="Pod")  # no pod was evicted


# ---- the recorder's guards -------------------------------------------------------------------------

@pytest.fixture
def client(fk: FakeKube, kubeconfig: str) -> Iterator[KubeClient]:
    with kube.connect(kubeconfig, None, deadline=None, timeout=10) as c:
        yield c


RUN_OBJ = {"apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackRun", "metadata": {"name": "r1", "uid": "u1"}}


def test_repeats_aggregate_into_one_event_with_a_series(fk: FakeKube, client: KubeClient) -> None:
    clock = Clock()
    rec = Recorder(client, instance="i", clock=clock)
    for _ in range(3):
        rec.emit(RUN_OBJ, NORMAL, "CooldownActive", "Wait", "the next Execute may start at noon")
        clock.advance(1)
    (one,) = events(fk)
    assert one["series"]["count"] == 2  # the first repeat is written at once, the next within the refresh
    clock.advance(60)
    rec.flush()
    (one,) = events(fk)
    assert one["series"]["count"] == 3
    assert one["series"]["lastObservedTime"] == "2027-01-15T08:00:02.000000Z"
    patches = [r for r in fk.requests if r.method == "PATCH"]
    assert len(patches) == 2 and all(r.headers["content-type"] == "application/merge-patch+json" for r in patches)
    rec.emit(RUN_OBJ, NORMAL, "CooldownActive", "Wait", "another note")  # another note: another Event
    assert len(events(fk)) == 2
    clock.advance(400)  # past the series' end: the same again starts a new Event
    rec.emit(RUN_OBJ, NORMAL, "CooldownActive", "Wait", "the next Execute may start at noon")
    assert len(events(fk)) == 3


def test_a_repeat_of_an_event_that_expired_creates_it_again_with_its_series(fk: FakeKube,
                                                                           client: KubeClient) -> None:
    clock = Clock()
    rec = Recorder(client, instance="i", clock=clock)
    rec.emit(RUN_OBJ, NORMAL, "AnotherRunActive", "Wait", "r0 is executing")
    (first,) = events(fk)
    fk.delete(*EVENT_API, first["metadata"]["name"], namespace="default")
    clock.advance(1)
    rec.emit(RUN_OBJ, NORMAL, "AnotherRunActive", "Wait", "r0 is executing")
    (again,) = events(fk)
    assert again["metadata"]["name"] != first["metadata"]["name"] and again["series"]["count"] == 2


def test_a_flood_on_one_object_is_rate_limited_per_object(fk: FakeKube, client: KubeClient) -> None:
    clock = Clock()
    metrics = Metrics()
    rec = Recorder(client, instance="i", clock=clock, metrics=metrics)
    for i in range(40):
        rec.emit(RUN_OBJ, WARNING, "EvictionRefused", "Evict", f"refusal {i}")
    assert len(events(fk)) == 25  # the burst
    assert counters(metrics)["optplan_events_dropped_total", ()] == 15
    other = {**RUN_OBJ, "metadata": {"name": "r2", "uid": "u2"}}
    rec.emit(other, NORMAL, "Planned", "Plan", "another run has its own bucket")
    assert len(events(fk, "r2")) == 1
    clock.advance(299)
    rec.emit(RUN_OBJ, WARNING, "EvictionRefused", "Evict", "not yet")
    assert len(events(fk, "r1")) == 25
    clock.advance(1)  # a token every 5 minutes
    rec.emit(RUN_OBJ, WARNING, "EvictionRefused", "Evict", "one more")
    assert len(events(fk, "r1")) == 26


def test_held_back_series_counts_are_written_once_a_token_is_back(fk: FakeKube, client: KubeClient) -> None:
    clock = Clock()
    rec = Recorder(client, instance="i", clock=clock, burst=2, refill=300.0, refresh=0.0)
    for _ in range(5):  # create, first repeat, then no token
        rec.emit(RUN_OBJ, NORMAL, "AnotherRunActive", "Wait", "r0 is executing")
    assert events(fk)[0]["series"]["count"] == 2
    clock.advance(300)
    rec.flush()
    assert events(fk)[0]["series"]["count"] == 5


def test_a_failing_event_write_leaves_the_run_as_it_was_and_is_counted(env: Env) -> None:
    for ns in ("default", NS):
        env.fk.fail(f"/apis/events.k8s.io/v1/namespaces/{ns}/events", 500, times=None)
    metrics = Metrics()
    client = env.client()
    client.on_error = metrics.api_error  # as `optplan controller` wires it
    run = env.until_finished(controller(env, client, metrics))
    assert run["status"]["phase"] == "Succeeded" and complete(run)["reason"] == "ExecutionCompleted"
    assert placements(run) == {W0: ("Evicted", "Bound", "ascend-node-02"), W1: ("Evicted", "Bound", "ascend-node-03")}
    assert env.fk.evicted() == [f"{NS}/{W0}", f"{NS}/{W1}"]
    assert not env.fk.objects(*EVENT_API)
    written = counters(metrics)
    assert written["optplan_event_write_errors_total", ()] == 8  # 6 on the run, 2 on the pods
    assert written["optplan_api_errors_total", (("code", "500"), ("verb", "create"))] == 8


# ---- the fake API server's Events ------------------------------------------------------------------

def event(**over: Any) -> dict[str, Any]:
    e: dict[str, Any] = {
        "apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "r1.17f0", "namespace": "default"},
        "eventTime": "2026-07-30T10:00:00.000000Z", "reportingController": CONTROLLER, "reportingInstance": "i",
        "action": "Plan", "reason": "Planned", "type": "Normal", "note": "n",
        "regarding": {"apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackRun", "name": "r1"}}
    e.update(over)
    return e


@pytest.mark.parametrize(("over", "field"), [
    ({"eventTime": None}, "eventTime"),
    ({"reportingController": "Not A Name!"}, "reportingController"),
    ({"reportingInstance": ""}, "reportingInstance"),
    ({"action": "a" * 129}, "action"),
    ({"reason": ""}, "reason"),
    ({"note": "x" * 1025}, "note"),
    ({"type": "Info"}, "type"),
    ({"series": {"count": 1, "lastObservedTime": "2026-07-30T10:00:00.000000Z"}}, "series.count"),
    ({"series": {"count": 2}}, "series.lastObservedTime"),
    ({"metadata": {"name": "r1.17f1", "namespace": "team-a"}}, "regarding.namespace"),
    ({"deprecatedCount": 3}, "deprecatedCount"),
])
def test_the_fake_server_validates_events_as_the_apiserver(fake_kube: FakeKube, over: dict[str, Any],
                                                           field: str) -> None:
    fake_kube.create(event())  # the valid one
    with pytest.raises(ApiError) as e:
        fake_kube.create(event(**{"metadata": {"name": "r1.17f1", "namespace": "default"}, **over}))
    assert e.value.code == 422
    assert field in {c["field"] for c in e.value.status["details"]["causes"]}


def test_the_fake_server_patches_only_an_events_series(fake_kube: FakeKube) -> None:
    fake_kube.create(event())
    series = {"series": {"count": 2, "lastObservedTime": "2026-07-30T10:01:00.000000Z"}}
    fake_kube.patch(*EVENT_API, "r1.17f0", series, namespace="default")
    assert fake_kube.get(*EVENT_API, "r1.17f0", "default")["series"]["count"] == 2
    with pytest.raises(ApiError) as e:
        fake_kube.patch(*EVENT_API, "r1.17f0", {"note": "changed"}, namespace="default")
    assert e.value.code == 422 and "note" in {c["field"] for c in e.value.status["details"]["causes"]}
    pod_event = event(metadata={"name": "p.1", "namespace": "team-a"},
                      regarding={"apiVersion": "v1", "kind": "Pod", "name": "p", "namespace": "team-a"})
    fake_kube.create(pod_event)  # a namespaced object's Event lives in its namespace
    assert [e["metadata"]["name"] for e in fake_kube.objects(*EVENT_API, namespace="team-a")] == ["p.1"]


def test_a_network_topology_that_cannot_be_mapped_fails_the_run_naming_the_field(fk: FakeKube,
                                                                                 kubeconfig: str) -> None:
    objs = seed_objects()
    e = Env(fk, kubeconfig, [o for o in objs if o["kind"] != "RepackRun"])
    try:
        run = {**objs[-1], "metadata": {"name": "racks"},
               "spec": {**objs[-1]["spec"], "mode": "DryRun",
                        "networkTopology": {"hyperNodeTier": 1, "nodeBlockSize": 8, "requiredNodeBlocks": 1}}}
        fk.create(run)  # the CRD accepts the other implementation's fields; this cluster has no HyperNode
        ctl = controller(e)
        e.step(ctl)
        done = fk.get(*RUN_API, "racks")
        assert done["status"]["phase"] == "Failed" and complete(done)["reason"] == "InvalidSpec"
        assert "spec.networkTopology.hyperNodeTier: no HyperNode has tier 1" in complete(done)["message"]
        (why,) = events(fk, "racks")
        assert (why["reason"], why["type"]) == ("Failed", WARNING)
        assert why["note"].startswith("InvalidSpec: ") and "spec.networkTopology.hyperNodeTier" in why["note"]
    finally:
        e.close()


def test_a_failing_pass_tells_why_and_the_run_goes_on(env: Env) -> None:
    env.fk.fail(f"/api/v1/namespaces/{NS}/pods/{W0}/eviction", 403, times=2)
    ctl = controller(env)
    run = env.until_finished(ctl)
    assert complete(run)["reason"] == "ExecutionCompleted"
    told = events(env.fk, RUN)
    assert story(told) == ["Planned", "EvictionRefused", "ReconcileError", "Evicted", "Evicted", "Nominated",
                           "Nominated", "Completed"]
    refused, failed = told[1], told[2]
    assert refused["series"]["count"] == 2 and f"eviction of {NS}/{W0} failed" in refused["note"]
    assert failed["series"]["count"] == 2 and failed["note"].startswith("retrying: KubeError: forbidden")


def test_the_fake_server_lists_events_by_namespace_and_by_what_they_regard(fake_kube: FakeKube) -> None:
    fake_kube.create(event())
    fake_kube.create(event(metadata={"name": "r2.17f1", "namespace": "default"},
                           regarding={"apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackRun", "name": "r2"}))
    code, out, _ = fake_kube.handle(
        "GET", "/apis/events.k8s.io/v1/namespaces/default/events?fieldSelector=regarding.name%3Dr2", {}, b"")
    assert code == 200 and isinstance(out, dict)
    assert out["kind"] == "EventList" and [e["metadata"]["name"] for e in out["items"]] == ["r2.17f1"]
    code, out, _ = fake_kube.handle("GET", "/apis/events.k8s.io/v1/namespaces/team-a/events", {}, b"")
    assert code == 200 and isinstance(out, dict) and out["items"] == []
