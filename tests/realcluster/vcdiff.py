"""Differential tests of ``optplan place`` against the real vc-scheduler (tests/realcluster/cluster.py).

Three parts, each usable alone:

- ``generate(seed, index)``: a small seeded cluster of seed 002's kind (GPU nodes with cpu/memory, labels
  and taints; a HyperNode tree of 2-3 tiers whose leaves select nodes by exactMatch, regexMatch or
  labelMatch; a queue tree under root, a tenant parent with team children, with guarantee, deserved,
  capability and reclaimable; the seed's PriorityClasses; running gangs, their pods bound by
  ``spec.nodeName`` with their PodGroups; pending VCJobs with minAvailable, a PriorityClass and sometimes a
  hard or soft networkTopology; in three cases of five one of them (hard-topology first) a partly
  running gang, some pods bound before the scheduler starts, inside one rack under a hard topology).
  Pure: the same (seed, index) gives the same documents; ``save_case``/``load_case`` keep a case as run.
  ``generate_partitioned(seed, index)``: the same cluster with a HyperNode tree, its pending jobs VCJobs with
  a ``partitionPolicy`` (``generate``'s cases unchanged by it); ``generate_partitioned_more(seed, index)``: on
  that cluster, partly running partitioned jobs, two partitioned tasks in one job, and partitioned jobs
  without a topology that need preempt. ``generate_podgroups(seed, index)``: the same
  cluster, its pending jobs bare gangs — PodGroups and their pods created directly, no VCJob (minMember,
  minTaskMember, subGroupPolicy with a topology per subgroup, some partly running).
- ``run_case(cluster, case, workdir)``: with vc-scheduler stopped, creates the case (running gangs one
  second apart, pending VCJobs one second apart, so that Volcano's creation-time orders are not ties),
  puts the pending jobs' PodGroups ``Inqueue`` (so that Volcano's job controller creates every pod before
  the scheduler starts), creates the bare gangs' PodGroups (``Inqueue``) and pods, takes ``optplan
  snapshot`` of the live cluster, runs ``optplan place --solver greedy`` and ``auto`` on it, starts
  vc-scheduler, waits until nothing changes (over four of its sessions, nothing in flight, every evicted pod's
  Evict event written), reads back bindings, evictions (the scheduler's ``Evict`` events, which name preempt
  or reclaim), PodGroup phases and, when vc-scheduler logs at level 5, the node list it began with (its log
  from this start on, ``vclog.node_list``), and deletes the case.
- ``compare(case, observed)``: per action, whether optplan and Volcano agree (admitted jobs; preempt and
  reclaim victim sets; the lowest HyperNode holding a topology job's pods; per partly running gang, how
  many more pods are placed; per partition, or a bare gang's subgroup, both place whole, the lowest HyperNode
  holding it; per pod the node). A bare gang is read as a job of minAvailable its minMember, its pods by name.

``benchmarks/volcano_diff.py`` runs many; ``test_volcano_diff.py`` a few seeds.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.realcluster.cluster import CODE, KWOK_ANNOTATION, ROOT, WAIT, Cluster
from tests.realcluster.vclog import node_list, rotation

GPU = "nvidia.com/gpu"
SCHEDULER_CONF = ROOT / "hack" / "cluster" / "volcano-scheduler.conf"  # the binpack and HyperNode binpack weights
NOW = "2030-01-01T00:00:00Z"  # victims' cost only (the exact model); Volcano's order needs no clock
PLACE_ARGS = ("--now", NOW, "--deterministic", "--time-limit", "5", "-o", "json")
PRIORITY_CLASSES = (("critical-job", 1000, "PreemptLowerPriority"), ("large-job", 800, "PreemptLowerPriority"),
                    ("normal-job", 100, "PreemptLowerPriority"), ("debug-job", 50, "Never"),
                    ("spot-job", 50, "PreemptLowerPriority"))
PRIORITY = {name: value for name, value, _ in PRIORITY_CLASSES}
TAINT = {"key": "dedicated", "value": "infer", "effect": "NoSchedule"}
TOLERATION = {"key": "dedicated", "operator": "Equal", "value": "infer", "effect": "NoSchedule"}
"""What the pods that may use a tainted rack carry."""


def priority_classes() -> list[dict[str, Any]]:
    """Seed 002 §5.2's PriorityClasses (created once per cluster, kept between cases)."""
    return [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
             "value": value, "preemptionPolicy": policy} for name, value, policy in PRIORITY_CLASSES]


@dataclass
class Case:
    seed: int
    index: int
    ns: str
    nodes: list[dict[str, Any]] = field(default_factory=list)
    hypernodes: list[dict[str, Any]] = field(default_factory=list)
    queues: list[dict[str, Any]] = field(default_factory=list)
    running: list[list[dict[str, Any]]] = field(default_factory=list)  # per gang: its PodGroup, then its pods
    pending: list[dict[str, Any]] = field(default_factory=list)  # VCJobs
    members: dict[str, tuple[int, frozenset[str]]] = field(default_factory=dict)  # HyperNode: tier, nodes
    kinds: tuple[str, ...] = ()  # what the generator aimed at: allocate, preempt, reclaim, topology, partial
    partial: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # job -> (its pod, node) bound first
    bare: list[list[dict[str, Any]]] = field(default_factory=list)  # per bare gang: its PodGroup, then its pods

    @property
    def prefix(self) -> str:
        return self.ns

    def cluster_docs(self) -> list[dict[str, Any]]:
        return [*self.nodes, *self.hypernodes, *self.queues]


def _node(name: str, gpus: int, cpu: int, mem_gi: int, labels: dict[str, str], taint: bool) -> dict[str, Any]:
    cap = {"cpu": str(cpu), "memory": f"{mem_gi}Gi", "pods": "110", GPU: str(gpus)}
    spec: dict[str, Any] = {"taints": [TAINT]} if taint else {}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "annotations": {KWOK_ANNOTATION: "fake"},
                         "labels": {"kubernetes.io/hostname": name, "type": "kwok", **labels}},
            "spec": spec, "status": {"capacity": cap, "allocatable": cap}}


def _hypernode(name: str, tier: int, members: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
            "spec": {"tier": tier, "members": members}}


def _res(gpus: int, cpu: int, mem_gi: int) -> dict[str, str]:
    return {GPU: str(gpus), "cpu": str(cpu), "memory": f"{mem_gi}Gi"}


