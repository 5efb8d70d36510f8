"""Issue 26's "what survives what" figures for one Redis with AOF: what a SIGKILL of
Redis costs with `appendfsync everysec` and `always`, and what `always` costs per step.

    python bench/aof_bench.py [RUNS] [ROUNDS] [--submits N] [--quick]

For each fsync policy: a redis-server with AOF on a free port; (1) RUNS runs of 20 steps
on one agentq worker process (ms per step, median), ROUNDS times, alternating the
policies; (2) a client submitting runs, 16 at a time, SIGKILLs Redis while submits are in
flight, restarts it on the same AOF and counts the acknowledged submits whose run is gone.
A SIGKILL stops the process, not the machine: what the kernel had from Redis survives,
so this measures a Redis crash, not a power loss (which `everysec` may cost up to a second).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
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
POLICIES = ("everysec", "always")


@contextlib.contextmanager
def aof_server(policy: str) -> Iterator[tuple[str, subprocess.Popen[bytes], list[str]]]:
    from core_bench import _free_port

    exe = shutil.which("redis-server") or "/usr/bin/redis-server"
    workdir = tempfile.mkdtemp(prefix="agentq-bench-aof-")
    port = _free_port()
    args = [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", workdir]
    args += ["--appendonly", "yes", "--appendfsync", policy]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    holder = [proc]
    try:
        _until_up(port)
        yield f"redis://127.0.0.1:{port}/0", proc, args
    finally:
        for p in holder:
            if p.poll() is None:
                p.terminate()
                p.wait(timeout=10)
        shutil.rmtree(workdir, ignore_errors=True)


def _until_up(port: int) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            if redis.Redis(port=port).ping():
                return
        except (redis.ConnectionError, redis.exceptions.BusyLoadingError):
            pass
        if time.monotonic() > deadline:
            raise RuntimeError("redis-server did not start")
        time.sleep(0.02)


def step_ms(url: str, runs: int) -> float:
    """Median ms per step, in a process of its own (replica_acks_bench's measure)."""
    done = subprocess.run(
        [sys.executable, os.path.join(HERE, "replica_acks_bench.py"), str(runs), "--one", url],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
        env={**os.environ, "AGENTQ_REDIS_REPLICA_ACKS": "0"},
    )
    return float(done.stdout.split()[-1])


async def _submit_through_kill(url: str, proc: subprocess.Popen[bytes], n: int) -> list[str]:
    """Submit up to n runs 16 at a time and SIGKILL Redis once n/2 were acknowledged;
    the ids of the runs whose submit was acknowledged."""
    from agentq.orchestrator.client import Client

    spec = {"model": {"provider": "scripted", "script": [{"text": "x"}]}, "prompt": "go"}
    acknowledged: list[str] = []
    async with Client(url) as client:
        gate = asyncio.Semaphore(16)

        async def one(i: int) -> None:
            async with gate:
                if len(acknowledged) >= n // 2 and proc.poll() is None:
                    proc.kill()
                with contextlib.suppress(Exception):  # refused once Redis is gone
                    acknowledged.append(await client.runs.submit({**spec, "id": f"k{i}"}))

        await asyncio.gather(*(one(i) for i in range(n)))
    return acknowledged


def lost_after_kill(policy: str, n: int) -> tuple[int, int]:
    """(runs acknowledged, of which gone after the restart on the same AOF)."""
    from agentq.orchestrator.core import keys

    with aof_server(policy) as (url, proc, args):
        acknowledged = asyncio.run(_submit_through_kill(url, proc, n))
        proc.wait(timeout=10)
        restarted = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            port = int(url.rsplit(":", 1)[1].split("/")[0])
            _until_up(port)
            client = redis.Redis(port=port)
            gone = sum(1 for run_id in acknowledged if not client.exists(keys.meta(run_id)))
        finally:
            restarted.terminate()
            restarted.wait(timeout=10)
        return len(acknowledged), gone


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="?", type=int, default=5, help="20-step runs per measure")
    parser.add_argument("rounds", nargs="?", type=int, default=3, help="rounds of both policies")
    parser.add_argument("--submits", type=int, default=2000, help="submits around each SIGKILL")
    parser.add_argument("--quick", action="store_true", help="1 run, 1 round, 200 submits")
    args = parser.parse_args(argv)
    runs, rounds, submits = (1, 1, 200) if args.quick else (args.runs, args.rounds, args.submits)
    sys.path.insert(0, HERE)
    per_step: dict[str, list[float]] = {p: [] for p in POLICIES}
    for _ in range(rounds):
        for policy in POLICIES:
            with aof_server(policy) as (url, _, _):
                per_step[policy].append(step_ms(url, runs))
        print("ms/step: " + "  ".join(f"{p} {per_step[p][-1]:.2f}" for p in POLICIES))
    a, b = (statistics.median(per_step[p]) for p in POLICIES)
    print(f"median ms/step: everysec {a:.2f}, always {b:.2f}: ratio {b / a:.2f}x")
    for policy in POLICIES:
        acknowledged, lost = lost_after_kill(policy, submits)
        print(f"SIGKILL with appendfsync {policy}: {lost} of {acknowledged} acknowledged runs lost")


if __name__ == "__main__":
    main(sys.argv[1:])
