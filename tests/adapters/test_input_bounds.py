"""Bounded input: values within Kubernetes' ranges, untrusted structure that cannot blow up, and the
limits of ``models.limits``. Each bad input exits 2 with ONE line on stderr naming file, object and
field; each has a good neighbour that still loads."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from optplan.adapters import documents
from optplan.adapters.kubefile import load_files
from optplan.cli import main
from optplan.errors import InputError, printable
from optplan.models import limits
from tests.adapters.test_input_errors import base, write
from tests.builders import GPU, job_task, node, pod, podgroup, repack_run, vcjob


def error_line(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """Run ``optplan repack ARGS``; assert the bad-input contract and return the one stderr line."""
    rc = main(["repack", "--solver", "greedy", *args])
    cap = capsys.readouterr()
    assert rc == 2, cap
    assert cap.out == ""
    assert "Traceback" not in cap.err
    lines = cap.err.splitlines()
    assert len(lines) == 1, cap.err
    assert cap.err.count("\n") == 1 and "\r" not in cap.err and "\u2028" not in cap.err
    assert lines[0].startswith("optplan: error: ")
    return lines[0]


def ok(*args: str) -> None:
    assert main(["repack", "--solver", "greedy", *args]) == 0


# ---- objects, each with one field set --------------------------------------------------------------

def _node(name: str = "n3", **alloc: Any) -> dict[str, Any]:
    n = node(name)
    n["status"]["allocatable"].update(alloc)
    return n


def _unschedulable(value: Any) -> dict[str, Any]:
    n = node("n3")
    n["spec"]["unschedulable"] = value
    return n


def _request(**requests: Any) -> dict[str, Any]:
    return pod("p9", "n2", extra_requests=requests)


def _named(kind: str, name: Any) -> dict[str, Any]:
    obj = {"Node": lambda: node("n3"), "Pod": lambda: pod("p9", "n2"), "PodGroup": lambda: podgroup("pg9")}[kind]()
    obj["metadata"]["name"] = name
    return obj


def _in_namespace(ns: Any) -> dict[str, Any]:
    p = pod("p9", None)
    p["metadata"]["namespace"] = ns
    return p


def _labelled(value: Any) -> dict[str, Any]:
    return node("n3", labels={"zone": value})


def _owner_controller(value: Any) -> dict[str, Any]:
    pg = podgroup("pg9")
    pg["metadata"]["ownerReferences"][0]["controller"] = value
    return pg


def _priority_class(name: str, value: Any) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value}


def _queue(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "q"}, "spec": spec}


def _vcjob(replicas: Any = 2, min_available: Any = 1, tasks: int = 1) -> dict[str, Any]:
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "j", "namespace": "default"},
            "spec": {"minAvailable": min_available, "tasks": [
                {"name": f"t{i}", "replicas": replicas, "template": {"spec": {"containers": [
                    {"name": "c", "resources": {"requests": {GPU: "1"}}}]}}} for i in range(tasks)]}}


def _hyper(name: str, tier: Any = 1, children: tuple[str, ...] = ()) -> dict[str, Any]:
    members = [{"type": "HyperNode", "selector": {"exactMatch": {"name": c}}} for c in children] or [
        {"type": "Node", "selector": {"exactMatch": {"name": "n1"}}}]
    return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
            "spec": {"tier": tier, "members": members}}


def _podgroup_field(path: str, value: Any) -> dict[str, Any]:
    pg = podgroup("pg9")
    spec = pg["spec"]
    *head, last = path.split(".")
    for part in head:
        spec = spec.setdefault(part, {})
    spec[last] = value
    return pg


def _pdb(allowed: Any) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "b", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"a": "b"}}}, "status": {"disruptionsAllowed": allowed}}


def _run(**spec: Any) -> dict[str, Any]:
    run = repack_run()
    run["spec"].update(spec)
    return run


def _pod_priority(value: Any) -> dict[str, Any]:
    return pod("p9", "n2", priority=value)


INT32 = 2**31 - 1

# id -> (bad object, its good neighbour, what the line must name besides the file)
VALUES: dict[str, tuple[dict[str, Any], dict[str, Any], list[str]]] = {
    # extended resources count whole units, as the API server says (IsIntegerResourceName)
    "GPU 1.5": (_node(**{GPU: "1.5"}), _node(**{GPU: "2"}), ["Node/n3", f"status.allocatable.{GPU}", "whole number"]),
    "GPU request 8m": (_request(**{GPU: "8m"}), _request(**{GPU: "8"}), [
        "Pod/default/p9", f"spec.containers[0].resources.requests.{GPU}", "whole number", "'8m'"]),
    "Ascend 0.5 as a float": (_node(**{"huawei.com/ascend-1980": 0.5}), _node(**{"huawei.com/ascend-1980": 8}),
                              ["Node/n3", "status.allocatable.huawei.com/ascend-1980", "whole number"]),
    "pods 1.5": (_node(pods="1.5"), _node(pods="110"), ["Node/n3", "status.allocatable.pods", "whole number"]),
    "full-width digits": (_request(cpu="\uff11\uff12"), _request(cpu="12"),
                          ["Pod/default/p9", "spec.containers[0].resources.requests.cpu", "unparseable"]),
    "Arabic-Indic digits": (_node(memory="\u0661\u0662Gi"), _node(memory="12Gi"),
                            ["Node/n3", "status.allocatable.memory", "unparseable"]),
    "quantity over int64": (_node(memory="9Pi"), _node(memory="4Pi"), ["Node/n3", "status.allocatable.memory",
                                                                        "too large"]),
    "unschedulable the string false": (_unschedulable("false"), _unschedulable(False),
                                       ["Node/n3", "spec.unschedulable", "boolean"]),
    "unschedulable 1": (_unschedulable(1), _unschedulable(True), ["Node/n3", "spec.unschedulable", "boolean"]),
    "owner controller the string true": (_owner_controller("true"), _owner_controller(True),
                                         ["PodGroup/default/pg9", "metadata.ownerReferences[0].controller", "boolean"]),
    "label value true": (_labelled(True), _labelled("true"), ["Node/n3", "metadata.labels.zone", "string"]),
    "label value 1": (_labelled(1), _labelled("1"), ["Node/n3", "metadata.labels.zone", "string"]),
    "PriorityClass value over int32": (_priority_class("big", 2**31), _priority_class("big", 10**9),
                                       ["PriorityClass/big", "value", "-2147483648..2147483647"]),
    "PriorityClass value over 1e9": (_priority_class("big", 10**9 + 1), _priority_class("big", -(2**31)),
                                     ["PriorityClass/big", "value", "1000000000"]),
    "PriorityClass value a float": (_priority_class("big", 1.0), _priority_class("big", 1),
                                    ["PriorityClass/big", "value", "integer"]),
    "system- PriorityClass made up": (_priority_class("system-mine", 5),
                                      _priority_class("system-cluster-critical", 2_000_000_000),
                                      ["PriorityClass/system-mine", "metadata.name", "reserved"]),
    "pod priority over int32": (_pod_priority(2**31), _pod_priority(-(2**31)),
                                ["Pod/default/p9", "spec.priority", "2147483647"]),
    "queue weight over int32": (_queue(weight=2**31), _queue(weight=INT32), ["Queue/q", "spec.weight", "2147483647"]),
    "queue weight the string 2": (_queue(weight="2"), _queue(weight=2), ["Queue/q", "spec.weight", "integer"]),
    "queue priority over int32": (_queue(priority=2**40), _queue(priority=-5), ["Queue/q", "spec.priority"]),
    "queue reclaimable the string no": (_queue(reclaimable="no"), _queue(reclaimable=False),
                                        ["Queue/q", "spec.reclaimable", "boolean"]),
    "replicas over int32": (_vcjob(replicas=2**31), _vcjob(replicas=INT32),
                            ["Job/default/j", "spec.tasks[0].replicas", "2147483647"]),
    "replicas summing over int32": (_vcjob(replicas=2**30, tasks=2), _vcjob(replicas=2**30 - 1, tasks=2),
                                    ["Job/default/j", "spec.tasks", "int32"]),
    "replicas 2.0": (_vcjob(replicas=2.0), _vcjob(replicas=2), ["Job/default/j", "spec.tasks[0].replicas", "integer"]),
    "minAvailable the string 1": (_vcjob(min_available="1"), _vcjob(min_available=1),
                                  ["Job/default/j", "spec.minAvailable", "integer"]),
    "minMember over int32": (_podgroup_field("minMember", 2**31), _podgroup_field("minMember", 3),
                             ["PodGroup/default/pg9", "spec.minMember", "2147483647"]),
    "highestTierAllowed over int32": (
        _podgroup_field("networkTopology.highestTierAllowed", 2**32),
        _podgroup_field("networkTopology.highestTierAllowed", 2),
        ["PodGroup/default/pg9", "spec.networkTopology.highestTierAllowed"]),
    "HyperNode tier over int32": (_hyper("h", tier=2**31), _hyper("h", tier=3), ["HyperNode/h", "spec.tier"]),
    "HyperNode tier negative": (_hyper("h", tier=-1), _hyper("h", tier=0), ["HyperNode/h", "spec.tier", "negative"]),
    "HyperNode tier the string 1": (_hyper("h", tier="1"), _hyper("h", tier=1), ["HyperNode/h", "spec.tier",
                                                                                "integer"]),
    "disruptionsAllowed over int32": (_pdb(2**31), _pdb(1), ["PodDisruptionBudget/default/b",
                                                             "status.disruptionsAllowed"]),
    "name with a newline": (_named("Node", "n3\nNode/n1: fake"), _named("Node", "n3"),
                            ["Node/n3\\nNode/n1: fake", "metadata.name", "DNS-1123 subdomain"]),
    "name with a bidi override": (_named("Pod", "p9\u202egpj.exe"), _named("Pod", "p9.exe"),
                                  ["Pod/default/p9\\u202egpj.exe", "metadata.name", "DNS-1123"]),
    "name with a NUL": (_named("PodGroup", "pg\x009"), _named("PodGroup", "pg-9"),
                        ["PodGroup/default/pg\\x009", "metadata.name"]),
    "name with upper case": (_named("Node", "Node3"), _named("Node", "node3.example.com"),
                             ["Node/Node3", "metadata.name", "DNS-1123"]),
    "name too long": (_named("Node", "n" * 254), _named("Node", "n" * 253), ["metadata.name", "253"]),
    "namespace with a dot": (_in_namespace("team.a"), _in_namespace("team-a"),
                             ["Pod/team.a/p9", "metadata.namespace", "DNS-1123 label"]),
    "namespace a number": (_in_namespace(7), _in_namespace("ns7"), ["metadata.namespace", "string"]),
}


@pytest.mark.parametrize("case", list(VALUES))
def test_bad_value(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    bad, good, needles = VALUES[case]
    path = write(tmp_path, "snapshot.yaml", [*base(), bad])
    line = error_line(capsys, path)
    assert line.startswith(f"optplan: error: {path}: "), line
    for needle in needles:
        assert needle in line, line
    ok(write(tmp_path, "good.yaml", [*base(), good]))


# ---- RepackRun numbers ------------------------------------------------------------------------------

RUNS: dict[str, tuple[dict[str, Any], dict[str, Any], list[str]]] = {
    "maxPerRun.podGroups over int32": (_run(maxPerRun={"podGroups": 2**31}), _run(maxPerRun={"podGroups": 3}),
                                       ["spec.maxPerRun.podGroups", "2147483647"]),
    "maxPerRun.podGroups 3.0": (_run(maxPerRun={"podGroups": 3.0}), _run(maxPerRun={"podGroups": 0}),
                                ["spec.maxPerRun.podGroups", "integer"]),
    "budget of half a GPU": (_run(maxPerRun={"resources": {GPU: "500m"}}), _run(maxPerRun={"resources": {GPU: 4}}),
                             [f"spec.maxPerRun.resources.{GPU}", "whole number"]),
    "budget over 2^62": (_run(maxPerRun={"resources": {"memory": "5Pi"}}),
                         _run(maxPerRun={"resources": {"memory": "3Pi"}}),
                         ["spec.maxPerRun.resources.memory", "MAX_TOTAL_MILLI"]),
    "ttl over int32": (_run(ttlSecondsAfterFinished=2**31), _run(ttlSecondsAfterFinished=60),
                       ["spec.ttlSecondsAfterFinished"]),
    "grace period negative": (_run(eviction={"gracePeriodSeconds": -1}), _run(eviction={"gracePeriodSeconds": 30}),
                              ["spec.eviction.gracePeriodSeconds", "negative"]),
}


@pytest.mark.parametrize("case", list(RUNS))
def test_bad_run(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    bad, good, needles = RUNS[case]
    line = error_line(capsys, write(tmp_path, "snapshot.yaml", [*base()[:-1], bad]))
    assert "RepackRun/run" in line
    for needle in needles:
        assert needle in line, line
    ok(write(tmp_path, "good.yaml", [*base()[:-1], good]))


# ---- sums that must fit the planners' integer models -------------------------------------------------
# One rule (limits.past_model_range): per resource, all nodes' allocatable, all live pods' requests and
# all VCJobs' requests each add up to at most MAX_TOTAL_MILLI (2^62 milli-units), checked when the
# snapshot is read, so no command (repack, place, queues, frag) builds a model past its range.

ALMOST = (2**62 // 1000) - 100
"""Whole GPUs that, beside base()'s 16, keep the nodes' sum within 2^62 milli-units."""


def _job(replicas: int, name: str = "big", **requests: Any) -> dict[str, Any]:
    return vcjob(name, tasks=[job_task("t", replicas, **requests)])


# id -> (bad objects, good neighbours, what the line must name besides the file)
TOTALS: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]], list[str]]] = {
    "one node holds 2^63 milli-GPUs": ([_node("n3", **{GPU: "9223372036854775"})], [_node("n3", **{GPU: str(ALMOST)})],
                                       ["Node/n3", f"status.allocatable.{GPU}", "MAX_TOTAL_MILLI"]),
    "two nodes add up past 2^62": ([_node("n3", memory="3Pi"), _node("n4", memory="3Pi")], [_node("n3", memory="3Pi")],
                                   ["Node/n4", "status.allocatable.memory", "MAX_TOTAL_MILLI"]),
    "pods on one node past 2^62": ([_node("n3", memory="4Pi"), *(pod(f"q{i}", "n3", gpu=0, memory="2Pi")
                                                                 for i in range(3))],
                                   [_node("n3", memory="4Pi"), *(pod(f"q{i}", "n3", gpu=0, memory="2Pi")
                                                                 for i in range(2))],
                                   ["Pod/default/q2", "spec.containers", "MAX_TOTAL_MILLI"]),
    "pending pods past 2^62": ([pod(f"q{i}", None, gpu=0, memory="3Pi") for i in range(2)],
                               [pod("q0", None, gpu=0, memory="3Pi")],
                               ["Pod/default/q1", "spec.containers", "MAX_TOTAL_MILLI"]),
    "a VCJob's replicas past 2^62": ([_job(2, gpu=1, memory="3Pi")], [_job(1, gpu=1, memory="3Pi")],
                                     ["Job/default/big", "spec.tasks", "memory", "MAX_TOTAL_MILLI"]),
    "VCJobs together past 2^62": ([_job(1, gpu=1, memory="3Pi"), _job(1, "big2", gpu=1, memory="3Pi")],
                                  [_job(1, gpu=1, memory="3Pi")],
                                  ["Job/default/big2", "spec.tasks", "MAX_TOTAL_MILLI"]),
}


@pytest.mark.parametrize("command", ["repack", "place", "queues"])
@pytest.mark.parametrize("case", list(TOTALS))
def test_sums_past_the_model_range(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str,
                                   command: str) -> None:
    """Refused as the snapshot is read, by every command alike: one line, exit 2, nothing on stdout."""
    bad, good, needles = TOTALS[case]
    job = [vcjob("small")]
    path = write(tmp_path, "snapshot.yaml", [*base(), *bad, *job])
    rc = main([command, path])
    cap = capsys.readouterr()
    assert (rc, cap.out, cap.err.count("\n")) == (2, "", 1), cap
    assert cap.err.startswith(f"optplan: error: {path}: "), cap.err
    for needle in needles:
        assert needle in cap.err, cap.err
    good_path = write(tmp_path, "good.yaml", [*base(), *good, *job])
    assert main([command, good_path, *(["--solver", "greedy"] if command != "queues" else [])]) == 0, \
        capsys.readouterr().err


def test_place_with_cpsat_at_the_edge_of_the_range(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The fuzz case (a node of 9223372036854775 GPUs ended in a TypeError from CP-SAT's bounds) is refused;
    its neighbour just inside the range is placed by the exact model."""
    snap = [node("n1", "9223372036854775"), node("n2"), podgroup("pg"), pod("p1", "n1"), vcjob("j")]
    path = write(tmp_path, "a.yaml", snap)
    assert main(["place", path, "--solver", "cpsat"]) == 2
    cap = capsys.readouterr()
    assert cap.out == "" and cap.err.count("\n") == 1 and "Node/n1" in cap.err and "internal" not in cap.err
    snap[0] = node("n1", str(ALMOST))
    assert main(["place", write(tmp_path, "b.yaml", snap), "--solver", "cpsat", "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["jobs"][0]["admitted"] is True


def test_the_milp_range_names_the_solver(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """HiGHS reads a coefficient of 1e15 or more as infinite: the MILP twin refuses such a model in one
    line naming --solver (it ended in an IndexError from PuLP), while CP-SAT plans the same snapshot."""
    snap = [node("n1", str(10**15)), node("n2"), node("n3"), podgroup("pg"), pod("p1", "n1"), pod("p2", "n2"),
            repack_run()]
    path = write(tmp_path, "a.yaml", snap)
    assert main(["repack", path, "--solver", "milp", "--time-limit", "5"]) == 2
    cap = capsys.readouterr()
    assert cap.out == "" and cap.err.count("\n") == 1, cap
    assert cap.err.startswith("optplan: error: --solver: the milp solver (HiGHS)") and "--solver cpsat" in cap.err
    assert main(["repack", path, "--solver", "cpsat", "--time-limit", "5"]) == 0
    snap[0] = node("n1", str(10**14))
    assert main(["repack", write(tmp_path, "b.yaml", snap), "--solver", "milp", "--time-limit", "5"]) == 0


# ---- untrusted structure ----------------------------------------------------------------------------

def _bomb(levels: int = 9) -> str:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels)]
    return "kind: ConfigMap\napiVersion: v1\nmetadata: {name: bomb}\ndata:\n" + "".join(f"  {x}\n" for x in lines)


def _deep_json(depth: int) -> str:
    return '{"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "x"}, "data": ' + "[" * depth + \
        "]" * depth + "}"


def _deep_yaml(depth: int) -> str:
    return "kind: ConfigMap\napiVersion: v1\nmetadata: {name: x}\ndata: " + "[" * depth + "]" * depth + "\n"


def _snapshot_text() -> str:
    return yaml.safe_dump_all(base(), sort_keys=False)


STRUCTURE: dict[str, tuple[str, str, str, list[str]]] = {
    # id -> (bad text, good neighbour, suffix, needles)
    "billion laughs": (_bomb(), _bomb(3), ".yaml", ["MAX_ALIAS_EXPANSION", "line "]),
    "deep JSON": (_deep_json(100_000), _deep_json(50), ".json", ["MAX_NESTING_DEPTH"]),
    "JSON just past the depth limit": (_deep_json(limits.MAX_NESTING_DEPTH), _deep_json(90), ".json",
                                       ["MAX_NESTING_DEPTH"]),
    "deep YAML flow": (_deep_yaml(100_000), _deep_yaml(50), ".yaml", ["MAX_NESTING_DEPTH"]),
    "deep YAML block": ("kind: ConfigMap\napiVersion: v1\nmetadata: {name: x}\ndata:\n"
                        + "".join(" " * i + "-\n" for i in range(1, 150)), _deep_yaml(20), ".yaml",
                        ["MAX_NESTING_DEPTH"]),
    "integer of 5000 digits in JSON": ('{"kind": "Node", "n": ' + "9" * 5000 + "}", '{"kind": "Node2", "n": 9}',
                                       ".json", ["value out of range", "4300"]),
    "integer of 5000 digits in YAML": ("kind: Node\nn: " + "9" * 5000 + "\n", "kind: Node2\nn: 9\n", ".yaml",
                                       ["value out of range"]),
    "lone surrogate in JSON": ('{"kind": "Node", "metadata": {"name": "n\\ud800"}}',
                               '{"kind": "Node2", "metadata": {"name": "n\\ud83d\\ude00"}}', ".json",
                               ["lone surrogate", "\\ud800"]),
    "lone surrogate in YAML": ('kind: Node\nmetadata: {name: "n\\ud800"}\n', 'kind: Node2\nmetadata: {name: "n"}\n',
                               ".yaml", ["malformed YAML"]),
    "Lists nested too deep": ("kind: List\nitems:\n" + "".join(
        "  " * i + "- kind: List\n" + "  " * i + "  items:\n" for i in range(1, 10)), "kind: List\nitems: []\n",
        ".yaml", ["MAX_LIST_NESTING"]),
}


@pytest.mark.parametrize("case", list(STRUCTURE))
def test_bad_structure(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    bad, good, suffix, needles = STRUCTURE[case]
    snap = write(tmp_path, "base.yaml", base())
    path = write(tmp_path, "bad" + suffix, bad)
    line = error_line(capsys, snap, path)
    assert line.startswith(f"optplan: error: {path}: "), line
    for needle in needles:
        assert needle in line, line
    ok(snap, write(tmp_path, "good" + suffix, good))


def test_small_anchors_are_read_like_safe_load(tmp_path: Path) -> None:
    text = ("kind: List\nitems:\n- &n {apiVersion: v1, kind: Node, metadata: {name: n1, labels: &l {a: b}},"
            " status: {allocatable: &alloc {cpu: '8', nvidia.com/gpu: '8'}}}\n"
            "- {apiVersion: v1, kind: Node, metadata: {name: n2, labels: *l}, status: {allocatable: {<<: *alloc,"
            " cpu: '4'}}}\n")
    snap = load_files([write(tmp_path, "a.yaml", text)]).snapshot
    assert snap.nodes["n2"].labels == {"a": "b"}
    assert snap.nodes["n2"].allocatable == {"cpu": 4000, GPU: 8000}
    assert documents.yaml_documents(text, "x") == list(yaml.safe_load_all(text))


def test_queue_hierarchy_too_deep(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def chain(n: int) -> list[dict[str, Any]]:
        return [_queue(parent=f"q{i - 1}" if i else "root") | {"metadata": {"name": f"q{i}"}} for i in range(n)]
    line = error_line(capsys, write(tmp_path, "a.yaml", [*base(), *chain(limits.MAX_QUEUE_DEPTH + 1)]))
    assert "Queue/q100" in line and "spec.parent" in line and "MAX_QUEUE_DEPTH" in line
    ok(write(tmp_path, "b.yaml", [*base(), *chain(limits.MAX_QUEUE_DEPTH)]))


def test_long_queue_cycle_is_refused_and_a_short_one_is_reported(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    def cycle(n: int) -> list[dict[str, Any]]:
        return [_queue(parent=f"q{(i + 1) % n}") | {"metadata": {"name": f"q{i}"}} for i in range(n)]
    line = error_line(capsys, write(tmp_path, "a.yaml", [*base(), *cycle(2 * limits.MAX_QUEUE_DEPTH)]))
    assert "MAX_QUEUE_DEPTH" in line
    path = write(tmp_path, "b.yaml", [*base(), *cycle(3)])
    assert main(["queues", path]) in (0, 1)  # the validation reports the cycle; it never hangs
    assert "Traceback" not in capsys.readouterr().err


def test_hyper_nodes_too_deep(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def chain(n: int) -> list[dict[str, Any]]:
        return [_hyper(f"h{i}", tier=i + 1, children=(f"h{i - 1}",) if i else ()) for i in range(n)]
    line = error_line(capsys, write(tmp_path, "a.yaml", [*base(), *chain(limits.MAX_HYPERNODE_DEPTH + 1)]))
    assert "HyperNode/h100" in line and "spec.members" in line and "MAX_HYPERNODE_DEPTH" in line
    ok(write(tmp_path, "b.yaml", [*base(), *chain(limits.MAX_HYPERNODE_DEPTH)]))
    cyclic = [_hyper("ha", children=("hb",)), _hyper("hb", children=("ha",))]
    ok(write(tmp_path, "c.yaml", [*base(), *cyclic]))


def _regex_hyper(pattern: str) -> dict[str, Any]:
    return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": "rack"},
            "spec": {"tier": 1, "members": [{"type": "Node", "selector": {"regexMatch": {"pattern": pattern}}}]}}


def test_a_backtracking_regex_cannot_hang_and_go_syntax_is_enforced(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    # RE2 (Go's engine, as Volcano) matches in linear time: with Python's re this name takes 2^60 steps
    long_name = node("a" * 60)
    ok(write(tmp_path, "a.yaml", [*base(), long_name, _regex_hyper("(a|a)*b")]))
    cap = capsys.readouterr()
    assert cap.err == "" or "Traceback" not in cap.err
    # backreferences are Perl's, not Go's: refused as Volcano's regexp.Compile would refuse them
    line = error_line(capsys, write(tmp_path, "b.yaml", [*base(), _regex_hyper("(n)\\1")]))
    assert "HyperNode/rack" in line and "regexMatch.pattern" in line and "invalid regular expression" in line


# ---- limits on size ----------------------------------------------------------------------------------

def test_input_size_limit(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    first = write(tmp_path, "a.yaml", base())
    second = write(tmp_path, "b.yaml", [node("n3")])
    monkeypatch.setattr(documents, "MAX_INPUT_BYTES", Path(first).stat().st_size + 10)
    line = error_line(capsys, first, second)
    assert line.startswith(f"optplan: error: {second}: ") and "MAX_INPUT_BYTES" in line
    ok(first)


def test_object_count_limit(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(documents, "MAX_OBJECTS", len(base()))
    path = write(tmp_path, "a.yaml", [*base(), node("n3")])
    line = error_line(capsys, path)
    assert "document 6" in line and "MAX_OBJECTS" in line
    ok(write(tmp_path, "b.yaml", base()))


# ---- placement of a job far beyond the cluster --------------------------------------------------------

def test_two_billion_replicas_are_not_built(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from optplan.adapters.kubefile import load_objects
    from optplan.solvers.placement.place import place_jobs

    huge = _vcjob(replicas=2_000_000_000, min_available=1)
    unfit = _vcjob(replicas=2_000_000_000, min_available=2_000_000_000)
    unfit["metadata"]["name"] = "j2"
    snap = load_objects([*base(), huge, unfit]).snapshot
    for solver in ("greedy", "cpsat"):
        plan = {jp.name: jp for jp in place_jobs(snap, list(snap.jobs.values()), solver=solver, time_limit=5).jobs}
        assert plan["j"].admitted and len(plan["j"].bindings) == 15  # 16 GPUs, one taken by p1
        assert not plan["j2"].admitted and "cannot fit the cluster" in plan["j2"].reason


# ---- stdin and directories ------------------------------------------------------------------------------

def _stdin(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode()), encoding="utf-8"))


@pytest.mark.parametrize("shape", ["yaml", "json"])
def test_snapshot_from_stdin(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], shape: str) -> None:
    objs = base()
    text = _snapshot_text() if shape == "yaml" else json.dumps({"kind": "List", "items": objs})
    _stdin(monkeypatch, text)
    loaded = load_files(["-"])
    assert list(loaded.snapshot.nodes) == ["n1", "n2"] and list(loaded.runs) == ["run"]
    _stdin(monkeypatch, text)
    ok("-")


def test_stdin_errors_name_stdin(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    _stdin(monkeypatch, yaml.safe_dump_all([*base(), _unschedulable("yes")]))
    line = error_line(capsys, "-")
    assert line.startswith("optplan: error: <stdin>: Node/n3: spec.unschedulable: ")
    _stdin(monkeypatch, _snapshot_text())
    line = error_line(capsys, "-", "-")
    assert "<stdin>" in line and "more than once" in line


def test_snapshot_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objs = base()
    d = tmp_path / "snap"
    d.mkdir()
    write(d, "b-pods.json", json.dumps({"kind": "PodList", "items": [objs[3]]}))
    write(d, "a-nodes.yml", objs[:2])
    write(d, "c-rest.yaml", objs[2:3] + objs[4:])
    write(d, "notes.txt", "not a snapshot")
    (d / "nested").mkdir()
    write(d / "nested", "x.yaml", [node("n1")])  # not read: the directory is not walked recursively
    loaded = load_files([str(d)])
    assert list(loaded.snapshot.nodes) == ["n1", "n2"] and list(loaded.snapshot.pods) == ["default/p1"]
    ok(str(d))
    capsys.readouterr()
    write(d, "d-dup.yaml", [node("n2")])
    line = error_line(capsys, str(d))
    assert line.startswith(f"optplan: error: {d / 'd-dup.yaml'}: Node/n2: metadata.name: duplicate")
    empty = tmp_path / "empty"
    empty.mkdir()
    line = error_line(capsys, str(empty))
    assert f"{empty}: cannot read file" in line and "*.yaml" in line


# ---- the escaping helper ------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "shown"), [
    ("plain", "plain"), ("中文名", "中文名"), ("a\nb", "a\\nb"), ("a\r\nb", "a\\r\\nb"), ("tab\t", "tab\\t"),
    ("\x1b[31mred", "\\x1b[31mred"), ("x\u202ey", "x\\u202ey"), ("\u2066iso\u2069", "\\u2066iso\\u2069"),
    ("lrm\u200e", "lrm\\u200e"), ("ls\u2028ps\u2029", "ls\\u2028ps\\u2029"), ("nel\x85", "nel\\x85"),
    ("\ud800", "\\ud800"), ("bom\ufeff", "bom\\ufeff"), ("\U000e0001tag", "\\U000e0001tag"),
])
def test_printable(text: str, shown: str) -> None:
    assert printable(text) == shown
    assert len(printable(text).splitlines()) <= 1


def test_every_input_error_is_one_line() -> None:
    e = InputError("bad\nreason\u2028", file="f\n.yaml", obj="Node/a\u202eb", field="x\ry")
    assert str(e) == "f\\n.yaml: Node/a\\u202eb: x\\ry: bad\\nreason\\u2028"