def generate(seed: int, index: int) -> Case:
    """One small cluster (module docstring); ``index`` numbers the case within a run (its names)."""
    rng = random.Random(seed * 1_000_003 + index)
    ns = f"vcd-{seed}-{index}"
    case = Case(seed, index, ns)
    p = ns  # prefix of every cluster-scoped name
    # ---- nodes and HyperNodes: racks of 2 nodes (tier 1), spines of 2 racks (tier 2), sometimes a tier 3
    racks = rng.choice((2, 3, 4))
    per_rack = 2
    gpus, cpu, mem = rng.choice(((8, 64, 512), (8, 96, 512), (4, 48, 256)))
    tainted_rack = rng.randrange(racks) if rng.random() < 0.2 else -1
    node_names: list[list[str]] = []
    for r in range(racks):
        names = [f"{p}-r{r}-n{k}" for k in range(per_rack)]
        node_names.append(names)
        for name in names:
            case.nodes.append(_node(name, gpus, cpu, mem, {"topology.volcano.sh/tor": f"{p}-rack{r}",
                                                           "pool": rng.choice(("a", "a", "b"))}, r == tainted_rack))
    topology = rng.random() < 0.6
    if topology:
        _tree(case, rng, node_names)
    all_nodes = [n for names in node_names for n in names]
    total_gpu = gpus * len(all_nodes)
    # ---- queues: a tenant parent under root with two or three team children, sometimes a flat queue
    teams = [f"{p}-a", f"{p}-b"] + ([f"{p}-c"] if rng.random() < 0.3 else [])
    dims = rng.choice(((GPU,), (GPU,), (GPU, "cpu", "memory")))

    def amounts(g: int) -> dict[str, Any]:
        return _amounts(g, dims, gpus, cpu, mem)

    parent = f"{p}-t"
    parent_des = rng.choice((total_gpu, total_gpu * 3 // 4))
    qspec: dict[str, Any] = {"parent": "root", "reclaimable": True, "deserved": amounts(parent_des)}
    if rng.random() < 0.3:
        qspec["capability"] = amounts(total_gpu)
    case.queues.append(_queue(parent, qspec))
    shares = _split(rng, parent_des, len(teams))
    for team, share in zip(teams, shares, strict=True):
        spec: dict[str, Any] = {"parent": parent, "reclaimable": rng.random() < 0.85, "deserved": amounts(share)}
        if rng.random() < 0.25 and share >= 2:
            spec["guarantee"] = {"resource": amounts(share // 2)}
        if rng.random() < 0.2:
            spec["capability"] = amounts(min(parent_des, share + rng.choice((gpus, 2 * gpus))))
        case.queues.append(_queue(team, spec))
    leaves = list(teams)
    if rng.random() < 0.3:
        flat = f"{p}-f"
        case.queues.append(_queue(flat, {"parent": "root", "reclaimable": True,
                                         "deserved": amounts(rng.choice((0, gpus)))}))
        leaves.append(flat)
    # ---- running gangs: fill the nodes to a chosen level
    fill = rng.choice((0.5, 0.75, 0.9, 1.0))
    free = {n: gpus for n in all_nodes}
    target = int(total_gpu * fill)
    used = 0
    g = 0
    kinds: set[str] = {"allocate"}
    while used < target and g < 12:
        size = rng.choice((1, 1, 2))
        per = rng.choice((1, 2, 2, 4, 4, 8))
        queue = rng.choice(leaves)
        pc = rng.choice(("normal-job", "normal-job", "debug-job", "spot-job", "large-job"))
        spots = [n for n in all_nodes if free[n] >= per]
        if len(spots) < 1:
            per = max((free[n] for n in all_nodes), default=0)
            if per <= 0:
                break
            spots = [n for n in all_nodes if free[n] >= per]
        chosen = [rng.choice(spots) for _ in range(size)]
        pods = []
        name = f"r{g}"
        for k, node in enumerate(chosen):
            if free[node] < per:
                continue
            free[node] -= per
            used += per
            pods.append(_pod(ns, f"{name}-{k}", name, node, per, cpu // gpus, mem // gpus, pc))
        if pods:
            case.running.append([_podgroup(ns, name, {"minMember": len(pods), "queue": queue,
                                                      "priorityClassName": pc}), *pods])
        g += 1
    # ---- pending VCJobs
    for j in range(rng.choice((1, 2, 3, 3, 4))):
        queue = rng.choice(leaves)
        pc = rng.choice(("critical-job", "large-job", "normal-job", "normal-job", "debug-job", "spot-job"))
        replicas = rng.choice((1, 1, 2, 2, 3, 4))
        per = rng.choice((1, 2, 4, 4, 8))
        min_av = replicas if rng.random() < 0.8 else max(1, replicas - 1)
        spec: dict[str, Any] = {"schedulerName": "volcano", "queue": queue, "minAvailable": min_av,
                                "priorityClassName": pc}
        if topology and rng.random() < 0.5:
            mode = rng.choice(("hard", "hard", "soft"))
            spec["networkTopology"] = {"mode": mode}
            if mode == "hard":
                spec["networkTopology"]["highestTierAllowed"] = rng.choice((1, 2))
            kinds.add("topology")
        pod_spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [{
            "name": "main", "image": "trainer:1",
            "resources": {"requests": _res(per, per * cpu // gpus, per * mem // gpus), "limits": {GPU: str(per)}}}]}
        if tainted_rack >= 0 and rng.random() < 0.5:
            pod_spec["tolerations"] = [dict(TOLERATION)]
        if rng.random() < 0.15:
            pod_spec["nodeSelector"] = {"pool": "a"}
        spec["tasks"] = [{"name": "worker", "replicas": replicas, "template": {"spec": pod_spec}}]
        case.pending.append({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                             "metadata": {"name": f"j{j}", "namespace": ns}, "spec": spec})
    _partial(case, seed, index, free, node_names)
    if case.partial:
        kinds.add("partial")
    if used and fill >= 0.75:
        kinds.update(("preempt", "reclaim"))
    case.kinds = tuple(sorted(kinds))
    return case


def _amounts(g: int, dims: tuple[str, ...], gpus: int, cpu: int, mem: int) -> dict[str, Any]:
    """A queue's amounts for ``g`` GPUs: with cpu and memory at the nodes' share per GPU when ``dims`` names them."""
    out: dict[str, Any] = {GPU: g}
    if "cpu" in dims:
        out["cpu"] = str(g * cpu // gpus)
        out["memory"] = f"{g * mem // gpus}Gi"
    return out


def _room_and_lower(case: Case, gpus: int, leaves: Iterable[str]) -> tuple[dict[str, int], dict[str, int]]:
    """Each node's GPUs the running gangs leave free, and per leaf queue the GPUs of its running pods below
    critical-job (what a critical job of that queue may preempt)."""
    free = {d["metadata"]["name"]: gpus for d in case.nodes}
    lower: dict[str, int] = {q: 0 for q in leaves}
    for gang in case.running:
        for pod in gang[1:]:
            g = int(pod["spec"]["containers"][0]["resources"]["requests"][GPU])
            free[pod["spec"]["nodeName"]] -= g
            if PRIORITY[pod["spec"]["priorityClassName"]] < PRIORITY["critical-job"]:
                lower[gang[0]["spec"]["queue"]] = lower.get(gang[0]["spec"]["queue"], 0) + g
    return free, lower


def _tree(case: Case, rng: random.Random, node_names: list[list[str]]) -> None:
    """The HyperNode tree over racks of nodes: a tier-1 HyperNode per rack (its members by exactMatch,
    regexMatch or labelMatch), tier-2 spines of two racks, sometimes a tier-3 core over the spines."""
    p = case.ns
    racks = len(node_names)
    for r, names in enumerate(node_names):
        how = rng.choice(("exact", "regex", "label"))
        if how == "exact":
            members = [{"type": "Node", "selector": {"exactMatch": {"name": n}}} for n in names]
        elif how == "regex":
            members = [{"type": "Node", "selector": {"regexMatch": {"pattern": f"^{p}-r{r}-n.*"}}}]
        else:
            members = [{"type": "Node", "selector": {"labelMatch": {"matchLabels": {
                "topology.volcano.sh/tor": f"{p}-rack{r}"}}}}]
        case.hypernodes.append(_hypernode(f"{p}-s{r}", 1, members))
        case.members[f"{p}-s{r}"] = (1, frozenset(names))
    spines = [list(range(racks))[i:i + 2] for i in range(0, racks, 2)]
    for s, group in enumerate(spines):
        name = f"{p}-sp{s}"
        case.hypernodes.append(_hypernode(name, 2, [{"type": "HyperNode", "selector": {"exactMatch": {
            "name": f"{p}-s{r}"}}} for r in group]))
        case.members[name] = (2, frozenset(n for r in group for n in node_names[r]))
    if len(spines) > 1 and rng.random() < 0.5:
        name = f"{p}-core"
        case.hypernodes.append(_hypernode(name, 3, [{"type": "HyperNode", "selector": {"exactMatch": {
            "name": f"{p}-sp{s}"}}} for s in range(len(spines))]))
        case.members[name] = (3, frozenset(n for names in node_names for n in names))


def _partial(case: Case, seed: int, index: int, free: dict[str, int], racks: list[list[str]]) -> None:
    """In three cases of five, one pending VCJob of 2+ replicas (a hard-topology one when there is)
    becomes a running gang with pending pods: some of its pods (at least one, fewer than all; minAvailable
    lowered to them) are bound before the scheduler starts (``run_case``), inside one rack when the job
    has a hard networkTopology (the HyperNode that holds the running members), so that Volcano and
    optplan place the rest. A stream of its own (the other draws of ``generate`` are those of a case
    without it)."""
    rng = random.Random(f"partial/{seed}/{index}")
    if rng.random() >= 0.6:
        return
    jobs = [j for j in case.pending if j["spec"]["tasks"][0]["replicas"] >= 2]
    hard = [j for j in jobs if j["spec"].get("networkTopology", {}).get("mode") == "hard"]
    if not jobs:
        return
    _bind_some(case, rng, rng.choice(hard or jobs), free, racks)


def _bind_some(case: Case, rng: random.Random, job: dict[str, Any], free: dict[str, int],
               racks: list[list[str]]) -> None:
    """``_partial``'s binding of one job: 1..replicas-1 pods of its first task on nodes with room (``free``
    taken), inside one rack under a hard topology, minAvailable lowered to them; nothing when they do not fit."""
    spec = job["spec"]
    task = spec["tasks"][0]
    per = int(task["template"]["spec"]["containers"][0]["resources"]["requests"][GPU])
    replicas = task["replicas"]
    running = rng.randint(1, replicas - 1)
    spec["minAvailable"] = min(spec["minAvailable"], running)
    pool = task["template"]["spec"].get("nodeSelector", {}).get("pool")
    tolerates = bool(task["template"]["spec"].get("tolerations"))
    nodes_of = {d["metadata"]["name"]: d for d in case.nodes}

    def usable(n: str) -> bool:
        d = nodes_of[n]
        return ((pool is None or d["metadata"]["labels"].get("pool") == pool)
                and (tolerates or not d["spec"].get("taints")))

    hard = spec.get("networkTopology", {}).get("mode") == "hard"
    groups = [list(r) for r in racks] if hard else [[n for r in racks for n in r]]
    rng.shuffle(groups)
    for group in groups:
        chosen = _spread(rng, {n: free[n] for n in group if usable(n)}, running, per)
        if len(chosen) == running:
            for n in chosen:
                free[n] -= per
            name = job["metadata"]["name"]
            case.partial[name] = [(f"{name}-{task['name']}-{k}", n) for k, n in enumerate(chosen)]
            return


def _sub_topology(rng: random.Random, mode: str) -> dict[str, Any]:
    """A partition's or subgroup's networkTopology: hard at tier 1 (2 in one of three), or soft."""
    if mode == "hard":
        return {"mode": "hard", "highestTierAllowed": rng.choice((1, 1, 2))}
    return {"mode": "soft"}


def _shape(case: Case) -> tuple[int, int, int, list[str]]:
    """A case's node shape (GPUs, cpus, GiB of memory of its nodes, all alike) and its leaf queues."""
    cap = case.nodes[0]["status"]["capacity"]
    parents = {q["spec"].get("parent") for q in case.queues}
    return (int(cap[GPU]), int(cap["cpu"]), int(cap["memory"].removesuffix("Gi")),
            [q["metadata"]["name"] for q in case.queues if q["metadata"]["name"] not in parents])


def generate_partitioned(seed: int, index: int) -> Case:
    """``generate(seed, index)``'s cluster (nodes, queues, running gangs; always a HyperNode tree: one drawn
    here when the plain case has none) under the namespace ``vcp-SEED-INDEX``, its pending jobs replaced by
    one to three VCJobs with a partitioned task (``partitionPolicy``: totalPartitions 1-3, partitionSize 1-4,
    minPartitions 1..total, sometimes 0; a hard topology of tier 1 or 2, a soft one, or none, per partition),
    sometimes a job-level hard or soft networkTopology, sometimes a second, plain task. A stream of its own:
    ``generate``'s cases are not changed by it."""
    case = renamed(generate(seed, index), f"vcp-{seed}-{index}")
    rng = random.Random(f"partitions/{seed}/{index}")
    ns = case.ns
    racks: dict[int, list[str]] = {}
    for d in case.nodes:
        name = d["metadata"]["name"]
        racks.setdefault(int(name[len(ns) + 2:].split("-")[0]), []).append(name)
    node_names = [sorted(racks[r]) for r in sorted(racks)]
    if not case.hypernodes:
        _tree(case, rng, node_names)
    gpus, cpu, mem, leaves = _shape(case)
    tainted = any(d["spec"].get("taints") for d in case.nodes)
    top = max(t for t, _m in case.members.values())
    case.pending, case.partial = [], {}
    for j in range(rng.choice((1, 2, 2, 3))):
        per = rng.choice(tuple(g for g in (1, 2, 4, 4, 8) if g <= gpus))
        size = rng.choice((1, 2, 2, 3, 4))
        total = rng.choice((1, 2, 2, 3))
        minp = rng.randint(1, total) if rng.random() < 0.9 else 0
        pp: dict[str, Any] = {"totalPartitions": total, "partitionSize": size}
        if minp:
            pp["minPartitions"] = minp
        mode = rng.choice(("hard", "hard", "soft", None))
        if mode is not None:
            pp["networkTopology"] = _sub_topology(rng, mode)
        pod_spec = _pod_spec(per, cpu, gpus, mem)
        if tainted and rng.random() < 0.5:
            pod_spec["tolerations"] = [dict(TOLERATION)]
        tasks: list[dict[str, Any]] = [{"name": "worker", "replicas": total * size, "partitionPolicy": pp,
                                        "template": {"spec": pod_spec}}]
        min_av = (minp or 1) * size
        if rng.random() < 0.2:
            tasks.append({"name": "ps", "replicas": 1, "template": {"spec": {**pod_spec, "containers": [{
                "name": "main", "image": "ps:1", "resources": {"requests": _res(1, cpu // gpus, mem // gpus),
                                                               "limits": {GPU: "1"}}}]}}})
            min_av += 1
        spec: dict[str, Any] = {"schedulerName": "volcano", "queue": rng.choice(leaves), "minAvailable": min_av,
                                "priorityClassName": rng.choice(("critical-job", "large-job", "normal-job",
                                                                 "normal-job", "spot-job")), "tasks": tasks}
        draw = rng.random()
        if draw < 0.3:
            spec["networkTopology"] = {"mode": "hard", "highestTierAllowed": rng.choice(tuple(range(2, top + 1)))}
        elif draw < 0.4:
            spec["networkTopology"] = {"mode": "soft"}
        case.pending.append({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                             "metadata": {"name": f"j{j}", "namespace": ns}, "spec": spec})
    case.kinds = tuple(sorted({*case.kinds, "partitions", "topology"} - {"partial"}))
    return case


def _pod_spec(per: int, cpu: int, gpus: int, mem: int) -> dict[str, Any]:
    """A worker pod of ``per`` GPUs with its share of the node's cpu and memory."""
    return {"restartPolicy": "Never", "containers": [{
        "name": "main", "image": "trainer:1",
        "resources": {"requests": _res(per, per * cpu // gpus, per * mem // gpus), "limits": {GPU: str(per)}}}]}


def generate_partitioned_more(seed: int, index: int) -> Case:
    """What ``generate_partitioned`` does not exercise, on its cluster (namespace ``vcq-SEED-INDEX``; a stream
    of its own, ``generate_partitioned``'s cases unchanged): its pending jobs replaced by one to three VCJobs
    drawn from three kinds, at least one of each case's chosen kinds —

    - *partly running*: a task of 2-3 partitions, some whole partitions (at least one, not all) bound before
      the scheduler starts, each inside one rack; minPartitions 1..total (so the running ones may or may not
      make the gang ready); the pending partitions go where allocate puts them;
    - *two partitioned tasks*: ``worker`` and ``eval``, each with its own partitionPolicy (and topology or none),
      minAvailable their minimums' sum; sometimes a job-level topology;
    - *preempt*: a critical-job partitioned job without any topology (Volcano's preempt takes it, unlike a job
      whose sub-jobs have one) in the leaf queue holding the most GPUs of lower-priority running pods, asking
      more than the free GPUs.
    """
    case = renamed(generate_partitioned(seed, index), f"vcq-{seed}-{index}")
    rng = random.Random(f"partitions-more/{seed}/{index}")
    ns = case.ns
    gpus, cpu, mem, leaves = _shape(case)
    tainted = {d["metadata"]["name"] for d in case.nodes if d["spec"].get("taints")}
    top = max(t for t, _m in case.members.values())
    racks = sorted(sorted(m) for t, m in case.members.values() if t == 1)
    free, lower = _room_and_lower(case, gpus, leaves)
    kinds = [k for k in ("partly", "two", "preempt") if rng.random() < 0.5] or [rng.choice(("partly", "two",
                                                                                            "preempt"))]
    extra = rng.choice((0, 0, 1))
    case.pending, case.partial = [], {}

    def task(name: str, per: int, size: int, total: int, minp: int, mode: str | None) -> dict[str, Any]:
        pp: dict[str, Any] = {"totalPartitions": total, "partitionSize": size, "minPartitions": minp}
        if mode is not None:
            pp["networkTopology"] = _sub_topology(rng, mode)
        spec = _pod_spec(per, cpu, gpus, mem)
        if tainted and rng.random() < 0.5:
            spec["tolerations"] = [dict(TOLERATION)]
        return {"name": name, "replicas": total * size, "partitionPolicy": pp, "template": {"spec": spec}}

    def job(tasks: list[dict[str, Any]], queue: str, pc: str, topology: bool) -> dict[str, Any]:
        spec: dict[str, Any] = {"schedulerName": "volcano", "queue": queue, "priorityClassName": pc, "tasks": tasks,
                                "minAvailable": sum(t["partitionPolicy"]["minPartitions"] * t["partitionPolicy"][
                                    "partitionSize"] for t in tasks)}
        if topology:
            draw = rng.random()
            if draw < 0.3:
                spec["networkTopology"] = {"mode": "hard", "highestTierAllowed": rng.choice(tuple(range(2, top + 1)))}
            elif draw < 0.4:
                spec["networkTopology"] = {"mode": "soft"}
        name = f"j{len(case.pending)}"
        doc = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
               "metadata": {"name": name, "namespace": ns}, "spec": spec}
        case.pending.append(doc)
        return doc

    pcs = ("critical-job", "large-job", "normal-job", "normal-job", "spot-job")
    pers = tuple(g for g in (1, 2, 4, 4, 8) if g <= gpus)
    for kind in kinds:
        if kind == "partly":
            per = rng.choice(tuple(g for g in pers if g <= gpus // 2) or (1,))
            size, total = rng.choice((1, 2, 2, 3)), rng.choice((2, 2, 3))
            t = task("worker", per, size, total, rng.randint(1, total), rng.choice(("hard", "soft", None)))
            doc = job([t], rng.choice(leaves), rng.choice(pcs), False)
            bound = rng.randint(1, total - 1)
            tolerates = bool(t["template"]["spec"].get("tolerations"))
            chosen: list[str] = []
            room = dict(free)
            for _part in range(bound):
                for rack in rng.sample(racks, len(racks)):
                    spots = [n for n in rack if tolerates or n not in tainted]
                    got: list[str] = []
                    trial = dict(room)
                    for _ in range(size):
                        fits = [n for n in spots if trial[n] >= per]
                        if not fits:
                            break
                        n = rng.choice(fits)
                        trial[n] -= per
                        got.append(n)
                    if len(got) == size:
                        room = trial
                        chosen.extend(got)
                        break
                else:
                    break
            if len(chosen) == bound * size:
                free = room
                name = doc["metadata"]["name"]
                case.partial[name] = [(f"{name}-worker-{k}", n) for k, n in enumerate(chosen)]
        elif kind == "two":
            tasks = []
            for name in ("worker", "eval"):
                total = rng.choice((1, 2, 2, 3))
                tasks.append(task(name, rng.choice(pers), rng.choice((1, 2, 2, 3)), total, rng.randint(1, total),
                                  rng.choice(("hard", "hard", "soft", None))))
            job(tasks, rng.choice(leaves), rng.choice(pcs), True)
        else:
            queue = max(sorted(lower), key=lambda q: lower[q])
            per = rng.choice(tuple(g for g in pers if g >= 2) or pers)
            size = rng.choice((1, 2, 2))
            idle = sum(free.values())
            total = max(1, min(3, -(-(idle + 1) // (per * size))))
            job([task("worker", per, size, total, rng.randint(1, total), None)], queue, "critical-job", False)
    for _ in range(extra):
        total = rng.choice((1, 2, 2, 3))
        job([task("worker", rng.choice(pers), rng.choice((1, 2, 2, 3, 4)), total, rng.randint(1, total),
                  rng.choice(("hard", "hard", "soft", None)))], rng.choice(leaves), rng.choice(pcs), True)
    case.kinds = tuple(sorted({*case.kinds, *kinds, "partitions"} - {"partial"}
                              | ({"partial"} if case.partial else set())))
    return case


TASK_SPEC = "volcano.sh/task-spec"


def generate_podgroups(seed: int, index: int) -> Case:
    """``generate(seed, index)``'s cluster (nodes, HyperNodes when it has them, queues, running gangs) under the
    namespace ``vcg-SEED-INDEX``, its pending jobs replaced by one to three bare gangs: a PodGroup and its pods
    created directly, as Kubeflow's training-operator, KubeRay or a user creates them (no VCJob). Each gang is
    plain (1-4 pods, minMember all or one less, sometimes a hard or soft networkTopology), of two tasks (a
    ``ps`` pod and 1-3 ``worker`` pods by ``volcano.sh/task-spec``, ``minTaskMember`` for both), or of subgroups
    (``subGroupPolicy``: 1-3 subgroups of 1-3 pods by a ``grp`` label, minSubGroups 1..all, a hard topology of
    tier 1 or 2, a soft one or none per subgroup). In half the cases one plain gang of 2+ pods is partly
    running: some of its pods bound before the scheduler starts (``partial``; inside one rack under a hard
    topology; the cluster's last running gangs left out when there is no room for them). A stream of its own:
    ``generate``'s cases are not changed by it."""
    case = renamed(generate(seed, index), f"vcg-{seed}-{index}")
    rng = random.Random(f"podgroups/{seed}/{index}")
    ns = case.ns
    gpus, cpu, mem, leaves = _shape(case)
    tainted = any(d["spec"].get("taints") for d in case.nodes)
    topology = bool(case.hypernodes)
    case.pending, case.partial = [], {}
    kinds = set(case.kinds) - {"partial"} | {"podgroups"}

    def pod(name: str, group: str, per: int, pc: str, toleration: bool, annotations: dict[str, str],
            labels: dict[str, str]) -> dict[str, Any]:
        spec: dict[str, Any] = {"schedulerName": "volcano", "priorityClassName": pc, "restartPolicy": "Never",
                                "containers": [{"name": "main", "image": "trainer:1", "resources": {
                                    "requests": _res(per, per * cpu // gpus, per * mem // gpus),
                                    "limits": {GPU: str(per)}}}]}
        if toleration:
            spec["tolerations"] = [dict(TOLERATION)]
        return {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": ns, "labels": labels,
                             "annotations": {"scheduling.k8s.io/group-name": group, **annotations}},
                "spec": spec}

    for g in range(rng.choice((1, 2, 2, 3))):
        name = f"g{g}"
        shape = rng.choice(("plain", "plain", "tasks", "subgroups", "subgroups"))
        per = rng.choice(tuple(x for x in (1, 2, 4, 4, 8) if x <= gpus))
        pc = rng.choice(("critical-job", "large-job", "normal-job", "normal-job", "debug-job", "spot-job"))
        tol = tainted and rng.random() < 0.5
        spec: dict[str, Any] = {"queue": rng.choice(leaves), "priorityClassName": pc}
        pods: list[dict[str, Any]] = []
        if shape == "plain":
            n = rng.choice((1, 2, 2, 3, 4))
            spec["minMember"] = n if rng.random() < 0.8 else max(1, n - 1)
            if topology and rng.random() < 0.5:
                mode = rng.choice(("hard", "hard", "soft"))
                spec["networkTopology"] = {"mode": mode}
                if mode == "hard":
                    spec["networkTopology"]["highestTierAllowed"] = rng.choice((1, 2))
                kinds.add("topology")
            pods = [pod(f"{name}-p{k}", name, per, pc, tol, {}, {}) for k in range(n)]
        elif shape == "tasks":
            n = rng.randint(1, 3)
            need = rng.randint(1, n)
            spec["minTaskMember"] = {"ps": 1, "worker": need}
            spec["minMember"] = 1 + need
            pods = [pod(f"{name}-ps", name, 1, pc, tol, {TASK_SPEC: "ps"}, {})]
            pods += [pod(f"{name}-w{k}", name, per, pc, tol, {TASK_SPEC: "worker"}, {}) for k in range(n)]
            kinds.add("tasks")
        else:
            size, count = rng.randint(1, 3), rng.randint(1, 3)
            minsub = rng.randint(1, count)
            policy: dict[str, Any] = {"name": "grp", "subGroupSize": size, "minSubGroups": minsub,
                                      "matchLabelKeys": ["grp"]}
            mode = rng.choice(("hard", "hard", "soft", None)) if topology else None
            if mode is not None:
                policy["networkTopology"] = _sub_topology(rng, mode)
            spec["subGroupPolicy"] = [policy]
            spec["minMember"] = minsub * size
            pods = [pod(f"{name}-s{k}-{m}", name, per, pc, tol, {}, {"grp": f"s{k}"})
                    for k in range(count) for m in range(size)]
            kinds.update(("subgroups", "partitions"))
        case.bare.append([_podgroup(ns, name, spec), *pods])
    _partial_bare(case, seed, index)
    if case.partial:
        kinds.add("partial")
    case.kinds = tuple(sorted(kinds))
    return case


def generate_more(seed: int, index: int) -> Case:
    """What the other flavours leave out, on ``generate(seed, index)``'s cluster (nodes, HyperNodes when it has
    them, running gangs) under the namespace ``vcm-SEED-INDEX``, a stream of its own (``generate``'s cases
    unchanged by it):

    - *a parent's guarantee*: in four cases of five the tenant parent gets a guarantee (a quarter or half of the
      cluster's GPUs), which the capacity plugin keeps out of the realCapability of the other queues under root;
      a flat queue beside it always (when ``generate`` drew none, with a deserved of one node's GPUs), sometimes
      with a guarantee of its own;
    - its pending VCJobs redrawn, one to three of these kinds, at least one of each chosen kind:

      * *never*: a task template naming ``debug-job`` (preemptionPolicy Never) under a job of a higher
        PriorityClass, in the leaf queue holding the most GPUs of lower-priority running pods, asking more than
        is free (its pods may not preempt or reclaim; the job's may, and sometimes a second task without its
        own class takes the job's);
      * *own*: a running gang above its minimum's reach: ``worker`` pods (normal-job or spot-job by template) all
        bound before the scheduler starts, a pending ``lead`` of critical-job by template asking more than is
        free, minAvailable the workers' count (the job is not starving: nothing for it) or one more (starving:
        preempt may take other jobs' pods of its queue, never its own workers, which the gang keeps);
      * *reclaim*: a job of the flat queue asking more than is free, to be had only from the tenant's teams
        above their deserved, within the flat queue's realCapability the parent's guarantee bounds;
      * *plain*: as ``generate`` draws a pending job;

    - two partly running gangs where two of the single-task jobs of 2+ replicas can be (``_bind_some``:
      1..replicas-1 pods bound, minAvailable lowered to them), besides an *own* job's workers.
    """
    case = renamed(generate(seed, index), f"vcm-{seed}-{index}")
    rng = random.Random(f"more/{seed}/{index}")
    ns = case.ns
    gpus, cpu, mem, _leaves = _shape(case)
    tainted = {d["metadata"]["name"] for d in case.nodes if d["spec"].get("taints")}
    all_nodes = [d["metadata"]["name"] for d in case.nodes]
    racks = sorted(sorted(m) for t, m in case.members.values() if t == 1) or [sorted(all_nodes)]
    total = gpus * len(all_nodes)
    queues = {q["metadata"]["name"]: q for q in case.queues}
    parent = f"{ns}-t"
    dims = tuple(queues[parent]["spec"]["deserved"])

    def amounts(g: int) -> dict[str, Any]:
        return _amounts(g, dims, gpus, cpu, mem)

    kinds = {"more", "allocate"}
    if rng.random() < 0.8:
        queues[parent]["spec"]["guarantee"] = {"resource": amounts(rng.choice((total // 4, total // 2)))}
        kinds.add("guarantee")
    flat = f"{ns}-f"
    if flat not in queues:
        case.queues.append(_queue(flat, {"parent": "root", "reclaimable": True, "deserved": amounts(gpus)}))
        queues[flat] = case.queues[-1]
    if rng.random() < 0.3:
        queues[flat]["spec"]["guarantee"] = {"resource": amounts(gpus)}
    parents = {q["spec"].get("parent") for q in case.queues}
    leaves = sorted(q for q in queues if q not in parents)
    teams = [q for q in leaves if queues[q]["spec"].get("parent") == parent]
    free, lower = _room_and_lower(case, gpus, leaves)
    case.pending, case.partial = [], {}
    pers = tuple(g for g in (1, 2, 4, 4, 8) if g <= gpus)
    topology = bool(case.hypernodes)

    def template(per: int, pc: str | None) -> dict[str, Any]:
        spec = _pod_spec(per, cpu, gpus, mem)
        if pc is not None:
            spec["priorityClassName"] = pc
        if tainted and rng.random() < 0.5:
            spec["tolerations"] = [dict(TOLERATION)]
        return {"spec": spec}

    def job(tasks: list[dict[str, Any]], queue: str, pc: str, min_av: int) -> dict[str, Any]:
        spec: dict[str, Any] = {"schedulerName": "volcano", "queue": queue, "minAvailable": min_av,
                                "priorityClassName": pc, "tasks": tasks}
        if topology and rng.random() < 0.3:
            mode = rng.choice(("hard", "soft"))
            spec["networkTopology"] = {"mode": mode}
            if mode == "hard":
                spec["networkTopology"]["highestTierAllowed"] = rng.choice((1, 2))
            kinds.add("topology")
        doc = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
               "metadata": {"name": f"j{len(case.pending)}", "namespace": ns}, "spec": spec}
        case.pending.append(doc)
        return doc

    def more_than_free(per: int) -> int:
        return max(1, min(4, -(-(sum(free.values()) + 1) // per)))

    chosen = [k for k in ("never", "own", "reclaim", "plain") if rng.random() < 0.4] or [
        rng.choice(("never", "own", "reclaim"))]
    for kind in chosen:
        if kind == "never":
            per = rng.choice(tuple(g for g in pers if g >= 2) or pers)
            replicas = more_than_free(per)
            tasks = [{"name": "worker", "replicas": replicas, "template": template(per, "debug-job")}]
            if rng.random() < 0.5:
                tasks.append({"name": "aux", "replicas": 1, "template": template(rng.choice(pers), None)})
            job(tasks, max(leaves, key=lambda q: (lower[q], q)), rng.choice(("critical-job", "large-job",
                                                                              "normal-job")),
                sum(t["replicas"] for t in tasks))
            kinds.add("never")
        elif kind == "own":
            per_w = rng.choice(tuple(g for g in pers if g <= max(1, gpus // 2)))
            n_w = rng.choice((2, 2, 3))
            workers = _spread(rng, {n: free[n] for n in all_nodes if n not in tainted}, n_w, per_w)
            per_l = rng.choice(pers)
            tasks = [{"name": "worker", "replicas": n_w, "template": template(per_w, rng.choice(("normal-job",
                                                                                                 "spot-job")))},
                     {"name": "lead", "replicas": 1, "template": template(per_l, "critical-job")}]
            doc = job(tasks, rng.choice(leaves), rng.choice(("normal-job", "large-job")),
                      n_w + rng.choice((0, 1)))
            if len(workers) == n_w:
                for n in workers:
                    free[n] -= per_w
                name = doc["metadata"]["name"]
                case.partial[name] = [(f"{name}-worker-{k}", n) for k, n in enumerate(workers)]
                kinds.add("own")
        elif kind == "reclaim":
            per = rng.choice(pers)
            replicas = more_than_free(per)
            job([{"name": "worker", "replicas": replicas, "template": template(per, None)}], flat,
                rng.choice(("normal-job", "large-job", "critical-job")), replicas)
            kinds.add("reclaim")
        else:
            per = rng.choice(pers)
            replicas = rng.choice((1, 2, 2, 3))
            job([{"name": "worker", "replicas": replicas, "template": template(per, None)}],
                rng.choice(teams or leaves), rng.choice(("critical-job", "large-job", "normal-job", "spot-job")),
                replicas if rng.random() < 0.8 else max(1, replicas - 1))
    single = [j for j in case.pending if len(j["spec"]["tasks"]) == 1 and j["spec"]["tasks"][0]["replicas"] >= 2
              and j["metadata"]["name"] not in case.partial]
    for j in rng.sample(single, min(2, len(single))):
        _bind_some(case, rng, j, free, racks)
    if case.partial:
        kinds.add("partial")
    if len(case.partial) > 1:
        kinds.add("partial2")
    case.kinds = tuple(sorted(kinds | {"preempt", "reclaim"}))
    return case


def never_case(ns: str, beyond: bool) -> Case:
    """A hand-made case of preemptionPolicy Never in a task template (``test_volcano_diff.py``): one queue;
    8-GPU nodes, ``n0`` half held by a running critical-job pod (minMember 1: no plugin offers it), ``n1``
    (and ``n2`` when ``beyond``) each held by a running spot-job pod of a PodGroup of minMember 0 (the priority
    and gang plugins offer it); a pending critical-job VCJob of task ``a`` (one 4-GPU pod, debug-job: Never)
    and task ``b`` (8-GPU pods of the job's class, one, or two when ``beyond``), minAvailable all its pods
    (``beyond``: b's two). Allocate finds no node for b; Volcano's preempt evicts for b's pods and passes over
    a's, though ``n0`` has room for it: without ``beyond`` the gang is not pipelined and nothing is evicted;
    with it, b's pods preempt and a is a replica beyond the gang for the next allocate."""
    case = Case(0, 0, ns)
    names = [f"{ns}-n{i}" for i in range(3 if beyond else 2)]
    case.nodes = [_node(n, 8, 64, 512, {}, False) for n in names]
    queue = f"{ns}-q"
    case.queues = [_queue(queue, {"parent": "root", "reclaimable": True, "deserved": {GPU: 8 * len(names)}})]

    def gang(name: str, node: str, gpus: int, pc: str, min_member: int) -> list[dict[str, Any]]:
        return [_podgroup(ns, name, {"minMember": min_member, "queue": queue, "priorityClassName": pc}),
                _pod(ns, f"{name}-0", name, node, gpus, 8, 64, pc)]

    case.running = [gang("c0", names[0], 4, "critical-job", 1),
                    *(gang(f"r{k}", node, 8, "spot-job", 0) for k, node in enumerate(names[1:]))]
    never = _pod_spec(4, 64, 8, 512)
    never["priorityClassName"] = "debug-job"
    b = 2 if beyond else 1
    case.pending = [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                     "metadata": {"name": "j0", "namespace": ns},
                     "spec": {"schedulerName": "volcano", "queue": queue, "minAvailable": b if beyond else b + 1,
                              "priorityClassName": "critical-job",
                              "tasks": [{"name": "a", "replicas": 1, "template": {"spec": never}},
                                        {"name": "b", "replicas": b, "template": {"spec": _pod_spec(8, 64, 8, 512)}}]}}]
    case.kinds = ("allocate", "never", "preempt")
    return case


def remade_case(ns: str, deserved: int) -> Case:
    """A hand-made case of a running VCJob's pod taken by reclaim's second tier (``test_volcano_diff.py``; the
    rule ``placement.jobs.remade``): 8-GPU nodes ``n0`` and ``n1``; VCJob ``g`` of queue ``other`` (``deserved``
    GPUs: 0 puts its 8 above it) runs ``g-worker-0`` on ``n0`` with minAvailable 1 and its replica 1 pending, which
    fits nowhere; ``n1`` runs ``b-0`` of queue ``keep`` (within its deserved); ``j`` (queue ``mine``) needs a whole
    node. The gang plugin offers nothing for ``g`` (ready 1 <= minAvailable 1), its tier ends and the capacity
    plugin decides: above its deserved, ``g-worker-0`` goes, ``j`` takes ``n0``, and ``g``'s controller makes the
    pod again, pending; within it, nothing moves."""
    case = Case(0, 0, ns)
    names = [f"{ns}-n{i}" for i in range(2)]
    case.nodes = [_node(n, 8, 64, 512, {}, False) for n in names]

    def q(name: str, gpus: int) -> dict[str, Any]:
        return _queue(f"{ns}-{name}", {"parent": "root", "reclaimable": True,
                                       "deserved": {GPU: gpus, "cpu": str(gpus * 8), "memory": f"{gpus * 64}Gi"}})

    case.queues = [q("mine", 8), q("other", deserved), q("keep", 8)]
    case.running = [[_podgroup(ns, "b", {"minMember": 1, "queue": f"{ns}-keep", "priorityClassName": "normal-job"}),
                     _pod(ns, "b-0", "b", names[1], 8, 8, 64, "normal-job")]]

    def job(name: str, queue: str, replicas: int) -> dict[str, Any]:
        return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": name, "namespace": ns},
                "spec": {"schedulerName": "volcano", "queue": f"{ns}-{queue}", "minAvailable": 1,
                         "priorityClassName": "normal-job",
                         "tasks": [{"name": "worker", "replicas": replicas,
                                    "template": {"spec": _pod_spec(8, 64, 8, 512)}}]}}

    case.pending = [job("g", "other", 2), job("j", "mine", 1)]
    case.partial = {"g": [("g-worker-0", names[0])]}
    case.kinds = ("allocate", "partial", "reclaim")
    return case


def dropped_case(ns: str, deserved: int) -> Case:
    """``remade_case`` with a bare PodGroup (the rule ``placement.jobs.dropped_pods``): ``g`` of queue ``other``
    (``deserved`` GPUs), minMember 1, runs ``g-0`` (8 GPUs) on ``n0`` and waits with ``g-1``, which fits nowhere;
    ``n1`` runs ``b-0`` of queue ``keep``; ``j`` (queue ``mine``) needs a whole node. Above its deserved the
    capacity plugin gives ``g-0`` up (the gang plugin offers nothing at minMember); nothing makes it again, and
    ``g`` could still be ready with ``g-1`` if room came."""
    case = remade_case(ns, deserved)
    case.pending = [j for j in case.pending if j["metadata"]["name"] != "g"]
    case.partial = {"g": [("g-0", f"{ns}-n0")]}
    pending = _pod(ns, "g-1", "g", "", 8, 8, 64, "normal-job")
    del pending["spec"]["nodeName"]
    case.bare = [[_podgroup(ns, "g", {"minMember": 1, "queue": f"{ns}-other", "priorityClassName": "normal-job"}),
                  _pod(ns, "g-0", "g", "", 8, 8, 64, "normal-job"), pending]]
    del case.bare[0][1]["spec"]["nodeName"]  # bound by the recorder as a scheduler would (``partial``)
    case.kinds = ("allocate", "partial", "podgroups", "reclaim")
    return case


def _spread(rng: random.Random, room: dict[str, int], count: int, per: int) -> list[str]:
    """Up to ``count`` pods of ``per`` GPUs, each on a node drawn among those of ``room`` (node -> free GPUs,
    taken as they are placed) with room for it; the nodes, as many as fit."""
    chosen: list[str] = []
    for _ in range(count):
        spots = sorted(n for n, g in room.items() if g >= per)
        if not spots:
            break
        n = rng.choice(spots)
        room[n] -= per
        chosen.append(n)
    return chosen


def _partial_bare(case: Case, seed: int, index: int) -> None:
    """In half the cases one plain bare gang of 2+ pods (a hard-topology one when there is) is partly running:
    1..n-1 of its pods bound before the scheduler starts, on untainted nodes with room (inside one rack under a
    hard topology; without room, the cluster's last running gangs are left out until there is). A stream of its
    own."""
    rng = random.Random(f"partial-bare/{seed}/{index}")
    if rng.random() >= 0.5:
        return
    plain = [g for g in case.bare if len(g) >= 3 and "subGroupPolicy" not in g[0]["spec"]
             and "minTaskMember" not in g[0]["spec"]]
    hard = [g for g in plain if g[0]["spec"].get("networkTopology", {}).get("mode") == "hard"]
    if not plain:
        return
    gang = rng.choice(hard or plain)
    per = int(gang[1]["spec"]["containers"][0]["resources"]["requests"][GPU])
    running = rng.randint(1, len(gang) - 2)
    racks = sorted({tuple(sorted(m)) for t, m in case.members.values() if t == 1})
    while True:  # without room for its running pods, the last running gangs of the cluster go first
        free: dict[str, int] = {d["metadata"]["name"]: int(d["status"]["capacity"][GPU]) for d in case.nodes
                                if not d["spec"].get("taints")}
        for other in case.running:
            for p in other[1:]:
                if p["spec"]["nodeName"] in free:
                    free[p["spec"]["nodeName"]] -= int(p["spec"]["containers"][0]["resources"]["requests"][GPU])
        groups = [list(r) for r in racks] if gang in hard else [sorted(free)]
        rng.shuffle(groups)
        for group in groups:
            chosen = _spread(rng, {n: free[n] for n in group if n in free}, running, per)
            if len(chosen) == running:
                case.partial[gang[0]["metadata"]["name"]] = [(p["metadata"]["name"], n)
                                                             for p, n in zip(gang[1:], chosen, strict=False)]
                return
        if not case.running:
            return
        case.running.pop()


def renamed(case: Case, ns: str) -> Case:
    """The same case under another namespace and prefix (every name in it is derived from the namespace)."""
    d = {"nodes": case.nodes, "hypernodes": case.hypernodes, "queues": case.queues, "running": case.running,
         "pending": case.pending, "members": {k: [t, sorted(m)] for k, (t, m) in case.members.items()},
         "partial": case.partial, "bare": case.bare}
    d = json.loads(json.dumps(d).replace(case.ns, ns))
    return Case(case.seed, case.index, ns, d["nodes"], d["hypernodes"], d["queues"], d["running"], d["pending"],
                {k: (t, frozenset(m)) for k, (t, m) in d["members"].items()}, case.kinds,
                {k: [(p, n) for p, n in v] for k, v in d["partial"].items()}, d["bare"])


def _split(rng: random.Random, total: int, parts: int) -> list[int]:
    cuts = sorted(rng.randint(0, total) for _ in range(parts - 1))
    edges = [0, *cuts, total]
    return [edges[i + 1] - edges[i] for i in range(parts)]


def _queue(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def _pod(ns: str, name: str, group: str, node: str, gpus: int, cpu_per: int, mem_per: int, pc: str) -> dict[str, Any]:
    res = {"requests": _res(gpus, gpus * cpu_per, gpus * mem_per), "limits": {GPU: str(gpus)}}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "annotations": {"scheduling.k8s.io/group-name": group}},
            "spec": {"nodeName": node, "schedulerName": "volcano", "priorityClassName": pc,
                     "tolerations": [{"operator": "Exists"}],
                     "containers": [{"name": "main", "image": "busy:1", "resources": res}]}}


# ---- running one case on a real cluster --------------------------------------------------------------


@dataclass
class Observed:
    """What each side did with one case."""

    snapshot_error: str = ""
    plans: dict[str, Any] = field(default_factory=dict)  # solver -> optplan place -o json (or {"error": ...})
    bound: dict[str, str] = field(default_factory=dict)  # pending job's pod -> node (Volcano)
    evicted: dict[str, tuple[str, str]] = field(default_factory=dict)  # running pod -> (node, preempt|reclaim)
    phases: dict[str, str] = field(default_factory=dict)  # PodGroup -> phase
    seconds: dict[str, float] = field(default_factory=dict)
    node_list: list[str] = field(default_factory=list)  # vc-scheduler's node list as it began (``node_list``)


def _next_second() -> None:
    time.sleep(1.02 - time.time() % 1.0)


def _optplan(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", CODE, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=ROOT)


def _batches(items: list[Any], key: Any) -> list[list[Any]]:
    """Items in as few batches as possible, in order, no two of one batch with the same key: what one
    second may create without Volcano's creation-time order (second resolution) meeting a tie."""
    out: list[list[Any]] = []
    for item in items:
        k = key(item)
        for batch in out:
            if all(key(other) != k for other in batch):
                batch.append(item)
                break
        else:
            out.append([item])
    return out


def _state(c: Cluster, ns: str) -> tuple[Any, ...]:
    pods = c.kubectl_json("get", "pods", "-n", ns)["items"]
    pgs = c.kubectl_json("get", "podgroups", "-n", ns)["items"]
    return (tuple(sorted((p["metadata"]["name"], p["spec"].get("nodeName") or "", p["status"].get("phase", ""),
                          "deletionTimestamp" in p["metadata"]) for p in pods)),
            tuple(sorted((g["metadata"]["name"], g.get("status", {}).get("phase", "")) for g in pgs)))


def _in_flight(c: Cluster, case: Case, state: tuple[Any, ...]) -> bool:
    """Whether something Volcano started has not reached the API server's objects yet: a pod terminating, a pod
    bound and not Running yet, or a running gang's pod gone without the scheduler's Evict event (the events
    are written apart from the deletion)."""
    pods = state[0]
    if any(gone or (node and phase != "Running") for _name, node, phase, gone in pods):
        return True
    running = {d["metadata"]["name"] for gang in case.running for d in gang[1:]}
    gone = running - {name for name, *_ in pods}
    if not gone:
        return False
    told = {e["involvedObject"]["name"] for e in c.kubectl_json(
        "get", "events", "-n", case.ns, "--field-selector", "reason=Evict")["items"]}
    return not gone <= told


def settle_volcano(c: Cluster, case: Case, *, sessions: int = 4, limit: float = WAIT) -> tuple[float, tuple[Any, ...]]:
    """Wait until vc-scheduler (just started) is done with the case: its pods and PodGroups unchanged over
    ``sessions`` whole scheduling sessions, nothing in flight (``_in_flight``); counted in sessions, not
    seconds, so that a loaded machine's slower sessions wait as long as they need. At most ``limit``
    seconds (then what is there is read back); the seconds it took and the state it settled on."""
    t1 = time.monotonic()
    c.wait_for("vc-scheduler's metrics", lambda: c.scheduler_sessions() >= 0)
    last, since = _state(c, case.ns), c.scheduler_sessions()
    while time.monotonic() - t1 < limit:
        time.sleep(1.0)
        now, done = _state(c, case.ns), c.scheduler_sessions()
        if now != last:
            last, since = now, done
        elif done >= since + 1 + sessions and not _in_flight(c, case, now):  # + 1: the session open at `since`
            break
    return time.monotonic() - t1, last


def run_case(c: Cluster, case: Case, workdir: Path, *, settle: int = 4, limit: float = WAIT,
             solvers: Iterable[str] = ("greedy", "auto"), restart: bool = True,
             start: Callable[[Cluster, Case], None] | None = None,
             after: Callable[[Cluster, Observed], None] | None = None) -> Observed:
    """The case on the cluster (module docstring); the cluster is left without it, vc-scheduler running
    again when ``restart`` (else stopped, as the next case wants it). ``settle``: scheduling sessions without
    a change that end Volcano's turn (``settle_volcano``). ``start``: how vc-scheduler is started once optplan
    has its snapshot (``Cluster.start_scheduler`` by default). ``after``: called once Volcano is done and its
    outcome read back, before the case is deleted (to look at the cluster as Volcano left it)."""
    obs = Observed()
    t0 = time.monotonic()
    c.stop_scheduler()
    ns = case.ns
    try:
        c.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}, *case.cluster_docs()])
        c.wait_for("queues Open", lambda: all(
            c.kubectl_json("get", "queue", q["metadata"]["name"]).get("status", {}).get("state") == "Open"
            for q in case.queues))
        for batch in _batches(case.running, lambda g: PRIORITY[g[0]["spec"]["priorityClassName"]]):
            _next_second()
            c.apply([d for gang in batch for d in gang])
        running = {d["metadata"]["name"] for gang in case.running for d in gang[1:]}
        c.wait_for("running gangs Running", lambda: {
            p["metadata"]["name"] for p in c.kubectl_json("get", "pods", "-n", ns)["items"]
            if p["status"].get("phase") == "Running"} >= running)
        want = {j["metadata"]["name"]: sum(t["replicas"] for t in j["spec"]["tasks"]) for j in case.pending}

        def groups() -> dict[str, dict[str, Any]]:
            out = {}
            for g in c.kubectl_json("get", "podgroups", "-n", ns)["items"]:
                owner = (g["metadata"].get("ownerReferences") or [{}])[0].get("name")
                if owner in want:
                    out[owner] = g
            return out

        made: set[str] = set()
        for jobs in _batches(case.pending, lambda j: (j["spec"]["queue"], PRIORITY[j["spec"]["priorityClassName"]])):
            _next_second()
            c.apply(jobs)
            # Volcano orders jobs by their PodGroup's creation time, and the job controller makes the PodGroups
            # (late on a loaded machine): a batch's PodGroups exist before the next batch's jobs are created
            made |= {j["metadata"]["name"] for j in jobs}
            c.wait_for("the VCJobs' PodGroups", lambda made=frozenset(made): set(groups()) == made)
        for g in groups().values():  # the job controller creates a job's pods once its PodGroup is Inqueue
            c.kubectl("patch", "podgroup", g["metadata"]["name"], "-n", ns,  # no status subresource
                      "--type=merge", "-p", '{"status":{"phase":"Inqueue"}}')

        def job_pods() -> dict[str, int]:
            counts: dict[str, int] = {}
            for p in c.kubectl_json("get", "pods", "-n", ns)["items"]:
                job = p["metadata"].get("labels", {}).get("volcano.sh/job-name")
                if job:
                    counts[job] = counts.get(job, 0) + 1
            return counts

        c.wait_for("the VCJobs' pods", lambda: job_pods() == want)
        c.wait_for("the VCJobs Pending", lambda: all(
            j.get("status", {}).get("state", {}).get("phase") == "Pending"
            for j in c.kubectl_json("get", "jobs.batch.volcano.sh", "-n", ns)["items"]))
        for gangs in _batches(case.bare, lambda g: (g[0]["spec"]["queue"],
                                                    PRIORITY[g[0]["spec"]["priorityClassName"]])):
            _next_second()  # bare PodGroups, Inqueue as the VCJobs' are, and their pods (no controller makes them)
            c.apply([{**g[0], "status": {"phase": "Inqueue"}} for g in gangs])
            c.apply([p for g in gangs for p in g[1:]])
        if case.bare:
            want_bare = {p["metadata"]["name"] for g in case.bare for p in g[1:]}
            c.wait_for("the bare gangs' pods", lambda: want_bare <= {
                p["metadata"]["name"] for p in c.kubectl_json("get", "pods", "-n", ns)["items"]})
        if case.partial:  # the running members of a partly running gang, bound as a scheduler would
            c.kubectl("create", "-f", "-", input="\n---\n".join(json.dumps(
                {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod, "namespace": ns},
                 "target": {"apiVersion": "v1", "kind": "Node", "name": node}})
                for pods in case.partial.values() for pod, node in pods))
            bound = {pod for pods in case.partial.values() for pod, _n in pods}
            c.wait_for("the partly running gangs' pods Running", lambda: bound <= {
                p["metadata"]["name"] for p in c.kubectl_json("get", "pods", "-n", ns)["items"]
                if p["status"].get("phase") == "Running"})
            ready = {j["metadata"]["name"] for j in case.pending  # a starving one stays Pending
                     if len(case.partial.get(j["metadata"]["name"], ())) >= j["spec"]["minAvailable"]}
            c.wait_for("the partly running VCJobs Running", lambda: all(
                j.get("status", {}).get("state", {}).get("phase") == "Running"
                for j in c.kubectl_json("get", "jobs.batch.volcano.sh", "-n", ns)["items"]
                if j["metadata"]["name"] in ready))
        obs.seconds["create"] = time.monotonic() - t0
        snap = workdir / f"{ns}.yaml"
        res = subprocess.run([sys.executable, "-c", CODE, "snapshot", "--kubeconfig", str(c.kubeconfig),
                              "-o", str(snap)], capture_output=True, text=True, cwd=ROOT, timeout=120)
        if res.returncode != 0:
            obs.snapshot_error = res.stderr.strip()
        obs.seconds["snapshot"] = time.monotonic() - t0 - obs.seconds["create"]
        procs = {} if obs.snapshot_error else {s: place(snap, s) for s in solvers}
        log = c.logdir / "vc-scheduler.log"
        mark = log.stat().st_size if log.exists() else 0  # this start's lines come after it (the log is appended)
        if start is None:
            c.start_scheduler()
        else:
            start(c, case)
        obs.seconds["volcano"] = 0.0
        while True:  # a session that changes something after the quiet ones, before the read-back: settle again
            took, settled = settle_volcano(c, case, sessions=settle, limit=limit - obs.seconds["volcano"])
            obs.seconds["volcano"] += took
            obs.bound, obs.evicted, obs.phases = {}, {}, {}
            _read_back(c, case, obs)
            if _state(c, ns) == settled or obs.seconds["volcano"] >= limit:
                break
        if log.exists():  # vc-scheduler's node list as this start began (its log at level 5; else none)
            with log.open("rb") as fh:
                fh.seek(mark)
                text = fh.read().decode("utf-8", "replace")
            obs.node_list = node_list(text, [n["metadata"]["name"] for n in case.nodes])
        obs.plans = {s: result(proc) for s, proc in procs.items()}
        save(obs, workdir / f"{ns}.volcano.json")
        if after is not None:
            after(c, obs)
    finally:
        t2 = time.monotonic()
        c.stop_scheduler()
        _delete(c, case)
        obs.seconds["delete"] = time.monotonic() - t2
        if restart:
            c.start_scheduler()
    obs.seconds["total"] = time.monotonic() - t0
    return obs


def place(snapshot: Path, solver: str) -> subprocess.Popen[str]:
    """``optplan place SNAPSHOT --solver S -o json`` under the scheduler configuration vc-scheduler runs with."""
    return _optplan("place", str(snapshot), "--solver", solver, *conf_args(snapshot), *PLACE_ARGS)


def conf_args(snapshot: Path) -> tuple[str, ...]:
    """The cluster's volcano-scheduler ConfigMap when the snapshot carries it (``optplan place`` reads it from
    the file), else the file vc-scheduler is started with (``SCHEDULER_CONF``)."""
    return () if "volcano-scheduler-configmap" in snapshot.read_text() else ("--scheduler-conf", str(SCHEDULER_CONF))


def result(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = proc.communicate(timeout=300)
    return json.loads(out) if proc.returncode == 0 else {"error": err.strip(), "exit": proc.returncode}


def save_case(case: Case, path: Path) -> None:
    """The generated case itself, so that ``--replan`` compares against the cluster that was run even
    after the generator changed."""
    d = {"seed": case.seed, "index": case.index, "ns": case.ns, "nodes": case.nodes, "hypernodes": case.hypernodes,
         "queues": case.queues, "running": case.running, "pending": case.pending,
         "members": {k: [t, sorted(m)] for k, (t, m) in case.members.items()}, "kinds": list(case.kinds),
         "partial": case.partial, **({"bare": case.bare} if case.bare else {})}
    path.write_text(json.dumps(d), encoding="utf-8")


def load_case(path: Path) -> Case:
    d = json.loads(path.read_text(encoding="utf-8"))
    return Case(d["seed"], d["index"], d["ns"], d["nodes"], d["hypernodes"], d["queues"], d["running"], d["pending"],
                {k: (t, frozenset(m)) for k, (t, m) in d["members"].items()}, tuple(d["kinds"]),
                {k: [(p, n) for p, n in v] for k, v in d.get("partial", {}).items()}, d.get("bare", []))


def save(obs: Observed, path: Path) -> None:
    """What Volcano did (and the snapshot's error), so that optplan can be re-planned offline (``load``); with
    vc-scheduler's node list when its log had it (``nodeList``, its first node ``nodeListStart``, and whether it
    is the names rotated, ``nodeListRotation``)."""
    d: dict[str, Any] = {"snapshot_error": obs.snapshot_error, "bound": obs.bound, "evicted": obs.evicted,
                         "phases": obs.phases, "seconds": obs.seconds}
    if obs.node_list:
        d |= node_list_fields(obs.node_list)
    path.write_text(json.dumps(d, indent=1), encoding="utf-8")


def node_list_fields(order: list[str]) -> dict[str, Any]:
    """vc-scheduler's node list as a recording stores it: ``nodeList``, its first node ``nodeListStart``, and
    whether it is the names rotated, ``nodeListRotation`` (``save``; ``benchmarks/volcano_log.py --write``)."""
    return {"nodeList": order, "nodeListStart": order[0], "nodeListRotation": rotation(order)}


def load(path: Path) -> Observed:
    d = json.loads(path.read_text(encoding="utf-8"))
    return Observed(d["snapshot_error"], {}, d["bound"], {k: (v[0], v[1]) for k, v in d["evicted"].items()},
                    d["phases"], d["seconds"], d.get("nodeList", []))


def _read_back(c: Cluster, case: Case, obs: Observed) -> None:
    ns = case.ns
    jobs = {j["metadata"]["name"] for j in case.pending} | {g[0]["metadata"]["name"] for g in case.bare}
    for p in c.kubectl_json("get", "pods", "-n", ns)["items"]:
        job = (p["metadata"].get("labels", {}).get("volcano.sh/job-name")
               or p["metadata"].get("annotations", {}).get("scheduling.k8s.io/group-name"))
        if job in jobs and p["spec"].get("nodeName") and "deletionTimestamp" not in p["metadata"]:
            obs.bound[p["metadata"]["name"]] = p["spec"]["nodeName"]
    nodes = {d["metadata"]["name"]: d["spec"]["nodeName"] for gang in case.running for d in gang[1:]}
    for e in c.kubectl_json("get", "events", "-n", ns, "--field-selector", "reason=Evict")["items"]:
        if e["involvedObject"].get("kind") != "Pod":  # the PodGroup gets one too
            continue
        name = e["involvedObject"]["name"]
        why = "reclaim" if "reclaim" in e.get("message", "") else "preempt"
        obs.evicted[name] = (nodes.get(name, ""), why)
    for g in c.kubectl_json("get", "podgroups", "-n", ns)["items"]:
        owner = (g["metadata"].get("ownerReferences") or [{}])[0].get("name") or g["metadata"]["name"]
        obs.phases[owner] = g.get("status", {}).get("phase", "")


def _delete(c: Cluster, case: Case) -> None:
    ns = case.ns
    # Everything a snapshot reads goes now; the namespace's other objects (events, ...) with it, later.
    c.kubectl("delete", "jobs.batch.volcano.sh", "--all", "-n", ns, "--wait=false", check=False)
    c.kubectl("delete", "pods", "--all", "-n", ns, "--grace-period=0", "--force", check=False)
    c.kubectl("delete", "podgroups", "--all", "-n", ns, check=False)
    c.kubectl("delete", "queue", *[d["metadata"]["name"] for d in case.queues], check=False)
    if case.hypernodes:
        c.kubectl("delete", "hypernode", *[d["metadata"]["name"] for d in case.hypernodes], check=False)
    c.kubectl("delete", "node", *[d["metadata"]["name"] for d in case.nodes], check=False)
    c.kubectl("delete", "namespace", ns, "--wait=false", check=False)
    c.wait_for(f"{ns}'s pods, PodGroups and VCJobs gone", lambda: not any(
        c.kubectl_json("get", kind, "-n", ns)["items"] for kind in ("pods", "podgroups", "jobs.batch.volcano.sh")))


# ---- comparing -----------------------------------------------------------------------------------------


@dataclass
class Verdict:
    """One case's comparison for one solver: per action, None (nothing to compare) or agree/disagree."""

    solver: str
    allocate: bool | None = None  # admitted job sets equal
    preempt: bool | None = None  # preempt victim sets equal (when either side has one)
    reclaim: bool | None = None
    topology: list[bool] = field(default_factory=list)  # per topology job admitted by both: same HyperNode
    partial: list[bool] = field(default_factory=list)  # per partly running gang: as many more pods placed
    partitions: list[bool] = field(default_factory=list)  # per partition both place whole: the same HyperNode
    nodes: tuple[int, int] = (0, 0)  # pods on the same node / pods bound by both
    fewer: bool = False  # optplan admitted fewer jobs than Volcano
    error: str = ""
    details: dict[str, Any] = field(default_factory=dict)


def _podgroup(ns: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    """A PodGroup of the case (a running gang's or a bare gang's), its spec as given."""
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": ns}, "spec": spec}


def lowest_hypernode(case: Case, nodes: Iterable[str]) -> str | None:
    """The lowest-tier HyperNode holding every node (ties by name); None when none does."""
    want = set(nodes)
    fits = [(tier, name) for name, (tier, members) in case.members.items() if want <= members]
    return min(fits)[1] if fits and want else None


def case_jobs(case: Case) -> dict[str, dict[str, Any]]:
    """The case's pending gangs by name: its VCJobs and its bare PodGroups (read as a VCJob, ``_bare_jobs``)."""
    jobs = {j["metadata"]["name"]: j for j in case.pending}
    jobs.update((name, spec) for name, spec, _pods in _bare_jobs(case))
    return jobs


def planned(case: Case, plan: dict[str, Any]) -> tuple[dict[str, dict[str, str]], set[str],
                                                       dict[str, tuple[str, str]]]:
    """What a plan does in the case: per job its pods' nodes (a partly running gang's running pods with its
    bindings, but those it evicts: a VCJob's controller makes such a pod again, bound where a binding says), the
    jobs admitted (a partly running gang also when its running pods and bindings reach its
    minAvailable: the plan's "admitted" speaks of the pending pods it places), and the victims (node, reason)."""
    jobs = case_jobs(case)
    pods: dict[str, dict[str, str]] = {}
    admitted = set()
    victims: dict[str, tuple[str, str]] = {}
    for jp in plan["jobs"]:
        if jp["namespace"] != case.ns:
            continue
        pods[jp["name"]] = {b.get("pod") or f"{jp['name']}-{b['task']}-{b['index']}": b["node"]
                            for b in jp["bindings"]}
        if jp["admitted"]:
            admitted.add(jp["name"])
        for vic in jp["victims"]:
            victims[vic["name"]] = (vic["node"], vic["reason"])
    for j, pre in sorted(case.partial.items()):
        if j not in jobs:
            continue
        mine = pods.setdefault(j, {})
        for pod, node in pre:  # a running pod the plan evicts is gone (bound again where a binding says)
            if pod not in victims:
                mine[pod] = node
        if len(pods[j]) >= jobs[j]["spec"]["minAvailable"]:
            admitted.add(j)
    return pods, admitted, victims


def volcano_did(case: Case, obs: Observed) -> tuple[dict[str, dict[str, str]], set[str]]:
    """What Volcano did in the recording: per job its pods' nodes (``obs.bound``), and the jobs admitted (their
    bound pods reach minAvailable)."""
    jobs = case_jobs(case)
    members = {p: name for name, _spec, pods in _bare_jobs(case) for p in pods}
    pods: dict[str, dict[str, str]] = {j: {} for j in jobs}
    for pod, node in obs.bound.items():
        job = members.get(pod) or next((n for n in (j["metadata"]["name"] for j in case.pending)
                                        if pod.startswith(n + "-")), None)
        if job:
            pods[job][pod] = node
    return pods, {j for j, spec in jobs.items() if len(pods[j]) >= spec["spec"]["minAvailable"]}


def compare(case: Case, obs: Observed, solver: str) -> Verdict:
    v = Verdict(solver)
    plan = obs.plans.get(solver)
    if obs.snapshot_error or plan is None or "error" in plan:
        v.error = obs.snapshot_error or (plan or {}).get("error", "no plan")
        return v
    jobs = case_jobs(case)
    vol_pods, vol_admitted = volcano_did(case, obs)
    opt_pods, opt_admitted, opt_victims = planned(case, plan)
    for j, pre in sorted(case.partial.items()):  # a partly running gang: its running pods on both sides
        if j not in jobs:
            continue
        extra = (len(opt_pods[j]) - len(pre), len(vol_pods[j]) - len(pre))
        v.partial.append(extra[0] == extra[1])
        if extra[0] != extra[1]:
            v.details.setdefault("partial", {})[j] = {"optplan": extra[0], "volcano": extra[1]}
    v.allocate = opt_admitted == vol_admitted
    v.fewer = len(opt_admitted) < len(vol_admitted)
    for action in ("preempt", "reclaim"):
        o = {n for n, (_, why) in opt_victims.items() if why == action}
        w = {n for n, (_, why) in obs.evicted.items() if why == action}
        if o or w:
            setattr(v, action, o == w)
            v.details[action] = {"optplan": sorted(o), "volcano": sorted(w)}
    both = opt_admitted & vol_admitted
    same = total = 0
    for j in sorted(both):
        o, w = opt_pods.get(j, {}), vol_pods[j]
        running = {pod for pod, _n in case.partial.get(j, ())}
        for pod in set(o) & set(w):
            total += 1
            same += o[pod] == w[pod]
        if "networkTopology" in jobs[j]["spec"]:
            ho, hw = lowest_hypernode(case, o.values()), lowest_hypernode(case, w.values())
            v.topology.append(ho == hw)
            if ho != hw:
                v.details.setdefault("topology", {})[j] = {"optplan": ho, "volcano": hw}
        for label, names in _parts(jobs[j]):
            if not all(n in o for n in names) or not all(n in w for n in names):
                continue
            if all(n in running for n in names):  # bound before the scheduler started: nothing to compare
                continue
            ho, hw = lowest_hypernode(case, [o[n] for n in names]), lowest_hypernode(case, [w[n] for n in names])
            v.partitions.append(ho == hw)
            if ho != hw:
                v.details.setdefault("partitions", {})[f"{j}/{label}"] = {"optplan": ho, "volcano": hw}
    v.nodes = (same, total)
    if not v.allocate:
        v.details["admitted"] = {"optplan": sorted(opt_admitted), "volcano": sorted(vol_admitted)}
    return v


def _bare_jobs(case: Case) -> list[tuple[str, dict[str, Any], list[str]]]:
    """Each bare gang as compare reads a VCJob: its name, a spec (minAvailable its minMember, its
    networkTopology, ``subgroups``: pod names per subgroup) and its pods' names."""
    out = []
    for g in case.bare:
        pg, pods = g[0], g[1:]
        spec: dict[str, Any] = {"minAvailable": pg["spec"]["minMember"], "tasks": []}
        if "networkTopology" in pg["spec"]:
            spec["networkTopology"] = pg["spec"]["networkTopology"]
        groups: dict[str, list[str]] = {}
        if pg["spec"].get("subGroupPolicy"):
            for p in pods:
                groups.setdefault(p["metadata"]["labels"]["grp"], []).append(p["metadata"]["name"])
        spec["subgroups"] = groups
        out.append((pg["metadata"]["name"], {"spec": spec}, [p["metadata"]["name"] for p in pods]))
    return out


def _parts(job: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """A pending job's partitions (a VCJob task's ``partitionPolicy``) or subgroups (a bare gang's), each
    ``(TASK/PARTITION or SUBGROUP, its pod names)``."""
    j = job.get("metadata", {}).get("name")
    out = [(f"{name}", pods) for name, pods in sorted(job["spec"].get("subgroups", {}).items())]
    for task in job["spec"]["tasks"]:
        pp = task.get("partitionPolicy")
        if pp is None:
            continue
        size = pp["partitionSize"]
        out += [(f"{task['name']}/{part}", [f"{j}-{task['name']}-{k}" for k in range(part * size, (part + 1) * size)])
                for part in range(pp["totalPartitions"])]
    return out
