"""The plan server's requests, one at a time on a connection (``Handler``): the request line and headers read
by ``--idle-timeout``, framing and limits checked before the work they protect (414, 431, 411, 413, 415, the
body budget and the solver slots with their 503s, 408 for a body too slow), the JSON body decoded (400 for
one nested deeper than ``MAX_DEPTH``, a number out of range, an integer of more than 40 digits), the
``Route`` called, and every answer sent with a status line, errors as JSON ``{"error", "field", "object"}``.
The connections themselves (their cap, the held ones, shutdown) are ``http``'s; this module knows no
endpoint (endpoints.py makes the routes).
"""

from __future__ import annotations

import http.client
import io
import json
import logging
import math
import re
import socket
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from typing import Any, Protocol, cast
from urllib.parse import urlsplit

from prometheus_client import Gauge

from optplan import __version__
from optplan.errors import InputError, OptplanError
from optplan.serve.config import MAX_DEPTH, MAX_HEADER_BYTES, MIN_BODY_RATE, SOCKET_TIMEOUT, ServeConfig
from optplan.serve.metrics import Metrics

log = logging.getLogger("optplan.serve")

JSON = "application/json"
ANY_REQUEST_ERRORS = (400, 405, 414, 431, 503)
"""What any request may be answered besides 200: malformed (400, 414, 431), every connection taken (503)."""
PLANNER_ERRORS = (408, 411, 413, 415, 500)
"""What a request with a body may be answered besides those."""
DRAIN_BYTES = 1024 * 1024
DRAIN_SECONDS = 1.0
"""After refusing a request whose body was not read, up to this much of it is read and thrown away
before the connection closes, so that the client reads the answer instead of a connection reset."""



def dumps(body: Any) -> bytes:
    """The JSON of an answer: sorted keys, no spaces (deterministic bytes)."""
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


@dataclass(frozen=True)
class Reply:
    code: int
    body: bytes
    content_type: str = JSON
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Route:
    """One path: its method and what answers it."""

    method: str
    answer: Callable[[dict[str, Any] | None], Reply]
    """GET: called with None; POST: with the body's JSON object, once a solver slot is held. An
    ``InputError`` it raises is answered 400 naming its field and object; any other exception 500."""
    probe: bool = False
    """A health probe: answered even when every connection slot is taken."""


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


_JSON_TYPES = {list: "array", str: "string", bool: "boolean", type(None): "null"}
"""The JSON type of a body that is not an object (any other is a number)."""
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


class _HeadReader:
    """The request's input while the base class reads the request line and the header lines: all of them
    by ``deadline`` (``time.monotonic``), the header lines at most ``header_bytes`` together once
    ``count_headers`` is called."""

    def __init__(self, stream: io.BufferedReader, sock: socket.socket, deadline: float) -> None:
        self._stream = stream
        self._sock = sock
        self._deadline = deadline
        self._left: int | None = None

    def count_headers(self, limit: int) -> None:
        self._left = limit

    def readline(self, size: int = -1) -> bytes:
        limit = size if size >= 0 else 1 << 30
        if self._left is not None:
            limit = min(limit, self._left + 1)
        line = bytearray()
        while len(line) < limit:
            left = self._deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the request line and headers did not arrive in time (--idle-timeout)")
            self._sock.settimeout(left)
            chunk = self._stream.peek(1)[:limit - len(line)]  # at most one read of the socket
            if not chunk:
                break
            end = chunk.find(b"\n")
            line += self._stream.read(end + 1 if end >= 0 else len(chunk))
            if end >= 0:
                break
        if self._left is not None:
            self._left -= len(line)
            if self._left < 0:
                raise http.client.LineTooLong(f"header section of more than {MAX_HEADER_BYTES} bytes")
        return bytes(line)


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



class Host(Protocol):
    """What a request's handling needs of its server (``http.OptplanServer``): the configuration, the metrics,
    the routes, the solver slots, the body budget, and the count of requests being answered."""

    config: ServeConfig
    metrics: Metrics
    routes: dict[str, Route]
    slots: threading.BoundedSemaphore
    budget: ByteBudget

    def enter(self) -> None: ...

    def leave(self) -> None: ...


