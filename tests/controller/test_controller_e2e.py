"""The controller end to end over real HTTP: the real kubernetes client against the fake API server
(tests/fakekube.py, CRD schemas enforced on every status write) and the simulated world around it
(tests/fakeworld.py: the VCJob controller recreating evicted pods, the scheduler binding them, the
disruption controller). Most tests step everything explicitly with a fake clock: list, one controller
pass, one world step; one test runs the real loop with watches and threads.
"""

from __future__ import annotations

import http.client
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from optplan.adapters import kube
from optplan.adapters.kube import Answer, KubeClient
from optplan.cli import main
from optplan.controller import status as st
from optplan.controller.leader import LeaderElector
from optplan.controller.manager import Controller
from optplan.controller.metrics import Metrics
from optplan.controller.reconcile import Settings
from tests.builders import node, pod
from tests.controller.test_controller import NPU, NS, T0, W0, W1, Clock, Killed, execute_run, seed_objects
from tests.fakekube import FakeKube
from tests.fakeworld import World

RUN_API = ("repack.volcano.sh/v1alpha1", "RepackRun")
SETTINGS = Settings(solver="greedy", time_limit=5.0, cooldown=600.0, eviction_deadline=120.0,
                    replacement_deadline=300.0, retry=1.0, max_retry=8.0, verify_time_limit=2.0)
STEP = 30.0  # fake seconds between steps


class Env:
    """A fake API server with the seed's cluster, its world, a fake clock, and controllers on demand."""

    def __init__(self, fk: FakeKube, kubeconfig: str, objects: list[dict[str, Any]]) -> None:
        self.fk = fk
        self.kubeconfig = kubeconfig
        fk.add(*objects, server_fields=True)
        self.world = World(fk)
        self.world.step()  # the workload controllers see the pods they own
        self.clock = Clock()
        self.clients: list[KubeClient] = []

    def client(self) -> KubeClient:
        c = kube.connect(self.kubeconfig, None, deadline=None, timeout=10)
        self.clients.append(c)
        return c

    def controller(self, client: KubeClient | None = None, settings: Settings = SETTINGS,
                   elector: LeaderElector | None = None) -> Controller:
        return Controller(client or self.client(), settings, clock=self.clock, elector=elector)

    def step(self, *ctls: Controller) -> None:
        for ctl in ctls:
            ctl.sync()
            if ctl.elector is not None:
                ctl.elector.tick()
            ctl.pass_()
        self.world.step()
        self.clock.advance(STEP)

    def run(self, name: str = "ascend-execute-001") -> dict[str, Any]:
        return self.fk.get(*RUN_API, name)

    def until_finished(self, ctl: Controller, name: str = "ascend-execute-001", steps: int = 40) -> dict[str, Any]:
        for _ in range(steps):
            self.step(ctl)
            if (self.run(name).get("status") or {}).get("phase") in st.FINISHED:
                return self.run(name)
        raise AssertionError(f"{name} not finished: {self.run(name).get('status')}")

    def close(self) -> None:
        for c in self.clients:
            c.close()


def complete(run: Mapping[str, Any]) -> dict[str, Any]:
    cond = st.find_condition(run["status"], st.COMPLETE)
    assert cond is not None
    return cond


def placements(run: Mapping[str, Any]) -> dict[str, tuple[str, str, str | None]]:
    return {r["victimPodName"]: (r["eviction"]["phase"], r["placement"]["phase"],
                                 r["placement"].get("actualNodeName")) for r in run["status"]["relocations"]}


# ---- the seed's Execute and its failures -------------------------------------------------------------

def test_seed_execute_completes_with_the_seeds_numbers(env: Env) -> None:
    run = env.until_finished(env.controller())
    assert run["status"]["phase"] == "Succeeded" and complete(run)["reason"] == "ExecutionCompleted"
    assert run["status"]["plan"]["summary"]["fragBeforePercent"] == 33
    assert run["status"]["plan"]["summary"]["fragAfterPercent"] == 0
    assert run["status"]["result"] == {"fragAfterPercent": 0, "freedNodeCount": 1, "movedCardCount": 2,
                                       "metricsVerified": True}
    assert placements(run) == {W0: ("Evicted", "Bound", "ascend-node-02"), W1: ("Evicted", "Bound", "ascend-node-03")}
    assert env.fk.evicted() == [f"{NS}/{W0}", f"{NS}/{W1}"]
    # the evictions carried the victims' UIDs and the run's grace period; the world bound the nominated nodes
    uids = {r["victimPodName"]: r["victimPodUID"] for r in run["status"]["relocations"]}
    assert [(e.name, e.uid, e.grace_period_seconds) for e in env.fk.evictions] == [
        (W0, uids[W0], 30), (W1, uids[W1], 30)]
    assert ("repack-demo/" + W0, "ascend-node-02") in env.world.bindings
    assert all("(nominated)" in line for line in env.world.log if "bound to" in line)


