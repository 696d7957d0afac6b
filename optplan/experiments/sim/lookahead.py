"""optplan's look-ahead policies for the FGD paper's setup (``sim.shared``: the cluster, the arrivals, the
metric and the policies placing each pod on its arrival): a batch of arrivals placed together by one CP-SAT
solve. Each class keeps ``sim.shared``'s policy shape (``place`` a batch, ``release`` what it held back).

- ``frag-batch``: FGD with look-ahead over ``SharedConfig.batch`` arrivals (16 unless it says): they are placed
  together by one CP-SAT solve on the state before the batch (``FragBatchPolicy``), lexicographically in two solves: the
  most milli-GPUs placed (solved only when FGD's sequence on the candidates leaves a pod out), then the most
  FGD integer score summed over the batch's pods, the first names among equal scores. Candidates per
  arrival: FGD's ``batch_nodes`` best nodes (score, then name) with its device there, and for a share also
  the ``batch_holes`` least free devices with room anywhere (hole filling), each scored by FGD's growth on
  the state before the batch. Per node the batch's cpu and memory, per device its shares' milli, and per
  node its whole GPUs plus the entirely free devices its shares open fit. One worker, ``seed``, a
  deterministic time limit per solve (``batch_dtime``; ``BATCH_WALL_LIMIT`` seconds as a safety); FGD's
  sequence on the candidates is the hint and the fallback (kept unless the solve's objectives are at least
  its own). An arrival left out that still fits after the batch is placed by FGD's rule, so nobody is
  refused while there is room; arrivals never leave and nothing is moved.
- ``frag-hole-batch``: ``frag-batch`` with ``frag-hole``'s rules where it has FGD's: the hint and fallback are
  ``frag-hole``'s sequence of the batch, each pod on arrival (played on the cluster and undone); each arrival's
  candidates are ``frag-batch``'s plus its place in that sequence; the second solve's weights are lexicographic:
  first the hole tiers of a share ``frag-hole`` keeps off free devices (a partly used device before the batch, a
  free device of a spare node, another free device), then FGD's scores in ``frag-spread``'s tie order (on the
  state before the batch). Where some pods of the trace require a GPU model (``SharedConfig.batch_check``), a
  solve that places only as many milli-GPUs as that sequence is kept only when it leaves the nodes it touches
  less fragmented by FGD's measure after the batch. An arrival left out that still fits is placed by
  ``frag-hole``'s rule: work-conserving at the end of each batch.
- ``frag-defer`` (**holds back pods that fit**: not work-conserving; unlike ``sim.shared``'s ``frag-admit`` it
  refuses none for good): ``frag-hole-batch``, but a share with an unfillable hole that neither a partly used device nor
  a spare device can take waits (the solve offers it only those), oldest first, and is placed after a later
  batch as soon as one of them can take it, or once no whole-GPU pod of FGD's target workload fits anywhere
  (``saturated``: from then on a free device it takes is one no whole-GPU pod could have had), wherever it fits.
  It needs no knowledge of when the stream ends: a stream that ends after that point (each run of the
  default trace checked) leaves no held share that fits, so like FGD's its final state leaves out no pod that
  fits; one that ends before it leaves them waiting. The price is the wait of the shares it holds
  (``SharedConfig.max_wait`` bounds it: a share that waited that many arrivals is placed wherever it fits),
  and the shares still waiting at the end (they fit nowhere then, but did when they arrived).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from optplan.experiments.sim.shared import (
    Arrival,
    DevCluster,
    FgdPolicy,
    FragAdmitPolicy,
    FragHolePolicy,
    Placement,
    SharedConfig,
    fgd_score,
    left_after,
)
from optplan.solvers.core.gpushare import MILLI, GpuAsk, TargetWorkload

log = logging.getLogger(__name__)

BATCH_WALL_LIMIT = 30.0
"""``frag-batch``: a wall-clock cap per solve beside the deterministic limit (``batch_dtime``), against a solve
that never ends. It is far above what the deterministic limit takes (at most about 2 s of wall on the 2-core
reference machine at load 3), so a run's result does not depend on the machine's load; at 2 s it did (a loaded
machine cut some solves: up to 0.02 points of allocation between runs)."""


@dataclass(frozen=True)
class Option:
    """One place a batch arrival may take: node, device (a share's; -1 for whole GPUs or none) and FGD's integer
    score of that place on the state before the batch."""

    node: int
    device: int
    score: int


class FragBatchPolicy(FgdPolicy):
    """optplan's: ``batch`` arrivals placed together by one CP-SAT solve over FGD's candidates (module
    docstring); build, solve and extract are ``_options``/``_build``, ``_solve`` and ``_extract``."""

    name = "frag-batch"
    default_batch = 16
    """Arrivals per solve unless ``SharedConfig.batch`` says."""

    def __init__(self, cl: DevCluster, cfg: SharedConfig, target: TargetWorkload) -> None:
        super().__init__(cl, cfg, target)
        self.cfg = cfg
        self.batch = cfg.batch or self.default_batch

    def _options(self, p: Arrival) -> list[Option]:
        """FGD's best nodes for ``p`` (score, then name), its device on each; for a share also the least free
        devices with room anywhere (hole filling), each scored by FGD's growth on that device."""
        cl = self.cl
        fits = cl.fits(p)
        if not fits.any():
            return []
        key = self.refresh(p, fits)
        score = -self.delta[key]
        idx = np.flatnonzero(fits)
        top = idx[np.lexsort((idx, -score[idx]))][: self.cfg.batch_nodes]
        out = [Option(int(i), int(self.dev[key][i]) if p.ask.is_share else -1, int(score[i])) for i in top]
        if p.ask.is_share and self.cfg.batch_holes:
            rows, devs = np.nonzero(fits[:, None] & (cl.free_gpu >= p.ask.milli))
            room = cl.free_gpu[rows, devs]
            seen = {(o.node, o.device) for o in out}
            for k in np.lexsort((devs, rows, room))[: self.cfg.batch_holes + len(out)]:
                i, d = int(rows[k]), int(devs[k])
                if (i, d) in seen or len(out) >= self.cfg.batch_nodes + self.cfg.batch_holes:
                    continue
                out.append(self._option(p, i, d))
                seen.add((i, d))
        return out

    def _option(self, p: Arrival, i: int, d: int) -> Option:
        """``p`` on node ``i`` (a share on its device ``d``), scored by FGD on the state before the batch (after
        ``_options(p)``, which brings the node scores up to date)."""
        cl = self.cl
        if not p.ask.is_share:
            return Option(i, -1, int(-self.delta[self.refresh(p, cl.fits(p))][i]))
        after = cl.free_gpu[i : i + 1].copy()
        after[0, d] -= p.ask.milli
        growth = self.frag(after, cl.free_cpu[i : i + 1] - p.cpu, self.model_ids[i : i + 1]) - self.before[i]
        return Option(i, d, int(fgd_score(np.asarray(growth))[0]))

    def _order(self, nodes: list[int]) -> list[int]:
        """The tie order of the objective among a batch's candidate nodes (given in name order): FGD's, by name."""
        return nodes

    def _coefs(self, pods: Sequence[Arrival], opts: Sequence[Sequence[Option]]) -> list[list[int]]:
        """The second objective's weight of each option, positive: its score, then the tie order (``_order``)
        among equal scores."""
        rank = {i: r for r, i in enumerate(self._order(sorted({o.node for options in opts for o in options})))}
        w = len(pods) * len(rank) + 1
        return [[(o.score + 1) * w - rank[o.node] for o in options] for options in opts]

    @staticmethod
    def _value(pods: Sequence[Arrival], coefs: Sequence[Sequence[int]], pick: Sequence[int]) -> tuple[int, int]:
        """The two objectives of a pick: milli-GPUs placed, then the options' weights (``_coefs``) summed."""
        chosen = [(j, o) for j, o in enumerate(pick) if o >= 0]
        return sum(pods[j].ask.total_milli for j, _o in chosen), sum(coefs[j][o] for j, o in chosen)

    def _candidates(self, pods: Sequence[Arrival]) -> tuple[list[list[Option]], list[int]]:
        """The options of each arrival and the hint: FGD's sequence on them (``_hint``)."""
        opts = [self._options(p) for p in pods]
        return opts, self._hint(pods, opts)

    def _hint(self, pods: Sequence[Arrival], opts: Sequence[Sequence[Option]]) -> list[int]:
        """FGD's sequence on the options: each arrival in order takes its first option that still fits."""
        cl = self.cl
        cpu: dict[int, int] = {}
        mem: dict[int, int] = {}
        gpu: dict[tuple[int, int], int] = {}
        whole: dict[int, int] = {}
        touched: set[tuple[int, int]] = set()
        pick = []
        for p, options in zip(pods, opts, strict=True):
            chosen = -1
            for o, opt in enumerate(options):
                i, d = opt.node, opt.device
                if cl.free_cpu[i] - cpu.get(i, 0) < p.cpu or cl.free_mem[i] - mem.get(i, 0) < p.memory:
                    continue
                fresh = {e for (n, e) in touched if n == i and cl.free_gpu[i, e] == MILLI}
                if p.ask.is_share:
                    if cl.free_gpu[i, d] - gpu.get((i, d), 0) < p.ask.milli:
                        continue
                    if cl.free_gpu[i, d] == MILLI and (i, d) not in touched and \
                            whole.get(i, 0) + len(fresh) + 1 > cl.full[i]:
                        continue
                    gpu[i, d] = gpu.get((i, d), 0) + p.ask.milli
                    touched.add((i, d))
                elif p.ask.whole:
                    if whole.get(i, 0) + p.ask.whole + len(fresh) > cl.full[i]:
                        continue
                    whole[i] = whole.get(i, 0) + p.ask.whole
                cpu[i] = cpu.get(i, 0) + p.cpu
                mem[i] = mem.get(i, 0) + p.memory
                chosen = o
                break
            pick.append(chosen)
        return pick

    def _solve(self, pods: Sequence[Arrival], opts: Sequence[Sequence[Option]], hint: list[int]) -> list[int]:
        """The chosen option per arrival (-1: none): CP-SAT's when its objective is at least the hint's."""
        from ortools.sat.python import cp_model

        cl = self.cl
        if not any(opts):
            return hint
        m = cp_model.CpModel()
        # x[j, o]: arrival j takes its option o
        x = {(j, o): m.new_bool_var(f"x[{j},{o}]") for j, options in enumerate(opts) for o in range(len(options))}
        for j, options in enumerate(opts):
            if options:
                m.add_at_most_one(x[j, o] for o in range(len(options)))
        by_node: dict[int, list[tuple[int, int]]] = {}
        for (j, o) in x:
            by_node.setdefault(opts[j][o].node, []).append((j, o))
        for i, keys in by_node.items():
            m.add(sum(pods[j].cpu * x[j, o] for j, o in keys) <= int(cl.free_cpu[i]))
            m.add(sum(pods[j].memory * x[j, o] for j, o in keys) <= int(cl.free_mem[i]))
            shares: dict[int, list[tuple[int, int]]] = {}
            for j, o in keys:
                if pods[j].ask.is_share:
                    shares.setdefault(opts[j][o].device, []).append((j, o))
            for d, on in shares.items():
                m.add(sum(pods[j].ask.milli * x[j, o] for j, o in on) <= int(cl.free_gpu[i, d]))
            wholes = [(j, o) for j, o in keys if pods[j].ask.whole]
            if wholes:
                # whole GPUs and shares opening an entirely free device share the node's free devices
                opened = []
                for d, on in shares.items():
                    if cl.free_gpu[i, d] == MILLI:
                        u = m.new_bool_var(f"opened[{i},{d}]")
                        for j, o in on:
                            m.add_implication(x[j, o], u)
                        opened.append(u)
                m.add(sum(pods[j].ask.whole * x[j, o] for j, o in wholes) + sum(opened) <= int(cl.full[i]))
        for (j, o), v in x.items():
            m.add_hint(v, hint[j] == o)
        coefs = self._coefs(pods, opts)
        hint_value = self._value(pods, coefs, hint)
        s = cp_model.CpSolver()
        s.parameters.num_workers = 1
        s.parameters.random_seed = self.cfg.seed
        s.parameters.max_deterministic_time = self.cfg.batch_dtime
        s.parameters.max_time_in_seconds = BATCH_WALL_LIMIT
        s.parameters.max_presolve_iterations = 1  # light presolve: the models are small, solved many times
        s.parameters.cp_model_probing_level = 0
        s.parameters.symmetry_level = 0
        placed = sum(pods[j].ask.total_milli * v for (j, _o), v in x.items())
        outcome = "HINT"
        if hint_value[0] < sum(p.ask.total_milli for p, options in zip(pods, opts, strict=True) if options):
            # first the most milli-GPUs placed (only when FGD's sequence leaves a pod with candidates out)
            m.maximize(placed)
            st = s.solve(m)
            if st not in (cp_model.OPTIMAL, cp_model.FEASIBLE) or s.objective_value <= hint_value[0]:
                self.solves[outcome] = self.solves.get(outcome, 0) + 1
                return hint
            m.add(placed >= round(s.objective_value))
            hint = [next((o for o in range(len(options)) if s.value(x[j, o])), -1) for j, options in enumerate(opts)]
            hint_value = self._value(pods, coefs, hint)
            m.clear_hints()
            for (j, o), v in x.items():
                m.add_hint(v, hint[j] == o)
        else:
            m.add(placed >= hint_value[0])
        # then the options' weights: FGD's scores, the first names among equal scores (each positive: nobody
        # left out for it)
        m.maximize(sum(coefs[j][o] * v for (j, o), v in x.items()))
        st = s.solve(m)
        ok = st in (cp_model.OPTIMAL, cp_model.FEASIBLE)
        pick = hint
        if ok:
            got = [next((o for o in range(len(options)) if s.value(x[j, o])), -1) for j, options in enumerate(opts)]
            if self._value(pods, coefs, got) >= hint_value:
                pick, outcome = got, s.status_name(st)
        log.debug("%s of %d: %s objective %s bound %s hint %s in %.3fs", self.name, len(pods), s.status_name(st),
                  s.objective_value if ok else None, s.best_objective_bound if ok else None, hint_value, s.wall_time)
        self.solves[outcome] = self.solves.get(outcome, 0) + 1
        return pick

    def place(self, pods: Sequence[Arrival]) -> list[Placement]:
        """Places a batch on the cluster; an arrival the solve left out that still fits somewhere afterwards is
        placed by the policy's rule on arrival (FGD's; ``frag-hole``'s for ``frag-hole-batch``), so nobody is
        refused while there is room."""
        opts, hint = self._candidates(pods)
        out = self._take(pods, opts, self._solve(pods, opts, hint))
        for j, p in enumerate(pods):
            if out[j] is None:
                out[j] = self.arrive(p)
        return out

    def _take(self, pods: Sequence[Arrival], opts: Sequence[Sequence[Option]], pick: Sequence[int]) -> list[Placement]:
        """The batch's chosen options taken on the cluster: a share on its device, whole GPUs on the node's first
        entirely free devices that no share of the batch takes; None for an arrival without one."""
        cl = self.cl
        taken: dict[int, set[int]] = {}
        for j, o in enumerate(pick):
            if o >= 0 and pods[j].ask.is_share:
                taken.setdefault(opts[j][o].node, set()).add(opts[j][o].device)
        out: list[Placement] = []
        for j, (p, o) in enumerate(zip(pods, pick, strict=True)):
            if o < 0:
                out.append(None)
                continue
            i = opts[j][o].node
            if p.ask.is_share:
                devs: tuple[int, ...] = (opts[j][o].device,)
            else:
                free = [d for d in range(int(cl.ngpu[i])) if cl.free_gpu[i, d] == MILLI and d not in taken.get(i, ())]
                devs = tuple(free[: p.ask.whole])
                taken.setdefault(i, set()).update(devs)
            cl.take(i, p, devs)
            out.append((i, devs))
        return out


HOLE_TIERS = 2
"""``frag-hole-batch``: the places of a share that ``frag-hole`` keeps off free devices, best first: a partly used
device (0), a free device of a spare node (1), another free device (2)."""
_NOTHING = Arrival("", 0, 0, GpuAsk())


class FragHoleBatchPolicy(FragBatchPolicy, FragHolePolicy):
    """optplan's: ``frag-batch`` with ``frag-hole``'s rules (module docstring): its sequence as the hint and the
    fallback, its tie order, and the free devices its unfillable holes avoid weighed first."""

    name = "frag-hole-batch"
    default_batch = 64
    """Measured at 64 (docs/benchmarks.md; 128 and 256 gave no more on the default trace)."""

    def _sequence(self, pods: Sequence[Arrival]) -> list[Placement]:
        """``frag-hole``'s placements of the batch, each pod on arrival; the cluster is left as it was."""
        snap = self.cl.snapshot()
        out = [self.arrive(p) for p in pods]
        self.cl.restore(snap)
        return out

    def _candidates(self, pods: Sequence[Arrival]) -> tuple[list[list[Option]], list[int]]:
        """``frag-batch``'s options of each arrival and its place in ``frag-hole``'s sequence (added when not
        among them), which is the hint."""
        opts = [self._options(p) for p in pods]
        hint = []
        for p, options, where in zip(pods, opts, self._sequence(pods), strict=True):
            if where is None:
                hint.append(-1)
                continue
            place = (where[0], where[1][0] if p.ask.is_share else -1)
            k = next((k for k, o in enumerate(options) if (o.node, o.device) == place), len(options))
            if k == len(options):
                options.append(self._option(p, *place))
            hint.append(k)
        return opts, hint

    def _order(self, nodes: list[int]) -> list[int]:
        """``frag-spread``'s tie order on the state before the batch: the least contested model, then the emptiest
        node (the fullest when it packs), then the name."""
        idx = np.array(nodes, dtype=np.int64)
        left = left_after(self.cl, _NOTHING)[idx]
        return [int(i) for i in idx[np.lexsort((idx, left if self.pack else -left, self.pressure[idx]))]]

    def _tier(self, p: Arrival, options: Sequence[Option]) -> list[int]:
        """``HOLE_TIERS``' tier of each option: 0 for every option of a pod that leaves no unfillable hole."""
        if not self.closes(p):
            return [0] * len(options)
        cl = self.cl
        _used, spare = self.refuge(p, cl.fits(p))
        return [0 if cl.free_gpu[o.node, o.device] < MILLI else 1 if spare[o.node] else HOLE_TIERS for o in options]

    def __init__(self, cl: DevCluster, cfg: SharedConfig, target: TargetWorkload) -> None:
        super().__init__(cl, cfg, target)
        self.check = bool(self.pressure.any()) if cfg.batch_check is None else cfg.batch_check
        """Check each solve against ``frag-hole``'s sequence (``_solve``): by default where pods require a GPU
        model, which meet on the few nodes of their model, and one solve on the weights before the batch sends
        several to the same ones."""

    def _solve(self, pods: Sequence[Arrival], opts: Sequence[Sequence[Option]], hint: list[int]) -> list[int]:
        """``frag-batch``'s solve; with ``check`` kept only when it places more milli-GPUs than ``frag-hole``'s
        sequence (the hint), or as many and leaves the nodes it touches less fragmented by FGD's measure on the
        state after the batch (the solve weighs each option on the state before it)."""
        pick = super()._solve(pods, opts, hint)
        if pick == hint or not self.check:
            return pick
        got, was = (sum(pods[j].ask.total_milli for j, o in enumerate(x) if o >= 0) for x in (pick, hint))
        if got != was:
            return pick if got > was else hint
        nodes = sorted({opts[j][o].node for j, o in enumerate(pick) if o >= 0} |
                       {opts[j][o].node for j, o in enumerate(hint) if o >= 0})
        return pick if self._after(pods, opts, pick, nodes) < self._after(pods, opts, hint, nodes) else hint

    def _after(self, pods: Sequence[Arrival], opts: Sequence[Sequence[Option]], pick: Sequence[int],
               nodes: list[int]) -> float:
        """FGD's fragmentation of ``nodes`` summed, on the state after the batch takes ``pick``."""
        cl = self.cl
        snap = cl.snapshot()
        self._take(pods, opts, pick)  # as ``place`` takes it
        after = float(np.sum(self.frag(cl.free_gpu[nodes], cl.free_cpu[nodes], self.model_ids[nodes])))
        cl.restore(snap)
        return after

    def _coefs(self, pods: Sequence[Arrival], opts: Sequence[Sequence[Option]]) -> list[list[int]]:
        """Lexicographic: the hole tiers, then ``frag-batch``'s weights in ``frag-spread``'s tie order."""
        out = super()._coefs(pods, opts)
        unit = sum(max(c, default=0) for c in out) + 1
        return [[c + unit * (HOLE_TIERS - t) for c, t in zip(cs, self._tier(p, options), strict=True)]
                for p, options, cs in zip(pods, opts, out, strict=True)]


class FragDeferPolicy(FragHoleBatchPolicy, FragAdmitPolicy):
    """optplan's: ``frag-hole-batch`` that holds back a share with an unfillable hole while only a free device a
    whole-GPU pod could have had takes it, and places it as soon as that changes (module docstring)."""

    name = "frag-defer"

    def __init__(self, cl: DevCluster, cfg: SharedConfig, target: TargetWorkload) -> None:
        super().__init__(cl, cfg, target)
        self.seen = 0
        """Arrivals placed or held so far: the index of the next batch's first arrival."""
        self.held: list[tuple[int, Arrival]] = []
        """(arrival index, arrival) of each share held back, oldest first."""
        self.whole = [t for t in self.target.types if t.ask.whole]
        """The whole-GPU pods of FGD's target workload: the pods the held shares make room for."""
        self.max_wait = cfg.max_wait
        """``SharedConfig.max_wait``: the arrivals after which a held share is placed wherever it fits."""

    def _candidates(self, pods: Sequence[Arrival]) -> tuple[list[list[Option]], list[int]]:
        """``frag-hole-batch``'s, without the free devices of nodes that are not spare for a share it holds
        back (the solve may not place it there either)."""
        opts, hint = super()._candidates(pods)
        for j, p in enumerate(pods):
            if self.closes(p):
                keep = [o for o, t in enumerate(self._tier(p, opts[j])) if t < HOLE_TIERS]
                hint[j] = keep.index(hint[j]) if hint[j] in keep else -1
                opts[j] = [opts[j][o] for o in keep]
        return opts, hint

    def place(self, pods: Sequence[Arrival]) -> list[Placement]:
        """``frag-hole-batch``'s placement of the batch; an arrival left out that fits is held (only a share
        ``frag-admit`` refuses can be: the others that fit are placed by the end of the batch)."""
        base = self.seen
        self.seen += len(pods)
        out = super().place(pods)
        self.held.extend((base + j, p) for j, p in enumerate(pods) if out[j] is None and self.cl.fits(p).any())
        return out

    def saturated(self) -> bool:
        """No whole-GPU pod of the target workload fits anywhere (entirely free devices on a node of its model,
        with its cpu): a held share then takes nothing a whole-GPU pod could have had. Always, without such
        pods."""
        cl = self.cl
        return not any(((cl.full >= t.ask.whole) & (cl.free_cpu >= t.cpu) & cl.allowed(t.ask)).any()
                       for t in self.whole)

    def release(self) -> list[tuple[int, Placement]]:
        """After each batch: the held shares that a partly used or spare device now takes (``frag-admit``'s
        rule), oldest first; once ``saturated``, or once a share has waited ``SharedConfig.max_wait`` arrivals,
        every such share that fits (``frag-hole``'s rule). Returns (arrival index, placement) of each one placed."""
        done: list[tuple[int, Placement]] = []
        kept: list[tuple[int, Arrival]] = []
        free = bool(self.held) and self.saturated()
        last = self.seen - 1 - (self.max_wait if self.max_wait is not None else self.seen)
        for k, p in self.held:
            fits = self.cl.fits(p)
            if fits.any() and (free or k <= last or self.admits(p, fits)):
                i, devs = self.choose(p, fits)
                self.cl.take(i, p, devs)
                done.append((k, (i, devs)))
            else:
                kept.append((k, p))
        self.held = kept
        return done

    def waiting(self) -> tuple[int, ...]:
        return tuple(k for k, _p in self.held)
