"""RFC 3339 times as the snapshot and ``--now`` write them: ``parse_time``, ``parse_now``. Light on
purpose (no solver import): the placement greedy prices victims with it, and spot reclaim reads start times."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from optplan.errors import InputError

_RFC3339 = re.compile(r"^([0-9]{4}-[0-9]{2}-[0-9]{2})[Tt ]([0-9]{2}:[0-9]{2}:[0-9]{2})(?:\.([0-9]+))?"
                      r"([Zz]|[+-][0-9]{2}:[0-9]{2})$")


def parse_time(text: str) -> datetime:
    """An RFC 3339 timestamp (``2025-06-01T12:00:00Z``) as an aware datetime; ValueError when it is not one."""
    m = _RFC3339.match(text.strip())
    if not m:
        raise ValueError(f"not an RFC 3339 time (like 2025-06-01T12:00:00Z): {text!r}")
    frac = (m.group(3) or "")[:6].ljust(6, "0")
    tz = "+00:00" if m.group(4) in ("Z", "z") else m.group(4)
    return datetime.fromisoformat(f"{m.group(1)}T{m.group(2)}.{frac}{tz}")


def parse_now(now: datetime | str | None) -> datetime:
    """``--now``: an aware datetime, RFC 3339 text, or None for the current time (whole seconds, UTC)."""
    if now is None:
        return datetime.now(UTC).replace(microsecond=0)
    if isinstance(now, datetime):
        if now.tzinfo is None:
            raise InputError("must carry a time zone (naive datetime given)", field="--now")
        return now
    try:
        return parse_time(now)
    except ValueError as e:
        raise InputError(str(e), field="--now") from None
