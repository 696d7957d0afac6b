"""Faults on the real cluster (issue 25 §4): what the seed's Execute journal and Kubernetes promise when
something goes wrong mid-run, each fault in its own namespace, on its own KWOK nodes, with its own RepackRun
(deleted afterwards with the namespace and the nodes).

Every scenario is the same small world: VCJobs whose workers (1 ``nvidia.com/gpu`` each) sit on nearly empty
"victim" nodes, and "target" nodes holding a filler pod (outside the run's scope) that leaves room for one
worker each; an Execute RepackRun scoped to those nodes and jobs moves the workers onto the targets and frees
the victim nodes. Volcano's job controller recreates an evicted worker under the same name with a new UID;
vc-scheduler binds it. optplan's controller runs as a child process with the ServiceAccount's token.
"""

from __future__ import annotations

import json
import re
import signal
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.realcluster.cluster import CODE, WAIT, Cluster, Proc
from tests.realcluster.conftest import SA

pytestmark = pytest.mark.realcluster
GPU = "nvidia.com/gpu"
FINISHED = ("Succeeded", "Failed")
CONTROLLER_USER = f"system:serviceaccount:{SA[0]}:{SA[1]}"
CORE = ("etcd", "kube-apiserver", "kube-controller-manager", "kwok", "vc-controller-manager", "vc-scheduler")
# The optplan CLI, SIGKILLing itself as soon as the API server has accepted its first eviction: before the
# controller can journal it (status.relocations[].eviction.phase stays Evicting).
DIES_AFTER_EVICTION = """
import os, signal, sys
from optplan.adapters.kube import KubeClient
real = KubeClient.evict
def evict(self, *args, **kwargs):
    answer = real(self, *args, **kwargs)
    if answer.status in (200, 201):
        os.kill(os.getpid(), signal.SIGKILL)
    return answer
KubeClient.evict = evict
from optplan.cli import main
sys.exit(main())
"""


@dataclass
class World:
    """One fault's namespace, nodes, jobs and RepackRun."""

    c: Cluster
    ns: str
    victims: dict[str, str] = field(default_factory=dict)  # job name -> victim node
    targets: list[str] = field(default_factory=list)
    procs: list[Proc] = field(default_factory=list)

    @property
    def run(self) -> str:
        return self.ns

    def pods(self) -> list[dict[str, Any]]:
        """The namespace's pods, read as the admin (urllib: fast enough to poll every 50 ms)."""
        return list(self.c.get(f"/api/v1/namespaces/{self.ns}/pods")["items"])

    def workers(self) -> dict[str, dict[str, Any]]:
        """Worker pods by UID."""
        return {p["metadata"]["uid"]: p for p in self.pods()
                if "volcano.sh/job-name" in p["metadata"].get("labels", {})}

    def status(self) -> dict[str, Any]:
        return dict(self.c.get(f"/apis/repack.volcano.sh/v1alpha1/repackruns/{self.run}").get("status") or {})

    def controller(self, name: str, *extra: str, sa: Path, deadline: int = 60, code: str = CODE) -> Proc:
        proc = self.c.spawn(f"{self.ns}-{name}", [  # metrics on a port the kernel picks at its bind: no race
            sys.executable, "-c", code, "controller", "--kubeconfig", str(sa), "-v",
            "--metrics-address", "127.0.0.1:0", "--cooldown", "0",
            "--eviction-deadline", str(deadline), "--replacement-deadline", "90", *extra])
        self.procs.append(proc)
        return proc

    def ready(self, proc: Proc) -> bool:
        """The controller answers its readiness probe (its caches synced; a standby too), on the address its
        log names."""
        found = re.search(r"metrics on (http://\S+)", proc.log.read_text(encoding="utf-8", errors="replace"))
        if found is None:
            return False
        with urllib.request.urlopen(f"{found.group(1)}/readyz", timeout=30) as r:
            return bool(r.status == 200)

    def start_run(self, **spec: Any) -> None:
        self.c.apply([{"apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackRun",
                       "metadata": {"name": self.run, "labels": {"fault": self.ns}},
                       "spec": {"mode": "Execute", "goals": [{"resource": GPU}],
                                "scope": {"podGroups": {"include": {"selector": {"matchLabels": {"fault": self.ns}}}},
                                          "nodes": {"include": {"selector": {"matchLabels": {"fault": self.ns}}}}},
                                "eviction": {"gracePeriodSeconds": 1}, **spec}}])

    def wait_finished(self, timeout: float = WAIT) -> dict[str, Any]:
        self.c.wait_for(f"RepackRun {self.run} finished", lambda: self.status().get("phase") in FINISHED,
                        timeout=timeout)
        return self.status()

    def post(self, path: str, body: dict[str, Any]) -> Any:
        req = urllib.request.Request(self.c.server + path, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, context=self.c.ssl_context(), timeout=10) as r:
            return json.loads(r.read())


