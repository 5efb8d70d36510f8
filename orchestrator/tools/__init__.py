"""Tool kinds: the contract (`base`) and the built-in kinds, one module each."""

from __future__ import annotations

from agentq.orchestrator.tools.agent import AgentKind
from agentq.orchestrator.tools.base import (
    KindConfig,
    ResolveContext,
    ToolAnnouncement,
    ToolDef,
    ToolKindPlugin,
    ToolSpecBase,
    parse_tool_entry,
    register_tool_kind,
    registry_key,
    tool_kind,
    tool_kinds,
    tool_needs,
)
from agentq.orchestrator.tools.client import ClientKind
from agentq.orchestrator.tools.code import CodeKind
from agentq.orchestrator.tools.function import FunctionKind
from agentq.orchestrator.tools.http import HttpKind
from agentq.orchestrator.tools.mcp import McpKind
from agentq.orchestrator.tools.provider import ProviderKind
from agentq.orchestrator.tools.remote import RemoteKind
from agentq.orchestrator.tools.workflow import WorkflowKind

for _plugin in (
    FunctionKind(),
    ClientKind(),
    McpKind(),
    CodeKind(),
    ProviderKind(),
    AgentKind(),
    WorkflowKind(),
    RemoteKind(),
    HttpKind(),
):
    register_tool_kind(_plugin)

__all__ = [
    "KindConfig",
    "ResolveContext",
    "ToolAnnouncement",
    "ToolDef",
    "ToolKindPlugin",
    "ToolSpecBase",
    "parse_tool_entry",
    "register_tool_kind",
    "registry_key",
    "tool_kind",
    "tool_kinds",
    "tool_needs",
]
