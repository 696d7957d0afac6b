"""Repack: which running pods to move so that whole nodes of a resource are freed, with least disruption.

Modules, top to bottom; each imports only the lines below it (pyproject's "Repack imports one way"
contract):

- ``auto`` (``core.planner.Auto`` of greedy-fast and the exact part, ``RepackExact``, hinted with it, the
  better plan winning) and ``run`` (``plan_repack``: measure, plan, validate, build the status, in the
  ``pipeline`` goals' runs share);
- ``exact`` (the exact planners: CP-SAT, its MILP twin, the per-pool and neighbourhood searches; its own
  docstring lists them), ``greedy`` (the design document's incremental greedy, and greedy-fast) and ``gpus``
  (the ``freeGpus`` goal: whole GPUs of a model left free on one node, greedy and exact);
- ``base`` (Repack's planners by name, each a ``core.planner.Planner``) and ``validate`` (``validate_plan``,
  every rule re-checked);
- ``checks``: one check per rule family;
- ``rules``: the Repack problem and each rule's definition, written once.

The fragmentation metric and the minimum number of bins are ``optplan.solvers.binpack``'s; the peers'
plans are ``optplan.solvers.baselines``'; Execute's checks are ``optplan.solvers.execute``'s.
"""
