"""Live cluster snapshots through the official ``kubernetes`` client (the only module importing it).

Every list goes through the generic request path and keeps the server's JSON as is: the objects are
exactly what ``kubectl get -o json`` shows, so a written snapshot plans the same as the live cluster.
Lists are paged; 429 and 5xx are retried with backoff; a custom resource whose CRD is not installed
reads as none. Secrets are never read, and of the ConfigMaps only two, by name: vc-scheduler's
(``scheduler_configmap``: the configuration the planners decide under) and its device-share plugin's
(``device_configmap``: which GPU types have a MIG geometry).

Limits: each request has a total deadline, connection to last byte (``timeout``), enforced by a watchdog
that shuts the request's socket down, so a server trickling bytes cannot hold a command; all the requests
of one client, retries and their waits included, share the client's deadline (``deadline``); a long-lived
client (the controller) bounds each call instead (``call_deadline``: one call's requests, retries and
waits included, from the call's start); a response body larger than ``max_bytes`` is refused. A watch has
its own bounds: the server's ``timeoutSeconds`` and a total deadline of that plus ``timeout``. A DNS
lookup is the exception: the system resolver bounds it.
"""

from __future__ import annotations

import contextlib
import functools
import http.client
import json
import logging
import math
import os
import re
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import urllib3
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from optplan.adapters.kubelimits import API_DEADLINE, REQUEST_TIMEOUT
from optplan.adapters.output import to_yaml, write_atomic
from optplan.adapters.schedconf import CONFIGMAP_NAME, CONFIGMAP_NAMESPACE, device_config_location
from optplan.adapters.vgpu import DEVICE_CONFIG_NAME, DEVICE_CONFIG_NAMESPACE
from optplan.errors import ConflictError, InputError, KubeError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Resource:
    """One kind the planners read, listed across all namespaces."""

    group: str  # "" for the core API
    version: str
    plural: str
    kind: str
    optional: bool = False  # a custom resource: a 404 (CRD not installed) means none
    field_selector: str | None = None

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def path(self) -> str:
        return f"/apis/{self.group}/{self.version}/{self.plural}" if self.group else f"/api/v1/{self.plural}"

    @property
    def name(self) -> str:
        """As RBAC and kubectl spell it: ``poddisruptionbudgets.policy``."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


RESOURCES: tuple[Resource, ...] = (
    Resource("", "v1", "nodes", "Node"),
    Resource("", "v1", "pods", "Pod", field_selector="status.phase!=Succeeded,status.phase!=Failed"),
    Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget"),
    Resource("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass"),
    Resource("scheduling.volcano.sh", "v1beta1", "podgroups", "PodGroup", optional=True),
    Resource("scheduling.volcano.sh", "v1beta1", "queues", "Queue", optional=True),
    Resource("topology.volcano.sh", "v1alpha1", "hypernodes", "HyperNode", optional=True),
    Resource("batch.volcano.sh", "v1alpha1", "jobs", "Job", optional=True),
    Resource("workload.serving.volcano.sh", "v1alpha1", "modelservings", "ModelServing", optional=True),
    Resource("repack.volcano.sh", "v1alpha1", "repackruns", "RepackRun", optional=True),
)
REPACK_RUNS = RESOURCES[-1]
PODS = RESOURCES[1]
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease")
EVENTS = Resource("events.k8s.io", "v1", "events", "Event")


class NotFoundError(KubeError):
    """The object asked for does not exist (404)."""


class AlreadyBoundError(KubeError):
    """A pod's ``status.nominatedNodeName`` refused because the pod is bound already (422: the API server
    forbids nominating a bound pod)."""


class WatchExpired(KubeError):
    """The watch's resourceVersion is too old (410 Gone): list again, then watch from the new list."""


@dataclass(frozen=True)
class Answer:
    """The API server's answer to a request whose refusals the caller decides about (an eviction)."""

    status: int
    message: str


def _ns_path(res: Resource, namespace: str, name: str = "") -> str:
    base = f"/apis/{res.group}/{res.version}" if res.group else "/api/v1"
    tail = f"/{quote(name, safe='')}" if name else ""
    return f"{base}/namespaces/{quote(namespace, safe='')}/{res.plural}{tail}"

_RETRYABLE = frozenset({429, 500, 502, 503, 504})

MAX_RESPONSE_BYTES = 128 * 2**20
"""Default cap on one response body. A page is at most ``page_size`` objects (500): pods and nodes run
2-50 KiB each, so a page of large ones is ~25 MiB; only a broken server or proxy sends more."""
_CHUNK = 64 * 1024


@dataclass
class _Response:
    status: int
    body: Any  # the decoded JSON, or None
    text: str
    retry_after: float | None

    def message(self) -> str:
        """The server's reason in one line: a Status' message, else the start of the body."""
        msg = self.body.get("message") if isinstance(self.body, dict) else None
        text = msg if isinstance(msg, str) and msg else self.text[:200] or "(no message)"
        return " ".join(text.split())


