"""A fake Kubernetes API server on 127.0.0.1 speaking the real HTTP API, for tests of the live adapter.

It serves list (cluster-wide and per namespace) with ``limit``/``continue`` paging and ``fieldSelector``
(``path=value``, ``path==value``, ``path!=value`` terms, on any dotted field), get, and merge-patch of
the status subresource with a ``metadata.resourceVersion`` precondition (409 when it differs). Every
write bumps one server-wide resourceVersion, like etcd. Unknown resources (a CRD not installed) and
objects answer a 404 ``Status``. Faults: a path answering a given status the next N times (or always),
optionally only when a continue token is sent (410 Expired), with a Retry-After header; a path stalling
before it answers; answers dripping out one byte at a time (the body, or headers and body); bodies
padded to any size, announced with a Content-Length or streamed chunked without end; answers cut short.

Not emulated: watch, discovery, create/update/delete over HTTP, label selectors, consistent snapshots
across pages (a page reads the current state), authentication (the bearer token is recorded, not checked).
"""

from __future__ import annotations

import base64
import copy
import json
import shutil
import ssl
import subprocess
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import yaml


@dataclass(frozen=True)
class ResourceType:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def name(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural


BUILTIN = (
    ResourceType("", "v1", "nodes", "Node", False),
    ResourceType("", "v1", "pods", "Pod", True),
    ResourceType("", "v1", "secrets", "Secret", True),
    ResourceType("", "v1", "configmaps", "ConfigMap", True),
    ResourceType("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True),
    ResourceType("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False),
)
VOLCANO = (
    ResourceType("scheduling.volcano.sh", "v1beta1", "podgroups", "PodGroup", True),
    ResourceType("scheduling.volcano.sh", "v1beta1", "queues", "Queue", False),
    ResourceType("topology.volcano.sh", "v1alpha1", "hypernodes", "HyperNode", False),
    ResourceType("batch.volcano.sh", "v1alpha1", "jobs", "Job", True),
    ResourceType("workload.serving.volcano.sh", "v1alpha1", "modelservings", "ModelServing", True),
    ResourceType("repack.volcano.sh", "v1alpha1", "repackruns", "RepackRun", False),
)

_REASONS = {400: "BadRequest", 403: "Forbidden", 404: "NotFound", 405: "MethodNotAllowed", 409: "Conflict",
            410: "Expired", 415: "UnsupportedMediaType", 429: "TooManyRequests", 500: "InternalError",
            503: "ServiceUnavailable"}
_EXPIRED = ("The provided continue parameter is too old to display a consistent list result. You can start a new "
            "list without the continue parameter.")


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]  # lower-case names
    body: Any


@dataclass
class _Fault:
    status: int
    times: int | None  # None: always
    on_continue: bool
    retry_after: str | None
    message: str | None


@dataclass(frozen=True)
class _Delivery:
    drip: float | None = None  # seconds between bytes
    drip_headers: bool = False  # the status line and headers drip too
    padding: int | None = None  # bytes of JSON whitespace before the object
    endless: bool = False  # chunked whitespace, never ending
    cut: bool = False  # Content-Length promises more than is sent, then the connection closes


class _HttpError(Exception):
    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


class FakeKube:
    """In-memory objects per resource type, served over HTTP on 127.0.0.1 (port chosen by the OS)."""

    def __init__(self, *, crds: bool = True, tls: tuple[Path, Path] | None = None) -> None:
        """``tls``: serve HTTPS with this (certificate, key) pair (``self_signed``)."""
        self._lock = threading.Lock()
        self._types: dict[tuple[str, str, str], ResourceType] = {}
        self._objects: dict[ResourceType, dict[tuple[str, str], dict[str, Any]]] = {}
        self._rv = 1000
        self._faults: dict[str, list[_Fault]] = {}
        self._stalls: dict[str, float] = {}
        self._deliveries: dict[str, _Delivery] = {}
        self._stopping = threading.Event()
        self.requests: list[Request] = []
        for rt in BUILTIN + (VOLCANO if crds else ()):
            self.install(rt)
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
        self._server.shutdown()
        self._server.server_close()

    def write_kubeconfig(self, path: Path, context: str = "fake", *, trust: bool = True) -> Path:
        """A kubeconfig for this server; over TLS it trusts the server's certificate unless ``trust`` is off."""
        return write_kubeconfig(path, {context: self.url}, ca=self.tls[0] if self.tls and trust else None)

    # ---- state --------------------------------------------------------------------------------

    def install(self, rt: ResourceType) -> None:
        with self._lock:
            self._types[(rt.group, rt.version, rt.plural)] = rt
            self._objects.setdefault(rt, {})

    def uninstall(self, group: str, plural: str) -> None:
        """Remove a resource type and its objects, as when a CRD is not installed."""
        with self._lock:
            for key in [k for k in self._types if k[0] == group and k[2] == plural]:
                self._objects.pop(self._types.pop(key), None)

    def add(self, *objects: dict[str, Any]) -> None:
        """Store objects (created or replaced, by apiVersion, kind, namespace and name); each write bumps
        its resourceVersion, as another writer would."""
        with self._lock:
            for obj in objects:
                rt = self._type_of(obj)
                stored = copy.deepcopy(obj)
                meta = stored.setdefault("metadata", {})
                if rt.namespaced:
                    meta.setdefault("namespace", "default")
                self._rv += 1
                meta["resourceVersion"] = str(self._rv)
                self._objects[rt][(meta.get("namespace", ""), meta["name"])] = stored

    def get(self, api_version: str, kind: str, name: str, namespace: str = "") -> dict[str, Any]:
        with self._lock:
            rt = self._type_of({"apiVersion": api_version, "kind": kind})
            return copy.deepcopy(self._objects[rt][(namespace, name)])

    def _type_of(self, obj: dict[str, Any]) -> ResourceType:
        for rt in self._types.values():
            if rt.api_version == obj.get("apiVersion") and rt.kind == obj.get("kind"):
                return rt
        raise KeyError(f"no resource type serves {obj.get('apiVersion')} {obj.get('kind')}")

    # ---- faults and records -------------------------------------------------------------------

    def fail(self, path: str, status: int, *, times: int | None = 1, on_continue: bool = False,
             retry_after: str | None = None, message: str | None = None) -> None:
        """The next ``times`` requests to ``path`` (None: all of them; ``on_continue``: only those with
        a continue token) answer ``status`` with a Status body."""
        with self._lock:
            self._faults.setdefault(path, []).append(_Fault(status, times, on_continue, retry_after, message))

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

    def handle(self, method: str, target: str, headers: dict[str, str], raw: bytes) -> tuple[int, dict[str, Any],
                                                                                            dict[str, str]]:
        parts = urlsplit(target)
        path = unquote(parts.path)
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        with self._lock:
            self.requests.append(Request(method, path, query, headers, body))
            stall = self._stalls.get(path, 0.0)
        if stall:
            self._stopping.wait(stall)
        with self._lock:
            try:
                self._inject(method, path, query)
                return 200, self._serve(method, path, query, headers, body), {}
            except _HttpError as e:
                return e.status, _status(e.status, e.message), e.headers

    def _inject(self, method: str, path: str, query: dict[str, str]) -> None:
        for fault in self._faults.get(path, []):
            if fault.times == 0 or (fault.on_continue and not query.get("continue")):
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
            rt, namespace, name, _ = self._route(path)
        except _HttpError:
            return f'forbidden: User "system:serviceaccount:optplan:planner" cannot {method.lower()} path "{path}"'
        verb = "list" if name is None else {"GET": "get", "PATCH": "patch"}.get(method, method.lower())
        scope = "at the cluster scope" if namespace is None else f'in the namespace "{namespace}"'
        target = rt.name if name is None else f'{rt.name} "{name}"'
        return (f'{target} is forbidden: User "system:serviceaccount:optplan:planner" cannot {verb} resource '
                f'"{rt.plural}" in API group "{rt.group}" {scope}')

    def _serve(self, method: str, path: str, query: dict[str, str], headers: dict[str, str],
               body: Any) -> dict[str, Any]:
        rt, namespace, name, sub = self._route(path)
        if name is None:
            if method != "GET":
                raise _HttpError(405, f"method {method} not allowed on a collection")
            return self._list(rt, namespace, query)
        obj = self._objects[rt].get((namespace or "", name))
        if obj is None:
            raise _HttpError(404, f'{rt.name} "{name}" not found')
        if method == "GET" and sub is None:
            return _full(rt, obj)
        if method == "PATCH" and sub == "status":
            return self._patch_status(rt, obj, headers, body)
        raise _HttpError(405, f"method {method} not allowed here")

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

    def _list(self, rt: ResourceType, namespace: str | None, query: dict[str, str]) -> dict[str, Any]:
        terms = [_term(t) for t in query.get("fieldSelector", "").split(",") if t]
        keys = sorted(k for k, o in self._objects[rt].items()
                      if (namespace is None or k[0] == namespace) and all(_matches(o, t) for t in terms))
        if query.get("continue"):
            try:
                start = tuple(json.loads(base64.urlsafe_b64decode(query["continue"]))["after"])
            except (ValueError, KeyError, TypeError):
                raise _HttpError(400, "continue key is not valid") from None
            keys = [k for k in keys if k > start]
        limit = int(query.get("limit") or 0)
        page = keys[:limit] if limit > 0 else keys
        meta: dict[str, Any] = {"resourceVersion": str(self._rv)}
        if len(page) < len(keys):
            meta["continue"] = base64.urlsafe_b64encode(json.dumps({"after": list(page[-1])}).encode()).decode()
            meta["remainingItemCount"] = len(keys) - len(page)
        items = [copy.deepcopy(self._objects[rt][k]) for k in page]  # list items carry no apiVersion/kind
        for item in items:
            item.pop("apiVersion", None)
            item.pop("kind", None)
        return {"apiVersion": rt.api_version, "kind": f"{rt.kind}List", "metadata": meta, "items": items}

    def _patch_status(self, rt: ResourceType, obj: dict[str, Any], headers: dict[str, str],
                      body: Any) -> dict[str, Any]:
        if headers.get("content-type", "").split(";")[0].strip() != "application/merge-patch+json":
            raise _HttpError(415, f"the body of the request was in an unknown format: {headers.get('content-type')}")
        if not isinstance(body, dict):
            raise _HttpError(400, "the patch is not a JSON object")
        meta = obj["metadata"]
        wanted = (body.get("metadata") or {}).get("resourceVersion")
        if wanted is not None and wanted != meta["resourceVersion"]:
            raise _HttpError(409, f'Operation cannot be fulfilled on {rt.name} "{meta["name"]}": the object has '
                                  "been modified; please apply your changes to the latest version and try again")
        merged = _merge_patch(obj, body)
        if merged.get("status") == obj.get("status"):
            return _full(rt, obj)  # a no-op write keeps its resourceVersion
        if "status" in merged:
            obj["status"] = merged["status"]
        else:
            obj.pop("status", None)
        self._rv += 1
        meta["resourceVersion"] = str(self._rv)
        return _full(rt, obj)


def _full(rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": rt.api_version, "kind": rt.kind, **copy.deepcopy(obj)}


def _status(code: int, message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": _REASONS.get(code, "Unknown"), "code": code}


def _term(term: str) -> tuple[str, bool, str]:
    """``path!=value`` → (path, False, value); ``path=value`` and ``path==value`` → (path, True, value)."""
    for op, equal in (("!=", False), ("==", True), ("=", True)):
        if op in term:
            field, value = term.split(op, 1)
            return field.strip(), equal, value.strip()
    raise _HttpError(400, f"invalid field selector term {term!r}")


def _matches(obj: dict[str, Any], term: tuple[str, bool, str]) -> bool:
    field, equal, value = term
    cur: Any = obj
    for part in field.split("."):
        cur = cur.get(part) if isinstance(cur, dict) else None
    return ("" if cur is None else str(cur)) == value if equal else ("" if cur is None else str(cur)) != value


def _merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = _merge_patch(out.get(k), v)
    return out


class _Server(ThreadingHTTPServer):
    block_on_close = False  # clients keep idle connections open: do not wait for their threads

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
