"""Kubernetes Events (events.k8s.io/v1) for the controller's decisions: ``kubectl describe repackrun``
and ``kubectl events`` tell a run's story, and an evicted pod's own events say who evicted it.

API::

    rec = Recorder(sink, instance="optplan-controller-7d9f-abcde", clock=time.time, metrics=m)
    rec.emit(run_obj, NORMAL, "Planned", "Plan", "free 2 node(s) (n1, n2) with 3 move(s); bound 2")
    rec.emit(pod_obj, NORMAL, "Repacked", "Evict", "evicted by RepackRun r1 ...", related=run_obj)
    rec.flush()   # once a pass: series counts held back by the rate limit are written when allowed

What an Event carries, as client-go's events recorder (k8s.io/client-go/tools/events) writes it:
``reportingController`` ``optplan.io/repack-controller``, ``reportingInstance`` this replica (its pod name),
``action`` and ``reason`` (CamelCase), ``type`` Normal or Warning, ``note`` (at most 1 KiB), ``regarding``
(the object's reference) and optionally ``related``; the name is ``<object name>.<hex nanoseconds>``, in the
object's namespace, or ``default`` for a cluster-scoped object (a RepackRun), as the API server requires.

Two guards keep a flapping condition from flooding the API server:

- **Aggregation** (client-go's EventSeries): an Event with the same regarding object, reason, action, type
  and note as one written less than ``finish`` seconds (6 minutes, client-go's ``finishTime``) before is
  not created again: the first Event gets ``series: {count, lastObservedTime}`` (count 2 on the first
  repeat), written by a merge patch at once; later repeats are counted and written at most once every
  ``refresh`` seconds (a minute), by the repeat or by ``flush``. After ``finish`` seconds without a repeat
  the series ends (its last count written) and the next occurrence starts a new Event. A patched Event
  that is gone (Events expire, by default after an hour) is created again with its series.
- **Rate limit** (client-go's tools/record spam filter): a token bucket per regarding object, ``burst`` 25
  writes, refilled one per ``refill`` seconds (300: 5 minutes). An occurrence without a token is not
  written: a new Event is dropped (counted: ``optplan_events_dropped_total``); a repeat is counted in its
  series and written by a later ``flush`` once a token is back.

An Event write never fails the caller: a failure is logged and counted (``optplan_event_write_errors_total``).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import socket
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from optplan.adapters.kube import NotFoundError

log = logging.getLogger(__name__)

CONTROLLER = "optplan.io/repack-controller"
"""``reportingController`` of every Event the controller writes."""
NORMAL = "Normal"
WARNING = "Warning"
BURST = 25
"""Events per object written at once, as client-go's tools/record (``defaultSpamBurst``)."""
REFILL = 300.0
"""Seconds per token refilled (client-go's ``defaultSpamQPS`` of 1/300)."""
FINISH = 360.0
"""Seconds without a repeat after which a series ends (client-go's tools/events ``finishTime``)."""
REFRESH = 60.0
"""Seconds between two writes of one series after its first (client-go refreshes every 30 minutes; a
minute keeps ``kubectl describe`` current at one patch a minute per repeating Event)."""
MAX_OBJECTS = 4096
"""Objects whose buckets and series are kept (least recently used first out), as client-go's LRU caches."""
NOTE_BYTES = 1024
"""The API server's limit on ``note``."""
MAX_INSTANCE = 128
"""The API server's limit on ``reportingInstance``."""


class EventSink(Protocol):
    """Where Events go (``optplan.adapters.kube.KubeClient`` has it)."""

    def create_event(self, namespace: str, event: Mapping[str, Any]) -> dict[str, Any]: ...

    def patch_event(self, namespace: str, name: str, patch: Mapping[str, Any]) -> dict[str, Any]: ...


class EventMetrics(Protocol):
    """What the recorder counts (``optplan.controller.metrics.Metrics`` has it)."""

    def event_write_error(self) -> None: ...

    def event_dropped(self) -> None: ...


