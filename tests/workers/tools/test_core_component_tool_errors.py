"""Tool errors go back to the model and the run goes on."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import ValidationError

from agentq import tool
from agentq.orchestrator.core.errors import ToolError
from agentq.orchestrator.core.tool_errors import ToolErrorKind
from agentq.workers.tools.function_tools import FunctionTool
from tests.support.embedded_runs import (
    TIMEOUT_S,
    Embedded,
    ModelLog,
    all_events,
    of_type,
    tool_message_parts,
    wait_event,
)
from tests.support.specs import calls, scripted

pytestmark = pytest.mark.component

Start = Callable[..., Embedded]

Executed = list[tuple[str, Any]]


@pytest.fixture
def executed() -> Executed:
    """The calls the test's tools received, in order."""
    return []


@pytest.fixture
def add(executed: Executed) -> FunctionTool:
    @tool
    def add(a: float, b: float) -> float:
        """Add two numbers."""
        executed.append(("add", (a, b)))
        return a + b

    return add


@pytest.fixture
def explode(executed: Executed) -> FunctionTool:
    @tool
    def explode(why: str) -> str:
        executed.append(("explode", why))
        raise ValueError(why)

    return explode


@pytest.fixture
def refuse(executed: Executed) -> FunctionTool:
    @tool
    async def refuse(why: str) -> str:
        executed.append(("refuse", why))
        raise ToolError(f"refused: {why}")

    return refuse


@pytest.mark.parametrize(
    ("call", "tools", "fragments", "ran", "kind"),
    [
        pytest.param(
            ("add", {"a": "one", "b": 2}),
            ["add"],
            ["Invalid input for tool 'add'", "a: 'one' is not of type 'number'"],
            [],
            ToolErrorKind.INVALID_INPUT,
            id="schema-violation",
        ),
        pytest.param(
            ("add", {"a": 1}),
            ["add"],
            ["Invalid input for tool 'add'", "'b' is a required property"],
            [],
            ToolErrorKind.INVALID_INPUT,
            id="missing-field",
        ),
        pytest.param(
            ("nope", {"x": 1}),
            ["add", "explode"],
            ["unavailable tool 'nope'", "Available tools: add, explode."],
            [],
            ToolErrorKind.NO_SUCH_TOOL,
            id="unknown-tool",
        ),
        pytest.param(
            ("explode", {"why": "kaboom"}),
            ["explode"],
            ["ValueError: kaboom"],
            [("explode", "kaboom")],
            ToolErrorKind.EXECUTION,
            id="exception",
        ),
        pytest.param(
            ("refuse", {"why": "no"}),
            ["refuse"],
            ["refused: no"],
            [("refuse", "no")],
            ToolErrorKind.EXECUTION,
            id="tool-error",
        ),
    ],
)
async def test_tool_error_reaches_the_model_and_the_run_goes_on(
    start: Start,
    model_log: ModelLog,
    call: tuple[str, dict[str, Any]],
    tools: list[str],
    fragments: list[str],
    ran: list[Any],
    kind: ToolErrorKind,
    add: FunctionTool,
    explode: FunctionTool,
    refuse: FunctionTool,
    executed: Executed,
) -> None:
    spec = scripted(calls(call), {"text": "recovered"}, tools=tools)
    async with start([add, explode, refuse]) as client:
        run_id = await client.runs.submit(spec)
        result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
        events = await all_events(client, run_id)

    assert result.status == "succeeded", result.error
    assert result.text == "recovered"
    assert executed == ran
    (res,) = result.steps[0].tool_results
    assert (res.is_error, res.error_kind) == (True, kind)
    assert res.name == call[0]
    for fragment in fragments:
        assert fragment in res.output
    # The error is in the history the model got at the next step, as a tool result.
    (part,) = tool_message_parts(model_log.request(1).messages)
    assert (part.is_error, part.error_kind) == (True, kind)
    assert part.output == res.output
    assert part.tool_call_id == result.steps[0].tool_calls[0].id
    assert tool_message_parts(result.messages) == [part]
    # And in a tool-error event.
    (err,) = [e.model_dump() for e in events if e.type == "tool-error"]
    assert (err["tool_call_id"], err["tool_name"], err["error"], err["kind"]) == (
        part.tool_call_id,
        call[0],
        res.output,
        kind,
    )
    assert not any(e.type == "tool-result" for e in events)


