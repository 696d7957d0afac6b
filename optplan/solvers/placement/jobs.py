"""The facts of the jobs to place, as Volcano's JobInfo sees them, read alike by the planners and the
validator: priorities (``job_priority``, ``task_priority``), the pods the job controller would create
(``job_pods``), the replicas that already run (``held_pods``) and which jobs have pods to place
(``jobs_to_place``), the gang's minimums (``task_minima``, ``needed``, ``gang_shortfall``; ``starving``: the
count preempt and reclaim stop at), the order a dry run tries the pods (``gang_steps``), the candidate regions
(``job_regions``) and the cut to the cluster's total capacity (``clip_to_cluster``). The rules themselves: the
package docstring."""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from optplan.models.queues import (
    POD_EVICTED,
    JobNetworkTopology,
    JobTask,
    PartitionPolicy,
    PodTemplate,
    TaskMember,
    VCJob,
)
from optplan.models.snapshot import GROUP_NAME_ANNOTATION, TERMINAL_PHASES, NetworkTopology, Pod, PodGroup, Snapshot
from optplan.solvers.core.oracle import POD_SLOT
from optplan.solvers.placement.victims import Candidate, Catalogue, pod_index

log = logging.getLogger(__name__)


def class_priority(name: str | None, snap: Snapshot) -> int:
    """The value of the named PriorityClass; the globalDefault class's when none is named; else 0.
    An unknown class counts as 0 (Kubernetes would refuse the pods)."""
    if name is not None:
        pc = snap.priority_classes.get(name)
        return pc.value if pc is not None else 0
    defaults = sorted((pc for pc in snap.priority_classes.values() if pc.global_default), key=lambda p: p.name)
    return defaults[0].value if defaults else 0


def job_priority(job: VCJob, snap: Snapshot) -> int:
    """The value of the job's PriorityClass (Volcano's JobInfo.Priority, from the PodGroup's
    priorityClassName, which the job controller copies from the job's)."""
    return class_priority(job.priority_class_name, snap)


def task_priority(job: VCJob, task: JobTask, snap: Snapshot) -> int:
    """A pod's priority (Volcano's TaskInfo.Priority: the pod's spec.priority, which admission sets from
    its PriorityClass): the task template's class, else the job's."""
    return class_priority(job.task_priority_class(task), snap)


JOB_NAME_LABEL = "volcano.sh/job-name"
"""The label Volcano's job controller puts on a job's pods."""


def _of_job(pod: Pod, job: VCJob, snap: Snapshot) -> bool:
    """The pod named like a replica of the job is the job's: its job-name label (when written) names the
    job, and its PodGroup (when in the snapshot and owned by a VCJob) is the job's."""
    label = pod.labels.get(JOB_NAME_LABEL)
    if label is not None and label != job.name:
        return False
    pg = snap.pod_groups.get(pod.group_key) if pod.group_key is not None else None
    owner = pg.owner if pg is not None else None
    return owner is None or owner.kind != "Job" or owner.name == job.name


def held_pods(job: VCJob, snap: Snapshot) -> dict[str, dict[int, Pod]]:
    """Task -> replica index -> the snapshot's pod ``<job>-<task>-<index>`` of the job that already counts
    for its gang (Volcano's ReadyTaskNum): bound to a node and not terminal, or Succeeded. Such a replica
    is not placed again; every other replica (absent, Pending without a node, Failed) is pending."""
    out: dict[str, dict[int, Pod]] = {}
    if job.kind == "PodGroup":
        for jt in job.tasks:
            for i, m in enumerate(jt.members[:jt.replicas]):
                p = snap.pods.get(f"{job.namespace}/{m.name}")
                if p is not None and p.group_key == job.key and (p.occupying or p.phase == "Succeeded"):
                    out.setdefault(jt.name, {})[i] = p
        return out
    prefix = f"{job.namespace}/{job.name}-"
    tasks = {t.name: t for t in job.tasks}
    for key, p in snap.pods.items():
        if not key.startswith(prefix) or not (p.occupying or p.phase == "Succeeded"):
            continue
        task, _sep, index = key[len(prefix):].rpartition("-")
        t = tasks.get(task)
        if t is None or not index.isdigit() or int(index) >= t.replicas or not _of_job(p, job, snap):
            continue
        out.setdefault(task, {})[int(index)] = p
    return out


