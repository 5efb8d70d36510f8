"""OpenAI Responses API (`provider: "openai-responses"`).

Tool calls are `function_call` items and results `function_call_output` items,
joined by `call_id`. Reasoning items must go back to the API with the calls they
preceded, so each step's reasoning items travel in `provider_metadata` and are
replayed before that step's calls. The request is stateless (no
`previous_response_id`) so any worker can send any step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentq.orchestrator.core.errors import ProviderError
from agentq.orchestrator.core.media import Media, MediaLimits, tool_content
from agentq.orchestrator.core.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    TextPart,
    ToolMessage,
    ToolResultPart,
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
    ToolInputDelta,
    ToolInputStart,
)
from agentq.workers.models.history import (
    arguments_text,
    assistant_metadata,
    cache_key_field,
    finish_body,
    unknown_server_tool,
)
from agentq.workers.models.sse import SSEEvent

KEY = "openai-responses"
SERVER_TOOLS = {"web_search": "web_search", "code_interpreter": "code_interpreter"}
INCOMPLETE_REASONS: dict[str, FinishReason] = {
    "max_output_tokens": "length",
    "content_filter": "content-filter",
}
TERMINAL_EVENTS = frozenset({"response.completed", "response.incomplete", "response.failed"})


def user_item(message: UserMessage) -> dict[str, Any]:
    if isinstance(message.content, str):
        return {"role": "user", "content": message.content}
    content: list[dict[str, Any]] = []
    for part in message.content:
        if isinstance(part, TextPart):
            content.append({"type": "input_text", "text": part.text})
        elif part.media_type.startswith("image/"):
            url = f"data:{part.media_type};base64,{part.data}"
            content.append({"type": "input_image", "image_url": url})
        else:
            data = f"data:{part.media_type};base64,{part.data}"
            content.append({"type": "input_file", "filename": "attachment", "file_data": data})
    return {"role": "user", "content": content}


def assistant_items(message: AssistantMessage) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = list(assistant_metadata(message, KEY).get("reasoning", []))
    text = message.text()
    if text:
        items.append({"role": "assistant", "content": text})
    for part in message.tool_calls():
        if part.provider_executed:
            continue  # executed and answered inside the provider; its text already follows
        items.append(
            {
                "type": "function_call",
                "call_id": part.tool_call_id,
                "name": part.tool_name,
                "arguments": arguments_text(part.input),
            }
        )
    return items


def media_item(media: Media) -> dict[str, Any]:
    url = media.data_url
    if media.is_image:
        return {"type": "input_image", "image_url": url}
    if media.media_type == "application/pdf":
        return {"type": "input_file", "filename": media.ref, "file_data": url}
    return {"type": "input_text", "text": media.describe()}


def function_output(part: ToolResultPart, media: MediaLimits | None) -> str | list[dict[str, Any]]:
    """A string, or an array of input_text / input_image items when the tool returned media."""
    items = tool_content(part.for_model, part.tool_call_id, media)
    if all(isinstance(i, str) for i in items):
        return "\n".join(str(i) for i in items)
    return [
        media_item(i) if isinstance(i, Media) else {"type": "input_text", "text": i} for i in items
    ]


def to_input(messages: list[Message], media: MediaLimits | None = None) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, SystemMessage):
            items.append({"role": "system", "content": message.content})
        elif isinstance(message, UserMessage):
            items.append(user_item(message))
        elif isinstance(message, AssistantMessage):
            items.extend(assistant_items(message))
        elif isinstance(message, ToolMessage):
            items.extend(
                {
                    "type": "function_call_output",
                    "call_id": part.tool_call_id,
                    "output": function_output(part, media),
                }
                for part in message.content
            )
    return items


def to_tools(tools: list[OfferedTool], label: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for tool in tools:
        if not tool.provider_executed:
            out.append(
                {
                    "type": "function",
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.input_schema,
                    "strict": False,
                }
            )
        elif tool.name in SERVER_TOOLS:
            out.append({"type": SERVER_TOOLS[tool.name], **tool.options})
        else:
            raise unknown_server_tool(label, "the Responses API", tool.name, SERVER_TOOLS)
    return out


def to_tool_choice(choice: ToolChoice) -> str | dict[str, Any]:
    if isinstance(choice, ToolChoiceTool):
        return {"type": "function", "name": choice.tool}
    return choice


def to_text_format(schema: dict[str, Any]) -> dict[str, Any]:
    """Structured output's native mode: Responses takes the format flat under `text`
    (not Chat Completions' `response_format.json_schema`)."""
    return {"type": "json_schema", "name": OUTPUT_TOOL, "schema": schema}


def to_usage(raw: dict[str, Any] | None) -> Usage:
    if not raw:
        return Usage()
    inp = int(raw.get("input_tokens") or 0)
    out = int(raw.get("output_tokens") or 0)
    return Usage(
        input_tokens=inp,
        output_tokens=out,
        total_tokens=int(raw.get("total_tokens") or inp + out),
        cached_input_tokens=int((raw.get("input_tokens_details") or {}).get("cached_tokens") or 0),
        reasoning_tokens=int((raw.get("output_tokens_details") or {}).get("reasoning_tokens") or 0),
    )


def to_finish_reason(response: dict[str, Any], has_calls: bool) -> FinishReason:
    status = response.get("status")
    if status == "incomplete":
        reason = (response.get("incomplete_details") or {}).get("reason")
        return INCOMPLETE_REASONS.get(str(reason), "other")
    if has_calls:
        return "tool-calls"
    return "stop" if status in ("completed", None) else "other"


def failure(response: dict[str, Any], label: str) -> ProviderError:
    error = response.get("error") or {}
    code = str(error.get("code") or "failed")
    return ProviderError(
        f"{label}: {code}: {error.get('message', 'the response failed')}",
        retryable=code in ("server_error", "rate_limit_exceeded"),
    )


def parse_response(data: dict[str, Any], label: str) -> ModelResponse:
    if data.get("status") == "failed":
        raise failure(data, label)
    text: list[str] = []
    calls: list[ProviderToolCall] = []
    reasoning: list[dict[str, Any]] = []
    for item in data.get("output") or []:
        kind = item.get("type")
        if kind == "message":
            for part in item.get("content") or []:
                text.append(part.get("text") or part.get("refusal") or "")
        elif kind == "function_call":
            calls.append(
                ProviderToolCall(
                    id=item.get("call_id"),
                    name=str(item.get("name", "")),
                    arguments=item.get("arguments", ""),
                )
            )
        elif kind == "reasoning":
            reasoning.append(item)
        elif isinstance(kind, str) and kind.endswith("_call"):
            calls.append(
                ProviderToolCall(
                    id=item.get("id"),
                    name=kind.removesuffix("_call"),
                    arguments=item.get("action") or {},
                    provider_executed=True,
                    provider_result={"status": item.get("status")},
                )
            )
    metadata: dict[str, Any] = {k: data[k] for k in ("id", "model") if data.get(k)}
    if reasoning:
        metadata["reasoning"] = reasoning
    local_calls = any(not c.provider_executed for c in calls)
    return ModelResponse(
        text="".join(text),
        tool_calls=calls,
        finish_reason=to_finish_reason(data, local_calls),
        usage=to_usage(data.get("usage")),
        provider_metadata={KEY: metadata} if metadata else {},
    )


@dataclass
class StreamState:
    """Collects finished output items; the terminal event carries the response itself."""

    items: dict[int, dict[str, Any]] = field(default_factory=dict)
    arguments: dict[int, list[str]] = field(default_factory=dict)
    final: dict[str, Any] | None = None

    def add(self, event: dict[str, Any], label: str) -> StreamDelta:
        kind = event.get("type")
        index = int(event.get("output_index", 0))
        if kind == "response.output_text.delta":
            return StreamDelta(text=str(event.get("delta", "")))
        if kind == "response.reasoning_summary_text.delta":
            return StreamDelta(reasoning=str(event.get("delta", "")))
        if kind == "response.output_item.added":
            item = self.items.setdefault(index, dict(event.get("item") or {}))
            if item.get("type") == "function_call" and item.get("call_id"):
                start = ToolInputStart(item["call_id"], str(item.get("name", "")))
                return StreamDelta(tool_inputs=(start,))
        elif kind == "response.function_call_arguments.delta":
            piece = str(event.get("delta", ""))
            self.arguments.setdefault(index, []).append(piece)
            call_id = self.items.get(index, {}).get("call_id")
            if call_id and piece:
                return StreamDelta(tool_inputs=(ToolInputDelta(call_id, piece),))
        elif kind == "response.output_item.done":
            self.items[index] = dict(event.get("item") or {})
            self.arguments.pop(index, None)
        elif kind in TERMINAL_EVENTS:
            self.final = dict(event.get("response") or {})
        elif kind == "error":
            raise ProviderError(
                f"{label}: {event.get('code') or 'error'}: {event.get('message', 'stream error')}",
                retryable=event.get("code") in ("server_error", "rate_limit_exceeded", None),
            )
        return NO_DELTA

    def response(self, label: str) -> ModelResponse:
        if self.final is None:
            raise ProviderError(
                f"{label}: the stream ended before the response did", retryable=True
            )
        if not self.final.get("output"):
            # The terminal event may omit the output; rebuild it from the item events.
            for index, parts in self.arguments.items():
                self.items.setdefault(index, {})["arguments"] = "".join(parts)
            self.final["output"] = [item for _, item in sorted(self.items.items())]
        return parse_response(self.final, label)


@dataclass
class _Fold:
    state: StreamState = field(default_factory=StreamState)

    @property
    def ended(self) -> bool:
        return self.state.final is not None

    def feed(self, data: dict[str, Any], event: SSEEvent, label: str) -> StreamDelta:
        return self.state.add(data, label)

    def result(self, label: str) -> ModelResponse:
        return self.state.response(label)


class OpenAIResponsesWire(BearerAuthWire):
    def path(self, request: ModelRequest, stream: bool) -> str:
        return "responses"

    def body(self, request: ModelRequest, stream: bool) -> dict[str, Any]:
        ref = request.model
        media = MediaLimits.from_options(ref.options)
        body: dict[str, Any] = {
            "model": ref.name,
            "input": to_input(request.messages, media),
            **cache_key_field(request),
        }
        if request.system:
            body["instructions"] = request.system
        if request.output_schema is not None:
            body["text"] = {"format": to_text_format(request.output_schema)}
        return finish_body(body, request, stream, to_tools, to_tool_choice)

    def fold(self, request: ModelRequest) -> _Fold:
        return _Fold()

    def parse(self, data: dict[str, Any], request: ModelRequest, label: str) -> ModelResponse:
        return parse_response(data, label)
