"""Tool calls without a run (`client.calls.call`) on the embedded runtime: resolution,
schema validation, results and errors, progress, idempotency, cancellation, and the
call transitions applied twice (a re-delivered job never records a second result)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agentq.orchestrator.calls.catalogue import (
    CallInputError,
    claim_call_args,
    create_call_args,
    finish_call_args,
)
from agentq.orchestrator.calls.state import CallField
from agentq.orchestrator.calls.store import CallStore
from agentq.orchestrator.core import keys
from agentq.orchestrator.core.errors import RunConflictError, UnknownToolError
from agentq.orchestrator.core.messages import ToolResultPart
from agentq.orchestrator.core.tool_errors import ToolErrorKind
from agentq.orchestrator.loop.plan import error_result
from agentq.orchestrator.runs.state import CallStatus, Outcome
from agentq.orchestrator.tools import ToolDef
from agentq.workers.tools.function_tools import tool
from agentq.workers.worker.embedded import embedded
from tests.support.embedded_runs import FAST, TIMEOUT_S

pytestmark = pytest.mark.component

EXECUTIONS: list[str] = []


@tool
def add(a: float, b: float) -> float:
    """Add two numbers."""
    EXECUTIONS.append("add")
    return a + b


@tool
def broken(message: str) -> str:
    """Always fails."""
    raise ValueError(message)


@tool
async def count_to(n: int) -> AsyncIterator[Any]:
    """Yields 1..n, then the total (the result; every value is progress as it comes)."""
    for i in range(1, n + 1):
        yield {"at": i}
    yield {"done": n}


STARTED = asyncio.Event()


@tool
async def wait_long(seconds: float) -> str:
    """Sleeps (until cancelled)."""
    STARTED.set()
    await asyncio.sleep(seconds)
    return "slept"


TOOLS = [add, broken, count_to, wait_long]


async def test_a_call_returns_its_output_without_a_run() -> None:
    async with embedded(tools=TOOLS, settings=FAST) as client:
        result = await client.calls.call("add", {"a": 1, "b": 2}, timeout_s=TIMEOUT_S)
        runs = await client.runs.recent()
    assert (result.output, result.is_error, result.error) == (3, False, None)
    assert result.tool_name == "add"
    assert result.duration_s >= 0
    assert runs == []  # no run was created


async def test_an_unknown_tool_is_refused_naming_it() -> None:
    async with embedded(tools=TOOLS, settings=FAST) as client:
        with pytest.raises(UnknownToolError, match="'nope'"):
            await client.calls.call("nope", {})


async def test_input_breaking_the_schema_is_refused_with_its_path() -> None:
    async with embedded(tools=TOOLS, settings=FAST) as client:
        with pytest.raises(CallInputError) as raised:
            await client.calls.call("add", {"a": "one", "b": 2})
    assert raised.value.violations[0]["path"] == "/a"
    assert "'add'" in str(raised.value)


async def test_a_failing_tool_is_a_result_with_is_error() -> None:
    async with embedded(tools=TOOLS, settings=FAST) as client:
        result = await client.calls.call("broken", {"message": "boom"}, timeout_s=TIMEOUT_S)
    assert result.is_error
    assert result.error is not None
    assert "boom" in result.error


async def test_progress_reaches_the_caller_in_order() -> None:
    seen: list[Any] = []
    async with embedded(tools=TOOLS, settings=FAST) as client:
        result = await client.calls.call(
            "count_to", {"n": 3}, timeout_s=TIMEOUT_S, on_progress=seen.append
        )
    assert seen == [{"at": 1}, {"at": 2}, {"at": 3}, {"done": 3}]
    assert result.output == {"done": 3}


async def test_an_idempotency_key_returns_the_first_result_and_executes_once() -> None:
    EXECUTIONS.clear()
    async with embedded(tools=TOOLS, settings=FAST) as client:
        first = await client.calls.call("add", {"a": 2, "b": 2}, idempotency_key="k1")
        again = await client.calls.call("add", {"a": 2, "b": 2}, idempotency_key="k1")
        other_tenant = await client.calls.call(
            "add", {"a": 2, "b": 2}, idempotency_key="k1", tenant="t2"
        )
        with pytest.raises(RunConflictError, match="k1"):
            await client.calls.call("add", {"a": 5, "b": 2}, idempotency_key="k1")
    assert first.call_id == again.call_id != other_tenant.call_id
    assert again.output == 4
    assert EXECUTIONS == ["add", "add"]  # once per tenant


async def test_a_cancelled_call_ends_with_an_error_result_and_aborts_its_job() -> None:
    STARTED.clear()
    async with embedded(tools=TOOLS, settings=FAST) as client:
        call_id, created, _ = await client.calls.start("wait_long", {"seconds": 60})
        assert created
        await asyncio.wait_for(STARTED.wait(), TIMEOUT_S)
        result = await client.calls.cancel(call_id, "the caller gave up")
        job_id = keys.call_job_id(call_id)
        aborted = await client.redis.zscore(keys.abort_set_of(job_id), job_id)
        # The worker's job is aborted: nothing records a second result.
        again = await client.calls.result(call_id)
    assert result.is_error
    assert result.cancelled
    assert result.error == "the caller gave up"
    assert aborted is not None
    assert again == result


async def test_the_catalogue_lists_the_callable_tools_with_their_schemas() -> None:
    async with embedded(tools=TOOLS, settings=FAST) as client:
        tools = {t.name: t for t in await client.calls.tools()}
    assert {"add", "broken", "count_to", "wait_long"} <= set(tools)
    assert tools["add"].input_schema["required"] == ["a", "b"]
    assert tools["add"].description == "Add two numbers."


# -- the transitions, each applied twice ------------------------------------------


def _tool() -> ToolDef:
    return ToolDef(name="add", kind="function", queue="nowhere", timeout_s=5)


async def test_call_transitions_are_write_once() -> None:
    async with embedded(settings=FAST) as client:
        store = CallStore(client.redis)
        create = create_call_args("c1", _tool(), {"a": 1}, tenant="t", trace={})
        assert (await store.create(create)).outcome == Outcome.CREATED
        again = await store.create(create)
        assert (again.outcome, again.call_status) == (Outcome.EXISTS, CallStatus.QUEUED)
        other = create_call_args("c1", _tool(), {"a": 2}, tenant="t", trace={})
        assert (await store.create(other)).outcome == Outcome.CONFLICT

        claim = claim_call_args("c1", attempt=1)
        claimed = await store.claim(claim)
        assert claimed.outcome == Outcome.CLAIMED
        assert claimed.tool is not None
        assert ToolDef.model_validate_json(claimed.tool).name == "add"

        first = ToolResultPart(tool_call_id="c1", tool_name="add", output=1)
        second = error_result("c1", "add", "late", ToolErrorKind.EXECUTION)
        assert (await store.finish(finish_call_args("c1", first))).outcome == Outcome.RECORDED
        assert (await store.finish(finish_call_args("c1", second))).outcome == Outcome.DUPLICATE
        # A re-delivered job finds the result and does not execute.
        assert (await store.claim(claim)).outcome == Outcome.DONE
        stored = await store.read("c1")
        assert stored[CallField.STATUS] == CallStatus.DONE
        assert ToolResultPart.model_validate_json(stored[CallField.RESULT]) == first
        assert await client.redis.ttl(keys.call_meta("c1")) > 0

        unknown = claim_call_args("c2", attempt=1)
        assert (await store.claim(unknown)).outcome == Outcome.UNKNOWN_CALL
        events = [e.type async for e in store.events("c1", follow=False)]
    assert events == ["tool-call", "tool-running", "tool-result"]


async def test_a_stale_job_of_a_finished_call_is_not_run_again() -> None:
    """The job arq re-delivers after the result is recorded finds DONE and stops."""
    EXECUTIONS.clear()
    async with embedded(tools=TOOLS, settings=FAST) as client:
        result = await client.calls.call("add", {"a": 1, "b": 1}, timeout_s=TIMEOUT_S)
        job = create_call_args(result.call_id, _tool(), {}, tenant="x", trace={}).job
        # Re-enqueue the very job (as arq does after a worker dies) and wait for a call
        # of another id behind it on the same queue: the first was taken before it.
        await client.redis.zadd(job.queue_key.replace("nowhere", "tools"), {job.job_id: 0})
        await client.redis.set(keys.arq_job(job.job_id), job.payload)
        follow = await client.calls.call("add", {"a": 0, "b": 0}, timeout_s=TIMEOUT_S)
    assert follow.output == 0
    assert EXECUTIONS == ["add", "add"]
