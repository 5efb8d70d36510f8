"""Tool-call formats on the embedded runtime, through the scripted provider: the tool
mode a spec asks for, malformed prompt-based calls, and what the model sees of them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from agentq import tool
from agentq.orchestrator.core.errors import SpecError
from agentq.orchestrator.core.events import ToolCall
from agentq.workers.tools.function_tools import FunctionTool
from tests.support.embedded_runs import TIMEOUT_S, Embedded, ModelLog, all_events
from tests.support.specs import scripted

pytestmark = pytest.mark.component

Start = Callable[..., Embedded]


def in_mode(spec: dict[str, Any], mode: str) -> dict[str, Any]:
    spec["model"]["options"] = {"tool_mode": mode}
    return spec


async def test_submit_refuses_an_unknown_mode(start: Start) -> None:
    async with start([]) as client:
        with pytest.raises(SpecError, match=r"^model\.options\.tool_mode: 'json' is not a tool"):
            await client.runs.submit(in_mode(scripted({"text": "hi"}), "json"))


@pytest.fixture
def add() -> FunctionTool:
    @tool
    def add(a: float, b: float) -> float:
        """Add two numbers."""
        return a + b

    return add


async def test_a_malformed_tool_use_block_reaches_the_model_with_its_problem(
    start: Start, model_log: ModelLog, add: FunctionTool
) -> None:
    block = '<tool_use>\n<arguments>{"a": 1, "b": 2}</arguments>\n</tool_use>'
    spec = in_mode(
        scripted({"text": f"Adding.\n{block}"}, {"text": "oops"}, tools=["add"]), "prompt"
    )
    async with start([add]) as client:
        run_id = await client.runs.submit(spec)
        result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S)

    assert result.status == "succeeded", result.error
    (res,) = result.steps[0].tool_results
    assert res.is_error
    problem = "Your <tool_use> block could not be parsed: it has no <name> element"
    assert str(res.output).startswith(f"{problem}. The block was:\n{block}\n")
    # What the model reads on the next step: the error, in the prompt-based format.
    wrote, seen = (str(m.content) for m in model_log.request(1).messages[-2:])
    assert wrote == f"Adding.\n{block}"
    assert seen.startswith('<tool_error name="invalid_tool_use">\n' + problem)
    assert block in seen
    assert "unavailable tool" not in seen


@pytest.fixture
def now() -> FunctionTool:
    @tool
    def now(tz: str = "UTC") -> str:
        """The time of day."""
        return f"noon {tz}"

    return now


async def test_text_mode_calls_are_parsed_stripped_and_rendered_back(
    start: Start, model_log: ModelLog, add: FunctionTool, now: FunctionTool
) -> None:
    answer = (
        "Let me work.\n\n"
        'TOOL: add\nPARAMETERS: {"a": 1, "b": 2}\n'
        "TOOL: now\nPARAMETERS: {}\n"
        'TOOL: add\nPARAMETERS: {"a": 1,,}\n\n'
        "Back soon."
    )
    spec = in_mode(
        scripted(
            {"text": answer},
            {"text": "I will use the now tool."},
            {"text": "3 at noon"},
            tools=["add", "now"],
        ),
        "text",
    )
    async with start([add, now]) as client:
        run_id = await client.runs.submit(spec)
        result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
        events = await all_events(client, run_id)

    assert result.status == "succeeded", result.error
    first, fallback, last = result.steps
    assert [(c.name, c.input) for c in first.tool_calls] == [
        ("add", {"a": 1, "b": 2}),
        ("now", {}),
        ("add", '{"a": 1,,}'),
    ]
    assert [(r.output, r.is_error) for r in first.tool_results[:2]] == [
        (3.0, False),
        ("noon UTC", False),
    ]
    bad = first.tool_results[2]
    assert bad.is_error
    assert "could not parse" in str(bad.output)
    # The user sees the prose, never the calls: in the stream and in the step's text.
    streamed = "".join(e.delta for e in events if e.type == "text-delta" and e.step == 0)
    assert streamed == "Let me work."
    assert first.text == "Let me work.\n\nBack soon."
    # The fallback: "use the now tool" called now with {}.
    assert [(c.name, c.input) for c in fallback.tool_calls] == [("now", {})]
    assert last.text == result.text == "3 at noon"
    # The model was taught the format, and reads its calls and their results back in it.
    step_1 = model_log.request(1)
    assert step_1.tools == []
    assert "TOOL: tool_name\nPARAMETERS:" in str(step_1.system)
    wrote, results = (str(m.content) for m in step_1.messages[-2:])
    assert wrote == (
        "Let me work.\n\nBack soon.\n"
        'TOOL: add\nPARAMETERS: {"a": 1, "b": 2}\n'
        "TOOL: now\nPARAMETERS: {}\n"
        'TOOL: add\nPARAMETERS: {"a": 1,,}'
    )
    assert results.startswith(
        "TOOL RESULT: add\n3.0\nTOOL RESULT: now\nnoon UTC\nTOOL ERROR: add\n"
    )
    assert "could not parse" in results


@pytest.fixture
def repeat() -> FunctionTool:
    @tool
    def repeat(word: str, times: int, loud: bool) -> str:
        """Say a word again."""
        said = " ".join([word] * times)
        return said.upper() if loud else said

    return repeat


async def test_input_is_coerced_losslessly_and_the_event_says_where(
    start: Start, repeat: FunctionTool
) -> None:
    calls = [
        {"name": "repeat", "input": {"word": "hi", "times": "2", "loud": "true"}, "id": "c1"},
        {"name": "repeat", "input": {"word": "hi", "times": "2.5", "loud": False}, "id": "c2"},
    ]
    spec = scripted({"tool_calls": calls}, {"text": "done"}, tools=["repeat"])
    async with start([repeat]) as client:
        run_id = await client.runs.submit(spec)
        result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
        events = await all_events(client, run_id)

    assert result.status == "succeeded", result.error
    good, lossy = result.steps[0].tool_results
    assert (good.output, good.is_error) == ("HI HI", False)
    assert lossy.is_error
    assert "times: '2.5' is not of type 'integer'" in str(lossy.output)
    shown = {e.tool_call_id: e for e in events if isinstance(e, ToolCall)}
    assert shown["c1"].input == {"word": "hi", "times": 2, "loud": True}
    assert shown["c1"].coerced == ["times", "loud"]
    assert shown["c2"].coerced is None


async def test_a_tool_turns_coercion_off(start: Start, repeat: FunctionTool) -> None:
    call = {"name": "repeat", "input": {"word": "hi", "times": "2", "loud": False}}
    spec = scripted(
        {"tool_calls": [call]},
        {"text": "done"},
        tools=[{"type": "function", "name": "repeat", "coerce": False}],
    )
    async with start([repeat]) as client:
        run_id = await client.runs.submit(spec)
        result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S)

    (res,) = result.steps[0].tool_results
    assert res.is_error
    assert "times: '2' is not of type 'integer'" in str(res.output)
