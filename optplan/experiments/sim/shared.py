"""Online placement of every pod on GPU devices, in the FGD paper's setup (Weng et al., "Beware of
Fragmentation", USENIX ATC'23): whole-GPU, shared-GPU and cpu-only pods arrive one by one on an empty
cluster, none departs, and the GPU allocation ratio is read when the GPU requests reach 130% of the cluster's
GPUs (``online.fgd_workload(..., every_pod=True)``: the paper's workload construction, requests counted in
milli-GPUs).

**Cluster.** ``DevCluster``: per node (name order) free cpu (milli) and memory (MiB), and free milli-GPU per
device (``MILLI`` each; a node's absent devices are 0); the node's GPU model. A pod (``Arrival``: cpu, memory,
``gpushare.GpuAsk``) fits a node when its cpu and memory fit and ``gpushare`` says its devices do (the model
among the pod's ``models``; a share on ONE device with enough free milli; whole GPUs on entirely free
devices). A pod that fits nowhere is rejected and the stream goes on.

**Policies** (the registry's ``sim-shared`` family; one class each, ``choose(pod, fits) -> (node, devices)``).
The peers behave as the paper's simulator (hkust-adsl/kubernetes-scheduler-simulator, read, not copied; its
artifact's run scripts give each peer's options) scores nodes: an integer 0..100 per node (kube-scheduler's
range), computed from free cpu and GPU milli (memory plays no part), the largest node (128 cpus, 8 GPUs) as
the norm; among nodes of equal score the first by name (the simulator's kube-scheduler fork picks the smallest
name "for reproducibility", not a random one). Unless said otherwise a share takes ``gpushare.choose_devices``'
best-fit device and whole GPUs the lowest-indexed free devices.

- ``random`` (Random-fit): uniform among the nodes the pod fits (stream ``<seed>/random``), a share on a device
  uniform among those with room;
- ``dotprod`` (DotProd, Tetris' alignment): 100 × (1 − (cpu·free cpu / 128,000² + GPU·free GPU / 8,000²) / 2),
  truncated: the least dot product of the pod's request and the node's free resources;
- ``gpu-clustering`` (GpuClustering): the pod's GPU affinity (any share, or k whole GPUs) against the
  affinities of the GPU pods on the node: only its own 75, its own among others 50, none (no GPU pod) 25,
  others only 0; plus 25 × (8,000 − free GPU milli) / 8,000 (integer division), so fuller nodes first within
  a tier; cpu-only pods: 0 everywhere (the first node that fits);
- ``gpu-packing`` (GpuPacking): a share that fits a partly used device: 100 − (free milli of the least free such
  device) / 100 (integer), at least 50; a pod that must open free devices on a node in use: 50 − devices
  opened, at least 33; a node whose GPUs are all free: max(33 − free GPUs, free GPUs); cpu-only pods: 0;
- ``best-fit`` (BestFit): 100 × (1 − (0.5 × free cpu after / 128,000 + 0.5 × free GPU milli after / 8,000)),
  truncated, then scaled to 0..100 over the nodes that fit (integer, kube-scheduler's normalisation);
- ``fgd`` (FGD): sigmoid((fragmentation before − after) / 1,000) × 100, truncated (``fgd_score``), the
  fragmentation (``gpushare.fragmentation``) for the trace's task types (cpu, GPU ask, model) that cover
  95% of its pods, the most frequent first (``typical_workload``, the simulator's default popularity
  threshold); a share on the first device of the best score.

optplan's:

- ``binpack``: Volcano's binpack extended to devices: the node with the highest ``binpack`` score
  (``placement.binpack_scores``, the formula of ``binpack_score`` over arrays; weights cpu 1, memory 1,
  nvidia.com/gpu 1 in milli: the extended resource named in ``binpack.resources``), the share on its
  best-fit device;
- ``frag-aware``: FGD's measure and integer score (the same target workload) with two changes: among the
  nodes of the best score, the fullest node (free cpu and GPU after placement, each over the node's
  capacity) instead of the first by name; and a share's device: the least growth as a float, then the least
  free milli, then the lowest index. cpu-only pods go to cpu-only nodes first (the fullest after placement),
  only then to GPU nodes by the same rule as GPU pods (the paper's cluster has no cpu-only nodes). It breaks
  remaining ties uniformly at random (stream ``<seed>/<policy>``), as Volcano does;
- ``frag-spread``: FGD's measure, integer score and share device (the same target workload), its ties broken by
  the free resources after placement (``frag-aware``'s measure) instead of the node name: to the emptiest node
  when no pod of the trace requires a GPU model, which keeps cpu beside free GPUs for the GPU pods heavier in
  cpu than FGD's typical task types; when some do (``model_pressure`` > 0 somewhere), or when pods of 2 GPUs or
  more ask ``MULTI_GPU_SHARE`` of the GPU demand or more, a GPU pod's ties go first to the least contested model,
  then to the fullest node. Remaining ties: the first node by name; no random stream. Each pod is placed on
  arrival, as FGD places it; nothing is delayed or moved.
- ``frag-hole``: ``frag-spread``, but a share that would leave an unfillable hole on an entirely free device
  (``MILLI`` minus its ask is below every hole size h where the trace's shares of h milli or less ask
  ``HOLE_DEMAND`` of its GPU demand: the 810-milli shares of openb, whose 190 milli only its rare shares of 50-160
  milli fill) goes first to the nodes with a partly used device that has room for it (there on such a device),
  else to the nodes with a spare device (one more entirely free device than the node's free cpu after the share
  can feed with whole GPUs at the trace's whole-GPU cpu per GPU; every free device when the trace has no
  whole-GPU pod), else wherever ``frag-spread`` puts it. Each pod on arrival, every pod that fits placed.
- ``frag-admit`` (**rejects pods that fit**: an admission policy, not work-conserving, so not a like-for-like
  peer of FGD): ``frag-hole`` refusing such a share when neither a partly used device nor a spare device can take
  it.
- the look-ahead policies over batches of arrivals, ``frag-batch``, ``frag-hole-batch`` and ``frag-defer``, are
  in ``sim.lookahead``.

**Metric.** GPU allocation ratio = allocated milli-GPUs / the cluster's milli-GPUs at the end (the paper's
"GPU allocation ratio"; column 130 of its ``analysis_allo_discrete.csv``).

**Check.** ``verify`` re-checks the final state from the assignment alone (node and devices per arrival)
with ``gpushare``'s rule and the host's cpu and memory; a broken state raises ``PlanInvalidError``.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from optplan.errors import InputError, PlanInvalidError
from optplan.experiments.sim.online import SimNode, SimPod
from optplan.models.placement import BinpackWeights
from optplan.solvers.core import registry
from optplan.solvers.core.gpushare import (
    MILLI,
    FragTable,
    GpuAsk,
    TargetWorkload,
    TaskType,
    ask_of,
    ask_problem,
    choose_devices,
    fits,
    usable,
)
from optplan.solvers.placement.binpack import binpack_scores

GPU = "nvidia.com/gpu"
BINPACK_WEIGHTS = BinpackWeights(resources={GPU: 1})
"""The ``binpack`` policy's weights: cpu 1, memory 1 (Volcano's defaults) and the GPU, counted in milli, 1."""

log = logging.getLogger(__name__)

FAMILY = registry.SIM_SHARED
"""The policies' family in ``optplan.solvers.core.registry``."""
PEERS = ("random", "dotprod", "gpu-clustering", "gpu-packing", "best-fit", "fgd")
"""The paper's policies, in its order."""
HOLDS = ("frag-admit", "frag-defer")
"""optplan's policies that leave out pods that fit when they arrive (refused, or held back): not work-conserving,
reported apart from the others."""
_EPS = 1e-9
MAX_SCORE = 100
"""kube-scheduler's highest node score: the peers score nodes in integers 0..100, as its score plugins do."""
MAX_SPEC_CPU = 128_000
MAX_SPEC_GPU = 8 * MILLI
"""The largest node's cpu (milli) and GPUs (milli): the peers' normalisation (the paper's simulator's)."""
TYPICAL_PERCENT = 95
"""FGD's target workload: the most frequent task types covering this share of the trace's pods."""


