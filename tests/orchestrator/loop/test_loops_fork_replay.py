"""Fork and replay on the embedded runtime: a fork copies the first N steps (a client
tool's posted result included) and continues live with a patched spec; a replay of an
unchanged run finds nothing, and finds the step whose system prompt changed."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

import pytest

from agentq.orchestrator.core.errors import SpecError
from agentq.workers.tools.function_tools import FunctionTool, tool
from tests.support.embedded_runs import (
    TIMEOUT_S,
    Embedded,
    ModelLog,
    all_events,
    of_type,
    wait_event,
)
from tests.support.specs import calls, scripted

pytestmark = pytest.mark.component

Start = Callable[[Sequence[FunctionTool]], Embedded]


@tool
def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


def client_tool_spec() -> dict[str, object]:
    return scripted(
        {"tool_calls": [{"name": "ask_user", "input": {"q": "color?"}, "id": "q1"}]},
        calls(("add", {"a": 1, "b": 2})),
        {"text": "blue, and 3"},
        tools=["add", {"type": "client", "name": "ask_user"}],
        system="original",
    )


async def test_a_fork_of_a_run_that_used_a_client_tool_continues_live(
    start: Start, model_log: ModelLog
) -> None:
    async with start([add]) as client:
        original = await client.runs.submit(client_tool_spec())
        await wait_event(client, original, of_type("finish-step", step=0))
        await client.runs.submit_tool_result(original, "q1", "blue")
        done = await client.runs.wait(original, timeout_s=TIMEOUT_S)
        assert done.status == "succeeded", done.error
        before = len(model_log.calls)

        forked = await client.runs.fork(original, 1, {"system": "patched"})
        result = await asyncio.wait_for(client.runs.wait(forked), TIMEOUT_S)
        events = await all_events(client, forked)

    assert result.status == "succeeded", result.error
    assert result.origin == {"run_id": original, "step": 1}
    assert events[0].model_dump()["forked_from"] == {"run_id": original, "step": 1}
    # Step 0 (the client tool and its posted result) was copied, not asked again.
    assert [s.index for s in result.steps] == [0, 1, 2]
    assert result.steps[0].tool_results[0].output == "blue"
    assert not any(
        e.type == "tool-approval-request" or getattr(e, "step", None) == 0 for e in events[1:]
    )
    live = [c for c in model_log.calls[before:]]
    assert [c.step for c in live] == [1, 2]  # script[k] answers step k
    assert all(c.request.system == "patched" for c in live)
    assert result.text == "blue, and 3"
    assert result.usage.input_tokens == done.usage.input_tokens  # step 0 copied, 1-2 the same


async def test_a_fork_past_the_run_is_refused(start: Start) -> None:
    async with start([add]) as client:
        run_id = await client.runs.submit(scripted({"text": "hi"}))
        await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
        with pytest.raises(SpecError, match="--at-step must be between 0 and 0"):
            await client.runs.fork(run_id, 3)


async def test_a_retry_is_a_new_run_of_the_same_spec_from_the_start(
    start: Start, model_log: ModelLog
) -> None:
    spec = scripted(calls(("add", {"a": 1, "b": 2})), {"text": "3"}, tools=["add"], id="mine")
    async with start([add]) as client:
        original = await client.runs.submit(spec)
        done = await client.runs.wait(original, timeout_s=TIMEOUT_S)
        before = len(model_log.calls)
        retried = await client.runs.retry(original)
        result = await asyncio.wait_for(client.runs.wait(retried), TIMEOUT_S)

    assert retried != original  # the spec's id is the original's, not the retry's
    assert result.status == "succeeded", result.error
    assert result.origin == {"run_id": original, "step": 0}
    assert [c.step for c in model_log.calls[before:]] == [0, 1]  # every step asked again
    assert (result.text, result.usage) == (done.text, done.usage)


async def test_replay_finds_nothing_unless_the_system_prompt_changed(start: Start) -> None:
    spec = scripted(
        calls(("add", {"a": 1, "b": 2})),
        {"text": "3"},
        tools=["add"],
        system="be exact",
        steps=[{"when": {"step": 1}, "system": "answer now"}],
        context={"keep_last_messages": 1, "strategy": "drop_tool_results"},
    )
    async with start([add]) as client:
        run_id = await client.runs.submit(spec)
        await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
        same = await client.runs.replay(run_id)
        changed = await client.runs.replay(run_id, {"system": "be vague"})
        tools_off = await client.runs.replay(run_id, {"tool_choice": "none"})

    assert same.steps == 2
    assert same.divergences == []
    # Step 1's rule sets its own system prompt: only step 0 sent the changed one.
    assert [(d.step, d.what) for d in changed.divergences] == [(0, "system")]
    assert "step 0: system differs" in changed.divergences[0].line()
    whats = {(d.step, d.what) for d in tools_off.divergences}
    assert {(0, "tools"), (0, "tool_choice"), (0, "path")} <= whats
