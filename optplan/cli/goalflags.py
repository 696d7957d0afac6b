"""The flags that give ``repack`` and ``compare`` a run's goals without editing its YAML: ``--admit``,
``--free-hypernodes``, ``--require-hypernodes``, ``--free-gpus`` with ``--gpu-model``; the run with them, and
errors naming them."""

from __future__ import annotations

import argparse
import copy
import re
from pathlib import Path
from typing import Any

from optplan.adapters.kubefile import LoadedInput
from optplan.errors import InputError
from optplan.models.repack import AdmitGoal, FreeGpusGoal, FreeHyperNodesGoal, RepackRun, namespaced_name
from optplan.solvers.goals.resolve import GOAL, resolve_goals

FREE_FLAG = "--free-hypernodes"
GPUS_FLAG = "--free-gpus"
MODEL_FLAG = "--gpu-model"
REQUIRE_FLAG = "--require-hypernodes"


def add_goal_arguments(p: argparse.ArgumentParser) -> None:
    """The flags that give a run goals without editing its YAML."""
    p.add_argument("--admit", action="append", type=parse_job_key, metavar="NAMESPACE/JOB",
                   help="make room for this pending gang (a VCJob, a PodGroup's VCJob, or a bare PodGroup) by "
                        "moving running pods; repeatable, added to the run's spec.goals[0].admit.jobs")
    g = p.add_mutually_exclusive_group()
    g.add_argument(FREE_FLAG, dest="free_hypernodes", type=parse_free_hypernodes, metavar="TIER:N",
                   help="free N HyperNodes of TIER (a number, or a HyperNode spec.tierName) of the resource, as "
                        "many as possible up to N (the run's freeHyperNodes, replaced)")
    g.add_argument(REQUIRE_FLAG, dest="free_hypernodes", type=parse_required_hypernodes, metavar="TIER:N",
                   help=f"as {FREE_FLAG}, but required: RequiredNodeBlocksNotMet when N cannot be freed")
    p.add_argument(GPUS_FLAG, dest="free_gpus", type=parse_count, metavar="N",
                   help="leave N whole GPUs free on one node (for a pending N-GPU pod) by moving the shares and "
                        "whole-card pods on its devices; needs nodes that list their GPUs (the run's freeGpus, "
                        "replaced)")
    p.add_argument(MODEL_FLAG, dest="gpu_model", metavar="MODEL",
                   help=f"with {GPUS_FLAG}: GPUs of this model (a part of the device type, e.g. A100)")


def parse_count(text: str) -> int:
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of GPUs, at least 1, got {text!r}")
    return int(text)


def with_gpu_goal(run: RepackRun, count: int | None, model: str | None) -> RepackRun:
    """The run with ``--free-gpus`` (and ``--gpu-model``) as its freeGpus goal, in ``raw`` too; alone: with
    admit or freeHyperNodes it is an error naming the flag."""
    if count is None:
        if model is not None:
            raise InputError(f"{MODEL_FLAG} names the GPUs of {GPUS_FLAG}; give both", field=MODEL_FLAG)
        return run
    goal = run.spec.goal
    if goal.admit is not None or run.spec.free_hyper_nodes is not None:
        raise InputError("freeGpus is a goal of its own: not with admit or freeHyperNodes",
                         obj=f"RepackRun/{run.name}", field=GPUS_FLAG)
    if model is not None and not model.strip():
        raise InputError("a GPU model is not empty", field=MODEL_FLAG)
    free = FreeGpusGoal(count=count, model=model.strip() if model is not None else None)
    raw = copy.deepcopy(run.raw)
    spec = raw.get("spec")
    if isinstance(spec, dict) and isinstance(spec.get("goals"), list) and isinstance(spec["goals"][0], dict):
        spec["goals"][0]["freeGpus"] = free.model_dump(by_alias=True, exclude_none=True, mode="json")
    new_goal = goal.model_copy(update={"free_gpus": free})
    return run.model_copy(update={"spec": run.spec.model_copy(update={"goals": (new_goal,)}), "raw": raw})


