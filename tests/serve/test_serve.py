"""``optplan serve`` over real HTTP on 127.0.0.1: the same answers as the Python API, the limits, the
errors, the metrics and the OpenAPI document that describes all of them."""

from __future__ import annotations

import argparse
import http.client
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from optplan import api
from optplan.cli.serve import add_arguments, run
from optplan.serve import ENDPOINTS, PLACE_SOLVERS, REPACK_SOLVERS, OptplanServer, ServeConfig, make_server
from optplan.solvers.repack.base import planner_names
from tests.builders import node, pod, podgroup, repack_run

ROOT = Path(__file__).resolve().parents[2]
SEED = ROOT / "instances" / "seed-dryrun.yaml"
PLACE_DEMO = ROOT / "instances" / "place-demo.yaml"
PLACE_JOBS = ROOT / "instances" / "place-demo-job.yaml"
PAYG_DEMO = ROOT / "instances" / "payg-demo.yaml"


def _docs(path: Path) -> list[dict[str, Any]]:
    """The file's documents as they are (a kind: List stays one object: the server expands it)."""
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _flat(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [i for d in docs for i in (d["items"] if d.get("kind") == "List" else [d])]


# ---- a client for a server running in a thread ---------------------------------------------------------

@dataclass
class Reply:
    status: int
    headers: http.client.HTTPMessage
    raw: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.raw)


@dataclass
class Client:
    server: OptplanServer
    _openapi: dict[str, Any] = field(default_factory=dict)

    @property
    def port(self) -> int:
        return self.server.server_port

    def request(self, method: str, path: str, body: Any = None, *, raw: bytes | None = None,
                content_type: str = "application/json") -> Reply:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            data = raw if raw is not None else None if body is None else json.dumps(body).encode()
            headers = {"Content-Type": content_type} if data is not None else {}
            conn.request(method, path, body=data, headers=headers)
            r = conn.getresponse()
            return Reply(r.status, r.headers, r.read())
        finally:
            conn.close()

    def post(self, path: str, body: Any) -> Reply:
        return self.request("POST", path, body)

    def conforms(self, schema: str, body: Any) -> None:
        """``body`` is valid under components/schemas/<schema> of the server's own OpenAPI document."""
        if not self._openapi:
            self._openapi = self.request("GET", "/openapi.json").json
        root = {"$ref": f"#/components/schemas/{schema}", "components": self._openapi["components"]}
        jsonschema.Draft202012Validator(root).validate(body)


@pytest.fixture
def serve() -> Iterator[Callable[..., Client]]:
    """Start servers on a free port of 127.0.0.1 (options as ServeConfig fields); all stop at the end."""
    running: list[tuple[OptplanServer, threading.Thread]] = []

    def start(**options: Any) -> Client:
        server = make_server(ServeConfig(port=0, **options))
        t = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        t.start()
        running.append((server, t))
        return Client(server)

    yield start
    for server, t in running:
        server.shutdown()
        server.server_close()
        t.join()


# ---- the planner calls: the same answers as the Python API -------------------------------------------------

@pytest.mark.parametrize("solver", ["greedy", "auto"])
def test_plan_the_seed_as_the_api_does(serve: Callable[..., Client], solver: str) -> None:
    c = serve()
    req = {"objects": _docs(SEED), "solver": solver}
    r = c.post("/v1/repack/plan", req)
    assert r.status == 200 and r.headers["Content-Type"] == "application/json"
    assert r.headers["X-Optplan-Time-Limit"] == "10"  # the default per request
    body = r.json
    want = api.plan_repack(api.snapshot_from_objects(_flat(_docs(SEED))), solver=solver, time_limit=10)
    assert body == {"name": "ascend-guarded-dryrun", "reason": want.reason, "status": want.status,
                    "resourceVersion": None}
    plan = body["status"]["plan"]
    assert body["reason"] == "RepackRecommended" and plan["freedNodes"] == ["ascend-node-01"]
    assert [(p["name"], p["toNode"]) for m in plan["moves"] for p in m["pods"]] == [
        ("ascend-batch-training-worker-0", "ascend-node-02"), ("ascend-batch-training-worker-1", "ascend-node-03")]
    assert (plan["summary"]["fragBeforePercent"], plan["summary"]["fragAfterPercent"]) == (33, 0)
    assert c.post("/v1/repack/plan", req).raw == r.raw  # deterministic bytes
    c.conforms("RepackPlanRequest", req)
    c.conforms("RepackPlanResponse", body)


