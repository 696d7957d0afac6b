"""Amounts as the resource's unit writes them (cards, cores, bytes), in the output of ``frag``, ``repack``,
``compare``, ``queues`` and ``spot-capacity``."""

from __future__ import annotations

from collections.abc import Sequence

from optplan.models.quantity import format_amount, to_milli, unit_of


def amount(resource: str, written: int | str) -> str:
    """A status amount (``format_milli``'s int or milli string) as the resource's unit writes it."""
    return str(format_amount(resource, to_milli(written)))


def unit_labels(resource: str, grid: list[list[str]]) -> list[list[str]]:
    """Row labels naming cards (``affected cards``, ``moved cards``) in the resource's own unit."""
    unit = unit_of(resource)
    return [[row[0].replace(" cards", f" {unit}"), *row[1:]] for row in grid]


def amounts(m: dict[str, int], resources: Sequence[str] | None = None) -> dict[str, int | str]:
    """Amounts by resource (milli-units) as each resource's unit writes them: all, sorted, or ``resources``'."""
    keys = sorted(m) if resources is None else [r for r in resources if r in m]
    return {r: format_amount(r, m[r]) for r in keys}
