"""Scheduler feasibility of a moved pod on its receiver: the static predicates (NodeUnschedulable,
nodeSelector, required node affinity, TaintToleration), resource fit on every requested resource and
the pod count, cumulative over the moves of a plan. Unit cases on the oracle, then the same rules
end to end through plan_repack."""

from __future__ import annotations

from typing import Any

import pytest

from optplan.models.selectors import NodeSelectorTerm, Taint, Toleration
from optplan.models.snapshot import Node, Pod
from optplan.solvers.core.oracle import Capacity, static_reason
from optplan.solvers.repack.run import INSUFFICIENT, RECOMMENDED, RepackOutcome, plan_repack
from tests.builders import load, load_with_run, node, pod, podgroup, repack_run

# ---- static_reason ---------------------------------------------------------------------------


def mk_node(*, labels: dict[str, str] | None = None, taints: list[dict[str, str]] | None = None,
            unschedulable: bool = False) -> Node:
    return Node(name="n1", labels=labels or {}, unschedulable=unschedulable,
                taints=tuple(Taint.model_validate(t) for t in taints or ()))


def mk_pod(*, node_selector: dict[str, str] | None = None, tolerations: list[dict[str, str]] | None = None,
           terms: list[dict[str, Any]] | None = None) -> Pod:
    return Pod(namespace="default", name="p", node_selector=node_selector or {},
               tolerations=tuple(Toleration.model_validate(t) for t in tolerations or ()),
               required_node_affinity=None if terms is None else tuple(
                   NodeSelectorTerm.model_validate(t) for t in terms))


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    return {"matchExpressions": [{"key": key, "operator": op, "values": list(values)}]}


NO_SCHED = {"key": "gpu", "value": "true", "effect": "NoSchedule"}
NO_EXEC = {"key": "maint", "value": "", "effect": "NoExecute"}
PREFER = {"key": "soft", "value": "x", "effect": "PreferNoSchedule"}


