"""MCP sampling calls models through the worker's model client, so the fleet-wide rate
limit counts it like any model step."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, cast

import fakeredis
import httpx
import mcp_types as types
import pytest

from agentq.orchestrator.policy.providers import ProviderInfo
from agentq.workers.models import ModelResponse, register_provider
from agentq.workers.models.model_client import ModelClient
from agentq.workers.models.ratelimit import Limits, RateLimiter, RedisLike
from agentq.workers.models.retry import RetryPolicy
from agentq.workers.tools.mcp.config import SamplingRoute
from agentq.workers.tools.mcp.sampling import Sampler

pytestmark = pytest.mark.component


class Counting:
    def __init__(self) -> None:
        self.calls = 0

    async def generate(self, request: Any, sink: Any) -> ModelResponse:
        self.calls += 1
        return ModelResponse(text="sampled", finish_reason="stop")


@pytest.fixture
def counting() -> Counting:
    model = Counting()
    register_provider(ProviderInfo(name="counting-test", wire="counting-test"), lambda r, c: model)
    return model


@pytest.fixture
async def models() -> AsyncIterator[ModelClient]:
    redis = fakeredis.FakeAsyncRedis()
    limiter = RateLimiter(
        cast(RedisLike, redis), {("counting-test", "*"): Limits(requests_per_minute=1)}
    )
    async with httpx.AsyncClient() as http:
        yield ModelClient(http, {}, limiter=limiter, retry=RetryPolicy(max_attempts=1))
    await redis.aclose()


def params() -> types.CreateMessageRequestParams:
    message = types.SamplingMessage(role="user", content=types.TextContent(type="text", text="q"))
    return types.CreateMessageRequestParams(messages=[message], max_tokens=10)


async def test_sampling_counts_against_the_shared_rate_limit(
    models: ModelClient, counting: Counting
) -> None:
    model = {"provider": "counting-test", "name": "m", "timeout_s": 2}
    route = SamplingRoute.model_validate({"model": model})
    sampler = Sampler(models)
    first = await sampler.sample("s", route, params())
    assert isinstance(first, types.CreateMessageResult)
    second = await sampler.sample("s", route, params())
    assert isinstance(second, types.ErrorData)
    assert "shared rate limit" in second.message
    assert counting.calls == 1  # the second request never reached the provider
