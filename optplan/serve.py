"""``optplan serve``: the public API (optplan/api.py) over HTTP/JSON, for a controller written in another
language (Volcano's controllers are Go).

Endpoints (JSON in, JSON out; bodies are deterministic: sorted keys, no spaces)::

    POST /v1/repack/plan       objects, run?, solver?, timeLimitSeconds?, seed?, weights?, deterministic?
                               -> {name, reason, status, resourceVersion}
    POST /v1/place             objects, jobs?, solver?, timeLimitSeconds?, seed?, now?  -> the placement
    POST /v1/execute/nominate  objects, run?, relocation, replacement                   -> the Nomination
    POST /v1/execute/verify    objects, run?, timeLimitSeconds?                         -> the Verification
    GET  /healthz              -> {"status": "ok"}
    GET  /metrics              -> Prometheus text exposition (a private registry per server)
    GET  /openapi.json         -> OpenAPI 3.1: every endpoint, request, response and error

``objects`` are Kubernetes objects as the API server returns them (``apiVersion``/``kind``; a ``kind:
List`` is expanded). ``run`` is a RepackRun object, the name of one in ``objects``, or omitted when
``objects`` hold exactly one. The server never writes to a cluster (the controller patches the status
itself, with the returned ``resourceVersion``), never runs a command, never opens a path it receives.

Limits: ``--max-body-bytes`` (413 before any of the body is read when Content-Length says more; a body
without Content-Length is refused with 411), ``timeLimitSeconds`` capped to ``--max-time-limit`` (the
applied value is returned in ``X-Optplan-Time-Limit``), at most ``--max-concurrent`` requests parse and
solve at once (solves are CPU-bound); the others wait up to ``--queue-timeout`` seconds, then get 503
with ``Retry-After``. Errors are JSON ``{"error", "field", "object"}``: 400 bad input, 404, 405 (with
``Allow``), 411, 413, 415, 500 (a bug; the traceback goes to the server log only), 503.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import signal
import socket
import socketserver
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType
from typing import Any, cast
from urllib.parse import urlsplit

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from pydantic.json_schema import models_json_schema

from optplan import __version__, api
from optplan.errors import InputError, OptplanError
from optplan.models.execute import Nomination, Relocation, Verification
from optplan.models.placement import PlacementPlan
from optplan.models.repack import RepackRunStatus

log = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8686
DEFAULT_MAX_BODY = 64 * 1024 * 1024
DEFAULT_TIME_LIMIT = 10.0
"""A request's time limit when it names none (itself capped by ``--max-time-limit``)."""
DEFAULT_MAX_TIME_LIMIT = 60.0
SOCKET_TIMEOUT = 60.0
"""Seconds a connection may stay silent (idle keep-alive, a stalled body) before it is closed."""
DRAIN_BYTES = 1024 * 1024
DRAIN_SECONDS = 1.0
"""After refusing a request whose body was not read, up to this much of it is read and thrown away
before the connection closes, so that the client reads the answer instead of a connection reset."""
REQUEST = "request"
"""The ``file`` part of errors about the request body's own fields."""

REPACK_SOLVERS = ("auto", "greedy", "cpsat", "milp", "greedy-fast")
PLACE_SOLVERS = ("auto", "greedy", "cpsat")
MAX_SEED = 2**31 - 1
WEIGHT_FIELDS = {  # request key (the status' disruption dimension) -> Weights field
    "affectedPodGroups": "affected_pod_groups",
    "podGroupsBelowMinAvailable": "below_min_available",
    "affectedCards": "affected_cards",
    "movedCards": "moved_cards",
    "movedPods": "moved_pods",
    "topologyWidening": "topology_widening",
}
SOLVER_STATUSES = ("OPTIMAL", "FEASIBLE", "FALLBACK", "HEURISTIC")

JSON = "application/json"
SECONDS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
COUNT_BUCKETS = (0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000)


# ---- configuration -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class ServeConfig:
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    max_body_bytes: int = DEFAULT_MAX_BODY
    max_time_limit: float = DEFAULT_MAX_TIME_LIMIT
    max_concurrent: int = 1
    queue_timeout: float = 30.0
    workers: int = 1

    @property
    def default_time_limit(self) -> float:
        return min(DEFAULT_TIME_LIMIT, self.max_time_limit)

    @property
    def retry_after(self) -> int:
        """Seconds a refused client should wait: about one default solve."""
        return max(1, math.ceil(self.default_time_limit))


def _number(text: str, *, positive: bool, integer: bool) -> float:
    try:
        v = int(text) if integer else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not {'an integer' if integer else 'a number'}: {text!r}") from None
    if not math.isfinite(v) or v < 0 or (positive and v == 0):
        raise argparse.ArgumentTypeError(f"must be {'positive' if positive else 'zero or more'}: {text!r}")
    return v


