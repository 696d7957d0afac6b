"""The bundle rule of Volcano's gangpreempt and gangreclaim (``placement.bundles``), table-driven from the rule:
which pods of a victim job are safe (its gang stays ready on minAvailable, task minimums and minSubGroups)
and which make the whole bundle, the order bundles are taken in, and the selection up to the need."""

from __future__ import annotations

from typing import Any

import pytest

from optplan.solvers.placement.bundles import (
    SAFE,
    WHOLE,
    Bundle,
    GangState,
    Kind,
    Member,
    allowed_bundles,
    job_bundles,
    rank_bundles,
    select_bundles,
)

G = 1000  # one GPU, in milli-units


def m(name: str, task: str = "w", prio: int = 0, gpu: int = 1, subgroup: str | None = None) -> Member:
    return Member(key=f"ns/{name}", task=task, priority=prio, requests={"gpu": gpu * G}, subgroup=subgroup)


def split(b: list[Bundle]) -> dict[str, list[str]]:
    return {x.kind: [y.key.split("/")[1] for y in x.members] for x in b}


# gang, candidates, expected {kind: pod names}
CASES: list[tuple[str, GangState, list[Member], dict[str, list[str]]]] = [
    ("surplus 2 of 4: the two lowest-priority pods are safe",
     GangState("ns/j", min_available=2, ready=4), [m("a", prio=5), m("b"), m("c"), m("d", prio=1)],
     {SAFE: ["b", "c"], WHOLE: ["d", "a"]}),
    ("at minAvailable: all whole", GangState("ns/j", min_available=3, ready=3), [m("a"), m("b")],
     {WHOLE: ["a", "b"]}),
    ("already not ready: one safe bundle of all", GangState("ns/j", min_available=4, ready=3), [m("a"), m("b")],
     {SAFE: ["a", "b"]}),
    ("a task at its minimum keeps its pods whole",
     GangState("ns/j", min_available=3, ready=5, task_ready={"ps": 1, "w": 4}, task_min={"ps": 1, "w": 2}),
     [m("p0", task="ps"), m("w0"), m("w1"), m("w2")], {SAFE: ["w0", "w1"], WHOLE: ["p0", "w2"]}),
    ("task minimums not enforced when minAvailable is below their sum",
     GangState("ns/j", min_available=2, ready=4, task_ready={"ps": 1, "w": 3}, task_min={"ps": 1, "w": 3}),
     [m("p0", task="ps"), m("w0")], {SAFE: ["p0", "w0"]}),
    ("sub-groups: a spare ready sub-group, then only its pods",
     GangState("ns/j", min_available=2, ready=6, subgroup_ready={"s0": True, "s1": True, "s2": True},
               group_of={"s0": "g", "s1": "g", "s2": "g"}, min_subgroups={"g": 2}),
     [m("a0", subgroup="s0"), m("a1", subgroup="s0"), m("b0", subgroup="s1")],
     {SAFE: ["a0", "a1"], WHOLE: ["b0"]}),
    ("a broken sub-group's pods are safe",
     GangState("ns/j", min_available=2, ready=5, subgroup_ready={"s0": False, "s1": True},
               group_of={"s0": "g", "s1": "g"}, min_subgroups={"g": 1}),
     [m("a0", subgroup="s0"), m("b0", subgroup="s1")], {SAFE: ["a0"], WHOLE: ["b0"]}),
    ("a pod outside every sub-group goes whole",
     GangState("ns/j", min_available=1, ready=4, subgroup_ready={"s0": True}, group_of={"s0": "g"},
               min_subgroups={"g": 0}), [m("x")], {WHOLE: ["x"]}),
]


@pytest.mark.parametrize(("what", "gang", "cands", "expected"), CASES, ids=[c[0] for c in CASES])
def test_safe_and_whole_bundles(what: str, gang: GangState, cands: list[Member], expected: dict[str, Any]) -> None:
    got = split(job_bundles(gang, cands))
    assert {k: sorted(v) for k, v in got.items()} == {k: sorted(v) for k, v in expected.items()}


def test_whole_bundle_costs_the_whole_job_and_safe_costs_nothing() -> None:
    gang = GangState("ns/j", min_available=2, ready=3, total={"gpu": 24 * G})
    safe, whole = job_bundles(gang, [m("a", gpu=8), m("b", gpu=8)])
    assert (safe.kind, safe.cost, safe.local) == (SAFE, {}, {"gpu": 8 * G})
    assert (whole.kind, whole.cost, whole.local) == (WHOLE, {"gpu": 24 * G}, {"gpu": 8 * G})


def bundle(kind: Kind, job: str, local: int, cost: int, name: str = "p") -> Bundle:
    return Bundle(kind, job, (m(f"{job}-{name}", gpu=local),), {"gpu": local * G}, {"gpu": cost * G} if cost else {})


def test_order_safe_first_then_victim_order_then_return() -> None:
    need = {"gpu": 8 * G}
    whole_cheap = bundle(WHOLE, "a", 8, 8)  # return 1
    whole_dear = bundle(WHOLE, "b", 8, 32)  # return 1/4
    safe_small = bundle(SAFE, "c", 2, 0)
    safe_big = bundle(SAFE, "d", 8, 0)
    ranked = rank_bundles([whole_dear, safe_small, whole_cheap, safe_big], need, lambda b: 0)
    assert [b.job for b in ranked] == ["c", "d", "a", "b"]  # safe (infinite return, by name), then by return
    by_victim = rank_bundles([whole_dear, whole_cheap], need, lambda b: {"a": 1, "b": 0}[b.job])
    assert [b.job for b in by_victim] == ["b", "a"]  # the action's victim order before the return


def test_return_caps_local_at_the_need() -> None:
    need = {"gpu": 4 * G}
    big = bundle(WHOLE, "a", 16, 16)  # capped local 1, global 4: 1/4
    small = bundle(WHOLE, "b", 4, 8)  # local 1, global 2: 1/2
    assert [b.job for b in rank_bundles([big, small], need, lambda b: 0)] == ["b", "a"]


def test_selection_stops_at_the_need_and_skips_whole_unless_allowed() -> None:
    need = {"gpu": 8 * G}
    ranked = [bundle(SAFE, "a", 4, 0), bundle(WHOLE, "b", 8, 8), bundle(SAFE, "c", 4, 0), bundle(SAFE, "d", 4, 0)]
    assert [b.job for b in select_bundles(ranked, need, allow_whole=False)] == ["a", "c"]
    assert [b.job for b in select_bundles(ranked, need, allow_whole=True)] == ["a", "b"]


def test_allowed_cuts_safe_bundles_and_drops_partly_refused_whole_ones() -> None:
    gang = GangState("ns/j", min_available=2, ready=4)
    bundles = job_bundles(gang, [m("a"), m("b"), m("c"), m("d")])
    kept = allowed_bundles(bundles, lambda x: x.key not in ("ns/a", "ns/d"))
    assert split(kept) == {SAFE: ["b"]}
