"""A model runs code through `agentq worker --sandbox` on a real Docker engine."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from orchestrator import Client
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
