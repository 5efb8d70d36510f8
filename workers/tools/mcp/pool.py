"""One pooled MCP session per configured server, per worker process.

A stdio server is started once and reused by every call on this worker; an
HTTP session likewise. Calls share the session (JSON-RPC multiplexes them),
bounded by the server's `max_concurrency`. A session whose stream ended (the
process died, the HTTP session was dropped) is replaced on next use.

The SDK's `Client` is entered and exited by a dedicated owner task: anyio
cancel scopes must exit in the task that entered them, and calls arrive on
arbitrary job tasks.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from collections.abc import Awaitable, Callable
from typing import Any, cast

import anyio
import httpx2
import mcp_types as types
from mcp import Client, MCPError
from mcp.client.session import ClientRequestContext, IncomingMessage
from mcp.client.subscriptions import ListenNotSupportedError, SubscriptionLost
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from agentq.orchestrator.core.errors import InfrastructureError, ToolError, ToolTimeoutError
from agentq.workers.tools.context import ToolContext
from agentq.workers.tools.mcp.config import McpServerConfig, SamplingRoute
from agentq.workers.tools.mcp.elicitation import answer_elicitation
from agentq.workers.tools.mcp.sampling import Sampler, forward_sampling
from agentq.workers.tools.mcp.transport import open_transport

log = logging.getLogger(__name__)

# The call a server-initiated request (elicitation, sampling) belongs to. Set around each
# call; on 2026-era sessions the SDK drives input requests inside the calling
# task, so this is always right there.
current_call: contextvars.ContextVar[ToolContext | None] = contextvars.ContextVar(
    "agentq_mcp_current_call", default=None
)

CLOSE_TIMEOUT_S = 10.0  # the SDK gives a stdio server ~6 s to exit before killing it
MAX_TOOL_PAGES = 100  # a server that paginates forever must not hang discovery

ToolsChanged = Callable[[str], Awaitable[None]]


class _Live:
    """One connected session and the task that owns it."""

    def __init__(self) -> None:
        self.ended = asyncio.Event()
        self.ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
        self.owner: asyncio.Task[None] | None = None

    @property
    def alive(self) -> bool:
        if self.ended.is_set() or not self.ready.done() or self.ready.cancelled():
            return False
        return self.ready.exception() is None


class ServerConnection:
    """The pooled session of one server, its tool list cache and its concurrency bound."""

    def __init__(
        self,
        name: str,
        config: McpServerConfig,
        *,
        client_info: types.Implementation,
        on_tools_changed: ToolsChanged | None = None,
        sampler: Sampler | None = None,
    ) -> None:
        """`sampler` answers sampling requests when the config routes them to a model."""
        self.name = name
        self.config = config
        self._client_info = client_info
        self._sampler = sampler if isinstance(config.sampling, SamplingRoute) else None
        self._on_tools_changed = on_tools_changed
        self._semaphore = asyncio.Semaphore(config.max_concurrency)
        self._connect_lock = asyncio.Lock()
        self._live: _Live | None = None
        self._tools: list[types.Tool] | None = None
        self._inflight: list[ToolContext] = []
        self._background: set[asyncio.Task[None]] = set()
        self._closed = False
        self.connects = 0  # sessions opened so far; tests read it to see reuse

    @property
    def connected(self) -> bool:
        return self._live is not None and self._live.alive

    # -- discovery ---------------------------------------------------------

    async def tools(self) -> list[types.Tool]:
        """The server's tools, from cache unless the server said they changed."""
        if self._tools is None:
            client = await self._client()
            tools: list[types.Tool] = []
            cursor: str | None = None
            with anyio.fail_after(self.config.connect_timeout_s):
                for _ in range(MAX_TOOL_PAGES):
                    page = await client.list_tools(cursor=cursor)
                    tools.extend(page.tools)
                    cursor = page.next_cursor
                    if cursor is None:
                        break
            self._tools = tools
        return self._tools

    def _tools_changed(self) -> None:
        self._tools = None
        if self._on_tools_changed is not None and not self._closed:
            self._spawn(self._refresh_and_tell())

    async def _refresh_and_tell(self) -> None:
        try:
            await self.tools()
        except Exception as exc:
            log.warning("MCP server %r: cannot list tools after a change: %s", self.name, exc)
            return
        if self._on_tools_changed is not None:
            await self._on_tools_changed(self.name)

    # -- calls -------------------------------------------------------------

    async def call(
        self, tool: str, arguments: dict[str, Any], ctx: ToolContext, timeout_s: float
    ) -> types.CallToolResult:
        token = current_call.set(ctx)
        try:
            async with asyncio.timeout(timeout_s):
                async with self._semaphore:
                    client = await self._client()
                    self._inflight.append(ctx)
                    try:
                        return await client.call_tool(
                            tool,
                            arguments,
                            progress_callback=_progress_to(ctx, self.name),
                            meta=call_meta(ctx),
                        )
                    finally:
                        self._inflight.remove(ctx)
        except TimeoutError:
            # asyncio.timeout cancelled the SDK's request, which sends
            # `notifications/cancelled` to the server as it unwinds.
            raise ToolTimeoutError(
                f"the MCP tool {tool!r} on server {self.name!r} did not finish in {timeout_s:.3g} s"
            ) from None
        except MCPError as exc:
            if exc.code == types.CONNECTION_CLOSED:
                self._forget_session()
                raise ToolError(
                    f"the MCP server {self.name!r} closed the connection during the call",
                    retryable=True,
                ) from None
            raise ToolError(f"the MCP server {self.name!r} refused the call: {exc}") from None
        except (httpx2.TransportError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            self._forget_session()
            raise ToolError(
                f"lost the connection to the MCP server {self.name!r}: {_describe(exc)}",
                retryable=True,
            ) from None
        finally:
            current_call.reset(token)

    # -- the session -------------------------------------------------------

    async def _client(self) -> Client:
        live = self._live
        if live is not None and live.alive:
            return live.ready.result()
        async with self._connect_lock:
            if self._closed:
                raise InfrastructureError(f"the MCP server {self.name!r} is closed")
            live = self._live
            # A session still connecting (its first waiter gave up) is waited
            # for, not replaced.
            if live is None or live.ended.is_set() or (live.ready.done() and not live.alive):
                if live is not None:
                    await self._close_live(live)
                live = self._live = self._start()
            try:
                # Shielded: a call cancelled while waiting must not cancel
                # the connect other calls are also waiting for.
                async with asyncio.timeout(self.config.connect_timeout_s):
                    return await asyncio.shield(live.ready)
            except TimeoutError:
                await self._close_live(live)
                raise InfrastructureError(
                    f"cannot connect to the MCP server {self.name!r}: no answer in "
                    f"{self.config.connect_timeout_s:g} s"
                ) from None
            except InfrastructureError:
                raise
            except Exception as exc:
                await self._close_live(live)
                raise InfrastructureError(
                    f"cannot connect to the MCP server {self.name!r}: {_describe(exc)}"
                ) from exc

    def _start(self) -> _Live:
        live = _Live()
        live.owner = asyncio.create_task(self._own(live), name=f"mcp-session-{self.name}")
        self.connects += 1
        # A new session may be a restarted server with other tools.
        self._tools = None
        return live

    async def _own(self, live: _Live) -> None:
        client = Client(
            open_transport(self.name, self.config, live.ended),
            client_info=self._client_info,
            mode=self.config.protocol,
            elicitation_callback=self._on_elicit,
            # Without a callback the SDK declares no sampling capability, so a
            # server that honours capabilities never asks.
            sampling_callback=self._on_sample if self.config.sampling is not None else None,
            message_handler=self._on_message,
            logging_callback=self._on_log,
            cache=None,  # tools/list is cached here, invalidated by change events
        )
        try:
            async with client, anyio.create_task_group() as group:
                if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
                    # Subscribe before anyone calls: a change announced before
                    # the subscription is acknowledged would be lost (no replay).
                    subscribed = anyio.Event()
                    group.start_soon(self._listen_for_changes, client, subscribed)
                    with anyio.move_on_after(self.config.connect_timeout_s):
                        await subscribed.wait()
                live.ready.set_result(client)
                await live.ended.wait()
                group.cancel_scope.cancel()
        except Exception as exc:
            if not live.ready.done():
                live.ready.set_exception(exc)
            else:
                log.info("MCP server %r: session ended: %s", self.name, _describe(exc))
        finally:
            live.ended.set()
            if not live.ready.done():
                live.ready.cancel()

    async def _listen_for_changes(self, client: Client, subscribed: anyio.Event) -> None:
        """2026-era servers announce tool changes on a `subscriptions/listen` stream."""
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                subscribed.set()
                async for _ in subscription:
                    self._tools_changed()
        except (ListenNotSupportedError, MCPError, SubscriptionLost, TimeoutError) as exc:
            log.info("MCP server %r: no tool change events: %s", self.name, exc)
        finally:
            subscribed.set()

    async def _on_message(self, message: IncomingMessage) -> None:
        # Handshake-era servers send the notification on the session itself.
        if isinstance(message, types.ToolListChangedNotification):
            self._tools_changed()

    def _calling(self) -> ToolContext | None:
        call = current_call.get()
        if call is None and len(self._inflight) == 1:
            # On a handshake-era stdio session the request carries no link to
            # the call that caused it; with one call in flight it can only be
            # that one. With several, forwarding could ask the wrong run.
            call = self._inflight[0]
        return call

    async def _on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        """A log message of the server goes to the call it belongs to, if any (a log
        sent between calls belongs to none)."""
        call = self._calling()
        if call is None or call.log is None:
            return
        try:
            await call.log(params.level, params.data, params.logger)
        except Exception as exc:
            # A lost log message must not fail the call it comes from.
            log.warning("MCP server %r: log message dropped: %s", self.name, exc)

    async def _on_sample(
        self, context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.ErrorData:
        route = self.config.sampling
        call = self._calling()
        if route == "forward":
            return await forward_sampling(params, call)
        if self._sampler is None or route is None:
            return types.ErrorData(code=types.INVALID_REQUEST, message="sampling is declined")
        try:
            return await self._sampler.sample(
                self.name, route, params, call.deadline_at if call is not None else None
            )
        except Exception as exc:
            # Unexpected failures may carry request details; the server gets the kind only.
            log.warning("MCP server %r: sampling failed: %s", self.name, _describe(exc))
            return types.ErrorData(
                code=types.INTERNAL_ERROR, message=f"sampling failed: {type(exc).__name__}"
            )

    async def _on_elicit(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        call = self._calling()
        try:
            return await answer_elicitation(self.config.elicitation, params, call)
        except Exception as exc:
            log.warning("MCP server %r: elicitation failed, declining: %s", self.name, exc)
            return types.ElicitResult(action="decline")

    def _forget_session(self) -> None:
        if self._live is not None:
            self._live.ended.set()

    async def _close_live(self, live: _Live) -> None:
        live.ended.set()
        owner = live.owner
        if owner is None or owner.done():
            return
        try:
            await asyncio.wait_for(asyncio.shield(owner), CLOSE_TIMEOUT_S)
        except TimeoutError:
            owner.cancel()
            with contextlib.suppress(BaseException):
                await owner

    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def aclose(self) -> None:
        async with self._connect_lock:
            self._closed = True
            for task in list(self._background):
                task.cancel()
            if self._live is not None:
                await self._close_live(self._live)
                self._live = None


def call_meta(ctx: ToolContext) -> types.RequestParamsMeta:
    """The call a request serves, in its `_meta` beside the progress token, under agentq's
    own prefix (`io.modelcontextprotocol/` is MCP's): a server with side effects dedupes on
    the idempotency key, the same for every delivery of a call."""
    meta = {
        "agentq/run_id": ctx.run_id,
        "agentq/call_id": ctx.call_id,
        "agentq/idempotency_key": ctx.idempotency_key,
    }
    # An open map (PEP 728 `extra_items`), which mypy does not know yet.
    return cast(types.RequestParamsMeta, meta)


def _progress_to(ctx: ToolContext, server: str) -> Any:
    async def report(progress: float, total: float | None, message: str | None) -> None:
        update: dict[str, Any] = {"progress": progress}
        if total is not None:
            update["total"] = total
        if message is not None:
            update["message"] = message
        try:
            await ctx.progress(update)
        except Exception as exc:
            # A lost progress event must not fail the call it reports on.
            log.warning("MCP server %r: progress event dropped: %s", server, exc)

    return report


def _describe(exc: BaseException) -> str:
    """The innermost useful message, unwrapping the task groups anyio wraps errors in."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, FileNotFoundError) and exc.filename:
        return f"the command {exc.filename!r} was not found (is it installed and on PATH?)"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
