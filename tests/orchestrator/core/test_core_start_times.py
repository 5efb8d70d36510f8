"""A delayed run's start time as users write it (pure: `now` is passed in)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agentq.orchestrator.core.errors import StartTimeError
from agentq.orchestrator.core.start_times import parse_duration, parse_instant, start_time

pytestmark = pytest.mark.unit

NOW = datetime(2026, 11, 26, 3, 0, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30s", 30), ("10m", 600), ("2h", 7200), ("1d", 86_400), ("1h30m", 5400), (" 2H ", 7200)],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "10", "m", "10x", "-5m", "1.5h", "0s", "30m2h"])
def test_bad_durations_say_how_to_write_one(text: str) -> None:
    with pytest.raises(StartTimeError, match="duration"):
        parse_duration(text)


@pytest.mark.parametrize(
    ("text", "when"),
    [
        ("2026-12-01T09:00Z", datetime(2026, 12, 1, 9, 0, tzinfo=UTC)),
        ("2026-12-01T10:00:00+01:00", datetime(2026, 12, 1, 9, 0, tzinfo=UTC)),
        ("1796115600", datetime(2026, 12, 1, 9, 0, tzinfo=UTC)),
    ],
)
def test_instants(text: str, when: datetime) -> None:
    assert parse_instant(text) == when.timestamp()


@pytest.mark.parametrize(
    ("text", "says"),
    [("2026-12-01T09:00", "no zone"), ("tomorrow", "ISO 8601"), ("2026-13-01T09:00Z", "ISO")],
)
def test_bad_instants(text: str, says: str) -> None:
    with pytest.raises(StartTimeError, match=says):
        parse_instant(text)


def test_start_time_from_at_or_in() -> None:
    assert start_time(at=None, delay=None, now=NOW) is None
    assert start_time(at=None, delay="10m", now=NOW) == NOW + 600
    assert start_time(at="2026-12-01T09:00Z", delay=None, now=NOW) == parse_instant(
        "2026-12-01T09:00Z"
    )


@pytest.mark.parametrize(
    ("at", "delay", "says"),
    [("2026-11-26T02:59Z", None, "in the past"), ("2026-12-01T09:00Z", "1m", "not both")],
)
def test_start_time_refusals(at: str | None, delay: str | None, says: str) -> None:
    with pytest.raises(StartTimeError, match=says):
        start_time(at=at, delay=delay, now=NOW)
