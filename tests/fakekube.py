"""A fake Kubernetes API server on 127.0.0.1 speaking the real HTTP API, for tests of the live adapter
and of the Repack controller. State lives in memory; every write bumps one server-wide resourceVersion,
like etcd, and is recorded as a watch event.

Emulated (apiserver behaviour, from the Kubernetes API conventions and the apiserver's handlers):

- **Reads**: get; list, cluster-wide and per namespace, with ``limit``/``continue`` paging,
  ``fieldSelector`` (``path=value``, ``path==value``, ``path!=value`` on any dotted field) and
  ``labelSelector`` (``k=v``, ``k==v``, ``k!=v``, ``k``, ``!k``, ``k in (a,b)``, ``k notin (a,b)``).
  A list answer carries ``metadata.resourceVersion`` and, without selectors, ``remainingItemCount``
  on a page that has a ``continue`` token; a list (``resourceVersion`` N) or continue token whose
  resourceVersion is older than the type's event history answers 410 Expired.
- **Writes**: POST create (201; 409 AlreadyExists; ``generateName``; the server sets ``uid``,
  ``creationTimestamp``, ``resourceVersion``, ``metadata.generation`` = 1; names and UIDs come from a seeded
  generator, so they repeat run to run); PUT update (404 when absent; 409 Conflict on a stale
  ``metadata.resourceVersion``; without one, a built-in type's update is unconditional and a custom
  resource's is 422, as ``AllowUnconditionalUpdate`` is false for CRs); PATCH with
  ``application/merge-patch+json`` (RFC 7386), ``application/json-patch+json`` (RFC 6902: add, remove,
  replace, move, copy, test) and, for built-in types only, ``application/strategic-merge-patch+json`` (a
  custom resource answers 415, as the apiserver does). The strategic merge merges lists by key for
  ``status.conditions`` (type), ``spec.containers``/``initContainers`` (name), ``spec.tolerations`` (key),
  ``metadata.ownerReferences`` (uid) and ``metadata.finalizers`` (as a set); every other list is replaced;
  ``$patch: delete`` and ``replace`` in a map is honoured, other directives are dropped. A patch carrying
  ``metadata.resourceVersion`` is a precondition (409 when it differs). A write that changes nothing keeps
  the resourceVersion and records no event. ``metadata.generation`` bumps when anything outside ``metadata``
  and ``status`` changes (outside ``metadata`` only, for a type without a status subresource). Pod ``spec``
  is immutable through update/patch (422), as for the apiserver apart from the few mutable fields (image,
  tolerations additions), which are not emulated.
- **DELETE**: with ``preconditions.uid``/``resourceVersion`` (409 when they differ). An object with
  ``metadata.finalizers`` gets ``deletionTimestamp`` and stays until an update empties its finalizers.
  Pods are deleted at once, unless ``hold_pod_deletions()`` is on: then a pod deleted with a grace
  period > 0 gets ``deletionTimestamp`` (terminating) and goes when ``reap()`` is called. An immediate
  deletion answers 200 with a ``Status`` of ``Success`` (a pod: with the deleted pod, as the pod registry
  returns it); a pending one 200 with the object.
- **Status subresource** for types that have one (pods, nodes, PDBs, the Volcano/Kthena custom
  resources and a CRD file declaring ``subresources.status``): create drops ``.status`` (a pod's becomes
  ``phase: Pending``), writes to the main resource keep the stored ``.status``, writes (PUT, PATCH) to
  ``/status`` change only ``.status``; GET ``/status`` reads the object. A type without one answers 404
  on ``/status``.
- **CRD schemas** (``install_crd`` / ``FakeKube(crd_schemas=True)`` for the CRDs under ``crds/``): on
  create, update and status writes the object is pruned of unknown fields (ObjectMeta's own fields kept at
  the root, ``x-kubernetes-preserve-unknown-fields`` honoured), defaulted (``default``), then validated:
  ``type`` (with ``nullable`` and ``x-kubernetes-int-or-string``), ``required``, ``enum``,
  ``minimum``/``maximum``, ``minLength``/``maxLength``, ``minItems``/``maxItems``, ``pattern``,
  ``format: date-time``, and unique entries of ``x-kubernetes-list-type: map`` (by its
  ``x-kubernetes-list-map-keys``) and ``set`` lists (``Duplicate value``). Failure is 422 ``Invalid`` with
  ``details.causes[].field`` such as ``spec.mode`` or ``status.relocations[0].eviction.phase`` and the
  apiserver's messages (``Required value``, ``Unsupported value: "X": supported values: "A", "B"``,
  ``Invalid value: ...``). Main-resource writes validate everything but ``.status``; status writes
  validate ``.status`` only (the apiserver's ratcheting of unchanged fields, simplified). Without
  ``crd_schemas`` the CRs are stored as sent (existing tests write statuses the schema would refuse).
  ``x-kubernetes-validations`` (CEL) rules are evaluated once a value's own schema holds (``cel_eval``: the
  part of CEL the shipped CRDs write; any other rule raises instead of passing), a failed one is the
  cause ``FIELD: Invalid value: MESSAGE``. Unknown fields follow the request's
  ``fieldValidation``: ``Strict`` (what kubectl sends by default) refuses them, 400 ``KIND in version "V"
  cannot be handled as a KIND: strict decoding error: unknown field "spec.x", ...``; ``Warn`` (the
  default when absent, as optplan's own requests are) prunes them and answers a ``Warning: 299 - "unknown
  field \\"spec.x\\""`` header; ``Ignore`` prunes silently. Built-in types have no schema here: their unknown
  fields are kept.
- **Pods**: a status write that sets ``status.nominatedNodeName`` on a pod already bound to a node is 422
  (``status.nominatedNodeName: Forbidden: may not be set on pods that are already bound to a node``). Pods
  created (POST) are validated as the apiserver does for what tests can get wrong: every
  container needs an ``image`` (``spec.containers[0].image: Required value``), and a request of a resource
  that cannot be overcommitted (an extended resource such as ``nvidia.com/gpu``, huge pages) needs a limit
  (``spec.containers[0].resources.limits: Required value: Limit must be set for non overcommitable
  resources``) equal to it (``...resources.requests: Invalid value: "1": must be equal to nvidia.com/gpu
  limit of 2``).
- **Watch**: ``?watch=1`` (or ``/watch/`` paths are not served: the query form only) with
  ``resourceVersion``, ``allowWatchBookmarks``, ``timeoutSeconds``, ``fieldSelector``, ``labelSelector``,
  ``sendInitialEvents``, per type, cluster-wide or per namespace: newline-delimited JSON events (ADDED,
  MODIFIED, DELETED, BOOKMARK, ERROR) over a chunked answer. No resourceVersion (or "0"): an ADDED per
  existing object, then changes. An object that stops (starts) matching the selectors arrives as
  DELETED (ADDED). Each type keeps the last ``history`` events (default 1000); a resourceVersion older
  than that gives one ERROR event with a 410 Expired ``Status`` (``too old resource version``), then the
  stream ends. Hooks: ``compact()`` forgets the history (every older version is then too old);
  ``bookmark()`` sends a BOOKMARK now to every watch that allows them; ``bookmark_interval`` sends them
  periodically; ``close_watches()`` ends every open stream, as an apiserver restart does.
- **Eviction** (``POST pods/{name}/eviction``, policy/v1 ``Eviction``): ``deleteOptions`` with
  ``gracePeriodSeconds`` and ``preconditions.uid``/``resourceVersion`` (409 when they differ). A pod
  that is Pending, Succeeded, Failed or already terminating is deleted without looking at budgets (the
  apiserver's ``canIgnorePDB``). Otherwise the PDBs of the namespace whose selector matches the pod (an
  empty or null selector matches nothing here, as in the eviction handler): more than one is 500; a pod
  that is not Ready is deleted without touching the budget when the PDB's
  ``spec.unhealthyPodEvictionPolicy`` is ``AlwaysAllow``, or when it is ``IfHealthyBudget`` (the default)
  and the PDB has ``currentHealthy >= desiredHealthy > 0``; a PDB whose ``status.disruptionsAllowed`` is
  0 answers 429 TooManyRequests ("Cannot evict pod as it would violate the pod's disruption budget.", a
  ``DisruptionBudget`` cause); else its
  ``disruptionsAllowed`` is decremented and the pod recorded in ``status.disruptedPods`` (a PDB write),
  then the pod is deleted as DELETE would. Success is 201 with a ``Status``. A body naming another pod
  is 400. Every attempt is recorded in ``evictions`` with its answer (``evicted()``: the successes).
  The disruption controller that recomputes ``disruptionsAllowed`` is not emulated (tests set it, or
  ``fakeworld`` does).
- **Binding** (``POST pods/{name}/binding``): sets ``spec.nodeName`` and the ``PodScheduled`` condition;
  409 when the pod is already bound.
- **Events** (events.k8s.io/v1, namespaced): create, patch (merge and JSON patch), list with field
  selectors on any field (``regarding.name``, ``reason``); create and update validated as the apiserver
  does (``_event_causes``: required eventTime, reportingController, reportingInstance, action, reason;
  note at most 1 KiB; type Normal or Warning; ``series.count`` at least 2 with ``lastObservedTime``;
  a cluster-scoped ``regarding`` only from the default namespace; all but ``series`` immutable), 422
  otherwise. The core/v1 view of the same Events (``kubectl describe``'s) is not emulated: the two
  groups are separate stores here.
- **Types**: nodes, pods, secrets, configmaps, events (core and events.k8s.io), PDBs, PriorityClasses,
  coordination.k8s.io Leases, Volcano PodGroups, Queues, HyperNodes, Jobs, Kthena ModelServings and
  RepackRuns. Unknown resources (a CRD not installed) and objects answer a 404 ``Status``.
- **Faults** (every verb, watches included): a path answering a given status the next N times (or
  always), optionally only for one method or only when a continue token is sent (410 Expired), with a
  Retry-After header; a path stalling before it answers; answers dripping out one byte at a time (the
  body, or headers and body); bodies padded to any size, announced with a Content-Length or streamed
  chunked without end; answers cut short.

Not emulated: discovery, server-side apply (``application/apply-patch+yaml`` is 415) and managedFields,
``dryRun``, ``resourceVersionMatch=Exact`` (a list serves the current state), consistent snapshots across
pages (a page reads the current state), admission (no defaulting of built-in types, no webhooks),
the ``observedGeneration`` check of an eviction, ownerReference
garbage collection, authentication and RBAC (the bearer token is recorded, not checked; ``forbid``
injects 403s), watches through ``/watch/`` paths, a watch from a resourceVersion ahead of the server (it
starts there; the apiserver waits, then answers 504), the apiserver's own bookmark cadence (none unless
``bookmark_interval`` is set), and CRD validation of unchanged fields on a status write (full
ratcheting). Objects stored with ``add`` are not validated.
"""

from __future__ import annotations

import base64
import bisect
import collections
import copy
import json
import random
import re
import select
import shutil
import socket
import ssl
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import yaml

CRD_DIR = Path(__file__).resolve().parent.parent / "crds"


