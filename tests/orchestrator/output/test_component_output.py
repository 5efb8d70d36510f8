"""Structured output end to end on the embedded runtime (in-memory Redis, in-process
workers, the scripted model): prompted and tool modes, the retry, `output-invalid`."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import ValidationError

from agentq.orchestrator.client import Client
from agentq.orchestrator.core import events as ev
from agentq.orchestrator.core.errors import SpecError
from agentq.orchestrator.core.messages import ToolMessage, UserMessage
from agentq.orchestrator.output.instructions import OUTPUT_TOOL, RETRY_PREFIX
from agentq.orchestrator.runs.state import FailureKind
from agentq.workers.worker.embedded import embedded
from tests.support.embedded_runs import FAST, TIMEOUT_S, all_events
from tests.support.sample_tools import add
from tests.support.specs import calls, scripted

pytestmark = pytest.mark.component

INVOICE: dict[str, Any] = {
    "type": "object",
    "properties": {"number": {"type": "string"}, "total": {"type": "number"}},
    "required": ["number", "total"],
    "additionalProperties": False,
}
GOOD = {"number": "A-1", "total": 12.5}


@pytest.fixture
async def client() -> AsyncIterator[Client]:
    async with embedded(tools=[add], settings=FAST) as started:
        yield started


async def finish_of(client: Client, run_id: str) -> ev.Finish:
    (finish,) = [e for e in await all_events(client, run_id) if isinstance(e, ev.Finish)]
    return finish


async def test_prompted_mode_sends_an_invalid_answer_back_then_ends_with_the_output(
    client: Client,
) -> None:
    spec = scripted(
        {"text": "The invoice A-1 totals 12.5."},
        {"text": "```json\n" + json.dumps(GOOD) + "\n```"},
        output={"schema": INVOICE, "mode": "prompted"},
    )
    run_id = await client.runs.submit(spec)
    result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
    assert result.succeeded, result.error
    assert result.output == GOOD
    assert (await finish_of(client, run_id)).output == GOOD
    retry = result.messages[1]
    assert isinstance(retry, UserMessage)
    assert isinstance(retry.content, str)
    assert retry.content.startswith(RETRY_PREFIX)


async def test_tool_mode_ends_when_the_final_answer_tool_is_called_validly(
    client: Client,
) -> None:
    spec = scripted(
        calls(("add", {"a": 10, "b": 2.5})),
        calls((OUTPUT_TOOL, {"number": "A-1"})),
        calls((OUTPUT_TOOL, GOOD)),
        tools=["add"],
        output={"schema": INVOICE, "mode": "tool", "max_retries": 2},
    )
    run_id = await client.runs.submit(spec)
    result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
    assert result.succeeded, result.error
    assert result.output == GOOD
    assert (await finish_of(client, run_id)).output == GOOD
    refused = result.messages[3]
    assert isinstance(refused, ToolMessage)
    assert refused.content[0].is_error
    assert "'total' is a required property" in str(refused.content[0].output)
    assert [s.index for s in result.steps] == [0, 1, 2]


async def test_a_fail_run_call_the_final_answer_came_before_does_not_fail_the_run(
    client: Client,
) -> None:
    spec = scripted(
        calls((OUTPUT_TOOL, GOOD), ("add", {"a": 1, "b": 2})),
        tools=[{"type": "function", "name": "add", "on_error": "fail-run"}],
        output={"schema": INVOICE, "mode": "tool"},
    )
    result = await client.runs.wait(await client.runs.submit(spec), timeout_s=TIMEOUT_S)
    assert result.succeeded, result.error
    assert result.output == GOOD
    skipped = result.steps[0].tool_results[1]
    assert (skipped.name, skipped.error_kind) == ("add", "cancelled")


async def test_retries_spent_fail_the_run_as_output_invalid_with_the_last_attempt(
    client: Client,
) -> None:
    spec = scripted(
        {"text": '{"number": "A-1"}'},
        {"text": '{"number": "A-1", "total": "twelve"}'},
        output={"schema": INVOICE, "mode": "prompted", "max_retries": 1},
    )
    run_id = await client.runs.submit(spec)
    result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
    assert not result.succeeded
    assert result.error is not None
    assert result.error.kind == FailureKind.OUTPUT_INVALID
    assert result.error.attempt == {"number": "A-1", "total": "twelve"}
    assert "total: 'twelve' is not of type 'number'" in result.error.message
    assert result.output is None
    stored = json.loads(result.error.model_dump_json())
    assert stored["type"] == "output-invalid"
    assert stored["attempt"]["total"] == "twelve"


async def test_the_model_is_told_the_schema_or_offered_the_tool(client: Client) -> None:
    # The scripted model answers the same whatever it is told: the request is checked
    # through the wire formats (tests/workers/models); here, that a run without `output`
    # is untouched by it.
    run_id = await client.runs.submit(scripted({"text": "plain"}))
    result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
    assert result.succeeded
    assert result.output is None
    assert result.text == "plain"
    assert (await finish_of(client, run_id)).output is None


async def test_a_bad_schema_is_refused_at_submit(client: Client) -> None:
    bad = scripted({"text": "x"}, output={"schema": {"type": "object", "required": 3}})
    with pytest.raises(ValidationError, match="not a valid JSON Schema"):
        await client.runs.submit(bad)


@pytest.mark.parametrize("mode", ["prompted", "tool"])
async def test_a_replay_of_a_run_with_retries_finds_nothing_changed(
    client: Client, mode: str
) -> None:
    if mode == "tool":
        steps = [calls((OUTPUT_TOOL, {"number": "A-1"})), calls((OUTPUT_TOOL, GOOD))]
    else:
        steps = [{"text": "no json"}, {"text": json.dumps(GOOD)}]
    spec = scripted(*steps, output={"schema": INVOICE, "mode": mode})
    run_id = await client.runs.submit(spec)
    assert (await client.runs.wait(run_id, timeout_s=TIMEOUT_S)).output == GOOD
    report = await client.runs.replay(run_id)
    assert report.steps == 2
    assert report.divergences == []
    stricter = {"output": {"schema": {**INVOICE, "required": ["currency"]}, "mode": mode}}
    assert (await client.runs.replay(run_id, stricter)).divergences != []


async def test_output_valid_ends_the_run_naming_itself(client: Client) -> None:
    spec = scripted(
        calls(("add", {"a": 10, "b": 2.5})),
        {"text": json.dumps(GOOD)},
        tools=["add"],
        output={"schema": INVOICE, "mode": "prompted"},
        stop_when=[{"any": [{"output_valid": True}, {"step_count_is": 5}]}],
    )
    run_id = await client.runs.submit(spec)
    result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
    assert result.succeeded, result.error
    assert result.output == GOOD
    reason = "stop_when: any [output_valid, step_count_is 5]"
    assert result.finish_reason == reason
    assert (await finish_of(client, run_id)).finish_reason == reason


async def test_output_valid_without_an_output_is_refused_at_submit(client: Client) -> None:
    spec = scripted({"text": "x"}, stop_when=[{"output_valid": True}])
    with pytest.raises(SpecError, match=r"stop_when\[0\]\.output_valid: the run has no 'output'"):
        await client.runs.submit(spec)


async def test_a_sub_agent_with_an_output_answers_its_parent_with_it(client: Client) -> None:
    child = {
        "model": {"provider": "scripted", "script": [{"text": json.dumps(GOOD)}]},
        "output": {"schema": INVOICE, "mode": "prompted"},
    }
    extractor = {"type": "agent", "name": "extract", "description": "Reads one", "spec": child}
    ask = {"tool_calls": [{"name": "extract", "input": {"prompt": "invoice A-1"}}]}
    spec = scripted(ask, {"text": "done"}, tools=[extractor])
    result = await client.runs.wait(await client.runs.submit(spec), timeout_s=TIMEOUT_S)
    assert result.succeeded, result.error
    (answer,) = result.steps[0].tool_results
    assert not answer.is_error
    assert answer.output == GOOD  # the value itself, not its JSON text
    (told,) = [m for m in result.messages if isinstance(m, ToolMessage)]
    assert told.content[0].output == GOOD
