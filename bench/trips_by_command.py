"""The worker's Redis round trips per job, by command: what issue 17's "round trips per
job" row is made of.

    python bench/trips_by_command.py [RUNS] [--profile] [--workers N]

Starts its own redis-server and one agentq worker process (as `core_bench.py` does),
submits RUNS full runs (2 model steps + 2 parallel no-op calls, 4 jobs each) at once
after a warm-up, and prints the round trips the worker sent per job, by command: a
command sent alone is named by itself (EVALSHA by its script's name), a pipeline by
the commands in it. `--workers N` runs N worker processes and sums their round trips
(how claims behave when workers compete). `--profile` also cProfiles the (first) worker
during those runs only and prints where its CPU goes (by own time, and cumulative).
"""

from __future__ import annotations

import asyncio
import collections
import cProfile
import hashlib
import io
import json
import multiprocessing as mp
import os
import pstats
import sys
import tempfile
from multiprocessing.synchronize import Event as MpEvent
from pathlib import Path
from typing import Any

_REPO = Path(__file__).resolve().parent.parent
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

import core_bench  # noqa: E402
import hop_budget  # noqa: E402

from agentq.orchestrator.client import Client  # noqa: E402


def _script_names() -> dict[str, str]:
    """sha1 -> name of every Lua script the worker may send."""
    import agentq.workers.queue.liveness as liveness
    from agentq.orchestrator.runs import store

    sources: dict[str, str] = {f"lua:{k}": v for k, v in store._SCRIPTS.items()}
    sources.update(
        {
            "REAP_GATE": liveness.REAP_GATE,
            "REAP_PARTITION": liveness.REAP_PARTITION,
            "RENEW": liveness.RENEW,
        }
    )
    try:  # the claim scripts (absent before workers/queue/claims.py)
        from agentq.workers.queue import claims

        sources.update({"TAKE": claims.TAKE, "CLAIM_ONE": claims.CLAIM_ONE})
    except ImportError:
        from agentq.workers.worker import runtime

        for name in ("_CLAIM", "_FINISH"):
            if hasattr(runtime, name):
                sources[name.strip("_")] = getattr(runtime, name)
    return {hashlib.sha1(src.encode()).hexdigest(): name for name, src in sources.items()}


def _commands(packed: bytes, scripts: dict[str, str]) -> list[str]:
    """The command names in a packed request (RESP arrays of bulk strings)."""
    names: list[str] = []
    pos = 0
    while pos < len(packed) and packed[pos : pos + 1] == b"*":
        end = packed.index(b"\r\n", pos)
        count = int(packed[pos + 1 : end])
        pos = end + 2
        args: list[bytes] = []
        for _ in range(count):
            end = packed.index(b"\r\n", pos)
            size = int(packed[pos + 1 : end])
            args.append(packed[end + 2 : end + 2 + size])
            pos = end + 2 + size + 2
        name = args[0].decode().upper()
        if name == "EVALSHA":
            name = scripts.get(args[1].decode(), "EVALSHA?")
        names.append(name)
    return names


def _tally(counts: dict[str, int], scripts: dict[str, str]) -> None:
    from redis.asyncio.connection import AbstractConnection

    original = AbstractConnection.send_packed_command

    async def counted(self: AbstractConnection, command: Any, check_health: bool = True) -> None:
        packed = command if isinstance(command, bytes | bytearray) else b"".join(command)
        names = [n for n in _commands(bytes(packed), scripts) if n not in ("MULTI", "EXEC")]
        label = names[0] if len(names) == 1 else "pipeline(" + "+".join(names) + ")"
        counts[label] += 1
        await original(self, command, check_health)

    setattr(AbstractConnection, "send_packed_command", counted)  # noqa: B010


def _worker(
    url: str, ready: MpEvent, reset: MpEvent, dump: MpEvent, out: str, profile: bool
) -> None:
    counts: dict[str, int] = collections.Counter()
    _tally(counts, _script_names())
    profiler = cProfile.Profile()

    async def main() -> None:
        runtime = core_bench.WorkerRuntime(
            url,
            executors=[core_bench.FunctionExecutor([core_bench.noop])],
            queues=[core_bench.MODEL_QUEUE, core_bench.TOOLS_QUEUE],
            freeze_startup_heap=True,  # as `agentq worker` does
        )
        await runtime.start()
        ready.set()
        await asyncio.to_thread(reset.wait)
        counts.clear()
        if profile:
            profiler.enable()
        await asyncio.to_thread(dump.wait)
        if profile:
            profiler.disable()
            profiler.dump_stats(out + ".prof")
        await asyncio.to_thread(Path(out).write_text, json.dumps(counts))
        await runtime.stop()

    asyncio.run(main())


async def _measure(url: str, runs: int, reset: MpEvent, dump: MpEvent, outs: list[str]) -> None:
    async with Client(url) as client:
        warm = await asyncio.gather(
            *(client.runs.submit(hop_budget.full_run_spec()) for _ in range(20))
        )
        await hop_budget.wait_all(client, list(warm))
        await asyncio.sleep(1.5)  # the idle worker's polls settle
        reset.set()
        await asyncio.sleep(0.2)
        run_ids = await asyncio.gather(
            *(client.runs.submit(hop_budget.full_run_spec()) for _ in range(runs))
        )
        await hop_budget.wait_all(client, list(run_ids))
        dump.set()
        for _ in range(200):
            if all([await asyncio.to_thread(_written, out) for out in outs]):
                return
            await asyncio.sleep(0.05)


def _written(path: str) -> bool:
    return os.path.exists(path) and os.path.getsize(path) > 0


def main(argv: list[str]) -> int:
    profile = "--profile" in argv
    argv = [a for a in argv if a != "--profile"]
    workers = 1
    if "--workers" in argv:
        at = argv.index("--workers")
        workers = int(argv[at + 1])
        del argv[at : at + 2]
    runs = int(argv[0]) if argv else 250
    ctx = mp.get_context("spawn")
    tmp = tempfile.mkdtemp(prefix="agentq-trips-")
    outs = [os.path.join(tmp, f"counts-{i}.json") for i in range(workers)]
    with core_bench.redis_server() as url:
        reset, dump = ctx.Event(), ctx.Event()
        procs = []
        for i, out in enumerate(outs):
            ready = ctx.Event()
            proc = ctx.Process(
                target=_worker, args=(url, ready, reset, dump, out, profile and i == 0), daemon=True
            )
            proc.start()
            procs.append(proc)
            if not ready.wait(30):
                raise RuntimeError("a worker did not start")
        try:
            asyncio.run(_measure(url, runs, reset, dump, outs))
        finally:
            for proc in procs:
                proc.join(timeout=20)
                if proc.is_alive():
                    proc.terminate()
    counts: dict[str, int] = collections.Counter()
    for out in outs:
        counts.update(json.loads(Path(out).read_text()))
    out = outs[0]
    jobs = runs * hop_budget.FULL_RUN_JOBS
    total = sum(counts.values())
    print(
        f"{runs} full runs ({jobs} jobs) on {workers} worker process(es);"
        f" load average {os.getloadavg()[0]:.1f}"
    )
    print(f"worker round trips per job: {total / jobs:.2f}")
    for label, n in sorted(counts.items(), key=lambda kv: -kv[1]):
        print(f"  {n / jobs:6.2f}  {label}")
    if profile:
        for order in ("tottime", "cumulative"):
            text = io.StringIO()
            stats = pstats.Stats(out + ".prof", stream=text)
            stats.sort_stats(order).print_stats(25)
            print(f"\nworker profile during the runs, by {order}:")
            print(text.getvalue())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
