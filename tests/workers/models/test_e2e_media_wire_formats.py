"""A tool's image reaches the model on every wire format: an `agentq worker` process
runs `tiny_image` (tests/support/call_tools.py) for a run on a real redis-server, and
the local fake of each API echoes what it saw of the image in its answer
(tests/support/fake_media.py): the run's text then holds the image's size and digest.
Anthropic and the Responses API carry it in the tool result; Chat Completions, whose
tool messages are text, in a user message after them (the fake refuses it elsewhere, as
the API does), Gemini as an inlineData part in the function response turn.

A `to_model_output` hook registered on another worker process turns a tool's number into
an image the model sees, while the run records the number."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import fake_anthropic, fake_gemini, fake_media, fake_openai, fake_responses
from tests.support.call_tools import TINY_PNG
from tests.support.fake_openai import ToolCall
from tests.support.infra import TOOLS, WorkerProcess, run_cli, wait_ready

pytestmark = pytest.mark.e2e

KEYS = {
    "OPENAI_API_KEY": "sk-test",
    "ANTHROPIC_API_KEY": "sk-ant-test",
    "GEMINI_API_KEY": "AIza-test",
}
FAKES: dict[str, tuple[Callable[[list[Any]], Any], Callable[..., Any]]] = {
    "openai": (fake_openai.FakeOpenAI, fake_openai.Turn),
    "openai-responses": (fake_responses.FakeResponses, fake_responses.Turn),
    "anthropic": (fake_anthropic.FakeAnthropic, fake_anthropic.Turn),
    "gemini": (fake_gemini.FakeGemini, fake_gemini.Turn),
}


@pytest.fixture
def worker(redis_url: str, allow_loopback_specs: None) -> Iterator[WorkerProcess]:
    process = WorkerProcess(redis_url, "--tools", "tests/support/call_tools.py", env=KEYS)
    wait_ready(process)
    yield process
    process.stop()


def run(tmp_path: Path, redis_url: str, spec: dict[str, Any]) -> dict[str, Any]:
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    submitted = run_cli("submit", str(path), redis_url=redis_url)
    assert submitted.returncode == 0, submitted.stderr
    done = run_cli("wait", submitted.stdout.strip(), "--timeout", "60", redis_url=redis_url)
    result: dict[str, Any] = json.loads(done.stdout)
    assert result["status"] == "succeeded", done.stdout
    return result


@pytest.mark.parametrize("provider", list(FAKES))
def test_the_model_sees_the_image_a_tool_returned(
    provider: str, redis_url: str, worker: WorkerProcess, tmp_path: Path
) -> None:
    fake, turn = FAKES[provider]
    turns = [turn(tool_calls=[ToolCall("tiny_image")]), turn(text="I see:", echo_media=True)]
    with fake(turns) as server:
        spec = {
            "model": {"provider": provider, "name": "m-test", "base_url": server.base_url},
            "prompt": "Show me the image.",
            "tools": [{"type": "function", "name": "tiny_image"}],
        }
        result = run(tmp_path, redis_url, spec)
    assert result["text"] == f"I see:\n{fake_media.seen('image/png', TINY_PNG)}", worker.log()


def test_a_hook_on_another_worker_shows_the_model_an_image(
    redis_url: str, allow_loopback_specs: None, tmp_path: Path
) -> None:
    tools = WorkerProcess(redis_url, "--tools", TOOLS, env=KEYS)
    hooks = WorkerProcess(redis_url, "--tools", "tests/support/model_output_hooks.py", env=KEYS)
    try:
        wait_ready(tools)
        wait_ready(hooks)
        turns = [
            fake_openai.Turn(tool_calls=[ToolCall("add", {"a": 1, "b": 2})]),
            fake_openai.Turn(text="I see:", echo_media=True),
        ]
        with fake_openai.FakeOpenAI(turns) as server:
            entry = {"type": "function", "name": "add", "to_model_output": "as_picture"}
            spec = {
                "model": {"provider": "openai", "name": "m-test", "base_url": server.base_url},
                "prompt": "Add 1 and 2.",
                "tools": [entry],
            }
            result = run(tmp_path, redis_url, spec)
            sent = server.requests[1].body["messages"]
    finally:
        tools.stop()
        hooks.stop()
    assert result["text"] == f"I see:\n{fake_media.seen('image/png', TINY_PNG)}"
    assert result["steps"][0]["tool_results"][0]["output"] == 3  # recorded as the tool gave it
    assert sent[-2]["content"] == "a picture of 3.0\n[image: image/png, 1 kB, call_0_0#0]"
