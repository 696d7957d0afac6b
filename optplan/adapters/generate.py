"""Seeded synthetic cluster snapshots, in Kubernetes' own shape (as ``kubectl get -o yaml`` prints).

``generate(GenConfig(...))`` returns plain dicts: Nodes, Pods, PodGroups (scheduling.volcano.sh/v1beta1),
PodDisruptionBudgets (policy/v1) and one RepackRun (repack.volcano.sh/v1alpha1), and when asked for
HyperNodes, Queues, PriorityClasses and pending VCJobs (batch.volcano.sh/v1alpha1 Job), sorted by kind
(PriorityClass, Queue, Node, HyperNode, PodGroup, PodDisruptionBudget, Pod, Job, RepackRun), namespace
and name. The same config gives the
same objects; names are zero-padded (``node-0001``) so that sorted order is natural.

Distributions (every draw comes from ``random.Random`` streams derived from ``seed``; one stream per
concern, so changing e.g. ``pdb_share`` does not move a single pod):

- Nodes: ``node-<i>``; cards drawn uniformly from ``cards_per_node``; allocatable cpu and memory are
  ``cards × node_cpu_per_card`` and ``cards × node_memory_per_card``, ``pods: 110``. Pools are
  contiguous blocks of nearly equal size, label ``optplan.io/pool=pool-<i>``; with ``tainted_pools``
  every pool but pool-0 carries the taint ``optplan.io/pool=pool-<i>:NoSchedule``.
- Workloads are drawn until their cards reach ``round(occupancy × total cards)``: a pool (weighted by
  its cards), a kind, a pod size from ``pod_sizes`` (only sizes that fit the pool's largest node;
  the last workload is shrunk to the remainder), a gang size from ``gang_sizes``. Kinds: with
  probability ``non_volcano_share`` a Deployment (default-scheduler, no PodGroup); otherwise with
  probability ``serving_share`` a Kthena ModelServing of 1–3 ServingGroups (one PodGroup each,
  ``<ms>-<ordinal>``, ``minMember`` = all pods of the group, as Kthena's default gang policy does);
  otherwise a VCJob (PodGroup ``<job>-<jobUID>``, ``minMember = max(1, ceil(min_member_ratio ×
  size))``, computed exactly). All pods of a workload request the same cards, ``cards × cpu_per_card``
  cpu and ``cards × memory_per_card`` memory. Workloads go round-robin to namespaces team-a..team-d
  and are named ``job-<n>``, ``serve-<n>``, ``svc-<n>`` in draw order.
- Placement (spread, as a churned cluster looks): workloads are placed largest pod first, each pod on a
  uniformly random node of its pool with room for every resource; a workload that does not fit is
  dropped whole and replaced by fresh draws until the target is met or 200 draws in a row fail. No
  resource is ever over-committed. Every GPU pod has ``nodeSelector optplan.io/pool`` (and the
  toleration of its pool's taint), so moves stay in the pool.
- ``daemonset_pods``: one kube-proxy pod per node (100m cpu, 128Mi, tolerates everything).
- ``cpu_pressure``: after GPU placement, each node gets cpu-only pods (default-scheduler, pinned to
  its pool) of 1, 2, 4 or 8 cpus (2Mi of memory per millicore) totalling ``cpu_pressure ×
  U(0.5, 1.5)`` of its cpu, capped by what is free. With the default 8 of 12 cpus per card,
  receivers start to run out of cpu for GPU moves at a pressure of about 1/3.
- Per workload: ``repack.volcano.sh/protected=true`` with probability ``protected_share`` (copied to
  its PodGroups). Per PodGroup: a PDB with probability ``pdb_share``, selecting the group's pods,
  ``disruptionsAllowed`` uniform in ``0..size − minMember``. Per GPU pod: phase Pending (still
  bound, so it occupies but cannot move) with probability ``pending_share``, else Running.
- ``queues`` (stream ``<seed>/queues``), ``priority_classes`` (``<seed>/priorities``) and ``pending_jobs``
  (``<seed>/jobs``) draw from streams of their own and only add objects or fields, so at their
  defaults the output is what it was without them: see ``_queues``, ``_priorities``, ``_pending_jobs``.
- The RepackRun (DryRun) targets ``resource``, excludes ``repack.volcano.sh/protected=true``
  PodGroups and carries ``minFragImprovementPercent`` / ``maxPerRun`` when set.
"""

from __future__ import annotations

import functools
import itertools
import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from typing import Any

from optplan.errors import InputError
from optplan.models.quantity import MAX_MILLI, format_amount, to_milli
from optplan.runtime import gc_paused

POOL_LABEL = "optplan.io/pool"
PROTECTED_LABEL = "repack.volcano.sh/protected"
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
JOB_API = "batch.volcano.sh/v1alpha1"
SERVING_API = "workload.serving.volcano.sh/v1alpha1"
NAMESPACES = ("team-a", "team-b", "team-c", "team-d")
MAX_PODS = 110
_EPOCH = datetime(2025, 1, 1, tzinfo=UTC)
_KIND_ORDER = {"PriorityClass": 0, "Queue": 1, "Node": 2, "HyperNode": 3, "PodGroup": 4, "PodDisruptionBudget": 5,
               "Pod": 6, "Job": 7, "RepackRun": 8}
