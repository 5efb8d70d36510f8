"""Issue 25 item 17: `agentq run` (embedded) does all of a spec's work before it exits.

Real `agentq run` processes: a code tool runs on the real Docker engine (the embedded
workers serve the sandbox queue), and a run's webhooks reach a real receiver before the
process ends, or the process says in one line which were left.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.infra import TOOLS, SilentServer, free_port, missing, run_cli
from tests.support.receiver import Receiver

pytestmark = pytest.mark.e2e

HELLO = {"model": {"provider": "scripted", "script": [{"text": "hello"}]}, "prompt": "hi"}
LOOPBACK_HOOKS = {"AGENTQ_ALLOW_WEBHOOK_HOSTS": "127.0.0.1"}


def write_spec(tmp_path: Path, spec: dict[str, Any]) -> str:
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    return str(path)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    yield server
    server.close()


def test_an_embedded_run_with_a_code_tool_runs_it(tmp_path: Path) -> None:
    try:
        import docker

        engine = docker.from_env()
        engine.ping()
        engine.images.get("agentq-sandbox-python:v1")
    except Exception as exc:
        missing(f"Docker with the sandbox images ({exc})", "run `bash .ci/sandbox-setup`")
    spec = {
        "model": {
            "provider": "scripted",
            "script": [
                {"tool_calls": [{"name": "run_python", "input": {"code": "6 * 7"}}]},
                {"text": "done"},
            ],
        },
        "prompt": "compute",
        "tools": [{"type": "code", "language": "python"}],
    }
    done = run_cli("run", write_spec(tmp_path, spec), "--json", "--timeout", "60", timeout_s=90)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["status"] == "succeeded", result
    assert result["steps"][0]["tool_results"][0]["output"]["value"] == "42"


def test_an_embedded_run_delivers_its_webhooks_before_it_exits(
    tmp_path: Path, receiver: Receiver
) -> None:
    spec = {**HELLO, "webhooks": [{"url": receiver.url, "events": ["start", "finish"]}]}
    done = run_cli("run", write_spec(tmp_path, spec), "--json", env=LOOPBACK_HOOKS)
    assert done.returncode == 0, done.stderr
    run_id = json.loads(done.stdout)["id"]
    # The process has exited: whatever arrived was sent before it ended.
    events = [json.loads(body) for _, body in receiver.received]
    assert [(e["type"], e["run_id"]) for e in events] == [("start", run_id), ("finish", run_id)]
    assert "webhook" not in done.stderr


def test_an_embedded_run_says_in_one_line_which_deliveries_it_left(tmp_path: Path) -> None:
    silent = SilentServer()  # accepts and never answers: nothing can be delivered
    try:
        url = f"http://127.0.0.1:{silent.port}/hook"
        spec = {**HELLO, "webhooks": [{"url": url, "events": ["finish"]}]}
        env = {**LOOPBACK_HOOKS, "AGENTQ_EMBEDDED_WEBHOOK_WAIT_S": "0.5"}
        done = run_cli("run", write_spec(tmp_path, spec), "--json", env=env)
    finally:
        silent.close()
    assert done.returncode == 0, done.stderr
    run_id = json.loads(done.stdout)["id"]
    lines = [line for line in done.stderr.splitlines() if "webhook" in line]
    assert len(lines) == 1, done.stderr
    assert "left undelivered after 0.5 s" in lines[0]
    assert run_id in lines[0]


def test_an_embedded_run_on_an_unreachable_redis_says_so_at_once(tmp_path: Path) -> None:
    """Only a worker process waits for Redis to come up: a person at a terminal is told."""
    url = f"redis://127.0.0.1:{free_port()}/0"
    done = run_cli("run", write_spec(tmp_path, HELLO), "--tools", TOOLS, redis_url=url)
    assert done.returncode == 3, done.stderr
    assert "cannot reach Redis" in done.stderr
