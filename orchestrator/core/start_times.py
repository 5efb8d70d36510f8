"""When a delayed run starts: a time as users write it, read into seconds since the epoch.

Pure: the caller passes `now` (its clock, or a test's), so what counts as "in the past"
is decided in one place and tested with tables. An instant is ISO 8601 with its zone
(`2026-12-01T09:00Z`, `2026-12-01T10:00+01:00`) or Unix seconds; a time without a zone
is refused rather than guessed (the client's and the fleet's zones may differ). A
duration is whole units, largest first (`30s`, `10m`, `2h`, `1d`, `1h30m`).
"""

from __future__ import annotations

import re
from datetime import datetime

from agentq.orchestrator.core.errors import StartTimeError

_UNIT_S = {"d": 86_400, "h": 3_600, "m": 60, "s": 1}
_DURATION = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")
_EPOCH = re.compile(r"^\d+(?:\.\d+)?$")


def parse_duration(text: str) -> float:
    """Seconds in a duration such as `30s`, `10m`, `2h` or `1h30m` (not zero)."""
    found = _DURATION.match(text.strip().lower())
    if found is None or not any(found.groups()):
        raise StartTimeError(
            f"invalid duration {text!r}: write whole units, e.g. 30s, 10m, 2h, 1d or 1h30m"
        )
    seconds = sum(int(n or 0) * _UNIT_S[u] for n, u in zip(found.groups(), "dhms", strict=True))
    if seconds <= 0:
        raise StartTimeError(f"invalid duration {text!r}: it must be longer than zero")
    return float(seconds)


def parse_instant(text: str) -> float:
    """Seconds since the epoch of an ISO 8601 time with its zone, or of Unix seconds."""
    raw = text.strip()
    if _EPOCH.match(raw):
        return float(raw)
    try:
        when = datetime.fromisoformat(raw)
    except ValueError:
        raise StartTimeError(
            f"invalid time {text!r}: write ISO 8601 with a zone, e.g. 2026-12-01T09:00Z"
        ) from None
    if when.tzinfo is None:
        raise StartTimeError(
            f"time {text!r} has no zone: add one (Z for UTC, or an offset such as +01:00)"
        )
    return when.timestamp()


def check_future(start_at: float, now: float) -> float:
    """`start_at` if it is not before `now`: a run cannot be scheduled in the past."""
    if start_at < now:
        shown = datetime.fromtimestamp(start_at).astimezone().isoformat(timespec="seconds")
        raise StartTimeError(f"start time {shown} is in the past")
    return start_at


def start_time(*, at: str | None, delay: str | None, now: float) -> float | None:
    """When a run given `--at` or `--in` starts (None: at once); at most one of them."""
    if at is not None and delay is not None:
        raise StartTimeError("give a start time or a delay, not both")
    if delay is not None:
        return now + parse_duration(delay)
    if at is not None:
        return check_future(parse_instant(at), now)
    return None
