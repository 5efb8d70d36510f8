"""agentq's core against raw Redis and raw arq, measured in one run on one Redis.

    python bench/core_bench.py [--quick] [--profile]

Starts its own `redis-server --save '' --appendonly no` on a free port and measures:

1. the raw Redis hop: LPUSH in one process, BLPOP in another, ping-pong; one
   hop is half a round trip. The baseline uses redis-py's asyncio client (the
   one agentq uses); the sync client's figure is shown for context;
2. raw arq on one worker process: no-op job throughput (jobs enqueued with
   `ArqRedis.enqueue_job` before the worker starts, timed from the first job's
   start to the last job's end) and, for context, the per-hop latency of a
   chain of jobs each enqueuing the next;
3. agentq's per-step latency: a 20-step run (scripted model, one no-op tool
   call per step, then a final answer) on one `WorkerRuntime` process serving
   the model and tools queues; per step = (start event -> finish event) / 20;
4. agentq's no-op tool-call throughput on that worker: one step fans out N
   no-op calls, timed from that step's finish-step event to the next step's
   start-step event (so the join and the hop to the next step are included).

The machine is shared and noisy, so baselines and agentq alternate: each
agentq run is bracketed by raw hop samples and each fan-out is paired with a
raw arq run, and the ratios are medians of per-pair ratios. Goals: a step
costs at most 30 raw hops; tool-call throughput at least 0.4 of raw arq's.
Issue 31's worker CPU per job (full runs on the agentq worker against as many no-op
jobs on a standing raw arq worker) and full runs' jobs/s against raw arq's are
measured in alternated rounds (5; 3 with --quick; who goes first swaps each round):
each is the median of the rounds' ratios, printed with its range.
Prints PASS/MISS; never asserts on time.

Then issue 17's table (every row, "was" / goal / measured in this run; `hop_budget.py`):
full runs (2 model steps + 2 parallel no-op calls) on 1 and 2 worker processes against
raw arq, round trips and worker CPU per job, step latency at step 100 vs step 10 with
1 KB outputs, bytes stored per tool-output byte, the embedded mode against the same
in-process worker on a real Redis, cancel latency and recovery after SIGKILL (each in a
process and on a Redis of its own: `python bench/hop_budget.py cancel|recovery`), and
an idle worker's CPU, and full runs on a local 3-primary Redis Cluster against one
redis-server (`cluster_bench.py`). `--profile` runs the agentq worker
under cProfile and prints where its CPU time goes.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import io
import json
import multiprocessing as mp
import os
import pstats
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Iterator
from dataclasses import dataclass, field
from multiprocessing.context import SpawnContext, SpawnProcess
from multiprocessing.sharedctypes import Synchronized
from multiprocessing.synchronize import Event as MpEvent
from pathlib import Path
from typing import Any, TypeAlias, cast

# `python bench/core_bench.py` puts bench/ on the path; the packages live one level up.
_REPO = Path(__file__).resolve().parent.parent
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

import cluster_bench  # noqa: E402  (bench/, on the path when run as a script)
import hop_budget  # noqa: E402  (bench/, on the path when run as a script)
import redis  # noqa: E402
import redis.asyncio as aioredis  # noqa: E402
from arq import Worker  # noqa: E402
from arq.connections import ArqRedis, RedisSettings, create_pool  # noqa: E402
from arq.worker import func  # noqa: E402
from verdicts import verdict  # noqa: E402  (bench/)

from agentq import tool  # noqa: E402
from agentq.orchestrator.client import Client  # noqa: E402
from agentq.orchestrator.core.envelopes import MODEL_QUEUE, TOOLS_QUEUE  # noqa: E402
from agentq.orchestrator.core.events import Event  # noqa: E402
from agentq.orchestrator.core.settings import Settings  # noqa: E402
from agentq.orchestrator.runs.result import TERMINAL_STATUSES  # noqa: E402
from agentq.workers.tools.function import FunctionExecutor  # noqa: E402
from agentq.workers.worker.runtime import WorkerRuntime  # noqa: E402

STEP_GOAL_HOPS = 30.0
THROUGHPUT_GOAL = 0.4
ARQ_POLL_DELAY_S = 0.01
RUN_STEPS = 20
WAIT_POLL_S = 0.02
PING, PONG, DONE = "bench:ping", "bench:pong", "bench:done"
ARQ_READY = "bench:arq-ready"  # a fleet's arq workers, each once it polls
CHAIN = "chain-"  # a chain job's id begins so: a worker's batches of no-op jobs skip them
# A shared int: the Redis round trips a worker process has sent.
Counter: TypeAlias = "Synchronized[int]"


@tool
async def noop() -> str:
    """Do nothing (the benchmark's tool)."""
    return "ok"


@dataclass(frozen=True)
class Sizes:
    hop_round_trips: int  # per sample; a step run is bracketed by two samples
    full_runs: int  # full runs (2 model steps + 2 calls) submitted at once
    step_runs: int
    calls: int  # fan-out width, and the number of raw arq jobs it is compared with
    throughput_pairs: int
    arq_chain: int
    embedded_runs: int
    # Rounds of full runs on the agentq worker and as many raw arq no-op jobs on a
    # standing arq worker, alternated round by round: worker CPU per job against raw arq's
    # is the median of the rounds' ratios, so one noisy sample cannot decide it.
    cpu_rounds: int
    # How long the idle worker's CPU is read (clock ticks: 0.1% resolution at 10 s), a
    # second after its last job; the only agentq worker on its Redis, it holds the upkeep turn.
    idle_s: float
    # Two worker processes, recovery after SIGKILL, the upkeep of 1,000 calls in flight and
    # the cluster row each start worker processes (and Redis servers) of their own: ~45 s.
    slow_rows: bool
    quick: bool  # a smoke run: timed figures are noise and get no verdict


FULL = Sizes(
    hop_round_trips=300,
    full_runs=250,
    step_runs=7,
    calls=1000,
    throughput_pairs=4,
    arq_chain=60,
    embedded_runs=7,
    cpu_rounds=5,
    idle_s=10.0,
    slow_rows=True,
    quick=False,
)
QUICK = Sizes(
    hop_round_trips=100,
    full_runs=50,
    step_runs=2,
    calls=200,
    throughput_pairs=1,
    arq_chain=15,
    embedded_runs=1,
    cpu_rounds=3,
    idle_s=1.0,
    slow_rows=False,
    quick=True,
)


# -- the Redis server -----------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextlib.contextmanager
def redis_server() -> Iterator[str]:
    """A throwaway redis-server (no persistence) on a free port; yields its URL."""
    exe = shutil.which("redis-server") or "/usr/bin/redis-server"
    port = _free_port()
    workdir = tempfile.mkdtemp(prefix="agentq-bench-")
    proc = subprocess.Popen(
        [exe, "--port", str(port), "--save", "", "--appendonly", "no", "--dir", workdir],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    try:
        client = redis.Redis.from_url(url)
        deadline = time.monotonic() + 10.0
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("redis-server did not start") from None
                time.sleep(0.02)
        client.close()
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(workdir, ignore_errors=True)


def count_round_trips(counter: Counter) -> None:
    """Count this process's Redis round trips (one per command or pipeline sent)."""
    from redis.asyncio.connection import AbstractConnection

    from agentq.orchestrator.redis.lean import LeanConnection

    # agentq's connections send with their own method (orchestrator/redis/lean.py).
    for cls in (AbstractConnection, LeanConnection):
        original = cls.send_packed_command

        async def counted(
            self: AbstractConnection,
            command: Any,
            check_health: bool = True,
            original: Any = original,
        ) -> None:
            counter.value += 1
            await original(self, command, check_health)

        setattr(cls, "send_packed_command", counted)  # noqa: B010


def _stop(proc: SpawnProcess, stop: MpEvent) -> None:
    stop.set()
    proc.join(timeout=15)
    if proc.is_alive():
        proc.terminate()
        proc.join(timeout=5)


async def lpush(client: aioredis.Redis, key: str, value: str) -> None:
    await cast(Awaitable[int], client.lpush(key, value))


async def blpop(client: aioredis.Redis, key: str, timeout_s: int) -> bytes | None:
    """BLPOP one key: the popped value, or None on timeout."""
    reply = await cast(Awaitable[list[bytes] | None], client.blpop([key], timeout_s))
    return reply[1] if reply else None


# -- 1. the raw hop -----------------------------------------------------------------------


def _echo_sync(url: str, n: int) -> None:
    client = redis.Redis.from_url(url)
    for _ in range(n):
        client.blpop([PING], 0)
        client.lpush(PONG, "1")
    client.close()


async def _echo_async(url: str) -> None:
    client = aioredis.Redis.from_url(url, socket_timeout=None)
    while True:
        popped = await blpop(client, PING, 0)
        if popped is None or popped == b"stop":
            break
        await lpush(client, PONG, "1")
    await client.aclose()


def _echo_child(url: str, n: int, use_async: bool) -> None:
    if use_async:
        asyncio.run(_echo_async(url))
    else:
        _echo_sync(url, n)


def sync_hop_us(ctx: SpawnContext, url: str, n: int) -> float:
    """Median one-way hop with redis-py's sync client on both sides, in µs."""
    warmup = 50
    child = ctx.Process(target=_echo_child, args=(url, n + warmup, False), daemon=True)
    child.start()
    client = redis.Redis.from_url(url)
    times: list[float] = []
    for _ in range(n + warmup):
        t0 = time.perf_counter()
        client.lpush(PING, "1")
        client.blpop([PONG], 0)
        times.append(time.perf_counter() - t0)
    client.close()
    child.join(timeout=10)
    return statistics.median(times[warmup:]) / 2 * 1e6


async def async_hop_us(client: aioredis.Redis, n: int) -> float:
    """Median one-way hop against the running async echo child, in µs."""
    times: list[float] = []
    for _ in range(n):
        t0 = time.perf_counter()
        await lpush(client, PING, "1")
        await blpop(client, PONG, 0)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) / 2 * 1e6


# -- 2. raw arq -------------------------------------------------------------------------------


def arq_settings(concurrency: int) -> dict[str, Any]:
    """arq's defaults except these (shown in the report)."""
    return {"poll_delay": ARQ_POLL_DELAY_S, "max_jobs": concurrency, "keep_result": 0}


async def arq_noop(ctx: dict[str, Any]) -> None:
    return None


async def arq_chain(ctx: dict[str, Any], i: int, n: int) -> None:
    pool: ArqRedis = ctx["redis"]
    if i < n:
        await pool.enqueue_job("arq_chain", i + 1, n, _job_id=CHAIN + uuid.uuid4().hex)
    else:
        await lpush(pool, DONE, json.dumps(time.time()))


async def _arq_worker_main(
    url: str, concurrency: int, expected: int, stop: MpEvent, ended: Counter | None = None
) -> None:
    """One arq worker; DONE gets [first start, last end, CPU s] each time another
    `expected` jobs have ended here (a standing worker reports batch after batch), or,
    given a counter shared by a fleet of workers, when the fleet's jobs reach `expected`
    (the fleet's workers also say on ARQ_READY when they poll)."""
    seen = {"first": 0.0, "last": 0.0, "done": 0, "cpu0": 0.0}

    async def on_startup(ctx: dict[str, Any]) -> None:
        if ended is not None:
            await ctx["redis"].rpush(ARQ_READY, "1")

    async def on_job_start(ctx: dict[str, Any]) -> None:
        if ctx["job_id"].startswith(CHAIN):
            return
        if not seen["first"]:
            seen["first"] = time.time()
            seen["cpu0"] = time.process_time()

    async def after_job_end(ctx: dict[str, Any]) -> None:
        if ctx["job_id"].startswith(CHAIN):
            return
        seen["done"] += 1
        seen["last"] = time.time()
        if ended is None:
            last = expected > 0 and seen["done"] % expected == 0
        else:
            with ended.get_lock():
                ended.value += 1
                last = ended.value == expected
        if last:
            cpu = time.process_time() - seen["cpu0"]
            first, seen["first"] = seen["first"], 0.0  # the next batch starts afresh
            await ctx["redis"].rpush(DONE, json.dumps([first, seen["last"], cpu]))

    worker = Worker(
        functions=[func(arq_noop, name="arq_noop"), func(arq_chain, name="arq_chain")],
        redis_settings=RedisSettings.from_dsn(url),
        handle_signals=False,
        on_startup=on_startup,
        on_job_start=on_job_start,
        after_job_end=after_job_end,
        **arq_settings(concurrency),
    )
    task = asyncio.create_task(worker.main())
    await asyncio.to_thread(stop.wait)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    # arq's close() cancels the jobs still running and gathers them without
    # return_exceptions, which raises their CancelledError: settle them here first.
    for job in worker.tasks.values():
        job.cancel()
    await asyncio.gather(*worker.tasks.values(), return_exceptions=True)
    worker.tasks.clear()
    await worker.close()


def _arq_worker_child(
    url: str, concurrency: int, expected: int, stop: MpEvent, sent: Counter, ended: Counter | None
) -> None:
    count_round_trips(sent)
    asyncio.run(_arq_worker_main(url, concurrency, expected, stop, ended))


def start_arq_worker(
    ctx: SpawnContext,
    url: str,
    concurrency: int,
    expected: int,
    sent: Counter,
    ended: Counter | None = None,
) -> tuple[SpawnProcess, MpEvent]:
    stop = ctx.Event()
    proc = ctx.Process(
        target=_arq_worker_child,
        args=(url, concurrency, expected, stop, sent, ended),
        daemon=True,
    )
    proc.start()
    return proc, stop


async def arq_throughput(
    ctx: SpawnContext, url: str, n: int, concurrency: int
) -> tuple[float, float, float]:
    """No-op jobs/s on one fresh worker (all n jobs queued before it starts), its
    round trips per job (its start-up and idle polls included) and its CPU ms per job."""
    pool = await create_pool(RedisSettings.from_dsn(url))
    try:
        await pool.delete(DONE)
        for start in range(0, n, 100):
            batch = range(start, min(n, start + 100))
            await asyncio.gather(*(pool.enqueue_job("arq_noop") for _ in batch))
        sent = cast(Counter, ctx.Value("q", 0, lock=False))
        proc, stop = start_arq_worker(ctx, url, concurrency, n, sent)
        try:
            reply = await blpop(pool, DONE, 120)
            round_trips = sent.value
        finally:
            _stop(proc, stop)
        if reply is None:
            raise RuntimeError("raw arq jobs did not finish in 120 s")
        first, last, cpu_s = json.loads(reply)
        return n / (last - first), round_trips / n, cpu_s * 1000 / n
    finally:
        await pool.aclose()


async def arq_hop_ms(pool: ArqRedis, n: int) -> float:
    """Per-hop latency of a chain of jobs, each enqueuing the next, in ms, on a standing
    arq worker (its batches of no-op jobs do not count the chain's)."""

    async def chain(length: int) -> float:
        await pool.delete(DONE)
        t0 = time.time()
        await pool.enqueue_job("arq_chain", 0, length, _job_id=CHAIN + uuid.uuid4().hex)
        reply = await blpop(pool, DONE, 120)
        if reply is None:
            raise RuntimeError("the arq chain did not finish in 120 s")
        return (float(json.loads(reply)) - t0) / (length + 1)

    await chain(3)  # warm up (and wait for the worker to start)
    return await chain(n) * 1000


# -- 3 and 4. agentq ------------------------------------------------------------------------


async def _agentq_worker_main(url: str, ready: MpEvent, stop: MpEvent) -> None:
    runtime = WorkerRuntime(
        url,
        executors=[FunctionExecutor([noop, *hop_budget.BENCH_TOOLS])],
        queues=[MODEL_QUEUE, TOOLS_QUEUE],
        freeze_startup_heap=True,  # as `agentq worker` does
    )
    await runtime.start()
    ready.set()
    waiter = asyncio.create_task(runtime.wait())
    stopper = asyncio.create_task(asyncio.to_thread(stop.wait))
    await asyncio.wait([waiter, stopper], return_when=asyncio.FIRST_COMPLETED)
    waiter.cancel()
    await runtime.stop()


def _agentq_worker_child(
    url: str, ready: MpEvent, stop: MpEvent, sent: Counter, profile_to: str | None
) -> None:
    count_round_trips(sent)
    if profile_to is None:
        asyncio.run(_agentq_worker_main(url, ready, stop))
        return
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        asyncio.run(_agentq_worker_main(url, ready, stop))
    finally:
        profiler.disable()
        profiler.dump_stats(profile_to)


def step_spec(steps: int) -> dict[str, Any]:
    script: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "noop", "input": {}}]} for _ in range(steps)
    ]
    script.append({"text": "done"})
    return {
        "model": {"provider": "scripted", "script": script},
        "prompt": "benchmark: one no-op call per step",
        "tools": [{"type": "function", "name": "noop"}],
        "max_steps": steps + 5,
    }


