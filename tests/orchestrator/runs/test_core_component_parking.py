"""Parked calls (approval, client tools), their state errors, and cancellation."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from agentq import tool
from agentq.orchestrator.client import Client
from agentq.orchestrator.core import events as ev
from agentq.orchestrator.core import keys
from agentq.orchestrator.core.errors import RunNotFoundError, RunStateError
from agentq.workers.tools.function_tools import FunctionTool
from tests.support.embedded_runs import (
    TIMEOUT_S,
    Embedded,
    ModelLog,
    all_events,
    call_ids,
    of_type,
    tool_message_parts,
    until,
    wait_event,
)
from tests.support.sample_tools import add
from tests.support.specs import calls, scripted

pytestmark = pytest.mark.component

Start = Callable[..., Embedded]

Executed = list[dict[str, Any]]


@pytest.fixture
def executed() -> Executed:
    """The transfers the test's `transfer` tool made."""
    return []


@pytest.fixture
def transfer(executed: Executed) -> FunctionTool:
    @tool
    def transfer(amount: int, to: str) -> str:
        """Move money (needs a human's approval)."""
        executed.append({"amount": amount, "to": to})
        return f"sent {amount} to {to}"

    return transfer


APPROVED_TRANSFER = {"type": "function", "name": "transfer", "needs_approval": True}
ASK = {
    "type": "client",
    "name": "ask_user",
    "description": "Ask the user a question.",
    "input_schema": {
        "type": "object",
        "properties": {"question": {"type": "string"}},
        "required": ["question"],
    },
}


def approval_spec(**extra: Any) -> dict[str, Any]:
    return scripted(
        calls(("transfer", {"amount": 5, "to": "bob"})),
        {"text": "done"},
        tools=[APPROVED_TRANSFER],
        **extra,
    )


async def park(client: Client, spec: dict[str, Any], event_type: str) -> tuple[str, str]:
    """Submit and wait until the run parks; returns (run id, parked call id)."""
    run_id = await client.runs.submit(spec)
    if event_type == "tool-approval-request":
        event = await wait_event(client, run_id, of_type(event_type))
    else:
        await wait_event(client, run_id, of_type("finish-step", step=0))
        event = await wait_event(client, run_id, of_type("tool-call", step=0))
    assert isinstance(event, ev.ToolApprovalRequest | ev.ToolCall)
    return run_id, event.tool_call_id


# -- approval ---------------------------------------------------------------------


async def test_a_call_needing_approval_parks_the_run(
    start: Start, transfer: FunctionTool, executed: Executed
) -> None:
    async with start([transfer]) as client:
        run_id, call_id = await park(client, approval_spec(), "tool-approval-request")
        parked = await client.runs.result(run_id)
        events = await all_events(client, run_id)

    assert parked.status == "awaiting"
    assert parked.pending == [
        {
            "step": 0,
            "tool_call_id": call_id,
            "tool_name": "transfer",
            "input": {"amount": 5, "to": "bob"},
            "status": "awaiting-approval",
        }
    ]
    request = [e.model_dump() for e in events if e.type == "tool-approval-request"]
    assert request == [
        {
            **request[0],
            "step": 0,
            "tool_call_id": call_id,
            "tool_name": "transfer",
            "input": {"amount": 5, "to": "bob"},
        }
    ]
    assert not any(e.type in ("tool-running", "tool-result", "tool-error") for e in events)
    assert executed == []


async def test_approve_runs_the_call(
    start: Start, model_log: ModelLog, transfer: FunctionTool, executed: Executed
) -> None:
    async with start([transfer]) as client:
        run_id, call_id = await park(client, approval_spec(), "tool-approval-request")
        await client.runs.approve(run_id, call_id)
        result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
        events = await all_events(client, run_id)

    assert result.status == "succeeded", result.error
    assert executed == [{"amount": 5, "to": "bob"}]
    (res,) = result.steps[0].tool_results
    assert (res.output, res.is_error) == ("sent 5 to bob", False)
    response = [e.model_dump() for e in events if e.type == "tool-approval-response"]
    assert [(r["tool_call_id"], r["approved"]) for r in response] == [(call_id, True)]
    assert result.pending == []


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        ("too much money", "The user denied the call to 'transfer': too much money"),
        (None, "The user denied the call to 'transfer'."),
    ],
)
async def test_deny_is_a_tool_error_and_the_tool_never_runs(
    start: Start,
    model_log: ModelLog,
    reason: str | None,
    expected: str,
    transfer: FunctionTool,
    executed: Executed,
) -> None:
    async with start([transfer]) as client:
        run_id, call_id = await park(client, approval_spec(), "tool-approval-request")
        await client.runs.approve(run_id, call_id, approved=False, reason=reason)
        result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
        events = await all_events(client, run_id)

    assert result.status == "succeeded", result.error
    assert executed == []
    (res,) = result.steps[0].tool_results
    assert (res.output, res.is_error) == (expected, True)
    (part,) = tool_message_parts(model_log.request(1).messages)
    assert (part.output, part.is_error) == (expected, True)
    assert not any(e.type == "tool-running" for e in events)
    errors = [e.model_dump() for e in events if e.type == "tool-error"]
    assert [(e["tool_call_id"], e["error"]) for e in errors] == [(call_id, expected)]


