"""The rows of issue 17's table ("the hop budget") that `core_bench.py` does not
already measure, each against a baseline measured in the same run.

Imported by `core_bench.py` (which owns the Redis server, the raw baselines and the
main worker process); every function here takes what it needs from there.
"""

from __future__ import annotations

import asyncio
import os
import signal
import statistics
import threading
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field
from multiprocessing.context import SpawnContext, SpawnProcess
from multiprocessing.sharedctypes import Synchronized
from multiprocessing.synchronize import Event as MpEvent
from typing import Any, cast

import redis
import redis.asyncio as aioredis
from verdicts import verdict

from agentq import tool
from agentq.orchestrator.client import Client
from agentq.orchestrator.core.envelopes import MODEL_QUEUE, TOOLS_QUEUE
from agentq.orchestrator.core.events import Event, StartStep
from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.redis.connect import forget_memory_server
from agentq.orchestrator.runs.result import TERMINAL_STATUSES
from agentq.workers.tools.function import FunctionExecutor
from agentq.workers.worker.runtime import WorkerRuntime

URL_ENV = "AGENTQ_BENCH_URL"  # the bench's Redis, for tools that report to it
STARTED = "bench:started"  # list: "pid time" each time the recovery tool starts
FIRST = "bench:first"  # set once: the recovery tool's first delivery hangs
CANCELLED = "bench:cancelled"  # list: the time a running tool saw its cancellation
RECOVER_QUEUE = "bench-recover"
RECOVERY_KILLS = 3  # the recovery measure's kills, each on a fresh Redis and workers
EMBEDDED_RUNS = 5  # the embedded row's 20-step runs on each Redis
KB_OUTPUT = "x" * 1024


@tool
async def kilobyte() -> str:
    """Return 1 KB (the history-growth rows' tool)."""
    return KB_OUTPUT


@tool
async def tiny() -> str:
    """Return 2 bytes (the storage row's baseline)."""
    return "ok"


@tool
async def sleepy() -> str:
    """Sleep until cancelled; report when the cancellation arrived (the cancel row)."""
    try:
        await asyncio.sleep(120)
    except asyncio.CancelledError:
        client = redis.Redis.from_url(os.environ[URL_ENV])
        client.lpush(CANCELLED, repr(time.time()))
        client.close()
        raise
    return "not cancelled"


@tool
async def hang_once() -> str:
    """Report each start; the first delivery hangs (its worker is killed), later ones end.

    Which delivery is first and the start's report are one transaction: the worker is
    killed as soon as the report lands, and a kill between the two would make the
    re-delivery the "first" one, hanging until the call's timeout."""
    client = redis.Redis.from_url(os.environ[URL_ENV])
    with client.pipeline(transaction=True) as pipe:
        pipe.set(FIRST, "1", nx=True)
        pipe.lpush(STARTED, f"{os.getpid()} {time.time()!r}")
        first = bool(pipe.execute()[0])
    client.close()
    if first:
        await asyncio.sleep(120)
    return "ok"


@tool
async def doze() -> str:
    """Sleep for a minute (a call in flight while the lease upkeep is measured)."""
    await asyncio.sleep(60)
    return "ok"


BENCH_TOOLS = [kilobyte, tiny, sleepy]
UPKEEP_JOBS = 1000


def cpu_s(pid: int) -> float:
    """A process's user + system CPU time so far (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# -- specs ------------------------------------------------------------------------------------


def full_run_spec() -> dict[str, Any]:
    """The issue's full run: 2 model steps, the first with 2 parallel no-op calls."""
    return {
        "model": {
            "provider": "scripted",
            "script": [
                {"tool_calls": [{"name": "noop", "input": {}}, {"name": "noop", "input": {}}]},
                {"text": "done"},
            ],
        },
        "prompt": "benchmark: a full run",
        "tools": [{"type": "function", "name": "noop"}],
        "max_steps": 3,
    }


FULL_RUN_JOBS = 4  # 2 model steps + 2 tool calls


def one_tool_spec(name: str, steps: int) -> dict[str, Any]:
    script: list[dict[str, Any]] = [
        {"tool_calls": [{"name": name, "input": {}}]} for _ in range(steps)
    ]
    script.append({"text": "done"})
    return {
        "model": {"provider": "scripted", "script": script},
        "prompt": f"benchmark: one {name} call per step",
        "tools": [{"type": "function", "name": name}],
        "max_steps": steps + 5,
    }


