"""``optplan replay --sweep`` with each cell's cost: the command's arguments are passed on unchanged, and each
cell's wall and CPU seconds (``time.process_time`` in the worker that ran it) and the load average when it
ended are appended to ``--times FILE`` (JSON lines, default ``cells-time.jsonl``). The sweep's results and
report are the command's own, byte for byte: only the cell function is wrapped.

Example (the frontier of docs/benchmarks.md)::

    nice -n 10 python benchmarks/replay_sweep_times.py --times times.jsonl replay --sweep frontier.yaml \\
        --workers 2 -o frontier-out
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from optplan.cli import main
from optplan.experiments.replay import sweep

_run_cell = sweep.run_cell
TIMES = "cells-time.jsonl"


def timed_cell(trace: Any, cell: sweep.Cell) -> dict[str, Any]:
    """``sweep.run_cell``, its wall and CPU seconds appended to the times file."""
    w0, c0 = time.perf_counter(), time.process_time()
    row = _run_cell(trace, cell)
    line = {"key": cell.key, "wall": round(time.perf_counter() - w0, 1), "cpu": round(time.process_time() - c0, 1),
            "end": time.strftime("%H:%M:%S", time.gmtime()), "load": [round(x, 2) for x in os.getloadavg()]}
    with open(os.environ.get("CELL_TIMES", TIMES), "a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")
    return row


# a forked worker looks the function up by this name (the pool pickles it by reference)
timed_cell.__module__, timed_cell.__qualname__ = _run_cell.__module__, _run_cell.__qualname__


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["--times"]:
        os.environ["CELL_TIMES"], args = args[1], args[2:]
    sweep.run_cell = timed_cell
    sys.exit(main(args))
