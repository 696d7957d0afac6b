"""Network topology (HyperNodes): hard PodGroups stay inside one HyperNode of allowed tier, soft ones
pay per tier they widen. Same rule in the greedy, CP-SAT, the MILP twin and the validator."""

from __future__ import annotations

from typing import Any

import pytest

from optplan.errors import InputError
from optplan.models.repack import PodMove, RepackPlan
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.repack.rules import RepackProblem
from optplan.solvers.repack.run import plan_repack
from optplan.solvers.repack.validate import plan_violations
from tests.builders import load, load_with_run, node, pod, podgroup, repack_run

OPTS = PlanOptions(time_limit=10)


def hypernode(name: str, tier: int, members: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
            "spec": {"tier": tier, "members": members}}


def exact(name: str, kind: str = "Node") -> dict[str, Any]:
    return {"type": kind, "selector": {"exactMatch": {"name": name}}}


FABRIC = [
    hypernode("s0", 1, [exact("n0"), exact("n1")]),
    hypernode("s1", 1, [{"type": "Node", "selector": {"regexMatch": {"pattern": "n[23]"}}}]),
    hypernode("spine", 2, [exact("s0", "HyperNode"), exact("s1", "HyperNode")]),
]


def test_hypernodes_resolve_exact_regex_label_and_nested() -> None:
    objs = [node(f"n{i}", labels={"rack": "r9"} if i == 4 else {}) for i in range(5)]
    objs += [*FABRIC, hypernode("rack9", 1, [{"type": "Node", "selector": {"labelMatch": {
        "matchLabels": {"rack": "r9"}}}}])]
    topo = load(*objs).snapshot.topology
    assert topo.members["s0"] == {"n0", "n1"}
    assert topo.members["s1"] == {"n2", "n3"}
    assert topo.members["spine"] == {"n0", "n1", "n2", "n3"}
    assert topo.members["rack9"] == {"n4"}
    assert topo.lowest_tier({"n0", "n1"}) == 1
    assert topo.lowest_tier({"n0", "n2"}) == 2
    assert topo.lowest_tier({"n0", "n4"}) == 3  # only the virtual root encloses both
    assert topo.enclosing({"n1"}, 1) == ["s0"]


@pytest.mark.parametrize(("member", "field"), [
    ({"type": "Node", "selector": {"exactMatch": {"name": "a"}, "regexMatch": {"pattern": "b"}}}, "selector"),
    ({"type": "HyperNode", "selector": {"regexMatch": {"pattern": "s.*"}}}, "selector"),
    ({"type": "Node", "selector": {"regexMatch": {"pattern": "n[0"}}}, "regexMatch.pattern"),
    ({"type": "Rack", "selector": {"exactMatch": {"name": "a"}}}, "type"),
])
def test_bad_hypernodes_are_input_errors(member: dict[str, Any], field: str) -> None:
    with pytest.raises(InputError) as e:
        load(hypernode("bad", 1, [member]))
    assert "HyperNode/bad" in str(e.value) and field in str(e.value)


def _cluster(mode: str | None, tier: int | None = 1, *, extra: list[dict[str, Any]] | None = None) -> tuple[Any, Any]:
    """train has a pod on n0 (to vacate) and one on n1 (full, stays); n2 has room, outside s0."""
    nt = None if mode is None else {"mode": mode, "highestTierAllowed": tier}
    objs = [node("n0"), node("n1"), node("n2"), node("n3"), *FABRIC,
            podgroup("train", 1, network_topology=nt), podgroup("keep", 1, labels={"protected": "true"}),
            pod("t0", "n0", 4, group="train"), pod("t1", "n1", 1, group="train"),
            pod("k1", "n1", 7, group="keep"), pod("k2", "n2", 4, group="keep"), pod("k3", "n3", 8, group="keep")]
    objs += extra or []
    objs.append(repack_run(scope={"podGroups": {"exclude": {"selector": {"matchLabels": {"protected": "true"}}}}}))
    return load_with_run(*objs)


