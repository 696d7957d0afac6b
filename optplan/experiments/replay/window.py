"""The preempt window and the large-job submission throttle over time (``optplan replay --throttle``): a
replay of the trace with priorities, Volcano's scheduling cycles and its preempt, with and without the
seed's throttle (seed 002 §6.4.2; the rule is ``optplan.solvers.placement.throttle``'s, read here).

**Priorities** (the traces have none; ``priorities``): a gang of at least ``large_cards`` GPUs is a
large-job (P800); of the others a seeded ``debug_share`` are debug-job (P50), the rest normal-job (P100).
The seed's large jobs are "32+ GPU"; the openb gangs have 16 cards at most, so the default is 8 (a whole
8-GPU node or more). One queue holds every job: the throttle is per queue, so every small submission is
in the large job's queue (the most it can hold).

**Cycles.** Volcano schedules every ``cycle`` seconds (its ``schedulePeriod``, default 1 s); jobs arrive
and pods leave in between and are seen at the next cycle (a cycle is simulated only when something
happened since the last one: an idle cycle changes nothing). The events run on the replay's event loop
(``engine.Events``, the one ``engine.Replay`` runs on): a cycle is an event of its own kind, taken after the
departures, terminations and arrivals of its instant, where the replay allocates after every instant.
A cycle is allocate, then preempt:

- *allocate*: waiting gangs by priority (higher first), then submission order; each gets its minimum or
  nothing on the free cards (binpack, as ``cluster``'s docstring), a gang of a priority, shape and size
  that failed ends that kind's turn in the cycle; then pods beyond the minimum of started gangs, where
  they fit (the rest wait).
- *preempt*, for each large gang allocate did not start, in order: if the free cards plus those of
  victims still terminating hold its minimum, it is pipelined and waits — and a pipelined job reserves
  nothing: a later gang of this cycle or the next is bound on any card already free (Volcano's allocate
  binds on a node's idle resources; pipelining counts its future idle). Else victims are evicted, only
  just enough: pods of lower-priority gangs (large jobs never preempt each other), lowest priority first,
  then the latest started (LIFO), on the nodes where the fewest cards must go; none if the minimum still
  would not fit. A victim pod frees its cards a seeded uniform time within ``grace`` seconds later (it
  stops on SIGTERM or at its grace period); it restarts from scratch as a pod of its gang that waits until
  the large gang has started (the seed, §6.4.1: evicted tasks queue again behind the large job), then
  competes as any pod beyond a gang's minimum.

This is the seed's window: victims free their cards one by one, the large gang binds only once its whole
minimum fits, and a small gang bound on the cards freed first sends the large gang back to preempt.

**Throttle** (``throttle``): preempt evicting for a large gang puts the queue in waiting mode
(``throttle.enters``); while it lasts (``throttle.active``: until the large gang starts or ``timeout``
seconds), arrivals below the large class (``throttle.held_class``) wait at the platform, and are submitted
in arrival order when it ends. Gangs submitted before the mode and restarted victims are not held.

**Metrics** (``WindowResult``): per class, waiting time (start − arrival, held time included; still
waiting at the horizon: censored there), its Kaplan–Meier restricted mean and p95 (``engine.time_stats``,
None where censoring hides it) and the censored count; held gangs and their time held; evictions, preempt
rounds and second or later rounds for one large gang (each a card stolen in the window), modes and
modes that timed out. ``compare`` runs each seed with and without the throttle (same trace, priorities and
grace draws) and reports each metric's mean and 95% interval over seeds (``sweep.mean_ci``) and the
paired difference.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from optplan.errors import InputError
from optplan.experiments.replay import sweep
from optplan.experiments.replay.cluster import MAX_PODS, Cluster
from optplan.experiments.replay.engine import Events, time_stats
from optplan.experiments.replay.trace import Trace
from optplan.models.placement import BinpackWeights
from optplan.solvers.placement import throttle as rule

LARGE, NORMAL, DEBUG = 800, 100, 50
"""The seed's large-job, normal-job and debug-job values."""
_DEPART, _GONE, _ARRIVE, _CYCLE = 0, 1, 2, 3


