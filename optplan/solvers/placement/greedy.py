"""One job's turn in Volcano's actions, simulated on a ``State`` (``Greedy``): a gang is dry-run region
by region (``place``, one loop, ``dry_run``, for allocate and, given the job's ``Rules``, for preempt and
reclaim: a pod that fits nowhere then evicts on the first node whose victims make room), an admitted
job's further pods come one per turn (``extend``), and the node order and scores are kept here. The
actions over all the jobs are ``allocate`` and ``evict``; the rules, the package docstring."""

from __future__ import annotations

import hashlib
from bisect import bisect_left, insort
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from fractions import Fraction
from itertools import groupby
from typing import Any

from optplan.models.devices import WHOLE_GPU
from optplan.models.placement import Binding, JobPlacement
from optplan.models.queues import JobTask, VCJob
from optplan.models.snapshot import ROOT, Pod, Resources
from optplan.solvers.core.oracle import POD_SLOT, constraint_signature, share_signature
from optplan.solvers.placement.binpack import binpack_score, hyper_binpack
from optplan.solvers.placement.context import Context, State, Statement
from optplan.solvers.placement.hyperscore import Fabric, HyperScores, Near, summed_use
from optplan.solvers.placement.jobs import (
    Region,
    gang_shortfall,
    gang_steps,
    held_pods,
    job_regions,
    own_groups,
    plugin_view,
    preemptor_order,
    replica_label,
    starving,
    task_pos,
)
from optplan.solvers.placement.nodeorder import MAX_NODE_SCORE, node_list, nodeorder_score
from optplan.solvers.placement.partitions import (
    evicts_anywhere,
    partition_gradient,
    partition_pending,
    partition_possible,
    partition_shortfall,
    partitioned,
)
from optplan.solvers.placement.queueorder import victims_in_order
from optplan.solvers.placement.safety import pdb_over
from optplan.solvers.placement.tiers import node_victims, preemptee_refused, victim_key
from optplan.solvers.placement.victims import Candidate, Catalogue, Rules, dims, reclaimer_blocked


def placed_reason(ctx: Context, job: VCJob, n: int, where: str) -> str:
    """'n of N pods placed[ in <region>][ (k beyond minAvailable m)]'; for a running gang, of its pending
    pods, next to its running ones."""
    running = sum(ctx.held_count(job.key).values())
    extra = n - ctx.need(job)[1]
    more = f" ({extra} beyond minAvailable {job.min_available})" if extra > 0 else ""
    if running:
        return f"{n} of {job.replicas - running} pending pods placed{where}, next to its {running} running{more}"
    return f"{n} of {job.replicas} pods placed{where}{more}"


def _gang_result(job: VCJob, placed: Counter[str], bindings: list[Binding], why: str | None,
                 held: Counter[str], pending: int, parts: str | None = None) -> tuple[list[Binding], str | None]:
    """A dry run's outcome: the bindings in task order when the gang is ready and at least one pod is
    placed (Volcano keeps no solution without an operation), else why not. ``parts``: why its whole
    partitions do not make it ready (``partition_shortfall``)."""
    short = gang_shortfall(job, placed, held) or parts
    if short is None and not bindings:
        short = f"0 of its {pending} pending pods placed"
    if short is None:
        return sorted(bindings, key=lambda b: (task_pos(job, b.task), b.index)), None
    return bindings, f"{short}; {why}" if why else short


def least_requests(pods: list[Pod]) -> Resources:
    """Per resource every one of ``pods`` requests, the least any of them requests (what each placed pod
    takes at least)."""
    if not pods:
        return {}
    common = set(pods[0].requests).intersection(*(p.requests for p in pods[1:]))
    return {r: min(p.requests[r] for p in pods) for r in sorted(common) if all(p.requests[r] > 0 for p in pods)}



def room_short(free: dict[str, Resources], region: Region, pods: list[Pod], whose: str) -> str | None:
    """Volcano's HyperNode pre-filter (``isEligibleHyperNode``): None when the free room ``free`` of the
    region's nodes, summed, covers the summed requests of ``pods`` on every resource; else which falls short
    (``whose`` names the pods in the reason)."""
    need: dict[str, int] = defaultdict(int)
    for p in pods:
        for r, v in p.requests.items():
            if r != "pods":
                need[r] += v
    for r in sorted(need):
        have = sum(free[n].get(r, 0) for n in region.nodes)
        if need[r] > have:
            return f"its nodes' free {r} summed ({have}) is short of {whose} {need[r]} (Volcano's HyperNode pre-filter)"
    return None


ScoreKey = tuple[float, Fraction]
"""A binpack score's sort key, lowest first for the highest score (``Greedy.scores``)."""


class Ranking:
    """The nodes of one list where one kind of pod (its requests and static predicates) fits now, best
    first: sorted by (-binpack score, position in the list), the order in which ``best_node``'s scan
    prefers them (highest score, ties to the first node); the score is keyed as ``Greedy.scores`` has
    it (a float first, the exact Fraction where the floats tie) ``Greedy.ranking`` keeps it current from the
    state's ``touched`` log, scoring again only the nodes changed since ``seen``. ``fitting`` False: every
    node the static predicates admit, room or not (preempt's walk, ``preempt_order``)."""

    def __init__(self, nodes: list[str], index: dict[str, int], ok: list[bool], seen: int,
                 fitting: bool = True) -> None:
        self.fitting = fitting
        self.nodes = nodes
        self.index = index
        """node -> its position in ``nodes``."""
        self.ok = ok
        """Position -> the static predicates admit the pod there."""
        self.seen = seen
        """How much of the state's ``touched`` log the ranking reflects."""
        self.order: list[tuple[ScoreKey, int]] = []
        """(key of -score, position) of every node where the pod fits, ascending: the best first."""
        self.keys: dict[int, tuple[ScoreKey, int]] = {}
        """Position -> its entry in ``order``."""


@dataclass
class VictimChoice:
    """A job placed with victims: bindings, victims (in eviction order), the region, the victims' cost."""

    bindings: list[Binding]
    victims: list[Candidate]
    region: Region
    cost: int


