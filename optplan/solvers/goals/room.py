"""The running state the goal heuristics (``greedy``, ``kai``) share: the room after the moves and the
gangs' forecasts so far, the queues, the budgets and PDBs used, which nodes lose and which receive pods,
and the nodes no pod may land on (freed HyperNodes). Every change is journaled, so a tentative step (one
region tried for a gang, one HyperNode tried) is undone exactly, as Volcano's ``Statement`` discards.

The rules are the goal validator's (``validate``), applied as the plan grows so the finished plan passes
it: a node that loses pods never receives one and a receiver never loses one (the moves then run in any
order); a moved pod lands where the static predicates, the room, its PodGroup's hard topology
(``GoalProblem.destinations``) and the budgets (maxPerRun, PDBs: Repack's ``overruns``)
allow; each pod moves at most once.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator
from contextlib import contextmanager

from optplan.models.goals import QUOTA, Admission, GoalPlan
from optplan.models.placement import Binding
from optplan.models.repack import PodMove, SolverRecord
from optplan.models.snapshot import Pod, Resources
from optplan.solvers.core import gpushare
from optplan.solvers.core.oracle import POD_SLOT, constraint_signature, gpu_ask
from optplan.solvers.goals.problem import Gang, GangPod, GoalProblem, GoalResult
from optplan.solvers.placement.jobs import Region, bound_pod, held_pods
from optplan.solvers.placement.partitions import partition_regions, partitioned
from optplan.solvers.repack.rules import Spent


def fits_in(pod: Pod, free: Resources, limits_pods: bool) -> bool:
    """The oracle's fit rule on a free-room dict (``Capacity.fits``) that is not a ``Capacity``."""
    if any(v > 0 and free.get(r, 0) < v for r, v in pod.requests.items()):
        return False
    return not limits_pods or free.get("pods", 0) >= POD_SLOT


