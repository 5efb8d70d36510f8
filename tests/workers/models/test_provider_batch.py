"""Provider batch APIs end to end: real redis-server, `agentq worker` processes, and the
fakes' OpenAI Batch / Anthropic Message Batches endpoints on loopback.

A `"batch": true` run must finish as the same run would directly (same text, tool
calls, usage), its steps counted as batch-priced; a failed or expired line goes
direct; a collector killed mid-poll is replaced and nothing is submitted twice.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis

from agentq.orchestrator.batches.usage import batch_priced_usage
from agentq.orchestrator.client import Client
from agentq.orchestrator.core import keys
from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.runs.result import RunResult
from tests.support.fake_anthropic import FakeAnthropic
from tests.support.fake_anthropic import Turn as ATurn
from tests.support.fake_http import Recorded
from tests.support.fake_openai import FakeOpenAI, ToolCall, Turn
from tests.support.fake_responses import FakeResponses
from tests.support.fake_responses import Turn as RTurn
from tests.support.infra import TOOLS, WorkerProcess, wait_ready
from tests.support.waiting import eventually_async

# Specs here name the loopback fakes as endpoints (a deployment must allow it).
pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("allow_loopback_endpoints")]

BATCH_ENV = {
    "OPENAI_API_KEY": "sk-batch-test",
    "ANTHROPIC_API_KEY": "sk-ant-batch-test",
    "AGENTQ_PROVIDER_BATCH_MAX_AGE_S": "0",
    "AGENTQ_PROVIDER_BATCH_POLL_S": "0.1",
    "AGENTQ_PROVIDER_BATCH_LEASE_S": "2",
}


@pytest.fixture
def workers() -> Iterator[list[WorkerProcess]]:
    started: list[WorkerProcess] = []
    yield started
    for worker in started:
        worker.stop()


def start(redis_url: str, workers: list[WorkerProcess], n: int = 1, **env: str) -> None:
    workers += [
        WorkerProcess(redis_url, "--tools", TOOLS, env={**BATCH_ENV, **env}) for _ in range(n)
    ]
    wait_ready(*workers)


def spec(
    provider: str, base_url: str, *, batch: bool, prompt: str = "add 1 and 2"
) -> dict[str, Any]:
    return {
        "model": {"provider": provider, "name": "m-1", "base_url": base_url, "batch": batch},
        "prompt": prompt,
        "tools": [{"type": "function", "name": "add"}],
    }


async def run(redis_url: str, body: dict[str, Any]) -> tuple[str, RunResult]:
    async with Client(redis_url) as client:
        run_id = await client.runs.submit(body)
        return run_id, await client.runs.wait(run_id, timeout_s=120)


def direct_calls(requests: list[Recorded], path: str) -> list[Recorded]:
    return [r for r in requests if r.method == "POST" and r.path == path]


def shape(result: RunResult) -> Any:
    """What a batch run and a direct run must agree on."""
    return (
        result.status,
        result.text,
        [(s.text, [(c.name, c.input) for c in s.tool_calls]) for s in result.steps],
        [[r.output for r in s.tool_results] for s in result.steps],
        result.usage,
    )


def two_turns_openai() -> list[Turn]:
    return [Turn(tool_calls=[ToolCall("add", {"a": 1, "b": 2})]), Turn(text="it is 3")]


async def test_openai_batch_run_finishes_as_the_direct_run(
    redis_url: str, workers: list[WorkerProcess], tmp_path: Path
) -> None:
    start(redis_url, workers)
    with FakeOpenAI(two_turns_openai()) as direct, FakeOpenAI(two_turns_openai()) as batched:
        _, expected = await run(redis_url, spec("openai", direct.base_url, batch=False))
        run_id, result = await run(redis_url, spec("openai", batched.base_url, batch=True))
    assert result.status == "succeeded", result.error
    assert shape(result) == shape(expected)
    assert direct_calls(batched.requests, "/v1/chat/completions") == []
    assert len(batched.batches.creations(batched.requests)) == 2  # one per step
    uploads = direct_calls(batched.requests, "/v1/files")
    assert len(uploads) == 2
    created = batched.batches.creations(batched.requests)[0].body
    assert created["endpoint"] == "/v1/chat/completions"
    assert created["completion_window"] == "24h"
    # The key went to the provider's batch API as it goes to a direct call.
    assert all(r.headers["authorization"] == "Bearer sk-batch-test" for r in batched.requests)

    redis = Redis.from_url(redis_url)
    try:
        prices = tmp_path / "prices.json"
        prices.write_text(json.dumps({"openai:m-1": {"input": 2.0, "output": 8.0}}))
        usage = await batch_priced_usage(redis, [run_id], Settings(prices=str(prices)))
        step_marks = [await redis.hget(keys.step(run_id, n), "batch") for n in range(2)]
    finally:
        await redis.aclose()
    assert usage.steps == 2
    assert usage.input_tokens == result.usage.input_tokens
    assert usage.output_tokens == result.usage.output_tokens
    expected_saving = (usage.input_tokens * 2.0 + usage.output_tokens * 8.0) / 1e6 * 0.5
    assert usage.estimated_saving_usd == pytest.approx(expected_saving)
    assert step_marks == [b"1", b"1"]
    assert [s.batch_priced for s in result.steps] == [True, True]
    assert [s.batch_priced for s in expected.steps] == [False, False]


async def test_openai_responses_batch_uses_the_responses_endpoint(
    redis_url: str, workers: list[WorkerProcess]
) -> None:
    start(redis_url, workers)
    with FakeResponses([RTurn(text="hello")]) as fake:
        _, result = await run(redis_url, spec("openai-responses", fake.base_url, batch=True))
    assert result.status == "succeeded", result.error
    assert result.text == "hello"
    (created,) = fake.batches.creations(fake.requests)
    assert created.body["endpoint"] == "/v1/responses"
    assert direct_calls(fake.requests, "/v1/responses") == []


async def test_anthropic_batch_run_finishes_as_the_direct_run(
    redis_url: str, workers: list[WorkerProcess]
) -> None:
    def turns() -> list[ATurn]:
        return [ATurn(tool_calls=[ToolCall("add", {"a": 1, "b": 2})]), ATurn(text="it is 3")]

    start(redis_url, workers)
    with FakeAnthropic(turns()) as direct, FakeAnthropic(turns()) as batched:
        _, expected = await run(redis_url, spec("anthropic", direct.base_url, batch=False))
        _, result = await run(redis_url, spec("anthropic", batched.base_url, batch=True))
    assert result.status == "succeeded", result.error
    assert shape(result) == shape(expected)
    assert direct_calls(batched.requests, "/v1/messages") == []
    creations = batched.batches.creations(batched.requests)
    assert len(creations) == 2
    assert all(r.headers["x-api-key"] == "sk-ant-batch-test" for r in batched.requests)


def answer_by_prompt(request: Recorded) -> Turn:
    """A direct or batch answer that names its prompt, whatever order lines come in."""
    prompt = request.body["messages"][-1]["content"]
    return Turn(text=f"answer to {prompt}")


async def test_a_failed_line_is_retried_directly(
    redis_url: str, workers: list[WorkerProcess]
) -> None:
    start(
        redis_url,
        workers,
        AGENTQ_PROVIDER_BATCH_MAX_REQUESTS="2",
        AGENTQ_PROVIDER_BATCH_MAX_AGE_S="60",
    )
    with FakeOpenAI(answer_by_prompt) as fake:
        fake.batches.script.error_lines = {0}
        async with Client(redis_url) as client:
            ids = [
                await client.runs.submit(
                    {**spec("openai", fake.base_url, batch=True, prompt=p), "tools": []}
                )
                for p in ("one", "two")
            ]
            results = [await client.runs.wait(run_id, timeout_s=120) for run_id in ids]
    assert [r.text for r in results] == ["answer to one", "answer to two"]
    assert len(fake.batches.creations(fake.requests)) == 1  # both lines in one batch
    assert len(direct_calls(fake.requests, "/v1/chat/completions")) == 1  # the failed line


async def test_an_expired_batch_goes_direct(redis_url: str, workers: list[WorkerProcess]) -> None:
    start(redis_url, workers)
    with FakeAnthropic([ATurn(text="late but here")]) as fake:
        fake.batches.script.outcome = "expired"
        _, result = await run(
            redis_url, {**spec("anthropic", fake.base_url, batch=True), "tools": []}
        )
    assert result.status == "succeeded", result.error
    assert result.text == "late but here"
    assert len(fake.batches.creations(fake.requests)) == 1
    assert len(direct_calls(fake.requests, "/v1/messages")) == 1


async def test_a_collector_killed_mid_poll_is_replaced_without_a_second_submission(
    redis_url: str, workers: list[WorkerProcess]
) -> None:
    start(redis_url, workers, n=2)
    hold = threading.Event()
    with FakeOpenAI(two_turns_openai()[1:]) as fake:
        fake.batches.script.hold = hold
        body = {**spec("openai", fake.base_url, batch=True), "tools": []}
        redis = Redis.from_url(redis_url)
        try:
            async with Client(redis_url) as client:
                run_id = await client.runs.submit(body)

                def polled() -> bool:
                    return any(
                        r.method == "GET" and r.path.startswith("/v1/batches/")
                        for r in fake.requests
                    )

                await eventually_async(polled, "the collector to poll its batch", timeout_s=60)
                (group,) = [g.decode() for g in await redis.smembers(keys.PROVIDER_BATCH_GROUPS)]
                holder = (await redis.get(keys.provider_batch_lease(group))).decode()
                victim = next(w for w in workers if f"-{w.pid}-" in holder)
                victim.kill()
                hold.set()
                result = await client.runs.wait(run_id, timeout_s=120)
            new_holder = (await redis.get(keys.provider_batch_lease(group))).decode()
        finally:
            await redis.aclose()
    assert result.status == "succeeded", result.error
    assert result.text == "it is 3"
    assert new_holder != holder
    assert len(fake.batches.creations(fake.requests)) == 1
    assert len(direct_calls(fake.requests, "/v1/files")) == 1
    assert direct_calls(fake.requests, "/v1/chat/completions") == []


async def test_a_refused_line_fails_the_step_as_a_direct_call_would(
    redis_url: str, workers: list[WorkerProcess]
) -> None:
    start(redis_url, workers)
    with FakeOpenAI([Turn(text="never")]) as fake:
        fake.batches.script.error_lines = {0}
        fake.batches.script.error_status = 400
        _, result = await run(redis_url, {**spec("openai", fake.base_url, batch=True), "tools": []})
    assert result.status == "failed"
    assert result.error is not None
    assert result.error.kind == "provider"
    assert "scripted line error" in result.error.message
    assert direct_calls(fake.requests, "/v1/chat/completions") == []


@pytest.mark.parametrize(
    ("provider", "outcome"),
    [("openai", "failed"), ("openai", "cancelled"), ("anthropic", "cancelled")],
)
async def test_a_batch_that_ends_without_answers_goes_direct(
    redis_url: str, workers: list[WorkerProcess], provider: str, outcome: str
) -> None:
    start(redis_url, workers)
    fake: FakeOpenAI | FakeAnthropic = (
        FakeOpenAI([Turn(text="direct")])
        if provider == "openai"
        else FakeAnthropic([ATurn(text="direct")])
    )
    with fake:
        fake.batches.script.outcome = outcome
        _, result = await run(redis_url, {**spec(provider, fake.base_url, batch=True), "tools": []})
        polls = [r for r in fake.requests if r.method == "GET" and "batches/" in r.path]
    assert result.status == "succeeded", result.error
    assert result.text == "direct"
    assert len(fake.batches.creations(fake.requests)) == 1
    assert len(polls) >= (1 if outcome == "failed" else 2)  # through the states to its end