QUEUE_API = "scheduling.volcano.sh/v1beta1"
PRIORITY_CLASSES = (("high", 1000, 0.2), ("normal", 100, 0.5), ("low", 10, 0.3))
"""(name, value, share of workloads and pending jobs) with ``priority_classes``."""
JOB_GPU_SIZES = (1, 2, 4, 8)
_PENDING_START = 10_000_000
"""Seconds after the epoch of the first pending job: after every generated workload."""
_GI = 2**30
_MI = 2**20
_DEFAULT_TOLERATIONS = (
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
     "tolerationSeconds": 300},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
     "tolerationSeconds": 300},
)
_REFILL_FAILURES = 200
_UUID_CLEAR = ~((0xF000 << 64) | (0xC000 << 48))
_UUID_SET = (0x4000 << 64) | (0x8000 << 48)


MAX_NODES = 200_000
"""The largest cluster generated (the bench's largest is 10,000 nodes)."""


@dataclass(frozen=True)
class GenConfig:
    """What to generate; see the module docstring for the distributions."""

    nodes: int = 100
    cards_per_node: tuple[int, ...] = (8,)
    resource: str = "nvidia.com/gpu"
    pools: int = 2
    tainted_pools: bool = True
    occupancy: float = 0.6
    pod_sizes: tuple[tuple[int, float], ...] = ((1, 0.5), (2, 0.2), (4, 0.2), (8, 0.1))
    gang_sizes: tuple[tuple[int, float], ...] = ((1, 0.5), (2, 0.2), (4, 0.2), (8, 0.1))
    min_member_ratio: float = 0.75
    cpu_per_card: str = "8"
    memory_per_card: str = "64Gi"
    node_cpu_per_card: str = "12"
    node_memory_per_card: str = "128Gi"
    cpu_pressure: float = 0.0
    daemonset_pods: bool = True
    protected_share: float = 0.1
    pdb_share: float = 0.0
    pending_share: float = 0.0
    non_volcano_share: float = 0.02
    serving_share: float = 0.2
    seed: int = 0
    min_improvement: int | None = None
    max_pod_groups: int | None = None
    max_cards: int | None = None
    rack_size: int = 0
    """Nodes per tier-1 HyperNode (consecutive names); 0 means no HyperNodes."""
    racks_per_spine: int = 4
    topology_share: float = 0.0
    """Share of PodGroups (and pending jobs) given a networkTopology (half hard, half soft), when racks exist."""
    queues: int = 0
    """Leaf team queues under one (a single leaf) or two tenant parents; 0 keeps every PodGroup in ``default``."""
    priority_classes: bool = False
    """Emit PriorityClasses high/normal/low and give every workload and pending job one."""
    pending_jobs: int = 0
    """Pending VCJobs (not yet placed) to emit."""

    def __post_init__(self) -> None:
        def bad(name: str, message: str) -> InputError:
            return InputError(message, field=name)

        if not 1 <= self.nodes <= MAX_NODES:
            raise bad("nodes", f"must be within 1..{MAX_NODES:,}")
        if not self.cards_per_node or any(c < 1 for c in self.cards_per_node):
            raise bad("cards_per_node", "must list positive card counts")
        if not self.resource:
            raise bad("resource", "must not be empty")
        if not 1 <= self.pools <= self.nodes:
            raise bad("pools", f"must be within 1..nodes ({self.nodes})")
        if self.rack_size < 0 or self.racks_per_spine < 1:
            raise bad("rack_size", "rack_size must be >= 0 and racks_per_spine >= 1")
        for name in ("occupancy", "min_member_ratio", "cpu_pressure", "protected_share", "pdb_share",
                     "pending_share", "non_volcano_share", "serving_share", "topology_share"):
            v = getattr(self, name)
            if not 0 <= v <= 1:
                raise bad(name, f"must be within 0..1, got {v}")
        for name in ("pod_sizes", "gang_sizes"):
            dist = getattr(self, name)
            if not dist or any(n < 1 or w < 0 for n, w in dist) or sum(w for _, w in dist) <= 0:
                raise bad(name, "must be (size >= 1, weight >= 0) pairs with a positive total weight")
        if min(s for s, w in self.pod_sizes if w > 0) > max(self.cards_per_node):
            raise bad("pod_sizes", f"no pod size fits a node of at most {max(self.cards_per_node)} cards")
        for name in ("cpu_per_card", "memory_per_card", "node_cpu_per_card", "node_memory_per_card"):
            try:
                ok = to_milli(getattr(self, name)) >= 0
            except ValueError:
                ok = False
            if not ok:
                raise bad(name, f"not a non-negative quantity: {getattr(self, name)!r}")
        if self.min_improvement is not None and not 0 <= self.min_improvement <= 100:
            raise bad("min_improvement", "must be within 0..100")
        for name in ("max_pod_groups", "max_cards", "queues", "pending_jobs"):
            v = getattr(self, name)
            if v is not None and v < 0:
                raise bad(name, "must not be negative")


# ---- small helpers ----------------------------------------------------------------------------

@functools.lru_cache(maxsize=64)
def _milli(quantity: str) -> int:
    return to_milli(quantity)


def random_uid(rng: random.Random) -> str:
    """A random (version 4) UUID from the stream."""
    h = f"{(rng.getrandbits(128) & _UUID_CLEAR) | _UUID_SET:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def cpu_quantity(milli: int) -> str:
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def memory_quantity(milli: int) -> str:
    """Bytes (held in milli-units) as kubectl writes them: the largest exact binary suffix."""
    return str(format_amount("memory", milli))


def _weighted(rng: random.Random, dist: Sequence[tuple[int, float]]) -> int:
    values = [v for v, _ in dist]
    weights = [w for _, w in dist]
    return rng.choices(values, weights=weights)[0]