WAITING_PHASES = frozenset({"", "Pending", "Inqueue"})
"""VCJob phases of a job none of whose gang runs yet."""
ACTIVE_PHASES = frozenset({"Running", "Restarting"})
"""VCJob phases of a job whose gang (some of it) runs: placed when some replica is not running."""


def jobs_to_place(snap: Snapshot) -> list[VCJob]:
    """The jobs that have pods to place, by key: every waiting VCJob, and every running VCJob with a replica
    that does not run (a scale-up, a failed pod's replacement), which joins its gang; and every bare PodGroup
    with a pending pod (``pod_group_jobs``)."""
    out = []
    for key in sorted(snap.jobs):
        job = snap.jobs[key]
        if job.phase in WAITING_PHASES:
            out.append(job)
        elif job.phase in ACTIVE_PHASES:
            held = held_pods(job, snap)
            if any(len(held.get(t.name, {})) < t.replicas for t in job.tasks):
                out.append(job)
    out += pod_group_jobs(snap)
    return sorted(out, key=lambda j: j.key)


TASK_SPEC_KEY = "volcano.sh/task-spec"
"""The pod annotation (else label) naming its task in Volcano's JobInfo (``TaskRole``)."""
VOLCANO_SCHEDULER = "volcano"
"""The schedulerName of the pods vc-scheduler places."""
VCJOB_API_GROUP = "batch.volcano.sh"


def task_role(pod: Pod) -> str:
    """The pod's task in Volcano's JobInfo: its ``volcano.sh/task-spec`` annotation, else label, else ""."""
    return pod.annotations.get(TASK_SPEC_KEY) or pod.labels.get(TASK_SPEC_KEY) or ""


def owning_vcjob(pg: PodGroup, snap: Snapshot) -> VCJob | None:
    """The snapshot's VCJob that the PodGroup's controller ownerReference names (its pods are that job's)."""
    ref = pg.owner
    if ref is None or ref.kind != "Job" or ref.api_version.split("/")[0] != VCJOB_API_GROUP:
        return None
    return snap.jobs.get(f"{pg.namespace}/{ref.name}")


def pod_group_jobs(snap: Snapshot) -> list[VCJob]:
    """Every bare PodGroup (no VCJob of the snapshot owns it or has its key) with a pending pod, as the job
    vc-scheduler builds from it (``pod_group_job``), by key."""
    by_group: dict[str, list[Pod]] = defaultdict(list)
    for key in sorted(snap.pods):
        p = snap.pods[key]
        if p.group_key is not None and p.group_key in snap.pod_groups:
            by_group[p.group_key].append(p)
    out = []
    for key in sorted(by_group):
        pg = snap.pod_groups[key]
        if key in snap.jobs or owning_vcjob(pg, snap) is not None or not any(map(_pending, by_group[key])):
            continue
        job = pod_group_job(pg, snap, by_group[key])
        if job is not None and has_pending_replicas(job, snap):
            out.append(job)
    return out


def _pending(p: Pod) -> bool:
    """A pod vc-scheduler would place: no node, not terminal, not deleting, schedulerName volcano."""
    return p.node_name is None and p.phase not in TERMINAL_PHASES and not p.deleting \
        and p.scheduler_name == VOLCANO_SCHEDULER


def _template(pod: Pod) -> PodTemplate:
    return PodTemplate(labels=dict(pod.labels), requests=dict(pod.requests), node_selector=dict(pod.node_selector),
                       tolerations=pod.tolerations, required_node_affinity=pod.required_node_affinity,
                       priority_class_name=pod.priority_class_name, scheduler_name=pod.scheduler_name,
                       gpu_share=pod.gpu_share)


def _topology(nt: NetworkTopology | None) -> JobNetworkTopology | None:
    if nt is None:
        return None
    return JobNetworkTopology(mode=nt.mode, highest_tier_allowed=nt.highest_tier_allowed,
                              highest_tier_name=nt.highest_tier_name)


