"""The worker's claim and end-of-job script (workers/queue/claims.py) on a real redis-server:
several jobs per call, claimed jobs out of the ready range, nothing claimed twice by
racing workers, a dead worker's jobs re-delivered, deferred and unserved jobs left."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from agentq.orchestrator.client import Client
from agentq.orchestrator.core import keys as state_keys
from agentq.orchestrator.core.envelopes import (
    ARQ_ABORT_SET,
    ARQ_IN_PROGRESS_PREFIX,
    ARQ_JOB_PREFIX,
    MODEL_QUEUE,
    TOOLS_QUEUE,
    JobEnvelope,
    queue_key,
)
from agentq.orchestrator.core.jobs import queued_job
from agentq.orchestrator.machine import scripts
from agentq.orchestrator.runs.state import lua_constants
from agentq.orchestrator.runs.store import load_scripts
from agentq.workers.queue import claims as claims_module
from agentq.workers.queue.claims import (
    TAKE_RIDING,
    Claimed,
    ClaimLedger,
    Taker,
    publish_tool_set,
)
from agentq.workers.queue.liveness import (
    ARQ_RETRY_PREFIX,
    Cadence,
    Reaping,
    held_jobs,
    holders_key,
    jobs_key,
    liveness_key,
    reap_lapsed,
    reap_pass,
)
from agentq.workers.tools.function import FunctionExecutor
from agentq.workers.worker.runtime import WorkerRuntime
from tests.support.sample_tools import add
from tests.support.specs import calls, scripted
from tests.support.waiting import eventually_async

pytestmark = pytest.mark.integration

QUEUE = "claims-test"
BACKSTOP_MS = 60_000


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[Redis]:
    client = Redis.from_url(redis_url)
    yield client
    await client.aclose()


async def enqueue(
    redis: Redis, n: int, *, run: str = "r", defer_s: float = 0.0, needs: str = ""
) -> list[str]:
    """n tool-call jobs in arq's layout, as a transition enqueues them (with a token each:
    the transitions' own `enqueue`, orchestrator/machine/lua/enqueue.lua)."""
    ids = []
    script = redis.register_script(_ENQUEUE)
    for i in range(n):
        env = JobEnvelope(kind="tool_call", run_id=run, step=0, call_id=f"c{i}", needs=needs)
        job = queued_job(env, QUEUE, defer_s=defer_s)
        await script(keys=[job.queue_key], args=[job.model_dump_json()])
        ids.append(job.job_id)
    return ids


_ENQUEUE = scripts.prune(
    scripts.fold(
        scripts.expand(
            lua_constants.render() + "-- @include enqueue\nreturn enqueue(cjson.decode(ARGV[1]))\n"
        )
    )
)


async def worker(redis: Redis, name: str, tools: list[str] | None = None) -> Taker:
    """A worker's taker, with the worker's lease taken (and its tool set published)."""
    await redis.set(liveness_key(name), name, px=60_000)
    await publish_tool_set(redis, tools or [])
    return Taker(redis, name, QUEUE, 0, BACKSTOP_MS, tools=tools or [])


async def ready(redis: Redis, taker: Taker) -> list[str]:
    now_ms = int(time.time() * 1000) + 1000
    raw = await redis.zrangebyscore(taker.keys[0], "-inf", now_ms)
    return sorted(r.decode() for r in raw)


def ids(claimed: list[Claimed]) -> list[str]:
    return sorted(c.job_id for c in claimed)


