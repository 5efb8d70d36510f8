"""`McpExecutor`: the tool executor for `kind="mcp"`, over the pooled sessions.

async with McpExecutor(load_mcp_config(path), env=worker_env) as mcp:
    announcements = await mcp.announcements("tools")
    output = await mcp.execute(tool_def, {"timezone": "UTC"}, ctx)
"""

from __future__ import annotations

import asyncio
import logging
import os
import shlex
import time
from collections.abc import Mapping
from importlib import metadata
from typing import Any

import httpx
import mcp_types as types

from agentq.orchestrator.core.errors import (
    InfrastructureError,
    ToolError,
    ToolInputError,
    ToolTimeoutError,
)
from agentq.orchestrator.core.resource import AsyncResource
from agentq.orchestrator.tools import ToolAnnouncement, ToolDef
from agentq.orchestrator.tools.mcp import McpToolConfig, mcp_server_announcement
from agentq.workers.models.model_client import ModelClient
from agentq.workers.tools.base import WorkerServices
from agentq.workers.tools.context import ToolContext
from agentq.workers.tools.mcp.config import McpConfig, SamplingRoute
from agentq.workers.tools.mcp.content import normalize_result
from agentq.workers.tools.mcp.pool import ServerConnection, ToolsChanged
from agentq.workers.tools.mcp.sampling import Sampler

log = logging.getLogger(__name__)

# Each provider request sets its own deadline; this bounds what it leaves open.
SAMPLING_HTTP_TIMEOUT = httpx.Timeout(120.0, connect=10.0)


def client_info() -> types.Implementation:
    """How agentq names itself to servers in the handshake."""
    try:
        version = metadata.version("agentq")
    except metadata.PackageNotFoundError:
        version = "0.0.0"
    return types.Implementation(name="agentq", version=version)


class McpExecutor(AsyncResource):
    """Serves the tools of every server in an MCP config."""

    kind = "mcp"
    queue: str | None = None
    keeps_runs = False  # its sessions belong to the worker, not to runs

    def __init__(
        self,
        config: McpConfig,
        *,
        on_tools_changed: ToolsChanged | None = None,
        http: httpx.AsyncClient | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        """`on_tools_changed(server)` runs after a server said its tools changed and
        the new list is cached: the worker re-announces then.

        `http` and `env` serve sampling requests routed to a model: the client the
        provider calls go through (one is made, and closed, when none is given and
        a server routes sampling) and the environment API keys are read from
        (default `os.environ`)."""
        info = client_info()
        self._own_http: httpx.AsyncClient | None = None
        sampler: Sampler | None = None
        if any(isinstance(s.sampling, SamplingRoute) for s in config.enabled.values()):
            if http is None:
                http = self._own_http = httpx.AsyncClient(timeout=SAMPLING_HTTP_TIMEOUT)
            # Standalone, sampling has no shared rate limit; a worker lends its own
            # model client (and so the fleet-wide limit) when it starts the executor.
            sampler = Sampler(ModelClient(http, os.environ if env is None else env))
        self._sampler = sampler
        self.servers = {
            name: ServerConnection(
                name,
                server,
                client_info=info,
                on_tools_changed=on_tools_changed,
                sampler=sampler,
            )
            for name, server in config.enabled.items()
        }
        # Why each server that could not be listed last time failed (a connected
        # server is not in it): `agentq run` reports this instead of "no worker serves".
        self.failures: dict[str, str] = {}

    async def start(self, services: WorkerServices | None = None) -> None:
        """Connect to every server and list its tools. A server that fails is logged
        and retried by the next `announcements` or call; it never stops the worker."""
        if services is not None and self._sampler is not None:
            self._sampler.models = services.models
        await self.announcements("")

    async def announcements(self, queue: str) -> list[ToolAnnouncement]:
        """Each connected server (a run may enable one that offers no tools) and its
        tools; a server that cannot be listed is left out until it can."""
        listed = await asyncio.gather(
            *(self._listed(connection) for connection in self.servers.values())
        )
        now = time.time()
        announced: list[ToolAnnouncement] = []
        for name, tools in zip(self.servers, listed, strict=True):
            if tools is None:
                continue
            announced.append(mcp_server_announcement(name, queue))
            announced.extend(
                ToolAnnouncement(
                    name=tool.name,
                    kind="mcp",
                    queue=queue,
                    description=tool.description or tool.title or "",
                    input_schema=dict(tool.input_schema),
                    server=name,
                    seen_at=now,
                )
                for tool in tools
            )
        return announced

    async def _listed(self, connection: ServerConnection) -> list[types.Tool] | None:
        try:
            tools = await connection.tools()
        except Exception as exc:
            reason = exc.message if isinstance(exc, InfrastructureError) else str(exc)
            reason = f"{reason or type(exc).__name__} ({_where(connection)})"
            # Logged once per distinct failure, not on every announcement round.
            if self.failures.get(connection.name) != reason:
                log.warning("MCP server %r: not announced: %s", connection.name, reason)
            self.failures[connection.name] = reason
            return None
        self.failures.pop(connection.name, None)
        return tools

    async def execute(self, tool: ToolDef, input: Any, ctx: ToolContext) -> Any:
        if not isinstance(tool.config, McpToolConfig):
            raise ToolError(f"the MCP tool {tool.name!r} names no server")
        server, remote = tool.config.server, tool.config.tool
        connection = self.servers.get(server)
        if connection is None:
            raise ToolError(f"this worker has no MCP server named {server!r}")
        if input is None:
            input = {}
        if not isinstance(input, dict):
            raise ToolInputError(
                f"the MCP tool {tool.name!r} takes a JSON object, not {type(input).__name__}"
            )
        timeout_s = self._budget_s(tool, ctx, connection.config.timeout_s)
        if timeout_s <= 0:
            raise ToolTimeoutError(f"the MCP tool {tool.name!r} reached its deadline before it ran")
        try:
            result = await connection.call(remote, input, ctx, timeout_s)
        except InfrastructureError as exc:
            # The model sees it as a failed tool call; retrying may succeed
            # once the server is reachable again.
            raise ToolError(exc.message, retryable=True) from exc
        return normalize_result(result, tool=remote)

    @staticmethod
    def _budget_s(tool: ToolDef, ctx: ToolContext, server_cap_s: float | None) -> float:
        budget = min(ctx.deadline_at - time.time(), tool.timeout_s)
        return budget if server_cap_s is None else min(budget, server_cap_s)

    async def release_run(self, run_id: str) -> None:
        # Sessions belong to the worker, not to runs: nothing to drop.
        return None

    async def aclose(self) -> None:
        await asyncio.gather(*(c.aclose() for c in self.servers.values()))
        if self._own_http is not None:
            await self._own_http.aclose()


def _where(connection: ServerConnection) -> str:
    """What the deployment declared for the server: its command line, or its URL."""
    config = connection.config
    if config.command:
        return "command: " + shlex.join([config.command, *config.args])
    return f"url: {config.url}"
