"""`to_model_output`: a tool's output converted into what the model sees, through the
embedded runtime and the scripted model, while the run records the output as it was.
A function tool brings its own (`@tool(to_model_output=fn)`); any tool entry may name a
registered `@to_model_output` hook; a hook no live worker registered is refused at
submit, and one that answers nonsense is a tool error the model reads."""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agentq import to_model_output, tool
from agentq.orchestrator.core.errors import SpecError
from agentq.orchestrator.core.tool_errors import ToolErrorKind
from agentq.workers.models import openai_chat
from agentq.workers.tools import model_output as converters
from tests.support.embedded_runs import (
    TIMEOUT_S,
    Embedded,
    ModelLog,
    all_events,
    tool_message_parts,
)
from tests.support.specs import calls, scripted

pytestmark = pytest.mark.component

Start = Callable[..., Embedded]

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 56
PNG_B64 = base64.b64encode(PNG).decode()
RAW = {"path": "/tmp/chart.png", "png_b64": PNG_B64, "rows": 1200}


@pytest.fixture(autouse=True)
def _converters() -> Iterator[None]:
    """The test's converters are registered for the test only."""
    before = converters.registered_converters()
    yield
    converters._CONVERTERS.clear()
    converters._CONVERTERS.update(before)


def chart_for_model(output: dict[str, Any]) -> list[Any]:
    return [
        f"the chart of {output['rows']} rows",
        {"type": "media", "media_type": "image/png", "data": base64.b64decode(output["png_b64"])},
    ]


def make_chart() -> Any:
    @tool(to_model_output=chart_for_model)
    def chart() -> dict[str, Any]:
        """Plots the data."""
        return RAW

    return chart


async def test_a_function_tool_s_own_converter_shows_the_model_an_image(
    start: Start, model_log: ModelLog
) -> None:
    chart = make_chart()
    spec = scripted(calls(("chart", {})), {"text": "done"}, tools=["chart"])
    async with start([chart]) as client:
        result = await client.runs.wait(await client.runs.submit(spec), timeout_s=TIMEOUT_S)
        events = await all_events(client, result.id)
    assert result.status == "succeeded", result.error
    # The run records what the tool returned …
    assert result.steps[0].tool_results[0].output == RAW
    (shown,) = [e.model_dump() for e in events if e.type == "tool-result"]
    assert shown["output"] == RAW
    # … and the model sees what the converter made of it, as an image where it can.
    (part,) = tool_message_parts(model_log.request(1).messages)
    assert part.output == RAW
    assert part.for_model == {
        "content": [
            {"type": "text", "text": "the chart of 1200 rows"},
            {"type": "media", "media_type": "image/png", "data": PNG_B64},
        ]
    }
    sent = openai_chat.to_messages(None, model_log.request(1).messages)
    assert sent[-1]["content"][-1] == {
        "type": "image_url",
        "image_url": {"url": f"data:image/png;base64,{PNG_B64}"},
    }
    assert PNG_B64 not in sent[-2]["content"]  # the tool message: text only


async def test_a_tool_entry_names_a_registered_hook(start: Start, model_log: ModelLog) -> None:
    @to_model_output
    def rows_only(output: dict[str, Any]) -> str:
        return f"{output['rows']} rows plotted"

    chart = make_chart()  # its own converter gives way to the entry's
    entry = {"type": "function", "name": "chart", "to_model_output": "rows_only"}
    spec = scripted(calls(("chart", {})), {"text": "done"}, tools=[entry])
    async with start([chart]) as client:
        result = await client.runs.wait(await client.runs.submit(spec), timeout_s=TIMEOUT_S)
    assert result.status == "succeeded", result.error
    (part,) = tool_message_parts(model_log.request(1).messages)
    assert (part.output, part.for_model) == (RAW, "1200 rows plotted")


async def test_a_hook_answering_none_leaves_the_output_as_it_is(
    start: Start, model_log: ModelLog
) -> None:
    to_model_output(name="as_is")(lambda output: None)
    chart = make_chart()
    entry = {"type": "function", "name": "chart", "to_model_output": "as_is"}
    spec = scripted(calls(("chart", {})), {"text": "done"}, tools=[entry])
    async with start([chart]) as client:
        await client.runs.wait(await client.runs.submit(spec), timeout_s=TIMEOUT_S)
    (part,) = tool_message_parts(model_log.request(1).messages)
    assert part.model_output is None
    assert part.for_model == RAW


async def test_a_hook_that_answers_nonsense_is_a_tool_error(
    start: Start, model_log: ModelLog
) -> None:
    to_model_output(name="count")(lambda output: len(output))
    chart = make_chart()
    entry = {"type": "function", "name": "chart", "to_model_output": "count"}
    spec = scripted(calls(("chart", {})), {"text": "done"}, tools=[entry])
    async with start([chart]) as client:
        result = await client.runs.wait(await client.runs.submit(spec), timeout_s=TIMEOUT_S)
    assert result.status == "succeeded"  # the model hears of it; the run goes on
    (record,) = result.steps[0].tool_results
    assert (record.is_error, record.error_kind) == (True, ToolErrorKind.EXECUTION)
    assert record.output == (
        "to_model_output hook 'count' raised TypeError: returned int, not text, "
        "a list of text and media parts, or None"
    )


async def test_a_hook_no_live_worker_registered_is_refused_at_submit(start: Start) -> None:
    chart = make_chart()
    entry = {"type": "function", "name": "chart", "to_model_output": "nowhere"}
    async with start([chart]) as client:
        with pytest.raises(SpecError) as raised:
            await client.runs.submit(scripted({"text": "done"}, tools=[entry]))
    assert str(raised.value) == (
        "tool 'chart': to_model_output hook 'nowhere' is not a hook any live worker "
        "registered (@to_model_output in a module loaded with --tools)"
    )


async def test_tools_whose_results_no_worker_sees_are_refused(start: Start) -> None:
    to_model_output(name="as_is")(lambda output: None)
    entry = {"type": "client", "name": "ask_user", "to_model_output": "as_is"}
    async with start([]) as client:
        with pytest.raises(SpecError) as raised:
            await client.runs.submit(scripted({"text": "done"}, tools=[entry]))
    assert str(raised.value) == (
        "tools[0].to_model_output: client tools' results do not pass through a worker, "
        "so nothing converts them"
    )
