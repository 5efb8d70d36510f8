"""Retrying provider calls: a pure decision, and a loop that honours a deadline.

The decision is a function of the error and the attempt number only, so it is
tested as a table. The loop never sleeps past the deadline: a wait that would
end after it is not started, and the last error is raised instead.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime

from agentq.orchestrator.core.errors import ProviderError
from agentq.workers.models.base import DeltaSink, ModelRequest, ModelResponse, Provider

RETRYABLE_STATUSES = frozenset({408, 409, 429})


def retryable_status(status: int) -> bool:
    """408 timeout, 409 conflict (lock contention), 429 rate limit and 5xx are transient."""
    return status in RETRYABLE_STATUSES or status >= 500


def parse_retry_after(headers: Mapping[str, str], now_s: float | None = None) -> float | None:
    """Seconds to wait from `retry-after-ms`, or `Retry-After` (seconds or an HTTP date)."""
    lowered = {k.lower(): v for k, v in headers.items()}
    millis = lowered.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000.0)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now_s is None else now_s))


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with jitter. `attempt` counts the attempts already made (1 = the
    first call failed). `jitter` is the fraction of the delay that is randomized downward,
    so that workers that failed together do not retry together."""

    max_attempts: int = 4
    base_delay_s: float = 0.5
    max_delay_s: float = 30.0
    jitter: float = 0.25
    # A Retry-After beyond this is treated as "not soon": the call fails instead of waiting.
    max_retry_after_s: float = 120.0
    # Once text has been streamed to the sink, a retry would show it twice; like the AI SDK
    # the call then fails (the job may still be re-delivered as a whole).
    retry_after_output: bool = False
    rng: Callable[[], float] = field(default=random.random, compare=False)

    def decide(self, error: ProviderError, attempt: int) -> float | None:
        """The delay before the next attempt, or None when the error is final."""
        if attempt >= self.max_attempts or not is_retryable(error):
            return None
        backoff = min(self.max_delay_s, self.base_delay_s * 2.0 ** (attempt - 1))
        delay = backoff * (1.0 - self.jitter * self.rng())
        if error.retry_after_s is not None:
            if error.retry_after_s > self.max_retry_after_s:
                return None
            # The server knows when capacity returns; backoff only adds spread on top.
            delay = max(delay, error.retry_after_s)
        return delay


def is_retryable(error: ProviderError) -> bool:
    """By status when there was an HTTP answer; otherwise (connection errors, timeouts,
    errors inside a stream) by what the provider decided."""
    if error.status is not None:
        return retryable_status(error.status)
    return error.retryable


class _CountingSink:
    def __init__(self, inner: DeltaSink) -> None:
        self.inner = inner
        self.emitted = False

    async def text_delta(self, delta: str) -> None:
        if delta:
            self.emitted = True
        await self.inner.text_delta(delta)

    async def reasoning_delta(self, delta: str) -> None:
        if delta:
            self.emitted = True
        await self.inner.reasoning_delta(delta)

    # Streamed tool input does not count: a call's input is acted on only once the step
    # commits it, and a retry streams its calls again (a start again for the same id
    # starts that call's input over), so a cut-off stream of arguments is retried as
    # before rather than failing the run.
    async def tool_input_start(self, call_id: str, tool_name: str) -> None:
        await self.inner.tool_input_start(call_id, tool_name)

    async def tool_input_delta(self, call_id: str, delta: str) -> None:
        await self.inner.tool_input_delta(call_id, delta)


# The policy of a client given none: one, not one built per call (it is frozen).
DEFAULT_RETRY = RetryPolicy()


async def generate_with_retries(
    provider: Provider,
    request: ModelRequest,
    sink: DeltaSink,
    policy: RetryPolicy | None = None,
    deadline: float | None = None,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> ModelResponse:
    """Call `provider.generate`, retrying transient failures.

    `deadline` is on the `clock` (time.monotonic by default). Each attempt gets
    `timeout_s = min(request.timeout_s, time left)`, and no wait ends past the deadline.
    """
    policy = policy or DEFAULT_RETRY
    attempt = 0
    while True:
        attempt += 1
        attempt_request = request
        if deadline is not None:
            left = deadline - clock()
            if left <= 0:
                raise ProviderError(
                    f"{request.model.label}: the step's deadline passed before attempt {attempt}",
                    retryable=False,
                )
            if left < request.timeout_s:
                attempt_request = request.model_copy(update={"timeout_s": left})
        counting = _CountingSink(sink)
        try:
            return await provider.generate(attempt_request, counting)
        except ProviderError as error:
            delay = policy.decide(error, attempt)
            if delay is None or (counting.emitted and not policy.retry_after_output):
                raise
            if deadline is not None and clock() + delay >= deadline:
                raise
            notice = getattr(sink, "retrying", None)  # shown live (`agentq run`) where supported
            if notice is not None:
                await notice(error, delay, attempt + 1, policy.max_attempts)
            await sleep(delay)
