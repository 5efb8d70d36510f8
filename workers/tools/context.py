"""`ToolContext`: what a running call knows about itself.

Every executor gets one; a `@tool` function gets it too when it declares a parameter
annotated `ToolContext` (left out of the tool's schema: the model never fills it):

    @tool
    def charge(amount: int, ctx: ToolContext) -> str:
        payments.charge(amount, idempotency_key=ctx.idempotency_key)
        return "charged"

What costs a read is read when asked: the run's history (`await ctx.messages()`), and
the tenant and metadata, read only for a function that declares the context. A sync
tool, which runs in a thread, reports progress with `ctx.progress_sync(value)`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from typing import Any

from opentelemetry import trace

from agentq.orchestrator.calls.home import CallHome
from agentq.orchestrator.core.messages import Message
from agentq.orchestrator.core.run_ids import DEFAULT_TENANT, call_idempotency_key
from agentq.orchestrator.tools import ToolDef

ProgressFn = Callable[[Any], Awaitable[None]]
# Asks whoever drives the run for input (MCP elicitation, "forward" mode): parks the
# call with a `tool-input-request` event and returns the posted answer, or None
# when declined or the deadline passes.
ElicitFn = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any] | None]]
# Passes a log message of the tool (an MCP server's `notifications/message`: level, data,
# logger) to whoever drives the call, as a `tool-log` event.
LogFn = Callable[[str, Any, str | None], Awaitable[None]]
# Asks whoever drives the call for a model's answer (MCP sampling, "forward" mode): the
# `sampling/createMessage` params in, the `CreateMessageResult` out (None: declined).
SampleFn = Callable[[dict[str, Any]], Awaitable[dict[str, Any] | None]]


async def _no_progress(_: Any) -> None:
    return None


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


@dataclass(frozen=True)
class ToolContext:
    """What a running call knows about itself."""

    run_id: str  # a call without a run: the call's own id
    step: int
    call_id: str
    tool: ToolDef
    attempt: int  # the delivery: 2 after the first worker died mid-call
    deadline_at: float  # unix seconds; the executor must be done by then
    progress: ProgressFn = _no_progress  # emits a `tool-progress` event
    elicit: ElicitFn | None = None
    log: LogFn | None = None
    sample: SampleFn | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # The call's run's tenant and metadata: filled in by `with_owner`.
    tenant: str = DEFAULT_TENANT
    metadata: Mapping[str, Any] = field(default_factory=dict)
    # Where the call is kept (None: a call made outside any home, a workflow's node).
    home: CallHome | None = field(default=None, repr=False)
    # Set when the call is cancelled or times out: a thread cannot be interrupted, so
    # a sync tool polls `cancelled` (an async one gets CancelledError as well).
    cancellation: threading.Event = field(default_factory=threading.Event, repr=False)
    # The event loop the call's executor runs on (the one `progress` must run on): a sync
    # tool, in a thread of its own, reports through it (`progress_sync`).
    loop: asyncio.AbstractEventLoop | None = field(default_factory=_running_loop, repr=False)

    @property
    def idempotency_key(self) -> str:
        """The same for every delivery of this call, different for any other call."""
        return call_idempotency_key(self.run_id, self.step, self.call_id)

    @property
    def deadline(self) -> datetime:
        """When the call's timeout expires (UTC)."""
        return datetime.fromtimestamp(self.deadline_at, UTC)

    @property
    def cancelled(self) -> bool:
        return self.cancellation.is_set()

    def progress_sync(self, value: Any) -> None:
        """`progress` for a sync tool, which runs in a worker thread: the event is emitted
        on the call's event loop, and this returns once it is (so a tool's progress
        events keep their order). An async tool awaits `progress` instead."""
        if self.loop is None:
            raise RuntimeError("this call has no event loop to report progress on")
        if _running_loop() is self.loop:
            raise RuntimeError("progress_sync is for a sync tool: await ctx.progress(value)")

        async def emit() -> None:
            await self.progress(value)

        asyncio.run_coroutine_threadsafe(emit(), self.loop).result()

    @cached_property
    def logger(self) -> logging.LoggerAdapter[logging.Logger]:
        """`agentq.tool.<name>`, its records carrying the call's ids and its span's."""
        return _CallLogger(logging.getLogger(f"agentq.tool.{self.tool.name}"), self)

    async def messages(self) -> list[Message]:
        """The run's history up to this call's step, read now (not before it is asked)."""
        return await self.home.messages() if self.home is not None else []

    async def with_owner(self) -> ToolContext:
        """This context with its tenant and its run's metadata read."""
        if self.home is None:
            return self
        owner = await self.home.owner()
        return dataclasses.replace(self, tenant=owner.tenant, metadata=owner.metadata)


class _CallLogger(logging.LoggerAdapter[logging.Logger]):
    """Adds the call's ids, and the trace and span ids of the span current when a record
    is made (the call's `execute_tool`, in its thread too), to every record."""

    def __init__(self, logger: logging.Logger, ctx: ToolContext) -> None:
        super().__init__(logger, {"run_id": ctx.run_id, "step": ctx.step, "call_id": ctx.call_id})

    def process(
        self, msg: Any, kwargs: MutableMapping[str, Any]
    ) -> tuple[Any, MutableMapping[str, Any]]:
        fields = {**(self.extra or {}), **kwargs.get("extra", {})}
        span = trace.get_current_span().get_span_context()
        if span.is_valid:
            fields["trace_id"] = trace.format_trace_id(span.trace_id)
            fields["span_id"] = trace.format_span_id(span.span_id)
        kwargs["extra"] = fields
        return msg, kwargs