@pytest.mark.parametrize(("node_kw", "pod_kw", "reason"), [
    # NodeUnschedulable
    ({}, {}, None),
    ({"unschedulable": True}, {}, "unschedulable"),
    ({"unschedulable": True}, {"tolerations": [{"operator": "Exists"}]}, "unschedulable"),
    # nodeSelector
    ({"labels": {"pool": "a"}}, {"node_selector": {"pool": "a"}}, None),
    ({"labels": {"pool": "b"}}, {"node_selector": {"pool": "a"}}, "nodeSelector pool=a"),
    ({}, {"node_selector": {"pool": "a"}}, "nodeSelector pool=a"),
    ({"labels": {"pool": "a"}}, {"node_selector": {"pool": "a", "zone": "z1"}}, "nodeSelector zone=z1"),
    # required node affinity: terms ORed, expressions ANDed, every operator, matchFields
    ({"labels": {"zone": "z1"}}, {"terms": [expr("zone", "In", "z1")]}, None),
    ({"labels": {"zone": "z2"}}, {"terms": [expr("zone", "In", "z1")]}, "affinity"),
    ({"labels": {"zone": "z2"}}, {"terms": [expr("zone", "In", "z1"), expr("zone", "In", "z2")]}, None),
    ({"labels": {"zone": "z1"}}, {"terms": [expr("zone", "NotIn", "z1")]}, "affinity"),
    ({"labels": {"zone": "z2"}}, {"terms": [expr("zone", "NotIn", "z1")]}, None),
    ({"labels": {"zone": "z1"}}, {"terms": [expr("zone", "Exists")]}, None),
    ({}, {"terms": [expr("zone", "Exists")]}, "affinity"),
    ({}, {"terms": [expr("drain", "DoesNotExist")]}, None),
    ({"labels": {"drain": "1"}}, {"terms": [expr("drain", "DoesNotExist")]}, "affinity"),
    ({"labels": {"gen": "9"}}, {"terms": [expr("gen", "Gt", "8")]}, None),
    ({"labels": {"gen": "8"}}, {"terms": [expr("gen", "Gt", "8")]}, "affinity"),
    ({"labels": {"gen": "7"}}, {"terms": [expr("gen", "Lt", "8")]}, None),
    ({"labels": {"gen": "v9"}}, {"terms": [expr("gen", "Gt", "8")]}, "affinity"),
    ({"labels": {"zone": "z1", "gen": "9"}},
     {"terms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]},
                                      {"key": "gen", "operator": "Lt", "values": ["9"]}]}]}, "affinity"),
    ({}, {"terms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}, None),
    ({}, {"terms": [{"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}]}]},
     "affinity"),
    ({}, {"terms": [{}]}, "affinity"),  # an empty term matches no node
    ({}, {"terms": []}, "affinity"),  # no term at all: nothing matches
    # TaintToleration
    ({"taints": [NO_SCHED]}, {}, "taint gpu=true:NoSchedule"),
    ({"taints": [NO_SCHED]}, {"tolerations": [{"key": "gpu", "operator": "Equal", "value": "true"}]}, None),
    ({"taints": [NO_SCHED]}, {"tolerations": [{"key": "gpu", "operator": "Equal", "value": "no"}]}, "taint"),
    ({"taints": [NO_SCHED]}, {"tolerations": [{"key": "gpu", "operator": "Exists"}]}, None),
    ({"taints": [NO_SCHED]}, {"tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoExecute"}]},
     "taint"),
    ({"taints": [NO_EXEC]}, {}, "taint maint=:NoExecute"),
    ({"taints": [NO_EXEC]}, {"tolerations": [{"key": "maint", "operator": "Exists", "effect": "NoExecute"}]},
     None),
    ({"taints": [PREFER]}, {}, None),  # PreferNoSchedule never blocks
    ({"taints": [NO_SCHED, NO_EXEC]}, {"tolerations": [{"key": "gpu", "operator": "Exists"}]}, "taint maint"),
    ({"taints": [NO_SCHED, NO_EXEC]}, {"tolerations": [{"operator": "Exists"}]}, None),  # tolerates all
])
def test_static_reason(node_kw: dict[str, Any], pod_kw: dict[str, Any], reason: str | None) -> None:
    got = static_reason(mk_pod(**pod_kw), mk_node(**node_kw))
    if reason is None:
        assert got is None
    else:
        assert got is not None and reason in got


# ---- Capacity.fit_reason ---------------------------------------------------------------------

RDMA = "rdma/hca"


def capacity_case(node_kw: dict[str, Any], resident: dict[str, Any] | None, mover: dict[str, Any]
                  ) -> tuple[Capacity, Pod]:
    objs = [node("n1", **node_kw), node("n2"), pod("mover", "n2", **mover)]
    if resident is not None:
        objs.append(pod("resident", "n1", **resident))
    snap = load(*objs).snapshot
    return Capacity(snap), snap.pods["default/mover"]


@pytest.mark.parametrize(("node_kw", "resident", "mover", "reason"), [
    ({"gpu": 8}, {"gpu": 6}, {"gpu": 2}, None),  # exactly fits
    ({"gpu": 8}, {"gpu": 7}, {"gpu": 2}, "insufficient nvidia.com/gpu"),
    ({"gpu": 0}, None, {"gpu": 1}, "insufficient nvidia.com/gpu"),  # node lacks the resource
    ({"cpu": "4"}, {"cpu": "3"}, {"cpu": "1"}, None),
    ({"cpu": "4"}, {"cpu": "3"}, {"cpu": "1500m"}, "insufficient cpu"),
    ({"memory": "16Gi"}, {"memory": "8Gi"}, {"memory": "8Gi"}, None),
    ({"memory": "16Gi"}, {"memory": "8Gi"}, {"memory": "9Gi"}, "insufficient memory"),
    ({"extra": {"ephemeral-storage": "100Gi"}}, {"extra_requests": {"ephemeral-storage": "60Gi"}},
     {"extra_requests": {"ephemeral-storage": "40Gi"}}, None),
    ({"extra": {"ephemeral-storage": "100Gi"}}, {"extra_requests": {"ephemeral-storage": "60Gi"}},
     {"extra_requests": {"ephemeral-storage": "41Gi"}}, "insufficient ephemeral-storage"),
    ({"extra": {RDMA: "2"}}, {"extra_requests": {RDMA: "1"}}, {"extra_requests": {RDMA: "1"}}, None),
    ({"extra": {RDMA: "2"}}, {"extra_requests": {RDMA: "2"}}, {"extra_requests": {RDMA: "1"}},
     f"insufficient {RDMA}"),
    ({}, None, {"extra_requests": {RDMA: "1"}}, f"insufficient {RDMA}"),  # node has no rdma/hca at all
    ({"pods": "2"}, {}, {}, None),
    ({"pods": "1"}, {}, {}, "too many pods"),
    ({"pods": "0"}, None, {}, "too many pods"),
    ({"pods": None}, {}, {}, None),  # no pods in allocatable: no pod-count limit
])
def test_fit_reason(node_kw: dict[str, Any], resident: dict[str, Any] | None, mover: dict[str, Any],
                    reason: str | None) -> None:
    cap, mover_pod = capacity_case(node_kw, resident, mover)
    assert cap.fit_reason(mover_pod, "n1") == reason


def test_fit_is_cumulative_and_reversible() -> None:
    snap = load(node("n1", 4), node("n2"), pod("a", "n2", 2), pod("b", "n2", 2), pod("c", "n2", 1)).snapshot
    cap = Capacity(snap)
    a, b, c = (snap.pods[f"default/{n}"] for n in "abc")
    assert cap.fit_reason(a, "n1") is None and cap.fit_reason(b, "n1") is None
    cap.add(a, "n1")
    cap.add(b, "n1")
    assert cap.fit_reason(c, "n1") == "insufficient nvidia.com/gpu"
    cap.remove(b, "n1")
    assert cap.fit_reason(c, "n1") is None


# ---- end to end: the only node with room ------------------------------------------------------
#
# n1 holds one movable pod ("mover", 2 cards). n2 has 4 free cards and n3 none; the pods on n2 and n3
# are not Volcano's, so n1 is the only vacate candidate and n2 the only receiver with room.

def three_nodes(n2: dict[str, Any], mover: dict[str, Any], resident: dict[str, Any] | None = None,
                n3: dict[str, Any] | None = None) -> RepackOutcome:
    loaded, run = load_with_run(
        node("n1", 8), node("n2", 8, **n2), node("n3", 8, **(n3 or {})),
        pod("mover", "n1", 2, **mover),
        pod("resident", "n2", 4, scheduler="default-scheduler", **(resident or {})),
        pod("full", "n3", 8, scheduler="default-scheduler"),
        podgroup("pg"), repack_run())
    return plan_repack(loaded.snapshot, run)


TAINT = [{"key": "dedicated", "value": "infer", "effect": "NoSchedule"}]
TOLERATE = [{"key": "dedicated", "operator": "Equal", "value": "infer", "effect": "NoSchedule"}]

# (case, n2 node kwargs, mover pod kwargs, resident pod kwargs): (broken, holds)
ROOM_CASES: list[tuple[str, tuple[dict[str, Any], ...], tuple[dict[str, Any], ...]]] = [
    ("taint NoSchedule", ({"taints": TAINT}, {}), ({"taints": TAINT}, {"tolerations": TOLERATE})),
    ("taint NoExecute", ({"taints": [{"key": "k", "value": "v", "effect": "NoExecute"}]}, {}),
     ({"taints": [{"key": "k", "value": "v", "effect": "NoExecute"}]},
      {"tolerations": [{"key": "k", "operator": "Exists"}]})),
    ("taint PreferNoSchedule never blocks", ({"taints": TAINT}, {}),
     ({"taints": [{"key": "dedicated", "value": "infer", "effect": "PreferNoSchedule"}]}, {})),
    ("nodeSelector", ({"labels": {"pool": "b"}}, {"node_selector": {"pool": "a"}}),
     ({"labels": {"pool": "a"}}, {"node_selector": {"pool": "a"}})),
    ("node affinity In", ({"labels": {"zone": "z2"}}, {"affinity_terms": [expr("zone", "In", "z1")]}),
     ({"labels": {"zone": "z1"}}, {"affinity_terms": [expr("zone", "In", "z1")]})),
    ("node affinity Gt", ({"labels": {"gen": "3"}}, {"affinity_terms": [expr("gen", "Gt", "3")]}),
     ({"labels": {"gen": "4"}}, {"affinity_terms": [expr("gen", "Gt", "3")]})),
    ("node affinity matchFields",
     ({}, {"affinity_terms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n3"]}]}]}),
     ({}, {"affinity_terms": [{"matchFields": [{"key": "metadata.name", "operator": "In",
                                                 "values": ["n2"]}]}]})),
    ("cordoned", ({"unschedulable": True}, {}), ({}, {})),
    ("cpu", ({"cpu": "4"}, {"cpu": "4"}), ({"cpu": "5"}, {"cpu": "4"})),
    ("memory", ({"memory": "64Gi"}, {"memory": "64Gi"}), ({"memory": "65Gi"}, {"memory": "64Gi"})),
    ("ephemeral-storage", ({"extra": {"ephemeral-storage": "10Gi"}},
                           {"extra_requests": {"ephemeral-storage": "20Gi"}}),
     ({"extra": {"ephemeral-storage": "20Gi"}}, {"extra_requests": {"ephemeral-storage": "20Gi"}})),
    ("extended resource rdma/hca", ({}, {"extra_requests": {RDMA: "1"}}),
     ({"extra": {RDMA: "1"}}, {"extra_requests": {RDMA: "1"}})),
    ("pods count", ({"pods": "1"}, {}), ({"pods": "2"}, {})),
]


