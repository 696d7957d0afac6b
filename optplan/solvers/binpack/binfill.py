"""A search for a packing into a given number of bins (``min_bins``' primal side, aimed at its bound).

A packing of the items into the ``m`` largest bins may waste at most ``sum(caps[:m]) - total``
capacity in all (the *allowance*).  Three parts:

* Construction: the bins are filled one at a time, largest first; the largest item left goes in
  (the hardest to place later), then a subset of the others chosen by a subset-sum table so that
  the bin is as full as possible (Gupta and Ho's minimum bin slack); among the subsets reaching
  that fill one is chosen at random, and now and then a less full one that the allowance still
  permits (perturbation, after Fleszar and Charalambous).  An item that starts no bin within the
  allowance is left over.
* Large neighbourhood search on the left-over items: empty a few bins (those holding two items that
  would make a full bin with a left-over one, the bins with room, random ones), pack their items and
  the left-over ones into them again (exactly by depth-first search when few, else by the
  construction), keep the result unless more is left over (and sometimes even then, to leave a
  plateau); restart from a new construction after ``_REPAIRS`` steps.
* Small instances are first searched exactly (depth-first, a node budget).

It is what finds the *perfect* packings of Falkenauer's triplet instances (every bin exactly full
with three items), where first-fit, one-shot minimum bin slack and CP-SAT miss.  Deterministic: the
seed, the input and the step budget decide the result.
"""

from __future__ import annotations

import bisect
import random
from collections import Counter
from collections.abc import Callable, Iterable, Sequence

__all__ = ["exact_pack", "slack_fill"]

_PERTURB = 0.1  # probability of choosing a random admissible fill instead of the fullest
_REPAIRS = 800  # search steps from one constructed packing before the next
_WORSE = 0.05  # probability of keeping a step that leaves more over (escapes plateaus)
_EXACT_ITEMS = 30  # pools this small are packed exactly
_RELEASE = 10  # bins emptied by one repair
_REPAIR_NODES = 3_000  # subsets tried by one repair
_EXACT_ITEMS_WHOLE = 90  # instances this small are first searched exactly ...
_WHOLE_NODES = 10_000  # ... with this many nodes
_NODES_PER_STEP = 5  # exact-search nodes that cost as much as one search step
_PARTNER_SAMPLES = 30


def slack_fill(
    sizes: Counter[int],
    caps_desc: Sequence[int],
    bins: int,
    *,
    seed: int,
    spend: Callable[[int], bool],
) -> list[Counter[int]] | None:
    """A packing of ``sizes`` into the first ``bins`` of ``caps_desc``, or None when none was found
    before ``spend(steps)`` (called with the work of each step: one per constructed packing or
    search step, one per ``_NODES_PER_STEP`` nodes of the exact search) said stop.

    Small instances (at most ``_EXACT_ITEMS_WHOLE`` items) are first searched exactly, with
    ``_WHOLE_NODES`` nodes; the large neighbourhood search then takes over."""
    caps = list(caps_desc[:bins])
    allowance = sum(caps) - sum(s * c for s, c in sizes.items())
    if allowance < 0 or not caps:
        return None
    if sum(sizes.values()) <= _EXACT_ITEMS_WHOLE:
        whole = _exact_pack(sorted(sizes.elements(), reverse=True), caps, _WHOLE_NODES, spend)
        if whole is not None or spend(0):
            return whole
    rng = random.Random(seed)
    steps = 0
    while not spend(1):
        packing, left = _one_try(sizes, caps, allowance, rng, perturb=_PERTURB if steps else 0.0)
        steps += 1
        if not left:
            return packing
        contents = packing + [Counter() for _ in caps[len(packing) :]]
        for _ in range(_REPAIRS):
            if spend(1):
                break
            left = _repair(contents, left, caps, allowance, rng)
            if not left:
                return [c for c in contents if c]
    return None


