"""A PodGroup's ``subGroupPolicy`` (Volcano's SubGroupPolicySpec, as the job controller writes it for a partitioned
task): which pods are in a subgroup (labelSelector, then every matchLabelKeys value non-empty), the tier names
resolved, and Repack leaving a pod of a hard-topology subgroup where it is (``podgroup-subgroup-topology``)
while the same pod without one moves."""

from __future__ import annotations

from typing import Any

import pytest

from optplan.errors import InputError
from optplan.models.repack import PodMove, RepackPlan
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.repack.rules import SUBGROUP_TOPOLOGY, RepackProblem
from optplan.solvers.repack.run import plan_repack
from optplan.solvers.repack.validate import plan_violations
from tests.builders import hypernode, load, load_with_run, node, pod, podgroup, repack_run

OPTS = PlanOptions(time_limit=10)
PARTITION = "volcano.sh/partition-id"


def racks() -> list[dict[str, Any]]:
    objs = [node(f"n{i}", 8) for i in range(4)]
    for name, members in (("r0", ["n0", "n1"]), ("r1", ["n2", "n3"])):
        h = hypernode(name, 1, members)
        h["spec"]["tierName"] = "rack"
        objs.append(h)
    return objs


def grouped(policy: dict[str, Any] | None) -> list[dict[str, Any]]:
    """PodGroup ``train`` (two 2-GPU pods of partition 0 on n0 and n1) and a 4-GPU pod on n3: Repack would
    move n3's pod or the partition's pods to free a node."""
    pg = podgroup("train", 1)
    if policy is not None:
        pg["spec"]["subGroupPolicy"] = [policy]
    return [*racks(), pg,
            *(pod(f"t{i}", f"n{i}", 2, group="train", labels={"volcano.sh/task-spec": "w", PARTITION: "0"})
              for i in range(2)),
            podgroup("other", 1), pod("o", "n3", 4, group="other"), repack_run()]


HARD = {"name": "w", "subGroupSize": 2, "minSubGroups": 1,
        "labelSelector": {"matchLabels": {"volcano.sh/task-spec": "w"}},
        "matchLabelKeys": [PARTITION], "networkTopology": {"mode": "hard", "highestTierName": "rack"}}

# policy, whether t0 is pinned by its subgroup
CASES: list[tuple[str, dict[str, Any] | None, bool]] = [
    ("hard subgroup", HARD, True),
    ("soft subgroup", {**HARD, "networkTopology": {"mode": "soft"}}, False),
    ("no matchLabelKeys: the default group", {**HARD, "matchLabelKeys": []}, False),
    ("selector does not match", {**HARD, "labelSelector": {"matchLabels": {"volcano.sh/task-spec": "ps"}}}, False),
    ("no policy", None, False),
]


@pytest.mark.parametrize(("what", "policy", "pinned"), CASES, ids=[c[0] for c in CASES])
def test_hard_subgroup_pods_stay(what: str, policy: dict[str, Any] | None, pinned: bool) -> None:
    loaded, run = load_with_run(*grouped(policy))
    p = RepackProblem(loaded.snapshot, run)
    t0 = loaded.snapshot.pods["default/t0"]
    assert (p.pod_block(t0) == SUBGROUP_TOPOLOGY) is pinned
    if pinned:  # the validator refuses the move
        plan = RepackPlan.build([PodMove(pod="default/t0", from_node="n0", to_node="n3")], [])
        assert any("t0" in v for v in plan_violations(p, plan))
    out = plan_repack(loaded.snapshot, run, solver="greedy", options=OPTS)
    moved = {m.pod_group_name for m in out.status.plan.moves}
    assert ("train" not in moved) if pinned else True
    assert (out.result.rejections.get(SUBGROUP_TOPOLOGY) == 2) is pinned


def test_subgroup_tier_name_resolves_and_a_bad_one_is_one_line() -> None:
    s = load(*grouped(HARD)).snapshot
    [sp] = s.pod_groups["default/train"].sub_group_policy
    assert sp.network_topology is not None and sp.network_topology.highest_tier_allowed == 1
    assert sp.sub_group_size == 2 and sp.min_sub_groups == 1 and sp.match_label_keys == (PARTITION,)
    bad = {**HARD, "networkTopology": {"mode": "hard", "highestTierName": "row"}}
    with pytest.raises(InputError) as e:
        load(*grouped(bad))
    assert "spec.subGroupPolicy[0].networkTopology.highestTierName: no HyperNode has tierName row" in str(e.value)