def test_the_run_by_name_inline_with_its_resource_version_and_weights(serve: Callable[..., Client]) -> None:
    c = serve()
    objs = _flat(_docs(SEED))
    run_obj = next(o for o in objs if o["kind"] == "RepackRun")
    others = [o for o in objs if o["kind"] != "RepackRun"]
    run_obj = {**run_obj, "metadata": {**run_obj["metadata"], "resourceVersion": "4711"}}
    weights = {"affectedPodGroups": 2, "movedPods": 0.5}
    inline = c.post("/v1/repack/plan", {"objects": others, "run": run_obj, "solver": "greedy", "weights": weights})
    named = c.post("/v1/repack/plan", {"objects": [*others, run_obj], "run": "ascend-guarded-dryrun",
                                       "solver": "greedy", "weights": weights})
    want = api.plan_repack(api.snapshot_from_objects(others), run_obj, solver="greedy", time_limit=10,
                           weights=api.Weights(affected_pod_groups=2, moved_pods=0.5))
    assert inline.status == named.status == 200
    assert inline.json == named.json == {"name": "ascend-guarded-dryrun", "reason": want.reason,
                                         "status": want.status, "resourceVersion": "4711"}
    missing = c.post("/v1/repack/plan", {"objects": others, "run": "nope", "solver": "greedy"})
    assert (missing.status, missing.json["field"], missing.json["object"]) == (400, "run", "RepackRun/nope")


def test_solver_names_are_the_apis() -> None:
    assert sorted(REPACK_SOLVERS) == sorted({*planner_names(), "kai"})  # kai plans only runs with goals
    assert set(PLACE_SOLVERS) == {"greedy", "cpsat", "auto"}


def test_place_the_demo_as_the_api_does(serve: Callable[..., Client]) -> None:
    c = serve()
    req = {"objects": _docs(PLACE_DEMO), "jobs": _docs(PLACE_JOBS), "solver": "greedy",
           "now": "2025-06-01T12:00:00Z"}
    r = c.post("/v1/place", req)
    assert r.status == 200
    want = api.place_jobs(api.snapshot_from_objects(_flat(_docs(PLACE_DEMO))), _docs(PLACE_JOBS), solver="greedy",
                          time_limit=10, now="2025-06-01T12:00:00Z")
    assert r.json == want.document
    by = {j["name"]: j for j in r.json["jobs"]}
    assert [b["node"] for b in by["large-train"]["bindings"]] == ["n0", "n1", "n2", "n3"]
    c.conforms("PlaceRequest", req)
    c.conforms("PlacementPlan", r.json)
    bad_now = c.post("/v1/place", {**req, "now": "yesterday"})
    assert (bad_now.status, bad_now.json["field"]) == (400, "now")


def test_size_payg_the_demo_as_the_api_does(serve: Callable[..., Client]) -> None:
    c = serve()
    req = {"objects": _docs(PAYG_DEMO)}
    r = c.post("/v1/queues/size-payg", req)
    assert r.status == 200
    assert r.json == api.size_payg(api.snapshot_from_objects(_flat(_docs(PAYG_DEMO)))).to_dict()
    assert [j["job"] for q in r.json["queues"] for j in q["jobs"] if j["granted"]] == ["default/beta-eval"]
    c.conforms("SizePaygRequest", req)
    c.conforms("PaygSizing", r.json)
    bad = c.post("/v1/queues/size-payg", {**req, "resource": 3})
    assert (bad.status, bad.json["field"]) == (400, "resource")