@pytest.mark.parametrize("solver", ["greedy", "cpsat", "milp", "auto"])
def test_hard_topology_keeps_the_gang_in_its_hypernode(solver: str) -> None:
    loaded, run = _cluster(None)
    assert plan_repack(loaded.snapshot, run, solver=solver, options=OPTS).status.plan.freed_nodes == ("n0",)
    loaded, run = _cluster("hard", 1)  # n2 is outside s0: t0 cannot move
    out = plan_repack(loaded.snapshot, run, solver=solver, options=OPTS)
    assert out.status.plan.freed_nodes == ()
    loaded, run = _cluster("hard", 2)  # the spine allows n2
    out = plan_repack(loaded.snapshot, run, solver=solver, options=OPTS)
    assert out.status.plan.freed_nodes == ("n0",)
    assert out.result.disruption.topology_widening == 0


@pytest.mark.parametrize("solver", ["greedy", "cpsat", "milp"])
def test_soft_topology_moves_but_pays_for_widening(solver: str) -> None:
    loaded, run = _cluster("soft")
    out = plan_repack(loaded.snapshot, run, solver=solver, options=OPTS)
    assert out.status.plan.freed_nodes == ("n0",)
    assert out.result.disruption.topology_widening == 1  # s0 (tier 1) -> spine (tier 2)


@pytest.mark.parametrize("solver", ["greedy", "cpsat", "milp"])
def test_soft_topology_prefers_the_move_that_does_not_widen(solver: str) -> None:
    """n4 (in s1) holds a plain workload that can go to n2; vacating n0 instead would widen train
    from s0 to the spine. With one PodGroup allowed, the plan picks n4: same cards, no widening."""
    objs = [node("n0"), node("n1"), node("n2"), node("n3"), node("n4"),
            hypernode("s0", 1, [exact("n0"), exact("n1")]),
            hypernode("s1", 1, [exact("n2"), exact("n3"), exact("n4")]),
            hypernode("spine", 2, [exact("s0", "HyperNode"), exact("s1", "HyperNode")]),
            podgroup("train", 1, network_topology={"mode": "soft"}),
            podgroup("plain", 1), podgroup("keep", 1, labels={"protected": "true"}),
            pod("t0", "n0", 4, group="train"), pod("t1", "n1", 1, group="train"),
            pod("p0", "n4", 4, group="plain"), pod("p1", "n3", 0, group="plain"),
            pod("k1", "n1", 7, group="keep"), pod("k2", "n2", 4, group="keep"), pod("k3", "n3", 8, group="keep"),
            repack_run(scope={"podGroups": {"exclude": {"selector": {"matchLabels": {"protected": "true"}}}}},
                       max_per_run={"podGroups": 1})]
    loaded, run = load_with_run(*objs)
    out = plan_repack(loaded.snapshot, run, solver=solver, options=OPTS)
    assert out.status.plan.freed_nodes == ("n4",)
    assert out.result.disruption.topology_widening == 0


def test_validator_rejects_a_move_out_of_the_hypernode() -> None:
    loaded, run = _cluster("hard", 1)
    p = RepackProblem(loaded.snapshot, run)
    plan = RepackPlan.build([PodMove(pod="default/t0", from_node="n0", to_node="n2")], ["n0"])
    assert any("leaves every HyperNode" in v for v in plan_violations(p, plan))


def test_hard_group_already_outside_its_tier_does_not_move() -> None:
    """A hard group that already spans two tier-1 HyperNodes is left alone (it cannot be made worse)."""
    objs = [node("n0"), node("n1"), node("n2"), node("n3"), *FABRIC,
            podgroup("train", 1, network_topology={"mode": "hard", "highestTierAllowed": 1}),
            pod("t0", "n0", 4, group="train"), pod("t1", "n2", 1, group="train"),
            podgroup("keep", 1, labels={"protected": "true"}), pod("k1", "n1", 4, group="keep"),
            repack_run(scope={"podGroups": {"exclude": {"selector": {"matchLabels": {"protected": "true"}}}}})]
    loaded, run = load_with_run(*objs)
    out = plan_repack(loaded.snapshot, run)
    assert out.status.plan.freed_nodes == ()
    assert out.result.rejections.get("podgroup-topology-unsatisfied") == 2
