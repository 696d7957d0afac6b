"""A Snapshot of the replay's state, for the Repack planners and placement's pending verdict; built only
when a Repack runs or a pending gang is judged.

Objects, in the shape ``optplan import openb`` gives them: one Node per trace node (allocatable cpu,
memory, ``nvidia.com/gpu`` and 110 pods; the GPU model as the label ``nvidia.com/gpu.product``); per
running pod a Running pod in namespace ``replay``, scheduled by Volcano, in its gang's PodGroup (owned by
the VCJob of the gang's name, ``minMember`` the gang's), with a required node affinity on the allowed
models. A gang judged by placement's pending verdict is also a Pending VCJob (one task ``worker``) so
that placement sees it as waiting. With a restart policy (``build(restart=RestartJob)``, the replay's
``config.RESTARTS``) every gang is a VCJob whose policy on ``PodEvicted`` is that action (a running gang's
VCJob is Running) — or, for ``ServingGroupRecreate``, a ModelServing with that ``recoveryPolicy`` whose
pods carry its name label —, so the Repack planners price a move's restarts with their own rule. A running
gang some of whose pods finished counts only what is left (``build(finished=...)``, ``left_minimum``): its
VCJob's replicas are the pods not finished and its PodGroup's minMember (and the VCJob's minAvailable) the
minimum less the finished pods, since Volcano counts a Succeeded pod toward its gang; so a move of such a
gang's pod takes it below its minimum only when Volcano would say so. A running pod is named as the replica
Volcano's job controller makes (``replica_name``: ``<gang>-worker-<i>``, the gang's running pods numbered
from 0 in the order the caller lists them, the finished ones not counted, as the VCJob's replicas do not
count them), so placement reads a running gang's pods as its VCJob's replicas that run (``held_pods``): only
a gang with pods not placed yet has pods to place. The caller maps the names back to its pods. Node, pod and
running VCJob objects are cached: a pod is rebuilt only when it moves.

With shares running (``cluster``'s device level), every GPU node lists its devices and a running share is a
pod asking cpu and memory with its ``GpuShare`` pinned to its device, as ``optplan import openb --shared``
writes it and ``adapters.vgpu`` reads it back: the Repack planners then see the devices the shares hold and
move shares like whole-card pods, each to a device their plan names (the engine puts it there). A waiting gang
of shares is not given to the pending verdict (its VCJob template would ask a whole card).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from optplan.experiments.replay.cluster import MAX_PODS
from optplan.experiments.replay.trace import TraceGang
from optplan.experiments.sim.online import GPU as GPU_RESOURCE
from optplan.experiments.sim.online import MODEL_LABEL, SimNode, resources_of
from optplan.models.devices import GpuDevice, GpuShare
from optplan.models.queues import POD_EVICTED, JobTask, LifecyclePolicy, PodTemplate, VCJob
from optplan.models.selectors import NodeSelectorRequirement, NodeSelectorTerm
from optplan.models.snapshot import (
    GROUP_NAME_ANNOTATION,
    ModelServing,
    Node,
    OwnerReference,
    Pod,
    PodGroup,
    Snapshot,
)

NAMESPACE = "replay"
JOB_API = "batch.volcano.sh/v1alpha1"
TASK = "worker"
POLICY_ACTIONS = ("RestartJob", "RestartTask")
"""Restart policies a VCJob states (``pod``, the default unit, states none)."""
SERVING = "ServingGroupRecreate"
"""The restart policy a ModelServing states: each running gang is then one ModelServing's ServingGroup."""
SERVING_LABEL = "modelserving.volcano.sh/name"


@dataclass(frozen=True)
class Running:
    """A placed pod: its name in the snapshot (``replica_name``), its gang and its node."""

    name: str
    gang: TraceGang
    node: str


def replica_name(gang: str, index: int) -> str:
    """The name of the ``index``-th replica of the gang's VCJob, as Volcano's job controller names it
    (``<job>-<task>-<index>``) and placement's ``held_pods`` reads it."""
    return f"{gang}-{TASK}-{index}"