def instance_name() -> str:
    """This replica's ``reportingInstance``: ``$POD_NAME`` (the Deployment sets it), else the hostname."""
    return (os.environ.get("POD_NAME") or socket.gethostname() or "optplan-controller")[:MAX_INSTANCE]


def reference(obj: Mapping[str, Any]) -> dict[str, str]:
    """An object's ``ObjectReference`` (apiVersion, kind, name, namespace when it has one, uid)."""
    meta = obj.get("metadata") or {}
    ref = {"apiVersion": str(obj.get("apiVersion") or ""), "kind": str(obj.get("kind") or ""),
           "name": str(meta.get("name") or "")}
    if meta.get("namespace"):
        ref["namespace"] = str(meta["namespace"])
    if meta.get("uid"):
        ref["uid"] = str(meta["uid"])
    return {k: v for k, v in ref.items() if v}


def micro_time(t: float) -> str:
    """metav1.MicroTime: ``2026-07-30T10:00:00.123456Z``."""
    return dt.datetime.fromtimestamp(t, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _note(text: str) -> str:
    """One line, at most NOTE_BYTES bytes of UTF-8 (cut on a character boundary)."""
    line = " ".join(text.split())
    data = line.encode()
    if len(data) <= NOTE_BYTES:
        return line
    return data[:NOTE_BYTES - 3].decode(errors="ignore") + "..."


@dataclass
class _Bucket:
    tokens: float
    last: float


@dataclass
class _Series:
    namespace: str
    name: str
    event: dict[str, Any]  # as created (for a re-create after the Event expired)
    count: int  # occurrences seen, the first included
    written: int  # the count the API server has (1: no series yet)
    last_observed: float
    last_written: float  # when the API server's copy was last written


class Recorder:
    """Writes Events through ``sink`` (see the module docstring); thread-safe."""

    def __init__(self, sink: EventSink, *, instance: str, clock: Callable[[], float],
                 metrics: EventMetrics | None = None, burst: int = BURST, refill: float = REFILL,
                 finish: float = FINISH, refresh: float = REFRESH, max_objects: int = MAX_OBJECTS) -> None:
        self.sink = sink
        self.instance = instance[:MAX_INSTANCE] or "optplan-controller"
        self.clock = clock
        self.metrics = metrics
        self.burst = burst
        self.refill = refill
        self.finish = finish
        self.refresh = refresh
        self.max_objects = max_objects
        self._lock = threading.Lock()
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()  # regarding key -> its tokens
        self._series: OrderedDict[tuple[str, ...], _Series] = OrderedDict()  # event key -> the Event written
        self._last_nanos = 0

    # ---- what the controller calls --------------------------------------------------------------

    def emit(self, regarding: Mapping[str, Any], type_: str, reason: str, action: str, note: str, *,
             related: Mapping[str, Any] | None = None) -> None:
        """Record that ``reason`` happened to ``regarding`` (an object as the API has it): a new Event, or a
        repeat counted in the series of the one written before. Never raises for the API's sake."""
        ref = reference(regarding)
        rel = reference(related) if related is not None else None
        text = _note(note)
        with self._lock:
            now = self.clock()
            key = (_object_key(ref), reason, action, type_, text)
            self._expire(now)
            series = self._series.get(key)
            if series is not None:
                series.count += 1
                series.last_observed = now
                self._series.move_to_end(key)
                if self._due(series, now) and self._take(ref, now):
                    self._write_series(series, now)
                return
            if not self._take(ref, now):
                log.debug("Event %s on %s/%s dropped: over the rate limit", reason, ref.get("kind"), ref.get("name"))
                if self.metrics is not None:
                    self.metrics.event_dropped()
                return
            namespace = ref.get("namespace") or "default"  # a cluster-scoped object's Events live in default
            event: dict[str, Any] = {
                "metadata": {"name": self._name(ref, now), "namespace": namespace},
                "eventTime": micro_time(now), "reportingController": CONTROLLER,
                "reportingInstance": self.instance, "action": action, "reason": reason, "type": type_,
                "regarding": ref, "note": text}
            if rel is not None:
                event["related"] = rel
            if self._create(namespace, event):
                self._series[key] = _Series(namespace, event["metadata"]["name"], event, 1, 1, now, now)
                while len(self._series) > self.max_objects:
                    self._series.popitem(last=False)

    def flush(self) -> None:
        """Write the series counts the rate limit held back, where a token is back."""
        with self._lock:
            now = self.clock()
            self._expire(now)
            for series in list(self._series.values()):
                if self._due(series, now) and self._take(series.event["regarding"], now):
                    self._write_series(series, now)

    # ---- the guards -----------------------------------------------------------------------------

    def _take(self, ref: Mapping[str, str], now: float) -> bool:
        """A token from the object's bucket, if it has one."""
        key = _object_key(ref)
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = _Bucket(float(self.burst), now)
            while len(self._buckets) > self.max_objects:
                self._buckets.popitem(last=False)
        self._buckets.move_to_end(key)
        bucket.tokens = min(float(self.burst), bucket.tokens + max(now - bucket.last, 0.0) / self.refill)
        bucket.last = now
        if bucket.tokens < 1.0:
            return False
        bucket.tokens -= 1.0
        return True

    def _expire(self, now: float) -> None:
        """Forget series without a repeat for ``finish`` seconds (their last count written when allowed)."""
        for key in [k for k, s in self._series.items() if now - s.last_observed > self.finish]:
            series = self._series[key]
            if series.count != series.written and self._take(series.event["regarding"], now):
                self._write_series(series, now)
            del self._series[key]

    def _due(self, series: _Series, now: float) -> bool:
        """A series count to write now: its first repeat at once, later ones once ``refresh`` has passed."""
        return series.count != series.written and (series.written == 1 or now - series.last_written >= self.refresh)

    def _name(self, ref: Mapping[str, str], now: float) -> str:
        """``<object>.<hex nanoseconds>``: the clock's nanoseconds, never twice the same (names are unique),
        the object's name cut to keep within the 253 characters of a name."""
        self._last_nanos = max(int(now * 1e9), self._last_nanos + 1)
        suffix = f".{self._last_nanos:x}"
        return ref.get("name", "object")[:253 - len(suffix)].rstrip(".-") + suffix

    # ---- writing --------------------------------------------------------------------------------

    def _create(self, namespace: str, event: Mapping[str, Any]) -> bool:
        try:
            self.sink.create_event(namespace, event)
            return True
        except Exception as e:  # an Event is never worth failing the run for
            self._failed(f"cannot create Event {event['reason']} on {_shown(event['regarding'])}", e)
            return False

    def _write_series(self, series: _Series, now: float) -> None:
        observed = micro_time(series.last_observed)
        patch = {"series": {"count": series.count, "lastObservedTime": observed}}
        try:
            try:
                self.sink.patch_event(series.namespace, series.name, patch)
            except NotFoundError:
                # the Event expired: write it again, with its series, under a new name
                name = self._name(series.event["regarding"], now)
                event = {**series.event, **patch, "metadata": {"name": name, "namespace": series.namespace}}
                self.sink.create_event(series.namespace, event)
                series.name, series.event = event["metadata"]["name"], event
            series.written = series.count
            series.last_written = now
        except Exception as e:
            self._failed(f"cannot update Event {series.namespace}/{series.name}'s series", e)

    def _failed(self, what: str, e: Exception) -> None:
        log.warning("%s: %s", what, " ".join(str(e).split()) or type(e).__name__)
        if self.metrics is not None:
            self.metrics.event_write_error()


def _object_key(ref: Mapping[str, str]) -> str:
    return "/".join((ref.get("kind", ""), ref.get("namespace", ""), ref.get("name", ""), ref.get("uid", "")))


def _shown(ref: Mapping[str, str]) -> str:
    ns = ref.get("namespace")
    return f"{ref.get('kind', '')} {ns + '/' if ns else ''}{ref.get('name', '')}"
