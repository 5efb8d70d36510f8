"""Issue 28's fairness figures, each against FIFO (the claim before lanes, kept here as
`bench/fifo_take.lua`) measured in the same run, on a throwaway redis-server.

    python bench/fairness.py [FLOOD] [KEY_JOBS] [--rounds 3] [--quick]

1. B's wait under A's flood, end to end: one worker process (16 slots) of each claim;
   tenant A submits FLOOD runs (one scripted step each), then tenant B submits one; B's
   submit-to-finish time against the same run on an empty fleet.
2. The same at the claim: how many claims a saturated one-slot worker makes before it
   takes B's job (an empty fleet: 1).
3. Tenant weights 3:1 under saturation: the share of 4,000 claims, two tenants
   backlogged. Then two-level shares (the fair claim only; FIFO has no tenants): a
   tenant with 100 keys against a tenant with 1 (its share: 1:1), and two keys of one
   tenant weighted 3:1 (3:1).
4. The claim's cost per job with 1, 100 and 10,000 keys of one tenant holding KEY_JOBS
   ready jobs in all (claims of 16): Redis's own time in the script (INFO commandstats)
   and the caller's wall time, medians of 3 rounds; then the same jobs over 1, 100 and
   10,000 tenants of one key each (the fair claim only). It must not grow with either.
5. The same claim with concurrency keys (orchestrator/concurrency/): a saturated
   one-slot worker (each claim ends the job before it, so each frees and takes a slot)
   over 5,000 runs spread over 1, 100 and 10,000 keys of max 1, against the same runs
   without a key; Redis's time per job, medians of 3 rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import statistics
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from multiprocessing.synchronize import Event as MpEvent
from pathlib import Path
from typing import Any

from redis.asyncio import Redis

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from core_bench import redis_server  # noqa: E402

from agentq.orchestrator.client import Client  # noqa: E402
from agentq.orchestrator.concurrency import slots  # noqa: E402
from agentq.orchestrator.concurrency.slots import slot_of  # noqa: E402
from agentq.orchestrator.core import fairness, keys  # noqa: E402
from agentq.orchestrator.core.envelopes import MODEL_QUEUE, JobEnvelope  # noqa: E402
from agentq.orchestrator.core.jobs import queued_job  # noqa: E402
from agentq.orchestrator.machine import scripts  # noqa: E402
from agentq.orchestrator.runs.state import lua_constants  # noqa: E402
from agentq.workers.queue import claims  # noqa: E402
from agentq.workers.queue.liveness import liveness_key  # noqa: E402

FIFO_TAKE = scripts.expand((HERE / "fifo_take.lua").read_text())
FAIR_TAKE = claims.TAKE
# The real enqueue (machine/lua/enqueue.lua), alone: a job into its queue and lane.
ENQUEUE = scripts.expand(
    lua_constants.render() + "-- @include enqueue\nreturn enqueue(cjson.decode(ARGV[1]))\n"
)
SPEC = {"model": {"provider": "scripted", "script": [{"text": "done"}]}, "prompt": "go"}


def use(take: str) -> None:
    """Which claim this process's workers run (Taker reads `claims.TAKE` per call)."""
    claims.TAKE = take


# -- 1. end to end ---------------------------------------------------------------------


async def _worker_main(url: str, fifo: bool, ready: MpEvent, stop: MpEvent) -> None:
    from agentq.workers.worker.runtime import WorkerRuntime

    use(FIFO_TAKE if fifo else FAIR_TAKE)
    runtime = WorkerRuntime(url, queues=[MODEL_QUEUE], freeze_startup_heap=True)
    await runtime.start()
    ready.set()
    waiter = asyncio.create_task(runtime.wait())
    stopper = asyncio.create_task(asyncio.to_thread(stop.wait))
    await asyncio.wait([waiter, stopper], return_when=asyncio.FIRST_COMPLETED)
    waiter.cancel()
    await runtime.stop()


def _worker_child(url: str, fifo: bool, ready: MpEvent, stop: MpEvent) -> None:
    asyncio.run(_worker_main(url, fifo, ready, stop))