def left_minimum(g: TraceGang, finished: int) -> int:
    """What is left of the gang's minimum once ``finished`` of its pods have left: Volcano counts a
    Succeeded pod toward the gang (its ReadyTaskNum), so the pods still there need only the rest."""
    return max(g.min_member - finished, 0)


def _affinity(models: tuple[str, ...]) -> tuple[NodeSelectorTerm, ...] | None:
    if not models:
        return None
    return (NodeSelectorTerm(match_expressions=(
        NodeSelectorRequirement(key=MODEL_LABEL, operator="In", values=models),)),)


class SnapshotBuilder:
    """Snapshots of one cluster's states (the nodes are built once)."""

    def __init__(self, nodes: Sequence[SimNode], serving: bool = False,
                 shares: Callable[[int], list[tuple[int, int]]] | None = None) -> None:
        self.serving = serving
        """Pods carry their gang's ModelServing name label (the ``ServingGroupRecreate`` policy)."""
        self.shares = shares
        """``cluster.Cluster.share_devices``: (milli, device) of the shares on the i-th node by name."""
        self.nodes: dict[str, Node] = {}
        for n in sorted(nodes, key=lambda n: n.name):
            alloc = {**resources_of(n.cpu, n.memory, n.gpu), "pods": MAX_PODS * 1000}
            labels = {"kubernetes.io/hostname": n.name, **({MODEL_LABEL: n.model} if n.model else {})}
            self.nodes[n.name] = Node(name=n.name, labels=labels, allocatable=alloc)
        self._device_nodes: dict[str, Node] | None = None
        self._pods: dict[str, Pod] = {}
        self._groups: dict[str, PodGroup] = {}
        self._running_jobs: dict[tuple[str, str], tuple[int, VCJob]] = {}
        """(gang, restart) -> (its pods finished, its Running VCJob)."""

    def group(self, g: TraceGang, finished: int = 0) -> PodGroup:
        """The gang's PodGroup; ``finished`` of its pods gone, its minMember is what is left of it
        (``left_minimum``)."""
        pg = self._groups.get(g.name)
        if pg is None or pg.min_member != left_minimum(g, finished):
            owner = OwnerReference(api_version=JOB_API, kind="Job", name=g.name, controller=True)
            pg = self._groups[g.name] = PodGroup(namespace=NAMESPACE, name=g.name, owner_references=(owner,),
                                                 min_member=left_minimum(g, finished))
        return pg

    def pod(self, r: Running) -> Pod:
        p = self._pods.get(r.name)
        if p is None or p.node_name != r.node:
            owner = OwnerReference(api_version=JOB_API, kind="Job", name=r.gang.name, controller=True)
            p = self._pods[r.name] = Pod(
                namespace=NAMESPACE, name=r.name, node_name=r.node, phase="Running", scheduler_name="volcano",
                annotations={GROUP_NAME_ANNOTATION: r.gang.name}, owner_references=(owner,),
                labels={"volcano.sh/job-name": r.gang.name, "volcano.sh/task-spec": TASK,
                        **({SERVING_LABEL: r.gang.name} if self.serving else {})},
                requests=resources_of(r.gang.cpu, r.gang.memory, r.gang.gpu),
                required_node_affinity=_affinity(r.gang.models))
        return p

    def device_nodes(self) -> dict[str, Node]:
        """The nodes with their GPUs as devices (module docstring), built once."""
        if self._device_nodes is None:
            self._device_nodes = {name: n.model_copy(update={"devices": tuple(
                GpuDevice(index=d, model=n.labels.get(MODEL_LABEL, "")) for d in range(
                    n.allocatable.get(GPU_RESOURCE, 0) // 1000))}) for name, n in self.nodes.items()}
        return self._device_nodes

    def share_pod(self, r: Running, device: int) -> Pod:
        """A running share on its device (module docstring); not cached (equal shares may trade devices)."""
        base = self.pod(r)
        return base.model_copy(update={"requests": resources_of(r.gang.cpu, r.gang.memory, 0),
                                       "gpu_share": GpuShare(count=1, milli=r.gang.milli, devices=(device,))})

    def forget(self, name: str) -> None:
        """A pod left: drop its cached object."""
        self._pods.pop(name, None)

    @staticmethod
    def job(g: TraceGang, created: str, restart: str | None = None, phase: str = "Pending",
            finished: int = 0) -> VCJob:
        """The gang's VCJob; ``finished`` of its pods gone, its replicas are the pods left and its
        minAvailable what is left of the minimum (``left_minimum``)."""
        template = PodTemplate(requests=resources_of(g.cpu, g.memory, g.gpu), scheduler_name="volcano",
                               required_node_affinity=_affinity(g.models))
        policies = ((LifecyclePolicy(events=(POD_EVICTED,), action=restart),) if restart in POLICY_ACTIONS
                    else ())
        return VCJob(namespace=NAMESPACE, name=g.name, min_available=left_minimum(g, finished),
                     creation_timestamp=created,
                     tasks=(JobTask(name=TASK, replicas=len(g.pods) - finished, template=template),),
                     policies=policies, phase=phase)

    def build(self, running: Iterable[Running], waiting: Iterable[TraceGang] = (),
              restart: str | None = None, finished: Mapping[str, int] | None = None) -> Snapshot:
        """The snapshot: every node, the running pods and their PodGroups, and a Pending VCJob per gang in
        ``waiting`` (gangs none of whose pods run; creation order kept); with a ``restart`` policy, a
        Running VCJob per running gang too, and every VCJob states it (module docstring). ``finished``:
        gang name -> its pods that left (absent: none); a running gang's PodGroup and VCJob count only
        what is left (``left_minimum``)."""
        gone = finished or {}
        pods: dict[str, Pod] = {}
        groups: dict[str, PodGroup] = {}
        gangs: dict[str, TraceGang] = {}
        running = list(running)
        shared = [r for r in running if r.gang.is_share]
        for r, device in self._pin(shared).items():
            p = self.share_pod(r, device)
            pods[p.key] = p
        for r in running:
            if r.gang.is_share:
                pg = self.group(r.gang, gone.get(r.gang.name, 0))
                groups[pg.key] = pg
                gangs[r.gang.name] = r.gang
                continue
            p = self.pod(r)
            pods[p.key] = p
            pg = self.group(r.gang, gone.get(r.gang.name, 0))
            groups[pg.key] = pg
            gangs[r.gang.name] = r.gang
        jobs: dict[str, VCJob] = {}
        servings = {f"{NAMESPACE}/{g.name}": ModelServing(namespace=NAMESPACE, name=g.name, recovery_policy=SERVING)
                    for g in gangs.values()} if restart == SERVING else {}
        if restart in POLICY_ACTIONS:
            for g in gangs.values():
                left = gone.get(g.name, 0)
                cached = self._running_jobs.get((g.name, restart))
                if cached is None or cached[0] != left:
                    cached = self._running_jobs[g.name, restart] = (left, self.job(
                        g, "2000-01-01T00:00:00Z", restart, phase="Running", finished=left))
                job = cached[1]
                jobs[job.key] = job
        for k, g in enumerate(x for x in waiting if not x.is_share):
            pg = self.group(g)
            groups[pg.key] = pg
            job = self.job(g, f"2000-01-01T00:00:00.{k:06d}Z", restart)
            jobs[job.key] = job
        nodes = self.device_nodes() if shared else self.nodes
        return Snapshot(nodes=nodes, pods=dict(sorted(pods.items())), pod_groups=dict(sorted(groups.items())),
                        jobs=jobs, model_servings=servings)

    def _pin(self, shared: Sequence[Running]) -> dict[Running, int]:
        """Each running share's device: a node's shares of one size, by name, on the devices the cluster
        holds shares of that size on, in device order."""
        if not shared:
            return {}
        if self.shares is None:
            raise AssertionError("shares run, but the builder cannot see their devices")  # pragma: no cover
        index = {name: i for i, name in enumerate(self.nodes)}
        by_node: dict[str, list[Running]] = defaultdict(list)
        for r in shared:
            by_node[r.node].append(r)
        out: dict[Running, int] = {}
        for node, rs in by_node.items():
            devices: dict[int, list[int]] = defaultdict(list)
            for milli, d in self.shares(index[node]):
                devices[milli].append(d)
            for r in sorted(rs, key=lambda r: (r.gang.milli, r.name)):
                out[r] = devices[r.gang.milli].pop(0)
        return out
