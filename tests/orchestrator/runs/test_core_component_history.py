"""Incremental history: a worker that ran a run's last step reads only the messages
appended since; any other reads the whole history; either way the model sees exactly
the history it saw when every step read it whole (workers/steps/history_cache.py)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from agentq import tool
from agentq.orchestrator.core import keys
from agentq.orchestrator.core.messages import MESSAGE_ADAPTER, ToolResultPart, UserMessage
from agentq.orchestrator.loop.plan import CallPlan
from agentq.orchestrator.runs.state import (
    BeginStep,
    BeginStepReply,
    CallRecord,
    CallStatus,
    CommitStep,
    CreateRun,
    Outcome,
    StepAfter,
)
from agentq.orchestrator.runs.state.history import (
    HISTORY_INLINE_MAX,
    REF_ORDER_MAX_BYTES,
    tool_message_frame,
)
from agentq.orchestrator.runs.store import RunStore
from agentq.orchestrator.runs.transitions import model_job, result_args, tool_job
from agentq.workers.steps.history_cache import asking, completed
from agentq.workers.worker.embedded import embedded
from tests.support.embedded_runs import FAST, TIMEOUT_S, Embedded, ModelLog, memory_run_store
from tests.support.specs import calls, scripted

pytestmark = pytest.mark.component

Start = Callable[..., Embedded]


@dataclass
class Begun:
    step: int
    known: int
    start: int
    n_messages: int


@pytest.fixture
def begun(monkeypatch: pytest.MonkeyPatch) -> list[Begun]:
    """Every begin_step the test's workers applied: what they held, what they got."""
    seen: list[Begun] = []
    original = RunStore.begin_step

    async def spy(self: RunStore, transition: BeginStep) -> BeginStepReply:
        reply = await original(self, transition)
        if reply.outcome == Outcome.OK:
            seen.append(Begun(transition.step, transition.known, reply.start, len(reply.messages)))
        return reply

    monkeypatch.setattr(RunStore, "begin_step", spy)
    return seen


@tool
async def echo(text: str) -> str:
    """Return the text (a 1 KB tool output per step)."""
    return text


def _steps_spec(n: int) -> dict[str, Any]:
    script = [{"text": f"step {i}", **calls(("echo", {"text": f"{i}" * 1024}))} for i in range(n)]
    return scripted(*script, {"text": "done"}, tools=["echo"], max_steps=n + 1)


async def test_a_warm_worker_fetches_only_the_new_messages(
    start: Start, model_log: ModelLog, begun: list[Begun]
) -> None:
    n = 6
    async with start([echo]) as client:
        run_id = await client.runs.submit(_steps_spec(n))
        result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
    assert result.status == "succeeded", result.error
    assert [b.step for b in begun] == list(range(n + 1))
    assert (begun[0].known, begun[0].start, begun[0].n_messages) == (0, 0, 1)
    for b in begun[1:]:
        # Held: the prompt and two messages per step before; got: the last step's two.
        assert (b.known, b.start, b.n_messages) == (2 * b.step - 1, 2 * b.step - 1, 2), b
    # The model saw the whole history each step: the prompt, then what the run recorded.
    for step in range(n + 1):
        sent = model_log.request(step).messages
        assert sent[1:] == result.messages[: 2 * step], step
        assert sent[0] == UserMessage(content="go")


async def test_a_worker_without_the_history_reads_it_whole(
    model_log: ModelLog, begun: list[Begun]
) -> None:
    """No cache (as on another worker, or after a restart): every step reads it all,
    and sends the model what a warm worker sends."""
    n = HISTORY_INLINE_MAX  # long enough for the history to be read outside begin_step
    cold = FAST.model_copy(update={"history_cache_bytes": 0})
    async with embedded(tools=[echo], settings=cold) as client:
        run_id = await client.runs.submit(_steps_spec(n))
        result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
    assert result.status == "succeeded", result.error
    assert [(b.known, b.start, b.n_messages) for b in begun] == [
        (0, 0, 1 + 2 * step) for step in range(n + 1)
    ]
    for step in range(n + 1):
        assert model_log.request(step).messages[1:] == result.messages[: 2 * step]


# -- begin_step on a run built through the real transitions --------------------------


@pytest.fixture
async def store() -> AsyncIterator[RunStore]:
    async with memory_run_store("history") as store:
        yield store


RUN = "h1"
OUTPUT = "o" * 300