def _job(ns: str, name: str, replicas: int) -> dict[str, Any]:
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": name, "namespace": ns, "labels": {"fault": ns}},
            "spec": {"schedulerName": "volcano", "queue": "default", "minAvailable": replicas,
                     "tasks": [{"name": "worker", "replicas": replicas, "template": {
                         "metadata": {"labels": {"app": name}},
                         "spec": {"restartPolicy": "OnFailure", "nodeSelector": {"fault": ns},
                                  "containers": [{"name": "trainer", "image": "trainer:1", "resources": {
                                      "requests": {GPU: "1"}, "limits": {GPU: "1"}}}]}}}]}}


def _filler(ns: str, node: str, cards: int) -> dict[str, Any]:
    res = {"requests": {GPU: str(cards)}, "limits": {GPU: str(cards)}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"filler-{node}", "namespace": ns},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "serve:1", "resources": res}]}}


@contextmanager
def world(c: Cluster, ns: str, jobs: dict[str, int], targets: int) -> Iterator[World]:
    """Jobs (name -> workers, all of a job on one victim node of its own) and ``targets`` nodes with room for
    one worker each; everything deleted afterwards, the controllers ended first (by their PIDs)."""
    w = World(c, ns)
    c.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}])
    c.wait_for(f"{ns}'s default ServiceAccount", lambda: c.kubectl(
        "get", "serviceaccount", "default", "-n", ns, check=False).returncode == 0)
    try:
        victim_nodes = [f"{ns}-v{i}" for i in range(len(jobs))]
        w.targets = [f"{ns}-t{i}" for i in range(targets)]
        for node in victim_nodes + w.targets:
            c.add_node(node, gpus=8, labels={"fault": ns})
        c.kubectl("cordon", *victim_nodes, *w.targets)
        for (job, replicas), node in zip(jobs.items(), victim_nodes, strict=True):
            c.kubectl("uncordon", node)
            c.apply([_job(ns, job, replicas)])
            c.wait_for(f"{job} Running on {node}", lambda job=job, node=node, n=replicas: len(
                ps := [p for p in w.pods() if p["metadata"]["labels"].get("volcano.sh/job-name") == job]) == n
                and all(p["status"].get("phase") == "Running" and p["spec"].get("nodeName") == node for p in ps))
            c.kubectl("cordon", node)
            w.victims[job] = node
        c.apply([_filler(ns, node, 7) for node in w.targets])
        c.wait_for("the fillers Running", lambda: all(
            p["status"].get("phase") == "Running" for p in w.pods() if p["metadata"]["name"].startswith("filler")))
        c.kubectl("uncordon", *victim_nodes, *w.targets)
        yield w
    finally:
        for proc in w.procs:
            c.end(proc)
        c.kubectl("delete", "repackrun", w.run, "--ignore-not-found", check=False)
        # the namespace (its pods) gone before the nodes: a pod still bound to a deleted node would make every
        # later snapshot of the cluster unreadable until the pod GC removes it
        c.kubectl("delete", "namespace", ns, "--ignore-not-found", "--timeout=120s", check=False, timeout=150)
        for node in list(w.victims.values()) + w.targets:
            c.kubectl("delete", "node", node, "--ignore-not-found", check=False)


