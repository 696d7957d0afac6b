"""optplan's public Python API: what a controller imports.

Stable names (everything else in the package may change between versions):

- ``load_snapshot(*paths)``, ``snapshot_from_objects(objects)``, ``read_cluster(kubeconfig, context)``
  give a ``Cluster`` (the snapshot and the RepackRuns in it);
- ``plan_repack(cluster, run)`` plans a RepackRun (DryRun or the planning step of an Execute) and returns
  the status to write, validated;
- ``place_jobs(cluster, jobs)`` places pending VCJobs under queues and network topology, under the cluster's
  vc-scheduler configuration (its volcano-scheduler ConfigMap, read with a live cluster or found in the
  snapshot files) or the one given (``scheduler_conf``: ``resolve_scheduler_conf``);
- ``size_payg(cluster, jobs)`` sizes the pay-as-you-go queues for their pending jobs (the Queue patches to
  apply and to return to, the spot capabilities that follow);
- ``should_hold(cluster, queue, priority_class=...)`` is the large-job submission throttle's decision: whether
  a new submission to the queue waits at the platform now, and until when at most (a ``Hold``);
- ``nominate(cluster, run, relocation, replacement)`` and ``verify(cluster_after, run)`` are the two calls
  an Execute needs while and after it moves pods.

Every error is an ``OptplanError``: ``InputError`` for bad input (names file, object and field),
``KubeError`` / ``ConflictError`` for the API server, ``PlanInvalidError`` for a bug (a plan that broke
a rule; never returned, always raised). Nothing here writes to a cluster unless asked by name
(``write_status``). Results are deterministic for the same input and options (one worker by default).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from optplan.adapters import kube
from optplan.adapters.execute_io import execute_status
from optplan.adapters.execute_io import relocation as parse_relocation
from optplan.adapters.kubefile import LoadedInput, load_files, load_objects
from optplan.adapters.output import repack_run_document, status_dict
from optplan.adapters.schedconf import configmap_scheduler_conf, parse_scheduler_text
from optplan.errors import ConflictError, InputError, KubeError, OptplanError, PlanInvalidError
from optplan.models.execute import Nomination, Relocation, Verification
from optplan.models.payg import PaygSizing
from optplan.models.placement import BinpackWeights, PlacementPlan, SafePreemption
from optplan.models.queues import VCJob
from optplan.models.repack import RepackRun, Weights
from optplan.models.schedconf import SchedulerConf
from optplan.models.snapshot import Snapshot
from optplan.solvers.core import registry
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.execute import steps as execute_mod
from optplan.solvers.goals.run import plan_run as _plan_run
from optplan.solvers.placement import jobs as placement_mod
from optplan.solvers.placement import place as place_mod
from optplan.solvers.placement import throttle as throttle_mod
from optplan.solvers.placement.throttle import Hold
from optplan.solvers.provision import payg as payg_mod
from optplan.solvers.quota.times import parse_now
from optplan.solvers.repack.base import planner_names
from optplan.solvers.repack.run import RepackOutcome

log = logging.getLogger(__name__)

__all__ = [
    "Cluster",
    "ConflictError",
    "Hold",
    "InputError",
    "KubeError",
    "Nomination",
    "OptplanError",
    "PaygSizing",
    "PlacementResult",
    "PlanInvalidError",
    "Relocation",
    "RepackResult",
    "SchedulerConf",
    "Verification",
    "Weights",
    "load_snapshot",
    "nominate",
    "place_jobs",
    "plan_repack",
    "read_cluster",
    "resolve_scheduler_conf",
    "should_hold",
    "size_payg",
    "snapshot_from_objects",
    "verify",
    "write_status",
]


@dataclass(frozen=True)
class Cluster:
    """One cluster at one moment: the snapshot the planners read and the RepackRuns found with it;
    ``scheduler_configmap``: the volcano-scheduler ConfigMap read with it (a live cluster's, or one in the
    snapshot files), None when there was none; ``live``: read from a cluster (its absent ConfigMap is said)."""

    snapshot: Snapshot
    runs: dict[str, RepackRun] = field(default_factory=dict)
    source: str = "<objects>"
    scheduler_configmap: dict[str, Any] | None = None
    live: bool = False

    @classmethod
    def _of(cls, loaded: LoadedInput, source: str, *, live: bool = False) -> Cluster:
        return cls(snapshot=loaded.snapshot, runs=loaded.runs, source=source,
                   scheduler_configmap=loaded.scheduler_configmap, live=live)

    def scheduler_conf(self) -> SchedulerConf | None:
        """The configuration the cluster's ConfigMap holds (its warnings in ``warnings``), None without one.
        A ConfigMap vc-scheduler could not read is an InputError naming it."""
        if self.scheduler_configmap is None:
            return None
        return configmap_scheduler_conf(self.scheduler_configmap, self.source)


def load_snapshot(*paths: str | Path) -> Cluster:
    """Read snapshot files (``kubectl get -o yaml|json`` output; lists, multi-document streams)."""
    return Cluster._of(load_files(list(paths)), ", ".join(str(p) for p in paths))


def snapshot_from_objects(objects: Sequence[Mapping[str, Any]], source: str = "<objects>", *,
                          orphans: bool = False) -> Cluster:
    """The same for objects already in memory, shaped as the API server returns them. ``orphans``: a pod
    bound to a node that does not exist is left out with a warning (``Cluster.snapshot.warnings``)
    instead of refused, as for a live cluster (``kubefile.orphaned_pods``)."""
    for i, obj in enumerate(objects):
        if not isinstance(obj, Mapping):
            raise InputError(f"expected an object (a mapping), got {type(obj).__name__}", file=source,
                             field=f"objects[{i}]")
    return Cluster._of(load_objects(objects, source, orphans=orphans), source)


def read_cluster(kubeconfig: str | None = None, context: str | None = None, *, timeout: float = kube.REQUEST_TIMEOUT,
                 deadline: float | None = kube.API_DEADLINE) -> Cluster:
    """A live snapshot through the official client (in-cluster config when running in a pod). ``timeout``:
    the total deadline of each API request; ``deadline``: of all of them together, retries included. A pod
    bound to a node that no longer exists is left out with a warning (``snapshot.warnings``), as
    ``optplan snapshot`` and the controller leave it out. The volcano-scheduler ConfigMap is read too
    (``Cluster.scheduler_conf``): the planners then decide under the cluster's own configuration."""
    with kube.connect(kubeconfig, context, timeout=timeout, deadline=deadline) as client:
        objects = client.snapshot_objects()
        configmap = client.scheduler_configmap()
        devices = client.device_configmap(configmap)
        source = f"cluster {client.host}"
    objects.extend(cm for cm in (configmap, devices) if cm is not None)  # read as a snapshot file's are
    cluster = snapshot_from_objects(objects, source=source, orphans=True)
    return replace(cluster, scheduler_configmap=configmap, live=True)


