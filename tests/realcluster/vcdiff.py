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
  a ``partitionPolicy`` (``generate``'s cases unchanged by it).
- ``run_case(cluster, case, workdir)``: with vc-scheduler stopped, creates the case (running gangs one
  second apart, pending VCJobs one second apart, so that Volcano's creation-time orders are not ties),
  puts the pending jobs' PodGroups ``Inqueue`` (so that Volcano's job controller creates every pod before
  the scheduler starts), takes ``optplan snapshot`` of the live cluster, runs ``optplan place --solver
  greedy`` and ``auto`` on it, starts vc-scheduler, waits until nothing changes (over four of its sessions,
  nothing in flight, every evicted pod's Evict event written), reads back bindings,
  evictions (the scheduler's ``Evict`` events, which name preempt or reclaim) and PodGroup phases, and
  deletes the case.
- ``compare(case, observed)``: per action, whether optplan and Volcano agree (admitted jobs; preempt and
  reclaim victim sets; the lowest HyperNode holding a topology job's pods; per partly running gang, how
  many more pods are placed; per partition both place whole, the lowest HyperNode holding it; per pod the
  node).

``benchmarks/volcano_diff.py`` runs many; ``test_volcano_diff.py`` a few seeds.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.realcluster.cluster import CODE, KWOK_ANNOTATION, ROOT, WAIT, Cluster

GPU = "nvidia.com/gpu"
SCHEDULER_CONF = ROOT / "hack" / "cluster" / "volcano-scheduler.conf"  # the binpack and HyperNode binpack weights
NOW = "2030-01-01T00:00:00Z"  # victims' cost only (the exact model); Volcano's order needs no clock
PLACE_ARGS = ("--now", NOW, "--deterministic", "--time-limit", "5", "-o", "json")
PRIORITY_CLASSES = (("critical-job", 1000, "PreemptLowerPriority"), ("large-job", 800, "PreemptLowerPriority"),
                    ("normal-job", 100, "PreemptLowerPriority"), ("debug-job", 50, "Never"),
                    ("spot-job", 50, "PreemptLowerPriority"))
PRIORITY = {name: value for name, value, _ in PRIORITY_CLASSES}
TAINT = {"key": "dedicated", "value": "infer", "effect": "NoSchedule"}


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
        out: dict[str, Any] = {GPU: g}
        if "cpu" in dims:
            out["cpu"] = str(g * cpu // gpus)
            out["memory"] = f"{g * mem // gpus}Gi"
        return out

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
            pg = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                  "metadata": {"name": name, "namespace": ns},
                  "spec": {"minMember": len(pods), "queue": queue, "priorityClassName": pc}}
            case.running.append([pg, *pods])
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
            pod_spec["tolerations"] = [{"key": "dedicated", "operator": "Equal", "value": "infer",
                                        "effect": "NoSchedule"}]
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
    job = rng.choice(hard or jobs)
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
        room = {n: free[n] for n in group if usable(n)}
        chosen: list[str] = []
        for _ in range(running):
            spots = sorted(n for n, g in room.items() if g >= per)
            if not spots:
                break
            n = rng.choice(spots)
            room[n] -= per
            chosen.append(n)
        if len(chosen) == running:
            for n in chosen:
                free[n] -= per
            name = job["metadata"]["name"]
            case.partial[name] = [(f"{name}-{task['name']}-{k}", n) for k, n in enumerate(chosen)]
            return


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
    cap = case.nodes[0]["status"]["capacity"]
    gpus, cpu, mem = int(cap[GPU]), int(cap["cpu"]), int(cap["memory"].removesuffix("Gi"))
    parents = {q["spec"].get("parent") for q in case.queues}
    leaves = [q["metadata"]["name"] for q in case.queues if q["metadata"]["name"] not in parents]
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
        if mode == "hard":
            pp["networkTopology"] = {"mode": "hard", "highestTierAllowed": rng.choice((1, 1, 2))}
        elif mode == "soft":
            pp["networkTopology"] = {"mode": "soft"}
        pod_spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [{
            "name": "main", "image": "trainer:1",
            "resources": {"requests": _res(per, per * cpu // gpus, per * mem // gpus), "limits": {GPU: str(per)}}}]}
        if tainted and rng.random() < 0.5:
            pod_spec["tolerations"] = [{"key": "dedicated", "operator": "Equal", "value": "infer",
                                        "effect": "NoSchedule"}]
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


def renamed(case: Case, ns: str) -> Case:
    """The same case under another namespace and prefix (every name in it is derived from the namespace)."""
    d = {"nodes": case.nodes, "hypernodes": case.hypernodes, "queues": case.queues, "running": case.running,
         "pending": case.pending, "members": {k: [t, sorted(m)] for k, (t, m) in case.members.items()},
         "partial": case.partial}
    d = json.loads(json.dumps(d).replace(case.ns, ns))
    return Case(case.seed, case.index, ns, d["nodes"], d["hypernodes"], d["queues"], d["running"], d["pending"],
                {k: (t, frozenset(m)) for k, (t, m) in d["members"].items()}, case.kinds,
                {k: [(p, n) for p, n in v] for k, v in d["partial"].items()})


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


def settle_volcano(c: Cluster, case: Case, *, sessions: int = 4, limit: float = WAIT) -> float:
    """Wait until vc-scheduler (just started) is done with the case: its pods and PodGroups unchanged over
    ``sessions`` whole scheduling sessions, nothing in flight (``_in_flight``); counted in sessions, not
    seconds, so that a loaded machine's slower sessions wait as long as they need. At most ``limit``
    seconds (then what is there is read back); the seconds it took."""
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
    return time.monotonic() - t1


def run_case(c: Cluster, case: Case, workdir: Path, *, settle: int = 4, limit: float = WAIT,
             solvers: Iterable[str] = ("greedy", "auto"), restart: bool = True) -> Observed:
    """The case on the cluster (module docstring); the cluster is left without it, vc-scheduler running
    again when ``restart`` (else stopped, as the next case wants it). ``settle``: scheduling sessions without
    a change that end Volcano's turn (``settle_volcano``)."""
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
        if case.partial:  # the running members of a partly running gang, bound as a scheduler would
            c.kubectl("create", "-f", "-", input="\n---\n".join(json.dumps(
                {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod, "namespace": ns},
                 "target": {"apiVersion": "v1", "kind": "Node", "name": node}})
                for pods in case.partial.values() for pod, node in pods))
            bound = {pod for pods in case.partial.values() for pod, _n in pods}
            c.wait_for("the partly running gangs' pods Running", lambda: bound <= {
                p["metadata"]["name"] for p in c.kubectl_json("get", "pods", "-n", ns)["items"]
                if p["status"].get("phase") == "Running"})
            c.wait_for("the partly running VCJobs Running", lambda: all(
                j.get("status", {}).get("state", {}).get("phase") == "Running"
                for j in c.kubectl_json("get", "jobs.batch.volcano.sh", "-n", ns)["items"]
                if j["metadata"]["name"] in case.partial))
        obs.seconds["create"] = time.monotonic() - t0
        snap = workdir / f"{ns}.yaml"
        res = subprocess.run([sys.executable, "-c", CODE, "snapshot", "--kubeconfig", str(c.kubeconfig),
                              "-o", str(snap)], capture_output=True, text=True, cwd=ROOT, timeout=120)
        if res.returncode != 0:
            obs.snapshot_error = res.stderr.strip()
        obs.seconds["snapshot"] = time.monotonic() - t0 - obs.seconds["create"]
        procs = {} if obs.snapshot_error else {s: place(snap, s) for s in solvers}
        c.start_scheduler()
        obs.seconds["volcano"] = settle_volcano(c, case, sessions=settle, limit=limit)
        obs.plans = {s: result(proc) for s, proc in procs.items()}
        _read_back(c, case, obs)
        save(obs, workdir / f"{ns}.volcano.json")
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
         "partial": case.partial}
    path.write_text(json.dumps(d), encoding="utf-8")


def load_case(path: Path) -> Case:
    d = json.loads(path.read_text(encoding="utf-8"))
    return Case(d["seed"], d["index"], d["ns"], d["nodes"], d["hypernodes"], d["queues"], d["running"], d["pending"],
                {k: (t, frozenset(m)) for k, (t, m) in d["members"].items()}, tuple(d["kinds"]),
                {k: [(p, n) for p, n in v] for k, v in d.get("partial", {}).items()})


def save(obs: Observed, path: Path) -> None:
    """What Volcano did (and the snapshot's error), so that optplan can be re-planned offline (``load``)."""
    path.write_text(json.dumps({"snapshot_error": obs.snapshot_error, "bound": obs.bound, "evicted": obs.evicted,
                                "phases": obs.phases, "seconds": obs.seconds}, indent=1), encoding="utf-8")


def load(path: Path) -> Observed:
    d = json.loads(path.read_text(encoding="utf-8"))
    return Observed(d["snapshot_error"], {}, d["bound"], {k: (v[0], v[1]) for k, v in d["evicted"].items()},
                    d["phases"], d["seconds"])


def _read_back(c: Cluster, case: Case, obs: Observed) -> None:
    ns = case.ns
    jobs = {j["metadata"]["name"] for j in case.pending}
    for p in c.kubectl_json("get", "pods", "-n", ns)["items"]:
        job = p["metadata"].get("labels", {}).get("volcano.sh/job-name")
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


def lowest_hypernode(case: Case, nodes: Iterable[str]) -> str | None:
    """The lowest-tier HyperNode holding every node (ties by name); None when none does."""
    want = set(nodes)
    fits = [(tier, name) for name, (tier, members) in case.members.items() if want <= members]
    return min(fits)[1] if fits and want else None


def compare(case: Case, obs: Observed, solver: str) -> Verdict:
    v = Verdict(solver)
    plan = obs.plans.get(solver)
    if obs.snapshot_error or plan is None or "error" in plan:
        v.error = obs.snapshot_error or (plan or {}).get("error", "no plan")
        return v
    jobs = {j["metadata"]["name"]: j for j in case.pending}
    vol_pods: dict[str, dict[str, str]] = {j: {} for j in jobs}
    for pod, node in obs.bound.items():
        job = next((j for j in jobs if pod.startswith(j + "-")), None)
        if job:
            vol_pods[job][pod] = node
    vol_admitted = {j for j, spec in jobs.items() if len(vol_pods[j]) >= spec["spec"]["minAvailable"]}
    opt_pods: dict[str, dict[str, str]] = {}
    opt_admitted = set()
    opt_victims: dict[str, tuple[str, str]] = {}
    for jp in plan["jobs"]:
        if jp["namespace"] != case.ns:
            continue
        opt_pods[jp["name"]] = {f"{jp['name']}-{b['task']}-{b['index']}": b["node"] for b in jp["bindings"]}
        if jp["admitted"]:
            opt_admitted.add(jp["name"])
        for vic in jp["victims"]:
            opt_victims[vic["name"]] = (vic["node"], vic["reason"])
    for j, pre in sorted(case.partial.items()):  # a partly running gang: its running pods on both sides
        if j not in jobs:
            continue
        opt_pods.setdefault(j, {}).update(dict(pre))
        if len(opt_pods[j]) >= jobs[j]["spec"]["minAvailable"]:  # ready with its running pods (optplan's
            opt_admitted.add(j)  # "admitted" speaks of the pending pods it places)
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
        for pod in set(o) & set(w):
            total += 1
            same += o[pod] == w[pod]
        if "networkTopology" in jobs[j]["spec"]:
            ho, hw = lowest_hypernode(case, o.values()), lowest_hypernode(case, w.values())
            v.topology.append(ho == hw)
            if ho != hw:
                v.details.setdefault("topology", {})[j] = {"optplan": ho, "volcano": hw}
        for task in jobs[j]["spec"]["tasks"]:
            pp = task.get("partitionPolicy")
            if pp is None:
                continue
            size = pp["partitionSize"]
            for part in range(pp["totalPartitions"]):
                names = [f"{j}-{task['name']}-{k}" for k in range(part * size, (part + 1) * size)]
                if not all(n in o for n in names) or not all(n in w for n in names):
                    continue
                ho, hw = lowest_hypernode(case, [o[n] for n in names]), lowest_hypernode(case, [w[n] for n in names])
                v.partitions.append(ho == hw)
                if ho != hw:
                    v.details.setdefault("partitions", {})[f"{j}/{task['name']}/{part}"] = {"optplan": ho,
                                                                                           "volcano": hw}
    v.nodes = (same, total)
    if not v.allocate:
        v.details["admitted"] = {"optplan": sorted(opt_admitted), "volcano": sorted(vol_admitted)}
    return v
