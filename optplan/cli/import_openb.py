"""``optplan import openb``: turn the Alibaba openb GPU trace (node and pod CSVs) into a snapshot with a
RepackRun (``adapters.openb`` imports it, as an ``ImportConfig`` built here from the flags says)."""

from __future__ import annotations

import argparse

from optplan.adapters.openb import ImportConfig, import_openb
from optplan.adapters.output import to_yaml, write_atomic
from optplan.cli import options
from optplan.cli.options import parse_dist, parse_share
from optplan.errors import InputError


def _percent(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 <= v <= 100:
        raise argparse.ArgumentTypeError(f"must be within 0..100: {text!r}")
    return v


def _positive(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return v


_FLAGS = {"fill": "--fill", "departures": "--departures", "seed": "--seed", "gang_sizes": "--gang-sizes",
          "min_member_ratio": "--min-member-ratio", "max_passes": "--max-passes"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    """``optplan import SOURCE``: the one source, openb."""
    sources = p.add_subparsers(dest="source", required=True)
    add_openb_arguments(sources.add_parser("openb", help="Alibaba openb GPU trace (node and pod CSVs) -> snapshot"))


def add_openb_arguments(p: argparse.ArgumentParser) -> None:
    """Flags of ``optplan import openb`` (defaults come from ImportConfig), with -o/--output and -v."""
    d = ImportConfig()
    p.add_argument("--nodes", required=True, metavar="NODES.csv", help="node list: sn,cpu_milli,memory_mib,gpu,model")
    p.add_argument("--pods", required=True, metavar="PODS.csv",
                   help="pod list: name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec][,creation_time]")
    p.add_argument("--fill", type=_percent, required=True, metavar="P",
                   help="replay whole-GPU pods until P%% of the GPUs are taken")
    p.add_argument("--departures", type=parse_share, default=d.departures, metavar="D",
                   help=f"share of the placed pods that then depart, seeded (default {d.departures:g})")
    p.add_argument("--seed", type=int, default=d.seed, metavar="S", help=f"random seed (default {d.seed})")
    p.add_argument("--gang-sizes", type=parse_dist, default=d.gang_sizes, metavar="S:W,...",
                   help="pods per PodGroup and their weights (default "
                        + ",".join(f"{s}:{w:g}" for s, w in d.gang_sizes) + ")")
    p.add_argument("--min-member-ratio", type=parse_share, default=d.min_member_ratio, metavar="F",
                   help=f"minMember = max(1, ceil(F × size)) (default {d.min_member_ratio:g})")
    p.add_argument("--max-passes", type=_positive, default=d.max_passes, metavar="N",
                   help=f"replays of the trace at most, to reach the fill (default {d.max_passes})")
    p.add_argument("--shared", action="store_true",
                   help="keep the fractional-GPU pods as shares of one device (Volcano's vGPU annotations)")
    options.output_file(p, "FILE", "write the snapshot (a List) here")
    options.verbose(p)


def config_from_args(ns: argparse.Namespace) -> ImportConfig:
    try:
        return ImportConfig(fill=ns.fill, departures=ns.departures, seed=ns.seed, gang_sizes=tuple(ns.gang_sizes),
                            min_member_ratio=ns.min_member_ratio, max_passes=ns.max_passes,
                            shared=ns.shared)
    except InputError as e:
        raise InputError(e.reason, field=_FLAGS.get(e.field or "", e.field)) from None


def run(args: argparse.Namespace) -> str:
    """Import, write ``args.output`` atomically, and return a one-line summary."""
    cfg = config_from_args(args)
    objs, s = import_openb(args.nodes, args.pods, cfg)
    write_atomic(args.output, to_yaml({"apiVersion": "v1", "kind": "List", "items": objs}))
    return (f"wrote {args.output}: {s['nodes']} nodes ({s['gpus']} GPUs), {s['pods']} pods in {s['pod_groups']} "
            f"PodGroups ({s['gangs']} gangs); fill {s['fill_reached_percent']:g}% in {s['passes']} pass(es), "
            f"{s['skipped']} skipped, {s['departed']} departed, now {s['fill_percent']:g}%; "
            f"{s['fractional_left_out']} fractional-GPU and {s['cpu_only_left_out']} cpu-only pods left out\n")
