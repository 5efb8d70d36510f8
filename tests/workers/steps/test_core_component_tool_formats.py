"""Tool-call formats on the embedded runtime, through the scripted provider: the tool
mode a spec asks for, malformed prompt-based calls, and what the model sees of them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from agentq import tool
from agentq.orchestrator.core.errors import SpecError
from agentq.workers.tools.function_tools import FunctionTool
from tests.support.embedded_runs import TIMEOUT_S, Embedded, ModelLog
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
