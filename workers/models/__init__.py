"""Model providers: the provider table's wire formats, and the providers a worker adds.

`make_provider(ref, ctx)` resolves where `ref` goes (the deployment's models
file and allow-lists, orchestrator/policy/endpoints.py) and builds the provider for
its wire format. The built-in formats are one `WireFormat` each on the shared
HTTP driver (driver.py); the scripted one calls no model.

A worker adds a provider with `register_provider`: a new name on a built-in
wire format (a `ProviderInfo` row: another OpenAI-compatible host, its key
variable), or a name with its own factory. The worker announces what it added,
so that specs submitted anywhere can name it.
"""

from __future__ import annotations

from collections.abc import Callable

from agentq.orchestrator.core.errors import SpecError
from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.policy.endpoints import EndpointPolicy
from agentq.orchestrator.policy.model_ref import ModelRef
from agentq.orchestrator.policy.providers import BUILTIN_PROVIDERS, ProviderInfo, provider_table
from agentq.orchestrator.policy.tool_modes import tool_mode
from agentq.workers.models.anthropic import AnthropicWire
from agentq.workers.models.base import (
    DeltaSink,
    ModelRequest,
    ModelResponse,
    OfferedTool,
    Provider,
    ProviderContext,
    ProviderToolCall,
    ToolDefinition,
)
from agentq.workers.models.driver import HttpProvider, WireFormat
from agentq.workers.models.gemini import GeminiWire
from agentq.workers.models.openai_chat import OpenAIChatWire
from agentq.workers.models.openai_responses import OpenAIResponsesWire
from agentq.workers.models.prompt_tools import XML, CallFormat, PromptToolsProvider
from agentq.workers.models.scripted import ScriptedProvider
from agentq.workers.models.text_tools import TEXT

ProviderFactory = Callable[[ModelRef, ProviderContext], Provider]


def _http(wire: WireFormat) -> ProviderFactory:
    return lambda ref, ctx: HttpProvider(wire, ref, ctx)


# Wire format -> factory.
_FACTORIES: dict[str, ProviderFactory] = {
    "scripted": lambda ref, ctx: ScriptedProvider(),
    "openai": _http(OpenAIChatWire()),
    "anthropic": _http(AnthropicWire()),
    "openai-responses": _http(OpenAIResponsesWire()),
    "gemini": _http(GeminiWire()),
}
# The tool modes taught in the prompt (orchestrator/policy/tool_modes.py), by their format.
PROMPT_FORMATS: dict[str, CallFormat] = {"prompt": XML, "text": TEXT}
# Providers this process added to the table.
_REGISTERED: dict[str, ProviderInfo] = {}


def register_provider(
    provider: str | ProviderInfo, factory: ProviderFactory | None = None
) -> ProviderInfo:
    """Add a provider. `register_provider("acme", factory)`: a provider with its own code
    (its wire format is its name); `register_provider(ProviderInfo(name="groq",
    wire="openai", default_base_url=..., key_env="GROQ_API_KEY"))`: a row on a wire
    format the workers already speak."""
    info = ProviderInfo(name=provider, wire=provider) if isinstance(provider, str) else provider
    if info.name in BUILTIN_PROVIDERS and factory is None:
        raise ValueError(f"{info.name!r} is a built-in provider")
    if factory is not None:
        _FACTORIES[info.wire] = factory
    elif info.wire not in _FACTORIES:
        raise ValueError(f"provider {info.name!r}: no wire format {info.wire!r} (give a factory)")
    if info.name not in BUILTIN_PROVIDERS:
        _REGISTERED[info.name] = info
    return info


def registered_providers() -> list[ProviderInfo]:
    """What this process added, for the worker to announce."""
    return list(_REGISTERED.values())


def providers() -> dict[str, ProviderInfo]:
    return provider_table(_REGISTERED.values())


def known_providers() -> list[str]:
    return sorted(providers())


def make_provider(ref: ModelRef, ctx: ProviderContext) -> Provider:
    """The provider for `ref`, at the endpoint `ctx` carries; without one, resolved here
    against the deployment's settings (models file, allow-lists) from the environment."""
    endpoint = ctx.endpoint
    if endpoint is None:
        endpoint = EndpointPolicy.from_settings(Settings()).resolve(ref, providers())
        ctx = ctx.model_copy(update={"endpoint": endpoint})
    factory = _FACTORIES.get(endpoint.provider.wire)
    if factory is None:
        raise SpecError(
            f"model.provider: no worker code for {endpoint.provider.name!r} here "
            f"(wire format {endpoint.provider.wire!r} is not registered in this worker)"
        )
    provider = factory(ref, ctx)
    mode = tool_mode(endpoint.options)
    if mode != "native":
        provider = PromptToolsProvider(provider, PROMPT_FORMATS[mode])
    return provider


__all__ = [
    "DeltaSink",
    "ModelRequest",
    "ModelResponse",
    "OfferedTool",
    "Provider",
    "ProviderContext",
    "ProviderInfo",
    "ProviderToolCall",
    "ToolDefinition",
    "known_providers",
    "make_provider",
    "providers",
    "register_provider",
    "registered_providers",
]
