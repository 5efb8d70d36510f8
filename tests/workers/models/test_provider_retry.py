from __future__ import annotations

from datetime import UTC, datetime
from email.utils import format_datetime

import pytest

from agentq.orchestrator.core.errors import ProviderError
from agentq.orchestrator.policy.model_ref import ModelRef
from agentq.workers.models.base import DeltaSink, ModelRequest, ModelResponse
from agentq.workers.models.retry import (
    RetryPolicy,
    generate_with_retries,
    parse_retry_after,
    retryable_status,
)
from tests.support.sinks import ListSink

pytestmark = pytest.mark.unit

NOW = 1_700_000_000.0


def policy(**kw: object) -> RetryPolicy:
    # rng() == 0 removes jitter so delays are exact.
    return RetryPolicy(rng=lambda: 0.0, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (400, False),
        (401, False),
        (403, False),
        (404, False),
        (408, True),
        (409, True),
        (422, False),
        (429, True),
        (500, True),
        (502, True),
        (503, True),
        (529, True),
    ],
)
def test_retryable_status(status: int, expected: bool) -> None:
    assert retryable_status(status) is expected


@pytest.mark.parametrize(
    ("error", "attempt", "expected"),
    [
        # exponential: 0.5, 1, 2, 4 … capped at max_delay_s
        (ProviderError("x", status=500), 1, 0.5),
        (ProviderError("x", status=500), 2, 1.0),
        (ProviderError("x", status=503), 3, 2.0),
        (ProviderError("x", status=429), 1, 0.5),
        (ProviderError("x", status=408), 1, 0.5),
        (ProviderError("x", status=409), 1, 0.5),
        # Retry-After wins when longer than the backoff, backoff when longer
        (ProviderError("x", status=429, retry_after_s=7.0), 1, 7.0),
        (ProviderError("x", status=429, retry_after_s=0.1), 3, 2.0),
        # a Retry-After too far away is not waited for
        (ProviderError("x", status=429, retry_after_s=500.0), 1, None),
        # other 4xx are final whatever the provider said
        (ProviderError("x", status=400, retryable=True), 1, None),
        (ProviderError("x", status=401), 1, None),
        (ProviderError("x", status=404), 1, None),
        # no status: connection errors, timeouts — by the error's own flag
        (ProviderError("connect", retryable=True), 1, 0.5),
        (ProviderError("bad stream", retryable=False), 1, None),
        # attempts exhausted (max_attempts=4)
        (ProviderError("x", status=500), 4, None),
        (ProviderError("x", status=500), 9, None),
    ],
)
def test_decide(error: ProviderError, attempt: int, expected: float | None) -> None:
    assert policy().decide(error, attempt) == expected


def test_backoff_is_capped() -> None:
    assert (
        policy(max_attempts=20, max_delay_s=3.0).decide(ProviderError("x", status=500), 10) == 3.0
    )


@pytest.mark.parametrize(("rng", "expected"), [(0.0, 2.0), (1.0, 1.5), (0.5, 1.75)])
def test_jitter_shortens_the_delay_by_at_most_its_fraction(rng: float, expected: float) -> None:
    p = RetryPolicy(jitter=0.25, rng=lambda: rng)
    assert p.decide(ProviderError("x", status=500), 3) == expected


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({}, None),
        ({"Retry-After": "3"}, 3.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after-ms": "250"}, 0.25),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after-ms": "junk", "retry-after": "9"}, 9.0),
        ({"Retry-After": "-4"}, 0.0),
        ({"Retry-After": format_datetime(datetime.fromtimestamp(NOW + 12, UTC), True)}, 12.0),
        ({"Retry-After": format_datetime(datetime.fromtimestamp(NOW - 12, UTC), True)}, 0.0),
        ({"Retry-After": "soon"}, None),
    ],
)
def test_parse_retry_after(headers: dict[str, str], expected: float | None) -> None:
    assert parse_retry_after(headers, now_s=NOW) == expected


