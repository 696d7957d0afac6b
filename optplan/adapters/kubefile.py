"""Read cluster snapshots in Kubernetes' own shape (``kubectl get ... -o yaml|json``).

A file holds a ``kind: List`` (or any ``*List``) with ``items``, a single object, or a multi-document
YAML stream. Several files are merged. Every problem is an InputError naming file, object and field.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from optplan.errors import InputError
from optplan.models.quantity import MAX_MILLI, format_milli, to_milli
from optplan.models.queues import (
    PREEMPTION_POLICIES,
    QUEUE_STATES,
    JobNetworkTopology,
    JobTask,
    LifecyclePolicy,
    PodTemplate,
    PriorityClass,
    Queue,
    VCJob,
)
from optplan.models.repack import RepackRun, RepackRunSpec
from optplan.models.selectors import LabelSelector, NodeSelectorTerm, Taint, Toleration
from optplan.models.snapshot import (
    ModelServing,
    NetworkTopology,
    Node,
    OwnerReference,
    Pod,
    PodDisruptionBudget,
    PodGroup,
    Resources,
    Snapshot,
)
from optplan.models.topology import HyperNode, HyperNodeMember

try:  # the C loader is many times faster on large snapshots
    _Loader: Any = yaml.CSafeLoader
except AttributeError:  # pragma: no cover
    _Loader = yaml.SafeLoader


@dataclass
class LoadedInput:
    snapshot: Snapshot
    runs: dict[str, RepackRun] = field(default_factory=dict)


@dataclass
class _Raw:
    file: str
    obj: dict[str, Any]

    @property
    def kind(self) -> str:
        return str(self.obj.get("kind", ""))

    @property
    def group(self) -> str:
        return str(self.obj.get("apiVersion", "")).split("/")[0] if "/" in str(
            self.obj.get("apiVersion", "")) else ""

    def ident(self) -> str:
        meta = self.obj.get("metadata") or {}
        name = meta.get("name", "?") if isinstance(meta, dict) else "?"
        ns = meta.get("namespace") if isinstance(meta, dict) else None
        return f"{self.kind}/{ns}/{name}" if ns else f"{self.kind}/{name}"

    def error(self, field_path: str, message: str) -> InputError:
        return InputError(message, file=self.file, obj=self.ident(), field=field_path)


# ---- reading files ---------------------------------------------------------------------------

def read_documents(path: str | Path) -> list[dict[str, Any]]:
    """Every Kubernetes object in one file, with List kinds expanded."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise InputError(f"cannot read file ({e.strerror or e})", file=str(path)) from None
    except UnicodeDecodeError:
        raise InputError("file is not UTF-8 text", file=str(path)) from None
    docs: list[Any]
    try:
        if p.suffix.lower() == ".json":
            docs = [json.loads(text)]
        else:
            docs = list(yaml.load_all(text, Loader=_Loader))
    except json.JSONDecodeError as e:
        raise InputError(f"malformed JSON at line {e.lineno} column {e.colno}: {e.msg}",
                         file=str(path)) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise InputError(f"malformed YAML{where}: {problem}", file=str(path)) from None
    out: list[dict[str, Any]] = []
    for i, doc in enumerate(docs):
        out.extend(_expand(doc, str(path), f"document {i + 1}"))
    return out


def _expand(doc: Any, file: str, where: str) -> Iterator[dict[str, Any]]:
    if doc is None:
        return
    if not isinstance(doc, dict):
        raise InputError(f"not a Kubernetes object (a mapping), got {type(doc).__name__}", file=file, obj=where)
    kind = doc.get("kind")
    if isinstance(kind, str) and kind.endswith("List") and "items" in doc:
        items = doc.get("items") or []
        if not isinstance(items, list):
            raise InputError(f"expected a list, got {type(items).__name__}", file=file, obj=f"{where} ({kind})",
                             field="items")
        for j, item in enumerate(items):
            yield from _expand(item, file, f"{where} item {j + 1}")
        return
    if not isinstance(kind, str) or not kind:
        meta = doc.get("metadata")
        name = meta.get("name") if isinstance(meta, dict) else None
        obj = f"{where} (metadata.name {name})" if isinstance(name, str) and name else where
        raise InputError("required field is missing" if kind is None else "expected a non-empty string",
                         file=file, obj=obj, field="kind")
    yield doc


