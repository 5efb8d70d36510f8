"""The provider protocol: one request in, one response out, text, reasoning and tool-input
deltas streamed.

A provider maps the neutral `ModelRequest` onto one wire format and the answer
back onto `ModelResponse`. It never touches Redis: deltas go to a `DeltaSink`
the caller supplies, so every provider is testable with a plain list.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import httpx
from pydantic import BaseModel, ConfigDict, Field

from agentq.orchestrator.core.messages import Message
from agentq.orchestrator.core.model_io import FinishReason, ModelResponse, ProviderToolCall
from agentq.orchestrator.policy.caching import CacheScope
from agentq.orchestrator.policy.endpoints import Endpoint
from agentq.orchestrator.policy.model_ref import ModelRef
from agentq.orchestrator.spec.run import ToolChoice


class OfferedTool(BaseModel):
    """A tool as offered to the model: what a provider renders into its request
    (derived from the run's `ToolDef`; see orchestrator/tools/base.py)."""

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
    tools: list[OfferedTool] = Field(default_factory=list)
    tool_choice: ToolChoice = "auto"
    step: int = 0
    timeout_s: float = 120.0
    # Set on a repair request (a side request asking to fix one call): its ordinal within
    # the step. Wire formats ignore it; the scripted provider answers from `repair`.
    repair_index: int | None = None
    # Structured output in native mode: the JSON Schema the provider's response format
    # holds the answer to (only wire formats with `ProviderInfo.native_output` get one).
    output_schema: dict[str, Any] | None = None
    # What the request's prefix is shared by (a run's steps, in its tenant's namespace),
    # for the providers that route on a cache key (orchestrator/policy/caching.py).
    cache_scope: CacheScope | None = None
    # A Gemini cached content that holds this request's system instruction and tools (a
    # batch's shared prefix: workers/models/gemini_cache/), sent in their place.
    cached_content: str | None = None


class DeltaSink(Protocol):
    async def text_delta(self, delta: str) -> None: ...

    async def reasoning_delta(self, delta: str) -> None:
        """Reasoning the model shows while it works (thinking, a reasoning summary).
        Shown live only: it never becomes the step's text."""
        ...

    async def tool_input_start(self, call_id: str, tool_name: str) -> None:
        """The model began a call; its arguments follow as `tool_input_delta`s. The call
        id is the one the response's call gets (the provider's, or the fallback ids)."""
        ...

    async def tool_input_delta(self, call_id: str, delta: str) -> None:
        """A piece of the call's arguments (JSON text), as the provider streamed it."""
        ...


class DiscardDeltas:
    """A DeltaSink for a model call whose answer is not the run's to show (a repair, a
    summary, an llm node, MCP sampling): every delta is dropped."""

    async def text_delta(self, delta: str) -> None:
        return None

    async def reasoning_delta(self, delta: str) -> None:
        return None

    async def tool_input_start(self, call_id: str, tool_name: str) -> None:
        return None

    async def tool_input_delta(self, call_id: str, delta: str) -> None:
        return None


class Provider(Protocol):
    """One wire format. `generate` raises `ProviderError` (retryable or not)."""

    async def generate(self, request: ModelRequest, sink: DeltaSink) -> ModelResponse: ...


HeaderObserver = Callable[[httpx.Headers], None]


class ProviderContext(BaseModel):
    """What a provider factory gets from the worker: the HTTP client, the environment
    (API keys are read from it at call time and never stored anywhere else), and the
    endpoint the call goes to, resolved and checked against the deployment's models
    file and allow-lists (`make_provider` resolves it when the caller did not)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    http: httpx.AsyncClient
    env: dict[str, str]
    endpoint: Endpoint | None = None
    # Receives every response's headers (the rate limiter learns limits from them);
    # they travel as a request extension to the model client's httpx event hook.
    on_headers: HeaderObserver | None = None


# The name this had before; kept for providers written against it.
ToolDefinition = OfferedTool

__all__ = [
    "DeltaSink",
    "DiscardDeltas",
    "FinishReason",
    "HeaderObserver",
    "ModelRequest",
    "ModelResponse",
    "OfferedTool",
    "Provider",
    "ProviderContext",
    "ProviderToolCall",
    "ToolDefinition",
]