async def test_one_call_claims_up_to_the_free_slots_and_takes_them_out_of_the_ready_range(
    redis: Redis,
) -> None:
    jobs = await enqueue(redis, 5)
    taker = await worker(redis, "w1")

    more, claimed = await taker.take(taker.args(3))

    assert more  # two left behind for want of slots
    assert len(claimed) == 3
    assert set(ids(claimed)) <= set(jobs)
    for job in claimed:  # what arq's run_job would have fetched, in the claim's reply
        assert job.payload == await redis.get(ARQ_JOB_PREFIX + job.job_id)
        assert job.deliveries == 1
        assert await redis.get(ARQ_IN_PROGRESS_PREFIX + job.job_id) == b"w1"
    assert await ready(redis, taker) == sorted(set(jobs) - set(ids(claimed)))
    assert await redis.zcard(taker.keys[0]) == 5  # a queue's depth still counts them
    held = held_jobs(await cast(Any, redis.hgetall(jobs_key("w1"))))
    assert sorted(held) == ids(claimed)
    assert {json.loads(v)["w"] for v in held.values()} == {taker.wake_key}
    assert await cast(Any, redis.sismember(holders_key(), "w1"))

    more, rest = await taker.take(taker.args(16))
    assert not more
    assert ids(rest) == sorted(set(jobs) - set(ids(claimed)))
    assert await redis.exists(taker.wake_key) == 0  # nothing ready: no worker wakes for nothing


async def test_racing_workers_never_claim_a_job_twice(redis: Redis) -> None:
    jobs = await enqueue(redis, 300)
    takers = [await worker(redis, f"w{i}") for i in range(4)]
    got: dict[str, list[str]] = {t.worker_id: [] for t in takers}

    async def claim_all(taker: Taker) -> None:
        while True:
            more, claimed = await taker.take(taker.args(7))
            got[taker.worker_id] += [c.job_id for c in claimed]
            if not claimed and not more:
                return

    await asyncio.gather(*(claim_all(t) for t in takers for _ in range(3)))

    every = [job for claimed in got.values() for job in claimed]
    assert sorted(every) == sorted(jobs)  # each job once, none lost
    assert await ready(redis, takers[0]) == []


async def test_timers_wait_apart_until_due_then_the_claim_takes_them(redis: Redis) -> None:
    (later,) = await enqueue(redis, 1, run="later", defer_s=60)
    (now,) = await enqueue(redis, 1, run="now")
    taker = await worker(redis, "w1")
    timers = taker.keys[5]
    score = await redis.zscore(timers, later)

    _, claimed = await taker.take(taker.args(16))

    assert ids(claimed) == [now]
    assert await redis.zscore(taker.keys[0], later) is None  # not in the queue
    assert await redis.zscore(timers, later) == score
    assert not await redis.exists(ARQ_IN_PROGRESS_PREFIX + later)

    await redis.zadd(timers, {later: 1000})  # it falls due
    _, claimed = await taker.take(taker.args(16))
    assert ids(claimed) == [later]
    assert await redis.zcard(timers) == 0


async def test_a_busy_workers_claims_look_at_the_timers_once_per_period_of_its_clock(
    redis: Redis,
) -> None:
    """A claim that finds ready work reads no timer set unless the worker's clock says a
    look is due (claims.TIMER_LOOK_S): a timer fallen due meanwhile waits for that look."""
    (later,) = await enqueue(redis, 1, run="later", defer_s=60)
    ready_jobs = await enqueue(redis, 3, run="now")
    await redis.set(liveness_key("w1"), "w1", px=60_000)
    clock = [100.0]
    taker = Taker(redis, "w1", QUEUE, 0, BACKSTOP_MS, timer_look_s=0.05, clock=lambda: clock[0])

    _, first = await taker.take(taker.args(1))  # looks: the timer is not due
    await redis.zadd(taker.keys[5], {later: 1000})  # it falls due
    _, second = await taker.take(taker.args(1))  # the same instant: no look
    clock[0] += 0.05
    _, third = await taker.take(taker.args(16))  # a look is due

    assert [c.job_id for c in first + second] == ready_jobs[:2]
    assert ids(third) == sorted([later, ready_jobs[2]])
    assert await redis.zcard(taker.keys[5]) == 0


