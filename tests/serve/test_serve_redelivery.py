"""A model step re-delivered after its worker died streams its text again as a later
attempt. Neither the AI SDK chat stream (assembled by the real `ai` package) nor the
dashboard (chromium) shows the text twice.

The re-delivery is driven directly: no worker takes the run's model step; the test
appends the events a dying worker and its successor append (RunStore.emit, the same
transition), then stops the run."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentq.orchestrator.client import Client
from tests.serve.test_serve_chat import AI_SDK, node
from tests.support.browser import shown_text
from tests.support.serve import ServeProcess
from tests.support.specs import scripted
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

SCRIPT = Path(__file__).with_name("ai_sdk_assemble.cjs")
HELLO: dict[str, Any] = {"model": {"provider": "scripted", "script": [{"text": "unused"}]}}


@pytest.fixture
def idle_server(redis_url: str) -> Iterator[ServeProcess]:
    """A server with no worker: the run's model step waits for the test to play it."""
    process = ServeProcess(redis_url, agents={"hello": HELLO})
    yield process
    process.stop()


def redeliver(redis_url: str, run_id: str) -> None:
    """Step 0 streams "Hello " and its worker dies; the step runs again (attempt 2) and
    streams "Hello world"; a late delta of the dead attempt arrives last."""

    def event(kind: str, **fields: Any) -> str:
        return json.dumps({"type": kind, "run_id": run_id, "at": 0.0, "step": 0, **fields})

    events = [
        event("start-step", attempt=1),
        event("text-delta", attempt=1, delta="Hello "),
        event("start-step", attempt=2),
        event("text-delta", attempt=2, delta="Hello "),
        event("text-delta", attempt=2, delta="world"),
        event("text-delta", attempt=1, delta="zombie"),
    ]

    async def play() -> None:
        async with Client(redis_url) as client:
            for one in events:  # one at a time, as two workers' flushes would land
                assert await client.runs.store.emit(run_id, [one]) > 0

    asyncio.run(play())


def only_run(server: ServeProcess) -> str:
    runs = httpx.get(f"{server.url}/v1/runs", timeout=30).json()["runs"]
    return str(runs[0]["id"]) if len(runs) == 1 else ""


def test_the_chat_stream_does_not_repeat_a_redelivered_step(
    idle_server: ServeProcess, redis_url: str
) -> None:
    reader = subprocess.Popen(
        [node(), str(SCRIPT), idle_server.url, "hello", "redelivered"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "NODE_PATH": str(AI_SDK)},
    )
    run_id = eventually(lambda: only_run(idle_server), "the chat's run")
    redeliver(redis_url, run_id)
    stopped = httpx.post(f"{idle_server.url}/v1/agents/hello/chat/redelivered/stop", timeout=30)
    assert stopped.status_code == 204
    out, err = reader.communicate(timeout=120)
    assert reader.returncode == 0, err + idle_server.log()
    message = json.loads(out)["message"]
    assert [p["text"] for p in message["parts"] if p["type"] == "text"] == ["Hello world"]


def test_the_dashboard_does_not_repeat_a_redelivered_step(
    idle_server: ServeProcess, redis_url: str, browser: object
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.remote.webdriver import WebDriver
    from selenium.webdriver.support import expected_conditions as when
    from selenium.webdriver.support.ui import WebDriverWait

    assert isinstance(browser, WebDriver)
    spec = scripted({"text": "unused"}, id="redelivered-run")
    assert httpx.post(f"{idle_server.url}/v1/runs", json=spec, timeout=30).status_code == 201
    browser.get(idle_server.url + "/#/runs/redelivered-run")
    wait = WebDriverWait(browser, 60)
    wait.until(when.text_to_be_present_in_element((By.ID, "run-status"), "running"))
    redeliver(redis_url, "redelivered-run")
    cancel = httpx.post(f"{idle_server.url}/v1/runs/redelivered-run/cancel", json={}, timeout=30)
    assert cancel.status_code == 200, cancel.text
    wait.until(when.text_to_be_present_in_element((By.ID, "run-status"), "cancelled"))
    wait.until(when.text_to_be_present_in_element((By.ID, "steps"), "Hello world"))
    steps = shown_text(browser, "#steps") or ""
    assert "Hello Hello" not in steps
    assert "zombie" not in steps