@dataclass(frozen=True)
class WindowConfig:
    throttle: bool = False
    cycle: float = 1.0
    """Seconds between scheduling cycles (Volcano's schedulePeriod)."""
    grace: float = 30.0
    """A victim pod frees its cards a uniform time within this many seconds of its eviction."""
    timeout: float = rule.TIMEOUT_SECONDS
    """The waiting mode's timeout."""
    large_cards: int = 8
    debug_share: float = 0.2
    seed: int = 0
    horizon: float | None = None
    weights: BinpackWeights = field(default_factory=BinpackWeights)

    def __post_init__(self) -> None:
        for name in ("cycle",):
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 0):
                raise InputError(f"must be a positive number of seconds, got {v!r}", field=name)
        for name in ("grace", "timeout"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0):
                raise InputError(f"must be a number of seconds >= 0, got {v!r}", field=name)
        if self.large_cards < 1:
            raise InputError(f"must be at least 1, got {self.large_cards}", field="large_cards")
        if not 0 <= self.debug_share <= 1:
            raise InputError(f"must be within 0..1, got {self.debug_share}", field="debug_share")
        if self.horizon is not None and not (math.isfinite(self.horizon) and self.horizon > 0):
            raise InputError(f"must be a positive number of seconds, got {self.horizon!r}", field="horizon")

    def to_dict(self) -> dict[str, Any]:
        return {"throttle": self.throttle, "cycleSeconds": self.cycle, "graceSeconds": self.grace,
                "timeoutSeconds": self.timeout, "largeCards": self.large_cards, "debugShare": self.debug_share,
                "seed": self.seed, "horizonSeconds": self.horizon}


def priorities(trace: Trace, cfg: WindowConfig) -> list[int]:
    """Each gang's priority, in trace order (module docstring): seeded, the same with or without throttle."""
    rng = random.Random(cfg.seed)
    out = []
    for g in trace.gangs:
        draw = rng.random()
        out.append(LARGE if g.cards >= cfg.large_cards else DEBUG if draw < cfg.debug_share else NORMAL)
    return out


@dataclass
class WindowResult:
    config: dict[str, Any]
    metrics: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"config": self.config, "metrics": self.metrics}


