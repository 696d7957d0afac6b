"""HiGHS, quiet: its first construction in a process prints a banner on the C-level stdout even when asked
not to (``msg=False``, ``output_flag``), which would corrupt the CLI's JSON or YAML on stdout. Every HiGHS
user (the Repack and goal MILP twins through PuLP, the bin-packing LP) builds it inside ``quiet``, which
takes that banner out of the way once per process."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()


_banner_shown = False


@contextmanager
def quiet() -> Iterator[None]:
    """Run the block with HiGHS's banner out of the way. The banner comes once per process, at the first
    construction: the first call constructs a HiGHS object itself with file descriptor 1 pointed at
    /dev/null (under a fake stdout, pytest's capture, nothing is redirected), and every later call leaves the
    descriptors alone: redirecting at every solve would take the process's stdout away from every other
    thread for the length of the solve (the plan server and the controller solve in threads)."""
    global _banner_shown
    if not _banner_shown:
        with _lock:
            if not _banner_shown:
                _construct_quietly()
                _banner_shown = True
    yield


def _construct_quietly() -> None:
    try:
        import highspy
    except ImportError:  # pragma: no cover - the MILP twins fall back to CBC, which is quiet with msg=False
        return
    sys.stdout.flush()
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # pytest capture and other fakes
        highspy.Highs()
        return
    saved = os.dup(fd)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), fd)
            highspy.Highs()
    finally:
        sys.stdout.flush()
        os.dup2(saved, fd)
        os.close(saved)
