"""``optplan bench``: run the benchmark suite (``optplan.experiments.bench``) and write a Markdown report
with plots; the flags become the suite (``bench.suite_for``), its data folder and sections."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from optplan.cli import options
from optplan.errors import InputError
from optplan.experiments.bench import SECTIONS, run_suite, suite_for

log = logging.getLogger("optplan")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", metavar="DIR",
                   help="folder holding openb/, bpplib/ and fgd-expected/ (sections are skipped without)")
    p.add_argument("--quick", action="store_true", help="a smaller suite (about 2 minutes on 2 cores)")
    p.add_argument("--out", metavar="DIR", default="bench-out", help="output folder (default bench-out/)")
    options.time_limit(p, None, "time limit of the exact planners (cpsat, milp, auto) on openb and at scale "
                                "(default 20, 10 with --quick)", metavar="S")
    p.add_argument("--sections", default=",".join(SECTIONS), metavar="LIST",
                   help=f"comma-separated sections to run (default all: {','.join(SECTIONS)})")
    p.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)
    options.verbose(p)


def run(args: argparse.Namespace) -> str:
    if args.time_limit is not None and not args.time_limit > 0:
        raise InputError(f"must be positive, got {args.time_limit}", field="--time-limit")
    suite = suite_for(args.quick, getattr(args, "tiny", False), args.time_limit)
    data = Path(args.data) if args.data else None
    if data is not None and not data.exists():
        log.warning("--data %s does not exist: the sections that need its data are skipped", data)
    elif data is not None and not data.is_dir():
        raise InputError(f"not a folder: {data}", field="--data")
    sections = tuple(s.strip() for s in str(getattr(args, "sections", ",".join(SECTIONS))).split(",") if s.strip())
    unknown = [s for s in sections if s not in SECTIONS]
    if unknown or not sections:
        raise InputError(f"unknown section {unknown[0]!r} (one of {', '.join(SECTIONS)})" if unknown
                         else "no section named", field="--sections")
    return run_suite(suite, data, Path(args.out), sections)
