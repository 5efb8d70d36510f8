"""`mcp`: the tools of an MCP server the deployment declared (`--mcp-config`)."""

from __future__ import annotations

from typing import Any, Literal

from agentq.orchestrator.core.errors import UnknownToolError
from agentq.orchestrator.tools.base import (
    KindConfig,
    ResolveContext,
    ToolAnnouncement,
    ToolDef,
    ToolKindPlugin,
    ToolSpecBase,
)


class McpToolSpec(ToolSpecBase):
    """Enables the tools of an MCP server the deployment declared."""

    type: Literal["mcp"] = "mcp"
    server: str


class McpToolConfig(KindConfig):
    server: str
    tool: str  # the tool's name on the server


def mcp_registry_key(server: str, tool: str) -> str:
    return f"mcp:{server}:{tool}"


# The kind of a registry entry saying an MCP server is connected and served, whatever
# tools it offers (perhaps none yet: a run may still enable it).
MCP_SERVER_KIND = "mcp-server"


def mcp_server_key(server: str) -> str:
    return f"{MCP_SERVER_KIND}:{server}"


def mcp_server_announcement(server: str, queue: str) -> ToolAnnouncement:
    return ToolAnnouncement(
        name=server, kind=MCP_SERVER_KIND, queue=queue, server=server, description="MCP server"
    )


class McpKind(ToolKindPlugin):
    kind = "mcp"
    spec_model = McpToolSpec
    config_model = McpToolConfig

    def offer(self, entry: Any, ctx: ResolveContext) -> list[ToolDef]:
        offered = sorted(
            (a for a in ctx.registry.values() if a.kind == "mcp" and a.server == entry.server),
            key=lambda a: a.name,
        )
        if not offered and mcp_server_key(entry.server) not in ctx.registry:
            raise UnknownToolError(
                f"{ctx.where}: no worker serves the MCP server {entry.server!r} "
                "(declare it in the worker's --mcp-config)"
            )
        return [
            self.described_tool(
                a,
                ctx,
                a.name,
                queue=a.queue,
                config=McpToolConfig(server=entry.server, tool=a.name),
            )
            for a in offered
        ]

    def exposed_name(self, entry: Any, tool: ToolDef, ctx: ResolveContext) -> str:
        """The tool's own name, unless another MCP server this run enables offers one of
        the same name: then `{server}_` tells them apart. Only this run's servers count,
        so a run's tool names do not change when the deployment adds a server."""
        servers = {t.server for t in ctx.spec.tools if isinstance(t, McpToolSpec)}
        clash = any(
            a.kind == "mcp"
            and a.server != entry.server
            and a.server in servers
            and a.name == tool.name
            for a in ctx.registry.values()
        )
        return f"{entry.server}_{tool.name}" if clash else tool.name

    def describe(self, entry: Any) -> str:
        return f"the MCP server {entry.server!r}"

    def call_entries(self, ann: ToolAnnouncement) -> list[tuple[str, dict[str, Any]]]:
        """`server:tool` always; the bare name too (the catalogue drops it when two
        servers announce it)."""
        entry = {"type": "mcp", "server": ann.server, "tools": [ann.name]}
        return [(f"{ann.server}:{ann.name}", entry), (ann.name, entry)]

    def registry_key(self, ann: ToolAnnouncement) -> str:
        return mcp_registry_key(ann.server or "", ann.name)

    def needs(self, tool: ToolDef) -> str:
        # The server, not the tool: a worker connected to it runs whatever it offers.
        assert isinstance(tool.config, McpToolConfig)
        return mcp_server_key(tool.config.server)
