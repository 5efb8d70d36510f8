"""McpExecutor against our SDK-written test server, over stdio and streamable HTTP,
on the 2026 protocol (auto) and on the handshake-era protocol (legacy)."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from agentq.orchestrator.core.errors import ToolError, ToolTimeoutError
from agentq.workers.tools.mcp import McpExecutor
from agentq.workers.tools.mcp.config import parse_mcp_config
from tests.support.mcp_servers.agentq_test_server import TINY_PNG
from tests.support.mcp_servers.launch import (
    Recorder,
    call_context,
    mcp_tool,
    own_server_http,
    own_server_stdio,
)
from tests.support.waiting import eventually_async

pytestmark = pytest.mark.integration

WAIT_S = 20.0
VARIANTS = ["stdio", "stdio-legacy", "http", "http-legacy"]


class Own:
    """An executor over the test server, declared under a few names with different policies."""

    def __init__(self, executor: McpExecutor, changed: list[str]) -> None:
        self.executor = executor
        self.changed = changed

    async def call(self, tool: str, args: dict[str, Any] | None = None, **kw: Any) -> Any:
        server = kw.pop("server", "own")
        timeout_s = kw.pop("timeout_s", 30.0)
        recorder = kw.pop("recorder", None)
        tool_def = mcp_tool(server, tool, timeout_s=timeout_s)
        return await self.executor.execute(
            tool_def, args or {}, call_context(tool_def, recorder, **kw)
        )

    async def stats(self, server: str = "own") -> dict[str, int]:
        result = await self.call("stats", server=server)
        stats: dict[str, int] = result["structured"]
        return stats


@pytest.fixture(params=VARIANTS)
async def own(request: pytest.FixtureRequest) -> AsyncIterator[Own]:
    variant: str = request.param
    protocol = "legacy" if variant.endswith("legacy") else "auto"
    changed: list[str] = []

    async def on_changed(server: str) -> None:
        changed.append(server)

    async def run(entry: Callable[[dict[str, Any]], dict[str, Any]]) -> AsyncIterator[Own]:
        servers = {
            name: entry({"protocol": protocol, "elicitation": policy, **extra})
            for name, policy, extra in [
                ("own", "decline", {}),
                ("defaults", "accept-defaults", {}),
                ("forward", "forward", {}),
                ("narrow", "decline", {"max_concurrency": 2}),
            ]
        }
        config = parse_mcp_config({"mcpServers": servers})
        # Not started: a test connects only the servers it uses.
        executor = McpExecutor(config, on_tools_changed=on_changed)
        try:
            yield Own(executor, changed)
        finally:
            await executor.aclose()

    if variant.startswith("stdio"):
        async for own in run(lambda extra: own_server_stdio(**extra)):
            yield own
    else:
        # One HTTP server process behind every name; each name gets its own session.
        async with own_server_http("streamable-http") as url:
            async for own in run(lambda extra: {"url": url, **extra}):
                yield own


async def test_announces_every_tool_with_its_schema(own: Own) -> None:
    announced = await own.executor.announcements("tools-q")
    mine = {a.name: a for a in announced if a.server == "own"}
    assert {"echo", "add", "count", "tiny_image", "fail", "greet", "slow"} <= set(mine)
    echo = mine["echo"]
    assert (echo.kind, echo.queue, echo.description) == (
        "mcp",
        "tools-q",
        "Return the text unchanged.",
    )
    assert echo.input_schema["properties"]["text"]["type"] == "string"
    assert echo.input_schema["required"] == ["text"]
    assert {a.server for a in announced} == {"own", "defaults", "forward", "narrow"}


async def test_text_result_is_a_string(own: Own) -> None:
    assert await own.call("echo", {"text": "hi"}) == "hi"


async def test_structured_result_keeps_the_data_once(own: Own) -> None:
    assert await own.call("add", {"a": 2, "b": 3}) == {"content": [], "structured": {"sum": 5}}


async def test_image_result_is_media(own: Own) -> None:
    image = base64.b64encode(TINY_PNG).decode()
    assert await own.call("tiny_image") == {
        "content": [{"type": "media", "media_type": "image/png", "data": image}]
    }


async def test_every_content_kind_is_normalized(own: Own) -> None:
    result = await own.call("mixed")
    assert [p["type"] for p in result["content"]] == [
        "text",
        "media",
        "media",
        "resource-link",
        "resource",
    ]
    assert result["content"][2]["media_type"] == "audio/wav"
    assert result["content"][3] == {
        "type": "resource-link",
        "uri": "file:///tmp/a.txt",
        "name": "a.txt",
    }
    assert result["content"][4] == {
        "type": "resource",
        "uri": "file:///tmp/b.txt",
        "text": "inside",
        "mime_type": "text/plain",
    }


async def test_is_error_becomes_a_tool_error(own: Own) -> None:
    with pytest.raises(ToolError, match="boom"):
        await own.call("fail", {"message": "boom"})


async def test_progress_notifications_become_progress_events(own: Own) -> None:
    recorder = Recorder()
    assert await own.call("count", {"steps": 3}, recorder=recorder) == "counted 3"
    assert recorder.progress == [
        {"progress": i, "total": 3, "message": f"step {i}"} for i in (1, 2, 3)
    ]


async def test_the_client_names_itself(own: Own) -> None:
    who = (await own.call("whoami"))["structured"]
    assert who["name"] == "agentq"
    assert who["version"]
    assert who["protocol"] in ("2026-07-28", "2025-11-25")


async def test_elicitation_is_declined_by_default(own: Own) -> None:
    assert await own.call("greet") == "no answer: decline"


async def test_elicitation_accepts_the_schema_defaults(own: Own) -> None:
    assert await own.call("greet", server="defaults") == "hello Ada (36)"


async def test_elicitation_is_forwarded_to_the_run(own: Own) -> None:
    recorder = Recorder()
    answer = {"name": "Bob", "age": 3}
    result = await own.call(
        "greet", server="forward", recorder=recorder, forward=True, answer=answer
    )
    assert result == "hello Bob (3)"
    [(message, schema)] = recorder.elicited
    assert message == "Who are you?"
    assert schema["properties"]["name"]["default"] == "Ada"


async def test_forwarded_elicitation_without_answer_declines(own: Own) -> None:
    result = await own.call("greet", server="forward", forward=True, answer=None)
    assert result == "no answer: decline"


async def test_deadline_cancels_the_call_on_the_server(own: Own) -> None:
    # Connect first: the budget must go to the call, not to starting the server.
    await own.call("echo", {"text": "warm"})
    with pytest.raises(ToolTimeoutError, match="did not finish"):
        await own.call("slow", {"seconds": 60}, timeout_s=2.0)

    async def server_saw_cancel() -> bool:
        return (await own.stats())["cancelled"] == 1

    await eventually_async(server_saw_cancel, "the server to see the cancellation", WAIT_S)


async def test_cancelling_the_run_cancels_the_call_on_the_server(own: Own) -> None:
    recorder = Recorder()
    task = asyncio.create_task(own.call("slow", {"seconds": 60}, recorder=recorder))

    async def started() -> bool:
        return bool(recorder.progress)

    await eventually_async(started, "the slow call to start", WAIT_S)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    async def server_saw_cancel() -> bool:
        return (await own.stats())["cancelled"] == 1

    await eventually_async(server_saw_cancel, "the server to see the cancellation", WAIT_S)


async def test_sessions_are_reused(own: Own) -> None:
    for text in ("a", "b", "c"):
        await own.call("echo", {"text": text})
    assert (await own.stats())["calls"] == 3
    assert own.executor.servers["own"].connects == 1


async def test_concurrency_per_server_is_bounded(own: Own) -> None:
    await asyncio.gather(*(own.call("slow", {"seconds": 0.3}, server="narrow") for _ in range(5)))
    assert (await own.stats("narrow"))["max_active"] <= 2


async def test_tool_list_changes_are_picked_up(own: Own) -> None:
    before = {a.name for a in await own.executor.announcements("q") if a.server == "own"}
    assert "newt" not in before
    assert await own.call("grow", {"name": "newt"}) == "added newt"

    async def announced() -> bool:
        names = {a.name for a in await own.executor.announcements("q") if a.server == "own"}
        return "newt" in names

    await eventually_async(announced, "the new tool to be announced", WAIT_S)
    assert "own" in own.changed
    assert await own.call("newt") == "I am newt"


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_a_stdio_server_that_dies_is_restarted(protocol: str) -> None:
    config = parse_mcp_config({"mcpServers": {"own": own_server_stdio(protocol=protocol)}})
    async with McpExecutor(config) as executor:
        own = Own(executor, [])
        await own.call("echo", {"text": "before"})
        with pytest.raises(ToolError, match="closed the connection"):
            await own.call("die")
        assert await own.call("echo", {"text": "after"}) == "after"
        assert (await own.stats())["calls"] == 1  # a fresh process
        assert executor.servers["own"].connects == 2


async def test_an_idle_server_that_died_is_restarted_before_use() -> None:
    config = parse_mcp_config({"mcpServers": {"own": own_server_stdio()}})
    async with McpExecutor(config) as executor:
        own = Own(executor, [])
        connection = executor.servers["own"]
        assert await own.call("die_soon") == "dying"

        async def noticed() -> bool:
            return not connection.connected

        await eventually_async(noticed, "the pool to notice the exit", WAIT_S)
        # No call saw this death; the next one must simply work.
        assert await own.call("echo", {"text": "x"}) == "x"
        assert connection.connects == 2


async def test_sse_transport() -> None:
    async with own_server_http("sse") as url:
        config = parse_mcp_config({"mcpServers": {"own": {"url": url}}})
        assert config.servers["own"].resolved_transport == "sse"
        async with McpExecutor(config) as executor:
            own = Own(executor, [])
            assert await own.call("echo", {"text": "over sse"}) == "over sse"
            recorder = Recorder()
            await own.call("count", {"steps": 2}, recorder=recorder)
            assert len(recorder.progress) == 2


async def test_an_unreachable_server_is_not_announced_and_fails_calls() -> None:
    config = parse_mcp_config(
        {
            "mcpServers": {
                "own": own_server_stdio(),
                "gone": {"command": "/nonexistent/mcp-server", "connect_timeout_s": 5},
            }
        }
    )
    async with McpExecutor(config) as executor:
        servers = {a.server for a in await executor.announcements("q")}
        assert servers == {"own"}
        with pytest.raises(ToolError, match="cannot connect to the MCP server 'gone'"):
            await Own(executor, []).call("anything", server="gone")


async def test_a_call_names_its_run_call_and_idempotency_key_in_its_meta(own: Own) -> None:
    tool_def = mcp_tool("own", "call_meta")
    ctx = call_context(tool_def, call_id="call-7")
    meta = (await own.executor.execute(tool_def, {}, ctx))["structured"]
    assert {k: v for k, v in meta.items() if k.startswith("agentq/")} == {
        "agentq/run_id": "run-1",
        "agentq/call_id": "call-7",
        "agentq/idempotency_key": ctx.idempotency_key,
    }