def resolve_scheduler_conf(cluster: Cluster, conf: SchedulerConf | str | None = None) -> SchedulerConf:
    """The configuration to plan under: ``conf`` (a ``SchedulerConf``, or the text of vc-scheduler's YAML or of
    the volcano-scheduler ConfigMap) wins; else the cluster's ConfigMap (``Cluster.scheduler_conf``); else
    seed 002's. The configuration's warnings are logged, one line each (on the ``optplan.api`` logger)."""
    if isinstance(conf, SchedulerConf):
        return conf
    found = parse_scheduler_text(conf, "schedulerConf") if conf is not None else cluster.scheduler_conf()
    if found is None:
        return SchedulerConf()
    for w in found.warnings:
        log.warning("%s: %s", found.source, w)
    return found


def _run(cluster: Cluster, run: RepackRun | Mapping[str, Any] | str | None) -> RepackRun:
    if isinstance(run, RepackRun):
        return run
    if isinstance(run, Mapping):
        loaded = load_objects([run], "<run>")
        if len(loaded.runs) != 1:
            raise InputError("expected a RepackRun object (apiVersion repack.volcano.sh/v1alpha1)", file="<run>")
        return next(iter(loaded.runs.values()))
    if run is None:
        if len(cluster.runs) == 1:
            return next(iter(cluster.runs.values()))
        raise InputError(f"{len(cluster.runs)} RepackRuns in the snapshot: name one", file=cluster.source,
                         obj="RepackRun", field="run")
    if run not in cluster.runs:
        raise InputError(f"no RepackRun named {run!r}", file=cluster.source, obj=f"RepackRun/{run}", field="run")
    return cluster.runs[run]


@dataclass(frozen=True)
class RepackResult:
    """A planned RepackRun: ``status`` is the ``status`` subresource as JSON (camelCase), ``document``
    the whole object as ``optplan repack -o yaml`` prints it; ``outcome`` holds the typed pieces."""

    run: RepackRun
    reason: str
    status: dict[str, Any]
    document: dict[str, Any]
    outcome: RepackOutcome

    @property
    def freed_nodes(self) -> tuple[str, ...]:
        return self.outcome.status.plan.freed_nodes