class Room:
    """The plan so far, with an undo journal (``mark``/``undo``)."""

    def __init__(self, problem: GoalProblem) -> None:
        self.problem = problem
        self.R = problem.resource
        self.cap = problem.capacity()
        self.queues = problem.queue_state()
        self.journal: list[Callable[[], None]] = []
        self.moved: dict[str, Pod] = {}
        """Moved pod key -> pod, in the order the plan moves them."""
        self.dest: dict[str, str] = {}
        self.devices: dict[str, tuple[int, ...]] = {}
        """Moved GPU share's key -> the device indices it lands on (``PodMove.to_devices``)."""
        self.why: dict[str, str] = {}
        self.sources: Counter[str] = Counter()
        self.receivers: Counter[str] = Counter()
        self.forbidden: set[str] = set()
        """Nodes of the HyperNodes the plan frees: no forecast pod and no moved pod lands there."""
        self.r_count: Counter[str] = Counter({n: len(ps) for n, ps in problem.repack.r_pods.items()})
        """Node -> R pods on it now (moved pods where they land, forecast pods included)."""
        self.forecast: dict[str, list[Binding]] = {}
        self.groups: Counter[str] = Counter()
        self.budget: Counter[str] = Counter()
        self.pdb: Counter[str] = Counter()
        self._buckets: dict[int, list[str]] = {}
        """Free R -> the nodes with that much free R, by name (best fit scans from the smallest)."""
        self._levels: list[int] = []
        self._rows: dict[str, dict[str, bool]] = {}
        """Pod key -> node -> the static predicates allow it (one row per constraint signature)."""
        self._by_sig: dict[tuple[object, ...], dict[str, bool]] = {}
        for n in sorted(problem.snapshot.nodes):
            self._bucket_add(n)
        held = {p.key for g in problem.gangs for ps in held_pods(g.job, problem.snapshot).values()
                for p in ps.values()}
        self.movable: dict[str, list[Pod]] = {n: ms for n, ps in problem.movable.items()
                                              if (ms := [p for p in ps if p.key not in held])}
        """Node -> its R pods that may move (the named gangs' own running pods stay), largest first."""

    # ---- the journal ----------------------------------------------------------------------------------

    def mark(self) -> int:
        return len(self.journal)

    def undo(self, mark: int) -> None:
        while len(self.journal) > mark:
            self.journal.pop()()

    # ---- best fit over free R -------------------------------------------------------------------------

    def free_r(self, node: str) -> int:
        return self.cap.free[node].get(self.R, 0)

    def _bucket_add(self, node: str) -> None:
        level = self.free_r(node)
        bucket = self._buckets.get(level)
        if bucket is None:
            bucket = self._buckets[level] = []
            insort(self._levels, level)
        insort(bucket, node)

    def _bucket_remove(self, node: str) -> None:
        level = self.free_r(node)
        bucket = self._buckets[level]
        del bucket[bisect_left(bucket, node)]

    def _change(self, node: str, pod: Pod, sign: int, devices: tuple[int, ...] | None = None
                ) -> tuple[int, ...] | None:
        """Add (sign -1: the pod takes room; on ``devices`` when given, else where the oracle's fit rule puts
        it) or remove (+1) the pod's demand on the node. Returns the device indices it held or now holds (None
        when it holds none), so that an undo puts it back on the same devices."""
        self._bucket_remove(node)
        if sign < 0:
            share = pod.gpu_share
            if devices is None and share is not None and share.devices and node == pod.node_name:
                devices = share.devices  # back where it runs
            self.cap.add(pod, node, devices)
            held = self.cap.devices_of(pod)
        else:
            held = self.cap.devices_of(pod)
            self.cap.remove(pod, node)
        self._bucket_add(node)
        return held[1] if held is not None and held[0] == node else None

    def best_fit(self, pod: Pod, allowed: Callable[[str], bool], among: Collection[str] | None = None
                 ) -> Iterator[str]:
        """Nodes where the pod fits now, fullest first (least free R, then by name), among ``allowed`` (and
        ``among``, when given: a small set is scanned directly)."""
        if among is not None and len(among) * 4 < len(self.cap.free):
            for node in sorted(among, key=lambda n: (self.free_r(n), n)):
                if allowed(node) and self.cap.fits(pod, node) and self.allows(pod, node):
                    yield node
            return
        need = pod.request(self.R)
        start = bisect_left(self._levels, need)
        for level in list(self._levels[start:]):
            for node in list(self._buckets.get(level, ())):
                if allowed(node) and self.cap.fits(pod, node) and self.allows(pod, node):
                    yield node

    def allows(self, pod: Pod, node: str) -> bool:
        """The static predicates (the oracle's ``Predicates``), the pod's row looked up by its key."""
        row = self._rows.get(pod.key)
        if row is None:
            sig = constraint_signature(pod)
            row = self._rows[pod.key] = self._by_sig.setdefault(sig, {})
        ok = row.get(node)
        if ok is None:
            ok = row[node] = self.problem.predicates.reason(pod, node) is None
        return ok

    # ---- changes --------------------------------------------------------------------------------------

    def move(self, pod: Pod, src: str, dst: str, why: str) -> None:
        """The pod moves from ``src`` to ``dst``; a GPU share to the device the oracle's fit rule gives it
        there (best fit), which its move names (``devices``)."""
        held = self._change(src, pod, +1)
        taken = self._change(dst, pod, -1)
        if pod.gpu_share is not None and taken is not None:
            self.devices[pod.key] = taken
        gk = self.problem.repack.charged_group(pod)
        pdbs = self.problem.repack.pdbs_charged(pod)
        budget = self.problem.repack.budget_use([pod])
        self.moved[pod.key] = pod
        self.dest[pod.key] = dst
        self.why[pod.key] = why
        self.sources[src] += 1
        self.receivers[dst] += 1
        self.r_count[src] -= 1
        self.r_count[dst] += 1
        self.groups[gk] += 1
        self.pdb.update(pdbs)
        self.budget.update(budget)

        def back() -> None:
            self._change(dst, pod, +1)
            self._change(src, pod, -1, held)
            self.devices.pop(pod.key, None)
            del self.moved[pod.key], self.dest[pod.key], self.why[pod.key]
            self.sources[src] -= 1
            self.receivers[dst] -= 1
            self.r_count[src] += 1
            self.r_count[dst] -= 1
            self.groups[gk] -= 1
            self.pdb.subtract(pdbs)
            self.budget.subtract(budget)
        self.journal.append(back)

    def lift(self, pod: Pod, node: str, sign: int = 1) -> None:
        """Take the pod's demand off the node (sign 1) or put it back (-1), for a simulation that evicts
        pods and re-places them (``kai``); not a move."""
        has_r = self.problem.uses_r(pod, node)
        held = self._change(node, pod, sign)
        if has_r:
            self.r_count[node] -= sign

        def back() -> None:
            self._change(node, pod, -sign, held)
            if has_r:
                self.r_count[node] += sign
        self.journal.append(back)

    def place(self, gang: Gang, task: str, index: int, pod: Pod, node: str) -> None:
        """A forecast pod of the gang on the node."""
        self._change(node, pod, -1)
        has_r = self.problem.uses_r(pod, node)
        if has_r:
            self.r_count[node] += 1
        self.forecast.setdefault(gang.key, []).append(Binding(task=task, index=index, node=node,
                                                              pod=bound_pod(gang.job, task, index)))

        def back() -> None:
            self._change(node, pod, +1)
            if has_r:
                self.r_count[node] -= 1
            self.forecast[gang.key].pop()
            if not self.forecast[gang.key]:
                del self.forecast[gang.key]
        self.journal.append(back)

    def charge(self, gang: Gang) -> None:
        """The gang's requests on its queue (and ancestors)."""
        self.queues.add(gang.queue, gang.requests)
        self.journal.append(lambda: self.queues.add(gang.queue, gang.requests, -1))

    def forbid(self, nodes: Iterable[str]) -> None:
        new = set(nodes) - self.forbidden
        self.forbidden |= new
        self.journal.append(lambda: self.forbidden.difference_update(new))

    # ---- the rules as the plan grows ------------------------------------------------------------------

    def is_source(self, node: str) -> bool:
        return self.sources[node] > 0

    def is_receiver(self, node: str) -> bool:
        return self.receivers[node] > 0

    def left_on(self, node: str) -> list[Pod]:
        """The node's movable R pods (GPU shares among them, when they move) that have not moved, largest
        first."""
        return [p for p in self.movable.get(node, ()) if p.key not in self.moved]

    def budget_reason(self, pods: Collection[Pod]) -> str | None:
        """Why moving ``pods`` as well would break maxPerRun or a PDB (Repack's ``overruns``), or None."""
        spent = Spent(frozenset(g for g, n in self.groups.items() if n > 0), dict(self.budget), dict(self.pdb))
        over = self.problem.repack.overruns(pods, spent)
        return over[0].budget if over else None

    def receiver_for(self, pod: Pod, src: str, banned: Collection[str]) -> str | None:
        """The fullest node the pod may move to (best fit): not a node that loses pods, not ``banned``, not
        forbidden, within its PodGroup's hard topology, static predicates and room."""
        if self.is_receiver(src):
            return None
        dests = self.problem.destinations(pod)

        def allowed(n: str) -> bool:
            return (n != src and n not in banned and n not in self.forbidden and not self.is_source(n)
                    and (dests is None or n in dests))
        return next(self.best_fit(pod, allowed), None)

    def share_receiver(self, pod: Pod, src: str, banned: Collection[str]) -> str | None:
        """``receiver_for`` a GPU share that moves, best fit at device level: among the nodes listing their GPUs
        that may take it (the same rules), the one whose device it would fill most (the least milli-GPU left on
        the device the fit rule gives it there), then the least free R, then by name."""
        if self.is_receiver(src):
            return None
        dests = self.problem.destinations(pod)
        cap = self.cap
        nodes = self.problem.snapshot.nodes
        best: tuple[int, int, str] | None = None
        need = self.problem.repack.share_milli.get(pod.key, 1)
        for n, free in cap.gpu_free.items():
            # the least milli-GPU it could leave there (by milli-GPU alone): none, or no better than the best
            # so far, and the node's rules are not asked (cheap: most nodes at scale)
            least = min((f - need for f in free if f >= need), default=None)
            if least is None or (best is not None and (least, self.free_r(n), n) >= best):
                continue
            if (n == src or n in banned or n in self.forbidden or self.is_source(n)
                    or (dests is not None and n not in dests) or not self.allows(pod, n) or not cap.fits(pod, n)):
                continue
            ask = gpu_ask(pod, nodes[n])
            chosen = gpushare.choose_devices(free, ask, cap.gpu_memory[n], nodes[n].devices[0].model,
                                             free_slots=cap.slots_for(n, pod), zero=cap.gpu_zero[n])
            if not chosen:
                continue
            key = (free[chosen[0]] - ask.milli, self.free_r(n), n)
            if best is None or key < best:
                best = key
        return best[2] if best is not None else None

    def moves_as_share(self, pod: Pod) -> bool:
        """The pod is a GPU share of part of one device that moves (``RepackProblem.share_milli``)."""
        share = pod.gpu_share
        return share is not None and not share.whole and pod.key in self.problem.repack.share_milli

    def relocate(self, pods: Iterable[Pod], src: str, banned: Collection[str], why: str,
                 avoid: Collection[str] = ()) -> bool:
        """Move each pod off ``src`` (largest R first) by best fit (a GPU share at device level:
        ``share_receiver``), off ``avoid`` when it can (else onto it); all or nothing (undone on failure)."""
        mark = self.mark()
        request = self.problem.repack.request
        for pod in sorted(pods, key=lambda p: (-request(p), p.key)):
            find = self.share_receiver if self.moves_as_share(pod) else self.receiver_for
            dst = find(pod, src, {*banned, *avoid}) if avoid else None
            if dst is None:
                dst = find(pod, src, banned)
            if dst is None:
                self.undo(mark)
                return False
            self.move(pod, src, dst, why)
        return True

    def holds_r(self, node: str) -> bool:
        return self.r_count[node] > 0

    # ---- the result -----------------------------------------------------------------------------------

    def result(self, name: str, admissions: list[Admission], freed_hyper_nodes: list[str],
               stats: dict[str, int]) -> GoalResult:
        rp = self.problem.repack
        snap = self.problem.snapshot
        moves = [PodMove(pod=k, from_node=snap.pods[k].node_name or "", to_node=self.dest[k],
                         to_devices=self.devices.get(k)) for k in sorted(self.moved)]
        # the nodes the moves leave without R (a forecast pod may land there later: still freed by the moves)
        freed = sorted(n for n in rp.occupied if self.is_source(n) and all(p.key in self.moved for p in rp.r_pods[n]))
        plan = GoalPlan.build(moves, freed, admissions, freed_hyper_nodes, dict(self.why))
        disruption = rp.disruption(list(self.moved.values()), dict(self.dest))
        return GoalResult(plan, SolverRecord(name=name, status="HEURISTIC"), disruption, stats)


