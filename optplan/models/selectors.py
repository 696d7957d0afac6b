"""Label selectors, node-selector terms, taints and tolerations, with Kubernetes' matching rules."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel


class KubeModel(BaseModel):
    """Base for models that mirror Kubernetes fields: camelCase on the wire, snake_case in Python."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True, extra="ignore")


class LabelSelectorRequirement(KubeModel):
    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: tuple[str, ...] = ()


class LabelSelector(KubeModel):
    """metav1.LabelSelector. An empty selector matches everything."""

    match_labels: dict[str, str] = Field(default_factory=dict)
    match_expressions: tuple[LabelSelectorRequirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        for k, v in self.match_labels.items():
            if labels.get(k) != v:
                return False
        for req in self.match_expressions:
            present = req.key in labels
            if req.operator == "In":
                if not present or labels[req.key] not in req.values:
                    return False
            elif req.operator == "NotIn":
                if present and labels[req.key] in req.values:
                    return False
            elif req.operator == "Exists":
                if not present:
                    return False
            elif present:  # DoesNotExist
                return False
        return True


_INT64 = re.compile(r"[+-]?[0-9]+")


def _parse_int64(text: str) -> int | None:
    """strconv.ParseInt(text, 10, 64): optional sign, ASCII digits only, within int64; else None."""
    if not _INT64.fullmatch(text):
        return None
    v = int(text)
    return v if -(2**63) <= v < 2**63 else None


class NodeSelectorRequirement(KubeModel):
    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.operator == "In":
            return present and value in self.values
        if self.operator == "NotIn":
            return not present or value not in self.values
        if self.operator == "Exists":
            return present
        if self.operator == "DoesNotExist":
            return not present
        # Gt / Lt: both sides must parse as integers, exactly one value.
        if value is None or len(self.values) != 1:
            return False
        left, right = _parse_int64(value), _parse_int64(self.values[0])
        if left is None or right is None:
            return False
        return left > right if self.operator == "Gt" else left < right


class NodeSelectorTerm(KubeModel):
    """Expressions of one term are ANDed; matchFields supports metadata.name as Kubernetes does."""

    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    match_fields: tuple[NodeSelectorRequirement, ...] = ()

    def matches(self, node_name: str, labels: Mapping[str, str]) -> bool:
        if not self.match_expressions and not self.match_fields:
            return False  # an empty term matches no objects
        fields = {"metadata.name": node_name}
        return all(r.matches(labels) for r in self.match_expressions) and all(
            r.matches(fields) for r in self.match_fields
        )


class Taint(KubeModel):
    key: str
    value: str = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class Toleration(KubeModel):
    key: str = ""
    operator: Literal["Equal", "Exists", ""] = "Equal"  # "" means Equal, as in Kubernetes
    value: str = ""
    effect: str = ""  # empty tolerates every effect

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if not self.key:
            return self.operator == "Exists"
        if self.key != taint.key:
            return False
        return self.operator == "Exists" or self.value == taint.value


class NameSelector(KubeModel):
    """One include or exclude of a RepackRun scope: names and a label selector, as a union."""

    names: tuple[str, ...] = ()
    selector: LabelSelector | None = None

    def matches(self, name: str, labels: Mapping[str, str]) -> bool:
        if name in self.names:
            return True
        return self.selector is not None and self.selector.matches(labels)


class ScopeSet(KubeModel):
    """include (absent = everything) minus exclude (wins)."""

    include: NameSelector | None = None
    exclude: NameSelector | None = None

    def admits(self, name: str, labels: Mapping[str, str]) -> bool:
        if self.exclude is not None and self.exclude.matches(name, labels):
            return False
        return self.include is None or self.include.matches(name, labels)
