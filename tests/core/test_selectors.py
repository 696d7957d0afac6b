"""Label selectors, node-selector requirements and terms, tolerations and RepackRun scope sets, with
Kubernetes' matching rules. Each rule has a case where it holds and one where it is broken."""

from __future__ import annotations

from typing import Any

import pytest

from optplan.models.selectors import (
    LabelSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    ScopeSet,
    Taint,
    Toleration,
)

LABELS = {"pool": "a100", "zone": "z1", "gen": "5", "empty": ""}


def sel(**spec: Any) -> LabelSelector:
    return LabelSelector.model_validate(spec)


def req(key: str, op: str, *values: str) -> NodeSelectorRequirement:
    return NodeSelectorRequirement.model_validate({"key": key, "operator": op, "values": list(values)})


# ---- LabelSelector ---------------------------------------------------------------------------

@pytest.mark.parametrize(("spec", "labels", "expected"), [
    ({}, {}, True),  # an empty selector matches everything
    ({}, LABELS, True),
    ({"matchLabels": {"pool": "a100"}}, LABELS, True),
    ({"matchLabels": {"pool": "h100"}}, LABELS, False),
    ({"matchLabels": {"missing": ""}}, LABELS, False),  # "" still requires the key
    ({"matchLabels": {"empty": ""}}, LABELS, True),
    ({"matchLabels": {"pool": "a100", "zone": "z2"}}, LABELS, False),  # matchLabels are ANDed
    ({"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a100", "h100"]}]}, LABELS, True),
    ({"matchExpressions": [{"key": "pool", "operator": "In", "values": ["h100"]}]}, LABELS, False),
    ({"matchExpressions": [{"key": "missing", "operator": "In", "values": ["x"]}]}, LABELS, False),
    ({"matchExpressions": [{"key": "pool", "operator": "NotIn", "values": ["h100"]}]}, LABELS, True),
    ({"matchExpressions": [{"key": "pool", "operator": "NotIn", "values": ["a100"]}]}, LABELS, False),
    ({"matchExpressions": [{"key": "missing", "operator": "NotIn", "values": ["x"]}]}, LABELS, True),
    ({"matchExpressions": [{"key": "zone", "operator": "Exists"}]}, LABELS, True),
    ({"matchExpressions": [{"key": "missing", "operator": "Exists"}]}, LABELS, False),
    ({"matchExpressions": [{"key": "missing", "operator": "DoesNotExist"}]}, LABELS, True),
    ({"matchExpressions": [{"key": "zone", "operator": "DoesNotExist"}]}, LABELS, False),
    # matchLabels and matchExpressions are ANDed
    ({"matchLabels": {"pool": "a100"}, "matchExpressions": [{"key": "zone", "operator": "Exists"}]},
     LABELS, True),
    ({"matchLabels": {"pool": "a100"}, "matchExpressions": [{"key": "zone", "operator": "DoesNotExist"}]},
     LABELS, False),
])
def test_label_selector(spec: dict[str, Any], labels: dict[str, str], expected: bool) -> None:
    assert sel(**spec).matches(labels) is expected


# ---- NodeSelectorRequirement: all six operators ----------------------------------------------

@pytest.mark.parametrize(("key", "op", "values", "expected"), [
    ("pool", "In", ["a100", "h100"], True),
    ("pool", "In", ["h100"], False),
    ("missing", "In", ["x"], False),
    ("pool", "NotIn", ["h100"], True),
    ("pool", "NotIn", ["a100"], False),
    ("missing", "NotIn", ["x"], True),
    ("zone", "Exists", [], True),
    ("missing", "Exists", [], False),
    ("missing", "DoesNotExist", [], True),
    ("zone", "DoesNotExist", [], False),
    ("gen", "Gt", ["4"], True),
    ("gen", "Gt", ["5"], False),  # strictly greater
    ("gen", "Lt", ["6"], True),
    ("gen", "Lt", ["5"], False),  # strictly less
    ("gen", "Gt", ["-1"], True),
    ("missing", "Gt", ["1"], False),
    ("missing", "Lt", ["1"], False),
    ("pool", "Gt", ["1"], False),  # node label is not an integer
    ("pool", "Lt", ["1"], False),
    ("gen", "Gt", ["four"], False),  # requirement value is not an integer
    ("gen", "Lt", ["4.5"], False),
    ("gen", "Gt", ["1", "2"], False),  # Gt/Lt need exactly one value
    ("gen", "Lt", [], False),
])
def test_node_selector_requirement(key: str, op: str, values: list[str], expected: bool) -> None:
    assert req(key, op, *values).matches(LABELS) is expected


