"""The pure core of the loop: plan_step, step_end, validate_input, parse_arguments."""

from __future__ import annotations

from typing import Any

import pytest

from agentq.orchestrator.core.errors import ToolInputError
from agentq.orchestrator.core.messages import TextPart, ToolCallPart, ToolResultPart, Usage
from agentq.orchestrator.core.model_io import ModelResponse, ProviderToolCall
from agentq.orchestrator.core.tool_errors import ToolErrorKind
from agentq.orchestrator.loop.plan import (
    StepPlan,
    error_result,
    offered_tools,
    parse_arguments,
    plan_step,
    status_after_approval,
    step_end,
    validate_input,
)
from agentq.orchestrator.policy.stop_conditions import StepFacts
from agentq.orchestrator.spec.run import RunSpec
from agentq.orchestrator.tools import ToolDef

pytestmark = pytest.mark.unit

ADD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
    "required": ["a", "b"],
    "additionalProperties": False,
}


def fn_tool(name: str, **kw: Any) -> ToolDef:
    kw.setdefault("input_schema", ADD_SCHEMA)
    return ToolDef(name=name, kind="function", queue="tools", **kw)


def client_tool(name: str, **kw: Any) -> ToolDef:
    return ToolDef(name=name, kind="client", queue=None, **kw)


TOOLS = [
    fn_tool("add", timeout_s=7.5),
    fn_tool("mul"),
    fn_tool("risky", needs_approval=True),
    client_tool("ask_user", input_schema={"type": "object"}),
    client_tool("confirm", needs_approval=True),
]


def make_spec(**kw: Any) -> RunSpec:
    body: dict[str, Any] = {"model": "openai:gpt-x", "prompt": "hi"}
    body.update(kw)
    return RunSpec.model_validate(body)


def call(
    name: str, arguments: Any = '{"a": 1, "b": 2}', id: str | None = None, **kw: Any
) -> ProviderToolCall:
    return ProviderToolCall(id=id, name=name, arguments=arguments, **kw)


def plan(
    calls: list[ProviderToolCall], step: int = 0, spec: RunSpec | None = None, text: str = ""
) -> StepPlan:
    response = ModelResponse(
        text=text,
        tool_calls=calls,
        finish_reason="tool-calls" if calls else "stop",
        usage=Usage(input_tokens=3, output_tokens=4, total_tokens=7),
    )
    return plan_step(spec or make_spec(), TOOLS, step, response)


# -- call ids -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("step", "ids", "expected"),
    [
        pytest.param(0, ["a", "b"], ["a", "b"], id="kept"),
        pytest.param(0, [None, None], ["call_0_0", "call_0_1"], id="missing"),
        pytest.param(3, [None, "x"], ["call_3_0", "x"], id="missing-uses-step"),
        pytest.param(0, ["", "x"], ["call_0_0", "x"], id="empty"),
        pytest.param(0, ["x", "x"], ["x", "call_0_1"], id="duplicate"),
        pytest.param(2, ["x", "x", "x"], ["x", "call_2_1", "call_2_2"], id="triplicate"),
    ],
)
def test_plan_step_call_ids(step: int, ids: list[str | None], expected: list[str]) -> None:
    result = plan([call("add", id=i) for i in ids], step=step)
    assert [c.id for c in result.calls] == expected


@pytest.mark.parametrize(
    "ids",
    [
        pytest.param(["call_0_1", None], id="synth-collides-with-earlier-id"),
        pytest.param(["call_0_1", "call_0_1"], id="dup-replacement-collides"),
    ],
)
def test_plan_step_synthesized_ids_are_unique(ids: list[str | None]) -> None:
    result = plan([call("add", id=i) for i in ids])
    got = [c.id for c in result.calls]
    assert len(set(got)) == len(got), got


