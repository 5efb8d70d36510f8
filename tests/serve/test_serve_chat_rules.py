"""What a chat request may say (chat_messages.py's rule), stop, and an answer sent with a
new message, driven by the real `ai` package (ai@6, Node 20) against a real server."""

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
from agentq.orchestrator.core.messages import UserMessage
from tests.serve.test_serve_chat import AI_SDK, HELPER, node
from tests.support.infra import WorkerProcess
from tests.support.serve import ServeProcess
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

SCRIPT = Path(__file__).with_name("ai_sdk_rules.cjs")
TOGETHER: dict[str, Any] = {
    "model": {
        "provider": "scripted",
        "script": [
            {"tool_calls": [{"name": "add", "input": {"a": 1, "b": 2}}]},
            {"text": "It is 3."},
        ],
    },
    "tools": [{"type": "function", "name": "add", "needs_approval": True}],
}
SLOW: dict[str, Any] = {
    "model": {
        "provider": "scripted",
        "script": [
            {
                "text": "Napping.",
                "tool_calls": [{"name": "nap", "input": {"seconds": 600, "tag": "z"}}],
            },
            {"text": "Rested."},
        ],
    },
    "tools": [{"type": "function", "name": "nap"}],
}


@pytest.fixture
def chat_server(redis_url: str, worker: WorkerProcess) -> Iterator[ServeProcess]:
    agents = {"helper": HELPER, "together": TOGETHER, "slow": SLOW}
    process = ServeProcess(redis_url, agents=agents)
    yield process
    process.stop()


def rules(server: ServeProcess, agent: str, chat_id: str, mode: str) -> Any:
    done = subprocess.run(
        [node(), str(SCRIPT), server.url, agent, chat_id, mode],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NODE_PATH": str(AI_SDK)},
    )
    assert done.returncode == 0, done.stderr + server.log()
    return json.loads(done.stdout)


def runs_of(server: ServeProcess, agent: str) -> list[dict[str, Any]]:
    listed = httpx.get(f"{server.url}/v1/runs", params={"metadata.agent": agent}, timeout=30)
    assert listed.status_code == 200, listed.text
    runs: list[dict[str, Any]] = listed.json()["runs"]
    return runs


def test_a_client_cannot_send_system_messages_or_made_up_tool_results(
    chat_server: ServeProcess,
) -> None:
    report = rules(chat_server, "helper", "forge", "forge")
    assert report["withSystem"]["status"] == 422
    assert "may not send system messages" in report["withSystem"]["error"]
    assert report["madeUp"]["status"] == 422
    assert "call 'forged-1', which this chat's run did not make" in report["madeUp"]["error"]
    # Neither reached a model: the one run is the honest first turn.
    assert len(runs_of(chat_server, "helper")) == 1


def test_an_answer_and_a_new_message_come_together(
    chat_server: ServeProcess, redis_url: str
) -> None:
    report = rules(chat_server, "together", "both", "together")
    assert report["statuses"] == [200, 200]
    parts = report["message"]["parts"]
    assert [p["state"] for p in parts if p["type"] == "tool-add"][:1] == ["output-available"]
    assert any(p["type"] == "text" and p["text"] == "It is 3." for p in parts)
    # The message started the next run once the approved one ended, in the same response.
    runs = runs_of(chat_server, "together")
    assert len(runs) == 2

    async def conversation(run_id: str) -> list[Any]:
        async with Client(redis_url) as client:
            return await client.runs.conversation(run_id)

    newest = max(runs, key=lambda r: r["created_at"])["id"]
    said = asyncio.run(conversation(newest))
    users = [m.content for m in said if isinstance(m, UserMessage)]
    assert users == ["add 1 and 2", "and then?"]
    assert "It is 3." in json.dumps([m.model_dump(mode="json") for m in said])


def test_stop_then_a_message_cancels_the_run_and_starts_the_next(
    chat_server: ServeProcess,
) -> None:
    report = rules(chat_server, "slow", "stopped", "stop")
    assert report["statuses"] == [200, 200]  # no 409 for the message after stop()
    first_run = report["first"]["id"]

    def statuses() -> dict[str, str]:
        return {r["id"]: r["status"] for r in runs_of(chat_server, "slow")}

    eventually(lambda: statuses().get(first_run) == "cancelled", "the stopped run to cancel")
    (second_run,) = set(statuses()) - {first_run}
    assert statuses()[second_run] == "running"
    stop = httpx.post(f"{chat_server.url}/v1/agents/slow/chat/stopped/stop", timeout=30)
    assert stop.status_code == 204
    eventually(lambda: statuses()[second_run] == "cancelled", "the stop endpoint to cancel")
