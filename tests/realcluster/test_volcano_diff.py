"""``optplan place`` against the real vc-scheduler on a few seeded clusters (tests/realcluster/vcdiff.py;
``benchmarks/volcano_diff.py`` runs many). Each case is created with vc-scheduler stopped, snapshotted,
planned by ``optplan place --solver greedy --victim-tiers``, then scheduled by Volcano until nothing
changes; the admitted job sets, the victims, the HyperNodes of the topology jobs and the pods each partly
running gang gets must be the same.

The cases are ones where the two agree today (docs/benchmarks.md lists where they do not, and why), each
with one node order only (no tie Volcano breaks at random): seed 1's case 12 (two topology jobs in two
HyperNodes, one plain job, a full tier-2 search), case 13 (a critical job preempts a spot pod of a gang
at minMember: the gang plugin offers nothing, drf does, on the one node where it offers any) and case 39
(a partly running gang under a hard topology: its pending pod stays in the rack of its running ones). Two
partitioned cases (``generate_partitioned``): seed 1's case 2 (three jobs, partitions under hard tier-1 and
tier-2 and soft topologies, beside job-level ones), case 27 (a partitioned job reclaims two pods of another
queue on one node, and the next cycle places its partition) and case 40 (two partitions of one job in two
racks, a one-pod partition under a soft job topology, a third job left pending; 5 recordings of 5 agree).
Case 30 was one of them until CI met its tie: two racks with the same score, which vc-scheduler breaks at
random (it chose the other in 1 recording of 5); a case joins only after several recordings all agree.
Two bare-PodGroup cases (``generate_podgroups``: PodGroups and pods created without a VCJob): seed 1's case
20 (a partly running gang under a hard topology beside a gang of two tasks with minTaskMember and a subgrouped
one) and case 36 (three subgroups under hard tier 1, each placed whole); case 39 agreed as steadily and is left
out for time. Two cases of ``generate_more`` (a tenant parent's guarantee, a task template of preemptionPolicy Never,
a running gang's workers beside its pending critical lead, two partly running gangs): seed 1's cases 0 and 1 (every
kind, the second under a HyperNode tree; nothing evicted by either side: the Never job may not preempt, the lead's
job is not starving). Two hand-made cases (``never_case``): a task template of preemptionPolicy Never beside a task
that may preempt — Volcano passes over the Never pod though a node has room for it. Case 13 once more
with vc-scheduler at log level 5: the recording keeps the node list it
began with."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.realcluster.cluster import Cluster, optplan
from tests.realcluster.vcdiff import (
    Case,
    Verdict,
    compare,
    dropped_case,
    generate,
    generate_more,
    generate_partitioned,
    generate_podgroups,
    never_case,
    priority_classes,
    remade_case,
    renamed,
    run_case,
)

pytestmark = pytest.mark.realcluster
CASES = [(1, 12), (1, 13), (1, 39)]
PARTITION_CASES = [(1, 2, True), (1, 27, False), (1, 40, True)]  # generate_partitioned's; victims steady?
PODGROUP_CASES = [(1, 20), (1, 36)]  # generate_podgroups's: bare PodGroups, each agreeing in 5 recordings
MORE_CASES = [(1, 0), (1, 1)]  # generate_more's
"""Case 27 is a partitioned job's reclaim: vc-scheduler's victims (and so the partition's rack) vary between
runs with its node list, random per start (docs/benchmarks.md), so only its admissions and that reclaim
happened are compared."""
JOB: dict[str, Any] = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
       "spec": {"schedulerName": "volcano", "minAvailable": 1, "tasks": [{"name": "w", "replicas": 1, "template": {
           "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "x:1", "resources": {
               "requests": {"nvidia.com/gpu": "2"}, "limits": {"nvidia.com/gpu": "2"}}}]}}}]}}


def _verdict(cluster: Cluster, tmp_path: Path, case: Case) -> Verdict:
    """The case run on the real scheduler and planned by the greedy: its verdict, with no error and the same
    admitted jobs."""
    cluster.apply(priority_classes())
    obs = run_case(cluster, case, tmp_path, solvers=("greedy",))
    assert obs.snapshot_error == ""
    v = compare(case, obs, "greedy")
    assert v.error == "", v.error
    assert v.allocate is True, v.details
    return v


@pytest.mark.parametrize(("seed", "index"), CASES)
def test_optplan_places_as_volcano_does(real_cluster: Cluster, tmp_path: Path, seed: int, index: int) -> None:
    case = generate(seed, index)
    v = _verdict(real_cluster, tmp_path, case)
    assert v.preempt is not False and v.reclaim is not False, v.details
    assert all(v.topology) and all(v.partial), v.details
    assert v.topology or v.preempt, v.details  # each case has something beyond the admitted set
    # the cluster is left as it was: the case's nodes are gone, vc-scheduler runs again
    names = {n["metadata"]["name"] for n in real_cluster.kubectl_json("get", "nodes")["items"]}
    assert not names & {n["metadata"]["name"] for n in case.nodes}
    assert "vc-scheduler" in real_cluster.alive()


@pytest.mark.parametrize(("seed", "index", "steady"), PARTITION_CASES)
def test_partitioned_jobs_are_placed_as_volcano_does(real_cluster: Cluster, tmp_path: Path, seed: int,
                                                     index: int, steady: bool) -> None:
    """VCJobs with a ``partitionPolicy``: the same jobs admitted, each partition in the same HyperNode."""
    v = _verdict(real_cluster, tmp_path, generate_partitioned(seed, index))
    assert v.partitions, v.details  # each case has partitions both place
    if steady:
        assert v.preempt is not False and v.reclaim is not False, v.details
        assert all(v.partitions) and all(v.topology), v.details
    else:  # both reclaimed for the partitioned job (which victims: Volcano's node order)
        sides = v.details.get("reclaim", {})
        assert v.reclaim is True or (v.reclaim is False and sides["optplan"] and sides["volcano"]), v.details


@pytest.mark.parametrize(("seed", "index"), PODGROUP_CASES)
def test_bare_podgroups_are_placed_as_volcano_does(real_cluster: Cluster, tmp_path: Path, seed: int,
                                                   index: int) -> None:
    """PodGroups and their pods created directly (no VCJob): the same gangs admitted, each subgroup in the same
    HyperNode, as many more pods for a partly running gang, the same HyperNode for a topology gang."""
    v = _verdict(real_cluster, tmp_path, generate_podgroups(seed, index))
    assert v.preempt is not False and v.reclaim is not False, v.details
    assert all(v.partitions) and all(v.partial) and all(v.topology), v.details
    assert v.partitions or v.partial, v.details  # each case has subgroups or a partly running bare gang


@pytest.mark.parametrize(("seed", "index"), MORE_CASES)
def test_guarantees_never_and_two_partly_running_gangs_as_volcano_does(real_cluster: Cluster, tmp_path: Path,
                                                                      seed: int, index: int) -> None:
    """``generate_more``'s cases: the same jobs admitted, no victims on either side, as many more pods for each of
    the two partly running gangs (one of them a job whose pending ``lead`` of critical-job may not take its own
    workers)."""
    case = generate_more(seed, index)
    assert {"never", "own", "partial2", "guarantee"} <= set(case.kinds)
    v = _verdict(real_cluster, tmp_path, case)
    assert v.preempt is None and v.reclaim is None, v.details
    assert len(v.partial) == 2 and all(v.partial) and all(v.topology), v.details


@pytest.mark.parametrize("beyond", [False, True])
def test_preempt_passes_over_a_never_task_as_volcano_does(real_cluster: Cluster, tmp_path: Path,
                                                          beyond: bool) -> None:
    """A task template of preemptionPolicy Never beside a task that may preempt (``vcdiff.never_case``):
    vc-scheduler passes over the Never pod though a node has room for it, so a gang that needs it evicts
    nothing; one whose other pods make it evicts for them and places the Never pod beyond the gang. The
    greedy does the same (it pipelined the Never pod on the free node, and evicted, before)."""
    case = never_case(f"vcd-never-{int(beyond)}", beyond)
    v = _verdict(real_cluster, tmp_path, case)
    assert v.preempt is (True if beyond else None), v.details
    assert v.reclaim is None, v.details


@pytest.mark.parametrize(("deserved", "taken"), [(0, True), (8, False)], ids=["above-deserved", "within-deserved"])
def test_reclaim_takes_a_running_vcjobs_pod_at_min_available_as_volcano_does(real_cluster: Cluster, tmp_path: Path,
                                                                             deserved: int, taken: bool) -> None:
    """A running VCJob's pod at minAvailable (``vcdiff.remade_case``): above its queue's deserved vc-scheduler's
    reclaim takes it by the second tier and the job controller makes it again, pending; within, nothing moves.
    The greedy agrees on the admitted jobs, the victims and the gang's running pods (it kept such a pod out of
    reach before: it left ``j`` waiting)."""
    case = remade_case(f"vcd-remade-{deserved}", deserved)
    v = _verdict(real_cluster, tmp_path, case)
    assert v.reclaim is (True if taken else None), v.details
    assert v.partial == [True], v.details
    assert v.details.get("reclaim", {}).get("volcano", []) == (["g-worker-0"] if taken else []), v.details


@pytest.mark.parametrize(("deserved", "taken"), [(0, True), (8, False)], ids=["above-deserved", "within-deserved"])
def test_reclaim_takes_a_bare_gangs_pod_it_may_be_ready_without_as_volcano_does(real_cluster: Cluster,
                                                                               tmp_path: Path, deserved: int,
                                                                               taken: bool) -> None:
    """A bare PodGroup's running pod at minMember whose other pod could still make it ready
    (``vcdiff.dropped_case``): above its queue's deserved vc-scheduler's reclaim takes it by the second tier and
    nothing makes it again; within, nothing moves. The greedy agrees (it kept such a pod out of reach before)."""
    case = dropped_case(f"vcd-dropped-{deserved}", deserved)
    v = _verdict(real_cluster, tmp_path, case)
    assert v.reclaim is (True if taken else None), v.details
    assert v.partial == [True], v.details
    assert v.details.get("reclaim", {}).get("volcano", []) == (["g-0"] if taken else []), v.details


def test_the_recording_keeps_the_node_list_volcano_began_with(real_cluster: Cluster, tmp_path: Path) -> None:
    """With vc-scheduler at log level 5, a recording keeps the node list it began the case with (its log from
    that start on): each of the case's nodes once, the first one stored as where the list starts."""
    c = real_cluster
    plain = c.scheduler_args
    c.scheduler_args = lambda: [a if not a.startswith("-v=") else "-v=5" for a in plain()]  # type: ignore[method-assign]
    case = renamed(generate(1, 13), "vcd-1-13-v5")
    try:
        c.apply(priority_classes())
        obs = run_case(c, case, tmp_path, solvers=())
    finally:
        c.scheduler_args = plain  # type: ignore[method-assign]
        c.stop_scheduler()
        c.start_scheduler()
    assert sorted(obs.node_list) == sorted(n["metadata"]["name"] for n in case.nodes)
    saved = json.loads((tmp_path / f"{case.ns}.volcano.json").read_text())
    assert saved["nodeList"] == obs.node_list and saved["nodeListStart"] == obs.node_list[0]


