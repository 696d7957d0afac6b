"""The plan server's HTTP/1.1: a thread per connection (``OptplanServer``: connections, their cap, the held
and refused ones, shutdown), each connection's requests answered by ``handler.Handler``, the limits checked
before the work they protect, and an Error answer with a status line for anything else. It serves ``Route``s
and knows nothing of what they answer (endpoints.py makes them).

- ``--max-connections`` connections are served at once (a thread each). One more is held, unread, for
  ``PARK_SECONDS`` at most, without a thread: a health probe on it (``GET /healthz``) is answered 200; any
  other request, or none, is answered 503 with ``Retry-After`` and closed. Held connections are at most
  ``--max-connections`` too, the oldest answered first.
- ``--idle-timeout`` seconds from connecting, or from the previous answer, for a request line and headers
  to arrive whole; the connection is closed otherwise (an idle keep-alive one included), so that a
  connection slot is held by work, not by a socket.
- a request line of at most 64 KiB (414) and header lines of ``MAX_HEADER_BYTES`` together (431).
- ``--max-body-bytes`` per body: 413 before any of the body is read when Content-Length says more. A body
  needs exactly one Content-Length (411 without, 400 for two, or with Transfer-Encoding too).
- ``--max-buffered-bytes`` of bodies held at once (default twice the body limit): a request reserves its
  Content-Length before reading the body (and before answering ``Expect: 100-continue``), waits up to
  ``--queue-timeout`` seconds for room, then gets 503 with ``Retry-After``. A body must arrive within
  ``SOCKET_TIMEOUT`` seconds plus one second per ``MIN_BODY_RATE`` bytes (408 otherwise).
- ``--max-concurrent`` requests parse and solve at once (solves are CPU-bound); the others wait up to
  ``--queue-timeout`` seconds (shared with the wait for body room), then get 503 with ``Retry-After``.
- a body nested deeper than ``MAX_DEPTH``, a number out of range or an integer of more than 40 digits is 400.

Every answer has an HTTP/1.1 status line, a request line that is not HTTP/1.x included (a TLS handshake,
binary bytes, ``GET`` alone, HTTP/0.9 or 2.0). Errors are JSON ``{"error", "field", "object"}``: 400 bad
input or framing, 404, 405 (with ``Allow``), 408, 411, 413, 414, 415, 431, 500 (a bug; the traceback goes to
the server log only), 503, 505. Any method on a known path but its own is 405 with ``Allow``.
"""

from __future__ import annotations

import logging
import socket
import socketserver
import threading
import time
import traceback
from collections.abc import Mapping
from http import HTTPStatus
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from optplan import __version__
from optplan.errors import InputError
from optplan.serve.config import ServeConfig
from optplan.serve.handler import JSON, ByteBudget, Handler, Route, dumps
from optplan.serve.metrics import Metrics

log = logging.getLogger("optplan.serve")

LINGER_SECONDS = 2.0
"""How long a refused connection is kept half-open, its input thrown away, so that its client reads the
503 rather than a reset."""
PARK_SECONDS = 1.0
"""How long a connection beyond ``--max-connections`` waits, without a thread, for its request line: a
health probe is answered, anything else 503."""
PROBE_LINE_BYTES = 8192
"""The longest request line of a health probe answered beyond the cap."""


