"""`output` on a run spec: the JSON Schema a run's answer must match, and how it is asked."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from agentq.orchestrator.core.json_schema import validator_for
from agentq.orchestrator.core.spec_model import SpecModel

# As Pydantic AI names them: `native` the provider's JSON-schema response format, `tool`
# a final-answer tool the model must call, `prompted` the schema in the system prompt;
# `auto` is native where the endpoint's wire format has one, else tool.
OutputMode = Literal["auto", "native", "tool", "prompted"]
EffectiveMode = Literal["native", "tool", "prompted"]


class OutputSpec(SpecModel):
    schema_: dict[str, Any] = Field(alias="schema")
    mode: OutputMode = "auto"
    # Invalid outputs sent back to the model before the run fails with `output-invalid`.
    max_retries: int = Field(default=1, ge=0, le=20)

    model_config = SpecModel.model_config | {"populate_by_name": True, "serialize_by_alias": True}

    @field_validator("schema_")
    @classmethod
    def _check_schema(cls, schema: dict[str, Any]) -> dict[str, Any]:
        from jsonschema.exceptions import SchemaError  # jsonschema loads on first use

        try:
            validator_for(schema)
        except SchemaError as exc:
            raise ValueError(f"not a valid JSON Schema: {exc.message}") from None
        # A tool's input and every provider's response format are objects: the root is one.
        if schema.get("type") != "object":
            raise ValueError('the root of an output schema must be {"type": "object", ...}')
        return schema


def effective_mode(mode: OutputMode, native_supported: bool) -> EffectiveMode:
    """The mode a step uses on an endpoint: native only where its wire format has a
    JSON-schema response format; elsewhere a final-answer tool stands in for it."""
    if mode == "tool" or mode == "prompted":
        return mode
    return "native" if native_supported else "tool"