# ---- typed field access ------------------------------------------------------------------------

def _get(raw: _Raw, obj: Mapping[str, Any], path: str, default: Any = None, *, required: bool = False,
         types: type | tuple[type, ...] | None = None, prefix: str = "") -> Any:
    cur: Any = obj
    walked: list[str] = []
    for part in path.split("."):
        if walked and not isinstance(cur, Mapping):  # present but not an object: say so, never skip it
            raise raw.error(prefix + ".".join(walked), f"expected a mapping, got {type(cur).__name__}")
        if part not in cur or cur[part] is None:
            if required:
                raise raw.error(prefix + path, "required field is missing")
            return default
        cur = cur[part]
        walked.append(part)
    wanted = (types,) if isinstance(types, type) else types
    if wanted is not None and (not isinstance(cur, wanted) or (isinstance(cur, bool) and bool not in wanted)):
        names = " or ".join(t.__name__ for t in wanted)
        raise raw.error(prefix + path, f"expected {_article(names)}, got {type(cur).__name__}")
    return cur


def _article(name: str) -> str:
    return {"dict": "a mapping", "list": "a list", "str": "a string", "int": "an integer",
            "bool": "a boolean", "int or float": "a number"}.get(name, name)


def _str_map(raw: _Raw, obj: Mapping[str, Any], path: str) -> dict[str, str]:
    m = _get(raw, obj, path, {}, types=dict)
    return {str(k): "" if v is None else str(v) for k, v in m.items()}


def _resources(raw: _Raw, m: Any, path: str) -> Resources:
    if m is None:
        return {}
    if not isinstance(m, dict):
        raise raw.error(path, "expected a mapping of resource quantities")
    out: Resources = {}
    for name, value in m.items():
        try:
            milli = to_milli(value)
        except ValueError:
            raise raw.error(f"{path}.{name}", f"unparseable quantity {value!r}") from None
        if milli < 0:
            raise raw.error(f"{path}.{name}", f"negative quantity {value!r}")
        if milli > MAX_MILLI:
            raise raw.error(f"{path}.{name}", f"quantity {value!r} is too large (over 2^63-1 milli-units)")
        out[str(name)] = milli
    return out


def _model(raw: _Raw, cls: type[Any], data: Any, path: str) -> Any:
    try:
        return cls.model_validate(data)
    except ValidationError as e:
        errors = e.errors()
        full = path + _loc_path(data, errors[0]["loc"], missing=errors[0]["type"] == "missing")
        msgs = [err["msg"].removeprefix("Value error, ") for err in errors
                if path + _loc_path(data, err["loc"], missing=err["type"] == "missing") == full]
        raise raw.error(full, "; ".join(dict.fromkeys(msgs))) from None


def _loc_path(data: Any, loc: Sequence[int | str], *, missing: bool) -> str:
    """A pydantic error location as a field path (``.goals[0].resource``). Parts past the offending
    value (the member tags of a union such as ``int | float``) are dropped."""
    out = ""
    cur = data
    for i, part in enumerate(loc):
        last_missing = missing and i == len(loc) - 1
        if isinstance(part, int) and isinstance(cur, list | tuple) and 0 <= part < len(cur):
            out, cur = f"{out}[{part}]", cur[part]
        elif isinstance(part, str) and isinstance(cur, Mapping) and (part in cur or last_missing):
            out, cur = f"{out}.{part}", cur.get(part)
        else:
            break
    return out


