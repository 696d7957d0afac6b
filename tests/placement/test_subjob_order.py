"""The order allocate tries a partitioned job's sub-jobs (Volcano v1.15's ``organizeJobWorksheet``): the
required partitions first (per partitioned task its first ``minPartitions`` less those already whole), then
by SubJobOrderFn — the sub-job's priority (higher first), not ready before ready (the plain tasks form the
default sub-job, ready after one pod), the partition index, the UID (the default sub-job's, the job's own
UID, first). Each row: the job's tasks, the running replicas, the sub-jobs in the order their pods come."""

from __future__ import annotations

from typing import Any

import pytest

from optplan.solvers.placement.jobs import gang_steps
from tests.builders import job_task, load, priority_class, vcjob


def parted(name: str, total: int, size: int, minimum: int, **kw: Any) -> dict[str, Any]:
    task = job_task(name, total * size, 1, **kw)
    task["partitionPolicy"] = {"totalPartitions": total, "partitionSize": size, "minPartitions": minimum}
    return task


HIGH = {"priorityClassName": "high"}
# what, tasks, running replicas (task -> indices), the sub-jobs in order: "task/partition", or "task#index"
# for a plain task's pod (the default sub-job)
ROWS: list[tuple[str, list[dict[str, Any]], dict[str, set[int]], list[str]]] = [
    ("one task: the partitions by index", [parted("w", 3, 2, 1)], {}, ["w/0", "w/1", "w/2"]),
    ("two tasks interleave by partition index, the required ones first",
     [parted("a", 3, 1, 2), parted("b", 3, 1, 1)], {}, ["a/0", "b/0", "a/1", "b/1", "a/2", "b/2"]),
    ("a plain task listed first comes after the required partitions, then goes behind the waiting ones",
     [job_task("ps", 2, 1), parted("w", 3, 1, 1)], {}, ["w/0", "ps#0", "w/1", "w/2", "ps#1"]),
    ("a running plain pod: the default sub-job is ready, behind every partition",
     [job_task("ps", 2, 1), parted("w", 2, 1, 1)], {"ps": {0}}, ["w/0", "w/1", "ps#1"]),
    ("a whole running partition counts: the next one is not required",
     [parted("a", 3, 1, 1), parted("b", 2, 1, 1)], {"a": {0}}, ["b/0", "a/1", "b/1", "a/2"]),
    ("a higher-priority task's partitions first, after the required ones",
     [parted("a", 2, 1, 1), parted("b", 2, 1, 1, template_spec=HIGH)], {}, ["b/0", "a/0", "b/1", "a/1"]),
]


def order(job: dict[str, Any], held: dict[str, set[int]]) -> list[str]:
    snap = load(priority_class("high", 1000), job).snapshot
    [vj] = snap.jobs.values()
    tasks = {t.name: t for t in vj.tasks}
    out: list[str] = []
    for t, i, _r in gang_steps(vj, snap, {k: frozenset(v) for k, v in held.items()}):
        pp = tasks[t].partition_policy
        label = f"{t}/{pp.of(i)}" if pp is not None else f"{t}#{i}"
        if not out or out[-1] != label:
            out.append(label)
    return out


@pytest.mark.parametrize(("what", "tasks", "held", "expected"), ROWS, ids=[r[0] for r in ROWS])
def test_sub_jobs_come_in_allocates_order(what: str, tasks: list[dict[str, Any]], held: dict[str, set[int]],
                                          expected: list[str]) -> None:
    job = vcjob("g", tasks=tasks)
    assert order(job, held) == expected