def _gone(uid: str, now: dict[str, dict[str, Any]]) -> bool:
    """The pod of this UID is deleted or being deleted (what an eviction does)."""
    return uid not in now or "deletionTimestamp" in now[uid]["metadata"]


def test_a_pdb_at_zero_at_eviction_time_rejects_the_relocation(real_cluster: Cluster, sa_kubeconfig: Path) -> None:
    """Seed 000 步骤六 / Kubernetes' Eviction API: a victim whose PodDisruptionBudget allows no disruption
    when it is asked is refused with 429 ("would violate the pod's disruption budget"); optplan asks again
    until its ``--eviction-deadline`` and then records the relocation ``Rejected`` naming the budget; the
    run ends Failed (ExecutionGoalNotReached) and the covered victim is never evicted.

    The planner honours budgets, so the budget must turn to 0 after the plan: two victim nodes are freed one
    after the other (a node's evictions wait for the previous node's replacements to be bound); as soon as
    the first victim is evicted, a PDB with minAvailable 1 is created over the other job's only worker.
    vc-scheduler is stopped meanwhile, so that the first replacement (and with it the second node's eviction)
    waits until the disruption controller has set the budget at 0, however slow the machine."""
    deadline = 8
    with world(real_cluster, "fault-pdb", {"pdb-a": 1, "pdb-b": 1}, targets=2) as w:
        before = w.workers()
        by_job = {p["metadata"]["labels"]["volcano.sh/job-name"]: uid for uid, p in before.items()}
        w.controller("controller", sa=sa_kubeconfig, deadline=deadline)
        real_cluster.stop_scheduler()
        try:
            w.start_run()
            first = ""
            end = time.monotonic() + WAIT
            while not first and time.monotonic() < end:
                now = w.workers()
                first = next((job for job, uid in by_job.items() if _gone(uid, now)), "")
                time.sleep(0.05)
            assert first, f"no eviction within {WAIT:.0f} s: {w.status()}"
            [covered] = [job for job in by_job if job != first]
            guard = f"guard-{covered}"
            w.post(f"/apis/policy/v1/namespaces/{w.ns}/poddisruptionbudgets",
                   {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                    "metadata": {"name": guard, "namespace": w.ns},
                    "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": covered}}}})

            def at_zero() -> bool:
                pdb = w.c.get(f"/apis/policy/v1/namespaces/{w.ns}/poddisruptionbudgets/{guard}")
                st = pdb.get("status") or {}
                return bool(st.get("observedGeneration") == pdb["metadata"]["generation"]
                            and st.get("currentHealthy") == 1 and st.get("disruptionsAllowed") == 0)

            w.c.wait_for(f"{guard}'s status: no disruption allowed", at_zero)
        finally:
            real_cluster.start_scheduler()
        status = w.wait_finished()
        print(f"{w.run}: {status['phase']} (eviction deadline {deadline} s)")
        print(json.dumps(status.get("relocations"), indent=1))
        assert status["phase"] == "Failed", status["conditions"]
        reasons = {c["reason"] for c in status["conditions"]}
        assert "ExecutionGoalNotReached" in reasons, status["conditions"]
        rel = {r["victimPodUID"]: r for r in status["relocations"]}
        refused = rel[by_job[covered]]
        assert refused["eviction"]["phase"] == "Rejected", refused
        assert f"guard-{covered}" in refused["eviction"]["message"], refused
        assert "disruption budget" in refused["eviction"]["message"], refused
        text = json.dumps(status["conditions"])
        assert f"guard-{covered}" in text, status["conditions"]  # the verdict names the budget
        assert rel[by_job[first]]["eviction"]["phase"] == "Evicted"
        # the covered worker is the same pod as before, never evicted
        assert not _gone(by_job[covered], w.workers())
        # asked again until the deadline, then no more: the deadline runs from the eviction's journaled start
        # (whole seconds), the API server's audit log times the asks; the last, refused at or after the deadline,
        # is the one journaled Rejected
        name = before[by_job[covered]]["metadata"]["name"]
        asked = [r for r in real_cluster.removals(w.ns) if r.user == CONTROLLER_USER and r.pod == name]
        assert asked and all(r.eviction and r.code == 429 for r in asked), asked
        start = _micro(refused["eviction"]["startTime"])
        last = asked[-1].at - start
        print(f"{len(asked)} evictions of {name} refused, the last {last:.1f} s after the eviction's start")
        assert len(asked) >= 2 and asked[0].at >= start and deadline <= last < deadline + 20, (last, asked)


