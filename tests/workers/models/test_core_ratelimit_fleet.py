"""One provider quota for the whole fleet: worker processes on a real redis-server share
the limiter, checked from the instants the limiter admitted each call (Redis's clock, as
each worker logs them) and from what a local OpenAI server received.

The batch test is the issue's "1,000 runs against 60 requests per minute" with the
window scaled down to one second (`AGENTQ_RATE_LIMITS` takes a window length), so it
takes about 17 s instead of 17 minutes; the limiter's code path is the same.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from agentq.orchestrator.client import Client
from agentq.orchestrator.core.settings import Settings
from tests.support.fake_http import Recorded
from tests.support.fake_openai import FakeOpenAI, Turn, rate_limited
from tests.support.infra import REPO, WorkerProcess, wait_ready
from tests.support.models import write_models_file
from tests.support.waiting import eventually_async

pytestmark = pytest.mark.integration

# The limiter's log line for each call it lets through (workers/models/ratelimit.py).
ADMITTED = re.compile(r"call admitted at (\d+) ms \(Redis clock\)")

# Arrival at the server trails the back-off's end by the request's trip from a busy
# worker: the 429 test's bound on arrival times gets this much slack.
TRANSIT_S = 0.15


def admissions(workers: list[WorkerProcess]) -> list[int]:
    """Every admission of the fleet, in ms of Redis's clock: the instants the shared
    window counts, so any span of the window holds at most the limit of them."""
    return [int(m) for w in workers for m in ADMITTED.findall(w.log())]


def spec(i: int) -> dict[str, Any]:
    # "fake" is an endpoint of the models file the client and the workers share.
    return {"model": "fake:fake-model", "prompt": f"run {i}"}


def models(tmp_path: Path, base_url: str) -> str:
    return write_models_file(
        tmp_path / "models.json",
        fake={"provider": "openai", "base_url": base_url, "options": {"stream": False}},
    )


def most_in_any_window(times_ms: list[int], window_ms: int) -> int:
    """The most admissions in any window: in (t - window, t] for some t, which is what
    the limiter counts (a ticket leaves the window `window_ms` after its admission)."""
    times_ms = sorted(times_ms)
    most, lo = 0, 0
    for hi, t in enumerate(times_ms):
        while t - times_ms[lo] >= window_ms:
            lo += 1
        most = max(most, hi - lo + 1)
    return most


def start_workers(
    redis_url: str, count: int, limits: dict[str, Any], models_path: str
) -> list[WorkerProcess]:
    env = {
        "AGENTQ_RATE_LIMITS": json.dumps(limits),
        "AGENTQ_CONCURRENCY": "64",
        "AGENTQ_MODELS": models_path,
    }
    # -v: the limiter's admissions are info lines.
    started = [WorkerProcess(redis_url, "-v", env=env) for _ in range(count)]
    wait_ready(*started)
    return started


@contextlib.contextmanager
def fake_openai_process(turns: int, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """The fake server in a process of its own, so that its timestamps are not delayed by
    this process's client juggling a thousand runs. Yields (base URL, request log)."""
    script, log = tmp_path / "turns.json", tmp_path / "requests.jsonl"
    script.write_text(json.dumps([{"text": "ok"}] * turns))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.support.fake_openai",
            "--script",
            str(script),
            "--log",
            str(log),
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().strip(), log
    finally:
        proc.terminate()
        proc.wait(10)


async def test_a_batch_of_1000_runs_never_exceeds_60_per_window(
    redis_url: str, workers: list[WorkerProcess], tmp_path: Path
) -> None:
    window_s, limit, runs = 1.0, 60, 1000
    with fake_openai_process(runs, tmp_path) as (base_url, log):
        path = models(tmp_path, base_url)
        limits = {"openai:fake-model": [limit, None, window_s]}
        workers += start_workers(redis_url, 2, limits, path)
        async with Client(redis_url, settings=Settings(models=path)) as client:
            ids = [await client.runs.submit(spec(i)) for i in range(runs)]
            results = [await client.runs.wait(i, timeout_s=120) for i in ids]
        received = len(log.read_text().splitlines())

    failed = [r.error for r in results if r.status != "succeeded"]
    assert not failed, failed[:3]
    assert received == runs
    admitted = admissions(workers)
    assert len(admitted) == runs
    window_ms = round(window_s * 1000)
    assert most_in_any_window(admitted, window_ms) <= limit
    # And the limiter was the bottleneck, not idle: whole windows were filled.
    assert most_in_any_window(admitted, window_ms) >= limit


async def test_a_429_makes_every_worker_process_back_off(
    redis_url: str, workers: list[WorkerProcess], tmp_path: Path
) -> None:
    backoff_s = 1.5

    def respond(request: Recorded) -> Turn:
        first = request is server.requests[0]
        return rate_limited(retry_after=str(backoff_s)) if first else Turn(text="ok")

    async def backoff_until_ms() -> int:
        """The shared back-off's end (ms, Redis clock) once the 429 is recorded; else 0."""
        async for key in redis.scan_iter(match="agentq:ratelimit:*:backoff"):
            return int(await redis.get(key) or 0)
        return 0

    with FakeOpenAI(respond) as server:
        path = models(tmp_path, server.base_url)
        workers += start_workers(redis_url, 2, {}, path)
        async with (
            Client(redis_url, settings=Settings(models=path)) as client,
            aioredis.Redis.from_url(redis_url) as redis,
        ):
            first = await client.runs.submit(spec(0))
            until_ms = await eventually_async(backoff_until_ms, "the 429's shared back-off")
            rest = [await client.runs.submit(spec(i)) for i in range(1, 20)]
            results = await asyncio.gather(
                *(client.runs.wait(i, timeout_s=60) for i in [first, *rest])
            )
        storm_at = server.requests[0].at
        later = [r.at for r in server.requests[1:]]

    assert [r.status for r in results] == ["succeeded"] * 20
    assert len(later) == 20  # the first run's retry and the 19 others
    # Nobody, in either process, was let through while the shared back-off held...
    admitted = sorted(admissions(workers))
    assert len(admitted) == 21
    assert admitted[1] >= until_ms
    # ...nor sent anything.
    assert min(later) >= storm_at + backoff_s - TRANSIT_S
