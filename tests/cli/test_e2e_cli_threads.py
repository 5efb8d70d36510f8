"""`agentq submit --thread`, `agentq thread show|list`: CLI processes, an `agentq worker`
process and a real redis-server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.infra import TOOLS, WorkerProcess, run_cli, wait_ready
from tests.support.specs import scripted

pytestmark = pytest.mark.e2e

# What each model step reports (the scripted provider reports none unless told).
USAGE = {"input_tokens": 30, "output_tokens": 12}  # 42 tokens a step


@pytest.fixture
def worker(redis_url: str) -> Iterator[WorkerProcess]:
    process = WorkerProcess(redis_url, "--tools", TOOLS)
    wait_ready(process)
    yield process
    process.stop()


def test_runs_on_a_thread_continue_it(
    redis_url: str, worker: WorkerProcess, tmp_path: Path
) -> None:
    run_ids = []
    for prompt, answer in [("my name is Ada", "hello Ada"), ("what is my name?", "Ada")]:
        spec = tmp_path / "spec.json"
        spec.write_text(json.dumps(scripted({"text": answer, "usage": USAGE}, prompt=prompt)))
        done = run_cli("submit", str(spec), "--thread", "chat-1", redis_url=redis_url)
        assert done.returncode == 0, done.stderr
        run_ids.append(done.stdout.strip())
        waited = run_cli("wait", run_ids[-1], redis_url=redis_url)
        assert waited.returncode == 0, waited.stderr + worker.log()
    shown = run_cli("thread", "show", "chat-1", redis_url=redis_url)
    assert shown.returncode == 0, shown.stderr
    # The thread's usage: its runs' summed (the scripted provider is free).
    tokens = 2 * 42
    assert shown.stdout.splitlines()[:4] == [
        "thread chat-1: idle",
        f"  usage {tokens} tokens, $0.0000",
        f"  run {run_ids[0]}  succeeded",
        f"  run {run_ids[1]}  succeeded",
    ]
    # The thread's messages are its second run's: it started from the first one's.
    assert shown.stdout.splitlines()[4:] == [
        "user: my name is Ada",
        "assistant: hello Ada",
        "user: what is my name?",
        "assistant: Ada",
    ]
    view = json.loads(run_cli("thread", "show", "chat-1", "--json", redis_url=redis_url).stdout)
    assert [r["id"] for r in view["runs"]] == run_ids
    assert view["usage"]["total_tokens"] == tokens
    assert view["usage"]["cost_usd"] == 0
    listed = run_cli("thread", "list", redis_url=redis_url)
    assert listed.stdout.split("\t")[:2] == ["chat-1", "idle"]

    made = run_cli("thread", "create", "chat-2", "--double-texting", "enqueue", redis_url=redis_url)
    assert made.stdout.strip() == "chat-2", made.stderr
    view = json.loads(run_cli("thread", "show", "chat-2", "--json", redis_url=redis_url).stdout)
    assert view["double_texting"] == "enqueue"
    # A run queued behind the thread's run is there at once, and can be cancelled.
    parks = tmp_path / "parks.json"
    parks.write_text(
        json.dumps(
            scripted(
                {"tool_calls": [{"name": "ask_user", "input": {}, "id": "c1"}]},
                {"text": "done"},
                tools=[{"type": "client", "name": "ask_user"}],
            )
        )
    )
    going = run_cli("submit", str(parks), "--thread", "chat-2", redis_url=redis_url)
    assert going.returncode == 0, going.stderr
    queued = run_cli("submit", str(spec), "--thread", "chat-2", redis_url=redis_url)
    assert queued.returncode == 0, queued.stderr
    queued_id = queued.stdout.strip()
    status = run_cli("status", queued_id, "--json", redis_url=redis_url)
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["status"] == "queued"
    cancelled = run_cli("cancel", queued_id, redis_url=redis_url)
    assert cancelled.stdout.strip() == "cancelled", cancelled.stderr

    missing = run_cli("thread", "show", "nope", redis_url=redis_url)
    assert missing.returncode == 2
    assert "no thread with id 'nope'" in missing.stderr
    bad = run_cli("submit", str(tmp_path / "spec.json"), "--thread", "a:b", redis_url=redis_url)
    assert bad.returncode == 2
    assert "thread id 'a:b'" in bad.stderr