def _repair(
    contents: list[Counter[int]], left: Counter[int], caps: list[int], allowance: int, rng: random.Random
) -> Counter[int]:
    """One step of a large neighbourhood search on ``contents`` (changed in place) that minimises the
    total size left over: empty a few bins, pack their items and the left-over ones into them again
    (exactly when the pool is small, else minimum bin slack), keep the result unless more is left
    over.  The bins emptied first hold two items that would fill a bin with a left-over item (its
    likely partners), then random ones.  Returns what is left over now."""
    where: dict[int, list[int]] = {}
    for b, content in enumerate(contents):
        for s in content:
            where.setdefault(s, []).append(b)
    placed = sorted(where)
    released: set[int] = {b for b, content in enumerate(contents) if not content}
    quota = len(released) + rng.randint(2, _RELEASE)
    for u in rng.sample(sorted(left.elements()), min(3, sum(left.values()))):
        if not placed:
            break
        for _ in range(_PARTNER_SAMPLES):
            v = rng.choice(placed)
            i = rng.randrange(len(placed))
            lo = caps[0] - allowance - u - v
            w = next((x for x in placed[i:] + placed[:i] if lo <= x <= caps[0] - u - v), None)
            if w is None:
                continue
            bv, bw = rng.choice(where[v]), rng.choice(where[w])
            if bv != bw:
                released.update((bv, bw))
                break
    slack = [b for b, content in enumerate(contents)
             if b not in released and sum(s * c for s, c in content.items()) < caps[b]]
    released.update(rng.sample(slack, max(0, min(len(slack), quota - len(released)))))
    others = [b for b in range(len(contents)) if b not in released]
    released.update(rng.sample(others, max(0, min(len(others), quota - len(released)))))
    chosen = sorted(released, key=lambda b: (-caps[b], b))
    pool = left + sum((contents[b] for b in chosen), Counter())
    sub_caps = [caps[b] for b in chosen]
    sub: list[Counter[int]] | None = None
    if sum(pool.values()) <= _EXACT_ITEMS:
        sub = _exact_pack(sorted(pool.elements(), reverse=True), sub_caps, _REPAIR_NODES)
    if sub is not None:
        new_left: Counter[int] = Counter()
    else:
        sub, new_left = _one_try(pool, sub_caps, sum(sub_caps), rng, perturb=0.0)
    if sum(s * c for s, c in new_left.items()) > sum(s * c for s, c in left.items()) and rng.random() >= _WORSE:
        return left
    sub = sub + [Counter() for _ in sub_caps[len(sub) :]]
    for b, content in zip(chosen, sub, strict=True):
        contents[b] = content
    return new_left


def exact_pack(sizes: Counter[int], caps_desc: Sequence[int], nodes: int) -> list[Counter[int]] | None:
    """A packing of ``sizes`` into the bins ``caps_desc`` (descending; not all need be used) by
    the exact depth-first search, or None when there is none or ``nodes`` subsets did not find
    one."""
    return _exact_pack(sorted(sizes.elements(), reverse=True), list(caps_desc), nodes)


def _exact_pack(
    items: list[int], caps: list[int], nodes: int, spend: Callable[[int], bool] | None = None
) -> list[Counter[int]] | None:
    """``items`` into the bins ``caps`` (descending) by depth-first search: each bin takes the
    largest item left and then, fullest first, every subset that keeps the total waste within the
    allowance.  None when there is no packing, ``nodes`` subsets were tried or ``spend`` (charged one
    step per ``_NODES_PER_STEP`` nodes) said stop."""
    allowance = sum(caps) - sum(items)
    if allowance < 0:
        return None
    budget = [nodes]
    failed: set[tuple[int, int, tuple[tuple[int, int], ...]]] = set()  # (bin, allowance, items) known dead

    def dfs(left: Counter[int], b: int, allowance: int) -> list[Counter[int]] | None:
        if not left:
            return []
        if b == len(caps) or budget[0] <= 0:
            return None
        key = (caps[b], allowance, tuple(sorted(left.items())))
        if key in failed:
            return None
        largest = max(left)
        if largest > caps[b]:
            return None
        room = caps[b] - largest
        rest = left - Counter({largest: 1})
        for extra in _subsets(rest, room, room - allowance):
            budget[0] -= 1
            if spend is not None and budget[0] % _NODES_PER_STEP == 0 and spend(1):
                budget[0] = 0
            if budget[0] <= 0:
                return None
            used = sum(s * c for s, c in extra.items())
            below = dfs(rest - extra, b + 1, allowance - (room - used))
            if below is not None:
                return [extra + Counter({largest: 1}), *below]
        if budget[0] > 0:
            failed.add(key)
        return None

    return dfs(Counter(items), 0, allowance)


