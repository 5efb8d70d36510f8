"""`agentq serve --mcp`: the fleet's tools as one Streamable HTTP MCP server at `/mcp`.

Built from the MCP Python SDK's server pieces (the low-level `Server`, its Streamable
HTTP session manager); every `tools/call` is a call without a run (`Client.calls`), so
it runs on the tool's queue on whichever worker serves it. The gateway adds:

- auth: `Authorization: Bearer KEY` with the HTTP API's keys (`AGENTQ_API_KEYS`); a key
  needs the `tools:call` scope and sees only the tools its `tool:PATTERN` scopes allow;
- limits: each `tools/call` counts toward its tenant's submit rate, as a POST of a tool
  call does; past it, a JSON-RPC error (RATE_LIMITED) whose data names the limit;
- progress: the job's progress values as `notifications/progress` when the client
  sent a progress token;
- cancellation: `notifications/cancelled` cancels the job (its result is written once);
- `notifications/tools/list_changed` to connected sessions when the catalogue changes
  (workers announce new tools), for clients of the handshake protocol revisions;
- elicitation: an upstream MCP server's questions go to the client when it declared
  elicitation (else they are declined);
- sampling: an upstream MCP server's `sampling/createMessage` goes to the client when
  it declared sampling (the server's config says `"sampling": "forward"`);
- logging: an upstream MCP server's log messages during a call go to the client as
  `notifications/message`, at or above the level it set (`logging/setLevel`);
- media: image and audio parts of a tool's output as MCP image/audio content;
- error kinds: an error result names its kind (`no-such-tool`, `invalid-input`,
  `execution`, `timeout`, ...) in its `_meta` as `agentq/error_kind`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Mapping, MutableMapping
from typing import Any, TypeVar, get_args

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.session import ServerSession
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from agentq.orchestrator.calls.api import (
    QUEUE_GRACE_S,
    InputCallback,
    LogCallback,
    SampleCallback,
    ToolCalls,
)
from agentq.orchestrator.calls.catalogue import CallInputError, ToolCallResult
from agentq.orchestrator.core.errors import AgentqError, UnknownToolError
from agentq.orchestrator.core.tool_errors import ToolErrorKind
from agentq.serve.auth import KeyRing, Principal
from agentq.serve.deps import client_of, look_up_token, principal_of, signer_of
from agentq.serve.errors import ApiError, error_body
from agentq.serve.feeds import CallFeeds
from agentq.serve.limits import check_submit_rate
from agentq.serve.server import is_loopback
from agentq.serve.tokens import grant_of, holder_of
from agentq.serve.tool_calls import CALL_SCOPE, visible_tools

log = logging.getLogger("agentq.serve.mcp")

MCP_PATH = "/mcp"
# How often the gateway looks at the catalogue for tools/list_changed.
CATALOGUE_POLL_S = 2.0
INVALID_PARAMS = -32602
# A server error of JSON-RPC's implementation-defined range (-32000..-32099): a limit
# refused the request; its data names the limit and when to try again.
RATE_LIMITED = -32029
_PRINCIPAL = "agentq_principal"
MCP_SESSION_HEADER = "mcp-session-id"
MAX_REMEMBERED_SESSIONS = 10_000
# MCP log levels, least severe first.
LOG_LEVELS: tuple[types.LoggingLevel, ...] = get_args(types.LoggingLevel)


class _GatewayServer(Server[Any]):
    """The SDK's server, announcing `tools.listChanged` to handshake-era clients."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=True),
            experimental_capabilities,
            extensions,
        )


# Where an error result names its kind: MCP leaves `_meta` to implementations, under a
# prefix of their own, and a client can tell a bad input from a broken tool without
# parsing the text the model reads.
ERROR_KIND_META = "agentq/error_kind"


def error_content(text: str, kind: ToolErrorKind | None) -> types.CallToolResult:
    """A tool error as MCP's error result (`isError`), its kind in `_meta`."""
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        is_error=True,
        meta={ERROR_KIND_META: kind.value} if kind is not None else None,
    )


def mcp_content(result: ToolCallResult) -> types.CallToolResult:
    """A call's result as MCP content: text, images and audio, resources, structured."""
    if result.is_error:
        return error_content(result.error or "error", result.error_kind)
    output = result.output
    if isinstance(output, str):
        return types.CallToolResult(content=[types.TextContent(type="text", text=output)])
    if isinstance(output, dict) and isinstance(output.get("content"), list):
        blocks = [_block(part) for part in output["content"] if isinstance(part, dict)]
        structured = output.get("structured")
        return types.CallToolResult(
            content=blocks, structured_content=structured if isinstance(structured, dict) else None
        )
    text = json.dumps(output, ensure_ascii=False)
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