def _positive_int(text: str) -> int:
    return int(_number(text, positive=True, integer=True))


def _port(text: str) -> int:
    v = int(_number(text, positive=False, integer=True))
    if v > 65535:
        raise argparse.ArgumentTypeError(f"not a port: {text!r}")
    return v


def _positive_float(text: str) -> float:
    return _number(text, positive=True, integer=False)


def _non_negative_float(text: str) -> float:
    return _number(text, positive=False, integer=False)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default=DEFAULT_HOST,
                   help=f"address to listen on (default {DEFAULT_HOST}: this machine only; the API has no "
                        "authentication, so expose it only behind something that has)")
    p.add_argument("--port", type=_port, default=DEFAULT_PORT,
                   help=f"TCP port (default {DEFAULT_PORT}; 0 picks a free one); the bound address is printed "
                        "on stderr at start")
    p.add_argument("--max-body-bytes", type=_positive_int, default=DEFAULT_MAX_BODY, metavar="BYTES",
                   help=f"largest request body (default {DEFAULT_MAX_BODY} = 64 MiB: a 10,000-node snapshot "
                        "as JSON is tens of MB); larger ones get 413 before any of the body is read")
    p.add_argument("--max-time-limit", type=_positive_float, default=DEFAULT_MAX_TIME_LIMIT, metavar="SECONDS",
                   help=f"cap on a request's timeLimitSeconds (default {DEFAULT_MAX_TIME_LIMIT:g}; a request "
                        f"without one gets {DEFAULT_TIME_LIMIT:g})")
    p.add_argument("--max-concurrent", type=_positive_int, default=1, metavar="N",
                   help="requests solved at once (default 1: solves are CPU-bound); others wait in a queue")
    p.add_argument("--queue-timeout", type=_non_negative_float, default=30.0, metavar="SECONDS",
                   help="how long a request waits for a free solver before 503 with Retry-After (default 30)")
    p.add_argument("--workers", type=_positive_int, default=1, metavar="N",
                   help="CP-SAT worker threads per solve (default 1: deterministic results)")
    p.add_argument("-v", "--verbose", action="count", default=0,
                   help="log to stderr: -v one access line per request, -vv solver progress")


def config_from_args(args: argparse.Namespace) -> ServeConfig:
    return ServeConfig(host=args.host, port=args.port, max_body_bytes=args.max_body_bytes,
                       max_time_limit=args.max_time_limit, max_concurrent=args.max_concurrent,
                       queue_timeout=args.queue_timeout, workers=args.workers)


# ---- metrics -----------------------------------------------------------------------------------------

