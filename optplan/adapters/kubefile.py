"""Read cluster snapshots in Kubernetes' own shape (``kubectl get ... -o yaml|json``).

A file holds a ``kind: List`` (or any ``*List``) with ``items``, a single object, or a multi-document
YAML stream. Several files are merged. Every problem is an InputError naming file, object and field.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import re2
from pydantic import ValidationError

from optplan.adapters import vgpu
from optplan.adapters.documents import STDIN, STDIN_NAME, ReadBudget, read_documents, snapshot_paths
from optplan.adapters.schedconf import device_config_location, is_configmap, is_scheduler_configmap
from optplan.errors import InputError
from optplan.models.devices import GpuShare
from optplan.models.limits import (
    HIGHEST_USER_PRIORITY,
    INT32_MAX,
    MAX_HYPERNODE_DEPTH,
    MAX_LABEL_LENGTH,
    MAX_NAME_LENGTH,
    MAX_QUANTITY_MILLI,
    MAX_QUEUE_DEPTH,
    MAX_TOTAL_MILLI,
    SYSTEM_PRIORITY_CLASSES,
    past_model_range,
)
from optplan.models.quantity import MILLI, format_milli, is_integer_resource, to_milli
from optplan.models.queues import (
    PREEMPTION_POLICIES,
    QUEUE_STATES,
    JobNetworkTopology,
    JobTask,
    LifecyclePolicy,
    PartitionPolicy,
    PodTemplate,
    PriorityClass,
    Queue,
    VCJob,
)
from optplan.models.repack import RepackRun, RepackRunSpec
from optplan.models.selectors import LabelSelector, NodeSelectorTerm, Taint, Toleration
from optplan.models.snapshot import (
    IF_HEALTHY_BUDGET,
    TERMINAL_PHASES,
    UNHEALTHY_POD_EVICTION_POLICIES,
    HyperNode,
    HyperNodeMember,
    ModelServing,
    NetworkTopology,
    Node,
    OwnerReference,
    Pod,
    PodDisruptionBudget,
    PodGroup,
    Resources,
    Snapshot,
    SubGroupPolicy,
    TierNameError,
    node_pattern,
    resolve_group_tier_names,
    resolve_job_tier_names,
)


@dataclass
class LoadedInput:
    snapshot: Snapshot
    runs: dict[str, RepackRun] = field(default_factory=dict)
    scheduler_configmap: dict[str, Any] | None = None
    """The volcano-scheduler ConfigMap found among the objects (``schedconf.is_scheduler_configmap``), as is:
    the configuration the cluster's vc-scheduler runs with, read when no ``--scheduler-conf`` is given."""


@dataclass
class RawObject:
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


# ---- typed field access ------------------------------------------------------------------------

def _get(raw: RawObject, obj: Mapping[str, Any], path: str, default: Any = None, *, required: bool = False,
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


def _str_map(raw: RawObject, obj: Mapping[str, Any], path: str, *, prefix: str = "") -> dict[str, str]:
    """A map of strings (labels, annotations, nodeSelector): ``true`` or ``1`` is not read as a string."""
    m = _get(raw, obj, path, {}, types=dict, prefix=prefix)
    for k, v in m.items():
        if not isinstance(k, str):
            raise raw.error(f"{prefix}{path}", f"keys must be strings, got {type(k).__name__} {k!r}")
        if v is not None and not isinstance(v, str):
            raise raw.error(f"{prefix}{path}.{k}", f"expected a string, got {type(v).__name__}")
    return {k: "" if v is None else v for k, v in m.items()}


def _int(raw: RawObject, obj: Mapping[str, Any], path: str, default: int | None, *, low: int = 0,
         high: int = INT32_MAX, prefix: str = "") -> int | None:
    """An integer field (never a string, a float or a boolean) within low..high (int32 by default)."""
    value = _get(raw, obj, path, default, types=int, prefix=prefix)
    if value is not None and not low <= value <= high:
        if value < 0 <= low:
            raise raw.error(prefix + path, f"must not be negative, got {value}")
        raise raw.error(prefix + path, f"must be within {low}..{high}, got {value}")
    return value


def _resources(raw: RawObject, m: Any, path: str) -> Resources:
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
        if milli > MAX_QUANTITY_MILLI:
            raise raw.error(f"{path}.{name}", f"quantity {value!r} is too large (over 2^63-1 milli-units)")
        if milli % MILLI and is_integer_resource(str(name)):
            raise raw.error(f"{path}.{name}", f"must be a whole number ({name} is counted in whole units), "
                                              f"got {value!r}")
        out[str(name)] = milli
    return out


def parse_model(raw: RawObject, cls: type[Any], data: Any, path: str) -> Any:
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


def _owners(raw: RawObject) -> tuple[OwnerReference, ...]:
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
            uid=str(r.get("uid") or ""),
            controller=_get(raw, r, "controller", False, types=bool, prefix=p + ".")))
    return tuple(out)


_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def _name(raw: RawObject) -> str:
    """metadata.name, a DNS-1123 subdomain as the API server requires of every kind read here."""
    name = _get(raw, raw.obj, "metadata.name", required=True, types=str)
    if not name:
        raise raw.error("metadata.name", "required field is empty")
    if len(name) > MAX_NAME_LENGTH or not _DNS_SUBDOMAIN.fullmatch(name):
        raise raw.error("metadata.name", f"invalid name {name!r}: must be a DNS-1123 subdomain (lower-case "
                                         f"letters, digits, '-' and '.', at most {MAX_NAME_LENGTH} characters)")
    return str(name)


