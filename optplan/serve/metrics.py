"""The plan server's Prometheus metrics, in a registry of its own per server (never the process-wide one)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

SECONDS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
COUNT_BUCKETS = (0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000)
CONTENT_TYPE = CONTENT_TYPE_LATEST
"""The text exposition's Content-Type."""


class Metrics:
    """The server's Prometheus metrics, in a registry of its own (never the process-wide one)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter("optplan_requests", "HTTP requests answered, by endpoint and status code",
                                ["endpoint", "code"], registry=r)
        self.request_seconds = Histogram("optplan_request_seconds", "Time to answer a request, queueing included",
                                         ["endpoint"], buckets=SECONDS_BUCKETS, registry=r)
        self.solve_seconds = Histogram("optplan_solve_seconds", "Time spent in the planner per successful call",
                                       ["endpoint", "solver"], buckets=SECONDS_BUCKETS, registry=r)
        self.solver_status = Counter("optplan_solver_status", "Plans by the solver record's status "
                                     "(OPTIMAL, FEASIBLE, FALLBACK, HEURISTIC)", ["endpoint", "status"], registry=r)
        self.plan_moves = Histogram("optplan_plan_moves", "Pods moved per repack plan", buckets=COUNT_BUCKETS,
                                    registry=r)
        self.plan_freed_nodes = Histogram("optplan_plan_freed_nodes", "Nodes freed per repack plan",
                                          buckets=COUNT_BUCKETS, registry=r)
        self.placed_jobs = Histogram("optplan_placed_jobs", "Jobs admitted per placement", buckets=COUNT_BUCKETS,
                                     registry=r)
        self.inflight = Gauge("optplan_inflight_requests", "Requests being answered (waiting ones included)",
                              registry=r)
        self.connections = Gauge("optplan_open_connections", "Connections being served (idle keep-alive "
                                 "ones included)", registry=r)
        self.refused_connections = Counter("optplan_refused_connections", "Connections answered 503 and "
                                           "closed because --max-connections were open", registry=r)
        self.buffered_bytes = Gauge("optplan_buffered_body_bytes", "Request body bytes reserved (being "
                                    "received, waiting for a solver or being decoded)", registry=r)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
