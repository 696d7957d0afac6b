"""The controller acting on its own (issue 15, last paragraph): a gang pending by fragmentation for
``--admit-pending-after`` seconds gets a RepackRun with an admit goal naming it, at most once per cooldown.

The real kubernetes client against the fake API server (tests/fakekube.py) and its simulated world
(tests/fakeworld.py), stepped with a fake clock as tests/controller/test_controller_e2e.py does. The cluster: two
8-card nodes with 5 cards busy on each (6 free in total, at most 3 on one node) and four pending VCJobs,
one per verdict of ``optplan.solvers.placement.pending``: ``frag`` (4 cards: fits the free total, no node
has 4 — pending by fragmentation), ``fits`` (3 + 3), ``quota`` (its queue allows 1 card) and ``big`` (8 > 6).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from optplan.adapters import kube
from optplan.adapters.kube import KubeClient
from optplan.cli import main
from optplan.controller import autotrigger as at
from optplan.controller import status as st
from optplan.controller.leader import ExecuteRecord, LeaderElector
from optplan.controller.manager import Controller
from optplan.controller.metrics import Metrics
from optplan.controller.reconcile import Settings
from tests.builders import GPU, job_task, node, pod, podgroup_in, queue, vcjob
from tests.controller.test_controller import T0, Clock
from tests.controller.test_deploy import allows, attributes, cluster_rules
from tests.fakekube import FakeKube
from tests.fakeworld import World

RUN_API = ("repack.volcano.sh/v1alpha1", "RepackRun")
SETTINGS = Settings(solver="greedy", time_limit=5.0, cooldown=600.0)
AFTER = 300.0
ADMIT = at.AdmitSettings(after=AFTER)
STEP = 60.0
LEASE = ("optplan-system", "optplan-controller")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def cluster(*jobs: str) -> list[dict[str, Any]]:
    """The module docstring's cluster with the pending VCJobs named (all four by default)."""
    pending = {"frag": vcjob("frag", tasks=[job_task("w", 1, 4)]),
               "fits": vcjob("fits", tasks=[job_task("w", 2, 3)]),
               "quota": vcjob("quota", "small", tasks=[job_task("w", 1, 2)]),
               "big": vcjob("big", tasks=[job_task("w", 1, 8)])}
    return [node("a", 8), node("b", 8), podgroup_in("default", "pg", 1), pod("p0", "a", 5), pod("p1", "b", 5),
            queue("small", capability={GPU: "1"}), *(pending[j] for j in jobs or pending)]


class Env:
    """The fake API server with ``objects``, its world, a fake clock the server's timestamps follow too."""

    def __init__(self, fk: FakeKube, tmp_path: Path, objects: list[dict[str, Any]]) -> None:
        self.fk = fk
        self.kubeconfig = str(fk.write_kubeconfig(tmp_path / "kubeconfig"))
        self.clock = Clock()
        fk.clock = lambda: datetime.fromtimestamp(self.clock(), UTC)
        fk.add(*objects, server_fields=True)
        self.world = World(fk)
        self.world.step()
        self.clients: list[KubeClient] = []

    def controller(self, admit: at.AdmitSettings | None = ADMIT, *,
                   settings: Settings = SETTINGS, metrics: Metrics | None = None,
                   elector: LeaderElector | None = None) -> Controller:
        client = kube.connect(self.kubeconfig, None, deadline=None, timeout=10)
        self.clients.append(client)
        record = ExecuteRecord(client, *LEASE)
        admit_record = ExecuteRecord(client, *LEASE, time_key=at.LAST_TIME, run_key=at.LAST_RUN)
        return Controller(client, settings, clock=self.clock, metrics=metrics, elector=elector, record=record,
                          admit=admit, admit_record=admit_record)

    def step(self, ctl: Controller, seconds: float = STEP) -> None:
        ctl.sync()
        if ctl.elector is not None:
            ctl.elector.tick()
        ctl.pass_()
        self.world.step()
        self.clock.advance(seconds)

    def runs(self) -> list[dict[str, Any]]:
        return self.fk.objects(*RUN_API)

    def close(self) -> None:
        for c in self.clients:
            c.close()


@pytest.fixture
def env(fk: FakeKube, tmp_path: Path) -> Iterator[Env]:
    # a schema-enforcing server, as an API server: the shipped CRD keeps the admit goal the controller writes
    e = Env(fk, tmp_path, cluster())
    try:
        yield e
    finally:
        e.close()


def autotrigger_runs(metrics: Metrics, mode: str) -> float:
    value = metrics.registry.get_sample_value("optplan_autotrigger_runs_total", {"mode": mode})
    return value or 0.0


# ---- the rule ------------------------------------------------------------------------------------

