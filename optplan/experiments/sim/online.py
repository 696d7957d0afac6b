"""Online placement in the FGD paper's setup (Weng et al., "Beware of Fragmentation", USENIX ATC'23):
pods arrive one by one on an initially empty cluster, none departs, and the GPU allocation ratio is
read when the requests reach a share (130%) of the cluster's GPUs.

**Cluster.** ``SimNode``: cpu (milli), memory (MiB), GPU count and GPU model (the openb node list's
columns). Nodes are taken in name order; "the first node" below means the first name.

**Workload** (``fgd_workload``), built as the paper's simulator builds it (hkust-adsl/kubernetes-scheduler-
simulator: ``SortClusterPods`` with ``--shuffle-pod=true``, then ``TunePodsByNodeTotalResource``). Only
whole-GPU pods are kept (``gpu`` >= 1 and ``gpu_milli`` = 1000); the rest are dropped (``every_pod=True``
keeps them all, for ``shared``; requests are then counted in milli-GPUs, ``gpu`` × ``gpu_milli``). They are sorted
by name and shuffled; then, while they request fewer GPUs than the target ``percent`` × cluster GPUs
/ 100, a pod drawn uniformly *with replacement* from them is appended (named ``<name>-tuned-<k>``),
until a draw would take the total above the target (that draw is dropped and sampling stops; the
simulator compares only the per-GPU share of a multi-GPU draw there, the whole request is compared
here); while they request more, a pod drawn uniformly among the remaining ones is removed. One stream
(``random.Random(f"{seed}/workload")``) drives all of it, so a seed gives one arrival sequence that
every policy sees.

**Arrivals.** A pod fits a node when the node's model is allowed (``models`` empty, or the node's
model among them) and its free cpu, memory and GPUs cover the requests; no other dimension counts. A
pod that fits nowhere is rejected (counted) and the stream goes on. Policies (the registry's ``sim`` family,
one class each: ``BinpackPolicy``, ``BestFitPolicy``, ``RandomPolicy``, ``CpSatBatchPolicy``):

- ``greedy``: Volcano's binpack: the node with the highest ``placement.binpack_score`` for the pod
  (Volcano's formula, ``BinpackWeights`` given, default Volcano's own: cpu 1, memory 1 and no extended
  resource, so ``nvidia.com/gpu`` weighs nothing unless ``binpack.resources`` names it); ties to the
  first node (Volcano picks at random among equals). Scores are cached per (pod shape, node) and
  recomputed only for the nodes that changed since.
- ``best-fit``: the node left with the fewest free GPUs after placement; ties to the first node.
- ``random``: uniform among the nodes the pod fits (``random.Random(f"{seed}/random")``).
- ``cpsat-batch``: ``batch`` arrivals are buffered and placed together by one CP-SAT solve (``_Batch``),
  lexicographically (one weighted objective): most GPUs placed, then fewest newly used nodes (nodes
  empty before the batch that receive a pod), then tightness: least Σ placed GPUs × the node's free
  GPUs before the batch (GPUs go to the fullest nodes, as best-fit sends them). One worker, ``seed``,
  ``batch_time_limit`` per solve, light presolve. Candidate nodes: those of the best-fit sequence of
  the batch (placed one pod after the other), plus, among the nodes where some pod of the batch fits,
  up to ``batch`` nodes per class of identical nodes (same capacity, model and free resources), fewest
  free GPUs first, ``batch_candidates`` at most. The best-fit sequence is the solve's hint and its
  fallback: the solve's plan is kept only when its objective is at least the hint's. Pods of one shape
  are interchangeable: the earliest arrivals of a shape get its places (nodes in name order); the pods
  of a batch left out are rejected. The last batch may be shorter.

**Metric.** GPU allocation ratio = allocated GPUs / cluster GPUs at the end; also the arrival number
of the first rejection and the GPUs allocated at that moment (for ``cpsat-batch``, after its batch).

**Check.** Every final state is re-checked from the assignment alone by ``verify`` with the feasibility
oracle (``oracle.static_reason`` for the model, ``oracle.Capacity`` for every resource); a broken state
raises ``PlanInvalidError``.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Protocol

import numpy as np
from ortools.sat.python import cp_model

from optplan.errors import InputError, PlanInvalidError
from optplan.models.placement import BinpackWeights
from optplan.models.selectors import NodeSelectorRequirement, NodeSelectorTerm
from optplan.models.snapshot import Node, Pod, Resources, Snapshot
from optplan.solvers.core import registry
from optplan.solvers.core.oracle import Capacity, static_reason
from optplan.solvers.placement.binpack import binpack_score

log = logging.getLogger(__name__)

FAMILY = registry.SIM
"""The policies' family in ``optplan.solvers.core.registry`` (their names, in order, and their classes)."""
GPU = "nvidia.com/gpu"
MODEL_LABEL = "nvidia.com/gpu.product"
_MI_MILLI = 2**20 * 1000
_CPU, _MEM, _GPU = 0, 1, 2

