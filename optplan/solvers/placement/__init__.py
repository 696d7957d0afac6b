"""Queue placement of pending VCJobs with preempt/reclaim victims: Volcano's rules, greedy and
validator (volcano), victim rules (victims), the exact model (cpsat, victims_cpsat), the
dispatch by solver name (place)."""
