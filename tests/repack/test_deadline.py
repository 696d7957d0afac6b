"""The run's time limit as a deadline at scale (issue 14 §5): the PDB index the tables read, greedy-fast
stopping mid-round on the wall clock, and auto returning the greedy plan when no LNS model fits in the
time left. Deterministic limits are untouched (one input, one plan)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from optplan.adapters import kube
from optplan.adapters.generate import GenConfig, generate
from optplan.adapters.kubefile import load_files, load_objects
from optplan.controller.manager import Controller
from optplan.controller.metrics import Metrics
from optplan.controller.reconcile import Settings
from optplan.solvers.core.clock import Clock
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.repack import auto
from optplan.solvers.repack.exact import model as repack_model
from optplan.solvers.repack.greedy import _Greedy
from optplan.solvers.repack.rules import RepackProblem
from optplan.solvers.repack.run import plan_repack
from tests.fakekube import FakeKube


def _pdb(name: str, selector: dict[str, Any] | None, ns: str = "default") -> dict[str, Any]:
    spec: dict[str, Any] = {"minAvailable": 1}
    if selector is not None:
        spec["selector"] = selector
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name, "namespace": ns},
            "spec": spec, "status": {"disruptionsAllowed": 1}}


def test_the_pdbs_covering_a_pod_are_those_whose_selector_matches_it() -> None:
    """The label index finds exactly the PDBs a one-by-one check finds, in snapshot order, for every kind
    of selector: matchLabels (one pair or several), matchExpressions alone, empty (the whole namespace),
    null (no pod), and PDBs of another namespace."""
    objects = generate(GenConfig(nodes=30, occupancy=0.7, pdb_share=0.5, seed=3))
    pod = next(o for o in objects if o["kind"] == "Pod" and o["metadata"].get("labels"))
    ns = pod["metadata"].get("namespace", "default")
    label, value = sorted(pod["metadata"]["labels"].items())[0]
    extra = [
        _pdb("z-pair", {"matchLabels": {label: value}}, ns),
        _pdb("a-pairs", {"matchLabels": {label: value, "absent": "x"}}, ns),
        _pdb("m-expr", {"matchExpressions": [{"key": label, "operator": "In", "values": [value]}]}, ns),
        _pdb("m-not", {"matchExpressions": [{"key": label, "operator": "NotIn", "values": [value]}]}, ns),
        _pdb("e-empty", {}, ns),
        _pdb("n-null", None, ns),
        _pdb("o-other-ns", {}, "elsewhere"),
    ]
    loaded = load_objects([*objects, *extra])
    snap = loaded.snapshot
    problem = RepackProblem(snap, next(iter(loaded.runs.values())))
    covered = 0
    for p in snap.pods.values():
        expect = [pdb.key for pdb in snap.pdbs.values() if pdb.covers(p)]
        assert problem.pdbs_covering(p) == expect, p.key
        assert problem.pdbs_covering(p) == expect  # asked again: the same answer
        covered += bool(expect) and p.namespace != ns
    mine = problem.pdbs_covering(snap.pods[f"{ns}/{pod['metadata']['name']}"])
    assert {f"{ns}/z-pair", f"{ns}/m-expr", f"{ns}/e-empty"} <= set(mine)
    assert not {f"{ns}/a-pairs", f"{ns}/m-not", f"{ns}/n-null", "elsewhere/o-other-ns"} & set(mine)
    assert all(f"{ns}/e-empty" in problem.pdbs_covering(p) for p in snap.pods.values() if p.namespace == ns)
    assert covered > 0  # the generator's PDBs (matchLabels) elsewhere


class _Deadline(Clock):
    """A wall clock whose deadline passes at the start of round ``at_round`` (the greedy charges its
    evaluations right before that check) or at the ``in_round``-th check inside a round."""

    def __init__(self, at_round: int | None = None, in_round: int | None = None) -> None:
        super().__init__()
        self.at_round, self.in_round = at_round, in_round
        self.round = self.checks = 0
        self.starting = False

    def charge_evaluations(self, n: int) -> None:
        self.starting = True

    def over(self, until: float) -> bool:
        if self.starting:
            self.starting = False
            self.round += 1
        else:
            self.checks += 1
        return (self.at_round is not None and self.round >= self.at_round) or (
            self.in_round is not None and self.checks >= self.in_round)


def _greedy_fast(seed: int = 0) -> _Greedy:
    """benchmarks/controller_scale's mix (8-card nodes at 0.88, mostly 1-card pods): a round batches several
    commits."""
    cfg = GenConfig(nodes=200, cards_per_node=(8,), occupancy=0.88, pod_sizes=((1, 0.9), (2, 0.07), (4, 0.03)),
                    seed=seed)
    loaded = load_objects(generate(cfg))
    return _Greedy(RepackProblem(loaded.snapshot, next(iter(loaded.runs.values()))), lazy=True)


def test_a_wall_clock_deadline_stops_greedy_fast_in_the_middle_of_a_round() -> None:
    """A round commits up to a twentieth of its candidates; a deadline passing during it stops it after
    the commit in hand (each commit is a valid step), and the run says it was cut."""
    whole = _greedy_fast()
    _, freed = whole.run(_Deadline(at_round=2), float("inf"))  # the first round whole, then stop
    assert whole.rounds == 1 and len(freed) > 1, "the instance must batch more than one commit per round"
    cut = _greedy_fast()
    _, freed_cut = cut.run(_Deadline(in_round=1), float("inf"))  # late after the round's first commit
    assert cut.truncated and cut.rounds == 1
    assert freed_cut == freed[:1]


def test_deterministic_greedy_fast_rounds_are_never_cut_inside() -> None:
    """Deterministic limits count evaluations, charged between rounds: a round is never cut inside, so the
    plan does not depend on the machine's speed."""
    state = _greedy_fast()
    det = _Deadline(in_round=1)
    det.deterministic = True
    _, freed = state.run(det, float("inf"))
    _, whole = _greedy_fast().run(Clock(), float("inf"))
    assert not state.truncated and freed == whole and len(freed) > 1