ProgressFn = Callable[[int], None]
"""Called with the number of arrivals handled so far."""


@dataclass(frozen=True)
class SimNode:
    name: str
    cpu: int  # milli
    memory: int  # MiB
    gpu: int
    model: str = ""


@dataclass(frozen=True)
class SimPod:
    name: str
    cpu: int  # milli
    memory: int  # MiB
    gpu: int
    gpu_milli: int = 1000
    """Share of each GPU (1000 = whole cards); only whole-GPU pods enter a workload."""
    models: tuple[str, ...] = ()
    """Allowed GPU models; () = any."""


@dataclass(frozen=True)
class OnlineConfig:
    """How a policy runs: data, not code."""

    seed: int = 0
    weights: BinpackWeights = field(default_factory=BinpackWeights)
    """binpack weights of ``greedy`` (default: Volcano's)."""
    batch: int = 32
    """Arrivals per CP-SAT solve (``cpsat-batch``)."""
    batch_time_limit: float = 0.2
    """Seconds per CP-SAT solve."""
    batch_candidates: int = 160
    """Nodes offered to one solve at most (plus the hint's)."""

    def __post_init__(self) -> None:
        if self.batch < 1:
            raise InputError(f"must be at least 1, got {self.batch}", field="batch")
        if not self.batch_time_limit > 0:
            raise InputError(f"must be positive, got {self.batch_time_limit}", field="batch_time_limit")
        if self.batch_candidates < 1:
            raise InputError(f"must be at least 1, got {self.batch_candidates}", field="batch_candidates")


@dataclass(frozen=True)
class OnlineResult:
    policy: str
    seed: int
    total_gpus: int
    requested_gpus: int
    allocated_gpus: int
    placed: int
    rejected: int
    first_rejection: int | None
    """1-based arrival number of the first rejected pod; None when every pod was placed."""
    allocated_at_first_rejection: int | None
    wall_seconds: float
    assignment: tuple[str | None, ...]
    """Node name per arrival, None when rejected."""
    solves: dict[str, int] = field(default_factory=dict)
    """``cpsat-batch``: batches by outcome: OPTIMAL or FEASIBLE (the solve's plan), HINT (the best-fit hint
    kept: the solve found nothing better in time), NO_FIT (no pod of the batch fits anywhere: no solve)."""

    @property
    def arrivals(self) -> int:
        return len(self.assignment)

    @property
    def alloc_percent(self) -> float:
        return 100.0 * self.allocated_gpus / self.total_gpus if self.total_gpus else 0.0


# ---- workload ----------------------------------------------------------------------------------

def fgd_workload(trace: Sequence[SimPod], total_gpus: int, percent: float = 130.0, seed: int = 0,
                 every_pod: bool = False) -> list[SimPod]:
    """The arrival sequence: see the module docstring. ``every_pod``: keep every pod of the trace (shares and
    cpu-only pods too; ``experiments.sim.shared``), requests counted in milli-GPUs (``gpu`` × ``gpu_milli``)."""
    if not percent > 0:
        raise InputError(f"must be positive, got {percent}", field="percent")
    base = sorted((p for p in trace if every_pod or (p.gpu >= 1 and p.gpu_milli == 1000)), key=lambda p: p.name)
    if not base:
        raise InputError("the trace has no whole-GPU pod (num_gpu >= 1 and gpu_milli = 1000)", field="pods")
    rng = random.Random(f"{seed}/workload")
    pods = list(base)
    rng.shuffle(pods)
    target = Fraction(str(percent)) * total_gpus * 1000 / 100
    requested = sum(p.gpu * p.gpu_milli for p in pods)
    k = 0
    while requested < target:
        p = base[rng.randrange(len(base))]
        if requested + p.gpu * p.gpu_milli > target:
            break
        pods.append(SimPod(f"{p.name}-tuned-{k}", p.cpu, p.memory, p.gpu, p.gpu_milli, p.models))
        requested += p.gpu * p.gpu_milli
        k += 1
    while requested > target and pods:
        p = pods.pop(rng.randrange(len(pods)))
        requested -= p.gpu * p.gpu_milli
    return pods