# -- dispositions -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "status", "queue"),
    [
        ("add", "queued", "tools"),
        ("risky", "awaiting-approval", "tools"),
        ("ask_user", "awaiting-result", None),
        ("confirm", "awaiting-approval", None),
    ],
)
def test_plan_step_disposition(name: str, status: str, queue: str | None) -> None:
    result = plan([call(name, id="c1")])
    (c,) = result.calls
    assert (c.status, c.queue, c.result) == (status, queue, None)
    assert c.input == {"a": 1, "b": 2}
    assert not result.finishes_now
    assert result.local_calls == [c]


def test_plan_step_call_carries_the_tool_timeout() -> None:
    (c,) = plan([call("add")]).calls
    assert c.timeout_s == 7.5


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ('{"a": 1, "b": 2}', {"a": 1, "b": 2}),
        ({"a": 1, "b": 2}, {"a": 1, "b": 2}),
        ('  {"a": 1.5, "b": -2}\n', {"a": 1.5, "b": -2}),
    ],
)
def test_plan_step_parses_arguments(arguments: Any, expected: Any) -> None:
    (c,) = plan([call("add", arguments)]).calls
    assert c.status == "queued"
    assert c.input == expected


def _single_error(calls: list[ProviderToolCall], spec: RunSpec | None = None) -> str:
    result = plan(calls, spec=spec)
    (c,) = result.calls
    assert c.status == "done"
    assert c.result is not None
    assert c.result.is_error
    assert not c.result.provider_executed
    assert c.result.tool_call_id == c.id
    assert c.result.tool_name == calls[0].name
    # An error answered at once is still a local call: the run continues with it.
    assert result.local_calls == [c]
    assert not result.finishes_now
    assert isinstance(c.result.output, str)
    return c.result.output


@pytest.mark.parametrize(
    ("arguments", "fragments"),
    [
        pytest.param('{"a": 1, "b": ', ["Invalid arguments", "could not parse"], id="truncated"),
        pytest.param("not json", ["Invalid arguments", "not json"], id="garbage"),
        pytest.param("{'a': 1}", ["Invalid arguments"], id="single-quotes"),
    ],
)
def test_plan_step_unparseable_arguments_is_an_immediate_error(
    arguments: str, fragments: list[str]
) -> None:
    message = _single_error([call("add", arguments)])
    for fragment in fragments:
        assert fragment in message


def test_plan_step_unparseable_arguments_keep_the_raw_text_as_input() -> None:
    (c,) = plan([call("add", "{oops")]).calls
    assert c.input == "{oops"


@pytest.mark.parametrize(
    ("arguments", "fragments"),
    [
        pytest.param(
            '{"a": "one", "b": 2}',
            ["'add'", "a:", "'one' is not of type 'number'"],
            id="wrong-type",
        ),
        pytest.param('{"a": 1}', ["'add'", "(input)", "'b' is a required property"], id="missing"),
        pytest.param('{"a": 1, "b": 2, "c": 3}', ["'add'", "'c' was unexpected"], id="extra"),
        pytest.param("[1, 2]", ["'add'", "is not of type 'object'"], id="not-an-object"),
        pytest.param(
            "{}", ["'a' is a required property", "'b' is a required property"], id="empty"
        ),
        pytest.param(None, ["'a' is a required property"], id="none-means-empty-object"),
        pytest.param("", ["'a' is a required property"], id="blank-means-empty-object"),
    ],
)
def test_plan_step_schema_violation_names_the_field(arguments: Any, fragments: list[str]) -> None:
    message = _single_error([call("add", arguments)])
    assert message.startswith("Invalid input for tool 'add'")
    for fragment in fragments:
        assert fragment in message


@pytest.mark.parametrize(
    ("spec_kw", "name", "available"),
    [
        pytest.param({}, "nope", "add, ask_user, confirm, mul, risky", id="unknown"),
        pytest.param({"active_tools": ["add", "mul"]}, "risky", "add, mul", id="not-active"),
        pytest.param({"active_tools": []}, "add", "none", id="no-active-tools"),
        pytest.param({"tool_choice": "none"}, "add", "none", id="tool-choice-none"),
    ],
)
def test_plan_step_unavailable_tool_names_available_tools(
    spec_kw: dict[str, Any], name: str, available: str
) -> None:
    message = _single_error([call(name)], spec=make_spec(**spec_kw))
    assert repr(name) in message
    assert f"Available tools: {available}." in message


