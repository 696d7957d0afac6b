"""A RepackRun's goals read against the snapshot (issue 15): the pending gangs an ``admit`` goal names,
and the tier and HyperNodes a ``freeHyperNodes`` (or ``networkTopology``) goal names.

Every planner of the family starts from ``ResolvedGoals``, so the rules below are written once:

- A gang is a VCJob with pods to place (placement's ``jobs_to_place``: waiting, or running with a replica
  that does not run), or a bare PodGroup with pending pods (no VCJob owns it: ``jobs.pod_group_job``).
  ``jobs`` names it by its key or by the key of a PodGroup it owns (the PodGroup's controller
  ownerReference, Repack's ``vcjob_of``); ``selector`` matches the VCJob's (the PodGroup's) labels; ``queues``
  its queue. The three are a union; each gang once, sorted by key.
- A named job must exist and be pending: a goal naming a finished job is a mistake worth saying. A
  selector or a queue matching no pending gang is not: a standing goal ("admit every gang pending in
  queue Q") may match none today. A queue must exist, though (``default`` always does, as in Volcano).
- ``tierName`` names a tier by the ``spec.tierName`` Volcano's HyperNodes carry; the tier's HyperNodes are
  all HyperNodes of that tier. The tier must exist, and ``count`` may not exceed its HyperNodes.

Bad input raises InputError naming the file, the run and the field (``spec.goals[0].admit.jobs[1]``).
"""

from __future__ import annotations

from dataclasses import dataclass

from optplan.errors import InputError
from optplan.models.queues import QueueTree, VCJob
from optplan.models.repack import AdmitGoal, FreeHyperNodesGoal, RepackRun
from optplan.models.snapshot import Snapshot
from optplan.solvers.binpack.hyperfrag import tiers as hypernode_tiers
from optplan.solvers.placement.jobs import ACTIVE_PHASES, WAITING_PHASES, jobs_to_place, pod_group_job
from optplan.solvers.repack.rules import vcjob_of

GOAL = "spec.goals[0]"
"""The field path of the run's one goal."""
LISTED = 12
"""An error lists at most this many known names (queues, tier names)."""


@dataclass(frozen=True)
class ResolvedGoals:
    jobs: tuple[VCJob, ...]
    """The pending gangs to admit, each once, sorted by key (empty without an admit goal)."""
    free_tier: int | None
    """The tier of the HyperNodes to free (tierName resolved); None without that goal."""
    free_count: int
    """How many HyperNodes of it to free; 0 without that goal."""
    free_required: bool
    """The count must be met (RequiredNodeBlocksNotMet otherwise), not only sought."""
    hyper_nodes: tuple[str, ...]
    """The HyperNodes of ``free_tier``, sorted (empty without that goal)."""


def resolve_goals(snap: Snapshot, run: RepackRun, *, file: str | None = None) -> ResolvedGoals:
    """The run's goals against ``snap``; bad input (see the module docstring) raises InputError."""
    where = _Where(file, f"RepackRun/{run.name}")
    goal = run.spec.goal
    jobs = _admitted(snap, goal.admit, where) if goal.admit is not None else ()
    free = run.spec.free_hyper_nodes
    if free is None:
        return ResolvedGoals(jobs=jobs, free_tier=None, free_count=0, free_required=False, hyper_nodes=())
    own = goal.free_hyper_nodes is not None
    path = f"{GOAL}.freeHyperNodes" if own else "spec.networkTopology"
    count_field = "count" if own else "requiredNodeBlocks"
    nt = None if own else run.spec.network_topology
    tier = _tier(snap, free, where, path, None if nt is None else nt.tier_field)
    members = tuple(sorted(h.name for h in snap.hyper_nodes.values() if h.tier == tier))
    if nt is not None and nt.node_block_size is not None:
        _whole_blocks(snap, members, nt.node_block_size, tier, where)
    if free.count > len(members):
        raise where.error(f"{path}.{count_field}",
                          f"{count_field} {free.count} > {len(members)} HyperNodes of tier {tier}")
    return ResolvedGoals(jobs=jobs, free_tier=tier, free_count=free.count, free_required=free.required,
                         hyper_nodes=members)


@dataclass(frozen=True)
class _Where:
    file: str | None
    obj: str

    def error(self, field: str, reason: str) -> InputError:
        return InputError(reason, file=self.file, obj=self.obj, field=field)


