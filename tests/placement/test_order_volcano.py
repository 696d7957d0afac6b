"""Volcano's order in ``optplan place``, table-driven (written from the rules, not ported): allocate pops
the first queue (the capacity plugin's QueueOrderFn: ``spec.priority`` higher first, then share =
allocated / deserved lower first, a queue with a deserved before a best-effort one), takes one job
(priority plugin's JobOrderFn, then creation time) and pushes the queue back, so shares change as jobs
are placed; a task's own PriorityClass (the template's priorityClassName, else the job's) orders the
pods of a job and says whether they may preempt (preemptionPolicy Never).

Each case runs through greedy, cpsat and auto, and every plan passes the validator."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from optplan.models.placement import PlacementPlan
from optplan.solvers.core.options import PlanOptions
from tests.builders import job_task, load, node, place_validated, pod, podgroup_in, priority_class, queue, vcjob

OPTS = PlanOptions(time_limit=5, workers=1, seed=0)
NOW = "2025-06-01T12:00:00Z"
SOLVERS = ("greedy", "cpsat", "auto")


def q(name: str, priority: int | None = None, **kw: Any) -> dict[str, Any]:
    obj = queue(name, **kw)
    if priority is not None:
        obj["spec"]["priority"] = priority
    return obj


def job(name: str, queue_name: str, gpu: int, *, created: str, cls: str | None = None,
        tasks: list[dict[str, Any]] | None = None, **kw: Any) -> dict[str, Any]:
    obj = vcjob(name, queue_name, tasks or [job_task("worker", 1, gpu)], priority_class_name=cls, **kw)
    obj["metadata"]["creationTimestamp"] = created
    return obj


def task(name: str, gpu: int, cls: str | None = None) -> dict[str, Any]:
    return job_task(name, 1, gpu, template_spec={"priorityClassName": cls} if cls else None)


def running(name: str, queue_name: str, node_name: str, gpu: int, *, cls: str | None = None) -> list[dict[str, Any]]:
    """A running one-pod PodGroup in the queue, minMember 0 (Volcano's tiers preempt no job at minMember)."""
    pg = podgroup_in(queue_name, name, 0)
    if cls is not None:
        pg["spec"]["priorityClassName"] = cls
    p = pod(f"{name}-0", node_name, gpu, group=name)
    p["status"]["startTime"] = "2025-06-01T10:00:00Z"
    return [pg, p]


@dataclass
class Case:
    name: str
    objects: list[dict[str, Any]]
    admitted: set[str]
    """Jobs (namespace/name) admitted by the greedy (Volcano's order)."""
    binds: dict[str, str] = field(default_factory=dict)
    """ns/pod -> node, for the greedy."""
    evicted: set[str] = field(default_factory=set)
    """ns/pod evicted by the greedy."""
    exact_admitted: set[str] | None = None
    """When the exact model legitimately admits more (see the case's comment); None: as the greedy."""
    exact_evicted: set[str] | None = None


CASES = [
    # Queue spec.priority first: qb (10) before qa (0) though qa's job is older and the shares tie.
    Case("queue-priority", [node("n0", 8), q("qa"), q("qb", priority=10),
                            job("ja", "qa", 8, created="2025-06-01T09:00:00Z"),
                            job("jb", "qb", 8, created="2025-06-01T10:00:00Z")],
         admitted={"default/jb"}, binds={"default/jb-worker-0": "n0"}),
    # A parent's share is the session's start's: the capacity plugin recomputes only a leaf's share as pods are
    # allocated (its AllocateFunc adds to the ancestors' allocation, not their share). Tenant t (3 of 8) holds
    # leaf b; the flat f holds 4 of 8 (n0 full). b's job jb (two 2-GPU pods, minAvailable 1) goes first (t 0.375 <
    # f 0.5), ready with one pod on n1; t's allocation is then 5 of 8, but its share stays 0.375, so b goes first again
    # and jb's second pod takes n1's rest: jf (f, one 2-GPU pod) finds no room. (Live shares would have given
    # f the turn: jf on n1, jb with one pod.) t and b are not reclaimable: nothing for jf to reclaim.
    Case("parent-share-at-session-start",
         [node("n0", 7), node("n1", 4), q("t", deserved={"nvidia.com/gpu": "8"}, reclaimable=False),
          q("b", parent="t", deserved={"nvidia.com/gpu": "8"}, reclaimable=False),
          q("f", deserved={"nvidia.com/gpu": "8"}),
          *running("rb", "b", "n0", 3), *running("rf", "f", "n0", 4),
          job("jb", "b", 2, created="2025-06-01T09:00:00Z", min_available=1,
              tasks=[job_task("worker", 2, 2)]),
          job("jf", "f", 2, created="2025-06-01T09:00:00Z")],
         admitted={"default/jb"}, binds={"default/jb-worker-0": "n1", "default/jb-worker-1": "n1"},
         exact_admitted={"default/jb", "default/jf"}, exact_evicted=set()),
    # Equal priority: the lower share goes first. qa holds 6 of its deserved 8 GPUs (0.75), qb 2 of 8 (0.25).
    Case("queue-share", [node("n0", 8), node("n1", 8),
                         q("qa", deserved={"nvidia.com/gpu": "8"}), q("qb", deserved={"nvidia.com/gpu": "8"}),
                         *running("ra", "qa", "n0", 6), *running("rb", "qb", "n0", 2),
                         job("ja", "qa", 8, created="2025-06-01T09:00:00Z"),
                         job("jb", "qb", 8, created="2025-06-01T10:00:00Z")],
         admitted={"default/jb"}, binds={"default/jb-worker-0": "n1"}),
    # The share changes as jobs are placed: qa's first job lifts qa to 4/8, so qb (0/8) goes next, and
    # qa's second job (older than qb's) finds no room. A queue-by-queue order would admit a1 and a2.
    Case("share-interleaves", [node("n0", 8),
                               q("qa", deserved={"nvidia.com/gpu": "8"}), q("qb", deserved={"nvidia.com/gpu": "8"}),
                               job("a1", "qa", 4, created="2025-06-01T08:00:00Z"),
                               job("a2", "qa", 4, created="2025-06-01T09:00:00Z"),
                               job("b1", "qb", 4, created="2025-06-01T10:00:00Z")],
         admitted={"default/a1", "default/b1"}, binds={"default/a1-worker-0": "n0", "default/b1-worker-0": "n0"}),
    # A queue with a deserved goes before a best-effort one at equal share (both 1 here: qa is at its
    # deserved 2, qb lists none).
    Case("deserved-before-best-effort", [node("n0", 8), node("n1", 8),
                                         q("qa", deserved={"nvidia.com/gpu": "2"}), q("qb"),
                                         *running("ra", "qa", "n0", 2), *running("rb", "qb", "n0", 6),
                                         job("jb", "qb", 8, created="2025-06-01T09:00:00Z"),
                                         job("ja", "qa", 8, created="2025-06-01T10:00:00Z")],
         admitted={"default/ja"}, binds={"default/ja-worker-0": "n1"}),
    # Inside one queue: job priority, then creation time.
    Case("job-priority", [node("n0", 8), priority_class("low", 10), priority_class("high", 100), q("qa"),
                          job("lo", "qa", 8, created="2025-06-01T09:00:00Z", cls="low"),
                          job("hi", "qa", 8, created="2025-06-01T10:00:00Z", cls="high")],
         admitted={"default/hi"}, binds={"default/hi-worker-0": "n0"}),
    Case("creation-time", [node("n0", 8), q("qa"),
                           job("late", "qa", 8, created="2025-06-01T10:00:00Z"),
                           job("early", "qa", 8, created="2025-06-01T09:00:00Z")],
         admitted={"default/early"}, binds={"default/early-worker-0": "n0"}),
    # Task priority orders a job's pods: with room for one pod and minAvailable 1, the task whose
    # template names the higher class is tried first.
    Case("task-priority", [node("n0", 4), priority_class("low", 10), priority_class("high", 100), q("qa"),
                           job("j", "qa", 4, created="2025-06-01T09:00:00Z", min_available=1,
                               tasks=[task("a", 4, "low"), task("b", 4, "high")])],
         admitted={"default/j"}, binds={"default/j-b-0": "n0"}),
    # preemptionPolicy Never on the job's class: no victims.
    Case("job-never", [node("n0", 8), priority_class("low", 10), priority_class("urgent", 100, "Never"), q("qa"),
                       *running("r", "qa", "n0", 8, cls="low"),
                       job("j", "qa", 8, created="2025-06-01T09:00:00Z", cls="urgent")],
         admitted=set()),
    # The task's own class decides: Never in the template, though the job's class may preempt ...
    Case("task-never", [node("n0", 8), priority_class("low", 10), priority_class("high", 100),
                        priority_class("urgent", 100, "Never"), q("qa"), *running("r", "qa", "n0", 8, cls="low"),
                        job("j", "qa", 8, created="2025-06-01T09:00:00Z", cls="high",
                            tasks=[task("worker", 8, "urgent")])],
         admitted=set()),
    # ... and a template class that may preempt, though the job's says Never (the job's priority, 100
    # either way, is what victims are compared with).
    Case("task-may-preempt", [node("n0", 8), priority_class("low", 10), priority_class("high", 100),
                              priority_class("urgent", 100, "Never"), q("qa"),
                              *running("r", "qa", "n0", 8, cls="low"),
                              job("j", "qa", 8, created="2025-06-01T09:00:00Z", cls="urgent",
                                  tasks=[task("worker", 8, "high")])],
         admitted={"default/j"}, binds={"default/j-worker-0": "n0"}, evicted={"default/r-0"}),
    # Mixed: task b (class 200, may preempt) goes first; Volcano's preempt walks the nodes by score, n1
    # (busy) before the free n0, and preempts r there; task a (Never) is passed over (``taskEligibleToPreempt``,
    # though n0 is free), so with minAvailable 2 the job is not pipelined and the evictions are discarded;
    # allocate places b first (on the free n0) and then finds no node for a. Nothing happens, by any solver:
    # the exact model may not place a Never pod in its preempt step either. (Was: a took n0 in the dry run,
    # and every solver evicted r.)
    Case("mixed-never", [node("n0", 8), node("n1", 8), priority_class("low", 10), priority_class("high", 200),
                         priority_class("urgent", 100, "Never"), q("qa"), *running("r", "qa", "n1", 8, cls="low"),
                         job("j", "qa", 8, created="2025-06-01T09:00:00Z", cls="high",
                             tasks=[task("a", 8, "urgent"), task("b", 8, "high")])],
         admitted=set()),
    # Two pods of b (may preempt) and one of a (Never), minAvailable 2: b's pods alone pipeline the job, each
    # preempting on a busy node (n1, n2, by binpack before the free n0), a is passed over; the next cycle's
    # allocate binds b's where preempt pipelined them and then a, a replica beyond the gang, on the free n0.
    Case("never-beyond-the-gang", [node("n0", 8), node("n1", 8), node("n2", 8), priority_class("low", 10),
                                   priority_class("high", 200), priority_class("urgent", 100, "Never"), q("qa"),
                                   *running("r", "qa", "n1", 8, cls="low"), *running("s", "qa", "n2", 8, cls="low"),
                                   job("j", "qa", 8, created="2025-06-01T09:00:00Z", cls="high", min_available=2,
                                       tasks=[task("a", 8, "urgent"),
                                              job_task("b", 2, 8, template_spec={"priorityClassName": "high"})])],
         admitted={"default/j"}, binds={"default/j-a-0": "n0", "default/j-b-0": "n1", "default/j-b-1": "n2"},
         evicted={"default/r-0", "default/s-0"},
         # the exact model takes the free n0 for a pod of b instead (one victim fewer: better where the rules
         # allow), and a finds no room
         exact_admitted={"default/j"}, exact_evicted={"default/s-0"}),
    # Reclaim passes over a Never task's pods too: qb's r runs beyond qb's deserved 0 on n1, qa's job has b
    # (may reclaim) and a (Never), minAvailable 2 and one node free: reclaim pipelines b on n1, skips a, and
    # discards; nothing is reclaimed.
    Case("reclaim-mixed-never", [node("n0", 8), node("n1", 8), priority_class("high", 200),
                                 priority_class("urgent", 100, "Never"),
                                 q("qa", deserved={"nvidia.com/gpu": "16"}), q("qb", deserved={"nvidia.com/gpu": "0"}),
                                 *running("r", "qb", "n1", 8),
                                 job("j", "qa", 8, created="2025-06-01T09:00:00Z", cls="high",
                                     tasks=[task("a", 8, "urgent"), task("b", 8, "high")])],
         admitted=set()),
]


def run(case: Case, solver: str) -> PlacementPlan:
    plan: PlacementPlan = place_validated(case.objects, solver, OPTS, NOW)
    return plan


def admitted(plan: PlacementPlan) -> set[str]:
    return {jp.key for jp in plan.jobs if jp.admitted}


def evicted(plan: PlacementPlan) -> set[str]:
    return {f"{v.namespace}/{v.name}" for jp in plan.jobs for v in jp.victims}


def binds(plan: PlacementPlan) -> dict[str, str]:
    return {f"{jp.namespace}/{b.pod_name(jp.name)}": b.node for jp in plan.jobs for b in jp.bindings}


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_volcano_order(case: Case, solver: str) -> None:
    plan = run(case, solver)
    if solver == "greedy" or case.exact_admitted is None:
        assert admitted(plan) == case.admitted
        assert evicted(plan) == case.evicted
        if solver == "greedy":
            assert binds(plan) == case.binds
        else:  # where the exact objective ties, Volcano's order decides which jobs it admits
            assert {k.rsplit("-", 2)[0] for k in binds(plan)} == {k.rsplit("-", 2)[0] for k in case.binds}
    else:
        assert admitted(plan) == case.exact_admitted
        assert evicted(plan) == case.exact_evicted


@pytest.mark.parametrize("solver", SOLVERS)
def test_never_job_says_why(solver: str) -> None:
    case = next(c for c in CASES if c.name == "task-never")
    jp = run(case, solver).job("default/j")
    assert not jp.admitted and "preemptionPolicy Never" in jp.reason


def test_template_priority_class_is_read() -> None:
    snap = load(job("j", "qa", 1, created="2025-06-01T09:00:00Z", cls="high",
                    tasks=[task("a", 1, "urgent"), task("b", 1)]), q("qa")).snapshot
    j = snap.jobs["default/j"]
    assert [j.task_priority_class(t) for t in j.tasks] == ["urgent", "high"]


def test_queue_priority_is_read() -> None:
    snap = load(q("qa", priority=7), q("qb")).snapshot
    assert (snap.queues["qa"].priority, snap.queues["qb"].priority) == (7, 0)


def test_the_validator_refuses_a_never_pod_pipelined_by_preempt() -> None:
    """The plan every solver made before: mixed-never's j admitted, a (Never) on the free n0 in the preempt
    step and b on n1 evicting r. Volcano's preempt passes over a, so b alone (1 of minAvailable 2) never
    pipelines the job: the validator refuses it, naming the Never task."""
    from optplan.models.placement import Binding, Victim
    from optplan.solvers.placement.validate import placement_violations

    case = next(c for c in CASES if c.name == "mixed-never")
    snap = load(*case.objects).snapshot
    jobs = list(snap.jobs.values())
    plan = run(case, "greedy")
    jp = plan.job("default/j").model_copy(update={
        "admitted": True, "after_evictions": True,
        "bindings": (Binding(task="a", index=0, node="n0"), Binding(task="b", index=0, node="n1")),
        "victims": (Victim(namespace="default", name="r-0", node="n1", reason="preempt"),)})
    why = placement_violations(snap, jobs, plan.model_copy(update={"jobs": (jp,)}))
    assert any("preemptionPolicy Never tasks (a)" in w and "1 of minAvailable 2" in w for w in why), why


@pytest.mark.parametrize(("uids", "first"), [
    ({"g-ps": "c", "g-w0": "b", "g-w1": "a"}, "g-w1"),  # names of two parts: no index; the smaller UID first
    ({"g-ps": "a", "g-w0": "c", "g-w1": "b"}, "g-ps"),
    ({"g-ps": "b", "g-w0": "a", "g-w1": "c"}, "g-w0"),
])
def test_allocate_tries_a_jobs_pods_in_volcanos_task_order(uids: dict[str, str], first: str) -> None:
    """Allocate pops a job's pending pods by the session's TaskOrderFn (vc-scheduler v1.15.1, allocate.go: a
    sub-job's pending pods in one queue): the pod's priority, then the job controller's CompareTask — the index a
    name of three or more parts ends in, else creation time, then UID. A bare PodGroup's pods ``g-ps``, ``g-w0``,
    ``g-w1`` (no index) go by UID; the first of them takes the one GPU left on the fuller node (binpack), the
    others the empty node. Found on the real scheduler: six cases of seed 7's bare-PodGroup recording (the pods
    tried by name before)."""
    from tests.placement.test_bare_podgroups import bare, member
    created = "2025-06-01T10:00:00Z"
    pods = []
    for name, uid in uids.items():
        p = member(name, "g", 1)
        p["metadata"].update(uid=uid, creationTimestamp=created)
        pods.append(p)
    objs = [node("n0", 8), node("n1", 8), queue("default"), bare("g", 3), pod("busy", "n0", 7, group=None), *pods]
    from optplan.solvers.placement.jobs import jobs_to_place
    from optplan.solvers.placement.place import plan_placement
    from optplan.solvers.placement.validate import placement_violations
    snap = load(*objs).snapshot
    jobs = jobs_to_place(snap)
    plan = plan_placement(snap, jobs, "greedy", OPTS, now=NOW)
    assert placement_violations(snap, jobs, plan) == []
    where = {b.pod: b.node for jp in plan.jobs for b in jp.bindings}
    assert where[first] == "n0" and sum(n == "n0" for n in where.values()) == 1, where
