"""The peers, as baselines: what the tools optplan is measured against would do on the same snapshot,
written from their published algorithms (not their code), so that the bench and ``optplan repack
--baseline`` compare plans under optplan's own validator.

- ``repack``: Repack's peers: Karpenter's consolidation (and its Balanced policy), Cluster Autoscaler's scale-down, the
  descheduler's HighNodeUtilization, each a planner class registered as the ``baselines`` family
  (``optplan.solvers.core.registry``);
- ``kai``: KAI-scheduler's consolidation, a peer of the goal planners (``--solver kai`` of a RepackRun with
  admit goals).

The two import none of each other.
"""
