"""What every step of the reconciler shares: its settings, the ports it talks through (the cluster's writes,
the metrics, the watchdog, the Execute record) and ``Steps``, which holds them and writes the journal.

A run is read once per object (``status.read``: the object as stored and its status typed); a step writes
a typed change through ``Steps._write`` (``status.patch``: a merge patch on ``/status`` guarded by the
run's resourceVersion, nothing sent when nothing changes) and goes on with the run as written, read again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any, Protocol

from optplan.adapters.kube import Answer, NotFoundError
from optplan.adapters.kubefile import ParseCache, load_objects
from optplan.controller import status as st
from optplan.controller.events import NORMAL, WARNING, Recorder
from optplan.controller.informer import Store
from optplan.controller.schedconf import SchedulerConfSource
from optplan.controller.status import RunView
from optplan.models.execute import ExecutionResult
from optplan.models.journal import RelocationChange, StatusChange
from optplan.models.repack import Condition, RepackRun
from optplan.models.schedconf import SchedulerConf
from optplan.models.snapshot import Snapshot
from optplan.solvers.execute import steps as execute_mod

log = logging.getLogger("optplan.controller.reconcile")  # one logger for the reconciler's steps

RUN = "RepackRun"
POD = "Pod"


@dataclass(frozen=True)
class Settings:
    """How the controller plans and how long it waits (seconds)."""

    solver: str = "auto"
    time_limit: float = 30.0
    workers: int = 1
    deterministic: bool = False
    cooldown: float = 600.0
    """After an Execute run that evicted pods, before the next may start. Ten minutes, as
    cluster-autoscaler's --scale-down-delay-after-add: long enough for the scheduler queue and the
    workloads to settle, so the next plan reads a cluster at rest rather than one still reacting."""
    eviction_deadline: float = 600.0
    """How long an eviction refused with 429 (a PodDisruptionBudget) is asked again before Rejected."""
    replacement_deadline: float = 600.0
    """How long after its victim's eviction a replacement may stay unbound before TimedOut."""
    retry: float = 2.0
    """First backoff of a refused eviction or a failed pass; doubles up to ``max_retry``."""
    max_retry: float = 60.0
    verify_time_limit: float = 10.0


