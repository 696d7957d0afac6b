"""A placement plan names each GPU pod's devices (``Binding.devices``) where the greedy put it, and every replay
holds to them: the validator, the next scheduling cycle, a rolled-back eviction. Volcano gives a ready job's
further pods later turns, so the greedy places a node's pods in another order than the plan lists them; a replay
that chose devices again by the fit rule in plan order met them differently (a share on the device a later pod
needed), and the greedy's own plan could be refused."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from optplan.cli import main
from optplan.models.placement import BinpackWeights, PlacementPlan
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.placement.context import Context, State, Statement
from optplan.solvers.placement.cycles import after_cycle
from optplan.solvers.placement.jobs import jobs_to_place
from optplan.solvers.placement.place import plan_placement
from optplan.solvers.placement.validate import placement_violations
from tests.adapters.test_vgpu import SHARE, vpod
from tests.builders import load, podgroup, queue
from tests.repack.test_vgpu_rules import node, share, vgpu_case_snapshot

NOW = "2025-06-01T12:00:00Z"
GROUP = "scheduling.k8s.io/group-name"


def pending(name: str, group: str, cores: int) -> dict[str, Any]:
    """A pending share of one T4 (``cores`` of its compute) in PodGroup ``group`` of namespace ns."""
    return vpod(name, {**SHARE, "volcano.sh/vgpu-cores": str(cores)}, node=None, annotations={GROUP: group})


def without_devices(plan: PlacementPlan) -> PlacementPlan:
    return plan.model_copy(update={"jobs": tuple(
        jp.model_copy(update={"bindings": tuple(b.model_copy(update={"devices": None}) for b in jp.bindings)})
        for jp in plan.jobs)})


def renamed(plan: PlacementPlan, pod: str, devices: tuple[int, ...]) -> PlacementPlan:
    """The plan with one binding's devices changed."""
    return plan.model_copy(update={"jobs": tuple(
        jp.model_copy(update={"bindings": tuple(b.model_copy(update={"devices": devices}) if b.pod == pod else b
                                                for b in jp.bindings)})
        for jp in plan.jobs)})


def test_the_greedys_plan_names_every_shares_device_and_holds_in_any_order() -> None:
    """Seed 1 case 7 of ``benchmarks/volcano_diff.py --vgpu`` (met on the real scheduler): placed job by job
    by the fit rule, the plan's pods do not fit (the validator refused the greedy's own plan). With the devices
    the greedy chose named, the strict validator (no re-packing) accepts it."""
    snap, conf = vgpu_case_snapshot(1, 7)
    jobs = jobs_to_place(snap)
    plan = plan_placement(snap, jobs, "greedy", PlanOptions(workers=1), now=NOW, scheduler=conf)
    bound = [b for jp in plan.jobs for b in jp.bindings]
    assert bound and all(b.devices is not None and len(b.devices) == 1 for b in bound)
    assert placement_violations(snap, jobs, plan, scheduler=conf, repack=False) == []
    assert placement_violations(snap, jobs, without_devices(plan), scheduler=conf, repack=False) != []
    assert plan.job("vgv-1-7/g5").admitted


def test_the_validator_refuses_a_device_that_cannot_take_the_share_or_does_not_exist() -> None:
    objs = [node("n1", 10), queue("default"), podgroup("a", 1, ns="ns"), podgroup("b", 1, ns="ns"),
            pending("a-0", "a", 60), pending("b-0", "b", 60)]
    snap = load(*objs).snapshot
    jobs = jobs_to_place(snap)
    plan = plan_placement(snap, jobs, "greedy", PlanOptions(workers=1), now=NOW)
    named = {b.pod: b.devices for jp in plan.jobs for b in jp.bindings}
    assert sorted(map(str, named)) == ["a-0", "b-0"] and named["a-0"] != named["b-0"]  # 60 + 60 cores: two devices
    assert placement_violations(snap, jobs, plan) == []
    same = renamed(plan, "b-0", named["a-0"] or ())
    assert any("b-0" in v and "n1" in v for v in placement_violations(snap, jobs, same))
    assert any("has no device 7" in v for v in placement_violations(snap, jobs, renamed(plan, "a-0", (7,))))


