"""`client`: a tool nobody here executes; the run parks until a result is posted."""

from __future__ import annotations

from typing import Any, Literal

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import Field, field_validator

from agentq.orchestrator.tools.base import (
    ResolveContext,
    ToolDef,
    ToolKindPlugin,
    ToolSpecBase,
)


class ClientToolSpec(ToolSpecBase):
    type: Literal["client"] = "client"
    name: str
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})

    @field_validator("input_schema")
    @classmethod
    def _check_schema(cls, schema: dict[str, Any]) -> dict[str, Any]:
        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as exc:
            where = "/".join(str(p) for p in exc.path) or "(root)"
            raise ValueError(f"not a valid JSON Schema at {where}: {exc.message}") from None
        return schema


class ClientKind(ToolKindPlugin):
    kind = "client"
    spec_model = ClientToolSpec

    def offer(self, entry: Any, ctx: ResolveContext) -> list[ToolDef]:
        return [
            ToolDef(
                name=entry.name,
                kind="client",
                description=entry.description,
                input_schema=entry.input_schema,
                timeout_s=ctx.timeout_s,
            )
        ]
