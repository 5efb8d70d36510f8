"""`agentq serve --mcp` with the MCP Python SDK's client: a real redis-server, a real
`agentq worker` process, a real `agentq serve --mcp` process, all on loopback."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import httpx2
import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from agentq.serve.auth import hash_key
from agentq.serve.mcp_gateway import RATE_LIMITED
from tests.support.call_tools import TINY_PNG
from tests.support.infra import TOOLS, WorkerProcess, wait_ready
from tests.support.mcp_servers.launch import own_server_stdio
from tests.support.rates import away_from_the_window_edge
from tests.support.serve import ServeProcess
from tests.support.waiting import eventually_async

pytestmark = pytest.mark.integration

CALL_TOOLS = "tests/support/call_tools.py"
KEYS = {"acme": "key-acme", "narrow": "key-narrow", "reader": "key-reader"}
TIMEOUT_S = 60.0


@pytest.fixture
def fleet(redis_url: str) -> Iterator[WorkerProcess]:
    process = WorkerProcess(redis_url, "--tools", TOOLS, "--tools", CALL_TOOLS)
    wait_ready(process)
    yield process
    process.stop()


@pytest.fixture
def gateway(redis_url: str, fleet: WorkerProcess) -> Iterator[ServeProcess]:
    lines = "; ".join(
        [
            f"{hash_key(KEYS['acme'])} acme",
            f"{hash_key(KEYS['narrow'])} acme tools:call,tool:add,tool:count_up",
            f"{hash_key(KEYS['reader'])} acme runs:read",
        ]
    )
    process = ServeProcess(redis_url, "--mcp", env={"AGENTQ_API_KEYS": lines})
    yield process
    process.stop()


@asynccontextmanager
async def mcp_session(
    server: ServeProcess, who: str, **kwargs: Any
) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {KEYS[who]}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=120.0)) as http,
        streamable_http_client(f"{server.url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write, read_timeout_seconds=TIMEOUT_S, **kwargs) as session,
    ):
        await session.initialize()
        yield session


async def test_tools_are_listed_per_key_and_called_as_jobs(gateway: ServeProcess) -> None:
    async with mcp_session(gateway, "acme") as session:
        listed = {t.name: t for t in (await session.list_tools()).tools}
        added = await session.call_tool("add", {"a": 2, "b": 5})
        failed = await session.call_tool("fail", {"message": "on purpose"})
        invalid = await session.call_tool("add", {"a": "x", "b": 1})
        with pytest.raises(MCPError, match="nope"):
            await session.call_tool("nope", {})
    assert {"add", "count_up", "tiny_image", "echo"} <= set(listed)
    assert listed["add"].input_schema["required"] == ["a", "b"]
    assert isinstance(added, types.CallToolResult)
    assert not added.is_error
    assert added.content == [types.TextContent(type="text", text="7.0")]
    assert isinstance(failed, types.CallToolResult)
    assert failed.is_error
    assert isinstance(failed.content[0], types.TextContent)
    assert "on purpose" in failed.content[0].text
    assert added.meta is None
    # An error result names its kind where MCP leaves room for an implementation's own.
    assert failed.meta == {"agentq/error_kind": "execution"}
    assert isinstance(invalid, types.CallToolResult)
    assert invalid.is_error
    assert invalid.meta == {"agentq/error_kind": "invalid-input"}
    async with mcp_session(gateway, "narrow") as session:
        narrow = sorted(t.name for t in (await session.list_tools()).tools)
        with pytest.raises(MCPError, match="echo"):
            await session.call_tool("echo", {"text": "hidden"})
    assert narrow == ["add", "count_up"]


async def test_progress_is_forwarded_and_media_passes_through(gateway: ServeProcess) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with mcp_session(gateway, "acme") as session:
        counted = await session.call_tool("count_up", {"n": 3}, progress_callback=on_progress)
        image = await session.call_tool("tiny_image", {})
    assert isinstance(counted, types.CallToolResult)
    # The last value is the result, shown as it is yielded like every other.
    assert [(p, t) for p, t, _ in seen] == [(1.0, 3.0), (2.0, 3.0), (3.0, 3.0), (4.0, None)]
    assert isinstance(image, types.CallToolResult)
    assert image.content == [types.ImageContent(type="image", data=TINY_PNG, mime_type="image/png")]


async def test_each_progress_notification_arrives_as_it_is_yielded(
    gateway: ServeProcess, tmp_path: Path
) -> None:
    """`gated` yields its second value only once the client has seen the first progress
    notification (it creates the gate file then)."""
    gate = tmp_path / "seen-first"
    seen: list[str | None] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(message)
        gate.touch()

    async with mcp_session(gateway, "acme") as session:
        gated = await session.call_tool("gated", {"gate": str(gate)}, progress_callback=on_progress)
    assert isinstance(gated, types.CallToolResult)
    assert gated.content == [types.TextContent(type="text", text="second")]
    assert seen == ["first", "second"]


async def test_a_cancelled_request_cancels_the_job(gateway: ServeProcess, redis_url: str) -> None:
    from agentq.orchestrator.client import Client

    async with mcp_session(gateway, "acme") as session:
        task = asyncio.create_task(session.call_tool("linger", {"seconds": 120}))
        async with Client(redis_url) as client:

            async def running_call() -> str:
                async for key in client.redis.scan_iter(match="aq:call:*", count=100):
                    call_id = key.decode().split("{")[1].split("}")[0]
                    info = await client.calls.info(call_id)
                    if info.status == "running" and info.tool_name == "linger":
                        return str(call_id)
                return ""

            call_id = await eventually_async(running_call, "the call to start", TIMEOUT_S)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

            async def cancelled() -> bool:
                result = await client.calls.result(call_id)
                return result is not None and result.cancelled

            await eventually_async(cancelled, "the call to be cancelled", TIMEOUT_S)


def test_auth_is_the_api_keys(gateway: ServeProcess) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    anonymous = httpx.post(f"{gateway.url}/mcp", json=body, timeout=30)
    assert anonymous.status_code == 401
    assert anonymous.headers["www-authenticate"].startswith("Bearer")
    reader = httpx.post(
        f"{gateway.url}/mcp",
        json=body,
        headers={"Authorization": f"Bearer {KEYS['reader']}"},
        timeout=30,
    )
    assert reader.status_code == 403


async def test_a_new_worker_s_tools_are_announced_as_list_changed(
    gateway: ServeProcess, redis_url: str
) -> None:
    changed = asyncio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async with mcp_session(gateway, "acme", message_handler=on_message) as session:
        before = {t.name for t in (await session.list_tools()).tools}
        late = WorkerProcess(redis_url, "--tools", "tests/support/late_tools.py", "--queue", "late")
        try:
            await asyncio.to_thread(wait_ready, late)
            await asyncio.wait_for(changed.wait(), TIMEOUT_S)
            after = {t.name for t in (await session.list_tools()).tools}
            called = await session.call_tool("late_arrival", {})
        finally:
            late.stop()
    assert "late_arrival" not in before
    assert "late_arrival" in after
    assert isinstance(called, types.CallToolResult)
    assert called.content == [types.TextContent(type="text", text="late")]


async def test_the_current_protocol_revision_works_too(gateway: ServeProcess) -> None:
    """The SDK's `Client` negotiates 2026-07-28 (no handshake); the gateway serves it."""
    from mcp import Client as McpClient

    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    headers = {"Authorization": f"Bearer {KEYS['acme']}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=120.0)) as http,
        McpClient(streamable_http_client(f"{gateway.url}/mcp", http_client=http)) as client,
    ):
        assert client.session.protocol_version == "2026-07-28"
        names = {t.name for t in (await client.list_tools()).tools}
        counted = await client.call_tool("count_up", {"n": 2}, progress_callback=on_progress)
    assert "count_up" in names
    assert isinstance(counted, types.CallToolResult)
    assert counted.content == [types.TextContent(type="text", text='{"counted": 2}')]
    assert seen == [1.0, 2.0, 3.0]


