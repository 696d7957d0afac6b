"""``optplan serve``: the public API (optplan/api.py) over HTTP/JSON, for a controller written in another
language (Volcano's controllers are Go).

Endpoints (JSON in, JSON out; bodies are deterministic: sorted keys, no spaces)::

    POST /v1/repack/plan       objects, run?, solver?, timeLimitSeconds?, seed?, weights?, deterministic?,
                               schedulerConf? -> {name, reason, status, resourceVersion}
    POST /v1/place             objects, jobs?, solver?, timeLimitSeconds?, seed?, now?, deterministic?,
                               schedulerConf? -> the placement
    POST /v1/execute/nominate  objects, run?, relocation, replacement                   -> the Nomination
    POST /v1/execute/verify    objects, run?, timeLimitSeconds?                         -> the Verification
    GET  /healthz              -> {"status": "ok"}, whatever the connection cap
    GET  /metrics              -> Prometheus text exposition (a private registry per server)
    GET  /openapi.json         -> OpenAPI 3.1: every endpoint, request, response and error

``objects`` are Kubernetes objects as the API server returns them (``apiVersion``/``kind``; a ``kind:
List`` is expanded). ``run`` is a RepackRun object, the name of one in ``objects``, or omitted when
``objects`` hold exactly one. The server never writes to a cluster (the controller patches the status
itself, with the returned ``resourceVersion``), never runs a command, never opens a path it receives.
``timeLimitSeconds`` is capped to ``--max-time-limit`` (the applied value is returned in
``X-Optplan-Time-Limit``).

The modules, each importing only those below it: ``openapi`` (the document) -> ``endpoints`` (the calls)
-> ``requests`` (the request models: validation and schemas) | ``http`` (the server: connections, their cap,
held connections and shutdown) -> ``handler`` (HTTP/1.1 requests and their limits, answered through routes:
it knows no endpoint) -> ``metrics`` | ``config``. This package starts a server from a ``ServeConfig``;
``optplan serve``'s flags are declared in optplan/cli/serve.py.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

from optplan.errors import InputError
from optplan.serve.config import (
    DEFAULT_HOST,
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_BODY,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_TIME_LIMIT,
    DEFAULT_PORT,
    DEFAULT_QUEUE_TIMEOUT,
    DEFAULT_TIME_LIMIT,
    ServeConfig,
)
from optplan.serve.endpoints import ENDPOINTS, Endpoint, routes
from optplan.serve.handler import dumps
from optplan.serve.http import OptplanServer
from optplan.serve.metrics import Metrics
from optplan.serve.openapi import openapi_document
from optplan.serve.requests import PLACE_SOLVERS, REPACK_SOLVERS

__all__ = [
    "DEFAULT_HOST", "DEFAULT_IDLE_TIMEOUT", "DEFAULT_MAX_BODY", "DEFAULT_MAX_CONNECTIONS", "DEFAULT_MAX_TIME_LIMIT",
    "DEFAULT_PORT", "DEFAULT_QUEUE_TIMEOUT", "DEFAULT_TIME_LIMIT", "ENDPOINTS", "PLACE_SOLVERS", "REPACK_SOLVERS",
    "Endpoint", "OptplanServer", "ServeConfig", "make_server", "openapi_document", "serve",
]

log = logging.getLogger("optplan.serve")


def make_server(config: ServeConfig) -> OptplanServer:
    """A bound, not yet serving server (``serve_forever`` in a thread to start it; ``shutdown`` and
    ``server_close`` to stop it). Its ``metrics.registry`` holds its metrics, ``slots`` the solver slots."""
    metrics = Metrics()
    try:
        return OptplanServer(config, metrics, routes(config, metrics, dumps(openapi_document(config))))
    except OSError as e:
        raise InputError(f"cannot listen on {config.host}:{config.port}: {e.strerror or e}",
                         field="--host/--port") from None


def serve(config: ServeConfig, *, ready: Callable[[OptplanServer], None] | None = None) -> str:
    """Serve until SIGINT or SIGTERM (or ``server.stopping`` is set), then finish the requests being
    answered (for at most the time limit cap) and return ""."""
    server = make_server(config)
    sys.stderr.write(f"optplan serve: listening on {server.url}\n")
    sys.stderr.flush()
    log.info("serving on %s: %s", server.url, config)
    previous: dict[signal.Signals, Any] = {}

    def stop(signum: int, frame: FrameType | None) -> None:
        log.info("%s: shutting down", signal.Signals(signum).name)
        for s, h in previous.items():  # a second signal acts as it did before
            signal.signal(s, h)
        server.stopping.set()

    if threading.current_thread() is threading.main_thread():
        for s in (signal.SIGINT, signal.SIGTERM):
            previous[s] = signal.signal(s, stop)
    loop = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, name="optplan-serve",
                            daemon=True)
    loop.start()
    try:
        if ready is not None:
            ready(server)
        server.stopping.wait()
    finally:
        server.shutdown()
        if not server.wait_idle(config.max_time_limit + 5):
            log.warning("requests still running at shutdown are abandoned")
        server.server_close()
        loop.join()
        for s, h in previous.items():
            signal.signal(s, h)
    return ""
