"""The discrete-event replay (``replay``): arrivals, departures and Repack runs in time order, on the
incremental ``cluster.Cluster``; metrics as it goes.

Events at one instant are handled together: first departures (a pod's runtime is over), then arrivals
(gangs created now), then Volcano's allocate (``Replay.allocate``; see ``cluster``'s docstring for the
order and why a cycle only tries what can have changed), then the policy's Repack run if one is due,
whose moves are applied and followed by another allocate.

The measured window (``start``, ``end``): from the first arrival plus ``warmup`` to the stated horizon,
else to the last event (the last pod leaves). Gangs created inside it are measured; one still waiting
(or still running) at its end is *censored*: its time is only known to be at least what it waited so far.

Restarts. A moved pod holds its new node at once; the workloads' restart policy (``config.RESTARTS``,
priced by Repack with the same rule, ``policy.restarted_pods``) says which pods restart: under
``RestartJob`` every running pod of the moved pod's gang (they stay where they are). A restarted pod
first restores for ``restart_delay`` seconds, then works again from its last checkpoint (every
``checkpoint`` seconds of its work; the work since is lost and done again). Cards disrupted are the cards
of the pods restarted.

Metrics (``ReplayResult``), over the window: GPU time split into *useful* (pods doing work kept),
*restore* (restarted pods holding cards while they restore), *lost* (work thrown away by a restart) and
*idle*, which add up to GPUs × window (``allocationPercent`` = useful + restore + lost, the cards held);
per gang its waiting time (created → minMember placed) and completion time (created → its last pod
leaves, lost work included), by size class (``trace.gang_bucket``), with censored counts, Kaplan–Meier
p50/p95/p99 (``survival``; None where censoring hides the percentile) and the restricted mean; pending
gangs and allocation over time (sampled on a fixed grid of the window); pods moved and cards disrupted
(totals and per day); Repack runs (planned, skipped because nothing changed since a run that moved
nothing or because the GPUs in use are packed already, with moves), freed nodes, the peers' rule breaks;
and planning wall seconds apart (``timings``: they vary from run to run; everything else is a function of
the trace and the config).
"""

from __future__ import annotations

import bisect
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
from optplan.experiments.replay.policy import (
    Planned,
    fragmentation_pending,
    plan_for_pending,
    plan_moves,
    restarted_pods,
)
from optplan.experiments.replay.snapshot import Running, SnapshotBuilder
from optplan.experiments.replay.survival import kaplan_meier
from optplan.experiments.replay.trace import Trace, TraceGang, bucket_labels, gang_bucket
from optplan.models.snapshot import Snapshot

Shape = tuple[int, int, int, tuple[str, ...]]
SAMPLES = 240
"""Points of the allocation and pending-gang series."""
_DEPART, _ARRIVE, _TICK, _CHECK = 0, 1, 2, 3
ESTIMATOR = "Kaplan-Meier"
"""How the percentiles of censored times are estimated (``survival``); the report names it."""

ProgressFn = Callable[[float], None]
"""Called with the share of the horizon replayed."""


def time_stats(samples: list[tuple[float, bool]]) -> dict[str, Any]:
    """Gangs, censored, Kaplan–Meier p50/p95/p99 and the restricted mean (up to the largest time seen)
    of (seconds, observed) samples; None where censoring hides a percentile."""
    km = kaplan_meier(samples)

    def r(v: float | None) -> float | None:
        return None if v is None else round(v, 3)
    tau = max((t for t, _o in samples), default=0.0)
    return {"gangs": km.samples, "censored": km.censored, "p50": r(km.quantile(50)), "p95": r(km.quantile(95)),
            "p99": r(km.quantile(99)), "restrictedMean": r(km.restricted_mean(tau)) if samples else None,
            "restrictedTo": r(tau)}


