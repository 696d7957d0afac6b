"""Leader election through a coordination.k8s.io/v1 Lease, as client-go's leaderelection does it.

The leader renews ``spec.renewTime`` every ``retry_period`` seconds. Another replica takes the Lease
over once the record (holder and renewTime) has not changed for ``lease_duration`` seconds of *its own*
clock since it last saw it change (so clock skew between replicas does not matter), bumping
``leaseTransitions``. Every write is a guarded update (resourceVersion; a create for a missing Lease):
of two replicas racing, one gets 409 and stays a follower. A leader that has not renewed for
``renew_deadline`` seconds stops acting at once (``leading()`` turns False before another replica
can take over, since ``renew_deadline`` < ``lease_duration``).
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from optplan.controller.status import parse_time, rfc3339
from optplan.errors import ConflictError, KubeError

log = logging.getLogger(__name__)


class LeaseClient(Protocol):
    """What the elector needs of ``optplan.adapters.kube.KubeClient``."""

    def get_lease(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    def create_lease(self, namespace: str, name: str, spec: Mapping[str, Any],
                     annotations: Mapping[str, str] | None = None) -> dict[str, Any]: ...

    def update_lease(self, lease: Mapping[str, Any], spec: Mapping[str, Any],
                     annotations: Mapping[str, str] | None = None) -> dict[str, Any]: ...


def micro_time(t: float) -> str:
    """metav1.MicroTime: ``2026-07-30T10:00:00.000000Z``."""
    return dt.datetime.fromtimestamp(t, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(self, client: LeaseClient, namespace: str, name: str, identity: str, *,
                 clock: Callable[[], float], lease_duration: float = 15.0, renew_deadline: float = 10.0,
                 retry_period: float = 2.0, on_change: Callable[[bool], None] | None = None) -> None:
        if not 0 < retry_period < renew_deadline < lease_duration:
            raise ValueError("leader election needs 0 < retry period < renew deadline < lease duration")
        self.client = client
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.clock = clock
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.on_change = on_change
        self._lock = threading.Lock()
        self._renewed: float | None = None  # our clock, when we last renewed as the holder
        self._observed: tuple[Any, Any] | None = None  # (holder, renewTime) as last seen
        self._observed_at = 0.0
        self._was_leading = False
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None

    def leading(self) -> bool:
        """Whether this replica may act now: it renewed the Lease within ``renew_deadline``."""
        with self._lock:
            return self._renewed is not None and self.clock() - self._renewed < self.renew_deadline

    def holder(self) -> str | None:
        with self._lock:
            return str(self._observed[0]) if self._observed and self._observed[0] else None

    def tick(self) -> bool:
        """Acquire or renew once; whether this replica leads afterwards."""
        try:
            self._try()
        except ConflictError as e:
            log.info("lease %s/%s: %s; another replica wrote first", self.namespace, self.name, e)
        except KubeError as e:
            log.warning("lease %s/%s: %s", self.namespace, self.name, e)
        now_leading = self.leading()
        if now_leading != self._was_leading:
            self._was_leading = now_leading
            log.warning("%s %s the lease %s/%s", self.identity, "acquired" if now_leading else "lost",
                        self.namespace, self.name)
            if self.on_change is not None:
                self.on_change(now_leading)
        return now_leading

    def _try(self) -> None:
        now = self.clock()
        lease = self.client.get_lease(self.namespace, self.name)
        duration = max(1, round(self.lease_duration))
        if lease is None:
            first: dict[str, Any] = {"holderIdentity": self.identity, "leaseDurationSeconds": duration,
                                     "acquireTime": micro_time(now), "renewTime": micro_time(now),
                                     "leaseTransitions": 0}
            self.client.create_lease(self.namespace, self.name, first)
            self._won(now, first)
            return
        spec: dict[str, Any] = dict(lease.get("spec") or {})
        record = (spec.get("holderIdentity"), spec.get("renewTime"))
        with self._lock:
            if record != self._observed:
                self._observed, self._observed_at = record, now
            observed_at = self._observed_at
        holder = spec.get("holderIdentity")
        their_duration = spec.get("leaseDurationSeconds") or duration
        new: dict[str, Any]
        if holder == self.identity:
            new = {**spec, "renewTime": micro_time(now), "leaseDurationSeconds": duration}
            if parse_time(spec.get("renewTime")) is None or not self.leading():
                new.setdefault("acquireTime", micro_time(now))
        elif holder and now < observed_at + float(their_duration):
            with self._lock:
                self._renewed = None  # someone else holds it
            return
        else:
            new = {"holderIdentity": self.identity, "leaseDurationSeconds": duration, "acquireTime": micro_time(now),
                   "renewTime": micro_time(now), "leaseTransitions": int(spec.get("leaseTransitions") or 0) + 1}
        self.client.update_lease(lease, new)
        self._won(now, new)

    def _won(self, now: float, spec: Mapping[str, Any]) -> None:
        with self._lock:
            self._renewed = now
            self._observed = (spec.get("holderIdentity"), spec.get("renewTime"))
            self._observed_at = now

    # ---- in a thread ---------------------------------------------------------------------------

    def start(self) -> None:
        self.thread = threading.Thread(target=self._loop, name="leader-election", daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while not self.stop.is_set():
            self.tick()
            self.stop.wait(self.retry_period)

    def release(self) -> None:
        """Give the Lease up on shutdown (holder cleared), so a standby takes over at once."""
        if not self.leading():
            return
        try:
            lease = self.client.get_lease(self.namespace, self.name)
            if lease is not None and (lease.get("spec") or {}).get("holderIdentity") == self.identity:
                spec = {**lease["spec"], "holderIdentity": "", "leaseDurationSeconds": 1}
                self.client.update_lease(lease, spec)
        except KubeError as e:
            log.warning("lease %s/%s: cannot release it: %s", self.namespace, self.name, e)
        with self._lock:
            self._renewed = None


LAST_EXECUTE_TIME = "repack.volcano.sh/last-execute-completion-time"
LAST_EXECUTE_RUN = "repack.volcano.sh/last-execute-run"


class ExecuteRecord:
    """When the last Execute run that evicted pods finished (and its name), as two annotations on the
    controller's Lease, so the cooldown outlives the run (``ttlSecondsAfterFinished`` shorter than the
    cooldown, a ``kubectl delete``) and the process (a restart, the standby taking over).

    Why the Lease: the controller owns it already (the Role grants get and update on that one name, and
    create), it lives in the controller's namespace where no user deletes it with the runs, both replicas
    read it, and the elector keeps its annotations when it renews. Without ``--leader-elect`` the Lease
    holds the record alone (no holder). Writes are guarded by resourceVersion and retried on a conflict
    (the elector renews every 2 s); a later completion is never replaced by an earlier one.

    ``time_key`` and ``run_key`` name the two annotations: the auto-trigger records its last created run
    the same way under its own keys (``optplan.controller.autotrigger``)."""

    def __init__(self, client: LeaseClient, namespace: str, name: str, *, time_key: str = LAST_EXECUTE_TIME,
                 run_key: str = LAST_EXECUTE_RUN) -> None:
        self.client = client
        self.namespace = namespace
        self.name = name
        self.time_key = time_key
        self.run_key = run_key

    def last(self) -> tuple[float, str] | None:
        """(completion time, run name) of the last Execute run recorded, or None."""
        return self._parse(self.client.get_lease(self.namespace, self.name))

    def _parse(self, lease: Mapping[str, Any] | None) -> tuple[float, str] | None:
        ann = ((lease or {}).get("metadata") or {}).get("annotations") or {}
        when = parse_time(ann.get(self.time_key))
        return (when, str(ann.get(self.run_key) or "")) if when is not None else None

    def remember(self, when: float, run: str) -> None:
        """Record that ``run`` finished at ``when`` unless a later completion is recorded already."""
        for _ in range(5):
            lease = self.client.get_lease(self.namespace, self.name)
            known = self._parse(lease)
            if known is not None and known[0] >= when:
                return
            record = {self.time_key: rfc3339(when), self.run_key: run}
            try:
                if lease is None:
                    self.client.create_lease(self.namespace, self.name, {}, annotations=record)
                else:
                    meta = lease.get("metadata") or {}
                    self.client.update_lease(lease, dict(lease.get("spec") or {}),
                                             annotations={**(meta.get("annotations") or {}), **record})
                return
            except ConflictError:  # the elector renewed (or the other replica wrote) meanwhile: read again
                continue
        raise ConflictError(f"lease {self.namespace}/{self.name}: kept changing while the Execute record was written")