async def wait_all(client: Client, run_ids: list[str], timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    for run_id in run_ids:
        while (status := (await client.runs.store.meta(run_id))["status"]) not in TERMINAL_STATUSES:
            if time.monotonic() > deadline:
                raise RuntimeError(f"benchmark run {run_id} did not finish in {timeout_s} s")
            await asyncio.sleep(0.02)
        if status != "succeeded":
            raise RuntimeError(f"benchmark run {run_id} ended {status}")


async def events_of(client: Client, spec: dict[str, Any]) -> list[Event]:
    run_id = await client.runs.submit(spec)
    await wait_all(client, [run_id])
    return [e async for e in client.runs.events(run_id)]


def step_starts(events: list[Event]) -> dict[int, float]:
    return {e.step: e.at for e in events if isinstance(e, StartStep)}


# -- rows -------------------------------------------------------------------------------------


@dataclass
class Budget:
    full_jobs_per_s: list[float] = field(default_factory=list)
    full_trips_per_job: list[float] = field(default_factory=list)
    full_cpu_ms_per_job: list[float] = field(default_factory=list)
    two_jobs_per_s: list[float] = field(default_factory=list)
    two_cpu_ms_per_job: list[float] = field(default_factory=list)
    late_vs_early: list[float] = field(default_factory=list)
    bytes_per_output_byte: float = 0.0
    embedded_ms: list[float] = field(default_factory=list)
    inprocess_real_ms: list[float] = field(default_factory=list)
    cancel_ms: list[float] = field(default_factory=list)
    recovery_s: list[float] = field(default_factory=list)
    # A worker process holding 1,000 calls: its CPU, its lease renewer's, and idle (%).
    upkeep_pct: list[float] = field(default_factory=list)
    idle_cpu_pct: float = 0.0
    # Full runs on one redis-server and on a 3-primary cluster, measured alternately.
    single_node_jobs_per_s: list[float] = field(default_factory=list)
    cluster_jobs_per_s: list[float] = field(default_factory=list)


async def full_runs(
    client: Client, n: int, pids: list[int], sent: Any
) -> tuple[float, float, float]:
    """n full runs submitted at once: jobs/s, worker round trips per job, worker CPU ms
    per job (all the given worker processes together)."""
    cpu0 = sum(cpu_s(p) for p in pids)
    sent0 = sent.value
    t0 = time.perf_counter()
    run_ids = await asyncio.gather(*(client.runs.submit(full_run_spec()) for _ in range(n)))
    await wait_all(client, list(run_ids))
    elapsed = time.perf_counter() - t0
    jobs = n * FULL_RUN_JOBS
    cpu = sum(cpu_s(p) for p in pids) - cpu0
    return jobs / elapsed, (sent.value - sent0) / jobs, cpu * 1000 / jobs


async def history_growth(client: Client) -> float:
    """Step latency around step 100 over around step 10 (1 KB tool outputs)."""
    starts = step_starts(await events_of(client, one_tool_spec("kilobyte", 105)))
    early = statistics.median(starts[n + 1] - starts[n] for n in range(5, 15))
    late = statistics.median(starts[n + 1] - starts[n] for n in range(95, 105))
    return late / early


async def run_bytes(url: str, run_id: str) -> int:
    raw = aioredis.Redis.from_url(url)
    try:
        total = 0
        async for key in raw.scan_iter(match=f"*{{{run_id}}}*", count=1000):
            total += int(await raw.memory_usage(key, samples=0) or 0)
        return total
    finally:
        await raw.aclose()


async def storage(client: Client, url: str) -> float:
    """Bytes stored per tool-output byte: a 10-step run with 1 KB outputs against the
    same run with 2-byte outputs."""
    steps = 10
    big = await client.runs.submit(one_tool_spec("kilobyte", steps))
    small = await client.runs.submit(one_tool_spec("tiny", steps))
    await wait_all(client, [big, small])
    extra = await run_bytes(url, big) - await run_bytes(url, small)
    return extra / (steps * (len(KB_OUTPUT) - len("ok")))


def redis_cpu_s(url: str) -> float:
    """A redis-server's own CPU so far (INFO's used_cpu_sys + used_cpu_user), seconds."""
    client = redis.Redis.from_url(url)
    try:
        info = cast(dict[str, Any], client.info("cpu"))
        return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])
    finally:
        client.close()


