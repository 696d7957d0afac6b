"""The control loop: informers feed the store, the leader reconciles, metrics and probes report.

A pass over every RepackRun runs when the store changed (a watch event), when a run asked to be looked
at again (a deadline, a cooldown, a backoff, a TTL), and at least every ``resync`` seconds; passes are at
least ``min_interval`` apart, so a storm of pod events costs one pass per interval, and a finished or
planned run costs a status read, never a plan. Ready once every informer has listed and the planners'
snapshot is built from what they listed; with leader election, a replica that does not hold the Lease
only watches (a hot standby) and acts the moment it acquires it. With ``admit`` settings, each pass also
runs the auto-trigger (``autotrigger.py``) after the runs are reconciled.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any, Protocol

from optplan.adapters.kube import RESOURCES
from optplan.controller import status as st
from optplan.controller.autotrigger import AdmitSettings, AutoTrigger, RunCreator, TriggerEvents
from optplan.controller.base import RUN, ClusterWriter, Events, ExecuteRecord, Settings, Watchdog, plan_deadline
from optplan.controller.events import Recorder
from optplan.controller.informer import Informer, Store, WatchClient
from optplan.controller.leader import LeaderElector
from optplan.controller.reconcile import Reconciler
from optplan.controller.schedconf import REFRESH, ConfReader, SchedulerConfSource

log = logging.getLogger(__name__)


class Client(WatchClient, ClusterWriter, RunCreator, ConfReader, Protocol):
    """``optplan.adapters.kube.KubeClient``, as the controller uses it."""


class Health(Events, Watchdog, TriggerEvents, Protocol):
    """``optplan.controller.metrics.Metrics``, as the controller uses it."""

    def set_ready(self, ready: bool) -> None: ...

    def leader(self, is_leader: bool) -> None: ...

    def run_phases(self, counts: dict[str, int]) -> None: ...


class Controller:
    def __init__(self, client: Client, settings: Settings | None = None, *, clock: Callable[[], float],
                 metrics: Health | None = None, elector: LeaderElector | None = None, watch_timeout: int = 300,
                 resync: float = 60.0, min_interval: float = 1.0, record: ExecuteRecord | None = None,
                 admit: AdmitSettings | None = None, admit_record: ExecuteRecord | None = None,
                 recorder: Recorder | None = None, scheduler_refresh: float = REFRESH) -> None:
        """``recorder``: Kubernetes Events for each run's decisions (``events.py``; None: none written);
        ``scheduler_refresh``: seconds between two reads of the cluster's scheduler ConfigMap and the device-share
        plugin's (``schedconf``)."""
        self.client = client
        self.store = Store()
        self.clock = clock
        self.metrics = metrics
        self.elector = elector
        self.resync = resync
        self.min_interval = min_interval
        self.informers = [Informer(client, res, self.store, watch_timeout=watch_timeout) for res in RESOURCES]
        # the cluster's vc-scheduler configuration and device-share ConfigMap (MIG geometries: the snapshot's
        # device modes), read as `optplan snapshot` reads them, again every minute
        self.scheduler = SchedulerConfSource(client, clock, scheduler_refresh)
        self.reconciler = Reconciler(self.store, client, settings, clock=clock, may_act=self.may_act,
                                     events=metrics, watchdog=metrics, record=record, recorder=recorder,
                                     scheduler=self.scheduler)
        # issue 15: runs created on its own for gangs pending by fragmentation (off unless ``admit``)
        self.trigger = None if admit is None else AutoTrigger(
            self.store, client, admit, cooldown=self.reconciler.settings.cooldown, clock=clock,
            snapshot=self.reconciler.snapshot, may_act=self.may_act, events=metrics, record=admit_record,
            execute_record=record, watchdog=metrics, deadline=plan_deadline(self.reconciler.settings.time_limit),
            scheduler=self.scheduler)
        self.stop = threading.Event()
        self.passes = 0

    def may_act(self) -> bool:
        return self.elector is None or self.elector.leading()

    # ---- once (tests, cron) --------------------------------------------------------------------

    def sync(self) -> None:
        """List every resource into the store (no watch)."""
        for inf in self.informers:
            inf.sync()
        self._ready()

    def run_once(self) -> float | None:
        """List everything, take the lease if leader election is on, and reconcile every run once."""
        self.sync()
        if self.elector is not None and not self.elector.tick():
            log.warning("not the leader (the Lease is held by %s): nothing reconciled", self.elector.holder())
            return None
        return self.pass_()

    def pass_(self) -> float | None:
        wait = self.reconciler.reconcile_all()
        if self.trigger is not None:
            more = self.trigger.pass_()
            if more is not None:
                wait = more if wait is None else min(wait, more)
        self.passes += 1
        self._report()
        return wait

    # ---- forever -------------------------------------------------------------------------------

    def run(self) -> None:
        """Watch and reconcile until ``stop`` is set."""
        for inf in self.informers:
            inf.start()
        if self.elector is not None:
            self.elector.start()
        try:
            self._loop()
        finally:
            for inf in self.informers:
                inf.stop.set()
            if self.elector is not None:
                self.elector.stop.set()
                self.elector.release()

    def _loop(self) -> None:
        due = 0.0  # when a pass is due without any change
        last = -float("inf")  # when the last pass started
        ready = False
        while not self.stop.is_set():
            if self.metrics is not None:
                self.metrics.heartbeat()
            if not ready:
                ready = self.store.synced()
                if ready:
                    self._warm()
                    self._ready()
                else:
                    self.stop.wait(0.05)
                continue
            now = self.clock()
            if not self.may_act():  # a standby: the store stays current, nothing is reconciled
                self.store.take_changes()
                if self.metrics is not None:
                    self.metrics.run_phases(self._phases())
                due = 0.0  # pass at once when leading
                self.stop.wait(self.elector.retry_period if self.elector is not None else 1.0)
                continue
            if (self.store.changed.is_set() or now >= due) and now - last >= self.min_interval:
                self.store.take_changes()
                last = now
                wait = self.pass_()
                due = self.clock() + min(wait if wait is not None else self.resync, self.resync)
                continue
            if self.store.changed.is_set():  # changes arrived within min_interval of the last pass
                self.stop.wait(max(self.min_interval - (self.clock() - last), 0.01))
            else:
                self._wait(min(max(due - self.clock(), 0.01), 1.0))

    def _wait(self, seconds: float) -> None:
        """Until a watch event or ``seconds``."""
        self.store.changed.wait(seconds)

    def _warm(self) -> None:
        """Build the planners' snapshot once the caches are synced, before reporting ready: every object is
        parsed once here (about 15 s at 10,000 nodes and 80,000 pods), so the first DryRun does not pay for
        it; later builds re-parse only the objects that changed."""
        try:
            self.reconciler.snapshot()
        except Exception as e:  # bad input fails the run that reads it, with its condition, not the loop
            log.warning("the snapshot was not built ahead of the first run: %s", e)

    def _ready(self) -> None:
        if self.metrics is not None:
            self.metrics.set_ready(True)

    def _report(self) -> None:
        if self.metrics is not None:
            self.metrics.run_phases(self._phases())
            if self.elector is not None:
                self.metrics.leader(self.elector.leading())

    def _phases(self) -> dict[str, int]:
        return dict(Counter(st.phase_of(o) or "" for o in self.store.all(RUN)))

    def summary(self) -> list[dict[str, Any]]:
        """Every run as the store has it: name, mode, phase, Complete's reason and message."""
        out = []
        for obj in self.store.all(RUN):
            status = obj.get("status") or {}
            cond: dict[str, Any] = next((c for c in status.get("conditions") or [] if c.get("type") == "Complete"), {})
            out.append({"name": obj["metadata"]["name"], "mode": (obj.get("spec") or {}).get("mode", "DryRun"),
                        "phase": status.get("phase") or "", "reason": cond.get("reason", ""),
                        "message": cond.get("message", "")})
        return out