@dataclass
class _Gang:
    g: TraceGang
    pids: list[int]
    placed: int = 0
    left: int = 0
    """Pods that finished."""
    ready_at: float | None = None
    done_at: float | None = None
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
    start: float
    end: float
    offered_load: float
    gpu_seconds: dict[str, float]
    """useful, restore, lost, idle: GPU-seconds in the window; they add up to GPUs × window."""
    waits: dict[str, dict[str, Any]]
    completions: dict[str, dict[str, Any]]
    gang_waits: list[tuple[int, float, bool]]
    """Per measured gang in creation order: cards, seconds waited, censored (still waiting at the end)."""
    series: list[tuple[float, float, int]]
    """(time, allocation %, gangs waiting) on a fixed grid of the window."""
    pods_moved: int
    cards_disrupted: int
    repack: dict[str, int]
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def horizon(self) -> float:
        """Seconds measured (end − start)."""
        return self.end - self.start

    @property
    def days(self) -> float:
        return self.horizon / 86400

    def per_day(self, v: int) -> float:
        return v / self.days if self.days > 0 else 0.0

    def percent(self, part: str) -> float:
        """A share of GPUs × window, in percent (``useful``, ``restore``, ``lost``, ``idle``)."""
        capacity = self.gpus * self.horizon
        return round(100 * self.gpu_seconds[part] / capacity, 4) if capacity > 0 else 0.0

    @property
    def allocation_percent(self) -> float:
        """Cards held: useful + restore + lost."""
        capacity = self.gpus * self.horizon
        held = sum(self.gpu_seconds[k] for k in ("useful", "restore", "lost"))
        return round(100 * held / capacity, 4) if capacity > 0 else 0.0

    def restart_percent(self) -> float:
        """GPU-hours lost to restarts (restore time and the work a restart threw away) as a percent of the
        GPU-hours held."""
        held = sum(self.gpu_seconds[k] for k in ("useful", "restore", "lost"))
        lost = self.gpu_seconds["restore"] + self.gpu_seconds["lost"]
        return round(100 * lost / held, 6) if held > 0 else 0.0

    def summary(self) -> dict[str, Any]:
        """The headline numbers a sweep aggregates."""
        w8 = self.waits.get("8", {})
        return {"allocationPercent": self.allocation_percent, "usefulPercent": self.percent("useful"),
                "lostPercent": round(self.percent("lost") + self.percent("restore"), 4),
                "waitP95Minutes8": None if w8.get("p95") is None else w8["p95"] / 60,
                "waitMeanMinutes8": None if w8.get("restrictedMean") is None else w8["restrictedMean"] / 60,
                "restartGpuHoursPercent": self.restart_percent(),
                "waitP95Minutes": self.waits["all"]["p95"] / 60 if self.waits["all"]["p95"] is not None else None,
                "censoredGangs": self.waits["all"]["censored"],
                "cardsDisruptedPerDay": round(self.per_day(self.cards_disrupted), 6),
                "podsMovedPerDay": round(self.per_day(self.pods_moved), 6),
                "repackRuns": self.repack["runs"]}

    def to_dict(self) -> dict[str, Any]:
        return {"trace": self.trace, "label": self.label, "config": self.config, "nodes": self.nodes,
                "gpus": self.gpus, "gangs": self.gangs, "pods": self.pods,
                "window": {"startSeconds": self.start, "endSeconds": self.end, "horizonSeconds": self.horizon},
                "estimator": ESTIMATOR, "offeredLoad": round(self.offered_load, 6),
                "allocationPercent": self.allocation_percent,
                "gpuSeconds": {k: round(v, 3) for k, v in self.gpu_seconds.items()},
                "gpuPercent": {k: self.percent(k) for k in self.gpu_seconds},
                "waitSeconds": self.waits, "completionSeconds": self.completions,
                "podsMoved": self.pods_moved, "cardsDisrupted": self.cards_disrupted,
                "podsMovedPerDay": round(self.per_day(self.pods_moved), 6),
                "cardsDisruptedPerDay": round(self.per_day(self.cards_disrupted), 6),
                "repack": self.repack, "summary": self.summary(),
                "series": [list(s) for s in self.series],
                "gangWaits": [list(w) for w in self.gang_waits]}


