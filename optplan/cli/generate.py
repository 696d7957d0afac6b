"""``optplan generate``: write a seeded synthetic cluster snapshot with a RepackRun (``adapters.generate``
draws it). One flag per ``GenConfig`` field, its default GenConfig's; a flag left out keeps the default."""

from __future__ import annotations

import argparse
import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import fields
from typing import Any

from optplan.adapters.generate import GenConfig, generate
from optplan.adapters.output import to_yaml, write_atomic
from optplan.cli import options
from optplan.cli.options import non_negative, parse_dist, parse_share, positive
from optplan.errors import InputError

log = logging.getLogger("optplan")


def _int_list(text: str) -> tuple[int, ...]:
    try:
        out = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected integers separated by commas: {text!r}") from None
    if not out or any(v < 1 for v in out):
        raise argparse.ArgumentTypeError(f"expected positive integers: {text!r}")
    return out


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


_FLAG_HELP: dict[str, tuple[Callable[[str], Any], str, str]] = {
    "nodes": (positive, "N", "provider nodes"),
    "cards_per_node": (_int_list, "C[,C...]", "node sizes in cards, drawn uniformly"),
    "resource": (str, "R", "target resource"),
    "pools": (positive, "N", "node pools (label optplan.io/pool)"),
    "occupancy": (parse_share, "F", "fraction of cards requested by pods"),
    "pod_sizes": (parse_dist, "S:W,...", "cards per pod and their weights"),
    "gang_sizes": (parse_dist, "S:W,...", "pods per PodGroup and their weights"),
    "min_member_ratio": (parse_share, "F", "VCJob minMember = max(1, ceil(F × size))"),
    "cpu_per_card": (str, "Q", "cpu request per card of a GPU pod"),
    "memory_per_card": (str, "Q", "memory request per card of a GPU pod"),
    "node_cpu_per_card": (str, "Q", "node allocatable cpu per card"),
    "node_memory_per_card": (str, "Q", "node allocatable memory per card"),
    "cpu_pressure": (parse_share, "F", "share of node cpu taken by extra cpu-only pods"),
    "protected_share": (parse_share, "F", "share of workloads labelled repack.volcano.sh/protected=true"),
    "pdb_share": (parse_share, "F", "share of PodGroups with a PodDisruptionBudget"),
    "pending_share": (parse_share, "F", "share of GPU pods bound but Pending (unmovable)"),
    "non_volcano_share": (parse_share, "F", "share of workloads run by default-scheduler without a PodGroup"),
    "serving_share": (parse_share, "F", "share of Volcano workloads that are Kthena ModelServings"),
    "seed": (int, "N", "random seed"),
    "min_improvement": (non_negative, "PCT", "RepackRun goals[0].minFragImprovementPercent"),
    "max_pod_groups": (non_negative, "N", "RepackRun maxPerRun.podGroups"),
    "max_cards": (non_negative, "N", "RepackRun maxPerRun.resources[R]"),
    "rack_size": (non_negative, "N", "nodes per tier-1 HyperNode; 0 for none"),
    "racks_per_spine": (positive, "N", "tier-1 HyperNodes per tier-2 HyperNode"),
    "topology_share": (parse_share, "F",
                       "share of PodGroups and pending jobs with networkTopology (half hard, half soft)"),
    "queues": (non_negative, "N", "leaf team queues under tenant parents; 0 keeps PodGroups in default"),
    "pending_jobs": (non_negative, "N", "pending VCJobs to emit"),
}
_BOOL_FLAGS = {"tainted_pools": "taint every pool but pool-0",
               "daemonset_pods": "one kube-proxy pod per node",
               "priority_classes": "PriorityClasses high/normal/low on workloads and pending jobs"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Flags for every GenConfig field (defaults come from GenConfig), plus a required -o/--output FILE."""
    defaults = GenConfig()
    for f in fields(GenConfig):
        default = getattr(defaults, f.name)
        if f.name in _BOOL_FLAGS:
            p.add_argument(_flag(f.name), action=argparse.BooleanOptionalAction, default=None,
                           help=f"{_BOOL_FLAGS[f.name]} (default {'yes' if default else 'no'})")
            continue
        conv, metavar, text = _FLAG_HELP[f.name]
        shown = (",".join(f"{a}:{b:g}" for a, b in default) if f.name.endswith("_sizes")
                 else ",".join(map(str, default)) if isinstance(default, tuple) else default)
        p.add_argument(_flag(f.name), type=conv, default=None, metavar=metavar,
                       help=f"{text} (default {shown if shown is not None else 'unset'})")
    options.output_file(p, "FILE", "write the snapshot (a List) here")
    options.verbose(p)


def config_from_args(ns: argparse.Namespace) -> GenConfig:
    """The GenConfig for parsed flags; a flag left out keeps GenConfig's default."""
    given = {f.name: getattr(ns, f.name) for f in fields(GenConfig) if getattr(ns, f.name, None) is not None}
    try:
        return GenConfig(**given)
    except InputError as e:
        raise InputError(e.reason, field=_flag(e.field) if e.field else None) from None


def run(args: argparse.Namespace) -> str:
    objs = generate(config_from_args(args))
    write_atomic(args.output, to_yaml({"apiVersion": "v1", "kind": "List", "items": objs}))
    kinds = Counter(o["kind"] for o in objs)
    return (f"wrote {args.output}: " + ", ".join(f"{n} {k}s" for k, n in sorted(kinds.items())) + "\n")
