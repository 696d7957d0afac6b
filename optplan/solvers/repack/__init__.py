"""Repack: the problem and its rules (rules), the validator (validate), the fragmentation metric
(frag, binpacking; per HyperNode tier: hyperfrag), the planners (greedy, model, cpsat, milp, lns, auto;
interface in base), the run of one planner (run), the peers (baselines) and Execute's checks (execute)."""
