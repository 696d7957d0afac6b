"""The plan server's configuration (``optplan serve``'s flags, declared in optplan/cli/serve.py) and the
limits that have no flag."""

from __future__ import annotations

import math
from dataclasses import dataclass

from optplan.models.schedconf import SchedulerConf

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8686
DEFAULT_MAX_BODY = 64 * 1024 * 1024
DEFAULT_TIME_LIMIT = 10.0
"""A request's time limit when it names none (itself capped by ``--max-time-limit``)."""
DEFAULT_MAX_TIME_LIMIT = 60.0
DEFAULT_MAX_CONNECTIONS = 32
DEFAULT_IDLE_TIMEOUT = 10.0
"""Seconds a connection may wait for its next request line and headers, whole (``--idle-timeout``)."""
DEFAULT_QUEUE_TIMEOUT = 30.0
SOCKET_TIMEOUT = 60.0
"""Seconds a connection may stay silent while its body arrives or its answer is written."""
MIN_BODY_RATE = 256 * 1024
"""Bytes per second a body must arrive at, on average, beyond its first ``SOCKET_TIMEOUT`` seconds."""
MAX_HEADER_BYTES = 64 * 1024
"""All header lines of one request together (the base class alone allows 100 lines of 64 KiB each); more is
431. With the request line (at most 64 KiB too), what one connection buffers before a body is bounded."""
MAX_DEPTH = 100
"""Deepest nesting of arrays and objects accepted in a body (Kubernetes objects nest about 15 deep)."""


@dataclass(frozen=True)
class ServeConfig:
    """What ``optplan serve``'s flags set; ``make_server(ServeConfig(port=0))`` is a server on a free port."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    max_body_bytes: int = DEFAULT_MAX_BODY
    max_time_limit: float = DEFAULT_MAX_TIME_LIMIT
    max_concurrent: int = 1
    queue_timeout: float = DEFAULT_QUEUE_TIMEOUT
    workers: int = 1
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    max_buffered_bytes: int | None = None
    """None: twice ``max_body_bytes``."""
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT
    """Seconds from connecting, or from the previous answer, within which a request's line and headers must
    have arrived; the connection is closed otherwise (an idle keep-alive one included)."""
    scheduler_conf: SchedulerConf | None = None
    """``--scheduler-conf``: the vc-scheduler configuration place and repack plan for when a request gives none
    (``schedulerConf``); None: a ConfigMap in the request's objects, else seed 002's."""

    @property
    def body_budget(self) -> int:
        """Bytes of request bodies held at once."""
        return self.max_buffered_bytes if self.max_buffered_bytes is not None else 2 * self.max_body_bytes

    @property
    def default_time_limit(self) -> float:
        return min(DEFAULT_TIME_LIMIT, self.max_time_limit)

    @property
    def retry_after(self) -> int:
        """Seconds a refused client should wait: about one default solve."""
        return max(1, math.ceil(self.default_time_limit))

