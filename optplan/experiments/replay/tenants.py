"""Queues in the replay (``optplan replay --queues``): seed 002's tenants, a documented mapping of the
trace's gangs onto them, and Volcano's queue rules for the replay's allocate, preempt and reclaim — placement's
own (``optplan.solvers.placement``), not a copy.

**The tree** (``seed002``): seed 002's queue tree (§4.3) for two tenants, written for a 128-GPU cluster
(``REFERENCE_GPUS``) and scaled to the replay's (each amount × cluster GPUs / 128, rounded down): per tenant a
subscription parent (deserved = capability) with team children (deserved ≤ capability = the parent's), a
flat pay-as-you-go queue (deserved = capability: the seed's payg queue always has d = c, so it is never over
its deserved) and a spot queue (deserved 0, capability by the seed's formula, ``quota.queues.spot_capacity``,
with no payg use: spot may fill the payg room and payg reclaims it). Alpha: subscription 40 (team-a 20,
team-b 10, team-c 10), payg 24; beta: subscription 24 (team-d 16, team-e 8), payg 8. Quotas name
``nvidia.com/gpu`` only: cpu and memory are not limited by queues. The seed's PriorityClasses come with it
(critical-job 1000, large-job 800, normal-job 100, debug-job 50 with preemptionPolicy Never, spot-job 50).
A file (``--queues FILE.yaml``: Queue and PriorityClass objects, the seed's shape, e.g. the queue part of
``instances/queues-demo.yaml``) is taken as written, not scaled; its PriorityClasses replace the seed's of the
same name, and the classes the mapping names must exist when the file brings its own.

**The mapping** (``assign``; seeded, per gang in trace order, three draws each so that one choice never
shifts another's): a leaf queue's type is its billing type (``quota.queues.classify_queues``: label
``platform.io/billing-type``, else its parent's, else its name): ``team`` (subscription), ``payg``, ``spot``.
By the openb ``qos`` of the gang's first pod: ``BE`` (best effort) → spot; ``Guaranteed`` → a team; the others
(``LS``, ``Burstable``, none) → payg with probability Σ payg deserved / (Σ payg + Σ team deserved), else a team.
Within a type, the leaf is drawn with probability ∝ its GPU deserved (spot: its capability). Priorities:
spot → spot-job; Guaranteed → critical-job; a gang of at least ``large_cards`` GPUs → large-job; a team gang
with probability ``debug_share`` → debug-job; the rest normal-job. A type without a leaf passes its gangs to
the next (spot → team → payg → spot).

**Admission** (``Book``): placement's ``QueueState`` on the tree (realCapability and effective deserved by
``quota.queues.account_queues``, with hierarchy), kept as pods are placed and leave: the queue order is
``queueorder.compare_queues`` (priority, then share), a pod is placed only within realCapability of its queue
and every ancestor (``QueueState.fit_reason``).

**Victims** (``plan_victims``): a snapshot of the running pods (each in its gang's PodGroup with its queue
and PriorityClass, started when it was placed) and the gangs that may evict, placed by placement's greedy
with its preempt and reclaim (``place.plan_placement``: the plan is validated); the replay carries out its
victims and bindings. ``may_evict`` is the cheap test that says whether such a call can help (a lower job
priority in the same queue, or the queue under its deserved with the request while a reclaimable queue is
over its own), so the snapshot is built only then.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from optplan.errors import InputError
from optplan.experiments.replay.snapshot import NAMESPACE, Running, SnapshotBuilder
from optplan.experiments.replay.trace import Trace, TraceGang
from optplan.experiments.sim.online import SimNode
from optplan.models.placement import BinpackWeights, PlacementPlan
from optplan.models.queues import ROOT, PriorityClass, Queue, QueueTree, VCJob
from optplan.models.snapshot import GROUP_NAME_ANNOTATION, Pod, PodGroup, Resources, Snapshot
from optplan.solvers.core.planner import PlanOptions
from optplan.solvers.core.protection import PREEMPTABLE_KEY
from optplan.solvers.placement.place import plan_placement
from optplan.solvers.placement.queueorder import QueueState, compare_queues, queue_order_key
from optplan.solvers.placement.victims import not_over_deserved, preemption_never, reclaimer_blocked
from optplan.solvers.quota.queues import classify_queues, spot_capacity, validate_queues

GPU = "nvidia.com/gpu"
TYPES = ("team", "payg", "spot")
"""Queue types, from the billing type: subscription (its teams), payg, spot."""
_TYPE_OF = {"subscription": "team", "payg": "payg", "spot": "spot"}
_FALLBACK = {"spot": "team", "team": "payg", "payg": "spot"}
REFERENCE_GPUS = 128
"""The cluster size the seed002 amounts are written for."""
SEED_CLASSES: tuple[tuple[str, int, str], ...] = (
    ("critical-job", 1000, "PreemptLowerPriority"), ("large-job", 800, "PreemptLowerPriority"),
    ("normal-job", 100, "PreemptLowerPriority"), ("debug-job", 50, "Never"), ("spot-job", 50, "PreemptLowerPriority"))
"""Seed 002's PriorityClasses (§5.2): name, value, preemptionPolicy."""
_SEED_TREE: tuple[tuple[str, str, str, str | None, int, int | None], ...] = (
    # name, tenant, billing, parent, deserved GPUs, capability GPUs (None: the spot formula)
    ("tenant-alpha-subscription", "alpha", "subscription", None, 40, 40),
    ("team-a", "alpha", "subscription", "tenant-alpha-subscription", 20, 40),
    ("team-b", "alpha", "subscription", "tenant-alpha-subscription", 10, 40),
    ("team-c", "alpha", "subscription", "tenant-alpha-subscription", 10, 40),
    ("tenant-alpha-payg", "alpha", "payg", None, 24, 24),
    ("tenant-alpha-spot", "alpha", "spot", None, 0, None),
    ("tenant-beta-subscription", "beta", "subscription", None, 24, 24),
    ("team-d", "beta", "subscription", "tenant-beta-subscription", 16, 24),
    ("team-e", "beta", "subscription", "tenant-beta-subscription", 8, 24),
    ("tenant-beta-payg", "beta", "payg", None, 8, 8),
    ("tenant-beta-spot", "beta", "spot", None, 0, None),
)
BUILTIN = "seed002"
EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
"""Trace time 0 as a wall time: pods start and victims are priced on this clock."""


