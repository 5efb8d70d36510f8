from __future__ import annotations

import pytest

from agentq.workers.models.sse import SSEEvent, parse_lines

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        (["data: {}", ""], [SSEEvent("{}")]),
        (["data:{}", ""], [SSEEvent("{}")]),
        (["event: ping", "data: {}", ""], [SSEEvent("{}", "ping")]),
        (["data: a", "data: b", ""], [SSEEvent("a\nb")]),
        ([": keep-alive", "", "data: x", ""], [SSEEvent("x")]),
        (["event: lonely", ""], []),
        (["data: no blank line at the end"], [SSEEvent("no blank line at the end")]),
        (["id: 7", "data: x", ""], [SSEEvent("x", id="7")]),
        (["retry: 100", "data: x", "", "data: y", ""], [SSEEvent("x"), SSEEvent("y")]),
        (["data:  two spaces", ""], [SSEEvent(" two spaces")]),
        (["data", ""], [SSEEvent("")]),
        (["event: a", "data: 1", "", "data: 2", ""], [SSEEvent("1", "a"), SSEEvent("2")]),
    ],
)
def test_parse_lines(lines: list[str], expected: list[SSEEvent]) -> None:
    assert parse_lines(lines) == expected
