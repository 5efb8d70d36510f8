"""The moving index is written at most once a second per run (`moved`, runs/lua/prelude.lua),
on a real redis-server: a run scored less than MOVED_EVERY_S ago (by its transitions' own
`at`) is not scored again; one scored longer ago, or by a caller whose clock is behind, is;
and whatever else wrote the entry (the sweeper took it out, a hold scored it later) never
keeps the next move from scoring it.

Each test sets the run's score to 0 behind its back after the transition that scored it,
so a transition that scores it again is seen whatever Redis's clock says.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from agentq.orchestrator.core import keys
from agentq.orchestrator.core.messages import ToolResultPart
from agentq.orchestrator.loop.plan import CallPlan
from agentq.orchestrator.machine.store import resolved, text
from agentq.orchestrator.redis.connect import connect
from agentq.orchestrator.runs.state import (
    BeginStep,
    CallRecord,
    CallStatus,
    CommitStep,
    HoldStep,
    MetaField,
    Outcome,
    StepAfter,
    StepField,
)
from agentq.orchestrator.runs.store import RunStore
from agentq.orchestrator.runs.transitions import model_job, result_args, tool_job
from tests.support.run_inputs import one_tool_run

pytestmark = pytest.mark.component

RUN = "r1"
AT = 1_800_000_000.0


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[Redis]:
    client = connect(redis_url)
    try:
        yield client
    finally:
        await client.aclose()


def _event(type_: str) -> str:
    return json.dumps({"type": type_, "run_id": RUN, "at": 0, "step": 0})


async def _score(redis: Redis) -> float | None:
    score: float | None = await redis.zscore(keys.moving_runs(), RUN)
    return score


async def _zero(redis: Redis) -> None:
    """The entry set to 0 behind the run's back: whether a transition scores it again shows."""
    await redis.zadd(keys.moving_runs(), {RUN: 0})


async def _create(store: RunStore, at: float = AT) -> None:
    await store.create(one_tool_run(RUN, at=at))


async def _commit(store: RunStore, call_ids: list[str], at: float) -> Outcome:
    plans = [
        CallPlan(id=i, name="t", input={}, status=CallStatus.QUEUED, queue="tools")
        for i in call_ids
    ]
    await store.begin_step(BeginStep(run_id=RUN, step=0, event=_event("start-step"), at=at))
    reply = await store.commit_step(
        CommitStep(
            run_id=RUN,
            step=0,
            resp="{}",
            assistant='{"role":"assistant","content":[]}',
            text="",
            finish_reason="tool-calls",
            usage={"input_tokens": 1, "output_tokens": 1, "total_tokens": 2},
            after=StepAfter.CONTINUE,
            order=json.dumps(call_ids),
            calls=[CallRecord(id=p.id, call=p.model_dump_json(), status=p.status) for p in plans],
            events=[_event("finish-step")],
            jobs=[tool_job(RUN, 0, p) for p in plans],
            pending=len(plans),
            parked=0,
            finishes_now=False,
            next_job=model_job(RUN, 1),
            at=at,
        )
    )
    return reply.outcome


async def _record(store: RunStore, call_id: str, at: float) -> Outcome:
    result = ToolResultPart(tool_call_id=call_id, tool_name="t", output="ok")
    record = result_args(RUN, 0, result).model_copy(update={"at": at})
    return (await store.record_result(record)).outcome


async def test_a_run_scored_less_than_a_second_ago_is_not_scored_again(redis: Redis) -> None:
    store = RunStore(redis)
    await _create(store)
    assert await _score(redis) is not None
    await _zero(redis)

    assert await _commit(store, ["c1", "c2", "c3"], at=AT + 0.5) == Outcome.COMMITTED
    assert await _record(store, "c1", at=AT + 0.9) == Outcome.RECORDED
    assert await _score(redis) == 0  # within the second of its create's score

    assert await _record(store, "c2", at=AT + 1.5) == Outcome.RECORDED
    assert await _score(redis) != 0  # a second on: scored again


async def test_a_caller_whose_clock_is_behind_scores_the_run(redis: Redis) -> None:
    store = RunStore(redis)
    await _create(store)
    await _zero(redis)
    assert await _commit(store, ["c1"], at=AT - 5) == Outcome.COMMITTED
    assert await _score(redis) != 0


async def test_a_recorded_result_is_recorded_once_and_counted_once(redis: Redis) -> None:
    store = RunStore(redis)
    await _create(store)
    assert await _commit(store, ["c1", "c2"], at=AT) == Outcome.COMMITTED
    assert await _record(store, "c1", at=AT) == Outcome.RECORDED
    assert await _record(store, "c1", at=AT) == Outcome.DUPLICATE
    pending = await resolved(redis.hget(keys.step(RUN, 0), StepField.PENDING))
    assert pending is not None
    assert text(pending) == "1"
    assert await _record(store, "c2", at=AT) == Outcome.CONTINUED


async def test_a_hold_does_not_keep_the_next_move_from_scoring_the_run(redis: Redis) -> None:
    store = RunStore(redis)
    await _create(store)
    await store.begin_step(BeginStep(run_id=RUN, step=0, event=_event("start-step"), at=AT))
    hold = HoldStep(run_id=RUN, step=0, scope="batch:t:b", event=_event("step-held"), recheck_ms=0)
    assert (await store.hold_step(hold.model_copy(update={"at": AT}))).outcome == Outcome.HELD
    await _zero(redis)  # as a hold scores it: not now
    assert await _commit(store, ["c1"], at=AT) == Outcome.COMMITTED
    assert await _score(redis) != 0


async def test_a_committed_step_is_not_begun_again(redis: Redis) -> None:
    store = RunStore(redis)
    await _create(store)
    assert await _commit(store, ["c1"], at=AT) == Outcome.COMMITTED
    begin = BeginStep(run_id=RUN, step=0, event=_event("start-step"))
    assert (await store.begin_step(begin)).outcome == Outcome.DUPLICATE
    # A run created before the meta kept its committed step: the step's hash says.
    await resolved(redis.hdel(keys.meta(RUN), MetaField.COMMITTED))
    assert (await store.begin_step(begin)).outcome == Outcome.DUPLICATE