async def test_two_approvals_in_one_step_join_once(
    start: Start, model_log: ModelLog, transfer: FunctionTool, executed: Executed
) -> None:
    spec = scripted(
        calls(
            ("transfer", {"amount": 1, "to": "a"}),
            ("transfer", {"amount": 2, "to": "b"}),
            ("add", {"a": 1, "b": 2}),
        ),
        {"text": "done"},
        tools=[APPROVED_TRANSFER, "add"],
    )
    async with start([transfer, add]) as client:
        run_id = await client.runs.submit(spec)
        await wait_event(client, run_id, of_type("finish-step", step=0))
        first, second = call_ids(await all_events(client, run_id), "tool-approval-request")
        await client.runs.approve(run_id, second, approved=False, reason="no")
        assert (await client.runs.result(run_id)).status == "awaiting"
        await client.runs.approve(run_id, first)
        result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
        events = await all_events(client, run_id)

    assert result.status == "succeeded", result.error
    assert executed == [{"amount": 1, "to": "a"}]
    assert [(r.output, r.is_error) for r in result.steps[0].tool_results] == [
        ("sent 1 to a", False),
        ("The user denied the call to 'transfer': no", True),
        (3.0, False),
    ]
    assert [e.step for e in events if e.type == "start-step"] == [0, 1]
    assert [c.step for c in model_log.calls] == [0, 1]


async def test_approving_twice_is_a_state_error(start: Start) -> None:
    gate = asyncio.Event()

    @tool
    async def hold() -> str:
        await asyncio.wait_for(gate.wait(), TIMEOUT_S)
        return "held"

    spec = scripted(
        calls(("hold", {})),
        {"text": "done"},
        tools=[{"type": "function", "name": "hold", "needs_approval": True}],
    )
    async with start([hold]) as client:
        run_id, call_id = await park(client, spec, "tool-approval-request")
        await client.runs.approve(run_id, call_id)
        # The call is queued or running now: not awaiting approval any more.
        with pytest.raises(RunStateError, match="not awaiting approval"):
            await client.runs.approve(run_id, call_id)
        with pytest.raises(RunStateError, match="not awaiting approval"):
            await client.runs.approve(run_id, call_id, approved=False)
        with pytest.raises(RunStateError, match="not awaiting a result"):
            await client.runs.submit_tool_result(run_id, call_id, "forged")
        gate.set()
        result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
        # The run has ended: nothing waits any more.
        with pytest.raises(RunStateError, match="has ended"):
            await client.runs.approve(run_id, call_id)
    assert result.status == "succeeded"
    assert result.steps[0].tool_results[0].output == "held"


# -- client tools -------------------------------------------------------------------


def client_spec(**extra: Any) -> dict[str, Any]:
    return scripted(
        calls(("ask_user", {"question": "which city?"})), {"text": "thanks"}, tools=[ASK], **extra
    )


async def test_a_client_tool_parks_until_its_result_is_posted(
    start: Start, model_log: ModelLog
) -> None:
    async with start([]) as client:
        run_id, call_id = await park(client, client_spec(), "tool-call")
        parked = await client.runs.result(run_id)
        assert parked.status == "awaiting"
        assert parked.pending == [
            {
                "step": 0,
                "tool_call_id": call_id,
                "tool_name": "ask_user",
                "input": {"question": "which city?"},
                "status": "awaiting-result",
            }
        ]
        assert [t.name for t in model_log.request(0).tools] == ["ask_user"]
        assert model_log.request(0).tools[0].input_schema == ASK["input_schema"]
        await client.runs.submit_tool_result(run_id, call_id, {"city": "Porto"})
        result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
        events = await all_events(client, run_id)

    assert result.status == "succeeded", result.error
    (res,) = result.steps[0].tool_results
    assert (res.tool_call_id, res.output, res.is_error) == (call_id, {"city": "Porto"}, False)
    (part,) = tool_message_parts(model_log.request(1).messages)
    assert part.output == {"city": "Porto"}
    results = [e.model_dump() for e in events if e.type == "tool-result"]
    assert [(r["tool_call_id"], r["output"]) for r in results] == [(call_id, {"city": "Porto"})]


@pytest.mark.parametrize(
    ("output", "text"),
    [("the user closed the dialog", "the user closed the dialog"), ({"code": 7}, '{"code": 7}')],
)
async def test_a_client_tool_error(
    start: Start, model_log: ModelLog, output: Any, text: str
) -> None:
    async with start([]) as client:
        run_id, call_id = await park(client, client_spec(), "tool-call")
        await client.runs.submit_tool_result(run_id, call_id, output, is_error=True)
        result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
        events = await all_events(client, run_id)

    assert result.status == "succeeded", result.error
    (res,) = result.steps[0].tool_results
    assert (res.output, res.is_error) == (text, True)
    (part,) = tool_message_parts(model_log.request(1).messages)
    assert (part.output, part.is_error) == (text, True)
    assert [e.model_dump()["error"] for e in events if e.type == "tool-error"] == [text]