def _namespace(raw: RawObject) -> str:
    """metadata.namespace (``default`` when absent), a DNS-1123 label."""
    ns = _get(raw, raw.obj, "metadata.namespace", None, types=str) or "default"
    if len(ns) > MAX_LABEL_LENGTH or not _DNS_LABEL.fullmatch(ns):
        raise raw.error("metadata.namespace", f"invalid namespace {ns!r}: must be a DNS-1123 label (lower-case "
                                              f"letters, digits and '-', at most {MAX_LABEL_LENGTH} characters)")
    return str(ns)


# ---- object parsers ----------------------------------------------------------------------------

def parse_node(raw: RawObject) -> Node:
    obj = raw.obj
    taints = []
    for i, t in enumerate(_get(raw, obj, "spec.taints", [], types=list)):
        taints.append(parse_model(raw, Taint, t, f"spec.taints[{i}]"))
    alloc = _get(raw, obj, "status.allocatable", required=True, types=dict)
    allocatable = _resources(raw, alloc, "status.allocatable")
    annotations = _str_map(raw, obj, "metadata.annotations")
    devices = vgpu.node_devices(annotations, allocatable, raw.error)
    return Node(
        name=_name(raw), labels=_str_map(raw, obj, "metadata.labels"), taints=tuple(taints),
        unschedulable=_get(raw, obj, "spec.unschedulable", False, types=bool),
        allocatable=vgpu.node_allocatable(annotations, allocatable, devices), devices=devices)


def _container_requests(raw: RawObject, spec: Mapping[str, Any], key: str, prefix: str) -> list[tuple[Resources, bool]]:
    out = []
    for i, c in enumerate(_get(raw, spec, key, [], types=list, prefix=prefix)):
        p = f"{prefix}{key}[{i}]"
        if not isinstance(c, dict):
            raise raw.error(p, "expected a mapping")
        req = _resources(raw, _get(raw, c, "resources.requests", None, prefix=p + "."), f"{p}.resources.requests")
        limits = _resources(raw, _get(raw, c, "resources.limits", None, prefix=p + "."), f"{p}.resources.limits")
        for r, v in limits.items():  # Kubernetes' SetDefaults_Pod: a limit without a request is the request too
            req.setdefault(r, v)
        sidecar = c.get("restartPolicy") == "Always"
        out.append((req, sidecar))
    return out


def effective_requests(raw: RawObject, spec: Mapping[str, Any], prefix: str = "spec.") -> Resources:
    """max(sum of containers (+ sidecars), max of init containers (+ sidecars started before)),
    plus pod overhead: Kubernetes' own rule. A container's limit for a resource it requests nothing of is its
    request too (the API server's defaulting of every pod, ``SetDefaults_Pod``; a pod a VCJob's template makes gets
    it on creation, and Volcano's ``AddPodTemplateRequest`` reads templates so): a file written by hand reads as
    the cluster would hold it."""
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
    for r, v in out.items():
        if v > MAX_QUANTITY_MILLI:
            raise raw.error(prefix + "containers", f"the containers request over 2^63-1 milli-units of {r} together")
    return {r: v for r, v in sorted(out.items()) if v > 0}


def parse_node_affinity(raw: RawObject, spec: Mapping[str, Any],
                        prefix: str = "spec.") -> tuple[NodeSelectorTerm, ...] | None:
    path = "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    req = _get(raw, spec, path, None, types=dict, prefix=prefix)
    if req is None:
        return None
    terms = _get(raw, req, "nodeSelectorTerms", [], types=list, prefix=f"{prefix}{path}.")
    return tuple(parse_model(raw, NodeSelectorTerm, t, f"{prefix}{path}.nodeSelectorTerms[{i}]")
                 for i, t in enumerate(terms))


def parse_pod(raw: RawObject) -> Pod:
    """A Pod as the API server holds it: a ``spec`` with at least one container, ``status.phase`` a string
    (absent: Pending)."""
    obj = raw.obj
    spec = _get(raw, obj, "spec", required=True, types=dict)
    if not _get(raw, spec, "containers", required=True, types=list, prefix="spec."):
        raise raw.error("spec.containers", "a Pod has at least one container, got none")
    tolerations = tuple(parse_model(raw, Toleration, t, f"spec.tolerations[{i}]")
                        for i, t in enumerate(_get(raw, spec, "tolerations", [], types=list, prefix="spec.")))
    priority = _int(raw, spec, "priority", None, low=-(2**31), prefix="spec.")
    node_name = _get(raw, spec, "nodeName", None, types=str, prefix="spec.") or None
    annotations = _str_map(raw, obj, "metadata.annotations")
    share, requests = vgpu.pod_gpu(annotations, spec, lambda m, path: _resources(raw, m, path), raw.error,
                                   effective_requests(raw, spec))
    return Pod(
        namespace=_namespace(raw), name=_name(raw),
        uid=str(_get(raw, obj, "metadata.uid", "")),
        labels=_str_map(raw, obj, "metadata.labels"), annotations=annotations,
        owner_references=_owners(raw), creation_timestamp=str(_get(raw, obj, "metadata.creationTimestamp", "")),
        start_time=str(_get(raw, obj, "status.startTime", "")),
        node_name=node_name, scheduler_name=str(_get(raw, spec, "schedulerName", "default-scheduler")),
        nominated_node_name=_get(raw, obj, "status.nominatedNodeName", None, types=str) or None,
        node_selector=_str_map(raw, spec, "nodeSelector", prefix="spec."), tolerations=tolerations, priority=priority,
        priority_class_name=_get(raw, spec, "priorityClassName", None, types=str, prefix="spec.") or None,
        required_node_affinity=parse_node_affinity(raw, spec), requests=requests,
        phase=_get(raw, obj, "status.phase", None, types=str) or "Pending", ready=_pod_ready(raw),
        deleting=_get(raw, obj, "metadata.deletionTimestamp", None) is not None, gpu_share=share)


