"""A 5-step run with a growing history against the caching-aware fakes (real HTTP, the
embedded runtime): from step 2 on, each step reads from the cache everything the step
before it sent, and the usage says so per step and in total."""

from __future__ import annotations

import itertools
import json

import pytest

from agentq.workers.worker.embedded import embedded
from tests.support.caching_loop import KEYS, PROVIDERS, SETTINGS, Loop, fake_for, run_loop
from tests.support.fake_openai import FakeOpenAI, Turn
from tests.support.waiting import eventually_async

pytestmark = pytest.mark.integration


async def test_anthropic_reads_the_whole_previous_request_from_cache() -> None:
    loop = Loop("anthropic", steps=5)
    with fake_for(loop) as server:
        result = await run_loop(loop, server.base_url)
    assert result.status == "succeeded", result.error
    usage = [s.usage for s in result.steps]
    assert len(usage) == 5
    # Step 1 writes its whole prompt (system, tools, the question); nothing to read yet.
    assert (usage[0].cached_input_tokens, usage[0].cache_write_tokens) == (0, usage[0].input_tokens)
    for before, step in itertools.pairwise(usage):
        assert step.cached_input_tokens == before.input_tokens
        assert step.cache_write_tokens == step.input_tokens - before.input_tokens
    assert result.usage.cached_input_tokens == sum(u.input_tokens for u in usage[:-1])


@pytest.mark.parametrize("provider", ["openai", "openai-responses"])
async def test_openai_reads_the_previous_request_from_cache(provider: str) -> None:
    loop = Loop(provider, steps=5)
    with fake_for(loop) as server:
        result = await run_loop(loop, server.base_url)
        keys = {r.body.get("prompt_cache_key") for r in server.requests}
    assert result.status == "succeeded", result.error
    assert len(keys) == 1
    assert None not in keys
    usage = [s.usage for s in result.steps]
    assert usage[0].cached_input_tokens == 0
    for before, step in itertools.pairwise(usage):
        # The cache answers in steps of 128 tokens: all but the last, partial, step.
        assert before.input_tokens - 128 < step.cached_input_tokens <= before.input_tokens


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_the_system_prompt_and_tools_are_sent_byte_identical(provider: str) -> None:
    loop = Loop(provider, steps=3)
    with fake_for(loop) as server:
        await run_loop(loop, server.base_url)
        bodies = [r.body for r in server.requests]
    for field in ("tools", "system", "instructions", "systemInstruction", "toolConfig"):
        assert len({json.dumps(b.get(field)) for b in bodies}) == 1, field


async def test_gemini_reads_the_previous_request_from_its_implicit_cache() -> None:
    """A stable prefix keeps the implicit cache effective: each step's request repeats the
    one before it, so all of that is reported cached."""
    loop = Loop("gemini", steps=5)
    with fake_for(loop) as server:
        result = await run_loop(loop, server.base_url)
    assert result.status == "succeeded", result.error
    usage = [s.usage for s in result.steps]
    assert usage[0].cached_input_tokens == 0
    for before, step in itertools.pairwise(usage):
        # The previous prompt, less its last content's closing characters.
        assert before.input_tokens - 2 <= step.cached_input_tokens <= before.input_tokens


async def test_off_caches_nothing_on_anthropic() -> None:
    loop = Loop("anthropic", steps=3, cache="off")
    with fake_for(loop) as server:
        result = await run_loop(loop, server.base_url)
    assert result.status == "succeeded", result.error
    assert (result.usage.cached_input_tokens, result.usage.cache_write_tokens) == (0, 0)


async def test_a_batch_templates_key_is_shared_within_a_tenant_only() -> None:
    """Two tenants run the same template naming the same key: each tenant's runs send one
    key, and the two tenants' keys differ (a shared cache would show one tenant's prompts
    in the other's timings)."""
    template = {
        "model": {
            "provider": "openai",
            "name": "gpt-4o",
            "base_url": "",
            "options": {"cache": {"key": "support-agent"}, "stream": False},
        },
        "system": "You are the support agent.",
        "prompt": "{{tenant}} {{n}}",
    }
    with FakeOpenAI(lambda _: Turn(text="done")) as server:
        template["model"]["base_url"] = server.base_url  # type: ignore[index]
        async with embedded(settings=SETTINGS, env=KEYS) as client:
            for tenant in ("acme", "globex"):
                lines = [{"vars": {"tenant": tenant, "n": str(n)}} for n in range(3)]
                batch = await client.batches.submit(lines, template=template, tenant=tenant)
                await eventually_async(
                    lambda: client.batches.status(batch.batch_id, tenant=tenant),  # noqa: B023
                    f"{tenant}'s batch to end",
                    until=lambda b: b.status == "done",
                )
        keys: dict[str, set[str]] = {}
        for request in server.requests:
            tenant = request.body["messages"][-1]["content"].split()[0]
            keys.setdefault(tenant, set()).add(request.body["prompt_cache_key"])
    assert len(server.requests) == 6
    assert [len(k) for k in keys.values()] == [1, 1]
    assert keys["acme"] != keys["globex"]
