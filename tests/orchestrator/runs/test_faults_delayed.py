"""A delayed run submitted with `agentq submit --in`, through a SIGKILLed worker and a
SIGKILLed redis-server restarted from its AOF: it is still `scheduled` afterwards, starts
once a worker is back (never before its time), and ends once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentq.orchestrator.client import Client
from tests.support.infra import TOOLS, RedisServer, WorkerProcess, run_cli, wait_ready
from tests.support.specs import scripted

pytestmark = pytest.mark.faults


def test_bad_start_times_are_one_line_and_exit_2(tmp_path: Path) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(scripted({"text": "x"})))
    for flags, says in [
        (("--in", "5x"), "invalid duration"),
        (("--at", "2026-12-01T09:00"), "no zone"),
        (("--at", "2020-01-01T00:00Z"), "in the past"),
        (("--at", "2030-01-01T00:00Z", "--in", "1m"), "not both"),
    ]:
        # No Redis is reached: the time is judged first.
        done = run_cli("submit", str(spec), *flags, redis_url="redis://127.0.0.1:1/0")
        assert done.returncode == 2, done.stderr
        assert done.stderr.count("\n") == 1, done.stderr
        assert says in done.stderr


async def test_a_delayed_run_survives_worker_and_redis_restarts(tmp_path: Path) -> None:
    server = RedisServer(appendonly=True, extra_args=["--appendfsync", "always"])
    workers: list[WorkerProcess] = []
    try:
        worker = WorkerProcess(server.url, "--tools", TOOLS)
        workers.append(worker)
        wait_ready(worker)
        spec = tmp_path / "spec.json"
        spec.write_text(json.dumps(scripted({"text": "on time"})))
        submitted = run_cli("submit", str(spec), "--in", "2s", redis_url=server.url)
        assert submitted.returncode == 0, submitted.stderr
        run_id = submitted.stdout.strip()
        worker.kill()
        server.kill()
        server.start()  # from the AOF: the run and its timer are still there
        async with Client(server.url) as client:
            assert (await client.runs.status(run_id)).status == "scheduled"
        worker = WorkerProcess(server.url, "--tools", TOOLS)
        workers.append(worker)
        wait_ready(worker)
        waited = run_cli("wait", run_id, "--timeout", "60", redis_url=server.url)
        assert waited.returncode == 0, waited.stderr
        result = json.loads(waited.stdout)
        assert (result["status"], result["text"]) == ("succeeded", "on time")
        async with Client(server.url) as client:
            events = [e async for e in client.runs.events(run_id)]
        (begun,) = [e for e in events if e.type == "start-step"]
        assert begun.at >= result["start_at"]
    finally:
        for w in workers:
            w.stop()
        server.stop()
