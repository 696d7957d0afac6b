"""The RepackRun status as the controller writes it: phases, metav1.Condition-shaped conditions, the
relocation journal, and the merge rules that keep what other writers own.

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
from typing import Any

from optplan.solvers.quota import times

# status.phase
PENDING = "Pending"
RUNNING = "Running"
SUCCEEDED = "Succeeded"
FAILED = "Failed"
FINISHED = frozenset({SUCCEEDED, FAILED})
PHASES = (PENDING, RUNNING, SUCCEEDED, FAILED)

# relocations[].eviction.phase
EV_PENDING = "Pending"  # planned, not asked yet
EV_EVICTING = "Evicting"  # journaled before the Eviction call: on restart, look at the pod
EV_EVICTED = "Evicted"  # the API accepted the eviction (or the victim was gone already)
EV_REJECTED = "Rejected"  # the API refused it until the eviction deadline (a PDB: 429), with its message
EV_SKIPPED = "Skipped"  # never asked: another pod of its node was rejected, so the node cannot be freed
EVICTION_PHASES = (EV_PENDING, EV_EVICTING, EV_EVICTED, EV_REJECTED, EV_SKIPPED)

# relocations[].placement.phase
PL_PENDING = "Pending"  # no replacement pod seen yet
PL_NOMINATED = "Nominated"  # the replacement's status.nominatedNodeName is selectedNodeName
PL_SCHEDULING = "Scheduling"  # a replacement exists; no node could be suggested, the scheduler decides
PL_BOUND = "Bound"  # bound to the planned node
PL_ELSEWHERE = "BoundElsewhere"  # bound to another node
PL_TIMED_OUT = "TimedOut"  # not bound within the replacement deadline
PL_SKIPPED = "Skipped"  # the victim was not evicted
PLACEMENT_PHASES = (PL_PENDING, PL_NOMINATED, PL_SCHEDULING, PL_BOUND, PL_ELSEWHERE, PL_TIMED_OUT, PL_SKIPPED)
PLACEMENT_DONE = frozenset({PL_BOUND, PL_ELSEWHERE, PL_TIMED_OUT, PL_SKIPPED})

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


def condition(type_: str, status: bool | str, reason_: str, message: str) -> dict[str, Any]:
    """A condition without its times (``stamped`` adds them)."""
    value = status if isinstance(status, str) else ("True" if status else "False")
    return {"type": type_, "status": value, "reason": reason(reason_), "message": message[:MAX_MESSAGE]}


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
