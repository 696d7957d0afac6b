"""Gang-aware victims in bundles: the rule of Volcano's ``gangpreempt`` and ``gangreclaim`` actions (v1.15), by
which a victim job's candidate pods are offered, ranked and taken. Pure functions on small records, read by
the greedy's gang-aware actions (``gangevict``) and the validator (``gangrules``).

**Bundles of one victim job** (``job_bundles``): its candidate pods on the nodes being searched, lowest
priority first (then by name), are split in two. A pod is *safe* when evicting it, after the safe pods before
it, keeps the gang ready on all three of the gang plugin's counts: the job's running pods above
``minAvailable`` (its surplus), its task's running pods above the task's minimum (only when the tasks'
minimums are enforced: ``minAvailable`` ≥ their sum), and — when the job has sub-groups — its sub-group is
already broken, or its sub-group policy has a ready sub-group to spare above ``minSubGroups`` (evicting the
first pod of a ready sub-group breaks it and spends one). The other pods form the *whole* bundle: taking any
of them breaks the gang, so its global cost is every pod of the job. A job already not ready has one safe
bundle of all its candidates (nothing more to break).

**Order** (``rank_bundles``): safe bundles before whole ones; then the victim order of the action (preempt:
the victim job order; reclaim: the queue order), given as a key; then the best return: the bundle's local
resources, each capped at the need, as a share of the need summed over the resources the need asks for,
divided by its global cost measured the same way uncapped (no global cost: infinite); then the bundle's
job and first pod by name.

**Selection** (``select_bundles``): in that order, whole bundles skipped unless allowed, bundles taken until
their local resources cover the need on every resource. ``allowed_bundles`` keeps the pods the other victim
rules allow: a safe bundle shrinks to its allowed pods, a whole bundle stays only when all of it is allowed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any, Literal

Kind = Literal["safe", "whole"]
SAFE: Kind = "safe"
WHOLE: Kind = "whole"


@dataclass(frozen=True)
class Member:
    """A running pod of a victim job: its key (namespace/name), task, priority, requests and sub-group (None:
    the job's default group)."""

    key: str
    task: str
    priority: int
    requests: Mapping[str, int]
    subgroup: str | None = None


@dataclass(frozen=True)
class GangState:
    """A victim job as the gang plugin counts it: ``ready`` pods against ``min_available``; per task its ready
    pods and minimum; per sub-group whether it is ready and its policy (``group_of``), per policy its
    ``min_subgroups``; ``total``: every pod's requests summed (a whole bundle's global cost)."""

    job: str
    min_available: int
    ready: int
    task_ready: Mapping[str, int] = field(default_factory=dict)
    task_min: Mapping[str, int] = field(default_factory=dict)
    subgroup_ready: Mapping[str, bool] = field(default_factory=dict)
    group_of: Mapping[str, str] = field(default_factory=dict)
    min_subgroups: Mapping[str, int] = field(default_factory=dict)
    total: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Bundle:
    kind: Kind
    job: str
    members: tuple[Member, ...]
    local: Mapping[str, int]
    """The members' requests summed."""
    cost: Mapping[str, int]
    """What taking the bundle costs the cluster: nothing for a safe bundle, the whole job for a whole one."""


def summed(members: Iterable[Member]) -> dict[str, int]:
    out: dict[str, int] = {}
    for m in members:
        for r, v in m.requests.items():
            out[r] = out.get(r, 0) + v
    return out


def job_bundles(gang: GangState, candidates: Sequence[Member]) -> list[Bundle]:
    """The victim job's candidates split into its safe and whole bundles (module docstring), empty ones left out."""
    if not candidates:
        return []
    ordered = sorted(candidates, key=lambda m: (m.priority, m.key))
    surplus = gang.ready - gang.min_available
    if surplus < 0:
        return [Bundle(SAFE, gang.job, tuple(ordered), summed(ordered), {})]
    roles = gang.min_available >= sum(gang.task_min.values())
    role_surplus = {t: gang.task_ready.get(t, 0) - m for t, m in gang.task_min.items()} if roles else {}
    groups = bool(gang.min_subgroups)
    broken = {sg for sg, ok in gang.subgroup_ready.items() if not ok}
    group_surplus: dict[str, int] = {}
    if groups:
        for sg, ok in gang.subgroup_ready.items():
            if ok:
                g = gang.group_of[sg]
                group_surplus[g] = group_surplus.get(g, 0) + 1
        for g, k in gang.min_subgroups.items():
            group_surplus[g] = group_surplus.get(g, 0) - k
    safe: list[Member] = []
    whole: list[Member] = []
    for m in ordered:
        role_ok = m.task not in role_surplus or role_surplus[m.task] > 0
        group_ok = True
        if groups:
            if m.subgroup is None or m.subgroup not in gang.group_of:
                group_ok = False  # a pod outside every sub-group: Volcano routes it to whole, defensively
            else:
                group_ok = m.subgroup in broken or group_surplus.get(gang.group_of[m.subgroup], 0) > 0
        if surplus > 0 and role_ok and group_ok:
            safe.append(m)
            surplus -= 1
            if m.task in role_surplus:
                role_surplus[m.task] -= 1
            if groups and m.subgroup is not None and m.subgroup not in broken:
                broken.add(m.subgroup)
                g = gang.group_of[m.subgroup]
                group_surplus[g] = group_surplus.get(g, 0) - 1
        else:
            whole.append(m)
    out = []
    if safe:
        out.append(Bundle(SAFE, gang.job, tuple(safe), summed(safe), {}))
    if whole:
        out.append(Bundle(WHOLE, gang.job, tuple(whole), summed(whole), dict(gang.total)))
    return out


def allowed_bundles(bundles: Iterable[Bundle], allowed: Callable[[Member], bool]) -> list[Bundle]:
    """The bundles as the other victim rules leave them: a safe bundle cut to its allowed members (dropped when
    none is), a whole bundle kept only when every member is allowed."""
    out = []
    for b in bundles:
        ok = [m for m in b.members if allowed(m)]
        if b.kind == WHOLE:
            if len(ok) == len(b.members):
                out.append(b)
        elif ok:
            out.append(replace(b, members=tuple(ok), local=summed(ok)))
    return out


def share(amounts: Mapping[str, int], need: Mapping[str, int], *, capped: bool) -> Fraction:
    """Σ over the resources the need asks a positive amount of: amount / need (the amount capped at the need
    when ``capped``)."""
    total = Fraction(0)
    for r, n in need.items():
        v = amounts.get(r, 0)
        if n > 0 and v:
            total += Fraction(min(v, n) if capped else v, n)
    return total


def roi(b: Bundle, need: Mapping[str, int]) -> Fraction | None:
    """Local gain over global cost; None stands for infinite (no global cost)."""
    if not any(b.cost.values()):
        return None
    cost = share(b.cost, need, capped=False)
    return None if cost == 0 else share(b.local, need, capped=True) / cost


def rank_bundles(bundles: Iterable[Bundle], need: Mapping[str, int],
                 victim_key: Callable[[Bundle], Any]) -> list[Bundle]:
    """The bundles in taking order: safe first, then ``victim_key`` (the action's victim job or queue order,
    lower first), then the best return (infinite first), then job and first member by name."""
    def key(b: Bundle) -> tuple[Any, ...]:
        r = roi(b, need)
        return (b.kind != SAFE, victim_key(b), r is not None, -(r or 0), b.job, b.members[0].key if b.members else "")
    return sorted(bundles, key=key)


def covers(freed: Mapping[str, int], need: Mapping[str, int]) -> bool:
    return all(freed.get(r, 0) >= n for r, n in need.items() if n > 0)


def select_bundles(ranked: Iterable[Bundle], need: Mapping[str, int], allow_whole: bool) -> list[Bundle]:
    """Bundles in order (whole ones only when ``allow_whole``) until their local resources cover the need."""
    out: list[Bundle] = []
    freed: dict[str, int] = {}
    for b in ranked:
        if b.kind == WHOLE and not allow_whole:
            continue
        out.append(b)
        for r, v in b.local.items():
            freed[r] = freed.get(r, 0) + v
        if covers(freed, need):
            break
    return out
