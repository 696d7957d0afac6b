"""Execute's replacements and result (steps 5 and 6 of ``optplan.controller.reconcile``): each evicted victim's
replacement, matched as ``verify`` matches them, nominated (journaled first) and followed until bound or timed
out; once every relocation has settled, ``verify`` on the live state gives the result and the outcome. A share
moved to a planned device has its device pinned (``steps.device_pin``'s annotations, written just before the
nomination, while the planned node is the one nominated); where it landed is journaled (``actualDevice``), and
another device than the planned one is BoundElsewhere."""

from __future__ import annotations

from typing import Any

from optplan.adapters.kube import AlreadyBoundError, NotFoundError
from optplan.controller import status as st
from optplan.controller.base import NotLeading, Steps, log
from optplan.controller.events import NORMAL
from optplan.controller.status import RunView
from optplan.errors import ConflictError, KubeError
from optplan.models.execute import Relocation
from optplan.models.journal import PlacementChange, RelocationChange
from optplan.models.snapshot import Snapshot
from optplan.solvers.execute import steps as execute_mod
from optplan.solvers.goals.run import room_lost

Nomination = tuple[str, str, str, str, dict[str, str]]
"""A nomination to tell: relocation key, replacement namespace, replacement name, node, the annotations that
pin its planned device (empty: none)."""