def _owners(raw: _Raw) -> tuple[OwnerReference, ...]:
    refs = _get(raw, raw.obj, "metadata.ownerReferences", [], types=list)
    out = []
    for i, r in enumerate(refs):
        p = f"metadata.ownerReferences[{i}]"
        if not isinstance(r, dict):
            raise raw.error(p, "expected a mapping")
        out.append(OwnerReference(
            api_version=str(_get(raw, r, "apiVersion", required=True, prefix=p + ".")),
            kind=str(_get(raw, r, "kind", required=True, prefix=p + ".")),
            name=str(_get(raw, r, "name", required=True, prefix=p + ".")),
            uid=str(r.get("uid") or ""), controller=bool(r.get("controller", False))))
    return tuple(out)


def _name(raw: _Raw) -> str:
    name = _get(raw, raw.obj, "metadata.name", required=True, types=str)
    if not name:
        raise raw.error("metadata.name", "required field is empty")
    return str(name)


# ---- object parsers ----------------------------------------------------------------------------

def parse_node(raw: _Raw) -> Node:
    obj = raw.obj
    taints = []
    for i, t in enumerate(_get(raw, obj, "spec.taints", [], types=list)):
        taints.append(_model(raw, Taint, t, f"spec.taints[{i}]"))
    alloc = _get(raw, obj, "status.allocatable", required=True, types=dict)
    return Node(
        name=_name(raw), labels=_str_map(raw, obj, "metadata.labels"), taints=tuple(taints),
        unschedulable=bool(_get(raw, obj, "spec.unschedulable", False)),
        allocatable=_resources(raw, alloc, "status.allocatable"))


def _container_requests(raw: _Raw, spec: Mapping[str, Any], key: str, prefix: str) -> list[tuple[Resources, bool]]:
    out = []
    for i, c in enumerate(_get(raw, spec, key, [], types=list, prefix=prefix)):
        p = f"{prefix}{key}[{i}]"
        if not isinstance(c, dict):
            raise raw.error(p, "expected a mapping")
        req = _resources(raw, _get(raw, c, "resources.requests", None, prefix=p + "."), f"{p}.resources.requests")
        sidecar = c.get("restartPolicy") == "Always"
        out.append((req, sidecar))
    return out


def effective_requests(raw: _Raw, spec: Mapping[str, Any], prefix: str = "spec.") -> Resources:
    """max(sum of containers (+ sidecars), max of init containers (+ sidecars started before)),
    plus pod overhead: Kubernetes' own rule."""
    total: Resources = {}
    for req, _ in _container_requests(raw, spec, "containers", prefix):
        for r, v in req.items():
            total[r] = total.get(r, 0) + v
    sidecars: Resources = {}
    init_peak: Resources = {}
    for req, sidecar in _container_requests(raw, spec, "initContainers", prefix):
        if sidecar:
            for r, v in req.items():
                sidecars[r] = sidecars.get(r, 0) + v
            for r, v in sidecars.items():
                init_peak[r] = max(init_peak.get(r, 0), v)
        else:
            for r in set(req) | set(sidecars):
                init_peak[r] = max(init_peak.get(r, 0), req.get(r, 0) + sidecars.get(r, 0))
    for r, v in sidecars.items():
        total[r] = total.get(r, 0) + v
    out = dict(total)
    for r, v in init_peak.items():
        out[r] = max(out.get(r, 0), v)
    for r, v in _resources(raw, _get(raw, spec, "overhead", None, prefix=prefix), prefix + "overhead").items():
        out[r] = out.get(r, 0) + v
    return {r: v for r, v in sorted(out.items()) if v > 0}


def parse_node_affinity(raw: _Raw, spec: Mapping[str, Any],
                        prefix: str = "spec.") -> tuple[NodeSelectorTerm, ...] | None:
    path = "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    req = _get(raw, spec, path, None, types=dict, prefix=prefix)
    if req is None:
        return None
    terms = _get(raw, req, "nodeSelectorTerms", [], types=list, prefix=f"{prefix}{path}.")
    return tuple(_model(raw, NodeSelectorTerm, t, f"{prefix}{path}.nodeSelectorTerms[{i}]")
                 for i, t in enumerate(terms))