async def inprocess_step_ms(
    url: str,
    runs: int,
    cpu_ms: list[float] | None = None,
    server_cpu_ms: list[float] | None = None,
) -> list[float]:
    """Per-step latency of a 20-step run with client and worker in this process; `cpu_ms`
    gets this process's CPU per step of each run, `server_cpu_ms` the redis-server's at
    `url` (a real one) over the same run."""
    from core_bench import RUN_STEPS, noop, step_ms, step_spec

    runtime = WorkerRuntime(
        url, executors=[FunctionExecutor([noop])], queues=[MODEL_QUEUE, TOOLS_QUEUE]
    )
    await runtime.start()
    try:
        async with Client(url) as client:
            await events_of(client, step_spec(RUN_STEPS))  # warm up
            ms = []
            for _ in range(runs):
                server_start = redis_cpu_s(url) if server_cpu_ms is not None else 0.0
                start = time.process_time()
                ms.append(step_ms(await events_of(client, step_spec(RUN_STEPS))))
                if cpu_ms is not None:
                    cpu_ms.append((time.process_time() - start) / RUN_STEPS * 1000)
                if server_cpu_ms is not None:
                    server_cpu_ms.append((redis_cpu_s(url) - server_start) / RUN_STEPS * 1000)
            return ms
    finally:
        await runtime.stop()


async def embedded_alone(runs: int) -> list[float]:
    """`embedded`: the median step (ms) and the least CPU per step (ms) of this process
    over `runs` 20-step runs on the embedded Redis, then the same on a redis-server of
    its own, then that redis-server's own CPU per step (ms, INFO's, over the run whose
    process CPU was the least). The least: on a shared machine, others' load only adds
    to it."""
    from core_bench import redis_server

    memory = f"memory://bench-{os.getpid()}"
    figures: list[float] = []
    with redis_server() as url:
        cpu: list[float] = []
        figures += [_med(await inprocess_step_ms(memory, runs, cpu)), min(cpu)]
        cpu, server_cpu = [], []
        figures += [_med(await inprocess_step_ms(url, runs, cpu, server_cpu)), min(cpu)]
        figures.append(server_cpu[cpu.index(min(cpu))])
    forget_memory_server(memory)
    return figures


def embedded_ratios(figures: list[float]) -> list[str]:
    """`embedded_alone`'s figures as the two comparisons, labelled: the embedded process
    does its own work and its Redis's, a process on a real Redis only its own."""
    _, embedded_cpu, _, real_cpu, server_cpu = figures
    return [
        f"embedded CPU per step / same process on a real Redis (the process alone):"
        f" {embedded_cpu / real_cpu:.2f}x ({embedded_cpu:.2f} / {real_cpu:.2f} ms)",
        f"embedded CPU per step / same process + its redis-server's own CPU:"
        f" {embedded_cpu / (real_cpu + server_cpu):.2f}x"
        f" ({embedded_cpu:.2f} / {real_cpu:.2f} + {server_cpu:.2f} ms)",
    ]


async def embedded_vs_real(runs: int, budget: Budget) -> None:
    """The same in-process worker and client on the embedded Redis and on a real one (a
    second redis-server of its own, so no other worker takes its jobs), alternating."""
    from core_bench import redis_server

    with redis_server() as url:
        for i in range(runs):
            memory = f"memory://bench-{os.getpid()}-{i}"
            budget.embedded_ms += await inprocess_step_ms(memory, 1)
            forget_memory_server(memory)
            budget.inprocess_real_ms += await inprocess_step_ms(url, 1)


