"""Threads on the embedded runtime: a run continues its thread's history, one run holds
the turn, a failed submit gives it back, and a thread is its tenant's alone."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from agentq.orchestrator.core import keys
from agentq.orchestrator.core.errors import (
    RunConflictError,
    ThreadBusyError,
    ThreadNotFoundError,
)
from agentq.orchestrator.core.messages import AssistantMessage, Message, UserMessage
from agentq.orchestrator.core.run_ids import tenant_run_id
from agentq.workers.tools.function_tools import FunctionTool
from tests.support.embedded_runs import TIMEOUT_S, Embedded, ModelLog, of_type, wait_event
from tests.support.specs import scripted

pytestmark = pytest.mark.component

Start = Callable[[Sequence[FunctionTool]], Embedded]


def _texts(messages: list[Message]) -> list[tuple[str, str]]:
    """Each user and assistant message's text."""
    out: list[tuple[str, str]] = []
    for m in messages:
        if isinstance(m, UserMessage | AssistantMessage):
            parts = [m.content] if isinstance(m.content, str) else m.content
            text = "".join(p if isinstance(p, str) else getattr(p, "text", "") for p in parts)
            out.append((m.role, text))
    return out


async def test_a_run_on_a_thread_starts_from_its_history(start: Start, model_log: ModelLog) -> None:
    log = model_log
    async with start([]) as client:
        first = await client.runs.submit(scripted({"text": "hello"}, prompt="hi", thread_id="t1"))
        await client.runs.wait(first, TIMEOUT_S)
        second = await client.runs.submit(
            scripted({"text": "again"}, prompt="more", thread_id="t1")
        )
        await client.runs.wait(second, TIMEOUT_S)
        # What the model was sent in the second run's step: the thread's history first.
        sent = _texts(list(log.calls[-1].request.messages))
        assert sent == [
            ("user", "hi"),
            ("assistant", "hello"),
            ("user", "more"),
        ]
        view = await client.threads.get("t1")
        assert view.status == "idle"
        assert [r.id for r in view.runs] == [first, second]
        assert view.current_run == second
        assert _texts(view.messages)[-1] == ("assistant", "again")
        # The second run's spec holds its own message only; the history is by reference.
        meta = await client.runs.store.meta(second)
        assert "hi" not in meta["spec"]
        # The thread expires with the retention.
        assert 0 < await client.redis.ttl(keys.thread("t1")) <= client.settings.retention_s
        assert [t.id for t in await client.threads.list()] == ["t1"]


async def test_one_run_holds_the_turn_and_a_refused_run_gives_it_back(start: Start) -> None:
    parked = scripted(
        {"tool_calls": [{"name": "ask_user", "input": {}, "id": "c1"}]},
        {"text": "done"},
        tools=[{"type": "client", "name": "ask_user"}],
        thread_id="t2",
    )
    async with start([]) as client:
        thread_id = await client.threads.create("t2", metadata={"user": "u1"})
        assert thread_id == "t2"
        busy = await client.runs.submit(parked)
        await wait_event(client, busy, of_type("tool-call"))
        with pytest.raises(ThreadBusyError, match="in progress"):
            await client.runs.submit(scripted({"text": "x"}, thread_id="t2"))
        view = await client.threads.get("t2")
        assert view.status == "awaiting"
        assert view.metadata == {"user": "u1"}
        assert [r.id for r in view.runs] == [busy]
        await client.runs.submit_tool_result(busy, "c1", "Ada")
        await client.runs.wait(busy, TIMEOUT_S)
        # A run whose id is taken by another spec is refused: the thread is as it was.
        await client.runs.submit(scripted({"text": "a"}, id="mine", thread_id="t2"))
        await client.runs.wait("mine", TIMEOUT_S)
        with pytest.raises(RunConflictError):
            await client.runs.submit(scripted({"text": "b"}, id="mine", thread_id="t2"))
        view = await client.threads.get("t2")
        assert [r.id for r in view.runs] == [busy, "mine"]
        # The same run submitted again is the same run, not a second turn.
        await client.runs.submit(scripted({"text": "a"}, id="mine", thread_id="t2"))
        assert [r.id for r in (await client.threads.get("t2")).runs] == [busy, "mine"]


async def test_a_thread_is_its_tenants_alone(start: Start, model_log: ModelLog) -> None:
    log = model_log
    async with start([]) as client:
        run = await client.runs.submit(
            scripted({"text": "secret"}, prompt="acme's words", thread_id="t3"), tenant="acme"
        )
        await client.runs.wait(run, TIMEOUT_S)
        with pytest.raises(ThreadNotFoundError):
            await client.threads.get("t3", tenant="globex")
        assert await client.threads.list("globex") == []
        # Another tenant's run on the same name starts a thread of its own.
        other = await client.runs.submit(
            scripted({"text": "fresh"}, prompt="globex's words", thread_id="t3"), tenant="globex"
        )
        await client.runs.wait(other, TIMEOUT_S)
        assert _texts(list(log.calls[-1].request.messages)) == [("user", "globex's words")]
        assert [r.id for r in (await client.threads.get("t3", tenant="acme")).runs] == [run]
        # Nor does naming acme's namespaced thread reach it.
        namespaced = scripted({"text": "x"}, thread_id=tenant_run_id("acme", "t3"))
        with pytest.raises(ValueError, match="namespaces"):
            await client.runs.submit(namespaced, tenant="globex")