@dataclass(frozen=True)
class ResourceType:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    status_subresource: bool = False
    custom: bool = False  # a custom resource: no strategic merge patch, no unconditional update
    schema: dict[str, Any] | None = field(default=None, compare=False, hash=False, repr=False)
    """The CRD's openAPIV3Schema: prune, default and validate writes (None: store as sent)."""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def name(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def qualified_kind(self) -> str:
        """As the apiserver names an object's kind in messages: ``RepackRun.repack.volcano.sh``."""
        return f"{self.kind}.{self.group}" if self.group else self.kind


BUILTIN = (
    ResourceType("", "v1", "nodes", "Node", False, status_subresource=True),
    ResourceType("", "v1", "pods", "Pod", True, status_subresource=True),
    ResourceType("", "v1", "secrets", "Secret", True),
    ResourceType("", "v1", "configmaps", "ConfigMap", True),
    ResourceType("", "v1", "events", "Event", True),
    ResourceType("events.k8s.io", "v1", "events", "Event", True),
    ResourceType("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, status_subresource=True),
    ResourceType("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False),
    ResourceType("coordination.k8s.io", "v1", "leases", "Lease", True),
)
VOLCANO = (
    ResourceType("scheduling.volcano.sh", "v1beta1", "podgroups", "PodGroup", True, True, True),
    ResourceType("scheduling.volcano.sh", "v1beta1", "queues", "Queue", False, True, True),
    ResourceType("topology.volcano.sh", "v1alpha1", "hypernodes", "HyperNode", False, True, True),
    ResourceType("batch.volcano.sh", "v1alpha1", "jobs", "Job", True, True, True),
    ResourceType("workload.serving.volcano.sh", "v1alpha1", "modelservings", "ModelServing", True, True, True),
    ResourceType("repack.volcano.sh", "v1alpha1", "repackruns", "RepackRun", False, True, True),
)

_REASONS = {400: "BadRequest", 403: "Forbidden", 404: "NotFound", 405: "MethodNotAllowed", 409: "Conflict",
            410: "Expired", 415: "UnsupportedMediaType", 422: "Invalid", 429: "TooManyRequests",
            500: "InternalError", 503: "ServiceUnavailable"}
_EXPIRED = ("The provided continue parameter is too old to display a consistent list result. You can start a new "
            "list without the continue parameter.")
_PDB_VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."
_META_FIELDS = frozenset({"name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
                          "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels",
                          "annotations", "ownerReferences", "finalizers", "managedFields"})
_SYSTEM_META = ("uid", "creationTimestamp", "generation", "deletionTimestamp", "deletionGracePeriodSeconds",
                "namespace", "name")
_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"  # the apiserver's generateName alphabet
# Strategic merge: list fields merged by key (None: a set of scalars), by dotted path from the root.
_MERGE_KEYS: dict[str, str | None] = {
    "status.conditions": "type", "spec.containers": "name", "spec.initContainers": "name",
    "spec.tolerations": "key", "metadata.ownerReferences": "uid", "metadata.finalizers": None,
}


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]  # lower-case names
    body: Any


@dataclass(frozen=True)
class Eviction:
    """One eviction request and the server's answer."""

    namespace: str
    name: str
    uid: str  # the pod's UID when it existed, else ""
    grace_period_seconds: int | None
    code: int  # 201 evicted; 429 blocked by a budget; 404, 409, 500 ...
    message: str


@dataclass
class _Fault:
    status: int
    times: int | None  # None: always
    on_continue: bool
    retry_after: str | None
    message: str | None
    method: str | None = None  # None: every method


@dataclass(frozen=True)
class _Delivery:
    drip: float | None = None  # seconds between bytes
    drip_headers: bool = False  # the status line and headers drip too
    padding: int | None = None  # bytes of JSON whitespace before the object
    endless: bool = False  # chunked whitespace, never ending
    cut: bool = False  # Content-Length promises more than is sent, then the connection closes


@dataclass(frozen=True)
class _Event:
    rv: int
    type: str  # ADDED, MODIFIED, DELETED
    obj: dict[str, Any]  # the stored object (without apiVersion/kind)
    prev: dict[str, Any] | None  # before a MODIFIED


@dataclass
class _Watcher:
    rt: ResourceType
    namespace: str | None
    fields: list[tuple[str, bool, str]]
    labels: list[tuple[str, str, frozenset[str]]]
    rv: int
    bookmarks: bool
    deadline: float
    bookmark_seq: int
    next_bookmark: float
    closed: bool = False


class _HttpError(Exception):
    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None,
                 body: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}
        self.body = body


class _Stream:
    """A streamed (watch) answer: lines of JSON, sent chunked."""

    def __init__(self, lines: Iterator[bytes]) -> None:
        self.lines = lines


class FakeKube:
    """In-memory objects per resource type, served over HTTP on 127.0.0.1 (port chosen by the OS).

    The Python-side methods (``create``, ``update``, ``patch``, ``delete``, ``evict``, ``bind``) apply the
    same rules as the HTTP verbs and raise ``ApiError`` where the server would answer an error; ``add``
    stores objects verbatim (the resourceVersion set, and with ``server_fields`` a missing uid,
    creationTimestamp and generation), as a test seeds a cluster. They work before ``start`` too."""

    def __init__(self, *, crds: bool = True, tls: tuple[Path, Path] | None = None, crd_schemas: bool = False,
                 history: int = 1000, seed: int = 0) -> None:
        """``tls``: serve HTTPS with this (certificate, key) pair (``self_signed``). ``crd_schemas``:
        prune, default and validate custom resources by the CRDs under ``crds/`` (``install_crd``).
        ``history``: watch events kept per type. ``seed``: of generated names and UIDs."""
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._types: dict[tuple[str, str, str], ResourceType] = {}
        self._objects: dict[ResourceType, dict[tuple[str, str], dict[str, Any]]] = {}
        self._history: dict[ResourceType, collections.deque[_Event]] = {}
        self._keys: dict[ResourceType, list[tuple[str, str]]] = {}  # sorted keys, dropped on create/delete
        self._window: dict[ResourceType, int] = {}  # every event after this resourceVersion is kept
        self._history_size = history
        self._rv = 1000
        self._faults: dict[str, list[_Fault]] = {}
        self._stalls: dict[str, float] = {}
        self._deliveries: dict[str, _Delivery] = {}
        self._stopping = threading.Event()
        self._rng = random.Random(seed)
        self._field_validation = ""  # the request's fieldValidation (Strict, Warn, Ignore; "" as Warn)
        self._warnings: list[str] = []  # the request's Warning headers
        self._watchers: list[_Watcher] = []
        self._bookmark_seq = 0
        self._hold_pods = False
        self.bookmark_interval: float | None = None
        """Seconds between the BOOKMARK events of a watch that allows them (None: only ``bookmark()``)."""
        self.clock: Callable[[], datetime] = lambda: datetime.now(UTC)
        """The server's clock (creationTimestamp, deletionTimestamp, disruptedPods)."""
        self.requests: list[Request] = []
        self.evictions: list[Eviction] = []
        for rt in BUILTIN + (VOLCANO if crds else ()):
            self.install(rt)
        if crds and crd_schemas:
            for path in sorted(CRD_DIR.glob("*.yaml")):
                self.install_crd(path)
        self._server = _Server(("127.0.0.1", 0), _handler(self))
        self.tls = tls
        if tls is not None:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(*tls)
            self._server.socket = ctx.wrap_socket(self._server.socket, server_side=True)
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.01,), name="fakekube",
                                        daemon=True)  # a short poll interval: stop() returns at once

    # ---- lifecycle ----------------------------------------------------------------------------

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"{'https' if self.tls else 'http'}://{host!s}:{port}"

    def start(self) -> FakeKube:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        with self._changed:
            self._changed.notify_all()
        if self._thread.is_alive():  # shutdown() waits for serve_forever, which never ran otherwise
            self._server.shutdown()
        self._server.server_close()

    def write_kubeconfig(self, path: Path, context: str = "fake", *, trust: bool = True) -> Path:
        """A kubeconfig for this server; over TLS it trusts the server's certificate unless ``trust`` is off."""
        return write_kubeconfig(path, {context: self.url}, ca=self.tls[0] if self.tls and trust else None)

    # ---- types --------------------------------------------------------------------------------

    def install(self, rt: ResourceType) -> None:
        """Serve a resource type (replacing one of the same group, version and plural; objects kept)."""
        with self._lock:
            old = self._types.get((rt.group, rt.version, rt.plural))
            self._types[(rt.group, rt.version, rt.plural)] = rt
            self._objects[rt] = self._objects.pop(old, {}) if old is not None else self._objects.get(rt, {})
            self._history[rt] = self._history.pop(old, collections.deque()) if old is not None \
                else self._history.get(rt, collections.deque())
            self._window[rt] = self._window.pop(old, self._rv) if old is not None else self._window.get(rt, self._rv)
            self._keys.pop(rt, None)

    def install_crd(self, path: Path) -> ResourceType:
        """Serve a CustomResourceDefinition file's served versions, with its schema and subresources."""
        crd = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        spec = crd["spec"]
        rt = None
        for version in spec["versions"]:
            if not version.get("served", True):
                continue
            rt = ResourceType(spec["group"], version["name"], spec["names"]["plural"], spec["names"]["kind"],
                              spec["scope"] == "Namespaced", "status" in (version.get("subresources") or {}), True,
                              (version.get("schema") or {}).get("openAPIV3Schema"))
            self.install(rt)
        if rt is None:
            raise ValueError(f"{path}: no served version")
        return rt

    def uninstall(self, group: str, plural: str) -> None:
        """Remove a resource type and its objects, as when a CRD is not installed."""
        with self._lock:
            for key in [k for k in self._types if k[0] == group and k[2] == plural]:
                rt = self._types.pop(key)
                self._objects.pop(rt, None)
                self._history.pop(rt, None)
                self._keys.pop(rt, None)

    def type_of(self, api_version: str, kind: str) -> ResourceType:
        with self._lock:
            for rt in self._types.values():
                if rt.api_version == api_version and rt.kind == kind:
                    return rt
        raise KeyError(f"no resource type serves {api_version} {kind}")

    def _type_of(self, obj: dict[str, Any]) -> ResourceType:
        return self.type_of(str(obj.get("apiVersion")), str(obj.get("kind")))

    # ---- state, from Python -------------------------------------------------------------------

    @property
    def resource_version(self) -> int:
        """The server-wide resourceVersion of the last write."""
        with self._lock:
            return self._rv

    def add(self, *objects: dict[str, Any], server_fields: bool = False) -> None:
        """Store objects (created or replaced, by apiVersion, kind, namespace and name) verbatim; each write
        bumps its resourceVersion, as another writer would, and is a watch event. ``server_fields``: also
        fill a missing ``uid``, ``creationTimestamp`` and ``generation`` (status and spec kept as given)."""
        with self._lock:
            for obj in objects:
                rt = self._type_of(obj)
                stored = _clone(obj)
                meta = stored.setdefault("metadata", {})
                if rt.namespaced:
                    meta.setdefault("namespace", "default")
                if server_fields:
                    meta.setdefault("uid", self._uid())
                    meta.setdefault("creationTimestamp", self.timestamp())
                    meta.setdefault("generation", 1)
                self._store(rt, (meta.get("namespace", ""), meta["name"]), stored)

    def get(self, api_version: str, kind: str, name: str, namespace: str = "") -> dict[str, Any]:
        """The stored object (KeyError when there is none)."""
        with self._lock:
            rt = self.type_of(api_version, kind)
            return copy.deepcopy(self._objects[rt][(namespace, name)])

    def find(self, api_version: str, kind: str, name: str, namespace: str = "") -> dict[str, Any] | None:
        """The stored object, or None."""
        try:
            return self.get(api_version, kind, name, namespace)
        except KeyError:
            return None

    def objects(self, api_version: str, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        """Stored objects of a kind (with apiVersion and kind), sorted by namespace and name."""
        with self._lock:
            rt = self.type_of(api_version, kind)
            return [_full(rt, o) for k, o in sorted(self._objects[rt].items()) if namespace in (None, k[0])]

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Create as POST does (server-set fields, schema, status reset); ``ApiError`` on 409/422."""
        rt = self._type_of(obj)
        ns = (obj.get("metadata") or {}).get("namespace", "default") if rt.namespaced else None
        return self._py(lambda: self._create(rt, ns, copy.deepcopy(obj)))

    def update(self, obj: dict[str, Any], *, subresource: str | None = None) -> dict[str, Any]:
        """Replace as PUT does (``subresource="status"``: the status only)."""
        rt = self._type_of(obj)
        meta = obj.get("metadata") or {}
        ns = meta.get("namespace", "default") if rt.namespaced else None
        return self._py(lambda: self._update(rt, ns, meta.get("name", ""), copy.deepcopy(obj), subresource))

    def patch(self, api_version: str, kind: str, name: str, patch: Any, *, namespace: str = "",
              subresource: str | None = None, content_type: str = "application/merge-patch+json") -> dict[str, Any]:
        """Patch as PATCH does."""
        rt = self.type_of(api_version, kind)
        ns = namespace or "default" if rt.namespaced else None
        return self._py(lambda: self._patch(rt, ns, name, subresource, content_type, copy.deepcopy(patch)))

    def delete(self, api_version: str, kind: str, name: str, namespace: str = "",
               options: dict[str, Any] | None = None) -> dict[str, Any]:
        """Delete as DELETE does (a Status, or the object when its deletion is pending)."""
        rt = self.type_of(api_version, kind)
        ns = namespace or "default" if rt.namespaced else None
        return self._py(lambda: self._delete(rt, ns, name, options or {})[1])

    def evict(self, name: str, namespace: str = "default", *, grace_period_seconds: int | None = None,
              uid: str | None = None) -> dict[str, Any]:
        """Evict as ``POST pods/{name}/eviction`` does."""
        opts: dict[str, Any] = {}
        if grace_period_seconds is not None:
            opts["gracePeriodSeconds"] = grace_period_seconds
        if uid is not None:
            opts["preconditions"] = {"uid": uid}
        body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace},
                "deleteOptions": opts}
        return self._py(lambda: self._evict(namespace, name, body))

    def bind(self, name: str, node: str, namespace: str = "default") -> dict[str, Any]:
        """Bind a pod as ``POST pods/{name}/binding`` does."""
        return self._py(lambda: self._bind(namespace, name, {"target": {"kind": "Node", "name": node}}))

    def _py(self, call: Callable[[], tuple[int, Any]] | Callable[[], dict[str, Any]]) -> dict[str, Any]:
        with self._lock:
            try:
                out = call()
            except _HttpError as e:
                raise ApiError(e.status, e.body or _status(e.status, e.message)) from None
        return out[1] if isinstance(out, tuple) else out

    def hold_pod_deletions(self, hold: bool = True) -> None:
        """Pods deleted (or evicted) with a grace period > 0 stay, terminating, until ``reap``."""
        with self._lock:
            self._hold_pods = hold

    def terminating(self) -> list[str]:
        """``namespace/name`` of the pods that carry a deletionTimestamp."""
        with self._lock:
            rt = self.type_of("v1", "Pod")
            return [f"{ns}/{n}" for (ns, n), o in sorted(self._objects[rt].items())
                    if o["metadata"].get("deletionTimestamp") and not o["metadata"].get("finalizers")]

    def reap(self, *keys: str) -> list[str]:
        """Finish the deletion of terminating pods (those named as ``namespace/name``, or all), as the
        kubelet does after the grace period; returns the pods removed."""
        with self._lock:
            rt = self.type_of("v1", "Pod")
            gone = [k for k in self.terminating() if not keys or k in keys]
            for k in gone:
                ns, name = k.split("/", 1)
                self._remove(rt, (ns, name))
            return gone

    def evicted(self) -> list[str]:
        """``namespace/name`` of every pod evicted (201), in order, repeats kept."""
        with self._lock:
            return [f"{e.namespace}/{e.name}" for e in self.evictions if e.code == 201]

    # ---- watch hooks --------------------------------------------------------------------------

    def compact(self) -> None:
        """Forget every type's event history, as an etcd compaction does: a watch or list from any
        earlier resourceVersion, or an earlier continue token, is then 410."""
        with self._changed:
            for rt in self._history:
                self._history[rt].clear()
                self._window[rt] = self._rv
            self._changed.notify_all()

    def bookmark(self) -> None:
        """Send a BOOKMARK (the current resourceVersion) to every open watch that allows bookmarks."""
        with self._changed:
            self._bookmark_seq += 1
            self._changed.notify_all()

    def close_watches(self) -> None:
        """End every open watch stream cleanly, as an apiserver restart or a load balancer does."""
        with self._changed:
            for w in self._watchers:
                w.closed = True
            self._changed.notify_all()

    def watch_count(self) -> int:
        """Open watch streams."""
        with self._lock:
            return sum(1 for w in self._watchers if not w.closed)

    # ---- faults and records -------------------------------------------------------------------

    def fail(self, path: str, status: int, *, times: int | None = 1, on_continue: bool = False,
             retry_after: str | None = None, message: str | None = None, method: str | None = None) -> None:
        """The next ``times`` requests to ``path`` (None: all of them; ``on_continue``: only those with
        a continue token; ``method``: only that HTTP method) answer ``status`` with a Status body."""
        with self._lock:
            self._faults.setdefault(path, []).append(
                _Fault(status, times, on_continue, retry_after, message, method.upper() if method else None))

    def stall(self, path: str, seconds: float) -> None:
        """Requests to ``path`` wait ``seconds`` (or until the server stops) before they are answered."""
        with self._lock:
            self._stalls[path] = seconds

    def drip(self, path: str, interval: float, *, headers: bool = False) -> None:
        """Answers to ``path`` go out one byte every ``interval`` seconds: the body (the headers at once),
        or with ``headers`` the whole answer. No single read waits long; only a total deadline ends it."""
        with self._lock:
            self._deliveries[path] = _Delivery(drip=interval, drip_headers=headers)

    def pad(self, path: str, nbytes: int | None) -> None:
        """Answers to ``path`` start with ``nbytes`` of JSON whitespace, announced in Content-Length (the
        padding is generated as it is sent); None: an endless chunked body that never announces a length."""
        with self._lock:
            self._deliveries[path] = _Delivery(padding=nbytes, endless=nbytes is None)

    def cut(self, path: str) -> None:
        """Answers to ``path`` announce 100 bytes more than they send, then the server hangs up."""
        with self._lock:
            self._deliveries[path] = _Delivery(cut=True)

    def forbid(self, path: str) -> None:
        self.fail(path, 403, times=None)

    def paths(self, method: str = "GET") -> list[str]:
        return [r.path for r in self.requests if r.method == method]

    # ---- serving ------------------------------------------------------------------------------

    def delivery(self, target: str) -> _Delivery:
        with self._lock:
            return self._deliveries.get(unquote(urlsplit(target).path), _Delivery())

    def handle(self, method: str, target: str, headers: dict[str, str],
               raw: bytes) -> tuple[int, dict[str, Any] | _Stream, dict[str, str]]:
        parts = urlsplit(target)
        path = unquote(parts.path)
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        try:
            body = json.loads(raw) if raw else None
            bad_json = False
        except ValueError:
            body, bad_json = None, True
        with self._lock:
            self.requests.append(Request(method, path, query, headers, body))
            stall = self._stalls.get(path, 0.0)
        if stall:
            self._stopping.wait(stall)
        with self._lock:
            self._field_validation = query.get("fieldValidation", "")
            self._warnings = []
            try:
                self._inject(method, path, query)
                if bad_json:
                    raise _HttpError(400, "the body of the request is not valid JSON")
                code, out = self._serve(method, path, query, headers, body)
                warned = {"Warning": ", ".join(f'299 - "{w}"' for w in self._warnings)} if self._warnings else {}
                return code, out, warned
            except _HttpError as e:
                return e.status, e.body or _status(e.status, e.message), e.headers
            finally:
                self._field_validation, self._warnings = "", []

    def _inject(self, method: str, path: str, query: dict[str, str]) -> None:
        for fault in self._faults.get(path, []):
            if fault.times == 0 or (fault.on_continue and not query.get("continue")) \
                    or (fault.method is not None and fault.method != method):
                continue
            if fault.times is not None:
                fault.times -= 1
            headers = {"Retry-After": fault.retry_after} if fault.retry_after is not None else {}
            message = fault.message or {
                403: self._forbidden(method, path),
                410: _EXPIRED, 429: "Too many requests, please try again later.",
            }.get(fault.status, "Internal error occurred: injected fault")
            raise _HttpError(fault.status, message, headers)

    def _forbidden(self, method: str, path: str) -> str:
        """The API server's RBAC refusal, in its words."""
        try:
            rt, namespace, name, sub = self._route(path)
        except _HttpError:
            return f'forbidden: User "system:serviceaccount:optplan:planner" cannot {method.lower()} path "{path}"'
        verb = ("list" if name is None and method == "GET" else
                {"GET": "get", "PATCH": "patch", "PUT": "update", "POST": "create", "DELETE": "delete"}.get(
                    method, method.lower()))
        scope = "at the cluster scope" if namespace is None else f'in the namespace "{namespace}"'
        target = rt.name if name is None else f'{rt.name} "{name}"'
        resource = rt.plural if sub is None else f"{rt.plural}/{sub}"
        return (f'{target} is forbidden: User "system:serviceaccount:optplan:planner" cannot {verb} resource '
                f'"{resource}" in API group "{rt.group}" {scope}')

    def _serve(self, method: str, path: str, query: dict[str, str], headers: dict[str, str],
               body: Any) -> tuple[int, dict[str, Any] | _Stream]:
        rt, namespace, name, sub = self._route(path)
        if name is None:
            if method == "GET" and _true(query.get("watch")):
                return 200, self._watch(rt, namespace, query)
            if method == "GET":
                return 200, self._list(rt, namespace, query)
            if method == "POST":
                if rt.namespaced and namespace is None:
                    raise _HttpError(405, f"the server does not allow this method on the requested resource: "
                                          f"create {rt.name} needs a namespace")
                return self._create(rt, namespace, body)
            raise _HttpError(405, "the server does not allow this method on the requested resource")
        key = (namespace or "", name)
        if method == "POST" and rt.plural == "pods" and not rt.group and sub == "eviction":
            return self._evict(namespace or "", name, body)
        if method == "POST" and rt.plural == "pods" and not rt.group and sub == "binding":
            return self._bind(namespace or "", name, body)
        if sub is not None and (sub != "status" or not rt.status_subresource):
            raise _HttpError(404, "the server could not find the requested resource")
        if method == "GET":
            return 200, _full(rt, self._existing(rt, key))
        if method == "PUT":
            return self._update(rt, namespace, name, body, sub)
        if method == "PATCH":
            ctype = headers.get("content-type", "").split(";")[0].strip()
            return self._patch(rt, namespace, name, sub, ctype, body)
        if method == "DELETE" and sub is None:
            return self._delete(rt, namespace, name, body or {})
        raise _HttpError(405, "the server does not allow this method on the requested resource")

    def _route(self, path: str) -> tuple[ResourceType, str | None, str | None, str | None]:
        segs = [s for s in path.split("/") if s]
        if segs[:2] == ["api", "v1"]:
            group, version, rest = "", "v1", segs[2:]
        elif segs[:1] == ["apis"] and len(segs) >= 3:
            group, version, rest = segs[1], segs[2], segs[3:]
        else:
            raise _HttpError(404, "the server could not find the requested resource")
        namespace = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        rt = self._types.get((group, version, rest[0])) if 1 <= len(rest) <= 3 else None
        if rt is None or (namespace is not None and not rt.namespaced):
            raise _HttpError(404, "the server could not find the requested resource")
        name = rest[1] if len(rest) >= 2 else None
        sub = rest[2] if len(rest) == 3 else None
        return rt, namespace, name, sub

    def _existing(self, rt: ResourceType, key: tuple[str, str]) -> dict[str, Any]:
        obj = self._objects[rt].get(key)
        if obj is None:
            raise _HttpError(404, f'{rt.name} "{key[1]}" not found', body=_status(
                404, f'{rt.name} "{key[1]}" not found', details={"name": key[1], "group": rt.group, "kind": rt.plural}))
        return obj

    # ---- list and watch -----------------------------------------------------------------------

    def _too_old(self, rt: ResourceType, rv: int) -> bool:
        return rv < self._window[rt]

    def _sorted_keys(self, rt: ResourceType) -> list[tuple[str, str]]:
        keys = self._keys.get(rt)
        if keys is None:
            keys = self._keys[rt] = sorted(self._objects[rt])
        return keys

    def _list(self, rt: ResourceType, namespace: str | None, query: dict[str, str]) -> dict[str, Any]:
        terms = [_term(t) for t in query.get("fieldSelector", "").split(",") if t]
        labels = _label_selector(query.get("labelSelector", ""))
        rv = self._rv
        asked = query.get("resourceVersion", "")
        if asked not in ("", "0") and not query.get("continue"):
            if not asked.isdigit():
                raise _HttpError(400, f"invalid resource version: {asked}")
            if self._too_old(rt, int(asked)):
                raise _HttpError(410, f"too old resource version: {asked} ({self._window[rt] + 1})")
        keys = self._sorted_keys(rt)
        lo, hi = 0, len(keys)
        if namespace is not None:
            lo, hi = bisect.bisect_left(keys, (namespace, "")), bisect.bisect_left(keys, (namespace + "\0", ""))
        if query.get("continue"):
            try:
                token = json.loads(base64.urlsafe_b64decode(query["continue"]))
                start = tuple(token["after"])
                rv = int(token.get("rv", rv))
            except (ValueError, KeyError, TypeError):
                raise _HttpError(400, "continue key is not valid") from None
            if self._too_old(rt, rv):
                raise _HttpError(410, _EXPIRED)
            lo = max(lo, bisect.bisect_right(keys, start))
        limit = _int_param(query, "limit")
        store = self._objects[rt]
        items: list[dict[str, Any]] = []
        more = False
        last = lo
        for i in range(lo, hi):
            obj = store[keys[i]]
            if not (all(_matches(obj, t) for t in terms) and _labels_match(obj, labels)):
                continue
            if limit > 0 and len(items) == limit:
                more = True
                break
            items.append({k: v for k, v in obj.items() if k not in ("apiVersion", "kind")})  # as the API lists
            last = i
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if more:
            meta["continue"] = base64.urlsafe_b64encode(
                json.dumps({"after": list(keys[last]), "rv": rv}).encode()).decode()
            if not terms and not labels:  # the apiserver leaves it out when a selector is set
                meta["remainingItemCount"] = hi - last - 1
        return {"apiVersion": rt.api_version, "kind": f"{rt.kind}List", "metadata": meta, "items": items}

    def _watch(self, rt: ResourceType, namespace: str | None, query: dict[str, str]) -> _Stream:
        fields = [_term(t) for t in query.get("fieldSelector", "").split(",") if t]
        labels = _label_selector(query.get("labelSelector", ""))
        asked = query.get("resourceVersion", "")
        if asked not in ("", "0") and not asked.isdigit():
            raise _HttpError(400, f"invalid resource version: {asked}")
        timeout = _int_param(query, "timeoutSeconds") or 1e9
        now = time.monotonic()
        bookmarks = _true(query.get("allowWatchBookmarks"))
        initial = asked in ("", "0") or _true(query.get("sendInitialEvents"))
        w = _Watcher(rt, namespace, fields, labels, self._rv if initial else int(asked), bookmarks, now + timeout,
                     self._bookmark_seq, now + (self.bookmark_interval or 1e9))
        first: list[bytes] = []
        if initial:
            for k in self._sorted_keys(rt):
                o = self._objects[rt][k]
                if self._visible(w, o):
                    first.append(_line("ADDED", _with_kind(rt, o)))
            if _true(query.get("sendInitialEvents")) and bookmarks:
                first.append(_line("BOOKMARK", {"apiVersion": rt.api_version, "kind": rt.kind, "metadata": {
                    "resourceVersion": str(self._rv), "annotations": {"k8s.io/initial-events-end": "true"}}}))
        elif self._too_old(rt, w.rv):
            return _Stream(iter([_line("ERROR", _status(410, f"too old resource version: {asked} "
                                                             f"({self._window[rt] + 1})"))]))
        self._watchers.append(w)
        return _Stream(self._stream(w, first))

    def _visible(self, w: _Watcher, obj: dict[str, Any] | None) -> bool:
        if obj is None:
            return False
        ns = obj.get("metadata", {}).get("namespace", "")
        return (w.namespace is None or ns == w.namespace) and all(_matches(obj, t) for t in w.fields) \
            and _labels_match(obj, w.labels)

    def _stream(self, w: _Watcher, first: list[bytes]) -> Iterator[bytes]:
        """The watch's event lines as they happen; an empty line after each idle wait (at most a second)
        lets the HTTP handler notice a client that hung up."""
        try:
            yield from first
            while True:
                out, end = self._next_lines(w)
                yield from out or [b""]
                if end:
                    return
        finally:
            with self._lock:
                w.closed = True
                if w in self._watchers:
                    self._watchers.remove(w)

    def _next_lines(self, w: _Watcher) -> tuple[list[bytes], bool]:
        """The watcher's next lines (waiting up to a second for some) and whether the stream ends."""
        out: list[bytes] = []
        with self._changed:
            for attempt in range(2):
                now = time.monotonic()
                if self._stopping.is_set() or w.closed or now >= w.deadline or w.rt not in self._history:
                    return out, True
                if self._too_old(w.rt, w.rv):
                    return [_line("ERROR", _status(410, f"too old resource version: {w.rv} "
                                                        f"({self._window[w.rt] + 1})"))], True
                for e in self._history[w.rt]:
                    if e.rv > w.rv:
                        out.extend(self._event_lines(w, e))
                w.rv = self._rv  # every event of this type up to now is delivered
                if self.bookmark_interval is not None:
                    w.next_bookmark = min(w.next_bookmark, now + self.bookmark_interval)
                due = w.bookmark_seq != self._bookmark_seq or now >= w.next_bookmark
                if not w.bookmarks:
                    w.bookmark_seq = self._bookmark_seq
                elif due and not out:  # a due bookmark waits for the events before it to go out
                    out.append(_line("BOOKMARK", {"apiVersion": w.rt.api_version, "kind": w.rt.kind,
                                                  "metadata": {"resourceVersion": str(self._rv)}}))
                    w.bookmark_seq = self._bookmark_seq
                    w.next_bookmark = now + (self.bookmark_interval or 1e9)
                if out or attempt:
                    break
                self._changed.wait(min(1.0, max(0.0, min(w.deadline, w.next_bookmark) - now) + 0.001))
        return out, False

    def _event_lines(self, w: _Watcher, e: _Event) -> list[bytes]:
        now_in, before_in = self._visible(w, e.obj), self._visible(w, e.prev)
        if e.type == "MODIFIED" and now_in != before_in:
            kind = "ADDED" if now_in else "DELETED"
        elif e.type == "MODIFIED":
            kind = "MODIFIED" if now_in else ""
        else:
            kind = e.type if now_in else ""
        return [_line(kind, _with_kind(w.rt, e.obj))] if kind else []

    # ---- writes -------------------------------------------------------------------------------

    def _store(self, rt: ResourceType, key: tuple[str, str], obj: dict[str, Any]) -> dict[str, Any]:
        """Write ``obj`` at a new resourceVersion and record the event."""
        prev = self._objects[rt].get(key)
        if prev is None:
            self._keys.pop(rt, None)
        self._rv += 1
        obj.setdefault("metadata", {})["resourceVersion"] = str(self._rv)
        self._objects[rt][key] = obj
        self._record(rt, _Event(self._rv, "ADDED" if prev is None else "MODIFIED", obj, prev))
        return obj

    def _remove(self, rt: ResourceType, key: tuple[str, str]) -> dict[str, Any]:
        """Delete; the deleted object carries the deletion's resourceVersion, as in a DELETED event."""
        gone = self._objects[rt].pop(key)
        self._keys.pop(rt, None)
        self._rv += 1
        obj = {**gone, "metadata": {**gone["metadata"], "resourceVersion": str(self._rv)}}
        self._record(rt, _Event(self._rv, "DELETED", obj, None))
        return obj

    def _record(self, rt: ResourceType, event: _Event) -> None:
        hist = self._history[rt]
        hist.append(event)
        while len(hist) > self._history_size:
            self._window[rt] = hist.popleft().rv
        self._changed.notify_all()

    def timestamp(self) -> str:
        """Now by the server's clock, as the API writes timestamps."""
        return self.clock().astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    def _uid(self) -> str:
        return str(uuid.UUID(int=self._rng.getrandbits(128), version=4))

    def _create(self, rt: ResourceType, namespace: str | None, body: Any) -> tuple[int, dict[str, Any]]:
        if not isinstance(body, dict):
            raise _HttpError(400, "the body of the request is not a JSON object")
        if body.get("apiVersion", rt.api_version) != rt.api_version:
            raise _HttpError(400, f"the API version in the data ({body['apiVersion']}) does not match the expected "
                                  f"API version ({rt.api_version})")
        if body.get("kind", rt.kind) != rt.kind:
            raise _HttpError(400, f"the kind in the data ({body['kind']}) does not match the expected kind ({rt.kind})")
        obj = copy.deepcopy(body)
        obj["apiVersion"], obj["kind"] = rt.api_version, rt.kind
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise _HttpError(400, "metadata must be an object")
        if rt.namespaced:
            ns = namespace if namespace is not None else meta.get("namespace", "default")
            if meta.get("namespace", ns) != ns:
                raise _HttpError(400, "the namespace of the provided object does not match the namespace sent "
                                      "on the request")
            meta["namespace"] = ns
        else:
            meta.pop("namespace", None)
        if not meta.get("name"):
            if not meta.get("generateName"):
                raise self._invalid(rt, "", [("FieldValueRequired", "metadata.name",
                                              "Required value: name or generateName is required")])
            while True:
                meta["name"] = meta["generateName"] + "".join(self._rng.choice(_NAME_CHARS) for _ in range(5))
                if (meta.get("namespace", ""), meta["name"]) not in self._objects[rt]:
                    break
        key = (meta.get("namespace", ""), meta["name"])
        if key in self._objects[rt]:
            raise _HttpError(409, f'{rt.name} "{meta["name"]}" already exists', body=_status(
                409, f'{rt.name} "{meta["name"]}" already exists', reason="AlreadyExists",
                details={"name": meta["name"], "group": rt.group, "kind": rt.plural}))
        for k in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink", "managedFields"):
            meta.pop(k, None)
        meta["uid"] = self._uid()
        meta["creationTimestamp"] = self.timestamp()
        meta["generation"] = 1
        if rt.status_subresource:
            obj.pop("status", None)
        if rt.kind == "Pod" and not rt.group:
            obj["status"] = {"phase": "Pending"}
        obj = self._admit(rt, obj, None, None)
        return 201, _full(rt, self._store(rt, key, obj))

    def _admit(self, rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None,
               sub: str | None) -> dict[str, Any]:
        """Prune, default and validate by the CRD schema (the part the write may change); an
        events.k8s.io/v1 Event as the apiserver validates one."""
        if rt.group == "events.k8s.io":
            causes = _event_causes(obj, old)
            if causes:
                raise self._invalid(rt, obj["metadata"].get("name", ""), causes)
            return obj
        if rt.kind == "Pod" and not rt.group and sub is None and old is None:
            causes = _pod_causes(obj)
            if causes:
                raise self._invalid(rt, obj["metadata"].get("name", ""), causes)
        if rt.kind == "Pod" and not rt.group and sub == "status" and old is not None \
                and (old.get("spec") or {}).get("nodeName"):
            nominated = (obj.get("status") or {}).get("nominatedNodeName")
            if nominated and nominated != (old.get("status") or {}).get("nominatedNodeName"):
                raise self._invalid(rt, obj["metadata"].get("name", ""), [(
                    "FieldValueForbidden", "status.nominatedNodeName",
                    "Forbidden: may not be set on pods that are already bound to a node")])
        if rt.schema is None:
            return obj
        unknown = sorted(_unknown_fields(obj, rt.schema, "", root=True))  # the API server sorts them
        if unknown and self._field_validation == "Strict":
            listed = ", ".join(f'unknown field "{u}"' for u in unknown)
            message = (f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: strict decoding '
                       f"error: {listed}")
            raise _HttpError(400, message, body=_status(400, message, reason="BadRequest"))
        if unknown and self._field_validation != "Ignore":
            self._warnings.extend(f'unknown field \\"{u}\\"' for u in unknown)
        obj = _prune(obj, rt.schema, root=True)
        _default(obj, rt.schema)
        causes = []
        for k, v in obj.items():
            if k in ("apiVersion", "kind", "metadata") \
                    or (rt.status_subresource and (k == "status") != (sub == "status")):
                continue
            causes += _validate(v, rt.schema.get("properties", {}).get(k, {}), k)
        if sub != "status":
            for k in rt.schema.get("required", []):
                if k not in obj and not (rt.status_subresource and k == "status"):
                    causes.append(("FieldValueRequired", k, "Required value"))
        if causes:
            raise self._invalid(rt, obj["metadata"].get("name", ""), causes)
        return obj

    @staticmethod
    def _invalid(rt: ResourceType, name: str, causes: list[tuple[str, str, str]]) -> _HttpError:
        causes = sorted(set(causes), key=lambda c: (c[1], c[2]))
        parts = [f"{f}: {m}" for _, f, m in causes]
        listed = parts[0] if len(parts) == 1 else f"[{', '.join(parts)}]"
        message = f'{rt.qualified_kind} "{name}" is invalid: {listed}'
        return _HttpError(422, message, body=_status(422, message, details={
            "name": name, "group": rt.group, "kind": rt.kind,
            "causes": [{"reason": r, "message": m, "field": f} for r, f, m in causes]}))

    def _conflict(self, rt: ResourceType, name: str) -> _HttpError:
        message = (f'Operation cannot be fulfilled on {rt.name} "{name}": the object has been modified; please '
                   "apply your changes to the latest version and try again")
        return _HttpError(409, message, body=_status(409, message, details={
            "name": name, "group": rt.group, "kind": rt.plural}))

    def _update(self, rt: ResourceType, namespace: str | None, name: str, body: Any,
                sub: str | None) -> tuple[int, dict[str, Any]]:
        if not isinstance(body, dict) or not isinstance(body.get("metadata", {}), dict):
            raise _HttpError(400, "the body of the request is not a JSON object")
        old = self._existing(rt, (namespace or "", name))
        meta = body.setdefault("metadata", {})
        if meta.get("name", name) != name:
            raise _HttpError(400, f"the name of the object ({meta.get('name')}) does not match the name on the URL "
                                  f"({name})")
        wanted = meta.get("resourceVersion")
        if wanted is None and rt.custom:
            raise self._invalid(rt, name, [("FieldValueInvalid", "metadata.resourceVersion",
                                            "Invalid value: 0x0: must be specified for an update")])
        return self._write(rt, old, body, sub, wanted)

    def _write(self, rt: ResourceType, old: dict[str, Any], body: dict[str, Any], sub: str | None,
               wanted: Any) -> tuple[int, dict[str, Any]]:
        """Apply an update (the whole new object ``body``) to the stored ``old``."""
        name = old["metadata"]["name"]
        if wanted is not None and str(wanted) != old["metadata"]["resourceVersion"]:
            raise self._conflict(rt, name)
        if sub == "status":
            new = copy.deepcopy(old)
            if "status" in body:
                new["status"] = copy.deepcopy(body["status"])
            else:
                new.pop("status", None)
        else:
            new = copy.deepcopy(body)
            new["apiVersion"], new["kind"] = rt.api_version, rt.kind
            meta = new.setdefault("metadata", {})
            for k in _SYSTEM_META:
                if k in old["metadata"]:
                    meta[k] = old["metadata"][k]
                else:
                    meta.pop(k, None)
            if rt.status_subresource:
                if "status" in old:
                    new["status"] = copy.deepcopy(old["status"])
                else:
                    new.pop("status", None)
            if rt.kind == "Pod" and not rt.group and new.get("spec") != old.get("spec"):
                raise self._invalid(rt, name, [("FieldValueForbidden", "spec", (
                    "Forbidden: pod updates may not change fields other than `spec.containers[*].image`, "
                    "`spec.initContainers[*].image`, `spec.activeDeadlineSeconds`, `spec.tolerations` (only "
                    "additions to existing tolerations) or `spec.terminationGracePeriodSeconds`"))])
        new = self._admit(rt, new, old, sub)
        new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        if new == _with_kind(rt, old):
            return 200, _full(rt, old)  # nothing changed: no write, no event
        ignored = ("metadata", "status") if rt.status_subresource else ("metadata",)
        if {k: v for k, v in new.items() if k not in ignored} != {k: v for k, v in _with_kind(rt, old).items()
                                                                   if k not in ignored}:
            new["metadata"]["generation"] = int(old["metadata"].get("generation", 1) or 1) + 1
        key = (old["metadata"].get("namespace", ""), name)
        if new["metadata"].get("deletionTimestamp") and old["metadata"].get("finalizers") \
                and not new["metadata"].get("finalizers") and not (rt.kind == "Pod" and self._hold_pods):
            self._objects[rt][key] = new
            return 200, _full(rt, self._remove(rt, key))
        return 200, _full(rt, self._store(rt, key, new))

    def _patch(self, rt: ResourceType, namespace: str | None, name: str, sub: str | None, ctype: str,
               body: Any) -> tuple[int, dict[str, Any]]:
        old = self._existing(rt, (namespace or "", name))
        current = _full(rt, old)
        if ctype == "application/merge-patch+json":
            if not isinstance(body, dict):
                raise _HttpError(400, "the patch is not a JSON object")
            merged = merge_patch(current, body)
        elif ctype == "application/strategic-merge-patch+json" and not rt.custom:
            if not isinstance(body, dict):
                raise _HttpError(400, "the patch is not a JSON object")
            merged = _strategic(current, body, "")
        elif ctype == "application/json-patch+json":
            merged = _json_patch(current, body)
        else:
            accepted = "application/json-patch+json, application/merge-patch+json" + (
                ", application/apply-patch+yaml" if rt.custom else
                ", application/strategic-merge-patch+json, application/apply-patch+yaml")
            raise _HttpError(415, f"the body of the request was in an unknown format - accepted media types "
                                  f"include: {accepted}")
        if not isinstance(merged, dict):
            raise _HttpError(422, "the patched object is not a JSON object")
        wanted = (merged.get("metadata") or {}).get("resourceVersion")
        if wanted == old["metadata"].get("resourceVersion"):
            wanted = None  # the patch did not set it
        return self._write(rt, old, merged, sub, wanted)

    def _delete(self, rt: ResourceType, namespace: str | None, name: str,
                options: Any) -> tuple[int, dict[str, Any]]:
        key = (namespace or "", name)
        obj = self._existing(rt, key)
        options = options if isinstance(options, dict) else {}
        pre = options.get("preconditions") or {}
        meta = obj["metadata"]
        if pre.get("uid") is not None and pre["uid"] != meta.get("uid"):
            raise _HttpError(409, f"Precondition failed: UID in precondition: {pre['uid']}, UID in object meta: "
                                  f"{meta.get('uid', '')}", body=_status(409, (
                                      f"Precondition failed: UID in precondition: {pre['uid']}, UID in object meta: "
                                      f"{meta.get('uid', '')}"), details={"name": name, "group": rt.group,
                                                                          "kind": rt.plural}))
        if pre.get("resourceVersion") is not None and pre["resourceVersion"] != meta.get("resourceVersion"):
            raise _HttpError(409, f"Precondition failed: ResourceVersion in precondition: {pre['resourceVersion']}, "
                                  f"ResourceVersion in object meta: {meta.get('resourceVersion')}")
        grace = options.get("gracePeriodSeconds")
        if grace is None and rt.kind == "Pod":
            grace = (obj.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
        pending = bool(meta.get("finalizers")) or (rt.kind == "Pod" and not rt.group and self._hold_pods
                                                    and bool(grace) and (obj.get("spec") or {}).get("nodeName"))
        if pending:
            if not meta.get("deletionTimestamp"):
                new = copy.deepcopy(obj)
                new["metadata"]["deletionTimestamp"] = self.timestamp()
                new["metadata"]["deletionGracePeriodSeconds"] = int(grace or 0)
                obj = self._store(rt, key, new)
            return 200, _full(rt, obj)
        gone = self._remove(rt, key)
        if rt.kind == "Pod" and not rt.group:
            return 200, _full(rt, gone)  # the pod registry's ReturnDeletedObject
        return 200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": {
            "name": name, "group": rt.group, "kind": rt.plural, "uid": gone["metadata"].get("uid", "")}}

    # ---- pods/eviction and pods/binding -------------------------------------------------------

    def _evict(self, namespace: str, name: str, body: Any) -> tuple[int, dict[str, Any]]:
        pods = self.type_of("v1", "Pod")
        named = ((body or {}).get("metadata") or {}).get("name") if isinstance(body, dict) else None
        if named is not None and named != name:
            raise _HttpError(400, "name in URL does not match name in Eviction object")
        opts = (body or {}).get("deleteOptions") or {} if isinstance(body, dict) else {}
        grace = opts.get("gracePeriodSeconds")
        pod = self._objects[pods].get((namespace, name))
        uid = pod["metadata"].get("uid", "") if pod is not None else ""
        try:
            code, out = self._evict_pod(pods, namespace, name, pod, opts)
        except _HttpError as e:
            self.evictions.append(Eviction(namespace, name, uid, grace, e.status, e.message))
            raise
        self.evictions.append(Eviction(namespace, name, uid, grace, code, "evicted"))
        return code, out

    def _evict_pod(self, pods: ResourceType, namespace: str, name: str, pod: dict[str, Any] | None,
                   opts: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if pod is None:
            pod = self._existing(pods, (namespace, name))  # the 404
        pre = opts.get("preconditions") or {}
        if pre.get("uid") is not None and pre["uid"] != pod["metadata"].get("uid"):
            self._delete(pods, namespace, name, {"preconditions": pre})  # raises the 409
        success = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
        phase = (pod.get("status") or {}).get("phase", "Pending")
        if pod["metadata"].get("deletionTimestamp") or phase in ("Pending", "Succeeded", "Failed"):
            self._delete(pods, namespace, name, opts)
            return 201, success
        pdbs = self.type_of("policy/v1", "PodDisruptionBudget")
        labels = pod["metadata"].get("labels") or {}
        matching = [(k, o) for k, o in sorted(self._objects[pdbs].items())  # an empty selector matches nothing here
                    if k[0] == namespace and _nonempty((o.get("spec") or {}).get("selector"))
                    and selector_matches((o.get("spec") or {}).get("selector"), labels)]
        if len(matching) > 1:
            message = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
            raise _HttpError(500, message, body={"kind": "Status", "apiVersion": "v1", "metadata": {},
                                                 "status": "Failure", "message": message, "code": 500})
        if matching:
            key, pdb = matching[0]
            st = pdb.get("status") or {}
            ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                        for c in (pod.get("status") or {}).get("conditions") or [])
            desired = int(st.get("desiredHealthy", 0) or 0)
            policy = (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy") or "IfHealthyBudget"
            if not ready and (policy == "AlwaysAllow"
                              or (desired > 0 and int(st.get("currentHealthy", 0) or 0) >= desired)):
                self._delete(pods, namespace, name, opts)  # an unready pod does not count: no decrement
                return 201, success
            allowed = int(st.get("disruptionsAllowed", 0) or 0)
            if allowed < 0:
                raise _HttpError(403, "pdb disruptions allowed is negative")
            if allowed == 0:
                cause = (f"The disruption budget {key[1]} needs {st.get('desiredHealthy', 0)} healthy pods and has "
                         f"{st.get('currentHealthy', 0)} currently")
                raise _HttpError(429, _PDB_VIOLATION, body=_status(429, _PDB_VIOLATION, details={
                    "causes": [{"reason": "DisruptionBudget", "message": cause}]}))
            new = copy.deepcopy(pdb)
            nst = new.setdefault("status", {})
            nst["disruptionsAllowed"] = allowed - 1
            nst.setdefault("disruptedPods", {})[name] = self.timestamp()
            self._store(pdbs, key, new)
        self._delete(pods, namespace, name, opts)
        return 201, success

    def _bind(self, namespace: str, name: str, body: Any) -> tuple[int, dict[str, Any]]:
        pods = self.type_of("v1", "Pod")
        pod = self._existing(pods, (namespace, name))
        target = ((body or {}).get("target") or {}).get("name") if isinstance(body, dict) else None
        if not target:
            raise self._invalid(pods, name, [("FieldValueRequired", "target.name", "Required value")])
        if (pod.get("spec") or {}).get("nodeName"):
            raise _HttpError(409, f"pod {name} is already assigned to node \"{pod['spec']['nodeName']}\"")
        new = copy.deepcopy(pod)
        new.setdefault("spec", {})["nodeName"] = target
        conds = [c for c in new.setdefault("status", {}).get("conditions", []) if c.get("type") != "PodScheduled"]
        new["status"]["conditions"] = [*conds, {"type": "PodScheduled", "status": "True",
                                                "lastTransitionTime": self.timestamp()}]
        self._store(pods, (namespace, name), new)
        return 201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}


