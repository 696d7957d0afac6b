"""The Repack controller's reconciler against an in-memory cluster, with a fake clock.

``Cluster`` is a thin stand-in for the API server and the world around it: it implements the
reconciler's writes (status merge patch with the resourceVersion precondition, the Eviction
subresource with UID preconditions and PodDisruptionBudget refusals, pods/status, delete) and feeds the
informer store directly. A workload controller recreates evicted pods under the same name with a new
UID (as a VCJob does); a scheduler binds pending pods to their nominatedNodeName when it still fits,
else to another node with room, unless told to leave them pending. ``Killed`` stops a "process" after
its k-th write, so a test can restart a new reconciler on the same cluster at every journal step.

The story is seed 000's (instances/seed-dryrun.yaml run as Execute): the 2-worker training VCJob on
ascend-node-01 moves to ascend-node-02 and ascend-node-03, freeing ascend-node-01 (33% -> 0%).
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from optplan.adapters.kube import Answer, NotFoundError
from optplan.controller import status as st
from optplan.controller.informer import Store
from optplan.controller.reconcile import Reconciler, Settings
from optplan.errors import ConflictError, KubeError
from tests.builders import node, pod, repack_run
from tests.fakekube import merge_patch

ROOT = Path(__file__).resolve().parents[2]
NPU = "huawei.com/ascend-1980"
NS = "repack-demo"
W0, W1 = "ascend-batch-training-worker-0", "ascend-batch-training-worker-1"
T0 = 1_800_000_000.0  # 2027-01-15T08:00:00Z

KINDS = {"Node": "Node", "Pod": "Pod", "PodGroup": "PodGroup", "PodDisruptionBudget": "PodDisruptionBudget",
         "RepackRun": "RepackRun", "HyperNode": "HyperNode", "Queue": "Queue", "Job": "Job",
         "PriorityClass": "PriorityClass", "ModelServing": "ModelServing"}


class Killed(BaseException):
    """The controller process died (a BaseException: no reconciler code catches it)."""


class Clock:
    def __init__(self, t: float = T0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds




def _requests(obj: Mapping[str, Any], resource: str) -> int:
    total = 0
    for c in obj["spec"].get("containers") or []:
        total += int(str(((c.get("resources") or {}).get("requests") or {}).get(resource, "0")))
    return total


class Cluster:
    """The API server, a workload controller and a scheduler, in memory (see the module docstring)."""

    def __init__(self, objects: list[dict[str, Any]], clock: Clock, *, resource: str = NPU) -> None:
        self.clock = clock
        self.resource = resource
        self.store = Store()
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self._rv = itertools.count(100)
        self._uid = itertools.count(1)
        self.evictions: list[tuple[str, str, str | None]] = []  # (namespace, name, uid) accepted
        self.eviction_calls: list[tuple[str, str]] = []
        self.nominations: list[tuple[str, str, str]] = []
        self.pins: list[tuple[str, str, dict[str, str]]] = []  # (namespace, name, annotations) written
        self.writes = 0
        self.kill_at: int | None = None  # the write (1-based) after which the process dies
        self.kill_before = False  # die before that write reaches the server instead
        self.pdb_blocked: set[str] = set()  # namespace/name of pods a PDB protects (429)
        self.recreate = True
        self.schedule_mode = "nominated"  # nominated | elsewhere | never
        self.deleted_runs: list[str] = []
        self.pod_reads = 0
        for o in objects:
            self.add(o)
        for kind in KINDS:
            self.store.replace(kind, [o for (k, _, _), o in self.objects.items() if k == kind])

    # ---- state ---------------------------------------------------------------------------------

    def add(self, obj: dict[str, Any]) -> dict[str, Any]:
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        meta.setdefault("uid", f"uid-{next(self._uid)}")
        meta.setdefault("creationTimestamp", st.rfc3339(self.clock()))
        if obj["kind"] == "RepackRun":
            meta.setdefault("generation", 1)
        meta["resourceVersion"] = str(next(self._rv))
        self.objects[(obj["kind"], meta.get("namespace", ""), meta["name"])] = obj
        self.store.put(obj["kind"], copy.deepcopy(obj))
        return obj

    def remove(self, kind: str, name: str, namespace: str = "") -> None:
        obj = self.objects.pop((kind, namespace, name))
        self.store.delete(kind, obj)

    def pod(self, name: str, ns: str = NS) -> dict[str, Any] | None:
        return self.objects.get(("Pod", ns, name))

    def run(self, name: str) -> dict[str, Any]:
        return self.objects[("RepackRun", "", name)]

    def _write(self) -> None:
        """Count a write; die before or after the k-th one as the test asked."""
        self.writes += 1
        if self.kill_at is not None and self.writes == self.kill_at and self.kill_before:
            self.writes -= 1
            raise Killed()

    def _after_write(self) -> None:
        if self.kill_at is not None and self.writes == self.kill_at and not self.kill_before:
            raise Killed()

    # ---- the reconciler's writes ---------------------------------------------------------------

    def get_repack_run(self, name: str) -> dict[str, Any]:
        obj = self.objects.get(("RepackRun", "", name))
        if obj is None:
            raise NotFoundError(f"not found: {name}")
        return copy.deepcopy(obj)

    def patch_repack_run_status(self, name: str, status: Mapping[str, Any], resource_version: str) -> dict[str, Any]:
        self._write()
        obj = self.objects.get(("RepackRun", "", name))
        if obj is None:
            raise NotFoundError(f"not found: {name}")
        if resource_version != obj["metadata"]["resourceVersion"]:
            raise ConflictError(f"{name} changed")
        obj["status"] = merge_patch(obj.get("status") or {}, dict(status))
        obj["metadata"]["resourceVersion"] = str(next(self._rv))
        self.store.put("RepackRun", copy.deepcopy(obj))
        out = copy.deepcopy(obj)
        self._after_write()
        return out

    def evict(self, namespace: str, name: str, *, uid: str | None, grace_period_seconds: int | None) -> Answer:
        self._write()
        self.eviction_calls.append((namespace, name))
        obj = self.pod(name, namespace)
        if obj is None:
            answer = Answer(404, f'pods "{name}" not found')
        elif uid and obj["metadata"]["uid"] != uid:
            answer = Answer(409, "Precondition failed: UID in precondition differs")
        elif f"{namespace}/{name}" in self.pdb_blocked:
            answer = Answer(429, "Cannot evict pod as it would violate the pod's disruption budget.")
        else:
            self.evictions.append((namespace, name, obj["metadata"]["uid"]))
            self.remove("Pod", name, namespace)
            if self.recreate:
                self._recreate(obj)
            answer = Answer(201, "")
        self._after_write()
        return answer

    def patch_pod_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> dict[str, Any]:
        self._write()
        obj = self.pod(name, namespace)
        if obj is None:
            raise NotFoundError(f"not found: {name}")
        obj["status"] = merge_patch(obj.get("status") or {}, dict(status))
        obj["metadata"]["resourceVersion"] = str(next(self._rv))
        self.nominations.append((namespace, name, str(status.get("nominatedNodeName"))))
        self.store.put("Pod", copy.deepcopy(obj))
        self._after_write()
        return copy.deepcopy(obj)

    def patch_pod_metadata(self, namespace: str, name: str, metadata: Mapping[str, Any]) -> dict[str, Any]:
        self._write()
        obj = self.pod(name, namespace)
        if obj is None:
            raise NotFoundError(f"not found: {name}")
        obj["metadata"] = merge_patch(obj["metadata"], dict(metadata))
        obj["metadata"]["resourceVersion"] = str(next(self._rv))
        self.pins.append((namespace, name, dict(metadata.get("annotations") or {})))
        self.store.put("Pod", copy.deepcopy(obj))
        self._after_write()
        return copy.deepcopy(obj)

    def read_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        self.pod_reads += 1
        obj = self.pod(name, namespace)
        return copy.deepcopy(obj) if obj is not None else None

    def delete_repack_run(self, name: str, uid: str | None) -> bool:
        self._write()
        obj = self.objects.get(("RepackRun", "", name))
        if obj is None or (uid and obj["metadata"]["uid"] != uid):
            return False
        self.remove("RepackRun", name)
        self.deleted_runs.append(name)
        self._after_write()
        return True

    # ---- the world -----------------------------------------------------------------------------

    def _recreate(self, victim: dict[str, Any]) -> None:
        new = copy.deepcopy(victim)
        meta = new["metadata"]
        for k in ("uid", "resourceVersion", "creationTimestamp"):
            meta.pop(k, None)
        new["spec"].pop("nodeName", None)
        new["status"] = {"phase": "Pending"}
        self.add(new)

    def free(self, node_name: str) -> int:
        n = self.objects[("Node", "", node_name)]
        cap = int(str(n["status"]["allocatable"].get(self.resource, "0")))
        used = sum(_requests(p, self.resource) for (k, _, _), p in self.objects.items()
                   if k == "Pod" and p["spec"].get("nodeName") == node_name)
        return cap - used

    def schedule(self) -> None:
        """Bind every pending pod (the scheduler), as ``schedule_mode`` says."""
        if self.schedule_mode == "never":
            return
        nodes = sorted(n for (k, _, n) in self.objects if k == "Node")
        for (kind, _, _), p in sorted(self.objects.items()):
            if kind != "Pod" or p["spec"].get("nodeName"):
                continue
            need = _requests(p, self.resource)
            nominated = (p.get("status") or {}).get("nominatedNodeName")
            if self.schedule_mode == "nominated" and nominated and self.free(nominated) >= need:
                target = nominated
            else:
                options = [n for n in nodes if n != nominated and self.free(n) >= need
                           and n != (p.get("status") or {}).get("evictedFrom")]
                occupied = [n for n in options if self.free(n) < self._cap(n)]
                if not options:
                    continue
                target = (occupied or options)[0]
            p["spec"]["nodeName"] = target
            p["status"] = {**(p.get("status") or {}), "phase": "Running"}
            p["metadata"]["resourceVersion"] = str(next(self._rv))
            self.store.put("Pod", copy.deepcopy(p))

    def _cap(self, node_name: str) -> int:
        return int(str(self.objects[("Node", "", node_name)]["status"]["allocatable"].get(self.resource, "0")))


# ---- the seed's cluster --------------------------------------------------------------------------

def seed_objects(*, run_name: str = "ascend-execute-001", mode: str = "Execute",
                 ttl: int | None = None) -> list[dict[str, Any]]:
    docs = list(yaml.safe_load_all((ROOT / "instances" / "seed-dryrun.yaml").read_text(encoding="utf-8")))
    objects: list[dict[str, Any]] = list(docs[0]["items"])
    run = copy.deepcopy(docs[1])
    run["metadata"] = {"name": run_name}
    run["spec"]["mode"] = mode
    run["spec"]["eviction"] = {"gracePeriodSeconds": 30}
    if ttl is None:
        run["spec"].pop("ttlSecondsAfterFinished", None)
    else:
        run["spec"]["ttlSecondsAfterFinished"] = ttl
    return [*objects, run]


def execute_run(name: str, spec_from: dict[str, Any]) -> dict[str, Any]:
    run = copy.deepcopy(spec_from)
    run["metadata"] = {"name": name}
    run.pop("status", None)
    return run


SETTINGS = Settings(solver="greedy", time_limit=5.0, cooldown=600.0, eviction_deadline=120.0,
                    replacement_deadline=300.0, retry=1.0, max_retry=8.0, verify_time_limit=2.0)


def reconciler(cluster: Cluster, settings: Settings = SETTINGS, **kw: Any) -> Reconciler:
    return Reconciler(cluster.store, cluster, settings, clock=cluster.clock, **kw)


def drive(cluster: Cluster, r: Reconciler | None = None, *, steps: int = 20, until: Callable[[], bool] | None = None,
          make: Callable[[], Reconciler] | None = None) -> Reconciler:
    """Passes and scheduling turns, the clock moving to the next due time, until every run is finished
    (or ``until``)."""
    r = r or (make() if make else reconciler(cluster))
    for _ in range(steps):
        wait = r.reconcile_all()
        version = cluster.store.version
        cluster.schedule()
        if cluster.store.version != version:
            wait = 0.0  # a watch event would wake the controller at once
        if until is not None and until():
            return r
        runs = [o for (k, _, _), o in cluster.objects.items() if k == "RepackRun"]
        if until is None and all(_phase(o) in st.FINISHED and not o["spec"].get("ttlSecondsAfterFinished")
                                 for o in runs):
            return r
        cluster.clock.advance(wait if wait is not None else 60.0)
    return r


def _phase(obj: Mapping[str, Any]) -> str | None:
    return (obj.get("status") or {}).get("phase")


def complete(obj: Mapping[str, Any]) -> dict[str, Any]:
    cond = st.find_condition(obj.get("status") or {}, st.COMPLETE)
    assert cond is not None
    return cond


def relocations(obj: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["victimPodName"]: r for r in obj["status"].get("relocations") or []}


@pytest.fixture
def clock() -> Clock:
    return Clock()


# ---- Execute end to end ----------------------------------------------------------------------------

def test_seed_execute_completes_with_the_seeds_numbers(clock: Clock) -> None:
    c = Cluster(seed_objects(), clock)
    drive(c)
    run = c.run("ascend-execute-001")
    status = run["status"]
    assert status["phase"] == "Succeeded"
    assert complete(run)["reason"] == "ExecutionCompleted"
    assert status["plan"]["summary"]["fragBeforePercent"] == 33
    assert status["plan"]["freedNodes"] == ["ascend-node-01"]
    assert status["result"] == {"fragAfterPercent": 0, "freedNodeCount": 1, "movedCardCount": 2,
                                "metricsVerified": True}
    rels = relocations(run)
    assert {n: (r["plannedNodeName"], r["placement"]["selectedNodeName"], r["placement"]["actualNodeName"],
                r["eviction"]["phase"], r["placement"]["phase"]) for n, r in rels.items()} == {
        W0: ("ascend-node-02", "ascend-node-02", "ascend-node-02", "Evicted", "Bound"),
        W1: ("ascend-node-03", "ascend-node-03", "ascend-node-03", "Evicted", "Bound")}
    # evicted once each, with the victim's UID as precondition; the replacement was told where to go
    assert [(ns, n) for ns, n, _ in c.evictions] == [(NS, W0), (NS, W1)]
    assert all(rels[n]["victimPodUID"] == uid for _, n, uid in c.evictions)
    assert sorted(c.nominations) == [(NS, W0, "ascend-node-02"), (NS, W1, "ascend-node-03")]
    assert status["startTime"] <= status["completionTime"]
    assert all(cond["lastTransitionTime"] and cond["observedGeneration"] == 1 for cond in status["conditions"])


def test_a_pod_left_on_a_deleted_node_does_not_stop_the_run(clock: Clock) -> None:
    """On a real cluster a node deleted before its pods leaves them bound to a node that is not there
    until they are deleted (the real-cluster tier saw every plan fail meanwhile): the controller leaves
    such a pod out of its snapshot and carries on."""
    objs = seed_objects()
    objs.insert(3, pod("orphan", "deleted-node", 4, group=None, ns="other", resource=NPU))
    c = Cluster(objs, clock)
    drive(c)
    run = c.run("ascend-execute-001")
    assert run["status"]["phase"] == "Succeeded", run["status"]
    assert complete(run)["reason"] == "ExecutionCompleted"


def test_relocations_are_journaled_before_the_first_eviction(clock: Clock) -> None:
    c = Cluster(seed_objects(), clock)
    seen: list[list[str]] = []
    real = c.evict

    def watching(namespace: str, name: str, **kw: Any) -> Answer:
        seen.append([f"{r['victimPodName']}:{r['eviction']['phase']}"
                     for r in c.run("ascend-execute-001")["status"]["relocations"]])
        return real(namespace, name, **kw)

    c.evict = watching  # type: ignore[method-assign]
    drive(c)
    assert seen == [[f"{W0}:Evicting", f"{W1}:Pending"], [f"{W0}:Evicted", f"{W1}:Evicting"]]


def test_a_pdb_blocks_an_eviction_until_the_deadline_then_rejected(clock: Clock) -> None:
    c = Cluster(seed_objects(), clock)
    c.pdb_blocked.add(f"{NS}/{W0}")
    drive(c, steps=60)
    run = c.run("ascend-execute-001")
    rels = relocations(run)
    assert rels[W0]["eviction"]["phase"] == "Rejected"
    assert "disruption budget" in rels[W0]["eviction"]["message"]
    assert rels[W1]["eviction"]["phase"] == "Skipped"  # same node: it could not be freed anyway
    assert c.evictions == []
    assert len(c.eviction_calls) > 2  # retried with backoff until the deadline
    assert run["status"]["phase"] == "Failed" and complete(run)["reason"] == "ExecutionGoalNotReached"
    # the verdict carries the refusal: the pod and the API's answer (on a real server, the budget's name)
    assert f"{NS}/{W0} (Cannot evict pod as it would violate the pod's disruption budget." in complete(run)["message"]
    assert clock.t - T0 >= SETTINGS.eviction_deadline


def test_a_replacement_landing_elsewhere_completes_with_alternative_placement(clock: Clock) -> None:
    objs = seed_objects()
    objs.insert(3, node("ascend-node-04", 8, resource=NPU, labels={"accelerator-pool": "ascend-npu"}))
    objs.insert(4, pod("filler", "ascend-node-04", 4, group=None, ns="other", resource=NPU))
    c = Cluster(objs, clock)
    c.schedule_mode = "elsewhere"
    drive(c)
    run = c.run("ascend-execute-001")
    assert run["status"]["phase"] == "Succeeded"
    assert complete(run)["reason"] == "ExecutionCompletedWithAlternativePlacement"
    phases = {n: r["placement"]["phase"] for n, r in relocations(run).items()}
    assert "BoundElsewhere" in phases.values()


def test_a_replacement_that_never_schedules_times_out(clock: Clock) -> None:
    c = Cluster(seed_objects(), clock)
    c.schedule_mode = "never"
    drive(c, steps=40)
    run = c.run("ascend-execute-001")
    assert {r["placement"]["phase"] for r in relocations(run).values()} == {"TimedOut"}
    assert run["status"]["phase"] == "Failed" and complete(run)["reason"] == "ExecutionGoalNotReached"
    assert run["status"]["result"]["metricsVerified"] is False
    assert clock.t - T0 >= SETTINGS.replacement_deadline


# ---- crash safety ----------------------------------------------------------------------------------

def _end_state(c: Cluster) -> tuple[Any, ...]:
    run = c.run("ascend-execute-001")
    rels = relocations(run)
    return (run["status"]["phase"], complete(run)["reason"], run["status"]["result"],
            {n: (r["eviction"]["phase"], r["placement"]["phase"], r["placement"].get("actualNodeName"))
             for n, r in rels.items()})


@pytest.mark.parametrize("before", [False, True], ids=["after-write", "before-write"])
def test_killed_at_every_write_and_restarted_reaches_the_same_end(clock: Clock, before: bool) -> None:
    baseline = Cluster(seed_objects(), Clock())
    drive(baseline)
    total = baseline.writes
    assert total >= 8
    for k in range(1, total + 1):
        c = Cluster(seed_objects(), Clock())
        c.kill_at, c.kill_before = k, before
        with pytest.raises(Killed):
            drive(c)
        c.kill_at = None
        drive(c)  # a new reconciler: nothing in memory survives
        assert _end_state(c) == _end_state(baseline), k
        uids = [uid for _, _, uid in c.evictions]
        assert len(uids) == len(set(uids)) == 2, k  # never a pod evicted twice
        journaled = {r["victimPodUID"] for r in c.run("ascend-execute-001")["status"]["relocations"]}
        assert set(uids) <= journaled, k  # never a pod outside the journal


def test_a_restart_between_eviction_and_journal_does_not_evict_the_replacement(clock: Clock) -> None:
    c = Cluster(seed_objects(), clock)
    r = reconciler(c)
    real = c.evict
    calls = 0

    def dies_after_first(namespace: str, name: str, **kw: Any) -> Answer:
        nonlocal calls
        calls += 1
        answer = real(namespace, name, **kw)
        if calls == 1:
            raise Killed()
        return answer

    c.evict = dies_after_first  # type: ignore[method-assign]
    with pytest.raises(Killed):
        r.reconcile_all()
    # the VCJob controller recreated worker-0 under its name; the journal still says Evicting
    assert relocations(c.run("ascend-execute-001"))[W0]["eviction"]["phase"] == "Evicting"
    assert c.pod(W0) is not None
    drive(c)
    assert [n for _, n, _ in c.evictions] == [W0, W1]
    assert complete(c.run("ascend-execute-001"))["reason"] == "ExecutionCompleted"


# ---- serial runs, cooldown, deletion, TTL ------------------------------------------------------------

def test_a_second_execute_waits_for_the_first_then_for_the_cooldown(clock: Clock) -> None:
    objs = seed_objects()
    c = Cluster(objs, clock)
    clock.advance(1)
    second = c.add(execute_run("ascend-execute-002", objs[-1]))
    r = reconciler(c)
    r.reconcile_all()
    assert _phase(c.run("ascend-execute-001")) == "Running"
    assert _phase(c.run("ascend-execute-002")) == "Pending"
    assert complete(c.run("ascend-execute-002"))["reason"] == "AnotherRunActive"
    assert second["metadata"]["name"] == "ascend-execute-002"
    drive(c, r, until=lambda: _phase(c.run("ascend-execute-001")) in st.FINISHED)
    r.reconcile_all()
    waiting = c.run("ascend-execute-002")
    assert complete(waiting)["reason"] == "ExecuteCooldownActive"
    assert _phase(waiting) == "Pending"
    finished = st.parse_time(c.run("ascend-execute-001")["status"]["completionTime"])
    assert finished is not None
    wait = r.reconcile("ascend-execute-002")
    assert wait is not None and abs(finished + SETTINGS.cooldown - clock.t - wait) < 1e-6
    clock.advance(wait)
    r.reconcile_all()
    assert _phase(c.run("ascend-execute-002")) != "Pending"  # planned on the new state
    assert complete(c.run("ascend-execute-002"))["reason"] in ("NoFragmentation", "InsufficientImprovement")


def test_an_unchanged_pending_condition_is_not_rewritten(clock: Clock) -> None:
    objs = seed_objects()
    c = Cluster(objs, clock)
    c.add(execute_run("ascend-execute-002", objs[-1]))
    c.pdb_blocked.add(f"{NS}/{W0}")
    r = reconciler(c)
    r.reconcile_all()
    before = copy.deepcopy(c.run("ascend-execute-002"))
    clock.advance(5)
    r.reconcile_all()
    assert c.run("ascend-execute-002") == before


def test_deleting_a_run_mid_execution_stops_further_evictions(clock: Clock) -> None:
    c = Cluster(seed_objects(), clock)
    real = c.evict

    def delete_after_first(namespace: str, name: str, **kw: Any) -> Answer:
        answer = real(namespace, name, **kw)
        if ("RepackRun", "", "ascend-execute-001") in c.objects:
            c.remove("RepackRun", "ascend-execute-001")
        return answer

    c.evict = delete_after_first  # type: ignore[method-assign]
    drive(c, steps=5)
    assert [n for _, n, _ in c.evictions] == [W0]  # no rollback, no second eviction


def test_ttl_deletes_finished_runs(clock: Clock) -> None:
    c = Cluster(seed_objects(mode="DryRun", ttl=3600), clock)
    r = reconciler(c)
    wait = r.reconcile_all()
    assert _phase(c.run("ascend-execute-001")) == "Succeeded"
    assert wait == 3600
    clock.advance(3599)
    r.reconcile_all()
    assert c.deleted_runs == []
    clock.advance(1)
    r.reconcile_all()
    assert c.deleted_runs == ["ascend-execute-001"]


# ---- DryRun, bad input, failures -------------------------------------------------------------------

def test_a_dry_run_is_planned_once_and_pod_events_never_replan_it(clock: Clock) -> None:
    c = Cluster(seed_objects(mode="DryRun"), clock)
    r = reconciler(c)
    r.reconcile_all()
    run = c.run("ascend-execute-001")
    assert run["status"]["phase"] == "Succeeded" and complete(run)["reason"] == "RepackRecommended"
    written = c.writes
    c.add(pod("unrelated", "ascend-node-02", 0, group=None, ns="other", resource=NPU))
    for _ in range(3):
        r.reconcile_all()
    assert (r.plans, c.writes, c.evictions) == (1, written, [])


def test_an_execute_replans_only_at_its_start(clock: Clock) -> None:
    c = Cluster(seed_objects(), clock)
    c.schedule_mode = "never"
    r = reconciler(c)
    for _ in range(5):
        r.reconcile_all()
        c.add(pod(f"noise-{clock.t}", "ascend-node-02", 0, group=None, ns="other", resource=NPU))
        clock.advance(10)
    assert r.plans == 1


def test_unknown_resource_and_empty_scope_finish_with_a_clear_condition(clock: Clock) -> None:
    unknown = repack_run("unknown", "example.com/none")
    unknown["spec"]["mode"] = "Execute"
    empty = repack_run("empty", NPU, scope={"podGroups": {"include": {"names": ["nowhere/none"]}}})
    empty["spec"]["mode"] = "Execute"
    objs = [o for o in seed_objects() if o["kind"] != "RepackRun"]
    c = Cluster([*objs, unknown], clock)
    drive(c)
    assert complete(c.run("unknown"))["reason"] == "NoFragmentation"
    assert "no node provides example.com/none" in complete(c.run("unknown"))["message"]
    c.add(empty)
    drive(c)
    assert _phase(c.run("empty")) == "Succeeded"
    assert complete(c.run("empty"))["reason"] == "InsufficientImprovement"
    assert c.evictions == []


def test_a_run_the_planner_cannot_read_fails_with_invalid_spec(clock: Clock) -> None:
    bad = repack_run("bad")
    bad["spec"]["goals"] = [{"resource": NPU, "minFragImprovementPercent": 150}]
    c = Cluster([node("n1"), bad], clock)
    drive(c)
    run = c.run("bad")
    assert run["status"]["phase"] == "Failed"
    assert complete(run)["reason"] == "InvalidSpec"
    assert "minFragImprovementPercent" in complete(run)["message"]


def test_an_exception_is_recorded_on_its_run_and_the_others_go_on(clock: Clock) -> None:
    objs = seed_objects(mode="DryRun")
    c = Cluster([*objs, execute_run("second", {**objs[-1], "spec": {**objs[-1]["spec"]}})], clock)
    r = reconciler(c)
    real = r._plan
    calls = 0

    def boom(run: Any) -> Any:
        nonlocal calls
        calls += 1
        if run.name == "ascend-execute-001" and calls < 3:
            raise RuntimeError("solver exploded")
        return real(run)

    r._plan = boom  # type: ignore[method-assign]
    wait = r.reconcile_all()
    failed = c.run("ascend-execute-001")
    cond = st.find_condition(failed["status"], "Reconciled")
    assert cond is not None and cond["status"] == "False" and "solver exploded" in cond["message"]
    assert _phase(c.run("second")) == "Succeeded"
    assert wait is not None and wait > 0
    clock.advance(wait)
    r.reconcile_all()  # fails again, with a longer backoff
    clock.advance(10)
    r.reconcile_all()
    ok = c.run("ascend-execute-001")
    assert _phase(ok) == "Succeeded"
    assert st.find_condition(ok["status"], "Reconciled")["status"] == "True"  # type: ignore[index]


def test_a_replica_that_lost_the_lease_does_not_act(clock: Clock) -> None:
    c = Cluster(seed_objects(), clock)
    leading = [True]
    r = reconciler(c, may_act=lambda: leading[0])
    real = c.patch_repack_run_status

    def lose_after_plan(name: str, status: Mapping[str, Any], resource_version: str) -> dict[str, Any]:
        out = real(name, status, resource_version)
        leading[0] = False
        return out

    c.patch_repack_run_status = lose_after_plan  # type: ignore[method-assign]
    r.reconcile_all()
    assert _phase(c.run("ascend-execute-001")) == "Running"
    assert c.eviction_calls == []


def test_a_conflict_reads_the_run_again_and_keeps_the_other_writers_change(clock: Clock) -> None:
    c = Cluster(seed_objects(), clock)
    c.schedule_mode = "never"
    r = reconciler(c)
    r.reconcile_all()
    server_side = c.objects[("RepackRun", "", "ascend-execute-001")]
    server_side["status"]["conditions"].append({"type": "Audited", "status": "True", "reason": "Ticket",
                                                "message": "change-20260730"})
    server_side["metadata"]["resourceVersion"] = "99999"  # written by someone else; the store has not seen it
    clock.advance(SETTINGS.replacement_deadline + 1)
    r.reconcile_all()
    after = c.run("ascend-execute-001")["status"]
    assert after["phase"] == "Failed"  # the pass went on after the 409
    assert {cond["type"] for cond in after["conditions"]} >= {"Audited", "Complete"}


# ---- the status merge rules --------------------------------------------------------------------------

def test_conditions_keep_their_transition_time_while_their_status_holds() -> None:
    old = [{"type": "Complete", "status": "False", "reason": "AnotherRunActive", "message": "a",
            "lastTransitionTime": "2027-01-01T00:00:00Z"},
           {"type": "Other", "status": "True", "reason": "TheirOwn", "message": ""}]
    same = st.merge_conditions(old, [st.condition("Complete", False, "ExecuteCooldownActive", "b")],
                               "2027-01-02T00:00:00Z", 3)
    assert same[0]["lastTransitionTime"] == "2027-01-01T00:00:00Z" and same[0]["reason"] == "ExecuteCooldownActive"
    assert same[1] == old[1]  # another writer's condition stays
    flipped = st.merge_conditions(old, [st.condition("Complete", True, "ExecutionCompleted", "c")],
                                  "2027-01-02T00:00:00Z", 3)
    assert flipped[0]["lastTransitionTime"] == "2027-01-02T00:00:00Z" and flipped[0]["observedGeneration"] == 3


def test_relocations_merge_by_key_and_never_shrink() -> None:
    old = [{"namespace": "a", "victimPodName": "p", "eviction": {"phase": "Evicted"}, "note": "theirs"},
           {"namespace": "a", "victimPodName": "q", "eviction": {"phase": "Pending"}}]
    merged = st.merge_relocations(old, [{"namespace": "a", "victimPodName": "q", "eviction": {"message": "m"}}])
    assert merged == [old[0], {"namespace": "a", "victimPodName": "q",
                               "eviction": {"phase": "Pending", "message": "m"}}]


@pytest.mark.parametrize("text", ["AnotherRunActive", "no spaces allowed", "9lives", "a-b"])
def test_reasons_always_match_the_metav1_pattern(text: str) -> None:
    assert st.REASON_RE.match(st.reason(text))


# ---- leader election (the Lease's rules; over HTTP in tests/controller/test_controller_e2e.py) --------------------

class Leases:
    """One Lease with resourceVersion preconditions; ``stale_reads`` answers None to the next gets."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.rv = itertools.count(1)
        self.stale_reads = 0

    def get_lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        if self.stale_reads:
            self.stale_reads -= 1
            return None
        return copy.deepcopy(self.lease)

    def create_lease(self, namespace: str, name: str, spec: Mapping[str, Any],
                     annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
        if self.lease is not None:
            raise ConflictError("exists")
        self.lease = {"metadata": {"namespace": namespace, "name": name, "resourceVersion": str(next(self.rv)),
                                   "annotations": dict(annotations or {})},
                      "spec": dict(spec)}
        return copy.deepcopy(self.lease)

    def update_lease(self, lease: Mapping[str, Any], spec: Mapping[str, Any],
                     annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
        """As a PUT: the annotations are what the body carries (the read ones unless given)."""
        assert self.lease is not None
        if lease["metadata"]["resourceVersion"] != self.lease["metadata"]["resourceVersion"]:
            raise ConflictError("changed")
        kept = dict(annotations) if annotations is not None else dict(lease["metadata"].get("annotations") or {})
        self.lease = {"metadata": {**self.lease["metadata"], "resourceVersion": str(next(self.rv)),
                                   "annotations": kept},
                      "spec": dict(spec)}
        return copy.deepcopy(self.lease)


def test_of_two_replicas_racing_for_a_new_lease_one_leads(clock: Clock) -> None:
    from optplan.controller.leader import LeaderElector

    leases = Leases()
    a = LeaderElector(leases, "ns", "lease", "a", clock=clock)
    b = LeaderElector(leases, "ns", "lease", "b", clock=clock)
    assert a.tick()
    leases.stale_reads = 1  # b read before a created it: its create gets 409
    assert not b.tick()
    for _ in range(5):
        clock.advance(2)
        assert a.tick() and not b.tick()
    assert leases.lease is not None and leases.lease["spec"]["holderIdentity"] == "a"
    a.release()  # a clean shutdown hands over at once
    assert not a.leading()
    assert b.tick()
    assert leases.lease["spec"]["holderIdentity"] == "b" and leases.lease["spec"]["leaseTransitions"] == 1


def test_the_live_snapshot_is_rebuilt_from_parsed_objects_and_equals_a_fresh_load(clock: Clock) -> None:
    from optplan.adapters.kubefile import load_objects

    c = Cluster(seed_objects(), clock)
    r = reconciler(c)
    first = r.snapshot()
    assert r.snapshot() is first  # nothing the planners read changed: not rebuilt
    moved = copy.deepcopy(c.pod(W0))
    assert moved is not None
    moved["spec"]["nodeName"] = "ascend-node-02"
    c.add(moved)
    c.add(node("ascend-node-04", 8, resource=NPU))
    again = r.snapshot()
    assert again is not first
    assert again == load_objects(c.store.snapshot_objects()).snapshot
    assert again.pods[f"{NS}/{W0}"].node_name == "ascend-node-02"
    assert len(r._parsed) == len(c.store.snapshot_objects())  # the cache holds today's objects only


def test_an_eviction_the_api_keeps_refusing_with_an_error_is_rejected_at_the_deadline(clock: Clock) -> None:
    from optplan.errors import KubeError

    c = Cluster(seed_objects(), clock)

    def forbidden(namespace: str, name: str, **kw: Any) -> Answer:
        raise KubeError(f'forbidden: cannot create pods "{namespace}/{name}" eviction (403)')

    c.evict = forbidden  # type: ignore[method-assign]
    drive(c, steps=60)
    run = c.run("ascend-execute-001")
    rels = relocations(run)
    assert rels[W0]["eviction"]["phase"] == "Rejected" and "forbidden" in rels[W0]["eviction"]["message"]
    assert run["status"]["phase"] == "Failed" and complete(run)["reason"] == "ExecutionGoalNotReached"


# ---- a 409 from the Eviction call; a replacement no node could be suggested for ----------------------

def test_a_409_that_is_not_the_uid_precondition_is_asked_again_not_taken_for_evicted(clock: Clock) -> None:
    c = Cluster(seed_objects(), clock)
    real = c.evict
    conflicts = 0

    def conflict_once(namespace: str, name: str, **kw: Any) -> Answer:
        nonlocal conflicts
        if name == W0 and conflicts == 0:  # the budget was updated concurrently: the pod is untouched
            conflicts += 1
            return Answer(409, 'Operation cannot be fulfilled on poddisruptionbudgets.policy "training-pdb": '
                               "the object has been modified; please apply your changes to the latest version")
        return real(namespace, name, **kw)

    c.evict = conflict_once  # type: ignore[method-assign]
    drive(c, steps=40)
    run = c.run("ascend-execute-001")
    assert [n for _, n, _ in c.evictions] == [W0, W1]  # W0 really evicted, on the second ask
    assert c.pod_reads == 1  # the 409 made it read the pod: the same UID, not evicted yet
    assert complete(run)["reason"] == "ExecutionCompleted"


def test_a_409_from_the_uid_precondition_reads_the_pod_and_counts_as_evicted(clock: Clock) -> None:
    c = Cluster(seed_objects(), clock)
    real = c.evict

    def replaced_behind_the_cache(namespace: str, name: str, **kw: Any) -> Answer:
        if name == W0 and c.pod(W0) is not None and c.pod(W0)["metadata"]["uid"] == kw["uid"]:  # type: ignore[index]
            new = copy.deepcopy(c.objects.pop(("Pod", NS, W0)))  # the VCJob controller replaced W0 under its
            new["metadata"]["uid"] = "uid-replacement"  # name; this controller's cache has not seen it yet
            c.objects[("Pod", NS, W0)] = new
        return real(namespace, name, **kw)

    c.evict = replaced_behind_the_cache  # type: ignore[method-assign]
    reconciler(c).reconcile_all()
    rel = relocations(c.run("ascend-execute-001"))[W0]
    assert rel["eviction"]["phase"] == "Evicted" and "another UID" in rel["eviction"]["message"]
    assert c.pod_reads == 1 and [n for _, n, _ in c.evictions] == [W1]  # the new pod was never evicted


def test_a_replacement_without_a_suggestion_is_nominated_once_the_cluster_changes(clock: Clock) -> None:
    c = Cluster(seed_objects(), clock)
    c.schedule_mode = "never"
    real = c.evict

    def fill_receivers(namespace: str, name: str, **kw: Any) -> Answer:
        answer = real(namespace, name, **kw)
        for n in ("ascend-node-02", "ascend-node-03"):  # others took the room meanwhile
            if c.pod(f"filler-{n}", "other") is None:
                c.add(pod(f"filler-{n}", n, c.free(n), group=None, ns="other", resource=NPU))
        return answer

    c.evict = fill_receivers  # type: ignore[method-assign]
    r = reconciler(c)
    r.reconcile_all()
    clock.advance(5)
    r.reconcile_all()
    assert {x["placement"]["phase"] for x in relocations(c.run("ascend-execute-001")).values()} == {"Scheduling"}
    assert c.nominations == []
    c.remove("Pod", "filler-ascend-node-02", "other")  # room again on W0's planned node
    c.remove("Pod", "filler-ascend-node-03", "other")
    c.schedule_mode = "nominated"
    drive(c, r)
    run = c.run("ascend-execute-001")
    assert sorted(c.nominations) == [(NS, W0, "ascend-node-02"), (NS, W1, "ascend-node-03")]
    assert {n: x["placement"]["phase"] for n, x in relocations(run).items()} == {W0: "Bound", W1: "Bound"}
    assert complete(run)["reason"] == "ExecutionCompleted"


# ---- liveness while a plan blocks the loop ------------------------------------------------------------

@pytest.mark.parametrize(("plan_takes", "alive"), [(100.0, True), (200.0, False)])
def test_healthz_stays_up_through_a_plan_within_its_deadline_and_fails_past_it(
        clock: Clock, monkeypatch: pytest.MonkeyPatch, plan_takes: float, alive: bool) -> None:
    from optplan.controller import reconcile
    from optplan.controller.metrics import Metrics

    metrics = Metrics(stale_after=60, clock=clock)
    seen: list[tuple[bool, str]] = []
    real = reconcile.plan_run

    def slow(*a: Any, **kw: Any) -> Any:
        clock.advance(plan_takes)  # a plan at scale; stale_after 60 + plan_deadline(5 s) = 60 + 75 s
        seen.append(metrics.healthy())
        return real(*a, **kw)

    monkeypatch.setattr(reconcile, "plan_run", slow)
    c = Cluster(seed_objects(mode="DryRun"), clock)
    reconciler(c, watchdog=metrics).reconcile_all()
    assert seen[0][0] is alive, seen
    assert alive or "overran" in seen[0][1]
    assert metrics.healthy() == (True, "ok")  # the plan ended: the loop beat again
    clock.advance(61)
    assert metrics.healthy()[0] is False  # no progress for stale_after



# ---- the cooldown outlives the run and the process ------------------------------------------------------

def test_the_cooldown_survives_the_runs_ttl_deletion_a_restart_and_the_leases_renewals(clock: Clock) -> None:
    from optplan.controller.leader import ExecuteRecord, LeaderElector

    objs = seed_objects(ttl=60)  # deleted a minute after it finishes: far less than the 600 s cooldown
    c = Cluster(objs, clock)
    leases = Leases()
    elector = LeaderElector(leases, "optplan-system", "optplan-controller", "a", clock=clock)
    assert elector.tick()
    record = ExecuteRecord(leases, "optplan-system", "optplan-controller")
    drive(c, make=lambda: reconciler(c, record=record), steps=40, until=lambda: bool(c.deleted_runs))
    assert c.deleted_runs == ["ascend-execute-001"] and len(c.evictions) == 2
    clock.advance(2)
    assert elector.tick()  # the elector renews: the record stays
    known = record.last()
    assert known is not None and known[1] == "ascend-execute-001"
    c.add(execute_run("ascend-execute-002", objs[-1]))
    r = reconciler(c, record=ExecuteRecord(leases, "optplan-system", "optplan-controller"))  # a restart
    wait = r.reconcile_all()
    waiting = c.run("ascend-execute-002")
    assert _phase(waiting) == "Pending" and complete(waiting)["reason"] == "ExecuteCooldownActive"
    assert "ascend-execute-001" in complete(waiting)["message"]
    assert wait is not None and abs(known[0] + SETTINGS.cooldown - clock.t - wait) < 1
    clock.advance(wait)
    r.reconcile_all()
    assert _phase(c.run("ascend-execute-002")) != "Pending"


def test_a_finished_run_not_yet_recorded_is_recorded_by_the_next_gate(clock: Clock) -> None:
    from optplan.controller.leader import ExecuteRecord

    objs = seed_objects()
    c = Cluster(objs, clock)
    drive(c)  # finished by a controller without a record (or one that died before writing it)
    leases = Leases()
    c.add(execute_run("ascend-execute-002", objs[-1]))
    reconciler(c, record=ExecuteRecord(leases, "optplan-system", "optplan-controller")).reconcile_all()
    assert complete(c.run("ascend-execute-002"))["reason"] == "ExecuteCooldownActive"
    assert leases.lease is not None
    finished = c.run("ascend-execute-001")["status"]["completionTime"]
    assert leases.lease["metadata"]["annotations"] == {"repack.volcano.sh/last-execute-completion-time": finished,
                                                       "repack.volcano.sh/last-execute-run": "ascend-execute-001"}


# ---- node by node: a node's evictions wait for the replacements of the nodes before it ----------------

def two_nodes_to_free() -> list[dict[str, Any]]:
    """x on n-a and y on n-b, each 2 cards of 8; n-c and n-d half full: the plan frees n-a, then n-b."""
    from tests.builders import podgroup

    objs = [node(n, 8, resource=NPU) for n in ("n-a", "n-b", "n-c", "n-d")]
    objs += [podgroup("pg-x", ns="t"), podgroup("pg-y", ns="t")]
    objs += [pod("x", "n-a", 2, group="pg-x", ns="t", resource=NPU),
             pod("y", "n-b", 2, group="pg-y", ns="t", resource=NPU),
             pod("fc", "n-c", 4, group=None, ns="o", resource=NPU),
             pod("fd", "n-d", 4, group=None, ns="o", resource=NPU)]
    run = repack_run("r", NPU)
    run["spec"]["mode"] = "Execute"
    return [*objs, run]


def test_the_next_nodes_evictions_wait_until_the_previous_nodes_replacements_are_placed(clock: Clock) -> None:
    c = Cluster(two_nodes_to_free(), clock)
    real = c.evict
    x_placed_at_each_eviction: list[tuple[str, str | None]] = []

    def watching(namespace: str, name: str, **kw: Any) -> Answer:
        x = c.pod("x", "t")
        x_placed_at_each_eviction.append((name, x["spec"].get("nodeName") if x is not None else None))
        return real(namespace, name, **kw)

    c.evict = watching  # type: ignore[method-assign]
    drive(c)
    run = c.run("r")
    assert run["status"]["plan"]["freedNodes"] == ["n-a", "n-b"]
    assert x_placed_at_each_eviction == [("x", "n-a"), ("y", "n-c")]  # y only once x's replacement was bound
    assert complete(run)["reason"] == "ExecutionCompleted"


def test_a_replacement_that_timed_out_stops_the_evictions_of_later_nodes(clock: Clock) -> None:
    c = Cluster(two_nodes_to_free(), clock)
    c.schedule_mode = "never"
    drive(c, steps=40)
    run = c.run("r")
    rels = relocations(run)
    assert [n for _, n, _ in c.evictions] == ["x"]
    assert rels["x"]["placement"]["phase"] == "TimedOut"
    assert (rels["y"]["eviction"]["phase"], rels["y"]["placement"]["phase"]) == ("Skipped", "Skipped")
    assert "not placed in time" in rels["y"]["eviction"]["message"]
    assert run["status"]["phase"] == "Failed" and complete(run)["reason"] == "ExecutionGoalNotReached"


def test_a_nomination_journal_write_whose_answer_is_lost_is_decided_from_what_the_server_holds(
        clock: Clock) -> None:
    """The status write that journals replacements as Nominated is carried out by the server but answered
    with an error (a 500, a lost connection), and the scheduler binds every pending pod before the next pass.
    A write whose answer was lost may or may not have happened: the controller reads the run back and tells
    the pods the server's journal names, at once. The run never ends with a selectedNodeName that no pod was
    told (seed 000: each replacement lands on its planned node)."""
    c = Cluster(seed_objects(), clock)
    real = c.patch_repack_run_status
    lost: list[int] = []

    def answer_lost(name: str, status: Mapping[str, Any], resource_version: str) -> dict[str, Any]:
        out = real(name, status, resource_version)  # carried out
        if not lost and any((r.get("placement") or {}).get("phase") == st.PL_NOMINATED
                            for r in status.get("relocations") or []):
            lost.append(c.writes)
            raise KubeError("cannot patch repackruns \"ascend-execute-001\" status: the API server answered 500")
        return out

    c.patch_repack_run_status = answer_lost  # type: ignore[method-assign]
    drive(c)
    assert lost, "no journal write of a nomination was made"
    run = c.run("ascend-execute-001")
    told = {(ns, name): node for ns, name, node in c.nominations}
    for name, rel in relocations(run).items():
        selected = rel["placement"].get("selectedNodeName")
        if selected:  # the journal's claim: the replacement was told where to go
            assert told.get((NS, rel["placement"]["replacementPodName"])) == selected, (name, rel, told)
    assert run["status"]["phase"] == "Succeeded" and complete(run)["reason"] == "ExecutionCompleted"
