"""normalize_message (OpenAI shapes in, neutral shapes out) and tool_output_text."""

from __future__ import annotations

from typing import Any

import pytest

from agentq.orchestrator.core.messages import (
    MESSAGE_ADAPTER,
    AssistantMessage,
    TextPart,
    ToolCallPart,
    Usage,
    normalize_message,
    tool_output_text,
)

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param(
            {
                "role": "assistant",
                "content": "Let me add.",
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "add", "arguments": '{"a": 1}'},
                    },
                    {"id": "c2", "type": "function", "function": {"name": "now", "arguments": ""}},
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Let me add."},
                    {
                        "type": "tool-call",
                        "tool_call_id": "c1",
                        "tool_name": "add",
                        "input": {"a": 1},
                    },
                    {"type": "tool-call", "tool_call_id": "c2", "tool_name": "now", "input": ""},
                ],
            },
            id="assistant-tool-calls",
        ),
        pytest.param(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{bad"}}],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "tool-call", "tool_call_id": "c", "tool_name": "f", "input": "{bad"}
                ],
            },
            id="unparseable-arguments-kept-as-text",
        ),
        pytest.param(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": {"x": 1}}}],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "tool-call", "tool_call_id": "c", "tool_name": "f", "input": {"x": 1}}
                ],
            },
            id="object-arguments",
        ),
        pytest.param(
            {"role": "assistant", "content": "hi", "tool_calls": None},
            {"role": "assistant", "content": [{"type": "text", "text": "hi"}]},
            id="null-tool-calls",
        ),
        pytest.param(
            {"role": "tool", "tool_call_id": "c1", "content": "3"},
            {
                "role": "tool",
                "content": [
                    {"type": "tool-result", "tool_call_id": "c1", "tool_name": "", "output": "3"}
                ],
            },
            id="tool",
        ),
        pytest.param(
            {"role": "tool", "tool_call_id": "c1", "name": "add", "content": '{"x": 1}'},
            {
                "role": "tool",
                "content": [
                    {
                        "type": "tool-result",
                        "tool_call_id": "c1",
                        "tool_name": "add",
                        "output": '{"x": 1}',
                    }
                ],
            },
            id="tool-with-name",
        ),
        pytest.param(
            {"role": "user", "content": "hi"},
            {"role": "user", "content": "hi"},
            id="user-passthrough",
        ),
        pytest.param(
            {"role": "assistant", "content": "hi"},
            {"role": "assistant", "content": "hi"},
            id="assistant-passthrough",
        ),
        pytest.param(
            {
                "role": "tool",
                "content": [
                    {"type": "tool-result", "tool_call_id": "c", "tool_name": "t", "output": 1}
                ],
            },
            {
                "role": "tool",
                "content": [
                    {"type": "tool-result", "tool_call_id": "c", "tool_name": "t", "output": 1}
                ],
            },
            id="neutral-tool-passthrough",
        ),
        pytest.param("not a dict", "not a dict", id="non-dict"),
    ],
)
def test_normalize_message(raw: Any, expected: Any) -> None:
    assert normalize_message(raw) == expected


@pytest.mark.parametrize(
    "raw",
    [
        {
            "role": "assistant",
            "content": "x",
            "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c", "content": "ok"},
        {"role": "system", "content": "be nice"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "a"},
                {"type": "media", "media_type": "image/png", "data": "AA=="},
            ],
        },
    ],
)
def test_normalized_messages_validate(raw: dict[str, Any]) -> None:
    message = MESSAGE_ADAPTER.validate_python(normalize_message(raw))
    assert message.role == raw["role"]


def test_assistant_message_helpers() -> None:
    message = AssistantMessage(
        content=[
            TextPart(text="a"),
            ToolCallPart(tool_call_id="c", tool_name="t"),
            TextPart(text="b"),
        ]
    )
    assert message.text() == "ab"
    assert [c.tool_call_id for c in message.tool_calls()] == ["c"]
    assert AssistantMessage(content="plain").text() == "plain"
    assert AssistantMessage(content="plain").tool_calls() == []


@pytest.mark.parametrize(
    ("output", "text"),
    [
        ("plain", "plain"),
        ("", ""),
        ('{"already": "json"}', '{"already": "json"}'),
        (21.0, "21.0"),
        (3, "3"),
        (None, "null"),
        (True, "true"),
        ([1, "a"], '[1, "a"]'),
        ({"city": "Lisboa", "t": "21 °C"}, '{"city": "Lisboa", "t": "21 °C"}'),
        ({"nested": {"x": [None]}}, '{"nested": {"x": [null]}}'),
    ],
)
def test_tool_output_text(output: Any, text: str) -> None:
    assert tool_output_text(output) == text


def test_tool_output_text_falls_back_to_str() -> None:
    class Thing:
        def __str__(self) -> str:
            return "thing"

    assert tool_output_text({"t": Thing()}) == '{"t": "thing"}'


def test_usage_adds_up() -> None:
    total = Usage(input_tokens=1, output_tokens=2, total_tokens=3) + Usage(
        input_tokens=10,
        output_tokens=20,
        total_tokens=30,
        cached_input_tokens=4,
        cache_write_tokens=6,
        reasoning_tokens=5,
    )
    assert total == Usage(
        input_tokens=11,
        output_tokens=22,
        total_tokens=33,
        cached_input_tokens=4,
        cache_write_tokens=6,
        reasoning_tokens=5,
    )
