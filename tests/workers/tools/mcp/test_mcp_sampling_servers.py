"""Sampling requests from our SDK test server, answered by the model the config routes
them to: the scripted model, and an OpenAI-compatible fake over real HTTP. Over stdio
and streamable HTTP, on the 2026 protocol (auto) and the handshake-era one (legacy)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from agentq.orchestrator.core.errors import ToolError
from agentq.workers.tools.mcp import McpExecutor
from agentq.workers.tools.mcp.config import parse_mcp_config
from tests.support.fake_openai import FakeOpenAI, Turn
from tests.support.mcp_servers.agentq_test_server import SUMMARY_SYSTEM
from tests.support.mcp_servers.launch import (
    call_context,
    mcp_tool,
    own_server_http,
    own_server_stdio,
)

pytestmark = pytest.mark.integration

VARIANTS = ["stdio", "stdio-legacy", "http", "http-legacy"]
KEY_ENV = "AGENTQ_TEST_SAMPLING_KEY"
SECRET = "sk-sampling-secret-0123456789"


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


def routes(fake: FakeOpenAI) -> dict[str, Any]:
    """Server name → its `sampling` key."""
    return {
        "declined": "decline",
        "scripted": {
            "model": {"provider": "scripted", "script": [{"text": "a short summary"}]},
        },
        "openai": {
            "model": {
                "provider": "openai",
                "name": "gpt-fake",
                "base_url": fake.base_url,
                "api_key_env": KEY_ENV,
            },
            "max_tokens": 20,
        },
        "broken": {"model": {"provider": "scripted", "script": []}},
    }


class Sampling:
    def __init__(self, executor: McpExecutor) -> None:
        self.executor = executor

    async def summarize(self, server: str, text: str = "a long text") -> Any:
        tool = mcp_tool(server, "summarize")
        return await self.executor.execute(tool, {"text": text}, call_context(tool))


@pytest.fixture(params=VARIANTS)
async def sampling(request: pytest.FixtureRequest, fake: FakeOpenAI) -> AsyncIterator[Sampling]:
    variant: str = request.param
    protocol = "legacy" if variant.endswith("legacy") else "auto"

    async def run(entry: Callable[[dict[str, Any]], dict[str, Any]]) -> AsyncIterator[Sampling]:
        servers = {
            name: entry({"protocol": protocol, "sampling": route})
            for name, route in routes(fake).items()
        }
        config = parse_mcp_config({"mcpServers": servers})
        executor = McpExecutor(config, env={KEY_ENV: SECRET})
        try:
            yield Sampling(executor)
        finally:
            await executor.aclose()

    if variant.startswith("stdio"):
        async for sampling in run(lambda extra: own_server_stdio(**extra)):
            yield sampling
    else:
        async with own_server_http("streamable-http") as url:
            async for sampling in run(lambda extra: {"url": url, **extra}):
                yield sampling


async def test_sampling_is_declined_by_default(sampling: Sampling) -> None:
    # No capability is declared, so the server refuses before it asks.
    with pytest.raises(ToolError, match="sampling capability"):
        await sampling.summarize("declined")


async def test_sampling_routed_to_the_scripted_model(sampling: Sampling) -> None:
    assert await sampling.summarize("scripted") == "scripted (endTurn): a short summary"


async def test_sampling_routed_to_an_openai_compatible_model(
    sampling: Sampling, fake: FakeOpenAI
) -> None:
    fake.add(Turn(text="two words", finish_reason="length"))
    assert await sampling.summarize("openai", "the text") == "gpt-fake (maxTokens): two words"
    [request] = fake.requests
    body = request.body
    assert body["model"] == "gpt-fake"
    assert body["messages"] == [
        {"role": "system", "content": SUMMARY_SYSTEM},
        {"role": "user", "content": "Summarize: the text"},
    ]
    # The server asked for 50 tokens; the config caps it at 20.
    assert (body["max_tokens"], body["temperature"], body["stop"]) == (20, 0.2, ["\n\n"])
    assert "tools" not in body
    assert request.headers["authorization"] == f"Bearer {SECRET}"


async def test_provider_failure_reaches_the_server_without_the_key(
    sampling: Sampling, fake: FakeOpenAI
) -> None:
    fake.add(Turn(status=401, error=f"Incorrect API key provided: {SECRET}"))
    with pytest.raises(ToolError) as raised:
        await sampling.summarize("openai")
    message = str(raised.value)
    assert "Incorrect API key provided" in message
    assert SECRET not in message


async def test_failing_model_is_an_error_the_server_sees(sampling: Sampling) -> None:
    with pytest.raises(ToolError, match="scripted model has 0 steps"):
        await sampling.summarize("broken")
