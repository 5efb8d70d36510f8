"""SSE overhead of `agentq serve`: events/s one process streams to many clients, and the
latency it adds between an event's append and a client's receipt, against the raw Redis
hop (XADD -> XREAD BLOCK) measured in the same run.

    python bench/serve_bench.py [--clients 100] [--events 2000] [--samples 200] [--quick]

Starts its own redis-server and one `agentq serve` process (no workers: the bench
appends events to a run itself, through the store's `emit` transition, the path a
worker's events take). Then:

1. throughput: CLIENTS SSE clients follow one run while EVENTS events are appended
   as fast as the store takes them (batches of 20); events/s = CLIENTS x EVENTS /
   (first append -> last client done);
2. latency: CLIENTS clients follow a run while SAMPLES events are appended 20 ms
   apart; each client notes receipt time - the event's `at` (set at append);
3. the raw hop: one XREAD BLOCK reader, one XADD writer, SAMPLES events 20 ms apart,
   receipt - append, on the same redis-server.

The clients run in this process (asyncio + httpx), on the same 2 cores as the server
and Redis; figures are for one machine at one moment, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path

_REPO = Path(__file__).resolve().parent.parent
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

import httpx  # noqa: E402
import redis.asyncio as aioredis  # noqa: E402

from agentq.orchestrator.client import Client  # noqa: E402
from agentq.orchestrator.core.events import event_json  # noqa: E402
from tests.support.infra import RedisServer  # noqa: E402
from tests.support.serve import ServeProcess  # noqa: E402

SPEC = {"model": {"provider": "scripted", "script": [{"text": "x"}]}, "prompt": "bench"}


def cpu_s(pid: int) -> float:
    """User + system CPU seconds a process has used (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


async def follow(
    http: httpx.AsyncClient, url: str, latencies: list[float] | None, ready: list[int]
) -> int:
    """Read one SSE stream to its end; count events, note latencies when asked. The first
    event (the run's start, read on joining) marks the stream as following."""
    count = 0
    async with http.stream("GET", url) as response:
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                count += 1
                if count == 1:
                    ready.append(1)
                elif latencies is not None:
                    received = time.time()
                    latencies.append(received - json.loads(line[6:])["at"])
    return count


async def connected(ready: list[int], n: int) -> None:
    deadline = time.monotonic() + 120
    while len(ready) < n:
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {len(ready)} of {n} streams connected")
        await asyncio.sleep(0.05)


async def throughput(serve: ServeProcess, client: Client, clients: int, events: int) -> float:
    run_id = await client.runs.submit(SPEC)
    url = f"{serve.url}/v1/runs/{run_id}/events"
    limits = httpx.Limits(max_connections=clients + 10)
    async with httpx.AsyncClient(timeout=300, limits=limits) as http:
        ready: list[int] = []
        readers = [asyncio.create_task(follow(http, url, None, ready)) for _ in range(clients)]
        await connected(ready, clients)
        started = time.perf_counter()
        for first in range(0, events, 20):
            batch = [
                event_json(
                    "tool-progress", run_id, step=0, tool_call_id="c", tool_name="noop", output=n
                )
                for n in range(first, min(first + 20, events))
            ]
            await client.runs.store.emit(run_id, batch)
        await client.runs.cancel(run_id, reason="bench over")
        counts = await asyncio.gather(*readers)
        elapsed = time.perf_counter() - started
    assert all(c == events + 2 for c in counts), counts[:5]  # + start and abort
    return sum(counts) / elapsed


async def latency(serve: ServeProcess, client: Client, clients: int, samples: int) -> list[float]:
    run_id = await client.runs.submit(SPEC)
    url = f"{serve.url}/v1/runs/{run_id}/events"
    found: list[float] = []
    limits = httpx.Limits(max_connections=clients + 10)
    async with httpx.AsyncClient(timeout=300, limits=limits) as http:
        ready: list[int] = []
        readers = [asyncio.create_task(follow(http, url, found, ready)) for _ in range(clients)]
        await connected(ready, clients)
        for n in range(samples):
            await client.runs.store.emit(
                run_id,
                [
                    event_json(
                        "tool-progress",
                        run_id,
                        step=0,
                        tool_call_id="c",
                        tool_name="noop",
                        output=n,
                    )
                ],
            )
            await asyncio.sleep(0.02)
        await client.runs.cancel(run_id, reason="bench over")
        await asyncio.gather(*readers)
    return found


async def raw_hop(url: str, samples: int) -> list[float]:
    writer, reader = aioredis.from_url(url), aioredis.from_url(url)
    found: list[float] = []
    key = f"bench:raw:{time.time_ns()}"

    async def read() -> None:
        last = "0-0"
        while len(found) < samples:
            reply = await reader.xread({key: last}, count=100, block=5000)
            for _, entries in reply:
                for entry_id, fields in entries:
                    found.append(time.time() - float(fields[b"at"]))
                    last = entry_id

    task = asyncio.create_task(read())
    await asyncio.sleep(0.2)
    for _ in range(samples):
        await writer.xadd(key, {"at": repr(time.time())})
        await asyncio.sleep(0.02)
    await task
    await writer.aclose()
    await reader.aclose()
    return found


async def main(args: argparse.Namespace) -> None:
    redis_server = RedisServer()
    serve = ServeProcess(
        redis_server.url,
        env={
            "AGENTQ_SERVE_EVENTS_PER_SECOND": "1000000000",
            "AGENTQ_SUBMITS_PER_MINUTE": "1000000",
        },
    )
    try:
        async with Client(redis_server.url) as client:
            raw = await raw_hop(redis_server.url, args.samples)
            serve_cpu, own_cpu, wall = cpu_s(serve.proc.pid), time.process_time(), time.time()
            rate = await throughput(serve, client, args.clients, args.events)
            wall = time.time() - wall
            serve_cpu = cpu_s(serve.proc.pid) - serve_cpu
            own_cpu = time.process_time() - own_cpu
            served = await latency(serve, client, args.clients, args.samples)
            raw_after = await raw_hop(redis_server.url, args.samples)
    finally:
        serve.stop()
        redis_server.stop()
    raw_all = raw + raw_after
    ms = 1000.0
    print(
        f"clients: {args.clients}; events appended: {args.events} (throughput), "
        f"{args.samples} (latency)"
    )
    print(f"throughput: {rate:,.0f} events/s delivered by one agentq serve process")
    print(
        f"  CPU while streaming ({wall:.1f} s wall): agentq serve {serve_cpu:.1f} s, "
        f"the {args.clients} clients (this process) {own_cpu:.1f} s"
    )
    print(
        f"raw Redis hop (XADD -> XREAD BLOCK): p50 {pct(raw_all, 0.5) * ms:.2f} ms, "
        f"p99 {pct(raw_all, 0.99) * ms:.2f} ms"
    )
    print(
        f"append -> SSE client ({args.clients} clients): p50 {pct(served, 0.5) * ms:.2f} ms, "
        f"p99 {pct(served, 0.99) * ms:.2f} ms, mean {statistics.mean(served) * ms:.2f} ms"
    )
    print(f"added by agentq serve: p50 {(pct(served, 0.5) - pct(raw_all, 0.5)) * ms:.2f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="10 clients, 200 events, 20 samples")
    args = parser.parse_args()
    if args.quick:
        args.clients, args.events, args.samples = 10, 200, 20
    asyncio.run(main(args))
