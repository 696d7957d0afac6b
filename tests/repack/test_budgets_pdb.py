"""Hard limits on a plan: maxPerRun.podGroups, maxPerRun.resources (the target resource and any other
named one), and PodDisruptionBudgets (status.disruptionsAllowed, counted across all nodes of the plan).

Every cluster below has a receiver n0 with 16 cards, half taken by a pod of another scheduler, so that
all movable pods fit n0 together and only the limits decide what is freed."""

from __future__ import annotations

from typing import Any

import pytest

from optplan.solvers.repack.run import RepackOutcome, plan_repack
from tests.builders import load_with_run, node, pdb, pod, podgroup, repack_run


def plan(*objects: dict[str, Any], max_per_run: dict[str, Any] | None = None) -> RepackOutcome:
    loaded, run = load_with_run(node("n0", 16), pod("resident", "n0", 8, scheduler="default-scheduler"),
                                *objects, repack_run(max_per_run=max_per_run))
    return plan_repack(loaded.snapshot, run)


def freed(out: RepackOutcome) -> tuple[str, ...]:
    return out.result.plan.freed_nodes


# ---- maxPerRun.podGroups ----------------------------------------------------------------------

THREE_GROUPS = (node("n1", 8), node("n2", 8), node("n3", 8),
                pod("a", "n1", 1, group="pg-a"), pod("b", "n2", 1, group="pg-b"), pod("c", "n3", 1, group="pg-c"),
                podgroup("pg-a"), podgroup("pg-b"), podgroup("pg-c"))


@pytest.mark.parametrize(("budget", "n_freed"), [(None, 3), (0, 0), (1, 1), (2, 2), (3, 3)])
def test_max_pod_groups(budget: int | None, n_freed: int) -> None:
    out = plan(*THREE_GROUPS, max_per_run=None if budget is None else {"podGroups": budget})
    assert len(freed(out)) == n_freed
    assert out.status.plan.disruption.affected_pod_groups == n_freed
    assert out.result.rejections.get("budget-podGroups", 0) == 3 - n_freed


@pytest.mark.parametrize(("groups", "n_freed"), [(("pg", "pg"), 2), (("pg", "other"), 1)])
def test_max_pod_groups_counts_groups_not_nodes(groups: tuple[str, str], n_freed: int) -> None:
    """Two nodes holding pods of one PodGroup cost one PodGroup of the budget."""
    out = plan(node("n1", 8), node("n2", 8), pod("a", "n1", 1, group=groups[0]), pod("b", "n2", 1, group=groups[1]),
               podgroup("pg"), podgroup("other"), max_per_run={"podGroups": 1})
    assert len(freed(out)) == n_freed


# ---- maxPerRun.resources ------------------------------------------------------------------------
#
# n1 holds 5 cards (one pod), n2 holds 3 cards (one pod).

TWO_SIZES = (node("n1", 8), node("n2", 8), pod("five", "n1", 5, cpu="4"), pod("three", "n2", 3, cpu="1"),
             podgroup("pg"))


@pytest.mark.parametrize(("budget", "expected"), [
    ({}, ("n1", "n2")),
    ({"nvidia.com/gpu": "2"}, ()),
    ({"nvidia.com/gpu": "4"}, ("n2",)),  # n1's 5 cards exceed the budget of 4
    ({"nvidia.com/gpu": "5"}, ("n2",)),  # n2 first (cheaper); 3 + 5 > 5
    ({"nvidia.com/gpu": "7"}, ("n2",)),
    ({"nvidia.com/gpu": "8"}, ("n1", "n2")),
    # a budget on another resource: cpu moved is what the moved pods request
    ({"cpu": "500m"}, ()),
    ({"cpu": "1"}, ("n2",)),
    ({"cpu": "3"}, ("n2",)),  # n1's pod requests 4 cpu
    ({"cpu": "4"}, ("n2",)),  # n2 first (less disruption), then 1 + 4 > 4
    ({"cpu": "5"}, ("n1", "n2")),
    # every named budget holds at once
    ({"nvidia.com/gpu": "8", "cpu": "1"}, ("n2",)),
    ({"nvidia.com/gpu": "2", "cpu": "5"}, ()),
])
def test_max_resources(budget: dict[str, str], expected: tuple[str, ...]) -> None:
    out = plan(*TWO_SIZES, max_per_run={"resources": budget})
    assert freed(out) == expected
    if len(expected) < 2:
        assert out.result.rejections.get("budget-resources", 0) == 2 - len(expected)


def test_max_resources_single_node_of_five_cards() -> None:
    """The issue's example: a budget of 4 cards and a node holding 5 cards in two pods."""
    objs = (node("n1", 8), pod("three", "n1", 3), pod("two", "n1", 2), podgroup("pg"))
    assert freed(plan(*objs, max_per_run={"resources": {"nvidia.com/gpu": "4"}})) == ()
    assert freed(plan(*objs, max_per_run={"resources": {"nvidia.com/gpu": "5"}})) == ("n1",)


# ---- PodDisruptionBudgets -----------------------------------------------------------------------

APP = {"app": "svc"}


