"""network-topology-aware's node scores as the greedy's state stands: the HyperNode binpack of a normal pod's
node, tier by tier (``HyperScores``, its sums and binpacks cached until a node of the HyperNode changes), and the
HyperNode fabric a topology job's pod is pulled by (``Fabric``: each node's rack, the HyperNodes above, the
lowest common one, the pull's score)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from optplan.models.snapshot import ROOT, Topology
from optplan.solvers.placement.binpack import hyper_binpack
from optplan.solvers.placement.context import Context, State

Row = tuple[tuple[float, str], ...]
ReqKey = tuple[tuple[str, int], ...]


def summed_use(ctx: Context, state: State, nodes: Iterable[str]) -> tuple[dict[str, int], dict[str, int]]:
    """The summed allocatable and use (allocatable less free room, as the state stands) of ``nodes``."""
    alloc: dict[str, int] = defaultdict(int)
    used: dict[str, int] = defaultdict(int)
    for n in nodes:
        free = state.cap.free[n]
        for r, v in ctx.snapshot.nodes[n].allocatable.items():
            alloc[r] += v
            used[r] += v - free.get(r, 0)
    return alloc, used


class HyperScores:
    """The network-topology-aware plugin's node score for pods of jobs without topology, on ``state``."""

    def __init__(self, ctx: Context, state: State) -> None:
        self.ctx = ctx
        self.state = state
        self._tiers: dict[str, Row] | None = None
        self._norm = 1.0
        self._free_tiers: list[float] = []
        """The tier factors of the tiers between the lowest and the root's where no HyperNode exists (1 each)."""
        self._sums: dict[str, tuple[dict[str, int], dict[str, int]]] = {}
        """HyperNode -> its allocatable and use summed (``sums``), dropped when a node of it changes."""
        self._binpack: dict[str, dict[ReqKey, float]] = {}
        """HyperNode -> a pod's sorted requests -> the HyperNode's binpack for it, dropped with ``_sums``."""
        self._seen = 0
        self._rows_of: dict[str, set[Row]] = {}
        """HyperNode -> the rows of ``tiers`` that name it."""
        self._row_scores: dict[Row, dict[ReqKey, float]] = {}
        """A row of ``tiers`` -> a pod's sorted requests -> ``row_score``, dropped with its HyperNodes'."""

    @property
    def tiers(self) -> dict[str, Row]:
        """Node -> (tier factor, its HyperNode of that tier, "" for none) for each tier HyperNodes have, for
        the plugin's node score (``row_score``; tier factor fading^(tier - 1), the configuration's
        ``normal_pod_fading``); empty when the scheduler configuration does not name network-topology-aware
        (``Context.hyper_weights`` None), turns its normal-pod binpack or its node order off, or the cluster has
        no HyperNode."""
        if self._tiers is None:
            topo = self.ctx.snapshot.topology
            out: dict[str, Row] = {}
            conf = self.ctx.scheduler
            fading = conf.normal_pod_fading
            if (self.ctx.hyper_weights is not None and topo.hyper_nodes and conf.normal_pod_binpack
                    and conf.topology_node_order):
                by_tier: dict[int, list[str]] = defaultdict(list)
                for h in sorted(topo.hyper_nodes):
                    by_tier[topo.hyper_nodes[h].tier].append(h)
                held: dict[tuple[str, int], str] = {}  # (node, tier) -> the tier's first HyperNode holding it
                for t, hs in by_tier.items():
                    for h in hs:
                        for n in topo.members[h]:
                            held.setdefault((n, t), h)
                # "": no HyperNode of the tier holds the node (full score); a tier whose HyperNode is the
                # same for every node adds the same to every node's score and is left out
                varied = [t for t in sorted(by_tier) if len({held.get((n, t), "") for n in topo.node_names}) > 1]
                for n in self.ctx.snapshot.nodes:
                    out[n] = row = tuple((fading ** (t - 1), held.get((n, t), "")) for t in varied)
                    for _f, h in row:
                        if h:
                            self._rows_of.setdefault(h, set()).add(row)
                tiers = [*by_tier, topo.top_tier]
                self._norm = sum(fading ** (t - 1) for t in range(min(tiers), max(tiers) + 1))
                self._free_tiers = [fading ** (t - 1) for t in range(min(tiers), max(tiers)) if t not in by_tier]
                if self._norm <= 0:  # fading 0 with no tier 1: Volcano scores no node
                    out = {}
            self._tiers = out
        return self._tiers

    def sync(self) -> None:
        """Drop the HyperNode sums and binpacks that the state's changes since the last call made stale."""
        log = self.state.touched
        if self._seen < len(log):
            tiers = self.tiers
            for n in set(log[self._seen:]):
                for _f, hn in tiers.get(n, ()):
                    if hn and self._sums.pop(hn, None) is not None:
                        self._binpack.pop(hn, None)
                        for row in self._rows_of.get(hn, ()):
                            self._row_scores.pop(row, None)
            self._seen = len(log)

    def sums(self, h: str) -> tuple[dict[str, int], dict[str, int]]:
        """A HyperNode's ``summed_use`` as the state stands, cached until a node of it changes (``sync``)."""
        out = self._sums.get(h)
        if out is None:
            out = self._sums[h] = summed_use(self.ctx, self.state, self.ctx.snapshot.topology.members[h])
        return out

    def row_score(self, row: Row, req_key: ReqKey) -> float:
        """The plugin's score of a node whose HyperNodes tier by tier are ``row``, for a pod's sorted requests
        (after ``sync``; cached until one of them changes): per tier the binpack of the node's HyperNode
        (``binpack``), 1 where no HyperNode of the tier holds the node, weighted and averaged over the tiers up to
        the virtual root's; × 100 × the plugin's weight."""
        known = self._row_scores.setdefault(row, {})
        out = known.get(req_key)
        if out is None:
            total = sum(self._free_tiers)
            for f, h in row:
                total += f * (self.binpack(h, req_key) if h else 1.0)
            out = known[req_key] = total / self._norm * 100 * self.ctx.region_weights.weight
        return out

    def binpack(self, h: str, req_key: ReqKey) -> float:
        """A HyperNode's binpack for a pod's requests (``req_key``) as the state stands (after ``sync``): per
        resource the plugin weighs, (used + request) / allocatable, averaged by weight; 0 when one overflows.
        Cached until a node of the HyperNode changes."""
        known = self._binpack.setdefault(h, {})
        out = known.get(req_key)
        if out is not None:
            return out
        alloc, used = self.sums(h)
        out = known[req_key] = float(hyper_binpack(dict(req_key), alloc, used, self.ctx.region_weights))
        return out


