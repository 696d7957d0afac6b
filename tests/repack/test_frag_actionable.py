"""Fragmentation people can act on (issue 15 §3): per-tier HyperNode fragmentation (free of R now, the most
compacting could free, with proven bounds) and pendingByFragmentation (pending gangs that fit the free R
and their quota in total but cannot be placed), through ``optplan frag --hypernodes|--tier|--pending``."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
import yaml

from optplan.cli import main
from optplan.solvers.binpack import hyperfrag
from optplan.solvers.binpack.binpacking import min_bins
from optplan.solvers.binpack.hyperfrag import BOUNDS, OPTIMAL, capacity_bound, hypernode_fragmentation
from optplan.solvers.placement.pending import CAPACITY, FITS, FRAGMENTATION, QUOTA, free_total, pending_gangs
from tests.builders import GPU, hypernode, job_task, load, node, pod, podgroup_in, queue, vcjob


def racks(n_racks: int, per_rack: int = 2, gpu: int = 8) -> list[dict[str, Any]]:
    """Racks r0.. (tier 1) of ``per_rack`` nodes n0.. each, all under one spine (tier 2)."""
    objs: list[dict[str, Any]] = []
    for r in range(n_racks):
        names = [f"n{r * per_rack + i}" for i in range(per_rack)]
        objs += [node(n, gpu) for n in names]
        objs.append(hypernode(f"r{r}", 1, names))
    objs.append(hypernode("spine", 2, [f"r{r}" for r in range(n_racks)], "HyperNode"))
    return objs


def running(placements: list[tuple[str, int]]) -> list[dict[str, Any]]:
    """One running pod per (node, cards), in the default queue."""
    return [podgroup_in("default", "pg", 1),
            *(pod(f"p{i}", n, g) for i, (n, g) in enumerate(placements))]


def tier(objs: list[dict[str, Any]], t: int = 1) -> hyperfrag.TierFrag:
    return hypernode_fragmentation(load(*objs).snapshot, GPU, [t], time_limit=5)[0]


def test_two_racks_one_free_now_and_no_more() -> None:
    t = tier(racks(2) + running([("n0", 8), ("n1", 4)]))
    assert (len(t.hyper_nodes), t.free_now, t.freeable_lower, t.freeable_upper) == (2, ("r1",), 1, 1)
    assert t.status == OPTIMAL


def test_compacting_frees_one_more_rack() -> None:
    # r0 and r1 each hold 4 cards on one node; r2 is empty: moving one 4-card pod frees a second rack
    t = tier(racks(3) + running([("n0", 4), ("n2", 4)]))
    assert t.free_now == ("r2",)
    assert (t.freeable_lower, t.freeable_upper, t.status) == (2, 2, OPTIMAL)
    assert "r2" in t.freeable and len(t.freeable) == 2
    # the spine (tier 2) holds everything: it is never free
    spine = tier(racks(3) + running([("n0", 4), ("n2", 4)]), 2)
    assert (len(spine.hyper_nodes), spine.free_now, spine.freeable_lower, spine.freeable_upper) == (1, (), 0, 0)


def test_sizes_not_capacity_limit_what_can_be_freed() -> None:
    # 3 racks of one 8-card node; three 5-card pods: capacity alone would free one rack (24 - 15 >= 8),
    # but no node holds two 5-card pods, so none can be freed
    t = tier(racks(3, per_rack=1) + running([("n0", 5), ("n1", 5), ("n2", 5)]))
    assert t.capacity_upper == 1
    assert (t.freeable_lower, t.freeable_upper, t.status) == (0, 0, OPTIMAL)


def test_bounds_only_when_the_model_is_not_solved(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hyperfrag, "MAX_VARIABLES", 0)
    t = tier(racks(3, per_rack=1) + running([("n0", 5), ("n1", 5), ("n2", 5)]))
    assert t.status == BOUNDS
    assert (t.freeable_lower, t.freeable_upper) == (0, 1)  # free now; the capacity bound


def test_the_least_loaded_hypernodes_are_freed_first() -> None:
    # r1 holds one card, r0 and r2 four: freeing one rack, the one with least to move is named
    t = tier(racks(3) + running([("n0", 4), ("n2", 1), ("n4", 4)]))
    assert (t.freeable_lower, t.freeable_upper) == (2, 2)
    assert "r1" in t.freeable


def test_a_request_no_node_can_hold_pins_its_rack() -> None:
    # an over-committed snapshot: a 16-card pod on a 4-card node cannot move anywhere
    t = tier(racks(2, per_rack=1, gpu=4) + running([("n0", 16)]))
    assert (t.free_now, t.freeable, t.freeable_lower, t.freeable_upper) == (("r1",), ("r1",), 1, 1)


@pytest.mark.parametrize(("caps", "demand", "expected"), [
    ([8, 8, 8], 0, 3), ([8, 8, 8], 8, 2), ([8, 8, 8], 9, 1), ([4, 16], 4, 1), ([4, 16], 17, 0)])
def test_capacity_bound_frees_the_smallest_first(caps: list[int], demand: int, expected: int) -> None:
    members = {f"h{i}": [f"n{i}"] for i in range(len(caps))}
    node_caps = {f"n{i}": c for i, c in enumerate(caps)}
    assert capacity_bound(sorted(members), members, node_caps, demand) == expected


@pytest.mark.parametrize("seed", range(12))
def test_bounds_are_ordered_and_the_packing_found_frees_what_it_claims(seed: int) -> None:
    rng = random.Random(seed)
    n_racks, per_rack = rng.randint(2, 5), rng.randint(1, 3)
    objs = racks(n_racks, per_rack)
    placements = []
    for n in range(n_racks * per_rack):
        left = 8
        while rng.random() < 0.5 and left > 0:
            g = rng.choice([1, 2, 4, 8])
            if g <= left:
                placements.append((f"n{n}", g))
                left -= g
    objs += running(placements)
    snap = load(*objs).snapshot
    for t in hypernode_fragmentation(snap, GPU, time_limit=5):
        assert len(t.free_now) <= t.freeable_lower <= t.freeable_upper <= t.capacity_upper <= len(t.hyper_nodes)
        assert len(t.freeable) == t.freeable_lower and set(t.free_now) <= set(t.hyper_nodes)
        kept = {n for h in t.hyper_nodes if h not in t.freeable for n in snap.topology.members[h]}
        # every pod fits, whole, in the nodes of the HyperNodes left (an exact bin packing says so)
        caps = [snap.nodes[n].allocatable[GPU] for n in sorted(kept)]
        assert min_bins([g * 1000 for _n, g in placements], caps, time_limit=5).value <= len(caps)


# ---- pendingByFragmentation ------------------------------------------------------------------------

def pending_cluster() -> list[dict[str, Any]]:
    """Two 8-card nodes with 5 cards busy each: 6 cards free in total, at most 3 on one node."""
    return [node("a", 8), node("b", 8), *running([("a", 5), ("b", 5)]), *pending_jobs()]


def pending_jobs() -> list[dict[str, Any]]:
    return [queue("small", capability={GPU: "1"}),
            vcjob("frag", tasks=[job_task("w", 1, 4)]),            # 4 <= 6 free, but no node has 4
            vcjob("fits", tasks=[job_task("w", 2, 3)]),            # 3 + 3: one pod per node
            vcjob("quota", "small", tasks=[job_task("w", 1, 2)]),  # its queue allows 1 card
            vcjob("big", tasks=[job_task("w", 1, 8)])]             # 8 > 6 free in total


def test_gangs_pending_by_fragmentation_quota_capacity_or_fitting() -> None:
    snap = load(*pending_cluster()).snapshot
    assert free_total(snap, GPU) == 6000
    got = {g.name: (g.verdict, g.request) for g in pending_gangs(snap, GPU)}
    assert got == {"frag": (FRAGMENTATION, 4000), "fits": (FITS, 6000), "quota": (QUOTA, 2000),
                   "big": (CAPACITY, 8000)}
    why = {g.name: g.reason for g in pending_gangs(snap, GPU)}
    assert "insufficient nvidia.com/gpu" in why["frag"] and "queue small" in why["quota"]


def test_the_gang_minimum_not_every_replica_is_the_request() -> None:
    # 4 replicas of 3 cards, minAvailable 2: two pods (one per node) make it ready; it fits
    snap = load(node("a", 8), node("b", 8), *running([("a", 5), ("b", 5)]),
                vcjob("elastic", tasks=[job_task("w", 4, 3)], min_available=2)).snapshot
    [g] = pending_gangs(snap, GPU)
    assert (g.verdict, g.request) == (FITS, 6000)


# ---- the command ----------------------------------------------------------------------------------

def write(tmp_path: Path, objs: list[dict[str, Any]]) -> str:
    path = tmp_path / "snap.yaml"
    path.write_text(yaml.safe_dump_all(objs))
    return str(path)


def test_frag_command_reports_tiers_and_pending_only_when_asked(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    # every node has a card taken: 36 cards free, no node with 8
    busy = [("n0", 4), ("n2", 4), ("n1", 1), ("n3", 1), ("n4", 1), ("n5", 1)]
    f = write(tmp_path, racks(3) + running(busy) + [vcjob("frag", tasks=[job_task("w", 1, 8)]),
                                                    vcjob("never", tasks=[job_task("w", 1, 12)])])
    assert main(["frag", f, "--resource", GPU, "-o", "json"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert "hyperNodeTiers" not in plain and "pendingByFragmentation" not in plain
    assert main(["frag", f, "--resource", GPU, "-o", "json", "--hypernodes", "--pending"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {k: v for k, v in doc.items() if k in plain} == plain
    assert [(t["tier"], t["freeNow"], t["mostFreeableLowerBound"], t["mostFreeableUpperBound"])
            for t in doc["hyperNodeTiers"]] == [(1, 0, 2, 2), (2, 0, 0, 0)]
    p = doc["pendingByFragmentation"]
    assert (p["freeTotal"], p["byFragmentation"], p["byCapacity"]) == (36, 1, 1)  # 12 cards fit no node
    assert [g["name"] for g in p["gangs"]] == ["frag"] and p["gangs"][0]["request"] == 8
    assert main(["frag", f, "--resource", GPU, "--tier", "1", "--pending"]) == 0
    text = capsys.readouterr().out
    assert "MOST FREEABLE" in text and "by fragmentation 1" in text and "frag" in text
    assert main(["frag", f, "--resource", GPU, "-o", "yaml", "--tier", "2"]) == 0
    assert [t["tier"] for t in yaml.safe_load(capsys.readouterr().out)["hyperNodeTiers"]] == [2]


def test_frag_output_is_deterministic(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = write(tmp_path, racks(4) + running([("n0", 4), ("n2", 4), ("n4", 2), ("n7", 1)]) + pending_jobs())
    outs = []
    for _ in range(2):
        assert main(["frag", f, "--resource", GPU, "-o", "json", "--hypernodes", "--pending"]) == 0
        outs.append(capsys.readouterr().out)
    assert outs[0] == outs[1]


def test_a_tier_no_hypernode_has_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = write(tmp_path, racks(2) + running([("n0", 1)]))
    assert main(["frag", f, "--resource", GPU, "--tier", "3"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--tier" in err and "no HyperNode has tier 3" in err


def test_a_hard_topology_gang_split_over_racks_is_pending_by_fragmentation() -> None:
    # one card taken in each rack: 30 cards free, two whole nodes free, but never two in one rack
    hard = {"mode": "hard", "highestTierAllowed": 1}
    snap = load(*racks(2), *running([("n0", 1), ("n2", 1)]),
                vcjob("ring", tasks=[job_task("w", 2, 8)], network_topology=hard)).snapshot
    [g] = pending_gangs(snap, GPU)
    assert (g.verdict, g.request) == (FRAGMENTATION, 16000)
    assert "no region fits the gang" in g.reason
    # the same gang without topology fits now
    snap = load(*racks(2), *running([("n0", 1), ("n2", 1)]), vcjob("ring", tasks=[job_task("w", 2, 8)])).snapshot
    assert [g.verdict for g in pending_gangs(snap, GPU)] == [FITS]


def test_hypernodes_asked_of_a_snapshot_without_any(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = write(tmp_path, [node("a"), *running([("a", 1)])])
    assert main(["frag", f, "--resource", GPU, "--hypernodes"]) == 0
    assert "hypernodes          none in the snapshot" in capsys.readouterr().out
    assert main(["frag", f, "--resource", GPU, "--hypernodes", "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["hyperNodeTiers"] == []
    assert main(["frag", f, "--resource", GPU, "--tier", "1"]) == 2
    assert "(tiers: none)" in capsys.readouterr().err


def test_a_gang_larger_than_the_whole_cluster_waits_by_capacity() -> None:
    snap = load(node("a", 8), node("b", 8), vcjob("huge", tasks=[job_task("w", 3, 8)])).snapshot
    [g] = pending_gangs(snap, GPU)
    assert (g.verdict, g.request) == (CAPACITY, 24000)
