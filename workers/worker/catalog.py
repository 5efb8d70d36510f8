"""The deployment's catalogue: what it serves, published whether or not a worker is up.

`agentq catalog publish` builds the same announcements a worker started with the same
options would make (its executors' tools, the MCP servers it reaches and their tools,
the code languages, the providers its modules register) and writes them to Redis with
no expiry, so that submit accepts a run while the pool that serves it is scaled to
zero; the run waits queued until a worker starts.
"""

from __future__ import annotations

from collections.abc import Sequence

from agentq.orchestrator.core.envelopes import MODEL_QUEUE, TOOLS_QUEUE
from agentq.orchestrator.tools import ToolAnnouncement
from agentq.orchestrator.tools.announcements import MODEL_PROVIDER_KIND, endpoint_announcements
from agentq.workers.models import registered_providers
from agentq.workers.steps.hooks import hook_announcements
from agentq.workers.tools.base import ToolExecutor


async def served_announcements(
    executors: Sequence[ToolExecutor], tool_queue: str
) -> list[ToolAnnouncement]:
    """What these executors serve, and the providers this process registered."""
    announced: list[ToolAnnouncement] = []
    for executor in executors:
        # An executor with a pool of its own (the sandbox) names its queue.
        announced.extend(await executor.announcements(executor.queue or tool_queue))
    announced.extend(
        ToolAnnouncement(
            name=info.name,
            kind=MODEL_PROVIDER_KIND,
            queue=MODEL_QUEUE,
            description=f"model provider (wire format {info.wire})",
            model_provider=info,
        )
        for info in registered_providers()
    )
    announced.extend(hook_announcements(tool_queue))
    return announced


async def build_catalog(
    tool_modules: Sequence[str] = (),
    *,
    mcp_config: str | None = None,
    sandbox: bool = False,
    models_path: str | None = None,
    tool_queue: str = TOOLS_QUEUE,
) -> tuple[list[ToolAnnouncement], dict[str, str]]:
    """The catalogue for these worker options, and the MCP servers that could not be
    listed (server -> why). Each declared MCP server is connected to for its tools."""
    from agentq.orchestrator.policy.endpoints import load_models_file
    from agentq.workers.tools.assemble import optional_executors
    from agentq.workers.tools.function import FunctionExecutor
    from agentq.workers.worker.loading import load_tool_modules

    tools = load_tool_modules(tool_modules)
    executors: list[ToolExecutor] = [
        FunctionExecutor(tools),
        *await optional_executors(mcp_config=mcp_config, sandbox=sandbox),
    ]
    try:
        announced = await served_announcements(executors, tool_queue)
    finally:
        for executor in executors:
            await executor.aclose()
    failures: dict[str, str] = {}
    for executor in executors:
        failures.update(getattr(executor, "failures", {}))
    if models_path is not None:
        announced.extend(endpoint_announcements(load_models_file(models_path).endpoints))
    # The deployment's remote tools ($AGENTQ_REMOTE_TOOLS), served by services outside.
    from agentq.orchestrator.core.settings import Settings
    from agentq.orchestrator.tools.remote import load_remote_tools

    declared = load_remote_tools(Settings().remote_tools)
    announced.extend(tool.announcement() for tool in declared.tools)
    return announced, failures
