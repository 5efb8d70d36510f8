"""`function`: a `@tool` function some worker registered (`agentq worker --tools MODULE`)."""

from __future__ import annotations

from typing import Any, Literal

from agentq.orchestrator.core.errors import UnknownToolError
from agentq.orchestrator.tools.base import (
    ResolveContext,
    ToolAnnouncement,
    ToolDef,
    ToolKindPlugin,
    ToolSpecBase,
)


class FunctionToolSpec(ToolSpecBase):
    type: Literal["function"] = "function"
    name: str


class FunctionKind(ToolKindPlugin):
    kind = "function"
    spec_model = FunctionToolSpec

    def offer(self, entry: Any, ctx: ResolveContext) -> list[ToolDef]:
        found = ctx.registry.get(entry.name)
        if found is None or found.kind != "function":
            raise UnknownToolError(
                f"{ctx.where}: no worker serves the function tool {entry.name!r} "
                "(start one with `agentq worker --tools MODULE`)"
            )
        return [
            self.described_tool(
                found, ctx, entry.name, queue=found.queue, to_model_output=found.to_model_output
            )
        ]

    def call_entries(self, ann: ToolAnnouncement) -> list[tuple[str, dict[str, Any]]]:
        return [(ann.name, {"type": "function", "name": ann.name})]

    def registry_key(self, ann: ToolAnnouncement) -> str:
        return ann.name  # function tools share one namespace, as in the first registries

    def needs(self, tool: ToolDef) -> str:
        return tool.served_name
