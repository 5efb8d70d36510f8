"""A step is committed once: commit_step finds a committed step in the meta its guard
reads (COMMITTED), not by a write-once HSETNX of its resp, and a run without the field
(created before it was kept) falls back to the step's hash."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from agentq.orchestrator.core import keys
from agentq.orchestrator.loop.plan import CallPlan
from agentq.orchestrator.runs.state import (
    BeginStep,
    CallRecord,
    CallStatus,
    CommitStep,
    MetaField,
    Outcome,
    StepAfter,
    StepField,
)
from agentq.orchestrator.runs.store import RunStore
from agentq.orchestrator.runs.transitions import model_job, tool_job
from tests.support.embedded_runs import memory_run_store
from tests.support.run_inputs import one_tool_run

pytestmark = pytest.mark.component

RUN = "once1"


@pytest.fixture
async def store() -> AsyncIterator[RunStore]:
    async with memory_run_store("commit-once") as store:
        await store.create(one_tool_run(RUN))
        begin = BeginStep(run_id=RUN, step=0, event=json.dumps({"type": "start-step"}))
        assert (await store.begin_step(begin)).outcome == Outcome.OK
        yield store


def _commit(resp: str) -> CommitStep:
    plan = CallPlan(id="c1", name="t", input={}, status=CallStatus.QUEUED, queue="tools")
    return CommitStep(
        run_id=RUN,
        step=0,
        resp=resp,
        assistant=json.dumps({"role": "assistant", "content": resp}),
        text="",
        finish_reason="tool-calls",
        usage={"input_tokens": 3, "output_tokens": 2, "total_tokens": 5},
        after=StepAfter.CONTINUE,
        order=json.dumps(["c1"]),
        calls=[CallRecord(id=plan.id, call=plan.model_dump_json(), status=plan.status)],
        events=[],
        jobs=[tool_job(RUN, 0, plan)],
        pending=1,
        parked=0,
        finishes_now=False,
        next_job=model_job(RUN, 1),
    )


async def _recorded(store: RunStore) -> tuple[bytes | None, int, bytes | None]:
    """The step's resp, the message list's length and the run's input tokens."""
    resp = await store.redis.hget(keys.step(RUN, 0), StepField.RESP)  # type: ignore[misc]
    length = await store.redis.llen(keys.messages(RUN))  # type: ignore[misc]
    tokens = await store.redis.hget(keys.meta(RUN), MetaField.USAGE_INPUT)  # type: ignore[misc]
    return resp, length, tokens


async def test_a_redelivered_commit_is_found_in_the_meta_and_records_nothing(
    store: RunStore,
) -> None:
    assert (await store.commit_step(_commit('"first"'))).outcome == Outcome.COMMITTED
    assert await store.redis.hget(keys.meta(RUN), MetaField.COMMITTED) == b"0"  # type: ignore[misc]
    before = await _recorded(store)
    assert before == (b'"first"', 2, b"3")
    # The meta alone says so: with the step's resp gone, the commit is still a duplicate.
    await store.redis.hdel(keys.step(RUN, 0), StepField.RESP)  # type: ignore[misc]
    assert (await store.commit_step(_commit('"again"'))).outcome == Outcome.DUPLICATE
    assert await _recorded(store) == (None, 2, b"3")


async def test_a_run_without_the_committed_field_is_judged_by_its_steps_hash(
    store: RunStore,
) -> None:
    await store.redis.hdel(keys.meta(RUN), MetaField.COMMITTED)  # type: ignore[misc]
    assert (await store.commit_step(_commit('"first"'))).outcome == Outcome.COMMITTED
    await store.redis.hdel(keys.meta(RUN), MetaField.COMMITTED)  # type: ignore[misc]
    assert (await store.commit_step(_commit('"again"'))).outcome == Outcome.DUPLICATE
    assert await _recorded(store) == (b'"first"', 2, b"3")


async def test_a_provider_batch_step_counts_apart_in_the_same_writes(store: RunStore) -> None:
    """A step answered through a provider's batch API: its batch counts (steps, tokens in
    and out) are added in the meta's one write with the run's totals, and its step marked
    batch-priced with its other fields; a second commit adds nothing."""
    batched = _commit('"first"').model_copy(update={"batch": True})
    assert (await store.commit_step(batched)).outcome == Outcome.COMMITTED
    assert (await store.commit_step(batched)).outcome == Outcome.DUPLICATE
    meta = await store.meta(RUN)
    counts = [
        meta.get(f) for f in (MetaField.BATCH_STEPS, MetaField.BATCH_INPUT, MetaField.BATCH_OUTPUT)
    ]
    assert counts == ["1", "3", "2"]
    assert (meta.get(MetaField.USAGE_INPUT), meta.get(MetaField.USAGE_TOTAL)) == ("3", "5")
    assert await store.redis.hget(keys.step(RUN, 0), StepField.BATCH) == b"1"  # type: ignore[misc]
