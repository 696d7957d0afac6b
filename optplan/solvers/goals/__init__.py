"""Repack with a purpose: move running pods, never delete them, so that named pending gangs can be placed
whole and whole HyperNodes of a tier are left empty of the target resource.

The family composes the other two: Repack's moves, rules and validator (``solvers/repack``) and
placement's pending gangs, gang minimums, quotas and network topology (``solvers/placement``), so it sits
above both in the import contracts. Its modules, top to bottom; each imports only the lines below it
(pyproject's "Goals imports one way" contract):

- ``run``: one planner's plan, validated, as a RepackRun status (``plan_run``, ``plan_goals``, in Repack's
  ``pipeline``; ``AutoGoalPlanner``, registered as ``auto``: ``core.planner.Auto`` of the greedy and the joint
  CP-SAT model hinted with it, the better plan winning);
- the planners: ``greedy`` (the fallback and baseline), ``cpsat`` (one model deciding moves, placements
  and HyperNodes together) and ``milp`` (its PuLP/HiGHS twin); KAI-scheduler's consolidation, the peer, is
  ``optplan.solvers.baselines.kai``;
- ``rows``: the exact model as rows (its variables, rows per family and objectives, which ``cpsat`` and
  ``milp`` only emit) and a solution read back into a plan and the planner's result; no solver import;
- ``model`` (the exact model's data: move and gang classes, receivers, regions, scales; the start without a
  hint, the fallback, the stages' record; no solver import), ``validate`` (every plan re-checked by the
  two families' own rules, trusting no planner) and ``room`` (the running state the heuristics share);
- ``problem``: the facts every planner and the validator read;
- ``resolve``: the goals read against the snapshot (which gangs, which tier, which HyperNodes); bad goals
  are an InputError naming the field.

Only ``cpsat`` loads OR-Tools. The spec is models/repack.py's ``AdmitGoal``, ``FreeHyperNodesGoal`` and
``NetworkTopologyGoal``; the plan and status types are models/goals.py's.
"""
