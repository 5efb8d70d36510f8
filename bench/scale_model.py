"""Issue 31's scale model: how far one Redis primary, and a Cluster of them, carries a
fleet larger than this machine.

    python bench/scale_model.py [--claimers 1,4,16,64] [--processes 4] [--jobs 100]
                                [--no-cluster] [--run-cpu-ms MS] [--quick]

N simulated workers (asyncio claimers spread over a few processes, one slot each, one
taker per partition as a real worker has) drain N x JOBS no-op model jobs through the
real claim (`claims.TAKE`: each call ends the claimer's last job and claims the next),
first against one redis-server, then against a local 3-primary Redis Cluster (16
partitions). For each N it prints, per topology: jobs/s, Redis CPU per job (user + sys of
every node, from INFO cpu, over the drain) and the claim contention: TAKE calls per job
(1.0 when no claim comes back empty-handed while work is left).

A job's claim and end are one of the several Redis round trips a run costs; the closing
note's projection of runs/s per primary divides one Redis core by the whole run's Redis
CPU (`trips_by_command.py` measures it), and this program says whether that per-job cost
stays flat as N grows to 64 and as the primaries are added. Given that figure
(`--run-cpu-ms`), it closes with the projection: one primary's core carries
1 / (Redis CPU per run) runs/s, and a Cluster of P primaries P times that, each run
charged the Cluster's extra claim cost measured here (its Redis CPU per job over one
node's, at the last N, times the run's 4 jobs). A projection, not a measurement.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import sys
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Event as MpEvent
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from cluster_bench import cluster_server  # noqa: E402
from core_bench import redis_server  # noqa: E402

from agentq.orchestrator.core import fairness, keys  # noqa: E402
from agentq.orchestrator.core.envelopes import MODEL_QUEUE, JobEnvelope  # noqa: E402
from agentq.orchestrator.core.jobs import queued_job  # noqa: E402
from agentq.orchestrator.core.settings import Settings  # noqa: E402
from agentq.orchestrator.machine import scripts  # noqa: E402
from agentq.orchestrator.redis.connect import check_partitions, connect  # noqa: E402
from agentq.orchestrator.runs.state import lua_constants  # noqa: E402
from agentq.workers.queue import claims  # noqa: E402
from agentq.workers.queue.liveness import liveness_key  # noqa: E402

# The real enqueue (machine/lua/enqueue.lua), alone: a job into its queue and lane.
ENQUEUE = scripts.expand(
    lua_constants.render() + "-- @include enqueue\nreturn enqueue(cjson.decode(ARGV[1]))\n"
)


@dataclass
class Drain:
    jobs: int
    takes: int
    seconds: float
    redis_cpu_s: float

    def line(self, topology: str, claimers: int) -> str:
        return (
            f"{topology:8} claimers={claimers:3d} jobs={self.jobs:6d} "
            f"jobs_per_s={self.jobs / self.seconds:8.0f} "
            f"redis_cpu_us_per_job={self.redis_cpu_s / self.jobs * 1e6:6.1f} "
            f"takes_per_job={self.takes / self.jobs:5.2f}"
        )


async def _enqueue(url: str, jobs: int) -> None:
    """`jobs` model jobs of as many runs, spread over the partitions by their run ids."""
    redis = connect(url, Settings())
    try:
        await check_partitions(redis)
        script = redis.register_script(ENQUEUE)

        async def one(i: int) -> None:
            run_id = f"s{i}"
            await redis.hset(  # type: ignore[misc]
                keys.meta(run_id),
                mapping={
                    fairness.TENANT_FIELD: "t",
                    fairness.WEIGHT_FIELD: 1,
                    fairness.RANK_FIELD: 0,
                },
            )
            job = queued_job(JobEnvelope(kind="model_step", run_id=run_id, step=0))
            # The key routes the script to the run's slot on a cluster; the script
            # names its own keys, all in that slot.
            await script(keys=[keys.meta(run_id)], args=[job.model_dump_json()])

        for start in range(0, jobs, 256):
            await asyncio.gather(*(one(i) for i in range(start, min(jobs, start + 256))))
    finally:
        await redis.aclose()


async def _claimers(url: str, count: int, first: int, go: MpEvent, out: Queue[Any]) -> None:
    redis = connect(url, Settings())
    await check_partitions(redis)
    partitions = list(keys.partitions())
    takes = jobs = 0

    async def claimer(n: int) -> None:
        nonlocal takes, jobs
        worker_id = f"sim-{first + n}"
        await redis.set(liveness_key(worker_id), worker_id)
        takers = [claims.Taker(redis, worker_id, MODEL_QUEUE, p, 600_000) for p in partitions]
        ended: dict[int, str] = {}
        empty_in_a_row = 0
        turn = n
        while empty_in_a_row < len(takers):
            taker = takers[turn % len(takers)]
            turn += 1
            _, got = await taker.take(taker.args(1, ended.pop(taker.partition, "")))
            takes += 1
            if got:
                jobs += 1
                ended[taker.partition] = got[0].job_id
                empty_in_a_row = 0
            else:
                empty_in_a_row += 1
        for partition, job_id in ended.items():  # the last jobs end too
            last = takers[partitions.index(partition)]
            await last.take(last.args(0, job_id))

    out.put("ready")
    await asyncio.to_thread(go.wait)
    await asyncio.gather(*(claimer(n) for n in range(count)))
    await redis.aclose()
    out.put((jobs, takes))


def _child(url: str, count: int, first: int, go: MpEvent, out: Queue[Any]) -> None:
    asyncio.run(_claimers(url, count, first, go, out))


def _redis_cpu_s(url: str) -> float:
    """User + sys CPU seconds of every node of the deployment at `url`."""
    import redis as sync_redis

    if url.startswith("redis+cluster://"):
        nodes = [f"redis://{hostport}" for hostport in url.split("://", 1)[1].split(",")]
    else:
        nodes = [url]
    total = 0.0
    for node in nodes:
        client = sync_redis.Redis.from_url(node)
        cpu: Any = client.info("cpu")
        total += float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])
        client.close()
    return total


def drain(url: str, claimers: int, processes: int, jobs_each: int) -> Drain:
    asyncio.run(_enqueue(url, claimers * jobs_each))
    ctx = mp.get_context("spawn")
    go = ctx.Event()
    out: Queue[Any] = ctx.Queue()
    procs = min(processes, claimers)
    shares = [claimers // procs + (1 if i < claimers % procs else 0) for i in range(procs)]
    children = [
        ctx.Process(target=_child, args=(url, share, sum(shares[:i]), go, out), daemon=True)
        for i, share in enumerate(shares)
    ]
    for child in children:
        child.start()
    for _ in children:  # they import and connect before the clock starts
        assert out.get(timeout=120) == "ready"
    cpu_before = _redis_cpu_s(url)
    start = time.perf_counter()
    go.set()
    results = [out.get(timeout=600) for _ in children]
    seconds = time.perf_counter() - start
    cpu = _redis_cpu_s(url) - cpu_before
    for child in children:
        child.join(timeout=30)
    return Drain(
        jobs=sum(r[0] for r in results),
        takes=sum(r[1] for r in results),
        seconds=seconds,
        redis_cpu_s=cpu,
    )


RUN_JOBS = 4  # a full run's jobs: 2 model steps + 2 tool calls (trips_by_command.py)
PRIMARIES = (1, 3, 6, 12)


def projection(run_cpu_ms: float, single: Drain, cluster: Drain | None) -> list[str]:
    """Runs/s per Redis primary and per Cluster, from Redis CPU per run and the claim's
    cost per job on one node and on the Cluster at the same N."""
    extra_ms = 0.0
    if cluster is not None:
        per_job_s = cluster.redis_cpu_s / cluster.jobs - single.redis_cpu_s / single.jobs
        extra_ms = max(0.0, per_job_s) * 1000 * RUN_JOBS
    cost = (
        "no Cluster measured: its extra claim cost is left out"
        if cluster is None
        else f"{run_cpu_ms + extra_ms:.2f} ms on a Cluster, whose claims cost {extra_ms:.2f} ms"
        " more per run"
    )
    lines = [
        f"projection (not a measurement): Redis CPU per run {run_cpu_ms:.2f} ms on one"
        f" primary; {cost}"
    ]
    for primaries in PRIMARIES:
        cost_ms = run_cpu_ms if primaries == 1 else run_cpu_ms + extra_ms
        lines.append(f"  {primaries:2d} primaries: {primaries * 1000 / cost_ms:8.0f} runs/s")
    return lines


def topologies(cluster: bool) -> Iterator[tuple[str, AbstractContextManager[str]]]:
    yield "single", redis_server()
    if cluster:
        yield "cluster3", cluster_server()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--claimers", default="1,4,16,64", help="N values, comma-separated")
    parser.add_argument("--processes", type=int, default=4, help="processes sharing the claimers")
    parser.add_argument("--jobs", type=int, default=100, help="jobs per claimer")
    parser.add_argument("--no-cluster", action="store_true", help="one redis-server only")
    parser.add_argument(
        "--run-cpu-ms",
        type=float,
        help="Redis CPU per full run (ms; `trips_by_command.py` prints it): close with the"
        " projected runs/s per primary and per Cluster of 3, 6, 12 primaries",
    )
    parser.add_argument("--quick", action="store_true", help="N = 1, 8; 20 jobs each; no cluster")
    args = parser.parse_args()
    counts = [int(n) for n in args.claimers.split(",")]
    jobs_each, cluster = args.jobs, not args.no_cluster
    if args.quick:
        counts, jobs_each, cluster = [1, 8], 20, False
    last: dict[str, Drain] = {}  # each topology's drain at the last N
    for topology, server in topologies(cluster):
        with server as url:
            for n in counts:
                last[topology] = drain(url, n, args.processes, jobs_each)
                print(last[topology].line(topology, n), flush=True)
    if args.run_cpu_ms is not None:
        print("\n".join(projection(args.run_cpu_ms, last["single"], last.get("cluster3"))))


if __name__ == "__main__":
    main()
