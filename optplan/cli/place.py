"""``optplan place SNAPSHOT... --job JOB.yaml [--job ...] [--solver greedy|cpsat|auto] [--time-limit S]
[--now RFC3339] [-o yaml|json|table]``: the arguments, the jobs to place, and the three output formats.

Jobs are the ``--job`` files' VCJobs and the snapshot's VCJobs with pods to place (waiting, or
running with a replica that does not run);
a ``--job`` VCJob replaces a snapshot VCJob of the same namespace/name. The planner is
``optplan.solvers.placement.place.place_jobs``; ``--now`` (RFC 3339) fixes the time victims
are priced at (how long each has run), so that outputs are reproducible. Victims are chosen as Volcano's
plugin tiers choose them (``solvers/placement/tiers.py``); ``--victim-tiers``, which once asked for that,
is accepted and ignored.
"""

from __future__ import annotations

import argparse

from pydantic import ValidationError

from optplan.adapters.documents import read_data
from optplan.adapters.kubefile import LoadedInput
from optplan.adapters.output import dump, table
from optplan.cli import options
from optplan.cli.options import parse_binpack
from optplan.cli.sources import jobs_to_place, load, scheduler_conf
from optplan.errors import InputError
from optplan.models.placement import PlacementPlan, SafePreemption
from optplan.solvers.core import registry
from optplan.solvers.placement.nodeorder import NodeStart
from optplan.solvers.placement.place import place_jobs


def add_arguments(p: argparse.ArgumentParser) -> None:
    options.snapshot_source(p)
    p.add_argument("--job", action="append", default=[], metavar="JOB.yaml",
                   help="a file of VCJobs to place (repeatable); the snapshot's pending VCJobs and bare PodGroups "
                        "are placed too")
    options.solver(p, registry.names("placement"), registry.DEFAULT, registry.HELP["placement"])
    options.time_limit(p, 10.0, "time limit of the exact solver (default 10)")
    p.add_argument("--binpack", type=parse_binpack, default=None, metavar="W",
                   help="binpack plugin weights, e.g. weight=10,cpu=5,memory=2,nvidia.com/gpu=10 "
                        "(default: --scheduler-conf's binpack arguments, else Volcano's, all 1)")
    options.scheduler_conf(p)
    options.workers(p)
    options.seed(p)
    options.now(p, "the time victims are priced at (newer pods are cheaper), e.g. 2025-06-01T12:00:00Z "
                   "(default: the current time)")
    options.deterministic(p, "the time limit counts CP-SAT's deterministic time, not wall seconds: the same input "
                             "gives the same plan on any machine and under any load (a wall-clock cap of 3x the "
                             "limit stays)")
    p.add_argument("--safe-preemption", default=None, metavar="seed|FILE",
                   help="safe preemption's rules against avalanche eviction: 'seed' (PDBs checked, a 300 s cooldown "
                        "per queue, grades Critical>High>Medium>Low two apart, approval above queue weight 50) or "
                        "a YAML/JSON file of them (pdb, cooldownSeconds, lastPreemption, levels, levelGap, "
                        "approvalWeight, approvalTimeoutSeconds); default: off, as Volcano")
    p.add_argument("--node-list-start", default=None, metavar="NODE",
                   help="where vc-scheduler's node list starts: its cache hands the nodes over by name, rotated at a "
                        "random slot each time it starts, and its walks keep that order within a score (which "
                        "node a tie goes to, where reclaim looks first); default: the first node by name")
    p.add_argument("--node-list", default=None, metavar="N1,N2,...",
                   help="vc-scheduler's whole node list, as its log shows it at -v 5 (the order its node workers "
                        "first synced the nodes, which may not be a rotation of the names); nodes it does not name "
                        "follow by name; instead of --node-list-start")
    p.add_argument("--hypernode-tie-seed", type=int, default=None, metavar="S",
                   help="where HyperNodes share the best score, vc-scheduler draws one at random: draw it too, "
                        "seeded with S (default: the first by name)")
    p.add_argument("--victim-tiers", action="store_true",
                   help="accepted and ignored: victims are always chosen as Volcano's plugin tiers do (priority, "
                        "gang, conformance, then drf for preempt or capacity for reclaim), node by node, just enough")
    options.timings(p, "record solver.wallSeconds")
    options.output_format(p, ("yaml", "json", "table"), "yaml")
    options.verbose(p, "log progress to stderr")


