"""The RepackRun status as the controller reads and writes it: a run read once (``RunView``: the object as
stored and its status typed), metav1.Condition-shaped conditions, the relocation journal, and
the merge rules that keep what other writers own (``patch``: the one way a change becomes a status patch).

Every status written to a cluster (by the controller, ``repack --write-status`` and ``verify
--write-status``) goes through ``stamped``: conditions are merged by type, ``lastTransitionTime`` is
kept while a condition's status does not change and set to now when it does, ``observedGeneration`` is
the run's ``metadata.generation``; relocations are merged by key (``namespace/victimPodName``), so a
write never drops an entry or a field another writer added. A JSON merge patch replaces lists wholesale,
so the merged list is sent whole, guarded by the resourceVersion precondition.
"""

from __future__ import annotations

import copy
import datetime as dt
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from optplan.adapters.execute_io import run_head, run_status
from optplan.models.journal import (  # the status' vocabulary, re-exported
    EV_EVICTED as EV_EVICTED,
)
from optplan.models.journal import (
    EV_EVICTING as EV_EVICTING,
)
from optplan.models.journal import (
    EV_PENDING as EV_PENDING,
)
from optplan.models.journal import (
    EV_REJECTED as EV_REJECTED,
)
from optplan.models.journal import (
    EV_SKIPPED as EV_SKIPPED,
)
from optplan.models.journal import (
    EVICTION_PHASES as EVICTION_PHASES,
)
from optplan.models.journal import (
    FAILED as FAILED,
)
from optplan.models.journal import (
    FINISHED as FINISHED,
)
from optplan.models.journal import (
    PENDING as PENDING,
)
from optplan.models.journal import (
    PHASES as PHASES,
)
from optplan.models.journal import (
    PL_BOUND as PL_BOUND,
)
from optplan.models.journal import (
    PL_ELSEWHERE as PL_ELSEWHERE,
)
from optplan.models.journal import (
    PL_NOMINATED as PL_NOMINATED,
)
from optplan.models.journal import (
    PL_PENDING as PL_PENDING,
)
from optplan.models.journal import (
    PL_SCHEDULING as PL_SCHEDULING,
)
from optplan.models.journal import (
    PL_SKIPPED as PL_SKIPPED,
)
from optplan.models.journal import (
    PL_TIMED_OUT as PL_TIMED_OUT,
)
from optplan.models.journal import (
    PLACEMENT_DONE as PLACEMENT_DONE,
)
from optplan.models.journal import (
    PLACEMENT_PHASES as PLACEMENT_PHASES,
)
from optplan.models.journal import (
    RUNNING as RUNNING,
)
from optplan.models.journal import (
    SUCCEEDED as SUCCEEDED,
)
from optplan.models.journal import RunHead, RunStatus, StatusChange
from optplan.models.repack import Condition
from optplan.solvers.quota import times

# The phases of a run and of its relocations' eviction and placement: ``optplan.models.journal``.

# condition types and reasons the controller sets (the outcome reasons come from the planner and verify)
COMPLETE = "Complete"
RECONCILED = "Reconciled"
ANOTHER_RUN_ACTIVE = "AnotherRunActive"
COOLDOWN = "ExecuteCooldownActive"
EXECUTING = "Executing"
INVALID_SPEC = "InvalidSpec"
RECONCILE_ERROR = "ReconcileError"

REASON_RE = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
"""metav1.Condition's reason pattern."""
MAX_MESSAGE = 32768
"""metav1.Condition's message limit (characters)."""


# ---- time ----------------------------------------------------------------------------------------

def rfc3339(t: float) -> str:
    """Seconds since the epoch as metav1.Time writes them: ``2026-07-30T10:00:00Z``."""
    return dt.datetime.fromtimestamp(int(t), tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: Any) -> float | None:
    """An RFC 3339 time (``quota.times.parse_time``, the one reader of times) as seconds since the epoch;
    None when absent or unreadable."""
    if not isinstance(text, str) or not text:
        return None
    try:
        return times.parse_time(text).timestamp()
    except ValueError:
        return None


# ---- conditions ----------------------------------------------------------------------------------

def reason(text: str) -> str:
    """``text`` as a valid condition reason (the planner's reasons already are)."""
    if REASON_RE.match(text):
        return text
    cleaned = re.sub(r"[^A-Za-z0-9_,:]", "", text).lstrip("0123456789_,:").rstrip(",:")
    return cleaned or "Unknown"


def cond(type_: str, status: bool | str, reason_: str, message: str) -> Condition:
    """A condition without its times (``stamped`` adds them): a valid reason, the message within the limit."""
    value = status if isinstance(status, str) else ("True" if status else "False")
    return Condition(type=type_, status=value, reason=reason(reason_), message=message[:MAX_MESSAGE])


def condition(type_: str, status: bool | str, reason_: str, message: str) -> dict[str, Any]:
    """``cond`` as the CRD spells it."""
    return cond(type_, status, reason_, message).model_dump(by_alias=True, exclude_none=True)


def merge_conditions(old: Iterable[Mapping[str, Any]], new: Iterable[Mapping[str, Any]], now: str | None,
                     generation: int | None) -> list[dict[str, Any]]:
    """``new`` conditions over ``old`` ones, by type; old types not in ``new`` are kept as they are.
    A condition whose status is unchanged keeps its lastTransitionTime; otherwise it is ``now``."""
    out: dict[str, dict[str, Any]] = {}
    for c in old:
        if isinstance(c, Mapping) and isinstance(c.get("type"), str):
            out[c["type"]] = dict(c)
    for c in new:
        merged = dict(c)
        prev = out.get(merged["type"])
        kept = prev.get("lastTransitionTime") if prev is not None and prev.get("status") == merged["status"] else None
        if kept:
            merged["lastTransitionTime"] = kept
        elif now is not None:
            merged["lastTransitionTime"] = now
        if generation is not None:
            merged["observedGeneration"] = generation
        out[merged["type"]] = merged
    return list(out.values())