# ---- Execute: nominate and verify on a 3-node cluster ------------------------------------------------------

RUN_STATUS = {"phase": "Running", "plan": {
    "freedNodes": ["a"],
    "moves": [{"namespace": "default", "podGroupName": "pg", "pods": [
        {"name": "p", "fromNode": "a", "toNode": "b", "cards": 1}]}]}}
RELOCATION = {"namespace": "default", "victimPodName": "p", "plannedNodeName": "b",
              "eviction": {"phase": "Succeeded"}}


def _execute_run() -> dict[str, Any]:
    r = repack_run("exec")
    r["spec"]["mode"] = "Execute"
    r["status"] = RUN_STATUS
    return r


def _cluster(used_b: int, used_c: int, p_on: str | None) -> list[dict[str, Any]]:
    """Nodes a, b, c of 8 GPUs; b and c hold other work; p (1 GPU) was evicted from a, the node the plan
    frees, and its replacement (same name, VCJob-style) is pending or bound to ``p_on``."""
    return [node("a"), node("b"), node("c"), podgroup("pg"), podgroup("other"),
            pod("hold-b", "b", used_b, group="other"), pod("hold-c", "c", used_c, group="other"),
            pod("p", p_on, 1, group="pg", phase="Running" if p_on else "Pending")]


@pytest.mark.parametrize(("used_b", "used_c", "expected", "planned"), [
    (6, 4, "b", True),    # the planned node still fits
    (8, 4, "c", False),   # b is full: the other node that keeps the plan (not a, which the plan frees)
    (8, 8, None, False),  # nothing fits: nominate nothing, the scheduler decides
])
def test_nominate(serve: Callable[..., Client], used_b: int, used_c: int, expected: str | None,
                  planned: bool) -> None:
    c = serve()
    req = {"objects": [*_cluster(used_b, used_c, None), _execute_run()], "run": "exec", "relocation": RELOCATION,
           "replacement": "p"}
    r = c.post("/v1/execute/nominate", req)
    assert r.status == 200, r.raw
    assert (r.json["nodeName"], r.json["planned"], r.json["plannedNodeName"]) == (expected, planned, "b")
    want = api.nominate(api.snapshot_from_objects(req["objects"]), "exec", RELOCATION, "p")
    assert r.json == want.model_dump(mode="json", by_alias=True)
    c.conforms("NominateRequest", req)
    c.conforms("Nomination", r.json)


def test_nominate_needs_the_replacement_in_the_snapshot(serve: Callable[..., Client]) -> None:
    r = serve().post("/v1/execute/nominate", {"objects": _cluster(6, 4, None), "run": _execute_run(),
                                              "relocation": RELOCATION, "replacement": "ghost"})
    assert (r.status, r.json["field"], r.json["object"]) == (400, "replacement", "Pod/default/ghost")


@pytest.mark.parametrize(("p_on", "reason", "phase"), [
    ("b", "ExecutionCompleted", "Succeeded"),
    ("c", "ExecutionCompletedWithAlternativePlacement", "Succeeded"),
    (None, "ReplacementsPending", "Running"),
])
def test_verify(serve: Callable[..., Client], p_on: str | None, reason: str, phase: str) -> None:
    c = serve()
    req = {"objects": _cluster(6, 4, p_on), "run": _execute_run()}
    r = c.post("/v1/execute/verify", req)
    assert r.status == 200, r.raw
    body = r.json
    assert (body["phase"], body["conditions"][0]["reason"]) == (phase, reason)
    assert body["freedNodes"] == ["a"]
    assert body["relocations"][0]["placement"].get("actualNodeName") == p_on
    assert body == api.verify(api.snapshot_from_objects(req["objects"]), req["run"]).model_dump(
        mode="json", by_alias=True, exclude_none=True)
    c.conforms("VerifyRequest", req)
    c.conforms("Verification", body)


# ---- errors ------------------------------------------------------------------------------------------------