def _pod_ready(raw: RawObject) -> bool:
    """status.conditions has type Ready with status "True" (Kubernetes' IsPodReady)."""
    for i, c in enumerate(_get(raw, raw.obj, "status.conditions", [], types=list)):
        p = f"status.conditions[{i}]"
        if not isinstance(c, dict):
            raise raw.error(p, "expected a mapping")
        if _get(raw, c, "type", None, types=str, prefix=p + ".") == "Ready":
            return _get(raw, c, "status", None, types=str, prefix=p + ".") == "True"
    return False


def parse_pod_group(raw: RawObject) -> PodGroup:
    obj = raw.obj
    min_member = _int(raw, obj, "spec.minMember", 1)
    nt = _get(raw, obj, "spec.networkTopology", None, types=dict)
    tier = _int(raw, obj, "spec.networkTopology.highestTierAllowed", None)
    tier_name = _get(raw, obj, "spec.networkTopology.highestTierName", None, types=str) or None
    topo = parse_model(raw, NetworkTopology, {"mode": nt.get("mode", "hard"), "highest_tier_allowed": tier,
                                              "highest_tier_name": tier_name},
                  "spec.networkTopology") if nt is not None else None
    return PodGroup(
        namespace=_namespace(raw), name=_name(raw),
        labels=_str_map(raw, obj, "metadata.labels"), owner_references=_owners(raw), min_member=min_member,
        queue=_get(raw, obj, "spec.queue", None, types=str) or "default", network_topology=topo,
        sub_group_policy=_sub_group_policy(raw), min_task_member=_min_task_member(raw),
        creation_timestamp=str(_get(raw, obj, "metadata.creationTimestamp", "")),
        priority_class_name=_get(raw, obj, "spec.priorityClassName", None, types=str) or None)


def _min_task_member(raw: RawObject) -> dict[str, int]:
    """``spec.minTaskMember``: task name -> a count ≥ 0."""
    m = _get(raw, raw.obj, "spec.minTaskMember", {}, types=dict)
    out = {}
    for k in sorted(m, key=str):
        n = m[k]
        if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n <= INT32_MAX:
            raise raw.error(f"spec.minTaskMember.{k}", f"expected a count within 0..{INT32_MAX}, got {n!r}")
        out[str(k)] = n
    return out


def _sub_group_policy(raw: RawObject) -> tuple[SubGroupPolicy, ...]:
    """``spec.subGroupPolicy``: each entry's name, subGroupSize (≥ 1, default 1), minSubGroups (≥ 0),
    labelSelector, matchLabelKeys and networkTopology."""
    out = []
    for i, e in enumerate(_get(raw, raw.obj, "spec.subGroupPolicy", [], types=list)):
        p = f"spec.subGroupPolicy[{i}]."
        if not isinstance(e, dict):
            raise raw.error(p[:-1], "expected a mapping")
        sel = _get(raw, e, "labelSelector", None, types=dict, prefix=p)
        keys = _get(raw, e, "matchLabelKeys", [], types=list, prefix=p)
        if not all(isinstance(k, str) and k for k in keys):
            raise raw.error(p + "matchLabelKeys", "expected a list of label keys")
        nt = _get(raw, e, "networkTopology", None, types=dict, prefix=p)
        topo = None
        if nt is not None:
            q = p + "networkTopology."
            topo = parse_model(raw, NetworkTopology, {
                "mode": _get(raw, nt, "mode", "hard", types=str, prefix=q),
                "highest_tier_allowed": _int(raw, nt, "highestTierAllowed", None, prefix=q),
                "highest_tier_name": _get(raw, nt, "highestTierName", None, types=str, prefix=q) or None}, q[:-1])
        out.append(SubGroupPolicy(
            name=_get(raw, e, "name", "", types=str, prefix=p) or "",
            sub_group_size=_int(raw, e, "subGroupSize", 1, low=1, prefix=p) or 1,
            min_sub_groups=_int(raw, e, "minSubGroups", 0, prefix=p) or 0,
            label_selector=parse_model(raw, LabelSelector, sel, p + "labelSelector") if sel is not None else None,
            match_label_keys=tuple(keys), network_topology=topo))
    return tuple(out)


def parse_pdb(raw: RawObject) -> PodDisruptionBudget:
    obj = raw.obj
    sel = _get(raw, obj, "spec.selector", None, types=dict)
    allowed = _int(raw, obj, "status.disruptionsAllowed", 0)
    policy = _get(raw, obj, "spec.unhealthyPodEvictionPolicy", IF_HEALTHY_BUDGET, types=str)
    if policy not in UNHEALTHY_POD_EVICTION_POLICIES:
        raise raw.error("spec.unhealthyPodEvictionPolicy", f"unknown policy {policy!r} (expected "
                                                           f"{' or '.join(UNHEALTHY_POD_EVICTION_POLICIES)})")
    return PodDisruptionBudget(
        namespace=_namespace(raw), name=_name(raw),
        selector=parse_model(raw, LabelSelector, sel, "spec.selector") if sel is not None else None,
        disruptions_allowed=allowed, unhealthy_pod_eviction_policy=policy,
        current_healthy=_int(raw, obj, "status.currentHealthy", 0),
        desired_healthy=_int(raw, obj, "status.desiredHealthy", 0))


