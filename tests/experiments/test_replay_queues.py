"""``optplan replay --queues``: seed 002's tenants in the replay — the mapping, admission within capability, and
placement's preempt and reclaim evicting victims that restart and count as lost work."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from optplan.cli import main
from optplan.experiments.replay import engine, report
from optplan.experiments.replay.config import ReplayConfig
from optplan.experiments.replay.engine import replay
from optplan.experiments.replay.tenants import assign, seed002
from optplan.experiments.replay.trace import Trace, TraceGang, TracePod
from optplan.experiments.sim.online import SimNode
from optplan.models.queues import Queue

GPU = "nvidia.com/gpu"
NODE = SimNode("n1", 64000, 512 * 1024, 8, "")


def gang(name: str, created: float, pods: int, min_member: int, qos: str, runtime: float = 1000.0) -> TraceGang:
    return TraceGang(name=name, created=created, cpu=1000, memory=1024, gpu=1, models=(), min_member=min_member,
                     pods=tuple(TracePod(f"{name}-p{i}", runtime) for i in range(pods)), qos=qos)


def tree(team_cap: int = 8) -> list[Queue]:
    """One tenant: a team leaf under its subscription parent, and a spot queue (GPUs)."""
    labels = {"platform.io/tenant": "t"}
    return [
        Queue(name="t-subscription", labels={**labels, "platform.io/billing-type": "subscription"},
              deserved={GPU: 8000}, capability={GPU: 8000}),
        Queue(name="team-a", parent="t-subscription", deserved={GPU: team_cap * 1000},
              capability={GPU: team_cap * 1000}),
        Queue(name="t-spot", labels={**labels, "platform.io/billing-type": "spot"}, deserved={GPU: 0},
              capability={GPU: 8000}),
    ]


def run(gangs: list[TraceGang], queues: list[Queue] | None = None, **cfg: object) -> dict:
    trace = Trace("t", (NODE,), tuple(gangs))
    ten = assign(trace, queues or tree(), large_cards=16, debug_share=0.0)
    return replay(trace, ReplayConfig(**cfg), tenancy=ten).to_dict()  # type: ignore[arg-type]


def test_seed002_at_128_gpus_is_the_seed_s_tree_with_the_spot_formula() -> None:
    nodes = [SimNode(f"n{i}", 64000, 512 * 1024, 8, "") for i in range(16)]
    q = {x.name: x for x in seed002(nodes)}
    assert q["team-a"].deserved[GPU] == 20_000 and q["team-a"].capability[GPU] == 40_000
    assert q["tenant-alpha-payg"].deserved == q["tenant-alpha-payg"].capability == {GPU: 24_000}
    # spot: (128 - 64 subscribed) x subscription share, payg use 0
    assert q["tenant-alpha-spot"].capability[GPU] == 40_000 and q["tenant-beta-spot"].capability[GPU] == 24_000
    half = {x.name: x for x in seed002(nodes[:8])}
    assert half["team-a"].deserved[GPU] == 10_000


def test_the_mapping_follows_qos_and_is_seeded() -> None:
    gangs = [gang(f"g{i:03d}", i, 1, 1, qos) for i, qos in enumerate(["BE", "Guaranteed", "LS", "Burstable"] * 25)]
    trace = Trace("t", (NODE,), tuple(gangs))
    queues = seed002([NODE] * 16)
    a, b = assign(trace, queues, seed=1), assign(trace, queues, seed=1)
    assert a == b
    assert all(k == "spot" for g, k in zip(trace.gangs, a.kind, strict=True) if g.qos == "BE")
    assert all(c == "critical-job" and k == "team" for g, k, c in zip(trace.gangs, a.kind, a.pclass, strict=True)
               if g.qos == "Guaranteed")
    assert {"team", "payg"} <= {k for g, k in zip(trace.gangs, a.kind, strict=True) if g.qos in ("LS", "Burstable")}
    assert dict(zip(a.leaf, a.kind, strict=True))["tenant-alpha-payg"] == "payg"
    assert assign(trace, queues, seed=2).leaf != a.leaf


def test_capability_keeps_a_gang_waiting_on_an_empty_cluster() -> None:
    out = run([gang("a", 0, 8, 8, "LS")], tree(team_cap=4), horizon=5000)
    assert out["waitSeconds"]["all"]["censored"] == 1
    assert out["queues"]["byType"]["team"]["gpuSeconds"]["useful"] == 0


def test_preempt_evicts_lower_priority_pods_of_the_queue_which_restart_and_lose_work() -> None:
    # a normal gang takes the node (minMember 1); a critical gang of 4 arrives: preempt takes 4 of its pods
    out = run([gang("a", 0, 8, 1, "LS"), gang("b", 600, 4, 4, "Guaranteed", runtime=100)], checkpoint=None)
    team = out["queues"]["byType"]["team"]
    assert team["evictions"] == {"preempt": 4, "reclaim": 0, "repack": 0}
    assert out["waitSeconds"]["all"]["censored"] == 0
    assert out["gangWaits"][1][1] == 0.0  # the critical gang starts at once, on its victims' cards
    assert team["gpuSeconds"]["lost"] == pytest.approx(8 * 600)  # RestartJob: the whole gang's 600 s lost
    assert out["completionSeconds"]["all"]["censored"] == 0  # the victims ran again and finished


def test_a_plan_is_applied_whole_a_job_binding_where_another_job_s_victim_left(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Placement's plan holds for all its jobs together (a later cycle's job may bind on cards an earlier
    job's victim freed): the replay evicts every admitted job's victims before it binds any job's pods. The
    plan of two critical gangs preempting two pods each is handed over with all four victims on the second
    gang; binding the first gang before them would not fit (the replay raised "does not fit" before)."""
    real = engine.plan_victims

    def victims_on_the_last_job(snap, weights, now):  # type: ignore[no-untyped-def]
        plan = real(snap, weights, now)
        jobs = [j for j in plan.jobs if j.admitted]
        assert len(jobs) == 2 and all(len(j.victims) == 2 for j in jobs)
        moved = (jobs[0].model_copy(update={"victims": ()}),
                 jobs[1].model_copy(update={"victims": jobs[0].victims + jobs[1].victims}))
        return plan.model_copy(update={"jobs": moved})
    monkeypatch.setattr(engine, "plan_victims", victims_on_the_last_job)
    out = run([gang("a", 0, 8, 1, "LS"), gang("b", 600, 2, 2, "Guaranteed", runtime=100),
               gang("c", 600, 2, 2, "Guaranteed", runtime=100)], checkpoint=None)
    assert out["queues"]["byType"]["team"]["evictions"]["preempt"] == 4
    assert out["gangWaits"][1][1] == out["gangWaits"][2][1] == 0.0


