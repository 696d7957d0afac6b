"""Repack moves GPU shares (``RepackProblem.shares_move``): a share goes to a device of a receiver that can
take it, its move names the device (``PodMove.to_devices``), the validator checks the device-level fit through
the oracle, a moved share counts as a moved (restarted) pod, and a node holding shares can be vacated."""

from __future__ import annotations

from typing import Any

import pytest

from optplan.adapters.kubefile import load_objects
from optplan.models.repack import PodMove, RepackPlan
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.repack.checks import check_fit
from optplan.solvers.repack.rules import RepackProblem, Weights
from optplan.solvers.repack.run import plan_repack
from optplan.solvers.repack.validate import plan_violations
from tests.adapters.test_vgpu import REGISTER, SHARE, vnode, vpod
from tests.builders import podgroup

RUN = {"apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackRun", "metadata": {"name": "r"},
       "spec": {"mode": "DryRun", "goals": [{"resource": "nvidia.com/gpu"}]}}


def node(name: str) -> dict[str, Any]:
    """A node of two T4s (16 GiB each), device UUIDs ``<name>-a`` and ``<name>-b``."""
    return vnode(name, register=REGISTER.replace("GPU-a", f"{name}-a").replace("GPU-b", f"{name}-b"))


def share(name: str, node_name: str, device: str, cores: int, memory: int = 4000) -> dict[str, Any]:
    return vpod(name, {**SHARE, "volcano.sh/vgpu-cores": str(cores), "volcano.sh/vgpu-memory": str(memory)},
                node=node_name, ids=f"{node_name}-{device},NVIDIA,{memory},{cores}:")


def whole(name: str, node_name: str, cards: int = 1) -> dict[str, Any]:
    return vpod(name, {"nvidia.com/gpu": str(cards)}, node=node_name)


def loaded(*objs: dict[str, Any]) -> Any:
    out = list(objs)
    for o in objs:
        if o["kind"] == "Pod":
            o["metadata"]["annotations"]["scheduling.k8s.io/group-name"] = o["metadata"]["name"]
            out.append(podgroup(o["metadata"]["name"], ns="ns"))
    return load_objects([*out, RUN])


def plan(objs: Any, solver: str = "greedy") -> Any:
    return plan_repack(objs.snapshot, objs.runs["r"], solver=solver, options=PlanOptions(time_limit=5))


@pytest.mark.parametrize("solver", ["greedy", "greedy-fast"])
def test_a_share_moves_to_the_tightest_device_and_its_node_is_freed(solver: str) -> None:
    # n1 holds one 0.4 share; n2 a 0.4 share on b and a whole card on a; n3 a 0.5 share on a: the 0.4 goes
    # where the room is tightest (n3's a: 0.5 free) and n1 is free of every GPU pod
    objs = loaded(node("n1"), node("n2"), node("n3"),
                  share("s1", "n1", "a", 40), share("s2", "n2", "b", 40), whole("w2", "n2"),
                  share("s3", "n3", "a", 50), whole("w3", "n3"))
    out = plan(objs, solver)
    p = out.result.plan
    assert "n1" in p.freed_nodes
    move = next(m for m in p.moves if m.pod == "ns/s1")
    assert (move.to_node, move.to_devices) == ("n3", (0,))
    pods = {pm.name: pm for mv in out.status.plan.moves for pm in mv.pods}
    assert pods["s1"].to_devices == (0,) and pods["s1"].cards == "400m"
    assert out.result.disruption.moved_pods == len(p.moves)


def test_a_share_does_not_move_where_no_device_has_room() -> None:
    # n1: a 0.4 share on a, b untouched; n2: a whole card and a 0.7 share. n1's share fits no device of n2
    # (0.3 free); n2's whole card could take n1's b, but its 0.7 share fits n1's a (0.6 free) no more
    objs = loaded(node("n1"), node("n2"), share("s1", "n1", "a", 40), whole("w2", "n2"),
                  share("s2", "n2", "b", 70))
    out = plan(objs)
    assert out.result.plan.moves == () and out.result.plan.freed_nodes == ()
    assert out.result.rejections == {"no-feasible-receiver": 2}
    # with a 0.5 share on n2's b, n1's share fits there: n1 is vacated (one pod moves, less than n2's two)
    objs = loaded(node("n1"), node("n2"), share("s1", "n1", "a", 40), whole("w2", "n2"),
                  share("s2", "n2", "b", 50))
    p = plan(objs).result.plan
    assert p.freed_nodes == ("n1",) and p.moves == (PodMove(pod="ns/s1", from_node="n1", to_node="n2",
                                                            to_devices=(1,)),)


