"""The large-job submission throttle's decision (seed 002 §6.4.2), case by case from the rule: the waiting mode
enters only when a large job needs preemption, holds submissions below the large class to its queue alone,
ends when the large job runs or 300 s after it began; the Queue's annotations carry the start; the CLI and
the plan server give the same answer, and bad input is one line, exit 2."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from optplan import api
from optplan.adapters.kubefile import load_objects
from optplan.cli import main
from optplan.errors import InputError
from optplan.serve import make_server
from optplan.serve.config import ServeConfig
from optplan.solvers.placement import throttle as rule
from optplan.solvers.placement.throttle import WAITING_FOR, WAITING_SINCE, Throttle, should_hold
from tests.builders import node, pod, priority_class, queue
from tests.placement.test_victims import CLASSES, pending, running
from tests.serve.test_serve import Client

CREATED = "2025-06-01T12:00:00Z"


def at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def case(*, big_gpu: int = 8, free_node: bool = False, pc: str = "large-job", annotations: dict[str, str] | None = None,
         big_runs: bool = False, victims_queue: str = "q") -> list[dict[str, Any]]:
    """Queue q: one 8-GPU node held by a normal job (two 4-GPU pods); the large job ``big`` (created at CREATED)
    asks ``big_gpu`` GPUs. Queue ``other`` has nothing waiting."""
    big = pending("big", "q", 1, big_gpu, pc=pc)
    big["metadata"]["creationTimestamp"] = CREATED
    q = queue("q")
    if annotations:
        q["metadata"]["annotations"] = annotations
    objs = [*CLASSES, priority_class("large-never", 800, "Never"), node("a", 8), q, queue("other"),
            *running("v", victims_queue, [("a", 4), ("a", 4)], min_member=0), big]  # minAvailable 0: preemptable
    if free_node:
        objs.append(node("b", 8))
    if big_runs:
        big["status"] = {"state": {"phase": "Running"}}
        objs.append(node("c", 8))
        p = pod("big-w-0", "c", big_gpu, group=None, labels={"volcano.sh/job-name": "big"})
        objs.append(p)
    return objs


def hold(objs: list[dict[str, Any]], now: str, queue_name: str = "q", priority: int = 100,
         timeout: float = 300) -> rule.Hold:
    return should_hold(load_objects(objs).snapshot, queue_name, priority, at(now), Throttle(None, timeout))


@pytest.mark.parametrize(("name", "objs", "now", "queue_name", "priority", "held", "until"), [
    ("enters: needs preemption", case(), "2025-06-01T12:01:00Z", "q", 100, True, "2025-06-01T12:05:00Z"),
    ("debug jobs are held too", case(), "2025-06-01T12:01:00Z", "q", 50, True, "2025-06-01T12:05:00Z"),
    ("just below the large class", case(), "2025-06-01T12:01:00Z", "q", 799, True, "2025-06-01T12:05:00Z"),
    ("a large job is never held", case(), "2025-06-01T12:01:00Z", "q", 800, False, None),
    ("nor a critical one", case(), "2025-06-01T12:01:00Z", "q", 1000, False, None),
    ("other queues unaffected", case(), "2025-06-01T12:01:00Z", "other", 100, False, None),
    ("the last second of the mode", case(), "2025-06-01T12:04:59Z", "q", 100, True, "2025-06-01T12:05:00Z"),
    ("expires after 300 s", case(), "2025-06-01T12:05:00Z", "q", 100, False, None),
    ("not begun before the job", case(), "2025-06-01T11:59:00Z", "q", 100, False, None),
    ("fits without preemption: no mode", case(free_node=True), "2025-06-01T12:01:00Z", "q", 100, False, None),
    ("preemptionPolicy Never: no mode", case(pc="large-never"), "2025-06-01T12:01:00Z", "q", 100, False, None),
    ("preempt cannot place it: no mode", case(big_gpu=16), "2025-06-01T12:01:00Z", "q", 100, False, None),
    ("victims only in another queue: preempt takes none", case(victims_queue="other"), "2025-06-01T12:01:00Z", "q",
     100, False, None),
    ("ends when the large job runs", case(big_runs=True, annotations={WAITING_FOR: "default/big",
                                                                     WAITING_SINCE: CREATED}),
     "2025-06-01T12:01:00Z", "q", 100, False, None),
    ("the Queue's annotation gives the start", case(annotations={WAITING_FOR: "default/big",
                                                                 WAITING_SINCE: "2025-06-01T12:02:00Z"}),
     "2025-06-01T12:06:00Z", "q", 100, True, "2025-06-01T12:07:00Z"),
    ("an annotation naming a job gone: the waiting job's own start", case(annotations={
        WAITING_FOR: "default/gone", WAITING_SINCE: "2025-06-01T11:00:00Z"}), "2025-06-01T12:01:00Z", "q", 100, True,
     "2025-06-01T12:05:00Z"),
])
def test_the_rule_case_by_case(name: str, objs: list[dict[str, Any]], now: str, queue_name: str, priority: int,
                               held: bool, until: str | None) -> None:
    h = hold(objs, now, queue_name, priority)
    assert h.held is held, f"{name}: {h.reason}"
    assert h.to_dict()["until"] == until
    assert (h.job == "default/big") is held
    assert "\n" not in h.reason


def test_the_timeout_is_configurable_and_the_snapshot_large_class_is_the_threshold() -> None:
    assert hold(case(), "2025-06-01T12:01:00Z", timeout=30).held is False
    assert hold(case(), "2025-06-01T12:00:20Z", timeout=30).to_dict()["until"] == "2025-06-01T12:00:30Z"
    objs = [o if o.get("kind") != "PriorityClass" or o["metadata"]["name"] != "large-job"
            else priority_class("large-job", 900) for o in case()]
    objs = [o for o in objs if o.get("kind") != "VCJob" and o.get("kind") != "Job"]
    big = pending("big", "q", 1, 8, pc="large-job")
    big["metadata"]["creationTimestamp"] = CREATED
    snap = load_objects([*objs, big]).snapshot
    h = should_hold(snap, "q", 850, at("2025-06-01T12:01:00Z"))
    assert h.held and "850 < 900" in h.reason


def test_the_pure_rule_the_replay_reads() -> None:
    r = Throttle(800, 300)
    assert rule.enters(800, True, 800) and not rule.enters(800, False, 800) and not rule.enters(799, True, 800)
    assert rule.held_class(100, 800) and not rule.held_class(800, 800)
    assert rule.active(10.0, False, 309.0, r) and not rule.active(10.0, False, 310.0, r)
    assert not rule.active(10.0, True, 11.0, r)
    assert rule.mode_annotations("default/big", at(CREATED)) == {WAITING_FOR: "default/big", WAITING_SINCE: CREATED}


@pytest.mark.parametrize(("annotations", "field"), [
    ({WAITING_FOR: "default/big", WAITING_SINCE: "soon"}, f"metadata.annotations.{WAITING_SINCE}"),
])
def test_a_bad_annotation_is_an_input_error(annotations: dict[str, str], field: str) -> None:
    with pytest.raises(InputError) as e:
        hold(case(annotations=annotations), "2025-06-01T12:01:00Z")
    assert e.value.field == field


# ---- the API, the CLI and the plan server ---------------------------------------------------------------

def test_the_api_reads_classes_from_the_snapshot_or_the_seed() -> None:
    cluster = api.snapshot_from_objects(case())
    h = api.should_hold(cluster, "q", priority_class="normal-job", now="2025-06-01T12:01:00Z")
    assert h.held and h.priority == 100
    no_classes = api.snapshot_from_objects([o for o in case() if o.get("kind") != "PriorityClass"])
    assert api.should_hold(no_classes, "q", priority_class="debug-job", now="2025-06-01T12:01:00Z").priority == 50
    with pytest.raises(InputError):
        api.should_hold(cluster, "q", now="2025-06-01T12:01:00Z")


def _snapshot(tmp_path: Path) -> str:
    path = tmp_path / "snap.yaml"
    path.write_text(yaml.safe_dump_all(case()))
    return str(path)


def test_the_cli_answers_in_json_and_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snap = _snapshot(tmp_path)
    assert main(["throttle", snap, "--queue", "q", "--priority-class", "normal-job", "--now",
                 "2025-06-01T12:01:00Z", "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc == hold(case(), "2025-06-01T12:01:00Z").to_dict()
    assert main(["throttle", snap, "--queue", "other", "--priority", "100", "--now", "2025-06-01T12:01:00Z"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[1].split()[2] == "no" and "not in large-job waiting mode" in out


@pytest.mark.parametrize(("args", "field"), [
    (["--queue", "nope", "--priority-class", "normal-job"], "--queue"),
    (["--queue", "q", "--priority-class", "nope"], "--priority-class"),
    (["--queue", "q", "--priority", "high"], "--priority"),
    (["--queue", "q", "--priority", "99999999999"], "--priority"),
    (["--queue", "q", "--priority-class", "normal-job", "--now", "yesterday"], "--now"),
])
def test_bad_input_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str],
                                      field: str) -> None:
    assert main(["throttle", _snapshot(tmp_path), *args]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and field in err


def test_the_plan_server_answers_as_the_api() -> None:
    server = make_server(ServeConfig(port=0))
    t = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    t.start()
    try:
        c = Client(server)
        body = {"objects": case(), "queue": "q", "priorityClass": "normal-job", "now": "2025-06-01T12:01:00Z"}
        r = c.post("/v1/queues/throttle", body)
        assert r.status == 200
        assert r.json == hold(case(), "2025-06-01T12:01:00Z").to_dict()
        c.conforms("ThrottleRequest", body)
        c.conforms("Hold", r.json)
        assert c.post("/v1/queues/throttle", {**body, "priorityClass": None, "priority": 800}).json["held"] is False
        for bad, field in (({"queue": "nope"}, "queue"), ({"now": "yesterday"}, "now"), ({"priority": "100"},
                                                                                      "priority"),
                           ({"priorityClass": "nope"}, "priorityClass")):
            r = c.post("/v1/queues/throttle", {**body, **bad})
            assert (r.status, r.json["field"]) == (400, field), r.json
    finally:
        server.shutdown()
        server.server_close()
        t.join()
