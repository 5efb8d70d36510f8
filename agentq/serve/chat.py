"""The AI SDK chat endpoint: `useChat` (DefaultChatTransport) talks to a durable run.

A chat id maps to its current run. A POST whose last assistant message answers what
that run waits for (an approval response, a client tool's output) resolves the parked
calls through the Client and streams on from there; any other POST starts a new run
from the conversation. `GET …/chat/{id}/stream` replays the current run's stream while
it is active (the AI SDK's resume convention; 204 when there is nothing to resume).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import ValidationError
from sse_starlette import EventSourceResponse

from agentq.orchestrator.client import Client
from agentq.orchestrator.core import events as ev
from agentq.orchestrator.core import keys
from agentq.orchestrator.core.errors import RunNotFoundError
from agentq.orchestrator.runs.result import TERMINAL_STATUSES, RunResult
from agentq.orchestrator.spec.run import RunSpec
from agentq.serve.auth import Principal, require
from agentq.serve.chat_messages import (
    ChatInputError,
    ChatRequest,
    UIMessage,
    run_messages,
    tool_name,
)
from agentq.serve.deps import client_of, config_of, feeds_of, principal_of, resolved
from agentq.serve.errors import ApiError, conflict, not_found, validation_error
from agentq.serve.feeds import RunFeeds
from agentq.serve.follow import follow
from agentq.serve.limits import check_spec_size, check_submit_rate
from agentq.serve.tokens import CHAT_SCOPE_PREFIX, SUBJECT_SCOPE_PREFIX
from agentq.serve.ui_stream import UIChunks

router = APIRouter(prefix="/v1/agents", tags=["chat"])

UI_STREAM_HEADERS = {
    "x-vercel-ai-ui-message-stream": "v1",
    "Cache-Control": "no-cache",
    "X-Accel-Buffering": "no",
}


def chat_key(tenant: str, agent: str, chat_id: str) -> str:
    return f"aq:chat:{tenant}:{agent}:{chat_id}"


def chat_of(request: Request, chat_id: str, scope: str) -> tuple[Principal, str]:
    """The caller and the chat's id in its namespace. A `chat:ID` token reaches that one
    chat; a `subject:USER` token reaches USER's chats only (their ids live apart, so two
    users' `c1` are two chats); a key needs `scope`."""
    principal = principal_of(request)
    if CHAT_SCOPE_PREFIX + chat_id in principal.scopes:
        return principal, chat_id
    subject = next((s for s in principal.scopes if s.startswith(SUBJECT_SCOPE_PREFIX)), None)
    if subject is not None:
        return principal, f"{subject}/{chat_id}"  # a chat id has no '/': no collision
    require(principal, scope)
    return principal, chat_id


def _template(request: Request, name: str) -> dict[str, Any]:
    template = config_of(request).agents.get(name)
    if template is None:
        raise not_found(f"no agent named {name!r}")
    return template


async def _current_run(client: Client, key: str) -> RunResult | None:
    run_id = await client.redis.get(key)
    if run_id is None:
        return None
    try:
        return await client.runs.result(
            run_id.decode() if isinstance(run_id, bytes) else str(run_id)
        )
    except RunNotFoundError:
        return None


async def _resolve(client: Client, result: RunResult, reply: UIMessage) -> int:
    """Resolve the run's parked calls the reply answers; how many it resolved."""
    waiting = {p["tool_call_id"]: p["status"] for p in result.pending if "tool_call_id" in p}
    resolved = 0
    for part in reply.parts:
        call_id = str(part.get("toolCallId", ""))
        if tool_name(part) is None or call_id not in waiting:
            continue
        approval = part.get("approval") or {}
        if waiting[call_id] == "awaiting-approval" and approval.get("approved") is not None:
            await client.runs.approve(
                result.id,
                call_id,
                approved=bool(approval["approved"]),
                reason=approval.get("reason"),
            )
            resolved += 1
        elif waiting[call_id] == "awaiting-result" and part.get("state") in (
            "output-available",
            "output-error",
        ):
            is_error = part["state"] == "output-error"
            output = part.get("errorText", "error") if is_error else part.get("output")
            await client.runs.submit_tool_result(result.id, call_id, output, is_error=is_error)
            resolved += 1
    return resolved


