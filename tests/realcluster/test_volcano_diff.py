"""``optplan place`` against the real vc-scheduler on a few seeded clusters (tests/realcluster/vcdiff.py;
``benchmarks/volcano_diff.py`` runs many). Each case is created with vc-scheduler stopped, snapshotted,
planned by ``optplan place --solver greedy``, then scheduled by Volcano until nothing changes; the
admitted job sets, the victims and the HyperNodes of the topology jobs must be the same.

The cases are ones where the two agree today (docs/benchmarks.md lists where they do not, and why):
seed 1's case 12 (two topology jobs in two HyperNodes, one plain job, a full tier-2 search) and case 21
(hard and soft topology jobs beside running gangs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.realcluster.cluster import Cluster
from tests.realcluster.vcdiff import compare, generate, priority_classes, run_case

pytestmark = pytest.mark.realcluster
CASES = [(1, 12), (1, 21)]


@pytest.mark.parametrize(("seed", "index"), CASES)
def test_optplan_places_as_volcano_does(real_cluster: Cluster, tmp_path: Path, seed: int, index: int) -> None:
    real_cluster.apply(priority_classes())
    case = generate(seed, index)
    obs = run_case(real_cluster, case, tmp_path, solvers=("greedy",))
    assert obs.snapshot_error == ""
    v = compare(case, obs, "greedy")
    assert v.error == "", v.error
    assert v.allocate is True, v.details
    assert v.preempt is not False and v.reclaim is not False, v.details
    assert v.topology and all(v.topology), v.details
    # the cluster is left as it was: the case's nodes are gone, vc-scheduler runs again
    names = {n["metadata"]["name"] for n in real_cluster.kubectl_json("get", "nodes")["items"]}
    assert not names & {n["metadata"]["name"] for n in case.nodes}
    assert "vc-scheduler" in real_cluster.alive()
