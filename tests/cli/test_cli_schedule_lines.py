"""`agentq schedule runs`' line for a tick that fired no run: why, and a refusal's message."""

from __future__ import annotations

import pytest

from agentq.cli.schedule import _skipped
from agentq.orchestrator.schedules.state import TickRecord

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("record", "line"),
    [
        (TickRecord(tick=1, skipped="overlap", at=1), "skipped: overlap"),
        (
            TickRecord(tick=1, skipped="refused", error="no worker serves 'gone'", at=1),
            "skipped: refused: no worker serves 'gone'",
        ),
    ],
)
def test_a_skipped_tick_says_why(record: TickRecord, line: str) -> None:
    assert _skipped(record) == line