def fanout_spec(calls: int) -> dict[str, Any]:
    return {
        "model": {
            "provider": "scripted",
            "script": [
                {"tool_calls": [{"name": "noop", "input": {}} for _ in range(calls)]},
                {"text": "done"},
            ],
        },
        "prompt": "benchmark: fan out no-op calls",
        "tools": [{"type": "function", "name": "noop"}],
        "max_steps": 3,
    }


async def run_events(client: Client, spec: dict[str, Any]) -> list[Event]:
    """Submit a run, wait for it, and return its events (their `at` times are the figures).

    Waits by reading the run's status every few ms rather than following its event
    stream: a follower would wake for every event and take CPU from the worker.
    """
    run_id = await client.runs.submit(spec)
    deadline = time.monotonic() + 120
    while (status := (await client.runs.store.meta(run_id))["status"]) not in TERMINAL_STATUSES:
        if time.monotonic() > deadline:
            raise RuntimeError(f"benchmark run {run_id} did not finish in 120 s")
        await asyncio.sleep(WAIT_POLL_S)
    if status != "succeeded":
        raise RuntimeError(f"benchmark run {run_id} ended {status}")
    return [e async for e in client.runs.events(run_id)]


def at(events: list[Event], type_: str, step: int | None = None) -> float:
    for e in events:
        if e.type == type_ and (step is None or e.step == step):
            return e.at
    raise RuntimeError(f"no {type_} event (step {step})")