def seed_classes() -> dict[str, PriorityClass]:
    return {n: PriorityClass(name=n, value=v, preemption_policy=p) for n, v, p in SEED_CLASSES}


def stamp(seconds: float) -> str:
    """Trace seconds as RFC 3339 on the ``EPOCH`` clock (microseconds)."""
    return (EPOCH + timedelta(microseconds=round(seconds * 1e6))).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def seed002(nodes: Sequence[SimNode]) -> list[Queue]:
    """Seed 002's tree scaled to the nodes' GPUs (module docstring)."""
    total = sum(n.gpu for n in nodes)

    def scaled(x: int) -> int:
        return x * total // REFERENCE_GPUS * 1000
    queues = []
    for name, tenant, billing, parent, deserved, cap in _SEED_TREE:
        labels = {"platform.io/billing-type": billing, "platform.io/tenant": tenant} if parent is None else {}
        quota = {GPU: scaled(deserved)}
        queues.append(Queue(name=name, labels=labels, parent=parent, deserved=quota,
                            capability={GPU: scaled(cap)} if cap is not None else {}))
    snap = Snapshot(nodes=SnapshotBuilder(nodes).nodes, queues={q.name: q for q in queues})
    spot = {t.spot_queue: t.capability[GPU] for t in spot_capacity(snap, GPU).tenants if t.spot_queue is not None}
    return [q.model_copy(update={"capability": {GPU: spot[q.name]}}) if q.name in spot else q for q in queues]


