"""Argument types shared by the command-line adapters."""

from __future__ import annotations

import argparse


def positive_float(text: str) -> float:
    """A number > 0 (time limits); argparse reports anything else as a usage error."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not v > 0:  # also rejects nan
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return v
