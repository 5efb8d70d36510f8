"""McpExecutor against servers other people wrote: `mcp-server-time` (PyPI) and
`@modelcontextprotocol/server-everything` (npm), both installed by `.ci/mcp-setup`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from agentq.orchestrator.core.errors import ToolError, ToolTimeoutError
from agentq.workers.tools.mcp import McpExecutor
from agentq.workers.tools.mcp.config import parse_mcp_config
from tests.support.mcp_servers.launch import (
    Recorder,
    call_context,
    everything_entry,
    everything_http,
    mcp_tool,
    time_server_command,
)

pytestmark = pytest.mark.integration


async def call(
    executor: McpExecutor,
    server: str,
    tool: str,
    args: dict[str, Any],
    recorder: Recorder | None = None,
    *,
    timeout_s: float = 30.0,
    **kw: Any,
) -> Any:
    tool_def = mcp_tool(server, tool, timeout_s=timeout_s)
    return await executor.execute(tool_def, args, call_context(tool_def, recorder, **kw))


async def test_time_server() -> None:
    command = time_server_command()
    config = parse_mcp_config(
        {"mcpServers": {"time": {"command": command, "args": ["--local-timezone", "UTC"]}}}
    )
    async with McpExecutor(config) as executor:
        names = {a.name for a in await executor.announcements("q")}
        assert {"get_current_time", "convert_time"} <= names
        converted = await call(
            executor,
            "time",
            "convert_time",
            {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"},
        )
        assert converted["structured"]["target"]["datetime"].endswith("T21:00:00+09:00")
        assert converted["structured"]["time_difference"] == "+9.0h"
        with pytest.raises(ToolError, match="Mars/Olympus"):
            await call(executor, "time", "get_current_time", {"timezone": "Mars/Olympus"})


@pytest.fixture(params=["stdio", "streamable-http"])
async def everything(request: pytest.FixtureRequest) -> AsyncIterator[McpExecutor]:
    def servers(entry: dict[str, Any]) -> dict[str, Any]:
        return {
            "every": entry,
            "every_defaults": {**entry, "elicitation": "accept-defaults"},
            "every_forward": {**entry, "elicitation": "forward"},
        }

    if request.param == "stdio":
        entry = {"command": "node", "args": [str(everything_entry()), "stdio"]}
        executor = McpExecutor(parse_mcp_config({"mcpServers": servers(entry)}))
        try:
            yield executor
        finally:
            await executor.aclose()
    else:
        async with everything_http() as url:
            executor = McpExecutor(parse_mcp_config({"mcpServers": servers({"url": url})}))
            try:
                yield executor
            finally:
                await executor.aclose()


async def test_everything_announces_its_tools(everything: McpExecutor) -> None:
    announced = {a.name: a for a in await everything.announcements("q") if a.server == "every"}
    assert {"echo", "get-tiny-image", "trigger-long-running-operation"} <= set(announced)
    # Input schemas pass through as the server gave them, `$schema` and all.
    echo_schema = announced["echo"].input_schema
    assert echo_schema["properties"]["message"]["type"] == "string"
    assert "$schema" in echo_schema


async def test_everything_text_and_structured(everything: McpExecutor) -> None:
    assert await call(everything, "every", "echo", {"message": "hi"}) == "Echo: hi"
    weather = await call(everything, "every", "get-structured-content", {"location": "Chicago"})
    assert set(weather["structured"]) >= {"temperature", "conditions", "humidity"}


async def test_everything_image(everything: McpExecutor) -> None:
    result = await call(everything, "every", "get-tiny-image", {})
    media = [p for p in result["content"] if p["type"] == "media"]
    assert [p["media_type"] for p in media] == ["image/png"]
    assert media[0]["data"].startswith("iVBORw0KGgo")


async def test_everything_resource_links(everything: McpExecutor) -> None:
    result = await call(everything, "every", "get-resource-links", {"count": 2})
    links = [p for p in result["content"] if p["type"] == "resource-link"]
    assert len(links) == 2
    assert all(link["uri"].startswith("demo://") for link in links)


async def test_everything_progress(everything: McpExecutor) -> None:
    recorder = Recorder()
    result = await call(
        everything,
        "every",
        "trigger-long-running-operation",
        {"duration": 0.3, "steps": 3},
        recorder,
    )
    assert result.startswith("Long running operation completed")
    assert [p["progress"] for p in recorder.progress] == [1, 2, 3]
    assert {p["total"] for p in recorder.progress} == {3}


async def test_everything_deadline(everything: McpExecutor) -> None:
    with pytest.raises(ToolTimeoutError):
        await call(
            everything,
            "every",
            "trigger-long-running-operation",
            {"duration": 60, "steps": 60},
            timeout_s=1.0,
        )
    # The session survives the abandoned call.
    assert await call(everything, "every", "echo", {"message": "after"}) == "Echo: after"


async def test_everything_elicitation_declined(everything: McpExecutor) -> None:
    result = await call(everything, "every", "trigger-elicitation-request", {})
    assert "declined" in result["content"][0]["text"]


async def test_everything_elicitation_defaults_cannot_fill_a_required_field(
    everything: McpExecutor,
) -> None:
    # `name` is required and has no default: guessing would be worse than declining.
    result = await call(everything, "every_defaults", "trigger-elicitation-request", {})
    assert "declined" in result["content"][0]["text"]


async def test_everything_elicitation_forwarded(everything: McpExecutor) -> None:
    recorder = Recorder()
    answer = {"name": "Bob", "check": True, "email": "bob@example.test"}
    result = await call(
        everything,
        "every_forward",
        "trigger-elicitation-request",
        {},
        recorder,
        forward=True,
        answer=answer,
    )
    texts = "\n".join(p["text"] for p in result["content"] if p["type"] == "text")
    assert "Name: Bob" in texts
    [(_, schema)] = recorder.elicited
    assert schema["required"] == ["name"]