def admitted(gang: Gang, region: Region, bindings: list[Binding], reason: str) -> Admission:
    job = gang.job
    return Admission(namespace=job.namespace, name=job.name, queue=job.queue, priority=gang.priority,
                     admitted=True, reason=reason, hyper_node=region.hyper_node, tier=region.tier,
                     bindings=tuple(sorted(bindings, key=lambda b: (b.task, b.index))))


def refused(gang: Gang, cause: str, reason: str) -> Admission:
    job = gang.job
    return Admission(namespace=job.namespace, name=job.name, queue=job.queue, priority=gang.priority,
                     admitted=False, cause=cause, reason=reason)


def quota_reason(room: Room, gang: Gang) -> str | None:
    """Why the gang's queue does not admit its minimum now (closed, not a leaf, or no quota left)."""
    return room.queues.admission_reason(gang.queue) or room.queues.fit_reason(gang.queue, gang.requests)


def place_without_moves(room: Room, gang: Gang, region: Region) -> bool:
    """Place the gang's pods, in gang order, each on the fullest region node where it fits (best fit);
    all or nothing. A partition of a partitioned task goes whole into the first of its HyperNodes inside the
    region (``gang_units``) where every one of its pods fits so."""
    mark = room.mark()
    for subs, pods in gang_units(room, gang, region):
        if not any(_best_fit_all(room, gang, sub, pods) for sub in subs):
            room.undo(mark)
            return False
    return True


