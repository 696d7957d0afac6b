"""``optplan serve`` against hostile or broken clients, as a client sees it on the socket: garbage and
ambiguous framing get a proper HTTP status line, the connection and body-byte limits refuse with 503
instead of growing, a slow upload holds neither a solver nor anyone else, and extreme request values are
400, never 500.

Nothing here sleeps or measures time: a test waits for the server's own signal (a ``100 Continue``, a
response, a metric) with a generous timeout."""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from optplan.serve import OptplanServer, ServeConfig, make_server
from tests.builders import node

WAIT = 30.0
"""Seconds a socket waits for the server before a test fails (generous: the machine may be loaded)."""
SEED = [d for d in yaml.safe_load_all((Path(__file__).resolve().parents[2] / "instances" / "seed-dryrun.yaml")
                                      .read_text()) if d]
"""The seed snapshot (a RepackRun that frees one node), as request objects."""


def _seed_plan(**fields: Any) -> bytes:
    return json.dumps({"objects": SEED, "solver": "greedy", **fields}).encode()


@pytest.fixture
def serve() -> Iterator[Callable[..., OptplanServer]]:
    """Start servers on a free port of 127.0.0.1 (options as ServeConfig fields); all stop at the end."""
    running: list[tuple[OptplanServer, threading.Thread]] = []

    def start(**options: Any) -> OptplanServer:
        server = make_server(ServeConfig(port=0, **options))
        t = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        t.start()
        running.append((server, t))
        return server

    yield start
    for server, t in running:
        server.shutdown()
        server.server_close()
        t.join()


# ---- a raw HTTP/1.1 client -----------------------------------------------------------------------------

@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)


