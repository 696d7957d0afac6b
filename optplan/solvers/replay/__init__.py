"""Repack over time (issue 16): a discrete-event replay of a GPU trace with Volcano's gang + binpack
allocate and a Repack policy, and sweeps of such replays over policies, intervals, budgets, traces and
seeds.

The family sits on top of the solver families: it uses the online simulation's numpy cluster state and
binpack cache (``sim``), placement's pending-by-fragmentation verdict (``placement.pending``) and the
real Repack planners (``repack.run.plan_repack``, ``repack.baselines``). Reading trace files is the CLI's
(``optplan.cli.replay``, through the openb importer's readers): this family takes a ``Trace``.

Modules, lowest first: ``trace`` (the jobs and nodes a replay reads), ``config`` (a policy as data),
``cluster`` (the incremental cluster state and Volcano's allocate on it), ``snapshot`` (a Snapshot of the
replay state, built only when a Repack runs), ``policy`` (when a Repack runs, with which planner, and
applying its validated plan), ``engine`` (the event loop and its metrics), ``report`` (Markdown, JSON
and plots of one replay), ``sweep`` (grids, executors, confidence intervals).
"""
