"""HiGHS, quiet: its first construction in a process prints a banner on the C-level stdout even when asked
not to (``msg=False``, ``output_flag``), which would corrupt the CLI's JSON or YAML on stdout. Every HiGHS
user (the Repack and goal MILP twins through PuLP, the bin-packing LP) builds it inside ``quiet``."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()


@contextmanager
def quiet() -> Iterator[None]:
    """File descriptor 1 points at /dev/null for the block (one block at a time); under a fake stdout
    (pytest's capture) nothing is redirected."""
    with _lock:
        sys.stdout.flush()
        try:
            fd = sys.stdout.fileno()
        except (AttributeError, OSError, ValueError):  # pytest capture and other fakes
            yield
            return
        saved = os.dup(fd)
        try:
            with open(os.devnull, "w") as devnull:
                os.dup2(devnull.fileno(), fd)
                yield
        finally:
            sys.stdout.flush()
            os.dup2(saved, fd)
            os.close(saved)
