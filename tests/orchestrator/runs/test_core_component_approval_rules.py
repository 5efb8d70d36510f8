"""Approval rules and edited inputs through the Python API on the embedded runtime: a
`when` expression and a `@needs_approval` hook pick the calls that wait; an approver's
edited input is checked against the schema, runs, and is recorded in the events."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pydantic import ValidationError

from agentq import tool
from agentq.orchestrator.core.errors import SpecError
from agentq.workers.steps import hooks as step_hooks
from agentq.workers.steps.hooks import needs_approval
from agentq.workers.tools.function_tools import FunctionTool
from tests.support.embedded_runs import TIMEOUT_S, Embedded, all_events, of_type, wait_event
from tests.support.specs import calls, scripted

pytestmark = pytest.mark.component

Start = Callable[..., Embedded]
Paid = list[dict[str, Any]]


@pytest.fixture
def paid() -> Paid:
    return []


@pytest.fixture
def pay(paid: Paid) -> FunctionTool:
    @tool
    def pay(amount: int, to: str) -> str:
        """Pay someone."""
        paid.append({"amount": amount, "to": to})
        return f"paid {amount} to {to}"

    return pay


@pytest.fixture
def asked() -> Iterator[list[tuple[Any, str]]]:
    """Registers `strangers` (a @needs_approval hook) for the test; records its calls."""
    seen: list[tuple[Any, str]] = []

    def strangers(value: Any, tool_name: str) -> bool:
        seen.append((value, tool_name))
        return bool(value["to"] not in ("alice", "bob"))

    before = dict(step_hooks._RULE_HOOKS)
    needs_approval(strangers)
    yield seen
    step_hooks._RULE_HOOKS.clear()
    step_hooks._RULE_HOOKS.update(before)


def pay_spec(rule: Any) -> dict[str, Any]:
    return scripted(
        calls(("pay", {"amount": 5, "to": "bob"}), ("pay", {"amount": 500, "to": "eve"})),
        {"text": "done"},
        tools=[{"type": "function", "name": "pay", "needs_approval": rule}],
    )


@pytest.mark.parametrize("rule", [{"when": "amount > `100`"}, {"hook": "strangers"}])
async def test_a_rule_parks_only_the_calls_it_picks(
    start: Start, pay: FunctionTool, paid: Paid, asked: list[tuple[Any, str]], rule: Any
) -> None:
    async with start([pay]) as client:
        run_id = await client.runs.submit(pay_spec(rule))
        request = await wait_event(client, run_id, of_type("tool-approval-request"))
        await wait_event(client, run_id, of_type("tool-result"))  # the small one ran at once
        parked = await client.runs.result(run_id)
        assert paid == [{"amount": 5, "to": "bob"}]
        assert [p["input"] for p in parked.pending] == [{"amount": 500, "to": "eve"}]
        await client.runs.approve(run_id, request.model_dump()["tool_call_id"])
        result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
    assert result.status == "succeeded", result.error
    assert paid == [{"amount": 5, "to": "bob"}, {"amount": 500, "to": "eve"}]
    if "hook" in rule:
        assert asked == [({"amount": 5, "to": "bob"}, "pay"), ({"amount": 500, "to": "eve"}, "pay")]


async def test_an_approver_edits_the_input(start: Start, pay: FunctionTool, paid: Paid) -> None:
    async with start([pay]) as client:
        run_id = await client.runs.submit(pay_spec({"when": "amount > `100`"}))
        request = await wait_event(client, run_id, of_type("tool-approval-request"))
        call_id = request.model_dump()["tool_call_id"]
        with pytest.raises(SpecError) as refused:
            await client.runs.approve(run_id, call_id, input={"amount": "lots", "to": "eve"})
        assert refused.value.message == (
            "the edited input is refused: Invalid input for tool 'pay': "
            "amount: 'lots' is not of type 'integer'"
        )
        with pytest.raises(SpecError, match="goes with an approval"):
            await client.runs.approve(run_id, call_id, approved=False, input={"amount": 1})
        still = await client.runs.result(run_id)
        assert [p["status"] for p in still.pending] == ["awaiting-approval"]
        await client.runs.approve(run_id, call_id, input={"amount": 50, "to": "eve"})
        result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
        events = await all_events(client, run_id)
    assert result.status == "succeeded", result.error
    assert paid == [{"amount": 5, "to": "bob"}, {"amount": 50, "to": "eve"}]
    assert [r.output for r in result.steps[0].tool_results] == ["paid 5 to bob", "paid 50 to eve"]
    (response,) = [e.model_dump() for e in events if e.type == "tool-approval-response"]
    assert response["approved"] is True
    assert response["original_input"] == {"amount": 500, "to": "eve"}
    assert response["input"] == {"amount": 50, "to": "eve"}


async def test_bad_rules_are_refused_at_submit(start: Start, pay: FunctionTool) -> None:
    async with start([pay]) as client:
        with pytest.raises(ValidationError, match="not a valid JMESPath expression"):
            await client.runs.submit(pay_spec({"when": "amount >"}))
        with pytest.raises(SpecError, match="needs_approval hook 'nobody' is not a hook"):
            await client.runs.submit(pay_spec({"hook": "nobody"}))


async def test_a_rule_that_copies_without_end_fails_the_run_limit(
    start: Start, pay: FunctionTool, paid: Paid
) -> None:
    """A hostile rule (each `[@,@]` doubles the value, to_string walks it) stops at its
    bounds: the run fails `limit`, no call runs, and the worker is free again."""
    evil = "[@,@]" + "|[@,@]" * 79 + "|to_string(@)"
    async with start([pay]) as client:
        result = await client.runs.wait(
            await client.runs.submit(pay_spec({"when": evil})), timeout_s=TIMEOUT_S
        )
    assert result.status == "failed"
    assert result.error is not None
    assert (result.error.kind, result.error.step) == ("limit", 0)
    assert result.error.message.startswith("the expression '[@,@]|[@,@]")
    assert paid == []