def test_a_gang_pending_by_fragmentation_past_the_threshold_gets_one_dryrun_with_its_admit_goal(env: Env) -> None:
    metrics = Metrics()
    ctl = env.controller(metrics=metrics)
    for _ in range(5):  # 0 .. 240 s: pending by fragmentation, not yet for 300 s
        env.step(ctl)
    assert env.runs() == []
    env.step(ctl)  # 300 s
    [run] = env.runs()
    meta = run["metadata"]
    # as stored by a schema-enforcing server: the goal kept, the CRD's defaults filled in
    assert run["spec"] == {"mode": "DryRun", "goals": [{"resource": GPU, "admit": {"jobs": ["default/frag"]}}],
                           "disruptionProtection": "Honor"}
    assert meta["labels"] == {"optplan.io/trigger": "pending-by-fragmentation", "optplan.io/admit-job": "default.frag"}
    assert meta["annotations"]["optplan.io/admit-job"] == "default/frag"
    assert meta["annotations"]["optplan.io/pending-by-fragmentation-since"] == st.rfc3339(T0)
    assert meta["name"].startswith("admit-default-frag-") and DNS_LABEL.match(meta["name"])
    assert autotrigger_runs(metrics, "DryRun") == 1 and autotrigger_runs(metrics, "Execute") == 0
    # the reconciler plans it on the next pass; the gang is still pending, but the cooldown holds (600 s)
    for _ in range(9):  # up to 840 s since the creation at 300 s
        env.step(ctl)
    assert [r["metadata"]["name"] for r in env.runs()] == [meta["name"]]
    assert env.runs()[0]["status"]["phase"] == "Succeeded"
    # past the cooldown, the gang still pending and its first run finished: a second attempt, another name
    env.step(ctl)
    names = [r["metadata"]["name"] for r in env.runs()]
    assert len(names) == 2 and meta["name"] in names
    assert sorted(r["metadata"]["annotations"]["optplan.io/admit-attempt"] for r in env.runs()) == ["1", "2"]
    assert autotrigger_runs(metrics, "DryRun") == 2


def test_gangs_that_fit_or_lack_quota_or_capacity_never_trigger(fake_kube: FakeKube, tmp_path: Path) -> None:
    e = Env(fake_kube, tmp_path, cluster("fits", "quota", "big"))
    try:
        ctl = e.controller(at.AdmitSettings(after=0))
        for _ in range(20):
            e.step(ctl)
        assert e.runs() == []
        assert ctl.trigger is not None and ctl.trigger.since == {}  # nothing is pending by fragmentation
    finally:
        e.close()


def test_off_by_default(env: Env) -> None:
    ctl = env.controller(admit=None)
    for _ in range(30):
        env.step(ctl)
    assert env.runs() == [] and ctl.trigger is None


def test_a_gang_that_starts_loses_its_clock(env: Env) -> None:
    ctl = env.controller()
    env.step(ctl, 200)
    env.fk.delete("v1", "Pod", "p0", "default")  # node a now has 8 free cards: frag fits
    env.step(ctl, 200)
    assert ctl.trigger is not None and "default/frag" not in ctl.trigger.since
    env.fk.add(pod("p0", "a", 5), server_fields=True)  # blocked again: its clock starts again here
    for _ in range(5):  # seen blocked at 400 s; 400 .. 640 s: pending by fragmentation for 240 s at most
        env.step(ctl)
    assert env.runs() == []
    env.step(ctl)  # 700 s
    assert len(env.runs()) == 1


def test_never_a_second_run_while_the_first_has_not_finished(env: Env) -> None:
    ctl = env.controller(at.AdmitSettings(after=0), settings=Settings(solver="greedy", time_limit=5.0, cooldown=0))
    ctl.reconciler.reconcile_all = lambda: None  # type: ignore[method-assign]  # nobody plans: it stays open
    for _ in range(5):
        env.step(ctl)
    [run] = env.runs()
    assert "phase" not in (run.get("status") or {})
    done = {"phase": "Succeeded", "conditions": [{"type": "Complete", "status": "True", "reason": "RepackRecommended",
                                                 "message": "done", "lastTransitionTime": "2027-01-15T08:00:00Z"}]}
    env.fk.patch(*RUN_API, run["metadata"]["name"], {"status": done}, subresource="status")
    env.step(ctl)  # finished, cooldown 0: the next attempt at once
    assert len(env.runs()) == 2


def test_the_cooldown_outlives_the_run_and_a_restart(env: Env) -> None:
    ctl = env.controller(at.AdmitSettings(after=0))
    env.step(ctl)
    [run] = env.runs()
    env.fk.delete(*RUN_API, run["metadata"]["name"])  # kubectl delete
    lease = env.fk.get("coordination.k8s.io/v1", "Lease", LEASE[1], LEASE[0])
    assert lease["metadata"]["annotations"][at.LAST_RUN] == run["metadata"]["name"]
    again = env.controller(at.AdmitSettings(after=0))  # a new process: the gang is due at once
    for _ in range(9):  # up to 540 s after the creation
        env.step(again)
    assert env.runs() == []
    env.step(again)  # 600 s
    assert len(env.runs()) == 1


