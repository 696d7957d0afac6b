"""Room a job's pipelined pods hold within a scheduling cycle, as Volcano's preempt and reclaim read a node
(``NodeInfo.FutureIdle``: idle, plus what victims release, minus what earlier jobs pipelined). A job the plan does
not admit but that keeps victims (its reclaim pipelined its pods, the next cycle's allocate gave the room to
others) pipelined onto the room its victims freed; a later job of the same cycle that evicts on that node needs
its own victims, and the validator's "just enough" must not call them more than Volcano takes; and the pipelined
pods count in their queue's allocation, which the capacity plugin reads when a later job reclaims from that queue.

The greedy's plans on generated families with twin jobs (each pending VCJob three times, same spec and creation
time) made such plans; seeds 6 and 12 (``topology_share`` 0.5) failed validation, so ``optplan place`` printed an
internal error instead of a plan.
"""

from __future__ import annotations

import dataclasses

import pytest

from optplan.adapters.generate import generate
from optplan.adapters.kubefile import load_objects
from optplan.models.placement import Binding, JobPlacement, PlacementPlan, Victim
from optplan.models.repack import SolverRecord
from optplan.models.snapshot import Snapshot
from optplan.solvers.placement.place import plan_placement
from optplan.solvers.placement.validate import placement_violations
from tests.builders import GPU, job_task, node, pod, queue, vcjob
from tests.placement.test_placement_family import NOW, OPTS, family
from tests.placement.test_twin_jobs import with_twins
from tests.placement.test_victims import CLASSES, running

# One node n0 of 8 GPUs, full with three pods of queue o (deserved 0: reclaimable): v1 (4 GPUs), v2 and v3 (2 each).
# Queue q runs nothing; its jobs t, then j, reclaim in one cycle. t is not admitted but keeps victims on n0 (its
# pods were pipelined there; the next cycle's allocate gave the room to others); j lands on n0 after it.
JUST_ENOUGH = [  # (what, t's pod GPUs, t's victims, j's pod GPUs, j's victims, the validator says more than enough)
    ("t's pipelined pod holds v1's room: j needs v2", 4, ["v1"], 2, ["v2"], False),
    ("t's pod holds half of v1's room: j's 2 GPUs fit without v2", 2, ["v1"], 2, ["v2"], True),
    ("t evicts nothing: j's 4 GPUs fit with v2 or v3 kept", 4, [], 4, ["v1", "v2", "v3"], True),
    ("t evicts nothing: j's 4 GPUs need v1 alone", 4, [], 4, ["v1"], False),
]


def cluster(t_gpus: int, j_gpus: int) -> Snapshot:
    return load_objects([*CLASSES, node("n0", 8), queue("q", deserved={GPU: 16}), queue("o", deserved={GPU: 0}),
                         *running("v1", "o", [("n0", 4)], "normal-job", min_member=0),
                         *running("v2", "o", [("n0", 2)], "normal-job", min_member=0),
                         *running("v3", "o", [("n0", 2)], "normal-job", min_member=0),
                         vcjob("t", "q", [job_task("w", 1, t_gpus)], priority_class_name="large-job"),
                         vcjob("j", "q", [job_task("w", 1, j_gpus)], priority_class_name="large-job")]).snapshot


def reclaimed(names: list[str]) -> tuple[Victim, ...]:
    return tuple(Victim(namespace="default", name=f"{n}-0", node="n0", reason="reclaim") for n in names)


@pytest.mark.parametrize(("what", "t_gpus", "t_victims", "j_gpus", "j_victims", "flagged"), JUST_ENOUGH,
                         ids=[c[0] for c in JUST_ENOUGH])
def test_just_enough_counts_the_room_a_job_not_admitted_pipelined(what: str, t_gpus: int, t_victims: list[str],
                                                                 j_gpus: int, j_victims: list[str],
                                                                 flagged: bool) -> None:
    snap = cluster(t_gpus, j_gpus)
    t = JobPlacement(namespace="default", name="t", queue="q", admitted=False, reason="its reclaim's room went to j",
                     victims=reclaimed(t_victims), after_evictions=bool(t_victims), step=12 if t_victims else 0)
    j = JobPlacement(namespace="default", name="j", queue="q", admitted=True, reason="placed after reclaiming",
                     bindings=(Binding(task="w", index=0, node="n0"),), victims=reclaimed(j_victims),
                     after_evictions=True, step=12)
    plan = PlacementPlan(jobs=(t, j), solver=SolverRecord(name="greedy", status="HEURISTIC"))
    out = placement_violations(snap, list(snap.jobs.values()), plan)
    assert any(v.startswith("job default/j: evicts more than just enough on n0") for v in out) is flagged, out