async def _b_wait_s(client: Client) -> float:
    start = time.perf_counter()
    run_id = await client.runs.submit(SPEC, tenant="tenant-b")
    result = await client.runs.wait(run_id, timeout_s=600)
    assert result.status == "succeeded", result.error
    return time.perf_counter() - start


async def end_to_end(flood: int, fifo: bool) -> tuple[float, float, int]:
    """(B's wait on an empty fleet, B's wait behind A's flood, A's runs still queued then)."""
    ctx = multiprocessing.get_context("spawn")
    with redis_server() as url:
        ready, stop = ctx.Event(), ctx.Event()
        worker = ctx.Process(target=_worker_child, args=(url, fifo, ready, stop))
        worker.start()
        try:
            ready.wait(60)
            async with Client(url) as client:
                empty = statistics.median([await _b_wait_s(client) for _ in range(5)])
                for start in range(0, flood, 200):
                    await asyncio.gather(
                        *(
                            client.runs.submit(SPEC, tenant="tenant-a")
                            for _ in range(min(200, flood - start))
                        )
                    )
                queued = int(await client.redis.zcard(keys.queue(MODEL_QUEUE)))
                behind = await _b_wait_s(client)
        finally:
            stop.set()
            worker.join(60)
    return empty, behind, queued


# -- 2-4. at the claim -------------------------------------------------------------------


# A lane's runs: (tenant, key, key weight, tenant weight, how many).
Runs = tuple[str, str, int, int, int]


def lane(tenant: str, runs: int, key: str = "", weight: int = 1, tenant_weight: int = 1) -> Runs:
    return tenant, key, weight, tenant_weight, runs


async def enqueue_runs(
    redis: Redis, lanes: list[Runs], first: int = 0, conc_keys: int = 0
) -> list[str]:
    """One model job per run (ids r<first>, r<first+1>, ...), through the real enqueue,
    the run's lane as the create transition stores it; with `conc_keys`, run i counts
    under key i mod conc_keys, max 1."""
    script = redis.register_script(ENQUEUE)
    ids: list[str] = []
    order = [(t, k, w, tw) for t, k, w, tw, n in lanes for _ in range(n)]
    for start in range(0, len(order), 500):
        async with redis.pipeline(transaction=False) as pipe:
            for i, (tenant, key, weight, tenant_weight) in enumerate(
                order[start : start + 500], start
            ):
                run_id = f"r{first + i}"
                pipe.hset(
                    keys.meta(run_id),
                    mapping={
                        fairness.TENANT_FIELD: tenant,
                        fairness.KEY_FIELD: key,
                        fairness.WEIGHT_FIELD: weight,
                        fairness.TENANT_WEIGHT_FIELD: tenant_weight,
                        fairness.RANK_FIELD: 0,
                    },
                )
                if conc_keys:
                    slot = slot_of(run_id, "t", f"k{i % conc_keys}", 1)
                    pipe.hset(
                        keys.meta(run_id),
                        mapping={slots.COUNTER_FIELD: slot.counter, slots.MAX_FIELD: 1},
                    )
                job = queued_job(JobEnvelope(kind="model_step", run_id=run_id, step=0))
                await script(keys=[], args=[job.model_dump_json()], client=pipe)
                ids.append(job.job_id)
            await pipe.execute()
    return ids


async def taker(redis: Redis) -> claims.Taker:
    await redis.set(liveness_key("bench"), "bench")
    return claims.Taker(redis, "bench", MODEL_QUEUE, 0, 600_000)


async def with_claim(url: str, take: str, body: Callable[[Redis], Awaitable[Any]]) -> Any:
    use(take)
    redis = Redis.from_url(url)
    try:
        await redis.flushall()
        return await body(redis)
    finally:
        await redis.aclose()


async def claims_before_b(redis: Redis, flood: int) -> int:
    """A saturated one-slot worker: each claim ends the job before it (done)."""
    await enqueue_runs(redis, [lane("tenant-a", flood)])
    (late,) = await enqueue_runs(redis, [lane("tenant-b", 1)], first=flood)
    t = await taker(redis)
    ended, n = "", 0
    while True:
        _, got = await t.take(t.args(1, ended))
        n += 1
        if got[0].job_id == late:
            return n
        ended = got[0].job_id