def _create(prompt: str = "go") -> CreateRun:
    return CreateRun(
        run_id=RUN,
        spec=json.dumps({"model": {"provider": "scripted", "script": []}, "prompt": prompt}),
        spec_hash="h",
        tools={"t": json.dumps({"name": "t", "kind": "function", "queue": "tools"})},
        tool_order=["t"],
        messages=[UserMessage(content=prompt).model_dump_json()],
        trace="{}",
        event=json.dumps({"type": "start", "run_id": RUN, "at": 0}),
        next_job=model_job(RUN, 0),
    )


def _begin(step: int) -> BeginStep:
    return BeginStep(run_id=RUN, step=step, event=json.dumps({"type": "start-step"}))


def _commit(step: int, call_ids: list[str]) -> CommitStep:
    plans = [
        CallPlan(id=i, name="t", input={}, status=CallStatus.QUEUED, queue="tools")
        for i in call_ids
    ]
    return CommitStep(
        run_id=RUN,
        step=step,
        resp="{}",
        assistant=json.dumps({"role": "assistant", "content": f"step {step}"}),
        text="",
        finish_reason="tool-calls",
        usage={"input_tokens": 1, "output_tokens": 1, "total_tokens": 2},
        after=StepAfter.CONTINUE,
        order=json.dumps(call_ids),
        calls=[CallRecord(id=p.id, call=p.model_dump_json(), status=p.status) for p in plans],
        events=[],
        jobs=[tool_job(RUN, step, p) for p in plans],
        pending=len(plans),
        parked=0,
        finishes_now=False,
        next_job=model_job(RUN, step + 1),
    )


def _result(call_id: str) -> ToolResultPart:
    return ToolResultPart(tool_call_id=call_id, tool_name="t", output=f"{call_id}:{OUTPUT}")


async def _run_step(store: RunStore, step: int, call_ids: list[str]) -> None:
    """Step `step` begins, plans `call_ids` and joins once their results are in (the
    last result first: the tool message still lists them in call order)."""
    assert (await store.begin_step(_begin(step))).outcome == Outcome.OK
    assert (await store.commit_step(_commit(step, call_ids))).outcome == Outcome.COMMITTED
    for call_id in reversed(call_ids):
        await store.record_result(result_args(RUN, step, _result(call_id)))


def _tool_message(call_ids: list[str]) -> str:
    open_, close = tool_message_frame()
    return open_ + ",".join(_result(i).model_dump_json() for i in call_ids) + close


async def test_begin_step_sends_what_the_worker_lacks_under_the_runs_stamp(
    store: RunStore,
) -> None:
    await store.create(_create())
    await _run_step(store, 0, ["a", "b"])
    whole = await store.begin_step(_begin(1))
    assert whole.start == 0
    assert whole.messages[2] == _tool_message(["a", "b"])  # the reference, resolved
    assert [type(MESSAGE_ADAPTER.validate_json(m)).__name__ for m in whole.messages] == [
        "UserMessage",
        "AssistantMessage",
        "ToolMessage",
    ]

    def held(known: int, stamp: str) -> BeginStep:
        return _begin(1).model_copy(update={"known": known, "known_stamp": stamp})

    tail = await store.begin_step(held(2, whole.stamp))
    assert (tail.start, tail.messages) == (2, whole.messages[2:])
    # The spec and tools come with the whole history only: a warm worker holds them.
    assert (json.loads(whole.spec)["prompt"], len(whole.tools)) == ("go", 1)
    assert (tail.spec, tail.tools) == ("", [])
    # Another stamp (another run of the id), or more than the run has: all of it.
    for known, stamp in ((2, "another"), (4, whole.stamp)):
        again = await store.begin_step(held(known, stamp))
        assert (again.start, again.messages) == (0, whole.messages)


async def test_a_reference_carries_its_steps_order_and_resolves_with_the_results_alone(
    store: RunStore,
) -> None:
    """begin_step resolves a reference every step: the order it carries spares reading
    the step's ORDER (a step whose ORDER were gone would resolve to no parts without it)."""
    await store.create(_create())
    await _run_step(store, 0, ["a", "b"])
    assert await store.redis.lindex(keys.messages(RUN), 2) == b'@tool-results:0["a", "b"]'  # type: ignore[misc]
    await store.redis.hdel(keys.step(RUN, 0), "order")  # type: ignore[misc]
    whole = await store._apply(_begin(1), BeginStepReply)
    assert whole.messages[2] == _tool_message(["a", "b"])