class Flaky:
    """Fails with the given errors, then answers."""

    def __init__(
        self, errors: list[ProviderError], stream_first: bool = False, stream_call: bool = False
    ) -> None:
        self.errors = errors
        self.timeouts: list[float] = []
        self.stream_first = stream_first
        self.stream_call = stream_call

    async def generate(self, request: ModelRequest, sink: DeltaSink) -> ModelResponse:
        self.timeouts.append(request.timeout_s)
        if self.stream_first:
            await sink.text_delta("partial")
        if self.stream_call:
            await sink.tool_input_start("c1", "add")
            await sink.tool_input_delta("c1", '{"a":')
        if self.errors:
            raise self.errors.pop(0)
        return ModelResponse(text="ok")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def request(timeout_s: float = 30.0) -> ModelRequest:
    return ModelRequest(
        model=ModelRef(provider="openai", name="m"), messages=[], timeout_s=timeout_s
    )


async def test_retries_then_succeeds_with_backoff_and_retry_after() -> None:
    clock = Clock()
    provider = Flaky(
        [ProviderError("busy", status=503), ProviderError("slow", status=429, retry_after_s=5)]
    )
    response = await generate_with_retries(
        provider, request(), ListSink(), policy(), None, clock=clock, sleep=clock.sleep
    )
    assert response.text == "ok"
    assert clock.slept == [0.5, 5.0]


async def test_final_error_is_raised_at_once() -> None:
    clock = Clock()
    provider = Flaky([ProviderError("bad request", status=400)])
    with pytest.raises(ProviderError, match="bad request"):
        await generate_with_retries(
            provider, request(), ListSink(), policy(), None, clock=clock, sleep=clock.sleep
        )
    assert clock.slept == []


async def test_never_sleeps_past_the_deadline() -> None:
    clock = Clock()
    provider = Flaky([ProviderError("slow", status=429, retry_after_s=20)])
    with pytest.raises(ProviderError, match="slow"):
        await generate_with_retries(
            provider, request(), ListSink(), policy(), clock() + 10, clock=clock, sleep=clock.sleep
        )
    assert clock.slept == []


async def test_each_attempt_gets_only_the_time_left() -> None:
    clock = Clock()
    provider = Flaky([ProviderError("a", status=500), ProviderError("b", status=500)])
    await generate_with_retries(
        provider, request(30.0), ListSink(), policy(), clock() + 10, clock=clock, sleep=clock.sleep
    )
    assert provider.timeouts == [10.0, 9.5, 8.5]


async def test_gives_up_after_max_attempts() -> None:
    clock = Clock()
    provider = Flaky([ProviderError(str(i), status=500) for i in range(10)])
    with pytest.raises(ProviderError, match="2"):
        await generate_with_retries(
            provider,
            request(),
            ListSink(),
            policy(max_attempts=3),
            None,
            clock=clock,
            sleep=clock.sleep,
        )
    assert len(provider.timeouts) == 3


async def test_no_retry_once_text_was_streamed() -> None:
    clock = Clock()
    sink = ListSink()
    provider = Flaky([ProviderError("cut", retryable=True)], stream_first=True)
    with pytest.raises(ProviderError, match="cut"):
        await generate_with_retries(
            provider, request(), sink, policy(), None, clock=clock, sleep=clock.sleep
        )
    assert sink.deltas == ["partial"]


async def test_a_cut_off_stream_of_tool_input_is_retried() -> None:
    """Only a committed call is acted on: the retry streams the call again from its start."""
    clock = Clock()
    sink = ListSink()
    provider = Flaky([ProviderError("cut", retryable=True)], stream_call=True)
    answer = await generate_with_retries(
        provider, request(), sink, policy(), None, clock=clock, sleep=clock.sleep
    )
    assert answer.text == "ok"
    assert [kind for kind, _, _ in sink.tool_inputs] == ["start", "delta", "start", "delta"]
