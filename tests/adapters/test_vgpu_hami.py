"""HAMi's names for the vGPU model (``adapters.vgpu``): its node register annotation (JSON and the older
comma form), a share asked through ``nvidia.com/gpumem`` / ``gpucores`` next to the count ``nvidia.com/gpu``,
where it sits (``hami.io/vgpu-devices-allocated``), the device-level fit, and bad input (one line, exit 2)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from optplan.adapters.kubefile import load_objects
from optplan.errors import InputError
from optplan.models.devices import HAMI_ALLOCATED, HAMI_REGISTER, HAMI_TO_ALLOCATE
from optplan.solvers.core.oracle import Capacity
from tests.adapters.test_vgpu import share_pod

REGISTER = json.dumps([
    {"id": "GPU-a", "count": 10, "devmem": 16384, "devcore": 100, "type": "NVIDIA-Tesla T4", "health": True,
     "mode": "hami-core"},
    {"id": "GPU-b", "index": 1, "count": 10, "devmem": 16384, "devcore": 100, "type": "NVIDIA-Tesla T4",
     "health": True, "mode": "hami-core"}])


def hnode(register: str = REGISTER) -> dict[str, Any]:
    # HAMi's device plugin advertises nvidia.com/gpu in vGPU slots: 2 cards split 10 ways
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "annotations": {HAMI_REGISTER: register}},
            "status": {"allocatable": {"cpu": "32", "memory": "64Gi", "pods": "110", "nvidia.com/gpu": "20"}}}


def hpod(name: str, limits: dict[str, str], *, node: str | None = "n1", allocated: str | None = None,
         annotations: dict[str, str] | None = None, containers: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return share_pod(name, limits, "hami-scheduler", HAMI_ALLOCATED, allocated, node=node, annotations=annotations,
                     containers=containers)


SHARE = {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "30", "nvidia.com/gpumem": "4000"}


def test_register_share_and_allocation_are_read() -> None:
    snap = load_objects([hnode(), hpod("p", SHARE, allocated="GPU-b,NVIDIA,4000,30:;")]).snapshot
    node = snap.nodes["n1"]
    assert [(d.index, d.uuid, d.model, d.memory_mib) for d in node.devices] == [
        (0, "GPU-a", "NVIDIA-Tesla T4", 16384), (1, "GPU-b", "NVIDIA-Tesla T4", 16384)]
    # the node's 20 vGPU slots are read as its 2 cards; the share's slot and memory are held at device level
    assert node.allocatable["nvidia.com/gpu"] == 2000
    pod = snap.pods["ns/p"]
    assert "nvidia.com/gpu" not in pod.requests and "nvidia.com/gpumem" not in pod.requests
    share = pod.gpu_share
    assert share is not None and (share.milli, share.memory_mib, share.devices) == (300, 4000, (1,))


def test_older_comma_register_and_to_allocate() -> None:
    register = "GPU-a,10,16384,100,NVIDIA-A100,0,true:GPU-b,10,16384,100,NVIDIA-A100,0,false,1,hami-core:"
    snap = load_objects([hnode(register), hpod("p", SHARE, annotations={HAMI_TO_ALLOCATE: "GPU-a,NVIDIA,4000,30:"})]
                        ).snapshot
    assert [(d.uuid, d.healthy) for d in snap.nodes["n1"].devices] == [("GPU-a", True), ("GPU-b", False)]
    share = snap.pods["ns/p"].gpu_share
    assert share is not None and share.devices == (0,)


def test_device_level_fit_with_hami_names() -> None:
    # device 1 holds a pinned 0.3 share; a whole card (nvidia.com/gpu alone, HAMi's exclusive card) takes
    # device 0; then a 0.8 share fits nowhere, a 0.7 share does (on device 1)
    snap = load_objects([
        hnode(),
        hpod("s", SHARE, allocated="GPU-b,NVIDIA,4000,30:"),
        hpod("w", {"nvidia.com/gpu": "1"}),
        hpod("big", {**SHARE, "nvidia.com/gpucores": "80"}, node=None),
        hpod("fits", {**SHARE, "nvidia.com/gpucores": "70"}, node=None),
    ]).snapshot
    assert snap.pods["ns/w"].gpu_share is None and snap.pods["ns/w"].requests["nvidia.com/gpu"] == 1000
    cap = Capacity(snap)
    assert cap.gpu_free["n1"] == [0, 700]
    assert cap.fit_reason(snap.pods["ns/big"], "n1") == "no device fits a share of 800 milli-GPU and 4000 MiB"
    assert cap.fits(snap.pods["ns/fits"], "n1")


def test_cores_without_memory_take_the_card() -> None:
    # HAMi gives a share that names no memory all of the card's (its chart's defaultMemory: 0)
    snap = load_objects([hnode(), hpod("p", {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "30"}, node=None)]).snapshot
    share = snap.pods["ns/p"].gpu_share
    assert share is not None and share.whole


@pytest.mark.parametrize(("objs", "field", "words"), [
    ([hnode(), hpod("p", {**SHARE, "nvidia.com/gpucores": "150"})], "gpucores", "above 1000 milli"),
    ([hnode(), hpod("p", {**SHARE, "nvidia.com/gpumem-percentage": "120"})], "gpumem-percentage", "above 100"),
    ([hnode(), hpod("p", SHARE, allocated="GPU-z,NVIDIA,4000,30:")], HAMI_ALLOCATED, "lacks"),
    ([hnode(), hpod("p", {**SHARE, "nvidia.com/gpumem": "20000"}, allocated="GPU-a,NVIDIA,20000,30:")],
     HAMI_ALLOCATED, "above device 0's 16384 MiB"),
    ([hnode(), hpod("p", {**SHARE, "volcano.sh/vgpu-cores": "30"})], "spec.containers[0].resources",
     "mixed in one container"),
    ([hnode(), hpod("p", {}, containers=[{"name": "a", "resources": {"limits": SHARE}},
                                         {"name": "b", "resources": {"limits": {"nvidia.com/gpu": "1"}}}])],
     "spec.containers[1].resources", "next to a HAMi share"),
    ([hnode("[{")], HAMI_REGISTER, "not valid JSON"),
    ([hnode("GPU-a,10,16384,100:")], HAMI_REGISTER, "fields"),
    ([hnode(json.dumps([{"id": "GPU-a", "devmem": 1}, {"id": "GPU-a", "devmem": 1}]))], HAMI_REGISTER, "duplicate"),
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
        hnode(), hpod("p", {**SHARE, "nvidia.com/gpucores": "101"})]}))
    assert main(["frag", str(f), "--resource", "nvidia.com/gpu"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "gpucores" in err


def template_job(limits: dict[str, str]) -> dict[str, Any]:
    """A VCJob of one task, two pods asking ``limits``."""
    from tests.builders import IMAGE, job_task, vcjob
    return vcjob("j", "default", [job_task("w", 2, 0, template_spec={"containers": [
        {"name": "main", "image": IMAGE, "resources": {"limits": limits, "requests": limits}}]})], ns="ns")


def test_hami_names_on_a_snapshot_without_devices_are_whole_cards() -> None:
    # no node lists its GPUs: HAMi's count is whole nvidia.com/gpu cards and its share resources are
    # requests like any other, on a running pod and on a VCJob template alike (as before HAMi was read)
    from tests.builders import node, queue
    snap = load_objects([node("n1", 2, extra={"nvidia.com/gpucores": "200", "nvidia.com/gpumem": "32768"}),
                         hpod("p", SHARE), queue("default"), template_job(SHARE)]).snapshot
    template = snap.jobs["ns/j"].tasks[0].template
    for requests, share in ((snap.pods["ns/p"].requests, snap.pods["ns/p"].gpu_share),
                            (template.requests, template.gpu_share)):
        assert share is None
        assert requests == {"nvidia.com/gpu": 1000, "nvidia.com/gpucores": 30000, "nvidia.com/gpumem": 4000000}
    # with a node listing its GPUs, both hold the slot and the share at device level
    snap = load_objects([hnode(), hpod("p", SHARE), queue("default"), template_job(SHARE)]).snapshot
    template = snap.jobs["ns/j"].tasks[0].template
    for requests, share in ((snap.pods["ns/p"].requests, snap.pods["ns/p"].gpu_share),
                            (template.requests, template.gpu_share)):
        assert share is not None and share.milli == 300 and requests == {}
