"""A run's structured output reaches the AI SDK chat client.

A chat agent whose spec asks for an `output`, an `agentq worker` process, `agentq serve`
and the real `ai` package reading the stream: the output arrives as a `data-output` chunk
before `finish`, and the client keeps it on the assembled message as a data part."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.serve.test_serve_chat import AI_SDK, node
from tests.support.infra import WorkerProcess
from tests.support.serve import ServeProcess

pytestmark = pytest.mark.integration

SCRIPT = Path(__file__).with_name("ai_sdk_assemble.cjs")
INVOICE: dict[str, Any] = {
    "type": "object",
    "properties": {"number": {"type": "string"}, "total": {"type": "number"}},
    "required": ["number", "total"],
}
GOOD = {"number": "A-1", "total": 12.5}
INVOICER: dict[str, Any] = {
    "model": {
        "provider": "scripted",
        "script": [{"text": "Found it."}, {"text": json.dumps(GOOD)}],
    },
    "output": {"schema": INVOICE, "mode": "prompted"},
}


@pytest.fixture
def chat_server(redis_url: str, worker: WorkerProcess) -> Iterator[ServeProcess]:
    process = ServeProcess(redis_url, agents={"invoicer": INVOICER})
    yield process
    process.stop()


def test_the_ai_package_keeps_the_run_s_output_on_the_message(chat_server: ServeProcess) -> None:
    done = subprocess.run(
        [node(), str(SCRIPT), chat_server.url, "invoicer", "chat-output"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NODE_PATH": str(AI_SDK)},
    )
    assert done.returncode == 0, done.stderr + chat_server.log()
    report = json.loads(done.stdout)
    kinds = [c["type"] for c in report["chunks"]]
    assert kinds[-2:] == ["data-output", "finish"], kinds
    (part,) = [p for p in report["message"]["parts"] if p["type"] == "data-output"]
    assert part["data"] == GOOD
    assert part["id"] == report["chunks"][0]["messageId"]
