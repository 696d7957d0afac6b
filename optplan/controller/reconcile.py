"""The reconciler: one RepackRun at a time, level-triggered and idempotent, with its status as the journal.

Each pass reads the run from the store and decides the next step from its status alone; it writes the
status (a merge patch on ``/status`` guarded by the run's resourceVersion; on 409 it reads the run again
and starts the pass over) and only then acts. A crash at any instant leaves a status from which the next
pass, in this process or another, carries on without repeating an act that matters. The run is read as
``status.RunView``: its status typed (``optplan.models.journal``), read once per object (of a finished run,
the phase and times alone); each step writes a typed change (``StatusChange``) through one function
(``base.Steps._write``, ``status.patch``), which sends only the fields optplan owns, merged into the status
as stored. Steps 4 (``evictions``) and 5-6 (``placements``) live in their own modules.

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

from typing import Any

from optplan.adapters.kube import NotFoundError
from optplan.adapters.kubefile import load_objects
from optplan.adapters.output import status_dict
from optplan.controller import status as st
from optplan.controller.base import RUN, NotLeading, log
from optplan.controller.base import Settings as Settings  # where the CLI and the tests find it
from optplan.controller.events import NORMAL, WARNING
from optplan.controller.evictions import Evictions
from optplan.controller.placements import Placements
from optplan.controller.status import RunView
from optplan.errors import ConflictError, InputError
from optplan.models.journal import EvictionChange, PlacementChange, RelocationChange, StatusChange
from optplan.models.repack import Condition, RepackRun
from optplan.models.snapshot import Snapshot
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.execute import steps as execute_mod
from optplan.solvers.goals.run import plan_run
from optplan.solvers.repack.run import NO_FRAGMENTATION, RECOMMENDED, RepackOutcome


class Reconciler(Evictions, Placements):
    """Reconciles RepackRuns found in ``store`` through ``api`` (see the module docstring)."""

    # ---- the passes ----------------------------------------------------------------------------

    def reconcile_all(self) -> float | None:
        """One pass over every run; the seconds until a pass is due again without any change (None: none)."""
        waits = []
        names = set()
        for obj in self.store.all(RUN):
            names.add(name := RunView(obj).name)
            wait = self.reconcile(name)
            if wait is not None:
                waits.append(wait)
            self._beat()
        for gone in set(self._views) - names:  # deleted runs: their last reading goes too
            del self._views[gone]
        if self.recorder is not None and self.may_act():
            self.recorder.flush()  # the Event series counts the rate limit held back
        return min(waits) if waits else None

    def reconcile(self, name: str) -> float | None:
        obj = self.store.get(RUN, name)
        for _ in range(5):
            if obj is None or st.deleting(obj) or not self.may_act():
                return None
            try:
                wait = self._pass(self._view(obj))
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

    def _failed(self, name: str, e: Exception) -> float:
        n = self._failures.get(name, 0)
        self._failures[name] = n + 1
        log.error("RepackRun %s: reconcile failed: %s: %s", name, type(e).__name__, e, exc_info=n == 0)
        message = f"{type(e).__name__}: {' '.join(str(e).split())}" if not isinstance(e, InputError) else str(e)
        try:  # the status may be what failed: only its phase is read here, and the condition merged into it
            obj = self._fresh(name)
            if obj is not None and st.phase_of(obj) not in st.FINISHED:
                written = self._write_raw(obj, StatusChange(conditions=(
                    st.cond(st.RECONCILED, False, st.RECONCILE_ERROR, f"retrying: {message}"),)))
                self._tell(written, WARNING, st.RECONCILE_ERROR, "Reconcile", f"retrying: {message}")
        except Exception as again:  # the API server may be what fails: the log has it
            log.warning("RepackRun %s: cannot record the failure: %s", name, again)
        return min(self.settings.retry * 2 ** n, self.settings.max_retry)

    def _recovered(self, name: str) -> None:
        obj = self.store.get(RUN, name)
        if obj is None:
            return
        try:
            view = self._read(obj)
            cond = view.status.condition(st.RECONCILED)
            if cond is not None and cond.status == "False":
                self._write(view, StatusChange(conditions=(st.cond(st.RECONCILED, True, "Reconciled", ""),)))
        except Exception as e:
            log.warning("RepackRun %s: cannot clear the failure condition: %s", name, e)

    def _pass(self, view: RunView) -> float | None:
        phase = view.head.phase
        if phase in st.FINISHED:  # its journal is not read again: only the TTL is left to do
            return self._ttl(view)
        view.status  # noqa: B018 - read whole now: a status that cannot be read fails the pass, naming the field
        try:
            run = self._parse(view)
        except InputError as e:
            return self._finish(view, st.FAILED, st.INVALID_SPEC, str(e))
        try:
            if run.spec.mode == "DryRun":
                return None if phase is not None else self._dry_run(view, run)
            if phase in (None, st.PENDING):
                return self._start(view, run)
        except InputError as e:  # the goals name what the cluster does not have, or cannot be mapped
            if e.obj != f"RepackRun/{run.name}" or not (e.field or "").startswith("spec."):
                raise  # another object's fault (a bad Node): retried
            return self._finish(view, st.FAILED, st.INVALID_SPEC, str(e))
        return self._execute(view, run)

    # ---- reading the cluster -------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        """The live state as the planners read it, built again only when an object they read changed: one the
        informers watch, or the scheduler's or the device-share plugin's ConfigMap (``schedconf``), which go
        among the objects as in a snapshot file of the cluster (``optplan snapshot``), so that the loader
        applies its one rule (a register's ``mig`` device is MIG only with a geometry for its type)."""
        configmaps = self.scheduler.configmaps() if self.scheduler is not None else ()  # read again when due
        version = self.snapshot_version()
        if self._snapshot is None or self._snapshot[0] != version:
            objects = [*self.store.snapshot_objects(), *configmaps]
            # Forget what cannot be reused before building (after a relist, every object is new): the
            # old objects and the old snapshot would otherwise live through the build beside the new ones.
            live = {id(o): o for o in objects}
            for k in [k for k, (orig, _) in self._parsed.items() if live.get(k) is not orig]:
                del self._parsed[k]
            self._snapshot = None
            loaded = load_objects(objects, "cluster", cache=self._parsed, orphans=True)
            self._snapshot = (version, loaded.snapshot)
        return self._snapshot[1]

    # ---- DryRun --------------------------------------------------------------------------------

    def _plan(self, run: RepackRun) -> RepackOutcome:
        s = self.settings
        options = PlanOptions(time_limit=s.time_limit, workers=s.workers, deterministic=s.deterministic)
        start = self.clock()
        with self._blocking(s.time_limit):
            out = plan_run(self.snapshot(), run, solver=s.solver, options=options, scheduler=self.scheduler_conf())
        self.plans += 1
        if self.events is not None:
            self.events.plan_seconds(max(self.clock() - start, 0.0))
            solver = out.status.plan.solver
            self.events.plan_result(solver.name, solver.status, freed=len(out.status.plan.freed_nodes),
                                    bound=solver.freed_nodes_bound)
        return out

    def _planned(self, view: RunView, out: RepackOutcome) -> None:
        """The plan's Event: Planned (freed nodes, moves, bound), NothingToDo, or Rejected (why); and a
        SchedulerConfNotModelled warning when the cluster's scheduler configuration has parts optplan does not
        model (``schedconf``)."""
        warned = self.scheduler.warnings if self.scheduler is not None else ()
        if warned:
            more = f" (+{len(warned) - 3} more)" if len(warned) > 3 else ""
            self._tell(view.obj, WARNING, "SchedulerConfNotModelled", "Plan",
                       f"planned under the cluster's scheduler configuration, which optplan does not fully model: "
                       f"{'; '.join(warned[:3])}{more}")
        message = out.status.conditions[0].message
        if out.reason == RECOMMENDED:
            plan = out.status.plan
            freed = list(plan.freed_nodes)
            pods = sum(len(m.pods) for m in plan.moves)
            bound = plan.solver.freed_nodes_bound
            shown = ", ".join(freed[:10]) + (f" (+{len(freed) - 10} more)" if len(freed) > 10 else "")
            self._tell(view.obj, NORMAL, "Planned", "Plan", (
                f"{view.mode}: free {len(freed)} node(s) ({shown}) by moving {pods} pod(s) "
                f"({len(plan.moves)} group(s)); bound {bound if bound is not None else 'unknown'}; "
                f"{plan.solver.name} {plan.solver.status}: {message}"))
        elif out.reason == NO_FRAGMENTATION:
            self._tell(view.obj, NORMAL, "NothingToDo", "Plan", message)
        else:
            self._tell(view.obj, NORMAL, "Rejected", "Plan", f"{out.reason}: {message}")

    def _dry_run(self, view: RunView, run: RepackRun) -> float | None:
        out = self._plan(run)
        status = status_dict(out.status)
        cond, *more = status.pop("conditions")
        wait = self._finish(view, st.SUCCEEDED, cond["reason"], cond["message"], plan=status["plan"],
                            more=_other_conditions(more))
        self._planned(view, out)  # told once journaled
        return wait

    # ---- Execute: start ------------------------------------------------------------------------

    def _start(self, view: RunView, run: RepackRun) -> float | None:
        blocked = self._gate(view)
        if blocked is not None:
            reason, message, wait = blocked
            written = self._write(view, StatusChange(phase=st.PENDING,
                                                     conditions=(st.cond(st.COMPLETE, False, reason, message),)))
            self._tell(written.obj, NORMAL, "CooldownActive" if reason == st.COOLDOWN else reason, "Wait", message)
            return wait
        out = self._plan(run)
        status = status_dict(out.status)
        cond, *more = status["conditions"]
        if out.reason != RECOMMENDED:
            wait = self._finish(view, st.SUCCEEDED, cond["reason"], cond["message"], plan=status["plan"],
                                more=_other_conditions(more))
            self._planned(view, out)
            return wait
        relocations = self._relocations(out)
        nodes = len(out.status.plan.freed_nodes)
        written = self._write(view, StatusChange(
            phase=st.RUNNING, start_time=st.rfc3339(self.now()), plan=status["plan"], relocations=relocations,
            conditions=(
                st.cond("Planned", True, cond["reason"], cond["message"]),
                st.cond(st.COMPLETE, False, st.EXECUTING,
                        f"evicting {len(relocations)} pod(s) to free {nodes} node(s), node by node"),
                *_other_conditions(more))))
        log.info("RepackRun %s: executing: %d relocation(s) journaled", run.name, len(relocations))
        self._planned(written, out)
        return self._execute(written, self._parse(written))

    def _gate(self, view: RunView) -> tuple[str, str, float | None] | None:
        """Why this Execute run may not start now (reason, message, seconds to wait), or None. Of another
        Execute run whose status cannot be read, only the phase counts (its evictions are not known)."""
        name = view.name
        mine = (view.created, name)
        last: tuple[float, str] | None = None
        for obj in self.store.all(RUN):
            other = self._view(obj)
            oname = other.name
            if oname == name or other.mode != "Execute":
                continue
            try:
                status = other.status
                phase, done = status.phase, st.parse_time(status.completion_time)
                evicted = any(r.evicted for r in status.relocations)
            except InputError as e:  # another writer's malformed status: its phase still says whether it runs
                log.warning("RepackRun %s: RepackRun %s's status cannot be read beyond its phase: %s", name, oname, e)
                phase, done, evicted = st.phase_of(other.obj), None, False
            if phase == st.RUNNING:
                return st.ANOTHER_RUN_ACTIVE, f"RepackRun {oname} is executing; Execute runs one at a time", None
            theirs = (other.created, oname)
            if phase in (None, st.PENDING) and theirs < mine and not other.deleting:
                return st.ANOTHER_RUN_ACTIVE, f"RepackRun {oname} was created first and executes first", None
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

    def _relocations(self, out: RepackOutcome) -> tuple[RelocationChange, ...]:
        """One entry per planned move, node by node in the plan's order of freed nodes."""
        plan = out.status.plan
        snap = self.snapshot()
        rank = {n: i for i, n in enumerate(plan.freed_nodes)}
        moves = [(g.namespace, p) for g in plan.moves for p in g.pods]
        moves.sort(key=lambda m: (rank.get(m[1].from_node, len(rank)), m[1].from_node, m[0], m[1].name))
        entries = []
        for ns, p in moves:
            pod = snap.pods.get(f"{ns}/{p.name}")
            device = execute_mod.planned_device(snap, p.to_node, getattr(p, "to_devices", None))  # a moved share's
            entries.append(RelocationChange(
                namespace=ns, victim_pod_name=p.name, victim_pod_uid=pod.uid if pod is not None and pod.uid else None,
                planned_node_name=p.to_node, planned_device=device, eviction=EvictionChange(phase=st.EV_PENDING),
                placement=PlacementChange(phase=st.PL_PENDING)))
        return tuple(entries)

    # ---- Execute: evict, place, finish ---------------------------------------------------------

    def _execute(self, view: RunView, run: RepackRun) -> float | None:
        view, ewait, held = self._evictions(view, run)
        view, pwait = self._placements(view)
        if held:  # this pass may have settled the node the next one waits for
            view, ewait, held = self._evictions(view, run)
            view, pwait = self._placements(view)
        waits = [w for w in (ewait, pwait) if w is not None]
        if all(r.settled for r in view.status.relocations):
            return self._verify(view)
        return min(waits) if waits else None


def _other_conditions(conditions: list[dict[str, Any]]) -> tuple[Condition, ...]:
    """A plan's conditions besides Complete (a goal run's GoalsMet), as the controller writes conditions."""
    return tuple(st.cond(c["type"], c["status"], c["reason"], c["message"]) for c in conditions)
