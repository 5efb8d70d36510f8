"""The claim as the scheduler (workers/queue/lua/take.lua, core/fairness.py) on a real
redis-server: round-robin across lanes with ready work, weighted, then by priority and
age within a lane, aging bounding how long `low` waits behind `high`; runs created by
the real `create` transition (their lanes in their meta, their first job enqueued into
its lane), claimed by a worker's Taker."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from agentq.orchestrator.core import fairness, keys
from agentq.orchestrator.core.envelopes import ARQ_JOB_PREFIX, MODEL_QUEUE, JobEnvelope
from agentq.orchestrator.core.fairness import Fairness, Lane, Priority, lane_of
from agentq.orchestrator.core.jobs import queued_job
from agentq.orchestrator.runs.store import RunStore
from agentq.orchestrator.runs.transitions import create_args
from agentq.orchestrator.spec.run import RunSpec
from agentq.workers.queue.claims import Taker, publish_tool_set
from agentq.workers.queue.liveness import liveness_key
from tests.support.specs import scripted

pytestmark = pytest.mark.integration

AGING_S = 10.0
QUEUE = "fairness-test"
T0_MS = 1_700_000_000_000


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[Redis]:
    client = Redis.from_url(redis_url)
    yield client
    await client.aclose()


async def create(
    redis: Redis,
    run_id: str,
    tenant: str,
    *,
    fairness: Fairness | None = None,
    priority: Priority | None = None,
    due_ms: int | None = None,
    tenant_weights: dict[str, int] | None = None,
) -> str:
    """A run created as `RunCreation` creates it; its first job due at `due_ms`."""
    spec = RunSpec.model_validate(scripted({"text": "hi"}))
    args = create_args(run_id, spec, [], spec.initial_messages())
    lane = lane_of(tenant, fairness, priority, AGING_S, tenant_weights)
    update: dict[str, object] = {"lane": lane}
    if due_ms is not None:
        update["next_job"] = args.next_job.model_copy(update={"score_ms": due_ms})
    await RunStore(redis).create(args.model_copy(update=update))
    return keys.model_job_id(run_id, 0)


async def taker(redis: Redis, name: str = "w1") -> Taker:
    await redis.set(liveness_key(name), name, px=60_000)
    return Taker(redis, name, MODEL_QUEUE, 0, 60_000)


async def claim_one_by_one(t: Taker, count: int) -> list[str]:
    order = []
    for _ in range(count):
        _, claimed = await t.take(t.args(1))
        order += [c.job_id for c in claimed]
    return order


def run_of(job_id: str) -> str:
    return job_id.split("{", 1)[1].split("}", 1)[0]


async def test_one_run_of_another_tenant_is_taken_next_after_a_flood(redis: Redis) -> None:
    flood = [await create(redis, f"a{i}", "tenant-a", due_ms=T0_MS + i) for i in range(40)]
    late = await create(redis, "b0", "tenant-b", due_ms=T0_MS + 40)
    t = await taker(redis)

    order = await claim_one_by_one(t, 41)

    # Round-robin over the two lanes: B's one run is at most one of A's behind.
    assert order.index(late) <= 1
    assert sorted(order) == sorted([*flood, late])
    assert order[2:] == [j for j in flood if j in order[2:]]  # A's own, oldest first


async def test_tenant_weights_share_the_claims_in_their_ratio(redis: Redis) -> None:
    weights = {"tenant-a": 3}  # the deployment's AGENTQ_TENANT_WEIGHTS
    for i in range(60):
        await create(redis, f"a{i}", "tenant-a", tenant_weights=weights)
        await create(redis, f"b{i}", "tenant-b", tenant_weights=weights)
    t = await taker(redis)

    first = await claim_one_by_one(t, 40)
    _, batch = await t.take(t.args(8))  # several per call take turns the same way

    by_tenant = Counter(run_of(j)[0] for j in [*first, *(c.job_id for c in batch)])
    assert by_tenant == {"a": 36, "b": 12}


async def test_a_tenants_keys_share_its_turns_by_weight_and_never_more_than_its_share(
    redis: Redis,
) -> None:
    """Tenant A's keys (3:1 by weight) take turns within A's turns; A's many keys still
    get one tenant's share beside B's one."""
    for i in range(60):
        await create(redis, f"x{i}", "tenant-a", fairness=Fairness(key="bulk", weight=3))
        await create(redis, f"y{i}", "tenant-a", fairness=Fairness(key="live"))
        await create(redis, f"b{i}", "tenant-b")
    t = await taker(redis)

    first = await claim_one_by_one(t, 40)
    _, batch = await t.take(t.args(8))

    by_key = Counter(run_of(j)[0] for j in [*first, *(c.job_id for c in batch)])
    assert by_key == {"x": 18, "y": 6, "b": 24}


async def test_priority_orders_a_lane_and_aging_bounds_how_long_low_waits(
    redis: Redis,
) -> None:
    step_ms = int(AGING_S * 1000)
    normal = await create(redis, "normal", "t", due_ms=T0_MS)
    high = await create(redis, "high", "t", priority="high", due_ms=T0_MS + 2 * step_ms)
    low = await create(redis, "low", "t", priority="low", due_ms=T0_MS - 1000)
    # `low` is overtaken by `high` (8 - 2 = 6 steps ahead) due up to 6 steps after it...
    high2 = await create(redis, "high2", "t", priority="high", due_ms=T0_MS + 5 * step_ms)
    # ...and by 9 up to 7 steps after it: this one is due later than that.
    later = await create(redis, "later", "t", priority=9, due_ms=T0_MS + 7 * step_ms)
    t = await taker(redis)

    assert await claim_one_by_one(t, 5) == [high, normal, high2, low, later]


async def test_a_drained_lane_leaves_the_ring_and_its_keys_go(redis: Redis) -> None:
    for i in range(3):
        await create(redis, f"a{i}", "tenant-a")
    await create(redis, "b0", "tenant-b", fairness=Fairness(key="k", weight=2))
    t = await taker(redis)
    ring = keys.fair(MODEL_QUEUE) + keys.FAIR_RING_SUFFIX
    assert await redis.lrange(ring, 0, -1) == [  # type: ignore[misc]
        b"0|tenant-a",
        b"0|tenant-b",
    ]
    tenant_b = keys.fair_keys(MODEL_QUEUE, "tenant-b")
    assert await redis.lrange(tenant_b, 0, -1) == [b"0|k"]  # type: ignore[misc]

    assert len(await claim_one_by_one(t, 5)) == 4

    assert await redis.keys(keys.FAIR_PREFIX + "*") == []


async def test_a_lone_tenants_drained_lane_stays_listed_and_still_yields_to_another_tenant(
    redis: Redis,
) -> None:
    """The queue's only lane, drained, is kept listed (its rings stay): the next enqueue
    into it writes no ring. It keeps no more than its turn: a tenant that joins behind it
    takes every other job."""
    t = await taker(redis)
    first = await create(redis, "a0", "tenant-a")
    assert await claim_one_by_one(t, 1) == [first]
    ring = keys.fair(MODEL_QUEUE) + keys.FAIR_RING_SUFFIX
    tenant_a = keys.fair_keys(MODEL_QUEUE, "tenant-a")
    lane_a = keys.fair_lane(MODEL_QUEUE, "tenant-a", "")
    assert await redis.lrange(ring, 0, -1) == [b"0|tenant-a"]  # type: ignore[misc]
    # its marks alone: listed, and the queue's only lane (before every job)
    only_a = fairness.ONLY_PREFIX.encode() + b'["tenant-a",""]'
    assert await redis.zrange(lane_a, 0, -1) == [only_a, b""]

    a_jobs = [await create(redis, f"a{i}", "tenant-a") for i in (1, 2, 3)]
    b_jobs = [await create(redis, f"b{i}", "tenant-b") for i in (1, 2, 3)]
    assert await redis.lrange(ring, 0, -1) == [b"0|tenant-a", b"0|tenant-b"]  # type: ignore[misc]
    assert await redis.lrange(tenant_a, 0, -1) == [b"0|"]  # type: ignore[misc]
    assert await redis.zrank(lane_a, only_a) is None  # no longer the only lane

    order = await claim_one_by_one(t, 7)

    assert [run_of(j)[0] for j in order] == ["a", "b", "a", "b", "a", "b"]
    assert sorted(order) == sorted([*a_jobs, *b_jobs])
    # The last lane drained stays listed; the claim that found it empty dropped it.
    assert await redis.keys(keys.FAIR_PREFIX + "*") == []


async def test_the_only_lane_is_claimed_without_the_rings_until_another_lane_joins(
    redis: Redis,
) -> None:
    """A claim reads the lane its worker's last claim found to be the queue's only one
    first, and no ring while the lane's mark says it still is; a lane joining beside it
    (here a key of the same tenant) takes the mark away, so the claims take turns again."""
    t = await taker(redis)
    await create(redis, "a0", "tenant-a")
    await claim_one_by_one(t, 1)  # learns the only lane
    second = await create(redis, "a1", "tenant-a")
    await redis.config_resetstat()
    assert await claim_one_by_one(t, 1) == [second]
    stats = await redis.info("commandstats")
    assert "cmdstat_lrange" not in stats, stats  # neither ring was read

    for i in (2, 3, 4):
        await create(redis, f"a{i}", "tenant-a")
        await create(redis, f"x{i}", "tenant-a", fairness=Fairness(key="live"))

    order = await claim_one_by_one(t, 6)

    assert [run_of(j)[0] for j in order] == ["a", "x", "a", "x", "a", "x"]


async def test_a_claim_that_finds_the_kept_lane_empty_looks_at_the_timers(
    redis: Redis,
) -> None:
    """A ring that lists only a kept, empty lane has no ready work: the claim drops it
    and moves the timers fallen due into their lanes, as a claim finding the ring empty
    does, though the worker's clock says no look is due."""
    await redis.set(liveness_key("w1"), "w1", px=60_000)
    t = Taker(redis, "w1", MODEL_QUEUE, 0, 60_000, timer_look_s=3600, clock=lambda: 0.0)
    first = await create(redis, "a0", "tenant-a")
    assert await claim_one_by_one(t, 1) == [first]  # the first claim looks; none later
    await redis.hset(keys.meta("r1"), mapping={fairness.TENANT_FIELD: "tenant-a"})  # type: ignore[misc]
    envelope = JobEnvelope(kind="tool_call", run_id="r1", step=0, call_id="c0")
    timer = queued_job(envelope, MODEL_QUEUE)
    await redis.set(ARQ_JOB_PREFIX + timer.job_id, timer.payload)
    await redis.zadd(keys.job_timers(MODEL_QUEUE, timer.job_id), {timer.job_id: T0_MS})

    assert await claim_one_by_one(t, 1) == [timer.job_id]


