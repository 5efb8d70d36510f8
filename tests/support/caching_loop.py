"""An agent loop whose history grows, run for real (embedded runtime, real HTTP) against a
caching-aware provider fake: the caching tests' and bench/caching.py's one workload.

Every step but the last calls `fetch`, whose result is `result_bytes` of text; the
system prompt is `system_tokens` long (fake_cache.py counts 4 characters a token), and
the tools are offered on every step, so each request repeats the previous one and adds a
turn of call and result.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from agentq import tool
from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.runs.result import RunResult
from agentq.workers.worker.embedded import embedded
from tests.support import fake_anthropic, fake_gemini, fake_openai, fake_responses
from tests.support.fake_cache import CHARS_PER_TOKEN, AnthropicCache, Clock, OpenAICache
from tests.support.fake_gemini_cache import GeminiCache
from tests.support.fake_openai import ToolCall

KEYS = {"OPENAI_API_KEY": "sk-test", "ANTHROPIC_API_KEY": "sk-ant-test", "GEMINI_API_KEY": "g-test"}
SETTINGS = Settings(
    idle_poll_s=0.1,
    lease_s=5.0,
    allow_spec_endpoints="http://127.0.0.1:",
    allow_spec_key_envs="OPENAI_API_KEY,ANTHROPIC_API_KEY,GEMINI_API_KEY",
)
PROVIDERS = ("anthropic", "openai", "openai-responses", "gemini")
ANTHROPIC_MODEL, OPENAI_MODEL, GEMINI_MODEL = "claude-sonnet-4-5", "gpt-4o", "gemini-2.5-flash"
MODELS = {"anthropic": ANTHROPIC_MODEL, "gemini": GEMINI_MODEL}


@tool
def fetch(page: int, size: int) -> str:
    """Fetch a page of the report."""
    line = f"page {page}: " + "lorem ipsum dolor sit amet " * 4
    return (line * (size // len(line) + 1))[:size]


@dataclass
class Loop:
    provider: str  # one of PROVIDERS
    steps: int = 5
    system_tokens: int = 2000
    result_bytes: int = 1024
    cache: Any = "auto"  # model.options.cache

    def spec(self, base_url: str) -> dict[str, Any]:
        system = ("You are a careful analyst. " * self.system_tokens)[
            : self.system_tokens * CHARS_PER_TOKEN
        ]
        return {
            "model": {
                "provider": self.provider,
                "name": MODELS.get(self.provider, OPENAI_MODEL),
                "base_url": base_url,
                "options": {"cache": self.cache, "stream": False},
            },
            "system": system,
            "prompt": "Read the report page by page, then summarise it.",
            "tools": [{"type": "function", "name": "fetch"}],
            "max_steps": self.steps + 1,
        }

    def turns(self, turn: Callable[..., Any]) -> list[Any]:
        calls = [
            turn(tool_calls=[ToolCall("fetch", {"page": n, "size": self.result_bytes})])
            for n in range(self.steps - 1)
        ]
        return [*calls, turn(text="The report, summarised.")]


@contextmanager
def fake_for(loop: Loop, clock: Clock | None = None) -> Iterator[Any]:
    """The provider's fake, scripted for the loop, with its cache rules."""
    clock = clock or Clock()
    if loop.provider == "anthropic":
        with fake_anthropic.FakeAnthropic(
            loop.turns(fake_anthropic.Turn), cache=AnthropicCache(clock=clock)
        ) as server:
            yield server
    elif loop.provider == "openai":
        with fake_openai.FakeOpenAI(
            loop.turns(fake_openai.Turn), cache=OpenAICache(clock=clock)
        ) as server:
            yield server
    elif loop.provider == "gemini":
        with fake_gemini.FakeGemini(
            loop.turns(fake_gemini.Turn), cache=GeminiCache(clock=clock)
        ) as server:
            yield server
    else:
        with fake_responses.FakeResponses(
            loop.turns(fake_responses.Turn), cache=OpenAICache(clock=clock)
        ) as server:
            yield server


async def run_loop(loop: Loop, base_url: str, timeout_s: float = 60.0) -> RunResult:
    """The loop's run, to its end, on a fresh embedded runtime."""
    async with embedded(tools=[fetch], settings=SETTINGS, env=KEYS) as client:
        run_id = await client.runs.submit(loop.spec(base_url))
        return await client.runs.wait(run_id, timeout_s=timeout_s)