@router.post(
    "/{name}/chat",
    responses={
        200: {"description": "The AI SDK UI message stream", "content": {"text/event-stream": {}}}
    },
)
async def chat(request: Request, name: str, body: ChatRequest) -> Response:
    """Send a chat turn (the body `DefaultChatTransport` posts); get the UI message stream."""
    principal, chat_id = chat_of(request, body.id, "runs:write")
    template = _template(request, name)
    client = client_of(request)
    key = chat_key(principal.tenant, name, chat_id)
    current = await _current_run(client, key)
    if current is not None and current.status not in TERMINAL_STATUSES:
        after = (await client.runs.status(current.id)).seq
        last = body.messages[-1]
        if last.role == "assistant" and await _resolve(client, current, last):
            return _ui_stream(client, feeds_of(request), current.id, after)
        raise conflict(
            f"chat {body.id!r} has a run in progress ({current.id}); "
            "answer what it waits for or resume its stream"
        )
    config = config_of(request)
    try:
        messages = run_messages(body.messages)
        spec = RunSpec.model_validate(
            {
                **template,
                "messages": [m.model_dump(exclude_none=True) for m in messages],
                "metadata": {**template.get("metadata", {}), "chat_id": body.id, "agent": name},
            }
        )
    except ChatInputError as exc:
        raise ApiError(422, "invalid_request", str(exc), field=exc.field) from None
    except ValidationError as exc:
        raise validation_error(exc) from None
    check_spec_size(spec.model_dump_json(exclude_none=True).encode(), config.limits.max_spec_bytes)
    await check_submit_rate(client.runs, principal.tenant, config.limits.submits_per_minute)
    run_id = await client.runs.submit(spec, tenant=principal.tenant)
    await client.redis.set(key, run_id, ex=client.settings.retention_s)
    return _ui_stream(client, feeds_of(request), run_id, 0)


@router.get(
    "/{name}/chat/{chat_id}/stream",
    status_code=200,
    responses={204: {"description": "No active stream"}},
)
async def resume(request: Request, name: str, chat_id: str) -> Response:
    """Resume the chat's stream (the AI SDK's `resume`): the active run from its start."""
    principal, chat_id = chat_of(request, chat_id, "runs:read")
    _template(request, name)
    client = client_of(request)
    current = await _current_run(client, chat_key(principal.tenant, name, chat_id))
    if current is None or current.status in TERMINAL_STATUSES:
        return Response(status_code=204)
    return _ui_stream(client, feeds_of(request), current.id, 0)


async def _parked(client: Client, run_id: str, seen: int) -> bool:
    """True when the run waits on the user and every event so far has been streamed."""
    status, seq = await resolved(client.redis.hmget(keys.meta(run_id), ["status", "seq"]))
    if status is None or status.decode() != "awaiting" or int(seq or 0) != seen:
        return False
    result = await client.runs.result(run_id)
    if not result.steps:
        return False
    step = result.steps[-1]
    settled = {r.tool_call_id for r in step.tool_results}
    settled |= {str(p.get("tool_call_id")) for p in result.pending}
    return all(call.id in settled for call in step.tool_calls)


def _ui_stream(client: Client, feeds: RunFeeds, run_id: str, after: int) -> EventSourceResponse:
    async def chunks() -> AsyncIterator[dict[str, str]]:
        adapter = UIChunks(run_id)
        yield _data(adapter.start())
        seen = after
        async for frame in follow(feeds, run_id, after, idle_s=0.5):
            if frame is not None:
                event = frame.event
                seen = event.seq
                for chunk in adapter.feed(event):
                    yield _data(chunk)
                if isinstance(event, ev.TERMINAL):
                    break
                if isinstance(event, ev.TextDelta | ev.ReasoningDelta):
                    continue
            if await _parked(client, run_id, seen):
                for chunk in adapter.park():
                    yield _data(chunk)
                break
        yield {"data": "[DONE]"}

    return EventSourceResponse(chunks(), ping=15, headers=UI_STREAM_HEADERS)


def _data(chunk: dict[str, Any]) -> dict[str, str]:
    return {"data": json.dumps(chunk, separators=(",", ":"), default=str)}
