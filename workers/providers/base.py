"""The provider protocol: one request in, one response out, text deltas streamed.

A provider maps the neutral `ModelRequest` onto one wire format and the answer
back onto `ModelResponse`. It never touches Redis: deltas go to a `DeltaSink`
the caller supplies, so every provider is testable with a plain list.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

import httpx
from pydantic import BaseModel, ConfigDict, Field

from orchestrator.messages import Message, Usage
from orchestrator.spec import ModelRef, ToolChoice

FinishReason = Literal["stop", "length", "tool-calls", "content-filter", "error", "other"]


class ToolDefinition(BaseModel):
    """A tool as offered to the model."""

    model_config = ConfigDict(extra="forbid")

    name: str
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})
    # Provider-executed tools (web search, …) carry their options instead of a schema.
    provider_executed: bool = False
    options: dict[str, Any] = Field(default_factory=dict)


class ModelRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: ModelRef
    system: str | None = None
    messages: list[Message]
    tools: list[ToolDefinition] = Field(default_factory=list)
    tool_choice: ToolChoice = "auto"
    step: int = 0
    timeout_s: float = 120.0


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


class ModelResponse(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = ""
    tool_calls: list[ProviderToolCall] = Field(default_factory=list)
    finish_reason: FinishReason = "stop"
    usage: Usage = Field(default_factory=Usage)
    # Anything a wire format must carry into the next request (reasoning items, …).
    provider_metadata: dict[str, Any] = Field(default_factory=dict)


class DeltaSink(Protocol):
    async def text_delta(self, delta: str) -> None: ...


class Provider(Protocol):
    """One wire format. `generate` raises `ProviderError` (retryable or not)."""

    async def generate(self, request: ModelRequest, sink: DeltaSink) -> ModelResponse: ...


class ProviderContext(BaseModel):
    """What a provider factory gets from the worker: the HTTP client and the environment
    (API keys are read from it at call time and never stored anywhere else)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    http: httpx.AsyncClient
    env: dict[str, str]
