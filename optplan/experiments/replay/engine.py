"""The discrete-event replay (``replay``): arrivals, departures and Repack runs in time order, on the
incremental ``cluster.Cluster``; metrics as it goes.

Events at one instant are handled together: first departures (a pod's runtime is over), then arrivals
(gangs created now), then Volcano's allocate (``Replay.allocate``; see ``cluster``'s docstring for the
order and why a cycle only tries what can have changed), then the policy's Repack run if one is due,
whose moves are applied and followed by another allocate. The replay stops at the horizon; gangs still
waiting then count in the waiting times with the time they waited so far (``censored``).

A moved pod restarts: it holds its new node at once, and its departure moves ``restart_delay`` later
(its remaining runtime is kept); with ``restart: gang`` every running pod of its gang restarts so (they
stay where they are). Cards disrupted are the cards of the pods restarted.

Metrics (``ReplayResult``): time-weighted GPU allocation (∫ allocated GPUs dt / (horizon × GPUs)); per
gang its waiting time (ready − created), by size class (``trace.gang_bucket``) with p50/p95/p99 by
nearest rank; pending gangs and allocation over time (sampled on a fixed grid); pods moved and cards
disrupted (totals and per day); Repack runs (planned, skipped because nothing changed since a run that
moved nothing or because the GPUs in use are packed already, with moves), freed nodes, the peers' rule
breaks; and planning wall seconds apart (``timings``: they vary from run to run; everything else is a
function of the trace and the config).
"""

from __future__ import annotations

import heapq
import math
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from optplan.errors import InputError
from optplan.experiments.replay.config import ReplayConfig
from optplan.experiments.replay.oracle import cluster_for
from optplan.experiments.replay.policy import Planned, fragmentation_pending, plan_for_pending, plan_moves
from optplan.experiments.replay.snapshot import Running, SnapshotBuilder
from optplan.experiments.replay.trace import Trace, TraceGang, bucket_labels, gang_bucket

Shape = tuple[int, int, int, tuple[str, ...]]
SAMPLES = 240
"""Points of the allocation and pending-gang series."""
_DEPART, _ARRIVE, _TICK, _CHECK = 0, 1, 2, 3

ProgressFn = Callable[[float], None]
"""Called with the share of the horizon replayed."""


def percentile(values: list[float], p: float) -> float | None:
    """Nearest rank: the smallest value with at least p% of the values at or below it (None for none)."""
    if not values:
        return None
    s = sorted(values)
    return s[max(math.ceil(p / 100 * len(s)) - 1, 0)]


@dataclass
class _Gang:
    g: TraceGang
    pids: list[int]
    placed: int = 0
    ready_at: float | None = None
    suspect_since: float | None = None
    """``pending`` policy: since when its minimum has fitted the free GPUs in total while it waits."""


@dataclass
class ReplayResult:
    """One replay's metrics; ``to_dict`` is the raw JSON (deterministic), ``timings`` apart."""

    trace: str
    config: dict[str, Any]
    label: str
    nodes: int
    gpus: int
    gangs: int
    pods: int
    horizon: float
    offered_load: float
    allocation_percent: float
    waits: dict[str, dict[str, Any]]
    gang_waits: list[tuple[int, float, bool]]
    """Per gang in creation order: cards, seconds waited, censored (still waiting at the horizon)."""
    series: list[tuple[float, float, int]]
    """(time, allocation %, gangs waiting) on a fixed grid."""
    pods_moved: int
    cards_disrupted: int
    repack: dict[str, int]
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def days(self) -> float:
        return self.horizon / 86400

    def per_day(self, v: int) -> float:
        return v / self.days if self.days > 0 else 0.0

    def restart_percent(self) -> float:
        """GPU-hours lost to restarts (cards restarted × ``restartDelaySeconds``) as a percent of the GPU-hours
        allocated."""
        used = self.allocation_percent / 100 * self.horizon * self.gpus
        lost = self.cards_disrupted * float(self.config.get("restartDelaySeconds", 0))
        return round(100 * lost / used, 6) if used > 0 else 0.0

    def summary(self) -> dict[str, Any]:
        """The headline numbers a sweep aggregates."""
        w8 = self.waits.get("8", {})
        return {"allocationPercent": self.allocation_percent,
                "waitP95Minutes8": None if w8.get("p95") is None else w8["p95"] / 60,
                "waitMeanMinutes8": None if w8.get("mean") is None else w8["mean"] / 60,
                "restartGpuHoursPercent": self.restart_percent(),
                "waitP95Minutes": self.waits["all"]["p95"] / 60 if self.waits["all"]["p95"] is not None else None,
                "cardsDisruptedPerDay": round(self.per_day(self.cards_disrupted), 6),
                "podsMovedPerDay": round(self.per_day(self.pods_moved), 6),
                "repackRuns": self.repack["runs"]}

    def to_dict(self) -> dict[str, Any]:
        return {"trace": self.trace, "label": self.label, "config": self.config, "nodes": self.nodes,
                "gpus": self.gpus, "gangs": self.gangs, "pods": self.pods, "horizonSeconds": self.horizon,
                "offeredLoad": round(self.offered_load, 6), "allocationPercent": self.allocation_percent,
                "waitSeconds": self.waits, "podsMoved": self.pods_moved, "cardsDisrupted": self.cards_disrupted,
                "podsMovedPerDay": round(self.per_day(self.pods_moved), 6),
                "cardsDisruptedPerDay": round(self.per_day(self.cards_disrupted), 6),
                "repack": self.repack, "summary": self.summary(),
                "series": [list(s) for s in self.series],
                "gangWaits": [list(w) for w in self.gang_waits]}


