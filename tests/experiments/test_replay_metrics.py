"""The replay's honest metrics on hand-worked traces: censored waits and the Kaplan–Meier percentile,
useful GPU time against restore and lost time, RestartJob losing the work since the last checkpoint,
the gang spread rule and passes that never join, the measured window's start; then two properties on
seeded traces: useful + restore + lost + idle = GPUs × window, and the incremental retry path gives the
replay the former full rescan gives."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from optplan.cli.replay import load_trace
from optplan.experiments.replay.config import ReplayConfig
from optplan.experiments.replay.engine import Replay, replay
from tests.experiments.test_replay import SINGLE, _scattered, write


def test_a_gang_still_waiting_is_censored_and_hides_the_percentile(tmp_path: Path) -> None:
    # one 8-GPU node held by a until 100; b (8 cards) arrives at 10; the replay stops at 50
    n, p = write(tmp_path, [("n1", 8)], [("a", 8, 0, 100), ("b", 8, 10, 50)])
    r = replay(load_trace(n, p, gang_sizes=SINGLE), ReplayConfig(horizon=50))
    w = r.waits["all"]
    assert (w["gangs"], w["censored"]) == (2, 1)
    assert w["p50"] == 0 and w["p95"] is None  # the naive percentile said 40 s
    assert w["restrictedMean"] == 20.0 and w["restrictedTo"] == 40.0  # (0 + 40) / 2, b counted 40 so far
    c = r.completions["all"]
    assert c["censored"] == 2 and c["p50"] is None  # nobody finished by 50


def test_completion_runs_from_creation_to_the_last_pod_leaving(tmp_path: Path) -> None:
    n, p = write(tmp_path, [("n1", 8)], [("a", 8, 0, 100), ("b", 2, 10, 50)])
    r = replay(load_trace(n, p, gang_sizes=SINGLE), ReplayConfig())
    assert r.waits["2"]["p50"] == 90 and r.completions["2"]["p50"] == 90 + 50
    assert r.completions["8"]["p50"] == 100 and r.completions["all"]["censored"] == 0


def _moved(run: Replay) -> int:
    return next(k for k in range(len(run.end)) if run.ver[k] > 1)


def test_restore_and_lost_time_are_apart_from_useful_time(tmp_path: Path) -> None:
    # _scattered: at t=60 Repack moves q1 or q2 (1 card); without checkpoints it loses all its work so far
    n, p = _scattered(tmp_path)
    run = Replay(load_trace(n, p, gang_sizes=SINGLE),
                 ReplayConfig(policy="interval", interval=60, restart_delay=30, restart="pod", checkpoint=None))
    r = run.run()
    k = _moved(run)
    placed = {"q1": 1, "q2": 2}[run.pod_name[k]]
    assert r.gpu_seconds["restore"] == 30 and r.gpu_seconds["lost"] == 60 - placed
    assert run.end[k] == 60 + 30 + 1000  # all of its 1000 s again after the restore
    held = r.allocation_percent * r.gpus * r.horizon / 100
    assert r.gpu_seconds["useful"] == pytest.approx(held - 30 - (60 - placed), rel=1e-5)


def test_restart_job_restarts_the_gang_from_its_last_checkpoint(tmp_path: Path) -> None:
    # q1 and q2 one gang placed at t=1; the move at t=60 restarts both (RestartJob); checkpoints every 25 s
    # of work: 59 s done, 50 kept, 9 lost each; each restores 30 s, then 950 s of work are left
    n, p = _scattered(tmp_path)
    trace = load_trace(n, p, gang_sizes=((2, 1.0),))
    run = Replay(trace, ReplayConfig(policy="interval", interval=60, restart_delay=30, checkpoint=25))
    r = run.run()
    assert run.cfg.restart == "RestartJob"
    ends = {run.pod_name[k]: run.end[k] for k in range(len(run.end))}
    assert ends["q1"] == ends["q2"] == 60 + 30 + 950
    assert r.gpu_seconds["lost"] == 2 * 9 and r.gpu_seconds["restore"] == 2 * 30
    assert r.pods_moved == 1 and r.cards_disrupted == 2
    # the gang completes when its last pod leaves: created at 1, done at 1040
    assert r.completions["2"]["p50"] == 1040 - 1
    # with the pod policy only the moved pod restarts
    alone = Replay(trace, ReplayConfig(policy="interval", interval=60, restart_delay=30, checkpoint=25,
                                       restart="pod")).run()
    assert alone.cards_disrupted == 1 and alone.gpu_seconds["lost"] == 9


@pytest.mark.parametrize("policy, restarted", [("RestartJob", 2), ("RestartTask", 2), ("ServingGroupRecreate", 2),
                                               ("pod", 1)])
def test_each_restart_policy_restarts_what_repack_s_rule_says(tmp_path: Path, policy: str, restarted: int) -> None:
    n, p = _scattered(tmp_path)
    trace = load_trace(n, p, gang_sizes=((2, 1.0),))
    r = replay(trace, ReplayConfig(policy="interval", interval=60, restart_delay=30, checkpoint=25, restart=policy))
    assert r.pods_moved == 1 and r.cards_disrupted == restarted
    assert r.gpu_seconds["restore"] == 30 * restarted


def test_a_gang_spans_at_most_the_spread_and_passes_never_join(tmp_path: Path) -> None:
    n, p = write(tmp_path, [("n1", 8)], [("a", 1, 0, 10), ("b", 1, 30, 10), ("c", 1, 200, 10), ("d", 1, 230, 10)])
    sizes = ((4, 1.0),)
    assert [len(g.pods) for g in load_trace(n, p, gang_sizes=sizes).gangs] == [2, 2]  # 60 s at most
    assert [len(g.pods) for g in load_trace(n, p, gang_sizes=sizes, gang_spread=None).gangs] == [4]  # as before
    assert [len(g.pods) for g in load_trace(n, p, gang_sizes=sizes, gang_spread=300).gangs] == [4]
    two = tmp_path / "two"
    two.mkdir()
    n2, p2 = write(two, [("n1", 8)], [("a", 1, 0, 10), ("b", 1, 1, 10)])
    t = load_trace(n2, p2, gang_sizes=sizes, repeat=2)  # pass 2 is created at 2 and 3: within the spread
    assert [[pod.name for pod in g.pods] for g in t.gangs] == [["a", "b"], ["a-r2", "b-r2"]]


def test_the_window_starts_at_the_first_arrival_plus_the_warmup(tmp_path: Path) -> None:
    n, p = write(tmp_path, [("n1", 4)], [("a", 4, 1000, 100)])
    trace = load_trace(n, p, gang_sizes=SINGLE)
    r = replay(trace, ReplayConfig())
    assert (r.start, r.end) == (1000, 1100) and r.percent("useful") == 100.0 and r.percent("idle") == 0.0
    w = replay(trace, ReplayConfig(warmup=50))
    assert (w.start, w.end) == (1050, 1100) and w.percent("useful") == 100.0
    assert w.waits["all"]["gangs"] == 0  # a was created before the window
    s = replay(trace, ReplayConfig(horizon=1200))
    assert (s.start, s.end) == (1000, 1200) and s.percent("useful") == 50.0 and s.percent("idle") == 50.0


# ---- properties on seeded traces ---------------------------------------------------------------

MODELS = ("V100", "T4")


def _random_trace(tmp: Path, seed: int) -> tuple[str, str]:
    """Five nodes of 4 or 8 GPUs and two models; 60 pods of 1, 2, 4 or 8 GPUs, some pinned to a model,
    arriving faster than they leave."""
    rng = random.Random(seed)
    nodes = tmp / "nodes.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\n" + "".join(
        f"n{i},64000,262144,{rng.choice((4, 8))},{MODELS[i % 2]}\n" for i in range(5)))
    pods = tmp / "pods.csv"
    rows = []
    t = 0
    for k in range(60):
        t += rng.randrange(0, 40)
        g = rng.choice((1, 1, 2, 4, 8))
        spec = rng.choice(("", "", "V100", "T4"))
        rows.append(f"p{k:03d},{rng.choice((1000, 8000))},1024,{g},1000,{spec},LS,Running,{t},"
                    f"{t + rng.randrange(30, 900)},{t}\n")
    pods.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
                    "deletion_time,scheduled_time\n" + "".join(rows))
    return str(nodes), str(pods)


CONFIGS = [ReplayConfig(), ReplayConfig(policy="interval", interval=120, checkpoint=60),
           ReplayConfig(policy="interval", interval=90, restart="pod", checkpoint=None, restart_delay=45),
           ReplayConfig(policy="pending", pending_after=30, interval=120, checkpoint=0, horizon=900),
           ReplayConfig(policy="interval", interval=60, warmup=100, horizon=1500)]


@pytest.mark.parametrize("seed", range(4))
def test_useful_restore_lost_and_idle_add_up_to_the_capacity(tmp_path: Path, seed: int) -> None:
    n, p = _random_trace(tmp_path, seed)
    trace = load_trace(n, p, seed=seed, gang_sizes=((1, 0.5), (2, 0.3), (4, 0.2)))
    for cfg in CONFIGS:
        r = replay(trace, cfg)
        parts = r.gpu_seconds
        assert all(v >= -1e-6 for v in parts.values()), (cfg.label(), parts)
        assert sum(parts.values()) == pytest.approx(r.gpus * r.horizon, rel=1e-9)


@pytest.mark.parametrize("seed", range(4))
def test_incremental_retries_give_the_rescan_s_replay(tmp_path: Path, seed: int) -> None:
    n, p = _random_trace(tmp_path, seed)
    trace = load_trace(n, p, seed=seed, gang_sizes=((1, 0.4), (2, 0.3), (4, 0.3)))
    for cfg in CONFIGS:
        new = Replay(trace, cfg).run().to_dict()
        old = Replay(trace, cfg, rescan=True).run().to_dict()
        assert json.dumps(new, sort_keys=True) == json.dumps(old, sort_keys=True)
        assert new["waitSeconds"]["all"]["gangs"] > 0