def step_ms(events: list[Event]) -> float:
    return (at(events, "finish") - at(events, "start")) / RUN_STEPS * 1000


def fanout_calls_per_s(events: list[Event], calls: int) -> float:
    return calls / (at(events, "start-step", 1) - at(events, "finish-step", 0))


async def commands_per_step(url: str, client: Client) -> dict[str, float]:
    """Redis commands (top-level and inside Lua) per step of one 20-step run."""
    raw = aioredis.Redis.from_url(url)
    try:
        await raw.config_resetstat()
        await run_events(client, step_spec(RUN_STEPS))
        stats: dict[str, Any] = await raw.info("commandstats")
    finally:
        await raw.aclose()
    per = {
        name.removeprefix("cmdstat_"): int(value["calls"]) / RUN_STEPS
        for name, value in stats.items()
        if isinstance(value, dict) and name not in ("cmdstat_config", "cmdstat_info")
    }
    return dict(sorted(per.items(), key=lambda kv: -kv[1]))


# -- worker CPU per job, agentq and raw arq alternated ---------------------------------------


@dataclass(frozen=True)
class CpuRound:
    """One round: full runs on the agentq worker and as many no-op jobs on raw arq's."""

    agentq_cpu_ms_per_job: float
    arq_cpu_ms_per_job: float
    agentq_jobs_per_s: float
    arq_jobs_per_s: float

    @property
    def cpu_ratio(self) -> float:
        return self.agentq_cpu_ms_per_job / self.arq_cpu_ms_per_job

    @property
    def jobs_ratio(self) -> float:
        return self.agentq_jobs_per_s / self.arq_jobs_per_s


