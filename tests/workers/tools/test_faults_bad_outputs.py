"""Fault: tools return what no JSON store takes as it is (non-UTF-8 bytes, nesting
250 deep, 50 MB, NaN, objects). Each becomes a tool error the model sees or a
sanitised, capped result; the run goes on, and every run stays readable through
the CLI and the API. Real redis-server, a real `agentq worker` process."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any, cast

import pytest
import redis

from agentq.orchestrator.client import Client
from tests.support.infra import RedisServer, WorkerProcess, run_cli

pytestmark = pytest.mark.faults

TOOLS = "tests/support/bad_tools.py"
LIMIT = 1_000_000


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    started = RedisServer()
    yield started
    started.stop()


@pytest.fixture(scope="module")
def worker(server: RedisServer) -> Iterator[WorkerProcess]:
    process = WorkerProcess(server.url, "--tools", TOOLS)
    deadline = time.monotonic() + 30
    while "agentq worker" not in process.log():
        assert process.proc.poll() is None, process.log()
        assert time.monotonic() < deadline, process.log()
        time.sleep(0.05)
    yield process
    process.stop()


def spec(tool: str, **extra: Any) -> dict[str, Any]:
    return {
        "model": {
            "provider": "scripted",
            "script": [{"tool_calls": [{"name": tool, "input": {}}]}, {"text": "went on"}],
        },
        "prompt": "go",
        "tools": [{"type": "function", "name": tool, **extra}],
    }


async def run_to_end(server: RedisServer, tool: str, **extra: Any) -> tuple[str, Any]:
    async with Client(server.url) as client:
        run_id = await client.runs.submit(spec(tool, **extra))
        result = await client.runs.wait(run_id, timeout_s=120)
    assert result.status == "succeeded", result.error
    assert result.text == "went on"
    [tool_result] = result.steps[0].tool_results
    # The model saw the same thing that was stored.
    sent = [m for m in result.messages if m.role == "tool"]
    assert sent, result.messages
    return run_id, tool_result


def readable_by_the_cli(server: RedisServer, run_id: str) -> dict[str, Any]:
    done = run_cli("wait", run_id, "--timeout", "60", redis_url=server.url)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    events = run_cli("events", run_id, redis_url=server.url)
    assert events.returncode == 0, events.stderr
    for line in events.stdout.splitlines():
        json.loads(line)
        assert len(line.encode()) < LIMIT + 10_000  # no full 50 MB output in an event
    parsed: dict[str, Any] = json.loads(done.stdout)
    return parsed


@pytest.mark.parametrize(
    ("tool", "says"), [("raw_bytes", "not UTF-8 text"), ("deep", "nests deeper than")]
)
async def test_outputs_without_a_json_form_are_tool_errors(
    server: RedisServer, worker: WorkerProcess, tool: str, says: str
) -> None:
    run_id, result = await run_to_end(server, tool)
    assert result.is_error
    assert says in result.output
    readable_by_the_cli(server, run_id)


async def test_nan_and_objects_are_sanitised(server: RedisServer, worker: WorkerProcess) -> None:
    run_id, result = await run_to_end(server, "not_a_number")
    assert result.output == {"nan": "NaN", "inf": "Infinity", "list": ["-Infinity"]}
    run_id2, result2 = await run_to_end(server, "objects")
    assert result2.output == {"gadget": "Gadget()", "set": [1], "tuple_key": {"(1, 2)": "a"}}
    readable_by_the_cli(server, run_id)
    readable_by_the_cli(server, run_id2)


async def test_bad_progress_values_do_not_fail_the_call(
    server: RedisServer, worker: WorkerProcess
) -> None:
    _, result = await run_to_end(server, "bad_progress")
    assert result.output == "ok"
    assert not result.is_error


async def test_a_50_mb_output_is_capped_and_kept_out_of_redis(
    server: RedisServer, worker: WorkerProcess
) -> None:
    run_id, result = await run_to_end(server, "huge")
    assert not result.is_error
    assert "truncated by agentq: the output was 50,000,000 bytes" in result.output
    assert len(result.output.encode()) <= LIMIT
    stored = redis.Redis.from_url(server.url)
    sizes = {
        k: int(cast(int, stored.memory_usage(k)) or 0) for k in stored.scan_iter(f"*{run_id}*")
    }
    # The capped result, kept in the step, the model's history and one event
    # (a 50 MB output used to add 176 MB to Redis).
    assert sum(sizes.values()) < 6 * LIMIT, sizes
    cli = readable_by_the_cli(server, run_id)
    assert cli["status"] == "succeeded"


async def test_a_tool_spec_sets_its_own_cap(server: RedisServer, worker: WorkerProcess) -> None:
    _, result = await run_to_end(server, "huge", max_output_bytes=300)
    assert len(result.output.encode()) <= 300
    assert "the limit is 300" in result.output
