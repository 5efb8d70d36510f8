"""Issue 26's cluster row: what replica acknowledgement costs a transition on a Redis
Cluster (3 primaries, one replica each, on loopback), and that its per-shard WAIT adds
no client round trip.

    PYTHONPATH=. python bench/cluster_acks_bench.py [SUBMITS] [ROUNDS]

Alternately with `AGENTQ_REDIS_REPLICA_ACKS=0` and `=1`, submits SUBMITS runs one after
another (each submit is one creation transition) and prints the ms per submit and the
commands written to a socket per submit (a pipeline is one write): equal counts mean
the WAIT rode in the transition's own pipeline.
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

from redis.asyncio.connection import Connection

from agentq.orchestrator.client import Client
from agentq.orchestrator.core.settings import Settings
from tests.support.redis_cluster import LocalCluster
from tests.support.specs import scripted

WRITES = 0
_send = Connection.send_packed_command


async def _counting(self: Connection, *args: Any, **kwargs: Any) -> None:
    global WRITES
    WRITES += 1
    await _send(self, *args, **kwargs)


Connection.send_packed_command = _counting  # type: ignore[method-assign]


async def measure(url: str, acks: int, submits: int) -> tuple[float, float]:
    global WRITES
    async with Client(url, settings=Settings(redis_replica_acks=acks)) as client:
        for _ in range(20):  # warm: connections, scripts, the slot map
            await client.runs.submit(scripted({"text": "x"}))
        WRITES = 0
        started = time.perf_counter()
        for _ in range(submits):
            await client.runs.submit(scripted({"text": "x"}))
        elapsed = time.perf_counter() - started
    return elapsed * 1000 / submits, WRITES / submits


def main() -> None:
    submits = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    cluster = LocalCluster(3, replicas=1)
    try:
        for _ in range(rounds):
            for acks in (0, 1):
                ms, writes = asyncio.run(measure(cluster.url, acks, submits))
                print(f"acks={acks}: {ms:.2f} ms/submit, {writes:.2f} socket writes/submit")
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
