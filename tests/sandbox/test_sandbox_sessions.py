"""Issue 18 items 3 and 6 at the executor: run sessions and ownership shared over Redis.

Two `CodeExecutor`s stand for two sandbox workers on one Docker engine and one
real Redis. A run's session calls reach the container of whichever holds it;
when the holder stops, the next call is a tool error saying the session was
lost (never a silent fresh interpreter), and the call after that starts fresh.
Issue 25 item 16: a deployment on another Redis sharing the engine touches
nothing of this one's.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import docker
import pytest

from agentq.orchestrator.core.errors import ToolError
from agentq.orchestrator.tools import ToolDef
from agentq.orchestrator.tools.code import CodeToolConfig
from agentq.sandbox.config import LABEL_MANAGER, SandboxConfig
from agentq.workers.tools.code import CodeExecutor
from agentq.workers.tools.context import ToolContext
from tests.support.infra import RedisServer
from tests.support.waiting import eventually_async

pytestmark = pytest.mark.integration

TOOL = ToolDef(
    name="run_python",
    kind="code",
    queue="sandbox",
    config=CodeToolConfig(language="python", session="run"),
)


def sandbox_worker(redis_url: str) -> CodeExecutor:
    return CodeExecutor(
        SandboxConfig(worker_id="same-host", pool_size={}, max_containers=4),
        redis_url=redis_url,
    )


def context(run_id: str) -> ToolContext:
    return ToolContext(
        run_id=run_id,
        step=0,
        call_id=uuid.uuid4().hex,
        tool=TOOL,
        attempt=1,
        deadline_at=time.time() + 60,
    )


@pytest.fixture
async def executors(redis_url: str, sandbox_images: list[str]) -> AsyncIterator[list[CodeExecutor]]:
    started: list[CodeExecutor] = []
    for _ in range(2):
        executor = sandbox_worker(redis_url)
        await executor.start()
        started.append(executor)
    yield started
    for executor in started:
        await executor.aclose()
        assert executor.manager is not None
        left = await executor.manager.backend.list({LABEL_MANAGER: executor.manager.instance_id})
        assert left == [], f"containers left behind: {left}"


async def call(executor: CodeExecutor, run_id: str, code: str) -> dict[str, Any]:
    output: dict[str, Any] = await executor.execute(TOOL, {"code": code}, context(run_id))
    return output


async def test_a_session_follows_its_container_across_workers(
    executors: list[CodeExecutor],
) -> None:
    first, second = executors
    run_id = f"run-{uuid.uuid4().hex}"
    assert (await call(first, run_id, "x = 41"))["exit_code"] == 0
    assert (await call(second, run_id, "x += 1\nx"))["value"] == "42"  # forwarded to `first`
    assert (await call(first, run_id, "x + 1"))["value"] == "43"
    assert second.manager is not None
    assert second.manager.stats.calls == 0  # it never ran the session itself
    await first.release_run(run_id)
    assert (await call(second, run_id, "globals().get('x')")).get("value") is None  # a new session


async def test_a_session_whose_worker_stopped_is_reported_lost(
    executors: list[CodeExecutor],
) -> None:
    first, second = executors
    run_id = f"run-{uuid.uuid4().hex}"
    assert (await call(first, run_id, "x = 1"))["exit_code"] == 0
    await first.aclose()  # the worker holding the session stops
    with pytest.raises(ToolError, match="session was lost"):
        await call(second, run_id, "x")
    fresh = await call(second, run_id, "globals().get('x')")
    assert fresh["exit_code"] == 0
    assert fresh.get("value") is None


async def test_a_starting_worker_leaves_another_workers_containers_alone(
    executors: list[CodeExecutor], redis_url: str
) -> None:
    first, _ = executors
    run_id = f"run-{uuid.uuid4().hex}"
    assert (await call(first, run_id, "x = 1"))["exit_code"] == 0
    third = sandbox_worker(redis_url)
    await third.start()
    try:
        assert third.manager is not None
        assert await third.manager.remove_orphans() == 0
        assert await third.manager.remove_orphans() == 0  # a second look: still alive
        assert (await call(first, run_id, "x + 1"))["value"] == "2"
    finally:
        await third.aclose()


async def test_another_deployment_on_the_engine_kills_nothing_of_this_one(
    executors: list[CodeExecutor],
) -> None:
    """Fleet A (the session's Redis) runs a long call; fleet B (its own Redis) starts a
    sandbox worker on the same engine and sweeps for orphans twice: A's call finishes."""
    first, _ = executors
    assert first.manager is not None
    run_id = f"run-{uuid.uuid4().hex}"
    assert (await call(first, run_id, "x = 1"))["exit_code"] == 0
    (container_id,) = await first.manager.backend.list({LABEL_MANAGER: first.manager.instance_id})
    container = docker.from_env().containers.get(container_id)

    async def exists(path: str) -> bool:
        found = await asyncio.to_thread(container.exec_run, ["test", "-e", path])
        return bool(found.exit_code == 0)

    long_call = asyncio.create_task(
        call(
            first,
            run_id,
            "import os, time\n"
            "open('/tmp/running', 'w').close()\n"
            "while not os.path.exists('/tmp/go'):\n"
            "    time.sleep(0.05)\n"
            "x + 1",
        )
    )
    await eventually_async(lambda: exists("/tmp/running"), "fleet A's call to run")
    other_redis = RedisServer()
    other = sandbox_worker(other_redis.url)
    try:
        await other.start()  # its first sweep
        assert other.manager is not None
        assert other.manager.config.fleet_id != first.manager.config.fleet_id
        assert await other.manager.remove_orphans() == 0  # the second look, which removes
        assert await other.manager.remove_orphans() == 0
        await asyncio.to_thread(container.exec_run, ["touch", "/tmp/go"])
        assert (await long_call)["value"] == "2"
    finally:
        long_call.cancel()
        await other.aclose()
        other_redis.stop()