def budget_spent_at_execute(env: Env) -> KubeClient:
    """A PDB ``training`` over the training job that allows 2 when the run is planned and 0 by the time of
    its first eviction (the client spends it just before evicting): the plan moves the job, the Eviction API
    answers 429."""
    env.fk.add({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                "metadata": {"name": "training", "namespace": NS},
                "spec": {"selector": {"matchLabels": {"volcano.sh/job-name": "ascend-batch-training"}}},
                "status": {"disruptionsAllowed": 2}}, server_fields=True)
    client = env.client()
    real = client.evict

    def budget_spent(namespace: str, name: str, **kw: Any) -> Answer:
        env.fk.patch("policy/v1", "PodDisruptionBudget", "training", {"status": {"disruptionsAllowed": 0}},
                     namespace=NS, subresource="status")
        return real(namespace, name, **kw)

    client.evict = budget_spent  # type: ignore[method-assign]
    return client


def test_a_pdb_blocks_the_eviction_until_rejected(env: Env) -> None:
    run = env.until_finished(env.controller(budget_spent_at_execute(env)))
    rels = {r["victimPodName"]: r for r in run["status"]["relocations"]}
    assert rels[W0]["eviction"]["phase"] == "Rejected"
    assert "disruption budget" in rels[W0]["eviction"]["message"]
    assert rels[W1]["eviction"]["phase"] == "Skipped"
    assert env.fk.evicted() == []
    assert sum(1 for e in env.fk.evictions if e.code == 429) >= 2
    assert run["status"]["phase"] == "Failed" and complete(run)["reason"] == "ExecutionGoalNotReached"


@pytest.mark.parametrize("policy", ["AlwaysAllow", "IfHealthyBudget"])
def test_unhealthy_pods_under_a_spent_budget(fk: FakeKube, kubeconfig: str, policy: str) -> None:
    """The seed's training pods are Running but not Ready (no Ready condition); a PDB wants both (the
    disruption controller gives currentHealthy 0, desiredHealthy 2, disruptionsAllowed 0). Under AlwaysAllow
    the Eviction API lets them go without the budget, so the controller plans and evicts them; under
    IfHealthyBudget the application is disrupted (0 < 2), they need the budget, and nothing is planned."""
    pdb_obj = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
               "metadata": {"name": "training", "namespace": NS},
               "spec": {"minAvailable": 2, "unhealthyPodEvictionPolicy": policy,
                        "selector": {"matchLabels": {"volcano.sh/job-name": "ascend-batch-training"}}}}
    env = Env(fk, kubeconfig, [*seed_objects(), pdb_obj])
    try:
        status = fk.get("policy/v1", "PodDisruptionBudget", "training", NS)["status"]
        assert (status["currentHealthy"], status["desiredHealthy"], status["disruptionsAllowed"]) == (0, 2, 0)
        run = env.until_finished(env.controller())
        if policy == "AlwaysAllow":
            assert run["status"]["phase"] == "Succeeded" and complete(run)["reason"] == "ExecutionCompleted"
            assert env.fk.evicted() == [f"{NS}/{W0}", f"{NS}/{W1}"]
        else:
            assert not run["status"].get("relocations") and env.fk.evictions == []
    finally:
        env.close()


def test_a_replacement_bound_elsewhere_completes_with_alternative_placement(env: Env) -> None:
    env.world.bind_instead(f"{NS}/{W0}", "ascend-node-03")  # planned ascend-node-02
    run = env.until_finished(env.controller())
    assert complete(run)["reason"] == "ExecutionCompletedWithAlternativePlacement"
    assert run["status"]["phase"] == "Succeeded"
    assert placements(run)[W0] == ("Evicted", "BoundElsewhere", "ascend-node-03")
    rel = next(r for r in run["status"]["relocations"] if r["victimPodName"] == W0)
    assert (rel["plannedNodeName"], rel["placement"]["selectedNodeName"]) == ("ascend-node-02", "ascend-node-02")