def test_a_runs_lane_is_its_tenants_key_never_another_tenants() -> None:
    assert lane_of(None, None, None, AGING_S) == Lane(tenant="default", key="")
    assert lane_of("acme", Fairness(key="user-42", weight=2), "high", AGING_S) == Lane(
        tenant="acme", key="user-42", weight=2, rank_ms=30_000
    )
    assert lane_of("acme", None, None, AGING_S, {"acme": 3}, "b1") == Lane(
        tenant="acme", key="batch:b1", tenant_weight=3
    )
    assert lane_of("beta", Fairness(key="mine"), None, AGING_S, {"*": 2}, "b1").key == "mine"
    # A batch's priority weighs its key; a line's own fairness, or a run of no batch, not.
    assert lane_of("acme", None, None, AGING_S, None, "b1", 3).weight == 3
    assert lane_of("acme", Fairness(key="mine"), None, AGING_S, None, "b1", 3).weight == 1
    assert lane_of("acme", None, None, AGING_S, None, None, 3).weight == 1
    assert lane_of("beta", None, None, AGING_S, {"*": 2, "acme": 3}).tenant_weight == 2
    assert lane_of("acme", None, 0, 1.0).rank_ms == -5_000


async def test_a_worker_passes_a_lane_it_cannot_serve_without_turning_the_ring(
    redis: Redis,
) -> None:
    """Lane A's jobs need a tool this worker lacks: it takes lane B's, A keeps the head
    and its jobs wait, ready, for a worker that serves them."""
    for run_id, lane in (("ra", "A"), ("rb", "B")):
        await redis.hset(keys.meta(run_id), mapping={fairness.TENANT_FIELD: lane})  # type: ignore[misc]
    needing = [
        queued_job(
            JobEnvelope(kind="tool_call", run_id="ra", step=0, call_id=f"c{i}", needs="x"), QUEUE
        )
        for i in range(3)
    ]
    plain = queued_job(JobEnvelope(kind="tool_call", run_id="rb", step=0, call_id="c0"), QUEUE)
    for job in [*needing, plain]:  # timers fallen due: the claim puts them in their lanes
        await redis.set(ARQ_JOB_PREFIX + job.job_id, job.payload)
        await redis.zadd(keys.job_timers(QUEUE, job.job_id), {job.job_id: job.score_ms})
    await redis.set(liveness_key("w1"), "w1", px=60_000)
    t = Taker(redis, "w1", QUEUE, 0, 60_000)

    _, claimed = await t.take(t.args(4))

    assert [c.job_id for c in claimed] == [plain.job_id]
    ring = keys.fair(QUEUE) + keys.FAIR_RING_SUFFIX
    # B, drained past the head, leaves the ring at once; A keeps the head.
    assert await redis.lrange(ring, 0, -1) == [b"0|A"]  # type: ignore[misc]
    # its three jobs, and the mark of a listed lane after them
    assert await redis.zrange(keys.fair_lane(QUEUE, "A", ""), 3, 3) == [b""]
    assert await redis.zcount(keys.fair_lane(QUEUE, "A", ""), "-inf", "(inf") == 3

    await publish_tool_set(redis, ["x"])
    await redis.set(liveness_key("w2"), "w2", px=60_000)
    serving = Taker(redis, "w2", QUEUE, 0, 60_000, tools=["x"])
    _, rest = await serving.take(serving.args(4))
    assert sorted(c.job_id for c in rest) == sorted(j.job_id for j in needing)
    await serving.take(serving.args(4))  # finds nothing: the drained lanes are gone
    assert await redis.keys(keys.FAIR_PREFIX + "*") == []


async def test_a_prioritised_job_claimed_and_released_is_due_again_when_it_was(
    redis: Redis,
) -> None:
    """The claim reads a job's due time from its lane (the lane's score plus its run's
    rank), not from the queue: a high-priority run's job goes back where it was."""
    job = await create(redis, "p0", "tenant-a", priority="high", due_ms=T0_MS + 7)
    queue = keys.queue(MODEL_QUEUE)
    score = await redis.zscore(queue, job)
    t = await taker(redis)

    _, (claimed,) = await t.take(t.args(1))
    await t.take(t.args(0, job, "release"))

    assert claimed.score == T0_MS + 7
    assert await redis.zscore(queue, job) == score
