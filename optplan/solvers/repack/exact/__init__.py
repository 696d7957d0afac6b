"""Repack's exact planners: the CP-SAT model, its MILP twin, and the ways of solving it at scale.

Modules, top to bottom; each imports only the lines below it (pyproject's "Repack's exact planners import
one way" contract):

- ``lns`` (large-neighbourhood search around a plan), ``milp`` (the MILP twin of the CP-SAT model, in
  PuLP/HiGHS) and ``pools`` (the exact model per node pool with pods counted by shape, for large clusters);
- ``cpsat``: the exact planner on CP-SAT (phase 1 the freed nodes, phase 2 the least disruption), and the
  solve of one part of the cluster that ``lns`` reuses (``new_part``, ``solve_freed``, ``solve_cost``);
- ``model`` (the exact model's data: candidates, domains, the capacity and room rows both backends emit)
  and ``bound`` (the freed-node bound of the budget relaxation).
"""
