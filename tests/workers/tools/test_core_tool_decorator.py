"""`@tool`: kind, name, description, schema from hints, and `bind`."""

from __future__ import annotations

import types
from collections.abc import AsyncIterator
from typing import Any, Literal

import pytest
from pydantic import BaseModel

from agentq import ToolContext
from agentq.orchestrator.core.errors import ToolInputError
from agentq.orchestrator.loop.plan import validate_input
from agentq.orchestrator.tools import ToolDef
from agentq.workers.tools.function_tools import FunctionTool, make_tool, tool, tools_in

pytestmark = pytest.mark.unit


class Point(BaseModel):
    x: int
    y: int = 0


@tool
def add(a: float, b: float) -> float:
    """Add two numbers.

    Both may be fractions.
    """
    return a + b


@tool
async def greet(name: str, excited: bool = False) -> str:
    """Say hello."""
    return name + ("!" if excited else "")


@tool
async def countdown(n: int = 3) -> AsyncIterator[str]:
    for i in range(n, 0, -1):
        yield str(i)
    yield "liftoff"


@tool
def norm(
    p: Point, scale: float = 1.0, label: str | None = None, mode: Literal["l1", "l2"] = "l2"
) -> float:
    """Length of a point."""
    return (abs(p.x) + abs(p.y)) * scale


@tool(name="renamed", description="Explicit.")
def documented() -> int:
    """Ignored docstring."""
    return 1


def test_kinds() -> None:
    assert [t.kind for t in (add, greet, countdown, norm)] == ["sync", "async", "asyncgen", "sync"]


def test_name_and_description() -> None:
    assert (add.name, add.description) == ("add", "Add two numbers.\n\nBoth may be fractions.")
    assert (greet.name, greet.description) == ("greet", "Say hello.")
    assert (countdown.name, countdown.description) == ("countdown", "")
    assert (documented.name, documented.description) == ("renamed", "Explicit.")


@pytest.mark.parametrize(
    ("t", "schema"),
    [
        (
            add,
            {
                "type": "object",
                "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                "required": ["a", "b"],
                "additionalProperties": False,
            },
        ),
        (
            greet,
            {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "excited": {"type": "boolean", "default": False},
                },
                "required": ["name"],
                "additionalProperties": False,
            },
        ),
        (
            countdown,
            {
                "type": "object",
                "properties": {"n": {"type": "integer", "default": 3}},
                "additionalProperties": False,
            },
        ),
        (documented, {"type": "object", "properties": {}, "additionalProperties": False}),
    ],
)
def test_schema_from_hints(t: FunctionTool, schema: dict[str, Any]) -> None:
    assert t.input_schema == schema


def test_schema_with_a_pydantic_model_and_defaults() -> None:
    s = norm.input_schema
    assert "title" not in s
    assert s["required"] == ["p"]
    assert s["additionalProperties"] is False
    assert s["properties"]["p"] == {"$ref": "#/$defs/Point"}
    point = s["$defs"]["Point"]
    assert point["properties"]["x"]["type"] == "integer"
    assert point["properties"]["y"]["default"] == 0
    assert point["required"] == ["x"]
    assert s["properties"]["scale"] == {"type": "number", "default": 1.0}
    assert s["properties"]["label"] == {
        "anyOf": [{"type": "string"}, {"type": "null"}],
        "default": None,
    }
    assert s["properties"]["mode"] == {"enum": ["l1", "l2"], "type": "string", "default": "l2"}


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ({"p": {"x": 1}}, True),
        ({"p": {"x": 1, "y": 2}, "scale": 2, "label": None, "mode": "l1"}, True),
        ({"p": {"x": "1"}}, False),
        ({"p": {}}, False),
        ({"p": {"x": 1}, "mode": "l3"}, False),
        ({"p": {"x": 1}, "extra": 1}, False),
    ],
)
def test_the_schema_validates_like_the_loop_does(value: Any, ok: bool) -> None:
    tool_def = ToolDef(name="norm", kind="function", input_schema=norm.input_schema, queue="tools")
    if ok:
        validate_input(tool_def, value)
    else:
        with pytest.raises(ToolInputError):
            validate_input(tool_def, value)


