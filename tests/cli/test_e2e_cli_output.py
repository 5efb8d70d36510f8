"""Structured output through the CLI: `agentq submit`/`wait`/`status` against `agentq
worker` processes, a real redis-server and a local OpenAI-compatible server (tool mode),
`agentq run --json` embedded (prompted mode), and a bad schema refused at submit."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.fake_openai import FakeOpenAI, ToolCall, Turn
from tests.support.infra import TOOLS, WorkerProcess, run_cli, wait_ready
from tests.support.specs import scripted

pytestmark = pytest.mark.e2e

INVOICE: dict[str, Any] = {
    "type": "object",
    "properties": {"number": {"type": "string"}, "total": {"type": "number"}},
    "required": ["number", "total"],
}


@pytest.fixture
def worker(redis_url: str, allow_loopback_specs: None) -> Iterator[WorkerProcess]:
    process = WorkerProcess(redis_url, "--tools", TOOLS, env={"OPENAI_API_KEY": "sk-test"})
    wait_ready(process)
    yield process
    process.stop()


def write_spec(tmp_path: Path, spec: dict[str, Any]) -> str:
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    return str(path)


def test_tool_mode_on_chat_completions_retries_then_shows_the_output(
    redis_url: str, worker: WorkerProcess, tmp_path: Path
) -> None:
    turns = [
        Turn(tool_calls=[ToolCall("final_result", {"number": "A-1"})]),
        Turn(tool_calls=[ToolCall("final_result", {"number": "A-1", "total": 12.5})]),
    ]
    with FakeOpenAI(turns) as server:
        spec = {
            "model": {"provider": "openai", "name": "gpt-test", "base_url": server.base_url},
            "prompt": "Extract the invoice.",
            "output": {"schema": INVOICE, "mode": "tool"},
        }
        submitted = run_cli("submit", write_spec(tmp_path, spec), redis_url=redis_url)
        assert submitted.returncode == 0, submitted.stderr
        run_id = submitted.stdout.strip()
        done = run_cli("wait", run_id, "--timeout", "60", redis_url=redis_url)
        assert done.returncode == 0, done.stdout + done.stderr + worker.log()
        sent = [r.body for r in server.requests]
    result = json.loads(done.stdout)
    assert result["output"] == {"number": "A-1", "total": 12.5}
    (offered,) = sent[0]["tools"]
    assert offered["function"]["name"] == "final_result"
    assert offered["function"]["parameters"] == INVOICE
    assert sent[0]["tool_choice"] == "required"
    refused = [m for m in sent[1]["messages"] if m["role"] == "tool"]
    assert "'total' is a required property" in refused[0]["content"]
    status = run_cli("status", run_id, "--json", redis_url=redis_url)
    assert json.loads(status.stdout)["output"] == {"number": "A-1", "total": 12.5}


def test_embedded_run_prints_the_output_of_prompted_mode(tmp_path: Path) -> None:
    spec = scripted(
        {"text": '{"number": "B-7", "total": 3}'}, output={"schema": INVOICE, "mode": "prompted"}
    )
    done = run_cli("run", write_spec(tmp_path, spec), "--json", "--timeout", "30")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["output"] == {"number": "B-7", "total": 3}
    shown = run_cli("run", write_spec(tmp_path, spec), "--timeout", "30")
    assert shown.returncode == 0, shown.stderr
    assert '{"number": "B-7", "total": 3}' in shown.stdout


def test_a_bad_output_schema_is_refused_at_submit_with_exit_2(
    redis_url: str, tmp_path: Path
) -> None:
    spec = scripted({"text": "x"}, output={"schema": {"type": "array"}})
    done = run_cli("submit", write_spec(tmp_path, spec), redis_url=redis_url)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "output" in lines[0]
    assert "root of an output schema" in lines[0]
