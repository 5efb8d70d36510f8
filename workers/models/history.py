"""Helpers every wire format uses when it renders the neutral history."""

from __future__ import annotations

import json
from typing import Any

from agentq.orchestrator.core.messages import AssistantMessage

# Model options that steer agentq rather than the API; the rest go into request bodies.
AGENTQ_OPTIONS = frozenset({"stream", "tool_mode", "rate_limit", "repair", "headers", "media"})


def passthrough_options(options: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in options.items() if k not in AGENTQ_OPTIONS}


def extra_headers(options: dict[str, Any]) -> dict[str, str]:
    headers = options.get("headers") or {}
    return {str(k): str(v) for k, v in headers.items()}


def arguments_text(value: Any) -> str:
    """A tool call's input as the JSON text a wire format wants. A malformed call keeps its
    raw text (the loop stores it as a string) so the model sees what it actually sent."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def arguments_object(value: Any) -> dict[str, Any]:
    """A tool call's input for wire formats that want an object (Anthropic, Gemini)."""
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return {"_raw_arguments": value}
        return parsed if isinstance(parsed, dict) else {"_value": parsed}
    return {} if value is None else {"_value": value}


def assistant_metadata(message: AssistantMessage, provider_key: str) -> dict[str, Any]:
    """What a provider stored in `ModelResponse.provider_metadata[provider_key]` for this
    step, if the loop carried it onto the assistant message (field `provider_metadata`)."""
    metadata = getattr(message, "provider_metadata", None)
    if not isinstance(metadata, dict):
        return {}
    mine = metadata.get(provider_key)
    return mine if isinstance(mine, dict) else {}
