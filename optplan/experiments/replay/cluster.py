"""The replay's cluster: free cpu, memory, GPUs and pod slots per node (the online simulation's numpy
state, ``sim.online.SimCluster``, with its binpack cache ``BinpackCache``) and Volcano's allocate on it.

Allocate (``engine.Replay.allocate``, on this state), as optplan's placement greedy runs it
(``placement.allocate``), for one queue and jobs without priorities: jobs not ready yet first, by creation
time then name; each gets its gang turn: its pods one by one, each on the feasible node with the highest
binpack score (Volcano's formula, ``placement.binpack_score``; ties to the first node by name), until
``min_member`` run — or, when they cannot, nothing (the gang is all or nothing). Then the ready jobs with pods
still waiting get one pod per turn, round robin in the same order; a pod that fits nowhere waits for the next
cycle. With ``spread`` (the ``nobinpack`` policy) the node is chosen as Volcano does without its binpack
plugin: the default nodeorder plugin's leastrequested score (kube-scheduler's LeastAllocated on cpu and
memory: per resource (capacity − requested after placement) × 100 / capacity, integers, averaged), the
highest score, ties to the first node by name.

Two facts make a cycle cheap and change no outcome. A gang's pods are identical and nodes do not
interact, so the most pods of a shape the cluster holds now is Σ over allowed nodes of the pods each node
holds alone (``room``): a gang becomes ready exactly when ``room`` >= what it still needs, and greedy's
choices then always succeed. And placing only takes room, so within one cycle a shape that failed fails
again for the same or a larger need, and between cycles a job that failed fails again until room is
freed (a pod leaves or moves): ``Cluster.freed`` says when the waiting jobs must be tried again.

``room`` is kept incrementally (``RoomIndex``): per pod shape asked about, the pods each node holds and
their sum; a take or give back marks its node, and the next question recomputes the marked nodes for every
shape at once. A departure then costs the few nodes it touched, not a pass over every node per waiting
queue. ``Cluster(rescan=True)`` recomputes every node on every question instead (the former path, kept for
the test that proves both give the same replay).

Shares (a trace read with ``--shared``: gangs whose pods ask ``milli`` < 1000 of one GPU) are placed at device
level by ``gpushare``'s rule, the one the oracle and the validators use: a node's GPUs become devices of 1000
milli-GPU once the first share arrives (the whole cards already placed on the lowest-indexed ones, where
``gpushare.choose_devices`` puts whole cards); a share goes to the best-fit device (the least free milli that
is enough; ties: the lowest index), whole cards to the lowest-indexed untouched devices, and the node's free
GPUs count its untouched devices. A share fits a node whose cpu, memory and pod slots fit and one device
has its milli free; its binpack score counts cpu and memory (a vGPU share asks no ``nvidia.com/gpu``), and
``room`` for it is Σ over devices of free milli // its milli, exact as for whole cards. ``allocated`` then
counts a share's milli-GPU (GPUs, a float). Which of a node's equal shares leaves is not tracked (the engine
gives back by shape): the one placed last on the node frees its device, so same-size shares may trade
devices; every state is one the placements could have made. A Repack move of a share (``take`` and
``give_back`` with a device) leaves the device the snapshot pinned it to and lands on the one its plan names
(``PodMove.to_devices``), checked. Without a share nothing of this runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from optplan.errors import PlanInvalidError
from optplan.experiments.replay.trace import TraceGang
from optplan.experiments.sim.online import BinpackCache, SimCluster, SimNode, SimPod
from optplan.models.placement import BinpackWeights
from optplan.solvers.core import gpushare
from optplan.solvers.core.gpushare import MILLI, GpuAsk

MAX_PODS = 110
"""Pod slots per node (the kubelet's default; what ``optplan import openb`` gives every node)."""
_CPU, _MEM, _GPU = 0, 1, 2


def pods_per_node(free: np.ndarray[Any, Any], pods: np.ndarray[Any, Any], asks: np.ndarray[Any, Any],
                  allowed: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Pods of each shape (rows of ``asks``: cpu, memory, GPUs) each node (rows of ``free``, ``pods`` in
    use) holds alone; ``allowed`` (shapes × nodes) masks the nodes a shape may use."""
    per = np.broadcast_to(MAX_PODS - pods, (len(asks), len(pods))).copy()
    for r in (_CPU, _MEM, _GPU):
        q = asks[:, r:r + 1]
        per = np.minimum(per, np.where(q > 0, free[:, r][None, :] // np.maximum(q, 1), MAX_PODS))
    return np.where(allowed, np.maximum(per, 0), 0)


class RoomIndex:
    """``room`` per pod shape, kept up to date from the nodes marked changed (module docstring)."""

    def __init__(self, cl: SimCluster) -> None:
        self.cl = cl
        self.row: dict[tuple[int, int, int, tuple[str, ...]], int] = {}
        self.asks = np.zeros((0, 3), dtype=np.int64)
        self.allowed = np.zeros((0, len(cl.nodes)), dtype=bool)
        self.per = np.zeros((0, len(cl.nodes)), dtype=np.int64)
        self.total = np.zeros(0, dtype=np.int64)
        self.dirty: set[int] = set()

    def room(self, pod: SimPod, key: tuple[int, int, int, tuple[str, ...]]) -> int:
        k = self.row.get(key)
        if k is None:
            self.flush()
            k = self.row[key] = len(self.total)
            ask = np.array([[pod.cpu, pod.memory, pod.gpu]], dtype=np.int64)
            allowed = self.cl.allowed(pod.models)[None, :]
            per = pods_per_node(self.cl.free, self.cl.pods, ask, allowed)
            self.asks = np.vstack([self.asks, ask])
            self.allowed = np.vstack([self.allowed, allowed])
            self.per = np.vstack([self.per, per])
            self.total = np.append(self.total, per.sum())
            return int(self.total[k])
        self.flush()
        return int(self.total[k])

    def flush(self) -> None:
        if not self.dirty or not len(self.total):
            self.dirty.clear()
            return
        d = np.fromiter(sorted(self.dirty), dtype=np.int64)
        self.dirty.clear()
        per = pods_per_node(self.cl.free[d], self.cl.pods[d], self.asks, self.allowed[:, d])
        self.total += per.sum(axis=1) - self.per[:, d].sum(axis=1)
        self.per[:, d] = per


class Cluster:
    """Free resources per node (name order) with take / give back, the binpack choice and ``room``."""

    def __init__(self, nodes: Sequence[SimNode], weights: BinpackWeights, rescan: bool = False,
                 spread: bool = False) -> None:
        self.cl = SimCluster(nodes)
        self.spread = spread
        """Choose nodes by leastrequested instead of binpack (module docstring)."""
        self.bp = BinpackCache(self.cl, weights)
        self.names = [n.name for n in self.cl.nodes]
        self.index = {n: i for i, n in enumerate(self.names)}
        self.total_gpus = self.cl.total_gpus
        self.version = 0
        """Bumped on every change: equal versions, equal state."""
        self.freed = False
        """Room was given back since the last allocate."""
        self._pods: dict[tuple[int, int, int, tuple[str, ...]], SimPod] = {}
        self.rooms = None if rescan else RoomIndex(self.cl)
        """None: ``room`` recomputes every node (``rescan``)."""
        self.room_checks = 0
        """Questions ``room`` answered (the benchmark reports them)."""
        self.dev: np.ndarray[Any, Any] | None = None
        """Free milli-GPU per node and device (0 past a node's GPUs); None until the first share."""
        self.share_milli = 0
        """Milli-GPU the running shares hold."""
        self._whole_on: list[list[int]] = []
        """Per node, the devices whole cards hold (once ``dev`` exists)."""
        self._shares_on: list[dict[int, list[int]]] = []
        """Per node, milli -> the devices holding a share of that size, in placement order."""

    @property
    def allocated(self) -> int | float:
        """GPUs held: whole cards, plus the shares' milli-GPU / 1000 while shares run."""
        return self.cl.allocated + self.share_milli / MILLI if self.share_milli else self.cl.allocated

    def sim_pod(self, g: TraceGang) -> SimPod:
        pod = self._pods.get(g.shape)
        if pod is None:
            pod = self._pods[g.shape] = (SimPod(g.name, g.cpu, g.memory, 0, g.milli, g.models) if g.is_share
                                         else SimPod(g.name, g.cpu, g.memory, g.gpu, 1000, g.models))
        return pod

    def devices(self) -> np.ndarray[Any, Any]:
        """``dev``, made on first use from the whole cards placed so far (module docstring)."""
        if self.dev is None:
            cap = self.cl.cap[:, _GPU]
            width = int(cap.max()) if len(cap) else 0
            self.dev = np.where(np.arange(width)[None, :] < cap[:, None], MILLI, 0).astype(np.int64)
            used = (cap - self.cl.free[:, _GPU]).tolist()
            self._whole_on = [list(range(int(u))) for u in used]
            for i, held in enumerate(self._whole_on):
                self.dev[i, held] = 0
            self._shares_on = [{} for _ in self.names]
        return self.dev

    def share_devices(self, i: int) -> list[tuple[int, int]]:
        """(milli, device) of each share on node ``i``, by size then device; [] before the first share."""
        if self.dev is None:
            return []
        return sorted((m, d) for m, ds in self._shares_on[i].items() for d in ds)

    def fits(self, pod: SimPod) -> np.ndarray[Any, Any]:
        if pod.gpu_milli < MILLI:
            return self.cl.fits(pod) & (self.cl.pods < MAX_PODS) & (self.devices().max(axis=1) >= pod.gpu_milli)
        return self.cl.fits(pod) & (self.cl.pods < MAX_PODS)

    def room(self, pod: SimPod) -> int:
        """Pods of this shape the cluster holds now, each node alone (see the module docstring)."""
        self.room_checks += 1
        if pod.gpu_milli < MILLI:
            per = (self.devices() // pod.gpu_milli).sum(axis=1)
            per = np.minimum(per, MAX_PODS - self.cl.pods)
            for r, q in ((_CPU, pod.cpu), (_MEM, pod.memory)):
                if q > 0:
                    per = np.minimum(per, self.cl.free[:, r] // q)
            return int(np.where(self.cl.allowed(pod.models), np.maximum(per, 0), 0).sum())
        if self.rooms is not None:
            return self.rooms.room(pod, (pod.cpu, pod.memory, pod.gpu, pod.models))
        free = self.cl.free
        per = np.full(len(self.names), MAX_PODS, dtype=np.int64) - self.cl.pods
        for r, q in ((_CPU, pod.cpu), (_MEM, pod.memory), (_GPU, pod.gpu)):
            if q > 0:
                per = np.minimum(per, free[:, r] // q)
        per = np.where(self.cl.allowed(pod.models), np.maximum(per, 0), 0)
        return int(per.sum())

    def best(self, pod: SimPod) -> int:
        """The binpack choice among the feasible nodes, or -1."""
        fits = self.fits(pod)
        if not fits.any():
            return -1
        if self.spread:
            return least_requested(self.cl.cap, self.cl.free, pod, fits)
        return self.bp.best(pod, fits)

    def take(self, i: int, pod: SimPod, device: int | None = None) -> None:
        """The pod runs on node ``i`` now; a share on ``device`` when given (a Repack plan names it: checked),
        else on the device ``gpushare``'s rule gives it."""
        f = self.cl.free[i]
        if f[_CPU] < pod.cpu or f[_MEM] < pod.memory or f[_GPU] < pod.gpu or self.cl.pods[i] >= MAX_PODS:
            raise PlanInvalidError([f"{pod.name} does not fit on {self.names[i]}"])
        if pod.gpu_milli < MILLI:
            self._take_share(i, pod, device)
        else:
            if self.dev is not None and pod.gpu:
                held = gpushare.choose_devices(self.dev[i].tolist(), GpuAsk(whole=pod.gpu))
                if held is None:  # pragma: no cover - free[_GPU] counts the untouched devices
                    raise PlanInvalidError([f"{pod.name}: no {pod.gpu} untouched GPU(s) on {self.names[i]}"])
                self.dev[i, list(held)] = 0
                self._whole_on[i].extend(held)
            self.cl.take(i, pod)
        self.bp.touch(i)
        if self.rooms is not None:
            self.rooms.dirty.add(i)
        self.version += 1

    def _take_share(self, i: int, pod: SimPod, device: int | None = None) -> None:
        dev = self.devices()
        if device is not None:
            whole = self._whole_on[i]
            if device in whole and (free := [e for e in range(dev.shape[1]) if dev[i, e] == MILLI]):
                # a snapshot puts whole cards on the lowest devices no share holds, where this one may sit on a
                # higher one: whole cards are interchangeable, so the card takes a free device instead
                whole[whole.index(device)] = free[0]
                dev[i, free[0]], dev[i, device] = 0, MILLI
            if not gpushare.fits_on(dev[i].tolist(), GpuAsk(milli=pod.gpu_milli), (device,)):
                raise PlanInvalidError([f"{pod.name}: GPU {device} of {self.names[i]} has not "
                                        f"{pod.gpu_milli} milli-GPU free"])
            held: tuple[int, ...] | None = (device,)
        else:
            held = gpushare.choose_devices(dev[i].tolist(), GpuAsk(milli=pod.gpu_milli))
        if not held:
            raise PlanInvalidError([f"{pod.name}: no GPU of {self.names[i]} has {pod.gpu_milli} milli-GPU free"])
        d = held[0]
        if dev[i, d] == MILLI:
            self.cl.free[i, _GPU] -= 1  # an untouched device no more
        dev[i, d] -= pod.gpu_milli
        self._shares_on[i].setdefault(pod.gpu_milli, []).append(d)
        self.cl.free[i, _CPU] -= pod.cpu
        self.cl.free[i, _MEM] -= pod.memory
        self.cl.pods[i] += 1
        self.share_milli += pod.gpu_milli

    def give_back(self, i: int, pod: SimPod, device: int | None = None) -> None:
        """The pod leaves node ``i``; a share from ``device`` when given (a Repack move names where it was),
        else the last placed of its size (module docstring)."""
        if pod.gpu_milli < MILLI:
            dev = self.devices()
            placed = self._shares_on[i][pod.gpu_milli]
            if device is None:
                d = placed.pop()
            else:
                placed.reverse()  # the last placed share of its size on that device goes
                placed.remove(device)
                placed.reverse()
                d = device
            dev[i, d] += pod.gpu_milli
            if dev[i, d] == MILLI:
                self.cl.free[i, _GPU] += 1
            self.cl.free[i, _CPU] += pod.cpu
            self.cl.free[i, _MEM] += pod.memory
            self.share_milli -= pod.gpu_milli
        else:
            if self.dev is not None and pod.gpu:
                for _ in range(pod.gpu):
                    self.dev[i, self._whole_on[i].pop()] = MILLI
            self.cl.free[i] += (pod.cpu, pod.memory, pod.gpu)
            self.cl.allocated -= pod.gpu
        self.cl.pods[i] -= 1
        self.bp.touch(i)
        if self.rooms is not None:
            self.rooms.dirty.add(i)
        self.version += 1
        self.freed = True

    def occupied_gpu_nodes(self) -> int:
        """Nodes with a GPU in use."""
        cap, free = self.cl.cap, self.cl.free
        return int(((cap[:, _GPU] > 0) & (free[:, _GPU] < cap[:, _GPU])).sum())

    def packed_bound(self) -> int:
        """Fewest GPU nodes that could hold the GPUs in use (largest nodes first, cards only): a lower
        bound of the theoretical minimum, so ``occupied_gpu_nodes() <= packed_bound()`` means no
        fragmentation."""
        used = self.cl.allocated + -(-self.share_milli // MILLI)  # shares: their milli-GPU in cards, rounded up
        if used <= 0:
            return 0
        sizes = np.sort(self.cl.cap[:, _GPU])[::-1]
        return int(np.searchsorted(np.cumsum(sizes), used) + 1)


def least_requested(cap: np.ndarray[Any, Any], free: np.ndarray[Any, Any], pod: SimPod,
                    fits: np.ndarray[Any, Any]) -> int:
    """The feasible node with the highest leastrequested score (module docstring); the first by name on a tie."""
    score = np.zeros(len(cap), dtype=np.int64)
    for r, q in ((_CPU, pod.cpu), (_MEM, pod.memory)):
        c = np.maximum(cap[:, r], 1)
        score += np.where(cap[:, r] > 0, (free[:, r] - q) * 100 // c, 0)
    return int(np.argmax(np.where(fits, score // 2, -1)))
