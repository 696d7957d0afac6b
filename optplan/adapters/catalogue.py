"""Node-group catalogues (``optplan provision --catalogue FILE``): ``NodeGroup`` objects (the shape in
``optplan.models.provision``), read with the snapshot files' limits; a bad field is one line naming the
file, the object and the field."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from optplan.adapters.kubefile import RawObject, ReadBudget, parse_model, read_documents
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


def load_catalogue(paths: Sequence[str]) -> list[NodeGroup]:
    """Every NodeGroup of the files, in file order; any other kind is refused."""
    budget = ReadBudget()
    out = []
    for path in paths:
        for doc in read_documents(path, budget):
            raw = RawObject(path, doc)
            if raw.kind != KIND:
                raise raw.error("kind", f"expected {KIND} ({API_VERSION}), got {raw.kind or 'none'!r}")
            out.append(parse_node_group(raw))
    return out
