"""A call's arguments stream to the AI SDK chat client while the model writes them.

A chat agent on a streaming provider (the local Chat Completions fake, which cuts a
call's arguments into 4-character fragments), an `agentq worker` process that runs the
call, `agentq serve`, and the real `ai` package reading the stream: the call's chunks
are `tool-input-start`, `tool-input-delta`s whose `inputTextDelta`s add up to the
arguments, then `tool-input-available`; the tool part shows its input while it streams
(state `input-streaming`) and ends with the input and the tool's output."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.serve.test_serve_chat import AI_SDK, node
from tests.support.fake_openai import FakeOpenAI, ToolCall, Turn
from tests.support.infra import TOOLS, WorkerProcess, wait_ready
from tests.support.serve import ServeProcess

pytestmark = pytest.mark.integration

SCRIPT = Path(__file__).with_name("ai_sdk_assemble.cjs")
ARGS: dict[str, Any] = {"a": 12.5, "b": 30}


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    turns = [Turn(text="Adding.", tool_calls=[ToolCall("add", ARGS)]), Turn(text="It is 42.5.")]
    with FakeOpenAI(turns) as server:
        yield server


@pytest.fixture
def chat_server(
    redis_url: str, fake: FakeOpenAI, allow_loopback_specs: None
) -> Iterator[ServeProcess]:
    worker = WorkerProcess(redis_url, "--tools", TOOLS, env={"OPENAI_API_KEY": "sk-test"})
    wait_ready(worker)
    model = {"provider": "openai", "name": "m-test", "base_url": fake.base_url}
    agent = {"model": model, "tools": [{"type": "function", "name": "add"}]}
    server = ServeProcess(redis_url, agents={"adder": agent})
    yield server
    server.stop()
    worker.stop()


def test_the_ai_package_sees_a_call_s_input_stream_in(chat_server: ServeProcess) -> None:
    done = subprocess.run(
        [node(), str(SCRIPT), chat_server.url, "adder", "streamed-input"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NODE_PATH": str(AI_SDK)},
    )
    assert done.returncode == 0, done.stderr + chat_server.log()
    report = json.loads(done.stdout)
    chunks = [c for c in report["chunks"] if c["type"].startswith("tool-input-")]
    kinds = [c["type"] for c in chunks]
    assert (kinds[0], kinds[-1]) == ("tool-input-start", "tool-input-available"), kinds
    assert set(kinds[1:-1]) == {"tool-input-delta"}, kinds
    call_id = chunks[0]["toolCallId"]
    assert {c["toolCallId"] for c in chunks} == {call_id}
    assert chunks[0]["toolName"] == "add"
    assert json.loads("".join(c["inputTextDelta"] for c in chunks[1:-1])) == ARGS
    # The client assembled the input from the deltas before the call was available.
    assert report["streaming"][-1] == [call_id, ARGS]
    (part,) = [p for p in report["message"]["parts"] if p["type"] == "tool-add"]
    assert (part["state"], part["input"], part["output"]) == ("output-available", ARGS, 42.5)
    texts = [p["text"] for p in report["message"]["parts"] if p["type"] == "text"]
    assert texts == ["Adding.", "It is 42.5."]
