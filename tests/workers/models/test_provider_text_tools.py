"""The `TOOL:` / `PARAMETERS:` text format (tool_mode "text"): parsing the model's text,
the "use the X tool" fallback, what the stream holds back, and the history rendered back."""

from __future__ import annotations

import pytest

from agentq.orchestrator.core.errors import ToolInputError
from agentq.orchestrator.core.messages import (
    AssistantMessage,
    TextPart,
    ToolCallPart,
    ToolMessage,
    ToolResultPart,
    UserMessage,
)
from agentq.orchestrator.loop.plan import parse_arguments
from agentq.workers.models.base import OfferedTool
from agentq.workers.models.prompt_tools import HoldBackSink, render_history
from agentq.workers.models.text_tools import MISNAMED, TEXT, parse_calls
from tests.support.sinks import ListSink

pytestmark = pytest.mark.unit

ADD = OfferedTool(
    name="add",
    input_schema={"type": "object", "properties": {"a": {}}, "required": ["a"]},
)
NOW = OfferedTool(name="now", input_schema={"type": "object", "properties": {"tz": {}}})
TOOLS = [ADD, NOW]


@pytest.mark.parametrize(
    ("text", "prose", "calls"),
    [
        ("just an answer", "just an answer", []),
        ('TOOL: add\nPARAMETERS: {"a": 1}', "", [("add", '{"a": 1}')]),
        (
            'Let me add.\n\nTOOL: add\nPARAMETERS: {"a": 1}\n\nThen I will answer.',
            "Let me add.\n\nThen I will answer.",
            [("add", '{"a": 1}')],
        ),
        (
            'TOOL: add\nPARAMETERS: {"a": 1}\nTOOL: now\nPARAMETERS: {}\n'
            'TOOL: add\nPARAMETERS: {"a": 2}',
            "",
            [("add", '{"a": 1}'), ("now", "{}"), ("add", '{"a": 2}')],
        ),
        # JSON over several lines, and in a code fence
        (
            'TOOL: add\nPARAMETERS: {\n  "a": [1,\n 2]\n}\ndone',
            "done",
            [("add", '{\n  "a": [1,\n 2]\n}')],
        ),
        ('TOOL: add\nPARAMETERS: ```json\n{"a": 1}\n```\nok', "ok", [("add", '{"a": 1}')]),
        # indented lines, a quoted name, blank lines between TOOL and PARAMETERS
        ('  TOOL: `add`\n\n  PARAMETERS:   {"a": 1}', "", [("add", '{"a": 1}')]),
        # no PARAMETERS line: no input
        ("TOOL: now\nthat is all", "that is all", [("now", "")]),
        # malformed JSON is kept as written (to the end of its paragraph) for the tool error
        (
            'TOOL: add\nPARAMETERS: {"a": 1,,}\n\nThanks.',
            "Thanks.",
            [("add", '{"a": 1,,}')],
        ),
        (
            "TOOL: add\nPARAMETERS: {oops\nTOOL: now\nPARAMETERS: {}",
            "",
            [("add", "{oops"), ("now", "{}")],
        ),
        # TOOL: inside a line is prose, not a call
        ("The word TOOL: appears here.", "The word TOOL: appears here.", []),
        # the fallback: "use the X tool" calls X with {} when X requires nothing
        ("I will use the now tool.", "I will use the now tool.", [("now", "{}")]),
        ("Let me use the `now` tool", "Let me use the `now` tool", [("now", "{}")]),
        ("I will use the add tool.", "I will use the add tool.", []),
        ("I will use the clock tool.", "I will use the clock tool.", []),
        ("use the now tool, then use the now tool again", None, [("now", "{}")]),
    ],
)
def test_parse_calls(text: str, prose: str | None, calls: list[tuple[str, str]]) -> None:
    remaining, parsed = parse_calls(text, 3, TOOLS)
    if prose is not None:
        assert remaining == prose
    assert [(c.name, c.arguments) for c in parsed] == calls
    assert [c.id for c in parsed] == [f"call_3_{i}" for i in range(len(calls))]
    assert all(c.parse_error is None for c in parsed)


def test_malformed_json_becomes_a_tool_error_the_model_sees() -> None:
    (call,) = parse_calls('TOOL: add\nPARAMETERS: {"a": 1,,}', 0, TOOLS)[1]
    with pytest.raises(ToolInputError, match=r"could not parse '\{\"a\": 1,,\}' as JSON"):
        parse_arguments(call.arguments)


def test_a_tool_line_without_a_name_is_a_parse_error() -> None:
    (call,) = parse_calls("TOOL:\nPARAMETERS: {}", 0, TOOLS)[1]
    assert call.name == MISNAMED
    assert call.parse_error is not None
    assert call.parse_error.startswith("Your TOOL line names no tool: 'TOOL:\\nPARAMETERS: {}'")
    shown = TEXT.render_call(ToolCallPart(tool_call_id="c", tool_name=call.name, input={}))
    assert shown == "TOOL:\nPARAMETERS: {}"


def test_history_is_rendered_back_in_the_same_format() -> None:
    history = render_history(
        [
            UserMessage(content="go"),
            AssistantMessage(
                content=[
                    TextPart(text="ok"),
                    ToolCallPart(tool_call_id="c", tool_name="add", input={"a": 1}),
                    ToolCallPart(tool_call_id="d", tool_name="now", input={}),
                ]
            ),
            ToolMessage(
                content=[
                    ToolResultPart(tool_call_id="c", tool_name="add", output={"sum": 1}),
                    ToolResultPart(tool_call_id="d", tool_name="now", output="no", is_error=True),
                ]
            ),
        ],
        TEXT,
    )
    assert history[1] == AssistantMessage(
        content='ok\nTOOL: add\nPARAMETERS: {"a": 1}\nTOOL: now\nPARAMETERS: {}'
    )
    assert history[2] == UserMessage(content='TOOL RESULT: add\n{"sum": 1}\nTOOL ERROR: now\nno')
    # What the model wrote back parses as the calls it was.
    _, calls = parse_calls(str(history[1].content), 0, TOOLS)
    assert [(c.name, c.arguments) for c in calls] == [("add", '{"a": 1}'), ("now", "{}")]


@pytest.mark.parametrize(
    ("deltas", "shown"),
    [
        (["Hello ", "world"], "Hello world"),
        (["Sure.\n", "\nTO", "OL: add\nPARAMETERS: {}"], "Sure."),
        (["Sure.\nTOOL", ": add"], "Sure."),
        (["Total", ": 3\nTOOLS are nice"], "Total: 3\nTOOLS are nice"),
        (["a\nT", "he end"], "a\nThe end"),
        (["The word TOOL: stays"], "The word TOOL: stays"),
        (["TOOL: add\n", "PARAMETERS: {}\nafter"], ""),
    ],
)
async def test_calls_are_not_streamed(deltas: list[str], shown: str) -> None:
    sink = ListSink()
    held = HoldBackSink(sink, TEXT)
    for delta in deltas:
        await held.text_delta(delta)
    await held.flush()
    assert sink.text == shown
