"""The RepackRun CRD (crds/repack.volcano.sh_repackruns.yaml) against what optplan reads and writes.

The CRD's openAPIV3Schema becomes a JSON Schema for ``jsonschema``: ``x-kubernetes-int-or-string``
becomes ``anyOf: [integer, string]``, other ``x-kubernetes-*`` keys go, and every object with
``properties`` is closed (``additionalProperties: false``). Kubernetes forbids that keyword beside
``properties`` and prunes unknown fields instead, which would silently drop any field optplan adds
without declaring it; closing the objects here turns that drift into a failing test.
"""

from __future__ import annotations

import copy
import functools
import json
import re
import types
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from pydantic import BaseModel

from optplan.adapters.kubefile import load_objects
from optplan.adapters.output import repack_run_document
from optplan.cli import main
from optplan.models.goals import (
    CAPACITY,
    Admission,
    GoalPlanOut,
    GoalRunStatus,
    GoalsOut,
    HyperNodeTierOut,
    MoveReason,
)
from optplan.models.placement import Binding
from optplan.models.repack import API_VERSION, KIND, RepackRun, RepackRunSpec, RepackRunStatus
from optplan.solvers.repack.run import plan_repack
from tests.builders import load_with_run, node, pod, podgroup, repack_run

ROOT = Path(__file__).resolve().parents[2]
CRD_PATH = ROOT / "crds" / "repack.volcano.sh_repackruns.yaml"
SEED_INSTANCE = "instances/seed-dryrun.yaml"

# The last RepackRun of seed 000 ("YAML示例"), verbatim.
SEED_COMPLETE_EXECUTE = """\
apiVersion: repack.volcano.sh/v1alpha1
kind: RepackRun
metadata:
  # RepackRun 是集群级资源，不设置 namespace。
  name: ascend-complete-execute-001
  labels:
    # metadata.labels 仅用于检索和审计，不决定整理范围。
    accelerator-pool: ascend-npu
    change-ticket: change-20260730
spec:
  # DryRun 只生成计划；Execute 会重新规划并通过 Eviction API 驱逐 Pod。
  mode: Execute

  # 限定允许驱逐的工作负载和允许作为腾空目标的节点。
  # scope 为空时，这两个维度均不限制范围。
  scope:
    podGroups:
      # 工作负载驱逐范围。selector 匹配继承到 PodGroup 的工作负载标签。
      include:
        # 同一 include 内，selector 与 names 按并集计算。
        selector:
          matchLabels:
            repack.volcano.sh/eligible: "true"
        # PodGroup 名称格式为 namespace/name；自动生成的 PodGroup 推荐使用 selector。
        names:
          - repack-demo/manually-managed-training-pg
      # exclude 优先级高于 include，命中的工作负载不会被驱逐。
      exclude:
        selector:
          matchExpressions:
            - key: repack.volcano.sh/protected
              operator: In
              values:
                - "true"
        names:
          - repack-demo/protected-training-pg
    nodes:
      # 只限定可作为腾空目标的节点，不限制待迁移 Pod 的接收节点。
      include:
        # selector 与 names 按并集计算。
        selector:
          matchLabels:
            accelerator-pool: ascend-npu
        names:
          - ascend-node-03
      # 从腾空目标中排除维护中或本次不允许整理的节点。
      exclude:
        selector:
          matchLabels:
            maintenance-state: draining
        names:
          - ascend-node-08

  # 指定本次整理的目标扩展资源；当前每个 Run 最多配置一种资源。
  goals:
    - resource: huawei.com/ascend-1980
      # 要求碎片率至少下降 10 个百分点，未达到时不推荐执行。
      minFragImprovementPercent: 10

  # 限制单次 Execute 的影响范围；任一上限被突破时，候选方案会被过滤。
  maxPerRun:
    # 最多影响 2 个工作负载，系统内部按不同 PodGroup 计数。
    podGroups: 2
    resources:
      # 本次最多迁移 8 张昇腾 NPU 卡。
      huawei.com/ascend-1980: 8

  eviction:
    # 覆盖 Eviction 请求的优雅终止时间；省略时使用 Pod 自身配置。
    gracePeriodSeconds: 30

  # Run 进入终态 7 天后自动删除；删除 CR 不会回滚已完成的迁移。
  ttlSecondsAfterFinished: 604800
"""

