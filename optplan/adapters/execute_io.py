"""Read the Execute-time parts of a RepackRun (``status.plan``, ``status.relocations``) and relocation
objects, with errors that name the file, the object and the field."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from optplan.adapters.kubefile import RawObject, parse_model
from optplan.errors import InputError
from optplan.models.execute import ExecuteStatus, Relocation
from optplan.models.journal import RunHead, RunStatus
from optplan.models.repack import RepackRun

M = TypeVar("M", RunHead, RunStatus)


def execute_status(run: RepackRun, source: str = "<run>") -> ExecuteStatus:
    """The run's status as an ExecuteStatus (empty when the run has no status yet)."""
    status = run.raw.get("status")
    if status is None:
        return ExecuteStatus()
    raw = RawObject(source, run.raw)
    if not isinstance(status, dict):
        raise raw.error("status", f"expected a mapping, got {type(status).__name__}")
    parsed: ExecuteStatus = parse_model(raw, ExecuteStatus, status, "status")
    return parsed


def run_status(obj: Mapping[str, Any], source: str) -> RunStatus:
    """A RepackRun object's status as its controller reads it (empty when it has none yet), with an error
    that names the field when it cannot be read."""
    return _status(obj, source, RunStatus)


def run_head(obj: Mapping[str, Any], source: str) -> RunHead:
    """``run_status``'s phase and times alone (the rest is not read)."""
    return _status(obj, source, RunHead)


def _status(obj: Mapping[str, Any], source: str, model: type[M]) -> M:
    status = obj.get("status")
    if status is None:
        return model()
    raw = RawObject(source, dict(obj))
    if not isinstance(status, dict):
        raise raw.error("status", f"expected a mapping, got {type(status).__name__}")
    parsed: M = parse_model(raw, model, status, "status")
    return parsed


def relocation(data: Any, source: str = "<request>", where: str = "relocation") -> Relocation:
    """One ``status.relocations[]`` item."""
    if not isinstance(data, Mapping):
        raise InputError(f"expected a mapping, got {type(data).__name__}", file=source, field=where)
    raw = RawObject(source, {"kind": "Relocation", "metadata": {"name": data.get("victimPodName", "?"),
                                                           "namespace": data.get("namespace")}})
    parsed: Relocation = parse_model(raw, Relocation, dict(data), where)
    return parsed