@dataclass
class Near:
    """A topology job's pods so far, for network-topology-aware's node score of its next pod
    (``Fabric.bonus``): ``allocated``, the sub-job's allocated HyperNode (``snapshot.ROOT`` for the cluster's
    virtual root, "" before its first pod; Volcano's ``JobAllocatedHyperNode``), moved to the lowest common
    HyperNode of it and each new pod's rack (``Greedy.place_near``); ``counts``: rack -> the job's pods on its
    nodes (running, placed); ``tasks``: every pod of the job (the sub-job's tasks, pending ones too)."""

    allocated: str
    counts: Counter[str]
    tasks: int


class Fabric:
    """The HyperNode tree as network-topology-aware's pull for a topology job's pod reads it."""

    def __init__(self, topo: Topology) -> None:
        self.topo = topo
        self._racks: dict[str, str] | None = None
        self._parents: dict[str, str] | None = None

    @property
    def racks(self) -> dict[str, str]:
        """Node -> its HyperNode of the lowest tier any HyperNode has (Volcano's ``FindHyperNodeForNode``; the
        first by name where two hold it); a node no such HyperNode holds is absent."""
        if self._racks is None:
            topo = self.topo
            out: dict[str, str] = {}
            if topo.hyper_nodes:
                low = min(h.tier for h in topo.hyper_nodes.values())
                for h in sorted(h for h, hn in topo.hyper_nodes.items() if hn.tier == low):
                    for n in topo.members[h]:
                        out.setdefault(n, h)
            self._racks = out
        return self._racks

    def ancestors(self, h: str) -> list[str]:
        """``h`` and the HyperNodes above it (by HyperNode members), up to the virtual root ``ROOT``."""
        if self._parents is None:
            topo = self.topo
            self._parents = {}
            for name in sorted(topo.hyper_nodes):
                for m in topo.hyper_nodes[name].members:
                    if m.type == "HyperNode" and m.exact_name is not None:
                        self._parents.setdefault(m.exact_name, name)
        out = [h]
        while out[-1] != ROOT and len(out) <= len(self._parents) + 1:
            out.append(self._parents.get(out[-1], ROOT))
        return out

    def lca(self, a: str, b: str) -> str:
        """The lowest common HyperNode of two (``ROOT`` for the virtual root; "" stands for none: the other)."""
        if not a or not b:
            return a or b
        above = set(self.ancestors(b))
        return next((h for h in self.ancestors(a) if h in above), ROOT)

    def near_score(self, rack: str, allocated: str) -> float:
        """network-topology-aware's score (0..1) of a node in ``rack`` for a pod whose sub-job's allocated
        HyperNode is ``allocated`` (``networkTopologyAwareScore``): 1 in that HyperNode, else (top - t) /
        (top - lowest) for the tier t of their lowest common HyperNode (top: the virtual root's tier); 0 for a
        node in no HyperNode."""
        if not rack or not allocated:
            return 0.0
        if rack == allocated:
            return 1.0
        topo = self.topo
        t = topo.tier(self.lca(rack, allocated))
        low, top = min(h.tier for h in topo.hyper_nodes.values()), topo.top_tier
        return (top - t) / (top - low) if low <= t <= top else 0.0

    def bonus(self, ranked: Iterable[str], near: Near, weight: float) -> dict[str, float]:
        """network-topology-aware's score for a topology job's pod (``batchNodeOrderFnForNetworkAwarePods``)
        per rack of the ``ranked`` nodes: ``near_score``, and where several racks share the highest, each of
        them adds the share of the job's pods on it (``scoreWithTaskNum``); × 100 × the plugin's ``weight``."""
        racks = self.racks
        bonus: dict[str, float] = {}
        for n in ranked:
            r = racks.get(n, "")
            if r not in bonus:
                bonus[r] = self.near_score(r, near.allocated)
        top = max(bonus.values())
        scale = 100.0 * weight
        tied = [r for r, b in bonus.items() if b == top]
        for r in bonus:
            extra = near.counts[r] / near.tasks if len(tied) > 1 and r in tied and r and near.tasks else 0.0
            bonus[r] = (bonus[r] + extra) * scale
        return bonus
