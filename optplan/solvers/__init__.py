"""The planners: one subpackage per problem family, over a shared core.

Families, top to bottom; each imports only the families below it (pyproject's "Solver families point one
way" contract; "Repack is independent of the other families" adds that ``repack`` shares only ``core``):

- ``replay``: Repack policies replayed over time on a GPU trace, and sweeps of such replays; it runs the
  Repack and goal planners, placement's pending verdict and the online simulation's cluster state;
- ``goals``: Repack with a purpose (admit pending gangs, free HyperNodes); it composes Repack's moves and
  rules with placement's gangs, so it sits above both;
- ``repack``: the Repack problem, its rules and validator, the fragmentation metric and the planners
  (greedy, CP-SAT, MILP, auto); ``sim``: online placement (pods arriving one by one, the bench's FGD
  setup), which ranks nodes with placement's binpack score;
- ``placement``: pending VCJobs placed as Volcano would (allocate, preempt, reclaim) and by an exact model;
- ``quota``: Volcano queue accounting and admission, spot capacity and spot reclaim, RFC 3339 times;
- ``core``: what every family shares: the feasibility oracle, the options and clocks (time limits), the
  planner registry, the exact planners' ranking and record, the disruption-protection markers.

Inside each family a layers contract orders the modules (a module imports only modules on lower lines),
and each family's ``__init__`` docstring lists them.
"""
