"""An MCP server that offers no tools (stdio): connected, served, and a run may enable it."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("agentq-empty", version="1.0.0")

if __name__ == "__main__":
    server.run("stdio")