class ApiError(Exception):
    """A Python-side call the server would have refused: ``code`` and the ``Status`` body."""

    def __init__(self, code: int, status: dict[str, Any]) -> None:
        super().__init__(f"{code}: {status.get('message')}")
        self.code = code
        self.status = status


_EVENT_IMMUTABLE = ("regarding", "related", "reason", "note", "type", "eventTime", "action", "reportingController",
                    "reportingInstance")
_QUALIFIED = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                        r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _event_causes(obj: dict[str, Any], old: dict[str, Any] | None) -> list[tuple[str, str, str]]:
    """An events.k8s.io/v1 Event's problems, as the apiserver's ValidateEventCreate / ValidateEventUpdate
    find them (named by the v1 fields rather than the internal type's): eventTime, reportingController (a
    qualified name), reportingInstance, action and reason required (at most 128 characters), note at most
    1024 bytes, type Normal or Warning, the deprecated fields unset, a cluster-scoped ``regarding`` only
    from the default or kube-system namespace, ``series`` with count >= 2 and lastObservedTime; on update
    everything but ``series`` (and metadata) is immutable."""
    causes: list[tuple[str, str, str]] = []
    name = obj["metadata"].get("name", "")
    if len(name) > 253 or not _SUBDOMAIN.match(name):
        causes.append(("FieldValueInvalid", "metadata.name", f"Invalid value: {json.dumps(name)}: a lowercase RFC "
                                                             "1123 subdomain must consist of lower case alphanumeric "
                                                             "characters, '-' or '.'"))
    if not obj.get("eventTime"):
        causes.append(("FieldValueRequired", "eventTime", "Required value"))
    controller = str(obj.get("reportingController") or "")
    if not controller:
        causes.append(("FieldValueRequired", "reportingController", "Required value"))
    elif not _QUALIFIED.match(controller):
        causes.append(("FieldValueInvalid", "reportingController", f"Invalid value: {json.dumps(controller)}: "
                                                                   "must be a qualified name"))
    for f in ("reportingInstance", "action", "reason"):
        v = str(obj.get(f) or "")
        if not v:
            causes.append(("FieldValueRequired", f, "Required value"))
        elif len(v) > 128:
            causes.append(("FieldValueInvalid", f, "Invalid value: \"\": can have at most 128 characters"))
    if len(str(obj.get("note") or "").encode()) > 1024:
        causes.append(("FieldValueInvalid", "note", "Invalid value: \"\": can have at most 1024 characters"))
    if obj.get("type") not in ("Normal", "Warning"):
        causes.append(("FieldValueInvalid", "type", f"Invalid value: \"\": has invalid value: {obj.get('type') or ''}"))
    for f in ("deprecatedFirstTimestamp", "deprecatedLastTimestamp", "deprecatedCount", "deprecatedSource"):
        if obj.get(f):
            causes.append(("FieldValueInvalid", f, "Invalid value: \"\": needs to be unset"))
    regarding = obj.get("regarding") or {}
    if not regarding.get("namespace") and obj["metadata"].get("namespace") not in ("default", "kube-system"):
        causes.append(("FieldValueInvalid", "regarding.namespace", "Invalid value: \"\": does not match "
                                                                   "event.namespace"))
    series = obj.get("series")
    if series is not None and (old is None or series != old.get("series")):
        if not isinstance(series, dict) or int(series.get("count") or 0) < 2:
            causes.append(("FieldValueInvalid", "series.count", "Invalid value: \"\": should be at least 2"))
        if not isinstance(series, dict) or not series.get("lastObservedTime"):
            causes.append(("FieldValueRequired", "series.lastObservedTime", "Required value"))
    if old is not None:
        for f in _EVENT_IMMUTABLE:
            if obj.get(f) != old.get(f):
                causes.append(("FieldValueInvalid", f, "Invalid value: field is immutable"))
    return causes


