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
from collections.abc import Callable, Iterator, Mapping, Sequence
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
from optplan.experiments.replay.snapshot import Running, SnapshotBuilder, replica_name
from optplan.experiments.replay.survival import kaplan_meier
from optplan.experiments.replay.tenants import TYPES, Book, QueuedSnapshots, Tenancy, plan_victims
from optplan.experiments.replay.trace import Trace, TraceGang, bucket_labels, gang_bucket
from optplan.experiments.sim.online import resources_of
from optplan.models.snapshot import Snapshot

Shape = tuple[int, int, int, tuple[str, ...]]
Samples = dict[str, list[tuple[float, bool]]]
"""Per gang size class, (seconds, observed) per gang."""
SAMPLES = 240
"""Points of the allocation and pending-gang series."""
_DEPART, _ARRIVE, _TICK, _CHECK = 0, 1, 2, 3
VICTIM_RETRY = 60.0
"""Queues mode: seconds before placement looks again for the victims of a gang that found none (Volcano
looks every cycle; the snapshot costs, so the replay spaces its looks)."""
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


class Events:
    """The replays' clock (``Replay`` here, ``window.Window``'s cycles): timed events ``(kind, a, b)``, taken
    by time, then kind (the caller's numbering says which kind goes first at one instant), then the order
    they were pushed in. ``instants`` is the one event loop: each instant in turn, with the events due then —
    those pushed for that same instant while they are handled included."""

    def __init__(self) -> None:
        self.heap: list[tuple[float, int, int, int, int]] = []
        self.seq = 0

    def push(self, t: float, kind: int, a: int = 0, b: int = 0) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (t, kind, self.seq, a, b))

    def instants(self, until: float, going: Callable[[], bool] = lambda: True
                 ) -> Iterator[tuple[float, Iterator[tuple[int, int, int]]]]:
        """(time, its events) for each instant up to ``until`` while ``going()``; an event pushed for an
        instant already given is handled as the next instant, at the same time."""
        while self.heap and self.heap[0][0] <= until and going():
            t = self.heap[0][0]
            yield t, self._at(t)

    def _at(self, t: float) -> Iterator[tuple[int, int, int]]:
        while self.heap and self.heap[0][0] == t:
            _t, kind, _s, a, b = heapq.heappop(self.heap)
            yield kind, a, b


@dataclass
class _Gang:
    g: TraceGang
    pids: list[int]
    placed: int = 0
    """Pods on a node or gone (an evicted pod is not placed until it is placed again)."""
    fresh: int = 0
    """Pods of ``pids`` taken for a first placement (the next is ``pids[fresh]``)."""
    back: list[int] = field(default_factory=list)
    """Evicted pods waiting to be placed again, first out first."""
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

    queues: dict[str, Any] | None = None
    """``--queues``: the tree, the mapping and the figures per queue type (``Replay.queue_figures``)."""

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
        w8, c8 = self.waits.get("8", {}), self.completions.get("8", {})
        return {"allocationPercent": self.allocation_percent, "usefulPercent": self.percent("useful"),
                "lostPercent": round(self.percent("lost") + self.percent("restore"), 4),
                "waitP95Minutes8": None if w8.get("p95") is None else w8["p95"] / 60,
                "waitMeanMinutes8": None if w8.get("restrictedMean") is None else w8["restrictedMean"] / 60,
                "completionMeanMinutes8": None if c8.get("restrictedMean") is None else c8["restrictedMean"] / 60,
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
                "gangWaits": [list(w) for w in self.gang_waits],
                **({} if self.queues is None else {"queues": self.queues})}


