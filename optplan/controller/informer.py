"""Informers: per resource, list (paged) then watch from the list's resourceVersion, into one in-memory
store keyed by (kind, namespace, name).

A watch that ends (the server's ``timeoutSeconds``, a broken connection) resumes from the last
resourceVersion seen (events and BOOKMARKs); a 410 Gone lists again. A custom resource whose CRD is
not installed reads as none and is listed again every ``absent_relist`` seconds. Every change bumps the
store's version and sets its ``changed`` event, so the control loop wakes up; which kinds changed is
kept, so a loop can tell an unrelated pod event from a RepackRun edit.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Protocol

from optplan.adapters.kube import REPACK_RUNS, RESOURCES, Resource, WatchExpired, clean
from optplan.errors import KubeError

log = logging.getLogger(__name__)

Key = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped objects


def _key(obj: Mapping[str, Any]) -> Key:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def newer(a: Mapping[str, Any], b: Mapping[str, Any] | None) -> bool:
    """Whether object ``a`` is a later version than ``b`` (resourceVersions compared as integers when
    both are; etcd's are, and an opaque one counts as newer)."""
    if b is None:
        return True
    va = str((a.get("metadata") or {}).get("resourceVersion") or "")
    vb = str((b.get("metadata") or {}).get("resourceVersion") or "")
    if va.isdigit() and vb.isdigit():
        return int(va) >= int(vb)
    return True


class Store:
    """Objects by kind, thread-safe. Readers get the stored dicts: they must not change them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._objects: dict[str, dict[Key, dict[str, Any]]] = {res.kind: {} for res in RESOURCES}
        self._synced: set[str] = set()
        self.version = 0
        self._kind_versions: dict[str, int] = {}
        self.changed = threading.Event()
        self._changed_kinds: set[str] = set()

    # ---- writing (informers, and the controller's own writes) -----------------------------------

    def replace(self, kind: str, items: Iterable[dict[str, Any]]) -> None:
        with self._lock:
            self._objects[kind] = {_key(o): o for o in items}
            self._synced.add(kind)
            self._bump(kind)

    def put(self, kind: str, obj: dict[str, Any]) -> None:
        """Store ``obj`` unless the store holds a later version already (a write's answer may arrive
        after the watch event of a later write)."""
        with self._lock:
            table = self._objects.setdefault(kind, {})
            key = _key(obj)
            if newer(obj, table.get(key)):
                table[key] = obj
                self._bump(kind)

    def delete(self, kind: str, obj: Mapping[str, Any]) -> None:
        with self._lock:
            if self._objects.setdefault(kind, {}).pop(_key(obj), None) is not None:
                self._bump(kind)

    def _bump(self, kind: str) -> None:
        self.version += 1
        self._kind_versions[kind] = self._kind_versions.get(kind, 0) + 1
        self._changed_kinds.add(kind)
        self.changed.set()

    # ---- reading --------------------------------------------------------------------------------

    def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any] | None:
        with self._lock:
            return self._objects.get(kind, {}).get((namespace, name))

    def all(self, kind: str) -> list[dict[str, Any]]:
        with self._lock:
            table = self._objects.get(kind, {})
            return [table[k] for k in sorted(table)]

    def snapshot_objects(self) -> list[dict[str, Any]]:
        """Every object the planners read (RepackRuns left out), kind by kind, sorted."""
        with self._lock:
            out: list[dict[str, Any]] = []
            for res in RESOURCES:
                if res.kind != REPACK_RUNS.kind:
                    table = self._objects.get(res.kind, {})
                    out.extend(table[k] for k in sorted(table))
            return out

    def snapshot_version(self) -> tuple[int, ...]:
        """Changes when an object the planners read changes (RepackRuns left out)."""
        with self._lock:
            return tuple(self._kind_versions.get(res.kind, 0) for res in RESOURCES if res.kind != REPACK_RUNS.kind)

    def synced(self, kinds: Iterable[str] | None = None) -> bool:
        with self._lock:
            wanted = set(kinds) if kinds is not None else {res.kind for res in RESOURCES}
            return wanted <= self._synced

    def take_changes(self) -> set[str]:
        """The kinds changed since the last call (and clear the changed event)."""
        with self._lock:
            out, self._changed_kinds = self._changed_kinds, set()
            self.changed.clear()
            return out


class WatchClient(Protocol):
    """What an informer needs of ``optplan.adapters.kube.KubeClient``."""

    def list_with_version(self, res: Resource) -> tuple[list[dict[str, Any]], str]: ...

    def watch(self, res: Resource, resource_version: str, *, timeout_seconds: int = 300) -> Iterator[dict[str, Any]]:
        ...


class Informer:
    """List then watch one resource into the store (``run`` in a thread, ``sync`` once)."""

    def __init__(self, client: WatchClient, res: Resource, store: Store, *, watch_timeout: int = 300,
                 backoff: float = 1.0, max_backoff: float = 30.0, absent_relist: float = 300.0,
                 wait: Callable[[float], bool] | None = None) -> None:
        self.client = client
        self.res = res
        self.store = store
        self.watch_timeout = watch_timeout
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.absent_relist = absent_relist
        self.stop = threading.Event()
        self._wait = wait or self.stop.wait  # returns True once stopping
        self.version = ""
        self.relists = 0
        self.thread: threading.Thread | None = None

    def sync(self) -> None:
        """List into the store; the watch resumes from this list's resourceVersion."""
        items, self.version = self.client.list_with_version(self.res)
        self.store.replace(self.res.kind, items)
        self.relists += 1

    def start(self) -> None:
        self.thread = threading.Thread(target=self.run, name=f"informer-{self.res.plural}", daemon=True)
        self.thread.start()

    def run(self) -> None:
        delay = self.backoff
        listed = False
        while not self.stop.is_set():
            try:
                if not listed:
                    self.sync()
                    listed = True
                if not self.version:  # an optional resource the server does not serve
                    listed = False
                    if self._wait(self.absent_relist):
                        return
                    continue
                self._watch_once()
                delay = self.backoff
            except WatchExpired as e:
                log.info("%s: %s; listing again", self.res.name, e)
                listed = False
            except KubeError as e:
                if self.stop.is_set():
                    return
                log.warning("%s: %s; retrying in %.0f s", self.res.name, e, delay)
                if self._wait(delay):
                    return
                delay = min(delay * 2, self.max_backoff)

    def _watch_once(self) -> None:
        for event in self.client.watch(self.res, self.version, timeout_seconds=self.watch_timeout):
            if self.stop.is_set():
                return
            self.apply(event)

    def apply(self, event: Mapping[str, Any]) -> None:
        obj = event["object"]
        version = (obj.get("metadata") or {}).get("resourceVersion")
        kind = event.get("type")
        if kind in ("ADDED", "MODIFIED"):
            self.store.put(self.res.kind, clean(self.res, obj))
        elif kind == "DELETED":
            self.store.delete(self.res.kind, obj)
        if version:
            self.version = str(version)
