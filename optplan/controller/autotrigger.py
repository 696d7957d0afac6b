"""The controller acting on its own (issue 15, last paragraph): when a gang has been pending by fragmentation
for ``after`` seconds, create a RepackRun whose admit goal names it, at most once per cooldown.

"Pending by fragmentation" is ``optplan.solvers.placement.pending``'s verdict FRAGMENTATION: the gang's
minimum fits the cluster's free R in total and its queue's quota, the gang fits an emptied cluster, yet the
placement greedy cannot place it now — idle R in the wrong places keeps it out, which moving pods can fix.
A gang that fits, or is short of quota or of R in total, never triggers anything: no Repack helps it.

What is created (a plain object through the API; the reconciler then plans it like any other run)::

    metadata:
      name: admit-<namespace>-<job>-<hash>       # deterministic: DNS-1123, at most 63 characters
      labels: {optplan.io/trigger: pending-by-fragmentation, optplan.io/admit-job: <namespace>.<job>}
      annotations: {optplan.io/admit-job: <namespace>/<job>, optplan.io/admit-attempt: "<n>",
                    optplan.io/pending-by-fragmentation-since: <RFC 3339>}
    spec: {mode: DryRun, goals: [{resource: R, admit: {jobs: [<namespace>/<job>]}}]}

The rules, and why:

- **Pending for** counts from when this process first saw the gang pending by fragmentation, kept in
  memory: a gang pending for quota for an hour that has just become blocked by fragmentation has not
  waited an hour for a Repack. The price: a restart or a failover starts every clock from zero, so a run
  comes at most ``after`` seconds later than it would have, never earlier. A gang that stops being
  pending by fragmentation (it started, or now waits for quota) loses its clock.
- **At most once per cooldown** (``--cooldown``, shared with Execute): no run is created within
  ``cooldown`` seconds of the last one created (any job) nor of the last Execute that evicted pods (the
  cluster settles first; both times are read from the controller's Lease, where this trigger records its
  own under ``optplan.io/last-autotrigger-time``, so the cooldown outlives a restart and the runs'
  deletion). With a cooldown of 0, every due gang gets its run in the same pass.
- **One open run per gang**: never a second run for a gang while an earlier auto-created run for it has
  not finished. The attempt number (one more than the highest on that gang's runs) goes into the name's
  hash, so a create retried after a failure, or by another leader, meets its own object (409) instead
  of making a second one.
- **The oldest first**: of the gangs due, the one pending longest (then by namespace/name).
- **Only the leader acts**, and only a leader evaluates (the standby keeps no clocks).
- **Never a run without its goal**: an API server whose RepackRun CRD predates the admit goal prunes it,
  leaving a plain Repack run; such a run is deleted at once and the trigger stops, saying why.
- **Cost**: the verdicts are computed again only when an object the planners read changed, and then at
  most once every ``recheck`` seconds (each gang is placed by the greedy once, twice when it does not fit);
  a gang found due is judged on a fresh snapshot before its run is created.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, Protocol

from optplan.controller import status as st
from optplan.controller.base import RUN, ExecuteRecord, Watchdog
from optplan.controller.informer import Store
from optplan.controller.schedconf import SchedulerConfSource
from optplan.errors import ConflictError
from optplan.models.schedconf import SchedulerConf
from optplan.models.snapshot import Snapshot
from optplan.solvers.placement.pending import FRAGMENTATION, PendingGang, pending_gangs

log = logging.getLogger(__name__)

TRIGGER_LABEL = "optplan.io/trigger"
TRIGGER = "pending-by-fragmentation"
JOB_LABEL = "optplan.io/admit-job"
"""Label (``<namespace>.<job>``, label-safe) and annotation (``<namespace>/<job>``, exact) of the gang."""
ATTEMPT = "optplan.io/admit-attempt"
SINCE = "optplan.io/pending-by-fragmentation-since"
LAST_TIME = "optplan.io/last-autotrigger-time"
LAST_RUN = "optplan.io/last-autotrigger-run"
"""The Lease annotations recording the last run this trigger created (``leader.ExecuteRecord``'s shape)."""
MODES = ("DryRun", "Execute")
DEFAULT_RESOURCE = "nvidia.com/gpu"

_NAME_MAX = 63
_HASH = 8
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


@dataclass(frozen=True)
class AdmitSettings:
    """When and what the controller creates on its own for gangs pending by fragmentation."""

    after: float
    """Seconds a gang must have been pending by fragmentation (0: as soon as seen)."""
    mode: str = "DryRun"
    """The created run's ``spec.mode``: Execute only when asked for explicitly."""
    resource: str = DEFAULT_RESOURCE
    """R: the resource whose fragmentation keeps gangs out, and the created goal's resource."""
    ttl: int | None = None
    """``spec.ttlSecondsAfterFinished`` of the created runs (None: kept until deleted)."""
    recheck: float = 30.0
    """Least seconds between two evaluations while the cluster keeps changing."""

    def __post_init__(self) -> None:
        if not self.after >= 0:
            raise ValueError(f"after must be 0 or more seconds, not {self.after!r}")
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not {self.mode!r}")


class RunCreator(Protocol):
    """``optplan.adapters.kube.KubeClient``'s create (ConflictError when the name exists) and delete."""

    def create_repack_run(self, run: Mapping[str, Any]) -> dict[str, Any]: ...

    def delete_repack_run(self, name: str, uid: str | None) -> bool: ...


class TriggerEvents(Protocol):
    """What the trigger reports (``optplan.controller.metrics.Metrics`` has it)."""

    def autotrigger_run(self, mode: str) -> None: ...


def job_label(namespace: str, name: str) -> str:
    """``<namespace>.<name>`` as a label value: at most 63 characters of ``[A-Za-z0-9_.-]``, alphanumeric at
    both ends; a longer one is cut and ends with a hash of the whole key, so it stays unique."""
    text = re.sub(r"[^A-Za-z0-9_.-]", "-", f"{namespace}.{name}")
    if len(text) <= 63 and _LABEL_VALUE.match(text):
        return text
    head = text[:63 - _HASH - 1].strip("-_.")
    return f"{head}-{_digest(f'{namespace}/{name}')}" if head else _digest(f"{namespace}/{name}")


def run_name(namespace: str, name: str, attempt: int) -> str:
    """``admit-<namespace>-<name>-<hash of namespace/name and attempt>``: a DNS-1123 label (lowercase
    alphanumerics and '-', at most 63 characters), the same for the same gang and attempt."""
    slug = re.sub(r"-+", "-", re.sub(r"[^a-z0-9]", "-", f"{namespace}-{name}".lower()))
    slug = slug[:_NAME_MAX - len("admit-") - _HASH - 1].strip("-")
    return f"admit-{slug}-{_digest(f'{namespace}/{name}#{attempt}')}" if slug else \
        f"admit-{_digest(f'{namespace}/{name}#{attempt}')}"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:_HASH]


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _labels(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    labels = _meta(obj).get("labels")
    return labels if isinstance(labels, Mapping) else {}


def _attempt(obj: Mapping[str, Any]) -> int:
    annotations = _meta(obj).get("annotations")
    text = str((annotations if isinstance(annotations, Mapping) else {}).get(ATTEMPT) or "")
    return int(text) if text.isascii() and text.isdigit() and len(text) < 10 else 0


class AutoTrigger:
    """Creates admit runs for gangs pending by fragmentation (see the module docstring)."""

    def __init__(self, store: Store, api: RunCreator, settings: AdmitSettings, *, cooldown: float,
                 clock: Callable[[], float], snapshot: Callable[[], Snapshot],
                 may_act: Callable[[], bool] = lambda: True, events: TriggerEvents | None = None,
                 record: ExecuteRecord | None = None, execute_record: ExecuteRecord | None = None,
                 watchdog: Watchdog | None = None, deadline: float = 300.0,
                 scheduler: SchedulerConfSource | None = None) -> None:
        self.store = store
        self.scheduler = scheduler  # the cluster's vc-scheduler configuration (None: seed 002's)
        self.api = api
        self.settings = settings
        self.cooldown = cooldown
        self.clock = clock
        self.snapshot = snapshot
        self.may_act = may_act
        self.events = events
        self.record = record  # this trigger's last creation, on the Lease
        self.execute_record = execute_record  # the last Execute's completion, on the Lease
        self.watchdog = watchdog  # an evaluation blocks the loop like a plan: announced with ``deadline``
        self.deadline = deadline
        self.since: dict[str, float] = {}  # gang key -> when first seen pending by fragmentation
        self._gangs: dict[str, PendingGang] = {}
        self._evaluated: tuple[tuple[int, ...], float] | None = None  # (snapshot and configuration versions, when)
        self._last: tuple[float, str] | None = None  # (when, run name) of this process's last creation
        self.off: str | None = None  # why the trigger stopped acting (the CRD drops the admit goal)

    # ---- the pass ------------------------------------------------------------------------------

    def pass_(self) -> float | None:
        """Evaluate and create what is due; the seconds until a pass is due again without any change
        (None: nothing to wait for). Never raises: a failure is logged and retried a minute later."""
        if not self.may_act() or self.off is not None:
            return None
        try:
            return self._pass(self.clock())
        except Exception as e:  # the trigger never stops the controller
            log.warning("pending gangs: the auto-trigger failed: %s: %s", type(e).__name__, e)
            return 60.0

    def _pass(self, now: float) -> float | None:
        waits = [w for w in (self._evaluate(now),) if w is not None]
        due, later = self._due(now)
        waits += later
        if due:
            blocked = self._cooldown_until(now)
            if blocked is not None:
                log.info("pending gangs: %s due; none created before %s (cooldown after %s)",
                         ", ".join(due), st.rfc3339(blocked[0]), blocked[1])
                waits.append(blocked[0] - now)
                due = []
            else:  # judged on the live state before acting
                self._evaluate(now, fresh=True)
                due, _ = self._due(now)
        for key in due:
            if not self.may_act():
                break
            self._create(self._gangs[key], now)
            if self.cooldown > 0:
                waits.append(self.cooldown)
                break
        return min(waits) if waits else None

    def _evaluate(self, now: float, fresh: bool = False) -> float | None:
        """Compute the verdicts again if the cluster changed since they were computed, at most every
        ``recheck`` seconds unless ``fresh``; the seconds until a deferred evaluation, or None."""
        conf = self.scheduler.current() if self.scheduler is not None else SchedulerConf()
        version = (*self.store.snapshot_version(), self.scheduler.version if self.scheduler is not None else 0)
        if self._evaluated is not None:
            seen, when = self._evaluated
            if seen == version:
                return None
            if not fresh and now < when + self.settings.recheck:
                return when + self.settings.recheck - now
        with self.watchdog.expect(self.deadline) if self.watchdog is not None else nullcontext():
            found = pending_gangs(self.snapshot(), self.settings.resource, scheduler=conf)
        gangs = {g.key: g for g in found if g.verdict == FRAGMENTATION}
        for key in sorted(set(gangs) - set(self.since)):
            log.info("pending gangs: %s is pending by fragmentation of %s: %s", key, self.settings.resource,
                     gangs[key].reason)
        self.since = {key: self.since.get(key, now) for key in sorted(gangs)}
        self._gangs = gangs
        self._evaluated = (version, now)
        return None

    def _due(self, now: float) -> tuple[list[str], list[float]]:
        """Gangs due for a run (the oldest first) with none open, and the seconds until each other is due."""
        due: list[str] = []
        later: list[float] = []
        for key in sorted(self.since, key=lambda k: (self.since[k], k)):
            at = self.since[key] + self.settings.after
            if now < at:
                later.append(at - now)
            elif self._open_run(self._gangs[key]) is None:
                due.append(key)
        return due, later

    # ---- the rules -----------------------------------------------------------------------------

    def _runs_for(self, gang: PendingGang) -> list[dict[str, Any]]:
        """The runs this trigger created for the gang (by their labels)."""
        label = job_label(gang.namespace, gang.name)
        return [r for r in self.store.all(RUN)
                if _labels(r).get(TRIGGER_LABEL) == TRIGGER and _labels(r).get(JOB_LABEL) == label]

    def _open_run(self, gang: PendingGang) -> str | None:
        """An auto-created run for the gang that has not finished (nor is being deleted), or None."""
        for r in self._runs_for(gang):
            if st.phase_of(r) not in st.FINISHED and not _meta(r).get("deletionTimestamp"):
                return str(_meta(r).get("name"))
        return None

    def _cooldown_until(self, now: float) -> tuple[float, str] | None:
        """(end of the cooldown, what started it) while it runs, or None. The last action is the latest of
        this trigger's creations (in memory, on the Lease, and the labelled runs' creation times) and the
        last Execute's completion (on the Lease)."""
        last: list[tuple[float, str]] = []
        if self._last is not None:
            last.append((self._last[0], f"RepackRun {self._last[1]} was created"))
        for r in self.store.all(RUN):
            created = st.parse_time(_meta(r).get("creationTimestamp"))
            if _labels(r).get(TRIGGER_LABEL) == TRIGGER and created is not None:
                last.append((created, f"RepackRun {_meta(r).get('name')} was created"))
        if not last or max(last)[0] + self.cooldown <= now:  # the Lease is read only when nothing here blocks
            for record, what in ((self.record, "was created"), (self.execute_record, "finished executing")):
                known = record.last() if record is not None else None
                if known is not None:
                    last.append((known[0], f"RepackRun {known[1]} {what}"))
        if not last:
            return None
        when, what = max(last)
        until = when + self.cooldown
        return (until, f"{what} at {st.rfc3339(when)}") if now < until else None

    # ---- acting --------------------------------------------------------------------------------

    def _create(self, gang: PendingGang, now: float) -> None:
        attempt = 1 + max((_attempt(r) for r in self._runs_for(gang)), default=0)
        name = run_name(gang.namespace, gang.name, attempt)
        s = self.settings
        spec: dict[str, Any] = {"mode": s.mode, "goals": [{"resource": s.resource, "admit": {"jobs": [gang.key]}}]}
        if s.ttl is not None:
            spec["ttlSecondsAfterFinished"] = s.ttl
        run = {"metadata": {"name": name,
                            "labels": {TRIGGER_LABEL: TRIGGER, JOB_LABEL: job_label(gang.namespace, gang.name)},
                            "annotations": {JOB_LABEL: gang.key, ATTEMPT: str(attempt),
                                            SINCE: st.rfc3339(self.since[gang.key])}},
               "spec": spec}
        try:
            created = self.api.create_repack_run(run)
        except ConflictError:  # made already (a retried create, another leader): it counts, nothing more
            log.info("pending gangs: RepackRun %s for %s exists already", name, gang.key)
        else:
            if not _names(created, gang.key):
                self._refused(created)
                return
            self.store.put(RUN, created)
            log.warning("pending gangs: %s pending by fragmentation since %s: created %s RepackRun %s", gang.key,
                        st.rfc3339(self.since[gang.key]), s.mode, name)
            if self.events is not None:
                self.events.autotrigger_run(s.mode)
        self._last = (now, name)
        if self.record is not None:
            try:
                self.record.remember(now, name)
            except Exception as e:  # the run's creationTimestamp holds it while the run exists
                log.warning("cannot record RepackRun %s's creation for the cooldown: %s", name, e)

    def _refused(self, created: Mapping[str, Any]) -> None:
        """The API server dropped the admit goal (an installed CRD older than the goal prunes it): the run
        would be a plain Repack — an Execute would move pods for nothing the operator asked. It is deleted
        at once (nothing has planned it: the reconciler runs before the trigger in a pass) and the trigger
        stops until the controller restarts with the CRD updated."""
        name = str(_meta(created).get("name") or "")
        uid = _meta(created).get("uid")
        self.off = (f"the API server dropped spec.goals[].admit from RepackRun {name} (the installed RepackRun "
                    f"CRD predates the admit goal: apply crds/ again); the auto-trigger is off")
        log.error("pending gangs: %s", self.off)
        self.api.delete_repack_run(name, str(uid) if uid else None)


def _names(run: Mapping[str, Any], key: str) -> bool:
    """Whether the run's spec still has an admit goal naming ``key``."""
    goals = (run.get("spec") or {}).get("goals") or []
    return any(key in ((g.get("admit") or {}).get("jobs") or []) for g in goals if isinstance(g, Mapping))