async def arq_batch(pool: ArqRedis, jobs: int) -> tuple[float, float]:
    """`jobs` no-op jobs on a standing arq worker (enqueued as fast as they go, as
    agentq's full runs are submitted): its jobs/s and CPU ms per job over the batch."""
    await pool.delete(DONE)
    for start in range(0, jobs, 100):
        await asyncio.gather(
            *(pool.enqueue_job("arq_noop") for _ in range(start, min(jobs, start + 100)))
        )
    reply = await blpop(pool, DONE, 120)
    if reply is None:
        raise RuntimeError("raw arq jobs did not finish in 120 s")
    first, last, cpu_s = json.loads(reply)
    return jobs / (last - first), cpu_s * 1000 / jobs


async def worker_cpu_rounds(
    ctx: SpawnContext,
    url: str,
    sizes: Sizes,
    concurrency: int,
    sent: Counter,
    worker_pid: int,
    client: Client,
    budget: hop_budget.Budget,
    figures: Figures,
) -> list[CpuRound]:
    """Issue 31's "worker CPU per job <= raw arq's" and "full runs >= 1.0x raw arq jobs/s",
    each round measured back to back on both (who goes first alternates), so a busy moment
    of the shared machine lands on one round's pair rather than on one side."""
    jobs = sizes.full_runs * hop_budget.FULL_RUN_JOBS
    arq_sent = cast(Counter, ctx.Value("q", 0, lock=False))
    proc, stop = start_arq_worker(ctx, url, concurrency, jobs, arq_sent)
    pool = await create_pool(RedisSettings.from_dsn(url))
    rounds: list[CpuRound] = []
    try:
        # On the same worker (one start fewer): the chain, then a warm-up batch.
        figures.arq_hop_ms = await arq_hop_ms(pool, sizes.arq_chain)
        await arq_batch(pool, jobs)
        for i in range(sizes.cpu_rounds):
            if i % 2:
                agentq = await hop_budget.full_runs(client, sizes.full_runs, [worker_pid], sent)
                arq = await arq_batch(pool, jobs)
            else:
                arq = await arq_batch(pool, jobs)
                agentq = await hop_budget.full_runs(client, sizes.full_runs, [worker_pid], sent)
            rounds.append(CpuRound(agentq[2], arq[1], agentq[0], arq[0]))
            budget.full_jobs_per_s.append(agentq[0])  # issue 17's rows read these
            budget.full_trips_per_job.append(agentq[1])
            budget.full_cpu_ms_per_job.append(agentq[2])
    finally:
        _stop(proc, stop)
        await pool.aclose()
    return rounds


