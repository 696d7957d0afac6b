"""The greedy incremental planner, exactly as seed 000 describes it (动态选择腾空目标).

Each round evaluates every remaining vacate candidate against the simulated state: its R-requesting
pods are placed one by one (largest request first, then by name), each on the first receiver in the
seed's order that passes every predicate and fits (and, for a hard-topology PodGroup, keeps it inside
one HyperNode of allowed tier). Feasible candidates that respect the budgets and PDBs are scored over
the five disruption dimensions of the plan-so-far-plus-candidate (restart units counted, see ``rules``;
plus the tiers soft-topology PodGroups widen, zero without HyperNodes), min-max normalised over the
round's feasible candidates and weighted; the lowest score wins (ties: larger freed capacity, then node
name). Its moves are committed and the next round starts; the planner stops when no feasible candidate
remains or its time is up.

Receiver order (接收节点的填充): (1) nodes that will stay occupied (not a vacate candidate, or already
a receiver) first; (2) then candidates with a higher future vacate cost — the weighted disruption of
vacating that node alone, from the snapshot; (3) then least R left after the move; (4) then name.

Speed: placements are cached per candidate and recomputed only when a committed round could change
them — when a receiver the candidate used changed, or when a changed receiver now fits one of its
pods ahead of the receiver it had chosen. Every other receiver keeps its capacity and its rank, so a
cached placement replays identically; the result equals a full re-evaluation every round. With GPU
shares moving, one scan (``_evaluate``) places whole-card pods and shares alike, a share only where a
device takes it (the device found by the scan is the one it takes), and "does a changed receiver now fit
it" is asked of the receiver's devices once per kind of share (``row_share``), not once per pod.

Layout: ``receiver_table`` (receiver columns: room from the oracle's ``Capacity.room_matrix``, tiers,
the sortable receiver key) and ``candidate_table`` (one row per candidate pod: demand, static predicates
from ``Predicates.mask``, restart units, budget and PDB use) are built once; the ``Ledger`` is the plan
so far; ``_Greedy`` holds the per-row placement cache, simulates placements (``_evaluate``), keeps the
disruption, budget and PDB accounting incrementally (``_delta``, ``_budget_ok``: the restart and breach
arithmetic is ``rules.restart_total`` and ``rules.gang_impact``, the budgets and PDBs
``RepackProblem.budget_use`` and ``pdb_use``), and ``run`` is the move loop. The tests hold this
bookkeeping against ``checks`` after every step.
"""

from __future__ import annotations

import logging
import time
from bisect import bisect_left, insort
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from optplan.models.devices import MILLI_PER_GPU, WHOLE_GPU
from optplan.models.repack import PodMove, RepackPlan, SolverRecord
from optplan.models.results import Disruption, PlanResult
from optplan.models.snapshot import Pod
from optplan.runtime import gc_paused
from optplan.solvers.core import gpushare
from optplan.solvers.core.clock import Clock
from optplan.solvers.core.gpushare import GpuAsk
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.core.oracle import (
    NO_POD_LIMIT,
    Capacity,
    Predicates,
    constraint_signature,
    gpu_ask,
    pod_demand,
    share_signature,
)
from optplan.solvers.core.planner import Planner
from optplan.solvers.repack.rules import RepackProblem, RestartUnit, gang_impact, restart_total

log = logging.getLogger(__name__)

_INF = np.int64(NO_POD_LIMIT)
"""A key no receiver reaches: the cached key of a row with no receiver yet."""
_NO_ENTRY = (-1, -1, -1)
"""Sorts before every (tier, R left, index) entry of the receiver order."""


# ---- the greedy's tables, built once per problem ----------------------------------------------------

@dataclass
class ReceiverTable:
    """Every occupied provider as a receiver column, in name order (an R-idle provider never receives)."""

    names: list[str]
    index: dict[str, int]
    resources: list[str]
    """Resources that matter for fit: everything a movable pod requests, plus pods."""
    row: dict[str, int]
    """Resource -> its row in ``free``."""
    free: np.ndarray
    """[resource, receiver] room, updated by commits (``Capacity.room_matrix``: ``NO_POD_LIMIT`` pods on
    a node without a pod limit)."""
    iR: int
    """The row of the target resource R."""
    tier: np.ndarray
    """0 = will stay occupied; 1 + rank of (−future vacate cost) for a candidate."""
    active: np.ndarray
    """Still a receiver (not vacated)."""
    key_exact: bool
    key: np.ndarray
    """One sortable key per receiver, tier * 2**40 + free R, while both fit in an int64 (``key_exact``);
    else the tier alone."""


def receiver_table(problem: RepackProblem) -> ReceiverTable:
    """The receivers, all of tier 0 until ``rank_receivers``."""
    names = list(problem.occupied)
    resources: set[str] = {"pods", problem.resource}
    for c in problem.candidates:
        for pod in problem.r_pods[c]:
            resources.update(pod.requests)
    res = sorted(resources)
    row = {r: i for i, r in enumerate(res)}
    free = Capacity(problem.snapshot).room_matrix(names, res)
    index = {n: i for i, n in enumerate(names)}
    tier = np.zeros(len(names), dtype=np.int64)
    return ReceiverTable(names=names, index=index, resources=res, row=row, free=free, iR=row[problem.resource],
                         tier=tier, active=np.ones(len(names), dtype=bool), key_exact=True, key=tier.copy())


def rank_receivers(rx: ReceiverTable, fcost: dict[str, float]) -> None:
    """Set the receivers' tiers and keys from ``fcost``, each candidate's future vacate cost (the weighted
    disruption of vacating it alone): a candidate with a higher one receives first (module docstring)."""
    rank = {v: i + 1 for i, v in enumerate(sorted({-v for v in fcost.values()}))}
    tier = np.zeros(len(rx.names), dtype=np.int64)
    for c, v in fcost.items():
        tier[rx.index[c]] = rank[-v]
    free = rx.free
    iR = rx.iR
    rx.tier = tier
    rx.key_exact = bool(not rx.names or (int(np.abs(free[iR]).max()) < 2**39 and int(tier.max()) < 2**22))
    rx.key = tier * np.int64(2**40) + free[iR] if rx.key_exact else tier.copy()


@dataclass
class _Candidate:
    index: int  # receiver index of the node (every candidate is an occupied provider)
    node: str
    pods: list[Pod]  # largest R first, then by name
    rows: range  # its rows in the per-pod arrays
    gain: int  # allocatable R freed
    groups: Counter[str]  # moved pods per PodGroup if vacated
    group_cards: Counter[str]
    restart: dict[str, tuple[frozenset[str], int, int]]
    """Per PodGroup, what vacating it restarts: (keys of its pods' restart units that are not the
    default, Running pods in default units, their R cards)."""