def parse_hyper_node(raw: RawObject) -> HyperNode:
    obj = raw.obj
    _get(raw, obj, "spec.tier", required=True)
    tier = _int(raw, obj, "spec.tier", None)
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
                node_pattern(pattern)
            except re2.error as e:
                reason = e.args[0].decode(errors="replace") if e.args and isinstance(e.args[0], bytes) else str(e)
                raise raw.error(p + ".selector.regexMatch.pattern",
                                f"invalid regular expression (RE2 syntax, as Go's): {reason}") from None
            members.append(HyperNodeMember(type=mtype, regex=pattern))
        else:
            labels = parse_model(raw, LabelSelector, sel["labelMatch"], p + ".selector.labelMatch")
            members.append(HyperNodeMember(type=mtype, labels=labels))
    tier_name = _get(raw, obj, "spec.tierName", None, types=str) or None
    return HyperNode(name=_name(raw), tier=tier, members=tuple(members), tier_name=tier_name)


def _typed_tier(raw: RawObject, obj: Mapping[str, Any], path: str, counts: tuple[str, ...], *, prefix: str,
                names: tuple[str, ...] = ()) -> None:
    """A goal naming HyperNodes of a tier (issue 15): its tier and counts integers as the CRD types
    them (no "1", no true, no 1.0), its tierName (and ``names``) strings."""
    for name in ("tier", *counts):
        _int(raw, obj, f"{path}.{name}", None, prefix=prefix)
    for name in ("tierName", *names):
        _get(raw, obj, f"{path}.{name}", types=str, prefix=prefix)


def parse_repack_run(raw: RawObject) -> RepackRun:
    obj = raw.obj
    spec = _get(raw, obj, "spec", required=True, types=dict)
    goals = spec.get("goals")
    if isinstance(goals, list):
        for i, g in enumerate(goals):
            if not isinstance(g, dict) or not g.get("resource"):
                raise raw.error(f"spec.goals[{i}].resource", "goal names no resource")
            _get(raw, g, "minFragImprovementPercent", types=(int, float), prefix=f"spec.goals[{i}].")
            _typed_tier(raw, g, "freeHyperNodes", ("count",), prefix=f"spec.goals[{i}].")
            _get(raw, g, "freeHyperNodes.required", types=bool, prefix=f"spec.goals[{i}].")
    # the other implementation's names too (hyperNodeTier, hyperNodeTierName, nodeBlockSize, mode)
    _typed_tier(raw, spec, "networkTopology", ("requiredNodeBlocks", "hyperNodeTier", "nodeBlockSize"), prefix="spec.",
                names=("hyperNodeTierName", "mode"))
    # numbers as the CRD types them (no "3", no true, no 2.0), within Kubernetes' ranges
    _int(raw, spec, "maxPerRun.podGroups", None, prefix="spec.")
    _int(raw, spec, "eviction.gracePeriodSeconds", None, high=2**63 - 1, prefix="spec.")
    _int(raw, spec, "ttlSecondsAfterFinished", None, prefix="spec.")
    budget = _get(raw, spec, "maxPerRun.resources", None, types=dict, prefix="spec.")
    if budget is not None:
        for r, amount in _resources(raw, budget, "spec.maxPerRun.resources").items():
            if amount > MAX_TOTAL_MILLI:
                raise raw.error(f"spec.maxPerRun.resources.{r}", f"budget {format_milli(amount)} is too large "
                                                                 f"(over 2^62 milli-units, limit MAX_TOTAL_MILLI)")
    return RepackRun(name=_name(raw), labels=_str_map(raw, obj, "metadata.labels"),
                     spec=parse_model(raw, RepackRunSpec, spec, "spec"), raw=obj)


def _non_negative(raw: RawObject, obj: Mapping[str, Any], path: str, default: int | None, *,
                  prefix: str = "") -> int | None:
    """An int32 field that may not be negative (replicas, minAvailable, weight, tiers)."""
    return _int(raw, obj, path, default, prefix=prefix)


def parse_queue(raw: RawObject) -> Queue:
    obj = raw.obj
    spec = _get(raw, obj, "spec", {}, types=dict)
    p = "spec."
    parent = _get(raw, spec, "parent", None, types=str, prefix=p) or None
    quotas = {f: _resources(raw, _get(raw, spec, f, None, types=dict, prefix=p), p + f)
              for f in ("guarantee.resource", "deserved", "capability")}
    weight = _non_negative(raw, spec, "weight", 1, prefix=p) or 1  # Volcano's webhook turns 0 into 1
    priority = _int(raw, spec, "priority", None, low=-(2**31), prefix=p) or 0  # int32 when written
    state = _get(raw, obj, "status.state", None, types=str) or "Open"
    if state not in QUEUE_STATES:
        raise raw.error("status.state", f"must be one of {', '.join(QUEUE_STATES)}, got {state!r}")
    return Queue(
        name=_name(raw), labels=_str_map(raw, obj, "metadata.labels"),
        annotations=_str_map(raw, obj, "metadata.annotations"), parent=parent,
        guarantee=quotas["guarantee.resource"], deserved=quotas["deserved"], capability=quotas["capability"],
        reclaimable=_get(raw, spec, "reclaimable", True, types=bool, prefix=p), weight=weight, priority=priority,
        state=state)


