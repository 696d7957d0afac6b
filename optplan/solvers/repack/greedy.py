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
cached placement replays identically; the result equals a full re-evaluation every round.
"""

from __future__ import annotations

import logging
import time
from collections import Counter, defaultdict
from dataclasses import dataclass

import numpy as np

from optplan.models.repack import PodMove, RepackPlan, SolverRecord
from optplan.models.snapshot import Pod
from optplan.solvers.core.clock import Clock
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.core.oracle import Capacity, constraint_signature, pod_demand, static_reason
from optplan.solvers.repack.base import PlanResult
from optplan.solvers.repack.rules import RepackProblem

log = logging.getLogger(__name__)

_NO_LIMIT = np.int64(2**62)
_INF = np.int64(2**62)


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


class GreedyPlanner:
    """The seed's greedy, exactly: every round re-evaluates every candidate whose placement may
    have changed."""

    name = "greedy"
    lazy = False

    def plan(self, problem: RepackProblem, options: PlanOptions) -> PlanResult:
        t0 = time.perf_counter()
        clock = options.timer()
        state = _Greedy(problem, lazy=self.lazy)
        moves, freed = state.run(clock, clock.now() + options.time_limit)
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
    def __init__(self, problem: RepackProblem, lazy: bool = False) -> None:
        self.p = problem
        self.lazy = lazy
        snap = problem.snapshot
        R = problem.resource
        self.R = R
        # Receivers: occupied providers (an R-idle provider never receives), indexed in name order.
        self.names = list(problem.occupied)
        self.index = {n: i for i, n in enumerate(self.names)}
        U = len(self.names)
        cand_names = problem.candidates
        # Resources that matter for fit: everything a movable pod requests, plus pods.
        res: set[str] = {"pods", R}
        for c in cand_names:
            for pod in problem.r_pods[c]:
                res.update(pod.requests)
        self.res = sorted(res)
        self.ri = {r: i for i, r in enumerate(self.res)}
        cap = Capacity(snap)
        free = np.zeros((len(self.res), U), dtype=np.int64)
        for u, name in enumerate(self.names):
            node = snap.nodes[name]
            for r, i in self.ri.items():
                if r == "pods" and "pods" not in node.allocatable:
                    free[i, u] = _NO_LIMIT
                else:
                    free[i, u] = cap.free[name].get(r, 0)
        self.free = free
        self.iR = self.ri[R]
        # Tiers: 0 = will stay occupied; 1 + rank of (−future vacate cost) for candidates.
        w = problem.weights
        fcost = {c: problem.disruption(problem.r_pods[c]).weighted(w) for c in cand_names}
        distinct = sorted({-v for v in fcost.values()})
        rank = {v: i + 1 for i, v in enumerate(distinct)}
        self.tier = np.zeros(U, dtype=np.int64)
        for c, v in fcost.items():
            self.tier[self.index[c]] = rank[-v]
        self.active = np.ones(U, dtype=bool)  # still a receiver (not vacated)
        # Static predicates per constraint signature, over receivers.
        self.sig_of: dict[str, int] = {}
        sig_ids: dict[tuple[object, ...], int] = {}
        static_rows: list[np.ndarray] = []
        for c in cand_names:
            for pod in problem.r_pods[c]:
                sig = constraint_signature(pod)
                if sig not in sig_ids:
                    sig_ids[sig] = len(static_rows)
                    static_rows.append(np.array(
                        [static_reason(pod, snap.nodes[n]) is None for n in self.names], dtype=bool))
                self.sig_of[pod.key] = sig_ids[sig]
        self.static = np.array(static_rows, dtype=bool).reshape(len(static_rows), U)
        # Candidates and their per-pod rows; restart units wider than one pod: key -> (Running, R cards).
        self.cands: list[_Candidate] = []
        self.unit_size: dict[str, tuple[int, int]] = {}
        self.whole_units: set[str] = set()
        row = 0
        for c in cand_names:
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
                    self.unit_size[unit.key] = (unit.running, unit.cards)
                    if unit.whole_group:
                        self.whole_units.add(unit.key)
            restart = {gk: (frozenset(units[gk]), singles[gk], single_cards[gk]) for gk in groups}
            self.cands.append(_Candidate(self.index[c], c, pods, range(row, row + len(pods)),
                                         snap.nodes[c].allocatable[R], groups, cards, restart))
            row += len(pods)
        C = len(self.cands)
        nrows = row
        self.row_cand = np.zeros(nrows, dtype=np.int64)
        self.row_sig = np.zeros(nrows, dtype=np.int64)
        self.row_dem = np.zeros((len(self.res), nrows), dtype=np.int64)
        for ci, cand in enumerate(self.cands):
            for k, pod in zip(cand.rows, cand.pods, strict=True):
                self.row_cand[k] = ci
                self.row_sig[k] = self.sig_of[pod.key]
                for r, v in pod_demand(pod).items():
                    self.row_dem[self.ri[r], k] = v
        self.row_need = [np.flatnonzero(self.row_dem[:, k] > 0) for k in range(nrows)]
        # One sortable key per receiver, tier * 2**40 + free R, while both fit in an int64.
        self.rkey_exact = bool(U == 0 or (int(np.abs(free[self.iR]).max()) < 2**39
                                          and int(self.tier.max()) < 2**22))
        self.rkey = self.tier * np.int64(2**40) + free[self.iR] if self.rkey_exact else self.tier.copy()
        # Cached evaluation per row: chosen receiver and its key (tier, R left, index).
        self.ch_u = np.full(nrows, -1, dtype=np.int64)
        self.ch_tier = np.full(nrows, _INF, dtype=np.int64)
        self.ch_left = np.full(nrows, _INF, dtype=np.int64)
        self.evaluated = np.zeros(nrows, dtype=bool)
        self.placeable = np.zeros(C, dtype=bool)
        self.alive = np.ones(C, dtype=bool)  # still a vacate candidate
        self.dirty = np.ones(C, dtype=bool)
        self.stale = np.zeros(C, dtype=bool)  # lazy mode: a better receiver appeared, feasibility kept
        self.cand_of_u = {cand.index: ci for ci, cand in enumerate(self.cands)}
        # Plan-so-far accounting.
        self.moved_in_group: Counter[str] = Counter()
        self.units_in_group: dict[str, frozenset[str]] = defaultdict(frozenset)  # wide units restarted
        self.singles_in_group: Counter[str] = Counter()  # Running pods restarted in default units
        self.single_cards_in_group: Counter[str] = Counter()
        self.totals = np.zeros(6, dtype=np.int64)  # the six dimensions of the plan so far
        self.delta = np.zeros((C, 6), dtype=np.int64)  # what each candidate would add to them
        self.delta_dirty = np.ones(C, dtype=bool)
        self.cands_of_group: dict[str, list[int]] = defaultdict(list)
        for ci, cand in enumerate(self.cands):
            for gk in cand.groups:
                self.cands_of_group[gk].append(ci)
        # Budgets: podGroups, and every resource named in maxPerRun.resources.
        mpr = problem.run.spec.max_per_run
        self.budget_groups = mpr.pod_groups
        self.budget_res = dict(sorted(mpr.resources.items()))
        self.cand_res = np.array([[sum(p.request(r) for p in cand.pods) for r in self.budget_res]
                                  for cand in self.cands], dtype=np.int64).reshape(C, len(self.budget_res))
        self.used_res = np.zeros(len(self.budget_res), dtype=np.int64)
        # PDBs: pods each candidate would take from each budget.
        self.pdb_left = {k: pdb.disruptions_allowed for k, pdb in problem.snapshot.pdbs.items()}
        self.cand_pdb: list[Counter[str]] = []
        for cand in self.cands:
            use: Counter[str] = Counter()
            for pod in cand.pods:
                for pdb_key in problem.pdb_cover.get(pod.key, ()):
                    use[pdb_key] += 1
            self.cand_pdb.append(use)
        self.gain = np.array([c.gain for c in self.cands], dtype=np.int64)
        self.has_pdb = np.array([bool(u) for u in self.cand_pdb], dtype=bool)
        # Network topology: current nodes of each topology PodGroup's pods, and HyperNode masks.
        self.topo = problem.snapshot.topology
        self.positions: dict[str, Counter[str]] = {
            g: Counter(problem.group_nodes(g)) for g in problem.topology_groups}
        self.region_mask = {h: np.array([n in self.topo.region_nodes(h) for n in self.names], dtype=bool)
                            for h in self.topo.regions(None)} if problem.topology_groups else {}
        self.has_topo = np.array([any(g in problem.topology_groups for g in c.groups) for c in self.cands],
                                 dtype=bool)
        self.cands_of_topo_group: dict[str, list[int]] = defaultdict(list)
        for ci, cand in enumerate(self.cands):
            for gk in cand.groups:
                if gk in problem.topology_groups:
                    self.cands_of_topo_group[gk].append(ci)
        self.moves: list[PodMove] = []
        self.freed: list[str] = []
        self.received: set[int] = set()
        self.rounds = 0
        self.evaluations = 0
        self.truncated = False
        self.final_reasons: dict[int, str] = {}

    # ---- placement simulation ----------------------------------------------------------------

    def _evaluate(self, ci: int) -> None:
        """Place the candidate's pods one by one on the current state; cache rows and keys."""
        self.evaluations += 1
        cand = self.cands[ci]
        free = self.free
        touched: list[tuple[int, np.ndarray]] = []
        ok = True
        rows = cand.rows
        self.evaluated[rows.start:rows.stop] = False
        self.ch_u[rows.start:rows.stop] = -1
        self.ch_tier[rows.start:rows.stop] = _INF
        self.ch_left[rows.start:rows.stop] = _INF
        topo_groups = [g for g in cand.groups if g in self.positions]
        placed: dict[str, Counter[str]] = {}
        if topo_groups:
            for g in topo_groups:
                placed[g] = Counter(self.positions[g])
                placed[g][cand.node] -= cand.groups[g]  # every pod of g on the candidate moves
        iR = self.iR
        for k, pod in zip(rows, cand.pods, strict=True):
            self.evaluated[k] = True
            dem = self.row_dem[:, k]
            mask = self.static[self.row_sig[k]] & self.active
            mask[cand.index] = False
            for i in self.row_need[k]:
                mask &= free[i] >= dem[i]
            gk = pod.group_key or ""
            if gk in self.p.hard_topology:
                mask &= self._hard_mask(gk, placed[gk])
            if not mask.any():
                ok = False
                break
            u = self._best(mask)
            self.ch_u[k] = u
            self.ch_tier[k] = self.tier[u]
            self.ch_left[k] = free[iR, u] - dem[iR]
            free[:, u] -= dem
            self.rkey[u] -= dem[iR]
            touched.append((u, dem))
            if gk in placed:
                placed[gk][self.names[u]] += 1
        for u, dem in touched:
            free[:, u] += dem
            self.rkey[u] += dem[iR]
        self.placeable[ci] = ok
        self.dirty[ci] = False
        self.stale[ci] = False
        widen = 0
        if ok:
            for g in topo_groups:
                if g in self.p.soft_topology:
                    widen += (self.p.widening(g, +placed[g]) - self.p.widening(g, +self.positions[g]))
        self.delta[ci, 5] = widen

    def _best(self, mask: np.ndarray) -> int:
        """The first receiver in the seed's order among ``mask``: lowest tier, then least R left
        (the same order as least free R), then name (index order)."""
        if self.rkey_exact:
            return int(np.argmin(np.where(mask, self.rkey, _INF)))
        tier = np.where(mask, self.tier, _INF)
        m2 = mask & (tier == tier.min())
        fr = np.where(m2, self.free[self.iR], _INF)
        return int(np.argmax(m2 & (fr == fr.min())))

    def _hard_mask(self, group: str, placed: Counter[str]) -> np.ndarray:
        """Receivers that keep a hard-topology PodGroup inside one allowed HyperNode."""
        nodes = {n for n, c in placed.items() if c > 0}
        limit = self.p.hard_topology[group]
        regions = self.topo.enclosing(nodes, limit) if nodes else self.topo.regions(limit)
        mask = np.zeros(len(self.names), dtype=bool)
        for h in regions:
            mask |= self.region_mask[h]
        return mask

    def _mark_dirty(self, changed: list[int], removed: int) -> None:
        """Candidates whose cached placement may differ after receivers ``changed`` lost capacity
        (and moved to tier 0) and receiver ``removed`` left the receiver set."""
        ev = self.evaluated & self.alive[self.row_cand]
        hit = ev & np.isin(self.ch_u, [*changed, removed])
        if self.lazy and hit.any():
            # A placement that still fits where it was (the receiver kept enough room for what this
            # candidate put there) stays valid: keep the candidate feasible, recheck when chosen.
            gone = ev & (self.ch_u == removed)
            short = np.zeros(len(self.cands), dtype=bool)
            short[self.row_cand[gone]] = True
            for u in changed:
                rows = np.flatnonzero(ev & (self.ch_u == u))
                if not len(rows):
                    continue
                put = np.zeros((len(self.res), len(self.cands)), dtype=np.int64)
                np.add.at(put.T, self.row_cand[rows], self.row_dem[:, rows].T)
                cands_u = np.unique(self.row_cand[rows])
                over = (put[:, cands_u] > self.free[:, u][:, None]).any(axis=0)
                short[cands_u[over]] = True
            hit_c = np.zeros(len(self.cands), dtype=bool)
            hit_c[self.row_cand[hit]] = True
            soft = hit_c & ~short & self.placeable & ~self.has_topo & ~self.dirty
            self.stale[soft] = True
            hit &= ~soft[self.row_cand]
        # Rows that ran out of receivers are left with an infinite key: any fitting receiver hits.
        ahead_hit = np.zeros_like(hit)
        for u in changed:
            if not self.active[u]:
                continue
            fits = self.static[self.row_sig, u] & (self.row_cand != self.cand_of_u.get(u, -1))
            need = self.row_dem > 0
            fits &= ((self.free[:, u][:, None] >= self.row_dem) | ~need).all(axis=0)
            left = self.free[self.iR, u] - self.row_dem[self.iR]
            tu = self.tier[u]
            ahead = (tu < self.ch_tier) | (
                (tu == self.ch_tier) & ((left < self.ch_left) | ((left == self.ch_left) & (u < self.ch_u))))
            ahead_hit |= ev & fits & ahead
        if hit.any():
            self.dirty[np.unique(self.row_cand[hit])] = True
        if ahead_hit.any():
            cands = np.unique(self.row_cand[ahead_hit])
            if self.lazy:
                # Nothing it used lost capacity: its old placement still stands, so it stays feasible
                # for ranking; only its first-fit placement may differ, rechecked when chosen.
                keep = self.placeable[cands] & ~self.has_topo[cands] & ~self.dirty[cands]
                self.dirty[cands[~keep]] = True
                self.stale[cands[keep]] = True
            else:
                self.dirty[cands] = True

    # ---- disruption of plan-so-far-plus-candidate ---------------------------------------------

    def _restarted(self, units: frozenset[str], singles: int, single_cards: int) -> tuple[int, int]:
        """Running pods and R cards that restart in a PodGroup (see ``rules``): a whole-group unit
        covers everything; other units are disjoint."""
        if not units:
            return singles, single_cards
        for u in units:
            if u in self.whole_units:
                return self.unit_size[u]
        return (singles + sum(self.unit_size[u][0] for u in units),
                single_cards + sum(self.unit_size[u][1] for u in units))

    def _delta(self, ci: int) -> None:
        """What vacating the candidate adds to the five dimensions of the plan so far."""
        cand = self.cands[ci]
        affected = breached = aff_cards = moved_cards = moved_pods = 0
        for gk, n in cand.groups.items():
            gang = self.p.gangs.get(gk)
            if self.moved_in_group[gk] == 0:
                affected += 1
            units = self.units_in_group[gk]
            singles, single_cards = self.singles_in_group[gk], self.single_cards_in_group[gk]
            c_units, c_singles, c_cards = cand.restart[gk]
            run_b, cards_b = self._restarted(units, singles, single_cards)
            run_a, cards_a = self._restarted(units | c_units, singles + c_singles, single_cards + c_cards)
            if gang is None:
                aff_cards += cards_a - cards_b
            else:
                was, now = run_b > gang.safe, run_a > gang.safe  # restarts only grow: never was and not now
                breached += int(now and not was)
                aff_cards += (gang.footprint if now else cards_a) - (gang.footprint if was else cards_b)
            moved_cards += cand.group_cards[gk]
            moved_pods += n
        self.delta[ci, :5] = (affected, breached, aff_cards, moved_cards, moved_pods)
        self.delta_dirty[ci] = False

    # ---- rounds ------------------------------------------------------------------------------

    def _budget_ok(self, cands: np.ndarray, budget_res: np.ndarray) -> np.ndarray:
        """Which of ``cands`` (fresh deltas) fit maxPerRun and the PDBs, vectorised."""
        ok = np.ones(len(cands), dtype=bool)
        if self.budget_groups is not None:
            ok &= self.totals[0] + self.delta[cands, 0] <= self.budget_groups
        if len(budget_res):
            ok &= (self.used_res + self.cand_res[cands] <= budget_res).all(axis=1)
        for j in np.flatnonzero(ok & self.has_pdb[cands]).tolist():
            ok[j] = all(n <= self.pdb_left[k] for k, n in self.cand_pdb[int(cands[j])].items())
        return ok

    def _budget_reason(self, ci: int) -> str | None:
        if self.delta_dirty[ci]:
            self._delta(ci)
        d = self.totals + self.delta[ci]
        if self.budget_groups is not None and d[0] > self.budget_groups:
            return "budget-podGroups"
        if len(self.budget_res) and (self.used_res + self.cand_res[ci] > np.array(
                list(self.budget_res.values()), dtype=np.int64)).any():
            return "budget-resources"
        for k, n in self.cand_pdb[ci].items():
            if n > self.pdb_left[k]:
                return "pdb-disruptions-allowed"
        return None

    def run(self, clock: Clock | None = None, deadline: float = float("inf")) -> tuple[list[PodMove], list[str]]:
        """Rounds until no feasible candidate remains, or until ``deadline`` (a ``clock`` time; in
        deterministic mode the clock counts evaluations): every round commits a valid step, so the
        plan so far is always a valid plan."""
        clock = clock or Clock()
        charged = self.evaluations
        weights = np.array(self.p.weights.as_tuple(), dtype=np.float64)
        budget_res = np.array(list(self.budget_res.values()), dtype=np.int64)
        while True:
            clock.charge_evaluations(self.evaluations - charged)
            charged = self.evaluations
            if clock.over(deadline):
                self.truncated = True
                break
            self.rounds += 1
            alive = np.flatnonzero(self.alive)
            for c in alive[self.delta_dirty[alive]].tolist():
                self._delta(c)
            ok = self._budget_ok(alive, budget_res)
            for c in alive[ok & self.dirty[alive]].tolist():
                self._evaluate(c)
            f = alive[ok & self.placeable[alive]]
            if not len(f):
                break
            d = (self.totals + self.delta[f]).astype(np.float64)
            lo, hi = d.min(axis=0), d.max(axis=0)
            span = np.where(hi > lo, hi - lo, 1.0)
            score = np.round(((d - lo) / span) @ weights, 9)
            ranked = f[np.lexsort((f, -self.gain[f], score))]
            if not self.lazy:
                self._commit(int(ranked[0]))
                continue
            # Fast mode: commit down the round's ranking, up to a twentieth of the feasible
            # candidates, re-simulating each one on the state left by the commits before it.
            batch = max(1, len(ranked) // 20)
            done = 0
            for c in ranked.tolist():
                if done == batch:
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
            if done == 0:
                break
        if self.truncated:
            self.final_reasons = {ci: "not-evaluated-time-limit" for ci in np.flatnonzero(self.alive).tolist()}
        else:
            self._record_reasons()
        return self.moves, self.freed

    def _commit(self, ci: int) -> None:
        cand = self.cands[ci]
        if self.dirty[ci]:
            self._evaluate(ci)
        changed: list[int] = []
        for k, pod in zip(cand.rows, cand.pods, strict=True):
            u = int(self.ch_u[k])
            self.free[:, u] -= self.row_dem[:, k]
            self.rkey[u] -= self.row_dem[self.iR, k]
            self.moves.append(PodMove(pod=pod.key, from_node=cand.node, to_node=self.names[u]))
            if u not in changed:
                changed.append(u)
        self.freed.append(cand.node)
        self.active[cand.index] = False
        self.alive[ci] = False
        for u in changed:
            self.tier[u] = 0  # a receiver will stay occupied
            if self.rkey_exact:
                self.rkey[u] = self.free[self.iR, u]
            self.received.add(u)
            other = self.cand_of_u.get(u)
            if other is not None:
                self.alive[other] = False  # a node that receives is never vacated later
        self.totals = self.totals + self.delta[ci]
        for k, pod in zip(cand.rows, cand.pods, strict=True):
            gk = pod.group_key or ""
            if gk in self.positions:
                self.positions[gk][cand.node] -= 1
                self.positions[gk][self.names[int(self.ch_u[k])]] += 1
        for gk in cand.groups:
            for other in self.cands_of_topo_group.get(gk, ()):
                self.dirty[other] = True  # its topology region or widening may have changed
        for gk, n in cand.groups.items():
            self.moved_in_group[gk] += n
            c_units, c_singles, c_cards = cand.restart[gk]
            if c_units:
                self.units_in_group[gk] = self.units_in_group[gk] | c_units
            self.singles_in_group[gk] += c_singles
            self.single_cards_in_group[gk] += c_cards
            for other in self.cands_of_group[gk]:
                self.delta_dirty[other] = True
        self.used_res += self.cand_res[ci]
        for pdb_key, n in self.cand_pdb[ci].items():
            self.pdb_left[pdb_key] -= n
        self._mark_dirty(changed, cand.index)

    def _record_reasons(self) -> None:
        for ci, cand in enumerate(self.cands):
            if cand.node in self.freed:
                continue
            if cand.index in self.received or not self.alive[ci]:
                self.final_reasons[ci] = "kept-as-receiver"
            else:
                reason = self._budget_reason(ci)
                if reason is None:
                    if self.dirty[ci]:
                        self._evaluate(ci)
                    reason = "no-feasible-receiver" if not self.placeable[ci] else "not-chosen"
                self.final_reasons[ci] = reason

    def rejections(self) -> dict[str, int]:
        counts: Counter[str] = Counter(self.final_reasons.values())
        counts.update(self.p.node_block.values())
        return dict(sorted(counts.items()))