def test_a_replacement_that_never_schedules_times_out(env: Env) -> None:
    env.world.never_schedule(f"{NS}/{W1}")
    run = env.until_finished(env.controller())
    assert placements(run)[W1] == ("Evicted", "TimedOut", None)
    assert placements(run)[W0][1] == "Bound"
    assert run["status"]["phase"] == "Failed" and complete(run)["reason"] == "ExecutionGoalNotReached"
    assert "timed out" in complete(run)["message"]


# ---- crash safety over HTTP ------------------------------------------------------------------------

WRITES = ("patch_repack_run_status", "evict", "patch_pod_status", "delete_repack_run")


def dying_client(env: Env, kill_at: int | None) -> tuple[KubeClient, list[int]]:
    """A client whose process dies right after its ``kill_at``-th write reached the server."""
    client = env.client()
    count = [0]
    for name in WRITES:
        real = getattr(client, name)

        def wrapped(*a: Any, _real: Callable[..., Any] = real, **kw: Any) -> Any:
            out = _real(*a, **kw)
            count[0] += 1
            if kill_at is not None and count[0] == kill_at:
                raise Killed()
            return out

        setattr(client, name, wrapped)
    return client, count


def test_killed_after_every_write_and_restarted_ends_the_same(fk: FakeKube, kubeconfig: str) -> None:
    base = Env(fk, kubeconfig, seed_objects())
    client, count = dying_client(base, None)
    expected = placements(base.until_finished(base.controller(client)))
    total = count[0]
    assert total >= 8
    base.close()
    for k in range(1, total + 1):
        server = FakeKube(crd_schemas=True).start()
        e = Env(server, str(server.write_kubeconfig(Path(kubeconfig).with_name(f"kc{k}"))), seed_objects())
        try:
            client, _ = dying_client(e, k)
            with pytest.raises(Killed):
                e.until_finished(e.controller(client))
            run = e.until_finished(e.controller())  # a new process: only the cluster remembers
            assert placements(run) == expected, k
            assert complete(run)["reason"] == "ExecutionCompleted", k
            assert sorted(e.fk.evicted()) == [f"{NS}/{W0}", f"{NS}/{W1}"], k  # each victim once
        finally:
            e.close()
            server.stop()


# ---- serial runs, cooldown, deletion, TTL ------------------------------------------------------------

def test_two_execute_runs_run_one_at_a_time_then_the_cooldown(fk: FakeKube, kubeconfig: str) -> None:
    objs = seed_objects()
    e = Env(fk, kubeconfig, objs)
    try:
        e.clock.advance(1)
        fk.create(execute_run("ascend-execute-002", objs[-1]))
        ctl = e.controller()
        e.step(ctl)
        second = e.run("ascend-execute-002")
        assert second["status"]["phase"] == "Pending" and complete(second)["reason"] == "AnotherRunActive"
        e.until_finished(ctl)
        e.step(ctl)
        second = e.run("ascend-execute-002")
        assert second["status"]["phase"] == "Pending" and complete(second)["reason"] == "ExecuteCooldownActive"
        for _ in range(int(SETTINGS.cooldown / STEP) + 2):
            e.step(ctl)
        second = e.run("ascend-execute-002")
        assert second["status"]["phase"] == "Succeeded"  # re-planned on the repacked cluster: nothing to do
        assert complete(second)["reason"] in ("NoFragmentation", "InsufficientImprovement")
        assert fk.evicted() == [f"{NS}/{W0}", f"{NS}/{W1}"]
    finally:
        e.close()


def test_deleting_a_run_mid_execution_stops_its_evictions(env: Env) -> None:
    client = env.client()
    real = client.evict

    def deleted_after_first(namespace: str, name: str, **kw: Any) -> Answer:
        answer = real(namespace, name, **kw)
        if env.fk.find(*RUN_API, "ascend-execute-001") is not None:
            env.fk.delete(*RUN_API, "ascend-execute-001")
        return answer

    client.evict = deleted_after_first  # type: ignore[method-assign]
    ctl = env.controller(client)
    for _ in range(4):
        env.step(ctl)
    assert env.fk.evicted() == [f"{NS}/{W0}"]  # the first move stays (no rollback), no second one


