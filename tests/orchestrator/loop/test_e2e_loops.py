"""End to end: prepare_step hooks run by another worker, fork of a run that used a
client tool, and `agentq replay --check`, with `agentq` CLI processes, `agentq worker`
processes and a real redis-server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_e2e_cli import events_until, submit
from tests.support.infra import TOOLS, WorkerProcess, run_cli, wait_ready
from tests.support.specs import calls, scripted

pytestmark = pytest.mark.e2e

HOOKS = "tests/support/loop_hooks.py"


@pytest.fixture
def split_workers(redis_url: str) -> Iterator[tuple[WorkerProcess, WorkerProcess]]:
    """A model worker without the hooks, and a tools worker that registered them."""
    model = WorkerProcess(redis_url, "--queue", "model")
    tools = WorkerProcess(redis_url, "--queue", "tools", "--tools", TOOLS, "--tools", HOOKS)
    wait_ready(model, tools)
    yield model, tools
    model.stop()
    tools.stop()


@pytest.fixture
def worker(redis_url: str) -> Iterator[WorkerProcess]:
    process = WorkerProcess(redis_url, "--tools", TOOLS)
    wait_ready(process)
    yield process
    process.stop()


def wait_json(run_id: str, redis_url: str) -> tuple[int, dict[str, Any]]:
    done = run_cli("wait", run_id, "--timeout", "30", redis_url=redis_url)
    return done.returncode, json.loads(done.stdout)


def test_a_hook_registered_on_another_worker_prepares_each_step(
    redis_url: str, split_workers: tuple[WorkerProcess, WorkerProcess], tmp_path: Path
) -> None:
    spec = scripted(calls(("add", {"a": 1, "b": 2})), {"text": "3"}, tools=["add"])
    run_id = submit(tmp_path, {**spec, "prepare_step": "numbered_system"}, redis_url)
    code, result = wait_json(run_id, redis_url)
    assert code == 0, result
    finishes = [e for e in events_until(run_id, redis_url, "finish") if e["type"] == "finish-step"]
    assert [f["prepared"]["overrides"]["system"] for f in finishes] == [
        "step 0 after 0 steps and 1 messages",
        "step 1 after 1 steps and 3 messages",
    ]
    assert all(f["prepared"]["hook"] == "numbered_system" for f in finishes)


def test_a_hook_that_raises_fails_the_step_with_its_error(
    redis_url: str, split_workers: tuple[WorkerProcess, WorkerProcess], tmp_path: Path
) -> None:
    run_id = submit(tmp_path, {**scripted({"text": "x"}), "prepare_step": "broken_hook"}, redis_url)
    code, result = wait_json(run_id, redis_url)
    assert code == 1
    assert result["error"] == {
        "type": "hook",
        "message": "prepare_step hook 'broken_hook' raised RuntimeError: the planner is offline",
        "step": 0,
        "status": None,
    }
    refused = run_cli(
        "submit",
        str(_write(tmp_path, {**scripted({"text": "x"}), "prepare_step": "nobody_has_it"})),
        redis_url=redis_url,
    )
    assert refused.returncode == 2
    assert "prepare_step 'nobody_has_it'" in refused.stderr


def test_stop_and_approval_hooks_registered_on_another_worker(
    redis_url: str, split_workers: tuple[WorkerProcess, WorkerProcess], tmp_path: Path
) -> None:
    """The model worker lacks them: each is asked through a `hook` job on the tools worker."""
    spec = scripted(
        {"text": "adding", **calls(("add", {"a": 1, "b": 2}), ("add", {"a": 100, "b": 1}))},
        {"text": "DONE", **calls(("add", {"a": 3, "b": 4}))},
        {"text": "never"},
        tools=[{"type": "function", "name": "add", "needs_approval": {"hook": "large_sums"}}],
        stop_when=[{"hook": "says_done"}],
    )
    run_id = submit(tmp_path, spec, redis_url)
    events = events_until(run_id, redis_url, "tool-approval-request")
    (request,) = [e for e in events if e["type"] == "tool-approval-request"]
    assert request["input"] == {"a": 100, "b": 1}
    approved = run_cli("approve", run_id, request["tool_call_id"], redis_url=redis_url)
    assert approved.returncode == 0, approved.stderr
    code, result = wait_json(run_id, redis_url)
    assert code == 0, result
    assert result["finish_reason"] == "stop_when: hook 'says_done'"
    assert [[r["output"] for r in s["tool_results"]] for s in result["steps"]] == [
        [3.0, 101.0],
        [7.0],
    ]


def _write(tmp_path: Path, spec: dict[str, Any]) -> Path:
    path = tmp_path / "other.json"
    path.write_text(json.dumps(spec))
    return path


def client_tool_run(tmp_path: Path, redis_url: str) -> str:
    spec = scripted(
        {"tool_calls": [{"name": "ask_user", "input": {"q": "color?"}, "id": "q"}]},
        calls(("add", {"a": 1, "b": 2})),
        {"text": "blue, and 3"},
        tools=["add", {"type": "client", "name": "ask_user"}],
        system="You are terse.",
    )
    run_id = submit(tmp_path, spec, redis_url)
    events_until(run_id, redis_url, "finish-step")
    posted = run_cli("tool-result", run_id, "q", "--output", '"blue"', redis_url=redis_url)
    assert posted.returncode == 0, posted.stderr
    code, result = wait_json(run_id, redis_url)
    assert code == 0, result
    return run_id


def test_fork_of_a_run_that_used_a_client_tool(
    redis_url: str, worker: WorkerProcess, tmp_path: Path
) -> None:
    original = client_tool_run(tmp_path, redis_url)
    forked = run_cli(
        "fork",
        original,
        "--at-step",
        "1",
        "--patch",
        '{"system": "You are kind."}',
        redis_url=redis_url,
    )
    assert forked.returncode == 0, forked.stderr
    new_id = forked.stdout.strip()
    assert new_id
    assert new_id != original
    code, result = wait_json(new_id, redis_url)
    assert code == 0, result
    assert result["origin"] == {"run_id": original, "step": 1}
    assert result["text"] == "blue, and 3"
    assert result["steps"][0]["tool_results"][0]["output"] == "blue"  # copied, not asked
    start = events_until(new_id, redis_url, "finish")[0]
    assert start["forked_from"] == {"run_id": original, "step": 1}

    too_far = run_cli("fork", original, "--at-step", "9", redis_url=redis_url)
    assert too_far.returncode == 2
    assert "--at-step must be between 0 and 2" in too_far.stderr


def test_replay_check_detects_a_changed_system_prompt(
    redis_url: str, worker: WorkerProcess, tmp_path: Path
) -> None:
    run_id = client_tool_run(tmp_path, redis_url)
    same = run_cli("replay", run_id, "--check", redis_url=redis_url)
    assert same.returncode == 0, same.stdout + same.stderr
    assert same.stdout == ""
    assert "3 steps replayed, same messages and path" in same.stderr

    changed = run_cli(
        "replay",
        run_id,
        "--check",
        "--patch",
        '{"system": "You are verbose."}',
        redis_url=redis_url,
    )
    assert changed.returncode == 1, changed.stdout + changed.stderr
    lines = changed.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == ["step 0", "step 1", "step 2"]
    assert all("system differs" in line for line in lines)
    report = json.loads(run_cli("replay", run_id, "--json", redis_url=redis_url).stdout)
    assert report["divergences"] == []


def test_context_is_summarized_by_a_job_of_its_own_across_worker_processes(
    redis_url: str, worker: WorkerProcess, tmp_path: Path
) -> None:
    spec = scripted(
        calls(("add", {"a": 1, "b": 2})),
        calls(("add", {"a": 3, "b": 4})),
        calls(("add", {"a": 5, "b": 6})),
        {"text": "21"},
        tools=["add"],
        context={
            "keep_last_messages": 2,
            "strategy": "summarize",
            "summary_model": {"provider": "scripted", "script": [{"text": "S1"}, {"text": "S2"}]},
        },
    )
    run_id = submit(tmp_path, spec, redis_url)
    code, result = wait_json(run_id, redis_url)
    assert code == 0, result
    events = events_until(run_id, redis_url, "finish")
    compacted = [e for e in events if e["type"] == "context-compacted"]
    assert [(e["step"], e["strategy"], e["summary"]) for e in compacted] == [
        (2, "summarize", "S1"),
        (3, "summarize", "S2"),
    ]
    assert all(e["after_messages"] < e["before_messages"] for e in compacted)
    assert len(result["messages"]) == 7  # the stored history stays whole (after the prompt)
    assert result["steps"][3]["prepared"]["compaction"]["summary_upto"] == 5
