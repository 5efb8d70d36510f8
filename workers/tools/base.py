"""The tool-executor protocol: how a worker runs one kind of tool.

Every kind that executes somewhere (function, mcp, code, and any registered
one) is a small class with this shape; the tool-call job picks the executor by
`ToolDef.kind`. An executor returns the
tool's output (anything JSON-serializable) or raises: a `ToolError` becomes a
tool-error result the model sees with its message; any other exception does
too, named by its type. Cancellation arrives as `asyncio.CancelledError`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from agentq.orchestrator.tools import ToolAnnouncement, ToolDef
from agentq.workers.models.model_client import ModelClient
from agentq.workers.tools.context import ToolContext


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
    # Whether it keeps something for a run between calls (a sandbox session): its
    # process then hears every run's end, not only those of runs whose jobs it holds,
    # and drops it (`release_run`).
    keeps_runs: bool

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
