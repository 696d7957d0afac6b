"""The scheduler configuration from the live cluster: `optplan snapshot` and the commands reading a cluster take
vc-scheduler's ConfigMap (volcano-system/volcano-scheduler-configmap, key volcano-scheduler.conf), so `place`
decides under the cluster's configuration; an explicit --scheduler-conf wins; without the ConfigMap, seed 002's
configuration, said once. The cluster is tests/fakekube.py's fake API server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.builders import node, queue
from tests.cli.test_kube_cli import kubeconfig, run_cli  # noqa: F401  (kubeconfig: a fixture)
from tests.fakekube import FakeKube
from tests.placement.test_victims import CLASSES, pending, running

GANG_CONF = "actions: \"enqueue, allocate, gangpreempt, backfill\"\ntiers:\n- plugins:\n  - name: priority\n" \
            "  - name: gang\n  - name: conformance\n- plugins:\n  - name: predicates\n  - name: capacity\n" \
            "    enableHierarchy: true\n  - name: binpack\n"
ABSENT = "has no ConfigMap volcano-system/volcano-scheduler-configmap"


def configmap(text: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "volcano-scheduler-configmap", "namespace": "volcano-system"},
            "data": {"volcano-scheduler.conf": text}}


def cluster() -> list[dict[str, Any]]:
    """v runs 3 pods (minMember 2) on a, b, c; big (1 pod of 8 GPUs, higher priority) waits in the same queue."""
    return [*CLASSES, *(node(n, 8) for n in "abc"), queue("q"),
            *running("v", "q", [("a", 8), ("b", 8), ("c", 8)], min_member=2), pending("big", "q", 1, 8)]


def victims(out: str) -> list[tuple[str, str]]:
    job = next(j for j in json.loads(out)["jobs"] if j["name"] == "big")
    return [(v["name"], v["reason"]) for v in job.get("victims", [])]


def test_place_decides_under_the_clusters_configmap(fake_kube: FakeKube, kubeconfig: str,  # noqa: F811
                                                   tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fake_kube.add(*cluster(), configmap(GANG_CONF))
    place = ("place", "--solver", "greedy", "--now", "2025-06-01T12:00:00Z", "-o", "json")
    code, live, err = run_cli(capsys, *place, "--kubeconfig", kubeconfig)
    assert code == 0 and ABSENT not in err, err
    assert victims(live) == [("v-0", "gangpreempt")]
    snap = tmp_path / "snap.yaml"
    code, out, _ = run_cli(capsys, "snapshot", "--kubeconfig", kubeconfig, "-o", str(snap))
    assert code == 0 and "1 ConfigMaps" in out
    items = yaml.safe_load(snap.read_text())["items"]
    assert [o["data"] for o in items if o["kind"] == "ConfigMap"] == [{"volcano-scheduler.conf": GANG_CONF}]
    code, offline, _ = run_cli(capsys, *place, str(snap))
    assert code == 0 and offline == live
    seed = tmp_path / "seed.yaml"  # an explicit --scheduler-conf wins over the cluster's
    seed.write_text('actions: "enqueue, allocate, preempt, reclaim, backfill"\n')
    for source in (str(snap), "--kubeconfig"):
        args = [str(snap)] if source != "--kubeconfig" else ["--kubeconfig", kubeconfig]
        code, out, _ = run_cli(capsys, *place, *args, "--scheduler-conf", str(seed))
        assert code == 0 and victims(out) == [("v-0", "preempt")]


def test_without_the_configmap_the_seed_configuration_is_said_once(fake_kube: FakeKube, kubeconfig: str,  # noqa: F811
                                                                  tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    fake_kube.add(*cluster())
    code, out, err = run_cli(capsys, "place", "--kubeconfig", kubeconfig, "--solver", "greedy", "-o", "json",
                             "--now", "2025-06-01T12:00:00Z")
    assert code == 0 and err.count(ABSENT) == 1, err
    assert victims(out) == [("v-0", "preempt")]
    snap = tmp_path / "snap.yaml"
    code, out, err = run_cli(capsys, "snapshot", "--kubeconfig", kubeconfig, "-o", str(snap))
    assert code == 0 and err.count(ABSENT) == 1 and "ConfigMap" not in out, err


def test_a_configmap_vc_scheduler_would_refuse_is_one_line(fake_kube: FakeKube, kubeconfig: str,  # noqa: F811
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    fake_kube.add(*cluster(), configmap('actions: "allocate, nosuchaction"\n'))
    code, _, err = run_cli(capsys, "place", "--kubeconfig", kubeconfig, "--solver", "greedy")
    assert code == 2 and "ConfigMap volcano-system/volcano-scheduler-configmap" in err and "nosuchaction" in err
    assert len(err.strip().splitlines()) == 1, err


def test_the_device_share_plugins_configmap_is_read_where_its_arguments_say(
        fake_kube: FakeKube, kubeconfig: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    """The device-share plugin's ConfigMap (its MIG geometries; kube-system/volcano-vgpu-device-config, or where the
    scheduler ConfigMap's deviceshare arguments move it) is read with the cluster and kept in the snapshot: a
    register's ``mig`` node is MIG only when it gives the card type a geometry. Without it the node is read as
    hami-core and takes a share; with it, it is in MIG mode and takes no new pod (MIG instances are not modelled,
    a warning says so), live and from the file alike."""
    from tests.repack.test_vgpu_rules import device_config, job_asking, mig_cluster
    conf = GANG_CONF + "  - name: deviceshare\n    arguments:\n      deviceshare.VGPUEnable: true\n" \
        "      deviceshare.KnownGeometriesCMNamespace: gpu\n      deviceshare.KnownGeometriesCMName: dev\n"
    fake_kube.add(*mig_cluster(hami=False), job_asking("s", {}, "2025-06-01T10:00:00Z"), configmap(conf))
    place = ("place", "--solver", "greedy", "--now", "2025-06-01T12:00:00Z", "-o", "json")

    def admitted(out: str) -> bool:
        return bool(next(j for j in json.loads(out)["jobs"] if j["name"] == "s")["admitted"])

    code, live, err = run_cli(capsys, *place, "--kubeconfig", kubeconfig)
    assert code == 0 and admitted(live) and "MIG" not in err, err
    fake_kube.add(device_config(["Tesla T4"], namespace="gpu", name="dev"))
    code, live, err = run_cli(capsys, *place, "--kubeconfig", kubeconfig)
    assert code == 0 and not admitted(live) and "MIG instances are not modelled" in err, err
    snap = tmp_path / "snap.yaml"
    code, out, _ = run_cli(capsys, "snapshot", "--kubeconfig", kubeconfig, "-o", str(snap))
    assert code == 0 and "2 ConfigMaps" in out, out
    code, offline, _ = run_cli(capsys, *place, str(snap))
    assert code == 0 and offline == live