class Greedy:
    """Volcano's actions for one job at a time on ``state``: the dry runs, the node order and scores, and
    what evicting a candidate takes (``cat``: the possible victims; empty for allocate alone)."""

    def __init__(self, ctx: Context, state: State, cat: Catalogue | None = None) -> None:
        self.ctx = ctx
        self.state = state
        self.cat = cat if cat is not None else Catalogue(snapshot=ctx.snapshot, now=datetime.now())
        self._scores: dict[tuple[object, ...], tuple[Fraction, ScoreKey]] = {}
        """(requests, the node's allocatable and free of them) -> the binpack score and its sort key."""
        self._nodes: dict[Region, list[str]] = {}
        self._index: dict[int, dict[str, int]] = {}
        """id of a ``nodes`` list -> node -> its position there."""
        self._rankings: dict[tuple[object, ...], Ranking] = {}
        """(id of a ``nodes`` list, the pod's sorted requests, its constraint signature) -> its ranking."""
        self._kinds: dict[str, tuple[Pod, tuple[tuple[str, int], ...], tuple[object, ...]]] = {}
        """pod key -> the pod, its sorted requests and its constraint signature."""
        self._steps: dict[str, list[tuple[str, int, bool]]] = {}
        self._total: dict[str, int] | None = None
        self.block_note: str | None = None
        """Reclaim: the first refusal of the capacity plugin on the nodes the last ``evict_for`` tried."""
        self.region_of: dict[str, Region] = {}
        """job key -> the region holding its admitted pods (and running ones): the lowest candidate region that
        holds them all (``enclosing``), widened as later turns place pods beside it (Volcano's allocatedHyperNode)."""
        self._all_regions: dict[str, list[Region]] = {}
        """job key -> every candidate region of the job as if nothing of it ran (``job_regions``)."""
        self._held_pods: dict[str, dict[str, dict[int, Pod]]] = {}
        """job key -> ``held_pods`` (its running replicas by task and index), read when a partition needs it."""
        self.dropped: set[tuple[str, str, int]] = set()
        """(job, task, index): pods ``extend`` tried (placed or not): allocate pops each task once."""
        self.hyper = HyperScores(ctx, state)
        """network-topology-aware's HyperNode binpack of a normal pod's node (``hyper_score``)."""
        self.fabric = Fabric(ctx.snapshot.topology)
        """The HyperNode tree its pull for a topology job's pod reads (``Fabric.bonus``)."""
        self._own: dict[str, frozenset[str]] = {}
        """job key -> ``own_groups``: its PodGroups, which the plugins never see for it."""
        self.allocated_hn: dict[str, str] = {}
        """job key -> its allocated HyperNode after its turns so far (``Near.allocated``): the lowest common
        HyperNode of the one recovered from its running pods and each HyperNode a turn chose."""
        self._orders: dict[tuple[object, ...], float] = {}
        """(requests, the node's allocatable and free cpu, memory and GPUs) -> nodeorder's score (``order_score``)."""
        self.draws = 0
        """HyperNode choices drawn so far (``best_first`` with a tie seed)."""
        self.placed: Counter[str] = Counter()
        """PodGroup key -> the pods this session's allocate placed for its job (a running gang being placed):
        Volcano's gang plugin counts them ready (``ReadyTaskNum``: allocated as well as running)."""

    def steps(self, job: VCJob) -> list[tuple[str, int, bool]]:
        """``gang_steps`` of the job (fixed for the run: computed once)."""
        out = self._steps.get(job.key)
        if out is None:
            out = self._steps[job.key] = gang_steps(job, self.ctx.snapshot, self.ctx.held.get(job.key))
        return out

    def best_first(self, found: list[Any]) -> None:
        """HyperNodes found for a pod, partition or job, ``(score, name, ...)`` each, sorted best first: the
        highest score, ties by name — or, with ``Context.tie_seed``, in a seeded random order drawn afresh
        for each choice, as vc-scheduler draws one of the best at random (``SelectBestHyperNodeAndScore``)."""
        seed = self.ctx.tie_seed
        if seed is None:
            found.sort(key=lambda f: (-f[0], f[1]))
            return
        self.draws += 1
        draw = self.draws
        found.sort(key=lambda f: (-f[0], hashlib.sha256(f"{seed}/{draw}/{f[1]}".encode()).digest()))

    def nodes(self, region: Region) -> list[str]:
        """The region's nodes by name: one list per region, so that the predicates' rows over it are cached."""
        out = self._nodes.get(region)
        if out is None:
            out = self._nodes[region] = node_list(region.nodes, self.ctx.node_start)
        return out

    def kind(self, pod: Pod) -> tuple[tuple[tuple[str, int], ...], tuple[object, ...]]:
        """The pod's sorted requests and its constraint and share signatures (pods alike in these rank nodes alike:
        two shares of equal requests but another sharing mode, card type or spreading PodGroup do not)."""
        out = self._kinds.get(pod.key)
        if out is None or out[0] is not pod:
            out = self._kinds[pod.key] = (pod, tuple(sorted(pod.requests.items())),
                                          (constraint_signature(pod), share_signature(pod)))
        return out[1], out[2]

    def ranking(self, pod: Pod, nodes: list[str], fitting: bool = True) -> Ranking:
        """The nodes of ``nodes`` where the pod fits (``fitting`` False: every node the static predicates
        admit), best first, as the state stands: built once per (list, kind of pod), then only the nodes the
        state's statements touched since are scored again (all of them again when more changes than nodes are
        pending)."""
        req_key, sig = self.kind(pod)
        key = (id(nodes), req_key, sig, fitting)
        log = self.state.touched
        rank = self._rankings.get(key)
        if rank is not None and rank.nodes is nodes and len(log) - rank.seen <= len(nodes):
            if rank.seen < len(log):
                for n in set(log[rank.seen:]):
                    i = rank.index.get(n)
                    if i is not None:
                        self._rank_again(rank, pod, i, req_key)
                rank.seen = len(log)
            return rank
        index = self._index.get(id(nodes))
        if index is None or len(index) != len(nodes) or any(index.get(n) != i for i, n in enumerate(nodes)):
            index = self._index[id(nodes)] = {n: i for i, n in enumerate(nodes)}
        rank = self._rankings[key] = Ranking(nodes, index, self.ctx.predicates.mask(pod, nodes).tolist(), len(log),
                                             fitting)
        cap = self.state.cap
        for i, n in enumerate(nodes):
            if rank.ok[i] and (not fitting or cap.fits(pod, n)):
                rank.keys[i] = (self.scores(pod, n, req_key)[1], i)
        rank.order = sorted(rank.keys.values())
        return rank

    def _rank_again(self, rank: Ranking, pod: Pod, i: int, req_key: tuple[tuple[str, int], ...]) -> None:
        old = rank.keys.pop(i, None)
        if old is not None:
            del rank.order[bisect_left(rank.order, old)]
        n = rank.nodes[i]
        if rank.ok[i] and (not rank.fitting or self.state.cap.fits(pod, n)):
            entry = rank.keys[i] = (self.scores(pod, n, req_key)[1], i)
            insort(rank.order, entry)

    def best_node(self, pod: Pod, nodes: list[str], queue: str, spread: bool = False,
                  near: Near | None = None) -> tuple[str | None, str]:
        """The highest-scoring feasible node (ties to the first in ``nodes``), or None and why none is feasible.
        ``spread``: a pod of a job without topology, whose score adds the network-topology-aware plugin's
        HyperNode binpack of the node's HyperNodes (``hyper_score``) when the scheduler configuration names
        the plugin and the cluster has HyperNodes. ``near``: a pod of a topology job, whose score adds the
        plugin's pull towards its pods so far (``best_total``), under the same conditions. A pod nominated to
        a node of ``nodes`` where it fits goes there, unscored (``Context.nominated``)."""
        qr = self.state.queues.fit_reason(queue, pod.requests)
        if qr is not None:
            return None, qr
        rank = self.ranking(pod, nodes)
        nominated = self.ctx.nominated.get(pod.key)
        if nominated is not None and rank.index.get(nominated, -1) in rank.keys:
            return nominated, ""
        if rank.order:
            hyper = spread and bool(self.hyper.tiers)
            pull = near if near is not None and near.allocated and self.near_on else None
            if len(rank.order) > 1 and (hyper or pull is not None or self.nodeorder_on):
                return nodes[self.best_total(pod, nodes, rank, hyper, pull)], ""
            return nodes[rank.order[0][1]], ""
        static, cap = self.ctx.predicates, self.state.cap
        why = Counter(s or cap.fit_reason(pod, n) for n, s in zip(nodes, static.reasons(pod, nodes), strict=True))
        detail = ", ".join(f"{c} {r}" for r, c in sorted(why.items(), key=lambda x: (-x[1], x[0])))
        return None, f"0/{len(nodes)} nodes fit" + (f" ({detail})" if detail else "")

    def hyper_score(self, pod: Pod, node: str) -> float:
        """The network-topology-aware plugin's node score for a pod of a job without topology
        (``batchNodeOrderFnForNormalPods``): per HyperNode tier, the binpack of the node's HyperNode of that
        tier (``HyperScores.binpack``), 1 where no HyperNode of the tier holds the node, weighted 0.8^(tier - 1) and
        averaged over the tiers up to the virtual root's; × 100 × the plugin's weight. The terms equal on
        every node (the root's, a tier whose one HyperNode holds every node) are left out: they move no node
        before another."""
        self.hyper.sync()
        return self.hyper.row_score(self.hyper.tiers[node], self.kind(pod)[0])
    def best_total(self, pod: Pod, nodes: list[str], rank: Ranking, hyper: bool, near: Near | None) -> int:
        """The position in ``nodes`` of the best node by binpack plus the other plugins' scores Volcano adds
        (ties to the better binpack, then the first): ``hyper``, network-topology-aware's for a pod without a
        network topology (``hyper_score``); ``near``, its pull for a topology job's pod (``Fabric.bonus``); and
        nodeorder's (``nodeorder_on``, ``order_score``). The ranking's order is read best binpack first until
        no node further can catch up with the best so far; without nodeorder, nodes alike in the other scores
        (the same HyperNodes) are scored at their first only (the nodes after it have no better binpack)."""
        self.hyper.sync()
        req_key = self.kind(pod)[0]
        tiers = self.hyper.tiers
        racks = self.fabric.racks
        bonus = (self.fabric.bonus((nodes[i] for _k, i in rank.order), near, self.ctx.region_weights.weight)
                 if near is not None else {})
        order = self.nodeorder_on
        most = (100.0 * self.ctx.region_weights.weight if hyper else 0.0) + max(bonus.values(), default=0.0)
        if order:
            most += float(MAX_NODE_SCORE * (self.ctx.scheduler.least_requested + self.ctx.scheduler.balanced_resource))
        best, best_total = rank.order[0][1], -1.0
        seen: set[object] = set()
        for key, i in rank.order:
            binpack = -key[0]
            if binpack + most < best_total:
                break
            n = nodes[i]
            if not order:
                alike = (tiers.get(n) if hyper else None, racks.get(n, "") if near is not None else None)
                if alike in seen:
                    continue
                seen.add(alike)
            total = binpack
            if hyper:
                total += self.hyper.row_score(tiers[n], req_key)
            if near is not None:
                total += bonus[racks.get(n, "")]
            if order:
                total += self.order_score(pod, n, req_key)
            if total > best_total:
                best, best_total = i, total
        return best

    @property
    def nodeorder_on(self) -> bool:
        """The scheduler configuration, read from a file, lists nodeorder: its scores join the node order."""
        conf = self.ctx.scheduler
        return conf.source is not None and any("nodeorder" in tier for tier in conf.tiers)

    def order_score(self, pod: Pod, node: str, req_key: tuple[tuple[str, int], ...]) -> float:
        """nodeorder's score of the pod on the node as the state stands (``nodeorder.nodeorder_score``),
        cached by the requests and the node's allocatable and free room."""
        free = self.state.cap.free[node]
        alloc = self.ctx.snapshot.nodes[node].allocatable
        key = ("order", req_key, tuple((alloc.get(r, 0), free.get(r, 0)) for r in ("cpu", "memory", WHOLE_GPU)))
        out = self._orders.get(key)
        if out is None:
            conf = self.ctx.scheduler
            out = self._orders[key] = float(nodeorder_score(pod.requests, alloc, free, conf.least_requested,
                                                            conf.balanced_resource))
        return out

    @property
    def near_on(self) -> bool:
        """network-topology-aware scores a topology job's pods: the configuration names it (``hyper_weights``)
        with its node order on, and the cluster has HyperNodes."""
        conf = self.ctx.scheduler
        return self.ctx.hyper_weights is not None and conf.topology_node_order and bool(self.fabric.racks)

    def start_near(self, job: VCJob, bindings: Iterable[Binding] = ()) -> Near:
        """The job's ``Near`` at the start of a turn: its allocated HyperNode (``allocated_hn``, else the lowest
        HyperNode holding its running pods' nodes, as Volcano's session recovers it, else none) and its pods
        so far per rack (running ones, and ``bindings``, those its earlier turns placed)."""
        counts: Counter[str] = Counter()
        racks = self.fabric.racks
        nodes = self.running_pod_nodes(job)
        nodes += [b.node for b in bindings]
        for n in nodes:
            if n in racks:
                counts[racks[n]] += 1
        allocated = self.allocated_hn.get(job.key)
        if allocated is None:
            held = self.ctx.held_nodes.get(job.key, frozenset())
            allocated = (next(iter(self.ctx.snapshot.topology.enclosing(held)), ROOT) if held else "")
        return Near(allocated=allocated, counts=counts, tasks=job.replicas)

    def held_of(self, job: VCJob) -> dict[str, dict[int, Pod]]:
        """``held_pods`` of the job (its running replicas by task and index), computed once."""
        by_task = self._held_pods.get(job.key)
        if by_task is None:
            by_task = self._held_pods[job.key] = held_pods(job, self.ctx.snapshot)
        return by_task

    def running_pod_nodes(self, job: VCJob) -> list[str]:
        """The node of each running pod of the job (one entry per pod)."""
        return [p.node_name for pods in self.held_of(job).values() for p in pods.values() if p.node_name is not None]

    def place_near(self, near: Near | None, node: str) -> None:
        """A pod of the job placed on ``node``: its allocated HyperNode moves to the lowest common one of it and
        the node's rack (Volcano's ``getNewAllocatedHyperNode``), the rack counts one pod more."""
        if near is None:
            return
        rack = self.fabric.racks.get(node, "")
        if rack:
            near.allocated = self.fabric.lca(near.allocated, rack)
            near.counts[rack] += 1

    def dry_run(self, job: VCJob, region: Region, stmt: Statement, rules: Rules | None = None,
                pre: tuple[Binding, ...] = (), scores: list[Fraction] | None = None
                ) -> tuple[list[Binding], str | None]:
        """Place the gang inside the region, pods in ``gang_steps`` order (with ``rules``: ``preemptor_order``),
        each on its best node (``best_node``), until the gang is ready; the bindings, and why the gang is not
        ready (None: ready).

        Allocate (no ``rules``): a pod that fits nowhere is skipped unless its task needs it, and the run
        stops as soon as the gang cannot become ready; the first failure says why. Preempt or reclaim
        (``rules``): a pod that fits nowhere evicts on the first node in ``preempt_order`` whose victims
        would make room, one by one in victim order until it fits (``evict_for``); a pod that still
        finds no node is skipped, and the last pod tried says why; the run stops once the job is no longer
        starving (``jobs.starving``: by count, so a task short of its minimum leaves the gang not ready).
        ``scores``: each placed partition's HyperNode score is appended (what Volcano sums into the job's
        HyperNode score)."""
        nodes = self.nodes(region)
        pods = self.ctx.pods[job.key]
        held = self.ctx.held_count(job.key)
        order = self.steps(job) if rules is None else preemptor_order(job, self.steps(job), pods, self.ctx.snapshot)
        placed: Counter[str] = Counter(b.task for b in pre)  # ``pre``: pods already pipelined (on the state)
        bindings: list[Binding] = list(pre)
        done = {(b.task, b.index) for b in pre}
        why: str | None = None
        failures = 0
        slack = len(order) - self.ctx.need(job)[1]
        parted = partitioned(job)
        indices: dict[str, set[int]] = defaultdict(set)
        for b in pre:  # a partitioned job's pods pipelined by preempt's pass within it count for its partitions
            indices[b.task].add(b.index)
        tried: set[tuple[str, int]] = set()
        held_ix = self.ctx.held.get(job.key, {})
        tasks = {t.name: t for t in job.tasks}
        near = self.start_near(job) if job.network_topology is not None and rules is None and not parted else None
        for task, i, required in order:
            if (task, i) in done:
                continue
            if bindings and (not starving(job, placed, held) if rules is not None else (
                    gang_shortfall(job, placed, held) is None
                    and (not parted or partition_shortfall(job, indices, held_ix) is None))):
                break  # allocate stops at the ready gang (the other replicas come one per turn, ``extend``); preempt
                # and reclaim at the gang no longer starving, by count (``starving``: then ready or discarded)
            pp = tasks[task].partition_policy
            if pp is not None and rules is None:  # a partition goes whole, in one step (Volcano's sub-job)
                part = pp.of(i)
                if (task, part) in tried:
                    continue
                tried.add((task, part))
                got, reason, score = self.place_partition(job, tasks[task], part, region, stmt)
                if scores is not None and got is not None:
                    scores.append(score)
                if got is None:
                    failures += len(partition_pending(tasks[task], part, held_ix.get(task, frozenset())))
                    if why is None:
                        why = f"task {task} partition {part}: {reason}"
                    if required or failures > slack:
                        break
                    continue
                placed[task] += len(got)
                indices[task].update(b.index for b in got)
                bindings.extend(got)
                continue
            pod = pods[task][i]
            if rules is None:
                node, reason = self.best_node(pod, nodes, job.queue, job.network_topology is None, near)
                if node is None:
                    failures += 1
                    if why is None:
                        why = f"{replica_label(job, task, i)}: {reason}"
                    if required or failures > slack:
                        break  # the gang cannot become ready any more
                    continue
            else:
                node, why = self.try_with_victims(job, task, pod, nodes, stmt, rules)
                if node is None:
                    continue
            stmt.allocate(pod, node, job.queue)
            self.place_near(near, node)
            placed[task] += 1
            indices[task].add(i)  # reclaim of a partitioned job: pod by pod, anywhere (no sub-job step)
            bindings.append(Binding(task=task, index=i, node=node))
        parts = partition_shortfall(job, indices, held_ix) if parted else None
        return _gang_result(job, placed, bindings, why, held, len(order), parts)

    def running_nodes(self, job: VCJob, task: str, indices: Iterable[int]) -> set[str]:
        """The nodes the job's running replicas ``indices`` of ``task`` are on."""
        nodes = self.held_pod_nodes(job, task)
        return {nodes[i] for i in indices if i in nodes}

    def place_partition(self, job: VCJob, task: JobTask, part: int, region: Region,
                        stmt: Statement) -> tuple[list[Binding] | None, str, Fraction]:
        """One partition of a partitioned task, whole, on ``stmt``, as allocate places a sub-job: the HyperNodes
        of its gradient inside the job's ``region`` (``partition_gradient``: its soft topology searched as hard,
        from its search root) tier by tier, lowest first — with none of its pods running, only those whose
        free room at the session's start covers its pending pods (the pre-filter, ``room_short``) — in each,
        its pending pods each to their best node (a partition with a topology: pulled towards its pods so
        far, ``best_total``; without: scored as a pod without topology); among the HyperNodes of the lowest
        tier that take it whole, the best HyperNode score (``region_score`` over all its pods; where several
        share the best, each adds the share of its running pods inside), then the name. The bindings (None:
        not placed), why not, and the score, which the job's HyperNode score sums."""
        held = self.ctx.held.get(job.key, {}).get(task.name, frozenset())
        pending = partition_pending(task, part, held)
        pp = task.partition_policy
        assert pp is not None
        if not partition_possible(task, part):
            return None, "the cluster could never hold all its pods", Fraction(0)
        running_ix = [i for i in pp.members(part) if i in held]
        running = self.running_nodes(job, task.name, running_ix)
        subs = partition_gradient(self.ctx.snapshot, job, task, region, running)
        if not subs:
            return None, "no HyperNode inside the job's region holds it (partitionPolicy networkTopology)", Fraction(0)
        pods = self.ctx.pods[job.key][task.name]
        own = pp.network_topology is not None
        why = ""
        if own and not running:  # the pre-filter, for a sub-job with nothing allocated
            shorts = [room_short(self.ctx.capacity.free, sub, [pods[i] for i in pending],
                                 f"the partition's {len(pending)} pods'") for sub in subs]
            if all(shorts):
                first = next(sub for sub in subs)
                return None, f"{first.label}: {shorts[0]}", Fraction(0)
            subs = [sub for sub, short in zip(subs, shorts, strict=True) if short is None]
        by_node = self.held_pod_nodes(job, task.name)
        request: dict[str, int] = defaultdict(int)
        for i in pp.members(part):
            for r, v in pods[i].requests.items():
                request[r] += v
        for _tier, group in groupby(subs, key=lambda rg: rg.tier):
            found: list[tuple[Fraction, str, list[Binding], Region]] = []
            for sub in group:
                mark = stmt.mark()
                got: list[Binding] = []
                near = self.partition_near(by_node, running_ix, pp.partition_size) if own else None
                for i in pending:
                    node, reason = self.best_node(pods[i], self.nodes(sub), job.queue, not own, near)
                    if node is None:
                        why = f"{sub.label}: replica {i}: {reason}" if sub.hyper_node else f"replica {i}: {reason}"
                        break
                    stmt.allocate(pods[i], node, job.queue)
                    self.place_near(near, node)
                    got.append(Binding(task=task.name, index=i, node=node))
                stmt.rollback(mark)
                if len(got) == len(pending):
                    found.append((self.region_score(sub, request), sub.hyper_node or "", got, sub))
            if found:
                top = max(f[0] for f in found)
                if sum(f[0] == top for f in found) > 1 and self.ctx.scheduler.hyper_node_order:
                    scale = 100 * self.ctx.region_weights.weight
                    found = [(f[0] + (Fraction(sum(by_node.get(i) in f[3].nodes for i in running_ix), pp.partition_size)
                                      * scale if f[0] == top else 0), *f[1:]) for f in found]
                self.best_first(found)
                score, _name, best, _sub = found[0]
                for b in best:
                    stmt.allocate(pods[b.index], b.node, job.queue)
                return best, "", score
        return None, why, Fraction(0)

    def held_pod_nodes(self, job: VCJob, task: str) -> dict[int, str]:
        """Replica index -> the node of each running replica of the job's ``task``."""
        return {i: p.node_name for i, p in self.held_of(job).get(task, {}).items() if p.node_name is not None}

    def partition_near(self, by_node: dict[int, str], running: list[int], size: int) -> Near:
        """A partition's ``Near`` before its pods are placed: its allocated HyperNode recovered from its running
        pods (the lowest HyperNode holding them, else the virtual root; none without running pods), its running
        pods per rack, its size."""
        nodes = [by_node[i] for i in running if i in by_node]
        counts = Counter(self.fabric.racks[n] for n in nodes if n in self.fabric.racks)
        allocated = next(iter(self.ctx.snapshot.topology.enclosing(nodes)), ROOT) if nodes else ""
        return Near(allocated=allocated, counts=counts, tasks=size)

    def too_small(self, region: Region, least: Resources, want: int, room: dict[str, int]) -> bool:
        """A region where fewer than ``want`` pods, each taking at least ``least``, fit by the nodes' free
        room (and pod slots): its allocate dry run cannot ready the gang, whatever the node order and the
        predicates. A sound check only (False: try it). ``room``: node -> how many such pods fit there,
        filled as nodes are read (the state must not change while it is kept)."""
        if not least:
            return False
        cap = self.state.cap
        total = 0
        for n in region.nodes:
            k = room.get(n)
            if k is None:
                free = cap.free[n]
                k = min(free.get(r, 0) // v for r, v in least.items())
                if cap.limits_pods(n):
                    k = min(k, free.get("pods", 0) // POD_SLOT)
                k = room[n] = max(k, 0)
            total += k
            if total >= want:
                return False
        return True

    def why_not(self, job: VCJob, region: Region, short: str | None) -> str:
        """Why the gang's allocate dry run fails in the region: ``short`` when the run was made, else the
        run is made now (on the state ``place`` found, which its dry runs leave unchanged)."""
        if short is not None:
            return short
        stmt = Statement(self.state)
        _bindings, why = self.dry_run(job, region, stmt)
        stmt.discard()
        assert why is not None, f"{region.label} was judged too small for {job.key}, yet its dry run readies the gang"
        return why

    def all_regions(self, job: VCJob) -> list[Region]:
        """Every candidate region of a topology job, lowest tier first (``job_regions`` without running pods)."""
        out = self._all_regions.get(job.key)
        if out is None:
            out = self._all_regions[job.key] = job_regions(job, self.ctx.snapshot)
        return out

    def enclosing(self, job: VCJob, nodes: frozenset[str]) -> Region:
        """The lowest candidate region holding every node (a soft job: at worst the whole cluster)."""
        return next(r for r in self.all_regions(job) if nodes <= r.nodes)

    def turn_regions(self, job: VCJob, allocated: frozenset[str]) -> list[Region]:
        """The regions one allocate turn of a topology job searches, lowest tier first (Volcano's HyperNode
        gradient: network-topology-aware's ``hyperNodeGradientFn`` from ``getSearchRoot``). Nothing of the
        job allocated yet: every candidate region. Pods allocated on ``allocated`` (running, or placed by
        its earlier turns): every candidate region inside the search root — the widest candidate holding
        them all (the highest ancestor within highestTierAllowed; a soft job: the whole cluster) — whether
        or not it holds them; none holds them: no region."""
        regions = self.all_regions(job)
        if not allocated:
            return regions
        holding = [r for r in regions if allocated <= r.nodes]
        if not holding:
            return []
        root = holding[-1].nodes
        return [r for r in regions if r.nodes <= root]

    def prefilter_short(self, job: VCJob, region: Region) -> str | None:
        """Volcano's HyperNode pre-filter for a job with nothing allocated yet (``isEligibleHyperNode``, asked
        by allocate with the sub-job's minimum: the summed requests of all its pending pods, not only
        minAvailable's): a region is searched only when the free room its nodes had at the session's start,
        summed, covers that sum on every resource. None: it does; else which resource falls short. A
        partitioned job's own search is asked with the PodGroup's minResources instead (the first
        minAvailable pods' requests: the job controller's), each partition's with its pending pods."""
        pods = self.ctx.pods[job.key]
        steps = self.steps(job)
        if partitioned(job):
            steps = steps[:max(self.ctx.need(job)[1], 1)]
            return room_short(self.ctx.capacity.free, region, [pods[t][i] for t, i, _r in steps],
                              f"its first {len(steps)} pending pods' (minResources)")
        return room_short(self.ctx.capacity.free, region, [pods[t][i] for t, i, _r in steps],
                          f"all {len(steps)} pending pods'")

    def region_score(self, region: Region, request: Resources) -> Fraction:
        """The network-topology-aware plugin's HyperNode binpack score (``getSubJobHyperNodeBinPackingScore``,
        scaled): over the resources the request names that have a weight (``Context.region_weights``: cpu
        and memory always), Σ w_r × (used_r + request_r) / allocatable_r / Σ w_r, × 100 × weight; 0 when the
        request overflows the HyperNode on one of them. ``used``: the state before the dry run (Volcano
        scores after discarding it); ``request``: every pod of the job (or of the partition), running ones
        included, as the plugin sums its sub-job's tasks."""
        if not self.ctx.scheduler.hyper_node_order:
            return Fraction(0)  # the plugin's enabledHyperNodeOrder false: no plugin scores a HyperNode
        alloc, used = self.hyper_use(region.nodes)
        weights = self.ctx.region_weights
        return hyper_binpack(request, alloc, used, weights) * 100 * weights.weight

    def hyper_use(self, nodes: Iterable[str]) -> tuple[dict[str, int], dict[str, int]]:
        """The summed allocatable and use (allocatable less free room, as the state stands) of ``nodes``."""
        return summed_use(self.ctx, self.state, nodes)

    def place(self, job: VCJob) -> JobPlacement:
        base = {"namespace": job.namespace, "name": job.name, "queue": job.queue}
        if job.key in self.ctx.unfit:
            return JobPlacement(**base, admitted=False, reason=self.ctx.unfit[job.key])
        topo = job.network_topology is not None
        why = self.state.queues.admission_reason(job.queue)
        if why is not None:
            return JobPlacement(**base, admitted=False, reason=why)
        if not any(self.ctx.pending(job, t.name) for t in job.tasks):
            return JobPlacement(**base, admitted=False, reason=f"nothing to place: its {job.replicas} pods run already")
        regions = self.ctx.regions[job.key]
        if not regions:
            nt = job.network_topology
            limit = f" of tier <= {nt.highest_tier_allowed}" if nt and nt.highest_tier_allowed is not None else ""
            running = self.ctx.held_nodes.get(job.key)
            if running:
                return JobPlacement(**base, admitted=False, reason=(
                    f"no HyperNode{limit} holds the nodes its running pods are on ({', '.join(sorted(running)[:3])}; "
                    "networkTopology hard)"))
            return JobPlacement(**base, admitted=False, reason=f"no HyperNode{limit} exists (networkTopology hard)")
        held_at = self.ctx.held_nodes.get(job.key, frozenset())
        turned = topo
        parted = partitioned(job)
        if turned:  # Volcano's gradient: beside running pods, any region inside the search root
            regions = self.turn_regions(job, held_at)
        failures: list[str | None] = []
        """Why each region failed; None: too small to try (``too_small``), its dry run is left until needed."""
        pods = self.ctx.pods[job.key]
        least = least_requests([pods[t][i] for t, i, _r in self.steps(job)])
        want = max(self.ctx.need(job)[1], 1)
        room: dict[str, int] = {}
        for _tier, group in groupby(regions, key=lambda rg: rg.tier):
            found: list[tuple[Fraction, str, Region, list[Binding]]] = []
            for region in group:
                short = self.prefilter_short(job, region) if turned and not held_at else None
                if short is not None:
                    failures.append(short)
                    continue
                if self.too_small(region, least, want, room):
                    failures.append(None)
                    continue
                stmt = Statement(self.state)
                parts: list[Fraction] = []
                bindings, short = self.dry_run(job, region, stmt, scores=parts)
                stmt.discard()
                if short is None:
                    # a partitioned job's HyperNode scores the sum of its partitions' (Volcano's sub-jobs')
                    score = (sum(parts, Fraction(0)) if parted else self.region_score(region, job.total_requests())
                             ) if topo else Fraction(0)
                    found.append((score, region.hyper_node or "", region, bindings))
                else:
                    failures.append(short)
            if found:
                self.best_first(found)
                _score, _name, region, bindings = found[0]
                stmt = Statement(self.state)
                for b in bindings:
                    stmt.allocate(pods[b.task][b.index], b.node, job.queue)
                if turned:  # the lowest region holding its pods, running ones too (beside which it may land)
                    self.allocated_hn[job.key] = self.fabric.lca(self.start_near(job).allocated,
                                                                 region.hyper_node or ROOT)
                    region = self.enclosing(job, frozenset(b.node for b in bindings) | held_at)
                self.region_of[job.key] = region
                where = f" in {region.label}" if topo else ""
                return JobPlacement(**base, admitted=True, reason=placed_reason(self.ctx, job, len(bindings), where),
                                    hyper_node=region.hyper_node, tier=region.tier, bindings=tuple(bindings))
        if not topo:
            why = self.why_not(job, regions[0], failures[0])
            return JobPlacement(**base, admitted=False, reason=f"gang not ready: {why}")
        widest = regions[-1].tier  # the widest region tried says most about why nothing fits
        region, short = next((r, f) for r, f in zip(regions, failures, strict=True) if r.tier == widest)
        head = f"{region.label}: {self.why_not(job, region, short)}"
        more = f" (and {len(failures) - 1} more regions)" if len(failures) > 1 else ""
        return JobPlacement(**base, admitted=False,
                            reason=f"no region fits the gang (minAvailable {job.min_available}): {head}{more}")

    def extend(self, job: VCJob, jp: JobPlacement) -> JobPlacement | None:
        """One more pod of an admitted job, as allocate's next turn of a ready job places one: the job's
        remaining pods in gang order, each to its best node in the job's region; a pod that fits nowhere
        is dropped (Volcano pops it); None when none fits. Commits."""
        if job.network_topology is not None:
            return self.extend_partitioned(job, jp) if partitioned(job) else self.extend_topology(job, jp)
        region = self.region_of[jp.key]
        done = {(b.task, b.index) for b in jp.bindings}
        pods = self.ctx.pods[job.key]
        tasks = {t.name: t for t in job.tasks}
        for task, i, _required in self.steps(job):
            if (task, i) in done or (job.key, task, i) in self.dropped:
                continue
            pp = tasks[task].partition_policy
            if pp is not None:  # a whole partition per turn (Volcano's next sub-job)
                part = pp.of(i)
                held = self.ctx.held.get(job.key, {}).get(task, frozenset())
                members = partition_pending(tasks[task], part, held)
                self.dropped.update((job.key, task, k) for k in members)
                got, _why, _score = self.place_partition(job, tasks[task], part, region, Statement(self.state))
                if got is None:
                    continue
                bindings = sorted((*jp.bindings, *got), key=lambda b: (task_pos(job, b.task), b.index))
                where = f" in {region.label}" if job.network_topology is not None else ""
                return jp.model_copy(update={"bindings": tuple(bindings),
                                             "reason": placed_reason(self.ctx, job, len(bindings), where)})
            node, _why = self.best_node(pods[task][i], self.nodes(region), job.queue, job.network_topology is None)
            self.dropped.add((job.key, task, i))
            if node is None:
                continue
            Statement(self.state).allocate(pods[task][i], node, job.queue)
            bindings = sorted((*jp.bindings, Binding(task=task, index=i, node=node)),
                              key=lambda b: (task_pos(job, b.task), b.index))
            where = f" in {region.label}" if job.network_topology is not None else ""
            return jp.model_copy(update={"bindings": tuple(bindings),
                                         "reason": placed_reason(self.ctx, job, len(bindings), where)})
        return None

    def extend_partitioned(self, job: VCJob, jp: JobPlacement) -> JobPlacement | None:
        """One more turn of an admitted partitioned job with a topology, as Volcano's next turn of it searches
        the job's HyperNodes again (``turn_regions`` from the region holding its pods so far, lowest tier
        first) and in each places the next sub-job that fits there: its remaining partitions in gang order, each
        whole (``place_partition``), or a pod of a task without partitions. Among the regions of the lowest tier
        where one fits, the best score (the partition's; a pod's 0), then the name; the partitions and pods tried
        before it there are dropped (Volcano pops them), all of them when none fits anywhere (None). The job's
        region widens to the lowest one holding its pods. Commits."""
        current = self.region_of[jp.key]
        done = {(b.task, b.index) for b in jp.bindings}
        pods = self.ctx.pods[job.key]
        tasks = {t.name: t for t in job.tasks}
        units: list[tuple[str, int, bool]] = []  # (task, partition or replica index, a whole partition)
        for t, i, _r in self.steps(job):
            if (t, i) in done or (job.key, t, i) in self.dropped:
                continue
            pp = tasks[t].partition_policy
            unit = (t, pp.of(i), True) if pp is not None else (t, i, False)
            if unit not in units:
                units.append(unit)

        def members(unit: tuple[str, int, bool]) -> list[tuple[str, int]]:
            t, k, whole = unit
            pp = tasks[t].partition_policy
            if not whole or pp is None:
                return [(t, k)]
            return [(t, i) for i in partition_pending(tasks[t], k, self.ctx.held.get(job.key, {}).get(t, frozenset()))]

        for _tier, group in groupby(self.turn_regions(job, current.nodes), key=lambda rg: rg.tier):
            found: list[tuple[Fraction, str, Region, int, list[Binding]]] = []
            for region in group:
                stmt = Statement(self.state)
                for k, unit in enumerate(units):
                    t, x, whole = unit
                    if whole:
                        got, _why, score = self.place_partition(job, tasks[t], x, region, stmt)
                    else:
                        node, _why = self.best_node(pods[t][x], self.nodes(region), job.queue)
                        got, score = ([Binding(task=t, index=x, node=node)] if node else None), Fraction(0)
                    if got is not None:
                        found.append((score, region.hyper_node or "", region, k, got))
                        break
                stmt.discard()
            if found:
                self.best_first(found)
                _score, _name, region, k, got = found[0]
                for unit in units[:k + 1]:
                    self.dropped.update((job.key, t, i) for t, i in members(unit))
                stmt = Statement(self.state)
                for b in got:
                    stmt.allocate(pods[b.task][b.index], b.node, job.queue)
                self.allocated_hn[job.key] = self.fabric.lca(self.start_near(job).allocated, region.hyper_node or ROOT)
                wider = self.region_of[job.key] = self.enclosing(job, current.nodes | {b.node for b in got})
                bindings = sorted((*jp.bindings, *got), key=lambda b: (task_pos(job, b.task), b.index))
                return jp.model_copy(update={
                    "bindings": tuple(bindings), "hyper_node": wider.hyper_node, "tier": wider.tier,
                    "reason": placed_reason(self.ctx, job, len(bindings), f" in {wider.label}")})
        for unit in units:
            self.dropped.update((job.key, t, i) for t, i in members(unit))
        return None

    def extend_topology(self, job: VCJob, jp: JobPlacement) -> JobPlacement | None:
        """One more pod of an admitted topology job, as Volcano's next turn of it searches the HyperNodes
        again: the regions of ``turn_regions`` from the region holding its pods so far, lowest tier first; in
        each, the job's remaining pods in gang order, the first that has a node there; among the regions of
        the lowest tier where one has, the best HyperNode score (``region_score``), then the name. The pods
        tried before it there are dropped (Volcano pops them); none has a node anywhere: all are dropped,
        None. The job's region widens to the lowest one holding the new pod too. Commits."""
        current = self.region_of[jp.key]
        done = {(b.task, b.index) for b in jp.bindings}
        pods = self.ctx.pods[job.key]
        left = [(t, i) for t, i, _r in self.steps(job) if (t, i) not in done and (job.key, t, i) not in self.dropped]
        request = job.total_requests()
        for _tier, group in groupby(self.turn_regions(job, current.nodes), key=lambda rg: rg.tier):
            found: list[tuple[Fraction, str, Region, int, str]] = []
            for region in group:
                nodes = self.nodes(region)
                near = self.start_near(job, jp.bindings)
                for k, (t, i) in enumerate(left):
                    node, _why = self.best_node(pods[t][i], nodes, job.queue, near=near)
                    if node is not None:
                        found.append((self.region_score(region, request), region.hyper_node or "", region, k, node))
                        break
            if found:
                self.best_first(found)
                _score, _name, region, k, node = found[0]
                self.dropped.update((job.key, t, i) for t, i in left[:k + 1])
                task, i = left[k]
                Statement(self.state).allocate(pods[task][i], node, job.queue)
                self.allocated_hn[job.key] = self.fabric.lca(self.start_near(job).allocated, region.hyper_node or ROOT)
                wider = self.region_of[job.key] = self.enclosing(job, current.nodes | {node})
                bindings = sorted((*jp.bindings, Binding(task=task, index=i, node=node)),
                                  key=lambda b: (task_pos(job, b.task), b.index))
                return jp.model_copy(update={
                    "bindings": tuple(bindings), "hyper_node": wider.hyper_node, "tier": wider.tier,
                    "reason": placed_reason(self.ctx, job, len(bindings), f" in {wider.label}")})
        self.dropped.update((job.key, t, i) for t, i in left)
        return None

    def remaining(self, job: VCJob, jp: JobPlacement) -> bool:
        """The admitted job has pods not placed and not dropped yet."""
        done = {(b.task, b.index) for b in jp.bindings}
        return any((t, i) not in done and (job.key, t, i) not in self.dropped for t, i, _r in self.steps(job))

    # ---- victims (Volcano's preempt and reclaim actions) -------------------------------------------

    def may_take(self, c: Candidate) -> bool:
        """Safe preemption's PDB rule (``safety.pdb_over``) on the plan's evictions so far with ``c``."""
        if self.ctx.safety.pdb:
            snap = self.ctx.snapshot
            if pdb_over(self.ctx.safety, snap, [*(snap.pods[k] for k in self.state.evicted), c.pod]) is not None:
                return False
        return True

    @property
    def total(self) -> dict[str, int]:
        """The cluster's allocatable, summed over its nodes (drf's total)."""
        if self._total is None:
            tot: dict[str, int] = defaultdict(int)
            for node in self.ctx.snapshot.nodes.values():
                for r, x in node.allocatable.items():
                    tot[r] += x
            self._total = dict(tot)
        return self._total

    def group_allocated(self, group: str) -> dict[str, int]:
        """A victim PodGroup's allocation now: its occupying pods not evicted."""
        out: dict[str, int] = defaultdict(int)
        pods = self.ctx.snapshot.pods
        for k in self.cat.groups[group].occupying:
            if k not in self.state.evicted:
                for r, x in pods[k].requests.items():
                    out[r] += x
        return out

    def job_allocated(self, job: VCJob, pod: Pod, stmt: Statement) -> dict[str, int]:
        """The preemptor job's allocation with ``pod`` added: its running pods, the pods this turn placed."""
        out = self.ctx.running_requests(job.key)
        for p in [*(p for p, _n, _q, g, _d in stmt.ops if g is None), pod]:
            out.update(p.requests)
        return out

    def tier_victims(self, pod: Pod, node: str, job: VCJob, stmt: Statement, rules: Rules) -> list[Candidate]:
        """Volcano's plugin tiers on one node for one preemptor pod (``tiers.node_victims``), in victim
        order. Reclaim: the capacity plugin's first refusal is kept in ``block_note``."""
        st, cat, qs = self.state, self.cat, self.state.queues
        pods = [c for c in cat.by_node.get(node, []) if c.key in rules.eligible and c.key not in st.evicted]
        own = self._own.get(job.key)
        if own is None:
            own = self._own[job.key] = own_groups(job, self.ctx.snapshot)
        seen = plugin_view(cat, node, pods, own, lambda c: preemptee_refused(
            c, rules.reason, job.queue, qs.reclaimable.get(c.queue, True)) is None, st.evicted)
        if not any(c.key in rules.eligible for c in seen):
            return []
        refused: list[str] = []
        key = victim_key(self.group_allocated, self.total)
        victims, _tier = node_victims(
            rules.reason, seen, preemptor_priority=self.ctx.priority[job.key],
            ready=lambda g: cat.groups[g].ready - st.taken[g] + self.placed[g],
            min_member=lambda g: cat.groups[g].min_member,
            preemptor_allocated=self.job_allocated(job, pod, stmt) if rules.reason == "preempt" else {},
            job_allocated=self.group_allocated, total=self.total, need=dims(pod.requests), allocated=qs.allocated,
            deserved=qs.deserved, listed=qs.listed, guarantee=qs.guarantee,
            order=lambda vs: victims_in_order(vs, lambda: qs, job.queue, key), refused=refused)
        victims = [c for c in victims if c.key in rules.eligible]  # a shielded pod only when exposed
        if not victims and refused and self.block_note is None:
            self.block_note = f"on {node}: {refused[0]}"
        return victims

    def fits(self, pod: Pod, node: str, queue: str) -> bool:
        cap, queues = self.state.cap, self.state.queues
        return cap.fit_reason(pod, node) is None and queues.fit_reason(queue, pod.requests) is None

    def could_fit(self, pod: Pod, node: str, victims: list[Candidate]) -> bool:
        """Volcano's check before evicting on a node: would all its victims together make room?"""
        free = self.state.cap.free[node]
        for r, v in pod.requests.items():
            if v > 0 and free.get(r, 0) + sum(c.pod.requests.get(r, 0) for c in victims) < v:
                return False
        return True

    def try_with_victims(self, job: VCJob, task: str, pod: Pod, nodes: list[str], stmt: Statement,
                         rules: Rules) -> tuple[str | None, str]:
        """One pod of a preempting or reclaiming dry run: the capacity plugin's PreemptiveFn (reclaim), then
        Volcano's node walk (``evict_for``: a node with room takes the pod without evictions when the walk
        reaches it); a task whose PriorityClass says preemptionPolicy Never is skipped: preempt's
        ``taskEligibleToPreempt`` and reclaim's loop pass over its pods, which pipeline nothing (vc-scheduler
        v1.15.1), so only a later cycle's allocate places them. The node (None: none) and why not."""
        if rules.reason == "reclaim":  # the PreemptiveFn, for every pod the action tries
            qs = self.state.queues
            blocked = reclaimer_blocked(job.queue, qs.allocated[job.queue], pod.requests, qs.deserved[job.queue],
                                        qs.real[job.queue])
            if blocked is not None:
                return None, blocked
        if task in self.ctx.never[job.key]:
            return None, f"task {task}: preemptionPolicy Never, skipped by {rules.reason}"
        self.block_note = None
        node = self.evict_for(pod, nodes, job, stmt, rules)
        why = ""
        if node is None:
            why = self.block_note or self.best_node(pod, nodes, job.queue)[1]  # the capacity plugin's refusal first
        return node, why

    def score(self, pod: Pod, node: str, req_key: tuple[tuple[str, int], ...] | None = None) -> Fraction:
        """The pod's binpack score on the node as the simulation stands (``scores``)."""
        return self.scores(pod, node, req_key)[0]

    def scores(self, pod: Pod, node: str, req_key: tuple[tuple[str, int], ...] | None = None
               ) -> tuple[Fraction, ScoreKey]:
        """The pod's binpack score on the node as the simulation stands, and what a ranking sorts by:
        (-float(score), -score), ordered exactly as -score (rounding to a float never reverses an
        order, so unequal floats decide and equal ones fall back to the exact Fractions), most
        comparisons then made on floats. Cached by what the score reads: the requests and the node's
        allocatable and free room of them (``req_key``: the pod's sorted requests, when the caller has
        them); nodes alike share one key object. The free room is the one the node's ``Used`` leaves
        (``State.used_free``: a pod pipelined this session holds room but is not scored, a victim still is)."""
        free = self.state.used_free(node)
        if req_key is None:
            req_key = tuple(sorted(pod.requests.items()))
        alloc = self.ctx.snapshot.nodes[node].allocatable
        key = (req_key, tuple([(alloc.get(r, 0), free.get(r, 0)) for r, _ in req_key]))
        out = self._scores.get(key)
        if out is None:  # exact Fractions are slow: a score only changes with the node's free room
            score = binpack_score(pod.requests, alloc, free, self.ctx.weights)
            out = self._scores[key] = (score, (-float(score), -score))
        return out

    def preempt_order(self, pod: Pod, nodes: list[str], job: VCJob | None = None) -> list[str]:
        """Volcano's preempt node order (``util.PrioritizeNodes`` with every node-order plugin, then
        ``SortNodes``): the nodes that pass the static predicates, by binpack score on the state before this
        pod's evictions plus, for a ``job`` without a network topology, the network-topology-aware plugin's
        (``hyper_score``), plus nodeorder's when a configuration file lists it (``nodeorder_on``,
        ``order_score``, on the same state), highest first, ties in the order of ``nodes`` (a region's
        ``node_list``: by name from where the list starts; module docstring)."""
        hyper = job is not None and job.network_topology is None and bool(self.hyper.tiers)
        if not hyper and not self.nodeorder_on:  # binpack alone: the ranking kept current (ties: the list's order)
            return [nodes[i] for _k, i in self.ranking(pod, nodes, fitting=False).order]
        ok = [n for n, passes in zip(nodes, self.ctx.predicates.mask(pod, nodes), strict=True) if passes]
        req_key = tuple(sorted(pod.requests.items()))
        scores: dict[str, Fraction | float] = {n: self.score(pod, n, req_key) for n in ok}
        if hyper:
            for n in ok:
                scores[n] += self.hyper_score(pod, n)
        if self.nodeorder_on:
            for n in ok:
                scores[n] += self.order_score(pod, n, req_key)
        return sorted(ok, key=lambda n: -scores[n])  # stable: ties keep the node list's order

    def reclaim_order(self, pod: Pod, nodes: list[str]) -> list[str]:
        """Volcano's reclaim node order (``reclaimForTask`` walks ``PredicateNodes``' list, scoring no node):
        the nodes that pass the static predicates, in the order of ``nodes`` (a region's ``node_list``)."""
        return [n for n, passes in zip(nodes, self.ctx.predicates.mask(pod, nodes), strict=True) if passes]

    def evict_for(self, pod: Pod, nodes: list[str], job: VCJob, stmt: Statement, rules: Rules) -> str | None:
        """Volcano's preempt and reclaim for one pod (``actions/preempt``, ``actions/reclaim``): the nodes in
        ``preempt_order`` (reclaim: ``reclaim_order``); reclaim passes over a node without a pod of another
        reclaimable queue (even one with room); on each node the victims the tiers allow (``tier_victims``, maybe
        none), when they and the node's room together fit the pod (``could_fit``), go one by one in victim order until
        the node has room for the pod ("just enough", none when it has already) — preempt also until the pod's queue
        may take it (``ssn.Allocatable``: its victims are of that queue and free its room too), reclaim looks at the
        node's room only; the pod must then fit its queues too (else the node's evictions are undone: Volcano's
        reclaim would place it past an ancestor's realCapability, optplan does not take victims for queue room there);
        else the next node."""
        walk = self.preempt_order(pod, nodes, job) if rules.reason == "preempt" else self.reclaim_order(pod, nodes)
        for n in walk:
            present = any(c.key in rules.eligible and c.key not in self.state.evicted
                          for c in [*self.cat.by_node.get(n, []), *self.cat.shielded.get(n, [])])
            if rules.reason == "reclaim" and not present:
                continue
            victims = self.tier_victims(pod, n, job, stmt, rules) if present else []
            if not self.could_fit(pod, n, victims):
                continue
            mark = stmt.mark()
            for c in victims:  # just enough: until the node has room — and, preempt, the queue too
                if self.state.cap.fit_reason(pod, n) is None and (
                        rules.reason != "preempt" or self.state.queues.fit_reason(job.queue, pod.requests) is None):
                    break
                if self.may_take(c):
                    stmt.evict(c.pod, c.node, c.queue, c.group)
            if self.fits(pod, n, job.queue):
                return n
            stmt.rollback(mark)
        return None

    def victim_regions(self, job: VCJob, reason: str) -> list[Region]:
        """Where the job's dry run with victims walks: its candidate regions (preempt; reclaim of a job
        without a network topology), or for reclaim of a job with one the whole cluster — Volcano's
        ``reclaimForTask`` walks every node and has no HyperNode step; the next cycle's allocate places the
        job under its limit (``evict.plan_victims``); a partitioned job's reclaim likewise (no sub-job step)."""
        if evicts_anywhere(job, reason):
            return [Region(None, None, frozenset(self.ctx.snapshot.nodes))]
        return self.ctx.regions[job.key]

    def with_victims(self, job: VCJob, rules: Rules, pre: tuple[Binding, ...] = ()
                     ) -> tuple[VictimChoice | None, str]:
        """The greedy's victims for the job (state unchanged): regions in order, the first that works.
        ``pre``: the job's pods already pipelined on the state (``evict.pipeline_within``), counted for its gang."""
        first: str | None = None
        for region in self.victim_regions(job, rules.reason):
            stmt = Statement(self.state)
            bindings, short = self.dry_run(job, region, stmt, rules, pre)
            evicted = [rules.eligible[p.key] for p, _n in stmt.evictions()]
            stmt.discard()
            if short is None:
                return VictimChoice(bindings=bindings, victims=evicted, region=region,
                                    cost=sum(c.cost for c in evicted)), ""
            if first is None:
                first = f"{region.label}: {short}" if job.network_topology is not None else short
        return None, first or "no region"