def _block(part: Mapping[str, Any]) -> types.ContentBlock:
    kind = part.get("type")
    if kind == "text":
        return types.TextContent(type="text", text=str(part.get("text", "")))
    if kind == "media":
        media_type, data = str(part.get("media_type", "")), str(part.get("data", ""))
        if media_type.startswith("audio/"):
            return types.AudioContent(type="audio", data=data, mime_type=media_type)
        if media_type.startswith("image/"):
            return types.ImageContent(type="image", data=data, mime_type=media_type)
        return types.EmbeddedResource(
            type="resource",
            resource=types.BlobResourceContents(
                uri="agentq://media", blob=data, mime_type=media_type
            ),
        )
    if kind == "resource-link":
        return types.ResourceLink(
            type="resource_link", uri=str(part["uri"]), name=str(part.get("name", part["uri"]))
        )
    if kind == "resource" and "text" in part:
        return types.EmbeddedResource(
            type="resource",
            resource=types.TextResourceContents(
                uri=str(part["uri"]), text=str(part["text"]), mime_type=part.get("mime_type")
            ),
        )
    if kind == "resource":
        return types.EmbeddedResource(
            type="resource",
            resource=types.BlobResourceContents(
                uri=str(part["uri"]),
                blob=str(part.get("data", "")),
                mime_type=part.get("mime_type"),
            ),
        )
    return types.TextContent(type="text", text=json.dumps(dict(part), ensure_ascii=False))


def progress_of(value: Any, count: int) -> tuple[float, float | None, str | None]:
    """An MCP progress notification's (progress, total, message) from a job's progress
    value: its own numbers when it has them (MCP upstream progress, `{"progress": n,
    "total": m}`), else how many values came so far, with the value as the message."""
    if isinstance(value, dict) and isinstance(value.get("progress"), int | float):
        total = value.get("total")
        message = value.get("message")
        return (
            float(value["progress"]),
            float(total) if isinstance(total, int | float) else None,
            str(message) if message is not None else None,
        )
    message = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return float(count), None, message


