"""Issue 26's cluster row: what replica acknowledgement costs a transition on a Redis
Cluster (3 primaries, one replica each, on loopback), and that its per-shard WAIT adds
no client round trip.

    python bench/cluster_acks_bench.py [SUBMITS] [ROUNDS] [--quick]

Alternately with `AGENTQ_REDIS_REPLICA_ACKS=0` and `=1`, submits SUBMITS runs one after
another (each submit is one creation transition) and prints the ms per submit and the
commands written to a socket per submit (a pipeline is one write): equal counts mean
the WAIT rode in the transition's own pipeline.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

# `python bench/cluster_acks_bench.py` puts bench/ on the path; tests/support is one level up.
_REPO = Path(__file__).resolve().parent.parent
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

from redis.asyncio.connection import Connection  # noqa: E402

from agentq.orchestrator.client import Client  # noqa: E402
from agentq.orchestrator.core.settings import Settings  # noqa: E402
from tests.support.redis_cluster import LocalCluster  # noqa: E402
from tests.support.specs import scripted  # noqa: E402

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
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("submits", nargs="?", type=int, default=300, help="submits per measure")
    parser.add_argument("rounds", nargs="?", type=int, default=2, help="rounds of both settings")
    parser.add_argument("--quick", action="store_true", help="50 submits, 1 round")
    args = parser.parse_args()
    submits, rounds = (50, 1) if args.quick else (args.submits, args.rounds)
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