def test_the_plan_shows_the_devices_on_the_wire_and_in_the_table(tmp_path: Any, capsys: Any) -> None:
    import yaml
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump_all([node("n1", 10), queue("default"), podgroup("a", 1, ns="ns"),
                                        pending("a-0", "a", 60)]))
    assert main(["place", str(path), "--solver", "greedy", "-o", "json"]) == 0
    out = capsys.readouterr().out
    assert '"devices": [' in out
    assert main(["place", str(path), "--solver", "greedy", "-o", "table"]) == 0
    assert "DEVICES" in capsys.readouterr().out


def test_a_plain_gpu_node_names_no_devices(tmp_path: Any, capsys: Any) -> None:
    from tests.builders import node as plain_node
    from tests.builders import pod
    snap = load(plain_node("n1", 8), queue("default"), podgroup("pg", 1), pod("p", None, 2)).snapshot
    plan = plan_placement(snap, jobs_to_place(snap), "greedy", PlanOptions(workers=1), now=NOW)
    assert [b.devices for jp in plan.jobs for b in jp.bindings] == [None]
    assert "devices" not in str(plan.to_dict())


def context(objs: list[dict[str, Any]]) -> Context:
    snap = load(*objs).snapshot
    return Context.build(snap, jobs_to_place(snap), BinpackWeights(), datetime.fromisoformat(NOW))


def test_a_rolled_back_eviction_puts_the_share_back_on_its_own_device() -> None:
    """A share pinned on device b (its annotation): evicted, then the eviction rolled back (a preemptor that
    found no full set), it holds b again, not the device the fit rule would pick (a, the emptier one)."""
    ctx = context([node("n1", 10), queue("default"), podgroup("pg", 1, ns="ns"),
                   {**(s := share("s", "n1", "b", cores=30)),
                    "metadata": {**s["metadata"], "annotations": {**s["metadata"]["annotations"], GROUP: "pg"}}}])
    state = State(ctx)
    pod = ctx.snapshot.pods["ns/s"]
    assert state.cap.devices_of(pod) == ("n1", (1,))
    stmt = Statement(state)
    stmt.evict(pod, "n1", "default", "ns/pg")
    assert state.cap.devices_of(pod) is None
    stmt.discard()
    assert state.cap.devices_of(pod) == ("n1", (1,))


@pytest.mark.parametrize("device", [0, 1])
def test_the_next_cycle_keeps_a_share_on_the_device_its_binding_names(device: int) -> None:
    """``after_cycle``: the pods a cycle placed run on, each share on the device its binding names."""
    ctx = context([node("n1", 10), queue("default"), podgroup("a", 1, ns="ns"), pending("a-0", "a", 30)])
    plan = plan_placement(ctx.snapshot, ctx.jobs, "greedy", PlanOptions(workers=1), now=NOW)
    plan = renamed(plan, "a-0", (device,))
    snap = after_cycle(ctx, plan)
    share_now = snap.pods["ns/a-0"].gpu_share
    assert share_now is not None and share_now.devices == (device,)
    assert State(Context.build(snap, [], BinpackWeights(), datetime.fromisoformat(NOW))).cap.devices_of(
        snap.pods["ns/a-0"]) == ("n1", (device,))


def test_a_job_the_next_cycle_would_evict_this_plans_pods_for_is_told_so() -> None:
    """Seed 1 case 36 of ``benchmarks/volcano_diff.py --vgpu``, recorded twice on the real vc-scheduler: every pod
    pending, the first session binds g0, g1 (minMember 3) and g2, and g4's exclusive share finds no empty
    device. Volcano's preempt takes only Bound or Running pods, so that session evicts nothing; the next one
    evicts a pod of g1 (drf, tier 2: priority offers none among jobs of equal priority, gang none at minMember)
    and binds g4. The plan stops after the first cycle (its victims are pods running now) and says so on g4."""
    snap, conf = vgpu_case_snapshot(1, 36)
    jobs = jobs_to_place(snap)
    for solver in ("greedy", "auto"):
        plan = plan_placement(snap, jobs, solver, PlanOptions(time_limit=5, workers=1), now=NOW, scheduler=conf)
        assert placement_violations(snap, jobs, plan, scheduler=conf) == []
        g4 = plan.job("vgv-1-36/g4")
        assert not g4.admitted and "the next scheduling cycle's preempt may evict vgv-1-36/p1-w-" in g4.reason, solver
        g1 = plan.job("vgv-1-36/g1")
        assert g1.admitted and "may be evicted by vgv-1-36/g4's preempt in the next scheduling cycle" in g1.reason
