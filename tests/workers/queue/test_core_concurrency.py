"""Concurrency keys in the claim (workers/queue/lua/take.lua, machine/lua/conc.lua) on a
real redis-server: runs created by the real `create` transition with a key's slot, taken
by workers' Takers; a key at its max leaves its jobs ready but out of the way, its
slots come back when a job ends or its worker's lease lapses, and two tenants' keys of
one name are two keys."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from agentq.orchestrator.concurrency.load import ConcurrencyKeys, KeyLoad
from agentq.orchestrator.concurrency.slots import KeyLimit, placed_id, slot_of
from agentq.orchestrator.core import keys
from agentq.orchestrator.core.envelopes import MODEL_QUEUE, JobEnvelope
from agentq.orchestrator.core.fairness import lane_of
from agentq.orchestrator.core.jobs import queued_job
from agentq.orchestrator.fleet.queues import queue_stats
from agentq.orchestrator.runs.store import RunStore
from agentq.orchestrator.runs.transitions import create_args
from agentq.orchestrator.spec.run import RunSpec
from agentq.workers.queue.claims import Taker
from agentq.workers.queue.liveness import Cadence, liveness_key, reap_lapsed
from tests.support.specs import scripted

pytestmark = pytest.mark.integration

T0_MS = 1_700_000_000_000


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[Redis]:
    client = Redis.from_url(redis_url)
    yield client
    await client.aclose()


async def create(redis: Redis, name: str, tenant: str, key: str | None, max_running: int) -> str:
    """A run as `RunCreation` creates it (placed by its key), its first job due in order;
    the run's id."""
    run_id = name if key is None else placed_id(name, tenant, key)
    spec = RunSpec.model_validate(scripted({"text": "hi"}))
    args = create_args(run_id, spec, [], spec.initial_messages())
    due = T0_MS + int(name.strip("abcdefghijklmnopqrstuvwxyz-") or 0)
    update: dict[str, object] = {
        "lane": lane_of(tenant, None, None, 10.0),
        "next_job": args.next_job.model_copy(update={"score_ms": due}),
    }
    if key is not None:
        update["slot"] = slot_of(run_id, tenant, key, max_running)
    await RunStore(redis).create(args.model_copy(update=update))
    return run_id


async def taker(redis: Redis, name: str) -> Taker:
    await redis.set(liveness_key(name), name, px=60_000)
    # Every claim looks at the timer set: some jobs below come in as timers fallen due.
    return Taker(redis, name, MODEL_QUEUE, 0, 60_000, timer_look_s=0)


async def take(t: Taker, n: int, ended: str = "") -> list[str]:
    _, claimed = await t.take(t.args(n, ended))
    return [c.job_id for c in claimed]


def job(run_id: str) -> str:
    return keys.model_job_id(run_id, 0)


async def holding(redis: Redis, tenant: str, key: str, some_run: str) -> set[str]:
    counter = slot_of(some_run, tenant, key, 1).counter
    return {r.decode() for r in await redis.hkeys(counter)}  # type: ignore[misc]


async def test_a_key_at_its_max_is_passed_over_and_other_work_is_taken(redis: Redis) -> None:
    keyed = [await create(redis, f"k{i}", "acme", "user-42", 2) for i in range(4)]
    other = await create(redis, "o9", "acme", "user-7", 2)
    free = await create(redis, "f10", "acme", None, 0)
    t = await taker(redis, "w1")

    taken = await take(t, 8)

    assert taken == [job(keyed[0]), job(keyed[1]), job(other), job(free)]
    assert await holding(redis, "acme", "user-42", keyed[0]) == {keyed[0], keyed[1]}
    # The two held jobs are held, not ready: the queue's depth leaves them out.
    stats = (await queue_stats(redis, [MODEL_QUEUE]))[MODEL_QUEUE]
    assert (stats.ready, stats.held, stats.running, stats.depth) == (0, 2, 4, 4)

    # Nothing more while the key is full, however often a worker asks.
    assert await take(t, 8) == []
    # One of its jobs ends: its slot goes to the oldest held run.
    assert await take(t, 8, ended=job(keyed[0])) == [job(keyed[2])]
    assert await holding(redis, "acme", "user-42", keyed[0]) == {keyed[1], keyed[2]}
    assert await take(t, 8, ended=job(keyed[1])) == [job(keyed[3])]
    await take(t, 8, ended=job(keyed[2]))
    await take(t, 8, ended=job(keyed[3]))
    await take(t, 8, ended=job(other))
    assert await holding(redis, "acme", "user-42", keyed[0]) == set()
    assert await redis.keys(keys.CONCURRENCY_PREFIX + "*") == []
    assert await redis.keys(keys.HELD_PREFIX + "*") == []