def parse_pod(raw: _Raw) -> Pod:
    obj = raw.obj
    spec = _get(raw, obj, "spec", {}, types=dict)
    tolerations = tuple(_model(raw, Toleration, t, f"spec.tolerations[{i}]")
                        for i, t in enumerate(_get(raw, spec, "tolerations", [], types=list, prefix="spec.")))
    priority = _get(raw, spec, "priority", None, types=int, prefix="spec.")
    node_name = _get(raw, spec, "nodeName", None, types=str, prefix="spec.") or None
    return Pod(
        namespace=str(_get(raw, obj, "metadata.namespace", "default")), name=_name(raw),
        uid=str(_get(raw, obj, "metadata.uid", "")),
        labels=_str_map(raw, obj, "metadata.labels"), annotations=_str_map(raw, obj, "metadata.annotations"),
        owner_references=_owners(raw), creation_timestamp=str(_get(raw, obj, "metadata.creationTimestamp", "")),
        start_time=str(_get(raw, obj, "status.startTime", "")),
        node_name=node_name, scheduler_name=str(_get(raw, spec, "schedulerName", "default-scheduler")),
        nominated_node_name=_get(raw, obj, "status.nominatedNodeName", None, types=str) or None,
        node_selector=_str_map(raw, spec, "nodeSelector"), tolerations=tolerations, priority=priority,
        priority_class_name=_get(raw, spec, "priorityClassName", None, types=str, prefix="spec.") or None,
        required_node_affinity=parse_node_affinity(raw, spec), requests=effective_requests(raw, spec),
        phase=str(_get(raw, obj, "status.phase", "Pending")))


def parse_pod_group(raw: _Raw) -> PodGroup:
    obj = raw.obj
    min_member = _get(raw, obj, "spec.minMember", 1, types=int)
    if min_member < 0:
        raise raw.error("spec.minMember", f"must not be negative, got {min_member}")
    nt = _get(raw, obj, "spec.networkTopology", None, types=dict)
    tier = _get(raw, obj, "spec.networkTopology.highestTierAllowed", None, types=int)
    topo = _model(raw, NetworkTopology, {"mode": nt.get("mode", "hard"), "highest_tier_allowed": tier},
                  "spec.networkTopology") if nt is not None else None
    return PodGroup(
        namespace=str(_get(raw, obj, "metadata.namespace", "default")), name=_name(raw),
        labels=_str_map(raw, obj, "metadata.labels"), owner_references=_owners(raw), min_member=min_member,
        queue=str(_get(raw, obj, "spec.queue", "default")), network_topology=topo,
        priority_class_name=_get(raw, obj, "spec.priorityClassName", None, types=str) or None)


def parse_pdb(raw: _Raw) -> PodDisruptionBudget:
    obj = raw.obj
    sel = _get(raw, obj, "spec.selector", None, types=dict)
    allowed = _get(raw, obj, "status.disruptionsAllowed", 0, types=int)
    if allowed < 0:
        raise raw.error("status.disruptionsAllowed", f"must not be negative, got {allowed}")
    return PodDisruptionBudget(
        namespace=str(_get(raw, obj, "metadata.namespace", "default")), name=_name(raw),
        selector=_model(raw, LabelSelector, sel, "spec.selector") if sel is not None else None,
        disruptions_allowed=allowed)