def test_a_waiting_job_s_victims_leave_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """A plan may list victims under a job it leaves waiting (an earlier scheduling cycle evicted them for it,
    and a later cycle gave their room to another job): the replay evicts them as well. Handed over on a
    waiting copy of the second gang's entry, the four victims must leave before the gangs bind."""
    real = engine.plan_victims

    def victims_on_a_waiting_job(snap, weights, now):  # type: ignore[no-untyped-def]
        plan = real(snap, weights, now)
        jobs = [j for j in plan.jobs if j.admitted]
        assert len(jobs) == 2
        waiting = jobs[1].model_copy(update={"admitted": False, "bindings": (),
                                             "victims": jobs[0].victims + jobs[1].victims})
        return plan.model_copy(update={"jobs": (*(j.model_copy(update={"victims": ()}) for j in jobs), waiting)})
    monkeypatch.setattr(engine, "plan_victims", victims_on_a_waiting_job)
    out = run([gang("a", 0, 8, 1, "LS"), gang("b", 600, 2, 2, "Guaranteed", runtime=100),
               gang("c", 600, 2, 2, "Guaranteed", runtime=100)], checkpoint=None)
    assert out["queues"]["byType"]["team"]["evictions"]["preempt"] == 4
    assert out["gangWaits"][1][1] == out["gangWaits"][2][1] == 0.0


def test_debug_jobs_never_preempt() -> None:
    trace = Trace("t", (NODE,), (gang("a", 0, 8, 1, "LS"), gang("b", 600, 4, 4, "LS")))
    ten = assign(trace, tree(), large_cards=16, debug_share=1.0)  # every team gang is debug-job (Never)
    out = replay(trace, ReplayConfig(horizon=900), tenancy=ten).to_dict()
    assert out["queues"]["byType"]["team"]["evictions"]["preempt"] == 0
    assert out["waitSeconds"]["all"]["censored"] == 1