def parse_job_key(text: str) -> str:
    try:
        return namespaced_name(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


_TIER_COUNT = re.compile(r"(?P<tier>[^:]+):(?P<count>[0-9]{1,9})")


def _hypernodes(text: str, *, required: bool) -> FreeHyperNodesGoal:
    """``TIER:N``: N >= 1 HyperNodes of a tier given by number (>= 1) or by name."""
    m = _TIER_COUNT.fullmatch(text.strip())
    if m is None:
        raise argparse.ArgumentTypeError(f"expected TIER:N (e.g. 1:2 or rack:2), got {text!r}")
    tier, count = m.group("tier").strip(), int(m.group("count"))
    if count < 1:
        raise argparse.ArgumentTypeError(f"N must be at least 1, got {text!r}")
    if tier.isascii() and tier.isdigit():
        if int(tier) < 1:
            raise argparse.ArgumentTypeError(f"a tier is at least 1, got {text!r}")
        return FreeHyperNodesGoal(tier=int(tier), count=count, required=required)
    return FreeHyperNodesGoal(tier_name=tier, count=count, required=required)


def parse_free_hypernodes(text: str) -> FreeHyperNodesGoal:
    return _hypernodes(text, required=False)


def parse_required_hypernodes(text: str) -> FreeHyperNodesGoal:
    return _hypernodes(text, required=True)


def with_flag_goals(run: RepackRun, admit: list[str] | None, free: FreeHyperNodesGoal | None) -> RepackRun:
    """The run with the flags' goals: ``--admit`` jobs added to its admit goal (each once), the HyperNode
    flag replacing its freeHyperNodes. ``raw`` (what the output echoes) gets them too, so the printed
    RepackRun says what was planned. A run that asks for HyperNodes through spec.networkTopology keeps
    one way of asking: a HyperNode flag is then an error."""
    if not admit and free is None:
        return run
    goal = run.spec.goal
    update: dict[str, Any] = {}
    if admit:
        old = goal.admit or AdmitGoal(jobs=tuple(admit))
        update["admit"] = old.model_copy(update={"jobs": tuple(dict.fromkeys([*old.jobs, *admit]))})
    if free is not None:
        if run.spec.network_topology is not None:
            raise InputError("the run already asks for HyperNodes in spec.networkTopology: give freeHyperNodes "
                             "or networkTopology, not both", obj=f"RepackRun/{run.name}",
                             field=REQUIRE_FLAG if free.required else FREE_FLAG)
        update["free_hyper_nodes"] = free
    new_goal = goal.model_copy(update=update)
    raw = copy.deepcopy(run.raw)
    spec = raw.get("spec")
    if isinstance(spec, dict) and isinstance(spec.get("goals"), list) and isinstance(spec["goals"][0], dict):
        written = spec["goals"][0]
        if new_goal.admit is not None and admit:
            written["admit"] = {**(written.get("admit") or {}), "jobs": list(new_goal.admit.jobs)}
        if free is not None:
            written["freeHyperNodes"] = free.model_dump(by_alias=True, exclude_none=True, mode="json")
    return run.model_copy(update={"spec": run.spec.model_copy(update={"goals": (new_goal,)}), "raw": raw})


def resolve_run_goals(args: argparse.Namespace, loaded: LoadedInput, written: RepackRun, run: RepackRun) -> None:
    """Bad goals exit 2 before any planning. An error in a goal a flag gave names the flag, not the YAML
    field: the admit jobs past the run's own, and the HyperNodes when a flag replaced them."""
    if not run.spec.has_purpose:
        return
    file = args.run if args.run is not None and Path(args.run).is_file() else \
        ", ".join(args.snapshots or [getattr(args, "source", "cluster")])
    try:
        resolve_goals(loaded.snapshot, run, file=file)
    except InputError as e:
        flag = _flag_of(e.field or "", written, args.free_hypernodes)
        if flag is None:
            raise
        raise InputError(e.reason, obj=e.obj, field=flag) from None


def _flag_of(field: str, written: RepackRun, free: FreeHyperNodesGoal | None) -> str | None:
    """The flag that gave the goal a field path names, or None when the run's YAML gave it."""
    m = re.fullmatch(re.escape(f"{GOAL}.admit.jobs[") + r"(\d+)\]", field)
    own = written.spec.goal.admit
    if m is not None and int(m.group(1)) >= (len(own.jobs) if own is not None else 0):
        return "--admit"
    if free is not None and field.startswith(f"{GOAL}.freeHyperNodes"):
        return REQUIRE_FLAG if free.required else FREE_FLAG
    return None

