"""The run state's hardening: taken ids, parked calls' deadlines, the registry's TTL,
and Redis errors mapped at the store's boundary."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from arq import Retry

from agentq import tool
from agentq.orchestrator.calls.home import InputAsk
from agentq.orchestrator.client import Client
from agentq.orchestrator.core import events as ev
from agentq.orchestrator.core import keys
from agentq.orchestrator.core.envelopes import JobEnvelope
from agentq.orchestrator.core.errors import InfrastructureError, RunConflictError, ToolError
from agentq.orchestrator.core.tool_errors import ToolErrorKind
from agentq.orchestrator.redis.connect import connect, forget_memory_server
from agentq.orchestrator.runs.store import RunStore
from agentq.orchestrator.tools import ToolAnnouncement
from agentq.orchestrator.tools.announcements import ANNOUNCEMENT_TTL_S
from agentq.workers.jobs.base import WorkerDeps, guarded
from agentq.workers.jobs.park_expiry import park_expiry
from agentq.workers.tools.function_tools import FunctionTool
from tests.support.embedded_runs import (
    TIMEOUT_S,
    Embedded,
    all_events,
    of_type,
    tool_message_parts,
    wait_event,
)
from tests.support.infra import free_port
from tests.support.specs import calls, scripted

pytestmark = pytest.mark.component

Start = Callable[..., Embedded]


@tool
def transfer(amount: int) -> str:
    """Move money (needs a human's approval)."""
    return f"sent {amount}"


ASK = {"type": "client", "name": "ask_user", "park_timeout_s": 0.2}


@pytest.fixture
def flaky() -> FunctionTool:
    failed: set[str] = set()

    @tool
    def flaky(key: str, retryable: bool) -> str:
        """Fails (retryable or not) the first time it is called with a key."""
        if key not in failed:
            failed.add(key)
            raise ToolError(f"{key}: not yet", retryable=retryable)
        return f"{key}: ok"

    return flaky


@pytest.mark.parametrize(
    ("retry", "retryable", "output"),
    [
        pytest.param({"max_attempts": 2, "backoff_s": 0}, True, "ok", id="retried"),
        pytest.param(None, True, "not yet", id="no-policy"),
        pytest.param({"max_attempts": 2, "backoff_s": 0}, False, "not yet", id="not-retryable"),
    ],
)
async def test_a_tool_retry_policy_retries_retryable_errors(
    start: Start, retry: dict[str, float] | None, retryable: bool, output: str, flaky: FunctionTool
) -> None:
    key = f"{retry}-{retryable}"
    spec_tool: dict[str, Any] = {"type": "function", "name": "flaky"}
    if retry is not None:
        spec_tool["retry"] = retry
    spec = scripted(
        calls(("flaky", {"key": key, "retryable": retryable})), {"text": "done"}, tools=[spec_tool]
    )
    async with start([flaky]) as client:
        result = await client.runs.wait(await client.runs.submit(spec), timeout_s=TIMEOUT_S)
    (part,) = tool_message_parts(result.messages)
    assert output in str(part.output)
    assert part.is_error == (output != "ok")


async def test_a_taken_id_refuses_another_spec_and_accepts_the_same(start: Start) -> None:
    spec = scripted({"text": "hi"}, id="taken")
    async with start() as client:
        assert await client.runs.submit(spec) == "taken"
        assert await client.runs.submit(spec) == "taken"  # idempotent
        with pytest.raises(RunConflictError, match="'taken'"):
            await client.runs.submit({**spec, "prompt": "something else"})
        result = await client.runs.wait("taken", timeout_s=TIMEOUT_S)
    assert result.status == "succeeded"
    assert [m.role for m in result.messages] == ["assistant"]  # one run, run once


async def test_a_client_tool_nobody_answers_becomes_a_tool_error(start: Start) -> None:
    spec = scripted(calls(("ask_user", {})), {"text": "gave up"}, tools=[ASK])
    async with start() as client:
        run_id = await client.runs.submit(spec)
        result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
        events = await all_events(client, run_id)
    assert result.status == "succeeded", result.error
    (part,) = tool_message_parts(result.messages)
    assert (part.is_error, part.error_kind) == (True, ToolErrorKind.TIMEOUT)
    assert part.output == "The call to 'ask_user' was not given a result within 0.2 s."
    assert [e.type for e in events].count("tool-error") == 1


async def test_an_approval_nobody_gives_becomes_a_tool_error(start: Start) -> None:
    approval = {"type": "function", "name": "transfer", "needs_approval": True}
    spec = scripted(
        calls(("transfer", {"amount": 5})),
        {"text": "ok"},
        tools=[{**approval, "park_timeout_s": 0.2}],
    )
    async with start([transfer]) as client:
        run_id = await client.runs.submit(spec)
        result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
    assert result.status == "succeeded", result.error
    (part,) = tool_message_parts(result.messages)
    assert (part.is_error, part.error_kind) == (True, ToolErrorKind.TIMEOUT)
    assert part.output == "The call to 'transfer' was not approved within 0.2 s."


async def test_a_call_resolved_in_time_is_left_alone_by_its_deadline(start: Start) -> None:
    spec = scripted(
        calls(("ask_user", {})), {"text": "thanks"}, tools=[{**ASK, "park_timeout_s": 60}]
    )
    async with start() as client:
        run_id = await client.runs.submit(spec)
        event = await wait_event(client, run_id, of_type("finish-step", step=0))
        assert isinstance(event, ev.FinishStep)
        assert event.step == 0
        call_id = (await client.runs.result(run_id)).pending[0]["tool_call_id"]
        expiry = keys.arq_job(keys.expiry_job_id(run_id, 0, call_id))
        assert await client.redis.exists(expiry)  # the deadline waits, deferred
        assert await client.redis.pttl(expiry) > 60_000  # and outlives its wait
        await client.runs.submit_tool_result(run_id, call_id, "blue")
        result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
        # The deadline's transition, applied now, is a no-op.
        envelope = JobEnvelope(kind="park_expiry", run_id=run_id, step=0, call_id=call_id)
        deps = WorkerDeps(store=client.runs.store, models=None)  # type: ignore[arg-type]
        await park_expiry({"agentq": deps}, envelope.model_dump())
        after = await client.runs.result(run_id)
    assert result.status == "succeeded"
    assert tool_message_parts(result.messages)[0].output == "blue"
    assert after == result


async def test_the_registry_drops_stale_tools_and_expires() -> None:
    url = "memory://registry-ttl"
    redis = connect(url)
    try:
        store = RunStore(redis)
        old = ToolAnnouncement(name="gone", kind="function", queue="tools")
        stale = old.model_copy(update={"seen_at": time.time() - ANNOUNCEMENT_TTL_S - 1})
        await redis.hset(keys.REGISTRY, "gone", stale.model_dump_json())  # type: ignore[misc]
        await store.announce([ToolAnnouncement(name="live", kind="function", queue="tools")])
        assert set(await store.registry()) == {"live"}
        assert 0 < await redis.ttl(keys.REGISTRY) <= ANNOUNCEMENT_TTL_S
    finally:
        await redis.aclose()
        forget_memory_server(url)


async def test_redis_errors_leave_the_store_as_retryable_infrastructure_errors() -> None:
    async with Client(f"redis://127.0.0.1:{free_port()}/0") as client:
        with pytest.raises(InfrastructureError) as caught:
            await client.runs.store.meta("any")
    assert caught.value.retryable


async def test_a_worker_retries_a_job_on_a_retryable_infrastructure_error() -> None:
    envelope = JobEnvelope(kind="tool_call", run_id="r", step=0, call_id="c")

    async def outage() -> Any:
        raise InfrastructureError("Redis: connection refused", retryable=True)

    deps = WorkerDeps(store=None, models=None)  # type: ignore[arg-type]
    with pytest.raises(Retry):
        await guarded(deps, envelope, outage())


@pytest.mark.parametrize(
    ("deadline_in_s", "park_timeout_s", "longest_s"),
    [(60.0, 5.0, 5.0), (5.0, 60.0, 5.0), (60.0, None, 60.0)],
)
def test_an_input_request_waits_no_longer_than_a_parked_call_may(
    deadline_in_s: float, park_timeout_s: float | None, longest_s: float
) -> None:
    ask = InputAsk(
        request_id="c.1.1",
        tool_name="t",
        message="",
        input={},
        deadline_at=time.time() + deadline_in_s,
        park_timeout_s=park_timeout_s,
    )
    assert longest_s - 1 < ask.parked_wait_s() <= longest_s


async def test_a_create_starts_clean_over_leftover_keys_of_its_id(start: Start) -> None:
    async with start() as client:
        await client.redis.xadd(keys.events("left"), {"e": "{}"}, id="0-7")
        await client.redis.rpush(keys.messages("left"), "stray")  # type: ignore[misc]
        run_id = await client.runs.submit(scripted({"text": "hi"}, id="left"))
        result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
        events = await all_events(client, run_id)
    assert result.status == "succeeded"
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert events[0].type == "start"
