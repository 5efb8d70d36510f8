"""Google Gemini API (`provider: "gemini"`): generateContent / streamGenerateContent.

Calls are `functionCall` parts and results `functionResponse` parts, matched by
function name: Gemini gives calls no ids, so ids are synthesized from the step
and the call's position, stable across a retry of the same step. Thought
signatures that accompany calls must be sent back with them; they travel in
`provider_metadata`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from agentq.orchestrator.core.errors import ProviderError
from agentq.orchestrator.core.media import Media, MediaLimits, has_media, text_and_media
from agentq.orchestrator.core.messages import (
    AssistantMessage,
    Message,
    TextPart,
    ToolCallPart,
    ToolMessage,
    ToolResultPart,
    Usage,
    UserMessage,
)
from agentq.orchestrator.core.model_io import FinishReason, ModelResponse, ProviderToolCall
from agentq.orchestrator.spec.run import ToolChoice, ToolChoiceTool
from agentq.workers.models.base import ModelRequest, OfferedTool
from agentq.workers.models.driver import StreamDelta, ToolInput, ToolInputDelta, ToolInputStart
from agentq.workers.models.history import (
    alternating_turns,
    arguments_object,
    assistant_metadata,
    passthrough_options,
    unknown_server_tool,
)
from agentq.workers.models.sse import SSEEvent

KEY = "gemini"
FILTERED = {"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY"}
# JSON Schema keywords the Gemini schema subset rejects.
UNSUPPORTED_SCHEMA_KEYS = frozenset({"$schema", "additionalProperties", "$id"})
# The media Gemini reads inline (images, audio, video, PDF); others are only described.
INLINE_MEDIA = ("image/", "audio/", "video/", "application/pdf")
SERVER_TOOLS = {"web_search": "google_search", "google_search": "google_search"}


def gemini_schema(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: gemini_schema(v) for k, v in schema.items() if k not in UNSUPPORTED_SCHEMA_KEYS}
    if isinstance(schema, list):
        return [gemini_schema(v) for v in schema]
    return schema


def user_parts(message: UserMessage) -> list[dict[str, Any]]:
    if isinstance(message.content, str):
        return [{"text": message.content}]
    return [
        {"text": p.text}
        if isinstance(p, TextPart)
        else {"inlineData": {"mimeType": p.media_type, "data": p.data}}
        for p in message.content
    ]


def model_parts(message: AssistantMessage) -> list[dict[str, Any]]:
    signatures: dict[str, str] = assistant_metadata(message, KEY).get("signatures", {})
    content = message.content
    parts: list[dict[str, Any]] = []
    for part in [TextPart(text=content)] if isinstance(content, str) else content:
        if isinstance(part, TextPart) and part.text:
            parts.append({"text": part.text})
        elif isinstance(part, ToolCallPart) and not part.provider_executed:
            call: dict[str, Any] = {
                "functionCall": {"name": part.tool_name, "args": arguments_object(part.input)}
            }
            if part.tool_call_id in signatures:
                call["thoughtSignature"] = signatures[part.tool_call_id]
            parts.append(call)
    return parts


def to_contents(
    messages: list[Message], media: MediaLimits | None = None
) -> tuple[list[str], list[dict[str, Any]]]:
    """(system texts, contents), user and model turns alternating."""
    return alternating_turns(
        messages,
        items_key="parts",
        assistant_role="model",
        user=user_parts,
        assistant=model_parts,
        tool=lambda message: tool_turn(message, media),
    )


def tool_turn(message: ToolMessage, media: MediaLimits | None) -> list[dict[str, Any]]:
    """A functionResponse part per result, then an inlineData part per medium they returned:
    functionResponse takes JSON only, and the turn that carries it takes media beside it.
    Each medium is described in its result (with its reference), in the order sent."""
    responses: list[dict[str, Any]] = []
    inline: list[dict[str, Any]] = []
    for part in message.content:
        shown: list[Media] = []
        output = part.for_model
        if has_media(output):
            output, shown = text_and_media(output, part.tool_call_id, _inline, media)
        responses.append(function_response(part, output))
        inline += [{"inlineData": {"mimeType": m.media_type, "data": m.data}} for m in shown]
    return responses + inline


def _inline(media: Media) -> bool:
    return media.media_type.startswith(INLINE_MEDIA)


def function_response(part: ToolResultPart, output: Any) -> dict[str, Any]:
    # Gemini matches a response to its call by function name (calls have no ids).
    response = {"error": output} if part.is_error else {"result": output}
    return {"functionResponse": {"name": part.tool_name, "response": response}}


def to_tools(tools: list[OfferedTool], label: str) -> list[dict[str, Any]]:
    declarations: list[dict[str, Any]] = []
    out: list[dict[str, Any]] = []
    for tool in tools:
        if not tool.provider_executed:
            declaration: dict[str, Any] = {"name": tool.name, "description": tool.description}
            if tool.input_schema.get("properties"):
                declaration["parameters"] = gemini_schema(tool.input_schema)
            declarations.append(declaration)
        elif tool.name in SERVER_TOOLS:
            out.append({SERVER_TOOLS[tool.name]: dict(tool.options)})
        else:
            raise unknown_server_tool(label, "Gemini", tool.name, SERVER_TOOLS)
    if declarations:
        out.insert(0, {"functionDeclarations": declarations})
    return out


def to_tool_config(choice: ToolChoice) -> dict[str, Any]:
    if isinstance(choice, ToolChoiceTool):
        config: dict[str, Any] = {"mode": "ANY", "allowedFunctionNames": [choice.tool]}
    else:
        config = {"mode": {"auto": "AUTO", "required": "ANY", "none": "NONE"}[choice]}
    return {"functionCallingConfig": config}


def to_output_config(schema: dict[str, Any]) -> dict[str, Any]:
    """Structured output's native mode: `responseJsonSchema` takes JSON Schema as it is
    (`responseSchema` only an OpenAPI subset, and not beside it); it needs the JSON MIME type."""
    return {"responseMimeType": "application/json", "responseJsonSchema": schema}


def to_usage(raw: dict[str, Any] | None) -> Usage:
    if not raw:
        return Usage()
    prompt = int(raw.get("promptTokenCount") or 0)
    thoughts = int(raw.get("thoughtsTokenCount") or 0)
    output = int(raw.get("candidatesTokenCount") or 0) + thoughts
    return Usage(
        input_tokens=prompt,
        output_tokens=output,
        total_tokens=int(raw.get("totalTokenCount") or prompt + output),
        cached_input_tokens=int(raw.get("cachedContentTokenCount") or 0),
        reasoning_tokens=thoughts,
    )


def to_finish_reason(raw: str | None, has_calls: bool) -> FinishReason:
    if has_calls and raw in (None, "STOP"):
        return "tool-calls"
    if raw == "STOP":
        return "stop"
    if raw == "MAX_TOKENS":
        return "length"
    if raw in FILTERED:
        return "content-filter"
    if raw == "MALFUNCTIONED_FUNCTION_CALL":
        return "error"
    return "other"


@dataclass
class StreamState:
    """Each chunk is a GenerateContentResponse; parts accumulate, the last usage wins."""

    step: int
    text: list[str] = field(default_factory=list)
    calls: list[ProviderToolCall] = field(default_factory=list)
    signatures: dict[str, str] = field(default_factory=dict)
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    blocked: str | None = None
    response_id: str | None = None
    model_version: str | None = None

    def add(self, chunk: dict[str, Any], label: str) -> StreamDelta:
        if chunk.get("error"):
            error = chunk["error"]
            raise ProviderError(
                f"{label}: {error.get('status', 'error')}: {error.get('message', '')}",
                retryable=error.get("status") in ("UNAVAILABLE", "INTERNAL", "RESOURCE_EXHAUSTED"),
            )
        self.usage = chunk.get("usageMetadata") or self.usage
        self.response_id = chunk.get("responseId") or self.response_id
        self.model_version = chunk.get("modelVersion") or self.model_version
        self.blocked = (chunk.get("promptFeedback") or {}).get("blockReason") or self.blocked
        delta: list[str] = []
        thoughts: list[str] = []
        inputs: list[ToolInput] = []
        candidates = chunk.get("candidates") or []
        for candidate in candidates[:1]:
            for part in (candidate.get("content") or {}).get("parts") or []:
                if "functionCall" in part:
                    inputs += self._call(part)
                elif part.get("thought"):
                    thoughts.append(str(part.get("text") or ""))  # a thought summary
                else:
                    delta.append(str(part.get("text") or ""))
            self.finish_reason = candidate.get("finishReason") or self.finish_reason
        text = "".join(delta)
        if text:
            self.text.append(text)
        return StreamDelta(text=text, reasoning="".join(thoughts), tool_inputs=tuple(inputs))

    def _call(self, part: dict[str, Any]) -> list[ToolInput]:
        """A functionCall part comes whole: its start and its arguments in one piece."""
        call = part["functionCall"]
        call_id = str(call.get("id") or f"call_{self.step}_{len(self.calls)}")
        name, arguments = str(call.get("name", "")), json.dumps(call.get("args") or {})
        self.calls.append(ProviderToolCall(id=call_id, name=name, arguments=arguments))
        if part.get("thoughtSignature"):
            self.signatures[call_id] = part["thoughtSignature"]
        return [ToolInputStart(call_id, name), ToolInputDelta(call_id, arguments)]

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None or self.blocked is not None

    def response(self) -> ModelResponse:
        metadata: dict[str, Any] = {}
        if self.signatures:
            metadata["signatures"] = self.signatures
        # Under the keys the other wire formats use: the chat span's response id and model.
        if self.response_id:
            metadata["id"] = self.response_id
        if self.model_version:
            metadata["model"] = self.model_version
        finish = to_finish_reason(self.finish_reason, bool(self.calls))
        if self.blocked and not self.finish_reason:
            finish = "content-filter"
        return ModelResponse(
            text="".join(self.text),
            tool_calls=self.calls,
            finish_reason=finish,
            usage=to_usage(self.usage),
            provider_metadata={KEY: metadata} if metadata else {},
        )


@dataclass
class _Fold:
    state: StreamState

    @property
    def ended(self) -> bool:
        return False  # Gemini has no end marker: the stream simply ends

    def feed(self, data: dict[str, Any], event: SSEEvent, label: str) -> StreamDelta:
        return self.state.add(data, label)

    def result(self, label: str) -> ModelResponse:
        if not self.state.finished:
            raise ProviderError(f"{label}: the stream ended without a finishReason", retryable=True)
        return self.state.response()


def _prefix(request: ModelRequest, system: list[str]) -> dict[str, Any]:
    """The request's fields before its contents: the same on every step of a run (and of
    every run of one agent), so the API's implicit cache reads them back."""
    if request.system:
        system = [request.system, *system]
    prefix: dict[str, Any] = {}
    if system:
        prefix["systemInstruction"] = {"parts": [{"text": "\n\n".join(system)}]}
    if request.tools:
        prefix["tools"] = to_tools(request.tools, request.model.label)
        if any(not t.provider_executed for t in request.tools):
            prefix["toolConfig"] = to_tool_config(request.tool_choice)
    return prefix