def test_no_run_within_the_cooldown_of_an_execute(env: Env) -> None:
    ctl = env.controller(at.AdmitSettings(after=0))
    ExecuteRecord(env.clients[-1], *LEASE).remember(env.clock() - 100, "someone-elses-execute")
    for _ in range(9):  # 100 .. 580 s after the Execute finished
        env.step(ctl)
    assert env.runs() == []
    env.step(ctl)
    assert len(env.runs()) == 1


def test_a_run_whose_admit_goal_the_server_drops_is_deleted_and_the_trigger_stops(env: Env) -> None:
    metrics = Metrics()
    ctl = env.controller(at.AdmitSettings(after=0, mode="Execute"), metrics=metrics)
    client = env.clients[-1]
    real = client.create_repack_run

    def pruning(run: Mapping[str, Any]) -> dict[str, Any]:  # a CRD without the admit goal prunes it
        spec = {**run["spec"], "goals": [{"resource": g["resource"]} for g in run["spec"]["goals"]]}
        return real({**run, "spec": spec})

    client.create_repack_run = pruning  # type: ignore[method-assign]
    for _ in range(3):
        env.step(ctl)
    assert env.runs() == [] and env.fk.evicted() == []
    assert ctl.trigger is not None and ctl.trigger.off is not None and "CRD" in ctl.trigger.off
    assert len([r for r in env.fk.requests if r.method == "POST" and "repackruns" in r.path]) == 1
    assert autotrigger_runs(metrics, "Execute") == 0


def test_execute_only_with_admit_mode_execute(env: Env) -> None:
    metrics = Metrics()
    ctl = env.controller(at.AdmitSettings(after=0, mode="Execute"), metrics=metrics)
    env.step(ctl)
    [run] = env.runs()
    assert run["spec"]["mode"] == "Execute"
    assert autotrigger_runs(metrics, "Execute") == 1 and autotrigger_runs(metrics, "DryRun") == 0


def test_only_the_leader_acts(env: Env) -> None:
    env.controller()
    assert LeaderElector(env.clients[-1], *LEASE, "a", clock=env.clock).tick()  # another replica leads
    standby = env.controller(at.AdmitSettings(after=0))
    standby.elector = LeaderElector(env.clients[-1], *LEASE, "b", clock=env.clock)
    assert standby.run_once() is None
    assert env.runs() == []


# ---- the command line ----------------------------------------------------------------------------

def test_the_command_creates_an_execute_run_only_when_asked(env: Env) -> None:
    argv = ["controller", "--kubeconfig", env.kubeconfig, "--once", "--metrics-address", "off"]
    assert main(argv) == 0
    assert env.runs() == []
    assert main([*argv, "--admit-pending-after", "0", "--admit-ttl", "3600"]) == 0
    [run] = env.runs()
    assert run["spec"]["mode"] == "DryRun" and run["spec"]["ttlSecondsAfterFinished"] == 3600
    env.fk.delete(*RUN_API, run["metadata"]["name"])
    assert main([*argv, "--admit-pending-after", "0", "--admit-mode", "Execute", "--cooldown", "0",
                 "--admit-resource", GPU]) == 0
    [run] = env.runs()
    assert run["spec"]["mode"] == "Execute"
    # the ClusterRole grants what the create needs
    creates = [attributes(r.method, r.path, r.query) for r in env.fk.requests if r.method == "POST"
               and "repackruns" in r.path]
    assert creates and all(allows(cluster_rules(), a) for a in creates)


@pytest.mark.parametrize(("flag", "value"), [
    ("--admit-pending-after", "-1"), ("--admit-pending-after", "soon"), ("--admit-pending-after", "nan"),
    ("--admit-mode", "execute"), ("--admit-mode", "Evict"), ("--admit-resource", ""), ("--admit-resource", "a b"),
    ("--admit-ttl", "-5"),
])
def test_bad_flags_are_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], flag: str, value: str) -> None:
    with pytest.raises(SystemExit) as e:
        main(["controller", "--once", f"{flag}={value}"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}" in err.splitlines()[-1] and "Traceback" not in err


# ---- names ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(("namespace", "name"), [
    ("default", "frag"), ("team-a", "x" * 253), ("t" * 63, "llm.64-cards"), ("a", "A_B.c")])
def test_names_and_labels_are_safe_deterministic_and_distinct(namespace: str, name: str) -> None:
    first, second = at.run_name(namespace, name, 1), at.run_name(namespace, name, 2)
    assert first == at.run_name(namespace, name, 1) and first != second
    assert all(len(n) <= 63 and DNS_LABEL.match(n) for n in (first, second))
    label = at.job_label(namespace, name)
    assert len(label) <= 63 and re.match(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$", label)
    assert label != at.job_label(namespace, name + "x")


def test_settings_refuse_negative_seconds_and_unknown_modes() -> None:
    with pytest.raises(ValueError, match="after"):
        at.AdmitSettings(after=-1)
    with pytest.raises(ValueError, match="mode"):
        at.AdmitSettings(after=0, mode="Evict")
