"""The plan server's OpenAPI 3.1 document: the request and response schemas come from their pydantic models
(requests.py, optplan/models), the paths from the endpoint table, the errors from what the HTTP layer answers."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from pydantic.json_schema import models_json_schema

from optplan import __version__
from optplan.models.execute import Nomination, Relocation, Verification
from optplan.models.payg import PaygSizing
from optplan.models.placement import PlacementPlan
from optplan.models.repack import RepackRunStatus
from optplan.serve.config import ServeConfig
from optplan.serve.endpoints import ENDPOINTS
from optplan.serve.handler import ANY_REQUEST_ERRORS, JSON, PLANNER_ERRORS
from optplan.serve.metrics import CONTENT_TYPE
from optplan.serve.requests import REQUESTS


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _fixed_schemas() -> dict[str, Any]:
    """The plan call's envelope, the error and the health answer: bodies the server writes itself."""
    return {
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
        "Error": {"type": "object", "required": ["error"], "additionalProperties": False,
                  "properties": {"error": {"type": "string", "description": "One line"},
                                 "field": {"type": ["string", "null"], "description": "The field at fault"},
                                 "object": {"type": ["string", "null"],
                                            "description": "The object at fault, Kind/namespace/name"}}},
        "Hold": {"type": "object", "additionalProperties": False,
                 "required": ["queue", "priority", "held", "until", "reason", "job", "since"],
                 "description": "The large-job submission throttle's answer (docs/queues.md#submission-throttle)",
                 "properties": {
                     "queue": {"type": "string"}, "priority": {"type": "integer"},
                     "held": {"type": "boolean", "description": "The submission waits at the platform now"},
                     "until": {"type": ["string", "null"], "format": "date-time",
                               "description": "When the hold ends at the latest (earlier when the large job runs)"},
                     "reason": {"type": "string", "description": "One line"},
                     "job": {"type": ["string", "null"], "description": "namespace/name of the large job waited for"},
                     "since": {"type": ["string", "null"], "format": "date-time",
                               "description": "When the queue's waiting mode began"}}},
        "Health": {"type": "object", "required": ["status"], "additionalProperties": False,
                   "properties": {"status": {"const": "ok"}}},
    }


def _with_config(schemas: dict[str, Any], config: ServeConfig) -> None:
    """The time limit's default and cap as this server applies them; the fields' names as they are on the
    wire (pydantic would add titles made from them: "Timelimitseconds")."""
    for schema in schemas.values():
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        limit = schema.get("properties", {}).get("timeLimitSeconds")
        if limit is not None:
            limit["default"] = config.default_time_limit
            limit["description"] = (f"Solver time limit in seconds, capped to {config.max_time_limit:g} "
                                    "(--max-time-limit); the applied value is returned in the "
                                    "X-Optplan-Time-Limit header")


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
    """OpenAPI 3.1 of a server with this configuration."""
    _, defs = models_json_schema(
        [(RepackRunStatus, "serialization"), (PlacementPlan, "serialization"), (Nomination, "serialization"),
         (Verification, "serialization"), (PaygSizing, "serialization"), (Relocation, "validation"),
         *((r, "validation") for r in REQUESTS)],
        by_alias=True, ref_template="#/components/schemas/{model}")
    requests = {name: defs["$defs"][name] for name in (*(r.__name__ for r in REQUESTS), "KubeObject", "Weights")}
    _with_config(requests, config)
    schemas = {**defs.get("$defs", {}), **requests, **_fixed_schemas()}
    paths: dict[str, Any] = {}
    for path, ep in ENDPOINTS.items():
        op: dict[str, Any] = {"summary": ep.summary, "operationId": path.strip("/").replace("/", "_")
                              .replace(".", "_")}
        if ep.request is not None:
            op["requestBody"] = {"required": True, "content": {JSON: {"schema": _ref(ep.request.__name__)}},
                                 "description": f"At most {config.max_body_bytes} bytes (--max-body-bytes)"}
        if path == "/metrics":
            ok = {"description": "Prometheus text exposition",
                  "content": {CONTENT_TYPE.split(";")[0]: {"schema": {"type": "string"}}}}
        elif path == "/openapi.json":
            ok = {"description": "OpenAPI 3.1", "content": {JSON: {"schema": {"type": "object"}}}}
        else:
            ok = {"description": "OK", "content": {JSON: {"schema": _ref(ep.response or "Health")}}}
        if ep.time_limited:
            ok["headers"] = {"X-Optplan-Time-Limit": {"schema": {"type": "number"},
                                                      "description": "The time limit applied, in seconds"}}
        op["responses"] = {"200": ok, **_errors(*ANY_REQUEST_ERRORS)}
        if ep.call is not None:
            op["responses"].update(_errors(*PLANNER_ERRORS))
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
