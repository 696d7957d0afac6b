"""The reconciler: one RepackRun at a time, level-triggered and idempotent, with its status as the journal.

Each pass reads the run from the store and decides the next step from its status alone; it writes the
status (a merge patch on ``/status`` guarded by the run's resourceVersion; on 409 it reads the run again
and starts the pass over) and only then acts. A crash at any instant leaves a status from which the next
pass, in this process or another, carries on without repeating an act that matters.

DryRun: planned once on the live state (a phase set means never again); the status is the plan.

Execute (seed 000, 步骤五 and 步骤六), each step journaled before the next:

1. Serial: while another Execute run is Running, or an older one waits its turn, the run stays Pending
   with ``AnotherRunActive``; within ``cooldown`` seconds of the last Execute run that evicted a pod,
   ``ExecuteCooldownActive``. That completion is also recorded on the controller's Lease (``record``,
   ``optplan.controller.leader.ExecuteRecord``), so the cooldown survives the run's deletion (a TTL
   shorter than the cooldown) and a restart; a finished run newer than the record is recorded by the gate.
2. Re-plan on the live state (a DryRun's plan is never reused); a plan not recommended finishes the
   run as a DryRun would (Succeeded with the planner's reason; no cooldown follows, nothing moved).
3. ``status.plan`` and one ``status.relocations[]`` entry per planned move (``plannedNodeName`` fixed
   from then on, ``victimPodUID``, eviction and placement phases Pending) in one write, before any eviction.
4. Evictions, one at a time, node by node in the plan's order of freed nodes (pods by namespace/name
   within a node): a run stopped part-way (deleted, a PDB) has emptied whole nodes rather than a few pods
   on each. A node's evictions begin only once every relocation of the nodes before it has settled (its
   replacement bound, here or elsewhere, or its eviction rejected or skipped), so at most one node's pods
   are disrupted at a time; once a replacement of an earlier node has timed out, the pods of later nodes
   are ``Skipped`` (the cluster is not absorbing the moves: nothing more is disrupted). Each is journaled
   ``Evicting`` before the policy/v1 Eviction call, with ``deleteOptions.preconditions.uid`` set to
   ``victimPodUID`` so a pod recreated under the victim's name is never evicted, then ``Evicted``. A pass
   that finds ``Evicting`` (a crash between call and journal) looks at the pod: gone, terminating or
   another UID means Evicted; the same pod is asked again, which the UID precondition makes safe. A 409
   from the call is read from the pod as the API server has it now (``read_pod``): gone, terminating or
   another UID (the UID precondition failed) is Evicted; the same pod still there (another conflict) is
   asked again like a 429. A 429 (a PodDisruptionBudget) is asked again with backoff until
   ``eviction_deadline`` after the first ask, then the relocation is ``Rejected`` with the API's message
   and the other pods of its node are ``Skipped`` (the node cannot be freed; they stay); any other refusal
   (403, a 500 when two budgets match the pod) is retried by the failing pass until the same deadline,
   then Rejected with its message. Only journaled victims are ever evicted, so never more than the plan,
   which keeps within maxPerRun (the independent validator checked it).
5. Replacements, matched as ``verify`` matches them: an unbound one gets ``status.nominatedNodeName``
   (through pods/status) from ``nominate``, journaled first as ``selectedNodeName`` (phase Nominated; no
   suggestion: Scheduling, asked again on every later pass after an object the planners read changed,
   until a node is suggested, the pod binds or it times out); once bound, ``actualNodeName`` (Bound, or
   BoundElsewhere off the planned node). Not bound ``replacement_deadline`` seconds after the eviction:
   TimedOut.
6. When every relocation has settled: ``verify`` on the live state gives ``status.result``; the run
   finishes ``ExecutionCompleted``, ``ExecutionCompletedWithAlternativePlacement`` (Succeeded) or
   ``ExecutionGoalNotReached`` (Failed: a planned node still holds the resource, an eviction was
   rejected, or a replacement timed out), with ``completionTime``.

Liveness: the reconciler beats its ``watchdog`` after each run and each journal write, and announces
each plan and verify with its deadline (``plan_deadline``: 3x the time limit + 60 s), during which
/healthz tolerates the silence.

A run being deleted is not acted on: its next journal write fails (404) and no eviction follows; moves
made are not rolled back. A finished run with ``ttlSecondsAfterFinished`` is deleted that long after
``completionTime``. A RepackRun the planner cannot read finishes Failed with ``InvalidSpec``; any other
exception is logged, recorded as condition ``Reconciled=False`` and retried with backoff. A plan refused
for the run's own goals (a field of its spec naming what the cluster does not have, or a networkTopology
that cannot be mapped) finishes it as an unreadable spec does: Failed, ``InvalidSpec``, naming the field.

Events (``events.py``, when a ``recorder`` is given) tell each decision once it is journaled: on the run,
Planned / NothingToDo / Rejected, AnotherRunActive / CooldownActive, Evicted / EvictionRefused (the pod
and the budget named), Nominated, Completed / CompletedWithAlternativePlacement / Failed, ReconcileError;
on each pod evicted, Repacked (naming the run).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any, Protocol

from optplan.adapters.execute_io import execute_status
from optplan.adapters.kube import AlreadyBoundError, Answer, NotFoundError
from optplan.adapters.kubefile import ParseCache, load_objects
from optplan.adapters.output import status_dict
from optplan.controller import status as st
from optplan.controller.events import NORMAL, WARNING, Recorder
from optplan.controller.informer import Store
from optplan.errors import ConflictError, InputError, KubeError
from optplan.models.execute import Relocation
from optplan.models.repack import RepackRun
from optplan.models.snapshot import Snapshot
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.goals.run import plan_run, room_lost
from optplan.solvers.repack import execute as execute_mod
from optplan.solvers.repack.run import NO_FRAGMENTATION, RECOMMENDED, RepackOutcome

log = logging.getLogger(__name__)

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


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _phase(obj: Mapping[str, Any]) -> str | None:
    p = (obj.get("status") or {}).get("phase")
    return p if isinstance(p, str) else None


def _mode(obj: Mapping[str, Any]) -> str:
    return str((obj.get("spec") or {}).get("mode") or "DryRun")


def _ev(rel: Mapping[str, Any]) -> str:
    return str((rel.get("eviction") or {}).get("phase") or st.EV_PENDING)


def _pl(rel: Mapping[str, Any]) -> str:
    return str((rel.get("placement") or {}).get("phase") or st.PL_PENDING)


def settled(rel: Mapping[str, Any]) -> bool:
    """A relocation nothing more will happen to."""
    return _ev(rel) in (st.EV_REJECTED, st.EV_SKIPPED) or (_ev(rel) == st.EV_EVICTED and _pl(rel) in st.PLACEMENT_DONE)


def _rel_patch(rel: Mapping[str, Any], **parts: Any) -> dict[str, Any]:
    """A relocation update: its key and the given fields (dicts merge into the journaled ones)."""
    return {"namespace": rel["namespace"], "victimPodName": rel["victimPodName"], **parts}


class Reconciler:
    """Reconciles RepackRuns found in ``store`` through ``api`` (see the module docstring)."""

    def __init__(self, store: Store, api: ClusterWriter, settings: Settings | None = None, *,
                 clock: Callable[[], float], may_act: Callable[[], bool] = lambda: True,
                 events: Events | None = None, watchdog: Watchdog | None = None,
                 record: ExecuteRecord | None = None, recorder: Recorder | None = None) -> None:
        self.store = store
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
        self.plans = 0  # plans made by this reconciler (a test counts re-planning)

    # ---- the passes ----------------------------------------------------------------------------

    def reconcile_all(self) -> float | None:
        """One pass over every run; the seconds until a pass is due again without any change (None: none)."""
        waits = []
        for obj in self.store.all(RUN):
            wait = self.reconcile(_name(obj))
            if wait is not None:
                waits.append(wait)
            self._beat()
        if self.recorder is not None and self.may_act():
            self.recorder.flush()  # the Event series counts the rate limit held back
        return min(waits) if waits else None

    def _beat(self) -> None:
        if self.watchdog is not None:
            self.watchdog.heartbeat()

    def _blocking(self, time_limit: float) -> AbstractContextManager[None]:
        """A plan or verify: the watchdog knows it runs and its deadline (``plan_deadline``)."""
        return self.watchdog.expect(plan_deadline(time_limit)) if self.watchdog is not None else nullcontext()

    def reconcile(self, name: str) -> float | None:
        obj = self.store.get(RUN, name)
        for _ in range(5):
            if obj is None or (obj.get("metadata") or {}).get("deletionTimestamp") or not self.may_act():
                return None
            try:
                wait = self._pass(obj)
            except ConflictError:
                log.info("RepackRun %s changed under this pass (409); reading it again", name)
                obj = self._fresh(name)
                continue
            except NotFoundError:
                log.info("RepackRun %s is gone; nothing more to do", name)
                return None
            except NotLeading:
                log.warning("RepackRun %s: lost the lease; stopped acting", name)
                return None
            except Exception as e:  # one run's failure never stops the controller
                return self._failed(name, e)
            if self._failures.pop(name, None) is not None:
                self._recovered(name)
            return wait
        return self.settings.retry

    def _fresh(self, name: str) -> dict[str, Any] | None:
        try:
            obj = self.api.get_repack_run(name)
        except NotFoundError:
            return None
        self.store.put(RUN, obj)
        return obj

    def _failed(self, name: str, e: Exception) -> float:
        n = self._failures.get(name, 0)
        self._failures[name] = n + 1
        log.error("RepackRun %s: reconcile failed: %s: %s", name, type(e).__name__, e, exc_info=n == 0)
        message = f"{type(e).__name__}: {' '.join(str(e).split())}" if not isinstance(e, InputError) else str(e)
        try:
            obj = self._fresh(name)
            if obj is not None and _phase(obj) not in st.FINISHED:
                written = self._write(obj, {"conditions": [st.condition(st.RECONCILED, False, st.RECONCILE_ERROR,
                                                                        f"retrying: {message}")]})
                self._tell(written, WARNING, st.RECONCILE_ERROR, "Reconcile", f"retrying: {message}")
        except Exception as again:  # the API server may be what fails: the log has it
            log.warning("RepackRun %s: cannot record the failure: %s", name, again)
        return min(self.settings.retry * 2 ** n, self.settings.max_retry)

    def _recovered(self, name: str) -> None:
        obj = self.store.get(RUN, name)
        cond = st.find_condition((obj or {}).get("status") or {}, st.RECONCILED)
        if obj is not None and cond is not None and cond.get("status") == "False":
            try:
                self._write(obj, {"conditions": [st.condition(st.RECONCILED, True, "Reconciled", "")]})
            except Exception as e:
                log.warning("RepackRun %s: cannot clear the failure condition: %s", name, e)

    def _pass(self, obj: dict[str, Any]) -> float | None:
        phase = _phase(obj)
        if phase in st.FINISHED:
            return self._ttl(obj)
        try:
            run = self._parse(obj)
        except InputError as e:
            return self._finish(obj, st.FAILED, st.INVALID_SPEC, str(e))
        try:
            if run.spec.mode == "DryRun":
                return None if phase is not None else self._dry_run(obj, run)
            if phase in (None, st.PENDING):
                return self._start(obj, run)
        except InputError as e:  # the goals name what the cluster does not have, or cannot be mapped
            if e.obj != f"RepackRun/{run.name}" or not (e.field or "").startswith("spec."):
                raise  # another object's fault (a bad Node): retried
            return self._finish(obj, st.FAILED, st.INVALID_SPEC, str(e))
        return self._execute(obj, run)

    # ---- reading -------------------------------------------------------------------------------

    @staticmethod
    def _parse(obj: Mapping[str, Any]) -> RepackRun:
        loaded = load_objects([obj], f"RepackRun/{_name(obj)}")
        (run,) = loaded.runs.values()
        return run

    def snapshot(self) -> Snapshot:
        """The live state as the planners read it, built again only when an object they read changed."""
        version = self.store.snapshot_version()
        if self._snapshot is None or self._snapshot[0] != version:
            objects = self.store.snapshot_objects()
            # Forget what cannot be reused before building (after a relist, every object is new): the
            # old objects and the old snapshot would otherwise live through the build beside the new ones.
            live = {id(o): o for o in objects}
            for k in [k for k, (orig, _) in self._parsed.items() if live.get(k) is not orig]:
                del self._parsed[k]
            self._snapshot = None
            loaded = load_objects(objects, "cluster", cache=self._parsed, orphans=True)
            self._snapshot = (version, loaded.snapshot)
        return self._snapshot[1]

    def now(self) -> float:
        return self.clock()

    # ---- writing -------------------------------------------------------------------------------

    def _write(self, obj: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
        """Patch the run's status with ``new`` (stamped and merged); the written object, also stored.
        Nothing is sent when nothing would change."""
        if not self.may_act():
            raise NotLeading()
        old = obj.get("status") or {}
        patch = st.stamped(old, new, now=st.rfc3339(self.now()), generation=st.generation_of(obj))
        if all(old.get(k) == v for k, v in patch.items()):
            return dict(obj)
        meta = obj.get("metadata") or {}
        written = self.api.patch_repack_run_status(_name(obj), patch, str(meta.get("resourceVersion") or ""))
        self.store.put(RUN, written)
        self._beat()  # progress: a journal step written
        return written

    def _finish(self, obj: Mapping[str, Any], phase: str, reason: str, message: str,
                extra: Mapping[str, Any] | None = None,
                more: list[dict[str, Any]] | None = None) -> float | None:
        """``more``: conditions besides Complete (a goal run's GoalsMet)."""
        now = st.rfc3339(self.now())
        status = {"phase": phase, **(extra or {}),
                  "conditions": [st.condition(st.COMPLETE, True, reason, message), *(more or [])],
                  "completionTime": now}
        status.setdefault("startTime", (obj.get("status") or {}).get("startTime") or now)
        written = self._write(obj, status)
        log.info("RepackRun %s: %s (%s)", _name(obj), phase, reason)
        if self.events is not None:
            self.events.run_finished(phase, reason)
        told = FINISHED_EVENTS.get(reason)
        if phase == st.FAILED:
            self._tell(written, WARNING, "Failed", "Complete", f"{reason}: {message}")
        elif told is not None:
            self._tell(written, NORMAL, told, "Complete", message)
        return self._ttl(written)

    # ---- DryRun --------------------------------------------------------------------------------

    def _plan(self, run: RepackRun) -> RepackOutcome:
        s = self.settings
        options = PlanOptions(time_limit=s.time_limit, workers=s.workers, deterministic=s.deterministic)
        start = self.clock()
        with self._blocking(s.time_limit):
            out = plan_run(self.snapshot(), run, solver=s.solver, options=options)
        self.plans += 1
        if self.events is not None:
            self.events.plan_seconds(max(self.clock() - start, 0.0))
            solver = out.status.plan.solver
            self.events.plan_result(solver.name, solver.status, freed=len(out.status.plan.freed_nodes),
                                    bound=solver.freed_nodes_bound)
        return out

    def _planned(self, obj: Mapping[str, Any], out: RepackOutcome) -> None:
        """The plan's Event: Planned (freed nodes, moves, bound), NothingToDo, or Rejected (why)."""
        message = out.status.conditions[0].message
        if out.reason == RECOMMENDED:
            plan = out.status.plan
            freed = list(plan.freed_nodes)
            pods = sum(len(m.pods) for m in plan.moves)
            bound = plan.solver.freed_nodes_bound
            shown = ", ".join(freed[:10]) + (f" (+{len(freed) - 10} more)" if len(freed) > 10 else "")
            self._tell(obj, NORMAL, "Planned", "Plan", (
                f"{_mode(obj)}: free {len(freed)} node(s) ({shown}) by moving {pods} pod(s) "
                f"({len(plan.moves)} group(s)); bound {bound if bound is not None else 'unknown'}; "
                f"{plan.solver.name} {plan.solver.status}: {message}"))
        elif out.reason == NO_FRAGMENTATION:
            self._tell(obj, NORMAL, "NothingToDo", "Plan", message)
        else:
            self._tell(obj, NORMAL, "Rejected", "Plan", f"{out.reason}: {message}")

    def _dry_run(self, obj: dict[str, Any], run: RepackRun) -> float | None:
        out = self._plan(run)
        status = status_dict(out.status)
        cond, *more = status.pop("conditions")
        wait = self._finish(obj, st.SUCCEEDED, cond["reason"], cond["message"], {"plan": status["plan"]},
                            _other_conditions(more))
        self._planned(obj, out)  # told once journaled
        return wait

    # ---- Execute: start ------------------------------------------------------------------------

    def _start(self, obj: dict[str, Any], run: RepackRun) -> float | None:
        blocked = self._gate(obj)
        if blocked is not None:
            reason, message, wait = blocked
            written = self._write(obj, {"phase": st.PENDING,
                                        "conditions": [st.condition(st.COMPLETE, False, reason, message)]})
            self._tell(written, NORMAL, "CooldownActive" if reason == st.COOLDOWN else reason, "Wait", message)
            return wait
        out = self._plan(run)
        status = status_dict(out.status)
        cond, *more = status["conditions"]
        if out.reason != RECOMMENDED:
            wait = self._finish(obj, st.SUCCEEDED, cond["reason"], cond["message"], {"plan": status["plan"]},
                                _other_conditions(more))
            self._planned(obj, out)
            return wait
        relocations = self._relocations(out)
        nodes = len(out.status.plan.freed_nodes)
        written = self._write(obj, {
            "phase": st.RUNNING, "startTime": st.rfc3339(self.now()), "plan": status["plan"],
            "relocations": relocations,
            "conditions": [
                st.condition("Planned", True, cond["reason"], cond["message"]),
                st.condition(st.COMPLETE, False, st.EXECUTING,
                             f"evicting {len(relocations)} pod(s) to free {nodes} node(s), node by node"),
                *_other_conditions(more)]})
        log.info("RepackRun %s: executing: %d relocation(s) journaled", run.name, len(relocations))
        self._planned(written, out)
        return self._execute(written, self._parse(written))

    def _gate(self, obj: Mapping[str, Any]) -> tuple[str, str, float | None] | None:
        """Why this Execute run may not start now (reason, message, seconds to wait), or None."""
        name = _name(obj)
        mine = (str((obj.get("metadata") or {}).get("creationTimestamp") or ""), name)
        last: tuple[float, str] | None = None
        for other in self.store.all(RUN):
            oname = _name(other)
            if oname == name or _mode(other) != "Execute":
                continue
            phase = _phase(other)
            if phase == st.RUNNING:
                return st.ANOTHER_RUN_ACTIVE, f"RepackRun {oname} is executing; Execute runs one at a time", None
            theirs = (str((other.get("metadata") or {}).get("creationTimestamp") or ""), oname)
            if phase in (None, st.PENDING) and theirs < mine \
                    and not (other.get("metadata") or {}).get("deletionTimestamp"):
                return st.ANOTHER_RUN_ACTIVE, f"RepackRun {oname} was created first and executes first", None
            done = st.parse_time((other.get("status") or {}).get("completionTime"))
            evicted = any(_ev(r) == st.EV_EVICTED for r in (other.get("status") or {}).get("relocations") or [])
            if phase in st.FINISHED and evicted and done is not None and (last is None or done > last[0]):
                last = (done, oname)
        if self.record is not None:  # the runs may be gone (TTL, deleted): the record outlives them
            known = self.record.last()
            if last is not None and (known is None or last[0] > known[0]):
                self._remember(*last)  # finished but not recorded (a crash in between, or no record yet)
            elif known is not None and (last is None or known[0] > last[0]):
                last = known
        if last is not None:
            until = last[0] + self.settings.cooldown
            if self.now() < until:
                return st.COOLDOWN, (f"RepackRun {last[1]} finished at {st.rfc3339(last[0])}; the next Execute "
                                     f"may start at {st.rfc3339(until)}"), until - self.now()
        return None

    def _relocations(self, out: RepackOutcome) -> list[dict[str, Any]]:
        """One entry per planned move, node by node in the plan's order of freed nodes."""
        plan = out.status.plan
        snap = self.snapshot()
        rank = {n: i for i, n in enumerate(plan.freed_nodes)}
        moves = [(g.namespace, p) for g in plan.moves for p in g.pods]
        moves.sort(key=lambda m: (rank.get(m[1].from_node, len(rank)), m[1].from_node, m[0], m[1].name))
        out_list = []
        for ns, p in moves:
            pod = snap.pods.get(f"{ns}/{p.name}")
            entry: dict[str, Any] = {"namespace": ns, "victimPodName": p.name}
            if pod is not None and pod.uid:
                entry["victimPodUID"] = pod.uid
            entry.update({"plannedNodeName": p.to_node, "eviction": {"phase": st.EV_PENDING},
                          "placement": {"phase": st.PL_PENDING}})
            out_list.append(entry)
        return out_list

    # ---- Execute: evict, place, finish ---------------------------------------------------------

    def _execute(self, obj: dict[str, Any], run: RepackRun) -> float | None:
        obj, ewait, held = self._evictions(obj, run)
        obj, pwait = self._placements(obj)
        if held:  # this pass may have settled the node the next one waits for
            obj, ewait, held = self._evictions(obj, run)
            obj, pwait = self._placements(obj)
        waits = [w for w in (ewait, pwait) if w is not None]
        rels = (obj.get("status") or {}).get("relocations") or []
        if all(settled(r) for r in rels):
            return self._verify(obj)
        return min(waits) if waits else None

    def _from_nodes(self, obj: Mapping[str, Any]) -> dict[str, str]:
        plan = (obj.get("status") or {}).get("plan") or {}
        return {f"{g.get('namespace')}/{p.get('name')}": str(p.get("fromNode"))
                for g in plan.get("moves") or [] for p in g.get("pods") or []}

    def _evictions(self, obj: dict[str, Any], run: RepackRun) -> tuple[dict[str, Any], float | None, bool]:
        """Evict what is due; the written run, when to look again, and whether a node's evictions are held
        until the replacements of the nodes before it have settled."""
        keys = [st.relocation_key(r) for r in (obj.get("status") or {}).get("relocations") or []]
        grace = run.spec.eviction.grace_period_seconds if run.spec.eviction is not None else None
        for key in keys:
            rel = self._rel(obj, key)
            phase = _ev(rel)
            if phase in (st.EV_EVICTED, st.EV_REJECTED, st.EV_SKIPPED):
                continue
            if phase == st.EV_PENDING:
                rejected = self._rejected_on_node(obj, key)
                why = (f"not evicted: {rejected} on the same node was rejected, so the node cannot be freed"
                       if rejected is not None else None)
                if why is None:
                    before = self._node_before(obj, key)
                    if before is not None and before[0] == st.PL_TIMED_OUT:
                        why = (f"not evicted: the replacement of {before[1]} on an earlier node was not placed in "
                               f"time, so no more pods are disrupted")
                    elif before is not None:
                        log.info("RepackRun %s: %s waits until %s's replacement is placed", _name(obj), key,
                                 before[1])
                        return obj, None, True  # at most one node's pods disrupted at a time
                if why is not None:
                    obj = self._write(obj, {"relocations": [_rel_patch(
                        rel, eviction={"phase": st.EV_SKIPPED, "completionTime": st.rfc3339(self.now()),
                                       "message": why},
                        placement={"phase": st.PL_SKIPPED})]})
                    self._event("eviction", "Skipped")
                    continue
                obj = self._write(obj, {"relocations": [_rel_patch(
                    rel, eviction={"phase": st.EV_EVICTING, "startTime": st.rfc3339(self.now())})]})
            obj, wait = self._evict(obj, key, grace)
            if wait is not None:
                return obj, wait, False  # serial: the next eviction waits for this one
        return obj, None, False

    def _node_before(self, obj: Mapping[str, Any], key: str) -> tuple[str, str] | None:
        """Why the pods of ``key``'s node wait: a relocation of an earlier node (the journal is in node
        order) whose replacement timed out (``TimedOut``, key), or is not placed yet (its phase, key).
        None: every earlier node has settled (bound, elsewhere, rejected or skipped)."""
        nodes = self._from_nodes(obj)
        node = nodes.get(key)
        waiting: tuple[str, str] | None = None
        for r in (obj.get("status") or {}).get("relocations") or []:
            k = st.relocation_key(r)
            if k == key:
                break
            if nodes.get(k) == node:
                continue
            if _pl(r) == st.PL_TIMED_OUT:
                return st.PL_TIMED_OUT, k
            if waiting is None and not settled(r):
                waiting = _pl(r), k
        return waiting

    @staticmethod
    def _rel(obj: Mapping[str, Any], key: str) -> dict[str, Any]:
        for r in (obj.get("status") or {}).get("relocations") or []:
            if st.relocation_key(r) == key:
                return dict(r)
        raise KeyError(key)  # pragma: no cover - keys come from the same journal

    def _rejected_on_node(self, obj: Mapping[str, Any], key: str) -> str | None:
        nodes = self._from_nodes(obj)
        node = nodes.get(key)
        for r in (obj.get("status") or {}).get("relocations") or []:
            k = st.relocation_key(r)
            if k != key and _ev(r) == st.EV_REJECTED and node is not None and nodes.get(k) == node:
                return k
        return None

    def _evict(self, obj: dict[str, Any], key: str, grace: int | None) -> tuple[dict[str, Any], float | None]:
        rel = self._rel(obj, key)
        ns, name = rel["namespace"], rel["victimPodName"]
        uid = rel.get("victimPodUID")
        now = st.rfc3339(self.now())
        pod = self.store.get(POD, name, ns)
        meta = (pod or {}).get("metadata") or {}
        gone = ("the pod was gone before its eviction" if pod is None
                else "the pod was terminating already" if meta.get("deletionTimestamp")
                else "a new pod holds the name (another UID)" if uid and meta.get("uid") != uid else None)
        if gone is not None:
            obj = self._write(obj, {"relocations": [_rel_patch(
                rel, eviction={"phase": st.EV_EVICTED, "completionTime": now, "message": gone})]})
            self._event("eviction", "Evicted")
            self._tell(obj, NORMAL, "Evicted", "Evict", f"{key}: {gone}", related=pod)
            return obj, None
        if not self.may_act():
            raise NotLeading()
        started = st.parse_time((rel.get("eviction") or {}).get("startTime")) or self.now()
        victim = pod or {"apiVersion": "v1", "kind": POD,
                         "metadata": {"name": name, "namespace": ns, **({"uid": uid} if uid else {})}}
        try:
            answer = self.api.evict(ns, name, uid=uid, grace_period_seconds=grace)
        except KubeError as e:  # 403, 500 (two budgets match), ...: retried by the pass until the deadline
            if self.now() < started + self.settings.eviction_deadline:
                self._refused(obj, victim, key, "Error", f"eviction of {key} failed, asked again until "
                              f"{st.rfc3339(started + self.settings.eviction_deadline)}: {e}")
                raise
            answer = Answer(429, str(e))
        run_uid = str((obj.get("metadata") or {}).get("uid") or _name(obj))
        message = {404: "the pod was gone before its eviction"}.get(answer.status)
        if answer.status == 409:  # the UID precondition failed (replaced), or another conflict: the pod says
            message = self._replaced(ns, name, uid)
            if message is None:
                answer = Answer(429, f"conflict (409), the same pod still there: {answer.message}")
        if answer.status in (200, 201, 404, 409):
            self._refusals.pop((run_uid, key), None)
            log.info("RepackRun %s: evicted %s", _name(obj), key)
            ev: dict[str, Any] = {"phase": st.EV_EVICTED, "completionTime": now}
            if message:
                ev["message"] = message
            obj = self._write(obj, {"relocations": [_rel_patch(rel, eviction=ev)]})
            self._event("eviction", "Evicted")
            planned = f"from {self._from_nodes(obj).get(key, '?')} (planned node {rel.get('plannedNodeName')})"
            self._tell(obj, NORMAL, "Evicted", "Evict", f"evicted {key} {planned}" + (f": {message}" if message
                                                                                       else ""), related=victim)
            if answer.status in (200, 201):
                self._tell(victim, NORMAL, "Repacked", "Evict", f"evicted by RepackRun {_name(obj)} to free node "
                           f"{self._from_nodes(obj).get(key, '?')}; its replacement is planned on "
                           f"{rel.get('plannedNodeName')}", related=obj)
            return obj, None
        # 429: a PodDisruptionBudget (or the server) refuses for now
        if self.now() >= started + self.settings.eviction_deadline:
            self._refusals.pop((run_uid, key), None)
            log.warning("RepackRun %s: eviction of %s rejected: %s", _name(obj), key, answer.message)
            obj = self._write(obj, {"relocations": [_rel_patch(
                rel, eviction={"phase": st.EV_REJECTED, "completionTime": now, "message": answer.message},
                placement={"phase": st.PL_SKIPPED})]})
            self._event("eviction", "Rejected")
            self._tell(obj, WARNING, "EvictionRefused", "Evict", (
                f"eviction of {key} rejected: refused until the {self.settings.eviction_deadline:g} s deadline; "
                f"node {self._from_nodes(obj).get(key, '?')} is not freed: {answer.message}"), related=victim)
            return obj, None
        self._refused(obj, victim, key, _refusal_reason(answer), f"eviction of {key} refused, asked again until "
                      f"{st.rfc3339(started + self.settings.eviction_deadline)}: {answer.message}")
        n = self._refusals.get((run_uid, key), 0)
        self._refusals[(run_uid, key)] = n + 1
        obj = self._write(obj, {"relocations": [_rel_patch(
            rel, eviction={"message": f"refused, retrying until {st.rfc3339(started + self.settings.eviction_deadline)}"
                                      f": {answer.message}"})]})
        wait = min(self.settings.retry * 2 ** n, self.settings.max_retry,
                   started + self.settings.eviction_deadline - self.now())
        return obj, max(wait, 0.0)

    def _replaced(self, namespace: str, name: str, uid: str | None) -> str | None:
        """After a 409 from the Eviction call: why the victim counts as evicted, read from the pod as the
        API server has it now (gone, terminating, another UID under its name), or None: the same pod is
        still there, so the conflict was something else (a budget's concurrent update) and the eviction
        is asked again like a refusal."""
        live = self.api.read_pod(namespace, name)
        meta = (live or {}).get("metadata") or {}
        if live is None:
            return "the pod was gone before its eviction (409)"
        if meta.get("deletionTimestamp"):
            return "the pod was terminating already (409)"
        if uid and meta.get("uid") != uid:
            return "a new pod holds the name (another UID; the UID precondition failed: 409)"
        return None

    def _placements(self, obj: dict[str, Any]) -> tuple[dict[str, Any], float | None]:
        rels = (obj.get("status") or {}).get("relocations") or []
        open_ = [r for r in rels if _ev(r) == st.EV_EVICTED and _pl(r) not in st.PLACEMENT_DONE]
        if not open_:
            return obj, None
        run = self._parse(obj)
        status = execute_status(run, f"RepackRun/{run.name}")
        snap = self.snapshot()
        version = self.store.snapshot_version()
        run_uid = str((obj.get("metadata") or {}).get("uid") or _name(obj))
        now = self.now()
        updates: list[dict[str, Any]] = []
        nominations: list[tuple[str, str, str, str]] = []  # relocation key, replacement namespace, name, node
        outcomes: list[str] = []  # replacement outcomes, reported once journaled
        waits: list[float] = []
        by_key = {r.key: r for r in status.relocations}
        for raw in open_:
            rel = by_key[st.relocation_key(raw)]
            evicted = st.parse_time((raw.get("eviction") or {}).get("completionTime")) or now
            due = evicted + self.settings.replacement_deadline
            rep, group = execute_mod.find_replacement(snap, run, status, rel)
            placement = dict(raw.get("placement") or {})
            if rep is None:
                if now >= due:
                    updates.append(_rel_patch(raw, placement={"phase": st.PL_TIMED_OUT, "message": (
                        f"no replacement pod appeared within {self.settings.replacement_deadline:g} s")}))
                    outcomes.append(st.PL_TIMED_OUT)
                else:
                    waits.append(due - now)
                continue
            upd: dict[str, Any] = {"replacementPodName": rep.name}
            extra: dict[str, Any] = {}
            if group and group != self._group_of(status, rel):
                extra["replacementPodGroupName"] = group
            if rep.occupying or now >= due:
                self._unsuggested.pop((run_uid, rel.key), None)
            if rep.occupying:
                phase = st.PL_BOUND if rep.node_name == rel.planned_node_name else st.PL_ELSEWHERE
                upd.update(phase=phase, actualNodeName=rep.node_name)
                outcomes.append("Scheduled" if phase == st.PL_BOUND else "AlternativePlacement")
            elif now >= due:
                upd.update(phase=st.PL_TIMED_OUT, message=(
                    f"replacement {rep.name} not bound within {self.settings.replacement_deadline:g} s"))
                outcomes.append(st.PL_TIMED_OUT)
            else:
                waits.append(due - now)
                tried = (run_uid, rel.key)
                if placement.get("phase") in (None, st.PL_PENDING) or placement.get("replacementPodName") != rep.name \
                        or (placement.get("phase") == st.PL_SCHEDULING and self._unsuggested.get(tried) != version):
                    n = execute_mod.nominate(snap, run, status, rep.key, rel.planned_node_name)
                    if n.node_name is not None:
                        self._unsuggested.pop(tried, None)
                        upd.update(phase=st.PL_NOMINATED, selectedNodeName=n.node_name, message=n.reason)
                        nominations.append((rel.key, rep.namespace, rep.name, n.node_name))
                    else:  # asked again on a later pass once the cluster changed, until bound or timed out
                        self._unsuggested[tried] = version
                        upd.update(phase=st.PL_SCHEDULING, message=n.reason)
                elif placement.get("phase") == st.PL_NOMINATED and not rep.nominated_node_name \
                        and placement.get("selectedNodeName"):  # journaled, the pod not yet told (a crash)
                    nominations.append((rel.key, rep.namespace, rep.name, str(placement["selectedNodeName"])))
            merged = {k: v for k, v in upd.items() if placement.get(k) != v}
            if merged or any(raw.get(k) != v for k, v in extra.items()):
                updates.append(_rel_patch(raw, placement=merged, **extra))
        lost: KubeError | None = None
        if updates:
            try:
                obj = self._write(obj, {"relocations": updates})
            except ConflictError:
                raise
            except KubeError as e:  # an error answer (500, a lost connection): the write may have happened
                obj, nominations = self._held_nominations(obj, nominations)
                lost = e
        for outcome in outcomes if lost is None else ():
            self._event("replacement", outcome)
        for _key, ns, name, node in nominations:  # journaled first, then told
            if not self.may_act():
                raise NotLeading()
            try:
                told = self.api.patch_pod_status(ns, name, {"nominatedNodeName": node})
                log.info("RepackRun %s: nominated %s for %s/%s", _name(obj), node, ns, name)
                self._tell(obj, NORMAL, "Nominated", "Nominate",
                           f"suggested node {node} to replacement {ns}/{name} (status.nominatedNodeName)",
                           related=told)
            except NotFoundError:
                log.info("RepackRun %s: replacement %s/%s went away before its nomination", _name(obj), ns, name)
            except AlreadyBoundError:  # the scheduler was first: the next pass records where it was bound
                log.info("RepackRun %s: replacement %s/%s was bound before its nomination", _name(obj), ns, name)
        if lost is not None:  # what the server did not hold is done again on the next pass
            raise lost
        return obj, (min(waits) if waits else None)

    def _held_nominations(self, obj: dict[str, Any], nominations: list[tuple[str, str, str, str]]
                          ) -> tuple[dict[str, Any], list[tuple[str, str, str, str]]]:
        """After a journal write answered with an error, which may or may not have been carried out: the run
        as the server holds it, and the nominations it journals (phase Nominated, that node, that replacement),
        which are told now, whatever the answer said; the others wait for the next pass, which journals them
        first. A journal never claims a nomination that was not made, and a nomination is never made without
        its journal entry. Raises when the run cannot be read either."""
        held = self._fresh(_name(obj))
        if held is None:
            raise NotFoundError(f"RepackRun {_name(obj)} is gone")
        rels = (held.get("status") or {}).get("relocations") or []
        journal = {st.relocation_key(r): r.get("placement") or {} for r in rels}
        kept = [(key, ns, name, node) for key, ns, name, node in nominations
                if journal.get(key, {}).get("phase") == st.PL_NOMINATED
                and journal[key].get("selectedNodeName") == node and journal[key].get("replacementPodName") == name]
        log.warning("RepackRun %s: the journal write's answer was an error; the server holds %d of %d nomination(s), "
                    "told now", _name(obj), len(kept), len(nominations))
        return held, kept

    @staticmethod
    def _group_of(status: Any, rel: Relocation) -> str:
        for g in status.plan.moves:
            if g.namespace == rel.namespace and any(p.name == rel.victim_pod_name for p in g.pods):
                return str(g.pod_group_name)
        return ""

    def _verify(self, obj: dict[str, Any]) -> float | None:
        run = self._parse(obj)
        status = execute_status(run, f"RepackRun/{run.name}")
        with self._blocking(self.settings.verify_time_limit):
            after = self.snapshot()
            v = execute_mod.verify(after, run, status, time_limit=self.settings.verify_time_limit)
            goals = status.plan.goals
            lost = room_lost(after, run, [f"{a.namespace}/{a.name}" for a in goals.admissions if a.admitted]) \
                if goals is not None else []
        rels = (obj.get("status") or {}).get("relocations") or []
        # a rejected eviction carries the API's answer (a PodDisruptionBudget's 429 names the budget)
        refused = [st.relocation_key(r) + (f" ({(r.get('eviction') or {}).get('message')})"
                                           if _ev(r) == st.EV_REJECTED and (r.get("eviction") or {}).get("message")
                                           else "")
                   for r in rels if _ev(r) in (st.EV_REJECTED, st.EV_SKIPPED)]
        timed_out = [st.relocation_key(r) for r in rels if _pl(r) == st.PL_TIMED_OUT]
        elsewhere = [r for r in rels if _pl(r) == st.PL_ELSEWHERE]
        base = v.conditions[0]
        parts = [base.message] if base.reason != execute_mod.PENDING else []
        if refused:
            parts.append(f"{len(refused)} pod(s) not evicted: {', '.join(refused[:5])}")
        if timed_out:
            parts.append(f"{len(timed_out)} replacement(s) timed out: {', '.join(timed_out[:5])}")
        if lost:
            parts.append(f"{len(lost)} admitted gang(s) lost their room: {'; '.join(lost[:5])}")
        if v.still_occupied or refused or timed_out or lost:
            phase, reason = st.FAILED, execute_mod.GOAL_MISSED
        elif elsewhere:
            phase, reason = st.SUCCEEDED, execute_mod.ALTERNATIVE
        else:
            phase, reason = st.SUCCEEDED, execute_mod.COMPLETED
        if base.reason == execute_mod.PENDING and not (refused or timed_out):
            parts.append(base.message)
        result = v.result.model_dump(by_alias=True, mode="json", exclude_none=True)
        groups = [_rel_patch(r.model_dump(by_alias=True), replacementPodGroupName=r.replacement_pod_group_name)
                  for r in v.relocations if r.replacement_pod_group_name]
        extra: dict[str, Any] = {"result": result}
        if groups:
            extra["relocations"] = groups
        done = self.now()
        wait = self._finish(obj, phase, reason, "; ".join(parts), extra)
        if any(_ev(r) == st.EV_EVICTED for r in rels):  # the cooldown starts: recorded beyond the run
            self._remember(done, _name(obj))
        return wait

    def _remember(self, when: float, run: str) -> None:
        """Record an Execute's completion (a failure is logged: the run's completionTime holds it while the
        run exists, and the next gate records it again)."""
        if self.record is None:
            return
        try:
            self.record.remember(when, run)
        except Exception as e:
            log.warning("cannot record RepackRun %s's completion for the cooldown: %s", run, e)

    # ---- TTL -----------------------------------------------------------------------------------

    def _ttl(self, obj: Mapping[str, Any]) -> float | None:
        ttl = (obj.get("spec") or {}).get("ttlSecondsAfterFinished")
        if not isinstance(ttl, int) or isinstance(ttl, bool) or ttl < 0:
            return None
        done = st.parse_time((obj.get("status") or {}).get("completionTime"))
        if done is None:  # finished by a writer that records no time (the CLI): count from now
            self._write(obj, {"completionTime": st.rfc3339(self.now())})
            return float(ttl)
        due = done + ttl
        if self.now() < due:
            return due - self.now()
        if not self.may_act():
            raise NotLeading()
        uid = (obj.get("metadata") or {}).get("uid")
        if self.api.delete_repack_run(_name(obj), str(uid) if uid else None):
            log.info("RepackRun %s: deleted %d s after it finished (ttlSecondsAfterFinished)", _name(obj), ttl)
        self.store.delete(RUN, obj)
        return None

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
            log.exception("Event %s on %s not recorded", reason, _name(obj))

    def _refused(self, obj: Mapping[str, Any], victim: Mapping[str, Any], key: str, reason: str, note: str) -> None:
        """An eviction refused for now (asked again): counted by reason, and an Event."""
        if self.events is not None:
            self.events.eviction_refused(reason)
        self._tell(obj, WARNING, "EvictionRefused", "Evict", note, related=victim)


FINISHED_EVENTS = {execute_mod.COMPLETED: "Completed", execute_mod.ALTERNATIVE: "CompletedWithAlternativePlacement"}
"""An Execute run's successful outcomes (Complete's reason) and the Event reasons that tell them."""


def _refusal_reason(answer: Answer) -> str:
    """Why an eviction was refused for now, for the metric: a PodDisruptionBudget, the server's rate limit,
    or a conflict with the same pod still there."""
    if answer.status == 429 and "disruption budget" in answer.message.lower():
        return "DisruptionBudget"
    return "Conflict" if answer.message.startswith("conflict (409)") else "TooManyRequests"


def _other_conditions(conditions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A plan's conditions besides Complete (a goal run's GoalsMet), as the controller writes conditions."""
    return [st.condition(c["type"], c["status"], c["reason"], c["message"]) for c in conditions]
