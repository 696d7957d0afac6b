"""The controller's Prometheus metrics and its health endpoints, on one small HTTP server.

API (what the controller calls; every method is thread-safe)::

    m = Metrics(stale_after=180.0)      # a registry of its own, never prometheus_client's global one
    server = m.serve("0.0.0.0", 8080)   # a daemon thread; server.port (0 picks a free port), server.url
    m.heartbeat()                       # the control loop made progress (a loop turn, a run reconciled, a
                                        # journal write): /healthz is 500 once the last heartbeat is older
                                        # than stale_after seconds
    with m.expect(150.0):               # a step that blocks the loop for up to 150 s (a plan): /healthz
        ...                             # allows stale_after + 150 s from its start, then fails
    m.set_ready(True)                   # the caches are synced: /readyz answers 200 (False: 503 again)
    m.leader(True)                      # this replica holds the Lease (optplan_leader 1), False on losing it
    m.run_phases({"Pending": 1, "Succeeded": 4})  # RepackRuns by status.phase, all of them at once;
                                        # a phase seen before and absent now reads 0 (no phase yet: "")
    m.eviction("Evicted")               # one eviction request finished: Evicted, Rejected, Failed, ...
    m.replacement("Scheduled")          # one replacement settled: Scheduled, AlternativePlacement, TimedOut, ...
    m.plan_seconds(12.5)                # one plan computed (DryRun or Execute), its wall-clock seconds
    m.autotrigger_run("DryRun")         # the controller created a RepackRun on its own (autotrigger.py)
    m.plan_result("cpsat", "OPTIMAL", freed=3, bound=4)  # one plan's solver, its status, nodes freed, bound
    m.run_finished("Succeeded", "ExecutionCompleted")   # a run finished: its phase and Complete's reason
    m.eviction_refused("DisruptionBudget")  # an eviction refused for now (asked again): DisruptionBudget,
                                        # TooManyRequests, Conflict, Error
    m.api_error("patch", 500)           # an API request answered with an error (0: no answer at all)
    m.event_write_error()               # an Event (events.k8s.io) could not be written
    m.event_dropped()                   # an Event not written: over its object's rate limit
    server.close()                      # stops serving and frees the port; idempotent

Endpoints (GET or HEAD; anything else 405, other paths 404):

- ``/metrics``: Prometheus text format: ``optplan_repackruns{phase}`` (gauge),
  ``optplan_evictions_total{result}``, ``optplan_replacements_total{outcome}`` (counters),
  ``optplan_autotrigger_runs_total{mode}`` (counter: runs created for gangs pending by fragmentation),
  ``optplan_plan_seconds`` (histogram; its ``_count`` is the number of plans made),
  ``optplan_plans_total{solver,status}`` (counter: the solver record of each plan),
  ``optplan_plan_freed_nodes`` and ``optplan_plan_freed_nodes_bound`` (gauges: the last plan's freed nodes
  and the planner's upper bound on them), ``optplan_repackruns_finished_total{phase,reason}`` (counter),
  ``optplan_eviction_refusals_total{reason}`` (counter: refusals asked again), ``optplan_api_errors_total{verb,
  code}`` (counter), ``optplan_leader_changes_total`` (counter: leadership acquired or lost),
  ``optplan_event_write_errors_total`` and ``optplan_events_dropped_total`` (counters: Events not written,
  by failure and by rate limit), ``optplan_leader`` (gauge, 0 or 1), ``optplan_ready`` (gauge, 0 or 1) and
  ``optplan_heartbeat_age_seconds`` (gauge, read at scrape time).
- ``/healthz``: the liveness probe. 200 ``ok`` while the control loop has beaten within ``stale_after``
  seconds (the time of construction counts as the first beat), else 500 naming the age. A loop blocked in
  a plan cannot beat, so the plan is announced with its deadline (``expect``): the watchdog then allows
  ``stale_after`` plus that deadline from the plan's start, no more — a plan that overruns its deadline
  by ``stale_after`` is a hung loop, and the kubelet restarts it.
- ``/readyz``: the readiness probe. 200 ``ready`` after ``set_ready(True)``, 503 before. A replica that is
  not the leader is ready (a hot standby); leadership is ``optplan_leader``, not readiness.

Label values are the caller's words (the relocation's phases), recorded as given.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

log = logging.getLogger(__name__)

PATHS = ("/metrics", "/healthz", "/readyz")
"""The paths the server answers (the Deployment's probes and scrape annotation use them)."""

STALE_AFTER = 660.0
"""Default age (seconds) of the last heartbeat past which /healthz fails, outside an announced plan: the
longest step between two beats is one API call, bounded by ``--api-deadline`` (default 600 s, retries
included), plus 60 s of slack (``stale_limit``)."""


def stale_limit(api_deadline: float) -> float:
    """``stale_after`` for a controller whose API calls each end within ``api_deadline`` seconds."""
    return api_deadline + 60.0


PLAN_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 90.0, 120.0, 300.0)


