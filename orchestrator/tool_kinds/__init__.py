"""Tool kinds: the contract (`base`) and the built-in kinds, one module each."""

from __future__ import annotations

from agentq.orchestrator.tool_kinds.base import (
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
)
from agentq.orchestrator.tool_kinds.client import ClientKind
from agentq.orchestrator.tool_kinds.code import CodeKind
from agentq.orchestrator.tool_kinds.function import FunctionKind
from agentq.orchestrator.tool_kinds.http import HttpKind
from agentq.orchestrator.tool_kinds.mcp import McpKind
from agentq.orchestrator.tool_kinds.provider import ProviderKind
from agentq.orchestrator.tool_kinds.remote import RemoteKind

for _plugin in (
    FunctionKind(),
    ClientKind(),
    McpKind(),
    CodeKind(),
    ProviderKind(),
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
]
