"""A schedule's times, pure: cron and zone checks, the next tick, what a claimed tick does."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agentq.orchestrator.schedules.cron import (
    Catchup,
    ScheduleError,
    TickPlan,
    check_cron,
    check_name,
    next_tick_ms,
    plan_tick,
    zone,
)

pytestmark = pytest.mark.unit


def ms(year: int, month: int, day: int, hour: int = 0) -> int:
    return int(datetime(year, month, day, hour, tzinfo=UTC).timestamp() * 1000)


@pytest.mark.parametrize(
    ("cron", "tz", "after", "expected"),
    [
        # Thursday 26 Nov 2026, 03:00 UTC: the next weekday 09:00 is the same day's.
        ("0 9 * * MON-FRI", "UTC", ms(2026, 11, 26, 3), ms(2026, 11, 26, 9)),
        # Friday 09:00 passed: the next is Monday's.
        ("0 9 * * MON-FRI", "UTC", ms(2026, 11, 27, 9), ms(2026, 11, 30, 9)),
        # 09:00 in Lisbon is 09:00 UTC in winter, 08:00 UTC in summer.
        ("0 9 * * *", "Europe/Lisbon", ms(2026, 7, 1), ms(2026, 7, 1, 8)),
        ("0 9 * * *", "Europe/Lisbon", ms(2026, 12, 1), ms(2026, 12, 1, 9)),
        # Six fields: seconds last. Strictly after: a tick time gives the one after it.
        ("* * * * * *", "UTC", ms(2026, 11, 26, 3), ms(2026, 11, 26, 3) + 1000),
    ],
)
def test_next_tick(cron: str, tz: str, after: int, expected: int) -> None:
    assert next_tick_ms(cron, tz, after / 1000) == expected


T = ms(2026, 11, 26, 9)  # a tick of "0 9 * * *"
NEXT_DAY = ms(2026, 11, 27, 9)


@pytest.mark.parametrize(
    ("now_s", "catchup", "plan"),
    [
        (T / 1000, Catchup.ONE, TickPlan(True, NEXT_DAY, missed=False)),  # on time
        (T / 1000 + 9, Catchup.SKIP, TickPlan(True, NEXT_DAY, missed=False)),  # late, in grace
        # Missed while the fleet was down (three days): once, or not at all; the next
        # tick is the first after now, never one of the missed ones.
        (T / 1000 + 3 * 86_400 + 60, Catchup.ONE, TickPlan(True, ms(2026, 11, 30, 9), True)),
        (T / 1000 + 3 * 86_400 + 60, Catchup.SKIP, TickPlan(False, ms(2026, 11, 30, 9), True)),
    ],
)
def test_plan_tick(now_s: float, catchup: Catchup, plan: TickPlan) -> None:
    assert plan_tick("0 9 * * *", "UTC", T, now_s, catchup, grace_s=10) == plan


@pytest.mark.parametrize(
    ("check", "value", "says"),
    [
        (check_cron, "0 9 * *", "invalid cron"),
        (check_cron, "61 * * * *", "invalid cron"),
        (check_cron, "every day", "invalid cron"),
        (zone, "Mars/Olympus", "unknown time zone"),
        (check_name, "a b", "invalid schedule name"),
        (check_name, "x" * 65, "invalid schedule name"),
        (check_name, "", "invalid schedule name"),
    ],
)
def test_refusals_are_one_line(check: object, value: str, says: str) -> None:
    with pytest.raises(ScheduleError, match=says) as caught:
        check(value)  # type: ignore[operator]
    assert "\n" not in str(caught.value)


def test_valid_inputs_pass() -> None:
    assert check_cron("0 9 * * MON-FRI") == "0 9 * * MON-FRI"
    assert check_name("daily-digest_2") == "daily-digest_2"
    assert str(zone("Europe/Lisbon")) == "Europe/Lisbon"
