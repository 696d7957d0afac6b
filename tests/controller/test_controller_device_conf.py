"""The controller reads a node's registered ``mig`` devices as ``optplan snapshot`` + ``optplan repack`` do
(``optplan/controller/schedconf.py``): with the device-share plugin's ConfigMap (kube-system/volcano-vgpu-device-config,
or where the scheduler ConfigMap's deviceshare arguments say), read again every ``refresh`` seconds, a device is
MIG (closed to new pods) only when that ConfigMap gives its type a geometry; otherwise Volcano reads it as
hami-core and so do the controller's plans. An absent or forbidden ConfigMap means no geometry, said once.

The story, on the fake API server (tests/fakekube.py): n1 has one T4 (hami-core, one share at most) holding the
30% share ``a``; n2 one T4 registered ``mig`` holding the 30% share ``b``. A DryRun frees n1 by moving ``a``
onto n2's device, which only a hami-core device takes; with a geometry for the T4 nothing can be freed (``b``
finds no slot on n1)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from optplan.adapters import kube
from optplan.adapters.kube import KubeClient
from optplan.controller.manager import Controller
from tests.adapters.test_vgpu import vnode
from tests.builders import podgroup, repack_run
from tests.controller.test_controller import Clock
from tests.controller.test_controller_e2e import SETTINGS
from tests.fakekube import FakeKube
from tests.repack.test_shares import share
from tests.repack.test_vgpu_rules import device_config, scheduler_configmap

RUN_API = ("repack.volcano.sh/v1alpha1", "RepackRun")
DEVICE_CM = "/api/v1/namespaces/kube-system/configmaps/volcano-vgpu-device-config"
FREED = ["n1"]  # n2's device read as hami-core: a moves onto it
CLOSED: list[str] = []  # n2's device in MIG mode: nothing to free
NO_GEOMETRY = "mig devices are read as hami-core"


def gpu_node(name: str, mode: str, shares: int) -> dict[str, Any]:
    """One T4 (16 GiB), UUID ``<name>-a``, registered in ``mode``, taking at most ``shares`` pods."""
    return vnode(name, register=f"{name}-a,{shares},16384,NVIDIA-Tesla T4,true,{mode}:", gpus=1)


def cluster() -> list[dict[str, Any]]:
    """The two nodes, and each share with its PodGroup of one."""
    pods = [share("a", "n1", "a", 30), share("b", "n2", "a", 30)]
    for p in pods:
        p["spec"]["containers"][0]["image"] = "busybox"
        p["metadata"]["annotations"]["scheduling.k8s.io/group-name"] = p["metadata"]["name"]
    return [gpu_node("n1", "hami-core", 1), gpu_node("n2", "mig", 10), *pods, podgroup("a", ns="ns"),
            podgroup("b", ns="ns")]


class Env:
    """The fake API server with the story's cluster, a fake clock, and a controller reading the ConfigMaps
    every minute."""

    def __init__(self, fk: FakeKube, tmp_path: Path) -> None:
        self.fk = fk
        fk.add(*cluster(), server_fields=True)
        self.clock = Clock()
        self.client: KubeClient = kube.connect(str(fk.write_kubeconfig(tmp_path / "kubeconfig")), None,
                                               deadline=None, timeout=10)
        self.ctl = Controller(self.client, SETTINGS, clock=self.clock, scheduler_refresh=60)
        self.runs = 0

    def dry_run(self) -> list[str]:
        """A new DryRun, reconciled once: the nodes its plan frees."""
        self.runs += 1
        name = f"mig-{self.runs}"
        self.fk.add(repack_run(name), server_fields=True)
        self.ctl.sync()
        self.ctl.pass_()
        status = self.fk.get(*RUN_API, name)["status"]
        assert status["phase"] == "Succeeded", status
        return list(status["plan"].get("freedNodes") or [])


@pytest.fixture
def env(fk: FakeKube, tmp_path: Path) -> Iterator[Env]:
    e = Env(fk, tmp_path)
    try:
        yield e
    finally:
        e.client.close()


# (the ConfigMaps beside the cluster, the nodes a DryRun frees)
CASES = [
    ([], FREED),  # Volcano's default configuration: no MIG geometry
    ([device_config(["A100"])], FREED),  # a geometry for another type
    ([device_config(["Tesla T4"])], CLOSED),
    ([device_config(["tesla t4"])], FREED),  # Volcano compares case-sensitively
    ([device_config(["Tesla T4"], namespace="gpu", name="dev")], FREED),  # not where Volcano reads
    ([device_config(["Tesla T4"], namespace="gpu", name="dev"), scheduler_configmap("gpu", "dev")], CLOSED),
    ([device_config([], text="nvidia: [")], FREED),  # malformed: Volcano uses its default
]


@pytest.mark.parametrize(("configmaps", "freed"), CASES, ids=[
    "no-configmap", "other-model", "geometry", "case", "elsewhere", "moved-by-arguments", "malformed"])
def test_a_mig_registered_device_is_closed_only_with_a_geometry_for_its_type(env: Env, configmaps: list[dict[str, Any]],
                                                                            freed: list[str]) -> None:
    env.fk.add(*configmaps)
    assert env.dry_run() == freed


def test_a_change_of_the_device_configmap_takes_effect_after_the_refresh(env: Env) -> None:
    assert env.dry_run() == FREED
    env.fk.add(device_config(["Tesla T4"]))  # a geometry for the T4: n2's device is in MIG mode
    env.clock.advance(30)
    assert env.dry_run() == FREED  # within the refresh: not read again
    env.clock.advance(30)
    assert env.dry_run() == CLOSED
    env.fk.add(device_config(["A100"]))  # changed again: the T4 has no geometry
    env.clock.advance(60)
    assert env.dry_run() == FREED
    reads = [p for p in env.fk.paths() if p == DEVICE_CM]
    assert len(reads) == 3  # one GET a minute


@pytest.mark.parametrize("forbidden", [False, True], ids=["absent", "forbidden"])
def test_an_absent_or_forbidden_device_configmap_means_no_geometry_said_once(
        env: Env, caplog: pytest.LogCaptureFixture, forbidden: bool) -> None:
    """Forbidden (the Role of deploy/36-device-conf.yaml not granted, or the ConfigMap moved elsewhere): the
    controller plans as if it were absent, as Volcano without it would, and says so once, not every minute."""
    if forbidden:
        env.fk.add(device_config(["Tesla T4"]))  # there, but not readable
        env.fk.forbid(DEVICE_CM)
    with caplog.at_level(logging.WARNING, logger="optplan"):
        for _ in range(3):
            assert env.dry_run() == FREED
            env.clock.advance(60)
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert sum(NO_GEOMETRY in m and "volcano-vgpu-device-config" in m for m in said) == 1 + forbidden, said
    assert sum("forbidden" in m and "volcano-vgpu-device-config" in m for m in said) == forbidden, said
    assert len([p for p in env.fk.paths() if p == DEVICE_CM]) == 3