def spread(values: list[float], fmt: str, unit: str = "") -> str:
    """A figure's median and its range over the rounds, e.g. '1.21x (1.10-1.35x, 5 rounds)'."""
    return (
        f"{statistics.median(values):{fmt}}{unit} ({min(values):{fmt}}-{max(values):{fmt}}{unit},"
        f" {len(values)} rounds)"
    )


# -- the whole measurement ---------------------------------------------------------------------


@dataclass
class Figures:
    sync_hop_us: float = 0.0
    hop_us: list[float] = field(default_factory=list)
    step_ms: list[float] = field(default_factory=list)
    step_hops: list[float] = field(default_factory=list)
    arq_jobs_per_s: list[float] = field(default_factory=list)
    calls_per_s: list[float] = field(default_factory=list)
    tp_ratios: list[float] = field(default_factory=list)
    arq_round_trips_per_job: list[float] = field(default_factory=list)
    round_trips_per_step: list[float] = field(default_factory=list)
    round_trips_per_call: list[float] = field(default_factory=list)
    arq_cpu_ms_per_job: list[float] = field(default_factory=list)
    arq_hop_ms: float = 0.0
    cpu_rounds: list[CpuRound] = field(default_factory=list)
    commands: dict[str, float] = field(default_factory=dict)
    budget: hop_budget.Budget = field(default_factory=hop_budget.Budget)


