from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import fakeredis
import httpx
import pytest
import redis.asyncio as aioredis

from agentq.orchestrator.core.messages import UserMessage
from agentq.orchestrator.policy.endpoints import EndpointPolicy
from agentq.orchestrator.policy.model_ref import ModelRef
from agentq.workers.models import providers
from agentq.workers.models.base import ModelRequest
from agentq.workers.models.model_client import ModelClient
from agentq.workers.models.ratelimit import LimitKey, Limits, RateLimiter, limit_key
from agentq.workers.models.retry import RetryPolicy
from tests.support.fake_openai import FakeOpenAI, Turn, rate_limited
from tests.support.infra import RedisServer
from tests.support.sinks import ListSink

# Specs here name the loopback fakes as endpoints (a deployment must allow it).
pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("allow_loopback_endpoints")]

SECRET = "sk-ratelimit-secret-0123456789"
KEY = LimitKey("openai", "gpt-x", "abc123")


@pytest.fixture(params=["fakeredis", "redis-server"])
async def redis(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    if request.param == "fakeredis":
        client: Any = fakeredis.FakeAsyncRedis()
    else:
        server: RedisServer = request.getfixturevalue("redis_server")
        client = aioredis.Redis(port=server.port)
        await client.flushall()
    yield client
    await client.aclose()


async def test_requests_per_minute_are_shared_by_workers(redis: Any) -> None:
    limits = {("openai", "gpt-x"): Limits(requests_per_minute=3)}
    worker_a, worker_b = RateLimiter(redis, limits), RateLimiter(redis, limits)
    waits = [
        (await worker_a.try_acquire(KEY, 1))[0],
        (await worker_b.try_acquire(KEY, 1))[0],
        (await worker_a.try_acquire(KEY, 1))[0],
    ]
    assert waits == [0.0, 0.0, 0.0]
    wait_s, ticket = await worker_b.try_acquire(KEY, 1)
    # Until the oldest admission leaves the window, plus the script's 1 ms margin: up
    # to 60.001 s when all three were admitted within the current millisecond.
    assert 0 < wait_s <= 60.001
    assert ticket == ""


async def test_tokens_per_minute_with_correction(redis: Any) -> None:
    limiter = RateLimiter(redis, {("openai", "*"): Limits(tokens_per_minute=100)})
    _, ticket = await limiter.try_acquire(KEY, 60)
    assert ticket
    assert (await limiter.try_acquire(KEY, 60))[0] > 0
    await limiter.correct(KEY, ticket, estimated=60, actual=10)
    assert (await limiter.try_acquire(KEY, 60))[0] == 0


async def test_a_429_makes_every_worker_back_off(redis: Any) -> None:
    worker_a, worker_b = RateLimiter(redis), RateLimiter(redis)
    await worker_a.backoff(KEY, 30)
    wait_s, _ = await worker_b.try_acquire(KEY, 1)
    assert 25 < wait_s <= 30
    await worker_b.backoff(KEY, 1)  # a shorter back-off does not shorten the shared one
    assert (await worker_a.try_acquire(KEY, 1))[0] > 25


async def test_learned_limits_lower_the_configured_ones(redis: Any) -> None:
    limiter = RateLimiter(redis, {("openai", "gpt-x"): Limits(requests_per_minute=10)})
    await limiter.learn(KEY, Limits(requests_per_minute=2))
    assert (await limiter.try_acquire(KEY, 1))[0] == 0
    assert (await limiter.try_acquire(KEY, 1))[0] == 0
    assert (await limiter.try_acquire(KEY, 1))[0] > 0


async def test_the_model_client_learns_backs_off_and_never_stores_the_key(redis: Any) -> None:
    headers = {"x-ratelimit-limit-requests": "500", "x-ratelimit-limit-tokens": "90000"}
    turns = [rate_limited(retry_after="0"), Turn(text="ok", headers=headers)]
    with FakeOpenAI(turns) as server:
        ref = ModelRef(provider="openai", name="gpt-x", base_url=server.base_url)
        env = {"OPENAI_API_KEY": SECRET}
        request = ModelRequest(model=ref, messages=[UserMessage(content="hi")], timeout_s=10)
        policy = EndpointPolicy.build(None, "http://127.0.0.1:", "OPENAI_API_KEY")
        async with httpx.AsyncClient() as http:
            models = ModelClient(
                http,
                env,
                policy=policy,
                limiter=RateLimiter(redis),
                retry=RetryPolicy(base_delay_s=0.01),
            )
            response = await models.generate(request, ListSink())
    assert response.text == "ok"
    key = limit_key(policy.resolve(ref, providers()), env)
    assert SECRET not in key.prefix
    learned = await redis.hgetall(f"{key.prefix}:learned")
    assert {k.decode(): v.decode() for k, v in learned.items()} == {"rpm": "500", "tpm": "90000"}
    dump = []
    for name in await redis.keys("*"):
        kind = (await redis.type(name)).decode()
        if kind == "hash":
            value = await redis.hgetall(name)
        elif kind == "zset":
            value = await redis.zrange(name, 0, -1)
        else:
            value = await redis.get(name)
        dump.append(f"{name!r}={value!r}")
    assert dump
    assert all(SECRET not in entry for entry in dump)


async def test_the_window_slides_and_its_length_is_configurable(redis: Any) -> None:
    limits = {("openai", "gpt-x"): Limits(requests_per_minute=2, window_s=0.3)}
    limiter = RateLimiter(redis, limits)
    assert (await limiter.try_acquire(KEY, 1))[0] == 0
    await asyncio.sleep(0.15)
    assert (await limiter.try_acquire(KEY, 1))[0] == 0
    wait_s, ticket = await limiter.try_acquire(KEY, 1)
    assert 0 < wait_s < 0.3  # until the first admission leaves, not a whole window
    assert ticket == ""
    await asyncio.sleep(wait_s)
    # The oldest admission left the window: one slot, not a fresh window of two.
    assert (await limiter.try_acquire(KEY, 1))[0] == 0
    assert (await limiter.try_acquire(KEY, 1))[0] > 0