def test_a_team_reclaims_spot_pods_first() -> None:
    out = run([gang("s", 0, 8, 1, "BE"), gang("t", 600, 4, 4, "LS", runtime=100)], restart="pod")
    spot = out["queues"]["byType"]["spot"]
    assert spot["evictions"] == {"preempt": 0, "reclaim": 4, "repack": 0}
    assert out["queues"]["byType"]["team"]["evictions"]["reclaim"] == 0
    assert out["gangWaits"][1][1] == 0.0
    assert spot["gpuSeconds"]["lost"] == pytest.approx(4 * 600)  # restart=pod: the 4 victims' work only


def test_without_queues_the_result_has_no_queue_figures() -> None:
    trace = Trace("t", (NODE,), (gang("a", 0, 8, 1, "LS"),))
    assert "queues" not in replay(trace, ReplayConfig()).to_dict()


QUEUE_FILE = """apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: team-a, labels: {platform.io/billing-type: subscription, platform.io/tenant: t}}
spec: {deserved: {nvidia.com/gpu: 8}, capability: {nvidia.com/gpu: 4}}
"""


@pytest.mark.parametrize(("queues", "extra", "message"), [
    ("bad.yaml", [], "deserved 8 > capability 4"),
    ("missing.yaml", [], "missing.yaml"),
    ("seed002", ["--throttle"], "--queues"),
])
def test_bad_queues_are_one_line_exit_2_nothing_written(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                        queues: str, extra: list[str], message: str) -> None:
    nodes, pods = _files(tmp_path)
    (tmp_path / "bad.yaml").write_text(QUEUE_FILE)
    source = queues if queues == "seed002" else str(tmp_path / queues)
    out = tmp_path / "out"
    assert main(["replay", "--nodes", nodes, "--pods", pods, "--queues", source, "-o", str(out), *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not out.exists()


def test_a_queue_file_as_written(tmp_path: Path) -> None:
    nodes, pods = _files(tmp_path)
    good = tmp_path / "good.yaml"
    good.write_text(QUEUE_FILE.replace("capability: {nvidia.com/gpu: 4}", "capability: {nvidia.com/gpu: 8}"))
    out = tmp_path / "out"
    assert main(["replay", "--nodes", nodes, "--pods", pods, "--queues", str(good), "--no-plots", "-o", str(out)]) == 0
    doc = json.loads((out / "results.json").read_text())
    assert doc["replays"][0]["queues"]["byType"]["team"]["gangs"] == 1
    assert "## Queues (good.yaml)" in (out / "report.md").read_text()


def _files(tmp_path: Path) -> tuple[str, str]:
    nodes = tmp_path / "nodes.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\nn1,64000,524288,8,\n")
    pods = tmp_path / "pods.csv"
    pods.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli,qos,creation_time,scheduled_time,deletion_time\n"
                    "p1,1000,1024,1,1000,LS,0,0,100\n")
    return str(nodes), str(pods)


def test_summing_the_pods_that_cannot_be_victims_changes_no_replay(monkeypatch: pytest.MonkeyPatch) -> None:
    nodes = tuple(SimNode(f"n{i}", 64000, 512 * 1024, 8, "") for i in range(3))
    qos = ["LS", "BE", "Guaranteed", "LS", "BE", "LS", "Burstable", "BE"]
    gangs = tuple(gang(f"g{i:02d}", 50 * i, 1 + i % 4, 1 + i % 2, qos[i % len(qos)], runtime=400 + 37 * i)
                  for i in range(30))
    trace = Trace("t", nodes, gangs)
    queues = [*tree(team_cap=8), Queue(name="t-payg", labels={"platform.io/tenant": "t",
                                                              "platform.io/billing-type": "payg"},
                                        deserved={GPU: 6000}, capability={GPU: 6000})]
    ten = assign(trace, queues, seed=3, large_cards=6)
    summed = replay(trace, ReplayConfig(), tenancy=ten).to_dict()
    assert sum(sum(v["evictions"].values()) for v in summed["queues"]["byType"].values()) > 0
    from optplan.experiments.replay.tenants import QueuedSnapshots
    build = QueuedSnapshots.build
    monkeypatch.setattr(QueuedSnapshots, "build",
                        lambda self, running, waiting, keep=None: build(self, running, waiting))
    assert replay(trace, ReplayConfig(), tenancy=ten).to_dict() == summed


