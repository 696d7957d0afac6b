"""The queues' state and order as Volcano's capacity plugin reads them, a rule shared by the planners and the
validator: ``QueueState`` (realCapability, deserved and the allocations as they grow, with the hierarchy),
``queue_share`` and ``compare_queues`` (QueueOrderFn), ``queue_order_key``, ``victim_queue_key`` and
``victims_in_order`` (the victims' queue order across queues, ``BuildVictimsPriorityQueue``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from fractions import Fraction
from functools import cmp_to_key
from typing import Any, Protocol, TypeVar

from optplan.models.quantity import format_milli
from optplan.models.queues import ROOT as ROOT_QUEUE
from optplan.models.queues import QueueTree
from optplan.models.snapshot import Resources, Snapshot
from optplan.solvers.quota.queues import UNLIMITED, QueueAccount, account_queues


class QueueState:
    """realCapability (fixed) and allocated (growing) per queue, with hierarchy."""

    def __init__(self, snap: Snapshot, accounts: Mapping[str, QueueAccount] | None = None) -> None:
        """``accounts``: the snapshot's ``account_queues(snap, hierarchical=True)`` when already computed."""
        self.tree = QueueTree(snap.queues)
        accounts = accounts if accounts is not None else account_queues(snap, hierarchical=True)
        self.real: dict[str, Resources] = {q: dict(a.real_capability) for q, a in accounts.items()}
        self.allocated: dict[str, dict[str, int]] = {q: dict(a.allocated) for q, a in accounts.items()}
        self.deserved: dict[str, Resources] = {q: dict(a.effective_deserved) for q, a in accounts.items()}
        self.listed: dict[str, frozenset[str]] = {q: a.deserved_listed for q, a in accounts.items()}
        self.guarantee: dict[str, Resources] = {q: dict(a.guarantee) for q, a in accounts.items()}
        self.reclaimable: dict[str, bool] = {q: a.reclaimable for q, a in accounts.items()}
        self._chains: dict[str, tuple[str, ...]] = {}
        self.session: dict[str, dict[str, int]] = {q: dict(a) for q, a in self.allocated.items()
                                                   if q in self.tree.queues and not self.tree.is_leaf(q)}
        """A parent queue's allocation as the scheduling session began: the capacity plugin computes every
        queue's share when the session opens and, as pods are allocated or evicted, recomputes only the leaf's
        (its AllocateFunc and DeallocateFunc add to the ancestors' allocation, not their share), so the queue
        order compares parents by their shares at the session's start (``compare_queues``)."""

    def chain(self, queue: str) -> tuple[str, ...]:
        """The queue and its ancestors (the tree is fixed: read once per queue)."""
        out = self._chains.get(queue)
        if out is None:
            out = self._chains[queue] = (queue, *self.tree.ancestors(queue))
        return out

    def limited(self, queue: str, resource: str) -> bool:
        """The queue's realCapability caps the resource (not ``UNLIMITED``: an exact model needs no row)."""
        return self.real[queue].get(resource, 0) < UNLIMITED

    def admission_reason(self, queue: str) -> str | None:
        if queue not in self.tree.queues:
            return f"queue {queue} does not exist"
        if queue == ROOT_QUEUE or not self.tree.is_leaf(queue):
            return f"queue {queue} is not a leaf queue"
        if not self.tree.is_open(queue):
            return f"queue {queue} is not Open"
        return None

    def fit_reason(self, queue: str, requests: Resources) -> str | None:
        items = sorted(requests.items())
        for q in self.chain(queue):
            allocated, real = self.allocated[q], self.real[q]
            for r, v in items:
                have = allocated.get(r, 0)
                cap = real.get(r, 0)
                if v > 0 and have + v > cap:
                    return (f"queue {q}: {r} allocated {format_milli(have)} + request {format_milli(v)} > "
                            f"realCapability {format_milli(cap)}")
        return None

    def add(self, queue: str, requests: Resources, sign: int = 1) -> None:
        for q in self.chain(queue):
            acc = self.allocated[q]
            for r, v in requests.items():
                acc[r] = acc.get(r, 0) + sign * v