@pytest.mark.parametrize(("label", "op", "value", "expected"), [
    ("10", "Gt", "9", True),  # numeric, not lexical, comparison
    ("10", "Lt", "9", False),
    ("+7", "Gt", "6", True),  # strconv.ParseInt accepts a sign
    ("-3", "Lt", "0", True),
    ("1_0", "Gt", "5", False),  # a valid label value, but not an integer for Kubernetes
    ("1.5", "Gt", "1", False),
    ("0x10", "Gt", "1", False),
    ("", "Lt", "1", False),
    ("50", "Gt", "1_0", False),
    ("5", "Gt", " 1", False),  # no whitespace
    ("99999999999999999999", "Gt", "1", False),  # overflows int64: ParseInt fails
])
def test_gt_lt_parse_integers_as_kubernetes_does(label: str, op: str, value: str, expected: bool) -> None:
    assert req("gen", op, value).matches({"gen": label}) is expected


# ---- NodeSelectorTerm ------------------------------------------------------------------------

def term(**spec: Any) -> NodeSelectorTerm:
    return NodeSelectorTerm.model_validate(spec)


@pytest.mark.parametrize(("spec", "node_name", "expected"), [
    ({}, "n1", False),  # an empty term matches no node
    ({"matchExpressions": []}, "n1", False),
    ({"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a100"]}]}, "n1", True),
    # expressions of one term are ANDed
    ({"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a100"]},
                           {"key": "zone", "operator": "In", "values": ["z1"]}]}, "n1", True),
    ({"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a100"]},
                           {"key": "zone", "operator": "In", "values": ["z2"]}]}, "n1", False),
    # matchFields on metadata.name
    ({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}, "n1", True),
    ({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}, "n2", False),
    ({"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}]}, "n2", True),
    ({"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}]}, "n1", False),
    # matchFields is ANDed with matchExpressions
    ({"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a100"]}],
      "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}, "n1", False),
    ({"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a100"]}],
      "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}, "n1", True),
    # a node label called metadata.name is not the node's name
    ({"matchExpressions": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}, "n1", False),
])
def test_node_selector_term(spec: dict[str, Any], node_name: str, expected: bool) -> None:
    assert term(**spec).matches(node_name, LABELS) is expected


# ---- Toleration.tolerates --------------------------------------------------------------------

GPU_TAINT = Taint(key="gpu", value="true", effect="NoSchedule")