def find_condition(status: Mapping[str, Any], type_: str) -> dict[str, Any] | None:
    for c in status.get("conditions") or []:
        if isinstance(c, dict) and c.get("type") == type_:
            return c
    return None


# ---- relocations ---------------------------------------------------------------------------------

def relocation_key(rel: Mapping[str, Any]) -> str:
    return f"{rel.get('namespace', '')}/{rel.get('victimPodName', '')}"


def _deep_merge(old: Any, new: Any) -> Any:
    if isinstance(old, dict) and isinstance(new, dict):
        out = dict(old)
        for k, v in new.items():
            out[k] = _deep_merge(old.get(k), v)
        return out
    return copy.deepcopy(new)


def merge_relocations(old: Iterable[Mapping[str, Any]], new: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``new`` entries merged into ``old`` ones by key, field by field: old entries keep their place and
    every field ``new`` does not set; entries only in ``new`` are appended in their order. Never fewer."""
    out = [dict(r) for r in old if isinstance(r, Mapping)]
    index = {relocation_key(r): i for i, r in enumerate(out)}
    for r in new:
        key = relocation_key(r)
        if key in index:
            out[index[key]] = _deep_merge(out[index[key]], dict(r))
        else:
            index[key] = len(out)
            out.append(copy.deepcopy(dict(r)))
    return out


# ---- a whole status write ------------------------------------------------------------------------

def stamped(old: Mapping[str, Any] | None, new: Mapping[str, Any], *, now: str | None,
            generation: int | None) -> dict[str, Any]:
    """The status fields to patch: ``new`` with its conditions merged and stamped and its relocations
    merged into ``old``'s (see the module docstring). Fields of ``old`` that ``new`` leaves out are not
    sent, so a merge patch keeps them."""
    old = old or {}
    out = dict(new)
    if "conditions" in new:
        out["conditions"] = merge_conditions(old.get("conditions") or [], new["conditions"], now, generation)
    if "relocations" in new:
        out["relocations"] = merge_relocations(old.get("relocations") or [], new["relocations"])
    return out


def generation_of(obj: Mapping[str, Any]) -> int | None:
    g = (obj.get("metadata") or {}).get("generation")
    return g if isinstance(g, int) and not isinstance(g, bool) and g >= 0 else None


# ---- a run as the controller reads it, and the one way its status is written -----------------------

@dataclass(frozen=True)
class RunView:
    """A RepackRun read once: ``obj`` as stored (every field, other writers' and newer versions' included: a
    write merges into it), ``status``, its status typed, and ``head``, its phase and times alone, each read on
    first use."""

    obj: dict[str, Any]
    """The run as stored."""

    @cached_property
    def status(self) -> RunStatus:
        """An ``InputError`` naming the field when the status cannot be read."""
        return run_status(self.obj, f"RepackRun/{self.name}")

    @cached_property
    def head(self) -> RunHead:
        """The status' phase and times alone (its journal not read): an ``InputError`` when they cannot be read."""
        if "status" in self.__dict__:
            return RunHead(phase=self.status.phase, start_time=self.status.start_time,
                           completion_time=self.status.completion_time)
        return run_head(self.obj, f"RepackRun/{self.name}")

    @property
    def meta(self) -> Mapping[str, Any]:
        m = self.obj.get("metadata")
        return m if isinstance(m, Mapping) else {}

    @property
    def name(self) -> str:
        return str(self.meta.get("name") or "")

    @property
    def resource_version(self) -> str:
        return str(self.meta.get("resourceVersion") or "")

    @property
    def uid(self) -> str | None:
        uid = self.meta.get("uid")
        return str(uid) if uid else None

    @property
    def run_uid(self) -> str:
        """What tells this run from a later one of the same name (its UID, else its name)."""
        return self.uid or self.name

    @property
    def created(self) -> str:
        return str(self.meta.get("creationTimestamp") or "")

    @property
    def deleting(self) -> bool:
        return deleting(self.obj)

    @property
    def mode(self) -> str:
        spec = self.obj.get("spec") or {}
        return str(spec.get("mode") or "DryRun")

    @property
    def ttl(self) -> int | None:
        """``spec.ttlSecondsAfterFinished`` when it is a non-negative integer."""
        ttl = (self.obj.get("spec") or {}).get("ttlSecondsAfterFinished")
        return ttl if isinstance(ttl, int) and not isinstance(ttl, bool) and ttl >= 0 else None


def deleting(obj: Mapping[str, Any]) -> bool:
    """The run is being deleted (``metadata.deletionTimestamp``): not acted on."""
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def phase_of(obj: Mapping[str, Any]) -> str | None:
    """``status.phase`` read leniently (None when absent or not a string): for what must not fail on a status
    another writer broke (the failure path, the gate's view of another run, the phase metric, the trigger)."""
    status = obj.get("status")
    phase = status.get("phase") if isinstance(status, Mapping) else None
    return phase if isinstance(phase, str) else None


def patch(obj: Mapping[str, Any], change: StatusChange, now: float) -> dict[str, Any] | None:
    """The merge patch of ``obj``'s status that writes ``change``: its fields only, the conditions stamped and
    merged, the relocations merged into the stored ones (``stamped``); None when it would change nothing."""
    old = obj.get("status") or {}
    out = stamped(old, change.fields(), now=rfc3339(now), generation=generation_of(obj))
    if all(old.get(k) == v for k, v in out.items()):
        return None
    return out
