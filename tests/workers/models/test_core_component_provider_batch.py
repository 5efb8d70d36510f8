"""A `"batch": true` run in the embedded mode (in-memory Redis, in-process workers): the
collector's scripts run on the embedded Redis too, and the run ends as a direct one."""

from __future__ import annotations

import json
import uuid

import pytest

from agentq import embedded
from agentq.orchestrator.batches.usage import batch_priced_usage
from agentq.orchestrator.core.messages import UserMessage
from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.policy.endpoints import EndpointPolicy
from agentq.orchestrator.policy.model_ref import ModelRef
from agentq.orchestrator.redis.connect import connect
from agentq.workers.models import ModelRequest
from agentq.workers.models.batch.collector import Collector
from agentq.workers.models.batch_api import BatchLine, LineResult
from agentq.workers.models.model_client import ModelClient
from agentq.workers.tools.function_tools import tool
from tests.support.fake_openai import FakeOpenAI, ToolCall, Turn
from tests.support.waiting import eventually_async

pytestmark = pytest.mark.component


@tool
def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


async def test_a_batch_run_in_the_embedded_mode() -> None:
    settings = Settings(
        allow_spec_endpoints="http://127.0.0.1:",
        provider_batch_max_age_s=0,
        provider_batch_poll_s=0.05,
    )
    turns = [Turn(tool_calls=[ToolCall("add", {"a": 2, "b": 3})]), Turn(text="5")]
    with FakeOpenAI(turns) as fake:
        spec = {
            "model": {"provider": "openai", "name": "m", "base_url": fake.base_url, "batch": True},
            "prompt": "2 + 3?",
            "tools": [{"type": "function", "name": "add"}],
        }
        async with embedded(tools=[add], settings=settings, env={"OPENAI_API_KEY": "k"}) as client:
            run_id = await client.runs.submit(spec)
            result = await client.runs.wait(run_id, timeout_s=60)
            usage = await batch_priced_usage(client.redis, [run_id], settings)
    assert result.status == "succeeded", result.error
    assert result.text == "5"
    assert result.steps[0].tool_results[0].output == 5.0
    assert len(fake.batches.creations(fake.requests)) == 2
    assert usage.steps == 2
    assert usage.input_tokens == result.usage.input_tokens


async def _collector_over(fake_url: str, settings: Settings) -> tuple[Collector, str]:
    """A collector on a fresh in-memory Redis with one request of run `r1` formed into a
    batch (`b1`) of its group, as a collector that then died would have left it."""
    import httpx

    redis = connect(f"memory://pbatch-{uuid.uuid4().hex}")
    models = ModelClient(
        httpx.AsyncClient(), {"OPENAI_API_KEY": "k"}, policy=EndpointPolicy.from_settings(settings)
    )
    ref = ModelRef(provider="openai", name="m", base_url=fake_url, batch=True)
    request = ModelRequest(model=ref, messages=[UserMessage(content="hi")])
    provider = await models.batch_provider(request)
    assert provider is not None
    group = provider.batch_group()
    collector = Collector(redis, models, settings, owner="w2")
    path, body = provider.batch_request(request)
    await collector.store.park("r1", 0, group, ref.model_dump_json(), path, body)
    assert await collector.store.form(group, "b1", 10, 0) == ["0:r1"]
    return collector, group


async def test_a_new_holder_finds_a_batch_its_dead_predecessor_created() -> None:
    """Died after the provider created the batch, before its id was recorded: the next
    holder finds it by its metadata (OpenAI) and polls it; nothing is created twice."""
    settings = Settings(allow_spec_endpoints="http://127.0.0.1:")
    with FakeOpenAI([Turn(text="once")]) as fake:
        collector, group = await _collector_over(fake.base_url, settings)
        parked = await collector.store.parked("r1", 0)
        assert parked.path is not None
        assert parked.body is not None
        lines = [BatchLine("aq-0", parked.path, json.loads(parked.body))]
        api = await collector._api(group)
        assert api is not None
        await api.submit(lines, "b1")  # the dead holder's submission
        await collector.store.update_batch(group, "b1", state="submitting")
        assert await collector.store.take_lease(group, "w2", 5)

        async def answered() -> str | None:
            await collector.collect(group)
            return (await collector.store.parked("r1", 0)).result

        result = await eventually_async(answered, "the batch's answer")
    assert "once" in str(result)
    assert len(fake.batches.creations(fake.requests)) == 1
    assert await collector.store.inflight(group) == []


async def test_an_endpoint_no_longer_allowed_fails_its_waiting_steps() -> None:
    with FakeOpenAI([]) as fake:
        collector, group = await _collector_over(
            fake.base_url, Settings(allow_spec_endpoints="http://127.0.0.1:")
        )
        await collector.store.end_batch(group, "b1")
        await collector.store.park("r2", 0, group, "{}", "chat/completions", {})
        collector.models.policy = EndpointPolicy()  # the deployment withdrew the URL
        await collector.collect(group)
        parked = await collector.store.parked("r2", 0)
    assert parked.result is not None
    line = LineResult.model_validate_json(parked.result)
    assert line.retryable is False
    assert "base_url" in (line.error or "")
    assert fake.requests == []
