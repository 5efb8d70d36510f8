"""Anthropic Messages API (`provider: "anthropic"`).

Tool calls are `tool_use` blocks, results `tool_result` blocks (with
`is_error`) inside a user turn. Streaming builds each content block from
`content_block_start` and its deltas (`text_delta`, `input_json_delta`,
`thinking_delta`, `signature_delta`); `message_delta` brings the stop reason and
the final usage. Thinking blocks are returned in `provider_metadata` because the
API requires them back, unchanged, on the next request of a tool-use turn.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentq.orchestrator.core.errors import ProviderError
from agentq.orchestrator.core.media import Media, MediaLimits, tool_content
from agentq.orchestrator.core.messages import (
    AssistantMessage,
    Message,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
    UserMessage,
)
from agentq.orchestrator.core.model_io import FinishReason, ModelResponse, ProviderToolCall
from agentq.orchestrator.policy.caching import cache_policy
from agentq.orchestrator.spec.run import ToolChoice, ToolChoiceTool
from agentq.workers.models.anthropic_cache import place_breakpoints
from agentq.workers.models.base import ModelRequest, OfferedTool
from agentq.workers.models.driver import NO_DELTA, StreamDelta, ToolInputDelta, ToolInputStart
from agentq.workers.models.history import (
    alternating_turns,
    arguments_object,
    assistant_metadata,
    finish_body,
    unknown_server_tool,
)
from agentq.workers.models.sse import SSEEvent

API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096
KEY = "anthropic"

STOP_REASONS: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool-calls",
    "refusal": "content-filter",
}
# Provider-executed tools: our name -> the API's versioned tool type.
SERVER_TOOLS = {"web_search": "web_search_20250305", "web_fetch": "web_fetch_20250910"}
RETRYABLE_STREAM_ERRORS = frozenset(
    {"overloaded_error", "api_error", "rate_limit_error", "timeout_error"}
)


def media_block(media_type: str, data: str) -> dict[str, Any]:
    kind = "document" if media_type == "application/pdf" else "image"
    return {"type": kind, "source": {"type": "base64", "media_type": media_type, "data": data}}


def user_blocks(message: UserMessage) -> list[dict[str, Any]]:
    if isinstance(message.content, str):
        return [{"type": "text", "text": message.content}]
    return [
        {"type": "text", "text": p.text}
        if isinstance(p, TextPart)
        else media_block(p.media_type, p.data)
        for p in message.content
    ]


def assistant_blocks(message: AssistantMessage) -> list[dict[str, Any]]:
    # Thinking must come first, exactly as the API returned it.
    blocks: list[dict[str, Any]] = list(assistant_metadata(message, KEY).get("thinking", []))
    parts = (
        [TextPart(text=message.content)] if isinstance(message.content, str) else message.content
    )
    for part in parts:
        if isinstance(part, TextPart):
            if part.text:
                blocks.append({"type": "text", "text": part.text})
        elif isinstance(part, ToolCallPart):
            blocks.append(
                {
                    "type": "server_tool_use" if part.provider_executed else "tool_use",
                    "id": part.tool_call_id,
                    "name": part.tool_name,
                    "input": arguments_object(part.input),
                }
            )
        elif isinstance(part, ToolResultPart) and part.provider_executed:
            blocks.append(
                {
                    "type": f"{part.tool_name}_tool_result",
                    "tool_use_id": part.tool_call_id,
                    "content": part.output,
                }
            )
    return blocks


def tool_result_content(part: ToolResultPart, media: MediaLimits | None) -> Any:
    """A string, or text and image blocks when the tool returned images."""
    items = tool_content(part.for_model, part.tool_call_id, media)
    if all(isinstance(i, str) for i in items):
        return "\n".join(str(i) for i in items)
    return [
        media_block(i.media_type, i.data)
        if isinstance(i, Media) and (i.is_image or i.media_type == "application/pdf")
        else {"type": "text", "text": i.describe() if isinstance(i, Media) else i}
        for i in items
    ]


def tool_result_block(part: ToolResultPart, media: MediaLimits | None = None) -> dict[str, Any]:
    block: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": part.tool_call_id,
        "content": tool_result_content(part, media),
    }
    if part.is_error:
        block["is_error"] = True
    return block


def to_messages(
    messages: list[Message], media: MediaLimits | None = None
) -> tuple[list[str], list[dict[str, Any]]]:
    """(system texts, messages), user and assistant turns alternating."""
    return alternating_turns(
        messages,
        items_key="content",
        assistant_role="assistant",
        user=user_blocks,
        assistant=assistant_blocks,
        tool=lambda message: [tool_result_block(p, media) for p in message.content],
    )


def to_tools(tools: list[OfferedTool], label: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for tool in tools:
        if not tool.provider_executed:
            out.append(
                {
                    "name": tool.name,
                    "description": tool.description,
                    "input_schema": tool.input_schema,
                }
            )
        elif tool.name in SERVER_TOOLS:
            out.append({"type": SERVER_TOOLS[tool.name], "name": tool.name, **tool.options})
        else:
            raise unknown_server_tool(label, "Anthropic", tool.name, SERVER_TOOLS)
    return out


def to_tool_choice(choice: ToolChoice) -> dict[str, Any]:
    if isinstance(choice, ToolChoiceTool):
        return {"type": "tool", "name": choice.tool}
    return {"type": {"auto": "auto", "required": "any", "none": "none"}[choice]}


def to_usage(raw: dict[str, Any]) -> Usage:
    # The API counts cache reads and writes apart from `input_tokens`; the neutral
    # input count is the whole prompt, as OpenAI's is.
    fresh = int(raw.get("input_tokens") or 0)
    read = int(raw.get("cache_read_input_tokens") or 0)
    written = int(raw.get("cache_creation_input_tokens") or 0)
    output = int(raw.get("output_tokens") or 0)
    return Usage(
        input_tokens=fresh + read + written,
        output_tokens=output,
        total_tokens=fresh + read + written + output,
        cached_input_tokens=read,
        cache_write_tokens=written,
    )


@dataclass
class _Block:
    type: str
    text: list[str] = field(default_factory=list)
    json: list[str] = field(default_factory=list)
    start: dict[str, Any] = field(default_factory=dict)


@dataclass
class StreamState:
    """Folds stream events into a response; pure, so event sequences are unit-testable."""

    blocks: dict[int, _Block] = field(default_factory=dict)
    usage: dict[str, Any] = field(default_factory=dict)
    stop_reason: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def add(self, event: dict[str, Any], label: str) -> StreamDelta:
        kind = event.get("type")
        if kind == "message_start":
            message = event.get("message") or {}
            self.usage.update(message.get("usage") or {})
            self.meta.update({k: message[k] for k in ("id", "model") if message.get(k)})
        elif kind == "content_block_start":
            start = dict(event.get("content_block") or {})
            block = _Block(type=str(start.get("type")), start=start)
            if start.get("text"):
                block.text.append(start["text"])
            self.blocks[int(event.get("index", len(self.blocks)))] = block
            if block.type == "tool_use" and start.get("id"):
                return StreamDelta(
                    tool_inputs=(ToolInputStart(start["id"], start.get("name", "")),)
                )
        elif kind == "content_block_delta":
            return self._delta(event)
        elif kind == "message_delta":
            # message_delta usage is cumulative: it replaces what message_start said.
            self.usage.update(
                {k: v for k, v in (event.get("usage") or {}).items() if v is not None}
            )
            self.stop_reason = (event.get("delta") or {}).get("stop_reason") or self.stop_reason
        elif kind == "error":
            error = event.get("error") or {}
            raise ProviderError(
                f"{label}: {error.get('type', 'error')}: {error.get('message', 'stream error')}",
                retryable=error.get("type") in RETRYABLE_STREAM_ERRORS,
            )
        return NO_DELTA

    def _delta(self, event: dict[str, Any]) -> StreamDelta:
        block = self.blocks.setdefault(int(event.get("index", 0)), _Block(type="text"))
        delta = event.get("delta") or {}
        kind = delta.get("type")
        if kind == "text_delta":
            block.text.append(delta.get("text", ""))
            return StreamDelta(text=str(delta.get("text", "")) if block.type == "text" else "")
        if kind == "input_json_delta":
            piece = str(delta.get("partial_json", ""))
            block.json.append(piece)
            call_id = block.start.get("id")
            if block.type == "tool_use" and call_id and piece:
                return StreamDelta(tool_inputs=(ToolInputDelta(call_id, piece),))
        elif kind == "thinking_delta":
            block.text.append(delta.get("thinking", ""))
            return StreamDelta(reasoning=str(delta.get("thinking", "")))
        elif kind == "signature_delta":
            block.start["signature"] = block.start.get("signature", "") + delta.get("signature", "")
        return NO_DELTA

    def response(self) -> ModelResponse:
        text: list[str] = []
        calls: list[ProviderToolCall] = []
        thinking: list[dict[str, Any]] = []
        results: dict[str, Any] = {}
        for _, block in sorted(self.blocks.items()):
            if block.type == "text":
                text.append("".join(block.text))
            elif block.type in ("tool_use", "server_tool_use"):
                calls.append(self._call(block))
            elif block.type == "thinking":
                thinking.append({**block.start, "thinking": "".join(block.text)})
            elif block.type == "redacted_thinking":
                thinking.append(block.start)
            elif block.type.endswith("_tool_result"):
                results[str(block.start.get("tool_use_id"))] = block.start.get("content")
        for call in calls:
            if call.provider_executed:
                call.provider_result = results.get(call.id or "")
        metadata: dict[str, Any] = dict(self.meta)
        if thinking:
            metadata["thinking"] = thinking
        local_calls = any(not c.provider_executed for c in calls)
        finish = STOP_REASONS.get(self.stop_reason or "", "other")
        if local_calls:
            finish = "tool-calls"
        return ModelResponse(
            text="".join(text),
            tool_calls=calls,
            finish_reason=finish,
            usage=to_usage(self.usage),
            provider_metadata={KEY: metadata} if metadata else {},
        )

    @staticmethod
    def _call(block: _Block) -> ProviderToolCall:
        joined = "".join(block.json)
        arguments: str | dict[str, Any] = joined or (block.start.get("input") or {})
        return ProviderToolCall(
            id=block.start.get("id"),
            name=str(block.start.get("name", "")),
            arguments=arguments,
            provider_executed=block.type == "server_tool_use",
        )


def parse_message(data: dict[str, Any], label: str) -> ModelResponse:
    """A non-streamed message, folded through the same state as a stream."""
    state = StreamState()
    state.add({"type": "message_start", "message": data}, label)
    for index, block in enumerate(data.get("content") or []):
        state.add({"type": "content_block_start", "index": index, "content_block": block}, label)
    state.stop_reason = data.get("stop_reason")
    return state.response()


@dataclass
class _Fold:
    state: StreamState = field(default_factory=StreamState)
    stopped: bool = False

    @property
    def ended(self) -> bool:
        return self.stopped

    def feed(self, data: dict[str, Any], event: SSEEvent, label: str) -> StreamDelta:
        delta = self.state.add(data, label)
        self.stopped = event.event == "message_stop"
        return delta

    def result(self, label: str) -> ModelResponse:
        if not self.stopped:
            raise ProviderError(f"{label}: the stream ended before message_stop", retryable=True)
        return self.state.response()


class AnthropicWire:
    def path(self, request: ModelRequest, stream: bool) -> str:
        return "messages"

    def auth_headers(self, key: str | None) -> dict[str, str]:
        headers = {"anthropic-version": API_VERSION}
        if key:
            headers["x-api-key"] = key
        return headers

    def body(self, request: ModelRequest, stream: bool) -> dict[str, Any]:
        ref = request.model
        system, messages = to_messages(request.messages, MediaLimits.from_options(ref.options))
        if request.system:
            system.insert(0, request.system)
        body: dict[str, Any] = {
            "model": ref.name,
            "max_tokens": DEFAULT_MAX_TOKENS,
            "messages": messages,
        }
        if system:
            body["system"] = "\n\n".join(system)
        finish_body(body, request, stream, to_tools, to_tool_choice)
        return place_breakpoints(body, cache_policy(ref.options))

    def fold(self, request: ModelRequest) -> _Fold:
        return _Fold()

    def parse(self, data: dict[str, Any], request: ModelRequest, label: str) -> ModelResponse:
        return parse_message(data, label)
