"""The Repack controller (``optplan controller``): RepackRuns planned and executed in a cluster, with the
run's status as the journal.

Modules, each importing only the lines below it (pyproject's "Controller imports one way" contract):
``manager`` (the loop: informers feed the store, the leader reconciles, probes report), ``autotrigger``
(RepackRuns created for gangs pending by fragmentation), ``reconcile`` (one run, level-triggered and
idempotent: the passes, DryRun, and Execute's gate, plan and journal) and ``leader`` (Lease election), then
``evictions`` (Execute's evictions, node by node) and ``placements`` (its replacements' nominations and
binding, and the verified result), then ``base`` (what the steps share: settings, the ports they talk
through, the journal's one write, finishing a run, its TTL), then ``informer`` (list + watch into one
store), ``status`` (a run read once with its status typed, ``optplan.models.journal``; phases, conditions,
the relocation journal, its merge rules and the one way a change becomes a status patch), ``metrics``
(Prometheus metrics, ``/healthz``, ``/readyz``), ``events`` (events.k8s.io Events on runs and evicted
pods, aggregated into series and rate-limited per object) and ``schedconf`` (the cluster's vc-scheduler
ConfigMap, read again every minute: the configuration the goals' placements, ``pendingByFragmentation`` and
the auto-trigger follow). It plans with the solver families directly
(``repack.run``, ``goals.run``, ``placement.pending``) and talks to the API server through
``optplan.adapters.kube``.
"""