@pytest.fixture
def big(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every model counts as too large to solve whole (auto takes its LNS path)."""
    monkeypatch.setattr(repack_model, "MAX_ARCS", 1)
    monkeypatch.setattr(repack_model, "MIN_RECEIVERS", 1)


def test_auto_returns_the_greedy_plan_when_no_lns_model_fits_in_the_time_left(
        big: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """On the wall clock the LNS is skipped when building its model would overrun the limit: the plan is
    greedy-fast's (validated), marked FALLBACK. Deterministic limits never skip it (same plan anywhere)."""
    loaded = load_files(["instances/greedy-trap.yaml"])
    run = next(iter(loaded.runs.values()))
    opts = PlanOptions(time_limit=4, workers=1, seed=0)
    monkeypatch.setattr(auto, "LNS_SETUP_FACTOR", 1e9)
    wall = plan_repack(loaded.snapshot, run, solver="auto", options=opts)
    fast = plan_repack(loaded.snapshot, run, solver="greedy-fast", options=opts)
    assert wall.result.record.status == "FALLBACK" and "lnsSteps" not in wall.result.stats
    assert wall.result.plan == fast.result.plan and len(wall.result.plan.freed_nodes) == 1
    det = plan_repack(loaded.snapshot, run, solver="auto", options=PlanOptions(time_limit=4, deterministic=True))
    assert det.result.record.status == "FEASIBLE" and len(det.result.plan.freed_nodes) == 2
    monkeypatch.setattr(auto, "LNS_SETUP_FACTOR", 0.0)
    assert len(plan_repack(loaded.snapshot, run, solver="auto", options=opts).result.plan.freed_nodes) == 2


class _Readiness(Metrics):
    """Metrics that note whether the controller's snapshot was built when it reported ready."""

    def __init__(self) -> None:
        super().__init__(stale_after=60)
        self.ctl: Controller | None = None
        self.built_when_ready: bool | None = None

    def set_ready(self, ready: bool) -> None:
        if ready and self.ctl is not None and self.built_when_ready is None:
            self.built_when_ready = self.ctl.reconciler._snapshot is not None
        super().set_ready(ready)


def test_the_controller_is_ready_once_its_snapshot_is_built(tmp_path: Any) -> None:
    """The first DryRun does not pay for parsing the whole cluster (about 15 s at 10,000 nodes): the
    controller builds the planners' snapshot as its caches sync, before /readyz answers 200."""
    fk = FakeKube(crd_schemas=True).start()
    try:
        objects = [o for o in generate(GenConfig(nodes=8, occupancy=0.5, seed=1)) if o["kind"] != "RepackRun"]
        fk.add(*objects, server_fields=True)
        client = kube.connect(str(fk.write_kubeconfig(tmp_path / "kubeconfig")), None, deadline=None, timeout=10)
        metrics = _Readiness()
        ctl = Controller(client, Settings(solver="greedy", time_limit=2.0), clock=time.time, watch_timeout=5,
                         min_interval=0.05, metrics=metrics)
        metrics.ctl = ctl
        thread = threading.Thread(target=ctl.run, daemon=True)
        thread.start()
        try:
            deadline = time.monotonic() + 30
            while not metrics.ready() and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            ctl.stop.set()
            thread.join(timeout=20)
    finally:
        fk.stop()
    assert metrics.built_when_ready is True
    assert ctl.reconciler.plans == 0  # built, not planned: no run exists


def test_after_a_relist_the_old_objects_are_let_go_before_the_snapshot_is_built_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A relist brings every object anew: the next snapshot parses them again. The parsed copies of the
    objects it replaced, and the old snapshot, are dropped before that build, not after it, so the
    controller never holds two clusters' worth of parsed objects (memory at 80,000 pods)."""
    import copy

    from optplan.controller import reconcile as reconcile_mod
    from tests.controller.test_controller import Clock as FakeClock
    from tests.controller.test_controller import Cluster, reconciler, seed_objects

    cluster = Cluster(seed_objects(mode="DryRun"), FakeClock())
    rec = reconciler(cluster)
    first = rec.snapshot()
    objects = cluster.store.snapshot_objects()
    pods = [o for o in objects if o["kind"] == "Pod"]
    assert len(rec._parsed) == len(objects) > len(pods) > 0
    seen: list[tuple[int, bool]] = []
    build = reconcile_mod.load_objects

    def spy(objs: Any, source: str, *, cache: Any, **kw: Any) -> Any:
        seen.append((len(cache), rec._snapshot is None))
        return build(objs, source, cache=cache, **kw)

    monkeypatch.setattr(reconcile_mod, "load_objects", spy)
    cluster.store.replace("Pod", [copy.deepcopy(o) for o in pods])  # what a relist does
    second = rec.snapshot()
    assert seen == [(len(objects) - len(pods), True)]
    assert second is not first and second.pods == first.pods
    assert set(rec._parsed) == {id(o) for o in cluster.store.snapshot_objects()}