async def _two_workers(
    ctx: SpawnContext,
    url: str,
    sizes: Sizes,
    sent: Counter,
    worker_pid: int,
    client: Client,
    budget: hop_budget.Budget,
) -> None:
    """Full runs on the main worker and a second worker process together."""
    ready, stop = ctx.Event(), ctx.Event()
    second_sent = cast(Counter, ctx.Value("q", 0, lock=False))
    second = ctx.Process(
        target=_agentq_worker_child, args=(url, ready, stop, second_sent, None), daemon=True
    )
    second.start()
    try:
        if not await asyncio.to_thread(ready.wait, 30):
            raise RuntimeError("the second agentq worker did not start")
        for _ in range(sizes.throughput_pairs):
            tp, _, cpu = await hop_budget.full_runs(
                client, sizes.full_runs, [worker_pid, second.pid or 0], sent
            )
            budget.two_jobs_per_s.append(tp)
            budget.two_cpu_ms_per_job.append(cpu)
    finally:
        _stop(second, stop)


async def measure_budget(
    ctx: SpawnContext,
    url: str,
    sizes: Sizes,
    sent: Counter,
    worker_pid: int,
    client: Client,
    budget: hop_budget.Budget,
) -> None:
    """Issue 17's rows that the measures above do not give. A row that cannot finish
    (a hung measure) is reported as nan rather than holding the whole bench."""
    budget.cancel_ms += hop_budget.measure_alone("cancel", 120)
    if sizes.slow_rows:
        budget.recovery_s += hop_budget.measure_alone("recovery", 120)
        budget.upkeep_pct = hop_budget.measure_alone("upkeep", 120)
    print("  cancel and recovery measured", flush=True)
    if sizes.slow_rows:
        await _two_workers(ctx, url, sizes, sent, worker_pid, client, budget)
    print("  full runs measured", flush=True)
    budget.late_vs_early.append(await hop_budget.history_growth(client))
    budget.bytes_per_output_byte = await hop_budget.storage(client, url)
    print("  history measured", flush=True)
    await hop_budget.embedded_vs_real(sizes.embedded_runs, budget)
    print("  embedded measured", flush=True)
    if not sizes.quick:
        await asyncio.sleep(1.0)  # past the last runs' ends
    budget.idle_cpu_pct = await hop_budget.idle_cpu_pct(worker_pid, sizes.idle_s)
    if not sizes.slow_rows:
        return
    try:
        pairs = await asyncio.to_thread(
            cluster_bench.measure, sizes.full_runs, sizes.throughput_pairs
        )
    except Exception as exc:  # no redis-cli, a cluster that would not form: no figure
        print(f"  cluster: no figure ({type(exc).__name__}: {exc})", flush=True)
        pairs = [(float("nan"), float("nan"))]
    budget.single_node_jobs_per_s += [single for single, _ in pairs]
    budget.cluster_jobs_per_s += [cluster for _, cluster in pairs]
    print("  cluster measured", flush=True)


