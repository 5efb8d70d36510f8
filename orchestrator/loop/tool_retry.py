"""Whether a failed tool execution is tried again, and after how long (pure)."""

from __future__ import annotations

from agentq.orchestrator.tools.base import ToolRetry


def retry_delay_s(
    policy: ToolRetry | None, attempt: int, retryable: bool, remaining_s: float
) -> float | None:
    """The wait before execution `attempt + 1`, or None to give up: no policy, an error
    that says trying again will not help, the attempts used up, or no time left."""
    if policy is None or not retryable or attempt >= policy.max_attempts:
        return None
    delay_s = policy.backoff_s * 2 ** (attempt - 1)
    return delay_s if delay_s < remaining_s else None