def test_memory_limits_the_device() -> None:
    # n2's b has 0.5 free but only 2000 MiB: the 0.4 share with 4000 MiB cannot go there
    objs = loaded(node("n1"), node("n2"), share("s1", "n1", "a", 40),
                  share("s2", "n2", "b", 50, memory=14384), whole("w2", "n2"))
    assert plan(objs).result.plan.freed_nodes == ()


def test_the_validator_checks_the_named_device() -> None:
    objs = loaded(node("n1"), node("n2"), share("s1", "n1", "a", 40), share("s2", "n2", "b", 70),
                  whole("w2", "n2"))
    problem = RepackProblem(objs.snapshot, objs.runs["r"], Weights())
    assert problem.shares_move and problem.candidates == ["n1", "n2"]
    bad = RepackPlan.build([PodMove(pod="ns/s1", from_node="n1", to_node="n2", to_devices=(1,))], ["n1"])
    assert [v.message for v in check_fit(problem, bad)] == [
        "pod ns/s1 does not fit on n2: devices 1 cannot take a share of 400 milli-GPU and 4000 MiB"]
    missing = RepackPlan.build([PodMove(pod="ns/s1", from_node="n1", to_node="n2", to_devices=(5,))], ["n1"])
    assert "n2 has no device 5" in plan_violations(problem, missing)[0]


def test_pinned_shares_go_first_whatever_the_plan_order() -> None:
    # n3: three T4s, a 0.1 share on c. The plan lists n2's whole card (ns/a) before n1's share (ns/z), which
    # it gives n3's device 0: in list order the fit rule would give the whole card device 0 first; a share
    # that names its device is applied first, and the whole card takes device 1
    three = vnode("n3", register=REGISTER.replace("GPU-a", "n3-a").replace("GPU-b", "n3-b")
                  + "n3-c,10,16384,NVIDIA-Tesla T4,true,hami-core:", gpus=3)
    objs = loaded(node("n1"), node("n2"), three, share("z", "n1", "a", 40), whole("a", "n2"),
                  share("s3", "n3", "c", 10))
    problem = RepackProblem(objs.snapshot, objs.runs["r"], Weights())
    good = RepackPlan.build([PodMove(pod="ns/z", from_node="n1", to_node="n3", to_devices=(0,)),
                             PodMove(pod="ns/a", from_node="n2", to_node="n3")], ["n1", "n2"])
    assert plan_violations(problem, good) == []
    both = RepackPlan.build([PodMove(pod="ns/z", from_node="n1", to_node="n3", to_devices=(0,)),
                             PodMove(pod="ns/s3", from_node="n3", to_node="n1", to_devices=(0,))], ["n1"])
    assert "pod ns/s3 moves off n3, which is not vacated" in plan_violations(problem, both)


def test_shares_stay_for_the_goal_planners() -> None:
    objs = loaded(node("n1"), share("s1", "n1", "a", 40))
    problem = RepackProblem(objs.snapshot, objs.runs["r"], Weights(), move_shares=False)
    assert not problem.shares_move and problem.node_block == {}
    assert problem.share_nodes == frozenset({"n1"})


@pytest.mark.parametrize("solver", ["cpsat", "auto"])
def test_the_exact_model_places_shares_on_devices(solver: str) -> None:
    # shares of 0.4, 0.3 and 0.3 alone on n1..n3, a 0.5 share and a whole card on n4: 1.5 GPU of shares and a
    # card need 3 GPUs, 2 nodes (the two-level minimum), so at most 2 of the 4 nodes are freed: proven
    objs = loaded(node("n1"), node("n2"), node("n3"), node("n4"),
                  share("s1", "n1", "a", 40), share("s2", "n2", "a", 30), share("s3", "n3", "a", 30),
                  share("s4", "n4", "a", 50), whole("w4", "n4"))
    out = plan(objs, solver)
    p = out.result.plan
    assert len(p.freed_nodes) == 2 and out.status.plan.summary.theoretical_min_nodes == 2
    assert all(m.to_devices is not None for m in p.moves)
    assert (out.result.record.status, out.result.record.freed_nodes_bound) == ("OPTIMAL", 2)


