"""Kubernetes resource quantities, parsed exactly.

Every amount in optplan is an ``int`` in milli-units (``"500m"`` cpu is 500, ``"1"`` GPU is 1000,
``"64Gi"`` memory is 64 * 2**30 * 1000). Python ints are unbounded, so nothing overflows, and
integers keep every comparison exact. Like Kubernetes, a value finer than a milli-unit is rounded
up to the next milli-unit.
"""

from __future__ import annotations

import re
from fractions import Fraction
from functools import lru_cache

from optplan.models.limits import MAX_QUANTITY_MILLI

MILLI = 1000
MAX_EXPONENT = 100
MAX_MILLI = MAX_QUANTITY_MILLI
"""Largest amount the planners accept (``limits.MAX_QUANTITY_MILLI``): their arrays and CP-SAT models
hold int64, and sums of such amounts must fit too."""

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 10**3), "": Fraction(1),
    "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9), "T": Fraction(10**12),
    "P": Fraction(10**15), "E": Fraction(10**18),
}
_RE = re.compile(  # ASCII digits only: int() and Fraction() would also take "１２" or "١٢"
    r"(?P<sign>[+-]?)(?P<num>(?:[0-9]+\.?[0-9]*|\.[0-9]+))"
    r"(?:(?P<bin>Ki|Mi|Gi|Ti|Pi|Ei)|(?P<exp>[eE][+-]?[0-9]+)|(?P<dec>[numkMGTPE])?)"
)
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_INTEGER_RESOURCES = frozenset({"pods"})
"""Native resources Kubernetes counts in whole units (of those a node or a pod can name)."""


def parse_quantity(value: object) -> Fraction:
    """Parse a Kubernetes quantity (``"500m"``, ``"64Gi"``, ``"1e3"``, ``8``) into an exact Fraction.

    Raises ValueError with a short reason when the text is not a quantity.
    """
    if isinstance(value, bool):
        raise ValueError(f"not a quantity: {value!r}")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(f"not a quantity: {value!r}")
        return Fraction(str(value))
    if not isinstance(value, str):
        raise ValueError(f"not a quantity: {value!r}")
    text = value.strip(" \t")
    m = _RE.fullmatch(text)
    if not m:
        raise ValueError(f"not a quantity: {value!r}")
    number = Fraction(m.group("num"))
    if m.group("sign") == "-":
        number = -number
    if m.group("bin"):
        return number * _BINARY[m.group("bin")]
    if m.group("exp"):
        exp = int(m.group("exp")[1:])
        if abs(exp) > MAX_EXPONENT:  # 10**exp would take unbounded time and memory
            raise ValueError(f"exponent out of range (|e| > {MAX_EXPONENT}): {value!r}")
        return number * Fraction(10) ** exp
    return number * _DECIMAL[m.group("dec") or ""]


def to_milli(value: object) -> int:
    """Parse a quantity into integer milli-units, rounding up like Kubernetes' MilliValue."""
    if type(value) is str:
        return _text_milli(value)
    q = parse_quantity(value) * MILLI
    return -((-q.numerator) // q.denominator)


@lru_cache(maxsize=4096)
def _text_milli(text: str) -> int:
    """``to_milli`` of a string, remembered: a cluster's requests repeat a few texts ("1", "8Gi", "500m")
    across tens of thousands of pods, and exact parsing (Fractions) dominated loading them. Errors are
    raised again each time (never cached)."""
    q = parse_quantity(text) * MILLI
    return -((-q.numerator) // q.denominator)


def format_milli(milli: int) -> int | str:
    """Whole units as an int (``3``), anything finer as a quantity string (``"1500m"``)."""
    if milli % MILLI == 0:
        return milli // MILLI
    return f"{milli}m"


# ---- units: how tables, summaries and plots name an amount of a resource -----------------------------

CARDS, CORES, BYTES, PODS, UNITS = "cards", "cores", "bytes", "pods", "units"
_BYTE_RESOURCES = frozenset({"memory", "ephemeral-storage", "storage"})
_BINARY_SUFFIXES = (("Ei", 60), ("Pi", 50), ("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10))


def unit_of(resource: str) -> str:
    """The unit of a resource, the one rule every renderer reads: ``cards`` for devices (any extended
    resource: ``nvidia.com/gpu``, ``huawei.com/ascend-*``, ...), ``cores`` for cpu, ``bytes`` for memory,
    storage and hugepages, ``pods`` for pods, ``units`` for any other name."""
    if resource == "cpu":
        return CORES
    if resource in _BYTE_RESOURCES or resource.startswith("hugepages-"):
        return BYTES
    if resource == "pods":
        return PODS
    return CARDS if is_extended_resource(resource) else UNITS


def format_amount(resource: str, milli: int) -> int | str:
    """An amount as ``kubectl describe node`` writes it: whole units as an int (``72`` cards or cores),
    anything finer as milli-units (``"1500m"`` cpu), bytes in the largest exact binary unit (``"640Gi"``)."""
    if unit_of(resource) == BYTES and milli > 0 and milli % MILLI == 0:
        units = milli // MILLI
        for suffix, shift in _BINARY_SUFFIXES:
            if units % (1 << shift) == 0:
                return f"{units >> shift}{suffix}"
    return format_milli(milli)


def with_unit(resource: str, milli: int) -> str:
    """An amount and its unit, for a sentence: ``72 cards``, ``72 cores``, ``1500 millicores``, ``64Gi``
    (a binary suffix names the bytes), ``1000 bytes``, ``3 pods``."""
    unit = unit_of(resource)
    amount = format_amount(resource, milli)
    if unit == CORES and isinstance(amount, str):
        return f"{milli} millicores"
    if unit == BYTES and isinstance(amount, str) and amount[-2:] in {s for s, _ in _BINARY_SUFFIXES}:
        return amount
    return f"{amount} {unit}"


def is_extended_resource(name: str) -> bool:
    """Kubernetes' ``IsExtendedResourceName``: a name with a domain outside ``kubernetes.io``
    (``nvidia.com/gpu``, ``huawei.com/ascend-1980``), not starting with ``requests.``, that is a
    qualified name once ``requests.`` is put in front."""
    if "/" not in name or "kubernetes.io/" in name or name.startswith("requests."):
        return False
    prefix, _, rest = f"requests.{name}".partition("/")
    return (len(prefix) <= 253 and _DNS_SUBDOMAIN.fullmatch(prefix) is not None and len(rest) <= 63
            and _QUALIFIED_NAME.fullmatch(rest) is not None)


def is_integer_resource(name: str) -> bool:
    """Kubernetes' ``IsIntegerResourceName``: amounts must be whole units (``pods``, extended resources)."""
    return name in _INTEGER_RESOURCES or is_extended_resource(name)
