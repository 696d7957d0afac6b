"""``optplan provision SNAPSHOT... --catalogue FILE [--job JOB.yaml] [--threshold N] [--solver S] [-o F]
[--write FILE]``: the nodes to add from a catalogue of node groups so that pending gangs place (seed 004
§5.2), the gangs no group can host (§4.3), and a patch of NodePool limits or MachineDeployment replicas.

The jobs are ``optplan place``'s (``--job`` files and the snapshot's pending VCJobs); with ``--threshold``
also, per queue whose usable free room of ``--resource`` is below it, a placeholder gang of that size (the
seed's daily rule). The planner is ``optplan.solvers.provision.run.plan_provision``.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from typing import Any

from optplan.adapters.catalogue import load_catalogue
from optplan.adapters.output import dump, table, to_yaml, write_atomic
from optplan.cli import options, sources
from optplan.cli.sources import jobs_to_place
from optplan.errors import InputError
from optplan.models.placement import BinpackWeights
from optplan.models.provision import NodeGroup, ProvisionPlan, price_text
from optplan.models.quantity import format_amount, to_milli
from optplan.models.snapshot import Snapshot
from optplan.solvers.core import registry
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.placement.jobs import jobs_to_place as waiting_jobs
from optplan.solvers.provision.problem import headroom_jobs
from optplan.solvers.provision.run import DEFAULT_RESOURCE, plan_provision
from optplan.solvers.quota.times import parse_now

log = logging.getLogger(__name__)


def add_arguments(p: argparse.ArgumentParser) -> None:
    options.snapshot_source(p)
    p.add_argument("--catalogue", action="append", default=[], required=True, metavar="FILE",
                   help="a file of NodeGroup objects: the nodes that may be added (repeatable; docs/provision.md)")
    p.add_argument("--job", action="append", default=[], metavar="JOB.yaml",
                   help="a file of VCJobs to serve (repeatable); the snapshot's pending VCJobs are served too")
    p.add_argument("--threshold", default=None, metavar="N",
                   help="seed 004's daily rule: keep N of --resource free per queue (a placeholder gang for each "
                        "queue below it)")
    p.add_argument("--resource", default=DEFAULT_RESOURCE, metavar="R",
                   help=f"the resource of --threshold and of the seed formula peer (default {DEFAULT_RESOURCE})")
    options.solver(p, registry.names("provision"), registry.DEFAULT, registry.HELP["provision"])
    options.time_limit(p, 10.0, "time limit of the exact model (default 10)")
    p.add_argument("--binpack", type=options.parse_binpack, default=BinpackWeights(), metavar="W",
                   help="binpack plugin weights, as for optplan place (default: Volcano's, all 1)")
    options.workers(p)
    options.seed(p)
    options.deterministic(p, "the time limit counts CP-SAT's deterministic time, not wall seconds (a wall-clock "
                             "cap of 3x the limit stays)")
    options.now(p, "the time of the snapshot (default: now)")
    p.add_argument("--write", default=None, metavar="FILE",
                   help="also write the patch to apply (NodePool spec.limits, MachineDeployment spec.replicas) "
                        "for `kubectl apply --server-side -f FILE`")
    options.timings(p, "record solver.wallSeconds")
    options.output_format(p, ("yaml", "json", "table"), "table")
    options.verbose(p, "log progress to stderr")


def threshold_milli(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        v = to_milli(text)
    except ValueError:
        raise InputError(f"not a quantity: {text!r}", field="--threshold") from None
    if v <= 0:
        raise InputError(f"must be positive, got {text!r}", field="--threshold")
    return v


def run(args: argparse.Namespace) -> str:
    loaded = sources.load(args)
    snap = loaded.snapshot
    groups = load_catalogue(args.catalogue)
    threshold = threshold_milli(args.threshold)
    jobs = headroom_jobs(snap, args.resource, threshold) if threshold is not None else []
    if args.job or waiting_jobs(snap) or threshold is None:
        jobs += jobs_to_place(snap, args.job)
    options = PlanOptions(time_limit=args.time_limit, workers=args.workers, seed=args.seed,
                          deterministic=args.deterministic)
    try:
        plan = plan_provision(snap, jobs, groups, args.solver, options, weights=args.binpack,
                              resource=args.resource, threshold=threshold, now=parse_now(args.now))
    except InputError as e:  # the planner names the object and field; the files are known here
        if e.file is not None:
            raise
        raise InputError(e.reason, file=", ".join([*args.snapshots, *args.catalogue, *args.job]) or "the live cluster",
                         obj=e.obj, field=e.field) from None
    if args.write:
        write_atomic(args.write, to_yaml(patch_document(snap, groups, plan)))
    if args.output == "table":
        return provision_table(plan)
    return dump(plan.to_dict(timings=args.timings), args.output)


def current_nodes(snap: Snapshot, g: NodeGroup) -> list[str]:
    """The snapshot's nodes of the group: those carrying every label of its template (none: no node)."""
    if not g.labels:
        return []
    return [n for n, node in sorted(snap.nodes.items()) if all(node.labels.get(k) == v for k, v in g.labels.items())]