def test_plan_step_unknown_tool_keeps_its_input() -> None:
    (c,) = plan([call("nope", '{"q": 1}')]).calls
    assert c.name == "nope"
    assert c.input == {"q": 1}


def test_plan_step_mixed_calls_keep_their_order() -> None:
    result = plan(
        [
            call("add", id="1"),
            call("nope", id="2"),
            call("ask_user", "{}", id="3"),
            call("add", "x", id="4"),
        ]
    )
    assert [(c.id, c.status) for c in result.calls] == [
        ("1", "queued"),
        ("2", "done"),
        ("3", "awaiting-result"),
        ("4", "done"),
    ]


# -- provider-executed calls ----------------------------------------------------------


def test_plan_step_provider_executed_call_is_answered_by_the_provider() -> None:
    result = plan(
        [
            call(
                "web_search",
                '{"query": "lisbon"}',
                id="ws1",
                provider_executed=True,
                provider_result={"hits": 3},
            )
        ],
        text="searching",
    )
    (c,) = result.calls
    assert c.status == "done"
    assert c.input == {"query": "lisbon"}
    assert c.result == ToolResultPart(
        tool_call_id="ws1", tool_name="web_search", output={"hits": 3}, provider_executed=True
    )
    assert result.local_calls == []
    assert result.finishes_now
    message = result.assistant_message()
    assert message.content == [
        TextPart(text="searching"),
        ToolCallPart(
            tool_call_id="ws1",
            tool_name="web_search",
            input={"query": "lisbon"},
            provider_executed=True,
        ),
        c.result,
    ]


def test_plan_step_provider_executed_with_a_local_call() -> None:
    result = plan(
        [
            call("web_search", "{}", id="ws", provider_executed=True, provider_result="r"),
            call("add", id="a1"),
        ]
    )
    assert [c.id for c in result.local_calls] == ["a1"]
    assert not result.finishes_now


def test_plan_step_provider_executed_even_when_tool_choice_none() -> None:
    result = plan(
        [call("web_search", "{}", provider_executed=True, provider_result="r")],
        spec=make_spec(tool_choice="none"),
    )
    (c,) = result.calls
    assert c.result is not None
    assert not c.result.is_error


# -- the step as a whole ----------------------------------------------------------------


def test_plan_step_copies_the_response() -> None:
    result = plan([call("add", id="c")], step=4, text="thinking")
    assert result.step == 4
    assert result.text == "thinking"
    assert result.finish_reason == "tool-calls"
    assert result.usage == Usage(input_tokens=3, output_tokens=4, total_tokens=7)


def test_plan_step_without_calls_finishes_now() -> None:
    result = plan([], text="the answer")
    assert result.calls == []
    assert result.finishes_now
    assert result.assistant_message().content == [TextPart(text="the answer")]


def test_assistant_message_lists_every_call() -> None:
    result = plan([call("add", id="a"), call("nope", "{}", id="b")], text="t")
    assert result.assistant_message().content == [
        TextPart(text="t"),
        ToolCallPart(tool_call_id="a", tool_name="add", input={"a": 1, "b": 2}),
        ToolCallPart(tool_call_id="b", tool_name="nope", input={}),
    ]


