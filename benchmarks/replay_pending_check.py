"""What one ``pending``-policy decision costs at a saturated instant of the openb default trace: the replay
(policy ``none``) run to ``--hours``, then, on its state, the check's pending verdict (``policy.
fragmentation_pending`` on the snapshot the check builds) and the Repack run for the gangs it names
(``policy.plan_for_pending`` on the snapshot with every running gang's VCJob), ``--repeat`` times each:
median seconds and the answers' digest, so that two versions of the code can be compared on one state.

Example::

    python benchmarks/replay_pending_check.py --hours 14

Skips (exit 0, one line) when the data folder (``../shared/data/openb``) is absent.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
import time
from pathlib import Path

from optplan.cli.replay import load_trace
from optplan.experiments.replay.config import ReplayConfig
from optplan.experiments.replay.engine import Replay
from optplan.experiments.replay.policy import fragmentation_pending, plan_for_pending

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "openb"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--hours", type=float, default=14.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    if not (a.data / "openb_pod_list_default.csv").exists():
        print(f"skipped: no openb data in {a.data}")
        return 0
    trace = load_trace(str(a.data / "openb_node_list_gpu_node.csv"), str(a.data / "openb_pod_list_default.csv"),
                       seed=a.seed, speedup=5000, repeat=40)
    t0 = time.perf_counter()
    run = Replay(trace, ReplayConfig(policy="pending", horizon=a.hours * 3600, seed=a.seed))
    run.check = lambda *_args: None  # type: ignore[method-assign]  # replay only: no decision on the way
    run.run()
    print(f"replayed to {a.hours:g} h in {time.perf_counter() - t0:.1f} s: {len(run.running())} pods running")
    heads = [run.gangs[q[0]].g for q in run.queues.values() if q]
    heads.sort(key=lambda g: g.created)
    check_s, plan_s, answers = [], [], []
    for _ in range(a.repeat):
        t0 = time.perf_counter()
        snap = run.builder.build(run.running(), heads)
        frag = fragmentation_pending(snap)
        check_s.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        rsnap = run.builder.build(run.running(), [g for g in heads if g.name in frag], restart=run.cfg.restart)
        planned = plan_for_pending(rsnap, run.run_spec, run.cfg, frag)
        plan_s.append(time.perf_counter() - t0)
        answers.append(repr((frag, planned.moves, planned.status, planned.reason)))
    digest = hashlib.sha256(answers[0].encode()).hexdigest()[:16]
    print(f"{len(heads)} queue heads, {len(frag)} by fragmentation, {len(planned.moves)} moves "
          f"({planned.reason}); answers digest {digest}{'' if len(set(answers)) == 1 else ' (varied!)'}")
    print(f"check (snapshot + verdict): median {statistics.median(check_s):.2f} s {[round(x, 2) for x in check_s]}")
    print(f"Repack run for them (snapshot + admit goal): median {statistics.median(plan_s):.2f} s "
          f"{[round(x, 2) for x in plan_s]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
