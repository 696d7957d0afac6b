"""validate_plan re-checks every Repack rule on its own. Take the greedy plan for a small cluster (valid),
break one rule at a time by rebuilding the plan, and expect the validator to name the broken rule."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from optplan.errors import PlanInvalidError
from optplan.models.repack import PodMove, RepackPlan
from optplan.solvers.repack import checks
from optplan.solvers.repack.checks import Violation
from optplan.solvers.repack.rules import Disruption, RepackProblem
from optplan.solvers.repack.run import plan_repack
from optplan.solvers.repack.validate import plan_violations, validate_plan
from tests.builders import hypernode, load_with_run, node, pdb, pod, podgroup, repack_run

APP = {"app": "svc"}
FOREIGN = "default-scheduler"

# n0 (4 cards free) and nr (1 card free) receive; n1, n2, n3 each hold one movable 1-card pod of its own
# PodGroup, all three covered by a PDB allowing 2; nt (tainted) and nc (cordoned) hold a pod of another
# scheduler; ni provides cards but none is in use. The run allows 2 PodGroups, 2 cards and 2 cpu.
MAX_PER_RUN = {"podGroups": 2, "resources": {"nvidia.com/gpu": "2", "cpu": "2"}}
LOADED, RUN = load_with_run(
    node("n0", 8), pod("resident", "n0", 4, scheduler=FOREIGN),
    node("n1", 8), pod("a", "n1", 1, group="pg-a", labels=APP),
    node("n2", 8), pod("b", "n2", 1, group="pg-b", labels=APP),
    node("n3", 8), pod("c", "n3", 1, group="pg-c", labels=APP),
    node("nr", 8), pod("filler", "nr", 7, scheduler=FOREIGN),
    node("nt", 8, taints=[{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]),
    pod("tainted", "nt", 1, scheduler=FOREIGN),
    node("nc", 8, unschedulable=True), pod("cordoned", "nc", 1, scheduler=FOREIGN),
    node("ni", 8),
    podgroup("pg-a"), podgroup("pg-b"), podgroup("pg-c"), pdb("svc", APP, 2),
    repack_run(max_per_run=MAX_PER_RUN))
SNAP = LOADED.snapshot


def mv(pod_name: str, src: str, dst: str) -> PodMove:
    return PodMove(pod=f"default/{pod_name}", from_node=src, to_node=dst)


@pytest.fixture(scope="module")
def base() -> tuple[RepackPlan, Disruption]:
    out = plan_repack(SNAP, RUN)
    return out.result.plan, out.result.disruption


def test_the_greedy_plan_is_valid(base: tuple[RepackPlan, Disruption]) -> None:
    plan, claimed = base
    assert plan == RepackPlan.build([mv("a", "n1", "nr"), mv("b", "n2", "n0")], ["n1", "n2"])
    assert plan_violations(RepackProblem(SNAP, RUN), plan, claimed=claimed) == []
    validate_plan(SNAP, RUN, plan, claimed=claimed)


@pytest.mark.parametrize("plan", [
    RepackPlan.build([mv("a", "n1", "n0"), mv("b", "n2", "n0")], ["n1", "n2"]),
    RepackPlan.build([mv("a", "n1", "nr"), mv("c", "n3", "n0")], ["n1", "n3"]),
    RepackPlan.build([mv("c", "n3", "nr")], ["n3"]),
    RepackPlan.build([], []),
])
def test_other_valid_plans_pass(plan: RepackPlan) -> None:
    assert plan_violations(RepackProblem(SNAP, RUN), plan) == []


Mutation = Callable[[list[PodMove], list[str]], None]


def retarget(pod_name: str, dst: str) -> Mutation:
    def f(moves: list[PodMove], freed: list[str]) -> None:
        i = next(i for i, m in enumerate(moves) if m.pod == f"default/{pod_name}")
        moves[i] = PodMove(pod=moves[i].pod, from_node=moves[i].from_node, to_node=dst)
    return f


def add(move: PodMove | None = None, freed_node: str | None = None) -> Mutation:
    def f(moves: list[PodMove], freed: list[str]) -> None:
        if move is not None:
            moves.append(move)
        if freed_node is not None:
            freed.append(freed_node)
    return f


FREE_N3_TOO = add(mv("c", "n3", "n0"), "n3")

BROKEN: list[tuple[str, Mutation, str]] = [
    # receivers
    ("move to a vacated node", retarget("a", "n2"), "moves to n2, a vacated node"),
    ("move to a tainted node", retarget("a", "nt"), "cannot run on nt: taint dedicated=x:NoSchedule"),
    ("move to a cordoned node", retarget("a", "nc"), "cannot run on nc: node is unschedulable"),
    ("move to an R-idle provider", retarget("a", "ni"), "moves to ni, whose nvidia.com/gpu is entirely idle"),
    ("move to its own node", retarget("a", "n1"), "moves to the node it is on"),
    ("move to an unknown node", retarget("a", "nowhere"), "moves to unknown node nowhere"),
    # cumulative fit: a and b each fit nr's one free card, not both
    ("exceed capacity cumulatively", retarget("b", "nr"), "does not fit on nr: insufficient nvidia.com/gpu"),
    # movability and freed nodes
    ("move an unmovable pod", add(mv("tainted", "nt", "n0"), "nt"),
     "default/tainted is not movable: pod-not-scheduled-by-volcano"),
    ("leave an R pod on a freed node", add(freed_node="n3"), "freed node n3 still holds nvidia.com/gpu pods"),
    ("move a pod off a non-freed node", add(mv("c", "n3", "n0")), "moves off n3, which is not vacated"),
    ("free a node outside the providers", add(freed_node="ni"), "freed node ni is not an occupied provider"),
    ("list a freed node twice", add(freed_node="n1"), "listed twice"),
    ("move a pod twice", add(mv("a", "n1", "n0")), "moves twice"),
    ("move an unknown pod", add(mv("ghost", "n1", "n0")), "unknown pod default/ghost"),
    ("move a pod from the wrong node", add(mv("c", "n2", "n0"), "n3"), "is not running on n2"),
    # budgets and PDBs: freeing n3 as well moves a third pod, PodGroup, card and cpu
    ("exceed maxPerRun.podGroups", FREE_N3_TOO, "maxPerRun.podGroups 2 exceeded: 3 PodGroups"),
    ("exceed maxPerRun.resources[R]", FREE_N3_TOO, "maxPerRun.resources[nvidia.com/gpu] exceeded"),
    ("exceed maxPerRun.resources[cpu]", FREE_N3_TOO, "maxPerRun.resources[cpu] exceeded"),
    ("exceed a PDB", FREE_N3_TOO, "PodDisruptionBudget default/svc allows 2 disruptions, plan moves 3"),
]


@pytest.mark.parametrize(("case", "mutate", "expected"), BROKEN, ids=[c[0] for c in BROKEN])
def test_broken_rule_is_reported(base: tuple[RepackPlan, Disruption], case: str, mutate: Mutation,
                                 expected: str) -> None:
    plan, _ = base
    moves, freed = list(plan.moves), list(plan.freed_nodes)
    mutate(moves, freed)
    broken = RepackPlan(moves=tuple(moves), freed_nodes=tuple(freed))
    violations = plan_violations(RepackProblem(SNAP, RUN), broken)
    assert any(expected in v for v in violations), violations
    with pytest.raises(PlanInvalidError) as err:
        validate_plan(SNAP, RUN, broken)
    assert any(expected in v for v in err.value.violations)


@pytest.mark.parametrize("field", ["affected_pod_groups", "below_min_available", "affected_cards",
                                   "moved_cards", "moved_pods"])
def test_wrong_claimed_disruption(base: tuple[RepackPlan, Disruption], field: str) -> None:
    plan, claimed = base
    wrong = replace(claimed, **{field: getattr(claimed, field) + 1})
    violations = plan_violations(RepackProblem(SNAP, RUN), plan, claimed=wrong)
    assert len(violations) == 1 and "claimed disruption" in violations[0]
    with pytest.raises(PlanInvalidError, match="claimed disruption"):
        validate_plan(SNAP, RUN, plan, claimed=wrong)


def test_scope_is_rechecked(base: tuple[RepackPlan, Disruption]) -> None:
    """The greedy plan under a run that excludes PodGroup pg-a and node n2 breaks both scopes."""
    plan, _ = base
    _, scoped = load_with_run(repack_run(max_per_run=MAX_PER_RUN, scope={
        "podGroups": {"exclude": {"names": ["default/pg-a"]}}, "nodes": {"exclude": {"names": ["n2"]}}}))
    violations = plan_violations(RepackProblem(SNAP, scoped), plan)
    assert any("default/a is not movable: podgroup-out-of-scope" in v for v in violations), violations
    assert any("freed node n2 is outside scope.nodes" in v for v in violations), violations
    assert plan_violations(RepackProblem(SNAP, RUN), plan) == []


# ---- one check per rule family (``checks``): each refuses a plan breaking its rule, accepts a good one ----

FAMILY: list[tuple[str, Callable[[RepackProblem, RepackPlan], list[Violation]], Mutation, str]] = [
    ("plan shape: unknown pod", checks.check_plan_shape, add(mv("ghost", "n1", "n0")), "unknown pod default/ghost"),
    ("plan shape: moves twice", checks.check_plan_shape, add(mv("a", "n1", "n0")), "moves twice"),
    ("plan shape: wrong node", checks.check_plan_shape, add(mv("c", "n2", "n0"), "n3"), "is not running on n2"),
    ("plan shape: unknown receiver", checks.check_plan_shape, retarget("a", "nowhere"), "unknown node nowhere"),
    ("plan shape: freed twice", checks.check_plan_shape, add(freed_node="n1"), "listed twice"),
    ("movability", checks.check_movability, add(mv("tainted", "nt", "n0"), "nt"),
     "not movable: pod-not-scheduled-by-volcano"),
    ("goal: not vacated", checks.check_goal, add(mv("c", "n3", "n0")), "moves off n3, which is not vacated"),
    ("goal: pods left", checks.check_goal, add(freed_node="n3"), "freed node n3 still holds"),
    ("goal: not occupied", checks.check_goal, add(freed_node="ni"), "freed node ni is not an occupied provider"),
    ("goal: to a vacated node", checks.check_goal, retarget("a", "n2"), "moves to n2, a vacated node"),
    ("goal: to an idle provider", checks.check_goal, retarget("a", "ni"), "whose nvidia.com/gpu is entirely idle"),
    ("goal: to its own node", checks.check_goal, retarget("a", "n1"), "moves to the node it is on"),
    ("predicates: taint", checks.check_predicates, retarget("a", "nt"), "cannot run on nt: taint dedicated"),
    ("predicates: cordoned", checks.check_predicates, retarget("a", "nc"), "cannot run on nc: node is unschedulable"),
    ("fit", checks.check_fit, retarget("b", "nr"), "does not fit on nr: insufficient nvidia.com/gpu"),
    ("budgets: podGroups", checks.check_budgets, FREE_N3_TOO, "maxPerRun.podGroups 2 exceeded"),
    ("budgets: resources", checks.check_budgets, FREE_N3_TOO, "maxPerRun.resources[cpu] exceeded"),
    ("PDBs", checks.check_pdbs, FREE_N3_TOO, "PodDisruptionBudget default/svc allows 2 disruptions, plan moves 3"),
]


@pytest.mark.parametrize(("case", "check", "mutate", "expected"), FAMILY, ids=[c[0] for c in FAMILY])
def test_each_family_check_refuses_its_broken_rule(base: tuple[RepackPlan, Disruption], case: str,
                                                   check: Callable[[RepackProblem, RepackPlan], list[Violation]],
                                                   mutate: Mutation, expected: str) -> None:
    plan, _ = base
    problem = RepackProblem(SNAP, RUN)
    assert check(problem, plan) == []
    moves, freed = list(plan.moves), list(plan.freed_nodes)
    mutate(moves, freed)
    found = [v.message for v in check(problem, RepackPlan(moves=tuple(moves), freed_nodes=tuple(freed)))]
    assert any(expected in v for v in found), found


def test_every_family_accepts_the_greedy_plan(base: tuple[RepackPlan, Disruption]) -> None:
    plan, claimed = base
    problem = RepackProblem(SNAP, RUN)
    assert [v for check in checks.CHECKS for v in check(problem, plan)] == []
    assert checks.check_disruption(problem, plan, claimed) == []
    wrong = replace(claimed, moved_pods=claimed.moved_pods + 1)
    assert [v.message.split(" (")[0] for v in checks.check_disruption(problem, plan, wrong)] == ["claimed disruption"]


def test_violations_come_in_the_plans_order() -> None:
    """Families are checked one after the other, but the sentences come in the validator's order: each
    move's own rules in the plan's order, then the freed nodes, then each receiver in the plan's order
    (a's taint, a predicate, before b's receivers, a goal: the goal family is checked first)."""
    moves = [mv("a", "n1", "nt"), mv("b", "n2", "n2"), mv("ghost", "n9", "n0")]
    violations = plan_violations(RepackProblem(SNAP, RUN), RepackPlan(moves=tuple(moves), freed_nodes=("n1", "n2")))
    assert violations == ["move of unknown pod default/ghost",
                          "pod default/a cannot run on nt: taint dedicated=x:NoSchedule is not tolerated",
                          "pod default/b moves to n2, a vacated node", "pod default/b moves to the node it is on"]


PROTECTED = {"karpenter.sh/do-not-disrupt": "true"}


def _protected_pod(name: str, node_name: str, group: str) -> dict[str, Any]:
    out = pod(name, node_name, 1, group=group)
    out["metadata"]["annotations"].update(PROTECTED)
    return out


def test_disruption_protection_family() -> None:
    """A protected pod, or one whose eviction restarts a protected pod, is refused by its own family only."""
    loaded, run = load_with_run(node("n0", 8), node("n1", 8), pod("p", "n1", 1, group="pg"),
                                _protected_pod("q", "n1", "pg2"), node("n2", 8), pod("r", "n2", 1, group="pg3"),
                                podgroup("pg"), podgroup("pg2"), podgroup("pg3"), pod("keep", "n0", 1, group="pg3"),
                                repack_run())
    problem = RepackProblem(loaded.snapshot, run)
    bad = RepackPlan.build([mv("p", "n1", "n0"), mv("q", "n1", "n0")], ["n1"])
    good = RepackPlan.build([mv("r", "n2", "n0")], ["n2"])
    assert [v.message for v in checks.check_disruption_protection(problem, bad)] == [
        "pod default/q is not movable: pod-disruption-protected"]
    assert checks.check_movability(problem, bad) == []
    assert checks.check_disruption_protection(problem, good) == []
    ignored = run.model_copy(update={"spec": run.spec.model_copy(update={"disruption_protection": "Ignore"})})
    assert checks.check_disruption_protection(RepackProblem(loaded.snapshot, ignored), bad) == []


def test_topology_family() -> None:
    """A hard-topology PodGroup (tier 1: n0, n1 only) may not leave its HyperNode."""
    loaded, run = load_with_run(
        node("n0", 8), node("n1", 8), node("n2", 8), hypernode("s0", 1, ["n0", "n1"]), hypernode("s1", 1, ["n2"]),
        pod("t0", "n0", 1, group="train"), pod("t1", "n1", 1, group="train"), pod("other", "n2", 1, group="o"),
        podgroup("train", 1, network_topology={"mode": "hard", "highestTierAllowed": 1}), podgroup("o"),
        repack_run())
    problem = RepackProblem(loaded.snapshot, run)
    out = RepackPlan.build([mv("t1", "n1", "n2")], ["n1"])
    assert [v.message for v in checks.check_topology(problem, out)] == [
        "PodGroup default/train leaves every HyperNode of tier <= 1"]
    assert checks.check_topology(problem, RepackPlan.build([mv("t1", "n1", "n0")], ["n1"])) == []
