"""Execute moving a share to a planned GPU: the controller pins the device on the replacement (annotations,
just before its nomination) and journals the planned and the actual device; a plugin that does not honour the
pin (Volcano v1.15) shows as BoundElsewhere and an alternative placement, never as the planned one.

The story: the plan frees n1 by moving the 0.3 share ``train-0`` to device GPU-n2-b of n2 (GPU-n2-a holds a
0.7 share). The in-memory cluster (``test_controller.Cluster``) recreates the victim and binds it to its
nominated node; ``plugin`` stands for the device-share plugin writing ``volcano.sh/vgpu-ids-new``."""

from __future__ import annotations

import copy
from typing import Any

from optplan.models.devices import GPU_USE_TYPE, HAMI_USE_UUID, VGPU_IDS, VGPU_USE_UUID
from tests.adapters.test_vgpu import SHARE, vnode, vpod
from tests.builders import repack_run
from tests.controller.test_controller import Clock, Cluster, complete, drive, relocations

RUN = "shares-001"
TYPE = "NVIDIA-Tesla T4"


def register(node: str) -> str:
    return "".join(f"GPU-{node}-{d},10,16384,{TYPE},true,hami-core:" for d in "ab")


def objects() -> list[dict[str, Any]]:
    run = repack_run(RUN)
    run["spec"]["mode"] = "Execute"
    run["status"] = {  # planned and journaled; the first eviction not asked yet
        "phase": "Running", "startTime": "2027-01-15T08:00:00Z",
        "plan": {"freedNodes": ["n1"], "moves": [{"namespace": "ns", "podGroupName": "", "pods": [
            {"name": "train-0", "fromNode": "n1", "toNode": "n2", "cards": 0, "toDevices": [1]}]}]},
        "relocations": [{"namespace": "ns", "victimPodName": "train-0", "plannedNodeName": "n2",
                         "plannedDevice": "GPU-n2-b", "eviction": {"phase": "Pending"},
                         "placement": {"phase": "Pending"}}]}
    return [vnode("n1", register("n1")), vnode("n2", register("n2")),
            vpod("train-0", SHARE, node="n1", ids="GPU-n1-a,NVIDIA,4000,30:"),
            vpod("infer-0", {**SHARE, "volcano.sh/vgpu-cores": "70"}, node="n2", ids="GPU-n2-a,NVIDIA,4000,70:"),
            run]


class ShareCluster(Cluster):
    """The cluster with a device-share plugin: ``honours_pin`` (Volcano v1.16 on, HAMi) takes the device the
    pod's UUID annotation names; otherwise (v1.15) the node's first device."""

    def __init__(self, clock: Clock, *, honours_pin: bool) -> None:
        super().__init__(objects(), clock, resource="volcano.sh/vgpu-number")
        self.honours_pin = honours_pin

    def schedule(self) -> None:
        pending = {k for k, p in self.objects.items() if k[0] == "Pod" and not p["spec"].get("nodeName")}
        super().schedule()
        for key in pending:
            p = self.objects[key]
            node = p["spec"].get("nodeName")
            if not node:
                continue
            ann = p["metadata"].setdefault("annotations", {})
            device = ann.get(VGPU_USE_UUID) if self.honours_pin else None
            ann[VGPU_IDS] = f"{device or f'GPU-{node}-a'},NVIDIA,4000,30:"
            self.store.put("Pod", copy.deepcopy(p))


def test_a_plugin_that_honours_the_pin_lands_the_share_on_its_planned_device() -> None:
    c = ShareCluster(Clock(), honours_pin=True)
    drive(c)
    assert c.pins == [("ns", "train-0", {GPU_USE_TYPE: TYPE, VGPU_USE_UUID: "GPU-n2-b", HAMI_USE_UUID: "GPU-n2-b"})]
    assert c.nominations == [("ns", "train-0", "n2")]
    run = c.run(RUN)
    rel = relocations(run)["train-0"]
    assert rel["plannedDevice"] == "GPU-n2-b"
    assert rel["placement"]["phase"] == "Bound" and rel["placement"]["actualDevice"] == "GPU-n2-b"
    assert "planned device GPU-n2-b pinned" in rel["placement"]["message"]
    assert run["status"]["phase"] == "Succeeded" and complete(run)["reason"] == "ExecutionCompleted"


def test_a_plugin_that_ignores_the_pin_is_reported_as_an_alternative_placement() -> None:
    c = ShareCluster(Clock(), honours_pin=False)  # Volcano v1.15: the vGPU plugin picks its own device
    drive(c)
    run = c.run(RUN)
    rel = relocations(run)["train-0"]
    assert rel["placement"]["phase"] == "BoundElsewhere"
    assert (rel["placement"]["actualNodeName"], rel["placement"]["actualDevice"]) == ("n2", "GPU-n2-a")
    assert run["status"]["phase"] == "Succeeded"
    assert complete(run)["reason"] == "ExecutionCompletedWithAlternativePlacement"


def test_a_planned_device_that_filled_up_is_not_pinned_only_its_type() -> None:
    c = ShareCluster(Clock(), honours_pin=True)
    c.add(vpod("late-0", {**SHARE, "volcano.sh/vgpu-cores": "80"}, node="n2", ids="GPU-n2-b,NVIDIA,4000,80:"))
    drive(c, steps=6)
    assert c.pins == [("ns", "train-0", {GPU_USE_TYPE: TYPE})]
    msg = relocations(c.run(RUN))["train-0"]["placement"]["message"]
    assert "planned device GPU-n2-b not pinned (it no longer takes a share of 300 milli-GPU)" in msg


# ---- the same through the Python API (``api.verify``), on the state after execution -------------------

def after(device: str | None) -> list[dict[str, Any]]:
    """The cluster after execution: train-0's replacement bound to n2 on ``device`` (None: not reported);
    the run as planned, its relocations not yet journaled (``verify`` takes them from the plan's moves)."""
    objs = objects()
    run = objs[-1]
    del run["status"]["relocations"]
    objs[2] = vpod("train-0", SHARE, node="n2", ids=f"{device},NVIDIA,4000,30:" if device else None)
    objs[2]["metadata"]["uid"] = "uid-new"
    return objs


def test_verify_reads_the_actual_device_and_reports_another_one() -> None:
    from optplan import api
    good = api.verify(api.snapshot_from_objects(after("GPU-n2-b")), RUN)
    assert good.conditions[0].reason == "ExecutionCompleted"
    rel = good.relocations[0]
    assert rel.planned_device == "GPU-n2-b" and rel.placement is not None and rel.placement.actual_device == "GPU-n2-b"
    other = api.verify(api.snapshot_from_objects(after("GPU-n2-a")), RUN)
    assert other.conditions[0].reason == "ExecutionCompletedWithAlternativePlacement"
    assert "ns/train-0 -> n2 device GPU-n2-a (planned device GPU-n2-b)" in other.conditions[0].message
    unknown = api.verify(api.snapshot_from_objects(after(None)), RUN)
    assert "device (not reported) (planned device GPU-n2-b)" in unknown.conditions[0].message
