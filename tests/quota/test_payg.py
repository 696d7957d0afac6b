"""Pay-as-you-go queue sizing (``optplan queues --size-payg``, seed 002 §4.3), from the rule: capability =
deserved = use + the granted jobs' requests, back to the use when they finish; a job is granted only while
the idle pool (total − subscription deserved − payg use) holds it and the nodes it may use can hold it;
the spot capabilities follow the seed's formula with the new use."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from optplan.cli import main
from optplan.models.payg import PaygSizing
from optplan.solvers.provision.payg import size_payg
from tests.builders import GPU, job_task, load, node, pod, podgroup_in, queue, vcjob

ROOT = Path(__file__).resolve().parents[2]
DEMO = str(ROOT / "instances" / "payg-demo.yaml")


def tenant(name: str, sub: int, payg: int = 0, spot: int = 0) -> list[dict[str, Any]]:
    return [queue(f"tenant-{name}-subscription", deserved={GPU: str(sub)}, capability={GPU: str(sub)}),
            queue(f"tenant-{name}-payg", deserved={GPU: str(payg)}, capability={GPU: str(payg)}),
            queue(f"tenant-{name}-spot", deserved={GPU: "0"}, capability={GPU: str(spot)})]


def running(name: str, q: str, n: str, gpu: int) -> list[dict[str, Any]]:
    return [podgroup_in(q, name), pod(f"{name}-0", n, gpu, group=name)]


def pending(name: str, q: str, replicas: int, gpu: int) -> dict[str, Any]:
    return vcjob(name, q, [job_task("w", replicas, gpu, cpu="0", memory="0")])


def size(*objs: dict[str, Any]) -> PaygSizing:
    return size_payg(load(*objs).snapshot)


def gpus(m: dict[str, int | str]) -> int | str | None:
    return m.get(GPU)


def test_capability_is_use_plus_the_job_and_deserved_follows() -> None:
    s = size(*(node(f"n{i}") for i in range(4)), *tenant("a", 8, payg=8), *running("r", "tenant-a-payg", "n0", 8),
             pending("j", "tenant-a-payg", 2, 4))
    (q,) = s.queues
    assert gpus(q.allocated) == 8 and gpus(q.capability) == 16 and q.jobs[0].granted
    patch = {i["metadata"]["name"]: i["spec"] for i in s.apply["items"]}
    assert gpus(patch["tenant-a-payg"]["capability"]) == gpus(patch["tenant-a-payg"]["deserved"]) == 16
    back = {i["metadata"]["name"]: i["spec"] for i in s.release["items"]}
    assert gpus(back["tenant-a-payg"]["capability"]) == gpus(back["tenant-a-payg"]["deserved"]) == 8


def test_the_spot_capability_follows_the_new_payg_use() -> None:
    # 32 GPUs, subscription 8 + 8, payg use 0: idle 16, spot 8 each; a 8-GPU payg job leaves idle 8: 4 each
    s = size(*(node(f"n{i}") for i in range(4)), *tenant("a", 8, spot=8), *tenant("b", 8, spot=8),
             *running("spot-b", "tenant-b-spot", "n1", 8), pending("j", "tenant-a-payg", 1, 8))
    spot = {x.queue: x for x in s.spot}
    assert gpus(spot["tenant-a-spot"].capability) == gpus(spot["tenant-b-spot"].capability) == 4
    assert gpus(spot["tenant-b-spot"].release) == 8
    assert spot["tenant-b-spot"].to_free == 4 and spot["tenant-a-spot"].to_free == 0


def test_no_job_takes_a_subscription_tenants_deserved_share() -> None:
    # 16 GPUs, subscription 12: idle 4; an 8-GPU payg job would eat 4 of the reserved share
    s = size(node("n0"), node("n1"), *tenant("a", 12), pending("j", "tenant-a-payg", 1, 8))
    (q,) = s.queues
    assert not q.jobs[0].granted and "idle pool" in q.jobs[0].reason and gpus(q.capability) == 0


def test_a_job_the_nodes_cannot_hold_is_not_granted() -> None:
    job = vcjob("j", "tenant-a-payg", [job_task("w", 1, 8, template_spec={"nodeSelector": {"zone": "x"}})])
    s = size(node("n0"), node("n1"), *tenant("a", 0), job)
    assert not s.queues[0].jobs[0].granted and "cannot hold" in s.queues[0].jobs[0].reason


def test_spot_pods_make_room_they_are_deleted_for_payg() -> None:
    # the only node is full of spot pods: the payg job is granted (the platform deletes spot for it)
    s = size(node("n0"), *tenant("a", 0, spot=8), *running("spot", "tenant-a-spot", "n0", 8),
             pending("j", "tenant-a-payg", 1, 8))
    assert s.queues[0].jobs[0].granted and s.spot[0].to_free == 8


def test_cli_table_and_patch_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    apply, release = tmp_path / "apply.yaml", tmp_path / "release.yaml"
    assert main(["queues", DEMO, "--size-payg", "--write", str(apply), "--write-release", str(release)]) == 0
    out = capsys.readouterr().out
    assert "default/beta-eval" in out and "idle pool" in out
    items = yaml.safe_load(apply.read_text())["items"]
    assert [i["metadata"]["name"] for i in items] == ["tenant-alpha-payg", "tenant-beta-payg", "tenant-alpha-spot",
                                                     "tenant-beta-spot"]
    assert all(i["kind"] == "Queue" for i in yaml.safe_load(release.read_text())["items"])


def test_sizing_flags_need_size_payg(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["queues", DEMO, "--write", "x.yaml"]) == 2
    assert "--write: only with --size-payg" in capsys.readouterr().err
