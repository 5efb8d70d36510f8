"""The per-tool retry decision, as a table."""

from __future__ import annotations

import pytest

from agentq.orchestrator.loop.tool_retry import retry_delay_s
from agentq.orchestrator.tools.base import ToolRetry

pytestmark = pytest.mark.unit

POLICY = ToolRetry(max_attempts=3, backoff_s=0.5)


@pytest.mark.parametrize(
    ("policy", "attempt", "retryable", "remaining_s", "delay_s"),
    [
        pytest.param(None, 1, True, 60.0, None, id="no-policy"),
        pytest.param(POLICY, 1, False, 60.0, None, id="not-retryable"),
        pytest.param(POLICY, 1, True, 60.0, 0.5, id="first-retry"),
        pytest.param(POLICY, 2, True, 60.0, 1.0, id="backoff-doubles"),
        pytest.param(POLICY, 3, True, 60.0, None, id="attempts-used-up"),
        pytest.param(POLICY, 2, True, 0.9, None, id="no-time-left"),
    ],
)
def test_retry_delay(
    policy: ToolRetry | None,
    attempt: int,
    retryable: bool,
    remaining_s: float,
    delay_s: float | None,
) -> None:
    assert retry_delay_s(policy, attempt, retryable, remaining_s) == delay_s