@pytest.mark.parametrize(("case", "broken", "holds"), ROOM_CASES, ids=[c[0] for c in ROOM_CASES])
def test_only_receiver_with_room(case: str, broken: tuple[dict[str, Any], ...],
                                 holds: tuple[dict[str, Any], ...]) -> None:
    # The resident pod on n2 takes 1 cpu and 1Gi memory (builder defaults).
    bad = three_nodes(*broken)
    assert bad.result.plan.freed_nodes == ()
    assert bad.result.rejections == {"no-feasible-receiver": 1, "pod-not-scheduled-by-volcano": 2}
    assert bad.reason == INSUFFICIENT

    good = three_nodes(*holds)
    assert good.result.plan.freed_nodes == ("n1",)
    assert [(m.pod, m.to_node) for m in good.result.plan.moves] == [("default/mover", "n2")]
    assert good.reason == RECOMMENDED


def test_cordoned_node_can_still_be_vacated() -> None:
    loaded, run = load_with_run(node("n1", 8, unschedulable=True), node("n2", 8),
                                pod("mover", "n1", 2), pod("resident", "n2", 4, scheduler="default-scheduler"),
                                podgroup("pg"), repack_run())
    out = plan_repack(loaded.snapshot, run)
    assert out.result.plan.freed_nodes == ("n1",)
    assert out.result.plan.moves[0].to_node == "n2"


