"""Gemini's explicit caching for a batch (workers/models/gemini_cache/), on the embedded
runtime against the Gemini fake over real HTTP, whose cachedContents follow the API's
documented rules (tests/support/fake_gemini_cache.py): one cached content per batch
template, created once, named by every line's requests, billed as cached, deleted when
the batch ends; none for a prefix under the model's minimum."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import pytest

from agentq.orchestrator.client import Client
from agentq.workers.worker.embedded import embedded
from tests.support.caching_loop import KEYS, SETTINGS, fetch
from tests.support.fake_gemini import FakeGemini, Turn
from tests.support.fake_gemini_cache import GeminiCache, contents_text
from tests.support.fake_http import Recorded
from tests.support.fake_openai import ToolCall
from tests.support.waiting import eventually_async

pytestmark = pytest.mark.integration

LINES = 5
LONG = "You are the support agent of a large retailer; answer with care. " * 100  # ~1,600 tokens


def answer(request: Recorded) -> Turn:
    """A call to `fetch` first, then the answer: two requests a line."""
    if "functionResponse" in contents_text(request.body):
        return Turn(text="done")
    return Turn(tool_calls=[ToolCall("fetch", {"page": 1, "size": 64})])


def template(base_url: str, system: str) -> dict[str, Any]:
    return {
        "model": {
            "provider": "gemini",
            "name": "gemini-2.5-flash",
            "base_url": base_url,
            "options": {"stream": False},
        },
        "system": system,
        "prompt": "Customer {{n}} asks about their order.",
        "tools": [{"type": "function", "name": "fetch"}],
    }


@contextmanager
def gemini() -> Iterator[tuple[FakeGemini, GeminiCache]]:
    cache = GeminiCache()
    with FakeGemini(answer, cache=cache) as server:
        yield server, cache


@pytest.fixture(params=["embedded", "redis-server"])
def redis_at(request: pytest.FixtureRequest) -> str | None:
    """The embedded Redis, or a real redis-server (its BLPOP and Lua for real)."""
    return None if request.param == "embedded" else str(request.getfixturevalue("redis_url"))


@asynccontextmanager
async def batch_run(
    base_url: str, system: str, redis_url: str | None
) -> AsyncIterator[tuple[Client, str]]:
    """A batch of LINES lines of the template, run to its end."""
    started = embedded(tools=[fetch], settings=SETTINGS, env=KEYS, redis_url=redis_url)
    async with started as client:
        lines = [{"vars": {"n": str(n)}} for n in range(LINES)]
        batch = await client.batches.submit(lines, template=template(base_url, system))
        await eventually_async(
            lambda: client.batches.status(batch.batch_id),
            "the batch to end",
            until=lambda b: b.status == "done",
        )
        yield client, batch.batch_id


def generations(server: FakeGemini) -> list[dict[str, Any]]:
    return [r.body for r in server.requests if r.path.endswith(":generateContent")]


async def test_a_batch_creates_one_cached_content_names_it_everywhere_and_deletes_it(
    redis_at: str | None,
) -> None:
    with gemini() as (server, cache):
        async with batch_run(server.base_url, LONG, redis_at) as (client, batch_id):
            results = [r async for r in client.batches.results(batch_id)]
            await eventually_async(
                lambda: cache.deleted, "the batch's end to delete its cached content"
            )
            left = await client.runs.store.redis.keys("*:cached*")
        creates = [r.body for r in server.requests if r.path.endswith("/cachedContents")]
    assert len(creates) == 1
    assert creates[0]["ttl"] == "300s"  # what ends it if the fleet dies first
    assert creates[0]["model"] == "models/gemini-2.5-flash"
    [name] = cache.created
    assert cache.deleted == [name]
    assert left == []
    bodies = generations(server)
    assert len(bodies) == 2 * LINES
    for body in bodies:
        assert body["cachedContent"] == name
        assert not {"systemInstruction", "tools", "toolConfig"} & set(body)
    held = cache.resources_created_tokens[name]
    assert [r.status for r in results] == ["succeeded"] * LINES
    usage = [r.usage for r in results if r.usage is not None]
    assert [u.cached_input_tokens for u in usage] == [2 * held] * LINES
    # The creation is the creating step's: written once, billed as a cache write.
    assert sorted(u.cache_write_tokens for u in usage) == [0] * (LINES - 1) + [held]


async def test_a_prefix_under_the_minimum_gets_no_cached_content() -> None:
    with gemini() as (server, cache):
        short = "You are the support agent."
        async with batch_run(server.base_url, short, None) as (client, batch_id):
            results = [r async for r in client.batches.results(batch_id)]
    assert [r.status for r in results] == ["succeeded"] * LINES
    assert cache.created == []
    assert not [r for r in server.requests if "cachedContents" in r.path]
    for body in generations(server):
        assert "cachedContent" not in body
        assert body["systemInstruction"] == {"parts": [{"text": "You are the support agent."}]}