class Window:
    """One replay (module docstring); ``run()`` returns the metrics."""

    def __init__(self, trace: Trace, cfg: WindowConfig) -> None:
        self.trace, self.cfg = trace, cfg
        self.horizon = cfg.horizon if cfg.horizon is not None else trace.end
        if not self.horizon > 0:
            raise InputError("the trace ends at time 0: give a positive horizon", field="horizon")
        self.rule = rule.Throttle(LARGE, cfg.timeout)
        self.cl = Cluster(trace.nodes, cfg.weights)
        n = len(self.cl.names)
        self.releasing = np.zeros((n, 3), dtype=np.int64)
        """Resources of victims still terminating, per node (cpu, memory, GPUs)."""
        self.releasing_pods = np.zeros(n, dtype=np.int64)
        self.prio = priorities(trace, cfg)
        self.rng = random.Random(cfg.seed * 7919 + 1)
        self.gangs = trace.gangs
        self.placed = [0] * len(self.gangs)
        self.ready_at: list[float | None] = [None] * len(self.gangs)
        self.submitted: list[float | None] = [None] * len(self.gangs)
        self.on_node: list[dict[int, tuple[int, float]]] = [{} for _ in range(n)]
        """Node -> running pod id -> (its gang, when it started)."""
        self.pod_node: dict[int, int] = {}
        self.pod_ver: dict[int, int] = {}
        self.next_pod = 0
        self.queues: dict[tuple[int, Any, int], deque[int]] = {}
        """Waiting gangs by (priority, shape, minimum), each in submission order."""
        self.order: dict[int, int] = {}
        self.seq = 0
        self.extras: list[int] = []
        """Started gangs with pods to place (beyond the minimum, or restarted victims)."""
        self.large_waiting: list[int] = []
        self.evicted_for: dict[int, int] = {}
        self.held: deque[int] = deque()
        self.behind: dict[int, list[int]] = {}
        """Large gang -> the gangs of the victims evicted for it, waiting until it starts."""
        self.mode: tuple[int, float] | None = None
        """(the large gang, since when) while the queue is in waiting mode."""
        self.held_time = [0.0] * len(self.gangs)
        self.events = Events()
        self.cycles: set[float] = set()
        self.counts = {"evictions": 0, "preemptRounds": 0, "repeatRounds": 0, "modes": 0, "modesTimedOut": 0,
                       "held": 0, "cycles": 0}
        self.area = 0.0
        self.now = 0.0

    # ---- events ---------------------------------------------------------------------------------

    def wake(self, t: float) -> None:
        """A cycle at the first scheduling period boundary at or after ``t``."""
        c = math.ceil(t / self.cfg.cycle - 1e-9) * self.cfg.cycle
        if c not in self.cycles and c <= self.horizon:
            self.cycles.add(c)
            self.events.push(c, _CYCLE)

    def run(self) -> WindowResult:
        for k, g in enumerate(self.gangs):
            if g.created <= self.horizon:
                self.events.push(g.created, _ARRIVE, k)
        for t, now in self.events.instants(self.horizon):
            self.area += self.cl.allocated * (t - self.now)
            self.now = t
            for kind, a, b in now:
                if kind == _DEPART:
                    self.depart(a, b)
                elif kind == _GONE:
                    self.gone(a, b)
                elif kind == _ARRIVE:
                    self.arrive(a, t)
                else:
                    self.cycles.discard(t)
                    self.cycle_at(t)
        self.area += self.cl.allocated * (self.horizon - self.now)
        return self.result()

    def arrive(self, k: int, t: float) -> None:
        if (self.cfg.throttle and self.mode is not None and rule.held_class(self.prio[k], LARGE)
                and rule.active(self.mode[1], self.ready_at[self.mode[0]] is not None, t, self.rule)):
            self.held.append(k)
            self.counts["held"] += 1
            return
        self.submit(k, t)

    def submit(self, k: int, t: float, at: float | None = None) -> None:
        """Gang k is submitted to the scheduler at ``t``; seen at the cycle at or after ``at`` (default t)."""
        g = self.gangs[k]
        self.submitted[k] = t
        self.held_time[k] = t - g.created
        self.seq += 1
        self.order[k] = self.seq
        self.queues.setdefault((self.prio[k], g.shape, g.min_member), deque()).append(k)
        if self.prio[k] >= LARGE:
            self.large_waiting.append(k)
        self.wake(t if at is None else at)

    def depart(self, pid: int, ver: int) -> None:
        if self.pod_ver.get(pid) != ver:
            return
        i = self.pod_node.pop(pid)
        k, _start = self.on_node[i].pop(pid)
        self.cl.give_back(i, self.cl.sim_pod(self.gangs[k]))
        self.wake(self.now)

    def gone(self, i: int, k: int) -> None:
        """A victim on node ``i`` of gang ``k`` has terminated: its cards are free."""
        g = self.gangs[k]
        self.releasing[i] -= (g.cpu, g.memory, g.gpu)
        self.releasing_pods[i] -= 1
        self.cl.give_back(i, self.cl.sim_pod(g))
        self.wake(self.now)

    # ---- a cycle --------------------------------------------------------------------------------

    def cycle_at(self, t: float) -> None:
        self.counts["cycles"] += 1
        self.end_mode(t)
        self.allocate(t)
        self.preempt(t)
        self.end_mode(t)

    def end_mode(self, t: float) -> None:
        if self.mode is None:
            return
        k, since = self.mode
        if rule.active(since, self.ready_at[k] is not None, t, self.rule):
            return
        if self.ready_at[k] is None:
            self.counts["modesTimedOut"] += 1
        self.mode = None
        while self.held:
            self.submit(self.held.popleft(), t, t + self.cfg.cycle)

    def start_pod(self, k: int, t: float) -> bool:
        g = self.gangs[k]
        pod = self.cl.sim_pod(g)
        i = self.cl.best(pod)
        if i < 0:
            return False
        self.cl.take(i, pod)
        pid = self.next_pod
        self.next_pod += 1
        self.pod_node[pid] = i
        self.pod_ver[pid] = 1
        self.on_node[i][pid] = (k, t)
        self.placed[k] += 1
        runtime = g.pods[(self.placed[k] - 1) % len(g.pods)].runtime
        self.events.push(t + runtime, _DEPART, pid, 1)
        return True

    def allocate(self, t: float) -> None:
        heads = [(-key[0], self.order[q[0]], key) for key, q in self.queues.items() if q]
        heapq.heapify(heads)
        started = False
        while heads:
            _p, _o, key = heapq.heappop(heads)
            q = self.queues[key]
            k = q[0]
            g = self.gangs[k]
            if self.cl.room(self.cl.sim_pod(g)) < g.min_member:
                continue  # this kind's turn ends
            for _ in range(g.min_member):
                if not self.start_pod(k, t):
                    raise AssertionError("room said the gang fits")  # pragma: no cover
            q.popleft()
            self.ready_at[k] = t
            started = True
            self.extras += self.behind.pop(k, [])
            if self.placed[k] < len(g.pods):
                self.extras.append(k)
            if q:
                heapq.heappush(heads, (-key[0], self.order[q[0]], key))
        if started:
            self.large_waiting = [k for k in self.large_waiting if self.ready_at[k] is None]
        left = []
        for k in sorted(set(self.extras), key=lambda j: (-self.prio[j], self.order[j])):
            while self.placed[k] < len(self.gangs[k].pods) and self.start_pod(k, t):
                pass
            if self.placed[k] < len(self.gangs[k].pods):
                left.append(k)
        self.extras = left

    # ---- preempt --------------------------------------------------------------------------------

    def future_room(self, k: int) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        """Per node: the gang's pods its free and terminating resources hold, and the free after them."""
        g = self.gangs[k]
        free = self.cl.cl.free + self.releasing
        slots = MAX_PODS - self.cl.cl.pods + self.releasing_pods
        per = slots.copy()
        for r, q in enumerate((g.cpu, g.memory, g.gpu)):
            if q > 0:
                per = np.minimum(per, free[:, r] // q)
        per = np.where(self.cl.cl.allowed(g.models), np.maximum(per, 0), 0)
        return per, free

    def preempt(self, t: float) -> None:
        for k in sorted(self.large_waiting, key=lambda j: self.order[j]):
            if self.ready_at[k] is not None:
                continue
            g = self.gangs[k]
            per, free = self.future_room(k)
            short = g.min_member - int(per.sum())
            if short <= 0:
                continue  # pipelined: waits for its victims to terminate
            victims = self.choose_victims(k, short, per, free)
            if victims is None:
                continue
            self.counts["preemptRounds"] += 1
            self.counts["repeatRounds"] += k in self.evicted_for
            self.evicted_for[k] = self.evicted_for.get(k, 0) + 1
            for i, pid in victims:
                self.evict(i, pid, k, t)
            if self.cfg.throttle and self.mode is None and rule.enters(self.prio[k], True, LARGE):
                self.mode = (k, t)
                self.counts["modes"] += 1
                self.wake(t + self.cfg.timeout)

    def choose_victims(self, k: int, short: int, per: np.ndarray[Any, Any],
                       free: np.ndarray[Any, Any]) -> list[tuple[int, int]] | None:
        """Victims that add ``short`` pods of gang k: each step the node where one more pod costs the
        fewest cards, its victims lowest priority first, then latest started; None when impossible."""
        g = self.gangs[k]
        need = np.array((g.cpu, g.memory, g.gpu), dtype=np.int64)
        state: dict[int, tuple[np.ndarray[Any, Any], list[tuple[int, float, int, int]]]] = {}
        for i in (int(x) for x in np.flatnonzero(self.cl.cl.allowed(g.models))):
            cands = sorted((self.prio[kk], -start, pid, kk) for pid, (kk, start) in self.on_node[i].items()
                           if self.prio[kk] < self.prio[k])
            if cands:  # what is left on the node after the pods that fit there already
                state[i] = (free[i] - need * int(per[i]), cands)
        chosen: list[tuple[int, int]] = []
        for _ in range(short):
            best: tuple[int, int, int] | None = None
            for i, (rest, cands) in state.items():
                have = rest.copy()
                cards = 0
                for j, (_p, _s, _pid, kk) in enumerate(cands):
                    gg = self.gangs[kk]
                    have += (gg.cpu, gg.memory, gg.gpu)
                    cards += gg.gpu
                    if (have >= need).all():
                        if best is None or (cards, j, i) < best:
                            best = (cards, j, i)
                        break
            if best is None:
                return None
            _cards, j, i = best
            rest, cands = state[i]
            for _p, _s, pid, kk in cands[:j + 1]:
                gg = self.gangs[kk]
                rest = rest + np.array((gg.cpu, gg.memory, gg.gpu), dtype=np.int64)
                chosen.append((i, pid))
            state[i] = (rest - need, cands[j + 1:])
        return chosen

    def evict(self, i: int, pid: int, large: int, t: float) -> None:
        k, _start = self.on_node[i].pop(pid)
        del self.pod_node[pid]
        self.pod_ver[pid] = -1
        g = self.gangs[k]
        self.releasing[i] += (g.cpu, g.memory, g.gpu)
        self.releasing_pods[i] += 1
        self.counts["evictions"] += 1
        self.events.push(t + self.rng.uniform(0, self.cfg.grace), _GONE, i, k)
        self.placed[k] -= 1  # it waits again, restarting from scratch, behind the large gang
        self.behind.setdefault(large, []).append(k)

    # ---- result ---------------------------------------------------------------------------------

    def result(self) -> WindowResult:
        waits: dict[str, list[tuple[float, bool]]] = {"large": [], "small": []}
        held: list[float] = []
        still_held = set(self.held)
        for k, g in enumerate(self.gangs):
            if g.created > self.horizon:
                continue
            cls = "large" if self.prio[k] >= LARGE else "small"
            done = self.ready_at[k]
            waits[cls].append(((done if done is not None else self.horizon) - g.created, done is not None))
            if self.held_time[k] > 0 or k in still_held:
                held.append(self.held_time[k] if self.submitted[k] is not None else self.horizon - g.created)

        def r(v: float | None) -> float | None:
            return None if v is None else round(v, 3)

        m: dict[str, Any] = {}
        for cls, ws in waits.items():
            st = time_stats(ws)  # Kaplan-Meier, as the replay's waits: a censored wait is never taken as complete
            m[f"{cls}Gangs"] = st["gangs"]
            m[f"{cls}Censored"] = st["censored"]
            m[f"{cls}WaitMean"] = st["restrictedMean"]
            m[f"{cls}WaitP95"] = st["p95"]
        m["heldGangs"] = len(held)
        m["heldMean"] = r(sum(held) / len(held)) if held else None
        m.update(self.counts)
        m["allocationPercent"] = round(100 * self.area / (self.horizon * self.cl.total_gpus), 4)
        return WindowResult(self.cfg.to_dict(), m)


def window(trace: Trace, cfg: WindowConfig) -> WindowResult:
    """Replay ``trace`` under ``cfg`` (module docstring)."""
    return Window(trace, cfg).run()


# ---- with and without the throttle, over seeds -------------------------------------------------------

COMPARED = ("largeWaitMean", "largeWaitP95", "smallWaitMean", "smallWaitP95", "heldMean", "evictions",
            "repeatRounds", "allocationPercent")
"""The metrics ``compare`` reports over seeds."""


def pair(trace_of: Callable[[int], Trace], seed: int, cfg: WindowConfig) -> dict[str, Any]:
    """One seed's replay without and with the throttle (the same trace, priorities and grace draws)."""
    trace = trace_of(seed)
    off = window(trace, replace(cfg, seed=seed, throttle=False)).metrics
    on = window(trace, replace(cfg, seed=seed, throttle=True)).metrics
    return {"seed": seed, "without": off, "with": on}


def compare(trace_of: Callable[[int], Trace], seeds: Sequence[int], cfg: WindowConfig,
            progress: Callable[[int, int], None] | None = None, workers: int = 1) -> dict[str, Any]:
    """Each seed without and with the throttle (``pair``; ``workers`` > 1: seeds in a process pool, then
    ``trace_of`` must be picklable); per metric the mean and 95% interval over seeds of each, and of the
    paired difference (with − without). The same document whatever ``workers``."""
    runs: list[dict[str, Any]] = []
    if workers > 1 and len(seeds) > 1:
        with ProcessPoolExecutor(max_workers=min(workers, len(seeds))) as ex:
            futures = [ex.submit(pair, trace_of, s, cfg) for s in seeds]
            for f in as_completed(futures):
                runs.append(f.result())
                if progress is not None:
                    progress(len(runs), len(seeds))
        runs.sort(key=lambda r: seeds.index(r["seed"]))
    else:
        for s in seeds:
            runs.append(pair(trace_of, s, cfg))
            if progress is not None:
                progress(len(runs), len(seeds))
    table: dict[str, Any] = {}
    for m in COMPARED:
        pairs = [(r["without"].get(m), r["with"].get(m)) for r in runs]
        table[m] = {"without": sweep.mean_ci([a for a, _ in pairs if a is not None]),
                    "with": sweep.mean_ci([b for _, b in pairs if b is not None]),
                    "difference": sweep.mean_ci([b - a for a, b in pairs if a is not None and b is not None])}
    return {"config": replace(cfg, throttle=True).to_dict() | {"seed": list(seeds)}, "seeds": list(seeds),
            "metrics": table, "runs": runs}


LABELS = {"largeWaitMean": "large-job wait, mean (min)", "largeWaitP95": "large-job wait, p95 (min)",
          "smallWaitMean": "small-job delay, mean (min)", "smallWaitP95": "small-job delay, p95 (min)",
          "heldMean": "time held at the platform, mean (min)", "evictions": "pods evicted",
          "repeatRounds": "repeat preempt rounds (cards stolen)", "allocationPercent": "GPU allocation %"}
MINUTES = frozenset({"largeWaitMean", "largeWaitP95", "smallWaitMean", "smallWaitP95", "heldMean"})


def markdown(doc: dict[str, Any], trace_line: str, command: str) -> str:
    def fmt(s: dict[str, Any], scale: float, sign: bool = False) -> str:
        if s.get("mean") is None:
            return "-"
        v = s["mean"] / scale
        out = f"{v:+.2f}" if sign else f"{v:.2f}"
        return out if s.get("ci95") is None else f"{out} ± {s['ci95'] / scale:.2f}"

    c = doc["config"]
    lines = ["# The large-job submission throttle", "", trace_line, "",
             f"Seeds {', '.join(map(str, doc['seeds']))}; cycle {c['cycleSeconds']:g} s, victims' grace "
             f"{c['graceSeconds']:g} s, mode timeout {c['timeoutSeconds']:g} s, large jobs >= {c['largeCards']} "
             f"cards, debug share {c['debugShare']:g}. Mean ± 95% half-width over seeds (Student's t); the "
             "difference is paired (same seed, with − without).", "", f"Reproduce: `{command}`", "",
             "| metric | without throttle | with throttle | difference |", "|---|---|---|---|"]
    for m in COMPARED:
        e = doc["metrics"][m]
        scale = 60.0 if m in MINUTES else 1.0
        lines.append(f"| {LABELS[m]} | {fmt(e['without'], scale)} | {fmt(e['with'], scale)} | "
                     f"{fmt(e['difference'], scale, sign=True)} |")
    return "\n".join(lines) + "\n"
