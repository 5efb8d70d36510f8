"""A model runs code through `agentq worker --sandbox` on a real Docker engine."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from agentq.orchestrator import Client
from tests.integration.core.test_core_workers import wait_ready
from tests.support.infra import WorkerProcess, missing


@pytest.fixture
def sandbox_worker(redis_url: str) -> Iterator[WorkerProcess]:
    try:
        import docker

        client = docker.from_env()
        client.ping()
        client.images.get("agentq-sandbox-python:v1")
    except Exception as exc:
        missing(f"Docker with the sandbox images ({exc})", "run `bash .ci/sandbox-setup`")
    worker = WorkerProcess(redis_url, "--sandbox")
    wait_ready(worker, timeout_s=60)
    yield worker
    worker.stop()


async def test_code_tool_with_a_run_session(redis_url: str, sandbox_worker: WorkerProcess) -> None:
    spec = {
        "model": {
            "provider": "scripted",
            "script": [
                {"tool_calls": [{"name": "run_python", "input": {"code": "x = 6 * 7\nx"}}]},
                {"tool_calls": [{"name": "run_python", "input": {"code": "import os\nx + 1"}}]},
                {"tool_calls": [{"name": "run_python", "input": {"code": "while True: pass"}}]},
                {"text": "done"},
            ],
        },
        "prompt": "compute",
        "tools": [
            {"type": "code", "language": "python", "session": "run", "limits": {"timeout_s": 2}}
        ],
    }
    async with Client(redis_url) as client:
        result = await client.wait(await client.submit(spec), timeout_s=120)
    assert result.status == "succeeded", (result.error, sandbox_worker.log())
    outputs = [step.tool_results[0].output for step in result.steps[:3]]
    assert outputs[0]["value"] == "42"
    assert outputs[1]["value"] == "43"  # interpreter state persisted within the run
    assert outputs[2]["exit_code"] is None
    assert "time" in outputs[2]["error"].lower()


def _containers_holding(token: str) -> int:
    import docker

    client = docker.from_env()
    found = 0
    for container in client.containers.list(filters={"label": "agentq.sandbox=1"}):
        try:
            code, output = container.exec_run(["cat", "/work/token"])
        except docker.errors.APIError:  # removed (or stopping) since it was listed
            continue
        found += code == 0 and token in output.decode(errors="replace")
    return found


async def test_a_run_session_container_goes_when_the_run_ends(
    redis_url: str, sandbox_worker: WorkerProcess
) -> None:
    token = f"token-{time.time_ns()}"
    code = f"open('/work/token', 'w').write({token!r})"
    spec = {
        "model": {
            "provider": "scripted",
            "script": [
                {"tool_calls": [{"name": "run_python", "input": {"code": code}}]},
                {"tool_calls": [{"name": "hold", "input": {}, "id": "hold"}]},
                {"text": "done"},
            ],
        },
        "prompt": "compute",
        "tools": [
            {"type": "code", "language": "python", "session": "run"},
            {"type": "client", "name": "hold", "description": "wait for the test"},
        ],
    }
    async with Client(redis_url) as client:
        run_id = await client.submit(spec)
        async for event in client.events(run_id, follow=True):
            if event.type == "finish-step" and event.step == 1:
                break
        # The run is parked on the client tool: its session container is alive.
        assert await asyncio.to_thread(_containers_holding, token) == 1
        await client.submit_tool_result(run_id, "hold", "ok")
        result = await client.wait(run_id, timeout_s=60)
    assert result.status == "succeeded"
    deadline = time.monotonic() + 30
    while await asyncio.to_thread(_containers_holding, token):
        assert time.monotonic() < deadline, "the run's session container outlived the run"
        await asyncio.sleep(0.2)
