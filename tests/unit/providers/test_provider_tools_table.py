"""The submit-time table of provider-executed tools matches what each provider maps."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agentq.orchestrator.spec import PROVIDER_TOOLS, RunSpec
from agentq.workers.providers import anthropic, gemini, openai_responses


@pytest.mark.parametrize(
    ("provider", "module_tools"),
    [
        ("anthropic", anthropic.SERVER_TOOLS),
        ("openai-responses", openai_responses.SERVER_TOOLS),
        ("gemini", gemini.SERVER_TOOLS),
    ],
)
def test_table_matches_the_provider(provider: str, module_tools: dict[str, str]) -> None:
    assert PROVIDER_TOOLS[provider] == frozenset(module_tools)


@pytest.mark.parametrize(
    ("model", "tool", "ok"),
    [
        ("anthropic:claude", "web_search", True),
        ("openai-responses:gpt", "code_interpreter", True),
        ("gemini:flash", "google_search", True),
        ("openai:gpt", "web_search", False),
        ("anthropic:claude", "code_interpreter", False),
    ],
)
def test_a_provider_that_lacks_the_tool_refuses_the_spec(model: str, tool: str, ok: bool) -> None:
    spec = {"model": model, "prompt": "x", "tools": [{"type": "provider", "name": tool}]}
    if ok:
        RunSpec.model_validate(spec)
        return
    with pytest.raises(ValidationError, match=rf"tools\[0\]: .* cannot run '{tool}' itself"):
        RunSpec.model_validate(spec)
