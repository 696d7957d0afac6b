"""Domain models: pure data (pydantic), no planning and no Kubernetes client.

Modules, each importing only the lines below it (pyproject's "Models import one way" contract):

- ``journal`` (a RepackRun's status as its controller reads it, ``RunStatus``, and the changes a journal
  step writes, ``StatusChange``; the phases of a run, an eviction, a placement), ``provision`` (node
  groups of a catalogue, provisioning plans; it holds a placement plan), ``payg`` (pay-as-you-go queue
  sizing: the queue patches to apply and to return to), ``schedconf`` (the vc-scheduler configuration the
  planners follow, ``SchedulerConf``: actions, binpack and HyperNode binpack weights, the capacity plugin's
  hierarchy, and what optplan cannot model);
- ``execute`` (Execute's records: relocations, ``Nomination``, ``Verification``), ``placement`` (queue
  placement plans, ``BinpackWeights``), ``results`` (what Repack returns: disruption, restarts, planner
  results, the fragmentation report, a run's outcome);
- ``snapshot`` (the cluster: nodes, pods, PodGroups, PDBs, HyperNodes and their resolved ``Topology``) and
  ``repack`` (the RepackRun spec, its goals and status, the disruption ``DIMENSIONS`` and ``Weights``);
- ``queues`` (Volcano queues, PriorityClasses, VCJobs and the queue tree) and ``quantity`` (Kubernetes
  quantities, parsed exactly);
- ``selectors`` (label selectors, node affinity, taints and tolerations), ``limits`` (the bounds on
  input, one constant each) and ``devices`` (GPUs one by one and a pod's share of one: ``GpuDevice``,
  ``GpuShare``, the device-share plugin's resource and annotation names).

``goals`` (the plan and status of a run with goals; it re-exports the goal specs ``repack`` defines) sits
beside ``execute`` and ``placement``, above ``repack``.
"""
