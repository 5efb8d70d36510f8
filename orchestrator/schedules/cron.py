"""A schedule's times, pure: its cron expression read by croniter, in its time zone, and
what a tick does when a worker claims it (on time, late, or missed while the fleet was
down). Every function takes `now`: the caller's clock, or a test's.

A cron has five fields (minute hour day month weekday: `0 9 * * MON-FRI`), or six with
seconds last (`*/10 * * * * *`), as croniter reads them. Times are seconds since the
epoch; a tick's own time is kept in whole milliseconds (its job id and record carry it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

from agentq.orchestrator.core.errors import SpecError

# A schedule's name is part of its keys, its tick jobs' ids and its runs' ids.
NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class Overlap(StrEnum):
    """What a tick does while the schedule's previous run is still going."""

    SKIP = "skip"  # no run this tick
    ALLOW = "allow"  # another run beside it
    CANCEL_PREVIOUS = "cancel-previous"  # the previous run is cancelled, then this one runs


class Catchup(StrEnum):
    """What a missed tick does (the fleet was down past the grace)."""

    ONE = "one"  # the missed ticks fire once, on recovery
    SKIP = "skip"  # they fire not at all; the next tick after now is awaited


class ScheduleError(SpecError):
    """A schedule's name, cron expression or time zone is invalid."""


def overlap_of(value: str) -> Overlap:
    try:
        return Overlap(value)
    except ValueError:
        raise ScheduleError(
            f"invalid overlap {value!r}: one of {', '.join(o.value for o in Overlap)}"
        ) from None


def catchup_of(value: str) -> Catchup:
    try:
        return Catchup(value)
    except ValueError:
        raise ScheduleError(
            f"invalid catchup {value!r}: one of {', '.join(c.value for c in Catchup)}"
        ) from None


def check_name(name: str) -> str:
    if not NAME.match(name):
        raise ScheduleError(f"invalid schedule name {name!r}: 1-64 letters, digits, '-' or '_'")
    return name


def zone(tz: str) -> ZoneInfo:
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise ScheduleError(
            f"unknown time zone {tz!r}: give an IANA name such as Europe/Lisbon or UTC"
        ) from None


def check_cron(expression: str) -> str:
    if not croniter.is_valid(expression):
        raise ScheduleError(
            f"invalid cron expression {expression!r}: five fields (minute hour day month "
            "weekday, e.g. '0 9 * * MON-FRI'), or six with seconds last"
        )
    return expression


def next_tick_ms(expression: str, tz: str, after_s: float) -> int:
    """The first tick strictly after `after_s`, in ms since the epoch."""
    start = datetime.fromtimestamp(after_s, zone(tz))
    following: datetime = croniter(expression, start).get_next(datetime)
    return int(following.timestamp() * 1000)


@dataclass(frozen=True)
class TickPlan:
    """What a claimed tick does: fire (a run) or not, and which tick comes next."""

    fire: bool
    next_ms: int
    missed: bool


def plan_tick(
    expression: str,
    tz: str,
    tick_ms: int,
    now_s: float,
    catchup: Catchup,
    grace_s: float,
) -> TickPlan:
    """A tick on time (or late within `grace_s`, AGENTQ_SCHEDULE_GRACE_S) fires, and
    the tick after it comes next; a missed one fires per `catchup`, and the next tick is
    the first after now: however many ticks the fleet missed, they fire at most once."""
    if now_s - tick_ms / 1000 <= grace_s:
        return TickPlan(True, next_tick_ms(expression, tz, tick_ms / 1000), missed=False)
    return TickPlan(catchup == Catchup.ONE, next_tick_ms(expression, tz, now_s), missed=True)
