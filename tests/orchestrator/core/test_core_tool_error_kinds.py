"""Every tool error carries its kind: a table per place a pure function makes one, and
the kind carried on to the event, the stored result and the AI SDK stream."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentq.orchestrator.calls.catalogue import call_result, cancel_call_args
from agentq.orchestrator.calls.state import CallField
from agentq.orchestrator.core import errors
from agentq.orchestrator.core.events import parse_event
from agentq.orchestrator.core.messages import ToolResultPart
from agentq.orchestrator.core.model_io import ModelResponse, ProviderToolCall
from agentq.orchestrator.core.run_ids import ParentLink
from agentq.orchestrator.core.tool_errors import ToolErrorKind
from agentq.orchestrator.core.tool_output import bounded_result
from agentq.orchestrator.loop.plan import error_result, plan_step
from agentq.orchestrator.runs.state import MetaField, RunFailure
from agentq.orchestrator.runs.state.failure import FailureKind
from agentq.orchestrator.runs.transitions import result_events
from agentq.orchestrator.spec.run import RunSpec
from agentq.orchestrator.tools import ToolDef
from agentq.serve.chat.ui_stream import UIChunks
from agentq.workers.tools.agent import child_result

pytestmark = pytest.mark.unit

ADD = ToolDef(
    name="add",
    kind="function",
    queue="tools",
    input_schema={
        "type": "object",
        "properties": {"a": {"type": "number"}},
        "required": ["a"],
    },
)


def deep(levels: int) -> Any:
    value: Any = 0
    for _ in range(levels):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (errors.ToolError("x"), ToolErrorKind.EXECUTION),
        (errors.ToolInputError("x"), ToolErrorKind.INVALID_INPUT),
        (errors.ToolTimeoutError("x"), ToolErrorKind.TIMEOUT),
        (errors.ToolOutputTooLargeError("x"), ToolErrorKind.OUTPUT_TOO_LARGE),
    ],
)
def test_a_raised_tool_error_names_its_kind(error: errors.ToolError, kind: ToolErrorKind) -> None:
    assert error.kind == kind


@pytest.mark.parametrize(
    ("name", "arguments", "kind"),
    [
        ("nope", '{"a": 1}', ToolErrorKind.NO_SUCH_TOOL),
        ("add", "{not json", ToolErrorKind.INVALID_INPUT),
        ("add", '{"a": "one"}', ToolErrorKind.INVALID_INPUT),
        ("add", None, ToolErrorKind.INVALID_INPUT),
    ],
)
def test_a_call_answered_at_planning_names_its_kind(
    name: str, arguments: str | None, kind: ToolErrorKind
) -> None:
    spec = RunSpec.model_validate({"model": "openai:gpt-x", "prompt": "hi"})
    response = ModelResponse(
        text="",
        tool_calls=[ProviderToolCall(id="c1", name=name, arguments=arguments)],
        finish_reason="tool-calls",
    )
    (call,) = plan_step(spec, [ADD], 0, response).calls
    assert call.result is not None
    assert (call.result.is_error, call.result.error_kind) == (True, kind)


def test_a_malformed_call_block_is_invalid_input() -> None:
    spec = RunSpec.model_validate({"model": "openai:gpt-x", "prompt": "hi"})
    malformed = ProviderToolCall(id="c1", name="add", arguments="<x", parse_error="unclosed")
    response = ModelResponse(text="", tool_calls=[malformed], finish_reason="tool-calls")
    (call,) = plan_step(spec, [ADD], 0, response).calls
    assert call.result is not None
    assert call.result.error_kind == ToolErrorKind.INVALID_INPUT


@pytest.mark.parametrize(
    ("output", "kind"),
    [
        (b"\xff\xfe", ToolErrorKind.EXECUTION),
        (deep(100), ToolErrorKind.OUTPUT_TOO_LARGE),
        ("x" * 10_000, None),  # cut, not refused: the model reads its head
    ],
)
def test_an_unusable_output_names_its_kind(output: Any, kind: ToolErrorKind | None) -> None:
    part = ToolResultPart(tool_call_id="c1", tool_name="t", output=output)
    bounded = bounded_result(part, 1000)
    assert (bounded.is_error, bounded.error_kind) == (kind is not None, kind)


def test_capping_an_error_keeps_its_kind() -> None:
    denied = error_result("c1", "t", "no " * 1000, ToolErrorKind.DENIED)
    assert bounded_result(denied, 100).error_kind == ToolErrorKind.DENIED


@pytest.mark.parametrize("kind", list(ToolErrorKind))
def test_the_tool_error_event_and_the_ui_chunk_carry_the_kind(kind: ToolErrorKind) -> None:
    result = error_result("c1", "t", "boom", kind)
    (raw,) = result_events("r1", 0, result, stored=False)
    event = parse_event(5, raw)
    assert event.type == "tool-error"
    assert event.kind == kind
    (chunk,) = UIChunks("r1").feed(event)
    assert chunk == {
        "type": "tool-output-error",
        "toolCallId": "c1",
        "errorText": "boom",
        "providerMetadata": {"agentq": {"errorKind": kind.value}},
    }


def test_a_cancelled_call_without_a_run_is_a_cancelled_error() -> None:
    cancelled = cancel_call_args("c1", "t", "the call was cancelled")
    assert json.loads(cancelled.event)["kind"] == "cancelled"
    shown = call_result("c1", {CallField.RESULT: cancelled.result})
    assert shown is not None
    assert shown.error_kind == ToolErrorKind.CANCELLED


@pytest.mark.parametrize(
    ("meta", "kind"),
    [
        (
            {
                MetaField.STATUS: "failed",
                MetaField.ERROR: RunFailure(
                    kind=FailureKind.INTERNAL, message="x"
                ).model_dump_json(),
            },
            ToolErrorKind.EXECUTION,
        ),
        ({MetaField.STATUS: "cancelled"}, ToolErrorKind.CANCELLED),
    ],
)
def test_a_sub_agent_that_did_not_succeed_names_why(
    meta: dict[str, str], kind: ToolErrorKind
) -> None:
    link = ParentLink(run_id="p", step=0, call_id="c1")
    assert child_result("child", meta, link, "helper").error_kind == kind
