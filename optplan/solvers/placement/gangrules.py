"""The rules of Volcano's gang-aware eviction actions, ``gangpreempt`` and ``gangreclaim`` (v1.15,
pkg/scheduler/actions/gangpreempt, gangreclaim and actions/utils), shared by the greedy (``gang``) and the
validator (``gang_victim_violations``); the bundle arithmetic itself is ``bundles``.

**Candidates** (``candidate_refused``) on the nodes of the domain being searched, of a running pod that may be
a victim at all (``victims.Catalogue``): gangpreempt takes pods of the preemptor's queue whose job priority is
strictly lower; gangreclaim takes pods of other queues that are ``reclaimable``. Unlike preempt, a job with a
``networkTopology`` may evict by either.

**Plugin tiers** (``unified_allowed``: Volcano's ``UnifiedEvictable``): the tiers in the configuration's
order; in a tier, each of priority, gang, conformance and capacity offers its victims and the tier offers
their intersection; the first tier that offers any decides. Priority offers (gangpreempt) the pods of lower
job priority, already the candidates, and (gangreclaim) all; gang offers all (the bundles keep minMember);
conformance offers all (protected pods are never candidates); capacity offers all for gangpreempt and, for
gangreclaim, the pods its reclaim rules let go in the bundles' order, each with the ones kept before it
taken from its queue (``victims.victim_blocked``: guarantee, then above deserved). Under the seed's tiers
(priority, gang, conformance first) the first tier always decides: every candidate may go.

**Domains** (``gang_domains``): a job without a hard ``networkTopology`` searches the whole cluster, one
domain; a hard one the HyperNodes it may use (its regions), widest tier first, by name within a tier, each
holding the job's minimum resources in allocatable (unless pods of the job run already), at most
``hypernode.gradient.evict.max-hypernodes`` (the last of a tier cut off) and ``maxDomains`` of them.

**Victim order** (``preempt_victim_key``, ``queue_depth``): gangpreempt ranks victim jobs in reverse job order
(lower priority first, a ready gang before one that is not, then the PodGroup's name); gangreclaim ranks
victim queues by the capacity plugin's victim queue order (the queue sharing more ancestors with the
reclaimer's first), then in reverse queue order.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import cast

from optplan.models.snapshot import Resources, Snapshot
from optplan.solvers.placement.bundles import WHOLE, Bundle, GangState, Member, job_bundles
from optplan.solvers.placement.jobs import Region
from optplan.solvers.placement.victims import (
    Candidate,
    Catalogue,
    Group,
    Reason,
    reclaim_order,
    statically_allowed,
    victim_blocked,
)

GANG_REASON = {"gangpreempt": "preempt", "gangreclaim": "reclaim"}
"""A gang-aware action and the legacy action whose candidates it takes (same queue, or other queues)."""
ReclaimCheck = Callable[[str, list[tuple[str, Resources]]], str | None]
"""Why a victim queue would not let these (key, requests) pods go in any order, or None."""
UNIFIED = ("priority", "gang", "conformance", "capacity")
"""The plugins whose ``UnifiedEvictableFn`` optplan models (every other one registers none)."""


def legacy_reason(reason: str) -> Reason:
    """The legacy action (preempt or reclaim) whose candidates an action takes."""
    return cast(Reason, GANG_REASON.get(reason, reason))


def candidate_refused(c: Candidate, action: str, queue: str, priority: int, reclaimable: bool) -> str | None:
    """Why the running pod is never a candidate of this job by this action, or None: the legacy action's
    first-tier rule (``victims.statically_allowed``: preempt, same queue and lower job priority; reclaim,
    another reclaimable queue)."""
    return statically_allowed(c, legacy_reason(action), queue, priority, reclaimable)


def member(c: Candidate) -> Member:
    return Member(key=c.key, task="", priority=c.task_priority, requests=dict(c.pod.requests))


def group_totals(snap: Snapshot, groups: Iterable[str]) -> dict[str, dict[str, int]]:
    """Per PodGroup of ``groups``, every pod of it summed (a whole bundle's global cost: Volcano sums all the
    job's tasks), in one pass over the pods."""
    out: dict[str, dict[str, int]] = {g: {} for g in groups}
    for p in snap.pods.values():
        acc = out.get(p.group_key or "")
        if acc is not None:
            for r, v in p.requests.items():
                acc[r] = acc.get(r, 0) + v
    return out


def gang_state(group: Group, taken: int, total: Mapping[str, int]) -> GangState:
    """The victim job as the gang plugin counts it now: its ready pods less those evicted so far."""
    return GangState(job=group.key, min_available=group.min_member, ready=group.ready - taken, total=total)


def domain_bundles(cands: Iterable[Candidate], cat: Catalogue, taken: Mapping[str, int],
                   total: Callable[[str], Mapping[str, int]]) -> list[Bundle]:
    """Every victim job's bundles (``bundles.job_bundles``) over the candidates of one domain."""
    by_group: dict[str, list[Candidate]] = defaultdict(list)
    for c in cands:
        by_group[c.group].append(c)
    out: list[Bundle] = []
    for gk in sorted(by_group):
        out += job_bundles(gang_state(cat.groups[gk], taken.get(gk, 0), total(gk)), [member(c) for c in by_group[gk]])
    return out


def capacity_victims(ordered: Sequence[Candidate], allocated: Mapping[str, Mapping[str, int]],
                     deserved: Mapping[str, Mapping[str, int]], listed: Mapping[str, frozenset[str]],
                     guarantee: Mapping[str, Mapping[str, int]]) -> list[str]:
    """The capacity plugin's gangreclaim filter: in order, each pod its queue lets go with the ones kept before
    it taken from the queue."""
    alloc: dict[str, dict[str, int]] = {}
    out = []
    for c in ordered:
        a = alloc.setdefault(c.queue, dict(allocated[c.queue]))
        if victim_blocked(c.queue, a, c.pod.requests, deserved[c.queue], listed[c.queue], guarantee[c.queue]) is None:
            out.append(c.key)
            for r, x in c.pod.requests.items():
                a[r] = a.get(r, 0) - x
    return out


def capacity_decides(tiers: Sequence[Sequence[str]], action: str) -> bool:
    """Whether the capacity plugin's filter can change which candidates may go: only for gangreclaim, and only
    when capacity sits in the first tier that lists one of the modelled plugins."""
    if GANG_REASON[action] != "reclaim":
        return False
    for tier in tiers:
        here = [p for p in tier if p in UNIFIED]
        if here:
            return "capacity" in here
    return False


def unified_allowed(tiers: Sequence[Sequence[str]], action: str, ordered: Sequence[Candidate],
                    capacity: Callable[[Sequence[Candidate]], list[str]]) -> set[str]:
    """Volcano's ``UnifiedEvictable`` over the candidates in the bundles' order (module docstring): the keys
    the deciding tier offers; none when no tier offers any."""
    everyone = [c.key for c in ordered]
    for tier in tiers:
        victims: list[str] | None = None
        for plugin in tier:
            if plugin not in UNIFIED:
                continue
            result = capacity(ordered) if plugin == "capacity" and GANG_REASON[action] == "reclaim" else everyone
            if not result:
                victims = None
                break
            offered = set(result)
            victims = result if victims is None else [k for k in victims if k in offered]
        if victims:
            return set(victims)
    return set()


def preempt_victim_key(cat: Catalogue, taken: Mapping[str, int]) -> Callable[[Bundle], tuple[int, int, str]]:
    """gangpreempt's victim job order: Volcano's job order reversed (lower priority, ready first, then name)."""
    prio = {c.group: c.job_priority for c in cat.candidates.values()}

    def key(b: Bundle) -> tuple[int, int, str]:
        g = cat.groups[b.job]
        return prio[b.job], 0 if g.ready - taken.get(b.job, 0) >= g.min_member else 1, b.job
    return key


def queue_depth(chain: Callable[[str], Sequence[str]], queue: str, reclaimer: str) -> int:
    """How many ancestors (and itself) ``queue`` shares with the reclaimer's queue, each chain read from the
    root (the capacity plugin's ``getQueueLevel``; a deeper common ancestor ranks first)."""
    a, b = list(reversed(chain(queue))), list(reversed(chain(reclaimer)))
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def gang_domains(job_hard: bool, regions: Sequence[Region], allocatable: Callable[[Region], Resources],
                 minimum: Resources, running: bool, max_hyper: int, max_domains: int) -> list[Region]:
    """The domains a starving job's eviction search scans (module docstring)."""
    if not job_hard:
        whole = [r for r in regions if r.hyper_node is None]
        return whole[-1:] or list(regions[-1:])
    tiers: dict[int, list[Region]] = defaultdict(list)
    for r in regions:
        if r.hyper_node is None:
            continue
        room = allocatable(r)
        if running or all(room.get(k, 0) >= v for k, v in minimum.items() if v > 0 and k != "pods"):
            tiers[r.tier or 0].append(r)
    out: list[Region] = []
    left = max_hyper
    for t in sorted(tiers, reverse=True):
        row = sorted(tiers[t], key=lambda r: r.hyper_node or "")
        if left <= 0:
            break
        out += row if len(row) <= left else row[len(row) - left:]
        left -= min(len(row), left)
    return out[:max_domains]


def gang_victim_violations(snap: Snapshot, who: str, action: str, victims: Sequence[Candidate], domain: frozenset[str],
                           cat: Catalogue, taken_before: Mapping[str, int], evicted_before: set[str],
                           allow_whole: bool, capacity_may_refuse: bool, queue: str, priority: int,
                           reclaimable: Callable[[str], bool], reclaim_check: ReclaimCheck) -> list[str]:
    """The victims one job took by a gang-aware action against the bundle rule: each a candidate of the action
    on the job's domain (``domain``: its nodes), and per victim job the union of whole bundles of that job
    over the domain's candidates as the plan before this job left them: the safe bundle taken whole (only
    cut when the capacity plugin may refuse some of it) or not at all, a whole bundle only all of it and
    only when ``allow_whole``. Reclaim under the capacity plugin's filter: every victim queue lets its
    victims go in some order (``reclaim_check``)."""
    out: list[str] = []
    mine: dict[str, list[Candidate]] = defaultdict(list)
    for c in victims:
        where = f"{who} victim {c.key}"
        why = candidate_refused(c, action, queue, priority, reclaimable(c.queue))
        if why is not None:
            out.append(f"{where} ({action}): {why}")
        if c.node not in domain:
            out.append(f"{where} ({action}): on node {c.node}, outside the job's domain")
        mine[c.group].append(c)
    cands = [c for c in cat.candidates.values() if c.node in domain and c.key not in evicted_before
             and c.group in mine and candidate_refused(c, action, queue, priority, reclaimable(c.queue)) is None]
    totals = group_totals(snap, {c.group for c in cands})
    bundles = domain_bundles(cands, cat, taken_before, totals.__getitem__)
    for gk in sorted(mine):
        took = {c.key for c in mine[gk]}
        for b in (b for b in bundles if b.job == gk):
            keys = {m.key for m in b.members}
            got = keys & took
            if not got:
                continue
            if b.kind == WHOLE:
                if not allow_whole:
                    out.append(f"{who}: takes pods of PodGroup {gk} that break its gang (a whole bundle), but "
                               f"{action}'s allowWholeBundle is false")
                elif got != keys:
                    out.append(f"{who}: takes {len(got)} of the {len(keys)} pods of PodGroup {gk}'s whole bundle "
                               f"on its domain ({', '.join(sorted(keys - got)[:3])} left)")
            elif got != keys and not capacity_may_refuse:
                out.append(f"{who}: takes {len(got)} of the {len(keys)} pods of PodGroup {gk}'s safe bundle on its "
                           f"domain ({', '.join(sorted(keys - got)[:3])} left): a bundle goes whole")
    if capacity_may_refuse:
        per_queue: dict[str, list[tuple[str, Resources]]] = defaultdict(list)
        for c in victims:
            per_queue[c.queue].append((c.key, c.pod.requests))
        for q in sorted(per_queue):
            why = reclaim_check(q, per_queue[q])
            if why is not None:
                out.append(f"{who}: reclaims pods of queue {q} the capacity plugin would not let go in any order "
                           f"({why})")
    return out


def reclaim_check_for(allocated: Mapping[str, Mapping[str, int]], deserved: Mapping[str, Mapping[str, int]],
                      listed: Mapping[str, frozenset[str]], guarantee: Mapping[str, Mapping[str, int]]
                      ) -> ReclaimCheck:
    """``gang_victim_violations``' reclaim check on these queue figures (``victims.reclaim_order``)."""
    def check(q: str, pods: list[tuple[str, Resources]]) -> str | None:
        order, why = reclaim_order(q, allocated[q], pods, deserved[q], listed[q], guarantee[q])
        return None if order is not None else why
    return check


def taken_counts(evicted: Iterable[str], cat: Catalogue) -> Counter[str]:
    """PodGroup -> pods evicted, for the evicted keys the catalogue knows."""
    return Counter(c.group for k in evicted if (c := cat.candidate(k)) is not None)
