"""A batch against the same runs submitted directly through Client, in one run.

    python bench/batch_bench.py [--lines 10000] [--workers 2] [--concurrency 128] [--quick]

Starts its own `redis-server` and `agentq worker` processes (the test tools: `noop`).
Each line is a scripted run of two steps with one no-op tool call each, then a final
answer. Measured:

1. direct: the N runs submitted through `client.runs.submit` (64 submits in flight), timed
   from the first run's creation to the last run's end;
2. batch: the same N lines as JSONL through `agentq batch submit` (a process: its peak
   RSS is the submitter's), timed from the seal to the last line's end; admission
   latency (a run's end -> the next line admitted) from the batch's own counters;
   peak Redis memory while it runs (INFO, sampled every 0.2 s) and memory per finished
   line (the batch's and its runs' keys); worker RSS at start and at the end.

Prints the ratio batch/direct (goal >= 0.9); never asserts on time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

_REPO = Path(__file__).resolve().parent.parent
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

import redis  # noqa: E402
from verdicts import verdict  # noqa: E402  (bench/)

from agentq.orchestrator.client import Client  # noqa: E402
from agentq.orchestrator.core import keys  # noqa: E402
from tests.support.infra import TOOLS, RedisServer, WorkerProcess, wait_ready  # noqa: E402


def spec(i: int) -> dict[str, Any]:
    step = {"tool_calls": [{"name": "noop", "input": {}}]}
    return {
        "model": {"provider": "scripted", "script": [step, step, {"text": f"done {i}"}]},
        "prompt": f"line {i}",
        "tools": [{"type": "function", "name": "noop"}],
    }


def _status_mb(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field):
            return int(line.split()[1]) / 1024
    return 0.0


def rss_mb(pid: int) -> float:
    return _status_mb(pid, "VmRSS:")


def hwm_mb(pid: int) -> float:
    return _status_mb(pid, "VmHWM:")


class MemorySampler(threading.Thread):
    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.admin = redis.Redis.from_url(url)
        self.peak = 0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.2):
            used = int(self.admin.info("memory")["used_memory"])
            self.peak = max(self.peak, used)


async def direct(url: str, n: int) -> float:
    """Runs per second of N runs submitted through Client."""
    async with Client(url) as client:
        gate = asyncio.Semaphore(64)

        async def one(i: int) -> str:
            async with gate:
                return await client.runs.submit({**spec(i), "id": f"direct-{i}"})

        ids = await asyncio.gather(*(one(i) for i in range(n)))
        results = [await client.runs.wait(run_id, timeout_s=600) for run_id in ids]
        metas = [await client.runs.store.meta(run_id) for run_id in ids]
    assert all(r.status == "succeeded" for r in results)
    first = min(float(m["created_at"]) for m in metas)
    last = max(float(m["finished_at"]) for m in metas)
    return n / (last - first)


def submit_batch(url: str, path: Path, concurrency: int) -> tuple[float, float]:
    """The submitter's wall time and peak RSS (MB)."""
    started = time.monotonic()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agentq",
            "batch",
            "submit",
            str(path),
            "--id",
            "bench",
            "--concurrency",
            str(concurrency),
            "--redis",
            url,
        ],
        env={**os.environ, "PYTHONPATH": str(_REPO)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    # The high-water mark of the process after its exec (a fork's rusage would count
    # this parent's memory too), read until it exits.
    peak_mb = 0.0
    while proc.poll() is None:
        with contextlib.suppress(OSError):
            peak_mb = max(peak_mb, hwm_mb(proc.pid))
        time.sleep(0.02)
    if proc.returncode != 0:
        raise SystemExit(f"agentq batch submit exited {proc.returncode}")
    return time.monotonic() - started, peak_mb


async def batch_end(url: str) -> dict[str, Any]:
    async with Client(url) as client:
        while True:
            info = await client.batches.status("bench")
            if info.ended:
                return info.model_dump()
            await asyncio.sleep(0.5)


def key_bytes(admin: redis.Redis, pattern: str) -> int:
    total = 0
    for key in admin.scan_iter(match=pattern, count=1000):
        total += int(admin.memory_usage(key) or 0)
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=128)
    parser.add_argument("--quick", action="store_true", help="200 lines, 1 worker")
    args = parser.parse_args()
    if args.quick:
        args.lines, args.workers = 200, 1
    n = args.lines
    server = RedisServer()
    workers = [WorkerProcess(server.url, "--tools", TOOLS) for _ in range(args.workers)]
    try:
        wait_ready(*workers)
        admin = redis.Redis.from_url(server.url)
        rss_start = [rss_mb(w.pid) for w in workers]
        direct_rate = asyncio.run(direct(server.url, n))
        print(f"direct: {n} runs through client.runs.submit: {direct_rate:.1f} runs/s", flush=True)
        before = int(admin.info("memory")["used_memory"])
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "lines.jsonl"
            with path.open("w") as out:
                for i in range(n):
                    out.write(json.dumps({"custom_id": f"l{i}", **spec(i)}) + "\n")
            sampler = MemorySampler(server.url)
            sampler.start()
            upload_s, submitter_mb = submit_batch(server.url, path, args.concurrency)
            info = asyncio.run(batch_end(server.url))
            sampler.done.set()
            sampler.join()
        after = int(admin.info("memory")["used_memory"])
        batch_keys = key_bytes(admin, keys.batch_base("default") + "*")
        rss_end = [rss_mb(w.pid) for w in workers]
        rate = n / (info["finished_at"] - info["sealed_at"])
        print(f"batch: {n} lines, concurrency {args.concurrency}, {args.workers} workers")
        print(f"  upload {upload_s:.1f} s, submitter peak RSS {submitter_mb:.0f} MB")
        print(f"  {rate:.1f} runs/s ({info['counts']})")
        print(
            f"  admission latency avg {(info['admission_latency_avg_s'] or 0) * 1000:.1f} ms, "
            f"max {(info['admission_latency_max_s'] or 0) * 1000:.0f} ms"
        )
        print(
            f"  Redis peak {sampler.peak / 1e6:.1f} MB; per finished line "
            f"{(after - before) / n / 1024:.2f} KB (runs kept for their retention), "
            f"{batch_keys / n:.0f} B of batch records"
        )
        print(
            "  worker RSS start "
            + ", ".join(f"{r:.0f}" for r in rss_start)
            + " MB -> end "
            + ", ".join(f"{r:.0f}" for r in rss_end)
            + " MB"
        )
        ratio = rate / direct_rate
        mark = verdict(ratio >= 0.9, timed=True, quick=args.quick)
        print(f"batch/direct throughput: {ratio:.2f} ({mark}; goal >= 0.9)")
    finally:
        for worker in workers:
            worker.stop()
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