def plan_repack(cluster: Cluster, run: RepackRun | Mapping[str, Any] | str | None = None, *,
                solver: str = "auto", time_limit: float = 30.0, workers: int = 1, seed: int = 0,
                weights: Weights | None = None, timings: bool = False, deterministic: bool = False,
                scheduler_conf: SchedulerConf | str | None = None) -> RepackResult:
    """Plan ``run`` on the cluster: measure fragmentation, choose nodes to vacate and where each moved pod
    goes, validate the plan independently and build the status the seed shows; a run with admit /
    freeHyperNodes goals is planned by the goal planners (``optplan.solvers.goals``). ``deterministic``: limits
    count work instead of wall-clock seconds, so one input gives one plan on any machine (see
    ``optplan.solvers.core.clock``). ``scheduler_conf``: the configuration the goals' placements follow
    (``resolve_scheduler_conf``)."""
    r = _run(cluster, run)
    options = PlanOptions(time_limit=time_limit, workers=workers, seed=seed, deterministic=deterministic)
    known = sorted({*planner_names(), *registry.names("goals")})
    if solver not in known:
        raise InputError(registry.unknown_message(solver, known), field="solver")
    out = _plan_run(cluster.snapshot, r, solver=solver, options=options, weights=weights,
                    scheduler=resolve_scheduler_conf(cluster, scheduler_conf))
    return RepackResult(run=r, reason=out.reason, status=status_dict(out.status, timings=timings),
                        document=repack_run_document(r, out.status, timings=timings), outcome=out)


@dataclass(frozen=True)
class PlacementResult:
    """Placed jobs: ``document`` has the shape of ``optplan place -o json``."""

    plan: PlacementPlan
    document: dict[str, Any]


def place_jobs(cluster: Cluster, jobs: Sequence[VCJob | Mapping[str, Any]] | None = None, *, solver: str = "auto",
               time_limit: float = 10.0, workers: int = 1, seed: int = 0, weights: BinpackWeights | None = None,
               now: str | None = None, timings: bool = False, deterministic: bool = False,
               safety: SafePreemption | None = None,
               scheduler_conf: SchedulerConf | str | None = None) -> PlacementResult:
    """Place VCJobs (objects or dicts); without ``jobs``, the snapshot's VCJobs with pods to place: pending
    ones, and running ones with replicas that do not run (they join their running gang). ``safety``: safe
    preemption's rules (off by default). ``scheduler_conf``: the vc-scheduler configuration to decide under
    (``resolve_scheduler_conf``: given, else the cluster's ConfigMap, else seed 002's)."""
    if jobs is None:
        chosen = placement_mod.jobs_to_place(cluster.snapshot)
    else:
        dicts = [j for j in jobs if isinstance(j, Mapping)]
        parsed = load_objects(dicts, "<jobs>").snapshot.jobs if dicts else {}
        chosen = [j for j in jobs if isinstance(j, VCJob)] + [parsed[k] for k in sorted(parsed)]
    if not chosen:
        raise InputError("no VCJob to place", file=cluster.source, field="jobs")
    if solver not in registry.names("placement"):
        raise InputError(registry.unknown_message(solver, registry.names("placement")), field="solver")
    plan = place_mod.place_jobs(cluster.snapshot, chosen, solver=solver, time_limit=time_limit,
                                    workers=workers, seed=seed, weights=weights, now=now,
                                    deterministic=deterministic, safety=safety,
                                    scheduler=resolve_scheduler_conf(cluster, scheduler_conf))
    return PlacementResult(plan=plan, document=plan.to_dict(timings=timings))


def size_payg(cluster: Cluster, jobs: Sequence[VCJob | Mapping[str, Any]] | None = None, *,
              resource: str = "nvidia.com/gpu", now: str | None = None) -> PaygSizing:
    """The pay-as-you-go queue values for the pending payg jobs (``jobs``, objects or dicts; default the
    snapshot's jobs with pods to place): capability = deserved to set now and when they finish, the spot
    capabilities by the seed's formula, and the Queue patches (``apply``, ``release``)."""
    chosen: list[VCJob] | None = None
    if jobs is not None:
        dicts = [j for j in jobs if isinstance(j, Mapping)]
        parsed = load_objects(dicts, "<jobs>").snapshot.jobs if dicts else {}
        chosen = [j for j in jobs if isinstance(j, VCJob)] + [parsed[k] for k in sorted(parsed)]
    return payg_mod.size_payg(cluster.snapshot, chosen, resource, now=parse_now(now))