# ---- cumulative fit ---------------------------------------------------------------------------
#
# n1 holds two movable pods; each fits n2 alone, not both together.

@pytest.mark.parametrize(("n2", "pods", "freed"), [
    ({}, ({"gpu": 2}, {"gpu": 2}), ("n1",)),  # n2 has 4 free cards: both fit
    ({}, ({"gpu": 3}, {"gpu": 2}), ()),  # 3 fits, 2 fits, 3 + 2 does not
    ({"cpu": "3"}, ({"gpu": 1, "cpu": "1"}, {"gpu": 1, "cpu": "1"}), ("n1",)),  # resident uses 1 cpu
    ({"cpu": "3"}, ({"gpu": 1, "cpu": "2"}, {"gpu": 1, "cpu": "1"}), ()),
    ({"pods": "3"}, ({"gpu": 1}, {"gpu": 1}), ("n1",)),
    ({"pods": "2"}, ({"gpu": 1}, {"gpu": 1}), ()),
    ({"extra": {RDMA: "2"}}, ({"extra_requests": {RDMA: "1"}}, {"extra_requests": {RDMA: "1"}}), ("n1",)),
    ({"extra": {RDMA: "1"}}, ({"extra_requests": {RDMA: "1"}}, {"extra_requests": {RDMA: "1"}}), ()),
])
def test_cumulative_fit(n2: dict[str, Any], pods: tuple[dict[str, Any], dict[str, Any]],
                        freed: tuple[str, ...]) -> None:
    loaded, run = load_with_run(
        node("n1", 8), node("n2", 8, **n2), node("n3", 8),
        pod("a", "n1", **pods[0]), pod("b", "n1", **pods[1]),
        pod("resident", "n2", 4, scheduler="default-scheduler"),
        pod("full", "n3", 8, scheduler="default-scheduler"),
        podgroup("pg"), repack_run())
    out = plan_repack(loaded.snapshot, run)
    assert out.result.plan.freed_nodes == freed
    if freed:
        assert {m.to_node for m in out.result.plan.moves} == {"n2"}
        assert len(out.result.plan.moves) == 2
    else:
        assert out.result.plan.moves == ()
        assert out.result.rejections["no-feasible-receiver"] == 1