async def test_a_dead_workers_claimed_jobs_are_re_delivered_at_their_old_score(
    redis: Redis,
) -> None:
    jobs = await enqueue(redis, 3)
    scores = {job: await redis.zscore(f"aq:queue:{QUEUE}", job) for job in jobs}
    dead = await worker(redis, "dead")
    _, claimed = await dead.take(dead.args(16))
    assert ids(claimed) == sorted(jobs)
    await redis.delete(liveness_key("dead"), dead.wake_key)  # its lease lapsed

    reaped = await reap_lapsed(redis, Cadence(every_s=1.0, gap_ms=60_000, steady_ms=0, look_ms=0))

    assert reaped == 3
    assert await ready(redis, dead) == sorted(jobs)
    for job in jobs:
        assert await redis.zscore(dead.keys[0], job) == scores[job]
        assert not await redis.exists(ARQ_IN_PROGRESS_PREFIX + job)
    assert await cast(Any, redis.llen(dead.wake_key)) > 0  # live workers are woken for them
    alive = await worker(redis, "alive")
    _, again = await alive.take(alive.args(16))
    assert ids(again) == sorted(jobs)
    assert {c.deliveries for c in again} == {2}  # a death counts


async def test_a_reaper_waits_a_lease_only_after_a_look_that_found_no_job_held(
    redis: Redis,
) -> None:
    """A pass says whether any lease held a job (a jobs hash with more than its mark);
    only after one that found none does the next wait `idle_every_s` (a lease), and a job
    claimed after that look is seen, and its dead worker's jobs reaped, by the next look."""
    cadence = Cadence(every_s=0.25, gap_ms=60_000, steady_ms=0, look_ms=0, idle_every_s=1.0)
    [job] = await enqueue(redis, 1)

    nobody = await reap_pass(redis, cadence)  # no lease listed at all
    assert nobody == Reaping(0, False)
    assert cadence.after(nobody) == 1.0

    taker = await worker(redis, "w1")
    _, claimed = await taker.take(taker.args(1))
    assert ids(claimed) == [job]
    holding = await reap_pass(redis, cadence)
    assert holding == Reaping(0, True)
    assert cadence.after(holding) == 0.25

    await taker.take(taker.args(0, job, "done"))  # its job ended: the mark alone is left
    assert await cast(Any, redis.hlen(jobs_key("w1"))) == 1
    idle = await reap_pass(redis, cadence)
    assert idle == Reaping(0, False)
    assert cadence.after(idle) == 1.0

    # After that idle look, a worker claims and dies: the next look reaps its job, and
    # the pass after it is a quick one again.
    [again] = await enqueue(redis, 1, run="r2")
    dying = await worker(redis, "w2")
    _, claimed = await dying.take(dying.args(1))
    assert ids(claimed) == [again]
    await redis.delete(liveness_key("w2"))
    reaped = await reap_pass(redis, cadence)
    assert reaped == Reaping(1, True)
    assert cadence.after(reaped) == 0.25
    assert await ready(redis, dying) == [again]


async def test_a_reaper_pass_the_gate_kept_from_looking_or_that_failed_is_followed_by_a_quick_one(
    redis: Redis,
) -> None:
    cadence = Cadence(every_s=0.25, gap_ms=60_000, steady_ms=0, look_ms=60_000, idle_every_s=1.0)
    await redis.script_flush()  # Redis lost its scripts (a restart): the pass loads them
    assert await reap_pass(redis, cadence) == Reaping(0, False)  # looks
    kept = await reap_pass(redis, cadence)  # another look within look_ms: the gate says no
    assert kept == Reaping(0, None)
    assert cadence.after(kept) == 0.25
    assert cadence.after(None) == 0.25


