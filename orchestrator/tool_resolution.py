"""Tool routing: what workers announce, and how a spec's tools resolve against it.

A worker announces every tool it serves (name, kind, schema, queue). At submit,
`resolve_tools` turns the spec's tool list into frozen `ToolDef`s: the schema
the model sees is the schema calls are validated against, whatever workers
announce later. Resolution is pure; the registry snapshot is read by the caller.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agentq.orchestrator.errors import SpecError, UnknownToolError
from agentq.orchestrator.spec import (
    ClientToolSpec,
    CodeToolSpec,
    FunctionToolSpec,
    HasToolCall,
    McpToolSpec,
    ProviderToolSpec,
    RunSpec,
    ToolChoiceTool,
)

ToolKind = Literal["function", "client", "mcp", "code", "provider"]

# Announcements older than this are treated as gone: their worker stopped.
ANNOUNCEMENT_TTL_S = 24 * 3600.0


class ToolAnnouncement(BaseModel):
    """One tool a worker serves, as published in the registry."""

    model_config = ConfigDict(extra="forbid")

    name: str
    kind: ToolKind
    queue: str
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})
    # For MCP: the server that serves the tool. For code: the language.
    server: str | None = None
    seen_at: float = 0.0


class ToolDef(BaseModel):
    """A tool as frozen into a run at submit."""

    model_config = ConfigDict(extra="forbid")

    name: str
    kind: ToolKind
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})
    queue: str | None = None  # None: nothing executes it here (client, provider)
    needs_approval: bool = False
    timeout_s: float = 60.0
    max_output_bytes: int | None = None  # None: the worker's setting
    # Kind-specific settings: the MCP server and remote tool name, the code
    # tool's language, session and limits, the provider tool's options.
    config: dict[str, Any] = Field(default_factory=dict)


def registry_key(ann: ToolAnnouncement) -> str:
    """Where an announcement lives in the registry hash."""
    if ann.kind == "mcp":
        return mcp_registry_key(ann.server or "", ann.name)
    if ann.kind == "code":
        return code_registry_key(ann.server or ann.name)
    return ann.name


def mcp_registry_key(server: str, tool: str) -> str:
    return f"mcp:{server}:{tool}"


def code_registry_key(language: str) -> str:
    return f"code:{language}"


def resolve_tools(
    spec: RunSpec, registry: dict[str, ToolAnnouncement], now: float
) -> list[ToolDef]:
    """Resolve the spec's tools against the live registry, or raise a SpecError."""

    def live(key: str) -> ToolAnnouncement | None:
        found = registry.get(key)
        if found is None or now - found.seen_at > ANNOUNCEMENT_TTL_S:
            return None
        return found

    resolved: list[ToolDef] = []
    for index, tool in enumerate(spec.tools):
        timeout_s = tool.timeout_s or spec.tool_timeout_s
        common: dict[str, Any] = {
            "needs_approval": tool.needs_approval,
            "timeout_s": timeout_s,
            "max_output_bytes": tool.max_output_bytes,
        }
        if isinstance(tool, FunctionToolSpec):
            found = live(tool.name)
            if found is None or found.kind != "function":
                raise UnknownToolError(
                    f"tools[{index}]: no worker serves the function tool {tool.name!r} "
                    "(start one with `agentq worker --tools MODULE`)"
                )
            resolved.append(
                ToolDef(
                    name=tool.name,
                    kind="function",
                    description=found.description,
                    input_schema=found.input_schema,
                    queue=found.queue,
                    **common,
                )
            )
        elif isinstance(tool, ClientToolSpec):
            resolved.append(
                ToolDef(
                    name=tool.name,
                    kind="client",
                    description=tool.description,
                    input_schema=tool.input_schema,
                    **common,
                )
            )
        elif isinstance(tool, McpToolSpec):
            # Names collide only among the servers this run enables, so a run's tool
            # names do not change when the deployment adds an unrelated server.
            run_servers = {t.server for t in spec.tools if isinstance(t, McpToolSpec)}
            resolved.extend(_resolve_mcp(index, tool, registry, live, common, run_servers))
        elif isinstance(tool, CodeToolSpec):
            found = live(code_registry_key(tool.language))
            if found is None:
                raise UnknownToolError(
                    f"tools[{index}]: no sandbox worker runs {tool.language} code "
                    "(start one with `agentq worker --sandbox`)"
                )
            resolved.append(
                ToolDef(
                    name=tool.tool_name,
                    kind="code",
                    description=found.description,
                    input_schema=found.input_schema,
                    queue=found.queue,
                    config={
                        "language": tool.language,
                        "session": tool.session,
                        "network": tool.network,
                        "limits": tool.limits.model_dump(exclude_none=True),
                    },
                    **{**common, "timeout_s": tool.limits.timeout_s or timeout_s},
                )
            )
        elif isinstance(tool, ProviderToolSpec):
            resolved.append(
                ToolDef(
                    name=tool.name,
                    kind="provider",
                    config={"options": tool.options},
                    **common,
                )
            )
    check_tool_references(spec, resolved)
    return resolved


