"""Per-run budgets across real worker processes on a real redis-server: a step that goes
over a budget is recorded but its calls are not run, and the run fails `budget-exceeded`
naming the limit, or (`on_limit: "finish"`) takes one last step with tools disabled."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentq.orchestrator.client import Client
from agentq.orchestrator.core.errors import SpecError
from agentq.orchestrator.core.settings import Settings
from tests.support.infra import TOOLS, WorkerProcess, wait_ready
from tests.support.specs import scripted

pytestmark = pytest.mark.integration

PRICES = {"scripted:*": {"input": 1.0, "output": 2.0}}  # USD per million tokens
USAGE = {"input_tokens": 1000, "output_tokens": 300}  # 1,300 tokens, $0.0016 a step
ADD = {"name": "add", "input": {"a": 1, "b": 2}}


@pytest.fixture
def priced(redis_url: str, workers: list[WorkerProcess], tmp_path: Path) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps(PRICES))
    workers.append(WorkerProcess(redis_url, "--tools", TOOLS, env={"AGENTQ_PRICES": str(prices)}))
    wait_ready(*workers)


def calling(*calls: dict[str, Any]) -> dict[str, Any]:
    return {"tool_calls": list(calls), "usage": USAGE}


async def run(redis_url: str, spec: dict[str, Any]) -> tuple[Any, list[dict[str, Any]]]:
    async with Client(redis_url) as client:
        run_id = await client.runs.submit(spec)
        result = await client.runs.wait(run_id, timeout_s=60)
        events = [e.model_dump() async for e in client.runs.events(run_id)]
    return result, events


def ran(events: list[dict[str, Any]]) -> list[int]:
    """The steps whose calls a worker took up (a call answered at once has no such event)."""
    return [e["step"] for e in events if e["type"] == "tool-running"]


async def test_a_step_over_the_token_budget_fails_the_run_and_its_calls_never_run(
    redis_url: str, priced: None
) -> None:
    spec = scripted(
        calling(ADD), calling(ADD), calling(ADD), tools=["add"], limits={"max_total_tokens": 2000}
    )
    result, events = await run(redis_url, spec)
    assert result.status == "failed"
    assert result.error is not None
    assert (result.error.kind, result.error.limit) == ("budget-exceeded", "max_total_tokens")
    assert "max_total_tokens 2000 (limits.max_total_tokens) reached, 2600 spent" in (
        result.error.message
    )
    assert result.usage.total_tokens == 2600  # the step that went over is counted
    (refused,) = result.steps[1].tool_results
    assert (refused.is_error, refused.error_kind) == (True, "cancelled")
    assert ran(events) == [0]  # step 1's call never reached a worker


async def test_more_tool_calls_than_are_left_are_not_run(redis_url: str, priced: None) -> None:
    spec = scripted(calling(ADD, ADD), tools=["add"], limits={"max_tool_calls": 1})
    result, events = await run(redis_url, spec)
    assert (result.status, result.error and result.error.limit) == ("failed", "max_tool_calls")
    assert ran(events) == []


async def test_on_limit_finish_gives_one_last_step_without_tools(
    redis_url: str, priced: None
) -> None:
    limits = {"max_cost_usd": 0.002, "on_limit": "finish"}
    # Step 1 takes the cost to $0.0032, over $0.002: its call is not run, and step 2 is
    # the last, offered no tool (a call it makes anyway is not run either).
    spec = scripted(calling(ADD), calling(ADD), calling(ADD), tools=["add"], limits=limits)
    result, events = await run(redis_url, spec)
    assert result.status == "succeeded", result.error
    assert len(result.steps) == 3
    assert result.usage.cost_usd == pytest.approx(0.0048)
    assert ran(events) == [0]
    assert all(r.is_error for step in result.steps[1:] for r in step.tool_results)


async def test_a_spec_over_the_deployments_ceiling_is_refused_at_submit(redis_url: str) -> None:
    spec = scripted({"text": "hi"}, limits={"max_cost_usd": 5})
    async with Client(redis_url, settings=Settings(max_cost_usd=1.0)) as client:
        with pytest.raises(SpecError, match=r"limits\.max_cost_usd: 5\.0 is above"):
            await client.runs.submit(spec)
