"""Streamed tool input on every wire format: an `agentq worker` process, a real
redis-server, `agentq submit`/`wait`/`events`, and the local fakes of the four
providers, which stream a call's arguments in 4-character fragments (Gemini sends a
call whole); the worker coalesces the fragments that arrive within a few milliseconds,
so how many delta events there are depends on timing (the fold's own pieces are
counted in test_provider_tool_input.py).

Each call's `tool-input-start` comes first, then `tool-input-delta` events whose text
adds up to the arguments, then its `tool-call` event with the parsed input."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import fake_anthropic, fake_gemini, fake_openai, fake_responses
from tests.support.fake_openai import ToolCall
from tests.support.infra import TOOLS, WorkerProcess, run_cli, wait_ready

pytestmark = pytest.mark.e2e

KEYS = {
    "OPENAI_API_KEY": "sk-test",
    "ANTHROPIC_API_KEY": "sk-ant-test",
    "GEMINI_API_KEY": "AIza-test",
}
ARGS: list[dict[str, Any]] = [{"a": 12.5, "b": 30}, {"a": 1, "b": 2}]
FAKES: dict[str, tuple[Callable[[list[Any]], Any], Callable[..., Any]]] = {
    "openai": (fake_openai.FakeOpenAI, fake_openai.Turn),
    "openai-responses": (fake_responses.FakeResponses, fake_responses.Turn),
    "anthropic": (fake_anthropic.FakeAnthropic, fake_anthropic.Turn),
    "gemini": (fake_gemini.FakeGemini, fake_gemini.Turn),
}


@pytest.fixture
def worker(redis_url: str, allow_loopback_specs: None) -> Iterator[WorkerProcess]:
    process = WorkerProcess(redis_url, "--tools", TOOLS, env=KEYS)
    wait_ready(process)
    yield process
    process.stop()


def run_events(tmp_path: Path, redis_url: str, spec: dict[str, Any]) -> list[dict[str, Any]]:
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    submitted = run_cli("submit", str(path), redis_url=redis_url)
    assert submitted.returncode == 0, submitted.stderr
    run_id = submitted.stdout.strip()
    done = run_cli("wait", run_id, "--timeout", "60", redis_url=redis_url)
    assert json.loads(done.stdout)["status"] == "succeeded", done.stdout
    shown = run_cli("events", run_id, redis_url=redis_url)
    return [json.loads(line) for line in shown.stdout.splitlines()]


@pytest.mark.parametrize("provider", list(FAKES))
def test_a_call_s_input_streams_before_its_tool_call(
    provider: str, redis_url: str, worker: WorkerProcess, tmp_path: Path
) -> None:
    fake, turn = FAKES[provider]
    turns = [turn(tool_calls=[ToolCall("add", args) for args in ARGS]), turn(text="Done.")]
    with fake(turns) as server:
        spec = {
            "model": {"provider": provider, "name": "m-test", "base_url": server.base_url},
            "prompt": "Add them.",
            "tools": [{"type": "function", "name": "add"}],
        }
        events = run_events(tmp_path, redis_url, spec)
    step0 = [e for e in events if e.get("step") == 0 and e["type"].startswith("tool-")]
    calls = [e for e in step0 if e["type"] == "tool-call"]
    assert [c["input"] for c in calls] == ARGS, worker.log()
    for call in calls:
        mine = [e for e in step0 if e["tool_call_id"] == call["tool_call_id"]]
        kinds = [e["type"] for e in mine]
        assert kinds[0] == "tool-input-start", kinds
        assert mine[0]["tool_name"] == "add"
        first_call = kinds.index("tool-call")
        assert set(kinds[1:first_call]) == {"tool-input-delta"}, kinds
        streamed = "".join(e["delta"] for e in mine[1:first_call])
        assert json.loads(streamed) == call["input"]
        # Every piece of the input came before the call, none after.
        assert "tool-input-delta" not in kinds[first_call:]
