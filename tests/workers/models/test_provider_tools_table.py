"""The provider table's provider-executed tools match what each wire format maps."""

from __future__ import annotations

import pytest

from agentq.orchestrator.core.errors import SpecError
from agentq.orchestrator.policy.providers import BUILTIN_PROVIDERS
from agentq.orchestrator.spec.resolution import resolve_tools
from agentq.orchestrator.spec.run import RunSpec
from agentq.workers.models import anthropic, gemini, openai_responses

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("provider", "module_tools"),
    [
        ("anthropic", anthropic.SERVER_TOOLS),
        ("openai-responses", openai_responses.SERVER_TOOLS),
        ("gemini", gemini.SERVER_TOOLS),
        ("openai", {}),
    ],
)
def test_table_matches_the_provider(provider: str, module_tools: dict[str, str]) -> None:
    assert BUILTIN_PROVIDERS[provider].provider_tools == frozenset(module_tools)


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
    spec = RunSpec.model_validate(
        {"model": model, "prompt": "x", "tools": [{"type": "provider", "name": tool}]}
    )
    if ok:
        resolve_tools(spec, {}, 0.0)
        return
    with pytest.raises(SpecError, match=rf"tools\[0\]: .* cannot run '{tool}' itself"):
        resolve_tools(spec, {}, 0.0)
