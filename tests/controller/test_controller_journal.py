"""The controller reads a run's status typed (``optplan.models.journal.RunStatus``, through
``optplan.controller.status.RunView``) and writes it through one function (``status.patch``): the patches keep
their fields and their order, a status another writer broke fails one run's pass with one logged error naming
the field (never the controller), and an unchanged run is not read again."""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Mapping
from typing import Any

import pytest

from optplan.controller import status as st
from optplan.models.journal import (
    EvictionChange,
    PlacementChange,
    RelocationChange,
    RunStatus,
    StatusChange,
)
from tests.controller.test_controller import SETTINGS, Clock, Cluster, _phase, drive, execute_run, seed_objects

RUN = "ascend-execute-001"


class Patches(Cluster):
    """Keeps every status patch the reconciler sends, as sent."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.sent: list[dict[str, Any]] = []

    def patch_repack_run_status(self, name: str, status: Mapping[str, Any], resource_version: str) -> dict[str, Any]:
        self.sent.append(copy.deepcopy(dict(status)))
        return super().patch_repack_run_status(name, status, resource_version)


def _running(c: Cluster) -> Any:
    """The seed Execute run journaled and both pods evicted (their replacements never bind)."""
    c.schedule_mode = "never"
    return drive(c, steps=1)


# ---- the wire form ---------------------------------------------------------------------------------

def test_a_change_writes_only_its_fields_in_the_order_the_controller_always_wrote_them() -> None:
    start = StatusChange(phase="Running", start_time="t0", plan={"freedNodes": []},
                         relocations=(RelocationChange(namespace="a", victim_pod_name="p", victim_pod_uid="u",
                                                       planned_node_name="n",
                                                       eviction=EvictionChange(phase="Pending"),
                                                       placement=PlacementChange(phase="Pending")),),
                         conditions=(st.cond("Planned", True, "RepackRecommended", "m"),))
    assert list(start.fields()) == ["phase", "startTime", "plan", "relocations", "conditions"]
    assert list(start.fields()["relocations"][0]) == ["namespace", "victimPodName", "victimPodUID", "plannedNodeName",
                                                      "eviction", "placement"]
    finish = StatusChange(phase="Succeeded", plan={}, conditions=(), completion_time="t1", start_time="t0")
    assert list(finish.fields()) == ["phase", "plan", "conditions", "completionTime", "startTime"]
    evicted = EvictionChange(phase="Evicted", start_time="t0", completion_time="t1", message="m").fields()
    assert list(evicted) == ["phase", "startTime", "completionTime", "message"]
    placed = PlacementChange(message="m", actual_node_name="n", phase="Bound", replacement_pod_name="r").fields()
    assert list(placed) == ["replacementPodName", "phase", "actualNodeName", "message"]
    group_only = RelocationChange(namespace="a", victim_pod_name="p", placement=PlacementChange(),
                                  replacement_pod_group_name="g").fields()
    assert group_only == {"namespace": "a", "victimPodName": "p", "placement": {}, "replacementPodGroupName": "g"}


def test_a_write_merges_into_the_stored_status_and_sends_nothing_when_nothing_changes() -> None:
    obj = {"metadata": {"name": "r", "generation": 2},
           "status": {"phase": "Running", "future": {"kept": True},
                      "relocations": [{"namespace": "a", "victimPodName": "p", "note": "theirs",
                                       "eviction": {"phase": "Pending"}}]}}
    change = StatusChange(relocations=(RelocationChange(namespace="a", victim_pod_name="p",
                                                        eviction=EvictionChange(phase="Evicting", start_time="t")),))
    patch = st.patch(obj, change, 1_800_000_000.0)
    assert patch == {"relocations": [{"namespace": "a", "victimPodName": "p", "note": "theirs",
                                      "eviction": {"phase": "Evicting", "startTime": "t"}}]}  # no "future", no phase
    assert st.patch(obj, StatusChange(phase="Running"), 1_800_000_000.0) is None


def test_the_seed_executes_patches_keep_their_fields_and_order() -> None:
    c = Patches(seed_objects(), Clock())
    drive(c, steps=40)
    assert _phase(c.run(RUN)) == "Succeeded"
    assert list(c.sent[0]) == ["phase", "startTime", "plan", "relocations", "conditions"]
    assert list(c.sent[-1]) == ["phase", "result", "conditions", "completionTime", "startTime"]
    assert [list(p) for p in c.sent[1:-1]] == [["relocations"]] * (len(c.sent) - 2)
    evicting = c.sent[1]["relocations"][0]
    assert json.dumps(evicting["eviction"]) == json.dumps({"phase": "Evicting", "startTime": "2027-01-15T08:00:00Z"})


# ---- reading -----------------------------------------------------------------------------------------

def test_the_typed_status_reads_what_the_crd_allows() -> None:
    status = RunStatus.model_validate({
        "phase": "Running",
        "conditions": [{"type": "Audited", "status": "True", "reason": "Ticket"}],  # no message: the CRD allows it
        "relocations": [{"namespace": "a", "victimPodName": "p"}],  # nothing journaled yet beyond the key
        "somethingNewer": {"x": 1}})
    rel = status.entry("a/p")
    assert (rel.eviction_phase, rel.placement_phase, rel.settled) == ("Pending", "Pending", False)
    assert status.condition("Audited") is not None and status.condition("Audited").message == ""  # type: ignore[union-attr]


def test_a_malformed_journal_fails_the_pass_with_one_error_naming_the_field_and_the_others_go_on(
        caplog: pytest.LogCaptureFixture) -> None:
    objs = seed_objects()
    c = Cluster([*objs, execute_run("a-dry-run", {**objs[-1], "spec": {**objs[-1]["spec"], "mode": "DryRun"}})],
                Clock())
    r = _running(c)
    broken = copy.deepcopy(c.run(RUN))
    del broken["status"]["relocations"][0]["namespace"]  # another writer's damage
    c.add(broken)
    caplog.set_level(logging.INFO, "optplan.controller")
    wait = r.reconcile_all()
    assert wait is not None and wait > 0  # retried with backoff
    errors = [rec for rec in caplog.records if rec.levelno >= logging.ERROR]
    assert len(errors) == 1 and errors[0].exc_info and "status.relocations[0].namespace" in errors[0].getMessage()
    cond = st.find_condition(c.run(RUN)["status"], st.RECONCILED)
    assert cond is not None and cond["status"] == "False" and cond["reason"] == st.RECONCILE_ERROR
    assert "status.relocations[0].namespace" in cond["message"]
    assert c.run(RUN)["status"]["relocations"][0] == broken["status"]["relocations"][0]  # left as the writer left it
    assert _phase(c.run("a-dry-run")) == "Succeeded"  # the other run went on
    evictions = list(c.eviction_calls)
    r.reconcile_all()
    assert c.eviction_calls == evictions  # nothing acted on from a journal that cannot be read


def test_a_status_that_is_not_a_mapping_is_one_logged_error_and_left_alone(caplog: pytest.LogCaptureFixture) -> None:
    c = Cluster(seed_objects(), Clock())
    r = _running(c)
    broken = copy.deepcopy(c.run(RUN))
    broken["status"] = ["garbage"]
    c.add(broken)
    caplog.set_level(logging.INFO, "optplan.controller")
    assert r.reconcile_all() == SETTINGS.retry
    assert [rec.getMessage() for rec in caplog.records if rec.levelno >= logging.ERROR] == [
        "RepackRun ascend-execute-001: reconcile failed: InputError: RepackRun/ascend-execute-001: "
        "RepackRun/ascend-execute-001: status: expected a mapping, got list"]
    assert c.run(RUN)["status"] == ["garbage"]


def test_another_runs_unreadable_status_counts_by_its_phase() -> None:
    objs = seed_objects()
    c = Cluster(objs, Clock())
    r = _running(c)
    broken = copy.deepcopy(c.run(RUN))
    broken["status"]["relocations"][0]["victimPodUID"] = 5
    c.add(broken)
    c.add(execute_run("ascend-execute-002", objs[-1]))
    r.reconcile_all()
    second = c.run("ascend-execute-002")["status"]
    assert second["phase"] == "Pending"
    assert st.find_condition(second, st.COMPLETE)["reason"] == st.ANOTHER_RUN_ACTIVE  # type: ignore[index]


def test_an_unchanged_run_is_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    c = Cluster(seed_objects(mode="DryRun"), Clock())
    r = drive(c)
    assert _phase(c.run(RUN)) == "Succeeded"
    reads: list[str] = []
    real = st.run_status

    def counting(obj: Mapping[str, Any], source: str) -> RunStatus:
        reads.append(source)
        return real(obj, source)

    monkeypatch.setattr(st, "run_status", counting)
    for _ in range(3):
        r.reconcile_all()
    assert len(reads) <= 1


def test_a_finished_run_whose_journal_another_writer_damaged_is_still_deleted_after_its_ttl() -> None:
    c = Cluster(seed_objects(ttl=60), Clock())
    r = drive(c, steps=40, until=lambda: _phase(c.run(RUN)) in st.FINISHED)
    broken = copy.deepcopy(c.run(RUN))
    broken["status"]["relocations"][0]["victimPodUID"] = 5  # the journal is not read again once finished
    c.add(broken)
    drive(c, r, steps=5)
    assert c.deleted_runs == [RUN]