def test_a_bad_object_is_400_naming_object_and_field(serve: Callable[..., Client]) -> None:
    c = serve()
    objs = [node("a"), pod("p", "a", cpu="-1"), repack_run()]
    r = c.post("/v1/repack/plan", {"objects": objs})
    assert r.status == 400
    assert r.json["field"] == "spec.containers[0].resources.requests.cpu"
    assert r.json["object"] == "Pod/default/p"
    assert "negative" in r.json["error"] and "\n" not in r.json["error"]
    c.conforms("Error", r.json)


@pytest.mark.parametrize(("body", "field"), [
    ({"objects": {"kind": "Node"}}, "objects"),
    ({"objects": [node("a"), 7]}, "objects[1]"),
    ({}, "objects"),
    ({"objects": [], "solver": "simplex"}, "solver"),
    ({"objects": [], "timeLimitSeconds": "soon"}, "timeLimitSeconds"),
    ({"objects": [], "timeLimitSeconds": -1}, "timeLimitSeconds"),
    ({"objects": [], "seed": 1.5}, "seed"),
    ({"objects": [], "weights": {"movedGPUs": 1}}, "weights.movedGPUs"),
    ({"objects": [], "weights": {"movedPods": -1}}, "weights.movedPods"),
    ({"objects": [], "run": 3}, "run"),
    ({"objects": [], "kubeconfig": "/etc/passwd"}, "kubeconfig"),  # no paths from requests
])
def test_bad_request_fields_are_400_naming_the_field(serve: Callable[..., Client], body: dict[str, Any],
                                                     field: str) -> None:
    r = serve().post("/v1/repack/plan", body)
    assert (r.status, r.json["field"]) == (400, field), r.raw


@pytest.mark.parametrize("raw", [b"{not json", b"[1, 2]", b'{"objects": NaN}', b"\xff\xfe"])
def test_a_body_that_is_not_a_json_object_is_400(serve: Callable[..., Client], raw: bytes) -> None:
    r = serve().request("POST", "/v1/repack/plan", raw=raw)
    assert r.status == 400 and r.json["error"]


def test_wrong_content_type_is_415(serve: Callable[..., Client]) -> None:
    r = serve().request("POST", "/v1/place", raw=b"objects: []", content_type="application/yaml")
    assert r.status == 415 and "application/json" in r.json["error"]


def test_unknown_path_is_404_and_wrong_method_405_with_allow(serve: Callable[..., Client]) -> None:
    c = serve()
    r = c.request("GET", "/v1/nope")
    assert r.status == 404 and "/v1/nope" in r.json["error"]
    r = c.request("GET", "/v1/place")
    assert (r.status, r.headers["Allow"]) == (405, "POST")
    r = c.post("/healthz", {})
    assert (r.status, r.headers["Allow"]) == (405, "GET")
    r = c.request("DELETE", "/v1/repack/plan")
    assert (r.status, r.headers["Allow"]) == (405, "POST")


def test_a_body_over_the_limit_is_413(serve: Callable[..., Client]) -> None:
    c = serve(max_body_bytes=1024)
    r = c.post("/v1/repack/plan", {"objects": [node(f"n{i}") for i in range(1000)]})  # ~200 KB
    assert r.status == 413 and "1024" in r.json["error"]
    assert c.post("/v1/repack/plan", {"objects": []}).status == 400  # small bodies still pass the limit