def parse_priority_class(raw: RawObject) -> PriorityClass:
    obj = raw.obj
    _get(raw, obj, "value", required=True)
    value = _int(raw, obj, "value", None, low=-(2**31))
    name = _name(raw)
    if name.startswith("system-"):
        if SYSTEM_PRIORITY_CLASSES.get(name) != value:
            known = ", ".join(f"{k} ({v})" for k, v in SYSTEM_PRIORITY_CLASSES.items())
            raise raw.error("metadata.name", f"names starting with 'system-' are reserved for {known}")
    elif value is not None and value > HIGHEST_USER_PRIORITY:
        raise raw.error("value", f"must be at most {HIGHEST_USER_PRIORITY} (the highest user-defined priority), "
                                 f"got {value}")
    policy = _get(raw, obj, "preemptionPolicy", None, types=str) or "PreemptLowerPriority"
    if policy not in PREEMPTION_POLICIES:
        raise raw.error("preemptionPolicy", f"must be one of {', '.join(PREEMPTION_POLICIES)}, got {policy!r}")
    return PriorityClass(name=name, value=value, preemption_policy=policy,
                         global_default=_get(raw, obj, "globalDefault", False, types=bool))


def _pod_template(raw: RawObject, template: Mapping[str, Any], prefix: str) -> PodTemplate:
    labels = _str_map(raw, template, "metadata.labels", prefix=prefix)
    spec = _get(raw, template, "spec", {}, types=dict, prefix=prefix)
    p = prefix + "spec."
    tolerations = tuple(parse_model(raw, Toleration, t, f"{p}tolerations[{i}]")
                        for i, t in enumerate(_get(raw, spec, "tolerations", [], types=list, prefix=p)))
    selector = _str_map(raw, spec, "nodeSelector", prefix=p)
    annotations = _str_map(raw, template, "metadata.annotations", prefix=prefix)
    share, requests = vgpu.pod_gpu(annotations, spec, lambda m, path: _resources(raw, m, prefix + path),
                                   lambda path, why: raw.error(prefix + path, why),
                                   effective_requests(raw, spec, prefix=p))
    return PodTemplate(
        labels=labels, requests=requests, node_selector=selector, gpu_share=share,
        tolerations=tolerations, required_node_affinity=parse_node_affinity(raw, spec, prefix=p),
        priority_class_name=_get(raw, spec, "priorityClassName", None, types=str, prefix=p) or None,
        scheduler_name=_get(raw, spec, "schedulerName", None, types=str, prefix=p) or None)


def _job_task(raw: RawObject, task: Any, index: int) -> JobTask:
    prefix = f"spec.tasks[{index}]."
    if not isinstance(task, dict):
        raise raw.error(prefix[:-1], "expected a mapping")
    name = _get(raw, task, "name", None, types=str, prefix=prefix) or f"default{index}"  # Volcano's default
    replicas = _non_negative(raw, task, "replicas", 0, prefix=prefix) or 0
    min_available = _non_negative(raw, task, "minAvailable", None, prefix=prefix)
    if min_available is not None and min_available > replicas:
        raise raw.error(prefix + "minAvailable", f"{min_available} is greater than replicas {replicas}")
    template = _get(raw, task, "template", {}, types=dict, prefix=prefix)
    partition = _partition_policy(raw, task, prefix, replicas)
    if min_available is None and partition is not None and partition.min_partitions > 0:
        min_available = partition.min_partitions * partition.partition_size  # the job controller's minTaskMember
    return JobTask(name=name, replicas=replicas, min_available=min_available,
                   template=_pod_template(raw, template, prefix + "template."),
                   policies=_policies(raw, task, prefix), partition_policy=partition)


def _partition_policy(raw: RawObject, task: Mapping[str, Any], prefix: str, replicas: int) -> PartitionPolicy | None:
    """``spec.tasks[].partitionPolicy``: totalPartitions and partitionSize (≥ 1) whose product is the task's
    replicas, minPartitions (0..totalPartitions), and its networkTopology."""
    pp = _get(raw, task, "partitionPolicy", None, types=dict, prefix=prefix)
    if pp is None:
        return None
    p = prefix + "partitionPolicy."
    total = _int(raw, pp, "totalPartitions", None, low=1, prefix=p)
    size = _int(raw, pp, "partitionSize", None, low=1, prefix=p)
    if total is None or size is None:
        raise raw.error(p + ("totalPartitions" if total is None else "partitionSize"), "required (at least 1)")
    minimum = _int(raw, pp, "minPartitions", 0, prefix=p) or 0
    if total * size != replicas:
        raise raw.error(p + "totalPartitions", f"totalPartitions {total} x partitionSize {size} is not the task's "
                                               f"replicas {replicas}")
    if minimum > total:
        raise raw.error(p + "minPartitions", f"{minimum} is greater than totalPartitions {total}")
    nt = _get(raw, pp, "networkTopology", None, types=dict, prefix=p)
    topo = None
    if nt is not None:
        q = p + "networkTopology."
        topo = parse_model(raw, JobNetworkTopology, {
            "mode": _get(raw, nt, "mode", "hard", types=str, prefix=q),
            "highest_tier_allowed": _non_negative(raw, nt, "highestTierAllowed", None, prefix=q),
            "highest_tier_name": _get(raw, nt, "highestTierName", None, types=str, prefix=q) or None},
            q[:-1])
    return PartitionPolicy(total_partitions=total, partition_size=size, min_partitions=minimum,
                           network_topology=topo)


def _policies(raw: RawObject, owner: Mapping[str, Any], prefix: str) -> tuple[LifecyclePolicy, ...]:
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