async def test_a_worker_is_listed_once_and_again_after_a_reaper_took_its_jobs(
    redis: Redis,
) -> None:
    """A claim lists its worker among the holders only when its jobs hash lacks the mark
    the listing leaves (no SADD per claim); a reaper that took a lapsed worker's jobs
    unlisted it with the mark, so the worker's next claim (its lease taken again) lists it
    again, and a reaper finds the jobs it holds when it dies."""
    jobs = await enqueue(redis, 3)
    taker = await worker(redis, "w1")
    reap = Cadence(every_s=1.0, gap_ms=60_000, steady_ms=0, look_ms=0)

    await redis.config_resetstat()
    await taker.take(taker.args(1))
    await taker.take(taker.args(1))
    assert await sadds_run(redis) == 1  # the first claim lists it; the second knows it is
    assert await cast(Any, redis.sismember(holders_key(), "w1"))

    await redis.delete(liveness_key("w1"))  # its lease lapsed: a reaper takes its jobs
    assert await reap_lapsed(redis, reap) == 2
    assert not await cast(Any, redis.sismember(holders_key(), "w1"))
    await redis.set(liveness_key("w1"), "w1", px=60_000)  # the lease taken again
    _, claimed = await taker.take(taker.args(16))
    assert len(claimed) == 3
    assert await cast(Any, redis.sismember(holders_key(), "w1"))

    await redis.delete(liveness_key("w1"))  # and it dies holding them
    assert await reap_lapsed(redis, reap) == 3
    assert await ready(redis, taker) == sorted(jobs)


async def commands_run(redis: Redis) -> set[str]:
    """The commands Redis ran since its stats were reset (a script's inner ones too)."""
    stats = await redis.info("commandstats")
    return {name.removeprefix("cmdstat_") for name in stats}


async def sadds_run(redis: Redis) -> int:
    """How many SADDs Redis ran since its stats were reset (a script's inner ones too)."""
    stats = await redis.info("commandstats")
    return int(stats.get("cmdstat_sadd", {}).get("calls", 0))


async def test_a_release_hands_the_job_back_at_once_and_is_not_counted(redis: Redis) -> None:
    (job,) = await enqueue(redis, 1)
    score = await redis.zscore(f"aq:queue:{QUEUE}", job)
    first, second = await worker(redis, "w1"), await worker(redis, "w2")
    _, (claimed,) = await first.take(first.args(1))

    # One call ends the job (a release; a draining worker claims nothing more).
    _, mine = await first.take(first.args(0, claimed.job_id, "release", 0))

    assert mine == []
    assert await redis.zscore(first.keys[0], job) == score
    assert await cast(Any, redis.llen(first.wake_key)) > 0  # other workers are woken for it
    assert not await cast(Any, redis.hexists(jobs_key("w1"), job))
    _, (again,) = await second.take(second.args(4))
    assert again.job_id == job
    assert again.deliveries == 1


async def test_a_deferred_release_is_due_later(redis: Redis) -> None:
    (job,) = await enqueue(redis, 1)
    taker = await worker(redis, "w1")
    await taker.take(taker.args(1))

    await taker.take(taker.args(0, job, "release", 60_000))

    # A timer until then: out of the queue and of its lane, and no claim takes it.
    assert await ready(redis, taker) == []
    assert await redis.zscore(taker.keys[0], job) is None
    assert (await redis.zscore(taker.keys[5], job) or 0) > time.time() * 1000 + 30_000
    assert await taker.take(taker.args(1)) == (False, [])


async def test_done_cleans_up_the_job(redis: Redis) -> None:
    (job,) = await enqueue(redis, 1)
    taker = await worker(redis, "w1")
    await taker.take(taker.args(1))

    await taker.take(taker.args(0, job, "done"))

    for key in (ARQ_JOB_PREFIX, ARQ_IN_PROGRESS_PREFIX, ARQ_RETRY_PREFIX):
        assert not await redis.exists(key + job)
    assert await redis.zscore(taker.keys[0], job) is None
    assert not await cast(Any, redis.hexists(jobs_key("w1"), job))


async def test_a_job_cancelled_before_it_started_is_dropped_not_claimed(redis: Redis) -> None:
    (cancelled, kept) = await enqueue(redis, 2)
    await redis.zadd(ARQ_ABORT_SET, {cancelled: time.time() * 1000})
    taker = await worker(redis, "w1")

    _, claimed = await taker.take(taker.args(16))

    assert ids(claimed) == [kept]
    assert await redis.zscore(taker.keys[0], cancelled) is None
    assert not await redis.exists(ARQ_JOB_PREFIX + cancelled)
    assert await redis.zscore(ARQ_ABORT_SET, cancelled) is None