def _resolve_mcp(
    index: int,
    tool: McpToolSpec,
    registry: dict[str, ToolAnnouncement],
    live: Any,
    common: dict[str, Any],
    servers: set[str] | None = None,
) -> list[ToolDef]:
    """The MCP tools a spec entry enables, named for the model.

    A tool keeps its own name unless another server in `servers` (default:
    every live MCP server in the registry) offers a tool of the same name;
    then the server's prefix (`{server}_`) tells them apart. A `prefix` in the
    spec always applies.
    """
    offered: dict[str, ToolAnnouncement] = {}
    elsewhere: set[str] = set()  # tool names other servers offer
    for key in registry:
        ann = live(key)
        if ann is None or ann.kind != "mcp":
            continue
        if ann.server == tool.server:
            offered[ann.name] = ann
        elif servers is None or ann.server in servers:
            elsewhere.add(ann.name)
    if not offered:
        raise UnknownToolError(
            f"tools[{index}]: no worker serves the MCP server {tool.server!r} "
            "(declare it in the worker's --mcp-config)"
        )
    wanted = tool.tools if tool.tools is not None else sorted(offered)
    missing = [name for name in wanted if name not in offered]
    if missing:
        raise UnknownToolError(
            f"tools[{index}]: the MCP server {tool.server!r} has no tool named {missing[0]!r}"
        )

    def exposed(name: str) -> str:
        if tool.prefix is not None:
            return tool.prefix + name
        return f"{tool.server}_{name}" if name in elsewhere else name

    return [
        ToolDef(
            name=exposed(name),
            kind="mcp",
            description=offered[name].description,
            input_schema=offered[name].input_schema,
            queue=offered[name].queue,
            config={"server": tool.server, "tool": name},
            **common,
        )
        for name in wanted
    ]


def check_tool_references(spec: RunSpec, tools: list[ToolDef]) -> None:
    """Names used by tool_choice, active_tools and stop_when must be tools of the run."""
    names = [t.name for t in tools]
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise SpecError(
                f"tools: two tools are named {name!r}; give one a different name or prefix"
            )
        seen.add(name)
    if isinstance(spec.tool_choice, ToolChoiceTool) and spec.tool_choice.tool not in seen:
        raise SpecError(f"tool_choice: {spec.tool_choice.tool!r} is not a tool of this run")
    for name in spec.active_tools or []:
        if name not in seen:
            raise SpecError(f"active_tools: {name!r} is not a tool of this run")
    for i, cond in enumerate(spec.stop_when):
        if isinstance(cond, HasToolCall) and cond.has_tool_call not in seen:
            raise SpecError(
                f"stop_when[{i}].has_tool_call: {cond.has_tool_call!r} is not a tool of this run"
            )
