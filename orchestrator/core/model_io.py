"""What a model step produced, in the neutral vocabulary every provider maps to.

Data only: shared by the loop (which decides on it) and the providers (which
produce it).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agentq.orchestrator.core.messages import Usage

FinishReason = Literal["stop", "length", "tool-calls", "content-filter", "error", "other"]


class ProviderToolCall(BaseModel):
    """A tool call as the model produced it. `arguments` is the raw JSON text
    (or an already-parsed object for wire formats that send objects); parsing and
    validation happen in the loop so that a malformed call becomes a tool error."""

    model_config = ConfigDict(extra="forbid")

    id: str | None = None
    name: str
    arguments: str | dict[str, Any] | list[Any] | None = None
    provider_executed: bool = False
    # For provider-executed calls, the provider's own result.
    provider_result: Any = None
    # Set when the call could not be read from the model's output (a malformed prompt-based
    # block): the loop answers it with this message as a tool error the model sees.
    parse_error: str | None = None


class ModelResponse(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = ""
    tool_calls: list[ProviderToolCall] = Field(default_factory=list)
    finish_reason: FinishReason = "stop"
    usage: Usage = Field(default_factory=Usage)
    # Anything a wire format must carry into the next request (reasoning items, …).
    provider_metadata: dict[str, Any] = Field(default_factory=dict)
