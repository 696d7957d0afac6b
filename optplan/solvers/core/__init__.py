"""The solvers' shared core; it imports no planner family.

Modules (pyproject's "Core imports one way" contract: ``options`` above the rest but ``planner`` and ``milp``):

- ``planner``: the one planner shape every family's planners have (``Planner``: ``plan(problem, options,
  hint=None)`` -> a result with the plan and its solver record) and the one ``Auto`` (the greedy to its end,
  then the exact planner hinted with it, the better plan by the family's key);
- ``options``: ``PlanOptions``, what every planner takes (limits, workers, seed, the run's clock);
- ``clock``: time limits as wall-clock seconds or as work (``--deterministic``);
- ``oracle``: the feasibility oracle every planner, baseline and validator asks (static predicates,
  room, ``max_fit``);
- ``gpushare``: the device-fit rule of shared GPUs (``GpuAsk``: whole GPUs or a share of one; ``fits``,
  ``choose_devices``) and the FGD paper's fragmentation of a node for a target workload; pure, below the oracle;
- ``registry``: every named planner class by (family, name): repack, placement, goals, the peers' baselines
  and the simulation's policies; read by the CLI, the plan server, the API, the bench, the replay and each
  family's dispatch;
- ``exact``: what the exact planners share: plan ranking, gap and solver record, and ``model_bug``;
- ``protection``: the disruption-protection markers (do-not-disrupt, safe-to-evict, preemptable), read by
  Repack's rules and placement's victim rules;
- ``milp``: what the MILP twins share: the PuLP backend, rows within HiGHS's range, the reading of a proof;
- ``highs``: HiGHS kept quiet on stdout, for every MILP user (outside the layers contract).
"""