@dataclass
class Seen:
    """Every worker pod seen while polling: UID -> name, and the UIDs seen deleted or terminating."""

    names: dict[str, str] = field(default_factory=dict)
    gone: set[str] = field(default_factory=set)

    def look(self, w: World) -> dict[str, dict[str, Any]]:
        now = w.workers()
        for uid, p in now.items():
            self.names[uid] = p["metadata"]["name"]
        self.gone |= {uid for uid in self.names if _gone(uid, now)}
        return now


def _watch(w: World, seen: Seen, until: Any, timeout: float) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        seen.look(w)
        if until():
            return
        time.sleep(0.05)
    raise TimeoutError(f"{w.run}: not reached in {timeout} s: {w.status()}")


def _evicting(w: World) -> bool:
    return any(r["eviction"]["phase"] == "Evicting" for r in w.status().get("relocations", []))


def _assert_each_victim_evicted_once(w: World, seen: Seen, original: set[str]) -> dict[str, Any]:
    """The journal and the API server agree, the server's audit log the judge (``Cluster.removals``): every
    eviction the controller's ServiceAccount asked for names a journaled victim's UID in its preconditions,
    it deletes no pod, each victim was evicted once and is journaled Evicted; every original worker that went
    is such a victim; each victim's name has a live pod again at the end (its replacement).

    A replacement may go too (seen once under load, before this log said who), never by optplan; who removed
    it is printed, and each name is waited for until it has a live pod again."""
    status = w.status()
    journal = {r["victimPodUID"]: r for r in status["relocations"]}
    removals = w.c.removals(w.ns)
    ours = [r for r in removals if r.user == CONTROLLER_USER]
    assert ours and all(r.eviction and r.uid for r in ours), ours  # UID-guarded evictions only
    evicted = [r.uid for r in ours if r.done]
    assert len(evicted) == len(set(evicted)), evicted  # each victim evicted once
    assert set(evicted) <= set(journal) & original, (evicted, status["relocations"])
    assert all(journal[uid]["eviction"]["phase"] == "Evicted" for uid in evicted), status["relocations"]
    assert seen.gone & original <= set(evicted), (seen.gone & original, evicted)
    for uid in sorted(seen.gone - original):  # a replacement that went: by whom
        name = seen.names[uid]
        theirs = [(r.user, "evict" if r.eviction else r.verb, r.code) for r in removals
                  if r.pod == name and r.user != CONTROLLER_USER]
        print(f"replacement {name} ({uid}) went; removals of that name asked by others, in order: {theirs}")
    def replaced() -> bool:  # a replacement that went is made again by Volcano's job controller
        now = w.workers()
        return {seen.names[uid] for uid in evicted} <= {p["metadata"]["name"] for uid, p in now.items()
                                                         if not _gone(uid, now)}

    w.c.wait_for(f"a live pod under each evicted name {sorted(seen.names[uid] for uid in evicted)}", replaced)
    return status


