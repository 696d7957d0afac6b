"""The controller's metrics and health endpoints, over real HTTP on 127.0.0.1 (a free port)."""

from __future__ import annotations

import http.client
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from optplan.controller.metrics import Metrics, MetricsServer


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def metrics(clock: Clock) -> Metrics:
    return Metrics(stale_after=60, clock=clock)


@pytest.fixture
def server(metrics: Metrics) -> Iterator[MetricsServer]:
    with metrics.serve("127.0.0.1", 0) as srv:
        yield srv


def get(srv: MetricsServer, path: str, method: str = "GET") -> tuple[int, str, dict[str, str]]:
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=5)
    try:
        conn.request(method, path)
        resp = conn.getresponse()
        return resp.status, resp.read().decode(), {k.lower(): v for k, v in resp.getheaders()}
    finally:
        conn.close()


def samples(srv: MetricsServer) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    status, text, headers = get(srv, "/metrics")
    assert status == 200
    assert headers["content-type"].startswith("text/plain; version=")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def test_metrics_count_what_the_controller_reports(metrics: Metrics, server: MetricsServer) -> None:
    metrics.run_phases({"Pending": 2, "Running": 1})
    metrics.run_phases({"Succeeded": 3, "Running": 1})  # the Pending runs finished
    for result in ("Evicted", "Evicted", "Rejected"):
        metrics.eviction(result)
    metrics.replacement("Scheduled")
    metrics.replacement("TimedOut")
    metrics.plan_seconds(0.2)
    metrics.plan_seconds(45.0)
    metrics.leader(True)
    s = samples(server)
    assert s["optplan_repackruns", (("phase", "Pending"),)] == 0  # not stale
    assert s["optplan_repackruns", (("phase", "Running"),)] == 1
    assert s["optplan_repackruns", (("phase", "Succeeded"),)] == 3
    assert s["optplan_evictions_total", (("result", "Evicted"),)] == 2
    assert s["optplan_evictions_total", (("result", "Rejected"),)] == 1
    assert s["optplan_replacements_total", (("outcome", "Scheduled"),)] == 1
    assert s["optplan_replacements_total", (("outcome", "TimedOut"),)] == 1
    assert s["optplan_plan_seconds_count", ()] == 2
    assert s["optplan_plan_seconds_sum", ()] == pytest.approx(45.2)
    assert s["optplan_plan_seconds_bucket", (("le", "1.0"),)] == 1
    assert s["optplan_leader", ()] == 1
    metrics.leader(False)
    assert samples(server)["optplan_leader", ()] == 0


def test_each_metrics_has_its_own_registry() -> None:
    a, b = Metrics(), Metrics()
    a.eviction("Evicted")
    assert b"optplan_evictions_total{result=\"Evicted\"}" in a.exposition()
    assert b"Evicted" not in b.exposition()


def test_healthz_fails_when_the_loop_stops_beating(metrics: Metrics, server: MetricsServer, clock: Clock) -> None:
    assert get(server, "/healthz")[:2] == (200, "ok\n")  # start-up counts as a beat
    clock.now += 59
    assert get(server, "/healthz")[0] == 200
    clock.now += 2
    status, text, _ = get(server, "/healthz")
    assert (status, text) == (500, "control loop stalled: last heartbeat 61 s ago (limit 60 s)\n")
    assert samples(server)["optplan_heartbeat_age_seconds", ()] == 61
    metrics.heartbeat()
    assert get(server, "/healthz")[0] == 200


def test_readyz_follows_set_ready(metrics: Metrics, server: MetricsServer) -> None:
    assert get(server, "/readyz")[:2] == (503, "not ready\n")
    metrics.set_ready(True)
    assert get(server, "/readyz")[:2] == (200, "ready\n")
    assert samples(server)["optplan_ready", ()] == 1
    metrics.set_ready(False)
    assert get(server, "/readyz")[0] == 503


def test_other_paths_and_methods_are_refused(server: MetricsServer) -> None:
    status, text, _ = get(server, "/nope")
    assert status == 404 and "/metrics, /healthz, /readyz" in text
    status, _, headers = get(server, "/metrics", "POST")
    assert (status, headers["allow"]) == (405, "GET, HEAD")
    status, text, headers = get(server, "/healthz", "HEAD")
    assert (status, text, headers["content-length"]) == (200, "", "3")
    assert get(server, "/readyz?verbose")[0] == 503  # a query string does not change the path


def test_close_frees_the_port(metrics: Metrics) -> None:
    srv = metrics.serve("127.0.0.1", 0)
    port = srv.port
    assert srv.url == f"http://127.0.0.1:{port}"
    srv.close()
    srv.close()  # idempotent
    with pytest.raises(OSError):
        get(srv, "/healthz")
    again = metrics.serve("127.0.0.1", port)  # the port is free again
    again.close()


def test_stale_after_must_be_positive() -> None:
    with pytest.raises(ValueError, match="stale_after"):
        Metrics(stale_after=0)


def test_the_metrics_of_plans_runs_refusals_api_errors_leadership_and_events(metrics: Metrics,
                                                                             server: MetricsServer) -> None:
    metrics.plan_result("cpsat", "OPTIMAL", freed=3, bound=4)
    metrics.plan_result("greedy", "HEURISTIC", freed=2, bound=None)
    metrics.run_finished("Succeeded", "ExecutionCompleted")
    metrics.run_finished("Failed", "ExecutionGoalNotReached")
    metrics.eviction_refused("DisruptionBudget")
    metrics.api_error("patch", 500)
    metrics.api_error("patch", 500)
    metrics.api_error("list", 0)
    metrics.event_write_error()
    metrics.event_dropped()
    for leading in (False, True, True, False, True):  # acquired, lost, acquired: three changes
        metrics.leader(leading)
    s = samples(server)
    assert s["optplan_plans_total", (("solver", "cpsat"), ("status", "OPTIMAL"))] == 1
    assert s["optplan_plans_total", (("solver", "greedy"), ("status", "HEURISTIC"))] == 1
    assert s["optplan_plan_freed_nodes", ()] == 2
    assert s["optplan_plan_freed_nodes_bound", ()] != s["optplan_plan_freed_nodes_bound", ()]  # NaN: none known
    assert s["optplan_repackruns_finished_total", (("phase", "Failed"), ("reason", "ExecutionGoalNotReached"))] == 1
    assert s["optplan_eviction_refusals_total", (("reason", "DisruptionBudget"),)] == 1
    assert s["optplan_api_errors_total", (("code", "500"), ("verb", "patch"))] == 2
    assert s["optplan_api_errors_total", (("code", "0"), ("verb", "list"))] == 1
    assert s["optplan_event_write_errors_total", ()] == 1
    assert s["optplan_events_dropped_total", ()] == 1
    assert s["optplan_leader_changes_total", ()] == 3
