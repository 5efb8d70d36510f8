"""A chat turn refused (the tenant at its cap) loses nothing the client sent: a message
held behind the answers it came with stays held when its run is refused, and the chat's
next turn says it once, whether the client sends its last message only or the whole
conversation. Real `agentq serve`, worker and redis-server; plain HTTP posts."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from agentq.orchestrator.client import Client
from agentq.orchestrator.core.messages import UserMessage
from tests.support.infra import WorkerProcess
from tests.support.serve import ServeProcess
from tests.support.specs import scripted

pytestmark = pytest.mark.integration

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
# One run of the tenant's may wait to start: a delayed run takes that place.
LIMITS = json.dumps({"*": {"max_queued": 1}})


@pytest.fixture
def chat_server(redis_url: str, worker: WorkerProcess) -> Iterator[ServeProcess]:
    process = ServeProcess(
        redis_url, agents={"together": TOGETHER}, env={"AGENTQ_TENANT_LIMITS": LIMITS}
    )
    yield process
    process.stop()


def user(id_: str, text: str) -> dict[str, Any]:
    return {"id": id_, "role": "user", "parts": [{"type": "text", "text": text}]}


def post(server: ServeProcess, chat_id: str, messages: list[dict[str, Any]]) -> str:
    """A chat turn; the whole UI message stream it answered, as text."""
    answer = httpx.post(
        f"{server.url}/v1/agents/together/chat",
        json={"id": chat_id, "messages": messages},
        timeout=60,
    )
    assert answer.status_code == 200, answer.text + server.log()
    assert "[DONE]" in answer.text, answer.text + server.log()
    return answer.text


async def _current(redis_url: str, agent_runs: set[str]) -> tuple[str, str | None, list[str]]:
    """The chat's newest run: its id, the call it waits on, and the user's messages it
    started from."""
    async with Client(redis_url) as client:
        page = await client.runs.list(metadata={"agent": "together"})
        newest = next(r.id for r in page.runs if r.id not in agent_runs)
        result = await client.runs.result(newest)
        said = await client.runs.conversation(newest)
    waiting = next((str(p["tool_call_id"]) for p in result.pending), None)
    users = [m.content for m in said if isinstance(m, UserMessage)]
    return newest, waiting, [u if isinstance(u, str) else repr(u) for u in users]


@pytest.mark.parametrize("client_sends", ["last-message", "whole-conversation"])
def test_a_held_message_whose_run_is_refused_is_said_by_the_next_turn(
    chat_server: ServeProcess, redis_url: str, client_sends: str
) -> None:
    chat_id = f"refused-{client_sends}"
    whole = client_sends == "whole-conversation"
    post(chat_server, chat_id, [user("u1", "add 1 and 2")])
    first, call_id, _ = asyncio.run(_current(redis_url, set()))
    assert call_id is not None  # the run waits for the approval of its call
    # The tenant's one queued place taken: the held message's run will be refused.
    delayed = httpx.post(
        f"{chat_server.url}/v1/runs",
        params={"start_at": str(time.time() + 3600)},
        json=scripted({"text": "later"}),
        timeout=30,
    )
    assert delayed.status_code == 201, delayed.text
    add: dict[str, Any] = {
        "type": "tool-add",
        "toolCallId": call_id,
        "state": "approval-responded",
        "input": {"a": 1, "b": 2},
        "approval": {"id": call_id, "approved": True},
    }
    approved = {"id": "a1", "role": "assistant", "parts": [add]}
    earlier = [user("u1", "add 1 and 2")] if whole else []
    post(chat_server, chat_id, [*earlier, approved, user("u2", "and then?")])

    # The approved run finished; the message held behind it found no place.
    async def first_status() -> str:
        async with Client(redis_url) as client:
            return (await client.runs.wait(first, 30)).status

    assert asyncio.run(first_status()) == "succeeded"
    cancelled = httpx.post(f"{chat_server.url}/v1/runs/{delayed.json()['id']}/cancel", timeout=30)
    assert cancelled.status_code == 200, cancelled.text

    answered = {**approved, "parts": [{**add, "state": "output-available"}]}
    if whole:
        post(
            chat_server,
            chat_id,
            [user("u1", "add 1 and 2"), answered, user("u2", "and then?"), user("u3", "more")],
        )
    else:
        post(chat_server, chat_id, [user("u3", "more")])
    _, _, users = asyncio.run(_current(redis_url, {first}))
    # Said once each, in order: the held message kept, a resent one not heard twice.
    assert users == ["add 1 and 2", "and then?", "more"]