def patch_document(snap: Snapshot, groups: Sequence[NodeGroup], plan: ProvisionPlan) -> dict[str, Any]:
    """A List of partial objects for ``kubectl apply --server-side``: for each group with nodes to add and a
    ``target``, a Karpenter NodePool's ``spec.limits`` raised to the resources of its current nodes (the
    snapshot's nodes with the group's labels) plus the new ones, or a Cluster API MachineDeployment's
    ``spec.replicas`` set to its current replicas (read from the MachineDeployment, else its nodes in the
    snapshot) plus the new ones (Cluster Autoscaler's clusterapi provider scales node groups there)."""
    items: list[dict[str, Any]] = []
    counts = plan.counts
    for g in groups:
        n = counts.get(g.name, 0)
        if n == 0:
            continue
        if g.target is None:
            log.warning("node group %s: %d node(s) to add but no spec.target to patch", g.name, n)
            continue
        have = current_nodes(snap, g)
        if g.target.kind == "NodePool":
            limits: dict[str, int] = {}
            for name in have:
                for r, v in snap.nodes[name].allocatable.items():
                    limits[r] = limits.get(r, 0) + v
            for r, v in g.allocatable.items():
                limits[r] = limits.get(r, 0) + n * v
            items.append({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": g.target.name},
                          "spec": {"limits": {r: format_amount(r, v) for r, v in sorted(limits.items())
                                              if r != "pods"}}})
        else:
            meta: dict[str, Any] = {"name": g.target.name}
            if g.target.namespace:
                meta["namespace"] = g.target.namespace
            items.append({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineDeployment", "metadata": meta,
                          "spec": {"replicas": (len(have) if g.target.replicas is None else g.target.replicas) + n}})
    return {"apiVersion": "v1", "kind": "List", "items": items}


def provision_table(plan: ProvisionPlan) -> str:
    rec = plan.solver
    bound = "" if rec.best_bound is None else f", cost bound {price_text(rec.best_bound)}"
    n_jobs = len(plan.placement.jobs)
    text = (f"Provision: {len(plan.served)} of {n_jobs} gangs served, {sum(plan.counts.values())} node(s) added, "
            f"cost {price_text(plan.cost)} (solver {rec.name}, {rec.status}{bound})\n\n")
    rows = [["GROUP", "PRICE", "ADD", "COST", "HYPERNODE", "NODES"]]
    for g in plan.groups:
        rows.append([g.name, str(price_text(g.price)), str(g.count), str(price_text(g.cost)), g.hyper_node or "-",
                     ",".join(g.nodes) or "-"])
    text += table(rows)
    jrows = [["JOB", "QUEUE", "SERVED", "HYPERNODE", "NODES", "REASON"]]
    unserved = {u.job: u.reason for u in plan.unserved}
    unserved |= {d.job: "no node group can host it (Deadlocks below)" for d in plan.deadlocks}
    for jp in plan.placement.jobs:
        nodes = ",".join(sorted({b.node for b in jp.bindings})) or "-"
        jrows.append([jp.key, jp.queue, "yes" if jp.admitted else "no", jp.hyper_node or "-", nodes,
                      "" if jp.admitted else unserved.get(jp.key, jp.reason)])
    text += "\nGangs:\n" + table(jrows)
    if plan.deadlocks:
        drows = [["JOB", "QUEUE", "TASK", "WHY"]] + [[d.job, d.queue, d.task, d.reason] for d in plan.deadlocks]
        text += ("\nDeadlocks (seed 004 §4.3: an autoscaler would add nodes Volcano never schedules these onto):\n"
                 + table(drows))
    if plan.peers:
        prows = [["PEER", "COST", "NODES", "SERVED"]]
        for p in plan.peers:
            nodes = ",".join(f"{k}={v}" for k, v in p.nodes.items()) or "-"
            prows.append([p.name, str(price_text(p.cost)), nodes, str(len(p.served))])
        text += "\nPeers (their nodes, under the same allocate):\n" + table(prows)
    return text
