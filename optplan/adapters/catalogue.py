"""Node-group catalogues (``optplan provision --catalogue FILE``): ``NodeGroup`` objects (the shape in
``optplan.models.provision``), and Cluster API MachineDeployments as Cluster Autoscaler's clusterapi
provider reads them, read with the snapshot files' limits; a bad field is one line naming the file, the
object and the field.

A MachineDeployment is a group when it carries the autoscaler's annotations: the maximum size
(``cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size``; maxCount = max − ``spec.replicas``), the
scale-from-zero capacity (``capacity.cluster-autoscaler.kubernetes.io/{cpu,memory,ephemeral-disk,maxPods,
gpu-count}``, GPUs as ``nvidia.com/gpu``; ``.../labels`` as ``k=v,...`` and ``.../taints`` as
``k=v:Effect,...``), and optplan's ``provision.volcano.sh/price`` (required) and
``provision.volcano.sh/hyper-node``. ``--write`` then patches its ``spec.replicas``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from optplan.adapters.documents import ReadBudget, read_documents
from optplan.adapters.kubefile import RawObject, parse_model
from optplan.models.provision import NodeGroup

KIND = "NodeGroup"
API_VERSION = "provision.volcano.sh/v1alpha1"


def parse_node_group(raw: RawObject) -> NodeGroup:
    obj = raw.obj
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
        raise raw.error("metadata.name", "required: the group's name")
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        raise raw.error("spec", "required: a mapping with price, maxCount and allocatable")
    for f in ("price", "maxCount", "allocatable"):
        if spec.get(f) is None:
            raise raw.error(f"spec.{f}", "required field is missing")
    data: dict[str, Any] = {**spec, "name": meta["name"]}
    return parse_model(raw, NodeGroup, data, "spec")


MAX_SIZE = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size"
CAPACITY = "capacity.cluster-autoscaler.kubernetes.io/"
PRICE = "provision.volcano.sh/price"
HYPER_NODE = "provision.volcano.sh/hyper-node"
CAPACITY_RESOURCES = {"cpu": "cpu", "memory": "memory", "ephemeral-disk": "ephemeral-storage", "maxPods": "pods",
                      "gpu-count": "nvidia.com/gpu"}


def _pairs(raw: RawObject, text: str, field: str) -> list[tuple[str, str]]:
    out = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        k, sep, v = part.partition("=")
        if not sep or not k:
            raise raw.error(field, f"expected key=value pairs separated by commas, got {part!r}")
        out.append((k, v))
    return out


def parse_machine_deployment(raw: RawObject) -> NodeGroup:
    """A Cluster API MachineDeployment with Cluster Autoscaler's annotations (module docstring)."""
    obj = raw.obj
    meta: dict[str, Any] = obj["metadata"] if isinstance(obj.get("metadata"), dict) else {}
    ann: dict[str, Any] = meta["annotations"] if isinstance(meta.get("annotations"), dict) else {}
    where = "metadata.annotations."
    for key in (MAX_SIZE, PRICE):
        if not isinstance(ann.get(key), str):
            raise raw.error(where + key, "required annotation is missing (a string)")
    if not ann[MAX_SIZE].isdigit():
        raise raw.error(where + MAX_SIZE, f"expected a whole number, got {ann[MAX_SIZE]!r}")
    spec: dict[str, Any] = obj["spec"] if isinstance(obj.get("spec"), dict) else {}
    replicas = spec.get("replicas", 0)
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0:
        raise raw.error("spec.replicas", f"expected a whole number, got {replicas!r}")
    alloc = {res: ann[CAPACITY + key] for key, res in CAPACITY_RESOURCES.items() if CAPACITY + key in ann}
    labels = dict(_pairs(raw, ann.get(CAPACITY + "labels", ""), where + CAPACITY + "labels"))
    taints = []
    for k, v in _pairs(raw, ann.get(CAPACITY + "taints", ""), where + CAPACITY + "taints"):
        value, _, effect = v.rpartition(":")
        taints.append({"key": k, "value": value, "effect": effect})
    data = {"name": meta.get("name"), "price": ann[PRICE], "maxCount": max(int(ann[MAX_SIZE]) - replicas, 0),
            "hyperNode": ann.get(HYPER_NODE), "labels": labels, "taints": taints, "allocatable": alloc,
            "target": {"kind": "MachineDeployment", "name": meta.get("name"), "namespace": meta.get("namespace"),
                       "replicas": replicas}}
    if not alloc:
        raise raw.error(where + CAPACITY + "cpu", "no capacity annotation: the group's node size is unknown")
    return parse_model(raw, NodeGroup, data, where.rstrip("."))


def load_catalogue(paths: Sequence[str]) -> list[NodeGroup]:
    """Every NodeGroup (and autoscaled MachineDeployment) of the files, in file order; any other kind is
    refused."""
    budget = ReadBudget()
    out = []
    for path in paths:
        for doc in read_documents(path, budget):
            raw = RawObject(path, doc)
            if raw.kind == "MachineDeployment":
                out.append(parse_machine_deployment(raw))
            elif raw.kind == KIND:
                out.append(parse_node_group(raw))
            else:
                raise raw.error("kind", f"expected {KIND} ({API_VERSION}) or an autoscaled MachineDeployment, "
                                        f"got {raw.kind or 'none'!r}")
    return out
