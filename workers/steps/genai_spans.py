"""The attributes of a model step's `chat` span and a call's `execute_tool` span.

Pure: built from the request, the response and the call; content only behind
the GenAI content opt-in (see `agentq.orchestrator.tracing.genai_content`).
"""

from __future__ import annotations

import functools
from typing import Any
from urllib.parse import urlsplit

from agentq.orchestrator.core.messages import ToolCallPart, ToolResultPart
from agentq.orchestrator.loop.plan import CallPlan
from agentq.orchestrator.tools import ToolDef
from agentq.orchestrator.tracing import genai_content as content
from agentq.workers.models import ModelRequest
from agentq.workers.models.base import ModelResponse

# Where each wire format sends a request unless the spec names a base_url.
_DEFAULT_HOSTS = {
    "openai": "api.openai.com",
    "openai-responses": "api.openai.com",
    "anthropic": "api.anthropic.com",
    "gemini": "generativelanguage.googleapis.com",
}

# Request settings the conventions name, from the model's options (any wire format's
# spelling of them).
_SETTINGS = {
    "temperature": "gen_ai.request.temperature",
    "top_p": "gen_ai.request.top_p",
    "top_k": "gen_ai.request.top_k",
    "max_tokens": "gen_ai.request.max_tokens",
    "max_output_tokens": "gen_ai.request.max_tokens",
    "max_completion_tokens": "gen_ai.request.max_tokens",
    "frequency_penalty": "gen_ai.request.frequency_penalty",
    "presence_penalty": "gen_ai.request.presence_penalty",
    "seed": "gen_ai.request.seed",
    "stream": "gen_ai.request.stream",
}


@functools.lru_cache(maxsize=256)
def _server(provider: str, base_url: str | None) -> tuple[tuple[str, Any], ...]:
    """`server.address`/`server.port` of where a call goes (the same few places, step
    after step)."""
    if base_url:
        parts = urlsplit(base_url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return (("server.address", parts.hostname or ""), ("server.port", port))
    host = _DEFAULT_HOSTS.get(provider)
    return (("server.address", host), ("server.port", 443)) if host else ()


def chat_attributes(
    request: ModelRequest, run_id: str, base_url: str | None = None
) -> dict[str, Any]:
    """`base_url`: where the call goes as resolved (a models file's endpoint, or the
    spec's allowed URL); without one, the provider's public host."""
    ref = request.model
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": content.provider_name(ref.provider),
        "gen_ai.request.model": ref.name,
        "gen_ai.conversation.id": run_id,
    }
    attributes.update(_server(ref.provider, base_url or ref.base_url))
    for option, value in ref.options.items():
        key = _SETTINGS.get(option)
        if key is not None and isinstance(value, bool | int | float):
            attributes[key] = value
    if content.capture_content():
        attributes["gen_ai.input.messages"] = content.input_messages(request.messages)
        if request.system:
            attributes["gen_ai.system_instructions"] = content.system_instructions(request.system)
        if request.tools:
            attributes["gen_ai.tool.definitions"] = content.tool_definitions(
                [
                    {"type": "function", "name": t.name, "description": t.description}
                    | ({"parameters": t.input_schema} if not t.provider_executed else {})
                    for t in request.tools
                ]
            )
    return attributes


def chat_result_attributes(response: ModelResponse) -> dict[str, Any]:
    usage = response.usage
    attributes: dict[str, Any] = {
        "gen_ai.usage.input_tokens": usage.input_tokens,
        "gen_ai.usage.output_tokens": usage.output_tokens,
        "gen_ai.response.finish_reasons": [
            content.FINISH_REASONS.get(response.finish_reason, response.finish_reason)
        ],
    }
    if usage.cached_input_tokens:
        attributes["gen_ai.usage.cache_read.input_tokens"] = usage.cached_input_tokens
    if usage.cache_write_tokens:
        attributes["gen_ai.usage.cache_creation.input_tokens"] = usage.cache_write_tokens
    if usage.reasoning_tokens:
        attributes["gen_ai.usage.reasoning.output_tokens"] = usage.reasoning_tokens
    # The wire formats keep the response's id and model under their own key.
    for meta in response.provider_metadata.values():
        if isinstance(meta, dict):
            if isinstance(meta.get("id"), str):
                attributes["gen_ai.response.id"] = meta["id"]
            if isinstance(meta.get("model"), str):
                attributes["gen_ai.response.model"] = meta["model"]
    if content.capture_content():
        calls = [
            ToolCallPart(tool_call_id=c.id or "", tool_name=c.name, input=c.arguments)
            for c in response.tool_calls
        ]
        attributes["gen_ai.output.messages"] = content.output_messages(
            response.text, calls, response.finish_reason
        )
    return attributes


def tool_attributes(call: CallPlan, tool: ToolDef | None, run_id: str) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": call.name,
        "gen_ai.tool.call.id": call.id,
        "gen_ai.tool.type": content.tool_type(tool.kind if tool else "function"),
        "gen_ai.conversation.id": run_id,
    }
    if tool is not None and tool.description:
        attributes["gen_ai.tool.description"] = content.capped(tool.description, 1000)
    if content.capture_content():
        attributes["gen_ai.tool.call.arguments"] = content.as_json(call.input)
    return attributes


def tool_result_attributes(result: ToolResultPart) -> dict[str, Any]:
    if not content.capture_content():
        return {}
    return {"gen_ai.tool.call.result": content.as_json(result.output)}