class Conn:
    """One TCP connection, written byte by byte as a test says, read one answer at a time."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
        self.buf = b""

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _fill(self) -> bool:
        chunk = self.sock.recv(65536)
        self.buf += chunk
        return bool(chunk)

    def read(self) -> Answer:
        """The next answer: a status line, headers and a Content-Length body."""
        while b"\r\n\r\n" not in self.buf:
            assert self._fill(), f"connection closed before an answer; got {self.buf!r}"
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        version, code, _ = (lines[0] + " ").split(" ", 2)
        assert version == "HTTP/1.1", lines[0]
        headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
        length = int(headers.get("content-length", "0"))
        while len(self.buf) < length:
            assert self._fill(), "connection closed in the body"
        body, self.buf = self.buf[:length], self.buf[length:]
        return Answer(int(code), headers, body)

    def closed(self) -> bool:
        """Whether the server closes the connection without sending anything more."""
        while not self.buf:
            try:
                if not self._fill():
                    return True
            except ConnectionResetError:
                return True
        return False

    def close(self) -> None:
        self.sock.close()


def _exchange(port: int, data: bytes) -> tuple[Answer, bool]:
    """Send ``data``, half-close, read one answer; and whether the server then closed the connection."""
    c = Conn(port)
    try:
        c.send(data)
        c.sock.shutdown(socket.SHUT_WR)
        answer = c.read()
        return answer, c.closed()
    finally:
        c.close()


def _post_head(length: int, *, path: str = "/v1/repack/plan", extra: str = "") -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n"
            f"{extra}\r\n").encode()


def _metric(server: OptplanServer, name: str) -> float:
    c = Conn(server.server_port)
    try:
        c.send(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        text = c.read().body.decode()
    finally:
        c.close()
    values = [float(line.split()[-1]) for line in text.splitlines() if line.startswith(name + " ")]
    assert len(values) == 1, (name, values)
    return values[0]


# ---- the request line and the framing --------------------------------------------------------------------

TLS_HELLO = bytes.fromhex("16030100c8010000c403035f1b") + bytes(range(64))


@pytest.mark.parametrize(("raw", "code", "says"), [
    (TLS_HELLO, 400, "TLS"),  # https:// to a plain HTTP port
    (b"\x00\x01\x02\x03garbage\r\n\r\n", 400, "not an HTTP/1.1 request line"),
    (b"GET\r\n\r\n", 400, "Bad request syntax"),  # a method alone
    (b"GET /healthz\r\n\r\n", 400, "HTTP/0.9"),  # the base class answered HTTP/0.9 without a status line
    (b"POST /healthz\r\n\r\n", 400, "HTTP/0.9"),
    (b"GET /healthz HTTP/2.0\r\n\r\n", 505, "2.0"),
    (b"GET /healthz FTP/1.1\r\n\r\n", 400, "version"),
])
def test_a_garbage_request_line_gets_a_status_line(serve: Callable[..., OptplanServer], raw: bytes, code: int,
                                                    says: str) -> None:
    server = serve()
    answer, closed = _exchange(server.server_port, raw)
    assert answer.status == code and says in answer.json["error"], answer
    assert answer.headers["content-type"] == "application/json" and answer.headers["connection"] == "close"
    assert closed
    assert _exchange(server.server_port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")[0].status == 200


def test_one_empty_line_before_a_request_is_ignored(serve: Callable[..., OptplanServer]) -> None:
    answer, _ = _exchange(serve().server_port, b"\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    assert (answer.status, answer.body) == (200, b'{"status":"ok"}')


@pytest.mark.parametrize(("headers", "says"), [
    ("Content-Length: 2\r\nContent-Length: 5\r\n", "2 Content-Length headers"),
    ("Content-Length: 2\r\nContent-Length: 2\r\n", "2 Content-Length headers"),  # equal values too: one only
    ("Content-Length: 2, 2\r\n", "bad Content-Length"),
    ("Content-Length: +2\r\n", "bad Content-Length"),
    ("Content-Length: -1\r\n", "bad Content-Length"),
    ("Content-Length: 0x2\r\n", "bad Content-Length"),
    ("Content-Length: \xb2\r\n", "bad Content-Length"),  # a Latin-1 superscript two: str.isdigit() says yes
    ("Transfer-Encoding: chunked\r\nContent-Length: 2\r\n", "both Transfer-Encoding and Content-Length"),
])
@pytest.mark.parametrize("request_line", ["POST /v1/place HTTP/1.1", "GET /healthz HTTP/1.1"])
def test_ambiguous_framing_is_400_and_closes(serve: Callable[..., OptplanServer], headers: str, says: str,
                                            request_line: str) -> None:
    """Where the body ends must be unambiguous on every request, or a proxy and this server could split
    the stream differently (request smuggling)."""
    raw = f"{request_line}\r\nHost: x\r\nContent-Type: application/json\r\n{headers}\r\n{{}}".encode("latin-1")
    answer, closed = _exchange(serve().server_port, raw)
    assert answer.status == 400 and says in answer.json["error"], answer
    assert closed


def test_a_body_no_one_reads_is_not_taken_for_the_next_request(serve: Callable[..., OptplanServer]) -> None:
    hidden = b"GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n"
    raw = b"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(hidden), hidden)
    answer, closed = _exchange(serve().server_port, raw)
    assert (answer.status, answer.headers["connection"]) == (200, "close")
    assert closed  # and no 404 for the request hidden in the body


@pytest.mark.parametrize(("method", "path", "code"), [
    ("QUERY", "/v1/place", 405), ("TRACE", "/healthz", 405), ("FROB", "/v1/repack/plan", 405),
    ("FROB", "/nowhere", 404),
])
def test_any_method_is_405_or_404_never_501(serve: Callable[..., OptplanServer], method: str, path: str,
                                           code: int) -> None:
    answer, _ = _exchange(serve().server_port, f"{method} {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    assert answer.status == code
    if code == 405:
        assert answer.headers["allow"] in ("GET", "POST")


# ---- the connection cap ---------------------------------------------------------------------------------

def test_connections_beyond_the_cap_get_503_and_are_closed(serve: Callable[..., OptplanServer]) -> None:
    server = serve(max_connections=2)
    held = [Conn(server.server_port) for _ in range(2)]
    try:
        for c in held:  # an answer on each proves that each holds a connection slot (kept alive)
            c.send(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            assert c.read().status == 200
        extra = Conn(server.server_port)
        extra.send(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = extra.read()
        assert answer.status == 503 and "--max-connections" in answer.json["error"]
        assert int(answer.headers["retry-after"]) >= 1 and answer.headers["connection"] == "close"
        assert extra.closed()
        extra.close()
        held[0].send(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        text = held[0].read().body.decode()
        assert "optplan_refused_connections_total 1.0" in text and "optplan_open_connections 2.0" in text
    finally:
        for c in held:
            c.close()
    # the slots come back once the server has seen the clients go
    deadline = time.monotonic() + WAIT
    while server.metrics.registry.get_sample_value("optplan_open_connections") and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _exchange(server.server_port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")[0].status == 200


def _gauge(server: OptplanServer, name: str, want: float) -> float:
    """The server's gauge once it reads ``want`` (or what it reads after WAIT seconds)."""
    deadline = time.monotonic() + WAIT
    value = server.metrics.registry.get_sample_value(name)
    while value != want and time.monotonic() < deadline:
        time.sleep(0.01)
        value = server.metrics.registry.get_sample_value(name)
    return value or 0.0


