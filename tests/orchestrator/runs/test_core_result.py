"""agentq.orchestrator.runs.result.assemble: a RunResult from the stored run (pure)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentq.orchestrator.core.messages import ToolResultPart, Usage, UserMessage
from agentq.orchestrator.core.model_io import ModelResponse, ProviderToolCall
from agentq.orchestrator.loop.plan import StepPlan, plan_step
from agentq.orchestrator.runs.result import RunResult, assemble
from agentq.orchestrator.runs.state import FailureKind, RunFailure
from agentq.orchestrator.runs.transitions import step_record
from agentq.orchestrator.spec.run import RunSpec
from agentq.orchestrator.tools import ToolDef

pytestmark = pytest.mark.unit

SPEC = RunSpec.model_validate({"model": "openai:m", "prompt": "hi"})
TOOLS = [
    ToolDef(name="add", kind="function", queue="tools"),
    ToolDef(name="ask", kind="client"),
    ToolDef(name="risky", kind="function", queue="tools", needs_approval=True),
]


def planned(
    step: int, text: str, calls: list[tuple[str, str]], *, tokens: int = 0, **kw: Any
) -> StepPlan:
    response = ModelResponse(
        text=text,
        tool_calls=[ProviderToolCall(id=i, name=n, arguments="{}", **kw) for i, n in calls],
        finish_reason="tool-calls" if calls else "stop",
        usage=Usage(input_tokens=tokens, output_tokens=1, total_tokens=tokens + 1),
    )
    return plan_step(SPEC, TOOLS, step, response)


def stored(plan: StepPlan, results: dict[str, Any] | None = None) -> dict[str, str]:
    """The step hash as the Lua transitions leave it."""
    raw = {
        "resp": json.dumps(step_record(plan)),
        "text": plan.text,
        "finish_reason": plan.finish_reason,
        "after": plan.after,
        "order": json.dumps([c.id for c in plan.local_calls]),
    }
    for c in plan.local_calls:
        raw[f"c:{c.id}"] = c.model_dump_json(exclude={"result"})
        raw[f"st:{c.id}"] = c.status
        if c.result is not None:
            raw[f"r:{c.id}"] = c.result.model_dump_json()
    for call_id, output in (results or {}).items():
        name = json.loads(raw[f"c:{call_id}"])["name"]
        raw[f"r:{call_id}"] = ToolResultPart(
            tool_call_id=call_id, tool_name=name, output=output
        ).model_dump_json()
        raw[f"st:{call_id}"] = "done"
    return raw


def meta(status: str, **kw: str) -> dict[str, str]:
    return {"status": status, "step": "0", "seq": "1", "n_initial": "1", **kw}


USER = UserMessage(content="hi").model_dump_json()


def test_finished_run() -> None:
    s0 = planned(0, "let me see", [("a", "add"), ("b", "nope")], tokens=5)
    s1 = planned(1, "done", [], tokens=7)
    messages = [
        USER,
        s0.assistant_message().model_dump_json(),
        '{"role":"tool","content":[]}',
        s1.assistant_message().model_dump_json(),
    ]
    result = assemble(
        "r1",
        meta("succeeded", text="done", u_in="12", u_out="2", u_total="14"),
        messages,
        [stored(s0, {"a": 3}), stored(s1)],
    )
    assert (result.id, result.status, result.text, result.succeeded) == (
        "r1",
        "succeeded",
        "done",
        True,
    )
    assert [s.index for s in result.steps] == [0, 1]
    first = result.steps[0]
    assert [(c.id, c.name) for c in first.tool_calls] == [("a", "add"), ("b", "nope")]
    assert [(r.tool_call_id, r.output, r.is_error) for r in first.tool_results] == [
        ("a", 3, False),
        ("b", first.tool_results[1].output, True),
    ]
    assert "unavailable tool 'nope'" in first.tool_results[1].output
    assert (first.finish_reason, first.usage.input_tokens) == ("tool-calls", 5)
    assert (result.usage.input_tokens, result.usage.output_tokens, result.usage.total_tokens) == (
        12,
        2,
        14,
    )
    # The initial messages are the caller's: only the response messages come back.
    assert [m.role for m in result.messages] == ["assistant", "tool", "assistant"]
    assert result.pending == []
    assert result.error is None


def test_results_follow_call_order_not_arrival() -> None:
    s0 = planned(0, "", [("x", "add"), ("y", "add"), ("z", "add")])
    raw = stored(s0, {"z": "Z", "x": "X", "y": "Y"})
    result = assemble("r", meta("running"), [USER], [raw])
    assert [r.tool_call_id for r in result.steps[0].tool_results] == ["x", "y", "z"]


def test_missing_results_are_left_out() -> None:
    s0 = planned(0, "", [("x", "add"), ("y", "add")])
    result = assemble("r", meta("running"), [USER], [stored(s0, {"y": 1})])
    assert [r.tool_call_id for r in result.steps[0].tool_results] == ["y"]


def test_step_without_a_response_yet_is_skipped() -> None:
    s0 = planned(0, "", [("x", "add")])
    result = assemble("r", meta("running", step="1"), [USER], [stored(s0, {"x": 1}), {}])
    assert [s.index for s in result.steps] == [0]
    assert result.pending == []


def test_parked_calls_are_pending() -> None:
    s0 = planned(0, "", [("q", "ask"), ("r", "risky"), ("a", "add")])
    result = assemble("r", meta("awaiting"), [USER], [stored(s0)])
    assert result.status == "awaiting"
    assert result.pending == [
        {
            "step": 0,
            "tool_call_id": "q",
            "tool_name": "ask",
            "input": {},
            "status": "awaiting-result",
        },
        {
            "step": 0,
            "tool_call_id": "r",
            "tool_name": "risky",
            "input": {},
            "status": "awaiting-approval",
        },
    ]


def test_provider_executed_results_come_first() -> None:
    response = ModelResponse(
        tool_calls=[
            ProviderToolCall(id="a", name="add", arguments="{}"),
            ProviderToolCall(
                id="ws",
                name="web_search",
                arguments="{}",
                provider_executed=True,
                provider_result="hits",
            ),
        ]
    )
    s0 = plan_step(SPEC, TOOLS, 0, response)
    result = assemble("r", meta("running"), [USER], [stored(s0, {"a": 1})])
    assert [(r.tool_call_id, r.provider_executed) for r in result.steps[0].tool_results] == [
        ("ws", True),
        ("a", False),
    ]


@pytest.mark.parametrize(
    ("m", "text"),
    [
        (meta("succeeded", text="final"), "final"),
        (meta("running"), "latest"),
    ],
)
def test_text_defaults_to_the_last_step(m: dict[str, str], text: str) -> None:
    s0 = planned(0, "latest", [])
    assert assemble("r", m, [USER], [stored(s0)]).text == text


def test_failed_run_carries_its_error() -> None:
    error = {"type": "provider", "message": "boom", "step": 1}
    result = assemble("r", meta("failed", error=json.dumps(error)), [USER], [])
    failure = RunFailure(kind=FailureKind.PROVIDER, message="boom", step=1)
    assert (result.status, result.error, result.steps, result.text) == ("failed", failure, [], "")
    assert not result.succeeded
    # The JSON keeps the keys results always had.
    assert json.loads(result.model_dump_json())["error"] == {**error, "status": None}


def test_result_round_trips_as_json() -> None:
    s0 = planned(0, "t", [("a", "add")])
    result = assemble(
        "r", meta("running"), [USER, s0.assistant_message().model_dump_json()], [stored(s0)]
    )
    assert RunResult.model_validate_json(result.model_dump_json()) == result
