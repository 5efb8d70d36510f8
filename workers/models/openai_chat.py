"""OpenAI-compatible Chat Completions (`provider: "openai"`), any host via `base_url`.

Streams by default (`options.stream: false` turns it off). Tool-call arguments
arrive as fragments keyed by `index` and are joined, never parsed here. Options
the loop does not own (temperature, max_tokens, parallel_tool_calls, …) are
passed through into the request body.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentq.orchestrator.core.errors import ProviderError
from agentq.orchestrator.core.media import Media, MediaLimits, text_and_media
from agentq.orchestrator.core.messages import (
    AssistantMessage,
    MediaPart,
    Message,
    SystemMessage,
    TextPart,
    ToolMessage,
    Usage,
    UserMessage,
)
from agentq.orchestrator.core.model_io import FinishReason, ModelResponse, ProviderToolCall
from agentq.orchestrator.output.instructions import OUTPUT_TOOL
from agentq.orchestrator.spec.run import ToolChoice, ToolChoiceTool
from agentq.workers.models.base import ModelRequest, OfferedTool
from agentq.workers.models.driver import (
    NO_DELTA,
    BearerAuthWire,
    StreamDelta,
    ToolInput,
    ToolInputDelta,
    ToolInputStart,
)
from agentq.workers.models.history import arguments_text, cache_key_field, finish_body
from agentq.workers.models.sse import SSEEvent

FINISH_REASONS: dict[str, FinishReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool-calls",
    "function_call": "tool-calls",
    "content_filter": "content-filter",
}


def data_url(part: MediaPart) -> str:
    return f"data:{part.media_type};base64,{part.data}"


def user_content(message: UserMessage) -> str | list[dict[str, Any]]:
    if isinstance(message.content, str):
        return message.content
    parts: list[dict[str, Any]] = []
    for part in message.content:
        if isinstance(part, TextPart):
            parts.append({"type": "text", "text": part.text})
        elif part.media_type.startswith("image/"):
            parts.append({"type": "image_url", "image_url": {"url": data_url(part)}})
        else:
            parts.append({"type": "text", "text": f"[{part.media_type} attachment omitted]"})
    return parts


def to_messages(
    system: str | None, messages: list[Message], media: MediaLimits | None = None
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if system:
        out.append({"role": "system", "content": system})
    for message in messages:
        if isinstance(message, SystemMessage):
            out.append({"role": "system", "content": message.content})
        elif isinstance(message, UserMessage):
            out.append({"role": "user", "content": user_content(message)})
        elif isinstance(message, AssistantMessage):
            out.append(assistant_message(message))
        elif isinstance(message, ToolMessage):
            out.extend(tool_messages(message, media))
    return out


def tool_messages(message: ToolMessage, media: MediaLimits | None) -> list[dict[str, Any]]:
    """One `tool` message per result, then one `user` message with the images they returned.

    Tool messages take text only, so each image is described there (with its reference)
    and sent in the user message after the last of them: the API wants every call of the
    assistant message answered before any other message, as OpenAI's guides do it."""
    out: list[dict[str, Any]] = []
    images: list[dict[str, Any]] = []
    for part in message.content:
        text, shown = text_and_media(part.for_model, part.tool_call_id, _is_image, media)
        out.append({"role": "tool", "tool_call_id": part.tool_call_id, "content": text})
        for image in shown:
            images.append({"type": "text", "text": image.describe()})
            images.append({"type": "image_url", "image_url": {"url": image.data_url}})
    if images:
        out.append({"role": "user", "content": images})
    return out


def _is_image(media: Media) -> bool:
    return media.is_image


def assistant_message(message: AssistantMessage) -> dict[str, Any]:
    calls = [
        {
            "id": part.tool_call_id,
            "type": "function",
            "function": {"name": part.tool_name, "arguments": arguments_text(part.input)},
        }
        for part in message.tool_calls()
        if not part.provider_executed
    ]
    text = message.text()
    result: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        result["tool_calls"] = calls
    elif not text:
        result["content"] = ""
    return result


def to_tools(tools: list[OfferedTool], label: str) -> list[dict[str, Any]]:
    for tool in tools:
        if tool.provider_executed:
            raise ProviderError(
                f"{label}: Chat Completions has no provider-executed tool {tool.name!r} "
                "(use the 'openai-responses' or 'anthropic' provider)",
                retryable=False,
            )
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.input_schema,
            },
        }
        for tool in tools
    ]


def to_tool_choice(choice: ToolChoice) -> str | dict[str, Any]:
    if isinstance(choice, ToolChoiceTool):
        return {"type": "function", "function": {"name": choice.tool}}
    return choice


def to_response_format(schema: dict[str, Any]) -> dict[str, Any]:
    """Structured output's native mode: the answer is JSON matching `schema`. Not strict
    (strict takes a subset of JSON Schema); the loop validates the answer either way."""
    return {"type": "json_schema", "json_schema": {"name": OUTPUT_TOOL, "schema": schema}}


def to_usage(raw: dict[str, Any] | None) -> Usage:
    if not raw:
        return Usage()
    prompt = int(raw.get("prompt_tokens") or 0)
    completion = int(raw.get("completion_tokens") or 0)
    prompt_details = raw.get("prompt_tokens_details") or {}
    completion_details = raw.get("completion_tokens_details") or {}
    return Usage(
        input_tokens=prompt,
        output_tokens=completion,
        total_tokens=int(raw.get("total_tokens") or prompt + completion),
        cached_input_tokens=int(prompt_details.get("cached_tokens") or 0),
        reasoning_tokens=int(completion_details.get("reasoning_tokens") or 0),
    )


