"""``optplan serve``'s flags: a ``ServeConfig`` for the plan server (optplan/serve/), which runs until
SIGINT or SIGTERM."""

from __future__ import annotations

import argparse
import logging
import math
from collections.abc import Callable

from optplan.adapters.schedconf import read_scheduler_conf
from optplan.cli import options
from optplan.serve import (
    DEFAULT_HOST,
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_BODY,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_TIME_LIMIT,
    DEFAULT_PORT,
    DEFAULT_QUEUE_TIMEOUT,
    DEFAULT_TIME_LIMIT,
    OptplanServer,
    ServeConfig,
    serve,
)

log = logging.getLogger("optplan")


def _number(text: str, *, positive: bool, integer: bool) -> float:
    try:
        v = int(text) if integer else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not {'an integer' if integer else 'a number'}: {text!r}") from None
    if not math.isfinite(v) or v < 0 or (positive and v == 0):
        raise argparse.ArgumentTypeError(f"must be {'positive' if positive else 'zero or more'}: {text!r}")
    return v


def _positive_int(text: str) -> int:
    return int(_number(text, positive=True, integer=True))


def _port(text: str) -> int:
    v = int(_number(text, positive=False, integer=True))
    if v > 65535:
        raise argparse.ArgumentTypeError(f"not a port: {text!r}")
    return v


def _positive_float(text: str) -> float:
    return _number(text, positive=True, integer=False)


def _non_negative_float(text: str) -> float:
    return _number(text, positive=False, integer=False)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default=DEFAULT_HOST,
                   help=f"address to listen on (default {DEFAULT_HOST}: this machine only; the API has no "
                        "authentication, so expose it only behind something that has)")
    p.add_argument("--port", type=_port, default=DEFAULT_PORT,
                   help=f"TCP port (default {DEFAULT_PORT}; 0 picks a free one); the bound address is printed "
                        "on stderr at start")
    p.add_argument("--max-body-bytes", type=_positive_int, default=DEFAULT_MAX_BODY, metavar="BYTES",
                   help=f"largest request body (default {DEFAULT_MAX_BODY} = 64 MiB: a 10,000-node snapshot "
                        "as JSON is tens of MB); larger ones get 413 before any of the body is read")
    p.add_argument("--max-time-limit", type=_positive_float, default=DEFAULT_MAX_TIME_LIMIT, metavar="SECONDS",
                   help=f"cap on a request's timeLimitSeconds (default {DEFAULT_MAX_TIME_LIMIT:g}; a request "
                        f"without one gets {DEFAULT_TIME_LIMIT:g})")
    p.add_argument("--max-concurrent", type=_positive_int, default=1, metavar="N",
                   help="requests solved at once (default 1: solves are CPU-bound); others wait in a queue")
    p.add_argument("--queue-timeout", type=_non_negative_float, default=DEFAULT_QUEUE_TIMEOUT, metavar="SECONDS",
                   help="how long a request waits for a free solver before 503 with Retry-After "
                        f"(default {DEFAULT_QUEUE_TIMEOUT:g})")
    p.add_argument("--max-buffered-bytes", type=_positive_int, default=None, metavar="BYTES",
                   help="request bodies held in memory at once, being received or waiting for a solver "
                        "(default twice --max-body-bytes; at least --max-body-bytes); a request reserves its "
                        "Content-Length before its body is read, and waits for room as for a solver")
    p.add_argument("--max-connections", type=_positive_int, default=DEFAULT_MAX_CONNECTIONS, metavar="N",
                   help=f"connections served at once (default {DEFAULT_MAX_CONNECTIONS}); one more is answered "
                        "503 with Retry-After and closed, unless it is a health probe (GET /healthz), which is "
                        "answered whatever the cap")
    p.add_argument("--idle-timeout", type=_positive_float, default=DEFAULT_IDLE_TIMEOUT, metavar="SECONDS",
                   help="seconds from connecting, or from the previous answer, within which a request line and "
                        f"headers must have arrived (default {DEFAULT_IDLE_TIMEOUT:g}); the connection is closed "
                        "otherwise, an idle keep-alive one included, so that the connection cap counts work")
    p.add_argument("--workers", type=_positive_int, default=1, metavar="N",
                   help="CP-SAT worker threads per solve (default 1: deterministic results)")
    options.scheduler_conf(p)
    options.verbose(p, "log to stderr: -v one access line per request, -vv solver progress")


def config_from_args(args: argparse.Namespace) -> ServeConfig:
    """The server's configuration; ``--scheduler-conf`` is read now (its warnings logged once, a bad file is one
    line, exit 2), not at each request."""
    conf = read_scheduler_conf(args.scheduler_conf) if args.scheduler_conf else None
    if conf is not None:
        for w in conf.warnings:
            log.warning("%s: %s", conf.source, w)
    return ServeConfig(host=args.host, port=args.port, max_body_bytes=args.max_body_bytes,
                       max_time_limit=args.max_time_limit, max_concurrent=args.max_concurrent,
                       queue_timeout=args.queue_timeout, workers=args.workers,
                       max_connections=args.max_connections, max_buffered_bytes=args.max_buffered_bytes,
                       idle_timeout=args.idle_timeout, scheduler_conf=conf)


def run(args: argparse.Namespace, *, ready: Callable[[OptplanServer], None] | None = None) -> str:
    """Serve until SIGINT or SIGTERM, then return ""."""
    return serve(config_from_args(args), ready=ready)
