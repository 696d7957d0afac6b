"""The command line against a live cluster: `optplan snapshot`, planning with --kubeconfig/--context instead
of files, --write-status with its resourceVersion guard, and the Execute-time commands. The cluster is
the fake API server of tests/fakekube.py, spoken to over real HTTP by the real kubernetes client."""

from __future__ import annotations

import argparse
import json
import socket
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from optplan.cli import main
from tests.builders import node, pod, podgroup, repack_run
from tests.controller.test_execute import execute_run, with_uid
from tests.fakekube import FakeKube, write_kubeconfig

RUNS = "/apis/repack.volcano.sh/v1alpha1/repackruns"


def seed_objects() -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for doc in yaml.safe_load_all(Path("instances/seed-dryrun.yaml").read_text()):
        items.extend(doc["items"] if doc.get("kind") == "List" else [doc])
    return items


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def kubeconfig(fake_kube: FakeKube, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    return str(fake_kube.write_kubeconfig(tmp_path / "kubeconfig"))


def test_a_dump_plans_like_the_live_cluster(fake_kube: FakeKube, kubeconfig: str, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    fake_kube.add(*seed_objects())
    snap = tmp_path / "snap.yaml"
    code, out, _ = run_cli(capsys, "snapshot", "--kubeconfig", kubeconfig, "-o", str(snap))
    assert code == 0 and out.startswith(f"wrote {snap} from http://127.0.0.1:")
    assert "3 Nodes" in out and "1 RepackRuns" in out
    code, offline, _ = run_cli(capsys, "repack", str(snap), "--solver", "greedy", "-o", "json")
    assert code == 0
    code, live, _ = run_cli(capsys, "repack", "--kubeconfig", kubeconfig, "--solver", "greedy", "-o", "json")
    assert code == 0
    assert live == offline
    status = json.loads(live)["status"]
    assert status["plan"]["freedNodes"] == ["ascend-node-01"]
    # no Secret is read, and no ConfigMap but vc-scheduler's and its device-share plugin's, by name
    # (tests/cli/test_live_schedconf.py)
    named = {"/api/v1/namespaces/volcano-system/configmaps/volcano-scheduler-configmap",
             "/api/v1/namespaces/kube-system/configmaps/volcano-vgpu-device-config"}
    assert not any("secrets" in p or ("configmaps" in p and p not in named) for p in fake_kube.paths())


def test_a_pod_left_on_a_deleted_node_is_left_out_of_the_snapshot_and_the_live_plan(
        fake_kube: FakeKube, kubeconfig: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A real cluster keeps a deleted node's pods, bound to it, until they are deleted: `optplan snapshot`
    and the planning commands reading the cluster leave them out with a warning naming each (the rule the
    controller follows), so the dump plans as the live cluster does; a file naming a missing node is refused."""
    orphan = pod("left-behind", "deleted-node", 4, group=None, ns="other", resource="huawei.com/ascend-1980")
    fake_kube.add(*seed_objects(), orphan)
    snap = tmp_path / "snap.yaml"
    code, _, err = run_cli(capsys, "snapshot", "--kubeconfig", kubeconfig, "-o", str(snap))
    warning = "pod other/left-behind is left out: bound to node 'deleted-node', which does not exist"
    assert code == 0 and warning in err, err
    assert "left-behind" not in snap.read_text()
    code, offline, _ = run_cli(capsys, "repack", str(snap), "--solver", "greedy", "-o", "json")
    assert code == 0
    code, live, err = run_cli(capsys, "repack", "--kubeconfig", kubeconfig, "--solver", "greedy", "-o", "json")
    assert code == 0 and warning in err, err
    assert live == offline
    assert json.loads(live)["status"]["plan"]["freedNodes"] == ["ascend-node-01"]
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [*seed_objects(), orphan]}))
    code, out, err = run_cli(capsys, "repack", str(bad), "--solver", "greedy")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "Pod/other/left-behind" in err and "spec.nodeName" in err and "deleted-node" in err


def test_every_reporting_command_reads_the_live_cluster(fake_kube: FakeKube, kubeconfig: str,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    fake_kube.add(*seed_objects())
    for argv in (["frag", "--resource", "huawei.com/ascend-1980"], ["queues"], ["compare", "--solvers", "greedy"]):
        code, out, err = run_cli(capsys, *argv, "--kubeconfig", kubeconfig)
        assert code == 0, err
        assert out


def test_write_status_patches_the_run_at_the_version_read(fake_kube: FakeKube, kubeconfig: str,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    fake_kube.add(*seed_objects())
    code, _, err = run_cli(capsys, "repack", "--kubeconfig", kubeconfig, "--run", "ascend-guarded-dryrun",
                           "--solver", "greedy", "--write-status")
    assert code == 0, err
    assert "wrote status of RepackRun ascend-guarded-dryrun" in err
    stored = fake_kube.get("repack.volcano.sh/v1alpha1", "RepackRun", "ascend-guarded-dryrun")
    assert stored["status"]["plan"]["freedNodes"] == ["ascend-node-01"]
    assert stored["status"]["conditions"][0]["reason"] == "RepackRecommended"
    patches = [r for r in fake_kube.requests if r.method == "PATCH"]
    assert [r.path for r in patches] == [f"{RUNS}/ascend-guarded-dryrun/status"]


def test_write_status_refuses_to_overwrite_a_concurrent_writer(fake_kube: FakeKube, kubeconfig: str,
                                                               capsys: pytest.CaptureFixture[str],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    fake_kube.add(*seed_objects())
    from optplan.adapters import kube

    real = kube.KubeClient.snapshot_objects

    def read_then_someone_writes(self: kube.KubeClient) -> list[dict[str, Any]]:
        objs = real(self)
        other = fake_kube.get("repack.volcano.sh/v1alpha1", "RepackRun", "ascend-guarded-dryrun")
        other["status"] = {"phase": "Running", "conditions": []}
        fake_kube.add(other)  # another controller writes between our read and our patch
        return objs

    monkeypatch.setattr(kube.KubeClient, "snapshot_objects", read_then_someone_writes)
    code, out, err = run_cli(capsys, "repack", "--kubeconfig", kubeconfig, "--solver", "greedy", "--write-status")
    assert code == 2 and out == ""
    assert "changed since resourceVersion" in err and len(err.strip().splitlines()) == 1
    stored = fake_kube.get("repack.volcano.sh/v1alpha1", "RepackRun", "ascend-guarded-dryrun")
    assert stored["status"] == {"phase": "Running", "conditions": []}


def test_write_status_needs_a_live_dryrun(fake_kube: FakeKube, kubeconfig: str, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "repack", "instances/seed-dryrun.yaml", "--write-status")
    assert code == 2 and "--write-status needs a live cluster" in err
    run = repack_run("exec")
    run["spec"]["mode"] = "Execute"
    fake_kube.add(node("n1"), run)
    code, _, err = run_cli(capsys, "repack", "--kubeconfig", kubeconfig, "--write-status")
    assert code == 2 and "spec.mode: optplan writes DryRun plans only" in err


def test_files_and_kubeconfig_together_or_neither_are_refused(kubeconfig: str,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "repack", "instances/seed-dryrun.yaml", "--kubeconfig", kubeconfig)
    assert code == 2 and "not both" in err
    code, _, err = run_cli(capsys, "repack")
    assert code == 2 and "no snapshot: pass SNAPSHOT files, or --kubeconfig/--context" in err


def test_api_errors_are_one_line_with_exit_2(fake_kube: FakeKube, kubeconfig: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    fake_kube.forbid("/api/v1/nodes")
    code, out, err = run_cli(capsys, "frag", "--kubeconfig", kubeconfig, "--resource", "nvidia.com/gpu")
    assert code == 2 and out == ""
    assert err.startswith("optplan: error: forbidden: cannot list nodes") and err.count("\n") == 1


@pytest.mark.parametrize(("edit", "field"), [
    (lambda p: p.pop("spec"), ": spec: "),
    (lambda p: p["spec"].pop("containers"), "spec.containers"),
    (lambda p: p["status"].__setitem__("phase", 2), "status.phase"),
])
def test_the_live_reader_refuses_pods_the_files_reader_refuses(fake_kube: FakeKube, kubeconfig: str,
                                                              capsys: pytest.CaptureFixture[str], edit: Any,
                                                              field: str) -> None:
    bad = pod("p9", "n1")
    edit(bad)
    fake_kube.add(node("n1"), podgroup("pg"), bad, repack_run())
    code, out, err = run_cli(capsys, "repack", "--kubeconfig", kubeconfig, "--solver", "greedy")
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert "Pod/default/p9" in err and field in err


def test_snapshot_writes_nothing_when_the_read_fails(fake_kube: FakeKube, kubeconfig: str, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    fake_kube.forbid("/apis/policy/v1/poddisruptionbudgets")
    out_file = tmp_path / "snap.yaml"
    code, _, err = run_cli(capsys, "snapshot", "--kubeconfig", kubeconfig, "-o", str(out_file))
    assert code == 2 and "poddisruptionbudgets.policy" in err
    assert not out_file.exists()


# ---- deadlines, the size cap, connection failures --------------------------------------------------

def test_every_live_command_takes_the_request_limits() -> None:
    from optplan.cli import build_parser

    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    live = {name: p for name, p in commands.items() if "--kubeconfig" in p._option_string_actions}
    assert {"frag", "repack", "compare", "queues", "place", "snapshot", "nominate", "verify"} <= set(live)
    for name, p in live.items():
        assert {"--request-timeout", "--api-deadline"} <= set(p._option_string_actions), name
    assert commands["snapshot"]._option_string_actions["--timeout"].dest == "request_timeout"  # the old name


def test_a_trickling_server_hits_the_request_timeout(fake_kube: FakeKube, kubeconfig: str,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    fake_kube.add(*seed_objects())
    fake_kube.drip("/api/v1/pods", 0.1)
    started = time.monotonic()
    code, out, err = run_cli(capsys, "frag", "--kubeconfig", kubeconfig, "--resource", "huawei.com/ascend-1980",
                             "--request-timeout", "1")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("optplan: error: cannot list pods at the cluster scope: the answer from the API server at "
                          "http://127.0.0.1:")
    assert "did not complete within the 1 s request deadline (--request-timeout)" in err
    assert time.monotonic() - started < 5


def test_snapshot_keeps_its_timeout_flag(fake_kube: FakeKube, kubeconfig: str, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    fake_kube.drip("/api/v1/nodes", 0.1, headers=True)
    out_file = tmp_path / "snap.yaml"
    started = time.monotonic()
    code, _, err = run_cli(capsys, "snapshot", "--kubeconfig", kubeconfig, "-o", str(out_file), "--timeout", "1")
    assert code == 2 and err.count("\n") == 1
    assert "cannot list nodes at the cluster scope: no answer from the API server at" in err
    assert "within the 1 s request deadline" in err
    assert time.monotonic() - started < 5 and not out_file.exists()


def test_retries_stop_at_the_api_deadline(fake_kube: FakeKube, kubeconfig: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    fake_kube.fail("/api/v1/nodes", 429, times=None, retry_after="3")
    started = time.monotonic()
    code, _, err = run_cli(capsys, "queues", "--kubeconfig", kubeconfig, "--api-deadline", "2")
    assert code == 2 and err.count("\n") == 1
    assert "answered 429 (Too many requests, please try again later.) and a retry in 3 s would pass the 2 s " \
           "deadline of the command's API requests (--api-deadline)" in err
    assert time.monotonic() - started < 2


def test_a_huge_answer_hits_the_size_cap(fake_kube: FakeKube, kubeconfig: str,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    fake_kube.pad("/api/v1/nodes", 200 << 20)  # announced, never generated in full: the client stops at once
    code, out, err = run_cli(capsys, "queues", "--kubeconfig", kubeconfig)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("optplan: error: cannot list nodes at the cluster scope: the API server announced 200 MiB, "
                          "over the 128 MiB cap on one response (lower --page-size)")


def test_a_refused_connection_says_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    kubeconfig = write_kubeconfig(tmp_path / "kc", {"down": f"https://127.0.0.1:{port}"})
    code, out, err = run_cli(capsys, "frag", "--kubeconfig", str(kubeconfig), "--resource", "nvidia.com/gpu")
    assert code == 2 and out == ""
    assert err == (f"optplan: error: cannot list nodes at the cluster scope: cannot reach the API server at "
                   f"https://127.0.0.1:{port}: connection refused\n")


# ---- Execute-time commands -------------------------------------------------------------------------

def execute_cluster(tmp_path: Path, replacement_on: str | None) -> Path:
    objs = [node("n1"), node("n2"), node("n3"), podgroup("pg-a", 1), podgroup("pg-b", 1),
            pod("b-0", "n2", 6, group="pg-b"),
            with_uid(pod("job-a-worker-0", replacement_on, 2, group="pg-a",
                         phase="Running" if replacement_on else "Pending"), "uid-new"),
            execute_run()]
    path = tmp_path / "live.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": objs}))
    return path


def test_nominate_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snap = execute_cluster(tmp_path, None)
    code, out, err = run_cli(capsys, "nominate", str(snap), "--victim", "job-a-worker-0", "-o", "json")
    assert code == 0, err
    assert json.loads(out)["nodeName"] == "n2"
    code, out, _ = run_cli(capsys, "nominate", str(snap), "--victim", "default/nobody")
    assert code == 2


def test_verify_command_and_its_status_fields(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snap = execute_cluster(tmp_path, "n3")
    code, out, err = run_cli(capsys, "verify", str(snap), "-o", "json")
    assert code == 0, err
    d = json.loads(out)
    assert d["conditions"][0]["reason"] == "ExecutionCompletedWithAlternativePlacement"
    # n2 holds 6 cards and n3 the replacement's 2: one 8-card node would do, so 1 of 3 providers is waste.
    assert d["result"] == {"fragAfterPercent": 33, "freedNodeCount": 1, "metricsVerified": True,
                           "movedCardCount": 2}
    assert d["relocations"][0]["placement"]["actualNodeName"] == "n3"
    code, out, _ = run_cli(capsys, "verify", str(snap), "-o", "table")
    assert "ExecutionCompletedWithAlternativePlacement" in out and "default/job-a-worker-0" in out


def test_verify_write_status(fake_kube: FakeKube, kubeconfig: str, tmp_path: Path,
                             capsys: pytest.CaptureFixture[str]) -> None:
    snap = yaml.safe_load(execute_cluster(tmp_path, "n2").read_text())
    fake_kube.add(*snap["items"])
    code, _, err = run_cli(capsys, "verify", "--kubeconfig", kubeconfig, "--write-status")
    assert code == 0, err
    stored = fake_kube.get("repack.volcano.sh/v1alpha1", "RepackRun", "exec-1")
    assert stored["status"]["conditions"][0]["reason"] == "ExecutionCompleted"
    assert stored["status"]["result"]["freedNodeCount"] == 1
    assert stored["status"]["plan"]["freedNodes"] == ["n1"]  # the merge patch keeps the plan