class Metrics:
    """The controller's metrics and health state, in a registry of its own."""

    def __init__(self, *, stale_after: float = STALE_AFTER, clock: Callable[[], float] = time.monotonic) -> None:
        if not stale_after > 0:
            raise ValueError(f"stale_after must be positive, not {stale_after!r}")
        self.stale_after = stale_after
        self._clock = clock
        self._lock = threading.Lock()
        self._beat = clock()
        self._allowance = 0.0  # seconds an announced blocking step (a plan) adds to stale_after
        self._ready = False
        self._phases: set[str] = set()
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self._runs = Gauge("optplan_repackruns", "RepackRuns by status.phase (\"\" for none yet)", ["phase"],
                           registry=r)
        self._evictions = Counter("optplan_evictions", "Eviction requests finished, by result", ["result"],
                                  registry=r)
        self._replacements = Counter("optplan_replacements", "Replacement pods settled, by outcome", ["outcome"],
                                     registry=r)
        self._autotrigger = Counter("optplan_autotrigger_runs", "RepackRuns the controller created for gangs "
                                    "pending by fragmentation, by spec.mode", ["mode"], registry=r)
        self._plan = Histogram("optplan_plan_seconds", "Wall-clock seconds of each plan the controller made",
                               buckets=PLAN_BUCKETS, registry=r)
        self._plans = Counter("optplan_plans", "Plans made, by solver and the solver's status "
                              "(OPTIMAL, FEASIBLE, FALLBACK, HEURISTIC, ...)", ["solver", "status"], registry=r)
        self._freed = Gauge("optplan_plan_freed_nodes", "Nodes the last plan frees", registry=r)
        self._bound = Gauge("optplan_plan_freed_nodes_bound", "The planner's upper bound on the nodes the last plan "
                            "could free (NaN: none known)", registry=r)
        self._finished = Counter("optplan_repackruns_finished", "RepackRuns finished, by phase and Complete's reason",
                                 ["phase", "reason"], registry=r)
        self._refusals = Counter("optplan_eviction_refusals", "Evictions refused for now and asked again, by reason",
                                 ["reason"], registry=r)
        self._api_errors = Counter("optplan_api_errors", "API requests answered with an error, by verb and HTTP "
                                   "code (0: no answer)", ["verb", "code"], registry=r)
        self._leader_changes = Counter("optplan_leader_changes", "Times this replica acquired or lost the Lease",
                                       registry=r)
        self._event_errors = Counter("optplan_event_write_errors", "Events (events.k8s.io) that could not be "
                                     "written", registry=r)
        self._events_dropped = Counter("optplan_events_dropped", "Events not written: over their object's rate "
                                       "limit", registry=r)
        self._is_leader: bool | None = None
        self._leader = Gauge("optplan_leader", "1 while this replica holds the leader Lease", registry=r)
        self._ready_gauge = Gauge("optplan_ready", "1 once the controller is ready (caches synced)", registry=r)
        age = Gauge("optplan_heartbeat_age_seconds", "Seconds since the control loop last beat", registry=r)
        age.set_function(self.heartbeat_age)

    # ---- what the controller reports -----------------------------------------------------------

    def run_phases(self, counts: Mapping[str, int]) -> None:
        """The number of RepackRuns in each phase, all runs at once: phases reported before and absent
        from ``counts`` go to 0, so a gauge never keeps a stale count."""
        with self._lock:
            for phase in sorted(self._phases - set(counts)):
                self._runs.labels(phase=phase).set(0)
            for phase, n in sorted(counts.items()):
                self._runs.labels(phase=phase).set(n)
            self._phases |= set(counts)

    def eviction(self, result: str) -> None:
        self._evictions.labels(result=result).inc()

    def replacement(self, outcome: str) -> None:
        self._replacements.labels(outcome=outcome).inc()

    def autotrigger_run(self, mode: str) -> None:
        self._autotrigger.labels(mode=mode).inc()

    def plan_seconds(self, seconds: float) -> None:
        self._plan.observe(seconds)

    def plan_result(self, solver: str, status: str, *, freed: int, bound: int | None) -> None:
        self._plans.labels(solver=solver, status=status).inc()
        self._freed.set(freed)
        self._bound.set(float("nan") if bound is None else bound)

    def run_finished(self, phase: str, reason: str) -> None:
        self._finished.labels(phase=phase, reason=reason).inc()

    def eviction_refused(self, reason: str) -> None:
        self._refusals.labels(reason=reason).inc()

    def api_error(self, verb: str, code: int) -> None:
        self._api_errors.labels(verb=verb, code=str(code)).inc()

    def event_write_error(self) -> None:
        self._event_errors.inc()

    def event_dropped(self) -> None:
        self._events_dropped.inc()

    def leader(self, is_leader: bool) -> None:
        """Whether this replica holds the Lease; a change (a first True included) counts in leader changes."""
        with self._lock:
            changed = is_leader != self._is_leader and (self._is_leader is not None or is_leader)
            self._is_leader = is_leader
        if changed:
            self._leader_changes.inc()
        self._leader.set(1 if is_leader else 0)

    def heartbeat(self) -> None:
        with self._lock:
            self._beat = self._clock()

    @contextlib.contextmanager
    def expect(self, seconds: float) -> Iterator[None]:
        """A step that blocks the loop for up to ``seconds`` (a plan): beats, and /healthz allows
        ``stale_after + seconds`` from now until the step ends (then beats again)."""
        with self._lock:
            self._beat = self._clock()
            self._allowance = max(seconds, 0.0)
        try:
            yield
        finally:
            with self._lock:
                self._beat = self._clock()
                self._allowance = 0.0

    def set_ready(self, ready: bool) -> None:
        with self._lock:
            self._ready = ready
        self._ready_gauge.set(1 if ready else 0)

    # ---- what the endpoints read ---------------------------------------------------------------

    def heartbeat_age(self) -> float:
        with self._lock:
            return max(0.0, self._clock() - self._beat)

    def healthy(self) -> tuple[bool, str]:
        """Whether the loop is alive, and the words /healthz answers."""
        with self._lock:
            age = max(0.0, self._clock() - self._beat)
            allowance = self._allowance
        limit = self.stale_after + allowance
        if age > limit:
            during = f": a plan announced to end within {allowance:g} s overran it" if allowance else ""
            return False, f"control loop stalled: last heartbeat {age:.0f} s ago (limit {limit:g} s{during})"
        return True, "ok"

    def ready(self) -> bool:
        with self._lock:
            return self._ready

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

    def serve(self, host: str = "0.0.0.0", port: int = 8080) -> MetricsServer:
        """Serve /metrics, /healthz and /readyz on ``host:port`` from a daemon thread (port 0: any free one)."""
        return MetricsServer(self, host, port)