def _raw_exchange(port: int, head: str) -> bytes:
    """Send request headers only, and read what comes back until the server closes or 5 s pass."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(head.encode())
        return s.recv(65536)


def test_the_limit_is_checked_before_reading_the_body(serve: Callable[..., Client]) -> None:
    c = serve(max_body_bytes=1024)
    head = ("POST /v1/repack/plan HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            "Content-Length: 1000000000\r\n")
    assert _raw_exchange(c.port, head + "\r\n").startswith(b"HTTP/1.1 413 ")  # no byte of the body sent
    assert _raw_exchange(c.port, head + "Expect: 100-continue\r\n\r\n").startswith(b"HTTP/1.1 413 ")
    ok = head.replace("1000000000", "10") + "Expect: 100-continue\r\n\r\n"
    assert _raw_exchange(c.port, ok).startswith(b"HTTP/1.1 100 Continue")
    chunked = ("POST /v1/repack/plan HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               "Transfer-Encoding: chunked\r\n\r\n")
    assert _raw_exchange(c.port, chunked).startswith(b"HTTP/1.1 411 ")


def test_the_time_limit_is_capped(serve: Callable[..., Client], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="optplan.serve")
    c = serve(max_time_limit=1)
    r = c.post("/v1/repack/plan", {"objects": _docs(SEED), "solver": "greedy", "timeLimitSeconds": 1000})
    assert (r.status, r.headers["X-Optplan-Time-Limit"]) == (200, "1")
    assert any("timeLimitSeconds 1000 capped to 1" in m for m in caplog.messages)
    r = c.post("/v1/repack/plan", {"objects": _docs(SEED), "solver": "greedy", "timeLimitSeconds": 0.5})
    assert r.headers["X-Optplan-Time-Limit"] == "0.5"  # below the cap: as asked
    assert any('"POST /v1/repack/plan" 200' in m for m in caplog.messages)  # the access line


def test_busy_is_503_with_retry_after(serve: Callable[..., Client]) -> None:
    c = serve(max_concurrent=1, queue_timeout=0)
    req = {"objects": _docs(SEED), "solver": "greedy"}
    assert c.server.slots.acquire(timeout=5)  # a solve in progress
    try:
        r = c.post("/v1/repack/plan", req)
        assert r.status == 503 and int(r.headers["Retry-After"]) >= 1
        assert c.request("GET", "/healthz").status == 200  # health and metrics do not queue
    finally:
        c.server.slots.release()
    assert c.post("/v1/repack/plan", req).status == 200


def test_an_internal_error_is_500_without_traceback(serve: Callable[..., Client],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise api.PlanInvalidError(["pod default/p placed on a full node"])

    monkeypatch.setattr(api, "plan_repack", broken)
    r = serve().post("/v1/repack/plan", {"objects": _docs(SEED)})
    assert r.status == 500
    assert r.json["error"] == "internal error: plan failed validation: pod default/p placed on a full node"
    assert "Traceback" not in r.raw.decode()


# ---- health, metrics, OpenAPI ---------------------------------------------------------------------------

def test_healthz_on_a_kept_alive_connection(serve: Callable[..., Client]) -> None:
    c = serve()
    conn = http.client.HTTPConnection("127.0.0.1", c.port, timeout=10)
    try:
        for _ in range(2):  # HTTP/1.1: one connection, several requests (as a Go client does)
            conn.request("GET", "/healthz")
            r = conn.getresponse()
            assert (r.status, r.read()) == (200, b'{"status":"ok"}')
    finally:
        conn.close()


def _samples(c: Client) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    r = c.request("GET", "/metrics")
    assert r.status == 200 and r.headers["Content-Type"].startswith("text/plain")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(r.raw.decode()) for s in fam.samples}


def test_metrics_count_requests_solves_and_plans(serve: Callable[..., Client]) -> None:
    c, other = serve(), serve()
    assert c.post("/v1/repack/plan", {"objects": _docs(SEED), "solver": "greedy"}).status == 200
    assert c.post("/v1/place", {"objects": _docs(PLACE_DEMO), "jobs": _docs(PLACE_JOBS), "solver": "greedy"}
                  ).status == 200
    assert c.request("GET", "/nowhere").status == 404
    m = _samples(c)
    plan = "/v1/repack/plan"
    assert m[("optplan_requests_total", (("code", "200"), ("endpoint", plan)))] == 1
    assert m[("optplan_requests_total", (("code", "404"), ("endpoint", "other")))] == 1
    assert m[("optplan_request_seconds_count", (("endpoint", plan),))] == 1
    assert m[("optplan_solve_seconds_count", (("endpoint", plan), ("solver", "greedy")))] == 1
    assert m[("optplan_solver_status_total", (("endpoint", plan), ("status", "HEURISTIC")))] == 1
    assert m[("optplan_solver_status_total", (("endpoint", "/v1/place"), ("status", "HEURISTIC")))] == 1
    assert (m[("optplan_plan_moves_sum", ())], m[("optplan_plan_freed_nodes_sum", ())]) == (2, 1)
    assert m[("optplan_placed_jobs_sum", ())] == 3
    assert m[("optplan_inflight_requests", ())] == 1  # this very request
    assert not any(name == "optplan_requests_total" for name, _ in _samples(other))  # a registry per server


def test_openapi_describes_every_endpoint(serve: Callable[..., Client]) -> None:
    c = serve()
    r = c.request("GET", "/openapi.json")
    assert r.status == 200
    doc = r.json
    assert doc["openapi"].startswith("3.1")
    schemas = doc["components"]["schemas"]
    for schema in schemas.values():
        jsonschema.Draft202012Validator.check_schema(schema)
    refs = json.dumps(doc)
    for ref in {part.split('"')[0] for part in refs.split('"$ref": "#/components/schemas/')[1:]}:
        assert ref in schemas, ref  # every reference resolves
    assert set(doc["paths"]) == set(ENDPOINTS)
    for path, ep in ENDPOINTS.items():
        op = doc["paths"][path][ep.method.lower()]
        assert "200" in op["responses"] and "405" in op["responses"]
        if ep.method == "POST":
            assert ep.request is not None
            assert op["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith(ep.request.__name__)
            assert op["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].endswith(
                ep.response or "")
            assert {"400", "411", "413", "415", "500", "503"} <= set(op["responses"])
    for field_name in ("nodeName", "planned", "reason", "feasibleNodeCount"):
        assert field_name in schemas["Nomination"]["properties"]
    assert set(schemas["RepackRunStatus"]["properties"]) == {"phase", "conditions", "plan"}


# ---- running it --------------------------------------------------------------------------------------

def _args(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_arguments(p)
    return p.parse_args(list(argv))


def test_defaults_bind_localhost() -> None:
    args = _args()
    assert (args.host, args.port, args.max_body_bytes, args.max_time_limit) == ("127.0.0.1", 8686, 64 << 20, 60)
    assert (args.max_concurrent, args.queue_timeout, args.workers) == (1, 30, 1)
    with pytest.raises(SystemExit):
        _args("--max-concurrent", "0")


def test_run_serves_until_stopped(capsys: pytest.CaptureFixture[str]) -> None:
    started: list[OptplanServer] = []
    ready = threading.Event()
    result: list[str] = []

    def on_ready(server: OptplanServer) -> None:
        started.append(server)
        ready.set()

    t = threading.Thread(target=lambda: result.append(run(_args("--port", "0"), ready=on_ready)))
    t.start()
    try:
        assert ready.wait(10)
        server = started[0]
        assert server.server_address[0] == "127.0.0.1"  # the default bind address
        assert Client(server).request("GET", "/healthz").status == 200
    finally:
        if started:
            started[0].stopping.set()
        t.join(10)
    assert result == [""]
    assert f"listening on http://127.0.0.1:{server.server_port}" in capsys.readouterr().err


def test_run_in_a_process_stops_cleanly_on_sigterm() -> None:
    code = ("import argparse, sys\nfrom optplan.cli import serve\np = argparse.ArgumentParser()\n"
            "serve.add_arguments(p)\nsys.stdout.write(repr(serve.run(p.parse_args(['--port', '0']))))\n")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert "listening on http://127.0.0.1:" in line, line
        port = int(line.rsplit(":", 1)[1])
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/healthz")
        assert conn.getresponse().status == 200
        conn.close()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert (proc.returncode, out) == (0, "''"), err

