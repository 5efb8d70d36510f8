"""Each tool output is stored once (in its step), on a real redis-server, yet the run's
result, its events (as any reader gets them) and the next step's history show it as
they always did."""

from __future__ import annotations

from typing import Any

import pytest
from redis.asyncio import Redis

from agentq import tool
from agentq.orchestrator.client import Client
from agentq.orchestrator.core import keys
from agentq.orchestrator.core.envelopes import MODEL_QUEUE, TOOLS_QUEUE
from agentq.orchestrator.core.messages import ToolMessage
from agentq.workers.tools.function import FunctionExecutor
from agentq.workers.worker.runtime import WorkerRuntime
from tests.support.specs import calls, scripted

pytestmark = pytest.mark.integration

OUTPUT_BYTES = 20_000


@tool
async def blob(seed: str, size: int) -> str:
    """A distinctive output of `size` bytes."""
    return (seed * size)[:size]


def _spec(seed: str, size: int, steps: int) -> dict[str, Any]:
    script = [calls(("blob", {"seed": f"{seed}{i}-", "size": size})) for i in range(steps)]
    return scripted(*script, {"text": "done"}, tools=["blob"], max_steps=steps + 1)


async def _run_keys(redis: Redis, run_id: str) -> list[str]:
    found = redis.scan_iter(match=f"*{keys.tag(run_id)}*", count=1000)
    return [key.decode() async for key in found]


async def _stored_values(redis: Redis, key: str) -> list[bytes]:
    """Every value a key holds, whatever its type."""
    kind = (await redis.type(key)).decode()
    if kind == "string":
        return [await redis.get(key) or b""]
    if kind == "hash":
        return list((await redis.hgetall(key)).values())  # type: ignore[misc]
    if kind == "list":
        return list(await redis.lrange(key, 0, -1))  # type: ignore[misc]
    if kind == "stream":
        return [v for _, fields in await redis.xrange(key) for v in fields.values()]
    return []


async def _bytes_of(redis: Redis, run_id: str) -> int:
    return sum(
        [int(await redis.memory_usage(k, samples=0) or 0) for k in await _run_keys(redis, run_id)]
    )


async def test_a_tool_output_is_stored_once_and_shown_unchanged(redis_url: str) -> None:
    runtime = WorkerRuntime(
        redis_url, executors=[FunctionExecutor([blob])], queues=[MODEL_QUEUE, TOOLS_QUEUE]
    )
    await runtime.start()
    try:
        async with Client(redis_url) as client:
            steps = 3
            big = await client.runs.submit(_spec("big", OUTPUT_BYTES, steps))
            small = await client.runs.submit(_spec("small", 2, steps))
            big_result = await client.runs.wait(big, timeout_s=60)
            small_result = await client.runs.wait(small, timeout_s=60)
            events = [e async for e in client.runs.events(big)]
            redis = client.redis
            outputs = [(f"big{i}-" * OUTPUT_BYTES)[:OUTPUT_BYTES] for i in range(steps)]
            values = [
                v for k in await _run_keys(redis, big) for v in await _stored_values(redis, k)
            ]
            copies = {
                i: sum(value.count(output.encode()) for value in values)
                for i, output in enumerate(outputs)
            }
            extra = await _bytes_of(redis, big) - await _bytes_of(redis, small)
    finally:
        await runtime.stop()

    assert big_result.status == "succeeded", big_result.error
    assert small_result.status == "succeeded", small_result.error
    assert copies == dict.fromkeys(range(steps), 1)  # in the step, not the list or events
    # MEMORY USAGE: what the outputs add to the run is about their size, once.
    assert extra < 1.2 * steps * OUTPUT_BYTES, extra
    # Shown as before: the result's steps and messages, and the events.
    assert [s.tool_results[0].output for s in big_result.steps[:steps]] == outputs
    tool_messages = [m for m in big_result.messages if isinstance(m, ToolMessage)]
    assert [m.content[0].output for m in tool_messages] == outputs
    shown = [(e.step, e.model_dump().get("output")) for e in events if e.type == "tool-result"]
    assert shown == list(enumerate(outputs))
    assert not any("output_ref" in e.model_dump() for e in events)