@dataclass
class CandidateTable:
    """The vacate candidates and their pods, one row per pod (largest R first, then by name, candidate
    after candidate), with what vacating each one takes from budgets and PDBs."""

    cands: list[_Candidate]
    of_receiver: dict[int, int]
    """Receiver index -> the candidate on that node."""
    static: np.ndarray
    """[constraint signature, receiver]: the static predicates (``Predicates.mask``)."""
    row_cand: np.ndarray
    row_sig: np.ndarray
    row_dem: np.ndarray
    """[resource, row]: the pod's demand (requests plus one pod slot), in ``ReceiverTable.resources``."""
    row_need: list[np.ndarray]
    """Per row, the resources it demands."""
    units: dict[str, RestartUnit]
    """Restart units that are not the default, by key."""
    gain: np.ndarray
    budget_res: dict[str, int]
    """maxPerRun.resources, by name."""
    budget_use: np.ndarray
    """[candidate, budget resource]: what vacating it takes (``RepackProblem.budget_use``)."""
    pdb_use: list[Counter[str]]
    """Per candidate, PDB key -> the pods it covers (``RepackProblem.pdb_use``)."""
    has_pdb: np.ndarray
    has_topo: np.ndarray
    """Some PodGroup of the candidate has a networkTopology."""
    of_group: dict[str, list[int]]
    of_topo_group: dict[str, list[int]]


def candidate_table(problem: RepackProblem, rx: ReceiverTable, predicates: Predicates) -> CandidateTable:
    snap = problem.snapshot
    R = problem.resource
    cands: list[_Candidate] = []
    units_by_key: dict[str, RestartUnit] = {}
    row = 0
    for c in problem.candidates:
        pods = problem.r_pods[c]
        groups: Counter[str] = Counter()
        cards: Counter[str] = Counter()
        units: dict[str, set[str]] = defaultdict(set)
        singles: Counter[str] = Counter()
        single_cards: Counter[str] = Counter()
        for pod in pods:
            gk = pod.group_key or ""
            groups[gk] += 1
            cards[gk] += problem.request(pod)
            unit = problem.restart_unit(pod)
            if unit.policy is None:
                singles[gk] += unit.running
                single_cards[gk] += unit.cards
            else:
                units[gk].add(unit.key)
                units_by_key[unit.key] = unit
        restart = {gk: (frozenset(units[gk]), singles[gk], single_cards[gk]) for gk in groups}
        cands.append(_Candidate(rx.index[c], c, pods, range(row, row + len(pods)), snap.nodes[c].allocatable[R],
                                groups, cards, restart))
        row += len(pods)
    # Static predicates per constraint signature, over receivers.
    sig_ids: dict[tuple[object, ...], int] = {}
    static_rows: list[np.ndarray] = []
    cand_of: list[int] = []
    sig_of: list[int] = []
    dem_of: list[list[int]] = []
    for ci, cand in enumerate(cands):
        for pod in cand.pods:
            sig = constraint_signature(pod)
            if sig not in sig_ids:
                sig_ids[sig] = len(static_rows)
                static_rows.append(predicates.mask(pod, rx.names))
            cand_of.append(ci)
            sig_of.append(sig_ids[sig])
            dem = [0] * len(rx.resources)
            for r, v in pod_demand(pod).items():
                dem[rx.row[r]] = v
            dem_of.append(dem)
    row_cand = np.array(cand_of, dtype=np.int64)
    row_sig = np.array(sig_of, dtype=np.int64)
    row_dem = np.array(dem_of, dtype=np.int64).reshape(row, len(rx.resources)).T.copy()
    C = len(cands)
    budget_res = dict(problem.budgets.resources)
    budget_use = np.array([list(problem.budget_use(cand.pods).values()) for cand in cands],
                          dtype=np.int64).reshape(C, len(budget_res))
    pdb_use = [problem.pdb_use(cand.pods) for cand in cands]
    of_group: dict[str, list[int]] = defaultdict(list)
    of_topo_group: dict[str, list[int]] = defaultdict(list)
    for ci, cand in enumerate(cands):
        for gk in cand.groups:
            of_group[gk].append(ci)
            if gk in problem.topology_groups:
                of_topo_group[gk].append(ci)
    return CandidateTable(
        cands=cands, of_receiver={cand.index: ci for ci, cand in enumerate(cands)},
        static=np.array(static_rows, dtype=bool).reshape(len(static_rows), len(rx.names)),
        row_cand=row_cand, row_sig=row_sig, row_dem=row_dem,
        row_need=[np.array([i for i, v in enumerate(dem) if v > 0], dtype=np.int64) for dem in dem_of],
        units=units_by_key,
        gain=np.array([c.gain for c in cands], dtype=np.int64), budget_res=budget_res, budget_use=budget_use,
        pdb_use=pdb_use, has_pdb=np.array([bool(u) for u in pdb_use], dtype=bool),
        has_topo=np.array([any(g in problem.topology_groups for g in c.groups) for c in cands], dtype=bool),
        of_group=of_group, of_topo_group=of_topo_group)


@dataclass
class Ledger:
    """The plan so far, as the dimensions, budgets, PDBs and topology read it (the incremental
    versions of ``checks``' families, tested against them)."""

    totals: np.ndarray = field(default_factory=lambda: np.zeros(6, dtype=np.int64))
    """The six dimensions of the plan so far."""
    moved_in_group: Counter[str] = field(default_factory=Counter)
    units_in_group: dict[str, frozenset[str]] = field(default_factory=lambda: defaultdict(frozenset))
    """Restart units that are not the default, restarted so far, per PodGroup."""
    singles_in_group: Counter[str] = field(default_factory=Counter)
    """Running pods restarted in default units, per PodGroup."""
    single_cards_in_group: Counter[str] = field(default_factory=Counter)
    used_res: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    pdb_left: dict[str, int] = field(default_factory=dict)
    positions: dict[str, Counter[str]] = field(default_factory=dict)
    """Current nodes of each topology PodGroup's pods."""
    moves: list[PodMove] = field(default_factory=list)
    freed: list[str] = field(default_factory=list)
    received: set[int] = field(default_factory=set)


def ledger(problem: RepackProblem, ct: CandidateTable) -> Ledger:
    return Ledger(used_res=np.zeros(len(ct.budget_res), dtype=np.int64),
                  pdb_left=dict(problem.budgets.pdbs),
                  positions={g: Counter(problem.group_nodes(g)) for g in problem.topology_groups})


# ---- the search ----------------------------------------------------------------------------------------