async def test_a_reference_without_an_order_is_resolved_through_its_steps_hash(
    store: RunStore,
) -> None:
    """A wide step's order stays out of the list, as every order did before orders rode
    in references (a run written then reads the same)."""
    await store.create(_create())
    wide = [f"call-{i:03d}" for i in range(REF_ORDER_MAX_BYTES // 8)]
    await _run_step(store, 0, wide)
    assert await store.redis.lindex(keys.messages(RUN), 2) == b"@tool-results:0"  # type: ignore[misc]
    whole = await store._apply(_begin(1), BeginStepReply)
    assert whole.messages[2] == _tool_message(wide)
    _, resolved, _ = await store.snapshot(RUN)
    assert resolved[2] == _tool_message(wide)


async def test_a_redelivered_step_reads_the_same_history_once(store: RunStore) -> None:
    await store.create(_create())
    await _run_step(store, 0, ["a"])
    first = completed(None, await store.begin_step(_begin(1)))
    # The step's job is delivered again (its worker lost Redis before the commit): the
    # worker holds what the first delivery read, and nothing was appended since.
    reply = await store.begin_step(asking(first, _begin(1)))
    assert (reply.start, reply.messages) == (3, [])
    second = completed(first, reply)
    assert second.messages == first.messages
    await store.commit_step(_commit(1, ["c"]))
    assert (await store.begin_step(asking(second, _begin(1)))).outcome == Outcome.DUPLICATE
    await store.record_result(result_args(RUN, 1, _result("c")))
    third = completed(second, await store.begin_step(asking(second, _begin(2))))
    assert len(third.messages) == 5
    whole = completed(None, await store.begin_step(_begin(2)))
    assert third.messages == whole.messages


async def test_a_later_run_of_the_same_id_never_reads_the_earlier_ones_history(
    store: RunStore,
) -> None:
    await store.create(_create("first"))
    await _run_step(store, 0, ["a"])
    held = completed(None, await store.begin_step(_begin(1)))
    # The run expires; a run of the same id is submitted and reaches the same length.
    await store.redis.delete(*[keys.meta(RUN), keys.messages(RUN), keys.step(RUN, 0)])
    await store.create(_create("second"))
    await _run_step(store, 0, ["b"])
    reply = await store.begin_step(asking(held, _begin(1)))
    assert reply.start == 0
    history = completed(held, reply)
    assert history.messages[0] == UserMessage(content="second")
    assert "b:" in history.messages[2].model_dump_json()


async def test_a_snapshot_resolves_the_history_and_a_fork_keeps_it_referred(
    store: RunStore,
) -> None:
    await store.create(_create())
    await _run_step(store, 0, ["a", "b"])
    _, messages, _ = await store.snapshot(RUN)
    assert messages[2] == _tool_message(["a", "b"])
    _, stored, steps = await store.snapshot(RUN, resolved=False)
    assert stored[2] == '@tool-results:0["a", "b"]'  # the step's order rides along
    assert OUTPUT in steps[0]["r:a"]


async def test_a_long_history_to_a_worker_holding_none_is_read_outside_the_transition(
    store: RunStore,
) -> None:
    await store.create(_create())
    early = completed(None, await store.begin_step(_begin(0)))  # a worker that ran step 0
    steps = HISTORY_INLINE_MAX // 2 + 1
    for n in range(steps):
        await _run_step(store, n, [f"c{n}", f"d{n}"])
    bare = await store._apply(_begin(steps), BeginStepReply)  # what the Lua replies
    assert (bare.start, bare.length, bare.messages) == (0, 1 + 2 * steps, [])
    whole = await store.begin_step(_begin(steps))
    _, resolved, _ = await store.snapshot(RUN)
    assert (whole.start, whole.messages) == (0, resolved)
    assert whole.messages[-1] == _tool_message([f"c{steps - 1}", f"d{steps - 1}"])
    # The worker that ran step 0 only: what it lacks is many messages, also read outside.
    lacking = await store._apply(asking(early, _begin(steps)), BeginStepReply)
    assert (lacking.start, lacking.messages) == (1, [])
    caught_up = completed(early, await store.begin_step(asking(early, _begin(steps))))
    assert caught_up.messages == completed(None, whole).messages
    # A warm worker's short tail still comes in the reply itself.
    held = completed(None, whole)
    await store.commit_step(_commit(steps, ["e"]))
    await store.record_result(result_args(RUN, steps, _result("e")))
    tail = await store._apply(asking(held, _begin(steps + 1)), BeginStepReply)
    assert (tail.start, len(tail.messages)) == (len(resolved), 2)