# ---- cluster state -----------------------------------------------------------------------------

class SimCluster:
    """Capacity and free resources per node (name order), as int64 rows of cpu, memory, GPUs."""

    def __init__(self, nodes: Sequence[SimNode]) -> None:
        self.nodes = sorted(nodes, key=lambda n: n.name)
        names = [n.name for n in self.nodes]
        if len(set(names)) != len(names):
            raise InputError("node names are not unique", field="nodes")
        self.cap = np.array([[n.cpu, n.memory, n.gpu] for n in self.nodes], dtype=np.int64).reshape(-1, 3)
        self.free = self.cap.copy()
        self.pods = np.zeros(len(self.nodes), dtype=np.int64)
        model_ids = {m: i for i, m in enumerate(sorted({n.model for n in self.nodes}))}
        self.model_id = np.array([model_ids[n.model] for n in self.nodes], dtype=np.int64)
        self._allowed: dict[tuple[str, ...], np.ndarray[Any, Any]] = {}
        self.total_gpus = int(self.cap[:, _GPU].sum())
        self.allocated = 0

    def allowed(self, models: tuple[str, ...]) -> np.ndarray[Any, Any]:
        mask = self._allowed.get(models)
        if mask is None:
            mask = np.array([not models or n.model in models for n in self.nodes], dtype=bool)
            self._allowed[models] = mask
        return mask

    def fits(self, pod: SimPod, free: np.ndarray[Any, Any] | None = None) -> np.ndarray[Any, Any]:
        f = self.free if free is None else free
        return self.allowed(pod.models) & (f[:, _CPU] >= pod.cpu) & (f[:, _MEM] >= pod.memory) & (f[:, _GPU] >= pod.gpu)

    def take(self, i: int, pod: SimPod) -> None:
        self.free[i] -= (pod.cpu, pod.memory, pod.gpu)
        self.pods[i] += 1
        self.allocated += pod.gpu


def resources_of(cpu: int, memory: int, gpu: int) -> Resources:
    """Snapshot units: milli-cores, milli-bytes, milli-GPUs."""
    out = {"cpu": int(cpu), "memory": int(memory) * _MI_MILLI}
    if gpu:
        out[GPU] = int(gpu) * 1000
    return out


def _best_fit(fits: np.ndarray[Any, Any], free_gpu: np.ndarray[Any, Any], gpu: int) -> int:
    """Fewest free GPUs left after placement; argmin returns the first (by name) among equals."""
    left = np.where(fits, free_gpu - gpu, np.iinfo(np.int64).max)
    return int(np.argmin(left))


