"""``optplan serve``: the public API (optplan/api.py) over HTTP/JSON, for a controller written in another
language (Volcano's controllers are Go).

Endpoints (JSON in, JSON out; bodies are deterministic: sorted keys, no spaces)::

    POST /v1/repack/plan       objects, run?, solver?, timeLimitSeconds?, seed?, weights?, deterministic?
                               -> {name, reason, status, resourceVersion}
    POST /v1/place             objects, jobs?, solver?, timeLimitSeconds?, seed?, now?, deterministic? -> the placement
    POST /v1/execute/nominate  objects, run?, relocation, replacement                   -> the Nomination
    POST /v1/execute/verify    objects, run?, timeLimitSeconds?                         -> the Verification
    GET  /healthz              -> {"status": "ok"}
    GET  /metrics              -> Prometheus text exposition (a private registry per server)
    GET  /openapi.json         -> OpenAPI 3.1: every endpoint, request, response and error

``objects`` are Kubernetes objects as the API server returns them (``apiVersion``/``kind``; a ``kind:
List`` is expanded). ``run`` is a RepackRun object, the name of one in ``objects``, or omitted when
``objects`` hold exactly one. The server never writes to a cluster (the controller patches the status
itself, with the returned ``resourceVersion``), never runs a command, never opens a path it receives.

Limits, each checked before the work it protects:

- ``--max-connections`` open connections (a thread each); one more is answered 503 with ``Retry-After``
  and closed, by the accepting thread, without reading it.
- a request line of at most 64 KiB (414) and header lines of ``MAX_HEADER_BYTES`` together (431).
- ``--max-body-bytes`` per body: 413 before any of the body is read when Content-Length says more. A body
  needs exactly one Content-Length (411 without, 400 for two, or with Transfer-Encoding too).
- ``--max-buffered-bytes`` of bodies held at once (default twice the body limit): a request reserves its
  Content-Length before reading the body (and before answering ``Expect: 100-continue``), waits up to
  ``--queue-timeout`` seconds for room, then gets 503 with ``Retry-After``. A body must arrive within
  ``SOCKET_TIMEOUT`` seconds plus one second per ``MIN_BODY_RATE`` bytes (408 otherwise).
- ``--max-concurrent`` requests parse and solve at once (solves are CPU-bound); the others wait up to
  ``--queue-timeout`` seconds (shared with the wait for body room), then get 503 with ``Retry-After``.
- ``timeLimitSeconds`` capped to ``--max-time-limit`` (the applied value is returned in
  ``X-Optplan-Time-Limit``); a body nested deeper than ``MAX_DEPTH`` is refused; a weight is 0 or within
  ``WEIGHT_RESOLUTION``..``MAX_WEIGHT`` (1e-6..1e6), rounded to multiples of ``WEIGHT_RESOLUTION``.

Every answer has an HTTP/1.1 status line, a request line that is not HTTP/1.x included (a TLS handshake,
binary bytes, ``GET`` alone, HTTP/0.9 or 2.0). Errors are JSON ``{"error", "field", "object"}``: 400 bad
input or framing, 404, 405 (with ``Allow``), 408, 411, 413, 414, 415, 431, 500 (a bug; the traceback goes to the
server log only), 503, 505. Any method on a known path but its own is 405 with ``Allow``.
"""

from __future__ import annotations

import argparse
import http.client
import io
import json
import logging
import math
import re
import signal
import socket
import socketserver
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
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
from optplan.models.limits import MAX_WEIGHT, WEIGHT_DIGITS, WEIGHT_RESOLUTION
from optplan.models.placement import PlacementPlan
from optplan.models.repack import DIMENSIONS, RepackRunStatus
from optplan.solvers.core import registry

log = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8686
DEFAULT_MAX_BODY = 64 * 1024 * 1024
DEFAULT_TIME_LIMIT = 10.0
"""A request's time limit when it names none (itself capped by ``--max-time-limit``)."""
DEFAULT_MAX_TIME_LIMIT = 60.0
SOCKET_TIMEOUT = 60.0
"""Seconds a connection may stay silent (idle keep-alive, a stalled body) before it is closed."""
DEFAULT_MAX_CONNECTIONS = 32
MAX_HEADER_BYTES = 64 * 1024
"""All header lines of one request together (the base class alone allows 100 lines of 64 KiB each); more is
431. With the request line (at most 64 KiB too), what one connection buffers before a body is bounded."""
MIN_BODY_RATE = 256 * 1024
"""Bytes per second a body must arrive at, on average, beyond its first ``SOCKET_TIMEOUT`` seconds."""
MAX_DEPTH = 100
"""Deepest nesting of arrays and objects accepted in a body (Kubernetes objects nest about 15 deep)."""
"""Weights are rounded to multiples of this: the exact models scale them to integers, so their ratios
must stay bounded (a weight of 1e308 or 1e-320 would overflow the objective)."""
LINGER_SECONDS = 2.0
"""How long a refused connection is kept half-open, its input thrown away, so that its client reads the
503 rather than a reset."""
DRAIN_BYTES = 1024 * 1024
DRAIN_SECONDS = 1.0
"""After refusing a request whose body was not read, up to this much of it is read and thrown away
before the connection closes, so that the client reads the answer instead of a connection reset."""
REQUEST = "request"
"""The ``file`` part of errors about the request body's own fields."""

REPACK_SOLVERS = (*registry.default_first("repack"),
                  *(n for n in registry.names("goals") if n not in registry.names("repack")))
"""Repack's planners, then those only a run with admit / freeHyperNodes goals takes (``kai``)."""
PLACE_SOLVERS = registry.default_first("placement")
"""The planners a request may name (``optplan.solvers.core.registry``), the default first."""
MAX_SEED = 2**31 - 1
WEIGHT_FIELDS = {d.key: d.field for d in DIMENSIONS}
"""Request key (the status' disruption dimension) -> ``Weights`` field, from the one table (``DIMENSIONS``)."""
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
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    max_buffered_bytes: int | None = None
    """None: twice ``max_body_bytes``."""

    @property
    def body_budget(self) -> int:
        """Bytes of request bodies held at once."""
        return self.max_buffered_bytes if self.max_buffered_bytes is not None else 2 * self.max_body_bytes

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
    p.add_argument("--max-buffered-bytes", type=_positive_int, default=None, metavar="BYTES",
                   help="request bodies held in memory at once, being received or waiting for a solver "
                        "(default twice --max-body-bytes; at least --max-body-bytes); a request reserves its "
                        "Content-Length before its body is read, and waits for room as for a solver")
    p.add_argument("--max-connections", type=_positive_int, default=DEFAULT_MAX_CONNECTIONS, metavar="N",
                   help=f"open connections, idle keep-alive ones included (default {DEFAULT_MAX_CONNECTIONS}); "
                        "one more is answered 503 with Retry-After and closed")
    p.add_argument("--workers", type=_positive_int, default=1, metavar="N",
                   help="CP-SAT worker threads per solve (default 1: deterministic results)")
    p.add_argument("-v", "--verbose", action="count", default=0,
                   help="log to stderr: -v one access line per request, -vv solver progress")


def config_from_args(args: argparse.Namespace) -> ServeConfig:
    return ServeConfig(host=args.host, port=args.port, max_body_bytes=args.max_body_bytes,
                       max_time_limit=args.max_time_limit, max_concurrent=args.max_concurrent,
                       queue_timeout=args.queue_timeout, workers=args.workers,
                       max_connections=args.max_connections, max_buffered_bytes=args.max_buffered_bytes)


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
        self.connections = Gauge("optplan_open_connections", "Connections being served (idle keep-alive "
                                 "ones included)", registry=r)
        self.refused_connections = Counter("optplan_refused_connections", "Connections answered 503 and "
                                           "closed because --max-connections were open", registry=r)
        self.buffered_bytes = Gauge("optplan_buffered_body_bytes", "Request body bytes reserved (being "
                                    "received, waiting for a solver or being decoded)", registry=r)

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
        _kube_object(obj, f"{name}[{i}]")
        kind, items = obj.get("kind"), obj.get("items")
        if isinstance(kind, str) and kind.endswith("List") and isinstance(items, list):
            for j, item in enumerate(items):
                _kube_object(item, f"{name}[{i}].items[{j}]")
                out.append(item)
        else:
            out.append(obj)
    return out