async def test_a_worker_whose_lease_lapsed_claims_nothing(redis: Redis) -> None:
    jobs = await enqueue(redis, 2)
    taker = await worker(redis, "w1")
    await redis.delete(liveness_key("w1"))
    taker.leased = lambda: False  # what the worker's renewer says once its lease lapsed

    _, claimed = await taker.take(taker.args(16))

    assert claimed == []
    assert await ready(redis, taker) == sorted(jobs)


async def test_a_claim_behind_a_wake_up_token_sees_jobs_enqueued_while_it_waited(
    redis: Redis,
) -> None:
    taker = await worker(redis, "w1")
    await redis.delete(taker.wake_key)

    async def enqueue_later() -> list[str]:
        await asyncio.sleep(0.2)
        return await enqueue(redis, 2)

    later = asyncio.create_task(enqueue_later())
    _more, claimed = await taker.wait_and_take(5, taker.args(16))
    jobs = await later

    assert set(ids(claimed)) <= set(jobs)
    assert claimed


async def test_a_claim_behind_its_jobs_token_keeps_the_tokens_and_one_left_over_wakes_once(
    redis: Redis,
) -> None:
    """A claim that pops a token and takes the one job of the queue's only lane leaves the
    rest of the list be (the lane stays listed); a token left over (two for one job
    here) wakes one claim, which finds the lane empty and drops it with the tokens."""
    taker = await worker(redis, "w1")
    (job,) = await enqueue(redis, 1)
    await cast(Any, redis.lpush(taker.wake_key, "1"))  # a token for work taken already

    _, claimed = await taker.wait_and_take(1, taker.args(1))

    assert ids(claimed) == [job]
    assert await cast(Any, redis.llen(taker.wake_key)) == 1
    _, none = await taker.wait_and_take(1, taker.args(1))
    assert none == []
    assert taker.backstop_wakes == 0
    assert await redis.exists(taker.wake_key) == 0  # nothing ready: no one wakes again
    assert await redis.keys("aq:fair:*") == []


async def test_a_full_redis_refuses_a_jobs_end_before_it_ends_anything(
    redis: Redis, redis_url: str
) -> None:
    """The end of a job rides behind its last transition: when a full Redis refused the
    transition, the end must not happen either (the job stays held, to be released)."""
    (job,) = await enqueue(redis, 1)
    taker = await worker(redis, "w1")
    await taker.take(taker.args(1))
    await redis.config_set("maxmemory", 1)  # full: no write that may grow it is taken
    try:
        with pytest.raises(ResponseError, match=r"OOM|maxmemory"):
            await taker.take(taker.args(1, job, "done", riding=True))
        await taker.take(taker.args(0, job, "release"))  # a release frees memory, as before
    finally:
        await redis.config_set("maxmemory", 0)
    assert await redis.exists(ARQ_JOB_PREFIX + job)
    _, (again,) = await taker.take(taker.args(1))
    assert again.job_id == job
    assert again.deliveries == 1  # released, not counted


# A transition's stand-in: an early return, a late one, a write a full Redis refuses, and
# one that raises (INCR of a non-number), each by its ARGV[1].
_TRANSITION = """
if ARGV[1] == 'early' then return 'early' end
if ARGV[1] == 'raise' then redis.call('INCR', KEYS[1]) end
redis.call('SET', KEYS[1], ARGV[1])
return 'late'
"""