class BinpackCache:
    """``binpack_score`` per (pod shape, node), cached; a node's entries go stale when it changes."""

    def __init__(self, cl: SimCluster, weights: BinpackWeights) -> None:
        self.cl = cl
        self.weights = weights
        self.shapes: dict[tuple[int, int, int], int] = {}
        self.requests: list[Resources] = []
        self.score = np.zeros((0, len(cl.nodes)))
        self.exact: list[list[Fraction]] = []
        self.stale = np.zeros((0, len(cl.nodes)), dtype=bool)
        self.alloc = [resources_of(*row) for row in cl.cap.tolist()]
        self.memo: dict[tuple[tuple[int, ...], tuple[int, ...], int], Fraction] = {}

    def _shape(self, pod: SimPod) -> int:
        key = (pod.cpu, pod.memory, pod.gpu)
        s = self.shapes.get(key)
        if s is None:
            s = self.shapes[key] = len(self.requests)
            self.requests.append(resources_of(*key))
            n = len(self.cl.nodes)
            self.score = np.vstack([self.score, np.zeros((1, n))])
            self.stale = np.vstack([self.stale, np.ones((1, n), dtype=bool)])
            self.exact.append([Fraction(0)] * n)
        return s

    def touch(self, i: int) -> None:
        self.stale[:, i] = True

    def best(self, pod: SimPod, fits: np.ndarray[Any, Any]) -> int:
        s = self._shape(pod)
        cap, free = self.cl.cap, self.cl.free
        for i in np.flatnonzero(self.stale[s] & fits).tolist():
            key = (tuple(cap[i].tolist()), tuple(free[i].tolist()), s)
            f = self.memo.get(key)
            if f is None:
                f = binpack_score(self.requests[s], self.alloc[i], resources_of(*free[i].tolist()), self.weights)
                self.memo[key] = f
            self.exact[s][i] = f
            self.score[s, i] = float(f)
            self.stale[s, i] = False
        masked = np.where(fits, self.score[s], -np.inf)
        top = masked.max()
        near = np.flatnonzero(masked >= top - 1e-9 * max(1.0, abs(top))).tolist()
        if len(near) == 1:
            return int(near[0])
        row = self.exact[s]
        best = max(row[i] for i in near)
        return next(i for i in near if row[i] == best)


# ---- cpsat-batch -------------------------------------------------------------------------------

@dataclass
class _BatchVars:
    place: dict[tuple[int, int], Any]
    """(shape, node) -> how many pods of the shape the node receives."""
    opened: dict[int, Any]
    """node empty before the batch -> the batch places something on it."""