async def measure(
    ctx: SpawnContext,
    url: str,
    sizes: Sizes,
    concurrency: int,
    sent: Counter,
    figures: Figures,
    worker_pid: int,
) -> None:
    ping = aioredis.Redis.from_url(url, socket_timeout=None)
    async with Client(url) as client:
        deadline = time.monotonic() + 30
        while not any(a.name == "noop" for a in (await client.runs.store.registry()).values()):
            if time.monotonic() > deadline:
                raise RuntimeError("the agentq worker did not announce its tool")
            await asyncio.sleep(0.05)
        await async_hop_us(ping, 50)  # warm up
        await run_events(client, step_spec(RUN_STEPS))
        await run_events(client, fanout_spec(min(100, sizes.calls)))

        for _ in range(sizes.step_runs):
            before = await async_hop_us(ping, sizes.hop_round_trips)
            sent_before = sent.value
            ms = step_ms(await run_events(client, step_spec(RUN_STEPS)))
            figures.round_trips_per_step.append((sent.value - sent_before) / RUN_STEPS)
            after = await async_hop_us(ping, sizes.hop_round_trips)
            hop = (before + after) / 2
            figures.hop_us.append(hop)
            figures.step_ms.append(ms)
            figures.step_hops.append(ms * 1000 / hop)
        print(f"  agentq steps measured ({len(figures.step_ms)} runs)", flush=True)

        for _ in range(sizes.throughput_pairs):
            jobs_per_s, arq_trips, arq_cpu = await arq_throughput(
                ctx, url, sizes.calls, concurrency
            )
            figures.arq_round_trips_per_job.append(arq_trips)
            figures.arq_cpu_ms_per_job.append(arq_cpu)
            sent_before = sent.value
            calls_per_s = fanout_calls_per_s(
                await run_events(client, fanout_spec(sizes.calls)), sizes.calls
            )
            figures.round_trips_per_call.append((sent.value - sent_before) / sizes.calls)
            figures.arq_jobs_per_s.append(jobs_per_s)
            figures.calls_per_s.append(calls_per_s)
            figures.tp_ratios.append(calls_per_s / jobs_per_s)
        print(f"  throughput measured ({len(figures.tp_ratios)} pairs)", flush=True)

        figures.commands = await commands_per_step(url, client)
        figures.cpu_rounds = await worker_cpu_rounds(
            ctx, url, sizes, concurrency, sent, worker_pid, client, figures.budget, figures
        )
        print(f"  worker CPU measured ({len(figures.cpu_rounds)} alternated rounds)", flush=True)
        await measure_budget(ctx, url, sizes, sent, worker_pid, client, figures.budget)
    await lpush(ping, PING, "stop")
    await ping.aclose()


# -- report ---------------------------------------------------------------------------------------


def _runs(values: list[float], fmt: str) -> str:
    return ", ".join(format(v, fmt) for v in values)


def report(figures: Figures, sizes: Sizes, settings: Settings, elapsed_s: float) -> None:
    med = statistics.median
    hop = med(figures.hop_us)
    step = med(figures.step_ms)
    step_hops = med(figures.step_hops)
    arq_tp = med(figures.arq_jobs_per_s)
    calls = med(figures.calls_per_s)
    tp_ratio = med(figures.tp_ratios)
    top = list(figures.commands.items())
    commands = sum(v for _, v in top)
    rows = [
        (
            "raw Redis hop, redis.asyncio (baseline)",
            f"{hop:.1f} µs",
            f"median of {len(figures.hop_us)} samples: {_runs(figures.hop_us, '.0f')}",
        ),
        ("raw Redis hop, sync redis-py", f"{figures.sync_hop_us:.1f} µs", "context"),
        (
            "raw arq no-op throughput, 1 worker",
            f"{arq_tp:.0f} jobs/s",
            f"{sizes.calls} jobs; runs: {_runs(figures.arq_jobs_per_s, '.0f')}",
        ),
        (
            "raw arq hop (each job enqueues next)",
            f"{figures.arq_hop_ms:.2f} ms",
            f"chain of {sizes.arq_chain}; bound by poll_delay",
        ),
        (
            "agentq step (model step + 1 tool call)",
            f"{step:.2f} ms",
            f"{RUN_STEPS}-step runs: {_runs(figures.step_ms, '.2f')}",
        ),
        (
            "agentq no-op tool calls, 1 worker",
            f"{calls:.0f} calls/s",
            f"fan-out of {sizes.calls}; runs: {_runs(figures.calls_per_s, '.0f')}",
        ),
        (
            "agentq worker round trips per step",
            f"{med(figures.round_trips_per_step):.1f}",
            "commands or pipelines the worker sent (incl. BLPOP wake-ups, lease, arq's own)",
        ),
        (
            "  per no-op tool call (fan-out)",
            f"{med(figures.round_trips_per_call):.1f}",
            f"raw arq per no-op job: {med(figures.arq_round_trips_per_job):.1f}",
        ),
        (
            "Redis commands per agentq step",
            f"{commands:.0f}",
            "incl. inside Lua: " + ", ".join(f"{k} {v:g}" for k, v in top[:8]),
        ),
    ]
    width = max(len(r[0]) for r in rows)
    print()
    print(f"{'measure':{width}}  {'value':>14}  notes")
    print("-" * (width + 18 + 60))
    for name, value, note in rows:
        print(f"{name:{width}}  {value:>14}  {note}")
    print()
    arq_cfg = ", ".join(f"{k}={v}" for k, v in arq_settings(settings.concurrency).items())
    print(
        f"raw arq worker: arq defaults except {arq_cfg}; agentq worker: WorkerRuntime defaults"
        f" (concurrency={settings.concurrency}, idle_poll_s={settings.idle_poll_s:g},"
        " woken by BLPOP; keep_result=0)"
    )
    step_mark = verdict(step_hops <= STEP_GOAL_HOPS, timed=True, quick=sizes.quick)
    print(
        f"step cost      = {step_hops:6.1f} raw hops   goal <= {STEP_GOAL_HOPS:g}    {step_mark}"
        f"   (median of per-run ratios: {_runs(figures.step_hops, '.1f')}; "
        f"vs the sync-client hop: {step * 1000 / figures.sync_hop_us:.1f})"
    )
    tp_mark = verdict(tp_ratio >= THROUGHPUT_GOAL, timed=True, quick=sizes.quick)
    print(
        f"throughput     = {tp_ratio:6.2f} x raw arq    goal >= {THROUGHPUT_GOAL:g}   {tp_mark}"
        f"   (median of paired ratios: {_runs(figures.tp_ratios, '.2f')})"
    )
    rounds = figures.cpu_rounds
    cpu_ratio = med([r.cpu_ratio for r in rounds])
    cpu_mark = verdict(cpu_ratio <= 1.0, timed=True, quick=sizes.quick)
    print(
        f"worker CPU/job = {spread([r.cpu_ratio for r in rounds], '.2f', 'x')} raw arq's"
        f"   goal <= 1   {cpu_mark}   (agentq full runs"
        f" {spread([r.agentq_cpu_ms_per_job for r in rounds], '.2f', ' ms')}, raw arq"
        f" {spread([r.arq_cpu_ms_per_job for r in rounds], '.2f', ' ms')}; alternated rounds of"
        f" {sizes.full_runs * hop_budget.FULL_RUN_JOBS} jobs each)"
    )
    jobs_ratio = med([r.jobs_ratio for r in rounds])
    jobs_mark = verdict(jobs_ratio >= 1.0, timed=True, quick=sizes.quick)
    print(
        f"full runs      = {spread([r.jobs_ratio for r in rounds], '.2f', 'x')} raw arq jobs/s"
        f"   goal >= 1   {jobs_mark}   (agentq"
        f" {spread([r.agentq_jobs_per_s for r in rounds], '.0f')} jobs/s, raw arq"
        f" {spread([r.arq_jobs_per_s for r in rounds], '.0f')})"
    )
    hop_budget.print_table(
        hop_budget.table(
            figures.budget,
            step_sync_hops=step * 1000 / figures.sync_hop_us,
            arq_jobs_per_s=arq_tp,
            arq_cpu_ms_per_job=med(figures.arq_cpu_ms_per_job),
            trips_per_call=med(figures.round_trips_per_call),
            quick=sizes.quick,
        )
    )
    note = "; --quick: few samples, a timed figure is noise and gets no verdict"
    print(f"(total {elapsed_s:.1f} s{note if sizes.quick else ''})")