# Seed 000 步骤一: the minimal DryRun.
SEED_MINIMAL_DRYRUN = """\
apiVersion: repack.volcano.sh/v1alpha1
kind: RepackRun
metadata:
  name: ascend-npu-dryrun
spec:
  mode: DryRun
  goals:
    - resource: huawei.com/ascend-1980
"""

# Seed 000 步骤四: the DryRun status as the seed prints it (an excerpt: no message, disruption, solver).
SEED_STATUS_EXCERPT = """\
status:
  phase: Succeeded
  plan:
    summary:
      fragBeforePercent: 33
      fragAfterPercent: 0
      freedNodeCount: 1
      movedCardCount: 2
      resolvedScope:
        podGroupCount: 1
        nodeCount: 3
    moves:
      - namespace: repack-demo
        podGroupName: ascend-batch-training-2f6c840d-8b14-4e45-a4cf-b43c249acbfd
        owner:
          apiVersion: batch.volcano.sh/v1alpha1
          kind: Job
          name: ascend-batch-training
        cards: 2
        pods:
          - name: ascend-batch-training-worker-0
            fromNode: ascend-node-01
            toNode: ascend-node-02
            cards: 1
          - name: ascend-batch-training-worker-1
            fromNode: ascend-node-01
            toNode: ascend-node-03
            cards: 1
    freedNodes:
      - ascend-node-01
  conditions:
    - type: Complete
      status: "True"
      reason: RepackRecommended
"""

# Seed 000 步骤六 reads these Execute-time fields with jsonpath; values are ours.
EXECUTE_STATUS = {
    "phase": "Succeeded",
    "conditions": [{"type": "Complete", "status": "True", "reason": "ExecutionCompletedWithAlternativePlacement",
                    "message": "ascend-node-01 freed; worker-1 bound to ascend-node-04",
                    "lastTransitionTime": "2026-07-30T10:00:00Z", "observedGeneration": 1}],
    "relocations": [
        {"namespace": "repack-demo", "victimPodName": "ascend-batch-training-worker-0",
         "plannedNodeName": "ascend-node-02", "eviction": {"phase": "Evicted"},
         "placement": {"phase": "Bound", "selectedNodeName": "ascend-node-02", "actualNodeName": "ascend-node-02",
                       "replacementPodName": "ascend-batch-training-worker-0"}},
        {"namespace": "repack-demo", "victimPodName": "online-inference-0-entry", "plannedNodeName": "ascend-node-03",
         "replacementPodGroupName": "online-inference-0-x7k2", "eviction": {"phase": "Evicted"},
         "placement": {"phase": "BoundElsewhere", "selectedNodeName": "ascend-node-03",
                       "actualNodeName": "ascend-node-04", "replacementPodName": "online-inference-0-entry-2"}},
    ],
    "result": {"fragAfterPercent": 0, "freedNodeCount": 1, "movedCardCount": 2, "metricsVerified": True},
}


# ---- the CRD and its JSON Schema ---------------------------------------------------------------

@functools.cache
def _crd() -> dict[str, Any]:
    """The CRD as loaded once (read-only: every helper copies before changing anything)."""
    crd: dict[str, Any] = yaml.safe_load(CRD_PATH.read_text(encoding="utf-8"))
    return crd


def _version() -> dict[str, Any]:
    (version,) = _crd()["spec"]["versions"]
    return typing.cast(dict[str, Any], version)


def _openapi() -> dict[str, Any]:
    return typing.cast(dict[str, Any], _version()["schema"]["openAPIV3Schema"])


def to_json_schema(node: dict[str, Any], *, drop_required: bool = False) -> dict[str, Any]:
    """One CRD schema node as JSON Schema (see the module docstring)."""
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key.startswith("x-kubernetes-") or (drop_required and key == "required"):
            continue
        if key == "properties":
            out[key] = {k: to_json_schema(v, drop_required=drop_required) for k, v in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = to_json_schema(value, drop_required=drop_required)
        elif key == "anyOf":
            out[key] = [to_json_schema(v, drop_required=drop_required) for v in value]
        else:
            out[key] = copy.deepcopy(value)
    if node.get("x-kubernetes-int-or-string") and "anyOf" not in out:
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if "properties" in node and not node.get("x-kubernetes-preserve-unknown-fields"):
        out.setdefault("additionalProperties", False)
    return out


def _validator(schema: dict[str, Any]) -> jsonschema.protocols.Validator:
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema)


ROOT_VALIDATOR = _validator(to_json_schema(_openapi()))
SPEC_VALIDATOR = _validator(to_json_schema(_openapi()["properties"]["spec"]))
LOOSE_STATUS_VALIDATOR = _validator(to_json_schema(_openapi()["properties"]["status"], drop_required=True))
STATUS_VALIDATOR = _validator(to_json_schema(_openapi()["properties"]["status"]))


