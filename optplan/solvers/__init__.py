"""The planners: one subpackage per problem family, over a shared core.

Families, top to bottom; each imports only the families below it (pyproject's "Solver families point one
way" contract; "Repack is independent of the other families" adds that ``repack`` shares only ``core`` and
``binpack``):

- ``baselines``: the peers (Karpenter, Cluster Autoscaler, the descheduler, KAI-scheduler), written from
  their published algorithms, measured under optplan's validator; ``execute``: Execute's checks (nominate,
  verify, find the replacement), read by the controller and the Python API;
- ``goals``: Repack with a purpose (admit pending gangs, free HyperNodes); it composes Repack's moves and
  rules with placement's gangs, so it sits above both; ``provision``: the cheapest nodes to add from a
  catalogue so that pending gangs place (placement's allocate and validator on the cluster with them);
- ``repack``: the Repack problem, its rules and validator and its planners (greedy, the exact planners of
  ``repack.exact``, auto);
- ``placement``: pending VCJobs placed as Volcano would (allocate, preempt, reclaim) and by an exact model;
- ``quota`` (Volcano queue accounting and admission, spot capacity and spot reclaim, RFC 3339 times) and
  ``binpack`` (the minimum-bins library and the fragmentation metric: items and bins, nothing of Kubernetes'
  rules);
- ``core``: what every family shares: the planner shape and ``auto``'s composition, the feasibility oracle,
  the options and clocks (time limits), the planner registry, the exact planners' ranking and record, the
  disruption-protection markers.

Inside each family a layers contract orders the modules (a module imports only modules on lower lines),
and each family's ``__init__`` docstring lists them. The experiments that run these planners over time or
over benchmarks live in ``optplan.experiments``.
"""
