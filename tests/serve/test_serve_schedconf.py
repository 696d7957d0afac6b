"""The scheduler configuration in the plan server: a place request may carry it (``schedulerConf``: the YAML
vc-scheduler reads, or the volcano-scheduler ConfigMap), the server may be started with ``--scheduler-conf``,
a ConfigMap among the request's objects counts; the request's wins, then the server's, then the objects'."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from optplan import api
from optplan.adapters.schedconf import parse_scheduler_text
from optplan.cli import serve as serve_cli
from tests.cli.test_live_schedconf import GANG_CONF, cluster, configmap
from tests.serve.test_serve import Client, serve  # noqa: F401  (serve: a fixture)

SEED_CONF = 'actions: "enqueue, allocate, preempt, reclaim, backfill"\n'
NOW = "2025-06-01T12:00:00Z"


def reasons(body: dict[str, Any]) -> list[tuple[str, str]]:
    job = next(j for j in body["jobs"] if j["name"] == "big")
    return [(v["name"], v["reason"]) for v in job.get("victims", [])]


# (the request's schedulerConf, the server's --scheduler-conf, a ConfigMap in objects, the victims' reason)
CASES = [
    (None, None, None, "preempt"),  # seed 002's
    (GANG_CONF, None, None, "gangpreempt"),
    (json.dumps(configmap(GANG_CONF)), None, None, "gangpreempt"),  # the ConfigMap as JSON text
    (None, GANG_CONF, None, "gangpreempt"),
    (None, None, GANG_CONF, "gangpreempt"),
    (SEED_CONF, GANG_CONF, None, "preempt"),  # the request's wins over the server's
    (None, SEED_CONF, GANG_CONF, "preempt"),  # the server's wins over the objects'
    (GANG_CONF, None, SEED_CONF, "gangpreempt"),
]


@pytest.mark.parametrize(("request_conf", "server_conf", "objects_conf", "reason"), CASES)
def test_place_plans_for_the_configuration_given(serve: Callable[..., Client], request_conf: str | None,  # noqa: F811
                                                 server_conf: str | None, objects_conf: str | None,
                                                 reason: str) -> None:
    c = serve(scheduler_conf=None if server_conf is None else parse_scheduler_text(server_conf, "server.yaml"))
    objects = [*cluster(), *([configmap(objects_conf)] if objects_conf else [])]
    req: dict[str, Any] = {"objects": objects, "solver": "greedy", "now": NOW}
    if request_conf is not None:
        req["schedulerConf"] = request_conf
    r = c.post("/v1/place", req)
    assert r.status == 200, r.json
    assert reasons(r.json) == [("v-0", reason)]
    c.conforms("PlaceRequest", req)


def test_the_api_takes_the_text_too() -> None:
    cl = api.snapshot_from_objects(cluster())
    res = api.place_jobs(cl, solver="greedy", now=NOW, scheduler_conf=GANG_CONF)
    assert reasons(res.document) == [("v-0", "gangpreempt")]
    with_cm = api.snapshot_from_objects([*cluster(), configmap(GANG_CONF)])
    assert with_cm.scheduler_conf() is not None
    assert reasons(api.place_jobs(with_cm, solver="greedy", now=NOW).document) == [("v-0", "gangpreempt")]


def test_a_bad_configuration_is_a_400_naming_the_field(serve: Callable[..., Client]) -> None:  # noqa: F811
    c = serve()
    r = c.post("/v1/place", {"objects": cluster(), "solver": "greedy", "schedulerConf": 'actions: "nosuch"\n'})
    assert r.status == 400 and r.json["field"] == "schedulerConf" and "nosuch" in r.json["error"], r.json
    r = c.post("/v1/place", {"objects": [*cluster(), configmap("actions: [1]\n")], "solver": "greedy"})
    assert r.status == 400 and "ConfigMap" in r.json["field"], r.json


def test_serve_reads_its_scheduler_conf_once(tmp_path: Path) -> None:
    f = tmp_path / "conf.yaml"
    f.write_text(GANG_CONF)
    p = argparse.ArgumentParser()
    serve_cli.add_arguments(p)
    cfg = serve_cli.config_from_args(p.parse_args(["--scheduler-conf", str(f)]))
    assert cfg.scheduler_conf is not None and "gangpreempt" in cfg.scheduler_conf.actions
    assert serve_cli.config_from_args(p.parse_args([])).scheduler_conf is None
