"""The Repack rules every planner and the validator share: scope, movability, vacate candidates,
gang accounting, restart units and the five disruption dimensions of the seed.

Restart units (seed 000, 工作负载驱逐与重建机制). Evicting one pod may make its workload's controller
restart more pods than the plan moves. Every occupying pod p of a PodGroup g has a restart unit U(p),
the pods that restart when p is evicted, all of them occupying pods of g:

- by default {p};
- a VCJob (named by g's controller ownerReference, kind Job of ``batch.volcano.sh``) whose first policy
  matching ``PodEvicted`` (or ``*``) — the pod's task's ``policies`` first, then the job's — has action
  ``RestartJob``: every pod of g; ``RestartTask``: the pods of g of p's task (task from the annotation
  or label ``volcano.sh/task-spec``, else from the pod name ``<job>-<task>-<index>``; a pod whose task
  cannot be told restarts every pod of g, the safe side);
- a ModelServing (an ownerReference of kind ModelServing on g or on p, or p's label
  ``modelserving.volcano.sh/name``) with ``spec.recoveryPolicy: ServingGroupRecreate``: every pod of g
  (one PodGroup per ServingGroup); ``RoleRecreate`` — Kthena's default, also when the field is absent —:
  the pods of g of p's role replica (same labels ``modelserving.volcano.sh/role`` and
  ``modelserving.volcano.sh/role-id``; a pod without them restarts every pod of g, the safe side);
  ``None``: the default. Workloads missing from the snapshot keep the default.

For a plan, restarted(g) is the union of U(p) over the moved pods p of g. g is below minAvailable when
more than safe(g) = max(running − minMember, 0) Running pods of restarted(g) restart; its affected
cards are its whole R footprint then, else the R cards of restarted(g). Affected PodGroups, moved cards
and moved pods count what the plan moves. Without restart policies restarted(g) is the moved pods, and
these are the seed's definitions.

Disruption protection. Owners protect pods from disruption with ``karpenter.sh/do-not-disrupt:
"true"`` (annotation), ``cluster-autoscaler.kubernetes.io/safe-to-evict: "false"`` (annotation) and
Volcano's ``volcano.sh/preemptable: "false"`` (annotation or label; Volcano never makes such a pod a
victim of preempt or reclaim, and a Repack eviction is a disruption of the same kind); values are
compared case-insensitively. Unless the run says ``spec.disruptionProtection: Ignore``, an R-requesting
pod does not move when it, or a pod its eviction restarts (its restart unit), is protected: its node
cannot be vacated (``pod-disruption-protected``). Pods without R never move, so they never block.

Written once here and read by every planner, ``checks`` and the exact model's data: a pod's restart unit
(``restart_unit``), what a set of units restarts (``restart_total``) and what that does to its PodGroup
(``gang_impact``: below minAvailable, affected cards), the PDB budget evicting a pod takes
(``pdbs_charged``, ``pdb_use``: the Eviction API's rule, ``snapshot.eviction_need`` — a pod that is not
Ready may go without it under the PDB's ``unhealthyPodEvictionPolicy``; a pod under several PDBs is never
evicted, ``pod-under-several-pdbs``) and what moving pods takes from ``maxPerRun.resources``
(``budget_use``). The budgets themselves are here too: the run's limits (``budgets``: maxPerRun.podGroups
and .resources, each PDB's disruptionsAllowed; ``Budgets.left`` once some are spent), what moves charge them
(``spend``: their PodGroups, ``charged_group``; their requests; their PDBs) and the budgets a set of moves
overruns (``overruns``), read by every planner, the exact models and the validator.

Nothing here chooses anything; planners decide, and ``checks`` (run by ``validate``) re-checks with
these same rules.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from optplan.models.devices import WHOLE_GPU
from optplan.models.queues import POD_EVICTED, VCJob
from optplan.models.repack import (  # noqa: F401  (Weights, DIMENSIONS: re-exported)
    DIMENSIONS,
    IGNORE,
    Dimension,
    FreeGpusGoal,
    RepackPlan,
    RepackRun,
    Weights,
)
from optplan.models.results import Disruption, Restarted  # also imported from here
from optplan.models.snapshot import (
    EvictionNeed,
    ModelServing,
    Pod,
    PodDisruptionBudget,
    PodGroup,
    Snapshot,
    eviction_need,
)
from optplan.solvers.core import gpushare
from optplan.solvers.core.gpushare import GpuAsk
from optplan.solvers.core.oracle import Capacity, gpu_ask
from optplan.solvers.core.protection import (  # noqa: F401  (re-exported for the Repack planners)
    DO_NOT_DISRUPT,
    PREEMPTABLE_KEY,
    PROTECTION_MARKERS,
    SAFE_TO_EVICT,
    disruption_protection,
)

VOLCANO = "volcano"
SHARES_STAY = "node-holds-gpu-shares"
"""Why a node with devices that holds a GPU share is not vacated when shares do not move (``move_shares``)."""
RESTART_JOB = "RestartJob"
RESTART_TASK = "RestartTask"
SERVING_GROUP_RECREATE = "ServingGroupRecreate"
ROLE_RECREATE = "RoleRecreate"
ROLE_LABEL = "modelserving.volcano.sh/role"
ROLE_ID_LABEL = "modelserving.volcano.sh/role-id"
TASK_SPEC = "volcano.sh/task-spec"
"""Annotation and label the Volcano job controller puts on each pod: its task's name."""
MODEL_SERVING_LABEL = "modelserving.volcano.sh/name"
VCJOB_API_GROUP = "batch.volcano.sh"
MODEL_SERVING_API_GROUPS = ("workload.serving.volcano.sh", "workload.volcano.sh")
DISRUPTION_PROTECTED = "pod-disruption-protected"