def test_a_controller_killed_after_an_eviction_resumes_without_evicting_twice(
        real_cluster: Cluster, sa_kubeconfig: Path) -> None:
    """Seed 000's journal (each eviction journaled ``Evicting`` before the call, ``Evicted`` after; a pass
    finding ``Evicting`` reads the pod; the call carries ``preconditions.uid``): a controller killed between
    an eviction's answer and its journal entry, then started again, finishes the run with no pod evicted
    twice and none outside the journal.

    The first controller SIGKILLs itself as soon as the real API server has accepted its first eviction (the
    client's ``evict`` wrapped in the child process), so the kill lands exactly in that window; the second is
    the plain CLI. The API server's state is the judge: the UIDs that went are the journal's victims, one per
    name, and the replacements Volcano made under the same names keep their UIDs to the end."""
    with world(real_cluster, "fault-kill", {"kill-job": 2}, targets=2) as w:
        seen = Seen()
        original = set(seen.look(w))
        first = w.controller("first", sa=sa_kubeconfig, code=DIES_AFTER_EVICTION)
        w.start_run()
        started = time.monotonic()
        _watch(w, seen, lambda: first.popen.poll() is not None, WAIT)
        assert first.popen.returncode == -signal.SIGKILL, real_cluster.tail(first.name)
        killed = time.monotonic()
        journal = [(r["victimPodName"], r["eviction"]["phase"]) for r in w.status()["relocations"]]
        went = sorted(seen.names[u] for u in seen.gone)
        print(f"killed {killed - started:.1f} s after the run was created; journal then: {journal}; "
              f"pods gone then: {went}")
        assert ("kill-job-worker-0", "Evicting") in journal  # the answer came, the journal never heard it
        w.controller("second", sa=sa_kubeconfig)
        _watch(w, seen, lambda: w.status().get("phase") in FINISHED, WAIT)
        print(f"finished {time.monotonic() - killed:.1f} s after the restart")
        status = _assert_each_victim_evicted_once(w, seen, original)
        print(json.dumps(status["relocations"], indent=1))
        assert status["phase"] == "Succeeded", status["conditions"]
        assert seen.gone == original  # both workers moved, each exactly once


