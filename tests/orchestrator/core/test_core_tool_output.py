"""Any tool output becomes plain, bounded JSON data or a tool error (pure)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from agentq.orchestrator.core.messages import ToolResultPart
from agentq.orchestrator.core.tool_output import (
    MAX_DEPTH,
    bounded_result,
    capped,
    jsonable,
    progress_value,
)

pytestmark = pytest.mark.unit


def nested(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = {"down": value}
    return value


@dataclasses.dataclass
class Point:
    x: float
    y: float


class Opaque:
    def __str__(self) -> str:
        return "<opaque>"


class Broken:
    def __str__(self) -> str:
        raise RuntimeError("no")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        (True, True),
        (3, 3),
        (1.5, 1.5),
        (float("nan"), "NaN"),
        (float("inf"), "Infinity"),
        (float("-inf"), "-Infinity"),
        ("héllo", "héllo"),
        ("\ud800x", "?x"),
        (b"text", "text"),
        ((1, 2), [1, 2]),
        ({1: "a", (2, 3): "b"}, {"1": "a", "(2, 3)": "b"}),
        (Point(1, 2), {"x": 1, "y": 2}),
        (Opaque(), "<opaque>"),
        (Broken(), "<unprintable Broken>"),
        ([{"v": float("nan")}], [{"v": "NaN"}]),
        (nested(MAX_DEPTH - 1), nested(MAX_DEPTH - 1)),
    ],
)
def test_outputs_become_plain_json(value: Any, expected: Any) -> None:
    out = jsonable(value)
    assert out == expected
    json.dumps(out, allow_nan=False)  # strict JSON, encodable as UTF-8
    json.dumps(out, ensure_ascii=False).encode("utf-8")


def result(output: Any, is_error: bool = False) -> ToolResultPart:
    return ToolResultPart(tool_call_id="c1", tool_name="t", output=output, is_error=is_error)


@pytest.mark.parametrize(
    ("output", "says"),
    [
        (b"\xff\xfe binary", "not UTF-8 text"),
        ({"x": nested(300)}, "nests deeper than"),
    ],
)
def test_unusable_outputs_are_tool_errors(output: Any, says: str) -> None:
    bounded = bounded_result(result(output), 1_000_000)
    assert bounded.is_error
    assert says in bounded.output
    assert "'t'" in bounded.output


def test_a_self_referencing_output_is_a_tool_error() -> None:
    loop: list[Any] = []
    loop.append(loop)
    assert bounded_result(result(loop), 1000).is_error


@pytest.mark.parametrize("output", ["é" * 5000, {"rows": ["x" * 100] * 100}])
def test_large_outputs_are_cut_with_a_marker_within_the_limit(output: Any) -> None:
    bounded = bounded_result(result(output), 2000)
    assert not bounded.is_error
    assert isinstance(bounded.output, str)
    assert len(bounded.output.encode("utf-8")) <= 2000
    assert "truncated by agentq" in bounded.output
    assert "limit is 2,000" in bounded.output


def test_errors_are_capped_too() -> None:
    bounded = bounded_result(result("boom " * 10_000, is_error=True), 500)
    assert bounded.is_error
    assert len(bounded.output.encode("utf-8")) <= 500


def test_outputs_within_the_limit_are_unchanged() -> None:
    assert capped({"a": [1, 2]}, 100) == ({"a": [1, 2]}, False)
    assert bounded_result(result({"a": 1}), 100).output == {"a": 1}


def test_progress_values_are_small_and_never_raise() -> None:
    assert "unusable" in progress_value(b"\xff")
    assert len(progress_value("x" * 100_000)) < 17_000
