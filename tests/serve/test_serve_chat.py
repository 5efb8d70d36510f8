"""The AI SDK chat endpoint, read by the real `ai` npm package (ai@6, Node 20)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentq.serve.auth import hash_key
from tests.support.infra import REPO, WorkerProcess, missing
from tests.support.serve import ServeProcess

pytestmark = pytest.mark.integration

AI_SDK = REPO / "tests" / "support" / "node" / "ai-sdk" / "node_modules"
SCRIPT = Path(__file__).with_name("ai_sdk_chat.cjs")

HELPER: dict[str, Any] = {
    "model": {
        "provider": "scripted",
        "script": [
            {
                "reasoning": "A sum: add asks for approval first.",
                "text": "Adding.",
                "tool_calls": [{"name": "add", "input": {"a": 1, "b": 2}}],
            },
            {"tool_calls": [{"name": "fail", "input": {"message": "boom"}}]},
            {"tool_calls": [{"name": "pick_color", "input": {"why": "to finish"}}]},
            {"text": "All done: 3, teal."},
        ],
    },
    "tools": [
        {"type": "function", "name": "add", "needs_approval": True},
        {"type": "function", "name": "fail"},
        {"type": "client", "name": "pick_color"},
    ],
}


@pytest.fixture
def chat_server(redis_url: str, worker: WorkerProcess) -> Iterator[ServeProcess]:
    process = ServeProcess(redis_url, agents={"helper": HELPER})
    yield process
    process.stop()


def node() -> str:
    binary = shutil.which("node")
    if binary is None or not (AI_SDK / "ai" / "package.json").is_file():
        missing("node with the ai@6 package", "run .ci/node-setup (installs ai@6 with npm)")
    assert binary is not None
    return binary


def use_chat(server: ServeProcess, chat_id: str, token: str | None = None) -> Any:
    """The ai package's client through a whole chat; its report (message, chunk types)."""
    done = subprocess.run(
        [node(), str(SCRIPT), server.url, "helper", chat_id],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NODE_PATH": str(AI_SDK), **({"CHAT_TOKEN": token} if token else {})},
    )
    assert done.returncode == 0, done.stderr + server.log()
    return json.loads(done.stdout)


def test_useChat_transport_reads_a_durable_run(chat_server: ServeProcess) -> None:
    report = use_chat(chat_server, "chat-1")
    parts = report["message"]["parts"]
    states = {p["type"]: p.get("state") for p in parts if p["type"].startswith("tool-")}
    assert states == {
        "tool-add": "output-available",
        "tool-fail": "output-error",
        "tool-pick_color": "output-available",
    }
    # The error's kind rides where the client keeps it on the part.
    (failed,) = [p for p in parts if p["type"] == "tool-fail"]
    assert failed["resultProviderMetadata"] == {"agentq": {"errorKind": "execution"}}
    assert report["message"]["id"]
    reasoning = [p for p in parts if p["type"] == "reasoning"]
    assert [(p["text"], p.get("state")) for p in reasoning] == [
        ("A sum: add asks for approval first.", "done")
    ]
    for chunk in (
        "start",
        "start-step",
        "reasoning-start",
        "reasoning-delta",
        "reasoning-end",
        "text-delta",
        "tool-approval-request",
        "finish",
    ):
        assert chunk in report["chunks"]


def test_chat_stream_wire_format(chat_server: ServeProcess) -> None:
    body = {
        "id": "chat-wire",
        "trigger": "submit-message",
        "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}],
    }
    url = f"{chat_server.url}/v1/agents/helper/chat"
    with httpx.stream("POST", url, json=body, timeout=60) as response:
        assert response.headers["x-vercel-ai-ui-message-stream"] == "v1"
        data = [line[6:] for line in response.iter_lines() if line.startswith("data: ")]
    assert data[-1] == "[DONE]"
    chunks = [json.loads(d) for d in data[:-1]]
    assert chunks[0]["type"] == "start"
    assert chunks[-1] == {"type": "finish", "finishReason": "tool-calls"}
    busy = httpx.post(url, json=body, timeout=30)
    assert busy.status_code == 409
    unknown = httpx.post(f"{chat_server.url}/v1/agents/nobody/chat", json=body, timeout=30)
    assert unknown.status_code == 404
    none = httpx.get(f"{chat_server.url}/v1/agents/helper/chat/never/stream", timeout=30)
    assert none.status_code == 204


KEY = "key-acme-backend"


@pytest.fixture
def keyed_chat(redis_url: str, worker: WorkerProcess) -> Iterator[ServeProcess]:
    env = {"AGENTQ_API_KEYS": f"{hash_key(KEY)} acme"}
    process = ServeProcess(redis_url, agents={"helper": HELPER}, env=env)
    yield process
    process.stop()


def test_a_chat_token_reaches_its_chat_and_nothing_else(keyed_chat: ServeProcess) -> None:
    url = keyed_chat.url
    backend = {"Authorization": f"Bearer {KEY}"}

    def mint(body: dict[str, str]) -> dict[str, str]:
        made = httpx.post(f"{url}/v1/tokens", json=body, headers=backend, timeout=30)
        assert made.status_code == 201, made.text
        return {"Authorization": f"Bearer {made.json()['token']}"}

    def say(chat_id: str, headers: dict[str, str]) -> httpx.Response:
        body = {
            "id": chat_id,
            "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}],
        }
        with httpx.stream(
            "POST", f"{url}/v1/agents/helper/chat", json=body, headers=headers, timeout=60
        ) as response:
            response.read()
        return response

    # The tenant's other chat, started by the backend with its key.
    assert say("other-chat", backend).status_code == 200
    other_run = httpx.get(f"{url}/v1/runs", headers=backend, timeout=30).json()["runs"][0]["id"]

    # The browser's whole useChat session (approval, client tool) on its chat's token.
    report = use_chat(keyed_chat, "mine", mint({"chat": "mine"})["Authorization"][7:])
    assert report["message"]["parts"][-1]["text"] == "All done: 3, teal."

    chat = mint({"chat": "mine"})
    assert httpx.get(f"{url}/v1/runs", headers=chat, timeout=30).status_code == 403
    for path in (f"/v1/runs/{other_run}", f"/v1/runs/{other_run}/events"):
        assert httpx.get(f"{url}{path}", headers=chat, timeout=30).status_code == 403
    assert say("other-chat", chat).status_code == 403
    resume = httpx.get(f"{url}/v1/agents/helper/chat/other-chat/stream", headers=chat, timeout=30)
    assert resume.status_code == 403
    assert httpx.get(f"{url}/v1/batches", headers=chat, timeout=30).status_code == 403

    # A user's token reaches that user's chats only: the same id is another chat.
    alice, bob = mint({"subject": "alice"}), mint({"subject": "bob"})
    assert say("c1", alice).status_code == 200
    assert httpx.get(f"{url}/v1/runs", headers=alice, timeout=30).status_code == 403
    for who in (bob, backend):
        gone = httpx.get(f"{url}/v1/agents/helper/chat/c1/stream", headers=who, timeout=30)
        assert gone.status_code == 204
    mine = httpx.get(f"{url}/v1/agents/helper/chat/c1/stream", headers=alice, timeout=30)
    assert mine.status_code == 200
