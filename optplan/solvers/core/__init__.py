"""The solvers' shared core: the feasibility oracle (predicates, room), clocks, the planner registry
and the options every planner takes. Imports no planner family."""