def _nonempty(selector: Any) -> bool:
    return isinstance(selector, dict) and bool(selector.get("matchLabels") or selector.get("matchExpressions"))


def _int_param(query: dict[str, str], name: str) -> int:
    value = query.get(name) or "0"
    if not value.lstrip("-").isdigit():
        raise _HttpError(400, f"invalid value for {name}: {value!r}")
    return int(value)


def _true(value: str | None) -> bool:
    """A boolean query parameter, as Go's strconv.ParseBool reads it."""
    return (value or "").lower() in ("1", "t", "true")


def _clone(obj: Any) -> Any:
    """A deep copy of JSON data (a JSON round trip: several times faster than copy.deepcopy)."""
    try:
        return json.loads(json.dumps(obj))
    except (TypeError, ValueError):
        return copy.deepcopy(obj)


def _full(rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": rt.api_version, "kind": rt.kind, **_clone(obj)}


def _with_kind(rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
    return {**obj, "apiVersion": rt.api_version, "kind": rt.kind}


def _line(kind: str, obj: dict[str, Any]) -> bytes:
    return json.dumps({"type": kind, "object": obj}).encode() + b"\n"


def _status(code: int, message: str, *, reason: str | None = None,
            details: dict[str, Any] | None = None) -> dict[str, Any]:
    out = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
           "reason": reason or _REASONS.get(code, "Unknown"), "code": code}
    if details is not None:
        out["details"] = details
    return out


def _term(term: str) -> tuple[str, bool, str]:
    """``path!=value`` → (path, False, value); ``path=value`` and ``path==value`` → (path, True, value)."""
    for op, equal in (("!=", False), ("==", True), ("=", True)):
        if op in term:
            field_, value = term.split(op, 1)
            return field_.strip(), equal, value.strip()
    raise _HttpError(400, f"invalid field selector term {term!r}")


def _matches(obj: dict[str, Any], term: tuple[str, bool, str]) -> bool:
    field_, equal, value = term
    cur: Any = obj
    for part in field_.split("."):
        cur = cur.get(part) if isinstance(cur, dict) else None
    return ("" if cur is None else str(cur)) == value if equal else ("" if cur is None else str(cur)) != value


_SET_TERM = re.compile(r"^\s*(\S+)\s+(in|notin)\s+\(([^)]*)\)\s*$")


def _label_selector(text: str) -> list[tuple[str, str, frozenset[str]]]:
    """A labelSelector query as (key, op, values) terms, op one of = != in notin exists !exists."""
    terms: list[tuple[str, str, frozenset[str]]] = []
    parts: list[str] = []
    depth, cur = 0, ""
    for ch in text:  # split on commas outside parentheses
        depth += (ch == "(") - (ch == ")")
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    for part in (p.strip() for p in parts):
        if not part:
            continue
        m = _SET_TERM.match(part)
        if m:
            terms.append((m[1], m[2], frozenset(v.strip() for v in m[3].split(",") if v.strip())))
        elif "!=" in part:
            k, v = part.split("!=", 1)
            terms.append((k.strip(), "!=", frozenset({v.strip()})))
        elif "=" in part:
            k, v = part.replace("==", "=", 1).split("=", 1)
            terms.append((k.strip(), "=", frozenset({v.strip()})))
        elif part.startswith("!"):
            terms.append((part[1:].strip(), "!exists", frozenset()))
        elif re.fullmatch(r"[A-Za-z0-9._/-]+", part):
            terms.append((part, "exists", frozenset()))
        else:
            raise _HttpError(400, f"unable to parse requirement: {part!r}")
    return terms


def _labels_match(obj: dict[str, Any], terms: list[tuple[str, str, frozenset[str]]]) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    for key, op, values in terms:
        have = key in labels
        ok = {"=": have and labels.get(key) in values, "in": have and labels.get(key) in values,
              "!=": not have or labels.get(key) not in values, "notin": not have or labels.get(key) not in values,
              "exists": have, "!exists": not have}[op]
        if not ok:
            return False
    return True


def selector_matches(selector: Any, labels: dict[str, str]) -> bool:
    """A metav1.LabelSelector (policy/v1: null matches nothing, empty matches everything)."""
    if not isinstance(selector, dict):
        return False
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for e in selector.get("matchExpressions") or []:
        key, op, values = e.get("key"), e.get("operator"), e.get("values") or []
        if (op == "In" and labels.get(key) not in values) \
                or (op == "NotIn" and key in labels and labels[key] in values) \
                or (op == "Exists" and key not in labels) or (op == "DoesNotExist" and key in labels):
            return False
    return True


# ---- patches -----------------------------------------------------------------------------------

def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def _strategic(target: Any, patch: Any, path: str) -> Any:
    """A strategic merge patch, for the list fields of ``_MERGE_KEYS`` (others are replaced)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if k.startswith("$"):
            continue
        sub = f"{path}.{k}" if path else k
        if v is None:
            out.pop(k, None)
        elif isinstance(v, list) and sub in _MERGE_KEYS and isinstance(out.get(k), list):
            mkey = _MERGE_KEYS[sub]
            if mkey is None:
                merged = list(out[k]) + [x for x in v if x not in out[k]]
            else:
                merged = [copy.deepcopy(x) for x in out[k]]
                for item in v:
                    idx = next((i for i, x in enumerate(merged) if isinstance(x, dict) and isinstance(item, dict)
                                and x.get(mkey) == item.get(mkey)), None)
                    if isinstance(item, dict) and item.get("$patch") == "delete":
                        if idx is not None:
                            merged.pop(idx)
                    elif idx is None:
                        merged.append(copy.deepcopy(item))
                    else:
                        merged[idx] = _strategic(merged[idx], item, sub)
            out[k] = merged
        else:
            res = _strategic(out.get(k), v, sub)
            if res is None:
                out.pop(k, None)
            else:
                out[k] = res
    return out


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise _HttpError(422, f"json patch path {path!r} does not start with /")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _json_patch(doc: Any, ops: Any) -> Any:
    """RFC 6902 JSON patch: add, remove, replace, move, copy, test."""
    if not isinstance(ops, list):
        raise _HttpError(400, "a json patch is a list of operations")
    doc = copy.deepcopy(doc)

    def parent(path: str) -> tuple[Any, str]:
        parts = _pointer(path)
        if not parts:
            raise _HttpError(422, "json patch: the whole document cannot be the target")
        cur = doc
        for p in parts[:-1]:
            try:
                cur = cur[int(p)] if isinstance(cur, list) else cur[p]
            except (KeyError, IndexError, ValueError, TypeError):
                raise _HttpError(422, f"json patch: path {path!r} does not exist") from None
        return cur, parts[-1]

    def get(path: str) -> Any:
        cur = doc
        for p in _pointer(path):
            try:
                cur = cur[int(p)] if isinstance(cur, list) else cur[p]
            except (KeyError, IndexError, ValueError, TypeError):
                raise _HttpError(422, f"json patch: path {path!r} does not exist") from None
        return cur

    def remove(path: str) -> Any:
        cur, last = parent(path)
        try:
            return cur.pop(int(last)) if isinstance(cur, list) else cur.pop(last)
        except (KeyError, IndexError, ValueError):
            raise _HttpError(422, f"json patch: path {path!r} does not exist") from None

    def add(path: str, value: Any) -> None:
        cur, last = parent(path)
        if isinstance(cur, list):
            cur.insert(len(cur) if last == "-" else int(last), copy.deepcopy(value))
        elif isinstance(cur, dict):
            cur[last] = copy.deepcopy(value)
        else:
            raise _HttpError(422, f"json patch: path {path!r} does not exist")

    for op in ops:
        kind, path = op.get("op"), op.get("path", "")
        if kind == "add":
            add(path, op.get("value"))
        elif kind == "remove":
            remove(path)
        elif kind == "replace":
            remove(path)
            add(path, op.get("value"))
        elif kind == "move":
            add(path, remove(op.get("from", "")))
        elif kind == "copy":
            add(path, get(op.get("from", "")))
        elif kind == "test":
            if get(path) != op.get("value"):
                raise _HttpError(422, f"json patch: test failed at {path!r}")
        else:
            raise _HttpError(422, f"json patch: unknown operation {kind!r}")
    return doc


# ---- CRD schemas: pruning, defaulting, validation ----------------------------------------------

def _prune(value: Any, schema: dict[str, Any], *, root: bool = False) -> Any:
    """Drop the fields the structural schema does not know, as the apiserver does on every write."""
    if isinstance(value, dict):
        if root:
            out = {}
            for k, v in value.items():
                if k in ("apiVersion", "kind"):
                    out[k] = v
                elif k == "metadata" and isinstance(v, dict):
                    out[k] = {mk: mv for mk, mv in v.items() if mk in _META_FIELDS}
                elif k in schema.get("properties", {}) or schema.get("x-kubernetes-preserve-unknown-fields"):
                    out[k] = _prune(v, schema.get("properties", {}).get(k, {}))
            return out
        if schema.get("x-kubernetes-preserve-unknown-fields") and "properties" not in schema \
                and "additionalProperties" not in schema:
            return copy.deepcopy(value)
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        out = {}
        for k, v in value.items():
            if k in props:
                out[k] = _prune(v, props[k])
            elif isinstance(extra, dict):
                out[k] = _prune(v, extra)
            elif extra is True or schema.get("x-kubernetes-preserve-unknown-fields"):
                out[k] = copy.deepcopy(v)
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [_prune(v, schema["items"]) for v in value]
    return copy.deepcopy(value)


def _unknown_fields(value: Any, schema: dict[str, Any], path: str, *, root: bool = False) -> list[str]:
    """The fields ``_prune`` drops, as dotted paths (``spec.priority``), in the order they come."""
    out: list[str] = []
    if isinstance(value, dict):
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        keep_all = schema.get("x-kubernetes-preserve-unknown-fields")
        if keep_all and "properties" not in schema and "additionalProperties" not in schema and not root:
            return out
        for k, v in value.items():
            where = f"{path}.{k}" if path else k
            if root and k in ("apiVersion", "kind"):
                continue
            if root and k == "metadata":
                if isinstance(v, dict):
                    out += [f"metadata.{mk}" for mk in v if mk not in _META_FIELDS]
            elif k in props:
                out += _unknown_fields(v, props[k], where)
            elif isinstance(extra, dict):
                out += _unknown_fields(v, extra, f"{path}[{k}]")
            elif not (extra is True or keep_all):
                out.append(where)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, v in enumerate(value):
            out += _unknown_fields(v, schema["items"], f"{path}[{i}]")
    return out


def _default(value: Any, schema: dict[str, Any]) -> None:
    """Fill ``default`` values of missing properties, in place."""
    if isinstance(value, dict):
        for k, sub in schema.get("properties", {}).items():
            if k not in value and "default" in sub:
                value[k] = copy.deepcopy(sub["default"])
            if k in value:
                _default(value[k], sub)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for v in value:
            _default(v, schema["items"])


_JSON_TYPES = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}
_DATE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")


def _json_type(v: Any) -> str:
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    return _JSON_TYPES.get(type(v), "object")


def _shown(v: Any) -> str:
    """A value as the apiserver's messages show it."""
    return json.dumps(v) if isinstance(v, str) else json.dumps(v) if not isinstance(v, (dict, list)) else _json_type(v)


def _type_ok(v: Any, want: str) -> bool:
    got = _json_type(v)
    if want == "integer":
        return got == "integer" or (got == "number" and float(v).is_integer())
    if want == "number":
        return got in ("integer", "number")
    return got == want


def _validate(v: Any, s: dict[str, Any], path: str) -> list[tuple[str, str, str]]:
    """(reason, field, message) causes, in the apiserver's words, of ``v`` against schema ``s``."""
    if v is None:
        if s.get("nullable") or not s:
            return []
        want = s.get("type") or ("integer-or-string" if s.get("x-kubernetes-int-or-string") else "")
        message = f'Invalid value: "null": {path} in body must be of type {want}: "null"'
        return [("FieldValueTypeInvalid", path, message)] if want else []
    out: list[tuple[str, str, str]] = []
    want = s.get("type")
    if s.get("x-kubernetes-int-or-string"):
        if not (_type_ok(v, "integer") or isinstance(v, str)):
            return [("FieldValueTypeInvalid", path, f'Invalid value: "{_json_type(v)}": {path} in body must be of '
                                                    f'type integer,string: "{_json_type(v)}"')]
    elif want and not _type_ok(v, want):
        return [("FieldValueTypeInvalid", path, f'Invalid value: "{_json_type(v)}": {path} in body must be of type '
                                                f'{want}: "{_json_type(v)}"')]
    if "enum" in s and v not in s["enum"]:
        allowed = ", ".join(json.dumps(e) for e in s["enum"])
        out.append(("FieldValueNotSupported", path, f"Unsupported value: {_shown(v)}: supported values: {allowed}"))
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        if "minimum" in s and v < s["minimum"]:
            out.append(("FieldValueInvalid", path, f"Invalid value: {_shown(v)}: {path} in body should be greater "
                                                   f"than or equal to {s['minimum']}"))
        if "maximum" in s and v > s["maximum"]:
            out.append(("FieldValueInvalid", path, f"Invalid value: {_shown(v)}: {path} in body should be less than "
                                                   f"or equal to {s['maximum']}"))
    if isinstance(v, str):
        if "pattern" in s and re.search(s["pattern"], v) is None:
            out.append(("FieldValueInvalid", path, f"Invalid value: {_shown(v)}: {path} in body should match "
                                                   f"'{s['pattern']}'"))
        if "minLength" in s and len(v) < s["minLength"]:
            out.append(("FieldValueInvalid", path, f"Invalid value: {_shown(v)}: {path} in body should be at least "
                                                   f"{s['minLength']} chars long"))
        if "maxLength" in s and len(v) > s["maxLength"]:
            out.append(("FieldValueTooLong", path, f"Too long: may not be more than {s['maxLength']} bytes"))
        if s.get("format") == "date-time" and not _DATE_TIME.match(v):
            out.append(("FieldValueInvalid", path, f"Invalid value: {_shown(v)}: {path} in body must be of type "
                                                   f"date-time: {_shown(v)}"))
    if isinstance(v, list):
        if "minItems" in s and len(v) < s["minItems"]:
            out.append(("FieldValueInvalid", path, f"Invalid value: {len(v)}: {path} in body should have at least "
                                                   f"{s['minItems']} items"))
        if "maxItems" in s and len(v) > s["maxItems"]:
            out.append(("FieldValueTooMany", path, f"Too many: {len(v)}: must have at most {s['maxItems']} items"))
        kind = s.get("x-kubernetes-list-type")
        if kind in ("map", "set"):
            seen: set[str] = set()
            for i, item in enumerate(v):
                if kind == "map" and isinstance(item, dict):
                    ident = {k: item[k] for k in s.get("x-kubernetes-list-map-keys", []) if k in item}
                    shown = "map[string]interface {}{" + ", ".join(
                        f"{json.dumps(k)}:{json.dumps(x)}" for k, x in sorted(ident.items())) + "}"
                else:
                    ident, shown = item, _shown(item)
                token = json.dumps(ident, sort_keys=True)
                if token in seen:
                    out.append(("FieldValueDuplicate", f"{path}[{i}]", f"Duplicate value: {shown}"))
                seen.add(token)
        if isinstance(s.get("items"), dict):
            for i, item in enumerate(v):
                out += _validate(item, s["items"], f"{path}[{i}]")
    if isinstance(v, dict):
        for k in s.get("required", []):
            if k not in v:
                out.append(("FieldValueRequired", f"{path}.{k}", "Required value"))
        props = s.get("properties", {})
        extra = s.get("additionalProperties")
        for k, item in v.items():
            if k in props:
                out += _validate(item, props[k], f"{path}.{k}")
            elif isinstance(extra, dict):
                out += _validate(item, extra, f"{path}[{k}]")
    # anyOf/oneOf (value validations only, in a structural schema): the API server names the path in the
    # message (with no field, printed <nil>) and adds the first alternative's own causes when none holds.
    for key in ("anyOf", "oneOf"):
        alternatives = s.get(key) or []
        if not alternatives:
            continue
        results = [_validate(v, alt, path) for alt in alternatives]
        valid = sum(1 for r in results if not r)
        if key == "anyOf" and valid == 0:
            out.append(("FieldValueInvalid", "<nil>",
                        f'Invalid value: "": "{path}" must validate at least one schema (anyOf)'))
            out += results[0]
        elif key == "oneOf" and valid != 1:
            found = "none valid" if valid == 0 else f"{valid} valid alternatives"
            out.append(("FieldValueInvalid", "<nil>", f'Invalid value: "": "{path}" must validate one and only one '
                                                       f"schema (oneOf). Found {found}"))
            if valid == 0:
                out += results[0]
    # x-kubernetes-validations (CEL), evaluated once the value's own schema holds, as the API server does
    if not out:
        for rule in s.get("x-kubernetes-validations") or []:
            if not cel_eval(rule["rule"], v):
                message = rule.get("message") or f"failed rule: {rule['rule']}"
                out.append(("FieldValueInvalid", path, f"Invalid value: {message}"))
    return out


# ---- CEL: the subset the shipped CRDs use -------------------------------------------------------

_CEL_TOKEN = re.compile(r"\s*(\|\||&&|==|!=|[!().,]|[A-Za-z_][A-Za-z0-9_]*|\d+|\"[^\"]*\"|'[^']*')")


def cel_eval(rule: str, self_value: Any) -> bool:
    """A CRD's ``x-kubernetes-validations`` rule on ``self``, for the part of CEL the shipped CRDs write:
    ``!``, ``||``, ``&&``, ``==``/``!=``, parentheses, ``self`` and variables, field selection,
    ``has(x.f)``, ``x.all(v, e)``, ``x.exists(v, e)``, ``size(x)``, integer and string literals.
    Anything else raises ``ValueError`` (never a rule silently passed)."""
    tokens: list[str] = []
    pos = 0
    while pos < len(rule):
        if rule[pos:].strip() == "":
            break
        m = _CEL_TOKEN.match(rule, pos)
        if m is None:
            raise ValueError(f"CEL rule {rule!r}: cannot read it at {rule[pos:]!r}")
        tokens.append(m.group(1))
        pos = m.end()
    at = [0]

    def peek() -> str:
        return tokens[at[0]] if at[0] < len(tokens) else ""

    def take(want: str | None = None) -> str:
        tok = peek()
        if want is not None and tok != want:
            raise ValueError(f"CEL rule {rule!r}: expected {want!r}, found {tok!r}")
        at[0] += 1
        return tok

    # The parser builds closures over an environment (variable -> value).
    Expr = Callable[[dict[str, Any]], Any]

    def parse_or() -> Expr:
        left = parse_and()
        while peek() == "||":
            take()
            right, first = parse_and(), left
            left = lambda env, a=first, b=right: bool(a(env)) or bool(b(env))  # noqa: E731
        return left

    def parse_and() -> Expr:
        left = parse_eq()
        while peek() == "&&":
            take()
            right, first = parse_eq(), left
            left = lambda env, a=first, b=right: bool(a(env)) and bool(b(env))  # noqa: E731
        return left

    def parse_eq() -> Expr:
        left = parse_unary()
        while peek() in ("==", "!="):
            op, right, first = take(), parse_unary(), left
            left = (lambda env, a=first, b=right: a(env) == b(env)) if op == "==" else \
                (lambda env, a=first, b=right: a(env) != b(env))
        return left

    def parse_unary() -> Expr:
        if peek() == "!":
            take()
            inner = parse_unary()
            return lambda env: not inner(env)
        return parse_postfix()

    def parse_postfix() -> Expr:
        tok = take()
        expr: Expr
        if tok == "(":
            expr = parse_or()
            take(")")
        elif tok == "has":
            take("(")
            target = parse_postfix()
            take(")")
            has = getattr(target, "has", None)
            if has is None:
                raise ValueError(f"CEL rule {rule!r}: has() needs a field selection")
            expr = has
        elif tok == "size":
            take("(")
            inner = parse_or()
            take(")")
            expr = lambda env: len(inner(env))  # noqa: E731
        elif tok.isdigit():
            expr = lambda env, n=int(tok): n  # noqa: E731
        elif tok[:1] in ("'", '"'):
            expr = lambda env, t=tok[1:-1]: t  # noqa: E731
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", tok):
            expr = lambda env, name=tok: env[name]  # noqa: E731
        else:
            raise ValueError(f"CEL rule {rule!r}: unexpected {tok!r}")
        while peek() == ".":
            take()
            name = take()
            if name in ("all", "exists") and peek() == "(":
                take("(")
                var = take()
                take(",")
                body = parse_or()
                take(")")
                items, quantifier = expr, all if name == "all" else any
                expr = lambda env, it=items, v=var, b=body, q=quantifier: q(  # noqa: E731
                    bool(b({**env, v: x})) for x in it(env))
                continue
            base = expr

            def select(env: dict[str, Any], b: Expr = base, f: str = name) -> Any:
                obj = b(env)
                if not isinstance(obj, dict) or f not in obj:
                    raise ValueError(f"CEL rule {rule!r}: no such key: {f}")
                return obj[f]

            def has_field(env: dict[str, Any], b: Expr = base, f: str = name) -> bool:
                obj = b(env)
                return isinstance(obj, dict) and f in obj

            select.has = has_field  # type: ignore[attr-defined]
            expr = select
        return expr

    tree = parse_or()
    if at[0] != len(tokens):
        raise ValueError(f"CEL rule {rule!r}: unexpected {peek()!r}")
    return bool(tree({"self": self_value}))


# ---- built-in types: what the API server's validation refuses ----------------------------------

_QUANTITY = re.compile(r"^([+-]?[0-9.]+)([eE][+-]?[0-9]+|Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?$")
_SUFFIX = {"n": "1e-9", "u": "1e-6", "m": "1e-3", "": "1", "k": "1e3", "M": "1e6", "G": "1e9", "T": "1e12",
           "P": "1e15", "E": "1e18", "Ki": str(2**10), "Mi": str(2**20), "Gi": str(2**30), "Ti": str(2**40),
           "Pi": str(2**50), "Ei": str(2**60)}


def _quantity(text: Any) -> Any:
    """A resource quantity's value (decimal.Decimal), or None when it does not read as one."""
    from decimal import Decimal, InvalidOperation
    m = _QUANTITY.match(str(text))
    if m is None:
        return None
    try:
        number, suffix = Decimal(m[1]), m[2] or ""
    except InvalidOperation:
        return None
    if suffix[:1] in ("e", "E") and len(suffix) > 1:
        return number * Decimal(10) ** int(suffix[1:])
    return number * Decimal(_SUFFIX[suffix])


def _overcommit_forbidden(name: str) -> bool:
    """An extended resource (a domain-prefixed name outside kubernetes.io) or huge pages: its request must
    equal its limit (the API server's rule for resources that cannot be overcommitted)."""
    native = "/" not in name or "kubernetes.io/" in name
    return not native or name.startswith("hugepages-")


def _pod_causes(pod: dict[str, Any]) -> list[tuple[str, str, str]]:
    """What the API server refuses in a new Pod that the fake emulates: a container without ``image``; a
    request of a resource that cannot be overcommitted without a limit, or with a different one."""
    out: list[tuple[str, str, str]] = []
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return [("FieldValueRequired", "spec.containers", "Required value")]
    if not spec.get("containers"):
        out.append(("FieldValueRequired", "spec.containers", "Required value"))
    for field_name in ("initContainers", "containers"):
        for i, c in enumerate(spec.get(field_name) or []):
            where = f"spec.{field_name}[{i}]"
            if not isinstance(c, dict):
                continue
            if not c.get("image"):
                out.append(("FieldValueRequired", f"{where}.image", "Required value"))
            res = c.get("resources") or {}
            requests, limits = res.get("requests") or {}, res.get("limits") or {}
            for name, value in requests.items():
                if not _overcommit_forbidden(name):
                    continue
                if name not in limits:
                    out.append(("FieldValueRequired", f"{where}.resources.limits",
                                "Required value: Limit must be set for non overcommitable resources"))
                elif _quantity(value) != _quantity(limits[name]):
                    out.append(("FieldValueInvalid", f"{where}.resources.requests",
                                f'Invalid value: "{value}": must be equal to {name} limit of {limits[name]}'))
    return out


# ---- HTTP --------------------------------------------------------------------------------------

def _hung_up(sock: Any) -> bool:
    """Whether the client closed its end (readable with nothing to read); not told over TLS."""
    if isinstance(sock, ssl.SSLSocket):
        return False
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        return bool(readable) and sock.recv(1, socket.MSG_PEEK) == b""
    except (OSError, ValueError):
        return True


class _Server(ThreadingHTTPServer):
    block_on_close = False  # clients keep idle connections open: do not wait for their threads
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that timed out and closed its socket is expected here


def _handler(fake: FakeKube) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the client's connection pool expects
        disable_nagle_algorithm = True  # headers and body go out in two writes: no delayed-ACK stalls

        def _any(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            headers = {k.lower(): v for k, v in self.headers.items()}
            status, body, extra = fake.handle(self.command, self.path, headers, raw)
            if isinstance(body, _Stream):
                self._stream(body)
                return
            data = json.dumps(body).encode()
            how = fake.delivery(self.path)
            if how == _Delivery():
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in extra.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)
                return
            self.close_connection = True  # the client gives up mid-answer: no keep-alive
            head = [f"HTTP/1.1 {status} {self.responses.get(status, ('',))[0]}", "Content-Type: application/json",
                    *(f"{k}: {v}" for k, v in extra.items())]
            if how.endless:
                head.append("Transfer-Encoding: chunked")
            else:
                head.append(f"Content-Length: {len(data) + (how.padding or 0) + (100 if how.cut else 0)}")
            self._write("\r\n".join([*head, "", ""]).encode(), how.drip if how.drip_headers else None)
            if how.endless:
                chunk = b"%x\r\n%s\r\n" % (1 << 16, b" " * (1 << 16))
                while not fake._stopping.is_set():
                    self.wfile.write(chunk)  # until the client hangs up (BrokenPipeError)
                return
            left = how.padding or 0
            while left:
                n = min(left, 1 << 16)
                self._write(b" " * n, how.drip)
                left -= n
            self._write(data, how.drip)

        def _stream(self, stream: _Stream) -> None:
            self.close_connection = True  # and say so: a client must not put this connection back in its pool
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Connection", "close")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            try:
                for line in stream.lines:
                    if not line:
                        if _hung_up(self.connection):
                            return
                        continue
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except OSError:
                pass  # the client hung up
            finally:
                close = getattr(stream.lines, "close", None)
                if close is not None:
                    close()

        def _write(self, data: bytes, drip: float | None) -> None:
            if drip is None:
                self.wfile.write(data)
                return
            for i in range(len(data)):
                if fake._stopping.wait(drip if i else 0):
                    return
                self.wfile.write(data[i:i + 1])

        do_GET = do_PATCH = do_PUT = do_POST = do_DELETE = _any

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

    return Handler


def write_kubeconfig(path: Path, servers: dict[str, str], current: str | None = None,
                     token: str = "fake-token", ca: Path | None = None) -> Path:
    """A kubeconfig with one context (and cluster) per entry of ``servers``; the first is current.
    ``ca``: the certificate authority every cluster trusts."""
    trust = {"certificate-authority-data": base64.b64encode(ca.read_bytes()).decode()} if ca else {}
    config = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": n, "cluster": {"server": url, **trust}} for n, url in servers.items()],
        "users": [{"name": "tester", "user": {"token": token}}],
        "contexts": [{"name": n, "context": {"cluster": n, "user": "tester"}} for n in servers],
        "current-context": current or next(iter(servers)),
    }
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def self_signed(directory: Path) -> tuple[Path, Path] | None:
    """A certificate for 127.0.0.1 and its key, made by the openssl command; None without it."""
    cert, key = directory / "server.crt", directory / "server.key"
    openssl = shutil.which("openssl")
    if openssl is None:
        return None
    done = subprocess.run([openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                           "-nodes", "-days", "1", "-subj", "/CN=fakekube", "-addext", "subjectAltName=IP:127.0.0.1",
                           "-keyout", str(key), "-out", str(cert)], capture_output=True, check=False, timeout=30)
    return (cert, key) if done.returncode == 0 else None