@pytest.mark.parametrize(
    ("spec_kw", "step", "names", "after"),
    [
        pytest.param({}, 0, ["add"], "continue", id="default"),
        pytest.param({"max_steps": 1}, 0, ["add"], "finish", id="max-steps-1"),
        pytest.param({"max_steps": 3}, 1, ["add"], "continue", id="before-max"),
        pytest.param({"max_steps": 3}, 2, ["add"], "finish", id="at-max"),
        pytest.param(
            {"stop_when": [{"has_tool_call": "mul"}]}, 0, ["add"], "continue", id="other-call"
        ),
        pytest.param(
            {"stop_when": [{"has_tool_call": "mul"}]}, 0, ["add", "mul"], "finish", id="has-call"
        ),
        pytest.param(
            {"stop_when": [{"step_count_is": 2}]}, 0, ["add"], "continue", id="count-before"
        ),
        pytest.param(
            {"stop_when": [{"step_count_is": 2}]}, 1, ["add"], "finish", id="count-reached"
        ),
        pytest.param(
            {"stop_when": [{"has_tool_call": "mul"}, {"step_count_is": 5}]},
            4,
            ["add"],
            "finish",
            id="any-of",
        ),
    ],
)
def test_plan_step_after(spec_kw: dict[str, Any], step: int, names: list[str], after: str) -> None:
    result = plan([call(n) for n in names], step=step, spec=make_spec(**spec_kw))
    assert result.after == after


def test_plan_step_has_tool_call_counts_a_call_with_bad_input() -> None:
    spec = make_spec(stop_when=[{"has_tool_call": "add"}])
    result = plan([call("add", "not json")], spec=spec)
    assert result.after == "finish"


# -- step_end ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec_kw", "step", "names", "stop"),
    [
        ({}, 0, set(), False),
        ({}, 8, set(), False),
        ({}, 9, set(), True),  # default max_steps 10
        ({"max_steps": 1}, 0, set(), True),
        ({"max_steps": 2}, 0, {"add"}, False),
        ({"max_steps": 2}, 1, {"add"}, True),
        ({"max_steps": 2}, 5, set(), True),
        ({"stop_when": [{"has_tool_call": "final"}]}, 0, {"final"}, True),
        ({"stop_when": [{"has_tool_call": "final"}]}, 0, {"add", "final"}, True),
        ({"stop_when": [{"has_tool_call": "final"}]}, 0, {"add"}, False),
        ({"stop_when": [{"has_tool_call": "final"}]}, 0, set(), False),
        ({"stop_when": [{"step_count_is": 1}]}, 0, set(), True),
        ({"stop_when": [{"step_count_is": 3}]}, 1, set(), False),
        ({"stop_when": [{"step_count_is": 3}]}, 2, set(), True),
        ({"max_steps": 50, "stop_when": [{"step_count_is": 3}]}, 3, set(), True),
    ],
)
def test_step_end(spec_kw: dict[str, Any], step: int, names: set[str], stop: bool) -> None:
    facts = StepFacts(step=step, call_names=frozenset(names))
    assert step_end(make_spec(**spec_kw), facts)[0] is stop


# -- offered_tools / status_after_approval / error_result ------------------------------


@pytest.mark.parametrize(
    ("spec_kw", "expected"),
    [
        ({}, ["add", "mul", "risky", "ask_user", "confirm"]),
        ({"active_tools": ["mul", "add"]}, ["add", "mul"]),
        ({"active_tools": []}, []),
        ({"tool_choice": "none"}, []),
        ({"tool_choice": "required"}, ["add", "mul", "risky", "ask_user", "confirm"]),
        ({"tool_choice": {"tool": "mul"}}, ["add", "mul", "risky", "ask_user", "confirm"]),
    ],
)
def test_offered_tools(spec_kw: dict[str, Any], expected: list[str]) -> None:
    assert [t.name for t in offered_tools(make_spec(**spec_kw), TOOLS)] == expected


@pytest.mark.parametrize(
    ("tool", "status"), [(fn_tool("f"), "queued"), (client_tool("c"), "awaiting-result")]
)
def test_status_after_approval(tool: ToolDef, status: str) -> None:
    assert status_after_approval(tool) == status


def test_error_result() -> None:
    assert error_result("c1", "add", "boom", ToolErrorKind.EXECUTION) == ToolResultPart(
        tool_call_id="c1",
        tool_name="add",
        output="boom",
        is_error=True,
        error_kind=ToolErrorKind.EXECUTION,
    )


