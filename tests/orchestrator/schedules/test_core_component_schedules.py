"""Cron schedules on the embedded runtime: ticks fire runs, each tick one run however many
claim it, a tick missed while the fleet was down fires once (or not, per catchup), pause,
resume and delete; the spec is checked at create."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable

import pytest

from agentq.orchestrator.core import keys
from agentq.orchestrator.core.envelopes import MODEL_QUEUE, ScheduleJobEnvelope
from agentq.orchestrator.core.errors import SpecError, UnknownToolError
from agentq.orchestrator.schedules.api import ScheduleNotFoundError, tick_job, tick_run_id
from agentq.orchestrator.schedules.state import ScheduleOutcome, ScheduleTick
from tests.support.embedded_runs import Embedded
from tests.support.specs import scripted
from tests.support.tick_runs import tick_runs_created
from tests.support.waiting import eventually_async

pytestmark = pytest.mark.component

Start = Callable[..., Embedded]
SPEC = scripted({"text": "tick"})
YEAR_S = 365 * 86_400


async def test_every_second_each_tick_fires_one_run(start: Start) -> None:
    async with start() as client:
        info = await client.schedules.create("every-second", cron="* * * * * *", spec=SPEC)
        ticks = await eventually_async(
            lambda: client.schedules.runs("every-second"),
            "three ticks to fire",
            until=lambda records: len([r for r in records if r.run_id]) >= 3,
        )
        await client.schedules.pause("every-second")
        await tick_runs_created(client, [t.run_id for t in ticks if t.run_id], 10)
        results = [await client.runs.wait(t.run_id, timeout_s=10) for t in ticks if t.run_id]
    assert info.next_tick_at is not None
    assert info.next_tick_at * 1000 > info.generation  # the first tick after its creation
    fired = [t for t in ticks if t.run_id]
    # One run per tick, each tick a whole second, each run under its tick's own id.
    assert len({t.tick for t in fired}) == len(fired)
    assert all(t.tick == int(t.tick) for t in fired)
    assert [t.run_id for t in fired] == [
        tick_run_id("default", "every-second", info.generation, int(t.tick * 1000)) for t in fired
    ]
    assert {r.status for r in results} == {"succeeded"}


async def test_a_tick_claimed_by_many_fires_one_run(start: Start) -> None:
    async with start() as client:
        # Its first tick a year away: no timer falls due, the test claims it itself.
        client.schedules.clock = lambda: time.time() + YEAR_S
        info = await client.schedules.create("contended", cron="0 9 * * *", spec=SPEC)
        assert info.next_tick_at is not None
        tick = ScheduleJobEnvelope(
            tenant="default",
            name="contended",
            generation=info.generation,
            tick_ms=round(info.next_tick_at * 1000),
        )
        records = await asyncio.gather(*(client.schedules.fire(tick) for _ in range(6)))
        again = await client.schedules.fire(tick)  # a re-delivery, afterwards
        page = await client.runs.list()
        after = await client.schedules.get("contended")
    run_ids = {r.run_id for r in [*records, again] if r is not None}
    assert run_ids == {tick_run_id("default", "contended", info.generation, tick.tick_ms)}
    assert [r.id for r in page.runs] == list(run_ids)
    assert (after.fired, after.skipped) == (1, 0)
    assert after.next_tick_at == info.next_tick_at + 86_400  # the next day's, set once


@pytest.mark.parametrize(("catchup", "fired"), [("one", 1), ("skip", 0)])
async def test_a_tick_missed_while_the_fleet_was_down(
    start: Start, catchup: str, fired: int
) -> None:
    async with start() as client:
        # Created "a day ago": its first tick (a minute after) was missed, and so were
        # the 1,439 after it. On recovery: one run at most, then the next tick after now.
        client.schedules.clock = lambda: time.time() - 86_400
        await client.schedules.create("missed", cron="* * * * *", spec=SPEC, catchup=catchup)
        records = await eventually_async(
            lambda: client.schedules.runs("missed"), "the missed tick to be claimed"
        )
        info = await client.schedules.get("missed")
        runs = (await client.runs.list()).runs
    assert len(records) == 1
    assert records[0].skipped == (None if fired else "missed")
    assert len(runs) == fired
    assert info.next_tick_at is not None
    assert info.next_tick_at > time.time() - 60
    assert (info.fired, info.skipped) == (fired, 1 - fired)


async def test_pause_resume_delete(start: Start) -> None:
    async with start() as client:
        client.schedules.clock = lambda: time.time() + YEAR_S
        info = await client.schedules.create(
            "daily", cron="0 9 * * *", spec=SPEC, tz="Europe/Lisbon"
        )
        timers = keys.timers(MODEL_QUEUE)
        assert await client.redis.zcard(timers) == 1
        paused = await client.schedules.pause("daily")
        assert (paused.paused, paused.next_tick_at) == (True, None)
        assert await client.redis.zcard(timers) == 0  # its pending timer went with it
        resumed = await client.schedules.resume("daily")
        assert (resumed.paused, resumed.next_tick_at) == (False, info.next_tick_at)
        assert [s.name for s in await client.schedules.list()] == ["daily"]
        await client.schedules.delete("daily")
        assert await client.redis.zcard(timers) == 0
        assert await client.schedules.list() == []
        with pytest.raises(ScheduleNotFoundError):
            await client.schedules.get("daily")
        with pytest.raises(ScheduleNotFoundError):
            await client.schedules.pause("daily")


async def test_create_checks_the_spec_and_the_definition(start: Start) -> None:
    async with start() as client:
        with pytest.raises(UnknownToolError):
            await client.schedules.create("x", cron="0 9 * * *", spec=scripted(tools=["nope"]))
        with pytest.raises(SpecError, match="invalid cron"):
            await client.schedules.create("x", cron="0 9 * *", spec=SPEC)
        with pytest.raises(SpecError, match="overlap"):
            await client.schedules.create("x", cron="0 9 * * *", spec=SPEC, overlap="queue")
        first = await client.schedules.create("x", cron="0 9 * * *", spec=SPEC)
        again = await client.schedules.create("x", cron="0 9 * * *", spec=SPEC)
        with pytest.raises(SpecError, match="another definition"):
            await client.schedules.create("x", cron="0 10 * * *", spec=SPEC)
        assert again.generation == first.generation
        assert await client.schedules.list(tenant="other") == []


# A run that parks on a client tool: it goes on until someone answers (or cancels it).
PARKS = scripted(
    {"tool_calls": [{"name": "ask", "input": {}}]},
    {"text": "answered"},
    tools=[{"type": "client", "name": "ask"}],
)
LIVE = {"running", "awaiting"}


@pytest.mark.parametrize("overlap", ["skip", "cancel-previous"])
async def test_overlap_with_a_run_still_going(start: Start, overlap: str) -> None:
    async with start() as client:
        await client.schedules.create("slow", cron="* * * * * *", spec=PARKS, overlap=overlap)
        await eventually_async(
            lambda: client.schedules.runs("slow"),
            "three ticks",
            until=lambda records: len(records) >= 3,
        )
        await client.schedules.pause("slow")
        ticks = await client.schedules.runs("slow")
        await tick_runs_created(client, [t.run_id for t in ticks if t.run_id], 10)
        statuses = [
            (await client.runs.status(t.run_id)).status if t.run_id else None
            for t in reversed(ticks)
        ]
    first, *later = list(reversed(ticks))
    assert first.run_id is not None
    if overlap == "skip":
        # The first run never ends: every later tick fires none.
        assert [t.skipped for t in later] == ["overlap"] * len(later)
        assert statuses[0] in LIVE
    else:
        # Each tick cancels the run before it, so only the last one still waits.
        assert all(t.run_id is not None for t in later)
        assert [t.previous for t in later] == [t.run_id for t in [first, *later][:-1]]
        assert statuses[:-1] == ["cancelled"] * (len(statuses) - 1)
        assert statuses[-1] in LIVE


async def test_a_worker_that_died_after_the_claim_leaves_the_run_to_the_redelivery(
    start: Start,
) -> None:
    async with start() as client:
        client.schedules.clock = lambda: time.time() + YEAR_S
        info = await client.schedules.create("crash", cron="0 9 * * *", spec=SPEC)
        assert info.next_tick_at is not None
        tick_ms = round(info.next_tick_at * 1000)
        run_id = tick_run_id("default", "crash", info.generation, tick_ms)
        next_ms = tick_ms + 86_400_000
        # The dying worker's half: the tick claimed (and the next one set), no run yet.
        claimed = await client.schedules.store.apply(
            "default",
            ScheduleTick(
                name="crash",
                generation=info.generation,
                tick=str(tick_ms),
                run_id=run_id,
                next_tick=str(next_ms),
                next_job=tick_job("default", "crash", info.generation, next_ms),
            ),
        )
        assert claimed.outcome == ScheduleOutcome.FIRED
        assert (await client.runs.list()).runs == []
        tick = ScheduleJobEnvelope(
            tenant="default", name="crash", generation=info.generation, tick_ms=tick_ms
        )
        redelivered = await client.schedules.fire(tick)
        await client.schedules.fire(tick)
        runs = (await client.runs.list()).runs
        after = await client.schedules.get("crash")
    assert redelivered is not None
    assert redelivered.run_id == run_id
    assert [r.id for r in runs] == [run_id]
    assert after.fired == 1


async def test_a_tick_whose_run_is_refused_is_skipped_as_refused(start: Start) -> None:
    async with start() as client:
        client.schedules.clock = lambda: time.time() + YEAR_S
        info = await client.schedules.create("stale", cron="0 9 * * *", spec=SPEC)
        assert info.next_tick_at is not None
        # The deployment no longer offers what the stored spec names (a tool gone).
        stored = json.dumps(scripted({"text": "tick"}, tools=["gone"]))
        await client.redis.hset(keys.schedule_meta("default", "stale"), "spec", stored)  # type: ignore[misc]
        tick = ScheduleJobEnvelope(
            tenant="default",
            name="stale",
            generation=info.generation,
            tick_ms=round(info.next_tick_at * 1000),
        )
        record = await client.schedules.fire(tick)
        again = await client.schedules.fire(tick)  # a re-delivery finds it recorded
        listed = await client.schedules.runs("stale")
        after = await client.schedules.get("stale")
        runs = (await client.runs.list()).runs
    assert record is not None
    assert (record.run_id, record.skipped) == (None, "refused")
    assert record.error is not None
    assert "gone" in record.error
    assert "\n" not in record.error
    assert again is not None
    assert again.model_dump(exclude={"at"}) == record.model_dump(exclude={"at"})
    assert [r.model_dump(exclude={"at"}) for r in listed] == [again.model_dump(exclude={"at"})]
    assert (after.fired, after.skipped, after.last_run) == (0, 1, None)
    assert runs == []