class Replay:
    """One replay of ``trace`` under ``cfg``; ``run()`` returns the metrics."""

    def __init__(self, trace: Trace, cfg: ReplayConfig, progress: ProgressFn | None = None,
                 rescan: bool = False) -> None:
        self.trace = trace
        self.cfg = cfg
        self.progress = progress
        first = trace.gangs[0].created if trace.gangs else 0.0
        self.start_at = first + cfg.warmup
        """The measured window starts here (module docstring)."""
        self.stop_at = cfg.horizon if cfg.horizon is not None else math.inf
        if not self.stop_at > self.start_at:
            raise InputError(f"the horizon {self.stop_at:g} s ends before the measured window starts "
                             f"({self.start_at:g} s: first arrival + warm-up)", field="horizon")
        self.cluster = cluster_for(trace.nodes, cfg, rescan)  # the oracle's, nobinpack's or Volcano's binpack
        """``rescan``: the former retry path, every node per question (tests prove both give one result)."""
        self.builder = SnapshotBuilder(trace.nodes, serving=cfg.restart == "ServingGroupRecreate",
                                       shares=self.cluster.share_devices)
        self.run_spec = cfg.repack_run()
        self.gangs: list[_Gang] = []
        self.pod_gang: list[int] = []
        self.pod_name: list[str] = []
        self.pod_runtime: list[float] = []
        self.node: list[int] = []
        self.end: list[float] = []
        self.ver: list[int] = []
        self.work_from: list[float] = []
        """When the pod (re)starts working: placed, or restarted plus the restore time."""
        self.restored_from: list[float | None] = []
        """When its last restart began (its restore runs to ``work_from``); None: never restarted."""
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
                self.work_from.append(math.inf)
                self.restored_from.append(None)
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
        self.live = 0
        """Arrivals and departures still to come (stale departures of restarted pods not counted)."""
        self.now = 0.0
        self.area = 0.0
        self.restore_area = 0.0
        self.lost_area = 0.0
        self.changes: list[tuple[float, int | float, int]] = []
        """(time, GPUs allocated, gangs waiting) after each instant, for the series."""
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
        self.live += kind in (_DEPART, _ARRIVE)
        heapq.heappush(self.events, (t, kind, self.seq, a, b))

    def window(self, a: float, b: float) -> float:
        """Seconds of [a, b] inside the measured window as far as replayed (up to now)."""
        return max(0.0, min(b, self.now) - max(a, self.start_at))

    def run(self) -> ReplayResult:
        for k, gs in enumerate(self.gangs):
            if gs.g.created <= self.stop_at:
                self.push(gs.g.created, _ARRIVE, k)
        if self.cfg.policy == "interval" and self.cfg.interval <= self.stop_at:
            self.push(self.cfg.interval, _TICK)
        guess = self.stop_at if math.isfinite(self.stop_at) else max(self.trace.end, 1.0)
        shown = -1.0
        while self.events and self.events[0][0] <= self.stop_at and self.live > 0:
            t = self.events[0][0]
            self.advance(t)
            due: list[tuple[int, int, int]] = []
            while self.events and self.events[0][0] == t:
                _t, kind, _s, a, b = heapq.heappop(self.events)
                if kind == _DEPART:
                    if b == self.ver[a]:
                        self.live -= 1
                    self.depart(a, b)
                elif kind == _ARRIVE:
                    self.live -= 1
                    self.arrive(a)
                else:
                    due.append((kind, a, b))
            self.allocate(t)
            for kind, a, b in due:
                if kind == _TICK:
                    self.repack_run(t)
                    if t + self.cfg.interval <= self.stop_at:
                        self.push(t + self.cfg.interval, _TICK)
                else:
                    self.check(t, a, b)
            if self.cfg.policy == "pending":
                self.watch(t)
            self.changes.append((t, self.cluster.allocated, self.waiting))
            if self.progress is not None and min(t / guess, 1.0) - shown >= 0.005:
                shown = min(t / guess, 1.0)
                self.progress(shown)
        self.advance(self.stop_at if math.isfinite(self.stop_at) else max(self.now, self.start_at))
        if self.progress is not None:
            self.progress(1.0)
        return self.result()

    def advance(self, t: float) -> None:
        """Integrate the GPUs held over the window up to ``t``."""
        self.area += self.cluster.allocated * max(0.0, t - max(self.now, self.start_at))
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
        gs.left += 1
        if gs.left == len(gs.pids):
            gs.done_at = self.now

    # ---- allocate ------------------------------------------------------------------------------

    def start(self, pid: int, node: int, t: float) -> None:
        gs = self.gangs[self.pod_gang[pid]]
        self.cluster.take(node, self.cluster.sim_pod(gs.g))
        self.node[pid] = node
        gs.placed += 1
        self.work_from[pid] = t
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
        # the gangs an admit goal names are Pending VCJobs; the running gangs carry the restart policy
        snap = self.builder.build(self.running(), waiting, restart=self.cfg.restart)
        self.snapshot_seconds += time.perf_counter() - t0
        planned = (plan_moves(snap, self.run_spec, self.cfg) if gangs is None
                   else plan_for_pending(snap, self.run_spec, self.cfg, gangs))
        self.record(planned)
        if planned.rule_breaks:  # a peer's plan that breaks optplan's rules is not carried out (counted)
            self.repack["refusedPlans"] += 1
            self.last_run = (cl.version, False)
            return
        self.apply(planned, t, snap)
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

    def apply(self, planned: Planned, t: float, snap: Snapshot) -> None:
        """Move the pods: every source gives back first, then every receiver takes (``take`` raises
        PlanInvalidError if a node would be over-committed); then the pods the moves restart (the
        workloads' restart policy, Repack's rule) restart (``restart``)."""
        cl = self.cluster
        moves = []
        for m in planned.moves:
            pid = self.pid_of[m.pod.split("/", 1)[1]]
            if cl.names[self.node[pid]] != m.from_node:
                raise AssertionError(f"{m.pod} is not on {m.from_node}")  # pragma: no cover
            moves.append((pid, cl.index[m.to_node]))
        for pid, _to in moves:
            cl.give_back(self.node[pid], cl.sim_pod(self.gangs[self.pod_gang[pid]].g))
        for pid, to in moves:
            cl.take(to, cl.sim_pod(self.gangs[self.pod_gang[pid]].g))
            self.node[pid] = to
        restarted = {self.pid_of[key.split("/", 1)[1]] for key in restarted_pods(snap, self.run_spec,
                                                                                  [m.pod for m in planned.moves])}
        for pid in sorted(restarted):
            self.restart(pid, t)
            self.disrupted += self.gangs[self.pod_gang[pid]].g.gpu
        self.moved += len(moves)

    def restart(self, pid: int, t: float) -> None:
        """Pod ``pid`` restarts now: its restore so far is counted, the work since its last checkpoint is
        lost, it restores for ``restart_delay`` and then does the rest of its work."""
        gpu = self.gangs[self.pod_gang[pid]].g.gpu
        begun = self.restored_from[pid]
        if begun is not None:
            self.restore_area += gpu * self.window(begun, min(self.work_from[pid], t))
        progress = max(0.0, t - self.work_from[pid])
        every = self.cfg.checkpoint
        kept = progress if every == 0 else 0.0 if every is None else math.floor(progress / every) * every
        self.lost_area += gpu * self.window(self.work_from[pid] + kept, t)
        remaining = self.end[pid] - self.work_from[pid] - kept
        self.restored_from[pid] = t
        self.work_from[pid] = t + self.cfg.restart_delay
        self.end[pid] = self.work_from[pid] + remaining
        self.live -= 1  # its departure event is stale now
        self.ver[pid] += 1
        self.push(self.end[pid], _DEPART, pid, self.ver[pid])

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
        if gs.ready_at is None and t + self.cfg.interval <= self.stop_at:
            self.schedule_check(t + self.cfg.interval, k)  # still waiting: judged again after the cooldown

    # ---- result --------------------------------------------------------------------------------

    def series(self, start: float, end: float) -> list[tuple[float, float, int]]:
        """The state after the last instant at or before each point of the window's grid."""
        times = [c[0] for c in self.changes]
        out = []
        for k in range(SAMPLES + 1):
            at = start + k * (end - start) / SAMPLES
            i = bisect.bisect_right(times, at) - 1
            alloc, waiting = (self.changes[i][1], self.changes[i][2]) if i >= 0 else (0, 0)
            out.append((round(at, 3), round(100 * alloc / self.cluster.total_gpus, 4), waiting))
        return out

    def result(self) -> ReplayResult:
        start, end = self.start_at, max(self.now, self.start_at)
        for pid, begun in enumerate(self.restored_from):
            if begun is not None:  # restores still under way at the end count up to it
                self.restore_area += self.gangs[self.pod_gang[pid]].g.gpu * self.window(begun, self.work_from[pid])
        waits: dict[str, list[tuple[float, bool]]] = {b: [] for b in bucket_labels()}
        done: dict[str, list[tuple[float, bool]]] = {b: [] for b in bucket_labels()}
        gang_waits: list[tuple[int, float, bool]] = []
        for gs in self.gangs:
            g = gs.g
            if not start <= g.created <= end:
                continue
            b = gang_bucket(g.cards)
            w = (gs.ready_at if gs.ready_at is not None else end) - g.created
            waits[b].append((w, gs.ready_at is not None))
            done[b].append(((gs.done_at if gs.done_at is not None else end) - g.created, gs.done_at is not None))
            gang_waits.append((g.cards, round(w, 3), gs.ready_at is None))

        def by_size(samples: dict[str, list[tuple[float, bool]]]) -> dict[str, dict[str, Any]]:
            out = {b: time_stats(xs) for b, xs in samples.items() if xs}
            out["all"] = time_stats([x for xs in samples.values() for x in xs])
            return out

        repack = dict(self.repack)
        repack.update({f"status:{k}": v for k, v in sorted(self.statuses.items())})
        capacity = self.cluster.total_gpus * (end - start)
        gpu_seconds = {"useful": self.area - self.restore_area - self.lost_area, "restore": self.restore_area,
                       "lost": self.lost_area, "idle": capacity - self.area}
        return ReplayResult(
            trace=self.trace.name, config=config_dict(self.cfg), label=self.cfg.label(), nodes=len(self.trace.nodes),
            gpus=self.cluster.total_gpus, gangs=len(self.gangs), pods=len(self.pod_name), start=start, end=end,
            offered_load=self.trace.offered_load(start, end), gpu_seconds=gpu_seconds, waits=by_size(waits),
            completions=by_size(done), gang_waits=gang_waits, series=self.series(start, end),
            pods_moved=self.moved, cards_disrupted=self.disrupted, repack=repack,
            timings={"planSeconds": round(self.plan_seconds, 3), "snapshotSeconds": round(self.snapshot_seconds, 3)})


def config_dict(cfg: ReplayConfig) -> dict[str, Any]:
    return {"policy": cfg.policy, "intervalSeconds": cfg.interval, "pendingAfterSeconds": cfg.pending_after,
            "planner": cfg.planner, "scope": dict(cfg.scope), "maxPerRun": dict(cfg.max_per_run),
            "restartDelaySeconds": cfg.restart_delay, "restart": cfg.restart,
            "checkpointSeconds": cfg.checkpoint, "warmupSeconds": cfg.warmup, "timeLimit": cfg.time_limit,
            "seed": cfg.seed, "horizonSeconds": cfg.horizon,
            "binpack": cfg.weights.model_dump(by_alias=True)}


def replay(trace: Trace, cfg: ReplayConfig, progress: ProgressFn | None = None) -> ReplayResult:
    """Replay ``trace`` under ``cfg`` (see the module docstring)."""
    return Replay(trace, cfg, progress).run()
