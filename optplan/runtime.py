"""Process-wide tuning shared by the layers (beside ``errors``, outside them)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic collector off for the block (as it was, after): for work that allocates many small
    acyclic objects next to a large live snapshot, where its passes only cost time (generating a snapshot;
    the Repack greedy's tables and rounds: about a sixth of the run at 1,000 nodes). It is process-wide, so
    other threads run without it for as long."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