class GreedyPlanner(Planner[RepackProblem, PlanResult]):
    """The seed's greedy, exactly: every round re-evaluates every candidate whose placement may
    have changed."""

    name = "greedy"
    lazy = False
    setup_seconds = 0.0
    """Wall-clock seconds its last ``plan`` took to build its tables (``auto`` reads it)."""

    def plan(self, problem: RepackProblem, options: PlanOptions, hint: PlanResult | None = None) -> PlanResult:
        t0 = time.perf_counter()
        clock = options.timer()
        deadline = clock.now() + options.time_limit  # building the tables counts (on the wall clock)
        with gc_paused():
            state = _Greedy(problem, lazy=self.lazy)
            self.setup_seconds = time.perf_counter() - t0
            moves, freed = state.run(clock, deadline)
        plan = RepackPlan.build(moves, freed)
        wall = time.perf_counter() - t0
        log.info("greedy: freed %d nodes, moved %d pods in %.3fs (%d rounds, %d evaluations)",
                 len(freed), len(moves), wall, state.rounds, state.evaluations)
        if state.truncated:
            log.warning("greedy: time limit reached after %d rounds; the plan so far is returned", state.rounds)
        record = SolverRecord(name=self.name, status="HEURISTIC", wall_seconds=round(wall, 3))
        return PlanResult(plan=plan, record=record, disruption=problem.plan_disruption(plan),
                          rejections=state.rejections())


class FastGreedyPlanner(GreedyPlanner):
    """The seed's greedy with two shortcuts for large clusters, used by ``auto`` above
    FAST_GREEDY_ABOVE candidates:

    - a candidate whose old placement is still valid (its receivers kept room for what it put there)
      stays feasible for the round's ranking without being re-simulated; it is re-simulated when
      its turn to commit comes, and skipped if first-fit then fails;
    - each round commits down its ranking, up to a twentieth of the feasible candidates, each one
      re-simulated (and budget-checked) on the state the commits before it left. Scores are those
      of the round's start, which is where this differs from the seed's one-commit rounds.

    Every committed move is simulated exactly, and the plan is validated like any other."""

    name = "greedy-fast"
    lazy = True


