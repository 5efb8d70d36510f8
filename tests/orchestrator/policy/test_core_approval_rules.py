"""Approval rules, the pure part: `needs_approval`'s forms parsed (a bad expression is one
error on one line), JMESPath truthiness, and the status a planned call gets."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from agentq.orchestrator.core.model_io import ModelResponse, ProviderToolCall
from agentq.orchestrator.loop.plan import Answers, plan_step
from agentq.orchestrator.policy.approval_rules import (
    ApprovalHook,
    ApprovalWhen,
    NeedsApproval,
    asks,
)
from agentq.orchestrator.runs.state import CallStatus
from agentq.orchestrator.spec.run import RunSpec
from agentq.orchestrator.tools import ToolDef

pytestmark = pytest.mark.unit

FORMS: TypeAdapter[Any] = TypeAdapter(NeedsApproval)


@pytest.mark.parametrize(
    ("raw", "parsed"),
    [
        (True, True),
        (False, False),
        (["pay"], ["pay"]),
        ({"when": "amount > `100`"}, ApprovalWhen(when="amount > `100`")),
        ({"hook": "risky"}, ApprovalHook(hook="risky")),
    ],
)
def test_the_forms(raw: Any, parsed: Any) -> None:
    assert FORMS.validate_python(raw) == parsed


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            {"when": "amount >"},
            "not a valid JMESPath expression: Invalid jmespath expression: "
            "Incomplete expression at position 8",
        ),
        ({"when": "`unclosed"}, "not a valid JMESPath expression: Bad jmespath expression"),
        ({"hook": "two words"}, "String should match pattern"),
        ({"other": 1}, "needs_approval is true/false, a list of tool names"),
        (3, "needs_approval is true/false, a list of tool names"),
    ],
)
def test_a_bad_form_is_one_error_on_one_line(raw: Any, message: str) -> None:
    with pytest.raises(ValidationError) as info:
        FORMS.validate_python(raw)
    assert info.value.error_count() == 1
    shown = info.value.errors()[0]["msg"]
    assert message in shown
    assert "\n" not in shown


@pytest.mark.parametrize(
    ("when", "value", "waits"),
    [
        ("amount > `100`", {"amount": 150}, True),
        ("amount > `100`", {"amount": 100}, False),
        ("amount > `100`", {}, False),  # null compared: null, false
        ("to", {"to": "bob"}, True),
        ("to", {"to": ""}, False),  # JMESPath truthiness: "", [], {}, null, false
        ("items", {"items": []}, False),
        ("count", {"count": 0}, True),  # 0 is true in JMESPath
        ("contains(tags, 'prod')", {"tags": ["dev", "prod"]}, True),
        ("amount > `100` || to == 'mallory'", {"amount": 1, "to": "mallory"}, True),
    ],
)
def test_when_is_jmespath_over_the_input(when: str, value: Any, waits: bool) -> None:
    assert asks(ApprovalWhen(when=when), value) is waits


def test_a_hook_rule_is_what_the_hook_answered() -> None:
    rule = ApprovalHook(hook="h")
    assert asks(rule, {}, True)
    assert not asks(rule, {}, False)
    assert not asks(rule, {}, None)  # not asked (an invalid call): nothing to approve


PAY_SCHEMA = {
    "type": "object",
    "properties": {"amount": {"type": "number"}, "to": {"type": "string"}},
    "required": ["amount", "to"],
}


def test_planned_calls_wait_as_their_tool_s_rule_says() -> None:
    tools = [
        ToolDef(
            name="pay",
            kind="function",
            queue="tools",
            input_schema=PAY_SCHEMA,
            approval_rule=ApprovalWhen(when="amount > `100`"),
        ),
        ToolDef(
            name="send",
            kind="function",
            queue="tools",
            approval_rule=ApprovalHook(hook="risky"),
        ),
    ]
    spec = RunSpec.model_validate({"model": "openai:gpt-x", "prompt": "hi"})
    response = ModelResponse(
        tool_calls=[
            ProviderToolCall(id="small", name="pay", arguments='{"amount": 5, "to": "a"}'),
            ProviderToolCall(id="big", name="pay", arguments='{"amount": 500, "to": "a"}'),
            ProviderToolCall(id="bad", name="pay", arguments='{"amount": "x"}'),
            ProviderToolCall(id="s1", name="send", arguments="{}"),
            ProviderToolCall(id="s2", name="send", arguments="{}"),
        ],
        finish_reason="tool-calls",
    )
    answers = Answers(approvals={"s1": True, "s2": False})
    plan = plan_step(spec, tools, 0, response, answers)
    assert {c.id: c.status for c in plan.calls} == {
        "small": CallStatus.QUEUED,
        "big": CallStatus.AWAITING_APPROVAL,
        "bad": CallStatus.DONE,  # invalid input: a tool error at once
        "s1": CallStatus.AWAITING_APPROVAL,
        "s2": CallStatus.QUEUED,
    }