async def test_jobs_held_by_a_full_key_are_counted_apart_from_ready_work(
    redis: Redis,
) -> None:
    """What KEDA and `agentq_queue_depth` read: ten runs of a key of max 1 and one claim
    with room for all ten take one; the nine others are held, not ready, and the depth
    is the one running, so no pool scales up for work it cannot run."""
    runs = [await create(redis, f"k{i}", "acme", "user-42", 1) for i in range(10)]
    t = await taker(redis, "w1")
    before = (await queue_stats(redis, [MODEL_QUEUE]))[MODEL_QUEUE]
    assert (before.ready, before.held, before.running, before.depth) == (10, 0, 0, 10)

    assert await take(t, 10) == [job(runs[0])]
    stats = (await queue_stats(redis, [MODEL_QUEUE]))[MODEL_QUEUE]
    assert (stats.ready, stats.held, stats.running, stats.depth) == (0, 9, 1, 1)

    # Its job ends: the slot frees, the next run takes it, eight stay held.
    assert await take(t, 10, ended=job(runs[0])) == [job(runs[1])]
    stats = (await queue_stats(redis, [MODEL_QUEUE]))[MODEL_QUEUE]
    assert (stats.ready, stats.held, stats.running, stats.depth) == (0, 8, 1, 1)


async def test_a_run_holding_its_slot_takes_its_parallel_calls_in_the_same_slot(
    redis: Redis,
) -> None:
    first = await create(redis, "a1", "acme", "k", 1)
    second = await create(redis, "a2", "acme", "k", 1)
    t = await taker(redis, "w1")
    assert await take(t, 1) == [job(first)]
    # The first run's step fans out: two calls of its own, in the same lane.
    calls = [
        queued_job(JobEnvelope(kind="tool_call", run_id=first, step=0, call_id=c), MODEL_QUEUE)
        for c in ("c1", "c2")
    ]
    for call in calls:
        await redis.set(keys.ARQ_JOB_PREFIX + call.job_id, call.payload)
        # timers fallen due: the claim puts them in their lane
        await redis.zadd(keys.job_timers(MODEL_QUEUE, call.job_id), {call.job_id: call.score_ms})

    taken = await take(t, 8)

    assert sorted(taken) == sorted(c.job_id for c in calls)  # not the second run's
    counter = slot_of(first, "acme", "k", 1).counter
    assert await redis.hgetall(counter) == {first.encode(): b"3"}  # type: ignore[misc]
    await take(t, 0, ended=job(first))
    await take(t, 0, ended=calls[0].job_id)
    assert await take(t, 8, ended=calls[1].job_id) == [job(second)]


async def test_a_dead_workers_slots_come_back_when_its_lease_lapses(redis: Redis) -> None:
    runs = [await create(redis, f"r{i}", "acme", "k", 2) for i in range(3)]
    dying = await taker(redis, "dying")
    assert await take(dying, 8) == [job(runs[0]), job(runs[1])]
    alive = await taker(redis, "alive")
    assert await take(alive, 8) == []

    await redis.delete(liveness_key("dying"))  # its lease lapsed
    cadence = Cadence(every_s=1.0, gap_ms=60_000, steady_ms=0, look_ms=0)
    assert await reap_lapsed(redis, cadence) == 2

    assert await holding(redis, "acme", "k", runs[0]) == set()
    # Its two jobs are ready again and so is the held one: the key's max still holds.
    taken = await take(alive, 8)
    assert sorted(taken) == sorted([job(runs[0]), job(runs[1])])
    assert await take(alive, 8, ended=taken[0]) == [job(runs[2])]


async def test_a_freed_slot_passes_cancelled_runs_held_jobs_to_a_live_one(
    redis: Redis,
) -> None:
    """Held jobs of runs cancelled meanwhile go back for the claim to drop, but the slot
    is not left beside the live run's held job: it is put back too, and taken."""
    holder = await create(redis, "h0", "acme", "k", 1)
    cancelled = [await create(redis, f"c{i}", "acme", "k", 1) for i in range(1, 11)]
    live = await create(redis, "l20", "acme", "k", 1)
    t = await taker(redis, "w1")
    assert await take(t, 16) == [job(holder)]
    for run_id in cancelled:
        await RunStore(redis).cancel(run_id, "test")

    assert await take(t, 16, ended=job(holder)) == [job(live)]
    # The cancelled runs' jobs were dropped by that claim: nothing of them is left.
    stats = (await queue_stats(redis, [MODEL_QUEUE]))[MODEL_QUEUE]
    assert (stats.ready, stats.running) == (0, 1)
    counter = slot_of(live, "acme", "k", 1).counter
    assert await redis.exists(counter + keys.CONCURRENCY_WAIT_SUFFIX) == 0


