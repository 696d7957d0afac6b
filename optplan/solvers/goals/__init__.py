"""Repack with a purpose (issue 15): move running pods, never delete them, so that named pending gangs can
be placed whole and whole HyperNodes of a tier are left empty of the target resource.

The family composes the other two: Repack's moves, rules and validator (``solvers/repack``) and
placement's pending gangs, gang minimums, quotas and network topology (``solvers/placement``), so it sits
above both in the import contracts. Its modules, lowest first: ``resolve`` (the goals read against the
snapshot: which gangs, which tier, which HyperNodes; bad input is an InputError naming the field),
``problem`` (the joint problem), ``validate`` (every plan checked against the goals), the planners
(``greedy``, ``kai`` — KAI-scheduler's consolidation, as a peer — and ``cpsat``), and ``run`` (one planner's
plan, validated, as a RepackRun status). The spec is models/repack.py's ``AdmitGoal``,
``FreeHyperNodesGoal`` and ``NetworkTopologyGoal``; the plan and status types are models/goals.py's.
"""