def _best_fit_all(room: Room, gang: Gang, region: Region, pods: list[GangPod]) -> bool:
    """Each pod on the fullest node of ``region`` where it fits; all or nothing."""
    mark = room.mark()
    for gp in pods:
        node = next(room.best_fit(gp.pod, lambda n: n in region.nodes and n not in room.forbidden, region.nodes),
                    None)
        if node is None:
            room.undo(mark)
            return False
        room.place(gang, gp.task, gp.index, gp.pod, node)
    return True


def gang_units(room: Room, gang: Gang, region: Region) -> list[tuple[list[Region], list[GangPod]]]:
    """The gang's pods in the units they are placed by, in gang order: each pod of a task without a
    partitionPolicy alone, in ``region``; each partition of a partitioned task whole, in the HyperNodes inside
    ``region`` it may use (``partitions.partition_regions``: of tier ≤ its limit, holding its running pods)."""
    job = gang.job
    if not partitioned(job):
        return [([region], [gp]) for gp in gang.pods]
    tasks = {t.name: t for t in job.tasks}
    units: list[tuple[list[Region], list[GangPod]]] = []
    parts: dict[tuple[str, int], list[GangPod]] = {}
    running = held_pods(job, room.problem.snapshot)
    for gp in gang.pods:
        pp = tasks[gp.task].partition_policy
        if pp is None:
            units.append(([region], [gp]))
            continue
        key = (gp.task, pp.of(gp.index))
        if key not in parts:
            parts[key] = []
            nodes = {p.node_name for i, p in running.get(gp.task, {}).items()
                     if pp.of(i) == key[1] and p.node_name is not None}
            units.append((partition_regions(room.problem.snapshot, tasks[gp.task], region,
                                            {n for n in nodes if n is not None}), parts[key]))
        parts[key].append(gp)
    return units