def pod_group_job(pg: PodGroup, snap: Snapshot, pods_of: Sequence[Pod] | None = None) -> VCJob | None:
    """The job vc-scheduler builds from a PodGroup and its pods (``JobInfo``), in a VCJob's shape (kind PodGroup):
    minAvailable its minMember, queue, priorityClassName and networkTopology its own; its pods — those naming it
    (``scheduling.k8s.io/group-name``), bound and not terminal or Succeeded, or pending (no node, not deleting)
    with schedulerName volcano; Failed pods neither count nor are placed — in tasks by ``task_role``, each task's
    minimum its ``minTaskMember`` (0 when not listed; a listed task without pods keeps its minimum and no pod).
    A task whose pods all fall in one ``subGroupPolicy`` entry, in subgroups of exactly ``subGroupSize`` pods, is
    partitioned (``partitions``: a subgroup is a partition, ``minSubGroups`` the minPartitions, the entry's
    networkTopology the partition's); pods by (subgroup, creationTimestamp, name) — Volcano's task order breaks
    equal priorities by creation time, then UID. ``pods_of``: the pods naming it, when already gathered. None
    (logged) for a subGroupPolicy this cannot say: an entry over
    pods of two tasks, a task split over entries or partly outside one, a subgroup not of subGroupSize pods."""
    pods: dict[str, list[Pod]] = defaultdict(list)
    if pods_of is None:
        pods_of = [snap.pods[k] for k in sorted(snap.pods) if snap.pods[k].group_key == pg.key]
    for p in pods_of:
        if p.occupying or p.phase == "Succeeded" or _pending(p):
            pods[task_role(p)].append(p)
    why = _subgroups_unsaid(pg, pods)
    if why is not None:
        log.warning("PodGroup %s: %s: its pending pods are not placed", pg.key, why)
        return None
    tasks = []
    for role in sorted(set(pods) | set(pg.min_task_member)):
        members = pods.get(role, [])
        groups = [pg.subgroup_of(p.labels) for p in members]
        pp = None
        if members and groups[0] is not None:
            policy = groups[0][0]
            values = sorted({g[1] for g in groups if g is not None})
            rank = {id(p): values.index(g[1]) for p, g in zip(members, groups, strict=True) if g is not None}
            members = sorted(members, key=lambda p: (rank[id(p)], p.creation_timestamp, p.name))
            pp = PartitionPolicy(total_partitions=len(values), partition_size=policy.sub_group_size,
                                 min_partitions=policy.min_sub_groups,
                                 network_topology=_topology(policy.network_topology))
        else:
            members = sorted(members, key=lambda p: (p.creation_timestamp, p.name))
        template = _template(members[0]) if members else PodTemplate()
        tasks.append(JobTask(name=role, replicas=len(members), min_available=pg.min_task_member.get(role, 0),
                             partition_policy=pp, template=template,
                             members=tuple(TaskMember(name=p.name, template=_template(p)) for p in members)))
    held = any(p.occupying or p.phase == "Succeeded" for ps in pods.values() for p in ps)
    return VCJob(namespace=pg.namespace, name=pg.name, labels=dict(pg.labels),
                 creation_timestamp=pg.creation_timestamp, queue=pg.queue, min_available=pg.min_member,
                 priority_class_name=pg.priority_class_name, network_topology=_topology(pg.network_topology),
                 tasks=tuple(tasks), phase="Running" if held else "Pending", kind="PodGroup")


def _entry(pg: PodGroup, labels: dict[str, str]) -> int:
    """The index of the subGroupPolicy entry a pod with these labels is in (the first holding it), or -1."""
    return next((i for i, pol in enumerate(pg.sub_group_policy) if pol.subgroup(labels) is not None), -1)


def _subgroups_unsaid(pg: PodGroup, pods: dict[str, list[Pod]]) -> str | None:
    """Why the PodGroup's subgroups are not partitions of its tasks (``pod_group_job``), or None."""
    if not pg.sub_group_policy:
        return None
    entry_roles: dict[int, set[str]] = defaultdict(set)
    for role, members in sorted(pods.items()):
        entries = {_entry(pg, p.labels) for p in members}
        if len(entries) > 1:
            return f"task {role!r} lies over several subGroupPolicy entries, or partly outside them"
        (entry,) = entries
        if entry < 0:
            continue
        entry_roles[entry].add(role)
        size = pg.sub_group_policy[entry].sub_group_size
        counts = Counter(pg.sub_group_policy[entry].subgroup(p.labels) for p in members)
        for values, n in sorted(counts.items(), key=lambda vn: vn[0] or ()):
            if n != size:
                return f"subgroup {'/'.join(values or ())} has {n} pods, its subGroupSize {size}"
    for entry, roles in sorted(entry_roles.items()):
        if len(roles) > 1:
            return (f"subGroupPolicy {pg.sub_group_policy[entry].name!r} holds pods of the tasks "
                    f"{', '.join(map(repr, sorted(roles)))}")
    return None