def _subsets(avail: Counter[int], room: int, least: int) -> list[Counter[int]]:
    """Every multiset from ``avail`` with total in ``[least, room]``, fullest first (at most
    ``_REPAIR_NODES``)."""
    keys = sorted(avail, reverse=True)
    suffix = [0] * (len(keys) + 1)  # total size of keys[j:]
    for j in range(len(keys) - 1, -1, -1):
        suffix[j] = suffix[j + 1] + keys[j] * avail[keys[j]]
    negated = [-k for k in keys]
    found: list[tuple[int, Counter[int]]] = []
    chosen: Counter[int] = Counter()

    def walk(i: int, total: int) -> None:
        if total >= least:
            found.append((total, +chosen))
        for j in range(max(i, bisect.bisect_left(negated, total - room)), len(keys)):
            if len(found) >= _REPAIR_NODES or total + suffix[j] < least:
                return
            s = keys[j]
            if chosen[s] >= avail[s]:
                continue
            chosen[s] += 1
            walk(j, total + s)
            chosen[s] -= 1

    walk(0, 0)
    found.sort(key=lambda f: -f[0])
    return [c for _, c in found]


def _one_try(
    sizes: Counter[int], caps: list[int], allowance: int, rng: random.Random, *, perturb: float
) -> tuple[list[Counter[int]], Counter[int]]:
    """Bins filled in order within the waste allowance: (bins, items left).  An item that starts
    no admissible bin is set aside (it is left over) and the next largest one is tried."""
    left = Counter(sizes)
    aside: Counter[int] = Counter()
    packing: list[Counter[int]] = []
    for cap in caps:
        content = None
        while left and content is None:
            head = max(left)
            rest = left - Counter({head: 1})
            room = cap - head
            extra = _random_fill(rest, room, max(0, room - allowance), rng, perturb) if head <= cap else None
            if extra is None:
                aside[head] += 1
                left = rest
                continue
            allowance -= room - sum(s * c for s, c in extra.items())
            left = rest - extra
            content = extra + Counter({head: 1})
        if content is None:
            break
        packing.append(content)
    return packing, aside + left


def split_counts(avail: Counter[int], room: int, sizes: Iterable[int]) -> list[tuple[int, int]]:
    """(size, copies) pieces, in the order of ``sizes``, that add up to each size's count (at most what fits in
    ``room``) by binary splitting: every count up to it is a sum of some of them."""
    pieces: list[tuple[int, int]] = []
    for s in sizes:
        m = min(avail[s], room // s)
        k = 1
        while m > 0:
            take = min(k, m)
            pieces.append((s, take))
            m -= take
            k *= 2
    return pieces


def reachable(pieces: Sequence[tuple[int, int]], room: int) -> list[int]:
    """Bitset DP over the pieces: entry i has bit t set when some of the first i pieces total t (<= room)."""
    mask = (1 << (room + 1)) - 1
    reach = 1
    history = [reach]
    for s, k in pieces:
        reach = (reach | (reach << (s * k))) & mask
        history.append(reach)
    return history


def pick(pieces: Sequence[tuple[int, int]], history: Sequence[int], target: int) -> Counter[int]:
    """The multiset of pieces totalling ``target`` (a reachable total of ``history``), read back from the DP."""
    chosen: Counter[int] = Counter()
    for i in range(len(pieces), 0, -1):
        if target == 0:
            break
        if not (history[i - 1] >> target) & 1:
            s, k = pieces[i - 1]
            chosen[s] += k
            target -= s * k
    return chosen


def _random_fill(
    avail: Counter[int], room: int, least: int, rng: random.Random, perturb: float
) -> Counter[int] | None:
    """A random multiset from ``avail`` whose total is the largest reachable ``<= room`` (or, with
    probability ``perturb``, any reachable total in ``[least, room]``); None if none is ``>= least``."""
    pieces = split_counts(avail, room, avail)
    rng.shuffle(pieces)
    history = reachable(pieces, room)
    reach = history[-1]
    best = reach.bit_length() - 1
    if best < least:
        return None
    target = best
    if perturb and rng.random() < perturb:
        window = reach >> least
        options = [least + i for i in range(window.bit_length()) if (window >> i) & 1]
        target = rng.choice(options)
    return pick(pieces, history, target)