def parse_hyper_node(raw: _Raw) -> HyperNode:
    obj = raw.obj
    tier = _get(raw, obj, "spec.tier", required=True, types=int)
    members = []
    for i, m in enumerate(_get(raw, obj, "spec.members", [], types=list)):
        p = f"spec.members[{i}]"
        if not isinstance(m, dict):
            raise raw.error(p, "expected a mapping")
        mtype = _get(raw, m, "type", required=True, types=str, prefix=p + ".")
        if mtype not in ("Node", "HyperNode"):
            raise raw.error(p + ".type", f"must be Node or HyperNode, got {mtype!r}")
        sel = _get(raw, m, "selector", required=True, types=dict, prefix=p + ".")
        kinds = [k for k in ("exactMatch", "regexMatch", "labelMatch") if sel.get(k) is not None]
        if len(kinds) != 1:
            raise raw.error(p + ".selector", "needs exactly one of exactMatch, regexMatch, labelMatch")
        if mtype == "HyperNode" and kinds[0] != "exactMatch":
            raise raw.error(p + ".selector", "a HyperNode member is selected by exactMatch only")
        if kinds[0] == "exactMatch":
            name = _get(raw, sel, "exactMatch.name", required=True, types=str, prefix=p + ".selector.")
            members.append(HyperNodeMember(type=mtype, exact_name=name))
        elif kinds[0] == "regexMatch":
            pattern = _get(raw, sel, "regexMatch.pattern", required=True, types=str, prefix=p + ".selector.")
            try:
                re.compile(pattern)
            except re.error as e:
                raise raw.error(p + ".selector.regexMatch.pattern", f"invalid regular expression: {e}") from None
            members.append(HyperNodeMember(type=mtype, regex=pattern))
        else:
            labels = _model(raw, LabelSelector, sel["labelMatch"], p + ".selector.labelMatch")
            members.append(HyperNodeMember(type=mtype, labels=labels))
    return HyperNode(name=_name(raw), tier=tier, members=tuple(members))


def parse_repack_run(raw: _Raw) -> RepackRun:
    obj = raw.obj
    spec = _get(raw, obj, "spec", required=True, types=dict)
    goals = spec.get("goals")
    if isinstance(goals, list):
        for i, g in enumerate(goals):
            if not isinstance(g, dict) or not g.get("resource"):
                raise raw.error(f"spec.goals[{i}].resource", "goal names no resource")
            _get(raw, g, "minFragImprovementPercent", types=(int, float), prefix=f"spec.goals[{i}].")
    for path in ("maxPerRun.podGroups", "eviction.gracePeriodSeconds", "ttlSecondsAfterFinished"):
        _get(raw, spec, path, types=int, prefix="spec.")  # numbers as the CRD types them: no "3", no true
    return RepackRun(name=_name(raw), labels=_str_map(raw, obj, "metadata.labels"),
                     spec=_model(raw, RepackRunSpec, spec, "spec"), raw=obj)


def _non_negative(raw: _Raw, obj: Mapping[str, Any], path: str, default: int | None, *,
                  prefix: str = "") -> int | None:
    value = _get(raw, obj, path, default, types=int, prefix=prefix)
    if value is not None and value < 0:
        raise raw.error(prefix + path, f"must not be negative, got {value}")
    return value


def parse_queue(raw: _Raw) -> Queue:
    obj = raw.obj
    spec = _get(raw, obj, "spec", {}, types=dict)
    p = "spec."
    parent = _get(raw, spec, "parent", None, types=str, prefix=p) or None
    quotas = {f: _resources(raw, _get(raw, spec, f, None, types=dict, prefix=p), p + f)
              for f in ("guarantee.resource", "deserved", "capability")}
    weight = _non_negative(raw, spec, "weight", 1, prefix=p) or 1  # Volcano's webhook turns 0 into 1
    state = _get(raw, obj, "status.state", None, types=str) or "Open"
    if state not in QUEUE_STATES:
        raise raw.error("status.state", f"must be one of {', '.join(QUEUE_STATES)}, got {state!r}")
    return Queue(
        name=_name(raw), labels=_str_map(raw, obj, "metadata.labels"),
        annotations=_str_map(raw, obj, "metadata.annotations"), parent=parent,
        guarantee=quotas["guarantee.resource"], deserved=quotas["deserved"], capability=quotas["capability"],
        reclaimable=_get(raw, spec, "reclaimable", True, types=bool, prefix=p), weight=weight, state=state)


def parse_priority_class(raw: _Raw) -> PriorityClass:
    obj = raw.obj
    value = _get(raw, obj, "value", required=True, types=int)
    policy = _get(raw, obj, "preemptionPolicy", None, types=str) or "PreemptLowerPriority"
    if policy not in PREEMPTION_POLICIES:
        raise raw.error("preemptionPolicy", f"must be one of {', '.join(PREEMPTION_POLICIES)}, got {policy!r}")
    return PriorityClass(name=_name(raw), value=value, preemption_policy=policy,
                         global_default=_get(raw, obj, "globalDefault", False, types=bool))


