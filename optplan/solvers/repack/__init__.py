"""Repack: which running pods to move so that whole nodes of a resource are freed, with least disruption.

Modules, top to bottom; each imports only the lines below it (pyproject's "Repack imports one way"
contract):

- ``auto``: the greedy, then CP-SAT hinted with it, the better plan winning;
- ``lns`` (large-neighbourhood search around a plan), ``milp`` (the MILP twin of the CP-SAT model, in
  PuLP) and ``pools`` (the exact model per node pool with pods counted by shape, for large clusters);
- ``cpsat`` (the exact planner on CP-SAT), ``greedy`` (the design document's incremental greedy, and
  greedy-fast), ``baselines`` (the peers: Karpenter, Cluster Autoscaler, descheduler) and ``run``
  (``plan_repack``: measure, plan, validate, build the status);
- ``base`` (the planner interface), ``model`` (the exact model's data), ``validate`` (``validate_plan``,
  every rule re-checked) and ``execute`` (Execute's calls: nominate, verify, find the replacement);
- ``checks`` (one check per rule family) and ``bound`` (the freed-node bound);
- ``rules``: the Repack problem and each rule's definition, written once;
- ``frag`` (the fragmentation metric) and ``hyperfrag`` (per HyperNode tier);
- ``binpacking`` (the exact minimum number of bins), over ``binlp`` (its LP bound and LP-guided packing),
  over ``binfill`` (a search for a packing at the bound) and ``binflow`` (the arc-flow MIP).
"""
