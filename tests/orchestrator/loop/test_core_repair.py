"""The pure part of tool-call repair: which calls need it, the prompt, applying answers."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentq.orchestrator.core.messages import UserMessage
from agentq.orchestrator.core.model_io import ModelResponse, ProviderToolCall
from agentq.orchestrator.loop.plan import call_ids, input_error, plan_step
from agentq.orchestrator.loop.repair import (
    RepairNeed,
    apply_repairs,
    calls_to_repair,
    repair_messages,
    repair_prompt,
    repaired_arguments,
)
from agentq.orchestrator.spec.run import RunSpec
from agentq.orchestrator.tools import ToolDef

pytestmark = pytest.mark.unit

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
    "required": ["a", "b"],
}
ADD = ToolDef(name="add", kind="function", queue="tools", input_schema=SCHEMA)
ASK = ToolDef(name="ask", kind="client", input_schema={"type": "object"})
SEARCH = ToolDef(name="web_search", kind="provider")
TOOLS = [ADD, ASK, SEARCH]


def spec(repair: dict[str, Any] | None = {"strategy": "reask"}, **kw: Any) -> RunSpec:  # noqa: B006
    model: dict[str, Any] = {"provider": "openai", "name": "m"}
    if repair is not None:
        model["repair"] = repair
    return RunSpec.model_validate({"model": model, "prompt": "hi", **kw})


def call(name: str, arguments: Any, id: str | None = None, **kw: Any) -> ProviderToolCall:
    return ProviderToolCall(id=id, name=name, arguments=arguments, **kw)


@pytest.mark.parametrize(
    ("calls", "expected"),
    [
        pytest.param([call("add", '{"a": 1, "b": 2}')], [], id="valid"),
        pytest.param(
            [call("add", '{"a": 1,')], [(0, "call_3_0", "could not parse")], id="unparseable"
        ),
        pytest.param(
            [call("add", {"a": "one", "b": 2}, id="c1")],
            [(0, "c1", "'one' is not of type 'number'")],
            id="schema-violation",
        ),
        pytest.param(
            [call("add", '{"a": 1}', id="c1"), call("add", '{"a": 1, "b": 2}', id="c2")],
            [(0, "c1", "'b' is a required property")],
            id="only-the-bad-one",
        ),
        pytest.param([call("nope", '{"a": 1,')], [], id="unknown-tool-is-not-repaired"),
        pytest.param([call("web_search", "{", provider_executed=True)], [], id="provider-executed"),
        pytest.param(
            [call("add", "{", id="x"), call("add", "[", id="x")],
            [(0, "x", "could not parse"), (1, "call_3_1", "could not parse")],
            id="ids-as-plan-step-assigns-them",
        ),
    ],
)
def test_calls_to_repair(
    calls: list[ProviderToolCall], expected: list[tuple[int, str, str]]
) -> None:
    response = ModelResponse(tool_calls=calls)
    needs = calls_to_repair(spec(), TOOLS, 3, response)
    assert [(n.index, n.call_id) for n in needs] == [(i, c) for i, c, _ in expected]
    for need, (_, _, fragment) in zip(needs, expected, strict=True):
        assert fragment in need.error
    # The ids are the ones the step's plan gives the calls.
    planned = [c.id for c in plan_step(spec(), TOOLS, 3, response).calls]
    assert planned == call_ids(3, response)


def test_no_policy_no_repair() -> None:
    response = ModelResponse(tool_calls=[call("add", "{")])
    assert calls_to_repair(spec(repair=None), TOOLS, 0, response) == []


def test_inactive_tools_are_not_repaired() -> None:
    response = ModelResponse(tool_calls=[call("add", "{")])
    assert calls_to_repair(spec(active_tools=["ask"]), TOOLS, 0, response) == []


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ('{"a": 1, "b": 2}', None),
        ({"a": 1, "b": 2}, None),
        ('{"a": 1', "could not parse"),
        ({"a": 1}, "'b' is a required property"),
        (None, "'a' is a required property"),
    ],
)
def test_input_error(arguments: Any, error: str | None) -> None:
    found = input_error(ADD, arguments)
    assert (found is None) if error is None else (found is not None and error in found)


def test_repair_prompt_names_the_tool_shows_schema_error_and_arguments() -> None:
    prompt = repair_prompt(ADD, '{"a": one}', "Invalid arguments: could not parse")
    assert "`add`" in prompt
    assert json.dumps(SCHEMA, indent=2) in prompt
    assert "Invalid arguments: could not parse" in prompt
    assert '{"a": one}' in prompt
    assert "only that one call" in prompt


def test_repair_prompt_cuts_huge_arguments() -> None:
    prompt = repair_prompt(ADD, "x" * 10_000, "bad")
    assert "x" * 4000 + "…(truncated)" in prompt
    assert "x" * 4001 not in prompt


def test_repair_messages_append_one_user_turn_and_leave_the_history_alone() -> None:
    history: list[Any] = [UserMessage(content="add 1 and 2")]
    need = RepairNeed(0, "c1", ADD, "{", "could not parse")
    messages = repair_messages(history, need)
    assert messages[:-1] == history
    assert len(history) == 1
    assert isinstance(messages[-1], UserMessage)
    assert "could not parse" in str(messages[-1].content)


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ([call("add", '{"a": 1, "b": 2}')], '{"a": 1, "b": 2}'),
        ([call("other", "{}"), call("add", "{}")], "{}"),
        ([call("other", "{}")], None),
        ([], None),
    ],
)
def test_repaired_arguments_take_the_first_call_of_the_tool(
    answer: list[ProviderToolCall], expected: Any
) -> None:
    need = RepairNeed(0, "c1", ADD, "{", "bad")
    assert repaired_arguments(need, ModelResponse(tool_calls=answer)) == expected


def test_apply_repairs_keeps_ids_names_and_the_other_calls() -> None:
    response = ModelResponse(
        text="t",
        tool_calls=[call("add", "{", id="c1"), call("add", '{"a": 1, "b": 2}', id="c2")],
    )
    fixed = apply_repairs(response, {0: '{"a": 5, "b": 6}'})
    assert [(c.id, c.name, c.arguments) for c in fixed.tool_calls] == [
        ("c1", "add", '{"a": 5, "b": 6}'),
        ("c2", "add", '{"a": 1, "b": 2}'),
    ]
    assert fixed.text == "t"
    assert response.tool_calls[0].arguments == "{"
    assert apply_repairs(response, {}) is response


def test_repair_policy_validation() -> None:
    policy = spec().model.repair
    assert policy is not None
    assert policy.max_attempts == 1
    with pytest.raises(ValueError, match="strategy"):
        spec(repair={"strategy": "guess"})
    with pytest.raises(ValueError, match="max_attempts"):
        spec(repair={"max_attempts": 0})