def held_indices(job: VCJob, snap: Snapshot) -> dict[str, frozenset[int]]:
    return {t: frozenset(pods) for t, pods in held_pods(job, snap).items()}


def held_counts(held: dict[str, frozenset[int]]) -> Counter[str]:
    return Counter({t: len(ix) for t, ix in held.items()})


def needed(job: VCJob, held: Counter[str]) -> tuple[dict[str, int], int]:
    """What the pending pods must add for the gang to be ready: per task (its minimum less its running
    pods, when the tasks' minimums count) and in all (minAvailable less the running pods, at least the
    per-task sum). (0: the running pods already make it ready.)"""
    minima = {t: max(m - held[t], 0) for t, m in task_minima(job).items()}
    return minima, max(job.min_available - sum(held.values()), sum(minima.values()))


def has_pending_replicas(job: VCJob, snap: Snapshot) -> bool:
    """Some replica of the job is not running yet (a running job scaled up, or a failed pod's replacement)."""
    return sum(len(ix) for ix in held_indices(job, snap).values()) < job.replicas


def job_pods(job: VCJob) -> dict[str, list[Pod]]:
    """Task name -> the pods Volcano would create for it, by replica index (a PodGroup-backed job's: its
    pods as they are, ``members``)."""
    out: dict[str, list[Pod]] = {}
    for t in job.tasks:
        named = [(m.name, m.template) for m in t.members[:t.replicas]] if job.kind == "PodGroup" else \
            [(f"{job.name}-{t.name}-{i}", t.template) for i in range(t.replicas)]
        out[t.name] = [
            Pod(namespace=job.namespace, name=name, labels=dict(tpl.labels),
                annotations={GROUP_NAME_ANNOTATION: job.name}, node_name=None,
                scheduler_name=tpl.scheduler_name or VOLCANO_SCHEDULER, node_selector=dict(tpl.node_selector),
                tolerations=tpl.tolerations, required_node_affinity=tpl.required_node_affinity,
                requests={r: v for r, v in tpl.requests.items() if v > 0}, phase="Pending", gpu_share=tpl.gpu_share)
            for name, tpl in named]
    return out


def bound_pod(job: VCJob, task: str, index: int) -> str | None:
    """A binding's ``pod``: a bare PodGroup's pod name, None for a VCJob's replica (named by task and index)."""
    return pod_name(job, task, index) if job.kind == "PodGroup" else None


def replica_label(job: VCJob, task: str, index: int) -> str:
    """How a reason names one replica: ``task T replica I`` (a VCJob's), ``pod NAME`` (a bare PodGroup's)."""
    return f"pod {pod_name(job, task, index)}" if job.kind == "PodGroup" else f"task {task} replica {index}"


def pod_name(job: VCJob, task: str, index: int) -> str:
    """The name of the job's replica: a PodGroup-backed job's pod as it is, a VCJob's ``<job>-<task>-<index>``."""
    if job.kind == "PodGroup":
        return next(t for t in job.tasks if t.name == task).members[index].name
    return f"{job.name}-{task}-{index}"


DEFAULT_MAX_PODS = 110
"""kubelet's default maxPods: the pod slots ``clip_to_cluster`` counts for a node whose allocatable names
no ``pods``."""


