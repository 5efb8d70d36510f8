"""Provider-neutral conversation messages, the shapes every wire format maps to.

They follow the AI SDK's model messages: a user or assistant message holds a
string or a list of parts; tool results travel in a `tool` message. Messages in
the OpenAI Chat Completions shape (`tool_calls` on the assistant, `tool_call_id`
on a tool message) are accepted on input and normalized by `normalize_message`.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from agentq.orchestrator.core.tool_errors import ToolErrorKind


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TextPart(_Model):
    type: Literal["text"] = "text"
    text: str


class MediaPart(_Model):
    """Inline media (an image a tool returned, an image in a prompt), base64 encoded."""

    type: Literal["media"] = "media"
    media_type: str
    data: str


class ToolCallPart(_Model):
    type: Literal["tool-call"] = "tool-call"
    tool_call_id: str
    tool_name: str
    input: Any = None
    provider_executed: bool = False


class ToolResultPart(_Model):
    type: Literal["tool-result"] = "tool-result"
    tool_call_id: str
    tool_name: str
    output: Any = None
    is_error: bool = False
    # What kind of failure an error is (None on a success, and on an error result that
    # came in with a conversation's history rather than from a call of ours).
    error_kind: ToolErrorKind | None = None
    provider_executed: bool = False
    # What the model sees instead of `output`, when the tool's `to_model_output` hook
    # converted it (orchestrator/core/model_output.py); `output` stays what the tool gave.
    model_output: Any = Field(default=None, exclude_if=lambda value: value is None)

    @property
    def for_model(self) -> Any:
        """The result as the model reads it."""
        return self.output if self.model_output is None else self.model_output


UserPart = Annotated[TextPart | MediaPart, Field(discriminator="type")]
AssistantPart = Annotated[TextPart | ToolCallPart | ToolResultPart, Field(discriminator="type")]


class SystemMessage(_Model):
    role: Literal["system"] = "system"
    content: str


class UserMessage(_Model):
    role: Literal["user"] = "user"
    content: str | list[UserPart]


class AssistantMessage(_Model):
    role: Literal["assistant"] = "assistant"
    content: str | list[AssistantPart]
    # What a wire format must replay on the next request (reasoning items, thinking
    # blocks, thought signatures), opaque to everything but that provider.
    provider_metadata: dict[str, Any] = Field(default_factory=dict)

    def tool_calls(self) -> list[ToolCallPart]:
        if isinstance(self.content, str):
            return []
        return [p for p in self.content if isinstance(p, ToolCallPart)]

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "".join(p.text for p in self.content if isinstance(p, TextPart))


class ToolMessage(_Model):
    role: Literal["tool"] = "tool"
    content: list[ToolResultPart]


Message = Annotated[
    SystemMessage | UserMessage | AssistantMessage | ToolMessage,
    Field(discriminator="role"),
]
MESSAGE_ADAPTER: TypeAdapter[Message] = TypeAdapter(Message)
MESSAGES_ADAPTER: TypeAdapter[list[Message]] = TypeAdapter(list[Message])


class CostBreakdown(_Model):
    """What tokens cost, USD, by kind (priced by orchestrator/cost/): input neither read
    from nor written to a cache, cache reads, cache writes, output other than reasoning,
    reasoning."""

    input_usd: float = 0.0
    cached_input_usd: float = 0.0
    cache_write_usd: float = 0.0
    output_usd: float = 0.0
    reasoning_usd: float = 0.0

    @property
    def total_usd(self) -> float:
        return round_usd(
            self.input_usd
            + self.cached_input_usd
            + self.cache_write_usd
            + self.output_usd
            + self.reasoning_usd
        )

    def __add__(self, other: CostBreakdown) -> CostBreakdown:
        return CostBreakdown(
            **{
                name: round_usd(getattr(self, name) + getattr(other, name))
                for name in CostBreakdown.model_fields
            }
        )


def round_usd(value: float) -> float:
    """To the nano-dollar: sums of float prices stay free of binary noise."""
    return round(value, 9)


class Usage(_Model):
    """Tokens a step (or a run, summed) used. `input_tokens` is the whole prompt on every
    wire format; `cached_input_tokens` (read from the provider's prompt cache) and
    `cache_write_tokens` (written to it) are parts of it, billed at their own prices."""

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    cached_input_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    # USD at the deployment's prices (orchestrator/cost/). None: a model without a price
    # took part (its tokens still count); no sum makes that known again, so a run's cost
    # is never an undercount shown as a figure.
    cost_usd: float | None = 0.0
    cost_breakdown: CostBreakdown | None = Field(default_factory=CostBreakdown)

    def __add__(self, other: Usage) -> Usage:
        breakdown = (
            None
            if self.cost_breakdown is None or other.cost_breakdown is None
            else self.cost_breakdown + other.cost_breakdown
        )
        return Usage(
            **{name: getattr(self, name) + getattr(other, name) for name in _TOKEN_NAMES},
            cost_usd=None if breakdown is None else breakdown.total_usd,
            cost_breakdown=breakdown,
        )


_TOKEN_NAMES = tuple(name for name in Usage.model_fields if name.endswith("_tokens"))


def normalize_message(raw: Any) -> Any:
    """Map an OpenAI Chat Completions message onto the neutral shape; pass others through."""
    if not isinstance(raw, dict):
        return raw
    role = raw.get("role")
    if role == "assistant" and "tool_calls" in raw:
        parts: list[dict[str, Any]] = []
        if raw.get("content"):
            parts.append({"type": "text", "text": raw["content"]})
        for call in raw["tool_calls"] or []:
            function = call.get("function", {})
            parts.append(
                {
                    "type": "tool-call",
                    "tool_call_id": call.get("id"),
                    "tool_name": function.get("name"),
                    "input": _parse_arguments(function.get("arguments")),
                }
            )
        return {"role": "assistant", "content": parts}
    if role == "tool" and "tool_call_id" in raw:
        return {
            "role": "tool",
            "content": [
                {
                    "type": "tool-result",
                    "tool_call_id": raw["tool_call_id"],
                    "tool_name": raw.get("name", ""),
                    "output": raw.get("content"),
                }
            ],
        }
    return raw


def _parse_arguments(arguments: Any) -> Any:
    if not isinstance(arguments, str):
        return arguments
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments


def tool_output_text(output: Any) -> str:
    """How a tool's output is shown to a model: a string as-is, anything else as JSON."""
    if isinstance(output, str):
        return output
    return json.dumps(output, ensure_ascii=False, default=str)
