"""A command's CPU in the caller's process: on a connection agentq's `connect` made
(orchestrator/redis/lean.py, lean_client.py) against redis-py's own asyncio client, and
against a floor, measured alternately in one run on one redis-server.

    python bench/command_cpu.py [--quick]

Times N sequential round trips of each kind (process CPU, not wall time: the machine is
shared) on each client, a round of each client in turn, and prints the median CPU per
round trip and agentq's ratio to redis-py's and to the floor. The kinds: a GET; a
two-command pipeline; a transition as a store sends it (`acks.acknowledged`: one
EVALSHA of 12 keys and a 600-byte input, on a lone Redis); a job's end as the worker
sends it (`acks.pipeline_to`: the same EVALSHA in a pipeline); and the floor, the same
EVALSHA on a bare asyncio stream packed and parsed by hiredis (no deadline, no pool, no
error handling: what the kernel and the event loop cost alone). A worker sends two or
so round trips per job, so this is the share of a job's CPU that is per round trip.
Runs against whatever `agentq` PYTHONPATH names, so the same script measures an older
tree.
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
from urllib.parse import urlparse

import hiredis
import redis.asyncio as aioredis

sys.path.insert(0, str(Path(__file__).parent))

from core_bench import redis_server

from agentq.orchestrator.redis.acks import acknowledged, pipeline_to
from agentq.orchestrator.redis.connect import connect

SCRIPT = "return ARGV[1]"
KEYS = [f"agentq:{{p0}}:run:0123456789abcdef0123456789:key{i}" for i in range(12)]
ARGS = ['{"input":"' + "a" * 600 + '"}', "86400"]
KINDS = ("GET", "pipeline of 2", "transition EVALSHA", "job's end pipeline")


async def _cpu_us(n: int, command: Callable[[], Awaitable[Any]]) -> float:
    for _ in range(min(n, 200)):  # warm: connected, caches filled
        await command()
    started = time.process_time()
    for _ in range(n):
        await command()
    return (time.process_time() - started) / n * 1e6


def _kinds(client: Any, sha: str) -> list[Callable[[], Awaitable[Any]]]:
    async def get() -> Any:
        return await client.get("k")

    async def pipeline() -> Any:
        async with client.pipeline(transaction=False) as pipe:
            pipe.get("k")
            pipe.exists("k")
            return await pipe.execute()

    async def transition() -> Any:
        return await acknowledged(client, sha, SCRIPT, KEYS, ARGS)

    async def end() -> Any:
        async with pipeline_to(client, KEYS[0]) as (pipe, acks):
            pipe.evalsha(sha, len(KEYS), *KEYS, *ARGS)
            acks.add(pipe, KEYS[0])
            return await pipe.execute(raise_on_error=False)

    return [get, pipeline, transition, end]


async def _floor(url: str, sha: str) -> Callable[[], Awaitable[Any]]:
    where = urlparse(url)
    reader, writer = await asyncio.open_connection(where.hostname, where.port)
    parser = hiredis.Reader()
    packed = hiredis.pack_command(("EVALSHA", sha, len(KEYS), *KEYS, *ARGS))

    async def bare() -> Any:
        writer.write(packed)
        while (reply := parser.gets()) is False:
            parser.feed(await reader.read(65536))
        return reply

    return bare


async def measure(url: str, n: int, rounds: int) -> dict[str, list[list[float]]]:
    clients = {"agentq": connect(url), "redis-py": aioredis.Redis.from_url(url)}
    await clients["agentq"].set("k", "v")
    sha = await clients["agentq"].script_load(SCRIPT)
    kinds = {name: _kinds(client, sha) for name, client in clients.items()}
    floor = await _floor(url, sha)
    figures: dict[str, list[list[float]]] = {name: [] for name in [*clients, "floor"]}
    try:
        for _ in range(rounds):
            for name, commands in kinds.items():
                figures[name].append([await _cpu_us(n, command) for command in commands])
            figures["floor"].append([await _cpu_us(n, floor)])
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
    n, rounds = (500, 1) if args.quick else (2_000, 15)
    with redis_server() as url:
        print(f"redis-server at {url}; load average {os.getloadavg()[0]:.1f}", flush=True)
        figures = asyncio.run(measure(url, n, rounds))
    med = {
        name: [statistics.median(r[i] for r in rows) for i in range(len(rows[0]))]
        for name, rows in figures.items()
    }
    floor = med.pop("floor")[0]
    print("CPU per round trip, us (medians of the rounds):")
    print(f"{'client':10}" + "".join(f"{kind:>22}" for kind in KINDS))
    for name, row in med.items():
        print(f"{name:10}" + "".join(f"{us:22.1f}" for us in row))
    print(f"{'floor':10}{'':>44}{floor:22.1f}  (a bare stream, the same EVALSHA)")
    pairs = zip(KINDS, med["agentq"], med["redis-py"], strict=True)
    ratios = ", ".join(f"{kind} {a / b:.2f}x" for kind, a, b in pairs)
    print(f"agentq / redis-py: {ratios} ({rounds} rounds)")
    print(
        f"agentq / floor: transition {med['agentq'][2] / floor:.2f}x, "
        f"job's end {med['agentq'][3] / floor:.2f}x"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
