"""Opening the byte stream to one MCP server: a child process or an HTTP endpoint.

The read side is wrapped so the pool learns when the connection ends (a
stdio server exited, an HTTP session was dropped) without waiting for the
next call to fail: an idle server that died is restarted before it is used.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Self

import anyio
import httpx2
from mcp.client._transport import ReadStream, TransportStreams
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage

from agentq.orchestrator.core.resource import AsyncResource
from agentq.workers.tools.mcp.auth import build_auth
from agentq.workers.tools.mcp.config import McpServerConfig

Item = SessionMessage | Exception

# Connect/write bound for HTTP; reads stay open long because a server may
# stream a slow call's progress over one response. Each call has its own
# deadline on top (see pool.py).
HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)


@asynccontextmanager
async def open_transport(
    name: str, server: McpServerConfig, ended: asyncio.Event
) -> AsyncIterator[TransportStreams]:
    """Yield the (read, write) stream pair; `ended` is set once the read side closes."""
    transport = server.resolved_transport
    if transport == "stdio":
        params = StdioServerParameters(
            command=server.command or "",
            args=list(server.args),
            env=dict(server.env) or None,
            cwd=server.cwd,
        )
        async with stdio_client(params) as (read, write):
            yield _WatchedReadStream(read, ended), write
        return
    url = server.url or ""
    auth = build_auth(server.auth, server=name)
    if transport == "sse":
        async with sse_client(url, headers=dict(server.headers), auth=auth) as (read, write):
            yield _WatchedReadStream(read, ended), write
        return
    async with (
        httpx2.AsyncClient(headers=dict(server.headers), auth=auth, timeout=HTTP_TIMEOUT) as http,
        streamable_http_client(url, http_client=http) as (read, write),
    ):
        yield _WatchedReadStream(read, ended), write


class _WatchedReadStream(AsyncResource):
    """A read stream that sets an event when it reaches its end."""

    def __init__(self, inner: ReadStream[Item], ended: asyncio.Event) -> None:
        self._inner = inner
        self._ended = ended

    @property
    def last_context(self) -> Any:
        # The dispatcher reads the sender's contextvars from here (HTTP
        # transports set it); pass it through untouched.
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Item:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._ended.set()
            raise

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Item:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        self._ended.set()
        await self._inner.aclose()
