"""What the differential recordings read from vc-scheduler's log (``vclog``): the node list its cache began with,
the order in which its node workers first took the case's nodes (``started sync node``, klog level 5), whether
that is the names rotated, that a recording keeps it (``vcdiff.save``/``load``), the run of a shared log that
holds a case, and allocate's draws among HyperNodes of the same best score. Log excerpts written from
vc-scheduler v1.15.1's format; no cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.realcluster.vcdiff import Observed, load, save
from tests.realcluster.vclog import hypernode_ties, node_list, rotation, run_of, walks

CLUSTER = False  # conftest: not a real-cluster test


def sync(name: str, t: str = "18:34:00.490708") -> str:
    return f"I1204 {t}   23695 cache.go:1300] started sync node {name}"


NODES = ["vcd-1-10-r0-n0", "vcd-1-10-r0-n1", "vcd-1-10-r1-n0", "vcd-1-10-r1-n1"]
OTHER = "vcd-1-9-r0-n0"  # a node of another case (its namespace's prefix)
START = "$ /root/.cache/optplan-cluster/bin/vc-scheduler --kubeconfig k --leader-elect=false -v=5"
NOISE = ("I1204 18:34:00.490985   23695 util.go:84] schedulerPodName  is responsible to Node vcd-1-10-r0-n0\n"
         "I1204 18:34:00.491119   23695 node_info.go:239] imageStates is map[]")

LOGS = [  # (what the log shows, its lines, the node list read)
    ("the names rotated at r1-n0, each sync's own lines between",
     [START, sync(NODES[2]), NOISE, sync(NODES[3]), NOISE, sync(NODES[0]), sync(NODES[1])],
     [NODES[2], NODES[3], NODES[0], NODES[1]]),
    ("a node synced again later (its update) keeps its first place",
     [sync(NODES[0]), sync(NODES[1]), sync(NODES[2]), sync(NODES[0]), sync(NODES[3]), sync(NODES[1])],
     NODES),
    ("another case's node is not the case's",
     [sync(OTHER), sync(NODES[1]), sync(NODES[2]), sync(NODES[3]), sync(NODES[0])],
     [NODES[1], NODES[2], NODES[3], NODES[0]]),
    ("two workers swapped neighbours",
     [sync(NODES[3]), sync(NODES[1]), sync(NODES[0]), sync(NODES[2])],
     [NODES[3], NODES[1], NODES[0], NODES[2]]),
    ("log level 2: no sync lines, no list",
     [START, "I1204 18:34:01.000000   23695 allocate.go:101] Enter Allocate ...", NOISE],
     []),
    ("the HyperNode worker's line is not a node's",
     ["I1204 18:33:32.041745   23398 cache.go:1323] started sync hyperNode node/vcd-1-10-r0-n0", sync(NODES[1])],
     [NODES[1]]),
]


@pytest.mark.parametrize(("what", "lines", "want"), LOGS, ids=[x[0] for x in LOGS])
def test_node_list_is_read_from_the_sync_lines(what: str, lines: list[str], want: list[str]) -> None:
    assert node_list("\n".join(lines) + "\n", NODES) == want


ROTATIONS = [  # (order, the names rotated?)
    (NODES, True),
    ([NODES[2], NODES[3], NODES[0], NODES[1]], True),
    ([NODES[3], NODES[0], NODES[1], NODES[2]], True),
    ([NODES[3], NODES[1], NODES[0], NODES[2]], False),  # r0-n0 and r0-n1 swapped
    ([NODES[1], NODES[0], NODES[2], NODES[3]], False),
    ([], False),
]


@pytest.mark.parametrize(("order", "rotated"), ROTATIONS)
def test_rotation_tells_a_swap(order: list[str], rotated: bool) -> None:
    assert rotation(order) is rotated


def test_a_recording_keeps_the_node_list(tmp_path: Path) -> None:
    order = [NODES[3], NODES[1], NODES[0], NODES[2]]
    save(Observed(node_list=order), tmp_path / "a.volcano.json")
    assert load(tmp_path / "a.volcano.json").node_list == order
    text = (tmp_path / "a.volcano.json").read_text()
    assert '"nodeListStart": "vcd-1-10-r1-n1"' in text and '"nodeListRotation": false' in text
    save(Observed(), tmp_path / "b.volcano.json")  # a recording at a lower log level: no list, read as none
    assert "nodeList" not in (tmp_path / "b.volcano.json").read_text()
    assert load(tmp_path / "b.volcano.json").node_list == []


def scores(sub: str, scores: str, t: str = "18:47:17.297733") -> str:
    return f'I1204 {t}    2560 scheduler_helper.go:175] "Prioritize hyperNode score map for subJob" subJob="{sub}" ' \
           f"scoreMap={scores}"


def chosen(sub: str, hn: str, score: float = 750) -> str:
    return (f'I1204 18:47:17.297844    2560 allocate.go:531] "Allocate subJob to hyperNode success" subJob="{sub}" '
            f'hyperNode="{hn}" score={score} newAllocatedHyperNode="{hn}"')


def try_job(job: str, hn: str) -> str:
    return (f'I1204 18:59:28.467045   12158 allocate.go:393] "Try to allocate resource for job in hyperNode" '
            f'job="{job}" hyperNode="{hn}"')


def job_failed(job: str) -> str:
    return f'I1204 18:59:28.467045   12158 allocate.go:429] "Find solution for job fail" job="{job}" gradient=0'


def job_chosen(job: str, hn: str) -> str:
    return (f'I1204 18:59:28.468436   12158 allocate.go:456] "Allocate job to hyperNode success" job="{job}" '
            f'hyperNode="{hn}"')


JOB = "vcp-1-8/j3-c3df8c87-2c0e-475a-9671-db570a157b89"


SUB = "vcp-1-8/j0-de8769a8-7c99-4731-bcb6-5d128bedb195/worker-0"
TIES = [  # (what the log shows, its lines, the draws read for namespace vcp-1-8)
    ("two racks at the best score, s3 drawn",
     [scores(SUB, '{"vcp-1-8-s2":750,"vcp-1-8-s3":750}'), chosen(SUB, "vcp-1-8-s3")],
     [("subJob", "vcp-1-8/j0/worker-0", ("vcp-1-8-s2", "vcp-1-8-s3"), "vcp-1-8-s3")]),
    ("one best: no draw",
     [scores(SUB, '{"vcp-1-8-s2":750,"vcp-1-8-s3":1000}'), chosen(SUB, "vcp-1-8-s3")],
     []),
    ("the same draw in every session counts once, another outcome apart",
     [scores(SUB, '{"vcp-1-8-s2":750,"vcp-1-8-s3":750}'), chosen(SUB, "vcp-1-8-s3"),
      scores(SUB, '{"vcp-1-8-s2":750,"vcp-1-8-s3":750}'), chosen(SUB, "vcp-1-8-s3"),
      scores(SUB, '{"vcp-1-8-s2":750,"vcp-1-8-s3":750}'), chosen(SUB, "vcp-1-8-s2")],
     [("subJob", "vcp-1-8/j0/worker-0", ("vcp-1-8-s2", "vcp-1-8-s3"), "vcp-1-8-s3"),
      ("subJob", "vcp-1-8/j0/worker-0", ("vcp-1-8-s2", "vcp-1-8-s3"), "vcp-1-8-s2")]),
    ("a bare gang's subgroup, three tied",
     [scores("vcp-1-8/g0/grp-s1", '{"vcp-1-8-s0":1000,"vcp-1-8-s1":1000,"vcp-1-8-s2":1000}'),
      chosen("vcp-1-8/g0/grp-s1", "vcp-1-8-s1")],
     [("subJob", "vcp-1-8/g0/grp-s1", ("vcp-1-8-s0", "vcp-1-8-s1", "vcp-1-8-s2"), "vcp-1-8-s1")]),
    ("a job tried in two racks, each its one sub-job at 1000: s3 taken",
     [try_job(JOB, "vcp-1-8-s3"), scores(JOB, '{"vcp-1-8-s3":1000}'), chosen(JOB, "vcp-1-8-s3", 1000),
      try_job(JOB, "vcp-1-8-s2"), scores(JOB, '{"vcp-1-8-s2":1000}'), chosen(JOB, "vcp-1-8-s2", 1000),
      job_chosen(JOB, "vcp-1-8-s3")],
     [("job", "vcp-1-8/j3", ("vcp-1-8-s2", "vcp-1-8-s3"), "vcp-1-8-s3")]),
    ("a job's sub-jobs summed per HyperNode it tried: no tie",
     [try_job(JOB, "vcp-1-8-s0"), chosen(JOB + "/worker-0", "vcp-1-8-r0", 500),
      chosen(JOB + "/worker-1", "vcp-1-8-r1", 500),
      try_job(JOB, "vcp-1-8-s1"), chosen(JOB + "/worker-0", "vcp-1-8-r2", 750), job_chosen(JOB, "vcp-1-8-s0")],
     []),
    ("a gradient that failed is not among the job's candidates",
     [try_job(JOB, "vcp-1-8-r0"), chosen(JOB, "vcp-1-8-r0", 750), job_failed(JOB),
      try_job(JOB, "vcp-1-8-s0"), chosen(JOB, "vcp-1-8-s0", 750), job_chosen(JOB, "vcp-1-8-s0")],
     []),
    ("another namespace's draw is not the case's",
     [scores("vcp-1-80/g0", '{"vcp-1-80-s0":1000,"vcp-1-80-s1":1000}'), chosen("vcp-1-80/g0", "vcp-1-80-s0")],
     []),
]


@pytest.mark.parametrize(("what", "lines", "want"), TIES, ids=[x[0] for x in TIES])
def test_hypernode_ties_are_read_with_the_one_drawn(what: str, lines: list[str], want: list[tuple[str, ...]]) -> None:
    assert hypernode_ties("\n".join(lines), "vcp-1-8") == want


def test_a_shared_log_is_cut_at_each_start() -> None:
    """The cluster's log holds every run of a folder (``$ ARGS`` before each start): a case's is the last run that
    synced its nodes, whatever came after it."""
    other = [f"vcd-1-11-r{r}-n{n}" for r in range(2) for n in range(2)]
    log = "\n".join([START, sync(NODES[0]), sync(NODES[1]), sync(NODES[2]), sync(NODES[3]),  # a first recording
                     START, sync(NODES[2]), sync(NODES[3]), sync(NODES[0]), sync(NODES[1]),  # the case again
                     START, sync(other[1]), sync(other[0])])  # the next case, whose start comes later
    assert node_list(run_of(log, NODES), NODES) == [NODES[2], NODES[3], NODES[0], NODES[1]]
    assert node_list(run_of(log, other), other) == [other[1], other[0]]
    assert run_of(log, ["vcd-1-12-r0-n0"]) == ""


def test_walks_are_read_per_session_each_distinct_once() -> None:
    """Each session's preempt and reclaim walks: per pod the nodes in the order considered, the victim after the
    node it was tried on; a session walking the same way again counts once; another case's lines are not read."""
    ns = "vcd-1-5"

    def line(src: str, text: str) -> str:
        return f"I1204 23:48:29.911676   26881 {src}] {text}"

    session = [line("session.go:279", "Open Session d147 with <11> Job and <5> Queues."),
               line("preempt.go:350", f"Considering Task <{ns}/j0-worker-0> on Node <{ns}-r0-n0>."),
               line("preempt.go:365", f"No validated victims on Node <{ns}-r0-n0>: not enough resources"),
               line("preempt.go:350", f"Considering Task <{ns}/j0-worker-0> on Node <{ns}-r1-n0>."),
               line("preempt.go:394", f"Try to preempt Task <{ns}/r0-1> for Task <{ns}/j0-worker-0>"),
               line("reclaim.go:185", f"Considering Task <{ns}/j2-worker-0> on Node <{ns}-r0-n1>."),
               line("reclaim.go:185", f"Considering Task <{ns}-x3/j2-worker-0> on Node <{ns}-x3-r0-n1>."),  # a repeat
               line("reclaim.go:232", f"Try to reclaim Task <{ns}/r6-0> for Tasks <{ns}/j2-worker-0>")]
    log = "\n".join([*session, *session, line("session.go:279", "Open Session e1 with <11> Job and <5> Queues.")])
    assert walks(log, ns) == [["preempt j0-worker-0: r0-n0 r1-n0 -> r0-1", "reclaim j2-worker-0: r0-n1 -> r6-0"]]