@pytest.fixture
def elicit_gateway(redis_url: str, tmp_path: Path) -> Iterator[ServeProcess]:
    """A worker serving our test MCP server (whose `greet` elicits), forwarding its
    elicitations, behind a keyless gateway."""
    config = tmp_path / "mcp.json"
    server = own_server_stdio(elicitation="forward", timeout_s=60)
    config.write_text(json.dumps({"mcpServers": {"own": server}}))
    worker = WorkerProcess(redis_url, "--mcp-config", str(config))
    wait_ready(worker, timeout_s=60)
    gateway = ServeProcess(redis_url, "--mcp")
    yield gateway
    gateway.stop()
    worker.stop()


async def test_an_upstream_elicitation_reaches_the_gateways_client(
    elicit_gateway: ServeProcess,
) -> None:
    asked: list[str] = []

    async def answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"name": "Grace", "age": 85})

    async with (
        httpx2.AsyncClient(timeout=httpx2.Timeout(30.0, read=120.0)) as http,
        streamable_http_client(f"{elicit_gateway.url}/mcp", http_client=http) as (read, write),
        ClientSession(
            read, write, read_timeout_seconds=TIMEOUT_S, elicitation_callback=answer
        ) as session,
    ):
        await session.initialize()
        greeted = await session.call_tool("own:greet", {})
    async with mcp_session_plain(elicit_gateway) as session:
        declined = await session.call_tool("greet", {})
    assert asked == ["Who are you?"]
    assert isinstance(greeted, types.CallToolResult)
    assert greeted.content == [types.TextContent(type="text", text="hello Grace (85)")]
    assert isinstance(declined, types.CallToolResult)
    assert isinstance(declined.content[0], types.TextContent)
    assert declined.content[0].text.startswith("no answer")


