"""The plan server's endpoints: each planner call takes its request model (requests.py) and answers through
the public API (optplan/api.py); ``routes`` hands them to the HTTP layer (http.py), which knows none of them."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from optplan import api
from optplan.errors import InputError
from optplan.serve.config import ServeConfig
from optplan.serve.handler import Reply, Route, dumps
from optplan.serve.metrics import CONTENT_TYPE, Metrics
from optplan.serve.requests import (
    REQUEST,
    NominateRequest,
    PlaceRequest,
    RepackPlanRequest,
    Request,
    SizePaygRequest,
    ThrottleRequest,
    VerifyRequest,
    expand,
)

log = logging.getLogger("optplan.serve")

SOLVER_STATUSES = ("OPTIMAL", "FEASIBLE", "FALLBACK", "HEURISTIC")


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


def _time_limit(asked: float | None, config: ServeConfig) -> float:
    if asked is None:
        return config.default_time_limit
    if asked > config.max_time_limit:
        log.info("timeLimitSeconds %g capped to %g (--max-time-limit)", asked, config.max_time_limit)
        return config.max_time_limit
    return asked


def _scheduler_conf(text: str | None, config: ServeConfig, cluster: api.Cluster) -> api.SchedulerConf:
    """The configuration a request plans for: its ``schedulerConf``, else the server's ``--scheduler-conf``, else
    a volcano-scheduler ConfigMap in its objects, else seed 002's (``api.resolve_scheduler_conf``)."""
    if text is None and config.scheduler_conf is not None:
        return config.scheduler_conf
    try:
        return api.resolve_scheduler_conf(cluster, text)
    except InputError as e:
        where = "schedulerConf" if text is not None else "objects (the volcano-scheduler ConfigMap)"
        raise InputError(f"{e.field + ': ' if e.field else ''}{e.reason}", file=REQUEST, field=where) from None


def repack_plan(req: RepackPlanRequest, config: ServeConfig, metrics: Metrics) -> Answer:
    limit = _time_limit(req.time_limit_seconds, config)
    given = req.weights_or_none()
    weights = None if given is None else api.Weights(**given)
    cluster = api.snapshot_from_objects(expand(req.objects), source="objects")
    conf = _scheduler_conf(req.scheduler_conf, config, cluster)
    res, dt = _timed(lambda: api.plan_repack(cluster, req.run, solver=req.solver, time_limit=limit,
                                             workers=config.workers, seed=req.seed, weights=weights,
                                             deterministic=req.deterministic, scheduler_conf=conf))
    result = cast(api.RepackResult, res)
    plan = result.status.get("plan", {})
    metrics.plan_moves.observe(sum(len(m.get("pods", ())) for m in plan.get("moves", ())))
    metrics.plan_freed_nodes.observe(len(plan.get("freedNodes", ())))
    meta = result.run.raw.get("metadata")
    version = meta.get("resourceVersion") if isinstance(meta, dict) else None
    body = {"name": result.run.name, "reason": result.reason, "status": result.status,
            "resourceVersion": version if isinstance(version, str) else None}
    return Answer(body, solver=req.solver, time_limit=limit, solve_seconds=dt,
                  solver_status=plan.get("solver", {}).get("status"))


def place(req: PlaceRequest, config: ServeConfig, metrics: Metrics) -> Answer:
    limit = _time_limit(req.time_limit_seconds, config)
    jobs = None if req.jobs is None else expand(req.jobs)
    cluster = api.snapshot_from_objects(expand(req.objects), source="objects")
    conf = _scheduler_conf(req.scheduler_conf, config, cluster)
    try:
        res, dt = _timed(lambda: api.place_jobs(cluster, jobs, solver=req.solver, time_limit=limit,
                                                workers=config.workers, seed=req.seed, now=req.now,
                                                deterministic=req.deterministic, safety=req.safe_preemption,
                                                scheduler_conf=conf))
    except InputError as e:
        if e.field == "--now":  # the CLI's name for it
            raise InputError(e.reason, file=REQUEST, field="now") from None
        raise
    doc = cast(api.PlacementResult, res).document
    metrics.placed_jobs.observe(sum(1 for j in doc.get("jobs", ()) if j.get("admitted")))
    return Answer(doc, solver=req.solver, time_limit=limit, solve_seconds=dt,
                  solver_status=doc.get("solver", {}).get("status"))


def size_payg(req: SizePaygRequest, config: ServeConfig, metrics: Metrics) -> Answer:
    jobs = None if req.jobs is None else expand(req.jobs)
    cluster = api.snapshot_from_objects(expand(req.objects), source="objects")
    try:
        res, dt = _timed(lambda: api.size_payg(cluster, jobs, resource=req.resource, now=req.now))
    except InputError as e:
        if e.field == "--now":  # the CLI's name for it
            raise InputError(e.reason, file=REQUEST, field="now") from None
        raise
    return Answer(cast(api.PaygSizing, res).to_dict(), solve_seconds=dt)


