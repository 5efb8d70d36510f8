"""The manager's lifecycle: warm pool, capacity, sessions, orphans, cleanup."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentq.sandbox.config import SandboxConfig
from agentq.sandbox.docker_backend import DockerBackend
from agentq.sandbox.errors import CapacityError, InvalidRequestError, SandboxUnavailableError
from agentq.sandbox.manager import SandboxManager
from agentq.sandbox.models import ExecRequest, Limits

pytestmark = pytest.mark.integration

MakeManager = Any


async def test_warm_pool_serves_calls_and_refills(make_manager: MakeManager) -> None:
    manager = await make_manager(pool_size={"python": 1, "javascript": 1})
    await manager.wait_pools_ready(timeout_s=60)
    pooled = set(await manager.backend.list(manager.labels))
    assert len(pooled) == 2
    result = await manager.execute(ExecRequest(language="python", code="1 + 1"))
    assert result.value == "2"
    js = await manager.execute(ExecRequest(language="javascript", code="console.log(3)"))
    assert js.stdout == "3\n"
    assert manager.stats.warm_starts == 2
    assert manager.stats.cold_starts == 0
    await manager.wait_pools_ready(timeout_s=60)
    await manager.close_session("drain")
    refilled = set(await manager.backend.list(manager.labels))
    assert len(refilled) == 2
    assert not refilled & pooled  # used containers were destroyed, fresh ones took their place


async def test_non_default_limits_start_a_container_of_their_own(
    make_manager: MakeManager,
) -> None:
    manager = await make_manager(pool_size={"python": 1})
    await manager.wait_pools_ready(timeout_s=60)
    result = await manager.execute(
        ExecRequest(language="python", code="1", limits=Limits(memory_mb=128))
    )
    assert result.ok, result
    assert manager.stats.cold_starts == 1
    assert manager.stats.warm_starts == 0


async def test_capacity_admission_waits_then_fails_clearly(make_manager: MakeManager) -> None:
    manager = await make_manager(max_containers=1, admission_timeout_s=0.5)
    slow = asyncio.create_task(
        manager.execute(ExecRequest(language="python", code="import time\ntime.sleep(3)"))
    )
    for _ in range(1000):  # until the slow call holds the only slot
        if manager.stats.cold_starts:
            break
        await asyncio.sleep(0.01)
    with pytest.raises(CapacityError, match="all 1 sandbox containers are busy") as info:
        await manager.execute(ExecRequest(language="python", code="1"))
    assert info.value.retryable
    assert (await slow).ok
    # Once the slot is free again, calls are admitted.
    assert (await manager.execute(ExecRequest(language="python", code="1"))).ok


async def test_waiting_calls_are_admitted_in_turn(make_manager: MakeManager) -> None:
    manager = await make_manager(max_containers=2, admission_timeout_s=60)
    results = await asyncio.gather(
        *(manager.execute(ExecRequest(language="python", code=f"{i} * 2")) for i in range(5))
    )
    assert [result.value for result in results] == [str(i * 2) for i in range(5)]


async def test_calls_of_one_session_run_one_at_a_time(manager: SandboxManager) -> None:
    code = "import time\ntry:\n    n += 1\nexcept NameError:\n    n = 1\ntime.sleep(0.2)\nn"
    results = await asyncio.gather(
        *(
            manager.execute(ExecRequest(language="python", code=code), session_key="serial")
            for _ in range(3)
        )
    )
    assert sorted(result.value or "" for result in results) == ["1", "2", "3"]
    await manager.close_session("serial")


async def test_idle_sessions_are_closed(make_manager: MakeManager) -> None:
    manager = await make_manager(session_idle_timeout_s=0.5)
    await manager.execute(ExecRequest(language="python", code="x = 1"), session_key="idle")
    assert len(await manager.backend.list(manager.labels)) == 1
    for _ in range(100):
        await asyncio.sleep(0.1)
        if not await manager.backend.list(manager.labels):
            break
    assert await manager.backend.list(manager.labels) == []
    fresh = await manager.execute(
        ExecRequest(language="python", code="'x' in globals()"), session_key="idle"
    )
    assert fresh.value == "False"


async def test_aclose_removes_everything_it_created(make_manager: MakeManager) -> None:
    manager = await make_manager(pool_size={"python": 2})
    await manager.execute(ExecRequest(language="python", code="1"), session_key="a")
    await manager.execute(ExecRequest(language="javascript", code="1"), session_key="a")
    await manager.wait_pools_ready(timeout_s=60)
    assert len(await manager.backend.list(manager.labels)) == 4
    await manager.aclose()
    assert await manager.backend.list(manager.labels) == []


async def test_requests_above_the_ceiling_are_refused(manager: SandboxManager) -> None:
    with pytest.raises(InvalidRequestError) as info:
        await manager.execute(
            ExecRequest(language="python", code="1", limits=Limits(memory_mb=4096))
        )
    assert info.value.field == "limits.memory_mb"
    assert isinstance(info.value, ValueError)


async def test_missing_image_is_an_operator_error(sandbox_images: list[str]) -> None:
    config = SandboxConfig(
        worker_id="test-missing-image",
        images={"python": "agentq-sandbox-python:does-not-exist"},
        pool_size={},
    )
    manager = SandboxManager(DockerBackend(), config)
    with pytest.raises(SandboxUnavailableError, match="build-images"):
        await manager.start()
    await manager.aclose()
