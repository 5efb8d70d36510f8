"""What agentq's spans say, in the OpenTelemetry GenAI conventions' vocabulary.

Pure: attribute values from specs, messages and results. Content (messages,
tool arguments and results, the run's prompt and answer) is recorded only
behind the standard opt-in, OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT,
in the conventions' message-parts format and capped in size
(AGENTQ_TRACE_CONTENT_MAX_CHARS per attribute). Keys never reach a message,
so they never reach a span, content or not.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from agentq.orchestrator.core.messages import (
    AssistantMessage,
    MediaPart,
    Message,
    SystemMessage,
    TextPart,
    ToolCallPart,
    ToolMessage,
    ToolResultPart,
    UserMessage,
)

DEFAULT_CONTENT_MAX_CHARS = 16_000

# agentq's provider names -> the conventions' well-known `gen_ai.provider.name` values.
PROVIDER_NAMES = {
    "openai": "openai",
    "openai-responses": "openai",
    "anthropic": "anthropic",
    "gemini": "gcp.gemini",
    "scripted": "agentq.scripted",
}

# agentq's finish reasons -> the conventions' vocabulary.
FINISH_REASONS = {
    "stop": "stop",
    "length": "length",
    "tool-calls": "tool_call",
    "content-filter": "content_filter",
    "error": "error",
    "other": "other",
}

# `gen_ai.tool.type`: a function the application's code runs, or an extension that
# reaches an outside system for the agent (MCP servers, sandboxed code, the provider).
TOOL_TYPES = {
    "function": "function",
    "client": "function",
    "mcp": "extension",
    "code": "extension",
    "provider": "extension",
}

_CAPTURE_ON = {"true", "1", "yes", "span_only", "span_and_event"}


CAPTURE_VARIABLE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
# On POSIX, os.environ keeps the environment as bytes in `_data`, and `get` encodes the
# name and decodes the value through four Python calls (0.9 us against 0.05 us here);
# every traced step reads this opt-in four times.
_ENVIRON_BYTES: Mapping[bytes, bytes] | None = (
    getattr(os.environ, "_data", None) if os.name == "posix" else None
)
_CAPTURE_KEY = CAPTURE_VARIABLE.encode()
_CAPTURE_ON_BYTES = frozenset(value.encode() for value in _CAPTURE_ON)


def capture_content() -> bool:
    if _ENVIRON_BYTES is not None:
        raw = _ENVIRON_BYTES.get(_CAPTURE_KEY, b"")
        return raw.strip().lower() in _CAPTURE_ON_BYTES
    value = os.environ.get(CAPTURE_VARIABLE, "")
    return value.strip().lower() in _CAPTURE_ON


def content_max_chars() -> int:
    raw = os.environ.get("AGENTQ_TRACE_CONTENT_MAX_CHARS", "")
    return int(raw) if raw.isdigit() else DEFAULT_CONTENT_MAX_CHARS


def capped(text: str, max_chars: int | None = None) -> str:
    limit = content_max_chars() if max_chars is None else max_chars
    if len(text) <= limit:
        return text
    return text[:limit] + f"…[truncated {len(text) - limit} chars]"


def as_json(value: Any) -> str:
    """An attribute value: JSON, capped (a structured value cannot be cut mid-way and stay
    JSON, so a capped one is a string that says it was cut)."""
    return capped(json.dumps(value, default=str, ensure_ascii=False, separators=(",", ":")))


def provider_name(provider: str) -> str:
    return PROVIDER_NAMES.get(provider, provider)


def tool_type(kind: str) -> str:
    return TOOL_TYPES.get(kind, "extension")


# -- message parts ------------------------------------------------------------------


def _media(part: MediaPart) -> dict[str, Any]:
    # Never the bytes: a reference to the media type is enough to read a trace.
    modality = part.media_type.split("/", 1)[0]
    return {"type": "blob", "mime_type": part.media_type, "modality": modality, "content": ""}


def _part(part: Any) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "text", "content": part.text}
    if isinstance(part, MediaPart):
        return _media(part)
    if isinstance(part, ToolCallPart):
        return {
            "type": "tool_call",
            "id": part.tool_call_id,
            "name": part.tool_name,
            "arguments": part.input,
        }
    if isinstance(part, ToolResultPart):
        return {"type": "tool_call_response", "id": part.tool_call_id, "response": part.output}
    return {"type": str(getattr(part, "type", "unknown"))}


def message_parts(message: Message) -> list[dict[str, Any]]:
    """One message in the conventions' format; a tool message per tool result."""
    if isinstance(message, SystemMessage):
        return [{"role": "system", "parts": [{"type": "text", "content": message.content}]}]
    if isinstance(message, ToolMessage):
        return [{"role": "tool", "parts": [_part(p)]} for p in message.content]
    content = message.content
    parts = [{"type": "text", "content": content}] if isinstance(content, str) else content
    role = "user" if isinstance(message, UserMessage) else "assistant"
    if isinstance(message, AssistantMessage) and not isinstance(content, str):
        # Provider-executed results ride in the assistant's turn.
        return [{"role": role, "parts": [_part(p) for p in content]}]
    return [{"role": role, "parts": [p if isinstance(p, dict) else _part(p) for p in parts]}]


