"""The chat endpoint keeps its history on a thread: the real `ai` package (ai@6, Node 20)
sending only its last message, as the AI SDK's persistence guide does, still talks to
the whole conversation, and a chat's turns are one thread's runs."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.serve.test_serve_chat import AI_SDK, node
from tests.support.infra import WorkerProcess
from tests.support.serve import ServeProcess

pytestmark = pytest.mark.integration

SCRIPT = Path(__file__).with_name("ai_sdk_last_message.cjs")
ECHO: dict[str, Any] = {"model": {"provider": "scripted", "script": [{"text": "Noted."}]}}


@pytest.fixture
def chat_server(redis_url: str, worker: WorkerProcess) -> Iterator[ServeProcess]:
    process = ServeProcess(redis_url, agents={"echo": ECHO})
    yield process
    process.stop()


def chat(server: ServeProcess, chat_id: str, shape: str) -> Any:
    done = subprocess.run(
        [node(), str(SCRIPT), server.url, "echo", chat_id, shape],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NODE_PATH": str(AI_SDK)},
    )
    assert done.returncode == 0, done.stderr + server.log()
    return json.loads(done.stdout)


def get(server: ServeProcess, path: str, **params: Any) -> Any:
    answer = httpx.get(f"{server.url}{path}", params=params, timeout=30)
    assert answer.status_code == 200, answer.text
    return answer.json()


@pytest.mark.parametrize("shape", ["message", "messages"])
def test_a_client_sending_its_last_message_only_continues_the_chat(
    chat_server: ServeProcess, shape: str
) -> None:
    report = chat(chat_server, f"last-{shape}", shape)
    assert [m["role"] for m in report["messages"]] == ["user", "assistant"] * 2
    runs = get(chat_server, "/v1/runs", **{"metadata.chat_id": f"last-{shape}"})["runs"]
    assert len(runs) == 2
    (thread_id,) = {r["thread_id"] for r in runs}
    assert thread_id is not None
    thread = get(chat_server, f"/v1/threads/{thread_id}")
    assert [r["id"] for r in thread["runs"]] == [r["id"] for r in reversed(runs)]
    # The second turn's run started from the first: the model read the whole chat.
    said = [(m["role"], m["content"]) for m in thread["messages"] if m["role"] == "user"]
    assert said == [("user", "My name is Ada."), ("user", "What is my name?")]