SUBGROUP_TOPOLOGY = "podgroup-subgroup-topology"
"""Why a pod of a hard-topology subgroup (``RepackProblem.in_hard_subgroup``) does not move."""


def vcjob_of(snapshot: Snapshot, group: PodGroup) -> VCJob | None:
    """The VCJob named by the PodGroup's controller ownerReference, when it is in the snapshot."""
    ref = group.owner
    if ref is None or ref.kind != "Job" or ref.api_version.split("/")[0] != VCJOB_API_GROUP:
        return None
    return snapshot.jobs.get(f"{group.namespace}/{ref.name}")


@dataclass(frozen=True)
class Gang:
    """Gang facts of one PodGroup, read from the snapshot."""

    key: str
    running: int
    min_member: int
    footprint: int  # target resource held by all its occupying pods (milli)

    @property
    def safe(self) -> int:
        """Pods that can move without taking the group below minMember."""
        return max(self.running - self.min_member, 0)


def gang_impact(gang: Gang | None, running: int, cards: int) -> tuple[bool, int]:
    """Restart accounting for one PodGroup, written once (``disruption``, the greedy's incremental
    totals and the CP-SAT hint call it): whether restarting ``running`` of its Running pods, holding
    ``cards`` of R (milli), takes it below minAvailable, and the cards the plan affects in it — its whole
    R footprint then, else the restarted cards. A pod without a PodGroup (``gang`` None) never breaches."""
    if gang is not None and running > gang.safe:
        return True, gang.footprint
    return False, cards


@dataclass(frozen=True)
class RestartUnit:
    """The occupying pods of one PodGroup that restart when one of them is evicted (see the module)."""

    key: str
    """Identity: the pod's key for a default unit, ``<group>#task=<task>`` for a task, ``<group>#all``
    for the whole group."""
    group: str
    policy: str | None
    """RestartJob, RestartTask, ServingGroupRecreate or RoleRecreate; None for a default unit."""
    pods: tuple[str, ...]
    """Pod keys, sorted."""
    running: int
    """How many of them are Running."""
    cards: int
    """Target resource they hold (milli)."""
    whole_group: bool = False


def restart_total(units: Iterable[RestartUnit], running: int = 0, cards: int = 0) -> tuple[int, int]:
    """Running pods and R cards (milli) that the union of one PodGroup's restart units restarts: a
    whole-group unit covers every pod; the others are disjoint (a task's pods share one action), so
    they add up. ``running`` and ``cards``: default units already summed, which the greedy keeps as
    counts. Pass each unit once (by key)."""
    total_running, total_cards = running, cards
    for unit in units:
        if unit.whole_group:
            return unit.running, unit.cards
        total_running += unit.running
        total_cards += unit.cards
    return total_running, total_cards


@dataclass(frozen=True)
class Spent:
    """What moves charge the budgets: the PodGroups they affect (each counts once against
    maxPerRun.podGroups), the maxPerRun.resources amounts (milli) and the PDB disruptions."""

    pod_groups: frozenset[str] = frozenset()
    resources: dict[str, int] = field(default_factory=dict)
    pdbs: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Budgets:
    """What one run may spend: maxPerRun.podGroups (None: no limit), maxPerRun.resources (by name, milli)
    and each PDB's disruptionsAllowed (by key, in snapshot order). What a move charges them is
    ``RepackProblem.spend``; what a set of moves overruns, ``RepackProblem.overruns``."""

    pod_groups: int | None
    resources: dict[str, int]
    pdbs: dict[str, int]

    @property
    def per_run(self) -> bool:
        """maxPerRun limits something (PodGroups or resources)."""
        return self.pod_groups is not None or bool(self.resources)

    def left(self, spent: Spent) -> Budgets:
        """What is left once ``spent`` is charged (the limits ``spent`` affects lowered by it)."""
        groups = None if self.pod_groups is None else self.pod_groups - len(spent.pod_groups)
        return Budgets(groups, {r: b - spent.resources.get(r, 0) for r, b in self.resources.items()},
                       {k: b - spent.pdbs.get(k, 0) for k, b in self.pdbs.items()})


