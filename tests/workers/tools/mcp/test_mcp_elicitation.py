"""Answering elicitation requests per policy."""

from __future__ import annotations

import time
from typing import Any

import mcp_types as types
import pytest

from agentq.orchestrator.tools import ToolDef
from agentq.workers.tools.context import ToolContext
from agentq.workers.tools.mcp.elicitation import Policy, answer_elicitation, schema_defaults

pytestmark = pytest.mark.unit

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "default": "Ada"},
        "age": {"type": "integer", "default": 36},
        "note": {"type": "string"},
    },
    "required": ["name"],
}


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        pytest.param(SCHEMA, {"name": "Ada", "age": 36}, id="defaults-optional-left-out"),
        pytest.param({**SCHEMA, "required": ["note"]}, None, id="required-without-default"),
        pytest.param({"type": "object"}, {}, id="no-properties"),
        pytest.param({"type": "object", "properties": []}, None, id="malformed"),
        pytest.param(
            {"type": "object", "properties": {"ok": {"type": "boolean", "default": False}}},
            {"ok": False},
            id="falsy-default",
        ),
    ],
)
def test_schema_defaults(schema: dict[str, Any], expected: dict[str, Any] | None) -> None:
    assert schema_defaults(schema) == expected


def form(schema: dict[str, Any] = SCHEMA) -> types.ElicitRequestFormParams:
    return types.ElicitRequestFormParams(message="Who?", requested_schema=schema)


URL = types.ElicitRequestURLParams(message="Log in", url="https://x.test", elicitation_id="e1")


def context(
    answer: dict[str, Any] | None, asked: list[str], *, can_ask: bool = True
) -> ToolContext:
    async def elicit(message: str, schema: dict[str, Any]) -> dict[str, Any] | None:
        asked.append(message)
        return answer

    tool = ToolDef(name="t", kind="mcp")
    return ToolContext(
        run_id="r",
        step=0,
        call_id="c",
        tool=tool,
        attempt=1,
        deadline_at=time.time() + 60,
        elicit=elicit if can_ask else None,
    )


@pytest.mark.parametrize(
    ("policy", "params", "answer", "can_ask", "expected", "asks"),
    [
        pytest.param("decline", form(), None, True, ("decline", None), 0, id="decline"),
        pytest.param(
            "accept-defaults",
            form(),
            None,
            True,
            ("accept", {"name": "Ada", "age": 36}),
            0,
            id="defaults",
        ),
        pytest.param(
            "accept-defaults",
            form({**SCHEMA, "required": ["note"]}),
            None,
            True,
            ("decline", None),
            0,
            id="defaults-cannot-fill",
        ),
        pytest.param(
            "forward",
            form(),
            {"name": "Bob", "tags": ["a"], "extra": {"x": 1}},
            True,
            ("accept", {"name": "Bob", "tags": ["a"], "extra": "{'x': 1}"}),
            1,
            id="forward",
        ),
        pytest.param("forward", form(), None, True, ("decline", None), 1, id="forward-no-answer"),
        pytest.param("forward", form(), {"a": 1}, False, ("decline", None), 0, id="cannot-ask"),
        pytest.param("forward", URL, {"a": 1}, True, ("decline", None), 0, id="url-mode"),
        pytest.param("accept-defaults", URL, None, True, ("decline", None), 0, id="url-defaults"),
    ],
)
async def test_answer(
    policy: Policy,
    params: types.ElicitRequestParams,
    answer: dict[str, Any] | None,
    can_ask: bool,
    expected: tuple[str, dict[str, Any] | None],
    asks: int,
) -> None:
    asked: list[str] = []
    result = await answer_elicitation(policy, params, context(answer, asked, can_ask=can_ask))
    assert (result.action, result.content) == expected
    assert len(asked) == asks


async def test_forward_without_a_call_declines() -> None:
    result = await answer_elicitation("forward", form(), None)
    assert result.action == "decline"
