"""Repack over time: a discrete-event replay of a GPU trace with Volcano's gang + binpack allocate and a
Repack policy, and sweeps of such replays over policies, intervals, budgets, planners, traces and seeds.

An experiment on top of the solver families: it uses the online simulation's numpy cluster state and
binpack cache (``experiments.sim``), placement's pending-by-fragmentation verdict (``placement.pending``),
the real Repack planners (``repack.run.plan_repack``), the peers (``baselines.repack``) and, for the
``pending`` policy, the goal planners (``goals.run``: a run whose admit goal names the waiting gangs).
Reading trace files is the CLI's (``optplan.cli.replay``, through the openb importer's readers): this
experiment takes a ``Trace``.

Modules, top to bottom; each imports only the lines below it (pyproject's "Replay imports one way"
contract): ``window`` (the preempt window with priorities and the large-job submission throttle, with and
without it over seeds: ``optplan replay --throttle``; the throttle's rule is placement's ``throttle``);
``sweep`` (grids, executors, confidence intervals), ``report`` (Markdown and JSON of one
replay) and ``plots`` (its PNGs); ``engine`` (the event loop and its metrics); ``policy`` (when a Repack
runs, with which planner, and applying its validated plan) and ``tenants`` (``--queues``: seed 002's tenant
queues, the mapping of the trace's gangs onto them, and placement's queue order, capability, preempt and
reclaim for the replay); ``snapshot`` (a Snapshot of the replay state,
built only when a Repack runs) and ``oracle`` (the ceiling: free repacking at every event, the cluster
each policy replays on, and a policy's share of the oracle's gain); ``cluster`` (the incremental cluster
state and Volcano's allocate on it); ``config`` (a policy as data), ``trace`` (the jobs and nodes a replay
reads) and ``survival`` (Kaplan–Meier percentiles of waiting and completion times some of which are
censored).
"""
