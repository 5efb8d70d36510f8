"""The tool-executor protocol: how a worker runs one kind of tool.

Every kind that executes somewhere (function, mcp, code, and any registered
one) is a small class with this shape; the tool-call job picks the executor by
`ToolDef.kind`. An executor returns the
tool's output (anything JSON-serializable) or raises: a `ToolError` becomes a
tool-error result the model sees with its message; any other exception does
too, named by its type. Cancellation arrives as `asyncio.CancelledError`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from agentq.orchestrator.core.errors import ToolError
from agentq.orchestrator.tools import ToolAnnouncement, ToolDef
from agentq.workers.models.model_client import ModelClient

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


class ToolNotServed(ToolError):
    """This worker cannot run the tool (another worker of the fleet may): the job is
    released for another worker rather than failed."""


@dataclass(frozen=True)
class ToolContext:
    """What a running call knows about itself."""

    run_id: str
    step: int
    call_id: str
    tool: ToolDef
    attempt: int
    deadline_at: float  # unix seconds; the executor must be done by then
    progress: ProgressFn = _no_progress  # emits a `tool-progress` event
    elicit: ElicitFn | None = None
    log: LogFn | None = None
    sample: SampleFn | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class WorkerServices:
    """What a worker lends its executors when it starts them."""

    # The worker's model client (its fleet-wide rate limit): MCP sampling calls models.
    models: ModelClient


class ToolExecutor(Protocol):
    kind: str
    # The queue its tools are served on; None: the worker's tool queue. An executor
    # with a pool of its own (the sandbox) names its queue.
    queue: str | None

    async def start(self, services: WorkerServices | None = None) -> None:
        """Connect, warm up: called once, by the worker that runs it, before it
        announces or executes anything."""
        ...

    async def announcements(self, queue: str) -> list[ToolAnnouncement]:
        """The tools this executor serves, for the registry."""
        ...

    async def execute(self, tool: ToolDef, input: Any, ctx: ToolContext) -> Any: ...

    async def release_run(self, run_id: str) -> None:
        """The run ended: drop anything kept for it (sessions, containers)."""
        ...

    async def aclose(self) -> None: ...