def _pod_template(raw: _Raw, template: Mapping[str, Any], prefix: str) -> PodTemplate:
    labels = _get(raw, template, "metadata.labels", {}, types=dict, prefix=prefix)
    spec = _get(raw, template, "spec", {}, types=dict, prefix=prefix)
    p = prefix + "spec."
    tolerations = tuple(_model(raw, Toleration, t, f"{p}tolerations[{i}]")
                        for i, t in enumerate(_get(raw, spec, "tolerations", [], types=list, prefix=p)))
    selector = _get(raw, spec, "nodeSelector", {}, types=dict, prefix=p)
    return PodTemplate(
        labels={str(k): "" if v is None else str(v) for k, v in labels.items()},
        requests=effective_requests(raw, spec, prefix=p),
        node_selector={str(k): "" if v is None else str(v) for k, v in selector.items()},
        tolerations=tolerations, required_node_affinity=parse_node_affinity(raw, spec, prefix=p),
        priority_class_name=_get(raw, spec, "priorityClassName", None, types=str, prefix=p) or None,
        scheduler_name=_get(raw, spec, "schedulerName", None, types=str, prefix=p) or None)


def _job_task(raw: _Raw, task: Any, index: int) -> JobTask:
    prefix = f"spec.tasks[{index}]."
    if not isinstance(task, dict):
        raise raw.error(prefix[:-1], "expected a mapping")
    name = _get(raw, task, "name", None, types=str, prefix=prefix) or f"default{index}"  # Volcano's default
    replicas = _non_negative(raw, task, "replicas", 0, prefix=prefix) or 0
    min_available = _non_negative(raw, task, "minAvailable", None, prefix=prefix)
    if min_available is not None and min_available > replicas:
        raise raw.error(prefix + "minAvailable", f"{min_available} is greater than replicas {replicas}")
    template = _get(raw, task, "template", {}, types=dict, prefix=prefix)
    return JobTask(name=name, replicas=replicas, min_available=min_available,
                   template=_pod_template(raw, template, prefix + "template."),
                   policies=_policies(raw, task, prefix))


def _policies(raw: _Raw, owner: Mapping[str, Any], prefix: str) -> tuple[LifecyclePolicy, ...]:
    """``policies`` of a VCJob or a task: ``event`` / ``events`` and ``action`` (exitCode, timeout and
    any other field are not read)."""
    out = []
    for i, item in enumerate(_get(raw, owner, "policies", [], types=list, prefix=prefix)):
        p = f"{prefix}policies[{i}]"
        if not isinstance(item, dict):
            raise raw.error(p, f"expected a mapping, got {type(item).__name__}")
        event = _get(raw, item, "event", None, types=str, prefix=p + ".")
        events = _get(raw, item, "events", [], types=list, prefix=p + ".")
        for j, e in enumerate(events):
            if not isinstance(e, str):
                raise raw.error(f"{p}.events[{j}]", f"expected a string, got {type(e).__name__}")
        action = _get(raw, item, "action", "", types=str, prefix=p + ".")
        out.append(LifecyclePolicy(events=(*events, *((event,) if event else ())), action=action))
    return tuple(out)