def _admitted(snap: Snapshot, admit: AdmitGoal, where: _Where) -> tuple[VCJob, ...]:
    pending = {j.key: j for j in jobs_to_place(snap)}
    out: dict[str, VCJob] = {}
    for i, key in enumerate(admit.jobs):
        job = _named_job(snap, key, where, f"{GOAL}.admit.jobs[{i}]")
        if job.key not in pending:
            named = key if key == job.key else f"{key} (VCJob {job.key})"
            why = ("all its pods are placed" if job.phase in WAITING_PHASES | ACTIVE_PHASES
                   else f"its phase is {job.phase}")
            raise where.error(f"{GOAL}.admit.jobs[{i}]", f"{named} is not pending: {why}")
        out[job.key] = job
    if admit.selector is not None:
        out.update((k, j) for k, j in pending.items() if admit.selector.matches(j.labels))
    if admit.queues:
        known = QueueTree(snap.queues).queues
        for i, q in enumerate(admit.queues):
            if q not in known:
                raise where.error(f"{GOAL}.admit.queues[{i}]", f"no queue {q} in the snapshot (queues: "
                                                                f"{_listed(sorted(known))})")
        wanted = set(admit.queues)
        out.update((k, j) for k, j in pending.items() if j.queue in wanted)
    return tuple(out[k] for k in sorted(out))


def _named_job(snap: Snapshot, key: str, where: _Where, field: str) -> VCJob:
    """The VCJob ``key`` names: itself, or the one owning the PodGroup of that key."""
    job = snap.jobs.get(key)
    if job is not None:
        return job
    group = snap.pod_groups.get(key)
    if group is None:
        raise where.error(field, f"no VCJob or PodGroup {key} in the snapshot")
    owner = vcjob_of(snap, group)
    if owner is not None:
        return owner
    bare = pod_group_job(group, snap)
    if bare is None:
        raise where.error(field, f"PodGroup {key}: its subGroupPolicy cannot be read as partitions of its tasks")
    return bare


def _tier(snap: Snapshot, goal: FreeHyperNodesGoal, where: _Where, path: str, field: str | None = None) -> int:
    """The tier the goal names, by number or by the HyperNodes' tierName; it must exist. ``field``: the
    name the tier was given under (networkTopology's hyperNodeTier, hyperNodeTierName)."""
    known = hypernode_tiers(snap)
    if goal.tier_name is None:
        assert goal.tier is not None  # the model requires exactly one of the two
        if goal.tier not in known:
            raise where.error(f"{path}.{field or 'tier'}", f"no HyperNode has tier {goal.tier}; tiers: "
                                                           f"{', '.join(map(str, known)) or 'none'}")
        return goal.tier
    path_name = f"{path}.{field or 'tierName'}"
    named = sorted({h.tier for h in snap.hyper_nodes.values() if h.tier_name == goal.tier_name})
    if not named:
        names = sorted({h.tier_name for h in snap.hyper_nodes.values() if h.tier_name is not None})
        listed = f"tier names: {_listed(names)}" if names else "no HyperNode has a tierName"
        raise where.error(path_name, f"no HyperNode has tierName {goal.tier_name}; {listed}")
    if len(named) > 1:
        raise where.error(path_name, f"tierName {goal.tier_name} names HyperNodes of tiers "
                                              f"{', '.join(map(str, named))}: give the tier by number")
    return named[0]


def _whole_blocks(snap: Snapshot, members: tuple[str, ...], size: int, tier: int, where: _Where) -> None:
    """networkTopology's node block must be a whole HyperNode of the tier: optplan frees whole HyperNodes,
    so a block of ``size`` nodes is one only when every HyperNode of the tier has ``size`` nodes."""
    sizes = {h: len(snap.topology.members.get(h, frozenset())) for h in members}
    other = sorted({n for n in sizes.values() if n != size})
    if not other:
        return
    shown = ", ".join(f"{h} has {n}" for h, n in sorted(sizes.items()) if n != size)
    whole = f"write nodeBlockSize: {other[0]}, or leave it out" if len(set(sizes.values())) == 1 \
        else "leave nodeBlockSize out"
    raise where.error("spec.networkTopology.nodeBlockSize", (
        f"blocks of {size} node(s) are not whole HyperNodes of tier {tier} ({_cut(shown)}): optplan frees "
        f"whole HyperNodes only; {whole} to free requiredNodeBlocks whole HyperNodes of the tier"))


def _cut(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _listed(names: list[str]) -> str:
    shown = ", ".join(names[:LISTED])
    return shown + (f" (+{len(names) - LISTED} more)" if len(names) > LISTED else "") if names else "none"