@dataclass(frozen=True)
class Overrun:
    """A budget a set of moves spends beyond its limit: ``kind`` (``POD_GROUPS``, ``RESOURCES``, ``PDBS``),
    ``key`` the resource or the PDB ("" for the PodGroups), ``used`` what the moves spend in all, ``limit``
    the budget."""

    kind: str
    key: str
    used: int
    limit: int

    @property
    def budget(self) -> str:
        """Its name: ``maxPerRun.podGroups``, ``maxPerRun.resources[r]``, ``PodDisruptionBudget k``."""
        return {POD_GROUPS: "maxPerRun.podGroups", RESOURCES: f"maxPerRun.resources[{self.key}]"}.get(
            self.kind, f"PodDisruptionBudget {self.key}")


POD_GROUPS, RESOURCES, PDBS = "podGroups", "resources", "pdbs"
"""The kinds of budget (``Overrun.kind``)."""


@dataclass
class RepackProblem:
    """A snapshot and a RepackRun, resolved into the facts every planner needs."""

    snapshot: Snapshot
    run: RepackRun
    weights: Weights = field(default_factory=Weights)
    freed_upper: int | None = None
    """An upper bound on freed nodes when known: occupied − the theoretical minimum's lower bound."""
    move_shares: bool = True
    """Whether GPU shares are Repack pods when R is ``nvidia.com/gpu`` (``shares_move``); the goal planners,
    which place by the totals, set it False."""
    _restart_units: dict[str, RestartUnit] = field(default_factory=dict, init=False, repr=False, compare=False)
    """Pod key -> its restart unit when it is not the default (filled one PodGroup at a time)."""
    _groups_with_units: set[str] = field(default_factory=set, init=False, repr=False, compare=False)
    _eviction_cache: dict[str, EvictionNeed] = field(default_factory=dict, init=False, repr=False, compare=False)
    """Pod key -> ``eviction_need`` (asked once per pod by the tables, the checks and the status)."""
    _admit_sets: Any = field(default=None, init=False, repr=False, compare=False)
    """``model.admit_sets``: the receivers each pod class admits, found once for the size decision and the model."""

    @property
    def resource(self) -> str:
        return self.run.spec.resource

    def request(self, pod: Pod) -> int:
        """The pod's R in milli-units: its request, or, for a GPU share that moves (``share_milli``), the
        milli-GPU it takes of its devices (a share of 0.3 GPU counts 300, ``300m`` cards)."""
        if self.share_milli:
            milli = self.share_milli.get(pod.key)
            if milli is not None:
                return milli
        return pod.request(self.resource)

    @cached_property
    def shares_move(self) -> bool:
        """GPU shares are Repack pods: R is ``nvidia.com/gpu``, ``move_shares`` is set, and a node that lists
        its GPUs (``Node.devices``) holds a running pod with a share (``Pod.gpu_share``). Then a share moves
        to a device of a receiver that can take it (the oracle's device-level fit), and its node can be
        vacated; else a node holding one is never vacated (``share_nodes``)."""
        return bool(self.share_milli)

    @cached_property
    def share_milli(self) -> dict[str, int]:
        """Pod key -> the milli-GPU of its devices, for every occupying pod holding a GPU share on a node with
        devices (a share on several whole devices: 1000 each), when shares move (see ``shares_move``)."""
        if self.resource != WHOLE_GPU or not self.move_shares:
            return {}
        snap = self.snapshot
        out: dict[str, int] = {}
        for name, pods in snap.pods_by_node.items():
            node = snap.nodes[name]
            if not node.devices:
                continue
            for p in pods:
                if p.gpu_share is not None and p.occupying:
                    ask = gpu_ask(p, node)
                    if not ask.none:
                        out[p.key] = ask.total_milli
        return out

    @cached_property
    def providers(self) -> list[str]:
        return [n.name for n in self.snapshot.providers(self.resource)]

    @cached_property
    def r_pods(self) -> dict[str, list[Pod]]:
        """Occupying pods that request R (or hold a GPU share, when shares move: ``request``), per provider,
        largest request first, then by name."""
        out: dict[str, list[Pod]] = {}
        for name in self.providers:
            pods = [p for p in self.snapshot.pods_by_node.get(name, ()) if self.request(p) > 0]
            out[name] = sorted(pods, key=lambda p: (-self.request(p), p.key))
        return out

    @cached_property
    def occupied(self) -> list[str]:
        return [n for n in self.providers if self.r_pods[n]]

    @cached_property
    def idle_providers(self) -> frozenset[str]:
        return frozenset(n for n in self.providers if not self.r_pods[n])

    def node_in_scope(self, name: str) -> bool:
        node = self.snapshot.nodes[name]
        return self.run.spec.scope.nodes.admits(name, node.labels)

    @cached_property
    def pod_groups_in_scope(self) -> frozenset[str]:
        scope = self.run.spec.scope.pod_groups
        return frozenset(k for k, g in self.snapshot.pod_groups.items() if scope.admits(k, g.labels))

    def pod_block(self, pod: Pod) -> str | None:
        """Why an R-requesting pod cannot move, or None when it is movable."""
        if pod.phase != "Running":
            return "pod-not-running"
        if pod.scheduler_name != VOLCANO:
            return "pod-not-scheduled-by-volcano"
        gk = pod.group_key
        if gk is None or gk not in self.snapshot.pod_groups:
            return "pod-without-podgroup"
        if gk not in self.pod_groups_in_scope:
            return "podgroup-out-of-scope"
        if self.protected_pods and any(k in self.protected_pods for k in self.restart_unit(pod).pods):
            return DISRUPTION_PROTECTED
        if self._pdbs_by_namespace and (refused := self.eviction_need(pod).refused) is not None:
            return refused
        if gk in self.hard_topology and not self.hard_topology_holds(gk, self.group_nodes(gk)):
            return "podgroup-topology-unsatisfied"
        if self.snapshot.hyper_nodes and self.in_hard_subgroup(pod):
            return SUBGROUP_TOPOLOGY
        return None

    def in_hard_subgroup(self, pod: Pod) -> bool:
        """The pod is in a subgroup of its PodGroup's ``subGroupPolicy`` (a partition of a VCJob's task) whose
        networkTopology is hard: Repack does not model subgroups, so it leaves such a pod where it is (a
        move could take the subgroup out of its HyperNode)."""
        group = self.snapshot.pod_groups.get(pod.group_key or "")
        if group is None or not group.sub_group_policy:
            return False
        found = group.subgroup_of(pod.labels)
        nt = found[0].network_topology if found is not None else None
        return nt is not None and nt.mode == "hard"

    @cached_property
    def protected_pods(self) -> dict[str, str]:
        """Occupying pods protected from disruption (pod key -> marker); empty when the run ignores
        the markers (``spec.disruptionProtection: Ignore``)."""
        if self.run.spec.disruption_protection == IGNORE:
            return {}
        return {p.key: why for p in self.snapshot.pods.values() if p.occupying and (why := disruption_protection(p))}

    # ---- the freeGpus goal: whole GPUs of a model left free on one node ------------------------------

    @property
    def free_gpus(self) -> FreeGpusGoal | None:
        return self.run.spec.goal.free_gpus

    def gpu_model_of(self, node: str) -> str | None:
        """The GPU model of a node that lists its devices (its first device's type), else None."""
        devices = self.snapshot.nodes[node].devices
        return devices[0].model if devices else None

    @cached_property
    def gpu_targets(self) -> list[str]:
        """Nodes where a ``freeGpus`` goal may leave its GPUs (by name): in ``scope.nodes``, listing at least
        ``count`` healthy devices of the goal's model (the type contains it, case-insensitive, as Volcano's
        ``nvidia.com/use-gputype`` reads it; any model when it names none)."""
        goal = self.free_gpus
        if goal is None:
            return []
        out = []
        for name in sorted(self.snapshot.nodes):
            model = self.gpu_model_of(name)
            if model is None or not self.node_in_scope(name):
                continue
            if goal.model is not None and goal.model.upper() not in model.upper():
                continue
            if sum(d.healthy for d in self.snapshot.nodes[name].devices) >= goal.count:
                out.append(name)
        return out

    def gpus_after(self, plan: RepackPlan) -> tuple[str, tuple[int, ...]] | None:
        """For a ``freeGpus`` goal: the plan's node (the one its pods move off; with no move, the target with the
        most untouched devices now, ties by name) and the indices of its devices no pod touches once the moves
        are applied (the oracle's ``Capacity``; a move that names its devices takes those). None when no node
        is a target and nothing moves."""
        sources = sorted({m.from_node for m in plan.moves})
        cap = Capacity(self.snapshot)
        if not sources:
            best = min(self.gpu_targets, key=lambda n: (-len(untouched(cap, n)), n), default=None)
            return None if best is None else (best, untouched(cap, best))
        pods = self.snapshot.pods
        for m in sorted(plan.moves, key=lambda m: (m.to_devices is None, m.pod)):
            if m.pod in pods and m.to_node in self.snapshot.nodes:
                cap.remove(pods[m.pod], m.from_node)
                cap.add(pods[m.pod], m.to_node, m.to_devices)
        return sources[0], untouched(cap, sources[0])

    # ---- network topology (HyperNodes) -------------------------------------------------------

    @cached_property
    def topology_groups(self) -> dict[str, tuple[str, int | None]]:
        """PodGroup -> (mode, highestTierAllowed) for groups with networkTopology, when the snapshot
        has HyperNodes (without HyperNodes no topology rule applies)."""
        if not self.snapshot.hyper_nodes:
            return {}
        out: dict[str, tuple[str, int | None]] = {}
        for k, g in self.snapshot.pod_groups.items():
            nt = g.network_topology
            if nt is not None:
                out[k] = (nt.mode, nt.highest_tier_allowed)
        return out

    @cached_property
    def hard_topology(self) -> dict[str, int | None]:
        return {k: t for k, (mode, t) in self.topology_groups.items() if mode == "hard"}

    @cached_property
    def soft_topology(self) -> frozenset[str]:
        return frozenset(k for k, (mode, _) in self.topology_groups.items() if mode == "soft")

    def group_nodes(self, group: str) -> list[str]:
        """Nodes of the PodGroup's occupying pods in the snapshot (with repeats)."""
        return [p.node_name for p in self.snapshot.pods_by_group.get(group, []) if p.node_name is not None]

    def hard_topology_holds(self, group: str, nodes: Iterable[str]) -> bool:
        """Some HyperNode of tier ≤ highestTierAllowed encloses every node."""
        return bool(self.snapshot.topology.enclosing(set(nodes), self.hard_topology[group]))

    def widening(self, group: str, nodes_after: Iterable[str]) -> int:
        """Tiers by which a soft PodGroup's lowest enclosing tier grows after the plan (never < 0)."""
        topo = self.snapshot.topology
        return max(topo.lowest_tier(set(nodes_after)) - topo.lowest_tier(set(self.group_nodes(group))), 0)

    @cached_property
    def node_block(self) -> dict[str, str]:
        """For each occupied provider that cannot be vacated, the reason."""
        out: dict[str, str] = {}
        for name in self.occupied:
            if not self.node_in_scope(name):
                out[name] = "node-out-of-scope"
                continue
            if name in self.share_nodes:
                out[name] = SHARES_STAY
                continue
            for pod in self.r_pods[name]:
                reason = self.pod_block(pod)
                if reason is not None:
                    out[name] = reason
                    break
        return out

    @cached_property
    def share_nodes(self) -> frozenset[str]:
        """Nodes whose GPUs are known one by one (``Node.devices``) that hold a running GPU share, when R is
        ``nvidia.com/gpu`` and shares do not move (``move_shares`` False): a share is then not an R pod, so
        such a node is never vacated (a node freed of whole cards but holding a share would not be free)."""
        if self.resource != WHOLE_GPU or self.shares_move:
            return frozenset()
        snap = self.snapshot
        return frozenset(name for name, pods in snap.pods_by_node.items() if snap.nodes[name].devices
                         and any(p.gpu_share is not None for p in pods))

    @cached_property
    def candidates(self) -> list[str]:
        """Occupied providers in node scope whose R-requesting pods are all movable."""
        return [n for n in self.occupied if n not in self.node_block]

    @cached_property
    def gangs(self) -> dict[str, Gang]:
        out: dict[str, Gang] = {}
        for key, group in self.snapshot.pod_groups.items():
            pods = self.snapshot.pods_by_group.get(key, [])
            out[key] = Gang(key=key, running=sum(1 for p in pods if p.phase == "Running"),
                            min_member=group.min_member, footprint=sum(self.request(p) for p in pods))
        return out

    # ---- budgets and PDBs (written once: the validator's checks, the greedy, the exact model's data) ----

    @cached_property
    def _pdbs_by_namespace(self) -> dict[str, list[PodDisruptionBudget]]:
        by_ns: dict[str, list[PodDisruptionBudget]] = defaultdict(list)
        for pdb in self.snapshot.pdbs.values():
            by_ns[pdb.namespace].append(pdb)
        return dict(by_ns)

    @cached_property
    def _pdb_label_index(self) -> dict[str, tuple[dict[tuple[str, str], list[int]], list[int]]]:
        """Per namespace: (a matchLabels pair -> positions of the PDBs that require it, positions of the
        PDBs without matchLabels). A PDB covers a pod only if the pod carries its first matchLabels
        pair, so a pod is checked against the PDBs of its own labels' pairs and the unindexed ones
        (a null selector matches nothing and is left out)."""
        out: dict[str, tuple[dict[tuple[str, str], list[int]], list[int]]] = {}
        for ns, pdbs in self._pdbs_by_namespace.items():
            by_pair: dict[tuple[str, str], list[int]] = defaultdict(list)
            rest: list[int] = []
            for i, pdb in enumerate(pdbs):
                if pdb.selector is None:
                    continue
                first = next(iter(pdb.selector.match_labels.items()), None)
                (by_pair[first] if first is not None else rest).append(i)
            out[ns] = (dict(by_pair), rest)
        return out

    def pdbs_covering(self, pod: Pod) -> list[str]:
        """Keys of the PDBs covering the pod, in snapshot order (a PDB covers pods of its namespace)."""
        return [b.key for b in self._covering(pod)]

    def _covering(self, pod: Pod) -> list[PodDisruptionBudget]:
        pdbs = self._pdbs_by_namespace.get(pod.namespace, ())
        if not pdbs:
            return []
        by_pair, rest = self._pdb_label_index[pod.namespace]
        maybe = [i for pair in pod.labels.items() for i in by_pair.get(pair, ())]
        return [pdbs[i] for i in sorted({*maybe, *rest}) if pdbs[i].covers(pod)]

    def eviction_need(self, pod: Pod) -> EvictionNeed:
        """What evicting the pod needs from the PDBs, as the Eviction API decides (``snapshot.eviction_need``:
        Ready condition, unhealthyPodEvictionPolicy, currentHealthy/desiredHealthy, phase, deletion)."""
        cached = self._eviction_cache.get(pod.key)
        if cached is None:
            cached = self._eviction_cache[pod.key] = eviction_need(pod, self._covering(pod))
        return cached

    def pdbs_charged(self, pod: Pod) -> list[str]:
        """Keys of the PDBs whose ``disruptionsAllowed`` evicting the pod takes one from (at most one): what
        every planner, the validator and the status count against the budgets. A pod the Eviction API lets
        go without a budget (not Ready under the unhealthy-pod policy, not Running, terminating) has none."""
        spends = self.eviction_need(pod).spends
        return [spends] if spends is not None else []

    def pdb_use(self, pods: Iterable[Pod]) -> Counter[str]:
        """PDB key -> how many of ``pods`` it is charged for (``pdbs_charged``): the disruptions moving them
        takes from it."""
        use: Counter[str] = Counter()
        for pod in pods:
            use.update(self.pdbs_charged(pod))
        return use

    @cached_property
    def pdb_cover(self) -> dict[str, list[str]]:
        """PDB keys charged for each pod that requests R on an occupied provider (``pdbs_charged``)."""
        if not self._pdbs_by_namespace:
            return {}
        return {pod.key: keys for name in self.occupied for pod in self.r_pods[name]
                if (keys := self.pdbs_charged(pod))}

    @cached_property
    def budgets(self) -> Budgets:
        """The run's budgets (maxPerRun, the PDBs): the limits every planner and validator reads."""
        mpr = self.run.spec.max_per_run
        return Budgets(mpr.pod_groups, dict(sorted(mpr.resources.items())),
                       {k: b.disruptions_allowed for k, b in self.snapshot.pdbs.items()})

    @staticmethod
    def charged_group(pod: Pod) -> str:
        """The PodGroup moving the pod charges to maxPerRun.podGroups (a pod without one: itself), as the
        disruption counts affected PodGroups."""
        return pod.group_key or f"<none>/{pod.key}"

    def spend(self, pods: Iterable[Pod]) -> Spent:
        """What moving ``pods`` charges the budgets: their PodGroups (``charged_group``), their requests
        on each maxPerRun resource (``budget_use``) and one disruption of each PDB charged for them
        (``pdb_use``)."""
        pods = list(pods)
        return Spent(frozenset(self.charged_group(p) for p in pods), self.budget_use(pods), dict(self.pdb_use(pods)))

    def overruns(self, pods: Iterable[Pod], before: Spent | None = None) -> list[Overrun]:
        """The budgets that moving ``pods`` as well as what ``before`` spent overruns: maxPerRun.podGroups,
        then maxPerRun.resources the pods request by name, then the PDBs by key."""
        b = self.budgets
        now = self.spend(pods)
        before = before or Spent()
        out = []
        if b.pod_groups is not None and len(groups := before.pod_groups | now.pod_groups) > b.pod_groups:
            out.append(Overrun(POD_GROUPS, "", len(groups), b.pod_groups))
        for r, used in now.resources.items():
            if used and (total := before.resources.get(r, 0) + used) > b.resources[r]:
                out.append(Overrun(RESOURCES, r, total, b.resources[r]))
        for k, n in sorted(now.pdbs.items()):
            if (total := before.pdbs.get(k, 0) + n) > b.pdbs[k]:
                out.append(Overrun(PDBS, k, total, b.pdbs[k]))
        return out

    def budget_use(self, pods: Iterable[Pod]) -> dict[str, int]:
        """maxPerRun.resources name -> what moving ``pods`` takes from it (milli), by name."""
        pods = list(pods)
        return {r: sum(p.request(r) for p in pods) for r in self.budgets.resources}

    def budget_freed_upper(self) -> int:
        """At most how many candidates the budgets let one plan vacate (a valid, cheap bound):
        maxPerRun.resources — the cheapest candidates first until the budget runs out; maxPerRun.podGroups
        — every vacated node moves some PodGroup, so at most the candidates of the P PodGroups that
        appear on most candidates."""
        bound = len(self.candidates)
        mpr = self.budgets
        for res, budget in mpr.resources.items():
            use = sorted(self.budget_use(self.r_pods[c])[res] for c in self.candidates)
            total = count = 0
            for u in use:
                if total + u > budget:
                    break
                total += u
                count += 1
            bound = min(bound, count)
        if mpr.pod_groups is not None:
            on: dict[str, int] = defaultdict(int)
            for c in self.candidates:
                for g in {p.group_key or "" for p in self.r_pods[c]}:
                    on[g] += 1
            bound = min(bound, sum(sorted(on.values(), reverse=True)[: mpr.pod_groups]))
        return bound

    @cached_property
    def resolved_pod_group_count(self) -> int:
        return len(self.pod_groups_in_scope)

    @cached_property
    def resolved_node_count(self) -> int:
        """Providers of R that scope.nodes admits as vacate targets."""
        return sum(1 for n in self.providers if self.node_in_scope(n))

    # ---- restart units (see the module docstring) ----------------------------------------------

    @cached_property
    def has_restart_policies(self) -> bool:
        """Some workload in the snapshot may restart more than the evicted pod."""
        snap = self.snapshot
        for job in snap.jobs.values():
            for policies in (job.policies, *(t.policies for t in job.tasks)):
                if any(p.action in (RESTART_JOB, RESTART_TASK) for p in policies):
                    return True
        return any(self.recovery_policy(ms) != "None" for ms in snap.model_servings.values())

    @staticmethod
    def recovery_policy(ms: ModelServing) -> str:
        """``spec.recoveryPolicy``, Kthena's default RoleRecreate when absent."""
        return ms.recovery_policy or ROLE_RECREATE

    def vcjob_of(self, group: PodGroup) -> VCJob | None:
        return vcjob_of(self.snapshot, group)

    def model_serving_of(self, group: PodGroup | None, pod: Pod) -> ModelServing | None:
        """The ModelServing owning the PodGroup or the pod, or named by the pod's label, when it is in
        the snapshot."""
        names = [ref.name for refs in ((group.owner_references if group is not None else ()), pod.owner_references)
                 for ref in refs if ref.kind == "ModelServing"
                 and ref.api_version.split("/")[0] in MODEL_SERVING_API_GROUPS]
        if pod.labels.get(MODEL_SERVING_LABEL):
            names.append(pod.labels[MODEL_SERVING_LABEL])
        for name in names:
            ms = self.snapshot.model_servings.get(f"{pod.namespace}/{name}")
            if ms is not None:
                return ms
        return None

    @staticmethod
    def task_of(pod: Pod, job: VCJob) -> str | None:
        """The pod's task: ``volcano.sh/task-spec`` (annotation, then label), else ``<job>-<task>-<index>``."""
        for source in (pod.annotations, pod.labels):
            if source.get(TASK_SPEC):
                return source[TASK_SPEC]
        prefix = f"{job.name}-"
        if pod.name.startswith(prefix):
            task, sep, index = pod.name[len(prefix):].rpartition("-")
            if sep and index.isdigit() and any(t.name == task for t in job.tasks):
                return task
        return None

    def _unit(self, gk: str, key: str, policy: str | None, pods: list[Pod], whole: bool = False) -> RestartUnit:
        return RestartUnit(key=key, group=gk, policy=policy, pods=tuple(sorted(p.key for p in pods)),
                           running=sum(1 for p in pods if p.phase == "Running"),
                           cards=sum(self.request(p) for p in pods), whole_group=whole)

    def _fill_units(self, gk: str) -> None:
        self._groups_with_units.add(gk)
        group = self.snapshot.pod_groups.get(gk)
        pods = self.snapshot.pods_by_group.get(gk, [])
        job = self.vcjob_of(group) if group is not None else None
        units = self._restart_units
        if job is not None:
            tasks = {p.key: self.task_of(p, job) for p in pods}
            for p in pods:
                task = tasks[p.key]
                action = job.action_on(POD_EVICTED, task)
                if action == RESTART_JOB or (action == RESTART_TASK and task is None):
                    units[p.key] = self._unit(gk, f"{gk}#all", action, pods, whole=True)
                elif action == RESTART_TASK:
                    units[p.key] = self._unit(gk, f"{gk}#task={task}", action,
                                              [q for q in pods if tasks[q.key] == task])
            return
        def role(q: Pod) -> tuple[str, str] | None:
            r, i = q.labels.get(ROLE_LABEL), q.labels.get(ROLE_ID_LABEL)
            return (r, i) if r is not None and i is not None else None

        for p in pods:
            ms = self.model_serving_of(group, p)
            policy = self.recovery_policy(ms) if ms is not None else "None"
            if policy == SERVING_GROUP_RECREATE or (policy == ROLE_RECREATE and role(p) is None):
                units[p.key] = self._unit(gk, f"{gk}#all", policy, pods, whole=True)
            elif policy == ROLE_RECREATE:
                mine = role(p)
                units[p.key] = self._unit(gk, f"{gk}#role={mine}", policy, [q for q in pods if role(q) == mine])

    def restart_unit(self, pod: Pod) -> RestartUnit:
        """The pods that restart when ``pod`` is evicted (itself by default)."""
        gk = pod.group_key
        if self.has_restart_policies and gk is not None and pod.occupying:
            if gk not in self._groups_with_units:
                self._fill_units(gk)
            unit = self._restart_units.get(pod.key)
            if unit is not None:
                return unit
        return RestartUnit(key=pod.key, group=gk or f"<none>/{pod.key}", policy=None, pods=(pod.key,),
                           running=int(pod.phase == "Running"), cards=self.request(pod))

    def restarted(self, moved: Iterable[Pod]) -> dict[str, Restarted]:
        """Per PodGroup key (``<none>/<pod>`` for a pod without one), what the moves restart."""
        units: dict[str, dict[str, RestartUnit]] = defaultdict(dict)
        for pod in moved:
            unit = self.restart_unit(pod)
            units[unit.group][unit.key] = unit
        out: dict[str, Restarted] = {}
        for gk, us in units.items():
            running, cards = restart_total(us.values())
            whole = [u for u in us.values() if u.whole_group]
            if whole:
                u = min(whole, key=lambda w: (w.policy == RESTART_TASK, w.policy or ""))
                out[gk] = Restarted(gk, u.policy, frozenset(u.pods), running, cards)
                continue
            # Units short of the whole group are disjoint: a task's pods share one action.
            policy = min((u.policy for u in us.values() if u.policy), default=None)  # one workload: one policy
            out[gk] = Restarted(gk, policy, frozenset(k for u in us.values() for k in u.pods), running, cards)
        return out

    # ---- disruption ------------------------------------------------------------------------------

    def disruption(self, moved: Iterable[Pod], dest: dict[str, str] | None = None) -> Disruption:
        """The five seed dimensions for a set of moved pods (the whole plan), restart units counted;
        with ``dest`` (pod key -> receiver), also the topology widening of soft-topology PodGroups."""
        count: dict[str, int] = defaultdict(int)
        cards: dict[str, int] = defaultdict(int)
        pods = 0
        moved = list(moved)
        for pod in moved:
            gk = pod.group_key or f"<none>/{pod.key}"
            count[gk] += 1
            cards[gk] += self.request(pod)
            pods += 1
        breached = 0
        affected = 0
        for gk, r in self.restarted(moved).items():
            breach, cards_hit = gang_impact(self.gangs.get(gk), r.running, r.cards)
            breached += breach
            affected += cards_hit
        widening = 0
        if dest is not None and self.soft_topology:
            for gk in sorted(set(count) & self.soft_topology):
                after = [dest.get(p.key, p.node_name) or "" for p in self.snapshot.pods_by_group.get(gk, [])]
                widening += self.widening(gk, after)
        return Disruption(affected_pod_groups=len(count), below_min_available=breached,
                          affected_cards=affected, moved_cards=sum(cards.values()), moved_pods=pods,
                          topology_widening=widening)

    def plan_disruption(self, plan: RepackPlan) -> Disruption:
        """The disruption of a plan, topology widening included."""
        return self.disruption((self.snapshot.pods[m.pod] for m in plan.moves),
                               {m.pod: m.to_node for m in plan.moves})


def untouched(cap: Capacity, node: str) -> tuple[int, ...]:
    """The device indices of a node that no pod holds any part of (healthy ones), by the oracle's state."""
    free = cap.gpu_free.get(node)
    if free is None:
        return ()
    devices = cap.nodes[node].devices
    return tuple(devices[d].index for d in gpushare.usable(free, GpuAsk(whole=1), cap.gpu_memory[node],
                                                           cap.gpu_slots[node])
                 if devices[d].healthy)


def explain(problem: RepackProblem, plan: RepackPlan, stuck: Iterable[str] = ()) -> dict[str, int]:
    """Why occupied nodes were not vacated, for plans that do not carry the greedy's reasons;
    ``stuck``: candidates with a pod that no receiver admits (``no-feasible-receiver``)."""
    counts: Counter[str] = Counter(problem.node_block.values())
    receivers = {m.to_node for m in plan.moves}
    freed = set(plan.freed_nodes)
    no_receiver = set(stuck)
    for c in problem.candidates:
        if c in freed:
            continue
        if c in receivers:
            counts["kept-as-receiver"] += 1
        else:
            counts["no-feasible-receiver" if c in no_receiver else "not-vacated"] += 1
    return dict(sorted(counts.items()))