@pytest.mark.parametrize(("toleration", "taint", "expected"), [
    ({"key": "gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}, GPU_TAINT, True),
    ({"key": "gpu", "operator": "Equal", "value": "false", "effect": "NoSchedule"}, GPU_TAINT, False),
    ({"key": "gpu", "value": "true"}, GPU_TAINT, True),  # operator defaults to Equal, empty effect = all
    ({"key": "gpu"}, GPU_TAINT, False),  # Equal with empty value does not match value "true"
    ({"key": "gpu"}, Taint(key="gpu", effect="NoSchedule"), True),
    ({"key": "gpu", "operator": "Exists"}, GPU_TAINT, True),  # Exists ignores the value
    ({"key": "other", "operator": "Exists"}, GPU_TAINT, False),
    ({"key": "gpu", "operator": "Exists", "effect": "NoExecute"}, GPU_TAINT, False),  # effect must match
    ({"key": "gpu", "operator": "Exists", "effect": "NoExecute"},
     Taint(key="gpu", effect="NoExecute"), True),
    ({"operator": "Exists"}, GPU_TAINT, True),  # empty key with Exists tolerates every taint
    ({"operator": "Exists"}, Taint(key="x", value="y", effect="NoExecute"), True),
    ({"operator": "Exists", "effect": "NoExecute"}, GPU_TAINT, False),  # ... of the given effect
])
def test_toleration(toleration: dict[str, str], taint: Taint, expected: bool) -> None:
    assert Toleration.model_validate(toleration).tolerates(taint) is expected


# ---- ScopeSet.admits -------------------------------------------------------------------------

TEAM_A = {"team": "a"}
TEAM_B = {"team": "b"}


@pytest.mark.parametrize(("scope", "name", "labels", "expected"), [
    ({}, "ns/any", {}, True),  # absent include: everything
    ({"exclude": {"names": ["ns/x"]}}, "ns/any", {}, True),
    ({"exclude": {"names": ["ns/x"]}}, "ns/x", {}, False),
    ({"include": {"names": ["ns/x"]}}, "ns/x", {}, True),
    ({"include": {"names": ["ns/x"]}}, "ns/y", {}, False),
    ({"include": {"names": ["ns/x"]}}, "other/x", {}, False),  # namespace is part of the name
    ({"include": {"selector": {"matchLabels": TEAM_A}}}, "ns/y", TEAM_A, True),
    ({"include": {"selector": {"matchLabels": TEAM_A}}}, "ns/y", TEAM_B, False),
    # names and selector of one include are a union
    ({"include": {"names": ["ns/x"], "selector": {"matchLabels": TEAM_A}}}, "ns/x", TEAM_B, True),
    ({"include": {"names": ["ns/x"], "selector": {"matchLabels": TEAM_A}}}, "ns/y", TEAM_A, True),
    ({"include": {"names": ["ns/x"], "selector": {"matchLabels": TEAM_A}}}, "ns/y", TEAM_B, False),
    # ... and of one exclude
    ({"exclude": {"names": ["ns/x"], "selector": {"matchLabels": TEAM_A}}}, "ns/y", TEAM_A, False),
    ({"exclude": {"names": ["ns/x"], "selector": {"matchLabels": TEAM_A}}}, "ns/x", TEAM_B, False),
    ({"exclude": {"names": ["ns/x"], "selector": {"matchLabels": TEAM_A}}}, "ns/y", TEAM_B, True),
    # exclude wins over include
    ({"include": {"names": ["ns/x"]}, "exclude": {"names": ["ns/x"]}}, "ns/x", {}, False),
    ({"include": {"selector": {"matchLabels": TEAM_A}}, "exclude": {"names": ["ns/x"]}}, "ns/x", TEAM_A,
     False),
    ({"include": {"names": ["ns/x"]}, "exclude": {"selector": {"matchLabels": TEAM_A}}}, "ns/x", TEAM_A,
     False),
    ({"include": {"names": ["ns/x"]}, "exclude": {"selector": {"matchLabels": TEAM_A}}}, "ns/x", TEAM_B,
     True),
    # selector expressions inside a scope
    ({"include": {"selector": {"matchExpressions": [{"key": "team", "operator": "In", "values": ["a", "b"]}]}},
      "exclude": {"selector": {"matchExpressions": [{"key": "protected", "operator": "Exists"}]}}},
     "ns/x", {"team": "b"}, True),
    ({"include": {"selector": {"matchExpressions": [{"key": "team", "operator": "In", "values": ["a", "b"]}]}},
      "exclude": {"selector": {"matchExpressions": [{"key": "protected", "operator": "Exists"}]}}},
     "ns/x", {"team": "b", "protected": "true"}, False),
])
def test_scope_set(scope: dict[str, Any], name: str, labels: dict[str, str], expected: bool) -> None:
    assert ScopeSet.model_validate(scope).admits(name, labels) is expected