class KubeClient:
    """Reads snapshots and writes RepackRun status through a private ``ApiClient``."""

    def __init__(self, api: k8s.ApiClient, *, timeout: float = REQUEST_TIMEOUT, deadline: float | None = API_DEADLINE,
                 max_bytes: int = MAX_RESPONSE_BYTES, page_size: int = 500, attempts: int = 5, backoff: float = 0.5,
                 max_delay: float = 30.0, call_deadline: float | None = None) -> None:
        self.api = api
        self.timeout = timeout  # total deadline of each request
        self.deadline = deadline  # of all requests together, from now; None: none
        self.call_deadline = call_deadline  # of each call's requests, retries included, from its start; None: none
        self._monotonic = time.monotonic  # the clock of the deadlines and the sleep between retries (tests)
        self._sleep = time.sleep
        self._deadline_at = self._monotonic() + deadline if deadline is not None else math.inf
        self.max_bytes = max_bytes
        self.page_size = page_size
        self.attempts = max(1, attempts)
        self.backoff = backoff
        self.max_delay = max_delay
        self._missing: set[str] = set()  # optional resources already reported absent
        self._forbidden: set[str] = set()  # ConfigMaps already reported forbidden (a controller reads them again)
        self.on_error: Callable[[str, int], None] | None = None
        """Told of each request answered with an error (verb, HTTP code) or not answered at all (code 0):
        the controller counts them (``optplan_api_errors_total``)."""
        _watch_connections(api.rest_client.pool_manager)

    @property
    def host(self) -> str:
        return str(self.api.configuration.host)

    def close(self) -> None:
        self.api.close()

    def __enter__(self) -> KubeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- reading ----------------------------------------------------------------------------

    def snapshot_objects(self) -> list[dict[str, Any]]:
        """Every object the planners use, kind by kind, each kind sorted by (namespace, name)."""
        out: list[dict[str, Any]] = []
        for res in RESOURCES:
            out.extend(self.list_objects(res))
        return out

    def scheduler_configmap(self) -> dict[str, Any] | None:
        """The volcano-scheduler ConfigMap (``schedconf.CONFIGMAP_NAMESPACE``/``CONFIGMAP_NAME``) as a snapshot
        keeps it (kind, namespace, name, data), or None when the cluster has none or it may not be read
        (403: a warning says so); either way the planners then assume seed 002's configuration."""
        return self._configmap(CONFIGMAP_NAMESPACE, CONFIGMAP_NAME, "planning for seed 002's scheduler configuration")

    def device_configmap(self, scheduler_configmap: Mapping[str, Any] | None) -> dict[str, Any] | None:
        """The device-share plugin's ConfigMap (its MIG geometries: ``vgpu.DEVICE_CONFIG_NAMESPACE``/``NAME``, or
        where ``scheduler_configmap``'s deviceshare arguments say), as ``scheduler_configmap`` keeps it; None
        when absent or forbidden (Volcano then uses its default: no MIG geometry)."""
        ns, name = device_config_location(scheduler_configmap, (DEVICE_CONFIG_NAMESPACE, DEVICE_CONFIG_NAME))
        return self._configmap(ns, name, "a register's mig devices are read as hami-core (no MIG geometry known)")

    def _configmap(self, ns: str, name: str, without: str) -> dict[str, Any] | None:
        what = f'configmaps "{name}" in namespace {ns}'
        resp = self._request("GET", f"/api/v1/namespaces/{ns}/configmaps/{name}", verb="get", what=what)
        if resp.status == 403:  # said once while it stays forbidden
            if what not in self._forbidden:
                self._forbidden.add(what)
                log.warning("forbidden: cannot get %s (403): %s", what, without)
            return None
        self._forbidden.discard(what)
        if resp.status == 404:
            return None
        obj = self._ok(resp, "get", what)
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns},
                "data": obj.get("data") or {}}

    def list_objects(self, res: Resource) -> list[dict[str, Any]]:
        """All objects of one resource, page by page. An expired continue token restarts the list once."""
        return self.list_with_version(res)[0]

    def list_with_version(self, res: Resource) -> tuple[list[dict[str, Any]], str]:
        """``list_objects`` and the list's resourceVersion (that of its first page: the pages of one list
        are one snapshot), from which a watch resumes. Sorted by (namespace, name)."""
        items: list[dict[str, Any]] = []
        token: str | None = None
        restarted = False
        version = ""
        while True:
            query: list[tuple[str, str]] = [("limit", str(self.page_size))]
            if res.field_selector:
                query.append(("fieldSelector", res.field_selector))
            if token:
                query.append(("continue", token))
            resp = self._request("GET", res.path, query=query, verb="list", what=f"{res.name} at the cluster scope")
            if resp.status == 410 and token and not restarted:
                log.info("%s: the continue token expired; listing again from the start", res.name)
                items, token, restarted = [], None, True
                continue
            if resp.status == 404 and res.optional and not token:
                if res.name not in self._missing:
                    self._missing.add(res.name)
                    log.warning("%s: the API server does not serve %s (CRD not installed?); reading none",
                                res.name, res.api_version)
                return [], ""
            page = self._ok(resp, "list", f"{res.name} at the cluster scope")
            if not token:
                version = str((page.get("metadata") or {}).get("resourceVersion") or "")
            items.extend(i for i in page.get("items") or [] if isinstance(i, dict))
            token = (page.get("metadata") or {}).get("continue") or None
            if token is None:
                break
        cleaned = [clean(res, item) for item in items]
        cleaned.sort(key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"].get("name", "")))
        return cleaned, version

    def get_repack_run(self, name: str) -> dict[str, Any]:
        what = f'{REPACK_RUNS.name} "{name}"'
        resp = self._request("GET", f"{REPACK_RUNS.path}/{quote(name, safe='')}", verb="get", what=what)
        if resp.status == 404:
            raise NotFoundError(f"not found: no RepackRun named {name!r} (404): {resp.message()}")
        return clean(REPACK_RUNS, self._ok(resp, "get", what))

    # ---- writing ----------------------------------------------------------------------------

    def patch_repack_run_status(self, name: str, status: Mapping[str, Any], resource_version: str) -> dict[str, Any]:
        """Merge-patch ``status`` on the status subresource, on condition that the run is still at
        ``resource_version`` (the version the plan was computed from): else ConflictError."""
        what = f'{REPACK_RUNS.name} "{name}" status'
        body = {"metadata": {"resourceVersion": resource_version}, "status": dict(status)}
        resp = self._request("PATCH", f"{REPACK_RUNS.path}/{quote(name, safe='')}/status", body=body,
                             content_type="application/merge-patch+json", verb="patch", what=what,
                             retry_server_errors=False)
        if resp.status == 409:
            raise ConflictError(f"RepackRun {name!r} changed since resourceVersion {resource_version} was read "
                                f"(409 Conflict): read it again and re-plan")
        if resp.status == 404:
            raise NotFoundError(f"not found: no RepackRun named {name!r} (404): {resp.message()}")
        return clean(REPACK_RUNS, self._ok(resp, "patch", what))

    # ---- the controller's calls ---------------------------------------------------------------

    def evict(self, namespace: str, name: str, *, uid: str | None, grace_period_seconds: int | None) -> Answer:
        """POST a policy/v1 Eviction for the pod, on condition that it is still the pod with ``uid`` (a pod
        recreated under the same name is never evicted: 409). Never retried here: 200/201 (accepted),
        404 (gone), 409 (another pod now) and 429 (a PodDisruptionBudget refuses, or too many requests)
        are answers for the caller; anything else is a KubeError."""
        what = f'pods "{namespace}/{name}" eviction'
        options: dict[str, Any] = {}
        if uid:
            options["preconditions"] = {"uid": uid}
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace},
                **({"deleteOptions": options} if options else {})}
        resp = self._send("POST", _ns_path(PODS, namespace, name) + "/eviction", [],
                          {"Accept": "application/json", "Content-Type": "application/json"}, body,
                          verb="create", what=what)
        if resp.status in (200, 201, 404, 409, 429):
            return Answer(resp.status, _with_causes(resp))
        self._ok(resp, "create", what)
        raise KubeError(f"cannot create {what} ({resp.status}): {resp.message()}")  # pragma: no cover

    def read_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The pod as the API server has it now (None: no pod of that name). A list of the namespace's
        pods by ``metadata.name`` field selector: the ``list`` the controller already holds, no ``get``."""
        what = f'pods "{namespace}/{name}"'
        query = [("fieldSelector", f"metadata.name={name}")]
        resp = self._request("GET", _ns_path(PODS, namespace), query=query, verb="list", what=what)
        items = [i for i in self._ok(resp, "list", what).get("items") or [] if isinstance(i, dict)]
        return clean(PODS, items[0]) if items else None

    def patch_pod_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> dict[str, Any]:
        """Merge-patch the pod's status subresource (``nominatedNodeName``)."""
        what = f'pods "{namespace}/{name}" status'
        resp = self._request("PATCH", _ns_path(PODS, namespace, name) + "/status", body={"status": dict(status)},
                             content_type="application/merge-patch+json", verb="patch", what=what)
        if resp.status == 404:
            raise NotFoundError(f"not found: no pod {namespace}/{name} (404): {resp.message()}")
        if resp.status == 422 and "already bound" in resp.message():
            raise AlreadyBoundError(f"cannot patch {what} (422): {resp.message()}")
        return clean(PODS, self._ok(resp, "patch", what))

    def patch_pod_metadata(self, namespace: str, name: str, metadata: Mapping[str, Any]) -> dict[str, Any]:
        """Merge-patch the pod's metadata (Execute's device pin: ``annotations``); NotFoundError on 404."""
        what = f'pods "{namespace}/{name}"'
        resp = self._request("PATCH", _ns_path(PODS, namespace, name), body={"metadata": dict(metadata)},
                             content_type="application/merge-patch+json", verb="patch", what=what)
        if resp.status == 404:
            raise NotFoundError(f"not found: no pod {namespace}/{name} (404): {resp.message()}")
        return clean(PODS, self._ok(resp, "patch", what))

    def create_repack_run(self, run: Mapping[str, Any]) -> dict[str, Any]:
        """Create a RepackRun (the controller's auto-trigger); ConflictError when one of that name exists
        (409 AlreadyExists). The caller names its runs deterministically, so a 5xx is retried safely: a
        create that was applied before the failure comes back as that conflict."""
        name = str((run.get("metadata") or {}).get("name") or "")
        what = f'{REPACK_RUNS.name} "{name}"'
        body = {"apiVersion": REPACK_RUNS.api_version, "kind": REPACK_RUNS.kind, **run}
        resp = self._request("POST", REPACK_RUNS.path, body=body, content_type="application/json", verb="create",
                             what=what)
        if resp.status == 409:
            raise ConflictError(f"{what} exists already (409)")
        return clean(REPACK_RUNS, self._ok(resp, "create", what))

    def delete_repack_run(self, name: str, uid: str | None) -> bool:
        """Delete the run if it is still the object with ``uid``; False when it was gone (or replaced)."""
        what = f'{REPACK_RUNS.name} "{name}"'
        body = {"apiVersion": "v1", "kind": "DeleteOptions", **({"preconditions": {"uid": uid}} if uid else {})}
        resp = self._request("DELETE", f"{REPACK_RUNS.path}/{quote(name, safe='')}", body=body,
                             content_type="application/json", verb="delete", what=what, retry_server_errors=False)
        if resp.status in (404, 409):
            return False
        self._ok(resp, "delete", what)
        return True

    def create_event(self, namespace: str, event: Mapping[str, Any]) -> dict[str, Any]:
        """Create an events.k8s.io/v1 Event in ``namespace``. A 5xx is not retried (an Event is not worth
        holding the control loop for; the caller counts the failure): KubeError, or ConflictError on 409."""
        name = str((event.get("metadata") or {}).get("name") or "")
        what = f'{EVENTS.name} "{namespace}/{name}"'
        body = {"apiVersion": EVENTS.api_version, "kind": EVENTS.kind, **event}
        resp = self._request("POST", _ns_path(EVENTS, namespace), body=body, content_type="application/json",
                             verb="create", what=what, retry_server_errors=False)
        if resp.status == 409:
            raise ConflictError(f"{what} exists already (409)")
        return clean(EVENTS, self._ok(resp, "create", what))

    def patch_event(self, namespace: str, name: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        """Merge-patch an Event (its ``series``); NotFoundError when it is gone (Events expire)."""
        what = f'{EVENTS.name} "{namespace}/{name}"'
        resp = self._request("PATCH", _ns_path(EVENTS, namespace, name), body=dict(patch),
                             content_type="application/merge-patch+json", verb="patch", what=what,
                             retry_server_errors=False)
        if resp.status == 404:
            raise NotFoundError(f"not found: {what} (404)")
        return clean(EVENTS, self._ok(resp, "patch", what))

    def get_lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        what = f'{LEASES.name} "{namespace}/{name}"'
        resp = self._request("GET", _ns_path(LEASES, namespace, name), verb="get", what=what)
        if resp.status == 404:
            return None
        return clean(LEASES, self._ok(resp, "get", what))

    def create_lease(self, namespace: str, name: str, spec: Mapping[str, Any],
                     annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
        """Create the Lease; ConflictError when another replica created it first."""
        what = f'{LEASES.name} "{namespace}/{name}"'
        meta: dict[str, Any] = {"name": name, "namespace": namespace}
        if annotations:
            meta["annotations"] = dict(annotations)
        body = {"apiVersion": LEASES.api_version, "kind": LEASES.kind, "metadata": meta, "spec": dict(spec)}
        resp = self._request("POST", _ns_path(LEASES, namespace), body=body, content_type="application/json",
                             verb="create", what=what, retry_server_errors=False)
        if resp.status == 409:
            raise ConflictError(f"{what} exists already (409)")
        return clean(LEASES, self._ok(resp, "create", what))

    def update_lease(self, lease: Mapping[str, Any], spec: Mapping[str, Any],
                     annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
        """Replace the Lease's spec (and its annotations when given; else the read ones are kept: the
        Execute record lives there), on condition that it is still at its resourceVersion (else
        ConflictError)."""
        meta = lease.get("metadata") or {}
        namespace, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
        what = f'{LEASES.name} "{namespace}/{name}"'
        out_meta: dict[str, Any] = {"name": name, "namespace": namespace,
                                    "resourceVersion": meta.get("resourceVersion")}
        kept = dict(annotations) if annotations is not None else dict(meta.get("annotations") or {})
        if kept:
            out_meta["annotations"] = kept
        if meta.get("labels"):
            out_meta["labels"] = dict(meta["labels"])
        body = {"apiVersion": LEASES.api_version, "kind": LEASES.kind, "metadata": out_meta, "spec": dict(spec)}
        resp = self._request("PUT", _ns_path(LEASES, namespace, name), body=body, content_type="application/json",
                             verb="update", what=what, retry_server_errors=False)
        if resp.status == 409:
            raise ConflictError(f"{what} changed since it was read (409)")
        if resp.status == 404:
            raise NotFoundError(f"not found: {what} (404)")
        return clean(LEASES, self._ok(resp, "update", what))

    def watch(self, res: Resource, resource_version: str, *, timeout_seconds: int = 300) -> Iterator[dict[str, Any]]:
        """Watch events of ``res`` after ``resource_version`` (``{"type", "object"}``, BOOKMARKs included),
        as they arrive, until the server ends the watch (``timeoutSeconds``). The whole watch has a total
        deadline of ``timeout_seconds`` plus the request timeout, and each event is capped at ``max_bytes``.
        A 410 (the version is too old: answer or ERROR event) raises WatchExpired; other failures KubeError."""
        what = f"{res.name} at the cluster scope"
        query: list[tuple[str, str]] = [("watch", "1"), ("allowWatchBookmarks", "true"),
                                        ("timeoutSeconds", str(timeout_seconds))]
        if resource_version:
            query.append(("resourceVersion", resource_version))
        if res.field_selector:
            query.append(("fieldSelector", res.field_selector))
        seconds = timeout_seconds + self.timeout
        _, url, header_params, _, _ = self.api.param_serialize(
            method="GET", resource_path=res.path, query_params=query, header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"])
        deadline = f"the {seconds:g} s deadline of one watch"
        guard = _Watch(seconds)
        with guard:
            try:
                raw = self.api.call_api("GET", url, header_params=header_params,
                                        _request_timeout=(self.timeout, seconds))
                guard.phase = "body"
                if raw.status != 200:
                    data = self._read_body(raw.response, guard, verb="watch", what=what)
                    text = data.decode("utf-8", errors="replace")
                    try:
                        decoded = json.loads(text) if text else None
                    except ValueError:
                        decoded = None
                    resp = _Response(raw.status, decoded, text, None)
                    if raw.status == 410:
                        raise WatchExpired(f"cannot watch {what}: {resp.message()} (410)")
                    self._ok(resp, "watch", what)
                    return
                stream = raw.response
                try:
                    yield from _events(stream, guard, self.max_bytes, what)
                finally:  # also when the caller stops early: the connection holds the rest of the stream
                    stream.close()
                    stream.release_conn()
            except (urllib3.exceptions.HTTPError, k8s.ApiException, OSError, http.client.HTTPException,
                    _Expired) as e:
                if guard.expired:
                    return  # the watch outlived its deadline: the caller watches again from where it was
                raise KubeError(f"cannot watch {what}: {self._failure(e, guard, deadline)}") from None

    # ---- one request, with retries ----------------------------------------------------------

    def _request(self, method: str, path: str, *, verb: str, what: str, query: Sequence[tuple[str, str]] = (),
                 body: Any = None, content_type: str | None = None, retry_server_errors: bool = True) -> _Response:
        """Send a request; 429 (and 5xx unless ``retry_server_errors`` is off: a write that failed after
        it was applied would come back as a false conflict) are retried with exponential backoff,
        or after the server's Retry-After, as long as the client's deadline allows."""
        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        end, end_name = self._call_end()
        for attempt in range(1, self.attempts + 1):
            resp = self._send(method, path, list(query), headers, body, verb=verb, what=what, end=(end, end_name))
            retry = resp.status == 429 or (retry_server_errors and resp.status in _RETRYABLE)
            if not retry:
                return resp
            if attempt == self.attempts:
                raise KubeError(f"cannot {verb} {what}: the API server answered {resp.status} "
                                f"{self.attempts} times: {resp.message()}")
            delay = resp.retry_after if resp.retry_after is not None else self.backoff * 2 ** (attempt - 1)
            delay = min(delay, self.max_delay)
            if self._monotonic() + delay >= end:
                raise KubeError(f"cannot {verb} {what}: the API server answered {resp.status} ({resp.message()}) "
                                f"and a retry in {delay:g} s would pass {end_name}")
            log.info("%s %s: HTTP %d, retry %d/%d in %.1fs", method, path, resp.status, attempt,
                     self.attempts - 1, delay)
            self._sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    def _call_end(self) -> tuple[float, str]:
        """When the requests of a call starting now must have finished, and that deadline in words: the
        client's, or the call's own (``call_deadline``) when that comes first."""
        end, name = self._deadline_at, self._deadline_name()
        if self.call_deadline is not None and self._monotonic() + self.call_deadline < end:
            end = self._monotonic() + self.call_deadline
            name = f"the {self.call_deadline:g} s deadline of one API call, retries included (--api-deadline)"
        return end, name

    def _budget(self, end: tuple[float, str]) -> tuple[float, str]:
        """The seconds the next request may take, and the deadline that sets them, in words."""
        left = end[0] - self._monotonic()
        if left < self.timeout:
            return left, end[1]
        return self.timeout, f"the {self.timeout:g} s request deadline (--request-timeout)"

    def _deadline_name(self) -> str:
        if self.deadline is None:
            return "no deadline"
        return f"the {self.deadline:g} s deadline of the command's API requests (--api-deadline)"

    def _send(self, method: str, path: str, query: list[tuple[str, str]], headers: dict[str, str], body: Any,
              *, verb: str, what: str, end: tuple[float, str] | None = None) -> _Response:
        seconds, deadline = self._budget(end if end is not None else self._call_end())
        if seconds <= 0:
            raise KubeError(f"cannot {verb} {what}: {deadline} has passed")
        _, url, header_params, body_out, _ = self.api.param_serialize(
            method=method, resource_path=path, query_params=query or None, header_params=dict(headers), body=body,
            auth_settings=["BearerToken"])
        watch = _Watch(seconds)
        try:
            with watch:
                raw = self.api.call_api(method, url, header_params=header_params, body=body_out,
                                        _request_timeout=seconds)  # socket timeouts: a second line of defence
                watch.phase = "body"
                data = self._read_body(raw.response, watch, verb=verb, what=what)
        except (urllib3.exceptions.HTTPError, k8s.ApiException, OSError, http.client.HTTPException, _Expired) as e:
            self._told(verb, 0)
            raise KubeError(f"cannot {verb} {what}: {self._failure(e, watch, deadline)}") from None
        if raw.status >= 400:
            self._told(verb, raw.status)
        text = data.decode("utf-8", errors="replace")
        try:
            decoded = json.loads(text) if text else None
        except ValueError:
            decoded = None
        return _Response(raw.status, decoded, text, _retry_after(raw.headers.get("Retry-After")))

    def _told(self, verb: str, code: int) -> None:
        if self.on_error is not None:
            try:
                self.on_error(verb, code)
            except Exception:  # a metric never fails a request
                log.debug("on_error failed", exc_info=True)

    def _read_body(self, resp: urllib3.BaseHTTPResponse, watch: _Watch, *, verb: str, what: str) -> bytes:
        """The whole body, in chunks, refused beyond ``max_bytes`` (announced or received). The watch
        ends a body that stalls or trickles."""
        cap = f"the {_size(self.max_bytes)} cap on one response"
        complete = False
        try:
            length = resp.headers.get("Content-Length", "")
            if length.isdigit() and int(length) > self.max_bytes:
                raise KubeError(f"cannot {verb} {what}: the API server announced {_size(int(length))}, over {cap} "
                                f"(lower --page-size)")
            chunks: list[bytes] = []
            while chunk := resp.read1(_CHUNK):  # what has arrived, up to a chunk
                watch.received += len(chunk)
                if watch.received > self.max_bytes:
                    raise KubeError(f"cannot {verb} {what}: the answer exceeds {cap} (lower --page-size)")
                chunks.append(chunk)
            complete = True
            return b"".join(chunks)
        finally:
            if not complete:  # the connection holds unread bytes: close it, never reuse it
                resp.close()
                resp.release_conn()

    def _failure(self, e: BaseException, watch: _Watch, deadline: str) -> str:
        """Why a request failed, in words: a deadline (which one, and in which phase), a refused
        connection, DNS, TLS, or a broken connection."""
        chain = list(_causes(e))
        timed_out = watch.expired or any(
            isinstance(c, socket.timeout | urllib3.exceptions.TimeoutError)
            and not isinstance(c, urllib3.exceptions.NewConnectionError) for c in chain)
        server = f"the API server at {self.host}"
        if timed_out:
            if watch.phase == "connect":
                return f"no connection to {server} within {deadline}"
            if watch.phase == "answer":
                return f"no answer from {server} within {deadline}"
            return f"the answer from {server} did not complete within {deadline}: {_size(watch.received)} received"
        for c in chain:
            if isinstance(c, ConnectionRefusedError):
                return f"cannot reach {server}: connection refused"
        for c in chain:
            if isinstance(c, socket.gaierror):
                host = urllib3.util.parse_url(self.host).host or self.host
                return f"cannot reach {server}: DNS lookup of {host} failed ({_lower(c.strerror or str(c))})"
        for c in chain:
            if isinstance(c, ssl.SSLError | ssl.CertificateError):
                return f"TLS handshake with {server} failed: {_tls_reason(c)}"
        for c in chain:
            if isinstance(c, http.client.IncompleteRead):
                return f"{server} closed the connection before its answer was complete ({_size(watch.received)} " \
                       f"received)"
            if isinstance(c, http.client.RemoteDisconnected):
                return f"{server} closed the connection without answering"
            if isinstance(c, ConnectionResetError):
                return f"{server} reset the connection"
        for c in chain:
            if isinstance(c, ConnectionError | http.client.HTTPException):
                return f"the connection to {server} broke: {_one_line(str(c)) or type(c).__name__}"
        for c in chain:
            if isinstance(c, OSError) and c.strerror:
                return f"cannot reach {server}: {_lower(c.strerror)}"
        reason = e.reason if isinstance(e, urllib3.exceptions.MaxRetryError) and e.reason else e
        return f"no answer from {server} ({_one_line(str(reason).split('): ', 1)[-1])})"

    @staticmethod
    def _ok(resp: _Response, verb: str, what: str) -> dict[str, Any]:
        """The decoded body of a successful answer; any other status is a one-line KubeError."""
        if resp.status == 403:
            raise KubeError(f"forbidden: cannot {verb} {what} (403): {resp.message()}")
        if resp.status == 401:
            raise KubeError(f"unauthorized: cannot {verb} {what} (401): check the kubeconfig's credentials")
        if not 200 <= resp.status <= 299:
            raise KubeError(f"cannot {verb} {what} ({resp.status}): {resp.message()}")
        if not isinstance(resp.body, dict):
            raise KubeError(f"cannot {verb} {what}: the API server's answer is not a JSON object")
        return resp.body


# ---- the deadline of one request ---------------------------------------------------------------

class _Expired(Exception):
    """A request's deadline passed; raised where a connection would be (re)opened after it."""


_here = threading.local()  # .watch: the _Watch of the request this thread is sending


class _Watch:
    """One request's total deadline. A timer shuts the socket of the request's connection down when it
    passes: a read blocked on it ends at once, however the server trickles. Connections report to the
    watch of their thread as they connect and send (``_watch_connections``)."""

    def __init__(self, seconds: float) -> None:
        self._lock = threading.Lock()
        self._conn: Any = None
        self.expired = False
        self.phase = "connect"  # then "answer" (request sent, waiting for the headers), then "body"
        self.received = 0  # body bytes
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> _Watch:
        _here.watch = self
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()
        with self._lock:
            self._conn = None  # back in the pool, or closed: never shut down later
        _here.watch = None

    def attach(self, conn: Any, phase: str) -> None:
        with self._lock:
            if self.expired:
                raise _Expired()
            self._conn = conn
            self.phase = phase

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            sock = getattr(self._conn, "sock", None)
            if sock is not None:  # socket.socket's own shutdown, on the descriptor: also under a TLS socket
                with contextlib.suppress(OSError, TypeError):
                    socket.socket.shutdown(sock, socket.SHUT_RDWR)


class _Watched:
    """Mixed into urllib3's connection classes: the connection reports to its thread's watch."""

    def connect(self) -> None:
        watch: _Watch | None = getattr(_here, "watch", None)
        if watch is not None:
            watch.attach(self, "connect")
        super().connect()  # type: ignore[misc]
        if watch is not None:
            watch.attach(self, "answer")

    def request(self, *args: Any, **kwargs: Any) -> None:
        watch: _Watch | None = getattr(_here, "watch", None)
        if watch is not None:
            watch.attach(self, "answer" if getattr(self, "sock", None) is not None else "connect")
        super().request(*args, **kwargs)  # type: ignore[misc]


@functools.cache
def _watched_pool(pool_cls: type[Any]) -> type[Any]:
    if issubclass(pool_cls.ConnectionCls, _Watched):
        return pool_cls
    conn_cls = type(f"Watched{pool_cls.ConnectionCls.__name__}", (_Watched, pool_cls.ConnectionCls), {})
    return type(f"Watched{pool_cls.__name__}", (pool_cls,), {"ConnectionCls": conn_cls})


def _watch_connections(pool_manager: urllib3.PoolManager) -> None:
    """Make the pool manager's future connections report to their thread's watch (pools are made on
    first use, from these classes; plain, proxy and SOCKS pools alike)."""
    pool_manager.pool_classes_by_scheme = {
        scheme: _watched_pool(cls) for scheme, cls in pool_manager.pool_classes_by_scheme.items()}
    pool_manager.clear()  # pools made before, if any, from the plain classes


def _causes(e: BaseException) -> Iterator[BaseException]:
    """``e`` and what it wraps: urllib3's reasons and arguments, Python's causes and contexts."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [e]
    while todo:
        c = todo.pop(0)
        if c is None or id(c) in seen:
            continue
        seen.add(id(c))
        yield c
        reason = getattr(c, "reason", None)  # urllib3's MaxRetryError; a str on ssl.SSLError
        todo += [reason if isinstance(reason, BaseException) else None, c.__cause__, c.__context__]
        todo += [a for a in c.args if isinstance(a, BaseException)]  # urllib3's ProtocolError, SSLError


def _events(stream: Any, guard: _Watch, max_bytes: int, what: str) -> Iterator[dict[str, Any]]:
    """The events of a watch stream, one JSON object a line, as they arrive."""
    buffer = b""
    while chunk := stream.read1(_CHUNK):
        guard.received += len(chunk)
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        if len(buffer) > max_bytes:
            raise KubeError(f"cannot watch {what}: an event exceeds {_size(max_bytes)}")
        for line in lines:
            event = _event(line, what)
            if event is not None:
                yield event
    event = _event(buffer, what)
    if event is not None:
        yield event


def _event(line: bytes, what: str) -> dict[str, Any] | None:
    """One watch event line, or None for a blank one. An ERROR event with a 410 Status raises WatchExpired."""
    if not line.strip():
        return None
    try:
        event = json.loads(line)
    except ValueError:
        raise KubeError(f"cannot watch {what}: the API server sent a line that is not JSON") from None
    if not isinstance(event, dict) or not isinstance(event.get("object"), dict):
        raise KubeError(f"cannot watch {what}: the API server sent an event without an object")
    if event.get("type") == "ERROR":
        status = event["object"]
        msg = " ".join(str(status.get("message") or "(no message)").split())
        if status.get("code") == 410:
            raise WatchExpired(f"cannot watch {what}: {msg} (410)")
        raise KubeError(f"cannot watch {what}: {msg} ({status.get('code')})")
    return event


def _with_causes(resp: _Response) -> str:
    """The answer's message and its causes' (an eviction's 429 names the PodDisruptionBudget there)."""
    details = resp.body.get("details") if isinstance(resp.body, dict) else None
    causes = details.get("causes") if isinstance(details, dict) else None
    said = [" ".join(str(c["message"]).split()) for c in causes or [] if isinstance(c, dict) and c.get("message")]
    return f"{resp.message()} ({'; '.join(said)})" if said else resp.message()


def _size(n: int) -> str:
    return f"{round(n / 2**20, 1):g} MiB" if n >= 2**20 else "1 byte" if n == 1 else f"{n} bytes"


def _tls_reason(e: BaseException) -> str:
    """``certificate verify failed: self-signed certificate``, ``wrong version number``: OpenSSL's words
    without its ``[SSL: CODE]`` tag and source line."""
    text = str(e)
    if isinstance(e, ssl.SSLError) and len(e.args) > 1:
        text = str(e.args[1])
    text = re.sub(r"^\[[A-Z_]+: [A-Z_]+\] ", "", text)
    text = re.sub(r" \(_ssl\.c:\d+\)$", "", text)
    return _one_line(text) or type(e).__name__


def _lower(text: str) -> str:
    return text[:1].lower() + text[1:]


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _retry_after(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None  # an HTTP date: the API server sends seconds, fall back to our backoff


def clean(res: Resource, item: Mapping[str, Any]) -> dict[str, Any]:
    """A list item as kubectl prints it: apiVersion and kind first, no managedFields."""
    meta = {k: v for k, v in (item.get("metadata") or {}).items() if k != "managedFields"}
    rest = {k: v for k, v in item.items() if k not in ("apiVersion", "kind", "metadata")}
    return {"apiVersion": res.api_version, "kind": res.kind, "metadata": meta, **rest}


# ---- connecting ------------------------------------------------------------------------------

def connect(kubeconfig: str | None = None, context: str | None = None, *, timeout: float = REQUEST_TIMEOUT,
            deadline: float | None = API_DEADLINE, max_bytes: int = MAX_RESPONSE_BYTES, page_size: int = 500,
            attempts: int = 5, backoff: float = 0.5, call_deadline: float | None = None) -> KubeClient:
    """A client for the cluster of ``context`` in ``kubeconfig``. With neither: the in-cluster service
    account when running in a pod, else ``$KUBECONFIG`` or ``~/.kube/config``. Configuration problems
    are InputErrors naming the file and field. ``timeout`` is each request's total deadline, ``deadline``
    that of all the client's requests (from now), ``call_deadline`` that of each call (its requests, retries
    and waits, from the call's start), ``max_bytes`` the cap on one response body."""
    cfg = k8s.Configuration()  # private: the client's global default is left alone
    if kubeconfig is None and context is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
        try:
            k8s_config.load_incluster_config(client_configuration=cfg)
        except k8s_config.ConfigException as e:
            raise InputError(f"in-cluster configuration: {e}", field="KUBERNETES_SERVICE_HOST") from None
    else:
        _load_kubeconfig(cfg, kubeconfig, context)
    # urllib3 may reconnect; answers (429 with Retry-After included) and read timeouts are ours to handle
    cfg.retries = urllib3.Retry(total=2, read=0, redirect=0, status=0, respect_retry_after_header=False)
    api = k8s.ApiClient(cfg)
    api.user_agent = "optplan"
    return KubeClient(api, timeout=timeout, deadline=deadline, max_bytes=max_bytes, page_size=page_size,
                      attempts=attempts, backoff=backoff, call_deadline=call_deadline)


def _load_kubeconfig(cfg: k8s.Configuration, kubeconfig: str | None, context: str | None) -> None:
    path = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
    files = [os.path.expanduser(p) for p in path.split(os.pathsep) if p]
    if not any(os.path.isfile(f) for f in files):
        field = "--kubeconfig" if kubeconfig else "KUBECONFIG" if os.environ.get("KUBECONFIG") else None
        raise InputError("kubeconfig file not found", file=path, field=field)
    try:
        names, current = _contexts(files)
        wanted = context or current
        if not wanted:
            raise InputError("no current-context set: pass --context", file=path, field="current-context")
        if wanted not in names:
            known = ", ".join(names) or "none"
            raise InputError(f"no context named {wanted!r} (contexts: {known})", file=path,
                             field="--context" if context else "current-context")
        k8s_config.load_kube_config(config_file=path, context=wanted, client_configuration=cfg,
                                    persist_config=False)
    except InputError:
        raise
    except yaml.YAMLError as e:
        raise InputError(f"malformed kubeconfig: {' '.join(str(e).split())}", file=path) from None
    except (k8s_config.ConfigException, OSError, KeyError, TypeError, AttributeError, ValueError) as e:
        raise InputError(f"invalid kubeconfig: {' '.join(str(e).split()) or type(e).__name__}", file=path) from None


def _contexts(files: Sequence[str]) -> tuple[list[str], str | None]:
    """The context names of the kubeconfig files, and the current context (the first file setting it wins,
    as for kubectl)."""
    names: list[str] = []
    current: str | None = None
    for f in files:
        if not os.path.isfile(f):
            continue
        with open(f, encoding="utf-8") as fh:
            data = yaml.safe_load(fh)
        if not isinstance(data, dict):
            raise InputError("not a kubeconfig (expected a mapping)", file=f)
        names.extend(str(c["name"]) for c in data.get("contexts") or [] if isinstance(c, dict) and c.get("name"))
        current = current or data.get("current-context") or None
    return names, current


# ---- writing a snapshot file -------------------------------------------------------------------

def write_snapshot(objects: Sequence[Mapping[str, Any]], path: str | Path) -> None:
    """A ``kind: List`` in YAML, the format the planners read: planning the file plans the live cluster."""
    doc = {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": [dict(o) for o in objects]}
    write_atomic(str(path), to_yaml(doc))