def test_a_deserved_naming_a_resource_no_node_has_is_scheduled_and_planned(real_cluster: Cluster,
                                                                           tmp_path: Path) -> None:
    """Volcano schedules a job of a queue whose deserved names a resource no node has; optplan place warns
    and admits it the same way (it refused the snapshot before)."""
    c = real_cluster
    ns, q, n = "vcd-fpga", "vcd-fpga-q", "vcd-fpga-n0"
    c.add_node(n, gpus=8)
    c.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
             {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": q},
              "spec": {"parent": "root", "deserved": {"nvidia.com/gpu": 8, "example.com/fpga": 2}}}])
    c.wait_for("the queue Open", lambda: c.kubectl_json("get", "queue", q).get("status", {}).get("state") == "Open")
    c.apply([{**JOB, "metadata": {"name": "j", "namespace": ns}, "spec": {**JOB["spec"], "queue": q}}])
    try:
        c.wait_for("Volcano binds the job's pod", lambda: any(  # on n, or another node a test left with room
            p["spec"].get("nodeName") for p in c.kubectl_json("get", "pods", "-n", ns)["items"]))
        c.stop_scheduler()  # a second job, pending while optplan plans it
        c.apply([{**JOB, "metadata": {"name": "k", "namespace": ns}, "spec": {**JOB["spec"], "queue": q}}])
        c.wait_for("the second job's PodGroup", lambda: len(c.kubectl_json("get", "podgroups", "-n", ns)["items"]) == 2)
        snap = tmp_path / "snap.yaml"
        res = optplan("snapshot", "--kubeconfig", str(c.kubeconfig), "-o", str(snap))
        assert res.returncode == 0, res.stderr
        res = optplan("place", str(snap), "--solver", "greedy", "-o", "json")
        assert res.returncode == 0, res.stderr
        assert f"Queue/{q}: spec.deserved.example.com/fpga: no node has example.com/fpga" in res.stderr
        [job] = [j for j in json.loads(res.stdout)["jobs"] if j["namespace"] == ns]
        # admitted, on a node with room (other tests of the session may have left GPU nodes beside n)
        assert job["name"] == "k" and job["admitted"] and len(job["bindings"]) == 1
    finally:
        c.start_scheduler()
        c.kubectl("delete", "namespace", ns, "--wait=true", "--timeout=120s", check=False)
        c.kubectl("delete", "queue", q, check=False)
        c.kubectl("delete", "node", n, check=False)