class Metrics:
    """The server's Prometheus metrics, in a registry of its own (never the process-wide one)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter("optplan_requests", "HTTP requests answered, by endpoint and status code",
                                ["endpoint", "code"], registry=r)
        self.request_seconds = Histogram("optplan_request_seconds", "Time to answer a request, queueing included",
                                         ["endpoint"], buckets=SECONDS_BUCKETS, registry=r)
        self.solve_seconds = Histogram("optplan_solve_seconds", "Time spent in the planner per successful call",
                                       ["endpoint", "solver"], buckets=SECONDS_BUCKETS, registry=r)
        self.solver_status = Counter("optplan_solver_status", "Plans by the solver record's status "
                                     "(OPTIMAL, FEASIBLE, FALLBACK, HEURISTIC)", ["endpoint", "status"], registry=r)
        self.plan_moves = Histogram("optplan_plan_moves", "Pods moved per repack plan", buckets=COUNT_BUCKETS,
                                    registry=r)
        self.plan_freed_nodes = Histogram("optplan_plan_freed_nodes", "Nodes freed per repack plan",
                                          buckets=COUNT_BUCKETS, registry=r)
        self.placed_jobs = Histogram("optplan_placed_jobs", "Jobs admitted per placement", buckets=COUNT_BUCKETS,
                                     registry=r)
        self.inflight = Gauge("optplan_inflight_requests", "Requests being answered (waiting ones included)",
                              registry=r)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


# ---- request fields ----------------------------------------------------------------------------------

def _json_type(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int | float):
        return "number"
    if isinstance(v, dict):
        return "object"
    if isinstance(v, list):
        return "array"
    return "string" if isinstance(v, str) else type(v).__name__


def _bad(field: str, message: str) -> InputError:
    return InputError(message, file=REQUEST, field=field)


def _only(req: Mapping[str, Any], allowed: tuple[str, ...]) -> None:
    unknown = sorted(set(req) - set(allowed))
    if unknown:
        raise _bad(unknown[0], f"unknown field; expected one of {', '.join(allowed)}")


def _objects(req: Mapping[str, Any], name: str, *, required: bool = True) -> list[dict[str, Any]] | None:
    """An array of Kubernetes objects; a ``kind: ...List`` item is replaced by its items."""
    value = req.get(name)
    if value is None:
        if required:
            raise _bad(name, "required field is missing (an array of Kubernetes objects)")
        return None
    if not isinstance(value, list):
        raise _bad(name, f"expected an array of Kubernetes objects, got {_json_type(value)}")
    out: list[dict[str, Any]] = []
    for i, obj in enumerate(value):
        if not isinstance(obj, dict):
            raise _bad(f"{name}[{i}]", f"expected an object, got {_json_type(obj)}")
        kind, items = obj.get("kind"), obj.get("items")
        if isinstance(kind, str) and kind.endswith("List") and isinstance(items, list):
            for j, item in enumerate(items):
                if not isinstance(item, dict):
                    raise _bad(f"{name}[{i}].items[{j}]", f"expected an object, got {_json_type(item)}")
                out.append(item)
        else:
            out.append(obj)
    return out


def _cluster(req: Mapping[str, Any]) -> api.Cluster:
    return api.snapshot_from_objects(_objects(req, "objects") or [], source="objects")


def _run_ref(req: Mapping[str, Any]) -> dict[str, Any] | str | None:
    run = req.get("run")
    if run is None or isinstance(run, dict):
        return run
    if isinstance(run, str) and run:
        return run
    raise _bad("run", f"expected a RepackRun object or the name of one in objects, got {_json_type(run)}")


def _choice(req: Mapping[str, Any], name: str, choices: tuple[str, ...]) -> str:
    v = req.get(name, choices[0])
    if v not in choices:
        raise _bad(name, f"expected one of {', '.join(choices)}, got {v!r}")
    return str(v)


def _time_limit(req: Mapping[str, Any], config: ServeConfig) -> float:
    v = req.get("timeLimitSeconds")
    if v is None:
        return config.default_time_limit
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v <= 0:
        raise _bad("timeLimitSeconds", f"expected a positive number of seconds, got {v!r}")
    if v > config.max_time_limit:
        log.info("timeLimitSeconds %g capped to %g (--max-time-limit)", v, config.max_time_limit)
        return config.max_time_limit
    return float(v)


def _seed(req: Mapping[str, Any]) -> int:
    v = req.get("seed", 0)
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_SEED:
        raise _bad("seed", f"expected an integer within 0..{MAX_SEED}, got {v!r}")
    return v


def _weights(req: Mapping[str, Any]) -> api.Weights | None:
    v = req.get("weights")
    if v is None:
        return None
    if not isinstance(v, dict):
        raise _bad("weights", f"expected an object, got {_json_type(v)}")
    kwargs: dict[str, float] = {}
    for key, w in v.items():
        if key not in WEIGHT_FIELDS:
            raise _bad(f"weights.{key}", f"unknown weight; expected one of {', '.join(WEIGHT_FIELDS)}")
        if isinstance(w, bool) or not isinstance(w, int | float) or not math.isfinite(w) or w < 0:
            raise _bad(f"weights.{key}", f"expected a non-negative number, got {w!r}")
        kwargs[WEIGHT_FIELDS[key]] = float(w)
    return api.Weights(**kwargs)


def _string(req: Mapping[str, Any], name: str, *, required: bool) -> str | None:
    v = req.get(name)
    if v is None and not required:
        return None
    if not isinstance(v, str) or not v:
        raise _bad(name, f"expected a non-empty string, got {_json_type(v)}")
    return v


# ---- endpoints ---------------------------------------------------------------------------------------

@dataclass
class Answer:
    """A planner endpoint's answer and what the metrics record of it."""

    body: Any
    solver: str = "none"
    time_limit: float | None = None
    solve_seconds: float = 0.0
    solver_status: str | None = None


def _timed(call: Callable[[], Any]) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = call()
    return out, time.perf_counter() - t0