async def test_a_jobs_end_inside_its_transition_ends_it_as_take_does_once_it_returned(
    redis: Redis,
) -> None:
    """A job's end that claims nothing goes inside its last transition's script
    (claims.ending): the transition's reply is the call's, on each of its returns, and
    the job ends done as TAKE's end would; a transition that raises ends nothing, nor
    one a full Redis refuses (the job stays held, to be ended by the worker)."""
    source = claims_module.ending(_TRANSITION)
    assert source is not None
    assert claims_module.ending("#!lua flags=no-writes\nreturn 1") is None  # its flags
    script = redis.register_script(source)
    taker = await worker(redis, "w1")
    jobs = await enqueue(redis, 5)
    _, claimed = await taker.take(taker.args(5))
    assert ids(claimed) == sorted(jobs)
    key = "transition-test"

    async def call(how: str, job: str) -> Any:
        end_keys, end_args = taker.end_in(job)
        return await script(keys=[key, *end_keys], args=[how, *end_args])

    async def ended(job: str) -> list[Any]:
        return [
            await redis.exists(ARQ_JOB_PREFIX + job, ARQ_IN_PROGRESS_PREFIX + job),
            await cast(Any, redis.hexists(jobs_key("w1"), job)),
            await redis.zscore(taker.queue_key, job),
        ]

    assert await call("early", jobs[0]) == b"early"
    assert await call("late", jobs[1]) == b"late"
    with pytest.raises(ResponseError):
        await call("raise", jobs[2])
    await redis.config_set("maxmemory", 1)  # full: no write that may grow it is taken
    try:
        with pytest.raises(ResponseError, match=r"OOM|maxmemory"):
            await call("late", jobs[3])
    finally:
        await redis.config_set("maxmemory", 0)
    for job in jobs[:2]:
        assert await ended(job) == [0, False, None], job
    for job in jobs[2:]:  # still held: the worker ends them
        assert await ended(job) == [2, True, float("inf")], job
    # An end whose lease a reaper took since (its record gone): arq's keys go, not the
    # in-progress key of the job's new holder.
    await cast(Any, redis.hdel(jobs_key("w1"), jobs[4]))
    await redis.set(ARQ_IN_PROGRESS_PREFIX + jobs[4], "w2")
    assert await call("late", jobs[4]) == b"late"
    assert await redis.get(ARQ_IN_PROGRESS_PREFIX + jobs[4]) == b"w2"
    assert not await redis.exists(ARQ_JOB_PREFIX + jobs[4])


async def test_a_finished_run_leaves_no_job_bookkeeping_behind(
    redis: Redis, redis_url: str
) -> None:
    """Every job of a run ends in its last transition's round trip (or on its own):
    nothing of arq's stays, nothing stays held, and nothing waits in a queue."""
    runtime = WorkerRuntime(redis_url, executors=[FunctionExecutor([add])])
    await runtime.start()
    try:
        calls = [{"name": "add", "input": {"a": i, "b": 1}} for i in range(3)]
        spec = scripted({"tool_calls": calls}, {"text": "done"}, tools=["add"])
        async with Client(redis_url) as client:
            result = await client.runs.wait(await client.runs.submit(spec), timeout_s=60)
        assert result.status == "succeeded", result.error
        for pattern in ("arq:job:*", "arq:in-progress:*", "arq:retry:*"):
            assert await redis.keys(pattern) == [], pattern
        for queue in (MODEL_QUEUE, TOOLS_QUEUE):
            assert await redis.zcard(queue_key(queue)) == 0
        assert held_jobs(await cast(Any, redis.hgetall(jobs_key(runtime.worker_id)))) == {}
    finally:
        await runtime.stop()


async def test_jobs_end_in_their_transitions_round_trip_again_after_redis_lost_its_scripts(
    redis: Redis, redis_url: str
) -> None:
    """A job's end rides behind its last transition as its own script (TAKE_RIDING) or
    inside the transition's (claims.ending): when Redis lost its scripts (a restart), an
    end that found its script missing ends alone, and that script is loaded again, so
    later ends ride again and every run still finishes clean."""
    run_scripts = load_scripts()
    riders = [scripts.sha(TAKE_RIDING)] + [
        scripts.sha(cast(str, claims_module.ending(run_scripts[name])))
        for name in ("commit_step", "record_result")
    ]
    runtime = WorkerRuntime(redis_url, executors=[FunctionExecutor([add])])
    await runtime.start()
    try:
        spec = scripted(calls(("add", {"a": 1, "b": 1})), {"text": "done"}, tools=["add"])
        async with Client(redis_url) as client:
            for _ in range(2):
                await redis.script_flush()
                result = await client.runs.wait(await client.runs.submit(spec), timeout_s=60)
                assert result.status == "succeeded", result.error
                assert True in await redis.script_exists(*riders)
        for pattern in ("arq:job:*", "arq:in-progress:*", "arq:retry:*"):
            assert await redis.keys(pattern) == [], pattern
        assert held_jobs(await cast(Any, redis.hgetall(jobs_key(runtime.worker_id)))) == {}
    finally:
        await runtime.stop()


