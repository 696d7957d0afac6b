"""Shared GPUs read from Volcano's device-share annotations (``adapters.vgpu``), the importer's ``--shared``,
the bad input (one line, exit 2), and the oracle's device-level fit (``core.oracle``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from optplan.adapters.kubefile import load_objects
from optplan.adapters.openb import ImportConfig, import_openb
from optplan.errors import InputError
from optplan.models.devices import VGPU_IDS, VGPU_REGISTER
from optplan.solvers.core.oracle import Capacity, gpu_ask
from tests.adapters.test_openb import nodes_csv, pods_csv

REGISTER = "GPU-a,10,16384,NVIDIA-Tesla T4,true,hami-core:GPU-b,10,16384,NVIDIA-Tesla T4,true,hami-core:"


def vnode(name: str = "n1", register: str = REGISTER, gpus: int = 2) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "annotations": {VGPU_REGISTER: register}},
            "status": {"allocatable": {"cpu": "32", "memory": "64Gi", "pods": "110", "nvidia.com/gpu": str(gpus),
                                       "volcano.sh/vgpu-number": "20", "volcano.sh/vgpu-cores": "200",
                                       "volcano.sh/vgpu-memory": "32768"}}}


def vpod(name: str, limits: dict[str, str], *, node: str | None = "n1", ids: str | None = None,
         annotations: dict[str, str] | None = None, containers: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return share_pod(name, limits, "volcano", VGPU_IDS, ids, node=node, annotations=annotations,
                     containers=containers)


def share_pod(name: str, limits: dict[str, str], scheduler: str, placed_key: str, placed: str | None, *,
              node: str | None, annotations: dict[str, str] | None,
              containers: list[dict[str, Any]] | None) -> dict[str, Any]:
    """A pod of one container asking ``limits`` under ``scheduler``, on ``node`` (Running) or pending, its
    device annotation ``placed_key`` set to ``placed`` when given (Volcano's vGPU ids, HAMi's allocation)."""
    ann = dict(annotations or {})
    if placed is not None:
        ann[placed_key] = placed
    container = {"name": "c", "resources": {"limits": limits, "requests": limits}}
    spec: dict[str, Any] = {"schedulerName": scheduler, "containers": containers or [container]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ns", "annotations": ann},
            "spec": spec, "status": {"phase": "Running" if node else "Pending"}}


SHARE = {"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-cores": "30", "volcano.sh/vgpu-memory": "4000"}


def test_devices_and_pinned_share_are_read() -> None:
    snap = load_objects([vnode(), vpod("p", SHARE, ids="GPU-b,NVIDIA,4000,30:")]).snapshot
    assert [(d.index, d.uuid, d.memory_mib) for d in snap.nodes["n1"].devices] == [(0, "GPU-a", 16384),
                                                                                   (1, "GPU-b", 16384)]
    share = snap.pods["ns/p"].gpu_share
    assert share is not None and (share.milli, share.memory_mib, share.devices) == (300, 4000, (1,))


def test_snapshot_without_device_information_has_none() -> None:
    node = vnode()
    del node["metadata"]["annotations"]
    pod = vpod("w", {"nvidia.com/gpu": "1"})
    snap = load_objects([node, pod]).snapshot
    assert snap.nodes["n1"].devices == () and snap.pods["ns/w"].gpu_share is None
    assert "n1" not in Capacity(snap).gpu_free


@pytest.mark.parametrize(("objs", "field", "words"), [
    ([vnode(), vpod("p", {**SHARE, "volcano.sh/vgpu-cores": "150"})], "vgpu-cores", "above 1000 milli"),
    ([vnode(), vpod("p", SHARE, ids="GPU-z,NVIDIA,4000,30:")], VGPU_IDS, "lacks"),
    ([vnode(), vpod("p", {**SHARE, "volcano.sh/vgpu-memory": "20000"}, ids="GPU-a,NVIDIA,20000,30:")], VGPU_IDS,
     "above device 0's 16384 MiB"),
    ([vnode(), vpod("p", {**SHARE, "nvidia.com/gpu": "1"})], "spec.containers[0].resources", "mixed in one container"),
    ([vnode(register="GPU-a,10,16384")], VGPU_REGISTER, "fields"),
    ([vnode(), vpod("p", SHARE, annotations={"optplan.io/gpu-milli": "1200"})], "gpu-milli", "above 1000"),
    ([vnode(), vpod("p", SHARE, annotations={"optplan.io/gpu-milli": "100"})], "gpu-milli", "round up"),
])
def test_bad_input_is_one_line(objs: list[dict[str, Any]], field: str, words: str) -> None:
    with pytest.raises(InputError) as e:
        load_objects(objs)
    assert field in str(e.value) and words in str(e.value) and "\n" not in str(e.value)


def test_cli_bad_input_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import yaml

    from optplan.cli import main
    f = tmp_path / "s.yaml"
    f.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [
        vnode(), vpod("p", SHARE, ids="GPU-z,NVIDIA,4000,30:")]}))
    assert main(["frag", str(f), "--resource", "nvidia.com/gpu"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "GPU-z" in err


def test_device_level_fit_in_the_oracle() -> None:
    # device 0 holds a pinned 0.7 share, device 1 a whole card: a 0.5 share and a whole card fit nowhere,
    # although the node's totals (2 cards, 200 cores) say they would
    snap = load_objects([
        vnode(),
        vpod("s", {**SHARE, "volcano.sh/vgpu-cores": "70"}, ids="GPU-a,NVIDIA,4000,70:"),
        vpod("w", {"nvidia.com/gpu": "1"}),
        vpod("half", {**SHARE, "volcano.sh/vgpu-cores": "50"}, node=None),
        vpod("tiny", {**SHARE, "volcano.sh/vgpu-cores": "30"}, node=None),
        vpod("card", {"nvidia.com/gpu": "1"}, node=None),
    ]).snapshot
    cap = Capacity(snap)
    assert cap.gpu_free["n1"] == [300, 0]
    assert cap.fit_reason(snap.pods["ns/half"], "n1") == "no device fits a share of 500 milli-GPU and 4000 MiB"
    assert cap.fits(snap.pods["ns/tiny"], "n1")
    # 1 card is free by the totals, but no device is untouched: the free whole cards are 0
    assert cap.free["n1"]["nvidia.com/gpu"] == 0
    assert cap.fit_reason(snap.pods["ns/card"], "n1") == "insufficient nvidia.com/gpu"
    cap.remove(snap.pods["ns/s"], "n1")  # the share moves away: its device is whole again
    assert cap.gpu_free["n1"] == [1000, 0] and cap.fits(snap.pods["ns/half"], "n1")
    cap.add(snap.pods["ns/half"], "n1")
    assert cap.devices_of(snap.pods["ns/half"]) == ("n1", (0,)) and cap.gpu_free["n1"] == [500, 0]


def test_use_gputype_limits_the_devices() -> None:
    snap = load_objects([vnode(), vpod("p", SHARE, node=None, annotations={"nvidia.com/use-gputype": "A100"}),
                         vpod("q", SHARE, node=None, annotations={"nvidia.com/use-gputype": "t4"})]).snapshot
    node = snap.nodes["n1"]
    assert not Capacity(snap).fits(snap.pods["ns/p"], "n1") and Capacity(snap).fits(snap.pods["ns/q"], "n1")
    assert gpu_ask(snap.pods["ns/q"], node).milli == 300


def test_openb_shared_keeps_shares_pinned(tmp_path: Path) -> None:
    n = nodes_csv(tmp_path, ["n-a,32000,131072,2,T4"])
    p = pods_csv(tmp_path, [("w", 1000, 1024, 1, 1000, "", 0), ("s1", 1000, 1024, 1, 460, "", 1),
                            ("s2", 1000, 1024, 1, 455, "", 2), ("s3", 1000, 1024, 1, 300, "", 3)])
    objs, stats = import_openb(n, p, ImportConfig(fill=100, shared=True, max_passes=1))
    snap = load_objects(objs).snapshot
    assert stats["shared_gpu_pods"] == 3 and stats["fractional_left_out"] == 0
    shares = {k.split("/")[1]: v.gpu_share for k, v in snap.pods.items() if v.gpu_share is not None}
    assert {k: (s.milli, s.devices) for k, s in shares.items()} == {"s1": (460, (1,)), "s2": (455, (1,))}
    assert stats["skipped"] == 1  # s3 (300) fits no device: 1000 - 460 - 455 = 85 left on device 1
    assert Capacity(snap).gpu_free["n-a"] == [0, 85]
    plain, _ = import_openb(n, p, ImportConfig(fill=100))
    assert all("annotations" not in o["metadata"] for o in plain if o["kind"] == "Node")


def test_device_fragmentation_two_level_minimum_and_fgd() -> None:
    from optplan.solvers.binpack.devfrag import device_fragmentation
    # two nodes of 2 GPUs; shares 0.4 + 0.4 on n1's two devices, 0.2 and 0.9 on n2's: they fit 2 GPUs
    # (0.4 + 0.4 + 0.2, and 0.9), so one node would do
    objs = [vnode("n1"), vnode("n2", register=REGISTER.replace("GPU-a", "GPU-c").replace("GPU-b", "GPU-d")),
            vpod("a", {**SHARE, "volcano.sh/vgpu-cores": "40"}, ids="GPU-a,NVIDIA,4000,40:"),
            vpod("b", {**SHARE, "volcano.sh/vgpu-cores": "40"}, ids="GPU-b,NVIDIA,4000,40:"),
            vpod("c", {**SHARE, "volcano.sh/vgpu-cores": "20"}, node="n2", ids="GPU-c,NVIDIA,4000,20:"),
            vpod("d", {**SHARE, "volcano.sh/vgpu-cores": "90"}, node="n2", ids="GPU-d,NVIDIA,4000,90:")]
    d = device_fragmentation(load_objects(objs).snapshot, time_limit=5)
    assert (d.providers, d.occupied, d.shares, d.share_gpus, d.share_gpus_min) == (2, 2, 4, 4, 2)
    assert (d.theoretical_min, d.proven, d.percent()) == (1, True, 50.0)
    assert d.free_milli == 2100
    # FGD, the workload 0.4 (1/2), 0.2 (1/4), 0.9 (1/4): n1 (0.6, 0.6 free) cannot host 0.9: 1/4 of 1200;
    # n2 (0.8, 0.1 free): the 0.1 is below 0.4 and 0.2 (3/4 of 100), and 0.9 fits nowhere (1/4 of 900)
    assert d.fgd_nodes == {"n1": 300.0, "n2": 300.0} and d.fgd_milli == 600.0


@pytest.mark.parametrize("solver", ["greedy", "cpsat"])
def test_repack_moves_whole_cards_only_onto_untouched_devices(solver: str) -> None:
    from optplan.solvers.core.options import PlanOptions
    from optplan.solvers.repack.run import plan_repack
    # n2 has 1 card free by the totals, but its share sits on it: no whole card may move there (n1 and n3
    # have an untouched card each); plan_repack validates the plan at device level
    objs = [vnode("n1"), vnode("n2", register=REGISTER.replace("GPU-a", "GPU-c").replace("GPU-b", "GPU-d")),
            vnode("n3", register=REGISTER.replace("GPU-a", "GPU-e").replace("GPU-b", "GPU-f")),
            vpod("w1", {"nvidia.com/gpu": "1"}),
            vpod("w2", {"nvidia.com/gpu": "1"}, node="n2"),
            vpod("s2", SHARE, node="n2", ids="GPU-d,NVIDIA,4000,30:"),
            vpod("w3", {"nvidia.com/gpu": "1"}, node="n3")]
    from tests.builders import podgroup
    for o in list(objs):
        if o["kind"] == "Pod":
            o["metadata"]["annotations"]["scheduling.k8s.io/group-name"] = o["metadata"]["name"]
            objs.append(podgroup(o["metadata"]["name"], ns="ns"))
    objs.append({"apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackRun", "metadata": {"name": "r"},
                 "spec": {"mode": "DryRun", "goals": [{"resource": "nvidia.com/gpu"}]}})
    loaded = load_objects(objs)
    out = plan_repack(loaded.snapshot, loaded.runs["r"], solver=solver, options=PlanOptions(time_limit=5))
    moves = {(m.pod, m.to_node) for m in out.result.plan.moves}
    assert moves and all(to != "n2" for _, to in moves)
    assert out.result.plan.freed_nodes


def test_gpushare_plugin_devices_and_index() -> None:
    # the older gpushare plugin: 2 cards sharing 32 GiB of volcano.sh/gpu-memory; a pod pinned by gpu-index
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "g"},
            "status": {"allocatable": {"cpu": "8", "volcano.sh/gpu-number": "2", "volcano.sh/gpu-memory": "32768"}}}
    pod = vpod("m", {"volcano.sh/gpu-memory": "10000"}, node="g", annotations={"volcano.sh/gpu-index": "1"})
    snap = load_objects([node, pod]).snapshot
    assert [(d.index, d.memory_mib) for d in snap.nodes["g"].devices] == [(0, 16384), (1, 16384)]
    share = snap.pods["ns/m"].gpu_share
    assert share is not None and (share.milli, share.memory_mib, share.devices) == (0, 10000, (1,))
    cap = Capacity(snap)  # a memory-only share holds its device (1 milli-GPU)
    assert cap.gpu_free["g"] == [1000, 999] and cap.gpu_memory["g"] == [16384, 6384]
    with pytest.raises(InputError, match="names device 2, which node g lacks"):
        load_objects([node, vpod("x", {"volcano.sh/gpu-memory": "1"}, node="g",
                                 annotations={"volcano.sh/gpu-index": "2"})])


PERCENTAGE_CONFIG = {"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": "volcano-vgpu-device-config", "namespace": "kube-system"},
                     "data": {"device-config.yaml": "nvidia:\n  resourceMemoryPercentageName: "
                                                    "volcano.sh/vgpu-memory-percentage\n"}}


def test_memory_percentage_and_unpinned_share() -> None:
    """A running share without vgpu-ids-new goes where the fit rule puts it (best fit: the fuller device). Its
    ``volcano.sh/vgpu-memory-percentage`` is read only under a device configuration naming that resource
    (``resourceMemoryPercentageName``); Volcano's default names none, so a share asking a percentage and no
    memory asks all of a device's memory: a device of its own (the real-cluster case ``memory-percentage``)."""
    unpinned = vpod("u", {"volcano.sh/vgpu-cores": "30", "volcano.sh/vgpu-memory-percentage": "50"})
    objs = [vnode(), vpod("a", {**SHARE, "volcano.sh/vgpu-cores": "60"}, ids="GPU-b,NVIDIA,4000,60:"), unpinned]
    snap = load_objects([*objs, PERCENTAGE_CONFIG]).snapshot
    cap = Capacity(snap)
    assert cap.devices_of(snap.pods["ns/u"]) == ("n1", (1,)) and cap.gpu_free["n1"] == [1000, 100]
    assert gpu_ask(snap.pods["ns/u"], snap.nodes["n1"]).memory_mib == 8192
    assert cap.gpu_memory["n1"] == [16384, 16384 - 4000 - 8192]
    snap = load_objects(objs).snapshot
    cap = Capacity(snap)
    assert cap.devices_of(snap.pods["ns/u"]) == ("n1", (0,)) and cap.gpu_free["n1"] == [0, 400]
    assert cap.gpu_memory["n1"] == [0, 16384 - 4000]