async def test_a_timeout_is_a_tool_error_and_stops_the_tool(
    start: Start, model_log: ModelLog
) -> None:
    started = asyncio.Event()
    cancelled = asyncio.Event()

    @tool
    async def hang() -> str:
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    spec = scripted(
        calls(("hang", {})),
        {"text": "moved on"},
        tools=[{"type": "function", "name": "hang", "timeout_s": 0.2}],
    )
    async with start([hang]) as client:
        run_id = await client.runs.submit(spec)
        result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S)

    assert started.is_set()
    assert cancelled.is_set()
    assert result.status == "succeeded", result.error
    (res,) = result.steps[0].tool_results
    assert (res.is_error, res.error_kind) == (True, ToolErrorKind.TIMEOUT)
    assert res.output == "tool 'hang' timed out after 0.2 s"
    (part,) = tool_message_parts(model_log.request(1).messages)
    assert part.output == res.output


async def test_the_spec_wide_tool_timeout_applies(start: Start) -> None:
    @tool
    async def hang() -> str:
        await asyncio.sleep(60)
        return "never"

    spec = scripted(calls(("hang", {})), {"text": "ok"}, tools=["hang"], tool_timeout_s=0.1)
    async with start([hang]) as client:
        result = await client.runs.wait(await client.runs.submit(spec), timeout_s=TIMEOUT_S)
    assert result.steps[0].tool_results[0].output == "tool 'hang' timed out after 0.1 s"


async def test_good_and_bad_calls_of_one_step(
    start: Start, model_log: ModelLog, add: FunctionTool, explode: FunctionTool
) -> None:
    spec = scripted(
        calls(
            ("add", {"a": 1, "b": 2}),
            ("nope", {}),
            ("explode", {"why": "x"}),
            ("add", {"a": "bad"}),
            ("add", {"a": 2, "b": 2}),
        ),
        {"text": "done"},
        tools=["add", "explode"],
    )
    async with start([add, explode]) as client:
        result = await client.runs.wait(await client.runs.submit(spec), timeout_s=TIMEOUT_S)

    assert result.status == "succeeded", result.error
    results = result.steps[0].tool_results
    assert [(r.name, r.is_error) for r in results] == [
        ("add", False),
        ("nope", True),
        ("explode", True),
        ("add", True),
        ("add", False),
    ]
    assert [results[0].output, results[4].output] == [3.0, 4.0]
    parts = tool_message_parts(model_log.request(1).messages)
    assert [p.tool_call_id for p in parts] == [c.id for c in result.steps[0].tool_calls]
    assert [p.is_error for p in parts] == [r.is_error for r in results]


async def test_only_errors_in_a_step_still_continue(
    start: Start, model_log: ModelLog, add: FunctionTool, executed: Executed
) -> None:
    spec = scripted(
        calls(("nope", {}), ("add", {})),
        calls(("add", {"a": 1, "b": 1})),
        {"text": "fine"},
        tools=["add"],
    )
    async with start([add]) as client:
        result = await client.runs.wait(await client.runs.submit(spec), timeout_s=TIMEOUT_S)
    assert result.status == "succeeded", result.error
    assert [len(s.tool_results) for s in result.steps] == [2, 1, 0]
    assert executed == [("add", (1.0, 1.0))]
    assert [c.step for c in model_log.calls] == [0, 1, 2]


async def test_an_output_nested_past_the_limit_is_too_large(start: Start) -> None:
    @tool
    def burrow() -> Any:
        value: Any = "bottom"
        for _ in range(200):
            value = [value]
        return value

    spec = scripted(calls(("burrow", {})), {"text": "ok"}, tools=["burrow"])
    async with start([burrow]) as client:
        run_id = await client.runs.submit(spec)
        result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
        events = await all_events(client, run_id)
    assert result.status == "succeeded", result.error
    (res,) = result.steps[0].tool_results
    assert (res.is_error, res.error_kind) == (True, ToolErrorKind.OUTPUT_TOO_LARGE)
    assert "nests deeper than 64 levels" in res.output
    (err,) = [e for e in events if e.type == "tool-error"]
    assert err.model_dump()["kind"] == ToolErrorKind.OUTPUT_TOO_LARGE