def fgd_score(growth: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """FGD's node score for a growth of fragmentation (milli): sigmoid(-growth / 1000) x 100, truncated."""
    return np.floor(MAX_SCORE * (1.0 / (1.0 + np.exp(growth / 1000.0))))


def typical_workload(target: TargetWorkload, percent: float = TYPICAL_PERCENT) -> TargetWorkload:
    """FGD's target workload: the most frequent task types (ties in their order in ``target``) until they cover
    ``percent`` of the pods, their frequencies renormalised."""
    ranked = sorted(target.types, key=lambda t: -t.weight)
    kept: list[TaskType] = []
    covered = 0.0
    for t in ranked:
        if covered >= percent / 100 - _EPS:
            break
        kept.append(t)
        covered += t.weight
    return TargetWorkload(tuple(TaskType(t.cpu, t.ask, t.weight / covered) for t in kept))


def affinity_bit(ask: GpuAsk) -> int:
    """GpuClustering's GPU affinity of a pod as one bit: any share (bit 0), or k whole GPUs (bit k)."""
    return 1 if ask.is_share else 1 << ask.whole


@dataclass(frozen=True)
class Arrival:
    name: str
    cpu: int  # milli
    memory: int  # MiB
    ask: GpuAsk


def arrival_of(p: SimPod) -> Arrival:
    """A trace pod as an arrival; a malformed GPU ask is bad input."""
    ask = ask_of(p.gpu, p.gpu_milli, p.models)
    problem = ask_problem(ask)
    if problem is not None:
        raise InputError(problem, obj=p.name, field="gpu")
    return Arrival(p.name, p.cpu, p.memory, ask)


@dataclass(frozen=True)
class SharedConfig:
    seed: int = 0
    batch: int | None = None
    """``frag-batch``, ``frag-hole-batch``: arrivals placed together by one CP-SAT solve (None: the policy's
    ``default_batch``, 16 and 64)."""
    batch_nodes: int = 6
    """``frag-batch``: candidate nodes per arrival (FGD's best scores, then the first names)."""
    batch_holes: int = 4
    """``frag-batch``: extra candidate devices per share: the least free devices with room anywhere."""
    batch_dtime: float = 0.5
    """``frag-batch``: CP-SAT's deterministic time limit per solve (deterministic, unlike a wall-clock limit)."""
    max_wait: int | None = None
    """``frag-defer``: a held share is placed wherever it fits (``frag-hole``'s rule) once this many arrivals came
    after it (checked after each batch); None: no bound."""
    batch_check: bool | None = None
    """``frag-hole-batch``: keep a solve that places as many milli-GPUs as ``frag-hole``'s sequence only when it
    leaves the nodes it touches less fragmented, by FGD's measure after the batch (docs/benchmarks.md, "Why
    frag-hole-batch fell below frag-hole"); None: when some pods of the trace require a GPU model."""


@dataclass(frozen=True)
class SharedResult:
    policy: str
    seed: int
    total_milli: int
    requested_milli: int
    allocated_milli: int
    placed: int
    rejected: int
    wall_seconds: float
    assignment: tuple[tuple[int, tuple[int, ...]] | None, ...]
    """(node index, devices) per arrival, None when rejected."""
    curve: tuple[float, ...] = ()
    """Allocation (%) when the arrived requests first reach k% of the cluster's GPUs, k = 0, 1, ... (the paper's
    ``analysis_allo_discrete.csv`` columns)."""
    waits: tuple[tuple[int, int], ...] = ()
    """``frag-defer``: (arrival index, arrivals it waited) of each share placed after it was held back."""
    waiting: tuple[int, ...] = ()
    """``frag-defer``: the arrival index of each share still held back at the end."""

    @property
    def alloc_percent(self) -> float:
        return 100.0 * self.allocated_milli / self.total_milli if self.total_milli else 0.0


class DevCluster:
    """Free resources per node and per device (module docstring), numpy arrays in node-name order."""

    def __init__(self, nodes: Sequence[SimNode]) -> None:
        self.nodes = sorted(nodes, key=lambda n: n.name)
        if len({n.name for n in self.nodes}) != len(self.nodes):
            raise InputError("node names are not unique", field="nodes")
        n = len(self.nodes)
        self.cap_cpu = np.array([x.cpu for x in self.nodes], dtype=np.int64)
        self.cap_mem = np.array([x.memory for x in self.nodes], dtype=np.int64)
        self.ngpu = np.array([x.gpu for x in self.nodes], dtype=np.int64)
        self.devices = max(1, int(self.ngpu.max(initial=0)))
        self.free_cpu = self.cap_cpu.copy()
        self.free_mem = self.cap_mem.copy()
        self.free_gpu = np.where(np.arange(self.devices)[None, :] < self.ngpu[:, None], MILLI, 0).astype(np.int64)
        self.models = np.array([x.model for x in self.nodes], dtype=str)
        self.pods = np.zeros(n, dtype=np.int64)
        self.gpu_pods = np.zeros(n, dtype=np.int64)
        self.affinity = np.zeros(n, dtype=np.int64)
        """GpuClustering's bookkeeping: the GPU affinities of the node's GPU pods (``affinity_bit``), or-ed."""
        self.version = np.zeros(n, dtype=np.int64)
        self.free_total = np.zeros(n, dtype=np.int64)
        """Per node: free GPU milli, entirely free devices, the most free milli of one device (kept by ``take``)."""
        self.full = np.zeros(n, dtype=np.int64)
        self.most = np.zeros(n, dtype=np.int64)
        self._sums(slice(None))
        self.total_milli = int(self.ngpu.sum()) * MILLI
        self.allocated = 0
        self._allowed: dict[frozenset[str], np.ndarray[Any, Any]] = {}

    def allowed(self, ask: GpuAsk) -> np.ndarray[Any, Any]:
        key = ask.models if not ask.none else frozenset()
        mask = self._allowed.get(key)
        if mask is None:
            mask = np.isin(self.models, list(key)) if key else np.ones(len(self.nodes), dtype=bool)
            self._allowed[key] = mask
        return mask

    def fits(self, p: Arrival) -> np.ndarray[Any, Any]:
        ok = self.allowed(p.ask) & (self.free_cpu >= p.cpu) & (self.free_mem >= p.memory)
        if p.ask.is_share:
            ok &= self.most >= p.ask.milli
        elif p.ask.whole:
            ok &= self.full >= p.ask.whole
        return ok

    def take(self, i: int, p: Arrival, devices: tuple[int, ...]) -> None:
        self.free_cpu[i] -= p.cpu
        self.free_mem[i] -= p.memory
        per = p.ask.milli if p.ask.is_share else MILLI
        for d in devices:
            self.free_gpu[i, d] -= per
        self.allocated += per * len(devices)
        self.pods[i] += 1
        if not p.ask.none:
            self.affinity[i] |= affinity_bit(p.ask)
            self.gpu_pods[i] += 1
            self._sums(i)
        self.version[i] += 1

    def _sums(self, i: int | slice) -> None:
        free = self.free_gpu[i]
        self.free_total[i] = free.sum(axis=-1)
        self.full[i] = (free == MILLI).sum(axis=-1)
        self.most[i] = free.max(axis=-1)

    def row(self, i: int) -> list[int]:
        return self.free_gpu[i, : self.ngpu[i]].tolist()

    _STATE = ("free_cpu", "free_mem", "free_gpu", "pods", "gpu_pods", "affinity", "free_total", "full", "most")

    def snapshot(self) -> tuple[Any, ...]:
        """A copy of the state ``take`` changes, for ``restore``."""
        return (self.allocated, self.version.copy(), *(getattr(self, k).copy() for k in self._STATE))

    def restore(self, snap: tuple[Any, ...]) -> None:
        """Back to the state of ``snap``; a node changed since gets a version it never had (caches keyed on the
        version stay right)."""
        self.allocated, version, *arrays = snap
        for k, a in zip(self._STATE, arrays, strict=True):
            np.copyto(getattr(self, k), a)
        self.version[self.version != version] += 1


# ---- the policies -----------------------------------------------------------------------------

Placement = tuple[int, tuple[int, ...]] | None
"""(node index, devices) of one arrival, None when rejected."""


class _Policy:
    name = ""

    def __init__(self, cl: DevCluster, cfg: SharedConfig, target: TargetWorkload) -> None:
        self.cl = cl
        self.rng = random.Random(f"{cfg.seed}/{self.name}")
        self.solves: dict[str, int] = {}
        """Outcome of each batch's solve (CP-SAT status, or HINT when the policy's own sequence was kept),
        counted; empty for a policy without solves."""

    random_ties = False
    """Among nodes of equal score: uniform at random (True), or the first by name (the paper's simulator)."""

    def pick(self, score: np.ndarray[Any, Any], fits: np.ndarray[Any, Any]) -> int:
        """The highest score among the nodes that fit; among equals the first by name, or uniform at random."""
        masked = np.where(fits, score, -np.inf)
        top = masked.max()
        best = np.flatnonzero(masked >= top - _EPS * max(1.0, abs(top)))
        return int(best[self.rng.randrange(len(best))]) if self.random_ties and len(best) > 1 else int(best[0])

    def devices(self, i: int, p: Arrival) -> tuple[int, ...]:
        got = choose_devices(self.cl.row(i), p.ask)
        assert got is not None, f"{p.name} does not fit node {i}"
        return got

    def score(self, p: Arrival, fits: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        raise NotImplementedError

    def choose(self, p: Arrival, fits: np.ndarray[Any, Any]) -> tuple[int, tuple[int, ...]]:
        i = self.pick(self.score(p, fits), fits)
        return i, self.devices(i, p)

    def admits(self, p: Arrival, fits: np.ndarray[Any, Any]) -> bool:
        """Whether the policy places ``p``, which fits the nodes of ``fits`` (some do): every policy does, but
        ``frag-admit``."""
        return True

    batch = 1
    """Arrivals per ``place``: one, each on its arrival (the look-ahead policies of ``sim.lookahead``: more)."""

    def place(self, pods: Sequence[Arrival]) -> list[Placement]:
        """The placement of each of ``batch`` arrivals (None: left out), the cluster updated: each on arrival."""
        return [self.arrive(p) for p in pods]

    def release(self) -> list[tuple[int, Placement]]:
        """After each ``place``: (arrival index, placement) of each arrival held back before and placed now; a
        policy that holds nothing back places none."""
        return []

    def waiting(self) -> tuple[int, ...]:
        """The arrival index of each arrival still held back (none unless the policy holds some back)."""
        return ()

    def arrive(self, p: Arrival) -> Placement:
        """``p`` placed on its arrival by the policy's rule (``admits``, then ``choose``) where it fits, the
        cluster updated; None when it fits nowhere or is refused."""
        fits = self.cl.fits(p)
        if not (fits.any() and self.admits(p, fits)):
            return None
        i, devs = self.choose(p, fits)
        self.cl.take(i, p, devs)
        return i, devs


def left_after(cl: DevCluster, p: Arrival) -> np.ndarray[Any, Any]:
    """frag-aware's fullest-node measure: free cpu and free GPU (milli) after placing ``p``, each over the node's
    capacity (the GPU term 0 on nodes without GPUs)."""
    cap = cl.ngpu * MILLI
    left_gpu = np.where(cap > 0, (cl.free_total - p.ask.total_milli) / np.maximum(cap, 1), 0.0)
    return (cl.free_cpu - p.cpu) / cl.cap_cpu + left_gpu


class RandomPolicy(_Policy):
    name = "random"
    random_ties = True

    def score(self, p: Arrival, fits: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        return np.zeros(len(fits))

    def devices(self, i: int, p: Arrival) -> tuple[int, ...]:
        if not p.ask.is_share:
            return super().devices(i, p)
        ok = usable(self.cl.row(i), p.ask)
        return (ok[self.rng.randrange(len(ok))],)


class DotProdPolicy(_Policy):
    name = "dotprod"

    def score(self, p: Arrival, fits: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        cl = self.cl
        dot = ((cl.free_cpu / MAX_SPEC_CPU) * (p.cpu / MAX_SPEC_CPU)
               + (cl.free_total / MAX_SPEC_GPU) * (p.ask.total_milli / MAX_SPEC_GPU))
        return np.trunc(MAX_SCORE * (1.0 - dot / 2))


class GpuClusteringPolicy(_Policy):
    name = "gpu-clustering"

    def score(self, p: Arrival, fits: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        cl = self.cl
        if p.ask.none:
            return np.zeros(len(fits))
        tag = affinity_bit(p.ask)
        tier = np.where(cl.affinity == tag, 3, np.where(cl.affinity & tag, 2, np.where(cl.affinity == 0, 1, 0)))
        quarter = MAX_SCORE // 4
        return tier * quarter + quarter * (MAX_SPEC_GPU - cl.free_total) // MAX_SPEC_GPU


class GpuPackingPolicy(_Policy):
    name = "gpu-packing"

    def score(self, p: Arrival, fits: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        cl = self.cl
        if p.ask.none:
            return np.zeros(len(fits))
        full = cl.full
        idle = np.maximum(MAX_SCORE // 3 - full, full)
        if p.ask.is_share:
            # the device it would take: the least free one that has room
            room = np.where(cl.free_gpu >= p.ask.milli, cl.free_gpu, MILLI + 1).min(axis=1)
            used = np.where(room < MILLI, np.maximum(MAX_SCORE - room * 100 // MILLI // 10, MAX_SCORE // 2),
                            max(MAX_SCORE // 2 - 1, MAX_SCORE // 3))
        else:
            used = np.full(len(fits), max(MAX_SCORE // 2 - p.ask.whole, MAX_SCORE // 3))
        return np.where(full == cl.ngpu, idle, used)


class BestFitPolicy(_Policy):
    name = "best-fit"

    def score(self, p: Arrival, fits: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        cl = self.cl
        rest = (0.5 * (cl.free_cpu - p.cpu) / MAX_SPEC_CPU
                + 0.5 * (cl.free_total - p.ask.total_milli) / MAX_SPEC_GPU)
        raw = np.trunc((1.0 - rest) * MAX_SCORE).astype(np.int64)
        lo, hi = int(raw[fits].min()), int(raw[fits].max())
        if hi == lo:
            return np.zeros(len(fits))
        return (raw - lo) * MAX_SCORE // (hi - lo)


class BinpackPolicy(_Policy):
    """optplan's greedy: Volcano's binpack (cpu, memory, GPU milli; weight 1 each) and best-fit devices."""

    name = "binpack"
    random_ties = True

    def score(self, p: Arrival, fits: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        cl = self.cl
        return binpack_scores({"cpu": p.cpu, "memory": p.memory, GPU: p.ask.total_milli},
                              {"cpu": cl.cap_cpu, "memory": cl.cap_mem, GPU: cl.ngpu * MILLI},
                              {"cpu": cl.free_cpu, "memory": cl.free_mem, GPU: cl.free_total},
                              BINPACK_WEIGHTS)


class FgdPolicy(_Policy):
    """FGD: the least growth of fragmentation as an integer score (module docstring); cached per (shape, node),
    recomputed for the nodes that changed since."""

    name = "fgd"
    scored = True
    """Rank by FGD's integer score (ties uniform) and take a share's first device of the best score; False: by the
    float growth, a share's device of least growth, then least free milli."""

    def __init__(self, cl: DevCluster, cfg: SharedConfig, target: TargetWorkload) -> None:
        super().__init__(cl, cfg, target)
        self.target = self.target_of(target)
        self.table = FragTable(self.target, cl.models.tolist())
        self.model_ids = self.table.ids(cl.models.tolist())
        n = len(cl.nodes)
        self.before = self.table(cl.free_gpu, cl.free_cpu, self.model_ids)
        self.before_ver = cl.version.copy()
        self.delta: dict[tuple[int, int, int, int], np.ndarray[Any, Any]] = {}
        self.dev: dict[tuple[int, int, int, int], np.ndarray[Any, Any]] = {}
        self.ver: dict[tuple[int, int, int, int], np.ndarray[Any, Any]] = {}
        self.n = n

    strict = False
    """``frag-hole``: while set, a share's devices are only those ``room`` allows (cached apart)."""

    def target_of(self, target: TargetWorkload) -> TargetWorkload:
        return typical_workload(target)

    def room(self, free: np.ndarray[Any, Any], p: Arrival) -> np.ndarray[Any, Any]:
        """The devices (rows of free milli) that can take the share ``p``."""
        return free >= p.ask.milli

    def frag(self, free: np.ndarray[Any, Any], cpu: np.ndarray[Any, Any], models: np.ndarray[Any, Any]) -> Any:
        return self.table(free, cpu, models)

    def refresh(self, p: Arrival, fits: np.ndarray[Any, Any]) -> tuple[int, int, int, int]:
        cl = self.cl
        key = (p.cpu, p.ask.whole, p.ask.milli, int(self.strict))
        if key not in self.delta:
            self.delta[key] = np.zeros(self.n)
            self.dev[key] = np.full(self.n, -1, dtype=np.int64)
            self.ver[key] = np.full(self.n, -1, dtype=np.int64)
        stale_before = np.flatnonzero(self.before_ver != cl.version)
        if len(stale_before):
            self.before[stale_before] = self.frag(cl.free_gpu[stale_before], cl.free_cpu[stale_before],
                                                  self.model_ids[stale_before])
            self.before_ver[stale_before] = cl.version[stale_before]
        idx = np.flatnonzero(fits & (self.ver[key] != cl.version))
        if len(idx) == 0:
            return key
        free = cl.free_gpu[idx]
        cpu = cl.free_cpu[idx] - p.cpu
        models = self.model_ids[idx]
        if p.ask.is_share:
            rows, devs = np.nonzero(self.room(free, p))
            after = free[rows].copy()
            after[np.arange(len(rows)), devs] -= p.ask.milli
            d = self.frag(after, cpu[rows], models[rows]) - self.before[idx[rows]]
            if self.scored:  # per node: the best score, then the lowest device
                d = -fgd_score(d)
                order = np.lexsort((devs, d, rows))
            else:  # per node: least growth, then least free milli, then lowest device
                order = np.lexsort((devs, free[rows, devs], d, rows))
            first = np.r_[True, rows[order][1:] != rows[order][:-1]]
            pick = order[first]
            self.delta[key][idx[rows[pick]]] = d[pick]
            self.dev[key][idx[rows[pick]]] = devs[pick]
        else:
            after = free.copy()
            if p.ask.whole:
                whole = after == MILLI
                take = whole & (np.cumsum(whole, axis=1) <= p.ask.whole)
                after[take] = 0
            d = self.frag(after, cpu, models) - self.before[idx]
            self.delta[key][idx] = -fgd_score(d) if self.scored else d
        self.ver[key][idx] = cl.version[idx]
        return key

    def score(self, p: Arrival, fits: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        return -self.delta[self.refresh(p, fits)]

    def choose(self, p: Arrival, fits: np.ndarray[Any, Any]) -> tuple[int, tuple[int, ...]]:
        key = self.refresh(p, fits)
        i = self.pick(-self.delta[key], fits)
        if p.ask.is_share:
            return i, (int(self.dev[key][i]),)
        return i, self.devices(i, p)


class FragAwarePolicy(FgdPolicy):
    """optplan's: FGD's score, ties to the fullest node, a share's device by the least float growth, cpu-only pods
    kept off GPU nodes (module docstring)."""

    name = "frag-aware"
    scored = False
    random_ties = True

    def choose(self, p: Arrival, fits: np.ndarray[Any, Any]) -> tuple[int, tuple[int, ...]]:
        cl = self.cl
        if p.ask.none:
            cpu_node = fits & (cl.ngpu == 0)
            if cpu_node.any():
                return self.pick(-(cl.free_cpu - p.cpu) / cl.cap_cpu, cpu_node), ()
        key = self.refresh(p, fits)
        score = np.where(fits, fgd_score(self.delta[key]), -1.0)
        i = self.pick(-left_after(cl, p), fits & (score == score.max()))
        if p.ask.is_share:
            return i, (int(self.dev[key][i]),)
        return i, self.devices(i, p)


def model_pressure(cl: DevCluster, target: TargetWorkload) -> np.ndarray[Any, Any]:
    """Per node: how contested its GPU model is by the pods that require a model. A task type that requires
    models M adds its GPU demand over the supply of M to each model of M; the sum is taken relative to the
    workload's whole GPU demand over the cluster's GPUs (1: the model's own pods alone would ask its whole
    supply in the trace's proportions). 0 on every node when no pod requires a model."""
    supply: dict[str, int] = {}
    for m, g in zip(cl.models.tolist(), cl.ngpu.tolist(), strict=True):
        supply[m] = supply.get(m, 0) + g * MILLI
    demand = sum(t.weight * t.ask.total_milli for t in target.types)
    press = dict.fromkeys(supply, 0.0)
    for t in target.types:
        if t.ask.none or not t.ask.models:
            continue
        ms = [m for m in t.ask.models if m in supply]
        of = sum(supply[m] for m in ms)
        for m in ms:
            press[m] += t.weight * t.ask.total_milli / of if of else 0.0
    scale = sum(supply.values()) / demand if demand else 0.0
    return np.array([press[m] * scale for m in cl.models.tolist()])


MULTI_GPU_SHARE = 0.15
"""``frag-spread`` packs when pods of 2 GPUs or more ask at least this share of the trace's GPU demand (the
default trace: 7.3%; the multigpu workloads 20-50%): spreading would leave no idle node for them."""


class FragSpreadPolicy(FgdPolicy):
    """optplan's: FGD's score and device, its ties broken by the spread of the free resources instead of the node
    name (module docstring)."""

    name = "frag-spread"

    def __init__(self, cl: DevCluster, cfg: SharedConfig, target: TargetWorkload) -> None:
        super().__init__(cl, cfg, target)
        self.pressure = model_pressure(cl, target)
        demand = sum(t.weight * t.ask.total_milli for t in target.types)
        multi = sum(t.weight * t.ask.total_milli for t in target.types if t.ask.whole >= 2)
        self.pack = bool(self.pressure.any()) or multi >= MULTI_GPU_SHARE * demand
        """Some pods require a GPU model, or multi-GPU pods ask a large share of the GPUs: ties to the fullest
        node (least contested model first), else the emptiest."""

    def choose(self, p: Arrival, fits: np.ndarray[Any, Any]) -> tuple[int, tuple[int, ...]]:
        key = self.refresh(p, fits)
        score = np.where(fits, -self.delta[key], -np.inf)
        best = np.flatnonzero(fits & (score == score.max()))
        left = left_after(self.cl, p)[best]
        contested = self.pressure[best] if not p.ask.none else np.zeros(len(best))
        i = int(best[np.lexsort((best, left if self.pack else -left, contested))[0]])
        if p.ask.is_share:
            return i, (int(self.dev[key][i]),)
        return i, self.devices(i, p)


HOLE_DEMAND = 0.01
"""``frag-hole``: a hole of h free milli on a device is fillable when the trace's shares of h milli or less ask at
least this share of its GPU demand."""


class FragHolePolicy(FragSpreadPolicy):
    """optplan's: ``frag-spread``, but a share that would leave an unfillable hole on an entirely free device goes
    first to a partly used device with room, then to a spare device (module docstring)."""

    name = "frag-hole"

    def __init__(self, cl: DevCluster, cfg: SharedConfig, target: TargetWorkload) -> None:
        super().__init__(cl, cfg, target)
        small = np.zeros(MILLI + 1)
        for t in target.types:
            if t.ask.is_share:
                small[t.ask.milli] += t.weight * t.ask.milli
        demand = sum(t.weight * t.ask.total_milli for t in target.types)
        self.fillable = np.cumsum(small) >= HOLE_DEMAND * demand if demand else np.ones(MILLI + 1, dtype=bool)
        self.fillable[0] = True
        """Per hole size h (0..MILLI): no hole, or the trace's shares that fit in h ask ``HOLE_DEMAND`` of its
        GPU demand or more."""
        whole = [t for t in target.types if t.ask.whole]
        gpus = sum(t.weight * t.ask.whole for t in whole)
        self.cpu_per_gpu = max(1, round(sum(t.weight * t.cpu for t in whole) / gpus)) if gpus else MAX_SPEC_CPU
        """The trace's whole-GPU pods' cpu per GPU (milli, weighted by pods): what a free device needs beside it
        (the largest node's cpu when the trace has no whole-GPU pod: then every free device is spare)."""

    def closes(self, p: Arrival) -> bool:
        """A share that leaves an unfillable hole on an entirely free device."""
        return p.ask.is_share and not self.fillable[MILLI - p.ask.milli]

    def room(self, free: np.ndarray[Any, Any], p: Arrival) -> np.ndarray[Any, Any]:
        ok = free >= p.ask.milli
        return ok & (free < MILLI) if self.strict else ok

    def refuge(self, p: Arrival, fits: np.ndarray[Any, Any]) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        """The nodes of ``fits`` with a partly used device that has room for the share ``p``; and those with a
        spare device: one more entirely free device than their free cpu after ``p`` could feed with whole GPUs at
        ``cpu_per_gpu`` each."""
        cl = self.cl
        free = cl.free_gpu
        used = fits & ((free >= p.ask.milli) & (free < MILLI)).any(axis=1)
        spare = fits & (cl.full >= 1) & (cl.full - 1 >= (cl.free_cpu - p.cpu) // self.cpu_per_gpu)
        return used, spare

    def choose(self, p: Arrival, fits: np.ndarray[Any, Any]) -> tuple[int, tuple[int, ...]]:
        if self.closes(p):
            used, spare = self.refuge(p, fits)
            if used.any():
                self.strict = True
                try:
                    return super().choose(p, used)
                finally:
                    self.strict = False
            if spare.any():
                return super().choose(p, spare)
        return super().choose(p, fits)


class FragAdmitPolicy(FragHolePolicy):
    """``frag-hole`` that refuses a share with an unfillable hole that neither a partly used device nor a spare
    device can take (rejects pods that fit: not work-conserving; module docstring)."""

    name = "frag-admit"

    def admits(self, p: Arrival, fits: np.ndarray[Any, Any]) -> bool:
        return not self.closes(p) or any(m.any() for m in self.refuge(p, fits))


# ---- simulation --------------------------------------------------------------------------------

def target_workload(trace: Sequence[SimPod]) -> TargetWorkload:
    """The task-type distribution of a trace: (cpu, GPU ask) with its share of the pods."""
    return TargetWorkload.of((p.cpu, ask_of(p.gpu, p.gpu_milli, p.models)) for p in trace)


def simulate(nodes: Sequence[SimNode], arrivals: Sequence[SimPod], policy: str, target: TargetWorkload,
             config: SharedConfig | None = None) -> SharedResult:
    """Place ``arrivals`` in order on an empty cluster with ``policy``; the final state is verified."""
    if policy not in registry.names(FAMILY):
        raise InputError(f"unknown policy {policy!r} (one of {', '.join(registry.names(FAMILY))})", field="policy")
    cfg = config or SharedConfig()
    t0 = time.perf_counter()
    pods = [arrival_of(p) for p in arrivals]
    cl = DevCluster(nodes)
    pol = registry.load(FAMILY, policy)(cl, cfg, target)
    curve: list[float] = []
    arrived = 0
    out: list[Placement] = []
    waits: list[tuple[int, int]] = []
    for start in range(0, len(pods), pol.batch):
        group = pods[start : start + pol.batch]
        out.extend(pol.place(group))
        for k, where in pol.release():
            out[k] = where
            waits.append((k, len(out) - 1 - k))
        for p in group:
            arrived += p.ask.total_milli
            while cl.total_milli and len(curve) * cl.total_milli <= 100 * arrived:
                curve.append(round(100.0 * cl.allocated / cl.total_milli, 2))
    if pol.solves:
        log.info("%s solves: %s", policy, pol.solves)
    allocated = verify(cl.nodes, pods, out)
    if allocated != cl.allocated:
        raise PlanInvalidError([f"the simulation counted {cl.allocated} allocated milli-GPUs, the check {allocated}"])
    placed = sum(1 for x in out if x is not None)
    return SharedResult(policy=policy, seed=cfg.seed, total_milli=cl.total_milli,
                        requested_milli=sum(p.ask.total_milli for p in pods), allocated_milli=allocated,
                        placed=placed, rejected=len(out) - placed, wall_seconds=round(time.perf_counter() - t0, 3),
                        assignment=tuple(out), curve=tuple(curve), waits=tuple(waits),
                        waiting=pol.waiting())


def verify(nodes: Sequence[SimNode], pods: Sequence[Arrival],
           assignment: Sequence[tuple[int, tuple[int, ...]] | None]) -> int:
    """Re-check a final state from the assignment alone: each placed pod, in order, on its node's model, its
    devices taking it by ``gpushare``'s rule, cpu and memory within the node. Returns the allocated milli-GPUs;
    raises ``PlanInvalidError``."""
    if len(assignment) != len(pods):
        raise PlanInvalidError([f"{len(assignment)} assignments for {len(pods)} arrivals"])
    ordered = sorted(nodes, key=lambda n: n.name)
    cpu = [n.cpu for n in ordered]
    mem = [n.memory for n in ordered]
    gpus = [[MILLI] * n.gpu for n in ordered]
    problems: list[str] = []
    allocated = 0
    for k, (p, where) in enumerate(zip(pods, assignment, strict=True)):
        if where is None:
            continue
        i, devs = where
        node = ordered[i]
        per = p.ask.milli if p.ask.is_share else MILLI
        if len(set(devs)) != p.ask.devices or any(not 0 <= d < node.gpu for d in devs):
            problems.append(f"arrival {k + 1} ({p.name}) on {node.name}: devices {devs} for {p.ask}")
            continue
        one = GpuAsk(whole=1 if not p.ask.is_share else 0, milli=p.ask.milli, models=p.ask.models)
        if not p.ask.none and not all(fits([gpus[i][d]], one, model=node.model) for d in devs):
            problems.append(f"arrival {k + 1} ({p.name}) on {node.name}: devices {devs} cannot take {p.ask}")
        for d in devs:
            gpus[i][d] -= per
        cpu[i] -= p.cpu
        mem[i] -= p.memory
        if cpu[i] < 0 or mem[i] < 0:
            problems.append(f"node {node.name} is over-committed on cpu or memory at arrival {k + 1}")
        allocated += per * len(devs)
    if problems:
        raise PlanInvalidError(problems[:20])
    return allocated