class McpGateway:
    """The `/mcp` endpoint: an ASGI app (auth, then the SDK's session manager)."""

    def __init__(self, keys: KeyRing | None, *, host: str = "127.0.0.1") -> None:
        self.calls: ToolCalls | None = None
        self.feeds: CallFeeds | None = None
        self.server = _GatewayServer(
            "agentq",
            version="0.1.0",
            instructions="The tools of an agentq fleet: each call runs as a durable job.",
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_set_logging_level=self._set_logging_level,
        )
        self.manager = StreamableHTTPSessionManager(
            app=self.server, security_settings=_rebinding_guard(keys, host)
        )
        # The latest request's session of each connection (by its Mcp-Session-Id): its
        # standalone channel carries notifications that belong to no request.
        self.sessions: dict[str, ServerSession] = {}
        # The log level each connection's client set (`logging/setLevel`), by its
        # Mcp-Session-Id (a connection's requests may each have a session object).
        self.log_levels: dict[str, types.LoggingLevel] = {}
        # Who opened each session (a key's hash): only they may use its id. A session
        # forgotten past MAX_REMEMBERED_SESSIONS is refused, never left unbound.
        self.owners: dict[str, str] = {}

    @contextlib.asynccontextmanager
    async def running(self, calls: ToolCalls, feeds: CallFeeds) -> AsyncIterator[None]:
        self.calls = calls
        self.feeds = feeds  # the process's shared read of the calls it follows
        async with self.manager.run():
            watcher = asyncio.create_task(self._watch_catalogue(), name="agentq-mcp-catalogue")
            try:
                yield
            finally:
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            request = Request(scope)
            await look_up_token(request)  # a route of its own: the app's dependencies skip it
            try:
                principal = principal_of(request)
                if CALL_SCOPE not in principal.scopes:
                    raise ApiError(403, "forbidden", f"this key lacks the {CALL_SCOPE!r} scope")
                holder = holder_of(request, grant_of(request, signer_of(request)))
                session_id = request.headers.get(MCP_SESSION_HEADER)
                # A session belongs to the key (or its tokens) that opened it: to any other
                # caller its id names no session, as an unknown one does.
                if session_id is not None and self.owners.get(session_id) != holder:
                    raise ApiError(404, "not_found", "no MCP session with that id")
            except ApiError as exc:
                response = JSONResponse(
                    error_body(exc.type, exc.message), status_code=exc.status, headers=exc.headers
                )
                await response(scope, receive, send)
                return
            scope.setdefault("state", {})[_PRINCIPAL] = principal
            if session_id is None:
                send = self._binding(send, holder)
        await self.manager.asgi_app(scope, receive, send)

    def _binding(self, send: Send, holder: str) -> Send:
        """`send`, recording the holder of the session the response opens."""

        async def sending(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                for name, value in message.get("headers", []):
                    if name.decode().lower() == MCP_SESSION_HEADER.lower():
                        _remember_last(self.owners, value.decode(), holder)
            await send(message)

        return sending

    # -- handlers -------------------------------------------------------------------

    def _principal(self, ctx: ServerRequestContext[Any]) -> Principal:
        request = _http_request(ctx)
        principal = request.scope.get("state", {}).get(_PRINCIPAL)
        if isinstance(principal, Principal):
            return principal
        return principal_of(request)

    async def _count_call(self, ctx: ServerRequestContext[Any], principal: Principal) -> None:
        """Count the call toward its tenant's submit rate, as `POST /v1/tools/{name}/calls`
        does; past the limit, an MCP error naming it."""
        request = _http_request(ctx)
        try:
            await check_submit_rate(client_of(request).runs, principal.tenant)
        except ApiError as exc:
            retry_after_s = int((exc.headers or {}).get("Retry-After", "1"))
            raise MCPError(
                RATE_LIMITED,
                f"{exc.message} (limit: {exc.limit}); try again in {retry_after_s} s",
                data={"limit": exc.limit, "retry_after_s": retry_after_s},
            ) from None

    def _remember(self, ctx: ServerRequestContext[Any]) -> None:
        session_id = _session_id(ctx)
        if session_id:
            _remember_last(self.sessions, session_id, ctx.session)

    def _calls(self) -> ToolCalls:
        assert self.calls is not None, "the gateway is not running"
        return self.calls

    def _feeds(self) -> CallFeeds:
        assert self.feeds is not None, "the gateway is not running"
        return self.feeds

    async def _list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        self._remember(ctx)
        tools = await visible_tools(self._calls(), self._principal(ctx))
        return types.ListToolsResult(
            tools=[
                types.Tool(name=t.name, description=t.description, input_schema=t.input_schema)
                for t in tools
            ]
        )

    async def _set_logging_level(
        self, ctx: ServerRequestContext[Any], params: types.SetLevelRequestParams
    ) -> types.EmptyResult:
        session_id = _session_id(ctx)
        if session_id:
            _remember_last(self.log_levels, session_id, params.level)
        return types.EmptyResult()

    def _logger(self, ctx: ServerRequestContext[Any]) -> LogCallback:
        """The call's log messages for this client, at or above the level it set."""

        async def send(level: str, data: Any, logger: str | None) -> None:
            severity: types.LoggingLevel = level if level in LOG_LEVELS else "info"
            least = self.log_levels.get(_session_id(ctx) or "", LOG_LEVELS[0])
            if LOG_LEVELS.index(severity) < LOG_LEVELS.index(least):
                return
            await ctx.session.send_log_message(
                severity, data, logger, related_request_id=_request_id(ctx)
            )

        return send

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        self._remember(ctx)
        principal = self._principal(ctx)
        calls = self._calls()
        found = (await calls.catalogue()).get(params.name)
        if found is None or not principal.may_call(found.name, *found.aliases):
            raise MCPError(INVALID_PARAMS, f"Unknown tool: {params.name}")
        await self._count_call(ctx, principal)
        try:
            call_id, _, tool = await calls.start(
                params.name,
                params.arguments or {},
                tenant=principal.tenant,
                traceparent=_traceparent(ctx),
            )
        except UnknownToolError:
            raise MCPError(INVALID_PARAMS, f"Unknown tool: {params.name}") from None
        except CallInputError as exc:
            # A tool execution error, so that the model can correct its input.
            return error_content(exc.message, ToolErrorKind.INVALID_INPUT)
        except AgentqError as exc:
            return error_content(exc.message, None)
        token = _progress_token(ctx)
        count = 0

        async def forward(value: Any) -> None:
            nonlocal count
            if token is None:
                return
            count += 1
            progress, total, message = progress_of(value, count)
            await ctx.session.send_progress_notification(
                token, progress, total, message, related_request_id=_request_id(ctx)
            )

        budget_s = tool.timeout_s + QUEUE_GRACE_S
        try:
            result = await calls.wait(
                call_id,
                events=self._feeds().events(call_id),
                timeout_s=budget_s,
                on_progress=forward,
                on_input=_asker(ctx),
                on_log=self._logger(ctx),
                on_sample=_sampler(ctx),
            )
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await calls.cancel(call_id, "the MCP client cancelled the call")
            raise
        if result is None:
            result = await calls.cancel(
                call_id, f"no worker finished the call within {budget_s:g} s"
            )
        return mcp_content(result)

    # -- tools/list_changed -------------------------------------------------------------

    async def _watch_catalogue(self) -> None:
        names: frozenset[str] | None = None
        while True:
            try:
                current = frozenset((await self._calls().catalogue()).keys())
                if names is not None and current != names:
                    await self._tools_changed()
                names = current
            except Exception as exc:  # the gateway keeps serving calls regardless
                log.warning("cannot read the catalogue: %s", exc)
            await asyncio.sleep(CATALOGUE_POLL_S)

    async def _tools_changed(self) -> None:
        for session_id, session in list(self.sessions.items()):
            try:
                await session.send_tool_list_changed()
            except Exception as exc:  # a closed session: forget it
                log.debug("tools/list_changed not delivered: %s", exc)
                self.sessions.pop(session_id, None)


def _rebinding_guard(keys: KeyRing | None, host: str) -> TransportSecuritySettings | None:
    """A gateway on loopback without API keys answers only requests addressed to loopback
    (a web page's DNS rebinding cannot reach it); with keys, the bearer key guards it."""
    if keys is not None or not is_loopback(host):
        return None
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
        allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
    )