def parse_vcjob(raw: _Raw) -> VCJob:
    obj = raw.obj
    spec = _get(raw, obj, "spec", required=True, types=dict)
    p = "spec."
    raw_tasks = _get(raw, spec, "tasks", None, types=list, prefix=p)
    if not raw_tasks:
        raise raw.error("spec.tasks", "a job needs at least one task")
    tasks = [_job_task(raw, t, i) for i, t in enumerate(raw_tasks)]
    seen: set[str] = set()
    for i, t in enumerate(tasks):
        if t.name in seen:
            raise raw.error(f"spec.tasks[{i}].name", f"duplicate task name {t.name!r}")
        seen.add(t.name)
    total = sum(t.replicas for t in tasks)
    min_available = _non_negative(raw, spec, "minAvailable", 0, prefix=p) or 0
    if min_available > total:
        raise raw.error("spec.minAvailable", f"{min_available} is greater than the tasks' replicas ({total})")
    if min_available == 0:  # Volcano's webhook default
        min_available = sum(t.replicas if t.min_available is None else t.min_available for t in tasks)
    nt = _get(raw, spec, "networkTopology", None, types=dict, prefix=p)
    topo = None
    if nt is not None:
        tier = _non_negative(raw, nt, "highestTierAllowed", None, prefix=p + "networkTopology.")
        mode = _get(raw, nt, "mode", "hard", types=str, prefix=p + "networkTopology.")
        topo = _model(raw, JobNetworkTopology, {"mode": mode, "highest_tier_allowed": tier}, "spec.networkTopology")
    return VCJob(
        namespace=str(_get(raw, obj, "metadata.namespace", "default")), name=_name(raw),
        uid=str(_get(raw, obj, "metadata.uid", "")), labels=_str_map(raw, obj, "metadata.labels"),
        annotations=_str_map(raw, obj, "metadata.annotations"),
        creation_timestamp=str(_get(raw, obj, "metadata.creationTimestamp", "")),
        queue=_get(raw, spec, "queue", None, types=str, prefix=p) or "default", min_available=min_available,
        priority_class_name=_get(raw, spec, "priorityClassName", None, types=str, prefix=p) or None,
        network_topology=topo, tasks=tuple(tasks), policies=_policies(raw, spec, p),
        phase=str(_get(raw, obj, "status.state.phase", "", types=str)))


def parse_model_serving(raw: _Raw) -> ModelServing:
    obj = raw.obj
    spec = _get(raw, obj, "spec", {}, types=dict)
    return ModelServing(
        namespace=str(_get(raw, obj, "metadata.namespace", "default")), name=_name(raw),
        labels=_str_map(raw, obj, "metadata.labels"),
        recovery_policy=_get(raw, spec, "recoveryPolicy", None, types=str, prefix="spec.") or None)


_PARSERS: dict[tuple[str, str], Any] = {
    ("", "Node"): parse_node,
    ("", "Pod"): parse_pod,
    ("scheduling.volcano.sh", "PodGroup"): parse_pod_group,
    ("policy", "PodDisruptionBudget"): parse_pdb,
    ("repack.volcano.sh", "RepackRun"): parse_repack_run,
    ("topology.volcano.sh", "HyperNode"): parse_hyper_node,
    ("scheduling.volcano.sh", "Queue"): parse_queue,
    ("scheduling.k8s.io", "PriorityClass"): parse_priority_class,
    ("batch.volcano.sh", "Job"): parse_vcjob,
    ("workload.serving.volcano.sh", "ModelServing"): parse_model_serving,
    ("workload.volcano.sh", "ModelServing"): parse_model_serving,
}


# ---- assembling a snapshot -------------------------------------------------------------------

def load_files(paths: Sequence[str | Path]) -> LoadedInput:
    """Read and merge snapshot files; check identities and cross-references."""
    raws: list[_Raw] = []
    for path in paths:
        raws.extend(_Raw(str(path), doc) for doc in read_documents(path))
    return build(raws)


def load_objects(objects: Iterable[Mapping[str, Any]], source: str = "<objects>") -> LoadedInput:
    """The same as load_files for objects already in memory (the API adapter uses this)."""
    return build([_Raw(source, dict(o)) for o in objects])


