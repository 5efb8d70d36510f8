"""Structured output's pure core: the spec, the mode, parsing, and what a step's answer
means for the run (valid: it ends; invalid: back to the model, then `output-invalid`)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from agentq.orchestrator.core.errors import SpecError
from agentq.orchestrator.core.messages import (
    AssistantMessage,
    Message,
    ToolMessage,
    ToolResultPart,
    UserMessage,
)
from agentq.orchestrator.core.model_io import ModelResponse, ProviderToolCall
from agentq.orchestrator.loop.plan import StepPlan, plan_step
from agentq.orchestrator.output.instructions import OUTPUT_TOOL, RETRY_PREFIX
from agentq.orchestrator.output.judge import StepOutput, attempts_in
from agentq.orchestrator.output.spec import EffectiveMode, OutputSpec, effective_mode
from agentq.orchestrator.output.validation import parse_json_text
from agentq.orchestrator.runs.state import CallStatus, StepAfter
from agentq.orchestrator.spec.resolution import check_tool_references
from agentq.orchestrator.spec.run import RunSpec
from agentq.orchestrator.tools import ToolDef

pytestmark = pytest.mark.unit

INVOICE: dict[str, Any] = {
    "type": "object",
    "properties": {"number": {"type": "string"}, "total": {"type": "number"}},
    "required": ["number", "total"],
}
ADD = ToolDef(name="add", kind="function", queue="tools", input_schema={"type": "object"})


def spec(stop_when: list[Any] | None = None, **output: Any) -> RunSpec:
    return RunSpec.model_validate(
        {
            "model": "openai:gpt-x",
            "prompt": "hi",
            "output": {"schema": INVOICE, **output},
            "stop_when": stop_when or [],
        }
    )


@pytest.mark.parametrize(
    ("schema", "problem"),
    [
        ({"type": "object", "properties": {"a": {"type": "nope"}}}, "not a valid JSON Schema"),
        ({"type": "array"}, "root of an output schema"),
        ({"properties": {}}, "root of an output schema"),
    ],
)
def test_a_bad_schema_is_refused_with_one_line(schema: dict[str, Any], problem: str) -> None:
    with pytest.raises(ValidationError) as caught:
        RunSpec.model_validate(
            {"model": "openai:gpt-x", "prompt": "hi", "output": {"schema": schema}}
        )
    assert problem in str(caught.value)


def test_the_spec_keeps_its_field_names() -> None:
    dumped = spec(mode="tool").model_dump(mode="json", exclude_none=True)
    assert dumped["output"] == {"schema": INVOICE, "mode": "tool", "max_retries": 1}
    with pytest.raises(ValidationError):
        RunSpec.model_validate({"model": "openai:x", "prompt": "hi", "output_schema": INVOICE})


@pytest.mark.parametrize(
    ("mode", "native", "expected"),
    [
        ("auto", True, "native"),
        ("auto", False, "tool"),
        ("native", True, "native"),
        ("native", False, "tool"),
        ("tool", True, "tool"),
        ("prompted", True, "prompted"),
        ("prompted", False, "prompted"),
    ],
)
def test_the_mode_a_step_uses(mode: Any, native: bool, expected: str) -> None:
    assert effective_mode(mode, native) == expected


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('{"a": 1}', {"a": 1}),
        ('  ```json\n{"a": [1]}\n```  ', {"a": [1]}),
        ('```\n{"a": 2}\n```', {"a": 2}),
        ('Here it is: {"a": {"b": 3}} - done', {"a": {"b": 3}}),
    ],
)
def test_json_is_read_from_the_text(text: str, value: Any) -> None:
    assert parse_json_text(text) == value


@pytest.mark.parametrize("text", ["", "no json here", "{broken"])
def test_text_without_json_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not JSON"):
        parse_json_text(text)


def planned(
    mode: EffectiveMode,
    *,
    text: str = "",
    calls: list[tuple[str, Any]] = (),  # type: ignore[assignment]
    attempts: int = 0,
    step: int = 0,
    stop_when: list[Any] | None = None,
    **output: Any,
) -> StepPlan:
    run = spec(stop_when, **output)
    assert run.output is not None
    response = ModelResponse(
        text=text,
        tool_calls=[ProviderToolCall(name=n, arguments=a) for n, a in calls],
        finish_reason="tool-calls" if calls else "stop",
    )
    return plan_step(
        run, [ADD], step, response, output=StepOutput(spec=run.output, mode=mode, attempts=attempts)
    )


GOOD = {"number": "A-1", "total": 12.5}


@pytest.mark.parametrize("mode", ["prompted", "native"])
def test_a_valid_text_answer_ends_the_run_with_its_output(mode: EffectiveMode) -> None:
    plan = planned(mode, text='{"number": "A-1", "total": 12.5}')
    assert plan.output == GOOD
    assert plan.finishes_now
    assert plan.after == StepAfter.FINISH
    assert plan.retry is None
    assert plan.output_failure is None


def test_an_invalid_text_answer_goes_back_to_the_model() -> None:
    plan = planned("prompted", text='{"number": "A-1"}')
    assert plan.output is None
    assert plan.output_failure is None
    assert plan.retry is not None
    assert isinstance(plan.retry.content, str)
    assert plan.retry.content.startswith(RETRY_PREFIX)
    assert "'total' is a required property" in plan.retry.content
    assert not plan.finishes_now  # the retry is the next step's input
    assert plan.after == StepAfter.CONTINUE


def test_retries_spent_fail_the_run_with_the_last_attempt() -> None:
    plan = planned("prompted", text="not json", attempts=1, max_retries=1)
    assert plan.retry is None
    assert plan.output_failure is not None
    assert plan.output_failure.attempt == "not json"
    assert "invalid after 1 retries" in plan.output_failure.message


def test_a_step_with_tool_calls_is_not_judged() -> None:
    plan = planned("prompted", text="let me add", calls=[("add", "{}")])
    assert plan.output is None
    assert plan.retry is None
    assert plan.output_failure is None
    assert [c.status for c in plan.calls] == [CallStatus.QUEUED]


def test_the_final_answer_tool_ends_the_run_and_skips_the_other_calls() -> None:
    plan = planned("tool", calls=[("add", "{}"), (OUTPUT_TOOL, '{"number": "A-1", "total": 12.5}')])
    assert plan.output == GOOD
    add, answer = plan.calls
    assert answer.status == CallStatus.DONE
    assert answer.result is not None
    assert not answer.result.is_error
    assert add.status == CallStatus.DONE
    assert add.result is not None
    assert add.result.is_error
    assert not plan.finishes_now  # the join records both answers, then the run succeeds
    assert plan.after == StepAfter.FINISH


def test_an_invalid_final_answer_is_a_tool_error_the_model_sees() -> None:
    plan = planned("tool", calls=[(OUTPUT_TOOL, '{"number": 7, "total": 1}')])
    (answer,) = plan.calls
    assert answer.status == CallStatus.DONE
    assert answer.result is not None
    assert answer.result.is_error
    assert str(answer.result.output).startswith(RETRY_PREFIX)
    assert "number: 7 is not of type 'string'" in str(answer.result.output)
    assert plan.output is None
    assert plan.output_failure is None
    assert plan.after == StepAfter.CONTINUE


def test_prose_in_tool_mode_is_asked_for_the_call() -> None:
    plan = planned("tool", text="The total is 12.5")
    assert plan.retry is not None
    assert OUTPUT_TOOL in str(plan.retry.content)


def test_a_run_ending_without_an_output_fails() -> None:
    plan = planned("tool", calls=[("add", "{}")], step=9)  # max_steps is 10
    assert plan.output_failure is not None
    assert "max_steps" in plan.output_failure.message


OUTPUT_VALID = [{"any": [{"output_valid": True}, {"step_count_is": 5}]}]


@pytest.mark.parametrize(
    ("mode", "text", "calls"),
    [
        ("prompted", '{"number": "A-1", "total": 12.5}', []),
        ("native", '{"number": "A-1", "total": 12.5}', []),
        ("tool", "", [("add", "{}"), (OUTPUT_TOOL, '{"number": "A-1", "total": 12.5}')]),
    ],
)
def test_output_valid_names_the_valid_output_that_ends_the_run(
    mode: EffectiveMode, text: str, calls: list[tuple[str, Any]]
) -> None:
    plan = planned(mode, text=text, calls=calls, stop_when=OUTPUT_VALID)
    assert plan.output == GOOD
    assert plan.stop_reason == "stop_when: any [output_valid, step_count_is 5]"


@pytest.mark.parametrize(
    ("mode", "text", "calls"),
    [
        ("prompted", '{"number": "A-1"}', []),
        ("prompted", '{"number": "A-1", "total": 12.5}', [("add", "{}")]),  # not judged
        ("tool", "", [(OUTPUT_TOOL, '{"number": 7, "total": 1}')]),
    ],
)
def test_output_valid_does_not_hold_without_a_valid_output(
    mode: EffectiveMode, text: str, calls: list[tuple[str, Any]]
) -> None:
    plan = planned(mode, text=text, calls=calls, stop_when=OUTPUT_VALID)
    assert plan.output is None
    assert plan.stop_reason is None
    assert plan.after == StepAfter.CONTINUE


def test_output_valid_needs_an_output() -> None:
    plain = RunSpec.model_validate(
        {"model": "openai:gpt-x", "prompt": "hi", "stop_when": [{"all": [{"output_valid": True}]}]}
    )
    with pytest.raises(SpecError, match=r"stop_when\[0\].all\[0\].output_valid: the run has no"):
        check_tool_references(plain, [])
    check_tool_references(spec(OUTPUT_VALID), [])


def test_the_attempts_are_counted_from_the_history() -> None:
    retry = f"{RETRY_PREFIX}:\n- (root): bad"
    history: list[Message] = [
        UserMessage(content="hi"),
        AssistantMessage(content="x"),
        UserMessage(content=retry),
        AssistantMessage(content="y"),
        ToolMessage(
            content=[
                ToolResultPart(
                    tool_call_id="1", tool_name=OUTPUT_TOOL, output=retry, is_error=True
                ),
                ToolResultPart(tool_call_id="2", tool_name="add", output="3"),
            ]
        ),
    ]
    assert attempts_in(history) == 2


def test_a_run_tool_cannot_take_the_final_answer_name() -> None:
    clash = ToolDef(name=OUTPUT_TOOL, kind="function", queue="tools")
    with pytest.raises(SpecError, match="final-answer tool"):
        check_tool_references(spec(), [clash])


def test_output_spec_round_trips() -> None:
    assert OutputSpec.model_validate({"schema": INVOICE}).schema_ == INVOICE
