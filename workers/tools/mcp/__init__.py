"""MCP tools: servers declared by the deployment, served by pooled sessions.

The worker builds one `McpExecutor` from `load_mcp_config(path)` and keeps it
for its lifetime; see executor.py for the calls.
"""

from agentq.workers.tools.mcp.config import (
    McpConfig,
    McpConfigError,
    McpServerConfig,
    load_mcp_config,
)
from agentq.workers.tools.mcp.executor import McpExecutor

__all__ = ["McpConfig", "McpConfigError", "McpExecutor", "McpServerConfig", "load_mcp_config"]