async def cancel_latency(client: Client, url: str) -> float:
    """Cancel a run whose tool is running: ms until the tool sees its cancellation."""
    raw = aioredis.Redis.from_url(url)
    try:
        await raw.delete(CANCELLED)
        run_id = await client.runs.submit(one_tool_spec("sleepy", 1))
        deadline = time.monotonic() + 30
        while not any(
            e.type == "tool-running" for e in [e async for e in client.runs.events(run_id)]
        ):
            if time.monotonic() > deadline:
                raise RuntimeError("the sleepy tool did not start")
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)  # the job is inside the tool
        t0 = time.time()
        await client.runs.cancel(run_id)
        reply = await cast(Awaitable[list[bytes] | None], raw.blpop([CANCELLED], 10))
        if reply is None:
            raise RuntimeError("the running tool was not cancelled within 10 s")
        return (float(reply[1]) - t0) * 1000
    finally:
        await raw.aclose()


async def _recover_worker_main(url: str, ready: MpEvent, stop: MpEvent) -> None:
    runtime = WorkerRuntime(
        url,
        executors=[FunctionExecutor([hang_once])],
        queues=[RECOVER_QUEUE],
        tool_queue=RECOVER_QUEUE,
    )
    await runtime.start()
    ready.set()
    await asyncio.to_thread(stop.wait)
    await runtime.stop()


def _recover_worker_child(url: str, ready: MpEvent, stop: MpEvent) -> None:
    asyncio.run(_recover_worker_main(url, ready, stop))


async def recovery(ctx: SpawnContext) -> float:
    """SIGKILL the worker running a call: seconds until the call runs again elsewhere.
    On a Redis of its own, with an in-process worker for the model steps."""
    from core_bench import redis_server

    outer = os.environ.get(URL_ENV, "")
    with redis_server() as url:
        os.environ[URL_ENV] = url  # what the recovery workers spawned below inherit
        runtime = WorkerRuntime(url, executors=[FunctionExecutor([])], queues=[MODEL_QUEUE])
        await runtime.start()
        try:
            async with Client(url) as client:
                return await _recovery(ctx, client, url)
        finally:
            os.environ[URL_ENV] = outer
            await runtime.stop()


async def _recovery(ctx: SpawnContext, client: Client, url: str) -> float:
    raw = aioredis.Redis.from_url(url)
    procs: list[tuple[SpawnProcess, MpEvent]] = []
    pid = 0  # the worker killed mid-call
    try:
        await raw.delete(STARTED, FIRST)
        for _ in range(2):
            ready, stop = ctx.Event(), ctx.Event()
            proc = ctx.Process(target=_recover_worker_child, args=(url, ready, stop), daemon=True)
            proc.start()
            procs.append((proc, stop))
            if not await asyncio.to_thread(ready.wait, 30):
                raise RuntimeError("a recovery worker did not start")
        run_id = await client.runs.submit(one_tool_spec("hang_once", 1))
        first = await cast(Awaitable[list[bytes] | None], raw.blpop([STARTED], 30))
        if first is None:
            raise RuntimeError("the recovery call did not start")
        pid = int(first[1].split()[0])
        os.kill(pid, signal.SIGKILL)
        killed = time.time()
        again = await cast(Awaitable[list[bytes] | None], raw.blpop([STARTED], 60))
        if again is None:
            raise RuntimeError("the killed call did not run again within 60 s")
        # The run must end too: a re-delivered call that never joins would be a lost run.
        await wait_all(client, [run_id], timeout_s=60)
        return float(again[1].split()[1]) - killed
    finally:
        for proc, stop in procs:
            # Never set the killed worker's event: it died waiting on it, and a
            # multiprocessing Event's set() then waits forever for that waiter to wake.
            if proc.pid != pid:
                stop.set()
        for proc, _ in procs:
            proc.join(timeout=15)
            if proc.is_alive():
                proc.kill()
        await raw.aclose()


def task_cpu_s(pid: int, tid: int | None = None) -> float:
    """CPU time so far of a process's live threads, or of one (Linux /proc: the
    scheduler's own nanoseconds, where clock ticks give 10 ms; a thread that ended is not
    counted, so only for a process whose threads live on, as an idle worker's do)."""
    total = 0
    for task in [str(tid)] if tid is not None else os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
        except FileNotFoundError:
            continue
    return total / 1e9


def _renewer_tid(tid: Synchronized[int]) -> None:
    """Say which OS thread renews the lease (Python 3.11 gives threads no OS name)."""
    for thread in threading.enumerate():
        if thread.name == "agentq-lease" and thread.native_id is not None:
            tid.value = thread.native_id