class _Batch:
    """One CP-SAT solve for a batch of arrivals: build, solve, extract."""

    def __init__(self, cl: SimCluster, pods: Sequence[SimPod], cfg: OnlineConfig) -> None:
        self.cl = cl
        self.pods = list(pods)
        self.cfg = cfg
        shapes: dict[tuple[int, int, int, tuple[str, ...]], list[int]] = {}
        for k, p in enumerate(self.pods):
            shapes.setdefault((p.cpu, p.memory, p.gpu, p.models), []).append(k)
        self.shapes = list(shapes.values())
        self.hint = self._best_fit_sequence()
        self.nodes = self._candidates()
        # ub[s, n]: pods of shape s that node n could take alone (positive only)
        self.ub: dict[tuple[int, int], int] = {}
        for s, members in enumerate(self.shapes):
            p = self.pods[members[0]]
            fits = cl.fits(p)
            for n in self.nodes:
                if fits[n]:
                    f = cl.free[n]
                    room = min((int(f[r]) // q for r, q in ((_CPU, p.cpu), (_MEM, p.memory), (_GPU, p.gpu)) if q > 0),
                               default=len(members))
                    self.ub[s, n] = min(len(members), room)
        self.gpu = [self.pods[members[0]].gpu for members in self.shapes]
        max_free = max((int(cl.free[n, _GPU]) for n in self.nodes), default=0)
        b = len(self.pods)
        batch_gpus = sum(p.gpu for p in self.pods)
        self.w_tight = 1
        self.w_new = batch_gpus * max_free + 1
        self.w_gpus = self.w_new * (b + 1)

    def _best_fit_sequence(self) -> list[int]:
        free = self.cl.free.copy()
        out = []
        for p in self.pods:
            fits = self.cl.fits(p, free)
            if not fits.any():
                out.append(-1)
                continue
            i = _best_fit(fits, free[:, _GPU], p.gpu)
            free[i] -= (p.cpu, p.memory, p.gpu)
            out.append(i)
        return out

    def _candidates(self) -> list[int]:
        cl = self.cl
        fit_any = np.zeros(len(cl.nodes), dtype=bool)
        for members in self.shapes:
            fit_any |= cl.fits(self.pods[members[0]])
        idx = np.flatnonzero(fit_any)
        if len(idx) == 0:
            return []
        keys = np.column_stack([cl.cap[idx], cl.free[idx], cl.model_id[idx]])
        _, inverse = np.unique(keys, axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
        order = np.argsort(inverse, kind="stable")
        inv = inverse[order]
        starts = np.flatnonzero(np.r_[True, inv[1:] != inv[:-1]])
        rank = np.arange(len(order)) - np.repeat(starts, np.diff(np.r_[starts, len(order)]))
        keep = idx[order[rank < len(self.pods)]]
        keep = keep[np.lexsort((keep, cl.free[keep, _GPU]))][: self.cfg.batch_candidates]
        return sorted(set(keep.tolist()) | {i for i in self.hint if i >= 0})

    def build(self) -> tuple[cp_model.CpModel, _BatchVars]:
        m = cp_model.CpModel()
        v = _BatchVars(place={}, opened={})
        for (s, n), ub in self.ub.items():
            v.place[s, n] = m.new_int_var(0, ub, f"place[{s}->{self.cl.nodes[n].name}]")
        for n in sorted({n for (_s, n) in v.place if self.cl.pods[n] == 0}):
            v.opened[n] = m.new_bool_var(f"opened[{self.cl.nodes[n].name}]")
        self.add_counts(m, v)
        self.add_capacity(m, v)
        self.add_opened(m, v)
        m.maximize(self.objective(v))
        return m, v

    def add_counts(self, m: cp_model.CpModel, v: _BatchVars) -> None:
        """A shape places at most the pods it has."""
        for s, members in enumerate(self.shapes):
            terms = [x for (s2, _n), x in v.place.items() if s2 == s]
            if terms:
                m.add(sum(terms) <= len(members))

    def add_capacity(self, m: cp_model.CpModel, v: _BatchVars) -> None:
        """Cumulative fit on cpu, memory and GPUs of every node."""
        by_node: dict[int, list[tuple[SimPod, Any]]] = {}
        for (s, n), x in v.place.items():
            by_node.setdefault(n, []).append((self.pods[self.shapes[s][0]], x))
        for n, terms in sorted(by_node.items()):
            f = self.cl.free[n]
            m.add(sum(p.cpu * x for p, x in terms) <= int(f[_CPU]))
            m.add(sum(p.memory * x for p, x in terms) <= int(f[_MEM]))
            m.add(sum(p.gpu * x for p, x in terms) <= int(f[_GPU]))

    def add_opened(self, m: cp_model.CpModel, v: _BatchVars) -> None:
        """A node empty before the batch that receives a pod is opened."""
        for (s, n), x in v.place.items():
            if n in v.opened:
                m.add(x <= self.ub[s, n] * v.opened[n])

    def objective(self, v: _BatchVars) -> Any:
        gpus = sum(self.gpu[s] * x for (s, _n), x in v.place.items())
        opened = sum(v.opened.values())
        tight = sum(self.gpu[s] * int(self.cl.free[n, _GPU]) * x for (s, n), x in v.place.items())
        return self.w_gpus * gpus - self.w_new * opened - self.w_tight * tight

    def value(self, counts: dict[tuple[int, int], int]) -> int:
        """The objective of a plan given as counts."""
        gpus = sum(self.gpu[s] * c for (s, _n), c in counts.items())
        opened = len({n for (_s, n), c in counts.items() if c and self.cl.pods[n] == 0})
        tight = sum(self.gpu[s] * int(self.cl.free[n, _GPU]) * c for (s, n), c in counts.items())
        return self.w_gpus * gpus - self.w_new * opened - self.w_tight * tight

    def hint_counts(self) -> dict[tuple[int, int], int]:
        shape_of = {k: s for s, members in enumerate(self.shapes) for k in members}
        counts: dict[tuple[int, int], int] = {}
        for k, n in enumerate(self.hint):
            if n >= 0:
                counts[shape_of[k], n] = counts.get((shape_of[k], n), 0) + 1
        return counts

    def extract(self, counts: dict[tuple[int, int], int]) -> list[int]:
        """Node per pod of the batch (-1: rejected): the earliest arrivals of a shape get its places,
        nodes in name order."""
        out = [-1] * len(self.pods)
        for s, members in enumerate(self.shapes):
            slots = [n for (s2, n), c in sorted(counts.items()) if s2 == s for _ in range(c)]
            for k, n in zip(members, slots, strict=False):
                out[k] = n
        return out

    def solve(self) -> tuple[list[int], str]:
        hint = self.hint_counts()
        if not self.ub:
            return self.extract(hint), "NO_FIT"
        m, v = self.build()
        for key, x in v.place.items():
            m.add_hint(x, hint.get(key, 0))
        for n, o in v.opened.items():
            m.add_hint(o, int(any(c for (_s, n2), c in hint.items() if n2 == n)))
        s = cp_model.CpSolver()
        s.parameters.max_time_in_seconds = self.cfg.batch_time_limit
        s.parameters.num_workers = 1
        s.parameters.random_seed = self.cfg.seed
        # light presolve: with a fraction of a second per solve the full one often ends without a solution
        s.parameters.max_presolve_iterations = 1
        s.parameters.cp_model_probing_level = 0
        s.parameters.symmetry_level = 0
        st = s.solve(m)
        ok = st in (cp_model.OPTIMAL, cp_model.FEASIBLE)
        log.debug("online cpsat batch of %d on %d nodes: %s objective %s bound %s hint %s in %.2fs", len(self.pods),
                  len(self.nodes), s.status_name(st), s.objective_value if ok else None,
                  s.best_objective_bound if ok else None, self.value(hint), s.wall_time)
        if ok:
            counts = {key: int(s.value(x)) for key, x in v.place.items()}
            if self.value(counts) >= self.value(hint):
                return self.extract(counts), s.status_name(st)
        return self.extract(hint), "HINT"


# ---- the policies -----------------------------------------------------------------------------

class OnlinePolicy(Protocol):
    """A placement policy of the simulation: made for one run on its cluster, it places ``batch`` arrivals at a
    time (``place``: a node index per pod, -1 for a rejection, and the solve's outcome when it solves)."""

    name: str
    batch: int

    def place(self, pods: Sequence[SimPod]) -> tuple[list[int], str | None]: ...


class _OnePod:
    """A policy that places each arrival alone, on a node where it fits (``choose``)."""

    name = ""
    batch = 1

    def __init__(self, cl: SimCluster, cfg: OnlineConfig) -> None:
        self.cl = cl

    def place(self, pods: Sequence[SimPod]) -> tuple[list[int], str | None]:
        (p,) = pods
        fits = self.cl.fits(p)
        return [self.choose(p, fits) if fits.any() else -1], None

    def choose(self, p: SimPod, fits: np.ndarray[Any, Any]) -> int:
        raise NotImplementedError


class BinpackPolicy(_OnePod):
    """``greedy``: Volcano's binpack (the module)."""

    name = "greedy"

    def __init__(self, cl: SimCluster, cfg: OnlineConfig) -> None:
        super().__init__(cl, cfg)
        self.cache = BinpackCache(cl, cfg.weights)

    def choose(self, p: SimPod, fits: np.ndarray[Any, Any]) -> int:
        i = self.cache.best(p, fits)
        self.cache.touch(i)
        return i


class BestFitPolicy(_OnePod):
    """``best-fit``: the node left with the fewest free GPUs."""

    name = "best-fit"

    def choose(self, p: SimPod, fits: np.ndarray[Any, Any]) -> int:
        return _best_fit(fits, self.cl.free[:, _GPU], p.gpu)


class RandomPolicy(_OnePod):
    """``random``: uniform among the nodes the pod fits."""

    name = "random"

    def __init__(self, cl: SimCluster, cfg: OnlineConfig) -> None:
        super().__init__(cl, cfg)
        self.rng = random.Random(f"{cfg.seed}/random")

    def choose(self, p: SimPod, fits: np.ndarray[Any, Any]) -> int:
        idx = np.flatnonzero(fits)
        return int(idx[self.rng.randrange(len(idx))])


class CpSatBatchPolicy:
    """``cpsat-batch``: ``batch`` arrivals placed together by one CP-SAT solve (``_Batch``)."""

    name = "cpsat-batch"

    def __init__(self, cl: SimCluster, cfg: OnlineConfig) -> None:
        self.cl = cl
        self.cfg = cfg
        self.batch = cfg.batch

    def place(self, pods: Sequence[SimPod]) -> tuple[list[int], str | None]:
        batch = _Batch(self.cl, pods, self.cfg)
        placed, outcome = batch.solve()
        return list(placed), outcome


# ---- simulation --------------------------------------------------------------------------------

def simulate(nodes: Sequence[SimNode], arrivals: Sequence[SimPod], policy: str,
             config: OnlineConfig | None = None, progress: ProgressFn | None = None) -> OnlineResult:
    """Place ``arrivals`` in order on an empty cluster with ``policy``; the final state is verified."""
    if policy not in registry.names(FAMILY):
        raise InputError(f"unknown policy {policy!r} (one of {', '.join(registry.names(FAMILY))})", field="policy")
    cfg = config or OnlineConfig()
    t0 = time.perf_counter()
    cl = SimCluster(nodes)
    pol: OnlinePolicy = registry.load(FAMILY, policy)(cl, cfg)
    choice: list[int] = []
    first: int | None = None
    at_first: int | None = None
    solves: dict[str, int] = {}
    every = max(1, len(arrivals) // 200)
    for start in range(0, len(arrivals), pol.batch):
        pods = arrivals[start: start + pol.batch]
        placed, outcome = pol.place(pods)
        if outcome is not None:
            solves[outcome] = solves.get(outcome, 0) + 1
        for p, i in zip(pods, placed, strict=True):
            if i >= 0:
                cl.take(i, p)
        if first is None and -1 in placed:
            first, at_first = start + placed.index(-1) + 1, cl.allocated
        choice += placed
        if progress is not None and (pol.batch > 1 or len(choice) % every == 0):
            progress(len(choice))
    assignment = tuple(cl.nodes[i].name if i >= 0 else None for i in choice)
    allocated = verify(cl.nodes, arrivals, assignment)
    if allocated != cl.allocated:
        raise PlanInvalidError([f"the simulation counted {cl.allocated} allocated GPUs, the check {allocated}"])
    wall = time.perf_counter() - t0
    placed_n = sum(1 for i in choice if i >= 0)
    return OnlineResult(policy=policy, seed=cfg.seed, total_gpus=cl.total_gpus,
                        requested_gpus=sum(p.gpu for p in arrivals), allocated_gpus=allocated, placed=placed_n,
                        rejected=len(choice) - placed_n, first_rejection=first,
                        allocated_at_first_rejection=at_first, wall_seconds=round(wall, 3), assignment=assignment,
                        solves=solves)


# ---- the independent check ---------------------------------------------------------------------

def verify(nodes: Sequence[SimNode], arrivals: Sequence[SimPod], assignment: Sequence[str | None]) -> int:
    """Re-check a final state from the assignment alone, with the feasibility oracle: every placed pod
    passes the static predicates on its node (the GPU model, as a required node affinity) and no node
    is over-committed on cpu, memory or GPUs. Returns the allocated GPUs; raises ``PlanInvalidError``."""
    if len(assignment) != len(arrivals):
        raise PlanInvalidError([f"{len(assignment)} assignments for {len(arrivals)} arrivals"])
    snap_nodes = {n.name: Node(name=n.name, labels={MODEL_LABEL: n.model} if n.model else {},
                               allocatable=resources_of(n.cpu, n.memory, n.gpu)) for n in nodes}
    pods: dict[str, Pod] = {}
    problems: list[str] = []
    allocated = 0
    for k, (p, where) in enumerate(zip(arrivals, assignment, strict=True)):
        if where is None:
            continue
        if where not in snap_nodes:
            problems.append(f"arrival {k + 1} ({p.name}) is on unknown node {where!r}")
            continue
        affinity = (NodeSelectorTerm(match_expressions=(
            NodeSelectorRequirement(key=MODEL_LABEL, operator="In", values=p.models),)),) if p.models else None
        pod = Pod(namespace="online", name=f"a{k + 1}", node_name=where, phase="Running",
                  requests=resources_of(p.cpu, p.memory, p.gpu), required_node_affinity=affinity)
        reason = static_reason(pod, snap_nodes[where])
        if reason is not None:
            problems.append(f"arrival {k + 1} ({p.name}) on {where}: {reason}")
        pods[pod.key] = pod
        allocated += p.gpu
    cap = Capacity(Snapshot(nodes=snap_nodes, pods=pods))
    for name in sorted(snap_nodes):
        over = cap.over(name, ("cpu", "memory", GPU))
        if over:
            problems.append(f"node {name} is over-committed on {', '.join(over)}")
    if problems:
        raise PlanInvalidError(problems)
    return allocated
