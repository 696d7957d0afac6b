"""Every named planner, keyed by (family, name): the one list the CLI (choices and help), the plan server
(validation and its OpenAPI enums), the Python API, the bench, the replay and the planners' own dispatch read.

A planner's code is a class named as ``"module:Class"`` and imported only when asked for (``load``), so that
reading the names costs no OR-Tools, MILP or numpy import. Every planning family's classes are
``optplan.solvers.core.planner.Planner``: ``plan(problem, options, hint=None) -> result`` (the plan and its
solver record), each ``auto`` that module's ``Auto`` of the family's greedy and exact planner. Families:

- ``repack``: ``RepackProblem`` -> ``PlanResult`` (``optplan.solvers.repack.base.Planner``);
- ``placement``: queue placement of pending VCJobs with preempt/reclaim victims, on a ``Context`` ->
  ``PlacementResult``: ``greedy`` is Volcano's allocate, ``cpsat`` the exact model hinted with it, ``auto``
  the better of the two (ties to the greedy);
- ``goals``: planners of RepackRuns with admit / freeHyperNodes goals (``optplan.solvers.goals``), on a
  ``GoalProblem`` -> ``GoalResult``: ``greedy``, ``cpsat`` (the joint model), ``kai`` (KAI-scheduler's
  consolidation, a peer), ``milp`` (the joint model's PuLP/HiGHS twin) and ``auto``;
- ``baselines`` (``BASELINES``): Repack's peers (``optplan.solvers.baselines.repack``), planners on a
  ``RepackProblem`` that follow their own algorithm, not optplan's rules (``optplan repack --baseline``,
  ``optplan compare``, the bench and the replay);
- ``sim`` (``SIM``): the online simulation's placement policies (``optplan.experiments.sim.online``), each
  a class made for one run on its cluster (``OnlinePolicy``), not a planner of a snapshot;
- ``sim-shared`` (``SIM_SHARED``): the same for every pod on GPU devices (shares, whole GPUs, cpu-only;
  ``optplan.experiments.sim.shared``): the FGD paper's peers and optplan's policies, each made for one run on
  a ``DevCluster`` (``choose(pod, fits) -> (node, devices)``).
- ``provision``: nodes to add from a catalogue so that pending gangs place (``optplan.solvers.provision``),
  on a ``provision.problem.Problem``: ``greedy``, ``cpsat`` (the exact model, with a proven bound), ``auto``
  (composed by ``optplan.solvers.provision.run``: the best of the greedy, the exact plan and the peers' nodes
  completed), and the peers ``seed`` and ``least-waste``;

To add a planner: one ``Entry`` here (the order is the order users see), and the class it names.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Entry:
    family: str
    name: str
    target: str
    """``module:Class`` of the planner's code."""


DEFAULT = "auto"
"""Every planning family's default planner."""
BASELINES = "baselines"
SIM = "sim"
SIM_SHARED = "sim-shared"

