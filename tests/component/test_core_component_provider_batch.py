"""A `"batch": true` run in the embedded mode (in-memory Redis, in-process workers): the
collector's scripts run on the embedded Redis too, and the run ends as a direct one."""

from __future__ import annotations

from agentq import embedded
from agentq.orchestrator.batch_usage import batch_priced_usage
from agentq.orchestrator.settings import Settings
from agentq.workers.function_tools import tool
from tests.support.fake_openai import FakeOpenAI, ToolCall, Turn


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
            run_id = await client.submit(spec)
            result = await client.wait(run_id, timeout_s=60)
            usage = await batch_priced_usage(client.redis, [run_id], settings)
    assert result.status == "succeeded", result.error
    assert result.text == "5"
    assert result.steps[0].tool_results[0].output == 5.0
    assert len(fake.batches.creations(fake.requests)) == 2
    assert usage.steps == 2
    assert usage.input_tokens == result.usage.input_tokens
