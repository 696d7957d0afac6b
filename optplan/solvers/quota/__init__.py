"""Queue quotas: Volcano queue accounting and admission checks (queues), spot reclaim (spot)."""
