"""The replay's ceiling: the ``oracle`` policy's cluster, where running pods are repacked for free at
every event, and the cluster each policy replays on (``cluster_for``).

The oracle (``OracleCluster``). Pods hold no node: at every allocate the engine asks whether the running
pods plus the gang it tries could be placed at all, re-placing every running pod anywhere at no cost (no
restart, no delay, no disruption counted). It answers with a relaxation that is exact for the cards:

- GPU cards: pods of c cards go on nodes of at least c cards. With every pod size and node size a power
  of two (openb: pods of 1, 2, 4, 8 cards, nodes of 1, 2, 4, 8), the running pods fit iff for every pod
  size s, the cards of the pods of s cards or more ≤ the cards of the nodes of s cards or more. Necessary
  for any sizes; sufficient for powers of two (placing sizes largest first, each node's free cards stay a
  multiple of the size being placed, so any choice works): the theoretical minimum, computed exactly.
- cpu, memory and pod slots are pooled over the cluster (the sum of the requests ≤ the sum of the
  capacities): a relaxation, never stricter than a real placement.
- GPU models (``gpu_spec``) are not checked: a relaxation too (no pod of openb's default or multigpu
  traces names one).

So whenever any placement — with any Repack, at any cost — could start a gang, the oracle starts it: at
each instant it admits a superset of what any Repack policy could. The queue order is the engine's
(Volcano's allocate: queue heads in creation order, gangs all or nothing). It is a ceiling *estimate*, not a
proven bound over a whole run: gangs started sooner change what runs later, and FIFO admission is not
monotone (an earlier small gang can hold the room a later large one needed), so a Repack policy can, on a
given trace, beat it on some metric. The report shows each policy's share of the oracle's gain and any
share above 100% says so.

``cluster_for`` gives the ``nobinpack`` policy a ``Cluster`` whose node choice is Volcano's without the
binpack plugin (``cluster.Cluster``'s ``spread``), the ``oracle`` an ``OracleCluster`` and every other policy
the binpack ``Cluster``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from optplan.experiments.replay.cluster import MAX_PODS, Cluster
from optplan.experiments.replay.config import ReplayConfig
from optplan.experiments.sim.online import SimNode, SimPod
from optplan.models.placement import BinpackWeights

ORACLE = "oracle"
NOBINPACK = "nobinpack"
_CPU, _MEM, _GPU = 0, 1, 2


def cards_from(node_cards: Sequence[int]) -> Counter[int]:
    """Cards of the nodes of at least s cards, for every size s that some node has."""
    sizes = Counter(node_cards)
    return Counter({s: sum(c * n for c, n in sizes.items() if c >= s) for s in sizes})


def gpu_room(cards: Counter[int], node_cards: Sequence[int], size: int,
             at_least: Counter[int] | None = None) -> int:
    """Most extra pods of ``size`` cards that fit beside pods of ``cards`` (size -> count) on nodes of
    ``node_cards`` cards, pods re-placed at will (the module docstring's count condition); ``at_least``:
    ``cards_from(node_cards)``, computed once by a caller that asks often."""
    if size <= 0:
        raise ValueError("size must be >= 1")
    room: int | None = None
    for s in sorted({*(c for c, n in cards.items() if n > 0), size}):
        if s > size:
            break
        if at_least is None:
            cap = sum(c for c in node_cards if c >= s)
        else:  # the cards of the nodes of the smallest size >= s
            bigger = [c for c in at_least if c >= s]
            cap = at_least[min(bigger)] if bigger else 0
        used = sum(c * n for c, n in cards.items() if c >= s)
        k = (cap - used) // size
        room = k if room is None else min(room, k)
    return max(room or 0, 0)


def packable(cards: Counter[int], node_cards: Sequence[int]) -> bool:
    """Whether pods of ``cards`` (size -> count) fit on nodes of ``node_cards`` (exact for powers of two)."""
    return all(sum(c * n for c, n in cards.items() if c >= s) <= sum(c for c in node_cards if c >= s)
               for s in cards)


class OracleCluster(Cluster):
    """Running pods re-placed freely at every event (module docstring): ``room`` is what a free repack
    could hold; ``best`` names node 0 for any pod with room (pods hold no node)."""

    def __init__(self, nodes: Sequence[SimNode], weights: BinpackWeights) -> None:
        super().__init__(nodes, weights, rescan=True)  # its own room: no per-node index
        self.node_cards = [int(c) for c in self.cl.cap[:, _GPU].tolist() if c > 0]
        self.at_least = cards_from(self.node_cards)
        self.cards: Counter[int] = Counter()
        self.used = np.zeros(3, dtype=np.int64)
        self.running = 0
        self.pool = self.cl.cap.sum(axis=0)
        self.slots = MAX_PODS * len(self.names)
        self._allocated = 0

    @property
    def allocated(self) -> int:
        return self._allocated

    def room(self, pod: SimPod) -> int:
        free = self.pool - self.used
        k = self.slots - self.running
        for r, q in ((_CPU, pod.cpu), (_MEM, pod.memory)):
            if q > 0:
                k = min(k, int(free[r]) // q)
        if pod.gpu > 0:
            k = min(k, gpu_room(self.cards, self.node_cards, pod.gpu, self.at_least))
        return max(k, 0)

    def fits(self, pod: SimPod) -> np.ndarray[Any, Any]:
        return np.array([self.room(pod) > 0])

    def best(self, pod: SimPod) -> int:
        return 0 if self.room(pod) > 0 else -1

    def take(self, i: int, pod: SimPod, device: int | None = None) -> None:
        """``device``: never given (the oracle policy counts whole cards only)."""
        if self.room(pod) <= 0:
            raise AssertionError(f"{pod.name} has no room in the oracle")  # pragma: no cover
        self.used += (pod.cpu, pod.memory, pod.gpu)
        self.running += 1
        self._allocated += pod.gpu
        if pod.gpu > 0:
            self.cards[pod.gpu] += 1
        self.version += 1

    def give_back(self, i: int, pod: SimPod, device: int | None = None) -> None:
        self.used -= (pod.cpu, pod.memory, pod.gpu)
        self.running -= 1
        self._allocated -= pod.gpu
        if pod.gpu > 0:
            self.cards[pod.gpu] -= 1
        self.version += 1
        self.freed = True

    def occupied_gpu_nodes(self) -> int:
        return 0  # pods hold no node: always packed, a Repack run has nothing to do


def cluster_for(nodes: Sequence[SimNode], cfg: ReplayConfig, rescan: bool = False) -> Cluster:
    """The cluster a replay under ``cfg`` runs on (module docstring); ``rescan``: ``Cluster``'s."""
    if cfg.policy == ORACLE:
        return OracleCluster(nodes, cfg.weights)
    return Cluster(nodes, cfg.weights, rescan, spread=cfg.policy == NOBINPACK)


# ---- share of the oracle's gain ----------------------------------------------------------------

SHARE_METRICS = ("usefulPercent", "waitMeanMinutes8", "waitP95Minutes8", "completionMeanMinutes8")
"""The summary metrics (``engine.ReplayResult.summary``) whose gain over ``none`` is compared with the
oracle's: read only through ``share_metrics`` so that a metric renamed there is renamed here."""
_EPS = 1e-9


def share_metrics(summary: dict[str, Any]) -> dict[str, float | None]:
    """The ``SHARE_METRICS`` of one replay's summary (None where the replay has no value)."""
    return {m: summary.get(m) for m in SHARE_METRICS}


def share_of_gain(value: float | None, base: float | None, ceiling: float | None) -> float | None:
    """Percent of the oracle's gain over the baseline that ``value`` achieves: 100 × (value − base) /
    (ceiling − base), the same for a metric to raise (allocation) or to lower (waits); None when the
    oracle gains nothing (or a value is missing). Above 100: the policy beat the oracle's estimate."""
    if value is None or base is None or ceiling is None or abs(ceiling - base) <= _EPS:
        return None
    return 100 * (value - base) / (ceiling - base)


def shares(summary: dict[str, Any], base: dict[str, Any], ceiling: dict[str, Any]) -> dict[str, float | None]:
    """``share_of_gain`` per ``SHARE_METRICS`` of one policy's summary, with ``none``'s and the oracle's."""
    p, b, c = share_metrics(summary), share_metrics(base), share_metrics(ceiling)
    return {m: share_of_gain(p[m], b[m], c[m]) for m in SHARE_METRICS}