def _kube_object(obj: Any, where: str) -> None:
    """An object with the ``apiVersion`` and ``kind`` strings of the KubeObject schema."""
    if not isinstance(obj, dict):
        raise _bad(where, f"expected an object, got {_json_type(obj)}")
    for key in ("apiVersion", "kind"):
        v = obj.get(key)
        if v is None:
            raise _bad(f"{where}.{key}", "required field is missing (a non-empty string)")
        if not isinstance(v, str) or not v:
            raise _bad(f"{where}.{key}", f"expected a non-empty string, got {_short(v)}")


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
    if isinstance(v, bool) or not isinstance(v, int | float) or (isinstance(v, float) and not math.isfinite(v)) \
            or v <= 0:
        raise _bad("timeLimitSeconds", f"expected a positive number of seconds, got {_short(v)}")
    if v > config.max_time_limit:  # an int too large for a float compares exactly, and is capped too
        log.info("timeLimitSeconds %g capped to %g (--max-time-limit)", v, config.max_time_limit)
        return config.max_time_limit
    return float(v)


def _seed(req: Mapping[str, Any]) -> int:
    v = req.get("seed", 0)
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_SEED:
        raise _bad("seed", f"expected an integer within 0..{MAX_SEED}, got {_short(v)}")
    return v


def _short(v: Any) -> str:
    """A request value quoted in an error, cut short (an integer may have thousands of digits)."""
    text = repr(v) if isinstance(v, bool | float | str) or v is None else _json_type(v)
    if isinstance(v, int) and not isinstance(v, bool):
        text = str(v) if v.bit_length() < 64 else f"an integer of {v.bit_length()} bits"
    return _printable(text, 60)


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
        if isinstance(w, bool) or not isinstance(w, int | float):
            raise _bad(f"weights.{key}", f"expected a number, got {_json_type(w)}")
        if not (w == 0 or WEIGHT_RESOLUTION <= w <= MAX_WEIGHT):  # NaN fails both
            raise _bad(f"weights.{key}", f"expected 0 or a number within {WEIGHT_RESOLUTION:g}..{MAX_WEIGHT:g} "
                                         f"(weights are relative; the exact models scale them to integers), "
                                         f"got {_short(w)}")
        kwargs[WEIGHT_FIELDS[key]] = round(float(w), WEIGHT_DIGITS)
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


def _deterministic(req: Mapping[str, Any]) -> bool:
    deterministic = req.get("deterministic", False)
    if not isinstance(deterministic, bool):
        raise _bad("deterministic", f"expected true or false, got {deterministic!r}")
    return deterministic