def errors_of(validator: jsonschema.protocols.Validator, instance: Any) -> list[str]:
    return sorted(f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(instance))


def assert_valid(doc: dict[str, Any]) -> None:
    assert errors_of(ROOT_VALIDATOR, doc) == []


def _nodes(schema: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, schema
    for name, sub in schema.get("properties", {}).items():
        yield from _nodes(sub, f"{path}.{name}")
    if isinstance(schema.get("items"), dict):
        yield from _nodes(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from _nodes(schema["additionalProperties"], f"{path}{{}}")
    for i, sub in enumerate(schema.get("anyOf", [])):
        yield from _nodes(sub, f"{path}|{i}")


# ---- the CRD itself ----------------------------------------------------------------------------

def test_crd_names_match_optplan() -> None:
    crd = _crd()
    spec = crd["spec"]
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert crd["kind"] == "CustomResourceDefinition"
    assert crd["metadata"]["name"] == f"{spec['names']['plural']}.{spec['group']}" == "repackruns.repack.volcano.sh"
    assert spec["scope"] == "Cluster"
    assert spec["names"]["kind"] == KIND
    assert "rr" in spec["names"]["shortNames"]
    version = _version()
    assert f"{spec['group']}/{version['name']}" == API_VERSION
    assert version["served"] is True and version["storage"] is True
    assert version["subresources"] == {"status": {}}


_ALLOWED_KEYS = {
    "description", "type", "format", "properties", "items", "required", "enum", "default", "minimum", "maximum",
    "minLength", "maxLength", "minItems", "maxItems", "pattern", "additionalProperties", "anyOf", "oneOf",
    "x-kubernetes-int-or-string", "x-kubernetes-list-type", "x-kubernetes-list-map-keys", "x-kubernetes-map-type",
    "x-kubernetes-validations",
}


def test_crd_schema_is_structural() -> None:
    """The rules the API server enforces on a v1 CRD schema that a JSON Schema validator would not."""
    root = _openapi()
    assert root["properties"]["metadata"] == {"type": "object"}
    for path, schema in _nodes(root):
        if "|" in path:  # inside an int-or-string anyOf: only the two types
            continue
        assert set(schema) <= _ALLOWED_KEYS, path
        if schema.get("x-kubernetes-int-or-string"):
            assert "type" not in schema and schema["anyOf"] == [{"type": "integer"}, {"type": "string"}], path
        else:
            assert schema.get("type") in {"object", "array", "string", "integer", "number", "boolean"}, path
        if "properties" in schema:
            assert "additionalProperties" not in schema, f"{path}: forbidden beside properties"
        assert set(schema.get("required", [])) <= set(schema.get("properties", {})), path
        if schema.get("x-kubernetes-list-type") == "map":
            assert set(schema["x-kubernetes-list-map-keys"]) <= set(schema["items"]["required"]), path
        if "default" in schema:
            assert errors_of(_validator(to_json_schema(schema)), schema["default"]) == [], path


def test_one_of_and_any_of_only_require_declared_fields() -> None:
    """Beside int-or-string, anyOf/oneOf say which fields must be given (admit: one of jobs, selector,
    queues; freeHyperNodes and networkTopology: tier or tierName). A structural schema allows no types or
    descriptions inside them, and each names a field declared beside them."""
    for path, schema in _nodes(_openapi()):
        if "|" in path or schema.get("x-kubernetes-int-or-string"):
            continue
        for key in ("anyOf", "oneOf"):
            for sub in schema.get(key, []):
                assert set(sub) == {"required"}, path
                assert set(sub["required"]) <= set(schema["properties"]), path


def test_cel_rules_name_only_declared_fields() -> None:
    """The one CEL rule (the API server checks it; this file cannot run CEL): networkTopology and a goal's
    freeHyperNodes are two ways to ask for one thing."""
    spec = _openapi()["properties"]["spec"]
    (rule,) = spec["x-kubernetes-validations"]
    assert "networkTopology" in spec["properties"]
    assert "freeHyperNodes" in spec["properties"]["goals"]["items"]["properties"]
    assert rule["message"] == "give freeHyperNodes or networkTopology, not both"


def _schema_at(json_path: str) -> dict[str, Any] | None:
    """The schema a printer column's simple JSONPath points to (filters walk into array items)."""
    node: dict[str, Any] = _openapi()
    for part in re.findall(r"\.([A-Za-z]+)(\[[^\]]*\])?", json_path):
        name, index = part
        if name not in node.get("properties", {}):
            return None
        node = node["properties"][name]
        if index:
            node = node["items"]
    return node


def test_printer_columns_point_into_the_schema() -> None:
    columns = {c["name"]: c for c in _version()["additionalPrinterColumns"]}
    assert {"Mode", "Reason", "FragBefore", "FragAfter", "Freed", "Age"} <= set(columns)
    assert columns["Reason"]["jsonPath"] == '.status.conditions[?(@.type=="Complete")].reason'
    kinds = {"string": {"string"}, "integer": {"integer"}, "date": set()}
    for name, column in columns.items():
        if column["jsonPath"] == ".metadata.creationTimestamp":
            assert column["type"] == "date"
            continue
        target = _schema_at(column["jsonPath"])
        assert target is not None, name
        assert target.get("type") in kinds[column["type"]], name


def _type_paths(annotation: Any, prefix: str) -> set[str]:
    """Every camelCase field path a pydantic model type can emit (lists and tuples are transparent)."""
    out: set[str] = set()
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        for name, field in annotation.model_fields.items():
            path = f"{prefix}.{field.alias or name}"
            out.add(path)
            out |= _type_paths(field.annotation, path)
    elif typing.get_origin(annotation) in (tuple, list, typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            out |= _type_paths(arg, prefix)
    return out


def _schema_paths(schema: dict[str, Any], prefix: str) -> set[str]:
    out: set[str] = set()
    for name, sub in schema.get("properties", {}).items():
        out.add(f"{prefix}.{name}")
        out |= _schema_paths(sub, f"{prefix}.{name}")
    if isinstance(schema.get("items"), dict):
        out |= _schema_paths(schema["items"], prefix)
    return out


def test_status_schema_declares_exactly_the_status_models() -> None:
    """Both ways: a model field the CRD lacks would be pruned, a CRD field no model has is a guess.
    The controller's fields (Execute's records, the run's start and completion times) are the only
    extras (tests/controller/test_controller_status.py checks what the controller writes there). A run with goals
    (issue 15) adds ``plan.goals`` (``GoalRunStatus``); the seed's status is the rest."""
    status = _openapi()["properties"]["status"]
    extras = {".relocations", ".result", ".startTime", ".completionTime"}
    declared = {p for p in _schema_paths(status, "") if not any(p.startswith(e) for e in extras)}
    assert declared == _type_paths(GoalRunStatus, "")
    assert {p for p in declared if not p.startswith(".plan.goals")} == _type_paths(RepackRunStatus, "")


def test_spec_schema_declares_exactly_the_spec_model() -> None:
    assert _schema_paths(_openapi()["properties"]["spec"], "") == _type_paths(RepackRunSpec, "")


# ---- what the CLI prints -----------------------------------------------------------------------

@pytest.fixture
def in_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["repack", SEED_INSTANCE, *args]) == 0
    out: str = capsys.readouterr().out
    return out


@pytest.mark.usefixtures("in_repo")
@pytest.mark.parametrize("timings", [False, True], ids=["plain", "timings"])
@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_cli_output_is_a_valid_repackrun(capsys: pytest.CaptureFixture[str], fmt: str, timings: bool) -> None:
    text = _cli(capsys, "-o", fmt, *(["--timings"] if timings else []))
    doc = json.loads(text) if fmt == "json" else yaml.safe_load(text)
    assert_valid(doc)
    assert (doc["apiVersion"], doc["kind"], doc["metadata"]["name"]) == (API_VERSION, KIND, "ascend-guarded-dryrun")
    assert doc["status"]["conditions"][0]["reason"] == "RepackRecommended"
    assert ("wallSeconds" in doc["status"]["plan"]["solver"]) is timings


@pytest.mark.usefixtures("in_repo")
def test_cli_output_is_deterministic_and_formats_agree(capsys: pytest.CaptureFixture[str]) -> None:
    first = {fmt: _cli(capsys, "-o", fmt) for fmt in ("yaml", "json")}
    second = {fmt: _cli(capsys, "-o", fmt) for fmt in ("yaml", "json")}
    assert first["yaml"].encode() == second["yaml"].encode()
    assert first["json"].encode() == second["json"].encode()
    assert yaml.safe_load(first["yaml"]) == json.loads(first["json"])


# ---- outcomes built inline ---------------------------------------------------------------------

def _three_nodes(*, min_improvement: float | None = None, owner: bool = True,
                 scope: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Seed-like: a 2-pod gang on n1 fits beside the 6-card pods on n2 and n3 (33% -> 0%)."""
    return [
        node("n1"), node("n2"), node("n3"),
        podgroup("train", 2, owner=("batch.volcano.sh/v1alpha1", "Job", "train") if owner else None),
        podgroup("serve-2", 1, labels={"protected": "true"}),
        podgroup("serve-3", 1, labels={"protected": "true"}),
        pod("train-0", "n1", group="train"), pod("train-1", "n1", group="train"),
        pod("serve-2-0", "n2", 6, group="serve-2"), pod("serve-3-0", "n3", 6, group="serve-3"),
        repack_run(min_improvement=min_improvement,
                   scope=scope or {"podGroups": {"exclude": {"selector": {"matchLabels": {"protected": "true"}}}}}),
    ]


# Not an extended resource (no domain), so a fractional request loads: it keeps the schema's quantity-string form
# of cards tested. Extended resources (nvidia.com/gpu, ...) are whole numbers, as the API server says.
VGPU = "vgpu"

OUTCOMES: dict[str, tuple[list[dict[str, Any]], str]] = {
    "no-fragmentation": ([node("n1"), node("n2"), podgroup("pg"), pod("p", "n1"), repack_run()], "NoFragmentation"),
    "recommended": (_three_nodes(min_improvement=10), "RepackRecommended"),
    "recommended-without-owner": (_three_nodes(owner=False), "RepackRecommended"),
    "insufficient-below-threshold": (_three_nodes(min_improvement=50), "InsufficientImprovement"),
    "insufficient-nothing-in-scope": (
        _three_nodes(scope={"podGroups": {"include": {"names": ["default/nothing"]}}}), "InsufficientImprovement"),
    "fractional-cards": ([node("n1", "2", resource=VGPU), node("n2", "2", resource=VGPU), podgroup("a"),
                          podgroup("b"), pod("a-0", "n1", "500m", group="a", resource=VGPU),
                          pod("b-0", "n2", "1", group="b", resource=VGPU), repack_run(resource=VGPU)],
                         "RepackRecommended"),
}


@pytest.mark.parametrize("name", list(OUTCOMES))
def test_outcomes_validate(name: str) -> None:
    objects, reason = OUTCOMES[name]
    loaded, run = load_with_run(*objects)
    out = plan_repack(loaded.snapshot, run)
    assert out.reason == reason
    for timings in (False, True):
        doc = repack_run_document(run, out.status, timings=timings)
        assert_valid(json.loads(json.dumps(doc)))
    plan = repack_run_document(run, out.status)["status"]["plan"]
    if name == "recommended-without-owner":
        assert plan["moves"] and "owner" not in plan["moves"][0]
    if name == "fractional-cards":
        assert plan["summary"]["movedCardCount"] == "500m"
        assert plan["moves"][0]["pods"][0]["cards"] == "500m"


def test_a_status_with_goals_validates() -> None:
    """A goals status (issue 15) as ``status_dict`` writes it: admissions with their forecast and causes,
    freed HyperNodes, tiers and move reasons, all declared."""
    loaded, run = load_with_run(*_three_nodes(min_improvement=10))
    seed = plan_repack(loaded.snapshot, run).status
    goals = GoalsOut(
        admitted_job_count=1, not_admitted_job_count=1,
        admissions=(Admission(namespace="a", name="llm", queue="q", priority=10, admitted=True, reason="lands on r0",
                              hyper_node="r0", tier=1, bindings=(Binding(task="w", index=0, node="n1"),)),
                    Admission(namespace="a", name="big", queue="q", admitted=False, cause=CAPACITY, reason="too big")),
        freed_hyper_nodes=("r1",), freed_hyper_node_count=1,
        hyper_node_tiers=(HyperNodeTierOut(tier=1, hyper_nodes=2, free_before=0, free_after=1),),
        pending_by_fragmentation_before=1, move_reasons=(MoveReason(pod="default/train-0", reason="frees r1"),))
    status = GoalRunStatus(phase=seed.phase, conditions=seed.conditions,
                           plan=GoalPlanOut(**dict(seed.plan), goals=goals))
    doc = repack_run_document(run, status)
    assert_valid(json.loads(json.dumps(doc)))
    assert doc["status"]["plan"]["goals"]["admissions"][0]["bindings"] == [{"task": "w", "index": 0, "node": "n1"}]


# ---- broken documents fail ---------------------------------------------------------------------

_DELETE = object()


def _set(path: str, value: Any = _DELETE) -> Callable[[dict[str, Any]], None]:
    """A mutation at a space-separated path (list indices as numbers); no value deletes the field."""
    def mutate(doc: dict[str, Any]) -> None:
        *parents, last = path.split(" ")
        target: Any = doc
        for p in parents:
            target = target[int(p)] if isinstance(target, list) else target[p]
        if value is _DELETE:
            del target[last]
        elif isinstance(target, list):
            target[int(last)] = value
        else:
            target[last] = value
    return mutate


NPU = "huawei.com/ascend-1980"

BROKEN: dict[str, Callable[[dict[str, Any]], None]] = {
    "freedNodeCount as a string": _set("status plan summary freedNodeCount", "1"),
    "unknown summary field": _set("status plan summary fragDeltaPercent", 33),
    "summary field missing": _set("status plan summary freedNodeCount"),
    "percent over 100": _set("status plan summary fragBeforePercent", 101),
    "cards not a quantity": _set("status plan moves 0 pods 0 cards", "two"),
    "negative cards": _set("status plan moves 0 cards", -2),
    "unknown owner field": _set("status plan moves 0 owner uid", "x"),
    "unknown solver status": _set("status plan solver status", "GUESSED"),
    "wallSeconds as a string": _set("status plan solver wallSeconds", "0.1s"),
    "condition status a boolean": _set("status conditions 0 status", True),
    "condition without reason": _set("status conditions 0 reason"),
    "unknown phase": _set("status phase", "Done"),
    "freedNodes a string": _set("status plan freedNodes", "n1"),
    "freedNodes missing": _set("status plan freedNodes"),
    "unknown status field": _set("status score", 1),
    "result movedCardCount a list": _set("status result movedCardCount", [2]),
    "relocation without victim": _set("status relocations 0 victimPodName"),
    "unknown placement field": _set("status relocations 0 placement node", "n1"),
    "mode not an enum value": _set("spec mode", "Apply"),
    "no goals": _set("spec goals", []),
    "two goals": _set("spec goals", [{"resource": "a"}, {"resource": "b"}]),
    "empty resource": _set("spec goals 0 resource", ""),
    "improvement 120": _set("spec goals 0 minFragImprovementPercent", 120),
    "improvement -1": _set("spec goals 0 minFragImprovementPercent", -1),
    "improvement a string": _set("spec goals 0 minFragImprovementPercent", "10"),
    "negative podGroups budget": _set("spec maxPerRun podGroups", -1),
    "negative resource budget": _set(f"spec maxPerRun resources {NPU}", "-4"),
    "negative integer resource budget": _set(f"spec maxPerRun resources {NPU}", -4),
    "budget not a quantity": _set(f"spec maxPerRun resources {NPU}", "4 cards"),
    "selector operator Gt": _set("spec scope podGroups exclude selector matchExpressions 0 operator", "Gt"),
    "names a string": _set("spec scope nodes include names", "ascend-node-01"),
    "unknown spec field": _set("spec priority", 1),
    "negative grace period": _set("spec eviction gracePeriodSeconds", -1),
    # the goals of issue 15
    "admit naming nothing": _set("spec goals 0 admit", {}),
    "admit job without namespace": _set("spec goals 0 admit", {"jobs": ["llm"]}),
    "admit jobs a string": _set("spec goals 0 admit", {"jobs": "team-a/llm"}),
    "unknown admit field": _set("spec goals 0 admit", {"queues": ["q"], "priority": 1}),
    "freeHyperNodes tier 0": _set("spec goals 0 freeHyperNodes", {"tier": 0, "count": 1}),
    "freeHyperNodes count 0": _set("spec goals 0 freeHyperNodes", {"tier": 1, "count": 0}),
    "freeHyperNodes without count": _set("spec goals 0 freeHyperNodes", {"tier": 1}),
    "freeHyperNodes tier and tierName": _set("spec goals 0 freeHyperNodes", {"tier": 1, "tierName": "rack",
                                                                             "count": 1}),
    "freeHyperNodes without a tier": _set("spec goals 0 freeHyperNodes", {"count": 1}),
    "freeHyperNodes empty tierName": _set("spec goals 0 freeHyperNodes", {"tierName": "", "count": 1}),
    "freeHyperNodes required a string": _set("spec goals 0 freeHyperNodes", {"tier": 1, "count": 1,
                                                                             "required": "true"}),
    "networkTopology without blocks": _set("spec networkTopology", {"tier": 1}),
    "networkTopology 0 blocks": _set("spec networkTopology", {"tier": 1, "requiredNodeBlocks": 0}),
    "networkTopology tier and tierName": _set("spec networkTopology", {"tier": 1, "tierName": "rack",
                                                                       "requiredNodeBlocks": 1}),
    "networkTopology count": _set("spec networkTopology", {"tier": 1, "count": 1}),
    "networkTopology tier and hyperNodeTier": _set("spec networkTopology", {"tier": 1, "hyperNodeTier": 1,
                                                                            "requiredNodeBlocks": 1}),
    "networkTopology hyperNodeTier 0": _set("spec networkTopology", {"hyperNodeTier": 0, "requiredNodeBlocks": 1}),
    "networkTopology empty hyperNodeTierName": _set("spec networkTopology", {"hyperNodeTierName": "",
                                                                             "requiredNodeBlocks": 1}),
    "networkTopology nodeBlockSize 0": _set("spec networkTopology", {"hyperNodeTier": 1, "nodeBlockSize": 0,
                                                                     "requiredNodeBlocks": 1}),
    "networkTopology mode pack": _set("spec networkTopology", {"hyperNodeTier": 1, "mode": "pack",
                                                               "requiredNodeBlocks": 1}),
}


@pytest.fixture(scope="module")
def full_doc() -> dict[str, Any]:
    """A planned RepackRun with the seed's complete spec and the Execute-time status fields."""
    loaded, run = load_with_run(*_three_nodes(min_improvement=10))
    out = plan_repack(loaded.snapshot, run)
    doc = json.loads(json.dumps(repack_run_document(run, out.status, timings=True)))
    doc["spec"] = yaml.safe_load(SEED_COMPLETE_EXECUTE)["spec"]
    doc["status"].update(copy.deepcopy({k: EXECUTE_STATUS[k] for k in ("relocations", "result")}))
    return typing.cast(dict[str, Any], doc)


def test_full_document_validates(full_doc: dict[str, Any]) -> None:
    assert_valid(full_doc)


@pytest.mark.parametrize("name", list(BROKEN))
def test_broken_documents_fail(full_doc: dict[str, Any], name: str) -> None:
    doc = copy.deepcopy(full_doc)
    BROKEN[name](doc)
    assert errors_of(ROOT_VALIDATOR, doc) != [], name


# ---- the seed's own RepackRuns -----------------------------------------------------------------

@pytest.mark.parametrize("text", [SEED_COMPLETE_EXECUTE, SEED_MINIMAL_DRYRUN], ids=["complete-execute", "minimal"])
def test_seed_repackruns_validate_and_load(text: str) -> None:
    obj = yaml.safe_load(text)
    assert errors_of(SPEC_VALIDATOR, obj["spec"]) == []
    assert_valid(obj)
    loaded = load_objects([obj])
    run = loaded.runs[obj["metadata"]["name"]]
    assert run.spec.resource == "huawei.com/ascend-1980"
    assert run.raw is not None and run.raw["spec"] == obj["spec"]


def test_seed_complete_execute_is_read_as_written() -> None:
    run = load_objects([yaml.safe_load(SEED_COMPLETE_EXECUTE)]).runs["ascend-complete-execute-001"]
    spec = run.spec
    assert spec.mode == "Execute"
    assert spec.goal.min_frag_improvement_percent == 10
    pg, nodes = spec.scope.pod_groups, spec.scope.nodes
    assert pg.include is not None and pg.include.names == ("repack-demo/manually-managed-training-pg",)
    assert pg.exclude is not None and pg.exclude.selector is not None
    assert pg.exclude.selector.match_expressions[0].operator == "In"
    assert pg.admits("repack-demo/manually-managed-training-pg", {})
    assert not pg.admits("repack-demo/x", {"repack.volcano.sh/eligible": "true", "repack.volcano.sh/protected": "true"})
    assert nodes.admits("ascend-node-03", {}) and not nodes.admits("ascend-node-08", {"accelerator-pool": "ascend-npu"})
    assert spec.max_per_run.pod_groups == 2
    assert spec.max_per_run.resources == {"huawei.com/ascend-1980": 8000}
    assert spec.eviction is not None and spec.eviction.grace_period_seconds == 30
    assert spec.ttl_seconds_after_finished == 604800
    assert run.labels == {"accelerator-pool": "ascend-npu", "change-ticket": "change-20260730"}


GOALS_SPEC = """\
mode: DryRun
goals:
- resource: nvidia.com/gpu
  admit:
    jobs: [team-a/llm-64, team-a/llm-64-pg]
    selector: {matchLabels: {optplan.io/admit: "true"}, matchExpressions: [{key: tier, operator: Exists}]}
    queues: [research]
  freeHyperNodes: {tierName: rack, count: 2, required: true}
"""


@pytest.mark.parametrize("goal", [
    {"admit": {"jobs": ["team-a/llm"]}}, {"admit": {"selector": {}}}, {"admit": {"queues": ["q"]}},
    {"freeHyperNodes": {"tier": 1, "count": 1}},
    {"freeHyperNodes": {"tierName": "rack", "count": 3, "required": False}},
], ids=lambda g: "-".join(f"{k}.{'.'.join(v)}" for k, v in g.items()))
def test_goals_validate_and_load(goal: dict[str, Any]) -> None:
    spec = {"goals": [{"resource": "nvidia.com/gpu", **goal}]}
    assert errors_of(SPEC_VALIDATOR, spec) == []
    obj = {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": "g"}, "spec": spec}
    assert load_objects([obj]).runs["g"].spec.has_purpose


def test_the_full_goals_spec_and_network_topology_validate_and_load() -> None:
    def load_spec(spec: dict[str, Any]) -> RepackRun:
        obj = {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": "g"}, "spec": spec}
        return load_objects([obj]).runs["g"]

    spec = yaml.safe_load(GOALS_SPEC)
    assert errors_of(SPEC_VALIDATOR, spec) == []
    free = load_spec(spec).spec.free_hyper_nodes
    assert free is not None and free.tier_name == "rack"
    del spec["goals"][0]["freeHyperNodes"]
    for nt in ({"tier": 1, "requiredNodeBlocks": 2}, {"tierName": "rack", "requiredNodeBlocks": 1},
               # the other implementation's names
               {"hyperNodeTier": 1, "nodeBlockSize": 8, "requiredNodeBlocks": 2, "mode": "binpack"},
               {"hyperNodeTierName": "rack", "nodeBlockSize": 4, "requiredNodeBlocks": 1, "mode": "spread"}):
        spec["networkTopology"] = nt
        assert errors_of(SPEC_VALIDATOR, spec) == []
        free = load_spec(spec).spec.free_hyper_nodes
        assert free is not None and free.required
        assert free.count == nt["requiredNodeBlocks"]


def test_seed_status_excerpt_fits_the_schema() -> None:
    """The seed's DryRun status (no message, disruption or solver, five summary fields) is valid as it
    stands: a controller writing the seed's shape is not rejected; every field it shows is declared."""
    status = yaml.safe_load(SEED_STATUS_EXCERPT)["status"]
    assert errors_of(STATUS_VALIDATOR, status) == []
    assert errors_of(LOOSE_STATUS_VALIDATOR, status) == []
    status["plan"]["summary"]["freedNodes"] = 1  # and the loose schema still closes objects
    assert errors_of(LOOSE_STATUS_VALIDATOR, status) != []


def test_execute_status_validates() -> None:
    doc = {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": "ascend-execute-001"},
           "spec": yaml.safe_load(SEED_COMPLETE_EXECUTE)["spec"], "status": copy.deepcopy(EXECUTE_STATUS)}
    assert_valid(doc)


def _bundled_runs() -> list[tuple[str, dict[str, Any]]]:
    """Every RepackRun of every bundled instance (inside Lists too), as written in the file."""
    out = []
    for path in sorted((ROOT / "instances").glob("*.yaml")):
        stack = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if isinstance(d, dict)]
        while stack:
            doc = stack.pop(0)
            if doc.get("kind", "").endswith("List"):
                stack.extend(d for d in doc.get("items") or [] if isinstance(d, dict))
            elif doc.get("kind") == KIND:
                out.append((f"{path.name}: {doc['metadata']['name']}", doc))
    return out


@pytest.mark.parametrize(("where", "doc"), _bundled_runs(), ids=[w for w, _ in _bundled_runs()])
def test_every_bundled_repackrun_is_accepted_by_the_shipped_crd(where: str, doc: dict[str, Any]) -> None:
    """A user applies the bundled instances as they are: each RepackRun, its status included, must pass the
    CRD's schema (the real API server's tier checks the same against kube-apiserver)."""
    assert errors_of(ROOT_VALIDATOR, doc) == [], where
