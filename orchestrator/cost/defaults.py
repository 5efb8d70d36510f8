"""Built-in list prices for common models, USD per million tokens.

Taken from the providers' price pages in 2025 and not kept current: prices change, and
the deployment's own table (`AGENTQ_PRICES`) overrides any entry here. Long-context
tiers are not modelled (the lower tier is used). The scripted provider is free.
"""

from __future__ import annotations

from typing import Any

_ANTHROPIC_CACHE = {"cached_input": 0.1, "cache_write": 1.25}  # times the input price


def _anthropic(input_usd: float, output_usd: float) -> dict[str, float]:
    return {
        "input": input_usd,
        "output": output_usd,
        **{kind: round(input_usd * factor, 6) for kind, factor in _ANTHROPIC_CACHE.items()},
    }


DEFAULT_PRICES: dict[str, Any] = {
    "scripted:*": {"input": 0, "output": 0},
    "openai:gpt-4o": {"input": 2.5, "cached_input": 1.25, "output": 10.0},
    "openai:gpt-4o-*": {"input": 2.5, "cached_input": 1.25, "output": 10.0},
    "openai:gpt-4o-mini*": {"input": 0.15, "cached_input": 0.075, "output": 0.6},
    "openai:gpt-4.1*": {"input": 2.0, "cached_input": 0.5, "output": 8.0},
    "openai:gpt-4.1-mini*": {"input": 0.4, "cached_input": 0.1, "output": 1.6},
    "openai:gpt-4.1-nano*": {"input": 0.1, "cached_input": 0.025, "output": 0.4},
    "openai:gpt-5*": {"input": 1.25, "cached_input": 0.125, "output": 10.0},
    "openai:gpt-5-mini*": {"input": 0.25, "cached_input": 0.025, "output": 2.0},
    "openai:gpt-5-nano*": {"input": 0.05, "cached_input": 0.005, "output": 0.4},
    "openai:o3*": {"input": 2.0, "cached_input": 0.5, "output": 8.0},
    "openai:o3-mini*": {"input": 1.1, "cached_input": 0.55, "output": 4.4},
    "openai:o4-mini*": {"input": 1.1, "cached_input": 0.275, "output": 4.4},
    "anthropic:claude-opus-4*": _anthropic(15.0, 75.0),
    "anthropic:claude-opus-4-5*": _anthropic(5.0, 25.0),
    "anthropic:claude-sonnet-4*": _anthropic(3.0, 15.0),
    "anthropic:claude-3-7-sonnet*": _anthropic(3.0, 15.0),
    "anthropic:claude-haiku-4-5*": _anthropic(1.0, 5.0),
    "anthropic:claude-3-5-haiku*": _anthropic(0.8, 4.0),
    "gemini:gemini-2.5-pro*": {"input": 1.25, "cached_input": 0.31, "output": 10.0},
    "gemini:gemini-2.5-flash*": {"input": 0.3, "cached_input": 0.075, "output": 2.5},
    "gemini:gemini-2.5-flash-lite*": {"input": 0.1, "cached_input": 0.025, "output": 0.4},
    "gemini:gemini-2.0-flash*": {"input": 0.1, "cached_input": 0.025, "output": 0.4},
}
# The Responses API bills as Chat Completions does.
DEFAULT_PRICES |= {
    "openai-responses:" + key.removeprefix("openai:"): value
    for key, value in DEFAULT_PRICES.items()
    if key.startswith("openai:")
}