def test_the_exact_model_keeps_whole_cards_off_shared_devices() -> None:
    # n1: a whole card; n2: a 0.2 share on a, b untouched; n3: a 0.9 share on a, b untouched. Vacating n1 and
    # n2 needs n2's share on n3's... no room (0.1); so: the whole card to n2's or n3's b, the 0.2 share to
    # n3? (0.1 free on a, and b would then be taken by the card) -- at most one node freed
    objs = loaded(node("n1"), node("n2"), node("n3"), whole("w1", "n1"), share("s2", "n2", "a", 20),
                  share("s3", "n3", "a", 90))
    for solver in ("greedy", "cpsat"):
        p = plan(objs, solver).result.plan
        assert len(p.freed_nodes) == 1, solver


def random_cluster(seed: int, nodes: int = 6) -> Any:
    """Nodes of two T4s; each device empty, a whole card, or one to three shares (pinned)."""
    import random
    rng = random.Random(seed)
    objs: list[dict[str, Any]] = []
    for i in range(nodes):
        name = f"n{i}"
        objs.append(node(name))
        for dev in ("a", "b"):
            kind = rng.choice(["empty", "whole", "shares", "shares"])
            if kind == "whole":
                objs.append(whole(f"w{i}{dev}", name))
            elif kind == "shares":
                room = 100
                for j in range(rng.randint(1, 3)):
                    cores = rng.choice([10, 20, 30, 40, 50])
                    if cores > room:
                        break
                    room -= cores
                    objs.append(share(f"s{i}{dev}{j}", name, dev, cores, memory=rng.choice([1000, 4000])))
    return loaded(*objs)


@pytest.mark.parametrize("seed", range(8))
def test_every_planner_is_valid_and_the_exact_model_admits_the_greedy_plan(seed: int) -> None:
    from optplan.solvers.repack.exact import cpsat
    from optplan.solvers.repack.exact.model import build_data
    objs = random_cluster(seed)
    runs = {s: plan(objs, s) for s in ("greedy", "greedy-fast", "cpsat", "auto")}  # each validated
    freed = {s: len(o.result.plan.freed_nodes) for s, o in runs.items()}
    assert freed["cpsat"] >= max(freed["greedy"], freed["greedy-fast"]) and freed["auto"] >= freed["greedy-fast"]
    # the greedy's plan, every variable fixed to its hint, is a solution of the device-level model
    problem = RepackProblem(objs.snapshot, objs.runs["r"], Weights())
    data = build_data(problem, freed_upper=len(problem.candidates))
    m, v = cpsat.build(data)
    cpsat.add_hint(data, v, m, runs["greedy"].result.plan)
    solver = cpsat.cp_model.CpSolver()
    solver.parameters.fix_variables_to_their_hinted_value = True
    solver.parameters.num_workers = 1
    assert solver.solve(m) in (cpsat.cp_model.OPTIMAL, cpsat.cp_model.FEASIBLE)


@pytest.mark.parametrize("seed", range(6))
def test_the_greedy_cache_changes_nothing_and_its_bookkeeping_agrees_with_the_checks(seed: int) -> None:
    from optplan.solvers.repack.greedy import _Greedy
    from tests.repack.test_greedy_reference import _Checked

    class Plain(_Greedy):
        def _mark_dirty(self, changed: list[int], removed: int) -> None:
            self.dirty[:] = True

    objs = random_cluster(100 + seed, nodes=14)
    problem = RepackProblem(objs.snapshot, objs.runs["r"], Weights())
    for lazy in (False, True):
        g = _Checked(problem, lazy=lazy)
        moves, freed = g.run()
        assert g.steps == len(freed)
        if not lazy:
            assert (moves, freed) == Plain(problem).run()
            assert freed


