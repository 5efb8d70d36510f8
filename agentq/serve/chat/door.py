"""The AI SDK chat endpoint: `useChat` (DefaultChatTransport) talks to a durable run.

A chat is a thread (orchestrator/threads/): each turn is a run on it, which starts from
the thread's history, so the history is the server's: a client may send only its new
message (the AI SDK persistence guide's `prepareSendMessagesRequest`) or the whole
conversation, and what a request may say is messages.py's rule (the user's messages and
answers to the calls the run waits for). A POST that answers what the run waits for (an
approval response, a client tool's output) resolves the parked calls and streams on
from there. A new user message while the run is still working interrupts it (the
thread's `interrupt` policy: what the AI SDK's `stop()` then a message means); while
the run waits on the answers sent with it, the message is held and starts the next run
when this one ends (in the same response). `POST …/chat/{id}/stop` cancels the run.
`GET …/chat/{id}/stream` replays the current run's stream while it is active (the AI
SDK's resume convention; 204 when there is nothing to resume).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import ValidationError
from sse_starlette import EventSourceResponse

from agentq.orchestrator.client import Client
from agentq.orchestrator.core import events as ev
from agentq.orchestrator.core.errors import AgentqError, RunNotFoundError
from agentq.orchestrator.core.messages import MESSAGE_ADAPTER, Message
from agentq.orchestrator.runs.result import TERMINAL_STATUSES, RunResult, StepResult
from agentq.orchestrator.spec.run import RunSpec
from agentq.serve.auth import Principal, require
from agentq.serve.chat.messages import (
    ChatInputError,
    ChatRequest,
    UIMessage,
    check_request,
    known_calls,
    new_turn,
    tool_name,
    user_messages,
)
from agentq.serve.chat.ui_stream import UIChunks
from agentq.serve.deps import client_of, config_of, feeds_of, principal_of, streams_of
from agentq.serve.errors import ApiError, conflict, not_found, validation_error
from agentq.serve.feeds import RunFeeds
from agentq.serve.follow import follow
from agentq.serve.limits import Slot, check_spec_size, check_submit_rate
from agentq.serve.tokens import CHAT_SCOPE_PREFIX, SUBJECT_SCOPE_PREFIX

router = APIRouter(prefix="/v1/agents", tags=["chat"])
log = logging.getLogger("agentq.serve.chat")

UI_STREAM_HEADERS = {
    "x-vercel-ai-ui-message-stream": "v1",
    "Cache-Control": "no-cache",
    "X-Accel-Buffering": "no",
}
# Events streamed while a model step runs: none of them can have parked the run, so the
# stream does not ask Redis after each.
STREAMED = (ev.TextDelta, ev.ReasoningDelta, ev.ToolInputStart, ev.ToolInputDelta)


def chat_key(tenant: str, agent: str, chat_id: str) -> str:
    return f"aq:chat:{tenant}:{agent}:{chat_id}"


def chat_thread(agent: str, chat_id: str) -> str:
    """The thread of an agent's chat (in the tenant's namespace, as every thread): a
    digest, since a chat id (a user's, `subject:USER/ID`) may hold what a thread id may
    not."""
    return "chat-" + hashlib.sha256(f"{agent}\0{chat_id}".encode()).hexdigest()[:32]


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


async def _current_run(client: Client, thread_id: str, tenant: str) -> RunResult | None:
    run_id = await client.threads.current(thread_id, tenant=tenant)
    if run_id is None:
        return None
    try:
        return await client.runs.result(run_id)
    except RunNotFoundError:
        return None


def _answers(result: RunResult, reply: UIMessage | None) -> dict[str, dict[str, Any]]:
    """The parts of the client's reply that answer a call the run waits for, by call id."""
    if reply is None:
        return {}
    waiting = {p["tool_call_id"]: p["status"] for p in result.pending if "tool_call_id" in p}
    found: dict[str, dict[str, Any]] = {}
    for part in reply.parts:
        call_id = str(part.get("toolCallId", ""))
        if tool_name(part) is None or call_id not in waiting:
            continue
        answers_it = {
            "awaiting-approval": (part.get("approval") or {}).get("approved") is not None,
            "awaiting-result": part.get("state") in ("output-available", "output-error"),
        }
        if answers_it.get(waiting[call_id], False):
            found[call_id] = part
    return found


async def _resolve(client: Client, run_id: str, answers: dict[str, dict[str, Any]]) -> None:
    for call_id, part in answers.items():
        approval = part.get("approval") or {}
        if approval.get("approved") is not None:
            await client.runs.approve(
                run_id, call_id, approved=bool(approval["approved"]), reason=approval.get("reason")
            )
        else:
            is_error = part["state"] == "output-error"
            output = part.get("errorText", "error") if is_error else part.get("output")
            await client.runs.submit_tool_result(run_id, call_id, output, is_error=is_error)


class _Turns:
    """Starting a chat's runs: one per turn, on the chat's thread. A message sent with
    the answers a run waits for is held (in Redis, beside the chat's key) until that run
    ends. Nothing a client sends is lost to a refused turn (a 409, a tenant's cap): a
    turn refused at once records nothing (the client sends it again), and a held message
    whose run is refused stays held, for the chat's next turn."""

    def __init__(
        self, request: Request, name: str, template: dict[str, Any], tenant: str, chat_id: str
    ) -> None:
        self.client = client_of(request)
        self.config = config_of(request)
        self.name, self.template, self.tenant = name, template, tenant
        self.thread = chat_thread(name, chat_id)
        key = chat_key(tenant, name, chat_id)
        self.held_key = f"{key}:held"
        self.said_key = f"{key}:said"  # the id of the user message the last turn answers

    async def hold(self, turn: list[UIMessage], said: list[Message]) -> None:
        """Hold the user's messages (with their ids: a client that sends them again is
        not heard twice), after any held before."""
        held = [
            {"id": ui.id, "message": m.model_dump(mode="json", exclude_none=True)}
            for ui, m in zip(turn, said, strict=True)
        ]
        data = json.dumps([*await self._held_raw(), *held])
        await self.client.redis.set(self.held_key, data, ex=self.client.settings.retention_s)

    async def _held_raw(self) -> list[dict[str, Any]]:
        raw = await self.client.redis.get(self.held_key)
        held: list[dict[str, Any]] = json.loads(raw) if raw else []
        return held

    async def held(self, turn: list[UIMessage]) -> list[Message]:
        """The held messages, but those the client sends again with `turn` (a client that
        sends the whole conversation resends what it has no answer to)."""
        sent = {m.id for m in turn if m.id}
        return [
            MESSAGE_ADAPTER.validate_python(h["message"])
            for h in await self._held_raw()
            if not h["id"] or h["id"] not in sent
        ]

    async def is_new(self, turn: list[UIMessage]) -> bool:
        """Whether the user's message is not the one a turn already started from (a POST
        sent again is not a new message)."""
        said = await self.client.redis.get(self.said_key)
        return not turn or not turn[-1].id or said is None or said.decode() != turn[-1].id

    async def said(self, turn: list[UIMessage]) -> None:
        if turn and turn[-1].id:
            await self.client.redis.set(
                self.said_key, turn[-1].id, ex=self.client.settings.retention_s
            )

    async def start(
        self,
        chat_id: str,
        turn: list[UIMessage],
        said: list[Message],
        *,
        interrupt: bool = False,
    ) -> str:
        """A new run on the chat's thread: its history, what was held, then what the user
        says (`said`, from `turn`); with `interrupt`, the thread's run still working is
        cancelled at its step's end. What was held is let go, and the turn recorded as
        answered, only once the run is created: a refusal leaves both as they were."""
        messages = [*await self.held(turn), *said]
        try:
            spec = RunSpec.model_validate(
                {
                    **self.template,
                    "messages": [m.model_dump(exclude_none=True) for m in messages],
                    "metadata": {
                        **self.template.get("metadata", {}),
                        "chat_id": chat_id,
                        "agent": self.name,
                    },
                    "thread_id": self.thread,
                    "double_texting": "interrupt" if interrupt else "reject",
                }
            )
        except ValidationError as exc:
            raise validation_error(exc) from None
        limits = self.config.limits
        check_spec_size(spec.model_dump_json(exclude_none=True).encode(), limits.max_spec_bytes)
        await check_submit_rate(self.client.runs, self.tenant)
        run_id = await self.client.runs.submit(spec, tenant=self.tenant)
        await self.client.redis.delete(self.held_key)
        await self.said(turn)
        return run_id

    async def next_after(self, chat_id: str) -> str | None:
        """The held turn's run, once the thread's run has ended; None when nothing is
        held, or when its run is refused (it stays held: the chat's next turn says it)."""
        if not await self.client.redis.exists(self.held_key):
            return None
        try:
            return await self.start(chat_id, [], [])
        except (ApiError, AgentqError) as exc:
            log.warning("chat %s: the held message's run was refused: %s", chat_id, exc)
            return None


@router.post(
    "/{name}/chat",
    responses={
        200: {"description": "The AI SDK UI message stream", "content": {"text/event-stream": {}}}
    },
)
async def chat(request: Request, name: str, body: ChatRequest) -> Response:
    """Send a chat turn (the body `DefaultChatTransport` posts); get the UI message stream."""
    principal, chat_id = chat_of(request, body.id, "runs:write")
    # The stream's slot first: past the tenant's share, nothing is started.
    with streams_of(request).slot(principal.tenant) as slot:
        return await _turn(request, name, body, principal, chat_id, slot)


async def _turn(
    request: Request, name: str, body: ChatRequest, principal: Principal, chat_id: str, slot: Slot
) -> Response:
    turns = _Turns(request, name, _template(request, name), principal.tenant, chat_id)
    client = turns.client
    current = await _current_run(client, turns.thread, principal.tenant)
    history = await client.runs.conversation(current.id) if current else []
    made = known_calls(history)
    if current is not None:
        made |= {call.id for step in current.steps for call in step.tool_calls}
    try:
        check_request(body.messages, made)
        turn = new_turn(body.messages)
        # With no record of the chat yet, every user message the client sent.
        said = user_messages(turn if current else [m for m in body.messages if m.role == "user"])
    except ChatInputError as exc:
        raise ApiError(422, "invalid_request", str(exc), field=exc.field) from None
    if current is None or current.status in TERMINAL_STATUSES:
        if not turn:
            raise ApiError(
                422, "invalid_request", "a new turn ends with the user's message", field="messages"
            )
        run_id = await turns.start(body.id, turn, said)
        return _ui_stream(slot, client, feeds_of(request), run_id, 0)
    reply = next((m for m in reversed(body.messages) if m.role == "assistant"), None)
    answers = _answers(current, reply)
    unanswered = {str(p.get("tool_call_id")) for p in current.pending} - set(answers)
    if not answers and not (said and await turns.is_new(turn)):
        raise conflict(
            f"chat {body.id!r} has a run in progress ({current.id}); "
            "answer what it waits for or resume its stream"
        )
    if said and unanswered:
        raise conflict(
            f"chat {body.id!r} waits for answers to {sorted(unanswered)}: "
            "send them with the message"
        )
    after = (await client.runs.status(current.id)).seq
    if answers:
        await _resolve(client, current.id, answers)
        if said:
            await turns.hold(turn, said)
            await turns.said(turn)
        if not said:  # the client's assistant message goes on
            return _ui_stream(slot, client, feeds_of(request), current.id, after)
        return _ui_stream(
            slot,
            client,
            feeds_of(request),
            current.id,
            after,
            follow_up=lambda _ended: turns.next_after(body.id),
            recall=current.steps[-1],  # a new message: the answered step's calls again
        )
    # A message while the run works and waits on no one: the user moved on (`stop()`).
    run_id = await turns.start(body.id, turn, said, interrupt=True)
    return _ui_stream(slot, client, feeds_of(request), run_id, 0)


@router.post("/{name}/chat/{chat_id}/stop", status_code=204)
async def stop(request: Request, name: str, chat_id: str) -> Response:
    """Stop the chat's run (what an app calls with the AI SDK's `stop()`)."""
    principal, scoped_id = chat_of(request, chat_id, "runs:write")
    _template(request, name)
    client = client_of(request)
    current = await _current_run(client, chat_thread(name, scoped_id), principal.tenant)
    if current is not None and current.status not in TERMINAL_STATUSES:
        await client.runs.cancel(current.id, "stopped by the user")
    return Response(status_code=204)


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
    with streams_of(request).slot(principal.tenant) as slot:
        current = await _current_run(client, chat_thread(name, chat_id), principal.tenant)
        if current is None or current.status in TERMINAL_STATUSES:
            return Response(status_code=204)
        return _ui_stream(slot, client, feeds_of(request), current.id, 0)


async def _parked(client: Client, run_id: str, seen: int) -> bool:
    """True when the run waits on the user and every event so far has been streamed."""
    try:
        head = await client.runs.status(run_id)
    except RunNotFoundError:
        return False
    if head.status != "awaiting" or head.seq != seen:
        return False
    result = await client.runs.result(run_id)
    if not result.steps:
        return False
    step = result.steps[-1]
    settled = {r.tool_call_id for r in step.tool_results}
    settled |= {str(p.get("tool_call_id")) for p in result.pending}
    return all(call.id in settled for call in step.tool_calls)


FollowUp = Callable[[str], Awaitable[str | None]]


def _ui_stream(
    slot: Slot,
    client: Client,
    feeds: RunFeeds,
    run_id: str,
    after: int,
    follow_up: FollowUp | None = None,
    recall: StepResult | None = None,
) -> EventSourceResponse:
    """The run's UI message stream, holding the tenant's stream `slot`; when it ends,
    `follow_up` may name the next run (a held turn), streamed on in the same response as
    the same assistant message."""

    async def chunks() -> AsyncIterator[dict[str, str]]:
        adapter = UIChunks(run_id)
        yield _data(adapter.start())
        for chunk in adapter.recall(recall) if recall is not None else []:
            yield _data(chunk)
        leg: str | None = run_id
        seen = after
        while leg is not None:
            following, leg = leg, None
            async for frame in follow(feeds, following, seen, idle_s=0.5):
                if frame is not None:
                    event = frame.event
                    seen = event.seq
                    if isinstance(event, ev.Finish) and follow_up is not None:
                        leg = await follow_up(following)
                        if leg is not None:  # not the message's end: the next run goes on
                            for chunk in adapter.close(event):
                                yield _data(chunk)
                            adapter, seen = UIChunks(run_id), 0
                            break
                    for chunk in adapter.feed(event):
                        yield _data(chunk)
                    if isinstance(event, ev.TERMINAL):
                        break
                    if isinstance(event, STREAMED):
                        continue
                if await _parked(client, following, seen):
                    for chunk in adapter.park():
                        yield _data(chunk)
                    break
        yield {"data": "[DONE]"}

    return EventSourceResponse(slot.stream(chunks()), ping=15, headers=UI_STREAM_HEADERS)


def _data(chunk: dict[str, Any]) -> dict[str, str]:
    return {"data": json.dumps(chunk, separators=(",", ":"), default=str)}
