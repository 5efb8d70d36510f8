"""Issue 17's cluster row: full-run throughput on a local 3-primary Redis Cluster against
one redis-server, measured in the same run.

    python bench/cluster_bench.py [RUNS] [ROUNDS] [--quick]

Starts both (no persistence, free ports) and, ROUNDS times, alternately on each: one
agentq worker process (`WorkerRuntime` serving model and tools, default settings: 1
partition on the single node, 16 on the cluster) and RUNS full runs (2 model steps + 2
parallel no-op calls) submitted at once through `Client`. Each measure is a process of
its own (the partition count is per process). Prints `single cluster` jobs/s per round,
one line each; `core_bench.py` reads them (`measure()`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing as mp
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator

import redis

HERE = os.path.dirname(os.path.abspath(__file__))
PRIMARIES = 3


@contextlib.contextmanager
def cluster_server() -> Iterator[str]:
    """A throwaway 3-primary cluster (no replicas); yields its `redis+cluster://` URL."""
    from core_bench import _free_port

    exe = shutil.which("redis-server") or "/usr/bin/redis-server"
    cli = shutil.which("redis-cli") or "/usr/bin/redis-cli"
    workdir = tempfile.mkdtemp(prefix="agentq-bench-cluster-")
    ports = [_free_port() for _ in range(PRIMARIES)]
    procs = []
    try:
        for port in ports:
            node_dir = os.path.join(workdir, str(port))
            os.mkdir(node_dir)
            procs.append(
                subprocess.Popen(
                    [
                        *(exe, "--port", str(port), "--bind", "127.0.0.1"),
                        *("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"),
                        *("--cluster-port", str(_free_port())),
                        *("--save", "", "--appendonly", "no", "--dir", node_dir),
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        for port in ports:
            _until(lambda p=port: _answers(p), "a cluster node to start")
        subprocess.run(
            [
                *(cli, "--cluster", "create", *(f"127.0.0.1:{p}" for p in ports)),
                *("--cluster-replicas", "0", "--cluster-yes"),
            ],
            check=True,
            capture_output=True,
            timeout=60,
        )
        for port in ports:
            _until(lambda p=port: _cluster_ok(p), "cluster_state:ok")
        yield "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in ports)
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=10)
        shutil.rmtree(workdir, ignore_errors=True)


def _answers(port: int) -> bool:
    try:
        return bool(redis.Redis(port=port).ping())
    except redis.ConnectionError:
        return False


def _cluster_ok(port: int) -> bool:
    info = redis.Redis(port=port).execute_command("CLUSTER", "INFO")  # type: ignore[no-untyped-call]
    return b"cluster_state:ok" in info if isinstance(info, bytes) else "cluster_state:ok" in info


def _until(check: object, what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise RuntimeError(f"gave up waiting for {what}")
        time.sleep(0.05)


async def _one(url: str, runs: int) -> float:
    """In this process: a worker process on `url`, a warm-up, then `runs` full runs."""
    import core_bench
    import hop_budget

    from agentq.orchestrator.client import Client

    ctx = mp.get_context("spawn")
    ready, stop = ctx.Event(), ctx.Event()
    sent = ctx.Value("q", 0, lock=False)
    worker = ctx.Process(
        target=core_bench._agentq_worker_child, args=(url, ready, stop, sent, None), daemon=True
    )
    worker.start()
    try:
        if not await asyncio.to_thread(ready.wait, 60):
            raise RuntimeError("the agentq worker did not start")
        async with Client(url) as client:
            await hop_budget.full_runs(client, max(10, runs // 10), [worker.pid or 0], sent)
            jobs_per_s, _, _ = await hop_budget.full_runs(client, runs, [worker.pid or 0], sent)
            return jobs_per_s
    finally:
        core_bench._stop(worker, stop)


def measure_one(url: str, runs: int, timeout_s: float = 300) -> float:
    """`python bench/cluster_bench.py RUNS --one URL` in a process of its own."""
    done = subprocess.run(
        [sys.executable, os.path.abspath(__file__), str(runs), "--one", url],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=True,
    )
    return float(done.stdout.split()[-1])


def measure(runs: int, rounds: int) -> list[tuple[float, float]]:
    """(single node, cluster) full-run jobs/s per round, measured alternately."""
    from core_bench import redis_server

    pairs: list[tuple[float, float]] = []
    with redis_server() as single, cluster_server() as cluster:
        for _ in range(rounds):
            pairs.append((measure_one(single, runs), measure_one(cluster, runs)))
    return pairs


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="?", type=int, default=250, help="full runs per measure")
    parser.add_argument("rounds", nargs="?", type=int, default=3, help="rounds of both servers")
    parser.add_argument("--quick", action="store_true", help="40 runs, 1 round")
    # One measure in this process, on a Redis already up (how measure() runs each one).
    parser.add_argument("--one", metavar="URL", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    sys.path.insert(0, HERE)
    if args.one:
        print(asyncio.run(_one(args.one, args.runs)))
        return
    runs, rounds = (40, 1) if args.quick else (args.runs, args.rounds)
    for single, cluster in measure(runs, rounds):
        print(f"{single!r} {cluster!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
