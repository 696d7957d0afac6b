"""Queue quotas: ``queues`` (Volcano queue accounting as the capacity plugin does it, admission checks,
each tenant's spot capability), ``spot`` (spot reclaim: which spot jobs to delete to free N units) and
``times`` (RFC 3339 times for ``--now`` and start times; light, so placement's victim pricing can use it).
Pyproject's "Quota imports one way" contract: ``spot`` above ``queues`` and ``times``.
"""