@asynccontextmanager
async def mcp_session_plain(server: ServeProcess) -> AsyncIterator[ClientSession]:
    """A client that declares no elicitation: the gateway declines for it."""
    async with (
        httpx2.AsyncClient(timeout=httpx2.Timeout(30.0, read=120.0)) as http,
        streamable_http_client(f"{server.url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write, read_timeout_seconds=TIMEOUT_S) as session,
    ):
        await session.initialize()
        yield session


@pytest.fixture
def asking_gateway(redis_url: str, tmp_path: Path) -> Iterator[ServeProcess]:
    """A worker serving the conformance upstream server (whose tools log and sample),
    forwarding its sampling, behind a keyless gateway."""
    from tests.support.mcp_servers.launch import HERE

    upstream = {
        "command": sys.executable,
        "args": [str(HERE / "conformance_server.py")],
        "sampling": "forward",
        "protocol": "legacy",
        "timeout_s": 60,
    }
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"conformance": upstream}}))
    worker = WorkerProcess(redis_url, "--mcp-config", str(config))
    wait_ready(worker, timeout_s=60)
    gateway = ServeProcess(redis_url, "--mcp")
    yield gateway
    gateway.stop()
    worker.stop()


# MCP logging is deprecated by the 2026-07-28 revision; clients of earlier ones still use it.
@pytest.mark.filterwarnings("ignore:The logging capability is deprecated")
async def test_an_upstream_tool_s_logs_and_sampling_reach_the_gateways_client(
    asking_gateway: ServeProcess,
) -> None:
    logged: list[types.LoggingMessageNotificationParams] = []
    prompts: list[str] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logged.append(params)

    async def sample(
        context: Any, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        content = params.messages[0].content
        prompts.append(content.text if isinstance(content, types.TextContent) else "")
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text="forty-two"),
            model="client-model",
            stop_reason="endTurn",
        )

    async with (
        httpx2.AsyncClient(timeout=httpx2.Timeout(30.0, read=120.0)) as http,
        streamable_http_client(f"{asking_gateway.url}/mcp", http_client=http) as (read, write),
        ClientSession(
            read,
            write,
            read_timeout_seconds=TIMEOUT_S,
            sampling_callback=sample,
            logging_callback=on_log,
        ) as session,
    ):
        await session.initialize()
        sampled = await session.call_tool("test_sampling", {"prompt": "the answer?"})
        await session.call_tool("test_tool_with_logging", {})
        await eventually_async(lambda: len(logged) >= 3, "three log messages")
        await session.set_logging_level("warning")
        await session.call_tool("test_tool_with_logging", {})
    async with mcp_session_plain(asking_gateway) as session:
        declined = await session.call_tool("test_sampling", {"prompt": "unasked"})
    assert prompts == ["the answer?"]
    assert sampled.content == [types.TextContent(type="text", text="LLM response: forty-two")]
    assert [(m.level, m.data) for m in logged] == [
        ("info", "Tool execution started"),
        ("info", "Tool processing data"),
        ("info", "Tool execution completed"),
    ]
    assert declined.is_error