async def test_two_tenants_keys_of_one_name_are_two_keys(redis: Redis) -> None:
    a = await create(redis, "a1", "tenant-a", "user-42", 1)
    b = await create(redis, "b2", "tenant-b", "user-42", 1)
    a2 = await create(redis, "a3", "tenant-a", "user-42", 1)
    t = await taker(redis, "w1")

    assert await take(t, 8) == [job(a), job(b)]
    assert await holding(redis, "tenant-a", "user-42", a) == {a}
    assert await take(t, 8, ended=job(a)) == [job(a2)]


def test_a_keyed_runs_partition_is_its_keys() -> None:
    keys.use_partitions(keys.CLUSTER_PARTITIONS)
    try:
        placed = [placed_id(f"run-{i}", "acme", "user-42") for i in range(20)]
        assert len({keys.partition_of(r) for r in placed}) == 1
        counter = slot_of(placed[0], "acme", "user-42", 2).counter
        assert keys.job_partition(counter) == keys.partition_of(placed[0])
        assert keys.job_partition(job(placed[3])) == keys.partition_of(placed[0])
    finally:
        keys.use_partitions(keys.SINGLE_NODE_PARTITIONS)


async def test_a_tenants_active_keys_and_a_runs_place_in_its_key(redis: Redis) -> None:
    """What the dashboard reads (`client.concurrency`): each tenant's own active keys with
    slots in use, max and held jobs; a run holding a slot is running, one without while
    the key is full is waiting; a key whose runs all ended is listed no more."""
    acme = [await create(redis, f"a{i}", "acme", "user-42", 1) for i in range(3)]
    beta = await create(redis, "b9", "beta", "user-42", 2)
    t = await taker(redis, "w1")
    assert await take(t, 8) == [job(acme[0]), job(beta)]

    loads = ConcurrencyKeys(redis)
    assert await loads.active("acme") == [KeyLoad(key="user-42", in_use=1, max=1, held=2)]
    assert await loads.active("beta") == [KeyLoad(key="user-42", in_use=1, max=2, held=0)]
    assert await loads.active("globex") == []
    limit = KeyLimit(key="user-42", max=1)
    holder = await loads.of_run(acme[0], limit, live=True)
    assert (holder.state, holder.in_use, holder.held) == ("running", 1, 2)
    assert (await loads.of_run(acme[1], limit, live=True)).state == "waiting"
    assert (await loads.of_run(acme[1], limit, live=False)).state is None

    running = [job(acme[0]), job(beta)]
    while running:  # each job ends in turn; the held ones take the freed slots
        running += await take(t, 8, ended=running.pop(0))
    assert await loads.active("acme") == []
    assert await loads.active("beta") == []
    assert await redis.keys(keys.CONCURRENCY_PREFIX + "*") == []


async def test_a_held_job_put_back_during_a_walk_stays_listed_when_the_walk_drains_its_lane(
    redis: Redis,
) -> None:
    """A free slot beside a held job (the jobs a release put back were cancelled before
    any claim): the next job admitted under the key puts the held job back into the lane
    the walk is draining, and that lane stays listed for the next claim."""
    first = await create(redis, "a0", "acme", "k", 2)
    second = await create(redis, "b1", "acme", "k", 2)
    held = [await create(redis, f"h{i}", "acme", "k", 2) for i in range(2, 11)]
    t = await taker(redis, "w1")
    assert await take(t, 16) == [job(first), job(second)]
    # The second run's job ends: its slot puts back eight held jobs (the ninth stays
    # held), and their runs are cancelled before any claim.
    assert await take(t, 0, ended=job(second)) == []
    for run_id in held[:8]:
        await RunStore(redis).cancel(run_id, "test")
    # The first run fans out one call, due after every put-back job in the lane.
    call = queued_job(
        JobEnvelope(kind="tool_call", run_id=first, step=0, call_id="c1"), MODEL_QUEUE
    )
    await redis.set(keys.ARQ_JOB_PREFIX + call.job_id, call.payload)
    await redis.zadd(keys.job_timers(MODEL_QUEUE, call.job_id), {call.job_id: T0_MS + 100})

    assert await take(t, 1) == [call.job_id]
    assert await take(t, 1) == [job(held[8])]