@pytest.mark.parametrize(("allowed", "n_freed"), [(0, 0), (1, 1), (2, 2)])
def test_pdb_counts_across_nodes(allowed: int, n_freed: int) -> None:
    """Two nodes each hold one pod the PDB matches: it allows that many pods, summed over nodes."""
    out = plan(node("n1", 8), node("n2", 8), pod("a", "n1", 1, labels=APP), pod("b", "n2", 1, labels=APP),
               podgroup("pg"), pdb("svc", APP, allowed))
    assert len(freed(out)) == n_freed
    assert out.result.rejections.get("pdb-disruptions-allowed", 0) == 2 - n_freed


@pytest.mark.parametrize(("allowed", "expected"), [(1, ()), (2, ("n1",))])
def test_pdb_counts_pods_not_nodes(allowed: int, expected: tuple[str, ...]) -> None:
    out = plan(node("n1", 8), pod("a", "n1", 1, labels=APP), pod("b", "n1", 1, labels=APP), podgroup("pg"),
               pdb("svc", APP, allowed))
    assert freed(out) == expected


@pytest.mark.parametrize(("budget", "n_freed"), [
    (pdb("svc", APP, 0), 0),
    (pdb("svc", APP, 0, ns="other"), 2),  # a PDB of another namespace does not apply
    (pdb("svc", {"app": "other"}, 0), 2),  # nor one whose selector does not match
    (pdb("all", {}, 0), 0),  # an empty selector covers every pod of its namespace
])
def test_pdb_scope(budget: dict[str, Any], n_freed: int) -> None:
    out = plan(node("n1", 8), node("n2", 8), pod("a", "n1", 1, labels=APP), pod("b", "n2", 1, labels=APP),
               podgroup("pg"), budget)
    assert len(freed(out)) == n_freed


def test_pdb_ignores_pods_that_do_not_move() -> None:
    """A PDB covering only a cpu-only pod on the vacated node does not block: that pod stays."""
    out = plan(node("n1", 8), pod("a", "n1", 1), pod("daemon", "n1", 0, labels=APP, scheduler="default-scheduler"),
               podgroup("pg"), pdb("svc", APP, 0))
    assert freed(out) == ("n1",)


def test_budgets_bound_the_freed_nodes_the_exact_solver_reports() -> None:
    """The freed-node bound honours maxPerRun: 4 cards cannot vacate more than the cheapest nodes
    that fit in 4 cards, and one PodGroup cannot vacate more nodes than it spans."""
    from optplan.solvers.repack.rules import RepackProblem
    from tests.builders import load_with_run, node, pod, podgroup, repack_run

    objs = [node(f"n{i}") for i in range(6)] + [podgroup("a"), podgroup("b")]
    objs += [pod(f"a{i}", f"n{i}", 1, group="a") for i in range(3)]
    objs += [pod(f"b{i}", f"n{i + 3}", 2, group="b") for i in range(3)]
    for budget, expected in (({"resources": {"nvidia.com/gpu": 4}}, 3), ({"podGroups": 1}, 3),
                             ({"resources": {"nvidia.com/gpu": 0}}, 0)):
        loaded, run = load_with_run(*objs, repack_run(max_per_run=budget))
        assert RepackProblem(loaded.snapshot, run).budget_freed_upper() == expected


# ---- one definition: the PDBs covering a pod (rules), read by the validator's check and every planner ----

@pytest.mark.parametrize(("budget", "covered"), [
    (pdb("svc", APP, 0), {"default/a", "default/b"}),
    (pdb("svc", APP, 0, ns="other"), set()),
    (pdb("svc", {"app": "other"}, 0), set()),
    (pdb("all", {}, 0), {"default/a", "default/b", "default/c"}),
])
def test_one_definition_of_the_pdbs_covering_a_pod(budget: dict[str, Any], covered: set[str]) -> None:
    from optplan.models.repack import PodMove, RepackPlan
    from optplan.solvers.repack import checks
    from optplan.solvers.repack.rules import RepackProblem

    loaded, run = load_with_run(node("n0", 16), node("n1", 8), node("n2", 8), pod("a", "n1", 1, labels=APP),
                                pod("b", "n2", 1, labels=APP), pod("c", "n2", 1), podgroup("pg"), budget, repack_run())
    problem = RepackProblem(loaded.snapshot, run)
    pods = loaded.snapshot.pods
    key = f"{budget['metadata']['namespace']}/{budget['metadata']['name']}"
    assert {k for k, p in pods.items() if problem.pdbs_covering(p) == [key]} == covered
    assert problem.pdb_cover == {k: [key] for k in sorted(covered)}
    assert problem.pdb_use(pods.values()) == ({key: len(covered)} if covered else {})
    both = RepackPlan.build([PodMove(pod=k, from_node=pods[k].node_name or "", to_node="n0")
                             for k in ("default/a", "default/b", "default/c")], ["n1", "n2"])
    refused = [v.message for v in checks.check_pdbs(problem, both)]
    assert refused == ([f"PodDisruptionBudget {key} allows 0 disruptions, plan moves {len(covered)}"] if covered
                       else [])
