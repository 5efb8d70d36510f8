"""What submitting costs the client: its process CPU per run for N submits one by one
(`client.runs.submit` in a loop) against the same N through `client.runs.submit_many`
(every spec checked first, the deployment read once, the creations pipelined), measured
alternately in one run on one throwaway redis-server.

    python bench/submit_bench.py [--runs 1000] [--rounds 3] [--quick]

No worker runs: the runs stay queued, so the figures are the client's and Redis's alone.
Prints each round's client CPU ms per run for both, the medians, their ratio, Redis's own
CPU per run (INFO's used_cpu_sys + used_cpu_user) and the goal: <= 0.3 ms per run
through submit_many (issue 31).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
for path in (_HERE, _HERE.parent):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import redis  # noqa: E402
from core_bench import redis_server  # noqa: E402
from verdicts import verdict  # noqa: E402

from agentq.orchestrator.client import Client  # noqa: E402

GOAL_MS = 0.3
SPEC: dict[str, Any] = {
    "model": {"provider": "scripted", "script": [{"text": "done"}]},
    "prompt": "benchmark: a submit",
}


def redis_cpu_s(url: str) -> float:
    info = redis.Redis.from_url(url).info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


async def one_by_one(client: Client, runs: int) -> None:
    for _ in range(runs):
        await client.runs.submit(SPEC)


async def many(client: Client, runs: int) -> None:
    await client.runs.submit_many([SPEC] * runs)


async def cpu_ms_per_run(
    url: str, client: Client, how: Callable[[Client, int], Awaitable[None]], runs: int
) -> tuple[float, float, float]:
    """(client CPU ms per run, Redis CPU ms per run, wall ms per run)."""
    redis0, cpu0, wall0 = redis_cpu_s(url), time.process_time(), time.perf_counter()
    await how(client, runs)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    return cpu * 1000 / runs, (redis_cpu_s(url) - redis0) * 1000 / runs, wall * 1000 / runs


async def measure(url: str, runs: int, rounds: int) -> dict[str, list[tuple[float, float, float]]]:
    figures: dict[str, list[tuple[float, float, float]]] = {"submit": [], "submit_many": []}
    async with Client(url) as client:
        await one_by_one(client, 50)  # warm: connections, scripts, the endpoint policy
        await many(client, 50)
        for _ in range(rounds):  # alternating, so the machine's noise falls on both
            figures["submit"].append(await cpu_ms_per_run(url, client, one_by_one, runs))
            figures["submit_many"].append(await cpu_ms_per_run(url, client, many, runs))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1000, help="submits per measure")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of both ways")
    parser.add_argument("--quick", action="store_true", help="200 runs, 1 round")
    args = parser.parse_args()
    runs, rounds = (200, 1) if args.quick else (args.runs, args.rounds)
    with redis_server() as url:
        figures = asyncio.run(measure(url, runs, rounds))
    med = {
        how: [statistics.median(f[k] for f in rows) for k in range(3)]
        for how, rows in figures.items()
    }
    print(f"{runs} submits per measure, {rounds} round(s), alternating; no worker")
    for how, rows in figures.items():
        each = ", ".join(f"{row[0]:.3f}" for row in rows)
        client_ms, redis_ms, wall_ms = med[how]
        print(
            f"{how:12} client CPU {client_ms:.3f} ms/run (rounds: {each}); Redis CPU"
            f" {redis_ms:.3f} ms/run; wall {wall_ms:.3f} ms/run"
        )
    ratio = med["submit_many"][0] / med["submit"][0]
    mark = verdict(med["submit_many"][0] <= GOAL_MS, timed=True, quick=args.quick)
    print(
        f"submit_many / submit, client CPU: {ratio:.2f}x; submit_many"
        f" {med['submit_many'][0]:.3f} ms/run, goal <= {GOAL_MS} ms: {mark}"
    )


if __name__ == "__main__":
    main()
