"""`client`: a tool nobody here executes; the run parks until a result is posted."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from agentq.orchestrator.tools.base import (
    InputSchema,
    ResolveContext,
    ToolDef,
    ToolKindPlugin,
    ToolSpecBase,
)


class ClientToolSpec(ToolSpecBase):
    type: Literal["client"] = "client"
    name: str
    description: str = ""
    input_schema: InputSchema = Field(default_factory=lambda: {"type": "object"})


class ClientKind(ToolKindPlugin):
    kind = "client"
    spec_model = ClientToolSpec
    executed_by_worker = False  # its result is posted from outside

    def offer(self, entry: Any, ctx: ResolveContext) -> list[ToolDef]:
        return [self.described_tool(entry, ctx, entry.name)]
