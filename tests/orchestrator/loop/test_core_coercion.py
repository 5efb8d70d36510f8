"""Lossless coercion of a call's input to its schema (orchestrator/loop/coercion.py): what
it changes, what it leaves (anything lossy, anything a string may be), and the paths it
reports."""

from __future__ import annotations

from typing import Any

import pytest

from agentq.orchestrator.core.errors import ToolInputError
from agentq.orchestrator.loop.coercion import coerce_input
from agentq.orchestrator.loop.plan import checked_input
from agentq.orchestrator.tools import ToolDef

pytestmark = pytest.mark.unit


def obj(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


INT = {"type": "integer"}
NUM = {"type": "number"}
BOOL = {"type": "boolean"}


@pytest.mark.parametrize(
    ("schema", "value", "expected", "paths"),
    [
        (obj(a=INT), {"a": "2"}, {"a": 2}, ["a"]),
        (obj(a=INT), {"a": "-17"}, {"a": -17}, ["a"]),
        (obj(a=NUM), {"a": "2"}, {"a": 2}, ["a"]),
        (obj(a=NUM), {"a": "2.5"}, {"a": 2.5}, ["a"]),
        (obj(a=NUM), {"a": "-1e3"}, {"a": -1000.0}, ["a"]),
        (obj(a=BOOL), {"a": "true"}, {"a": True}, ["a"]),
        (obj(a=BOOL), {"a": "false"}, {"a": False}, ["a"]),
        (obj(a=obj(b=INT)), {"a": '{"b": "3"}'}, {"a": {"b": 3}}, ["a", "a/b"]),
        (obj(a={"type": "array"}), {"a": "[1, 2]"}, {"a": [1, 2]}, ["a"]),
        (obj(a={"type": "array", "items": INT}), {"a": ["1", 2]}, {"a": [1, 2]}, ["a/0"]),
        (obj(a={"type": ["integer", "null"]}), {"a": "4"}, {"a": 4}, ["a"]),
        (INT, "5", 5, ["(input)"]),
        # lossy or ambiguous: left as sent (validation then says what is wrong)
        (obj(a=INT), {"a": "2.5"}, {"a": "2.5"}, []),
        (obj(a=INT), {"a": "02"}, {"a": "02"}, []),
        (obj(a=INT), {"a": " 2"}, {"a": " 2"}, []),
        (obj(a=INT), {"a": "1e3"}, {"a": "1e3"}, []),
        (obj(a=NUM), {"a": "NaN"}, {"a": "NaN"}, []),
        (obj(a=NUM), {"a": "1e999"}, {"a": "1e999"}, []),
        (obj(a=NUM), {"a": "two"}, {"a": "two"}, []),
        (obj(a=BOOL), {"a": "True"}, {"a": "True"}, []),
        (obj(a=BOOL), {"a": "yes"}, {"a": "yes"}, []),
        (obj(a=BOOL), {"a": "1"}, {"a": "1"}, []),
        (obj(a={"type": "object"}), {"a": "[1]"}, {"a": "[1]"}, []),
        (obj(a={"type": "object"}), {"a": "{oops"}, {"a": "{oops"}, []),
        # a string is allowed there: nothing to coerce
        (obj(a={"type": ["integer", "string"]}), {"a": "2"}, {"a": "2"}, []),
        (obj(a={}), {"a": "2"}, {"a": "2"}, []),
        (obj(a={"anyOf": [INT]}), {"a": "2"}, {"a": "2"}, []),
        # already the right type, or not in the schema
        (obj(a=INT), {"a": 2, "z": "3"}, {"a": 2, "z": "3"}, []),
    ],
)
def test_coercion(schema: dict[str, Any], value: Any, expected: Any, paths: list[str]) -> None:
    coerced, where = coerce_input(schema, value)
    assert coerced == expected
    assert type(coerced) is type(expected)
    assert where == paths


def add_tool(**fields: Any) -> ToolDef:
    schema = obj(a=INT, b=NUM)
    schema["required"] = ["a", "b"]
    return ToolDef(name="add", kind="function", input_schema=schema, **fields)


def test_a_call_is_coerced_then_validated() -> None:
    assert checked_input(add_tool(), '{"a": "2", "b": "0.5"}') == ({"a": 2, "b": 0.5}, ["a", "b"])
    with pytest.raises(ToolInputError, match=r"a: '2\.5' is not of type 'integer'"):
        checked_input(add_tool(), '{"a": "2.5", "b": 1}')


def test_a_tool_may_turn_coercion_off() -> None:
    with pytest.raises(ToolInputError, match="a: '2' is not of type 'integer'"):
        checked_input(add_tool(coerce=False), '{"a": "2", "b": 1}')
