"""Why a run failed: one typed record, stored on the run and carried by its `error` event."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agentq.orchestrator.core.tool_errors import ToolErrorKind


class FailureKind(StrEnum):
    PROVIDER = "provider"  # the model provider refused or kept failing
    INTERNAL = "internal"  # a bug, or a job whose worker died on every delivery
    HOOK = "hook"  # the step could not be prepared: its prepare_step hook raised
    LIMIT = "limit"  # a limit of the deployment or the spec (its run tree's steps) was reached
    OUTPUT_INVALID = "output-invalid"  # no valid structured output within its retries
    GUARDRAIL_TRIPPED = "guardrail-tripped"  # an input or output guardrail tripped
    TOOL = "tool"  # a tool whose on_error is fail-run failed (prelude.lua: tool_failure)
    BUDGET_EXCEEDED = "budget-exceeded"  # a budget of its `limits` was reached (`limit` names it)


class RunFailure(BaseModel):
    """Serialized with the JSON keys runs always had: `type`, `message`, `step`, `status`."""

    model_config = ConfigDict(
        extra="ignore", populate_by_name=True, serialize_by_alias=True, frozen=True
    )

    kind: FailureKind = Field(alias="type")
    message: str
    step: int | None = None
    # The provider's HTTP status, when there was one.
    status: int | None = None
    # output-invalid: the model's last attempt (parsed when it parsed, else its text); left
    # out of the JSON of every other failure.
    attempt: Any = Field(default=None, exclude_if=lambda value: value is None)
    # tool: the call that failed, its tool and its error's kind.
    tool: str | None = Field(default=None, exclude_if=lambda value: value is None)
    call_id: str | None = Field(default=None, exclude_if=lambda value: value is None)
    error_kind: ToolErrorKind | None = Field(default=None, exclude_if=lambda value: value is None)
    # budget-exceeded: the limit reached (`max_cost_usd`, …).
    limit: str | None = Field(default=None, exclude_if=lambda value: value is None)