def input_messages(messages: Sequence[Message]) -> str:
    return as_json([m for message in messages for m in message_parts(message)])


def output_messages(text: str, calls: Sequence[ToolCallPart], finish_reason: str) -> str:
    parts: list[dict[str, Any]] = [{"type": "text", "content": text}] if text else []
    parts.extend(_part(c) for c in calls)
    return as_json(
        [
            {
                "role": "assistant",
                "parts": parts,
                "finish_reason": FINISH_REASONS.get(finish_reason, finish_reason),
            }
        ]
    )


def system_instructions(system: str) -> str:
    return as_json([{"type": "text", "content": system}])


def tool_definitions(tools: Sequence[Mapping[str, Any]]) -> str:
    return as_json(list(tools))


# -- the run's span -------------------------------------------------------------------


def _prompt(spec: Mapping[str, Any]) -> str:
    if spec.get("prompt"):
        return str(spec["prompt"])
    for message in reversed(spec.get("messages") or []):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            return "".join(p.get("text", "") for p in content or [] if isinstance(p, dict))
    return ""


_CACHE_USAGE = {
    "gen_ai.usage.cache_read.input_tokens": "u_cached",
    "gen_ai.usage.cache_creation.input_tokens": "u_cwrite",
}


def run_attributes(run_id: str, spec: Mapping[str, Any], meta: Mapping[str, str]) -> dict[str, Any]:
    """The `invoke_agent` span's attributes, from the run's spec and final meta."""
    model = spec.get("model") or {}
    if isinstance(model, str):
        provider, _, name = model.partition(":")
        model = {"provider": provider, "name": name}
    metadata = spec.get("metadata") or {}
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.provider.name": provider_name(str(model.get("provider", ""))),
        "gen_ai.request.model": str(model.get("name") or model.get("provider") or ""),
        "gen_ai.agent.name": str(metadata.get("agent_name") or "agentq"),
        "gen_ai.conversation.id": run_id,
        "gen_ai.usage.input_tokens": int(meta.get("u_in", 0) or 0),
        "gen_ai.usage.output_tokens": int(meta.get("u_out", 0) or 0),
        "agentq.run.status": meta.get("status", ""),
        "agentq.steps": int(meta.get("step", 0) or 0) + 1,
    }
    # The run's prompt-cache totals (runs/state/status.py: USAGE_FIELDS), as the steps' spans.
    for attribute, field in _CACHE_USAGE.items():
        if tokens := int(meta.get(field, 0) or 0):
            attributes[attribute] = tokens
    if metadata.get("agent_id"):
        attributes["gen_ai.agent.id"] = str(metadata["agent_id"])
    if capture_content():
        attributes["input.value"] = capped(_prompt(spec))
        attributes["output.value"] = capped(meta.get("text", ""))
        if spec.get("system"):
            attributes["gen_ai.system_instructions"] = system_instructions(str(spec["system"]))
    return attributes