class ClusterWriter(Protocol):
    """The writes the reconciler makes (``optplan.adapters.kube.KubeClient`` has them)."""

    def get_repack_run(self, name: str) -> dict[str, Any]: ...

    def patch_repack_run_status(self, name: str, status: Mapping[str, Any], resource_version: str) -> dict[str, Any]:
        ...

    def evict(self, namespace: str, name: str, *, uid: str | None, grace_period_seconds: int | None) -> Answer: ...

    def patch_pod_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> dict[str, Any]: ...

    def patch_pod_metadata(self, namespace: str, name: str, metadata: Mapping[str, Any]) -> dict[str, Any]: ...

    def read_pod(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    def delete_repack_run(self, name: str, uid: str | None) -> bool: ...


class Events(Protocol):
    """What the reconciler reports (``optplan.controller.metrics.Metrics`` has it)."""

    def eviction(self, result: str) -> None: ...

    def replacement(self, outcome: str) -> None: ...

    def plan_seconds(self, seconds: float) -> None: ...

    def plan_result(self, solver: str, status: str, *, freed: int, bound: int | None) -> None: ...

    def run_finished(self, phase: str, reason: str) -> None: ...

    def eviction_refused(self, reason: str) -> None: ...


class Watchdog(Protocol):
    """Liveness (``optplan.controller.metrics.Metrics`` has it): beats on progress, and a step that blocks
    the loop (a plan) is announced with its deadline."""

    def heartbeat(self) -> None: ...

    def expect(self, seconds: float) -> AbstractContextManager[None]: ...


class ExecuteRecord(Protocol):
    """Where the last Execute's completion outlives the run and the process
    (``optplan.controller.leader.ExecuteRecord``: annotations on the Lease)."""

    def last(self) -> tuple[float, str] | None: ...

    def remember(self, when: float, run: str) -> None: ...


def plan_deadline(time_limit: float) -> float:
    """How long one plan (or verify) may block the control loop, in seconds: the planner's wall-clock cap
    (3x the time limit: ``auto``'s search, ``--deterministic``) and 60 s to build the live snapshot and
    check the plan (15 s at 80,000 pods). /healthz allows its ``stale_after`` plus this while it runs."""
    return 3.0 * time_limit + 60.0


class NotLeading(Exception):
    """This replica lost the lease: stop acting at once."""


FINISHED_EVENTS = {execute_mod.COMPLETED: "Completed", execute_mod.ALTERNATIVE: "CompletedWithAlternativePlacement"}
"""An Execute run's successful outcomes (Complete's reason) and the Event reasons that tell them."""


class Steps:
    """The reconciler's collaborators and the steps every concern shares: reading a run, writing its journal,
    finishing it, its TTL, and telling (metrics, Events). ``optplan.controller.reconcile.Reconciler`` is one."""

    def __init__(self, store: Store, api: ClusterWriter, settings: Settings | None = None, *,
                 clock: Callable[[], float], may_act: Callable[[], bool] = lambda: True,
                 events: Events | None = None, watchdog: Watchdog | None = None,
                 record: ExecuteRecord | None = None, recorder: Recorder | None = None,
                 scheduler: SchedulerConfSource | None = None) -> None:
        self.store = store
        self.scheduler = scheduler  # the cluster's vc-scheduler configuration (None: seed 002's)
        self.recorder = recorder  # Kubernetes Events telling each run's story (None: none written)
        self.record = record
        self.watchdog = watchdog
        self.api = api
        self.settings = settings or Settings()
        self.clock = clock
        self.may_act = may_act
        self.events = events
        self._refusals: dict[tuple[str, str], int] = {}  # (run uid, relocation key) -> 429s in a row
        self._unsuggested: dict[tuple[str, str], tuple[int, ...]] = {}  # (run uid, key) -> snapshot version
        # at which nominate found no node for its replacement (phase Scheduling): asked again on a change
        self._failures: dict[str, int] = {}  # run name -> failed passes in a row
        self._snapshot: tuple[tuple[int, ...], Snapshot] | None = None
        self._parsed: ParseCache = {}  # objects parsed once each: a pod event re-parses one pod, not all
        self._views: dict[str, RunView] = {}  # run name -> the run last read: its status is typed once per
        # object, so a pass over finished runs with long journals costs no parsing while they do not change
        self.plans = 0  # plans made by this reconciler (a test counts re-planning)

    def snapshot(self) -> Snapshot:  # pragma: no cover - the reconciler's
        raise NotImplementedError

    def snapshot_version(self) -> tuple[int, ...]:
        """Changes when what the snapshot is built from changes: an object the informers watch (RepackRuns
        left out) or a ConfigMap of ``scheduler`` (``SchedulerConfSource.version``)."""
        return (*self.store.snapshot_version(), self.scheduler.version if self.scheduler is not None else 0)

    def scheduler_conf(self) -> SchedulerConf:
        """The vc-scheduler configuration placement's rules follow now (``schedconf``; seed 002's without a
        source)."""
        return self.scheduler.current() if self.scheduler is not None else SchedulerConf()

    def now(self) -> float:
        return self.clock()

    def _beat(self) -> None:
        if self.watchdog is not None:
            self.watchdog.heartbeat()

    def _blocking(self, time_limit: float) -> AbstractContextManager[None]:
        """A plan or verify: the watchdog knows it runs and its deadline (``plan_deadline``)."""
        return self.watchdog.expect(plan_deadline(time_limit)) if self.watchdog is not None else nullcontext()

    # ---- reading -------------------------------------------------------------------------------

    def _fresh(self, name: str) -> dict[str, Any] | None:
        try:
            obj = self.api.get_repack_run(name)
        except NotFoundError:
            return None
        self.store.put(RUN, obj)
        return obj

    def _view(self, obj: dict[str, Any]) -> RunView:
        """The run ``obj`` (as stored), its status read on first use and kept while the object is the same."""
        view = RunView(obj)
        held = self._views.get(view.name)
        if held is not None and held.obj is obj:
            return held
        self._views[view.name] = view
        return view

    def _read(self, obj: dict[str, Any]) -> RunView:
        """``_view``, its status read now: an ``InputError`` naming the field when it cannot be read."""
        view = self._view(obj)
        view.status  # noqa: B018 - read now
        return view

    @staticmethod
    def _parse(view: RunView) -> RepackRun:
        """The run's spec as the planners read it (an ``InputError`` when they cannot)."""
        loaded = load_objects([view.obj], f"RepackRun/{view.name}")
        (run,) = loaded.runs.values()
        return run

    # ---- writing -------------------------------------------------------------------------------

    def _send(self, obj: Mapping[str, Any], change: StatusChange) -> dict[str, Any] | None:
        """Patch the run's status with ``change`` (``status.patch``); the written object, also stored, or None
        when nothing was sent (nothing would change)."""
        if not self.may_act():
            raise NotLeading()
        patch = st.patch(obj, change, self.now())
        if patch is None:
            return None
        run = RunView(dict(obj))  # its name and resourceVersion (the precondition)
        written = self.api.patch_repack_run_status(run.name, patch, run.resource_version)
        self.store.put(RUN, written)
        self._beat()  # progress: a journal step written
        return written

    def _write_raw(self, obj: Mapping[str, Any], change: StatusChange) -> dict[str, Any]:
        """``_send`` for a run whose status may not be readable (the failure path): the object written."""
        written = self._send(obj, change)
        return dict(obj) if written is None else written

    def _write(self, view: RunView, change: StatusChange) -> RunView:
        """``_send``, then the run as written (itself when nothing was sent), its status read on first use."""
        written = self._send(view.obj, change)
        return view if written is None else self._view(written)

    def _journal(self, view: RunView, *entries: RelocationChange) -> RunView:
        """Journal entries written (merged by key into the stored ones)."""
        return self._write(view, StatusChange(relocations=entries))

    def _finish(self, view: RunView, phase: str, reason: str, message: str, *,
                plan: dict[str, Any] | None = None, result: ExecutionResult | None = None,
                relocations: tuple[RelocationChange, ...] | None = None,
                more: tuple[Condition, ...] = ()) -> float | None:
        """``more``: conditions besides Complete (a goal run's GoalsMet)."""
        now = st.rfc3339(self.now())
        written = self._write(view, StatusChange(
            phase=phase, plan=plan, result=result, relocations=relocations,
            conditions=(st.cond(st.COMPLETE, True, reason, message), *more), completion_time=now,
            start_time=view.head.start_time or now))
        log.info("RepackRun %s: %s (%s)", view.name, phase, reason)
        if self.events is not None:
            self.events.run_finished(phase, reason)
        told = FINISHED_EVENTS.get(reason)
        if phase == st.FAILED:
            self._tell(written.obj, WARNING, "Failed", "Complete", f"{reason}: {message}")
        elif told is not None:
            self._tell(written.obj, NORMAL, told, "Complete", message)
        return self._ttl(written)

    # ---- TTL -----------------------------------------------------------------------------------

    def _ttl(self, view: RunView) -> float | None:
        ttl = view.ttl
        if ttl is None:
            return None
        done = st.parse_time(view.head.completion_time)
        if done is None:  # finished by a writer that records no time (the CLI): count from now
            self._write(view, StatusChange(completion_time=st.rfc3339(self.now())))
            return float(ttl)
        due = done + ttl
        if self.now() < due:
            return due - self.now()
        if not self.may_act():
            raise NotLeading()
        if self.api.delete_repack_run(view.name, view.uid):
            log.info("RepackRun %s: deleted %d s after it finished (ttlSecondsAfterFinished)", view.name, ttl)
        self.store.delete(RUN, view.obj)
        return None

    # ---- telling -------------------------------------------------------------------------------

    def _remember(self, when: float, run: str) -> None:
        """Record an Execute's completion (a failure is logged: the run's completionTime holds it while the
        run exists, and the next gate records it again)."""
        if self.record is None:
            return
        try:
            self.record.remember(when, run)
        except Exception as e:
            log.warning("cannot record RepackRun %s's completion for the cooldown: %s", run, e)

    def _event(self, what: str, value: str) -> None:
        if self.events is not None:
            getattr(self.events, what)(value)

    def _tell(self, obj: Mapping[str, Any], type_: str, reason: str, action: str, note: str, *,
              related: Mapping[str, Any] | None = None) -> None:
        """A Kubernetes Event on ``obj`` (never fails the pass: the recorder logs and counts its failures)."""
        if self.recorder is None:
            return
        try:
            self.recorder.emit(obj, type_, reason, action, note, related=related)
        except Exception:  # pragma: no cover - the recorder guards its writes; this guards a bug in it
            log.exception("Event %s on %s not recorded", reason, RunView(dict(obj)).name)

    def _refused(self, obj: Mapping[str, Any], victim: Mapping[str, Any], key: str, reason: str, note: str) -> None:
        """An eviction refused for now (asked again): counted by reason, and an Event."""
        if self.events is not None:
            self.events.eviction_refused(reason)
        self._tell(obj, WARNING, "EvictionRefused", "Evict", note, related=victim)
