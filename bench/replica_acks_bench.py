"""Issue 26's row: the per-step cost of replica acknowledgement (`WAIT 1` after every
transition, claim and end) against none, on a primary and a replica on loopback,
measured in the same run.

    python bench/replica_acks_bench.py [RUNS] [ROUNDS] [--quick]

Starts a primary and a replica (no persistence, free ports) and, ROUNDS times,
alternately with `AGENTQ_REDIS_REPLICA_ACKS=0` and `=1`: one agentq worker process and
RUNS runs of 20 steps (one no-op call each), one after another, each measure a process
of its own. Prints each round's ms per step, then the medians and their ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing as mp
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator

import redis

HERE = os.path.dirname(os.path.abspath(__file__))


@contextlib.contextmanager
def primary_and_replica() -> Iterator[str]:
    """A throwaway primary with one replica in sync; yields the primary's URL."""
    from core_bench import _free_port

    exe = shutil.which("redis-server") or "/usr/bin/redis-server"
    workdir = tempfile.mkdtemp(prefix="agentq-bench-acks-")
    primary, replica = _free_port(), _free_port()
    procs = []
    try:
        for port, extra in ((primary, []), (replica, ["--replicaof", "127.0.0.1", str(primary)])):
            node_dir = os.path.join(workdir, str(port))
            os.mkdir(node_dir)
            procs.append(
                subprocess.Popen(
                    [
                        *(exe, "--port", str(port), "--bind", "127.0.0.1", "--save", ""),
                        *("--appendonly", "no", "--dir", node_dir, *extra),
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        deadline = time.monotonic() + 30
        while not _linked(replica):
            if time.monotonic() > deadline:
                raise RuntimeError("the replica did not sync")
            time.sleep(0.05)
        yield f"redis://127.0.0.1:{primary}/0"
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=10)
        shutil.rmtree(workdir, ignore_errors=True)


def _linked(port: int) -> bool:
    try:
        info = redis.Redis(port=port).info("replication")
    except redis.ConnectionError:
        return False
    return bool(info.get("master_link_status") == "up")


async def _one(url: str, runs: int) -> float:
    """In this process: a worker process on `url`, a warm-up run, then `runs` runs; the
    median ms per step."""
    import core_bench

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
        spec = core_bench.step_spec(core_bench.RUN_STEPS)
        async with Client(url) as client:
            await core_bench.run_events(client, spec)
            steps = [
                core_bench.step_ms(await core_bench.run_events(client, spec)) for _ in range(runs)
            ]
            return statistics.median(steps)
    finally:
        core_bench._stop(worker, stop)


def measure_one(url: str, acks: int, runs: int) -> float:
    done = subprocess.run(
        [sys.executable, os.path.abspath(__file__), str(runs), "--one", url],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
        env={**os.environ, "AGENTQ_REDIS_REPLICA_ACKS": str(acks)},
    )
    return float(done.stdout.split()[-1])


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="?", type=int, default=5, help="20-step runs per measure")
    parser.add_argument("rounds", nargs="?", type=int, default=3, help="rounds of both settings")
    parser.add_argument("--quick", action="store_true", help="1 run, 1 round")
    # One measure in this process, on a Redis already up (how main() runs each measure).
    parser.add_argument("--one", metavar="URL", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    sys.path.insert(0, HERE)
    if args.one:
        print(asyncio.run(_one(args.one, args.runs)))
        return
    runs, rounds = (1, 1) if args.quick else (args.runs, args.rounds)
    without: list[float] = []
    with_acks: list[float] = []
    with primary_and_replica() as url:
        for _ in range(rounds):
            without.append(measure_one(url, 0, runs))
            with_acks.append(measure_one(url, 1, runs))
            print(f"ms/step: no acks {without[-1]:.2f}  replica acks {with_acks[-1]:.2f}")
    a, b = statistics.median(without), statistics.median(with_acks)
    print(f"median ms/step: no acks {a:.2f}, replica acks (WAIT 1) {b:.2f}: ratio {b / a:.2f}x")


if __name__ == "__main__":
    main(sys.argv[1:])