async def _upkeep_worker_main(
    url: str, ready: MpEvent, stop: MpEvent, renewer: Synchronized[int]
) -> None:
    runtime = WorkerRuntime(
        url,
        executors=[FunctionExecutor([doze])],
        queues=[RECOVER_QUEUE],
        tool_queue=RECOVER_QUEUE,
        settings=Settings(concurrency=UPKEEP_JOBS),
    )
    await runtime.start()
    _renewer_tid(renewer)
    ready.set()
    await asyncio.to_thread(stop.wait)
    await runtime.stop()


def _upkeep_worker_child(
    url: str, ready: MpEvent, stop: MpEvent, renewer: Synchronized[int]
) -> None:
    asyncio.run(_upkeep_worker_main(url, ready, stop, renewer))


async def upkeep(ctx: SpawnContext, seconds: float = 10.0) -> tuple[float, float, float]:
    """A worker process holding 1,000 sleeping calls: its whole CPU (% of a core), its
    lease renewer thread's, and the same process's CPU with nothing in flight (measured
    first, while it is alone on its Redis and so holds the upkeep turn; it has claimed
    nothing yet). The lease's upkeep is the renewer plus the reaper (on the event loop): at
    most the in-flight figure, which also holds arq's per-poll bookkeeping. Figures
    are clock ticks (10 ms) over `seconds`: 0.1% resolution at 10 s."""
    from core_bench import redis_server

    with redis_server() as url:
        ready, stop, renewer = ctx.Event(), ctx.Event(), ctx.Value("i", 0)
        proc = ctx.Process(
            target=_upkeep_worker_child, args=(url, ready, stop, renewer), daemon=True
        )
        proc.start()
        pid = proc.pid
        assert pid is not None
        raw = aioredis.Redis.from_url(url)
        runtime: WorkerRuntime | None = None
        try:
            if not await asyncio.to_thread(ready.wait, 30):
                raise RuntimeError("the upkeep worker did not start")
            await asyncio.sleep(1.0)  # past its start-up
            # Idle while it is the only process on its Redis: it holds the fleet's upkeep
            # turn (it passes the reaper), as core_bench's idle worker does.
            idle = await idle_cpu_pct(pid, seconds)
            runtime = WorkerRuntime(url, executors=[FunctionExecutor([])], queues=[MODEL_QUEUE])
            await runtime.start()  # for the model steps
            async with Client(url) as client:
                spec = one_tool_spec("doze", 1)
                await asyncio.gather(*(client.runs.submit(spec) for _ in range(UPKEEP_JOBS)))
            in_flight = raw.scan_iter(match="arq:in-progress:*", count=1000)
            deadline = time.monotonic() + 60
            while len([k async for k in in_flight]) < UPKEEP_JOBS:
                if time.monotonic() > deadline:
                    raise RuntimeError("the calls did not all start")
                await asyncio.sleep(0.2)
                in_flight = raw.scan_iter(match="arq:in-progress:*", count=1000)
            await asyncio.sleep(1.0)  # past the claims
            cpu0, lease0 = cpu_s(pid), task_cpu_s(pid, renewer.value)
            await asyncio.sleep(seconds)
            busy = (cpu_s(pid) - cpu0) / seconds * 100
            lease = (task_cpu_s(pid, renewer.value) - lease0) / seconds * 100
            return busy, lease, idle
        finally:
            if runtime is not None:
                await runtime.stop()
            proc.kill()  # 1,000 calls: not worth releasing one by one
            proc.join(15)
            await raw.aclose()


async def _idle_worker_main(
    url: str, ready: MpEvent, stop: MpEvent, renewer: Synchronized[int]
) -> None:
    runtime = WorkerRuntime(
        url,
        executors=[FunctionExecutor([tiny])],
        queues=[MODEL_QUEUE, TOOLS_QUEUE],  # as `agentq worker` serves by default
        freeze_startup_heap=True,
    )
    await runtime.start()
    _renewer_tid(renewer)
    ready.set()
    await asyncio.to_thread(stop.wait)
    await runtime.stop()