# -- parse_arguments ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (None, {}),
        ("", {}),
        ("   \n", {}),
        ("{}", {}),
        ('{"a": [1, {"b": null}]}', {"a": [1, {"b": None}]}),
        ("[1, 2]", [1, 2]),
        ("3", 3),
        ('"text"', "text"),
        ({"a": 1}, {"a": 1}),
        ([1], [1]),
    ],
)
def test_parse_arguments(raw: Any, expected: Any) -> None:
    assert parse_arguments(raw) == expected


@pytest.mark.parametrize("raw", ["{", "{'a': 1}", "nope", '{"a": 1} trailing', "{" + "x" * 500])
def test_parse_arguments_error(raw: str) -> None:
    with pytest.raises(ToolInputError, match="Invalid arguments: could not parse") as info:
        parse_arguments(raw)
    # The raw text is quoted, but only its first 200 characters.
    assert raw[:20] in info.value.message
    assert len(info.value.message) < 400


# -- validate_input ----------------------------------------------------------------------

NESTED = {
    "type": "object",
    "properties": {
        "user": {
            "type": "object",
            "properties": {"age": {"type": "integer", "minimum": 0}},
            "required": ["age"],
        },
        "tags": {"type": "array", "items": {"type": "string"}},
        "mode": {"enum": ["fast", "slow"]},
    },
    "required": ["user"],
}


@pytest.mark.parametrize(
    "value",
    [
        {"user": {"age": 3}},
        {"user": {"age": 0}, "tags": ["a"], "mode": "fast"},
    ],
)
def test_validate_input_accepts(value: Any) -> None:
    validate_input(fn_tool("t", input_schema=NESTED), value)


@pytest.mark.parametrize(
    ("value", "fragments"),
    [
        ({}, ["(input): 'user' is a required property"]),
        ({"user": {"age": -1}}, ["user/age: -1 is less than the minimum of 0"]),
        ({"user": {"age": "3"}}, ["user/age: '3' is not of type 'integer'"]),
        ({"user": {"age": 1}, "tags": ["a", 2]}, ["tags/1: 2 is not of type 'string'"]),
        ({"user": {"age": 1}, "mode": "medium"}, ["mode: 'medium' is not one of ['fast', 'slow']"]),
        (
            {"user": {}, "tags": [1], "mode": 0},
            ["user: 'age' is a required property", "tags/0:", "mode:"],
        ),
        ("text", ["(input): 'text' is not of type 'object'"]),
    ],
)
def test_validate_input_names_each_violation(value: Any, fragments: list[str]) -> None:
    with pytest.raises(ToolInputError) as info:
        validate_input(fn_tool("t", input_schema=NESTED), value)
    assert info.value.message.startswith("Invalid input for tool 't': ")
    for fragment in fragments:
        assert fragment in info.value.message


def test_validate_input_reports_at_most_five_violations() -> None:
    schema = {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(8)}}
    with pytest.raises(ToolInputError) as info:
        validate_input(fn_tool("t", input_schema=schema), {f"p{i}": "x" for i in range(8)})
    assert info.value.message.count("is not of type") == 5


@pytest.mark.parametrize(
    "schema",
    [{"type": 12}, {"type": "strin"}, {"properties": 3}],
    ids=["type-int", "unknown-type", "props-int"],
)
def test_validate_input_invalid_schema_is_a_tool_error(schema: dict[str, Any]) -> None:
    with pytest.raises(ToolInputError, match="'t' has an invalid schema"):
        validate_input(fn_tool("t", input_schema=schema), {"a": 1})


def test_validate_input_with_defs_and_refs() -> None:
    schema = {
        "$defs": {
            "P": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}
        },
        "type": "object",
        "properties": {"p": {"$ref": "#/$defs/P"}},
        "required": ["p"],
    }
    validate_input(fn_tool("t", input_schema=schema), {"p": {"x": 1}})
    with pytest.raises(ToolInputError, match="p: 'x' is a required property"):
        validate_input(fn_tool("t", input_schema=schema), {"p": {}})