class MetricsServer:
    """The metrics and health endpoints of one ``Metrics``, served until ``close()``."""

    def __init__(self, metrics: Metrics, host: str, port: int) -> None:
        self._server = _Server((host, port), _handler(metrics))
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.1,), name="optplan-metrics",
                                        daemon=True)
        self._closed = False
        self._thread.start()

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        host = str(self._server.server_address[0])
        return f"http://{'127.0.0.1' if host == '0.0.0.0' else host}:{self.port}"

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def __enter__(self) -> MetricsServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("metrics server: error answering %s", client_address, exc_info=True)


def _handler(metrics: Metrics) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "optplan-controller"
        sys_version = ""

        def do_GET(self) -> None:
            self._answer(body=True)

        def do_HEAD(self) -> None:
            self._answer(body=False)

        def _answer(self, *, body: bool) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                self._send(200, metrics.exposition(), CONTENT_TYPE_LATEST, body)
            elif path == "/healthz":
                ok, words = metrics.healthy()
                self._send(200 if ok else 500, f"{words}\n".encode(), "text/plain; charset=utf-8", body)
            elif path == "/readyz":
                ready = metrics.ready()
                self._send(200 if ready else 503, b"ready\n" if ready else b"not ready\n",
                           "text/plain; charset=utf-8", body)
            else:
                self._send(404, f"not found: {path} (serving {', '.join(PATHS)})\n".encode(),
                           "text/plain; charset=utf-8", body)

        def _refuse(self) -> None:
            self.send_response(405)
            self.send_header("Allow", "GET, HEAD")
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = _refuse

        def _send(self, code: int, data: bytes, content_type: str, body: bool) -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if body:
                self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("metrics server: " + format, *args)

    return Handler