class Replay:
    """One replay of ``trace`` under ``cfg``; ``run()`` returns the metrics."""

    def __init__(self, trace: Trace, cfg: ReplayConfig, progress: ProgressFn | None = None) -> None:
        self.trace = trace
        self.cfg = cfg
        self.progress = progress
        self.horizon = cfg.horizon if cfg.horizon is not None else trace.end
        if not self.horizon > 0:
            raise InputError("the trace ends at time 0: give a positive horizon", field="horizon")
        self.cluster = cluster_for(trace.nodes, cfg)  # the oracle's, nobinpack's or Volcano's binpack
        self.builder = SnapshotBuilder(trace.nodes)
        self.run_spec = cfg.repack_run()
        self.gangs: list[_Gang] = []
        self.pod_gang: list[int] = []
        self.pod_name: list[str] = []
        self.pod_runtime: list[float] = []
        self.node: list[int] = []
        self.end: list[float] = []
        self.ver: list[int] = []
        for k, g in enumerate(trace.gangs):
            pids = list(range(len(self.pod_gang), len(self.pod_gang) + len(g.pods)))
            self.gangs.append(_Gang(g, pids))
            for p in g.pods:
                self.pod_gang.append(k)
                self.pod_name.append(p.name)
                self.pod_runtime.append(p.runtime)
                self.node.append(-1)
                self.end.append(math.inf)
                self.ver.append(0)
        self.pid_of = {n: i for i, n in enumerate(self.pod_name)}
        self.queues: dict[tuple[Shape, int], deque[int]] = {}
        """Gangs waiting for their gang turn, one queue per (pod shape, minMember), each in Volcano's order
        (creation, name: the trace's order, which is gang index order)."""
        self.waiting = 0
        self.extras: list[int] = []
        """Ready gangs with pods not placed yet, same order."""
        self.new: list[int] = []
        """Gangs arrived since the last allocate."""
        self.events: list[tuple[float, int, int, int, int]] = []
        self.seq = 0
        self.now = 0.0
        self.area = 0.0
        self.series: list[tuple[float, float, int]] = []
        self.next_sample = 0
        self.moved = 0
        self.disrupted = 0
        self.repack = {"runs": 0, "runsWithMoves": 0, "skippedUnchanged": 0, "skippedPacked": 0,
                       "skippedCooldown": 0, "pendingChecks": 0, "freedNodes": 0, "ruleBreaks": 0,
                       "refusedPlans": 0}
        self.statuses: dict[str, int] = {}
        self.plan_seconds = 0.0
        self.snapshot_seconds = 0.0
        self.last_run: tuple[int, bool] | None = None
        """(cluster version after the last run, whether it moved anything)."""
        self.cooldown_until = -math.inf
        self.tokens = 0
        self.check_token: dict[int, int] = {}

    # ---- events --------------------------------------------------------------------------------

    def push(self, t: float, kind: int, a: int = 0, b: int = 0) -> None:
        self.seq += 1
        heapq.heappush(self.events, (t, kind, self.seq, a, b))

    def run(self) -> ReplayResult:
        for k, gs in enumerate(self.gangs):
            if gs.g.created <= self.horizon:
                self.push(gs.g.created, _ARRIVE, k)
        if self.cfg.policy == "interval" and self.cfg.interval <= self.horizon:
            self.push(self.cfg.interval, _TICK)
        shown = -1.0
        while self.events and self.events[0][0] <= self.horizon:
            t = self.events[0][0]
            self.advance(t)
            due: list[tuple[int, int, int]] = []
            while self.events and self.events[0][0] == t:
                _t, kind, _s, a, b = heapq.heappop(self.events)
                if kind == _DEPART:
                    self.depart(a, b)
                elif kind == _ARRIVE:
                    self.arrive(a)
                else:
                    due.append((kind, a, b))
            self.allocate(t)
            for kind, a, b in due:
                if kind == _TICK:
                    self.repack_run(t)
                    if t + self.cfg.interval <= self.horizon:
                        self.push(t + self.cfg.interval, _TICK)
                else:
                    self.check(t, a, b)
            if self.cfg.policy == "pending":
                self.watch(t)
            if self.progress is not None and t / self.horizon - shown >= 0.005:
                shown = t / self.horizon
                self.progress(shown)
        self.advance(self.horizon)
        if self.progress is not None:
            self.progress(1.0)
        return self.result()

    def advance(self, t: float) -> None:
        """Integrate allocation up to ``t`` and sample the series on its grid."""
        while self.next_sample <= SAMPLES and self.next_sample * self.horizon / SAMPLES <= t:
            at = self.next_sample * self.horizon / SAMPLES
            pct = 100 * self.cluster.allocated / self.cluster.total_gpus
            self.series.append((round(at, 3), round(pct, 4), self.waiting))
            self.next_sample += 1
        self.area += self.cluster.allocated * (t - self.now)
        self.now = t

    def arrive(self, k: int) -> None:
        g = self.gangs[k].g
        self.new.append(k)
        self.queues.setdefault((g.shape, g.min_member), deque()).append(k)
        self.waiting += 1

    def depart(self, pid: int, ver: int) -> None:
        if ver != self.ver[pid] or self.node[pid] < 0:
            return
        gs = self.gangs[self.pod_gang[pid]]
        self.cluster.give_back(self.node[pid], self.cluster.sim_pod(gs.g))
        self.node[pid] = -2  # gone
        self.builder.forget(self.pod_name[pid])

    # ---- allocate ------------------------------------------------------------------------------

    def start(self, pid: int, node: int, t: float) -> None:
        gs = self.gangs[self.pod_gang[pid]]
        self.cluster.take(node, self.cluster.sim_pod(gs.g))
        self.node[pid] = node
        gs.placed += 1
        self.end[pid] = t + self.pod_runtime[pid]
        self.ver[pid] += 1
        self.push(self.end[pid], _DEPART, pid, self.ver[pid])

    def place_one(self, gs: _Gang, t: float) -> bool:
        pod = self.cluster.sim_pod(gs.g)
        i = self.cluster.best(pod)
        if i < 0:
            return False
        self.start(gs.pids[gs.placed], i, t)
        return True

    def allocate(self, t: float) -> None:
        """Volcano's allocate (``cluster``'s docstring): unready gangs whole, then ready gangs' other pods
        one per turn. Without room freed since the last cycle only the new gangs can start."""
        retry = self.cluster.freed
        self.cluster.freed = False
        new, self.new = self.new, []
        failed: dict[Shape, int] = {}
        started = False

        def attempt(k: int) -> bool:
            """Gang k, first of its queue, gets its turn: all its minimum or nothing."""
            nonlocal started
            gs = self.gangs[k]
            need = gs.g.min_member
            if failed.get(gs.g.shape, math.inf) <= need:
                return False
            if self.cluster.room(self.cluster.sim_pod(gs.g)) < need:
                failed[gs.g.shape] = need
                return False
            for _ in range(need):
                if not self.place_one(gs, t):
                    raise AssertionError("room said the gang fits")  # pragma: no cover
            gs.ready_at = t
            gs.suspect_since = None
            self.queues[gs.g.shape, need].popleft()
            self.waiting -= 1
            started = True
            if gs.placed < len(gs.pids):
                self.extras.append(k)
            return True

        if retry:
            # the queues' heads in Volcano's order; a head that fails ends its queue's turn (module docstring)
            heads = [(q[0], key) for key, q in self.queues.items() if q]
            heapq.heapify(heads)
            while heads:
                k, key = heapq.heappop(heads)
                if attempt(k) and self.queues[key]:
                    heapq.heappush(heads, (self.queues[key][0], key))
        else:
            for k in new:  # a new gang behind an older one of its queue waits too: nothing was freed
                g = self.gangs[k].g
                if self.queues[g.shape, g.min_member][0] == k:
                    attempt(k)
        if started:
            self.extras.sort()
        if retry or started:
            self.fill_extras(t)

    def fill_extras(self, t: float) -> None:
        """Ready gangs' remaining pods, one per turn, round robin; a pod that fits nowhere waits."""
        active = list(self.extras)
        while active:
            nxt = []
            for k in active:
                gs = self.gangs[k]
                if self.place_one(gs, t) and gs.placed < len(gs.pids):
                    nxt.append(k)
            active = nxt
        self.extras = [k for k in self.extras if self.gangs[k].placed < len(self.gangs[k].pids)]

    # ---- Repack --------------------------------------------------------------------------------

    def running(self) -> list[Running]:
        names = self.cluster.names
        return [Running(self.pod_name[p], self.gangs[self.pod_gang[p]].g, names[self.node[p]])
                for p in range(len(self.node)) if self.node[p] >= 0]

    def repack_run(self, t: float, gangs: list[str] | None = None, waiting: Sequence[TraceGang] = ()) -> None:
        """One Repack run now: skipped when nothing changed since a run that moved nothing, or when the
        GPUs in use are already packed; else planned, applied, and followed by an allocate."""
        cl = self.cluster
        if self.last_run is not None and self.last_run == (cl.version, False):
            self.repack["skippedUnchanged"] += 1
            return
        if cl.occupied_gpu_nodes() <= cl.packed_bound():
            self.repack["skippedPacked"] += 1
            return
        t0 = time.perf_counter()
        snap = self.builder.build(self.running(), waiting)  # the gangs an admit goal names are Pending VCJobs
        self.snapshot_seconds += time.perf_counter() - t0
        planned = (plan_moves(snap, self.run_spec, self.cfg) if gangs is None
                   else plan_for_pending(snap, self.run_spec, self.cfg, gangs))
        self.record(planned)
        if planned.rule_breaks:  # a peer's plan that breaks optplan's rules is not carried out (counted)
            self.repack["refusedPlans"] += 1
            self.last_run = (cl.version, False)
            return
        self.apply(planned, t)
        self.last_run = (cl.version, bool(planned.moves))
        if planned.moves:
            self.allocate(t)

    def record(self, planned: Planned) -> None:
        self.repack["runs"] += 1
        self.repack["runsWithMoves"] += bool(planned.moves)
        self.repack["freedNodes"] += planned.freed_nodes
        self.repack["ruleBreaks"] += planned.rule_breaks
        key = f"{planned.status}/{planned.reason}"
        self.statuses[key] = self.statuses.get(key, 0) + 1
        self.plan_seconds += planned.seconds

    def apply(self, planned: Planned, t: float) -> None:
        """Move the pods: every source gives back first, then every receiver takes (``take`` raises
        PlanInvalidError if a node would be over-committed); restarted pods leave ``restart_delay`` later."""
        cl = self.cluster
        moves = []
        for m in planned.moves:
            pid = self.pid_of[m.pod.split("/", 1)[1]]
            if cl.names[self.node[pid]] != m.from_node:
                raise AssertionError(f"{m.pod} is not on {m.from_node}")  # pragma: no cover
            moves.append((pid, cl.index[m.to_node]))
        for pid, _to in moves:
            cl.give_back(self.node[pid], cl.sim_pod(self.gangs[self.pod_gang[pid]].g))
        restarted: set[int] = set()
        for pid, to in moves:
            cl.take(to, cl.sim_pod(self.gangs[self.pod_gang[pid]].g))
            self.node[pid] = to
            restarted.add(pid)
            if self.cfg.restart == "gang":
                restarted.update(p for p in self.gangs[self.pod_gang[pid]].pids if self.node[p] >= 0)
        for pid in sorted(restarted):
            self.end[pid] += self.cfg.restart_delay
            self.ver[pid] += 1
            self.push(self.end[pid], _DEPART, pid, self.ver[pid])
            self.disrupted += self.gangs[self.pod_gang[pid]].g.gpu
        self.moved += len(moves)

    # ---- the pending policy ----------------------------------------------------------------------

    def watch(self, t: float) -> None:
        """Mark the first waiting gang of each queue (the one allocate tries first) when its minimum fits
        the free GPUs in total (a check is due ``W`` later); unmark it when it does not."""
        free = self.cluster.total_gpus - self.cluster.allocated
        for q in self.queues.values():
            if not q:
                continue
            k = q[0]
            gs = self.gangs[k]
            if gs.g.min_member * gs.g.gpu <= free:
                if gs.suspect_since is None:
                    gs.suspect_since = t
                    self.schedule_check(t + self.cfg.pending_after, k)
            else:
                gs.suspect_since = None

    def schedule_check(self, t: float, k: int) -> None:
        """A check of gang k at t; an earlier one still queued for it is void."""
        self.tokens += 1
        self.check_token[k] = self.tokens
        self.push(t, _CHECK, k, self.tokens)

    def check(self, t: float, k: int, key: int) -> None:
        """A gang marked ``W`` ago: if it still waits and placement says fragmentation, Repack (at most one
        such run per ``interval``)."""
        gs = self.gangs[k]
        if gs.ready_at is not None or gs.suspect_since is None or self.check_token.get(k) != key:
            return
        if t < self.cooldown_until:
            self.repack["skippedCooldown"] += 1
            self.schedule_check(self.cooldown_until, k)
            return
        due = []
        for j in sorted(q[0] for q in self.queues.values() if q):
            since = self.gangs[j].suspect_since
            if since is not None and t - since >= self.cfg.pending_after:
                due.append(self.gangs[j].g)
        self.repack["pendingChecks"] += 1
        t0 = time.perf_counter()
        snap = self.builder.build(self.running(), due)
        frag = fragmentation_pending(snap)
        self.plan_seconds += time.perf_counter() - t0
        if frag:
            self.cooldown_until = t + self.cfg.interval
            self.repack_run(t, frag, [g for g in due if g.name in frag])
        if gs.ready_at is None and t + self.cfg.interval <= self.horizon:
            self.schedule_check(t + self.cfg.interval, k)  # still waiting: judged again after the cooldown

    # ---- result --------------------------------------------------------------------------------

    def result(self) -> ReplayResult:
        waits: dict[str, list[float]] = {b: [] for b in bucket_labels()}
        censored: dict[str, int] = dict.fromkeys(bucket_labels(), 0)
        gang_waits: list[tuple[int, float, bool]] = []
        for gs in self.gangs:
            g = gs.g
            if g.created > self.horizon:
                continue
            done = gs.ready_at is not None
            w = (gs.ready_at if gs.ready_at is not None else self.horizon) - g.created
            b = gang_bucket(g.cards)
            waits[b].append(w)
            censored[b] += not done
            gang_waits.append((g.cards, round(w, 3), not done))
        everyone = [w for ws in waits.values() for w in ws]

        def stats(ws: list[float], cens: int) -> dict[str, Any]:
            def r(v: float | None) -> float | None:
                return None if v is None else round(v, 3)
            return {"gangs": len(ws), "censored": cens, "mean": r(sum(ws) / len(ws)) if ws else None,
                    "p50": r(percentile(ws, 50)), "p95": r(percentile(ws, 95)), "p99": r(percentile(ws, 99))}

        by = {b: stats(ws, censored[b]) for b, ws in waits.items() if ws}
        by["all"] = stats(everyone, sum(censored.values()))
        repack = dict(self.repack)
        repack.update({f"status:{k}": v for k, v in sorted(self.statuses.items())})
        alloc = 100 * self.area / (self.horizon * self.cluster.total_gpus)
        return ReplayResult(
            trace=self.trace.name, config=config_dict(self.cfg), label=self.cfg.label(), nodes=len(self.trace.nodes),
            gpus=self.cluster.total_gpus, gangs=len(self.gangs), pods=len(self.pod_name), horizon=self.horizon,
            offered_load=self.trace.offered_load(self.horizon), allocation_percent=round(alloc, 4), waits=by,
            gang_waits=gang_waits, series=self.series, pods_moved=self.moved, cards_disrupted=self.disrupted,
            repack=repack, timings={"planSeconds": round(self.plan_seconds, 3),
                                    "snapshotSeconds": round(self.snapshot_seconds, 3)})


def config_dict(cfg: ReplayConfig) -> dict[str, Any]:
    return {"policy": cfg.policy, "intervalSeconds": cfg.interval, "pendingAfterSeconds": cfg.pending_after,
            "planner": cfg.planner, "scope": dict(cfg.scope), "maxPerRun": dict(cfg.max_per_run),
            "restartDelaySeconds": cfg.restart_delay, "restart": cfg.restart, "timeLimit": cfg.time_limit,
            "seed": cfg.seed, "horizonSeconds": cfg.horizon,
            "binpack": cfg.weights.model_dump(by_alias=True)}


def replay(trace: Trace, cfg: ReplayConfig, progress: ProgressFn | None = None) -> ReplayResult:
    """Replay ``trace`` under ``cfg`` (see the module docstring)."""
    return Replay(trace, cfg, progress).run()
