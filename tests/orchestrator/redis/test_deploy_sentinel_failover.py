"""Through a Sentinel URL end to end: a worker, `agentq submit`/`wait` and `agentq serve`
all reach the primary the sentinels name, and when that primary is SIGKILLed and its
replica promoted, every one of them moves to the new primary: runs in flight finish,
the worker keeps its lease (its renewer thread's own client follows too), and serve
answers again."""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from tests.support.infra import TOOLS, WorkerProcess, run_cli, wait_ready
from tests.support.redis_sentinel import LocalSentinel
from tests.support.serve import ServeProcess
from tests.support.specs import calls, scripted
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

SPEC = scripted(calls(("nap", {"seconds": 0.5, "tag": "t"})), {"text": "done"}, tools=["nap"])


@pytest.fixture
def sentinel() -> Iterator[LocalSentinel]:
    local = LocalSentinel()
    yield local
    local.stop()


def submitted(spec_path: Path, url: str) -> str:
    done = run_cli("submit", str(spec_path), redis_url=url)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def status(server: ServeProcess, run_id: str) -> str:
    try:
        response = httpx.get(f"{server.url}/v1/runs/{run_id}", params={"wait": 2}, timeout=10)
    except httpx.TransportError:
        return "unreachable"
    got: dict[str, Any] = response.json() if response.status_code == 200 else {}
    return str(got.get("status", response.status_code))


def test_worker_submit_and_serve_follow_a_failover(sentinel: LocalSentinel, tmp_path: Path) -> None:
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps(SPEC))
    worker = WorkerProcess(sentinel.url, "--tools", TOOLS)
    server = ServeProcess(sentinel.url)
    try:
        wait_ready(worker)
        before = submitted(spec_path, sentinel.url)
        done = run_cli("wait", before, redis_url=sentinel.url)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["status"] == "succeeded"

        response = httpx.post(f"{server.url}/v1/runs", json=SPEC, timeout=30)
        assert response.status_code == 201, response.text
        in_flight = [response.json()["id"], submitted(spec_path, sentinel.url)]
        # What the primary acknowledged is on the replica before the primary dies (the
        # acks that make this hold for every transition are AGENTQ_REDIS_REPLICA_ACKS's).
        redis.Redis(port=sentinel.primary.port).wait(1, 5000)
        sentinel.primary.kill()
        eventually(sentinel.promoted, "the replica to be promoted", 30)

        for run_id in in_flight:
            eventually(
                partial(status, server, run_id),
                f"run {run_id} to succeed",
                60,
                0.1,
                until=lambda seen: seen == "succeeded",
            )
        after = submitted(spec_path, sentinel.url)
        done = run_cli("wait", after, redis_url=sentinel.url)
        assert done.returncode == 0, done.stderr + worker.log()
        assert worker.proc.poll() is None, worker.log()
    finally:
        server.stop()
        worker.stop()