def should_hold(cluster: Cluster, queue: str, *, priority_class: str | None = None, priority: int | None = None,
                now: str | None = None, timeout_seconds: float = throttle_mod.TIMEOUT_SECONDS,
                large_priority: int | None = None) -> Hold:
    """The large-job submission throttle (seed 002 §6.4.2): whether a new submission of ``priority_class``
    (or of the value ``priority``; one of the two) to ``queue`` waits at the platform at ``now`` (RFC 3339,
    default the current time), and until when at most. ``large_priority``: the large-job threshold (default
    the snapshot's ``large-job`` PriorityClass, else 800)."""
    if (priority_class is None) == (priority is None):
        raise InputError("give the submission's priority class or its priority value, one of the two",
                         field="--priority-class")
    snap = cluster.snapshot
    value = priority if priority is not None else throttle_mod.priority_of_class(snap, str(priority_class))
    rule = throttle_mod.Throttle(large_priority, timeout_seconds)
    return throttle_mod.should_hold(snap, queue, value, parse_now(now), rule)


def nominate(cluster: Cluster, run: RepackRun | Mapping[str, Any] | str | None,
             relocation: Relocation | Mapping[str, Any] | str, replacement: str | None = None) -> Nomination:
    """The node to write into the replacement pod's ``status.nominatedNodeName`` (or none).

    ``relocation`` is the run's ``status.relocations[]`` item of the evicted pod (its
    ``plannedNodeName``), or the victim's ``name`` / ``namespace/name`` to look it up in the run's
    relocations, then in its ``status.plan.moves``; ``replacement`` the replacement pod, ``name`` (in the
    relocation's namespace) or ``namespace/name`` (default: the victim's name, as a VCJob or a StatefulSet
    recreates it), which must be in the snapshot."""
    r = _execute_run(cluster, run, "nominate")
    status = execute_status(r, cluster.source)
    if isinstance(relocation, str):
        rel = _find_relocation(cluster, r, relocation)
    else:
        rel = relocation if isinstance(relocation, Relocation) else parse_relocation(relocation)
    name = replacement or rel.victim_pod_name
    key = name if "/" in name else f"{rel.namespace}/{name}"
    if key not in cluster.snapshot.pods:
        raise InputError("the replacement pod is not in the snapshot", file=cluster.source, obj=f"Pod/{key}",
                         field="replacement")
    return execute_mod.nominate(cluster.snapshot, r, status, key, rel.planned_node_name)


def _execute_run(cluster: Cluster, run: RepackRun | Mapping[str, Any] | str | None, call: str) -> RepackRun:
    """The run, which must be an Execute run: a DryRun's plan is never carried out, so there is nothing
    to nominate for or to verify."""
    r = _run(cluster, run)
    if r.spec.mode != "Execute":
        raise InputError(f"{call} applies to Execute runs; this run is a {r.spec.mode} (set spec.mode: Execute)",
                         file=cluster.source, obj=f"RepackRun/{r.name}", field="spec.mode")
    return r


def _find_relocation(cluster: Cluster, run: RepackRun, victim: str) -> Relocation:
    status = execute_status(run, cluster.source)
    ns, _, name = victim.rpartition("/")
    for rel in status.relocations:
        if rel.victim_pod_name == name and (not ns or rel.namespace == ns):
            return rel
    for g in status.plan.moves:
        for p in g.pods:
            if p.name == name and (not ns or g.namespace == ns):
                return Relocation(namespace=g.namespace, victim_pod_name=p.name, planned_node_name=p.to_node,
                                  planned_device=execute_mod.planned_device(cluster.snapshot, p.to_node, p.to_devices))
    raise InputError(f"pod {victim} is neither in status.relocations nor in status.plan.moves",
                     file=cluster.source, obj=f"RepackRun/{run.name}", field="status.relocations")


def verify(cluster_after: Cluster, run: RepackRun | Mapping[str, Any] | str | None = None, *,
           time_limit: float = 10.0) -> Verification:
    """``status.result``, the final condition and ``relocations[].placement.actualNodeName`` of an Execute
    run, measured on the snapshot after execution."""
    r = _execute_run(cluster_after, run, "verify")
    status = execute_status(r, cluster_after.source)
    if not status.plan.freed_nodes and not status.plan.moves and not status.relocations:
        raise InputError("the run has no plan to verify (status.plan.freedNodes and moves are empty)",
                         file=cluster_after.source, obj=f"RepackRun/{r.name}", field="status.plan")
    return execute_mod.verify(cluster_after.snapshot, r, status, time_limit=time_limit)


def write_status(run_name: str, status: Mapping[str, Any], resource_version: str, *,
                 kubeconfig: str | None = None, context: str | None = None, timeout: float = kube.REQUEST_TIMEOUT,
                 deadline: float | None = kube.API_DEADLINE) -> dict[str, Any]:
    """Patch the RepackRun's status subresource, failing with ConflictError when the object changed
    since ``resource_version`` (someone else wrote: re-plan on the fresh state)."""
    with kube.connect(kubeconfig, context, timeout=timeout, deadline=deadline) as client:
        return client.patch_repack_run_status(run_name, dict(status), resource_version)