@pytest.mark.parametrize("seed", [6, 11])
def test_the_greedy_places_twin_jobs_with_a_valid_plan(seed: int) -> None:
    """A job not admitted pipelined on a node before another job of its cycle evicted there: the plan validates
    (``plan_placement`` raised PlanInvalidError, "evicts more than just enough") and still has such a job. (Seed
    12 was one until the validator freed every victim of a later cycle's allocate before its first placement:
    its cycles now go on and admit every job.)"""
    snap = with_twins(load_objects(generate(dataclasses.replace(family(seed), topology_share=0.5))).snapshot, 2)
    plan = plan_placement(snap, list(snap.jobs.values()), "greedy", OPTS, now=NOW)
    waiting = [jp for jp in plan.jobs if not jp.admitted and jp.victims]
    assert waiting and any(jp.admitted and jp.victims for jp in plan.jobs)
    nodes = {v.node for jp in waiting for v in jp.victims}
    assert any(v.node in nodes for jp in plan.jobs if jp.admitted for v in jp.victims)


# Queue a (deserved 4 GPUs) runs va (4 GPUs, minMember 1: the gang tier offers it to no one) on n0, full with a
# system pod. Its job t (4 GPUs) is not admitted but keeps a victim on n1 (its pod was pipelined there, and charged
# to queue a, as Volcano's capacity plugin charges a pipelined pod). j (queue b) then reclaims va: the capacity
# plugin offers it only while queue a is above its deserved, which it is with t's pipelined pod alone.
CAPACITY = [  # (what, t keeps a victim, the validator refuses j's victim)
    ("t's pipelined pod puts queue a above deserved: va is offered", True, False),
    ("t pipelined nothing: queue a is at deserved, va is not offered", False, True),
]


@pytest.mark.parametrize(("what", "t_victim", "refused"), CAPACITY, ids=[c[0] for c in CAPACITY])
def test_reclaim_sees_the_queue_allocation_of_pipelined_pods(what: str, t_victim: bool, refused: bool) -> None:
    snap = load_objects([*CLASSES, node("n0", 8), node("n1", 4), queue("a", deserved={GPU: 4}),
                         queue("b", deserved={GPU: 8}), queue("o", deserved={GPU: 0}), pod("sys", "n0", 4, group=None),
                         *running("va", "a", [("n0", 4)], "normal-job", min_member=1),
                         *running("vo", "o", [("n1", 4)], "normal-job", min_member=0),
                         vcjob("t", "a", [job_task("w", 1, 4)], priority_class_name="large-job"),
                         vcjob("j", "b", [job_task("w", 1, 4)], priority_class_name="large-job")]).snapshot
    victims = (Victim(namespace="default", name="vo-0", node="n1", reason="reclaim"),) if t_victim else ()
    t = JobPlacement(namespace="default", name="t", queue="a", admitted=False, reason="its reclaim's room went to j",
                     victims=victims, after_evictions=t_victim, step=12 if t_victim else 0)
    j = JobPlacement(namespace="default", name="j", queue="b", admitted=True, reason="placed after reclaiming",
                     bindings=(Binding(task="w", index=0, node="n0"),),
                     victims=(Victim(namespace="default", name="va-0", node="n0", reason="reclaim"),),
                     after_evictions=True, step=12)
    plan = PlacementPlan(jobs=(t, j), solver=SolverRecord(name="greedy", status="HEURISTIC"))
    out = placement_violations(snap, list(snap.jobs.values()), plan)
    assert any(v.startswith("job default/j victim default/va-0 (reclaim): Volcano's plugin tiers do not offer")
               for v in out) is refused, out


@pytest.mark.parametrize("seed", [311, 341])
def test_a_starving_gangs_pods_pipelined_without_victims_count_in_its_queue(seed: int) -> None:
    """Families with topology where preempt's pass within a starving gang (several pods) pipelines a pod
    that fits and commits it without victims (Volcano's ``Preemption between Task within Job``), which puts
    its queue above deserved, so that a later job's reclaim may take a pod of that queue: the validator
    counts such a job's pods in its queue's allocation (``_unnamed_pods``) as the capacity plugin does. It
    refused the greedy's plans before."""
    snap = load_objects(generate(dataclasses.replace(family(seed), topology_share=0.5))).snapshot
    jobs = list(snap.jobs.values())
    plan = plan_placement(snap, jobs, "greedy", OPTS, now=NOW)
    assert placement_violations(snap, jobs, plan) == []
    assert any(not jp.admitted and not jp.victims for jp in plan.jobs)
    assert any(v.reason == "reclaim" for jp in plan.jobs for v in jp.victims)
