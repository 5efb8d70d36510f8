from __future__ import annotations

import pytest

from agentq.orchestrator.core.messages import (
    AssistantMessage,
    TextPart,
    ToolCallPart,
    ToolMessage,
    ToolResultPart,
    UserMessage,
)
from agentq.workers.models.prompt_tools import (
    MALFORMED,
    XML,
    HoldBackSink,
    parse_calls,
    render_history,
)
from tests.support.sinks import ListSink

pytestmark = pytest.mark.unit

CALL = '<tool_use>\n<name>add</name>\n<arguments>{"a": 1}</arguments>\n</tool_use>'


@pytest.mark.parametrize(
    ("text", "prose", "calls"),
    [
        ("just an answer", "just an answer", []),
        (f"Let me add.\n{CALL}", "Let me add.", [("add", '{"a": 1}')]),
        (
            '<tool_use><name> add </name><arguments>\n {"a":1} \n</arguments></tool_use>',
            "",
            [("add", '{"a":1}')],
        ),
        (f"```xml\n{CALL}\n```", "", [("add", '{"a": 1}')]),
        (
            '<tool_use><name>add</name><arguments>```json\n{"a": 2}\n```</arguments></tool_use>',
            "",
            [("add", '{"a": 2}')],
        ),
        (f"{CALL}\n{CALL.replace('add', 'mul')}", "", [("add", '{"a": 1}'), ("mul", '{"a": 1}')]),
        (
            "<tool_use><name>add</name><arguments>{oops</arguments></tool_use>",
            "",
            [("add", "{oops")],
        ),
        (
            "<tool_use><arguments>{}</arguments></tool_use>",
            "",
            [(MALFORMED, "<tool_use><arguments>{}</arguments></tool_use>")],
        ),
        (
            '<tool_use><name>add</name><arguments>{"a": 1}</arguments>',
            "",
            [("add", '{"a": 1}')],
        ),
        (
            "<tool_use><name>add</name>",
            "",
            [(MALFORMED, "<tool_use><name>add</name>")],
        ),
    ],
)
def test_parse_calls(text: str, prose: str, calls: list[tuple[str, str]]) -> None:
    remaining, parsed = parse_calls(text, step=2)
    assert remaining == prose
    assert [(c.name, c.arguments) for c in parsed] == calls
    assert [c.id for c in parsed] == [f"call_2_{i}" for i in range(len(calls))]


@pytest.mark.parametrize(
    ("block", "problem"),
    [
        ("<tool_use><arguments>{}</arguments></tool_use>", "it has no <name> element"),
        (
            "<tool_use><name> </name><arguments>{}</arguments></tool_use>",
            "its <name> element is empty",
        ),
        ('<tool_use><name>add</name>\n{"a": 1}</tool_use>', "it has no <arguments> element"),
    ],
)
def test_a_malformed_block_carries_its_problem_and_the_raw_block(block: str, problem: str) -> None:
    (call,) = parse_calls(f"Trying.\n{block}", step=0)[1]
    assert call.parse_error is not None
    assert call.parse_error.startswith(
        f"Your <tool_use> block could not be parsed: {problem}. The block was:\n{block}\n"
    )
    assert "<name>TOOL_NAME</name>" in call.parse_error


def test_a_long_malformed_block_is_cut_in_the_error() -> None:
    block = "<tool_use><name>add</name>" + "x" * 5000 + "</tool_use>"
    (call,) = parse_calls(block, step=0)[1]
    assert call.parse_error is not None
    assert call.arguments == block
    assert "…(truncated)" in call.parse_error
    assert len(call.parse_error) < 2300


def test_history_is_rendered_as_text() -> None:
    history = render_history(
        [
            UserMessage(content="go"),
            AssistantMessage(
                content=[
                    TextPart(text="ok"),
                    ToolCallPart(tool_call_id="c", tool_name="add", input={"a": 1}),
                ]
            ),
            ToolMessage(
                content=[
                    ToolResultPart(tool_call_id="c", tool_name="add", output={"sum": 1}),
                    ToolResultPart(
                        tool_call_id="d", tool_name="div", output="by zero", is_error=True
                    ),
                ]
            ),
        ],
        XML,
    )
    assert history[1] == AssistantMessage(content=f"ok\n{CALL}")
    assert history[2] == UserMessage(
        content='<tool_result name="add">\n{"sum": 1}\n</tool_result>\n'
        '<tool_error name="div">\nby zero\n</tool_error>'
    )


@pytest.mark.parametrize(
    ("deltas", "shown"),
    [
        (["Hello ", "world"], "Hello world"),
        (["Sure. <to", "ol_use><name>x"], "Sure."),
        (["a <b> c"], "a <b> c"),
        (["x <", "tool", "_use>..."], "x"),
        (["price < 3"], "price < 3"),
    ],
)
async def test_tool_blocks_are_not_streamed(deltas: list[str], shown: str) -> None:
    sink = ListSink()
    held = HoldBackSink(sink, XML)
    for delta in deltas:
        await held.text_delta(delta)
    await held.flush()
    # Whitespace streamed before a block cannot be taken back; the final text is stripped.
    assert "".join(sink.deltas).rstrip() == shown