def _idle_worker_child(url: str, ready: MpEvent, stop: MpEvent, renewer: Synchronized[int]) -> None:
    asyncio.run(_idle_worker_main(url, ready, stop, renewer))


def _command_calls(client: redis.Redis) -> dict[str, int]:
    stats = cast(dict[str, dict[str, int]], client.info("commandstats"))
    return {name.removeprefix("cmdstat_"): int(s["calls"]) for name, s in stats.items()}


async def idle(
    ctx: SpawnContext, seconds: float = 20.0
) -> tuple[float, float, float, float, float]:
    """An idle worker (the model and tools queues, as `agentq worker`), the only process
    on its Redis (so it holds the upkeep turn), after it ran 3 runs: the Redis commands it
    sends per second (those its scripts run inside included, INFO commandstats), the
    scripts it calls per second, and its CPU (% of a core) by clock ticks (10 ms: 0.05 %
    at 20 s), then by the scheduler's nanoseconds, whole and its lease renewer's alone,
    each over `seconds`."""
    from core_bench import redis_server

    with redis_server() as url:
        ready, stop, renewer = ctx.Event(), ctx.Event(), ctx.Value("i", 0)
        proc = ctx.Process(target=_idle_worker_child, args=(url, ready, stop, renewer), daemon=True)
        proc.start()
        pid = proc.pid
        assert pid is not None
        stats = redis.Redis.from_url(url)
        try:
            if not await asyncio.to_thread(ready.wait, 30):
                raise RuntimeError("the idle worker did not start")
            async with Client(url) as client:
                spec = one_tool_spec("tiny", 1)
                await wait_all(client, [await client.runs.submit(spec) for _ in range(3)])
            await asyncio.sleep(1.0)  # past the runs' ends
            before, cpu0 = _command_calls(stats), cpu_s(pid)
            ns0, lease0 = task_cpu_s(pid), task_cpu_s(pid, renewer.value)
            await asyncio.sleep(seconds)
            after, cpu = _command_calls(stats), (cpu_s(pid) - cpu0) / seconds * 100
            ns = (task_cpu_s(pid) - ns0) / seconds * 100
            lease = (task_cpu_s(pid, renewer.value) - lease0) / seconds * 100
            after["info"] = after.get("info", 0) - 1  # this measure's own INFO
            sent = sum(after[c] - before.get(c, 0) for c in after) / seconds
            scripts = (after.get("evalsha", 0) - before.get("evalsha", 0)) / seconds
            return sent, scripts, cpu, ns, lease
        finally:
            stop.set()
            proc.join(15)
            if proc.is_alive():
                proc.kill()
            stats.close()


async def idle_cpu_pct(pid: int, seconds: float = 3.0) -> float:
    before = cpu_s(pid)
    await asyncio.sleep(seconds)
    return (cpu_s(pid) - before) / seconds * 100


# -- the table ----------------------------------------------------------------------------------


