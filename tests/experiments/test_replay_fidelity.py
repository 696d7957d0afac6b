"""The replay schedules as optplan's placement greedy does (issue 16 §1: "scheduling by optplan's placement
greedy"): on seeded small traces whose pods all arrive before any leaves, every gang lands on the same nodes in
the replay as in ``placement.allocate.greedy_place`` run on the same cluster with the same gangs pending in
arrival order, and the same gangs wait."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest

from optplan.cli.replay import load_trace
from optplan.experiments.replay.config import ReplayConfig
from optplan.experiments.replay.engine import Replay
from optplan.models.placement import BinpackWeights
from optplan.solvers.placement.allocate import greedy_place
from optplan.solvers.placement.context import Context
from tests.experiments.test_replay import write


@pytest.mark.parametrize("seed", range(12))
def test_the_replay_places_every_gang_where_the_placement_greedy_does(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    nodes = [(f"n{i}", rng.choice([2, 4, 8])) for i in range(rng.randint(3, 6))]
    total = sum(g for _n, g in nodes)
    pods = [(f"p{k:02d}", rng.choice([1, 1, 2, 4]), 10 * (k + 1), 100_000) for k in range(rng.randint(4, total))]
    n, p = write(tmp_path, nodes, pods)
    sizes = ((1, 0.6), (2, 0.4))
    trace = load_trace(n, p, gang_sizes=sizes, seed=seed)
    last = max(g.created for g in trace.gangs)
    run = Replay(trace, ReplayConfig(horizon=last + 1))
    run.run()
    names = run.cluster.names
    replayed: dict[str, Counter[str]] = {}
    for pid, node in enumerate(run.node):
        if node >= 0:
            replayed.setdefault(run.gangs[run.pod_gang[pid]].g.name, Counter())[names[node]] += 1
    snap = run.builder.build([], [g for g in sorted(trace.gangs, key=lambda g: (g.created, g.name))])
    ctx = Context.build(snap, list(snap.jobs.values()), BinpackWeights())
    plan = greedy_place(ctx)
    greedy = {jp.name: Counter(b.node for b in jp.bindings) for jp in plan.jobs if jp.admitted}
    assert replayed == greedy
