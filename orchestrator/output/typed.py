"""Structured output typed by a pydantic model in the Python API: the model's JSON Schema
goes into the spec, and the run's output comes back as an instance of it."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from agentq.orchestrator.core.errors import SpecError
from agentq.orchestrator.output.spec import OutputSpec


def typed_output(output: OutputSpec | None, output_type: type[BaseModel]) -> OutputSpec:
    """The spec's `output` with `output_type`'s schema (its mode and retries kept); a
    different schema given beside it is a contradiction, refused."""
    schema = output_type.model_json_schema()
    if output is None:
        return OutputSpec.model_validate({"schema": schema})
    if output.schema_ != schema:
        raise SpecError("output.schema: give the schema or output_type, not both")
    return output


def parsed_output(output_type: type[BaseModel], value: Any) -> BaseModel | None:
    """The run's output as an `output_type` (None when the run gave none)."""
    return None if value is None else output_type.model_validate(value)
