"""A tool is live while a worker serving it is: after SIGTERM of the only worker serving
`add`, submit refuses a run needing it (unless the catalogue declares it) and `catalog
show` shows it not live; a worker restarted beside another serving the same tools takes
nothing away. After Redis loses its data, workers announce again as soon as they are
reconnected. Real worker processes, the real CLI, real redis-servers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from agentq.orchestrator.core import keys
from tests.support.infra import TOOLS, RedisServer, WorkerProcess, run_cli, wait_ready
from tests.support.specs import scripted
from tests.support.waiting import eventually

pytestmark = pytest.mark.e2e

ADD = scripted(
    {"tool_calls": [{"name": "add", "input": {"a": 2, "b": 3}}]}, {"text": "5"}, tools=["add"]
)


@pytest.fixture
def fleet() -> Iterator[list[WorkerProcess]]:
    started: list[WorkerProcess] = []
    yield started
    for worker in started:
        worker.stop()


def start(fleet: list[WorkerProcess], redis_url: str) -> WorkerProcess:
    worker = WorkerProcess(redis_url, "--tools", TOOLS)
    fleet.append(worker)
    wait_ready(worker)
    return worker


def submit(redis_url: str, tmp_path: Path) -> Any:
    spec = tmp_path / "add.json"
    spec.write_text(json.dumps(ADD))
    return run_cli("submit", str(spec), redis_url=redis_url)


def live(redis_url: str) -> dict[str, bool]:
    done = run_cli("catalog", "show", "--json", redis_url=redis_url)
    assert done.returncode == 0, done.stderr
    return {f"{e['kind']}:{e['name']}": e["live"] for e in json.loads(done.stdout)}


def stop_gracefully(worker: WorkerProcess) -> None:
    worker.terminate()
    assert worker.proc.wait(30) == 0, worker.log()


def test_a_stopped_workers_tools_are_no_longer_live(
    redis_url: str, tmp_path: Path, fleet: list[WorkerProcess]
) -> None:
    first, second = start(fleet, redis_url), start(fleet, redis_url)

    stop_gracefully(first)  # a restart beside another worker: `add` is still served
    accepted = submit(redis_url, tmp_path)
    assert accepted.returncode == 0, accepted.stderr
    done = run_cli("wait", accepted.stdout.strip(), "--timeout", "60", redis_url=redis_url)
    assert done.returncode == 0, done.stdout + done.stderr

    stop_gracefully(second)  # the only worker serving `add`
    refused = submit(redis_url, tmp_path)
    assert refused.returncode == 2, refused.stdout
    assert "no worker serves the function tool 'add'" in refused.stderr

    # With `add` in the deployment's catalogue, `catalog show` says whether it is live,
    # and submit accepts it with no worker up (it waits for one).
    third = start(fleet, redis_url)
    published = run_cli("catalog", "publish", "--tools", TOOLS, redis_url=redis_url)
    assert published.returncode == 0, published.stderr
    assert live(redis_url)["function:add"] is True
    stop_gracefully(third)
    assert live(redis_url)["function:add"] is False
    assert submit(redis_url, tmp_path).returncode == 0


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    server = RedisServer()  # no persistence: a restart loses every key
    yield server
    server.stop()


def test_workers_announce_again_when_redis_comes_back_empty(
    own_redis: RedisServer, tmp_path: Path, fleet: list[WorkerProcess]
) -> None:
    worker = start(fleet, own_redis.url)
    own_redis.kill()
    own_redis.start()  # same port, no data: the registry is gone
    eventually(lambda: "redis is back" in worker.log(), "the worker to reconnect", 60)
    # Announced on reconnect, not at the next listing a minute later.
    admin = redis.Redis.from_url(own_redis.url)
    eventually(lambda: admin.hexists(keys.REGISTRY, "add"), "the worker to re-announce")
    accepted = submit(own_redis.url, tmp_path)
    assert accepted.returncode == 0, accepted.stderr
