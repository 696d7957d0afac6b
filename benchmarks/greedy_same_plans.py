"""Hash ``optplan repack``'s output on the greedy benchmark's snapshots, to hold a change to the greedy
to the same plans (same bytes).

Example::

    git stash; python benchmarks/greedy_same_plans.py --out before.json; git stash pop
    python benchmarks/greedy_same_plans.py --expect before.json     # exit 1 on any difference

For every size and seed it writes the snapshot ``benchmarks/greedy_scale.py`` times (``optplan generate``
with that script's mix) and runs ``optplan repack --solver S --time-limit L`` on it in this process,
for each solver S (default greedy and greedy-fast), and prints the SHA-256 of the output. A plan cut by
the time limit is refused (exit 1): only complete plans compare, so give the limit room on a busy machine.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import logging
import sys
import tempfile
import time
from pathlib import Path

from greedy_scale import GANG_SIZES, POD_SIZES

from optplan.cli import main as optplan


class _Cut(logging.Handler):
    """Notices the greedy's "time limit reached" warning."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.cut = False

    def emit(self, record: logging.LogRecord) -> None:
        self.cut |= "time limit reached" in record.getMessage()


def weights(sizes: tuple[tuple[int, float], ...]) -> str:
    return ",".join(f"{c}:{w}" for c, w in sizes)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", default="1000,2000", help="snapshot sizes (default 1000,2000)")
    ap.add_argument("--seeds", default="0,1,2", help="generator seeds (default 0,1,2)")
    ap.add_argument("--solvers", default="greedy,greedy-fast", help="solvers (default greedy,greedy-fast)")
    ap.add_argument("--time-limit", default="600", help="optplan repack --time-limit (default 600)")
    ap.add_argument("--out", metavar="JSON", help="write the hashes here")
    ap.add_argument("--expect", metavar="JSON", help="compare with hashes written before; exit 1 on a difference")
    args = ap.parse_args(argv)
    cut = _Cut()
    logging.getLogger("optplan").addHandler(cut)
    hashes: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.nodes.split(","):
            for seed in args.seeds.split(","):
                snap = str(Path(tmp) / f"snap-{n}-{seed}.yaml")
                with contextlib.redirect_stdout(io.StringIO()):
                    optplan(["generate", "--nodes", n, "--cards-per-node", "8", "--occupancy", "0.88",
                             "--pod-sizes", weights(POD_SIZES), "--gang-sizes", weights(GANG_SIZES),
                             "--cpu-pressure", "0.008", "--pdb-share", "0.1", "--seed", seed, "-o", snap])
                for solver in args.solvers.split(","):
                    out = io.StringIO()
                    t0 = time.process_time()
                    with contextlib.redirect_stdout(out):
                        rc = optplan(["repack", "--solver", solver, "--time-limit", args.time_limit, snap])
                    if rc != 0 or cut.cut:
                        print(f"{n} nodes, seed {seed}, {solver}: exit {rc}"
                              f"{', cut by the time limit' if cut.cut else ''}", file=sys.stderr)
                        return 1
                    name = f"{n}/{seed}/{solver}"
                    hashes[name] = hashlib.sha256(out.getvalue().encode()).hexdigest()
                    print(f"{name}: {hashes[name][:16]}  ({time.process_time() - t0:.1f} cpu s)", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(hashes, indent=2) + "\n")
    if args.expect:
        before = json.loads(Path(args.expect).read_text())
        differ = [k for k in hashes if before.get(k) != hashes[k]]
        print(f"{len(hashes) - len(differ)}/{len(hashes)} outputs identical to {args.expect}"
              + (f"; different: {', '.join(differ)}" if differ else ""))
        return 1 if differ else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