class _Greedy:
    """The search state: the tables, the plan so far, and per pod row the cached placement (its
    receiver and that receiver's key), per candidate whether that cache and its disruption delta are
    current. ``run`` is the move loop; ``_evaluate`` the placement simulation; ``_delta`` and
    ``_budget_ok`` the incremental disruption, budget and PDB accounting."""

    share = True
    """Share placements between candidates (``_evaluate``'s ``memo``); the tests turn it off to compare."""

    def __init__(self, problem: RepackProblem, lazy: bool = False) -> None:
        self.p = problem
        self.lazy = lazy
        # The candidate table reads the receivers' names and resources, not their tiers: the receivers are
        # ranked after it, by the candidates' deltas on the empty plan.
        self.rx = receiver_table(problem)
        self.ct = candidate_table(problem, self.rx, Predicates(problem.snapshot))
        self.led = ledger(problem, self.ct)
        nrows, C = len(self.ct.row_cand), len(self.ct.cands)
        self.delta = np.zeros((C, 6), dtype=np.int64)  # what each candidate would add to the totals
        self.delta_dirty = np.ones(C, dtype=bool)
        for ci in range(C):
            self._delta(ci)
        rank_receivers(self.rx, self.candidate_costs())
        # Cached evaluation per row: chosen receiver and its key (tier, R left, index). Python lists, written
        # by every evaluation; ``_mark_dirty`` reads them as arrays once per commit.
        self.ch_u: list[int] = [-1] * nrows
        self.ch_tier: list[int] = [NO_POD_LIMIT] * nrows
        self.ch_left: list[int] = [NO_POD_LIMIT] * nrows
        self.evaluated: list[bool] = [False] * nrows
        self.placeable = np.zeros(C, dtype=bool)
        self.alive = np.ones(C, dtype=bool)  # still a vacate candidate
        self.dirty = np.ones(C, dtype=bool)
        self.stale = np.zeros(C, dtype=bool)  # lazy mode: a better receiver appeared, feasibility kept
        # The placement simulation's view (``_evaluate``), in Python lists: per receiver its room and tier,
        # the active receivers sorted by the seed's order, and per pod row its demand and facts.
        rx = self.rx
        self.free: list[list[int]] = rx.free.T.tolist()
        self.tier: list[int] = rx.tier.tolist()
        self.order: list[tuple[int, int, int]] = sorted(
            (self.tier[u], self.free[u][rx.iR], u) for u in np.flatnonzero(rx.active).tolist())
        """(tier, R left, index) of every active receiver, ascending: the order ``_best`` picks in."""
        self.orders: dict[tuple[int, int | None], list[tuple[int, int, int]]] = {}
        """``_order_for``'s restrictions of ``order``, by (constraint signature, least R left)."""
        self.static: list[list[bool]] = self.ct.static.tolist()
        self.row_dem: list[list[int]] = self.ct.row_dem.T.tolist()
        self.row_need: list[list[int]] = [need.tolist() for need in self.ct.row_need]
        self.row_sig: list[int] = self.ct.row_sig.tolist()
        self.row_check: list[list[tuple[int, int]]] = [
            [(i, dem[i]) for i in need if i != rx.iR] for dem, need in zip(self.row_dem, self.row_need, strict=True)]
        """Per row, (resource, demand) of what it demands besides R."""
        self.row_list: list[tuple[int, int | None]] = [
            (sig, dem[rx.iR] if rx.iR in need else None)
            for sig, dem, need in zip(self.row_sig, self.row_dem, self.row_need, strict=True)]
        """Per row, which of ``orders`` it reads (``_order_for``'s arguments)."""
        self.row_group: list[str] = [pod.group_key or "" for cand in self.ct.cands for pod in cand.pods]
        kinds: dict[tuple[int, ...], int] = {}
        row_kind = [kinds.setdefault((sig, *dem), len(kinds))
                    for sig, dem in zip(self.row_sig, self.row_dem, strict=True)]
        self.row_kind = np.array(row_kind, dtype=np.int64)
        self.kind_sig = np.array([k[0] for k in kinds], dtype=np.int64)
        self.kind_dem = np.array([k[1:] for k in kinds], dtype=np.int64).reshape(len(kinds), len(rx.resources)).T
        """[resource, kind]: a row kind's demand (``_mark_dirty`` asks "does it fit" once per kind)."""
        self.cand_classes: list[tuple[int, ...]] = [tuple(row_kind[k] for k in cand.rows) for cand in self.ct.cands]
        """Per candidate, its rows' kinds (same signature and demand: placed alike), the ``memo``'s key."""
        self.topo_of: list[list[str]] = [[g for g in cand.groups if g in self.led.positions] for cand in self.ct.cands]
        """Per candidate, its topology PodGroups."""
        self.memo: dict[tuple[int, ...], tuple[list[int], list[int], tuple[int, int, int]]] = {}
        """Placements of row-kind prefixes on the current state (``_evaluate``): chosen receivers, R left
        on them, the last order entry examined. Emptied by every commit."""
        self._init_devices()
        # Network topology: HyperNode masks over receivers.
        topo = problem.snapshot.topology
        self.region_mask = {h: np.array([n in topo.region_nodes(h) for n in self.rx.names], dtype=bool)
                            for h in topo.regions(None)} if problem.topology_groups else {}
        self.rounds = 0
        self.evaluations = 0
        self.truncated = False
        self.final_reasons: dict[int, str] = {}

    def _init_devices(self) -> None:
        """GPU shares as Repack pods (``RepackProblem.shares_move``): per receiver its devices' free milli-GPU
        and memory (the oracle's ``Capacity``), per pod row whether it holds a share (a device row), per
        candidate whether it has one. Without shares moving, nothing here is read."""
        p, rx, ct = self.p, self.rx, self.ct
        self.dev = p.shares_move
        self.row_pod: list[Pod] = [pod for cand in ct.cands for pod in cand.pods]
        self.row_dev: list[bool] = [self.dev and pod.key in p.share_milli for pod in self.row_pod]
        self.has_dev = np.array([any(self.row_dev[k] for k in cand.rows) for cand in ct.cands], dtype=bool)
        self.row_dev_np = np.array(self.row_dev, dtype=bool)
        self.ch_dev: list[tuple[int, ...] | None] = [None] * len(self.row_pod)
        """Per device row, the device positions its cached placement takes on its receiver."""
        self.dev_free: list[list[int] | None] = []
        self.dev_mem: list[list[int] | None] = []
        self.dev_slots: list[list[int] | None] = []
        """Per receiver, the pods each device may still take (``Capacity.gpu_slots``), or None."""
        self.row_spread: list[bool] = [dev and pod.gpu_share is not None and pod.gpu_share.spread
                                       and pod.group_key is not None
                                       for pod, dev in zip(self.row_pod, self.row_dev, strict=True)]
        """Per row, a moving share that spreads (``GpuShare.spread``)."""
        self.spread_groups: frozenset[str] = frozenset(
            pod.group_key or "" for pod, s in zip(self.row_pod, self.row_spread, strict=True) if s)
        """Their PodGroups."""
        self.row_spread_group: list[str] = [
            pod.group_key if pod.group_key in self.spread_groups else "" for pod in self.row_pod]
        """Per row, its PodGroup when it is one of ``spread_groups`` (its pods are kept per device), else ""."""
        self.dev_groups: list[list[Counter[str]]] = []
        """Per receiver, per device, the pods of ``spread_groups`` on it (``Capacity.gpu_groups``, kept by
        ``_take``)."""
        self.dev_model: list[str | None] = []
        self.dev_sig: list[int] = []
        self.asks: dict[tuple[int, int], GpuAsk] = {}
        self.maxfree: list[int] = []
        """Per receiver, the most free milli-GPU on one of its devices (-1 without devices)."""
        self.row_milli: list[int] = [min(p.share_milli.get(pod.key, 0), MILLI_PER_GPU) for pod in self.row_pod]
        """Per device row, the free milli-GPU a device needs at least to take it."""
        self.row_whole: list[GpuAsk] = [GpuAsk(whole=pod.requests.get(WHOLE_GPU, 0) // MILLI_PER_GPU)
                                        for pod in self.row_pod]
        """Per row, its whole cards as an ask (what a whole-card pod takes of untouched devices, ``_take``)."""
        shares: dict[object, int] = {}
        self.row_share = np.array([
            shares.setdefault(share_signature(pod), len(shares)) if dev and pod.gpu_share is not None else -1
            for pod, dev in zip(self.row_pod, self.row_dev, strict=True)], dtype=np.int64)
        """Per device row, its share's id (alike shares, wherever they sit, one id: the same ask on a receiver; a
        spreading share's of its PodGroup too); -1 for the other rows. ``_mark_dirty`` asks a receiver's devices
        once per id."""
        self.dev_orders: dict[tuple[int, int], list[tuple[int, int, int]]] = {}
        """``order`` restricted to receivers a device row may use: by (constraint signature, milli-GPU), the
        receivers its static predicates admit with a device that has that much free (``_dev_order_for``)."""
        if not self.dev:
            return
        cap = Capacity(p.snapshot)
        nodes = p.snapshot.nodes
        sigs: dict[tuple[object, ...], int] = {}
        for name in rx.names:
            devices = nodes[name].devices
            free = cap.gpu_free.get(name)
            memory, slots = cap.gpu_memory.get(name), cap.gpu_slots.get(name)
            self.dev_free.append(list(free) if free is not None else None)
            self.dev_mem.append(list(memory) if memory is not None else None)
            self.dev_slots.append(list(slots) if slots is not None else None)
            self.dev_groups.append([Counter({g: n for g, n in c.items() if g in self.spread_groups and n > 0})
                                    for c in cap.gpu_groups.get(name, [])])
            self.dev_model.append(devices[0].model if devices else None)
            self.dev_sig.append(sigs.setdefault((tuple(d.model for d in devices),
                                                 devices[0].memory_mib if devices else 0), len(sigs)))
            self.maxfree.append(max(free, default=-1) if free is not None else -1)

    def _dev_order_for(self, sig: int, milli: int) -> list[tuple[int, int, int]]:
        """``order`` restricted to the receivers the static predicates of ``sig`` admit and that have a device
        with ``milli`` free (room only shrinks: a receiver that drops below stays out); kept by ``_commit``."""
        out = self.dev_orders.get((sig, milli))
        if out is None:
            static, maxfree = self.static[sig], self.maxfree
            out = self.dev_orders[sig, milli] = [e for e in self.order if static[e[2]] and maxfree[e[2]] >= milli]
        return out

    def _ask(self, k: int, u: int) -> GpuAsk:
        """Row ``k``'s GPU ask on receiver ``u`` (``oracle.gpu_ask``: memory by percent and device types are
        the receiver's), cached per alike receivers."""
        key = (k, self.dev_sig[u])
        ask = self.asks.get(key)
        if ask is None:
            ask = self.asks[key] = gpu_ask(self.row_pod[k], self.p.snapshot.nodes[self.rx.names[u]])
        return ask

    def _device_fit(self, k: int, u: int) -> tuple[int, ...] | None:
        """The device positions of receiver ``u`` that device row ``k`` takes (``gpushare.choose_devices``,
        best fit), None if none can: a moved share goes to a device, so never to a receiver that lists none."""
        free = self.dev_free[u]
        if free is None:
            return None
        return gpushare.choose_devices(free, self._ask(k, u), self.dev_mem[u], self.dev_model[u],
                                       free_slots=self._slots(k, u) if self.row_spread[k] else self.dev_slots[u])

    def _slots(self, k: int, u: int) -> Sequence[int] | None:
        """Receiver ``u``'s free pod slots per device for spreading row ``k``: none where a pod of its PodGroup
        sits (``Capacity.slots_for``'s rule on this state)."""
        gk, groups = self.row_spread_group[k], self.dev_groups[u]
        return gpushare.without(self.dev_slots[u], {d for d, c in enumerate(groups) if c[gk]}, len(groups))

    def _take(self, k: int, u: int, choice: tuple[int, ...] | None = None) -> tuple[int, ...] | None:
        """Row ``k`` lands on receiver ``u``: its demand leaves ``free[u]``; at device level a share (or
        whole shared cards) takes ``choice`` (else its best fit), a whole-card pod the lowest untouched
        devices, and the receiver's free R becomes the whole cards its untouched devices leave (at most what
        it was). Returns the device positions a device row took."""
        room, dem = self.free[u], self.row_dem[k]
        for j in self.row_need[k]:
            room[j] -= dem[j]
        free = self.dev_free[u] if self.dev else None
        if free is None:
            return None
        memory = self.dev_mem[u]
        iR = self.rx.iR
        taken: tuple[int, ...] | None = None
        per = mem = 0
        if self.row_dev[k]:
            ask = self._ask(k, u)
            taken = choice if choice is not None else self._device_fit(k, u)
            per, mem = (ask.milli if ask.is_share else MILLI_PER_GPU), ask.memory_mib
        elif dem[iR] > 0:
            taken = gpushare.choose_devices(free, self.row_whole[k], memory, free_slots=self.dev_slots[u])
            per = MILLI_PER_GPU
        opened = False  # an untouched device is taken: the whole cards left may drop
        slots = self.dev_slots[u]
        gk = self.row_spread_group[k]
        groups = self.dev_groups[u] if gk else None
        for d in taken or ():
            opened = opened or free[d] == MILLI_PER_GPU
            free[d] -= per
            if memory is not None:
                memory[d] -= mem
            if slots is not None:
                slots[d] -= 1
            if groups is not None:
                groups[d][gk] += 1
        if opened:
            room[iR] = min(room[iR], sum(1 for f in free if f == MILLI_PER_GPU) * MILLI_PER_GPU)
        return taken if self.row_dev[k] else None

    def _device_ids(self, u: int, taken: tuple[int, ...] | None) -> tuple[int, ...] | None:
        """Device positions of receiver ``u`` as the device indices a plan names (``PodMove.to_devices``)."""
        if taken is None:
            return None
        devices = self.p.snapshot.nodes[self.rx.names[u]].devices
        return tuple(devices[d].index for d in taken)

    # ---- placement simulation ----------------------------------------------------------------

    def _evaluate(self, ci: int) -> None:
        """Place the candidate's pods one by one on the current state; cache rows and keys. Each pod
        goes to the first receiver in the seed's order (``_best``: lowest tier, least R left, name) that
        passes its static predicates, fits every resource it demands, keeps a hard-topology PodGroup
        in one HyperNode and, for a GPU share (a device row), has a device that takes it (then the
        best-fitting device there, ``_device_fit``): read from ``order`` (the receivers sorted by that key;
        ``_order_for``, or ``_dev_order_for`` for a share), skipping the ones with less R than the pod
        needs, and from the receivers this evaluation already used (their room changed, so their place in
        ``order`` is stale). A candidate holding a share places at device level (``_take``: whole-card pods
        take untouched devices), its receivers' room and devices restored from copies afterwards.

        Candidates without topology PodGroups or shares share placements within a state (``memo``):
        first-fit places a pod from the pods before it and the state alone, so two candidates whose first j
        pods have the same demands and signatures place them alike, unless the scan met one of their own
        nodes (skipped as a receiver). Each stored prefix keeps the last order entry its scans examined
        (``reach``); it serves a candidate whose own node sorts after that entry, and it is stored only
        while the scan skipped no node as its own. Device room is not in a row's kind: a candidate holding
        a share neither reads nor stores the memo."""
        self.evaluations += 1
        rx, ct = self.rx, self.ct
        cand = ct.cands[ci]
        free = self.free
        tier = self.tier
        positions = self.led.positions
        hard = self.p.hard_topology
        iR = rx.iR
        own = cand.index
        devices = bool(self.has_dev[ci])
        touched: dict[int, list[int]] = {}
        """receiver -> the candidate's rows placed there so far (their room is taken from ``free``)."""
        saved: dict[int, tuple[list[int], list[int] | None, list[int] | None, list[int] | None,
                               list[Counter[str]]]] = {}
        """At device level, receiver -> its room and devices before this evaluation (restored at its end)."""
        ok = True
        rows = cand.rows
        topo_groups = self.topo_of[ci]
        placed: dict[str, Counter[str]] = {}
        if topo_groups:
            for g in topo_groups:
                placed[g] = Counter(positions[g])
                placed[g][cand.node] -= cand.groups[g]  # every pod of g on the candidate moves
        chosen: list[int] = []
        left: list[int] = []
        taken: list[tuple[int, ...] | None] = []
        row_dem, row_need, row_check, row_sig, row_list = (self.row_dem, self.row_need, self.row_check, self.row_sig,
                                                           self.row_list)
        row_dev, row_milli = self.row_dev, self.row_milli
        memo = self.memo if self.share and not topo_groups and not devices else None
        classes = self.cand_classes[ci]
        reach = _NO_ENTRY
        start = 0
        if memo is not None:
            own_entry = (tier[own], free[own][iR], own)
            for j in range(len(rows), 0, -1):
                hit = memo.get(classes[:j])
                if hit is not None and hit[2] < own_entry:
                    chosen, left, reach = hit[0][:j], hit[1][:j], hit[2]
                    start = j
                    if j == len(rows):
                        break  # placed whole: the state stays as it is
                    for k, u in zip(rows[:j], chosen, strict=True):
                        dem, room = row_dem[k], free[u]
                        for i in row_need[k]:
                            room[i] -= dem[i]
                        touched.setdefault(u, []).append(k)
                    break
        tried = start
        orders = self.orders
        for k in rows[start:]:
            tried += 1
            dem = row_dem[k]
            need = row_need[k]
            static = self.static[row_sig[k]]
            gk = self.row_group[k]
            region = self._hard_mask(gk, placed[gk]).tolist() if gk in hard else None
            dev_row = row_dev[k]

            best: tuple[int, int, int] | None = None
            fit: tuple[int, ...] | None = None  # a device row: the devices of ``best`` that take it
            check = row_check[k]  # the list vouches for the static predicates and R
            if dev_row:
                order = self._dev_order_for(row_sig[k], row_milli[k])
            else:
                kept = orders.get(row_list[k])
                order = kept if kept is not None else self._order_for(*row_list[k])
            for entry in order:
                u = entry[2]
                if u == own:
                    memo = None  # from here on the placement is this candidate's own
                    continue
                if u in touched or (region is not None and not region[u]):
                    continue
                room = free[u]
                for i, x in check:
                    if room[i] < x:
                        break
                else:
                    if not dev_row:
                        best = entry
                        break
                    fit = self._device_fit(k, u)
                    if fit is not None:
                        best = entry
                        break
            if best is None:
                memo = None  # the scan examined every receiver
            elif best > reach:
                reach = best
            for u in touched:  # ahead of the list's pick? then does it fit?
                room = free[u]
                entry = (tier[u], room[iR], u)
                if best is not None and entry > best:
                    continue
                if static[u] and (region is None or region[u]):
                    for i in need:
                        if room[i] < dem[i]:
                            break
                    else:
                        if not dev_row:
                            best = entry
                        elif (here := self._device_fit(k, u)) is not None:
                            best, fit = entry, here
            if best is None:
                ok = False
                break
            u = best[2]
            chosen.append(u)
            left.append(free[u][iR] - dem[iR])
            if devices:
                if u not in saved:
                    df, dm, ds = self.dev_free[u], self.dev_mem[u], self.dev_slots[u]
                    saved[u] = (list(free[u]), None if df is None else list(df), None if dm is None else list(dm),
                                None if ds is None else list(ds),
                                [Counter(c) for c in self.dev_groups[u]] if self.spread_groups else [])
                taken.append(self._take(k, u, fit))
            else:
                room = free[u]
                for j in need:
                    room[j] -= dem[j]
            touched.setdefault(u, []).append(k)
            if gk in placed:
                placed[gk][rx.names[u]] += 1
            if memo is not None:
                memo.setdefault(classes[:tried], (chosen, left, reach))
        if devices:
            for u, (room, df, dm, ds, dg) in saved.items():
                free[u][:] = room
                if self.spread_groups:
                    self.dev_groups[u][:] = dg
                cur_free, cur_mem, cur_slots = self.dev_free[u], self.dev_mem[u], self.dev_slots[u]
                if df is not None and cur_free is not None:
                    cur_free[:] = df
                if dm is not None and cur_mem is not None:
                    cur_mem[:] = dm
                if ds is not None and cur_slots is not None:
                    cur_slots[:] = ds
        else:
            for u, ks in touched.items():
                room = free[u]
                for k in ks:
                    dem = row_dem[k]
                    for j in row_need[k]:
                        room[j] += dem[j]
        a, b, m = rows.start, rows.stop, len(rows)
        if ok:
            self.evaluated[a:b] = [True] * m
            self.ch_u[a:b] = chosen
            self.ch_tier[a:b] = [tier[u] for u in chosen]
            self.ch_left[a:b] = left
        else:
            rest = m - len(chosen)
            self.evaluated[a:b] = [True] * tried + [False] * (m - tried)
            self.ch_u[a:b] = chosen + [-1] * rest
            self.ch_tier[a:b] = [tier[u] for u in chosen] + [NO_POD_LIMIT] * rest
            self.ch_left[a:b] = left + [NO_POD_LIMIT] * rest
        if devices:
            self.ch_dev[a:b] = taken + [None] * (m - len(taken))
        self.placeable[ci] = ok
        self.dirty[ci] = False
        self.stale[ci] = False
        if topo_groups:  # without any, the widening stays 0
            widen = 0
            if ok:
                for g in topo_groups:
                    if g in self.p.soft_topology:
                        widen += (self.p.widening(g, +placed[g]) - self.p.widening(g, +positions[g]))
            self.delta[ci, 5] = widen

    def _order_for(self, sig: int, lo: int | None) -> list[tuple[int, int, int]]:
        """``order`` restricted to the receivers a pod of the constraint signature ``sig`` may use by
        its static predicates and, when ``lo`` is given, with at least ``lo`` R left (room only shrinks:
        a receiver that drops below stays out). Built when first asked for, kept by ``_commit``."""
        out = self.orders.get((sig, lo))
        if out is None:
            static = self.static[sig]
            out = self.orders[sig, lo] = [e for e in self.order if static[e[2]] and (lo is None or e[1] >= lo)]
        return out

    def _best(self, mask: np.ndarray) -> int:
        """The first receiver in the seed's order among ``mask``: lowest tier, then least R left
        (the same order as least free R), then name (index order)."""
        rx = self.rx
        if rx.key_exact:
            return int(np.argmin(np.where(mask, rx.key, _INF)))
        tier = np.where(mask, rx.tier, _INF)
        m2 = mask & (tier == tier.min())
        fr = np.where(m2, rx.free[rx.iR], _INF)
        return int(np.argmax(m2 & (fr == fr.min())))

    def _hard_mask(self, group: str, placed: Counter[str]) -> np.ndarray:
        """Receivers that keep a hard-topology PodGroup inside one allowed HyperNode."""
        topo = self.p.snapshot.topology
        nodes = {n for n, c in placed.items() if c > 0}
        limit = self.p.hard_topology[group]
        regions = topo.enclosing(nodes, limit) if nodes else topo.regions(limit)
        mask = np.zeros(len(self.rx.names), dtype=bool)
        for h in regions:
            mask |= self.region_mask[h]
        return mask

    def placement(self, ci: int) -> list[PodMove] | None:
        """The candidate's moves as its cached placement has them (None when it is not placeable);
        for tests that hold the greedy's verdicts against ``checks``."""
        if self.dirty[ci]:
            self._evaluate(ci)
        if not self.placeable[ci]:
            return None
        cand = self.ct.cands[ci]
        return [PodMove(pod=pod.key, from_node=cand.node, to_node=self.rx.names[self.ch_u[k]],
                        to_devices=self._device_ids(self.ch_u[k], self.ch_dev[k]) if self.row_dev[k] else None)
                for k, pod in zip(cand.rows, cand.pods, strict=True)]

    def _mark_dirty(self, changed: list[int], removed: int) -> None:
        """Candidates whose cached placement may differ after receivers ``changed`` lost capacity
        (and moved to tier 0) and receiver ``removed`` left the receiver set."""
        rx, ct = self.rx, self.ct
        C = len(ct.cands)
        ch_u = np.array(self.ch_u, dtype=np.int64)
        ch_tier = np.array(self.ch_tier, dtype=np.int64)
        ch_left = np.array(self.ch_left, dtype=np.int64)
        ev = np.array(self.evaluated, dtype=bool) & self.alive[ct.row_cand]
        hit = ev & np.isin(ch_u, [*changed, removed])
        if self.lazy and hit.any():
            # A placement that still fits where it was (the receiver kept enough room for what this
            # candidate put there) stays valid: keep the candidate feasible, recheck when chosen.
            gone = ev & (ch_u == removed)
            short = np.zeros(C, dtype=bool)
            short[ct.row_cand[gone]] = True
            for u in changed:
                rows = np.flatnonzero(ev & (ch_u == u))
                if not len(rows):
                    continue
                put = np.zeros((len(rx.resources), C), dtype=np.int64)
                np.add.at(put.T, ct.row_cand[rows], ct.row_dem[:, rows].T)
                cands_u = np.unique(ct.row_cand[rows])
                over = (put[:, cands_u] > rx.free[:, u][:, None]).any(axis=0)
                short[cands_u[over]] = True
            hit_c = np.zeros(C, dtype=bool)
            hit_c[ct.row_cand[hit]] = True
            soft = hit_c & ~short & self.placeable & ~ct.has_topo & ~self.dirty
            self.stale[soft] = True
            hit &= ~soft[ct.row_cand]
        # Rows that ran out of receivers are left with an infinite key: any fitting receiver hits.
        ahead_hit = np.zeros_like(hit)
        kind_need = self.kind_dem > 0
        for u in changed:
            if not rx.active[u]:
                continue
            # Static predicates and room, once per row kind.
            room = rx.free[:, u][:, None]
            fits_kind = ct.static[self.kind_sig, u] & ((room >= self.kind_dem) | ~kind_need).all(axis=0)
            fits = fits_kind[self.row_kind] & (ct.row_cand != ct.of_receiver.get(u, -1))
            left = (rx.free[rx.iR, u] - self.kind_dem[rx.iR])[self.row_kind]
            tu = rx.tier[u]
            ahead = (tu < ch_tier) | ((tu == ch_tier) & ((left < ch_left) | ((left == ch_left) & (u < ch_u))))
            rows_u = ev & fits & ahead
            if self.dev:  # a share row: only when a device of u takes it (a kind's room says nothing of devices)
                ks = np.flatnonzero(rows_u & self.row_dev_np)
                if len(ks):  # asked once per share id: alike shares fit alike
                    _ids, first, inverse = np.unique(self.row_share[ks], return_index=True, return_inverse=True)
                    fit = np.array([self._device_fit(int(ks[i]), u) is not None for i in first.tolist()], dtype=bool)
                    rows_u[ks[~fit[inverse]]] = False
            ahead_hit |= rows_u
        if hit.any():
            self.dirty[np.unique(ct.row_cand[hit])] = True
        if ahead_hit.any():
            cands = np.unique(ct.row_cand[ahead_hit])
            if self.lazy:
                # Nothing it used lost capacity: its old placement still stands, so it stays feasible
                # for ranking; only its first-fit placement may differ, rechecked when chosen.
                keep = self.placeable[cands] & ~ct.has_topo[cands] & ~self.dirty[cands]
                self.dirty[cands[~keep]] = True
                self.stale[cands[keep]] = True
            else:
                self.dirty[cands] = True

    # ---- disruption of plan-so-far-plus-candidate ---------------------------------------------

    def candidate_costs(self) -> dict[str, float]:
        """Each candidate's future vacate cost: the weighted disruption of vacating it alone, which is
        its delta on the empty plan (``problem.disruption`` of its pods; the tests hold them equal)."""
        w = self.p.weights
        return {cand.node: Disruption(*self.delta[ci, :5].tolist()).weighted(w)
                for ci, cand in enumerate(self.ct.cands)}

    def _restarted(self, units: frozenset[str], singles: int, single_cards: int) -> tuple[int, int]:
        """Running pods and R cards that restart in a PodGroup (``rules.restart_total``)."""
        return restart_total((self.ct.units[u] for u in units), singles, single_cards)

    def _delta(self, ci: int) -> None:
        """What vacating the candidate adds to the five dimensions of the plan so far."""
        cand = self.ct.cands[ci]
        led = self.led
        affected = breached = aff_cards = moved_cards = moved_pods = 0
        for gk, n in cand.groups.items():
            gang = self.p.gangs.get(gk)
            if led.moved_in_group[gk] == 0:
                affected += 1
            units = led.units_in_group[gk]
            singles, single_cards = led.singles_in_group[gk], led.single_cards_in_group[gk]
            c_units, c_singles, c_cards = cand.restart[gk]
            was, hit_before = gang_impact(gang, *self._restarted(units, singles, single_cards))
            now, hit_after = gang_impact(gang, *self._restarted(units | c_units, singles + c_singles,
                                                                single_cards + c_cards))
            breached += int(now and not was)  # restarts only grow: never was and not now
            aff_cards += hit_after - hit_before
            moved_cards += cand.group_cards[gk]
            moved_pods += n
        self.delta[ci, :5] = (affected, breached, aff_cards, moved_cards, moved_pods)
        self.delta_dirty[ci] = False

    # ---- budgets and PDBs ---------------------------------------------------------------------

    def _budget_ok(self, cands: np.ndarray, budget_res: np.ndarray) -> np.ndarray:
        """Which of ``cands`` (fresh deltas) fit maxPerRun and the PDBs, vectorised."""
        ct, led = self.ct, self.led
        ok = np.ones(len(cands), dtype=bool)
        limit = self.p.budgets.pod_groups
        if limit is not None:
            ok &= led.totals[0] + self.delta[cands, 0] <= limit
        if len(budget_res):
            ok &= (led.used_res + ct.budget_use[cands] <= budget_res).all(axis=1)
        for j in np.flatnonzero(ok & ct.has_pdb[cands]).tolist():
            ok[j] = all(n <= led.pdb_left[k] for k, n in ct.pdb_use[int(cands[j])].items())
        return ok

    def budget_reason(self, ci: int) -> str | None:
        """Which budget vacating the candidate next would break, or None."""
        ct, led = self.ct, self.led
        if self.delta_dirty[ci]:
            self._delta(ci)
        d = led.totals + self.delta[ci]
        limit = self.p.budgets.pod_groups
        if limit is not None and d[0] > limit:
            return "budget-podGroups"
        if len(ct.budget_res) and (led.used_res + ct.budget_use[ci] > np.array(
                list(ct.budget_res.values()), dtype=np.int64)).any():
            return "budget-resources"
        for k, n in ct.pdb_use[ci].items():
            if n > led.pdb_left[k]:
                return "pdb-disruptions-allowed"
        return None

    # ---- the move loop ------------------------------------------------------------------------

    def run(self, clock: Clock | None = None, deadline: float = float("inf")) -> tuple[list[PodMove], list[str]]:
        """Rounds until no feasible candidate remains, or until ``deadline`` (a ``clock`` time; in
        deterministic mode the clock counts evaluations): every round commits a valid step, so the
        plan so far is always a valid plan."""
        clock = clock or Clock()
        charged = self.evaluations
        budget_res = np.array(list(self.ct.budget_res.values()), dtype=np.int64)
        while True:
            clock.charge_evaluations(self.evaluations - charged)
            charged = self.evaluations
            if clock.over(deadline):
                self.truncated = True
                break
            self.rounds += 1
            ranked = self._rank(budget_res)
            if not len(ranked):
                break
            if not self.lazy:
                self._commit(int(ranked[0]))
            elif not self._commit_batch(ranked, budget_res, clock, deadline):
                break
        if self.truncated:
            self.final_reasons = {ci: "not-evaluated-time-limit" for ci in np.flatnonzero(self.alive).tolist()}
        else:
            self._record_reasons()
        return self.led.moves, self.led.freed

    def _rank(self, budget_res: np.ndarray) -> np.ndarray:
        """The round's feasible candidates (within budgets and PDBs, placeable), best first: the
        weighted min-max-normalised dimensions of plan-so-far-plus-candidate, then larger freed
        capacity, then name."""
        alive = np.flatnonzero(self.alive)
        for c in alive[self.delta_dirty[alive]].tolist():
            self._delta(c)
        ok = self._budget_ok(alive, budget_res)
        for c in alive[ok & self.dirty[alive]].tolist():
            self._evaluate(c)
        f = alive[ok & self.placeable[alive]]
        if not len(f):
            return f
        weights = np.array(self.p.weights.as_tuple(), dtype=np.float64)
        d = (self.led.totals + self.delta[f]).astype(np.float64)
        lo, hi = d.min(axis=0), d.max(axis=0)
        span = np.where(hi > lo, hi - lo, 1.0)
        score = np.round(((d - lo) / span) @ weights, 9)
        return f[np.lexsort((f, -self.ct.gain[f], score))]

    def _commit_batch(self, ranked: np.ndarray, budget_res: np.ndarray, clock: Clock,
                      deadline: float) -> bool:
        """Fast mode: commit down the round's ranking, up to a twentieth of the feasible candidates,
        re-simulating each one on the state left by the commits before it. False when none commits.
        On the wall clock a batch also stops at ``deadline`` (a round at 10,000 nodes takes seconds);
        deterministic limits are checked between rounds only, where the evaluations are charged."""
        batch = max(1, len(ranked) // 20)
        done = 0
        for c in ranked.tolist():
            if done == batch:
                break
            if done and not clock.deterministic and clock.over(deadline):
                self.truncated = True
                break
            if not self.alive[c]:
                continue
            if self.delta_dirty[c]:
                self._delta(c)
            if not self._budget_ok(np.array([c]), budget_res)[0]:
                continue
            if self.stale[c] or self.dirty[c]:
                self._evaluate(c)
            if self.placeable[c]:
                self._commit(c)
                done += 1
        return done > 0

    def _commit(self, ci: int) -> None:
        rx, ct, led = self.rx, self.ct, self.led
        cand = ct.cands[ci]
        if self.dirty[ci]:
            self._evaluate(ci)
        changed: list[int] = []
        for k in cand.rows:
            u = self.ch_u[k]
            if u not in changed:
                changed.append(u)
        for u in [*changed, cand.index]:  # out of the orders while their keys change (the candidate for good)
            entry = (self.tier[u], self.free[u][rx.iR], u)
            i = bisect_left(self.order, entry)
            assert self.order[i] == entry, "the receiver order lost a receiver"
            del self.order[i]
            for order in [*self.orders.values(), *self.dev_orders.values()]:
                i = bisect_left(order, entry)
                if i < len(order) and order[i] == entry:
                    del order[i]
        for k, pod in zip(cand.rows, cand.pods, strict=True):
            u = self.ch_u[k]
            if self.dev:  # device level: the row's devices and the receiver's whole cards (``_take``)
                before = self.free[u][rx.iR]
                taken = self._take(k, u, self.ch_dev[k])
                rx.free[:, u] = self.free[u]
                rx.key[u] -= before - self.free[u][rx.iR]
                led.moves.append(PodMove(pod=pod.key, from_node=cand.node, to_node=rx.names[u],
                                         to_devices=self._device_ids(u, taken)))
                continue
            rx.free[:, u] -= ct.row_dem[:, k]
            rx.key[u] -= ct.row_dem[rx.iR, k]
            room = self.free[u]
            for j, x in enumerate(self.row_dem[k]):
                room[j] -= x
            led.moves.append(PodMove(pod=pod.key, from_node=cand.node, to_node=rx.names[u]))
        led.freed.append(cand.node)
        rx.active[cand.index] = False
        self.alive[ci] = False
        self.memo = {}
        for u in changed:
            rx.tier[u] = 0  # a receiver will stay occupied
            self.tier[u] = 0
            entry = (0, self.free[u][rx.iR], u)
            insort(self.order, entry)
            for (sig, lo), order in self.orders.items():
                if self.static[sig][u] and (lo is None or entry[1] >= lo):
                    insort(order, entry)
            if self.dev:
                devices = self.dev_free[u]
                self.maxfree[u] = max(devices, default=-1) if devices is not None else -1
                for (sig, milli), order in self.dev_orders.items():
                    if self.static[sig][u] and self.maxfree[u] >= milli:
                        insort(order, entry)
            if rx.key_exact:
                rx.key[u] = rx.free[rx.iR, u]
            led.received.add(u)
            other = ct.of_receiver.get(u)
            if other is not None:
                self.alive[other] = False  # a node that receives is never vacated later
        led.totals = led.totals + self.delta[ci]
        for k, pod in zip(cand.rows, cand.pods, strict=True):
            gk = pod.group_key or ""
            if gk in led.positions:
                led.positions[gk][cand.node] -= 1
                led.positions[gk][rx.names[self.ch_u[k]]] += 1
        for gk in cand.groups:
            for other in ct.of_topo_group.get(gk, ()):
                self.dirty[other] = True  # its topology region or widening may have changed
        for gk, n in cand.groups.items():
            led.moved_in_group[gk] += n
            c_units, c_singles, c_cards = cand.restart[gk]
            if c_units:
                led.units_in_group[gk] = led.units_in_group[gk] | c_units
            led.singles_in_group[gk] += c_singles
            led.single_cards_in_group[gk] += c_cards
            for other in ct.of_group[gk]:
                self.delta_dirty[other] = True
        led.used_res += ct.budget_use[ci]
        for pdb_key, n in ct.pdb_use[ci].items():
            led.pdb_left[pdb_key] -= n
        self._mark_dirty(changed, cand.index)

    def _record_reasons(self) -> None:
        for ci, cand in enumerate(self.ct.cands):
            if cand.node in self.led.freed:
                continue
            if cand.index in self.led.received or not self.alive[ci]:
                self.final_reasons[ci] = "kept-as-receiver"
            else:
                reason = self.budget_reason(ci)
                if reason is None:
                    if self.dirty[ci]:
                        self._evaluate(ci)
                    reason = "no-feasible-receiver" if not self.placeable[ci] else "not-chosen"
                self.final_reasons[ci] = reason

    def rejections(self) -> dict[str, int]:
        counts: Counter[str] = Counter(self.final_reasons.values())
        counts.update(self.p.node_block.values())
        return dict(sorted(counts.items()))
