"""Twin pending jobs (the same spec under another name): once one of them found no victims, the greedy's
preempt and reclaim answer its twins on the same state as it was answered, without searching again
(``evict.twin_key``). What a user must notice is nothing: the plan is the same, byte for byte (its
wall time aside), as when every job is searched — on generated families with twins added, and on a
hand-built queue of twins where the first takes the victims and the later ones find none."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from optplan.adapters.generate import generate
from optplan.adapters.kubefile import load_objects
from optplan.models.placement import PlacementPlan
from optplan.models.snapshot import Snapshot
from optplan.solvers.placement import evict
from optplan.solvers.placement.place import plan_placement
from optplan.solvers.placement.validate import placement_violations
from tests.builders import job_task, node, queue, vcjob
from tests.placement.test_placement_family import NOW, OPTS, family
from tests.placement.test_victims import CLASSES, running


def with_twins(snap: Snapshot, copies: int) -> Snapshot:
    """Each pending VCJob followed by ``copies`` twins: new name and UID, created at the same time (job order
    then by name), labels naming the job renamed with it."""
    jobs = dict(snap.jobs)
    for job in list(snap.jobs.values()):
        for k in range(1, copies + 1):
            name = f"{job.name}-twin-{k}"
            rename = {key: (name if v == job.name else v) for key, v in job.labels.items()}
            twin = job.model_copy(update={"name": name, "uid": f"{job.uid}-{k}" if job.uid else "",
                                          "labels": rename, "creation_timestamp": job.creation_timestamp})
            jobs[twin.key] = twin
    return snap.model_copy(update={"jobs": dict(sorted(jobs.items()))})


def plan_bytes(plan: PlacementPlan) -> str:
    doc = json.loads(plan.model_dump_json())
    doc["solver"]["wall_seconds"] = 0
    return json.dumps(doc, sort_keys=True)


def both(snap: Snapshot, monkeypatch: pytest.MonkeyPatch, now: str = NOW) -> tuple[PlacementPlan, PlacementPlan]:
    jobs = list(snap.jobs.values())
    out = []
    for twins in (False, True):
        monkeypatch.setattr(evict, "TWINS", twins)
        out.append(plan_placement(snap, jobs, "greedy", OPTS, now=now))
    return out[0], out[1]


@pytest.mark.parametrize("seed", [0, 3, 6, 9, 11, 12, 16, 25, 27, 28, 53, 72])
def test_twins_change_nothing_on_generated_families(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = dataclasses.replace(family(seed), topology_share=0.0 if seed % 2 else 0.5)
    snap = with_twins(load_objects(generate(cfg)).snapshot, 2)
    searched, answered = both(snap, monkeypatch)
    assert plan_bytes(answered) == plan_bytes(searched)
    assert placement_violations(snap, list(snap.jobs.values()), answered) == []


def test_a_reclaim_over_two_nodes_validates(monkeypatch: pytest.MonkeyPatch) -> None:
    """Family 28 without topology, two twins per job: jobs reclaim over two nodes each, several victims on one
    node (team-c's first job: three on node-0004, one on node-0003). The validator asks the tiers per pod in
    Volcano's preemptor order, evicting just enough in the victims' order (the queues' first); it refused the
    greedy's plan before (asking per node, all of a node's victims at its first pod). (Until the greedy's reclaim
    stopped placing a job in room other jobs' victims freed, the last twin of team-a's job reclaimed here.)"""
    cfg = dataclasses.replace(family(28), topology_share=0.0)
    snap = with_twins(load_objects(generate(cfg)).snapshot, 2)
    searched, answered = both(snap, monkeypatch)
    assert plan_bytes(answered) == plan_bytes(searched)
    assert placement_violations(snap, list(snap.jobs.values()), answered) == []
    over_two = [jp for jp in answered.jobs if jp.admitted and {v.reason for v in jp.victims} == {"reclaim"}
                and len({v.node for v in jp.victims}) == 2]
    assert {jp.key for jp in over_two} >= {"team-c/pending-0003", "team-c/pending-0003-twin-1",
                                           "team-c/pending-0003-twin-2"}


@pytest.mark.parametrize(("seed", "copies"), [(312, 2), (597, 1), (597, 2)])
def test_a_waiting_jobs_victims_on_nodes_in_walk_order_validate(seed: int, copies: int) -> None:
    """Families with topology where a job left waiting keeps victims on several nodes, some of which the
    tiers offer only with the victims on the nodes before them in the walk gone, the rest only with those after
    still running: the validator tries the victims elsewhere all gone, then those on the nodes before this one
    in the node list (by name). It refused the greedy's plans before."""
    cfg = dataclasses.replace(family(seed), topology_share=0.5)
    snap = with_twins(load_objects(generate(cfg)).snapshot, copies)
    jobs = list(snap.jobs.values())
    plan = plan_placement(snap, jobs, "greedy", OPTS, now=NOW)
    assert placement_violations(snap, jobs, plan) == []


def created(obj: dict[str, Any], at: str) -> dict[str, Any]:
    obj["metadata"]["creationTimestamp"] = at
    return obj


def twin_queue() -> list[dict[str, Any]]:
    """Two nodes full of low-priority pods in one queue; small critical twins, then big critical twins: the
    first small one preempts, the next ones fit into the room its victim freed or preempt again, the big ones
    find the last victim or nothing."""
    return [*CLASSES, queue("q", deserved={"nvidia.com/gpu": "16"}),
            node("n0", gpu=8), node("n1", gpu=8),
            *running("low", "q", [("n0", 8), ("n1", 7)], "spot-job", min_member=0),
            *[created(vcjob(f"crit-{k}", "q", [job_task("w", 1, 2)], priority_class_name="critical-job"),
                      f"2025-06-01T00:00:0{k}Z") for k in range(4)],
            *[created(vcjob(f"big-{k}", "q", [job_task("w", 1, 8)], priority_class_name="critical-job"),
                      f"2025-06-01T00:01:0{k}Z") for k in range(3)]]


def test_a_queue_of_twins_gets_the_same_plan_and_reasons(monkeypatch: pytest.MonkeyPatch) -> None:
    snap = load_objects(twin_queue()).snapshot
    searched, answered = both(snap, monkeypatch)
    assert plan_bytes(answered) == plan_bytes(searched)
    failed = [jp for jp in answered.jobs if not jp.admitted]
    assert answered.job("default/crit-0").admitted and len(failed) >= 2
    assert len({jp.reason for jp in failed}) == 1  # the twins that found nothing say the same


def test_a_twin_is_searched_again_once_another_job_changed_the_state(monkeypatch: pytest.MonkeyPatch) -> None:
    """x-0 may not preempt (its task's PriorityClass says Never) and finds nothing; y, created between the
    twins, preempts an 8-card pod for 4 cards; x-1, x-0's twin, is searched again on the changed state (the memo
    must not answer it from x-0's search). The room y's victim left goes to x-0 in the next cycle's allocate (the
    earlier job; a Never pod is never pipelined by preempt, ``taskEligibleToPreempt``): the validator replays
    that cycle's jobs with victims first, as their victims went in the cycle before, and the merged plan holds
    (before, it stopped at the first cycle, x-1 placed by preempt's pass)."""
    never = {"priorityClassName": "debug-job"}
    objs = [*CLASSES, queue("q", deserved={"nvidia.com/gpu": "16"}),
            node("n0", gpu=8),
            *running("low", "q", [("n0", 8)], "spot-job", min_member=0),
            created(vcjob("x-0", "q", [job_task("w", 1, 4, template_spec=never)], priority_class_name="critical-job"),
                    "2025-06-01T00:00:00Z"),
            created(vcjob("y", "q", [job_task("w", 1, 4)], priority_class_name="critical-job"),
                    "2025-06-01T00:00:01Z"),
            created(vcjob("x-1", "q", [job_task("w", 1, 4, template_spec=never)], priority_class_name="critical-job"),
                    "2025-06-01T00:00:02Z")]
    snap = load_objects(objs).snapshot
    searched, answered = both(snap, monkeypatch)
    assert plan_bytes(answered) == plan_bytes(searched)
    assert [answered.job(f"default/{n}").admitted for n in ("x-0", "y", "x-1")] == [True, True, False]