def free_hyper_nodes_now(room: Room, limit: int) -> list[str]:
    """The goal's HyperNodes with no R pod now (forecasts included), by name, at most ``limit``."""
    p = room.problem
    return [h for h in sorted(p.hyper_nodes) if not any(room.holds_r(n) for n in p.hyper_nodes[h])][:limit]


def could_hold(room: Room, gang: Gang, region: Region) -> bool:
    """The gang fits the region (less forbidden nodes) emptied of every pod that may still move (not on a
    receiver), largest pod first by best fit: a region failing this is not searched. On a node that lists its
    devices, while GPU shares move, its R emptied is at most the whole cards its totals leave (shares that
    leave may free whole devices)."""
    cap = room.cap
    R = room.R
    devices = room.problem.repack.shares_move
    free = {}
    for n in region.nodes:
        if n in room.forbidden:
            continue
        room_n = dict(cap.free[n])
        if not room.is_receiver(n):
            if devices and n in cap.gpu_free:
                room_n[R] = cap.whole_total[n]
            for p in room.left_on(n):
                for r, v in p.requests.items():
                    room_n[r] = room_n.get(r, 0) + v
                room_n["pods"] = room_n.get("pods", 0) + POD_SLOT
        free[n] = room_n
    for gp in sorted(gang.pods, key=lambda g: -g.pod.request(R)):
        fit = [n for n in free if room.allows(gp.pod, n) and fits_in(gp.pod, free[n], cap.limits_pods(n))]
        if not fit:
            return False
        n = min(fit, key=lambda n: (free[n].get(R, 0), n))
        for r, v in gp.pod.requests.items():
            free[n][r] = free[n].get(r, 0) - v
        free[n]["pods"] = free[n].get("pods", 0) - POD_SLOT
    return True


@contextmanager
def opened(room: Room) -> Iterator[None]:
    """The room with no node forbidden, for the span of a what-if (restored after)."""
    saved = set(room.forbidden)
    room.forbidden.clear()
    try:
        yield
    finally:
        room.forbidden |= saved


def pinned_why(room: Room, gang: Gang) -> str:
    """Why the first pod that may not move, on the gang's regions' nodes by name, may not (for a reason)."""
    rp = room.problem.repack
    nodes = sorted(set().union(*(r.nodes for r in gang.regions))) if gang.regions else []
    for n in nodes:
        for p in room.problem.pinned.get(n, ()):
            return f"e.g. {p.key}: {'node-out-of-scope' if not rp.node_in_scope(n) else rp.pod_block(p)}"
    return "none movable"


def as_it_is(room: Room, gang: Gang) -> Admission | None:
    """What every goal planner decides before making room: a gang proven out of reach or short of quota is
    refused; one that fits in one of its regions without a move is admitted there (its pods charged); None:
    room has to be made."""
    if gang.cause is not None:
        return refused(gang, gang.cause, gang.why)
    why = quota_reason(room, gang)
    if why is not None:
        return refused(gang, QUOTA, why)
    for region in gang.regions:
        if place_without_moves(room, gang, region):
            room.charge(gang)
            return admitted(gang, region, room.forecast[gang.key], f"fits in {region.label} without moves")
    return None