def _profile_report(path: str) -> str:
    out = io.StringIO()
    stats = pstats.Stats(path, stream=out)
    stats.sort_stats("tottime").print_stats(30)
    return out.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a smoke run in under 30 s: few samples (timed figures get no verdict), without"
        " the two-worker, recovery, upkeep and cluster rows",
    )
    parser.add_argument("--profile", action="store_true", help="cProfile the agentq worker")
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    settings = Settings()
    ctx = mp.get_context("spawn")
    started = time.monotonic()
    profile_to = (
        os.path.join(tempfile.gettempdir(), f"agentq-bench-{os.getpid()}.prof")
        if args.profile
        else None
    )
    figures = Figures()
    with redis_server() as url:
        os.environ[hop_budget.URL_ENV] = url  # spawned workers' tools report to it
        print(
            f"redis-server at {url}; {os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.1f}",
            flush=True,
        )
        figures.sync_hop_us = sync_hop_us(ctx, url, sizes.hop_round_trips)
        echo = ctx.Process(target=_echo_child, args=(url, 0, True), daemon=True)
        echo.start()
        ready, stop = ctx.Event(), ctx.Event()
        sent = cast(Counter, ctx.Value("q", 0, lock=False))
        worker = ctx.Process(
            target=_agentq_worker_child, args=(url, ready, stop, sent, profile_to), daemon=True
        )
        worker.start()
        try:
            if not ready.wait(30):
                raise RuntimeError("the agentq worker did not start")
            asyncio.run(
                measure(ctx, url, sizes, settings.concurrency, sent, figures, worker.pid or 0)
            )
        finally:
            _stop(worker, stop)
            echo.join(timeout=5)
            if echo.is_alive():
                echo.terminate()
    report(figures, sizes, settings, time.monotonic() - started)
    if profile_to is not None:
        print()
        print("agentq worker profile (cProfile, whole worker lifetime, by own time):")
        print(_profile_report(profile_to))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