def repack_plan(req: Mapping[str, Any], config: ServeConfig, metrics: Metrics) -> Answer:
    _only(req, ("objects", "run", "solver", "timeLimitSeconds", "seed", "weights", "deterministic"))
    solver = _choice(req, "solver", REPACK_SOLVERS)
    limit = _time_limit(req, config)
    seed, weights, run = _seed(req), _weights(req), _run_ref(req)
    deterministic = _deterministic(req)
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
    _only(req, ("objects", "jobs", "solver", "timeLimitSeconds", "seed", "now", "deterministic"))
    solver = _choice(req, "solver", PLACE_SOLVERS)
    limit = _time_limit(req, config)
    seed, now, deterministic = _seed(req), _string(req, "now", required=False), _deterministic(req)
    jobs = _objects(req, "jobs", required=False)
    cluster = _cluster(req)
    try:
        res, dt = _timed(lambda: api.place_jobs(cluster, jobs, solver=solver, time_limit=limit,
                                                workers=config.workers, seed=seed, now=now,
                                                deterministic=deterministic))
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
    deterministic = {"type": "boolean", "default": False, "description": "limits count work, not wall-clock "
                     "seconds: one input, one plan, on any machine"}
    weight = {"anyOf": [{"const": 0}, {"type": "number", "minimum": WEIGHT_RESOLUTION, "maximum": MAX_WEIGHT}],
              "description": f"0, or within {WEIGHT_RESOLUTION:g}..{MAX_WEIGHT:g}, rounded to multiples of "
                             f"{WEIGHT_RESOLUTION:g} (weights are relative)"}

    def request(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
        return {"type": "object", "properties": props, "required": required, "additionalProperties": False}

    return {
        "KubeObject": {"type": "object", "required": ["apiVersion", "kind"], "additionalProperties": True,
                       "description": "A Kubernetes object; a kind ending in List has items, each a KubeObject",
                       "properties": {"apiVersion": {"type": "string", "minLength": 1},
                                      "kind": {"type": "string", "minLength": 1},
                                      "metadata": {"type": "object"}}},
        "Weights": {"type": "object", "additionalProperties": False,
                    "description": "Weights of the disruption dimensions (defaults "
                                   f"{', '.join(str(d.default) for d in DIMENSIONS)})",
                    "properties": {d.key: {**weight, "default": d.default,
                                           "description": f"{d.help}; {weight['description']}"}
                                   for d in DIMENSIONS}},
        "RepackPlanRequest": request({"objects": objects, "run": run,
                                      "solver": {"enum": list(REPACK_SOLVERS), "default": registry.DEFAULT},
                                      "timeLimitSeconds": limit, "seed": seed, "weights": _ref("Weights"),
                                      "deterministic": deterministic},
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
                                 "solver": {"enum": list(PLACE_SOLVERS), "default": registry.DEFAULT},
                                 "timeLimitSeconds": limit, "seed": seed,
                                 "now": {"type": "string", "format": "date-time", "description":
                                         "RFC 3339 time victims are priced at (reproducible outputs)"},
                                 "deterministic": deterministic},
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
        "Health": {"type": "object", "required": ["status"], "additionalProperties": False,
                   "properties": {"status": {"const": "ok"}}},
    }


def _errors(*codes: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for code in codes:
        entry: dict[str, Any] = {"description": HTTPStatus(code).phrase,
                                 "content": {JSON: {"schema": _ref("Error")}}}
        if code == 503:
            entry["description"] += (": every solver slot, the body budget (--max-buffered-bytes) or every "
                                     "connection (--max-connections) is taken")
            entry["headers"] = {"Retry-After": {"schema": {"type": "integer", "minimum": 1}, "required": True,
                                                "description": "Seconds"}}
        if code == 405:
            entry["headers"] = {"Allow": {"schema": {"type": "string"}, "required": True}}
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
        # any request may be malformed (400, 414, 431) or find every connection taken (503)
        op["responses"] = {"200": ok, **_errors(400, 405, 414, 431, 503)}
        if ep.call is not None:
            op["responses"].update(_errors(408, 411, 413, 415, 500))
        op["responses"] = dict(sorted(op["responses"].items()))
        paths[path] = {ep.method.lower(): op}
    return {
        "openapi": "3.1.0",
        "info": {"title": "optplan", "version": __version__,
                 "description": "Optimization planner for Volcano-scheduled clusters: Repack plans, queue placement "
                                "and the Execute-time nominate/verify calls. It never writes to a cluster and "
                                "never executes anything it receives. Unknown paths answer 404, HTTP versions other "
                                "than 1.x 505, each with an Error."},
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


@dataclass(frozen=True)
class _Reply:
    code: int
    body: bytes
    content_type: str = JSON
    headers: Mapping[str, str] = field(default_factory=dict)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    v = float(text)
    if not math.isfinite(v):
        raise ValueError(f"the number {_printable(text, 40)} is out of range")
    return v


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > 40:  # before int(): Python refuses past 4300 digits, in words of its own
        raise ValueError(f"an integer of {len(text)} digits is out of range")
    return int(text)


def _depth(value: Any, limit: int) -> bool:
    """Whether ``value`` nests arrays and objects at most ``limit`` deep (without recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        v, d = stack.pop()
        children = v.values() if isinstance(v, dict) else v if isinstance(v, list) else None
        if children is None:
            continue
        if d > limit:
            return False
        stack.extend((c, d + 1) for c in children if isinstance(c, dict | list))
    return True


_CONTENT_LENGTH = re.compile(r"[0-9]{1,40}")


def _content_length(text: str) -> int | None:
    """A Content-Length value as a number, or None when it is not one (signs, spaces inside, lists)."""
    text = text.strip(" \t")
    return int(text) if _CONTENT_LENGTH.fullmatch(text) else None


_TCHAR = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]")
_CONTROL = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _plausible_request_line(head: bytes) -> bool:
    """Whether the first bytes received could start a request line: a method token, no control bytes
    (a TLS ClientHello starts with 0x16)."""
    line = head.split(b"\n", 1)[0]
    return bool(_TCHAR.match(line)) and not _CONTROL.search(line)


class _HeaderReader:
    """The request's input while the base class reads the header lines: at most ``limit`` bytes of them."""

    def __init__(self, stream: io.BufferedReader, limit: int) -> None:
        self._stream = stream
        self._left = limit

    def readline(self, size: int = -1) -> bytes:
        line = self._stream.readline(size if 0 <= size <= self._left + 1 else self._left + 1)
        self._left -= len(line)
        if self._left < 0:
            raise http.client.LineTooLong(f"header section of more than {MAX_HEADER_BYTES} bytes")
        return line


class ByteBudget:
    """Bytes of request bodies held at once: a request reserves its Content-Length before reading it."""

    def __init__(self, total: int, gauge: Gauge) -> None:
        self.total = total
        self.used = 0
        self._gauge = gauge
        self._cond = threading.Condition()

    def reserve(self, n: int, timeout: float) -> bool:
        with self._cond:
            if not self._cond.wait_for(lambda: self.used + n <= self.total, timeout):
                return False
            self.used += n
            self._gauge.set(self.used)
            return True

    def release(self, n: int) -> None:
        if n:
            with self._cond:
                self.used -= n
                self._gauge.set(self.used)
                self._cond.notify_all()


class OptplanServer(ThreadingHTTPServer):
    """A threading HTTP server holding the configuration, the metrics, the solver slots, the body budget and
    the connection slots."""

    daemon_threads = True
    request_queue_size = 64

    def __init__(self, config: ServeConfig) -> None:
        if config.body_budget < config.max_body_bytes:
            raise InputError(f"{config.body_budget} is below --max-body-bytes {config.max_body_bytes}: no body "
                             "of the largest size could be read",
                             field="--max-buffered-bytes")
        self.config = config
        self.metrics = Metrics()
        self.slots = threading.BoundedSemaphore(config.max_concurrent)
        """Held while a request parses and solves; a test may hold it to make the server busy."""
        self.budget = ByteBudget(config.body_budget, self.metrics.buffered_bytes)
        """Reserved from before a body is read until it is decoded."""
        self.connections = threading.BoundedSemaphore(config.max_connections)
        """Held by each connection's thread while it serves the connection."""
        self._lingering: list[tuple[socket.socket, float]] = []
        """Refused connections, half-closed, whose input is read and thrown away until the client closes
        (or LINGER_SECONDS pass): closing with unread input would reset the connection, and the client
        might lose the 503 it was sent. Only the accepting thread touches this list."""
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

    # -- connections: a thread each, at most --max-connections ----------------------------------------
    def process_request(self, request: Any, client_address: Any) -> None:
        """In the accepting thread: a thread for the connection, or a 503 when all slots are taken."""
        if not self.connections.acquire(blocking=False):
            self._refuse(request, client_address)
            return
        self.metrics.connections.inc()
        try:
            super().process_request(request, client_address)
        except BaseException:  # the thread did not start
            self._connection_done()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._connection_done()

    def _connection_done(self) -> None:
        self.metrics.connections.dec()
        self.connections.release()

    def _refuse(self, request: socket.socket, client_address: Any) -> None:
        """Answer 503 without reading the request, from the accepting thread (so without blocking)."""
        n = self.config.max_connections
        self.metrics.refused_connections.inc()
        log.info("%s: refused: %d connection(s) open (--max-connections)", client_address[0], n)
        body = _dumps({"error": f"busy: {n} connection(s) open (--max-connections); retry later",
                       "field": None, "object": None})
        head = (f"HTTP/1.1 503 Service Unavailable\r\nServer: optplan/{__version__}\r\n"
                f"Content-Type: {JSON}\r\nContent-Length: {len(body)}\r\n"
                f"Retry-After: {self.config.retry_after}\r\nConnection: close\r\n\r\n")
        try:
            request.setblocking(False)
            request.send(head.encode() + body)  # a fresh socket's send buffer holds it whole
            request.shutdown(socket.SHUT_WR)
        except OSError:
            request.close()
            return
        if len(self._lingering) >= n:  # bounded: the oldest goes first
            self._lingering.pop(0)[0].close()
        self._lingering.append((request, time.monotonic() + LINGER_SECONDS))

    def service_actions(self) -> None:
        """Called by serve_forever between accepts: close refused connections whose client is done."""
        super().service_actions()
        if self._lingering:
            now = time.monotonic()
            keep = []
            for sock, deadline in self._lingering:
                if now < deadline and not _drained(sock):
                    keep.append((sock, deadline))
                else:
                    sock.close()
            self._lingering = keep

    def handle_error(self, request: Any, client_address: Any) -> None:
        """An exception that escaped a connection's handler: to the log, never to stderr or the client."""
        log.error("%s: connection failed:\n%s", client_address[0] if client_address else "-",
                  traceback.format_exc().rstrip())

    def server_close(self) -> None:
        super().server_close()
        for sock, _ in self._lingering:
            sock.close()
        self._lingering = []


def _drained(sock: socket.socket) -> bool:
    """Read what a non-blocking socket has received; True once the peer closed (or the socket failed)."""
    try:
        for _ in range(16):
            if not sock.recv(65536):
                return True
    except BlockingIOError:
        return False
    except OSError:
        return True
    return False


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = f"optplan/{__version__}"
    timeout = SOCKET_TIMEOUT
    disable_nagle_algorithm = True  # headers and body go out in two writes: no delayed-ACK stall between
    _body_read = False
    """Whether this request's body has been read (a connection serves several requests)."""
    _expect_continue = False
    """Whether this request asked for ``100 Continue``; it is sent once the body has room in the budget."""

    def version_string(self) -> str:
        return self.server_version

    @property
    def srv(self) -> OptplanServer:
        return cast(OptplanServer, self.server)

    @property
    def _input(self) -> io.BufferedReader:
        return cast(io.BufferedReader, self.rfile)  # StreamRequestHandler's default: buffered reads

    # -- the methods ---------------------------------------------------------------------------------
    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = do_TRACE = do_CONNECT = do_POST
    """405 with Allow where the path has another method (parse_request adds any other method name)."""

    # -- the request line and headers: the base class's parsing, with its gaps closed ----------------------
    def handle_one_request(self) -> None:
        """Refuse, with a status line, input that cannot be an HTTP request line (a TLS handshake, binary
        bytes), before the base class waits for a line end that may never come."""
        self._expect_continue = False
        try:
            head = self._input.peek(2)
            if head.startswith((b"\r\n", b"\n")):  # one empty line may precede a request (RFC 9112, 2.2)
                self._input.read(2 if head.startswith(b"\r") else 1)
                head = self._input.peek(1)
        except OSError:  # idle past the timeout (TimeoutError), or the client went away
            self.close_connection = True
            return
        if head and not _plausible_request_line(head):
            self.raw_requestline, self.requestline, self.command, self.path = b"", "", "", ""
            self.request_version = self.protocol_version
            hint = ": a TLS handshake? This server speaks plain HTTP" if head[:1] == b"\x16" else ""
            self.send_error(400, f"not an HTTP/1.1 request line{hint}")
            return
        super().handle_one_request()

    def parse_request(self) -> bool:
        rfile = self.rfile
        self.rfile = cast(io.BufferedIOBase, _HeaderReader(self._input, MAX_HEADER_BYTES))
        try:
            if not super().parse_request():
                return False
        finally:
            self.rfile = rfile
        if self.request_version == "HTTP/0.9":  # "GET /path", without a version: the base class answers it
            self.send_error(400, "the request line has no HTTP version (HTTP/0.9 is not spoken here)")
            return False
        if not hasattr(self, f"do_{self.command}"):  # QUERY, or any token: 405 or 404 rather than 501
            setattr(self, f"do_{self.command}", self._handle)
        return True

    def handle_expect_100(self) -> bool:
        """``Expect: 100-continue``: the 100 is sent once the body has room in the budget (in ``_post``),
        and never when a refusal comes first; the body then stays unsent."""
        self._expect_continue = True
        return True

    # -- logging: one access line per request, through logging -----------------------------------------
    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        pass  # _handle writes the access line, with the time taken

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s: %s", self.client_address[0], format % args)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """The base class's own refusals (bad request line, headers too large, unknown method) as JSON,
        always with a status line (the base class writes none while it takes the request for HTTP/0.9)."""
        if getattr(self, "request_version", "HTTP/0.9") == "HTTP/0.9":
            self.request_version = self.protocol_version
        text = message or HTTPStatus(code).phrase
        self.close_connection = True
        self._send(code, _dumps({"error": text, "field": None, "object": None}), JSON, {})
        self.srv.metrics.requests.labels("other", str(code)).inc()
        log.info('%s "%s" %d', self.client_address[0], _printable(getattr(self, "requestline", "")), code)
        self._discard(DRAIN_BYTES)  # the rest of the request: closing with it unread could reset the answer

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
        try:
            reply = self._answer(path, ep)
        except Exception:  # a bug in this module: the client gets one line, the log the traceback
            log.error("%s %s failed:\n%s", self.command, _printable(path), traceback.format_exc().rstrip())
            self.close_connection = True
            reply = _Reply(500, _dumps({"error": "internal error; see the server log", "field": None,
                                        "object": None}))
        # accounted before the answer is sent: a client that has read it sees it in /metrics
        self.srv.leave()
        metrics.inflight.dec()
        seconds = time.perf_counter() - start
        metrics.requests.labels(label, str(reply.code)).inc()
        metrics.request_seconds.labels(label).observe(seconds)
        log.info('%s "%s %s" %d %.3fs', self.client_address[0], self.command, _printable(self.path), reply.code,
                 seconds)
        self._send(reply.code, reply.body, reply.content_type, reply.headers)
        if self.close_connection and self._has_unread_body():
            self._drain()

    def _answer(self, path: str, ep: Endpoint | None) -> _Reply:
        try:
            self._check_framing()
            if ep is None:
                raise _Refusal(404, f"no endpoint {_printable(path)}; see /openapi.json")
            if self.command != ep.method:
                raise _Refusal(405, f"{path} accepts {ep.method} only", headers={"Allow": ep.method})
            if ep.call is None:
                if self._has_unread_body():
                    self.close_connection = True  # a body no one reads must not be taken for the next request
                return self._get(path)
            return self._post(path, ep, ep.call)
        except _Refusal as r:
            if self._has_unread_body():
                self.close_connection = True
            return _Reply(r.code, _dumps(r.body), headers=r.headers)

    def _get(self, path: str) -> _Reply:
        if path == "/healthz":
            return _Reply(200, _dumps({"status": "ok"}))
        if path == "/metrics":
            return _Reply(200, self.srv.metrics.exposition(), CONTENT_TYPE_LATEST)
        return _Reply(200, self.srv.openapi)

    def _busy(self, what: str) -> _Refusal:
        return _Refusal(503, f"busy: {what}; retry later", headers={"Retry-After": str(self.srv.config.retry_after)})

    def _post(self, path: str, ep: Endpoint, call: Call) -> _Reply:
        srv, config = self.srv, self.srv.config
        length = self._check_headers(ep)
        deadline = time.monotonic() + config.queue_timeout
        if not srv.budget.reserve(length, config.queue_timeout):
            raise self._busy(f"request bodies fill the budget of {config.body_budget} bytes (--max-buffered-bytes)")
        held = length
        try:
            if self._expect_continue:
                self._continue()
            body: bytearray | None = self._read_body(length)
            if not srv.slots.acquire(timeout=max(0.0, deadline - time.monotonic())):
                raise self._busy(f"{config.max_concurrent} request(s) being solved")
            try:
                assert body is not None
                req = self._decode(body)
                body = None  # the decoded request takes its place: the budget gets the bytes back
                srv.budget.release(held)
                held = 0
                answer = self._call(path, call, req)
            finally:
                srv.slots.release()
        finally:
            srv.budget.release(held)
        m = srv.metrics
        m.solve_seconds.labels(path, answer.solver).observe(answer.solve_seconds)
        if answer.solver_status in SOLVER_STATUSES:
            m.solver_status.labels(path, answer.solver_status).inc()
        headers = {} if answer.time_limit is None else {"X-Optplan-Time-Limit": f"{answer.time_limit:g}"}
        return _Reply(200, _dumps(answer.body), headers=headers)

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
            raise _Refusal(500, f"internal error: {_printable(line, 500)}") from None

    # -- the body ------------------------------------------------------------------------------------
    def _check_framing(self) -> None:
        """Where the body ends must be unambiguous, on every request: one Content-Length, or none."""
        lengths = self.headers.get_all("Content-Length") or []
        if len(lengths) > 1:
            raise _Refusal(400, f"{len(lengths)} Content-Length headers: send one")
        if lengths and "Transfer-Encoding" in self.headers:
            raise _Refusal(400, "both Transfer-Encoding and Content-Length: send Content-Length only")
        if lengths and _content_length(lengths[0]) is None:
            raise _Refusal(400, f"bad Content-Length {_printable(repr(lengths[0]), 60)}")

    def _check_headers(self, ep: Endpoint) -> int:
        """The declared body length of a planner call, after the checks that need no byte of the body."""
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if ctype != JSON:
            raise _Refusal(415, f"expected Content-Type: {JSON}, got {_printable(ctype, 60) or 'none'}")
        if "Transfer-Encoding" in self.headers:
            raise _Refusal(411, "a body without Content-Length (Transfer-Encoding) is not accepted")
        declared = self.headers.get("Content-Length")
        if declared is None:
            raise _Refusal(411, "Content-Length is required")
        length = _content_length(declared) or 0  # _check_framing refused the others
        limit = self.srv.config.max_body_bytes
        if length > limit:
            raise _Refusal(413, f"request body of {length} bytes exceeds the limit of {limit} (--max-body-bytes)")
        return length

    def _continue(self) -> None:
        try:
            super().handle_expect_100()  # 100 Continue
        except OSError:
            self.close_connection = True
            raise _Refusal(400, "the client went away") from None
        self._expect_continue = False

    def _read_body(self, length: int) -> bytearray:
        """The body, into one buffer; it must arrive within SOCKET_TIMEOUT plus one second per
        MIN_BODY_RATE bytes (a client trickling bytes would otherwise hold its budget for ever)."""
        buf = bytearray(length)
        got = 0
        deadline = time.monotonic() + SOCKET_TIMEOUT + length / MIN_BODY_RATE
        try:
            with memoryview(buf) as view:
                while got < length:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise TimeoutError
                    self.connection.settimeout(min(left, SOCKET_TIMEOUT))
                    n = self._input.readinto1(view[got:])
                    if not n:
                        break
                    got += n
        except TimeoutError:
            self.close_connection = True
            raise _Refusal(408, f"the request body did not arrive in time: {got} of {length} bytes") from None
        except OSError:
            got = -1
        finally:
            self.connection.settimeout(self.timeout)
        if got < length:
            self.close_connection = True
            raise _Refusal(400, f"request body ended after {max(got, 0)} of {length} bytes")
        self._body_read = True
        return buf

    def _decode(self, body: bytearray) -> dict[str, Any]:
        try:
            req = json.loads(body.decode("utf-8"), parse_constant=_no_constant, parse_float=_finite,
                             parse_int=_bounded_int)
        except (UnicodeDecodeError, ValueError, RecursionError) as e:
            raise _Refusal(400, f"the body is not JSON: {_printable(' '.join(str(e).split()), 200)}") from None
        if not isinstance(req, dict):
            raise _Refusal(400, f"the body must be a JSON object, got {_json_type(req)}")
        if not _depth(req, MAX_DEPTH):
            raise _Refusal(400, f"the body nests arrays and objects deeper than {MAX_DEPTH} levels")
        return req

    def _has_unread_body(self) -> bool:
        if self._body_read or getattr(self, "headers", None) is None:
            return False
        if "Transfer-Encoding" in self.headers:
            return True
        return any(_content_length(v) != 0 for v in self.headers.get_all("Content-Length") or [])

    def _drain(self) -> None:
        """Throw away (a bounded part of) a body we refused, so the client reads our answer, not a reset."""
        lengths = self.headers.get_all("Content-Length") or []
        declared = _content_length(lengths[0]) if len(lengths) == 1 else None
        chunked = "Transfer-Encoding" in self.headers
        self._discard(DRAIN_BYTES if declared is None or chunked else min(declared, DRAIN_BYTES))

    def _discard(self, left: int) -> None:
        deadline = time.monotonic() + DRAIN_SECONDS
        try:
            self.connection.settimeout(DRAIN_SECONDS)
            while left > 0 and time.monotonic() < deadline:
                chunk = self._input.read1(min(left, 65536))
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
