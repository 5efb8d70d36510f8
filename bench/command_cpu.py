"""A Redis command's CPU in the caller's process: on a connection agentq's `connect`
made (orchestrator/redis/lean.py) against redis-py's own asyncio client, measured
alternately in one run on one redis-server.

    python bench/command_cpu.py [--quick]

Times N sequential GETs and N two-command pipelines (process CPU, not wall time: the
machine is shared) on each client, a round of each client in turn, and prints the
median CPU per command or pipeline and agentq's ratio to redis-py's. A worker sends a
few such round trips per job, so this is the share of a job's CPU that is per round
trip. Runs against whatever `agentq` PYTHONPATH names, so the same script measures an
older tree.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis

sys.path.insert(0, str(Path(__file__).parent))

from core_bench import redis_server

from agentq.orchestrator.redis.connect import connect


async def _cpu_us(n: int, command: Callable[[], Awaitable[Any]]) -> float:
    for _ in range(min(n, 200)):  # warm: connected, caches filled
        await command()
    started = time.process_time()
    for _ in range(n):
        await command()
    return (time.process_time() - started) / n * 1e6


async def _round(client: Any, n: int) -> tuple[float, float]:
    async def get() -> Any:
        return await client.get("k")

    async def pipeline() -> Any:
        async with client.pipeline(transaction=False) as pipe:
            pipe.get("k")
            pipe.exists("k")
            return await pipe.execute()

    return await _cpu_us(n, get), await _cpu_us(n // 2, pipeline)


async def measure(url: str, n: int, rounds: int) -> dict[str, list[tuple[float, float]]]:
    clients = {"agentq": connect(url), "redis-py": aioredis.Redis.from_url(url)}
    await clients["agentq"].set("k", "v")
    figures: dict[str, list[tuple[float, float]]] = {name: [] for name in clients}
    try:
        for _ in range(rounds):
            for name, client in clients.items():
                figures[name].append(await _round(client, n))
    finally:
        for client in clients.values():
            await client.aclose()
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="a smoke run: few commands")
    args = parser.parse_args(argv)
    n, rounds = (500, 1) if args.quick else (4_000, 15)
    with redis_server() as url:
        print(f"redis-server at {url}; load average {os.getloadavg()[0]:.1f}", flush=True)
        figures = asyncio.run(measure(url, n, rounds))
    med = {
        name: (statistics.median(g for g, _ in f), statistics.median(p for _, p in f))
        for name, f in figures.items()
    }
    print(f"{'client':10} {'GET, CPU us':>12} {'2-command pipeline, CPU us':>28}")
    for name, (get, pipe) in med.items():
        print(f"{name:10} {get:12.1f} {pipe:28.1f}")
    get_ratio = med["agentq"][0] / med["redis-py"][0]
    pipe_ratio = med["agentq"][1] / med["redis-py"][1]
    print(f"agentq / redis-py: GET {get_ratio:.2f}x, pipeline {pipe_ratio:.2f}x ({rounds} rounds)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