def to_finish_reason(raw: str | None, has_calls: bool) -> FinishReason:
    if has_calls and raw in (None, "stop", "tool_calls", "function_call"):
        # Several compatible servers say "stop" even when they return tool calls.
        return "tool-calls"
    if raw is None:
        return "other"
    return FINISH_REASONS.get(raw, "other")


@dataclass
class _CallAccumulator:
    id: str | None = None
    name: str = ""
    arguments: list[str] = field(default_factory=list)
    started: bool = False  # its tool-input start was streamed


def fallback_call_id(step: int, index: int) -> str:
    return f"call_{step}_{index}"


@dataclass
class StreamState:
    """Folds chunks into a response; pure, so chunk sequences are unit-testable."""

    step: int = 0  # names a call the server gave no id
    text: list[str] = field(default_factory=list)
    calls: dict[int, _CallAccumulator] = field(default_factory=dict)
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def add(self, chunk: dict[str, Any], label: str) -> StreamDelta:
        """Fold one chunk in; return its text delta."""
        if chunk.get("error"):
            error = chunk["error"]
            message = error.get("message") if isinstance(error, dict) else str(error)
            raise ProviderError(f"{label}: error in stream: {message}", retryable=False)
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        for key in ("id", "model"):
            if chunk.get(key) and key not in self.meta:
                self.meta[key] = chunk[key]
        delta_text = reasoning = ""
        inputs: list[ToolInput] = []
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue  # n > 1 is not part of an agent loop
            delta = choice.get("delta") or {}
            delta_text += (delta.get("content") or "") + (delta.get("refusal") or "")
            # Not OpenAI's own API: servers that show reasoning name it one of these.
            reasoning += delta.get("reasoning_content") or delta.get("reasoning") or ""
            for position, fragment in enumerate(delta.get("tool_calls") or []):
                inputs += self._add_call_fragment(fragment, position)
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
        if delta_text:
            self.text.append(delta_text)
        return StreamDelta(text=delta_text, reasoning=reasoning, tool_inputs=tuple(inputs))

    def _add_call_fragment(self, fragment: dict[str, Any], position: int) -> list[ToolInput]:
        index = fragment.get("index", position)
        call = self.calls.setdefault(index, _CallAccumulator())
        if fragment.get("id"):
            call.id = fragment["id"]
        function = fragment.get("function") or {}
        # The name comes whole in the first fragment; some servers repeat it later.
        if function.get("name") and not call.name:
            call.name = function["name"]
        if function.get("arguments"):
            call.arguments.append(function["arguments"])
        return self._tool_input(call, index, str(function.get("arguments") or ""))

    def _tool_input(self, call: _CallAccumulator, index: int, piece: str) -> list[ToolInput]:
        """The call's start once its name is known (with what came before it), then each
        piece of its arguments as it comes."""
        call_id = call.id or fallback_call_id(self.step, index)
        if call.started:
            return [ToolInputDelta(call_id, piece)] if piece else []
        if not call.name:
            return []
        call.started = True
        so_far = "".join(call.arguments)
        start = ToolInputStart(call_id, call.name)
        return [start, ToolInputDelta(call_id, so_far)] if so_far else [start]

    def response(self) -> ModelResponse:
        calls = [
            ProviderToolCall(
                id=acc.id or fallback_call_id(self.step, index),
                name=acc.name,
                arguments="".join(acc.arguments),
            )
            for index, acc in sorted(self.calls.items())
        ]
        return ModelResponse(
            text="".join(self.text),
            tool_calls=calls,
            finish_reason=to_finish_reason(self.finish_reason, bool(calls)),
            usage=to_usage(self.usage),
            provider_metadata={"openai": self.meta} if self.meta else {},
        )


def parse_completion(data: dict[str, Any], step: int, label: str) -> ModelResponse:
    """A non-streamed answer is one big chunk whose `message` plays the `delta`."""
    state = StreamState(step=step)
    choices = data.get("choices") or []
    if not choices and not data.get("error"):
        raise ProviderError(f"{label}: the answer has no choices", retryable=True)
    chunk = {
        **data,
        "choices": [
            {
                "index": c.get("index", 0),
                "delta": c.get("message") or {},
                "finish_reason": c.get("finish_reason"),
            }
            for c in choices
        ],
    }
    state.add(chunk, label)
    return state.response()


@dataclass
class _Fold:
    state: StreamState
    done: bool = False

    @property
    def ended(self) -> bool:
        return self.done

    def feed(self, data: dict[str, Any], event: SSEEvent, label: str) -> StreamDelta:
        if event.data.strip() == "[DONE]":
            self.done = True
            return NO_DELTA
        return self.state.add(data, label)

    def result(self, label: str) -> ModelResponse:
        if not self.done and self.state.finish_reason is None:
            # Cut off mid-answer: the calls' arguments may be truncated.
            raise ProviderError(f"{label}: the stream ended before [DONE]", retryable=True)
        return self.state.response()


class OpenAIChatWire(BearerAuthWire):
    def path(self, request: ModelRequest, stream: bool) -> str:
        return "chat/completions"

    def body(self, request: ModelRequest, stream: bool) -> dict[str, Any]:
        ref = request.model
        body: dict[str, Any] = {
            "model": ref.name,
            "messages": to_messages(
                request.system, request.messages, MediaLimits.from_options(ref.options)
            ),
            **cache_key_field(request),
        }
        if request.output_schema is not None:
            body["response_format"] = to_response_format(request.output_schema)
        finish_body(body, request, stream, to_tools, to_tool_choice)
        if stream:
            # After the passthrough options: the fold needs the final usage chunk.
            body["stream_options"] = {"include_usage": True}
        return body

    def fold(self, request: ModelRequest) -> _Fold:
        return _Fold(StreamState(step=request.step))

    def parse(self, data: dict[str, Any], request: ModelRequest, label: str) -> ModelResponse:
        return parse_completion(data, request.step, label)