def _med(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


QUICK_SKIPS = "not measured (--quick skips it, or it failed: see above)"
# (measure, was, goal, measured, verdict): PASS, MISS, noise or skip (bench/verdicts.py).
Row = tuple[str, str, str, str, str]


def table(
    budget: Budget,
    *,
    step_sync_hops: float,
    arq_jobs_per_s: float,
    arq_cpu_ms_per_job: float,
    trips_per_call: float,
    quick: bool,
) -> list[Row]:
    """(measure, was, goal, measured, met) for every row of issue 17's table."""
    one = _med(budget.full_jobs_per_s)
    two = _med(budget.two_jobs_per_s)
    full_ratio = one / arq_jobs_per_s
    scale = two / one
    trips = _med(budget.full_trips_per_job)
    growth = _med(budget.late_vs_early)
    embedded = _med(budget.embedded_ms) / _med(budget.inprocess_real_ms)
    cancel = _med(budget.cancel_ms)
    recovery_s = _med(budget.recovery_s)
    cluster = _med(
        [
            c / s
            for s, c in zip(budget.single_node_jobs_per_s, budget.cluster_jobs_per_s, strict=True)
        ]
    )
    busy, renewer, idle = (budget.upkeep_pct + [float("nan")] * 3)[:3]
    return [
        (
            "step latency, 20-step run, sync raw hops",
            "~55",
            "<= 20",
            f"{step_sync_hops:.1f}",
            verdict(step_sync_hops <= 20, timed=True, quick=quick),
        ),
        (
            "full runs, 1 worker, jobs/s vs raw arq",
            "~0.5x",
            ">= 1.0x",
            f"{full_ratio:.2f}x ({one:.0f} vs {arq_jobs_per_s:.0f} jobs/s); worker CPU/job"
            f" {_med(budget.full_cpu_ms_per_job):.2f} vs {arq_cpu_ms_per_job:.2f} ms",
            verdict(full_ratio >= 1.0, timed=True, quick=quick),
        ),
        (
            "full runs, 2 worker processes vs 1",
            "1.36x",
            ">= 1.7x",
            QUICK_SKIPS
            if scale != scale
            else f"{scale:.2f}x; worker CPU/job {_med(budget.full_cpu_ms_per_job):.2f} ms"
            f" (1 worker), {_med(budget.two_cpu_ms_per_job):.2f} ms (2); raw arq"
            f" {arq_cpu_ms_per_job:.2f} ms",
            verdict(scale >= 1.7, timed=True, quick=quick, figure=scale),
        ),
        (
            "Redis round trips per job",
            "~8",
            "<= 3",
            f"{trips:.1f} (full runs, worker side); {trips_per_call:.1f} per fan-out call",
            verdict(trips <= 3, timed=False, quick=quick),
        ),
        (
            "step latency at step 100 vs step 10 (1 KB)",
            "1.73x",
            "<= 1.1x",
            f"{growth:.2f}x",
            verdict(growth <= 1.1, timed=True, quick=quick),
        ),
        (
            "bytes stored per tool-output byte",
            "3.2",
            "<= 1.2",
            f"{budget.bytes_per_output_byte:.2f}",
            verdict(budget.bytes_per_output_byte <= 1.2, timed=False, quick=quick),
        ),
        (
            "embedded step latency vs same process on Redis",
            "2.1x",
            "<= 1.0x",
            f"{embedded:.2f}x ({_med(budget.embedded_ms):.2f} vs"
            f" {_med(budget.inprocess_real_ms):.2f} ms)",
            verdict(embedded <= 1.0, timed=True, quick=quick),
        ),
        (
            "cancel to the running job's cancellation",
            "<= 1 s",
            "<= 50 ms",
            f"{cancel:.1f} ms",
            verdict(cancel <= 50, timed=True, quick=quick),
        ),
        (
            "recovery after SIGKILL mid-call",
            "~10 s",
            "<= 2 s",
            QUICK_SKIPS
            if recovery_s != recovery_s
            else f"{recovery_s:.2f} s (median of {len(budget.recovery_s)}); 1,000 calls in flight:"
            f" worker {busy:.2f}% of a core (renewer thread {renewer:.2f}%; idle before its"
            f" first claim, holding the upkeep turn: {idle:.2f}%)",
            verdict(recovery_s <= 2 and busy <= 1, timed=True, quick=quick, figure=recovery_s),
        ),
        (
            "full runs on a 3-primary cluster vs one node",
            "CROSSSLOT",
            "(report)",
            QUICK_SKIPS
            if cluster != cluster
            else f"{cluster:.2f}x ({_med(budget.cluster_jobs_per_s):.0f} vs"
            f" {_med(budget.single_node_jobs_per_s):.0f} jobs/s, 1 worker)",
            verdict(True, timed=True, quick=quick, figure=cluster),  # measured: it runs
        ),
        (
            "idle worker CPU",
            "(report)",
            "< 1% core",
            f"{budget.idle_cpu_pct:.2f}% (the bench's worker after its runs, the only agentq"
            " worker on its Redis: it holds the upkeep turn)",
            verdict(budget.idle_cpu_pct < 1, timed=True, quick=quick),
        ),
    ]


def print_table(rows: list[Row]) -> None:
    width = max(len(r[0]) for r in rows)
    print()
    print("issue 17, the hop budget (baselines measured in this run)")
    print(f"{'measure':{width}}  {'was':>8}  {'goal':>9}  {'':4}  measured")
    print("-" * (width + 100))
    for name, was, goal, measured, met in rows:
        print(f"{name:{width}}  {was:>8}  {goal:>9}  {met:5}  {measured}")


# -- cancel and recovery, each in a process and on a Redis of its own -------------------------


async def _cancel_alone(url: str, runs: int) -> list[float]:
    from core_bench import noop

    runtime = WorkerRuntime(url, executors=[FunctionExecutor([noop, *BENCH_TOOLS])])
    await runtime.start()
    try:
        async with Client(url) as client:
            return [await cancel_latency(client, url) for _ in range(runs)]
    finally:
        await runtime.stop()


def measure_alone(what: str, timeout_s: float) -> list[float]:
    """Run `python bench/hop_budget.py WHAT` (its own Redis, its own workers): the figures
    it prints, or nan when it does not finish in time."""
    import subprocess
    import sys

    try:
        done = subprocess.run(
            [sys.executable, __file__, what],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=True,
        )
    except (subprocess.TimeoutExpired, subprocess.CalledProcessError) as exc:
        print(f"  {what}: no figure ({type(exc).__name__})", flush=True)
        return [float("nan")]
    return [float(v) for v in done.stdout.split()]


def _figures(what: str, times: int) -> list[float]:
    """One row's figures, each measure on a Redis (and workers) of its own."""
    import multiprocessing as mp

    from core_bench import redis_server

    ctx = mp.get_context("spawn")
    if what == "recovery":
        return [asyncio.run(recovery(ctx)) for _ in range(times)]
    if what == "upkeep":
        return list(asyncio.run(upkeep(ctx)))
    if what == "idle":
        return list(asyncio.run(idle(ctx)))
    if what == "embedded":
        return asyncio.run(embedded_alone(times))
    with redis_server() as url:
        os.environ[URL_ENV] = url
        return asyncio.run(_cancel_alone(url, times))


def main(argv: list[str]) -> None:
    import argparse

    parser = argparse.ArgumentParser(
        description="The hop budget's rows that need a Redis and workers of their own: cancel"
        " latency (ms), recovery after SIGKILL (s), the upkeep of 1,000 calls in flight"
        " (worker %, renewer %, idle % of a core), an idle worker's Redis commands and CPU, the"
        " embedded Redis against a real one from the"
        " same process (step and CPU per step, ms). The whole table: core_bench.py."
    )
    parser.add_argument(
        "what",
        nargs="?",
        choices=ROWS,
        help="one row, its bare figures on one line (what core_bench.py reads); default: all,"
        " labelled",
    )
    parser.add_argument("--quick", action="store_true", help="one cancel and one kill, no upkeep")
    args = parser.parse_args(argv)
    if args.what:
        times = {"cancel": 3, "embedded": EMBEDDED_RUNS}.get(args.what, RECOVERY_KILLS)
        figures = _figures(args.what, times)
        print(" ".join(repr(v) for v in figures))
        if args.what == "embedded" and len(figures) == 5:
            print("\n".join(embedded_ratios(figures)))
        return
    rows = {"cancel": 1, "recovery": 1} if args.quick else {"cancel": 3, "recovery": RECOVERY_KILLS}
    if not args.quick:
        rows["upkeep"] = 1
        rows["idle"] = 1
        rows["embedded"] = EMBEDDED_RUNS
    for what, times in rows.items():
        figures = _figures(what, times)
        print(f"{what} ({ROWS[what]}): {', '.join(f'{v:.2f}' for v in figures)}", flush=True)
        if what == "embedded" and len(figures) == 5:
            print("\n".join(f"  {line}" for line in embedded_ratios(figures)), flush=True)


ROWS = {
    "cancel": "ms until the running tool sees it",
    "recovery": "s from SIGKILL to the call running again",
    "upkeep": "% of a core: worker, its renewer thread, idle (before its first claim, holding"
    " the upkeep turn)",
    "idle": "an idle worker after 3 runs, holding the upkeep turn: Redis commands/s (in its"
    " scripts too), scripts/s, % of a core (clock ticks; scheduler ns; its renewer thread's)",
    "embedded": "ms: step and CPU per step in one process, embedded Redis then a real one,"
    " then that redis-server's own CPU per step",
}


if __name__ == "__main__":
    import sys

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    main(sys.argv[1:])
