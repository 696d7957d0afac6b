"""Snapshot input through the CLI. Bad input exits 2 with exactly one line on stderr that names the
file, the object and the field, prints nothing on stdout and never a traceback; good input is read in
every shape kubectl writes it."""

from __future__ import annotations

import copy
import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from optplan.adapters.kubefile import load_files, load_objects
from optplan.cli import main
from optplan.models.quantity import to_milli
from tests.builders import GPU, node, pod, podgroup, repack_run

Content = str | list[dict[str, Any]]


def base() -> list[dict[str, Any]]:
    """Two nodes, one movable pod, one RepackRun: valid on its own."""
    return [node("n1"), node("n2"), podgroup("pg"), pod("p1", "n1"), repack_run()]


def write(tmp_path: Path, name: str, content: Content) -> str:
    path = tmp_path / name
    text = content if isinstance(content, str) else yaml.safe_dump_all(content, sort_keys=False)
    path.write_text(text, encoding="utf-8")
    return str(path)


def error_line(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """Run ``optplan repack ARGS``; assert the bad-input contract and return the one stderr line."""
    rc = main(["repack", *args])
    cap = capsys.readouterr()
    assert rc == 2, cap
    assert cap.out == ""
    assert "Traceback" not in cap.err
    lines = cap.err.splitlines()
    assert len(lines) == 1, cap.err
    assert lines[0].startswith("optplan: error: ")
    return lines[0]


def _with(index: int, edit: Any) -> list[dict[str, Any]]:
    objs = base()
    edit(objs[index])
    return objs


def _node(name: str, **alloc: Any) -> dict[str, Any]:
    n = node(name)
    n["status"]["allocatable"].update(alloc)
    return n


def _bad_pod_request(value: str) -> dict[str, Any]:
    return pod("p9", "n2", extra_requests={"cpu": value})


def _run_spec(**spec: Any) -> dict[str, Any]:
    run = repack_run()
    run["spec"].update(spec)
    return run


def _podgroup_min_member(value: Any) -> dict[str, Any]:
    pg = podgroup("pg")
    pg["spec"]["minMember"] = value
    return pg


def _without_allocatable() -> dict[str, Any]:
    n = node("n3")
    del n["status"]["allocatable"]
    return n


def _pod_edit(edit: Any) -> dict[str, Any]:
    p = pod("p9", "n2")
    edit(p)
    return p


# id -> (file content, file suffix, what the line must name besides the file)
BAD: dict[str, tuple[Content, str, list[str]]] = {
    "malformed YAML": ("kind: Node\nmetadata: {name: [n1\n", ".yaml", ["malformed YAML", "line "]),
    "malformed JSON": ('{"kind": "Node",, "metadata": {}}', ".json", ["malformed JSON", "line 1 column"]),
    "YAML in a .json file": ("kind: Node\n", ".json", ["malformed JSON"]),
    "document not a mapping": ("- kind: Node\n", ".yaml", ["document 1", "not a Kubernetes object"]),
    "List item not a mapping": ('{"kind": "List", "items": [5]}', ".json", ["document 1 item 1", "mapping"]),
    "List items not a list": ("kind: List\nitems: 5\n", ".yaml", ["document 1 (List)", "items", "list"]),
    "object without kind": ([*base(), {"apiVersion": "v1", "metadata": {"name": "x"}}], ".yaml",
                            ["document 6 (metadata.name x)", ": kind: ", "missing"]),
    "Node without status.allocatable": ([*base(), _without_allocatable()], ".yaml",
                                        ["Node/n3", "status.allocatable", "missing"]),
    "Node status not a mapping": (_with(0, lambda n: n.__setitem__("status", "Ready")), ".yaml",
                                  ["Node/n1", ": status: ", "expected a mapping"]),
    "unparseable quantity": ([*base(), _node("n3", cpu="12x")], ".yaml",
                             ["Node/n3", "status.allocatable.cpu", "'12x'"]),
    "negative quantity": ([*base(), _node("n3", cpu="-1")], ".yaml", ["Node/n3", "status.allocatable.cpu", "negative"]),
    "negative request": ([*base(), _bad_pod_request("-500m")], ".yaml",
                         ["Pod/default/p9", "spec.containers[0].resources.requests.cpu", "negative"]),
    "quantity beyond int64": ([*base(), _node("n3", **{GPU: "1e30"})], ".yaml",
                              ["Node/n3", f"status.allocatable.{GPU}", "too large"]),
    "quantity with a huge exponent": ([*base(), _bad_pod_request("1e999999999")], ".yaml",
                                      ["Pod/default/p9", "spec.containers[0].resources.requests.cpu"]),
    "container resources not a mapping": (
        _with(3, lambda p: p["spec"]["containers"][0].__setitem__("resources", "big")), ".yaml",
        ["Pod/default/p1", "spec.containers[0].resources", "expected a mapping"]),
    "pod bound to a missing node": ([*base(), pod("p2", "ghost")], ".yaml",
                                    ["Pod/default/p2", "spec.nodeName", "'ghost'"]),
    "same identity twice": ([*base(), node("n1", 4)], ".yaml", ["Node/n1", "metadata.name", "duplicate"]),
    "goal without resource": ([*base()[:-1], _run_spec(goals=[{"minFragImprovementPercent": 5}])], ".yaml",
                              ["RepackRun/run", "spec.goals[0].resource"]),
    "goal with empty resource": ([*base()[:-1], repack_run(resource="")], ".yaml",
                                 ["RepackRun/run", "spec.goals[0].resource"]),
    "improvement 120": ([*base()[:-1], repack_run(min_improvement=120)], ".yaml",
                        ["RepackRun/run", "spec.goals[0].minFragImprovementPercent", "0..100"]),
    "improvement -1": ([*base()[:-1], repack_run(min_improvement=-1)], ".yaml",
                       ["RepackRun/run", "spec.goals[0].minFragImprovementPercent", "0..100"]),
    "improvement a string": ([*base()[:-1], _run_spec(goals=[{"resource": GPU, "minFragImprovementPercent": "10"}])],
                             ".yaml", ["RepackRun/run", "spec.goals[0].minFragImprovementPercent", "number"]),
    "negative maxPerRun.podGroups": ([*base()[:-1], repack_run(max_per_run={"podGroups": -1})], ".yaml",
                                     ["RepackRun/run", "spec.maxPerRun.podGroups"]),
    "maxPerRun.podGroups true": ([*base()[:-1], repack_run(max_per_run={"podGroups": True})], ".yaml",
                                 ["RepackRun/run", "spec.maxPerRun.podGroups", "integer"]),
    "negative resource budget": ([*base()[:-1], repack_run(max_per_run={"resources": {GPU: -2}})], ".yaml",
                                 ["RepackRun/run", "spec.maxPerRun.resources", GPU, "negative"]),
    "unparseable resource budget": ([*base()[:-1], repack_run(max_per_run={"resources": {GPU: "2 cards"}})], ".yaml",
                                    ["RepackRun/run", f"spec.maxPerRun.resources.{GPU}"]),
    "unknown mode": ([*base()[:-1], _run_spec(mode="Apply")], ".yaml", ["RepackRun/run", "spec.mode"]),
    # the API server never holds these Pods: none would be read as requesting nothing
    "Pod without spec": ([*base(), _pod_edit(lambda p: p.pop("spec"))], ".yaml",
                         ["Pod/default/p9", ": spec: ", "missing"]),
    "Pod with spec null": ([*base(), _pod_edit(lambda p: p.__setitem__("spec", None))], ".yaml",
                           ["Pod/default/p9", ": spec: ", "missing"]),
    "Pod without spec.containers": ([*base(), _pod_edit(lambda p: p["spec"].pop("containers"))], ".yaml",
                                    ["Pod/default/p9", "spec.containers", "missing"]),
    "Pod with no containers": ([*base(), _pod_edit(lambda p: p["spec"].__setitem__("containers", []))], ".yaml",
                               ["Pod/default/p9", "spec.containers", "at least one container"]),
    "Pod phase a number": ([*base(), _pod_edit(lambda p: p["status"].__setitem__("phase", 1))], ".yaml",
                           ["Pod/default/p9", "status.phase", "expected a string, got int"]),
    "Pod phase a list": ([*base(), _pod_edit(lambda p: p["status"].__setitem__("phase", ["Running"]))], ".yaml",
                         ["Pod/default/p9", "status.phase", "expected a string, got list"]),
    "minMember a word": ([*base()[:2], _podgroup_min_member("two"), *base()[3:]], ".yaml",
                         ["PodGroup/default/pg", "spec.minMember", "integer"]),
    "minMember 1.5": ([*base()[:2], _podgroup_min_member(1.5), *base()[3:]], ".yaml",
                      ["PodGroup/default/pg", "spec.minMember", "integer"]),
    "minMember true": ([*base()[:2], _podgroup_min_member(True), *base()[3:]], ".yaml",
                       ["PodGroup/default/pg", "spec.minMember", "integer"]),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    content, suffix, needles = BAD[case]
    path = write(tmp_path, "snapshot" + suffix, content)
    line = error_line(capsys, path)
    assert line.startswith(f"optplan: error: {path}: ")
    for needle in needles:
        assert needle in line, line


def test_unreadable_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = str(tmp_path / "missing.yaml")
    line = error_line(capsys, missing)
    assert line.startswith(f"optplan: error: {missing}: cannot read file")
    line = error_line(capsys, str(tmp_path))
    assert f"{tmp_path}: cannot read file" in line


def test_same_identity_in_two_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first = write(tmp_path, "a.yaml", base())
    second = write(tmp_path, "b.yaml", [node("n1", 4)])
    line = error_line(capsys, first, second)
    assert line.startswith(f"optplan: error: {second}: Node/n1: metadata.name: duplicate")
    assert f"also defined in {first}" in line


def test_same_pod_name_in_two_namespaces_is_fine(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objs = [*base(), podgroup("pg", ns="other"), pod("p1", "n2", ns="other")]
    assert main(["repack", write(tmp_path, "a.yaml", objs)]) == 0


# ---- which RepackRun -----------------------------------------------------------------------------

def test_no_repackrun(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "a.yaml", base()[:-1])
    line = error_line(capsys, path)
    assert line.startswith(f"optplan: error: {path}: RepackRun: --run: no RepackRun given")


def test_several_repackruns_without_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first = write(tmp_path, "a.yaml", base())
    second = write(tmp_path, "b.yaml", [repack_run("run2")])
    line = error_line(capsys, first, second)
    assert line.startswith(f"optplan: error: {first}, {second}: RepackRun: --run: several RepackRuns")
    assert "(run, run2)" in line
    assert main(["repack", first, second, "--run", "run2"]) == 0


def test_run_names_a_missing_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "a.yaml", base())
    line = error_line(capsys, path, "--run", "nope")
    assert line.startswith(f"optplan: error: {path}: RepackRun/nope: --run: no RepackRun named 'nope'")


def test_run_file_without_a_repackrun(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "a.yaml", base()[:-1])
    run_file = write(tmp_path, "run.yaml", [node("n9")])
    line = error_line(capsys, path, "--run", run_file)
    assert line.startswith(f"optplan: error: {run_file}: ") and "RepackRun" in line


def test_run_file_with_a_bad_repackrun(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "a.yaml", base()[:-1])
    run_file = write(tmp_path, "run.yaml", [repack_run(min_improvement=120)])
    line = error_line(capsys, path, "--run", run_file)
    assert line.startswith(f"optplan: error: {run_file}: RepackRun/run: spec.goals[0].minFragImprovementPercent")


# ---- warnings are not errors -----------------------------------------------------------------------

def _over_committed() -> list[dict[str, Any]]:
    return [node("n1"), node("n2"), podgroup("pg"), pod("p1", "n1", 6), pod("p2", "n1", 3), repack_run()]


def test_over_committed_node_is_a_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          caplog: pytest.LogCaptureFixture) -> None:
    path = write(tmp_path, "a.yaml", _over_committed())
    with caplog.at_level(logging.WARNING, logger="optplan"):
        assert main(["repack", path]) == 0
    doc = yaml.safe_load(capsys.readouterr().out)
    assert doc["kind"] == "RepackRun" and doc["status"]["phase"] == "Succeeded"
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert all(word in warnings[0] for word in ("node n1", "over-committed", GPU, "9", "8")), warnings


def test_real_process_stderr(tmp_path: Path) -> None:
    """Outside pytest's log capture: the warning reaches stderr through logging, an error is one line."""
    path = write(tmp_path, "a.yaml", _over_committed())
    proc = subprocess.run([sys.executable, "-m", "optplan.cli", "repack", path, "--solver", "greedy"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert yaml.safe_load(proc.stdout)["kind"] == "RepackRun"
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("optplan: warning: node n1 is over-committed"), proc.stderr
    bad = write(tmp_path, "b.yaml", [*base(), _node("n3", cpu="12x")])
    proc = subprocess.run([sys.executable, "-m", "optplan.cli", "repack", bad],
                          capture_output=True, text=True, timeout=60, check=False)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == f"optplan: error: {bad}: Node/n3: status.allocatable.cpu: unparseable quantity '12x'\n"


def test_a_refusal_after_a_warning_is_the_refusal_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """At the default verbosity a warning is one line in the error line's form, printed once the command
    succeeds; when the command refuses its input, the refusal is printed alone."""
    path = write(tmp_path, "a.yaml", _over_committed())
    assert main(["repack", path, "--solver", "greedy"]) == 0
    err = capsys.readouterr().err
    assert err == f"optplan: warning: node n1 is over-committed on {GPU}: pods request 9, allocatable 8\n"
    line = error_line(capsys, path, "--run", "nope")
    assert "RepackRun/nope" in line and "over-committed" not in line
    assert main(["place", path]) == 2  # every command alike: here, nothing to place
    cap = capsys.readouterr()
    assert cap.out == "" and cap.err.count("\n") == 1, cap
    assert cap.err.startswith("optplan: error: ") and "no VCJob to place" in cap.err


def test_a_pod_without_status_is_pending(tmp_path: Path) -> None:
    p = pod("p9", None)
    del p["status"]
    assert load_objects([*base(), p]).snapshot.pods["default/p9"].phase == "Pending"


# ---- good input in every shape ----------------------------------------------------------------------

def _list(kind: str, items: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": kind, "metadata": {"resourceVersion": ""}, "items": items}


def test_list_kinds_and_several_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objs = base()
    nodes = write(tmp_path, "nodes.yaml", [_list("NodeList", objs[:2])])
    pods = write(tmp_path, "pods.json", json.dumps(_list("PodList", [objs[3]])))
    rest = write(tmp_path, "rest.yaml", [_list("List", [objs[2], objs[4]])])
    loaded = load_files([nodes, pods, rest])
    assert list(loaded.snapshot.nodes) == ["n1", "n2"]
    assert list(loaded.snapshot.pods) == ["default/p1"]
    assert list(loaded.snapshot.pod_groups) == ["default/pg"]
    assert list(loaded.runs) == ["run"]
    assert main(["repack", nodes, pods, rest, "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["status"]["plan"]["freedNodes"] == []


def test_multi_document_yaml_and_json(tmp_path: Path) -> None:
    objs = base()
    stream = "# a snapshot\n---\n" + "---\n".join(yaml.safe_dump(o) for o in objs) + "---\n...\n"
    from_yaml = load_files([write(tmp_path, "a.yaml", stream)])
    single = write(tmp_path, "node.json", json.dumps(node("n3")))
    listed = write(tmp_path, "rest.json", json.dumps(_list("List", objs)))
    from_json = load_files([listed, single])
    assert from_yaml.snapshot.pods == from_json.snapshot.pods
    assert set(from_json.snapshot.nodes) == set(from_yaml.snapshot.nodes) | {"n3"}
    assert from_yaml.runs == from_json.runs


def test_unknown_kinds_are_skipped() -> None:
    others = [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"},
         "data": ["not", "a", "mapping"]},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": "anything"},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}},
        {"apiVersion": "example.com/v1", "kind": "Node", "metadata": {"name": "not-a-core-node"}},
    ]
    loaded = load_objects(base() + others)
    assert list(loaded.snapshot.nodes) == ["n1", "n2"]


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
def test_terminal_pods_on_a_missing_node_are_ignored(phase: str) -> None:
    loaded = load_objects([*base(), pod("done", "gone-node", phase=phase), pod("queued", None, phase="Pending")])
    assert "default/done" not in loaded.snapshot.pods
    assert loaded.snapshot.pods["default/queued"].node_name is None


# ---- quantities and requests ---------------------------------------------------------------------

@pytest.mark.parametrize(("text", "milli"), [
    ("500m", 500), ("64Gi", 64 * 2**30 * 1000), ("1e3", 1_000_000), ("8", 8000), (8, 8000), ("1.5", 1500),
    (1.5, 1500), ("100M", 100 * 10**6 * 1000), ("0.5Gi", 2**29 * 1000), ("1Ki", 1024 * 1000), ("2k", 2_000_000),
    ("0", 0), ("+2", 2000), (".5", 500), ("5.", 5000), ("1E2", 100_000), ("2E", 2 * 10**18 * 1000),
    ("1n", 1), ("1u", 1), ("1.0001", 1001), ("250u", 1), ("-1", -1000), ("-1500m", -1500), ("1e-3", 1),
])
def test_to_milli(text: object, milli: int) -> None:
    assert to_milli(text) == milli


@pytest.mark.parametrize("text", ["12x", "", "Gi", "1 Gi", "1.2.3", "1e", "e3", "0x10", "1Gb", "--1", "1e999",
                                  True, None, [1], float("nan"), float("inf")])
def test_to_milli_rejects(text: object) -> None:
    with pytest.raises(ValueError):
        to_milli(text)


def _requests(spec: dict[str, Any]) -> dict[str, int]:
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
           "spec": copy.deepcopy(spec), "status": {"phase": "Pending"}}
    return load_objects([obj]).snapshot.pods["default/p"].requests


def _c(name: str, *, sidecar: bool = False, **requests: str) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "resources": {"requests": requests}}
    if sidecar:
        c["restartPolicy"] = "Always"
    return c


@pytest.mark.parametrize(("spec", "expected"), [
    ({"containers": [_c("a", cpu="1"), _c("b", cpu="2", memory="1Gi")]}, {"cpu": 3000, "memory": 2**30 * 1000}),
    ({"containers": [_c("a", cpu="1", **{GPU: "2"})], "initContainers": [_c("i", cpu="4")]},
     {"cpu": 4000, GPU: 2000}),
    ({"containers": [_c("a", cpu="1")], "initContainers": [_c("i1", cpu="500m"), _c("i2", cpu="700m")]},
     {"cpu": 1000}),
    # a sidecar runs beside the later init containers and beside the app containers
    ({"containers": [_c("a", cpu="1")], "initContainers": [_c("s", sidecar=True, cpu="1"), _c("i", cpu="2")]},
     {"cpu": 3000}),
    ({"containers": [_c("a", cpu="1")], "initContainers": [_c("i", cpu="4"), _c("s", sidecar=True, cpu="1")]},
     {"cpu": 4000}),
    ({"containers": [_c("a", cpu="3")], "initContainers": [_c("s", sidecar=True, cpu="1"), _c("i", cpu="2")]},
     {"cpu": 4000}),
    ({"containers": [_c("a", cpu="1")], "overhead": {"cpu": "250m", "memory": "64Mi"}},
     {"cpu": 1250, "memory": 64 * 2**20 * 1000}),
    ({"containers": [_c("a", cpu="1"), {"name": "b"}], "initContainers": [_c("i", cpu="0")]}, {"cpu": 1000}),
    ({"containers": [_c("a", cpu="0")]}, {}),
])
def test_effective_requests(spec: dict[str, Any], expected: dict[str, int]) -> None:
    assert _requests(spec) == expected


def test_a_live_clusters_pod_on_a_deleted_node_is_left_out_with_a_warning() -> None:
    """A file naming a node it does not hold is refused; a live cluster really has such pods for a while (a
    node deleted before its pods: they stay until deleted or swept by the pod garbage collector, seen on the
    real cluster tier), so the controller's read (``orphans=True``) leaves them out and says so."""
    objs = [*base(), pod("p2", "ghost")]
    with pytest.raises(Exception, match="ghost"):
        load_objects(objs, "cluster")
    snap = load_objects(objs, "cluster", orphans=True).snapshot
    assert "default/p2" not in snap.pods and "default/p1" in snap.pods
    assert any("default/p2" in w and "'ghost'" in w for w in snap.warnings), snap.warnings