async def test_jobs_of_a_claim_whose_reply_was_lost_are_given_back_uncounted(
    redis: Redis,
) -> None:
    """A claim that timed out at the worker while Redis was stalled still runs when Redis
    resumes: its jobs are held by a live worker that never started them. Give-back frees
    those of settled claims, and leaves jobs the worker runs and claims still open."""
    jobs = await enqueue(redis, 3)
    scores = {job: await redis.zscore(f"aq:queue:{QUEUE}", job) for job in jobs}
    taker = await worker(redis, "w1")
    ledger = ClaimLedger()
    first, second, third = ledger.open(), ledger.open(), ledger.open()
    for claim in (first, second):  # two claims answered (or lost), one job each
        await taker.take(taker.args(1, claim=claim))
        ledger.settle(claim)
    _, (late,) = await taker.take(taker.args(1, claim=third))  # its reply is still coming
    open_ = late.job_id
    held = held_jobs(await cast(Any, redis.hgetall(jobs_key("w1"))))
    by_claim = {json.loads(v)["c"]: k for k, v in held.items()}
    lost = by_claim[first]  # the job of the first claim was never started here
    running = by_claim[second]
    assert ledger.settled_through() == second

    # The same process's loop on another queue holds its jobs in the same hash.
    sibling = Taker(redis, "w1", "claims-test-other", 0, BACKSTOP_MS)
    await redis.zadd(sibling.keys[5], {"other-job": 1})  # a timer fallen due
    await redis.set(ARQ_JOB_PREFIX + "other-job", b"{}")
    _, (theirs,) = await sibling.take(sibling.args(1))

    given = await taker.give_back(ledger.settled_through(), [running])

    assert given == 1
    assert await redis.get(ARQ_IN_PROGRESS_PREFIX + theirs.job_id) == b"w1"
    assert await ready(redis, taker) == [lost]
    assert await redis.zscore(taker.keys[0], lost) == scores[lost]
    assert not await redis.exists(ARQ_IN_PROGRESS_PREFIX + lost)
    assert set(held_jobs(await cast(Any, redis.hgetall(jobs_key("w1"))))) == {
        running,
        open_,
        "other-job",
    }
    other = await worker(redis, "w2")
    _, (again,) = await other.take(other.args(1))
    assert again.job_id == lost
    assert again.deliveries == 1  # the lost claim's delivery was taken back


async def test_a_worker_gives_back_and_runs_a_job_a_lost_claim_left_held(
    redis: Redis, redis_url: str
) -> None:
    """End to end: a run's first job is claimed in a live worker's name by a claim the
    worker never saw (as when the reply of its claim was lost). The worker gives it
    back at its next chores pass, and the run finishes."""
    runtime = WorkerRuntime(redis_url, executors=[FunctionExecutor([add])])
    async with Client(redis_url) as client:
        run_id = await client.runs.submit(scripted({"text": "done"}))
        # Its lease held, as a live worker's is: no reaper frees what it holds.
        await redis.set(liveness_key(runtime.worker_id), runtime.worker_id, px=60_000)
        claimed = []
        for p in state_keys.partitions():
            orphan = Taker(redis, runtime.worker_id, MODEL_QUEUE, p, BACKSTOP_MS)
            claimed += (await orphan.take(orphan.args(16)))[1]
        assert claimed  # held in the worker's name; the worker will know nothing of it
        await runtime.start()
        try:
            result = await client.runs.wait(run_id, timeout_s=60)
        finally:
            await runtime.stop()
    assert result.status == "succeeded", result.error