class Handler(BaseHTTPRequestHandler):
    """One connection's requests, answered in turn through the server's routes (``Host``)."""

    protocol_version = "HTTP/1.1"
    server_version = f"optplan/{__version__}"
    timeout = SOCKET_TIMEOUT
    """While a body arrives or an answer is written; waiting for a request head, --idle-timeout."""
    _input: io.BufferedReader
    """The connection's input (``rfile`` is a ``_HeadReader`` over it while the request head is read)."""
    _head: _HeadReader
    disable_nagle_algorithm = True  # headers and body go out in two writes: no delayed-ACK stall between
    _body_read = False
    """Whether this request's body has been read (a connection serves several requests)."""
    _expect_continue = False
    """Whether this request asked for ``100 Continue``; it is sent once the body has room in the budget."""

    def version_string(self) -> str:
        return self.server_version

    @property
    def srv(self) -> Host:
        return cast(Host, self.server)

    def setup(self) -> None:
        super().setup()
        self._input = cast(io.BufferedReader, self.rfile)  # StreamRequestHandler's default: buffered reads

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
        deadline = time.monotonic() + self.srv.config.idle_timeout
        try:
            self.connection.settimeout(self.srv.config.idle_timeout)
            head = self._input.peek(2)
            if head.startswith((b"\r\n", b"\n")):  # one empty line may precede a request (RFC 9112, 2.2)
                self._input.read(2 if head.startswith(b"\r") else 1)
                self.connection.settimeout(max(deadline - time.monotonic(), 0.001))
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
        self._head = _HeadReader(self._input, self.connection, deadline)
        self.rfile = cast(io.BufferedIOBase, self._head)
        try:
            super().handle_one_request()
        finally:
            self.rfile = self._input

    def parse_request(self) -> bool:
        self._head.count_headers(MAX_HEADER_BYTES)
        try:
            if not super().parse_request():
                return False
        finally:
            self.rfile = self._input
            self.connection.settimeout(self.timeout)
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
        self._send(code, dumps({"error": text, "field": None, "object": None}), JSON, {})
        self.srv.metrics.requests.labels("other", str(code)).inc()
        log.info('%s "%s" %d', self.client_address[0], _printable(getattr(self, "requestline", "")), code)
        self._discard(DRAIN_BYTES)  # the rest of the request: closing with it unread could reset the answer

    # -- the work ------------------------------------------------------------------------------------
    def _route(self) -> tuple[str, Route | None]:
        path = urlsplit(self.path).path
        return path, self.srv.routes.get(path)

    def _handle(self) -> None:
        start = time.perf_counter()
        path, ep = self._route()
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
            reply = Reply(500, dumps({"error": "internal error; see the server log", "field": None,
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

    def _answer(self, path: str, ep: Route | None) -> Reply:
        try:
            self._check_framing()
            if ep is None:
                raise _Refusal(404, f"no endpoint {_printable(path)}; see /openapi.json")
            if self.command != ep.method:
                raise _Refusal(405, f"{path} accepts {ep.method} only", headers={"Allow": ep.method})
            if ep.method != "POST":
                if self._has_unread_body():
                    self.close_connection = True  # a body no one reads must not be taken for the next request
                return ep.answer(None)
            return self._post(path, ep)
        except _Refusal as r:
            if self._has_unread_body():
                self.close_connection = True
            return Reply(r.code, dumps(r.body), headers=r.headers)

    def _busy(self, what: str) -> _Refusal:
        return _Refusal(503, f"busy: {what}; retry later", headers={"Retry-After": str(self.srv.config.retry_after)})

    def _post(self, path: str, ep: Route) -> Reply:
        srv, config = self.srv, self.srv.config
        length = self._check_headers()
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
                return self._call(path, ep, req)
            finally:
                srv.slots.release()
        finally:
            srv.budget.release(held)

    def _call(self, path: str, ep: Route, req: dict[str, Any]) -> Reply:
        try:
            return ep.answer(req)
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

    def _check_headers(self) -> int:
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
            raise _Refusal(400, f"the body must be a JSON object, got {_JSON_TYPES.get(type(req), 'number')}")
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
