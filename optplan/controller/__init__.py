"""The Repack controller (``optplan controller``): RepackRuns planned and executed in a cluster, with the
run's status as the journal.

Modules, each importing only the lines below it (pyproject's "Controller imports one way" contract):
``manager`` (the loop: informers feed the store, the leader reconciles, probes report), ``autotrigger``
(RepackRuns created for gangs pending by fragmentation), ``reconcile`` (one run, level-triggered and
idempotent: DryRun, and Execute's evictions, nominations and verification) and ``leader`` (Lease
election), then ``informer`` (list + watch into one store), ``status`` (phases, conditions, the relocation
journal and its merge rules), ``metrics`` (Prometheus metrics, ``/healthz``, ``/readyz``) and ``events``
(events.k8s.io Events on runs and evicted pods, aggregated into series and rate-limited per object). It plans
with the solver families directly (``repack.run``, ``goals.run``, ``placement.pending``) and talks to the
API server through ``optplan.adapters.kube``.
"""
