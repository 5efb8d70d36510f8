"""Helpers every wire format uses when it renders the neutral history."""

from __future__ import annotations

import json
from collections.abc import Callable, Collection
from typing import Any

from agentq.orchestrator.core.errors import ProviderError
from agentq.orchestrator.core.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolMessage,
    UserMessage,
)
from agentq.orchestrator.policy.caching import cache_policy, prompt_cache_key
from agentq.orchestrator.spec.run import ToolChoice
from agentq.workers.models.base import ModelRequest, OfferedTool

# Model options that steer agentq rather than the API; the rest go into request bodies.
AGENTQ_OPTIONS = frozenset(
    {"stream", "tool_mode", "rate_limit", "repair", "headers", "media", "cache"}
)


def passthrough_options(options: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in options.items() if k not in AGENTQ_OPTIONS}


def cache_key_field(request: ModelRequest) -> dict[str, str]:
    """`prompt_cache_key` for the OpenAI formats, when caching is on and a key applies."""
    key = prompt_cache_key(cache_policy(request.model.options), request.cache_scope)
    return {"prompt_cache_key": key} if key is not None else {}


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


def alternating_turns(
    messages: list[Message],
    *,
    items_key: str,
    assistant_role: str,
    user: Callable[[UserMessage], list[dict[str, Any]]],
    assistant: Callable[[AssistantMessage], list[dict[str, Any]]],
    tool: Callable[[ToolMessage], list[dict[str, Any]]],
) -> tuple[list[str], list[dict[str, Any]]]:
    """(system texts, turns) for the APIs that take the system prompt apart and want user
    and assistant turns to alternate (Anthropic Messages, Gemini). Each turn is
    `{"role": …, items_key: [...]}`; consecutive turns of one role are merged, so tool
    results and a following user message form one user turn, as these APIs expect."""
    system: list[str] = []
    turns: list[dict[str, Any]] = []

    def append(role: str, items: list[dict[str, Any]]) -> None:
        if not items:
            return
        if turns and turns[-1]["role"] == role:
            turns[-1][items_key].extend(items)
        else:
            turns.append({"role": role, items_key: items})

    for message in messages:
        if isinstance(message, SystemMessage):
            system.append(message.content)
        elif isinstance(message, UserMessage):
            append("user", user(message))
        elif isinstance(message, AssistantMessage):
            append(assistant_role, assistant(message))
        elif isinstance(message, ToolMessage):
            append("user", tool(message))
    return system, turns


def unknown_server_tool(label: str, api: str, name: str, known: Collection[str]) -> ProviderError:
    """A provider-executed tool this API does not run: final, the spec must change."""
    return ProviderError(
        f"{label}: {api} has no provider-executed tool {name!r} "
        f"(known: {', '.join(sorted(known))})",
        retryable=False,
    )


def finish_body(
    body: dict[str, Any],
    request: ModelRequest,
    stream: bool,
    render_tools: Callable[[list[OfferedTool], str], list[dict[str, Any]]],
    render_choice: Callable[[ToolChoice], str | dict[str, Any]],
) -> dict[str, Any]:
    """What the `tools`/`tool_choice` APIs (Anthropic Messages, Chat Completions,
    Responses) add after the conversation: the offered tools and the choice among them
    (only with tools: a choice without tools is rejected), the model options agentq does
    not consume, and the stream flag."""
    ref = request.model
    if request.tools:
        body["tools"] = render_tools(request.tools, ref.label)
        body["tool_choice"] = render_choice(request.tool_choice)
    body.update(passthrough_options(ref.options))
    if stream:
        body["stream"] = True
    return body