def repack_plan(req: Mapping[str, Any], config: ServeConfig, metrics: Metrics) -> Answer:
    _only(req, ("objects", "run", "solver", "timeLimitSeconds", "seed", "weights", "deterministic"))
    solver = _choice(req, "solver", REPACK_SOLVERS)
    limit = _time_limit(req, config)
    seed, weights, run = _seed(req), _weights(req), _run_ref(req)
    deterministic = req.get("deterministic", False)
    if not isinstance(deterministic, bool):
        raise _bad("deterministic", f"expected true or false, got {deterministic!r}")
    cluster = _cluster(req)
    res, dt = _timed(lambda: api.plan_repack(cluster, run, solver=solver, time_limit=limit,
                                             workers=config.workers, seed=seed, weights=weights,
                                             deterministic=deterministic))
    result = cast(api.RepackResult, res)
    plan = result.status.get("plan", {})
    metrics.plan_moves.observe(sum(len(m.get("pods", ())) for m in plan.get("moves", ())))
    metrics.plan_freed_nodes.observe(len(plan.get("freedNodes", ())))
    meta = result.run.raw.get("metadata")
    version = meta.get("resourceVersion") if isinstance(meta, dict) else None
    body = {"name": result.run.name, "reason": result.reason, "status": result.status,
            "resourceVersion": version if isinstance(version, str) else None}
    return Answer(body, solver=solver, time_limit=limit, solve_seconds=dt,
                  solver_status=plan.get("solver", {}).get("status"))


def place(req: Mapping[str, Any], config: ServeConfig, metrics: Metrics) -> Answer:
    _only(req, ("objects", "jobs", "solver", "timeLimitSeconds", "seed", "now"))
    solver = _choice(req, "solver", PLACE_SOLVERS)
    limit = _time_limit(req, config)
    seed, now = _seed(req), _string(req, "now", required=False)
    jobs = _objects(req, "jobs", required=False)
    cluster = _cluster(req)
    try:
        res, dt = _timed(lambda: api.place_jobs(cluster, jobs, solver=solver, time_limit=limit,
                                                workers=config.workers, seed=seed, now=now))
    except InputError as e:
        if e.field == "--now":  # the CLI's name for it
            raise InputError(e.reason, file=REQUEST, field="now") from None
        raise
    doc = cast(api.PlacementResult, res).document
    metrics.placed_jobs.observe(sum(1 for j in doc.get("jobs", ()) if j.get("admitted")))
    return Answer(doc, solver=solver, time_limit=limit, solve_seconds=dt,
                  solver_status=doc.get("solver", {}).get("status"))


def nominate(req: Mapping[str, Any], config: ServeConfig, metrics: Metrics) -> Answer:
    _only(req, ("objects", "run", "relocation", "replacement"))
    relocation = req.get("relocation")
    if not isinstance(relocation, dict):
        raise _bad("relocation", f"expected a status.relocations[] item (an object), got {_json_type(relocation)}")
    replacement = _string(req, "replacement", required=True) or ""
    run = _run_ref(req)
    cluster = _cluster(req)
    res, dt = _timed(lambda: api.nominate(cluster, run, relocation, replacement))
    # nulls kept: "nodeName": null is the answer "nominate nothing", and the schema requires the field
    body = cast(api.Nomination, res).model_dump(mode="json", by_alias=True)
    return Answer(body, solve_seconds=dt)


def verify(req: Mapping[str, Any], config: ServeConfig, metrics: Metrics) -> Answer:
    _only(req, ("objects", "run", "timeLimitSeconds"))
    limit = _time_limit(req, config)
    run = _run_ref(req)
    cluster = _cluster(req)
    res, dt = _timed(lambda: api.verify(cluster, run, time_limit=limit))
    body = cast(api.Verification, res).model_dump(mode="json", by_alias=True, exclude_none=True)
    return Answer(body, time_limit=limit, solve_seconds=dt)


Call = Callable[[Mapping[str, Any], ServeConfig, Metrics], Answer]


@dataclass(frozen=True)
class Endpoint:
    method: str
    call: Call | None
    """None for the built-in GET endpoints."""
    summary: str
    request: str | None = None
    """The request body's schema in components/schemas."""
    response: str | None = None
    time_limited: bool = False


ENDPOINTS: dict[str, Endpoint] = {
    "/v1/repack/plan": Endpoint("POST", repack_plan, "Plan a RepackRun: the status subresource to write",
                                "RepackPlanRequest", "RepackPlanResponse", time_limited=True),
    "/v1/place": Endpoint("POST", place, "Place VCJobs under queues and network topology",
                          "PlaceRequest", "PlacementPlan", time_limited=True),
    "/v1/execute/nominate": Endpoint("POST", nominate, "The node for an evicted pod's replacement "
                                     "(status.nominatedNodeName), or none", "NominateRequest", "Nomination"),
    "/v1/execute/verify": Endpoint("POST", verify, "Measure an Execute run on the snapshot after it: result, "
                                   "final condition, completed relocations", "VerifyRequest", "Verification",
                                   time_limited=True),
    "/healthz": Endpoint("GET", None, "Liveness", response="Health"),
    "/metrics": Endpoint("GET", None, "Prometheus metrics"),
    "/openapi.json": Endpoint("GET", None, "This document"),
}