# ---- the freeGpus goal -----------------------------------------------------------------------------------

def gpus_run(count: int, model: str | None = None) -> dict[str, Any]:
    goal: dict[str, Any] = {"resource": "nvidia.com/gpu", "freeGpus": {"count": count}}
    if model is not None:
        goal["freeGpus"]["model"] = model
    return {**RUN, "spec": {"mode": "DryRun", "goals": [goal]}}


def with_run(run: dict[str, Any], *objs: dict[str, Any]) -> Any:
    out = list(objs)
    for o in objs:
        if o["kind"] == "Pod":
            o["metadata"]["annotations"]["scheduling.k8s.io/group-name"] = o["metadata"]["name"]
            out.append(podgroup(o["metadata"]["name"], ns="ns"))
    return load_objects([*out, run])


def a100(name: str) -> dict[str, Any]:
    return vnode(name, register=REGISTER.replace("GPU-a", f"{name}-a").replace("GPU-b", f"{name}-b")
                 .replace("Tesla T4", "A100-SXM4-80GB"))


@pytest.mark.parametrize("solver", ["greedy", "cpsat", "auto"])
def test_free_gpus_moves_the_cheapest_pods_off_one_node_of_the_model(solver: str) -> None:
    # two A100 nodes and a T4: m1 holds a 0.3 share on a and a whole card on b, m2 two 0.2 shares on a and
    # one on b; t1 (T4) has room everywhere. Two free A100s: clearing m2 (three 0.2 shares) costs 3 pods,
    # m1 a share and a card (2 pods, more cards): the cheapest by the weights is m2's? Each option is priced
    # by Repack's disruption; the plan moves pods off one A100 node only, onto the others' devices
    objs = with_run(gpus_run(2, "a100"), a100("m1"), a100("m2"), node("t1"),
                    share("s1", "m1", "a", 30), whole("w1", "m1"),
                    share("s2", "m2", "a", 20), share("s3", "m2", "a", 20), share("s4", "m2", "b", 20),
                    share("s5", "t1", "a", 10))
    out = plan_repack(objs.snapshot, objs.runs["r"], solver=solver, options=PlanOptions(time_limit=5))
    p = out.result.plan
    assert p.freed_nodes == () and len({m.from_node for m in p.moves}) == 1
    freed = out.status.plan.summary.freed_gpus
    assert freed is not None and len(freed.devices) >= 2 and "A100" in freed.model
    assert out.reason == "RepackRecommended"
    if solver != "greedy":
        assert out.result.record.status == "OPTIMAL"
    costs = {s: plan_repack(objs.snapshot, objs.runs["r"], solver=s, options=PlanOptions(time_limit=5))
             .result.disruption.weighted(Weights()) for s in ("greedy", "cpsat")}
    assert costs["cpsat"] <= costs["greedy"]


def test_free_gpus_already_free_moves_nothing_and_impossible_is_said() -> None:
    objs = with_run(gpus_run(1), node("n1"), share("s1", "n1", "a", 30))
    out = plan(objs, "cpsat")
    assert out.result.plan.moves == () and out.reason == "RepackRecommended"
    assert out.status.plan.summary.freed_gpus is not None
    assert out.status.plan.summary.freed_gpus.devices == (1,)
    # three GPUs on one node of two: none can
    objs = with_run(gpus_run(3), node("n1"), node("n2"), share("s1", "n1", "a", 30))
    out = plan(objs, "cpsat")
    assert out.reason == "InsufficientImprovement" and out.result.record.status == "OPTIMAL"
    assert "no node can have 3 whole GPU(s) freed" in out.status.conditions[0].message


