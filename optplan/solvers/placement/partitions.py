"""A VCJob task's ``partitionPolicy`` (Volcano's SubGroupPolicy as the job controller writes it): the rules
every planner and the validator share.

A partitioned task's replicas come in partitions of ``partitionSize`` (replica ``i`` in partition
``i // partitionSize``). Volcano's allocate places a partition as one sub-job: its pending pods all, or
none (the sub-job's statement is kept only when it is ready, ``subGroupSize`` pods); when the partition has a
``networkTopology``, all its pods — the running ones too — inside one HyperNode of tier ≤ its
``highestTierAllowed`` (hard), inside the job's own HyperNode; soft, or without one, anywhere in the job's
region. The gang is ready only with ``minPartitions`` whole partitions (the gang plugin's
CheckSubJobReady), besides minAvailable and the tasks' minimums (a partitioned task's minimum defaults to
``minPartitions × partitionSize``). ``partition_regions`` lists where one partition may lie (the rule the exact
model and the validator hold), ``partition_gradient`` where the greedy's allocate searches it, lowest tier first
(Volcano's HyperNode gradient for a sub-job, its soft topology rewritten to hard), ``partition_shortfall``
says why the whole partitions do not make the gang ready, ``partition_violations`` checks a plan's bindings
against these rules.

The partitions are tried in allocate's sub-job order (``jobs.subjob_order``: the required ones first, then
SubJobOrderFn's). Where this departs from Volcano: the running pods of a partition count for it but are
never moved; a job with a partitioned task takes no victims by the gang-aware actions (gangpreempt,
gangreclaim: not modelled for partitions). Its reclaim, and its preempt when neither it nor its partitions
have a networkTopology (Volcano's preempt skips those, ``victims.action_refused``), walk the pods one by one
over every node, as Volcano's have no sub-job step, and the next cycle's allocate places the partitions
(``evict.plan_victims``). The exact model gives such a job the (job, victim) pairs any job has
(``model.victim_data``), on the nodes its partitions may land on, and replays its victims and partitions in one
turn: a subset of what the validator accepts for the walk (``evicts_anywhere``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from optplan.models.queues import JobTask, VCJob
from optplan.models.snapshot import Snapshot
from optplan.solvers.placement.jobs import Region

NO_VICTIMS = ("a job with a partitionPolicy takes no victims by gangpreempt or gangreclaim (optplan does not "
              "model the gang-aware actions for partitions)")


def partitioned(job: VCJob) -> bool:
    return any(t.partition_policy is not None for t in job.tasks)


def evicts_anywhere(job: VCJob, reason: str) -> bool:
    """Volcano's ``reason`` action (preempt, reclaim) for this job walks every node, pod by pod, with no
    HyperNode or sub-job step, and the job waits for a later cycle's allocate to place it under its limits:
    reclaim for a job with a network topology (vc-scheduler v1.15.1's ``reclaimForTask``), reclaim and preempt
    for a job with partitions (preempt only takes one without any topology, ``victims.action_refused``). The
    greedy's walk, its pipelining and the validator's acceptance of such victims all ask this."""
    if reason == "reclaim":
        return job.network_topology is not None or partitioned(job)
    return reason == "preempt" and partitioned(job)


def partition_pending(task: JobTask, part: int, held: frozenset[int]) -> list[int]:
    """The partition's replica indices still to place."""
    assert task.partition_policy is not None
    return [i for i in task.partition_policy.members(part) if i not in held]


def partition_possible(task: JobTask, part: int) -> bool:
    """Every replica of the partition exists (a task cut to what the cluster could ever hold,
    ``jobs.clip_to_cluster``, may have lost some: such a partition is never whole)."""
    assert task.partition_policy is not None
    return task.partition_policy.members(part).stop <= task.replicas


def partition_limit(task: JobTask) -> int | None:
    """The tier a partition of the task must stay within, or None (no hard topology of its own)."""
    pp = task.partition_policy
    if pp is None or pp.network_topology is None or pp.network_topology.mode != "hard":
        return None
    nt = pp.network_topology
    return nt.highest_tier_allowed


def bounded(task: JobTask) -> bool:
    """A partition of the task must fit one HyperNode (hard networkTopology, with or without a tier limit)."""
    pp = task.partition_policy
    return pp is not None and pp.network_topology is not None and pp.network_topology.mode == "hard"


def partition_regions(snap: Snapshot, task: JobTask, region: Region, running: Iterable[str] = ()) -> list[Region]:
    """Where one partition of the task may go inside the job's ``region``: the HyperNodes inside it of tier ≤
    the partition's limit that hold the nodes its running pods are on, lowest tier first, then by name (hard);
    the region itself (soft, or no topology of its own: only the job's region bounds it; soft lists the
    HyperNodes first, Volcano's preference for a lower tier)."""
    pp = task.partition_policy
    if pp is None or pp.network_topology is None:
        return [region]
    topo = snap.topology
    nt = pp.network_topology
    limit = nt.highest_tier_allowed if nt.mode == "hard" else None
    held = frozenset(running)
    out = [Region(h, topo.hyper_nodes[h].tier, topo.members[h]) for h in topo.regions(limit)
           if h in topo.hyper_nodes and topo.members[h] <= region.nodes and held <= topo.members[h]
           and topo.members[h]]
    if nt.mode == "soft":
        out = [r for r in out if r.nodes != region.nodes] + [region]
    return out


def partition_search_limit(job: VCJob, task: JobTask, snap: Snapshot) -> int | None:
    """The tier limit of a partition's HyperNode search (Volcano's session rewrites a sub-job's soft topology to
    hard): hard, its own ``highestTierAllowed`` (None: any tier, as ``partition_regions``); soft, the job's
    (a hard job's ``highestTierAllowed``, else the virtual root's tier: the whole cluster)."""
    pp = task.partition_policy
    assert pp is not None and pp.network_topology is not None
    if pp.network_topology.mode == "hard":
        return pp.network_topology.highest_tier_allowed
    nt = job.network_topology
    if nt is not None and nt.mode == "hard" and nt.highest_tier_allowed is not None:
        return nt.highest_tier_allowed
    return snap.topology.top_tier


def partition_gradient(snap: Snapshot, job: VCJob, task: JobTask, region: Region,
                       allocated: Iterable[str] = ()) -> list[Region]:
    """Where allocate searches one partition inside the job's HyperNode ``region``, lowest tier first, then by
    name (Volcano's HyperNode gradient for a sub-job, ``hyperNodeGradientFn`` from ``getSearchRoot``): without
    a topology of its own, the region alone; else every HyperNode of tier ≤ ``partition_search_limit`` inside
    the search root, the root too, and the whole cluster when the root is the whole cluster and the limit
    reaches the virtual root's tier. The root: the region while none of the partition's pods is allocated;
    else (``allocated``: the nodes its running pods are on) the highest HyperNode within the limit holding
    them, cut to the region (the region when it lies below that HyperNode; nothing when the two do not
    nest), so the partition's new pods may go beside its running ones, not only into the HyperNode that
    holds them. The allocate pre-filter is the greedy's (``Greedy.place_partition``)."""
    pp = task.partition_policy
    if pp is None or pp.network_topology is None:
        return [region]
    topo = snap.topology
    limit = partition_search_limit(job, task, snap)
    everything = frozenset(snap.nodes)
    held = frozenset(allocated)
    root = region.nodes
    if held:
        if limit is not None and limit >= topo.top_tier:
            widest = everything
        else:
            above = topo.enclosing(held, limit)
            if not above:
                return []
            widest = topo.members[max(above, key=lambda h: (topo.hyper_nodes[h].tier, h))]
        if widest <= root:
            root = widest
        elif not root <= widest:
            return []
    out = [Region(h, topo.hyper_nodes[h].tier, topo.members[h]) for h in topo.regions(limit)
           if h in topo.hyper_nodes and topo.members[h] and topo.members[h] <= root]
    if root == everything and limit is not None and limit >= topo.top_tier:
        out.append(Region(None, topo.top_tier, everything))
    return out


def whole_partitions(task: JobTask, placed: Iterable[int], held: frozenset[int]) -> int:
    """How many of the task's partitions have every replica placed or running."""
    pp = task.partition_policy
    if pp is None:
        return 0
    have = set(placed) | held
    return sum(all(i in have for i in pp.members(p)) for p in range(pp.total_partitions))


def partition_shortfall(job: VCJob, placed: Mapping[str, Iterable[int]],
                        held: Mapping[str, frozenset[int]] | None = None) -> str | None:
    """Why the whole partitions (placed replica indices per task, with the running ones ``held``) do not make
    the gang ready (fewer than ``minPartitions`` of a task), or None."""
    held = held or {}
    for t in job.tasks:
        pp = t.partition_policy
        if pp is None or pp.min_partitions == 0:
            continue
        n = whole_partitions(t, placed.get(t.name, ()), held.get(t.name, frozenset()))
        if n < pp.min_partitions:
            return f"task {t.name}: {n} of its minPartitions {pp.min_partitions} partitions placed whole"
    return None


def partition_violations(snap: Snapshot, job: VCJob, placed: Mapping[str, Mapping[int, str]],
                         held_nodes: Mapping[str, Mapping[int, str]], region_nodes: frozenset[str]) -> list[str]:
    """A plan's bindings of one admitted job against the partition rules: each partition's pending pods all
    placed or none; a hard partition inside one HyperNode of tier ≤ its limit (running pods counted) within
    the job's region (``region_nodes``); ``minPartitions`` whole partitions. ``placed``/``held_nodes``: task
    -> replica index -> node."""
    out: list[str] = []
    topo = snap.topology
    for t in job.tasks:
        pp = t.partition_policy
        if pp is None:
            continue
        here, running = placed.get(t.name, {}), held_nodes.get(t.name, {})
        for p in range(pp.total_partitions):
            members = pp.members(p)
            got = [i for i in members if i in here]
            if not got:
                continue
            missing = [i for i in members if i not in here and i not in running]
            if missing:
                out.append(f"job {job.key} task {t.name} partition {p}: {len(got)} of its pods placed, "
                           f"{len(missing)} not (a partition is placed whole)")
                continue
            if bounded(t):
                nodes = {here[i] for i in got} | {running[i] for i in members if i in running}
                limit = partition_limit(t)
                inside = [h for h in topo.enclosing(nodes, limit) if topo.members[h] <= region_nodes]
                if not inside:
                    bound = f" of tier <= {limit}" if limit is not None else ""
                    out.append(f"job {job.key} task {t.name} partition {p}: no HyperNode{bound} inside its region "
                               f"holds its nodes {', '.join(sorted(nodes))}")
    why = partition_shortfall(job, {t: set(ix) for t, ix in placed.items()},
                              {t: frozenset(ix) for t, ix in held_nodes.items()})
    if why is not None:
        out.append(f"job {job.key}: {why}")
    return out