def load_safety(spec: str | None) -> SafePreemption | None:
    """``--safe-preemption``: None (off), ``seed``, or a file of ``SafePreemption``'s fields; a bad file is
    one InputError naming it and the field."""
    if spec is None:
        return None
    if spec == "seed":
        return SafePreemption.seed()
    docs = read_data(spec)
    if len(docs) != 1 or not isinstance(docs[0], dict):
        raise InputError("expected one mapping of safe preemption rules", file=spec, field="--safe-preemption")
    try:
        return SafePreemption.model_validate(docs[0])
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(x) for x in err["loc"]) or "(top)"
        raise InputError(err["msg"], file=spec, obj="SafePreemption", field=where) from None


def run(args: argparse.Namespace, loaded: LoadedInput | None = None) -> str:
    """The placement plan; ``loaded``: the snapshot already read (default: read as ``args`` says)."""
    loaded = load(args) if loaded is None else loaded
    conf = scheduler_conf(args, loaded)
    jobs = jobs_to_place(loaded.snapshot, args.job)
    safety = load_safety(args.safe_preemption)
    where = ", ".join(getattr(args, "snapshots", [])) or "the live cluster"
    start: NodeStart = args.node_list_start
    if start is not None and start not in loaded.snapshot.nodes:
        raise InputError(f"no node {start!r} in the snapshot", file=where, field="--node-list-start")
    if args.node_list is not None:
        if start is not None:
            raise InputError("give --node-list or --node-list-start, not both", field="--node-list")
        names = tuple(n.strip() for n in args.node_list.split(",") if n.strip())
        unknown = next((n for n in names if n not in loaded.snapshot.nodes), None)
        if unknown is not None or len(set(names)) != len(names):
            why = f"no node {unknown!r} in the snapshot" if unknown is not None else "a node named twice"
            raise InputError(why, file=where, field="--node-list")
        start = names
    try:
        plan = place_jobs(loaded.snapshot, jobs, solver=args.solver, time_limit=args.time_limit, workers=args.workers,
                     seed=args.seed, weights=args.binpack, now=args.now, deterministic=args.deterministic,
                     safety=safety, scheduler=conf, node_start=start,
                     tie_seed=args.hypernode_tie_seed)
    except InputError as e:  # the planner names the object and field; the files are known here
        if e.file is not None:
            raise
        sources = [*getattr(args, "snapshots", []), *args.job]
        raise InputError(e.reason, file=", ".join(sources) or "the live cluster", obj=e.obj, field=e.field) from None
    if args.output == "table":
        return placement_table(plan)
    return dump(plan.to_dict(timings=args.timings), args.output)


def placement_table(plan: PlacementPlan) -> str:
    rec = plan.solver
    admitted = sum(j.admitted for j in plan.jobs)
    text = f"Placement: {admitted} of {len(plan.jobs)} jobs admitted (solver {rec.name}, {rec.status})\n\n"
    rows = [["NAMESPACE", "JOB", "QUEUE", "ADMITTED", "HYPERNODE", "TIER", "PODS", "REASON"]]
    for j in plan.jobs:
        rows.append([j.namespace, j.name, j.queue, "yes" if j.admitted else "no", j.hyper_node or "-",
                     "-" if j.tier is None else str(j.tier), str(len(j.bindings)), j.reason])
    text += table(rows)
    bound = [(j, b) for j in plan.jobs for b in j.bindings]
    if bound:
        brows = [["NAMESPACE", "POD", "NODE"]] + [[j.namespace, b.pod_name(j.name), b.node] for j, b in bound]
        if any(b.devices is not None for _j, b in bound):  # the GPU devices, where the plan names them
            brows[0].append("DEVICES")
            for row, (_j, b) in zip(brows[1:], bound, strict=True):
                row.append("-" if b.devices is None else ",".join(map(str, b.devices)))
        text += "\nBindings:\n" + table(brows)
    victims = [(j, v, "chosen") for j in plan.jobs for v in j.victims]
    victims += [(j, v, "greedy") for j in plan.jobs for v in j.greedy_victims or ()]
    if victims:
        vrows = [["JOB", "VICTIM", "NODE", "REASON", "SET"]]
        vrows += [[j.key, f"{v.namespace}/{v.name}", v.node, v.reason, s] for j, v, s in victims]
        text += "\nVictims (SET greedy: the greedy's choice where the optimal one differs):\n" + table(vrows)
    gated = [[j.key, j.approval_required] for j in plan.jobs if j.approval_required]
    if gated:
        text += "\nApproval required before these evictions:\n" + table([["JOB", "WHY"], *gated])
    return text