def parse_vcjob(raw: RawObject) -> VCJob:
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
    if total > INT32_MAX:
        raise raw.error("spec.tasks", f"the tasks' replicas add up to {total}, over {INT32_MAX} (int32)")
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
        tier_name = _get(raw, nt, "highestTierName", None, types=str, prefix=p + "networkTopology.") or None
        topo = parse_model(raw, JobNetworkTopology, {"mode": mode, "highest_tier_allowed": tier,
                                                     "highest_tier_name": tier_name}, "spec.networkTopology")
    return VCJob(
        namespace=_namespace(raw), name=_name(raw),
        uid=str(_get(raw, obj, "metadata.uid", "")), labels=_str_map(raw, obj, "metadata.labels"),
        annotations=_str_map(raw, obj, "metadata.annotations"),
        creation_timestamp=str(_get(raw, obj, "metadata.creationTimestamp", "")),
        queue=_get(raw, spec, "queue", None, types=str, prefix=p) or "default", min_available=min_available,
        priority_class_name=_get(raw, spec, "priorityClassName", None, types=str, prefix=p) or None,
        network_topology=topo, tasks=tuple(tasks), policies=_policies(raw, spec, p),
        phase=str(_get(raw, obj, "status.state.phase", "", types=str)))


def parse_model_serving(raw: RawObject) -> ModelServing:
    obj = raw.obj
    spec = _get(raw, obj, "spec", {}, types=dict)
    return ModelServing(
        namespace=_namespace(raw), name=_name(raw),
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
    """Read and merge snapshot files; check identities and cross-references. A path may be ``-``
    (standard input, read once, YAML or JSON) or a directory (its *.yaml, *.yml and *.json files,
    sorted by name, not recursive). The files together stay within ``limits``."""
    budget = ReadBudget()
    raws: list[RawObject] = []
    for path in snapshot_paths(paths):
        name = STDIN_NAME if path == STDIN else path
        raws.extend(RawObject(name, doc) for doc in read_documents(path, budget))
    return build(raws)


ParseCache = dict[int, tuple[Any, Any]]
"""id(object) -> (the object, its parsed model): a long-lived caller (the controller) keeps one, so an
object that did not change (the same dict, held here so its id stays its own) is not parsed again."""


def orphaned_pods(objects: Sequence[Mapping[str, Any]]) -> dict[int, str]:
    """The live-cluster rule for pods bound to a node that does not exist: index -> the warning naming
    the pod and the node. A node deleted before its pods leaves them bound to it until they are deleted
    (their namespace's deletion, or the pod garbage collector's orphan sweep); they hold nothing
    anywhere, so a live read leaves them out (``optplan snapshot``, the planning commands reading the
    cluster, the controller), with this warning each. A Pod with a ``spec.nodeName`` that names no Node
    among ``objects``, not in a terminal phase. A file naming a missing node is still refused (build)."""
    nodes = {str(_meta(o).get("name")) for o in objects if o.get("kind") == "Node" and not _group_of(o)}
    out: dict[int, str] = {}
    for i, o in enumerate(objects):
        if o.get("kind") != "Pod" or _group_of(o):
            continue
        spec, status = o.get("spec"), o.get("status")
        node = spec.get("nodeName") if isinstance(spec, Mapping) else None
        phase = status.get("phase") if isinstance(status, Mapping) else None
        if isinstance(node, str) and node and node not in nodes and phase not in TERMINAL_PHASES:
            meta = _meta(o)
            key = f"{meta.get('namespace') or 'default'}/{meta.get('name')}"
            out[i] = f"pod {key} is left out: bound to node {node!r}, which does not exist"
    return out


def without_orphans(objects: Sequence[Mapping[str, Any]]) -> tuple[list[Mapping[str, Any]], list[str]]:
    """``objects`` less ``orphaned_pods``, and their warnings (sorted)."""
    left = orphaned_pods(objects)
    return [o for i, o in enumerate(objects) if i not in left], sorted(left.values())


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _group_of(obj: Mapping[str, Any]) -> str:
    api = str(obj.get("apiVersion", ""))
    return api.split("/")[0] if "/" in api else ""


def load_objects(objects: Iterable[Mapping[str, Any]], source: str = "<objects>", *,
                 cache: ParseCache | None = None, orphans: bool = False) -> LoadedInput:
    """The same as load_files for objects already in memory (the API adapter uses this). ``cache``: see
    ParseCache; it keeps the objects of this call only. The objects must not change while cached.
    ``orphans``: the pods of ``orphaned_pods`` are left out with its warnings instead of refused (a live
    cluster)."""
    objs = list(objects)
    warnings: list[str] = []
    if orphans:
        objs, warnings = without_orphans(objs)
    return build([RawObject(source, dict(o)) for o in objs], cache=cache, originals=objs, warnings=warnings)


ShareMap = Callable[[GpuShare | None, Resources], tuple[GpuShare | None, Resources]]
"""A pod's (or a VCJob template's) share and requests read again: the same objects when nothing changes."""


def _each_share(pods: dict[str, Pod], jobs: dict[str, VCJob], read: ShareMap) -> None:
    """``read`` applied to every pod's and VCJob template's share and requests, in place."""
    for key, pod in pods.items():
        share, requests = read(pod.gpu_share, pod.requests)
        if requests is not pod.requests or share is not pod.gpu_share:
            pods[key] = pod.model_copy(update={"gpu_share": share, "requests": requests})
    for key, job in jobs.items():
        tasks = []
        for t in job.tasks:
            share, requests = read(t.template.gpu_share, t.template.requests)
            if requests is not t.template.requests or share is not t.template.gpu_share:
                t = t.model_copy(update={"template": t.template.model_copy(
                    update={"gpu_share": share, "requests": requests})})
            tasks.append(t)
        if any(a is not b for a, b in zip(tasks, job.tasks, strict=True)):
            jobs[key] = job.model_copy(update={"tasks": tuple(tasks)})


def _hami_totals(pods: dict[str, Pod], jobs: dict[str, VCJob], devices: bool) -> None:
    """HAMi shares' requests as the totals count them (``vgpu.hami_totals``), on pods and VCJob templates."""
    _each_share(pods, jobs, lambda share, requests: vgpu.hami_totals(share, requests, devices))


def build(raws: Sequence[RawObject], *, cache: ParseCache | None = None,
          originals: Sequence[Mapping[str, Any]] | None = None, warnings: Sequence[str] = ()) -> LoadedInput:
    """The objects of ``raws`` checked and parsed; ``warnings``: the caller's, first among the snapshot's."""
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
    origin: dict[tuple[str, str], RawObject] = {}
    pod_raw: dict[str, RawObject] = {}
    tables: dict[str, dict[str, Any]] = {"Node": nodes, "Pod": pods, "PodGroup": groups,
                                         "PodDisruptionBudget": pdbs, "RepackRun": runs, "HyperNode": hyper,
                                         "Queue": queues, "PriorityClass": priority_classes, "Job": jobs,
                                         "ModelServing": servings}
    kept_parsed: ParseCache = {}
    configmap: dict[str, Any] | None = None
    configmaps: list[dict[str, Any]] = []
    for i, raw in enumerate(raws):
        parser = _PARSERS.get((raw.group, raw.kind))
        if parser is None:
            if raw.kind == "ConfigMap":
                if is_scheduler_configmap(raw.obj):
                    configmap = raw.obj
                else:
                    configmaps.append(raw.obj)
            continue  # kinds the planners do not use are skipped
        if cache is not None and originals is not None:
            original = originals[i]
            hit = cache.get(id(original))
            parsed = hit[1] if hit is not None and hit[0] is original else parser(raw)
            kept_parsed[id(original)] = (original, parsed)
        else:
            parsed = parser(raw)
        key: str = parsed.key if hasattr(parsed, "key") else parsed.name
        table = tables[raw.kind]
        ident = (raw.kind, key)
        if key in table:
            first = origin[ident]
            raise raw.error("metadata.name", f"duplicate object: also defined in {first.file}")
        origin[ident] = raw
        table[key] = parsed
        if raw.kind == "Pod":
            pod_raw[key] = raw
    warnings = list(warnings)
    where, found = _device_configmap(configmap, configmaps)
    device = vgpu.read_device_config(found)
    if found is not None and any(n.devices for n in nodes.values()):
        warnings.extend(device.warnings)
    _device_modes(nodes, where, device, warnings)
    if not device.memory_percentage:
        _unread_percentages(pods, jobs)
    for key, pod in sorted(pods.items()):
        if pod.occupying and pod.node_name not in nodes:
            raise pod_raw[key].error("spec.nodeName", f"bound to node {pod.node_name!r}, which is not in the snapshot")
    kept = {k: p for k, p in pods.items() if not p.node_name or p.node_name in nodes}
    _hami_totals(kept, jobs, any(n.devices for n in nodes.values()))
    for key, pod in kept.items():
        if pod.gpu_share is not None and pod.occupying and pod.node_name is not None:
            kept[key] = vgpu.pin(pod, nodes[pod.node_name], pod_raw[key].error)
    _check_model_range(nodes, kept, jobs, origin)
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
    _check_queue_depth(queues, origin)
    _check_hyper_node_depth(hyper, origin)
    if hyper:
        _resolve_tier_names(groups, "PodGroup", hyper, origin)
        _resolve_tier_names(jobs, "Job", hyper, origin)
    if cache is not None:
        cache.clear()
        cache.update(kept_parsed)
    snap = Snapshot(nodes=dict(sorted(nodes.items())), pods=dict(sorted(kept.items())),
                    pod_groups=dict(sorted(groups.items())), pdbs=dict(sorted(pdbs.items())),
                    hyper_nodes=dict(sorted(hyper.items())), queues=dict(sorted(queues.items())),
                    priority_classes=dict(sorted(priority_classes.items())), jobs=dict(sorted(jobs.items())),
                    model_servings=dict(sorted(servings.items())), warnings=tuple(warnings))
    return LoadedInput(snapshot=snap, runs=dict(sorted(runs.items())), scheduler_configmap=configmap)


def _device_configmap(scheduler_cm: Mapping[str, Any] | None, configmaps: Sequence[Mapping[str, Any]]
                      ) -> tuple[str, Mapping[str, Any] | None]:
    """Where the device-share plugin's configuration is (the scheduler's ConfigMap says, else Volcano's default)
    as ``namespace/name``, and that ConfigMap among ``configmaps`` (None when absent)."""
    ns, name = device_config_location(scheduler_cm, (vgpu.DEVICE_CONFIG_NAMESPACE, vgpu.DEVICE_CONFIG_NAME))
    return f"{ns}/{name}", next((cm for cm in configmaps if is_configmap(cm, ns, name)), None)


def _unread_percentages(pods: dict[str, Pod], jobs: dict[str, VCJob]) -> None:
    """Shares asking a memory percentage as Volcano's vGPU plugin reads them under a device configuration naming
    no percentage resource (``vgpu.without_unread_percentage``); in place, pods and VCJob templates."""
    _each_share(pods, jobs, lambda share, requests: (vgpu.without_unread_percentage(share, requests), requests))


def _device_modes(nodes: dict[str, Node], where: str, device: vgpu.DeviceConfig, warnings: list[str]) -> None:
    """Each registered device's sharing mode as Volcano's device-share plugin reads it (``vgpu.with_modes``), from
    the plugin's device configuration (ConfigMap ``where``, ``_device_configmap``); in place. A device left in MIG
    mode is said once: its MIG geometry is not modelled."""
    if not any(d.mode == "mig" for n in nodes.values() for d in n.devices):
        return
    if device.mig_problem and device.mig_problem not in warnings:  # an unreadable ConfigMap: said already
        warnings.append(device.mig_problem)
    for key in sorted(nodes):
        nodes[key] = vgpu.with_modes(nodes[key], device.mig_models)
    mig = sorted(k for k, n in nodes.items() if any(d.mode == "mig" for d in n.devices))
    if mig:
        warnings.append(f"{len(mig)} nodes register MIG devices with a geometry in ConfigMap {where} (e.g. "
                        f"{mig[0]}): MIG instances are not modelled, so no plan puts a pod on those devices (their "
                        f"running pods stay as they are)")


def _resolve_tier_names(objs: dict[str, Any], kind: str, hyper: dict[str, HyperNode],
                        origin: Mapping[tuple[str, str], RawObject]) -> None:
    """Each PodGroup's or VCJob's ``networkTopology.highestTierName`` turned into its tier
    (``resolve_tier_name``), in place; a name no HyperNode's tierName is, one InputError. Without
    HyperNodes (a file of VCJobs alone) names stay as written: the planner resolves them on its snapshot."""
    for key, obj in objs.items():
        try:
            if isinstance(obj, VCJob):
                objs[key] = resolve_job_tier_names(obj, hyper)
            else:
                objs[key] = resolve_group_tier_names(obj, hyper)
        except TierNameError as e:
            raise origin[(kind, key)].error(e.field, str(e)) from None


def _check_model_range(nodes: Mapping[str, Node], pods: Mapping[str, Pod], jobs: Mapping[str, VCJob],
                       origin: Mapping[tuple[str, str], RawObject]) -> None:
    """``limits.past_model_range`` over what reaches the planners' models: every node's allocatable, every
    live pod's requests, every VCJob's requests (each task's replicas times its template's)."""
    checks: list[tuple[str, str, str, list[tuple[str, Resources]]]] = [
        ("Node", "status.allocatable", "the nodes' allocatable adds up to",
         [(k, nodes[k].allocatable) for k in sorted(nodes)]),
        ("Pod", "spec.containers", "the live pods request",
         [(k, pods[k].requests) for k in sorted(pods) if pods[k].phase not in TERMINAL_PHASES]),
        ("Job", "spec.tasks", "the VCJobs request",
         [(k, _job_requests(jobs[k])) for k in sorted(jobs)])]
    for kind, path, what, items in checks:
        past = past_model_range(items)
        if past is not None:
            key, r, total = past
            field_path = f"{path}.{r}" if kind == "Node" else path
            raise origin[kind, key].error(field_path, f"{what} {format_milli(total)} of {r} with this one, past "
                                                      f"the planners' integer range (2^62 milli-units, limit "
                                                      f"MAX_TOTAL_MILLI)")


def _job_requests(job: VCJob) -> Resources:
    out: Resources = {}
    for t in job.tasks:
        for r, v in t.template.requests.items():
            out[r] = out.get(r, 0) + t.replicas * v
    return out


def _check_queue_depth(queues: Mapping[str, Queue], origin: Mapping[tuple[str, str], RawObject]) -> None:
    """Every ``spec.parent`` chain reaches ``root``, a missing queue or a cycle (``QueueTree`` reports
    those) within MAX_QUEUE_DEPTH steps."""
    for name in sorted(queues):
        cur: str | None = name
        seen: set[str] = set()
        for _ in range(MAX_QUEUE_DEPTH + 1):
            if cur is None or cur not in queues or cur in seen:
                break
            seen.add(cur)
            cur = queues[cur].parent_name
        else:
            raise origin["Queue", name].error("spec.parent", f"the queue hierarchy above it is deeper than "
                                                             f"{MAX_QUEUE_DEPTH} levels (limit MAX_QUEUE_DEPTH)")


def _check_hyper_node_depth(hyper: Mapping[str, HyperNode], origin: Mapping[tuple[str, str], RawObject]) -> None:
    """HyperNodes nest (through HyperNode members) at most MAX_HYPERNODE_DEPTH deep; a cycle is left
    to ``Topology``, which resolves it without looping."""
    height: dict[str, int] = {}
    for top in sorted(hyper):
        stack: list[tuple[str, bool]] = [(top, False)]
        active: set[str] = set()
        while stack:
            name, done = stack.pop()
            if done:
                active.discard(name)
                kids = [m.exact_name for m in hyper[name].members
                        if m.type == "HyperNode" and m.exact_name is not None and m.exact_name in hyper]
                height[name] = 1 + max((height.get(k, 0) for k in kids if k not in active), default=0)
                if height[name] > MAX_HYPERNODE_DEPTH:
                    raise origin["HyperNode", name].error("spec.members", f"HyperNodes nest deeper than "
                                                          f"{MAX_HYPERNODE_DEPTH} levels below it "
                                                          f"(limit MAX_HYPERNODE_DEPTH)")
                continue
            if name in height or name in active:
                continue
            active.add(name)
            stack.append((name, True))
            for m in hyper[name].members:
                child = m.exact_name
                if m.type == "HyperNode" and child is not None and child in hyper and child not in height:
                    stack.append((child, False))


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
    return _pick_run(loaded, run, ", ".join(sources), required=required)


def _pick_run(loaded: LoadedInput, run: str | None, where: str, *, required: bool) -> RepackRun | None:
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
