"""The ``pending`` policy's replays before and after the speed-ups of its fragmentation checks (the queue
accounting of a snapshot with thousands of VCJobs, the emptied cluster's accounting shared by the gangs
that hold nothing, only the named gangs judged in the admit goal's run): the same rows, byte for byte.
The digests were computed with the code before the speed-ups; a change that alters a pending replay
fails here."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from optplan.cli.replay import load_trace
from optplan.experiments.replay.config import ReplayConfig
from optplan.experiments.replay.engine import replay
from tests.experiments.test_replay_metrics import _random_trace

CONFIGS = [ReplayConfig(policy="pending", pending_after=30, interval=120),
           ReplayConfig(policy="pending", pending_after=10, interval=30, max_per_run={"podGroups": 2}),
           ReplayConfig(policy="pending", pending_after=60, interval=60, restart="pod", checkpoint=None)]


def digest(n: str, p: str, seed: int) -> list[str]:
    trace = load_trace(n, p, seed=seed, gang_sizes=((1, 0.4), (2, 0.3), (4, 0.3)))
    return [hashlib.sha256(json.dumps(replay(trace, cfg).to_dict(), sort_keys=True).encode()).hexdigest()[:16]
            for cfg in CONFIGS]


BEFORE = {
    0: ["e1cdb73678b65b2a", "ff8b464429d4f77e", "64c34f077152e117"],
    1: ["55ef1ebadeb7d148", "b2b1360bd052af47", "8b1aff8afd2e21b2"],
    2: ["c4a646b109c35f54", "d73b5eed92740992", "578cdd171d49a9b3"],
    3: ["a63f741b0a8879d1", "58577cd278812319", "20b81f38d28b1a6d"],
    4: ["3016100ff4310633", "83d9c409323176b2", "b270604d4a7ae163"],
    5: ["5ac8defc23d99db9", "996a61f050738008", "33e37cea738ebc37"],
}
"""sha256 (16 hex digits) of each config's result JSON, per seed, computed before the speed-ups."""


@pytest.mark.parametrize("seed", range(6))
def test_pending_replays_are_the_rows_of_before_the_speed_ups(tmp_path: Path, seed: int) -> None:
    n, p = _random_trace(tmp_path, seed)
    assert digest(n, p, seed) == BEFORE[seed]
