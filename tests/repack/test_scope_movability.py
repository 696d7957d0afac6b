"""Scope and movability: which pods may move, which nodes may be vacated, which nodes may receive.

A pod that requests R moves only if it is Running, scheduled by Volcano, in an existing PodGroup that
scope.podGroups admits; otherwise its node cannot be vacated. Pods that do not request R never move
and never block. scope.nodes limits the nodes that may be vacated, never receivers or statistics.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from optplan.solvers.repack.run import RepackOutcome, plan_repack
from tests.builders import load_with_run, node, pod, podgroup, repack_run

FOREIGN = "pod-not-scheduled-by-volcano"



def plan(*objects: dict[str, Any]) -> RepackOutcome:
    loaded, run = load_with_run(*objects)
    return plan_repack(loaded.snapshot, run)


def moves(out: RepackOutcome) -> list[tuple[str, str, str]]:
    return [(m.pod, m.from_node, m.to_node) for m in out.result.plan.moves]


# ---- movability -------------------------------------------------------------------------------
#
# n1 holds "mover" (2 cards); n2 holds a 4-card pod of another scheduler (never a candidate) and is
# the only receiver. The rule holds: n1 is freed. The rule is broken: nothing is freed, and the
# rejections name the reason once for n1 (plus n2's own reason).

def movability(mover: dict[str, Any], *, scope: dict[str, Any] | None = None,
               groups: tuple[dict[str, Any], ...] = (podgroup("pg"),),
               extra: tuple[dict[str, Any], ...] = ()) -> RepackOutcome:
    return plan(node("n1", 8), node("n2", 8),
                pod("mover", "n1", 2, **mover), pod("resident", "n2", 4, scheduler="default-scheduler"),
                *groups, *extra, repack_run(scope=scope))


def pg_scope(**spec: Any) -> dict[str, Any]:
    return {"podGroups": spec}


MOVABILITY: list[tuple[str, dict[str, Any], str | None]] = [
    # (case, movability() kwargs, reason or None when n1 is freed)
    ("running volcano pod in a PodGroup", {"mover": {}}, None),
    ("pending", {"mover": {"phase": "Pending"}}, "pod-not-running"),
    ("phase unknown", {"mover": {"phase": "Unknown"}}, "pod-not-running"),
    ("another scheduler", {"mover": {"scheduler": "default-scheduler"}}, FOREIGN),
    ("no group annotation", {"mover": {"group": None}}, "pod-without-podgroup"),
    ("annotation names a missing PodGroup", {"mover": {"group": "ghost"}}, "pod-without-podgroup"),
    ("PodGroup in another namespace", {"mover": {"ns": "team"}}, "pod-without-podgroup"),
    ("PodGroup of the pod's namespace", {"mover": {"ns": "team"}, "groups": (podgroup("pg", ns="team"),)}, None),
    ("excluded by ns/name", {"mover": {}, "scope": pg_scope(exclude={"names": ["default/pg"]})},
     "podgroup-out-of-scope"),
    ("exclude of another namespace", {"mover": {}, "scope": pg_scope(exclude={"names": ["other/pg"]})}, None),
    ("included by ns/name", {"mover": {}, "scope": pg_scope(include={"names": ["default/pg"]})}, None),
    ("include by bare name does not match ns/name", {"mover": {}, "scope": pg_scope(include={"names": ["pg"]})},
     "podgroup-out-of-scope"),
    ("excluded by selector",
     {"mover": {}, "groups": (podgroup("pg", labels={"repack.volcano.sh/protected": "true"}),),
      "scope": pg_scope(exclude={"selector": {"matchLabels": {"repack.volcano.sh/protected": "true"}}})},
     "podgroup-out-of-scope"),
    ("exclude selector does not match",
     {"mover": {}, "groups": (podgroup("pg", labels={"team": "a"}),),
      "scope": pg_scope(exclude={"selector": {"matchExpressions": [
          {"key": "repack.volcano.sh/protected", "operator": "Exists"}]}})}, None),
    ("included by selector", {"mover": {}, "groups": (podgroup("pg", labels={"team": "a"}),),
                              "scope": pg_scope(include={"selector": {"matchLabels": {"team": "a"}}})}, None),
    ("not included by selector", {"mover": {}, "groups": (podgroup("pg", labels={"team": "b"}),),
                                  "scope": pg_scope(include={"selector": {"matchLabels": {"team": "a"}}})},
     "podgroup-out-of-scope"),
    ("exclude wins over include",
     {"mover": {}, "groups": (podgroup("pg", labels={"team": "a"}),),
      "scope": pg_scope(include={"names": ["default/pg"], "selector": {"matchLabels": {"team": "a"}}},
                        exclude={"selector": {"matchLabels": {"team": "a"}}})}, "podgroup-out-of-scope"),
    # a terminal pod does not occupy its node: it neither moves nor blocks
    ("succeeded R pod beside the mover", {"mover": {}, "extra": (
        pod("done", "n1", 4, phase="Succeeded", scheduler="default-scheduler", group=None),)}, None),
    ("pending R pod beside the mover", {"mover": {}, "extra": (pod("waiting", "n1", 1, phase="Pending"),)},
     "pod-not-running"),
]


@pytest.mark.parametrize(("case", "kwargs", "reason"), [
    pytest.param(*c, id=c[0]) for c in MOVABILITY])
def test_movability(case: str, kwargs: dict[str, Any], reason: str | None) -> None:
    out = movability(**kwargs)
    if reason is None:
        assert out.result.plan.freed_nodes == ("n1",)
        assert [(m.pod.split("/")[1], m.to_node) for m in out.result.plan.moves] == [("mover", "n2")]
    else:
        assert out.result.plan.freed_nodes == ()
        assert out.result.plan.moves == ()
        assert out.result.rejections == dict(Counter({reason: 1}) + Counter({FOREIGN: 1}))


def test_no_vacate_candidate_frees_nothing_and_says_why() -> None:
    out = plan(node("n1", 8), pod("p", "n1", 1, scheduler="default-scheduler"), repack_run())
    assert out.result.plan.freed_nodes == ()
    assert out.result.rejections == {FOREIGN: 1}


def test_include_is_names_union_selector() -> None:
    """Three PodGroups on three nodes; include names pg-a, selector team=b: pg-a and pg-b move, pg-c
    does not. n0 receives everything."""
    out = plan(node("n0", 8), node("na", 8), node("nb", 8), node("nc", 8),
               pod("big", "n0", 4, scheduler="default-scheduler"),
               pod("a", "na", 1, group="pg-a"), pod("b", "nb", 1, group="pg-b"), pod("c", "nc", 1, group="pg-c"),
               podgroup("pg-a", labels={"team": "a"}), podgroup("pg-b", labels={"team": "b"}),
               podgroup("pg-c", labels={"team": "c"}),
               repack_run(scope=pg_scope(include={"names": ["default/pg-a"],
                                                  "selector": {"matchLabels": {"team": "b"}}})))
    assert out.result.plan.freed_nodes == ("na", "nb")
    assert moves(out) == [("default/a", "na", "n0"), ("default/b", "nb", "n0")]
    assert out.result.rejections == {FOREIGN: 1, "podgroup-out-of-scope": 1}
    assert out.status.plan.summary.resolved_scope.pod_group_count == 2


# ---- pods that do not request R ----------------------------------------------------------------

@pytest.mark.parametrize("daemon", [
    pod("daemon", "n1", 0, scheduler="default-scheduler", group=None, cpu="2"),
    pod("daemon", "n1", 0, phase="Pending", group="ghost", cpu="2"),
    pod("daemon", "n1", 0, cpu="2"),  # a movable-looking Volcano pod that does not request R
])
def test_pods_without_r_never_block_and_never_move(daemon: dict[str, Any]) -> None:
    out = plan(node("n1", 8), node("n2", 8), pod("mover", "n1", 2), daemon,
               pod("resident", "n2", 4, scheduler="default-scheduler"), podgroup("pg"), repack_run())
    assert out.result.plan.freed_nodes == ("n1",)
    assert moves(out) == [("default/mover", "n1", "n2")]


def test_node_with_only_non_r_pods_is_not_occupied() -> None:
    out = plan(node("n1", 8), node("n2", 8), pod("daemon", "n1", 0, scheduler="default-scheduler", group=None),
               pod("resident", "n2", 4), podgroup("pg"), repack_run())
    assert out.status.plan.summary.occupied_nodes_before == 1
    assert out.result.plan.freed_nodes == ()


# ---- scope.nodes ------------------------------------------------------------------------------
#
# n1 and n2 each hold one movable pod; n3 holds a foreign pod with room for one of them only.

def two_movable(nodes_scope: dict[str, Any] | None, **labels: dict[str, str]) -> RepackOutcome:
    return plan(node("n1", 8, labels=labels.get("n1")), node("n2", 8, labels=labels.get("n2")),
                node("n3", 8, labels=labels.get("n3")),
                pod("p1", "n1", 2), pod("p2", "n2", 3), pod("resident", "n3", 6, scheduler="default-scheduler"),
                podgroup("pg"), repack_run(scope=None if nodes_scope is None else {"nodes": nodes_scope}))


@pytest.mark.parametrize(("nodes_scope", "labels", "freed", "moved"), [
    (None, {}, ("n1",), [("default/p1", "n1", "n3")]),  # baseline: p1 fits n3, which stays occupied
    ({"exclude": {"names": ["n1"]}}, {}, ("n2",), [("default/p2", "n2", "n1")]),
    ({"include": {"names": ["n2"]}}, {}, ("n2",), [("default/p2", "n2", "n1")]),
    ({"exclude": {"selector": {"matchLabels": {"maint": "true"}}}}, {"n1": {"maint": "true"}},
     ("n2",), [("default/p2", "n2", "n1")]),
    ({"include": {"selector": {"matchLabels": {"pool": "x"}}}}, {"n2": {"pool": "x"}},
     ("n2",), [("default/p2", "n2", "n1")]),
    ({"include": {"names": ["n1", "n2"]}, "exclude": {"names": ["n1"]}}, {}, ("n2",),
     [("default/p2", "n2", "n1")]),  # exclude wins
])
def test_scope_nodes_limits_vacating_not_receiving(nodes_scope: dict[str, Any] | None,
                                                   labels: dict[str, dict[str, str]], freed: tuple[str, ...],
                                                   moved: list[tuple[str, str, str]]) -> None:
    out = two_movable(nodes_scope, **labels)
    assert out.result.plan.freed_nodes == freed
    assert moves(out) == moved
    if nodes_scope is not None:
        assert out.result.rejections.get("node-out-of-scope", 0) >= 1


def test_scope_nodes_does_not_change_statistics() -> None:
    base = two_movable(None).status.plan.summary
    scoped = two_movable({"include": {"names": ["n2"]}}).status.plan.summary
    assert scoped.frag_before_percent == base.frag_before_percent == 33
    assert scoped.provider_node_count == base.provider_node_count == 3
    assert scoped.occupied_nodes_before == base.occupied_nodes_before == 3
    assert scoped.theoretical_min_nodes == base.theoretical_min_nodes == 2
    assert (base.resolved_scope.node_count, scoped.resolved_scope.node_count) == (3, 1)


# ---- receivers ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("n3_used", "freed", "moved"), [
    (4, ("n1",), [("default/mover", "n1", "n3")]),  # n3 has room: it receives, idle n2 does not
    (8, (), []),  # only the R-idle n2 has room: nothing is freed
])
def test_r_idle_provider_never_receives(n3_used: int, freed: tuple[str, ...],
                                        moved: list[tuple[str, str, str]]) -> None:
    out = plan(node("n1", 8), node("n2", 8), node("n3", 8),
               pod("mover", "n1", 2), pod("cpu-only", "n2", 0, scheduler="default-scheduler", group=None),
               pod("resident", "n3", n3_used, scheduler="default-scheduler"), podgroup("pg"), repack_run())
    assert out.result.plan.freed_nodes == freed
    assert moves(out) == moved


@pytest.mark.parametrize(("p1_selector", "freed", "moved", "kept"), [
    # holds: n0 (a foreign pod, 2 cards free) takes both pods; n1 and n2 are freed
    (None, ("n1", "n2"), [("default/p1", "n1", "n0"), ("default/p2", "n2", "n0")], 0),
    # p1 can only run on n2: n1 is freed into n2, and n2, now a receiver, is never vacated — even though
    # its own pod p2 would still fit n0.
    ({"zone": "z2"}, ("n1",), [("default/p1", "n1", "n2")], 1),
])
def test_a_receiver_is_never_vacated_later(p1_selector: dict[str, str] | None, freed: tuple[str, ...],
                                           moved: list[tuple[str, str, str]], kept: int) -> None:
    out = plan(node("n0", 8), node("n1", 8), node("n2", 8, labels={"zone": "z2"}),
               pod("resident", "n0", 6, scheduler="default-scheduler"),
               pod("p1", "n1", 1, node_selector=p1_selector), pod("p2", "n2", 1),
               podgroup("pg"), repack_run())
    assert out.result.plan.freed_nodes == freed
    assert moves(out) == moved
    assert out.result.rejections.get("kept-as-receiver", 0) == kept
    assert not {m.to_node for m in out.result.plan.moves} & set(out.result.plan.freed_nodes)
