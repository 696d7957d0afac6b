"""Amounts as the resource's unit writes them (cards, cores, bytes), in the tables of ``frag``, ``repack``
and ``compare``."""

from __future__ import annotations

from optplan.models.quantity import format_amount, to_milli, unit_of


def amount(resource: str, written: int | str) -> str:
    """A status amount (``format_milli``'s int or milli string) as the resource's unit writes it."""
    return str(format_amount(resource, to_milli(written)))


def unit_labels(resource: str, grid: list[list[str]]) -> list[list[str]]:
    """Row labels naming cards (``affected cards``, ``moved cards``) in the resource's own unit."""
    unit = unit_of(resource)
    return [[row[0].replace(" cards", f" {unit}"), *row[1:]] for row in grid]
