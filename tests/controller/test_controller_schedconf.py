"""The controller plans under the live cluster's vc-scheduler configuration (``optplan/controller/schedconf.py``):
volcano-system/volcano-scheduler-configmap read by ``optplan snapshot``'s reader, again every ``refresh``
seconds so that a change takes effect; a configuration it cannot model (or read) is a warning, in the log and
as an Event on each run planned under it. On the fake API server (tests/fakekube.py) with the seed's cluster."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from optplan.controller import autotrigger as at
from optplan.controller import reconcile
from optplan.controller.events import WARNING, Recorder
from optplan.controller.manager import Controller
from optplan.controller.schedconf import REFRESH as SCHEDULER_REFRESH
from optplan.controller.schedconf import SchedulerConfSource
from optplan.models.schedconf import SEED_ACTIONS, SchedulerConf
from tests.controller.test_controller import Clock
from tests.controller.test_controller_autotrigger import Env as TriggerEnv
from tests.controller.test_controller_autotrigger import cluster
from tests.controller.test_controller_e2e import SETTINGS, Env
from tests.controller.test_controller_events import events, story
from tests.fakekube import FakeKube

RUN = "ascend-execute-001"
GANG = "actions: \"enqueue, allocate, gangpreempt, backfill\"\ntiers:\n- plugins:\n  - name: priority\n  - name: gang\n"
SHUFFLE = "actions: \"enqueue, allocate, shuffle, backfill\"\ntiers:\n- plugins:\n  - name: priority\n  - name: gang\n"


def configmap(text: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "volcano-scheduler-configmap", "namespace": "volcano-system"},
            "data": {"volcano-scheduler.conf": text}}


class Reader:
    """An in-memory ConfigMap reader: what it returns (or raises) next, and how often it was asked."""

    def __init__(self, answer: Any, devices: Any = None) -> None:
        self.answer = answer
        self.devices = devices  # the device-share plugin's ConfigMap (or an exception)
        self.reads = 0
        self.asked: list[Mapping[str, Any] | None] = []  # the scheduler ConfigMap each device read was given

    def scheduler_configmap(self) -> dict[str, Any] | None:
        self.reads += 1
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer

    def device_configmap(self, scheduler_configmap: Mapping[str, Any] | None) -> dict[str, Any] | None:
        self.asked.append(scheduler_configmap)
        if isinstance(self.devices, Exception):
            raise self.devices
        return self.devices


# ---- the source -----------------------------------------------------------------------------------------------

# (the ConfigMap, the actions planned for, a warning's words; None: no warning)
SOURCES = [
    (None, SEED_ACTIONS, None),  # seed 002's: nothing optplan does not model (the log says it once)
    (configmap(GANG), ("enqueue", "allocate", "gangpreempt", "backfill"), "predicates"),  # no predicates plugin
    (configmap(SHUFFLE), ("enqueue", "allocate", "shuffle", "backfill"), "shuffle"),
    (configmap("actions: \"enqueue, allocate, teleport\"\n"), SEED_ACTIONS, "teleport"),  # does not parse
    ({"kind": "ConfigMap", "data": {}}, SEED_ACTIONS, "without data"),
]


@pytest.mark.parametrize(("cm", "actions", "words"), SOURCES)
def test_the_source_reads_the_configmap_and_warns_of_what_it_cannot_model(cm: Any, actions: tuple[str, ...],
                                                                          words: str | None) -> None:
    src = SchedulerConfSource(Reader(cm), Clock())
    assert src.current().actions == actions
    assert any(words in w for w in src.warnings) if words is not None else src.warnings == (), src.warnings


def test_a_change_takes_effect_after_the_refresh_and_a_failed_read_keeps_the_last() -> None:
    clock = Clock()
    reader = Reader(configmap(GANG))
    src = SchedulerConfSource(reader, clock, refresh=60)
    assert "gangpreempt" in src.current().actions and src.version == 1
    reader.answer = configmap(SHUFFLE)
    clock.advance(30)
    assert "gangpreempt" in src.current().actions and reader.reads == 1  # within the refresh: not read again
    clock.advance(30)
    assert "shuffle" in src.current().actions and src.version == 2 and reader.reads == 2
    clock.advance(60)
    assert src.current().actions == SchedulerConf(actions=("enqueue", "allocate", "shuffle", "backfill")).actions
    assert src.version == 2  # read again, unchanged
    reader.answer = RuntimeError("apiserver down")
    clock.advance(60)
    assert "shuffle" in src.current().actions and src.version == 2


def test_the_device_configmap_is_read_with_it_and_a_failed_read_keeps_the_last() -> None:
    """The device-share plugin's ConfigMap is read on the same refresh, where the scheduler ConfigMap last read
    says (the reader is given it); both are kept as read for the snapshot (``configmaps``), ``version`` changes
    with either, and a failed read keeps the one last read."""
    from tests.repack.test_vgpu_rules import device_config
    clock = Clock()
    sched, t4, a100 = configmap(GANG), device_config(["Tesla T4"]), device_config(["A100"])
    reader = Reader(sched, t4)
    src = SchedulerConfSource(reader, clock, refresh=60)
    assert src.configmaps() == (sched, t4) and src.version == 1 and reader.asked == [sched]
    reader.devices = a100
    clock.advance(60)
    assert src.configmaps() == (sched, a100) and src.version == 2  # the device ConfigMap alone changed
    reader.devices = RuntimeError("apiserver down")
    clock.advance(60)
    assert src.configmaps() == (sched, a100) and src.version == 2
    reader.answer, reader.devices = None, None  # both gone: nothing for the snapshot, seed 002's configuration
    clock.advance(60)
    assert src.configmaps() == () and src.version == 3 and src.current().actions == SEED_ACTIONS


# ---- the controller ----------------------------------------------------------------------------------------------

def test_the_controller_plans_under_the_clusters_configmap_and_follows_its_changes(
        env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    env.fk.add(configmap(GANG), server_fields=True)
    seen: list[tuple[str, ...]] = []
    plan_run = reconcile.plan_run

    def spy(*args: Any, **kw: Any) -> Any:
        seen.append(kw["scheduler"].actions)
        return plan_run(*args, **kw)

    monkeypatch.setattr(reconcile, "plan_run", spy)
    ctl = Controller(env.client(), SETTINGS, clock=env.clock, scheduler_refresh=60)
    env.step(ctl)
    assert seen and "gangpreempt" in seen[0]
    cm = env.fk.get("v1", "ConfigMap", "volcano-scheduler-configmap", namespace="volcano-system")
    cm["data"] = {"volcano-scheduler.conf": SHUFFLE}
    env.fk.update(cm)
    env.clock.advance(60)
    assert "shuffle" in ctl.reconciler.scheduler_conf().actions
    assert ctl.scheduler.version == 2


def test_a_run_planned_under_a_configuration_optplan_does_not_model_is_told_so(env: Env,
                                                                               caplog: pytest.LogCaptureFixture
                                                                               ) -> None:
    env.fk.add(configmap(SHUFFLE), server_fields=True)
    client = env.client()
    recorder = Recorder(client, instance="optplan-controller-0", clock=env.clock)
    ctl = Controller(client, SETTINGS, clock=env.clock, recorder=recorder)
    with caplog.at_level(logging.WARNING, logger="optplan.controller.schedconf"):
        env.until_finished(ctl)
    told = events(env.fk, RUN)
    assert story(told)[:2] == ["SchedulerConfNotModelled", "Planned"]
    assert told[0]["type"] == WARNING and "shuffle" in told[0]["note"]
    assert sum("shuffle" in r.getMessage() for r in caplog.records) == 1  # logged once, not on every read


def test_without_the_configmap_the_seed_configuration_is_said_once(env: Env, caplog: pytest.LogCaptureFixture) -> None:
    client = env.client()
    recorder = Recorder(client, instance="optplan-controller-0", clock=env.clock)
    ctl = Controller(client, SETTINGS, clock=env.clock, scheduler_refresh=0, recorder=recorder)
    with caplog.at_level(logging.WARNING, logger="optplan.controller.schedconf"):
        env.until_finished(ctl)
    assert ctl.reconciler.scheduler_conf().actions == SEED_ACTIONS
    assert sum("seed 002" in r.getMessage() for r in caplog.records) == 1
    assert story(events(env.fk, RUN))[0] == "Planned"  # nothing to warn of


def test_the_auto_trigger_judges_under_the_configuration_and_again_when_it_changes(
        fk: FakeKube, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The auto-trigger's verdicts (``pending_gangs``) follow the configuration, and its change (its version
    is part of what the verdicts were judged on)."""
    judged: list[tuple[str, ...]] = []
    pending_gangs = at.pending_gangs

    def spy(*args: Any, scheduler: SchedulerConf | None = None, **kw: Any) -> Any:
        judged.append((scheduler or SchedulerConf()).actions)
        return pending_gangs(*args, scheduler=scheduler, **kw)

    monkeypatch.setattr(at, "pending_gangs", spy)
    env = TriggerEnv(fk, tmp_path, [*cluster(), configmap(GANG)])
    try:
        ctl = env.controller()
        env.step(ctl)
        assert judged and "gangpreempt" in judged[-1]
        cm = fk.get("v1", "ConfigMap", "volcano-scheduler-configmap", namespace="volcano-system")
        cm["data"] = {"volcano-scheduler.conf": SHUFFLE}
        fk.update(cm)
        env.clock.advance(SCHEDULER_REFRESH)
        env.step(ctl)
        assert "shuffle" in judged[-1]
    finally:
        env.close()