async def test_a_client_tool_needing_approval(start: Start) -> None:
    spec = scripted(
        calls(("ask_user", {"question": "q"})),
        {"text": "ok"},
        tools=[{**ASK, "needs_approval": True}],
    )
    async with start([]) as client:
        run_id, call_id = await park(client, spec, "tool-approval-request")
        with pytest.raises(RunStateError, match="not awaiting a result"):
            await client.runs.submit_tool_result(run_id, call_id, "early")
        await client.runs.approve(run_id, call_id)
        after = await client.runs.result(run_id)
        assert after.status == "awaiting"
        assert [p["status"] for p in after.pending] == ["awaiting-result"]
        await client.runs.submit_tool_result(run_id, call_id, "answer")
        result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
    assert result.status == "succeeded", result.error
    assert result.steps[0].tool_results[0].output == "answer"


async def test_posting_to_a_call_that_does_not_wait_is_a_state_error(start: Start) -> None:
    spec = scripted(
        calls(
            ("ask_user", {"question": "a"}),
            ("ask_user", {"question": "b"}),
            ("add", {"a": 1, "b": 1}),
        ),
        {"text": "done"},
        tools=[ASK, "add"],
    )
    async with start([add]) as client:
        run_id = await client.runs.submit(spec)
        await wait_event(client, run_id, of_type("tool-result", tool_name="add"))
        first, second, added = call_ids(await all_events(client, run_id), "tool-call")
        with pytest.raises(RunStateError, match="not awaiting approval"):
            await client.runs.approve(run_id, first)
        with pytest.raises(RunStateError, match="not awaiting a result"):
            await client.runs.submit_tool_result(run_id, added, "forged")
        with pytest.raises(RunStateError, match="no call 'nope'"):
            await client.runs.submit_tool_result(run_id, "nope", "x")
        await client.runs.submit_tool_result(run_id, first, "A")
        with pytest.raises(RunStateError, match="not awaiting a result"):
            await client.runs.submit_tool_result(run_id, first, "again")
        assert (await client.runs.result(run_id)).status == "awaiting"
        await client.runs.submit_tool_result(run_id, second, "B")
        result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
        with pytest.raises(RunStateError):
            await client.runs.submit_tool_result(run_id, second, "late")
        with pytest.raises(RunNotFoundError):
            await client.runs.submit_tool_result("no-such-run", first, "x")
    assert result.status == "succeeded"
    assert [r.output for r in result.steps[0].tool_results] == ["A", "B", 2.0]


# -- cancellation ------------------------------------------------------------------


async def test_cancel_stops_a_running_tool_and_the_run(start: Start, model_log: ModelLog) -> None:
    started = asyncio.Event()
    cancelled = asyncio.Event()

    @tool
    async def long_job() -> str:
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "finished"

    spec = scripted(calls(("long_job", {})), {"text": "never"}, tools=["long_job"])
    async with start([long_job]) as client:
        run_id = await client.runs.submit(spec)
        await until(started)
        assert await client.runs.cancel(run_id, reason="changed my mind") == "cancelled"
        result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
        await until(cancelled)  # asyncio cancellation reached the tool
        events = await all_events(client, run_id)
        next_job = await client.redis.exists(keys.arq_job(keys.model_job_id(run_id, 1)))
        again = await client.runs.cancel(run_id)

    assert result.status == "cancelled"
    assert again == "cancelled"
    abort = events[-1].model_dump()
    assert (abort["type"], abort["status"], abort["reason"]) == (
        "abort",
        "cancelled",
        "changed my mind",
    )
    assert [e.type for e in events].count("abort") == 1
    assert not any(e.type in ("tool-result", "tool-error") for e in events)
    assert [e.step for e in events if e.type == "start-step"] == [0]
    assert [c.step for c in model_log.calls] == [0]
    assert next_job == 0
    assert result.steps[0].tool_results == []


async def test_cancel_a_parked_run(
    start: Start, transfer: FunctionTool, executed: Executed
) -> None:
    async with start([transfer]) as client:
        run_id, call_id = await park(client, approval_spec(), "tool-approval-request")
        assert await client.runs.cancel(run_id) == "cancelled"
        with pytest.raises(RunStateError, match="has ended"):
            await client.runs.approve(run_id, call_id)
        result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
        events = await all_events(client, run_id)
    assert result.status == "cancelled"
    assert events[-1].type == "abort"
    assert executed == []


async def test_cancel_a_finished_run_changes_nothing(start: Start) -> None:
    spec = scripted({"text": "quick"})
    async with start([]) as client:
        run_id = await client.runs.submit(spec)
        await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
        assert await client.runs.cancel(run_id) == "succeeded"
        result = await client.runs.result(run_id)
        events = await all_events(client, run_id)
        with pytest.raises(RunNotFoundError):
            await client.runs.cancel("no-such-run")
    assert result.status == "succeeded"
    assert events[-1].type == "finish"