@pytest.mark.parametrize(
    ("t", "value", "expected"),
    [
        (add, {"a": 1, "b": 2.5}, {"a": 1.0, "b": 2.5}),
        (add, {"a": "1", "b": 2}, {"a": 1.0, "b": 2.0}),
        (greet, {"name": "Ann"}, {"name": "Ann", "excited": False}),
        (greet, {"name": "Ann", "excited": "true"}, {"name": "Ann", "excited": True}),
        (countdown, {}, {"n": 3}),
        (countdown, {"n": "5"}, {"n": 5}),
        (norm, {"p": {"x": "3"}}, {"p": Point(x=3), "scale": 1.0, "label": None, "mode": "l2"}),
        (documented, {}, {}),
    ],
)
def test_bind_coerces(t: FunctionTool, value: Any, expected: dict[str, Any]) -> None:
    kwargs = t.bind(value)
    assert kwargs == expected
    assert [type(v) for v in kwargs.values()] == [type(v) for v in expected.values()]


@pytest.mark.parametrize(
    ("t", "value", "fragments"),
    [
        (add, {"a": 1}, ["'add'", "b: Field required"]),
        (add, {"a": "x", "b": 1}, ["a: Input should be a valid number"]),
        (add, {"a": 1, "b": 2, "c": 3}, ["c: Extra inputs are not permitted"]),
        (norm, {"p": {"y": 1}}, ["'norm'", "p/x: Field required"]),
        (norm, {"p": {"x": 1}, "mode": "l3"}, ["mode:"]),
        (add, [1, 2], ["(input):"]),
        (add, None, ["(input):"]),
    ],
)
def test_bind_error(t: FunctionTool, value: Any, fragments: list[str]) -> None:
    with pytest.raises(ToolInputError) as info:
        t.bind(value)
    assert info.value.message.startswith(f"Invalid input for tool {t.name!r}: ")
    for fragment in fragments:
        assert fragment in info.value.message


def test_varargs_are_refused() -> None:
    def f(*args: int) -> None: ...

    def g(**kwargs: int) -> None: ...

    for fn in (f, g):
        with pytest.raises(TypeError, match=r"\*args and \*\*kwargs"):
            make_tool(fn)


def test_unannotated_parameters_accept_anything() -> None:
    def f(x, y=2):  # type: ignore[no-untyped-def]
        return x

    t = make_tool(f)
    assert t.input_schema["required"] == ["x"]
    assert t.bind({"x": [1, {"a": None}]}) == {"x": [1, {"a": None}], "y": 2}


async def test_the_function_is_kept_callable() -> None:
    assert add.fn(1, 2) == 3
    assert await greet.fn("a", excited=True) == "a!"
    assert [v async for v in countdown.fn(2)] == ["2", "1", "liftoff"]


def test_tools_in_a_module() -> None:
    module = types.ModuleType("m")
    module.add = add  # type: ignore[attr-defined]
    module.greet = greet  # type: ignore[attr-defined]
    module.other = lambda: 1  # type: ignore[attr-defined]
    assert tools_in(module) == [add, greet]


@tool
def charge(amount: int, context: ToolContext, note: str = "") -> str:
    """Charge once per call."""
    return context.idempotency_key


def test_a_context_parameter_is_recognised_by_its_type_and_left_out_of_the_schema() -> None:
    assert charge.context_param == "context"
    assert charge.input_schema == {
        "type": "object",
        "properties": {"amount": {"type": "integer"}, "note": {"type": "string", "default": ""}},
        "required": ["amount"],
        "additionalProperties": False,
    }
    assert charge.bind({"amount": 3}) == {"amount": 3, "note": ""}
    with pytest.raises(ToolInputError, match="context: Extra inputs are not permitted"):
        charge.bind({"amount": 3, "context": {}})  # the model cannot fill it in
    assert add.context_param is None


def test_two_context_parameters_are_refused() -> None:
    def f(a: ToolContext, b: ToolContext) -> None: ...

    with pytest.raises(TypeError, match="more than one ToolContext"):
        make_tool(f)