def test_a_session_belongs_to_the_key_that_opened_it(gateway: ServeProcess) -> None:
    accept = {"Accept": "application/json, text/event-stream"}

    def post(who: str, body: dict[str, Any], session: str | None = None) -> httpx.Response:
        headers = {**accept, "Authorization": f"Bearer {who}"}
        if session is not None:
            headers["Mcp-Session-Id"] = session
        return httpx.post(f"{gateway.url}/mcp", json=body, headers=headers, timeout=30)

    opened = post(
        KEYS["acme"],
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "probe", "version": "1"},
            },
        },
    )
    assert opened.status_code == 200, opened.text
    session = opened.headers["mcp-session-id"]
    ready = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert post(KEYS["acme"], ready, session).status_code == 202
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    # Another key of the same tenant, with every scope the call needs: not its session.
    assert post(KEYS["narrow"], listing, session).status_code == 404
    assert post(KEYS["acme"], listing, session).status_code == 200
    # A token the opening key minted acts as that key.
    minted = httpx.post(
        f"{gateway.url}/v1/tokens",
        json={"purpose": "mcp"},
        headers={"Authorization": f"Bearer {KEYS['acme']}"},
        timeout=30,
    )
    token = minted.json()["token"]
    assert post(token, listing, session).status_code == 200


@pytest.fixture
def rate_limited_gateway(redis_url: str, fleet: WorkerProcess) -> Iterator[ServeProcess]:
    lines = "; ".join(
        [f"{hash_key(KEYS['acme'])} acme", f"{hash_key(KEYS['narrow'])} globex tools:call"]
    )
    process = ServeProcess(
        redis_url,
        "--mcp",
        env={"AGENTQ_API_KEYS": lines, "AGENTQ_SUBMITS_PER_MINUTE": str(SUBMITS)},
    )
    yield process
    process.stop()


SUBMITS = 2


async def test_mcp_tool_calls_count_toward_the_tenants_submit_rate(
    rate_limited_gateway: ServeProcess,
) -> None:
    server = rate_limited_gateway
    away_from_the_window_edge()
    async with mcp_session(server, "acme") as session:
        for _ in range(SUBMITS):
            assert not (await session.call_tool("add", {"a": 1, "b": 2})).is_error
        with pytest.raises(MCPError) as refused:
            await session.call_tool("add", {"a": 1, "b": 2})
        # The POST door shares the count: acme's share is spent there too.
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
            posted = await http.post(
                "/v1/tools/add/calls",
                json={"input": {"a": 1, "b": 2}},
                headers={"Authorization": f"Bearer {KEYS['acme']}"},
            )
    assert refused.value.code == RATE_LIMITED
    assert "submits_per_minute" in refused.value.message
    assert refused.value.data["limit"] == "submits_per_minute"
    assert refused.value.data["retry_after_s"] >= 1
    assert posted.status_code == 429, posted.text
    assert posted.json()["error"]["limit"] == "submits_per_minute"
    # Another tenant's share is its own.
    async with mcp_session(server, "narrow") as session:
        assert not (await session.call_tool("add", {"a": 1, "b": 2})).is_error
