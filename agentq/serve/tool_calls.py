"""The tool-calls API: the fleet's tools called without a run (`Client.calls`).

    GET  /v1/tools                           the catalogue, with input schemas
    POST /v1/tools/{name}/calls[?wait=S]     start a call (201 {id, status}); with `wait`,
                                             its result (200) if it ends within S seconds
    GET  /v1/tool-calls/{id}                 its status and, once ended, its result
    GET  /v1/tool-calls/{id}/events          SSE: tool-call, tool-running, tool-progress…,
                                             tool-result | tool-error (Last-Event-ID resumes)
    POST /v1/tool-calls/{id}/cancel          cancel it unless it ended; its result

An unknown tool is a 404 naming it, input breaking the tool's schema a 422 naming the
path; a tool that fails is a result with `is_error`, not an HTTP error. Calls belong to
the caller's tenant; a key's `tool:PATTERN` scopes narrow the tools it sees (auth.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Body, Header, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from sse_starlette import EventSourceResponse

from agentq.orchestrator.calls.api import CallNotFoundError, ToolCalls
from agentq.orchestrator.calls.catalogue import CallInputError, ToolCallResult
from agentq.orchestrator.core.errors import UnknownToolError
from agentq.serve.auth import Principal
from agentq.serve.deps import (
    MAX_SEQ,
    call_feeds_of,
    caller,
    client_of,
    config_of,
    resume_point,
    streams_of,
)
from agentq.serve.errors import ApiError, not_found
from agentq.serve.limits import check_submit_rate

router = APIRouter(tags=["tool calls"])

CALL_SCOPE = "tools:call"
MAX_WAIT_S = 300.0


class ToolInfo(BaseModel):
    name: str
    aliases: list[str] = Field(default_factory=list)
    kind: str
    description: str = ""
    input_schema: dict[str, Any]


class ToolList(BaseModel):
    tools: list[ToolInfo]


class CallRequest(BaseModel):
    input: Any = Field(default_factory=dict)
    timeout_s: float | None = Field(default=None, gt=0, le=24 * 3600)


class CallState(BaseModel):
    id: str
    tool_name: str
    status: str  # queued, running, done
    result: ToolCallResult | None = None


def _calls(request: Request) -> ToolCalls:
    return client_of(request).calls


async def visible_tools(calls: ToolCalls, principal: Principal) -> list[ToolInfo]:
    """The catalogue as this key sees it (shared with the MCP gateway)."""
    found = {t.name: t for t in (await calls.catalogue()).values()}
    tools = []
    for tool in await calls.tools():
        entry = found.get(tool.name)
        aliases = list(entry.aliases) if entry is not None else []
        if principal.may_call(tool.name, *aliases):
            tools.append(
                ToolInfo(
                    name=tool.name,
                    aliases=aliases,
                    kind=tool.kind,
                    description=tool.description,
                    input_schema=tool.input_schema,
                )
            )
    return tools


async def check_callable(calls: ToolCalls, principal: Principal, name: str) -> None:
    """A 404 naming the tool when nothing serves it or this key may not see it."""
    found = (await calls.catalogue()).get(name)
    if found is None or not principal.may_call(found.name, *found.aliases):
        raise not_found(f"no tool named {name!r}")


@router.get("/v1/tools", response_model=ToolList)
async def list_tools(request: Request) -> ToolList:
    """The tools this key may call, with their input schemas."""
    principal = caller(request, CALL_SCOPE)
    return ToolList(tools=await visible_tools(_calls(request), principal))


@router.post(
    "/v1/tools/{name}/calls",
    status_code=201,
    response_model=CallState,
    responses={200: {"model": CallState, "description": "The call ended within `wait`"}},
)
async def start_call(
    request: Request,
    name: str,
    body: Annotated[CallRequest, Body()],
    wait: Annotated[float | None, Query(ge=0, le=MAX_WAIT_S)] = None,
    idempotency_key: Annotated[str | None, Header(max_length=200)] = None,
    traceparent: Annotated[str | None, Header(max_length=100)] = None,
) -> Any:
    """Call a tool as a job. `Idempotency-Key` returns the first call of that key."""
    principal = caller(request, CALL_SCOPE)
    calls = _calls(request)
    await check_callable(calls, principal, name)
    await check_submit_rate(client_of(request).runs, principal.tenant)
    try:
        call_id, _, _ = await calls.start(
            name,
            body.input,
            timeout_s=body.timeout_s,
            idempotency_key=idempotency_key,
            tenant=principal.tenant,
            traceparent=traceparent,
        )
    except UnknownToolError:
        raise not_found(f"no tool named {name!r}") from None
    except CallInputError as exc:
        raise ApiError(
            422, "invalid_input", exc.message, field="input" + exc.violations[0]["path"]
        ) from None
    headers = {"location": f"/v1/tool-calls/{call_id}"}
    if wait:
        with streams_of(request).held(principal.tenant):
            # Through the process's shared read: a thousand waits hold no connection each.
            events = call_feeds_of(request).events(call_id)
            result = await calls.wait(call_id, timeout_s=wait, events=events)
        if result is not None:
            state = CallState(id=call_id, tool_name=result.tool_name, status="done", result=result)
            return JSONResponse(state.model_dump(mode="json"), status_code=200, headers=headers)
    state = await _state(calls, call_id, principal)
    return JSONResponse(state.model_dump(mode="json"), status_code=201, headers=headers)


async def _state(calls: ToolCalls, call_id: str, principal: Principal) -> CallState:
    try:
        info = await calls.info(call_id)
    except CallNotFoundError:
        raise not_found(f"no tool call with id {call_id!r}") from None
    if info.tenant != principal.tenant:
        raise not_found(f"no tool call with id {call_id!r}")
    result = await calls.result(call_id)
    return CallState(id=call_id, tool_name=info.tool_name, status=info.status, result=result)


@router.get("/v1/tool-calls/{call_id}", response_model=CallState)
async def get_call(request: Request, call_id: str) -> CallState:
    return await _state(_calls(request), call_id, caller(request, CALL_SCOPE))


@router.post("/v1/tool-calls/{call_id}/cancel", response_model=CallState)
async def cancel_call(request: Request, call_id: str) -> CallState:
    """Cancel the call unless it has ended (it stays as it ended)."""
    principal = caller(request, CALL_SCOPE)
    calls = _calls(request)
    await _state(calls, call_id, principal)
    result = await calls.cancel(call_id)
    return CallState(id=call_id, tool_name=result.tool_name, status="done", result=result)


@router.get("/v1/tool-calls/{call_id}/events")
async def call_events(
    request: Request,
    call_id: str,
    after: Annotated[int, Query(ge=0, le=MAX_SEQ)] = 0,
    last_event_id: Annotated[str | None, Header()] = None,
) -> EventSourceResponse:
    """Follow the call's events until its result. `Last-Event-ID` (or `?after=`) resumes."""
    principal = caller(request, CALL_SCOPE)
    calls = _calls(request)
    await _state(calls, call_id, principal)
    start = resume_point(after, last_event_id)
    heartbeat_s = config_of(request).limits.heartbeat_s
    frames = call_feeds_of(request).frames(call_id, start)

    async def sse() -> AsyncIterator[dict[str, str]]:
        async for frame in frames:
            event = frame.event
            yield {
                "id": str(event.seq),
                "event": event.type,
                "data": event.model_dump_json(exclude_none=True),
            }

    body = streams_of(request).holding(principal.tenant, sse())
    return EventSourceResponse(body, ping=int(heartbeat_s))