@pytest.mark.parametrize(("limits", "memory_percent"), [
    ({"volcano.sh/vgpu-cores": "30"}, 100),  # no memory: all of the device's (ExtractResourceRequest)
    ({"volcano.sh/vgpu-cores": "30", "volcano.sh/vgpu-memory": "2000"}, 0),
    ({"volcano.sh/vgpu-cores": "100", "volcano.sh/vgpu-memory": "2000"}, 0),
])
def test_a_share_naming_no_memory_asks_all_of_a_devices(limits: dict[str, str], memory_percent: int) -> None:
    share = load_objects([vnode(), vpod("p", limits, node=None)]).snapshot.pods["ns/p"].gpu_share
    assert share is not None and share.memory_percent == memory_percent


def test_shares_that_do_not_move_keep_their_node() -> None:
    from optplan.models.repack import PodMove, RepackPlan
    from optplan.solvers.core.options import PlanOptions
    from optplan.solvers.repack.checks import check_goal
    from optplan.solvers.repack.rules import SHARES_STAY, RepackProblem, Weights
    from optplan.solvers.repack.run import plan_repack
    from tests.builders import podgroup
    objs = [vnode("n1"), vnode("n2", register=REGISTER.replace("GPU-a", "GPU-c").replace("GPU-b", "GPU-d")),
            vpod("w1", {"nvidia.com/gpu": "1"}), vpod("s1", SHARE, ids="GPU-b,NVIDIA,4000,30:"),
            vpod("w2", {"nvidia.com/gpu": "1"}, node="n2")]
    for o in list(objs):
        if o["kind"] == "Pod":
            o["metadata"]["annotations"]["scheduling.k8s.io/group-name"] = o["metadata"]["name"]
            objs.append(podgroup(o["metadata"]["name"], ns="ns"))
    objs.append({"apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackRun", "metadata": {"name": "r"},
                 "spec": {"mode": "DryRun", "goals": [{"resource": "nvidia.com/gpu"}]}})
    loaded = load_objects(objs)
    # the goal planners keep shares where they are (move_shares False): a node holding one is not vacated
    problem = RepackProblem(loaded.snapshot, loaded.runs["r"], Weights(), move_shares=False)
    assert problem.node_block["n1"] == SHARES_STAY and problem.candidates == ["n2"]
    out = plan_repack(loaded.snapshot, loaded.runs["r"], solver="greedy", options=PlanOptions(time_limit=5))
    # Repack moves shares, but here n2's card cannot go to n1 (its free device is shared) and n1's share
    # cannot go to n2 (its free device would take n1's card)
    assert out.result.plan.freed_nodes == ()
    wrong = RepackPlan.build([PodMove(pod="ns/w1", from_node="n1", to_node="n2")], ["n1"])
    assert any("still holds GPU shares" in v.message for v in check_goal(problem, wrong))