def test_the_report_gives_a_policy_s_effect_per_queue_type() -> None:
    """Two 4-card nodes; a and b (3 cards each) leave at 10 s, a 1-card team pod stays on each node; a 4-card
    team gang arrives at 20 s and waits for a departure under `none` (980 s), 15 s under `pending` (one pod
    moved, Repack restarts it); the type's row for `pending` gives the change."""
    nodes = (SimNode("n1", 64000, 512 * 1024, 4, ""), SimNode("n2", 64000, 512 * 1024, 4, ""))

    def one(name: str, created: float, gpu: int, runtime: float) -> TraceGang:
        return TraceGang(name=name, created=created, cpu=1000, memory=1024, gpu=gpu, models=(), min_member=1,
                         pods=(TracePod(f"{name}-p0", runtime),), qos="LS")

    trace = Trace("t", nodes, (one("a", 0, 3, 10), one("b", 0, 3, 10), one("q1", 1, 1, 1000),
                               one("q2", 2, 1, 1000), one("g", 20, 4, 100)))
    ten = assign(trace, tree(), large_cards=16, debug_share=0.0)
    runs = [replay(trace, ReplayConfig(policy=p, pending_after=15, interval=600, horizon=1500), tenancy=ten)
            for p in ("none", "pending")]
    assert runs[1].pods_moved == 1
    rows = {(c[1], c[2]): c for line in report.queues_section(runs, runs[0]).splitlines()
            if (c := [x.strip() for x in line.split("|")])[1:2] in (["team"], ["spot"]) and len(c) > 12}
    header = next(line for line in report.queues_section(runs, runs[0]).splitlines() if line.startswith("| queue"))
    col = {name: k for k, name in enumerate(x.strip() for x in header.split("|"))}
    team_none, team_pending = rows["team", runs[0].label], rows["team", runs[1].label]
    wait = col["wait mean (min)"]
    # five team gangs: g waits 980 s under none (the others 0), 15 s under pending
    assert float(team_none[wait]) == pytest.approx(980 / 5 / 60, abs=0.05)
    assert float(team_pending[wait]) == pytest.approx(15 / 5 / 60, abs=0.05)
    assert float(team_pending[wait + 1]) == pytest.approx(-(980 - 15) / 5 / 60, abs=0.05)
    assert team_pending[col["repack"]] == "1" and team_none[col["repack"]] == "0"
    assert team_none[wait + 1] == "+0.0" and ("spot", runs[1].label) not in rows  # no spot gang, no row


def test_asking_placement_only_for_the_gangs_it_may_place_changes_no_replay(monkeypatch: pytest.MonkeyPatch) -> None:
    """A team capped at 4 GPUs whose gangs wait behind its own single pods (no spare pod to preempt):
    placement is asked fewer times, every figure but the count of calls is the same."""
    nodes = tuple(SimNode(f"n{i}", 64000, 512 * 1024, 8, "") for i in range(2))
    qos = ["LS", "BE", "Guaranteed", "LS", "BE", "LS", "Burstable", "BE"]
    gangs = tuple(gang(f"g{i:02d}", 50 * i, 1 + i % 2, 1, qos[i % len(qos)], runtime=400 + 37 * i) for i in range(30))
    trace = Trace("t", nodes, gangs)
    queues = [*tree(team_cap=4), Queue(name="t-payg", labels={"platform.io/tenant": "t",
                                                              "platform.io/billing-type": "payg"},
                                        deserved={GPU: 6000}, capability={GPU: 6000})]
    ten = assign(trace, queues, seed=0, large_cards=6, debug_share=0.0)
    asked = replay(trace, ReplayConfig(), tenancy=ten).to_dict()
    assert sum(sum(v["evictions"].values()) for v in asked["queues"]["byType"].values()) > 0
    monkeypatch.setattr(engine.Replay, "may_gain", lambda self, k, top, sources: True)
    every = replay(trace, ReplayConfig(), tenancy=ten).to_dict()
    assert asked["queues"].pop("placementCalls") < every["queues"].pop("placementCalls")
    assert every == asked