def build(raws: Sequence[_Raw]) -> LoadedInput:
    nodes: dict[str, Node] = {}
    pods: dict[str, Pod] = {}
    groups: dict[str, PodGroup] = {}
    pdbs: dict[str, PodDisruptionBudget] = {}
    runs: dict[str, RepackRun] = {}
    hyper: dict[str, HyperNode] = {}
    queues: dict[str, Queue] = {}
    priority_classes: dict[str, PriorityClass] = {}
    jobs: dict[str, VCJob] = {}
    servings: dict[str, ModelServing] = {}
    origin: dict[tuple[str, str], _Raw] = {}
    pod_raw: dict[str, _Raw] = {}
    for raw in raws:
        parser = _PARSERS.get((raw.group, raw.kind))
        if parser is None:
            continue  # kinds the planners do not use are skipped
        parsed = parser(raw)
        key: str = parsed.key if hasattr(parsed, "key") else parsed.name
        tables: dict[str, dict[str, Any]] = {"Node": nodes, "Pod": pods, "PodGroup": groups,
                                             "PodDisruptionBudget": pdbs, "RepackRun": runs, "HyperNode": hyper,
                                             "Queue": queues, "PriorityClass": priority_classes, "Job": jobs,
                                             "ModelServing": servings}
        table = tables[raw.kind]
        ident = (raw.kind, key)
        if key in table:
            first = origin[ident]
            raise raw.error("metadata.name", f"duplicate object: also defined in {first.file}")
        origin[ident] = raw
        table[key] = parsed
        if raw.kind == "Pod":
            pod_raw[key] = raw
    warnings: list[str] = []
    for key, pod in sorted(pods.items()):
        if pod.occupying and pod.node_name not in nodes:
            raise pod_raw[key].error("spec.nodeName", f"bound to node {pod.node_name!r}, which is not in the snapshot")
    kept = {k: p for k, p in pods.items() if not p.node_name or p.node_name in nodes}
    used: dict[str, Resources] = {}
    for pod in kept.values():
        if pod.occupying and pod.node_name is not None:
            acc = used.setdefault(pod.node_name, {"pods": 0})
            acc["pods"] += 1000
            for r, v in pod.requests.items():
                acc[r] = acc.get(r, 0) + v
    for name in sorted(used):
        node = nodes[name]
        for r, v in sorted(used[name].items()):
            if r == "pods" and "pods" not in node.allocatable:
                continue
            cap = node.allocatable.get(r, 0)
            if v > cap:
                warnings.append(f"node {name} is over-committed on {r}: pods request {format_milli(v)}, "
                                f"allocatable {format_milli(cap)}")
    snap = Snapshot(nodes=dict(sorted(nodes.items())), pods=dict(sorted(kept.items())),
                    pod_groups=dict(sorted(groups.items())), pdbs=dict(sorted(pdbs.items())),
                    hyper_nodes=dict(sorted(hyper.items())), queues=dict(sorted(queues.items())),
                    priority_classes=dict(sorted(priority_classes.items())), jobs=dict(sorted(jobs.items())),
                    model_servings=dict(sorted(servings.items())), warnings=tuple(warnings))
    return LoadedInput(snapshot=snap, runs=dict(sorted(runs.items())))


def load_run_file(path: str | Path) -> RepackRun:
    """A file holding exactly one RepackRun (other objects are ignored)."""
    loaded = load_files([path])
    if len(loaded.runs) != 1:
        raise InputError(f"expected exactly one RepackRun, found {len(loaded.runs)}", file=str(path))
    return next(iter(loaded.runs.values()))


def pick_run(loaded: LoadedInput, run: str | None, sources: Sequence[str], *,
             required: bool = True) -> RepackRun | None:
    """``--run``: a file holding a RepackRun, or the name of one inside the snapshots; without it the
    only RepackRun in the snapshots. With ``required`` False, no (or no unique) run gives None."""
    where = ", ".join(sources)
    if run is not None:
        if Path(run).is_file():
            return load_run_file(run)
        if run in loaded.runs:
            return loaded.runs[run]
        raise InputError(f"no RepackRun named {run!r} in the snapshots, and no such file",
                         file=where, obj=f"RepackRun/{run}", field="--run")
    if len(loaded.runs) == 1:
        return next(iter(loaded.runs.values()))
    if not required:
        return None
    if not loaded.runs:
        raise InputError("no RepackRun given: pass --run RUN.yaml or include one in a snapshot",
                         file=where, obj="RepackRun", field="--run")
    raise InputError(f"several RepackRuns in the snapshots ({', '.join(loaded.runs)}): pick one with --run NAME",
                     file=where, obj="RepackRun", field="--run")