async def alternate_share(redis: Redis, a: Callable[[int], Runs], b: Runs) -> float:
    """Two lanes' runs arrive alternately (even ids `a(i)`'s, odd `b`'s); the ratio of
    their shares of 4,000 claims of 16."""
    await enqueue_runs(redis, [r for i in range(3000) for r in (a(i), b)])
    t = await taker(redis)
    taken: Counter[str] = Counter()
    for _ in range(4000 // 16):
        _, got = await t.take(t.args(16))
        for job in got:
            run = int(job.job_id.split("{r", 1)[1].split("}", 1)[0])
            taken["b" if run % 2 else "a"] += 1
    return taken["a"] / max(1, taken["b"])


async def weighted_share(redis: Redis) -> float:
    """Tenants weighted 3:1 by the deployment."""
    return await alternate_share(redis, lambda i: lane("a", 1, tenant_weight=3), lane("b", 1))


async def many_keys_share(redis: Redis) -> float:
    """Tenant A's runs over 100 keys of weight 9 (a spec names them) against B's one key."""
    return await alternate_share(
        redis, lambda i: lane("a", 1, key=f"user-{i % 100}", weight=9), lane("b", 1)
    )


async def key_weights_share(redis: Redis) -> float:
    """Two keys of one tenant, weighted 3:1 by their specs."""
    return await alternate_share(
        redis, lambda i: lane("t", 1, key="bulk", weight=3), lane("t", 1, key="live")
    )


async def claim_us_per_job(
    redis: Redis, lanes: int, jobs: int, by_tenant: bool = False
) -> tuple[float, float]:
    """(Redis's own time in the claim per job, the caller's wall time per job), µs; the
    jobs spread over `lanes` keys of one tenant, or tenants of one key."""
    per = max(1, jobs // lanes)
    await enqueue_runs(
        redis,
        [lane(f"t{i}", per) if by_tenant else lane("t", per, key=f"k{i}") for i in range(lanes)],
    )
    t = await taker(redis)
    await redis.config_resetstat()
    claimed, start = 0, time.perf_counter()
    while True:
        _, got = await t.take(t.args(16))
        if not got:
            break
        claimed += len(got)
    wall = time.perf_counter() - start
    stats = await redis.info("commandstats")
    server_us = float(stats["cmdstat_evalsha"]["usec"])
    return server_us / claimed, wall / claimed * 1e6


async def keyed_us_per_job(redis: Redis, conc_keys: int, jobs: int) -> float:
    """Redis's own time per job of a saturated one-slot worker's claims, µs."""
    await enqueue_runs(redis, [lane("t", jobs)], conc_keys=conc_keys)
    t = await taker(redis)
    await redis.config_resetstat()
    ended, claimed = "", 0
    while True:
        _, got = await t.take(t.args(1, ended))
        if not got:
            break
        claimed, ended = claimed + 1, got[0].job_id
    stats = await redis.info("commandstats")
    return float(stats["cmdstat_evalsha"]["usec"]) / claimed


async def at_the_claim(url: str, flood: int, key_jobs: int, rounds: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    costs: dict[str, list[tuple[float, float]]] = {}
    for name, take in (("fair", FAIR_TAKE), ("fifo", FIFO_TAKE)):
        out[f"claims_before_b_{name}"] = await with_claim(
            url, take, lambda r: claims_before_b(r, flood)
        )
        out[f"weighted_a_per_b_{name}"] = await with_claim(url, take, weighted_share)
    out["many_keys_a_per_b_fair"] = await with_claim(url, FAIR_TAKE, many_keys_share)
    out["key_weights_bulk_per_live_fair"] = await with_claim(url, FAIR_TAKE, key_weights_share)
    for _ in range(rounds):  # the two claims alternate, so noise falls on both
        for lanes in (1, 100, 10_000):
            for name, take in (("fair", FAIR_TAKE), ("fifo", FIFO_TAKE)):
                cost = await with_claim(
                    url, take, lambda r, k=lanes: claim_us_per_job(r, k, key_jobs)
                )
                costs.setdefault(f"{lanes}_keys_{name}", []).append(cost)
            cost = await with_claim(
                url, FAIR_TAKE, lambda r, k=lanes: claim_us_per_job(r, k, key_jobs, True)
            )
            costs.setdefault(f"{lanes}_tenants_fair", []).append(cost)
    keyed: dict[int, list[float]] = {}
    for _ in range(rounds):
        for conc_keys in (0, 1, 100, 10_000):
            cost = await with_claim(
                url, FAIR_TAKE, lambda r, k=conc_keys: keyed_us_per_job(r, k, 5000)
            )
            keyed.setdefault(conc_keys, []).append(cost)
    for conc_keys, samples in keyed.items():
        out[f"claim_redis_us_per_job_conc_{conc_keys}_keys"] = statistics.median(samples)
    for key, samples in costs.items():
        out[f"claim_redis_us_per_job_{key}"] = statistics.median(s[0] for s in samples)
        out[f"claim_wall_us_per_job_{key}"] = statistics.median(s[1] for s in samples)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("flood", nargs="?", type=int, default=5000, help="tenant A's runs")
    parser.add_argument("key_jobs", nargs="?", type=int, default=20_000, help="ready jobs (4.)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the claim's cost (4.)")
    parser.add_argument("--quick", action="store_true", help="a flood of 200, 2,000 jobs, 1 round")
    args = parser.parse_args()
    flood, key_jobs, rounds = (
        (200, 2000, 1) if args.quick else (args.flood, args.key_jobs, args.rounds)
    )
    figures: dict[str, Any] = {"flood": flood, "key_jobs": key_jobs, "cpus": os.cpu_count()}
    for name, fifo in (("fair", False), ("fifo", True)):
        empty, behind, queued = asyncio.run(end_to_end(flood, fifo))
        figures[f"b_wait_empty_ms_{name}"] = round(empty * 1000, 1)
        figures[f"b_wait_behind_flood_ms_{name}"] = round(behind * 1000, 1)
        figures[f"a_queued_at_b_submit_{name}"] = queued
    with redis_server() as url:
        figures.update(asyncio.run(at_the_claim(url, flood, key_jobs, rounds)))
    for k, v in figures.items():
        figures[k] = round(v, 2) if isinstance(v, float) else v
    print(json.dumps(figures, indent=2))
    f = figures
    print(
        f"B behind {flood} of A's runs: {f['b_wait_behind_flood_ms_fair']} ms fair, "
        f"{f['b_wait_behind_flood_ms_fifo']} ms FIFO; empty fleet "
        f"{f['b_wait_empty_ms_fair']} / {f['b_wait_empty_ms_fifo']} ms. Claims before B: "
        f"{f['claims_before_b_fair']} fair, {f['claims_before_b_fifo']} FIFO. "
        f"Tenant weights 3:1 -> {f['weighted_a_per_b_fair']}:1 fair, "
        f"{f['weighted_a_per_b_fifo']}:1 FIFO. A tenant of 100 keys per a tenant of 1: "
        f"{f['many_keys_a_per_b_fair']}:1; a tenant's keys weighted 3:1 -> "
        f"{f['key_weights_bulk_per_live_fair']}:1. Claim us/job in Redis at 1/100/10,000 keys: "
        + ", ".join(
            f"{name} "
            + "/".join(str(f[f"claim_redis_us_per_job_{k}_keys_{name}"]) for k in (1, 100, 10_000))
            for name in ("fair", "fifo")
        )
        + "; at 1/100/10,000 tenants, fair "
        + "/".join(str(f[f"claim_redis_us_per_job_{k}_tenants_fair"]) for k in (1, 100, 10_000))
        + ". One-slot claim us/job in Redis without a concurrency key "
        + f"{f['claim_redis_us_per_job_conc_0_keys']}, with 1/100/10,000 keys: "
        + "/".join(str(f[f"claim_redis_us_per_job_conc_{k}_keys"]) for k in (1, 100, 10_000))
    )


if __name__ == "__main__":
    main()