def timestamp(seconds: int) -> str:
    return (_EPOCH + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


_STAMP0 = timestamp(0)


class _IndexSet:
    """A set of ints with O(1) add, remove and uniform random choice (deterministic order)."""

    __slots__ = ("items", "pos")

    def __init__(self, items: Iterable[int] = ()) -> None:
        self.items: list[int] = list(items)
        self.pos: dict[int, int] = {x: i for i, x in enumerate(self.items)}

    def __len__(self) -> int:
        return len(self.items)

    def __contains__(self, x: int) -> bool:
        return x in self.pos

    def add(self, x: int) -> None:
        if x not in self.pos:
            self.pos[x] = len(self.items)
            self.items.append(x)

    def discard(self, x: int) -> None:
        i = self.pos.pop(x, None)
        if i is None:
            return
        last = self.items.pop()
        if i < len(self.items):
            self.items[i] = last
            self.pos[last] = i

    def choice(self, rng: random.Random) -> int:
        return self.items[rng.randrange(len(self.items))]


# ---- the cluster being filled -----------------------------------------------------------------

@dataclass
class _Workload:
    index: int
    kind: str  # "job" | "serving" | "deployment"
    pool: int
    cards: int  # per pod
    groups: list[int]  # pods per PodGroup (one entry for a job or a deployment)
    placed: list[list[int]] = field(default_factory=list)  # node index per pod, per group

    @property
    def total_cards(self) -> int:
        return self.cards * sum(self.groups)


class _Cluster:
    """Free resources per node and, per (pool, pod size), the nodes that still have the cards."""

    def __init__(self, cfg: GenConfig, cards: list[int], pool_of: list[int], sizes: Sequence[int]) -> None:
        self.cards = cards
        self.pool_of = pool_of
        self.cpu_card = _milli(cfg.cpu_per_card)
        self.mem_card = _milli(cfg.memory_per_card)
        self.free_cards = list(cards)
        self.free_cpu = [c * _milli(cfg.node_cpu_per_card) for c in cards]
        self.free_mem = [c * _milli(cfg.node_memory_per_card) for c in cards]
        self.free_pods = [MAX_PODS] * len(cards)
        self.sizes = sorted(set(sizes))
        self.buckets: dict[tuple[int, int], _IndexSet] = {}
        for pool in range(cfg.pools):
            members = [i for i, p in enumerate(pool_of) if p == pool]
            for s in self.sizes:
                self.buckets[pool, s] = _IndexSet(i for i in members if cards[i] >= s)

    def take(self, i: int, cpu: int, mem: int, cards: int = 0) -> None:
        self.free_cards[i] -= cards
        self.free_cpu[i] -= cpu
        self.free_mem[i] -= mem
        self.free_pods[i] -= 1
        if cards:
            for s in self.sizes:
                if s > self.free_cards[i]:
                    self.buckets[self.pool_of[i], s].discard(i)

    def give(self, i: int, cpu: int, mem: int, cards: int) -> None:
        self.free_cards[i] += cards
        self.free_cpu[i] += cpu
        self.free_mem[i] += mem
        self.free_pods[i] += 1
        for s in self.sizes:
            if s <= self.free_cards[i]:
                self.buckets[self.pool_of[i], s].add(i)

    def place_pod(self, rng: random.Random, pool: int, cards: int) -> int:
        """A uniformly random node of the pool where the pod fits; -1 when there is none."""
        bucket = self.buckets.get((pool, cards))
        cpu, mem = cards * self.cpu_card, cards * self.mem_card
        while bucket:
            i = bucket.choice(rng)
            if self.free_cpu[i] >= cpu and self.free_mem[i] >= mem and self.free_pods[i] >= 1:
                self.take(i, cpu, mem, cards)
                return i
            bucket.discard(i)  # cards fit but cpu, memory or pod slots do not; they only shrink here
        return -1

    def place(self, rng: random.Random, w: _Workload) -> bool:
        """All pods of the workload, or none."""
        done: list[int] = []
        for _ in range(sum(w.groups)):
            i = self.place_pod(rng, w.pool, w.cards)
            if i < 0:
                for j in done:
                    self.give(j, w.cards * self.cpu_card, w.cards * self.mem_card, w.cards)
                return False
            done.append(i)
        w.placed = []
        at = 0
        for n in w.groups:
            w.placed.append(done[at:at + n])
            at += n
        return True


# ---- generation -------------------------------------------------------------------------------

def generate(cfg: GenConfig) -> list[dict[str, Any]]:
    """A synthetic snapshot plus one RepackRun, deterministic for ``cfg`` (including its seed)."""
    with gc_paused():
        return _generate(cfg)


def _generate(cfg: GenConfig) -> list[dict[str, Any]]:
    streams = {k: random.Random(f"{cfg.seed}/{k}") for k in
               ("nodes", "workloads", "place", "attrs", "uids", "cpu")}
    n = cfg.nodes
    width = max(4, len(str(n)))
    node_names = [f"node-{i + 1:0{width}d}" for i in range(n)]
    cards = [streams["nodes"].choice(cfg.cards_per_node) for _ in range(n)]
    pool_of = [i * cfg.pools // n for i in range(n)]
    pool_cards = [0] * cfg.pools
    pool_max = [0] * cfg.pools
    for c, p in zip(cards, pool_of, strict=True):
        pool_cards[p] += c
        pool_max[p] = max(pool_max[p], c)
    cluster = _Cluster(cfg, cards, pool_of, [s for s, _ in cfg.pod_sizes])

    objs: list[dict[str, Any]] = [_node(cfg, name, c, pool_of[i]) for i, (name, c) in
                                  enumerate(zip(node_names, cards, strict=True))]
    if cfg.daemonset_pods:
        ds_uid = random_uid(streams["uids"])
        for i, name in enumerate(node_names):
            cluster.take(i, 100, 128 * _MI * 1000)
            objs.append(_daemon_pod(i, name, width, ds_uid, streams["uids"]))

    target = round(cfg.occupancy * sum(cards))
    draw = _Drawer(cfg, streams["workloads"], pool_cards, pool_max)
    planned: list[_Workload] = []
    remaining = target
    while remaining > 0:
        w = draw.workload(remaining)
        if w is None:
            break
        planned.append(w)
        remaining -= w.total_cards
    placed: list[_Workload] = []
    rng = streams["place"]
    for w in sorted(planned, key=lambda w: (-w.cards, -w.total_cards, w.index)):
        if cluster.place(rng, w):
            placed.append(w)
    deficit = target - sum(w.total_cards for w in placed)
    failures = 0
    while deficit > 0 and failures < _REFILL_FAILURES:
        w = draw.workload(deficit)
        if w is None:
            break
        if cluster.place(rng, w):
            placed.append(w)
            deficit -= w.total_cards
            failures = 0
        else:
            failures += 1

    for w in sorted(placed, key=lambda w: w.index):
        objs.extend(_workload_objects(cfg, w, node_names, streams["attrs"], streams["uids"]))
    if cfg.cpu_pressure > 0:
        objs.extend(_cpu_pods(cfg, cluster, node_names, width, streams["cpu"], streams["uids"]))
    objs.append(_repack_run(cfg))
    if cfg.rack_size > 0:
        objs.extend(_topology(cfg, node_names, objs, random.Random(f"{cfg.seed}/topology")))
    leaves: list[str] = []
    if cfg.queues > 0:
        queue_objs = _queues(cfg, cards, objs, random.Random(f"{cfg.seed}/queues"))
        leaves = [q["metadata"]["name"] for q in queue_objs if "parent" in q["spec"]]
        objs.extend(queue_objs)
    if cfg.priority_classes:
        objs.extend(_priorities(objs, random.Random(f"{cfg.seed}/priorities")))
    if cfg.pending_jobs > 0:
        objs.extend(_pending_jobs(cfg, pool_max, leaves, random.Random(f"{cfg.seed}/jobs")))
    objs.sort(key=object_order)
    return objs


def _topology(cfg: GenConfig, node_names: list[str], objs: list[dict[str, Any]],
              rng: random.Random) -> list[dict[str, Any]]:
    """HyperNodes (racks of ``rack_size`` consecutive nodes at tier 1, spines of ``racks_per_spine``
    racks at tier 2) and, on a share of PodGroups, a networkTopology: hard with the lowest tier that
    encloses its pods today (so it holds), or soft. Mutates the PodGroups in ``objs``."""
    racks = [node_names[i:i + cfg.rack_size] for i in range(0, len(node_names), cfg.rack_size)]
    out: list[dict[str, Any]] = []
    rack_of: dict[str, int] = {}
    for r, members in enumerate(racks):
        for n in members:
            rack_of[n] = r
        out.append({"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
                    "metadata": {"name": f"rack-{r:03d}"},
                    "spec": {"tier": 1, "members": [{"type": "Node", "selector": {"exactMatch": {"name": n}}}
                                                    for n in members]}})
    for s in range(0, len(racks), cfg.racks_per_spine):
        out.append({"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
                    "metadata": {"name": f"spine-{s // cfg.racks_per_spine:03d}"},
                    "spec": {"tier": 2, "members": [
                        {"type": "HyperNode", "selector": {"exactMatch": {"name": f"rack-{r:03d}"}}}
                        for r in range(s, min(s + cfg.racks_per_spine, len(racks)))]}})
    nodes_of: dict[tuple[str, str], set[str]] = {}
    for o in objs:
        if o["kind"] == "Pod" and o["spec"].get("nodeName"):
            g = (o["metadata"].get("annotations") or {}).get("scheduling.k8s.io/group-name")
            if g:
                nodes_of.setdefault((o["metadata"]["namespace"], g), set()).add(o["spec"]["nodeName"])
    for o in sorted((o for o in objs if o["kind"] == "PodGroup"),
                    key=lambda o: (o["metadata"]["namespace"], o["metadata"]["name"])):
        if rng.random() >= cfg.topology_share:
            continue
        nodes = nodes_of.get((o["metadata"]["namespace"], o["metadata"]["name"]), set())
        if rng.random() < 0.5:
            tier = 1 if len({rack_of[n] for n in nodes}) <= 1 else (
                2 if len({rack_of[n] // cfg.racks_per_spine for n in nodes}) <= 1 else None)
            if tier is not None:
                o["spec"]["networkTopology"] = {"mode": "hard", "highestTierAllowed": tier}
                continue
        o["spec"]["networkTopology"] = {"mode": "soft"}
    return out


def _owner_uid(obj: dict[str, Any]) -> str | None:
    owners = obj["metadata"].get("ownerReferences") or []
    return str(owners[0]["uid"]) if owners and owners[0]["kind"] != "DaemonSet" else None


def _queues(cfg: GenConfig, cards: list[int], objs: list[dict[str, Any]], rng: random.Random) -> list[dict[str, Any]]:
    """Tenant parents (two when there are at least two leaves) and ``cfg.queues`` leaf team queues; every
    workload's PodGroups (and its pods' queue label) go to one leaf, drawn with skewed weights so that
    some teams run above their deserved share. Quotas per resource (GPU cards, whole cpus, GiB):
    deserved splits the cluster among parents and each parent's among its leaves (floors, so sums never
    exceed the parent); capability is the cluster on parents and ``max(2 × deserved, allocated)`` capped by
    the cluster on leaves; the first leaf and its parent have a guarantee of a quarter of the leaf's
    deserved; the last leaf is ``reclaimable: false``. Mutates the PodGroups and pods in ``objs``."""
    n_parents = 1 if cfg.queues == 1 else 2
    parents = [f"tenant-{'ab'[p]}" for p in range(n_parents)]
    leaf_parent = [i * n_parents // cfg.queues for i in range(cfg.queues)]
    leaves = [f"{parents[leaf_parent[i]]}-team-{i:02d}" for i in range(cfg.queues)]
    units = {cfg.resource: 1000, "cpu": 1000, "memory": _GI * 1000}
    totals = {cfg.resource: sum(cards) * 1000, "cpu": sum(cards) * _milli(cfg.node_cpu_per_card),
              "memory": sum(cards) * _milli(cfg.node_memory_per_card)}
    weights = [rng.uniform(0.25, 2.0) for _ in leaves]
    leaf_of: dict[str, int] = {}
    for o in sorted((o for o in objs if o["kind"] == "PodGroup"),
                    key=lambda o: (o["metadata"]["namespace"], o["metadata"]["name"])):
        owner = _owner_uid(o)
        key = owner if owner is not None else f"{o['metadata']['namespace']}/{o['metadata']['name']}"
        if key not in leaf_of:
            leaf_of[key] = rng.choices(range(len(leaves)), weights=weights)[0]
        o["spec"]["queue"] = leaves[leaf_of[key]]
    allocated = [dict.fromkeys(units, 0) for _ in leaves]
    for o in objs:
        if o["kind"] != "Pod":
            continue
        owner = _owner_uid(o)
        if owner is None or owner not in leaf_of:
            continue
        leaf = leaf_of[owner]
        for where in ("labels", "annotations"):
            m = o["metadata"].get(where) or {}
            if "volcano.sh/queue-name" in m:
                m["volcano.sh/queue-name"] = leaves[leaf]
        if o["spec"].get("nodeName") and o["status"]["phase"] not in ("Succeeded", "Failed"):
            requests = o["spec"]["containers"][0]["resources"]["requests"]
            for r in units:
                allocated[leaf][r] += _milli(requests.get(r, "0"))
    out: list[dict[str, Any]] = []
    fmt = {cfg.resource: lambda u: str(u), "cpu": lambda u: cpu_quantity(u * 1000),
           "memory": lambda u: memory_quantity(u * units["memory"])}

    def amounts(per: dict[str, int]) -> dict[str, str]:
        return {r: fmt[r](per[r]) for r in units}

    # a quota is one quantity: at most MAX_MILLI milli-units (memory: about 8 PiB, less than 10,000 large nodes)
    total_u = {r: min(totals[r], MAX_MILLI) // units[r] for r in units}
    parent_deserved = [{r: total_u[r] * leaf_parent.count(p) // cfg.queues for r in units} for p in range(n_parents)]
    leaf_deserved: list[dict[str, int]] = []
    for i in range(cfg.queues):
        p = leaf_parent[i]
        leaf_deserved.append({r: parent_deserved[p][r] // leaf_parent.count(p) for r in units})
    guarantee = {r: leaf_deserved[0][r] // 4 for r in units}

    def queue(name: str, level: str, parent: str | None, deserved: dict[str, int], capability: dict[str, int],
              guaranteed: bool, reclaimable: bool) -> dict[str, Any]:
        spec: dict[str, Any] = {}
        if parent is not None:
            spec["parent"] = parent
        if guaranteed:
            spec["guarantee"] = {"resource": amounts(guarantee)}
        spec.update({"deserved": amounts(deserved), "capability": amounts(capability), "reclaimable": reclaimable,
                     "weight": 1})
        return {"apiVersion": QUEUE_API, "kind": "Queue",
                "metadata": {"name": name, "labels": {"optplan.io/queue-level": level}},
                "spec": spec, "status": {"state": "Open"}}

    for p, name in enumerate(parents):
        out.append(queue(name, "tenant", None, parent_deserved[p], total_u, p == 0, True))
    for i, name in enumerate(leaves):
        cap = {r: min(total_u[r], max(2 * leaf_deserved[i][r], -(-allocated[i][r] // units[r]))) for r in units}
        out.append(queue(name, "team", parents[leaf_parent[i]], leaf_deserved[i], cap, i == 0,
                         i != len(leaves) - 1 or len(leaves) == 1))
    return out


def _priority_class(name: str, value: int) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
            "value": value, "preemptionPolicy": "PreemptLowerPriority", "globalDefault": False,
            "description": f"optplan synthetic {name} priority"}


def _draw_class(rng: random.Random) -> tuple[str, int]:
    name, value, _ = rng.choices(PRIORITY_CLASSES, weights=[w for _, _, w in PRIORITY_CLASSES])[0]
    return name, value


def _priorities(objs: list[dict[str, Any]], rng: random.Random) -> list[dict[str, Any]]:
    """The PriorityClasses; every workload (by owner) draws one: its PodGroups get
    ``priorityClassName``, its pods ``priorityClassName`` and ``priority`` (as admission sets them).
    Mutates ``objs``."""
    class_of: dict[str, tuple[str, int]] = {}
    for o in objs:  # in generation order, so the first sight of each owner is deterministic
        if o["kind"] not in ("Pod", "PodGroup"):
            continue
        owner = _owner_uid(o)
        if owner is None:
            continue
        if owner not in class_of:
            class_of[owner] = _draw_class(rng)
        name, value = class_of[owner]
        o["spec"]["priorityClassName"] = name
        if o["kind"] == "Pod":
            o["spec"]["priority"] = value
    return [_priority_class(name, value) for name, value, _ in PRIORITY_CLASSES]


def _pending_jobs(cfg: GenConfig, pool_max: list[int], leaves: list[str], rng: random.Random) -> list[dict[str, Any]]:
    """``cfg.pending_jobs`` pending VCJobs ``pending-<n>`` (namespaces round-robin, one minute apart):
    one or two tasks (``master`` with one replica, or ``worker`` alone) of 1–4 replicas requesting
    1/2/4/8 cards (only sizes that fit the pool's largest node) per pod, pinned to a random pool;
    ``minAvailable`` between half and all the replicas; a leaf queue (``default`` without queues); a
    PriorityClass with ``priority_classes``; with racks, on ``topology_share`` of them a networkTopology,
    half hard (tier 1 or 2), half soft. Every draw is made whatever the options, so that toggling
    one option does not change the others' draws."""
    out: list[dict[str, Any]] = []
    for k in range(cfg.pending_jobs):
        ns = NAMESPACES[k % len(NAMESPACES)]
        name = f"pending-{k + 1:04d}"
        pool = rng.randrange(cfg.pools)
        sizes = [s for s in JOB_GPU_SIZES if s <= pool_max[pool]] or [pool_max[pool]]
        two = rng.random() < 0.5
        gpu = rng.choice(sizes)
        workers = rng.randint(1, 4)
        shape = [("master", 1, gpu), ("worker", workers, gpu)] if two else [("worker", workers, gpu)]
        total = sum(n for _, n, _ in shape)
        min_available = rng.randint(max(1, math.ceil(total / 2)), total)
        queue = rng.choice(leaves) if leaves else "default"
        class_name, _ = _draw_class(rng)
        topo_draw, hard_draw, tier = rng.random(), rng.random(), rng.choice((1, 2))
        uid = random_uid(rng)
        tasks = []
        for task, replicas, cards in shape:
            requests = {"cpu": cpu_quantity(cards * _milli(cfg.cpu_per_card)),
                        "memory": memory_quantity(cards * _milli(cfg.memory_per_card)), cfg.resource: str(cards)}
            tasks.append({"name": task, "replicas": replicas, "template": {
                "metadata": {"labels": {"volcano.sh/task-spec": task}},
                "spec": {"schedulerName": "volcano", "restartPolicy": "Never",
                         "nodeSelector": {POOL_LABEL: f"pool-{pool}"},
                         "tolerations": _pool_tolerations(cfg, pool),
                         "containers": [{"name": "main", "image": "registry.example/workload:1", "resources": {
                             "requests": requests, "limits": {cfg.resource: str(cards)}}}]}}})
        spec: dict[str, Any] = {"schedulerName": "volcano", "queue": queue, "minAvailable": min_available}
        if cfg.priority_classes:
            spec["priorityClassName"] = class_name
        if cfg.rack_size > 0 and topo_draw < cfg.topology_share:
            spec["networkTopology"] = ({"mode": "hard", "highestTierAllowed": tier} if hard_draw < 0.5
                                       else {"mode": "soft"})
        spec["tasks"] = tasks
        out.append({"apiVersion": JOB_API, "kind": "Job",
                    "metadata": {"name": name, "namespace": ns, "uid": uid,
                                 "creationTimestamp": timestamp(_PENDING_START + 60 * k),
                                 "labels": {"workload-type": "training"}},
                    "spec": spec, "status": {"state": {"phase": "Pending"}}})
    return out


def object_order(obj: dict[str, Any]) -> tuple[int, str, str]:
    meta = obj["metadata"]
    return _KIND_ORDER[obj["kind"]], meta.get("namespace", ""), meta["name"]


class _Drawer:
    """Draws workloads (kind, pool, pod size, gang size) from the configured distributions."""

    def __init__(self, cfg: GenConfig, rng: random.Random, pool_cards: list[int],
                 pool_max: list[int]) -> None:
        self.cfg = cfg
        self.rng = rng
        self.pools = range(cfg.pools)
        self.pool_cum = list(itertools.accumulate(pool_cards))
        self.gang_sizes = [s for s, _ in cfg.gang_sizes]
        self.gang_cum = list(itertools.accumulate(w for _, w in cfg.gang_sizes))
        self.pool_max = pool_max
        self.count = 0

    def workload(self, limit: int) -> _Workload | None:
        """The next workload, shrunk so that its cards do not exceed ``limit``; None if none fits."""
        cfg, rng = self.cfg, self.rng
        pool = rng.choices(self.pools, cum_weights=self.pool_cum)[0]
        r = rng.random()
        kind = "deployment" if r < cfg.non_volcano_share else (
            "serving" if rng.random() < cfg.serving_share else "job")
        sizes = [(s, w) for s, w in cfg.pod_sizes if s <= min(self.pool_max[pool], limit) and w > 0]
        if not sizes:
            return None
        size = _weighted(rng, sizes)
        gang = min(rng.choices(self.gang_sizes, cum_weights=self.gang_cum)[0], limit // size)
        groups = [gang]
        if kind == "serving":
            replicas = min(rng.randint(1, 3), limit // (size * gang))
            groups = [gang] * replicas
        self.count += 1
        return _Workload(self.count, kind, pool, size, groups)


def _node(cfg: GenConfig, name: str, cards: int, pool: int) -> dict[str, Any]:
    alloc = {
        "cpu": cpu_quantity(cards * _milli(cfg.node_cpu_per_card)),
        "memory": memory_quantity(cards * _milli(cfg.node_memory_per_card)),
        "pods": str(MAX_PODS),
        cfg.resource: str(cards),
    }
    spec: dict[str, Any] = {}
    if cfg.tainted_pools and pool > 0:
        spec["taints"] = [{"key": POOL_LABEL, "value": f"pool-{pool}", "effect": "NoSchedule"}]
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {
            "kubernetes.io/arch": "amd64", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
            "node.kubernetes.io/instance-type": f"gpu-{cards}x", POOL_LABEL: f"pool-{pool}"}},
        "spec": spec,
        "status": {"allocatable": alloc, "capacity": dict(alloc)},
    }


def pod_object(name: str, namespace: str, uid: str, node: str, requests: dict[str, str], *, phase: str = "Running",
         scheduler: str = "default-scheduler", labels: dict[str, str] | None = None,
         annotations: dict[str, str] | None = None, owner: dict[str, Any] | None = None,
         created: str = "", node_selector: dict[str, str] | None = None,
         tolerations: Sequence[dict[str, Any]] = (), affinity: dict[str, Any] | None = None,
         limits: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": uid,
                            "creationTimestamp": created or _STAMP0}
    if labels:
        meta["labels"] = labels
    if annotations:
        meta["annotations"] = annotations
    if owner is not None:
        meta["ownerReferences"] = [owner]
    resources: dict[str, Any] = {"requests": requests}
    if limits:
        resources["limits"] = limits
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "image": "registry.example/workload:1", "resources": resources}],
        "nodeName": node, "restartPolicy": "Always" if owner is None or owner["kind"] != "Job" else "Never",
        "schedulerName": scheduler,
    }
    if affinity is not None:
        spec["affinity"] = affinity
    if node_selector:
        spec["nodeSelector"] = node_selector
    spec["tolerations"] = [*tolerations, *_DEFAULT_TOLERATIONS]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": phase}}


def _daemon_pod(i: int, node: str, width: int, ds_uid: str, uids: random.Random) -> dict[str, Any]:
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}}}
    owner = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "kube-proxy", "uid": ds_uid,
             "controller": True, "blockOwnerDeletion": True}
    return pod_object(f"kube-proxy-{i + 1:0{width}d}", "kube-system", random_uid(uids), node,
                {"cpu": "100m", "memory": "128Mi"}, labels={"k8s-app": "kube-proxy"}, owner=owner,
                tolerations=({"operator": "Exists"},), affinity=affinity)


def _pool_tolerations(cfg: GenConfig, pool: int) -> list[dict[str, Any]]:
    if cfg.tainted_pools and pool > 0:
        return [{"key": POOL_LABEL, "operator": "Equal", "value": f"pool-{pool}", "effect": "NoSchedule"}]
    return []


def _workload_objects(cfg: GenConfig, w: _Workload, node_names: list[str], rng: random.Random,
                      uids: random.Random) -> list[dict[str, Any]]:
    """The PodGroups, PDBs and pods of one placed workload."""
    ns = NAMESPACES[w.index % len(NAMESPACES)]
    created = timestamp(w.index * 37)
    pool = f"pool-{w.pool}"
    selector = {POOL_LABEL: pool}
    tolerations = _pool_tolerations(cfg, w.pool)
    requests = {"cpu": cpu_quantity(w.cards * _milli(cfg.cpu_per_card)),
                "memory": memory_quantity(w.cards * _milli(cfg.memory_per_card)), cfg.resource: str(w.cards)}
    limits = {cfg.resource: str(w.cards)}
    protected = rng.random() < cfg.protected_share
    labels = {"workload-type": "inference" if w.kind == "serving" else "training",
              PROTECTED_LABEL: "true" if protected else "false"}
    owner_uid = random_uid(uids)
    out: list[dict[str, Any]] = []

    def pods(names: list[str], nodes: list[int], owner: dict[str, Any], scheduler: str,
             pod_labels: dict[str, str], annotations: dict[str, str]) -> int:
        running = 0
        for name, i in zip(names, nodes, strict=True):
            phase = "Pending" if rng.random() < cfg.pending_share else "Running"
            running += phase == "Running"
            out.append(pod_object(name, ns, random_uid(uids), node_names[i], requests, phase=phase, scheduler=scheduler,
                            labels=pod_labels, annotations=annotations, owner=owner, created=created,
                            node_selector=selector, tolerations=tolerations, limits=limits))
        return running

    if w.kind == "deployment":
        name = f"svc-{w.index:06d}"
        rs = f"{name}-{uids.getrandbits(32):08x}"
        owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs, "uid": owner_uid,
                 "controller": True, "blockOwnerDeletion": True}
        names = [f"{rs}-{k:02d}" for k in range(len(w.placed[0]))]
        pods(names, w.placed[0], owner, "default-scheduler", {"app": name}, {})
        return out

    if w.kind == "job":
        name = f"job-{w.index:06d}"
        owner = {"apiVersion": JOB_API, "kind": "Job", "name": name, "uid": owner_uid, "controller": True,
                 "blockOwnerDeletion": True}
        pg = f"{name}-{owner_uid}"
        size = w.groups[0]
        min_member = max(1, math.ceil(Fraction(str(cfg.min_member_ratio)) * size))
        pod_labels = {"volcano.sh/job-name": name, "volcano.sh/job-namespace": ns,
                      "volcano.sh/queue-name": "default", "volcano.sh/task-spec": "worker"}
        annotations = {GROUP_ANNOTATION: pg, "volcano.sh/job-name": name, "volcano.sh/queue-name": "default",
                       "volcano.sh/task-spec": "worker"}
        names = [f"{name}-worker-{k}" for k in range(size)]
        running = pods(names, w.placed[0], owner, "volcano", pod_labels, annotations)
        out.append(pod_group_object(pg, ns, labels, owner, min_member, running, created, random_uid(uids)))
        if rng.random() < cfg.pdb_share:
            out.append(_pdb(f"{pg}-pdb", ns, {"volcano.sh/job-name": name}, size, min_member, running, rng))
        return out

    name = f"serve-{w.index:06d}"
    owner = {"apiVersion": SERVING_API, "kind": "ModelServing", "name": name, "uid": owner_uid,
             "controller": True, "blockOwnerDeletion": True}
    for ordinal, nodes in enumerate(w.placed):
        pg = f"{name}-{ordinal}"
        size = len(nodes)
        group_labels = {**labels, "modelserving.volcano.sh/name": name,
                        "modelserving.volcano.sh/group-name": pg}
        pod_labels = {"modelserving.volcano.sh/name": name, "modelserving.volcano.sh/group-name": pg,
                      "modelserving.volcano.sh/role": "inference"}
        names = [f"{pg}-inference-0-{k}" for k in range(size)]  # k = 0 is the entry pod, the rest workers
        running = pods(names, nodes, owner, "volcano", pod_labels, {GROUP_ANNOTATION: pg})
        out.append(pod_group_object(pg, ns, group_labels, owner, size, running, created, random_uid(uids)))
        if rng.random() < cfg.pdb_share:
            match = {"modelserving.volcano.sh/group-name": pg}
            out.append(_pdb(f"{pg}-pdb", ns, match, size, size, running, rng))
    return out


def pod_group_object(name: str, ns: str, labels: dict[str, str], owner: dict[str, Any], min_member: int,
               running: int, created: str, uid: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": name, "namespace": ns, "uid": uid, "creationTimestamp": created,
                     "labels": dict(labels), "ownerReferences": [owner]},
        "spec": {"minMember": min_member, "queue": "default"},
        "status": {"phase": "Running", "running": running},
    }


def _pdb(name: str, ns: str, match: dict[str, str], size: int, min_member: int, running: int,
         rng: random.Random) -> dict[str, Any]:
    allowed = rng.randint(0, max(0, size - min_member))
    return {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"minAvailable": size - allowed, "selector": {"matchLabels": match}},
        "status": {"currentHealthy": running, "desiredHealthy": size - allowed, "disruptionsAllowed": allowed,
                   "expectedPods": size},
    }


def _cpu_pods(cfg: GenConfig, cluster: _Cluster, node_names: list[str], width: int, rng: random.Random,
              uids: random.Random) -> list[dict[str, Any]]:
    """cpu-only pods that take about ``cpu_pressure`` of each node's cpu (never more than is free)."""
    out: list[dict[str, Any]] = []
    node_cpu = _milli(cfg.node_cpu_per_card)
    for i, node in enumerate(node_names):
        pool = cluster.pool_of[i]
        budget = min(int(cfg.cpu_pressure * cluster.cards[i] * node_cpu * rng.uniform(0.5, 1.5)),
                     cluster.free_cpu[i])
        k = 0
        while budget >= 100 and cluster.free_pods[i] > 0:
            cpu = min(rng.choice((1000, 2000, 4000, 8000)), budget) // 100 * 100
            mem = cpu * 2 * _MI * 1000
            if mem > cluster.free_mem[i]:
                break
            cluster.take(i, cpu, mem)
            budget -= cpu
            k += 1
            out.append(pod_object(f"cpu-load-{i + 1:0{width}d}-{k:02d}", "services", random_uid(uids), node,
                            {"cpu": cpu_quantity(cpu), "memory": memory_quantity(mem)}, labels={"app": "cpu-load"},
                            node_selector={POOL_LABEL: f"pool-{pool}"},
                            tolerations=_pool_tolerations(cfg, pool)))
    return out


def _repack_run(cfg: GenConfig) -> dict[str, Any]:
    goal: dict[str, Any] = {"resource": cfg.resource}
    if cfg.min_improvement is not None:
        goal["minFragImprovementPercent"] = cfg.min_improvement
    spec: dict[str, Any] = {
        "mode": "DryRun", "goals": [goal],
        "scope": {"podGroups": {"exclude": {"selector": {"matchLabels": {PROTECTED_LABEL: "true"}}}}},
    }
    budget: dict[str, Any] = {}
    if cfg.max_pod_groups is not None:
        budget["podGroups"] = cfg.max_pod_groups
    if cfg.max_cards is not None:
        budget["resources"] = {cfg.resource: str(cfg.max_cards)}
    if budget:
        spec["maxPerRun"] = budget
    return {"apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackRun",
            "metadata": {"name": f"synthetic-{cfg.seed}"}, "spec": spec}