def test_free_gpus_plans_are_validated() -> None:
    objs = with_run(gpus_run(2), node("n1"), node("n2"), node("n3"), share("s1", "n1", "a", 30),
                    share("s2", "n2", "a", 30), whole("w3", "n3"))
    problem = RepackProblem(objs.snapshot, objs.runs["r"], Weights())
    two = RepackPlan.build([PodMove(pod="ns/s1", from_node="n1", to_node="n3", to_devices=(1,)),
                            PodMove(pod="ns/s2", from_node="n2", to_node="n3", to_devices=(1,))], [])
    assert "a freeGpus plan moves pods off one node" in " ".join(plan_violations(problem, two))
    freed = RepackPlan.build([PodMove(pod="ns/s1", from_node="n1", to_node="n2", to_devices=(0,))], ["n1"])
    assert "a freeGpus plan vacates no node" in plan_violations(problem, freed)
    ok = RepackPlan.build([PodMove(pod="ns/s1", from_node="n1", to_node="n2", to_devices=(0,))], [])
    assert plan_violations(problem, ok) == []
    assert problem.gpus_after(ok) == ("n1", (0, 1))


def test_free_gpus_greedy_sends_a_share_to_the_device_it_fills_most() -> None:
    # clearing t's two GPUs moves 0.5, 0.3 and 0.3; room: r1's a 0.6, r2's a 0.5. By free whole cards then
    # name, the 0.5 took r1's a and left 0.1 + 0.5 for two 0.3s; by the device it fills most, it fills r2's a
    objs = with_run(gpus_run(2), node("t"), node("r1"), node("r2"),
                    share("a5", "t", "a", 50), share("b3", "t", "b", 30), share("c3", "t", "b", 30),
                    share("x4", "r1", "a", 40), whole("xw", "r1"), share("y5", "r2", "a", 50), whole("yw", "r2"))
    for solver in ("greedy", "cpsat"):
        out = plan(objs, solver)
        assert out.reason == "RepackRecommended"
        assert {m.pod: m.to_node for m in out.result.plan.moves} == {"ns/a5": "r2", "ns/b3": "r1", "ns/c3": "r1"}


def test_free_gpus_exact_places_where_the_greedy_placement_cannot() -> None:
    # clearing t's two GPUs moves a 0.5 share (1000 MiB) and a 0.4 one (8000 MiB); room: r1's a 0.5 and
    # 10000 MiB, r2's a 0.6 and 2000 MiB. Largest first by best fit, the 0.5 fills r1's a and the 0.4 one fits
    # no memory left; the exact placement crosses them
    objs = with_run(gpus_run(2), node("t"), node("r1"), node("r2"),
                    share("a5", "t", "a", 50, 1000), share("b4", "t", "b", 40, 8000),
                    share("x5", "r1", "a", 50, 6384), whole("xw", "r1"), share("y4", "r2", "a", 40, 14384),
                    whole("yw", "r2"))
    assert plan(objs, "greedy").result.plan.moves == ()
    out = plan(objs, "cpsat")
    assert out.reason == "RepackRecommended" and out.result.record.status == "OPTIMAL"
    assert {m.pod: m.to_node for m in out.result.plan.moves} == {"ns/a5": "r2", "ns/b4": "r1"}


def test_free_gpus_flags_and_bad_input_exit_2(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    import yaml

    from optplan.cli import main
    objs = [a100("m1"), node("t1"), share("s1", "m1", "a", 30), share("s5", "t1", "a", 10)]
    for o in list(objs):
        if o["kind"] == "Pod":
            o["metadata"]["annotations"]["scheduling.k8s.io/group-name"] = o["metadata"]["name"]
            objs.append(podgroup(o["metadata"]["name"], ns="ns"))
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump_all([*objs, RUN]))
    assert main(["repack", str(path), "--free-gpus", "2", "--gpu-model", "A100", "-o", "json"]) == 0
    doc = __import__("json").loads(capsys.readouterr().out)
    assert doc["spec"]["goals"][0]["freeGpus"] == {"count": 2, "model": "A100"}
    assert doc["status"]["plan"]["summary"]["freedGpus"]["node"] == "m1"
    assert doc["status"]["plan"]["moves"][0]["pods"][0]["toDevices"] == [0]
    assert main(["repack", str(path), "--gpu-model", "A100"]) == 2
    assert "--gpu-model" in capsys.readouterr().err
    plain = tmp_path / "p.yaml"
    plain.write_text(yaml.safe_dump_all([{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"},
                                          "status": {"allocatable": {"nvidia.com/gpu": "2"}}}, RUN]))
    assert main(["repack", str(plain), "--free-gpus", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "list their GPU devices" in err