def _http_request(ctx: ServerRequestContext[Any]) -> Request:
    """The HTTP request a handler answers: the door's app, its state and the caller."""
    if isinstance(ctx.request, Request):
        return ctx.request
    raise MCPError(INVALID_PARAMS, "no HTTP request to authenticate")


def _asker(ctx: ServerRequestContext[Any]) -> InputCallback | None:
    """The tool's questions (an upstream MCP server's elicitation) for this client, when it
    declared elicitation; else they are declined."""
    wanted = types.ClientCapabilities(elicitation=types.ElicitationCapability())
    if not ctx.session.check_client_capability(wanted):
        return None

    async def ask(message: str, schema: dict[str, Any]) -> dict[str, Any] | None:
        answer = await ctx.session.elicit_form(message, schema, related_request_id=ctx.request_id)
        if answer.action != "accept":
            return None
        return dict(answer.content or {})

    return ask


def _sampler(ctx: ServerRequestContext[Any]) -> SampleCallback | None:
    """The tool's sampling requests (an upstream MCP server's) for this client, when it
    declared sampling; else they are declined."""
    wanted = types.ClientCapabilities(sampling=types.SamplingCapability())
    if not ctx.session.check_client_capability(wanted):
        return None

    async def sample(request: dict[str, Any]) -> dict[str, Any] | None:
        params = types.CreateMessageRequestParams.model_validate(request)
        answer = await ctx.session.create_message(
            params.messages,
            max_tokens=params.max_tokens,
            system_prompt=params.system_prompt,
            include_context=params.include_context,
            temperature=params.temperature,
            stop_sequences=params.stop_sequences,
            metadata=params.metadata,
            model_preferences=params.model_preferences,
            related_request_id=ctx.request_id,
        )
        return answer.model_dump(mode="json", by_alias=True, exclude_none=True)

    return sample


V = TypeVar("V")


def _remember_last(found: dict[str, V], session_id: str, value: V) -> None:
    """`value` for the session, put last (the dict is by recency); the oldest sessions
    beyond MAX_REMEMBERED_SESSIONS are forgotten."""
    found.pop(session_id, None)
    found[session_id] = value
    while len(found) > MAX_REMEMBERED_SESSIONS:
        found.pop(next(iter(found)))


def _session_id(ctx: ServerRequestContext[Any]) -> str | None:
    request = ctx.request
    return request.headers.get(MCP_SESSION_HEADER) if isinstance(request, Request) else None


def _progress_token(ctx: ServerRequestContext[Any]) -> str | int | None:
    meta = (ctx.params or {}).get("_meta")
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    return token if isinstance(token, str | int) else None


def _request_id(ctx: ServerRequestContext[Any]) -> str | None:
    return str(ctx.request_id) if ctx.request_id is not None else None


def _traceparent(ctx: ServerRequestContext[Any]) -> str | None:
    meta = (ctx.params or {}).get("_meta")
    if isinstance(meta, dict) and isinstance(meta.get("traceparent"), str):
        return str(meta["traceparent"])
    request = ctx.request
    if isinstance(request, Request):
        return request.headers.get("traceparent")
    return None