def throttle(req: ThrottleRequest, config: ServeConfig, metrics: Metrics) -> Answer:
    cluster = api.snapshot_from_objects(expand(req.objects), source="objects")
    names = {"--now": "now", "--queue": "queue", "--priority-class": "priorityClass"}  # the CLI's names
    try:
        res, dt = _timed(lambda: api.should_hold(cluster, req.queue, priority_class=req.priority_class,
                                                 priority=req.priority, now=req.now,
                                                 timeout_seconds=req.timeout_seconds,
                                                 large_priority=req.large_priority))
    except InputError as e:
        if e.field in names:
            raise InputError(e.reason, file=REQUEST, field=names[e.field]) from None
        raise
    return Answer(cast(api.Hold, res).to_dict(), solve_seconds=dt)


def nominate(req: NominateRequest, config: ServeConfig, metrics: Metrics) -> Answer:
    cluster = api.snapshot_from_objects(expand(req.objects), source="objects")
    res, dt = _timed(lambda: api.nominate(cluster, req.run, req.relocation, req.replacement))
    # nulls kept: "nodeName": null is the answer "nominate nothing", and the schema requires the field
    body = cast(api.Nomination, res).model_dump(mode="json", by_alias=True)
    return Answer(body, solve_seconds=dt)


def verify(req: VerifyRequest, config: ServeConfig, metrics: Metrics) -> Answer:
    limit = _time_limit(req.time_limit_seconds, config)
    cluster = api.snapshot_from_objects(expand(req.objects), source="objects")
    res, dt = _timed(lambda: api.verify(cluster, req.run, time_limit=limit))
    body = cast(api.Verification, res).model_dump(mode="json", by_alias=True, exclude_none=True)
    return Answer(body, time_limit=limit, solve_seconds=dt)


Call = Callable[[Any, ServeConfig, Metrics], Answer]


@dataclass(frozen=True)
class Endpoint:
    method: str
    summary: str
    request: type[Request] | None = None
    """The request body's model (its schema in components/schemas under the model's name)."""
    response: str | None = None
    """The 200 answer's schema in components/schemas."""
    call: Call | None = None
    """None for the built-in GET endpoints."""
    time_limited: bool = False
    probe: bool = False
    """A health probe: answered even when every connection slot (--max-connections) is taken."""


ENDPOINTS: dict[str, Endpoint] = {
    "/v1/repack/plan": Endpoint("POST", "Plan a RepackRun: the status subresource to write", RepackPlanRequest,
                                "RepackPlanResponse", repack_plan, time_limited=True),
    "/v1/place": Endpoint("POST", "Place VCJobs under queues and network topology", PlaceRequest, "PlacementPlan",
                          place, time_limited=True),
    "/v1/queues/size-payg": Endpoint("POST", "Size the pay-as-you-go queues for their pending jobs: the Queue "
                                     "patches to apply now and when they finish, the spot capabilities that follow",
                                     SizePaygRequest, "PaygSizing", size_payg),
    "/v1/queues/throttle": Endpoint("POST", "The large-job submission throttle: whether a new submission to a queue "
                                    "waits at the platform now, and until when at most", ThrottleRequest, "Hold",
                                    throttle),
    "/v1/execute/nominate": Endpoint("POST", "The node for an evicted pod's replacement (status.nominatedNodeName), "
                                     "or none", NominateRequest, "Nomination", nominate),
    "/v1/execute/verify": Endpoint("POST", "Measure an Execute run on the snapshot after it: result, final "
                                   "condition, completed relocations", VerifyRequest, "Verification", verify,
                                   time_limited=True),
    "/healthz": Endpoint("GET", "Liveness: answered whatever the connection cap", response="Health", probe=True),
    "/metrics": Endpoint("GET", "Prometheus metrics"),
    "/openapi.json": Endpoint("GET", "This document"),
}


def _planner(path: str, ep: Endpoint, config: ServeConfig, metrics: Metrics, body: dict[str, Any] | None) -> Reply:
    assert ep.request is not None and ep.call is not None and body is not None
    answer = ep.call(ep.request.parse(body), config, metrics)
    metrics.solve_seconds.labels(path, answer.solver).observe(answer.solve_seconds)
    if answer.solver_status in SOLVER_STATUSES:
        metrics.solver_status.labels(path, answer.solver_status).inc()
    headers = {} if answer.time_limit is None else {"X-Optplan-Time-Limit": f"{answer.time_limit:g}"}
    return Reply(200, dumps(answer.body), headers=headers)


def routes(config: ServeConfig, metrics: Metrics, openapi: bytes) -> dict[str, Route]:
    """Every endpoint as the HTTP layer serves it; ``openapi`` is the document /openapi.json answers."""
    gets: dict[str, Callable[[dict[str, Any] | None], Reply]] = {
        "/healthz": lambda _: Reply(200, dumps({"status": "ok"})),
        "/metrics": lambda _: Reply(200, metrics.exposition(), CONTENT_TYPE),
        "/openapi.json": lambda _: Reply(200, openapi),
    }
    out: dict[str, Route] = {}
    for path, ep in ENDPOINTS.items():
        answer = gets[path] if ep.call is None else functools.partial(_planner, path, ep, config, metrics)
        out[path] = Route(ep.method, answer, probe=ep.probe)
    return out