# -- wake-up tokens and jobs left for other tool sets ----------------------------------------


async def blocked_clients(redis: Redis) -> int:
    return int((await redis.info("clients"))["blocked_clients"])


async def test_a_token_popped_for_another_tool_sets_job_reaches_a_worker_that_serves_it(
    redis: Redis,
) -> None:
    a = await worker(redis, "A", ["a"])
    b = await worker(redis, "B", ["b"])
    # A falls asleep first, so Redis hands the next token to A.
    before = await blocked_clients(redis)
    a_waits = asyncio.create_task(a.wait_and_take(10, a.args(1)))
    await eventually_async(lambda: blocked_clients(redis), "A asleep", until=before.__lt__)
    b_waits = asyncio.create_task(b.wait_and_take(10, b.args(1)))
    await eventually_async(
        lambda: blocked_clients(redis), "B asleep", until=lambda n: n == before + 2
    )

    (job,) = await enqueue(redis, 1, needs="b")  # one token

    _, by_a = await a_waits
    assert by_a == []  # A popped the token and left the job...
    _, (by_b,) = await b_waits
    assert by_b.job_id == job  # ... and B took it, woken by a token, not by its timeout
    assert (a.backstop_wakes, b.backstop_wakes) == (0, 0)


async def test_a_worker_alone_awake_passes_a_token_on_once_per_job_it_leaves(
    redis: Redis,
) -> None:
    a = await worker(redis, "A", ["a"])
    await enqueue(redis, 1, needs="b")  # for a worker that is busy elsewhere

    assert await a.wait_and_take(10, a.args(1)) == (False, [])
    assert await cast(Any, redis.llen(a.wake_key)) == 1  # passed on, to nobody but A...
    assert await a.wait_and_take(10, a.args(1)) == (False, [])
    assert await cast(Any, redis.llen(a.wake_key)) == 0  # ... which does not spin on it
    await enqueue(redis, 1, run="r2", needs="b")
    assert await a.wait_and_take(10, a.args(1)) == (False, [])
    assert await cast(Any, redis.llen(a.wake_key)) == 1  # a new job left: passed on again
    assert a.backstop_wakes == 0


async def test_a_reaper_takes_its_own_lease_for_alive_and_looks_at_the_others(
    redis: Redis,
) -> None:
    """The reaping worker's own jobs need no look while it holds its lease (`me`): listed
    alone, it sees no job held (a pass of one round trip, and a lease before the next);
    another worker's jobs are still seen, and reaped when that worker dies."""
    cadence = Cadence(every_s=0.25, gap_ms=60_000, steady_ms=0, look_ms=0, idle_every_s=1.0)
    mine, theirs = await enqueue(redis, 1), await enqueue(redis, 1, run="r2")
    me = await worker(redis, "me")
    _, claimed = await me.take(me.args(1))
    assert ids(claimed) == mine

    await redis.config_resetstat()
    alone = await reap_pass(redis, cadence, me="me")
    assert alone == Reaping(0, False)
    assert cadence.after(alone) == 1.0
    calls = await commands_run(redis)
    assert not {"exists", "hlen"} & calls, calls  # no second round trip
    assert await reap_pass(redis, cadence) == Reaping(0, True)  # any other reaper sees it

    other = await worker(redis, "other")
    _, claimed = await other.take(other.args(1))
    assert ids(claimed) == theirs
    assert await reap_pass(redis, cadence, me="me") == Reaping(0, True)
    await redis.delete(liveness_key("other"))  # it died
    assert await reap_pass(redis, cadence, me="me") == Reaping(1, True)
    assert await ready(redis, other) == theirs
    assert await redis.exists(ARQ_IN_PROGRESS_PREFIX + mine[0])  # its own job stays held