def test_ttl_deletes_a_finished_run(fk: FakeKube, kubeconfig: str) -> None:
    e = Env(fk, kubeconfig, seed_objects(mode="DryRun", ttl=90))
    try:
        ctl = e.controller()
        e.step(ctl)
        assert e.run()["status"]["phase"] == "Succeeded"
        for _ in range(4):
            e.step(ctl)
        assert fk.find(*RUN_API, "ascend-execute-001") is None
        assert any(r.method == "DELETE" for r in fk.requests)
    finally:
        e.close()


# ---- leader election -------------------------------------------------------------------------------

def test_two_replicas_one_leader_and_a_takeover(env: Env) -> None:
    def replica(identity: str) -> tuple[Controller, list[int]]:
        client, count = dying_client(env, None)
        elector = LeaderElector(client, "optplan-system", "optplan-controller", identity, clock=env.clock,
                                lease_duration=15, renew_deadline=10, retry_period=2)
        return env.controller(client, elector=elector), count

    a, a_writes = replica("replica-a")
    b, b_writes = replica("replica-b")
    for ctl in (a, b):  # both list, try the lease and pass; only the holder acts
        ctl.sync()
        assert ctl.elector is not None
        ctl.elector.tick()
        ctl.pass_()
    assert a.elector is not None and b.elector is not None
    assert a.elector.leading() and not b.elector.leading()
    assert a_writes[0] > 0 and b_writes[0] == 0
    lease = env.fk.get("coordination.k8s.io/v1", "Lease", "optplan-controller", "optplan-system")
    assert lease["spec"]["holderIdentity"] == "replica-a" and lease["spec"]["leaseTransitions"] == 0
    assert run_phase(env) == "Running"  # a planned, journaled and evicted; replacements are pending
    # replica-a hangs (no renewals): it stops acting after its renew deadline, b takes over after the lease
    env.world.step()
    env.clock.advance(11)
    assert not a.elector.leading()
    written = a_writes[0]
    a.sync()
    a.pass_()
    assert a_writes[0] == written  # a replica that lost the lease writes nothing more
    b.elector.tick()
    assert not b.elector.leading()  # b has seen the record unchanged for 11 s only
    env.clock.advance(5)
    b.elector.tick()
    assert b.elector.leading()
    lease = env.fk.get("coordination.k8s.io/v1", "Lease", "optplan-controller", "optplan-system")
    assert lease["spec"]["holderIdentity"] == "replica-b" and lease["spec"]["leaseTransitions"] == 1
    before = b_writes[0]
    run = env.until_finished(b)
    assert b_writes[0] > before and complete(run)["reason"] == "ExecutionCompleted"
    assert sorted(env.fk.evicted()) == [f"{NS}/{W0}", f"{NS}/{W1}"]


def run_phase(env: Env) -> str | None:
    return (env.run().get("status") or {}).get("phase")


# ---- the real loop: watches, threads, the CLI --------------------------------------------------------

