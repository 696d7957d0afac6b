"""The replay with shares (``optplan replay --shared``): fractional pods kept as shares of one GPU, placed at
device level by ``gpushare``'s rule (``replay.cluster``), useful allocation counting their milli-GPU, the Repack
policies moving whole-card pods and shares, each share to the device its plan names (``replay.engine``), and
bad input one line, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from optplan.cli import main
from optplan.cli.replay import load_trace
from optplan.errors import PlanInvalidError
from optplan.experiments.replay.cluster import Cluster
from optplan.experiments.replay.config import ReplayConfig
from optplan.experiments.replay.engine import Replay, replay
from optplan.experiments.replay.trace import TraceGang, TracePod
from optplan.experiments.sim.online import SimNode
from optplan.models.placement import BinpackWeights
from tests.experiments.test_replay import HEADER, SINGLE

Pod = tuple[str, int, int, int, int]
"""name, GPUs, milli-GPU each, created, runtime"""


def write(tmp: Path, nodes: list[tuple[str, int]], pods: list[Pod]) -> tuple[str, str]:
    n = tmp / "nodes.csv"
    n.write_text("sn,cpu_milli,memory_mib,gpu,model\n" + "".join(f"{name},64000,262144,{g},V100\n"
                                                                  for name, g in nodes))
    p = tmp / "pods.csv"
    p.write_text(HEADER + "".join(f"{name},1000,1024,{g},{m},,LS,Running,{c},{c + r},{c}\n"
                                  for name, g, m, c, r in pods))
    return str(n), str(p)


def gang(name: str, gpu: int = 1, milli: int = 1000, pods: int = 1) -> TraceGang:
    return TraceGang(name, 0.0, 1000, 1024, gpu, (), pods, tuple(TracePod(f"{name}-{k}", 10.0) for k in range(pods)),
                     milli=milli)


def test_shares_sit_on_devices_by_best_fit_and_whole_cards_need_untouched_ones() -> None:
    c = Cluster([SimNode("n1", 64000, 262144, 2, "V100")], BinpackWeights())
    whole, s6, s3, s5 = (c.sim_pod(g) for g in (gang("w"), gang("a", milli=600), gang("b", milli=300),
                                                  gang("c", milli=500)))
    c.take(0, whole)  # device 0, before any share: device accounting starts at the first share
    c.take(0, s6)  # device 1
    assert c.devices().tolist() == [[0, 400]] and c.cl.free[0, 2] == 0
    assert c.room(s3) == 1 and c.room(s5) == 0 and not c.fits(s5).any() and not c.fits(whole).any()
    c.take(0, s3)  # the tightest device that takes it: device 1 (100 left)
    assert c.devices().tolist() == [[0, 100]] and c.allocated == pytest.approx(1.9)
    c.give_back(0, whole)
    assert c.devices().tolist() == [[1000, 100]] and c.cl.free[0, 2] == 1 and c.fits(whole).all()
    c.give_back(0, s6)
    c.give_back(0, s3)
    assert c.devices().tolist() == [[1000, 1000]] and c.cl.free[0, 2] == 2 and c.allocated == 0


def test_a_share_lands_on_the_named_device_checked() -> None:
    c = Cluster([SimNode("n1", 64000, 262144, 3, "V100")], BinpackWeights())
    w, s6, s3 = (c.sim_pod(g) for g in (gang("w"), gang("a", milli=600), gang("b", milli=300)))
    c.take(0, s6)  # device 0
    c.take(0, w)  # device 1
    c.give_back(0, s6)
    c.take(0, s6, 2)  # the plan's device
    assert c.devices().tolist() == [[1000, 0, 400]]
    with pytest.raises(PlanInvalidError, match="GPU 2 of n1 has not 600 milli-GPU free"):
        c.take(0, s6, 2)
    # a snapshot sees the whole card on device 0 (the lowest no share holds) and names device 1 for a share:
    # the card takes device 0 and the share device 1
    c.take(0, s3, 1)
    assert c.devices().tolist() == [[0, 700, 400]]
    c.give_back(0, s3, 1)
    c.give_back(0, s6, 2)
    assert c.devices().tolist() == [[0, 1000, 1000]] and c.cl.free[0, 2] == 2


def test_without_shares_no_device_state_and_integer_allocation() -> None:
    c = Cluster([SimNode("n1", 64000, 262144, 2, "V100")], BinpackWeights())
    c.take(0, c.sim_pod(gang("w")))
    assert c.dev is None and c.allocated == 1 and isinstance(c.allocated, int)


def test_useful_allocation_counts_a_shares_milli_gpu(tmp_path: Path) -> None:
    # one 2-GPU node over [0, 100): a 0.5 share all along, a whole card over [0, 50)
    n, p = write(tmp_path, [("n1", 2)], [("s", 1, 500, 0, 100), ("w", 1, 1000, 0, 50)])
    r = replay(load_trace(n, p, gang_sizes=SINGLE, shared=True), ReplayConfig())
    assert r.allocation_percent == pytest.approx(100 * (0.5 * 100 + 1 * 50) / (2 * 100))
    whole_only = replay(load_trace(n, p, gang_sizes=SINGLE), ReplayConfig())
    assert whole_only.allocation_percent == 50.0  # w alone over its own window [0, 50)


def test_shares_wait_for_a_device_with_room(tmp_path: Path) -> None:
    # one 1-GPU node: 0.6 then 0.5 (waits for the 0.6 to leave at 100), then 0.4 (fits beside the 0.6)
    n, p = write(tmp_path, [("n1", 1)], [("a", 1, 600, 0, 100), ("b", 1, 500, 10, 10), ("c", 1, 400, 20, 10)])
    r = replay(load_trace(n, p, gang_sizes=SINGLE, shared=True), ReplayConfig())
    assert [w for _, w, _ in r.gang_waits] == [0, 90, 0]


def test_repack_moves_whole_cards_and_shares_alike(tmp_path: Path) -> None:
    # three 4-GPU nodes: a and b (3 cards) fill n1 and n2 until t=10; the 0.5 share s joins a on n1 (binpack),
    # q1 takes n2's last card, q2 goes to n3. At t=10: n1 holds s, n2 q1, n3 q2; the 4-card gang g (t=20)
    # needs an empty node: the first Repack run (t=60) moves q2 and the share s (to a device of n2 its plan
    # names) onto n2, freeing n1 and n3
    n, p = write(tmp_path, [("n1", 4), ("n2", 4), ("n3", 4)],
                 [("a", 3, 1000, 0, 10), ("b", 3, 1000, 0, 10), ("s", 1, 500, 0, 1000), ("q1", 1, 1000, 1, 1000),
                  ("q2", 1, 1000, 2, 1000), ("g", 4, 1000, 20, 100)])
    trace = load_trace(n, p, gang_sizes=SINGLE, shared=True)
    run = Replay(trace, ReplayConfig(policy="interval", interval=60, restart="pod", checkpoint=0))
    r = run.run()
    assert r.pods_moved == 2 and r.repack["runsWithMoves"] == 1 and r.repack["freedNodes"] == 2
    assert run.ver[run.pod_name.index("s")] == 2  # placed, then moved (restarted) once
    assert r.gang_waits[-1][1] == 60 - 20  # g starts at the first Repack run


@pytest.mark.parametrize("planner", ["greedy", "auto"])
def test_repack_moves_a_share_to_the_device_its_plan_names_and_frees_a_node(tmp_path: Path, planner: str) -> None:
    # two 2-GPU nodes. n1: the 0.3 share t1 on device 0, the whole card w on device 1, and until t=10 the 0.5
    # share tmp beside t1; z (2 cards) holds n2 over [3, 5), so the 0.4 share l (t=6) finds no room on n1's
    # device 0 (0.2 free) and sits alone on n2. At t=10 tmp leaves: n1's device 0 has 0.7 free. The 2-card
    # gang g (t=11) needs an empty node: the first Repack run (t=60) moves l onto n1's device 0, named by
    # the plan, and g starts on n2
    n, p = write(tmp_path, [("n1", 2), ("n2", 2)],
                 [("t1", 1, 300, 0, 1000), ("w", 1, 1000, 1, 1000), ("tmp", 1, 500, 2, 8), ("z", 2, 1000, 3, 2),
                  ("l", 1, 400, 6, 1000), ("g", 2, 1000, 11, 100)])
    run = Replay(load_trace(n, p, gang_sizes=SINGLE, shared=True),
                 ReplayConfig(policy="interval", interval=60, restart="pod", checkpoint=0, planner=planner))
    r = run.run()
    assert r.pods_moved == 1 and r.repack["freedNodes"] == 1
    assert run.ver[run.pod_name.index("l")] == 2  # placed, then moved (restarted) once
    assert r.gang_waits[-1][1] == 60 - 11  # g starts at the first Repack run


def test_shared_stats_and_without_the_flag_the_trace_is_unchanged(tmp_path: Path) -> None:
    n, p = write(tmp_path, [("n1", 2)], [("s", 1, 500, 0, 100), ("w", 1, 1000, 0, 50), ("t", 2, 500, 0, 10)])
    plain, shared = load_trace(n, p), load_trace(n, p, shared=True)
    assert plain.stats["fractionalLeftOut"] == 2 and "sharedGpuPods" not in plain.stats
    assert shared.stats["fractionalLeftOut"] == 1 and shared.stats["sharedGpuPods"] == 1
    assert [(g.gpu, g.milli) for g in shared.gangs] == [(1, 500), (1, 1000)]  # t (2 x 0.5) is left out
    assert [g.milli for g in plain.gangs] == [1000]


@pytest.mark.parametrize(("extra", "words"), [
    (["--policy", "oracle"], "oracle policy counts whole cards only"),
    (["--throttle"], "--shared replays single runs only"),
])
def test_bad_combinations_are_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str],
                                              words: str) -> None:
    n, p = write(tmp_path, [("n1", 2)], [("s", 1, 500, 0, 100)])
    out = tmp_path / "out"
    assert main(["replay", "--nodes", n, "--pods", p, "--shared", "-o", str(out), *extra]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err and not out.exists()
