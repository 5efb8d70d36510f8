"""Double-texting over a real redis-server and a real `agentq worker` process: a new run
on a thread whose run is still going is refused, queued after it, or started at once
with the running one cancelled (interrupt) or cancelled and dropped (rollback), as the
thread or the request says."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentq.orchestrator.client import Client
from agentq.orchestrator.core.errors import ThreadBusyError
from agentq.orchestrator.core.messages import Message, ToolMessage
from tests.support.infra import TOOLS, WorkerProcess, wait_ready
from tests.support.specs import scripted
from tests.support.waiting import eventually_async

pytestmark = pytest.mark.integration

WAIT_S = 30.0


@pytest.fixture
def worker(redis_url: str) -> Iterator[WorkerProcess]:
    process = WorkerProcess(redis_url, "--tools", TOOLS)
    wait_ready(process)
    yield process
    process.stop()


@pytest.fixture
async def client(redis_url: str, worker: WorkerProcess) -> AsyncIterator[Client]:
    async with Client(redis_url) as c:
        yield c


def parks(thread_id: str, prompt: str = "first", **extra: Any) -> dict[str, Any]:
    """A run that adds 1 and 2, then waits for a client tool's result (still going)."""
    return scripted(
        {"tool_calls": [{"name": "add", "input": {"a": 1, "b": 2}, "id": "a1"}]},
        {"tool_calls": [{"name": "ask_user", "input": {}, "id": "q1"}]},
        {"text": "thanks"},
        tools=["add", {"type": "client", "name": "ask_user"}],
        prompt=prompt,
        thread_id=thread_id,
        **extra,
    )


def says(text: str, thread_id: str, prompt: str, **extra: Any) -> dict[str, Any]:
    return scripted({"text": text}, prompt=prompt, thread_id=thread_id, **extra)


async def parked(client: Client, run_id: str) -> None:
    async def status() -> str:
        return (await client.runs.status(run_id)).status

    await eventually_async(status, f"{run_id} awaits its client tool", until="awaiting".__eq__)


def shown(messages: list[Message]) -> str:
    return repr([m.model_dump(mode="json") for m in messages])


async def test_reject_is_the_default_and_a_request_may_ask_for_it(client: Client) -> None:
    first = await client.runs.submit(parks("r"))
    await parked(client, first)
    with pytest.raises(ThreadBusyError):
        await client.runs.submit(says("x", "r", "second"))
    await client.threads.create("r2", double_texting="enqueue")
    going = await client.runs.submit(parks("r2"))
    await parked(client, going)
    with pytest.raises(ThreadBusyError):
        await client.runs.submit(says("x", "r2", "second", double_texting="reject"))
    assert [r.id for r in (await client.threads.get("r2")).runs] == [going]


async def test_enqueue_runs_after_the_current_one(client: Client) -> None:
    await client.threads.create("q", double_texting="enqueue")
    first = await client.runs.submit(parks("q"))
    await parked(client, first)
    second = await client.runs.submit(says("queued answer", "q", "second"))
    view = await client.threads.get("q")
    assert view.queued == [second]
    # Visible at once, waiting for its turn; a follower waits with it.
    assert (await client.runs.status(second)).status == "queued"
    followed = asyncio.create_task(_types(client, second))
    await client.runs.submit_tool_result(first, "q1", "Ada")
    assert (await client.runs.wait(first, WAIT_S)).status == "succeeded"
    assert (await client.runs.wait(second, WAIT_S)).text == "queued answer"
    assert await asyncio.wait_for(followed, WAIT_S) == ["start", "start-step", "finish-step"]
    view = await client.threads.get("q")
    assert view.queued == []
    assert [r.id for r in view.runs] == [first, second]
    # It started from the first run's whole conversation, its client tool's answer too.
    assert "Ada" in shown(view.messages)
    assert "first" in shown(view.messages)
    # Its result holds its own messages only, the thread's history before them.
    result = await client.runs.wait(second, WAIT_S)
    assert "Ada" not in shown(result.messages)


async def _types(client: Client, run_id: str) -> list[str]:
    """The types of the run's events, followed to its end (text deltas and the end left
    out: what is asserted is that the follower saw the start it waited for)."""
    seen: list[str] = []
    async for event in client.runs.events(run_id, follow=True):
        if event.type in ("start", "start-step", "finish-step"):
            seen.append(event.type)
    return seen


