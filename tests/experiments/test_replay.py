"""optplan replay on tiny hand-made traces: allocation and waiting times computed by hand, a Repack
policy that moves a pod (and the moved pod's restart delay), the pending policy, determinism, bad input."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from optplan.cli import main
from optplan.cli.replay import load_trace
from optplan.experiments.replay.config import ReplayConfig
from optplan.experiments.replay.engine import Replay, replay
from optplan.experiments.replay.policy import Planned
from optplan.experiments.replay.trace import Trace, TraceGang, TracePod
from optplan.experiments.sim.online import SimNode
from optplan.models.snapshot import Snapshot
from optplan.solvers.placement.jobs import held_pods, jobs_to_place

HEADER = ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
          "scheduled_time\n")
SINGLE = ((1, 1.0),)  # every pod its own gang


def write(tmp: Path, nodes: list[tuple[str, int]], pods: list[tuple[str, int, int, int]],
          cpu: int = 1000) -> tuple[str, str]:
    """Nodes (name, GPUs) with 64 cores; pods (name, GPUs, created, runtime), each asking ``cpu`` milli-cores."""
    n = tmp / "nodes.csv"
    n.write_text("sn,cpu_milli,memory_mib,gpu,model\n" + "".join(f"{name},64000,262144,{g},V100\n"
                                                                  for name, g in nodes))
    p = tmp / "pods.csv"
    p.write_text(HEADER + "".join(f"{name},{cpu},1024,{g},1000,,LS,Running,{c},{c + r},{c}\n"
                                  for name, g, c, r in pods))
    return str(n), str(p)


def test_allocation_is_time_weighted(tmp_path: Path) -> None:
    # 8 GPUs. [0,50): 2 in use; [50,100): 2 + 4; [100,150): 4.  (2*50 + 6*50 + 4*50) / (8*150) = 50%
    n, p = write(tmp_path, [("n1", 4), ("n2", 4)], [("a", 2, 0, 100), ("b", 4, 50, 100)])
    r = replay(load_trace(n, p, gang_sizes=SINGLE), ReplayConfig())
    assert r.horizon == 150
    assert r.allocation_percent == 50.0
    assert r.waits["all"]["p95"] == 0


def test_waiting_time_by_gang_size(tmp_path: Path) -> None:
    # one 8-GPU node taken until t=100: the 2-card gang waits 90, the 1-card gang 80
    n, p = write(tmp_path, [("n1", 8)], [("a", 8, 0, 100), ("b", 2, 10, 50), ("c", 1, 20, 10)])
    r = replay(load_trace(n, p, gang_sizes=SINGLE), ReplayConfig())
    assert r.waits["8"]["p50"] == 0
    assert r.waits["2"]["p50"] == 90
    assert r.waits["1"]["p99"] == 80
    assert r.waits["all"]["gangs"] == 3 and r.waits["all"]["censored"] == 0


def _scattered(tmp: Path) -> tuple[str, str]:
    """Two 4-GPU nodes. a and b (3 GPUs each) fill one node each until t=10; q1 and q2 (1 GPU) land one
    on each node (binpack puts q1 on n1, the first of equals; q2 no longer fits there); at t=10 a and b
    leave: one card used on each node. The 4-card gang g arrives at t=20 and fits only once a node is
    emptied."""
    return write(tmp, [("n1", 4), ("n2", 4)],
                 [("a", 3, 0, 10), ("b", 3, 0, 10), ("q1", 1, 1, 1000), ("q2", 1, 2, 1000), ("g", 4, 20, 100)])


def test_without_repack_the_gang_waits_for_a_departure(tmp_path: Path) -> None:
    n, p = _scattered(tmp_path)
    r = replay(load_trace(n, p, gang_sizes=SINGLE), ReplayConfig())
    assert (r.start, r.end) == (0, 1101)  # the first arrival to the last event: g leaves at 1001 + 100
    assert r.gang_waits[-1][1] == 1001 - 20  # q1 leaves n1 at 1001
    assert r.pods_moved == 0 and r.repack["runs"] == 0


def test_interval_repack_moves_a_pod_and_it_restarts(tmp_path: Path) -> None:
    n, p = _scattered(tmp_path)
    trace = load_trace(n, p, gang_sizes=SINGLE)
    run = Replay(trace, ReplayConfig(policy="interval", interval=60, restart_delay=30, restart="pod", checkpoint=0))
    r = run.run()
    assert r.pods_moved == 1 and r.cards_disrupted == 1
    assert r.repack["runs"] == 1 and r.repack["runsWithMoves"] == 1 and r.repack["freedNodes"] == 1
    assert r.gang_waits[-1][1] == 60 - 20  # the gang starts at the first Repack run
    ends = {run.pod_name[k]: run.end[k] for k in range(len(run.end))}
    assert sorted([ends["q1"] - 1001, ends["q2"] - 1002]) == [0, 30]  # the moved one lost 30 s


def test_pending_policy_repacks_when_a_gang_waits_by_fragmentation(tmp_path: Path) -> None:
    n, p = _scattered(tmp_path)
    r = replay(load_trace(n, p, gang_sizes=SINGLE), ReplayConfig(policy="pending", pending_after=15, interval=600))
    assert r.repack["pendingChecks"] == 1 and r.repack["runs"] == 1
    assert r.gang_waits[-1][1] == 15
    assert r.pods_moved == 1


@pytest.mark.parametrize("planner", ["karpenter", "cluster-autoscaler"])
def test_a_peer_plan_that_breaks_a_rule_is_not_carried_out(tmp_path: Path, planner: str) -> None:
    # maxPerRun.podGroups 0: the peers know no budget, so their one move breaks it; the replay refuses the plan
    n, p = _scattered(tmp_path)
    r = replay(load_trace(n, p, gang_sizes=SINGLE), ReplayConfig(policy="interval", interval=60, planner=planner,
                                                                 max_per_run={"podGroups": 0}, time_limit=2))
    assert r.repack["ruleBreaks"] >= 1 and r.repack["refusedPlans"] >= 1
    assert r.pods_moved == 0


def test_the_pending_policy_moves_only_what_the_waiting_gang_needs(tmp_path: Path) -> None:
    """Three 4-card nodes, one long 1-card pod on each (a, b, c spread them, then leave at t=10); a 4-card
    gang arrives at t=20. A plain Repack frees two nodes (two moves); the pending policy's admit goal names
    the gang and moves one pod, which is all the gang needs."""
    n, p = write(tmp_path, [("n1", 4), ("n2", 4), ("n3", 4)],
                 [("a", 3, 0, 10), ("b", 3, 0, 10), ("c", 3, 0, 10), ("q1", 1, 1, 1000), ("q2", 1, 2, 1000),
                  ("q3", 1, 3, 1000), ("g", 4, 20, 100)])
    trace = load_trace(n, p, gang_sizes=SINGLE)
    plain = replay(trace, ReplayConfig(policy="interval", interval=60))
    assert plain.pods_moved == 2
    admit = replay(trace, ReplayConfig(policy="pending", pending_after=15, interval=600))
    assert admit.pods_moved == 1 and admit.gang_waits[-1][1] == 15


@pytest.mark.parametrize("planner", ["karpenter", "cluster-autoscaler", "auto"])
def test_other_planners_free_the_node(tmp_path: Path, planner: str) -> None:
    n, p = _scattered(tmp_path)
    r = replay(load_trace(n, p, gang_sizes=SINGLE), ReplayConfig(policy="interval", interval=60, planner=planner,
                                                                 time_limit=2))
    assert r.pods_moved == 1
    assert r.gang_waits[-1][1] == 40


def test_descheduler_moves_nothing_when_every_node_is_a_source(tmp_path: Path) -> None:
    # both nodes are under its 50% threshold: no capacity outside the sources to pool, nothing evicted
    n, p = _scattered(tmp_path)
    r = replay(load_trace(n, p, gang_sizes=SINGLE), ReplayConfig(policy="interval", interval=60, planner="descheduler"))
    assert r.repack["runs"] == 1 and r.repack["status:BASELINE/Baseline"] == 1
    assert r.pods_moved == 0


def test_budget_zero_moves_nothing(tmp_path: Path) -> None:
    n, p = _scattered(tmp_path)
    r = replay(load_trace(n, p, gang_sizes=SINGLE),
               ReplayConfig(policy="interval", interval=60, max_per_run={"podGroups": 0}))
    assert r.pods_moved == 0 and r.gang_waits[-1][1] == 981


def test_gang_waits_are_in_creation_order(tmp_path: Path) -> None:
    n, p = _scattered(tmp_path)
    r = replay(load_trace(n, p, gang_sizes=SINGLE), ReplayConfig())
    assert [cards for cards, _w, _c in r.gang_waits] == [3, 3, 1, 1, 4]


def _digest(d: Path) -> dict[str, str]:
    return {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted(d.iterdir())}


def test_same_input_same_bytes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    n, p = _scattered(tmp_path)
    args = ["replay", "--nodes", n, "--pods", p, "--policy", "none,interval", "--interval", "1", "-o"]
    assert main([*args, str(tmp_path / "a")]) == 0
    assert main([*args, str(tmp_path / "b")]) == 0
    a, b = _digest(tmp_path / "a"), _digest(tmp_path / "b")
    assert a == b
    assert {"report.md", "results.json"} <= set(a)
    assert "interval 1m greedy" in (tmp_path / "a" / "report.md").read_text()


@pytest.mark.parametrize("pods_text, extra, message", [
    ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time\na,1,1,1,1000,0\n", [], "scheduled_time"),
    (HEADER + "a,1000,1024,1,1000,,LS,Running,0,100,x\n", [], "expected an integer"),
    (HEADER + "a,1000,1024,1,1000,,LS,Running,0,50,60\n", [], "negative runtime"),
    (HEADER + "a,1000,1024,1,1000,,LS,Running,0,100,0\n", ["--policy", "sometimes"], "unknown policy"),
    (HEADER + "a,1000,1024,1,1000,,LS,Running,0,100,0\n", ["--planner", "magic"], "unknown planner"),
    (HEADER + "a,1000,1024,1,1000,,LS,Running,0,100,0\n", ["--restart-delay", "-5"], "restart-delay"),
])
def test_bad_input_is_one_line_exit_2_nothing_written(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      pods_text: str, extra: list[str], message: str) -> None:
    n, _p = write(tmp_path, [("n1", 4)], [])
    pods = tmp_path / "bad.csv"
    pods.write_text(pods_text)
    out = tmp_path / "out"
    assert main(["replay", "--nodes", n, "--pods", str(pods), "-o", str(out), *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not out.exists()


def test_speedup_and_repeat_compress_arrivals_not_runtimes(tmp_path: Path) -> None:
    n, p = write(tmp_path, [("n1", 4)], [("a", 1, 0, 100), ("b", 2, 1000, 50)])
    t = load_trace(n, p, gang_sizes=SINGLE, speedup=10, repeat=2)
    assert [(g.created, g.pods[0].name, g.pods[0].runtime) for g in t.gangs] == [
        (0.0, "a", 100.0), (100.0, "b", 50.0), (100.1, "a-r2", 100.0), (200.1, "b-r2", 50.0)]
    assert t.stats["repeat"] == 2


def test_restart_gang_restarts_every_pod_of_the_moved_pods_gang(tmp_path: Path) -> None:
    # as _scattered, but q1 and q2 form one gang (sizes of 2): it starts whole at t=1, one pod per node
    n, p = _scattered(tmp_path)
    trace = load_trace(n, p, gang_sizes=((2, 1.0),))
    assert [len(g.pods) for g in trace.gangs] == [2, 2, 1]
    run = Replay(trace, ReplayConfig(policy="interval", interval=60, restart_delay=30, restart="gang", checkpoint=0))
    r = run.run()
    assert r.pods_moved == 1 and r.cards_disrupted == 2
    ends = {run.pod_name[k]: run.end[k] for k in range(len(run.end))}
    assert ends["q1"] == ends["q2"] == 1 + 1000 + 30
    assert r.gang_waits[-1][1] == 40


def _gang(name: str, created: float, gpu: int, min_member: int, runtimes: tuple[float, ...]) -> TraceGang:
    return TraceGang(name, created, 1000, 1024, gpu, (), min_member,
                     tuple(TracePod(f"{name}{i}", r) for i, r in enumerate(runtimes)))


def _finished_gang_trace() -> Trace:
    """Two 4-GPU nodes. b (one pod) lands on n1 at t=0; gang a (4 one-card pods, minMember 3) at t=1: three
    on n1, one (a3) on n2; a0–a2 leave at t=6, so a's minimum is served by pods that finished and a3 runs
    on. The 4-card gang g arrives at t=20: one of b0 and a3 must move."""
    nodes = (SimNode("n1", 64000, 262144, 4, "V100"), SimNode("n2", 64000, 262144, 4, "V100"))
    return Trace("t", nodes, (_gang("b", 0, 1, 1, (1000,)), _gang("a", 1, 1, 3, (5, 5, 5, 1000)),
                              _gang("g", 20, 4, 1, (100,))))


def test_a_running_gangs_podgroup_and_vcjob_count_only_the_pods_left() -> None:
    """Volcano counts a finished (Succeeded) pod toward its gang: a's three finished pods serve its minimum,
    so the snapshot's PodGroup asks nothing more of a3 and the VCJob lists one replica (it listed four, the
    finished ones read as pending). Moving a3 then takes no gang below its minimum; moving b0 does, so the
    Repack run moves a3 (it moved b0 when a3's PodGroup still asked for 3 running pods). a3 is the VCJob's
    replica a-worker-0 in the snapshot, held: no running gang has pods to place."""
    run = Replay(_finished_gang_trace(), ReplayConfig(policy="interval", interval=60))
    moved: list[str] = []
    apply = run.apply

    def record(planned: Planned, t: float, snap: Snapshot) -> None:
        a = snap.pod_groups["replay/a"]
        job = snap.jobs["replay/a"]
        assert (a.min_member, job.replicas, job.min_available) == (0, 1, 0)
        assert snap.pod_groups["replay/b"].min_member == 1 and snap.jobs["replay/b"].replicas == 1
        assert held_pods(job, snap) == {"worker": {0: snap.pods["replay/a-worker-0"]}}
        assert snap.pods["replay/a-worker-0"].node_name == "n2" and jobs_to_place(snap) == []
        moved.extend(m.pod for m in planned.moves)
        apply(planned, t, snap)

    run.apply = record  # type: ignore[method-assign]
    r = run.run()
    assert moved == ["replay/a-worker-0"] and r.cards_disrupted == 1
    assert r.gang_waits[-1][1] == 60 - 20


@pytest.mark.parametrize(("restart", "to_place"), [("RestartJob", ["replay/c"]), ("RestartTask", ["replay/c"]),
                                                  (None, [])])
def test_a_running_gang_has_pods_to_place_only_when_one_waits(restart: str | None, to_place: list[str]) -> None:
    """One 4-GPU node: d's pod (1 card) and c0 (3 cards) run, c1 (3 cards, c's minimum is 1) waits. The
    snapshot's running pods are their VCJobs' replicas that run (``<gang>-worker-<i>``): placement reads c
    as having one pod to place and d none (it read both as wholly pending, their pods named otherwise);
    without a restart policy a running gang has no VCJob."""
    node = (SimNode("n1", 64000, 262144, 4, "V100"),)
    run = Replay(Trace("t", node, (_gang("d", 0, 1, 1, (1000,)), _gang("c", 1, 3, 1, (1000, 1000)))),
                 ReplayConfig(horizon=10))
    run.run()
    running = run.running()
    snap = run.builder.build(running, restart=restart, finished=run.finished(running))
    assert sorted(snap.pods) == ["replay/c-worker-0", "replay/d-worker-0"]
    assert [j.key for j in jobs_to_place(snap)] == to_place
    if restart is not None:
        assert {t: sorted(ps) for t, ps in held_pods(snap.jobs["replay/c"], snap).items()} == {"worker": [0]}
        assert run.pod_name[run.named["c-worker-0"]] == "c0"


@pytest.mark.parametrize(("cards", "wait", "runs"), [(4, 15, 1), (5, 981, 0)])
def test_pending_cards_watches_only_gangs_that_large(tmp_path: Path, cards: int, wait: float, runs: int) -> None:
    # g asks 4 cards: a trigger on gangs of 4+ cards acts for it, one on 5+ leaves it to wait for q1 (as none)
    n, p = _scattered(tmp_path)
    r = replay(load_trace(n, p, gang_sizes=SINGLE),
               ReplayConfig(policy="pending", pending_after=15, interval=600, pending_cards=cards))
    assert r.gang_waits[-1][1] == wait and r.repack["runs"] == runs
    assert r.config["pendingCards"] == cards
