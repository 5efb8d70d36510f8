"""Model providers, one module per wire format, chosen by `ModelRef.provider`."""

from __future__ import annotations

from collections.abc import Callable

from agentq.orchestrator.errors import SpecError
from agentq.orchestrator.spec import ModelRef
from agentq.workers.providers.anthropic import AnthropicProvider
from agentq.workers.providers.base import (
    DeltaSink,
    ModelRequest,
    ModelResponse,
    Provider,
    ProviderContext,
    ProviderToolCall,
    ToolDefinition,
)
from agentq.workers.providers.gemini import GeminiProvider
from agentq.workers.providers.openai_chat import OpenAIChatProvider
from agentq.workers.providers.openai_responses import OpenAIResponsesProvider
from agentq.workers.providers.prompt_tools import PromptToolsProvider
from agentq.workers.providers.scripted import ScriptedProvider

ProviderFactory = Callable[[ModelRef, ProviderContext], Provider]

_FACTORIES: dict[str, ProviderFactory] = {
    "scripted": lambda ref, ctx: ScriptedProvider(),
    "openai": OpenAIChatProvider,
    "anthropic": AnthropicProvider,
    "openai-responses": OpenAIResponsesProvider,
    "gemini": GeminiProvider,
}


def register_provider(name: str, factory: ProviderFactory) -> None:
    _FACTORIES[name] = factory


def known_providers() -> list[str]:
    return sorted(_FACTORIES)


def make_provider(ref: ModelRef, ctx: ProviderContext) -> Provider:
    try:
        factory = _FACTORIES[ref.provider]
    except KeyError:
        raise SpecError(
            f"model.provider: unknown provider {ref.provider!r} "
            f"(known: {', '.join(known_providers())})"
        ) from None
    provider = factory(ref, ctx)
    if ref.options.get("tool_mode") == "prompt":
        provider = PromptToolsProvider(provider)
    return provider


__all__ = [
    "DeltaSink",
    "ModelRequest",
    "ModelResponse",
    "Provider",
    "ProviderContext",
    "ProviderToolCall",
    "ToolDefinition",
    "known_providers",
    "make_provider",
    "register_provider",
]