class GeminiWire:
    def path(self, request: ModelRequest, stream: bool) -> str:
        method = "streamGenerateContent?alt=sse" if stream else "generateContent"
        return f"models/{quote(request.model.name, safe='')}:{method}"

    def auth_headers(self, key: str | None) -> dict[str, str]:
        # The key goes in a header, never in the URL, so that no error or log shows it.
        return {"x-goog-api-key": key} if key else {}

    def body(self, request: ModelRequest, stream: bool) -> dict[str, Any]:
        ref = request.model
        system, contents = to_contents(request.messages, MediaLimits.from_options(ref.options))
        body: dict[str, Any] = {"contents": contents}
        if request.cached_content is None:
            body.update(_prefix(request, system))
        else:
            # The API refuses a request that names a cached content and sets any of the
            # fields it holds (they are the cache's: gemini_cache/).
            body["cachedContent"] = request.cached_content
        body.update(passthrough_options(ref.options))
        if request.output_schema is not None:
            # Merged into the sampling options' generationConfig, not in their place.
            config = body.setdefault("generationConfig", {})
            config.update(to_output_config(request.output_schema))
        return body

    def cached_prefix(self, request: ModelRequest) -> dict[str, Any]:
        """What a cached content for `request` holds: its system instruction, tools and
        tool config, exactly as `body` sends them without one."""
        system, _ = to_contents(request.messages, MediaLimits.from_options(request.model.options))
        return _prefix(request, system)

    def fold(self, request: ModelRequest) -> _Fold:
        return _Fold(StreamState(step=request.step))

    def parse(self, data: dict[str, Any], request: ModelRequest, label: str) -> ModelResponse:
        state = StreamState(step=request.step)
        state.add(data, label)
        return state.response()