def _micro(text: str) -> float:
    """A metav1.Time or MicroTime (``2026-07-30T10:00:00Z``, ``...00.000000Z``) in epoch seconds."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _lease_rbac(w: World, lease: str) -> None:
    """deploy/30-leader-election.yaml's Role and RoleBinding, in the fault's namespace for its own Lease."""
    meta = {"name": "optplan-fault-lease", "namespace": w.ns}
    w.c.apply([
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta,
         "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
                   {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": [lease],
                    "verbs": ["get", "update"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta,
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": meta["name"]},
         "subjects": [{"kind": "ServiceAccount", "name": SA[1], "namespace": SA[0]}]}])


def test_the_standby_replica_takes_the_lease_and_finishes_the_run(real_cluster: Cluster,
                                                                   sa_kubeconfig: Path) -> None:
    """Leader election on a real coordination.k8s.io Lease (two replicas, ``--leader-elect``, as
    deploy/40-deployment.yaml runs them): the leader dies mid-run (SIGKILL right after the API server
    accepted its first eviction, before its journal entry), the standby takes the Lease once it has not
    been renewed for the lease duration (15 s), resumes from the journal and finishes the run; no pod is
    evicted twice, none outside the journal."""
    lease = "fault-leader"
    with world(real_cluster, "fault-leader", {"leader-job": 2}, targets=2) as w:
        _lease_rbac(w, lease)
        elect = ("--leader-elect", "--lease-namespace", w.ns, "--lease-name", lease)

        def holder() -> str:
            got = w.c.get(f"/apis/coordination.k8s.io/v1/namespaces/{w.ns}/leases/{lease}")
            return str(got["spec"].get("holderIdentity") or "")

        seen = Seen()
        original = set(seen.look(w))
        leader = w.controller("replica-a", *elect, "--identity", "replica-a", sa=sa_kubeconfig,
                              code=DIES_AFTER_EVICTION)
        w.c.wait_for("replica-a holds the Lease", lambda: holder() == "replica-a")
        standby = w.controller("replica-b", *elect, "--identity", "replica-b", sa=sa_kubeconfig)
        # the standby runs (its elector started before its caches synced) while replica-a holds the Lease
        w.c.wait_for("replica-b ready", lambda: w.ready(standby))
        assert holder() == "replica-a" and standby.popen.poll() is None
        w.start_run()
        _watch(w, seen, lambda: leader.popen.poll() is not None, WAIT)
        assert leader.popen.returncode == -signal.SIGKILL, real_cluster.tail(leader.name)
        died = time.monotonic()
        last = w.c.get(f"/apis/coordination.k8s.io/v1/namespaces/{w.ns}/leases/{lease}")["spec"]
        assert last["holderIdentity"] == "replica-a", last  # no one takes it for the lease duration
        journal = [(r["victimPodName"], r["eviction"]["phase"]) for r in w.status()["relocations"]]
        print(f"leader died; journal then: {journal}")
        w.c.wait_for("replica-b holds the Lease", lambda: holder() == "replica-b")
        took_over = time.monotonic() - died
        taken = w.c.get(f"/apis/coordination.k8s.io/v1/namespaces/{w.ns}/leases/{lease}")["spec"]
        _watch(w, seen, lambda: w.status().get("phase") in FINISHED, WAIT)
        # the replicas' own clock (one machine): replica-a's last renewal to replica-b's acquisition
        gap = _micro(taken["acquireTime"]) - _micro(last["renewTime"])
        print(f"replica-b took the Lease {gap:.1f} s after replica-a's last renewal ({took_over:.1f} s after "
              f"the leader was seen dead); the run finished {time.monotonic() - died:.1f} s after")
        status = _assert_each_victim_evicted_once(w, seen, original)
        assert status["phase"] == "Succeeded", status["conditions"]
        assert seen.gone >= original
        assert taken["leaseTransitions"] == last["leaseTransitions"] + 1, (last, taken)
        assert 15 <= gap < 45, gap  # the lease duration (15 s) after the last renewal, then at the next retry
        assert "evict" in real_cluster.tail(standby.name, 400).lower()  # the standby did the rest


BROKEN: dict[str, tuple[dict[str, Any], str]] = {
    # name: (spec, what kubectl's stderr must say)
    "fault-bad-mode": ({"mode": "Sometimes", "goals": [{"resource": GPU}]},
                       'spec.mode: Unsupported value: "Sometimes"'),
    "fault-no-goals": ({"mode": "DryRun"}, "spec.goals: Required value"),
    "fault-bad-ttl": ({"mode": "DryRun", "goals": [{"resource": GPU}], "ttlSecondsAfterFinished": -1},
                      "spec.ttlSecondsAfterFinished: Invalid value: -1"),
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_a_repackrun_the_schema_refuses_is_422_and_kubectl_names_the_field(real_cluster: Cluster,
                                                                           sa_kubeconfig: Path, name: str) -> None:
    """The shipped CRD's OpenAPI schema on the real API server: ``kubectl apply`` of a broken RepackRun is
    answered 422 Unprocessable Entity (``-v=6`` logs the response code), kubectl exits non-zero with the
    field and the rule in its stderr (``The RepackRun "NAME" is invalid: spec.FIELD: ...``), and nothing is
    stored. (``sa_kubeconfig`` has applied crds/ and deploy/.)"""
    spec, said = BROKEN[name]
    doc = {"apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackRun", "metadata": {"name": name},
           "spec": spec}
    res = real_cluster.kubectl("apply", "-f", "-", "-v=6", input=json.dumps(doc), check=False)
    print(res.stderr.splitlines()[-1])
    assert res.returncode != 0
    assert "422 Unprocessable Entity" in res.stderr, res.stderr
    assert f'The RepackRun "{name}" is invalid' in res.stderr and said in res.stderr, res.stderr
    assert real_cluster.kubectl("get", "repackrun", name, check=False).returncode != 0  # not stored


def test_what_another_client_writes_on_the_run_mid_run_is_kept(real_cluster: Cluster, sa_kubeconfig: Path) -> None:
    """The status is optplan's journal, written as merge patches of ``/status`` guarded by the run's
    resourceVersion, conditions merged by type (metav1.Condition's rule: a writer owns its types): another
    client adding a label and an annotation (metadata) and a condition of its own type (a JSON patch of
    ``/status``, appended) while the run is Running loses nothing by the end, and optplan's journal goes on
    (its 409s re-read the run). vc-scheduler is stopped from the run's start until the other client has
    written: the first replacement cannot be bound meanwhile, so the run is still Running when it writes."""
    with world(real_cluster, "fault-other", {"other-a": 1, "other-b": 1}, targets=2) as w:
        seen = Seen()
        original = set(seen.look(w))
        w.controller("controller", sa=sa_kubeconfig)
        c = w.c
        c.stop_scheduler()
        try:
            w.start_run()
            _watch(w, seen, lambda: bool(seen.gone), WAIT)
            c.kubectl("label", "repackrun", w.run, "owner-team=platform")
            c.kubectl("annotate", "repackrun", w.run, "change-ticket=CHG-7")
            theirs = {"type": "AuditRecorded", "status": "True", "reason": "Audited",
                      "message": "seen by the audit bot", "lastTransitionTime": "2026-01-01T00:00:00Z"}
            patched = json.loads(c.kubectl("patch", "repackrun", w.run, "--subresource=status", "--type=json", "-o",
                                           "json", "-p", json.dumps([{"op": "add", "path": "/status/conditions/-",
                                                                      "value": theirs}])).stdout)
        finally:
            c.start_scheduler()
        assert patched["status"]["phase"] == "Running", patched["status"]  # mid-run
        journal_then = [r["eviction"]["phase"] for r in patched["status"]["relocations"]]
        _watch(w, seen, lambda: w.status().get("phase") in FINISHED, WAIT)
        run = c.kubectl_json("get", "repackrun", w.run)
        print(f"journal when the other client wrote: {journal_then}; at the end: "
              f"{[r['eviction']['phase'] for r in run['status']['relocations']]}, {run['status']['phase']}")
        assert run["metadata"]["labels"] == {"fault": w.ns, "owner-team": "platform"}
        assert run["metadata"]["annotations"]["change-ticket"] == "CHG-7"
        conditions = {cond["type"]: cond for cond in run["status"]["conditions"]}
        assert conditions["AuditRecorded"] == theirs, conditions
        assert conditions["Complete"]["status"] == "True", conditions
        assert run["status"]["phase"] == "Succeeded", conditions
        # optplan wrote its journal after theirs (at least the verdict), over their condition
        assert int(run["metadata"]["resourceVersion"]) > int(patched["metadata"]["resourceVersion"])
        assert "completionTime" not in patched["status"] and run["status"]["completionTime"]
        _assert_each_victim_evicted_once(w, seen, original)


def test_the_api_server_restarted_mid_run(real_cluster: Cluster, sa_kubeconfig: Path) -> None:
    """kube-apiserver stopped and started again (same port, same etcd) while the run is evicting: etcd
    keeps the objects, so the journal written before the stop is there after it; meanwhile the controller's
    passes fail ("connection refused") and are retried with backoff, its watches end and are opened again
    (from the last resourceVersion, or a new list on 410 Gone); the run finishes, each victim evicted once,
    and the controller never exited."""
    with world(real_cluster, "fault-apiserver", {"api-a": 1, "api-b": 1}, targets=2) as w:
        seen = Seen()
        original = set(seen.look(w))
        controller = w.controller("controller", sa=sa_kubeconfig)
        w.start_run()
        _watch(w, seen, lambda: bool(seen.gone), WAIT)
        before = w.status()
        journal = [(r["victimPodName"], r["eviction"]["phase"]) for r in before["relocations"]]
        down = real_cluster.restart_apiserver(down=2)
        after = w.status()
        print(f"kube-apiserver not serving for {down:.1f} s; journal before: {journal}")
        assert after["plan"] == before["plan"]  # etcd kept it
        assert all(r["victimPodUID"] in {a["victimPodUID"] for a in after["relocations"]}
                   for r in before["relocations"])
        restarted = time.monotonic()
        _watch(w, seen, lambda: w.status().get("phase") in FINISHED, WAIT)
        print(f"finished {time.monotonic() - restarted:.1f} s after the API server was back")
        status = _assert_each_victim_evicted_once(w, seen, original)
        assert status["phase"] == "Succeeded", status["conditions"]
        assert seen.gone == original
        assert controller.popen.poll() is None
        assert set(CORE) <= set(real_cluster.alive())  # the cluster's own processes all running