def queue_share(qs: QueueState, queue: str, session: bool = False) -> tuple[Fraction, bool]:
    """The capacity plugin's share of a queue and whether it lists a deserved: the largest allocated /
    deserved over the resources its (effective) deserved lists above 0 (allocated above a deserved of 0
    is 1); a queue that lists none is best-effort, share 1. ``session``: a parent queue's share as the
    session began (``QueueState.session``), as the queue order reads it."""
    deserved = {r: v for r, v in qs.deserved.get(queue, {}).items() if v > 0}
    if not deserved:
        return Fraction(1), False
    alloc = qs.session.get(queue, qs.allocated.get(queue, {})) if session else qs.allocated.get(queue, {})
    return max(Fraction(alloc.get(r, 0), v) for r, v in deserved.items()), True


def compare_queues(qs: QueueState, a: str, b: str) -> int:
    """The capacity plugin's QueueOrderFn (hierarchical), negative when ``a`` goes first: higher
    ``spec.priority``; then, below the two queues' lowest common ancestor, the lower share of the two
    subtrees' tops (siblings under one parent: the queues themselves; a parent's share as the session began,
    ``QueueState.session``, a leaf's as it stands); on equal shares a queue with a
    deserved before a best-effort one; then the name (Volcano: creationTimestamp, then UID). A queue
    that does not exist goes last."""
    known_a, known_b = a in qs.tree.queues, b in qs.tree.queues
    if known_a != known_b:
        return -1 if known_a else 1
    if known_a:
        pa, pb = qs.tree.queues[a].priority, qs.tree.queues[b].priority
        if pa != pb:
            return -1 if pa > pb else 1
        ca, cb = qs.chain(a)[::-1], qs.chain(b)[::-1]  # root first
        i = next((k for k, (x, y) in enumerate(zip(ca, cb, strict=False)) if x != y), min(len(ca), len(cb)) - 1)
        (sa, da), (sb, db) = queue_share(qs, ca[i], session=True), queue_share(qs, cb[i], session=True)
        if sa != sb:
            return -1 if sa < sb else 1
        if da != db:
            return -1 if da else 1
    return (a > b) - (a < b)


def queue_order_key(qs: QueueState) -> Callable[[str], Any]:
    """A sort key for queue names in ``compare_queues`` order (on the allocations as they stand)."""
    def cmp(a: str, b: str) -> int:
        return compare_queues(qs, a, b)
    return cmp_to_key(cmp)


def victim_queue_key(qs: QueueState, preemptor: str) -> Callable[[str], Any]:
    """A sort key for the queues of one node's victims, the first evicted first (Volcano's
    ``BuildVictimsPriorityQueue`` across queues: the capacity plugin's VictimQueueOrderFn, then the reverse
    of the queue order): a queue whose lowest common ancestor with the ``preemptor``'s queue is deeper
    first (a sibling before a cousin), then the queue that ``compare_queues`` puts last (the higher share)."""
    mine = qs.chain(preemptor)[:0:-1]  # its ancestors, root first

    def level(q: str) -> int:
        theirs = qs.chain(q)[:0:-1]
        depth = 0
        for i, (x, y) in enumerate(zip(mine, theirs, strict=False)):
            if x != y:
                break
            depth = i
        return depth

    def cmp(a: str, b: str) -> int:
        la, lb = level(a), level(b)
        if la != lb:
            return -1 if la > lb else 1
        return -compare_queues(qs, a, b)
    return cmp_to_key(cmp)


class _Queued(Protocol):
    @property
    def queue(self) -> str: ...


V = TypeVar("V", bound=_Queued)


def victims_in_order(victims: list[V], queues: Callable[[], QueueState], preemptor: str,
                     key: Callable[[V], Any]) -> list[V]:
    """One node's victims in the order evicted (``key``: the order within a queue, ``tiers.victim_key``), the
    victims' queue order first when they come from several queues (``victim_queue_key``; ``queues`` gives the
    queues' state, asked only then)."""
    if len({v.queue for v in victims}) <= 1:
        return sorted(victims, key=key)
    rank = victim_queue_key(queues(), preemptor)
    return sorted(victims, key=lambda v: (rank(v.queue), key(v)))