# ---- OpenAPI -----------------------------------------------------------------------------------------

def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _request_schemas(config: ServeConfig) -> dict[str, Any]:
    objects = {"type": "array", "items": _ref("KubeObject"),
               "description": "The snapshot: Nodes, Pods, PodGroups, PodDisruptionBudgets, Queues, PriorityClasses, "
                              "HyperNodes, VCJobs, ModelServings, RepackRuns, as the API server returns them; a "
                              "kind: List is expanded, other kinds are ignored"}
    run = {"oneOf": [_ref("KubeObject"), {"type": "string", "minLength": 1}, {"type": "null"}],
           "description": "The RepackRun: an object (apiVersion repack.volcano.sh/v1alpha1), the name of one in "
                          "objects, or omitted when objects hold exactly one"}
    limit = {"type": "number", "exclusiveMinimum": 0, "default": config.default_time_limit,
             "description": f"Solver time limit in seconds, capped to {config.max_time_limit:g} (--max-time-limit);"
                            " the applied value is returned in the X-Optplan-Time-Limit header"}
    seed = {"type": "integer", "minimum": 0, "maximum": MAX_SEED, "default": 0}

    def request(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
        return {"type": "object", "properties": props, "required": required, "additionalProperties": False}

    return {
        "KubeObject": {"type": "object", "required": ["apiVersion", "kind"], "additionalProperties": True,
                       "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                                      "metadata": {"type": "object"}}},
        "Weights": {"type": "object", "additionalProperties": False,
                    "description": "Weights of the disruption dimensions (defaults 1.0, 0.8, 0.6, 0.3, 0.1, 0.5)",
                    "properties": {k: {"type": "number", "minimum": 0} for k in WEIGHT_FIELDS}},
        "RepackPlanRequest": request({"objects": objects, "run": run,
                                      "solver": {"enum": list(REPACK_SOLVERS), "default": "auto"},
                                      "timeLimitSeconds": limit, "seed": seed, "weights": _ref("Weights"),
                                      "deterministic": {"type": "boolean", "default": False,
                                                        "description": "limits count work, not wall-clock "
                                                        "seconds: one input, one plan, on any machine"}},
                                     ["objects"]),
        "RepackPlanResponse": {
            "type": "object", "required": ["name", "reason", "status", "resourceVersion"],
            "additionalProperties": False,
            "properties": {
                "name": {"type": "string", "description": "The RepackRun planned"},
                "reason": {"type": "string", "description": "The Complete condition's reason, e.g. "
                           "RepackRecommended, InsufficientImprovement"},
                "status": _ref("RepackRunStatus") | {"description": "The status subresource to write"},
                "resourceVersion": {"type": ["string", "null"], "description": "The run's "
                                    "metadata.resourceVersion as sent: patch the status with it"}}},
        "PlaceRequest": request({"objects": objects,
                                 "jobs": {"type": "array", "items": _ref("KubeObject"), "description":
                                          "VCJobs to place; without it, the pending VCJobs in objects"},
                                 "solver": {"enum": list(PLACE_SOLVERS), "default": "auto"},
                                 "timeLimitSeconds": limit, "seed": seed,
                                 "now": {"type": "string", "format": "date-time", "description":
                                         "RFC 3339 time victims are priced at (reproducible outputs)"}},
                                ["objects"]),
        "NominateRequest": request({"objects": objects | {"description": "The live snapshot"}, "run": run,
                                    "relocation": _ref("Relocation"),
                                    "replacement": {"type": "string", "minLength": 1, "description":
                                                    "The replacement pod: name (the relocation's namespace) "
                                                    "or namespace/name; it must be in objects"}},
                                   ["objects", "relocation", "replacement"]),
        "VerifyRequest": request({"objects": objects | {"description": "The snapshot after execution"},
                                  "run": run, "timeLimitSeconds": limit}, ["objects"]),
        "Error": {"type": "object", "required": ["error"], "additionalProperties": False,
                  "properties": {"error": {"type": "string", "description": "One line"},
                                 "field": {"type": ["string", "null"], "description": "The field at fault"},
                                 "object": {"type": ["string", "null"],
                                            "description": "The object at fault, Kind/namespace/name"}}},
        "Health": {"type": "object", "required": ["status"], "properties": {"status": {"const": "ok"}}},
    }


def _errors(*codes: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for code in codes:
        entry: dict[str, Any] = {"description": HTTPStatus(code).phrase,
                                 "content": {JSON: {"schema": _ref("Error")}}}
        if code == 503:
            entry["headers"] = {"Retry-After": {"schema": {"type": "integer"}, "description": "Seconds"}}
        if code == 405:
            entry["headers"] = {"Allow": {"schema": {"type": "string"}}}
        out[str(code)] = entry
    return out


def openapi_document(config: ServeConfig) -> dict[str, Any]:
    """OpenAPI 3.1; the planner's response models come from their pydantic definitions."""
    _, defs = models_json_schema(
        [(RepackRunStatus, "serialization"), (PlacementPlan, "serialization"), (Nomination, "serialization"),
         (Verification, "serialization"), (Relocation, "validation")],
        by_alias=True, ref_template="#/components/schemas/{model}")
    schemas = {**defs.get("$defs", {}), **_request_schemas(config)}
    paths: dict[str, Any] = {}
    for path, ep in ENDPOINTS.items():
        op: dict[str, Any] = {"summary": ep.summary, "operationId": path.strip("/").replace("/", "_")
                              .replace(".", "_")}
        if ep.request is not None:
            op["requestBody"] = {"required": True, "content": {JSON: {"schema": _ref(ep.request)}},
                                 "description": f"At most {config.max_body_bytes} bytes (--max-body-bytes)"}
        if path == "/metrics":
            ok = {"description": "Prometheus text exposition",
                  "content": {CONTENT_TYPE_LATEST.split(";")[0]: {"schema": {"type": "string"}}}}
        elif path == "/openapi.json":
            ok = {"description": "OpenAPI 3.1", "content": {JSON: {"schema": {"type": "object"}}}}
        else:
            ok = {"description": "OK", "content": {JSON: {"schema": _ref(ep.response or "Health")}}}
        if ep.time_limited:
            ok["headers"] = {"X-Optplan-Time-Limit": {"schema": {"type": "number"},
                                                      "description": "The time limit applied, in seconds"}}
        op["responses"] = {"200": ok, **_errors(405)}
        if ep.call is not None:
            op["responses"].update(_errors(400, 411, 413, 415, 500, 503))
        paths[path] = {ep.method.lower(): op}
    return {
        "openapi": "3.1.0",
        "info": {"title": "optplan", "version": __version__,
                 "description": "Optimization planner for Volcano-scheduled clusters: Repack plans, queue placement "
                                "and the Execute-time nominate/verify calls. It never writes to a cluster and "
                                "never executes anything it receives. Unknown paths answer 404 with an Error."},
        "paths": paths,
        "components": {"schemas": dict(sorted(schemas.items()))},
    }


# ---- HTTP --------------------------------------------------------------------------------------------

def _dumps(body: Any) -> bytes:
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


class _Refusal(Exception):
    """An HTTP error answered with an Error body."""

    def __init__(self, code: int, message: str, *, field: str | None = None, obj: str | None = None,
                 headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.body = {"error": message, "field": field, "object": obj}
        self.headers = dict(headers or {})


def _printable(text: str, limit: int = 200) -> str:
    """A client-supplied string made safe for a one-line log record."""
    out = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text[:limit])
    return out + ("..." if len(text) > limit else "")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


class OptplanServer(ThreadingHTTPServer):
    """A threading HTTP server holding the configuration, the metrics and the solver slots."""

    daemon_threads = True
    request_queue_size = 64

    def __init__(self, config: ServeConfig) -> None:
        self.config = config
        self.metrics = Metrics()
        self.slots = threading.BoundedSemaphore(config.max_concurrent)
        """Held while a request parses and solves; a test may hold it to make the server busy."""
        self.openapi = _dumps(openapi_document(config))
        self.stopping = threading.Event()
        """Set (by a signal or by the caller) to make ``run`` shut the server down."""
        self._active = 0
        self._idle = threading.Condition()
        if ":" in config.host:
            self.address_family = socket.AF_INET6
        super().__init__((config.host, config.port), _Handler)

    def server_bind(self) -> None:
        socketserver.TCPServer.server_bind(self)  # not HTTPServer's: no reverse DNS lookup of the address
        host, port = self.server_address[:2]
        self.server_name, self.server_port = str(host), int(port)

    @property
    def url(self) -> str:
        host = f"[{self.server_name}]" if ":" in self.server_name else self.server_name
        return f"http://{host}:{self.server_port}"

    def enter(self) -> None:
        with self._idle:
            self._active += 1

    def leave(self) -> None:
        with self._idle:
            self._active -= 1
            self._idle.notify_all()

    def wait_idle(self, timeout: float) -> bool:
        """Wait for the requests being answered to finish; False if some still run after ``timeout``."""
        with self._idle:
            return self._idle.wait_for(lambda: self._active == 0, timeout)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = f"optplan/{__version__}"
    timeout = SOCKET_TIMEOUT
    _body_read = False
    """Whether this request's body has been read (a connection serves several requests)."""

    def version_string(self) -> str:
        return self.server_version

    @property
    def srv(self) -> OptplanServer:
        return cast(OptplanServer, self.server)

    # -- the methods ---------------------------------------------------------------------------------
    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = do_POST

    def handle_expect_100(self) -> bool:
        """Answer ``Expect: 100-continue`` with the final refusal when the headers already decide it."""
        try:
            self._check_headers(self._endpoint()[1])
        except _Refusal:
            return True  # the method handler sends the refusal without reading the body
        return super().handle_expect_100()

    # -- logging: one access line per request, through logging -----------------------------------------
    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        pass  # _handle writes the access line, with the time taken

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s: %s", self.client_address[0], format % args)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """The base class's own refusals (bad request line, headers too large, unknown method) as JSON."""
        text = message or HTTPStatus(code).phrase
        self.close_connection = True
        self._send(code, _dumps({"error": text, "field": None, "object": None}), JSON, {})
        self.srv.metrics.requests.labels("other", str(code)).inc()
        log.info('%s "%s" %d', self.client_address[0], _printable(getattr(self, "requestline", "")), code)

    # -- the work ------------------------------------------------------------------------------------
    def _endpoint(self) -> tuple[str, Endpoint | None]:
        path = urlsplit(self.path).path
        return path, ENDPOINTS.get(path)

    def _handle(self) -> None:
        start = time.perf_counter()
        path, ep = self._endpoint()
        label = path if ep is not None else "other"
        metrics = self.srv.metrics
        self._body_read = False
        metrics.inflight.inc()
        self.srv.enter()
        code = 500
        try:
            code = self._answer(path, ep)
        finally:
            self.srv.leave()
            metrics.inflight.dec()
            seconds = time.perf_counter() - start
            metrics.requests.labels(label, str(code)).inc()
            metrics.request_seconds.labels(label).observe(seconds)
            log.info('%s "%s %s" %d %.3fs', self.client_address[0], self.command, _printable(self.path), code,
                     seconds)

    def _answer(self, path: str, ep: Endpoint | None) -> int:
        try:
            if ep is None:
                raise _Refusal(404, f"no endpoint {_printable(path)}; see /openapi.json")
            if self.command != ep.method:
                raise _Refusal(405, f"{path} accepts {ep.method} only", headers={"Allow": ep.method})
            if ep.call is None:
                return self._get(path)
            return self._post(path, ep, ep.call)
        except _Refusal as r:
            if r.code >= 400 and self._has_unread_body():
                self.close_connection = True
            self._send(r.code, _dumps(r.body), JSON, r.headers)
            if self.close_connection:
                self._drain()
            return r.code

    def _get(self, path: str) -> int:
        if path == "/healthz":
            self._send(200, _dumps({"status": "ok"}), JSON, {})
        elif path == "/metrics":
            self._send(200, self.srv.metrics.exposition(), CONTENT_TYPE_LATEST, {})
        else:
            self._send(200, self.srv.openapi, JSON, {})
        return 200

    def _post(self, path: str, ep: Endpoint, call: Call) -> int:
        srv = self.srv
        body = self._read_body(self._check_headers(ep))
        if not srv.slots.acquire(timeout=srv.config.queue_timeout):
            raise _Refusal(503, f"busy: {srv.config.max_concurrent} request(s) being solved; retry later",
                           headers={"Retry-After": str(srv.config.retry_after)})
        try:
            req = self._decode(body)
            answer = self._call(path, call, req)
        finally:
            srv.slots.release()
        m = srv.metrics
        m.solve_seconds.labels(path, answer.solver).observe(answer.solve_seconds)
        if answer.solver_status in SOLVER_STATUSES:
            m.solver_status.labels(path, answer.solver_status).inc()
        headers = {} if answer.time_limit is None else {"X-Optplan-Time-Limit": f"{answer.time_limit:g}"}
        self._send(200, _dumps(answer.body), JSON, headers)
        return 200

    def _call(self, path: str, call: Call, req: dict[str, Any]) -> Answer:
        srv = self.srv
        try:
            return call(req, srv.config, srv.metrics)
        except InputError as e:
            raise _Refusal(400, str(e), field=e.field, obj=e.obj) from None
        except Exception as e:  # a bug (PlanInvalidError included): the traceback stays in the log
            log.error("%s failed:\n%s", path, traceback.format_exc().rstrip())
            kind = "" if isinstance(e, OptplanError) else f"{type(e).__name__}: "
            line = " ".join(f"{kind}{e}".split())[:500]
            raise _Refusal(500, f"internal error: {line}") from None

    # -- the body ------------------------------------------------------------------------------------
    def _check_headers(self, ep: Endpoint | None) -> int:
        """The declared body length, after the checks that need no byte of the body."""
        if ep is None or self.command != ep.method or ep.call is None:
            return 0
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if ctype != JSON:
            raise _Refusal(415, f"expected Content-Type: {JSON}, got {ctype or 'none'}")
        if self.headers.get("Transfer-Encoding"):
            raise _Refusal(411, "a body without Content-Length (Transfer-Encoding) is not accepted")
        declared = self.headers.get("Content-Length")
        if declared is None:
            raise _Refusal(411, "Content-Length is required")
        if not declared.strip().isdigit():
            raise _Refusal(400, f"bad Content-Length {declared!r}")
        length = int(declared)
        limit = self.srv.config.max_body_bytes
        if length > limit:
            raise _Refusal(413, f"request body of {length} bytes exceeds the limit of {limit} (--max-body-bytes)")
        return length

    def _read_body(self, length: int) -> bytes:
        body = self.rfile.read(length)
        if len(body) < length:
            self.close_connection = True
            raise _Refusal(400, f"request body ended after {len(body)} of {length} bytes")
        self._body_read = True
        return body

    def _decode(self, body: bytes) -> dict[str, Any]:
        try:
            req = json.loads(body.decode("utf-8"), parse_constant=_no_constant)
        except (UnicodeDecodeError, ValueError, RecursionError) as e:
            raise _Refusal(400, f"the body is not JSON: {' '.join(str(e).split())[:200]}") from None
        if not isinstance(req, dict):
            raise _Refusal(400, f"the body must be a JSON object, got {_json_type(req)}")
        return req

    def _has_unread_body(self) -> bool:
        if self._body_read:
            return False
        return bool(self.headers.get("Transfer-Encoding")) or self.headers.get("Content-Length", "0").strip() != "0"

    def _drain(self) -> None:
        """Throw away (a bounded part of) a body we refused, so the client reads our answer, not a reset."""
        try:
            left = min(int(self.headers.get("Content-Length", "0")), DRAIN_BYTES)
        except ValueError:
            left = DRAIN_BYTES
        if self.headers.get("Transfer-Encoding"):
            left = DRAIN_BYTES
        deadline = time.monotonic() + DRAIN_SECONDS
        try:
            self.connection.settimeout(DRAIN_SECONDS)
            while left > 0 and time.monotonic() < deadline:
                chunk = self.rfile.read1(min(left, 65536))
                if not chunk:
                    break
                left -= len(chunk)
        except OSError:
            pass

    def _send(self, code: int, body: bytes, content_type: str, headers: Mapping[str, str]) -> None:
        try:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for k, v in headers.items():
                self.send_header(k, v)
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)
        except OSError as e:  # the client went away
            log.debug("%s: could not send the answer: %s", self.client_address[0], e)
            self.close_connection = True


# ---- running it --------------------------------------------------------------------------------------

def make_server(config: ServeConfig) -> OptplanServer:
    """A bound, not yet serving server (``serve_forever`` in a thread to start it)."""
    try:
        return OptplanServer(config)
    except OSError as e:
        raise InputError(f"cannot listen on {config.host}:{config.port}: {e.strerror or e}",
                         field="--host/--port") from None


def run(args: argparse.Namespace, *, ready: Callable[[OptplanServer], None] | None = None) -> str:
    """Serve until SIGINT or SIGTERM (or ``server.stopping`` is set), then finish the requests being
    answered (for at most the time limit cap) and return ""."""
    config = config_from_args(args)
    server = make_server(config)
    sys.stderr.write(f"optplan serve: listening on {server.url}\n")
    sys.stderr.flush()
    log.info("serving on %s: %s", server.url, config)
    previous: dict[signal.Signals, Any] = {}

    def stop(signum: int, frame: FrameType | None) -> None:
        log.info("%s: shutting down", signal.Signals(signum).name)
        for s, h in previous.items():  # a second signal acts as it did before
            signal.signal(s, h)
        server.stopping.set()

    if threading.current_thread() is threading.main_thread():
        for s in (signal.SIGINT, signal.SIGTERM):
            previous[s] = signal.signal(s, stop)
    loop = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, name="optplan-serve",
                            daemon=True)
    loop.start()
    try:
        if ready is not None:
            ready(server)
        server.stopping.wait()
    finally:
        server.shutdown()
        if not server.wait_idle(config.max_time_limit + 5):
            log.warning("requests still running at shutdown are abandoned")
        server.server_close()
        loop.join()
        for s, h in previous.items():
            signal.signal(s, h)
    return ""