@dataclass(frozen=True)
class Tenancy:
    """The tree and each gang's queue (by gang index, the trace's order)."""

    name: str
    queues: dict[str, Queue]
    classes: dict[str, PriorityClass]
    leaf: tuple[str, ...]
    kind: tuple[str, ...]
    """team / payg / spot, per gang."""
    pclass: tuple[str, ...]
    value: tuple[int, ...]
    never: tuple[bool, ...]
    """The gang's PriorityClass says preemptionPolicy Never: it evicts nothing."""
    type_of: dict[str, str]
    """Leaf queue -> its type."""

    def describe(self) -> dict[str, Any]:
        """The tree and the mapping's counts, for the report."""
        gangs: dict[str, dict[str, int]] = {t: {} for t in TYPES}
        for k, c in zip(self.kind, self.pclass, strict=True):
            gangs[k][c] = gangs[k].get(c, 0) + 1
        tree = [{"name": q.name, "parent": q.parent, "type": self.type_of.get(q.name),
                 "deservedGpus": q.deserved.get(GPU, 0) // 1000,
                 "capabilityGpus": None if GPU not in q.capability else q.capability[GPU] // 1000}
                for q in self.queues.values()]
        return {"name": self.name, "queues": tree,
                "gangsByType": {t: dict(sorted(v.items())) for t, v in gangs.items()}}


def _gpus(q: Queue, kind: str) -> int:
    return (q.capability if kind == "spot" else q.deserved).get(GPU, 0)


def assign(trace: Trace, queues: Iterable[Queue], classes: Mapping[str, PriorityClass] | None = None, *,
           seed: int = 0, large_cards: int = 8, debug_share: float = 0.2, name: str = BUILTIN) -> Tenancy:
    """Each gang's queue and PriorityClass (module docstring); InputError on a tree Volcano would refuse."""
    qmap = {q.name: q for q in queues}
    all_classes = {**seed_classes(), **dict(classes or {})}
    if not 0 <= debug_share <= 1 or not math.isfinite(debug_share):
        raise InputError(f"must be within 0..1, got {debug_share}", field="debugShare")
    snap = Snapshot(queues=qmap, priority_classes=all_classes)
    bad = validate_queues(snap)
    if bad:
        raise InputError(bad[0].message, obj=f"Queue/{bad[0].queue}")
    tree = QueueTree(qmap)
    billing = classify_queues(tree)
    type_of = {q: _TYPE_OF[b.billing] for q, b in billing.items()
               if q in qmap and tree.is_leaf(q) and tree.is_open(q) and b.billing in _TYPE_OF}
    leaves: dict[str, list[tuple[str, int]]] = {t: [] for t in TYPES}
    for q, t in type_of.items():
        leaves[t].append((q, max(_gpus(qmap[q], t), 0)))
    if not any(leaves.values()):
        raise InputError("no Open leaf queue with a billing type (label platform.io/billing-type: "
                         "subscription, payg or spot)", field="queues")
    team_d = sum(w for _q, w in leaves["team"])
    payg_d = sum(w for _q, w in leaves["payg"])
    payg_p = payg_d / (payg_d + team_d) if payg_d + team_d > 0 else 0.5
    rng = random.Random(f"{seed}/queues")
    leaf, kind, pclass = [], [], []
    for g in trace.gangs:
        r_type, r_leaf, r_debug = rng.random(), rng.random(), rng.random()
        want = "spot" if g.qos == "BE" else "team" if g.qos == "Guaranteed" or r_type >= payg_p else "payg"
        while not leaves[want]:
            want = _FALLBACK[want]
        q = _draw(leaves[want], r_leaf)
        if want == "spot":
            c = "spot-job"
        elif g.qos == "Guaranteed":
            c = "critical-job"
        elif g.cards >= large_cards:
            c = "large-job"
        elif want == "team" and r_debug < debug_share:
            c = "debug-job"
        else:
            c = "normal-job"
        if c not in all_classes:
            raise InputError(f"the mapping names PriorityClass {c}, which the file does not define", field=c)
        leaf.append(q)
        kind.append(want)
        pclass.append(c)
    prio_snap = Snapshot(priority_classes=all_classes)
    return Tenancy(name=name, queues=qmap, classes=all_classes, leaf=tuple(leaf), kind=tuple(kind),
                   pclass=tuple(pclass), value=tuple(all_classes[c].value for c in pclass),
                   never=tuple(preemption_never(prio_snap, c) for c in pclass), type_of=type_of)


def _draw(options: list[tuple[str, int]], r: float) -> str:
    total = sum(w for _q, w in options)
    if total <= 0:
        return options[min(int(r * len(options)), len(options) - 1)][0]
    at = r * total
    for q, w in options:
        if at < w:
            return q
        at -= w
    return options[-1][0]


# ---- admission -----------------------------------------------------------------------------------

class Book:
    """Placement's queue accounting on the replay's cluster (module docstring)."""

    def __init__(self, tenancy: Tenancy, nodes: Sequence[SimNode]) -> None:
        self.tenancy = tenancy
        snap = Snapshot(nodes=SnapshotBuilder(nodes).nodes, queues=tenancy.queues,
                        priority_classes=tenancy.classes)
        self.qs = QueueState(snap)
        self.key = queue_order_key(self.qs)

    def order(self, leaves: Iterable[str]) -> list[str]:
        """Leaf queues in the capacity plugin's order on the allocations now."""
        return sorted(leaves, key=self.key)

    def first(self, a: str, b: str) -> bool:
        return compare_queues(self.qs, a, b) < 0

    def fits(self, leaf: str, req: Resources, n: int = 1) -> bool:
        """``n`` more pods of ``req`` stay within realCapability of the leaf and its ancestors."""
        return self.qs.fit_reason(leaf, {r: v * n for r, v in req.items()}) is None

    def add(self, leaf: str, req: Resources, sign: int = 1) -> None:
        self.qs.add(leaf, req, sign)

    def headroom(self, leaf: str, root: bool = True) -> int:
        """GPUs (milli) the leaf may still take: the least realCapability − allocated over it and its ancestors
        (``root=False``: not the root's, which victims of other queues free too)."""
        qs = self.qs
        return min(qs.real[q].get(GPU, 1 << 62) - qs.allocated[q].get(GPU, 0) for q in qs.chain(leaf)
                   if root or q != ROOT)

    def reclaim_sources(self) -> set[str]:
        """Leaf queues whose pods reclaim may take now: reclaimable, holding GPUs, over their deserved for a
        GPU pod (``victims.not_over_deserved``; deserved 0: always)."""
        qs = self.qs
        one = {GPU: 1000}
        return {q for q in self.tenancy.type_of if qs.reclaimable.get(q, True) and qs.allocated[q].get(GPU, 0) > 0
                and not_over_deserved(q, qs.allocated[q], one, qs.deserved[q], qs.listed[q]) is None}

    def may_reclaim(self, leaf: str, req: Resources, need: int, free: int) -> bool:
        """Can reclaim place ``need`` pods of ``req`` for the leaf, counting GPUs only? The leaf may reclaim
        for such a pod (the capacity plugin's PreemptiveFn, ``victims.reclaimer_blocked``), the capability
        of it and its ancestors but the root holds them all, and the cluster's ``free`` GPUs (milli) plus
        those of the other reclaimable queues over their deserved (``victims.not_over_deserved``; deserved
        0: every pod) hold them."""
        qs = self.qs
        if reclaimer_blocked(leaf, qs.allocated[leaf], req, qs.deserved[leaf], qs.real[leaf]) is not None:
            return False
        want = need * req.get(GPU, 0)
        if self.headroom(leaf, root=False) < want:
            return False
        return free + sum(self.reclaimable(leaf, req).values()) >= want

    def reclaimable(self, leaf: str, req: Resources) -> dict[str, int]:
        """The queues reclaim may take from for a pod of ``req`` of the leaf -> their GPUs (milli): none when the
        leaf may not reclaim (``victims.reclaimer_blocked``), else the other reclaimable queues over their
        deserved."""
        qs = self.qs
        if reclaimer_blocked(leaf, qs.allocated[leaf], req, qs.deserved[leaf], qs.real[leaf]) is not None:
            return {}
        out = {}
        for q in self.tenancy.type_of:
            held = qs.allocated[q].get(GPU, 0)
            if q == leaf or not qs.reclaimable.get(q, True) or held <= 0:
                continue
            if not_over_deserved(q, qs.allocated[q], req, qs.deserved[q], qs.listed[q]) is None:
                out[q] = held
        return out

    def room_with(self, leaf: str, spare: int, taken: Mapping[str, int]) -> int:
        """GPUs (milli) the leaf may take once victims are gone: the least, over it and its ancestors but the
        root, of realCapability − allocated plus what victims inside that queue free (``spare`` from the leaf,
        ``taken`` queue -> GPUs from the others)."""
        qs = self.qs
        best = 1 << 62
        for q in qs.chain(leaf):
            if q == ROOT:
                continue
            inside = sum(n for s, n in taken.items() if q in qs.chain(s))
            best = min(best, qs.real[q].get(GPU, 1 << 62) - qs.allocated[q].get(GPU, 0) + spare + inside)
        return best


# ---- victims -------------------------------------------------------------------------------------

@dataclass
class QueuedSnapshots:
    """Snapshots of the replay's state with queues and priorities (module docstring)."""

    base: SnapshotBuilder
    tenancy: Tenancy
    gang_index: dict[str, int]
    _pods: dict[str, Pod] = field(default_factory=dict)
    _groups: dict[str, PodGroup] = field(default_factory=dict)

    def group(self, g: TraceGang) -> PodGroup:
        pg = self._groups.get(g.name)
        if pg is None:
            k = self.gang_index[g.name]
            pg = self._groups[g.name] = self.base.group(g).model_copy(
                update={"queue": self.tenancy.leaf[k], "priority_class_name": self.tenancy.pclass[k]})
        return pg

    def pod(self, r: Running, started: float) -> Pod:
        stamp_ = stamp(started)
        p = self._pods.get(r.name)
        if p is None or p.node_name != r.node or p.start_time != stamp_:
            k = self.gang_index[r.gang.name]
            p = self._pods[r.name] = self.base.pod(r).model_copy(update={
                "priority_class_name": self.tenancy.pclass[k], "priority": self.tenancy.value[k],
                "start_time": stamp_, "creation_timestamp": stamp(r.gang.created)})
        return p

    def forget(self, name: str) -> None:
        self._pods.pop(name, None)

    def job(self, g: TraceGang, placed: int) -> VCJob:
        """A Pending VCJob of the gang's pods not placed yet (the placed ones run: ``held``)."""
        k = self.gang_index[g.name]
        job = SnapshotBuilder.job(g, stamp(g.created))
        return job.model_copy(update={"queue": self.tenancy.leaf[k], "priority_class_name": self.tenancy.pclass[k]})

    def build(self, running: Iterable[tuple[Running, float]], waiting: Sequence[TraceGang],
              keep: Callable[[int], bool] | None = None) -> Snapshot:
        """The snapshot: every node, the running pods, and a Pending VCJob per gang in ``waiting``. With
        ``keep`` (gang index -> may it give victims?), the running pods of the other gangs are summed into one
        protected pod per node and queue (``held-<queue>``, ``volcano.sh/preemptable: "false"``; the node's pod
        slots lowered by the pods it stands for), so that placement reads the same room and the same queue
        allocations from far fewer pods."""
        pods: dict[str, Pod] = {}
        groups: dict[str, PodGroup] = {}
        held: dict[tuple[str, str], list[Resources]] = {}
        for r, started in running:
            if keep is not None and not keep(self.gang_index[r.gang.name]):
                held.setdefault((r.node, self.tenancy.leaf[self.gang_index[r.gang.name]]), []).append(
                    self.base.pod(r).requests)
                continue
            p = self.pod(r, started)
            pods[p.key] = p
            pg = self.group(r.gang)
            groups[pg.key] = pg
        nodes = self.base.nodes
        if held:
            nodes = dict(nodes)
            slots: dict[str, int] = {}
            for (node, leaf), reqs in sorted(held.items()):
                total: dict[str, int] = {}
                for req in reqs:
                    for res, v in req.items():
                        total[res] = total.get(res, 0) + v
                name = f"held-{leaf}"
                pg = PodGroup(namespace=NAMESPACE, name=name, queue=leaf)
                groups[pg.key] = pg
                p = Pod(namespace=NAMESPACE, name=f"{name}-{node}", node_name=node, phase="Running",
                        scheduler_name="volcano", annotations={GROUP_NAME_ANNOTATION: name},
                        labels={PREEMPTABLE_KEY: "false"}, requests=total)
                pods[p.key] = p
                slots[node] = slots.get(node, 0) + len(reqs) - 1
            for node, extra in slots.items():
                if extra:
                    n = nodes[node]
                    alloc = {**n.allocatable, "pods": n.allocatable["pods"] - 1000 * extra}
                    nodes[node] = n.model_copy(update={"allocatable": alloc})
        jobs = {}
        for g in waiting:
            pg = self.group(g)
            groups[pg.key] = pg
            job = self.job(g, 0)
            jobs[job.key] = job
        return Snapshot(nodes=nodes, pods=dict(sorted(pods.items())),
                        pod_groups=dict(sorted(groups.items())), jobs=jobs, queues=self.tenancy.queues,
                        priority_classes=self.tenancy.classes)


def plan_victims(snap: Snapshot, weights: BinpackWeights, now: float) -> PlacementPlan:
    """Placement's greedy with preempt and reclaim for the snapshot's Pending jobs (validated)."""
    jobs = [j for j in snap.jobs.values() if j.namespace == NAMESPACE]
    return plan_placement(snap, jobs, "greedy", PlanOptions(deterministic=True), weights, stamp(now))