class Placements(Steps):
    """The replacement and result steps of an Execute run."""

    def _placements(self, view: RunView) -> tuple[RunView, float | None]:
        status = view.status
        open_ = [r for r in status.relocations if r.evicted and r.placement_phase not in st.PLACEMENT_DONE]
        if not open_:
            return view, None
        run = self._parse(view)
        snap = self.snapshot()
        version = self.snapshot_version()
        run_uid = view.run_uid
        now = self.now()
        updates: list[RelocationChange] = []
        nominations: list[Nomination] = []
        outcomes: list[str] = []  # replacement outcomes, reported once journaled
        waits: list[float] = []
        by_key = {r.key: r for r in status.relocations}
        for entry in open_:
            rel = by_key[entry.key]
            evicted = st.parse_time(entry.evict_state.completion_time) or now
            due = evicted + self.settings.replacement_deadline
            rep, group = execute_mod.find_replacement(snap, run, status, rel)
            placement = entry.place_state
            if rep is None:
                if now >= due:
                    updates.append(RelocationChange.of(entry, placement=PlacementChange(
                        phase=st.PL_TIMED_OUT,
                        message=f"no replacement pod appeared within {self.settings.replacement_deadline:g} s")))
                    outcomes.append(st.PL_TIMED_OUT)
                else:
                    waits.append(due - now)
                continue
            upd: dict[str, Any] = {"replacement_pod_name": rep.name}
            extra: dict[str, Any] = {}
            if group and group != status.pod_group_of(rel):
                extra["replacement_pod_group_name"] = group
            if rep.occupying or now >= due:
                self._unsuggested.pop((run_uid, rel.key), None)
            if rep.occupying:
                device = execute_mod.actual_device(snap, rep)
                planned = rep.node_name == rel.planned_node_name and rel.planned_device in (None, device)
                phase = st.PL_BOUND if planned else st.PL_ELSEWHERE
                upd.update(phase=phase, actual_node_name=rep.node_name)
                if device is not None or rel.planned_device is not None:
                    upd["actual_device"] = device
                outcomes.append("Scheduled" if phase == st.PL_BOUND else "AlternativePlacement")
            elif now >= due:
                upd.update(phase=st.PL_TIMED_OUT, message=(
                    f"replacement {rep.name} not bound within {self.settings.replacement_deadline:g} s"))
                outcomes.append(st.PL_TIMED_OUT)
            else:
                waits.append(due - now)
                tried = (run_uid, rel.key)
                if placement.phase in (None, st.PL_PENDING) or placement.replacement_pod_name != rep.name \
                        or (placement.phase == st.PL_SCHEDULING and self._unsuggested.get(tried) != version):
                    n = execute_mod.nominate(snap, run, status, rep.key, rel.planned_node_name)
                    if n.node_name is not None:
                        self._unsuggested.pop(tried, None)
                        pin, why = self._pin(snap, rel, rep.key, n.node_name)
                        upd.update(phase=st.PL_NOMINATED, selected_node_name=n.node_name,
                                   message=f"{n.reason}; {why}" if why else n.reason)
                        nominations.append((rel.key, rep.namespace, rep.name, n.node_name, pin))
                    else:  # asked again on a later pass once the cluster changed, until bound or timed out
                        self._unsuggested[tried] = version
                        upd.update(phase=st.PL_SCHEDULING, message=n.reason)
                elif placement.phase == st.PL_NOMINATED and not rep.nominated_node_name \
                        and placement.selected_node_name:  # journaled, the pod not yet told (a crash)
                    pin, _ = self._pin(snap, rel, rep.key, placement.selected_node_name)
                    nominations.append((rel.key, rep.namespace, rep.name, placement.selected_node_name, pin))
            changed = {k: v for k, v in upd.items() if getattr(placement, k) != v}
            if changed or any(getattr(entry, k) != v for k, v in extra.items()):
                updates.append(RelocationChange.of(entry, placement=PlacementChange(**changed), **extra))
        lost: KubeError | None = None
        if updates:
            try:
                view = self._journal(view, *updates)
            except ConflictError:
                raise
            except KubeError as e:  # an error answer (500, a lost connection): the write may have happened
                view, nominations = self._held_nominations(view, nominations)
                lost = e
        for outcome in outcomes if lost is None else ():
            self._event("replacement", outcome)
        for _key, ns, name, node, pin in nominations:  # journaled first, then told (the device pin first)
            if not self.may_act():
                raise NotLeading()
            try:
                if pin:
                    self.api.patch_pod_metadata(ns, name, {"annotations": pin})
                    log.info("RepackRun %s: pinned %s/%s to %s", view.name, ns, name,
                             ", ".join(f"{k}={v}" for k, v in sorted(pin.items())))
                told = self.api.patch_pod_status(ns, name, {"nominatedNodeName": node})
                log.info("RepackRun %s: nominated %s for %s/%s", view.name, node, ns, name)
                self._tell(view.obj, NORMAL, "Nominated", "Nominate",
                           f"suggested node {node} to replacement {ns}/{name} (status.nominatedNodeName)",
                           related=told)
            except NotFoundError:
                log.info("RepackRun %s: replacement %s/%s went away before its nomination", view.name, ns, name)
            except AlreadyBoundError:  # the scheduler was first: the next pass records where it was bound
                log.info("RepackRun %s: replacement %s/%s was bound before its nomination", view.name, ns, name)
        if lost is not None:  # what the server did not hold is done again on the next pass
            raise lost
        return view, (min(waits) if waits else None)

    @staticmethod
    def _pin(snap: Snapshot, rel: Relocation, replacement: str, node: str) -> tuple[dict[str, str], str]:
        """The device pin of a replacement nominated to ``node``: its planned device's, when that is the planned
        node (``steps.device_pin``); nothing otherwise."""
        if rel.planned_device is None or node != rel.planned_node_name:
            return {}, ""
        return execute_mod.device_pin(snap, replacement, node, rel.planned_device)

    def _held_nominations(self, view: RunView, nominations: list[Nomination]) -> tuple[RunView, list[Nomination]]:
        """After a journal write answered with an error, which may or may not have been carried out: the run
        as the server holds it, and the nominations it journals (phase Nominated, that node, that replacement),
        which are told now, whatever the answer said; the others wait for the next pass, which journals them
        first. A journal never claims a nomination that was not made, and a nomination is never made without
        its journal entry. Raises when the run cannot be read either."""
        obj = self._fresh(view.name)
        if obj is None:
            raise NotFoundError(f"RepackRun {view.name} is gone")
        held = self._read(obj)
        journal = {r.key: r.place_state for r in held.status.relocations}
        kept = [(key, ns, name, node, pin) for key, ns, name, node, pin in nominations
                if key in journal and journal[key].phase == st.PL_NOMINATED
                and journal[key].selected_node_name == node and journal[key].replacement_pod_name == name]
        log.warning("RepackRun %s: the journal write's answer was an error; the server holds %d of %d nomination(s), "
                    "told now", view.name, len(kept), len(nominations))
        return held, kept

    def _verify(self, view: RunView) -> float | None:
        run = self._parse(view)
        status = view.status
        with self._blocking(self.settings.verify_time_limit):
            after = self.snapshot()
            v = execute_mod.verify(after, run, status, time_limit=self.settings.verify_time_limit)
            goals = status.plan.goals
            lost = room_lost(after, run, [f"{a.namespace}/{a.name}" for a in goals.admissions if a.admitted],
                             self.scheduler_conf()) if goals is not None else []
        rels = status.relocations
        # a rejected eviction carries the API's answer (a PodDisruptionBudget's 429 names the budget)
        refused = [r.key + (f" ({r.evict_state.message})" if r.eviction_phase == st.EV_REJECTED
                            and r.evict_state.message else "")
                   for r in rels if r.refused]
        timed_out = [r.key for r in rels if r.placement_phase == st.PL_TIMED_OUT]
        elsewhere = [r for r in rels if r.placement_phase == st.PL_ELSEWHERE]
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
        groups = tuple(RelocationChange.of(r, replacement_pod_group_name=r.replacement_pod_group_name)
                       for r in v.relocations if r.replacement_pod_group_name)
        done = self.now()
        wait = self._finish(view, phase, reason, "; ".join(parts), result=v.result, relocations=groups or None)
        if any(r.evicted for r in rels):  # the cooldown starts: recorded beyond the run
            self._remember(done, view.name)
        return wait
