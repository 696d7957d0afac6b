"""Execute's evictions (step 4 of ``optplan.controller.reconcile``): one at a time, node by node in the plan's
order of freed nodes, each journaled ``Evicting`` before the policy/v1 Eviction call (with the victim's UID
as precondition) and ``Evicted``, ``Rejected`` (refused to the eviction deadline) or ``Skipped`` after."""

from __future__ import annotations

from typing import Any

from optplan.adapters.kube import Answer
from optplan.controller import status as st
from optplan.controller.base import POD, NotLeading, Steps, log
from optplan.controller.events import NORMAL, WARNING
from optplan.controller.status import RunView
from optplan.errors import KubeError
from optplan.models.journal import EvictionChange, PlacementChange, RelocationChange
from optplan.models.repack import RepackRun


class Evictions(Steps):
    """The eviction steps of an Execute run."""

    def _evictions(self, view: RunView, run: RepackRun) -> tuple[RunView, float | None, bool]:
        """Evict what is due; the written run, when to look again, and whether a node's evictions are held
        until the replacements of the nodes before it have settled."""
        keys = [r.key for r in view.status.relocations]
        grace = run.spec.eviction.grace_period_seconds if run.spec.eviction is not None else None
        for key in keys:
            rel = view.status.entry(key)
            phase = rel.eviction_phase
            if phase in (st.EV_EVICTED, st.EV_REJECTED, st.EV_SKIPPED):
                continue
            if phase == st.EV_PENDING:
                rejected = self._rejected_on_node(view, key)
                why = (f"not evicted: {rejected} on the same node was rejected, so the node cannot be freed"
                       if rejected is not None else None)
                if why is None:
                    before = self._node_before(view, key)
                    if before is not None and before[0] == st.PL_TIMED_OUT:
                        why = (f"not evicted: the replacement of {before[1]} on an earlier node was not placed in "
                               f"time, so no more pods are disrupted")
                    elif before is not None:
                        log.info("RepackRun %s: %s waits until %s's replacement is placed", view.name, key,
                                 before[1])
                        return view, None, True  # at most one node's pods disrupted at a time
                if why is not None:
                    view = self._journal(view, RelocationChange.of(
                        rel, eviction=EvictionChange(phase=st.EV_SKIPPED, completion_time=st.rfc3339(self.now()),
                                                     message=why),
                        placement=PlacementChange(phase=st.PL_SKIPPED)))
                    self._event("eviction", "Skipped")
                    continue
                view = self._journal(view, RelocationChange.of(
                    rel, eviction=EvictionChange(phase=st.EV_EVICTING, start_time=st.rfc3339(self.now()))))
            view, wait = self._evict(view, key, grace)
            if wait is not None:
                return view, wait, False  # serial: the next eviction waits for this one
        return view, None, False

    def _node_before(self, view: RunView, key: str) -> tuple[str, str] | None:
        """Why the pods of ``key``'s node wait: a relocation of an earlier node (the journal is in node
        order) whose replacement timed out (``TimedOut``, key), or is not placed yet (its phase, key).
        None: every earlier node has settled (bound, elsewhere, rejected or skipped)."""
        nodes = view.status.from_nodes()
        node = nodes.get(key)
        waiting: tuple[str, str] | None = None
        for r in view.status.relocations:
            k = r.key
            if k == key:
                break
            if nodes.get(k) == node:
                continue
            if r.placement_phase == st.PL_TIMED_OUT:
                return st.PL_TIMED_OUT, k
            if waiting is None and not r.settled:
                waiting = r.placement_phase, k
        return waiting

    @staticmethod
    def _rejected_on_node(view: RunView, key: str) -> str | None:
        nodes = view.status.from_nodes()
        node = nodes.get(key)
        for r in view.status.relocations:
            k = r.key
            if k != key and r.eviction_phase == st.EV_REJECTED and node is not None and nodes.get(k) == node:
                return k
        return None

    def _evict(self, view: RunView, key: str, grace: int | None) -> tuple[RunView, float | None]:
        rel = view.status.entry(key)
        ns, name = rel.namespace, rel.victim_pod_name
        uid = rel.victim_pod_uid
        now = st.rfc3339(self.now())
        pod = self.store.get(POD, name, ns)
        meta = (pod or {}).get("metadata") or {}
        gone = ("the pod was gone before its eviction" if pod is None
                else "the pod was terminating already" if meta.get("deletionTimestamp")
                else "a new pod holds the name (another UID)" if uid and meta.get("uid") != uid else None)
        if gone is not None:
            view = self._journal(view, RelocationChange.of(
                rel, eviction=EvictionChange(phase=st.EV_EVICTED, completion_time=now, message=gone)))
            self._event("eviction", "Evicted")
            self._tell(view.obj, NORMAL, "Evicted", "Evict", f"{key}: {gone}", related=pod)
            return view, None
        if not self.may_act():
            raise NotLeading()
        started = st.parse_time(rel.evict_state.start_time) or self.now()
        victim = pod or {"apiVersion": "v1", "kind": POD,
                         "metadata": {"name": name, "namespace": ns, **({"uid": uid} if uid else {})}}
        try:
            answer = self.api.evict(ns, name, uid=uid, grace_period_seconds=grace)
        except KubeError as e:  # 403, 500 (two budgets match), ...: retried by the pass until the deadline
            if self.now() < started + self.settings.eviction_deadline:
                self._refused(view.obj, victim, key, "Error", f"eviction of {key} failed, asked again until "
                              f"{st.rfc3339(started + self.settings.eviction_deadline)}: {e}")
                raise
            answer = Answer(429, str(e))
        message = {404: "the pod was gone before its eviction"}.get(answer.status)
        if answer.status == 409:  # the UID precondition failed (replaced), or another conflict: the pod says
            message = self._replaced(ns, name, uid)
            if message is None:
                answer = Answer(429, f"conflict (409), the same pod still there: {answer.message}")
        if answer.status in (200, 201, 404, 409):
            return self._evicted(view, rel.key, victim, answer, message, now)
        # 429: a PodDisruptionBudget (or the server) refuses for now
        refusals = (view.run_uid, key)
        if self.now() >= started + self.settings.eviction_deadline:
            self._refusals.pop(refusals, None)
            log.warning("RepackRun %s: eviction of %s rejected: %s", view.name, key, answer.message)
            view = self._journal(view, RelocationChange.of(
                rel, eviction=EvictionChange(phase=st.EV_REJECTED, completion_time=now, message=answer.message),
                placement=PlacementChange(phase=st.PL_SKIPPED)))
            self._event("eviction", "Rejected")
            self._tell(view.obj, WARNING, "EvictionRefused", "Evict", (
                f"eviction of {key} rejected: refused until the {self.settings.eviction_deadline:g} s deadline; "
                f"node {view.status.from_nodes().get(key, '?')} is not freed: {answer.message}"), related=victim)
            return view, None
        self._refused(view.obj, victim, key, _refusal_reason(answer), f"eviction of {key} refused, asked again until "
                      f"{st.rfc3339(started + self.settings.eviction_deadline)}: {answer.message}")
        n = self._refusals.get(refusals, 0)
        self._refusals[refusals] = n + 1
        view = self._journal(view, RelocationChange.of(rel, eviction=EvictionChange(
            message=f"refused, retrying until {st.rfc3339(started + self.settings.eviction_deadline)}"
                    f": {answer.message}")))
        wait = min(self.settings.retry * 2 ** n, self.settings.max_retry,
                   started + self.settings.eviction_deadline - self.now())
        return view, max(wait, 0.0)

    def _evicted(self, view: RunView, key: str, victim: dict[str, Any], answer: Answer, message: str | None,
                 now: str) -> tuple[RunView, None]:
        """The eviction accepted (or the victim found gone or replaced): journaled, counted and told."""
        rel = view.status.entry(key)
        self._refusals.pop((view.run_uid, key), None)
        log.info("RepackRun %s: evicted %s", view.name, key)
        view = self._journal(view, RelocationChange.of(
            rel, eviction=EvictionChange(phase=st.EV_EVICTED, completion_time=now, message=message or None)))
        self._event("eviction", "Evicted")
        from_node = view.status.from_nodes().get(key, "?")
        planned = f"from {from_node} (planned node {rel.planned_node_name})"
        self._tell(view.obj, NORMAL, "Evicted", "Evict", f"evicted {key} {planned}" + (f": {message}" if message
                                                                                        else ""), related=victim)
        if answer.status in (200, 201):
            self._tell(victim, NORMAL, "Repacked", "Evict", f"evicted by RepackRun {view.name} to free node "
                       f"{from_node}; its replacement is planned on {rel.planned_node_name}", related=view.obj)
        return view, None

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


def _refusal_reason(answer: Answer) -> str:
    """Why an eviction was refused for now, for the metric: a PodDisruptionBudget, the server's rate limit,
    or a conflict with the same pod still there."""
    if answer.status == 429 and "disruption budget" in answer.message.lower():
        return "DisruptionBudget"
    return "Conflict" if answer.message.startswith("conflict (409)") else "TooManyRequests"