async def test_a_queued_run_can_be_cancelled_before_its_turn(client: Client) -> None:
    await client.threads.create("qc", double_texting="enqueue")
    first = await client.runs.submit(parks("qc"))
    await parked(client, first)
    dropped = await client.runs.submit(says("never said", "qc", "second"))
    third = await client.runs.submit(says("third answer", "qc", "third"))
    assert (await client.threads.get("qc")).queued == [dropped, third]
    await client.runs.cancel(dropped, "changed my mind")
    assert (await client.runs.status(dropped)).status == "cancelled"
    await client.runs.submit_tool_result(first, "q1", "Ada")
    assert (await client.runs.wait(third, WAIT_S)).text == "third answer"
    view = await client.threads.get("qc")
    assert view.queued == []
    assert [r.id for r in view.runs] == [first, third]
    assert "never said" not in shown(view.messages)
    assert (await client.runs.status(dropped)).status == "cancelled"


async def test_interrupt_ends_the_run_at_its_step_end_and_continues_it(
    client: Client, tmp_path: Path
) -> None:
    started, gate = tmp_path / "started", tmp_path / "gate"
    first = await client.runs.submit(
        scripted(
            {"tool_calls": [{"name": "hold_until", "input": held(started, gate), "id": "h1"}]},
            {"text": "never said"},
            tools=["hold_until"],
            prompt="first",
            thread_id="i",
        )
    )
    await eventually_async(started.exists, "the first run's tool call is in flight")
    second = await client.runs.submit(
        says("moved on", "i", "never mind", double_texting="interrupt")
    )
    # The first run's call goes on; the new run waits for its step to end.
    assert (await client.runs.status(first)).status == "running"
    assert (await client.runs.status(second)).status == "queued"
    gate.touch()
    assert (await client.runs.wait(second, WAIT_S)).text == "moved on"
    ended = await client.runs.wait(first, WAIT_S)
    assert ended.status == "cancelled"
    # Its call finished and was recorded; no step began after it.
    assert len(ended.steps) == 1
    view = await client.threads.get("i")
    assert [r.id for r in view.runs] == [first, second]
    assert [r.status for r in view.runs] == ["cancelled", "succeeded"]
    results = [p.output for m in view.messages if isinstance(m, ToolMessage) for p in m.content]
    assert results == ["released"]
    history = shown(view.messages)
    assert "never said" not in history
    assert history.index("first") < history.index("released") < history.index("never mind")


def held(started: Path, gate: Path) -> dict[str, str]:
    return {"started": str(started), "gate": str(gate)}


async def test_interrupt_ends_a_run_waiting_on_the_outside_at_once(client: Client) -> None:
    first = await client.runs.submit(parks("w"))
    await parked(client, first)
    second = await client.runs.submit(
        says("moved on", "w", "never mind", double_texting="interrupt")
    )
    assert (await client.runs.status(first)).status == "cancelled"
    assert (await client.runs.wait(second, WAIT_S)).text == "moved on"
    view = await client.threads.get("w")
    assert [r.status for r in view.runs] == ["cancelled", "succeeded"]
    history = shown(view.messages)
    # The interrupted run's steps so far (its add and result), not the call left open.
    results = [p.output for m in view.messages if isinstance(m, ToolMessage) for p in m.content]
    assert results == [3.0]
    assert "ask_user" not in history
    assert history.index("first") < history.index("never mind")


async def test_rollback_cancels_the_run_and_drops_it_from_the_thread(client: Client) -> None:
    kept = await client.runs.submit(says("hello", "b", "kept"))
    await client.runs.wait(kept, WAIT_S)
    dropped = await client.runs.submit(parks("b", prompt="regretted"))
    await parked(client, dropped)
    third = await client.runs.submit(says("again", "b", "instead", double_texting="rollback"))
    assert (await client.runs.status(dropped)).status == "cancelled"
    await client.runs.wait(third, WAIT_S)
    view = await client.threads.get("b")
    assert [r.id for r in view.runs] == [kept, third]
    history = shown(view.messages)
    assert "kept" in history
    assert "instead" in history
    assert "regretted" not in history
