"""Status without blocking: `agentq status`, `runs`, `workers`, `wait --timeout`,
and `agentq run` against a shared Redis from $AGENTQ_REDIS_URL. Real processes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.test_e2e_cli import events_until, submit
from tests.support.fake_openai import FakeOpenAI, Turn, rate_limited
from tests.support.infra import REPO, TOOLS, WorkerProcess, run_cli, wait_ready
from tests.support.specs import parked_spec

pytestmark = pytest.mark.e2e


@pytest.fixture
def worker(redis_url: str) -> Iterator[WorkerProcess]:
    process = WorkerProcess(redis_url, "--tools", TOOLS, "--concurrency", "4")
    wait_ready(process)
    yield process
    process.stop()


def test_status_runs_and_workers(redis_url: str, worker: WorkerProcess, tmp_path: Path) -> None:
    run_id = submit(tmp_path, parked_spec(), redis_url)
    events_until(run_id, redis_url, "finish-step")

    shown = run_cli("status", run_id, redis_url=redis_url)
    assert shown.returncode == 0, shown.stderr
    assert "status awaiting" in shown.stdout
    assert "call c1 add" in shown.stdout
    assert "waits for approval" in shown.stdout
    assert f"agentq approve {run_id} c1" in shown.stdout
    assert f"agentq tool-result {run_id} c2" in shown.stdout
    status = json.loads(run_cli("status", run_id, "--json", redis_url=redis_url).stdout)
    assert status["status"] == "awaiting"
    assert {p["tool_call_id"]: p["status"] for p in status["pending"]} == {
        "c1": "awaiting-approval",
        "c2": "awaiting-result",
    }

    timed_out = run_cli("wait", run_id, "--timeout", "0.5", redis_url=redis_url)
    assert timed_out.returncode == 4, timed_out.stderr
    assert "timed out" in timed_out.stderr

    other = submit(tmp_path, {**parked_spec(), "id": "second"}, redis_url)
    listed = json.loads(run_cli("runs", "--json", redis_url=redis_url).stdout)
    assert [r["id"] for r in listed] == [other, run_id]  # newest first
    assert run_cli("runs", "--limit", "1", redis_url=redis_url).stdout.count("awaiting") == 1
    assert (
        json.loads(run_cli("runs", "--status", "succeeded", "--json", redis_url=redis_url).stdout)
        == []
    )

    workers = json.loads(run_cli("workers", "--json", redis_url=redis_url).stdout)
    assert [w["pid"] for w in workers] == [worker.pid]
    assert workers[0]["queues"] == ["model", "tools"]
    assert "add" in workers[0]["tools"]
    assert workers[0]["concurrency"] == 4
    table = run_cli("workers", redis_url=redis_url).stdout
    assert "LAST SEEN" in table
    assert str(worker.pid) in table
    # Jobs in flight at its last beat (a step of `other` may be), of its concurrency.
    assert re.search(r"\s[0-4]/4\s", table), table

    cancelled = json.loads(run_cli("cancel", other, "--json", redis_url=redis_url).stdout)
    assert cancelled == {"run_id": other, "outcome": "cancelled"}
    assert json.loads(
        run_cli(
            "submit",
            "-",
            "--json",
            redis_url=redis_url,
            input_text=json.dumps({**parked_spec(), "id": "third"}),
        ).stdout
    ) == {"run_id": "third"}


def test_a_stopped_worker_leaves_the_list(redis_url: str) -> None:
    process = WorkerProcess(redis_url, "--tools", TOOLS)
    wait_ready(process)
    assert len(json.loads(run_cli("workers", "--json", redis_url=redis_url).stdout)) == 1
    process.stop()
    assert json.loads(run_cli("workers", "--json", redis_url=redis_url).stdout) == []


def test_run_joins_the_shared_redis_named_by_the_environment(
    redis_url: str, worker: WorkerProcess, tmp_path: Path
) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(parked_spec()))
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentq", "run", str(spec)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), "AGENTQ_REDIS_URL": redis_url},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    seen: list[str] = []
    for line in proc.stdout:
        seen.append(line)
        if "agentq tool-result" in line:
            break
    run_id = seen[1].split()[1] if seen[0].startswith("joining") else seen[0].split()[1]
    assert seen[0].startswith("joining the shared Redis at redis://127.0.0.1:")
    assert "($AGENTQ_REDIS_URL is set)" in seen[0]
    assert run_cli("approve", run_id, "c1", redis_url=redis_url).returncode == 0
    posted = run_cli("tool-result", run_id, "c2", "--output", '"Ada"', redis_url=redis_url)
    assert posted.returncode == 0, posted.stderr
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "Answer: done" in out


def test_a_retried_model_call_is_visible(
    redis_url: str, allow_loopback_specs: None, tmp_path: Path
) -> None:
    process = WorkerProcess(redis_url, "--tools", TOOLS)
    wait_ready(process)
    with FakeOpenAI([rate_limited(retry_after="0"), Turn(text="fine")]) as server:
        spec = tmp_path / "spec.json"
        spec.write_text(
            json.dumps(
                {
                    "model": {
                        "provider": "openai",
                        "name": "gpt-test",
                        "base_url": server.base_url,
                    },
                    "prompt": "hi",
                }
            )
        )
        try:
            done = run_cli("run", str(spec), redis_url=redis_url)
        finally:
            process.stop()
    assert done.returncode == 0, done.stderr
    assert re.search(r"retrying after 429 in \d+\.\d s \(attempt 2/4\)", done.stdout), done.stdout
    assert "Answer: fine" in done.stdout


def test_run_names_a_tool_queue_no_worker_serves(redis_url: str, tmp_path: Path) -> None:
    # A model-only worker: it announces its tools on 'tools' but serves only 'model'.
    model_only = WorkerProcess(redis_url, "--queue", "model", "--tools", TOOLS)
    try:
        wait_ready(model_only)
        spec = tmp_path / "spec.json"
        spec.write_text(
            json.dumps(
                {
                    "model": {
                        "provider": "scripted",
                        "script": [{"tool_calls": [{"name": "add", "input": {"a": 1, "b": 2}}]}],
                    },
                    "prompt": "go",
                    "tools": [{"type": "function", "name": "add"}],
                }
            )
        )
        done = run_cli("run", str(spec), "--timeout", "3", redis_url=redis_url)
    finally:
        model_only.stop()
    assert done.returncode == 4, done.stderr
    assert "no live worker serves the 'tools' queue yet" in done.stdout
    assert "'model'" not in done.stdout.split("no live worker serves")[1].splitlines()[0]


def test_status_of_a_cancelled_run_asks_for_nothing(
    redis_url: str, worker: WorkerProcess, tmp_path: Path
) -> None:
    run_id = submit(tmp_path, parked_spec(), redis_url)
    events_until(run_id, redis_url, "finish-step")
    assert run_cli("cancel", run_id, redis_url=redis_url).returncode == 0

    shown = run_cli("status", run_id, redis_url=redis_url)
    assert shown.returncode == 0, shown.stderr
    assert "status cancelled" in shown.stdout
    assert "answer with" not in shown.stdout
    assert "waiting" not in shown.stdout
    assert (
        json.loads(run_cli("status", run_id, "--json", redis_url=redis_url).stdout)["pending"] == []
    )


def test_a_call_no_worker_takes_ends_at_its_timeout_with_exit_4(redis_url: str) -> None:
    # The catalogue declares `add`, so the call is accepted; no worker is up to take it.
    assert run_cli("catalog", "publish", "--tools", TOOLS, redis_url=redis_url).returncode == 0
    done = run_cli(
        "call", "add", "--input", '{"a": 1, "b": 2}', "--timeout", "2", redis_url=redis_url
    )
    assert done.returncode == 4, done.stderr
    assert "timed out: no worker finished the call to 'add' within 2 s" in done.stderr
    assert "(the call was cancelled)" in done.stderr
