"""Guardrails registered only on another worker process: the model worker lacks them,
so each is asked through a `hook` job on the tools worker (`agentq` CLI processes,
`agentq worker` processes, a real redis-server)."""

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

GUARDS = "tests/support/guardrail_hooks.py"


@pytest.fixture
def split_workers(redis_url: str) -> Iterator[None]:
    """A model worker without the guards, and a tools worker that registered them."""
    model = WorkerProcess(redis_url, "--queue", "model")
    tools = WorkerProcess(redis_url, "--queue", "tools", "--tools", TOOLS, "--tools", GUARDS)
    wait_ready(model, tools)
    yield
    model.stop()
    tools.stop()


def wait_json(run_id: str, redis_url: str) -> tuple[int, dict[str, Any]]:
    done = run_cli("wait", run_id, "--timeout", "30", redis_url=redis_url)
    return done.returncode, json.loads(done.stdout)


GUARDRAILS = {"input": ["no_secrets"], "output": ["no_refunds"]}


@pytest.mark.parametrize(
    ("prompt", "answer", "error"),
    [
        ("my key is sk-1", "fine", ("input", "no_secrets", "the input carries an API key", 0)),
        ("go", "you get a refund", ("output", "no_refunds", "promises a refund", 1)),
        ("go", "shipped", None),
    ],
)
def test_guards_registered_on_another_worker(
    redis_url: str,
    split_workers: None,
    tmp_path: Path,
    prompt: str,
    answer: str,
    error: tuple[str, str, str, int] | None,
) -> None:
    spec = scripted(
        calls(("add", {"a": 1, "b": 2})),
        {"text": answer},
        tools=["add"],
        prompt=prompt,
        guardrails=GUARDRAILS,
    )
    code, result = wait_json(submit(tmp_path, spec, redis_url), redis_url)
    if error is None:
        assert code == 0, result
        assert result["text"] == "shipped"
        return
    stage, name, reason, step = error
    assert code == 1, result
    assert result["error"] == {
        "type": "guardrail-tripped",
        "message": f"{stage} guardrail {name!r} tripped: {reason}",
        "step": step,
        "status": None,
    }


def test_tool_guards_registered_on_another_worker(
    redis_url: str, split_workers: None, tmp_path: Path
) -> None:
    """The tool_input guard is asked through a `hook` job (the model worker lacks it);
    the tool_output guard where the call ran."""
    spec = scripted(
        calls(("add", {"a": 1, "b": 2}), ("add", {"a": 100, "b": 1}), ("add", {"a": 6, "b": 7})),
        {"text": "done"},
        tools=["add"],
        guardrails={"tool_input": ["small_sums"], "tool_output": ["not_thirteen"]},
    )
    run_id = submit(tmp_path, spec, redis_url)
    code, result = wait_json(run_id, redis_url)
    assert code == 0, result
    assert [(r["output"], r["is_error"]) for r in result["steps"][0]["tool_results"]] == [
        (3.0, False),
        ("tool_input guardrail 'small_sums' tripped: too large", True),
        ("tool_output guardrail 'not_thirteen' tripped: an unlucky number", True),
    ]
    trips = [
        e for e in events_until(run_id, redis_url, "finish") if e["type"] == "guardrail-tripped"
    ]
    assert sorted((e["stage"], e["guardrail"], e["reason"]) for e in trips) == [
        ("tool_input", "small_sums", "too large"),
        ("tool_output", "not_thirteen", "an unlucky number"),
    ]
