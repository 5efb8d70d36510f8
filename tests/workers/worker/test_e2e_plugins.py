"""Plugins from outside agentq, end to end: a tool kind and a model provider that a worker
process loads at start (`--tools MODULE`) are usable in specs submitted elsewhere."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import tests.support.plugins.echo_kind  # noqa: F401  (the submitter parses the kind's entries)
from agentq.orchestrator.client import Client
from agentq.orchestrator.core.errors import SpecError
from agentq.workers.models import known_providers
from tests.support.infra import WorkerProcess, run_cli, wait_ready

pytestmark = pytest.mark.e2e

KIND = "tests/support/plugins/echo_kind.py"
PROVIDER = "tests/support/plugins/echo_provider.py"
SPEC: dict[str, Any] = {
    "model": "echo-model:any",
    "prompt": "go",
    "tools": [{"type": "echo", "names": ["shout"], "tag": "E"}],
}
EXPECTED = 'echo-model saw {"tag": "E", "tool": "shout", "text": "hi"}'


@pytest.fixture
def plugin_worker(redis_url: str) -> Iterator[WorkerProcess]:
    worker = WorkerProcess(redis_url, "--tools", KIND, "--tools", PROVIDER)
    wait_ready(worker)
    yield worker
    worker.stop()


async def test_a_provider_and_a_kind_registered_at_worker_start(
    redis_url: str, plugin_worker: WorkerProcess
) -> None:
    # This process never registered the provider: submit learns it from the registry.
    assert "echo-model" not in known_providers()
    async with Client(redis_url) as client:
        result = await client.runs.wait(await client.runs.submit(SPEC), timeout_s=60)
        assert result.status == "succeeded", (result.error, plugin_worker.log())
        assert result.text == EXPECTED
        with pytest.raises(SpecError, match="unknown provider 'other-model'"):
            await client.runs.submit({**SPEC, "model": "other-model:any"})


def test_agentq_run_loads_the_plugins_before_reading_the_spec(tmp_path: Path) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(SPEC))
    done = run_cli("run", str(spec), "--tools", KIND, "--tools", PROVIDER, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["text"] == EXPECTED
