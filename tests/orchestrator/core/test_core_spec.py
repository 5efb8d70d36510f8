"""RunSpec validation: every refusal names the field it is about."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from agentq.orchestrator.core.messages import (
    AssistantMessage,
    SystemMessage,
    ToolMessage,
    UserMessage,
)
from agentq.orchestrator.policy.model_ref import ModelRef
from agentq.orchestrator.policy.stop_conditions import HasToolCall, StepCountIs
from agentq.orchestrator.spec.run import RunSpec, ToolChoiceTool
from agentq.orchestrator.tools.client import ClientToolSpec
from agentq.orchestrator.tools.code import CodeToolSpec
from agentq.orchestrator.tools.function import FunctionToolSpec

pytestmark = pytest.mark.unit

SCRIPT = [{"text": "hi"}]


def spec(**kw: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "openai:gpt-4o", "prompt": "hello"}
    body.update(kw)
    return {k: v for k, v in body.items() if v is not None}


def errors(body: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(ValidationError) as info:
        RunSpec.model_validate(body)
    return [(".".join(str(p) for p in e["loc"]), e["msg"]) for e in info.value.errors()]


# -- accepted ------------------------------------------------------------------------


def test_defaults() -> None:
    s = RunSpec.model_validate(spec())
    assert s.model == ModelRef(provider="openai", name="gpt-4o")
    assert s.model.label == "openai:gpt-4o"
    assert (s.tools, s.tool_choice, s.active_tools, s.stop_when) == ([], "auto", None, [])
    assert (s.max_steps, s.tool_timeout_s, s.metadata, s.id) == (10, 60.0, {}, None)
    assert s.initial_messages() == [UserMessage(content="hello")]


@pytest.mark.parametrize(
    ("model", "provider", "name"),
    [
        ("openai:gpt-4o", "openai", "gpt-4o"),
        ("anthropic:claude-x", "anthropic", "claude-x"),
        ("openai:org/model:tag", "openai", "org/model:tag"),
        ({"provider": "openai", "name": "m", "base_url": "http://h/v1"}, "openai", "m"),
        ({"provider": "scripted", "script": SCRIPT}, "scripted", "scripted"),
        ({"provider": "scripted", "name": "demo", "script": []}, "scripted", "demo"),
    ],
)
def test_model_forms(model: Any, provider: str, name: str) -> None:
    s = RunSpec.model_validate(spec(model=model))
    assert (s.model.provider, s.model.name) == (provider, name)


def test_scripted_script_is_parsed() -> None:
    s = RunSpec.model_validate(
        spec(
            model={
                "provider": "scripted",
                "script": [{"tool_calls": [{"name": "add", "input": {"a": 1}}]}, {"text": "done"}],
            }
        )
    )
    assert s.model.script is not None
    assert s.model.script[0].tool_calls[0].name == "add"
    assert s.model.script[1].text == "done"


def test_tools_and_conditions_parse() -> None:
    s = RunSpec.model_validate(
        spec(
            tools=[
                {"type": "function", "name": "add", "needs_approval": True, "timeout_s": 2},
                {
                    "type": "client",
                    "name": "ask",
                    "description": "d",
                    "input_schema": {"type": "object"},
                },
                {"type": "code", "language": "python"},
            ],
            tool_choice={"tool": "add"},
            stop_when=[{"has_tool_call": "ask"}, {"step_count_is": 3}],
            id="run-1.a.b_c",
        )
    )
    assert s.tools[0] == FunctionToolSpec(name="add", needs_approval=True, timeout_s=2)
    assert isinstance(s.tools[1], ClientToolSpec)
    assert isinstance(s.tools[2], CodeToolSpec)
    assert s.tools[2].tool_name == "run_python"
    assert s.tool_choice == ToolChoiceTool(tool="add")
    assert s.stop_when == [HasToolCall(has_tool_call="ask"), StepCountIs(step_count_is=3)]
    assert s.id == "run-1.a.b_c"


def test_openai_shaped_messages_are_normalized() -> None:
    s = RunSpec.model_validate(
        spec(
            prompt=None,
            messages=[
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "add 1 and 2"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "add", "arguments": '{"a":1,"b":2}'},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": "3"},
                {"role": "user", "content": [{"type": "text", "text": "thanks"}]},
            ],
        )
    )
    msgs = s.initial_messages()
    assert [type(m) for m in msgs] == [
        SystemMessage,
        UserMessage,
        AssistantMessage,
        ToolMessage,
        UserMessage,
    ]
    assistant = msgs[2]
    assert isinstance(assistant, AssistantMessage)
    (tc,) = assistant.tool_calls()
    assert (tc.tool_call_id, tc.tool_name, tc.input) == ("c1", "add", {"a": 1, "b": 2})
    tool_msg = msgs[3]
    assert isinstance(tool_msg, ToolMessage)
    assert (tool_msg.content[0].tool_call_id, tool_msg.content[0].output) == ("c1", "3")


def test_json_round_trip() -> None:
    s = RunSpec.model_validate(spec(tools=[{"type": "function", "name": "add"}], metadata={"k": 1}))
    again = RunSpec.model_validate_json(s.model_dump_json(exclude_none=True))
    assert again == s


# -- refused -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "field", "fragment"),
    [
        pytest.param(
            spec(model="gpt-4o"), "model", "not of the form 'provider:name'", id="model-no-colon"
        ),
        pytest.param(
            spec(model="openai:"), "model", "not of the form 'provider:name'", id="model-no-name"
        ),
        pytest.param(
            spec(model=":gpt"), "model", "not of the form 'provider:name'", id="model-no-provider"
        ),
        pytest.param(
            spec(model="no pe:x"), "model.provider", "should match pattern", id="provider-syntax"
        ),
        pytest.param(
            spec(model={"provider": "openai"}), "model", "needs a 'name'", id="model-without-name"
        ),
        pytest.param(
            spec(model="scripted:x"),
            "model",
            "scripted provider needs a 'script'",
            id="scripted-no-script",
        ),
        pytest.param(
            spec(model={"provider": "openai", "name": "m", "script": SCRIPT}),
            "model",
            "only for the scripted",
            id="script-elsewhere",
        ),
        pytest.param(
            spec(model={"provider": "openai", "name": "m", "api_key": "sk"}),
            "model.api_key",
            "Extra inputs",
            id="model-extra",
        ),
        pytest.param(
            spec(model={"provider": "openai", "name": "m", "timeout_s": 0}),
            "model.timeout_s",
            "greater than 0",
            id="model-timeout",
        ),
        pytest.param(
            spec(model={"provider": "scripted", "script": [{"txt": "x"}]}),
            "model.script.0.txt",
            "Extra inputs",
            id="script-step-extra",
        ),
        pytest.param(
            spec(prompt=None), "", "needs a 'prompt' or a non-empty 'messages'", id="no-input"
        ),
        pytest.param(
            spec(prompt=None, messages=[]),
            "",
            "needs a 'prompt' or a non-empty 'messages'",
            id="empty-messages",
        ),
        pytest.param(
            spec(messages=[{"role": "user", "content": "x"}]),
            "",
            "either 'prompt' or 'messages'",
            id="prompt-and-messages",
        ),
        pytest.param(
            spec(prompt=None, messages=[{"role": "robot", "content": "x"}]),
            "messages.0",
            "does not match",
            id="bad-role",
        ),
        pytest.param(
            spec(prompt=None, messages=[{"role": "user"}]),
            "messages.0.user.content",
            "Field required",
            id="no-content",
        ),
        pytest.param(spec(id="a b"), "id", "1-128 characters", id="id-space"),
        pytest.param(spec(id=""), "id", "1-128 characters", id="id-empty"),
        pytest.param(spec(id="x" * 129), "id", "1-128 characters", id="id-too-long"),
        pytest.param(spec(id="a/b"), "id", "1-128 characters", id="id-slash"),
        # ':' separates key parts and braces are hash tags: an id could name another
        # run's keys (`k:events` against `k`).
        pytest.param(spec(id="k:events"), "id", "1-128 characters", id="id-colon"),
        pytest.param(spec(id="{k}"), "id", "1-128 characters", id="id-braces"),
        pytest.param(
            spec(tools=[{"type": "function"}]),
            "tools.0.name",
            "Field required",
            id="tool-no-name",
        ),
        pytest.param(spec(tools=[{"name": "x"}]), "tools.0", "'type'", id="tool-no-type"),
        pytest.param(
            spec(tools=[{"type": "weird", "name": "x"}]), "tools.0", "'weird'", id="tool-bad-type"
        ),
        pytest.param(
            spec(tools=[{"type": "function", "name": "x", "timeout_s": 0}]),
            "tools.0.timeout_s",
            "greater than 0",
            id="tool-timeout",
        ),
        pytest.param(
            spec(tools=[{"type": "function", "name": "x", "input_schema": {}}]),
            "tools.0.input_schema",
            "Extra inputs",
            id="tool-extra",
        ),
        pytest.param(
            spec(tools=[{"type": "client"}]),
            "tools.0.name",
            "Field required",
            id="client-no-name",
        ),
        pytest.param(
            spec(tools=[{"type": "code", "language": "ruby"}]),
            "tools.0.language",
            "'python'",
            id="code-language",
        ),
        pytest.param(spec(tool_choice="always"), "tool_choice", "", id="tool-choice"),
        pytest.param(
            spec(max_steps=0), "max_steps", "greater than or equal to 1", id="max-steps-0"
        ),
        pytest.param(
            spec(max_steps=1001), "max_steps", "less than or equal to 1000", id="max-steps-big"
        ),
        pytest.param(spec(stop_when=[{"step_count_is": 0}]), "stop_when.0", "", id="step-count-0"),
        pytest.param(spec(stop_when=[{"unknown": 1}]), "stop_when.0", "", id="stop-unknown"),
        pytest.param(
            spec(tool_timeout_s=-1), "tool_timeout_s", "greater than 0", id="tool-timeout-s"
        ),
        pytest.param(spec(temperature=0.2), "temperature", "Extra inputs", id="unknown-field"),
    ],
)
def test_refused(body: dict[str, Any], field: str, fragment: str) -> None:
    found = errors(body)
    matching = [msg for loc, msg in found if loc == field or loc.startswith(field + ".")]
    assert matching, f"no error at {field!r}: {found}"
    assert any(fragment in msg for msg in matching), found


def test_client_tool_with_an_invalid_schema_is_refused() -> None:
    found = errors(
        spec(tools=[{"type": "client", "name": "ask", "input_schema": {"type": "strin"}}])
    )
    assert any(loc.startswith("tools.0") for loc, _ in found)
