"""``optplan place SNAPSHOT... --job JOB.yaml [--job ...] [--solver greedy|cpsat|auto] [--time-limit S]
[--now RFC3339] [-o yaml|json|table]``: the arguments, the jobs to place, and the three output formats.

Jobs are the ``--job`` files' VCJobs and the snapshot's VCJobs with pods to place (waiting, or
running with a replica that does not run);
a ``--job`` VCJob replaces a snapshot VCJob of the same namespace/name. The planner is
``optplan.solvers.placement.place.place_jobs``; ``--now`` (RFC 3339) fixes the time victims
are priced at (how long each has run), so that outputs are reproducible.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from optplan.adapters.kubefile import LoadedInput, load_files
from optplan.adapters.output import dump, table
from optplan.cli import options
from optplan.cli.sources import load
from optplan.errors import InputError
from optplan.models.placement import BinpackWeights, PlacementPlan
from optplan.models.queues import VCJob
from optplan.models.snapshot import Snapshot
from optplan.solvers.core import registry
from optplan.solvers.placement.jobs import jobs_to_place as waiting_jobs
from optplan.solvers.placement.place import place_jobs

MAX_BINPACK_WEIGHT = 10_000
"""Volcano's binpack weights are small integers (default 1); larger ones would only overflow the exact
model's integer objective."""


def parse_binpack(text: str) -> BinpackWeights:
    """``weight=10,cpu=5,memory=2,nvidia.com/gpu=10``: Volcano's binpack arguments (others default to 1)."""
    fields: dict[str, int] = {}
    extra: dict[str, int] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        name, sep, value = part.partition("=")
        v = value.strip()
        w = int(v) if v.isascii() and v.isdigit() and len(v) <= 6 else -1
        if not sep or not name or not 0 <= w <= MAX_BINPACK_WEIGHT:
            raise argparse.ArgumentTypeError(f"expected NAME=WEIGHT with an integer weight in [0, "
                                             f"{MAX_BINPACK_WEIGHT}], got {part!r}")
        if name in ("weight", "cpu", "memory"):
            fields[name] = w
        else:
            extra[name] = w
    return BinpackWeights(**fields, resources=extra)


def add_arguments(p: argparse.ArgumentParser) -> None:
    options.snapshot_source(p)
    p.add_argument("--job", action="append", default=[], metavar="JOB.yaml",
                   help="a file of VCJobs to place (repeatable); the snapshot's pending VCJobs are placed too")
    options.solver(p, registry.names("placement"), registry.DEFAULT, registry.HELP["placement"])
    options.time_limit(p, 10.0, "time limit of the exact solver (default 10)")
    p.add_argument("--binpack", type=parse_binpack, default=BinpackWeights(), metavar="W",
                   help="binpack plugin weights, e.g. weight=10,cpu=5,memory=2,nvidia.com/gpu=10 "
                        "(default: Volcano's, all 1)")
    options.workers(p)
    options.seed(p)
    options.now(p, "the time victims are priced at (newer pods are cheaper), e.g. 2025-06-01T12:00:00Z "
                   "(default: the current time)")
    options.deterministic(p, "the time limit counts CP-SAT's deterministic time, not wall seconds: the same input "
                             "gives the same plan on any machine and under any load (a wall-clock cap of 3x the "
                             "limit stays)")
    options.timings(p, "record solver.wallSeconds")
    options.output_format(p, ("yaml", "json", "table"), "yaml")
    options.verbose(p, "log progress to stderr")


def jobs_to_place(snapshot: Snapshot, job_files: Sequence[str]) -> list[VCJob]:
    """The ``--job`` files' VCJobs and the snapshot's VCJobs with pods to place (the planner's rule:
    ``optplan.solvers.placement.jobs.jobs_to_place``)."""
    jobs = {j.key: j for j in waiting_jobs(snapshot)}
    if job_files:
        jobs.update(load_files(job_files).snapshot.jobs)
    if not jobs:
        raise InputError("no VCJob to place: pass --job JOB.yaml or include a pending VCJob in a snapshot",
                         field="--job")
    return [jobs[k] for k in sorted(jobs)]


def run(args: argparse.Namespace, loaded: LoadedInput | None = None) -> str:
    """The placement plan; ``loaded``: the snapshot already read (default: read as ``args`` says)."""
    loaded = load(args) if loaded is None else loaded
    jobs = jobs_to_place(loaded.snapshot, args.job)
    try:
        plan = place_jobs(loaded.snapshot, jobs, solver=args.solver, time_limit=args.time_limit, workers=args.workers,
                     seed=args.seed, weights=args.binpack, now=args.now, deterministic=args.deterministic)
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
        text += "\nBindings:\n" + table(brows)
    victims = [(j, v, "chosen") for j in plan.jobs for v in j.victims]
    victims += [(j, v, "greedy") for j in plan.jobs for v in j.greedy_victims or ()]
    if victims:
        vrows = [["JOB", "VICTIM", "NODE", "REASON", "SET"]]
        vrows += [[j.key, f"{v.namespace}/{v.name}", v.node, v.reason, s] for j, v, s in victims]
        text += "\nVictims (SET greedy: the greedy's choice where the optimal one differs):\n" + table(vrows)
    return text