async def test_a_denied_call_is_a_denied_error(start: Start, add: FunctionTool) -> None:
    spec = scripted(
        {"tool_calls": [{"name": "add", "input": {"a": 1, "b": 2}, "id": "c1"}]},
        {"text": "understood"},
        tools=[{"type": "function", "name": "add", "needs_approval": True}],
    )
    async with start([add]) as client:
        run_id = await client.runs.submit(spec)
        await wait_event(client, run_id, of_type("tool-approval-request"))
        await client.runs.approve(run_id, "c1", approved=False, reason="not today")
        result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
        events = await all_events(client, run_id)
    assert result.status == "succeeded", result.error
    (res,) = result.steps[0].tool_results
    assert (res.is_error, res.error_kind) == (True, ToolErrorKind.DENIED)
    assert res.output == "The user denied the call to 'add': not today"
    (err,) = [e for e in events if e.type == "tool-error"]
    assert err.model_dump()["kind"] == ToolErrorKind.DENIED


FAIL_RUN = {"on_error": "fail-run"}


@pytest.mark.parametrize(
    ("call", "kind", "ran"),
    [
        pytest.param(("explode", {"why": "kaboom"}), "execution", True, id="execution"),
        pytest.param(("explode", {"why": 3}), "invalid-input", False, id="invalid-input"),
    ],
)
async def test_a_fail_run_tool_error_ends_the_run_failed(
    start: Start,
    model_log: ModelLog,
    explode: FunctionTool,
    executed: Executed,
    call: tuple[str, dict[str, Any]],
    kind: str,
    ran: bool,
) -> None:
    spec = scripted(
        {"tool_calls": [{"name": call[0], "input": call[1], "id": "c1"}]},
        {"text": "never asked"},
        tools=[{"type": "function", "name": "explode", **FAIL_RUN}],
    )
    async with start([explode]) as client:
        run_id = await client.runs.submit(spec)
        result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
        events = await all_events(client, run_id)
    assert result.status == "failed"
    assert result.error is not None
    failure = result.error.model_dump(mode="json", by_alias=True)
    assert {k: failure[k] for k in ("type", "tool", "call_id", "error_kind", "step")} == {
        "type": "tool",
        "tool": "explode",
        "call_id": "c1",
        "error_kind": kind,
        "step": 0,
    }
    assert failure["message"].startswith(f'the call c1 to tool "explode" failed ({kind}): ')
    assert bool(executed) == ran
    # The model never saw the error: the run ended instead of going back to it.
    assert [c.step for c in model_log.calls] == [0]
    types = [e.type for e in events]
    assert types.index("tool-error") < types.index("error")
    assert types[-1] == "error"


async def test_a_denial_of_a_fail_run_tool_ends_the_run(start: Start, add: FunctionTool) -> None:
    spec = scripted(
        {"tool_calls": [{"name": "add", "input": {"a": 1, "b": 2}, "id": "c1"}]},
        {"text": "never asked"},
        tools=[{"type": "function", "name": "add", "needs_approval": True, **FAIL_RUN}],
    )
    async with start([add]) as client:
        run_id = await client.runs.submit(spec)
        await wait_event(client, run_id, of_type("tool-approval-request"))
        await client.runs.approve(run_id, "c1", approved=False)
        result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
    assert result.status == "failed"
    assert result.error is not None
    assert (result.error.kind, result.error.error_kind) == ("tool", ToolErrorKind.DENIED)


async def test_a_fail_run_tool_that_succeeds_changes_nothing(
    start: Start, add: FunctionTool
) -> None:
    spec = scripted(
        calls(("add", {"a": 1, "b": 2})),
        {"text": "3"},
        tools=[{"type": "function", "name": "add", **FAIL_RUN}],
    )
    async with start([add]) as client:
        result = await client.runs.wait(await client.runs.submit(spec), timeout_s=TIMEOUT_S)
    assert result.status == "succeeded", result.error
    assert result.text == "3"


async def test_an_unknown_on_error_is_refused_at_submit(start: Start, add: FunctionTool) -> None:
    spec = scripted(
        {"text": "never"}, tools=[{"type": "function", "name": "add", "on_error": "ignore"}]
    )
    async with start([add]) as client:
        with pytest.raises(ValidationError, match="on_error"):
            await client.runs.submit(spec)
