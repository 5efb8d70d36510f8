"""A 1,000-line batch while worker processes are SIGKILLed and restarted as it goes
(three kills, at set numbers of ended lines) and the submitter is killed mid-upload and
restarted: every line ends exactly once, and `agentq batch results` has the 1,000 lines
in input order."""

from __future__ import annotations

import asyncio
import json
import os
import random
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from agentq.orchestrator.batches.api import BatchInfo
from agentq.orchestrator.client import Client
from agentq.orchestrator.core import keys
from tests.support.infra import REPO, TOOLS, RedisServer, WorkerProcess, wait_ready
from tests.support.specs import calls, scripted
from tests.support.waiting import eventually, eventually_async

pytestmark = pytest.mark.faults

LINES = 1000
TEMPLATE = scripted(calls(("noop", {})), {"text": "done"}, tools=["noop"], prompt="{{n}}")


class Chaos(threading.Thread):
    """SIGKILLs a random worker each time the batch passes one of `AT_ENDED` ended lines,
    and starts a replacement. The kills follow the batch's progress, not the clock: a
    faster engine cannot end the batch before they happen (at 2-4 s intervals it did)."""

    AT_ENDED = (150, 400, 650)

    def __init__(self, url: str, fleet: list[WorkerProcess]) -> None:
        super().__init__(daemon=True)
        self.url, self.fleet = url, fleet
        self.rng = random.Random(10)
        self.done = threading.Event()
        self.kills = 0

    def run(self) -> None:
        asyncio.run(self._kill_as_lines_end())

    async def _kill_as_lines_end(self) -> None:
        async with Client(self.url) as client:
            for threshold in self.AT_ENDED:
                while (await client.batches.status("chaos")).counts.ended < threshold:
                    if self.done.is_set():
                        return
                    await asyncio.sleep(0.02)  # a poll of the batch's progress
                alive = [w for w in self.fleet if w.proc.poll() is None]
                self.rng.choice(alive).kill()
                self.kills += 1
                self.fleet.append(WorkerProcess(self.url, "--tools", TOOLS))


@pytest.fixture
def server() -> Iterator[RedisServer]:
    redis_server = RedisServer()
    yield redis_server
    redis_server.stop()


@pytest.fixture
def fleet() -> Iterator[list[WorkerProcess]]:
    workers: list[WorkerProcess] = []
    yield workers
    for worker in workers:
        worker.stop()


async def batch_end(url: str) -> BatchInfo:
    async with Client(url) as client:

        async def ended() -> BatchInfo | None:
            info = await client.batches.status("chaos")
            return info if info.ended else None

        found = await eventually_async(ended, "the batch to end", 150, interval_s=0.5)
        assert found is not None
        return found


def submit_command(url: str, path: Path, template: Path) -> list[str]:
    return [
        *(sys.executable, "-m", "agentq", "batch", "submit", str(path), "--id", "chaos"),
        *("--spec", str(template), "--concurrency", "64", "--redis", url),
    ]


def submitter(url: str, path: Path, template: Path, log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        submit_command(url, path, template),
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        cwd=REPO,
    )


def test_a_batch_survives_killed_workers_and_a_killed_submitter(
    server: RedisServer, fleet: list[WorkerProcess], tmp_path: Path
) -> None:
    rows = [json.dumps({"custom_id": f"k{i}", "vars": {"n": str(i)}}) for i in range(LINES)]
    template = tmp_path / "template.json"
    template.write_text(json.dumps(TEMPLATE))
    full = tmp_path / "lines.jsonl"
    full.write_text("\n".join(rows) + "\n")
    fleet += [WorkerProcess(server.url, "--tools", TOOLS) for _ in range(2)]
    wait_ready(*fleet)
    admin = redis.Redis.from_url(server.url, decode_responses=True)
    meta = keys.batch_meta("default", "chaos")

    # The first submitter reads from a pipe that never delivers more than 600 lines: it
    # stores its first chunk (500) and is SIGKILLed while it waits for the rest.
    pipe = tmp_path / "lines.fifo"
    os.mkfifo(pipe)
    first = submitter(server.url, pipe, template, tmp_path / "submit1.log")
    with pipe.open("w") as feed:
        feed.write("\n".join(rows[:600]) + "\n")
        feed.flush()
        eventually(lambda: admin.hget(meta, "lines") == "500", "the first chunk stored", 60)
        assert admin.hget(meta, "status") == "uploading"
        first.kill()
        first.wait(10)

    chaos = Chaos(server.url, fleet)
    chaos.start()
    try:
        second = subprocess.run(
            submit_command(server.url, full, template),
            env={**os.environ, "PYTHONPATH": str(REPO)},
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=120,
        )
        assert second.returncode == 0, second.stderr
        assert "resumed: 500 more lines stored" in second.stderr
        info = asyncio.run(batch_end(server.url))
    finally:
        chaos.done.set()
        chaos.join()
    assert info is not None
    results = subprocess.run(
        [sys.executable, "-m", "agentq", "batch", "results", "chaos", "--redis", server.url],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        check=True,
    )
    lines = [json.loads(line) for line in results.stdout.splitlines()]
    print(
        f"FAULTS batch: lines={len(lines)} kills={chaos.kills} "
        f"succeeded={info.counts.succeeded} runs_per_s={info.runs_per_s:.1f}",
        file=sys.stderr,
    )
    assert chaos.kills == len(Chaos.AT_ENDED)
    assert [r["custom_id"] for r in lines] == [f"k{i}" for i in range(LINES)]
    # Each line ran once: its first run, never a second one (no retry, no duplicate).
    prefix = str(admin.hget(meta, "run_prefix"))
    assert prefix.startswith("chaos.")  # then the nonce drawn when the batch opened
    assert {r["run_id"] for r in lines} == {f"{prefix}{i}.1" for i in range(1, LINES + 1)}
    assert {r["status"] for r in lines} == {"succeeded"}
    assert (info.counts.succeeded, info.counts.running, info.counts.queued) == (LINES, 0, 0)
    assert admin.hget(meta, "inflight") == "0"
    assert admin.hget(keys.batch_sched("default"), "inflight") == "0"
    assert not admin.exists(keys.batch_running("default", "chaos"))
    for i in range(1, LINES + 1, 97):
        assert admin.hget(keys.meta(f"{prefix}{i}.1"), "status") == "succeeded"
    assert not admin.exists(keys.meta(f"{prefix}1.2"))