_ENTRIES: tuple[Entry, ...] = (
    Entry("repack", "greedy", "optplan.solvers.repack.greedy:GreedyPlanner"),
    Entry("repack", "cpsat", "optplan.solvers.repack.exact.cpsat:CpSatPlanner"),
    Entry("repack", "milp", "optplan.solvers.repack.exact.milp:MilpPlanner"),
    Entry("repack", "greedy-fast", "optplan.solvers.repack.greedy:FastGreedyPlanner"),
    Entry("repack", "auto", "optplan.solvers.repack.auto:AutoPlanner"),
    Entry("placement", "greedy", "optplan.solvers.placement.place:GreedyPlacer"),
    Entry("placement", "cpsat", "optplan.solvers.placement.cpsat:CpSatPlacer"),
    Entry("placement", "auto", "optplan.solvers.placement.place:AutoPlacer"),
    Entry("goals", "greedy", "optplan.solvers.goals.greedy:GreedyGoalPlanner"),
    Entry("goals", "cpsat", "optplan.solvers.goals.cpsat:CpSatGoalPlanner"),
    Entry("goals", "kai", "optplan.solvers.baselines.kai:KaiPlanner"),
    Entry("goals", "milp", "optplan.solvers.goals.milp:MilpGoalPlanner"),
    Entry("goals", "auto", "optplan.solvers.goals.run:AutoGoalPlanner"),
    Entry(BASELINES, "karpenter", "optplan.solvers.baselines.repack:KarpenterBaseline"),
    Entry(BASELINES, "karpenter-balanced", "optplan.solvers.baselines.repack:KarpenterBalancedBaseline"),
    Entry(BASELINES, "cluster-autoscaler", "optplan.solvers.baselines.repack:ClusterAutoscalerBaseline"),
    Entry(BASELINES, "descheduler", "optplan.solvers.baselines.repack:DeschedulerBaseline"),
    Entry(SIM, "greedy", "optplan.experiments.sim.online:BinpackPolicy"),
    Entry(SIM, "best-fit", "optplan.experiments.sim.online:BestFitPolicy"),
    Entry(SIM, "random", "optplan.experiments.sim.online:RandomPolicy"),
    Entry(SIM, "cpsat-batch", "optplan.experiments.sim.online:CpSatBatchPolicy"),
    Entry(SIM_SHARED, "random", "optplan.experiments.sim.shared:RandomPolicy"),
    Entry(SIM_SHARED, "dotprod", "optplan.experiments.sim.shared:DotProdPolicy"),
    Entry(SIM_SHARED, "gpu-clustering", "optplan.experiments.sim.shared:GpuClusteringPolicy"),
    Entry(SIM_SHARED, "gpu-packing", "optplan.experiments.sim.shared:GpuPackingPolicy"),
    Entry(SIM_SHARED, "best-fit", "optplan.experiments.sim.shared:BestFitPolicy"),
    Entry(SIM_SHARED, "fgd", "optplan.experiments.sim.shared:FgdPolicy"),
    Entry(SIM_SHARED, "binpack", "optplan.experiments.sim.shared:BinpackPolicy"),
    Entry(SIM_SHARED, "frag-aware", "optplan.experiments.sim.shared:FragAwarePolicy"),
    Entry(SIM_SHARED, "frag-spread", "optplan.experiments.sim.shared:FragSpreadPolicy"),
    Entry(SIM_SHARED, "frag-batch", "optplan.experiments.sim.lookahead:FragBatchPolicy"),
    Entry(SIM_SHARED, "frag-hole", "optplan.experiments.sim.shared:FragHolePolicy"),
    Entry(SIM_SHARED, "frag-admit", "optplan.experiments.sim.shared:FragAdmitPolicy"),
    Entry(SIM_SHARED, "frag-hole-batch", "optplan.experiments.sim.lookahead:FragHoleBatchPolicy"),
    Entry(SIM_SHARED, "frag-defer", "optplan.experiments.sim.lookahead:FragDeferPolicy"),
    Entry("provision", "greedy", "optplan.solvers.provision.greedy:GreedyProvisioner"),
    Entry("provision", "cpsat", "optplan.solvers.provision.cpsat:CpSatProvisioner"),
    Entry("provision", "auto", "optplan.solvers.provision.run:AutoProvisioner"),
    Entry("provision", "seed", "optplan.solvers.provision.peers:SeedFormulaPeer"),
    Entry("provision", "least-waste", "optplan.solvers.provision.peers:LeastWastePeer"),
)

HELP = {
    "repack": "auto (default): greedy, then CP-SAT hinted with it, the better plan wins",
    "goals": "for runs with admit / freeHyperNodes goals: auto (default: greedy, then the joint CP-SAT model "
             "hinted with it, the better plan wins), greedy, cpsat, milp (its PuLP/HiGHS twin), kai (KAI-style "
             "consolidation, a peer)",
    "placement": "greedy (Volcano's allocate), cpsat (exact, lexicographic), auto (default: both, the better "
                 "plan wins)",
    "provision": "auto (default: the greedy, the exact model and the peers' nodes completed, the plan serving "
                 "most gangs at least cost wins), greedy, cpsat (with a proven bound), seed (seed 004's formula, "
                 "a peer), least-waste (Cluster Autoscaler's expander, a peer)",
}
"""The ``--solver`` help of each family's command."""


def families() -> tuple[str, ...]:
    return tuple(dict.fromkeys(e.family for e in _ENTRIES))


def names(family: str) -> tuple[str, ...]:
    """The family's planner names in registration order."""
    return tuple(e.name for e in _ENTRIES if e.family == family)


def default_first(family: str) -> tuple[str, ...]:
    """The names with the default first (the plan server's order: its first choice is the default)."""
    return (DEFAULT, *(n for n in names(family) if n != DEFAULT))


def unknown_message(name: object, choices: tuple[str, ...] | list[str]) -> str:
    return f"unknown solver {name!r}; choose from {', '.join(choices)}"


def entry(family: str, name: str) -> Entry:
    for e in _ENTRIES:
        if e.family == family and e.name == name:
            return e
    raise ValueError(unknown_message(name, names(family)))


def load(family: str, name: str) -> Any:
    """The class registered under (family, name); its module is imported on first use."""
    module, _, attr = entry(family, name).target.partition(":")
    return getattr(importlib.import_module(module), attr)
