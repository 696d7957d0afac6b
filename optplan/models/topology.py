"""Volcano network topology: HyperNodes (topology.volcano.sh/v1alpha1) and what they enclose.

A HyperNode has a tier (lower = closer) and members: Nodes chosen by exact name, regular expression
or labels, or child HyperNodes chosen by exact name. ``Topology`` resolves every HyperNode to the set
of Nodes it encloses and answers the two questions planners ask: which HyperNodes of tier ≤ t hold
all of these nodes, and what is the lowest tier that encloses them.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache, cached_property
from typing import Literal

import re2
from pydantic import BaseModel, ConfigDict, Field

from optplan.models.selectors import LabelSelector
from optplan.models.snapshot import Node


@cache
def node_pattern(pattern: str) -> re2._Regexp:
    """A HyperNode ``regexMatch.pattern`` compiled by RE2, the engine (and syntax) of Go's regexp that Volcano
    uses: matching takes time linear in the name, so no pattern can hang a command (Python's ``re``
    backtracks: ``(a|a)*b`` takes exponential time); raises ``re2.error`` on a pattern Go would refuse."""
    options = re2.Options()
    options.log_errors = False  # the error is raised, not also logged on stderr
    return re2.compile(pattern, options=options)


class HyperNodeMember(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    type: Literal["Node", "HyperNode"]
    exact_name: str | None = None
    regex: str | None = None
    labels: LabelSelector | None = None

    def matches_node(self, node: Node) -> bool:
        if self.exact_name is not None:
            return node.name == self.exact_name
        if self.regex is not None:
            return node_pattern(self.regex).fullmatch(node.name) is not None
        return self.labels is not None and self.labels.matches(node.labels)


class HyperNode(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    tier: int
    members: tuple[HyperNodeMember, ...] = Field(default_factory=tuple)


class Topology:
    """HyperNodes resolved against a snapshot's nodes."""

    def __init__(self, hyper_nodes: dict[str, HyperNode], nodes: dict[str, Node]) -> None:
        self.hyper_nodes = hyper_nodes
        self.node_names = sorted(nodes)
        self._nodes = nodes

    @cached_property
    def members(self) -> dict[str, frozenset[str]]:
        """HyperNode name -> the Nodes it encloses, through child HyperNodes too."""
        out: dict[str, frozenset[str]] = {}

        def resolve(name: str, seen: tuple[str, ...]) -> frozenset[str]:
            if name in out:
                return out[name]
            if name in seen or name not in self.hyper_nodes:
                return frozenset()
            acc: set[str] = set()
            for m in self.hyper_nodes[name].members:
                if m.type == "HyperNode":
                    if m.exact_name is not None:
                        acc |= resolve(m.exact_name, (*seen, name))
                elif m.exact_name is not None:
                    if m.exact_name in self._nodes:
                        acc.add(m.exact_name)
                else:
                    acc |= {n for n in self.node_names if m.matches_node(self._nodes[n])}
            out[name] = frozenset(acc)
            return out[name]

        for name in sorted(self.hyper_nodes):
            resolve(name, ())
        return out

    @cached_property
    def top_tier(self) -> int:
        """One above the highest tier: the virtual root that encloses everything."""
        return max((h.tier for h in self.hyper_nodes.values()), default=0) + 1

    def tier(self, name: str) -> int:
        return self.top_tier if name == ROOT else self.hyper_nodes[name].tier

    def enclosing(self, nodes: Iterable[str], max_tier: int | None = None) -> list[str]:
        """HyperNodes of tier ≤ max_tier holding every node, lowest tier first, then by name."""
        need = frozenset(nodes)
        found = [h for h, ms in self.members.items() if need <= ms
                 and (max_tier is None or self.hyper_nodes[h].tier <= max_tier)]
        return sorted(found, key=lambda h: (self.hyper_nodes[h].tier, h))

    def lowest_tier(self, nodes: Iterable[str]) -> int:
        """The lowest tier enclosing every node; the virtual root's tier when none does."""
        found = self.enclosing(nodes)
        return self.hyper_nodes[found[0]].tier if found else self.top_tier

    def regions(self, max_tier: int | None) -> list[str]:
        """Candidate regions for a PodGroup: HyperNodes of tier ≤ max_tier (None: all, plus the root)."""
        hs = sorted((h for h in self.hyper_nodes if max_tier is None or self.hyper_nodes[h].tier <= max_tier),
                    key=lambda h: (self.hyper_nodes[h].tier, h))
        return [*hs, ROOT] if max_tier is None else hs

    def region_nodes(self, region: str) -> frozenset[str]:
        return frozenset(self.node_names) if region == ROOT else self.members[region]


ROOT = "<root>"
