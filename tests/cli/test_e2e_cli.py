"""End to end: `agentq` CLI processes, `agentq worker` processes, a real redis-server,
and a local OpenAI-compatible HTTP server."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, cast

import pytest
import redis

from tests.support.fake_openai import FakeOpenAI, ToolCall, Turn, rate_limited
from tests.support.infra import REPO, TOOLS, WorkerProcess, run_cli, wait_ready
from tests.support.specs import scripted

pytestmark = pytest.mark.e2e

API_KEY = "sk-e2e-secret-never-stored"


@pytest.fixture
def worker(redis_url: str, allow_loopback_specs: None) -> Iterator[WorkerProcess]:
    process = WorkerProcess(redis_url, "--tools", TOOLS, env={"OPENAI_API_KEY": API_KEY})
    wait_ready(process)
    yield process
    process.stop()


def write_spec(tmp_path: Path, spec: dict[str, Any]) -> str:
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    return str(path)


def submit(tmp_path: Path, spec: dict[str, Any], redis_url: str) -> str:
    done = run_cli("submit", write_spec(tmp_path, spec), redis_url=redis_url)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


# Events after which a run writes no more: `agentq events --follow` then ends by itself.
TERMINAL_EVENTS = ("finish", "error", "abort")


def events_until(
    run_id: str, redis_url: str, event_type: str, count: int = 1, timeout_s: float = 30
) -> list[dict[str, Any]]:
    """The run's events up to its `count`-th `event_type` event (to its last event, when
    that one ends the run), read from one `agentq events --follow` process as they come
    rather than by starting an `agentq events` process every 0.1 s until one shows."""
    command = [sys.executable, "-m", "agentq", "events", run_id, "--follow", "--redis", redis_url]
    lines: queue.Queue[str | None] = queue.Queue()
    with subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    ) as process:
        assert process.stdout is not None
        assert process.stderr is not None

        def read(out: IO[str]) -> None:
            for line in out:
                lines.put(line)
            lines.put(None)  # the process ended (the run ended)

        reader = threading.Thread(target=read, args=(process.stdout,), daemon=True)
        reader.start()
        events: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout_s
        ended = False  # the process ended (the run had ended)
        try:
            while not ended and (
                sum(e["type"] == event_type for e in events) < count
                or events[-1]["type"] in TERMINAL_EVENTS  # the run ended: read to its end
            ):
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
                ended = line is None
                events += [] if line is None else [json.loads(line)]
        except queue.Empty:
            pass
        finally:
            process.kill()
            reader.join()
        stderr = process.stderr.read()
    seen = sum(e["type"] == event_type for e in events)
    assert seen >= count, (
        f"{seen} {event_type} event(s) of run {run_id} (wanted {count}) within {timeout_s:g} s;"
        f" got {[e['type'] for e in events]}; stderr: {stderr}"
    )
    return events


def test_openai_run_with_streamed_parallel_calls_and_a_429(
    redis_url: str, worker: WorkerProcess, tmp_path: Path
) -> None:
    turns = [
        rate_limited(retry_after="0"),
        Turn(
            text="Adding.",
            tool_calls=[ToolCall("add", {"a": 1, "b": 2}), ToolCall("add", {"a": 3, "b": 4})],
            interleave=True,
            fragment_chars=3,
        ),
        Turn(text="1+2=3 and 3+4=7."),
    ]
    with FakeOpenAI(turns) as server:
        spec = {
            "model": {"provider": "openai", "name": "gpt-test", "base_url": server.base_url},
            "prompt": "add 1+2 and 3+4",
            "tools": [{"type": "function", "name": "add"}],
        }
        run_id = submit(tmp_path, spec, redis_url)
        done = run_cli("wait", run_id, "--timeout", "60", redis_url=redis_url)
        assert done.returncode == 0, done.stdout + done.stderr + worker.log()
        result = json.loads(done.stdout)
        sent = [r.body for r in server.requests]
        auth = [r.headers.get("authorization") for r in server.requests]

    assert result["status"] == "succeeded"
    assert result["text"] == "1+2=3 and 3+4=7."
    assert [r["output"] for r in result["steps"][0]["tool_results"]] == [3.0, 7.0]
    assert result["usage"]["total_tokens"] > 0
    assert len(sent) == 3  # the 429 was retried
    assert all(body["stream"] for body in sent)
    assert auth[0] == f"Bearer {API_KEY}"
    tool_messages = [m for m in sent[2]["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in tool_messages] == ["3.0", "7.0"]
    # The key was used, and stored nowhere.
    client = redis.Redis.from_url(redis_url)
    for key in cast(list[bytes], client.keys("*")):
        dump = cast(bytes | None, client.dump(key)) or b""
        assert API_KEY.encode() not in dump, key


def test_approval_and_denial_through_the_cli(
    redis_url: str, worker: WorkerProcess, tmp_path: Path
) -> None:
    spec = scripted(
        {"tool_calls": [{"name": "add", "input": {"a": 1, "b": 1}, "id": "c1"}]},
        {"tool_calls": [{"name": "add", "input": {"a": 2, "b": 2}, "id": "c2"}]},
        {"text": "done"},
        tools=[],
    )
    spec["tools"] = [{"type": "function", "name": "add", "needs_approval": True}]
    run_id = submit(tmp_path, spec, redis_url)
    events_until(run_id, redis_url, "tool-approval-request")
    assert run_cli("approve", run_id, "c1", redis_url=redis_url).returncode == 0
    events_until(run_id, redis_url, "tool-approval-request", count=2)
    denied = run_cli(
        "approve", run_id, "c2", "--deny", "--reason", "not today", redis_url=redis_url
    )
    assert denied.returncode == 0, denied.stderr
    done = run_cli("wait", run_id, "--timeout", "30", redis_url=redis_url)
    result = json.loads(done.stdout)
    assert done.returncode == 0
    first, second = result["steps"][0]["tool_results"][0], result["steps"][1]["tool_results"][0]
    assert first["output"] == 2.0
    assert not first["is_error"]
    assert second["is_error"]
    assert "not today" in second["output"]
    again = run_cli("approve", run_id, "c2", redis_url=redis_url)
    assert again.returncode == 2  # approving what no longer waits is bad input
    assert "ended" in again.stderr


def test_an_approval_rule_and_an_edited_input_through_the_cli(
    redis_url: str, worker: WorkerProcess, tmp_path: Path
) -> None:
    spec = scripted(
        {
            "tool_calls": [
                {"name": "add", "input": {"a": 1, "b": 1}, "id": "small"},
                {"name": "add", "input": {"a": 500, "b": 1}, "id": "big"},
            ]
        },
        {"text": "done"},
        tools=[],
    )
    spec["tools"] = [{"type": "function", "name": "add", "needs_approval": {"when": "a > `100`"}}]
    run_id = submit(tmp_path, spec, redis_url)
    events_until(run_id, redis_url, "tool-approval-request")
    not_json = run_cli("approve", run_id, "big", "--input", "{a:", redis_url=redis_url)
    assert (not_json.returncode, "--input is not valid JSON" in not_json.stderr) == (2, True)
    invalid = run_cli(
        "approve", run_id, "big", "--input", '{"a": "x", "b": 1}', redis_url=redis_url
    )
    assert invalid.returncode == 2
    assert invalid.stderr.strip().splitlines()[-1] == (
        "agentq: the edited input is refused: Invalid input for tool 'add': "
        "a: 'x' is not of type 'number'"
    )
    edited = run_cli("approve", run_id, "big", "--input", '{"a": 50, "b": 1}', redis_url=redis_url)
    assert edited.returncode == 0, edited.stderr
    done = run_cli("wait", run_id, "--timeout", "30", redis_url=redis_url)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert [r["output"] for r in result["steps"][0]["tool_results"]] == [2.0, 51.0]
    (response,) = [
        e
        for e in events_until(run_id, redis_url, "finish")
        if e["type"] == "tool-approval-response"
    ]
    assert (response["original_input"], response["input"]) == (
        {"a": 500, "b": 1},
        {"a": 50, "b": 1},
    )


def test_client_tool_result_and_cancel_through_the_cli(
    redis_url: str, worker: WorkerProcess, tmp_path: Path
) -> None:
    spec = scripted(
        {"tool_calls": [{"name": "ask_user", "input": {"question": "color?"}, "id": "q"}]},
        {"text": "you like blue"},
        tools=[],
    )
    spec["tools"] = [
        {
            "type": "client",
            "name": "ask_user",
            "description": "Ask the user",
            "input_schema": {"type": "object", "properties": {"question": {"type": "string"}}},
        }
    ]
    run_id = submit(tmp_path, spec, redis_url)
    events_until(run_id, redis_url, "finish-step")
    posted = run_cli("tool-result", run_id, "q", "--output", '"blue"', redis_url=redis_url)
    assert posted.returncode == 0, posted.stderr
    done = run_cli("wait", run_id, "--timeout", "30", redis_url=redis_url)
    assert done.returncode == 0
    assert json.loads(done.stdout)["text"] == "you like blue"

    run_id = submit(tmp_path, {**spec, "id": "to-cancel"}, redis_url)
    events_until(run_id, redis_url, "finish-step")
    assert run_cli("cancel", run_id, redis_url=redis_url).stdout.strip() == "cancelled"
    done = run_cli("wait", run_id, redis_url=redis_url)
    assert done.returncode == 1
    assert json.loads(done.stdout)["status"] == "cancelled"
    assert events_until(run_id, redis_url, "abort")[-1]["type"] == "abort"


@pytest.mark.parametrize(
    ("spec", "names"),
    [
        ({"model": "scripted", "prompt": "x"}, "model"),
        ({"model": "openai:gpt", "prompt": "x", "max_steps": 0}, "max_steps"),
        ({"model": "openai:gpt", "prompt": "x", "tools": [{"type": "function"}]}, "tools.0"),
        (
            {"model": "openai:gpt", "prompt": "x", "tools": [{"type": "function", "name": "nope"}]},
            "nope",
        ),
        # ':' would let one run's id name another's keys (`k:events` against `k`).
        ({"model": "openai:gpt", "prompt": "x", "id": "k:events"}, "id"),
    ],
)
def test_a_bad_spec_is_refused_with_one_line_and_exit_2(
    redis_url: str, tmp_path: Path, spec: dict[str, Any], names: str
) -> None:
    done = run_cli("submit", write_spec(tmp_path, spec), redis_url=redis_url)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1
    assert names in done.stderr
    assert "Traceback" not in done.stderr
    assert redis.Redis.from_url(redis_url).keys("aq:run:*") == []


def test_a_taken_id_with_another_spec_is_refused_and_the_same_spec_is_a_no_op(
    redis_url: str, tmp_path: Path
) -> None:
    spec = {"model": {"provider": "scripted", "script": [{"text": "a"}]}, "prompt": "x"}
    spec["id"] = "once"
    assert submit(tmp_path, spec, redis_url) == "once"
    assert submit(tmp_path, spec, redis_url) == "once"  # the same spec again: a no-op
    other = run_cli("submit", write_spec(tmp_path, {**spec, "prompt": "y"}), redis_url=redis_url)
    assert other.returncode == 2
    assert len(other.stderr.strip().splitlines()) == 1
    assert "'once'" in other.stderr
    assert "Traceback" not in other.stderr
    stored = cast(bytes | None, redis.Redis.from_url(redis_url).hget("aq:run:{once}", "spec"))
    assert stored is not None
    assert json.loads(stored)["prompt"] == "x"


def test_agentq_run_embedded_quickstart() -> None:
    done = run_cli(
        "run", "examples/quickstart.json", "--tools", "examples/quickstart_tools.py", "--json"
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["status"] == "succeeded"
    assert "liftoff" in result["text"]