def test_the_watching_loop_carries_out_the_seed_execute(env: Env) -> None:
    settings = Settings(solver="greedy", time_limit=5.0, retry=0.2, max_retry=1.0, verify_time_limit=2.0)
    metrics = Metrics(stale_after=60)
    server = metrics.serve("127.0.0.1", 0)
    ctl = Controller(env.client(), settings, clock=time.time, watch_timeout=5, min_interval=0.05, metrics=metrics)
    env.world.start(interval=0.05)
    thread = threading.Thread(target=ctl.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if (env.run().get("status") or {}).get("phase") in st.FINISHED:
                break
            if ctl.store.synced():
                env.fk.compact()  # forget the watch history: a resumed watch gets 410 and lists again
                env.fk.close_watches()
            time.sleep(0.1)
        scraped = _get(server.port, "/metrics")
        ready = _get(server.port, "/readyz")
    finally:
        ctl.stop.set()
        thread.join(timeout=20)
        env.world.stop()
        server.close()
    assert ready.startswith("200")
    assert 'optplan_evictions_total{result="Evicted"} 2.0' in scraped
    assert 'optplan_replacements_total{outcome="Scheduled"} 2.0' in scraped
    assert "optplan_plan_seconds_count 1.0" in scraped
    run = env.run()
    assert complete(run)["reason"] == "ExecutionCompleted"
    assert env.fk.evicted() == [f"{NS}/{W0}", f"{NS}/{W1}"]
    assert not thread.is_alive()
    assert max(inf.relists for inf in ctl.informers) >= 2  # 410 Gone: listed again


def _get(port: int, path: str) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return f"{resp.status}\n{resp.read().decode()}"
    finally:
        conn.close()


def test_controller_once_from_the_command_line(fk: FakeKube, kubeconfig: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    fk.add(*seed_objects(mode="DryRun"), server_fields=True)
    fk.add(node("ascend-node-09", 8, resource=NPU), pod("noise", "ascend-node-09", 1, group=None, resource=NPU),
           server_fields=True)
    code = main(["controller", "--kubeconfig", kubeconfig, "--once", "--solver", "greedy"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.split("\n")[0].split() == ["NAME", "MODE", "PHASE", "REASON"]
    assert out.split("\n")[1].split() == ["ascend-execute-001", "DryRun", "Succeeded", "RepackRecommended"]
    stored = fk.get(*RUN_API, "ascend-execute-001")
    assert stored["status"]["plan"]["freedNodes"]
    assert T0 > 0


# ---- a ModelServing ServingGroup recreated under a new PodGroup ---------------------------------------

SERVING_API = "workload.serving.volcano.sh/v1alpha1"


def serving_cluster() -> list[dict[str, Any]]:
    """llm's ServingGroup llm-0 (two 2-card pods) on n1; n2 and n3 hold 6 cards each; Kthena recreates a
    disrupted group whole, under a new PodGroup name (ServingGroupRecreate)."""
    from tests.builders import podgroup, repack_run

    ms = {"apiVersion": SERVING_API, "kind": "ModelServing", "metadata": {"name": "llm", "namespace": "default"},
          "spec": {"recoveryPolicy": "ServingGroupRecreate"}}
    out: list[dict[str, Any]] = [node("n1"), node("n2"), node("n3"), ms,
                                 podgroup("llm-0", 2, owner=(SERVING_API, "ModelServing", "llm")),
                                 podgroup("fill", 1), pod("fill-2", "n2", 6, group="fill"),
                                 pod("fill-3", "n3", 6, group="fill")]
    for role in ("prefill", "decode"):
        labels = {"modelserving.volcano.sh/name": "llm", "modelserving.volcano.sh/group-name": "llm-0",
                  "modelserving.volcano.sh/role": role, "modelserving.volcano.sh/role-id": "0"}
        out.append(pod(f"llm-0-{role}-0", "n1", 2, group="llm-0", labels=labels))
    run = repack_run("serving", scope={"podGroups": {"include": {"names": ["default/llm-0"]}}})
    run["spec"]["mode"] = "Execute"
    return [*out, run]


def test_a_serving_group_recreated_under_a_new_podgroup_is_followed(fk: FakeKube, kubeconfig: str) -> None:
    e = Env(fk, kubeconfig, serving_cluster())
    try:
        run = e.until_finished(e.controller(), "serving")
    finally:
        e.close()
    assert run["status"]["phase"] == "Succeeded", run["status"]["conditions"]
    rels = {r["victimPodName"]: r for r in run["status"]["relocations"]}
    assert set(rels) == {"llm-0-prefill-0", "llm-0-decode-0"}
    for name, rel in rels.items():
        assert rel["replacementPodGroupName"] == "llm-1"
        assert rel["placement"]["replacementPodName"] == name.replace("llm-0", "llm-1")
        assert rel["placement"]["actualNodeName"] in ("n2", "n3")
    assert run["status"]["result"]["freedNodeCount"] == 1
    assert len(fk.evicted()) <= 2


def test_controller_bad_flags_are_one_line_exit_2(kubeconfig: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["controller", "--kubeconfig", kubeconfig, "--metrics-address", "nowhere"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--metrics-address" in err
    assert main(["controller", "--kubeconfig", "/nonexistent/kubeconfig", "--once"]) == 2
    assert "kubeconfig file not found" in capsys.readouterr().err