class OptplanServer(ThreadingHTTPServer):
    """A threading HTTP server holding the configuration, the metrics, the solver slots, the body budget and
    the connection slots."""

    daemon_threads = True
    request_queue_size = 64

    def __init__(self, config: ServeConfig, metrics: Metrics, routes: Mapping[str, Route]) -> None:
        if config.body_budget < config.max_body_bytes:
            raise InputError(f"{config.body_budget} is below --max-body-bytes {config.max_body_bytes}: no body "
                             "of the largest size could be read",
                             field="--max-buffered-bytes")
        self.config = config
        self.metrics = metrics
        self.routes = dict(routes)
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
        self._parked: list[tuple[socket.socket, Any, float]] = []
        """Connections beyond the cap, unread, without a thread, until their request line says whether
        they are a health probe (or PARK_SECONDS pass). Only the accepting thread touches this list."""
        self.stopping = threading.Event()
        """Set (by a signal or by the caller) to make ``run`` shut the server down."""
        self._active = 0
        self._idle = threading.Condition()
        if ":" in config.host:
            self.address_family = socket.AF_INET6
        super().__init__((config.host, config.port), Handler)

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
        """In the accepting thread: a thread for the connection, or, when all slots are taken, a wait for
        its request line (a health probe is answered, anything else 503)."""
        if not self.connections.acquire(blocking=False):
            self._park(request, client_address)
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

    def _park(self, request: socket.socket, client_address: Any) -> None:
        try:
            request.setblocking(False)
        except OSError:
            request.close()
            return
        if len(self._parked) >= self.config.max_connections:  # bounded: the oldest is answered first
            self._refuse(*self._parked.pop(0)[:2])
        self._parked.append((request, client_address, time.monotonic() + PARK_SECONDS))
        self._serve_parked()

    def _serve_parked(self) -> None:
        """Answer the held connections whose request line has arrived (or whose wait is over)."""
        now = time.monotonic()
        keep = []
        for sock, address, deadline in self._parked:
            try:
                head = sock.recv(PROBE_LINE_BYTES, socket.MSG_PEEK)
            except BlockingIOError:
                head = None
            except OSError:
                head = b""
            if head == b"":  # the client went away
                sock.close()
            elif head is not None and b"\n" in head:
                route = self._probe(head.split(b"\n", 1)[0])
                if route is not None:
                    self._answer_probe(sock, address, route)
                else:
                    self._refuse(sock, address)
            elif now >= deadline or (head is not None and len(head) >= PROBE_LINE_BYTES):
                self._refuse(sock, address)
            else:
                keep.append((sock, address, deadline))
        self._parked = keep

    def _probe(self, line: bytes) -> str | None:
        """The health probe a request line asks for (``GET /healthz HTTP/1.1``), or None."""
        parts = line.rstrip(b"\r").split(b" ")
        if len(parts) != 3 or parts[0] != b"GET" or not parts[2].startswith(b"HTTP/1."):
            return None
        path = urlsplit(parts[1].decode("latin-1")).path
        route = self.routes.get(path)
        return path if route is not None and route.probe and route.method == "GET" else None

    def _answer_probe(self, sock: socket.socket, client_address: Any, path: str) -> None:
        """Answer a health probe beyond the cap from the accepting thread, and close."""
        start = time.perf_counter()
        reply = self.routes[path].answer(None)
        self.metrics.requests.labels(path, str(reply.code)).inc()
        self.metrics.request_seconds.labels(path).observe(time.perf_counter() - start)
        log.info('%s "GET %s" %d beyond --max-connections', client_address[0], path, reply.code)
        self._send_and_close(sock, reply.code, reply.body, {"Content-Type": reply.content_type})

    def _refuse(self, request: socket.socket, client_address: Any) -> None:
        """Answer 503 without reading the request, from the accepting thread (so without blocking)."""
        n = self.config.max_connections
        self.metrics.refused_connections.inc()
        log.info("%s: refused: %d connection(s) open (--max-connections)", client_address[0], n)
        body = dumps({"error": f"busy: {n} connection(s) open (--max-connections); retry later",
                      "field": None, "object": None})
        self._send_and_close(request, 503, body, {"Content-Type": JSON, "Retry-After": str(self.config.retry_after)})

    def _send_and_close(self, request: socket.socket, code: int, body: bytes, headers: Mapping[str, str]) -> None:
        """Send a small answer on a non-blocking socket, then keep it half-closed while the client reads."""
        lines = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        head = (f"HTTP/1.1 {code} {HTTPStatus(code).phrase}\r\nServer: optplan/{__version__}\r\n{lines}"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n")
        try:
            request.setblocking(False)
            request.send(head.encode() + body)  # a fresh socket's send buffer holds it whole
            request.shutdown(socket.SHUT_WR)
        except OSError:
            request.close()
            return
        if len(self._lingering) >= self.config.max_connections:  # bounded: the oldest goes first
            self._lingering.pop(0)[0].close()
        self._lingering.append((request, time.monotonic() + LINGER_SECONDS))

    def service_actions(self) -> None:
        """Called by serve_forever between accepts: answer the connections held beyond the cap, close
        refused connections whose client is done."""
        super().service_actions()
        if self._parked:
            self._serve_parked()
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
        for sock, _, _ in self._parked:
            sock.close()
        self._parked = []


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