class Replay:
    """One replay of ``trace`` under ``cfg``; ``run()`` returns the metrics."""

    def __init__(self, trace: Trace, cfg: ReplayConfig, progress: ProgressFn | None = None,
                 rescan: bool = False, tenancy: Tenancy | None = None) -> None:
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
        self.named: dict[str, int] = {}
        """The last snapshot's pod names -> the pods (``running``)."""
        self.gang_at = {gs.g.name: k for k, gs in enumerate(self.gangs)}
        self.queues: dict[tuple[Shape, int], deque[int]] = {}
        """Gangs waiting for their gang turn, one queue per (pod shape, minMember), each in Volcano's order
        (creation, name: the trace's order, which is gang index order)."""
        self.waiting = 0
        self.extras: list[int] = []
        """Ready gangs with pods not placed yet, same order."""
        self.new: list[int] = []
        """Gangs arrived since the last allocate."""
        self.events = Events()
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
        self.tenancy = tenancy
        """``--queues``: each gang's queue and priority; None: one queue, no priorities (the rest below unused)."""
        if tenancy is not None:
            if len(tenancy.leaf) != len(self.gangs):
                raise InputError("the queue mapping is for another trace", field="queues")
            self.book = Book(tenancy, trace.nodes)
            self.snaps = QueuedSnapshots(self.builder, tenancy, {gs.g.name: k for k, gs in enumerate(self.gangs)})
        self.started_at = [0.0] * len(self.pod_name)
        """When the pod was last placed (victim order: the latest started first)."""
        self.remaining: list[float | None] = [None] * len(self.pod_name)
        """An evicted pod's work still to do; None: never evicted since its last placement."""
        self.leaf_prio: dict[str, dict[int, int]] = {}
        """Queues mode: per leaf queue, GPUs of running pods per job priority (may a waiting gang preempt there?)."""
        self.leaf_spare: dict[str, dict[int, int]] = {}
        """Queues mode: the same, less one pod of each gang (what preempt may take: ``may_gain``)."""
        self.on_nodes = [0] * len(self.gangs)
        """Queues mode: per gang, its pods on a node."""
        self.type_gpus = {k: 0 for k in TYPES}
        self.type_area = {k: 0.0 for k in TYPES}
        self.type_restore = {k: 0.0 for k in TYPES}
        self.type_lost = {k: 0.0 for k in TYPES}
        self.evictions = {k: {"preempt": 0, "reclaim": 0, "repack": 0} for k in TYPES}
        """Pods of each queue type evicted by preempt or reclaim, and pods Repack restarted."""
        self.victim_calls = 0
        self.victim_seconds = 0.0
        self.victim_tried: dict[int, float] = {}
        """Queues mode: gang -> when placement last looked for its victims."""

    # ---- events --------------------------------------------------------------------------------

    def push(self, t: float, kind: int, a: int = 0, b: int = 0) -> None:
        self.live += kind in (_DEPART, _ARRIVE)
        self.events.push(t, kind, a, b)

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
        for t, now in self.events.instants(self.stop_at, lambda: self.live > 0):
            self.advance(t)
            due: list[tuple[int, int, int]] = []
            for kind, a, b in now:
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
        dt = max(0.0, t - max(self.now, self.start_at))
        self.area += self.cluster.allocated * dt
        if self.tenancy is not None:
            for k, v in self.type_gpus.items():
                self.type_area[k] += v * dt
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
        if self.tenancy is not None:
            self.account(self.pod_gang[pid], -1)
        self.node[pid] = -2  # gone
        self.forget(gs.g)
        gs.left += 1
        if gs.left == len(gs.pids):
            gs.done_at = self.now

    # ---- allocate ------------------------------------------------------------------------------

    def start(self, pid: int, node: int, t: float) -> None:
        gs = self.gangs[self.pod_gang[pid]]
        self.cluster.take(node, self.cluster.sim_pod(gs.g))
        self.node[pid] = node
        gs.placed += 1
        left = self.remaining[pid]
        if left is None:
            self.work_from[pid] = t
            self.end[pid] = t + self.pod_runtime[pid]
        else:  # placed again after an eviction: it restores, then does the rest of its work
            self.remaining[pid] = None
            self.restored_from[pid] = t
            self.work_from[pid] = t + self.cfg.restart_delay
            self.end[pid] = self.work_from[pid] + left
        if self.tenancy is not None:
            self.started_at[pid] = t
            self.account(self.pod_gang[pid], 1)
        self.ver[pid] += 1
        self.push(self.end[pid], _DEPART, pid, self.ver[pid])

    def next_pod(self, gs: _Gang) -> int:
        """The gang's next pod to place: an evicted one first, else the next of its pods."""
        if gs.back:
            return gs.back.pop(0)
        gs.fresh += 1
        return gs.pids[gs.fresh - 1]

    def place_one(self, gs: _Gang, t: float) -> bool:
        pod = self.cluster.sim_pod(gs.g)
        if self.tenancy is not None:
            k = self.pod_gang[gs.pids[0]]
            if not self.book.fits(self.tenancy.leaf[k], self.request(gs.g)):
                return False
        i = self.cluster.best(pod)
        if i < 0:
            return False
        self.start(self.next_pod(gs), i, t)
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

        if self.tenancy is not None:
            self.allocate_queued(t, retry, new)
            return

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
                if self.place_one(gs, t) and self.unplaced(gs):
                    nxt.append(k)
            active = nxt
        self.extras = [k for k in self.extras if self.unplaced(self.gangs[k])]

    @staticmethod
    def unplaced(gs: _Gang) -> bool:
        """Pods of the gang still to place (first placements, or evicted ones)."""
        return gs.fresh < len(gs.pids) or bool(gs.back)

    # ---- queues (``--queues``) -------------------------------------------------------------------

    def request(self, g: TraceGang) -> dict[str, int]:
        return resources_of(g.cpu, g.memory, g.gpu)

    def account(self, k: int, sign: int) -> None:
        """One pod of gang k placed (+1) or off its node (-1): its queue's allocation, its type's GPUs and
        the running pods per priority of its queue."""
        ten = self.tenancy
        assert ten is not None
        g = self.gangs[k].g
        self.book.add(ten.leaf[k], self.request(g), sign)
        self.type_gpus[ten.kind[k]] += sign * g.gpu
        prio = self.leaf_prio.setdefault(ten.leaf[k], {})
        prio[ten.value[k]] = prio.get(ten.value[k], 0) + sign * g.gpu
        before = self.on_nodes[k]
        self.on_nodes[k] += sign
        spare = self.leaf_spare.setdefault(ten.leaf[k], {})
        spare[ten.value[k]] = spare.get(ten.value[k], 0) + (max(before + sign - 1, 0) - max(before - 1, 0)) * g.gpu

    def allocate_queued(self, t: float, retry: bool, new: list[int]) -> None:
        """Volcano's allocate with queues (``tenants``): the first queue in the capacity plugin's order gives
        its first job (higher priority, then creation) a gang turn — within realCapability of its queue and
        every ancestor and the room of the cluster, all its minimum or nothing —; the order is taken again
        after each start. Without room freed only the new gangs can start. Then the ready gangs' other pods,
        then placement's preempt and reclaim for the gangs still waiting."""
        ten = self.tenancy
        assert ten is not None
        cands = [k for q in self.queues.values() for k in q] if retry else new
        by_leaf: dict[str, deque[int]] = {}
        for k in sorted(cands, key=lambda k: (-ten.value[k], k)):
            if self.in_queue(k):
                by_leaf.setdefault(ten.leaf[k], deque()).append(k)
        failed: dict[Shape, int] = {}
        capped: dict[tuple[str, Shape], int] = {}
        started = False
        order = self.book.order(by_leaf)
        while order:
            leaf = order[0]
            k = by_leaf[leaf].popleft()
            if not by_leaf[leaf]:
                del by_leaf[leaf]
            if self.gang_turn(k, t, failed, capped):
                started = True
                order = self.book.order(by_leaf)
            elif leaf not in by_leaf:
                order.pop(0)
        if started:
            self.extras.sort()
        if retry or started:
            self.fill_extras(t)
        self.evict_for_waiting(t)

    def in_queue(self, k: int) -> bool:
        g = self.gangs[k].g
        return k in self.queues.get((g.shape, g.min_member), ())

    def gang_turn(self, k: int, t: float, failed: dict[Shape, int], capped: dict[tuple[str, Shape], int]) -> bool:
        """Gang k's turn in queues mode: all the pods its minimum still needs, or nothing."""
        ten = self.tenancy
        assert ten is not None
        gs = self.gangs[k]
        need = gs.g.min_member - gs.placed
        shape, leaf = gs.g.shape, ten.leaf[k]
        if failed.get(shape, math.inf) <= need or capped.get((leaf, shape), math.inf) <= need:
            return False
        if not self.book.fits(leaf, self.request(gs.g), need):
            capped[leaf, shape] = need
            return False
        if self.cluster.room(self.cluster.sim_pod(gs.g)) < need:
            failed[shape] = need
            return False
        for _ in range(need):
            if not self.place_one(gs, t):
                raise AssertionError("room said the gang fits")  # pragma: no cover
        self.admitted(k, t)
        return True

    def admitted(self, k: int, t: float) -> None:
        """Gang k has its minimum: out of the waiting queues, its other pods are extras."""
        gs = self.gangs[k]
        if gs.ready_at is None:
            gs.ready_at = t
        gs.suspect_since = None
        self.queues[gs.g.shape, gs.g.min_member].remove(k)
        self.waiting -= 1
        if self.unplaced(gs) and k not in self.extras:
            self.extras.append(k)

    def may_evict(self, k: int) -> bool:
        """Can placement's preempt or reclaim help gang k, counting GPUs only? Not a gang whose class never
        preempts; else (preempt) jobs of lower priority in its queue hold GPUs that, with the free ones and
        its queue's headroom, make its minimum, or (reclaim) ``tenants.Book.may_reclaim``."""
        ten = self.tenancy
        assert ten is not None
        if ten.never[k]:
            return False
        g = self.gangs[k].g
        leaf, v = ten.leaf[k], ten.value[k]
        need = g.min_member - self.gangs[k].placed
        want = need * g.gpu * 1000
        free = round((self.cluster.total_gpus - self.cluster.allocated) * 1000)  # whole GPUs: no --shared here
        lower = 1000 * sum(n for p, n in self.leaf_prio.get(leaf, {}).items() if p < v)
        if lower > 0 and free + lower >= want and self.book.headroom(leaf) + lower >= want:
            return True
        return self.book.may_reclaim(leaf, self.request(g), need, free)

    def may_gain(self, k: int, top: Mapping[str, int], sources: set[str]) -> bool:
        """Can placement place a pod of gang k in a call whose due gangs' highest priority per leaf is ``top``
        and whose reclaim sources are ``sources``, counting GPUs only? Its minimum within the free GPUs plus
        what its victims may free: by preempt, the pods of its queue's gangs the snapshot keeps (priority
        below ``top``; any, when its queue is a source) but one pod of each (its gang
        tier keeps a gang at minMember ≥ 1, drf never takes a job's last pod: its share would then be 0); by
        reclaim, ``tenants.Book.reclaimable``; and within its queues' capabilities with those victims gone
        (``tenants.Book.room_with``: a victim frees the room of each queue it is in). A gang that fails it
        gets nothing from placement (not even a placement without victims)."""
        ten = self.tenancy
        assert ten is not None
        g = self.gangs[k].g
        leaf = ten.leaf[k]
        want = (g.min_member - self.gangs[k].placed) * g.gpu * 1000
        free = round((self.cluster.total_gpus - self.cluster.allocated) * 1000)
        bar = math.inf if leaf in sources else top[leaf]
        spare = 1000 * sum(n for p, n in self.leaf_spare.get(leaf, {}).items() if p < bar)
        taken = self.book.reclaimable(leaf, self.request(g))
        return free + spare + sum(taken.values()) >= want and self.book.room_with(leaf, spare, taken) >= want

    def evict_for_waiting(self, t: float) -> None:
        """Placement's greedy with preempt and reclaim for the waiting gangs that may evict (none of whose
        pods run; each looked at again ``VICTIM_RETRY`` seconds later at the soonest); its victims are evicted
        (``evict``) and its bindings placed. Placement is asked only about those that pass ``may_gain`` on the
        call's snapshot (none: not asked): the others would get nothing from it, and a job that gets nothing
        leaves the others' plan as it is (its tentative evictions are discarded)."""
        ten = self.tenancy
        assert ten is not None
        due = [k for q in self.queues.values() for k in q
               if self.gangs[k].placed == 0 and t - self.victim_tried.get(k, -math.inf) >= VICTIM_RETRY
               and self.may_evict(k)]
        if not due:
            return
        due.sort()
        for k in due:
            self.victim_tried[k] = t
        t0 = time.perf_counter()
        top: dict[str, int] = {}
        for k in due:
            top[ten.leaf[k]] = max(top.get(ten.leaf[k], ten.value[k]), ten.value[k])
        sources = self.book.reclaim_sources()

        def keep(j: int) -> bool:  # may gang j give victims to a due gang? (the others are summed up)
            leaf = ten.leaf[j]
            return leaf in sources or ten.value[j] < top.get(leaf, -math.inf)
        asked = [k for k in due if self.may_gain(k, top, sources)]
        if not asked:
            self.victim_seconds += time.perf_counter() - t0
            return
        running = [(r, self.started_at[self.named[r.name]]) for r in self.running()]
        snap = self.snaps.build(running, [self.gangs[k].g for k in asked], keep)
        plan = plan_victims(snap, self.cfg.weights, t)
        self.victim_calls += 1
        self.victim_seconds += time.perf_counter() - t0
        index = self.snaps.gang_index
        admitted = [jp for jp in plan.jobs if jp.admitted]
        # every victim first, a waiting job's too (an earlier cycle evicted them): a job of a later cycle may
        # bind where another job's victim left
        for jp in plan.jobs:
            for v in jp.victims:
                pid = self.named[v.name]
                if self.node[pid] >= 0:
                    self.evict(pid, v.reason, t)
        for jp in admitted:
            k = index[jp.name]
            gs = self.gangs[k]
            for b in sorted(jp.bindings, key=lambda b: (b.task, b.index)):
                self.start(self.next_pod(gs), self.cluster.index[b.node], t)
            if gs.placed >= gs.g.min_member and self.in_queue(k):
                self.admitted(k, t)
        self.extras.sort()

    def evict(self, pid: int, reason: str, t: float) -> None:
        """Placement evicts pod ``pid`` (preempt or reclaim): it stops (work since its last checkpoint lost),
        leaves its node and waits to be placed again, restoring first; under ``RestartJob`` / ``RestartTask``
        its gang's other running pods restart where they are. A gang left below its minimum waits for a gang
        turn again."""
        ten = self.tenancy
        assert ten is not None
        k = self.pod_gang[pid]
        gs = self.gangs[k]
        self.remaining[pid] = self.stop_work(pid, t)
        self.restored_from[pid] = None
        self.cluster.give_back(self.node[pid], self.cluster.sim_pod(gs.g))
        self.account(k, -1)
        self.node[pid] = -1
        self.forget(gs.g)
        self.live -= 1  # its departure event is stale now
        self.ver[pid] += 1
        gs.placed -= 1
        gs.back.append(pid)
        self.evictions[ten.kind[k]][reason] += 1
        if self.cfg.restart in ("RestartJob", "RestartTask", "ServingGroupRecreate"):
            for other in gs.pids:
                if self.node[other] >= 0:
                    self.restart(other, t)
        if gs.placed < gs.g.min_member and not self.in_queue(k):
            q = self.queues.setdefault((gs.g.shape, gs.g.min_member), deque())
            q.insert(bisect.bisect_left(list(q), k), k)
            self.waiting += 1
            if k in self.extras:
                self.extras.remove(k)
        elif k not in self.extras and gs.placed >= gs.g.min_member:
            self.extras.append(k)

    # ---- Repack --------------------------------------------------------------------------------

    def running(self) -> list[Running]:
        """The running pods as the next snapshot names them: each gang's as its VCJob's replicas, numbered
        from 0 in pod order (``snapshot.replica_name``); ``named`` maps the names back to the pods."""
        names = self.cluster.names
        out = []
        self.named = {}
        count: dict[int, int] = {}
        for p in range(len(self.node)):
            if self.node[p] >= 0:
                k = self.pod_gang[p]
                count[k] = i = count.get(k, -1) + 1
                r = Running(replica_name(self.gangs[k].g.name, i), self.gangs[k].g, names[self.node[p]])
                self.named[r.name] = p
                out.append(r)
        return out

    def forget(self, g: TraceGang) -> None:
        """A pod of gang g left its node: its siblings' names may shift (``running``), drop their cached pods."""
        for i in range(len(g.pods)):
            self.builder.forget(replica_name(g.name, i))
            if self.tenancy is not None:
                self.snaps.forget(replica_name(g.name, i))

    def finished(self, running: Sequence[Running]) -> dict[str, int]:
        """Running gang -> its pods that finished (gangs with none left out): what the snapshot's PodGroups
        and VCJobs no longer count (``snapshot.left_minimum``)."""
        out: dict[str, int] = {}
        for r in running:
            if r.gang.name not in out:
                out[r.gang.name] = self.gangs[self.gang_at[r.gang.name]].left
        return {name: n for name, n in out.items() if n}

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
        running = self.running()
        snap = self.builder.build(running, waiting, restart=self.cfg.restart, finished=self.finished(running))
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
            pid = self.named[m.pod.split("/", 1)[1]]
            if cl.names[self.node[pid]] != m.from_node:
                raise AssertionError(f"{m.pod} is not on {m.from_node}")  # pragma: no cover
            share = snap.pods[m.pod].gpu_share
            held = share.devices[0] if share is not None and share.devices else None
            to_device = m.to_devices[0] if m.to_devices else None
            moves.append((pid, cl.index[m.to_node], held, to_device))
        for pid, _to, held, _d in moves:
            cl.give_back(self.node[pid], cl.sim_pod(self.gangs[self.pod_gang[pid]].g), held)
        # shares on the devices their moves name first, as the validator applies them; whole cards after
        for pid, to, _held, to_device in sorted(moves, key=lambda mv: mv[3] is None):
            cl.take(to, cl.sim_pod(self.gangs[self.pod_gang[pid]].g), to_device)
            self.node[pid] = to
        restarted = {self.named[key.split("/", 1)[1]] for key in restarted_pods(snap, self.run_spec,
                                                                                  [m.pod for m in planned.moves])}
        for pid in sorted(restarted):
            self.restart(pid, t)
            self.disrupted += self.gangs[self.pod_gang[pid]].g.gpu
            if self.tenancy is not None:
                self.evictions[self.tenancy.kind[self.pod_gang[pid]]]["repack"] += 1
        self.moved += len(moves)

    def stop_work(self, pid: int, t: float) -> float:
        """Pod ``pid`` stops working now (a restart or an eviction): its restore so far is counted, the work
        since its last checkpoint is lost; returns the work it still has to do."""
        gpu = self.gangs[self.pod_gang[pid]].g.gpu
        begun = self.restored_from[pid]
        restore = lost = 0.0
        if begun is not None:
            restore = gpu * self.window(begun, min(self.work_from[pid], t))
        progress = max(0.0, t - self.work_from[pid])
        every = self.cfg.checkpoint
        kept = progress if every == 0 else 0.0 if every is None else math.floor(progress / every) * every
        lost = gpu * self.window(self.work_from[pid] + kept, t)
        self.restore_area += restore
        self.lost_area += lost
        if self.tenancy is not None:
            kind = self.tenancy.kind[self.pod_gang[pid]]
            self.type_restore[kind] += restore
            self.type_lost[kind] += lost
        return self.end[pid] - self.work_from[pid] - kept

    def restart(self, pid: int, t: float) -> None:
        """Pod ``pid`` restarts now: its restore so far is counted, the work since its last checkpoint is
        lost, it restores for ``restart_delay`` and then does the rest of its work."""
        remaining = self.stop_work(pid, t)
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
            if gs.g.cards < self.cfg.pending_cards:  # a trigger on large gangs: the others are not watched
                continue
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
        running = self.running()
        snap = self.builder.build(running, due, finished=self.finished(running))
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
                restore = self.gangs[self.pod_gang[pid]].g.gpu * self.window(begun, self.work_from[pid])
                self.restore_area += restore
                if self.tenancy is not None:
                    self.type_restore[self.tenancy.kind[self.pod_gang[pid]]] += restore
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
            timings={"planSeconds": round(self.plan_seconds, 3), "snapshotSeconds": round(self.snapshot_seconds, 3),
                     **({} if self.tenancy is None else {"victimSeconds": round(self.victim_seconds, 3)})},
            queues=None if self.tenancy is None else self.queue_figures(start, end, by_size))

    def queue_figures(self, start: float, end: float, by_size: Callable[[Samples], dict[str, dict[str, Any]]]
                      ) -> dict[str, Any]:
        """Per queue type: GPU-seconds useful / restore / lost and useful % of the cluster's GPU time, waits
        and completions per gang size (Kaplan–Meier, as the whole replay's), evictions by cause."""
        ten = self.tenancy
        assert ten is not None
        capacity = self.cluster.total_gpus * (end - start)
        out: dict[str, Any] = {}
        for kind in TYPES:
            waits: dict[str, list[tuple[float, bool]]] = {b: [] for b in bucket_labels()}
            done: dict[str, list[tuple[float, bool]]] = {b: [] for b in bucket_labels()}
            gangs = 0
            for k, gs in enumerate(self.gangs):
                g = gs.g
                if ten.kind[k] != kind or not start <= g.created <= end:
                    continue
                gangs += 1
                b = gang_bucket(g.cards)
                ready, done_at = gs.ready_at, gs.done_at
                waits[b].append(((ready if ready is not None else end) - g.created, ready is not None))
                done[b].append(((done_at if done_at is not None else end) - g.created, done_at is not None))
            held = self.type_area[kind]
            useful = held - self.type_restore[kind] - self.type_lost[kind]

            def pct(x: float) -> float:
                return round(100 * x / capacity, 4) if capacity > 0 else 0.0
            out[kind] = {"gangs": gangs,
                         "gpuSeconds": {"useful": round(useful, 3), "restore": round(self.type_restore[kind], 3),
                                        "lost": round(self.type_lost[kind], 3)},
                         "usefulPercent": pct(useful), "heldPercent": pct(held),
                         "waitSeconds": by_size(waits) if gangs else {},
                         "completionSeconds": by_size(done) if gangs else {},
                         "evictions": dict(self.evictions[kind])}
        return {**ten.describe(), "placementCalls": self.victim_calls, "byType": out}


def config_dict(cfg: ReplayConfig) -> dict[str, Any]:
    return {"policy": cfg.policy, "intervalSeconds": cfg.interval, "pendingAfterSeconds": cfg.pending_after,
            "planner": cfg.planner, "scope": dict(cfg.scope), "maxPerRun": dict(cfg.max_per_run),
            "restartDelaySeconds": cfg.restart_delay, "restart": cfg.restart,
            "checkpointSeconds": cfg.checkpoint, "warmupSeconds": cfg.warmup, "timeLimit": cfg.time_limit,
            "seed": cfg.seed, "horizonSeconds": cfg.horizon,
            "binpack": cfg.weights.model_dump(by_alias=True),
            **({"pendingCards": cfg.pending_cards} if cfg.pending_cards else {})}


def replay(trace: Trace, cfg: ReplayConfig, progress: ProgressFn | None = None,
           tenancy: Tenancy | None = None) -> ReplayResult:
    """Replay ``trace`` under ``cfg`` (see the module docstring); ``tenancy``: its gangs in queues
    (``tenants``; ``optplan replay --queues``)."""
    return Replay(trace, cfg, progress, tenancy=tenancy).run()
