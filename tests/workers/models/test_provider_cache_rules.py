"""The provider fakes' prompt-cache rules (tests/support/fake_cache.py), which the caching
tests and bench/caching.py rely on: Anthropic writes a marked prefix and reads it back
within its TTL, caches nothing below the minimum, refuses a 5th breakpoint; OpenAI reports
a repeated prefix of 1,024 tokens or more, in steps of 128, per cache key."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.fake_cache import AnthropicCache, Clock, OpenAICache

pytestmark = pytest.mark.unit

MARK = {"type": "ephemeral"}
LONG = "x" * 8000  # 2,000 tokens


def anthropic(*texts: str, marked: tuple[int, ...] = (), ttl: str = "5m") -> dict[str, Any]:
    blocks = []
    for i, text in enumerate(texts):
        block: dict[str, Any] = {"type": "text", "text": text}
        if i in marked:
            block["cache_control"] = {**MARK, "ttl": ttl}
        blocks.append(block)
    return {"model": "claude", "messages": [{"role": "user", "content": blocks}]}


def test_a_marked_prefix_is_written_then_read_within_its_ttl() -> None:
    clock = Clock()
    cache = AnthropicCache(clock=clock)
    body = anthropic(LONG, "question", marked=(0,))
    first = cache.usage(body)
    assert first["cache_read_input_tokens"] == 0
    assert first["cache_creation_input_tokens"] > 2000
    clock.advance(299)
    second = cache.usage(body)
    assert second["cache_read_input_tokens"] == first["cache_creation_input_tokens"]
    assert second["cache_creation_input_tokens"] == 0
    # The read refreshed it: 299 s after the read it is still there; 301 s after, gone.
    clock.advance(299)
    assert cache.usage(body)["cache_read_input_tokens"] > 0
    clock.advance(301)
    assert cache.usage(body)["cache_read_input_tokens"] == 0


def test_the_one_hour_ttl_outlives_five_minutes() -> None:
    clock = Clock()
    cache = AnthropicCache(clock=clock)
    body = anthropic(LONG, "q", marked=(0,), ttl="1h")
    cache.usage(body)
    clock.advance(3000)
    assert cache.usage(body)["cache_read_input_tokens"] > 0


def test_a_prefix_below_the_minimum_is_not_cached() -> None:
    cache = AnthropicCache()
    body = anthropic("short", "q", marked=(0,))
    for _ in range(2):
        usage = cache.usage(body)
        assert (usage["cache_read_input_tokens"], usage["cache_creation_input_tokens"]) == (0, 0)


def test_a_longer_request_reads_the_prefix_and_writes_the_rest() -> None:
    cache = AnthropicCache()
    cache.usage(anthropic(LONG, marked=(0,)))
    grown = cache.usage(anthropic(LONG, LONG, "q", marked=(0, 1)))
    assert grown["cache_read_input_tokens"] > 2000
    assert grown["cache_creation_input_tokens"] > 2000
    assert grown["input_tokens"] < 20  # the block "q", after the last breakpoint


def test_a_fifth_breakpoint_is_refused_as_the_api_does() -> None:
    assert AnthropicCache.refusal(anthropic(*"abcd", marked=(0, 1, 2, 3))) is None
    assert AnthropicCache.refusal(anthropic(*"abcde", marked=(0, 1, 2, 3, 4))) == (
        "A maximum of 4 blocks with cache_control may be provided. Found 5."
    )


def openai(*messages: str, key: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "gpt",
        "messages": [{"role": "user", "content": m} for m in messages],
    }
    if key is not None:
        body["prompt_cache_key"] = key
    return body


def test_openai_caches_a_repeated_prefix_of_1024_tokens_in_steps_of_128() -> None:
    cache = OpenAICache()
    short = "y" * 4000  # 1,000 tokens of a prefix: under the minimum
    assert cache.cached_tokens(openai(short))[1] == 0
    assert cache.cached_tokens(openai(short, "next"))[1] == 0
    total, cached = cache.cached_tokens(openai(LONG))
    assert cached == 0
    total, cached = cache.cached_tokens(openai(LONG, "and a question"))
    assert cached >= 1024
    assert (cached - 1024) % 128 == 0
    assert total - cached < 128 + 10


def test_openai_caches_per_key() -> None:
    cache = OpenAICache()
    cache.cached_tokens(openai(LONG, key="a"))
    assert cache.cached_tokens(openai(LONG, "q", key="b"))[1] == 0
    assert cache.cached_tokens(openai(LONG, "q", key="a"))[1] > 0


def test_openai_forgets_after_five_minutes() -> None:
    clock = Clock()
    cache = OpenAICache(clock=clock)
    cache.cached_tokens(openai(LONG))
    clock.advance(301)
    assert cache.cached_tokens(openai(LONG, "q"))[1] == 0
