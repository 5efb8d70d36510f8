"""Building a worker's optional executors (MCP servers, the code sandbox) from its flags."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from agentq.orchestrator.errors import SpecError
from agentq.workers.executors.base import ToolExecutor

ToolsChanged = Callable[[str], Awaitable[None]]


async def optional_executors(
    *,
    mcp_config: str | None,
    sandbox: bool,
    on_tools_changed: ToolsChanged | None = None,
    env: Mapping[str, str] | None = None,
    redis_url: str | None = None,
) -> list[ToolExecutor]:
    """Started executors for `--mcp-config` and `--sandbox`; a clear error if one is unusable."""
    executors: list[ToolExecutor] = []
    if mcp_config:
        from agentq.workers.mcp import McpExecutor, load_mcp_config

        # `env`: where sampling routed to a model reads its API key, as model steps do.
        mcp = McpExecutor(load_mcp_config(mcp_config), on_tools_changed=on_tools_changed, env=env)
        await mcp.start()
        executors.append(mcp)
    if sandbox:
        try:
            from agentq.workers.executors.code import CodeExecutor

            # Redis: container ownership and run sessions shared with the other workers.
            code = CodeExecutor(redis_url=redis_url)
            await code.start()
        except Exception as exc:
            raise SpecError(f"--sandbox: the sandbox cannot start here ({exc})") from None
        executors.append(code)
    return executors
