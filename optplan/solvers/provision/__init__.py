"""Provisioning: the cheapest nodes to add from a catalogue of node groups so that pending gangs place
under Volcano's rules (seed 004 §5.2), and the gangs no group can host named before an autoscaler adds
nodes for them (§4.3's deadlock).

A node group (``optplan.models.provision.NodeGroup``) is a template — labels, taints, allocatable, the
HyperNode new nodes join, a price, a maximum count. A plan is a count per group and, on the cluster with
those nodes, where allocate puts each gang: placement's greedy (Volcano's allocate: queues, gang minimums,
predicates, HyperNode topology, binpack onto what is there first) decides, and placement's validator
re-checks it; nobody is evicted. Gangs are served in Volcano's order; a gang served before stays served.

**Modules**, each importing only the ones below it (pyproject's import-linter contracts):

- ``run``: the dispatch by solver name (``plan_provision``): greedy | cpsat | auto | seed | least-waste
  (cpsat and auto are ``AutoProvisioner``, ``core.planner.Auto`` over the greedy and the exact model completed),
  the unserved gangs' reasons, the peers' results, the validator last; ``payg``: pay-as-you-go queue
  sizing (seed 002 §4.3, ``size_payg``): the capability = deserved that lets pending payg jobs place
  without taking anyone's deserved share, the values to return to, the spot capabilities that follow;
- ``cpsat``: the exact model over group counts and the gangs' minimum pods, a relaxation of allocate, so
  its bound is a proven lower bound on the cost of serving as many gangs (imported only when asked for);
  ``greedy``: gang by gang, the cheapest nodes after which allocate admits it, then pruning; ``peers``:
  seed 004 §5.2's formula (⌈gap / node capacity⌉) and Cluster Autoscaler's least-waste expander;
- ``problem``: the problem (snapshot, jobs, catalogue), ``evaluate`` (allocate on the cluster with new
  nodes, remembered), the deadlocks, and the seed's daily rule as placeholder gangs (``headroom_jobs``);
  ``validate``: the independent validator (``provision_violations``); it imports no planner;
- ``nodes``: the cluster with new nodes (``augment``), their cost, the catalogue's checks against the
  snapshot.
"""
