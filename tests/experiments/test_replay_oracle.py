"""The replay's ceiling (``oracle``: free, instant repacking at every event), the ``nobinpack`` baseline and
each policy's share of the oracle's gain, on tiny hand-made traces whose answers are worked out by hand."""

from __future__ import annotations

import itertools
from collections import Counter
from pathlib import Path

import pytest

from optplan.cli.replay import load_trace
from optplan.experiments.replay import report
from optplan.experiments.replay.config import ReplayConfig
from optplan.experiments.replay.engine import replay
from optplan.experiments.replay.oracle import cards_from, gpu_room, packable, share_of_gain
from tests.experiments.test_replay import SINGLE, _scattered, write


def _brute_packable(pods: list[int], nodes: list[int]) -> bool:
    """Every assignment of pods to nodes (tiny cases only)."""
    for where in itertools.product(range(len(nodes)), repeat=len(pods)):
        load = [0] * len(nodes)
        for p, n in zip(pods, where, strict=True):
            load[n] += p
        if all(lo <= cap for lo, cap in zip(load, nodes, strict=True)):
            return True
    return not pods


@pytest.mark.parametrize("nodes", [[8], [4, 4], [8, 2, 1], [4, 2, 2, 1], [2, 2, 2]])
def test_the_count_condition_is_exact_for_powers_of_two(nodes: list[int]) -> None:
    sizes = [1, 2, 4, 8]
    for combo in itertools.chain.from_iterable(itertools.combinations_with_replacement(sizes, k) for k in range(5)):
        pods = list(combo)
        assert packable(Counter(pods), nodes) == _brute_packable(pods, nodes), (pods, nodes)


@pytest.mark.parametrize(("running", "nodes", "size", "room"), [
    ({1: 2}, [4, 4], 4, 1),       # 1+1 on one node, the other free: one 4-card pod more
    ({1: 2}, [4, 4], 1, 6),
    ({2: 1, 1: 1}, [4, 4], 4, 1),
    ({4: 1}, [8, 2], 4, 1),       # a 4-card pod does not fit the 2-card node
    ({}, [8, 2, 1], 2, 5),        # 8 / 2 = 4 on the 8-card node, 1 on the 2-card one
    ({8: 1}, [8], 1, 0),
])
def test_gpu_room(running: dict[int, int], nodes: list[int], size: int, room: int) -> None:
    assert gpu_room(Counter(running), nodes, size) == room
    assert gpu_room(Counter(running), nodes, size, cards_from(nodes)) == room


def test_the_oracle_starts_the_gang_at_once_with_no_move(tmp_path: Path) -> None:
    # _scattered: a 4-card gang waits for a departure (t=1001) without Repack, 40 s with one every minute;
    # the oracle repacks the two 1-card pods onto one node at t=20 for free
    n, p = _scattered(tmp_path)
    trace = load_trace(n, p, gang_sizes=SINGLE)
    none = replay(trace, ReplayConfig())
    oracle = replay(trace, ReplayConfig(policy="oracle"))
    interval = replay(trace, ReplayConfig(policy="interval", interval=60, restart_delay=30))
    assert oracle.gang_waits[-1][1] == 0
    assert oracle.pods_moved == 0 and oracle.cards_disrupted == 0 and oracle.repack["runs"] == 0
    assert none.gang_waits[-1][1] == 981 and interval.gang_waits[-1][1] == 40
    share = share_of_gain(interval.summary()["waitMeanMinutes8"] or 0, none.summary()["waitMeanMinutes8"] or 0,
                          oracle.summary()["waitMeanMinutes8"] or 0)
    assert share is None  # no 8-card gang in this trace: nothing to compare
    gain = share_of_gain(interval.gang_waits[-1][1], none.gang_waits[-1][1], oracle.gang_waits[-1][1])
    assert gain == pytest.approx(100 * (40 - 981) / (0 - 981))


def test_the_oracle_admits_nothing_that_cannot_fit(tmp_path: Path) -> None:
    # 2 + 3 GPUs on two 4-card nodes: 3 free in all, but a 4-card pod never fits (nor 3 + 1 repacked)
    n, p = write(tmp_path, [("n1", 4), ("n2", 4)], [("a", 2, 0, 100), ("b", 3, 0, 100), ("g", 4, 10, 10)])
    r = replay(load_trace(n, p, gang_sizes=SINGLE), ReplayConfig(policy="oracle"))
    assert r.gang_waits[-1][1] == 90  # starts when a and b leave at t=100


def test_the_oracle_pools_cpu_but_respects_its_total(tmp_path: Path) -> None:
    # each pod asks 40 of a node's 64 cores: one per node for Volcano; the oracle pools cpu (128 cores in
    # all, a relaxation), so three start at once and the fourth (160 > 128) waits for a departure
    n, p = write(tmp_path, [("n1", 4), ("n2", 4)], [("a", 1, 0, 100), ("b", 1, 0, 100), ("c", 1, 0, 100),
                                                   ("d", 1, 0, 100)], cpu=40000)
    trace = load_trace(n, p, gang_sizes=SINGLE)
    assert [w[1] for w in replay(trace, ReplayConfig()).gang_waits] == [0, 0, 100, 100]
    assert [w[1] for w in replay(trace, ReplayConfig(policy="oracle")).gang_waits] == [0, 0, 0, 100]


def test_nobinpack_spreads_where_binpack_packs(tmp_path: Path) -> None:
    # two 1-card pods then a 4-card one on two 4-card nodes: binpack stacks the small ones on n1 and the
    # big one starts at once; leastrequested spreads them (one per node) and the big one waits for a departure
    n, p = write(tmp_path, [("n1", 4), ("n2", 4)], [("a", 1, 0, 100), ("b", 1, 1, 100), ("g", 4, 2, 10)])
    trace = load_trace(n, p, gang_sizes=SINGLE)
    assert replay(trace, ReplayConfig()).gang_waits[-1][1] == 0
    spread = replay(trace, ReplayConfig(policy="nobinpack"))
    assert spread.gang_waits[-1][1] == 98 and spread.label == "nobinpack"


def test_the_report_shows_each_policys_share_of_the_oracles_gain(tmp_path: Path) -> None:
    n, p = _scattered(tmp_path)
    trace = load_trace(n, p, gang_sizes=SINGLE)
    results = [replay(trace, ReplayConfig(policy=pol, interval=60)) for pol in ("none", "interval", "oracle")]
    md = report.markdown(results, {}, timings=False)
    assert "## Share of the oracle's gain" in md
    assert "| oracle | 100% |" in md and "| none | 0% |" in md
