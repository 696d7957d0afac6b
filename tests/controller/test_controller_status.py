"""Every status written to a cluster, by the controller and by ``--write-status``, is one the API server
accepts: it validates against the shipped CRD's status schema (closed objects, enums, patterns; the
translation of tests/controller/test_crd_schema.py), its conditions are metav1.Condition-shaped with a
lastTransitionTime, and a write never drops another writer's relocations or fields."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from optplan.cli import main
from tests.cli.test_kube_cli import execute_cluster, kubeconfig  # noqa: F401 (a fixture)
from tests.controller.test_controller import NS, W0, Clock, Cluster, drive, execute_run, seed_objects
from tests.controller.test_crd_schema import STATUS_VALIDATOR, errors_of
from tests.fakekube import FakeKube

RUN = ("repack.volcano.sh/v1alpha1", "RepackRun")


class Recording(Cluster):
    """Keeps every status as stored after each write."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.written: list[dict[str, Any]] = []

    def patch_repack_run_status(self, name: str, status: Mapping[str, Any], resource_version: str) -> dict[str, Any]:
        out = super().patch_repack_run_status(name, status, resource_version)
        self.written.append(copy.deepcopy(out["status"]))
        return out


def _scenarios() -> dict[str, Recording]:
    out: dict[str, Recording] = {}
    out["completed"] = Recording(seed_objects(), Clock())
    pdb = Recording(seed_objects(), Clock())
    pdb.pdb_blocked.add(f"{NS}/{W0}")
    out["pdb-rejected"] = pdb
    never = Recording(seed_objects(), Clock())
    never.schedule_mode = "never"
    out["timed-out"] = never
    objs = seed_objects()
    out["serial-and-cooldown"] = Recording([*objs, execute_run("ascend-execute-002", objs[-1])], Clock())
    out["dry-run-with-ttl"] = Recording(seed_objects(mode="DryRun", ttl=60), Clock())
    bad = seed_objects()
    bad[-1]["spec"]["goals"] = [{"resource": "x", "minFragImprovementPercent": 101}]
    out["invalid"] = Recording(bad, Clock())
    return out


def assert_accepted(status: dict[str, Any]) -> None:
    assert errors_of(STATUS_VALIDATOR, status) == []
    for cond in status["conditions"]:
        assert cond.get("lastTransitionTime") and cond.get("observedGeneration") == 1, cond


@pytest.mark.parametrize("name", list(_scenarios()))
def test_every_status_the_controller_writes_validates(name: str) -> None:
    c = _scenarios()[name]
    drive(c, steps=80)
    assert c.written, name
    for status in c.written:
        assert_accepted(status)


def test_a_controller_write_keeps_what_another_writer_added() -> None:
    c = Cluster(seed_objects(), Clock())
    c.schedule_mode = "never"
    r = drive(c, steps=1)
    run = c.run("ascend-execute-001")
    # another writer (a human, another tool) adds a relocation field and a condition of its own
    run["status"]["relocations"][0]["note"] = "theirs"
    run["status"]["conditions"].append({"type": "Audited", "status": "True", "reason": "Ticket", "message": "ok"})
    c.add(run)
    drive(c, r, steps=40)
    after = c.run("ascend-execute-001")["status"]
    assert after["relocations"][0]["note"] == "theirs"
    assert any(cond["type"] == "Audited" for cond in after["conditions"])
    assert after["phase"] == "Failed"


# ---- the CLI's --write-status ---------------------------------------------------------------------

def _seed_items() -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for doc in yaml.safe_load_all(Path("instances/seed-dryrun.yaml").read_text()):
        items.extend(doc["items"] if doc.get("kind") == "List" else [doc])
    return items


@pytest.fixture
def in_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(Path(__file__).resolve().parents[2])


@pytest.mark.usefixtures("in_repo")
def test_repack_write_status_is_stamped_and_valid(fake_kube: FakeKube, kubeconfig: str,  # noqa: F811
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    fake_kube.add(*_seed_items())
    assert main(["repack", "--kubeconfig", kubeconfig, "--solver", "greedy", "--write-status"]) == 0
    printed = capsys.readouterr().out
    assert "lastTransitionTime" not in printed  # what is printed stays byte-identical run to run
    stored = fake_kube.get(*RUN, "ascend-guarded-dryrun")
    assert_accepted_loose(stored["status"])
    assert stored["status"]["conditions"][0]["lastTransitionTime"]


def assert_accepted_loose(status: dict[str, Any]) -> None:
    assert errors_of(STATUS_VALIDATOR, status) == []
    assert all(c.get("lastTransitionTime") for c in status["conditions"])


def test_verify_write_status_merges_relocations_by_key(fake_kube: FakeKube, kubeconfig: str,  # noqa: F811
                                                       tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snap = yaml.safe_load(execute_cluster(tmp_path, "n2").read_text())
    run = next(o for o in snap["items"] if o["kind"] == "RepackRun")
    run["status"]["relocations"][0]["placement"] = {"phase": "Nominated", "selectedNodeName": "n2"}
    run["status"]["relocations"].append({"namespace": "default", "victimPodName": "other", "note": "theirs"})
    fake_kube.add(*snap["items"])
    assert main(["verify", "--kubeconfig", kubeconfig, "--write-status"]) == 0, capsys.readouterr().err
    stored = fake_kube.get(*RUN, "exec-1")["status"]
    rels = {r["victimPodName"]: r for r in stored["relocations"]}
    assert rels["other"] == {"namespace": "default", "victimPodName": "other", "note": "theirs"}
    assert rels["job-a-worker-0"]["placement"]["selectedNodeName"] == "n2"
    assert rels["job-a-worker-0"]["placement"]["actualNodeName"] == "n2"
    assert all(c.get("lastTransitionTime") for c in stored["conditions"])
