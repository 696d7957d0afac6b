"""The controller's calls in the kubernetes adapter, over real HTTP against the fake API server: the
streaming watch (events as they arrive, BOOKMARKs, 410 Gone), the Eviction subresource with its UID
precondition and budget refusals, pods/status, guarded deletes and Leases."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from optplan.adapters import kube
from optplan.adapters.kube import PODS, KubeClient, WatchExpired
from optplan.controller.informer import Informer, Store
from optplan.errors import ConflictError, KubeError
from tests.builders import node, pod
from tests.fakekube import FakeKube


@pytest.fixture
def client(fk: FakeKube, tmp_path: Path) -> Iterator[KubeClient]:
    c = kube.connect(str(fk.write_kubeconfig(tmp_path / "kc")), None, deadline=None, timeout=5)
    try:
        yield c
    finally:
        c.close()


def test_watch_delivers_events_as_they_happen_not_when_the_watch_ends(fk: FakeKube, client: KubeClient) -> None:
    fk.add(node("n1"), pod("a", "n1"), server_fields=True)
    items, version = client.list_with_version(PODS)
    assert [i["metadata"]["name"] for i in items] == ["a"] and version
    got: list[tuple[str, str, float]] = []
    start = time.monotonic()

    def later() -> None:
        time.sleep(0.2)
        fk.add(pod("b", "n1"), server_fields=True)

    threading.Thread(target=later, daemon=True).start()
    for event in client.watch(PODS, version, timeout_seconds=30):
        got.append((event["type"], event["object"]["metadata"]["name"], time.monotonic() - start))
        break
    assert got[0][:2] == ("ADDED", "b")
    assert got[0][2] < 5  # long before the 30 s the watch may last


def test_a_too_old_version_is_410_and_the_informer_lists_again(fk: FakeKube, client: KubeClient) -> None:
    fk.add(node("n1"), pod("a", "n1"), server_fields=True)
    _, version = client.list_with_version(PODS)
    fk.add(pod("b", "n1"), server_fields=True)
    fk.compact()
    with pytest.raises(WatchExpired):
        list(client.watch(PODS, version, timeout_seconds=2))
    store = Store()
    inf = Informer(client, PODS, store, watch_timeout=1)
    inf.sync()
    inf.version = version  # as if resumed from before the compaction
    thread = threading.Thread(target=inf.run, daemon=True)
    inf.start = lambda: None  # type: ignore[method-assign]
    thread.start()
    deadline = time.monotonic() + 10
    while inf.relists < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    inf.stop.set()
    thread.join(timeout=5)
    assert inf.relists >= 2
    assert [o["metadata"]["name"] for o in store.all("Pod")] == ["a", "b"]


def test_the_watch_follows_changes_and_deletions_into_the_store(fk: FakeKube, client: KubeClient) -> None:
    fk.add(node("n1"), pod("a", None), pod("gone", "n1"), server_fields=True)  # a: pending, nominated below
    store = Store()
    inf = Informer(client, PODS, store, watch_timeout=1)
    inf.start()
    try:
        deadline = time.monotonic() + 10
        while not store.synced(["Pod"]) and time.monotonic() < deadline:
            time.sleep(0.02)
        fk.delete("v1", "Pod", "gone", "default")
        fk.patch("v1", "Pod", "a", {"status": {"nominatedNodeName": "n1"}}, namespace="default",
                 subresource="status")
        fk.add(pod("done", "n1", phase="Succeeded"), server_fields=True)  # outside the field selector
        while time.monotonic() < deadline:
            names = [o["metadata"]["name"] for o in store.all("Pod")]
            a = store.get("Pod", "a", "default") or {}
            if names == ["a"] and (a.get("status") or {}).get("nominatedNodeName") == "n1":
                break
            time.sleep(0.02)
        assert [o["metadata"]["name"] for o in store.all("Pod")] == ["a"]
        assert (store.get("Pod", "a", "default") or {})["status"]["nominatedNodeName"] == "n1"
    finally:
        inf.stop.set()


def test_eviction_answers_by_uid_and_budget(fk: FakeKube, client: KubeClient) -> None:
    fk.add(node("n1"), pod("a", "n1", labels={"app": "x"}), pod("b", "n1", labels={"app": "y"}), server_fields=True)
    fk.add({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "y", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "y"}}}, "status": {"disruptionsAllowed": 0}})
    uid_a = fk.get("v1", "Pod", "a", "default")["metadata"]["uid"]
    uid_b = fk.get("v1", "Pod", "b", "default")["metadata"]["uid"]
    assert client.evict("default", "a", uid="not-" + uid_a, grace_period_seconds=5).status == 409
    assert fk.find("v1", "Pod", "a", "default") is not None
    refused = client.evict("default", "b", uid=uid_b, grace_period_seconds=5)
    assert refused.status == 429 and "disruption budget" in refused.message
    assert client.evict("default", "a", uid=uid_a, grace_period_seconds=5).status in (200, 201)
    assert fk.find("v1", "Pod", "a", "default") is None
    assert client.evict("default", "a", uid=uid_a, grace_period_seconds=5).status == 404
    assert [(e.name, e.uid, e.grace_period_seconds) for e in fk.evictions if e.code == 201] == [("a", uid_a, 5)]


def test_pod_status_patch_and_guarded_run_delete(fk: FakeKube, client: KubeClient) -> None:
    fk.add(node("n1"), pod("p", None, phase="Pending"), server_fields=True)
    out = client.patch_pod_status("default", "p", {"nominatedNodeName": "n1"})
    assert out["status"]["nominatedNodeName"] == "n1" and out["status"]["phase"] == "Pending"
    run: dict[str, Any] = {"apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackRun", "metadata": {"name": "r"},
                           "spec": {"goals": [{"resource": "nvidia.com/gpu"}]}}
    created = fk.create(run)
    assert client.delete_repack_run("r", "another-uid") is False
    assert fk.find("repack.volcano.sh/v1alpha1", "RepackRun", "r") is not None
    assert client.delete_repack_run("r", created["metadata"]["uid"]) is True
    assert client.delete_repack_run("r", created["metadata"]["uid"]) is False


def test_leases_are_created_once_and_updated_under_their_version(client: KubeClient) -> None:
    assert client.get_lease("ns", "l") is None
    first = client.create_lease("ns", "l", {"holderIdentity": "a", "leaseDurationSeconds": 15})
    with pytest.raises(ConflictError):
        client.create_lease("ns", "l", {"holderIdentity": "b", "leaseDurationSeconds": 15})
    renewed = client.update_lease(first, {"holderIdentity": "a", "leaseDurationSeconds": 15, "leaseTransitions": 0})
    with pytest.raises(ConflictError):
        client.update_lease(first, {"holderIdentity": "b", "leaseDurationSeconds": 15})  # read before a renewed
    lease = client.get_lease("ns", "l")
    assert lease is not None and lease["spec"]["holderIdentity"] == "a"
    assert lease["metadata"]["resourceVersion"] == renewed["metadata"]["resourceVersion"]


def test_the_controller_bounds_each_call_not_the_life_of_its_client(fk: FakeKube, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from optplan.cli import main

    kc = str(fk.write_kubeconfig(tmp_path / "kc"))
    made: list[KubeClient] = []
    real = kube.connect

    def spy(*a: Any, **kw: Any) -> KubeClient:
        made.append(real(*a, **kw))
        return made[-1]

    monkeypatch.setattr(kube, "connect", spy)
    assert main(["controller", "--kubeconfig", kc, "--once", "--api-deadline", "10", "--request-timeout", "5"]) == 0
    assert [(m.deadline, m.call_deadline, m.timeout) for m in made] == [(None, 10, 5)]  # --api-deadline honoured
    c = real(kc, None, timeout=5, deadline=None, call_deadline=10)
    now = [0.0]
    c._monotonic = lambda: now[0]  # type: ignore[method-assign]
    c._sleep = lambda s: now.__setitem__(0, now[0] + s)  # type: ignore[method-assign]
    try:
        fk.add(node("n1"), server_fields=True)
        fk.fail("/api/v1/nodes", 503, times=None, retry_after="4")
        with pytest.raises(KubeError, match=r"would pass the 10 s deadline of one API call.*--api-deadline"):
            c.list_objects(kube.RESOURCES[0])
        assert now[0] == 8  # two waits of 4 s; a third would end past 10 s
        fk._faults.clear()
        now[0] += 3600  # an hour later the controller's calls still have their whole 10 s each
        fk.fail("/api/v1/nodes", 503, times=2, retry_after="4")
        assert [n["metadata"]["name"] for n in c.list_objects(kube.RESOURCES[0])] == ["n1"]
    finally:
        c.close()


def test_the_execute_record_on_the_lease_survives_the_electors_renewals(fk: FakeKube, client: KubeClient) -> None:
    from optplan.controller.leader import ExecuteRecord, LeaderElector

    elector = LeaderElector(client, "optplan-system", "optplan-controller", "a", clock=time.time)
    assert elector.tick()
    record = ExecuteRecord(client, "optplan-system", "optplan-controller")
    record.remember(1_800_000_600.0, "ascend-execute-001")
    record.remember(1_800_000_000.0, "older")  # an earlier completion never replaces a later one
    assert elector.tick()  # a PUT of the whole Lease
    elector.release()
    assert record.last() == (1_800_000_600.0, "ascend-execute-001")
    assert ExecuteRecord(client, "optplan-system", "other").last() is None
    fresh = ExecuteRecord(client, "optplan-system", "standalone")  # no leader election: the Lease holds the record
    fresh.remember(1_800_000_000.0, "r")
    assert fresh.last() == (1_800_000_000.0, "r")
