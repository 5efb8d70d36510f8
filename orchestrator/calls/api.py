"""Calling the fleet's tools without a run: `client.calls` and what the front doors
(`agentq call`, `POST /v1/tools/{name}/calls`, the MCP gateway) build on.

A call is a job like a run's tool call: resolved and validated here, executed by the
worker that serves the tool, its result written once (`orchestrator/calls/state.py`).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, NamedTuple

from pydantic import BaseModel
from redis.asyncio import Redis

from agentq.orchestrator import tracing
from agentq.orchestrator.calls.catalogue import (
    CallableTool,
    ToolCallResult,
    call_id_for,
    call_result,
    cancel_call_args,
    catalogue,
    create_call_args,
    listed,
    resolve_call,
    validate_call_input,
)
from agentq.orchestrator.calls.state import CallField
from agentq.orchestrator.calls.store import CALL_END_EVENTS, CallNotFoundError, CallStore
from agentq.orchestrator.core import events as ev
from agentq.orchestrator.core import keys
from agentq.orchestrator.core.errors import RunConflictError
from agentq.orchestrator.core.events import Event
from agentq.orchestrator.core.run_ids import DEFAULT_TENANT
from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.redis.faults import maps_redis_errors
from agentq.orchestrator.runs.state import Outcome
from agentq.orchestrator.runs.store import RunStore
from agentq.orchestrator.tools import ToolDef

# How long past its deadline a caller waits for a call's result (time in the queue).
QUEUE_GRACE_S = 30.0

ProgressCallback = Callable[[Any], Awaitable[None] | None]
# Asked when the call's tool asks for input (an MCP server's elicitation): the message
# and the requested schema in, the content to answer with (None: decline) out.
InputCallback = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any] | None]]
# Given each log message of the call's tool (an MCP server's): level, data, logger.
LogCallback = Callable[[str, Any, str | None], Awaitable[None]]
# Asked when the call's tool asks for a model's answer (an MCP server's sampling): the
# `sampling/createMessage` params in, the `CreateMessageResult` (None: decline) out.
SampleCallback = Callable[[dict[str, Any]], Awaitable[dict[str, Any] | None]]

__all__ = ["CallInfo", "CallNotFoundError", "ProgressCallback", "ToolCallResult", "ToolCalls"]


class CallInfo(BaseModel):
    """Where a call stands: whose it is, its tool, and its status (queued, running, done)."""

    id: str
    tenant: str
    tool_name: str
    status: str


class StartedCall(NamedTuple):
    """A call just enqueued (or found by its idempotency key)."""

    call_id: str
    created: bool  # False: the idempotency key named an earlier call of the same tool and input
    tool: ToolDef


class ToolCalls:
    """Start, follow and cancel tool calls without a run (`client.calls`; `call_tool` in
    steps)."""

    def __init__(self, runs: RunStore, redis: Redis, settings: Settings) -> None:
        self.run_store = runs  # for the registry the calls resolve tools against
        self.settings = settings
        self.store = CallStore(redis, retention_s=settings.retention_s)

    async def catalogue(self) -> dict[str, CallableTool]:
        return catalogue(await self.run_store.registry(), time.time())

    async def tools(self) -> list[ToolDef]:
        """Each callable tool once, resolved (its description and input schema)."""
        registry = await self.run_store.registry()
        now = time.time()
        found = catalogue(registry, now)
        return [
            resolve_call(t.name, found, registry, now, timeout_s=None, settings=self.settings)
            for t in listed(found)
        ]

    async def resolve(self, name: str, timeout_s: float | None = None) -> ToolDef:
        registry = await self.run_store.registry()
        now = time.time()
        return resolve_call(
            name,
            catalogue(registry, now),
            registry,
            now,
            timeout_s=timeout_s,
            settings=self.settings,
        )

    async def start(
        self,
        name: str,
        input: Any,
        *,
        timeout_s: float | None = None,
        idempotency_key: str | None = None,
        tenant: str | None = None,
        traceparent: str | None = None,
    ) -> StartedCall:
        """Resolve, validate and enqueue the call: its id, whether it is new (False: the
        idempotency key named an earlier call of the same tool and input) and the tool it
        resolved to.

        UnknownToolError when nothing serves `name`; CallInputError when the input
        breaks its schema; RunConflictError when the key was used for another call."""
        tool = await self.resolve(name, timeout_s)
        validate_call_input(tool, input)
        owner = tenant or DEFAULT_TENANT
        call_id = call_id_for(owner, idempotency_key)
        carrier = {"traceparent": traceparent} if traceparent else tracing.current_carrier()
        if not carrier:
            carrier = tracing.run_carrier(call_id)  # a trace of its own, derived from its id
        reply = await self.store.create(
            create_call_args(call_id, tool, input, tenant=owner, trace=carrier)
        )
        if reply.outcome == Outcome.CONFLICT:
            raise RunConflictError(
                f"idempotency key {idempotency_key!r} was used for a call of another tool or input"
            )
        return StartedCall(call_id, reply.outcome == Outcome.CREATED, tool)

    async def result(self, call_id: str) -> ToolCallResult | None:
        """The call's result, or None while it runs; CallNotFoundError if unknown."""
        return call_result(call_id, await self.store.read(call_id))

    async def info(self, call_id: str) -> CallInfo:
        """Where the call stands; CallNotFoundError if unknown."""
        fields = await self.store.read(call_id)
        return CallInfo(
            id=call_id,
            tenant=fields.get(CallField.TENANT, DEFAULT_TENANT),
            tool_name=json.loads(fields[CallField.CALL])["name"],
            status=fields[CallField.STATUS],
        )

    def events(self, call_id: str, after: int = 0, follow: bool = True) -> AsyncIterator[Event]:
        return self.store.events(call_id, after, follow=follow)

    async def event_pages(
        self, positions: Mapping[str, int], *, block_ms: int = 5000
    ) -> dict[str, list[Event]]:
        """The next events of many calls (call id -> seq read so far) in one blocking
        read, as `Runs.event_pages`. The calls must be of one `read_group`."""
        by_stream = {keys.call_events(call_id): call_id for call_id in positions}
        pages = await self.store.event_pages(
            {keys.call_events(call_id): seq for call_id, seq in positions.items()},
            block_ms=block_ms,
        )
        return {by_stream[stream]: page for stream, page in pages.items()}

    @staticmethod
    def read_group(call_id: str) -> int:
        """Calls of one group can be followed by one `event_pages` read."""
        return keys.partition_of(call_id)

    @staticmethod
    def ends_stream(event: Event) -> bool:
        """Whether `event` is the call's last (its result or its error)."""
        return event.type in CALL_END_EVENTS

    async def wait(
        self,
        call_id: str,
        *,
        timeout_s: float | None = None,
        on_progress: ProgressCallback | None = None,
        on_input: InputCallback | None = None,
        on_log: LogCallback | None = None,
        on_sample: SampleCallback | None = None,
        events: AsyncIterator[Event] | None = None,
    ) -> ToolCallResult | None:
        """The call's result once it has one; None if `timeout_s` passes first. The
        tool's input requests go to `on_input`; without one they are declined. `events`:
        the call's events as the caller follows them (a server that reads many calls
        at once), else read from Redis here."""
        try:
            return await asyncio.wait_for(
                self._wait(
                    call_id,
                    on_progress,
                    on_input,
                    on_log,
                    on_sample,
                    events or self.store.events(call_id, 0, follow=True),
                ),
                timeout_s,
            )
        except TimeoutError:
            return None

    async def _wait(
        self,
        call_id: str,
        on_progress: ProgressCallback | None,
        on_input: InputCallback | None,
        on_log: LogCallback | None,
        on_sample: SampleCallback | None,
        events: AsyncIterator[Event],
    ) -> ToolCallResult:
        async for event in events:
            match event:
                case ev.ToolProgress(output=output) if on_progress is not None:
                    shown = on_progress(output)
                    if isinstance(shown, Awaitable):
                        await shown
                case ev.ToolLog(level=level, data=data, logger=logger) if on_log is not None:
                    await on_log(level, data, logger)
                case ev.ToolInputRequest(kind=kind, message=message, input=asked):
                    content = None
                    if kind == "sampling":
                        if on_sample is not None:
                            content = await on_sample(asked or {})
                    elif on_input is not None:
                        content = await on_input(message, asked or {})
                    await self.answer(call_id, event.request_id, content)
        result = await self.result(call_id)
        assert result is not None, "a call's stream ends with its result"
        return result

    async def answer(self, call_id: str, request_id: str, content: dict[str, Any] | None) -> None:
        """Answer the call's input request `request_id`: `content`, or None to decline."""
        action = "decline" if content is None else "accept"
        answer = json.dumps({"action": action, "content": content})
        await self.store.post_answer(call_id, request_id, answer)

    async def cancel(self, call_id: str, reason: str = "the call was cancelled") -> ToolCallResult:
        """Cancel the call unless it has its result; either way, its result after."""
        fields = await self.store.read(call_id)
        name = json.loads(fields[CallField.CALL])["name"]
        await self.store.cancel(cancel_call_args(call_id, name, reason))
        result = await self.result(call_id)
        assert result is not None
        return result

    @maps_redis_errors
    async def call(
        self,
        name: str,
        input: Any,
        *,
        timeout_s: float | None = None,
        idempotency_key: str | None = None,
        on_progress: ProgressCallback | None = None,
        tenant: str | None = None,
        traceparent: str | None = None,
        wait_s: float | None = None,
    ) -> ToolCallResult:
        """Call one of the fleet's tools as a job of its own, without a run, and wait for
        its result (a failing tool is a result with `is_error`, not an exception).

        Resolved, validated, queued, executed and traced like a run's call of the same
        tool. UnknownToolError when nothing serves `name`, CallInputError when `input`
        breaks its schema. With `idempotency_key`, a retried call returns the first
        call's result and never executes twice. `on_progress` gets each progress value.
        A call no worker finished within `wait_s` (by default its deadline plus
        QUEUE_GRACE_S in the queue) is cancelled: its result says so (`cancelled`)."""
        call_id, _, tool = await self.start(
            name,
            input,
            timeout_s=timeout_s,
            idempotency_key=idempotency_key,
            tenant=tenant,
            traceparent=traceparent,
        )
        budget_s = tool.timeout_s + QUEUE_GRACE_S if wait_s is None else wait_s
        result = await self.wait(call_id, timeout_s=budget_s, on_progress=on_progress)
        if result is None:
            result = await self.cancel(
                call_id, f"no worker finished the call to {name!r} within {budget_s:g} s"
            )
        return result