def _closed_by_server(sock: socket.socket) -> bool:
    """Whether the server closes ``sock`` (whatever it sends first) within WAIT seconds."""
    sock.settimeout(WAIT)
    try:
        while sock.recv(65536):
            pass
    except (ConnectionResetError, TimeoutError) as e:
        return isinstance(e, ConnectionResetError)
    return True


def test_healthz_is_answered_while_idle_connections_hold_every_slot(serve: Callable[..., OptplanServer]) -> None:
    """A hundred idle connections held open, three times --max-connections: a liveness probe still gets 200
    (a kubelet would otherwise restart a server that is only being held open); other requests beyond the
    cap get 503."""
    server = serve(max_connections=32, idle_timeout=WAIT)  # the silent sockets keep their slots throughout
    port = server.server_port
    idle = [socket.create_connection(("127.0.0.1", port), timeout=WAIT) for _ in range(100)]
    try:
        assert _gauge(server, "optplan_open_connections", 32) == 32  # every slot held by a silent socket
        answer, closed = _exchange(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert (answer.status, answer.body, closed) == (200, b'{"status":"ok"}', True)
        answer, _ = _exchange(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        assert answer.status == 503 and "--max-connections" in answer.json["error"]
        assert server.metrics.registry.get_sample_value("optplan_open_connections") == 32
    finally:
        for s in idle:
            s.close()
    assert _gauge(server, "optplan_open_connections", 0) == 0


def test_idle_connections_are_closed_after_the_idle_timeout(serve: Callable[..., OptplanServer]) -> None:
    """Connections that send nothing, half a request line, or nothing more after an answer are closed
    after --idle-timeout, and their slots come back."""
    server = serve(idle_timeout=0.5, max_connections=8)
    port = server.server_port
    silent = [socket.create_connection(("127.0.0.1", port), timeout=WAIT) for _ in range(6)]
    slow = Conn(port)
    slow.send(b"GET /heal")  # and never the rest
    kept = Conn(port)
    kept.send(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    try:
        assert kept.read().status == 200  # kept alive, then idle
        assert all(_closed_by_server(s) for s in [*silent, slow.sock, kept.sock])
    finally:
        for s in silent:
            s.close()
        slow.close()
        kept.close()
    assert _gauge(server, "optplan_open_connections", 0) == 0
    assert _exchange(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")[0].status == 200


# ---- the body budget and slow uploads -------------------------------------------------------------------

def _reserve(port: int, length: int) -> Conn:
    """A connection whose request (Content-Length ``length``) has its bytes reserved: the server sends
    ``100 Continue`` only after the reservation."""
    c = Conn(port)
    c.send(_post_head(length, extra="Expect: 100-continue\r\n"))
    assert c.read().status == 100
    return c


def test_concurrent_uploads_are_bounded_by_the_body_budget(serve: Callable[..., OptplanServer]) -> None:
    server = serve(max_body_bytes=1000, max_buffered_bytes=1500, queue_timeout=0)
    port = server.server_port
    first = _reserve(port, 1000)  # being uploaded, slowly: 1000 of 1500 bytes reserved
    try:
        assert _metric(server, "optplan_buffered_body_bytes") == 1000
        second = Conn(port)  # does not fit: refused before any byte of its body is read
        second.send(_post_head(1000, extra="Expect: 100-continue\r\n"))
        answer = second.read()
        assert answer.status == 503 and "--max-buffered-bytes" in answer.json["error"]
        assert int(answer.headers["retry-after"]) >= 1 and second.closed()
        second.close()
        small = _reserve(port, 400)  # fits beside the first
        small.send(json.dumps({"objects": []}).encode().ljust(400))
        assert small.read().status == 400  # answered (no RepackRun), while the first still uploads
        small.close()
        body = json.dumps({"objects": [node("a")], "solver": "greedy"}).encode().ljust(1000)
        first.send(body)
        assert first.read().status == 400
    finally:
        first.close()
    assert _metric(server, "optplan_buffered_body_bytes") == 0
    again = _reserve(port, 1000)  # the budget is back
    again.close()


def test_a_request_waits_for_body_room_rather_than_failing(serve: Callable[..., OptplanServer]) -> None:
    body = _seed_plan()
    n = len(body)
    server = serve(max_body_bytes=n, max_buffered_bytes=n, queue_timeout=WAIT)
    first = _reserve(server.server_port, n)
    waiting = Conn(server.server_port)
    try:
        waiting.send(_post_head(n, extra="Expect: 100-continue\r\n"))
        first.send(b" " * n)
        assert first.read().status == 400  # not JSON
        assert waiting.read().status == 100  # room now
        waiting.send(body)
        assert waiting.read().status == 200
    finally:
        first.close()
        waiting.close()


def test_a_slow_upload_holds_no_solver(serve: Callable[..., OptplanServer]) -> None:
    """One solver slot and no queue: a client still sending its body does not hold the slot."""
    server = serve(max_concurrent=1, queue_timeout=0)
    slow = _reserve(server.server_port, 5000)
    try:
        slow.send(b'{"objects": [')  # and stalls
        body = _seed_plan()
        answer, _ = _exchange(server.server_port, _post_head(len(body)) + body)
        assert answer.status == 200, answer
    finally:
        slow.close()


def test_a_body_that_ends_early_is_400(serve: Callable[..., OptplanServer]) -> None:
    answer, closed = _exchange(serve().server_port, _post_head(100) + b'{"objects": []')
    assert answer.status == 400 and "ended after 14 of 100 bytes" in answer.json["error"]
    assert closed


def test_the_budget_must_hold_one_body(serve: Callable[..., OptplanServer]) -> None:
    from optplan.errors import InputError

    with pytest.raises(InputError, match="--max-buffered-bytes"):
        serve(max_body_bytes=1000, max_buffered_bytes=999)


# ---- extreme request values: 400 naming the field, never 500 ------------------------------------------

def _post(server: OptplanServer, body: bytes, path: str = "/v1/repack/plan") -> Answer:
    return _exchange(server.server_port, _post_head(len(body), path=path) + body)[0]


def _plan(**fields: Any) -> bytes:
    return _seed_plan(**{"solver": "cpsat", "timeLimitSeconds": 1, **fields})


@pytest.mark.parametrize(("weights", "field"), [
    ({"movedPods": 1e308}, "weights.movedPods"),  # overflowed the exact models' integer scaling
    ({"affectedCards": 1e-320}, "weights.affectedCards"),  # a subnormal: a 320-digit denominator
    ({"movedCards": 1e30}, "weights.movedCards"),
    ({"movedPods": 1_000_001}, "weights.movedPods"),
    ({"movedPods": 5e-7}, "weights.movedPods"),
    ({"movedPods": -0.5}, "weights.movedPods"),
    ({"movedPods": "1"}, "weights.movedPods"),
    ({"movedPods": True}, "weights.movedPods"),
    ({"movedPods": None}, "weights.movedPods"),
])
def test_extreme_weights_are_400(serve: Callable[..., OptplanServer], weights: dict[str, Any], field: str) -> None:
    answer = _post(serve(), _plan(weights=weights))
    assert (answer.status, answer.json["field"]) == (400, field), answer
    assert "1e-06..1e+06" in answer.json["error"] or "expected a number" in answer.json["error"]


def test_weights_at_the_bounds_and_of_any_precision_are_planned(serve: Callable[..., OptplanServer]) -> None:
    weights = {"affectedPodGroups": 1_000_000, "podGroupsBelowMinAvailable": 1e-6, "affectedCards": 0.1234567890123,
               "movedCards": 0, "movedPods": 999_999.999999, "topologyWidening": 1}
    for solver in ("cpsat", "milp", "auto"):
        answer = _post(serve(), _plan(weights=weights, solver=solver))
        assert answer.status == 200, (solver, answer)


@pytest.mark.parametrize(("raw", "field", "says"), [
    (b'"timeLimitSeconds": 1e400', None, "out of range"),  # JSON has no infinity
    (b'"timeLimitSeconds": ' + b"9" * 400, None, "out of range"),  # Python stops at 4300 digits, this earlier
    (b'"timeLimitSeconds": 0', "timeLimitSeconds", "positive"),
    (b'"timeLimitSeconds": [1]', "timeLimitSeconds", "positive"),
    (b'"seed": 2147483648', "seed", "0..2147483647"),
    (b'"seed": ' + b"9" * 30, "seed", "0..2147483647"),
    (b'"seed": -1', "seed", "0..2147483647"),
    (b'"deterministic": "yes"', "deterministic", "true or false"),
    (b'"solver": {"name": "cpsat"}', "solver", "expected one of"),
    (b'"run": []', "run", "RepackRun"),
])
def test_extreme_or_mistyped_fields_are_400(serve: Callable[..., OptplanServer], raw: bytes, field: str | None,
                                           says: str) -> None:
    body = b'{"objects": [], ' + raw + b"}"
    answer = _post(serve(), body)
    assert (answer.status, answer.json["field"]) == (400, field), answer
    assert says in answer.json["error"]


def test_a_huge_time_limit_is_capped_not_overflowed(serve: Callable[..., OptplanServer]) -> None:
    server = serve(max_time_limit=1)
    answer = _post(server, _plan(timeLimitSeconds=10**39, solver="greedy"))
    assert (answer.status, answer.headers["x-optplan-time-limit"]) == (200, "1")


@pytest.mark.parametrize(("objects", "field"), [
    ([{}], "objects[0].apiVersion"),
    ([{"apiVersion": "v1", "kind": ""}], "objects[0].kind"),
    ([{"apiVersion": 1, "kind": "Node"}], "objects[0].apiVersion"),
    ([{"apiVersion": "v1", "kind": "List", "items": [{"kind": "Node"}]}], "objects[0].items[0].apiVersion"),
])
def test_objects_need_api_version_and_kind(serve: Callable[..., OptplanServer], objects: list[Any],
                                          field: str) -> None:
    answer = _post(serve(), json.dumps({"objects": objects}).encode(), "/v1/place")
    assert (answer.status, answer.json["field"]) == (400, field), answer


@pytest.mark.parametrize("depth", [150, 100_000])
def test_deep_nesting_is_400(serve: Callable[..., OptplanServer], depth: int) -> None:
    deep = b"[" * depth + b"]" * depth
    answer = _post(serve(), b'{"objects": [{"apiVersion": "v1", "kind": "Node", "x": ' + deep + b"}]}")
    assert answer.status == 400 and ("deeper than 100" in answer.json["error"] or "not JSON" in answer.json["error"])


def test_a_bug_in_the_server_is_a_one_line_500(serve: Callable[..., OptplanServer], monkeypatch: pytest.MonkeyPatch,
                                               caplog: pytest.LogCaptureFixture) -> None:
    def broken(n: int, timeout: float) -> bool:
        raise KeyError("oops")

    caplog.set_level(logging.ERROR, logger="optplan.serve")
    server = serve()
    monkeypatch.setattr(server.budget, "reserve", broken)  # the HTTP layer's own bookkeeping fails
    answer = _post(server, b"{}")
    assert answer.status == 500 and answer.json == {"error": "internal error; see the server log", "field": None,
                                                    "object": None}
    assert any("Traceback" in r.getMessage() and "KeyError" in r.getMessage() for r in caplog.records)
    assert _exchange(server.server_port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")[0].status == 200


def test_the_header_section_is_bounded(serve: Callable[..., OptplanServer]) -> None:
    server = serve()
    many = "".join(f"X-Pad-{i}: {'y' * 1000}\r\n" for i in range(80))  # 80 KB: each line and count allowed
    answer, closed = _exchange(server.server_port, f"GET /healthz HTTP/1.1\r\nHost: x\r\n{many}\r\n".encode())
    assert answer.status == 431 and closed
    fewer = "".join(f"X-Pad-{i}: {'y' * 1000}\r\n" for i in range(50))
    answer, _ = _exchange(server.server_port, f"GET /healthz HTTP/1.1\r\nHost: x\r\n{fewer}\r\n".encode())
    assert answer.status == 200


def test_the_limits_have_flags_and_defaults() -> None:
    import argparse

    from optplan.cli.serve import add_arguments, config_from_args
    from optplan.serve import DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_CONNECTIONS

    p = argparse.ArgumentParser()
    add_arguments(p)
    config = config_from_args(p.parse_args([]))
    assert (config.max_connections, config.body_budget) == (DEFAULT_MAX_CONNECTIONS, 2 * config.max_body_bytes)
    assert config.idle_timeout == DEFAULT_IDLE_TIMEOUT == 10
    config = config_from_args(p.parse_args(["--max-connections", "4", "--max-buffered-bytes", "1000",
                                            "--max-body-bytes", "500", "--idle-timeout", "2.5"]))
    assert (config.max_connections, config.body_budget, config.max_body_bytes) == (4, 1000, 500)
    assert config.idle_timeout == 2.5
    with pytest.raises(SystemExit):
        p.parse_args(["--idle-timeout", "0"])
