"""Run ``optplan.solvers.binpack.binpacking.min_bins`` on BPPLIB families and summarise the results.

Example::

    python benchmarks/bpplib_min_bins.py --families Falkenauer_U Hard28 --time-limit 10

Families are matched against the ``subset`` and ``family`` columns of ``instance_index.csv``
(case-insensitive, spaces and underscores are the same).  Per family it prints the number of
instances proven optimal, the number whose value equals the known optimum, and the median and
maximum wall-clock seconds (and CPU seconds of the process: what the instance cost on a loaded
machine).  Without the data (no ``instance_index.csv``) it says so and exits 0.
"""

from __future__ import annotations

import argparse
import csv
import logging
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from optplan.experiments.bench import read_bpplib
from optplan.solvers.binpack.binpacking import min_bins
from optplan.solvers.core.clock import Clock

# ../shared/data/bpplib beside the repository, or where OPTPLAN_BPPLIB says.
DEFAULT_DATA_DIR = Path(
    os.environ.get("OPTPLAN_BPPLIB") or Path(__file__).resolve().parents[2] / "shared" / "data" / "bpplib"
)


@dataclass(frozen=True)
class Instance:
    name: str
    group: str
    path: Path
    known_lb: int
    known_ub: int


def _norm(name: str) -> str:
    return name.strip().lower().replace(" ", "_")


def load_index(data_dir: Path, families: list[str]) -> dict[str, list[Instance]]:
    wanted = {_norm(f): f for f in families}
    out: dict[str, list[Instance]] = {f: [] for f in families}
    with (data_dir / "instance_index.csv").open(newline="") as fh:
        for row in csv.DictReader(fh):
            for key in (_norm(row["subset"]), _norm(row["family"])):
                if key in wanted:
                    out[wanted[key]].append(
                        Instance(
                            name=row["instance"],
                            group=wanted[key],
                            path=data_dir / row["path"],
                            known_lb=int(row["lb"]),
                            known_ub=int(row["ub"]),
                        )
                    )
                    break
    for group in out.values():
        group.sort(key=lambda inst: inst.name)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR, help="the bpplib folder")
    parser.add_argument("--families", nargs="+", default=["Falkenauer_U", "Hard28"])
    parser.add_argument("--time-limit", type=float, default=10.0, help="seconds per instance")
    parser.add_argument("--limit", type=int, default=0, help="at most N instances per family (0: all)")
    parser.add_argument("--every", type=int, default=1, help="every N-th instance of each family (a sample)")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--deterministic", action="store_true",
                        help="limits as work (optplan's deterministic clock) instead of wall-clock seconds: the same "
                             "results on a loaded machine, with up to 3x the wall time")
    parser.add_argument("--verbose", "-v", action="store_true", help="one line per instance")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(message)s")

    if not (args.data_dir / "instance_index.csv").is_file():
        print(f"skipped: no BPPLIB data (instance_index.csv) under {args.data_dir}")
        return 0
    index = load_index(args.data_dir, args.families)
    for family, instances in index.items():
        instances = instances[:: max(1, args.every)]
        if args.limit > 0:
            instances = instances[: args.limit]
        if not instances:
            print(f"{family}: no instances found under {args.data_dir}")
            continue
        proven = matched = 0
        seconds: list[float] = []
        cpu: list[float] = []
        for inst in instances:
            weights, capacity = read_bpplib(inst.path)
            t0 = time.monotonic()
            c0 = time.process_time()
            clock = Clock(deterministic=True, limit=args.time_limit) if args.deterministic else None
            res = min_bins(weights, [capacity] * len(weights), time_limit=args.time_limit, workers=args.workers,
                           clock=clock)
            dt = time.monotonic() - t0
            seconds.append(dt)
            cpu.append(time.process_time() - c0)
            proven += res.proven
            ok = inst.known_lb == inst.known_ub == res.value
            matched += ok
            if args.verbose:
                print(
                    f"  {inst.name}: value={res.value} lb={res.lower_bound} proven={res.proven} "
                    f"known={inst.known_lb}/{inst.known_ub} {dt:.2f}s (CPU {cpu[-1]:.2f}s)",
                    flush=True,
                )
        print(
            f"{family}: proven {proven}/{len(instances)}, matched known optimum {matched}/{len(instances)}, "
            f"median {statistics.median(seconds):.2f}s, max {max(seconds):.2f}s "
            f"(CPU: median {statistics.median(cpu):.2f}s, max {max(cpu):.2f}s)",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
