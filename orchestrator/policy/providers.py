"""The provider table: every fact about a model provider, in one place.

A provider is a name a spec can use (`"openai:gpt-4o"`) bound to a wire format
the workers speak, a default endpoint and key variable, the tools the provider
can execute itself, and the option names under which it takes an MCP server's
sampling limits. The workers map each wire format to code; everything else is
data here, so that submit (which never imports the workers) validates against
the same table the workers call with.

Providers registered at a worker's start (`agentq.workers.models.register_provider`)
are announced in the tool registry and join this table at submit.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from pydantic import BaseModel, ConfigDict, Field

from agentq.orchestrator.core.errors import SpecError

PROVIDER_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$")


class ProviderInfo(BaseModel):
    """One row of the table."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=PROVIDER_NAME.pattern)
    # The wire format a worker speaks to it: one of the built-in formats, or the
    # provider's own name when it brings its own code (a registered factory).
    wire: str
    default_base_url: str | None = None
    # The worker's environment variable its key is read from; None: no key.
    key_env: str | None = None
    # Tools it can run itself (web search, …), by agentq's name for them.
    provider_tools: frozenset[str] = frozenset()
    # MCP sampling: agentq's limit names (max_tokens, temperature, stop) -> option names.
    sampling_options: dict[str, str] = Field(default_factory=dict)
    # Some formats nest those options (Gemini: generationConfig).
    sampling_options_under: str | None = None
    # False for providers that call no remote model (the scripted one).
    rate_limited: bool = True
    # Its wire format takes a JSON-schema response format (structured output's native
    # mode); without one, a final-answer tool stands in (orchestrator/output/spec.py).
    native_output: bool = False


BUILTIN_PROVIDERS: dict[str, ProviderInfo] = {
    p.name: p
    for p in (
        ProviderInfo(name="scripted", wire="scripted", rate_limited=False),
        ProviderInfo(
            name="openai",
            wire="openai",
            default_base_url="https://api.openai.com/v1",
            key_env="OPENAI_API_KEY",
            native_output=True,
            sampling_options={
                "max_tokens": "max_tokens",
                "temperature": "temperature",
                "stop": "stop",
            },
        ),
        ProviderInfo(
            name="anthropic",
            wire="anthropic",
            default_base_url="https://api.anthropic.com/v1",
            key_env="ANTHROPIC_API_KEY",
            provider_tools=frozenset({"web_search", "web_fetch"}),
            sampling_options={
                "max_tokens": "max_tokens",
                "temperature": "temperature",
                "stop": "stop_sequences",
            },
        ),
        ProviderInfo(
            name="openai-responses",
            wire="openai-responses",
            default_base_url="https://api.openai.com/v1",
            key_env="OPENAI_API_KEY",
            native_output=True,
            provider_tools=frozenset({"web_search", "code_interpreter"}),
            # The Responses API has no stop sequences.
            sampling_options={"max_tokens": "max_output_tokens", "temperature": "temperature"},
        ),
        ProviderInfo(
            name="gemini",
            wire="gemini",
            default_base_url="https://generativelanguage.googleapis.com/v1beta",
            key_env="GEMINI_API_KEY",
            native_output=True,
            provider_tools=frozenset({"web_search", "google_search"}),
            sampling_options={
                "max_tokens": "maxOutputTokens",
                "temperature": "temperature",
                "stop": "stopSequences",
            },
            sampling_options_under="generationConfig",
        ),
    )
}


def provider_table(announced: Iterable[ProviderInfo] = ()) -> dict[str, ProviderInfo]:
    """The built-in providers plus those workers announced (a built-in name is never
    replaced by an announcement)."""
    table = dict(BUILTIN_PROVIDERS)
    for info in announced:
        table.setdefault(info.name, info)
    return table


def lookup(
    table: Mapping[str, ProviderInfo], name: str, where: str = "model.provider"
) -> ProviderInfo:
    try:
        return table[name]
    except KeyError:
        raise SpecError(
            f"{where}: unknown provider {name!r} (known: {', '.join(sorted(table))})"
        ) from None