def clip_to_cluster(jobs: Sequence[VCJob], snap: Snapshot) -> tuple[list[VCJob], dict[str, str]]:
    """The jobs with each task's replicas cut to what the cluster's total capacity could ever hold (its
    nodes' allocatable summed, every pod evicted; pod slots too), so that a job asking for two billion
    replicas builds no more pods than could be placed. A job whose minimum exceeds that is unfit: its
    tasks keep no replicas and the reason is returned with its key. A job within capacity is unchanged."""
    totals: dict[str, int] = defaultdict(int)
    slots = 0
    for node in snap.nodes.values():
        for r, v in node.allocatable.items():
            totals[r] += v
        slots += node.allocatable["pods"] // POD_SLOT if "pods" in node.allocatable else DEFAULT_MAX_PODS
    out: list[VCJob] = []
    unfit: dict[str, str] = {}
    for job in jobs:
        bound = {t.name: min([slots, *(totals[r] // v for r, v in t.template.requests.items() if v > 0)])
                 for t in job.tasks}
        if all(t.replicas <= bound[t.name] for t in job.tasks):
            out.append(job)
            continue
        can = {t.name: min(t.replicas, bound[t.name]) for t in job.tasks}
        short = [f"task {t}: minimum {need}" for t, need in task_minima(job).items() if need > can[t]]
        if job.min_available > sum(can.values()):
            short.insert(0, f"minAvailable {job.min_available}")
        if short:
            unfit[job.key] = (f"cannot fit the cluster: {short[0]}, but at most {sum(can.values())} of its "
                              f"{job.replicas} pods fit the nodes' total capacity")
            can = dict.fromkeys(can, 0)
        tasks = tuple(t.model_copy(update={"replicas": can[t.name]}) for t in job.tasks)
        out.append(job.model_copy(update={"tasks": tasks}))
    return out, unfit


def task_minima(job: VCJob) -> dict[str, int]:
    """Per-task minimums Volcano's gang plugin enforces (empty when only the job's minAvailable counts)."""
    minima = {t.name: t.replicas if t.min_available is None else t.min_available for t in job.tasks}
    if job.min_available < sum(minima.values()):
        return {}
    return minima


def gang_shortfall(job: VCJob, placed: Counter[str], held: Counter[str] | None = None) -> str | None:
    """Why the placed counts per task, with the pods already running (``held``), do not make the gang
    ready (Volcano's JobReady: ReadyTaskNum ≥ minAvailable and CheckTaskReady), or None when they do."""
    held = held or Counter()
    total = sum(placed.values())
    running = sum(held.values())
    also = f" (+{running} running)" if running else ""
    if total + running < job.min_available:
        return f"{total}{also} of minAvailable {job.min_available} pods placed"
    for task, need in task_minima(job).items():
        if placed[task] + held[task] < need:
            also = f" (+{held[task]} running)" if held[task] else ""
            return f"task {task}: {placed[task]}{also} of its minimum {need} pods placed"
    return None


def starving(job: VCJob, placed: Counter[str], held: Counter[str] | None = None) -> bool:
    """Volcano's JobStarving (vc-scheduler v1.15.1, the gang plugin's ``IsStarving``; the priority plugin's
    is implied): its pipelined and ready pods — ``placed`` and the running ``held`` — number fewer than
    minAvailable, by count only: no task's minimum enters. Preempt and reclaim take only a starving job and
    stop trying its pods as soon as it is no longer starving; what they pipelined is then committed only when
    the gang is pipelined, the task minima too (JobPipelined: ``CheckTaskPipelined``; ``gang_shortfall``), else
    discarded: a gang whose first pods in task order reach minAvailable without its other tasks' minima gets
    nothing."""
    return sum(placed.values()) + sum((held or Counter()).values()) < job.min_available


def remade(job: VCJob, task: JobTask) -> bool:
    """A VCJob whose running pod of ``task`` another job evicts gets that pod again, pending, from its job
    controller (no lifecycle policy on PodEvicted, or SyncJob: the controller syncs the job and creates the
    missing replica under the same name): the replica is one more to place in a later scheduling cycle
    (``cycles``). A policy that restarts or ends the job on the event is not modelled: its pods stay shielded."""
    return job.kind != "PodGroup" and job.action_on(POD_EVICTED, task.name) in (None, "SyncJob")


def shield(cat: Catalogue, snap: Snapshot, jobs: Sequence[VCJob]) -> Catalogue:
    """The catalogue without the running pods of the PodGroups of the jobs being placed: a plan places a
    running gang's pending pods next to its running ones (they are listed as protected, and kept by node in
    ``shielded``: Volcano's preempt and reclaim hand them to the plugins with a node's other pods,
    ``plugin_view``). Volcano's actions filter no job state: a tier may offer the running pod of a starving
    gang to another job (the gang plugin offers nothing for it, its tier ends, the next decides). Those of a
    bare PodGroup are ``exposed``: other jobs may take them; nothing makes a bare PodGroup's pod again, so the
    PodGroup is then never admitted where it can no longer be ready (``lost_pods``), else it goes on with its other
    pods (``dropped_pods``); so are a VCJob's whose controller makes the pod again (``remade``: vcm-1-110 of the
    comparison with vc-scheduler, where reclaim's second tier took the running pod of a gang at minAvailable with
    more replicas pending; the replica is placed again by a later cycle, or waits); the others are never
    victims."""
    groups = {p.group_key for j in jobs for ps in held_pods(j, snap).values() for p in ps.values()}
    groups.discard(None)
    if not groups & set(cat.groups):
        return cat
    exposed = {p.key for j in jobs for t in j.tasks if j.kind == "PodGroup" or remade(j, t)
               for p in held_pods(j, snap).get(t.name, {}).values()}
    out = Catalogue(snapshot=cat.snapshot, now=cat.now, protected=dict(cat.protected), groups=dict(cat.groups),
                    exposed={k: c for k, c in cat.candidates.items() if k in exposed})
    for k, c in cat.candidates.items():
        if c.group in groups:
            out.protected[k] = "its job's pending pods are being placed next to it"
        else:
            out.candidates[k] = c
    out.by_node = {n: [c for c in cs if c.group not in groups] for n, cs in cat.by_node.items()}
    out.by_node = {n: cs for n, cs in out.by_node.items() if cs}
    out.shielded = {n: [c for c in cs if c.group in groups] for n, cs in cat.by_node.items()}
    out.shielded = {n: cs for n, cs in out.shielded.items() if cs}
    return out


def own_groups(job: VCJob, snap: Snapshot) -> frozenset[str]:
    """The PodGroups of the job's running pods (``held_pods``)."""
    return frozenset(g for ps in held_pods(job, snap).values() for p in ps.values() if (g := p.group_key) is not None)


def remade_pods(job: VCJob, snap: Snapshot, gone: Collection[str]) -> list[str]:
    """A VCJob's running pods among the evicted pods ``gone`` that its controller makes again (``remade``), by
    key: replicas to place again in a later cycle."""
    if job.kind == "PodGroup" or not gone:
        return []
    return sorted(p.key for t in job.tasks if remade(job, t)
                  for p in held_pods(job, snap).get(t.name, {}).values() if p.key in gone)


def lost_pods(job: VCJob, snap: Snapshot, gone: Collection[str]) -> list[str]:
    """A bare PodGroup's running pods among the evicted pods ``gone`` (exposed pods another job took), by key,
    when without them it can never be ready: nothing makes a bare PodGroup's pod again, and the pods it has left
    number fewer than minMember, or a task's fewer than its minimum (``task_minima``: minTaskMember, when the
    gang checks it); none otherwise (``dropped_pods``), and none for a VCJob (its controller makes an exposed pod
    again: ``remade_pods``)."""
    if job.kind != "PodGroup" or not gone:
        return []
    held = held_pods(job, snap)
    out = {t.name: sorted(p.key for p in held.get(t.name, {}).values() if p.key in gone) for t in job.tasks}
    n = sum(len(ks) for ks in out.values())
    if not n:
        return []
    minima = task_minima(job)
    if sum(t.replicas for t in job.tasks) - n < job.min_available or any(
            t.replicas - len(out[t.name]) < minima.get(t.name, 0) for t in job.tasks):
        return sorted(k for ks in out.values() for k in ks)
    return []


def dropped_pods(job: VCJob, snap: Snapshot, gone: Collection[str]) -> list[str]:
    """A bare PodGroup's running pods among the evicted pods ``gone``, by key, when it may still be ready
    without them (``lost_pods`` empty): the job goes on with its other pods (a later cycle places them, the
    evicted ones never)."""
    if job.kind != "PodGroup" or not gone or lost_pods(job, snap, gone):
        return []
    return sorted(p.key for ps in held_pods(job, snap).values() for p in ps.values() if p.key in gone)


def outlived_pods(job: VCJob, snap: Snapshot, gone: Collection[str]) -> list[str]:
    """The job's running pods among the evicted pods ``gone`` after which it goes on, by key: a VCJob's that its
    controller makes again (``remade_pods``), or a bare PodGroup's it may still be ready without
    (``dropped_pods``)."""
    return remade_pods(job, snap, gone) or dropped_pods(job, snap, gone)


def plugin_view(cat: Catalogue, node: str, pods: Sequence[Candidate], own: frozenset[str],
                handed: Callable[[Candidate], bool], gone: Collection[str] = ()) -> list[Candidate]:
    """What Volcano's plugins are given on ``node`` for a preemptor pod (``Candidate.input_key``): ``pods`` (the
    node's candidates the action may take) and the node's shielded pods (``Catalogue.shielded``: running
    pods of other jobs being placed) that the action hands over (``handed``), not of the preemptor's own
    PodGroups (``own``: Volcano's filter leaves out the preemptor's job) and not evicted (``gone``). The
    shielded pods shape the tiers' answer (an intersection that comes out empty lets the next plugin start
    again); the caller takes from the answer only ``pods`` and the exposed ones (``Catalogue.exposed``)."""
    extra = [c for c in cat.shielded.get(node, ()) if c.group not in own and handed(c) and c.key not in gone]
    if not extra:
        return list(pods)
    return sorted([*pods, *extra], key=Candidate.input_key)


@dataclass(frozen=True)
class Region:
    """Where a job's pods may go: a HyperNode, the virtual root (soft jobs) or anywhere (no topology)."""

    hyper_node: str | None
    tier: int | None
    nodes: frozenset[str]

    @property
    def label(self) -> str:
        if self.hyper_node is not None:
            return f"HyperNode {self.hyper_node} (tier {self.tier})"
        return "the whole cluster" if self.tier is None else f"the whole cluster (virtual root, tier {self.tier})"


def job_regions(job: VCJob, snap: Snapshot, running: frozenset[str] = frozenset()) -> list[Region]:
    """Candidate regions, lowest tier first, then by name; the whole cluster last for soft jobs. A job
    whose pods already run on the nodes ``running`` keeps them: only the HyperNodes that contain them
    all are candidates — the lowest-tier one first (the HyperNode that holds its running pods), then its
    ancestors up to highestTierAllowed (hard; Volcano's getSearchRoot: the job's allocated HyperNode's
    highest ancestor within the limit bounds the search), or up to the top and the whole cluster (soft)."""
    topo = snap.topology
    nt = job.network_topology
    if nt is None:
        return [Region(None, None, frozenset(snap.nodes))]
    limit = nt.highest_tier_allowed if nt.mode == "hard" else None
    out = [Region(h, topo.hyper_nodes[h].tier, topo.members[h]) for h in topo.regions(limit)
           if h in topo.hyper_nodes and running <= topo.members[h]]
    if nt.mode == "soft":
        out.append(Region(None, topo.top_tier, frozenset(snap.nodes)))
    return out


def job_needs(job: VCJob) -> frozenset[str]:
    return frozenset(r for r, v in job.total_requests().items() if v > 0)


def gang_steps(job: VCJob, snap: Snapshot | None = None,
               held: dict[str, frozenset[int]] | None = None) -> list[tuple[str, int, bool]]:
    """The pending pods in the order a dry run tries them, each with whether its task needs it for the gang (the
    first of its task's pending pods in that order, as many as its minimum less its running pods ``held``).
    With ``snap``, Volcano's allocate order (v1.15.1: a sub-job's pending pods in one queue by the session's
    TaskOrderFn, ``preemptor_order``: the pod's priority, then the job controller's ``CompareTask``), a
    partitioned job's in its sub-jobs' order (``subjob_order``); without, by task and replica index."""
    held = held or {}
    minima, _need = needed(job, held_counts(held))
    steps = [(t.name, i, False) for t in job.tasks for i in range(t.replicas) if i not in held.get(t.name, frozenset())]
    if snap is not None:
        steps = preemptor_order(job, steps, job_pods(job), snap)
    taken: Counter[str] = Counter()
    order = []
    for t, i, _r in steps:
        order.append((t, i, taken[t] < minima.get(t, 0)))
        taken[t] += 1
    if snap is None or all(t.partition_policy is None for t in job.tasks):
        return order
    return subjob_order(job, order, snap, held)


def subjob_order(job: VCJob, steps: list[tuple[str, int, bool]], snap: Snapshot,
                 held: dict[str, frozenset[int]]) -> list[tuple[str, int, bool]]:
    """A partitioned job's pending pods in the order allocate pops its sub-jobs (``organizeJobWorksheet``):
    the required partitions first — per partitioned task, its first ``minPartitions`` less the partitions
    already whole, in SubJobOrderFn order —, then the other sub-jobs by SubJobOrderFn: the sub-job's
    priority (its highest pod priority; the priority plugin), higher first; not ready before ready (the gang
    plugin: the tasks without a partition form the default sub-job, ready with one pod, so that after its
    first pod it goes behind every partition still waiting); the partition index (``MatchIndex``; the
    default sub-job's is 0); the sub-job's UID (the job's UID for the default one, then
    ``JOB/TASK-PARTITION``). Within a sub-job, the pods keep ``steps``' order (TaskOrderFn)."""
    tasks = {t.name: t for t in job.tasks}
    prio = {t.name: task_priority(job, t, snap) for t in job.tasks}
    plain = [t.name for t in job.tasks if t.partition_policy is None]
    default_prio = max((prio[t] for t in plain), default=0)
    default_ready = any(held.get(t) for t in plain)
    required: set[tuple[str, int]] = set()
    for t in job.tasks:
        pp = t.partition_policy
        if pp is None:
            continue
        have = held.get(t.name, frozenset())
        whole = [p for p in range(pp.total_partitions) if all(i in have for i in pp.members(p))]
        waiting = [p for p in range(pp.total_partitions) if p not in whole]
        required.update((t.name, p) for p in waiting[:max(0, pp.min_partitions - len(whole))])
    first_plain = next((k for k, (t, _i, _r) in enumerate(steps) if t in plain), None)

    def key(k: int) -> tuple[int, int, int, int, str]:
        t, i, _r = steps[k]
        pp = tasks[t].partition_policy
        if pp is None:
            ready = default_ready or k != first_plain
            return (1, -default_prio, int(ready), 0, "")
        part = pp.of(i)
        return (0 if (t, part) in required else 1, -prio[t], 0, part, f"/{t}-{part}")

    return [steps[k] for k in sorted(range(len(steps)), key=lambda k: (key(k), k))]


def preemptor_order(job: VCJob, steps: Sequence[tuple[str, int, bool]], pods: dict[str, list[Pod]],
                    snap: Snapshot) -> list[tuple[str, int, bool]]:
    """The pending pods ``steps`` in the order Volcano's allocate (per sub-job), preempt and reclaim pop them
    (vc-scheduler v1.15.1: a queue of the pending pods by the session's TaskOrderFn; preempt's and reclaim's
    ``preemptorTasks`` one queue of every pending pod of the job, with no sub-job step): the pod's priority,
    higher first (the priority plugin); then the job controller's ``CompareTask``: the smaller index the pod's
    name ends in (``pod_index``; read only when every pod of the job has one, so that the order stays one order);
    among equal indices the earlier creation, then the smaller UID. So a bare PodGroup's subgroups ``g-s0-0,
    g-s0-1, g-s1-0`` go ``g-s0-0, g-s1-0`` (index 0) before ``g-s0-1``. A bare PodGroup's pods are read from the
    snapshot (its own pods: their creation and UID); a VCJob's replicas have none yet: replicas of one index keep
    ``steps``' order, by task, where Volcano's UIDs, drawn when its job controller makes the pods, decide."""
    def key(step: tuple[str, int, bool]) -> tuple[int, int, str, str]:
        pod = pods[step[0]][step[1]]
        if job.kind == "PodGroup":
            pod = snap.pods.get(pod.key, pod)
        index = (pod_index(pod.name) or 0) if indexed else 0
        return -prio[step[0]], index, pod.creation_timestamp, pod.uid

    prio = {t.name: task_priority(job, t, snap) for t in job.tasks}
    indexed = all(pod_index(pods[t][i].name) is not None for t, i, _r in steps)
    return sorted(steps, key=key)


def gang_order(job: VCJob, snap: Snapshot | None = None,
               held: dict[str, frozenset[int]] | None = None) -> list[tuple[str, int]]:
    """``gang_steps`` without the required flag: (task, index) in the order a dry run tries them."""
    return [(t, i) for t, i, _r in gang_steps(job, snap, held)]


def task_pos(job: VCJob, task: str) -> int:
    return next(i for i, t in enumerate(job.tasks) if t.name == task)
