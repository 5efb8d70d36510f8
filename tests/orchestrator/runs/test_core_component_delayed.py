"""Delayed runs on the embedded runtime: created `scheduled`, their first step a timer due
at the start time, cancellable before it starts; a bad start time writes nothing."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime

import pytest

from agentq.orchestrator.core import keys
from agentq.orchestrator.core.envelopes import MODEL_QUEUE
from agentq.orchestrator.core.errors import StartTimeError
from tests.support.embedded_runs import TIMEOUT_S, Embedded, all_events
from tests.support.specs import scripted

pytestmark = pytest.mark.component

Start = Callable[..., Embedded]


async def test_a_delayed_run_waits_scheduled_then_starts_at_its_time(start: Start) -> None:
    async with start() as client:
        start_at = time.time() + 1.0
        run_id = await client.runs.submit(scripted({"text": "later"}), start_at=start_at)
        head = await client.runs.status(run_id)
        timers = await client.redis.zrange(keys.timers(MODEL_QUEUE), 0, -1, withscores=True)
        result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S + 1.0)
        events = await all_events(client, run_id)
    assert head.status == "scheduled"
    # Its first model step waits among the timers, due exactly at the start time.
    assert timers == [(keys.model_job_id(run_id, 0).encode(), float(int(start_at * 1000)))]
    assert result.status == "succeeded", result.error
    assert result.text == "later"
    assert result.start_at == int(start_at * 1000) / 1000
    # Not a moment early: the step began once its start time had come.
    (begun,) = [e for e in events if e.type == "start-step"]
    assert begun.at >= int(start_at * 1000) / 1000


async def test_a_delayed_run_is_cancelled_before_it_starts(start: Start) -> None:
    async with start() as client:
        run_id = await client.runs.submit(scripted({"text": "never"}), start_at=time.time() + 3600)
        await client.runs.cancel(run_id)
        result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
        timers = await client.redis.zcard(keys.timers(MODEL_QUEUE))
        job = await client.redis.exists(keys.arq_job(keys.model_job_id(run_id, 0)))
    assert result.status == "cancelled"
    assert result.steps == []
    assert (timers, job) == (0, 0)  # its timer went with it: nothing fires later


@pytest.mark.parametrize(
    ("start_at", "says"),
    [
        (time.time() - 60, "in the past"),
        (datetime(2030, 1, 1, 9, 0), "no time zone"),
    ],
    ids=["in-the-past", "no-time-zone"],  # the same in every xdist process (not the time)
)
async def test_a_bad_start_time_creates_nothing(
    start: Start, start_at: float | datetime, says: str
) -> None:
    async with start() as client:
        with pytest.raises(StartTimeError, match=says):
            await client.runs.submit(scripted({"text": "x"}), start_at=start_at)
        page = await client.runs.list()
    assert page.runs == []
